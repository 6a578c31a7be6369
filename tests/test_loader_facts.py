"""What the model knows about loaders: batches of one size (from a helper in another file too),
and a loader that is only drawn from (`next(iter(...))`)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from trainlint.context import FileContext
from trainlint.engine import lint_paths
from trainlint.model.index import walk
from trainlint.model.loader_use import never_read, only_drawn_from
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
    ("it = iter(val_loader)\n    first = next(it)", True),  # one batch of a fresh iterator, drawn once
    ("it = iter(val_loader)\n    while True:\n        first = next(it)", False),  # batch after batch
    ("it = iter(val_loader)\n    first = next(it)\n    rest = list(it)", False),  # the rest gone through
    ("first = next(iter(val_loader))\n    n = len(val_loader)", True),  # a count iterates nothing
    ("n = len(val_loader)", False),  # nothing drawn either
    ("first = iter(val_loader).next()", True),  # Python 2's spelling of the draw
    # a fresh loader bound to the name when the first is exhausted is no use of it
    ("first = iter(val_loader).next()\n    val_loader = DataLoader(ds, shuffle=True)", True),
    ("first = next(iter(val_loader))\n    for b in val_loader:\n        pass", False),
    ("evaluate(val_loader)", False),
    ("pass", False),  # never used: nothing says how
])
def test_a_loader_only_drawn_from(uses, drawn):
    ctx, binding = _binding(f"def f(ds):\n    val_loader = DataLoader(ds, shuffle=True)\n    {uses}\n", "val_loader")
    assert only_drawn_from(ctx.index, "val_loader", binding) is drawn


@pytest.mark.parametrize("bound,drawn", [
    ("min(max_iter, len(val_loader))", True),  # at most the default's 100 batches
    ("max_iter", True),
    ("8", True),
    ("len(val_loader)", False),  # a pass over the set, one batch at a time
    ("steps", False),  # a parameter without a default: any number, the set's length too
    ("min(steps, len(val_loader))", False),
])
def test_a_loader_drawn_a_capped_number_of_times(bound, drawn):
    source = f"""
    def f(ds, steps, max_iter=100):
        val_loader = DataLoader(ds, shuffle=True)
        it = iter(val_loader)
        max_iter = min(max_iter, len(val_loader))
        for i in range({bound}):
            x, y = it.next()
    """
    ctx, binding = _binding(source, "val_loader")
    assert only_drawn_from(ctx.index, "val_loader", binding) is drawn


@pytest.mark.parametrize("uses,unread", [
    ("pass", True),
    ("val_loader = DataLoader(ds)", True),  # bound again, still never read
    ("for b in val_loader:\n        pass", False),
    ("return val_loader", False),
    ("loaders = {'val': val_loader}", False),
    ("def inner():\n        return len(val_loader)", False),  # read by a nested function
    ("global val_loader", False),  # the module's name: read anywhere
])
def test_a_loader_never_read(uses, unread):
    ctx, binding = _binding(f"def f(ds):\n    val_loader = DataLoader(ds, shuffle=True)\n    {uses}\n", "val_loader")
    assert never_read(ctx.index, "val_loader", binding) is unread


def test_a_module_level_loader_is_never_taken_for_unread():
    ctx, binding = _binding("val_loader = DataLoader(ds, shuffle=True)\n", "val_loader")
    assert not never_read(ctx.index, "val_loader", binding)  # another file may import it


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


@pytest.mark.parametrize("uses,drawn", [
    ("for b in val_loader:\n        break", True),  # one batch
    ("for i, b in enumerate(val_loader):\n        if i >= 3:\n            break\n        show(b)", True),
    ("for i, b in enumerate(val_loader):\n        if loss_is_nan(b):\n            break", False),  # not a bound
    ("for b in val_loader:\n        show(b)", False),  # gone through
    ("batches = itertools.cycle(val_loader)\n    first = next(batches)", True),
    ("batches = itertools.cycle(val_loader)\n    for b in batches:\n        pass", False),
])
def test_a_loader_drawn_by_a_bounded_loop_or_an_endless_cycle(uses, drawn):
    source = f"import itertools\ndef f(ds):\n    val_loader = DataLoader(ds, shuffle=True)\n    {uses}\n"
    ctx, binding = _binding(source, "val_loader")
    assert only_drawn_from(ctx.index, "val_loader", binding) is drawn


SAMPLER = """
def listen(model, loader, samples):
    for i, (mel, wav) in enumerate(loader, 1):
        if i > samples:
            break
        save(model.generate(mel), i)


def score(model, loader):
    total = 0.0
    for mel, wav in loader:
        total += (model(mel) - wav).abs().mean().item()
    return total
