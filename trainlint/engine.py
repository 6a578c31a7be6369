"""The one API: findings for a source string, a path, or many paths.

The CLI, the reporters, the language server and the tests all go through here. The engine knows
nothing about configuration files or output formats: it takes `Settings` and returns
`FileResult`s.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import hashlib
import os
import sys
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from trainlint import guard
from trainlint.budget import over_budget
from trainlint.cache import ResultCache, _code_fingerprint
from trainlint.finding import PROVEN, UNKNOWN, Edit, Evidence, FileResult, Finding, Fix, Severity
from trainlint.gate import RuleHead
from trainlint.notebook import Notebook, NotebookError, is_notebook, notebook_error, read_notebook
from trainlint.parsing import LibCSTRefused, Parser, _syntax_error, decode_source, normalize_identifiers
from trainlint.positions import split_lines
from trainlint.reader.files import SkippedFile, UnreadableFile, read_source
from trainlint.rules import heads, load
from trainlint.settings import SYNTAX_ERROR_CODE, Settings
from trainlint.suppress import NOQA_CODES, apply_suppressions

if TYPE_CHECKING:
    import libcst as cst

    from trainlint.spans import Positions
    from trainlint.reader.project import Project
    from trainlint.rule import FixSpec, Report, Rule

# What only a file some rule reads needs (LibCST, the models, the rules' modules) is imported
# when such a file comes: a run over files no rule can fire in never imports them (issue 38).

_FRESH = Parser()


def _describe(exc: BaseException) -> str:
    """`Type: first line of the message`, safe even when str(exc) itself fails or is huge."""
    try:
        text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    except Exception:
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _rules_for(source: str, codes: frozenset[str],
               imported: Callable[[], list[str]] = list) -> tuple[list[RuleHead], list[RuleHead]]:
    """The cheap pre-filter: the heads (`trainlint.rules.heads`: no rule module imported) of the
    selected rules whose trigger words occur in the text, and apart those that may also draw on a
    project file it imports (their words occur in such a file; marked `via_imports`). The gate
    reads this file's parse alone: the second list is gated by what this file must hold even so
    (`Rule.imported_gate`)."""
    own, via_imports = [], []
    found: dict[str, bool] = {}  # the words searched for in `source` so far
    for code, head in heads().items():
        if code not in codes or code in NOQA_CODES:
            continue
        if (any(word in source for word in head.imported_triggers)
                and any(head.may_match(text) for text in imported())):
            via_imports.append(dataclasses.replace(head, via_imports=True))
        elif head.may_match(source, found):
            own.append(head)
    return own, via_imports


def _to_fix(spec: FixSpec, module: cst.Module, positions: Positions, lines: list[str]) -> Fix | None:
    """The edits of a rule's fix; None when a line edit's statement does not stand alone on its
    lines (`if x: a()`, `a(); b()`): no fix rather than a wrong one."""
    edits = []
    newline = module.default_newline  # every line a fix writes ends as the file's lines do
    for node, replacement in spec.replacements:
        line, column, end_line, end_column = positions.span(node)
        content = newline.join(split_lines(replacement)) if isinstance(replacement, str) \
            else module.code_for_node(replacement)
        edits.append(Edit(line, column, end_line, end_column, content))
    for kind, statement, code in spec.lines:
        line, column, end_line, end_column = positions.span(statement)
        indent, tail = lines[line - 1][:column - 1], lines[end_line - 1][end_column - 1:].strip()
        if indent.strip() or (tail and not tail.startswith("#")):
            return None
        parts = split_lines(code)  # at line endings only: never at a form feed or U+2028 in a string
        parts = parts[:-1] if parts[-1] == "" else parts
        text = "".join(f"{indent}{part}{newline}" if part.strip() else newline for part in parts)
        at_end = end_line >= len(lines)  # the statement's line is the last and has no newline
        if kind == "before":
            edits.append(Edit(line, 1, line, 1, text))
        elif kind == "after" and at_end:
            end = len(lines[end_line - 1]) + 1
            edits.append(Edit(end_line, end, end_line, end, newline + text.removesuffix(newline)))
        elif kind == "after":
            edits.append(Edit(end_line + 1, 1, end_line + 1, 1, text))
        elif at_end:
            edits.append(Edit(line, 1, end_line, len(lines[end_line - 1]) + 1, text.removesuffix(newline)))
        else:
            edits.append(Edit(line, 1, end_line + 1, 1, text))
    return Fix(spec.title, spec.safe, tuple(edits))


def lint_source(source: str | bytes, path: str = "<stdin>", settings: Settings | None = None,
                project: Project | None = None, *, gate: bool = True, parser: Parser = _FRESH,
                view=None, notebook: bool | None = None) -> FileResult:
    """Check one file's contents. Never raises for bad input or a failing rule.

    A notebook (`notebook`, by default: a path ending in `.ipynb`) is checked as its code cells
    joined into one module (`trainlint.notebook`); its findings count lines within their cell
    and name it (`Finding.cell`). `notebook=False` checks `source` as Python whatever the path:
    the joined module itself, with its own lines (what `--fix` edits).

    With a `project`, names the file imports from the project's other files are looked up in
    their summaries (those files are read, never reported on).

    `gate=False` skips the gate (`trainlint.gate`): every rule whose text triggers occur runs, the
    reference the gate is tested against.

    `view`: `source` is a slice of an open document (`trainlint.document.View`): the rules see the
    whole document's text and the file facts the rest of it contributed, and the view observes
    the check's context once the rules ran."""
    if notebook if notebook is not None else is_notebook(path):
        return _lint_notebook(source, path, settings, project, gate)
    # One file's trees (Python's, LibCST's, the index) are hundreds of thousands of objects without
    # cycles, freed by reference counting when the check ends; the cyclic collector would traverse
    # them again and again while they are built (a tenth of a check). It pauses for one file, and
    # collects whatever cycles the check left once it resumes.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _lint_source(source, path, settings, project, gate, parser, view)
    finally:
        if collecting:
            gc.enable()


