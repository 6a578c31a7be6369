"""The client of the resident process: a plain `trainlint check` handed to a process that has
already imported LibCST and every rule.

A one-file check spends most of its time importing (LibCST alone is about two thirds of a bare
parse of a training script), not checking. So, as Gradle's and Bazel's servers and dmypy do, the
first plain check of a session starts a resident process in the background after its own run,
and later plain checks hand it their arguments: it forks a child for each request, the child
takes the client's working directory, environment, umask, arguments and its very stdin, stdout
and stderr (passed over the socket as file descriptors, so a terminal stays a terminal), runs the
same code the client would have run, and sends back the exit code. Each request runs in a fresh
fork of a process that has run nothing of a user's, so no state of one check reaches another.

What is served: only the runs `trainlint.launch` takes on its click-free path (paths and flags
without values), on Linux. Off when TRAINLINT_RESIDENT is 0/false/no/off, and by default under CI
(the `CI` variable: one run per job gains nothing and a process must not outlive the job);
TRAINLINT_RESIDENT=1 turns it on there too.

Which process serves: one per key, the digest of everything that decides what code a check runs
(the interpreter, its module search path, the version of trainlint and the size and modification
time of each of its source files, TRAINLINT_EAGER_RULES), so an upgrade or an edit of an editable
install is never served by old code. Its socket lives in a folder only the user can enter
($XDG_RUNTIME_DIR/trainlint, else /tmp/trainlint-UID, or TRAINLINT_RESIDENT_DIR); a folder that
is not the user's own with mode 0700 turns the resident process off. It exits after
TRAINLINT_RESIDENT_IDLE seconds (default 900) without a request, or on `trainlint resident --stop`.

This module imports nothing of trainlint's and nothing heavy: it runs before every plain check.
The server is trainlint.resident_server.
"""

from __future__ import annotations

import os
import sys

#: the environment variable that turns the resident process on (1) or off (0)
SWITCH = "TRAINLINT_RESIDENT"
_OFF = {"0", "false", "no", "off"}
_ON = {"1", "true", "yes", "on"}
#: variables read when trainlint's modules are imported: part of the key
_IMPORT_TIME_VARIABLES = ("TRAINLINT_EAGER_RULES",)
#: the longest path an AF_UNIX socket can have on Linux (sun_path holds 108 bytes with its NUL)
_SOCKET_PATH_MAX = 107


def wanted() -> bool:
    """Whether this run may be served by (and may start) a resident process."""
    value = os.environ.get(SWITCH, "").strip().lower()
    if value in _OFF or not sys.platform.startswith("linux"):
        return False
    return value in _ON or not os.environ.get("CI")


