"""Parsing a source as `lint_source` does: bytes to text (PEP 263), Python's parse for the syntax
check and the gate, LibCST's tree, and TL000 for what does not parse. Below the engine, so the
language server's incremental parser (`trainlint.incremental`) builds on it without the engine.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import TYPE_CHECKING

from trainlint import guard
from trainlint.finding import SYNTAX_ERROR_CODE, Finding, Severity
from trainlint.gate import gated, python_tree
from trainlint.positions import split_lines

if TYPE_CHECKING:
    import libcst as cst

# LibCST is imported by the parse that needs it: a file no rule can fire in is never given to it.


def _syntax_error(path: str, line: int, column: int, message: str, source: str | None = None,
                  end_column: int | None = None) -> Finding:
    """TL000 at (line, column); the span stays within the line when the source is known (CPython
    puts "unindent does not match" one past the line's end)."""
    end = end_column if end_column and end_column > column else column + 1
    if source is not None:
        lines = split_lines(source)
        length = len(lines[line - 1]) if 1 <= line <= len(lines) else 0
        column = min(column, length + 1)
        end = max(column, min(end, length + 1))
    return Finding(path, line, column, line, end, SYNTAX_ERROR_CODE, "syntax-error",
                   Severity.ERROR, message)


def decode_source(data: bytes, path: str) -> tuple[str | None, Finding | None]:
    """Bytes to text honouring PEP 263 coding cookies; undecodable bytes or NUL bytes are TL000."""
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        column = nul - (data.rfind(b"\n", 0, nul) + 1) + 1
        return None, _syntax_error(path, line, column, "source contains a NUL byte")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding), None
    except SyntaxError as err:  # an unknown coding cookie
        return None, _syntax_error(path, err.lineno or 1, 1, f"cannot decode: {err.msg}")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        return None, _syntax_error(path, line, column,
                                   f"cannot decode byte 0x{data[err.start]:02x} as {err.encoding}")


def _parse(source: str, path: str, problem: guard.Problem | None) -> tuple[cst.Module | None, Finding | None]:
    """LibCST's tree; `problem` is CPython's objection, if any, reported if LibCST agrees."""
    import libcst as cst

    try:
        return cst.parse_module(source), None
    except cst.ParserSyntaxError as err:
        # CPython's own message ("'(' was never closed", "Missing parentheses in call to 'print'")
        # says more than LibCST's token list, and points where the user expects.
        if problem is not None:
            return None, _syntax_error(path, problem.line, problem.column, problem.message, source,
                                       problem.end_column)
        message = re.sub(r"^parser error: error at \d+:\d+: ", "", err.message)
        return None, _syntax_error(path, err.raw_line, err.raw_column + 1, f"cannot parse: {message}", source)
    except RecursionError:
        return None, _syntax_error(path, 1, 1, guard.TOO_DEEP)


class Parser:
    """How `lint_source` parses a source: from scratch, with Python's parser (the syntax check and
    the gate) and LibCST's, and checks it with the guard and the gate. The language server keeps
    one `trainlint.incremental.DocumentParser` per open document instead, which re-parses,
    compiles and gathers the gate's facts of only what an edit changed."""

    def python_tree(self, source: str, path: str) -> ast.Module | None:
        return python_tree(source, path)

    def compiles(self, source: str, path: str) -> bool:
        return guard.compiles(source, path)

    def guard_check(self, source: str, path: str, tree: ast.Module | None) -> guard.Problem | None:
        return guard.check(source, path, tree)

    def gated(self, rules: list, tree: ast.Module) -> list:  # instances of `Rule`, as gate.gated
        return gated(rules, tree)

    def libcst_module(self, source: str, path: str,
                      problem: guard.Problem | None = None) -> tuple[cst.Module | None, Finding | None]:
        return _parse(source, path, problem)


def dotted_name(expr: cst.CSTNode | None) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    import libcst as cst  # imported already: a node exists

    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted_name(expr.value)
        return f"{base}.{expr.attr.value}" if base else None
    return None
