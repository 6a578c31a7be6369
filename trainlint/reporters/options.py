"""Options shared by the reporters."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from trainlint.positions import split_lines


def read_lines(path: str) -> list[str] | None:
    """A file's lines for `--show-source`, or None when it cannot be read now."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return split_lines(handle.read())
    except OSError:
        return None


def read_cell_lines(path: str) -> dict[int, list[str]] | None:
    """A notebook's lines for `--show-source`, by cell number; None when it cannot be read now."""
    from trainlint.notebook import NotebookError, read_notebook

    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            notebook = read_notebook(handle.read())
    except (OSError, NotebookError):
        return None
    return {cell.number: split_lines(cell.text) for cell in notebook.cells}


@dataclass(frozen=True)
class ReportOptions:
    #: ANSI colour in the text format (the CLI turns it on only for a terminal).
    color: bool = False
    #: Text format: print the offending line with a caret under the reported span.
    show_source: bool = False
    #: Text format: under each finding, its premises (`--show-evidence`).
    show_evidence: bool = False
    #: Where `--show-source` gets a file's lines (the CLI passes stdin's text through this).
    source_lines: Callable[[str], list[str] | None] = read_lines
    #: Where `--show-source` gets a notebook's lines, by cell number.
    cell_lines: Callable[[str], dict[int, list[str]] | None] = read_cell_lines
    #: Directory SARIF artifact URIs are relative to.
    root: str = os.curdir
    #: Text format: the findings only, no summary line.
    quiet: bool = False
    #: `check --fix`: how many fixes were applied (None: not fixing); the summary says so.
    fixed: int | None = None
