"""Issue 11's security items: checking code its user did not write must never run that code's
programs (git's repository-configured commands, a planted `torch.py`) nor let it hide findings
(a planted or racing cache). Each test plants a marker the attack would create, or a finding the
attack would hide."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BAD, BAD_LINE, GOOD
from trainlint import engine
from trainlint.cache import ResultCache, cache_key
from trainlint.engine import lint_paths
from trainlint.reader.project import Project
from trainlint.settings import Settings, resolve_selection

TL401 = Settings(select=resolve_selection(["TL401"], [], []))


def trainlint(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


# -- 1. git ---------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_repository_fsmonitor_command_is_never_run(tmp_path):
    repo, marker = tmp_path / "repo", tmp_path / "PWNED"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "core.fsmonitor", f"touch {marker}; false"], check=True)
    (repo / ".gitignore").write_text("ignored.py\n")
    (repo / "ignored.py").write_text(BAD)
    (repo / "train.py").write_text(BAD)
    done = trainlint("check", "--no-cache", "--select", "TL401", "repo", cwd=tmp_path)
    assert not marker.exists()
    assert done.returncode == 1
    assert [line.split(":")[0] for line in done.stdout.splitlines() if " TL401 " in line] == [
        os.path.join("repo", "train.py")]  # .gitignore is still honoured


def test_discovery_never_starts_git(tmp_path):
    """Whatever git is configured to run, git itself is not started: a `git` first on PATH that
    leaves a marker is never called."""
    bin_dir, marker = tmp_path / "bin", tmp_path / "git-ran"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    fake.chmod(0o755)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    (repo / ".gitignore").write_text("build_*.py\n!build_keep.py\n")
    (repo / "sub" / ".gitignore").write_text("local.py\n")
    for name in ("a.py", "build_x.py", "build_keep.py", "sub/local.py", "sub/b.py"):
        (repo / name).write_text(BAD)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = trainlint("check", "--no-cache", "--select", "TL401", ".", cwd=repo, env=env)
    assert not marker.exists()
    paths = sorted(line.split(":")[0] for line in done.stdout.splitlines() if " TL401 " in line)
    assert paths == ["a.py", "build_keep.py", os.path.join("sub", "b.py")]


# -- 2. confirm's helper process --------------------------------------------------------------------

@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs trainlint[runtime]")
def test_confirm_helper_never_imports_torch_from_the_working_directory(tmp_path):
    marker = tmp_path / "IMPORTED"
    (tmp_path / "torch.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise SystemExit(3)\n")
    program = ("from trainlint.runtime.runner import _Zygote\n"
               "z = _Zygote()\nprint(z.torch_version)\nz.close()\n")
    # -P here too: this process must find trainlint, not the planted torch
    done = subprocess.run([sys.executable, "-P", "-c", program], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert not marker.exists()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()[0].isdigit()  # the real torch's version


# -- 3. planted or corrupt cache entries ----------------------------------------------------------

@pytest.mark.parametrize("entry", [
    {}, None, [1], [], "x", {"findings": []},
    [{"path": "bad.py", "line": 3, "column": 9, "end_line": 3, "end_column": 20, "code": "TL401",
      "name": "x", "severity": "fatal", "message": "m", "fix": None}],
], ids=["empty-object", "null", "list-of-int", "empty-list", "string", "unbound-findings", "bad-severity"])
def test_a_planted_cache_entry_never_hides_or_breaks_a_finding(project, entry):
    key = cache_key(BAD.encode(), "bad.py", Settings(select=resolve_selection(["TL401"], [], [])))
    target = project / ".trainlint_cache" / key[:2] / f"{key}.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(entry))
    done = trainlint("check", "--select", "TL401", "--format", "json", "bad.py", cwd=project)
    assert "Traceback" not in done.stderr
    assert done.returncode == 1
    assert [(f["code"], f["line"]) for f in json.loads(done.stdout)["findings"]] == [("TL401", BAD_LINE)]


def test_a_forged_entry_for_other_content_is_a_miss(project):
    """An entry copied from another file (a clean one) under this file's key is not used."""
    cache = ResultCache(project / ".trainlint_cache")
    good, bad = GOOD.encode(), BAD.encode()
    cache.put(good, "bad.py", TL401, engine.lint_source(good, "bad.py", TL401))
    forged = cache._file(cache_key(good, "bad.py", TL401)).read_text()
    target = cache._file(cache_key(bad, "bad.py", TL401))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(forged)
    assert cache.get(bad, "bad.py", TL401) is None
    (result,) = lint_paths(["bad.py"], TL401, cache=cache)
    assert [f.code for f in result.findings] == ["TL401"]


