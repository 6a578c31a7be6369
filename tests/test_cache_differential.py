"""Cached results are never stale: random edits across the fixture projects, and after each one a
run with the result cache (and the import store) gives exactly the findings of a run without.

The edits are the ones that move findings between files: add or remove a call, change what a
function returns, rename an import, swap a scheduler class, add or remove a file (or an extension
or bytecode module that shadows a source one), and go back to the project as it was (its old
entries are still in the cache). Everything runs in this process, on a copy of each project,
with a fixed seed: a failure names the seed, the edit number and the edit, and can be replayed
alone.

`FAST_EDITS` run in the default suite; the `slow` test runs `SLOW_EDITS` (`pytest -m slow`).
"""

from __future__ import annotations

import ast
import importlib.machinery
import os
import random
import re
import shutil
from pathlib import Path

import pytest

from trainlint.cache import ResultCache
from trainlint.engine import lint_paths
from trainlint.settings import Settings, resolve_selection

ALL = Settings(select=resolve_selection(["ALL"], [], []))
PROJECTS = Path(__file__).parent / "fixtures" / "projects"
PAST = 1_500_000_000 * 10**9  # folder times long before any run: the import store is written and used
FAST_EDITS = 150
SLOW_EDITS = 1_200

SCHEDULERS = ["LambdaLR", "StepLR", "CosineAnnealingLR", "OneCycleLR", "ReduceLROnPlateau", "MultiStepLR",
              "ExponentialLR", "LinearLR"]
RETURNS = ["None", "torch.optim.lr_scheduler.StepLR(optimizer, 10)", "torch.no_grad()", "torch.inference_mode()",
           "contextlib.nullcontext()", "model", "loss", "loss.detach()", "loss.item()",
           "{'model': model.state_dict()}", "LambdaLR(optimizer, lambda step: 1.0)", "self"]
CALLS = ["model.eval()", "model.train()", "optimizer.zero_grad()", "scheduler.step()", "self.schedule.step()",
         "self.scheduler.step()", "torch.save(model, path)", "torch.load(path)", "loss.backward()"]
# new modules, named like the project's own (a module beside a package, a helper in another folder)
NEW_FILES = {
    "schedules": "from torch.optim.lr_scheduler import StepLR\n\n\ndef build_schedule(optimizer, warmup, total):\n"
                 "    return StepLR(optimizer, 10)\n",
    "helpers": "import torch\n\n\ndef inference(fn):\n    return torch.no_grad()(fn)\n\n\n"
               "def save_on_master(*args, **kwargs):\n    torch.save(*args, **kwargs)\n",
    "engine": "import torch\n\n\ndef evaluate(model, loader):\n    model.eval()\n    for x in loader:\n"
              "        model(x)\n",
    "utils": "import torch\n\n\ndef load_checkpoint(path):\n    return torch.load(path, weights_only=False)\n",
    "__init__": "from .schedules import build_schedule\n",
}


def _python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if p.is_file())


def _stamp(folder: Path, clock: list[int]) -> None:
    """Give a folder whose listing changed a new time (as the file system does), in the past."""
    clock[0] += 10**9
    os.utime(folder, ns=(PAST + clock[0], PAST + clock[0]))


def _statements(tree: ast.AST) -> list[ast.stmt]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.stmt)]


def _line_offsets(text: str) -> list[int]:
    offsets, total = [0], 0
    for line in text.splitlines(keepends=True):
        total += len(line)
        offsets.append(total)
    return offsets


def _span(text: str, node: ast.AST) -> tuple[int, int]:
    """Character offsets of a node (ast columns are UTF-8 byte offsets; the fixtures are ASCII)."""
    offsets = _line_offsets(text)
    return offsets[node.lineno - 1] + node.col_offset, offsets[node.end_lineno - 1] + node.end_col_offset


def _starts_its_line(text: str, node: ast.stmt) -> bool:
    line = text.splitlines()[node.lineno - 1]
    return len(line) - len(line.lstrip()) == node.col_offset


