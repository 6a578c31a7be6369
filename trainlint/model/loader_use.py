"""How a loader is used: iterated (an epoch over it, an evaluation over it), or only drawn from.

`imgs = next(iter(val_loader))` takes one batch (sample pictures, a shape probe, a warm-up): the
loader is never gone through, so what makes an evaluation loader wrong (a shuffled order, a dropped
last batch) does not apply to it. A loader is "only drawn from" when every use of its name in its
function (in the file, for an attribute), apart from its binding, is `next(iter(name))`; any other
use (a `for` over it, `len(name)`, `it = iter(name)` drawn from batch after batch, handing it to a
function) may go through it.
"""

from __future__ import annotations

import libcst as cst

from trainlint.model.index import FileIndex, dotted_name, walk


def only_drawn_from(index: FileIndex, holder: str, binding: cst.CSTNode) -> bool:
    """Every use of the loader named `holder` (a name or `self.attr`) is a single draw."""
    targets = [t.target for t in binding.targets] if isinstance(binding, cst.Assign) else \
        [binding.target] if isinstance(binding, cst.AnnAssign) else []
    if not any(isinstance(t, (cst.Name, cst.Attribute)) and dotted_name(t) == holder for t in targets):
        return False  # a dict entry or a keyword argument: its uses are not written under this name
    drawn = False
    inside_binding = {id(n) for n in walk(binding)}
    function = index.function_at(binding)
    # a local name is used in its function; an attribute (`self.val_loader`) anywhere in the file
    region = function.node if function is not None and "." not in holder else index.module
    for node in walk(region):
        if not isinstance(node, (cst.Name, cst.Attribute)) or id(node) in inside_binding:
            continue
        if dotted_name(node) != holder or _part_of_longer_name(index, node):
            continue
        if _drawn_once(index, node):
            drawn = True
            continue
        return False
    return drawn


def _part_of_longer_name(index: FileIndex, node: cst.CSTNode) -> bool:
    """`self` of `self.val_loader`, or `val_loader` of `x.val_loader`: not a use of this name."""
    parent = index.parent(node)
    return isinstance(parent, cst.Attribute) and (parent.value is node or parent.attr is node)


def _drawn_once(index: FileIndex, node: cst.CSTNode) -> bool:
    """`next(iter(node))`: the first batch of a fresh iterator, not an epoch."""
    call = _call_with_only_argument(index, node, "iter")
    return call is not None and _call_with_only_argument(index, call, "next") is not None


def _call_with_only_argument(index: FileIndex, node: cst.CSTNode, function: str) -> cst.Call | None:
    arg = index.parent(node)
    call = index.parent(arg) if isinstance(arg, cst.Arg) else None
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == function \
            and call.args and call.args[0] is arg:
        return call
    return None
