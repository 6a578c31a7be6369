"""trainlint.model.iterations: whether a statement of a loop body runs on the loop's first
iteration, and whether a test has the same value on every iteration."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from trainlint.model.index import FileIndex, walk
from trainlint.model.iterations import runs_on_first_iteration, same_on_every_iteration


def _parts(source: str):
    index = FileIndex(cst.parse_module(textwrap.dedent(source)))
    loop = next(n for n in walk(index.module) if isinstance(n, (cst.For, cst.While)))
    call = next(n for n in walk(index.module) if isinstance(n, cst.Call)
                and isinstance(n.func, cst.Attribute) and n.func.attr.value == "tick")
    return index, loop, call


@pytest.mark.parametrize("head, test, expected", [
    ("for e in range(n):", "if e > 0:", False),
    ("for e in range(n):", "if e == 0:", True),
    ("for e in range(1, n):", "if e > 0:", True),
    ("for e in range(k, n):", "if e > 0:", None),         # the start is not known
    ("for i, b in enumerate(xs):", "if i % 5 == 0:", True),
    ("for i, b in enumerate(xs, start=1):", "if i % 5 == 0:", False),
    ("for e in tqdm(range(n)):", "if not e:", True),
    ("for e in range(n):", "if e >= warmup:", None),       # warmup is not known
    ("for e in range(n):", "if cfg.enabled:", True),       # the same on every iteration
    ("for e in range(n):", "if e > 0 and cfg.enabled:", False),
    ("while running:", "if steps > 0:", True),            # nothing in the loop changes `steps`
])
def test_runs_on_first_iteration(head, test, expected):
    index, loop, call = _parts(f"""
        {head}
            {test}
                sched.tick()
            work()
        """)
    assert runs_on_first_iteration(index, call, loop) is expected


def test_a_counter_the_body_advances_is_unknown():
    index, loop, call = _parts("""
        while running:
            if steps > 0:
                sched.tick()
            steps += 1
        """)
    assert runs_on_first_iteration(index, call, loop) is None


def test_else_of_a_first_iteration_test_does_not_run_first():
    index, loop, call = _parts("""
        for epoch in range(epochs):
            if epoch <= 0:
                warm()
            elif epoch == 1:
                peak()
            else:
                sched.tick()
        """)
    assert runs_on_first_iteration(index, call, loop) is False


def test_a_test_shared_with_the_other_statement_is_left_out():
    index, loop, call = _parts("""
        for i in range(n):
            if (i + 1) % k == 0:
                sched.tick()
                opt.step()
        """)
    step = next(n for n in walk(index.module) if isinstance(n, cst.Call)
                and isinstance(n.func, cst.Attribute) and n.func.attr.value == "step")
    assert runs_on_first_iteration(index, call, loop) is None
    assert runs_on_first_iteration(index, call, loop, step) is True


@pytest.mark.parametrize("test, expected", [
    ("flags.fp16", True),
    ("i == 0", False),            # the counter
    ("seen > 3", False),          # bound in the body
    ("ready()", False),           # a call may answer differently each time
])
def test_same_on_every_iteration_of_a_loop(test, expected):
    index, loop, _ = _parts(f"""
        for i in range(n):
            seen = i * 2
            if {test}:
                sched.tick()
        """)
    node = next(n for n in walk(loop.body) if isinstance(n, cst.If))
    assert same_on_every_iteration(index, node.test, loop) is expected


@pytest.mark.parametrize("test, expected", [
    ("self.fixed", True),          # set in __init__ only
    ("self.count == 0", False),    # set again by a method
    ("self.inherited", False),     # set by no code of this file
    ("batch is None", False),      # a parameter: new on every call
])
def test_same_on_every_call_of_a_method(test, expected):
    index = FileIndex(cst.parse_module(textwrap.dedent(f"""
        class Learner:
            def __init__(self, fixed):
                self.fixed = fixed
                self.count = 0

            def learn(self, batch):
                if {test}:
                    pass
                self.count += 1
        """)))
    method = next(n for n in walk(index.module) if isinstance(n, cst.FunctionDef) and n.name.value == "learn")
    node = next(n for n in walk(method.body) if isinstance(n, cst.If))
    assert same_on_every_iteration(index, node.test, method) is expected
