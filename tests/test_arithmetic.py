"""The one constant folder the models share (trainlint.model.arithmetic)."""

import libcst as cst
import pytest

from trainlint.model.arithmetic import fold, literal


def _expr(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


@pytest.mark.parametrize("text, value", [
    ("4", 4), ("1_000", 1000), ("0x10", 16), ("-2", -2), ("3 * 4 + 1", 13), ("17 // 5", 3),
    ("17 % 5", 2), ("(2 - 5) * 2", -6),
])
def test_integers_fold_exactly(text, value):
    result = fold(_expr(text))
    assert result == value and isinstance(result, int)


@pytest.mark.parametrize("text", ["0.25", "1 / 8", "2 * 0.5", "7 // 0", "7 % 0", "x + 1", "f(3)", "2 ** 3"])
def test_what_is_not_an_exact_integer_is_unknown(text):
    assert fold(_expr(text)) is None


@pytest.mark.parametrize("text, value", [("0.25", 0.25), ("1 / 8", 0.125), ("-2", -2.0), ("4 * 0.5", 2.0)])
def test_floats_fold_when_asked(text, value):
    assert fold(_expr(text), floats=True) == value


def test_a_leaf_is_valued_by_the_caller():
    first = {"step": 0, "k": 4}
    leaf = lambda e: first.get(e.value) if isinstance(e, cst.Name) else None  # noqa: E731
    assert fold(_expr("step + 1"), leaf) == 1
    assert fold(_expr("(step + 1) % k"), leaf) == 1
    assert fold(_expr("step * unknown"), leaf) == 0  # 0 times any count is 0
    assert fold(_expr("unknown * step"), leaf) is None  # the left side decides, as written


def test_literal_reads_only_literals():
    assert literal(_expr("12")) == 12
    assert literal(_expr("1.5")) is None and literal(_expr("1.5"), floats=True) == 1.5
    assert literal(_expr("n")) is None
