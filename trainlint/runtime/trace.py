"""`trainlint trace SCRIPT`: lint the script, run it for a few optimizer steps with torch
instrumented in a child process, and join the two.

Each static finding becomes CONFIRMED (the run showed the hazard at that line, with the evidence),
NOT CONFIRMED (the line ran and the hazard did not show, with why) or NOT REACHED (the line never
ran). Runtime findings at lines the static pass did not report are RUNTIME-ONLY.

This process never imports torch: the child (`trace_child`, hooks in `instrument`) does, and hands
back its observations as JSON. The child runs the user's code: `trace` is a separate command that
says so, and nothing else (check, pre-commit, the language server) ever starts it.

Exit codes: 1 when a finding is CONFIRMED or RUNTIME-ONLY, 0 otherwise (the script's own error is
part of the report, not a trace failure), 2 on a usage error or when the run produced no result.
"""

from __future__ import annotations

import collections
import json
import os
import site
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from trainlint import __version__
from trainlint.engine import lint_paths
from trainlint.finding import Finding
from trainlint.settings import Settings

DEFAULT_MAX_STEPS = 20
DEFAULT_TIMEOUT = 600.0
CONFIRMED, NOT_CONFIRMED, NOT_REACHED = "CONFIRMED", "NOT CONFIRMED", "NOT REACHED"
_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from trainlint.runtime.trace_child import main; main(sys.argv[1:])")
# Rules whose hazard the run can show; other findings that ran are NOT CONFIRMED with this reason.
RUNTIME_CHECKS = frozenset({"TL101", "TL102", "TL104", "TL105", "TL106", "TL201", "TL202", "TL203", "TL204",
                            "TL301", "TL302", "TL303", "TL401", "TL402", "TL403", "TL404", "TL501", "TL502",
                            "TL601", "TL602", "TL801"})


class TraceFailed(Exception):
    """The traced run produced no result (it could not start, or was killed)."""


@dataclass(frozen=True)
class TraceReport:
    script: str
    steps: int
    stopped: str  # "max-steps", "end", "error" or "timeout"
    error: str | None
    findings: list[dict]  # {"code", "path", "line", "status", "evidence"}
    runtime_only: list[dict]  # {"code", "path", "line", "evidence"}

    def to_dict(self) -> dict:
        return {"version": __version__, "script": self.script, "steps": self.steps, "error": self.error,
                "findings": self.findings, "runtime_only": self.runtime_only}

    @property
    def exit_code(self) -> int:
        return 1 if self.runtime_only or any(f["status"] == CONFIRMED for f in self.findings) else 0


def _display(path: str) -> str:
    """A path relative to the current directory when inside it (as `check` prints them)."""
    absolute = os.path.abspath(path)
    cwd = os.path.join(os.getcwd(), "")
    return os.path.relpath(absolute) if absolute.startswith(cwd) else absolute


def run_child(script: str, args: list[str], max_steps: int, timeout: float = DEFAULT_TIMEOUT,
              output=None) -> dict:
    """Run SCRIPT in an isolated, instrumented interpreter; its JSON result.

    The script's standard output goes to `output` (default: this process's standard error, so a
    JSON report on standard output stays clean); its standard error is inherited.
    """
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, TRAINLINT_TRACE_USER_SITE="1" if site.ENABLE_USER_SITE else "0")
    with tempfile.TemporaryDirectory(prefix="trainlint-trace-") as folder:
        result_file = os.path.join(folder, "result.json")
        command = [sys.executable, "-I", "-c", _BOOT, package_root, result_file, str(max_steps), script, *args]
        try:
            process = subprocess.Popen(command, stdout=2 if output is None else output, env=env)
        except OSError as err:
            raise TraceFailed(f"cannot start {sys.executable}: {err.strerror or err}") from err
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.terminate()  # the child turns SIGTERM into a clean stop and still reports
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        except KeyboardInterrupt:
            process.terminate()
            process.wait()
            raise
        try:
            with open(result_file, encoding="utf-8") as handle:
                return json.load(handle)
        except (OSError, ValueError):
            raise TraceFailed(f"the traced run of {script} ended without a result "
                              f"(exit code {process.returncode})") from None


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
    if stopped == "max-steps":
        not_ran = f"the line never ran in {result['steps']} optimizer steps (stopped at --max-steps {max_steps})"
    elif stopped == "end":
        not_ran = f"the line never ran ({result['steps']} optimizer steps, then the script ended)"
    else:
        not_ran = f"the line never ran before the script stopped ({result['steps']} optimizer steps)"
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
        findings.append({"code": finding.code, "path": finding.path, "line": finding.line, "status": status,
                         "evidence": evidence})
    runtime_only = [{"code": item["code"], "path": _display(item["path"]), "line": item["line"],
                     "evidence": item["evidence"]}
                    for items in runtime.values() for item in items
                    if id(item) not in matched and not item.get("confirm_only")]
    runtime_only.sort(key=lambda r: (r["path"], r["line"], r["code"]))
    return TraceReport(_display(script), result["steps"], stopped, result["error"], findings, runtime_only)


def trace_script(script: str, args: list[str] | None = None, max_steps: int = DEFAULT_MAX_STEPS,
                 settings: Settings | None = None, timeout: float = DEFAULT_TIMEOUT, output=None) -> TraceReport:
    """The whole command without its output: run, lint, join. Raises TraceFailed."""
    result = run_child(script, list(args or []), max_steps, timeout, output)
    static = lint_for_trace(script, result, settings or Settings())
    return join(static, result, script, max_steps)


def render_text(report: TraceReport) -> str:
    how = {"max-steps": "stopped at --max-steps", "end": "the script ended", "error": "the script raised",
           "timeout": "timed out"}[report.stopped]
    out = [f"trainlint trace {report.script}: {report.steps} optimizer steps ({how})"]
    if report.error:
        out.append(f"error: {report.error}")
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


def _error(message: str) -> int:
    print(f"trainlint: error: {' '.join(message.split())}", file=sys.stderr)
    return 2


def command(script: str, args: list[str], max_steps: int, fmt: str, timeout: float) -> int:
    """`trainlint trace`: print the report; the exit code (see the module docstring)."""
    import importlib.util

    from trainlint.config import CliSelection, ConfigError, build_settings, resolve_config
    from trainlint.settings import SelectorError

    try:
        if importlib.util.find_spec("torch") is None:
            raise ImportError("torch")
    except (ImportError, ValueError):
        return _error("trainlint trace needs torch: pip install 'trainlint[runtime]'")
    try:
        settings = build_settings(resolve_config(None, False), CliSelection())
    except (ConfigError, SelectorError) as err:
        return _error(str(err))
    try:
        report = trace_script(script, args, max_steps, settings, timeout)
    except TraceFailed as err:
        return _error(str(err))
    sys.stdout.write(render_json(report) if fmt == "json" else render_text(report))
    sys.stdout.flush()
    return report.exit_code
