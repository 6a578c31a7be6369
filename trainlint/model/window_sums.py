"""Whether the gradients a call reads inside an accumulation loop are a sum over the window.

Under accumulation the stepped parameters' `.grad` holds the sum of the window's micro-batches so
far, unless a clear of those parameters runs on every micro-batch (`TrainingModel.micro_batch_clears`,
the one fact of it) on the optimizer the loop steps or on a module whose parameters that optimizer
was built on: then every call sees one micro-batch's gradient, not a partial sum of the window (the
accumulation itself is broken then, which is another rule's finding). An engine (DeepSpeed) under
ZeRO stage 2 or 3 moves the gradients out of `.grad` on every backward.
"""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model import frameworks
from trainlint.model.amp import CLIP_NAMES
from trainlint.model.index import dotted_name, keyword_arg, positional_args
from trainlint.model.roles import ENGINE


def clears_stepped(training, loop, clears) -> bool:
    """Some of `clears` (calls of the loop's own clears, `TrainingModel.micro_batch_clears`) clears
    the gradients the loop steps: a clear of another optimizer (a GAN critic's) leaves the stepped
    optimizer's window summing."""
    stepped = _stepped(training, loop)
    for ref in clears:
        func = getattr(ref.node, "func", None)
        receiver = dotted_name(func.value) if isinstance(func, cst.Attribute) else None
        if receiver is None or receiver in stepped:  # `p.grad = None` and the like: not tied to one
            return True
    return False


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


def engine_stepped(training, loop):
    """The first `<engine>.step()` of the loop on an object of the engine role (DeepSpeed's
    `initialize`), or None: the engine then owns the gradients the loop's backward writes."""
    for ref in loop.step_calls:
        func = ref.node.func
        if isinstance(func, cst.Attribute) and training.roles.of(func.value, ref.scope) == ENGINE:
            return ref
    return None


def engine_zero_stage(training, ref) -> int | None:
    """The ZeRO stage the engine stepped at `ref` was configured with, read from the dict literal
    handed to its factory (`config={"zero_optimization": {"stage": 2}}`, or a name bound to one;
    no `zero_optimization` key: stage 0, DeepSpeed's default). None when the configuration is not
    in the code (a JSON file, `args`, a dict built elsewhere)."""
    index = training.index
    expr, scope = ref.node.func.value, ref.scope
    if isinstance(expr, cst.Name):
        statements = [(binding.node, scope) for binding in scope.lookup(expr.value)]
    elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self" \
            and scope.class_scope() is not None:
        statements = [(node, index.scope_at(node)) for node, _ in
                      index.unpacked_attributes.get(scope.class_scope().name, {}).get(expr.attr.value, ())]
    else:
        return None
    stages = set()
    for node, at in statements:
        if not (isinstance(node, cst.Assign) and isinstance(node.value, cst.Call)):
            return None
        entry = frameworks.factories().get(index.resolve(node.value.func, at) or "")
        if entry is None or entry.accumulation_config_keyword is None:
            return None
        config = keyword_arg(node.value, entry.accumulation_config_keyword)
        value = config.value if config is not None else None
        if isinstance(value, cst.Name):
            bound = [b.value for b in at.lookup(value.value) if b.kind == "assign"]
            value = bound[-1] if len(bound) == 1 else None
        stage = _stage_of(value)
        if stage is None:
            return None
        stages.add(stage)
    return max(stages) if stages else None


def _stage_of(config) -> int | None:
    if not isinstance(config, cst.Dict):
        return None
    zero = None
    for element in config.elements:
        if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
            return None  # `{**base, ...}`, a computed key
        if element.key.evaluated_value == "zero_optimization":
            zero = element.value
    if zero is None:
        return 0
    if not isinstance(zero, cst.Dict):
        return None
    for element in zero.elements:
        if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
            return None
        if element.key.evaluated_value == "stage":
            return int(element.value.value) if isinstance(element.value, cst.Integer) else None
    return 0


def clip_after_clear(training, loop, clear) -> bool:
    """A clip (`clip_grad_norm_`, ...) of the loop runs on every micro-batch after the clear `clear`
    (a CallRef of the loop): while the clear runs on every micro-batch the clip sees one
    micro-batch's gradient, but a fix that moves the clear into the update would leave it clipping
    a partial sum of the window (TL202)."""
    order = {id(ref.node): position for position, ref in enumerate(loop.calls)}
    at = order.get(id(clear.node))
    if at is None:
        return False
    for ref in loop.calls[at + 1:]:
        func = ref.node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if re.match(CLIP_NAMES, name) and not training.runs_per_update(loop, ref):
            return True
    return False
