"""Parsing a document that changes a little at a time (the language server's open files).

The source is split before each line that may start a top-level statement, and each piece is
parsed on its own (by LibCST and by Python) and kept by its text, so an edit re-parses only the
pieces whose text changed; the trees of the others are reused. The pieces' statements are joined
into one `Module` equal to LibCST's parse of the whole source:

- a split that is not between two top-level statements (inside a string, brackets, a decorated
  definition, before an `else:`) leaves a piece that does not parse on its own, and the whole
  source is parsed instead;
- comments and blank lines at the end of a piece are the next statement's leading lines in a parse
  of the whole source, and are moved there;
- LibCST leaves out of each node what equals its module's default indent and newline, so pieces
  whose defaults differ from the whole source's are parsed as a whole instead, and so is a piece
  whose parse does not give back its text.

Python's pieces are joined the same way. The engine asks for Python's tree first and runs the
guard (`trainlint.guard`: compiler errors, the nesting bound) on the whole source before it asks
for LibCST's, so no piece reaches LibCST's parser in a file the guard refuses.

The guard's compile and the gate's facts are also taken piece by piece: a piece is compiled and
its facts gathered once per text (see `DocumentParser._compile` for when a module compiles exactly
when its pieces do), so an edit compiles and walks only what it changed.

The findings are the engine's, computed on the joined trees exactly as on a fresh parse (the tests
compare both on edits of every fixture).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import libcst as cst

from trainlint import guard
from trainlint.parsing import Parser
from trainlint.finding import Finding
from trainlint.gate import Facts, Gathered, facts_of_parts, gather, gated, python_tree

# A line that may start a top-level statement: not indented, not a comment or blank, not a closing
# bracket, not a clause that continues the statement before it.
_STATEMENT_START = re.compile(r"(?![ \t\f#\r\n)\]}])(?!(?:else|elif|except|finally)\b)")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@dataclass
class _Piece:
    """One piece of the source, parsed by LibCST on its own."""

    module: cst.Module
    has_indent: bool  # some line is indented: the piece's default indent may be the source's


def split(source: str) -> list[tuple[int, str]]:
    """The source in pieces: (0-based first line, text), split before lines that may start a
    top-level statement (never between a decorator and what it decorates)."""
    lines = _LINE.findall(source)
    pieces: list[tuple[int, str]] = []
    start = 0
    decorated = False  # the last code line was a decorator
    for number, line in enumerate(lines):
        if number > start and not decorated and _STATEMENT_START.match(line) \
                and not lines[number - 1].rstrip("\r\n").endswith("\\"):
            pieces.append((start, "".join(lines[start:number])))
            start = number
        stripped = line.lstrip()
        if stripped and not stripped.startswith("#"):
            decorated = line.startswith("@")
    if start < len(lines) or not pieces:
        pieces.append((start, "".join(lines[start:])))
    return pieces


class DocumentParser(Parser):
    """Parses successive versions of one document, re-parsing only the pieces whose text changed.

    Python's parse comes first and alone: the engine's guard checks the whole source before LibCST
    parses any piece of it (LibCST's native parser crashes on what the guard refuses)."""

    def __init__(self, borrow: "DocumentParser | None" = None) -> None:
        # another document parser whose LibCST pieces this one may use (a document's slices use
        # the whole document's: `trainlint.document`)
        self._borrow = borrow
        self._split: tuple[str, list[tuple[int, str]]] = ("", [])  # the last version, in pieces
        self._pieces: dict[str, _Piece | None] = {}  # by text; None: does not parse on its own
        self._python: dict[tuple[int, str], ast.Module | None] = {}  # by (first line, text)
        self._trees: dict[str, ast.Module | None] = {}  # the last version's, joined
        self._modules: dict[str, cst.Module | None] = {}  # the last version's, joined
        self._compiles: dict[str, bool] = {}  # by text: the piece compiles on its own
        self._shallow: dict[str, bool] = {}  # by text: no node of the piece is too deep (guard)
        self._gathered: dict[str, Gathered] = {}  # by text: the gate's facts of the piece
        self._counts: list[int] | None = None  # the statements of each piece of the joined module

    def _pieces_of(self, source: str) -> list[tuple[int, str]]:
        if self._split[0] != source or not self._split[1]:
            self._split = (source, split(source))
        return self._split[1]

    def pieces(self, source: str) -> list[tuple[int, str]]:
        """`split(source)`, split once per version."""
        return list(self._pieces_of(source))

    def piece_tree(self, line: int, text: str) -> ast.Module | None:
        """Python's parse of one piece that starts at 0-based `line` (None if it does not parse)."""
        return self._python_piece(line, text)

    def _piece(self, text: str) -> _Piece | None:
        if text not in self._pieces and self._borrow is not None and self._borrow._pieces.get(text) is not None:
            self._pieces[text] = self._borrow._pieces[text]
        if text not in self._pieces:
            try:
                module = cst.parse_module(text)
            except (cst.ParserSyntaxError, cst.CSTValidationError, RecursionError, MemoryError):
                self._pieces[text] = None
            else:
                # LibCST drops blank lines before an indented comment at the end of a source:
                # a piece it does not give back whole is parsed with the rest
                has_indent = any(line[:1] in (" ", "\t") for line in _LINE.findall(text)[1:])
                self._pieces[text] = _Piece(module, has_indent) if module.code == text else None
        return self._pieces[text]

    def _python_piece(self, line: int, text: str) -> ast.Module | None:
        """Python's parse of a piece, its line numbers counted in the whole source."""
        key = (line, text)
        if key not in self._python:  # blank lines: the lines before it
            self._python[key] = python_tree("\n" * line + text, "<piece>")
        return self._python[key]

    def python_tree(self, source: str, path: str) -> ast.Module | None:
        if source not in self._trees:
            pieces = self._pieces_of(source)
            python = [self._python_piece(line, text) for line, text in pieces]
            # keep only this version's pieces: memory follows the document, not its history
            self._python = dict(zip(pieces, python))
            self._trees = {source: _joined_tree(python)}
        tree = self._trees[source]
        return tree if tree is not None else super().python_tree(source, path)

    def _joined(self, tree: ast.Module | None) -> tuple[str, list[tuple[int, str]]] | None:
        """The version and its pieces when `tree` is this parser's joined tree of that version."""
        source, pieces = self._split
        return (source, pieces) if tree is not None and self._trees.get(source) is tree else None

    def guard_check(self, source: str, path: str, tree: ast.Module | None) -> guard.Problem | None:
        joined = self._joined(tree)
        if joined is None or joined[0] != source:
            return super().guard_check(source, path, tree)
        return guard.check(source, path, tree, lambda text, name: self._compile(joined[1], text, name),
                           lambda tree, text: self._too_deep(joined[1], tree, text))

    def _too_deep(self, pieces: list[tuple[int, str]], tree: ast.Module, source: str) -> ast.AST | None:
        """`guard._too_deep(tree, source)` for the joined tree, walking only the pieces not walked
        before. A node's depth in the joined module is its depth in its piece's module (both put
        the top-level statements at depth 1), and the walk's pruning is sound with any bound on
        the lines' length, so the module is within the bound exactly when every piece is; when
        one is not, the whole tree is walked for the node the guard reports."""
        shallow = {}
        for line, text in pieces:
            ok = self._shallow.get(text)
            if ok is None:
                ok = guard._too_deep(self._python[(line, text)], text) is None
            shallow[text] = ok
            if not ok:
                return guard._too_deep(tree, source)
        self._shallow = shallow  # only this version's pieces: memory follows the document
        return None

    def _compile(self, pieces: list[tuple[int, str]], source: str, path: str) -> guard.Problem | None:
        """`guard.compile_problem(source, path)`, compiling only the pieces not compiled before.

        Without `__future__` imports (which change how what follows compiles) and without a
        `global` statement at module level (which refuses a name bound before it in another
        statement), a module compiles exactly when each of its top-level statements does. When
        some piece does not, the whole source is compiled for the compiler's own first error."""
        if "__future__" in source or any("global" in text and _global_at_module_level(self._python[(line, text)])
                                         for line, text in pieces):
            return guard.compile_problem(source, path)
        compiles = {}
        for _, text in pieces:
            ok = self._compiles.get(text)
            if ok is None:
                ok = guard.compile_problem(text, path) is None
            compiles[text] = ok
            if not ok:
                return guard.compile_problem(source, path)
        self._compiles = compiles  # only this version's pieces: memory follows the document
        return None

    def gated(self, rules: list, tree: ast.Module) -> list:
        joined = self._joined(tree)
        if joined is None:
            return super().gated(rules, tree)
        return gated(rules, tree, lambda: self._facts(joined[1]))

    def _facts(self, pieces: list[tuple[int, str]]) -> Facts:
        """The gate's facts of the joined tree, gathered only from the pieces not seen before."""
        parts = {}
        for line, text in pieces:
            part = self._gathered.get(text)
            parts[text] = part if part is not None else gather(self._python[(line, text)])
        self._gathered = parts
        return facts_of_parts(list(parts.values()))

    def libcst_module(self, source: str, path: str,
                      problem: guard.Problem | None = None) -> tuple[cst.Module | None, Finding | None]:
        if source not in self._modules:
            pieces = self._pieces_of(source)
            parsed = [self._piece(text) for _, text in pieces]
            self._pieces = {text: piece for (_, text), piece in zip(pieces, parsed)}
            self._modules = {source: _joined_module(parsed)}
            self._counts = [len(piece.module.body) for piece in parsed] if self._modules[source] else None
        module = self._modules[source]
        return (module, None) if module is not None else super().libcst_module(source, path, problem)

    def statement_counts(self, module: cst.Module) -> list[int] | None:
        """How many of `module`'s top-level statements each piece holds, when `module` is this
        parser's joined module of its last version (None otherwise)."""
        joined = any(known is module for known in self._modules.values())
        return list(self._counts) if self._counts is not None and joined else None


def _global_at_module_level(tree: ast.Module) -> bool:
    """A `global` statement in module-level code (not in a function or class body)."""
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Global):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return False


def _joined_tree(python: list[ast.Module | None]) -> ast.Module | None:
    if any(tree is None for tree in python):
        return None
    return ast.Module(body=[statement for part in python for statement in part.body], type_ignores=[])


def _joined_module(parsed: list[_Piece | None]) -> cst.Module | None:
    if any(piece is None for piece in parsed):
        return None
    first = parsed[0].module
    indents = {piece.module.default_indent for piece in parsed if piece.has_indent}
    if len(indents) > 1 or any(piece.module.default_newline != first.default_newline for piece in parsed):
        return None
    statements: list[cst.BaseStatement] = []
    carried: tuple[cst.EmptyLine, ...] = ()  # the previous piece's trailing comments and blank lines
    for piece in parsed:
        body = list(piece.module.body)
        if body and carried:
            body[0] = body[0].with_changes(leading_lines=(*carried, *body[0].leading_lines))
            carried = ()
        statements += body
        carried += tuple(piece.module.footer)
    return cst.Module(body=statements, header=first.header, footer=carried, encoding=first.encoding,
                      default_indent=indents.pop() if indents else first.default_indent,
                      default_newline=first.default_newline,
                      has_trailing_newline=parsed[-1].module.has_trailing_newline)
