"""Lines as Python and the LSP count them, and the conversion between 1-based and LSP's 0-based
coordinates in one place. (Where a reported node is: `trainlint.spans`, which needs LibCST; this
module is imported by every run and imports only `re`.)
"""

from __future__ import annotations

import re

#: What ends a line: LibCST's `position_provider.NEWLINE_RE` (a test keeps them equal), here
#: without importing LibCST.
NEWLINE_RE = re.compile(r"\r\n?|\n")


def split_lines(source: str) -> list[str]:
    """Lines as Python and LSP count them: only \\r\\n, \\r and \\n end a line (str.splitlines
    also splits at form feeds and U+2028, which would shift every line after them)."""
    return NEWLINE_RE.split(source)


def to_lsp(line: int, column: int) -> tuple[int, int]:
    """1-based line and column to LSP's 0-based line and character."""
    return line - 1, column - 1


def from_lsp(line: int, character: int) -> tuple[int, int]:
    return line + 1, character + 1
