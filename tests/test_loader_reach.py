"""Where a loader goes (trainlint.model.loader_reach): to a pass that evaluates, to no pass at all,
or to a place the code cannot follow."""

from __future__ import annotations

import textwrap

import libcst as cst

from trainlint.context import FileContext
from trainlint.model.loader_reach import EVALUATES, UNKNOWN, UNUSED, loader_reach


def _reach(source: str, nth: int = 0):
    """The reach of the `nth` `DataLoader(...)` call of `source`."""
    source = textwrap.dedent(source).lstrip("\n")
    module = cst.parse_module(source)
    ctx = FileContext("t.py", source, module, (2, 6))
    calls = [site.node for site in ctx.index.calls
             if isinstance(site.node.func, cst.Name) and site.node.func.value == "DataLoader"]
    return ctx.model(loader_reach).of_call(calls[nth])


_HEAD = """
import torch
from torch.utils.data import DataLoader
"""


def test_a_loader_never_read_reaches_nothing():
    assert _reach(_HEAD + """
def fit(data):
    loader = DataLoader(data, shuffle=True)
    return 1
""").state == UNUSED


def test_a_name_bound_again_before_every_read_hides_the_first_loader():
    source = _HEAD + """
def fit(model, data, epochs):
    loader = DataLoader(data, shuffle=True)
    for epoch in range(epochs):
        loader = DataLoader(data)
        with torch.no_grad():
            for x in loader:
                model(x)
"""
    assert _reach(source, 0).state == UNUSED
    assert _reach(source, 1).state == EVALUATES


def test_a_binding_later_in_a_loop_reaches_the_reads_before_it_on_the_next_pass():
    source = _HEAD + """
def fit(model, data, epochs):
    loader = DataLoader(data)
    for epoch in range(epochs):
        with torch.no_grad():
            for x in loader:
                model(x)
        loader = DataLoader(data, shuffle=True)
"""
    assert _reach(source, 1).state == EVALUATES


def test_a_conditional_rebinding_leaves_the_first_loader_reaching_the_read():
    source = _HEAD + """
def fit(model, data, again):
    loader = DataLoader(data, shuffle=True)
    if again:
        loader = DataLoader(data)
    with torch.no_grad():
        for x in loader:
            model(x)
"""
    assert _reach(source, 0).state == EVALUATES


def test_a_pass_with_grad_on_and_a_backward_is_no_evaluation():
    reach = _reach(_HEAD + """
def fit(model, data, opt):
    loader = DataLoader(data, shuffle=True)
    for x in loader:
        model(x).sum().backward()
        opt.step()
""")
    assert reach.state == UNKNOWN


def test_a_helper_called_under_no_grad_with_its_training_branch_switched_off_evaluates():
    reach = _reach(_HEAD + """
def run(model, loader, opt, train=True):
    for x in loader:
        loss = model(x).sum()
        if train:
            loss.backward()
            opt.step()

def fit(model, data, opt):
    loader = DataLoader(data, shuffle=True)
    with torch.no_grad():
        run(model, loader, opt, train=False)
""")
    assert reach.state == EVALUATES and reach.only_evaluations


def test_returned_through_a_nested_helper_to_a_caller_that_drops_or_evaluates():
    source = _HEAD + """
def main(model, a, b):
    def make():
        first = DataLoader(a, shuffle=True)
        second = DataLoader(b, shuffle=True)
        return first, second
    _, kept = make()
    with torch.no_grad():
        for x in kept:
            model(x)
"""
    assert _reach(source, 0).state == UNUSED
    assert _reach(source, 1).state == EVALUATES


def test_a_library_call_or_a_module_name_is_where_the_code_cannot_follow():
    assert _reach(_HEAD + """
def fit(trainer, data):
    loader = DataLoader(data, shuffle=True)
    trainer.validate(loader)
""").state == UNKNOWN
    # checked on its own, another file may import the module's name
    assert _reach(_HEAD + """
loader = DataLoader(data, shuffle=True)
""").state == UNKNOWN
    # a `__main__` block runs in no importer
    assert _reach(_HEAD + """
if __name__ == "__main__":
    loader = DataLoader(data, shuffle=True)
""").state == UNUSED


def test_its_length_an_attribute_and_single_draws_are_no_pass():
    assert _reach(_HEAD + """
def fit(data):
    loader = DataLoader(data, shuffle=True)
    print(len(loader), loader.dataset)
    first = next(iter(loader))
    return first
""").state == UNUSED


