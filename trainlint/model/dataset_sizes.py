"""Sizes the code states: a whole number computed from literals, and the length of a dataset built
from such numbers, so that a loader's batches are known to be all full.

`constant_int`: an integer literal, `int(1e4)`, `+ - * // %` of such numbers (trainlint.model.arithmetic), or a name whose only
binding reaching the use (in its function or module, written before it) is one of these (a parameter
is never a constant: its callers choose it).

`dataset_length`: the number of samples of a dataset expression when the code states it:
`Subset(ds, indices)` has `len(indices)` samples, whatever `ds` holds; `range(n)`, `list(range(a,
b))`, `np.arange(n)`/`torch.arange(n)` and a list literal have their lengths; `TensorDataset(t,
...)` has the first dimension of its first tensor when a torch factory builds it with a stated
size (`torch.rand(n, d)`, `torch.zeros(n)`, `torch.randint(0, v, (n, d))`); a name is followed to its one reaching binding.

`full_batches(flow, call)`: a `DataLoader(dataset, batch_size=b)` (no sampler, batch sampler or
`*args`/`**kwargs` that could change what a batch holds) whose dataset length is a stated multiple
of a stated batch size: every batch, the last one too, holds `b` samples.

Parameters are stated by the calls that bind them. A size is followed into a same-file project
function the dataset comes from (`make_data(16)` whose one `return` is `TensorDataset(torch.randint(0,
v, (n, L)))`: `n` is what that call passes, or the default). When the loader's own size or dataset
is a parameter of its module-level function, every call of that function decides: the file calls
it at least once, each call (no `*args`/`**kwargs`) states a length that is a multiple of the batch
size it passes, the function's name is read nowhere else in the file (a callback handed away is
called with arguments the code does not show) and no other checked file calls it.
"""

from __future__ import annotations

import libcst as cst

from trainlint.model.arithmetic import fold, literal
from trainlint.model.index import keyword_value, positional_args

_MAX_DEPTH = 12
_SIZED_FACTORIES = frozenset({"rand", "randn", "randint", "zeros", "ones", "empty", "full", "arange"})
_RANGES = frozenset({"range", "numpy.arange", "torch.arange"})


def constant_int(flow, expr: cst.BaseExpression, depth: int = 0, env: tuple = ()) -> int | None:
    if depth > _MAX_DEPTH:
        return None
    value = fold(expr, lambda leaf: _int_leaf(flow, leaf, depth, env))
    return value if isinstance(value, int) else None