class Editor:
    """Random edits of one project copy; each returns a description, or None if it did not apply."""

    def __init__(self, root: Path, original: dict[Path, str], rng: random.Random, clock: list[int]) -> None:
        self.root, self.original, self.rng, self.clock = root, original, rng, clock

    def _parsed(self) -> list[tuple[Path, str, ast.Module]]:
        found = []
        for path in _python_files(self.root):
            text = path.read_text()
            try:
                found.append((path, text, ast.parse(text)))
            except SyntaxError:
                continue
        return found

    def _pick(self, candidates: list):
        return self.rng.choice(candidates) if candidates else None

    def add_call(self):
        parsed = self._parsed()
        pool = list(CALLS)
        for _, text, tree in parsed:  # calls this project already makes, of its own functions too
            pool += [ast.get_source_segment(text, s) for s in _statements(tree)
                     if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and s.lineno == s.end_lineno]
            pool += [f"{d.name}({', '.join(a.arg for a in d.args.args if a.arg != 'self')})"
                     for d in _statements(tree) if isinstance(d, ast.FunctionDef)]
        target = self._pick([(p, t, s) for p, t, tree in parsed for s in _statements(tree) if _starts_its_line(t, s)])
        if target is None:
            return None
        path, text, stmt = target
        lines = text.splitlines(keepends=True)
        call = self.rng.choice(pool)
        lines.insert(stmt.lineno - 1, " " * stmt.col_offset + call + "\n")
        path.write_text("".join(lines))
        return f"add call {call!r} at {path.name}:{stmt.lineno}"

    def remove_call(self):
        target = self._pick([(p, t, s) for p, t, tree in self._parsed() for s in _statements(tree)
                             if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and _starts_its_line(t, s)])
        if target is None:
            return None
        path, text, stmt = target
        start, end = _span(text, stmt)
        path.write_text(text[:start] + "pass" + text[end:])
        return f"remove call at {path.name}:{stmt.lineno}"

    def change_return(self):
        parsed = self._parsed()
        pool = list(RETURNS)
        for _, text, tree in parsed:
            pool += [ast.get_source_segment(text, s.value) for s in _statements(tree)
                     if isinstance(s, ast.Return) and s.value is not None]
        target = self._pick([(p, t, s) for p, t, tree in parsed for s in _statements(tree)
                             if isinstance(s, ast.Return) and s.value is not None])
        if target is None:
            return None
        path, text, stmt = target
        start, end = _span(text, stmt.value)
        value = self.rng.choice(pool)
        path.write_text(text[:start] + value + text[end:])
        return f"return {value!r} at {path.name}:{stmt.lineno}"

    def rename_import(self):
        parsed = self._parsed()
        modules, names = set(), set()
        for path, _, tree in parsed:
            relative = path.relative_to(self.root).with_suffix("")
            parts = [p for p in relative.parts if p not in ("src", "__init__")]
            for start in range(len(parts)):
                modules.add(".".join(parts[start:]))
            modules.update(f".{parts[-1]}" for _ in [0] if parts)
            for node in _statements(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    modules.add("." * node.level + node.module)
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    names.add(node.name)
        modules.discard("")
        target = self._pick([(p, t, s) for p, t, tree in parsed for s in _statements(tree)
                             if isinstance(s, (ast.Import, ast.ImportFrom)) and s.lineno == s.end_lineno
                             and _starts_its_line(t, s)])
        if target is None or not modules:
            return None
        path, text, stmt = target
        how = self.rng.randrange(3)
        if isinstance(stmt, ast.Import) or how == 0:  # another module
            module = self.rng.choice(sorted(modules))
            if isinstance(stmt, ast.Import):
                module = module.lstrip(".") or "torch"
                alias = stmt.names[0].asname
                new = f"import {module}" + (f" as {alias}" if alias else "")
            else:
                new = f"from {module} import " + ", ".join(
                    a.name + (f" as {a.asname}" if a.asname else "") for a in stmt.names)
        elif how == 1:  # another name from the same module
            name = self.rng.choice(sorted(names | {a.name for a in stmt.names}))
            kept = [a.name + (f" as {a.asname}" if a.asname else "") for a in stmt.names[1:]]
            new = f"from {'.' * stmt.level}{stmt.module or ''} import " + ", ".join([name, *kept])
        else:  # the same module, written relative or absolute
            module = stmt.module or ""
            new = (f"from {module} import " if stmt.level else f"from .{module.split('.')[-1]} import ") + ", ".join(
                a.name + (f" as {a.asname}" if a.asname else "") for a in stmt.names)
            if new.startswith("from  import"):
                return None
        start, end = _span(text, stmt)
        path.write_text(text[:start] + new + text[end:])
        return f"import {new!r} at {path.name}:{stmt.lineno}"

    def swap_scheduler(self):
        files = [(p, t) for p in _python_files(self.root) for t in [p.read_text()]
                 if any(re.search(rf"\b{s}\b", t) for s in SCHEDULERS)]
        target = self._pick(files)
        if target is None:
            return None
        path, text = target
        old = self.rng.choice([s for s in SCHEDULERS if re.search(rf"\b{s}\b", text)])
        new = self.rng.choice([s for s in SCHEDULERS if s != old])
        count = 0 if self.rng.random() < 0.7 else 1  # everywhere in the file (its import too), or once
        path.write_text(re.sub(rf"\b{old}\b", new, text, count=count))
        return f"swap {old} -> {new} in {path.name}"

    def add_file(self):
        folders = sorted({p.parent for p in _python_files(self.root)} | {self.root})
        folder = self.rng.choice(folders)
        name = self.rng.choice(sorted(NEW_FILES))
        target = folder / f"{name}.py"
        existing = [p for p in _python_files(self.root) if p != target]
        if self.rng.random() < 0.5 and existing:  # a copy of another project file under a shadowing name
            content = self.rng.choice(existing).read_text()
        else:
            content = NEW_FILES[name]
        created = not target.exists()
        target.write_text(content)
        if created:
            _stamp(folder, self.clock)
        return f"write {target.relative_to(self.root)}"

    def add_other_module(self):
        """An extension or bytecode module beside a source one (the import system takes the
        extension first), or as a package's `__init__`."""
        source = self._pick(_python_files(self.root))
        if source is None:
            return None
        suffix = self.rng.choice([importlib.machinery.EXTENSION_SUFFIXES[0], ".pyc"])
        target = source.with_name(source.stem + suffix)
        created = not target.exists()
        target.write_bytes(b"not a module")
        if created:
            _stamp(target.parent, self.clock)
        return f"write {target.relative_to(self.root)}"

    def remove_file(self):
        files = _python_files(self.root)
        if len(files) <= 2:
            return None
        target = self.rng.choice(files)
        target.unlink()
        _stamp(target.parent, self.clock)
        return f"remove {target.relative_to(self.root)}"

    def restore(self):
        """Back to the project as it was: its first results are in the cache."""
        for path in sorted(p for p in self.root.rglob("*") if p.is_file() and p.suffix in (".so", ".pyc")):
            path.unlink()
            _stamp(path.parent, self.clock)
        for path in _python_files(self.root):
            if path not in self.original:
                path.unlink()
                _stamp(path.parent, self.clock)
        for path, text in self.original.items():
            created = not path.exists()
            path.write_text(text)
            if created:
                _stamp(path.parent, self.clock)
        return "restore"

    def edit(self) -> str:
        ops = [self.add_call] * 4 + [self.remove_call] * 3 + [self.change_return] * 4 + [self.rename_import] * 3 \
            + [self.swap_scheduler] * 4 + [self.add_file] * 2 + [self.add_other_module] + [self.remove_file] \
            + [self.restore]
        while True:
            done = self.rng.choice(ops)()
            if done is not None:
                return done


def _findings(paths: list[str], cache: ResultCache | None):
    return [(Path(r.path).name, r.errors, sorted((f.code, f.line, f.column, f.message) for f in r.findings))
            for r in lint_paths(paths, ALL, cache=cache)]


def differential(tmp_path: Path, edits: int, seed: int) -> list[str]:
    """Apply `edits` random edits over the fixture projects; the mismatches, described."""
    rng = random.Random(seed)
    clock = [0]
    editors = []
    for source in sorted(PROJECTS.iterdir()):
        root = tmp_path / source.name
        shutil.copytree(source, root)
        for folder in [root, *(p for p in root.rglob("*") if p.is_dir())]:
            os.utime(folder, ns=(PAST, PAST))
        original = {p: p.read_text() for p in _python_files(root)}
        editors.append((Editor(root, original, rng, clock), ResultCache(tmp_path / "cache" / source.name)))
    mismatches = []
    for number in range(edits):
        editor, cache = editors[number % len(editors)]
        done = editor.edit()
        files = [str(p) for p in _python_files(editor.root)]
        if rng.random() < 0.15 and len(files) > 1:  # a run of some files only (pre-commit's)
            files = sorted(rng.sample(files, rng.randrange(1, len(files))))
        cached, fresh = _findings(files, cache), _findings(files, None)
        if cached != fresh:
            differing = [c[0] for c, f in zip(cached, fresh) if c != f]
            mismatches.append(f"seed {seed} edit {number} ({editor.root.name}: {done}): {differing}")
    return mismatches


# -- the cases the key once missed: the edit changes a file that the checked file never imports --
TRAINER = """
import torch.nn.functional as F


class Trainer:
    def __init__(self, model, optimizer, schedule, loader, accum_steps=4):
        self.model = model
        self.optimizer = optimizer
        self.schedule = schedule
        self.loader = loader
        self.accum_steps = accum_steps

    def fit(self):
        for i, (x, y) in enumerate(self.loader):
            loss = F.cross_entropy(self.model(x), y)
            (loss / self.accum_steps).backward()
            if (i + 1) % self.accum_steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()
            self.schedule.step()
"""
MAIN = """
import torch
from schedules import build_schedule
from trainer import Trainer


def main(model, loader):
    opt = torch.optim.AdamW(model.parameters())
    Trainer(model, opt, build_schedule(opt), loader, accum_steps=4).fit()
"""
NULL_CONTEXT = "import contextlib\n\n\ndef inference():\n    return contextlib.nullcontext()\n"
NO_GRAD = "import torch\n\n\ndef inference():\n    return torch.no_grad()\n"
EVALUATE = "\n\n@{decorator}()\ndef evaluate(model, loader):\n    model.eval()\n    return [model(x) for x, _ in loader]\n"
SAVE_HELPER = "import torch\n\n\ndef save_on_master(*args, **kwargs):\n    torch.save(*args, **kwargs)\n"
SAVE_CALL = "from common import save_on_master\n\n\ndef main(model, out):\n    save_on_master({}, out + {!r})\n"

STALE_CASES = {
    # the issue's: trainer.py's scheduler is built in main.py by a function of schedules.py
    "a schedule built in a caller's import": (
        {"trainer.py": TRAINER, "main.py": MAIN, "schedules.py": "def build_schedule(opt):\n    return Warmup(opt)\n"},
        {"schedules.py": "import torch\n\n\ndef build_schedule(opt):\n"
                         "    return torch.optim.lr_scheduler.StepLR(opt, 10)\n"},
        ["trainer.py", "main.py"], "trainer.py", "TL101"),
    "a module reached as an attribute of a package that does not import it": (
        {"evaluate.py": "import tools\n" + EVALUATE.format(decorator="tools.infer.inference"),
         "tools/__init__.py": "", "tools/infer.py": NULL_CONTEXT},
        {"tools/infer.py": NO_GRAD}, ["evaluate.py"], "evaluate.py", None),
    "an import after a semicolon": (
        {"evaluate.py": "import torch; from helpers import inference\n" + EVALUATE.format(decorator="inference"),
         "helpers.py": NULL_CONTEXT},
        {"helpers.py": NO_GRAD}, ["evaluate.py"], "evaluate.py", None),
    "a helper re-exported by a module the checked file imports": (
        {"evaluate.py": "from common import inference\n" + EVALUATE.format(decorator="inference"),
         "common.py": "from helpers import inference\n", "helpers.py": NULL_CONTEXT},
        {"helpers.py": NO_GRAD}, ["evaluate.py"], "evaluate.py", None),
    "a caller that imports the helper through another module": (
        {"dist_utils.py": SAVE_HELPER, "common.py": "from dist_utils import save_on_master\n",
         "train.py": SAVE_CALL.format("model.state_dict()", "/embeddings.pt")},
        {"train.py": SAVE_CALL.format("{'model': model.state_dict()}", "/checkpoint.pth")},
        ["dist_utils.py", "train.py"], "dist_utils.py", "TL402"),
}


@pytest.mark.parametrize("case", list(STALE_CASES))
def test_a_cached_result_changes_with_a_file_it_reads_without_importing(tmp_path, case):
    files, edit, checked, judged, expected = STALE_CASES[case]
    for name, text in {"pyproject.toml": "", **files}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    cache = ResultCache(tmp_path / ".cache")
    paths = [str(tmp_path / name) for name in checked]

    def codes(cache):
        return {Path(r.path).name: [f.code for f in r.findings] for r in lint_paths(paths, ALL, cache=cache)}[judged]

    before = codes(cache)
    for name, text in edit.items():
        (tmp_path / name).write_text(text)
    after = codes(None)
    assert after != before and (expected is None or after == [expected])
    assert codes(cache) == after


def test_a_new_link_to_a_file_already_read_changes_the_key(tmp_path):
    """sub/helpers.py, a link to other.py, now shadows helpers.py: no file is added to or removed
    from what evaluate.py reads, but the link is among its candidates."""
    for name, text in {"pyproject.toml": "", "helpers.py": NULL_CONTEXT, "other.py": NO_GRAD,
                       "sub/evaluate.py": "import other\nfrom helpers import inference\n"
                                          + EVALUATE.format(decorator="inference")}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    cache = ResultCache(tmp_path / ".cache")
    paths = [str(tmp_path / "sub/evaluate.py")]
    assert [f.code for f in list(lint_paths(paths, ALL, cache=cache))[0].findings] == ["TL301"]
    (tmp_path / "sub/helpers.py").symlink_to(tmp_path / "other.py")
    assert list(lint_paths(paths, ALL))[0].findings == []
    assert list(lint_paths(paths, ALL, cache=cache))[0].findings == []


@pytest.mark.parametrize("source, bound", [
    ("import a.b as c, d\nfrom .m import (x, y)  # z\n", {"a", "d", ".m.x", ".m.y"}),
    ("import torch; from helpers import inference\n", {"torch", "helpers.inference"}),
    ("from pkg import (first,\n                 second)\n", {"pkg.first", "pkg.second"}),
    ("from .pkg import (  # the two halves (see f())\n    first as one,\n    # a note\n    second,\n)  # end\n"
     "import after\n", {".pkg.first", ".pkg.second", "after"}),
    ("from pkg import (\n    first,\n    second\n)\nx = ')'\n", {"pkg.first", "pkg.second"}),
    ("from pkg \\\n    import first\n", {"pkg.first"}),
    ("def f():\n    if x: import late\n", {"late"}),
    ("doc = '>>> import doc'\nfrom . import sibling\nfrom .. import *\n", {".sibling"}),
    ("type Alias = int\nfrom helpers import inference\n", {"helpers.inference"}),  # newer syntax: LibCST's
])
def test_every_import_statement_binds_what_the_index_binds(source, bound):
    """The names the key follows, wherever the statements are (the line-start pattern alone
    misses all but the first)."""
    from trainlint.reader.project import bound_names, imported_names

    assert bound <= bound_names(source, "f.py") <= bound | set(imported_names(source))


def test_a_parenthesised_import_list_over_several_lines_is_read_without_a_parse(monkeypatch):
    """lightning's and timm's files import `from m import (` one name per line: read from the text,
    as a one-line import is, not by a parse of the whole file (a third of the index's cost)."""
    from trainlint.reader import project

    def refuse(*args, **kwargs):
        raise AssertionError("parsed")

    source = "from a import (\n    b,  # why (see c)\n    d as e,\n)\nimport f\n\n\ndef g():\n    return b\n"
    monkeypatch.setattr(project.ast, "parse", refuse)
    assert project.bound_names(source, "f.py") == {"a.b", "a.d", "f"}


@pytest.mark.parametrize("source", [
    "from a import (\n    b \\\n    , c)\n",  # a continuation inside the list
    "from a import (\n    b,\n    c) ; import d\n",  # more after the list
    "from a import (\n    b,\n",  # never closed
    "from a import (\n" + "    b,  # c)\n" * 5000,  # never closed, a comment with `)` on every line
])
def test_an_import_list_the_text_cannot_read_is_left_to_a_parse(source):
    from trainlint.reader.project import _simple_bound_names

    assert _simple_bound_names(source) is None


def test_a_file_that_changed_after_the_project_read_it_is_not_cached(tmp_path):
    from trainlint.reader.project import Project

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("x = 1\n")
    project = Project.for_paths([tmp_path / "a.py", tmp_path / "b.py"])
    digest = project.dependency_digest(str(tmp_path / "a.py"), b"import b\n")
    other = project.dependency_digest(str(tmp_path / "b.py"), b"x = 1\n")
    components = project.key_components()
    assert components[str((tmp_path / "a.py").resolve())][1] == components[str((tmp_path / "b.py").resolve())][1]
    assert None not in (digest, other) and digest != other  # one component, each file its own place in it
    assert project.dependency_digest(str(tmp_path / "a.py"), b"import c\n") is None
    assert project.dependency_digest(str(tmp_path / "elsewhere.py"), b"") is None


def test_a_component_under_a_folder_tree_too_large_to_list_is_not_cached(tmp_path, monkeypatch):
    """`import tools` may read any module below tools/: past the bound on folders listed, what
    the file reads is unknown, so its result is not stored."""
    from trainlint.reader import project

    files = {"pyproject.toml": "", "evaluate.py": "import tools\n" + EVALUATE.format(decorator="tools.a.b.infer.inference"),
             "tools/__init__.py": "", "tools/a/b/infer.py": NULL_CONTEXT, "other.py": "x = 1\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    paths = [str(tmp_path / "evaluate.py"), str(tmp_path / "other.py")]

    def stored(cache_dir):
        list(lint_paths(paths, ALL, cache=ResultCache(cache_dir)))
        return len([p for p in cache_dir.glob("??/*.json")])

    assert stored(tmp_path / "listed") == 2
    monkeypatch.setattr(project, "_MAX_FOLDERS", 2)
    assert stored(tmp_path / "unbounded") == 1  # other.py's component is small


def test_a_component_under_thousands_of_folders_is_cached(tmp_path):
    """An installed environment's site-packages holds thousands of folders (2,700 with torch,
    lightning, accelerate and timm): a file importing a package of 2,500 folders is still cached,
    so a warm run of installed packages reads its results back."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "evaluate.py").write_text("import tools\n" + EVALUATE.format(decorator="tools.a.b.infer.inference"))
    (tmp_path / "tools" / "a" / "b").mkdir(parents=True)
    (tmp_path / "tools" / "__init__.py").write_text("")
    (tmp_path / "tools" / "a" / "b" / "infer.py").write_text(NULL_CONTEXT)
    for number in range(2_500):
        (tmp_path / "tools" / f"part{number}").mkdir()
    list(lint_paths([str(tmp_path / "evaluate.py")], ALL, cache=ResultCache(tmp_path / "cache")))
    assert len(list((tmp_path / "cache").glob("??/*.json"))) == 1


def test_system_folders_are_never_listed(tmp_path):
    """/proc, /sys and /dev (a root of `/` names /sys for `import sys`) are unbounded at once."""
    from trainlint.reader import project
    from trainlint.reader.project import Project

    (tmp_path / "train.py").write_text("x = 1\n")
    checked = Project.for_paths([str(tmp_path / "train.py")])
    for folder in ("/proc", "/sys", "/dev", "/sys/kernel"):
        assert checked._below(folder) == [] and checked._resolved[folder][0] == project._UNBOUNDED
    assert checked._folders_listed == 0
    assert not project._system_folder("/system") and not project._system_folder("/devices/x")


def test_cached_results_match_uncached_after_random_edits(tmp_path):
    mismatches = differential(tmp_path, FAST_EDITS, seed=23)
    assert mismatches == [], f"{len(mismatches)} of {FAST_EDITS} edits:\n" + "\n".join(mismatches)


@pytest.mark.slow
def test_cached_results_match_uncached_after_a_thousand_random_edits(tmp_path):
    mismatches = differential(tmp_path, SLOW_EDITS, seed=2026)
    assert mismatches == [], f"{len(mismatches)} of {SLOW_EDITS} edits:\n" + "\n".join(mismatches)


def test_a_copy_of_a_checked_file_elsewhere_in_its_component_has_its_own_result(tmp_path):
    """optim/engine.py is a byte-for-byte copy of transformer.py: same content, same component, but
    its `.optim` import names a module that does not exist, so its optimizer is unproven and it has
    no finding. transformer.py never clears gradients (TL105) and must not get the copy's result."""
    root = PROJECTS / "trainer_good" / "src" / "lmtrain"
    transformer = (root / "transformer.py").read_text().replace("sched.zero_grad()", "pass")
    files = {"pyproject.toml": "", "lmtrain/__init__.py": "", "lmtrain/transformer.py": transformer,
             "lmtrain/optim/__init__.py": "from .scheduled import ScheduledOptim\n",
             "lmtrain/optim/scheduled.py": (root / "optim" / "scheduled.py").read_text(),
             "lmtrain/optim/engine.py": transformer}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    paths = sorted(str(tmp_path / name) for name in files if name.endswith(".py"))
    cache = ResultCache(tmp_path / ".cache")
    fresh = _findings(paths, None)
    assert ("transformer.py", [], [("TL105", 19, 17)]) in [(n, e, [f[:3] for f in fs]) for n, e, fs in fresh]
    assert ("engine.py", [], []) in fresh
    assert _findings(paths, cache) == fresh
    assert _findings(paths, cache) == fresh  # the warm run too


def test_a_copy_of_a_trainer_never_built_does_not_take_the_roles_its_original_is_built_with(tmp_path):
    """utils.py is a byte-for-byte copy of trainer.py, so both share one summary by content; only
    trainer.Trainer is built (by main.py, with a scheduler), so only trainer.py's `self.schedule` is
    proven a scheduler. The copy's check must not read the callers of the original's path (seed 23,
    edit 126 of the differential found it: the fresh run reported TL101 in the copy, the cached one
    did not)."""
    root = PROJECTS / "trainer_bad" / "src" / "lmtrain"
    shutil.copytree(root.parent.parent, tmp_path / "trainer_bad")
    package = tmp_path / "trainer_bad" / "src" / "lmtrain"
    (package / "utils.py").write_text((package / "trainer.py").read_text())
    paths = sorted(str(p) for p in _python_files(tmp_path / "trainer_bad"))
    fresh = {name: [f[0] for f in found] for name, _, found in _findings(paths, None)}
    assert "TL101" in fresh["trainer.py"]
    assert "TL101" not in fresh["utils.py"]
    assert _findings(paths, ResultCache(tmp_path / ".cache")) == _findings(paths, None)
