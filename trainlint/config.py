"""Configuration: `[tool.trainlint]` in pyproject.toml (or a trainlint.toml), merged with the CLI.

Where the configuration comes from:
- `--config FILE`: a `pyproject.toml` (its `[tool.trainlint]` table) or any other TOML file with
  the same keys at top level (e.g. `trainlint.toml`);
- otherwise the nearest configuration walking up from the current directory: in each directory a
  `trainlint.toml`, then a `pyproject.toml` that has a `[tool.trainlint]` table (a pyproject.toml
  without one is passed over);
- `--isolated`: none at all.

Precedence: the command line overrides the file. `--select` on the command line replaces the
file's whole rule selection (`select`, `extend-select`, `ignore`); `--extend-select` and
`--ignore` on the command line add to whatever selection is in force. `per-file-ignores` always
apply. Globs in `exclude`, `extend-exclude` and `per-file-ignores` are relative to the directory
holding the configuration file.
"""

from __future__ import annotations

import difflib
import os
import posixpath
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from trainlint.discovery import DEFAULT_EXCLUDES, Discovery
from trainlint.settings import DEFAULT_MAX_FILE_SIZE, DEFAULT_MIN_TORCH, SelectorError, Settings, codes_for, resolve_selection

KEYS = ("select", "ignore", "extend-select", "per-file-ignores", "exclude", "extend-exclude", "min-torch-version",
        "max-file-size")
CACHE_DIR_NAME = ".trainlint_cache"
_VERSION = re.compile(r"^\d+(\.\d+){0,2}$")


class ConfigError(Exception):
    """A configuration problem; the message names the file and the key."""


@dataclass(frozen=True)
class FileConfig:
    """What a configuration file says, validated. Every field is None or empty when unset."""

    path: Path | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    min_torch_version: tuple[int, ...] | None = None
    max_file_size: int | None = None

    @property
    def root(self) -> Path:
        """The directory relative globs are anchored at (and the cache lives in)."""
        return self.path.parent if self.path else Path.cwd()


@dataclass(frozen=True)
class CliSelection:
    """Rule selection given on the command line (each entry already split on commas)."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


def _has_table(pyproject: Path) -> bool:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        # a broken pyproject.toml is reported when it is loaded, so do not pass over it here
        return b"[tool.trainlint" in pyproject.read_bytes() if pyproject.is_file() else False
    return isinstance(data.get("tool"), dict) and "trainlint" in data["tool"]


def find_config(start: Path) -> Path | None:
    """The nearest trainlint.toml or pyproject.toml with `[tool.trainlint]`, from `start` up."""
    for directory in [start, *start.parents]:
        candidate = directory / "trainlint.toml"
        if candidate.is_file():
            return candidate
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and _has_table(candidate):
            return candidate
    return None


def _string_list(path: Path, key: str, value) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: '{key}' must be a list of strings, got {value!r}")
    return tuple(value)


def _selectors(path: Path, key: str, value) -> tuple[str, ...]:
    selectors = _string_list(path, key, value)
    for selector in selectors:
        try:
            codes_for(selector)
        except SelectorError as err:
            raise ConfigError(f"{path}: '{key}': {err}") from None
    return tuple(s.strip().upper() for s in selectors)


def parse_version(text: str) -> tuple[int, ...]:
    if not _VERSION.match(text.strip()):
        raise ValueError(f"'{text}' is not a version such as \"2.4\"")
    return tuple(int(part) for part in text.strip().split("."))


def load_config(path: Path) -> FileConfig:
    """Read and validate one configuration file. Raises ConfigError naming the file and key."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"cannot read configuration file {path}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: invalid TOML: {err}") from None

    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("trainlint", {}) if isinstance(data.get("tool"), dict) else {}
        where = f"{path}: [tool.trainlint]"
    else:
        table, where = data, str(path)
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")

    for key in table:
        if key not in KEYS:
            close = difflib.get_close_matches(key.replace("_", "-"), KEYS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known keys: {', '.join(KEYS)})"
            raise ConfigError(f"{where}: unknown key '{key}'{hint}")

    values: dict = {"path": path}
    if "select" in table:
        values["select"] = _selectors(path, "select", table["select"])
    if "ignore" in table:
        values["ignore"] = _selectors(path, "ignore", table["ignore"])
    if "extend-select" in table:
        values["extend_select"] = _selectors(path, "extend-select", table["extend-select"])
    if "exclude" in table:
        values["exclude"] = _string_list(path, "exclude", table["exclude"])
    if "extend-exclude" in table:
        values["extend_exclude"] = _string_list(path, "extend-exclude", table["extend-exclude"])
    if "per-file-ignores" in table:
        raw = table["per-file-ignores"]
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: 'per-file-ignores' must be a table of glob = [codes], got {raw!r}")
        values["per_file_ignores"] = tuple(
            (pattern, _selectors(path, f"per-file-ignores.{pattern}", codes)) for pattern, codes in raw.items()
        )
    if "min-torch-version" in table:
        raw = table["min-torch-version"]
        try:
            if not isinstance(raw, str):
                raise ValueError(f"{raw!r} is not a string such as \"2.4\"")
            values["min_torch_version"] = parse_version(raw)
        except ValueError as err:
            raise ConfigError(f"{path}: 'min-torch-version': {err}") from None
    if "max-file-size" in table:
        raw = table["max-file-size"]
        if type(raw) is not int or raw < 1:
            raise ConfigError(f"{path}: 'max-file-size' must be a number of bytes (at least 1), got {raw!r}")
        values["max_file_size"] = raw
    return FileConfig(**values)


