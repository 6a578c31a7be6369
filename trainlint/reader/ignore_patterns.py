"""Git's ignore patterns (gitignore(5)), matched in time linear in the pattern times the path.

A `.gitignore` comes with the repository being checked, so whoever wrote the repository wrote
the patterns. A regular expression per pattern (what pathspec builds) backtracks: `*a*a*a*a*a*a*b`
against a long file name takes minutes. Here a pattern is split at `/` into segment patterns,
matched against the path's segments by tracking the set of pattern positions reached (a `**`
segment stays where it is and matches any number of segments), so no work is ever repeated.
Within one segment the `*` runs split the glob into pieces of fixed length (`?`, `[...]` and
literal characters); the leftmost place of each piece is always the one to take (a later place
only leaves less for the rest), so each middle piece is searched for once inside an atomic group
`(?>.*?piece)` that the regular expression engine never re-enters.

The semantics are git's: blank lines and `#` comments are skipped, trailing spaces are dropped
unless escaped, `!` negates, a trailing `/` matches directories only, a `/` at the start or in the
middle anchors the pattern at the folder of its file (otherwise it matches at any depth), `**` as a
whole segment matches any number of folders (`a/**` everything inside `a`), `\\` escapes the next
character; within one file the last matching pattern wins. (That a path inside an ignored
folder is ignored too is the caller's business: `discovery.GitIgnore` asks about each folder.)
"""

from __future__ import annotations

import re
import string
from typing import Callable

#: A segment of `**`: any number of path segments (none included).
_GLOBSTAR = None

_POSIX_CLASSES = {
    "alnum": string.ascii_letters + string.digits, "alpha": string.ascii_letters, "blank": " \t",
    "cntrl": "".join(map(chr, range(32))) + "\x7f", "digit": string.digits,
    "graph": "".join(chr(c) for c in range(33, 127)), "lower": string.ascii_lowercase,
    "print": "".join(chr(c) for c in range(32, 127)), "punct": string.punctuation,
    "space": " \t\n\r\x0b\x0c", "upper": string.ascii_uppercase, "xdigit": string.hexdigits,
}


class _Invalid(Exception):
    """A glob git never matches anything with (an unclosed `[`, a trailing `\\`)."""


def _bracket(glob: str, at: int) -> tuple[str, int]:
    """The regex of the bracket expression starting at `glob[at] == "["`, and the index after it."""
    i = at + 1
    negate = i < len(glob) and glob[i] in "!^"
    i += negate
    chars: list[str] = []  # regex fragments, each already escaped
    first = True
    while True:
        if i >= len(glob):
            raise _Invalid
        c = glob[i]
        if c == "]" and not first:
            i += 1
            break
        first = False
        if c == "[" and glob.startswith("[:", i):
            end = glob.find(":]", i + 2)
            if end == -1:
                raise _Invalid
            name = glob[i + 2:end]
            if name not in _POSIX_CLASSES:
                raise _Invalid
            chars.append(re.escape(_POSIX_CLASSES[name]))
            i = end + 2
            continue
        if c == "\\":
            i += 1
            if i >= len(glob):
                raise _Invalid
            c = glob[i]
        if i + 2 < len(glob) and glob[i + 1] == "-" and glob[i + 2] != "]":
            high_at = i + 2
            if glob[high_at] == "\\":
                high_at += 1
                if high_at >= len(glob):
                    raise _Invalid
            high = glob[high_at]
            if c <= high:  # a reversed range holds nothing
                chars.append(f"{re.escape(c)}-{re.escape(high)}")
            i = high_at + 1
            continue
        chars.append(re.escape(c))
        i += 1
    if not chars:
        return ("." if negate else "(?!)"), i
    return f"[{'^' if negate else ''}{''.join(chars)}]", i


