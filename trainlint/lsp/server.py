"""`trainlint lsp`: a pygls language server over stdio.

Diagnostics come from `trainlint.engine.lint_source` on the editor's unsaved text, with the
settings of the nearest configuration file (as the CLI would find it from the document's folder).

Push or pull: a client that supports pull diagnostics (`textDocument/diagnostic`) asks for them
itself, and pushing as well would show every finding twice (VS Code and Neovim keep pushed and
pulled diagnostics apart), so the server pushes `publishDiagnostics` only to clients without pull
support. Pull requests are answered either way.

Pushing: on open and save at once, on change after a debounce that adapts to how long the
document's last check took: none when it took under 30 ms (the result shows within a frame of a
pause in typing), else the time it took beyond those 30 ms, at most 150 ms (so the wait grows with
the check's cost, without a jump at 30 ms). `debounceMs` in the initialization options sets a
fixed debounce instead. Linting runs in one worker thread; a result
is published only if the document still has the version it was computed for.

An edit is checked as a slice: the definitions it changed, what they can reach, and the module's
own code; the other definitions keep their findings (`trainlint.document`). Once the document has
been left alone for a while (`confirmMs`, default 2000), the whole file is checked again; if its findings differ
from the slice's, they are published (or, to a pull client, announced with a diagnostic refresh)
and a warning is logged.

Notebooks (`notebookDocument/didOpen`, `didChange`, `didClose`, as `ruff server` serves them):
the code cells of a notebook are checked as one module (`trainlint.notebook`, as `check` does a
`.ipynb` file), and each cell document gets the diagnostics of its own lines; hover and quick
fixes on a cell read the same check (a fix whose edits reach another cell is left out, and "fix
all" is for whole files, not cells).

A document is checked as part of its project (the workspace folder that holds it, else the folder
of its nearest configuration file): names it imports from other project files are read from
their saved text. Saving such a helper re-checks the open documents that import it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from cattrs.errors import ClassValidationError
from cattrs.v import transform_error
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from trainlint import __version__
from trainlint.budget import over_budget
from trainlint.engine import Parser, SkippedFile, UnreadableFile, decode_source, lint_source, read_source
from trainlint.config import Resolver
from trainlint.document import DocumentLinter
from trainlint.finding import Finding
from trainlint.fixes import fix_source
from trainlint.lsp.actions import FIX_ALL_KIND, ActionBuilder
from trainlint.lsp.diagnostics import SOURCE, hover_markdown, to_diagnostic
from trainlint.lsp.positions import Encoder
from trainlint.positions import split_lines
from trainlint.lsp.project import ProjectSettings
from trainlint.notebook import is_notebook, join_cells
from trainlint.reader.project import Project, find_root
from trainlint.suppress import Comments, scan
from trainlint.settings import DEFAULT_MAX_FILE_SIZE, Settings

logger = logging.getLogger(__name__)

#: the notebooks served: Jupyter notebooks' Python cells (markdown cells are not synced)
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(notebook_selector=[types.NotebookDocumentFilterWithCells(
    notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")])])

DEFAULT_DEBOUNCE_SECONDS = 0.150  # the adaptive debounce's ceiling (`TrainlintServer.debounce_for`)
#: A check of a document that took less than this publishes on the next change without a debounce
#: (a debounce saves checks of versions about to be replaced, which cost nothing here); a slower
#: one waits for the time it took beyond this.
FAST_LINT_SECONDS = 0.030
DEFAULT_CONFIRM_SECONDS = 2.0  # idle time before the whole file is checked after a sliced check


@dataclass
class Linted:
    """The findings of one version of one document."""

    version: int | None
    text: str
    findings: list[Finding]
    lines: list[str]
    sliced: bool = False  # checked as a slice of the document (`trainlint.document`)
    declined: str | None = None  # why it was not checked (too large for max-file-size or its memory budget)
    #: a notebook cell's: the URI of each code cell by its number, where a premise of a finding may lie
    cell_uris: dict[int, str] | None = None
    _comments: Comments | None = field(default=None, repr=False)

    @property
    def comments(self) -> Comments:
        if self._comments is None:  # tokenizing is only needed for code actions
            self._comments = scan(self.text)
        return self._comments


@dataclass(frozen=True)
class _Malformed:
    """A message whose params do not fit its method (`id` is None for a notification)."""

    id: int | str | None
    method: str
    problems: str


class TrainlintProtocol(LanguageServerProtocol):
    """pygls drops a request whose params fail to deserialize, leaving the client waiting for an
    answer forever; this answers it with a JSON-RPC InvalidParams error naming what is wrong, and
    logs a malformed notification in one line."""

    def structure_message(self, data):
        is_call = isinstance(data, dict) and isinstance(data.get("method"), str) and "error" not in data
        if is_call and "jsonrpc" in data:
            message_type = self.get_message_type(data["method"])
            msg_id = data.get("id")
            if message_type is not None and (msg_id is None or isinstance(msg_id, (int, str))):
                try:
                    return self._converter.structure(data, message_type)
                except Exception as exc:
                    return _Malformed(msg_id, data["method"], _problems(exc))
        return super().structure_message(data)

    def handle_message(self, message):
        if isinstance(message, _Malformed):
            text = f"invalid params for {message.method}: {message.problems}"
            if message.id is None:
                logger.warning("ignored notification with %s", text)
            else:
                self._send_response(message.id, error=JsonRpcInvalidParams(message=text).to_response_error())
            return
        super().handle_message(message)


def _problems(exc: Exception) -> str:
    """cattrs' nested validation errors as `what @ where` (e.g. `required field missing @ $.params.position`)."""
    if isinstance(exc, ClassValidationError):
        return "; ".join(transform_error(exc, path="$"))
    return f"{type(exc).__name__}: {exc}"


