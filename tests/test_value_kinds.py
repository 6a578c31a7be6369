"""Value kinds: which expressions are Python numbers (sizes, counts, arithmetic on them)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from trainlint.context import FileContext
from trainlint.model.dataflow import dataflow
from trainlint.model.index import walk
from trainlint.model.value_kinds import is_number

SOURCE = """
import math
import torch

def run(model, loader, opt, args):
    for x, y in loader:
        out = model(x)
        loss = torch.nn.functional.mse_loss(out, y)
        loss.backward()
        b, c = out.shape
        n = out.size(0)
        k = n * 2
        k += 1
        mixed = n
        mixed = loss
        keep.append({value})
"""


def _probe(value: str):
    source = textwrap.dedent(SOURCE.format(value=value))
    module = cst.parse_module(source)
    ctx = FileContext("t.py", source, module, (2, 6))
    for node in walk(module):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value == "append" and ctx.code_for(node.func.value) == "keep":
            expr = node.args[0].value
            return ctx, expr


@pytest.mark.parametrize("value", [
    "x.size(0)", "out.shape[1]", "out.numel() / 4", "len(x) // 2", "b * c", "n", "k", "-n + 1.5",
    "loss.item() * x.size(0)", "math.ceil(n / 3)", "max(n, 1)", "float(loss)", "out.dim()", "x.shape[-2:]",
])
def test_numbers_are_known_and_carry_no_graph(value):
    ctx, expr = _probe(value)
    assert is_number(expr, ctx.index.scope_at(expr), ctx.index.resolve)
    assert ctx.model(dataflow).carries_graph(expr) is False


@pytest.mark.parametrize("value", ["loss", "loss * x.size(0)", "out.sum() / n", "mixed", "max(loss, n)",
                                   "out", "args.scale"])
def test_tensors_and_unknowns_are_not_numbers(value):
    ctx, expr = _probe(value)
    assert not is_number(expr, ctx.index.scope_at(expr), ctx.index.resolve)


def test_a_project_function_named_like_a_builtin_is_not_the_builtin():
    source = "def len(t):\n    return t * 2\n\nkeep.append(len(loss))\n"
    module = cst.parse_module(source)
    ctx = FileContext("t.py", source, module, (2, 6))
    call = next(n for n in walk(module) if isinstance(n, cst.Call) and isinstance(n.func, cst.Name)
                and n.func.value == "len")
    assert not is_number(call, ctx.index.scope_at(call), ctx.index.resolve)


MODELS = """
import torch.nn as nn


class Pruned(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        kept = x[:, ::2]
        return self.fc(kept), {second}
"""
TRAIN = """
import torch
from models import Pruned

model = Pruned()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
total = 0.0
for x, y in loader:
    out, second = model(x)
    loss = torch.nn.functional.mse_loss(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += second
"""


@pytest.mark.parametrize("second,fires", [("kept.size(1) / x.size(1)", False), ("kept.abs().mean()", True)])
def test_a_size_ratio_a_model_in_another_file_returns_is_a_number(tmp_path, second, fires):
    from trainlint.engine import lint_paths
    from trainlint.settings import Settings, resolve_selection

    (tmp_path / "models.py").write_text(MODELS.format(second=second))
    (tmp_path / "train.py").write_text(TRAIN)
    settings = Settings(select=resolve_selection(["TL501"], [], []))
    results = list(lint_paths([str(tmp_path / "train.py")], settings))
    assert [f.code for f in results[0].findings] == (["TL501"] if fires else [])


ROLE_SOURCE = """
import torch

def main({param}):
    {body}
"""


@pytest.mark.parametrize("param, body, role", [
    # the name says optimizer, the uses say an options namespace
    ("opt", "print(opt.resume_path, opt.arch); opt.begin_epoch = 1", None),
    ("optim", "run(optim.lr_steps, optim.batch_size, optim.workers)", None),
    ("scheduler", "return scheduler.milestones_file, scheduler.warmup_epochs", None),
    # one use of what an optimizer or a scheduler offers keeps what the name says
    ("opt", "print(opt.resume_path, opt.arch); opt.step()", "optimizer"),
    ("opt", "opt.param_groups[0]['lr'] = opt.base, opt.floor", "optimizer"),
    ("lr_scheduler", "lr_scheduler.warmup, lr_scheduler.total = 1, 2; lr_scheduler.step()", "scheduler"),
    # too little said: the name decides
    ("opt", "print(opt.resume_path)", "optimizer"),
    ("opt", "run(opt)", "optimizer"),
])
def test_a_name_guess_yields_to_how_the_name_is_used(param, body, role):
    from trainlint.model.roles import roles

    source = ROLE_SOURCE.format(param=param, body=body)
    module = cst.parse_module(source)
    ctx = FileContext("t.py", source, module, (2, 6))
    function = next(f for f in ctx.index.functions if f.name == "main")
    assert ctx.model(roles).of(cst.Name(param), function.scope) == role
