"""What a file must pass before LibCST parses it: CPython's own compiler, and a nesting bound.

LibCST's native parser overflows its stack (a segfault that kills the process, not an exception)
on deep nesting such as 1,500 `(` or a 4,000-deep `lambda:` chain, and takes quadratic time on long
operator chains. CPython's parser refuses more than 200 nested brackets and runs out of stack
gracefully (MemoryError) on deeper expressions; what it accepts is then measured on its tree, and a
file nested deeper than `MAX_DEPTH` is a TL000 ("too deeply nested to analyse") instead of a crash.

`compile()` (never executing anything) also reports what the grammar allows but Python refuses:
`return` or `yield` outside a function, `break` outside a loop, `nonlocal` at module level.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
import warnings
from dataclasses import dataclass
from typing import Callable

from trainlint.positions import split_lines

#: Deepest syntax tree a file may have (in `ast` nodes). LibCST parses 2,000-deep chains of every
#: expression kind without crashing; real code stays below 100.
MAX_DEPTH = 1500

TOO_DEEP = "too deeply nested to analyse"

#: Python frames that LibCST needs to generate code for (and trainlint to walk) a tree MAX_DEPTH
#: deep; Python 3.11 frames of pure-Python calls do not grow the C stack.
RECURSION_LIMIT = 20_000


@dataclass(frozen=True)
class Problem:
    """Why a file is not handed to LibCST: 1-based line and column, and the message."""

    line: int
    column: int
    message: str
    #: where the span ends on `line` (CPython gives one for some errors), else None
    end_column: int | None = None
    #: False when CPython's parser rejected the file: LibCST, whose grammar may accept newer
    #: syntax than this interpreter's, may still parse it (see `check`).
    final: bool = True


def _too_deep(tree: ast.AST, source: str = "") -> ast.AST | None:
    """The first node deeper than MAX_DEPTH, or None.

    A subtree cannot be deeper than twice the characters of its code, plus one: every level below
    a node takes at least one character of its own (an operator, a bracket, a name), except a
    wrapper without code of its own (`Expr`, `arguments`, `Load`), whose child then does. So a node
    whose code fits in fewer characters than that with the depth still allowed below it is not
    walked: this visits the statements and expressions that span many lines only. A node's code is
    bounded by its lines (a decorated definition's begin at its first decorator) times the
    longest line of the file."""
    longest = max(map(len, source.split("\n"))) + 1 if source else MAX_DEPTH  # the newline included
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return node
        allowed = MAX_DEPTH - depth
        for child in _children(node):
            first = getattr(child, "lineno", None)
            if first is not None:
                if isinstance(child, ast.expr) and child.end_lineno == first \
                        and child.end_col_offset - child.col_offset < allowed:
                    continue
                decorators = getattr(child, "decorator_list", None)
                if decorators:
                    first = min(first, *(d.lineno for d in decorators))
                if 2 * (child.end_lineno - first + 1) * longest + 2 < allowed:
                    continue
            stack.append((child, depth + 1))
    return None


def _children(node: ast.AST) -> list[ast.AST]:
    """`ast.iter_child_nodes(node)` as a list, in the same order, without its generators."""
    children = []
    for name in node._fields:
        value = getattr(node, name, None)
        if type(value) is list:
            children += [item for item in value if isinstance(item, ast.AST)]
        elif isinstance(value, ast.AST):
            children.append(value)
    return children


def _longest_logical_line(source: str) -> int:
    """Tokens in the longest logical line: a bound on nesting that needs no parse."""
    longest = count = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            count += 1
            if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                longest, count = max(longest, count), 0
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return max(longest, count)


def check(source: str, path: str, tree: ast.Module | None = None,
          compiled: "Callable[[str, str], Problem | None] | None" = None,
          too_deep: "Callable[[ast.Module, str], ast.AST | None] | None" = None) -> Problem | None:
    """None if LibCST may parse `source`; else the TL000 to report instead.

    `tree` is Python's parse of `source` when the caller has it already (the engine parses once
    for the guard and the gate); without it the source is parsed here. `compiled` replaces the
    compiler's check (`compile_problem`) with one that gives the same answer (the language
    server's, which compiles only the changed pieces of a document), and `too_deep` the nesting
    bound's walk (`_too_deep`; the server's walks only the changed pieces)."""
    # CPython warns about the code it compiles (`"\d"`, `1()`, `assert (x, y)`) on stderr:
    # not the linter's findings, and not to be printed among its output
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _check(source, path, tree, compiled or compile_problem, too_deep or _too_deep)


def _check(source: str, path: str, tree: ast.Module | None,
           compiled: "Callable[[str, str], Problem | None]",
           too_deep: "Callable[[ast.Module, str], ast.AST | None]" = None) -> Problem | None:
    try:
        if tree is None:
            tree = ast.parse(source, filename=path)
    except SyntaxError as err:
        if "too many nested" in (err.msg or ""):
            return Problem(err.lineno or 1, max(err.offset or 1, 1), f"{TOO_DEEP}: {err.msg}")
        message = f"cannot parse: {err.msg}"
        line, column = err.lineno or 1, max(err.offset or 1, 1)
        # Grammars differ: LibCST may accept what this Python does not, if it is safe to try.
        return Problem(line, column, message, final=_longest_logical_line(source) > MAX_DEPTH)
    except (MemoryError, RecursionError):
        return Problem(1, 1, TOO_DEEP)
    except ValueError as err:  # e.g. a NUL byte (the engine reports those before this)
        return Problem(1, 1, f"cannot parse: {err}")
    deep = (too_deep or _too_deep)(tree, source)
    if deep is not None:
        line = getattr(deep, "lineno", 1)
        lines = split_lines(source)
        text = lines[line - 1] if line <= len(lines) else ""
        column = len(text.encode("utf-8")[:getattr(deep, "col_offset", 0)].decode("utf-8", "ignore")) + 1
        return Problem(line, column, TOO_DEEP)
    return compiled(source, path) if compiled is not compile_problem else compile_problem(source, path, tree)


#: The recursion limit `compiles` runs the compiler under (Python's default): the same answer in
#: every process, whatever limit an earlier check left (the compiler's nesting bound follows it).
_COMPILES_LIMIT = 1000


def compiles(source: str, path: str) -> bool:
    """CPython compiles `source` (never executing it). For a file no rule reads this is the whole
    check: the nesting bound and Python's tree exist for LibCST and the gate. False sends the
    file through `check`, which says why."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _compile(source, path, None, _COMPILES_LIMIT)
        return True
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False


