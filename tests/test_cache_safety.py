"""Issue 23, items 1 and 2: a repository someone else wrote can ship `.trainlint_cache/` (links in
it, a link in its place, entries and import stores made by its author's trainlint); checking it
must never write outside it, nor report less than `--no-cache` does.

Each attack is planted in `repo/`; `outside/` stands for the rest of the machine and must not
change. Forged entries are made the way an attacker would: by their own trainlint (their own key,
`attacker_cache`) with what it computes tampered with, so the tests do not depend on the format.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import BAD, BAD_LINE
from test_project import EVALUATE, NO_GRAD_HELPER

from trainlint import engine
from trainlint.cli import cli
from trainlint.finding import FileResult
from trainlint.reader.project import Project

NULL_CONTEXT = "import contextlib\n\ndef inference():\n    return contextlib.nullcontext()\n"
PAST = 1_500_000_000 * 10**9  # folders this old are not "racy": the import store is written


def trainlint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "FORCE_COLOR", "NO_COLOR")}
    return subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env, stdin=subprocess.DEVNULL, check=False)


def in_process(*args: str, cwd: Path):
    """The CLI run in this process (click's runner), in `cwd`."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        for name in ("GITHUB_ACTIONS", "FORCE_COLOR", "NO_COLOR"):
            patch.delenv(name, raising=False)
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def report(done) -> tuple[int, list]:
    """(exit code, findings) of a `--format json` run."""
    return done.returncode if hasattr(done, "returncode") else done.exit_code, [
        (f["path"], f["code"], f["line"]) for f in json.loads(done.stdout)["findings"]]


def check(root: Path, *extra: str) -> subprocess.CompletedProcess:
    return trainlint("check", "--format", "json", "--select", "ALL", *extra, ".", cwd=root)


def uncached(root: Path) -> tuple[int, list]:
    done = check(root, "--no-cache")
    assert done.returncode == 1, done.stderr
    return report(done)


def snapshot(folder: Path) -> dict[str, object]:
    """Every entry under `folder`: a link's target, a file's bytes and mode, a folder's mode."""
    seen: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            seen[str(path)] = ("link", os.readlink(path))
        elif stat.S_ISDIR(info.st_mode):
            seen[str(path)] = ("dir", info.st_mode)
        else:
            seen[str(path)] = ("file", path.read_bytes(), info.st_mode)
    return seen


def age(*folders: Path) -> None:
    for folder in folders:
        os.utime(folder, ns=(PAST, PAST))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """`repo/` with a file TL401 reports, its cache folder made (and aged) and `outside/`, with a
    file worth protecting."""
    root = tmp_path / "repo"
    (root / ".trainlint_cache").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    (root / "train.py").write_text(BAD)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim.txt").write_text("precious\n")
    age(root)
    return root


@pytest.fixture
def attacker_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Run the CLI in `root` as the repository's author would, with their own user cache folder
    (their key), while `patches` (object, name, value) are in force: their entries end up in the
    repository. Returns what their trainlint says afterwards, unpatched."""

    def run(root: Path, *patches: tuple[object, str, object]):
        with monkeypatch.context() as patch:
            patch.setenv("XDG_CACHE_HOME", str(tmp_path / "attacker-home"))
            for owner, name, value in patches:
                patch.setattr(owner, name, value)
            done = in_process("check", "--format", "json", "--select", "ALL", ".", cwd=root)
            # what the author's own trainlint says from then on, with what it stored
            patch.undo()
            patch.setenv("XDG_CACHE_HOME", str(tmp_path / "attacker-home"))
            again = in_process("check", "--format", "json", "--select", "ALL", ".", cwd=root)
        assert done.exit_code == 0
        return again

    return run


def no_findings(source, path="<stdin>", settings=None, project=None):
    return FileResult(path, [])


def entries(cache: Path) -> list[Path]:
    """The entries and import stores in a cache folder, relative to it."""
    return sorted(p.relative_to(cache) for p in cache.rglob("*.json"))


# -- 1. nothing is ever written through a link -----------------------------------------------------

def _plant_temporary_names(cache: Path, names: list[Path], target: Path, pids) -> None:
    for name in names:
        (cache / name.parent).mkdir(parents=True, exist_ok=True)
        for pid in pids:
            os.symlink(target, cache / name.parent / f"{name.stem}.{pid}.tmp")


def _learn_names(root: Path) -> list[Path]:
    """The names this repository's entry and import store get (from a first run), then an empty
    cache folder again."""
    cache = root / ".trainlint_cache"
    assert check(root).returncode == 1
    names = entries(cache)
    assert {name.parts[0] for name in names} >= {"imports"} and len(names) == 2, names
    shutil.rmtree(cache)
    cache.mkdir()
    age(root)
    return names


@pytest.mark.skipif(not Path("/proc/sys/kernel/ns_last_pid").exists(), reason="needs Linux's last pid")
def test_links_at_every_likely_temporary_name_are_never_written_through(repo):
    """A link at `<entry>.<pid>.tmp` for each of the next 1,500 pids (the process's own among
    them), for the result entry and for the import store."""
    outside, cache = repo.parent / "outside", repo / ".trainlint_cache"
    expected = uncached(repo)
    names = _learn_names(repo)
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    pids = [(last + i) % pid_max for i in range(1, 1501)]
    _plant_temporary_names(cache, names, outside / "victim.txt", pids)
    before = snapshot(outside)
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "FORCE_COLOR", "NO_COLOR")}
    proc = subprocess.Popen([sys.executable, "-m", "trainlint", "check", "--format", "json", "--select", "ALL", "."],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out, err = proc.communicate(timeout=120)
    assert proc.pid in pids  # the attack covered the run's own pid
    assert snapshot(outside) == before
    assert (proc.returncode, [(f["path"], f["code"], f["line"]) for f in json.loads(out)["findings"]]) == expected
    assert err == ""
    assert entries(cache) == names  # both written, as real files
    assert all(stat.S_ISREG((cache / name).lstat().st_mode) for name in names)


def test_a_link_at_this_process_temporary_name_is_never_written_through(repo):
    outside, cache = repo.parent / "outside", repo / ".trainlint_cache"
    expected = uncached(repo)
    names = _learn_names(repo)
    _plant_temporary_names(cache, names, outside / "victim.txt", [os.getpid()])
    before = snapshot(outside)
    done = in_process("check", "--format", "json", "--select", "ALL", ".", cwd=repo)
    assert snapshot(outside) == before
    assert report(done) == expected
    assert all(stat.S_ISREG((cache / name).lstat().st_mode) for name in names)


def test_a_dangling_gitignore_link_creates_nothing(repo):
    outside = repo.parent / "outside"
    os.symlink(outside / "created-by-trainlint", repo / ".trainlint_cache" / ".gitignore")
    expected = uncached(repo)
    done = check(repo)
    assert not os.path.lexists(outside / "created-by-trainlint")
    assert report(done) == expected
    assert os.readlink(repo / ".trainlint_cache" / ".gitignore") == str(outside / "created-by-trainlint")
    assert entries(repo / ".trainlint_cache")  # the cache itself is used


@pytest.mark.parametrize("planted", ["folder", "dangling"])
def test_a_cache_folder_that_is_a_link_is_not_used(repo, planted):
    outside, cache = repo.parent / "outside", repo / ".trainlint_cache"
    cache.rmdir()
    target = outside / "entries"
    if planted == "folder":
        target.mkdir()
    os.symlink(target, cache)
    age(repo)
    expected = uncached(repo)
    before = snapshot(outside)
    done = check(repo)
    assert snapshot(outside) == before
    assert report(done) == expected
    assert done.stderr.splitlines() == [f"trainlint: warning: not using the cache: {cache} is a symbolic link"]


@pytest.mark.parametrize("folder", ["imports", "shard"])
def test_a_folder_in_the_cache_that_is_a_link_is_not_used(repo, folder):
    outside, cache = repo.parent / "outside", repo / ".trainlint_cache"
    names = _learn_names(repo)
    name = next(n.parts[0] for n in names if (n.parts[0] == "imports") == (folder == "imports"))
    (outside / "entries").mkdir()
    os.symlink(outside / "entries", cache / name)
    expected = uncached(repo)
    before = snapshot(outside)
    done = check(repo)
    assert snapshot(outside) == before
    assert report(done) == expected
    assert done.stderr.splitlines() == [
        f"trainlint: warning: not using the cache: {cache / name} is a symbolic link"]


def test_an_entry_that_is_a_link_is_not_read_and_is_replaced(repo, monkeypatch):
    """Even to an entry this user's trainlint wrote for this very file (elsewhere, saying "no
    findings"): a link in the cache is a miss, and the run puts a real file in its place."""
    from trainlint import config

    outside, cache = repo.parent / "outside", repo / ".trainlint_cache"
    expected = uncached(repo)
    with monkeypatch.context() as patch:  # this project's entries, kept in a folder outside it
        patch.setattr(engine, "lint_source", no_findings)
        patch.setattr(config, "cache_directory", lambda found: outside / "entries")
        in_process("check", "--format", "json", "--select", "ALL", ".", cwd=repo)
    (name,) = [n for n in entries(outside / "entries") if n.parts[0] != "imports"]
    (cache / name.parent).mkdir()
    os.symlink(outside / "entries" / name, cache / name)
    before = snapshot(outside)
    done = check(repo)
    assert snapshot(outside) == before
    assert report(done) == expected
    assert stat.S_ISREG((cache / name).lstat().st_mode)


def test_a_cache_folder_others_may_write_to_is_not_used(repo):
    cache = repo / ".trainlint_cache"
    cache.chmod(0o777)
    expected = uncached(repo)
    done = check(repo)
    assert report(done) == expected
    assert done.stderr.splitlines() == [f"trainlint: warning: not using the cache: other users can write to {cache}"]
    assert entries(cache) == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a folder away needs root")
def test_a_cache_folder_of_another_user_is_not_used(repo):
    cache = repo / ".trainlint_cache"
    os.chown(cache, 4321, -1)
    expected = uncached(repo)
    done = check(repo)
    assert report(done) == expected
    assert done.stderr.splitlines() == [f"trainlint: warning: not using the cache: {cache} belongs to another user"]
    assert entries(cache) == []


# -- 2. a committed entry or import store does not hide findings ----------------------------------

def test_a_committed_entry_made_by_another_trainlint_hides_nothing(repo, attacker_cache):
    expected = uncached(repo)
    assert expected[1] == [("train.py", "TL401", BAD_LINE)]
    forged = attacker_cache(repo, (engine, "lint_source", no_findings))
    assert report(forged) == (0, [])  # what the author's trainlint now says
    cache = repo / ".trainlint_cache"
    shipped = {name: (cache / name).read_bytes() for name in entries(cache)}
    assert len(shipped) == 2  # the entry and the import store
    assert report(check(repo)) == expected  # a real process of the CLI
    assert all((cache / name).read_bytes() != data for name, data in shipped.items())  # rewritten
    assert report(check(repo)) == expected  # and what it wrote is right
    attacker_cache(repo, (engine, "lint_source", no_findings))  # shipped again: in-process too
    assert report(in_process("check", "--format", "json", "--select", "ALL", ".", cwd=repo)) == expected


def test_a_committed_import_store_hides_nothing(repo, attacker_cache):
    """The author's store says `evaluate.py` imports nothing, and depends on no folder (so it stays
    valid): on main, its result was then cached without the helper's hash, and a later change of
    the helper (that makes `evaluate.py` wrong) went unseen."""
    (repo / "train.py").unlink()
    (repo / "helpers.py").write_text(NO_GRAD_HELPER)
    (repo / "evaluate.py").write_text(textwrap.dedent(EVALUATE).lstrip())
    age(repo)
    attacker_cache(repo, (Project, "imported_files", lambda self, path, source: []))
    (store,) = [n for n in entries(repo / ".trainlint_cache") if n.parts[0] == "imports"]
    forged = (repo / ".trainlint_cache" / store).read_bytes()
    assert report(check(repo)) == (0, [])  # the helper enters no_grad: evaluate.py is right
    assert (repo / ".trainlint_cache" / store).read_bytes() != forged  # ignored, rewritten
    (repo / "helpers.py").write_text(NULL_CONTEXT)  # now it does not
    expected = uncached(repo)
    assert expected[1] == [("evaluate.py", "TL301", 6)]  # evaluate() leaves the model in eval mode
    assert report(check(repo)) == expected


# -- the user's key ------------------------------------------------------------------------------

def test_the_key_is_made_once_private_in_the_user_cache_folder(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "fresh-home" / "cache"))
    key = tmp_path / "fresh-home" / "cache" / "trainlint" / "key"
    expected = uncached(repo)
    assert not key.exists()  # --no-cache makes none
    assert report(check(repo)) == expected
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    made = key.read_bytes()
    assert len(made) == 32
    assert report(check(repo)) == expected
    assert key.read_bytes() == made
    assert sorted(p.name for p in key.parent.iterdir()) == ["key"]  # no temporary left


