"""Where gradient recording is on or off: `no_grad`/`inference_mode`/`enable_grad` contexts and
decorators, `set_grad_enabled(flag)`, project context managers that turn recording off, the
literal True/False a call binds to a helper's flag parameter (`run_epoch(..., train=False)`), and
the legacy `Variable(x, volatile=True)` whose forwards record nothing.
"""

from __future__ import annotations

import bisect
import weakref

import libcst as cst

from trainlint.model import frameworks
from trainlint.model.index import FunctionInfo, Scope, keyword_arg, positional_args, walk
from trainlint.model.mode_names import dominating_value
from trainlint.model.mode_state import COND, Frame, OFF, ON


# torch's, and those of the frameworks whose autograd works like torch's (`paddle.no_grad`: the data
# in trainlint/frameworks/*.toml, kinds grad_off / grad_on / grad_setter)
GRAD_OFF_CONTEXTS = frozenset({
    "torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.inference_mode",
    "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode",
}) | frameworks.grad_switches("grad_off")

# the words a project file must hold to be read for grad-mode or module-mode effects (summaries.py)
GRAD_WORDS = ("no_grad", "inference_mode", "set_grad_enabled", "grad_mode")
GRAD_ON_CONTEXTS = frozenset({"torch.enable_grad", "torch.autograd.enable_grad",
                              "torch.autograd.grad_mode.enable_grad"}) | frameworks.grad_switches("grad_on")
GRAD_SETTERS = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled",
                          "torch.autograd.grad_mode.set_grad_enabled", "torch._C._set_grad_enabled"}) | \
    frameworks.grad_switches("grad_setter")

# calls that compute gradients: a region holding one is not an evaluation
GRAD_FUNCTIONS = frozenset({
    "torch.autograd.grad", "torch.autograd.backward", "torch.func.grad", "torch.func.grad_and_value",
    "torch.func.vjp", "torch.func.jacrev", "torch.func.jacfwd", "torch.func.hessian",
    "torch.autograd.functional.jacobian", "torch.autograd.functional.hessian",
    "torch.autograd.functional.vjp", "torch.autograd.functional.jvp", "functorch.grad", "functorch.vjp",
})


# the legacy wrapper; before PyTorch 0.4, `volatile=True` made every result computed from it record
# no graph (the `no_grad` of that time); 0.4 removed the flag (it only warns now), and code using
# it also reads `loss.data[0]`, which later versions reject
VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
_MAX_VOLATILE_DEPTH = 4


def volatile_input(index, call: cst.Call, scope: Scope) -> cst.Call | None:
    """The `Variable(..., volatile=True)` an input of `call` is computed from (directly, through
    operations on it, or through the assignment that reaches the use on every path), or None."""
    for arg in call.args:
        found = _volatile_source(index, arg.value, scope, 0)
        if found is not None:
            return found
    return None


def _volatile_source(index, expr: cst.BaseExpression, scope: Scope, depth: int) -> cst.Call | None:
    if depth > _MAX_VOLATILE_DEPTH:
        return None
    for node in _operands(expr):
        if isinstance(node, cst.Call) and index.resolve(node.func, scope) in VARIABLE:
            volatile = keyword_arg(node, "volatile")
            if volatile is not None and is_true(volatile.value):
                return node
        elif isinstance(node, cst.Name):
            value = dominating_value(index, node, scope)
            if value is None:
                value = global_value(index, node, scope)
            found = _volatile_source(index, value, scope, depth + 1) if value is not None else None
            if found is not None:
                return found
    return None


def global_value(index, use: cst.Name, scope: Scope) -> cst.BaseExpression | None:
    """The value a module-level name holds whenever the function reading it runs: every binding of
    the name is an assignment statement of the module's own body (not in a branch, a loop or a
    `try`), none of the file's functions declares it `global`, and the last of them comes before
    the top-level statement defining the function (which cannot run before its `def`); None
    otherwise, and for a name the function binds itself."""
    if scope.kind != "function" or index.module_scope.bindings.get(use.value) is not scope.lookup(use.value):
        return None
    bindings = index.module_scope.bindings[use.value]
    position = {id(statement): i for i, statement in enumerate(index.module.body)}
    places = []
    for binding in bindings:
        line = index.parent(binding.node) if binding.kind == "assign" and isinstance(binding.node, cst.Assign) else None
        if line is None or id(line) not in position or binding.value is None:
            return None
        places.append((position[id(line)], binding.value))
    top = next((a for a in index.ancestors(use) if id(a) in position), None) if places else None
    if top is None or not isinstance(top, (cst.FunctionDef, cst.ClassDef)):
        return None
    if any(isinstance(node, cst.Global) and any(n.name.value == use.value for n in node.names)
           for node in walk(index.module)):
        return None
    last, value = max(places, key=lambda place: place[0])
    return value if last < position[id(top)] else None