class TrainlintServer(LanguageServer):
    def __init__(self, debounce: float = DEFAULT_DEBOUNCE_SECONDS) -> None:
        # Full sync: pygls applies incremental edits on `str.splitlines` lines, which disagree
        # with the editor's lines when a form feed or U+2028 is in the file.
        super().__init__("trainlint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full,
                         protocol_cls=TrainlintProtocol, notebook_document_sync=NOTEBOOK_SYNC)
        self.debounce = debounce
        self.adaptive_debounce = True  # False once the client set `debounceMs`
        self._lint_seconds: dict[str, float] = {}  # per document: its last check's CPU seconds
        self.confirm_delay = DEFAULT_CONFIRM_SECONDS
        self.push_diagnostics = True
        self.diagnostic_refresh = False  # the client takes `workspace/diagnostic/refresh`
        self.document_changes = False
        self.project = ProjectSettings(on_error=self._show_config_error)
        self._pending: dict[str, asyncio.Task] = {}
        self._results: dict[str, Linted] = {}
        # Per open document: its last version's trees and findings, so an edit re-checks only what
        # it can reach.
        self._documents: dict[str, DocumentLinter] = {}
        self._confirming: dict[str, asyncio.Task] = {}
        self._projects: dict[str, Project] = {}
        # per open notebook (unquoted URI): the key of the cells last checked, and each code cell's result
        self._notebooks: dict[str, tuple[tuple, dict[str, Linted]]] = {}
        self._declined: dict[str, str | None] = {}  # uri -> the notice last shown for it
        # One worker: lints run one at a time, and a stale one is skipped before it starts.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainlint-lint")

    # -- linting --------------------------------------------------------------------------
    def is_open(self, uri: str) -> bool:
        # pygls keys open documents by the percent-decoded URI
        return unquote(uri) in self.workspace.text_documents

    def _open_version(self, uri: str) -> int | None:
        document = self.workspace.text_documents.get(unquote(uri))
        return document.version if document is not None else None

    def _lint(self, uri: str, version: int | None, text: str, settings: Settings,
              only_if_current: bool, whole: bool = False) -> Linted | None:
        if only_if_current and self._open_version(uri) != version:
            return None  # the document changed while this waited for the worker
        started = time.thread_time()  # this thread's CPU: the check's own cost, however busy the machine
        path = document_path(uri)
        declined = _declined(text, path or uri, settings)
        if declined is not None:  # the limits the command line applies to a file on disk
            logger.warning("%s", declined)
            return Linted(version, text, [], split_lines(text), declined=declined)
        project = self.project_for(path, settings.max_file_size) if path else None
        sliced = False
        if is_notebook(path or uri):
            # a notebook opened as text (its JSON): only what is about the file itself (a TL000)
            # has a place in it; findings in cells are served to the notebook document
            result = lint_source(text, path or uri, settings, project, parser=Parser())
            findings = [f for f in result.findings if f.cell is None]
            return Linted(version, text, findings, split_lines(text))
        if self.is_open(uri):
            linter = self._documents.setdefault(uri, DocumentLinter())
            before = linter.sliced
            result = linter.lint(text, path or uri, settings, project, whole=whole)
            sliced = linter.sliced > before
        else:
            result = lint_source(text, path or uri, settings, project, parser=Parser())
        for error in result.errors:
            logger.error("%s", error)
        if not whole:  # the idle check of the whole file is not what an edit waits for
            self._lint_seconds[uri] = time.thread_time() - started
        return Linted(version, text, result.findings, split_lines(text), sliced)

    def debounce_for(self, uri: str) -> float:
        """Seconds to wait after a change of `uri` before checking it: the client's `debounceMs`
        if it set one; else the time the document's last check took beyond FAST_LINT_SECONDS (none
        under it), at most `debounce` (and `debounce` before any check). A debounce as long as the
        whole check jumped from nothing to 30 ms at 30 ms: a check of 31 ms showed its result after
        61, one of 29 ms after 29; now the wait grows with the cost, continuously."""
        last = self._lint_seconds.get(uri)
        if not self.adaptive_debounce or last is None:
            return self.debounce
        return min(self.debounce, max(0.0, last - FAST_LINT_SECONDS))

    async def lint(self, uri: str, only_if_current: bool = False) -> Linted | None:
        """The findings for the document's current text (cached per version); for a notebook's
        cell, the cell's part of its notebook's check."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            cells = await self.lint_notebook(notebook.uri)
            return cells.get(unquote(uri)) or Linted(None, "", [], [""])  # a markdown cell: nothing
        # on this thread: a configuration error is shown to the user from here
        settings = self.project.settings_for(document_path(uri))
        loop = asyncio.get_running_loop()
        document = self.workspace.text_documents.get(unquote(uri))
        if document is not None:
            version, text = document.version, document.source
        else:  # not open: read from disk off the event loop (a fifo or a slow disk must not stall it)
            version, text = None, await loop.run_in_executor(self._executor, _read_closed, uri, settings)
        cached = self._results.get(uri)
        if cached is not None and cached.version == version and cached.text == text:
            return cached
        linted = await loop.run_in_executor(self._executor, self._lint, uri, version, text, settings,
                                            only_if_current)
        if linted is not None and linted.declined != self._declined.get(uri):  # said once, not per edit
            self._declined[uri] = linted.declined
            if linted.declined is not None:
                self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning,
                                                                 message=f"trainlint: {linted.declined}"))
        if linted is not None and self.is_open(uri):
            self._results[uri] = linted
            if linted.sliced:
                self._confirm_later(uri, linted)
        return linted

    # -- notebooks ------------------------------------------------------------------------
    def _code_cells(self, notebook_uri: str) -> list[tuple[int, str, int | None, str]]:
        """(number among all cells, cell URI, version, text) of the notebook's open code cells."""
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        cells = []
        for number, cell in enumerate(notebook.cells if notebook is not None else (), start=1):
            document = self.workspace.text_documents.get(unquote(cell.document))
            if cell.kind == types.NotebookCellKind.Code and document is not None:
                cells.append((number, cell.document, document.version, document.source))
        return cells

    async def lint_notebook(self, notebook_uri: str) -> dict[str, Linted]:
        """Each code cell's findings (by unquoted cell URI) from one check of the notebook's code
        cells joined, cached until a cell or the notebook changes."""
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is None:
            return {}
        cells = self._code_cells(notebook_uri)
        key = (notebook.version, tuple((uri, version, text) for _, uri, version, text in cells))
        cached = self._notebooks.get(unquote(notebook_uri))
        if cached is not None and cached[0] == key:
            return cached[1]
        settings = self.project.settings_for(document_path(notebook_uri))
        linted = await asyncio.get_running_loop().run_in_executor(
            self._executor, self._lint_notebook, notebook_uri, cells, settings)
        if self.workspace.get_notebook_document(notebook_uri=notebook_uri) is not None:
            self._notebooks[unquote(notebook_uri)] = (key, linted)
        return linted

    def _lint_notebook(self, notebook_uri: str, cells, settings: Settings) -> dict[str, Linted]:
        path = document_path(notebook_uri)
        project = self.project_for(path, settings.max_file_size) if path else None
        joined = join_cells((number, text) for number, _, _, text in cells)
        result = lint_source(joined.source, path or notebook_uri, settings, project, parser=Parser(), notebook=False)
        for error in result.errors:
            logger.error("%s", error)
        by_cell: dict[int, list[Finding]] = {}
        for finding in result.findings:
            finding = joined.to_cells(finding)
            if finding.fix is not None and any(edit.cell != finding.cell for edit in finding.fix.edits):
                finding = replace(finding, fix=None)  # a quick fix edits the cell it is offered in
            by_cell.setdefault(finding.cell, []).append(finding)
        cell_uris = {number: uri for number, uri, _, _ in cells}
        return {unquote(uri): Linted(version, text, by_cell.get(number, []), split_lines(text), cell_uris=cell_uris)
                for number, uri, version, text in cells}

    def schedule_notebook(self, notebook_uri: str, delay: float) -> None:
        if self.push_diagnostics:
            _restart(self._pending, unquote(notebook_uri), self._publish_notebook_after(notebook_uri, delay))

    async def _publish_notebook_after(self, notebook_uri: str, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is None:
            return
        version = notebook.version
        cells = await self.lint_notebook(notebook_uri)
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is None or notebook.version != version:
            return  # edited meanwhile: the newer edit's publish follows
        for uri, linted in cells.items():
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, diagnostics=self.diagnostics(linted, uri), version=linted.version))

    def forget_notebook(self, notebook_uri: str) -> None:
        task = self._pending.pop(unquote(notebook_uri), None)
        if task is not None:
            task.cancel()
        self._notebooks.pop(unquote(notebook_uri), None)

    def _confirm_later(self, uri: str, sliced: Linted) -> None:
        _restart(self._confirming, uri, self._confirm(uri, sliced))

    def _still(self, uri: str, linted: Linted) -> bool:
        """The document is open at the version `linted` was computed for, and it is the latest result."""
        return self.is_open(uri) and self._open_version(uri) == linted.version and self._results.get(uri) is linted

    async def _confirm(self, uri: str, sliced: Linted) -> None:
        """Check the whole file once the document has been idle, and publish what differs from
        the sliced check."""
        await asyncio.sleep(self.confirm_delay)
        if not self._still(uri, sliced):
            return
        settings = self.project.settings_for(document_path(uri))
        linted = await asyncio.get_running_loop().run_in_executor(
            self._executor, self._lint, uri, sliced.version, sliced.text, settings, True, True)
        if linted is None or not self._still(uri, sliced):
            return
        self._results[uri] = linted
        if linted.findings == sliced.findings:
            return
        logger.warning("the sliced check of %s differed from the whole file's; the whole file's findings hold", uri)
        if self.push_diagnostics:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, diagnostics=self.diagnostics(linted, uri), version=linted.version))
        elif self.diagnostic_refresh:
            self.workspace_diagnostic_refresh(None)

    async def fix_all(self, uri: str, linted: Linted) -> str | None:
        """The document's text with every fix its configuration allows applied (safe ones unless
        `unsafe-fixes`), as `check --fix` would; None when there is nothing to fix (or the
        document is a notebook's cell: its fixes may need the other cells)."""
        if self.workspace.get_notebook_document(cell_uri=uri) is not None:
            return None
        path = document_path(uri)
        policy = self.project.fix_policy_for(path)
        if not any(policy.allows(finding) for finding in linted.findings):
            return None
        settings = self.project.settings_for(path)

        def fix() -> str:
            project = self.project_for(path, settings.max_file_size) if path else None
            # a fresh parse per round: the document's incremental parser keeps the editor's text
            outcome = fix_source(linted.text, lambda text: lint_source(text, path or uri, settings, project), policy)
            return outcome.source

        return await asyncio.get_running_loop().run_in_executor(self._executor, fix)

    def project_for(self, path: str, max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> Project:
        """The project of a document: the innermost workspace folder holding it, else the folder of
        the nearest configuration file (as for the command line). Reads the disk: call it on the
        lint worker, never on the event loop."""
        folders = [document_path(f.uri) for f in self.workspace.folders.values()]
        if self.workspace.root_uri:
            folders.append(document_path(self.workspace.root_uri))
        holding = [f for f in folders if f and Project(f).contains(path)]
        root = str(max(holding, key=len)) if holding else str(find_root([path]))
        project = self._projects.get(root)
        if project is None:
            # its files found with the excludes a check of the root would use
            project = self._projects[root] = Project(root, max_file_size=max_file_size,
                                                     discovery_for=Resolver().discovery_for)
        project.max_file_size = max_file_size
        return project

    async def saved(self, saved_uri: str) -> None:
        """After a save: forget what the projects knew of the disk, and re-check the open documents
        that import the saved file (their summaries of it are stale) or that it imports (what it
        hands their helpers changed). Finding them reads the
        disk, so it runs on the lint worker, never on the event loop."""
        self.schedule(saved_uri, 0)
        documents = [(uri, d.source) for uri, d in list(self.workspace.text_documents.items())]
        loop = asyncio.get_running_loop()
        importers = await loop.run_in_executor(self._executor, self.importers_of, saved_uri, documents)
        for uri in importers:
            self._results.pop(uri, None)
            self.schedule(uri, 0)
        for notebook_uri in list(self.workspace.notebook_documents):
            # a notebook's cells are checked with the project's files too: whatever they import
            # may be what was saved (checking a notebook again is as cheap as finding out)
            self._notebooks.pop(notebook_uri, None)
            self.schedule_notebook(notebook_uri, 0)

    def importers_of(self, saved_uri: str, documents: list[tuple[str, str]]) -> list[str]:
        """Of the open `documents` (uri, text), those other than `saved_uri` that import the file
        saved there, or that it imports (a helper's findings depend on what its callers hand it),
        after forgetting what the projects knew of the disk."""
        for project in list(self._projects.values()):
            project.refresh()
        for linter in list(self._documents.values()):
            linter.forget()  # what a document's definitions read of other files may have changed
        saved = document_path(saved_uri)
        if saved is None:
            return []
        saved_source = next((source for uri, source in documents if uri == unquote(saved_uri)), None)
        found = []
        for uri, source in documents:
            path = document_path(uri)
            if uri == unquote(saved_uri) or path is None:
                continue
            project = self.project_for(path)
            if not project.contains(saved):
                continue
            imports_saved = any(str(f) == str(project.file_key(saved)) for f in project.imported_files(path, source))
            imported_by_saved = saved_source is not None and any(
                str(f) == str(project.file_key(path)) for f in project.imported_files(saved, saved_source))
            if imports_saved or imported_by_saved:
                found.append(uri)
        return found

    def encoder(self, linted: Linted) -> Encoder:
        return Encoder(linted.lines, self.workspace.position_encoding)

    def diagnostics(self, linted: Linted, uri: str) -> list[types.Diagnostic]:
        encoder = self.encoder(linted)
        return [to_diagnostic(f, encoder, uri, linted.cell_uris) for f in linted.findings]

    # -- pushing --------------------------------------------------------------------------
    def schedule(self, uri: str, delay: float) -> None:
        """(Re)start the publish of `uri` after `delay` seconds; a newer edit cancels it."""
        if not self.push_diagnostics:
            return
        _restart(self._pending, uri, self._publish_after(uri, delay))

    async def _publish_after(self, uri: str, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        if not self.is_open(uri):
            return
        version = self._open_version(uri)
        linted = await self.lint(uri, only_if_current=True)
        # Never publish for an older version: the document may have changed during the lint.
        if linted is None or not self.is_open(uri) or self._open_version(uri) != version:
            return
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=self.diagnostics(linted, uri), version=version)
        )

    def forget(self, uri: str) -> None:
        task = self._pending.pop(uri, None)
        if task is not None:
            task.cancel()
        self._results.pop(uri, None)
        self._documents.pop(uri, None)
        self._declined.pop(uri, None)
        self._lint_seconds.pop(uri, None)
        confirming = self._confirming.pop(uri, None)
        if confirming is not None:
            confirming.cancel()

    def _show_config_error(self, message: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error,
                                                         message=f"trainlint: {message}"))


