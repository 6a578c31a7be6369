"""Jupyter notebooks (`.ipynb`): their code cells as one Python module, positions in that module
as (cell, line in the cell), and a fixed module written back into the notebook.

The code cells are joined in order, one separator comment line between two cells, so that a
training loop whose optimizer is built in one cell, stepped in another and whose helper sits in a
third is checked as one file (as the kernel runs it). Markdown and raw cells are left out but
counted: a cell's number is its 1-based index among all the notebook's cells, as ruff counts them.
IPython syntax is never parsed as Python: a line magic (`%time f()`, `!pip install x`,
`x = !ls`), a help line (`model?`) becomes a marker comment (inside a block, `pass` with the
marker at its own indentation), and the body of a cell magic that does not run Python
(`%%bash`, `%%writefile`) becomes marker comments; every cell keeps its line count, so line
numbers map back exactly. When a fix is written back, each marker line gets its original text
again.

nbformat reads and validates the notebook (imported here only when a notebook is read, so a run
without notebooks never loads it). Writing back changes only the `source` of code cells in the
notebook's own JSON, keeping its key order, indentation, outputs, metadata and final newline,
then validates the result with nbformat before anything is written.
"""

from __future__ import annotations

import bisect
import copy
import json
import re
import warnings
from dataclasses import dataclass, field, replace

from trainlint.finding import SYNTAX_ERROR_CODE, Edit, Evidence, Finding, Fix, Severity

SUFFIX = ".ipynb"
#: the line between two cells of the joined module (a comment: it changes nothing Python sees)
SEPARATOR = "# %% trainlint: next cell"
#: what an IPython line becomes (after `pass` in a block); restored when a fix is written back
MARKER = "# %trainlint-ipython"
#: cell magics whose body is Python the kernel runs (the magic line alone is neutralised)
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3"})

_LINE_MAGIC = re.compile(r"^\s*(%|!|\?)")
_HELP = re.compile(r"^\s*[\w.\[\]()]+\s*\?\??\s*$|^\s*\?\??")
_ASSIGNED_MAGIC = re.compile(r"^\s*[\w.,\s\[\]()*]+?(?<![=!<>])=\s*[%!]")


def is_notebook(path: str) -> bool:
    return path.lower().endswith(SUFFIX)


