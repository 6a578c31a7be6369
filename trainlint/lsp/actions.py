"""Code actions: a rule's own fix, suppressing a finding with `# noqa: CODE` on its line, and
"Fix all trainlint issues" (the fixes `check --fix` would apply, from `trainlint.fixes`)."""

from __future__ import annotations

from lsprotocol import types

from trainlint.finding import Finding
from trainlint.fixes import line_starts
from trainlint.lsp.diagnostics import to_diagnostic
from trainlint.lsp.positions import Encoder
from trainlint.positions import split_lines, to_lsp
from trainlint.settings import SYNTAX_ERROR_CODE
from trainlint.suppress import NOQA_CODES, Comments, noqa_edit


#: the kind of the "fix all" source action (`source.fixAll` is what editors run on save)
FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.trainlint"
FIX_ALL_TITLE = "Fix all trainlint issues"


class ActionBuilder:
    """Builds the code actions of one document version."""

    def __init__(self, uri: str, version: int | None, text_lines: list[str], encoder: Encoder,
                 comments: Comments, document_changes: bool) -> None:
        self.uri = uri
        self.version = version
        self.lines = text_lines
        self.encoder = encoder
        self.comments = comments
        self.document_changes = document_changes

    def actions(self, findings: list[Finding]) -> list[types.CodeAction]:
        result = []
        for finding in findings:
            diagnostic = to_diagnostic(finding, self.encoder, self.uri)
            if finding.fix is not None:
                result.append(self._fix_action(finding, diagnostic))
            noqa = self._noqa_action(finding, diagnostic)
            if noqa is not None:
                result.append(noqa)
        return result

    def _workspace_edit(self, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
        if self.document_changes:
            document = types.OptionalVersionedTextDocumentIdentifier(uri=self.uri, version=self.version)
            change = types.TextDocumentEdit(text_document=document, edits=edits)
            return types.WorkspaceEdit(document_changes=[change])
        return types.WorkspaceEdit(changes={self.uri: edits})

    def _fix_action(self, finding: Finding, diagnostic: types.Diagnostic) -> types.CodeAction:
        edits = []
        for edit in finding.fix.edits:
            line, character = to_lsp(edit.line, edit.column)
            end_line, end_character = to_lsp(edit.end_line, edit.end_column)
            where = self.encoder.range_to_client(line, character, end_line, end_character)
            edits.append(types.TextEdit(range=where, new_text=edit.content))
        return types.CodeAction(
            title=f"{finding.fix.title} ({finding.code})",
            kind=types.CodeActionKind.QuickFix,
            diagnostics=[diagnostic],
            # an unsafe fix may change behaviour: never the one an editor applies without asking
            is_preferred=finding.fix.safe,
            edit=self._workspace_edit(edits),
        )

    def _noqa_action(self, finding: Finding, diagnostic: types.Diagnostic) -> types.CodeAction | None:
        line = finding.line - 1
        if finding.code == SYNTAX_ERROR_CODE or finding.code in NOQA_CODES or line >= len(self.lines) \
                or finding.line not in self.comments.commentable:
            return None  # TL000 cannot be suppressed per line; a string or `\` owns this line's end
        change = noqa_edit(self.lines[line], self.comments.directives.get(finding.line), [finding.code])
        if change is None:
            return None
        start, end, new_text = change
        edit = types.TextEdit(range=self.encoder.range_to_client(line, start, line, end), new_text=new_text)
        return types.CodeAction(
            title=f"Suppress {finding.code} on this line with # noqa: {finding.code}",
            kind=types.CodeActionKind.QuickFix,
            diagnostics=[diagnostic],
            edit=self._workspace_edit([edit]),
        )

    def fix_all_action(self, fixed: str) -> types.CodeAction | None:
        """One edit turning the document into `fixed`, spanning only the lines that differ."""
        old, new = self.lines, split_lines(fixed)
        if old == new:
            return None
        first = 0
        while first < min(len(old), len(new)) and old[first] == new[first]:
            first += 1
        last = 0  # lines equal at the end
        while last < min(len(old), len(new)) - first and old[-1 - last] == new[-1 - last]:
            last += 1
        starts = line_starts(fixed)
        if last:  # whole lines: from the start of `first` to the start of the first equal line at the end
            end_line, end_character = len(old) - last, 0
            new_text = fixed[starts[first]:starts[len(new) - last]]
        else:
            end_line, end_character = len(old) - 1, len(old[-1])
            new_text = fixed[starts[first]:]
        where = self.encoder.range_to_client(first, 0, end_line, end_character)
        return types.CodeAction(
            title=FIX_ALL_TITLE,
            kind=FIX_ALL_KIND,
            edit=self._workspace_edit([types.TextEdit(range=where, new_text=new_text)]),
        )
