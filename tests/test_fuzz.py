"""The fuzz run in the suite: a few hundred programs, mutants of the fixtures and hypothesmith's,
in a fixed order (seeded). None may raise, give an internal error or report outside its file.

`scripts/fuzz.py --count 100000` is the longer run for release checks; both share its code.
"""

from __future__ import annotations

import importlib.util
import random
import re
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "fuzz.py"
_spec = importlib.util.spec_from_file_location("trainlint_fuzz", SCRIPT)
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)

SEED = 20261201


def _failures(programs) -> list[str]:
    return [f"{found}\n--- program ---\n{source}" for source in programs if (found := fuzz.problems(source))]


def test_mutants_of_the_fixtures():
    rng = random.Random(SEED)
    corpus = fuzz.seeds()
    assert len(corpus) >= 30
    mutants = [fuzz.mutate(rng.choice(corpus), rng) for _ in range(250)]
    assert len(set(mutants)) > 200  # the mutations do change the programs
    assert _failures(mutants) == []


@pytest.mark.parametrize("strategy,count", [("from_grammar", 50), ("from_node", 12)])
def test_hypothesmith_programs(strategy, count):
    hypothesmith = pytest.importorskip("hypothesmith")
    from hypothesis import HealthCheck, given, seed, settings

    programs: list[str] = []

    @seed(SEED)
    @settings(max_examples=count, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(getattr(hypothesmith, strategy)())
    def collect(program: str) -> None:
        programs.append(program)

    collect()
    assert len(programs) == count
    assert _failures(programs) == []


def test_the_checker_catches_a_span_outside_the_file(monkeypatch):
    """The fuzz oracle itself: a finding past the last line is reported as a problem."""
    from trainlint.finding import FileResult, Finding, Severity

    def lint(source, path, settings):
        return FileResult(path, [Finding(path, 9, 1, 9, 2, "TL401", "x", Severity.ERROR, "m")])

    monkeypatch.setattr(fuzz, "lint_source", lint)
    assert fuzz.problems("x = 1\n") == ["TL401 span 9:1-9:2 outside the file (2 lines)"]


# -- configuration and ignore files (issue 34) -------------------------------------------------------

def test_random_configuration_and_ignore_files(tmp_path):
    """A few hundred folders of random pyproject.toml/trainlint.toml/.gitignore files (huge
    integers, deep nesting, bad types, backtracking patterns, links to fifos and /dev/stdin),
    walked and configured in-process as the CLI and the language server do: configuration errors
    only, never another exception, and no case over 10 s. `scripts/fuzz.py --files --count
    10000` is the long run."""
    failures, slowest = [], 0.0
    for number in range(250):
        found, took = fuzz.check_files(number, SEED)
        slowest = max(slowest, took)
        if found:
            failures.append(f"case {number}: {found}")
    assert failures == []
    assert slowest < fuzz.CASE_SECONDS


def test_the_file_cases_hold_what_they_should():
    """The generator does make the hostile files: huge integers, deep nesting, the backtracking
    pattern and links, within the first cases."""
    import random as _random

    texts, links = [], 0
    for number in range(60):
        root = Path(fuzz.tempfile.mkdtemp())
        try:
            fuzz.make_case(root / "repo", _random.Random(f"{SEED}:{number}"))
            for path in (root / "repo").rglob("*"):
                if path.is_symlink() or (path.exists() and not path.is_file() and not path.is_dir()):
                    links += 1
                elif path.is_file() and path.name in ("pyproject.toml", "trainlint.toml", ".gitignore"):
                    texts.append(path.read_bytes()[:200_000])
        finally:
            fuzz.shutil.rmtree(root, ignore_errors=True)
    joined = b"\n".join(texts)
    assert re.search(rb"= \d{4301,}", joined)  # an integer past int()'s limit
    assert b"[" * 500 in joined
    assert b"*a" * 8 + b"*" in joined
    assert links >= 5
