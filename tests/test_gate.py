"""The gate never changes what is reported: every rule's examples (bad, good and fixed) and every
fixture give the same findings with and without it. And it does drop rules where it should."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from trainlint import gate
from trainlint.engine import _rules_for, lint_source
from trainlint.gate import facts, gated
from trainlint.model import roles
from trainlint.reader.project import Project
from trainlint.rules import registry
from trainlint.settings import Settings, resolve_selection

ALL = Settings(select=resolve_selection(["ALL"], [], []))
FIXTURES = Path(__file__).parent / "fixtures"


def _sources():
    for code, rule in registry().items():
        for number, example in enumerate(rule.examples):
            kind = "bad" if example.is_bad else "good"
            yield pytest.param(example.code, id=f"{code}-{kind}-{number}")
            if example.fixed is not None:
                yield pytest.param(example.fixed, id=f"{code}-{kind}-{number}-fixed")
    for path in sorted(FIXTURES.rglob("*.py")):
        yield pytest.param(path.read_text(), id=str(path.relative_to(FIXTURES)))


def _findings(source: str, gate: bool) -> list[tuple]:
    result = lint_source(source, "example.py", ALL, gate=gate)
    assert result.errors == []
    return [(f.code, f.line, f.column, f.end_line, f.end_column, f.message, f.fix) for f in result.findings]


@pytest.mark.parametrize("source", list(_sources()))
def test_same_findings_with_and_without_the_gate(source):
    assert _findings(source, gate=True) == _findings(source, gate=False)


def _triggered(source: str) -> list:
    """The rules the text pre-filter lets through, all selected (a lone file: nothing imported)."""
    own, via_imports = _rules_for(source, frozenset(registry()))
    assert via_imports == []
    return own


def _gated_codes(source: str) -> set[str]:
    return {rule.code for rule in gated(_triggered(source), ast.parse(source))}


def test_the_gate_drops_rules_on_good_examples():
    """Not a gate that lets everything through: on the good examples (look-alikes of the bugs, so
    mostly full of the right words), the gate drops rules that passed the text pre-filter, and
    does so for many rules (the pre-filter's patterns already drop some of the rest)."""
    dropped_codes = set()
    for rule in registry().values():
        for example in rule.good_examples():
            triggered = {rule.code for rule in _triggered(example.code)}
            passed = _gated_codes(example.code)
            assert passed <= triggered
            dropped_codes |= triggered - passed
    assert len(dropped_codes) >= 6, sorted(dropped_codes)


def test_words_in_comments_docstrings_and_strings_do_not_pass():
    source = '''"""Loads checkpoints with torch.load and torch.save; see backward()."""
import torch

# torch.load(path) would be unsafe here
message = "call torch.save(state, path) and then optimizer.step()"
'''
    assert _gated_codes(source) == set()


def test_references_follow_imports():
    found = facts('''
import torch as t
from torch import save as persist
from torch.serialization import load
import pickle
from .utils import helper
t.load(p)
persist(x, p)
load(p)
helper.run()
''')
    assert {"t.load", "torch.load", "persist", "torch.save", "load", "torch.serialization.load",
            "helper.run", ".utils.helper.run"} <= found.references


def test_string_annotations_are_names():
    found = facts('def run(loader: "DataLoader", opt: "torch.optim.Optimizer"): pass\n')
    assert {"DataLoader", "torch", "optim", "Optimizer", "loader", "opt", "run"} <= found.names


@pytest.mark.parametrize("source, code", [
    ("import torch as t\nstate = t.load('ckpt.pt', weights_only=False)\n", "TL401"),
    ("from torch import load\nstate = load('ckpt.pt', weights_only=False)\n", "TL401"),
    ("import torch\n\n\ndef f(p):\n    return torch.load(p, weights_only=False)\n", "TL401"),
])
def test_aliased_calls_pass(source, code):
    assert code in _gated_codes(source)
    assert code in {f.code for f in lint_source(source, "x.py", ALL).findings}


def test_a_syntax_error_is_still_reported():
    result = lint_source("import torch\ntorch.load(\n", "x.py", ALL)
    assert [f.code for f in result.findings] == ["TL000"]


@pytest.mark.parametrize("project", sorted(p.name for p in (FIXTURES / "projects").iterdir() if p.is_dir()))
def test_same_findings_with_and_without_the_gate_in_a_project(project):
    """Each file of a fixture project, checked with its project (imports followed, callers read)."""
    paths = [str(p) for p in sorted((FIXTURES / "projects" / project).rglob("*.py"))]
    index = Project.for_paths(paths)
    for path in paths:
        source = Path(path).read_bytes()
        found = [lint_source(source, path, ALL, index, gate=use) for use in (True, False)]
        assert found[0].errors == found[1].errors == []
        assert found[0].findings == found[1].findings, path


def test_the_gate_reads_a_loader_name_as_the_role_model_does():
    assert gate.LOADER_NAME.pattern == roles.LOADER_NAME.pattern
    assert gate.LOADER_NAME.flags == roles.LOADER_NAME.flags


@pytest.mark.parametrize("source, iterates", [
    ("for batch in train_loader:\n    pass\n", True),
    ("for i, batch in enumerate(tqdm(self.val_dataloader())):\n    pass\n", True),
    ("batches = DataLoader(ds)\nfor b in batches:\n    pass\n", True),
    ("from torch.utils.data import DataLoader as Feeder\nfor b in Feeder(ds):\n    pass\n", True),
    ("def make(ds):\n    return DataLoader(ds)\n\nfor b in make(ds):\n    pass\n", True),
    ("def run(data: DataLoader):\n    for b in data:\n        pass\n", True),
    ("class T:\n    def __init__(self):\n        self.data = make_loader()\n"
     "    def run(self):\n        for b in self.data:\n            pass\n", True),
    ("with open_loader(p) as stream:\n    for b in stream:\n        pass\n", True),
    # a loader's name elsewhere, but no loop over anything bound from one
    ("dataloader_idx = 0\nfor layer in self.layers:\n    pass\n", False),
    ("def set_loader_cfg(cfg):\n    pass\n\nfor key in cfg:\n    pass\n", False),
    ("loader = DataLoader(ds)\nx = [b for b in loader]\n", False),
])
def test_a_loop_over_a_loader(source, iterates):
    assert facts(source).iterates_loader() is iterates


@pytest.mark.parametrize("source", list(_sources()))
def test_a_gate_implies_the_rules_imported_gate(source):
    """A rule run because of an imported file is gated by `imported_gate`, which must let through
    every file its own gate does (the file may hold what the helper would)."""
    found = facts(source)
    for rule in registry().values():
        if rule.gate is not None and rule.imported_gate is not None and rule.gate(found):
            assert rule.imported_gate(found), rule.code


def test_the_text_prefilter_passes_every_file_a_rule_reports_in():
    """The triggers (words and patterns such as `reference_text`) are necessary conditions too:
    every rule's bad examples, and every fixture file where it reports, match its triggers."""
    checked = 0
    sources = [example.code for rule in registry().values() for example in rule.examples]
    sources += [path.read_text() for path in sorted(FIXTURES.rglob("*.py"))]
    for source in sources:
        for finding in lint_source(source, "example.py", ALL).findings:
            rule = registry().get(finding.code)
            if rule is not None and rule.triggers:
                assert rule.may_match(source), (finding.code, source[:200])
                checked += 1
    assert checked > 200


@pytest.mark.parametrize("source, matches", [
    ("torch.load(p)", True),
    ("state = t . load(x)", True),
    ("from torch import load as read", True),
    ("from torch import (\n    save,\n    load,\n)", True),
    ("from torch import save, \\\n    load", True),
    ("model.load_state_dict(state)", False),
    ("download(url)", False),
    ("# load the weights", False),
])
def test_reference_text(source, matches):
    assert (gate.reference_text("torch.load", "torch.serialization.load").search(source) is not None) is matches


def test_a_file_the_gate_leaves_no_rule_takes_the_whole_guard():
    """A chain deeper than LibCST may parse is the same TL000 with and without the gate, also where
    the text pre-filter passes rules that the gate then drops (a name in a string)."""
    from trainlint.guard import MAX_DEPTH, TOO_DEEP

    source = 'import torch\nNOTE = "torch.load"\nx = a' + ".b" * (MAX_DEPTH + 100) + "\n"
    assert _triggered(source) and not _gated_codes(source)
    found = [lint_source(source, "deep.py", ALL, gate=use).findings for use in (True, False)]
    assert found[0] == found[1]
    assert [(f.code, f.message) for f in found[0]] == [("TL000", TOO_DEEP)]
