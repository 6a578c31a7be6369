"""Where fixes write, and what they write: each attack of issue 23 planted in a repository that is
checked (`fix = true` + `unsafe-fixes = true` in its configuration and a link to a file outside
it, a read-only file), and the line endings of every rule's fix in CRLF and CR files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from conftest import BAD
from trainlint.engine import lint_source
from trainlint.fixes import FixPolicy, fix_source, write_fixed, WriteError
from trainlint.rules import registry
from trainlint.settings import Settings, resolve_selection

ALL = Settings(select=resolve_selection(["ALL"], [], []))
BAD_FIXED = BAD.replace("weights_only=False", "weights_only=True")  # TL401's (unsafe) fix
FIX_EVERYTHING = "[tool.trainlint]\nfix = true\nunsafe-fixes = true\n"


# -- line endings ---------------------------------------------------------------------------------

def _fixed_examples():
    for code, rule in registry().items():
        for number, example in enumerate(rule.bad_examples()):
            if example.fixed is not None:
                for name, ending in (("crlf", "\r\n"), ("cr", "\r")):
                    yield pytest.param(code, example, ending, id=f"{code}-bad-{number}-{name}")


@pytest.mark.parametrize("code, example, ending", list(_fixed_examples()))
def test_every_fix_writes_the_line_ending_of_the_file(code, example, ending):
    source = example.code.replace("\n", ending)
    only = FixPolicy(unsafe=True, fixable=frozenset({code}))
    fixed = fix_source(source, lambda text: lint_source(text, "example.py", ALL), only).source
    assert fixed == example.fixed.replace("\n", ending)


def test_a_moved_line_is_split_at_line_endings_only():
    """A U+2028 in a string literal is not a line ending: wrapping the loop keeps the literal whole."""
    loop = "        for x, y in val_loader:\n            log('batch\u2028', model(x))\n"
    source = ("import torch\nimport torch.nn.functional as F\n\n\n"
              "def train(model, optimizer, train_loader, val_loader):\n"
              "    for x, y in train_loader:\n        optimizer.zero_grad()\n"
              "        F.cross_entropy(model(x), y).backward()\n        optimizer.step()\n"
              "    model.eval()\n" + loop.replace("        ", "    ", 1).replace("            ", "        "))
    only = FixPolicy(unsafe=True, fixable=frozenset({"TL301"}))
    fixed = fix_source(source, lambda text: lint_source(text, "example.py", ALL), only).source
    assert fixed == source.replace(loop.replace("        ", "    ", 1).replace("            ", "        "),
                                   "    with torch.no_grad():\n" + loop)


# -- where fixes write ----------------------------------------------------------------------------

@pytest.fixture
def repository(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """A repository (the current directory) whose configuration fixes everything, with its own
    buggy file, and `train.py`, a link to a buggy file outside it; (repository, outside file)."""
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()
    (repo / ".git").mkdir()
    (repo / "pyproject.toml").write_text(FIX_EVERYTHING)
    (repo / "own.py").write_text(BAD)
    victim = outside / "victim.py"
    victim.write_text(BAD)
    (repo / "train.py").symlink_to(victim)
    monkeypatch.chdir(repo)
    return repo, victim


def _skipped_link(repo: Path, victim: Path) -> str:
    """The error line of `train.py`, the link out of the project: never read (issue 34), so never
    reported on nor written."""
    return (f"trainlint: error: skipped train.py: its real path {os.path.realpath(victim)} is outside the "
            f"project root {os.path.realpath(repo)}, and is never read (--allow-skipped or "
            f"`allow-skipped = true` accepts it)")


def test_a_repositorys_fix_setting_never_rewrites_a_file_outside_it(repository, run):
    repo, victim = repository
    result = run("check", "--no-cache", ".")
    assert victim.read_text() == BAD  # nothing outside changed
    assert (repo / "own.py").read_text() == BAD_FIXED  # the configuration holds for its own files
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [_skipped_link(repo, victim)]
    assert "train.py" not in result.stdout  # not read: neither reported on nor fixed


def test_fix_on_the_command_line_never_writes_through_a_link_out_of_the_project(repository, run):
    repo, victim = repository
    (repo / "lib").mkdir()
    (repo / "lib" / "real.py").write_text(BAD)
    (repo / "alias.py").symlink_to(repo / "lib" / "real.py")  # a link that stays inside is fixed through
    result = run("check", "--no-cache", "--fix", "--unsafe-fixes", ".")
    assert victim.read_text() == BAD
    assert (repo / "own.py").read_text() == BAD_FIXED
    assert (repo / "alias.py").is_symlink() and (repo / "lib" / "real.py").read_text() == BAD_FIXED
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [_skipped_link(repo, victim)]
    assert "train.py" not in result.stdout


def test_a_configuration_fixes_only_files_under_its_own_folder(tmp_path, monkeypatch, run):
    """sub/'s `fix = true` does not reach sub/train.py's target in another folder of the
    repository (which a `--fix` on the command line would fix)."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text(FIX_EVERYTHING)
    shared = tmp_path / "zlib" / "shared.py"  # walked after sub/: reached as sub/train.py first
    shared.parent.mkdir()
    shared.write_text(BAD)
    (tmp_path / "sub" / "train.py").symlink_to(shared)
    monkeypatch.chdir(tmp_path)
    result = run("check", "--no-cache", ".")  # the project root is this folder: a fix may write here
    assert result.exit_code == 1 and shared.read_text() == BAD
    result = run("check", "--no-cache", "--fix", "--unsafe-fixes", ".")
    assert result.exit_code == 0 and shared.read_text() == BAD_FIXED


