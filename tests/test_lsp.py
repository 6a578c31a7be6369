"""`trainlint lsp` driven by a real client over stdio (pytest-lsp's client, and a raw JSON-RPC one).

Snippets use TL401 (`torch.load(..., weights_only=False)`) because it has a fix.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pygls")
from lsprotocol import types  # noqa: E402
from pygls.exceptions import JsonRpcException  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features  # noqa: E402

from trainlint.engine import lint_source  # noqa: E402
from trainlint.lsp.positions import Encoder  # noqa: E402
from trainlint.positions import split_lines  # noqa: E402
from trainlint.lsp.server import document_path  # noqa: E402
from trainlint.rules import registry
from trainlint.settings import Settings, resolve_selection  # noqa: E402
from trainlint.suppress import scan  # noqa: E402

SERVER = [sys.executable, "-m", "trainlint", "lsp"]
TIMEOUT = 15

# the selection the tests' pyproject.toml makes (see `only_tl401`), for checking edited text here
TL401_ONLY = Settings(select=resolve_selection(["TL401"], [], []))

BUGGY = '''import torch


def restore(model, path):
    state = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(state)
'''
FIXED = BUGGY.replace("weights_only=False", "weights_only=True")
# 0-based: line 4, from `torch.load` (character 12) to just after its closing parenthesis
BUGGY_RANGE = types.Range(start=types.Position(line=4, character=12), end=types.Position(line=4, character=68))


@pytest.fixture(autouse=True)
def only_tl401(tmp_path):
    """Documents live under tmp_path, whose configuration selects TL401 alone: the expected
    diagnostics stay exact while other rules are added."""
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\nselect = ["TL401"]\n')


# -- a client that keeps every publishDiagnostics, not only the last ------------------------------
def _record_diagnostics(ls, params: types.PublishDiagnosticsParams) -> None:
    # pygls passes the client itself only to a handler whose first parameter is named `ls`
    ls.diagnostics[params.uri] = params.diagnostics
    ls.published.append(params)


def _make_client() -> LanguageClient:
    client = LanguageClient()
    client.published = []
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = _record_diagnostics
    register_lsp_features(client, features)
    return client


async def start(encodings=None, pull=False, debounce_ms=None, document_changes=True, confirm_ms=None,
                server=SERVER, refresh=False) -> LanguageClient:
    client = await ClientServerConfig(server_command=server, client_factory=_make_client).start()
    capabilities = types.ClientCapabilities(
        general=types.GeneralClientCapabilities(position_encodings=encodings) if encodings else None,
        text_document=types.TextDocumentClientCapabilities(
            diagnostic=types.DiagnosticClientCapabilities() if pull else None,
        ),
        workspace=types.WorkspaceClientCapabilities(
            workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=document_changes),
            diagnostics=types.DiagnosticWorkspaceClientCapabilities(refresh_support=True) if refresh else None,
        ),
    )
    options = {key: value for key, value in (("debounceMs", debounce_ms), ("confirmMs", confirm_ms))
               if value is not None} or None
    await asyncio.wait_for(client.initialize_session(
        types.InitializeParams(capabilities=capabilities, initialization_options=options)), TIMEOUT)
    return client


async def stop(client: LanguageClient) -> int:
    await asyncio.wait_for(client.shutdown_session(), TIMEOUT)
    returncode = client._server.returncode
    await client.stop()
    return returncode


async def published(client: LanguageClient, uri: str, version: int) -> types.PublishDiagnosticsParams:
    """The first diagnostics published for `uri` at `version` or later."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        for params in client.published:
            if params.uri == uri and params.version is not None and params.version >= version:
                return params
        await asyncio.sleep(0.01)
    raise AssertionError(f"no diagnostics published for {uri} version {version}: {client.published}")


def open_document(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)))


def change_document(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))


# -- applying edits the way an editor does: positions counted in the negotiated encoding ---------
def _offset(text: str, position: types.Position, encoding: str) -> int:
    lines = text.split("\n")
    start = sum(len(line) + 1 for line in lines[:position.line])
    line = lines[position.line] if position.line < len(lines) else ""
    if encoding == "utf-16":
        prefix = line.encode("utf-16-le")[:2 * position.character].decode("utf-16-le")
    elif encoding == "utf-8":
        prefix = line.encode("utf-8")[:position.character].decode("utf-8")
    else:
        prefix = line[:position.character]
    return start + len(prefix)


