"""Where gradient recording is on or off: `no_grad`/`inference_mode`/`enable_grad` contexts and
decorators, `set_grad_enabled(flag)`, project context managers that turn recording off, the
literal True/False a call binds to a helper's flag parameter (`run_epoch(..., train=False)`), and
the legacy `Variable(x, volatile=True)` whose forwards record nothing.
"""

from __future__ import annotations

import libcst as cst

from trainlint.model import frameworks
from trainlint.model.index import FunctionInfo, Scope, keyword_arg, positional_args
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
            found = _volatile_source(index, value, scope, depth + 1) if value is not None else None
            if found is not None:
                return found
    return None


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
        expr = decorator.decorator
        if isinstance(expr, cst.Call):
            grad = context_grad(index, expr, scope)
        else:
            name = index.resolve(expr, scope)
            grad = OFF if name in GRAD_OFF_CONTEXTS else ON if name in GRAD_ON_CONTEXTS else None
            if grad is None and isinstance(expr, (cst.Name, cst.Attribute)):
                grad = _project_grad(index, expr, scope)
        if grad is not None:
            return grad
    return None


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
