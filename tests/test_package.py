"""The package layout: rules/ is trainlint.rules, installed or run from the checkout."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_checkout_finds_rules_beside_the_package():
    # `python -c` puts the current directory first on sys.path: from the repository root the
    # checkout's trainlint/ is imported, and rules/ must still be found as trainlint.rules.
    code = "import trainlint.rules; print(trainlint.rules.__file__); print(len(trainlint.rules.registry()))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    path, count = proc.stdout.split()
    assert Path(path) == ROOT / "rules" / "__init__.py"
    assert int(count) >= 20


def test_no_top_level_rules_module_is_installed():
    proc = subprocess.run([sys.executable, "-c", "import rules"], cwd="/", capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0 and "No module named 'rules'" in proc.stderr


def _source_packages() -> set[str]:
    """Every package in the checkout, named as installed (rules/ is trainlint.rules)."""
    names = set()
    for init in ROOT.glob("trainlint/**/__init__.py"):
        names.add(".".join(init.parent.relative_to(ROOT).parts))
    for init in ROOT.glob("rules/**/__init__.py"):
        names.add(".".join(("trainlint", *init.parent.relative_to(ROOT).parts)))
    return names


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (built,) = out.glob("trainlint-*.whl")
    return built


def test_wheel_ships_every_package_and_module(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {name.rsplit("/", 1)[0].replace("/", ".") for name in names if name.endswith("/__init__.py")}
    expected = _source_packages()
    assert {"trainlint.model", "trainlint.runtime.demos", "trainlint.rules", "trainlint.lsp"} <= expected
    assert shipped == expected
    modules = {name for name in names if name.endswith(".py")}
    for source in [*ROOT.glob("trainlint/**/*.py"), *ROOT.glob("rules/**/*.py")]:
        relative = source.relative_to(ROOT).as_posix()
        installed = relative if relative.startswith("trainlint/") else "trainlint/" + relative
        assert installed in modules, f"{relative} is not in the wheel"
    assert not any(name.startswith("rules/") for name in names), "rules/ must not install at top level"
    # the framework models are data the model reads at import (trainlint/model/frameworks.py)
    models = sorted(source.relative_to(ROOT).as_posix() for source in ROOT.glob("trainlint/frameworks/*.toml"))
    assert models and set(models) <= set(names), f"framework models missing from the wheel: {set(models) - set(names)}"


def test_wheel_runs_outside_the_checkout(wheel, tmp_path):
    # The wheel's own files, not the checkout or the editable install: -I ignores the current
    # directory and PYTHONPATH, so the extracted wheel goes first on sys.path explicitly.
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    (tmp_path / "train.py").write_text('import torch\nstate = torch.load("ckpt.pt", weights_only=False)\n')
    code = ("import sys; sys.path.insert(0, sys.argv.pop(1)); import trainlint, trainlint.runtime.demos; "
            "assert trainlint.__file__.startswith(sys.path[0]), trainlint.__file__; "
            "from trainlint.cli import main; sys.argv[0] = 'trainlint'; main()")
    proc = subprocess.run([sys.executable, "-I", "-c", code, str(site), "check", "--no-cache", "train.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "train.py:2:9: TL401" in proc.stdout
