"""A content-hash cache of per-file results.

The key covers the file's bytes, the selected codes, the settings that change what rules report,
the source of trainlint itself, so editing a rule invalidates every entry, and the content hashes
of the project files it imports (given by the caller), whose summaries its result depends on.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from trainlint.finding import FileResult, Finding


@lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    import trainlint
    from trainlint import rules

    digest = hashlib.sha256(trainlint.__version__.encode())
    for folder in sorted({Path(trainlint.__file__).parent, Path(rules.__file__).parent}):
        for source in sorted(folder.rglob("*.py")):
            digest.update(source.read_bytes())
    return digest.hexdigest()


class ResultCache:
    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)

    def _key(self, path: str, settings, depends: str = "") -> str | None:
        try:
            data = Path(path).read_bytes()
        except OSError:
            return None
        digest = hashlib.sha256(_code_fingerprint().encode())
        digest.update(repr((sorted(settings.codes_for_path(path)), settings.min_torch_version)).encode())
        digest.update(data)
        digest.update(depends.encode())  # the content hashes of the project files it imports
        return digest.hexdigest()

    def _file(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, path: str, settings, depends: str = "") -> FileResult | None:
        key = self._key(path, settings, depends)
        if key is None:
            return None
        try:
            payload = json.loads(self._file(key).read_text())
        except (OSError, ValueError):
            return None
        findings = [Finding.from_dict({**f, "path": path}) for f in payload]
        return FileResult(path, findings)

    def put(self, path: str, settings, result: FileResult, depends: str = "") -> None:
        key = self._key(path, settings, depends)
        if key is None:
            return
        target = self._file(key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not (self.directory / ".gitignore").exists():
                (self.directory / ".gitignore").write_text("*\n")
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps([f.to_dict() for f in result.findings]))
            os.replace(tmp, target)
        except OSError:
            pass  # a cache that cannot be written only costs time
