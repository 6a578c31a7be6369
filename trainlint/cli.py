"""The `trainlint` command line.

`trainlint PATH...` is `trainlint check PATH...`: a first argument that is not a subcommand runs
`check`. Exit codes: 0 no findings, 1 findings, 2 a usage, configuration or internal error.
Errors are one line each on stderr, never a traceback.

`confirm` (torch) and `lsp` (pygls) import their modules inside the command body, so neither
torch nor pygls is imported by any other command.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import click

from trainlint import __version__

FORMATS = ("text", "json", "github", "sarif", "lsp")
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _fail(message: str) -> None:
    """One line on stderr, exit code 2."""
    click.echo(f"trainlint: error: {' '.join(message.split())}", err=True)
    raise SystemExit(EXIT_ERROR)


class DefaultToCheck(click.Group):
    """A group that runs `check` when the first argument is not a subcommand."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help", "--version"):
            args = ["check", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="trainlint", message="%(prog)s %(version)s")
def cli() -> None:
    """A static linter for PyTorch training scripts.

    `trainlint PATH...` is short for `trainlint check PATH...`.
    """


def _split(values: tuple[str, ...]) -> list[str]:
    """Selectors from repeated and/or comma-separated options: `--select TL1,TL401 --select TL2`."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _validate_selectors(option: str, selectors: list[str]) -> list[str]:
    from trainlint.settings import SelectorError, codes_for

    for selector in selectors:
        try:
            codes_for(selector)
        except SelectorError as err:
            _fail(f"{option}: {err} (see `trainlint rules`)")
    return [s.upper() for s in selectors]


def _use_color(output: str | None) -> bool:
    if output is not None or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty()


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--select", multiple=True, metavar="CODES",
              help="Run exactly these rules: codes, prefixes (TL1) or ALL, comma-separated.")
@click.option("--extend-select", multiple=True, metavar="CODES", help="Add rules to the selection.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Remove rules from the selection.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Output format [default: text; github when GITHUB_ACTIONS=true].")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the report to FILE instead of stdout.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--statistics", is_flag=True, help="Print the number of findings per code instead of each finding.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="Read settings from FILE (pyproject.toml or trainlint.toml).")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("--no-cache", is_flag=True, help="Do not read or write the result cache.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=1, show_default=True,
              help="Worker processes (0: one per CPU).")
@click.option("--show-source", is_flag=True, help="Text format: show the offending line with a caret.")
@click.option("--stdin-filename", default=None, metavar="PATH",
              help="The name to report (and match per-file-ignores against) for `-` (stdin).")
def check(paths, select, extend_select, ignore, fmt, output, exit_zero, statistics, config_file,
          isolated, no_cache, jobs, show_source, stdin_filename) -> None:
    """Check PATHS (files or directories; `-` reads stdin). Default: the current directory."""
    from trainlint.cache import ResultCache
    from trainlint.config import (CliSelection, ConfigError, build_discovery, build_settings,
                                  cache_directory, resolve_config)
    from trainlint.discovery import MissingPath, discover
    from trainlint.engine import lint_paths, lint_source
    from trainlint.reporters import ReportOptions, render, render_statistics
    from trainlint.reporters.options import read_lines
    from trainlint.settings import SelectorError

    if config_file is not None and isolated:
        _fail("--config and --isolated cannot be used together")
    fmt = fmt or ("github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text")
    if statistics and fmt not in ("text", "json"):
        _fail(f"--statistics works with --format text or json, not {fmt}")

    selection = CliSelection(
        select=tuple(_validate_selectors("--select", _split(select))) if select else None,
        extend_select=tuple(_validate_selectors("--extend-select", _split(extend_select))),
        ignore=tuple(_validate_selectors("--ignore", _split(ignore))),
    )
    try:
        config = resolve_config(config_file, isolated)
        settings = build_settings(config, selection)
    except (ConfigError, SelectorError) as err:
        _fail(str(err))

    paths = list(paths) or (["-"] if stdin_filename else ["."])
    stdin_name = os.path.normpath(stdin_filename) if stdin_filename else "-"
    on_disk = [p for p in paths if p != "-"]
    try:
        files = discover(on_disk, build_discovery(config))
    except MissingPath as err:
        for missing in err.args[0]:
            click.echo(f"trainlint: error: no such file or directory: {missing}", err=True)
        raise SystemExit(EXIT_ERROR)

    cache = None if no_cache else ResultCache(cache_directory(config))
    results = list(lint_paths(files, settings, jobs=jobs or (os.cpu_count() or 1), cache=cache))
    stdin_text: str | None = None
    if "-" in paths:
        data = sys.stdin.buffer.read()
        stdin_text = data.decode("utf-8", "replace")
        results.append(lint_source(data, stdin_name, settings))

    def source_lines(path: str) -> list[str] | None:
        if stdin_text is not None and path == stdin_name:
            return stdin_text.splitlines()
        return read_lines(path)

    color = _use_color(output)
    options = ReportOptions(color=color, show_source=show_source, source_lines=source_lines,
                            root=str(config.root))
    if statistics:
        report = render_statistics(fmt, results)
        if fmt == "text":
            from trainlint.reporters.text import summary

            report += summary(results, len(results)) + "\n"
    else:
        report = render(fmt, results, len(results), options)

    if output is not None:
        try:
            Path(output).write_text(report, encoding="utf-8")
        except OSError as err:
            _fail(f"cannot write {output}: {err.strerror or err}")
    else:
        click.echo(report, nl=False, color=color)

    errors = [error for result in results for error in result.errors]
    for error in errors:
        click.echo(f"trainlint: error: {' '.join(error.split())}", err=True)
    if errors:
        raise SystemExit(EXIT_ERROR)
    found = any(result.findings for result in results)
    raise SystemExit(EXIT_FINDINGS if found and not exit_zero else EXIT_CLEAN)


@cli.command()
@click.option("--format", "fmt", type=click.Choice(("table", "json", "md")), default="table", show_default=True)
def rules(fmt: str) -> None:
    """List every rule: code, name, severity, whether it is on by default, summary."""
    from trainlint.reporters.catalog import render_rules

    click.echo(render_rules(fmt), nl=False)


@cli.command()
@click.argument("code")
def explain(code: str) -> None:
    """Print a rule's documentation, with its first bad example and the fixed/good version."""
    from trainlint.reporters.catalog import lookup

    info = lookup(code)
    if info is None:
        _fail(f"unknown rule code '{code}' (see `trainlint rules`)")
    click.echo(info.documentation, nl=False)


