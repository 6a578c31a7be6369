"""The default format: `path:line:col: TL101 [name] message`, then a summary line."""

from __future__ import annotations

from typing import Sequence

import click

from trainlint.finding import FileResult, Finding, Severity
from trainlint.reporters.options import ReportOptions

_COLOURS = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "blue"}


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _style(text: str, options: ReportOptions, **style) -> str:
    return click.style(text, **style) if options.color else text


def _source_excerpt(finding: Finding, lines: list[str] | None, options: ReportOptions) -> list[str]:
    """The reported line with carets under the span (to the line's end for a multi-line span)."""
    if not lines or not 1 <= finding.line <= len(lines):
        return []
    text = lines[finding.line - 1]
    start = min(finding.column - 1, len(text))
    end = finding.end_column - 1 if finding.end_line == finding.line else len(text)
    end = max(start + 1, min(end, len(text)))
    # keep tabs in the padding so the caret lines up however the terminal expands them
    padding = "".join(c if c == "\t" else " " for c in text[:start])
    gutter = " " * len(str(finding.line))
    carets = _style("^" * (end - start), options, fg=_COLOURS[finding.severity], bold=True)
    excerpt = [f"{gutter} |", f"{finding.line} | {text}", f"{gutter} | {padding}{carets}"]
    if finding.fix is not None:
        safety = "" if finding.fix.safe else " (unsafe)"
        excerpt.append(f"{gutter} = fix{safety}: {finding.fix.title}")
    return excerpt + [""]


def _printable(path: str) -> str:
    """A path on one line: control characters (a newline in a file name) escaped as in Python."""
    if path.isprintable():
        return path
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in path)


def format_finding(finding: Finding, options: ReportOptions) -> str:
    location = _style(f"{_printable(finding.path)}:{finding.line}:{finding.column}:", options, bold=True)
    code = _style(finding.code, options, fg=_COLOURS[finding.severity], bold=True)
    return f"{location} {code} [{finding.name}] {finding.message}"


def summary(results: Sequence[FileResult], files_checked: int) -> str:
    findings = [f for r in results for f in r.findings]
    failed = sum(1 for r in results if r.errors)
    # a file a rule failed on, or that could not be read, has not passed its checks
    failures = f"; {_plural(failed, 'file')} could not be checked fully (see the errors)" if failed else ""
    if not findings:
        if failed:
            return f"No findings in {_plural(files_checked, 'file')} checked{failures}."
        return f"All checks passed ({_plural(files_checked, 'file')})."
    by_severity = [
        _plural(sum(f.severity is severity for f in findings), word)
        for severity, word in ((Severity.ERROR, "error"), (Severity.WARNING, "warning"), (Severity.INFO, "info"))
        if any(f.severity is severity for f in findings)
    ]
    files_with = sum(1 for r in results if r.findings)
    return (f"Found {_plural(len(findings), 'finding')} ({', '.join(by_severity)}) in "
            f"{_plural(files_with, 'file')} ({files_checked} checked){failures}.")


def render(results: Sequence[FileResult], files_checked: int, options: ReportOptions) -> str:
    out: list[str] = []
    for result in results:
        lines = None
        for finding in result.findings:
            out.append(format_finding(finding, options))
            if options.show_source:
                if lines is None:
                    lines = options.source_lines(result.path) or []
                out.extend(_source_excerpt(finding, lines, options))
    out.append(summary(results, files_checked))
    return "\n".join(out) + "\n"
