"""Which model an expression names: wrappers and pass-through calls stripped (`model.module`,
`model.to(dev)`), the key's last component, the parameters a module owns.
"""

from __future__ import annotations

import libcst as cst

from trainlint.model.index import FunctionInfo, Scope, dotted_name, walk


# `x.to(dev)`, `DDP(model)`, `accelerator.unwrap_model(model)`: the same model
PASS_THROUGH_METHODS = frozenset({"to", "cuda", "cpu", "float", "half", "bfloat16", "double", "train", "eval",
                                   "requires_grad_"})
WRAPPER_ATTRS = frozenset({"module", "_orig_mod", "_forward_module"})


def strip_wrappers(expr: cst.BaseExpression) -> cst.BaseExpression:
    while True:
        if isinstance(expr, cst.Attribute) and expr.attr.value in WRAPPER_ATTRS:
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and \
                expr.func.attr.value in PASS_THROUGH_METHODS:
            expr = expr.func.value
        else:
            return expr


def parameter_owners(expr: cst.BaseExpression, scope: Scope | None, depth: int = 0) -> set[str]:
    """Last components of `X` in `X.parameters()` / `X.named_parameters()` under `expr` (through
    one level of a variable holding them)."""
    owners: set[str] = set()
    for node in walk(expr):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                node.func.attr.value in ("parameters", "named_parameters"):
            text = dotted_name(strip_wrappers(node.func.value))
            if text:
                owners.add(last_component(text))
        elif isinstance(node, cst.Name) and scope is not None and depth == 0:
            for binding in scope.lookup(node.value):
                if binding.value is not None and binding.value is not node:
                    owners |= parameter_owners(binding.value, scope, depth + 1)
    return owners


def display_key(key: str) -> str:
    """A key as the code names it (without the `helper@2:` prefix of a helper's own locals)."""
    return key.rsplit(":", 1)[-1]


def last_component(key: str) -> str:
    return key.rsplit(".", 1)[-1].split(":")[-1]


def function_name(function: FunctionInfo | None) -> str | None:
    return function.name if function is not None and function.name != "<module>" else None