def test_entries_are_bound_to_settings(project):
    cache = ResultCache(project / ".trainlint_cache")
    (first,) = lint_paths(["bad.py"], TL401, cache=cache)
    depends = Project.for_paths(["bad.py"]).dependency_digest("bad.py", BAD.encode())  # as lint_paths keys it
    other = Settings(select=resolve_selection(["TL401"], [], []), min_torch_version=(2, 0))
    assert cache.get(BAD.encode(), "bad.py", other, depends) is None
    assert cache.get(BAD.encode(), "bad.py", TL401, depends).findings == first.findings


# -- 4. a file edited while it is checked -----------------------------------------------------------

def test_a_file_edited_during_a_run_is_cached_under_the_bytes_that_were_linted(project, monkeypatch):
    (project / "train.py").write_text(GOOD)
    cache = ResultCache(project / ".trainlint_cache")
    real = engine.lint_source

    def lint_then_edit(source, path="<stdin>", settings=None, project=None):
        result = real(source, path, settings, project)
        Path(path).write_text(BAD)  # the user saves a new version while this run is going
        return result

    monkeypatch.setattr(engine, "lint_source", lint_then_edit)
    (during,) = lint_paths(["train.py"], TL401, cache=cache)
    assert during.findings == []  # the version that was read was clean
    monkeypatch.setattr(engine, "lint_source", real)
    (later,) = lint_paths(["train.py"], TL401, cache=cache)
    assert [(f.code, f.line) for f in later.findings] == [("TL401", BAD_LINE)]


def test_cache_directory_that_cannot_be_written_only_costs_time(project):
    blocked = project / "blocked"
    blocked.write_text("a file where the cache directory should be")
    cache = ResultCache(blocked)
    (result,) = lint_paths(["bad.py"], TL401, cache=cache)
    assert [f.code for f in result.findings] == ["TL401"]
    assert stat.S_ISREG(blocked.stat().st_mode)


def test_a_planted_fifo_in_the_cache_does_not_block(project):
    key = cache_key(BAD.encode(), "bad.py", TL401)
    target = project / ".trainlint_cache" / key[:2] / f"{key}.json"
    target.parent.mkdir(parents=True)
    os.mkfifo(target)
    done = trainlint("check", "--select", "TL401", "bad.py", cwd=project)
    assert done.returncode == 1 and " TL401 " in done.stdout


# -- issue 34: a hostile repository cannot hide a finding ------------------------------------------

def _tl401_lines(done: subprocess.CompletedProcess) -> list[int]:
    return [f["line"] for f in json.loads(done.stdout)["findings"] if f["code"] == "TL401"]


