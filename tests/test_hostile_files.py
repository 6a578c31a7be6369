"""Files trainlint reads without checking them, as a hostile repository would write them: ignore
files and configuration files (issue 34, items 5-7). Each is read like a checked file (regular
files only, never blocking, within a size limit); whatever is in it gives one error line naming
the file, never a traceback or a hang. The CLI runs as a real subprocess with a timeout: a run
that blocks fails the test instead of hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BAD

HUGE_INT = "9" * 5000  # past int()'s 4,300-digit limit


def trainlint(*args: str, cwd: Path, timeout: float = 60, stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=stdin)


def error_lines(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("trainlint: error:")]


# -- 7. a TOML integer past int()'s digit limit --------------------------------------------------

def test_a_huge_integer_in_another_tools_table_is_a_config_error_naming_the_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text(f'[tool.trainlint]\nselect = ["TL401"]\n\n[tool.other]\nx = {HUGE_INT}\n')
    (tmp_path / "train.py").write_text(BAD)
    done = trainlint("check", "--no-cache", "train.py", cwd=tmp_path)
    assert "Traceback" not in done.stderr
    assert done.returncode == 2, done.stderr[-1000:]
    [line] = error_lines(done)
    assert str(tmp_path / "pyproject.toml") in line and "4300 digits" in line


def test_a_huge_integer_in_a_pyproject_that_is_not_ours_is_passed_over(tmp_path):
    """A pyproject.toml without `[tool.trainlint]` is not a configuration (as with any invalid
    TOML in one): the files are checked with the defaults."""
    (tmp_path / "pyproject.toml").write_text(f'[tool.other]\nx = {HUGE_INT}\n')
    (tmp_path / "train.py").write_text(BAD)
    done = trainlint("check", "--no-cache", "--select", "TL401", "train.py", cwd=tmp_path)
    assert "Traceback" not in done.stderr
    assert done.returncode == 1, done.stderr[-1000:]


def test_a_huge_integer_in_a_trainlint_toml_in_process(tmp_path):
    from trainlint.config import ConfigError, load_config

    (tmp_path / "trainlint.toml").write_text(f"max-file-size = {HUGE_INT}\n")
    with pytest.raises(ConfigError, match="trainlint.toml: invalid TOML value"):
        load_config(tmp_path / "trainlint.toml")
