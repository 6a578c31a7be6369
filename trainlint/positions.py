"""Source positions: computed only for the top-level statements that hold reported nodes, and
converted between 1-based and LSP's 0-based coordinates in one place.

LibCST's PositionProvider generates the code of the whole module while recording a range for every
node, which costs several times the parse on a large file. Here each top-level statement that holds
a finding is generated once with position tracking, starting at its own line; the line offsets of
the statements before it come from plain code generation.
"""

from __future__ import annotations

import ast

import libcst as cst
from libcst.metadata.position_provider import NEWLINE_RE, PositionProvidingCodegenState


class _Ranges:
    """Stands in for a metadata provider: the codegen state records ranges into `_computed`."""

    def __init__(self) -> None:
        self._computed: dict[cst.CSTNode, object] = {}


class Positions:
    def __init__(self, module: cst.Module, parents: dict[cst.CSTNode, cst.CSTNode],
                 first_lines: list[int] | None = None) -> None:
        self._module = module
        self._parents = parents
        self._ranges = _Ranges()
        self._done: set[int] = set()  # indexes of top-level statements already generated
        self._first_lines = first_lines

    def _top_level_index(self, node: cst.CSTNode) -> int | None:
        """Index of the top-level statement holding `node`; None when it cannot be told."""
        current = node
        while True:
            parent = self._parents.get(current)
            if parent is None or parent is self._module:
                break
            current = parent
        for index, statement in enumerate(self._module.body):
            if statement is current:
                return index
        return None

    def _first_line(self, index: int) -> int:
        """1-based line where top-level statement `index` starts (its leading comments included)."""
        if self._first_lines is None:
            module = self._module
            line = 1 + len(module.header)
            firsts = []
            for statement in module.body:
                firsts.append(line)
                line += len(NEWLINE_RE.findall(module.code_for_node(statement)))
            self._first_lines = firsts
        return self._first_lines[index]

    def span(self, node: cst.CSTNode) -> tuple[int, int, int, int]:
        """(line, column, end_line, end_column), 1-based, end exclusive."""
        if node not in self._ranges._computed:
            module = self._module
            index = self._top_level_index(node)
            if index is None or index in self._done:  # not under a statement: the whole module
                target, line = module, 1
            else:
                target, line = module.body[index], self._first_line(index)
                self._done.add(index)
            state = PositionProvidingCodegenState(default_indent=module.default_indent,
                                                  default_newline=module.default_newline,
                                                  provider=self._ranges, line=line)
            target._codegen(state)
        code_range = self._ranges._computed[node]
        return (code_range.start.line, code_range.start.column + 1,
                code_range.end.line, code_range.end.column + 1)


def first_lines(module: cst.Module, tree: ast.Module, lines: list[str]) -> list[int] | None:
    """The line where each top-level statement of `module` starts (its leading comments and blank
    lines included), read from Python's own parse `tree` of the same source instead of generating
    the code of every statement; None when the two parses do not line up."""
    statements = tree.body
    found = []
    position = 0
    for statement in module.body:
        if position >= len(statements):
            return None
        node = statements[position]
        start = node.lineno
        decorators = getattr(node, "decorator_list", None)
        if decorators:
            # a decorator's expression may start below its `@` (`@(\n    wrap)`)
            start = decorators[0].lineno
            while start > 1 and not lines[start - 1].lstrip().startswith("@"):
                start -= 1
        found.append(start - len(statement.leading_lines))
        position += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
    return found if position == len(statements) else None


def split_lines(source: str) -> list[str]:
    """Lines as Python and LSP count them: only \\r\\n, \\r and \\n end a line (str.splitlines
    also splits at form feeds and U+2028, which would shift every line after them)."""
    return NEWLINE_RE.split(source)


def to_lsp(line: int, column: int) -> tuple[int, int]:
    """1-based line and column to LSP's 0-based line and character."""
    return line - 1, column - 1


def from_lsp(line: int, character: int) -> tuple[int, int]:
    return line + 1, character + 1
