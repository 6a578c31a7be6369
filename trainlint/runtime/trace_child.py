"""The traced process: run the user's script as `__main__` with torch instrumented.

Started by `trace.run_child` as
`python -I -c BOOT PACKAGE_ROOT RESULT_FILE MAX_STEPS SCRIPT [ARGS...]`: isolated mode, so neither
the current directory, the script's directory nor PYTHONPATH can put a `torch.py` (or anything else)
ahead of the real torch and trainlint; BOOT puts PACKAGE_ROOT (the folder holding `trainlint/`) first
only long enough to import this module. After torch is imported and instrumented, `sys.path` is set
as `python SCRIPT` would have it: the script's folder first, then PYTHONPATH, then the rest.

The result (see `Trace.report`) is written as JSON to RESULT_FILE, also when the script raises, exits,
or is stopped after MAX_STEPS optimizer steps or by SIGTERM (the parent's timeout).
"""

from __future__ import annotations

import json
import os
import signal
import site
import sys
import traceback
import warnings


def _error(exc: BaseException, user) -> str:
    """`Type: message (at file.py:12)`, the innermost frame in the user's code."""
    text = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
    where = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename in user:
            where = f"{os.path.basename(frame.f_code.co_filename)}:{line}"
    return f"{text} (at {where})" if where else text


def _script_path(script: str, package_root: str) -> None:
    """sys.path as `python SCRIPT` sets it (PYTHONPATH and the user site included), minus our entry."""
    if sys.path and sys.path[0] == package_root:
        del sys.path[0]
    extra = [os.path.dirname(os.path.abspath(script))]
    extra += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[0:0] = extra
    if os.environ.get("TRAINLINT_TRACE_USER_SITE") == "1":
        site.addsitedir(site.getusersitepackages())


class TimedOut(BaseException):
    """SIGTERM from the parent's timeout: a BaseException, so the script's `except Exception:` lets
    it through and its `finally:` blocks run."""


def _on_term(signum, frame):
    raise TimedOut


def _write(result_file: str, result: dict) -> None:
    with open(result_file, "w", encoding="utf-8") as handle:
        json.dump(result, handle)


def main(argv: list[str]) -> None:
    package_root, result_file, max_steps, script, *script_args = argv
    signal.signal(signal.SIGTERM, _on_term)  # first: a timeout during torch's import still reports
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "Failed to initialize NumPy" while importing torch
            from trainlint.runtime.instrument import StopTrace, Trace
    except TimedOut:
        _write(result_file, {"steps": 0, "stopped": "timeout", "error": "timed out before the script started",
                             "findings": [], "notes": [], "lines": {}, "loader_passes": []})
        return

    trace = Trace(int(max_steps), script)
    _script_path(script, package_root)
    sys.argv = [script, *script_args]
    pid = os.getpid()
    error, stopped = None, "end"
    import runpy

    try:
        trace.install()
        # an absolute path, so code locations stay right after the script changes directory
        runpy.run_path(os.path.abspath(script), run_name="__main__")
    except StopTrace:
        stopped = "max-steps"
    except TimedOut:
        error, stopped = "timed out: the script was stopped before it finished", "timeout"
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error, stopped = f"SystemExit: {exc.code}", "error"
    except BaseException as exc:  # noqa: BLE001 - whatever the script raised is part of the report
        traceback.print_exc()
        error, stopped = _error(exc, trace.user), "error"
    if os.getpid() != pid:  # a forked DataLoader worker or similar leaving through here
        os._exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _write(result_file, trace.report(error, stopped))
