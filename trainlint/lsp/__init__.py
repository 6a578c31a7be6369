"""The language server (`trainlint lsp`): the engine's findings as LSP diagnostics, hovers and code actions.

Needs the `lsp` extra (pygls 2, lsprotocol). Nothing outside this package imports it, so the CLI
and the engine work without pygls installed.
"""
