"""`trainlint check`'s run, without click: the command line's parser (click, in trainlint.cli)
and the fast path of a plain check (trainlint.launch) both hand it the options as one namespace,
so a run that prints text imports neither click nor another reporter. Output goes through `echo`,
which writes as click.echo does (ANSI styles stripped unless colour is on; on Windows, in a Jupyter
kernel, or to a stream whose encoding cannot write Unicode, click.echo itself writes)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path, PurePath
from types import SimpleNamespace

from trainlint.sanitize import one_line, plain_text

FORMATS = ("text", "json", "github", "sarif", "lsp")
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _say(text: str, err: bool = False, nl: bool = True) -> None:
    """Print text that is not a report (a warning, the settings, a diff): file names, values and
    source in it come from the checked repository, so control characters are shown escaped and no
    line can start a CI runner's command (`trainlint.sanitize`)."""
    echo(plain_text(text), err=err, nl=nl)


def _line(message: str) -> str:
    """A message on one line: its whitespace runs (a newline too) made one space, then escaped."""
    return one_line(" ".join(message.split()))


def _fail(message: str) -> None:
    """One line on stderr, exit code 2."""
    _say(f"trainlint: error: {_line(message)}", err=True)
    raise SystemExit(EXIT_ERROR)


def echo(message: str = "", err: bool = False, nl: bool = True, color: bool | None = None) -> None:
    """`click.echo(message, err=err, nl=nl, color=color)` for text, without importing click where
    it writes the same: on a POSIX stream that can write Unicode, outside a Jupyter kernel."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:  # no standard stream attached (pythonw)
        return
    if os.name == "nt" or "ipykernel" in sys.modules or _ascii_stream(stream):
        import click

        click.echo(message, err=err, nl=nl, color=color)
        return
    out = message + "\n" if nl else message
    if not out:
        stream.flush()
        return
    strip = not _isatty(stream) if color is None else not color
    if strip and "\033" in out:
        import re

        out = re.sub(r"\033\[[;?0-9]*[a-zA-Z]", "", out)  # click's strip_ansi
    stream.write(out)
    stream.flush()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except Exception:
        return False


def _ascii_stream(stream) -> bool:
    """click re-wraps a standard stream whose encoding is ASCII (a misconfigured locale)."""
    import codecs

    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "ascii").name == "ascii"
    except LookupError:
        return False


def _split(values: tuple[str, ...]) -> list[str]:
    """Selectors from repeated and/or comma-separated options: `--select TL1,TL401 --select TL2`."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _validate_selectors(option: str, selectors: list[str]) -> list[str]:
    from trainlint.settings import SelectorError, canonical_selector

    if not selectors:  # `--select ''` would run nothing and report success
        _fail(f"{option}: no rule codes given (see `trainlint rules`)")
    try:
        return [canonical_selector(selector) for selector in selectors]
    except SelectorError as err:
        _fail(f"{option}: {err} (see `trainlint rules`)")


def _use_color(color: bool | None, output: str | None) -> bool:
    """`--color/--no-color` if given; else colour only for a terminal (NO_COLOR, FORCE_COLOR)."""
    if color is not None:
        return color
    if output is not None or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty()



