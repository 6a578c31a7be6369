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


# evaluated where they stand (a generator expression runs only when something consumes it)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp)
_LEAVES_LOOP = (cst.Break, cst.Continue, cst.Return, cst.Raise)
_MEMBER_METHODS = frozenset({"values", "children"})  # iterate the members themselves
MEMBERS, MEMBERS_AND_SELF, SELF = "members", "members and self", "self"


def switched_members(call: cst.Call, index) -> list[tuple[cst.BaseExpression, str]]:
    """The models a mode call in a loop over a container reaches on every iteration, each as
    (expression, what of it is reached: MEMBERS, MEMBERS_AND_SELF or SELF): the members of `C` for
    `C[k].eval()` in `for k in C` / `C.keys()` / `C.items()` and for `m.eval()` in `for m in C` /
    `C.values()` / `C.children()` (a comprehension alike: `[C[k].eval() for k in C]`), `C` and its
    members for `C.modules()` (it yields `C` itself), and each element for `m.eval()` in
    `for m in (G, D)`. A container of models (a dict, a `ModuleDict`) has no forward of its own,
    so only its members take the mode. Empty unless the call runs once per iteration
    with nothing to skip it: it is the comprehension's element with no `if` clause, or a statement
    of the loop's own body that no earlier `break`/`continue`/`return`/`raise` can skip."""
    receiver = strip_wrappers(call.func.value)
    if isinstance(receiver, cst.Subscript):
        if len(receiver.slice) != 1 or not isinstance(receiver.slice[0].slice, cst.Index) or \
                not isinstance(receiver.slice[0].slice.value, cst.Name):
            return []
        variable, container = receiver.slice[0].slice.value.value, receiver.value
    elif isinstance(receiver, cst.Name):
        variable, container = receiver.value, None
    else:
        return []
    parent = index.parent(call)
    if isinstance(parent, _COMPREHENSIONS):
        element = parent.value if isinstance(parent, cst.DictComp) else parent.elt
        comp = parent.for_in
        if element is not call or comp.ifs or comp.inner_for_in is not None:
            return []
        return _iterated(comp.target, comp.iter, variable, container)
    line = index.parent(parent)
    body = index.parent(line)
    loop = index.parent(body)
    if not isinstance(loop, cst.For) or body is not loop.body or not _runs_every_iteration(call, parent, line, loop):
        return []
    return _iterated(loop.target, loop.iter, variable, container)


def _runs_every_iteration(call: cst.Call, statement, line, loop: cst.For) -> bool:
    """`call` is the whole value of a statement of the loop's own body (`m.eval()`, `_ = m.eval()`)
    and no statement before it can leave the iteration."""
    whole = isinstance(statement, cst.Expr) or isinstance(statement, cst.Assign) and statement.value is call
    if not isinstance(line, cst.SimpleStatementLine) or not whole:
        return False
    for earlier in loop.body.body:
        if earlier is line:
            return True
        if any(isinstance(node, _LEAVES_LOOP) for node in walk(earlier)):
            return False
    return False


def _iterated(target: cst.BaseExpression, iterable: cst.BaseExpression, variable: str,
              container: cst.BaseExpression | None) -> list[tuple[cst.BaseExpression, str]]:
    """What `for <target> in <iterable>` hands `variable`, when it is every member (or key) of a
    container: see `switched_members`."""
    method = None
    source = iterable
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute) and not iterable.args:
        method, source = iterable.func.attr.value, iterable.func.value
    if isinstance(target, cst.Name):
        if target.value != variable:
            return []
        if container is not None:  # `C[k]`: k runs over C's keys
            return [(source, MEMBERS)] if method in (None, "keys") and _same(source, container) else []
        if method == "modules":
            return [(source, MEMBERS_AND_SELF)]
        if method in _MEMBER_METHODS or method is None and isinstance(iterable, (cst.Name, cst.Attribute)):
            return [(source, MEMBERS)]
        if method is None and isinstance(iterable, (cst.List, cst.Tuple)) and \
                all(isinstance(e, cst.Element) for e in iterable.elements):
            return [(e.value, SELF) for e in iterable.elements]
        return []
    if isinstance(target, cst.Tuple) and len(target.elements) == 2 and method == "items":
        key, value = (e.value for e in target.elements)
        if container is None and isinstance(value, cst.Name) and value.value == variable:
            return [(source, MEMBERS)]
        if container is not None and isinstance(key, cst.Name) and key.value == variable and _same(source, container):
            return [(source, MEMBERS)]
    return []


def _same(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    text = dotted_name(a)
    return text is not None and text == dotted_name(b)


def dominating_value(index, use: cst.Name, scope: Scope) -> cst.BaseExpression | None:
    """The value of the assignment to `use`'s name that every path to `use` runs last: a statement
    of a block around `use`, before it, with no other binding of the name in between."""
    bindings = scope.lookup(use.value)
    at = index.place.get(use)
    if at is None:
        return None
    statement = index.enclosing_statement(use)
    best = None
    for binding in bindings:
        if binding.kind != "assign" or not isinstance(binding.node, cst.Assign):
            continue
        where = index.place.get(binding.node)
        if where is None or where >= at or binding.node in _ancestors_of(index, statement):
            continue
        if best is None or where > index.place[best.node]:
            best = binding
    if best is None or best.value is None or not _dominates(index, best.node, statement):
        return None
    start = index.place[best.node]
    around = _ancestors_of(index, statement)  # `x = x.cuda()` binds `x` after this use of it
    # a loop around the use (and not around the assignment) brings back what its body binds later
    loops = [(index.place[loop], index.subtree_end(index.place[loop])) for loop in around
             if isinstance(loop, (cst.For, cst.While)) and index.place[loop] > start]
    for binding in bindings:  # anything between the assignment and the use may rebind the name
        where = index.place.get(binding.node)
        if where is None or binding.node is best.node:
            continue
        if start < where < at and binding.node not in around or any(a <= where < b for a, b in loops):
            return None
    return best.value


def _ancestors_of(index, node: cst.CSTNode) -> set:
    return {node, *index.ancestors(node)}


def _dominates(index, assign: cst.CSTNode, statement: cst.CSTNode) -> bool:
    """The simple statement line of `assign` sits in a block that holds `statement` (at any depth),
    before it, in the same function."""
    line = index.parent(assign)
    block = index.parent(line)
    if not isinstance(line, cst.SimpleStatementLine) or not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return False
    child = statement
    for ancestor in index.ancestors(statement):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if ancestor is block:
            body = list(block.body)
            return child in body and body.index(line) < body.index(child)
        child = ancestor
    return False


def deep_copied(index, use: cst.BaseExpression, scope: Scope) -> bool:
    """`use` is a name that, on every path here, holds `copy.deepcopy(...)`: an object of its own
    (`model = deepcopy(model); model.eval()` leaves the caller's model as it was). A shallow copy
    or a wrapper (`DDP(model)`) shares the modules whose mode a switch sets."""
    if not isinstance(use, cst.Name) or not any(b.kind == "assign" for b in scope.lookup(use.value)):
        return False
    value = dominating_value(index, use, scope)
    return isinstance(value, cst.Call) and index.resolve(value.func, scope) == "copy.deepcopy"
