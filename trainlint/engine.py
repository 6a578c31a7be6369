"""The one API: findings for a source string, a path, or many paths.

The CLI, the reporters, the language server and the tests all go through here. The engine knows
nothing about configuration files or output formats: it takes `Settings` and returns
`FileResult`s.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import os
import re
import sys
import tokenize
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterable, Iterator

import libcst as cst

from trainlint.cache import ResultCache
from trainlint.context import FileContext
from trainlint.finding import Edit, FileResult, Finding, Fix, Severity
from trainlint.model.project import Project
from trainlint.positions import Positions
from trainlint.rule import FixSpec, Report, Rule, registry
from trainlint.settings import SYNTAX_ERROR_CODE, Settings
from trainlint.suppress import NOQA_CODES, apply_suppressions


class UnreadableFile(Exception):
    """A path that cannot be read at all (missing, a directory, no permission)."""


_RECURSION_LIMIT = 20_000


def _describe(exc: BaseException) -> str:
    """`Type: first line of the message`, safe even when str(exc) itself fails or is huge."""
    try:
        text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    except Exception:
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _syntax_error(path: str, line: int, column: int, message: str) -> Finding:
    return Finding(path, line, column, line, column + 1, SYNTAX_ERROR_CODE, "syntax-error",
                   Severity.ERROR, message)


def decode_source(data: bytes, path: str) -> tuple[str | None, Finding | None]:
    """Bytes to text honouring PEP 263 coding cookies; undecodable bytes or NUL bytes are TL000."""
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        column = nul - (data.rfind(b"\n", 0, nul) + 1) + 1
        return None, _syntax_error(path, line, column, "source contains a NUL byte")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding), None
    except SyntaxError as err:  # an unknown coding cookie
        return None, _syntax_error(path, err.lineno or 1, 1, f"cannot decode: {err.msg}")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        return None, _syntax_error(path, line, column,
                                   f"cannot decode byte 0x{data[err.start]:02x} as {err.encoding}")


def _parse(source: str, path: str) -> tuple[cst.Module | None, Finding | None]:
    try:
        return cst.parse_module(source), None
    except cst.ParserSyntaxError as err:
        # CPython's own message ("'(' was never closed", "Missing parentheses in call to 'print'")
        # says more than LibCST's token list, and points where the user expects.
        try:
            ast.parse(source, filename=path)
        except SyntaxError as py_err:
            return None, _syntax_error(path, py_err.lineno or 1, max(py_err.offset or 1, 1),
                                       f"cannot parse: {py_err.msg}")
        except (ValueError, RecursionError, MemoryError):
            pass
        message = re.sub(r"^parser error: error at \d+:\d+: ", "", err.message)
        return None, _syntax_error(path, err.raw_line, err.raw_column + 1, f"cannot parse: {message}")
    except RecursionError:
        return None, _syntax_error(path, 1, 1, "cannot parse: nesting too deep")


def _rules_for(source: str, codes: frozenset[str], imported: Callable[[], list[str]] = list) -> list[Rule]:
    """Selected rules whose trigger words occur in the text, or in the text of a project file it
    imports (the cheap pre-filter)."""
    rules = []
    for code, rule_cls in registry().items():
        if code in codes and code not in NOQA_CODES and (rule_cls.may_match(source) or (
                any(word in source for word in rule_cls.imported_triggers)
                and any(rule_cls.may_match(text) for text in imported()))):
            rules.append(rule_cls())
    return rules


def _to_fix(spec: FixSpec, module: cst.Module, positions: Positions) -> Fix:
    edits = []
    for node, replacement in spec.replacements:
        line, column, end_line, end_column = positions.span(node)
        content = replacement if isinstance(replacement, str) else module.code_for_node(replacement)
        edits.append(Edit(line, column, end_line, end_column, content))
    return Fix(spec.title, spec.safe, tuple(edits))


def lint_source(source: str | bytes, path: str = "<stdin>", settings: Settings | None = None,
                project: Project | None = None) -> FileResult:
    """Check one file's contents. Never raises for bad input or a failing rule.

    With a `project`, names the file imports from the project's other files are looked up in
    their summaries (those files are read, never reported on).
    """
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

    imported = functools.cache(lambda: project.imported_sources(path, source)) if project is not None else list
    rules = _rules_for(source, codes, imported)
    if not rules:
        # Nothing to check, but a broken file is still reported; ast is far cheaper than LibCST,
        # and LibCST has the last word where the grammars differ.
        try:
            ast.parse(source, filename=path)
            result.findings = apply_suppressions([], source, path, codes)
            return result
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    summary = project.cached_summary(digest) if project is not None else None
    if summary is not None and summary.index is not None:
        module, error = summary.index.module, None  # parsed already, when a file importing it was checked
    else:
        module, error = _parse(source, path)
    if error is not None:
        if SYNTAX_ERROR_CODE in codes:
            result.findings.append(error)
        return result
    if not rules:
        result.findings = apply_suppressions([], source, path, codes)
        return result

    ctx = FileContext(path, source, module, settings.min_torch_version, project, summary)
    reports: list[Report] = []
    for rule in rules:
        try:
            reports.extend(rule.check(ctx))
        except Exception as exc:  # a rule's bug must not stop the other rules or files
            codes = codes - {rule.code}  # its `# noqa` codes are not unused: it did not finish
            result.errors.append(f"internal error in {rule.code} ({rule.name}) while checking {path}: "
                                 f"{_describe(exc)}")
    if not reports:
        result.findings = apply_suppressions([], source, path, codes)
        return result

    # LibCST generates code recursively; deeply chained expressions need more than Python's default
    # 1,000 frames. Python 3.11 frames of pure-Python calls do not grow the C stack.
    if sys.getrecursionlimit() < _RECURSION_LIMIT:
        sys.setrecursionlimit(_RECURSION_LIMIT)
    positions = Positions(module, ctx.index.parents)
    seen = set()
    findings = []
    for report in reports:
        rule = report.rule
        try:
            line, column, end_line, end_column = positions.span(report.node)
            fix = _to_fix(report.fix, module, positions) if report.fix else None
        except Exception as exc:
            result.errors.append(f"internal error in {rule.code} ({rule.name}) while checking {path}: "
                                 f"cannot locate the reported node: {_describe(exc)}")
            continue
        key = (rule.code, line, column)
        if key in seen:  # two paths through the model reaching the same node report once
            continue
        seen.add(key)
        message = " ".join(report.message.split())  # quoted code may span lines; a message is one line
        findings.append(Finding(path, line, column, end_line, end_column, rule.code, rule.name,
                                rule.severity, message, fix))
    result.findings = sorted(apply_suppressions(findings, source, path, codes),
                             key=lambda f: f.sort_key)
    return result


def lint_path(path: str, settings: Settings | None = None, project: Project | None = None) -> FileResult:
    """Check one file on disk. An unreadable path is an error in the result, not an exception."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as err:
        result = FileResult(path)
        result.errors.append(f"cannot read {path}: {err.strerror or err}")
        return result
    return lint_source(data, path, settings, project)


