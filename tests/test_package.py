"""The package layout: rules/ is trainlint.rules, installed or run from the checkout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_checkout_finds_rules_beside_the_package():
    # `python -c` puts the current directory first on sys.path: from the repository root the
    # checkout's trainlint/ is imported, and rules/ must still be found as trainlint.rules.
    code = "import trainlint.rules, trainlint.rule as r; print(trainlint.rules.__file__); print(len(r.registry()))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    path, count = proc.stdout.split()
    assert Path(path) == ROOT / "rules" / "__init__.py"
    assert int(count) >= 20


def test_no_top_level_rules_module_is_installed():
    proc = subprocess.run([sys.executable, "-c", "import rules"], cwd="/", capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0 and "No module named 'rules'" in proc.stderr