def compile_problem(source: str, path: str, tree: ast.Module | None = None) -> Problem | None:
    """What CPython's compiler (never executing anything) refuses in a source that parses.

    With `tree`, Python's parse of `source` already measured within `MAX_DEPTH`, that tree is
    compiled instead of parsing the text again; converting it back to CPython's own tree counts
    one level of Python's recursion limit per node, so the limit is raised for it (the compiler's
    own bound is three times the limit)."""
    limit = sys.getrecursionlimit()
    try:
        _compile(source, path, tree, max(limit, RECURSION_LIMIT) if tree is not None else limit)
    except SyntaxError as err:
        end = err.end_offset if err.end_lineno == err.lineno and (err.end_offset or 0) > (err.offset or 0) else None
        return Problem(err.lineno or 1, max(err.offset or 1, 1), f"cannot compile: {err.msg}", end_column=end)
    except (MemoryError, RecursionError):
        return Problem(1, 1, TOO_DEEP)
    return None


def _compile(source: str, path: str, tree: ast.Module | None, recursion_limit: int) -> None:
    """`compile()` of `tree` (else of the text) under `recursion_limit`, restored afterwards."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(recursion_limit)
    # a notebook's cells may `await` at top level (IPython runs them in an event loop)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if path.lower().endswith(".ipynb") else 0
    try:
        compile(tree if tree is not None else source, path, "exec", flags=flags, dont_inherit=True)
    finally:
        sys.setrecursionlimit(before)
