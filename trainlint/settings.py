"""Settings the engine runs with, and turning rule selectors (`TL1`, `TL101`, `ALL`, rule names) into codes.

This module knows nothing about files or configuration syntax: `trainlint.config` builds a
`Settings` from pyproject.toml and the command line.
"""

from __future__ import annotations

import fnmatch
import functools
import os
from dataclasses import dataclass, field

from trainlint.finding import SYNTAX_ERROR_CODE, Finding
from trainlint.reader.config_files import ROOT_MARKERS
from trainlint.reader.files import DEFAULT_MAX_FILE_SIZE
from trainlint.rules import heads

DEFAULT_MIN_TORCH = (2, 6)
#: Rules not reported in test code unless configured (`test-code-ignore`): the hazards of files a
#: test writes and reads back itself (a load of its own scratch file is not a security hole, a
#: truncated temporary checkpoint costs nothing, a partial checkpoint may be the point of the test),
#: memory held through a few iterations, and a test's own loaders. A test's training loop is still
#: checked for wrong gradients, schedules and modes (TL1, TL2, TL302, TL303, TL601).
DEFAULT_TEST_CODE_IGNORE = ("TL301", "TL401", "TL402", "TL403", "TL404", "TL501", "TL502", "TL602", "TL701")
_TEST_DIRECTORIES = frozenset({"tests", "test", "testing"})


def is_test_code(path: str, root: str | None = None) -> bool:
    """A file of a test suite: under a `tests/`/`test/`/`testing/` directory below its project's
    root (the configuration's directory; without one, the nearest folder holding a root marker,
    else the current directory), or named `test_*.py`, `*_test.py`, `conftest.py`."""
    name = os.path.basename(path)
    if name == "conftest.py" or (name.startswith("test_") or name.endswith("_test.py")) and name.endswith(".py"):
        return True
    absolute = os.path.abspath(path)
    base = root if root is not None else (_marked_root(os.path.dirname(absolute)) or os.getcwd())
    relative = os.path.relpath(absolute, base)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return False  # outside: its folders above are not the project's
    return any(part in _TEST_DIRECTORIES for part in relative.replace("\\", "/").split("/")[:-1])


class SelectorError(ValueError):
    """An unknown rule selector; the message names it."""


def canonical_selector(selector: str) -> str:
    """A selector as its code form: `TL401` for `unsafe-torch-load` (a rule name, in any case),
    upper case for codes and prefixes (`tl1` -> `TL1`); raises SelectorError, naming the selector
    as it was written, when it names no rule."""
    written = selector.strip()
    names = {rule.name: code for code, rule in heads().items()}
    if written.lower() in names:
        return names[written.lower()]
    upper = written.upper()
    if upper != "ALL":
        codes = set(heads()) | {SYNTAX_ERROR_CODE}
        if not upper.startswith("TL") or not any(code.startswith(upper) for code in codes):
            raise SelectorError(f"unknown rule selector '{written}'")
    return upper


def codes_for(selector: str) -> set[str]:
    """The rule codes a selector names: `ALL`, a code, a code prefix such as `TL1`, or a rule name."""
    selector = canonical_selector(selector)
    codes = set(heads()) | {SYNTAX_ERROR_CODE}
    if selector == "ALL":
        return codes
    return {code for code in codes if code.startswith(selector)}


def resolve_selection(select: list[str] | None, extend_select: list[str], ignore: list[str]) -> frozenset[str]:
    """Codes to run: `select` (or the rules on by default), plus `extend_select`, minus `ignore`.

    TL000 (a file that does not parse) is always reported unless ignored explicitly.
    """
    rules = heads()  # the rules' table: selecting imports no rule
    if select is None:
        chosen = {code for code, rule in rules.items() if rule.enabled_by_default}
    else:
        chosen = set()
        for selector in select:
            chosen |= codes_for(selector)
    for selector in extend_select:
        chosen |= codes_for(selector)
    chosen.add(SYNTAX_ERROR_CODE)
    for selector in ignore:
        chosen -= codes_for(selector)
    return frozenset(chosen)


@dataclass(frozen=True)
class Settings:
    select: frozenset[str] = field(default_factory=lambda: resolve_selection(None, [], []))
    #: (glob pattern, codes) pairs: codes ignored in files whose path matches the pattern
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()
    min_torch_version: tuple[int, ...] = DEFAULT_MIN_TORCH
    #: The directory per-file-ignores globs are relative to (the configuration file's); None: the
    #: path is matched as given.
    root: str | None = None
    #: bytes; a larger file is skipped
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    #: codes not reported in test code (`is_test_code`); the configuration's default is
    #: DEFAULT_TEST_CODE_IGNORE, the engine's (a Settings built in code) none
    test_code_ignore: frozenset[str] = frozenset()
    #: also report findings one of whose required premises is unknown (resting on a name, a
    #: guess): at info, their message saying so (`trainlint.model.premises`)
    include_unproven: bool = False

    def codes_for_path(self, path: str) -> frozenset[str]:
        codes = self.select
        if self.test_code_ignore and path != "<stdin>" and is_test_code(path, self.root):
            codes = codes - self.test_code_ignore
        if not self.per_file_ignores:
            return codes
        candidates = {path.replace("\\", "/")}
        if self.root is not None:  # relative to the configuration's directory, wherever the run is
            absolute = os.path.abspath(path)
            candidates = {absolute.replace("\\", "/")}
            relative = os.path.relpath(absolute, self.root)
            if relative != os.pardir and not relative.startswith(os.pardir + os.sep):
                candidates.add(relative.replace("\\", "/"))
        name = path.replace("\\", "/").rsplit("/", 1)[-1]
        for pattern, ignored in self.per_file_ignores:
            if fnmatch.fnmatch(name, pattern) or any(fnmatch.fnmatch(c, pattern) for c in candidates):
                codes = codes - ignored
        return codes


@dataclass(frozen=True)
class FixPolicy:
    """Which fixes may be applied: safe ones, unsafe ones too, and the codes allowed."""

    unsafe: bool = False
    #: codes whose fixes may be applied; None: every code
    fixable: frozenset[str] | None = None
    unfixable: frozenset[str] = frozenset()

    def allows(self, finding: Finding) -> bool:
        fix = finding.fix
        return (fix is not None and (fix.safe or self.unsafe)
                and (self.fixable is None or finding.code in self.fixable)
                and finding.code not in self.unfixable)


@functools.lru_cache(maxsize=1024)
def _marked_root(directory: str) -> str | None:
    """The nearest directory at or above `directory` holding a root marker."""
    current = directory
    while True:
        if any(os.path.exists(os.path.join(current, marker)) for marker in ROOT_MARKERS):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