def _operands(expr: cst.BaseExpression):
    """`expr` and the values it computes from (a result of an operation on a volatile input is
    volatile), not entering lambdas or comprehensions, nor the name of a called function."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
            continue
        if isinstance(node, cst.Call):
            stack.extend(arg.value for arg in node.args)
            if isinstance(node.func, cst.Attribute):
                stack.append(node.func.value)  # `x.cuda()`, `x.view(n, -1)`
        elif isinstance(node, cst.Attribute):
            stack.append(node.value)
        elif isinstance(node, cst.Subscript):
            stack.append(node.value)
        elif isinstance(node, cst.BinaryOperation):
            stack.extend((node.left, node.right))
        elif isinstance(node, cst.UnaryOperation):
            stack.append(node.expression)


def context_grad(index, expr: cst.BaseExpression, scope: Scope) -> str | None:
    """The grad state a `with` item sets: on, off, cond (chosen at run time), or None (not a grad
    context)."""
    if isinstance(expr, cst.IfExp):
        a, b = context_grad(index, expr.body, scope), context_grad(index, expr.orelse, scope)
        if a is None and b is None:
            return None
        return a if a == b else COND
    if not isinstance(expr, cst.Call):
        return None
    name = index.resolve(expr.func, scope)
    if name in GRAD_OFF_CONTEXTS:
        mode = keyword_arg(expr, "mode")
        args = positional_args(expr)
        value = mode.value if mode is not None else args[0].value if args else None
        if value is None or is_true(value):
            return OFF
        return None if is_false(value) else COND
    if name in GRAD_ON_CONTEXTS:
        return ON
    if name in GRAD_SETTERS:
        args = positional_args(expr) or [a for a in expr.args if a.keyword is not None]
        value = args[0].value if args else None
        if value is not None and is_false(value):
            return OFF
        if value is not None and is_true(value):
            return ON
        return COND
    return _project_grad(index, expr.func, scope)


def _project_grad(index, expr: cst.BaseExpression, scope: Scope) -> str | None:
    """OFF for a project function (or context manager class) that turns recording off where it is
    used: `with autocast_eval():`, `@smart_inference_mode()`, `@torch_no_grad_eval`."""
    summary = index.summary_of(expr, scope, GRAD_WORDS)
    return OFF if summary is not None and summary.grad_off else None


def decorator_grad(index, function: FunctionInfo) -> str | None:
    """`@torch.no_grad()`, `@torch.no_grad`, `@torch.inference_mode()`, `@torch.enable_grad()`."""
    scope = function.scope.parent or function.scope
    for decorator in function.node.decorators:
        grad = _decorator_grad(index, decorator.decorator, scope)
        if grad is not None:
            return grad
    return None


def _decorator_grad(index, expr: cst.BaseExpression, scope: Scope) -> str | None:
    """One decorator's grad state; `@torch.no_grad() if HAVE_TORCH else (lambda f: f)` is chosen
    at run time (cond) unless both sides agree."""
    if isinstance(expr, cst.IfExp):
        a, b = _decorator_grad(index, expr.body, scope), _decorator_grad(index, expr.orelse, scope)
        if a is None and b is None:
            return None
        return a if a == b else COND
    if isinstance(expr, cst.Call):
        return context_grad(index, expr, scope)
    name = index.resolve(expr, scope)
    grad = OFF if name in GRAD_OFF_CONTEXTS else ON if name in GRAD_ON_CONTEXTS else None
    if grad is None and isinstance(expr, (cst.Name, cst.Attribute)):
        grad = _project_grad(index, expr, scope)
    return grad


class _NoneLiteral:
    """A parameter bound to the literal `None` (`predict(loader)` with `optim=None` by default)."""

    def __repr__(self) -> str:
        return "None"


NONE = _NoneLiteral()


def literal_value(expr: cst.BaseExpression):
    """The constant a literal spells: True, False, NONE, a string; None when it is not one."""
    if is_true(expr):
        return True
    if is_false(expr):
        return False
    if isinstance(expr, cst.Name) and expr.value == "None":
        return NONE
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


def literal_flags(call: cst.Call, target: FunctionInfo, outer: dict | None = None) -> dict:
    """The parameters of `target` that `call` binds to a literal (True/False, None, a string),
    passed or by default, and that the body never rebinds: `self._run_batch(x, train=False)` is
    analysed with `train` false, not joined over both values its callers pass; `predict(loader)`
    with `optim=None` by default skips its `if optim is not None:` branch. `outer`: the caller's own
    literal-bound parameters, handed on by name (`self.process_batch(batch, optim)`)."""
    params = target.node.params
    positional = [*params.posonly_params, *params.params]
    if target.class_name is not None and positional and positional[0].name.value in ("self", "cls"):
        positional = positional[1:]
    defaults = {p.name.value: p.default for p in (*positional, *params.kwonly_params) if p.default is not None}
    values = bound_arguments(call, [p.name.value for p in positional], defaults)
    if values is None:
        return {}
    bindings = target.scope.bindings
    found = {}
    for name, value in values.items():
        literal = literal_value(value)
        if literal is None and outer and isinstance(value, cst.Name):
            literal = outer.get(value.value)
        if literal is not None and all(binding.kind == "param" for binding in bindings.get(name, ())):
            found[name] = literal
    return found


def bound_arguments(call: cst.Call, positional: list[str], defaults: dict) -> dict | None:
    """What `call` binds each named parameter to: its argument (by position among `positional`, or
    by keyword), else its entry in `defaults`. None when `*args`/`**kwargs` may bind any of them."""
    if any(arg.star for arg in call.args):
        return None
    values = dict(defaults)
    values.update(zip(positional, (arg.value for arg in positional_args(call))))
    values.update((arg.keyword.value, arg.value) for arg in call.args if arg.keyword is not None)
    return values


def flag_value(expr: cst.BaseExpression, frame: Frame) -> bool | None:
    """What a test on a literal-bound parameter evaluates to in this frame (`train`, `not train`,
    `optim is not None`, `mode == "inference"`, and `and`/`or` of such tests)."""
    if not frame.flags:
        return None
    if isinstance(expr, cst.Name):
        value = frame.flags.get(expr.value)
        return None if value is None else False if value is NONE else bool(value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = flag_value(expr.expression, frame)
        return None if inner is None else not inner
    if isinstance(expr, cst.BooleanOperation):
        left, right = flag_value(expr.left, frame), flag_value(expr.right, frame)
        if isinstance(expr.operator, cst.And):
            return False if False in (left, right) else True if left is True and right is True else None
        return True if True in (left, right) else False if left is False and right is False else None
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        target = expr.comparisons[0]
        operator = target.operator
        left, right = expr.left, target.comparator
        if isinstance(left, cst.Name) and left.value in frame.flags:
            bound, other = frame.flags[left.value], literal_value(right)
        elif isinstance(right, cst.Name) and right.value in frame.flags:
            bound, other = frame.flags[right.value], literal_value(left)
        else:
            return None
        if other is None:
            return None
        if isinstance(operator, (cst.Is, cst.IsNot)):
            if other is not NONE and not isinstance(other, bool):
                return None  # `is` on strings: identity, not equality
            same = bound is other
            return same if isinstance(operator, cst.Is) else not same
        if isinstance(operator, (cst.Equal, cst.NotEqual)):
            same = bound is other if NONE in (bound, other) else type(bound) is type(other) and bound == other
            return same if isinstance(operator, cst.Equal) else not same
    return None


def bool_flag_value(expr: cst.BaseExpression, frame: Frame) -> bool | None:
    """`flag_value` of a parameter bound to True/False (or `not` of one): the value a grad switch
    (`set_grad_enabled(train)`) is handed."""
    inner = expr.expression if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not) else expr
    if not (isinstance(inner, cst.Name) and isinstance(frame.flags.get(inner.value), bool)):
        return None
    return flag_value(expr, frame)


def skipped_branch(index, node: cst.CSTNode, root: cst.CSTNode, flags: dict) -> bool:
    """`node` sits in a branch of an `if` under `root` that the literal `flags` never take."""
    child = node
    for ancestor in index.ancestors(node):
        if ancestor is root:
            return False
        if isinstance(ancestor, cst.If):
            value = flag_value(ancestor.test, Frame(None, index.module_scope, {}, flags=flags))
            if value is not None and (child is ancestor.body or child is ancestor.orelse) and \
                    (child is ancestor.body) != value:
                return True
        child = ancestor
    return False


def is_false(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def is_true(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"


# -- statement switches: `torch.set_grad_enabled(False)` as a call, not a `with` ---------------------
# Called as a statement, `set_grad_enabled(flag)` switches recording for the rest of the thread's
# run (its constructor sets the mode; only a `with` restores it). The state such switches leave at a
# node is read along the code from the start of a region (a function, the module, the body of a
# grad `with`): a branch joins both ways, a loop joins its entry with every pass through its body
# (the next iteration runs after the end of the body), a `with` that sets grad restores the state it
# found, a `return`/`raise` ends a path. A switch decides a node's state only when it dominates it:
# every path from the region's start passes a switch and all leave the same state.
ENTRY_GRAD = "entry"  # the state the region was entered in: no switch on that path
_SWITCHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # index -> sorted places of its switches


def _switch_places(index) -> list[int]:
    places = _SWITCHES.get(index)
    if places is None:
        places = sorted(index.place[site.node] for site in index.calls if site.node in index.place
                        and index.resolve(site.node.func, site.scope) in GRAD_SETTERS)
        _SWITCHES[index] = places
    return places


def _holds_switch(index, node: cst.CSTNode) -> bool:
    places = _switch_places(index)
    start = index.place.get(node)
    if not places or start is None:
        return False
    at = bisect.bisect_left(places, start)
    return at < len(places) and places[at] < index.subtree_end(start)


def switch_value(index, call: cst.Call, scope: Scope) -> str | None:
    """The state a `set_grad_enabled(...)` call sets (ON, OFF, COND for a flag chosen at run
    time), None when `call` is not one."""
    if index.resolve(call.func, scope) not in GRAD_SETTERS:
        return None
    return context_grad(index, call, scope)  # the state it sets, as a statement or as a `with` item


def switched_grad(index, node: cst.CSTNode, region: cst.CSTNode) -> str | None:
    """The grad state the `set_grad_enabled(...)` statements between the start of `region` (a def,
    the module, or a `with` that sets grad: where the caller's own answer applies) and `node` leave
    at `node` when they dominate it (ON, OFF or COND), None when some path reaches `node` with no
    switch, or switches leave different states (the region's own state decides then)."""
    states = switch_states(index, node, region)
    return next(iter(states)) if len(states) == 1 and ENTRY_GRAD not in states else None


def switch_unsettled(index, node: cst.CSTNode, region: cst.CSTNode) -> bool:
    """A switch that may turn recording off reaches `node` on some paths but not on all (or others
    turn it on): `if fast: torch.set_grad_enabled(False)` before it. Recording there is neither
    proven on nor proven off."""
    states = switch_states(index, node, region)
    return len(states) > 1 and bool(states & {OFF, COND})


def switch_states(index, node: cst.CSTNode, region: cst.CSTNode) -> frozenset:
    """The states (ON, OFF, COND, ENTRY_GRAD) that the paths from the start of `region` to `node`
    leave, read from the `set_grad_enabled(...)` statements on them."""
    entry = frozenset({ENTRY_GRAD})
    if not _switch_places(index) or not _holds_switch(index, region):
        return entry
    path = [node]
    for ancestor in index.ancestors(node):
        if ancestor is region:
            break
        path.append(ancestor)
    else:
        return entry
    if isinstance(region, cst.Module):
        path.append(region)
    path.reverse()
    states = entry
    for parent, child in zip(path, path[1:]):
        states = _enter(index, parent, child, states)
    return states


def _enter(index, parent: cst.CSTNode, child: cst.CSTNode, states: frozenset) -> frozenset:
    """The states at the start of `child`, run as part of `parent` entered in `states`."""
    if isinstance(parent, (cst.IndentedBlock, cst.Module)) and child in parent.body:
        return _run_block(index, parent.body[:parent.body.index(child)], states) or states
    if isinstance(parent, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and child in parent.body:
        for small in parent.body[:parent.body.index(child)]:
            states = _run_small(index, small, states)
        return states
    if isinstance(parent, (cst.For, cst.While)) and child in (parent.body, parent.orelse):
        return _loop_head(index, parent, states)
    if isinstance(parent, cst.With) and child is parent.body:
        scope = index.scope_at(parent)
        grads = [context_grad(index, item.item, scope) for item in parent.items]
        grads = [g for g in grads if g is not None]
        return frozenset({grads[-1]}) if grads else states
    if isinstance(parent, cst.Try) and child is not parent.body:
        after_body = _run_block(index, _statements(parent.body), states) or frozenset()
        if child is parent.orelse:
            return after_body or states
        return states | after_body | _all_states(index, parent.body)
    return states


def _statements(block) -> list:
    """The statements of a block (`if c: a(); b()` on one line: that line)."""
    if block is None:
        return []
    return [block] if isinstance(block, cst.SimpleStatementSuite) else list(block.body)


def _all_states(index, node: cst.CSTNode) -> frozenset:
    """Every state a switch under `node` sets (an exception may leave a block anywhere)."""
    return frozenset(value for n in index.scope_nodes(node) if isinstance(n, cst.Call)
                     for value in [switch_value(index, n, index.scope_at(n))] if value is not None)


def _run_block(index, statements, states: frozenset) -> frozenset | None:
    """The states after `statements` run from `states`; None when no path falls through them."""
    for statement in statements:
        if not states:
            return None
        if not _holds_switch(index, statement):
            if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and \
                    any(isinstance(s, (cst.Return, cst.Raise)) for s in statement.body):
                return None
            continue
        states = _run_statement(index, statement, states)
        if states is None:
            return None
    return states or None


def _run_statement(index, statement: cst.CSTNode, states: frozenset) -> frozenset | None:
    if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        for small in statement.body:
            if isinstance(small, (cst.Return, cst.Raise)):
                return None
            states = _run_small(index, small, states)
        return states
    if isinstance(statement, cst.If):
        then = _run_block(index, _statements(statement.body), states)
        orelse = statement.orelse
        if orelse is None:
            other = states
        elif isinstance(orelse, cst.If):
            other = _run_statement(index, orelse, states)
        else:
            other = _run_block(index, _statements(orelse.body), states)
        return (then or frozenset()) | (other or frozenset()) or None
    if isinstance(statement, (cst.For, cst.While)):
        head = _loop_head(index, statement, states)
        if statement.orelse is not None:
            return _run_block(index, _statements(statement.orelse.body), head)
        return head
    if isinstance(statement, cst.With):
        scope = index.scope_at(statement)
        if any(context_grad(index, item.item, scope) is not None for item in statement.items):
            # the context restores the state it found, unless the body never falls through
            return states if _run_block(index, _statements(statement.body), states) is not None else None
        return _run_block(index, _statements(statement.body), states)
    if isinstance(statement, cst.Try):
        body = _run_block(index, _statements(statement.body), states)
        raised = states | (body or frozenset()) | _all_states(index, statement.body)
        ends = [body if statement.orelse is None else
                _run_block(index, _statements(statement.orelse.body), body) if body else None]
        ends += [_run_block(index, _statements(handler.body), raised) for handler in statement.handlers]
        joined = frozenset().union(*(e for e in ends if e))
        if statement.finalbody is not None:
            return _run_block(index, _statements(statement.finalbody.body), joined or raised) if joined else None
        return joined or None
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return states
    # anything else (a `match`): any state a switch under it sets, or the one it found
    return states | _all_states(index, statement)


def _run_small(index, small: cst.CSTNode, states: frozenset) -> frozenset:
    for node in index.scope_nodes(small):
        if isinstance(node, cst.Call):
            value = switch_value(index, node, index.scope_at(node))
            if value is not None:
                states = frozenset({value})
    return states


def _loop_head(index, loop: cst.For | cst.While, states: frozenset) -> frozenset:
    """The states at the top of `loop`'s body: its entry joined with the end of every pass (the
    next iteration); a `break`/`continue` may leave a pass anywhere, so with one, anything a switch
    in the body sets."""
    body = _statements(loop.body)
    if _holds_switch(index, loop.body) and any(isinstance(n, (cst.Break, cst.Continue))
                                               for n in index.scope_nodes(loop.body)):
        states = states | _all_states(index, loop.body)
    for _ in range(4):
        after = _run_block(index, body, states) or frozenset()
        if after <= states:
            break
        states = states | after
    return states
