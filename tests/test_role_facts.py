"""Roles proven from what builds a value, not from its name: a `*_scaler` that a project factory
in another file builds as a plain function is no GradScaler (issue 35)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

UTILS = """
import torch


def save_checkpoint(ckpt_dir, state):
    saved_state = {
        "optimizer": state["optimizer"].state_dict(),
        "model": state["model"].state_dict(),
        "step": state["step"],
    }
    torch.save(saved_state, ckpt_dir)


def restore_checkpoint(ckpt_dir, state, device):
    loaded_state = torch.load(ckpt_dir, map_location=device)
    state["optimizer"].load_state_dict(loaded_state["optimizer"])
    state["model"].load_state_dict(loaded_state["model"])
    state["step"] = loaded_state["step"]
    return state
"""
DATA = {
    "lambda": """
def get_data_inverse_scaler(centered):
    if centered:
        return lambda x: (x + 1.0) / 2.0
    return lambda x: x
""",
    "gradscaler": """
import torch


def get_data_inverse_scaler(centered):
    return torch.cuda.amp.GradScaler(enabled=centered)
""",
}
RUN = """
import torch
import data
from utils import restore_checkpoint, save_checkpoint


def train(config, workdir):
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
    state = dict(optimizer=optimizer, model=model, step=0)
    state = restore_checkpoint(workdir + "/checkpoint.pth", state, config.device)
    inverse_scaler = data.get_data_inverse_scaler(config.centered)
    for step in range(config.steps):
        state["step"] = step
        train_step(state, inverse_scaler)
        save_checkpoint(workdir + "/checkpoint.pth", state)
"""


@pytest.mark.parametrize("built,expected", [("lambda", []), ("gradscaler", [11])])
def test_a_scaler_by_name_built_as_a_plain_function_is_no_grad_scaler(tmp_path, built, expected):
    (tmp_path / "utils.py").write_text(textwrap.dedent(UTILS))
    (tmp_path / "data.py").write_text(textwrap.dedent(DATA[built]))
    (tmp_path / "run.py").write_text(textwrap.dedent(RUN))
    # the whole folder, as a user checks it: the callers in run.py are the project's
    done = subprocess.run([sys.executable, "-m", "trainlint", ".", "--select", "TL404", "--no-cache",
                           "--output-format", "json"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == (1 if expected else 0), done.stderr
    findings = json.loads(done.stdout)["findings"]
    assert [(f["path"], f["line"]) for f in findings] == [("utils.py", line) for line in expected]