@cli.command()
@click.argument("codes", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
def confirm(codes: tuple[str, ...], fmt: str) -> None:
    """Show each hazard with torch: run the rules' bad/good pairs and print the numbers."""
    try:
        if importlib.util.find_spec("torch") is None:
            raise ImportError("torch")
    except Exception:
        click.echo("trainlint confirm needs torch: pip install 'trainlint[runtime]'", err=True)
        raise SystemExit(EXIT_ERROR)
    try:
        from trainlint.runtime.confirm import run_confirm
    except ImportError as err:
        _fail(f"trainlint confirm is not available in this installation: {err}")
    raise SystemExit(run_confirm([c.upper() for c in codes], fmt))


@cli.command()
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- SCRIPT_ARGS...]")
@click.option("--max-steps", type=click.IntRange(min=1), default=20, show_default=True,
              help="Stop after this many optimizer steps (or at the end of the script).")
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True, metavar="SECONDS",
              help="Stop the script after this long and report what it did until then.")
def trace(script: str, script_args: tuple[str, ...], max_steps: int, fmt: str, timeout: float) -> None:
    """RUN SCRIPT (your code) for a few optimizer steps and confirm or refute each finding.

    This executes SCRIPT as `python SCRIPT SCRIPT_ARGS...` would, in a child process with torch
    instrumented: only run scripts you trust. Each static finding is reported CONFIRMED (with the
    evidence), NOT CONFIRMED or NOT REACHED, plus RUNTIME-ONLY findings the static pass missed.
    The script's own output goes to stderr. Exit codes: 1 when anything is CONFIRMED or
    RUNTIME-ONLY, 0 otherwise, 2 on a usage error or when the run produced no result.
    """
    from trainlint.runtime.trace import command

    raise SystemExit(command(script, list(script_args), max_steps, fmt, timeout))


@cli.command()
@click.option("--stdio", is_flag=True, help="Talk over stdin/stdout (the default; accepted for editor clients).")
def lsp(stdio: bool) -> None:
    """Run the language server over stdio."""
    try:
        missing = any(importlib.util.find_spec(name) is None for name in ("pygls", "lsprotocol"))
    except ImportError:
        missing = True
    if missing:
        click.echo("trainlint lsp needs pygls: pip install 'trainlint[lsp]'", err=True)
        raise SystemExit(EXIT_ERROR)
    try:
        from trainlint.lsp.server import serve
    except ImportError as err:
        _fail(f"trainlint lsp is not available in this installation: {err}")
    serve()


def main() -> None:
    cli(prog_name="trainlint")
