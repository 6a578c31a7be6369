"""Configuration: `[tool.trainlint]` in pyproject.toml (or a trainlint.toml), merged with the CLI.

Where the configuration comes from, as ruff does it, for each checked file on its own:
- `--config FILE`: that file for every checked file: a `pyproject.toml` (its `[tool.trainlint]`
  table) or any other TOML file with the same keys at top level (e.g. `trainlint.toml`);
- otherwise the nearest configuration walking up from the file's directory: in each directory a
  `trainlint.toml`, then a `pyproject.toml` that has a `[tool.trainlint]` table (a pyproject.toml
  without one is passed over); none found: the defaults;
- `--isolated`: none at all.

Precedence: the command line overrides the file. `--select` on the command line replaces the
file's whole rule selection (`select`, `extend-select`, `ignore`); `--extend-select` and
`--ignore` on the command line add to whatever selection is in force. `per-file-ignores` always
apply. Globs in `exclude`, `extend-exclude` and `per-file-ignores` are relative to the directory
holding the configuration file that applies; `--exclude` globs are relative to the current
directory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from trainlint.reader.config_files import ConfigError, find_config, read_toml
from trainlint.reader.discovery import DEFAULT_EXCLUDES, DEFAULT_INCLUDE, Discovery
from trainlint.settings import (DEFAULT_MAX_FILE_SIZE, DEFAULT_MIN_TORCH, DEFAULT_TEST_CODE_IGNORE, FixPolicy, SelectorError, Settings,
                                canonical_selector, codes_for, resolve_selection)

CACHE_DIR_NAME = ".trainlint_cache"
_VERSION = re.compile(r"^\d+(\.\d+){0,2}$")


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
    #: file-name globs a directory walk checks (None: DEFAULT_INCLUDE, `*.py` and `*.ipynb`)
    include: tuple[str, ...] | None = None
    extend_include: tuple[str, ...] = ()
    min_torch_version: tuple[int, ...] | None = None
    max_file_size: int | None = None
    #: `fix = true`: `check` applies fixes as if `--fix` were given; `unsafe-fixes` adds the unsafe ones
    fix: bool | None = None
    unsafe_fixes: bool | None = None
    #: codes whose fixes may be applied (None: all) and codes whose fixes never are
    fixable: tuple[str, ...] | None = None
    unfixable: tuple[str, ...] = ()
    test_code_ignore: tuple[str, ...] | None = None
    #: `allow-skipped = true`: a skipped file (too large, not regular, leading out of the project)
    #: is a warning and leaves the exit code alone, instead of an error (exit 2)
    allow_skipped: bool | None = None
    #: `include-unproven = true`: also report (at info) findings whose required premises are unknown
    include_unproven: bool | None = None
    #: The keys the file sets (for `--show-settings`: where each setting came from).
    keys: frozenset[str] = frozenset()

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
    #: `--exclude` globs (relative to the current directory) and `--force-exclude`.
    exclude: tuple[str, ...] = ()
    force_exclude: bool = False
    #: `--fix/--no-fix` and `--unsafe-fixes/--no-unsafe-fixes`; None: the configuration decides
    fix: bool | None = None
    unsafe_fixes: bool | None = None
    #: `--allow-skipped`; None: the configuration decides
    allow_skipped: bool | None = None
    #: `--include-unproven/--no-include-unproven`; None: the configuration decides
    include_unproven: bool | None = None


def _string_list(path: Path, key: str, value) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: '{key}' must be a list of strings, got {value!r}")
    return tuple(value)


def _selectors(path: Path, key: str, value) -> tuple[str, ...]:
    try:
        return tuple(canonical_selector(selector) for selector in _string_list(path, key, value))
    except SelectorError as err:
        raise ConfigError(f"{path}: '{key}': {err}") from None


def _select(path: Path, key: str, value) -> tuple[str, ...]:
    """`select` names the rules that run: an empty list would run none and pass every file, as
    `--select ''` would (which the command line refuses too)."""
    selectors = _selectors(path, key, value)
    if not selectors:
        raise ConfigError(f"{path}: '{key}' is empty: it would run no rule (leave it out for the "
                          f"default rules; see `trainlint rules`)")
    return selectors


def parse_version(text: str) -> tuple[int, ...]:
    if not _VERSION.match(text.strip()):
        raise ValueError(f"'{text}' is not a version such as \"2.4\"")
    return tuple(int(part) for part in text.strip().split("."))


def _per_file_ignores(path: Path, key: str, raw) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: '{key}' must be a table of glob = [codes], got {raw!r}")
    return tuple((pattern, _selectors(path, f"{key}.{pattern}", codes)) for pattern, codes in raw.items())


def _min_torch_version(path: Path, key: str, raw) -> tuple[int, ...]:
    try:
        if not isinstance(raw, str):
            raise ValueError(f"{raw!r} is not a string such as \"2.4\"")
        return parse_version(raw)
    except ValueError as err:
        raise ConfigError(f"{path}: '{key}': {err}") from None


def _max_file_size(path: Path, key: str, raw) -> int:
    if type(raw) is not int or raw < 1:
        raise ConfigError(f"{path}: '{key}' must be a number of bytes (at least 1), got {raw!r}")
    return raw


def _bool(path: Path, key: str, raw) -> bool:
    if not isinstance(raw, bool):
        raise ConfigError(f"{path}: '{key}' must be true or false, got {raw!r}")
    return raw


#: Every configuration key: the FileConfig field it fills and the function validating its value
#: (called with the file, the key and the raw value; raises ConfigError naming both).
SCHEMA: dict[str, tuple[str, Callable]] = {
    "select": ("select", _select),
    "ignore": ("ignore", _selectors),
    "extend-select": ("extend_select", _selectors),
    "per-file-ignores": ("per_file_ignores", _per_file_ignores),
    "exclude": ("exclude", _string_list),
    "extend-exclude": ("extend_exclude", _string_list),
    "include": ("include", _string_list),
    "extend-include": ("extend_include", _string_list),
    "min-torch-version": ("min_torch_version", _min_torch_version),
    "max-file-size": ("max_file_size", _max_file_size),
    "fix": ("fix", _bool),
    "unsafe-fixes": ("unsafe_fixes", _bool),
    "fixable": ("fixable", _selectors),
    "unfixable": ("unfixable", _selectors),
    "test-code-ignore": ("test_code_ignore", _selectors),
    "allow-skipped": ("allow_skipped", _bool),
    "include-unproven": ("include_unproven", _bool),
}
KEYS = tuple(SCHEMA)


def load_config(path: Path) -> FileConfig:
    """Read and validate one configuration file. Raises ConfigError naming the file and key."""
    data = read_toml(path)
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("trainlint", {}) if isinstance(data.get("tool"), dict) else {}
        where = f"{path}: [tool.trainlint]"
    else:
        table, where = data, str(path)
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")

    values: dict = {"path": path, "keys": frozenset(table)}
    for key, raw in table.items():
        if key not in SCHEMA:
            import difflib  # only for an unknown key's suggestion

            close = difflib.get_close_matches(key.replace("_", "-"), KEYS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known keys: {', '.join(KEYS)})"
            raise ConfigError(f"{where}: unknown key '{key}'{hint}")
        name, parse = SCHEMA[key]
        values[name] = parse(path, key, raw)
    return FileConfig(**values)


def _explicit_config(config_file: str) -> FileConfig:
    path = Path(config_file)
    if not path.exists():
        raise ConfigError(f"configuration file not found: {config_file}")
    if not path.is_file():  # a fifo, a link to /dev/stdin: named as given, not as resolved
        raise ConfigError(f"cannot read configuration file {config_file}: not a regular file")
    return load_config(path.resolve())


def resolve_config(config_file: str | None, isolated: bool, cwd: Path | None = None) -> FileConfig:
    """The configuration found from the current directory (or `--config`, or none when isolated):
    where the cache and SARIF's root are, and what a file without its own configuration uses."""
    if isolated:
        return FileConfig()
    if config_file is not None:
        return _explicit_config(config_file)
    found = find_config((cwd or Path.cwd()).resolve())
    return load_config(found) if found else FileConfig()


