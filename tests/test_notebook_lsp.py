"""`trainlint lsp` serving a notebook document to a real client (pytest-lsp): the code cells are
checked as one module and each cell document gets the diagnostics of its own lines."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

pytest.importorskip("pygls")
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features  # noqa: E402

SERVER = [sys.executable, "-m", "trainlint", "lsp"]
TIMEOUT = 15

SETUP = "%matplotlib inline\nimport torch\n"
# the load sits in the third cell (the second is markdown): its diagnostics go to that cell
LOAD = "!ls checkpoints\nstate = torch.load('last.pt', map_location='cpu', weights_only=False)\n"
LOAD_FIXED = LOAD.replace("weights_only=False", "weights_only=True")


def _record(ls, params: types.PublishDiagnosticsParams) -> None:
    ls.published.append(params)


def _client() -> LanguageClient:
    client = LanguageClient()
    client.published = []
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = _record
    register_lsp_features(client, features)
    return client


async def _start(pull: bool = False) -> tuple[LanguageClient, types.InitializeResult]:
    client = await ClientServerConfig(server_command=SERVER, client_factory=_client).start()
    capabilities = types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            diagnostic=types.DiagnosticClientCapabilities() if pull else None),
        notebook_document=types.NotebookDocumentClientCapabilities(
            synchronization=types.NotebookDocumentSyncClientCapabilities()),
    )
    result = await asyncio.wait_for(client.initialize_session(types.InitializeParams(
        capabilities=capabilities, initialization_options={"debounceMs": 0})), TIMEOUT)
    return client, result


async def _published(client: LanguageClient, uri: str, version: int) -> types.PublishDiagnosticsParams:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        for params in reversed(client.published):
            if params.uri == uri and params.version is not None and params.version >= version:
                return params
        await asyncio.sleep(0.01)
    raise AssertionError(f"no diagnostics for {uri} version {version}: {client.published}")


def _cell(uri: str, text: str, kind=types.NotebookCellKind.Code) -> tuple[types.NotebookCell, types.TextDocumentItem]:
    language = "python" if kind == types.NotebookCellKind.Code else "markdown"
    return (types.NotebookCell(kind=kind, document=uri),
            types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text))


def _open(client: LanguageClient, notebook_uri: str, cells) -> None:
    client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(uri=notebook_uri, notebook_type="jupyter-notebook", version=1,
                                                 cells=[cell for cell, _ in cells]),
        cell_text_documents=[document for cell, document in cells if cell.kind == types.NotebookCellKind.Code]))


def _edit_cell(client: LanguageClient, notebook_uri: str, cell_uri: str, text: str, version: int) -> None:
    client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(uri=notebook_uri, version=version),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(text_content=[
            types.NotebookDocumentCellContentChanges(
                document=types.VersionedTextDocumentIdentifier(uri=cell_uri, version=version),
                changes=[types.TextDocumentContentChangeWholeDocument(text=text)])]))))


@pytest.fixture(autouse=True)
def only_tl401(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\nselect = ["TL401"]\n')


@pytest.mark.asyncio
async def test_notebook_cells_get_their_own_diagnostics_and_an_edit_updates_them(tmp_path):
    client, result = await _start()
    notebook = (tmp_path / "train.ipynb").as_uri()  # never written: the server checks the cells it was sent
    first, note, third = (f"vscode-notebook-cell:{tmp_path}/train.ipynb#W{i}" for i in range(3))
    try:
        sync = result.capabilities.notebook_document_sync
        assert sync is not None and sync.notebook_selector[0].notebook == "jupyter-notebook"
        _open(client, notebook, [_cell(first, SETUP), _cell(note, "# Loading", types.NotebookCellKind.Markup),
                                 _cell(third, LOAD)])
        params = await _published(client, third, 1)
        [diagnostic] = params.diagnostics
        assert diagnostic.code == "TL401"
        # line 2 of the cell (0-based 1), from `torch.load` (0-based character 8)
        assert (diagnostic.range.start.line, diagnostic.range.start.character) == (1, 8)
        assert list((await _published(client, first, 1)).diagnostics) == []

        # hover on the cell reads the notebook's check
        hover = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=third), position=types.Position(line=1, character=12))),
            TIMEOUT)
        assert hover is not None and "TL401" in hover.contents.value

        # quick fixes on the cell edit the cell: the rule's fix and `# noqa`
        actions = await asyncio.wait_for(client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=third), range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic]))), TIMEOUT)
        edits = {action.title: action.edit.changes[third] for action in actions}
        [fix] = [edits for title, edits in edits.items() if "weights_only=True" in title]
        [edit] = fix
        line = LOAD.split("\n")[edit.range.start.line]
        assert edit.range.start.line == edit.range.end.line == 1
        fixed_line = line[:edit.range.start.character] + edit.new_text + line[edit.range.end.character:]
        assert fixed_line == LOAD_FIXED.split("\n")[1]
        [noqa] = [edits for title, edits in edits.items() if "noqa" in title]
        assert noqa[0].new_text == "  # noqa: TL401" and noqa[0].range.start.line == 1
        assert not any("Fix all" in title for title in edits)  # files only

        _edit_cell(client, notebook, third, LOAD_FIXED, 2)
        params = await _published(client, third, 2)
        assert list(params.diagnostics) == []

        # an edit of another cell: its diagnostics move there, in its own lines
        _edit_cell(client, notebook, first, SETUP + "state = torch.load('a.pt', weights_only=False)\n", 3)
        params = await _published(client, first, 3)
        assert [(d.code, d.range.start.line) for d in params.diagnostics] == [("TL401", 2)]
    finally:
        await asyncio.wait_for(client.shutdown_session(), TIMEOUT)
        await client.stop()


@pytest.mark.asyncio
async def test_pull_diagnostics_for_a_cell(tmp_path):
    client, _ = await _start(pull=True)
    notebook = (tmp_path / "pull.ipynb").as_uri()
    first, second = (f"vscode-notebook-cell:{tmp_path}/pull.ipynb#W{i}" for i in range(2))
    try:
        _open(client, notebook, [_cell(first, SETUP), _cell(second, LOAD)])
        report = await asyncio.wait_for(client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=second))), TIMEOUT)
        assert [(d.code, d.range.start.line) for d in report.items] == [("TL401", 1)]
        report = await asyncio.wait_for(client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=first))), TIMEOUT)
        assert list(report.items) == []
        # nothing is pushed to a pull client
        assert not client.published
    finally:
        await asyncio.wait_for(client.shutdown_session(), TIMEOUT)
        await client.stop()


@pytest.mark.asyncio
async def test_saving_a_helper_checks_the_open_notebook_again(tmp_path):
    """The notebook's loop calls an evaluation helper of the project: once the helper is saved
    without its `model.train()`, the notebook's cell gets TL303 at the call."""
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\nselect = ["TL303"]\n')
    helper = tmp_path / "helpers.py"
    good = "def evaluate(model, loader):\n    model.eval()\n    for x in loader:\n        model(x)\n    model.train()\n"
    helper.write_text(good)
    loop = ("from helpers import evaluate\nfor epoch in range(3):\n    for x, y in loader:\n"
            "        loss = model(x).sum()\n        loss.backward()\n        opt.step()\n        opt.zero_grad()\n"
            "    evaluate(model, val_loader)\n")
    client, _ = await _start()
    notebook = (tmp_path / "nb.ipynb").as_uri()
    cell = f"vscode-notebook-cell:{tmp_path}/nb.ipynb#W0"
    try:
        _open(client, notebook, [_cell(cell, loop)])
        assert list((await _published(client, cell, 1)).diagnostics) == []
        client.published.clear()
        helper.write_text(good.replace("    model.train()\n", ""))
        client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=helper.as_uri())))
        params = await _published(client, cell, 1)
        assert [(d.code, d.range.start.line) for d in params.diagnostics] == [("TL303", 7)]
    finally:
        await asyncio.wait_for(client.shutdown_session(), TIMEOUT)
        await client.stop()


