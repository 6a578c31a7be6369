"""The files of a cache folder that a checked repository may have written itself.

`.trainlint_cache/` lives in the project, so whoever wrote the project can ship it: with entries
that say "no findings", with links in it (a predictable temporary name, `.gitignore`, a folder of
entries) or as a link itself. So:

- the folder, and each folder in it that trainlint uses (`imports/` and the entry shards), must be
  a real folder, not a link, owned by the user and not writable by others; otherwise the cache is
  not used at all (`CacheFolder.problem` says why, the CLI prints it as one warning, and the run
  checks every file);
- a file is written under a name nobody can predict (`_unique_file`, as `tempfile.mkstemp`:
  a random name, O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600) and moved over its name with `os.replace`, which replaces a link instead
  of writing through it; `.gitignore` is only ever created (O_EXCL), never rewritten;
- a file is read with O_NOFOLLOW (a link is a miss) and used only if it carries the HMAC of this
  user's key (`user_key`: a random secret in the user's cache folder, outside every repository)
  over its name and contents: an entry made anywhere else, copied under another name or edited
  is a miss, and the run rewrites it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import stat
from pathlib import Path

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_KEY_SIZE = 32


class Unsafe(Exception):
    """Why a folder or the key cannot be trusted (one line, for the warning)."""


def key_file() -> Path:
    """Where the user's key is: `$XDG_CACHE_HOME/trainlint/key` (an absolute XDG_CACHE_HOME, as
    the XDG spec says), else `%LOCALAPPDATA%\\trainlint\\key` on Windows, else
    `~/.cache/trainlint/key`."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.environ.get("LOCALAPPDATA", "") if os.name == "nt" else ""
        if not os.path.isabs(base):
            home = os.path.expanduser("~")
            if not os.path.isabs(home):
                raise Unsafe("no home folder to keep the cache key in")
            base = os.path.join(home, ".cache")
    return Path(base, "trainlint", "key")


def _own_folder(path: Path, others: int) -> None:
    """Raise Unsafe unless `path` is a folder (not a link to one) of this user that no one the
    mode bits `others` name may write to."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise Unsafe(f"{path} is a symbolic link")
    if not stat.S_ISDIR(info.st_mode):
        raise Unsafe(f"{path} is not a folder")
    if not hasattr(os, "getuid"):
        return  # Windows: no owner nor mode bits to read here (its folders all say 0o777)
    if info.st_uid != os.getuid():
        raise Unsafe(f"{path} belongs to another user")
    if info.st_mode & others:
        raise Unsafe(f"other users can write to {path}")


def _read_key(file: Path) -> bytes:
    fd = os.open(file, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unsafe(f"{file} is not a regular file")
        if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & 0o077):
            raise Unsafe(f"{file} is not private to this user (remove it: a new one is made)")
        key = os.read(fd, _KEY_SIZE + 1)
    finally:
        os.close(fd)
    if len(key) != _KEY_SIZE:
        raise Unsafe(f"{file} is not a trainlint key (remove it: a new one is made)")
    return key


def user_key() -> bytes:
    """This user's secret, made on first use (mode 0600, in a folder of mode 0700). Raises Unsafe
    when it cannot be made or read, or is not private."""
    file = key_file()
    try:
        file.parent.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(file.parent, 0o700)
        except FileExistsError:
            pass
        _own_folder(file.parent, 0o022)  # whoever may write there could swap in a key they know
        try:
            return _read_key(file)
        except FileNotFoundError:
            pass
        # Written in full under a random name, then linked to its name, which fails if another
        # run made it first: a key is never seen half written, nor replaced.
        fd, tmp = _unique_file(file.parent, ".key.", "")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(os.urandom(_KEY_SIZE))
            try:
                os.link(tmp, file)
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
        return _read_key(file)
    except OSError as err:
        raise Unsafe(f"cannot make or read the cache key {file}: {err.strerror or err}") from None


def _unique_file(folder: Path, prefix: str, suffix: str) -> tuple[int, Path]:
    """`tempfile.mkstemp(suffix, prefix, folder)` without importing tempfile (and shutil, random,
    bz2 and lzma with it: a one-file check writes one entry): a name with 64 random bits, created
    with the flags and mode mkstemp uses."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        path = folder / f"{prefix}{os.urandom(8).hex()}{suffix}"
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no unused name in {folder}")


