"""The `trainlint` command line.

`trainlint PATH...` is `trainlint check PATH...`: a first argument that is not a subcommand runs
`check`. Exit codes: 0 no findings, 1 findings, 2 a usage, configuration or internal error
(`--fix`: the findings that remain; `--diff`: 1 when a fix would change something).
Errors are one line each on stderr, never a traceback.

`confirm` (torch) and `lsp` (pygls) import their modules inside the command body, so neither
torch nor pygls is imported by any other command.
"""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import click

from trainlint import __version__
# check's run is click-free (trainlint.launch runs a plain text check without click)
from trainlint.check_command import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, FORMATS, _fail, _say, _split, run_check  # noqa: F401


class DefaultToCheck(click.Group):
    """A group that runs `check` when the first argument is not a subcommand, or there is none."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help", "--version")):
            args = ["check", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="trainlint", message="%(prog)s %(version)s")
def cli() -> None:
    """A static linter for PyTorch training scripts.

    `trainlint PATH...` is short for `trainlint check PATH...`.
    """


def _apply(options: list):
    """Decorate a command with a table of click parameters, in the table's order."""
    def decorate(function):
        for option in reversed(options):
            function = option(function)
        return function
    return decorate


#: Every option of `check`, in one table (the README's options table follows this order).
CHECK_OPTIONS = [
    click.argument("paths", nargs=-1, type=click.Path()),
    # -- which rules
    click.option("--select", multiple=True, metavar="CODES",
                 help="Run exactly these rules: codes, prefixes (TL1) or ALL, comma-separated."),
    click.option("--extend-select", multiple=True, metavar="CODES", help="Add rules to the selection."),
    click.option("--ignore", multiple=True, metavar="CODES", help="Remove rules from the selection."),
    # -- which files
    click.option("--exclude", multiple=True, metavar="GLOBS",
                 help="Also skip these globs when walking directories (relative to the current directory)."),
    click.option("--force-exclude", is_flag=True,
                 help="Apply the excludes to files named on the command line too (for pre-commit)."),
    click.option("--stdin-filename", default=None, metavar="PATH",
                 help="The name to report (and match per-file-ignores against) for `-` (stdin)."),
    click.option("--no-stdin", is_flag=True,
                 help="`-` is the file named `-`, not stdin (for pre-commit: every staged file is checked)."),
    # -- configuration
    click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
                 help="Read settings from FILE (pyproject.toml or trainlint.toml) for every file."),
    click.option("--isolated", is_flag=True, help="Ignore all configuration files."),
    click.option("--show-settings", is_flag=True,
                 help="Print the settings that apply to the one PATH given, and where each comes from."),
    # -- output
    click.option("--format", "--output-format", "fmt", type=click.Choice(FORMATS), default=None,
                 help="Output format [default: text; github when GITHUB_ACTIONS=true]."),
    click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
                 help="Write the report to FILE instead of stdout."),
    click.option("--show-source", is_flag=True,
                 help="Text format: show the offending lines with carets, the fix and the rule's link."),
    click.option("--show-evidence", is_flag=True,
                 help="Text format: under each finding, the premises its message asserts and the lines that prove them."),
    click.option("--include-unproven/--no-include-unproven", "include_unproven", default=None,
                 help="Also report, at info, findings one of whose premises rests only on a name or a guess "
                      "[default: the `include-unproven` setting, false]."),
    click.option("--statistics", is_flag=True,
                 help="Print the number of findings per code instead of each finding."),
    click.option("-q", "--quiet", is_flag=True, help="Text format: print the findings only, no summary."),
    click.option("--color/--no-color", "color", default=None,
                 help="Colour the text output [default: only on a terminal]."),
    click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings."),
    click.option("--allow-skipped", is_flag=True, default=None,
                 help="A skipped file (over max-file-size, not a regular file, or leading out of the "
                      "project) is a warning, not an error (exit 2) [default: the `allow-skipped` setting]."),
    # -- fixing
    click.option("--fix/--no-fix", "fix", default=None,
                 help="Apply the safe fixes in place, then report what remains [default: the `fix` setting]."),
    click.option("--unsafe-fixes/--no-unsafe-fixes", "unsafe_fixes", default=None,
                 help="With --fix or --diff, apply the unsafe fixes too (they may change behaviour; review them)."),
    click.option("--diff", is_flag=True,
                 help="Print a unified diff of what --fix would change and write nothing (exit 1 when there is a change)."),
    # -- running
    click.option("--add-noqa", is_flag=True,
                 help="Add `# noqa: CODE` to every line with a finding (adopting trainlint on old code)."),
    click.option("--watch", is_flag=True, help="Check again whenever a Python or TOML file changes."),
    click.option("--no-cache", is_flag=True, help="Do not read or write the result cache."),
    click.option("-j", "--jobs", type=click.IntRange(min=0), default=1, show_default=True,
                 help="Worker processes (0: one per CPU)."),
]


@cli.command()
@_apply(CHECK_OPTIONS)
def check(**options) -> None:
    """Check PATHS (files or directories; `-` reads stdin). Default: the current directory."""
    run_check(SimpleNamespace(**options))