def test_a_method_that_ignores_it_may_be_overridden_and_a_lambda_runs_later():
    assert _reach(_HEAD + """
class Base:
    def score(self, loader):
        raise NotImplementedError

    def fit(self, data):
        loader = DataLoader(data, shuffle=True)
        self.score(loader)
""").state == UNKNOWN
    assert _reach(_HEAD + """
def fit(model, data):
    run = lambda: [model(x) for x in loader]
    loader = DataLoader(data, shuffle=True)
    with torch.no_grad():
        run()
""").state != UNUSED


def test_a_pass_with_the_model_in_eval_mode_and_no_backward_evaluates():
    reach = _reach(_HEAD + """
def score(model, data):
    loader = DataLoader(data, shuffle=True)
    model.eval()
    hits = 0
    for x, y in loader:
        hits += (model(x).argmax(1) == y).sum().item()
    return hits
""")
    assert reach.state == EVALUATES
    # a comprehension's element is part of its pass
    assert _reach(_HEAD + """
def score(model, data):
    loader = DataLoader(data, shuffle=True)
    with torch.no_grad():
        return [model(x) for x in loader]
""").state == EVALUATES


def test_a_pass_that_reads_none_of_its_batches_is_no_pass():
    """A loop whose batch target nothing reads (timing the loading) reaches no evaluation, through
    `enumerate` too (its counter may be read); a batch read anywhere in the function, even after the
    loop, or a batch bound to a module's name that other files may read, keeps the pass."""
    unread = _HEAD + """
@torch.no_grad()
def time_it(data):
    loader = DataLoader(data, shuffle=True)
    for i, _ in enumerate(loader):
        print(i)
"""
    assert _reach(unread).state == UNUSED
    read_after = _HEAD + """
@torch.no_grad()
def time_it(model, data):
    loader = DataLoader(data, shuffle=True)
    for batch in loader:
        pass
    return model(batch)
"""
    assert _reach(read_after).state == EVALUATES
    module_level = _HEAD + """
loader = DataLoader(data, shuffle=True)
with torch.no_grad():
    for batch in loader:
        pass
"""
    assert _reach(module_level).state != UNUSED


def test_a_pass_that_runs_no_model_evaluates_nothing():
    # summing feature statistics over the data: no call of the pass can run a model
    assert _reach(_HEAD + """
import sys

def feature_stats(data, dim):
    loader = DataLoader(data, batch_size=16, shuffle=True)
    with torch.no_grad():
        total, sq, frames = torch.zeros(dim), torch.zeros(dim), 0
        for i, (count, s1, s2) in enumerate(loader):
            total += s1
            sq += s2.pow(2)
            frames += count
            print(f"{i}: {frames}", file=sys.stderr)
    return total / frames, sq / frames
""").state == UNUSED


def test_a_pass_that_may_run_a_model_still_evaluates():
    # a model called, a project function called, a callable handed to a library function
    for line in ("total += model(x).sum()", "total += score(x)",
                 "total += torch.utils.checkpoint.checkpoint(model, x).sum()"):
        source = _HEAD + f"""
def score(x):
    return x.sum()

def check(model, data):
    loader = DataLoader(data, batch_size=16, shuffle=True)
    total = 0.0
    with torch.no_grad():
        for x in loader:
            {line}
    return total
"""
        assert _reach(source).state == EVALUATES, line


def test_a_fresh_iterator_drawn_a_fixed_number_of_times_is_no_pass():
    # two batches from a fresh iterator, each `next` written once, outside any loop
    assert _reach(_HEAD + """
def preview_batches(held_out, count):
    loader = DataLoader(held_out, batch_size=count, shuffle=True)
    stream = iter(loader)
    first = next(stream)
    second = next(stream)
    return first, second
""").state == UNUSED
    # look-alikes: drawn in a loop (batch after batch, up to the whole set), or handed on
    for tail in ("    for _ in range(steps):\n        keep(next(stream))",
                 "    keep(next(stream))\n    return stream"):
        source = _HEAD + f"""
def preview_batches(held_out, count, steps, keep):
    loader = DataLoader(held_out, batch_size=count, shuffle=True)
    stream = iter(loader)
{tail}
"""
        assert _reach(source).state != UNUSED, tail
