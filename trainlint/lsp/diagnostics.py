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


def to_diagnostic(finding: Finding, encoder: Encoder) -> types.Diagnostic:
    rule = registry().get(finding.code)
    return types.Diagnostic(
        range=finding_range(finding, encoder),
        message=finding.message,
        severity=_SEVERITY[finding.severity],
        code=finding.code,
        code_description=types.CodeDescription(href=rule.docs_url()) if rule else None,
        source=SOURCE,
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
