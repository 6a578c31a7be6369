"""A content-hash cache of per-file results.

An entry is found by its key (`cache_key`: trainlint's own code, the settings that change what
rules report, the exact bytes that were linted, and the digest of the project files the result
may depend on: `Project.dependency_digest`) and is used only if it says so itself: it
records the trainlint version, the settings digest and the content hash it describes, and every
finding in it must have the shape of a finding. Anything else (a planted `{}`, JSON of the wrong
shape, an entry for other content) is a miss, never an error: a repository can ship its own
`.trainlint_cache/`.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from functools import lru_cache
from pathlib import Path

from trainlint.finding import Edit, FileResult, Finding, Fix, Severity

_FORMAT = 3  # bumped when the entry layout changes


@lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    import trainlint
    from trainlint import rules

    digest = hashlib.sha256(trainlint.__version__.encode())
    for folder in sorted({Path(trainlint.__file__).parent, Path(rules.__file__).parent}):
        for source in sorted(folder.rglob("*.py")):
            digest.update(source.read_bytes())
    return digest.hexdigest()


def _settings_digest(path: str, settings) -> str:
    selected = (sorted(settings.codes_for_path(path)), settings.min_torch_version)
    return hashlib.sha256(repr(selected).encode()).hexdigest()


def cache_key(data: bytes, path: str, settings, depends: str = "") -> str:
    """The one place a result's key is computed: everything the result depends on.

    `data` must be exactly the bytes that were (or will be) linted, never a second read of the
    file, which may have changed in between. `depends` is the digest of the project files the
    result may depend on (`Project.dependency_digest`).
    """
    digest = hashlib.sha256(f"{_FORMAT}\0{_code_fingerprint()}\0{_settings_digest(path, settings)}\0".encode())
    digest.update(hashlib.sha256(data).digest())
    digest.update(hashlib.sha256(depends.encode("utf-8", "surrogatepass")).digest())
    return digest.hexdigest()


def _binding(data: bytes, path: str, settings, depends: str) -> dict:
    from trainlint import __version__

    return {"format": _FORMAT, "trainlint": __version__, "settings": _settings_digest(path, settings),
            "content": hashlib.sha256(data).hexdigest(),
            "imports": hashlib.sha256(depends.encode("utf-8", "surrogatepass")).hexdigest()}


def _int(value) -> bool:
    return type(value) is int and value >= 1


def _finding(data, path: str) -> Finding | None:
    """A finding from a cache entry, or None if the entry is not exactly a finding's shape."""
    if not isinstance(data, dict):
        return None
    if not all(_int(data.get(k)) for k in ("line", "column", "end_line", "end_column")):
        return None
    if not all(isinstance(data.get(k), str) for k in ("code", "name", "severity", "message")):
        return None
    if data["severity"] not in {s.value for s in Severity}:
        return None
    fix = data.get("fix")
    if fix is not None:
        if not (isinstance(fix, dict) and isinstance(fix.get("title"), str) and type(fix.get("safe")) is bool
                and isinstance(fix.get("edits"), list)):
            return None
        edits = []
        for edit in fix["edits"]:
            if not (isinstance(edit, dict) and isinstance(edit.get("content"), str)
                    and all(_int(edit.get(k)) for k in ("line", "column", "end_line", "end_column"))):
                return None
            edits.append(Edit(edit["line"], edit["column"], edit["end_line"], edit["end_column"], edit["content"]))
        fix = Fix(fix["title"], fix["safe"], tuple(edits))
    return Finding(path, data["line"], data["column"], data["end_line"], data["end_column"], data["code"],
                   data["name"], Severity(data["severity"]), data["message"], fix)


def _read_regular(path: Path, limit: int = 1 << 24) -> bytes:
    """A regular file's bytes, opened without blocking (a planted fifo would wait forever)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.read(fd, limit)
    finally:
        os.close(fd)


class ResultCache:
    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)

    def _file(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, data: bytes, path: str, settings, depends: str = "") -> FileResult | None:
        """The cached result for these bytes of `path` (importing the project files `depends`
        names), or None (a miss) unless a valid entry describes exactly them."""
        try:
            entry = json.loads(_read_regular(self._file(cache_key(data, path, settings, depends))))
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(entry, dict) or entry.get("binding") != _binding(data, path, settings, depends):
            return None
        raw = entry.get("findings")
        if not isinstance(raw, list):
            return None
        findings = [_finding(f, path) for f in raw]
        if any(f is None for f in findings):
            return None
        return FileResult(path, findings)

    def put(self, data: bytes, path: str, settings, result: FileResult, depends: str = "") -> None:
        """Store `result`, which must have been computed from exactly `data` (and the project
        files `depends` names)."""
        target = self._file(cache_key(data, path, settings, depends))
        entry = {"binding": _binding(data, path, settings, depends),
                 "findings": [{k: v for k, v in f.to_dict().items() if k != "path"} for f in result.findings]}
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not (self.directory / ".gitignore").exists():
                (self.directory / ".gitignore").write_text("*\n")
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(entry))
            os.replace(tmp, target)
        except OSError:
            pass  # a cache that cannot be written only costs time
