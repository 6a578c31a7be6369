"""The default format: `path:line:col: TL101 [name] message`, then a summary line."""

from __future__ import annotations

from typing import Sequence

from trainlint.finding import FileResult, Finding, Severity
from trainlint.reporters.catalog import docs_urls
from trainlint.reporters.options import ReportOptions
from trainlint.sanitize import no_commands, one_line

_COLOURS = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "blue"}


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


#: the ANSI colour numbers of click.style's colour names that the report uses
_ANSI = {"red": 31, "yellow": 33, "blue": 34}


def _style(text: str, options: ReportOptions, fg: str | None = None, bold: bool | None = None) -> str:
    """`click.style(text, fg=fg, bold=bold)` when colour is on (without importing click for a text
    run; tests/test_launch.py compares the two)."""
    if not options.color:
        return text
    return (f"\033[{_ANSI[fg]}m" if fg is not None else "") + \
        (f"\033[{1 if bold else 22}m" if bold is not None else "") + text + "\033[0m"


#: A span longer than this many lines shows its first lines, then `...`.
MAX_SOURCE_LINES = 8
#: A source line is printed with at most this many characters (after escaping): a longer one (a
#: minified file, a file that is one line of data) shows the part from shortly before the span,
#: cut with `…`, so a report never carries a whole file's text.
MAX_LINE_WIDTH = 300
#: how much of the line before the span a cut line keeps
_LEAD = 60


def _window(before: str, span: str, after: str) -> tuple[str, str, str]:
    """The printed parts of a line (already escaped): before the span, the span, after it, cut to
    MAX_LINE_WIDTH characters in all with `…` where something is left out."""
    if len(before) + len(span) + len(after) <= MAX_LINE_WIDTH:
        return before, span, after
    if len(before) > _LEAD:
        before = "…" + before[-(_LEAD - 1):]
    room = MAX_LINE_WIDTH - len(before)
    if len(span) > room:
        return before, span[:room - 1], "…"
    room -= len(span)
    return before, span, after if len(after) <= room else after[:room - 1] + "…"


def _source_excerpt(finding: Finding, lines: list[str] | None, options: ReportOptions, url: str | None) -> list[str]:
    """The reported lines with carets under the span, then the fix's title and the rule's link."""
    if not lines or not 1 <= finding.line <= len(lines):
        return []
    last = min(finding.end_line, len(lines), finding.line + MAX_SOURCE_LINES - 1)
    gutter = " " * len(str(last))
    excerpt = [f"{gutter} |"]
    for number in range(finding.line, last + 1):
        text = lines[number - 1]
        start = min(finding.column - 1, len(text)) if number == finding.line else len(text) - len(text.lstrip())
        end = finding.end_column - 1 if number == finding.end_line else len(text)
        end = max(start + 1, min(end, len(text)))
        # the line as printed (control characters escaped, cut to MAX_LINE_WIDTH), and the carets under
        # the span's printed text; tabs stay in the padding so the carets line up however the terminal
        # expands them
        before, span, after = _window(one_line(text[:start]), one_line(text[start:end]), one_line(text[end:]))
        padding = "".join(c if c == "\t" else " " for c in before)
        carets = _style("^" * max(len(span), 1), options, fg=_COLOURS[finding.severity], bold=True)
        excerpt += [f"{number:>{len(gutter)}} | {before}{span}{after}", f"{gutter} | {padding}{carets}"]
    if last < finding.end_line:
        excerpt.append(f"{gutter} | ...")
    if finding.fix is not None:
        safety = "" if finding.fix.safe else " (unsafe)"
        excerpt.append(f"{gutter} = fix{safety}: {one_line(finding.fix.title)}")
    if url:
        excerpt.append(f"{gutter} = docs: {url}")
    return excerpt + [""]


def _link(text: str, url: str | None, options: ReportOptions) -> str:
    """An OSC 8 terminal hyperlink (only with colour: a terminal that understands escapes)."""
    if not options.color or not url:
        return text
    return f"\x1b]8;;{url}\x1b\\{text}\x1b]8;;\x1b\\"


