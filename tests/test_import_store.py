"""The import store: what each checked file's imports resolve to, kept in the cache folder between
runs and used only while the folders the resolution listed are unchanged."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from trainlint.cache import ResultCache, _code_fingerprint
from trainlint.cache_folder import CacheFolder
from trainlint.engine import lint_paths
from trainlint.reader import import_store, project
from trainlint.reader.project import Project
from trainlint.settings import Settings, resolve_selection
from test_project import EVALUATE, NO_GRAD_HELPER

ALL = Settings(select=resolve_selection(["ALL"], [], []))
PAST = 1_500_000_000 * 10**9  # 2017: long before any listing, so the folders are not "racy"

NULL_CONTEXT = "import contextlib\n\ndef inference():\n    return contextlib.nullcontext()\n"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text).lstrip())


def _age(*folders: Path) -> None:
    """Set the folders' times in the past (the cache folder made first: making it is a change of
    the folder that holds it)."""
    for folder in folders:
        (folder / ".cache").mkdir(exist_ok=True)
        os.utime(folder, ns=(PAST, PAST))


def _results(paths, **kwargs):
    return [(r.path, [f.to_dict() for f in r.findings]) for r in lint_paths(paths, ALL, **kwargs)]


def _stores(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "imports").glob("*.json")) if (cache_dir / "imports").exists() else []


def test_a_warm_run_resolves_no_import_again(tmp_path, monkeypatch):
    _write(tmp_path, {"pyproject.toml": "", "helpers.py": NULL_CONTEXT, "evaluate.py": EVALUATE,
                      "train.py": "import helpers\nimport evaluate\n"})
    _age(tmp_path)
    cache_dir = tmp_path / ".cache"
    paths = [str(tmp_path / name) for name in ("evaluate.py", "helpers.py", "train.py")]
    cold = _results(paths, cache=ResultCache(cache_dir))
    assert [f["code"] for f in cold[0][1]] == ["TL301"]
    assert len(_stores(cache_dir)) == 1

    def refuse(*args):
        raise AssertionError("an import was resolved again")

    monkeypatch.setattr(project, "imported_names", refuse)
    monkeypatch.setattr(project, "bound_names", refuse)
    assert _results(paths, cache=ResultCache(cache_dir)) == cold
    # a run of one file (pre-commit's; its result has another key there: no checked file imports it)
    # keeps the others' entries: one store per project
    monkeypatch.undo()
    assert _results(paths[:1], cache=ResultCache(cache_dir)) == cold[:1]
    assert len(_stores(cache_dir)) == 1
    monkeypatch.setattr(project, "imported_names", refuse)
    monkeypatch.setattr(project, "bound_names", refuse)
    assert _results(paths, cache=ResultCache(cache_dir)) == cold
    assert _results(paths, cache=ResultCache(cache_dir), jobs=2) == cold


def test_a_module_created_after_the_store_was_written_is_found(tmp_path):
    """evaluate.py's bytes do not change, but what its import names appears: the folder's time
    changes, the store is not used, and the cached result (whose key named no helper) is not
    either."""
    _write(tmp_path, {"pyproject.toml": "", "evaluate.py": EVALUATE})
    _age(tmp_path)
    cache_dir = tmp_path / ".cache"
    paths = [str(tmp_path / "evaluate.py")]
    assert [f["code"] for f in _results(paths, cache=ResultCache(cache_dir))[0][1]] == ["TL301"]
    assert len(_stores(cache_dir)) == 1
    (tmp_path / "helpers.py").write_text(NO_GRAD_HELPER)
    fresh = _results(paths)
    assert fresh == [(paths[0], [])]
    assert _results(paths, cache=ResultCache(cache_dir)) == fresh


def test_a_file_whose_bytes_changed_is_resolved_again(tmp_path):
    _write(tmp_path, {"pyproject.toml": "", "helpers.py": NULL_CONTEXT, "other.py": "def inference():\n    pass\n",
                      "evaluate.py": EVALUATE.replace("from helpers", "from other")})
    _age(tmp_path)
    cache_dir = tmp_path / ".cache"
    paths = [str(tmp_path / "evaluate.py")]
    _results(paths, cache=ResultCache(cache_dir))
    (tmp_path / "evaluate.py").write_text(textwrap.dedent(EVALUATE).lstrip())
    _age(tmp_path)  # the folder listing is the same; only the file's bytes changed
    fresh = _results(paths)
    assert [f["code"] for f in fresh[0][1]] == ["TL301"]
    assert _results(paths, cache=ResultCache(cache_dir)) == fresh


def test_no_store_is_written_while_a_folder_it_depends_on_was_just_modified(tmp_path):
    """A folder modified within the clock's granularity of its listing could change again without
    its time moving: the store waits for a later run."""
    _write(tmp_path, {"pyproject.toml": "", "helpers.py": NULL_CONTEXT, "evaluate.py": EVALUATE})
    cache_dir = tmp_path / ".cache"
    paths = [str(tmp_path / "evaluate.py")]
    cache_dir.mkdir()
    _results(paths, cache=ResultCache(cache_dir))
    assert _stores(cache_dir) == []
    _age(tmp_path)
    _results(paths, cache=ResultCache(cache_dir))
    assert len(_stores(cache_dir)) == 1


@pytest.mark.parametrize("planted", [
    [], {"format": 1}, {"format": 99, "folders": {}, "files": {}},
    {"format": 1, "folders": {"/": "yesterday"}, "files": {}},
    {"format": 1, "folders": {}, "files": {"x.py": ["abc", "not a list"]}},
    {"format": 1, "folders": {}, "files": {"x.py": ["abc", ["/etc/passwd"]]}},
])
def test_a_store_of_the_wrong_shape_or_naming_a_file_outside_the_project_is_ignored(tmp_path, planted):
    _write(tmp_path, {"pyproject.toml": "", "helpers.py": NULL_CONTEXT, "evaluate.py": EVALUATE})
    _age(tmp_path)
    paths = [str(tmp_path / "evaluate.py")]
    checked = Project.for_paths(paths)
    cache = CacheFolder(tmp_path / ".cache")
    name = import_store.store_name(checked.root, checked.max_file_size, _code_fingerprint())
    assert cache.write(*name, body=json.dumps(planted).encode())  # even one this user's trainlint wrote
    assert import_store.load(cache, name, checked._inside) is None
    assert _results(paths, cache=ResultCache(tmp_path / ".cache")) == _results(paths)


def test_a_store_is_stale_when_a_folder_it_lists_changed(tmp_path):
    folder = tmp_path / "pkg"
    folder.mkdir()
    os.utime(folder, ns=(PAST, PAST))
    cache, name = CacheFolder(tmp_path / ".cache"), ("imports", "store.json")
    stamps = {str(folder): import_store.folder_stamp(str(folder))}
    assert import_store.save(cache, name, stamps, {str(folder / "a.py"): ("hash", [folder / "b.py"])})
    assert import_store.load(cache, name, lambda p: True) == (
        stamps, {str(folder / "a.py"): ("hash", [folder / "b.py"])})
    (folder / "new.py").write_text("")
    assert import_store.load(cache, name, lambda p: True) is None
