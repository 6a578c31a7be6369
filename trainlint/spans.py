"""Where reported nodes are: positions computed only for the statements that hold them.

LibCST's PositionProvider generates the code of the whole module while recording a range for every
node, which costs several times the parse on a large file. Here only the statement that holds a
finding is generated, with position tracking, starting at its own line: the innermost statement
that holds it in the body of a class, function, loop, `with`, `if` or `try` (or at top level). Where statements start
comes from Python's own parse of the same source (the gate's) when it is given, else from plain
code generation of the top-level statements before it.

Apart from `trainlint.positions` (lines and the LSP's coordinates), which every run imports: this
module imports LibCST, which a run imports only for a file some rule reads.
"""

from __future__ import annotations

import ast
from typing import Sequence

import libcst as cst
from libcst._position import CodePosition, CodeRange
from libcst.metadata.position_provider import NEWLINE_RE, PositionProvidingCodegenState


# Compound statements whose `body` Python's parse holds as `body` too (an `else:` is not followed).
_BODIES = (cst.FunctionDef, cst.ClassDef, cst.For, cst.While, cst.With, cst.If, cst.Try, cst.TryStar)


class _Ranges:
    """Stands in for a metadata provider: the codegen state records ranges into `_computed`."""

    def __init__(self) -> None:
        self._computed: dict[cst.CSTNode, object] = {}


class _Recording:
    """`PositionProvidingCodegenState.record_syntactic_position`'s context, as a plain object: the
    generator-based context manager LibCST uses costs more than the code generation it wraps."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state, node, start_node, end_node) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = CodePosition(self.state.line, self.state.column)

    def __exit__(self, *exc) -> bool:
        state = self.state
        computed = state.provider._computed
        start = computed[self.start_node].start if self.start_node is not None else self.start
        end = computed[self.end_node].end if self.end_node is not None else CodePosition(state.line, state.column)
        computed[self.node] = CodeRange(start, end)
        return False


class _PositionState(PositionProvidingCodegenState):
    """LibCST's position-recording code generation, with the same results at less cost per node
    and per token (a test compares it with `PositionProvider` on every fixture)."""

    def record_syntactic_position(self, node, *, start_node=None, end_node=None) -> _Recording:
        return _Recording(self, node, start_node, end_node)

    def _update_position(self, value: str) -> None:
        if "\n" in value or "\r" in value:
            super()._update_position(value)
        else:  # most tokens: no line break
            self.column += len(value)


class Positions:
    def __init__(self, module: cst.Module, parents: dict[cst.CSTNode, cst.CSTNode],
                 tree: ast.Module | None = None, lines: list[str] | None = None) -> None:
        self._module = module
        self._parents = parents
        self._tree = tree
        self._lines = lines
        self._ranges = _Ranges()
        self._done: set[cst.CSTNode] = set()  # statements already generated
        self._top: list[tuple[int, ast.stmt | None]] | None = None
        self._places: dict[int, tuple[Sequence[cst.CSTNode], dict[int, int]]] = {}
        self._block_starts: dict[cst.IndentedBlock, list[tuple[int, ast.stmt]] | None] = {}

    def _top_level(self) -> list[tuple[int, ast.stmt | None]]:
        """(first line, Python's node) of each top-level statement."""
        if self._top is None:
            module = self._module
            found = None
            if self._tree is not None and self._lines is not None:
                found = _starts(module.body, self._tree.body, self._lines)
            if found is None:
                line = 1 + len(module.header)
                found = []
                for statement in module.body:
                    found.append((line, None))
                    line += len(NEWLINE_RE.findall(module.code_for_node(statement)))
            self._top = found
        return self._top

    def _unit(self, node: cst.CSTNode) -> tuple[cst.CSTNode, int, list[str]] | None:
        """The statement to generate for `node`, its first line, and the indents of the blocks
        around it; None when `node` is not under a statement of the module."""
        chain = [node]
        while chain[-1] is not self._module:
            parent = self._parents.get(chain[-1])
            if parent is None:
                return None
            chain.append(parent)
        chain.reverse()  # module, top-level statement, ..., node
        if len(chain) < 2:
            return None
        index = self._index(self._module.body, chain[1])
        if index is None:
            return None
        statement, depth, indents = chain[1], 1, []
        line, python = self._top_level()[index]
        # inside a class, function, loop, `with`, `if` or `try` body: go down to the statement of
        # that body that holds the node (Python's node has the same body)
        while python is not None and isinstance(statement, _BODIES) and hasattr(python, "body") \
                and isinstance(statement.body, cst.IndentedBlock) and depth + 2 < len(chain) \
                and chain[depth + 1] is statement.body:
            body = statement.body
            child = self._index(body.body, chain[depth + 2])
            starts = self._starts(body, python) if child is not None else None
            if starts is None:
                break
            indents = indents + [body.indent if body.indent is not None else self._module.default_indent]
            statement, depth = body.body[child], depth + 2
            line, python = starts[child]
        return statement, line, indents

    def _index(self, statements: Sequence[cst.CSTNode], statement: cst.CSTNode) -> int | None:
        """`statement`'s place in `statements`, from a table made once per block: a class of
        thousands of methods with a finding in each would otherwise be searched at each one."""
        places = self._places.get(id(statements))
        if places is None or places[0] is not statements:
            places = self._places[id(statements)] = (statements, {id(s): i for i, s in enumerate(statements)})
        return places[1].get(id(statement))

    def _starts(self, body: cst.IndentedBlock, python: ast.stmt) -> list[tuple[int, ast.stmt]] | None:
        """`_starts` of a block, once per block."""
        if body not in self._block_starts:
            self._block_starts[body] = _starts(body.body, python.body, self._lines)
        return self._block_starts[body]

    def span(self, node: cst.CSTNode) -> tuple[int, int, int, int]:
        """(line, column, end_line, end_column), 1-based, end exclusive."""
        if node not in self._ranges._computed:
            module = self._module
            unit = self._unit(node)
            if unit is None or unit[0] in self._done:  # not under a statement: the whole module
                target, line, indents = module, 1, []
            else:
                target, line, indents = unit
                self._done.add(target)
            state = _PositionState(default_indent=module.default_indent, default_newline=module.default_newline,
                                   provider=self._ranges, line=line)
            state.indent_tokens.extend(indents)
            target._codegen(state)
        code_range = self._ranges._computed[node]
        return (code_range.start.line, code_range.start.column + 1,
                code_range.end.line, code_range.end.column + 1)


def _starts(statements: Sequence[cst.CSTNode], nodes: list[ast.stmt],
            lines: list[str]) -> list[tuple[int, ast.stmt]] | None:
    """For each LibCST statement of a block, the line where it starts (its leading comments and
    blank lines included) and Python's node for it, from Python's parse of the same block; None
    when the two do not line up. LibCST holds `a; b` in one statement line, Python in two."""
    found = []
    position = 0
    for statement in statements:
        if position >= len(nodes):
            return None
        node = nodes[position]
        start = node.lineno
        decorators = getattr(node, "decorator_list", None)
        if decorators:
            # a decorator's expression may start below its `@` (`@(\n    wrap)`)
            start = decorators[0].lineno
            while start > 1 and not lines[start - 1].lstrip().startswith("@"):
                start -= 1
        found.append((start - len(statement.leading_lines), node))
        position += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
    return found if position == len(nodes) else None


def first_lines(module: cst.Module, tree: ast.Module, lines: list[str]) -> list[int] | None:
    """The line where each top-level statement of `module` starts, from Python's parse `tree`."""
    found = _starts(module.body, tree.body, lines)
    return [line for line, _ in found] if found is not None else None
