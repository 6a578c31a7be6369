"""Parsing a source as `lint_source` does: bytes to text (PEP 263), Python's parse for the syntax
check and the gate, LibCST's tree, and TL000 for what does not parse. Below the engine, so the
language server's incremental parser (`trainlint.incremental`) builds on it without the engine.
"""

from __future__ import annotations

import ast
import bisect
import io
import keyword
import re
import tokenize
import unicodedata
from dataclasses import dataclass, replace

from typing import TYPE_CHECKING

from trainlint import guard
from trainlint.finding import SYNTAX_ERROR_CODE, Edit, Finding, Severity
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


# -- identifiers as Python reads them ---------------------------------------------------------------
# Python reads every identifier in its NFKC form (PEP 3131): `torch.ｌｏａｄ(p, ｗeights_only=False)`
# runs `torch.load(p, weights_only=False)`. LibCST keeps identifiers as written, so a rule comparing
# names would not see it. The engine and the project reader check the text with each name (as the
# tokenizer finds it: strings and comments are left as they are) rewritten to its NFKC form, and
# findings are moved back to the columns of the text as written. (A name inside an f-string's
# braces is a part of a STRING token to Python 3.11's tokenizer: it stays as written.)

#: what Python's tokenizer may read as (part of) a name: letters, digits, `_`, any non-ASCII character
_NAME_PART = re.compile(r"[\w\x80-\U0010FFFF]+")


@dataclass(frozen=True)
class ColumnMap:
    """Where the identifiers that NFKC made shorter or longer are, to give columns of the
    normalised text (0-based) as columns of the text as written."""

    #: 1-based line -> the changed tokens on it: (normalised start, normalised end, start, end)
    tokens: dict[int, list[tuple[int, int, int, int]]]

    def column(self, line: int, column: int) -> int:
        """The written text's 0-based column of the normalised text's `column` on `line` (one
        inside a changed identifier goes to its start)."""
        changed = self.tokens.get(line)
        if not changed:
            return column
        at = bisect.bisect_right(changed, (column, float("inf"))) - 1
        if at < 0:
            return column
        start, end, written_start, written_end = changed[at]
        if column >= end:
            return column + written_end - end
        return written_start

    def _edit(self, edit: Edit) -> Edit:
        return replace(edit, column=self.column(edit.line, edit.column - 1) + 1,
                       end_column=self.column(edit.end_line, edit.end_column - 1) + 1)

    def restore(self, finding: Finding) -> Finding:
        """`finding`, found in the normalised text, at the same place in the text as written."""
        fix = finding.fix
        if fix is not None:
            fix = replace(fix, edits=tuple(self._edit(edit) for edit in fix.edits))
        return replace(finding, column=self.column(finding.line, finding.column - 1) + 1,
                       end_column=self.column(finding.end_line, finding.end_column - 1) + 1, fix=fix)


def _renamed(word: str) -> str | None:
    """The name Python reads for `word` when that differs from it: a non-ASCII word whose NFKC form
    is an identifier and no keyword (`ｉｆ` is no keyword to Python: such a file does not compile)."""
    if word.isascii():
        return None
    normal = unicodedata.normalize("NFKC", word)
    return normal if normal != word and normal.isidentifier() and not keyword.iskeyword(normal) else None


def normalize_identifiers(source: str) -> tuple[str, ColumnMap | None]:
    """`source` with every identifier in its NFKC form, as Python reads it, and the map of the
    columns that moved (None when none did). An ASCII text (nearly every file) costs one
    `isascii`; a text whose non-ASCII words are all NFKC already (CJK comments, accented names)
    one search; only a text with a word NFKC changes into another name is tokenized."""
    if source.isascii() or not any(_renamed(word.group()) for word in _NAME_PART.finditer(source)):
        return source, None
    lines = io.StringIO(source, newline="").readlines()
    changes: dict[int, list[tuple[int, int, str]]] = {}  # 0-based line -> (start, end, NFKC form)

    def identifier(line: int, start: int, end: int, text: str) -> None:
        normal = _renamed(text)
        if normal is not None:
            changes.setdefault(line - 1, []).append((start, end, normal))

    # Python's tokenizer takes any run of letters, digits, `_` and non-ASCII characters as one name
    # and judges it in its NFKC form; `tokenize` splits some of them (`ｗｅｉｇｈｔｓ＿ｏｎｌｙ`: `＿` is no
    # `\w`): adjacent pieces are joined again.
    run: list | None = None  # [line, start, end, text] of the name being read
    try:
        for token in tokenize.generate_tokens(iter(lines).__next__):
            if token.type in (tokenize.NAME, tokenize.ERRORTOKEN) and _NAME_PART.fullmatch(token.string):
                if run is not None and run[0] == token.start[0] and run[2] == token.start[1]:
                    run[2], run[3] = token.end[1], run[3] + token.string
                    continue
                if run is not None:
                    identifier(*run)
                run = [token.start[0], token.start[1], token.end[1], token.string]
            elif run is not None:
                identifier(*run)
                run = None
    except (tokenize.TokenError, SyntaxError, StopIteration):
        pass  # what was read so far is rewritten; the rest does not parse anyway
    if run is not None:
        identifier(*run)
    moved: dict[int, list[tuple[int, int, int, int]]] = {}
    for number, tokens in changes.items():
        text, parts, last, shift = lines[number], [], 0, 0
        for start, end, normal in tokens:
            parts += [text[last:start], normal]
            last = end
            if len(normal) != end - start or shift:
                moved.setdefault(number + 1, []).append((start + shift, start + shift + len(normal), start, end))
            shift += len(normal) - (end - start)
        lines[number] = "".join(parts) + text[last:]
    return "".join(lines), (ColumnMap(moved) if moved else None)


class LibCSTRefused(Exception):
    """LibCST's parser accepted the source but would not build its tree (a node's own check,
    `CSTValidationError`: `[(x)for x in y]` is valid Python, yet LibCST wants a space before
    `for`). The file cannot be checked: the engine says it was skipped, with this message."""


def _parse(source: str, path: str, problem: guard.Problem | None) -> tuple[cst.Module | None, Finding | None]:
    """LibCST's tree; `problem` is CPython's objection, if any, reported if LibCST agrees."""
    import libcst as cst

    try:
        return cst.parse_module(source), None
    except cst.CSTValidationError as err:
        if problem is not None:  # Python refuses it too: its own message says where
            return None, _syntax_error(path, problem.line, problem.column, problem.message, source,
                                       problem.end_column)
        raise LibCSTRefused(f"skipped {path}: LibCST cannot build a tree of it, though Python parses it "
                            f"({err}); no rule ran on it") from None
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
