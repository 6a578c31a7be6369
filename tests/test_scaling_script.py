"""`scripts/scaling.py` keeps working: each generated shape is training code the rules read (it
parses, and the rule families it was written for report in it), and the script prints its table on
tiny sizes. Only the script measures time; nothing here does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainlint.engine import lint_source
from trainlint.settings import Settings, resolve_selection

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPTS))

from scaling import SHAPES, generated_file  # noqa: E402

# rule families each shape is written to exercise (a family reports at least one finding)
FAMILIES = {
    "functions": {"TL1", "TL2", "TL4", "TL5", "TL6"},
    "script": {"TL1", "TL4", "TL5", "TL6"},
    "resume": {"TL4"},
    "class": {"TL1", "TL3", "TL4", "TL5", "TL6"},
    "chain": {"TL1"},
    "mixed": {"TL4", "TL5"},
}


@pytest.mark.parametrize("shape", [*SHAPES, "mixed"])
def test_a_generated_shape_is_checked_by_its_rule_families(shape):
    source = generated_file(shape, 120)
    assert source.count("\n") >= 100
    compile(source, shape, "exec")
    result = lint_source(source, f"{shape}.py", Settings(select=resolve_selection(["ALL"], [], [])))
    assert result.errors == []
    families = {finding.code[:3] for finding in result.findings}
    assert "TL0" not in families
    assert FAMILIES[shape] <= families


def test_a_bigger_size_repeats_the_pieces():
    small, large = generated_file("functions", 100), generated_file("functions", 400)
    assert large.startswith(small[:200]) and large.count("\ndef ") > 3 * small.count("\ndef ")


def test_the_script_prints_each_part_and_the_growth():
    done = subprocess.run([sys.executable, str(SCRIPTS / "scaling.py"), "--shapes", "chain", "--lines", "40", "80"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "chain: lines" in out and "whole check / parse" in out
    assert "index" in out and "TL101" in out and "model training.training_model" in out
    assert "largest growth of a ratio: chain" in out


def test_the_benchmark_script_runs_its_phases_on_a_small_tree(tmp_path):
    """`scripts/benchmark.py` instruments the engine's parser and the rules by name: a rename in the
    engine must not break it silently (it did once). Its numbers are not checked, only that it runs."""
    examples = Path(__file__).resolve().parent.parent / "examples"
    for source in sorted(examples.glob("*.py"))[:2]:
        (tmp_path / source.name).write_bytes(source.read_bytes())
    done = subprocess.run([sys.executable, str(SCRIPTS / "benchmark.py"), str(tmp_path), "--repeat", "1", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = __import__("json").loads(done.stdout)
    assert report["files"] == 2 and report["cold_ratio"] > 0
    assert any(name.startswith("rule TL") for name in report["phases_ratio"]), report["phases_ratio"]


def test_the_benchmark_script_measures_one_file_as_whole_processes(tmp_path):
    """`benchmark.py --one-file`: a `trainlint check F` process against LibCST's import and parse of
    F, as ratios to that baseline measured in the same run. Only that it runs and says so."""
    example = Path(__file__).resolve().parent.parent / "examples" / "train_clean.py"
    done = subprocess.run([sys.executable, str(SCRIPTS / "benchmark.py"), "--one-file", str(example), "--runs", "1",
                           "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (measure,) = __import__("json").loads(done.stdout)["one_file"]
    assert measure["file"] == str(example) and measure["lines"] > 100
    assert measure["wall_ratio"] > 0 and measure["cpu_ratio"] > 0
    assert measure["check_cpu_s"] > 0 and measure["parse_cpu_s"] > 0
