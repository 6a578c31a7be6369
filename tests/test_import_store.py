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
    assert import_store.load(cache, name, lambda p: True) == (  # paths come back as strings
        stamps, {str(folder / "a.py"): ("hash", [str(folder / "b.py")])}, {})
    (folder / "new.py").write_text("")
    assert import_store.load(cache, name, lambda p: True) is None


# -- stat-based change detection: a warm run reads no unchanged file ---------------------------------

def _age_files(root: Path) -> None:
    """The files' times in the past too: a stamp is kept only once a change must move it."""
    for path in root.rglob("*.py"):
        os.utime(path, ns=(PAST, PAST))


def _count_reads(monkeypatch) -> list[str]:
    """Every read of a source (the engine's and the project's), by path."""
    from trainlint import engine

    reads: list[str] = []

    def counting(read):
        def wrapped(path, *args, **kwargs):
            reads.append(str(path))
            return read(path, *args, **kwargs)
        return wrapped

    monkeypatch.setattr(engine, "read_source", counting(engine.read_source))
    monkeypatch.setattr(project, "read_source", counting(project.read_source))
    return reads


def test_a_warm_run_reads_no_unchanged_file(tmp_path, monkeypatch):
    _write(tmp_path, {"pyproject.toml": "", "helpers.py": NULL_CONTEXT, "evaluate.py": EVALUATE,
                      "train.py": "import helpers\nimport evaluate\n", "other.py": "import json\n"})
    _age_files(tmp_path)
    _age(tmp_path)
    cache_dir = tmp_path / ".cache"
    paths = [str(tmp_path / name) for name in ("evaluate.py", "helpers.py", "train.py", "other.py")]
    cold = _results(paths, cache=ResultCache(cache_dir))
    reads = _count_reads(monkeypatch)
    assert _results(paths, cache=ResultCache(cache_dir)) == cold  # a new run: a new Project
    assert reads == []
    # one file changed: the files of its component of the import graph are checked again (their
    # results may depend on it), a file outside it is not even read
    (tmp_path / "helpers.py").write_text(NULL_CONTEXT + "\nx = 1\n")
    warm = _results(paths, cache=ResultCache(cache_dir))
    assert str(tmp_path / "helpers.py") in reads and str(tmp_path / "other.py") not in reads
    assert warm == _results(paths)


def test_a_file_replaced_by_one_of_the_same_size_and_time_is_read_again(tmp_path):
    """The inode is part of the stamp: a file written elsewhere and moved over the checked one
    (as editors and git do) with the same size and modification time is checked again."""
    _write(tmp_path, {"pyproject.toml": "", "evaluate.py": EVALUATE})
    _age_files(tmp_path)
    _age(tmp_path)
    cache_dir, path = tmp_path / ".cache", tmp_path / "evaluate.py"
    before = _results([str(path)], cache=ResultCache(cache_dir))
    assert before[0][1]
    replacement = tmp_path / "replacement.tmp"
    changed = EVALUATE.replace("model.eval()", "model.Eval()")  # the same size; nothing to report
    assert len(changed) == len(EVALUATE) and changed != EVALUATE
    replacement.write_text(textwrap.dedent(changed).lstrip())
    os.utime(replacement, ns=(PAST, PAST))
    os.replace(replacement, path)
    _age(tmp_path)
    after = _results([str(path)], cache=ResultCache(cache_dir))
    assert after == _results([str(path)]) and after != before


def test_a_stamp_taken_within_the_clock_tick_is_not_trusted(tmp_path):
    """A file modified just before it was read could change again without its time moving (as
    git's racy entries): its stamp is not kept, so an edit in place that keeps the size and the
    time is still seen by the next run."""
    _write(tmp_path, {"pyproject.toml": "", "evaluate.py": EVALUATE})
    _age(tmp_path)
    cache_dir, path = tmp_path / ".cache", tmp_path / "evaluate.py"
    before = _results([str(path)], cache=ResultCache(cache_dir))
    written = os.stat(path).st_mtime_ns  # just now: racy
    with open(path, "r+b") as handle:  # in place: the same inode and size
        data = handle.read().replace(b"model.eval()", b"model.Eval()")
        handle.seek(0)
        handle.write(data)
    os.utime(path, ns=(written, written))
    after = _results([str(path)], cache=ResultCache(cache_dir))
    assert after == _results([str(path)]) and after != before