def _segment_matcher(glob: str) -> Callable[[str], bool]:
    """A function telling whether one path segment (no `/`) matches `glob`."""
    pieces: list[list[str]] = [[]]  # the regex atoms between runs of `*`
    literal: list[str] | None = []  # the glob's text while it has no wildcard
    i = 0
    try:
        while i < len(glob):
            c = glob[i]
            if c == "*":
                if pieces[-1] or len(pieces) == 1:
                    pieces.append([])
                literal = None
                i += 1
            elif c == "?":
                pieces[-1].append(".")
                literal = None
                i += 1
            elif c == "[":
                atom, i = _bracket(glob, i)
                pieces[-1].append(atom)
                literal = None
            else:
                if c == "\\":
                    if i + 1 >= len(glob):
                        raise _Invalid
                    i += 1
                    c = glob[i]
                pieces[-1].append(re.escape(c))
                if literal is not None:
                    literal.append(c)
                i += 1
    except _Invalid:
        return _never
    if literal is not None:
        return "".join(literal).__eq__
    if len(pieces) == 1:
        regex = "".join(pieces[0])
    else:
        first, *middle, last = ("".join(piece) for piece in pieces)
        regex = first + "".join(f"(?>.*?{piece})" for piece in middle) + ".*" + last
    return re.compile(regex, re.DOTALL).fullmatch


class IgnorePattern:
    """One line of an ignore file."""

    def __init__(self, segments: list[Callable[[str], bool] | None], negate: bool, dir_only: bool) -> None:
        self.segments = segments  # matchers, None for `**`
        self.negate = negate
        self.dir_only = dir_only
        # the usual shapes, answered without tracking states: a name at any depth (`*.pyc`,
        # `build/`), and a path without `**` (`/dist`, `docs/_build`)
        self._name = segments[1] if len(segments) == 2 and segments[0] is _GLOBSTAR and segments[1] else None
        self._fixed = _GLOBSTAR not in segments

    @classmethod
    def parse(cls, line: str) -> "IgnorePattern | None":
        """The pattern of one line; None for a blank line or a comment."""
        line = line.rstrip("\r")
        while line.endswith(" ") and not line.endswith("\\ "):
            line = line[:-1]
        if not line or line.startswith("#"):
            return None
        negate = line.startswith("!")
        if negate:
            line = line[1:]
        dir_only = line.endswith("/")
        if dir_only:
            line = line[:-1]
        anchored = "/" in line
        line = line.removeprefix("/")
        if not line:
            return None
        globs = line.split("/")
        segments: list = [] if anchored else [_GLOBSTAR]
        for glob in globs:
            if len(glob) >= 2 and not glob.strip("*"):  # `**` (or more stars) alone
                if not segments or segments[-1] is not _GLOBSTAR:
                    segments.append(_GLOBSTAR)
            else:
                segments.append(_segment_matcher(glob))
        if segments[-1] is _GLOBSTAR:  # `a/**`: everything inside `a`, one segment or more
            segments[-1:] = [_any_segment, _GLOBSTAR]
        return cls(segments, negate, dir_only)

    def matches(self, parts: list[str], is_dir: bool) -> bool:
        """True if the path of `parts` (relative to the ignore file's folder) matches."""
        if self.dir_only and not is_dir:
            return False
        if self._name is not None:
            return self._name(parts[-1])
        segments, end = self.segments, len(self.segments)
        if self._fixed:
            return len(parts) == end and all(segment(part) for segment, part in zip(segments, parts))
        states = self._closure({0})
        for part in parts:
            reached = set()
            for i in states:
                if i == end:
                    continue
                segment = segments[i]
                if segment is _GLOBSTAR:
                    reached.add(i)
                elif segment(part):
                    reached.add(i + 1)
            if not reached:
                return False
            states = self._closure(reached)
        return end in states

    def _closure(self, states: set[int]) -> set[int]:
        """`states` with the positions after each `**` (which may match no segment) added."""
        segments = self.segments
        return states | {i + 1 for i in states if i < len(segments) and segments[i] is _GLOBSTAR}


def _any_segment(segment: str) -> bool:
    return True


def _never(segment: str) -> bool:
    return False


class IgnoreRules:
    """The patterns of one ignore file, in order."""

    def __init__(self, lines: list[str]) -> None:
        self.patterns = [pattern for line in lines if (pattern := IgnorePattern.parse(line)) is not None]

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def check(self, relative: str, is_dir: bool) -> bool | None:
        """True if the last pattern matching `relative` (a `/`-separated path relative to the
        file's folder) ignores it, False if it re-includes it (`!`), None if none matches."""
        parts = relative.split("/")
        for pattern in reversed(self.patterns):
            if pattern.matches(parts, is_dir):
                return not pattern.negate
        return None
