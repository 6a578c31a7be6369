"""Reading a file's bytes as the linter does, for a checked file and for a project file alike:
regular files only, never blocking, within the size limit.
"""

from __future__ import annotations

import os
import stat

#: Files larger than this are skipped (with a message), not read: generated or data files.
DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024


class UnreadableFile(Exception):
    """A path that cannot be read at all (missing, a directory, no permission)."""


class SkippedFile(Exception):
    """A path deliberately not read: not a regular file, or larger than the size limit."""


def read_source(path: str, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes`.

    Opened without blocking (a fifo named `*.py` would otherwise wait for a writer forever) and
    checked with fstat on the opened descriptor (a symlink to /dev/zero never ends). Raises
    UnreadableFile or SkippedFile with a one-line message.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise UnreadableFile(f"cannot read {path}: {err.strerror or err}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SkippedFile(f"skipped {path}: not a regular file")
        if info.st_size > max_bytes:
            raise SkippedFile(f"skipped {path}: {info.st_size:,} bytes is over the size limit of "
                              f"{max_bytes:,} (max-file-size)")
        chunks, size = [], 0
        while True:  # the file may grow while it is read
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise SkippedFile(f"skipped {path}: over the size limit of {max_bytes:,} bytes (max-file-size)")
        return b"".join(chunks)
    except OSError as err:
        raise UnreadableFile(f"cannot read {path}: {err.strerror or err}") from None
    finally:
        os.close(fd)
