"""The premises most findings share, each answered from the code (`trainlint.model.premises`).

A training loop (its backward and its optimizer step), the role of an object (what built it, its
type, how it is used; a name alone leaves the role unknown), an accumulation guard: the rules
add their own premises to these.
"""

from __future__ import annotations

import libcst as cst

from trainlint.model.index import Scope, positional_args, walk
from trainlint.model.grad_mode import switch_value, switched_grad
from trainlint.model.mode_state import OFF
from trainlint.model.premises import Premise, premise, unknown
from trainlint.model.roles import ENGINE, MODEL, OPTIMIZER, SCALER, roles
from trainlint.model.training import TrainingLoop, training_model

_ARTICLES = {"optimizer": "an optimizer", "scheduler": "an LR scheduler", "scaler": "a GradScaler",
             "model": "a model", "loader": "a DataLoader", "accelerator": "an Accelerator",
             "engine": "a training engine that owns the update"}


def code(ctx, node: cst.CSTNode, limit: int = 50) -> str:
    text = " ".join(ctx.code_for(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def role_premise(ctx, expr: cst.BaseExpression, scope: Scope, role: str, *, required: bool = True,
                 stepped_after_backward: cst.CSTNode | None = None) -> Premise:
    """`expr` plays `role`: proven by what built it (or its type, or a use), unknown when only its
    name says so. `stepped_after_backward`: the `.step()` call of `expr` that runs after a backward
    in a training loop, which proves an optimizer by its use when nothing else does."""
    what = f"`{code(ctx, expr)}` is {_ARTICLES.get(role, role)}"
    model = ctx.model(roles)
    found = model.of(expr, scope)
    source = model.source(expr, scope) if found == role else None
    if source is not None and not located(ctx, source.node):
        source = type(source)(source.kind, expr, source.how, source.proven)  # a name made up to ask about
    # a module known only by its use (`m.eval()` and `m(x)`) says less than the construction a
    # caller passes for it (`from_pretrained` of transformers: its loss a token mean): that first
    weak = source is not None and source.kind == "use" and role == MODEL
    if source is not None and source.proven and not weak:
        return premise(f"{what}: {source.how}", source.node, source.kind, required=required)
    passed = _passed_by_a_caller(ctx, expr, scope, role)
    if passed is not None:
        return premise(f"{what}: a caller passes {passed[1]}", passed[0], "argument", required=required)
    if source is not None and source.proven:
        return premise(f"{what}: {source.how}", source.node, source.kind, required=required)
    if role == OPTIMIZER and stepped_after_backward is not None:
        return premise(f"{what}: its `.step()` follows a backward in the training loop",
                       stepped_after_backward, "use", required=required)
    if source is not None:
        return unknown(f"{what}: {source.how}", source.node, source.kind, required=required)
    return unknown(f"{what}: nothing in the code shows it", expr, "construction", required=required)


def _passed_by_a_caller(ctx, expr: cst.BaseExpression, scope: Scope, role: str,
                        depth: int = 0) -> tuple[cst.CSTNode, str] | None:
    """A parameter of a function of this file, for which a caller passes an object whose role the
    code proves (`evaluate(model, DataLoader(...))`, `train(model, opt)` with `opt =
    torch.optim.SGD(...)`): the argument, and how its role is known."""
    if depth > 2:
        return None
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        # `self.sched`, set from an `__init__` parameter: what the code building the class passes
        for value in ctx.index.self_attribute_values(expr.attr.value, scope):
            found = _passed_by_a_caller(ctx, value, ctx.index.scope_at(value), role, depth + 1)
            if found is not None:
                return found
        return None
    if not isinstance(expr, cst.Name):
        return None
    bindings = scope.lookup(expr.value)
    if not bindings or bindings[-1].kind != "param":
        return None
    function = next((f for f in ctx.index.functions if f.scope is scope), None) if scope.kind == "function" else None
    if function is None:
        return None
    model = ctx.model(roles)
    sites = list(ctx.index.callers(function))
    if function.name == "__init__" and function.class_name:  # `Trainer(model, opt, sched)` builds it
        sites += [site for site in ctx.index.calls
                  if isinstance(site.node.func, cst.Name) and site.node.func.value == function.class_name]
    for site in sites:
        argument = ctx.index.argument_for(site.node, function, expr.value)
        if argument is None:
            continue
        if model.of(argument, site.scope) == role:
            source = model.source(argument, site.scope)
            if source is not None and source.proven and located(ctx, source.node):
                return argument, f"`{code(ctx, argument)}`, {source.how}"
        deeper = _passed_by_a_caller(ctx, argument, site.scope, role, depth + 1)
        if deeper is not None:
            return argument, deeper[1]
    return _passed_from_another_file(ctx, function, expr, role)


def _passed_from_another_file(ctx, function, param: cst.Name, role: str) -> tuple[cst.CSTNode, str] | None:
    """A caller in another file of the project passes, for `param`, an object that file holds in
    that role (`train_one_epoch(..., lr_scheduler, ...)` in main.py, which builds `lr_scheduler =
    OneCycleLR(...)`): located at the parameter here, naming the caller's file."""
    linker = ctx.index.linker
    if linker is None or function.class_name is not None:
        return None
    params = tuple(p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params))
    for where, call in linker.callers_by_file(function.name):
        text = call.argument(params, param.value, param.value)
        if text is not None and dict(call.state).get(text) == role:
            node = next((p for p in function.node.params.params if p.name.value == param.value), param)
            return node, f"`{text}` from {where}, where it is one"
    return None


def located(ctx, node: cst.CSTNode) -> bool:
    """`node` is part of the checked module (not one made up to ask a question with)."""
    return node is ctx.index.module or node in ctx.index.parents


def step_receiver(ctx, call: cst.Call, scope: Scope) -> cst.BaseExpression | None:
    """The optimizer a step call steps: `opt` of `opt.step()` or of `scaler.step(opt)`."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    args = positional_args(call)
    if args and ctx.model(roles).of(func.value, scope) == SCALER:
        return args[0].value
    return func.value


def loop_premises(ctx, loop: TrainingLoop | None, *, optimizer: bool = True) -> list[Premise]:
    """The loop runs a backward and steps an optimizer (and what that optimizer is)."""
    if loop is None:
        return []
    found = []
    if loop.backward_calls:
        ref = loop.backward_calls[0]
        found.append(premise("the loop runs a backward pass (gradients are computed each iteration)",
                             ref.node, "call"))
    if loop.step_calls:
        ref = loop.step_calls[0]
        found.append(premise("the loop steps the optimizer", ref.node, "call"))
        receiver = step_receiver(ctx, ref.node, ref.scope) if optimizer else None
        if receiver is not None and ctx.model(roles).of(receiver, ref.scope) == ENGINE:
            # `engine.step()`: the framework's engine steps the optimizer it holds
            found.append(role_premise(ctx, receiver, ref.scope, ENGINE))
        elif receiver is not None:
            after = ref.node if loop.backward_calls else None
            found.append(role_premise(ctx, receiver, ref.scope, OPTIMIZER, stepped_after_backward=after))
    return found


def training_premises(ctx, node: cst.CSTNode, *, optimizer: bool = True) -> list[Premise]:
    """The premises of the training loop that holds `node` (none when no training loop does)."""
    return loop_premises(ctx, ctx.model(training_model).loop_of(node), optimizer=optimizer)


def guard_premise(ctx, loop: TrainingLoop | None) -> list[Premise]:
    """Under accumulation: what makes the step run once per K micro-batches."""
    if loop is None or not loop.accumulates or loop.guard is None:
        return []
    guard = loop.guard
    shown = guard.condition if guard.condition is not None else guard.node
    if guard.kind == "micro_loop":
        text = f"the backward runs in a micro-batch loop (`for ... in {code(ctx, shown)}`) and the step after it"
    elif guard.kind == "accelerate":
        text = "the step runs inside `accelerator.accumulate(...)` with gradient accumulation on"
    elif guard.kind == "engine":
        return [premise(f"`{code(ctx, shown)}` runs on every micro-batch and steps the optimizer once per "
                        f"`{code(ctx, guard.k)}` of them (the engine's configured gradient_accumulation_steps)",
                        guard.k, "framework")]
    elif guard.kind == "continue":
        text = f"the step is skipped on micro-batches that do not end a window (`{code(ctx, shown)}`)"
    else:
        text = f"the step runs only when `{code(ctx, shown)}` holds: once per accumulation window"
    if guard.kind in ("branch", "continue") and guard.condition is not None:
        # a condition stored in a name (`do_step = (i + 1) % K == 0 or last`): the value it holds,
        # at the assignment that reaches the test (dataflow), not the name's words
        value, stored = ctx.model(training_model).stored_test(guard.condition)
        if stored is not None:
            inner = list(walk(value))
            if any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo) for n in inner) or \
                    any(isinstance(n, cst.Comparison) for n in inner):
                held = guard.condition
                while isinstance(held, cst.UnaryOperation) and isinstance(held.operator, cst.Not):
                    held = held.expression
                return [premise(f"{text}; `{code(ctx, held)}` holds `{code(ctx, value)}`", stored, "use")]
        nodes = list(walk(guard.condition))
        if any(isinstance(n, cst.Attribute) and n.attr.value in ("sync_gradients", "is_accumulating") for n in nodes):
            return [premise(text, shown, "framework")]
        if not any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo) for n in nodes) and \
                not any(isinstance(n, cst.Comparison) for n in nodes):
            # `if should_step:`: an update condition recognised by the words of its names
            return [unknown(text + " (its names say it marks the window's end)", shown, "use", required=False)]
    return [premise(text, shown, "use")]


def accumulation_premises(ctx, loop: TrainingLoop | None) -> list[Premise]:
    """The loop trains (backward, optimizer step) and accumulates: the step is guarded."""
    return loop_premises(ctx, loop) + guard_premise(ctx, loop)


def unit_premises(ctx, unit) -> list[Premise]:
    """The premises of an update unit (`trainlint.model.amp.Unit`): its loop's, or for a function
    that runs one update, its backward and its optimizer step."""
    from trainlint.model.amp import BACKWARDS, OPTIMIZER_STEPS

    if unit.loop is not None:
        return loop_premises(ctx, unit.loop)
    found = []
    backward = next(iter(unit.of_kind(*BACKWARDS)), None)
    if backward is not None:
        found.append(premise("the function runs a backward pass", backward.node, "call"))
    step = next(iter(unit.of_kind(*OPTIMIZER_STEPS)), None)
    if step is not None and isinstance(step.node, cst.Call):
        found.append(premise("the function steps the optimizer", step.node, "call"))
        receiver = step_receiver(ctx, step.node, step.scope)
        if receiver is not None:
            found.append(role_premise(ctx, receiver, step.scope, OPTIMIZER,
                                      stepped_after_backward=step.node if backward is not None else None))
    return found


def scheduler_premise(ctx, step: cst.Call, scope: Scope, *, required: bool = True) -> list[Premise]:
    """`sched.step()`: what `sched` is."""
    if not isinstance(step.func, cst.Attribute):
        return []
    return [role_premise(ctx, step.func.value, scope, "scheduler", required=required)]


def grad_off_site(ctx, node: cst.CSTNode) -> cst.CSTNode | None:
    """The `with torch.no_grad():` (or `inference_mode`, `set_grad_enabled(False)`) around `node`
    in its function, the `torch.set_grad_enabled(False)` statement that dominates it there
    (`switched_grad`), or the function's decorator that turns recording off."""
    for ancestor in ctx.index.ancestors(node):
        if isinstance(ancestor, cst.With):
            switch = _dominating_switch(ctx, node, ancestor)
            if switch is not None:
                return switch
            for item in ancestor.items:
                call = item.item
                name = ctx.code_for(call.func if isinstance(call, cst.Call) else call)
                if any(word in name for word in ("no_grad", "inference_mode", "set_grad_enabled")):
                    return item
        if isinstance(ancestor, cst.FunctionDef):
            switch = _dominating_switch(ctx, node, ancestor)
            if switch is not None:
                return switch
            for decorator in ancestor.decorators:
                if any(word in ctx.code_for(decorator.decorator) for word in ("no_grad", "inference_mode")):
                    return decorator
            return None
    return _dominating_switch(ctx, node, ctx.index.module)


def _dominating_switch(ctx, node: cst.CSTNode, region: cst.CSTNode) -> cst.Call | None:
    """The last `set_grad_enabled(False)` call before `node` in `region` when such statements
    leave recording off at `node` on every path."""
    index = ctx.index
    if switched_grad(index, node, region) != OFF:
        return None
    at = index.place.get(node, 0)
    calls = [call for call in index.calls_under(region) if index.place.get(call, at) < at
             and switch_value(index, call, index.scope_at(call)) == OFF]
    return calls[-1] if calls else None


def mode_fact_premise(ctx, fact, key: str, fallback: cst.CSTNode) -> Premise:
    """What set the module's mode (`trainlint.model.mode_state.Fact`), at that code."""
    node = fact.node if fact.node is not None else fallback
    text = ctx.code_for(fact.node).strip().splitlines()[0] if fact.node is not None else ""
    what = {"eval": "eval mode", "train": "train mode", "new": "train mode (a new module starts in it)",
            "trained": "train mode (a caller trains it before)"}.get(fact.kind, f"{fact.kind} mode")
    if fact.node is None:
        return premise(f"`{key}` comes in {what} from its callers", fallback, "call")
    kind = "construction" if isinstance(fact.node, (cst.Assign, cst.AnnAssign)) else "call"
    where = f" (in `{fact.via}()`)" if fact.via else ""
    return premise(f"`{key}` is in {what} here: `{text[:60]}`{where}", node, kind)


def evaluation_premise(ctx, modes, forward, region: cst.CSTNode | None = None) -> Premise:
    """The forward is part of an evaluation: a pass a caller runs with grad off by a literal
    argument (proven), a loop over a loader that no backward runs in (the loader's name saying it
    is a validation set is a hint, not proof: unknown), a function named as an evaluation
    (unknown). Not required: the rule's other premises carry the finding (see its docs)."""
    function = forward.function
    if forward.via is not None:
        return premise(f"`{code(ctx, forward.via)}` runs this pass with grad off: an evaluation pass",
                       forward.via, "argument", required=False)
    loop = modes.evaluation_loop_of(forward.call, function)
    if loop is not None:
        return unknown(f"the loop over `{code(ctx, loop.iter)}` is taken for an evaluation from the loader's name",
                       loop.iter, "use", required=False)
    if function is not None and modes.is_evaluation_function(function):
        return unknown(f"`{function.name}()` is taken for an evaluation from its name", function.node, "use",
                       required=False)
    measured = modes.metric_region(forward)
    if measured is not None:
        how = "compared with `==`" if isinstance(measured[1], cst.Comparison) else \
            f"handed to `{code(ctx, measured[1].func)}`"
        return premise(f"the output of `{code(ctx, forward.call)[:40]}` is {how} with grad off and no backward: "
                       "the pass measures the model", measured[1], "use", required=False)
    node = region if region is not None else forward.call
    return premise("no backward or optimizer step runs in the evaluation", node, "use", required=False)


_STATE_ROLES = {"optimizer": "optimizer", "scheduler": "scheduler", "scaler": "scaler", "model": "model"}


def state_premise(ctx, scope: Scope, kind: str, label: str, fallback: cst.CSTNode) -> Premise:
    """The run holds training state `label` (`opt`, `self.scaler`) of `kind` (optimizer, scheduler,
    scaler, step): what built it, or, for a step counter known by its name, unknown."""
    value: cst.BaseExpression | None = None
    where = scope
    if label.startswith("self."):
        values = ctx.index.self_attribute_values(label[5:], scope)
        if values:
            value, where = values[-1], ctx.index.scope_at(values[-1])
    elif label.isidentifier():
        for binding in reversed(scope.lookup(label)):
            value = binding.value if binding.value is not None and located(ctx, binding.value) else None
            if value is None and binding.kind == "param" and located(ctx, binding.node):
                value = binding.node.name if isinstance(binding.node, cst.Param) else None
            if value is not None:
                break
    if kind in _STATE_ROLES:
        if value is None:
            return unknown(f"the run has {_ARTICLES.get(kind, kind)} `{label}` (no construction of it is reached from this function)",
                           fallback, "construction", required=False)
        found = role_premise(ctx, value, where, _STATE_ROLES[kind])
        return Premise(found.text.replace(f"`{code(ctx, value)}`", f"`{label}`", 1), found.node, found.kind,
                       found.proven, found.required)
    return unknown(f"`{label}` is taken for the run's step counter from its name and how it counts",
                   value if value is not None else fallback, "use", required=False)


def loader_premise(ctx, loader: cst.BaseExpression, scope: Scope, *, required: bool = True) -> Premise:
    """`loader` (what a loop iterates) is a DataLoader: built as one, typed, or handed one."""
    return role_premise(ctx, loader, scope, "loader", required=required)