def build_settings(config: FileConfig, cli: CliSelection) -> Settings:
    """Settings for the engine. Raises SelectorError for a bad command-line selector."""
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
        pattern = pattern.replace("\\", "/")
        per_file.append((pattern.removeprefix("./") if "/" in pattern.strip("/") else pattern.strip("/"), codes))
    return Settings(
        select=selection,
        per_file_ignores=tuple(per_file),
        min_torch_version=config.min_torch_version or DEFAULT_MIN_TORCH,
        max_file_size=config.max_file_size or DEFAULT_MAX_FILE_SIZE,
        root=str(config.root) if config.path else None,
        test_code_ignore=_codes(config.test_code_ignore if config.test_code_ignore is not None
                                else DEFAULT_TEST_CODE_IGNORE),
        include_unproven=cli.include_unproven if cli.include_unproven is not None else bool(config.include_unproven),
    )


def _codes(selectors) -> frozenset[str]:
    return frozenset().union(*(codes_for(s) for s in selectors)) if selectors else frozenset()


def governs(config: FileConfig, path: str) -> bool:
    """The file's real path (symlinks resolved) is under the configuration file's own folder: a
    repository's `fix = true` must not rewrite a file outside it that a link in it leads to."""
    if config.path is None:
        return False
    folder = os.path.realpath(config.root)
    return os.path.realpath(path).startswith(folder.rstrip(os.sep) + os.sep)


def build_fix_policy(config: FileConfig, cli: CliSelection) -> FixPolicy:
    """Which fixes `--fix` may apply to a file under `config`; the command line overrides."""
    unsafe = cli.unsafe_fixes if cli.unsafe_fixes is not None else bool(config.unsafe_fixes)
    fixable = _codes(config.fixable) if config.fixable is not None else None
    return FixPolicy(unsafe, fixable, _codes(config.unfixable))