def test_a_read_only_file_is_never_fixed(repository, run):
    repo, _ = repository
    (repo / "own.py").chmod(0o444)
    result = run("check", "--no-cache", "own.py")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["trainlint: error: not fixing own.py: the file is read-only"]
    assert (repo / "own.py").read_text() == BAD
    assert stat.S_IMODE((repo / "own.py").stat().st_mode) == 0o444
    assert "own.py:3:9: TL401" in result.stdout


def test_write_fixed_refuses_what_it_must_not_write(tmp_path):
    inside, outside = tmp_path / "project", tmp_path / "elsewhere.py"
    inside.mkdir()
    outside.write_text("a = 1\n")
    (inside / "link.py").symlink_to(outside)
    with pytest.raises(WriteError, match="outside the project"):
        write_fixed(str(inside / "link.py"), b"a = 1\n", "a = 2\n", os.path.realpath(inside))
    (inside / "locked.py").write_text("a = 1\n")
    (inside / "locked.py").chmod(0o444)
    with pytest.raises(WriteError, match="read-only"):
        write_fixed(str(inside / "locked.py"), b"a = 1\n", "a = 2\n", os.path.realpath(inside))
    assert outside.read_text() == "a = 1\n" and (inside / "locked.py").read_text() == "a = 1\n"


def test_add_noqa_never_writes_through_a_link_out_of_the_project(repository, run):
    repo, victim = repository
    (repo / "pyproject.toml").write_text("[tool.trainlint]\n")  # no fixes: --add-noqa alone writes
    result = run("check", "--no-cache", "--add-noqa", ".")
    assert victim.read_text() == BAD  # nothing outside changed
    assert "# noqa: TL401" in (repo / "own.py").read_text()
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [_skipped_link(repo, victim)]


def test_add_noqa_never_writes_a_read_only_file(repository, run):
    repo, _ = repository
    (repo / "own.py").chmod(0o444)
    result = run("check", "--no-cache", "--add-noqa", "own.py")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["trainlint: error: --add-noqa: not fixing own.py: the file is read-only"]
    assert (repo / "own.py").read_text() == BAD