def location(finding: Finding) -> str:
    """`path:line:col`, in a notebook `path:cell N:line:col` (the line counts within the cell, as ruff prints it)."""
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{one_line(finding.path)}:{cell}{finding.line}:{finding.column}"


def format_finding(finding: Finding, options: ReportOptions, url: str | None = None) -> str:
    # the path and the message come from the checked files (a file name, quoted source): escaped
    location_text = _style(f"{location(finding)}:", options, bold=True)
    code = _link(_style(finding.code, options, fg=_COLOURS[finding.severity], bold=True), url, options)
    return f"{location_text} {code} [{finding.name}] {one_line(finding.message)}"


def _evidence_lines(finding: Finding, options: ReportOptions) -> list[str]:
    """`--show-evidence`: one indented line per premise, `path:line: [verdict, kind] premise`."""
    lines = []
    for item in finding.evidence:
        verdict = item.verdict if item.verdict == "proven" else _style(item.verdict, options, bold=True)
        cell = f"cell {item.cell}:" if item.cell is not None else ""
        lines.append(f"    {one_line(item.path)}:{cell}{item.line}: [{verdict}, {item.kind}] {one_line(item.premise)}")
    return lines


def summary(results: Sequence[FileResult], files_checked: int, fixed: int | None = None) -> str:
    line = _summary(results, files_checked)
    if fixed is None:
        return line
    remaining = sum(len(r.findings) for r in results)
    return f"{line} Fixed {_plural(fixed, 'finding')} ({remaining} remaining)."


def _summary(results: Sequence[FileResult], files_checked: int) -> str:
    findings = [f for r in results for f in r.findings]
    failed = sum(1 for r in results if r.errors)
    # a file a rule failed on, or that could not be read, has not passed its checks
    failures = f"; {_plural(failed, 'file')} could not be checked fully (see the errors)" if failed else ""
    if not findings:
        if failed:
            return f"No findings in {_plural(files_checked, 'file')} checked{failures}."
        return f"All checks passed ({_plural(files_checked, 'file')})."
    counts = [
        _plural(sum(f.severity is severity for f in findings), word)
        for severity, word in ((Severity.ERROR, "error"), (Severity.WARNING, "warning"), (Severity.INFO, "info"))
        if any(f.severity is severity for f in findings)
    ]
    safe = sum(1 for f in findings if f.fix is not None and f.fix.safe)
    unsafe = sum(1 for f in findings if f.fix is not None and not f.fix.safe)
    fixable = [text for count, text in ((safe, f"{safe} fixable"), (unsafe, f"{unsafe} with an unsafe fix")) if count]
    details = ", ".join(counts) + ("; " + ", ".join(fixable) if fixable else "")
    files_with = sum(1 for r in results if r.findings)
    return (f"Found {_plural(len(findings), 'finding')} ({details}) in "
            f"{_plural(files_with, 'file')} ({files_checked} checked){failures}.")


def render(results: Sequence[FileResult], files_checked: int, options: ReportOptions) -> str:
    urls = docs_urls()
    out: list[str] = []
    for result in results:
        lines = cells = None
        for finding in result.findings:
            out.append(format_finding(finding, options, urls.get(finding.code)))
            if options.show_source and finding.cell is not None:  # a notebook: the cell's lines
                if cells is None:
                    cells = options.cell_lines(result.path) or {}
                out.extend(_source_excerpt(finding, cells.get(finding.cell), options, urls.get(finding.code)))
            elif options.show_source:
                if lines is None:
                    lines = options.source_lines(result.path) or []
                out.extend(_source_excerpt(finding, lines, options, urls.get(finding.code)))
            if options.show_evidence:
                out.extend(_evidence_lines(finding, options))
    if not options.quiet:
        out.append(summary(results, files_checked, options.fixed))
    # no line may start a CI runner's command (a file named `::error ...` heads its findings' lines)
    return no_commands("".join(line + "\n" for line in out))
