"""Shared helpers for the CLI, config and reporter tests.

Findings in these tests come from TL401 only (other rules are added concurrently and must not
change what these tests expect); `map_location` is passed so a future rule about it stays quiet.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from trainlint.cli import cli

# The trainlint processes tests start check in their own process, never handed to (or starting) a
# resident process (trainlint/resident.py); tests/test_resident.py turns it on for its own runs.
os.environ["TRAINLINT_RESIDENT"] = "0"

# Tests that press Ctrl-C on a trainlint process (`--watch`) need it to start with SIGINT's default
# disposition. A test run launched in the background by a non-interactive shell (`nohup ... &`, some
# CI runners) inherits SIGINT ignored, and so would every process it starts: `trainlint check --watch`
# would then rightly ignore the Ctrl-C and the test wait out its timeout. A handler set here is reset to
# the default in every process the tests exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

BAD = 'import torch\n\nstate = torch.load("checkpoint.pt", map_location="cpu", weights_only=False)\n'
GOOD = 'import torch\n\nstate = torch.load("checkpoint.pt", map_location="cpu", weights_only=True)\n'
BROKEN = 'print "python 2"\n'
#: Where TL401 reports in BAD: the `torch.load(...)` call.
BAD_LINE, BAD_COLUMN = 3, 9


@pytest.fixture(scope="session")
def user_cache_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("user-cache")


@pytest.fixture(autouse=True)
def _user_cache_outside_home(user_cache_home: Path):
    """The result cache's key lives in the user's cache folder: in tests (and the trainlint
    processes they start, which inherit the environment) a folder of the session's, never ~/.cache.
    Under pytest-xdist each worker has its own: tmp_path_factory's base folder is per worker.
    Its own MonkeyPatch: a test's `monkeypatch.undo()` does not undo it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(user_cache_home))
        yield


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory with one buggy, one clean and one unparsable file; the current directory."""
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "broken.py").write_text(BROKEN)
    monkeypatch.chdir(tmp_path)
    for name in ("GITHUB_ACTIONS", "NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def run():
    """Run the CLI in-process with click's runner; returns the click Result."""
    runner = CliRunner()

    def invoke(*args: str, input: str | bytes | None = None, env: dict | None = None):
        return runner.invoke(cli, list(args), input=input, env=env, catch_exceptions=False)

    return invoke
