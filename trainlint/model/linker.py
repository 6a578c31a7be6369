"""The summaries of a project's files, and one file's view of its project (`Linker`).

The project reader (`trainlint.reader.project`) finds which file a name comes from and gives its
text and tree; this model summarises the tree (`trainlint.model.summaries`) and answers what a name
in a checked file refers to, who calls a helper and who builds a class. Summaries are kept per
content hash, so a file summarised once is not summarised again while its bytes stay the same (in
one process; worker processes each keep their own).
"""

from __future__ import annotations

import os
import re
import weakref
from collections import OrderedDict
from pathlib import Path

import libcst as cst

from trainlint import guard
from trainlint.model.index import FileIndex, Scope
from trainlint.model.path_literals import LOADS
from trainlint.model.quick_calls import GradOnCalls, grad_on_calls
from trainlint.parsing import dotted_name
from trainlint.model.summaries import (CallArguments, ClassSummary, Construction, FileSummary, FunctionSummary,
                                       summarise)
from trainlint.reader.project import Project, tree_of

_MAX_REEXPORTS = 4
_KEPT_SUMMARIES = 128
_KEPT_ADOPTED = 8

Summary = FunctionSummary | ClassSummary


class Summaries:
    """The summaries of one project's files, computed on demand (`summaries_of(project)`)."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._by_hash: OrderedDict[str, FileSummary] = OrderedDict()  # least recently used first
        self._adopted: OrderedDict[str, FileSummary] = OrderedDict()  # checked files' (`adopt`), oldest first
        self._constructions: dict[tuple[str, str], list[Construction]] = {}
        self._callers: dict[tuple[str, str], list[tuple[Path, CallArguments]]] = {}
        self._lookups: dict[tuple[str, str, tuple[str, ...]], Summary | None] = {}
        self._quick: dict[str, GradOnCalls | None] = {}  # content hash -> `quick_calls` of that text
        self._guarded: dict[str, bool] = {}  # content hash -> the guard lets LibCST parse it
        # (component digest, words) -> `mentioning`'s files: every file of a component asks the
        # same questions (a method's callers, a class's builders), each a scan of the component's texts
        self._mentioning: dict[tuple[str | None, tuple], list[Path]] = {}
        self._generation = project.generation

    def _current(self) -> None:
        """Forget who builds which class and calls which helper once the project was refreshed
        (files were saved); summaries stay cached by content."""
        if self._generation != self.project.generation:
            self._generation = self.project.generation
            self._constructions.clear()
            self._callers.clear()
            self._lookups.clear()
            self._mentioning.clear()

    def cached_summary(self, digest: str) -> FileSummary | None:
        """The summary of a file with this content, if one was made (it holds the parsed file); a
        checked file's (`adopt`) joins the others once asked for."""
        summary = self._by_hash.get(digest)
        if summary is not None:
            self._by_hash.move_to_end(digest)
            return summary
        summary = self._adopted.pop(digest, None)
        if summary is not None:
            self._keep(digest, summary)
        return summary

    def _keep(self, digest: str, summary: FileSummary) -> None:
        self._by_hash[digest] = summary
        while len(self._by_hash) > _KEPT_SUMMARIES:  # each holds a parsed file: bound the memory
            self._by_hash.popitem(last=False)
            self._lookups.clear()  # (an answer may keep an evicted summary alive)

    def adopt(self, path: str, digest: str, source: str, index: FileIndex) -> None:
        """Keep the index of a file being checked (`FileContext.index`) as its summary, so that a
        question about that file (a call of its method, asked from itself or from a file checked
        soon after) reads this tree instead of LibCST parsing the file a second time: in the cold
        benchmark on lightning, accelerate and timm, 29 of the 100 files summarised were files
        the run had parsed already, 10 of them while they were being checked.

        Sound because the summary is the one `file_summary` would make: it is taken only when the
        project reads these very bytes (same SHA-256) at this path (same real file) with the same
        text the check parsed (a notebook's joined cells, identifiers NFKC-normalised, an editor's
        unsaved buffer: a different text is left to `file_summary`), and LibCST's tree of the same
        text is the same tree. The index and its linker are then shared by the check and the
        summary, as the engine already shares them in the other order (a file summarised for an
        importer first is checked with that summary's index, `FileContext._same_file`)."""
        if digest in self._by_hash or digest in self._adopted or not self.project.contains(path):
            return
        real = self.project.real(path)
        read = self.project.read(real)
        if read is None or read[0] != digest or read[1] != source:
            return
        # the last few checked files only (most questions about a checked file come while it is
        # checked or soon after): a tree per checked file kept in the 128 summaries raised the
        # peak memory of a run over lightning, accelerate and timm from 229 MB to 291 MB
        self._adopted[digest] = index.linker.own(index)
        while len(self._adopted) > _KEPT_ADOPTED:
            self._adopted.popitem(last=False)

    def file_summary(self, path: Path) -> FileSummary | None:
        read = self.project.read(path)
        if read is None:
            return None
        digest, text = read
        summary = self.cached_summary(digest)
        if summary is not None:
            return summary
        summary = FileSummary()  # a file LibCST must not or cannot parse answers nothing
        module = tree_of(text, str(path))
        if module is not None:
            try:
                index = FileIndex(module)
                index.linker = Linker(self.project, str(path))
                summary = index.linker.own(index)
            except (RecursionError, ValueError, MemoryError):
                summary = FileSummary()
        self._keep(digest, summary)
        return summary

    def locate(self, qualname: str, from_path: str, depth: int = 0,
               words: tuple[str, ...] = ()) -> tuple[Path, list[str], Summary] | None:
        """Where the project function, class or method that `qualname` (as resolved in the file at
        `from_path`) is defined, following re-exports, with its summary; None when it is not the
        project's. With `words` (strings, or patterns searched in the text), a module whose text
        has none of them is not parsed: what is
        asked about cannot be there (a re-export in it is still followed)."""
        found = self.project.find_module(qualname, from_path)
        if found is None:
            return None
        path, rest = found
        if not rest or depth > _MAX_REEXPORTS:
            return None
        text = self.project.source(path)
        if words and text is not None and not any(_holds(text, word) for word in words):
            tail = f".{rest[0]}"
            for name in self.project.imported_names_of(path):
                if name.endswith(tail) and name != tail:
                    return self.locate(".".join([name, *rest[1:]]), str(path), depth + 1, words)
            return None
        summary = self.file_summary(path)
        if summary is None:
            return None
        hit = summary.member(rest)
        if hit is not None:
            return path, rest, hit
        reexport = summary.imports.get(rest[0])
        if reexport is not None:
            return self.locate(".".join([reexport, *rest[1:]]), str(path), depth + 1, words)
        return None

    def lookup(self, qualname: str, from_path: str, words: tuple[str, ...] = ()) -> Summary | None:
        # asked for every call a rule classifies (`F.relu(x)` a hundred times in a file): the
        # answer depends on the name, the folder it is resolved from and the words, and holds
        # until the project is refreshed
        self._current()
        key = (qualname, os.path.dirname(from_path), words)
        if key not in self._lookups:
            found = self.locate(qualname, from_path, words=words)
            self._lookups[key] = found[2] if found is not None else None
        return self._lookups[key]

    def callers(self, path: str, function_name: str) -> list[CallArguments]:
        """Where the other checked files call the module-level function `function_name` of the file
        at `path` (`save_on_master(checkpoint, path)` in main.py, for what the helper writes); the
        file's own calls are its index's business."""
        return [use for _, use in self.callers_by_file(path, function_name)]

    def callers_by_file(self, path: str, function_name: str) -> list[tuple[Path, CallArguments]]:
        """`callers`, each with the file it is in (a message can say where a caller's state is)."""
        self._current()
        key = (str(self.project.real(path)), function_name)
        if key not in self._callers:
            self._callers[key] = self._uses(path, function_name, lambda summary: summary.calls_of(function_name),
                                            own_file=False)
        return self._callers[key]

    def method_callers_by_file(self, path: str, name: str) -> list[tuple[Path, CallArguments]]:
        """Every call of a method named `name` (`x.name(...)`, whatever `x` is) in the checked files
        that can reach the file at `path` (its component of the import graph, itself included):
        a superset of the calls of its methods called `name`."""
        self._current()
        key = self._method_key(path, name)
        if key not in self._callers:
            self._callers[key] = list(self._method_calls(self.mentioning(path, (f".{name}(",)), name))
        return self._callers[key]

    def iter_method_callers(self, path: str, name: str, later: tuple[str, ...] = ()):
        """`method_callers_by_file`, lazily, file by file, the files whose text holds one of the
        words `later` last: a question that one call can answer (is every call of it under
        no_grad?) stops at that call and parses no other file. (A large component calls a method
        named `forward` or `step` in hundreds of files the gate never had to parse.)"""
        self._current()
        key = self._method_key(path, name)
        if key in self._callers:  # every file was read already
            return iter(self._callers[key])
        return self._method_calls(self._later_last(self.mentioning(path, (f".{name}(",)), later), name)

    def method_called_with_grad(self, path: str, name: str, answers, later: tuple[str, ...] = ()) -> bool:
        """Whether `answers(where, call)` holds for one of the calls `iter_method_callers(path,
        name, later)` yields, told where possible without LibCST parsing another file: a file
        summarised already is asked (cheap), one that is not is read with Python's parse
        (`quick_calls`), which lists the calls it proves to run with grad on. False means only
        that none was found this way (the caller then iterates the calls themselves).

        Sound for a question `answers` that `CallArguments(callee, grad_off=False, caller=...)`
        with no receiver classes settles on its fields alone (`_called_elsewhere_without_grad`: a
        grad-on call not in a pytest test answers "no"): each call stood for here is one the
        file's summary would yield with exactly those fields (`GradOnCalls`), so the lazy
        iteration would meet a call that answers too, in the same files (the same component, the
        same words). In the cold benchmark on lightning, accelerate and timm this settles the
        question in most of the 128 times it is asked, where LibCST used to parse 25 files (425 kB)
        that the run otherwise never parses."""
        self._current()
        key = self._method_key(path, name)
        if key in self._callers:
            return any(answers(where, use) for where, use in self._callers[key])
        unsummarised = []
        for candidate in self._later_last(self.mentioning(path, (f".{name}(",)), later):
            read = self.project.read(candidate)
            summary = self.cached_summary(read[0]) if read is not None else None
            if summary is not None:
                if any(answers(candidate, use) for use in summary.method_calls_of(name)):
                    return True
            elif read is not None:
                unsummarised.append((candidate, read))
        for candidate, (digest, text) in unsummarised:
            quick = self._quick_calls(digest, text, candidate)
            if quick is None:
                continue
            for caller in quick.callers(name):
                if answers(candidate, CallArguments(f".{name}", (), (), (), False, caller)) \
                        and self._libcst_reads(digest, text, candidate):
                    return True
        return False

    def _quick_calls(self, digest: str, text: str, path: Path):
        if digest not in self._quick:
            if len(self._quick) > 4096:  # (small, kept per content; a long editor session is bounded)
                self._quick.clear()
            self._quick[digest] = grad_on_calls(text, str(path))
        return self._quick[digest]

    def spelled(self, path: Path, word: str) -> bool | None:
        """Whether the code of the project file at `path` spells the identifier `word` (a name,
        an attribute, an imported name: `GradOnCalls.identifiers`, from Python's parse, kept per
        content); None when it cannot be told (unreadable, or Python cannot parse it)."""
        read = self.project.read(path)
        if read is None:
            return None
        quick = self._quick_calls(read[0], read[1], path)
        return word in quick.identifiers if quick is not None else None

    def _libcst_reads(self, digest: str, text: str, path: Path) -> bool:
        """The guard lets LibCST parse the file (`tree_of`): a file it refuses is summarised as
        empty, and answers nothing."""
        if digest not in self._guarded:
            problem = guard.check(text, str(path))
            self._guarded[digest] = problem is None or not problem.final
        return self._guarded[digest]

    def _method_key(self, path: str, name: str) -> tuple:
        """The memo key of the method calls named `name` seen from the file at `path`: the answer
        depends on its import component only, not on the file asked from, so every file of a
        component shares one scan (a project of many near-copies asks it once per file)."""
        target = self.project.real(path)
        own = self.project.key_components().get(str(target))
        scope = own[1] if own is not None and own[1] is not None else str(target) if own is None else None
        return ("component", scope, "." + name)

    def _later_last(self, files: list[Path], later: tuple[str, ...]) -> list[Path]:
        """`files`, those whose text holds one of the words `later` moved to the end (stable)."""
        if later:
            files.sort(key=lambda candidate: any(word in (self.project.source(candidate) or "") for word in later))
        return files

    def _method_calls(self, files: list[Path], name: str):
        for candidate in files:
            summary = self.file_summary(candidate)
            for use in summary.method_calls_of(name) if summary is not None else ():
                yield candidate, use

    def constructions(self, path: str, class_name: str) -> list[Construction]:
        """Where the checked files build the class `class_name` of the file at `path` with arguments
        (`Trainer(model, opt, sched)` in the script, for the roles of `self.model` & co.)."""
        self._current()
        key = (str(self.project.real(path)), class_name)
        if key not in self._constructions:
            self._constructions[key] = [use for _, use in self._uses(
                path, class_name, lambda summary: summary.constructions_of(class_name), own_file=True)]
        return self._constructions[key]

    def instance_builds(self, path: str, class_name: str):
        """Every construction, in the checked files of its import component, of the class
        `class_name` of the file at `path` and of the project's classes deriving from it (through
        each other, nested ones too), with those subclasses: ([(file, InstanceBuild)], [(file,
        Subclass)]). A call is kept when its callee resolves to the class (a module-level one, from
        any file naming it) or is the bare name of a nested class in its own file. None when a
        file reads one of those names otherwise than to call, import, derive from or annotate with
        it (`Summary.class_handed_around`: a registry, a classmethod building it)."""
        self._current()
        key = ("instances", str(self.project.real(path)), class_name)
        if key in self._callers:
            return self._callers[key]
        builds, subclasses = [], []
        pending = [(self.project.real(path), class_name, True)]
        seen = set()
        while pending and len(seen) < 32:
            target, name, module_level = pending.pop()
            if (target, name) in seen:
                continue
            seen.add((target, name))
            files = self.mentioning(str(target), (name,)) if module_level else [target]
            for candidate in files:
                summary = self.file_summary(candidate)
                if summary is None:
                    continue

                def names_target(callee: str) -> bool:
                    if "." not in callee and candidate == target:
                        return True  # the file's own class, by its bare name
                    if not module_level:
                        return False
                    where = self.locate(callee, str(candidate))
                    return where is not None and where[0] == target and where[1] == [name]
                if summary.class_handed_around(name):
                    self._callers[key] = None  # built where no call of it shows
                    return None
                builds += [(candidate, b) for b in summary.instance_builds_of(name) if names_target(b.callee)]
                for sub in summary.subclasses_of(name):
                    if names_target(sub.base):
                        subclasses.append((candidate, sub))
                        pending.append((candidate, sub.name, sub.module_level))
        found = (builds, subclasses) if not pending else None
        self._callers[key] = found
        return found

    def mentioning(self, path: str, words: tuple[str, ...]) -> list[Path]:
        """The checked files that can call into the file at `path` or be called by it (its
        component of the import graph, the file itself included) whose text holds one of `words`:
        where the rest of an update split across files can be (`scaler.scale(loss).backward()`
        in the engine that calls an updater's `step`)."""
        self._current()
        target = self.project.real(path)
        components = self.project.key_components()
        own = components.get(str(target))
        # a file outside the components, or in one too large to list, is answered from every file
        key = (own[1] if own is not None else None, tuple(words))
        if key not in self._mentioning:
            found = []
            for candidate in self.project.paths:
                if own is not None and own[1] is not None and components.get(str(candidate), own)[1] != own[1]:
                    continue
                text = self.project.source(candidate)
                if text is not None and any(word in text for word in words):
                    found.append(candidate)
            self._mentioning[key] = found
        return list(self._mentioning[key])  # a copy: callers reorder it (`_later_last`)

    def _uses(self, path: str, name: str, found_in, own_file: bool) -> list:
        """(file, use) for what `found_in(summary)` finds (calls with a `callee`) in the checked files whose text
        calls `name`, kept when the callee is the module-level `name` of the file at `path`; in that
        file itself (with `own_file`), an undotted callee is its own definition."""
        return list(self._iter_uses(path, name, found_in, own_file))

    def iter_callers(self, path: str, name: str, later: tuple[str, ...] = ()):
        """`callers_by_file`, lazily, file by file, the files whose text holds one of the words
        `later` last (see `iter_method_callers`); calls spreading `*args`/`**kwargs` included,
        without their arguments (timm's model files all call `build_model_with_cfg(..., **kwargs)`:
        each is a call with grad on, and leaving them out read a hundred files to find none)."""
        self._current()
        return self._iter_uses(path, name, lambda summary: summary.calls_of(name, starred=True), own_file=False,
                               later=later)

    def _iter_uses(self, path: str, name: str, found_in, own_file: bool, later: tuple[str, ...] = ()):
        target = self.project.real(path)
        needle = f"{name}("
        # a file that can call the target's function imports its module (directly or through
        # others): it is in the target's component of the import graph, the unit the result cache
        # keys on. Files outside it are not read, so a result never depends on a file its cache
        # key leaves out (a cached and an uncached run agree), and a warm run reads none of them.
        components = self.project.key_components()
        own = components.get(str(target))
        files = []
        for candidate in self.project.paths:
            if candidate == target and not own_file:
                continue
            # (an unbounded component, digest None, is not told apart: every file is read)
            if own is not None and own[1] is not None and components.get(str(candidate), own)[1] != own[1]:
                continue
            text = self.project.source(candidate)
            if text is not None and needle in text and (candidate == target or _may_call_another(text, name)):
                files.append(candidate)
        for candidate in self._later_last(files, later):
            summary = self.file_summary(candidate)
            for use in found_in(summary) if summary is not None else ():
                if candidate == target and "." not in use.callee:
                    yield candidate, use
                    continue
                where = self.locate(use.callee, str(candidate))
                if where is not None and where[0] == target and where[1] == [name]:
                    yield candidate, use


