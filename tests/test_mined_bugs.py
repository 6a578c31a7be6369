"""Real bug-fix commits mined from public histories (issues 24 and 25): tests/realworld/mined_bugs.json.

The data's shape is checked always. The scoring (`scripts/mined_bugs.py score`) needs the two versions
of each file exported outside the project (`scripts/mined_bugs.py export MIRRORS`): it runs when
TRAINLINT_MINED names their directory or /work/mined holds them, and is skipped elsewhere.
Whole-repository scoring (issue 36, `export-whole`/`score-whole`) is tested end to end on a git
repository of two commits made here, with the real trainlint subprocess.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
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


# -- whole repositories (issue 36) ----------------------------------------------------------------
BUGGY_SCRIPT = """\
import torch
from torch.utils.data import DataLoader

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
accumulation = 4

for epoch in range(3):
    scaler = torch.amp.GradScaler()
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y) / accumulation
        scaler.scale(loss).backward()
        if (step + 1) % accumulation == 0:
            scaler.step(optimizer)
            scaler.update()
"""
# the fix: the scaler made once, the gradients cleared once per update (lines move: the diff maps them)
FIXED_SCRIPT = """\
import torch
from torch.utils.data import DataLoader

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
accumulation = 4
scaler = torch.amp.GradScaler()  # made once: its scale carries over from epoch to epoch

for epoch in range(3):
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y) / accumulation
        scaler.scale(loss).backward()
        if (step + 1) % accumulation == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
"""


def _run(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(args, cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def mirrored(tmp_path):
    """A repository of two commits (a buggy training script, then its fix) mirrored as `fetch` leaves
    it (MIRRORS/o+n/repo, a bare git directory), and the cases mined from it."""
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    _run(src, "git", "init", "-q")
    (src / "train.py").write_text(BUGGY_SCRIPT)
    (src / "pkg" / "helpers.py").write_text("def helper():\n    return 1\n")
    (src / "pkg" / "lost.py").write_text("LOST = True\n")
    (src / "pyproject.toml").write_text('[project]\nname = "n"\ndependencies = ["torch>=2.4"]\n')
    (src / "requirements-dev.txt").write_text("pytest\n")
    (src / "README.md").write_text("# not exported\n")
    _run(src, "git", "add", ".")
    _run(src, "git", "commit", "-qm", "buggy")
    buggy = _run(src, "git", "rev-parse", "HEAD")
    (src / "train.py").write_text(FIXED_SCRIPT)
    _run(src, "git", "commit", "-qam", "fix")
    fix = _run(src, "git", "rev-parse", "HEAD")
    mirrors = tmp_path / "mirrors"
    _run(tmp_path, "git", "clone", "-q", "--bare", str(src), str(mirrors / "o+n" / "repo"))
    # a snapshot may leave a blob out: lose pkg/lost.py's (a loose object of the local clone)
    lost = _run(src, "git", "rev-parse", f"{buggy}:pkg/lost.py")
    (mirrors / "o+n" / "repo" / "objects" / lost[:2] / lost[2:]).unlink()
    case = {"repository": "o/n", "buggy": buggy, "fix": fix, "path": "train.py"}
    cases = [
        {**case, "line": 12, "class": "TL104", "why": "zero_grad runs on every micro-batch of the window.",
         "capability": "order", "framework": "plain", "half": "tune"},
        # TL205 is off by default: scored with --extend-select TL205
        {**case, "line": 10, "class": "TL205", "why": "the GradScaler is made again in every epoch.",
         "capability": "loops", "framework": "plain", "half": "tune"},
        # the fix left the unequal micro-batch weighting: found, but still reported when fixed
        {**case, "line": 13, "class": "TL103", "why": "a mean loss divided by K with a short last batch.",
         "capability": "values", "half": "test"},
        # not reported at all: missed
        {**case, "line": 11, "class": "TL801", "why": "the loader never reshuffles between the epochs.",
         "capability": "values", "half": "test"},
    ]
    data = tmp_path / "cases.json"
    data.write_text(json.dumps(cases))
    return mirrors, data, buggy, fix


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_export_whole_and_score_whole_end_to_end(mirrored, tmp_path):
    mirrors, data, buggy, fix = mirrored
    out = tmp_path / "out"
    done = _script("export-whole", str(mirrors), "--out", str(out), "--data", str(data))
    assert done.returncode == 0, done.stderr
    assert "1 missing blobs skipped" in done.stdout
    for commit in (buggy, fix):
        root = mined.whole_dir(out, "o/n", commit)
        kept = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name != ".exported")
        assert kept == ["pkg/helpers.py", "pyproject.toml", "requirements-dev.txt", "train.py"]
    assert (mined.whole_dir(out, "o/n", fix) / "train.py").read_text() == FIXED_SCRIPT

    done = _script("score-whole", "--out", str(out), "--data", str(data), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    by_class = {r["entry"]["class"]: r for r in report["results"]}
    assert by_class["TL104"]["found"] and by_class["TL104"]["quiet"] and by_class["TL104"]["buggy"] == [12]
    assert by_class["TL205"]["found"] and by_class["TL205"]["quiet"]
    assert by_class["TL103"]["found"] and by_class["TL103"]["quiet"] is False
    assert by_class["TL103"]["fixed_line"] == 12 and by_class["TL103"]["fixed"] == [12]
    assert not by_class["TL801"]["found"]
    assert report["overall"] == {"total": 4, "found": 3, "found_quiet": 2, "error": 0}
    assert report["fixed_quiet"] == {"quiet": 2, "found": 3}
    assert report["per_capability"]["values"] == {"total": 2, "found": 1, "found_quiet": 0, "error": 0}
    assert report["per_framework"]["(none)"]["total"] == 2
    # one trainlint run per commit, not per case
    assert sorted(p.stem for p in (out / "whole-json" / "o+n").glob("*.json")) == sorted([buggy, fix])

    done = _script("score-whole", "--out", str(out), "--data", str(data), "--half", "test")
    assert done.returncode == 0, done.stderr
    assert "recall 1/2 = 50% in whole repositories" in done.stdout
    assert "fixed versions quiet in 0/1 found cases" in done.stdout


def test_score_whole_before_export_is_a_clear_error(mirrored, tmp_path):
    _, data, _, _ = mirrored
    done = _script("score-whole", "--out", str(tmp_path / "nothing"), "--data", str(data))
    assert done.returncode == 2
    assert "run `export-whole` first" in done.stderr and "Traceback" not in done.stderr


def test_export_whole_without_the_mirror_is_a_clear_error(mirrored, tmp_path):
    _, data, _, _ = mirrored
    done = _script("export-whole", str(tmp_path / "no-mirrors"), "--out", str(tmp_path / "out"), "--data", str(data))
    assert done.returncode == 2
    assert "no git directory for o/n" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("bad,problem", [
    ({"capability": ""}, "capability"),
    ({"framework": 3}, "framework"),
    ({"half": "train"}, "half"),
])
def test_validate_checks_the_optional_labels(bad, problem):
    assert mined.validate([{**GOOD, "capability": "order", "framework": "accelerate", "half": "tune"}]) == []
    problems = mined.validate([{**GOOD, **bad}])
    assert len(problems) == 1 and problem in problems[0], problems
