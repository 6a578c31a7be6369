"""Source positions: computed only for the nodes a file reports, and converted in one place.

Internally and in text/JSON/GitHub/SARIF output, lines and columns are 1-based; LSP wants
0-based lines and characters.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider


class Positions:
    """Resolves node positions for one module, running LibCST's position pass at most once."""

    def __init__(self, module: cst.Module) -> None:
        self._module = module
        self._ranges = None

    def span(self, node: cst.CSTNode) -> tuple[int, int, int, int]:
        """(line, column, end_line, end_column), 1-based, end exclusive."""
        if self._ranges is None:
            # unsafe_skip_copy keeps node identity, so the rules' nodes are keys of the result
            wrapper = MetadataWrapper(self._module, unsafe_skip_copy=True)
            self._ranges = wrapper.resolve(PositionProvider)
        code_range = self._ranges[node]
        return (code_range.start.line, code_range.start.column + 1,
                code_range.end.line, code_range.end.column + 1)


def to_lsp(line: int, column: int) -> tuple[int, int]:
    """1-based line and column to LSP's 0-based line and character."""
    return line - 1, column - 1


def from_lsp(line: int, character: int) -> tuple[int, int]:
    return line + 1, character + 1