def build_discovery(config: FileConfig, cli: CliSelection | None = None) -> Discovery:
    excludes = config.exclude if config.exclude is not None else DEFAULT_EXCLUDES
    extra: tuple[str, ...] = ()
    if cli is not None:  # command-line globs are relative to the current directory
        extra = tuple(p if "/" not in p.strip("/") else os.path.join(os.getcwd(), p.strip("/")).replace("\\", "/")
                      for p in cli.exclude)
    include = config.include if config.include is not None else DEFAULT_INCLUDE
    return Discovery(excludes=tuple(excludes) + config.extend_exclude + extra, root=str(config.root),
                     include=tuple(include) + config.extend_include)


def cache_directory(config: FileConfig) -> Path:
    return config.root / CACHE_DIR_NAME


@dataclass
class Resolver:
    """The configuration, settings and excludes that apply to each file and directory.

    Configurations are looked up once per directory and loaded once per file; equal
    configurations give the same Settings object, so files can be grouped by it.
    """

    config_file: str | None = None
    isolated: bool = False
    cli: CliSelection = field(default_factory=CliSelection)
    _nearest: dict[Path, Path | None] = field(default_factory=dict, repr=False)
    _configs: dict[Path | None, FileConfig] = field(default_factory=dict, repr=False)
    _settings: dict[Path | None, Settings] = field(default_factory=dict, repr=False)
    _discovery: dict[Path | None, Discovery] = field(default_factory=dict, repr=False)
    _policies: dict[tuple[Path | None, bool], FixPolicy] = field(default_factory=dict, repr=False)
    _broken: dict[Path, str] = field(default_factory=dict, repr=False)  # a file's ConfigError, read once

    def __post_init__(self) -> None:
        self._fixed: Path | None = None  # --config: one configuration for every file
        if self.config_file is not None and not self.isolated:
            explicit = _explicit_config(self.config_file)
            self._configs[explicit.path] = explicit
            self._fixed = explicit.path

    def config_for(self, path: str) -> FileConfig:
        """The configuration of a file (or of a directory's contents, given the directory)."""
        if self.isolated:
            key = None
        elif self._fixed is not None:
            key = self._fixed
        else:
            absolute = Path(os.path.abspath(path))
            key = find_config(absolute if os.path.isdir(absolute) else absolute.parent, self._nearest)
        if key not in self._configs:
            if key in self._broken:
                raise ConfigError(self._broken[key])
            try:
                self._configs[key] = load_config(key) if key is not None else FileConfig()
            except ConfigError as err:
                self._broken[key] = str(err)
                raise
        return self._configs[key]

    def settings_for(self, path: str) -> Settings:
        config = self.config_for(path)
        if config.path not in self._settings:
            self._settings[config.path] = build_settings(config, self.cli)
        return self._settings[config.path]

    def fixing(self, path: str) -> bool:
        """Whether `check` fixes `path`: `--fix`/`--no-fix`, else the configuration's `fix` when
        the file is under the configuration's own folder."""
        if self.cli.fix is not None:
            return self.cli.fix
        config = self.config_for(path)
        return bool(config.fix) and governs(config, path)

    def allows_skipped(self, path: str) -> bool:
        """Whether `path` being skipped (too large, not regular, leading out of the project) is
        only a warning: `--allow-skipped`, else the configuration's `allow-skipped`."""
        if self.cli.allow_skipped is not None:
            return self.cli.allow_skipped
        try:
            return bool(self.config_for(path).allow_skipped)
        except ConfigError:  # its configuration is in error: nothing allows it
            return False

    def fix_policy_for(self, path: str) -> FixPolicy:
        """Which fixes apply to `path`; the configuration's `unsafe-fixes` only when the file is
        under its own folder."""
        config = self.config_for(path)
        key = (config.path, bool(config.unsafe_fixes) and governs(config, path))
        if key not in self._policies:
            self._policies[key] = build_fix_policy(config if key[1] else replace(config, unsafe_fixes=None),
                                                   self.cli)
        return self._policies[key]

    def discovery_for(self, directory: str) -> Discovery:
        """The excludes that apply to the entries of `directory`."""
        config = self.config_for(directory)
        if config.path not in self._discovery:
            self._discovery[config.path] = build_discovery(config, self.cli)
        return self._discovery[config.path]

    def is_force_excluded(self, path: str) -> bool:
        """`--force-exclude`: a file named on the command line that an exclude covers (by its
        own name or a directory above it, up to its configuration's directory)."""
        absolute = Path(os.path.abspath(path))
        stop = self.config_for(path).root.resolve() if self.config_for(path).path else Path.cwd()
        for current in [absolute, *absolute.parents]:
            if current == stop or current == current.parent:
                break
            if self.discovery_for(str(current.parent)).is_excluded(str(current)):
                return True
        return False
