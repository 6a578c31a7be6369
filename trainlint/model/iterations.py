"""Whether code in a loop's body runs on the loop's first iteration.

A statement under `if`s in a loop body runs on the first iteration when every test on its way
takes, on that iteration, the branch that holds it. A test is evaluated with what is known of the
first iteration: the loop counter's first value (`for epoch in range(n)`: 0; `range(a, n)` with a
literal `a`; `enumerate(xs, start=k)`; through `tqdm(...)` / `trange(n)`) and integer literals
(`epoch <= 0`, `epoch % 5 == 0`, `not epoch`, `and`/`or`). A test that reads nothing the loop
changes (no name the body binds, no call) has the same value on every iteration: whatever branch
holds the statement, it is taken on the first iteration exactly when it is taken at all, so such a
test never refutes running first. Anything else (a counter the body increments, an attribute a
call may change) leaves the answer unknown.
"""

from __future__ import annotations

import libcst as cst

from trainlint.model.arithmetic import fold, literal
from trainlint.model.index import FileIndex, assigned_targets, dotted_name, positional_args, walk

#: a test whose value is the same on every iteration of the loop
SAME = "same"


def runs_on_first_iteration(index: FileIndex, node: cst.CSTNode, loop: cst.CSTNode,
                            along: cst.CSTNode | None = None) -> bool | None:
    """True: every test between `node` and the body of `loop` takes `node`'s branch on the loop's
    first iteration (or is the same on every iteration); False: one of them provably does not (the
    statement first runs on a later iteration); None: unknown. With `along`, the tests that also
    hold `along` are left out: the question is then whether `node` runs on the first iteration
    that runs `along` (a scheduler step and the optimizer step under one accumulation guard)."""
    if not isinstance(loop, (cst.For, cst.While)):
        return None
    first = first_values(index, loop)
    changed = _bound_in(loop)
    shared = {id(a) for a in index.ancestors(along)} if along is not None else set()
    answer: bool | None = True
    child = node
    for ancestor in index.ancestors(node):
        if ancestor is loop or id(ancestor) in shared:
            break
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None  # a definition in the body: it runs when called, not in the loop's order
        if isinstance(ancestor, cst.If) and child is not ancestor.test:
            needed = child is ancestor.body
            value = evaluate(ancestor.test, first, changed)
            if value is None:
                answer = None
            elif value is not SAME and value is not needed:
                return False
        elif isinstance(ancestor, cst.IfExp) and child is not ancestor.test:
            value = evaluate(ancestor.test, first, changed)
            if value is None:
                answer = None
            elif value is not SAME and value is not (child is ancestor.body):
                return False
        child = ancestor
    return answer


def first_values(index: FileIndex, loop: cst.CSTNode) -> dict[str, int]:
    """The loop's counters with their value on the first iteration: the target of a `range` loop
    with a known start, the index of `enumerate` (its `start`)."""
    if not isinstance(loop, cst.For):
        return {}
    iterable = _unwrapped_progress(loop.iter)
    if not isinstance(iterable, cst.Call):
        return {}
    name = (dotted_name(iterable.func) or "").rsplit(".", 1)[-1]
    args = positional_args(iterable)
    if name in ("range", "trange"):
        start = 0 if len(args) < 2 else literal(args[0].value)
        if start is not None and isinstance(loop.target, cst.Name):
            return {loop.target.value: start}
        return {}
    if name == "enumerate":
        start_arg = next((a for a in iterable.args if a.keyword is not None and a.keyword.value == "start"), None)
        if start_arg is None and len(args) >= 2:
            start_arg = args[1]
        start = 0 if start_arg is None else literal(start_arg.value)
        target = loop.target
        if start is not None and isinstance(target, (cst.Tuple, cst.List)) and target.elements \
                and isinstance(target.elements[0].value, cst.Name):
            return {target.elements[0].value.value: start}
    return {}