def run_check(o: SimpleNamespace) -> None:
    """`trainlint check` with its options (click's names and values, as `check` receives them);
    exits with the run's code."""
    from trainlint.config import CliSelection, ConfigError, Resolver
    from trainlint.settings import SelectorError

    if o.config_file is not None and o.isolated:
        _fail("--config and --isolated cannot be used together")
    o.fmt = o.fmt or ("github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text")
    if o.statistics and o.fmt not in ("text", "json"):
        _fail(f"--statistics works with --format text or json, not {o.fmt}")
    if o.stdin_filename is not None and o.paths and "-" not in o.paths:
        _fail("--stdin-filename names what is read from stdin: add `-` to the paths")
    if o.stdin_filename is not None and o.no_stdin:
        _fail("--stdin-filename and --no-stdin cannot be used together")
    o.paths = list(o.paths) or (["-"] if o.stdin_filename else ["."])
    if o.no_stdin:  # a staged file named `-` is a file to check, not an empty stdin that passes
        o.paths = [os.path.join(os.curdir, path) if path == "-" else path for path in o.paths]
    if "-" in o.paths and (o.watch or o.add_noqa):
        _fail(f"{'--watch' if o.watch else '--add-noqa'} works on files, not on stdin (`-`)")
    if o.add_noqa and (o.fix or o.diff):
        _fail(f"--add-noqa and {'--diff' if o.diff else '--fix'} cannot be used together")
    if o.diff and o.watch:
        _fail("--diff and --watch cannot be used together")
    if o.show_settings and len(o.paths) != 1:
        _fail("--show-settings takes exactly one path")

    o.selection = CliSelection(
        select=tuple(_validate_selectors("--select", _split(o.select))) if o.select else None,
        extend_select=tuple(_validate_selectors("--extend-select", _split(o.extend_select))) if o.extend_select else (),
        ignore=tuple(_validate_selectors("--ignore", _split(o.ignore))) if o.ignore else (),
        exclude=tuple(_split(o.exclude)),
        force_exclude=o.force_exclude,
        fix=o.fix,
        unsafe_fixes=o.unsafe_fixes,
        allow_skipped=o.allow_skipped or None,
        include_unproven=o.include_unproven,
    )
    try:
        if o.show_settings:
            from trainlint.show_settings import render_settings

            resolver = Resolver(o.config_file, o.isolated, o.selection)
            _say(render_settings(resolver, o.paths[0]), nl=False)
            raise SystemExit(EXIT_CLEAN)
        if o.watch:
            raise SystemExit(_watch(o))
        raise SystemExit(_check_once(o))
    except (ConfigError, SelectorError) as err:
        _fail(str(err))