SETUP_TL101 = ("import torch\nmodel = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
               "sched = torch.optim.lr_scheduler.StepLR(opt, 10)\naccum = 4\n"
               "loader = torch.utils.data.DataLoader(list(range(8)), batch_size=2)\n")
LOOP_TL101 = ("for i, (x, y) in enumerate(loader):\n    loss = torch.nn.functional.mse_loss(model(x), y) / accum\n"
              "    loss.backward()\n    sched.step()\n    if (i + 1) % accum == 0:\n        opt.step()\n"
              "        opt.zero_grad()\n")


@pytest.mark.asyncio
async def test_a_premise_in_another_cell_is_related_information_on_that_cell(tmp_path):
    """The optimizer and the scheduler are built in the first cell, stepped in the second: the
    finding on the second cell points at the first cell's lines that prove them."""
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\nselect = ["TL101"]\n')
    client, _ = await _start()
    notebook = (tmp_path / "train.ipynb").as_uri()
    setup, loop = (f"vscode-notebook-cell:{tmp_path}/train.ipynb#W{i}" for i in range(2))
    try:
        _open(client, notebook, [_cell(setup, SETUP_TL101), _cell(loop, LOOP_TL101)])
        [diagnostic] = (await _published(client, loop, 1)).diagnostics
        assert diagnostic.code == "TL101" and diagnostic.range.start.line == 3
        related = {(r.location.uri, r.location.range.start.line): r.message for r in diagnostic.related_information}
        # `opt = torch.optim.SGD(...)` is line 3 of the first cell (0-based 2), `sched = ...` line 4
        assert "optimizer" in related[(setup, 2)] and "scheduler" in related[(setup, 3)]
        assert any(uri == loop for uri, _ in related)  # the loop's own premises stay on its cell
    finally:
        await asyncio.wait_for(client.shutdown_session(), TIMEOUT)
        await client.stop()
