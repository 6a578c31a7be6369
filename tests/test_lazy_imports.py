"""A run imports only what it needs (issue 38): the rules' table stands in for the rule classes
until the gate has decided, and it is the classes' own (it cannot drift); a file no rule can fire
in never imports LibCST or a rule; the modules of the rules that can fire are the only ones
imported; and the findings are the same as with every rule imported first."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainlint.engine import _rules_for
from trainlint.gate import Deferred, gated
from trainlint.rule import DOCS_URL
from trainlint.rules import heads, registry
from trainlint.settings import Settings

ROOT = Path(__file__).resolve().parent.parent

PLAIN = '''"""A module with no training code: configuration parsing."""
import argparse
import json
from dataclasses import dataclass


@dataclass
class Options:
    name: str
    steps: int = 10


def parse(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="run")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args(argv)
    return Options(args.name, args.steps)


def dump(options, path):
    with open(path, "w") as handle:
        json.dump(dataclasses.asdict(options), handle)
'''

LOADS = '''import torch


def restore(path):
    return torch.load(path, weights_only=False)
'''

# a run of the command line in a fresh interpreter; prints the modules it imported
_RUN = """
import json, sys
from trainlint.cli import main
sys.argv = ["trainlint", *sys.argv[1:]]
try:
    main()
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "modules": sorted(m for m in sys.modules
      if m.split(".")[0] == "libcst" or m.startswith(("trainlint.rules.tl", "trainlint.model")))}))
"""


def _run(*args: str, cwd: Path, env: dict | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", _RUN, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_table_is_written_from_the_rule_classes():
    """`rules/_table.py` is what scripts/update_rule_table.py writes from the classes today."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "update_rule_table.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _same_gate(head_gate, class_gate) -> bool:
    """Equal conditions; a deferred function stands for the class's function of that name."""
    if isinstance(head_gate, Deferred):
        return (head_gate.module, head_gate.qualname) == (class_gate.__module__, class_gate.__qualname__)
    if dataclasses.is_dataclass(head_gate) and type(head_gate) is type(class_gate):
        return all(_same_gate(getattr(head_gate, f.name), getattr(class_gate, f.name))
                   for f in dataclasses.fields(head_gate))
    if isinstance(head_gate, tuple) and isinstance(class_gate, tuple) and len(head_gate) == len(class_gate):
        return all(_same_gate(a, b) for a, b in zip(head_gate, class_gate))
    return head_gate == class_gate


def test_every_head_is_its_rule_class():
    classes = registry()
    assert list(heads()) == list(classes)
    for code, head in heads().items():
        rule = classes[code]
        assert (head.name, head.severity, head.enabled_by_default, head.triggers, head.imported_triggers) == \
            (rule.name, rule.severity, rule.enabled_by_default, rule.triggers, rule.imported_triggers), code
        assert head.family == code[:3] and rule.__module__ == f"trainlint.rules.{head.module}"
        assert _same_gate(head.gate, rule.gate), code
        assert _same_gate(head.imported_gate, rule.imported_gate), code
        for source in ("", "loss.backward()\nopt.step()\nsched.step()\n", "torch.load(p)\n", "clip_grad_norm_"):
            assert head.may_match(source) == rule.may_match(source), (code, source)


def test_a_deferred_test_answers_as_its_function():
    from trainlint.model.modes import is_evaluation_name

    deferred = Deferred("trainlint.model.modes", "is_evaluation_name")
    for name in ("evaluate", "val_epoch", "test_evaluate", "train", "validate_model"):
        assert deferred(name) == is_evaluation_name(name)


def test_docs_urls_are_the_rules_own():
    from trainlint.reporters.catalog import catalog, docs_urls

    assert docs_urls() == {info.code: info.docs_url for info in catalog()}
    assert all(url == DOCS_URL.format(code=code.lower()) for code, url in docs_urls().items())


def test_positions_split_lines_as_libcst_does():
    from libcst.metadata.position_provider import NEWLINE_RE as LIBCST_NEWLINE

    from trainlint.positions import NEWLINE_RE

    assert NEWLINE_RE.pattern == LIBCST_NEWLINE.pattern and NEWLINE_RE.flags == LIBCST_NEWLINE.flags


def test_a_file_with_no_training_code_imports_neither_libcst_nor_a_rule(tmp_path):
    (tmp_path / "config.py").write_text(PLAIN)
    done = _run("check", "config.py", cwd=tmp_path)  # the default: the result cache on
    assert done == {"code": 0, "modules": []}
    # selecting by name and by prefix is decided from the table too
    done = _run("check", "--no-cache", "--select", "unsafe-torch-load,TL1", "config.py", cwd=tmp_path)
    assert done == {"code": 0, "modules": []}


