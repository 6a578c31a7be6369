"""`--format lsp`: a JSON object mapping file URIs to lists of LSP `Diagnostic` objects.

Every checked file gets an entry (an empty list clears an editor's old diagnostics). Positions
become 0-based through `trainlint.positions.to_lsp`, the one place that conversion lives.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

from trainlint.finding import FileResult, Finding, Severity
from trainlint.positions import to_lsp
from trainlint.reporters.catalog import docs_urls
from trainlint.reporters.options import ReportOptions

#: LSP DiagnosticSeverity: Error = 1, Warning = 2, Information = 3.
SEVERITIES = {Severity.ERROR: 1, Severity.WARNING: 2, Severity.INFO: 3}


def file_uri(path: str) -> str:
    # realpath, not Path.resolve: it raises RuntimeError on a symlink loop
    return Path(os.path.realpath(path)).as_uri()


def diagnostic(finding: Finding, docs_urls: dict[str, str], uri: str | None = None) -> dict:
    start_line, start_character = to_lsp(finding.line, finding.column)
    end_line, end_character = to_lsp(finding.end_line, finding.end_column)
    result = {
        "range": {
            "start": {"line": start_line, "character": start_character},
            "end": {"line": end_line, "character": end_character},
        },
        "severity": SEVERITIES[finding.severity],
        "code": finding.code,
        "source": "trainlint",
        "message": finding.message,
    }
    if finding.code in docs_urls:
        result["codeDescription"] = {"href": docs_urls[finding.code]}
    if finding.cell is not None:  # a notebook: the range counts within this cell
        result["data"] = {"cell": finding.cell}
    related = [e for e in finding.evidence if e.line != finding.line]
    if uri is not None and related:  # the premises proven on other lines, each at its whole line
        result["relatedInformation"] = [{
            "location": {"uri": uri, "range": {"start": {"line": e.line - 1, "character": 0},
                                               "end": {"line": e.line, "character": 0}}},
            "message": f"{e.premise} ({e.verdict}: {e.kind})",
        } for e in related]
    return result


def to_diagnostics(results: Sequence[FileResult]) -> dict[str, list[dict]]:
    urls = docs_urls()
    uris = {r.path: file_uri(r.path) for r in results}
    return {uris[r.path]: [diagnostic(f, urls, uris[r.path]) for f in r.findings] for r in results}


def render(results: Sequence[FileResult], files_checked: int, options: ReportOptions) -> str:
    return json.dumps(to_diagnostics(results), indent=2) + "\n"