def _inside(path: Path, folder: Path) -> bool:
    path, folder = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return path == folder or folder in path.parents


def _used(name: str) -> bool:
    """Whether trainlint keeps files in the folder `name` of the cache folder."""
    return name == "imports" or (len(name) == 2 and all(c in "0123456789abcdef" for c in name))


class CacheFolder:
    """A cache folder, checked once when opened; `problem` is None when it can be used. The key
    must not be inside `project` (the checked project, which could ship it; by default the
    cache folder itself)."""

    def __init__(self, directory: str | os.PathLike, project: str | os.PathLike | None = None) -> None:
        self.directory = Path(directory)
        self.problem: str | None = None
        self._key = b""
        self._safe: set[Path] = set()  # folders this process found (or made) safe
        try:
            self._check()
            if _inside(key_file().parent, self.directory if project is None else Path(project)):
                raise Unsafe(f"the cache key {key_file()} is inside the checked project")
            self._key = user_key()
        except Unsafe as err:
            self.problem = str(err)

    def _check(self) -> None:
        try:
            _own_folder(self.directory, 0o002)
            with os.scandir(self.directory) as entries:
                for entry in entries:
                    if _used(entry.name):
                        _own_folder(Path(entry.path), 0o002)
        except FileNotFoundError:
            return  # made on the first write
        except OSError as err:
            raise Unsafe(f"cannot use the cache folder {self.directory}: {err.strerror or err}") from None

    def _mac(self, parts: tuple[str, ...], body: bytes) -> bytes:
        name = "/".join(parts).encode("utf-8", "surrogatepass")
        return hmac.new(self._key, name + b"\0" + body, hashlib.sha256).hexdigest().encode()

    def read(self, *parts: str, limit: int = 1 << 24) -> bytes | None:
        """The contents written by `write` under the names `parts` (folders, then the file), or
        None: no usable cache, no such file, not a regular file, or not this user's."""
        if self.problem is not None:
            return None
        try:
            # without blocking: a planted fifo would wait forever
            fd = os.open(self.directory.joinpath(*parts),
                         os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
                    return None
                data = os.read(fd, info.st_size + 1)
            finally:
                os.close(fd)
        except OSError:
            return None
        mac, newline, body = data.partition(b"\n")
        if not newline or not hmac.compare_digest(mac, self._mac(parts, body)):
            return None
        return body

    def write(self, *parts: str, body: bytes) -> bool:
        """Store `body` under the names `parts`, atomically; False when it could not be (a cache
        that cannot be written only costs time)."""
        if self.problem is not None:
            return False
        try:
            folder = self._folder(self.directory)
            for name in parts[:-1]:
                folder = self._folder(folder / name)
            fd, tmp = _unique_file(folder, f".{parts[-1]}.", ".tmp")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(self._mac(parts, body) + b"\n" + body)
                os.replace(tmp, folder / parts[-1])
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except (OSError, Unsafe):
            return False
        return True

    def _folder(self, path: Path) -> Path:
        if path not in self._safe:
            if path == self.directory:  # the folders above it are the project's, where the user put it
                path.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.mkdir(path, 0o755)  # makes no folder through a link: a link is "exists"
            except FileExistsError:
                pass
            _own_folder(path, 0o002)
            self._safe.add(path)
            if path == self.directory:
                try:  # only ever created: a planted one (or a link in its place) is left alone
                    fd = os.open(path / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
                except FileExistsError:
                    pass
                else:
                    with os.fdopen(fd, "wb") as handle:
                        handle.write(b"*\n")
        return path
