"""Every process a traced run leaves behind is killed (`trace.run_child` uses this).

The traced child runs in a session and process group of its own, and its group is killed at the
end; a descendant that started a session of its own (`os.setsid()`) is out of that group, and one
that also cleared its environment carries no token to find it by. So, on Linux, while a traced
run is going this process is a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`): a descendant
whose parent exits is re-parented to this process instead of to init, so it stays a descendant.
At the end of the run, every descendant of the child and every process re-parented here since
the run started is killed (found by walking the parent links in /proc) and reaped.

Several runs at once in one process (the library used from threads): a run never touches the
children of another run that is still going; a process re-parented here while two runs were
going is killed by the first of them to end. Processes this process started itself before the
run are never touched; ones it starts during a run (other than runs) are, if they are its
children when the run ends: do not start other processes while tracing, or trace in a process of
its own (the `trainlint trace` command does). Elsewhere than Linux: the group and the token only.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Callable

_PR_SET_CHILD_SUBREAPER = 36
_active: dict[int, int] = {}  # pid of each traced child still being run -> its start time (clock ticks)
_lock = threading.Lock()


def _prctl_subreaper(on: bool) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0)
    except (OSError, AttributeError):  # no libc prctl: the group and the token remain
        pass


def _table() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, start time in clock ticks, state letter) of every process in /proc."""
    table = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            table[int(entry)] = (int(fields[1]), int(fields[19]), fields[0].decode())
        except (OSError, IndexError, ValueError):
            continue
    return table


def _subtree(root: int, table: dict) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def start(spawn: Callable[[], subprocess.Popen]) -> subprocess.Popen:
    """Start a traced child (`spawn()`) and register it in one step, under the lock. `end()` of a
    run in another thread kills every descendant of this process started after its own run that
    is no registered run: a child between its fork and its registration would be taken for a
    leftover, killed and reaped, and its own `wait()` would see exit code 0 with no result."""
    with _lock:
        process = spawn()
        _register(process.pid)
        return process


def _register(pid: int) -> None:
    """From now on orphans of the run `pid` come here."""
    if not _active:
        _prctl_subreaper(True)
    _active[pid] = _table().get(pid, (0, 0, ""))[1]


def end(pid: int) -> None:
    """The traced child `pid` has ended (and was waited for): kill and reap what it left."""
    me = os.getpid()
    with _lock:
        since = _active.get(pid, 0)
        others = {p for p in _active if p != pid}
        for _ in range(5):  # a process may fork while it is being killed: look again
            table = _table()
            spared = set(others)
            for other in others:
                spared |= _subtree(other, table)
            left = [p for p in _subtree(me, table) if p not in spared and p != pid and table[p][1] >= since]
            for target in left:
                try:
                    os.kill(target, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            _reap([p for p in left if table[p][0] == me])
            if not [p for p in left if table[p][2] != "Z"]:
                break
            time.sleep(0.02)
        _active.pop(pid, None)
        if not _active:
            _prctl_subreaper(False)


def _reap(pids: list[int]) -> None:
    """Wait for killed children of this process (re-parented orphans), so none stays a zombie."""
    deadline = time.monotonic() + 1.0
    waiting = set(pids)
    while waiting and time.monotonic() < deadline:
        for pid in list(waiting):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                waiting.discard(pid)
        if waiting:
            time.sleep(0.01)