def _lint_source(source: str | bytes, path: str, settings: Settings | None, project: Project | None,
                 gate: bool, parser: Parser, view) -> FileResult:
    settings = settings or Settings()
    codes = settings.codes_for_path(path)
    result = FileResult(path)
    digest = None
    if project is not None:  # the key of this content's summary, if an importer made one
        raw = source if isinstance(source, bytes) else source.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(raw).hexdigest()
    if isinstance(source, bytes):
        text, error = decode_source(source, path)
        if error is not None:
            if SYNTAX_ERROR_CODE in codes:
                result.findings.append(error)
            return result
        source = text
    elif "\0" in source:
        _, error = decode_source(source.encode("utf-8", "surrogatepass"), path)
        if SYNTAX_ERROR_CODE in codes:
            result.findings.append(error)
        return result
    # Identifiers as Python reads them (NFKC): `torch.ｌｏａｄ` is `torch.load` to the pre-filter, the
    # gate and every rule; the findings go back to the columns as written.
    source, columns = normalize_identifiers(source)
    _check_text(source, path, settings, project, gate, parser, view, codes, result, digest)
    if columns is not None:
        result.findings = [columns.restore(finding) for finding in result.findings]
    return result


def _check_text(source: str, path: str, settings: Settings, project: Project | None, gate: bool, parser: Parser,
                view, codes: frozenset[str], result: FileResult, digest: str | None) -> FileResult:
    """`_lint_source` on the decoded text: the findings and errors go into `result`."""
    chosen = view.rules if view is not None else None  # a slice runs its document's (`document_rules`)
    rules = list(chosen) if chosen is not None else _prefiltered(source, path, codes, project)
    # A file no rule's trigger words occur in is only compiled: the nesting bound guards LibCST,
    # which is not run on it. The others take CPython's parse first, at a tenth of LibCST's cost:
    # it is the gate's, which drops the rules that cannot fire here, and the guard's
    # (trainlint.guard), which makes a TL000 of what CPython's compiler refuses and of nesting
    # LibCST would crash on, before any rule runs. Where only CPython's grammar objects (newer
    # syntax than this interpreter's), LibCST has the last word.
    if not rules and parser.compiles(source, path):
        result.findings = apply_suppressions([], source, path, codes)
        return result
    # the trees to come would take more memory than the file's budget (`trainlint.budget`): declined
    # before any is built (a slice's document was measured whole by the language server)
    notice = over_budget(source, path) if view is None else None
    if notice is not None:
        result.skipped, result.checked = notice, False
        return result
    tree = parser.python_tree(source, path)
    if rules and gate and tree is not None and chosen is None:
        # a gate reads this file only; a file it leaves no rule still takes the whole guard, as
        # without the gate (a chain nested too deep for LibCST is the same TL000 either way)
        rules = parser.gated(rules, tree)
    problem = parser.guard_check(source, path, tree)
    if problem is not None and problem.final:
        if SYNTAX_ERROR_CODE in codes:
            result.findings.append(_syntax_error(path, problem.line, problem.column, problem.message,
                                                 source, problem.end_column))
        return result
    if not rules and problem is None:
        result.findings = apply_suppressions([], source, path, codes)
        return result
    from trainlint.model.linker import summaries_of

    summary = summaries_of(project).cached_summary(digest) if project is not None else None
    if summary is not None and summary.index is not None:
        module, error = summary.index.module, None  # parsed already, when a file importing it was checked
    else:
        try:
            module, error = parser.libcst_module(source, path, problem)
        except LibCSTRefused as refused:
            result.skipped, result.checked = str(refused), False
            return result
    if error is not None:
        if SYNTAX_ERROR_CODE in codes:
            result.findings.append(error)
        return result
    if not rules:
        result.findings = apply_suppressions([], source, path, codes)
        return result
    from trainlint.context import FileContext
    from trainlint.spans import Positions

    if chosen is None:
        rules = load(rules)  # the rules that can fire: only their modules are imported

    # LibCST generates code (rules quote it, positions are computed by it) recursively: the guard
    # bounds nesting at guard.MAX_DEPTH, which needs more than Python's default 1,000 frames.
    # Python 3.11 frames of pure-Python calls do not grow the C stack.
    if sys.getrecursionlimit() < guard.RECURSION_LIMIT:
        sys.setrecursionlimit(guard.RECURSION_LIMIT)
    ctx = FileContext(path, source, module, settings.min_torch_version, project, summary,
                      *((view.document, view.outside_facts) if view is not None else ()),
                      digest=digest if view is None else None)
    reports: list[Report] = []
    for rule in rules:
        try:
            reports.extend(rule.check(ctx))
        except Exception as exc:  # a rule's bug must not stop the other rules or files
            codes = codes - {rule.code}  # its `# noqa` codes are not unused: it did not finish
            result.errors.append(f"internal error in {rule.code} ({rule.name}) while checking {path}: "
                                 f"{_describe(exc)}")
    if view is not None:
        try:
            view.observe(ctx)
        except Exception as exc:
            result.errors.append(f"internal error while gathering the file facts of {path}: {_describe(exc)}")
    if not reports:
        result.findings = apply_suppressions([], source, path, codes)
        return result

    lines = split_lines(source)
    positions = Positions(module, ctx.index.parents, tree, lines)
    seen = set()
    findings = []
    for report in reports:
        rule = report.rule
        try:
            line, column, end_line, end_column = positions.span(report.node)
            fix = _to_fix(report.fix, module, positions, lines) if report.fix else None
        except Exception as exc:
            result.errors.append(f"internal error in {rule.code} ({rule.name}) while checking {path}: "
                                 f"cannot locate the reported node: {_describe(exc)}")
            continue
        key = (rule.code, line, column)
        if key in seen:  # two paths through the model reaching the same node report once
            continue
        message = " ".join(report.message.split())  # quoted code may span lines; a message is one line
        severity = report.severity or rule.severity
        guessed = [p for p in report.evidence if p.required and not p.proven]
        if guessed:
            # a required premise rests on a name or a guess: not reported by default, and never
            # at the rule's own severity (RULES.md, "Evidence")
            if not settings.include_unproven:
                continue
            message = f"unproven ({guessed[0].text}): {message}"
            severity = Severity.INFO
        evidence = tuple(Evidence(p.text, PROVEN if p.proven else UNKNOWN, p.kind, path,
                                  _premise_line(positions, p.node, line)) for p in report.evidence)
        seen.add(key)
        findings.append(Finding(path, line, column, end_line, end_column, rule.code, rule.name,
                                severity, message, fix, evidence))
    result.findings = sorted(apply_suppressions(findings, source, path, codes),
                             key=lambda f: f.sort_key)
    return result