def apply_workspace_edit(text: str, uri: str, edit: types.WorkspaceEdit, encoding: str = "utf-16") -> str:
    if edit.document_changes:
        edits = [e for change in edit.document_changes if change.text_document.uri == uri for e in change.edits]
    else:
        edits = list(edit.changes[uri])
    spans = sorted(((_offset(text, e.range.start, encoding), _offset(text, e.range.end, encoding), e.new_text)
                    for e in edits), reverse=True)
    for start, end, new_text in spans:
        text = text[:start] + new_text + text[end:]
    return text


async def code_actions(client, uri, range_: types.Range, diagnostics=()) -> list[types.CodeAction]:
    return await asyncio.wait_for(client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=range_,
        context=types.CodeActionContext(diagnostics=list(diagnostics)))), TIMEOUT)


# -- the tests --------------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_initialize_advertises_features_and_negotiates_encoding():
    client = await ClientServerConfig(server_command=SERVER, client_factory=_make_client).start()
    result = await asyncio.wait_for(client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(general=types.GeneralClientCapabilities(
            position_encodings=["utf-32", "utf-16"])))), TIMEOUT)
    try:
        caps = result.capabilities
        assert result.server_info.name == "trainlint"
        assert caps.position_encoding == "utf-32"  # the client's first choice: no conversion at all
        assert caps.hover_provider
        assert list(caps.code_action_provider.code_action_kinds) == [types.CodeActionKind.QuickFix,
                                                                     "source.fixAll.trainlint"]
        assert caps.diagnostic_provider.identifier == "trainlint"
        assert caps.text_document_sync.change == types.TextDocumentSyncKind.Full
        assert caps.text_document_sync.save is not None
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
async def test_open_buggy_buffer_then_fix_it(tmp_path):
    client = await start()
    uri = (tmp_path / "train.py").as_uri()  # never written: the server checks the buffer
    try:
        open_document(client, uri, BUGGY)
        params = await published(client, uri, 1)
        assert params.version == 1
        [diagnostic] = params.diagnostics
        assert diagnostic.range == BUGGY_RANGE
        assert diagnostic.code == "TL401"
        assert diagnostic.source == "trainlint"
        assert diagnostic.severity == types.DiagnosticSeverity.Error
        assert diagnostic.code_description.href == registry()["TL401"].docs_url()
        assert "weights_only=False" in diagnostic.message

        change_document(client, uri, FIXED, 2)
        params = await published(client, uri, 2)
        assert params.version == 2 and list(params.diagnostics) == []

        # saving re-checks (here: unchanged, still clean); closing clears
        client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        client.text_document_did_close(types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        await asyncio.sleep(0.3)
        assert list(client.diagnostics[uri]) == []
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
async def test_hover_shows_the_rule_documentation(tmp_path):
    client = await start()
    uri = (tmp_path / "train.py").as_uri()
    try:
        open_document(client, uri, BUGGY)
        await published(client, uri, 1)
        hover = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=4, character=30))),
            TIMEOUT)
        assert hover.contents.kind == types.MarkupKind.Markdown
        assert registry()["TL401"].documentation().strip() in hover.contents.value
        assert hover.contents.value.startswith("**TL401** unsafe-torch-load:")
        assert hover.range == BUGGY_RANGE
        # off the finding: nothing to say
        nothing = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=3))),
            TIMEOUT)
        assert nothing is None
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("document_changes", [True, False])
async def test_code_actions_fix_and_noqa_give_clean_code(tmp_path, document_changes):
    client = await start(document_changes=document_changes)
    uri = (tmp_path / "train.py").as_uri()
    try:
        open_document(client, uri, BUGGY)
        params = await published(client, uri, 1)
        cursor = types.Range(start=types.Position(line=4, character=20), end=types.Position(line=4, character=20))
        actions = await code_actions(client, uri, cursor, params.diagnostics)
        titles = [a.title for a in actions]
        assert titles == ["Load with weights_only=True (TL401)",
                          "Suppress TL401 on this line with # noqa: TL401"]
        fix, noqa = actions
        assert fix.kind == noqa.kind == types.CodeActionKind.QuickFix
        assert fix.diagnostics[0].range == BUGGY_RANGE
        assert (fix.edit.document_changes is not None) == document_changes

        fixed = apply_workspace_edit(BUGGY, uri, fix.edit)
        assert fixed == FIXED
        assert lint_source(fixed, "train.py", TL401_ONLY).findings == []

        suppressed = apply_workspace_edit(BUGGY, uri, noqa.edit)
        assert suppressed.splitlines()[4].endswith('weights_only=False)  # noqa: TL401')
        assert lint_source(suppressed, "train.py", TL401_ONLY).findings == []

        # the server agrees once the editor sends the edited buffer
        change_document(client, uri, suppressed, 2)
        assert list((await published(client, uri, 2)).diagnostics) == []
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
async def test_noqa_extends_an_existing_comment_and_skips_continued_lines(tmp_path):
    client = await start()
    uri = (tmp_path / "train.py").as_uri()
    text = ("import torch\n"
            "a = torch.load('a.pt', weights_only=False)  # noqa: E501\n"
            "b = torch.load('b.pt', \\\n"
            "               weights_only=False)\n")
    try:
        open_document(client, uri, text)
        params = await published(client, uri, 1)
        assert [d.range.start.line for d in params.diagnostics] == [1, 2]

        on_a = await code_actions(client, uri, params.diagnostics[0].range)
        noqa = [a for a in on_a if "noqa" in a.title]
        edited = apply_workspace_edit(text, uri, noqa[0].edit)
        assert edited.splitlines()[1].endswith("# noqa: E501, TL401")
        assert [f.line for f in lint_source(edited, "train.py", TL401_ONLY).findings] == [3]

        # line 3 ends in a backslash: no comment can go there, so only the fix is offered
        on_b = await code_actions(client, uri, params.diagnostics[1].range)
        assert [a.title for a in on_b] == ["Load with weights_only=True (TL401)"]
        fixed_b = apply_workspace_edit(text, uri, on_b[0].edit)
        assert [f.line for f in lint_source(fixed_b, "train.py", TL401_ONLY).findings] == [2]
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("encoding", ["utf-16", "utf-8", "utf-32"])
async def test_non_ascii_line_positions_follow_the_negotiated_encoding(tmp_path, encoding):
    # an astral-plane emoji and an accented letter before the call: 2 UTF-16 units / 4 and 2 UTF-8 bytes
    text = 'import torch\nnote = "é😀"; state = torch.load("ckpt.pt", weights_only=False)\n'
    line = text.splitlines()[1]
    start_cp = line.index("torch.load")
    end_cp = len(line)
    expected = {
        "utf-32": (start_cp, end_cp),
        "utf-16": (start_cp + 1, end_cp + 1),
        "utf-8": (start_cp + 1 + 3, end_cp + 1 + 3),
    }[encoding]
    client = await start(encodings=[encoding])
    uri = (tmp_path / "train.py").as_uri()
    try:
        open_document(client, uri, text)
        [diagnostic] = (await published(client, uri, 1)).diagnostics
        assert (diagnostic.range.start.character, diagnostic.range.end.character) == expected

        hover = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=diagnostic.range.start)), TIMEOUT)
        assert hover is not None and hover.range == diagnostic.range

        actions = await code_actions(client, uri, diagnostic.range, [diagnostic])
        for action in actions:
            edited = apply_workspace_edit(text, uri, action.edit, encoding)
            assert lint_source(edited, "train.py", TL401_ONLY).findings == [], action.title
        assert apply_workspace_edit(text, uri, actions[0].edit, encoding) == text.replace("False", "True")
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
async def test_syntax_error_buffer_gives_tl000_and_the_server_keeps_going(tmp_path):
    client = await start()
    uri = (tmp_path / "train.py").as_uri()
    try:
        broken = "import torch\n\ndef train(model:\n    pass\n"
        open_document(client, uri, broken)
        [diagnostic] = (await published(client, uri, 1)).diagnostics
        assert diagnostic.code == "TL000"
        assert diagnostic.severity == types.DiagnosticSeverity.Error
        [finding] = lint_source(broken, "train.py", TL401_ONLY).findings  # the same place the CLI reports
        assert (diagnostic.range.start.line, diagnostic.range.start.character) == (finding.line - 1,
                                                                                  finding.column - 1)
        # no per-line suppression for a file that does not parse
        actions = await code_actions(client, uri, diagnostic.range, [diagnostic])
        assert list(actions) == []
        change_document(client, uri, BUGGY, 2)
        assert [d.code for d in (await published(client, uri, 2)).diagnostics] == ["TL401"]
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
async def test_quick_edits_are_debounced_and_only_the_latest_version_is_published(tmp_path):
    client = await start(debounce_ms=200)
    uri = (tmp_path / "train.py").as_uri()
    try:
        open_document(client, uri, BUGGY)
        await published(client, uri, 1)
        # a burst of edits, alternating buggy and clean, faster than the debounce
        for version in range(2, 12):
            change_document(client, uri, BUGGY if version % 2 else FIXED, version)
        final = await published(client, uri, 11)
        assert final.version == 11 and [d.code for d in final.diagnostics] == ["TL401"]
        await asyncio.sleep(0.5)
        after_open = [p.version for p in client.published if p.uri == uri][1:]
        assert after_open == [11]
    finally:
        assert await stop(client) == 0


