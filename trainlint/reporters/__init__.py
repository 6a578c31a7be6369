"""Reporters: pure functions from check results to the text a format prints.

Each module exposes `render(results, files_checked, options) -> str`; `REPORTERS` maps a
`--format` name to it. Reporters read findings and rule metadata only: they never run checks.
"""

from __future__ import annotations

from typing import Callable, Sequence

from trainlint.finding import FileResult
from trainlint.reporters import github, json, lsp, sarif, text
from trainlint.reporters.options import ReportOptions
from trainlint.reporters.statistics import render_statistics

Reporter = Callable[[Sequence[FileResult], int, ReportOptions], str]

REPORTERS: dict[str, Reporter] = {
    "text": text.render,
    "json": json.render,
    "github": github.render,
    "sarif": sarif.render,
    "lsp": lsp.render,
}


def render(fmt: str, results: Sequence[FileResult], files_checked: int | None = None,
           options: ReportOptions | None = None, **option_values) -> str:
    """Render `results` in format `fmt` (a key of REPORTERS).

    Options come as a ReportOptions or as keyword arguments (`color=True, show_source=True`).
    """
    if fmt not in REPORTERS:
        raise ValueError(f"unknown format '{fmt}' (choose from {', '.join(REPORTERS)})")
    options = options or ReportOptions(**option_values)
    checked = len(results) if files_checked is None else files_checked
    return REPORTERS[fmt](list(results), checked, options)


__all__ = ["REPORTERS", "ReportOptions", "render", "render_statistics"]