def test_a_relative_xdg_cache_home_is_ignored(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    check(repo)
    assert (tmp_path / "home" / ".cache" / "trainlint" / "key").is_file()
    assert not (repo / "relative").exists()


def _link_key_folder(home: Path, outside: Path) -> None:
    (outside / "keys").mkdir()
    home.mkdir(parents=True)
    os.symlink(outside / "keys", home / "trainlint")


def _open_key_folder(home: Path, outside: Path) -> None:
    (home / "trainlint").mkdir(parents=True)
    (home / "trainlint").chmod(0o777)


def _readable_key(home: Path, outside: Path) -> None:
    (home / "trainlint").mkdir(parents=True, mode=0o700)
    (home / "trainlint" / "key").write_bytes(os.urandom(32))
    (home / "trainlint" / "key").chmod(0o644)


def _linked_key(home: Path, outside: Path) -> None:
    (home / "trainlint").mkdir(parents=True, mode=0o700)
    (outside / "key").write_bytes(os.urandom(32))
    (outside / "key").chmod(0o600)
    os.symlink(outside / "key", home / "trainlint" / "key")


def _not_a_folder(home: Path, outside: Path) -> None:
    home.parent.mkdir(parents=True, exist_ok=True)
    home.write_text("a file where the user cache folder should be")


@pytest.mark.parametrize("plant, problem", [
    (_link_key_folder, "is a symbolic link"),
    (_open_key_folder, "other users can write to"),
    (_readable_key, "is not private to this user"),
    (_linked_key, "cannot make or read the cache key"),
    (_not_a_folder, "cannot make or read the cache key"),
], ids=["folder-link", "folder-writable", "key-readable", "key-link", "no-folder"])
def test_an_unsafe_key_means_no_cache_never_a_failure(repo, tmp_path, monkeypatch, plant, problem):
    outside, home = repo.parent / "outside", tmp_path / "user-home" / "cache"
    plant(home, outside)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    expected = uncached(repo)
    before = snapshot(outside)
    done = check(repo)
    assert report(done) == expected
    (warning,) = done.stderr.splitlines()
    assert warning.startswith("trainlint: warning: not using the cache: ") and problem in warning
    assert entries(repo / ".trainlint_cache") == []
    assert snapshot(outside) == before


def test_a_key_inside_the_checked_project_is_not_used(repo, monkeypatch):
    """A CI job that points XDG_CACHE_HOME into the checkout: the repository could ship the key."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(repo / ".cache"))
    expected = uncached(repo)
    done = check(repo)
    assert report(done) == expected
    key = repo / ".cache" / "trainlint" / "key"
    assert done.stderr.splitlines() == [
        f"trainlint: warning: not using the cache: the cache key {key} is inside the checked project"]
    assert entries(repo / ".trainlint_cache") == []


def test_a_cache_file_is_created_as_mkstemp_creates_one(tmp_path):
    """`_unique_file` (mkstemp without importing tempfile): a new private file under a random
    name in the folder, never an existing name."""
    from trainlint.cache_folder import _unique_file

    made = [_unique_file(tmp_path, ".entry.", ".tmp") for _ in range(20)]
    for fd, path in made:
        os.close(fd)
        assert path.parent == tmp_path and path.name.startswith(".entry.") and path.name.endswith(".tmp")
        if hasattr(os, "getuid"):
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert len({path for _, path in made}) == 20
