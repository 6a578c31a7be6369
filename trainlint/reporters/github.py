"""`--format github`: GitHub Actions workflow commands, one annotation per finding.

The runner parses `::level key=value,...::message`, so the message escapes `%`, CR and LF, and
property values also escape `:` and `,` (the property separators): a file name holding a newline
and `::error ...` stays inside its own annotation. The other control characters have no escape of
the runner's: they are shown escaped as everywhere in text output (`trainlint.sanitize`).
"""

from __future__ import annotations

from typing import Sequence

from trainlint.finding import FileResult, Finding, Severity
from trainlint.reporters.options import ReportOptions
from trainlint.sanitize import escape_controls

LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    text = escape_controls(text, keep="\r\n")  # CR and LF have the runner's own escapes
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding) -> str:
    properties = {
        "file": finding.path.replace("\\", "/"),
        "line": finding.line,
        "col": finding.column,
        "endLine": finding.end_line,
        "endColumn": finding.end_column,
        "title": f"{finding.code} {finding.name}",
    }
    message = finding.message
    if finding.cell is not None:
        # a notebook: its lines count within a cell, not in the file GitHub shows, so the
        # annotation is on the file and the message says where
        for key in ("line", "col", "endLine", "endColumn"):
            del properties[key]
        message = f"cell {finding.cell}, line {finding.line}, column {finding.column}: {message}"
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{LEVELS[finding.severity]} {props}::{escape_data(message)}"


def render(results: Sequence[FileResult], files_checked: int, options: ReportOptions) -> str:
    return "".join(annotation(f) + "\n" for r in results for f in r.findings)
