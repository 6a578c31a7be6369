"""Which mode a module is in when it is built: torch builds every module in train mode, but some
framework loaders hand theirs back in eval mode (Transformers' `from_pretrained` calls
`model.eval()`: `frameworks.built_in_eval`).

`built_in_eval(index, expr, scope)` holds when every construction `expr` can stand for is such a
loader call: followed through names (`model = model.to(device)` is the same module), the same-file
callers of a parameter, and module-level factories of the file (`model, tok = load(name)` where
`load` returns `(AutoModel.from_pretrained(name), ...)`, by tuple position). A module that no
`.train()` of the file can reach then stays in eval mode while it is trained: a premise "it is in
train mode because a caller trains it" is false for it.
"""

from __future__ import annotations

import weakref

import libcst as cst

from trainlint.model import frameworks
from trainlint.model.index import FileIndex, Scope, unpacked_position

_MAX_DEPTH = 6
# methods of a module that hand back the same module in the same mode
_SAME_MODULE = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "requires_grad_", "type"})


def built_in_eval(index: FileIndex, expr: cst.BaseExpression, scope: Scope) -> bool:
    return _name_in_eval(index, expr, scope, None, 0) is True


def calls_train(index: FileIndex) -> bool:
    """The file calls some `x.train(...)` (any receiver: a module switched back, a framework's
    trainer that switches the models it runs)."""
    found = _TRAIN_CALLS.get(index)
    if found is None:  # asked per evaluated forward: once per file
        found = _TRAIN_CALLS[index] = any(isinstance(site.node.func, cst.Attribute) and
                                          site.node.func.attr.value == "train" for site in index.calls)
    return found


_TRAIN_CALLS: "weakref.WeakKeyDictionary[FileIndex, bool]" = weakref.WeakKeyDictionary()


def _name_in_eval(index, expr, scope, position, depth) -> bool | None:
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Call):
        return _value_in_eval(index, expr, scope, position, depth)
    if not isinstance(expr, cst.Name):
        return None
    bindings = scope.lookup(expr.value)
    if not bindings:
        return None
    for binding in bindings:
        if binding.kind == "param":
            if position is not None:
                return None
            function = index.function_at(binding.node)
            sites = index.callers(function) if function is not None else []
            if not sites:
                return None
            for site in sites:
                arg = index.argument_for(site.node, function, expr.value)
                if arg is None or _name_in_eval(index, arg, site.scope, None, depth + 1) is not True:
                    return None
            continue
        if binding.kind != "assign" or position is not None:
            return None
        value, at = binding.value, None
        if value is None and isinstance(binding.node, cst.Assign):  # `model, tok = load(name)`
            unpacked = unpacked_position(binding.node, expr.value)
            if unpacked is None:
                return None
            value, at = binding.node.value, unpacked[0]
        if value is None:
            return None
        inner = _strip_same(value)
        if at is None and isinstance(inner, cst.Name) and inner.value == expr.value:
            continue  # `model = model.to(device)`: the module the other bindings build
        if _value_in_eval(index, value, scope, at, depth + 1) is not True:
            return None
    return True


def _strip_same(value):
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and \
            value.func.attr.value in _SAME_MODULE:
        value = value.func.value
    return value


def _value_in_eval(index, value, scope, position, depth) -> bool | None:
    value = _strip_same(value)
    if isinstance(value, cst.Name):
        return _name_in_eval(index, value, scope, position, depth + 1)
    if not isinstance(value, cst.Call):
        return None
    func = value.func
    if position is None:
        name = index.resolve(func, scope)
        if name and frameworks.built_in_eval(name):
            return True
    if isinstance(func, cst.Name):
        bindings = scope.lookup(func.value)
        if bindings and all(b.kind == "def" for b in bindings):
            return _factory_in_eval(index, func.value, position, depth + 1)
    return None


def _factory_in_eval(index, name, position, depth) -> bool | None:
    functions = [f for f in index.functions_named(name)
                 if f.class_name is None and f.scope.parent is index.module_scope]
    if len(functions) != 1 or depth > _MAX_DEPTH:
        return None
    function = functions[0]
    returns = [n for n in index.scope_nodes(function.node) if type(n) is cst.Return]
    if not returns:
        return None
    for ret in returns:
        value = ret.value
        if position is not None:
            if not isinstance(value, cst.Tuple) or len(value.elements) <= position or \
                    any(isinstance(e, cst.StarredElement) for e in value.elements):
                return None
            value = value.elements[position].value
        if value is None or _name_in_eval(index, value, function.scope, None, depth + 1) is not True:
            return None
    return True