@cli.command()
@click.option("--format", "fmt", type=click.Choice(("table", "json", "md")), default="table", show_default=True)
def rules(fmt: str) -> None:
    """List every rule: code, name, severity, whether it is on by default, summary."""
    from trainlint.reporters.catalog import render_rules

    click.echo(render_rules(fmt), nl=False)


@cli.command()
@click.argument("code", required=False)
@click.option("--frameworks", "list_frameworks", is_flag=True,
              help="List the framework models (trainlint/frameworks/*.toml) and their entries instead.")
def explain(code: str | None, list_frameworks: bool) -> None:
    """Print a rule's documentation (CODE is its code or its name), with its examples and the
    frameworks it understands; or, with --frameworks, every framework model."""
    from trainlint.model.frameworks import FrameworkModelError
    from trainlint.reporters.catalog import lookup
    from trainlint.reporters.framework_models import render_models, rule_section

    if list_frameworks == (code is not None):
        _fail("give a rule CODE or --frameworks (see `trainlint explain --help`)")
    try:
        if list_frameworks:
            click.echo(render_models(), nl=False)
            return
        info = lookup(code)
        if info is None:
            _fail(f"unknown rule code or name '{code}' (see `trainlint rules`)")
        click.echo(info.documentation + rule_section(info.code), nl=False)
    except FrameworkModelError as err:  # a broken installation's data file
        _fail(f"a framework model file is broken: {err}")


@cli.command()
@click.option("--stop", is_flag=True, help="Ask every resident process of this user to exit.")
def resident(stop: bool) -> None:
    """Show (or --stop) the resident processes that serve plain checks: on Linux outside CI, the
    first plain `trainlint check` starts one in the background and later ones are handed to it
    (TRAINLINT_RESIDENT=0 turns this off; it exits after TRAINLINT_RESIDENT_IDLE seconds idle)."""
    from trainlint import resident as served

    where = served.folder()
    if where is None:
        _fail("no socket folder of this user's own (see TRAINLINT_RESIDENT_DIR in the README)")
    found = served.stop(where) if stop else served.running(where)
    verb = "asked to stop" if stop else "running"
    if not found:
        click.echo(f"No resident process {'to stop' if stop else 'is running'} ({where}).")
        return
    for described in found:
        click.echo(f"{verb}: pid {described['pid']}, trainlint {described['version']} from "
                   f"{described['package']} ({described['python']})")


@cli.command()
@click.argument("codes", nargs=-1)
@click.option("--select", multiple=True, metavar="CODES",
              help="Rows to run: codes, prefixes or fence names, comma-separated (same as CODES).")
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
def confirm(codes: tuple[str, ...], select: tuple[str, ...], fmt: str) -> None:
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
    raise SystemExit(run_confirm([c.upper() for c in [*codes, *_split(select)]], fmt))


@cli.command()
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- SCRIPT_ARGS...]")
@click.option("--max-steps", type=click.IntRange(min=1), default=20, show_default=True,
              help="Stop after this many steps of any one optimizer (or at the end of the script).")
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True, metavar="SECONDS",
              help="Stop the script after this long and report what it did until then.")
@click.option("--resume-check", type=click.IntRange(min=1), default=None, metavar="K",
              help="Check that the script resumes exactly from the checkpoint it saves after step K.")
@click.option("--resume-steps", type=click.IntRange(min=1), default=3, show_default=True, metavar="M",
              help="With --resume-check: steps compared after the checkpoint.")
@click.option("--resume-arg", default=None, metavar="ARGS",
              help='With --resume-check: the arguments that make the script resume, e.g. "--resume {checkpoint}".')
def trace(script: str, script_args: tuple[str, ...], max_steps: int, fmt: str, timeout: float,
          resume_check: int | None, resume_steps: int, resume_arg: str | None) -> None:
    """RUN SCRIPT (your code) for a few optimizer steps and confirm or refute each finding.

    This executes SCRIPT as `python SCRIPT SCRIPT_ARGS...` would, in a child process with torch
    instrumented: only run scripts you trust. Each static finding is reported CONFIRMED (with the
    evidence), NOT CONFIRMED or NOT REACHED, plus RUNTIME-ONLY findings the static pass missed.
    The script's own output goes to stderr. With --resume-check K it runs twice (uninterrupted, and
    resumed from its own checkpoint of step K in a fresh process) and compares step by step.
    Exit codes: 0 nothing confirmed at warning or above, 1 confirmed (or the resume diverged),
    2 usage error or no result, 3 the script failed before its first step (or left by os._exit
    with a non-zero status), 4 no optimizer step.

    Notebooks (.ipynb) are not traced (a kernel's cells are not one script run by `python`):
    export the notebook to a script first (`jupyter nbconvert --to script`).
    """
    if script.lower().endswith(".ipynb"):
        _fail(f"trace runs Python scripts, not notebooks: {script} is a notebook; export it first "
              "(`jupyter nbconvert --to script`) and trace the script")
    from trainlint.runtime.trace_command import command

    if resume_arg is not None and resume_check is None:
        _fail("--resume-arg needs --resume-check K")
    raise SystemExit(command(script, list(script_args), max_steps, fmt, timeout,
                             resume=(resume_check, resume_steps, resume_arg) if resume_check else None))


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
