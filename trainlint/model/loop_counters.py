"""Does a test hold in at most one iteration of a loop? From the loop's counter, not from names.

A `for v in range(start, stop, step)` or `for i, x in enumerate(xs)` loop gives its counter a new,
increasing value every iteration (when the body never rebinds it). A test on that counter
against values the body never changes holds in at most one iteration when it is

- an equality (`i == k - 1`, `v + 1 == len(xs)`): the counter takes each value once;
- a bound that only the last value reaches: `v >= stop - step` (`ex + step >= stop`, the `else`
  of `if ex + step < stop:`), `i >= len(xs) - 1` (`not (i < len(xs) - 1)`, stored in a name the
  iteration assigns first: `is_accumulating = i < len(xs) - 1` then `if not is_accumulating:`).

Both sides are read as sums of integer multiples of terms (`len(xs)`, `batch.size(0)`, `k`) and
a constant; a term that is not the counter must read nothing the loop body rebinds.
`at_most_once(flow, loop, test, side)`: True only when that is shown; False when it cannot be told.
"""

from __future__ import annotations

import libcst as cst

from trainlint.model.index import assigned_targets, dotted_name, keyword_value, positional_args, walk, walk_expression

_COUNTER = "\0counter"  # the counter's key in a linear form (no source text spells it)
_FLIP = {cst.LessThan: cst.GreaterThanEqual, cst.GreaterThanEqual: cst.LessThan,
         cst.GreaterThan: cst.LessThanEqual, cst.LessThanEqual: cst.GreaterThan,
         cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal}
_MIRROR = {cst.LessThan: cst.GreaterThan, cst.GreaterThan: cst.LessThan,
           cst.LessThanEqual: cst.GreaterThanEqual, cst.GreaterThanEqual: cst.LessThanEqual,
           cst.Equal: cst.Equal, cst.NotEqual: cst.NotEqual}


class _Counter:
    """The loop's counter: its name and the range it runs over (as linear forms)."""

    def __init__(self, name: str, start: dict, stop: dict, step: dict, sized_stop: bool = False) -> None:
        self.name, self.start, self.stop, self.step = name, start, stop, step
        self.sized_stop = sized_stop  # the stop is a size (`len(x)`, `x.size(0)`): never negative


def at_most_once(flow, loop: cst.CSTNode, test: cst.BaseExpression, side: bool) -> bool:
    """Code that runs only when `test` is `side` runs in at most one iteration of `loop`."""
    if not isinstance(loop, cst.For):
        return False
    counter = _counter(flow, loop)
    if counter is None:
        return False
    return _once(flow, loop, counter, test, side, 0)


def _once(flow, loop, counter, test, side: bool, depth: int) -> bool:
    if depth > 6:
        return False
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _once(flow, loop, counter, test.expression, not side, depth + 1)
    if isinstance(test, cst.BooleanOperation):
        # `a and b` holds only where both do; `not (a or b)` only where neither does
        narrows = isinstance(test.operator, cst.And) if side else isinstance(test.operator, cst.Or)
        return narrows and (_once(flow, loop, counter, test.left, side, depth + 1)
                            or _once(flow, loop, counter, test.right, side, depth + 1))
    if isinstance(test, cst.Name):
        value, statement = flow.stored_condition(test)
        # a name the iteration itself computes (before the test): its value this iteration
        if statement is None or value is test or not flow.inside(statement, loop.body):
            return False
        return _once(flow, loop, counter, value, side, depth + 1)
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    comparison = test.comparisons[0]
    op = type(comparison.operator)
    if op not in _FLIP:
        return False
    if not side:
        op = _FLIP[op]
    left = _linear(flow, loop, counter, test.left)
    right = _linear(flow, loop, counter, comparison.comparator)
    if left is None or right is None:
        return False
    form = _minus(left, right)  # `form op 0`
    coefficient = form.pop(_COUNTER, 0)
    if coefficient == 0:
        return False
    if op is cst.Equal:
        return True  # the counter takes each value once
    if coefficient < 0:
        form, coefficient, op = _scaled(form, -1), -coefficient, _MIRROR[op]
    if coefficient != 1:
        return False
    if op is cst.GreaterThan:  # integers: `v + r > 0` is `v + r - 1 >= 0`
        form, op = _plus(form, {"": -1}), cst.GreaterThanEqual
    if op is not cst.GreaterThanEqual or not _positive_step(counter):
        return False
    # `v >= -form`: only the last value reaches `stop - step` (and none reaches a higher bound)
    margin = _minus(_scaled(form, -1), _minus(counter.stop, counter.step))
    constant = margin.pop("", 0)
    return not any(margin.values()) and constant >= 0