def folder() -> str | None:
    """The user's folder of sockets, created if missing; None when it cannot be trusted (not a
    folder of the user's own that only the user can enter)."""
    chosen = os.environ.get("TRAINLINT_RESIDENT_DIR")
    if not chosen:
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        chosen = os.path.join(runtime, "trainlint") if runtime else \
            os.path.join(os.environ.get("TMPDIR") or "/tmp", f"trainlint-{os.getuid()}")
    try:
        os.mkdir(chosen, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        info = os.lstat(chosen)
    except OSError:
        return None
    import stat

    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return chosen


def _sources(package_dirs: list[str]) -> list[tuple[str, int, int]]:
    """(path, size, mtime in ns) of every source file of trainlint: what an edit changes."""
    found = []
    pending = list(package_dirs)
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            if entry.name == "__pycache__":
                continue
            try:
                if entry.is_dir():
                    pending.append(entry.path)
                elif entry.name.endswith((".py", ".toml")):
                    info = entry.stat()
                    found.append((entry.path, info.st_size, info.st_mtime_ns))
            except OSError:
                continue
    return sorted(found)


def search_path() -> list[str]:
    """This interpreter's module search path, absolute (the server imports from the same)."""
    return [os.path.abspath(entry) for entry in sys.path]


def key() -> str:
    """The digest that names the process able to serve this one."""
    import hashlib

    import trainlint

    package_dirs = [os.path.dirname(trainlint.__file__)]
    # a source checkout: rules/ beside the package, its parent folder on the package's path
    # (trainlint/__init__.py); installed, rules/ is inside the package
    package_dirs += [os.path.join(entry, "rules") for entry in trainlint.__path__[1:]]
    digest = hashlib.sha256()
    for part in (sys.executable, sys.version, sys.flags.optimize, trainlint.__version__, search_path(),
                 [os.environ.get(name) for name in _IMPORT_TIME_VARIABLES], _sources(package_dirs)):
        digest.update(repr(part).encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()[:24]


def paths(where: str, name: str) -> dict[str, str]:
    """The socket, lock and description files of the process named `name` in `where`."""
    base = os.path.join(where, name)
    return {"socket": base + ".sock", "lock": base + ".lock", "info": base + ".json"}


def _streams() -> dict | None:
    """How the client's standard streams encode text, for the child to write as the client
    would; None when one of them is closed (nothing to pass)."""
    described = {}
    for number, stream in enumerate((sys.stdin, sys.stdout, sys.stderr)):
        try:
            os.fstat(number)
        except OSError:
            return None
        described[str(number)] = [getattr(stream, "encoding", None) or "utf-8",
                                  getattr(stream, "errors", None) or "strict"]
    return described


def serve(argv: list[str], where: str, name: str) -> int | None:
    """Run `argv` in the resident process named `name`: its exit code, or None when none ran it
    (no process listens, or it refused before starting), so the caller runs it here."""
    import socket

    streams = _streams()
    files = paths(where, name)
    if streams is None or len(files["socket"].encode()) > _SOCKET_PATH_MAX:
        return None
    import json

    request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "streams": streams,
                          "umask": _umask()}).encode("utf-8", "surrogateescape")
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(files["socket"])
        socket.send_fds(client, [len(request).to_bytes(8, "big") + request], [0, 1, 2])
        replies = client.makefile("rb")
        started = replies.readline().split()
        if len(started) != 2 or started[0] != b"pid":
            return None  # refused or gone before the child started: nothing ran
        child = int(started[1])
    except (OSError, ValueError):
        client.close()
        return None
    # From here the check is running in the child: the client only waits for its code.
    while True:
        try:
            ended = replies.readline().split()
            break
        except KeyboardInterrupt:  # the terminal's interrupt reaches the client: pass it on
            try:
                os.kill(child, 2)
            except OSError:
                pass
        except OSError:
            ended = []
            break
    client.close()
    if len(ended) == 2 and ended[0] == b"exit":
        return int(ended[1])
    sys.stderr.write("trainlint: error: the resident process ended without an exit code "
                     f"(run again with {SWITCH}=0 to check without it)\n")
    return 2


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def start(where: str, name: str) -> None:
    """Start the resident process named `name` in the background (it exits at once if another
    one holds its lock); never waits for it."""
    boot = ("import sys; sys.path[:] = %r; from trainlint.resident_server import main; main(%r, %r)"
            % (search_path(), where, name))
    import subprocess

    try:
        # close_fds: a descriptor the client inherited (a CI runner's or a build tool's pipe) must
        # not stay open in a process that lives on, or whoever waits for its end waits for ours
        subprocess.Popen([sys.executable, "-c", boot], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True, cwd="/")
    except OSError:
        pass  # the next run checks here again


def running(where: str) -> list[dict]:
    """The resident processes listening in `where`: each one's description (pid, version,
    python, package, started) from its `.json` file, for those whose process is a live server."""
    import glob
    import json

    found = []
    for info in sorted(glob.glob(os.path.join(where, "*.json"))):
        try:
            with open(info, encoding="utf-8") as handle:
                described = json.load(handle)
            pid = int(described["pid"])
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                alive = b"trainlint.resident_server" in handle.read()
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if alive:
            found.append({**described, "name": os.path.basename(info)[:-len(".json")]})
    return found


def stop(where: str) -> list[dict]:
    """Ask every resident process in `where` to exit (SIGTERM: it removes its socket); the ones
    asked."""
    import signal

    stopped = []
    for described in running(where):
        try:
            os.kill(described["pid"], signal.SIGTERM)
            stopped.append(described)
        except OSError:
            continue
    return stopped
