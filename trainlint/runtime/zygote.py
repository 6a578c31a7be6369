"""A torch-loaded parent that forks one fresh child per demo script.

Started by `runner` as `python -m trainlint.runtime.zygote`. It imports torch once (seconds,
far longer than any demo), then serves requests, one JSON object per line on stdin:
`{"id": ..., "script": path, "stdout": path, "stderr": path, "timeout": seconds}`. For each it
forks at once a child that runs the script as `__main__` with its output sent to the given files;
when a child ends (or is killed after `timeout`) it answers `{"id": ..., "exit": code}` or
`{"id": ..., "exit": null, "timeout": true}`. The caller decides how many run at a time.

A child forked from here is a new process that has just imported torch (and `_WARM`), nothing
else: no other demo's RNG state, grad mode, warning filters or open files reach it. Nothing has
run on torch's thread pools before the fork, so forking is safe.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
import warnings

# Imported once here rather than in every child: building any optimizer imports torch._dynamo,
# which takes longer than the demos themselves.
_WARM = ("torch.optim", "torch.utils.data", "torch._dynamo")


def _run_child(job: dict) -> None:
    """In the forked child: redirect output, one intra-op thread, run the script, exit."""
    code = 1
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(os.open(job["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
        os.dup2(os.open(job["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", closefd=False, buffering=1)
        sys.stderr = open(2, "w", closefd=False, buffering=1)
        import runpy
        import traceback

        import torch

        torch.set_num_threads(1)  # CPU reductions in one fixed order: bitwise repeatable
        os.chdir(os.path.dirname(job["script"]))
        sys.argv = [job["script"]]
        try:
            runpy.run_path(job["script"], run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _status(pid: int) -> dict | None:
    """The child's exit status if it has finished, else None."""
    done, status = os.waitpid(pid, os.WNOHANG)
    return {"exit": os.waitstatus_to_exitcode(status)} if done else None


def main() -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "Failed to initialize NumPy": the demos do not use it
            import torch

            for name in _WARM:
                try:
                    __import__(name)
                except Exception:  # noqa: BLE001 - only a speed-up; the child imports it if it can
                    pass
    except Exception as exc:  # noqa: BLE001 - whatever stops torch from importing is the answer
        print(json.dumps({"error": f"cannot import torch: {type(exc).__name__}: {exc}"}), flush=True)
        return
    print(json.dumps({"torch": torch.__version__}), flush=True)
    running: dict[int, tuple[object, float]] = {}  # pid -> (request id, deadline)
    pending = b""
    reading = True
    while reading or running:
        if reading:
            ready, _, _ = select.select([0], [], [], 0.005 if running else None)
            if ready:
                data = os.read(0, 65536)
                reading = bool(data)
                pending += data
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    if line.strip():
                        job = json.loads(line)
                        pid = os.fork()
                        if pid == 0:
                            _run_child(job)
                        running[pid] = (job.get("id"), time.monotonic() + float(job.get("timeout", 120)))
        else:
            time.sleep(0.005)
        for pid, (job_id, deadline) in list(running.items()):
            answer = _status(pid)
            if answer is None and time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                answer = {"exit": None, "timeout": True}
            if answer is not None:
                del running[pid]
                print(json.dumps({"id": job_id, **answer}), flush=True)


if __name__ == "__main__":
    main()