@pytest.mark.parametrize("quote", ['"""', "'''"])
def test_a_disable_file_directive_in_a_string_hides_nothing(tmp_path, quote):
    """`# trainlint: disable-file` counts only in a real comment: the same line inside a
    triple-quoted string is text (as a `# noqa` in a string is), while the real comment still
    disables the file."""
    body = f'import torch\n\nNOTE = {quote}\n# trainlint: disable-file\n# trainlint: disable-file=TL401\n{quote}\n' \
           f'state = torch.load("ckpt.pt", weights_only=False)\n'
    (tmp_path / "train.py").write_text(body)
    done = trainlint("check", "--no-cache", "--isolated", "--format", "json", "train.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert _tl401_lines(done) == [7]
    for directive in ("# trainlint: disable-file", "# trainlint: disable-file=TL401",
                      "#trainlint: disable-file = unsafe-torch-load"):
        (tmp_path / "train.py").write_text(f"{directive}\n{body}")
        done = trainlint("check", "--no-cache", "--isolated", "--format", "json", "train.py", cwd=tmp_path)
        assert (done.returncode, _tl401_lines(done)) == (0, []), directive


NFKC_TWINS = [  # (as written, as Python reads it): Python reads every identifier in its NFKC form
    ('state = torch.load("ckpt.pt", ｗeights_only=False)', 'state = torch.load("ckpt.pt", weights_only=False)'),
    ('state = torch.ｌｏａｄ("ckpt.pt", weights_only=False)', 'state = torch.load("ckpt.pt", weights_only=False)'),
    ('state = ｔｏｒｃｈ.𝐥𝐨𝐚𝐝("ckpt.pt", ｗｅｉｇｈｔｓ＿ｏｎｌｙ=False)',
     'state = torch.load("ckpt.pt", weights_only=False)'),
    # NFKC makes `ﬁ` two letters: the columns after it are those of the line as written
    ('ﬁle = "ckpt.pt"; state = torch.ｌｏａｄ(ﬁle, weights_only=False)',
     'file = "ckpt.pt"; state = torch.load(file, weights_only=False)'),
]


@pytest.mark.parametrize("written, ascii_form", NFKC_TWINS)
def test_identifiers_are_read_as_python_reads_them(tmp_path, written, ascii_form):
    """`torch.ｌｏａｄ(p, ｗeights_only=False)` runs the unsafe load: it is reported exactly as its
    ASCII form is (through the text pre-filter, the gate and the rule), at the span of the call as
    written; a string holding such letters stays a string."""
    (tmp_path / "written.py").write_text(f"import torch\n\n{written}\n")
    (tmp_path / "ascii.py").write_text(f"import torch\n\n{ascii_form}\n")
    done = trainlint("check", "--no-cache", "--isolated", "--format", "json", "written.py", "ascii.py",
                     cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    findings = json.loads(done.stdout)["findings"]
    by_file = {name: [(f["code"], f["line"]) for f in findings if f["path"] == name]
               for name in ("written.py", "ascii.py")}
    assert by_file["written.py"] == by_file["ascii.py"] == [("TL401", 3)]
    [finding] = [f for f in findings if f["path"] == "written.py"]
    call = written[written.rindex("state = ") + len("state = "):]  # the call, as written
    assert written[finding["column"] - 1:finding["end_column"] - 1] == call


def test_a_string_is_not_an_identifier(tmp_path):
    """Python normalises identifiers, never strings: `getattr(torch, "ｌｏａｄ")` is no `torch.load`."""
    (tmp_path / "train.py").write_text('import torch\n\nstate = getattr(torch, "ｌｏａｄ")("ckpt.pt", weights_only=False)\n'
                                       'other = torch.load("ｗeights_only=False", weights_only=True)\n')
    done = trainlint("check", "--no-cache", "--isolated", "--select", "TL401", "--format", "json", "train.py",
                     cwd=tmp_path)
    assert (done.returncode, json.loads(done.stdout)["findings"]) == (0, []), done.stderr


@pytest.fixture
def skipping_tree(tmp_path) -> Path:
    """A repository with a finding, and a padded file and a fifo that nobody can check."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "train.py").write_text(BAD)
    (root / "padded.py").write_text(BAD + "x = 1\n" * 1000)  # over the limit configured below
    os.mkfifo(root / "fifo.py")
    (root / "trainlint.toml").write_text("max-file-size = 2000\n")
    return root


def test_a_skipped_file_fails_the_run_unless_allowed(skipping_tree):
    """A file padded past `max-file-size`, or made a fifo, hides its findings: it makes the run
    exit 2 (an error line naming it), unless the user accepts skipped files."""
    done = trainlint("check", "--no-cache", "--format", "json", "--select", "TL401", ".", cwd=skipping_tree)
    assert done.returncode == 2, done.stderr
    assert _tl401_lines(done) == [BAD_LINE]  # the other files are still checked and reported
    errors = sorted(line for line in done.stderr.splitlines() if line.startswith("trainlint: error:"))
    assert len(errors) == 2 and "skipped fifo.py: not a regular file" in errors[0] \
        and "skipped padded.py: " in errors[1] and "(max-file-size)" in errors[1]
    assert all("--allow-skipped" in line for line in errors)
    allowed = trainlint("check", "--no-cache", "--select", "TL401", "--allow-skipped", ".", cwd=skipping_tree)
    assert allowed.returncode == 1  # the finding of train.py; the skipped files are warnings
    assert sorted(line.split(":")[2].split()[1] for line in allowed.stderr.splitlines()) == ["fifo.py", "padded.py"]
    assert all(line.startswith("trainlint: warning: skipped ") for line in allowed.stderr.splitlines())
    (skipping_tree / "train.py").write_text(GOOD)
    (skipping_tree / "trainlint.toml").write_text("max-file-size = 2000\nallow-skipped = true\n")
    configured = trainlint("check", "--no-cache", "--select", "TL401", ".", cwd=skipping_tree)
    assert configured.returncode == 0 and configured.stderr.count("trainlint: warning: skipped ") == 2
    (skipping_tree / "trainlint.toml").write_text("max-file-size = 2000\nallow-skipped = 1\n")
    wrong = trainlint("check", "--no-cache", ".", cwd=skipping_tree)
    assert wrong.returncode == 2 and "'allow-skipped' must be true or false" in wrong.stderr


def test_a_link_out_of_the_project_is_never_read(tmp_path):
    """A checked file that links to the CI job's environment or to a key outside the repository is
    never read, so `--show-source` cannot print it: it is skipped (exit 2). A link that stays in
    the project is checked as its target is."""
    secret = tmp_path / "home" / ".ssh" / "id_rsa"
    secret.parent.mkdir(parents=True)
    secret.write_text('KEY = "PRIVATE-KEY-MARKER"\n' + BAD)  # would give a finding, and print the key
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "models").mkdir()
    (repo / "models" / "real.py").write_text(BAD)
    (repo / "key.py").symlink_to(secret)
    (repo / "environ.py").symlink_to("/proc/self/environ")
    (repo / "inside.py").symlink_to(repo / "models" / "real.py")
    env = {**os.environ, "CI_TOKEN": "ENVIRON-MARKER"}
    for args in ([], ["key.py", "environ.py"]):  # walked, and named on the command line
        done = trainlint("check", "--no-cache", "--show-source", "--select", "TL000,TL401", *args, cwd=repo, env=env)
        assert done.returncode == 2, done.stderr
        assert "MARKER" not in done.stdout + done.stderr
        errors = sorted(line for line in done.stderr.splitlines() if line.startswith("trainlint: error: skipped"))
        assert len(errors) == 2
        assert errors[0].startswith("trainlint: error: skipped environ.py: it leads to /proc/")
        assert errors[1].startswith(f"trainlint: error: skipped key.py: its real path {secret} is outside "
                                    f"the project root {repo}")
    walked = trainlint("check", "--no-cache", "--format", "json", "--select", "TL401", "--allow-skipped",
                       cwd=repo, env=env)
    assert walked.returncode == 1 and "MARKER" not in walked.stdout + walked.stderr
    # the link within the project is checked (the walk checks one file once, by its real path)
    assert [f["path"] for f in json.loads(walked.stdout)["findings"]] == ["inside.py"]
    named = trainlint("check", "--no-cache", "--select", "TL401", "inside.py", cwd=repo, env=env)
    assert named.returncode == 1 and named.stderr == ""
