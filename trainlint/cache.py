"""A content-hash cache of per-file results.

An entry is found by its key (`cache_key`: trainlint's own code, the settings that change what
rules report, the exact bytes that were linted, and the digest of the project files the result
may depend on: `Project.dependency_digest`) and is used only if it says so itself: it
records the trainlint version, the settings digest and the content hash it describes, and every
finding in it must have the shape of a finding. Anything else (a planted `{}`, JSON of the wrong
shape, an entry for other content) is a miss, never an error: a repository can ship its own
`.trainlint_cache/`.

Entries are kept in a `CacheFolder` (`cache_folder`): written only under random names in folders
that are the user's own, never through a link, and read only when they carry the HMAC of this
user's key, kept outside every repository. So a repository can ship the folder, not a result.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from trainlint.cache_folder import CacheFolder
from trainlint.finding import EVIDENCE_KINDS, VERDICTS, Edit, Evidence, FileResult, Finding, Fix, Severity

_FORMAT = 5  # bumped when the entry layout or the key changes (5: evidence and notebook cells, stat-keyed lookups)


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
    selected = (sorted(settings.codes_for_path(path)), settings.min_torch_version,
                getattr(settings, "include_unproven", False))
    return hashlib.sha256(repr(selected).encode()).hexdigest()


def cache_key(data: bytes, path: str, settings, depends: str = "") -> str:
    """The one place a result's key is computed: everything the result depends on.

    `data` must be exactly the bytes that were (or will be) linted, never a second read of the
    file, which may have changed in between. `depends` is the digest of the project files the
    result may depend on (`Project.dependency_digest`).
    """
    return _key(hashlib.sha256(data).hexdigest(), _settings_digest(path, settings), depends)


def _key(content: str, settings_digest: str, depends: str) -> str:
    """`cache_key` of bytes whose SHA-256 is `content` (hex): a warm run whose stat stamps say a
    file is unchanged knows its hash without reading it (`Project.unchanged_digests`)."""
    digest = hashlib.sha256(f"{_FORMAT}\0{_code_fingerprint()}\0{settings_digest}\0{content}\0".encode())
    digest.update(hashlib.sha256(depends.encode("utf-8", "surrogatepass")).digest())
    return digest.hexdigest()


def _binding(content: str, settings_digest: str, depends: str) -> dict:
    from trainlint import __version__

    return {"format": _FORMAT, "trainlint": __version__, "settings": settings_digest, "content": content,
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
            cell = edit.get("cell")
            if cell is not None and not _int(cell):
                return None
            edits.append(Edit(edit["line"], edit["column"], edit["end_line"], edit["end_column"], edit["content"],
                              cell))
        fix = Fix(fix["title"], fix["safe"], tuple(edits))
    evidence = []
    for item in data.get("evidence", []) if isinstance(data.get("evidence", []), list) else [None]:
        if not (isinstance(item, dict) and isinstance(item.get("premise"), str) and _int(item.get("line"))
                and item.get("verdict") in VERDICTS and item.get("kind") in EVIDENCE_KINDS):
            return None
        if item.get("cell") is not None and not _int(item["cell"]):
            return None
        evidence.append(Evidence(item["premise"], item["verdict"], item["kind"], path, item["line"], item.get("cell")))
    cell = data.get("cell")  # a notebook's cell
    if cell is not None and not _int(cell):
        return None
    return Finding(path, data["line"], data["column"], data["end_line"], data["end_column"], data["code"],
                   data["name"], Severity(data["severity"]), data["message"], fix, tuple(evidence), cell=cell)


def _entry(finding: Finding) -> dict:
    """A finding as a cache entry keeps it: its path (and its evidence's, the same) is the entry's."""
    entry = {k: v for k, v in finding.to_dict().items() if k != "path"}
    entry["evidence"] = [{k: v for k, v in e.items() if k != "path"} for e in entry["evidence"]]
    return entry


class ResultCache:
    def __init__(self, directory: str | os.PathLike, project: str | os.PathLike | None = None) -> None:
        self.folder = CacheFolder(directory, project)  # `project`: where the user's key must not be
        self.directory = self.folder.directory

    @property
    def problem(self) -> str | None:
        """Why this cache is not used (its folder or the user's key is not safe), or None."""
        return self.folder.problem

    @staticmethod
    def _names(key: str) -> tuple[str, str]:
        return key[:2], f"{key}.json"

    def _file(self, key: str) -> Path:
        return self.directory.joinpath(*self._names(key))

    def get(self, data: bytes, path: str, settings, depends: str = "") -> FileResult | None:
        """The cached result for these bytes of `path` (importing the project files `depends`
        names), or None (a miss) unless a valid entry describes exactly them."""
        return self.get_by_hash(hashlib.sha256(data).hexdigest(), path, settings, depends)

    def get_by_hash(self, content: str, path: str, settings, depends: str = "") -> FileResult | None:
        """`get` for the bytes whose SHA-256 (hex) is `content`."""
        settings_digest = _settings_digest(path, settings)
        body = self.folder.read(*self._names(_key(content, settings_digest, depends)))
        if body is None:
            return None
        try:
            entry = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(entry, dict) or entry.get("binding") != _binding(content, settings_digest, depends):
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
        content, settings_digest = hashlib.sha256(data).hexdigest(), _settings_digest(path, settings)
        entry = {"binding": _binding(content, settings_digest, depends),
                 "findings": [_entry(f) for f in result.findings]}
        self.folder.write(*self._names(_key(content, settings_digest, depends)), body=json.dumps(entry).encode())