def test_the_default_debounce_adapts_to_the_last_check():
    """No debounce after a check under FAST_LINT_SECONDS (a small edit shows at once), the time the
    last check took beyond it after a slower one (at most the 150 ms default; no jump at the
    threshold), the default before any check; a client's own `debounceMs` is kept as it set it."""
    from trainlint.lsp.server import DEFAULT_DEBOUNCE_SECONDS, FAST_LINT_SECONDS, create_server

    server = create_server()
    uri = "file:///project/train.py"
    assert server.debounce_for(uri) == DEFAULT_DEBOUNCE_SECONDS
    server._lint_seconds[uri] = FAST_LINT_SECONDS / 3
    assert server.debounce_for(uri) == 0
    server._lint_seconds[uri] = FAST_LINT_SECONDS * 2
    assert server.debounce_for(uri) == pytest.approx(FAST_LINT_SECONDS)
    server._lint_seconds[uri] = FAST_LINT_SECONDS
    assert server.debounce_for(uri) == 0  # continuous: a check just over the threshold waits next to nothing
    server._lint_seconds[uri] = FAST_LINT_SECONDS + 0.001
    assert server.debounce_for(uri) == pytest.approx(0.001)
    server._lint_seconds[uri] = 5.0
    assert server.debounce_for(uri) == DEFAULT_DEBOUNCE_SECONDS
    server.forget(uri)
    assert server.debounce_for(uri) == DEFAULT_DEBOUNCE_SECONDS
    server.adaptive_debounce, server.debounce = False, 0.2  # `debounceMs: 200`
    server._lint_seconds[uri] = FAST_LINT_SECONDS / 3
    assert server.debounce_for(uri) == 0.2


