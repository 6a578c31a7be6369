"""`--format json`: the contract of RULES.md, one JSON object."""

from __future__ import annotations

import json
from typing import Sequence

from trainlint import __version__
from trainlint.finding import FileResult
from trainlint.reporters.catalog import docs_urls
from trainlint.reporters.options import ReportOptions


def to_contract(results: Sequence[FileResult], files_checked: int) -> dict:
    urls = docs_urls()
    return {
        "version": __version__,
        "files_checked": files_checked,
        "findings": [{**f.to_dict(), "url": urls.get(f.code)} for r in results for f in r.findings],
    }


def render(results: Sequence[FileResult], files_checked: int, options: ReportOptions) -> str:
    contract = to_contract(results, files_checked)
    if options.fixed is not None:  # `check --fix`: how many fixes were applied; `findings` is what remains
        contract["fixed"] = options.fixed
    return json.dumps(contract, indent=2) + "\n"
