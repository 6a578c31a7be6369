"""The traced process: run the user's script as `__main__` with torch instrumented.

Started by `trace.run_child` as
`python -I -c BOOT PACKAGE_ROOT RESULT_FILE MAX_STEPS SCRIPT [ARGS...]`: isolated mode, so neither
the current directory, the script's directory nor PYTHONPATH can put a `torch.py` (or anything else)
ahead of the real torch and trainlint; BOOT puts PACKAGE_ROOT (the folder holding `trainlint/`) first
only long enough to import this module. After torch is imported and instrumented, `sys.path` is set
as `python SCRIPT` would have it: the script's folder first, then PYTHONPATH, then the rest.

The result (see `Trace.report`) is written as JSON to RESULT_FILE, also when the script raises, exits
(`sys.exit` or `os._exit`), or is stopped after MAX_STEPS optimizer steps, by SIGTERM (the parent's
timeout) or by SIGINT/SIGHUP (forwarded by the parent). A script that catches the stop and trains on
is ended at its next training call, after the report is written. After every optimizer step a
snapshot of the result is written, so a child killed outright still leaves the steps it took.
"""

from __future__ import annotations

import json
import os
import re
import signal
import site
import sys
import traceback
import warnings

_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[@-Z\\-_])|[\x00-\x08\x0b-\x1f\x7f]")
_replace, _exit = os.replace, os._exit  # the originals: the script may not see (or trace) our own writes


def plain(text: str) -> str:
    """The text without terminal escape sequences or control characters (a colored exception
    message), on one line."""
    return " ".join(_ANSI.sub("", text).split())


def plain_lines(text: str) -> str:
    """The text without terminal escape sequences or control characters, its lines kept (a long
    message, such as TorchScript's graph diff, stays readable; the text report shortens it)."""
    lines = [plain(line) for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


def _error(exc: BaseException, user) -> str:
    """`Type: message (at file.py:12)`, the innermost frame in the user's code."""
    text = plain_lines(f"{type(exc).__name__}: {exc}").rstrip(":")
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
    """SIGTERM from the parent's timeout, or SIGINT/SIGHUP it forwards: a BaseException, so the
    script's `except Exception:` lets it through and its `finally:` blocks run."""


_SIGNALS = {signal.SIGTERM: "timeout", signal.SIGINT: "interrupted"}
if hasattr(signal, "SIGHUP"):
    _SIGNALS[signal.SIGHUP] = "interrupted"
_STOP_ERRORS = {"timeout": "timed out: the script was stopped before it finished",
                "interrupted": "interrupted: trainlint was stopped (SIGINT, SIGTERM or SIGHUP)"}


def _write(result_file: str, result: dict) -> None:
    """Atomically: the parent never reads half a file, whenever it kills this process."""
    partial = result_file + ".partial"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    _replace(partial, result_file)


def main(argv: list[str]) -> None:
    package_root, result_file, max_steps, script, *script_args = argv
    state = {"trace": None, "stop": None}

    def on_signal(signum, frame):
        state["stop"] = state["stop"] or _SIGNALS[signum]
        if state["trace"] is not None:
            state["trace"].stop()
        raise TimedOut

    for signum in _SIGNALS:  # first: a timeout during torch's import still reports
        signal.signal(signum, on_signal)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "Failed to initialize NumPy" while importing torch
            from trainlint.runtime.instrument import StopTrace, Trace
    except TimedOut:
        _write(result_file, {"steps": 0, "optimizers": [], "manual_updates": None, "stopped": state["stop"],
                             "error": f"{_STOP_ERRORS[state['stop']]} (before the script started)",
                             "findings": [], "notes": [], "lines": {}, "loader_passes": []})
        return

    trace = Trace(int(max_steps), script)
    state["trace"] = trace
    _script_path(script, package_root)
    sys.argv = [script, *script_args]
    pid = os.getpid()
    error, stopped = None, "end"
    import runpy

    def on_swallowed():
        """The script caught the stop and trains on: report what ran until the stop, end here."""
        if os.getpid() != pid:
            _exit(0)
        stop = state["stop"] or "max-steps"
        result = trace.report(_STOP_ERRORS.get(stop), stop)
        where = trace.stack()
        result["caught_stop"] = f"{os.path.basename(where[0][0])}:{where[0][1]}" if where else "library code"
        _write(result_file, result)
        _flush()
        _exit(0)

    def on_step():
        if os.getpid() == pid:
            _write(result_file, trace.snapshot("the script was killed", "killed"))

    def exit_now(code=0):
        """os._exit from the script: it skips every `finally:`, so report here."""
        if os.getpid() == pid:
            result = trace.report(f"the script exited with code {code} (os._exit)" if code else None,
                                  "error" if code else "end")
            if code:
                result["exit_status"] = code
            _write(result_file, result)
            _flush()
        _exit(code)

    trace.on_swallowed, trace.on_step = on_swallowed, on_step
    os._exit = exit_now

    try:
        trace.install()
        # an absolute path, so code locations stay right after the script changes directory
        runpy.run_path(os.path.abspath(script), run_name="__main__")
    except StopTrace:
        stopped = state["stop"] or "max-steps"
        error = _STOP_ERRORS.get(stopped)
    except TimedOut:
        stopped = state["stop"]
        error = _STOP_ERRORS[stopped]
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error, stopped = plain(f"SystemExit: {exc.code}"), "error"
    except BaseException as exc:  # noqa: BLE001 - whatever the script raised is part of the report
        traceback.print_exc()
        error, stopped = _error(exc, trace.user), "error"
    if os.getpid() != pid:  # a forked DataLoader worker or similar leaving through here
        _exit(0)
    for signum in _SIGNALS:
        signal.signal(signum, signal.SIG_IGN)  # the report is written whole; the parent waits for it
    _write(result_file, trace.report(error, stopped))


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed or replaced stream
            pass
