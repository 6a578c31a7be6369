"""Reading a file's bytes as the linter does, for a checked file, a project file, an ignore file
and a configuration file alike: regular files only, never blocking, within a size limit, never a
system file a link leads to.
"""

from __future__ import annotations

import os
import stat

#: Files larger than this are skipped (with a message), not read: generated or data files.
DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024


#: Bytes an ignore or configuration file may hold (they are a few KB).
MAX_SMALL_FILE = 1 << 20


class _NotRead(Exception):
    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message  # why, without the path where given: `not a regular file`


class UnreadableFile(_NotRead):
    """A path that cannot be read at all (missing, a directory, no permission)."""


class SkippedFile(_NotRead):
    """A path deliberately not read: not a regular file, larger than the size limit, a system file
    (`/proc`, `/sys`, `/dev`), or (the CLI's check) one whose real path leaves the project."""


#: Where a link may lead to a "regular" file that is no source: the process's environment
#: (/proc/self/environ), kernel state, devices. Never read, so no report can print it.
SYSTEM_FOLDERS = ("/proc", "/sys", "/dev")


def system_path(real: str) -> str | None:
    """The system folder `real` (a real path) lies in, or None."""
    return next((folder for folder in SYSTEM_FOLDERS if real == folder or real.startswith(folder + "/")), None)


def _real_path(fd: int, path: str) -> str:
    """The real path of the file open as `fd`: the kernel's own name for it where it gives one (no
    race with a link changed after the open), else the path with its links resolved."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)


def _unreadable(path: str, err: OSError) -> UnreadableFile:
    reason = err.strerror or str(err)
    return UnreadableFile(f"cannot read {path}: {reason}", reason)


def _skipped(path: str, reason: str) -> SkippedFile:
    return SkippedFile(f"skipped {path}: {reason}", reason)


def read_source(path: str, max_bytes: int, limit: str = "max-file-size") -> bytes:
    """The bytes of a regular file of at most `max_bytes` (`limit` names the setting in messages).

    Opened without blocking (a fifo named `*.py` would otherwise wait for a writer forever, a link
    to /dev/stdin would read the input of whoever runs trainlint) and checked with fstat on the
    opened descriptor (a symlink to /dev/zero never ends). Raises UnreadableFile or SkippedFile
    with a one-line message (and its `reason`, without the path).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError) as err:  # ValueError: a NUL in the path
        raise _unreadable(path, err if isinstance(err, OSError) else OSError(str(err))) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _skipped(path, "not a regular file")
        if os.name == "posix":
            real = _real_path(fd, path)
            if system_path(real):
                raise _skipped(path, f"it leads to {real}, a system file (under {system_path(real)}), "
                                     "which is never read")
        if info.st_size > max_bytes:
            raise _skipped(path, f"{info.st_size:,} bytes is over the size limit of {max_bytes:,} ({limit})")
        chunks, size = [], 0
        while True:  # the file may grow while it is read
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise _skipped(path, f"over the size limit of {max_bytes:,} bytes ({limit})")
        return b"".join(chunks)
    except OSError as err:
        raise _unreadable(path, err) from None
    finally:
        os.close(fd)


def outside_root(path: str, root: str, folders: dict[str, str]) -> str | None:
    """Why `path` is not read when its real path leaves `root` (a real path: the project's, found
    from the paths as named), or None when it stays inside. A link in a checked repository to
    `~/.ssh/id_rsa` must never be read, so no report (`--show-source`) can print it; a link
    within the project is fine. `folders` remembers the real path of each folder asked about
    (realpath costs a system call per path component, and files share their folders)."""
    folder, name = os.path.split(os.path.abspath(path))
    real_folder = folders.get(folder)
    if real_folder is None:
        real_folder = folders[folder] = os.path.realpath(folder)
    real = os.path.join(real_folder, name)
    if os.path.islink(real):
        real = os.path.realpath(real)
    if system_path(real):
        return f"skipped {path}: it leads to {real}, a system file (under {system_path(real)}), which is never read"
    if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
        return None
    return f"skipped {path}: its real path {real} is outside the project root {root}, and is never read"