@pytest.mark.asyncio
async def test_versions_are_never_published_out_of_order(tmp_path):
    # no debounce: every edit is checked, but a result for an older version must not follow a newer one
    client = await start(debounce_ms=0)
    uri = (tmp_path / "train.py").as_uri()
    big = BUGGY + "".join(f"\ndef step_{i}(model, path):\n    return torch.load(path, weights_only=False)\n"
                          for i in range(300))
    try:
        open_document(client, uri, big)
        for version in range(2, 20):
            change_document(client, uri, big if version % 2 else FIXED, version)
        final = await published(client, uri, 19)
        await asyncio.sleep(0.5)
        versions = [p.version for p in client.published if p.uri == uri]
        assert versions == sorted(versions) and versions[-1] == 19
        assert len(final.diagnostics) == 301
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
async def test_pull_diagnostics_and_no_push_to_a_pull_client(tmp_path):
    client = await start(pull=True)
    uri = (tmp_path / "train.py").as_uri()
    try:
        open_document(client, uri, BUGGY)
        report = await asyncio.wait_for(client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=uri))), TIMEOUT)
        assert report.kind == "full"
        [diagnostic] = report.items
        assert diagnostic.range == BUGGY_RANGE and diagnostic.code == "TL401"
        change_document(client, uri, FIXED, 2)
        report = await asyncio.wait_for(client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=uri))), TIMEOUT)
        assert list(report.items) == []
        await asyncio.sleep(0.3)
        assert client.published == []  # pushing too would show each finding twice

        # a document that is neither open nor on disk: an error answer, and the server goes on
        missing = (tmp_path / "missing.py").as_uri()
        with pytest.raises(JsonRpcException) as error:
            await asyncio.wait_for(client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
                text_document=types.TextDocumentIdentifier(uri=missing))), TIMEOUT)
        assert error.value.code == -32602 and "missing.py" in error.value.message
        # an unopened file on disk is read from disk
        (tmp_path / "on_disk.py").write_text(BUGGY)
        report = await asyncio.wait_for(client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=(tmp_path / "on_disk.py").as_uri()))), TIMEOUT)
        assert [d.code for d in report.items] == ["TL401"]
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
async def test_settings_come_from_the_nearest_pyproject(tmp_path):
    # folder names that a URI must percent-encode: the server decodes them to find the config
    strict = tmp_path / "strict project #1"
    lenient = tmp_path / "lenient 100%"
    for folder, table in ((strict, 'min-torch-version = "2.4"'), (lenient, 'ignore = ["TL401"]')):
        (folder / "src").mkdir(parents=True)
        (folder / "pyproject.toml").write_text(f"[project]\nname = 'x'\n\n[tool.trainlint]\n{table}\n")
    client = await start()
    implicit = 'import torch\n\nstate = torch.load("ckpt.pt")\n'
    try:
        strict_uri = (strict / "src" / "train.py").as_uri()
        assert "%20" in strict_uri and "%23" in strict_uri
        open_document(client, strict_uri, implicit)
        [diagnostic] = (await published(client, strict_uri, 1)).diagnostics
        assert diagnostic.code == "TL401" and "2.4" in diagnostic.message

        lenient_uri = (lenient / "src" / "train.py").as_uri()
        open_document(client, lenient_uri, BUGGY)
        assert list((await published(client, lenient_uri, 1)).diagnostics) == []

        # a broken configuration is shown to the user, and the buffer is still checked (defaults)
        broken = tmp_path / "broken"
        broken.mkdir()
        (broken / "pyproject.toml").write_text("[tool.trainlint]\nselect = ['TL999']\n")
        broken_uri = (broken / "train.py").as_uri()
        open_document(client, broken_uri, BUGGY)
        assert [d.code for d in (await published(client, broken_uri, 1)).diagnostics] == ["TL401"]
        [message] = client.messages
        assert message.type == types.MessageType.Error
        assert str(broken / "pyproject.toml") in message.message and "TL999" in message.message

        # an edited pyproject.toml applies at the next check, without a restart
        time.sleep(0.01)
        (lenient / "pyproject.toml").write_text("[tool.trainlint]\nselect = ['TL401']\n")
        change_document(client, lenient_uri, BUGGY + "\n", 2)
        assert [d.code for d in (await published(client, lenient_uri, 2)).diagnostics] == ["TL401"]
    finally:
        assert await stop(client) == 0


