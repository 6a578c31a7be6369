"""The gate never changes what is reported: every rule's examples (bad, good and fixed) and every
fixture give the same findings with and without it. And it does drop rules where it should."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from trainlint.engine import _rules_for, lint_source
from trainlint.gate import facts, gated
from trainlint.rule import registry
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
    mostly full of the right words), some of the rules that pass the text pre-filter are dropped."""
    dropped = kept = 0
    for rule in registry().values():
        for example in rule.good_examples():
            triggered = {rule.code for rule in _triggered(example.code)}
            passed = _gated_codes(example.code)
            assert passed <= triggered
            dropped += len(triggered - passed)
            kept += len(passed)
    assert dropped > (dropped + kept) / 10, (dropped, kept)


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
