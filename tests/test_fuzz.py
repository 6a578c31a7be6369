"""The fuzz run in the suite: a few hundred programs, mutants of the fixtures and hypothesmith's,
in a fixed order (seeded). None may raise, give an internal error or report outside its file.

`scripts/fuzz.py --count 100000` is the longer run for release checks; both share its code.
"""

from __future__ import annotations

import importlib.util
import random
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