def test_only_the_rules_that_can_fire_are_imported(tmp_path):
    (tmp_path / "restore.py").write_text(LOADS)
    done = _run("check", "--no-cache", "restore.py", cwd=tmp_path)
    assert done["code"] == 1  # TL401
    rules = [m for m in done["modules"] if m.startswith("trainlint.rules.")]
    passed = gated(_rules_for(LOADS, Settings().select)[0], ast.parse(LOADS))  # the gate's choice
    assert rules == sorted(f"trainlint.rules.{head.module}" for head in passed)
    assert "trainlint.rules.tl401_unsafe_torch_load" in rules and len(rules) <= 3
    assert "libcst" in done["modules"]


def test_eager_imports_every_rule_first(tmp_path):
    """TRAINLINT_EAGER_RULES=1, the differential test's reference, does import every rule."""
    (tmp_path / "config.py").write_text(PLAIN)
    done = _run("check", "--no-cache", "config.py", cwd=tmp_path, env={"TRAINLINT_EAGER_RULES": "1"})
    assert len([m for m in done["modules"] if m.startswith("trainlint.rules.")]) == len(heads())


def _every_file() -> list[str]:
    paths = sorted((ROOT / "tests" / "fixtures").rglob("*.py")) + sorted((ROOT / "examples").rglob("*.py"))
    return [str(path.relative_to(ROOT)) for path in paths]


def _json_check(paths: list[str], eager: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "TRAINLINT_EAGER_RULES")}
    if eager:
        env["TRAINLINT_EAGER_RULES"] = "1"
    proc = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--select", "ALL",
                           "--format", "json", "--exit-zero", *paths],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_same_findings_with_lazy_and_eager_rule_imports():
    """Every fixture and example (the projects checked as projects): one run that imports each rule
    when a file first needs it, one that imports every rule first."""
    paths = _every_file()
    lazy = _json_check(paths, eager=False)
    assert json.loads(lazy), "no findings at all: not a comparison"
    assert lazy == _json_check(paths, eager=True)


@pytest.mark.slow
@pytest.mark.parametrize("path", _every_file())
def test_the_same_findings_for_each_file_checked_alone_lazy_and_eager(path):
    """Each file in a fresh process: the lazy run imports only what that file's rules need."""
    assert _json_check([path], eager=False) == _json_check([path], eager=True)


def test_a_text_run_imports_neither_the_other_reporters_nor_importlib_resources(tmp_path):
    """A one-file check that prints text imports the text reporter only, and reads the framework
    models without importlib.resources (zipfile, tempfile, shutil and the compressors with it)."""
    (tmp_path / "restore.py").write_text(LOADS)
    probe = _RUN.replace('m.split(".")[0] == "libcst" or m.startswith(("trainlint.rules.tl", "trainlint.model"))',
                         'm.startswith(("trainlint.reporters.", "importlib.resources", "zipfile"))')
    proc = subprocess.run([sys.executable, "-c", probe, "check", "--no-cache", "restore.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    done = json.loads(proc.stdout.splitlines()[-1])
    assert done["code"] == 1  # TL401: the framework models were read, the findings rendered
    assert done["modules"] == ["trainlint.reporters.catalog", "trainlint.reporters.options",
                               "trainlint.reporters.statistics", "trainlint.reporters.text"]


def test_every_reporter_is_found_by_its_format():
    from trainlint.reporters import REPORTERS, render

    assert list(REPORTERS) == ["text", "json", "github", "sarif", "lsp"] and "xml" not in REPORTERS
    assert all(callable(REPORTERS[fmt]) for fmt in REPORTERS)
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        render("xml", [])


def _dedented(code: str) -> str:
    import textwrap

    return textwrap.dedent(code).strip("\n") + "\n"


def test_examples_are_cleaned_as_textwrap_dedent_cleans_them():
    """rule._clean's loop for space-indented code gives dedent's result: every string literal
    handed to bad()/good() in the rules, and seeded random texts of spaces, tabs, text and line ends."""
    import random

    from trainlint.rule import _clean

    texts = []
    for path in sorted((ROOT / "rules").glob("tl*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("bad", "good"):
                texts += [arg.value for arg in [*node.args, *(k.value for k in node.keywords)]
                          if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    assert len(texts) > 300
    generator = random.Random(38)
    texts += ["".join(generator.choice(["  ", " ", "\t", "x", "\n", "\n", "\r", "y z"])
                      for _ in range(generator.randrange(0, 30))) for _ in range(5000)]
    assert [_clean(text) for text in texts] == [_dedented(text) for text in texts]
