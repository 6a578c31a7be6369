"""Whether the gradients a call reads inside an accumulation loop are a sum over the window.

Under accumulation the stepped parameters' `.grad` holds the sum of the window's micro-batches so
far, unless a clear of those parameters runs on every micro-batch: `optimizer.zero_grad()` as a
plain statement of the loop body (no `if`, `try` or inner loop around it) before the call, on the
optimizer the loop steps or on a module whose parameters that optimizer was built on. Then every
iteration that reaches the call has cleared them first, and the call sees what this micro-batch's
backward wrote, not a partial sum of the window (the accumulation itself is broken then, which is
another rule's finding).
"""

from __future__ import annotations

import libcst as cst

from trainlint.model.index import dotted_name, positional_args

# what may stand between a statement of the loop body and the call in it
_STRAIGHT = (cst.Expr, cst.SimpleStatementLine, cst.IndentedBlock, cst.Await)


def cleared_each_micro_batch(training, loop, node: cst.CSTNode):
    """The CallRef of a clear of the stepped gradients that runs on every iteration of `loop`
    before `node` (a call of the loop, in the body or through a helper), or None."""
    order = {id(ref.node): position for position, ref in enumerate(loop.calls)}
    at = order.get(id(node))
    if at is None:
        return None
    stepped = _stepped(training, loop)
    if not stepped:
        return None
    for ref in loop.calls[:at]:
        if ref.via or not training.is_zero_grad(ref.node, ref.scope):
            continue
        receiver = dotted_name(ref.node.func.value)
        if receiver in stepped and _statement_of_body(training.index, ref.node, loop.node):
            return ref
    return None


def _stepped(training, loop) -> set[str]:
    """The optimizers the loop steps (`opt.step()`, `scaler.step(opt)`) and the modules they were
    built on (`Adam(model.parameters())`), as dotted names."""
    found: set[str] = set()
    for ref in loop.step_calls:
        func = ref.node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "step":
            continue
        args = positional_args(ref.node)
        for expr in (func.value, args[0].value if args else None):
            name = dotted_name(expr) if expr is not None else None
            if name is None:
                continue
            found.add(name)
            modules = training.roles.optimized_modules(expr, ref.scope)
            found |= modules or set()
    return found


def _statement_of_body(index, node: cst.CSTNode, loop_node: cst.CSTNode) -> bool:
    """`node` runs whenever an iteration of `loop_node` gets past its statement: nothing but
    statement wrappers between it and the loop's own body."""
    body = getattr(loop_node, "body", None)
    for ancestor in index.ancestors(node):
        if ancestor is body:
            return True
        if not isinstance(ancestor, _STRAIGHT):
            return False
    return False
