"""The resident process (trainlint/resident.py, trainlint/resident_server.py), run for real: a
`python -m trainlint` client starts it, later clients are served by it, and what a served run
prints and returns is what the same run prints and returns in its own process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from trainlint import resident

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resident process is Linux-only")

BAD = "import torch\n\n\ndef restore(path):\n    return torch.load(path, weights_only=False)\n"


@pytest.fixture
def sockets():
    """A short socket folder of the test's own (AF_UNIX paths are limited to 107 bytes); every
    resident process started there is stopped afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="tlr-"))
    os.chmod(folder, 0o700)
    yield folder
    for described in resident.running(str(folder)):
        try:
            os.kill(described["pid"], signal.SIGKILL)
        except OSError:
            pass
    shutil.rmtree(folder, ignore_errors=True)


def _env(sockets: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "FORCE_COLOR", "NO_COLOR", "CI")}
    env.update(TRAINLINT_RESIDENT="1", TRAINLINT_RESIDENT_DIR=str(sockets), TRAINLINT_RESIDENT_IDLE="120",
               TRAINLINT_RESIDENT_LOG=str(sockets / "served.log"))
    env.update(extra)
    return env


def _tl(*args: str, cwd: Path, env: dict, shell_prefix: str = "") -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "trainlint", *args]
    if shell_prefix:  # e.g. closing a standard stream before the client starts
        command = ["sh", "-c", shell_prefix + ' exec "$@"', "sh", *command]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)


def _served(sockets: Path) -> list[dict]:
    log = sockets / "served.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _wait_for_server(sockets: Path) -> None:
    deadline = time.monotonic() + 60
    while not list(sockets.glob("*.sock")) or not resident.running(str(sockets)):
        assert time.monotonic() < deadline, "no resident process came up"
        time.sleep(0.05)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (tmp_path / "restore.py").write_text(BAD)
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "clean.py").write_text("x = 1\n")
    return tmp_path


def test_a_served_check_prints_and_returns_what_a_check_in_its_own_process_does(project, sockets):
    env = _env(sockets)
    first = _tl("check", "--no-cache", "restore.py", cwd=project, env=env)  # checks here, starts the server
    assert first.returncode == 1 and "TL401" in first.stdout
    _wait_for_server(sockets)
    runs = [("check", "--no-cache", "examples"), ("--no-cache", "--statistics", "examples"),
            ("check", "--no-cache", "-q", "restore.py", "broken.py"), ("check", "--no-cache", "clean.py"),
            ("check", "--no-cache", "--show-source", "--exit-zero", "restore.py"),
            ("check", "--no-cache", "--color", "restore.py"), ("check", "--no-cache", "missing.py"),
            ("check", "restore.py"), ("check", "restore.py")]  # the cache, written then read
    for args in runs:
        here = _tl(*args, cwd=project, env={**env, "TRAINLINT_RESIDENT": "0"})
        served = _tl(*args, cwd=project, env=env)
        assert (served.returncode, served.stdout, served.stderr) == (here.returncode, here.stdout, here.stderr), args
    log = _served(sockets)
    assert [entry["argv"] for entry in log] == [list(args) for args in runs]
    assert {entry["cwd"] for entry in log} == {str(project)}
    assert {entry["exit"] for entry in log} == {0, 1, 2}
    assert len({entry["pid"] for entry in log}) == len(runs)  # a fresh fork per request


def test_a_served_run_takes_the_clients_environment_and_configuration(project, sockets):
    env = _env(sockets)
    _tl("check", "--no-cache", "clean.py", cwd=project, env=env)
    _wait_for_server(sockets)
    (project / "pyproject.toml").write_text('[tool.trainlint]\nignore = ["TL401"]\n')
    quiet = _tl("check", "--no-cache", "restore.py", cwd=project, env=env)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    (project / "pyproject.toml").write_text('[tool.trainlint]\nselekt = ["TL401"]\n')
    broken = _tl("check", "--no-cache", "restore.py", cwd=project, env=env)
    assert broken.returncode == 2 and "selekt" in broken.stderr and "Traceback" not in broken.stderr
    (project / "pyproject.toml").unlink()
    github = _tl("check", "--no-cache", "examples/train_amp.py", cwd=project, env={**env, "GITHUB_ACTIONS": "true"})
    assert github.stdout.startswith("::error ") or github.stdout.startswith("::warning ")
    assert len(_served(sockets)) == 3


def test_clicks_commands_and_options_with_values_are_never_served(project, sockets):
    env = _env(sockets)
    _tl("check", "--no-cache", "clean.py", cwd=project, env=env)
    _wait_for_server(sockets)
    assert _tl("check", "--select", "TL401", "restore.py", cwd=project, env=env).returncode == 1
    assert _tl("rules", cwd=project, env=env).returncode == 0
    assert _served(sockets) == []


def test_a_check_whose_standard_stream_is_closed_runs_in_its_own_process(project, sockets):
    env = _env(sockets)
    _tl("check", "--no-cache", "clean.py", cwd=project, env=env)
    _wait_for_server(sockets)
    done = _tl("check", "--no-cache", "restore.py", cwd=project, env=env, shell_prefix="exec 0<&-;")
    assert done.returncode == 1 and "TL401" in done.stdout
    assert _served(sockets) == []


