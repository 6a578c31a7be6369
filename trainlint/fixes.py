"""Applying fixes: one fix's edits, the fixes of one file together, and fixing a source until it
is stable. The one place edits are applied: `check --fix`/`--diff`, the language server's quick
fixes and "fix all", and `trainlint confirm`'s FIXED column all come here.

Several findings in one file: their fixes are applied together unless their edits overlap; the
source is then checked again and what is left (findings that were behind an overlapping fix, or
that a fix uncovered) is fixed in the next round, for at most `MAX_ROUNDS` rounds. A round whose
result does not parse is not kept: its fixes are then tried one at a time.
"""

from __future__ import annotations

import ast
import io
import os
import stat
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from trainlint.finding import FileResult, Fix
from trainlint.positions import split_lines
from trainlint.reader.config_files import ROOT_MARKERS, find_config
from trainlint.settings import FixPolicy

#: rounds of fix-and-check-again before giving up on reaching a stable source
MAX_ROUNDS = 8
SYNTAX_ERROR_CODE = "TL000"


def line_starts(source: str) -> list[int]:
    """Offset of each line's start, lines counted as `split_lines` counts them, plus the end."""
    starts, offset = [], 0
    for line in split_lines(source):
        starts.append(offset)
        offset += len(line)
        if offset < len(source):  # the line ending: \r\n, \r or \n
            offset += 2 if source.startswith("\r\n", offset) else 1
    starts.append(len(source))
    return starts


def _spans(source: str, fix: Fix, starts: list[int] | None = None) -> list[tuple[int, int, str]]:
    starts = starts or line_starts(source)

    def offset(line: int, column: int) -> int:
        return min(starts[min(line, len(starts)) - 1] + column - 1, len(source))

    return [(offset(e.line, e.column), offset(e.end_line, e.end_column), e.content) for e in fix.edits]


def _apply_spans(source: str, spans: Iterable[tuple[int, int, str]]) -> str:
    for start, end, content in sorted(spans, key=lambda s: (s[0], s[1]), reverse=True):
        source = source[:start] + content + source[end:]
    return source


def apply_fix(source: str, fix: Fix) -> str:
    """The source with every edit of `fix` applied (a fix's edits never overlap)."""
    return _apply_spans(source, _spans(source, fix))


def _overlap(a: tuple[int, int, str], b: tuple[int, int, str]) -> bool:
    (s1, e1, _), (s2, e2, _) = a, b
    if s1 == s2:
        return True  # two edits at one point: their order would be a guess
    return s1 < e2 and s2 < e1


def apply_fixes(source: str, fixes: list[Fix]) -> tuple[str, list[int]]:
    """The source with as many of `fixes` applied as do not overlap one taken before them (in
    the order given), and the indices of those applied."""
    starts = line_starts(source)
    taken: list[tuple[int, int, str]] = []
    applied = []
    for number, fix in enumerate(fixes):
        spans = _spans(source, fix, starts)
        if any(_overlap(span, other) for span in spans for other in taken):
            continue
        taken.extend(spans)
        applied.append(number)
    return _apply_spans(source, taken), applied


def parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


@dataclass
class FixOutcome:
    source: str
    #: the check of the fixed source: what remains
    result: FileResult
    #: fixes applied, by code
    fixed: Counter = field(default_factory=Counter)

    @property
    def changed(self) -> bool:
        return bool(self.fixed)


def _syntax_errors(result: FileResult) -> int:
    return sum(f.code == SYNTAX_ERROR_CODE for f in result.findings)


def fix_source(source: str, lint: Callable[[str], FileResult], policy: FixPolicy,
               result: FileResult | None = None) -> FixOutcome:
    """Apply the fixes `policy` allows until none is left (or `MAX_ROUNDS`). `lint` checks a
    source; `result` is its check of `source` when the caller has it already."""
    result = result if result is not None else lint(source)
    outcome = FixOutcome(source, result)
    # fixes that were applied and came back unchanged: applying them again would repeat the same
    # edit (an inserted line, again and again) without ever removing the finding
    spent: set[tuple] = set()
    for _ in range(MAX_ROUNDS):
        if outcome.result.errors:
            break  # a rule failed on this source: do not build on a partial check
        chosen = [f for f in outcome.result.findings if policy.allows(f) and _same_fix(f) not in spent]
        if not chosen:
            break
        new, applied = apply_fixes(outcome.source, [f.fix for f in chosen])
        if not parses(new):
            # together they break the syntax: take the first fix that alone does not
            new, applied = outcome.source, []
            for number, finding in enumerate(chosen):
                candidate = apply_fix(outcome.source, finding.fix)
                if parses(candidate):
                    new, applied = candidate, [number]
                    break
        if new == outcome.source:
            break
        checked = lint(new)
        if _syntax_errors(checked) > _syntax_errors(outcome.result):
            break  # LibCST refuses what Python accepted: keep the last good source
        outcome.source, outcome.result = new, checked
        outcome.fixed.update(chosen[number].code for number in applied)
        spent.update(_same_fix(chosen[number]) for number in applied)
    return outcome


