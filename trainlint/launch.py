"""The `trainlint` program's entry point: a plain check runs without click.

What a pre-commit hook or an editor's save hook runs (`trainlint check [FLAGS] [--] FILE...`)
pays for the process, not for the check: importing click costs about a fifth of a one-file
check of a module with no training code. When the arguments are only paths and the flags of
`FAST_FLAGS` (no option that takes a value, no `-`, no help, version or other subcommand), they
are read here into the namespace click would build (`fast_options`; tests/test_launch.py
compares the two on every flag) and handed to `trainlint.check_command.run_check`. Anything else
goes to click (`trainlint.cli.main`), as do the shell-completion requests click answers and every
run on Windows (where click expands globs in the arguments).
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

#: check's flags that take no value: the flag -> (the option's name, the value it sets)
FAST_FLAGS = {
    "--force-exclude": ("force_exclude", True),
    "--no-stdin": ("no_stdin", True),
    "--isolated": ("isolated", True),
    "--show-source": ("show_source", True),
    "--show-evidence": ("show_evidence", True),
    "--include-unproven": ("include_unproven", True),
    "--no-include-unproven": ("include_unproven", False),
    "--statistics": ("statistics", True),
    "-q": ("quiet", True),
    "--quiet": ("quiet", True),
    "--color": ("color", True),
    "--no-color": ("color", False),
    "--exit-zero": ("exit_zero", True),
    "--allow-skipped": ("allow_skipped", True),
    "--no-fix": ("fix", False),
    "--no-unsafe-fixes": ("unsafe_fixes", False),
    "--no-cache": ("no_cache", True),
}

#: what click passes `check` when an option is not given (tests/test_launch.py: click's own)
DEFAULTS = {
    "paths": (), "select": (), "extend_select": (), "ignore": (), "exclude": (), "force_exclude": False,
    "stdin_filename": None, "no_stdin": False, "config_file": None, "isolated": False, "show_settings": False,
    "fmt": None, "output": None, "show_source": False, "show_evidence": False, "include_unproven": None,
    "statistics": False, "quiet": False, "color": None, "exit_zero": False, "allow_skipped": None, "fix": None,
    "unsafe_fixes": None, "diff": False, "add_noqa": False, "watch": False, "no_cache": False, "jobs": 1,
}

#: the subcommands and group options click must see (a first argument naming one is not a path)
_CLICK_FIRST = {"rules", "explain", "confirm", "trace", "lsp", "resident", "-h", "--help", "--version"}


def fast_options(args: list[str]) -> SimpleNamespace | None:
    """check's options as click gives them for `args` (the arguments after the program's name),
    or None when click must read them."""
    if args and args[0] == "check":
        args = args[1:]
    elif args and args[0] in _CLICK_FIRST:
        return None
    options = dict(DEFAULTS)
    paths: list[str] = []
    for number, arg in enumerate(args):
        if arg == "--":  # every argument after it is a path
            paths += args[number + 1:]
            break
        if arg in FAST_FLAGS:
            name, value = FAST_FLAGS[arg]
            options[name] = value
        elif arg.startswith("-"):  # another option, `-` (stdin), `-h`, a bundle of short flags
            return None
        else:
            paths.append(arg)
    if "-" in paths or not all(map(_readable_or_absent, paths)):  # stdin; click.Path's own error
        return None
    options["paths"] = tuple(paths)
    return SimpleNamespace(**options)


def _readable_or_absent(path: str) -> bool:
    """click.Path() fails on a path that exists and is not readable (os.access), else passes it."""
    try:
        os.stat(path)
    except OSError:
        return True
    except ValueError:  # a NUL in the path: click's to meet
        return False
    return os.access(path, os.R_OK)


def main() -> None:
    args = sys.argv[1:]
    options = _fast(args)
    if options is not None:
        from trainlint import resident

        if resident.wanted() and (where := resident.folder()) is not None:
            name = resident.key()
            code = resident.serve(sys.argv, where, name)
            if code is not None:
                sys.exit(code)
            try:
                _run(args, options)
            finally:  # the next plain check is served (its own run is not delayed: no wait)
                resident.start(where, name)
    _run(args, options)


def _fast(args: list[str]) -> SimpleNamespace | None:
    """check's options when the click-free path runs `args`, else None."""
    # On Windows click expands globs, `~` and variables in the arguments itself: its path there
    return None if "_TRAINLINT_COMPLETE" in os.environ or os.name == "nt" else fast_options(args)


def run_here(args: list[str]) -> None:
    """Run the command line `args` (after the program's name) in this process; exits. What the
    resident process's child runs for a client."""
    _run(args, _fast(args))


def _run(args: list[str], options: SimpleNamespace | None) -> None:
    if options is None:
        from trainlint.cli import main as click_main

        sys.argv[1:] = args
        click_main()
        return
    from trainlint.check_command import echo, run_check

    # what click's standalone mode does with an interrupt and a closed pipe
    try:
        code = 1
        try:
            run_check(options)  # exits with the run's code
            code = 0
        except (EOFError, KeyboardInterrupt):
            echo(err=True)  # the blank line closes the terminal's `^C` echo
            echo("Aborted!", err=True)
        except OSError as err:
            import errno

            if err.errno != errno.EPIPE:
                raise
            from click.utils import _PacifyFlushWrapper

            sys.stdout = _PacifyFlushWrapper(sys.stdout)
            sys.stderr = _PacifyFlushWrapper(sys.stderr)
        sys.exit(code)
    except (EOFError, KeyboardInterrupt):
        sys.exit(1)
