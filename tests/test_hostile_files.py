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


# -- 6. ignore and configuration files are read like checked files --------------------------------

def _plant(repo: Path, where: str, kind: str) -> Path:
    path = repo / where
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "stdin":
        path.symlink_to("/dev/stdin")
    elif kind == "fifo":
        os.mkfifo(path)
    else:  # over the 1 MB limit of ignore and configuration files
        path.write_text("#" * 1_100_000 + "\n")
    return path


@pytest.mark.parametrize("kind", ["stdin", "fifo", "large"])
@pytest.mark.parametrize("where", [".gitignore", "sub/.gitignore", ".git/info/exclude"])
def test_an_ignore_file_that_is_not_a_small_regular_file_is_an_error_and_nothing_blocks(tmp_path, where, kind):
    repo = tmp_path / "repo"
    (repo / ".git" / "info").mkdir(parents=True)
    (repo / "sub").mkdir()
    (repo / "train.py").write_text(BAD)
    (repo / "sub" / "helper.py").write_text(BAD)
    planted = _plant(repo, where, kind)
    reader, writer = os.pipe()  # stdin an open pipe, as in CI: reading it would block forever
    try:
        done = trainlint("check", "--no-cache", "--select", "TL401", ".", cwd=repo, stdin=reader, timeout=30)
    finally:
        os.close(reader)
        os.close(writer)
    assert "Traceback" not in done.stderr
    assert done.returncode == 2, done.stderr[-1000:]
    [line] = error_lines(done)
    assert f"cannot read ignore file {planted}: " in line and "its patterns are not applied" in line
    assert ("not a regular file" if kind != "large" else "over the size limit") in line
    checked = sorted(row.split(":")[0] for row in done.stdout.splitlines() if " TL401 " in row)
    assert checked == [os.path.join("sub", "helper.py"), "train.py"]  # the other files are still checked


@pytest.mark.parametrize("name", ["pyproject.toml", "trainlint.toml"])
def test_a_configuration_file_over_the_size_limit_is_an_error_naming_it(tmp_path, name):
    table = "[tool.trainlint]\n" if name == "pyproject.toml" else ""
    (tmp_path / name).write_text(f'{table}select = ["TL401"]\n' + "#" * 1_100_000 + "\n")
    (tmp_path / "train.py").write_text(BAD)
    done = trainlint("check", "--no-cache", "train.py", cwd=tmp_path)
    assert "Traceback" not in done.stderr
    assert done.returncode == 2
    assert error_lines(done) == [f"trainlint: error: cannot read configuration file {tmp_path / name}: "
                                 "1,100,034 bytes is over the size limit of 1,048,576 (configuration files)"
                                 .replace("1,100,034", f"{(tmp_path / name).stat().st_size:,}")]


@pytest.mark.parametrize("kind", ["stdin", "fifo"])
def test_a_configuration_file_named_with_config_that_is_not_regular_is_refused_without_blocking(tmp_path, kind):
    config = _plant(tmp_path, "trainlint.toml", kind)
    (tmp_path / "train.py").write_text(BAD)
    reader, writer = os.pipe()
    try:
        done = trainlint("check", "--no-cache", "--config", str(config), "train.py", cwd=tmp_path, stdin=reader,
                         timeout=30)
    finally:
        os.close(reader)
        os.close(writer)
    assert "Traceback" not in done.stderr
    assert done.returncode == 2
    assert error_lines(done) == [f"trainlint: error: cannot read configuration file {config}: not a regular file"]


def test_read_toml_refuses_a_link_to_stdin_in_process(tmp_path):
    import threading

    from trainlint.config import ConfigError
    from trainlint.reader.config_files import read_toml

    link = _plant(tmp_path, "pyproject.toml", "stdin")
    outcome = []

    def read() -> None:
        try:
            read_toml(link)
        except ConfigError as err:
            outcome.append(str(err))

    reader, writer = os.pipe()
    saved = os.dup(0)
    os.dup2(reader, 0)  # fd 0 an open pipe nobody writes to
    try:
        worker = threading.Thread(target=read, daemon=True)
        worker.start()
        worker.join(10)
        blocked = worker.is_alive()
    finally:
        os.close(writer)  # a blocked read ends (at end of file)
        os.dup2(saved, 0)
        os.close(saved)
        os.close(reader)
    assert not blocked, "read_toml blocked on a link to /dev/stdin"
    assert outcome == [f"cannot read configuration file {link}: not a regular file"]


def test_a_config_error_quoting_a_newline_is_one_line(tmp_path):
    """Found by `scripts/fuzz.py --files` (case 8472 of seed 0): a value or key with a newline
    made a configuration error of several lines."""
    from trainlint.config import ConfigError, load_config

    for body in ('min-torch-version = "=]\\n.]\\u2028"\n', '"a\\nb" = 1\n'):
        (tmp_path / "trainlint.toml").write_text(body)
        with pytest.raises(ConfigError) as error:
            load_config(tmp_path / "trainlint.toml")
        assert "\n" not in str(error.value) and "\u2028" not in str(error.value)
        assert "\\n" in str(error.value)