def _holds(text: str, word: "str | re.Pattern[str]") -> bool:
    return word.search(text) is not None if isinstance(word, re.Pattern) else word in text


def _may_call_another(text: str, name: str) -> bool:
    """Whether a file whose text holds `name(` may call a `name` defined in another file. It cannot
    when every such call is a plain `name(...)` of the file's own module-level `def name` and the
    file imports no `name` (timm's model files each define and call their own
    `checkpoint_filter_fn`): a `.name(` call, an import naming it, or no definition of its own
    mean it may."""
    if f".{name}(" in text:
        return True
    escaped = re.escape(name)
    if not re.search(rf"^(?:async[ \t]+)?def[ \t]+{escaped}[ \t]*\(", text, re.M):
        return True
    joined = text.replace("\\\n", " ")
    if re.search(rf"^[ \t]*(?:from[ \t]+\S+[ \t]+)?import[ \t][^\n]*\b{escaped}\b", joined, re.M):
        return True
    return any(re.search(rf"\b{escaped}\b", group) for group in
               re.findall(r"^[ \t]*from[ \t]+\S+[ \t]+import[ \t]*\(([^)]*)\)", joined, re.M))


class Linker:
    """One file's view of its project: the summary of what a name in that file refers to."""

    def __init__(self, project: Project | None, path: str, own: FileSummary | None = None) -> None:
        self.project = project
        self.path = path
        self._own = own
        self._summaries = summaries_of(project) if project is not None else None

    def own(self, index: FileIndex) -> FileSummary:
        """The summary of the linked file itself (its members are summarised when asked for)."""
        if self._own is None:
            self._own = summarise(index)
        return self._own

    def summary_of(self, index: FileIndex, expr: cst.BaseExpression, scope: Scope,
                   words: tuple[str, ...] = ()) -> Summary | None:
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            if bindings and all(b.kind in ("def", "class") for b in bindings):
                node = bindings[-1].node
                if index.scope_of_node[node].parent is index.module_scope:  # a module-level def/class
                    return self.own(index).member([expr.value])
                return None
            if not bindings and self.project is not None:
                return self._star_imported(index, expr.value, words)
        if self.project is None or not _head_is_import(expr, scope):
            return None
        qualname = index.resolve(expr, scope)
        return self._summaries.lookup(qualname, self.path, words) if qualname else None


    def _star_imported(self, index: FileIndex, name: str, words: tuple[str, ...]) -> Summary | None:
        """A name the file never binds, defined at module level in a project module it imports
        with `from tools import *` (the last such import that defines it wins, as in Python)."""
        for statement in reversed(index.module.body):
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar):
                    base = dotted_name(small.module) if small.module is not None else ""
                    base = "." * len(small.relative) + (base or "")
                    qualname = f"{base}.{name}" if base and not base.endswith(".") else f"{base}{name}"
                    found = self._summaries.lookup(qualname, self.path, words)
                    if found is not None:
                        return found
        return None

    def callers(self, function_name: str) -> list[CallArguments]:
        """Calls of this file's module-level function `function_name` in the project's other files."""
        if self.project is None or not self.project.contains(self.path):
            return []
        return self._summaries.callers(self.path, function_name)

    def callers_by_file(self, function_name: str) -> list[tuple[str, CallArguments]]:
        """`callers`, each with its file's path relative to the project root."""
        if self.project is None or not self.project.contains(self.path):
            return []
        return [(_relative(self.project, where), use)
                for where, use in self._summaries.callers_by_file(self.path, function_name)]

    def caller_sites(self, function_name: str) -> list[tuple[str, FileIndex, object]] | None:
        """The calls of this file's module-level function `function_name` in the project's other
        files, as (path relative to the root, that file's index, its `CallSite`): the caller's own
        code, to read what it built the arguments from. None when one of the calls cannot be found
        in its file's index (what it passes is then not known)."""
        if self.project is None or not self.project.contains(self.path):
            return []
        found = []
        for where, use in self._summaries.callers_by_file(self.path, function_name):
            summary = self._summaries.file_summary(where)
            index = summary.index if summary is not None else None
            if index is None:
                return None
            text = index.module.code_for_node
            sites = [site for site in index.calls
                     if (site.function.name if site.function is not None else None) == use.caller
                     and (dotted_name(site.node.func) or "").rsplit(".", 1)[-1] == function_name
                     and tuple(text(a.value) for a in site.node.args if a.keyword is None) == use.positional
                     and tuple((a.keyword.value, text(a.value)) for a in site.node.args
                               if a.keyword is not None) == use.keywords]
            if not sites:
                return None
            found += [(_relative(self.project, where), index, site) for site in sites]
        return found

    def method_callers_by_file(self, name: str) -> list[tuple[str, CallArguments]]:
        """Every call of a method named `name` in the project files that can reach this one, with
        each file's path relative to the project root."""
        if self.project is None or not self.project.contains(self.path):
            return []
        return [(_relative(self.project, where), use)
                for where, use in self._summaries.method_callers_by_file(self.path, name)]

    def iter_callers(self, function_name: str, later: tuple[str, ...] = ()):
        """`callers_by_file`, lazily, the files whose text holds one of `later` last."""
        if self.project is None or not self.project.contains(self.path):
            return
        for where, use in self._summaries.iter_callers(self.path, function_name, later):
            yield _relative(self.project, where), use

    def iter_method_callers(self, name: str, later: tuple[str, ...] = ()):
        """`method_callers_by_file`, lazily, the files whose text holds one of `later` last."""
        if self.project is None or not self.project.contains(self.path):
            return
        for where, use in self._summaries.iter_method_callers(self.path, name, later):
            yield _relative(self.project, where), use

    def method_called_with_grad(self, name: str, answers, later: tuple[str, ...] = ()) -> bool:
        """`Summaries.method_called_with_grad` from this file, `answers` taking each file's path
        relative to the project root (as `iter_method_callers` yields it)."""
        if self.project is None or not self.project.contains(self.path):
            return False
        return self._summaries.method_called_with_grad(
            self.path, name, lambda where, use: answers(_relative(self.project, where), use), later)

    def loaded_by_callers(self, function_name: str) -> frozenset[str]:
        """The file names that the files calling this file's function `function_name` load
        (a save helper here, the resume that reads its file back in the script that calls it)."""
        if self.project is None or not self.project.contains(self.path):
            return frozenset()
        found: set[str] = set()
        for where in {where for where, _ in self._summaries.callers_by_file(self.path, function_name)}:
            summary = self._summaries.file_summary(where)
            if summary is not None:
                found |= summary.loaded_files
        return frozenset(found)

    def files_loading(self, names: tuple[str, ...]) -> list[tuple[str, str]]:
        """(path relative to the project root, file name) for each other file of this file's
        import component whose `torch.load` paths spell out one of the file `names` (a checkpoint
        written here and read back there)."""
        if self.project is None or not self.project.contains(self.path):
            return []
        found = []
        own = self.project.real(self.path)
        for where in self._summaries.mentioning(self.path, names):
            if where == own:
                continue
            # a call resolves to `torch.load` (`LOADS`) only where the code spells `load` (as
            # `torch.load`, `from torch import load as read`, `from torch import *` and `load(...)`):
            # a file that spells no `load` has no `loaded_files`, and is not parsed to find none
            # (timm's eva.py, 136 kB, held a saved file's name in a comment)
            if not any(self._summaries.spelled(where, name.rsplit(".", 1)[-1]) is not False for name in LOADS):
                continue
            summary = self._summaries.file_summary(where)
            shared = set(names) & summary.loaded_files if summary is not None else set()
            if shared:
                found.append((_relative(self.project, where), sorted(shared)[0]))
        return found

    def instance_builds(self, class_name: str):
        """`Summaries.instance_builds` of this file's class `class_name` (paths relative to the
        project root); None when this file is not checked as part of a project or the family of
        subclasses is too large to follow."""
        if self.project is None or not self.project.contains(self.path):
            return None
        found = self._summaries.instance_builds(self.path, class_name)
        if found is None:
            return None
        builds, subclasses = found
        return ([(_relative(self.project, where), b) for where, b in builds],
                [(_relative(self.project, where), c) for where, c in subclasses])

    def whole_project(self) -> bool:
        """The run checks every file of the project (`Project.checks_everything`): a file that can
        import this one is in its import component."""
        return self.project is not None and self.project.contains(self.path) and self.project.checks_everything()

    def files_mentioning(self, *words: str) -> list[str] | None:
        """The project files (paths relative to its root) that this file's update can be split
        with (`Summaries.mentioning`) whose text holds one of `words`; None when the file is
        checked on its own (no project: what other files hold is unknown)."""
        if self.project is None or not self.project.contains(self.path):
            return None
        return [_relative(self.project, where) for where in self._summaries.mentioning(self.path, words)]

    def classes_mentioning(self, *words: str) -> list[tuple[str, ClassSummary]] | None:
        """(file, class) for the module-level classes of the files of `files_mentioning(*words)`
        (this one included): the classes a model built from a name chosen at run time can be
        (`get_class(cfg.model_class)(conf)`); None when the file is checked on its own."""
        if self.project is None or not self.project.contains(self.path):
            return None
        found = []
        for where in self._summaries.mentioning(self.path, words):
            summary = self._summaries.file_summary(where)
            if summary is not None:
                found += [(_relative(self.project, where), klass) for klass in summary.classes.values()]
        return found

    def only_imported_elsewhere(self, name: str) -> bool:
        """No other file of the project can run this file's module-level `name`: the run checks the
        whole project, and every other file whose text holds `name` holds it only as a name an
        import statement brings in unaliased (`from data.sets import build`), in comments, or as
        part of a longer word: no call, attribute (`sets.build(...)`), other read, alias or string
        (`getattr(sets, "build")`) in any of them."""
        if not self.whole_project():
            return False
        own = self.project.real(self.path)
        for where in self._summaries.mentioning(self.path, (name,)):
            if self.project.real(where) == own:
                continue
            summary = self._summaries.file_summary(where)
            index = summary.index if summary is not None else None
            if index is None:
                return False  # a file that cannot be parsed: what it does with the name is unknown
            for node in index.parents:
                if isinstance(node, (cst.SimpleString, cst.FormattedStringText)) and name in str(
                        getattr(node, "value", "")):
                    return False
                if isinstance(node, cst.Name) and node.value == name and not _imported_unaliased(index, node):
                    return False
        return True

    def named_by_no_other_file(self, name: str) -> bool:
        """No other file of the project can reach this file's module-level `name`: the run checks
        the whole project, and every other file whose text holds `name` holds it only where it
        means something else: its own definition or binding of the name (`def save_checkpoint` of
        its own), an import of it that resolves to another module (`from utils import
        save_checkpoint`), or an attribute of a module that is not this one (`utils.save_checkpoint`)
        or of an object (`self.save_checkpoint`, a method). A string holding it (`getattr(m,
        "name")`), a star import, an import of it from this module, an attribute of this module, or
        a read of the name the file does not bind itself, may reach it."""
        if not self.whole_project():
            return False
        own = self.project.real(self.path)
        for where in self._summaries.mentioning(self.path, (name,)):
            if self.project.real(where) == own:
                continue
            summary = self._summaries.file_summary(where)
            index = summary.index if summary is not None else None
            if index is None:
                return False
            if not self._means_another(index, str(where), name, own):
                return False
        return True

    def _means_another(self, index: FileIndex, where: str, name: str, own: Path) -> bool:
        """Every occurrence of `name` in the file `index` (at `where`) means another object than the
        module-level `name` of the file `own` (see `named_by_no_other_file`)."""

        def ours(qualname: str | None) -> bool:
            if not qualname:
                return True  # not known: it may be
            found = self.project.find_module(qualname, where)
            return found is not None and self.project.real(found[0]) == own

        for node in index.parents:
            if isinstance(node, (cst.SimpleString, cst.FormattedStringText)) and name in str(
                    getattr(node, "value", "")):
                return False
            if isinstance(node, cst.ImportStar):
                statement = index.parent(node)
                module = dotted_name(statement.module) if isinstance(statement, cst.ImportFrom) \
                    and statement.module is not None else ""
                at = index.place.get(statement, -1)
                if any(b.kind in ("def", "class", "assign") and index.place.get(b.node, -1) > at
                       for b in index.module_scope.bindings.get(name, ())):
                    continue  # the file's own `def` of the name after it replaces what it brought
                if not module or statement.relative or self.project.find_module(module + ".x", where) is not None:
                    return False  # every name of a project module (which may be this one, or pass it on)
                continue  # `from apex.fp16_utils import *`: a library's names
            if isinstance(node, cst.Attribute) and node.attr.value == name:
                root = node.value
                while isinstance(root, cst.Attribute):
                    root = root.value
                if not isinstance(root, cst.Name):
                    return False  # `f().name`: what holds it is not known
                if root.value in ("self", "cls"):
                    continue  # a method of the object, or of one it holds
                scope = index.scope_at(node)
                bound = scope.lookup(root.value)
                if not bound:
                    return False  # a name the file does not bind (a star import's, a global)
                if any(b.kind == "import" for b in bound) and ours(index.resolve(node.value, scope)):
                    return False  # an attribute of a module that may be this one
                continue  # an attribute of another module, or of an object the file builds or is handed
            if isinstance(node, cst.Name) and node.value == name:
                parent = index.parent(node)
                if isinstance(parent, cst.Attribute) and parent.attr is node:
                    continue  # read above
                if isinstance(parent, cst.ImportAlias):
                    statement = index.parent(parent)
                    while statement is not None and not isinstance(statement, (cst.Import, cst.ImportFrom)):
                        statement = index.parent(statement)
                    if isinstance(statement, cst.ImportFrom):
                        base = dotted_name(statement.module) if statement.module is not None else ""
                        base = "." * len(statement.relative) + (base or "")
                        if ours(f"{base}.{name}" if base and not base.endswith(".") else f"{base}{name}"):
                            return False
                    continue  # `import save_checkpoint` names a module
                bound = index.scope_at(node).lookup(name)
                if not bound or any(b.kind == "import" and ours(b.qualname) for b in bound):
                    return False
        return True

    def readers_mentioning(self, word: str) -> list[str] | None:
        """`files_mentioning(word)` less the other files that cannot read this module's names: a
        file that imports it spells its module name (`import run`, `from run import x`,
        `importlib.import_module("run")`: the file's stem, or its folder's for an `__init__.py`);
        one holding a star import (`from tools import *`, which may pass the names on) counts
        whatever it spells."""
        if self.project is None or not self.project.contains(self.path):
            return None
        own = self.project.real(self.path)
        stem = own.parent.name if own.stem == "__init__" else own.stem
        found = []
        for where in self._summaries.mentioning(self.path, (word,)):
            text = self.project.source(where) or ""
            if self.project.real(where) == own or stem in text or "import *" in text:
                found.append(_relative(self.project, where))
        return found

    def configured_values(self, index: FileIndex, expr: cst.BaseExpression,
                          scope: Scope) -> list[cst.BaseExpression] | None:
        """The values a project module's top-level code gives the setting `expr` names, an attribute
        path on an object that module defines (`cfg.PG.VAL.BATCH_SIZE` with `from config import
        cfg`, `config.py` writing `__C.PG.VAL.BATCH_SIZE = 1` where `cfg = __C`). None when it cannot
        be told: no such module or object, the object handed to or changed by a call of the module
        (`__C.update(...)`, `merge(__C, yaml)`), a write of the setting inside a function, or a file
        of the project that can import it writing a setting of that name (`cfg.PG.VAL.BATCH_SIZE =
        args.bs`): what every run reads is then not the module's text alone."""
        chain = []
        head = expr
        while isinstance(head, cst.Attribute):
            chain.append(head.attr.value)
            head = head.value
        if not isinstance(head, cst.Name) or not chain or self.project is None \
                or not self.project.contains(self.path) or not self.project.checks_everything():
            return None
        chain.reverse()
        qualname = index.resolve(head, scope)
        if qualname is None or not any(b.kind == "import" for b in scope.lookup(head.value)):
            return None
        found = self.project.find_module(qualname, self.path)
        if found is None or len(found[1]) != 1:
            return None
        path, (name,) = found
        summary = self._summaries.file_summary(path)
        module_index = summary.index if summary is not None else None
        if module_index is None:
            return None
        aliases = {name}
        for statement in module_index.module.body:  # `cfg = __C` / `__C = cfg`
            for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.Assign) and isinstance(small.value, cst.Name):
                    targets = {t.target.value for t in small.targets if isinstance(t.target, cst.Name)}
                    if targets & aliases or small.value.value in aliases:
                        aliases |= targets | {small.value.value}
        tail = ".".join(chain)
        values = []
        for node in module_index.subtree(module_index.module):
            kind = type(node)
            if kind is cst.Assign or kind is cst.AugAssign or kind is cst.AnnAssign:
                targets = [t.target for t in node.targets] if kind is cst.Assign else [node.target]
                for target in targets:
                    text = dotted_name(target) or ""
                    root, _, rest = text.partition(".")
                    if root in aliases and rest == tail:
                        if kind is not cst.Assign or module_index.function_at(node) is not None:
                            return None  # changed in place, or written where a call decides
                        values.append(node.value)
            elif kind is cst.Call:
                func = node.func
                while isinstance(func, cst.Attribute):
                    func = func.value
                if isinstance(func, cst.Name) and func.value in aliases and isinstance(node.func, cst.Attribute) \
                        or any(isinstance(a.value, cst.Name) and a.value.value in aliases for a in node.args):
                    return None  # `__C.update(...)`, `merge_into(__C, ...)`: filled by a call
        if not values:
            return None
        last = chain[-1]
        written = re.compile(rf"\.{re.escape(last)}\s*(=[^=]|[-+*/]=)|setattr\(")
        for where in self._summaries.mentioning(self.path, (last,)):
            if self.project.real(where) == self.project.real(path):
                continue
            if written.search(self.project.source(where) or ""):
                return None
        return values

    def constructor_role(self, index: FileIndex, class_name: str, attr: str) -> str | None:
        """The role the callers that build `class_name` give the `__init__` parameter that
        `self.<attr>` is set from, when they all agree."""
        summary = self.own(index).klass(class_name)
        param = summary.init_attrs.get(attr) if summary is not None and summary.trains else None
        if param is None:
            return None  # only classes that drive training are worth finding every construction of
        if self.project is not None and self.project.contains(self.path):
            built = self._summaries.constructions(self.path, class_name)
        else:
            built = [c for c in self.own(index).constructions_of(class_name) if c.callee == class_name]
        found = {c.role_for(summary.params, param) for c in built}
        return found.pop() if len(found) == 1 else None


def _head_is_import(expr: cst.BaseExpression, scope: Scope) -> bool:
    """The leftmost name of `a.b.c` is bound by an import (so the dotted name is a module path)."""
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return isinstance(expr, cst.Name) and any(b.kind == "import" for b in scope.lookup(expr.value))


_SUMMARIES: weakref.WeakKeyDictionary[Project, Summaries] = weakref.WeakKeyDictionary()


def summaries_of(project: Project) -> Summaries:
    """The summaries of `project`'s files, one `Summaries` per project object (a worker process's
    copy of the project gets its own)."""
    found = _SUMMARIES.get(project)
    if found is None:
        found = _SUMMARIES[project] = Summaries(project)
    return found


def _relative(project: Project, path: Path) -> str:
    try:
        return path.relative_to(project.root).as_posix()
    except ValueError:
        return path.as_posix()


def _imported_unaliased(index: FileIndex, node: cst.Name) -> bool:
    """`node` is the name an `import`/`from ... import` statement brings in under its own name."""
    parent = index.parent(node)
    if not isinstance(parent, cst.ImportAlias) or parent.name is not node or parent.asname is not None:
        return False
    return isinstance(index.parent(parent), (cst.Import, cst.ImportFrom))