def _restart(tasks: dict[str, asyncio.Task], uri: str, coroutine) -> None:
    """Run `coroutine` as the task of `uri` in `tasks`, cancelling the one it replaces; the entry
    goes when its task is done."""
    previous = tasks.pop(uri, None)
    if previous is not None:
        previous.cancel()
    task = tasks[uri] = asyncio.ensure_future(coroutine)
    task.add_done_callback(lambda done: tasks.pop(uri) if tasks.get(uri) is done else None)


def _milliseconds_option(options, key: str, default: float) -> float:
    """A delay in milliseconds from the client's initialization options (`debounceMs`,
    `confirmMs`), in seconds, if it is a sane number."""
    if isinstance(options, dict):
        value = options.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 10_000:
            return value / 1000
        if value is not None:
            logger.warning("ignoring initialization option %s=%r (want milliseconds, 0-10000)", key, value)
    return default


def create_server(debounce: float = DEFAULT_DEBOUNCE_SECONDS) -> TrainlintServer:
    server = TrainlintServer(debounce)

    @server.feature(types.INITIALIZE)
    def initialize(ls: TrainlintServer, params: types.InitializeParams) -> None:
        chosen = _milliseconds_option(params.initialization_options, "debounceMs", None)
        if chosen is not None:  # the client's own debounce, as it set it
            ls.debounce, ls.adaptive_debounce = chosen, False
        ls.confirm_delay = _milliseconds_option(params.initialization_options, "confirmMs", ls.confirm_delay)
        capabilities = params.capabilities
        text_document = capabilities.text_document
        ls.push_diagnostics = text_document is None or text_document.diagnostic is None
        diagnostics = capabilities.workspace.diagnostics if capabilities.workspace else None
        ls.diagnostic_refresh = bool(diagnostics and diagnostics.refresh_support)
        workspace_edit = capabilities.workspace.workspace_edit if capabilities.workspace else None
        ls.document_changes = bool(workspace_edit and workspace_edit.document_changes)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TrainlintServer, params: types.DidOpenTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri.startswith("file:") and document_path(uri) is None:
            logger.warning("%s: not a usable file path (a NUL character, or not a URI); checked as a buffer "
                           "without a file, with the default settings", uri)
        ls.schedule(uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TrainlintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, ls.debounce_for(params.text_document.uri))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_did_open(ls: TrainlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.schedule_notebook(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_did_change(ls: TrainlintServer, params: types.DidChangeNotebookDocumentParams) -> None:
        structure = params.change.cells.structure if params.change.cells else None
        if ls.push_diagnostics and structure is not None:
            for cell in structure.did_close or ():  # a deleted cell's diagnostics go with it
                ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))
        ls.schedule_notebook(params.notebook_document.uri, ls.debounce)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(ls: TrainlintServer, params: types.DidCloseNotebookDocumentParams) -> None:
        ls.forget_notebook(params.notebook_document.uri)
        if ls.push_diagnostics:
            for cell in params.cell_text_documents:
                ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    async def did_save(ls: TrainlintServer, params: types.DidSaveTextDocumentParams) -> None:
        await ls.saved(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TrainlintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.forget(uri)
        if ls.push_diagnostics:
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(identifier=SOURCE, inter_file_dependencies=True, workspace_diagnostics=False),
    )
    async def pull_diagnostics(ls: TrainlintServer, params: types.DocumentDiagnosticParams):
        linted = await ls.lint(params.text_document.uri)
        return types.RelatedFullDocumentDiagnosticReport(items=ls.diagnostics(linted, params.text_document.uri))

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: TrainlintServer, params: types.HoverParams) -> types.Hover | None:
        linted = await ls.lint(params.text_document.uri)
        encoder = ls.encoder(linted)
        at = encoder.from_client(params.position)
        found = [f for f in linted.findings if _start(f) <= at <= _end(f)]
        if not found:
            return None
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=hover_markdown(found)),
            range=to_diagnostic(found[0], encoder).range,
        )

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND]),
    )
    async def code_action(ls: TrainlintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        only = params.context.only
        quick = not only or any(types.CodeActionKind.QuickFix.value.startswith(kind) for kind in only)
        fix_all = not only or any(FIX_ALL_KIND.startswith(kind) for kind in only)
        if not (quick or fix_all):
            return []
        uri = params.text_document.uri
        linted = await ls.lint(uri)
        if linted is None:
            return []
        encoder = ls.encoder(linted)
        builder = ActionBuilder(uri, linted.version, linted.lines, encoder, linted.comments,
                                ls.document_changes)
        actions = []
        if quick:
            start, end = encoder.from_client(params.range.start), encoder.from_client(params.range.end)
            actions += builder.actions([f for f in linted.findings if _start(f) <= end and start <= _end(f)])
        if fix_all:
            fixed = await ls.fix_all(uri, linted)
            action = builder.fix_all_action(fixed) if fixed is not None else None
            if action is not None:
                actions.append(action)
        return actions

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: TrainlintServer, params: None) -> None:
        for uri in list(ls._pending) + list(ls._confirming):
            ls.forget(uri)
        ls._executor.shutdown(wait=False, cancel_futures=True)

    return server