def read_notebook_source(source: str | bytes, path: str) -> tuple[Notebook | None, Finding | None]:
    """The notebook in a file's bytes (or text), or the TL000 finding saying why it is none."""
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8-sig")  # JSON is UTF-8
        except UnicodeDecodeError as err:
            line = source.count(b"\n", 0, err.start) + 1
            column = err.start - (source.rfind(b"\n", 0, err.start) + 1) + 1
            return None, notebook_error(path, NotebookError(f"not valid JSON: cannot decode byte "
                                                            f"0x{source[err.start]:02x} as UTF-8", line, column))
    try:
        return read_notebook(source), None
    except NotebookError as err:
        return None, notebook_error(path, err)


def _lint_notebook(source: str | bytes, path: str, settings: Settings | None, project: Project | None,
                   gate: bool) -> FileResult:
    """A notebook's findings: its code cells checked as one module, each finding in its cell's lines."""
    settings = settings or Settings()
    notebook, error = read_notebook_source(source, path)
    if notebook is None:  # not JSON, not a notebook: never a pass
        result = FileResult(path)
        if SYNTAX_ERROR_CODE in settings.codes_for_path(path):
            result.findings.append(error)
        return result
    joined = notebook.joined()
    result = lint_source(joined.source, path, settings, project, gate=gate, notebook=False)
    result.findings = sorted((joined.to_cells(f) for f in result.findings), key=lambda f: f.sort_key)
    return result