def _unwrapped_progress(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`tqdm(range(n), ...)`: a progress bar yields what it wraps, in order."""
    for _ in range(3):
        if isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").rsplit(".", 1)[-1] == "tqdm":
            args = positional_args(expr)
            if not args:
                break
            expr = args[0].value
        else:
            break
    return expr


def _bound_in(loop: cst.CSTNode) -> set[str]:
    """Names the loop binds: its target and what its body assigns (also in nested blocks)."""
    names: set[str] = set()
    targets: list[cst.CSTNode] = []
    if isinstance(loop, cst.For):
        targets.append(loop.target)
    for node in walk(loop.body):
        if isinstance(node, cst.Assign):
            targets += [t.target for t in node.targets]
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            targets.append(node.target)
        elif isinstance(node, cst.For):
            targets.append(node.target)
        elif isinstance(node, cst.NamedExpr):
            targets.append(node.target)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            targets.append(node.asname.name)
    for target in targets:
        for part in walk(target):
            if isinstance(part, cst.Name):
                names.add(part.value)
            elif isinstance(part, cst.Attribute):
                dotted = dotted_name(part)
                if dotted:
                    names.add(dotted)
    return names


def evaluate(test: cst.BaseExpression, first: dict[str, int], changed: set[str]):
    """The test's value on the loop's first iteration: True, False, SAME (the same on every
    iteration) or None (unknown)."""
    if isinstance(test, cst.BooleanOperation):
        left, right = evaluate(test.left, first, changed), evaluate(test.right, first, changed)
        if isinstance(test.operator, cst.And):
            if left is False or right is False:
                return False
            if left is None or right is None:
                return None
            return SAME if SAME in (left, right) else True
        if left is True or right is True:
            return True
        if left is None or right is None:
            return None
        return SAME if SAME in (left, right) else False
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        value = evaluate(test.expression, first, changed)
        return value if value is None or value is SAME else not value
    if isinstance(test, cst.Comparison):
        values = [_int_value(test.left, first)]
        values += [_int_value(c.comparator, first) for c in test.comparisons]
        if all(v is not None for v in values):
            result = True
            for (a, b), target in zip(zip(values, values[1:]), test.comparisons):
                outcome = _compare(a, b, target.operator)
                if outcome is None:
                    return None
                result = result and outcome
            return result
    if isinstance(test, cst.Name) and test.value in first:
        return first[test.value] != 0
    return SAME if _unchanging(test, first, changed) else None


def _unchanging(expr: cst.BaseExpression, first: dict[str, int], changed: set[str]) -> bool:
    """`expr` reads nothing the loop changes: no counter, no name or attribute the body binds, no
    call, subscript or await (their values can change between iterations)."""
    for node in walk(expr):
        if isinstance(node, (cst.Call, cst.Subscript, cst.Await, cst.Yield, cst.NamedExpr)):
            return False
        if isinstance(node, cst.Name) and (node.value in first or node.value in changed):
            return False
        if isinstance(node, cst.Attribute):
            dotted = dotted_name(node)
            if dotted is not None and any(dotted == c or dotted.startswith(c + ".") or c.startswith(dotted + ".")
                                          for c in changed if "." in c):
                return False
    return True


def _int_value(expr: cst.BaseExpression, first: dict[str, int]) -> int | None:
    """An integer from literals and the loop counters' first values (`first`)."""
    return fold(expr, lambda leaf: first.get(leaf.value) if isinstance(leaf, cst.Name) else None)



def _compare(a: int, b: int, operator: cst.BaseCompOp) -> bool | None:
    if isinstance(operator, cst.Equal):
        return a == b
    if isinstance(operator, cst.NotEqual):
        return a != b
    if isinstance(operator, cst.LessThan):
        return a < b
    if isinstance(operator, cst.LessThanEqual):
        return a <= b
    if isinstance(operator, cst.GreaterThan):
        return a > b
    if isinstance(operator, cst.GreaterThanEqual):
        return a >= b
    return None


def same_on_every_iteration(index: FileIndex, test: cst.BaseExpression, loop: cst.CSTNode) -> bool:
    """`test` has the same value on every iteration of `loop` (a `for`/`while`), or on every call of
    a function that runs one iteration per call (a FunctionDef: one micro-batch per call): it reads
    only literals and names and attributes the iterations do not change. In a loop, that is no
    name or attribute its body binds (the counter included); in a function run once per
    micro-batch, no parameter or local (they are new on every call) and only `self.` attributes the
    class of this file sets in `__init__` and nowhere else (an attribute set elsewhere, or by a
    base class this file does not hold, can change between calls: `self.epoch_iteration`)."""
    if isinstance(loop, (cst.For, cst.While)):
        return _unchanging(test, {}, _bound_in(loop))
    if not isinstance(loop, cst.FunctionDef):
        return False
    function = index.function_of_node.get(loop)
    if function is None:
        return False
    local = set(function.scope.bindings) - {"self"}
    constant = _constant_attributes(index, function.class_name)
    for node in walk(test):
        if isinstance(node, (cst.Call, cst.Subscript, cst.Await, cst.Yield, cst.NamedExpr, cst.Lambda)):
            return False
        if isinstance(node, cst.Name) and node.value in local:
            return False
    for node in walk(test):
        if isinstance(node, cst.Attribute):
            dotted = dotted_name(node) or ""
            parts = dotted.split(".")
            if parts[0] == "self" and (len(parts) < 2 or parts[1] not in constant):
                return False
        elif isinstance(node, cst.Name) and node.value == "self" and not _inside_attribute(index, node):
            return False
    return True


def _inside_attribute(index: FileIndex, name: cst.Name) -> bool:
    parent = index.parents.get(name)
    return isinstance(parent, cst.Attribute) and parent.value is name


def _constant_attributes(index: FileIndex, class_name: str | None) -> set[str]:
    """The `self.` attributes the class `class_name` of this file sets in its `__init__` and in no
    other method of the file (nor writes into: `self.cfg.lr = ...`)."""
    if class_name is None:
        return set()
    in_init: set[str] = set()
    elsewhere: set[str] = set()
    for function in index.functions:
        for node in walk(function.node.body):
            for target in assigned_targets(node):
                for part in walk(target):
                    if isinstance(part, cst.Attribute):
                        dotted = (dotted_name(part) or "").split(".")
                        if len(dotted) >= 2 and dotted[0] == "self":
                            own = function.class_name == class_name and function.name == "__init__" \
                                and len(dotted) == 2
                            (in_init if own else elsewhere).add(dotted[1])
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "setattr":
                return set()
    return in_init - elsewhere


def fixed_setting(index: FileIndex, test: cst.BaseExpression, loop: cst.CSTNode) -> bool:
    """`test` reads a setting no iteration of `loop` can change: it calls nothing, and every value it
    reads is a literal, a name the loop does not bind, or `self.<attr>` that the class sets only in
    its `__init__` (`if self.accum_count == 1:`). Stricter than `same_on_every_iteration`: an
    attribute of another object (`accelerator.sync_gradients`) may be changed by a call in the loop."""
    if not same_on_every_iteration(index, test, loop):
        return False
    function = index.function_at(loop) if not isinstance(loop, cst.FunctionDef) else index.function_of_node.get(loop)
    constant = _constant_attributes(index, function.class_name if function is not None else None)
    for node in walk(test):
        if isinstance(node, (cst.Call, cst.Subscript, cst.Await, cst.Yield, cst.NamedExpr, cst.Lambda)):
            return False
        if isinstance(node, cst.Attribute):
            parts = (dotted_name(node) or "").split(".")
            if len(parts) < 2 or parts[0] != "self" or parts[1] not in constant:
                return False
    return True