def _lint_many(args: tuple[list[str], Settings, Project | None]) -> list[FileResult]:
    paths, settings, project = args
    return [lint_path(p, settings, project) for p in paths]


def lint_paths(paths: Iterable[str], settings: Settings | None = None, jobs: int = 1,
               cache: ResultCache | None = None, project: Project | None = None) -> Iterator[FileResult]:
    """Check many files, in `jobs` worker processes, reusing cached results when given a cache.

    The files are checked as one project (`Project.for_paths`, unless one is given). Results come
    back in the order of `paths`.
    """
    settings = settings or Settings()
    paths = list(paths)
    if project is None and paths:
        project = Project.for_paths(paths)
    results: dict[str, FileResult] = {}
    todo: list[str] = []
    depends = {p: project.dependency_digest(p) for p in paths} if cache and project else {}
    for path in paths:
        cached = cache.get(path, settings, depends.get(path, "")) if cache else None
        if cached is not None:
            results[path] = cached
        else:
            todo.append(path)
    jobs = max(1, min(jobs, os.cpu_count() or 1, len(todo)))
    if jobs == 1 or len(todo) < 8:
        fresh = [lint_path(p, settings, project) for p in todo]
    else:
        size = max(1, len(todo) // (jobs * 4))
        chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            fresh = [r for batch in pool.map(_lint_many, [(c, settings, project) for c in chunks]) for r in batch]
    for result in fresh:
        results[result.path] = result
        if cache and not result.errors:
            cache.put(result.path, settings, result, depends.get(result.path, ""))
    for path in paths:
        yield results[path]

