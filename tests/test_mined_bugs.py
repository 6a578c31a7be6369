"""Real bug-fix commits mined from public histories (issues 24 and 25): tests/realworld/mined_bugs.json.

The data's shape is checked always. The scoring (`scripts/mined_bugs.py score`) needs the two versions
of each file exported outside the project (`scripts/mined_bugs.py export MIRRORS`): it runs when
TRAINLINT_MINED names their directory or /work/mined holds them, and is skipped elsewhere.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mined_bugs.py"
_spec = importlib.util.spec_from_file_location("trainlint_mined_bugs", SCRIPT)
mined = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = mined
_spec.loader.exec_module(mined)

GOOD = {"repository": "o/n", "buggy": "a" * 40, "fix": "b" * 40, "path": "pkg/train.py", "line": 12,
        "class": "TL104", "why": "zero_grad runs on every micro-batch of the window."}


def test_the_data_has_its_schema():
    entries = mined.load()
    assert mined.validate(entries) == []
    assert len(entries) >= 40
    assert len(Counter(e["class"] for e in entries)) >= 10  # breadth across the catalogue


def test_every_rule_of_a_bug_family_is_a_class_of_the_data():
    from trainlint.rules import registry
    families = {code for code in registry() if not code.startswith("TL0")}  # TL0xx: the file itself
    assert families <= mined.CATALOGUE


def test_a_good_entry_passes():
    assert mined.validate([GOOD]) == []


@pytest.mark.parametrize("bad,problem", [
    ({"buggy": "abc"}, "buggy"),
    ({"fix": "A" * 40}, "fix"),
    ({"buggy": "b" * 40}, "same"),
    ({"path": "/abs/train.py"}, "path"),
    ({"path": "train.txt"}, "path"),
    ({"line": 0}, "line"),
    ({"line": True}, "line"),
    ({"class": "TL999"}, "class"),
    ({"why": "bad"}, "why"),
    ({"repository": "just-a-name"}, "repository"),
])
def test_validate_reports_a_bad_entry(bad, problem):
    problems = mined.validate([{**GOOD, **bad}])
    assert len(problems) == 1 and problem in problems[0], problems


def test_validate_reports_missing_and_repeated_entries():
    partial = {k: v for k, v in GOOD.items() if k != "why"}
    assert "missing ['why']" in mined.validate([partial])[0]
    assert "twice" in mined.validate([GOOD, dict(GOOD)])[0]
    assert mined.validate({"not": "a list"}) == ["the data must be a JSON list"]


def test_corresponding_line_follows_the_diff():
    before = ["a", "b", "bug", "c", "d"]
    after = ["a", "new", "b", "fixed", "more", "c", "d"]
    assert mined.corresponding_line(before, after, 1) == 1
    assert mined.corresponding_line(before, after, 2) == 3   # shifted by an insertion above
    assert mined.corresponding_line(before, after, 3) == 4   # a replaced line maps to its replacement
    assert mined.corresponding_line(before, after, 5) == 7


def _mined_dir() -> Path | None:
    given = os.environ.get("TRAINLINT_MINED")
    directory = Path(given) if given else mined.DEFAULT_OUT
    return directory if directory.is_dir() and any(directory.glob("*+*")) else None


@pytest.mark.skipif(_mined_dir() is None, reason="the mined files are not exported here")
def test_scoring_runs_on_every_exported_fix():
    out = _mined_dir()
    entries = mined.load()
    present = [e for e in entries if (mined.version_dir(out, e, "buggy") / e["path"]).is_file()]
    if len(present) < len(entries):
        pytest.skip(f"only {len(present)} of {len(entries)} fixes are exported in {out}")
    for e in entries:  # the recorded line is inside the buggy file, and the fix changed the file
        buggy = (mined.version_dir(out, e, "buggy") / e["path"]).read_text(encoding="utf-8", errors="replace")
        fixed = (mined.version_dir(out, e, "fixed") / e["path"]).read_text(encoding="utf-8", errors="replace")
        assert e["line"] <= len(buggy.splitlines()), e
        assert buggy != fixed, e
    results = mined.score(entries, out)
    assert len(results) == len(entries)
    summary = mined.summary(results)
    assert summary["overall"]["total"] == len(entries)
    for r in results:
        for mode in ("alone", "project"):
            assert r[mode]["found"] == (bool(r[mode]["buggy"]) and not r[mode]["fixed"])
            assert all(abs(n - r["entry"]["line"]) <= mined.SLACK for n in r[mode]["buggy"])
