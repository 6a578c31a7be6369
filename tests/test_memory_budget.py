"""A file whose check would take more memory than its budget (300 bytes per byte of source, at
least 512 MB; `trainlint.budget`) is declined with a skipped-file notice before anything parses
it (issue 34, item 8): a 1.2 MB file of one trigger line and `x = 1` lines took 20 s and 2.1 GB."""

from __future__ import annotations

import subprocess
import sys
import time

from trainlint.budget import over_budget
from trainlint.engine import lint_source
from trainlint.settings import Settings

DENSE = "import torch\nstate = torch.load(p)\n" + "x = 1\n" * 200_000  # 1.2 MB


def test_a_dense_file_is_declined_before_it_is_parsed():
    start = time.perf_counter()
    result = lint_source(DENSE, "dense.py", Settings())
    assert time.perf_counter() - start < 10
    assert not result.checked and result.findings == [] and result.errors == []
    assert result.skipped.startswith("skipped dense.py: checking it would take about ")
    assert "over its budget of 512 MB" in result.skipped


def test_small_and_realistic_files_fit():
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "scripts"))
    from scaling import training_file

    assert over_budget(training_file(250_000), "t.py") is None  # the size guard's default-suite file
    assert over_budget("x = 1\n" * 20_000, "t.py") is None  # 60k tokens: under the 512 MB floor
    assert over_budget("x = 1\n" * 60_000, "t.py") is not None  # 180k tokens, 360 KB: about 700 MB


#: Runs the CLI and prints the peak memory of that one child (a fresh process: no earlier children).
MEASURE = """
import resource, subprocess, sys
done = subprocess.run([sys.executable, "-m", "trainlint", *sys.argv[1:]], capture_output=True, text=True)
sys.stderr.write(done.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def test_the_cli_declines_it_in_bounded_memory_and_time(tmp_path):
    (tmp_path / "dense.py").write_text(DENSE)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", MEASURE, "check", "--no-cache", "--isolated", "dense.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - start
    assert "Traceback" not in done.stderr
    # a skipped file is an error (exit 2) unless --allow-skipped accepts it
    assert "trainlint: error: skipped dense.py: checking it would take about" in done.stderr
    assert took < 30
    peak = int(done.stdout)  # the whole process, interpreter and imports included
    assert peak <= 300 * len(DENSE), f"{peak >> 20} MB"


def test_a_declined_file_is_not_cached_as_clean(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.trainlint]\n")
    (tmp_path / "dense.py").write_text(DENSE)
    for _ in range(2):  # the second run would find a cached entry
        done = subprocess.run([sys.executable, "-m", "trainlint", "check", "dense.py"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert "skipped dense.py" in done.stderr