"""
TRAIN = """
from torch.utils.data import DataLoader
from sampler import {helper}


def fit(model, dataset):
    test_loader = DataLoader(dataset, batch_size=4, shuffle=True)
    return {helper}(model, test_loader, 4) if "{helper}" == "listen" else {helper}(model, test_loader)
"""


@pytest.mark.parametrize("helper,expected", [("listen", []), ("score", [7])])
def test_a_loader_handed_to_a_helper_in_another_file_that_only_draws(tmp_path, helper, expected):
    (tmp_path / "sampler.py").write_text(textwrap.dedent(SAMPLER))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN.format(helper=helper)))
    settings = Settings(select=resolve_selection(["TL602"], [], []))
    result = list(lint_paths([str(tmp_path / "train.py")], settings))[0]
    assert result.errors == []
    assert [f.line for f in result.findings] == expected


PROVIDER = """
from torch.utils.data import DataLoader


def data_provider(args, flag):
    if flag == "test":
        drop_last = {test_drop}
    elif flag == "pred":
        drop_last = False
    else:
        drop_last = True
    data_set = Series(args.root, flag=flag)
    return data_set, DataLoader(data_set, batch_size=args.batch_size, drop_last=drop_last)
"""
EXPERIMENT = """
import numpy as np
import torch
from provider import data_provider


class Experiment:
    def _get_data(self, flag):
        data_set, data_loader = data_provider(self.args, flag)
        return data_set, data_loader

    def vali(self, vali_loader, criterion):
        total_loss = []
        with torch.no_grad():
            for x, y in vali_loader:
                total_loss.append(criterion(self.model(x), y).item())
        return np.average(total_loss)

    def train(self, criterion):
        vali_data, vali_loader = self._get_data(flag="val")
        test_data, test_loader = self._get_data(flag="{flag}")
        return self.vali(vali_loader, criterion), self.vali(test_loader, criterion)
"""


@pytest.mark.parametrize("test_drop,flag,expected", [
    ("True", "test", []),  # every loader vali() sees drops its last batch
    ("False", "test", [17]),  # the test loader keeps it
    ("False", "val", []),  # ... but vali() is only handed validation loaders
    ("False", "pred", [17]),
])
def test_drop_last_chosen_by_a_flag_in_another_file(tmp_path, test_drop, flag, expected):
    (tmp_path / "provider.py").write_text(textwrap.dedent(PROVIDER.format(test_drop=test_drop)))
    (tmp_path / "experiment.py").write_text(textwrap.dedent(EXPERIMENT.format(flag=flag)))
    settings = Settings(select=resolve_selection(["TL601"], [], []))
    result = list(lint_paths([str(tmp_path / "experiment.py")], settings))[0]
    assert result.errors == []
    assert [f.line for f in result.findings] == expected


FIT = """
import torch


def fit_one_epoch(model, optimizer, epoch, gen, gen_val):
    model.train()
    for iteration, (images, targets) in enumerate(gen):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(images), targets).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        for images, targets in gen_val:
            print(torch.nn.functional.cross_entropy(model(images), targets).item())
"""
EPOCHS = """
import torch
from torch.utils.data import DataLoader, DistributedSampler
from utils_fit import fit_one_epoch

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_sampler = DistributedSampler(train_set, shuffle=True)
val_sampler = DistributedSampler(val_set, shuffle=False)
gen = DataLoader(train_set, batch_size=16, sampler=train_sampler)
gen_val = DataLoader(val_set, batch_size=16, sampler=val_sampler)
for epoch in range(100):
    {set_epoch}
    fit_one_epoch(model, optimizer, epoch, gen, gen_val)
"""


@pytest.mark.parametrize("set_epoch,expected", [
    # the validation sampler goes to the same call, beside the optimizer, but the function's
    # training loop iterates `gen`: only the training sampler's missing set_epoch is reported
    ("train_sampler.set_epoch(epoch)", []),
    ("pass", [8]),
])
def test_a_loader_handed_to_another_files_epoch_function_feeds_training_only_through_the_trained_parameter(
        tmp_path, set_epoch, expected):
    (tmp_path / "utils_fit.py").write_text(textwrap.dedent(FIT))
    (tmp_path / "train.py").write_text(textwrap.dedent(EPOCHS.format(set_epoch=set_epoch)))
    settings = Settings(select=resolve_selection(["TL801"], [], []))
    result = list(lint_paths([str(tmp_path / "train.py")], settings))[0]
    assert result.errors == []
    assert [f.line for f in result.findings] == expected
    if expected:
        assert any("training loop iterates it" in e.premise and e.line == 14 for e in result.findings[0].evidence)
