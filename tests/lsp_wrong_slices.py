"""`trainlint lsp` with a document linter whose sliced checks are wrong on purpose (they keep the
last version's findings): the test of the server's whole-file confirmation drives it."""

from trainlint import document
from trainlint.lsp.server import serve


def _stale(self, source, path, pieces, plan, settings, project):
    return document.FileResult(path, list(self._last.findings)), self._last.facts


document.DocumentLinter._lint_slice = _stale

if __name__ == "__main__":
    serve()
