"""Check the import contracts of pyproject.toml (`[tool.importlinter]`: the layers, no circles).

    python scripts/lint_imports.py        # exit 0 when every contract is kept, 1 when one is broken

import-linter (grimp) finds a package's modules by walking its folder. In a checkout the rules
live beside the package (rules/, installed as `trainlint.rules` by setup.py's package_dir, and
found at run time through trainlint/__init__.py's `__path__`), so grimp would not see them: every
import of a rule and every import a rule makes would be missing from the graph. So the contracts
are checked on the installed layout: trainlint/ and rules/ copied into a temporary folder as
trainlint/ and trainlint/rules/, and `lint-imports` run there (the copy is only read, never run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


def stage(destination: Path, repo: Path = REPO) -> Path:
    """Copy the package as it installs (rules/ as trainlint/rules/) into `destination`."""
    shutil.copytree(repo / "trainlint", destination / "trainlint", ignore=_IGNORE)
    shutil.copytree(repo / "rules", destination / "trainlint" / "rules", ignore=_IGNORE)
    return destination


def lint_imports(staged: Path, config: Path = REPO / "pyproject.toml") -> subprocess.CompletedProcess:
    """`lint-imports` over the staged copy, with only that copy on the path for `trainlint`."""
    scripts = Path(sysconfig.get_path("scripts"))
    executable = shutil.which("lint-imports", path=str(scripts)) or shutil.which("lint-imports")
    if executable is None:
        raise SystemExit("lint-imports not found: pip install import-linter (the dev extra has it)")
    env = {**os.environ, "PYTHONPATH": str(staged)}
    return subprocess.run([executable, str(config), "--no-cache", "--no-logo"], cwd=staged, env=env,
                          capture_output=True, text=True)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="trainlint-layers-") as folder:
        result = lint_imports(stage(Path(folder)))
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return 0 if result.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