def test_a_killed_resident_process_leaves_a_socket_the_next_check_gets_past(project, sockets):
    env = _env(sockets)
    _tl("check", "--no-cache", "clean.py", cwd=project, env=env)
    _wait_for_server(sockets)
    [described] = resident.running(str(sockets))
    os.kill(described["pid"], signal.SIGKILL)
    time.sleep(0.2)
    assert list(sockets.glob("*.sock"))  # left behind: connecting to it is refused
    done = _tl("check", "--no-cache", "restore.py", cwd=project, env=env)
    assert done.returncode == 1 and "TL401" in done.stdout
    _wait_for_server(sockets)  # that check started a new one
    [again] = resident.running(str(sockets))
    assert again["pid"] != described["pid"]
    assert _tl("check", "--no-cache", "restore.py", cwd=project, env=env).returncode == 1
    assert len(_served(sockets)) == 1


def test_switched_off_under_ci_or_by_the_variable_no_process_is_started(project, sockets):
    for extra in ({"TRAINLINT_RESIDENT": "0"}, {"TRAINLINT_RESIDENT": "", "CI": "true"}):
        done = _tl("check", "--no-cache", "restore.py", cwd=project, env=_env(sockets, **extra))
        assert done.returncode == 1
    time.sleep(1.0)  # a started process would have taken its lock by now
    assert list(sockets.iterdir()) == []


@pytest.mark.parametrize(("variable", "ci", "expected"), [
    ("", "", True), ("0", "", False), ("off", "", False), ("", "true", False), ("1", "true", True),
    ("yes", "", True),
])
def test_wanted(monkeypatch, variable, ci, expected):
    monkeypatch.setenv("TRAINLINT_RESIDENT", variable)
    monkeypatch.setenv("CI", ci) if ci else monkeypatch.delenv("CI", raising=False)
    assert resident.wanted() is expected


def test_a_socket_folder_others_can_enter_or_a_link_is_not_used(tmp_path, monkeypatch):
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    os.chmod(open_folder, 0o777)
    monkeypatch.setenv("TRAINLINT_RESIDENT_DIR", str(open_folder))
    assert resident.folder() is None
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(private)
    monkeypatch.setenv("TRAINLINT_RESIDENT_DIR", str(link))
    assert resident.folder() is None
    monkeypatch.setenv("TRAINLINT_RESIDENT_DIR", str(private))
    assert resident.folder() == str(private)
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("TRAINLINT_RESIDENT_DIR", str(fresh))
    assert resident.folder() == str(fresh) and stat.S_IMODE(fresh.stat().st_mode) == 0o700


def test_a_client_with_an_open_socket_folder_checks_in_its_own_process(project, tmp_path):
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    os.chmod(open_folder, 0o777)
    done = _tl("check", "--no-cache", "restore.py", cwd=project,
               env={**os.environ, "TRAINLINT_RESIDENT": "1", "TRAINLINT_RESIDENT_DIR": str(open_folder)})
    assert done.returncode == 1 and "TL401" in done.stdout
    time.sleep(0.5)
    assert list(open_folder.iterdir()) == []


def test_an_edit_of_a_source_file_names_another_process(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    (package / "sub" / "b.toml").write_text("k = 1\n")
    (package / "sub" / "notes.txt").write_text("not a source\n")
    before = resident._sources([str(package)])
    assert [Path(path).name for path, _, _ in before] == ["a.py", "b.toml"]
    (package / "notes.txt").write_text("still not a source\n")
    assert resident._sources([str(package)]) == before
    (package / "sub" / "b.toml").write_text("k = 22\n")
    assert resident._sources([str(package)]) != before


def test_the_resident_command_lists_and_stops_the_processes(project, sockets):
    env = _env(sockets)
    _tl("check", "--no-cache", "clean.py", cwd=project, env=env)
    _wait_for_server(sockets)
    [described] = resident.running(str(sockets))
    listed = _tl("resident", cwd=project, env=env)
    assert listed.returncode == 0 and f"pid {described['pid']}" in listed.stdout
    stopped = _tl("resident", "--stop", cwd=project, env=env)
    assert stopped.returncode == 0 and "asked to stop" in stopped.stdout
    deadline = time.monotonic() + 30
    while list(sockets.glob("*.sock")):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert "No resident process is running" in _tl("resident", cwd=project, env=env).stdout


def test_the_started_process_holds_no_descriptor_the_client_inherited(project, sockets):
    """A CI runner or a build tool waits for the end of a pipe it handed its children: the
    resident process a check starts must not keep it open."""
    read_end, write_end = os.pipe()
    try:
        done = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "restore.py"], cwd=project,
                              env=_env(sockets), pass_fds=(write_end,), capture_output=True, text=True, timeout=120)
        assert done.returncode == 1
        os.close(write_end)
        write_end = -1
        _wait_for_server(sockets)  # started, and past its start-up
        os.set_blocking(read_end, False)
        assert os.read(read_end, 1) == b""  # end of file: no process holds the write end
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
