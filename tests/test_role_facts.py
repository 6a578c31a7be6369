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


FACTORY = {
    # the loader is the second element of what the other file's factory returns
    "loader": """
from torch.utils.data import DataLoader


def data_provider(args, flag):
    data_set = list(range(args.n))
    data_loader = DataLoader(data_set, batch_size=args.batch_size, shuffle=flag == "train")
    return data_set, data_loader
""",
    # the look-alike: the same shape, but the second element is a plain list of index batches
    "list": """
def data_provider(args, flag):
    data_set = list(range(args.n))
    data_loader = [data_set[i:i + args.batch_size] for i in range(0, args.n, args.batch_size)]
    return data_set, data_loader
""",
}
EXPERIMENT = """
import numpy as np
import torch
from provider import data_provider


class Experiment:
    def __init__(self, args, model):
        self.args = args
        self.model = model

    def _get_data(self, flag):
        data_set, data_loader = data_provider(self.args, flag)
        return data_set, data_loader

    def vali(self, vali_data, vali_loader, criterion):
        total_loss = []
        self.model.eval()
        with torch.no_grad():
            for batch_x, batch_y in vali_loader:
                loss = criterion(self.model(batch_x), batch_y)
                total_loss.append(loss.item())
        total_loss = np.average(total_loss)
        self.model.train()
        return total_loss

    def train(self):
        vali_data, vali_loader = self._get_data(flag="val")
        return self.vali(vali_data, vali_loader, torch.nn.MSELoss())
"""


@pytest.mark.parametrize("kind", ["loader", "list"])
def test_a_loader_returned_in_a_tuple_by_another_files_factory_is_proven(tmp_path, kind):
    """`vali_loader` comes through a method from the second element of another file's
    `data_provider(...)`: a DataLoader its code builds proves the role (TL601 reports); the same
    shape handing back a list of batches proves nothing, and the name alone reports nothing."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "provider.py").write_text(textwrap.dedent(FACTORY[kind]))
    (tmp_path / "exp.py").write_text(textwrap.dedent(EXPERIMENT))
    done = subprocess.run([sys.executable, "-m", "trainlint", ".", "--select", "TL601", "--no-cache",
                           "--output-format", "json"], capture_output=True, text=True, cwd=tmp_path)
    findings = json.loads(done.stdout)["findings"]
    if kind == "loader":
        [finding] = findings
        assert finding["code"] == "TL601" and finding["path"].endswith("exp.py")
        assert any("data_provider" in e["premise"] and e["verdict"] == "proven" for e in finding["evidence"])
    else:
        assert findings == []


SCHEDULES = {
    # a factory of the rate as a function of the round: a nested def in one branch, a lambda in another
    "function": """
def get_round_lr_scheduler(rounds, kind):
    if kind == "const":
        rate = lambda r: 1.0
    else:
        def rate(r):
            return max(0.0, 1.0 - r / rounds)
    return rate
""",
    # the look-alike: the same factory wraps the rate in a torch scheduler, which counts its steps
    "scheduler": """
import torch


def get_round_lr_scheduler(rounds, kind, optimizer):
    def rate(r):
        return max(0.0, 1.0 - r / rounds)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
""",
}
ROUNDS = """
import torch
import schedules


def save_checkpoint(round_number, model, optimizer):
    torch.save({"round": round_number, "model": model.state_dict(), "optimizer": optimizer.state_dict()},
               "checkpoint.pt")


def main(args, model, loader):
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    lr_schedule = schedules.get_round_lr_scheduler(args.rounds, args.kind{extra})
    start = 0
    if args.resume:
        ckpt = torch.load("checkpoint.pt", map_location="cpu")
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        start = ckpt["round"] + 1
    for round_number in range(start, args.rounds):
        train_round(model, optimizer, loader, lr_schedule)
        save_checkpoint(round_number, model, optimizer)
"""


@pytest.mark.parametrize("built,expected", [("function", []), ("scheduler", [7])])
def test_a_schedule_factory_handing_back_a_plain_function_builds_no_scheduler(tmp_path, built, expected):
    """`get_round_lr_scheduler(...)` of another file returns a function of the round (a nested
    `def` or a lambda): a stateless rate the saved round gives back, not a scheduler whose state
    the checkpoint leaves out; the same factory returning a `LambdaLR` builds one (TL404 reports)."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "schedules.py").write_text(textwrap.dedent(SCHEDULES[built]))
    extra = ", optimizer" if built == "scheduler" else ""
    (tmp_path / "run.py").write_text(textwrap.dedent(ROUNDS.replace("{extra}", extra)))
    done = subprocess.run([sys.executable, "-m", "trainlint", ".", "--select", "TL404", "--no-cache",
                           "--output-format", "json"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == (1 if expected else 0), done.stderr
    findings = json.loads(done.stdout)["findings"]
    assert [(f["path"], f["line"]) for f in findings] == [("run.py", line) for line in expected]


SEQUENTIAL = """
import torch
from torch import nn


class C1:
    def __init__(self, v2):
        self.v8 = {layer}
        self.v7 = v2

    def f1(self):
        v3 = 0
        for v5, v6 in torch.utils.data.DataLoader(self.v7, batch_size=64):
            v3 += nn.functional.mse_loss(self.v8(v5), v6)
        return v3

    def f2(self):
        print(self.f1().item())
"""


@pytest.mark.parametrize(("layer", "fires"), [
    ("nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))", True),  # a network: its call is a forward
    ("torch.nn.Sequential(nn.Linear(4, 1))", True),
    # a single layer is no model role (a head, a projection), but its weights record a graph
    # (dataflow: a `torch.nn` layer with weights, built here, not frozen)
    ("nn.Linear(4, 1)", True),
    ("nn.MSELoss()", False),
    ("nn.Tanh()", False),  # no weights: a graph only through its input (the loader's data)
])
def test_a_sequential_built_in_place_is_a_model_whatever_its_name(layer, fires):
    """TL501: losses of `self.v8(x)` summed over a loader and returned to a caller that only prints
    them keep every batch's graph. `self.v8` is a model because `nn.Sequential(...)` builds it, not
    because of its name; a single layer or a loss module gets no model role (a layer with weights
    still records a graph; a loss module or a layer without weights only passes its input's on)."""
    from trainlint.engine import lint_source
    from trainlint.settings import Settings, resolve_selection

    result = lint_source(SEQUENTIAL.format(layer=layer), "solver.py",
                         Settings(select=resolve_selection(["TL501"], [], [])))
    assert ("TL501" in {f.code for f in result.findings}) is fires