def _premise_line(positions: Positions, node: cst.CSTNode, fallback: int) -> int:
    """The line of the code that proves a premise; a node that is not part of this module (a
    project file's, one made up to ask a question with) is stated at the finding's own line
    rather than costing the finding."""
    try:
        return positions.span(node)[0]
    except Exception:
        return fallback


def _prefiltered(source: str, path: str, codes: frozenset[str], project: Project | None) -> list[RuleHead]:
    """The rules `_rules_for` lets through for the file at `path`, with those its imports draw in."""
    imported = functools.cache(lambda: project.imported_sources(path, source)) if project is not None else list
    rules, via_imports = _rules_for(source, codes, imported)
    return rules + via_imports


def document_rules(source: str, path: str, settings: Settings, project: Project | None, parser: Parser) -> list[Rule]:
    """The rules a check of the whole `source` runs after the pre-filter and the gate: a check of
    a slice of it runs these (what a rule needs may be in the rest of the document)."""
    source, _ = normalize_identifiers(source)  # as `lint_source` reads it
    rules = _prefiltered(source, path, settings.codes_for_path(path), project)
    tree = parser.python_tree(source, path)
    return load(parser.gated(rules, tree) if rules and tree is not None else rules)


def _unchecked(path: str, err: Exception) -> FileResult:
    result = FileResult(path, checked=False)
    if isinstance(err, SkippedFile):
        result.skipped = str(err)
    else:
        result.errors.append(str(err))
    return result


def lint_path(path: str, settings: Settings | None = None, cache: ResultCache | None = None,
              project: Project | None = None) -> FileResult:
    """Check one file on disk. An unreadable or skipped path is said so in the result, not raised.

    With a cache, the key is computed from exactly the bytes that are linted and, in a project,
    the digest of every project file the result may depend on (`Project.dependency_digest`;
    when it has none to give, the result is neither looked up nor stored).
    """
    settings = settings or Settings()
    if cache is not None and project is not None:
        # a file whose stat stamp is the one recorded when its hash was taken is not read: its
        # result is looked up by that hash (a miss reads it, and keys the result by its bytes)
        known = project.unchanged_digests(path)
        if known is not None:
            cached = cache.get_by_hash(known[0], path, settings, known[1])
            if cached is not None:
                return cached
    try:
        data = read_source(path, settings.max_file_size)
    except (UnreadableFile, SkippedFile) as err:
        return _unchecked(path, err)
    depends = ""
    if cache is not None and project is not None:
        depends = project.dependency_digest(path, data)
        if depends is None:
            cache = None
    if cache is not None:
        cached = cache.get(data, path, settings, depends)
        if cached is not None:
            return cached
    result = lint_source(data, path, settings, project)
    if cache is not None and not result.errors and result.checked:  # a declined file is declined again
        cache.put(data, path, settings, result, depends)
    return result


# what a worker process checks with, sent once per worker rather than with every file
_worker: tuple[Settings, ResultCache | None, Project | None] = (Settings(), None, None)


def _start_worker(settings: Settings, cache: ResultCache | None, project: Project | None) -> None:
    global _worker
    _worker = (settings, cache, project)


def _lint_in_worker(path: str) -> FileResult:
    return lint_path(path, *_worker)


def _lint_chunk_in_worker(paths: list[str]) -> list[FileResult]:
    return [lint_path(path, *_worker) for path in paths]


