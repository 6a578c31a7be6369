"""`.gitignore` patterns (trainlint/reader/ignore_patterns.py): git's semantics, checked against
git itself on random patterns, and time linear in the pattern and the path, where a backtracking
regular expression takes minutes (issue 34, item 5)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BAD
from trainlint.reader.discovery import discover
from trainlint.reader.ignore_patterns import IgnoreRules

PATHOLOGICAL = "*a" * 16 + "*b"
LONG_NAME = "a" * 200 + ".py"


@pytest.mark.parametrize("pattern", [PATHOLOGICAL, "**/" + PATHOLOGICAL, "/x/" + PATHOLOGICAL + "/**",
                                     "*a?" * 12 + "*b", "*[ab]" * 16 + "*c", "**/a" * 12 + "/b"])
def test_a_pattern_that_backtracks_in_a_regex_is_matched_in_milliseconds(pattern):
    rules = IgnoreRules([pattern])
    path = "/".join(["a"] * 12 + [LONG_NAME])
    start = time.perf_counter()
    for _ in range(10):
        assert rules.check(LONG_NAME, False) is None
        assert rules.check(path, False) is None
    assert time.perf_counter() - start < 0.5


def test_a_checked_tree_with_the_pattern_is_walked_in_milliseconds(tmp_path):
    """Through the CLI's walk (the language server's project walk is the same `discover`)."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text(PATHOLOGICAL + "\n" + ("x" + PATHOLOGICAL + "\n") * 20)
    (tmp_path / LONG_NAME).write_text(BAD)
    (tmp_path / "kept.py").write_text(BAD)
    start = time.perf_counter()
    found = discover([str(tmp_path)])
    assert time.perf_counter() - start < 2
    assert sorted(os.path.basename(p) for p in found) == sorted([LONG_NAME, "kept.py"])


def test_the_cli_walk_finishes(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text(PATHOLOGICAL + "\n")
    (tmp_path / LONG_NAME).write_text(BAD)
    done = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--select", "TL401", "."],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr[-500:]
    assert LONG_NAME in done.stdout


@pytest.mark.parametrize("lines, path, is_dir, expected", [
    (["*.pyc"], "a/b/c.pyc", False, True),
    (["build/"], "build", True, True),
    (["build/"], "build", False, None),  # a file named build: dir-only
    (["/dist"], "dist", True, True),
    (["/dist"], "sub/dist", True, None),  # anchored at the file's folder
    (["docs/_build"], "docs/_build", True, True),
    (["docs/_build"], "x/docs/_build", True, None),  # a middle slash anchors too
    (["**/tmp"], "a/b/tmp", False, True),
    (["a/**/b"], "a/b", False, True),
    (["a/**/b"], "a/x/y/b", False, True),
    (["a/**"], "a", True, None),  # everything inside a, not a itself
    (["a/**"], "a/x/y", False, True),
    (["*.py", "!keep.py"], "keep.py", False, False),
    (["*.py", "!keep.py", "*.py"], "keep.py", False, True),  # the last match wins
    (["\\#notes", "\\!bang"], "#notes", False, True),
    (["\\!bang"], "!bang", False, True),
    (["# a comment", ""], "# a comment", False, None),
    (["trailing   "], "trailing", False, True),
    (["escaped\\ "], "escaped ", False, True),
    (["[a-c]x"], "bx", False, True),
    (["[!a-c]x"], "bx", False, None),
    (["[[:digit:]]*"], "7up", False, True),
    (["[abc"], "[abc", False, None),  # an unclosed bracket: git matches nothing
    (["a?c"], "a/c", False, None),  # `?` and `*` never match a slash
    (["a*c"], "a/c", False, None),
])
def test_git_semantics(lines, path, is_dir, expected):
    assert IgnoreRules(lines).check(path, is_dir) is expected


# -- against git itself ----------------------------------------------------------------------------
ATOMS = ["a", "b", "*", "?", "[ab]", "[!a]", "**", ".py", "/", "*.py", "[[:lower:]]", "\\a", "[a-b]", "[]a]",
         "[!]]", "\\*"]
TREE = [("a", True), ("a/a", True), ("a/ba", True), ("a/a/a.py", False), ("a/a/ab", False), ("a/ba/b.py", False),
        ("a/a.py", False), ("a/bb", False), ("ab", True), ("ab/a", True), ("ab/a/b.py", False), ("ab/bb", False),
        ("b", True), ("b/a.py", False), ("a.py", False), ("b.py", False), ("bab", False)]


def _pattern(rng: random.Random) -> str:
    while True:
        text = "".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 5)))
        text = ("/" if rng.random() < 0.2 else "") + text + ("/" if rng.random() < 0.2 else "")
        text = ("!" if rng.random() < 0.2 else "") + text
        # left out: a doubled slash, a lone `/`, and `**` next to other characters in a segment
        # (gitignore(5) makes that a `*`; git's matcher, after stripping a literal prefix, does not)
        if "//" not in text and text.strip("!") != "/" and not any(
                text[i:i + 2] == "**" and ((i > 0 and text[i - 1] not in "/!*") or
                                           (i + 2 < len(text) and text[i + 2] not in "/*"))
                for i in range(len(text))):
            return text


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_random_patterns_agree_with_git_check_ignore(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for path, is_dir in TREE:
        (tmp_path / path).mkdir(parents=True, exist_ok=True) if is_dir else (tmp_path / path).touch()
    rng = random.Random(34)
    differences = []
    for _ in range(150):
        lines = [_pattern(rng) for _ in range(rng.randint(1, 3))]
        (tmp_path / ".gitignore").write_text("\n".join(lines) + "\n")
        out = subprocess.run(["git", "-C", str(tmp_path), "check-ignore", "--no-index", "--stdin", "-v", "-n"],
                             input="\n".join(path for path, _ in TREE) + "\n", capture_output=True, text=True).stdout
        by_git = {}
        for row in out.splitlines():
            info, path = row.split("\t")
            source = info.split(":", 2)[2] if info != "::" else ""
            by_git[path] = bool(source) and not source.startswith("!")
        rules = IgnoreRules(lines)
        for path, is_dir in TREE:
            parts = path.split("/")
            # git: a path in an ignored folder is ignored (GitIgnore.ignored asks about each folder)
            ours = any(rules.check("/".join(parts[:k]), True) for k in range(1, len(parts))) or \
                bool(rules.check(path, is_dir))
            if ours != by_git[path]:
                differences.append((lines, path, ours, by_git[path]))
    assert differences == []
