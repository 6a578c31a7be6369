"""Sizes the code states: a whole number computed from literals, and the length of a dataset built
from such numbers, so that a loader's batches are known to be all full.

`constant_int`: an integer literal, `int(1e4)`, `+ - * // %` of such numbers (trainlint.model.arithmetic), or a name whose only
binding reaching the use (in its function or module, written before it) is one of these (a parameter
is never a constant: its callers choose it).

`dataset_length`: the number of samples of a dataset expression when the code states it:
`Subset(ds, indices)` has `len(indices)` samples, whatever `ds` holds; `range(n)`, `list(range(a,
b))`, `np.arange(n)`/`torch.arange(n)` and a list literal have their lengths; `TensorDataset(t,
...)` has the first dimension of its first tensor when a torch factory builds it with a stated
size (`torch.rand(n, d)`, `torch.zeros(n)`); a name is followed to its one reaching binding.

`full_batches(flow, call)`: a `DataLoader(dataset, batch_size=b)` (no sampler, batch sampler or
`*args`/`**kwargs` that could change what a batch holds) whose dataset length is a stated multiple
of a stated batch size: every batch, the last one too, holds `b` samples.
"""

from __future__ import annotations

import libcst as cst

from trainlint.model.arithmetic import fold, literal
from trainlint.model.index import keyword_value, positional_args

_MAX_DEPTH = 6
_SIZED_FACTORIES = frozenset({"rand", "randn", "zeros", "ones", "empty", "full", "arange"})
_RANGES = frozenset({"range", "numpy.arange", "torch.arange"})


def constant_int(flow, expr: cst.BaseExpression, depth: int = 0) -> int | None:
    if depth > _MAX_DEPTH:
        return None
    value = fold(expr, lambda leaf: _int_leaf(flow, leaf, depth))
    return value if isinstance(value, int) else None


def _int_leaf(flow, expr: cst.BaseExpression, depth: int) -> int | None:
    """`int(1e4)` (a float literal that is whole) or `int(n)`, and a name followed to its one binding."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "int" \
            and len(expr.args) == 1 and not expr.args[0].star and flow.index.resolve(expr.func, flow.scope_of(expr)) == "int":
        inner = expr.args[0].value
        if isinstance(inner, cst.Float):
            value = literal(inner, floats=True)
            return int(value) if value is not None and value.is_integer() else None
        return constant_int(flow, inner, depth + 1)
    if isinstance(expr, cst.Name):
        value = _only_value(flow, expr)
        return constant_int(flow, value, depth + 1) if value is not None else None
    return None


def dataset_length(flow, expr: cst.BaseExpression, depth: int = 0) -> int | None:
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Name):
        value = _only_value(flow, expr)
        return dataset_length(flow, value, depth + 1) if value is not None else None
    if isinstance(expr, (cst.List, cst.Tuple)):
        if any(isinstance(e, cst.StarredElement) for e in expr.elements):
            return None
        return len(expr.elements)
    if not isinstance(expr, cst.Call) or any(a.star for a in expr.args):
        return None
    name = flow.index.resolve(expr.func, flow.scope_of(expr)) or ""
    args = positional_args(expr)
    if name in _RANGES and 1 <= len(args) <= 2 and len(args) == len(expr.args):
        bounds = [constant_int(flow, a.value, depth + 1) for a in args]
        if any(b is None for b in bounds):
            return None
        low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
        return max(0, high - low)
    if name in ("list", "tuple") and len(args) == 1 and len(expr.args) == 1:
        return dataset_length(flow, args[0].value, depth + 1)
    if name.rsplit(".", 1)[-1] == "Subset" and name.startswith("torch."):
        indices = keyword_value(expr, "indices")
        if indices is None and len(args) >= 2:
            indices = args[1].value
        return dataset_length(flow, indices, depth + 1) if indices is not None else None
    if name.rsplit(".", 1)[-1] == "TensorDataset" and name.startswith("torch.") and args:
        return _first_dimension(flow, args[0].value, depth + 1)
    return None


def _first_dimension(flow, expr: cst.BaseExpression, depth: int) -> int | None:
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Name):
        value = _only_value(flow, expr)
        return _first_dimension(flow, value, depth + 1) if value is not None else None
    if not isinstance(expr, cst.Call):
        return None
    name = flow.index.resolve(expr.func, flow.scope_of(expr)) or ""
    head, _, tail = name.rpartition(".")
    if head != "torch" or tail not in _SIZED_FACTORIES:
        return None
    args = positional_args(expr)
    if tail == "arange":
        return dataset_length(flow, expr, depth + 1)
    if not args or args[0].star:
        return None
    first = args[0].value
    if isinstance(first, (cst.Tuple, cst.List)):
        first = first.elements[0].value if first.elements and not isinstance(first.elements[0], cst.StarredElement) \
            else None
    return constant_int(flow, first, depth + 1) if first is not None else None


def _only_value(flow, name: cst.Name) -> cst.BaseExpression | None:
    """The value of the one binding of `name` that can reach it: an assignment in its own function
    (or module), written before it; None when another binding may reach it too (in a branch, later
    in a loop around it, in another scope)."""
    owner = flow._owner(name)
    reaching = flow.index.reaching_bindings(name, name.value, flow.scope_of(name))
    earlier = [b for b in reaching if flow._owner(b.node) is owner and flow.before(b.node, name)]
    later = [b for b in reaching if b not in earlier and (flow._owner(b.node) is not owner or any(
        isinstance(a, (cst.For, cst.While)) and flow.inside(b.node, a) for a in flow.index.ancestors(name)))]
    if len(earlier) != 1 or later or earlier[0].kind != "assign":
        return None
    return earlier[0].value


def full_batches(flow, call: cst.Call) -> bool:
    """Every batch of the `DataLoader(...)` `call` holds `batch_size` samples (see the module)."""
    if any(a.star for a in call.args) or len(positional_args(call)) > 2:
        return False
    if any(keyword_value(call, word) is not None for word in ("sampler", "batch_sampler")):
        return False
    size = keyword_value(call, "batch_size")
    args = positional_args(call)
    if size is None and len(args) >= 2:
        size = args[1].value
    dataset = keyword_value(call, "dataset")
    if dataset is None and args:
        dataset = args[0].value
    if size is None or dataset is None:
        return False
    batch = constant_int(flow, size)
    length = dataset_length(flow, dataset)
    return batch is not None and batch > 0 and length is not None and length > 0 and length % batch == 0