def _chunks(paths: list[str], jobs: int, parts: int = 8) -> list[list[str]]:
    """The tasks of a parallel run: runs of neighbouring files (in path order, so a folder's files
    and its neighbours' stay together) of about 1/`parts` of a worker's share of the bytes each,
    the largest runs first.

    A worker keeps the summaries of the project files it parsed (`Summaries`), and neighbouring
    files ask about the same modules (accelerate's scripts all ask about `accelerator.py`): one
    worker checking them in a row parses each of those once, where files dealt out one by one,
    largest first, made every worker parse it. On lightning, accelerate and timm with -j2 the
    workers' LibCST parses went from 4.46 MB (207 parses; one process: 3.40 MB, 173) to 3.6-3.8 MB.
    The runs stay small enough, and come largest first, for the workers to end together. Which
    worker checks a file changes no finding: a file's findings depend on the project's files,
    which every worker reads the same (summaries are kept by content)."""
    sizes = {path: _size(path) for path in set(paths)}
    cap = max(1, sum(sizes.values()) // (parts * jobs))
    chunks: list[list[str]] = []
    chunk, size = [], 0
    for path in sorted(sizes):
        if chunk and size + sizes[path] > cap:
            chunks.append(chunk)
            chunk, size = [], 0
        chunk.append(path)
        size += sizes[path]
    if chunk:
        chunks.append(chunk)
    chunks.sort(key=lambda chunk: -sum(sizes[path] for path in chunk))
    return chunks


def _crashed(path: str) -> FileResult:
    result = FileResult(path)
    result.errors.append(f"internal error while checking {path}: the worker process checking it crashed")
    return result


def _lint_alone(path: str, settings: Settings, cache: ResultCache | None, project: Project | None) -> FileResult:
    """`path` in a process of its own: if checking it crashes the process, only it is lost."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    try:
        with ProcessPoolExecutor(max_workers=1, initializer=_start_worker, initargs=(settings, cache, project)) as pool:
            return pool.submit(_lint_in_worker, path).result()
    except BrokenProcessPool:
        return _crashed(path)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def lint_paths(paths: Iterable[str], settings: Settings | None = None, jobs: int = 1,
               cache: ResultCache | None = None, project: Project | None = None,
               done: Callable[[], None] | None = None) -> Iterator[FileResult]:
    """Check many files, in `jobs` worker processes, reusing cached results when given a cache.

    The files are checked as one project (`Project.for_paths`, unless one is given). Results come
    back in the order of `paths`. A worker that dies (LibCST's native parser can overflow its
    stack on input the guard did not foresee) loses no other file's result: the files it
    took down are checked again, each in a process of its own. `done` is called as each file's
    check ends (a progress line counts them).
    """
    settings = settings or Settings()
    done = done or (lambda: None)
    paths = list(paths)
    if project is None and paths:
        from trainlint.reader.project import Project

        project = Project.for_paths(paths, settings.max_file_size)
    jobs = max(1, min(jobs, os.cpu_count() or 1, len(paths)))
    if cache is not None and project is not None:
        # the cache keys need every checked file's imports resolved: take them from the last run
        project.load_imports(cache.directory, _code_fingerprint())
    if jobs == 1 or len(paths) < 8:
        for path in paths:
            result = lint_path(path, settings, cache, project)
            done()
            yield result
        if cache is not None and project is not None:
            project.save_imports(cache.directory, _code_fingerprint())
        return
    if project is not None:
        # found once here; the workers get them with the project. Without a cache too: every
        # worker's first question about another file (`Summaries.mentioning`) needs them, and
        # each found them again (1.7 s of CPU per worker on lightning, accelerate and timm);
        # the same deterministic map either way, so no finding changes.
        project.key_components()
    if cache is not None and project is not None:
        project.save_imports(cache.directory, _code_fingerprint())
    from concurrent.futures import ProcessPoolExecutor  # a run of one process never imports them
    from concurrent.futures.process import BrokenProcessPool

    # Runs of neighbouring files a task (`_chunks`), largest first: the gate makes most files cheap and a
    # few costly, and fixed chunks of paths would leave one worker with the costly ones at the end.
    todo = _chunks(paths, jobs)
    results: dict[str, FileResult] = {}
    retry: list[str] = []
    # The workers are forked while the tasks are submitted. What this process holds then is frozen
    # for the collector: a worker's collections would otherwise walk (and copy, page by page) the
    # whole inherited heap again and again.
    with ProcessPoolExecutor(max_workers=jobs, initializer=_start_worker, initargs=(settings, cache, project)) as pool:
        gc.freeze()
        try:
            futures = [(chunk, pool.submit(_lint_chunk_in_worker, chunk)) for chunk in todo]
        finally:
            gc.unfreeze()
        for chunk, future in futures:
            try:
                for path, result in zip(chunk, future.result()):
                    results[path] = result
                    done()
            except BrokenProcessPool:
                retry.extend(chunk)  # each checked again alone: only the file that crashes is lost
    for path in retry:
        results[path] = _lint_alone(path, settings, cache, project)
        done()
    for path in paths:
        yield results[path]
