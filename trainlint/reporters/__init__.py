"""Reporters: pure functions from check results to the text a format prints.

Each module exposes `render(results, files_checked, options) -> str`; `REPORTERS` maps a
`--format` name to it. Reporters read findings and rule metadata only: they never run checks.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Callable, Iterator, Sequence

from trainlint.finding import FileResult
from trainlint.reporters.options import ReportOptions
from trainlint.reporters.statistics import render_statistics

Reporter = Callable[[Sequence[FileResult], int, ReportOptions], str]


class _Reporters(Mapping):
    """`--format` name -> its reporter's render; a reporter's module is imported when it is looked
    up, so a run that prints text never imports the SARIF, JSON or GitHub reporters."""

    _MODULES = ("text", "json", "github", "sarif", "lsp")

    def __getitem__(self, fmt: str) -> Reporter:
        if fmt not in self._MODULES:
            raise KeyError(fmt)
        return importlib.import_module(f"{__name__}.{fmt}").render

    def __contains__(self, fmt: object) -> bool:
        return fmt in self._MODULES

    def __iter__(self) -> Iterator[str]:
        return iter(self._MODULES)

    def __len__(self) -> int:
        return len(self._MODULES)


REPORTERS: Mapping[str, Reporter] = _Reporters()


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
