"""Which expressions are plain Python numbers: sizes, counts and arithmetic on them.

A number never carries an autograd graph, whatever it is later added to or stored in, so a rule that
needs "a tensor with a graph" asks here first. Known from torch's API (what the common calls
return: `x.size(0)`, `x.shape[1]`, `x.numel()`, `x.dim()`, `x.item()`, `len(x)`, `int(...)`,
`float(...)`, `math.*`), from numeric literals, from arithmetic, `max`/`min`/`abs` over numbers,
and from names every binding of which (in their scope) is a number, unpacking of a shape included
(`b, c, h, w = x.shape`). Anything else is not known to be a number (it may still be one).

Used by the dataflow (does a value carry a graph?) and by the function summaries (which return
positions of a project function, a model's `forward` among them, carry no graph).

Also which tensors are synthetic: made by a torch factory (`torch.zeros(1, 3, 224, 224)`,
`torch.randn(...)`), not read from data, so a forward on them is a warm-up or a shape probe.
"""

from __future__ import annotations

from typing import Callable

import libcst as cst

from trainlint.model.index import Scope

# Words a project file must hold for a function of it to return a number this module recognises
# (the summaries' word gate: a file without them is not read for the question).
NUMBER_WORDS = (".size(", ".shape", "numel(", "len(", ".dim(", ".ndim")
# Tensor methods whose result is a Python number (or a tuple / list of them).
NUMBER_METHODS = frozenset({"size", "numel", "nelement", "dim", "ndimension", "item", "element_size",
                            "stride", "get_device", "data_ptr", "tolist", "bit_length"})
# Tensor attributes that hold a Python number or a tuple of them (`x.shape[0]` is an int).
NUMBER_ATTRIBUTES = frozenset({"shape", "ndim"})
# Builtins and library functions that return Python numbers.
NUMBER_FUNCTIONS = frozenset({"len", "int", "float", "round", "bool", "complex", "hash", "id"})
# Builtins that return a number when every argument is one.
_NUMBER_PRESERVING = frozenset({"max", "min", "abs", "sum", "pow", "divmod"})
_NUMBER_MODULES = ("math.", "statistics.", "operator.")


def is_number(expr: cst.BaseExpression, scope: Scope, resolve: Callable | None = None, depth: int = 0) -> bool:
    """`expr` is a Python number (or a tuple of numbers, such as a shape) by what computes it.

    `resolve(func, scope)` gives a callee's qualified name (a `FileIndex.resolve`), so that a
    project function that shadows `len` or `max` is not taken for the builtin."""
    if depth > 8:
        return False
    if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary)):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return not isinstance(expr.operator, cst.Not) and is_number(expr.expression, scope, resolve, depth + 1)
    if isinstance(expr, cst.BinaryOperation):
        return is_number(expr.left, scope, resolve, depth + 1) and is_number(expr.right, scope, resolve, depth + 1)
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in NUMBER_ATTRIBUTES
    if isinstance(expr, cst.Subscript):
        # `x.shape[0]`, `x.size()[1]`, `x.shape[-2:]`
        return is_number(expr.value, scope, resolve, depth + 1)
    if isinstance(expr, cst.Call):
        return _number_call(expr, scope, resolve, depth)
    if isinstance(expr, cst.Name):
        return _number_name(expr.value, scope, resolve, depth)
    return False


def _number_call(call: cst.Call, scope: Scope, resolve: Callable | None, depth: int) -> bool:
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in NUMBER_METHODS:
        return True
    qualname = resolve(func, scope) if resolve is not None else (func.value if isinstance(func, cst.Name) else None)
    if qualname is None:
        return False
    if qualname in NUMBER_FUNCTIONS or qualname.startswith(_NUMBER_MODULES):
        return True
    if qualname in _NUMBER_PRESERVING and call.args:
        return all(a.star == "" and is_number(a.value, scope, resolve, depth + 1) for a in call.args)
    return False


def _number_name(name: str, scope: Scope, resolve: Callable | None, depth: int) -> bool:
    bindings = scope.lookup(name)
    if not bindings:
        return False
    for binding in bindings:
        if binding.kind not in ("assign", "augassign"):
            return False
        value = binding.value
        if value is None and isinstance(binding.node, cst.Assign):
            value = binding.node.value  # `b, c, h, w = x.shape`: every element of a shape is a number
            if not (isinstance(value, cst.Attribute) and value.attr.value in NUMBER_ATTRIBUTES
                    or isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                    and value.func.attr.value == "size" and not value.args):
                return False
            continue
        if value is None or not is_number(value, scope, resolve, depth + 1):
            return False
    return True


# torch factories that make a tensor from sizes or a fill value, not from data
SYNTHETIC_FACTORIES = frozenset({"zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange",
                                 "linspace", "zeros_like", "ones_like", "empty_like", "rand_like", "randn_like"})
_DEVICE_MOVES = frozenset({"to", "cuda", "cpu", "half", "float", "bfloat16", "double", "contiguous"})


def is_synthetic_tensor(expr: cst.BaseExpression, scope: Scope, resolve: Callable, depth: int = 0) -> bool:
    """`expr` is a tensor a torch factory made (moved or cast at most), every binding of a name so."""
    if depth > 6:
        return False
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _DEVICE_MOVES:
            return is_synthetic_tensor(func.value, scope, resolve, depth + 1)
        qualname = resolve(func, scope) or ""
        return qualname.startswith("torch.") and qualname.rsplit(".", 1)[-1] in SYNTHETIC_FACTORIES
    if isinstance(expr, cst.Name):
        bindings = scope.lookup(expr.value)
        return bool(bindings) and all(b.kind == "assign" and b.value is not None
                                      and is_synthetic_tensor(b.value, scope, resolve, depth + 1) for b in bindings)
    return False