# -- robustness, spoken in raw JSON-RPC so that malformed messages can be sent at all --------------
class RawClient:
    def __init__(self) -> None:
        self.process = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def receive(self) -> dict:
        length = None
        while (header := self.process.stdout.readline()) not in (b"\r\n", b""):
            if header.lower().startswith(b"content-length:"):
                length = int(header.split(b":")[1])
        assert length is not None, "server closed its output"
        return json.loads(self.process.stdout.read(length))

    def response(self, msg_id: int) -> dict:
        while True:
            message = self.receive()
            if message.get("id") == msg_id and "method" not in message:
                return message


def test_malformed_and_unknown_requests_get_errors_and_the_server_keeps_serving(tmp_path):
    client = RawClient()
    uri = (tmp_path / "train.py").as_uri()
    try:
        client.send({"id": 1, "method": "initialize", "params": {"capabilities": {}}})
        assert client.response(1)["result"]["serverInfo"]["name"] == "trainlint"
        client.send({"method": "initialized", "params": {}})

        client.send({"id": 2, "method": "textDocument/hover", "params": {"textDocument": {"uri": uri}}})
        error = client.response(2)["error"]
        assert error["code"] == -32602 and "position" in error["message"]

        client.send({"id": 3, "method": "textDocument/codeAction", "params": "not an object"})
        assert client.response(3)["error"]["code"] == -32602

        client.send({"id": 4, "method": "trainlint/noSuchMethod", "params": {}})
        assert client.response(4)["error"]["code"] == -32601

        client.send({"method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri}}})  # ignored
        client.send({"method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": BUGGY}}})
        client.send({"id": 5, "method": "textDocument/hover", "params": {
            "textDocument": {"uri": uri}, "position": {"line": 4, "character": 20}}})
        assert client.response(5)["result"]["contents"]["value"].startswith("**TL401**")

        client.send({"id": 6, "method": "shutdown"})
        assert client.response(6)["result"] is None
        client.send({"method": "exit"})
        assert client.process.wait(TIMEOUT) == 0
        assert b"Traceback" not in client.process.stderr.read()
    finally:
        if client.process.poll() is None:
            client.process.kill()
            client.process.wait()


