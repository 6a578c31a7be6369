"""Whether a test holds in at most one iteration of a loop, read from the loop's counter."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from trainlint.context import FileContext
from trainlint.model.dataflow import dataflow
from trainlint.model.index import walk
from trainlint.model.loop_counters import at_most_once


def _answer(source: str) -> bool:
    """`at_most_once` for the `if` holding `mark()` (on the side it is written) in the first loop."""
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    ctx = FileContext("t.py", source, module, (2, 6))
    flow = ctx.model(dataflow)
    loop = next(n for n in walk(module) if isinstance(n, cst.For))
    call = next(n for n in walk(module) if isinstance(n, cst.Call) and isinstance(n.func, cst.Name)
                and n.func.value == "mark")
    child = call
    for ancestor in ctx.index.ancestors(call):
        if isinstance(ancestor, cst.If) and child is not ancestor.test:
            return at_most_once(flow, loop, ancestor.test, child is ancestor.body)
        child = ancestor
    raise AssertionError("no if around mark()")


@pytest.mark.parametrize("source", [
    # an equality with the counter
    """
    for micro in range(k):
        if micro == k - 1:
            mark()
    """,
    """
    for i, x in enumerate(xs):
        if i + 1 == len(xs):
            mark()
    """,
    # the bound only the last value reaches, written several ways
    """
    for i, x in enumerate(xs):
        if i >= len(xs) - 1:
            mark()
    """,
    """
    for i, x in enumerate(xs):
        if not i < len(xs) - 1:
            mark()
    """,
    """
    for i, x in enumerate(xs):
        busy = i < len(xs) - 1
        if not busy:
            mark()
    """,
    """
    for i, x in enumerate(xs):
        if len(xs) - 1 > i:
            pass
        else:
            mark()
    """,
    """
    for lo in range(0, batch.size(0), step):
        if lo + step < batch.size(0):
            pass
        else:
            mark()
    """,
    """
    rows = len(data)
    for lo in range(0, rows, width):
        if lo + width >= rows:
            mark()
    """,
    """
    for j in range(2, n, 3):
        if j > n - 4:
            mark()
    """,
    # a bound beyond the last value: never, which is at most once too
    """
    for i in range(n):
        if i >= n:
            mark()
    """,
    # a conjunction with one such test
    """
    for i, x in enumerate(xs):
        if ready and i == len(xs) - 1:
            mark()
    """,
])
def test_holds_at_most_once(source):
    assert _answer(source) is True


@pytest.mark.parametrize("source", [
    # every K-th iteration
    """
    for i, x in enumerate(xs):
        if (i + 1) % k == 0:
            mark()
    """,
    # the last two values
    """
    for i, x in enumerate(xs):
        if i >= len(xs) - 2:
            mark()
    """,
    # the first iterations, not the last
    """
    for i, x in enumerate(xs):
        if i < len(xs) - 1:
            mark()
    """,
    # a bound the body changes
    """
    for i in range(n):
        n = n + 1
        if i == n - 1:
            mark()
    """,
    # a counter the body moves
    """
    for i in range(n):
        i += 1
        if i == n - 1:
            mark()
    """,
    # a stored test computed before the loop: the same every iteration
    """
    last = i == n - 1
    for i in range(n):
        if last:
            mark()
    """,
    # the bound of another sequence
    """
    for i, x in enumerate(xs):
        if i >= len(ys) - 1:
            mark()
    """,
    # a step whose sign is not known, from a start that is not 0
    """
    for lo in range(a, b, step):
        if lo + step >= b:
            mark()
    """,
    # a disjunction: either side may hold
    """
    for i, x in enumerate(xs):
        if i == len(xs) - 1 or flush:
            mark()
    """,
    # not a counter loop
    """
    for x in xs:
        if x == last:
            mark()
    """,
])
def test_not_shown(source):
    assert _answer(source) is False