def _counter(flow, loop: cst.For) -> _Counter | None:
    iterable = loop.iter
    if not isinstance(iterable, cst.Call) or not isinstance(iterable.func, cst.Name) or iterable.func.value \
            not in ("range", "enumerate") or flow.index.resolve(iterable.func, flow.scope_of(loop)) not in (
            None, "range", "enumerate", "builtins.range", "builtins.enumerate"):
        return None
    args = positional_args(iterable)
    if any(a.star or (a.keyword is not None and a.keyword.value != "start") for a in iterable.args):
        return None  # `*args`, or a keyword range/enumerate does not take
    if iterable.func.value == "range":
        if not isinstance(loop.target, cst.Name) or not 1 <= len(args) <= 3:
            return None
        name = loop.target.value
        values = [a.value for a in args]
        start, stop, step = (None, values[0], None) if len(values) == 1 else (values + [None])[:3]
    else:
        target = loop.target
        if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2
                and isinstance(target.elements[0].value, cst.Name)) or not 1 <= len(args) <= 2:
            return None
        name = target.elements[0].value.value
        start = args[1].value if len(args) == 2 else keyword_value(iterable, "start")
        stop = cst.Call(cst.Name("len"), [cst.Arg(args[0].value)])
        stop_text = f"len({flow.ctx.code_for(args[0].value)})"
        step = None
    if _rebound_inside(flow, loop, name):
        return None  # `i += 1` in the body: not one value per iteration
    partial = _Counter(name, {}, {}, {})
    start_form = {"": 0} if start is None else _linear(flow, loop, partial, start)
    step_form = {"": 1} if step is None else _linear(flow, loop, partial, step)
    if iterable.func.value == "enumerate":
        if not _invariant(flow, loop, args[0].value):
            return None
        stop_form = _plus(start_form or {}, {stop_text: 1})
    else:
        stop_form = _linear(flow, loop, partial, stop)
    if start_form is None or stop_form is None or step_form is None or _COUNTER in start_form | stop_form | step_form:
        return None
    return _Counter(name, start_form, stop_form, step_form,
                    iterable.func.value == "enumerate" or _is_size(flow, stop))


def _positive_step(counter: _Counter) -> bool:
    """The counter goes up: a positive literal step; or a step of any sign from 0 to a size (a
    negative step there runs no iteration at all)."""
    if set(counter.step) == {""}:
        return counter.step[""] > 0
    return counter.start in ({}, {"": 0}) and counter.sized_stop


def _is_size(flow, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """`len(x)`, `x.size(0)`, `x.numel()`, `x.shape[0]`, or a name last bound to one: never negative."""
    if isinstance(expr, cst.Name) and depth < 3:
        binding = flow.reaching(expr)
        return binding is not None and binding.kind == "assign" and binding.value is not None \
            and _is_size(flow, binding.value, depth + 1)
    if isinstance(expr, cst.Call):
        func = expr.func
        return (isinstance(func, cst.Name) and func.value == "len") or \
            (isinstance(func, cst.Attribute) and func.attr.value in ("size", "numel", "__len__"))
    if isinstance(expr, cst.Subscript):
        return isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape"
    return False


def _linear(flow, loop, counter: _Counter, expr: cst.BaseExpression) -> dict | None:
    """`expr` as {term text: integer coefficient, "": constant, _COUNTER: ...}; None when it mixes
    the counter into a term it cannot separate, or reads something the loop body rebinds."""
    if isinstance(expr, cst.Integer):
        return {"": int(expr.evaluated_value)}
    if isinstance(expr, cst.Name) and expr.value == counter.name:
        return {_COUNTER: 1}
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        inner = _linear(flow, loop, counter, expr.expression)
        return None if inner is None else _scaled(inner, -1 if isinstance(expr.operator, cst.Minus) else 1)
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, (cst.Add, cst.Subtract)):
            left = _linear(flow, loop, counter, expr.left)
            right = _linear(flow, loop, counter, expr.right)
            if left is None or right is None:
                return None
            return _plus(left, right) if isinstance(expr.operator, cst.Add) else _minus(left, right)
        if isinstance(expr.operator, cst.Multiply):
            for factor, other in ((expr.left, expr.right), (expr.right, expr.left)):
                if isinstance(factor, cst.Integer):
                    inner = _linear(flow, loop, counter, other)
                    return None if inner is None else _scaled(inner, int(factor.evaluated_value))
    if any(isinstance(n, cst.Name) and n.value == counter.name for n in walk_expression(expr)):
        return None  # the counter inside a term (`i % k`, `i * k`): not a sum
    if not _invariant(flow, loop, expr):
        return None
    return {flow.ctx.code_for(expr): 1}


def _invariant(flow, loop, expr: cst.BaseExpression) -> bool:
    """Nothing `expr` reads is rebound (or, for `self.x`, assigned) in the loop body."""
    for node in walk_expression(expr):
        if isinstance(node, cst.Name) and _rebound_inside(flow, loop, node.value):
            return False
        if isinstance(node, cst.Attribute):
            key = dotted_name(node)
            if key is not None and key in _assigned_attributes(flow, loop):
                return False
    return True


def _rebound_inside(flow, loop, name: str) -> bool:
    for binding in flow.bindings_in_function(name, loop):
        if binding.node is loop:
            continue
        if flow.inside(binding.node, loop.body):
            return True
    return False


def _assigned_attributes(flow, loop) -> set[str]:
    key = ("loop-assigned", loop)
    memo = flow.__dict__.setdefault("_loop_counter_memo", {})
    if key not in memo:
        found = set()
        for node in walk(loop.body):
            for target in assigned_targets(node):
                for element in walk(target):
                    if isinstance(element, cst.Attribute) and dotted_name(element):
                        found.add(dotted_name(element))
        memo[key] = found
    return memo[key]


def _plus(a: dict, b: dict) -> dict:
    out = dict(a)
    for key, value in b.items():
        out[key] = out.get(key, 0) + value
    return {k: v for k, v in out.items() if v != 0 or k == ""}


def _scaled(a: dict, factor: int) -> dict:
    return {k: v * factor for k, v in a.items()}


def _minus(a: dict, b: dict) -> dict:
    return _plus(a, _scaled(b, -1))