# -- the pieces, without a server -------------------------------------------------------------------
def test_encoder_round_trips_columns_in_every_encoding():
    lines = split_lines('x = "a😀é" + y\r\nz\rw\x0cv\n')
    assert lines == ['x = "a😀é" + y', "z", "w\x0cv", ""]  # a form feed is not a line break
    for encoding, units in (("utf-32", [9, 12]), ("utf-16", [10, 13]), ("utf-8", [13, 16])):
        encoder = Encoder(lines, encoding)
        for column, expected in zip((9, 12), units):  # after the `"` closing the string, and `y`
            position = encoder.to_client(0, column)
            assert position.character == expected
            assert encoder.from_client(position) == (0, column)
    # a position inside the emoji's surrogate pair rounds down to the emoji
    assert Encoder(lines, "utf-16").from_client(types.Position(line=0, character=7)) == (0, 6)


def test_document_path_decodes_file_uris(tmp_path):
    folder = tmp_path / "my project #2 (100%)"
    assert document_path((folder / "train.py").as_uri()) == str(folder / "train.py")
    assert document_path("untitled:Untitled-1") is None


def test_commentable_lines_exclude_strings_and_continuations():
    text = 'a = 1\nb = """x\ny"""\nc = (1,\n     2)  # note\nd = 1 + \\\n    2\n'
    assert scan(text).commentable == frozenset({1, 3, 4, 5, 7})


@pytest.mark.asyncio
async def test_server_and_cli_agree_per_file(tmp_path):
    """Each file's own project configuration, in the editor and on the command line alike."""
    project = tmp_path / "proj"
    (project / "tests").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.trainlint]\nselect = ["TL4", "TL001"]\n\n'
                                            '[tool.trainlint.per-file-ignores]\n"tests/*" = ["TL401"]\n')
    texts = {project / "train.py": BUGGY + "x = 1  # noqa: TL402\n", project / "tests" / "test_ckpt.py": BUGGY}
    for path, text in texts.items():
        path.write_text(text)
    cli = subprocess.run([sys.executable, "-m", "trainlint", "check", "--format", "json", "--no-cache",
                          *map(str, texts)], cwd=project / "tests", capture_output=True, text=True, timeout=60)
    from_cli = {(Path(f["path"]).resolve(), f["line"] - 1, f["code"]) for f in json.loads(cli.stdout)["findings"]}
    assert {code for _, _, code in from_cli} == {"TL401", "TL001"}, cli.stdout

    client = await start()
    try:
        from_server = set()
        for path, text in texts.items():
            open_document(client, path.as_uri(), text)
            params = await published(client, path.as_uri(), 1)
            from_server |= {(path, d.range.start.line, d.code) for d in params.diagnostics}
        assert from_server == from_cli
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
async def test_saving_a_helper_rechecks_the_open_documents_that_import_it(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\nselect = ["TL301"]\n')
    helper = tmp_path / "helpers.py"
    helper.write_text("import contextlib\n\n\ndef inference():\n    return contextlib.nullcontext()\n")
    evaluate = (
        "from helpers import inference\n\n\n"
        "@inference()\n"
        "def evaluate(model, loader):\n"
        "    model.eval()\n"
        "    return [model(x).argmax(-1) for x, _ in loader]\n"
    )
    (tmp_path / "evaluate.py").write_text(evaluate)
    uri = (tmp_path / "evaluate.py").as_uri()
    client = await start()
    try:
        open_document(client, uri, evaluate)
        first = await published(client, uri, 1)
        assert [d.code for d in first.diagnostics] == ["TL301"]  # the helper does not disable grad
        before = len([p for p in client.published if p.uri == uri])

        helper.write_text("import torch\n\n\ndef inference():\n    return torch.no_grad()\n")
        client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=helper.as_uri())))
        deadline = time.monotonic() + TIMEOUT
        while len([p for p in client.published if p.uri == uri]) == before and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        latest = [p for p in client.published if p.uri == uri][-1]
        assert list(latest.diagnostics) == []  # re-checked with the saved helper, which now disables grad
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
async def test_saving_a_caller_rechecks_the_open_helpers_it_imports(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\nselect = ["TL402"]\n')
    helper_text = "import torch\n\n\ndef save_on_master(*args, **kwargs):\n    torch.save(*args, **kwargs)\n"
    helper = tmp_path / "dist_utils.py"
    helper.write_text(helper_text)
    caller = tmp_path / "train.py"
    caller.write_text("from dist_utils import save_on_master\n\n\ndef main(model, out):\n"
                      "    save_on_master(model.state_dict(), out + '/embeddings.pt')\n")
    uri = helper.as_uri()
    client = await start()
    try:
        open_document(client, uri, helper_text)
        first = await published(client, uri, 1)
        assert list(first.diagnostics) == []  # its one caller writes data, not a checkpoint
        before = len([p for p in client.published if p.uri == uri])

        caller_text = ("from dist_utils import save_on_master\n\n\ndef main(model, out):\n"
                       "    save_on_master({'model': model.state_dict()}, out + '/checkpoint.pth')\n")
        caller.write_text(caller_text)
        open_document(client, caller.as_uri(), caller_text)
        client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=caller.as_uri())))
        deadline = time.monotonic() + TIMEOUT
        while len([p for p in client.published if p.uri == uri]) == before and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        latest = [p for p in client.published if p.uri == uri][-1]
        assert [d.code for d in latest.diagnostics] == ["TL402"]  # re-checked with what the caller now hands it
    finally:
        assert await stop(client) == 0