def _check_once(o: SimpleNamespace) -> int:
    """One run of `check`: find the files, check each with its own settings, report; the exit code."""
    from trainlint.cache import ResultCache
    from trainlint.config import ConfigError, FileConfig, Resolver, build_discovery, cache_directory, resolve_config
    from trainlint.reader.discovery import MissingPath, discover
    from trainlint.reader.files import outside_root
    from trainlint.engine import lint_paths, lint_source
    from trainlint.finding import FileResult
    from trainlint.reader.project import Project
    from trainlint.positions import split_lines
    from trainlint.progress import progress
    from trainlint.progress import wanted as progress_wanted
    from trainlint.reporters import ReportOptions, render, render_statistics
    from trainlint.reporters.options import read_cell_lines, read_lines

    resolver = Resolver(o.config_file, o.isolated, o.selection)
    here = resolve_config(o.config_file, o.isolated)  # the run's own: cache and SARIF root
    stdin_name = os.path.normpath(o.stdin_filename) if o.stdin_filename else "-"
    on_disk = [p for p in o.paths if p != "-"]
    unlisted: list[tuple[str, str]] = []  # folders that cannot be listed, paths that cannot be looked at
    # A configuration in error below the current directory's (a nested folder's pyproject.toml or
    # trainlint.toml) stops only its own files: each is reported once, naming its file and key,
    # with how many files it left unchecked; the other files are checked, and the run exits 2.
    broken: dict[str, int] = {}

    def discovery_for(directory: str):
        try:
            return resolver.discovery_for(directory)
        except ConfigError as err:  # walked with the default excludes; its files are not checked
            broken.setdefault(str(err), 0)
            return build_discovery(FileConfig(), o.selection)

    try:
        files = discover(on_disk, discovery_for, unlisted)
    except MissingPath as err:
        for missing in err.args[0]:
            # a path that looks like an option came after `--` (the pre-commit hook's entry ends with it)
            hint = " (after `--` every argument is a path: put options before it)" if missing.startswith("-") else ""
            _say(f"trainlint: error: no such file or directory: {one_line(missing)}{hint}", err=True)
        return EXIT_ERROR
    if o.force_exclude:
        named = {os.path.normpath(p) for p in on_disk if not os.path.isdir(p)}
        files = [f for f in files if f not in named or not _force_excluded(resolver, f)]
    configured = []
    for path in files:
        try:
            resolver.settings_for(path)
            configured.append(path)
        except ConfigError as err:
            broken[str(err)] = broken.get(str(err), 0) + 1
    files = configured

    # A file whose real path leaves the project (a link to ~/.ssh/id_rsa, /proc/self/environ) is
    # never read: it is skipped, as a file over the size limit is.
    fixing = FixRun(o.diff, on_disk)
    by_path = {}
    folders: dict[str, str] = {}
    for path in files:
        why = outside_root(path, fixing.root(path), folders)
        if why is not None:
            by_path[path] = FileResult(path, checked=False, skipped=why)

    # Files sharing a configuration share one Settings object: check them together.
    groups: dict[int, tuple] = {}
    for path in files:
        if path in by_path:
            continue
        settings = resolver.settings_for(path)
        groups.setdefault(id(settings), (settings, []))[1].append(path)
    cache = None if o.no_cache else ResultCache(cache_directory(here), here.root)
    if cache is not None and cache.problem is not None:
        _say(f"trainlint: warning: not using the cache: {_line(cache.problem)}", err=True)
        cache = None  # every file is checked, as with --no-cache
    jobs = o.jobs or (os.cpu_count() or 1)
    projects = {}  # fixing checks each fixed file again, in the same project
    checking = sum(len(paths) for _, paths in groups.values())  # the skipped ones are not checked
    with progress(checking, progress_wanted(checking, o.fmt, o.quiet)) as done:
        for settings, paths in groups.values():
            projects[id(settings)] = Project.for_paths(paths, settings.max_file_size) if paths else None
            for result in lint_paths(paths, settings, jobs=jobs, cache=cache, project=projects[id(settings)],
                                     done=done):
                by_path[result.path] = result
    results = [by_path[path] for path in files]
    results += [FileResult(path, errors=[error], checked=False) for path, error in unlisted]  # exit 2, as unreadable files
    # reported by path, then by position within a file (findings come sorted), as ruff does
    results.sort(key=lambda result: PurePath(result.path).parts)
    results = [fixing.fix_file(result, resolver, projects) for result in results]
    stdin_text: str | None = None
    stdin_fixed: bytes | None = None  # --fix on stdin: the fixed source goes to stdout
    if "-" in o.paths and not (o.force_exclude and resolver.is_force_excluded(stdin_name)):
        data = sys.stdin.buffer.read()
        stdin_text = data.decode("utf-8", "replace")
        result = lint_source(data, stdin_name, resolver.settings_for(stdin_name))
        if o.diff or resolver.fixing(stdin_name):
            result, stdin_fixed = fixing.fix_stdin(data, result, resolver)
            stdin_text = stdin_fixed.decode("utf-8", "replace")
        results.append(result)

    if not results:  # nothing to check is a warning, not a pass (`All checks passed (0 files)`)
        _say("trainlint: warning: No Python files found", err=True)
    if o.diff:
        return max(_report_diff(o, fixing, results, resolver), EXIT_ERROR if _report_broken(broken) else 0)

    if o.add_noqa:
        from trainlint.suppress import add_noqa_to_files

        added, changed, left, unwritten = add_noqa_to_files(results, fixing.root)
        echo(f"Added {added} noqa directive{'' if added == 1 else 's'} to "
                   f"{changed} file{'' if changed == 1 else 's'}.")
        for path, line, why in left:
            where = f"{one_line(path)}:{line}" if line else one_line(path)
            _say(f"trainlint: warning: {where}: no `# noqa` added: {_line(why)}", err=True)
        for error in unwritten:
            _say(f"trainlint: error: --add-noqa: {_line(error)}", err=True)
        failed = _report_skipped(results, resolver) | _report_broken(broken)
        return EXIT_ERROR if failed or unwritten else EXIT_CLEAN

    def source_lines(path: str) -> list[str] | None:
        if stdin_text is not None and path == stdin_name:
            return split_lines(stdin_text)
        return read_lines(path)

    def cell_lines(path: str) -> dict[int, list[str]] | None:
        if stdin_text is not None and path == stdin_name:  # a notebook read from stdin
            from trainlint.notebook import NotebookError, read_notebook

            try:
                return {cell.number: split_lines(cell.text) for cell in read_notebook(stdin_text).cells}
            except NotebookError:
                return None
        return read_cell_lines(path)

    checked = sum(result.checked for result in results)  # unreadable and skipped files are not
    color = _use_color(o.color, o.output)
    fixed = fixing.total if fixing.active else None
    options = ReportOptions(color=color, show_source=o.show_source, show_evidence=o.show_evidence,
                            source_lines=source_lines, cell_lines=cell_lines, root=str(here.root),
                            quiet=o.quiet, fixed=fixed)
    if o.statistics:
        report = render_statistics(o.fmt, results)
        if o.fmt == "text" and not o.quiet and results:
            from trainlint.reporters.text import summary

            report += summary(results, checked, fixed) + "\n"
    else:
        report = render(o.fmt, results, checked, options) if results or o.fmt != "text" else ""

    if stdin_fixed is not None:
        sys.stdout.buffer.write(stdin_fixed)
        sys.stdout.buffer.flush()
    if o.output is not None:
        try:
            Path(o.output).write_text(report, encoding="utf-8")
        except OSError as err:
            _fail(f"cannot write {o.output}: {err.strerror or err}")
    else:  # with the fixed source of stdin on stdout, the report goes to stderr
        echo(report, nl=False, color=color, err=stdin_fixed is not None)

    if _report_problems(results, resolver) | _report_broken(broken):
        return EXIT_ERROR
    found = any(result.findings for result in results)
    return EXIT_FINDINGS if found and not o.exit_zero else EXIT_CLEAN


