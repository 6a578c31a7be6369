"""The pre-commit hook, run by the real `pre-commit` on a throwaway git repository.

pre-commit builds the hook's environment from this repository's committed HEAD (try-repo adds
uncommitted changes to tracked files, never untracked files) with `pip install .`: core
dependencies only, so it needs the package index but never torch. Installing it takes a minute
or so: the tests share one pre-commit home, so on a clean checkout (CI) try-repo's environment,
which is this repository at HEAD, is the one the configured hook reuses (a dirty checkout makes
try-repo install its own from a shadow commit).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 900

BUGGY = 'import torch\n\nstate = torch.load("checkpoint.pt", weights_only=False)\n'
CLEAN = 'import torch\n\nstate = torch.load("checkpoint.pt", weights_only=True)\n'

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
    pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the project's git checkout"),
]


def _pre_commit() -> list[str]:
    pytest.importorskip("pre_commit")
    return [sys.executable, "-m", "pre_commit"]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def project(tmp_path: Path, pre_commit_home: Path) -> tuple[Path, dict[str, str]]:
    """A git repository holding one buggy and one clean training script, and an environment for
    pre-commit (a home of this module's, so no cache from elsewhere is used; the text output
    format)."""
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "train.py").write_text(BUGGY)
    (repo / "evaluate.py").write_text(CLEAN)
    _git(repo, "add", "train.py", "evaluate.py")
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
    env.update(PRE_COMMIT_HOME=str(pre_commit_home), PRE_COMMIT_COLOR="never",
               GIT_AUTHOR_NAME="test", GIT_AUTHOR_EMAIL="test@example.com",
               GIT_COMMITTER_NAME="test", GIT_COMMITTER_EMAIL="test@example.com")
    return repo, env


def _run(cmd: list[str], repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=TIMEOUT)


def test_try_repo_fails_on_the_buggy_script_only(project):
    repo, env = project
    # pre-commit names every staged file: the hook's --force-exclude keeps the configured excludes
    (repo / "vendor").mkdir()
    (repo / "vendor" / "lib.py").write_text(BUGGY)
    (repo / "pyproject.toml").write_text('[tool.trainlint]\nextend-exclude = ["vendor"]\n')
    _git(repo, "add", "vendor/lib.py", "pyproject.toml")
    proc = _run([*_pre_commit(), "try-repo", str(ROOT), "trainlint", "--all-files"], repo, env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "trainlint" in out and "Failed" in out
    assert "train.py:3:9: TL401 [unsafe-torch-load]" in out, out
    assert "evaluate.py:" not in out
    assert "vendor/" not in out


def test_configured_hook_passes_a_clean_script_and_fails_a_buggy_one(project):
    repo, env = project
    rev = _git(ROOT, "rev-parse", "HEAD").strip()
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {ROOT}\n    rev: {rev}\n    hooks:\n      - id: trainlint\n")
    _git(repo, "add", ".pre-commit-config.yaml")

    clean = _run([*_pre_commit(), "run", "trainlint", "--files", "evaluate.py"], repo, env)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "Passed" in clean.stdout

    buggy = _run([*_pre_commit(), "run", "trainlint", "--files", "train.py", "evaluate.py"], repo, env)
    assert buggy.returncode == 1, buggy.stdout + buggy.stderr
    assert "train.py:3:9: TL401" in buggy.stdout
    assert "evaluate.py:" not in buggy.stdout


# -- staged file names that look like options (issue 34, item 14) --------------------------------

def _configure_hook(repo: Path) -> None:
    rev = _git(ROOT, "rev-parse", "HEAD").strip()
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {ROOT}\n    rev: {rev}\n    hooks:\n      - id: trainlint\n")
    _git(repo, "add", ".pre-commit-config.yaml")


def _stage_script(repo: Path, name: str) -> str:
    """An executable Python script with no extension (pre-commit types it python by its shebang)."""
    text = "#!/usr/bin/env python\n" + BUGGY
    (repo / name).write_text(text)
    (repo / name).chmod(0o755)
    _git(repo, "add", "--", name)
    return text


def test_a_staged_file_named_exit_zero_is_checked_not_obeyed(project):
    repo, env = project
    _configure_hook(repo)
    _stage_script(repo, "--exit-zero")
    proc = _run([*_pre_commit(), "run", "trainlint", "--all-files"], repo, env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Failed" in proc.stdout
    # the file is checked like any other, and the findings of the others still fail the hook
    assert "--exit-zero:4:9: TL401" in proc.stdout
    assert "train.py:3:9: TL401" in proc.stdout


def test_a_staged_file_named_o_is_checked_and_nothing_is_overwritten(project):
    repo, env = project
    _configure_hook(repo)
    text = _stage_script(repo, "-o")
    before = {name: (repo / name).read_text() for name in ("train.py", "evaluate.py")}
    proc = _run([*_pre_commit(), "run", "trainlint", "--all-files"], repo, env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "-o:4:9: TL401" in proc.stdout and "train.py:3:9: TL401" in proc.stdout
    assert (repo / "-o").read_text() == text
    assert {name: (repo / name).read_text() for name in before} == before


def test_a_staged_file_named_dash_is_checked_not_read_as_stdin(project):
    repo, env = project
    _configure_hook(repo)
    _stage_script(repo, "-")
    (repo / "train.py").write_text(CLEAN)  # the file named `-` is the only buggy one
    _git(repo, "add", "train.py")
    with open(os.devnull) as empty:  # as in CI: stdin is empty, which would pass
        proc = subprocess.run([*_pre_commit(), "run", "trainlint", "--all-files"], cwd=repo, env=env, stdin=empty,
                              capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "-:4:9: TL401" in proc.stdout


def test_the_command_line_takes_paths_after_a_double_dash(tmp_path):
    """What the hook's entry relies on, without pre-commit: after `--`, `--exit-zero` and `-o` are
    files to check, and an option given there by mistake is a missing file (exit 2), not obeyed."""
    for name in ("--exit-zero", "-o"):
        (tmp_path / name).write_text(BUGGY)
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
    run = lambda *args: subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", *args],  # noqa: E731
                                       cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                       timeout=120)
    proc = run("--", "--exit-zero", "-o")
    assert proc.returncode == 1, proc.stderr
    assert "--exit-zero:3:9: TL401" in proc.stdout and "-o:3:9: TL401" in proc.stdout
    assert (tmp_path / "-o").read_text() == BUGGY
    misplaced = run("--", "--select", "-o")
    assert misplaced.returncode == 2
    assert "no such file or directory: --select (after `--` every argument is a path" in misplaced.stderr

    # `-` is stdin, unless --no-stdin (the hook's) makes it the file named `-`
    (tmp_path / "-").write_text(BUGGY)
    assert run("--", "-").returncode == 0  # stdin: empty here
    dash = run("--no-stdin", "--", "-")
    assert dash.returncode == 1 and "-:3:9: TL401" in dash.stdout, dash.stdout + dash.stderr
    both = run("--no-stdin", "--stdin-filename", "x.py", "-")
    assert both.returncode == 2 and "cannot be used together" in both.stderr