# -- fixes: a line-moving quick fix and "Fix all trainlint issues" --------------------------------
SAVES = '''import torch


def save(model, step):
    torch.save(model.state_dict(), "checkpoints/last.pt")  # every 1000 steps
    torch.save({"model": model.state_dict(), "step": step}, f"checkpoints/step_{step}.pt")
'''
SAVES_FIXED = '''import os

import torch


def atomic_save(obj, path):
    # into a temporary file, synced to disk, then renamed: `path` is never half-written
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save(model, step):
    atomic_save(model.state_dict(), "checkpoints/last.pt")  # every 1000 steps
    atomic_save({"model": model.state_dict(), "step": step}, f"checkpoints/step_{step}.pt")
'''


@pytest.mark.asyncio
async def test_quick_fix_that_adds_lines_applies_through_the_client(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\nselect = ["TL402"]\n')
    client = await start()
    uri = (tmp_path / "save.py").as_uri()
    try:
        open_document(client, uri, SAVES)
        params = await published(client, uri, 1)
        assert [d.range.start.line for d in params.diagnostics] == [4, 5]
        cursor = types.Range(start=types.Position(line=4, character=8), end=types.Position(line=4, character=8))
        actions = await code_actions(client, uri, cursor, params.diagnostics[:1])
        quick = [a for a in actions if a.kind == types.CodeActionKind.QuickFix and "TL402" in a.title
                 and not a.title.startswith("Suppress")]
        assert len(quick) == 1 and quick[0].is_preferred  # a safe fix
        once = apply_workspace_edit(SAVES, uri, quick[0].edit)
        assert once.splitlines() == SAVES_FIXED.splitlines()[:-1] + [SAVES.splitlines()[5]]
        change_document(client, uri, once, 2)
        assert len((await published(client, uri, 2)).diagnostics) == 1  # the other save is left
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("document_changes", [True, False])
async def test_fix_all_applies_every_allowed_fix(tmp_path, document_changes):
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\nselect = ["TL401", "TL402"]\n')
    client = await start(document_changes=document_changes)
    uri = (tmp_path / "save.py").as_uri()
    text = SAVES + "\n\ndef load(path):\n    return torch.load(path, weights_only=False)\n"
    try:
        open_document(client, uri, text)
        await published(client, uri, 1)
        anywhere = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0))
        only = types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.SourceFixAll])
        actions = await asyncio.wait_for(client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=anywhere, context=only)), TIMEOUT)
        assert [(a.title, a.kind) for a in actions] == [("Fix all trainlint issues", "source.fixAll.trainlint")]
        fixed = apply_workspace_edit(text, uri, actions[0].edit)
        # the safe fixes only: TL401's weights_only=True may refuse a checkpoint that loaded before
        assert fixed == SAVES_FIXED + "\n\ndef load(path):\n    return torch.load(path, weights_only=False)\n"

        (tmp_path / "pyproject.toml").write_text(
            '[tool.trainlint]\nselect = ["TL401", "TL402"]\nunsafe-fixes = true\n')
        change_document(client, uri, fixed, 2)
        await published(client, uri, 2)
        actions = await asyncio.wait_for(client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=anywhere, context=only)), TIMEOUT)
        again = apply_workspace_edit(fixed, uri, actions[0].edit)
        assert again == fixed.replace("weights_only=False", "weights_only=True")
        change_document(client, uri, again, 3)
        assert list((await published(client, uri, 3)).diagnostics) == []
        actions = await asyncio.wait_for(client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=anywhere, context=only)), TIMEOUT)
        assert not actions  # nothing left to fix
    finally:
        assert await stop(client) == 0