def _force_excluded(resolver, path: str) -> bool:
    """`resolver.is_force_excluded`; a file whose configuration is in error is not excluded by it
    (it is reported with that configuration's error instead)."""
    from trainlint.config import ConfigError

    try:
        return resolver.is_force_excluded(path)
    except ConfigError:
        return False


def _report_broken(broken: dict[str, int]) -> bool:
    """Each configuration in error, once, with the number of files it left unchecked; whether any."""
    for error, count in broken.items():
        left = f"{count} file{'' if count == 1 else 's'} it configures not checked" if count else \
            "no file checked with it"
        _say(f"trainlint: error: {_line(error)} ({left})", err=True)
    return bool(broken)


def _report_problems(results, resolver) -> bool:
    """Print each skipped file and each error, one line each on stderr; whether the run must exit 2:
    an error, or a skipped file that is not accepted (`_report_skipped`)."""
    failed = _report_skipped(results, resolver)
    errors = [error for result in results for error in result.errors]
    for error in errors:
        _say(f"trainlint: error: {_line(error)}", err=True)
    return failed or bool(errors)


def _report_skipped(results, resolver) -> bool:
    """Print each skipped file, one line on stderr; whether one makes the run exit 2: a skipped file
    (too large, not regular, leading out of the project) that `--allow-skipped` / `allow-skipped`
    does not accept, since a file nobody checked must not pass."""
    failed = False
    for result in results:
        if result.skipped:
            allowed = resolver.allows_skipped(result.path)
            failed = failed or not allowed
            line = _line(result.skipped)
            _say(f"trainlint: warning: {line}" if allowed else
                       f"trainlint: error: {line} (--allow-skipped or `allow-skipped = true` accepts it)", err=True)
    return failed


