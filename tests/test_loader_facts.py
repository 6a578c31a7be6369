"""What the model knows about loaders: batches of one size (from a helper in another file too),
and a loader that is only drawn from (`next(iter(...))`)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from trainlint.context import FileContext
from trainlint.engine import lint_paths
from trainlint.model.index import walk
from trainlint.model.loader_use import only_drawn_from
from trainlint.settings import Settings, resolve_selection

DATA = """
from torch.utils.data import DataLoader


def make_loader(dataset, batch_size):
    loader = DataLoader(dataset, batch_size=batch_size, drop_last={drop})
    return loader


def loader_options(batch_size):
    return {{"batch_size": batch_size, "drop_last": {drop}}}
"""
EVALUATE = """
import torch
from torch.utils.data import DataLoader
from data import loader_options, make_loader


@torch.no_grad()
def by_factory(model, dataset, criterion):
    loader = make_loader(dataset, 64)
    total, batches = 0.0, 0
    for x, y in loader:
        total += criterion(model(x), y).item()
        batches += 1
    return total / batches


@torch.no_grad()
def by_options(model, dataset, criterion):
    loader = DataLoader(dataset, **loader_options(64))
    total, batches = 0.0, 0
    for x, y in loader:
        total += criterion(model(x), y).item()
        batches += 1
    return total / batches
"""


@pytest.mark.parametrize("drop,expected", [("True", []), ("False", [14, 24])])
def test_drop_last_from_a_helper_in_another_file(tmp_path, drop, expected):
    (tmp_path / "data.py").write_text(textwrap.dedent(DATA.format(drop=drop)))
    (tmp_path / "evaluate.py").write_text(textwrap.dedent(EVALUATE))
    settings = Settings(select=resolve_selection(["TL601"], [], []))
    result = list(lint_paths([str(tmp_path / "evaluate.py")], settings))[0]
    assert result.errors == []
    assert [f.line for f in result.findings] == expected


def _binding(source: str, holder: str):
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    ctx = FileContext("t.py", source, module, (2, 6))
    for node in walk(module):
        if isinstance(node, cst.Assign) and ctx.code_for(node.targets[0].target) == holder:
            return ctx, node
    raise AssertionError(holder)


@pytest.mark.parametrize("uses,drawn", [
    ("first = next(iter(val_loader))", True),
    ("first = next(iter(val_loader))\n    again = next(iter(val_loader))", True),
    ("it = iter(val_loader)\n    first = next(it)", False),  # drawn from batch after batch
    ("first = next(iter(val_loader))\n    n = len(val_loader)", False),
    ("first = next(iter(val_loader))\n    for b in val_loader:\n        pass", False),
    ("evaluate(val_loader)", False),
    ("pass", False),  # never used: nothing says how
])
def test_a_loader_only_drawn_from(uses, drawn):
    ctx, binding = _binding(f"def f(ds):\n    val_loader = DataLoader(ds, shuffle=True)\n    {uses}\n", "val_loader")
    assert only_drawn_from(ctx.index, "val_loader", binding) is drawn


def test_a_name_in_another_function_is_another_loader():
    source = """
    def preview(ds):
        val_loader = DataLoader(ds, shuffle=True)
        return next(iter(val_loader))

    def score(model, val_loader):
        return sum(model(x) for x in val_loader)
    """
    ctx, binding = _binding(source, "val_loader")
    assert only_drawn_from(ctx.index, "val_loader", binding)