def _int_leaf(flow, expr: cst.BaseExpression, depth: int, env: tuple = ()) -> int | None:
    """`int(1e4)` (a float literal that is whole) or `int(n)`, and a name followed to its one binding."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "int" \
            and len(expr.args) == 1 and not expr.args[0].star and flow.index.resolve(expr.func, flow.scope_of(expr)) == "int":
        inner = expr.args[0].value
        if isinstance(inner, cst.Float):
            value = literal(inner, floats=True)
            return int(value) if value is not None and value.is_integer() else None
        return constant_int(flow, inner, depth + 1, env)
    if isinstance(expr, cst.Name):
        found = _only_value(flow, expr, env)
        return constant_int(flow, found[0], depth + 1, found[1]) if found is not None else None
    return None


def dataset_length(flow, expr: cst.BaseExpression, depth: int = 0, env: tuple = ()) -> int | None:
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Name):
        found = _only_value(flow, expr, env)
        return dataset_length(flow, found[0], depth + 1, found[1]) if found is not None else None
    if isinstance(expr, (cst.List, cst.Tuple)):
        if any(isinstance(e, cst.StarredElement) for e in expr.elements):
            return None
        return len(expr.elements)
    if not isinstance(expr, cst.Call) or any(a.star for a in expr.args):
        return None
    name = flow.index.resolve(expr.func, flow.scope_of(expr)) or ""
    args = positional_args(expr)
    if name in _RANGES and 1 <= len(args) <= 2 and len(args) == len(expr.args):
        bounds = [constant_int(flow, a.value, depth + 1, env) for a in args]
        if any(b is None for b in bounds):
            return None
        low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
        return max(0, high - low)
    if name in ("list", "tuple") and len(args) == 1 and len(expr.args) == 1:
        return dataset_length(flow, args[0].value, depth + 1, env)
    if name.rsplit(".", 1)[-1] == "Subset" and name.startswith("torch."):
        indices = keyword_value(expr, "indices")
        if indices is None and len(args) >= 2:
            indices = args[1].value
        return dataset_length(flow, indices, depth + 1, env) if indices is not None else None
    if name.rsplit(".", 1)[-1] == "TensorDataset" and name.startswith("torch.") and args:
        return _first_dimension(flow, args[0].value, depth + 1, env)
    returned = _returned_by_callee(flow, expr)
    return dataset_length(flow, returned[0], depth + 1, (*env, returned[1])) if returned is not None else None


def _first_dimension(flow, expr: cst.BaseExpression, depth: int, env: tuple = ()) -> int | None:
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Name):
        found = _only_value(flow, expr, env)
        return _first_dimension(flow, found[0], depth + 1, found[1]) if found is not None else None
    if not isinstance(expr, cst.Call):
        return None
    name = flow.index.resolve(expr.func, flow.scope_of(expr)) or ""
    head, _, tail = name.rpartition(".")
    if head != "torch" or tail not in _SIZED_FACTORIES:
        return None
    args = positional_args(expr)
    if tail == "arange":
        return dataset_length(flow, expr, depth + 1, env)
    if tail == "randint":
        # `torch.randint(high, size)` / `torch.randint(low, high, size)`: the shape comes last
        first = keyword_value(expr, "size")
        if first is None and len(args) in (2, 3) and len(args) == len(expr.args):
            first = args[-1].value
        if first is None:
            return None
    elif not args or args[0].star:
        return None
    else:
        first = args[0].value
    if isinstance(first, (cst.Tuple, cst.List)):
        first = first.elements[0].value if first.elements and not isinstance(first.elements[0], cst.StarredElement) \
            else None
    return constant_int(flow, first, depth + 1, env) if first is not None else None


def _only_value(flow, name: cst.Name, env: tuple = ()) -> tuple[cst.BaseExpression, tuple] | None:
    """The value of the one binding of `name` that can reach it, with the calls it is read under:
    an assignment in its own function (or module), written before it; a parameter of the function
    the innermost call of `env` runs, what that call passes (or the default); None when another
    binding may reach it too (in a branch, later in a loop around it, in another scope)."""
    owner = flow._owner(name)
    reaching = flow.index.reaching_bindings(name, name.value, flow.scope_of(name))
    if len(reaching) == 1 and reaching[0].kind == "param" and isinstance(reaching[0].node, cst.Param):
        return _argument(flow, reaching[0], owner, env)
    earlier = [b for b in reaching if flow._owner(b.node) is owner and flow.before(b.node, name)]
    later = [b for b in reaching if b not in earlier and (flow._owner(b.node) is not owner or any(
        isinstance(a, (cst.For, cst.While)) and flow.inside(b.node, a) for a in flow.index.ancestors(name)))]
    if len(earlier) != 1 or later or earlier[0].kind != "assign":
        return None
    return earlier[0].value, env


def _argument(flow, binding, owner: cst.CSTNode, env: tuple) -> tuple[cst.BaseExpression, tuple] | None:
    """What the innermost call of `env` passes for the parameter `binding` of the function `owner`."""
    if not env or not isinstance(owner, cst.FunctionDef) or env[-1][0].node is not owner \
            or binding.node not in owner.params.params + owner.params.posonly_params + owner.params.kwonly_params:
        return None
    function, call = env[-1]
    if any(a.star for a in call.args):
        return None
    passed = flow.index.argument_for(call, function, binding.name)
    if passed is not None:
        return passed, env[:-1]
    return (binding.value, env[:-1]) if binding.value is not None else None


def _returned_by_callee(flow, call: cst.Call) -> tuple[cst.BaseExpression, tuple[object, cst.Call]] | None:
    """`make_data(16)` of a same-file function whose only `return` hands back one value: that value,
    with the frame (function, call) its parameters are read under."""
    function = flow.index.callee(call, flow.scope_of(call))
    if function is None or any(a.star for a in call.args):
        return None
    returns = [n for n in flow.index.scope_nodes(function.node) if isinstance(n, cst.Return)]
    if len(returns) != 1 or returns[0].value is None or not any(
            s.body and s.body[-1] is returns[0] for s in function.node.body.body
            if isinstance(s, cst.SimpleStatementLine)):
        return None  # a return in a branch or a loop: another path may hand back something else
    return returns[0].value, (function, call)


def _callers_state_it(flow, call: cst.Call) -> bool:
    """Every call of the module-level function holding the loader `call` binds its parameters so
    that the loader's batches are all full (see the module)."""
    function = flow.index.function_at(call)
    if function is None or function.class_name is not None \
            or flow.index.scope_at(function.node) is not flow.index.module_scope:
        return False
    sites = flow.index.callers(function)
    if not sites or any(any(a.star for a in site.node.args) for site in sites):
        return False
    linker = flow.index.linker
    if linker is not None and linker.callers(function.name):
        return False
    called = {id(site.node.func) for site in sites}
    if any(isinstance(node, cst.Name) and node.value == function.name and id(node) not in called
           and node is not function.node.name for node in flow.index.parents):
        return False  # handed away (a callback, a mapping of runners): called with unseen arguments
    return all(_full(flow, call, ((function, site.node),)) for site in sites)


def full_batches(flow, call: cst.Call) -> bool:
    """Every batch of the `DataLoader(...)` `call` holds `batch_size` samples (see the module)."""
    return _full(flow, call, ()) or _callers_state_it(flow, call)


def _full(flow, call: cst.Call, env: tuple) -> bool:
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
    batch = constant_int(flow, size, 0, env)
    length = dataset_length(flow, dataset, 0, env)
    return batch is not None and batch > 0 and length is not None and length > 0 and length % batch == 0
