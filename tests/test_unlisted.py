"""Folders that cannot be listed and paths that cannot be looked at are errors naming them (exit 2),
never left out in silence; the other files are still checked.

Tests run as root here, where `chmod 000` does not stop a listing: a refused folder is simulated by
making `os.scandir` refuse it in-process, checked for real (skipped as root), and a path past the
system's length limit is refused for root too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BAD
from trainlint.reader.discovery import discover

NAME_MAX = 255


def _tree(root: Path) -> None:
    (root / "hidden").mkdir()
    (root / "hidden" / "loader.py").write_text(BAD)
    (root / "seen.py").write_text(BAD)


@pytest.fixture
def refused(monkeypatch):
    """`os.scandir` refuses folders named `hidden`, as the system does a folder without read permission."""
    scandir = os.scandir

    def refusing(path="."):
        if os.path.basename(os.fspath(path)) == "hidden":
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)


def test_discovery_names_a_folder_it_cannot_list(tmp_path, refused):
    _tree(tmp_path)
    errors = []
    files = discover([str(tmp_path)], errors=errors)
    assert files == [str(tmp_path / "seen.py")]
    assert errors == [(str(tmp_path / "hidden"), f"cannot list {tmp_path / 'hidden'}: Permission denied")]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_folder_that_cannot_be_listed_is_an_error(project, run, refused, fmt):
    _tree(project)
    result = run("check", "--no-cache", "--format", fmt, ".")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["trainlint: error: cannot list ./hidden: Permission denied"]
    if fmt == "json":
        report = json.loads(result.stdout)
        assert {f["path"] for f in report["findings"]} == {"bad.py", "broken.py", "seen.py"}  # the others still checked
    else:
        assert "seen.py:3:9" in result.stdout and "All checks passed" not in result.stdout


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root lists a folder whatever its permissions (the in-process tests simulate it)")
def test_a_folder_without_read_permission_is_an_error(tmp_path):
    _tree(tmp_path)
    (tmp_path / "hidden").chmod(0)
    try:
        done = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "."], cwd=tmp_path,
                              capture_output=True, text=True)
    finally:
        (tmp_path / "hidden").chmod(0o755)
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["trainlint: error: cannot list ./hidden: Permission denied"]
    assert "seen.py" in done.stdout


def _deep(root: Path, levels: int) -> str:
    """Folders nested past PATH_MAX (made relative to an open folder, as a path that long cannot
    be named), a TL401 file at the bottom; the deepest folder's path."""
    fd = os.open(root, os.O_RDONLY)
    try:
        for number in range(levels):
            name = f"{number:03d}" + "d" * (NAME_MAX - 3)
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        data = BAD.encode()
        out = os.open("deep.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, data)
        os.close(out)
    finally:
        os.close(fd)
    return os.path.join(str(root), *(f"{n:03d}" + "d" * (NAME_MAX - 3) for n in range(levels)))


@pytest.mark.skipif(not hasattr(os, "pathconf"), reason="no PATH_MAX to go past")
def test_a_folder_past_the_path_length_limit_is_an_error(tmp_path):
    limit = os.pathconf(tmp_path, "PC_PATH_MAX")
    (tmp_path / "seen.py").write_text(BAD)
    deepest = _deep(tmp_path, limit // (NAME_MAX + 1) + 2)
    done = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr
    assert done.returncode == 2
    errors = done.stderr.splitlines()
    assert len(errors) == 1 and errors[0].startswith("trainlint: error: cannot list ")
    assert errors[0].endswith(": File name too long")
    listed = errors[0].removeprefix("trainlint: error: cannot list ").removesuffix(": File name too long")
    assert len(listed) > limit and deepest.startswith(listed)
    assert "seen.py" in done.stdout


def test_a_named_path_past_the_length_limit_is_an_error_and_the_others_are_checked(project, run):
    long = "x" * 300 + ".py"  # one name past NAME_MAX
    result = run("check", "--no-cache", long, "bad.py")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"trainlint: error: cannot read {long}: File name too long"]
    assert "bad.py:3:9" in result.stdout


@pytest.mark.skipif(not hasattr(os, "pathconf"), reason="no PATH_MAX to go past")
def test_a_file_past_the_path_length_limit_in_a_folder_that_lists_is_an_error(tmp_path):
    """The folder's own path is under the limit (it is listed), the file's is over: looking for its
    configuration and project root must not crash on it, reading it is the one error."""
    limit = os.pathconf(tmp_path, "PC_PATH_MAX")
    (tmp_path / "seen.py").write_text(BAD)
    fd = os.open(tmp_path, os.O_RDONLY)
    length = len(str(tmp_path))
    try:
        while length < limit - 12:  # the folder: just under the limit
            name = "d" * min(NAME_MAX, limit - 12 - length)
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd, length = inner, length + len(name) + 1
        out = os.open("model_loader.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, BAD.encode())
        os.close(out)
    finally:
        os.close(fd)
    done = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr
    assert done.returncode == 2
    errors = done.stderr.splitlines()
    assert len(errors) == 1 and errors[0].startswith("trainlint: error: cannot read ")
    assert errors[0].endswith("model_loader.py: File name too long")
    assert "seen.py" in done.stdout
