"""Run demonstration scripts, each in a fresh process, and collect the JSON each one prints.

A demo script is a complete program: it seeds its own RNGs, trains a tiny model on the CPU and
prints one JSON object as the last line of its standard output. Every script runs in its own
process, so nothing (RNG state, grad mode, warning filters, files) leaks between variants.

Importing torch takes seconds, longer than any demo. So one `zygote` process
(`sys.executable -m trainlint.runtime.zygote`) imports torch once and forks a fresh child per
script, `workers` of them at a time. Where `os.fork` does not exist, every script is started as its own
`sys.executable` process instead: slower, same results.

This process never imports torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

DEFAULT_WORKERS = 2
DEFAULT_TIMEOUT = 120.0


class TorchUnavailable(RuntimeError):
    """torch cannot be imported by `sys.executable`; the message says why."""


@dataclass(frozen=True)
class Script:
    """A program to run; `name` names its folder and appears in error messages."""

    name: str
    source: str


@dataclass(frozen=True)
class RunResult:
    name: str
    measure: dict | None  # the JSON object the script printed last; None when it failed
    error: str | None  # why there is no measurement: the script's last stderr line, a timeout
    seconds: float


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    # One thread everywhere: repeatable CPU reductions, and two workers do not fight over cores.
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0", PYTHONWARNINGS="ignore")
    package_root = str(Path(__file__).resolve().parents[2])  # the folder holding `trainlint/`
    # An empty PYTHONPATH entry means the working directory: drop those (see `_PYTHON`).
    entries = [package_root, *env.get("PYTHONPATH", "").split(os.pathsep)]
    env["PYTHONPATH"] = os.pathsep.join(e for e in entries if e)
    env.pop("PYTHONSTARTUP", None)
    return env


# `-P`: do not put the working directory (or a script's folder) first on sys.path, so a `torch.py`
# in the directory confirm is run from is never imported in its place. `-E` is not used: the
# package root comes through PYTHONPATH, and the user's torch may be found through it too.
_PYTHON = (sys.executable, "-P")


class _Zygote:
    """The torch-loaded process that forks a child per script (see `zygote`)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [*_PYTHON, "-m", "trainlint.runtime.zygote"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_environment())
        hello = self.answer()
        if "torch" not in hello:
            self.close()
            raise TorchUnavailable(hello.get("error", "the demo runner did not start"))
        self.torch_version: str = hello["torch"]

    def answer(self) -> dict:
        line = self.process.stdout.readline()
        try:
            return json.loads(line) if line.strip() else {"error": "the demo runner exited"}
        except ValueError:
            return {"error": f"unexpected output from the demo runner: {line[:80]!r}"}

    def submit(self, job_id: int, script: str, stdout: str, stderr: str, timeout: float) -> None:
        request = {"id": job_id, "script": script, "stdout": stdout, "stderr": stderr, "timeout": timeout}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()


def _spawn(script: str, stdout: str, stderr: str, timeout: float) -> dict:
    """Without fork: a new interpreter per script."""
    with open(stdout, "w") as out, open(stderr, "w") as err:
        try:
            done = subprocess.run([*_PYTHON, script], stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                  cwd=os.path.dirname(script), env=_environment(), timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"exit": None, "timeout": True}
    return {"exit": done.returncode}


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _result(name: str, status: dict, out_path: str, err_path: str, seconds: float, timeout: float) -> RunResult:
    if status.get("timeout"):
        return RunResult(name, None, f"timed out after {timeout:.0f} s", seconds)
    if "error" in status:
        return RunResult(name, None, status["error"], seconds)
    if status.get("exit") != 0:
        return RunResult(name, None, _last_line(_read(err_path)) or f"exit code {status.get('exit')}", seconds)
    last = _last_line(_read(out_path))
    try:
        measure = json.loads(last)
    except ValueError:
        return RunResult(name, None, f"no JSON on the last line of output: {last[:80]!r}", seconds)
    if not isinstance(measure, dict):
        return RunResult(name, None, "the last line of output is not a JSON object", seconds)
    return RunResult(name, measure, None, seconds)


def run_scripts(scripts: list[Script], workers: int = DEFAULT_WORKERS,
                timeout: float = DEFAULT_TIMEOUT) -> tuple[str | None, list[RunResult]]:
    """Run every script in a fresh process, at most `workers` at a time.

    Returns the torch version the scripts ran with (None without fork) and the results in input
    order. Raises `TorchUnavailable` when torch cannot be imported.
    """
    names = [s.name for s in scripts]
    if len(set(names)) != len(names):
        raise ValueError("script names must be unique")
    workers = max(1, workers)
    with tempfile.TemporaryDirectory(prefix="trainlint-confirm-") as workdir:
        paths = []
        for number, script in enumerate(scripts):
            folder = os.path.join(workdir, f"{number:03d}-{script.name}")
            os.makedirs(folder)
            path = os.path.join(folder, "demo.py")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(script.source)
            paths.append((path, path + ".stdout", path + ".stderr"))

        def result(number: int, status: dict, seconds: float) -> RunResult:
            _, out_path, err_path = paths[number]
            return _result(scripts[number].name, status, out_path, err_path, seconds, timeout)

        if not hasattr(os, "fork"):
            with ThreadPoolExecutor(max_workers=workers) as pool:
                def spawn(number: int) -> RunResult:
                    start = time.perf_counter()
                    return result(number, _spawn(*paths[number], timeout), time.perf_counter() - start)
                return None, list(pool.map(spawn, range(len(scripts))))

        zygote = _Zygote()
        started: dict[int, float] = {}
        results: dict[int, RunResult] = {}
        try:
            waiting = iter(range(len(scripts)))
            for number in waiting:
                started[number] = time.perf_counter()
                zygote.submit(number, *paths[number], timeout)
                if len(started) - len(results) >= workers:
                    break
            while len(results) < len(started):
                answer = zygote.answer()
                if "id" not in answer:
                    raise RuntimeError(f"the demo runner failed: {answer.get('error', answer)}")
                number = answer["id"]
                results[number] = result(number, answer, time.perf_counter() - started[number])
                following = next(waiting, None)
                if following is not None:
                    started[following] = time.perf_counter()
                    zygote.submit(following, *paths[following], timeout)
        finally:
            zygote.close()
        return zygote.torch_version, [results[n] for n in range(len(scripts))]
