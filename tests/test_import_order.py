"""Import resolution against Python's own: many small generated trees (modules, packages, namespace
packages and both at once, nested, on a search path with a `src/` layout), each import resolved by
`Project.find_module` and by `importlib.util.find_spec` in a separate interpreter (the checked code
is only ever imported there, never by trainlint)."""

from __future__ import annotations

import dataclasses
import importlib.machinery
import json
import os
import random
import subprocess
import sys
from itertools import product
from pathlib import Path

import pytest

from trainlint.reader.project import Project

NAMES = ("optim", "sched")
TAIL = "thing"  # an attribute, never a module
# what a name can be in one folder; "module+package" is the decoy of issue 23
KINDS = ("none", "module", "package", "namespace", "module+package", "module+namespace", "bytecode",
         "extension")

# Python's answer: the file of the deepest module of a dotted name and the attribute path left,
# or None (nothing found, or a module trainlint cannot read: a namespace package, bytecode, an
# extension)
ORACLE = r"""
import importlib, importlib.util, json, os, sys

def answer(parts):
    for end in range(len(parts), 0, -1):
        try:
            spec = importlib.util.find_spec(".".join(parts[:end]))
        except (ImportError, ValueError):  # a parent is a module, or cannot be loaded
            continue
        if spec is None:
            continue
        if spec.origin is None or not spec.origin.endswith(".py"):
            return None
        return [os.path.realpath(spec.origin), parts[end:]]
    return None

out = []
for tree in json.load(sys.stdin):
    for name in [n for n in sys.modules if n.split(".")[0] in tree["names"]]:
        del sys.modules[name]
    sys.path[:] = tree["path"]
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    out.append([answer(parts) for parts in tree["queries"]])
print(json.dumps(out))
"""


def _plant(rng: random.Random, folder: Path, depth: int) -> None:
    for name in NAMES:
        kind = rng.choice(KINDS)
        if "module" in kind:
            (folder / f"{name}.py").write_text("thing = 1\n")
        if kind == "bytecode":
            (folder / f"{name}.pyc").write_bytes(b"not bytecode")
        if kind == "extension":
            (folder / f"{name}{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"not a library")
        if "package" in kind or "namespace" in kind:
            (folder / name).mkdir()
            if "package" in kind:
                (folder / name / "__init__.py").write_text("")
            if depth < 2:
                _plant(rng, folder / name, depth + 1)


def _dotted() -> list[list[str]]:
    names = [list(combo) for size in (1, 2, 3) for combo in product(NAMES, repeat=size)]
    return names + [[*parts, TAIL] for parts in names]


def _tree(rng: random.Random, root: Path) -> tuple[Path, list[str]]:
    """A project with a script in app/ (its search path: app/, the root, src/) and a regular
    package app/rel/ (with an inner package) for relative imports; the script's path."""
    (root / "src").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    (root / "app" / "rel" / "inner").mkdir(parents=True)
    (root / "app" / "rel" / "__init__.py").write_text("")
    (root / "app" / "rel" / "inner" / "__init__.py").write_text("")
    for folder in (root / "app", root, root / "src", root / "app" / "rel"):
        _plant(rng, folder, 1)
    script = root / "app" / "train.py"
    script.write_text("")
    return script, [str(root / "app"), str(root), str(root / "src")]


def test_imports_resolve_as_python_imports_them(tmp_path):
    rng = random.Random(23)
    trees, cases = [], []
    for number in range(120):
        root = tmp_path / f"t{number}"
        script, search_path = _tree(rng, root)
        absolute = [(".".join(parts), str(script), parts) for parts in _dotted()]
        here, inner = str(root / "app" / "rel" / "here.py"), str(root / "app" / "rel" / "inner" / "here.py")
        relative = [("." + ".".join(parts), here, ["rel", *parts]) for parts in _dotted()]
        relative += [(".." + ".".join(parts), inner, ["rel", *parts]) for parts in _dotted()]
        relative += [(".", inner, ["rel", "inner"]), ("..", inner, ["rel"])]
        queries = absolute + relative
        trees.append({"names": [*NAMES, "rel"], "path": search_path, "queries": [q[2] for q in queries]})
        cases.append((root, queries))
    done = subprocess.run([sys.executable, "-I", "-S", "-B", "-c", ORACLE], input=json.dumps(trees),
                          capture_output=True, text=True, check=True)
    expected = json.loads(done.stdout)

    compared = mismatches = 0
    for (root, queries), answers in zip(cases, expected):
        project = Project(root)
        for (qualname, from_path, _), answer in zip(queries, answers):
            found = project.find_module(qualname, from_path)
            got = [str(found[0]), found[1]] if found is not None else None
            compared += 1
            if got != answer:
                mismatches += 1
                assert got == answer, f"{qualname} from {from_path} in {root}"
    assert compared > 10_000 and mismatches == 0


def test_a_package_hides_a_module_of_the_same_name(tmp_path):
    """The decoy: `optim/` (a package) and `optim.py` side by side; Python imports the package, so
    its step-per-micro-batch scheduler is what the loop runs."""
    files = {
        "pyproject.toml": "",
        "optim.py": "def build(opt):\n    return None\n",
        "optim/__init__.py": "from .factory import build\n",
        "optim/factory.py": ("import torch\n\n\ndef build(opt):\n"
                             "    return torch.optim.lr_scheduler.StepLR(opt, step_size=10)\n"),
        "train.py": (
            "import torch\nfrom optim import build\n\n\n"
            "def train(model, loader, accumulation_steps=4):\n"
            "    optimizer = torch.optim.AdamW(model.parameters())\n"
            "    scheduler = build(optimizer)\n"
            "    for step, (x, y) in enumerate(loader):\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y) / accumulation_steps\n"
            "        loss.backward()\n"
            "        if (step + 1) % accumulation_steps == 0:\n"
            "            optimizer.step()\n"
            "            optimizer.zero_grad()\n"
            "        scheduler.step()\n"),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    project = Project(tmp_path)
    assert project.find_module("optim.build", str(tmp_path / "train.py")) == (
        Path(os.path.realpath(tmp_path / "optim/__init__.py")), ["build"])
    done = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--select", "TL101",
                           str(tmp_path / "train.py")], capture_output=True, text=True, cwd=tmp_path)
    assert "TL101" in done.stdout, done.stdout + done.stderr


PROJECTS = Path(__file__).resolve().parent / "fixtures" / "projects"


@pytest.mark.parametrize("ending", ["\r", "\r\n"])
def test_a_file_with_other_line_endings_follows_the_same_imports(ending):
    """The imports of a CR-only or CRLF file reach the same project files (a CR file's imports were
    once read as one line: `save_samples` from another file was not seen, and TL303 was missed)."""
    from trainlint.config import Resolver
    from trainlint.engine import lint_source

    resolver = Resolver()
    for folder in sorted(p for p in PROJECTS.iterdir() if p.is_dir()):
        files = sorted(folder.rglob("*.py"))
        project = Project.for_paths([str(p) for p in files], 10 * 1024 * 1024)
        for path in files:
            settings = dataclasses.replace(resolver.settings_for(str(path)), test_code_ignore=frozenset())
            text = path.read_text(encoding="utf-8")
            assert project.imported_files(str(path), text.replace("\n", ending)) == \
                project.imported_files(str(path), text), path
            found = {(f.code, f.line) for f in lint_source(text, str(path), settings, project).findings}
            other = {(f.code, f.line) for f in lint_source(text.replace("\n", ending), str(path), settings,
                                                            project).findings}
            assert other == found, path
