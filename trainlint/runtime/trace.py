"""`trainlint trace SCRIPT`: lint the script, run it for a few optimizer steps with torch
instrumented in a child process, and join the two.

Each static finding becomes CONFIRMED (the run showed the hazard at that line, with the evidence),
NOT CONFIRMED (the line ran and the hazard did not show, with why) or NOT REACHED (the line never
ran). Runtime findings at lines the static pass did not report are RUNTIME-ONLY.

This process never imports torch: the child (`trace_child`, hooks in `instrument`) does, and hands
back its observations as JSON. The child runs the user's code: `trace` is a separate command that
says so, and nothing else (check, pre-commit, the language server) ever starts it.

The child runs in its own session and process group. Whatever way the run ends (the script ends,
the timeout, SIGINT/SIGTERM/SIGHUP to trainlint, which are forwarded to the child), the child gets
GRACE seconds to write its report, then its group is killed, then every process still carrying the
run's token in its environment, then (Linux) every other descendant, through a child subreaper
(`reaper`: a grandchild that started its own session and cleared its environment); the temporary
folder is removed on every path.

Exit codes (`TraceReport.exit_code`): 3 when the script failed before its first optimizer step,
else 1 when a finding at warning or error severity is CONFIRMED or RUNTIME-ONLY, else 3 when the
script left by `os._exit` (or `posix._exit`) with a non-zero status, else 4 when no optimizer step
was seen, else 0; 2 on a usage error or when the run produced no (or a malformed) result.
"""

from __future__ import annotations

import collections
import json
import os
import secrets
import signal
import site
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from trainlint import __version__
from trainlint.engine import lint_paths
from trainlint.finding import Finding
from trainlint.rules import registry
from trainlint.runtime import reaper
from trainlint.runtime.trace_child import plain, plain_lines
from trainlint.settings import Settings

DEFAULT_MAX_STEPS = 20
DEFAULT_TIMEOUT = 600.0
GRACE = 5.0  # seconds a stopped child has to write its report before its process group is killed
EXIT_FAILED_EARLY, EXIT_NO_STEP = 3, 4
TOKEN = "TRAINLINT_TRACE_TOKEN"  # in the environment of every process of one traced run
CONFIRMED, NOT_CONFIRMED, NOT_REACHED = "CONFIRMED", "NOT CONFIRMED", "NOT REACHED"
_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from trainlint.runtime.trace_child import main; main(sys.argv[1:])")
# Rules whose hazard the run can show; other findings that ran are NOT CONFIRMED with this reason.
RUNTIME_CHECKS = frozenset({"TL101", "TL102", "TL104", "TL105", "TL106", "TL201", "TL202", "TL203", "TL204",
                            "TL301", "TL302", "TL303", "TL401", "TL402", "TL403", "TL404", "TL501", "TL502",
                            "TL601", "TL602", "TL801"})


class TraceFailed(Exception):
    """The traced run produced no result (it could not start, or was killed)."""