class FixRun:
    """`--fix` and `--diff` over one run's results: each file with a fix its configuration allows
    is read again, fixed until stable (`trainlint.fixes.fix_source`), and written atomically, or
    for `--diff` only compared."""

    def __init__(self, diff: bool, named: list[str] = ()) -> None:
        self.diff = diff
        self.named = [os.path.abspath(path) for path in named]  # the paths named on the command line
        self._roots: dict[str, str] = {}
        self.active = False  # some file was to be fixed
        self.total = 0  # fixes applied (or, for --diff, that would be)
        self.diffs: list[str] = []

    def _fixes(self, path: str, resolver) -> bool:
        wanted = self.diff or resolver.fixing(path)
        self.active = self.active or wanted
        return wanted

    def fix_file(self, result, resolver, projects: dict):
        from trainlint.engine import SkippedFile, UnreadableFile, decode_source, lint_source, read_source
        from trainlint.fixes import WriteError, fix_source, write_fixed
        from trainlint.notebook import is_notebook

        path = result.path
        if not self._fixes(path, resolver) or not result.checked:
            return result
        policy = resolver.fix_policy_for(path)
        if not any(policy.allows(finding) for finding in result.findings):
            return result
        settings = resolver.settings_for(path)
        try:
            data = read_source(path, settings.max_file_size)
        except (UnreadableFile, SkippedFile):
            return result
        project = projects.get(id(settings))
        if is_notebook(path):
            return self._fix_notebook(path, data, result, settings, project, policy)[0]
        text, _ = decode_source(data, path)
        if text is None:
            return result
        outcome = fix_source(text, lambda source: lint_source(source, path, settings, project), policy)
        if not outcome.changed:
            return outcome.result
        if self.diff:
            self.diffs.append(_unified_diff(path, text, outcome.source))
        else:
            try:
                write_fixed(path, data, outcome.source, self.root(path))
            except WriteError as err:
                result.errors.append(str(err))
                return result
        self.total += sum(outcome.fixed.values())
        return outcome.result

    def _fix_notebook(self, path: str, data: bytes, result, settings, project, policy, write: bool = True):
        """A notebook's fixes: applied to its code cells joined as one module (where the rules
        placed them), then the cells written back into the notebook, which nbformat must accept;
        `--diff` shows each changed cell. Returns what remains, and the fixed notebook's text
        (None when nothing changed or it could not be written)."""
        from trainlint.engine import lint_source, read_notebook_source
        from trainlint.fixes import WriteError, fix_source, write_fixed
        from trainlint.notebook import NotebookError

        notebook, _ = read_notebook_source(data, path)
        if notebook is None:
            return result, None
        joined = notebook.joined()
        outcome = fix_source(joined.source, lambda source: lint_source(source, path, settings, project, notebook=False),
                             policy)
        if not outcome.changed:
            return result, None
        try:
            cells = joined.split(outcome.source)
            text = notebook.with_cells(cells)
        except NotebookError as err:
            result.errors.append(f"cannot fix {path}: {err.message}")
            return result, None
        if self.diff:
            self.diffs += [_cell_diff(f"{path}:cell {cell.number}", cell.text, new)
                           for cell, new in zip(notebook.cells, cells) if new != cell.text]
        elif write:
            try:
                write_fixed(path, data, text, self.root(path))
            except WriteError as err:
                result.errors.append(str(err))
                return result, None
        self.total += sum(outcome.fixed.values())
        return lint_source(text, path, settings, project), text  # what remains, in the cells' lines

    def root(self, path: str) -> str:
        """Where a fix of `path` may write: the project root (`fixes.fix_root`) of the named path
        it was found under, as named (a link in it does not take the root along)."""
        from trainlint.fixes import fix_root

        absolute = os.path.abspath(path)
        named = next((p for p in self.named if absolute == p or absolute.startswith(p.rstrip(os.sep) + os.sep)),
                     absolute)
        if named not in self._roots:
            self._roots[named] = fix_root([named])
        return self._roots[named]

    def fix_stdin(self, data: bytes, result, resolver):
        """(what remains, the fixed source as bytes) for stdin; undecodable input is passed through."""
        from trainlint.engine import decode_source, lint_source
        from trainlint.fixes import encoding_of, fix_source

        from trainlint.notebook import is_notebook

        path = result.path
        self._fixes(path, resolver)
        settings = resolver.settings_for(path)
        if is_notebook(path):  # `--stdin-filename x.ipynb`: the notebook's cells are fixed
            remains, fixed = self._fix_notebook(path, data, result, settings, None, resolver.fix_policy_for(path),
                                                write=False)
            return remains, fixed.encode("utf-8") if fixed is not None else data
        text, _ = decode_source(data, path)
        if text is None:
            return result, data
        outcome = fix_source(text, lambda source: lint_source(source, path, settings),
                             resolver.fix_policy_for(path), result)
        self.total += sum(outcome.fixed.values())
        if self.diff and outcome.changed:
            self.diffs.append(_unified_diff(path, text, outcome.source))
        return outcome.result, outcome.source.encode(encoding_of(data), "surrogateescape")


