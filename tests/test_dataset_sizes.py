"""Sizes the code states (trainlint.model.dataset_sizes): a loader whose every batch is full."""

from __future__ import annotations

import textwrap

import libcst as cst

from trainlint.context import FileContext
from trainlint.model.dataflow import dataflow
from trainlint.model.dataset_sizes import full_batches


def _full(source: str) -> bool:
    source = textwrap.dedent(source).lstrip("\n")
    module = cst.parse_module(source)
    ctx = FileContext("t.py", source, module, (2, 6))
    calls = [site.node for site in ctx.index.calls
             if isinstance(site.node.func, cst.Name) and site.node.func.value == "DataLoader"]
    return full_batches(ctx.model(dataflow), calls[-1])


_HEAD = """
import numpy as np
import torch
from torch.utils.data import DataLoader, Subset, TensorDataset
"""


def test_a_stated_length_that_is_a_multiple_of_a_stated_batch_size():
    assert _full(_HEAD + """
def f(ds):
    bs = 32
    n, d = int(1e4), 10
    data = TensorDataset(torch.rand(n, d), torch.rand(n))
    data = Subset(data, list(range(bs * 10)))
    return DataLoader(data, batch_size=bs)
""")
    assert _full(_HEAD + """
def f():
    return DataLoader(TensorDataset(torch.zeros((64, 3))), 16)
""")
    assert _full(_HEAD + """
def f(ds):
    return DataLoader(Subset(ds, np.arange(10, 50)), batch_size=8)
""")


def test_a_remainder_an_unknown_size_a_sampler_or_a_branch_leave_it_unknown():
    assert not _full(_HEAD + """
def f(ds):
    return DataLoader(Subset(ds, range(100)), batch_size=32)
""")
    assert not _full(_HEAD + """
def f(ds, bs):
    return DataLoader(Subset(ds, range(bs * 10)), batch_size=bs)
""")
    assert not _full(_HEAD + """
def f(ds, sampler):
    return DataLoader(Subset(ds, range(64)), batch_size=32, sampler=sampler)
""")
    assert not _full(_HEAD + """
def f(ds, more):
    n = 64
    if more:
        n = 65
    return DataLoader(Subset(ds, range(n)), batch_size=32)
""")


def test_parameters_stated_by_every_call_of_the_function():
    # the length comes from a helper's return, its size from what the call passes; the loader's
    # dataset and batch size are parameters every call of the training function states
    assert _full(_HEAD + """
def make_data(count, width, seed=0):
    torch.manual_seed(seed)
    xs = torch.randint(0, 50, (count, width))
    return TensorDataset(xs, torch.randint(50, (count, width)))

def fit(data, bs=4):
    return DataLoader(data, batch_size=bs, shuffle=False)

def main():
    total = 24
    data = make_data(total, 8)
    fit(data, bs=6)
    fit(make_data(12, 3))
""")


def test_a_call_with_a_remainder_a_callback_or_no_call_leaves_it_unknown():
    # one call states 30 samples in batches of 4: its last batch is short
    assert not _full(_HEAD + """
def make_data(count):
    return TensorDataset(torch.randint(0, 50, (count, 8)))

def fit(data, bs=4):
    return DataLoader(data, batch_size=bs)

def main():
    fit(make_data(24))
    fit(make_data(30))
""")
    # handed away as a callback: whoever runs it chooses the arguments
    assert not _full(_HEAD + """
def fit(data, bs=4):
    return DataLoader(data, batch_size=bs)

def main(runners):
    fit(TensorDataset(torch.zeros(8)))
    runners.append(fit)
""")
    # never called: nothing states the parameters
    assert not _full(_HEAD + """
def fit(data, bs=4):
    return DataLoader(data, batch_size=bs)
""")
    # a helper that returns from a branch may hand back another dataset
    assert not _full(_HEAD + """
def make_data(count, big):
    if big:
        return TensorDataset(torch.zeros(count * 3 + 1))
    return TensorDataset(torch.zeros(count))

def fit(data):
    return DataLoader(data, batch_size=4)

def main():
    fit(make_data(8, True))
""")