# -- edits checked as slices of the document --------------------------------------------------------
def _functions(count: int, unsafe: int | None = None) -> str:
    """A module of `count` restore functions; the one numbered `unsafe` loads unsafely."""
    parts = ["import torch\n"]
    for n in range(count):
        flag = "False" if n == unsafe else "True"
        parts.append(f"\n\ndef restore_{n}(model, path):\n    state = torch.load(path, weights_only={flag})\n"
                     f"    model.load_state_dict(state)\n")
    return "".join(parts)


def _load_line(n: int) -> int:
    """The 0-based line of `restore_n`'s torch.load in `_functions`."""
    return 1 + 5 * n + 3


@pytest.mark.asyncio
async def test_edits_are_checked_as_slices_with_exact_positions(tmp_path):
    """Each edit moves the finding to another function, and one adds lines above the rest: the
    findings kept from the last version move with their lines."""
    client = await start(debounce_ms=0)
    uri = (tmp_path / "restore.py").as_uri()
    try:
        open_document(client, uri, _functions(12, unsafe=3))
        assert [d.range.start.line for d in (await published(client, uri, 1)).diagnostics] == [_load_line(3)]
        text = _functions(12, unsafe=3).replace("def restore_1(model, path):\n",
                                                "def restore_1(model, path):\n    # two\n    # lines\n", 1)
        change_document(client, uri, text, 2)
        assert [d.range.start.line for d in (await published(client, uri, 2)).diagnostics] == [_load_line(3) + 2]
        text = text.replace("weights_only=True", "weights_only=False", 8)  # restore_0 .. restore_8, not 3
        change_document(client, uri, text, 3)
        lines = [d.range.start.line for d in (await published(client, uri, 3)).diagnostics]
        expected = [_load_line(n) + (2 if n >= 1 else 0) for n in range(9)]
        assert lines == expected
        assert lines == [f.line - 1 for f in lint_source(text, "restore.py", TL401_ONLY).findings]
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
async def test_the_whole_file_check_after_an_edit_corrects_a_wrong_slice(tmp_path):
    """A server whose sliced checks are wrong (they keep the last findings) still settles on the
    whole file's findings once the document is idle for `confirmMs`; it publishes them for the
    same version."""
    client = await start(debounce_ms=0, confirm_ms=200,
                         server=[sys.executable, str(Path(__file__).parent / "lsp_wrong_slices.py")])
    uri = (tmp_path / "restore.py").as_uri()
    try:
        open_document(client, uri, _functions(12))
        assert list((await published(client, uri, 1)).diagnostics) == []
        change_document(client, uri, _functions(12, unsafe=5), 2)
        first = await published(client, uri, 2)
        assert list(first.diagnostics) == []  # the wrong slice's answer
        deadline = time.monotonic() + TIMEOUT
        while sum(p.version == 2 for p in client.published) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        confirmed = [p for p in client.published if p.version == 2][-1]
        assert [d.range.start.line for d in confirmed.diagnostics] == [_load_line(5)]
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
async def test_a_confirmation_that_agrees_publishes_nothing_more(tmp_path):
    client = await start(debounce_ms=0, confirm_ms=50)
    uri = (tmp_path / "restore.py").as_uri()
    try:
        open_document(client, uri, _functions(12))
        await published(client, uri, 1)
        change_document(client, uri, _functions(12, unsafe=5), 2)
        assert [d.range.start.line for d in (await published(client, uri, 2)).diagnostics] == [_load_line(5)]
        await asyncio.sleep(1.0)  # the confirmation ran (50 ms after the edit) and agreed
        assert sum(p.version == 2 for p in client.published) == 1
    finally:
        assert await stop(client) == 0


@pytest.mark.asyncio
async def test_a_pull_client_is_asked_to_pull_again_when_the_whole_file_check_differs(tmp_path):
    client = await start(pull=True, refresh=True, confirm_ms=200,
                         server=[sys.executable, str(Path(__file__).parent / "lsp_wrong_slices.py")])
    uri = (tmp_path / "restore.py").as_uri()

    async def pull():
        return await asyncio.wait_for(client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=uri))), TIMEOUT)

    try:
        open_document(client, uri, _functions(12))
        assert list((await pull()).items) == []
        change_document(client, uri, _functions(12, unsafe=5), 2)
        assert list((await pull()).items) == []  # the wrong slice's answer
        deadline = time.monotonic() + TIMEOUT
        while client.diagnostic_refresh_count == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert client.diagnostic_refresh_count == 1
        assert [d.range.start.line for d in (await pull()).items] == [_load_line(5)]
    finally:
        assert await stop(client) == 0
