"""The project's import resolution, kept next to the result cache between runs.

A warm run looks up every file's result by a key over its component of the project's import
graph (`Project.dependency_digest`). Finding it means resolving every import of every file
reachable from the checked files: on a few hundred files that was most of a warm run. What a
file's imports may resolve to depends only on its bytes and on the listings of the folders the
resolution looked in, so it is stored per file with its content hash (and a folder's modules and
folders under the hash "folder"), together with the modification time of every folder listed,
and used again while each folder's time is unchanged (adding, removing or renaming an entry
changes its folder's time).

A folder whose time was less than `_RACY_NS` before it was listed could change again within the
same clock tick without its time moving (as git's "racy" index entries): a store that depends on
one is not written.

Each file's entry also holds its stat stamp (size, modification time, inode) when its content
hash was taken, so a warm run hashes (and reads) only the files whose stamp moved, as ruff and
mypy do; a stamp taken less than `_RACY_NS` after the file's modification time is not kept (the
file could change again within the clock tick). Paths stay strings: a warm run reads a store of
tens of thousands of them.

The store is kept in the `CacheFolder` (`imports/`), which reads only a store this user's
trainlint wrote (a repository can ship its cache folder, not a store). It is still read as
untrusted input: anything not of the exact shape, or naming a file outside the project, is
ignored as a whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from trainlint.cache_folder import CacheFolder

_FORMAT = 2
_RACY_NS = 2_000_000_000  # FAT stores times to 2 s; other file systems are finer
_LIMIT = 1 << 28  # a store names every file of the project: a large one is large


def folder_stamp(folder: str) -> tuple[int | None, int]:
    """(modification time of the folder or None if it cannot be read, when it was stamped)."""
    now = time.time_ns()
    try:
        return os.stat(folder).st_mtime_ns, now
    except OSError:
        return None, now


def file_stamp(path: str) -> tuple[int, int, int] | None:
    """(size, modification time, inode) of a file (links followed, as it is read), or None."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_size, info.st_mtime_ns, info.st_ino


def settled(stamp: tuple[int, int, int] | None, now: int) -> bool:
    """A file stamp taken at `now` that a later change must move: its modification time is at
    least `_RACY_NS` before `now` (a change within the same clock tick would not move it)."""
    return stamp is not None and stamp[1] <= now - _RACY_NS


def _current(folder: str) -> int | None:
    try:
        return os.stat(folder).st_mtime_ns
    except OSError:
        return None


def store_name(root: Path, max_file_size: int, code: str) -> tuple[str, str]:
    """The names (folder, file) in the cache folder of the store of this project (its root and
    size limit) and this trainlint (`code`: the fingerprint of its code, `cache._code_fingerprint`):
    one per project, whichever of its files a run checks (each run adds the files it resolved)."""
    digest = hashlib.sha256(f"{_FORMAT}\0{code}\0{root}\0{max_file_size}".encode(
        "utf-8", "surrogatepass"))
    return "imports", f"{digest.hexdigest()}.json"


def load(cache: CacheFolder, name: tuple[str, str], inside) -> tuple[
        dict[str, tuple[int | None, int]], dict[str, tuple[str, list[str]]], dict[str, tuple[int, int, int]]] | None:
    """(folder stamps, file -> (content hash, imported files), file -> its stat stamp when hashed)
    from the store `name` in `cache`, or None when there is none (or none this user wrote), it is
    not exactly a store's shape, names a file for which `inside` (given a path string) is false,
    or a folder it depends on changed since."""
    body = cache.read(*name, limit=_LIMIT)
    if body is None:
        return None
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return None
    folders, files = data.get("folders"), data.get("files")
    if not isinstance(folders, dict) or not isinstance(files, dict):
        return None
    stamps = {}
    for folder, stamp in folders.items():
        if not (isinstance(stamp, list) and len(stamp) == 2 and type(stamp[1]) is int
                and (stamp[0] is None or type(stamp[0]) is int)):
            return None
        if _current(folder) != stamp[0]:
            return None
        stamps[folder] = (stamp[0], stamp[1])
    resolved, file_stamps = {}, {}
    inside_seen: set[str] = set()  # files import the same few paths: each is asked about once
    for path, entry in files.items():
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                and isinstance(entry[1], list) and all(isinstance(p, str) for p in entry[1])):
            return None
        stamp = entry[2]
        if stamp is not None:
            if not (isinstance(stamp, list) and len(stamp) == 3 and all(type(n) is int for n in stamp)):
                return None
            file_stamps[path] = tuple(stamp)
        imported = entry[1]
        for p in imported:
            if p not in inside_seen:
                if not inside(p):
                    return None
                inside_seen.add(p)
        resolved[path] = (entry[0], imported)
    return stamps, resolved, file_stamps


def save(cache: CacheFolder, name: tuple[str, str], stamps: dict[str, tuple[int | None, int]],
         resolved: dict[str, tuple[str, list[str | Path]]],
         file_stamps: dict[str, tuple[int, int, int]] | None = None) -> bool:
    """Write the store `name` into `cache` atomically; False (and nothing written) when it cannot
    be, or a folder it depends on was modified too shortly before it was listed to be trusted (a
    missing folder is a state too: it is stamped None, and its creation makes the store stale)."""
    if any(mtime is not None and mtime > listed - _RACY_NS for mtime, listed in stamps.values()):
        return False
    data = {"format": _FORMAT, "folders": {folder: list(stamp) for folder, stamp in stamps.items()},
            "files": {path: [digest, [str(p) for p in imported], _listed((file_stamps or {}).get(path))]
                      for path, (digest, imported) in resolved.items()}}
    return cache.write(*name, body=json.dumps(data).encode())


def _listed(stamp: tuple[int, int, int] | None) -> list[int] | None:
    return list(stamp) if stamp is not None else None
