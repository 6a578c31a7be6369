"""The order of gradient events in one optimizer update: backward, unscale_, clip, step, scaler
update, zero_grad and scheduler step.

The update-clock model (`trainlint.model.training`) says which loops train and which code runs once per
update. The clipping/AMP rules also need the *order* of these events and what each one is (a
scaled backward, a clip that unscales by itself, a gradient clear written as `p.grad = None`).
This module lays the events of a training loop (or of a function that runs one update by itself)
out in execution order, following same-file helpers, and answers "what happened before this".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import libcst as cst

from trainlint.model import file_facts, frameworks
from trainlint.model.file_facts import file_fact
from trainlint.model.index import Scope, iter_children, keyword_arg, positional_args, walk_expression
from trainlint.model.roles import ACCELERATOR, ENGINE, OPTIMIZER, SCALER, SCHEDULER, roles
from trainlint.model.training import CallRef, TrainingLoop, TrainingModel, training_model

# Event kinds
BACKWARD = "backward"                # loss.backward(), accelerator.backward(loss), ...
SCALED_BACKWARD = "scaled-backward"  # scaler.scale(loss).backward()
SCALE = "scale"                      # scaler.scale(loss)
UNSCALE = "unscale"                  # scaler.unscale_(opt), accelerator.unscale_gradients()
CLIP = "clip"                        # clip_grad_norm_ and friends
STEP = "step"                        # opt.step() on an optimizer
SCALER_STEP = "scaler-step"          # scaler.step(opt)
SCALER_UPDATE = "scaler-update"      # scaler.update()
ZERO_GRAD = "zero-grad"              # opt.zero_grad(), model.zero_grad(), p.grad = None, ...
SCHED_STEP = "sched-step"            # sched.step()

OPTIMIZER_STEPS = (STEP, SCALER_STEP)
BACKWARDS = (BACKWARD, SCALED_BACKWARD)

# torch's clipping functions, by qualified name (all need unscaled gradients under fp16 AMP).
CLIP_FUNCTIONS = frozenset(
    f"{module}.{name}"
    for module in ("torch.nn.utils", "torch.nn.utils.clip_grad")
    for name in ("clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "clip_grad_norm")
) | {"timm.utils.dispatch_clip_grad", "timm.utils.clip_grad.dispatch_clip_grad"}
_CLIP_NAMES = frozenset(("clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "clip_grad_norm",
                         "dispatch_clip_grad"))
# Clipping methods. Those of frameworks unscale the GradScaler's gradients themselves before
# clipping: Accelerate's `accelerator.clip_grad_norm_`/`clip_grad_value_`, Fabric's
# `fabric.clip_gradients` and a LightningModule's `self.clip_gradients` (its precision plugin
# unscales first). A model's `clip_grad_norm_` (FSDP) does not.
_CLIP_METHODS = frozenset(("clip_grad_norm_", "clip_grad_value_", "clip_gradients"))
# Every name a clip is called by (a `named` pattern for the rules' gate).
CLIP_NAMES = "^(" + "|".join(sorted(_CLIP_NAMES | _CLIP_METHODS)) + ")$"
_MAX_DEPTH = 3
_NESTED_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
# LibCST's node classes are concrete: `type(x) in` these skips ABCMeta's isinstance on every node
_NESTED_TYPES = frozenset(_NESTED_SCOPES)
_ASSIGN_TYPES = frozenset((cst.Assign, cst.AnnAssign, cst.Del))
_LOOP_TYPES = frozenset((cst.For, cst.While))
# In-place methods that clear a gradient tensor when called on `p.grad`.
_GRAD_CLEARING_METHODS = frozenset(("zero_", "fill_", "mul_", "detach_", "requires_grad_"))


@dataclass(eq=False)
class Event:
    """One gradient-relevant call or statement, where it is written and how the loop reached it."""

    kind: str
    node: cst.CSTNode
    scope: Scope
    via: tuple[cst.Call, ...] = ()
    #: source text of the object the event is about: the optimizer stepped, the scaler, the scheduler
    subject: str = ""
    #: for CLIP: the gradients must be unscaled by the caller first (False for Accelerate/Fabric/Lightning)
    needs_unscale: bool = True
    #: for steps: the call passes arguments (a closure, a metric, an epoch)
    has_args: bool = False
    #: for STEP: the receiver also runs `.backward(loss)` (a DeepSpeed-style engine owning its gradients)
    engine: bool = False
    #: for BACKWARD: the Accelerator/Fabric (created for fp16 here) whose `backward(loss)` scales the loss
    scaled_by: str = ""
    #: nested loops (inside the unit) that enclose the event, outermost first
    loops: tuple[cst.CSTNode, ...] = ()
    #: for SCALER_STEP: the call also updates the scale (Paddle's `scaler.minimize(opt, loss)`)
    updates: bool = False

    @property
    def anchor(self) -> cst.CSTNode:
        """The statement-level call in the unit itself: the event, or the first helper call to it."""
        return self.via[0] if self.via else self.node


@dataclass(eq=False)
class Unit:
    """Code that runs once per iteration of a training loop (or once per call of an update function),
    with its gradient events in execution order."""

    node: cst.CSTNode                  # the loop, or the function
    scope: Scope
    loop: TrainingLoop | None          # None for a function that runs one update by itself
    events: list[Event] = field(default_factory=list)
    #: for the end of an update split across functions (a method that clips and calls
    #: `scaler.step(opt)`, run after its callers' backward): the project file whose
    #: `scaler.scale(loss).backward()` made the gradients it receives; "" otherwise
    scaled_in: str = ""

    @property
    def cyclic(self) -> bool:
        """A loop's body repeats: what runs at its end comes before what runs at its start."""
        return self.loop is not None

    def of_kind(self, *kinds: str) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]

    def has(self, *kinds: str) -> bool:
        return any(e.kind in kinds for e in self.events)

    def before(self, event: Event) -> Iterator[Event]:
        """Events that ran before `event`, nearest first; in a loop, wrapping to the previous
        iteration's end, once around."""
        position = self.events.index(event)
        yield from reversed(self.events[:position])
        if self.cyclic:
            yield from reversed(self.events[position + 1:])

    def after(self, event: Event) -> Iterator[Event]:
        """Events that run after `event`, nearest first; in a loop, wrapping to the next iteration."""
        position = self.events.index(event)
        yield from self.events[position + 1:]
        if self.cyclic:
            yield from self.events[:position]

    def nearest_before(self, event: Event, *kinds: str) -> Event | None:
        for earlier in self.before(event):
            if earlier.kind in kinds:
                return earlier
        return None

    def nearest_after(self, event: Event, *kinds: str) -> Event | None:
        for later in self.after(event):
            if later.kind in kinds:
                return later
        return None

    def exclusive(self, index, a: Event, b: Event) -> bool:
        """`a` and `b` run on different branches of one `if` (`if scaler: scaler.scale(loss).backward()
        ... else: loss.backward(); clip(...)`): never in the same update."""
        # written in one function (reached through the same helper, or through two calls of it):
        # its `if`; else the calls in the unit that lead to them
        same = a.via == b.via or index.function_at(a.node) is index.function_at(b.node)
        x, y = (a.node, b.node) if same else (a.anchor, b.anchor)
        chain = {node: child for child, node in zip([x, *index.ancestors(x)], index.ancestors(x))}
        child = y
        for ancestor in index.ancestors(y):
            if ancestor in chain:
                if isinstance(ancestor, cst.If) and {chain[ancestor], child} == {ancestor.body, ancestor.orelse}:
                    return True
                break
            child = ancestor
        # two `if`s testing the same condition (`backward(loss, scaler)` scales when `scaler is not
        # None`; the update clips in the `else` of `if scaler is not None:`)
        theirs = _conditions(index, b)
        return any((test, not holds) in theirs for test, holds in _conditions(index, a))

    @property
    def uses_scaler(self) -> bool:
        """Backward runs on a GradScaler-scaled loss somewhere in this update (our own GradScaler,
        or the one inside an fp16 Accelerator/Fabric)."""
        return self.has(SCALED_BACKWARD) or bool(self.framework_scaler) or bool(self.scaled_in)

    @property
    def framework_scaler(self) -> str:
        """The fp16 Accelerator/Fabric whose `backward(loss)` scales the loss, or ""."""
        return next((e.scaled_by for e in self.events if e.kind == BACKWARD and e.scaled_by), "")