def _cell_diff(name: str, before: str, after: str) -> str:
    """A cell's diff: a cell's last line has no newline by custom, which is not worth a
    `\\ No newline at end of file` in every cell's diff."""
    if not before.endswith("\n") and not after.endswith("\n"):
        before, after = before + "\n", after + "\n"
    return _unified_diff(name, before, after)


def _unified_diff(path: str, before: str, after: str) -> str:
    import difflib

    name = one_line(path)  # a newline in a file name would end the header line
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=name, tofile=name)
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n"
                   for line in lines)


def _report_diff(o: SimpleNamespace, fixing: FixRun, results, resolver) -> int:
    """`--diff`: the diffs on stdout (or --output), a one-line count on stderr; exit 1 when
    anything would change, 0 when nothing would, 2 on errors (and skipped files, as `check`)."""
    report = "".join(fixing.diffs)
    if o.output is not None:
        try:
            Path(o.output).write_text(report, encoding="utf-8")
        except OSError as err:
            _fail(f"cannot write {o.output}: {err.strerror or err}")
    else:  # printed, a diff is text from the checked files: sanitised; written to FILE, the exact patch
        _say(report, nl=False)
    if not o.quiet:
        count = fixing.total
        echo(f"Would fix {count} finding{'' if count == 1 else 's'}." if count else "No fixes to apply.",
                   err=True)
    if _report_problems(results, resolver):
        return EXIT_ERROR
    return EXIT_FINDINGS if fixing.diffs else EXIT_CLEAN


def _watch(o: SimpleNamespace) -> int:
    """`--watch`: check, then check again after every change to a Python or TOML file under the
    paths (watchfiles: OS file events, not polling). Ctrl-C ends it with exit code 0."""
    try:
        from watchfiles import PythonFilter, watch
    except ImportError:
        _fail("--watch needs watchfiles: pip install 'trainlint[watch]'")
    roots = sorted({p if os.path.isdir(p) else os.path.dirname(os.path.abspath(p)) for p in o.paths})
    from trainlint.config import ConfigError
    from trainlint.settings import SelectorError

    def check_reporting_errors() -> None:
        try:
            _check_once(o)
        except (ConfigError, SelectorError) as err:  # fixing the file is what the watch waits for
            _say(f"trainlint: error: {_line(str(err))}", err=True)

    try:
        check_reporting_errors()
        echo("Watching for changes (Ctrl-C to stop).", err=True)
        for changes in watch(*roots, watch_filter=PythonFilter(extra_extensions=(".toml", ".ipynb"))):
            changed = sorted({os.path.relpath(path) for _, path in changes})
            _say(f"\n{time.strftime('%H:%M:%S')} {', '.join(map(one_line, changed))} changed; checking again.",
                 err=True)
            check_reporting_errors()
    except KeyboardInterrupt:
        pass
    return EXIT_CLEAN
