"""What a rule sees of one file: its source, its tree, the index, settings, and shared models."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import libcst as cst

from trainlint.model.index import CallSite, FileIndex
from trainlint.model.linker import Linker, summaries_of
from trainlint.reader.project import Project
from trainlint.model.summaries import FileSummary

T = TypeVar("T")


class FileContext:
    def __init__(self, path: str, source: str, module: cst.Module, min_torch_version: tuple[int, ...],
                 project: Project | None = None, summary: FileSummary | None = None,
                 document: str | None = None, outside_facts: dict[str, list] | None = None,
                 digest: str | None = None) -> None:
        self.path = path
        self.digest = digest  # the SHA-256 of the checked bytes (None: not known), for `Summaries.adopt`
        self.project = project
        # a summary made when another file imported this one holds its index: reuse both
        self._summary = summary
        self.source = source
        self.module = module
        self.min_torch_version = min_torch_version
        self._index: FileIndex | None = None
        self._models: dict[Any, Any] = {}
        # A slice of an open document (`trainlint.document`) is checked with the whole document's
        # text, for facts read from the text, and the file facts (`model.file_facts`) that the
        # rest of the document contributed.
        self.document = document if document is not None else source
        self.outside_facts = outside_facts or {}
        self.fact_items: dict[str, list[tuple[int, Any]]] = {}  # fact -> (top-level statement, value)
        self.fact_values: dict[str, list] = {}
        self._top_level: dict[int, int] | None = None

    @property
    def index(self) -> FileIndex:
        if self._index is None:
            if self._summary is not None and self._summary.index is not None and self._same_file(self._summary.index):
                self._index = self._summary.index
            else:
                self._index = FileIndex(self.module)
                self._index.linker = Linker(self.project, self.path)
                if self.project is not None and self.digest is not None:
                    summaries_of(self.project).adopt(self.path, self.digest, self.source, self._index)
        return self._index

    def _same_file(self, index: FileIndex) -> bool:
        """The index a summary holds answers for the path it was made for (its linker reads that
        file's callers and constructions): a byte-for-byte copy of the file elsewhere in the project
        shares the summary by content but needs an index of its own."""
        linker = index.linker
        if linker is None or self.project is None:
            return False
        return linker.path == self.path or self.project.real(linker.path) == self.project.real(self.path)

    def model(self, build: Callable[["FileContext"], T]) -> T:
        """A per-file model (training loops, evaluation regions, ...) built once, shared by rules."""
        if build not in self._models:
            self._models[build] = build(self)
        return self._models[build]

    def top_level(self, node: cst.CSTNode) -> int:
        """The position in the module's body of the top-level statement that holds `node`."""
        if self._top_level is None:
            self._top_level = {id(statement): number for number, statement in enumerate(self.module.body)}
        parents = self.index.parents
        while id(node) not in self._top_level:
            node = parents[node]
        return self._top_level[id(node)]

    # shortcuts used by most rules
    def call_name(self, site: CallSite) -> str | None:
        return self.index.call_name(site)

    def code_for(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)