class NotebookError(Exception):
    """A notebook that cannot be read or written: not JSON, not a valid notebook."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


def _source_text(source) -> str:
    return "".join(source) if isinstance(source, list) else source


def _neutralise(text: str) -> tuple[str, list[str]]:
    """A code cell's text with its IPython lines replaced (same number of lines), and the
    replaced lines in order."""
    lines = text.split("\n")
    originals: list[str] = []
    out = []
    first = next((line.lstrip() for line in lines if line.strip()), "")
    words = first[2:].split()
    if first.startswith("%%") and (words[0] if words else "") not in PYTHON_CELL_MAGICS:
        # the body of `%%bash`, `%%writefile` is not Python: none of it is checked
        for number, line in enumerate(lines):
            if number == len(lines) - 1 and line == "":
                out.append(line)  # after the cell's final newline
            else:
                originals.append(line)
                out.append(MARKER)
        return "\n".join(out), originals
    continued = False  # a magic line ending with `\` continues on the next line
    state = (0, None, False)  # where the Python before this line leaves off (`_scan`)
    for line in lines:
        starts_statement = state == (0, None, False)  # IPython reads magics only there too
        if line.strip() and (continued or starts_statement and (
                _LINE_MAGIC.match(line) or _HELP.match(line) or _ASSIGNED_MAGIC.match(line))):
            originals.append(line)
            indent = line[:len(line) - len(line.lstrip())]
            # at top level a comment (a fix that adds an import or a helper reads the module's
            # first statements); in a block `pass`, which a block of only a magic needs
            out.append(f"{indent}pass  {MARKER}" if indent and not continued else MARKER)
            continued = line.rstrip().endswith("\\")
        else:
            out.append(line)
            continued = False
            state = _scan(line, state)
    return "\n".join(out), originals


def _scan(line: str, state: tuple[int, str | None, bool]) -> tuple[int, str | None, bool]:
    """(bracket depth, open triple-quoted string, ends with a backslash) after `line`: a line that
    continues a statement (`% b)` in `("..." \n % b)`, a string's text) is never a magic."""
    depth, quote, _ = state
    i, comment = 0, False
    while i < len(line):
        if quote is not None:
            if line[i] == "\\":
                i += 2
            elif line.startswith(quote, i):
                i, quote = i + len(quote), None
            else:
                i += 1
            continue
        char = line[i]
        if char == "#":
            comment = True
            break
        if char in "\"'":
            quote = line[i:i + 3] if line[i:i + 3] in ('"""', "'''") else char
            i += len(quote)
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        i += 1
    backslash = line.rstrip().endswith("\\") and quote is None and not comment
    if quote in ('"', "'"):
        quote = None  # a one-quote string ends with its line (or the line is an error anyway)
    return depth, quote, backslash


@dataclass
class CodeCell:
    number: int  # 1-based among all the notebook's cells
    text: str  # as the notebook holds it
    python: str  # with IPython lines neutralised
    originals: list[str]  # the neutralised lines, in order
    start: int = 0  # its first line in the joined module (1-based)

    @property
    def lines(self) -> list[str]:
        body = self.python[:-1] if self.python.endswith("\n") else self.python
        return body.split("\n") if body else []


@dataclass
class Joined:
    """The code cells joined into one module, and the way back."""

    source: str
    cells: list[CodeCell] = field(default_factory=list)

    def locate(self, line: int) -> tuple[CodeCell | None, int]:
        """The cell holding the joined module's `line` and the line within it (1-based). The
        separator after a cell counts as the line after the cell's last."""
        if not self.cells:
            return None, line
        at = max(0, bisect.bisect_right([c.start for c in self.cells], line) - 1)
        return self.cells[at], line - self.cells[at].start + 1

    def to_cells(self, finding: Finding) -> Finding:
        """`finding` (in the joined module's lines) in its cell's lines, with the cell's number;
        its fix's edits likewise, each with its own cell."""
        cell, line = self.locate(finding.line)
        if cell is None:
            return finding
        end_cell, end_line = self.locate(finding.end_line)
        end_column = finding.end_column
        if end_cell is not cell:  # a span never leaves its cell: it ends with the cell's last line
            lines = cell.lines
            end_line, end_column = max(1, len(lines)), len(lines[-1]) + 1 if lines else 1
            if end_line == line and end_column <= finding.column:
                end_column = finding.column + 1
        fix = finding.fix
        if fix is not None:
            edits = [self._edit_to_cell(edit) for edit in fix.edits]
            # an edit reaching into another cell has no place in one cell's lines (`check --fix`
            # applies it to the joined module all the same)
            fix = Fix(fix.title, fix.safe, tuple(edits)) if all(edits) else None
        evidence = tuple(self._evidence_to_cell(e) if e.path == finding.path else e for e in finding.evidence)
        return replace(finding, line=line, end_line=end_line, end_column=end_column, fix=fix, cell=cell.number,
                       evidence=evidence)

    def _evidence_to_cell(self, premise: Evidence) -> Evidence:
        """A premise's line in its own cell (it may be proven in another cell than the finding's)."""
        cell, line = self.locate(premise.line)
        return premise if cell is None else replace(premise, line=line, cell=cell.number)

    def _edit_to_cell(self, edit: Edit) -> Edit | None:
        cell, line = self.locate(edit.line)
        end_cell, end_line = self.locate(edit.end_line)
        if cell is None or end_cell is not cell:
            return None
        return replace(edit, line=line, end_line=end_line, cell=cell.number)

    def split(self, source: str) -> list[str]:
        """The text of each code cell from a (fixed) joined module, IPython lines restored.
        Raises NotebookError when the cells cannot be told apart any more."""
        parts = source.split("\n" + SEPARATOR + "\n") if self.cells else []
        if len(parts) != len(self.cells):
            raise NotebookError("a fix moved code across cells")
        texts = []
        for cell, part in zip(self.cells, parts):
            if cell is self.cells[-1] and not cell.python.endswith("\n"):
                part = part.removesuffix("\n")  # the newline the joined module was given
            lines = part.split("\n")
            marked = [i for i, line in enumerate(lines) if line.strip().endswith(MARKER)]
            if len(marked) != len(cell.originals):
                raise NotebookError(f"a fix changed an IPython line of cell {cell.number}")
            for i, original in zip(marked, cell.originals):
                lines[i] = original
            texts.append("\n".join(lines))
        return texts


@dataclass
class Notebook:
    """A notebook as read: its JSON (as written, for writing back) and its code cells."""

    data: dict
    text: str
    cells: list[CodeCell]

    def joined(self) -> Joined:
        return join_cells((cell.number, cell.text) for cell in self.cells)

    def with_cells(self, texts: list[str]) -> str:
        """The notebook's text with its code cells' sources replaced by `texts` (in order),
        everything else kept: key order, indentation, outputs, metadata, the final newline."""
        if self.data.get("nbformat", 4) < 4:
            raise NotebookError(f"fixes are written to nbformat 4 notebooks only (this one is {self.data.get('nbformat')})")
        data = copy.deepcopy(self.data)
        cells = _cell_list(data)
        for cell, text in zip(self.cells, texts):
            raw = cells[cell.number - 1]
            if text == cell.text:
                continue  # as it was written (a list of lines split wherever its writer split it)
            # lines end at \n only, as in the cell (str.splitlines would also split at \f, U+2028)
            raw["source"] = re.findall(r"[^\n]*\n|[^\n]+\Z", text) if isinstance(raw.get("source"), list) else text
        indent = _indent_of(self.text)
        first_key = re.match(r'\{\s*"[^"]*":(\s?)', self.text)
        compact = indent is None and first_key is not None and not first_key.group(1)  # `{"a":1}`
        out = json.dumps(data, indent=indent, ensure_ascii=not _writes_unicode(self.text),
                         separators=(",", ":") if compact else None)
        if self.text.endswith("\n"):
            out += "\n"
        if "\r\n" in self.text:  # JSON's own line breaks only: those in strings are escaped
            out = out.replace("\n", "\r\n")
        validate(json.loads(out))
        return out


def join_cells(cells) -> Joined:
    """`cells`: (number, text) of the code cells, in order."""
    joined = Joined("")
    parts, line = [], 1
    for number, text in cells:
        python, originals = _neutralise(text)
        cell = CodeCell(number, text, python, originals, line)
        joined.cells.append(cell)
        parts.append(python)
        line += python.count("\n") + 2  # its lines, then the separator
    joined.source = ("\n" + SEPARATOR + "\n").join(parts)
    if joined.source and not joined.source.endswith("\n"):
        joined.source += "\n"
    return joined


def _cell_list(data: dict) -> list:
    if data.get("nbformat", 4) < 4:  # v3: cells in worksheets, which nbformat 4 flattens
        return [cell for sheet in data.get("worksheets", []) for cell in sheet.get("cells", [])]
    return data.get("cells", [])


def _indent_of(text: str) -> str | None:
    """The notebook's indentation (Jupyter writes one space), None when it is on one line."""
    match = re.match(r"\{[ \t]*\r?\n([ \t]*)\"", text)
    if match is None:
        return None  # written on one line
    return match.group(1)


def _writes_unicode(text: str) -> bool:
    """Whether the notebook stores non-ASCII text as itself (Jupyter does) or as \\u escapes."""
    return not text.isascii() or "\\u" not in text


def validate(data: dict) -> None:
    """Raise NotebookError unless `data` is a notebook nbformat accepts."""
    import nbformat  # a run without notebooks never imports it

    if not isinstance(data, dict) or "cells" not in data and "worksheets" not in data:
        raise NotebookError("not a notebook: the JSON has no `cells`")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "missing an id field": nbformat repairs it itself
            node = nbformat.from_dict(copy.deepcopy(data))
            nbformat.validate(node)
    except nbformat.ValidationError as err:
        raise NotebookError(f"not a valid notebook: {str(err).splitlines()[0]}") from None
    except Exception as err:  # an nbformat version nbformat has no schema for
        raise NotebookError(f"not a valid notebook: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}") from None


def read_notebook(text: str) -> Notebook:
    """The notebook in `text`; NotebookError (with a position in the file) when it is not one."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise NotebookError(f"not valid JSON: {err.msg}", err.lineno, err.colno) from None
    except RecursionError:
        raise NotebookError("not valid JSON: nested too deeply") from None
    validate(data)
    cells = []
    for number, cell in enumerate(_cell_list(data), start=1):
        if cell.get("cell_type") == "code":
            cells.append(CodeCell(number, _source_text(cell.get("source", cell.get("input", ""))), "", []))
    return Notebook(data, text, cells)


def notebook_error(path: str, err: NotebookError) -> Finding:
    """The TL000 finding of a notebook that cannot be read, at its place in the file."""
    return Finding(path, err.line, err.column, err.line, err.column + 1, SYNTAX_ERROR_CODE, "syntax-error",
                   Severity.ERROR, err.message)
