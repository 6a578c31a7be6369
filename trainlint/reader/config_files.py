"""Which file configures a folder (the nearest trainlint.toml, or pyproject.toml with a
`[tool.trainlint]` table), and what marks a project's root without one. Only finding and reading
the TOML is here; what its keys mean is `trainlint.config`'s business.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from trainlint.reader.files import MAX_SMALL_FILE, SkippedFile, UnreadableFile, read_source

# Files that mark a project's root when no configuration file does (`project.find_root`).
ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")


class ConfigError(Exception):
    """A configuration problem; the message names the file and the key, on one line: a key or
    value quoted from the file (or a path) may hold a newline or another control character, which
    is shown escaped (`\\n`)."""

    def __init__(self, message: str) -> None:
        super().__init__("".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                                 for c in message))


def read_toml(path: Path) -> dict:
    """A TOML file's data; ConfigError (one line naming the file) for anything that goes wrong.

    Read as a checked file is (`read_source`): a regular file of at most 1 MB, never blocking (a
    repository's pyproject.toml may be a link to /dev/stdin, a fifo or /proc/kmsg)."""
    try:
        data = read_source(str(path), MAX_SMALL_FILE, limit="configuration files")
    except (UnreadableFile, SkippedFile) as err:
        raise ConfigError(f"cannot read configuration file {path}: {err.reason}") from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: invalid TOML: {err}") from None
    except ValueError as err:  # an integer of more than 4,300 digits (int()'s limit), in any table
        raise ConfigError(f"{path}: invalid TOML value: {str(err).split(';')[0]}") from None
    except RecursionError:  # tomllib recurses on nested arrays and tables
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None


def _has_table(pyproject: Path) -> bool:
    try:
        data = read_toml(pyproject)
    except ConfigError:
        # A broken pyproject.toml that may be ours is reported when it is loaded, not passed over.
        try:
            return b"[tool.trainlint" in read_source(str(pyproject), MAX_SMALL_FILE)
        except (UnreadableFile, SkippedFile):
            return True  # unreadable: loading it gives the one-line error
    return isinstance(data.get("tool"), dict) and "trainlint" in data["tool"]


def _is_file(path: Path) -> bool:
    """`path.is_file()`, False for a path that cannot be looked at (past the length limit: no
    file can be opened there)."""
    try:
        return path.is_file()
    except OSError:
        return False


def find_config(start: Path, memo: dict[Path, Path | None] | None = None) -> Path | None:
    """The nearest trainlint.toml or pyproject.toml with `[tool.trainlint]`, from `start` up.

    `memo` remembers the answer for every directory passed on the way (one run asks for many).
    """
    memo = {} if memo is None else memo
    passed = []
    found: Path | None = None
    for directory in [start, *start.parents]:
        if directory in memo:
            found = memo[directory]
            break
        passed.append(directory)
        candidate = directory / "trainlint.toml"
        if _is_file(candidate):
            found = candidate
            break
        candidate = directory / "pyproject.toml"
        if _is_file(candidate) and _has_table(candidate):
            found = candidate
            break
    for directory in passed:
        memo[directory] = found
    return found