def _same_fix(finding) -> tuple:
    """What a fix does, apart from where (its lines move as other fixes land)."""
    return finding.code, finding.fix.title, tuple(edit.content for edit in finding.fix.edits)


# -- files on disk --------------------------------------------------------------------------------

def encoding_of(data: bytes) -> str:
    """The encoding a file's bytes are read with (PEP 263 cookie or BOM; UTF-8 otherwise)."""
    try:
        return tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError:
        return "utf-8"


class WriteError(Exception):
    """A fixed file that could not be written; the message says why."""


def fix_root(paths: Iterable[str]) -> str:
    """The real path of the folder fixes of these files may write in: their project root found as
    `Project.for_paths` finds it (the nearest configuration, else root marker, above their common
    folder), but from the paths as named, before any symlink is followed: a link in the project to
    a file outside it does not widen the root to take that file in."""
    folders = [os.path.abspath(p if os.path.isdir(p) else os.path.dirname(os.path.abspath(p))) for p in paths]
    common = os.path.commonpath(folders) if folders else os.getcwd()
    config = find_config(Path(common))
    if config is not None:
        return os.path.realpath(config.parent)
    for directory in (Path(common), *Path(common).parents):
        if any(os.path.lexists(directory / marker) for marker in ROOT_MARKERS):
            return os.path.realpath(directory)
    return os.path.realpath(common)


def _writable(info: os.stat_result, target: str) -> bool:
    """The user may write the file: as root `os.access` says yes to any file, so its owner's write
    bit must be set too (a read-only 0444 file stays as it is)."""
    return bool(info.st_mode & stat.S_IWUSR) and os.access(target, os.W_OK)


def write_fixed(path: str, original: bytes, source: str, root: str | None = None) -> None:
    """Write the fixed `source` over `path` atomically: a temporary file in the same directory,
    then `os.replace`. Only a regular file the user may write, whose real path is inside `root`
    (a real path, see `fix_root`) when given, is written: never one a link leads to outside it.
    Nothing is written either if the file no longer holds `original` (it changed on disk since it
    was read) or if the fixed text cannot be encoded as the file was."""
    try:
        data = source.encode(encoding_of(original))
    except UnicodeEncodeError as err:
        raise WriteError(f"cannot fix {path}: the fixed text cannot be written as {err.encoding}") from None
    target = os.path.realpath(path)  # a symlink stays a symlink: its target is what gets fixed
    if root is not None and not target.startswith(root.rstrip(os.sep) + os.sep):
        raise WriteError(f"not fixing {path}: it leads to {target}, outside the project {root}")
    try:
        info = os.stat(target)
        if not stat.S_ISREG(info.st_mode):
            raise WriteError(f"not fixing {path}: not a regular file")
        if not _writable(info, target):
            raise WriteError(f"not fixing {path}: the file is read-only")
        with open(target, "rb") as handle:
            current = handle.read()
    except OSError as err:
        raise WriteError(f"cannot fix {path}: {err.strerror or err}") from None
    if current != original:
        raise WriteError(f"not fixing {path}: it changed on disk while it was being checked")
    directory = os.path.dirname(target)
    try:
        mode = info.st_mode & 0o7777
        import tempfile  # only when a fix is written (with shutil, random, bz2, lzma: a check never needs them)

        fd, temporary = tempfile.mkstemp(prefix=".trainlint-fix-", suffix=".tmp", dir=directory)
    except OSError as err:
        raise WriteError(f"cannot fix {path}: {err.strerror or err}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as err:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise WriteError(f"cannot fix {path}: {err.strerror or err}") from None
