"""The dataflow model: which values carry an autograd graph, and where recording is off."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from trainlint.context import FileContext
from trainlint.model.dataflow import dataflow
from trainlint.model.index import walk


def _value_of(source: str, marker: str):
    """The flow model of `source` and the expression appended to the list named `marker`."""
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    ctx = FileContext("t.py", source, module, (2, 6))
    flow = ctx.model(dataflow)
    for node in walk(module):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value == "append" and ctx.code_for(node.func.value) == marker:
            return flow, node.args[0].value
    raise AssertionError(f"no {marker}.append(...) in source")


LOOP = """
import torch
import torch.nn.functional as F

def run(model, loader, opt, criterion):
    for x, y in loader:
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        with torch.no_grad():
            probe = model(x)
        out.append({value})
"""


@pytest.mark.parametrize("value, expected", [
    ("loss", True),
    ("logits", True),
    ("logits.softmax(-1).cpu()", True),
    ("loss * 2 + 1", True),
    ("{'loss': loss}", True),
    ("criterion(logits, y)", True),
    ("loss.item()", False),
    ("loss.detach()", False),
    ("float(loss)", False),
    ("loss.tolist()", False),
    ("logits.cpu().numpy()", False),
    ("logits.argmax(-1)", False),
    ("(logits.argmax(-1) == y).sum()", False),
    ("probe", False),
    ("torch.zeros(3)", False),
    ("loss.shape[0]", False),
    # gradients: plain tensors unless create_graph=True (keyword or fifth positional argument)
    ("torch.autograd.grad(loss, x)[0]", False),
    ("torch.autograd.grad(loss, x, retain_graph=True)[0]", False),
    ("torch.autograd.grad(loss, x, create_graph=False)[0]", False),
    ("torch.autograd.grad(loss, x, create_graph=True)[0]", True),
    ("torch.autograd.grad(loss, x, None, True, True)[0]", True),
    ("torch.autograd.grad(loss, x, create_graph=second_order)[0]", None),
    ("torch.autograd.grad(loss, x, **options)[0]", None),
    ("x", None),
    ("helper(x)", None),
])
def test_carries_graph(value, expected):
    flow, expr = _value_of(LOOP.format(value=value), "out")
    assert flow.carries_graph(expr) is expected


def test_rebinding_to_a_number_detaches():
    flow, expr = _value_of("""
        def run(model, loader):
            for x in loader:
                loss = model(x).sum()
                loss.backward()
                loss = loss.item()
                out.append(loss)
        """, "out")
    assert flow.carries_graph(expr) is False


def test_callers_under_no_grad_and_decorators():
    flow, expr = _value_of("""
        import torch

        def collect(model, loader):
            for x in loader:
                out.append(model(x))

        @torch.no_grad()
        def main(model, loader):
            collect(model, loader)
        """, "out")
    assert flow.under_no_grad(expr)
    assert flow.carries_graph(expr) is False


def test_set_grad_enabled_with_a_condition_may_be_off():
    flow, expr = _value_of("""
        import torch

        def run(model, loader, phase):
            for x in loader:
                with torch.set_grad_enabled(phase == "train"):
                    out.append(model(x))
        """, "out")
    assert flow.under_no_grad(expr)


def test_enable_grad_inside_no_grad_records():
    flow, expr = _value_of("""
        import torch

        def run(model, loader):
            with torch.no_grad():
                for x in loader:
                    with torch.enable_grad():
                        out.append(model(x))
        """, "out")
    assert not flow.under_no_grad(expr)
    assert flow.carries_graph(expr) is True


# `torch.set_grad_enabled(flag)` called as a statement switches recording until the next switch:
# it decides a node's state only when it dominates it (every path there passes a switch, all alike)
SWITCHED = """
import torch

def run(model, train_loader, val_loader, opt, fast):
    for epoch in range(3):
        {top}
        for x, y in train_loader:
            model(x).sum().backward()
            opt.step()
        {before}
        for x, y in val_loader:
            out.append(model(x))
"""


@pytest.mark.parametrize("top, before, off, carries", [
    # off before the evaluation, on again at the top of each epoch: off there, on in training
    ("torch.set_grad_enabled(True)", "torch.set_grad_enabled(False)", True, False),
    ("torch.autograd.set_grad_enabled(True)", "torch.autograd.set_grad_enabled(mode=False)", True, False),
    # switched off, then on again before the loop: recording is on
    ("pass", "torch.set_grad_enabled(False); torch.set_grad_enabled(True)", False, True),
    # no switch at all
    ("pass", "pass", False, True),
    # only when `fast`: neither proven on nor off
    ("pass", "if fast: torch.set_grad_enabled(False)", False, None),
    # off on both branches: dominates
    ("pass", "if fast: torch.set_grad_enabled(False)\n        else: torch.set_grad_enabled(False)", True, False),
    # a `with` restores the state it found
    ("pass", "with torch.no_grad(): torch.set_grad_enabled(False)", False, True),
])
def test_statement_switches_dominate(top, before, off, carries):
    flow, expr = _value_of(SWITCHED.format(top=top, before=before), "out")
    assert flow.under_no_grad(expr) is off
    assert flow.carries_graph(expr) is carries


def test_statement_switch_off_reaches_the_next_epoch_training():
    """Off after the training loop, never on again: the next epoch trains with recording off, so
    the training loop's state is not known (the first epoch records)."""
    source = SWITCHED.format(top="pass", before="torch.set_grad_enabled(False)").replace(
        "out.append(model(x))", "pass").replace("model(x).sum().backward()", "out.append(model(x))")
    flow, expr = _value_of(source, "out")
    assert not flow.under_no_grad(expr)
    assert flow.carries_graph(expr) is None