class AmpModel:
    """Units (training loops and stand-alone update functions) of one file, with their events."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.index = ctx.index
        self.roles = ctx.model(roles)
        self.training: TrainingModel = ctx.model(training_model)
        self.units: list[Unit] = []
        #: the step half of an update, in a function of its own (see `_build_step_functions`)
        self.step_functions: list[Unit] = []
        self._engines: set[str] | None = None
        self._named_scales: dict[tuple[int, str, int], cst.Call | None] = {}  # see _named_scale_call
        self._build()

    # -- classification ------------------------------------------------------------------------
    def engines(self) -> set[str]:
        """Receivers of `x.backward(loss)` with an argument: objects (DeepSpeed engines, custom
        wrappers) that own backward, step and gradient clearing together."""
        if self._engines is None:
            self._engines = set(file_facts.values(self.ctx, "amp.engines"))
        return self._engines

    def classify(self, call: cst.Call, scope: Scope) -> Event | None:
        func = call.func
        name = self.index.resolve(func, scope)
        if name in CLIP_FUNCTIONS:
            return Event(CLIP, call, scope)
        if isinstance(func, cst.Name):
            if name is None:
                return None
            last = name.rsplit(".", 1)[-1]
            if last in _CLIP_NAMES and name.startswith(("torch.", "timm.", ".")):
                return Event(CLIP, call, scope)
            if _clears_by_name(last) or last == "_foreach_zero_":
                return Event(ZERO_GRAD, call, scope)
            if self.training.is_backward(call, scope):
                # a function of another project file that runs a backward and steps nothing
                # (`loss = train_step(model, batch)`): its backward runs here
                return Event(BACKWARD, call, scope, subject=self.ctx.code_for(func))
            return None
        if not isinstance(func, cst.Attribute):
            return None
        attr = func.attr.value
        receiver = func.value
        if self.training.is_backward(call, scope):
            scale = self._scale_call(receiver, scope)
            if scale is not None:  # subject: the scaler
                return Event(SCALED_BACKWARD, call, scope, subject=self.ctx.code_for(scale.func.value))
            scaled_by = ""
            if attr == "backward" and positional_args(call) and self._fp16_framework(receiver, scope):
                scaled_by = self.ctx.code_for(receiver)
            return Event(BACKWARD, call, scope, subject=self.ctx.code_for(receiver), scaled_by=scaled_by)
        if _clears_by_name(attr) or self._framework_clear(receiver, attr, scope):
            return Event(ZERO_GRAD, call, scope, subject=self.ctx.code_for(receiver))
        if attr in _GRAD_CLEARING_METHODS and _mentions_grad(receiver):
            return Event(ZERO_GRAD, call, scope, subject=self.ctx.code_for(receiver))
        if name is not None and name.rsplit(".", 1)[-1] == "_foreach_zero_":
            return Event(ZERO_GRAD, call, scope)
        if attr in _CLIP_METHODS:
            role = self.roles.of(receiver, scope)
            self_unscaling = role == ACCELERATOR or (attr == "clip_gradients")
            return Event(CLIP, call, scope, subject=self.ctx.code_for(receiver),
                         needs_unscale=not self_unscaling)
        if attr in frameworks.methods("unscale"):  # `accelerator.unscale_gradients()`
            return Event(UNSCALE, call, scope, subject=self.ctx.code_for(receiver))
        if attr in frameworks.methods("scaler_step") and self.roles.of(receiver, scope) == SCALER:
            # a framework scaler's own update: unscales, steps the optimizer it is given, updates
            args = positional_args(call)
            return Event(SCALER_STEP, call, scope, subject=self.ctx.code_for(args[0].value) if args else "",
                         has_args=bool(call.args), updates=True)
        if attr not in ("step", "scale", "unscale_", "update"):
            return None
        if name is not None and self.roles.of(receiver, scope) is None:
            return None  # a module path such as `torch.optim.step`, not an object
        role = self.roles.of(receiver, scope)
        text = self.ctx.code_for(receiver)
        has_args = bool(call.args)
        if role == SCALER and self._instance_of_local_class(receiver, scope):
            return None  # a scaler wrapper of this file (timm-style NativeScaler): its methods are its own
        if role == SCALER:
            if attr == "step":
                args = positional_args(call)
                subject = self.ctx.code_for(args[0].value) if args else text
                return Event(SCALER_STEP, call, scope, subject=subject, has_args=has_args)
            kind = {"scale": SCALE, "unscale_": UNSCALE, "update": SCALER_UPDATE}[attr]
            return Event(kind, call, scope, subject=text)
        if attr != "step":
            return None
        if role == OPTIMIZER:
            return Event(STEP, call, scope, subject=text, has_args=has_args, engine=text in self.engines())
        if role == ENGINE and attr in frameworks.methods("engine_step"):
            # a framework engine's update: steps its optimizer and scheduler, clears the gradients
            return Event(STEP, call, scope, subject=text, has_args=has_args, engine=True)
        if role == SCHEDULER:
            return Event(SCHED_STEP, call, scope, subject=text, has_args=has_args)
        return None

    def _framework_clear(self, receiver: cst.BaseExpression, attr: str, scope: Scope) -> bool:
        """`tape.zero()` on `tape` built by `wp.Tape()`: a framework method that clears the gradients
        its object holds (`grad_clear` entries), asked of objects of that class only."""
        if attr not in frameworks.methods("grad_clear"):
            return False
        for value, value_scope in self._bound_values(receiver, scope):
            if isinstance(value, cst.Call):
                name = self.index.resolve(value.func, value_scope)
                entry = frameworks.lookup(f"{name}.{attr}") if name else None
                if entry is not None and entry.kind == "grad_clear":
                    return True
        return False

    def _fp16_framework(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """An Accelerator created with `mixed_precision="fp16"` or a Fabric with a 16-bit mixed
        precision, written as literals in this file: their `backward(loss)` runs a GradScaler."""
        if self.roles.of(expr, scope) != ACCELERATOR:
            return False
        for value, value_scope in self._bound_values(expr, scope):
            if not isinstance(value, cst.Call):
                continue
            name = (self.index.resolve(value.func, value_scope) or "").rsplit(".", 1)[-1]
            setting = frameworks.fp16_setting(name)  # (keyword, values) from trainlint/frameworks/
            if setting is not None:
                arg = keyword_arg(value, setting[0])
                return arg is not None and _literal(arg.value) in setting[1]
        return False

    def scheduler_arguments(self, expr: cst.BaseExpression, scope: Scope) -> set[str]:
        """The objects the scheduler `expr` was constructed on, as the code names them: the names and
        attributes passed positionally or as `optimizer=` to each construction bound to it (its
        optimizer is among them); empty when a value bound to it is not a construction."""
        found: set[str] = set()
        for value, value_scope in self._bound_values(expr, scope):
            if not isinstance(value, cst.Call):
                return set()
            arg = keyword_arg(value, "optimizer")
            args = [arg] if arg is not None else positional_args(value)
            for a in args:
                if isinstance(a.value, (cst.Name, cst.Attribute)):
                    found |= self.aliases(a.value, value_scope)
        return found

    def aliases(self, expr: cst.BaseExpression, scope: Scope) -> set[str]:
        """`expr`'s text and the texts of the names and attributes bound to it (`self.opt = opt`)."""
        found = {self.ctx.code_for(expr)}
        for value, _ in self._bound_values(expr, scope):
            if isinstance(value, (cst.Name, cst.Attribute)):
                found.add(self.ctx.code_for(value))
        return found

    def stepped_object(self, event: Event) -> cst.BaseExpression | None:
        """The optimizer a STEP or SCALER_STEP event steps (`opt.step()`, `scaler.step(opt)`)."""
        call = event.node
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
            return None
        if event.kind == STEP:
            return call.func.value
        args = positional_args(call)
        return args[0].value if args else None

    def _bound_values(self, expr: cst.BaseExpression, scope: Scope) -> list[tuple[cst.BaseExpression, Scope]]:
        """What `x` or `self.x` was assigned, with the scope each value is written in."""
        if isinstance(expr, cst.Name):
            return [(b.value, scope) for b in scope.lookup(expr.value) if b.value is not None]
        values = []
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            for attrs in self.index.class_attributes.values():
                values += [(v, self.index.scope_at(v)) for v in attrs.get(expr.attr.value, [])]
        return values

    def _instance_of_local_class(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """`x` or `self.x` bound to `SomeClass(...)` where `SomeClass` is defined in this file."""
        for value, value_scope in self._bound_values(expr, scope):
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                if any(b.kind == "class" for b in value_scope.lookup(value.func.value)):
                    return True
        return False

    def _scale_call(self, receiver: cst.BaseExpression, scope: Scope, depth: int = 0) -> cst.Call | None:
        """The `scaler.scale(...)` call that `receiver` is (or a name bound to it, or a conditional
        holding it), or None."""
        for node in walk_expression(receiver):
            if (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                    and node.func.attr.value == "scale" and self.roles.of(node.func.value, scope) == SCALER):
                return node
            if isinstance(node, cst.Name) and depth < 3:
                found = self._named_scale_call(node.value, receiver, scope, depth)
                if found is not None:
                    return found
        return None

    def _named_scale_call(self, name: str, receiver: cst.BaseExpression, scope: Scope, depth: int) -> cst.Call | None:
        """The scale call a name is bound to, once per scope, name and depth (a script's
        module-level `loss` can have thousands of bindings, and every backward asks)."""
        key = (id(scope), name, depth)
        if key not in self._named_scales:
            self._named_scales[key] = None
            for binding in scope.lookup(name):
                if binding.kind == "assign" and binding.value is not None and binding.value is not receiver:
                    found = self._scale_call(binding.value, scope, depth + 1)
                    if found is not None:
                        self._named_scales[key] = found
                        break
        return self._named_scales[key]

    # -- ordering ------------------------------------------------------------------------------
    def events_in(self, body: cst.CSTNode, scope: Scope, via: tuple[cst.Call, ...] = (),
                  loops: tuple[cst.CSTNode, ...] = (), seen: frozenset = frozenset(),
                  callees: set | None = None) -> Iterator[Event]:
        """Gradient events under `body` in execution order, entering same-file helpers where they
        are called (depth-limited), never entering nested defs, classes or lambdas."""
        # (node, enclosing loops, after_children): a call is pushed twice, so that its receiver and
        # arguments run first (`scaler.scale(loss)` before its `.backward()`), then the call itself,
        # then the body of a same-file callee; no recursion on expression depth
        stack: list[tuple[cst.CSTNode, tuple, bool]] = [(body, loops, False)]
        while stack:
            node, enclosing, after_children = stack.pop()
            if after_children:
                target = self.training.callee(node, scope)
                event = self.classify(node, scope) if target is None else None
                if event is not None:
                    event.via, event.loops = via, enclosing
                    yield event
                if target is not None and len(via) < _MAX_DEPTH and target.node not in seen:
                    if callees is not None:
                        callees.add(target.node)
                    yield from self.events_in(target.node.body, target.scope, via + (node,), enclosing,
                                              seen | {target.node}, callees)
                continue
            kind = type(node)
            if node is not body and kind in _NESTED_TYPES:
                continue
            if kind is cst.Call:
                stack.append((node, enclosing, True))
            elif kind in _ASSIGN_TYPES:
                for target_expr in _assigned_targets(node):
                    if isinstance(target_expr, cst.Attribute) and target_expr.attr.value == "grad":
                        yield Event(ZERO_GRAD, node, scope, via, subject=self.ctx.code_for(target_expr),
                                    loops=enclosing)
                        break
            inner_loops = enclosing + (node,) if node is not body and kind in _LOOP_TYPES else enclosing
            for child in reversed(iter_children(node)):
                stack.append((child, inner_loops, False))

    # -- building ------------------------------------------------------------------------------
    def _build(self) -> None:
        reached: set = set()
        loop_nodes = set()
        training_loops = {tl.node for tl in self.training.loops}
        for tl in self.training.loops:
            events = list(self.events_in(tl.node.body, tl.scope, callees=reached))
            if not tl.innermost:
                # an outer loop (epochs, or a sweep calling two training functions in turn): the
                # events of the training loops it runs belong to their own units, not to one update
                events = [e for e in events if not (set(e.loops) & (training_loops - {tl.node}))]
            self.units.append(Unit(tl.node, tl.scope, tl, events))
            loop_nodes.add(tl.node)
        candidates = self._may_run_an_update()
        holding_loops = {id(self.index.function_at(loop)) for loop in loop_nodes}
        for function in self.index.functions:
            if function.node in reached or function.node not in candidates:
                continue
            if id(function) in holding_loops:
                continue
            events = list(self.events_in(function.node.body, function.scope))
            # one update per call: it steps outside any loop, and no training loop runs inside it
            # (a `main()` that calls the functions holding the loops is not an update)
            if any(set(e.loops) & loop_nodes for e in events):
                continue
            if any(e.kind in BACKWARDS for e in events) and \
                    any(e.kind in OPTIMIZER_STEPS and not e.loops for e in events):
                self.units.append(Unit(function.node, function.scope, None, events))
        self._build_step_functions(reached, candidates, holding_loops)
        # a helper that a unit already reaches (`train_step` runs the backward, then calls
        # `self.optimizer_step()`) belongs to that unit's update, not to one of its own
        helpers = {self.index.function_at(e.node) for unit in self.units for e in unit.events if e.via}
        self._build_update_ends(reached | {unit.node for unit in self.units} |
                                {helper.node for helper in helpers if helper is not None}, holding_loops)

    def _build_step_functions(self, reached: set, candidates: set, holding_loops: set) -> None:
        """Functions that run the step half of one update for a caller that runs the backward
        (`OptimizerScheduler.step()`: `self.scheduler.step(); self.optimizer.step()`): no backward,
        no loop around their steps, an optimizer step and a scheduler step."""
        stepping: dict = {}
        for site in self.index.calls:
            func = site.node.func
            if site.function is not None and type(func) is cst.Attribute and func.attr.value == "step":
                stepping[site.function.node] = stepping.get(site.function.node, 0) + 1
        for function in self.index.functions:
            node = function.node
            if stepping.get(node, 0) < 2 or node in reached or node in candidates or id(function) in holding_loops:
                continue
            events = list(self.events_in(node.body, function.scope))
            if any(e.kind in BACKWARDS or e.loops for e in events):
                continue
            if any(e.kind == STEP and not e.engine for e in events) and any(e.kind == SCHED_STEP for e in events):
                self.step_functions.append(Unit(node, function.scope, None, events))

    def _build_update_ends(self, covered: set, holding_loops: set) -> None:
        """Functions that end an update whose backward runs elsewhere: `scaler.step(opt)` outside
        any loop, no backward in reach (an `Updater.step(grad_scaler)` that the engine calls after
        `grad_scaler.scale(loss).backward()`). `scaler.step` unscales the gradients it is handed
        unless `unscale_` ran first, so they arrive scaled; what the callers do is read from the
        project's files: one scales a loss (`.scale(`), none unscales (`unscale_`). A same-file
        caller's loop already holds the function in its own unit (`covered`)."""
        owners = {id(site.function) for site in self.index.calls
                  if site.function is not None and isinstance(site.node.func, cst.Attribute)
                  and site.node.func.attr.value == "step" and positional_args(site.node)}
        scaled_in = None
        for function in self.index.functions:
            if id(function) not in owners or function.node in covered or id(function) in holding_loops:
                continue
            events = list(self.events_in(function.node.body, function.scope))
            if not any(e.kind == SCALER_STEP and not e.loops for e in events) or \
                    any(e.kind in BACKWARDS or e.kind == UNSCALE for e in events):
                continue
            if scaled_in is None:
                scaled_in = self._scaled_elsewhere()
            if scaled_in:
                self.units.append(Unit(function.node, function.scope, None, events, scaled_in=scaled_in))

    def _scaled_elsewhere(self) -> str:
        """The project file (relative path) where a loss is scaled (`.scale(`), when one is, a
        backward runs, and no file of the update's part of the project unscales gradients; else ""."""
        linker = self.index.linker
        unscales = ("unscale_", *frameworks.methods("unscale"))
        if linker is None or linker.files_mentioning(*unscales) != []:
            return ""  # checked alone (callers unknown), or some caller may unscale first
        # the scale and the backward can sit apart too (`forward()` returns `scaler.scale(loss)`,
        # the script runs `loss.backward()`)
        if not linker.files_mentioning(".backward("):
            return ""
        return next(iter(linker.files_mentioning(".scale(") or ()), "")


    def _may_run_an_update(self) -> set:
        """Functions that reach (themselves or through same-file helpers, as deep as `events_in`
        goes) both a `.backward(...)` and a `.step(...)` call: a cheap filter before walking them."""
        direct: dict = {}
        callees: dict = {}
        for site in self.index.calls:
            if site.function is None:
                continue
            key = site.function.node
            flags = direct.setdefault(key, [False, False])
            func = site.node.func
            if isinstance(func, cst.Attribute):
                if func.attr.value in frameworks.backward_methods():
                    flags[0] = True
                elif func.attr.value == "step":
                    flags[1] = True
            target = self.training.callee(site.node, site.scope)
            if target is not None:
                callees.setdefault(key, set()).add(target.node)

        def reach(node, depth: int, seen: frozenset) -> tuple[bool, bool]:
            backward, step = direct.get(node, (False, False))
            if depth < _MAX_DEPTH:
                for callee in callees.get(node, ()):
                    if callee not in seen:
                        b, s = reach(callee, depth + 1, seen | {callee})
                        backward, step = backward or b, step or s
            return backward, step

        return {node for node in direct if all(reach(node, 0, frozenset((node,))))}


def _conditions(index, event: Event) -> set[tuple[str, bool]]:
    """The `if` tests that hold (True) or fail (False) where the event runs, in its function and at
    the calls leading to it, as normalised text: `not x` is `x` failing, `x is None` is
    `x is not None` failing."""
    found: set[tuple[str, bool]] = set()
    for node in (event.node, *event.via):
        child = node
        for ancestor in index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            if isinstance(ancestor, cst.If) and child is not ancestor.test:
                test, holds = _normalised(ancestor.test)
                found.add((test, holds if child is ancestor.body else not holds))
            child = ancestor
    return found


def _normalised(test: cst.BaseExpression) -> tuple[str, bool]:
    holds = True
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, holds = test.expression, not holds
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
            isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None":
        operator = test.comparisons[0].operator
        if isinstance(operator, cst.IsNot):
            return _code(test.left), holds
        if isinstance(operator, cst.Is):
            return _code(test.left), not holds
    return _code(test), holds


def _code(expr: cst.BaseExpression) -> str:
    return cst.Module(body=[]).code_for_node(expr)


def amp_model(ctx) -> AmpModel:
    """The file's gradient-event model, shared by the clipping/AMP rules: `ctx.model(amp_model)`."""
    return AmpModel(ctx)


def _clears_by_name(name: str) -> bool:
    """`zero_grad`, `zero_grads`, `_zero_grad`, `clear_grad(s)`, `clear_gradients`, `reset_grads`."""
    lowered = name.lower()
    return "zero_grad" in lowered or lowered.lstrip("_").startswith(("clear_grad", "reset_grad"))


def _literal(expr: cst.BaseExpression):
    """The value of a string or integer literal, else None."""
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value
    if isinstance(expr, cst.Integer):
        return int(expr.value)
    return None


def _mentions_grad(expr: cst.BaseExpression) -> bool:
    """`p.grad`, `p.grad.data`, `param.grad[idx]`: an expression reading a `.grad` attribute."""
    current = expr
    while True:
        if isinstance(current, cst.Attribute):
            if current.attr.value == "grad":
                return True
            current = current.value
        elif isinstance(current, cst.Subscript):
            current = current.value
        else:
            return False


def _assigned_targets(node: cst.CSTNode) -> Iterator[cst.BaseExpression]:
    if isinstance(node, cst.Assign):
        for target in node.targets:
            yield from _flatten(target.target)
    elif isinstance(node, cst.AnnAssign):
        yield node.target
    elif isinstance(node, cst.Del):
        yield from _flatten(node.target)


def _flatten(target: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _flatten(element.value)
    else:
        yield target


def measures_only(clip: Event) -> bool:
    """`clip_grad_norm_(params, float("inf"))`: computes the total norm (for logging) and clips
    nothing."""
    call = clip.node
    if not isinstance(call, cst.Call):
        return False
    threshold = keyword_arg(call, "max_norm") or keyword_arg(call, "clip_value")
    if threshold is None:
        args = positional_args(call)
        index = 0 if isinstance(call.func, cst.Attribute) and call.func.attr.value == "clip_grad_norm_" \
            and len(args) == 1 else 1
        threshold = args[index] if len(args) > index else None
    if threshold is None:
        return False
    value = threshold.value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "float":
        inner = positional_args(value)
        return bool(inner) and isinstance(inner[0].value, cst.SimpleString) and \
            inner[0].value.evaluated_value.strip().lower() in ("inf", "+inf", "infinity")
    return isinstance(value, cst.Attribute) and value.attr.value == "inf"


def describe(node: cst.CSTNode, ctx, limit: int = 60) -> str:
    """Short source text of a node for messages (`clip_grad_norm_(model.parameters(), 1.0)`)."""
    text = " ".join(ctx.code_for(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def per_update(model: AmpModel, unit: Unit, event: Event) -> bool:
    """The event runs once per optimizer update (always true outside accumulation, and for an update
    function, which is one update by construction)."""
    if unit.loop is None:
        return True
    return model.training.runs_per_update(unit.loop, CallRef(event.node, event.scope, event.via))


@file_fact("amp.engines")
def _engine_facts(ctx) -> Iterator[tuple[cst.CSTNode, str]]:
    """The receiver of each `x.backward(loss)` with an argument (see `AmpModel.engines`)."""
    for site in ctx.index.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "backward" and positional_args(site.node):
            yield site.node, ctx.code_for(func.value)
