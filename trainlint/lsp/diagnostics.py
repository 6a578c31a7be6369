"""Findings as LSP diagnostics, and the hover text explaining them."""

from __future__ import annotations

from lsprotocol import types

from trainlint.finding import Finding, Severity
from trainlint.lsp.positions import Encoder
from trainlint.positions import to_lsp
from trainlint.rules import registry
from trainlint.settings import SYNTAX_ERROR_CODE

SOURCE = "trainlint"

_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}


def finding_range(finding: Finding, encoder: Encoder) -> types.Range:
    line, character = to_lsp(finding.line, finding.column)
    end_line, end_character = to_lsp(finding.end_line, finding.end_column)
    return encoder.range_to_client(line, character, end_line, end_character)


def related_information(finding: Finding, encoder: Encoder, uri: str,
                        cell_uris: dict[int, str] | None = None) -> list[types.DiagnosticRelatedInformation]:
    """The finding's premises located away from its own line, each at the whole line that proves it
    (evidence is always in the finding's own document; in a notebook, a premise may lie in another
    cell: it is located in that cell's document, `cell_uris`)."""
    related = []
    for item in finding.evidence:
        if item.line == finding.line and item.cell == finding.cell:
            continue
        line = item.line - 1
        if item.cell is not None and item.cell != finding.cell and cell_uris and item.cell in cell_uris:
            # another cell's document: its whole line, from its start to the next line's
            where = types.Location(uri=cell_uris[item.cell], range=types.Range(
                start=types.Position(line=line, character=0), end=types.Position(line=line + 1, character=0)))
        else:
            end = len(encoder.lines[line]) if 0 <= line < len(encoder.lines) else 0
            where = types.Location(uri=uri, range=encoder.range_to_client(line, 0, line, end))
        related.append(types.DiagnosticRelatedInformation(
            location=where, message=f"{item.premise} ({item.verdict}: {item.kind})"))
    return related


def to_diagnostic(finding: Finding, encoder: Encoder, uri: str | None = None,
                  cell_uris: dict[int, str] | None = None) -> types.Diagnostic:
    rule = registry().get(finding.code)
    return types.Diagnostic(
        range=finding_range(finding, encoder),
        message=finding.message,
        severity=_SEVERITY[finding.severity],
        code=finding.code,
        code_description=types.CodeDescription(href=rule.docs_url()) if rule else None,
        source=SOURCE,
        related_information=(related_information(finding, encoder, uri, cell_uris) or None) if uri is not None else None,
    )


def hover_markdown(findings: list[Finding]) -> str:
    """Each finding's message, then its rule's full documentation (once per rule)."""
    blocks = []
    documented = set()
    for finding in findings:
        block = [f"**{finding.code}** {finding.name}: {finding.message}"]
        rule = registry().get(finding.code)
        if rule is not None and finding.code not in documented:
            documented.add(finding.code)
            block.append(rule.documentation().rstrip())
        elif finding.code == SYNTAX_ERROR_CODE:
            block.append("The file does not parse, so no other rule could check it. "
                         "Fix the syntax error to see the other findings.")
        blocks.append("\n\n".join(block))
    return "\n\n---\n\n".join(blocks)
