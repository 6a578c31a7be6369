"""Which files a run checks: walk directories for `*.py`, skip excluded and git-ignored paths
(read from `.gitignore` files: git itself is never run on a checked tree).

Files named on the command line are always checked (whatever their suffix, whatever the
excludes say): naming a file is a stronger statement than a glob in a config file. Directories
are walked; below them, the default excludes, the configured `exclude`/`extend-exclude` globs and
git's ignore rules prune what is not source.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

#: Directory (or file) names never walked into unless `exclude` is set, which replaces this list.
DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".bzr", ".direnv", ".eggs", ".git", ".hg", ".svn", ".nox", ".tox", ".venv", "venv",
    "__pycache__", "__pypackages__", "_build", "build", "dist", "node_modules", "site-packages",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".trainlint_cache", ".ipynb_checkpoints",
    "*.egg-info",
)


#: Bytes read of one ignore file; a larger one is read up to this much.
_MAX_IGNORE_FILE = 1 << 20


class MissingPath(Exception):
    """A path named on the command line that does not exist."""


def _unlisted(errors: list[tuple[str, str]] | None) -> Callable[[OSError], None]:
    """os.walk's `onerror`: a folder that cannot be listed (no permission, a path past the system's
    length limit) is an error naming it, not a folder silently left out."""
    def note(err: OSError) -> None:
        if errors is not None:
            errors.append((err.filename, f"cannot list {err.filename}: {err.strerror or err}"))
    return note


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


def _repository_root(directory: str) -> str | None:
    """The nearest folder at or above `directory` holding `.git` (a folder, or a file in a worktree)."""
    current = os.path.abspath(directory)
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _read_patterns(path: str) -> GitIgnoreSpec | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read(_MAX_IGNORE_FILE).splitlines()
    except (OSError, ValueError):
        return None
    if not lines:
        return None
    from pathspec import GitIgnoreSpec  # only where a .gitignore has patterns (tens of ms to import)

    return GitIgnoreSpec.from_lines(lines)


class GitIgnore:
    """Git's ignore rules for a walk, read from `.gitignore` files (and `.git/info/exclude`)
    without running git: git would run programs the repository configures (`core.fsmonitor`,
    hooks), and a linter checks repositories its user did not write.

    A deeper `.gitignore` overrides a shallower one; within one file the last matching pattern
    wins (both as in git). Outside a git work tree nothing is ignored.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self._specs: dict[str, GitIgnoreSpec | None] = {}  # folder (relative to root) -> its rules
        info = os.path.join(root, ".git", "info", "exclude")
        self._exclude = _read_patterns(info) if os.path.isfile(info) else None

    @classmethod
    def for_directory(cls, directory: str) -> "GitIgnore | None":
        root = _repository_root(directory)
        return cls(root) if root is not None else None

    def _spec(self, folder: str) -> GitIgnoreSpec | None:
        if folder not in self._specs:
            self._specs[folder] = _read_patterns(os.path.join(self.root, folder, ".gitignore"))
        return self._specs[folder]

    def ignored(self, path: str, is_dir: bool) -> bool:
        """True if git would ignore `path` (a walked file or folder)."""
        relative = os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")
        if relative.startswith("../") or relative == "..":
            return False
        parts = relative.split("/")
        candidates = []  # (folder of the rules, the rules), deepest first
        for depth in range(len(parts) - 1, -1, -1):
            folder = "/".join(parts[:depth])
            candidates.append((folder, self._spec(folder)))
        candidates.append(("", self._exclude))
        for folder, spec in candidates:
            if spec is None:
                continue
            inside = "/".join(parts[len(folder.split("/")) if folder else 0:])
            result = spec.check_file(inside + "/" if is_dir else inside)
            if result.include is not None:
                return result.include
        return False


def _walk(directory: str, discovery_for: Callable[[str], Discovery], errors: list[tuple[str, str]] | None = None) -> list[str]:
    gitignore = GitIgnore.for_directory(directory) if discovery_for(directory).use_git else None
    if gitignore is not None and gitignore.ignored(directory, is_dir=True):
        gitignore = None  # named explicitly: checked anyway, as are its contents
    found = []
    for current, dirnames, filenames in os.walk(directory, onerror=_unlisted(errors)):
        discovery = discovery_for(current)  # each directory's entries follow its own configuration
        dirnames[:] = sorted(
            d for d in dirnames
            if not discovery.is_excluded(os.path.join(current, d))
            and not (gitignore and gitignore.ignored(os.path.join(current, d), is_dir=True))
        )
        for filename in sorted(filenames):
            if not filename.endswith(".py"):
                continue
            path = os.path.join(current, filename)
            if discovery.is_excluded(path) or (gitignore and gitignore.ignored(path, is_dir=False)):
                continue
            found.append(os.path.normpath(path))
    return found


def _unreadable(path: str) -> str | None:
    """Why a named path that exists cannot be looked at (a folder above it that cannot be searched,
    a name past the length limit), as an error; None when it can be, or does not exist."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError, ValueError):  # ValueError: a NUL in the name
        return None
    except OSError as err:
        return f"cannot read {path}: {err.strerror or err}"
    return None


def discover(paths: list[str], discovery: Discovery | Callable[[str], Discovery] | None = None,
             errors: list[tuple[str, str]] | None = None) -> list[str]:
    """The files to check, in a stable order, each once.

    `discovery` is one Discovery for every directory, or a function giving the one that applies
    to a directory's entries (per-directory configuration). With `errors`, a path or folder that
    cannot be looked at or listed is there as (the path, a one-line message naming it); the rest
    are still found. Raises MissingPath (its `args[0]` lists every missing path) before walking anything.
    """
    fixed = discovery if isinstance(discovery, Discovery) else Discovery()
    discovery_for = discovery if callable(discovery) else (lambda directory: fixed)
    unreadable = {path: _unreadable(path) for path in paths}
    missing = [p for p in paths if not os.path.exists(p) and (errors is None or unreadable[p] is None)]
    if missing:
        raise MissingPath(missing)
    files: list[str] = []
    seen: set[str] = set()
    for path in paths:
        if unreadable[path] is not None:
            errors.append((path, unreadable[path]))
            continue
        candidates = _walk(path, discovery_for, errors) if os.path.isdir(path) else [os.path.normpath(path)]
        for candidate in candidates:
            key = os.path.realpath(candidate)
            if key not in seen:
                seen.add(key)
                files.append(candidate)
    return files