def resolve_config(config_file: str | None, isolated: bool, cwd: Path | None = None) -> FileConfig:
    """The configuration a run uses (see the module docstring for where it comes from)."""
    if isolated:
        return FileConfig()
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"configuration file not found: {config_file}")
        return load_config(path.resolve())
    found = find_config((cwd or Path.cwd()).resolve())
    return load_config(found) if found else FileConfig()


def _anchor(pattern: str, root: Path, cwd: Path) -> list[str]:
    """A glob written relative to the config's directory, as matched against the paths the engine
    sees (relative to the current directory, or absolute)."""
    pattern = pattern.replace("\\", "/")
    if "/" not in pattern.strip("/"):
        return [pattern.strip("/")]  # a bare name matches the file name anywhere
    pattern = pattern.strip("/") if not os.path.isabs(pattern) else pattern
    if os.path.isabs(pattern):
        return [pattern]
    absolute = posixpath.join(root.as_posix(), pattern)
    relative = posixpath.normpath(posixpath.join(Path(os.path.relpath(root, cwd)).as_posix(), pattern))
    return [relative, absolute]


def build_settings(config: FileConfig, cli: CliSelection, cwd: Path | None = None) -> Settings:
    """Settings for the engine. Raises SelectorError for a bad command-line selector."""
    cwd = (cwd or Path.cwd()).resolve()
    if cli.select is not None:
        select, extend, ignore = list(cli.select), list(cli.extend_select), list(cli.ignore)
    else:
        select = list(config.select) if config.select is not None else None
        extend = list(config.extend_select) + list(cli.extend_select)
        ignore = list(config.ignore) + list(cli.ignore)
    selection = resolve_selection(select, extend, ignore)
    per_file = []
    for pattern, selectors in config.per_file_ignores:
        codes = frozenset().union(*(codes_for(s) for s in selectors)) if selectors else frozenset()
        for anchored in _anchor(pattern, config.root, cwd):
            per_file.append((anchored, codes))
    return Settings(
        select=selection,
        per_file_ignores=tuple(per_file),
        min_torch_version=config.min_torch_version or DEFAULT_MIN_TORCH,
        max_file_size=config.max_file_size or DEFAULT_MAX_FILE_SIZE,
    )


def build_discovery(config: FileConfig) -> Discovery:
    excludes = config.exclude if config.exclude is not None else DEFAULT_EXCLUDES
    return Discovery(excludes=tuple(excludes) + config.extend_exclude, root=str(config.root))


def cache_directory(config: FileConfig) -> Path:
    return config.root / CACHE_DIR_NAME
