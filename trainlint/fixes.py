"""Applying a fix's edits to source text."""

from __future__ import annotations

from trainlint.finding import Fix


def _offset(line_starts: list[int], line: int, column: int) -> int:
    return line_starts[line - 1] + column - 1


def apply_fix(source: str, fix: Fix) -> str:
    """The source with every edit of `fix` applied (edits must not overlap)."""
    line_starts = [0]
    for index, char in enumerate(source):
        if char == "\n":
            line_starts.append(index + 1)
    line_starts.append(len(source))
    spans = sorted(
        ((_offset(line_starts, e.line, e.column), _offset(line_starts, e.end_line, e.end_column), e.content)
         for e in fix.edits),
        reverse=True,
    )
    for start, end, content in spans:
        source = source[:start] + content + source[end:]
    return source
