"""Reading a file's bytes as the linter does, for a checked file, a project file, an ignore file
and a configuration file alike: regular files only, never blocking, within a size limit.
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
    """A path deliberately not read: not a regular file, or larger than the size limit."""


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
