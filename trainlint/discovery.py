"""Which files a run checks: walk directories for `*.py`, skip excluded and git-ignored paths.

Files named on the command line are always checked (whatever their suffix, whatever the
excludes say): naming a file is a stronger statement than a glob in a config file. Directories
are walked; below them, the default excludes, the configured `exclude`/`extend-exclude` globs and
git's ignore rules prune what is not source.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

#: Directory (or file) names never walked into unless `exclude` is set, which replaces this list.
DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".bzr", ".direnv", ".eggs", ".git", ".hg", ".svn", ".nox", ".tox", ".venv", "venv",
    "__pycache__", "__pypackages__", "_build", "build", "dist", "node_modules", "site-packages",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".trainlint_cache", ".ipynb_checkpoints",
    "*.egg-info",
)


class MissingPath(Exception):
    """A path named on the command line that does not exist."""


@dataclass(frozen=True)
class Discovery:
    """How to walk: glob patterns, and the directory relative patterns are anchored at."""

    excludes: tuple[str, ...] = DEFAULT_EXCLUDES
    root: str = "."
    use_git: bool = True
    #: Patterns matched against a path relative to `root` (those containing a `/`), or against
    #: the absolute path when they are absolute (`--exclude` globs, anchored at the current directory).
    _anchored: tuple[str, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        anchored = tuple(p.rstrip("/") if os.path.isabs(p) else p.strip("/")
                         for p in self.excludes if "/" in p.strip("/"))
        object.__setattr__(self, "_anchored", anchored)

    def is_excluded(self, path: str) -> bool:
        """True if a walked path matches an exclude: by its own name, or (for patterns with a
        `/`) by its path relative to the root."""
        name = os.path.basename(path.rstrip("/\\")) or path
        for pattern in self.excludes:
            if "/" not in pattern.strip("/") and fnmatch.fnmatchcase(name, pattern.strip("/")):
                return True
        if self._anchored:
            absolute = Path(os.path.abspath(path))
            try:
                relative = absolute.relative_to(os.path.abspath(self.root)).as_posix()
            except ValueError:
                relative = Path(path).as_posix()
            return any(fnmatch.fnmatchcase(absolute.as_posix() if os.path.isabs(p) else relative, p)
                       for p in self._anchored)
        return False


def git_ignored(directory: str) -> tuple[set[str], set[str]] | None:
    """Git-ignored (directories, files) under `directory`, relative to it, in one git call.

    None when git is missing, `directory` is not in a work tree, or `directory` itself is ignored
    (it was named explicitly, so it is checked anyway).
    """
    try:
        proc = subprocess.run(
            ["git", "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"],
            cwd=directory, capture_output=True, stdin=subprocess.DEVNULL, timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    entries = [e for e in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if e]
    if "./" in entries:
        return None
    dirs = {e.rstrip("/") for e in entries if e.endswith("/")}
    files = {e for e in entries if not e.endswith("/")}
    return dirs, files


def _walk(directory: str, discovery_for: Callable[[str], Discovery]) -> list[str]:
    ignored = git_ignored(directory) if discovery_for(directory).use_git else None
    ignored_dirs, ignored_files = ignored if ignored else (set(), set())
    found = []
    for current, dirnames, filenames in os.walk(directory):
        discovery = discovery_for(current)  # each directory's entries follow its own configuration
        relative = os.path.relpath(current, directory)
        relative = "" if relative == "." else relative.replace(os.sep, "/") + "/"
        dirnames[:] = sorted(
            d for d in dirnames
            if not discovery.is_excluded(os.path.join(current, d)) and relative + d not in ignored_dirs
        )
        for filename in sorted(filenames):
            if not filename.endswith(".py"):
                continue
            path = os.path.join(current, filename)
            if relative + filename in ignored_files or discovery.is_excluded(path):
                continue
            found.append(os.path.normpath(path))
    return found


def discover(paths: list[str], discovery: Discovery | Callable[[str], Discovery] | None = None) -> list[str]:
    """The files to check, in a stable order, each once.

    `discovery` is one Discovery for every directory, or a function giving the one that applies
    to a directory's entries (per-directory configuration).
    Raises MissingPath (its `args[0]` lists every missing path) before walking anything.
    """
    fixed = discovery if isinstance(discovery, Discovery) else Discovery()
    discovery_for = discovery if callable(discovery) else (lambda directory: fixed)
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise MissingPath(missing)
    files: list[str] = []
    seen: set[str] = set()
    for path in paths:
        candidates = _walk(path, discovery_for) if os.path.isdir(path) else [os.path.normpath(path)]
        for candidate in candidates:
            key = os.path.realpath(candidate)
            if key not in seen:
                seen.add(key)
                files.append(candidate)
    return files