def document_path(uri: str) -> str | None:
    """The file system path of a `file:` URI, percent-decoded (`my%20project` is `my project`);
    None for other schemes (an unsaved `untitled:` buffer), for a path no file can have (a NUL) and
    for what urllib cannot read as a URI."""
    try:
        parsed = urlparse(uri)
    except ValueError:  # `file://[bad/x.py`: not a URI urllib can read
        return None
    if parsed.scheme != "file":
        return None
    path = url2pathname(parsed.path)
    if parsed.netloc and parsed.netloc != "localhost":
        path = f"//{parsed.netloc}{path}"  # a UNC path
    if "\0" in path:  # `%00`: no file has this name; the document is a buffer without a file
        return None
    return path


def _declined(text: str, path: str, settings: Settings) -> str | None:
    """The skipped-file notice of a document too large to check: over `max-file-size`, or over its
    memory budget (`trainlint.budget`); None when it is checked."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > settings.max_file_size:
        return f"skipped {path}: {size:,} bytes is over the size limit of {settings.max_file_size:,} (max-file-size)"
    return over_budget(text, path)


def _read_closed(uri: str, settings: Settings) -> str:
    """The text of a document that is not open, read as the CLI reads files (regular files only,
    never blocking, within the size limit); a JsonRpcInvalidParams error says why not."""
    path = document_path(uri)
    if path is None:
        raise JsonRpcInvalidParams(message=f"cannot read {uri}: not open and not a file: URI")
    try:
        data = read_source(path, settings.max_file_size)
    except (UnreadableFile, SkippedFile) as err:
        raise JsonRpcInvalidParams(message=str(err)) from None
    text, error = decode_source(data, path)
    if text is None:
        raise JsonRpcInvalidParams(message=f"cannot read {uri}: {error.message}")
    return text


class _Framed:
    """stdin as pygls reads it, finding the next `Content-Length:` header after a message that
    came without one: pygls would otherwise read that message's body and the next header as one
    line, and lose the next message too."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def readline(self) -> bytes:
        line = self._stream.readline()
        at = line.find(b"Content-Length:")
        if at > 0:
            logger.warning("skipped %d bytes of a message without a Content-Length header", at)
            return line[at:]
        return line

    def read(self, size: int) -> bytes:
        return self._stream.read(size)


def _start(finding: Finding) -> tuple[int, int]:
    return finding.line - 1, finding.column - 1


def _end(finding: Finding) -> tuple[int, int]:
    return finding.end_line - 1, finding.end_column - 1


def serve() -> None:
    """Run the language server on stdin/stdout until the client says exit."""
    logging.basicConfig(level=logging.WARNING, format="trainlint-lsp %(levelname)s: %(message)s")
    server = create_server()
    server.start_io(stdin=_Framed(sys.stdin.buffer))
    # `exit` came (or the client went): end now. The lint worker may be in the middle of a long
    # check, and the interpreter would wait for its thread before exiting.
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)
