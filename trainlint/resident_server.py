"""The resident process (see trainlint.resident for why and when): it imports LibCST and every
rule once, then forks a child per request that runs the check as the client would have.

Started by a client as `python -c` with the client's module search path. It takes its lock
first (a second server for the same key exits before importing anything heavy), warms up by
checking a small training script in a temporary folder (so the lazily imported modules are
loaded before the first fork), then listens. A request carries the client's arguments, working
directory, environment, umask and the encodings of its streams, with the streams themselves as
file descriptors. The child answers `pid N` when it starts and `exit CODE` when it is done.
"""

from __future__ import annotations

import os
import signal
import socket
import sys

from trainlint import resident

#: a training script with a finding, for the warm-up check (imports what a real check imports)
_WARM_UP = '''import torch
from torch.utils.data import DataLoader

def train(model, data, epochs):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)
    loader = DataLoader(data, batch_size=32, shuffle=True)
    for epoch in range(epochs):
        model.train()
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        scheduler.step()
        model.eval()
        total = sum(model(x).sum() for x, _ in loader)
    torch.save(model.state_dict(), "last.pt")
    return torch.load("last.pt", weights_only=False)
'''


def main(where: str, name: str) -> None:
    import fcntl

    files = resident.paths(where, name)
    lock = os.open(files["lock"], os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another process serves this key, or is starting to
    _warm_up()
    os.chdir("/")  # hold no folder of the first client's (each child goes to its client's)
    try:
        os.unlink(files["socket"])  # left by a process that was killed
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(files["socket"])
    os.chmod(files["socket"], 0o600)
    listener.listen(64)
    _describe(files["info"])
    idle = _idle_seconds()
    log = os.environ.get("TRAINLINT_RESIDENT_LOG")  # the server's own setting, not a client's
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
    signal.signal(signal.SIGTERM, _stop)
    try:
        listener.settimeout(idle)
        while True:
            try:
                connection, _ = listener.accept()
            except (TimeoutError, socket.timeout):
                break
            if not _same_user(connection):
                connection.close()
                continue
            connection.settimeout(None)
            if os.fork() == 0:
                try:  # the child never goes back to the loop, whatever happens
                    listener.close()
                    os.close(lock)
                    _child(connection, log)
                finally:
                    os._exit(1)
            connection.close()
    except SystemExit:
        pass
    finally:
        for path in (files["socket"], files["info"], files["lock"]):
            try:
                os.unlink(path)
            except OSError:
                pass
        listener.close()


def _stop(signum, frame) -> None:
    raise SystemExit(0)


def _idle_seconds() -> float:
    try:
        return max(1.0, float(os.environ.get("TRAINLINT_RESIDENT_IDLE", "900")))
    except ValueError:
        return 900.0


def _describe(path: str) -> None:
    """What `trainlint resident` shows: the process, its version and where it imports from."""
    import json
    import time

    import trainlint

    text = json.dumps({"pid": os.getpid(), "version": trainlint.__version__, "python": sys.executable,
                       "package": os.path.dirname(trainlint.__file__), "started": time.time()})
    temporary = f"{path}.{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def _same_user(connection: socket.socket) -> bool:
    """The peer runs as this user (the folder's mode already keeps others out; this is the second
    lock on the door)."""
    import struct

    try:
        credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return False
    _pid, uid, _gid = struct.unpack("3i", credentials)
    return uid == os.getuid()


def _warm_up() -> None:
    """Check a small training script once, its output thrown away, so that what a check imports
    lazily is imported before the first fork. Runs in a fresh temporary folder with --isolated and
    --no-cache: no configuration or cache of the user's is read or written."""
    import io
    import tempfile

    from trainlint import launch
    from trainlint.rules import registry

    registry()  # every rule module: a request may select any of them
    saved = sys.stdout, sys.stderr, os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "train.py")
        with open(script, "w", encoding="utf-8") as handle:
            handle.write(_WARM_UP)
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
        try:
            os.chdir(folder)
            launch.run_here(["check", "--isolated", "--no-cache", script])
        except SystemExit:
            pass
        finally:
            sys.stdout, sys.stderr = saved[0], saved[1]
            os.chdir(saved[2])


def _child(connection: socket.socket, log: str | None) -> None:
    """Run one request in this fork and leave with os._exit; with `log`, append a line to it."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _take_request(connection)
        connection.sendall(f"pid {os.getpid()}\n".encode())
    except BaseException:
        os._exit(0)  # nothing ran: the client checks in its own process
    code = 0
    try:
        from trainlint import launch

        launch.run_here(sys.argv[1:])
    except SystemExit as exit_:
        code = _exit_code(exit_.code)
    except BaseException:  # what the interpreter would print before exiting 1
        import traceback

        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if log:
        _log(log, code)
    try:
        connection.sendall(f"exit {code}\n".encode())
    except OSError:
        pass
    os._exit(0)


def _log(log: str, code: int) -> None:
    """One line per request served (TRAINLINT_RESIDENT_LOG): pid, exit code, folder, arguments."""
    import json

    try:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"pid": os.getpid(), "exit": code, "cwd": os.getcwd(), "argv": sys.argv[1:]})
                         + "\n")
    except OSError:
        pass


def _take_request(connection: socket.socket) -> None:
    """Become the client's process: its streams, working directory, environment, umask, arguments."""
    import json

    request = json.loads(_receive(connection).decode("utf-8", "surrogateescape"))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.umask(request["umask"])
    sys.argv = request["argv"]
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        encoding, errors = request["streams"][str(number)]
        stream = open(number, "r" if number == 0 else "w", encoding=encoding, errors=errors, closefd=False)
        if number == 2 or (number == 1 and os.isatty(1)):
            stream.reconfigure(line_buffering=True)  # as the interpreter sets up its own
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _exit_code(code) -> int:
    """The process exit status SystemExit(code) gives, as the interpreter computes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(f"{code}\n")
    except (OSError, ValueError):
        pass
    return 1


def _receive(connection: socket.socket) -> bytes:
    """The request: an 8-byte length, the JSON, and the client's three standard streams, which
    become this child's 0, 1 and 2."""
    data, fds, _flags, _address = socket.recv_fds(connection, 65536, 3)
    if len(fds) != 3 or len(data) < 8:
        for fd in fds:
            os.close(fd)
        raise ValueError("a request without its streams")
    for number, fd in enumerate(fds):
        os.dup2(fd, number)
        os.close(fd)
    length = int.from_bytes(data[:8], "big")
    data = data[8:]
    while len(data) < length:
        more = connection.recv(min(1 << 20, length - len(data)))
        if not more:
            raise ValueError("a request cut short")
        data += more
    return data