class Interrupted(Exception):
    """trainlint itself got SIGINT, SIGTERM or SIGHUP; the traced run was stopped and cleaned up."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass(frozen=True)
class TraceReport:
    script: str
    steps: int  # optimizer step() calls, all optimizers together
    stopped: str  # "max-steps", "end", "error", "timeout", "killed" or "interrupted"
    error: str | None
    findings: list[dict]  # {"code", "path", "line", "severity", "status", "evidence"}
    runtime_only: list[dict]  # {"code", "path", "line", "severity", "evidence"}
    optimizers: list[dict] = field(default_factory=list)  # {"type", "path", "line", "steps"}
    manual_updates: dict | None = None  # {"count", "where"}: updates by hand in a run with no optimizer
    caught_stop: str | None = None  # where the script went on after catching the stop
    pid: int | None = None  # the child's process id (also its process group and session)
    processes: dict | None = None  # {"count", "where"}: processes the script started (not traced)
    exit_status: int | None = None  # the script's own non-zero exit status when it left by _exit

    def to_dict(self) -> dict:
        return {"version": __version__, "script": self.script, "steps": self.steps, "optimizers": self.optimizers,
                "stopped": self.stopped, "error": self.error, "hint": self.hint, "findings": self.findings,
                "runtime_only": self.runtime_only}

    @property
    def exit_code(self) -> int:
        if self.stopped == "error" and self.steps == 0:
            return EXIT_FAILED_EARLY
        shown = [f for f in self.findings if f["status"] == CONFIRMED] + self.runtime_only
        if any(f["severity"] != "info" for f in shown):
            return 1
        if self.exit_status:  # the script left with os._exit(N): it failed, whatever ran before
            return EXIT_FAILED_EARLY
        return EXIT_NO_STEP if self.steps == 0 else 0

    @property
    def hint(self) -> str | None:
        """Why no optimizer step was seen, when none was."""
        if self.steps or self.stopped == "error":
            return None
        if self.manual_updates:
            where = self.manual_updates["where"]
            return (f"no optimizer step was seen: the parameters were updated by hand "
                    f"{self.manual_updates['count']}x" + (f" (at {where})" if where else "") +
                    "; trace checks the update clock of torch.optim optimizers only")
        if self.processes:
            where = self.processes["where"]
            count = self.processes["count"]
            return (f"no optimizer step was seen in the traced process: the script started {count} process"
                    f"{'' if count == 1 else 'es'} with multiprocessing" + (f" (at {where})" if where else "") +
                    " and may train there; trace follows the main process only (its children are not traced): "
                    "run the training in the main process (e.g. one process, no spawn) to trace it")
        if self.stopped == "timeout":
            return "no optimizer step was seen before the timeout: give the script longer with --timeout"
        return ("no optimizer step was seen: the script does not train with a torch.optim optimizer, or "
                "reaches its loop only with other arguments (or after longer than --timeout)")


def _display(path: str) -> str:
    """A path relative to the current directory when inside it (as `check` prints them)."""
    absolute = os.path.abspath(path)
    cwd = os.path.join(os.getcwd(), "")
    return os.path.relpath(absolute) if absolute.startswith(cwd) else absolute


def run_child(script: str, args: list[str], max_steps: int, timeout: float = DEFAULT_TIMEOUT,
              output=None, record: dict | None = None) -> dict:
    """Run SCRIPT in an isolated, instrumented interpreter; its JSON result (with "pid").

    The script's standard output goes to `output` (default: this process's standard error, so a
    JSON report on standard output stays clean); its standard error is inherited. `record`: the
    `--resume-check` recording (see `instrument._Recorder`). Raises
    TraceFailed, or Interrupted when this process got SIGINT/SIGTERM/SIGHUP (in the main thread).
    """
    package_root = str(Path(__file__).resolve().parents[2])
    token = secrets.token_hex(8)
    env = dict(os.environ, TRAINLINT_TRACE_USER_SITE="1" if site.ENABLE_USER_SITE else "0", **{TOKEN: token})
    if record is not None:  # `--resume-check`: per-step digests; one thread, so CPU kernels repeat bitwise
        env.update(TRAINLINT_TRACE_RECORD=json.dumps(record), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="trainlint-trace-") as folder:
        result_file = os.path.join(folder, "result.json")
        command = [sys.executable, "-I", "-c", _BOOT, package_root, result_file, str(max_steps), script, *args]
        received: list[int] = []
        previous = _forward_signals(received)
        try:
            try:
                # started and registered as one step: a concurrent run's `reaper.end` must never see it unregistered
                process = reaper.start(lambda: subprocess.Popen(command, stdout=2 if output is None else output,
                                                                env=env, start_new_session=hasattr(os, "setsid")))
            except OSError as err:
                raise TraceFailed(f"cannot start {sys.executable}: {err.strerror or err}") from err
            try:
                how = _wait(process, timeout, received)
            finally:
                try:
                    _end_group(process, token)
                finally:
                    reaper.end(process.pid)
        finally:
            for signum, handler in previous.items():  # None: a handler set outside Python
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        if received:
            raise Interrupted(received[0])
        try:
            with open(result_file, encoding="utf-8") as handle:
                result = json.load(handle)
        except (OSError, ValueError):
            if how == "timeout":  # killed before its first step wrote a snapshot
                result = {"steps": 0, "stopped": "killed", "error": None, "findings": [], "notes": [],
                          "lines": {}, "loader_passes": []}
            else:
                raise TraceFailed(f"the traced run of {script} ended without a result "
                              f"(exit code {process.returncode})") from None
        problem = _malformed(result)
        if problem:
            raise TraceFailed(f"the traced run of {script} left a malformed result ({problem}): the script may "
                              f"have written over it")
        if result["stopped"] == "killed":  # a snapshot: the child did not get to write its report
            if how == "timeout":
                result.update(stopped="timeout", error=f"timed out after {timeout:g} s; the script did not stop "
                                                       f"when asked and was killed")
            elif process.returncode < 0:
                result["error"] = f"the script was killed by {_signal_name(-process.returncode)}"
            elif process.returncode > 0:  # `posix._exit(7)`, or an exit from C: no report, no `finally:`
                result.update(stopped="error", exit_status=process.returncode,
                              error=f"the script exited with code {process.returncode} without a report")
        result["pid"] = process.pid
        return result


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


# The result's shape, checked before it is used: the script runs in the child and can write over
# the file, so a wrong shape is a clear error, not a traceback.
_RESULT = {"steps": int, "stopped": str, "error": (str, type(None)), "findings": list, "notes": list,
           "lines": dict, "loader_passes": list}
_FINDING = {"code": str, "path": str, "line": int, "stack": list, "evidence": str}


def _malformed(result) -> str | None:
    """What is wrong with the child's result, or None."""
    if not isinstance(result, dict):
        return f"a JSON {type(result).__name__}, not an object"
    for key, kind in _RESULT.items():
        if not isinstance(result.get(key), kind) or (kind is int and isinstance(result.get(key), bool)):
            return f"{key!r} missing or of the wrong type"
    if result["stopped"] not in ("max-steps", "end", "error", "timeout", "killed", "interrupted"):
        return f"an unknown 'stopped' value {result['stopped'][:40]!r}"
    if not isinstance(result.get("exit_status"), (int, type(None))) or not isinstance(result.get("caught_stop"),
                                                                                      (str, type(None))):
        return "'exit_status' or 'caught_stop' of the wrong type"
    for item in result["findings"]:
        if not isinstance(item, dict) or any(not isinstance(item.get(k), t) for k, t in _FINDING.items()) or \
                any(not (isinstance(f, list) and len(f) == 2) for f in item["stack"]):
            return "a finding of the wrong shape"
    for note in result["notes"]:
        if not isinstance(note, dict) or not all(isinstance(note.get(k), t) for k, t in
                                                 (("code", str), ("path", str), ("line", int), ("note", str))):
            return "a note of the wrong shape"
    for path, counts in result["lines"].items():
        if not isinstance(counts, dict) or not all(isinstance(v, int) for v in counts.values()):
            return "line counts of the wrong shape"
        try:
            [int(k) for k in counts]
        except ValueError:
            return "line counts of the wrong shape"
    for run in result["loader_passes"]:
        if not isinstance(run, dict) or not isinstance(run.get("path"), str) or \
                not all(isinstance(run.get(k), int) for k in ("first", "last")) or not isinstance(run.get("sizes"), list) \
                or not all(isinstance(size, (int, type(None))) for size in run["sizes"]):
            return "a loader pass of the wrong shape"
    for key in ("optimizers",):
        if not isinstance(result.get(key, []), list) or not all(
                isinstance(o, dict) and isinstance(o.get("type"), str) and isinstance(o.get("steps"), int)
                and isinstance(o.get("path"), (str, type(None)))
                for o in result.get(key, [])):
            return f"{key!r} of the wrong shape"
    for key in ("manual_updates", "processes", "record"):
        if not isinstance(result.get(key), (dict, type(None))):
            return f"{key!r} of the wrong type"
    return None


