"""The number an expression spells: literals and `+ - * / // %` on them, one folder for every model.

Each caller says what a leaf that is not a literal is worth (`leaf`): the loop counters' first
values (trainlint.model.iterations), a name's only binding (trainlint.model.dataset_sizes), or
nothing (trainlint.model.accumulation). Integers stay exact; floats (`0.25`, `1 / 8`) are folded
only when the caller asks for them (`floats=True`), so a count is never a rounded number.
"""

from __future__ import annotations

from typing import Callable

import libcst as cst

Number = int | float
Leaf = Callable[[cst.BaseExpression], "Number | None"]

#: operators that give 0 when their left side is 0, whatever the (unknown, non-zero) right side is
_ZERO_WHEN_LEFT_ZERO = (cst.Multiply, cst.Modulo, cst.FloorDivide)


def _no_leaf(expr: cst.BaseExpression) -> None:
    return None


def literal(expr: cst.BaseExpression, floats: bool = False) -> Number | None:
    """The number an integer (or, with `floats`, a float) literal spells (`1_000`, `0x10`, `2.5`)."""
    if isinstance(expr, cst.Integer) or (floats and isinstance(expr, cst.Float)):
        try:
            value = expr.evaluated_value
        except (ValueError, SyntaxError, OverflowError):
            return None
        return float(value) if floats else int(value)
    return None


def fold(expr: cst.BaseExpression, leaf: Leaf = _no_leaf, floats: bool = False) -> Number | None:
    """The value of `expr`, or None when any part of it is not a known number.

    `0 * x`, `0 % x` and `0 // x` are 0 even when `x` is unknown (a count or size is never 0 there:
    the code divides by it)."""
    value = literal(expr, floats)
    if value is not None:
        return value
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = fold(expr.expression, leaf, floats)
        return -inner if inner is not None else None
    if isinstance(expr, cst.BinaryOperation):
        return _binary(expr, leaf, floats)
    if isinstance(expr, (cst.Integer, cst.Float)):
        return None  # a float literal where only integers count
    return leaf(expr)


def _binary(expr: cst.BinaryOperation, leaf: Leaf, floats: bool) -> Number | None:
    left = fold(expr.left, leaf, floats)
    if left is None:
        return None
    right = fold(expr.right, leaf, floats)
    operator = expr.operator
    if right is None:
        return 0 if left == 0 and isinstance(operator, _ZERO_WHEN_LEFT_ZERO) else None
    try:
        if isinstance(operator, cst.Add):
            return left + right
        if isinstance(operator, cst.Subtract):
            return left - right
        if isinstance(operator, cst.Multiply):
            return left * right
        if right == 0:
            return None
        if isinstance(operator, cst.Divide):
            return left / right if floats else None
        if isinstance(operator, cst.FloorDivide):
            return left // right
        if isinstance(operator, cst.Modulo):
            return left % right
    except OverflowError:
        return None
    return None
