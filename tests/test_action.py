"""action.yml: the GitHub Action's steps, run as the runner runs them (bash, inputs in the env)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import BAD, GOOD

ROOT = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
_EXPRESSION = re.compile(r"\$\{\{\s*(inputs|github)\.(\w+)\s*\}\}")


def _step(name: str) -> dict:
    return next(step for step in ACTION["runs"]["steps"] if step["name"] == name)


def _run_step(name: str, inputs: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """Run one step as the runner would: its `env` with the expressions filled in, its script in bash."""
    step = _step(name)
    values = {key: spec.get("default", "") for key, spec in ACTION["inputs"].items()} | inputs
    github = {"action_path": str(ROOT)}
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    for key, value in step.get("env", {}).items():
        env[key] = _EXPRESSION.sub(lambda m: values[m.group(2)] if m.group(1) == "inputs" else github[m.group(2)],
                                   value)
    assert "${{" not in step["run"], "inputs must reach the script through env, never its text"
    return subprocess.run([step["shell"], "-e", "-c", step["run"]], cwd=cwd, env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=120)


def test_action_metadata():
    assert ACTION["runs"]["using"] == "composite"
    assert set(ACTION["inputs"]) == {"paths", "args", "version"}
    install = _step("Install trainlint")
    assert install["env"]["TRAINLINT_SOURCE"] == "${{ github.action_path }}"
    assert "pip install" in install["run"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(BAD)
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "eval.py").write_text(GOOD)
    (tmp_path / "trainlint.toml").write_text('select = ["TL401"]\n')
    return tmp_path


def test_run_step_annotates_and_fails_on_findings(workspace):
    proc = _run_step("Run trainlint", {}, workspace)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("::error file=src/train.py,line=3,col=9,")
    assert "title=TL401 unsafe-torch-load::" in proc.stdout


def test_run_step_passes_paths_and_args(workspace):
    clean = _run_step("Run trainlint", {"paths": "tools", "args": ""}, workspace)
    assert (clean.returncode, clean.stdout) == (0, "")
    both = _run_step("Run trainlint", {"paths": "tools src", "args": "--exit-zero --select TL4"}, workspace)
    assert both.returncode == 0 and both.stdout.count("::error ") == 1
    odd = _run_step("Run trainlint", {"paths": "src", "args": "--no-such-option"}, workspace)
    assert odd.returncode == 2