_FORWARDED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def _forward_signals(received: list[int]) -> dict:
    """While the child runs, SIGINT/SIGTERM/SIGHUP to this process are noted (the wait forwards them);
    only the main thread can set handlers (a trace started from a thread keeps the defaults)."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def note(signum, frame):
        received.append(signum)

    return {signum: signal.signal(signum, note) for signum in _FORWARDED}


def _wait(process: subprocess.Popen, timeout: float, received: list[int]) -> str | None:
    """Until the child ends: at the timeout it gets SIGTERM (it reports and stops), a signal this
    process got is passed on; either way it has GRACE seconds, then SIGKILL. Why it was stopped."""
    now = time.monotonic()
    deadline, killed_at, how, forwarded = now + timeout, None, None, 0
    while True:
        try:
            process.wait(timeout=0.05)
            return how
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if forwarded < len(received):
            _signal(process, received[forwarded])
            forwarded = len(received)
            how = how or "interrupted"
            killed_at = killed_at or now + GRACE
        if how is None and now >= deadline:
            _signal(process, signal.SIGTERM)
            how, killed_at = "timeout", now + GRACE
        if killed_at is not None and now >= killed_at:
            _signal(process, signal.SIGKILL, group=True)
            process.wait()
            return how


def _signal(process: subprocess.Popen, signum: int, group: bool = False) -> None:
    try:
        if group and hasattr(os, "killpg"):
            os.killpg(process.pid, signum)
        elif process.returncode is None:
            process.send_signal(signum)
    except (ProcessLookupError, PermissionError):
        pass


def _end_group(process: subprocess.Popen, token: str) -> None:
    """After the child: kill its process group (DataLoader workers, forks), then every process left
    with this run's token in its environment (those that started their own session). Linux lists
    them in /proc; elsewhere the group is all that is killed."""
    if process.returncode is None:
        _signal(process, signal.SIGKILL, group=True)
        process.wait()
    _signal(process, signal.SIGKILL, group=True)
    for _ in range(5):  # a holder may fork while it is being killed: look again
        holders = _token_holders(token)
        for pid in holders:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not holders:
            break
        time.sleep(0.02)


def _token_holders(token: str) -> list[int]:
    marker = f"{TOKEN}={token}".encode()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/environ", "rb") as handle:
                    if marker in handle.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                continue
    return found


def lint_for_trace(script: str, result: dict, settings: Settings) -> list[Finding]:
    """The script and every other file of the user's code the run executed (the project files it
    imports), through the engine."""
    script_abs = os.path.abspath(script)
    files = [script]
    for path in sorted(result.get("lines", {})):
        if path != script_abs and path.endswith(".py") and os.path.isfile(path):
            files.append(_display(path))
    return [f for r in lint_paths(files, settings) for f in r.findings]


def _batch_evidence(finding: Finding, passes: list[dict]) -> tuple[str, str] | None:
    """TL601: the loader passes of the function holding the division; unequal batches confirm."""
    path = os.path.abspath(finding.path)
    here = [p for p in passes if p["path"] == path and p["first"] <= finding.line <= p["last"]]
    if not here:
        return None
    innermost = min(p["last"] - p["first"] for p in here)
    sizes = collections.Counter(s for p in here if p["last"] - p["first"] == innermost for s in p["sizes"]
                                if s is not None)
    if not sizes:
        return None
    shown = ", ".join(f"{size} ({count}x)" for size, count in sorted(sizes.items(), reverse=True))
    if len(sizes) > 1:
        big, small = max(sizes), min(sizes)
        return CONFIRMED, (f"the loader in this function yielded batches of {shown} samples: in a mean of "
                           f"per-batch means each sample of a {small}-sample batch weighs {big / small:.2g}x "
                           f"one of a {big}-sample batch")
    return NOT_CONFIRMED, f"every batch had {shown.split(' ')[0]} samples: the mean of batch means is exact here"


def join(static: list[Finding], result: dict, script: str, max_steps: int) -> TraceReport:
    runtime = collections.defaultdict(list)
    for item in result["findings"]:
        runtime[item["code"]].append(item)
    notes = {(n["code"], n["path"], n["line"]): n["note"] for n in result["notes"]}
    lines = {path: {int(k): v for k, v in counts.items()} for path, counts in result["lines"].items()}
    stopped = result["stopped"]
    counts = [o["steps"] for o in result.get("optimizers", [])]
    # as --max-steps counts them: per optimizer
    steps = _steps(max(counts)) + " per optimizer" if len(counts) > 1 else _steps(result["steps"])
    if stopped == "max-steps":
        not_ran = f"the line never ran in {steps} (stopped at --max-steps {max_steps})"
    elif stopped == "end":
        not_ran = f"the line never ran ({steps}, then the script ended)"
    else:
        not_ran = f"the line never ran before the script stopped ({steps})"
    matched: set[int] = set()
    findings = []
    for finding in sorted(static, key=lambda f: f.sort_key):
        path = os.path.abspath(finding.path)
        status, evidence = None, None
        for item in runtime.get(finding.code, ()):
            if [path, finding.line] in item["stack"]:
                if status is None:
                    status, evidence = CONFIRMED, item["evidence"]
                matched.add(id(item))
        hits = lines.get(path, {}).get(finding.line, 0)
        if status is None and finding.code == "TL601" and hits:
            status, evidence = _batch_evidence(finding, result.get("loader_passes", [])) or (None, None)
        if status is None:
            if not hits:
                status, evidence = NOT_REACHED, not_ran
            elif finding.code not in RUNTIME_CHECKS:
                status, evidence = NOT_CONFIRMED, f"the line ran {hits}x; trace has no runtime check for {finding.code}"
            else:
                why = notes.get((finding.code, path, finding.line), "the hazard did not show")
                status, evidence = NOT_CONFIRMED, f"the line ran {hits}x: {why}"
        findings.append({"code": finding.code, "path": finding.path, "line": finding.line,
                         "severity": finding.severity.value, "status": status, "evidence": evidence})
    rules = registry()
    runtime_only = [{"code": item["code"], "path": _display(item["path"]), "line": item["line"],
                     "severity": rules[item["code"]].severity.value if item["code"] in rules else "warning",
                     "evidence": item["evidence"]}
                    for items in runtime.values() for item in items
                    if id(item) not in matched and not item.get("confirm_only")]
    runtime_only.sort(key=lambda r: (r["path"], r["line"], r["code"]))
    optimizers = [dict(o, path=_display(o["path"]) if o.get("path") else None) for o in result.get("optimizers", [])]
    return TraceReport(_display(script), result["steps"], stopped, result["error"] and plain_lines(result["error"]),
                       findings, runtime_only, optimizers, result.get("manual_updates"), result.get("caught_stop"),
                       result.get("pid"), result.get("processes"), result.get("exit_status"))


def trace_script(script: str, args: list[str] | None = None, max_steps: int = DEFAULT_MAX_STEPS,
                 settings: Settings | None = None, timeout: float = DEFAULT_TIMEOUT, output=None) -> TraceReport:
    """The whole command without its output: run, lint, join. Raises TraceFailed."""
    result = run_child(script, list(args or []), max_steps, timeout, output)
    static = lint_for_trace(script, result, settings or Settings())
    return join(static, result, script, max_steps)


def _steps(count: int) -> str:
    return f"{count} optimizer step{'' if count == 1 else 's'}"


def _step_counts(report: TraceReport) -> str:
    """`6 optimizer steps per optimizer (2 optimizers: Adam at gan.py:40: 6, Adam at gan.py:52: 6)`,
    counted as --max-steps counts them; one optimizer: `6 optimizer steps (Adam)`."""
    if len(report.optimizers) > 1:
        counts = [o["steps"] for o in report.optimizers]
        parts = [f"{o['type']} at {os.path.basename(o['path']) if o['path'] else '?'}:{o['line']}: {o['steps']}"
                 for o in report.optimizers]
        return (f"{'' if len(set(counts)) == 1 else 'up to '}{_steps(max(counts))} per optimizer "
                f"({len(counts)} optimizers: {', '.join(parts)})")
    text = _steps(report.steps)
    if report.optimizers:
        text += f" ({report.optimizers[0]['type']})"
    return text


ERROR_LIMIT = 2000  # characters of the script's error in the text report (JSON has all of it)


def shorten(error: str, limit: int = ERROR_LIMIT) -> str:
    """A long error (TorchScript's graph diff, a tensor printed whole) as its first and last lines,
    each clipped (the last keeps its end: `(at train.py:12)`), with how much was left out."""
    if len(error) <= limit:
        return error
    lines = error.splitlines()
    width = limit // 8
    head = [line if len(line) <= width else line[:width] + " …" for line in lines[:5]]
    tail = [line if len(line) <= width else "… " + line[-width:] for line in lines[5:][-2:]]
    if len(lines) == 1:  # one long line: its start and its end
        head, tail = [lines[0][:limit // 2] + " …"], ["… " + lines[0][-limit // 4:]]
    left = len(lines) - len(head) - len(tail)
    note = (f"[{len(error):,} characters in all{f', {left:,} more lines' if left > 0 else ''}: the full text is "
            f"in --format json]")
    return "\n".join([*head, note, *tail])


def render_text(report: TraceReport) -> str:
    how = {"max-steps": "stopped at --max-steps", "end": "the script ended", "error": "the script raised",
           "timeout": "timed out", "killed": "the script was killed",
           "interrupted": "interrupted"}[report.stopped]
    if report.caught_stop:
        how += f"; the script caught the stop and went on at {report.caught_stop}, so trace ended it there"
    out = [f"trainlint trace {report.script}: {_step_counts(report)} ({how})"]
    if report.error:
        out.append(f"error: {shorten(report.error)}")
    if report.hint:
        out.append(f"hint: {report.hint}")
    out.append("")
    for f in report.findings:
        out.append(f"{f['path']}:{f['line']}: {f['code']} {f['status']}: {f['evidence']}")
    if report.runtime_only:
        out += ["", "Runtime only (the static pass did not report these):"]
        out += [f"{r['path']}:{r['line']}: {r['code']} RUNTIME-ONLY: {r['evidence']}" for r in report.runtime_only]
    counts = collections.Counter(f["status"] for f in report.findings)
    summary = ", ".join(f"{counts[s]} {s.lower()}" for s in (CONFIRMED, NOT_CONFIRMED, NOT_REACHED))
    out += ["", f"{summary}, {len(report.runtime_only)} runtime-only"]
    return "\n".join(out) + "\n"


def render_json(report: TraceReport) -> str:
    return json.dumps(report.to_dict(), indent=2) + "\n"
