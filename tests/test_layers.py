"""The import contracts of pyproject.toml (`[tool.importlinter]`): imports run one way through the
layers, and no package's modules import each other in a circle. `lint-imports` runs in a real
subprocess over the installed layout (`scripts/lint_imports.py`: rules/ as trainlint.rules)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("lint_imports", REPO / "scripts" / "lint_imports.py")
lint_imports = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lint_imports)


def _check(tmp_path: Path, plant: tuple[str, str] | None = None):
    staged = lint_imports.stage(tmp_path / "staged")
    if plant is not None:
        path = staged / plant[0]
        path.write_text(path.read_text() + plant[1])
    return lint_imports.lint_imports(staged)


def test_the_contracts_are_kept(tmp_path):
    result = _check(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


def test_the_rules_are_in_the_graph(tmp_path):
    # a rule importing the engine is an upward import: seen only if grimp reads the rules
    result = _check(tmp_path, ("trainlint/rules/tl401_unsafe_torch_load.py",
                               "\n\ndef _planted():\n    from trainlint import engine  # noqa: F401\n"))
    assert result.returncode == 1
    assert "trainlint.rules.tl401_unsafe_torch_load -> trainlint.engine" in result.stdout


@pytest.mark.parametrize("module, importer, imported", [
    ("trainlint/model/index.py", "trainlint.model.index", "trainlint.engine"),  # model -> engine
    ("trainlint/reader/project.py", "trainlint.reader.project", "trainlint.model.summaries"),  # reader -> model
    ("trainlint/settings.py", "trainlint.settings", "trainlint.config"),  # settings -> config
    ("trainlint/engine.py", "trainlint.engine", "trainlint.config"),  # the engine never reads configuration
])
def test_an_upward_import_breaks_the_layers_even_inside_a_function(tmp_path, module, importer, imported):
    package, _, name = imported.rpartition(".")
    result = _check(tmp_path, (module, f"\n\ndef _planted():\n    from {package} import {name}  # noqa: F401\n"))
    assert result.returncode == 1
    assert "is not allowed to import" in result.stdout
    assert f"{importer} -> {imported}" in result.stdout


def test_a_circle_inside_one_layer_breaks_the_other_contract(tmp_path):
    # roles imports index; index importing roles back is a circle within the model
    result = _check(tmp_path, ("trainlint/model/index.py",
                               "\n\ndef _planted():\n    from trainlint.model import roles  # noqa: F401\n"))
    assert result.returncode == 1
    assert "No cycles are allowed in trainlint.model." in result.stdout
    assert "Contracts: 1 kept, 1 broken." in result.stdout  # the layers cannot see it
