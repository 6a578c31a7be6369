"""Run demonstration scripts, each in a fresh process, and collect the JSON each one prints.

A demo script is a complete program: it seeds its own RNGs, trains a tiny model on the CPU and
prints one JSON object as the last line of its standard output. Every script runs in its own
process, so nothing (RNG state, autograd mode, warnings filters, open files) leaks from one
variant into the other.

Importing torch takes about two seconds, longer than any demo. So the processes are forked from
a `forkserver` that has imported torch once (started from `sys.executable`; a child forked from
it is as fresh as a new interpreter that has just run `import torch`). Where `forkserver` is not
available the scripts are spawned instead, which is slower but the same.

This module imports torch only inside those child processes.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

DEFAULT_WORKERS = 2
DEFAULT_TIMEOUT = 120.0


@dataclass(frozen=True)
class Script:
    """A program to run: `name` is used for its file name and in error messages."""

    name: str
    source: str


@dataclass(frozen=True)
class RunResult:
    name: str
    measure: dict | None  # the JSON object the script printed last; None when it failed
    error: str | None  # why there is no measurement: the script's last stderr line, a timeout
    seconds: float


def _context():
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        # Only torch: the default would re-import the caller's __main__ (pytest, the CLI).
        ctx.set_forkserver_preload(["trainlint.runtime._preload"])
        return ctx
    return multiprocessing.get_context("spawn")


def _child(script_path: str, out_path: str, err_path: str) -> None:
    """Body of a child process: stdout/stderr to files, one intra-op thread, run the script."""
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.stdout = open(1, "w", closefd=False, buffering=1)
    sys.stderr = open(2, "w", closefd=False, buffering=1)
    import runpy

    from trainlint.runtime._preload import torch

    torch.set_num_threads(1)  # one thread: CPU reductions in a fixed order, bitwise repeatable
    os.chdir(os.path.dirname(script_path))
    try:
        runpy.run_path(script_path, run_name="__main__")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _run_one(ctx, script: Script, workdir: str, timeout: float) -> RunResult:
    folder = os.path.join(workdir, script.name)
    os.makedirs(folder)
    path = os.path.join(folder, "demo.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(script.source)
    out_path, err_path = os.path.join(folder, "stdout"), os.path.join(folder, "stderr")
    start = time.perf_counter()
    process = ctx.Process(target=_child, args=(path, out_path, err_path), name=script.name)
    process.start()
    process.join(timeout)
    if process.is_alive():
        process.kill()
        process.join()
        return RunResult(script.name, None, f"timed out after {timeout:.0f} s", time.perf_counter() - start)
    seconds = time.perf_counter() - start

    def read(p: str) -> str:
        try:
            with open(p, encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return ""

    if process.exitcode != 0:
        reason = _last_line(read(err_path)) or f"exit code {process.exitcode}"
        return RunResult(script.name, None, reason, seconds)
    last = _last_line(read(out_path))
    try:
        measure = json.loads(last)
    except ValueError:
        return RunResult(script.name, None, f"no JSON on the last line of output: {last[:80]!r}", seconds)
    if not isinstance(measure, dict):
        return RunResult(script.name, None, "the last line of output is not a JSON object", seconds)
    return RunResult(script.name, measure, None, seconds)


def run_scripts(scripts: list[Script], workers: int = DEFAULT_WORKERS,
                timeout: float = DEFAULT_TIMEOUT) -> list[RunResult]:
    """Run every script in a fresh process, at most `workers` at a time; results in input order."""
    names = [s.name for s in scripts]
    if len(set(names)) != len(names):
        raise ValueError("script names must be unique")
    ctx = _context()
    with tempfile.TemporaryDirectory(prefix="trainlint-confirm-") as workdir:
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(lambda s: _run_one(ctx, s, workdir, timeout), scripts))