def test_statement_switch_in_another_function_does_not_reach():
    flow, expr = _value_of("""
        import torch

        def setup():
            torch.set_grad_enabled(False)

        def run(model, loader):
            setup()
            for x in loader:
                out.append(model(x))
        """, "out")
    assert not flow.under_no_grad(expr)
    assert flow.carries_graph(expr) is True


def test_statement_switch_before_a_return_ends_that_path():
    flow, expr = _value_of("""
        import torch

        def run(model, loader, skip):
            if skip:
                torch.set_grad_enabled(True)
                return None
            torch.set_grad_enabled(False)
            for x in loader:
                out.append(model(x))
        """, "out")
    assert flow.under_no_grad(expr)


def test_statement_switch_left_by_a_break_reaches_past_the_loop():
    """A `break` leaves the loop with the state of that point (off), not the one at the end of
    the body (on): after the loop recording may be either."""
    flow, expr = _value_of("""
        import torch

        def run(model, loader, val_loader):
            for x in loader:
                torch.set_grad_enabled(False)
                if x is None:
                    break
                torch.set_grad_enabled(True)
            for x in val_loader:
                out.append(model(x))
        """, "out")
    assert not flow.under_no_grad(expr)
    assert flow.carries_graph(expr) is None


def test_constructors_and_lookups_are_not_forwards():
    flow, expr = _value_of("""
        import timm

        def build(names, loader):
            for name in names:
                out.append(timm.create_model(name))
                other.append(get_model_config(name))
        """, "out")
    assert flow.carries_graph(expr) is None


EPISODES = """
import torch

def finish_episode(log_probs, rewards, optimizer):
    terms = [-lp * r for lp, r in zip(log_probs, rewards)]
    optimizer.zero_grad()
    {use}
    optimizer.step()

def train(env, policy, optimizer, episodes):
    for _ in range(episodes):
        state, done, saved, rewards = env.reset(), False, [], []
        while not done:
            probs = policy(torch.as_tensor(state))
            action = torch.multinomial(probs, 1).item()
            saved.append(torch.log(probs[action]))
            state, reward, done, _ = env.step(action)
            rewards.append(reward)
        finish_episode(saved, rewards, optimizer)
"""


@pytest.mark.parametrize("use,kept", [
    ("torch.stack(terms).sum().backward()", {"saved", "rewards"}),  # handed to parameters the backward reads
    ("print(torch.stack(terms).sum().item())", set()),  # only printed: no backward there
])
def test_a_list_handed_to_a_function_that_backpropagates_it(use, kept):
    flow, _ = _value_of(EPISODES.format(use=use), "saved")
    train = next(f for f in flow.index.functions if f.name == "train")
    assert set(flow.backpropagated_by_calls(train.node)) & {"saved", "rewards"} == kept


METHOD_OR_PROPERTY = """
import torch
from torch import nn

class Learner:
    def __init__(self):
        self.nets = nn.ModuleList([nn.Linear(4, 4)])

    {decorator}
    def actor(self{params}):
        return {body}

    def fit(self, loader, out):
        for x, y in loader:
            out.append(self.actor{call})
"""


@pytest.mark.parametrize("decorator, params, body, call, expected", [
    # a method of the class: its name says nothing of what it returns
    ("", ", x", "self.nets[0](x).mean().item()", "(x)", False),
    ("@torch.no_grad()", ", x", "self.nets[0](x)", "(x)", False),
    # a property hands back what it returns: a module, whose call is a forward
    ("@property", "", "self.nets[0]", "(x)", True),
    ("@functools.cached_property", "", "self.nets[0]", "(x)", True),
])
def test_a_method_of_the_class_is_no_model(decorator, params, body, call, expected):
    source = METHOD_OR_PROPERTY.format(decorator=decorator, params=params, body=body, call=call)
    flow, value = _value_of(source, "out")
    assert (flow.carries_graph(value) is True) is expected  # a method: not shown (unknown or refuted)


def _backward_of(source: str):
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    ctx = FileContext("t.py", source, module, (2, 6))
    flow = ctx.model(dataflow)
    for node in walk(module):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward":
            return flow, node
    raise AssertionError("no backward")


@pytest.mark.parametrize("source, raises", [
    # an annotation without a value and a bare `return` read nothing (they once crashed the walk)
    ("def train(model, loader, opt):\n    batch: dict\n    for batch in loader:\n"
     "        if batch is None:\n            return\n        model(batch).sum().backward()\n", None),
    # a script's `__main__` code reading a global bound nowhere: NameError before the backward
    ("import torch\nif __name__ == '__main__':\n    model = torch.nn.Linear(2, 2)\n    opt = torch.optim.SGD(model.parameters())\n"
     "    for step in range(3):\n        optimiser.zero_grad()\n        model(torch.ones(2)).sum().backward()\n        opt.step()\n",
     "optimiser"),
    # the same read in module code without the guard: another module (or a snippet's reader) may bind it
    ("import torch\nmodel = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters())\n"
     "for step in range(3):\n    optimiser.zero_grad()\n    model(torch.ones(2)).sum().backward()\n    opt.step()\n", None),
    # a star import may bind it
    ("import torch\nfrom helpers import *\nif __name__ == '__main__':\n    model = torch.nn.Linear(2, 2)\n"
     "    for step in range(3):\n        optimiser.zero_grad()\n        model(torch.ones(2)).sum().backward()\n", None),
])
def test_a_read_that_always_raises_before_the_backward(source, raises):
    flow, backward = _backward_of(source)
    found = flow.raises_before(backward)
    assert (found.value if found is not None else None) == raises
