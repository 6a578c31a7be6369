"""The model of a training loop, built once per file and queried by rules.

A training loop is a `for`/`while` whose body, directly or through a function or method of the
same file that it calls, runs a backward and an optimizer step.

Public API (stable; other rules depend on it)
---------------------------------------------
`ctx.model(training_model)` -> `TrainingModel`

`TrainingModel.loops: list[TrainingLoop]`, each with
  - `node` (the `for`/`while`), `function` (`FunctionInfo` or None), `scope`;
  - `backward_calls`, `step_calls`: `CallRef`s of backward calls / optimizer steps;
  - `calls`: every `CallRef` reached from the body, in statement order, helpers inlined at the
    call that runs them (calls inside nested training loops included; see `own_calls`);
  - `innermost`: no training loop runs inside this one (syntactically or through a helper);
  - `accumulates: bool`: under accumulation, i.e. the backward runs on every iteration while the
    optimizer step is guarded (or the backward runs in a nested micro-batch loop);
  - `guard: Guard | None`: what makes the optimizer step run once per update.
  Only innermost loops get a guard; outer loops (an epoch loop around the batch loop) have
  `accumulates == False` and `guard is None`.

`Guard(node, kind, condition, k, scope, via, branch)`:
  - kind "branch":     `if <update condition>:` whose branch holds the step, e.g.
                       `if (i + 1) % K == 0:`, `if (it + 1) % grad_accum == 0 or is_last_batch:`,
                       `if micro_step == accumulation_steps - 1:`, `if accelerator.sync_gradients:`,
                       or, whatever the names, `if n == K:` where `n += 1` runs in the loop and the
                       branch sets `n = 0` (a window counter);
                       `node` is the `If`, `condition` its test, `branch` the block holding the
                       update (the body, or the `else` of `if micro % K: ... else: opt.step()`).
  - kind "continue":   `if <not-update condition>: continue` (or `return` inside a helper) before
                       the step, e.g. `if micro % K: continue`, `if step % accum != 0: continue`;
                       the update is what follows the `If` in its block.
  - kind "accelerate": `with accelerator.accumulate(model):` holding the step, on an Accelerator
                       created with `gradient_accumulation_steps` (or not created in this file);
                       `node` is the `With`.
  - kind "micro_loop": the backward runs in a nested loop over micro-batches and the step after it
                       (`for micro_step in range(K): ... loss.backward()` then `opt.step()`);
                       `node` is the nested loop, `condition` its iterable. The nested loop is
                       known by its names (`micro_batches`, `range(grad_accum)`), or, whatever they
                       are, by walking one drawn item (a target of a `for` around it or around the
                       call that runs its helper, or a `next(...)` passed to it) whose elements a
                       call in its body takes in. Not a retry loop
                       (`while n: try: <backward> except OOM: n //= 2 else: break`): it repeats
                       only after a failure, so nothing adds up across its iterations.
  - kind "engine":     a framework engine owns accumulation: `engine.backward(loss)` and `engine.step()`
                       on every micro-batch, the engine (DeepSpeed's, by its factory's resolved
                       import: trainlint/frameworks/deepspeed.toml) configured with K > 1 in the dict
                       literal its factory is handed; `node` is the engine's step call, `k` the
                       config's value. Only its own step runs once per update; everything else of
                       the iteration runs per micro-batch unless a boundary test guards it.
  - `k`: the accumulation factor expression when it can be told (`grad_accum`, `self.accum`, `4`,
    the Accelerator's `gradient_accumulation_steps=` value), else None.
  - `scope`/`via`: where the guard node is written and the helper chain from the loop body to it.

`TrainingModel.window_functions: list[TrainingLoop]`: functions that are one accumulation window or
  one micro-batch of it, with the loop that drives them not in this file: the backward runs in a
  micro-batch loop and the step after it (`def update_window(model, opt, batches): for ...:
  loss.backward()` then `opt.step()`), or the step is guarded (`def train_step(batch, i): ...
  loss.backward(); if (i + 1) % K == 0: opt.step()`). Their `node` is the `FunctionDef`; they
  always accumulate and are innermost; they are not in `loops` (which holds only real loops) and
  only exist when no training loop of the file covers their backward. All queries below accept them.

`TrainingModel.runs_per_update(loop, node_or_ref) -> bool`: the node (a call of `loop.calls` or its
  `CallRef`, or any node written in the loop body) runs once per optimizer update: the loop does not
  accumulate; or the node is inside the guarded branch / after the continue guard / outside the
  micro-batch loop; or it sits on the boundary side of another update-looking condition that does
  not hold the backward (`if i % K == 0: opt.zero_grad()`, but not `if i % K: ...`); or, under Accelerate accumulation, it is
  `.step()`/`.zero_grad()` of an optimizer or scheduler that `accelerator.prepare` wrapped (Accelerate
  skips those on non-sync micro-batches) or inside `if accelerator.sync_gradients:`.
  For an outer (non-innermost) loop, nodes inside an inner training loop are answered for that
  loop; other nodes run on a slower clock (per epoch) and get False.

`TrainingModel.update_calls(loop) -> list[CallRef]`: the calls that run once per update, in
  statement order (for a loop without accumulation: every call of the iteration).

`TrainingModel.window_clears(loop) -> list[WindowClear]`: the order within the update window: the
  clears that run only on the window's last micro-batch (under the step's `if`, after its
  `continue` guard, under a test reading the same condition through a stored variable; under
  Accelerate, a prepared optimizer's clear inside `accumulate` or one under `if
  accelerator.sync_gradients:`) and lose the window: before that micro-batch's backward
  ("before_last_backward") or between the backward and the step ("before_step").
  `condition_key(test)` / `stored_test(test)` / `boundary_polarity(test)`: a test read through the
  assignment that stores it (`do_step = (i + 1) % K == 0`), never through the name's words.

`TrainingModel.after_training(node) -> bool`: training is over when `node` runs: it is in no loop
  of its function (or module), a statement before it in the same body runs a training loop (written
  there, or in a same-file function it calls), and its function (if any) is called in this file,
  never in a loop.
  (`for epoch ...: train` then `torch.save(model.state_dict(), "model.ckpt")`: a final export.)

`TrainingModel.accelerate_accumulation(loop) -> AccelerateAccumulation | None`: Accelerate
  semantics for the loop: present when a `with <accelerator>.accumulate(...)` block in the loop holds
  the backward and the Accelerator is not known to be created without `gradient_accumulation_steps`
  (an Accelerator created without it is judged like plain PyTorch: None). Fields: `with_node`,
  `accelerator` (expr), `k` (expr or None), and `is_prepared(expr, scope) -> bool | None`
  (the object was passed through `accelerator.prepare`: True/False, None when it cannot be told).

`TrainingModel.accelerator_k(expr, scope) -> (known, k)`: the `gradient_accumulation_steps` an
  Accelerator was created with; `accelerator.backward(loss)` divides by it.

Also: `is_backward` (a same-file method that happens to be named `backward` is a helper, not a
backward; a framework object's train step is one: `is_train_step`, `schedule.step(x)` of a
torch.distributed.pipelining schedule, known by its construction, and `train_step_construction`
gives that construction), `is_optimizer_step`, `is_scheduler_step`, `is_zero_grad`, `callee`,
`reachable_calls`, `path(loop, ref)`, `own_calls(loop)`, `loop_of(node)`; module function `calls_in`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterator

import libcst as cst

from trainlint.gate import Gate, named, reference_text, refers_to
from trainlint.model.index import (FileIndex, FunctionInfo, Scope, iter_children, keyword_arg, positional_args, walk,
                                   walk_scope)
from trainlint.model import frameworks
from trainlint.model.iterations import fixed_setting, same_on_every_iteration
from trainlint.model.roles import ACCELERATOR, ENGINE, OPTIMIZER, SCALER, SCHEDULER, roles

_MAX_CALL_DEPTH = 3
_LOOPS = (cst.For, cst.While)

# Identifiers that make a condition read as "this micro-batch ends an accumulation window".
_UPDATE_WORDS = re.compile(
    r"accum|sync_grad|micro|grad_acc|update_freq|(^|_)(should|do|is|needs?)_?(step|update|sync|optim)"
    r"|optimizer_step|update_step|step_now|last_micro|boundary", re.I)
_COUNTER_COMPARE = (cst.Equal, cst.NotEqual, cst.GreaterThanEqual, cst.GreaterThan)
_BACKWARD_CALL: list[re.Pattern[str]] = []


def _calls_a_backward() -> re.Pattern[str]:
    """A text that may call a backward method (`.backward(`, `.manual_backward(`; framework data),
    spaces and line continuations allowed between the parts: a file without one holds no
    function whose summary is `backward_only`."""
    if not _BACKWARD_CALL:
        names = "|".join(sorted(map(re.escape, frameworks.backward_methods())))
        _BACKWARD_CALL.append(re.compile(rf"\.[\s\\]*(?:{names})[\s\\]*\("))
    return _BACKWARD_CALL[0]


# The framework classes whose train step runs the backward of its micro-batches itself
# (torch.distributed.pipelining's schedules: trainlint/frameworks/pipelining.toml), by every spelling.
TRAIN_STEP_CLASSES = tuple(sorted(frameworks.micro_batch_runners()))
#: A gate term for "the file may run a backward": the word (`loss.backward()`,
#: `accelerator.backward(loss)`), or a reference to a class whose train step runs one
#: (`schedule.step(x)` of a `ScheduleGPipe`). Rules whose findings need a training loop use it.
RUNS_BACKWARD: Gate = named("backward") | refers_to(*TRAIN_STEP_CLASSES)


def backward_triggers(*triggers) -> tuple:
    """A rule's text triggers, each one that needs the word "backward" also given with a reference
    to a class whose train step runs the backward instead (the text side of `RUNS_BACKWARD`)."""
    train_step = reference_text(*TRAIN_STEP_CLASSES)
    extra = []
    for trigger in triggers:
        words = trigger if isinstance(trigger, tuple) else (trigger,)
        if "backward" in words:
            extra.append(tuple(train_step if word == "backward" else word for word in words))
    return (*triggers, *extra)


def calls_in(node: cst.CSTNode) -> Iterator[cst.Call]:
    """Calls under `node` in source order, not descending into nested defs, classes or lambdas
    (`FileIndex.calls_under` looks the same calls up for a node of the index's module)."""
    return (n for n in walk_scope(node) if type(n) is cst.Call)  # `type(...) is` skips ABCMeta


@dataclass(eq=False)
class CallRef:
    """A call reached from a loop, with the scope it is written in and the helper chain that led
    there (empty when the call is in the loop body itself)."""

    node: cst.Call
    scope: Scope
    via: tuple[cst.Call, ...] = ()

    @property
    def anchor(self) -> cst.Call:
        """The call in the loop body itself: the call, or the first helper call leading to it."""
        return self.via[0] if self.via else self.node


@dataclass(eq=False)
class Guard:
    """What makes the optimizer step run once per update (see the module docstring)."""

    node: cst.CSTNode
    kind: str  # branch | continue | accelerate | micro_loop | engine
    condition: cst.BaseExpression | None = None
    k: cst.BaseExpression | None = None
    scope: Scope | None = None
    via: tuple[cst.Call, ...] = ()
    #: for "branch": the block that holds the update (the `if` body, or its `else` for
    #: `if micro % K: ... else: opt.step()`)
    branch: cst.CSTNode | None = None
    #: for "branch": the same test guarding the same update on another path, as (`if`, block)
    #: (`if use_amp: ... if i % K == 0: scaler.step(opt)` / `else: ... if i % K == 0: opt.step()`)
    equivalents: tuple[tuple[cst.CSTNode, cst.CSTNode], ...] = ()


@dataclass(eq=False)
class TrainingLoop:
    node: cst.For | cst.While | cst.FunctionDef  # a FunctionDef only for `window_functions`
    function: FunctionInfo | None
    scope: Scope
    backward_calls: list[CallRef] = field(default_factory=list)
    step_calls: list[CallRef] = field(default_factory=list)
    #: True when no training loop runs inside this one (nested or through a helper)
    innermost: bool = True
    #: every call reached from the body, in statement order
    calls: list[CallRef] = field(default_factory=list)
    #: backward every iteration while the step is guarded (or a nested micro-batch loop)
    accumulates: bool = False
    guard: Guard | None = None

    @property
    def k(self) -> cst.BaseExpression | None:
        """The accumulation factor expression, when known."""
        return self.guard.k if self.guard else None


@dataclass(eq=False)
class WindowClear:
    """A clear that loses the window's gradients (`TrainingModel.window_clears`): `where` is
    "before_last_backward" (`backward` runs after `clear`, then `step`) or "before_step" (`backward`
    ran before `clear`, `step` after it, no backward between)."""

    clear: CallRef
    backward: CallRef
    step: CallRef
    where: str


@dataclass(eq=False)
class AccelerateAccumulation:
    """A `with accelerator.accumulate(...)` block that Accelerate turns into accumulation."""

    with_node: cst.With
    accelerator: cst.BaseExpression
    scope: Scope
    k: cst.BaseExpression | None
    model: "TrainingModel"

    def is_prepared(self, expr: cst.BaseExpression, scope: Scope) -> bool | None:
        return self.model.is_prepared(expr, scope)


class TrainingModel:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self._micro_clears: dict[int, tuple] = {}
        self.index: FileIndex = ctx.index
        self.roles = ctx.model(roles)
        self.loops: list[TrainingLoop] = []
        self._by_node: dict[cst.CSTNode, TrainingLoop] | None = None
        self.window_functions: list[TrainingLoop] = []
        self._accelerate: dict[int, AccelerateAccumulation | None] = {}
        self._prepared: dict[str, list[tuple[cst.Assign, Scope]]] | None = None
        self._list_passed: list[tuple[str, Scope]] | None = None
        # `_runs_training` is asked per save and per later statement: each statement is walked once
        self._runs_training_memo: dict[int, tuple[cst.CSTNode, bool]] = {}
        self._statement_tables: dict[int, tuple] = {}  # owner -> (owner, positions, trains_from): see trains_after
        self._trained_functions: set[cst.CSTNode] | None = None
        self._project_backwards: dict[int, bool] = {}  # call id -> `_project_backward`
        self._build()

    # -- classification of calls -----------------------------------------------------------------
    def is_backward(self, call: cst.Call, scope: Scope) -> bool:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in frameworks.backward_methods():
            # `self.backward(loss)` running a method of this file is a helper, not a backward:
            # the backward inside it is reached through it
            return self.callee(call, scope) is None and not self._result_read(call)
        if self.is_train_step(call, scope):
            return True
        name = self.index.resolve(func, scope)
        if name == "torch.autograd.backward":
            return True
        return name is not None and self._project_backward(call, scope)

    def is_train_step(self, call: cst.Call, scope: Scope) -> bool:
        """`schedule.step(x)` of an object a framework class built to run the forward and the
        backward of every micro-batch of the batch it is handed (a torch.distributed.pipelining
        schedule, by its construction: framework data): a backward, not an optimizer's step."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return False
        runners = frameworks.train_steps().get(func.attr.value)
        return runners is not None and self.roles.of(func.value, scope) in runners

    def train_step_construction(self, call: cst.Call, scope: Scope):
        """(entry, the construction call, its scope) of the framework object whose train step `call`
        runs (`ScheduleGPipe(stage, n_microbatches=8, loss_fn=loss_fn)` for `schedule.step(x)`),
        when the role model found it built by that class; else None."""
        if not self.is_train_step(call, scope):
            return None
        source = self.roles.source(call.func.value, scope)
        node = source.node if source is not None else None
        if not isinstance(node, cst.Call):
            return None
        node_scope = self.index.scope_at(node)
        entry = frameworks.micro_batch_runners().get(self.index.resolve(node.func, node_scope) or "")
        return (entry, node, node_scope) if entry is not None else None

    def _result_read(self, call: cst.Call) -> bool:
        """The call's result is read as a value (`flow.backward(z).clamp(-1, 1)`, `net.backward(y)[0]`,
        `inv.backward(y) * s`): autograd's backward (and the frameworks') returns None, so this is a
        method of the project's own (a normalizing flow's inverse pass), not a backward."""
        parent = self.index.parent(call)
        if isinstance(parent, cst.Attribute) and parent.value is call:
            return True
        if isinstance(parent, cst.Subscript) and parent.value is call:
            return True
        return isinstance(parent, cst.BinaryOperation)

    def _project_backward(self, call: cst.Call, scope: Scope) -> bool:
        """`backward_step(model, batch, k)` imported from another file of the project, which runs a
        backward and steps nothing (its summary's `backward_only`): the micro-batch half of an
        update split across files, a backward where the caller's loop runs it."""
        if self.index.linker is None or self.callee(call, scope) is not None:
            return False
        found = self._project_backwards.get(id(call))
        if found is None:
            # (the file must call a backward method: most files that say "backward" do not)
            summary = self.index.summary_of(call.func, scope, words=(_calls_a_backward(),))
            found = self._project_backwards[id(call)] = bool(getattr(summary, "backward_only", False))
        return found

    def is_optimizer_step(self, call: cst.Call, scope: Scope) -> bool:
        """`opt.step()` on an optimizer, or `scaler.step(opt)`."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "step"):
            return False
        receiver = func.value
        if isinstance(receiver, cst.Name) and receiver.value in ("self", "cls"):
            return False
        role = self.roles.of(receiver, scope)
        if role in (OPTIMIZER, SCALER):
            return True
        if role == ENGINE:  # `engine.step()`: the framework's update (trainlint/frameworks/*.toml)
            return "step" in frameworks.methods("engine_step")
        # nothing known about the receiver: a bare `.step()` (or with a closure) that is not a
        # scheduler's and not an environment's `env.step(action)`
        return role is None and len(positional_args(call)) == 0 and not call.args

    def is_scheduler_step(self, call: cst.Call, scope: Scope) -> bool:
        func = call.func
        return (isinstance(func, cst.Attribute) and func.attr.value == "step"
                and self.roles.of(func.value, scope) == SCHEDULER)

    def is_zero_grad(self, call: cst.Call, scope: Scope) -> bool:
        """`opt.zero_grad(...)` / `model.zero_grad(...)` (any receiver but a scheduler or scaler)."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "zero_grad"):
            return False
        return self.roles.of(func.value, scope) not in (SCHEDULER, SCALER)

    # -- same-file helpers -------------------------------------------------------------------------
    def callee(self, call: cst.Call, scope: Scope) -> FunctionInfo | None:
        """The function or method of this file that `call` runs (`FileIndex.callee`)."""
        return self.index.callee(call, scope)

    def reachable_calls(self, node: cst.CSTNode, scope: Scope, via: tuple[cst.Call, ...] = (),
                        seen: frozenset = frozenset()) -> Iterator[CallRef]:
        """Calls under `node`, then the calls inside same-file helpers it calls (depth-limited).

        A call back into a function that encloses `node` (recursion) is a cycle, not followed:
        its calls are those already being listed."""
        if not via:
            seen = seen | {a for a in self.index.ancestors(node) if isinstance(a, cst.FunctionDef)}
        for call in self.index.calls_under(node):
            yield CallRef(call, scope, via)
            if len(via) >= _MAX_CALL_DEPTH:
                continue
            target = self.callee(call, scope)
            if target is not None and target.node not in seen and target.node is not node:
                yield from self.reachable_calls(target.node.body, target.scope, via + (call,),
                                                seen | {target.node})

    # -- structure of a call's position --------------------------------------------------------------
    def path(self, loop: TrainingLoop, ref: CallRef | cst.CSTNode) -> list[list[cst.CSTNode]]:
        """For each segment of the way from the loop body to the node (the loop body, then each
        helper's body), the ancestors of the segment's node up to the loop or the helper's def,
        innermost first, the segment's node itself included."""
        node, via = (ref.node, ref.via) if isinstance(ref, CallRef) else (ref, ())
        segments = []
        for position, element in enumerate(via + (node,)):
            stop = loop.node if position == 0 else None
            chain = [element]
            for ancestor in self.index.ancestors(element):
                if ancestor is stop or (stop is None and isinstance(ancestor, cst.FunctionDef)):
                    break
                chain.append(ancestor)
            segments.append(chain)
        return segments

    def loop_of(self, node: cst.CSTNode) -> TrainingLoop | None:
        """The innermost training loop whose body holds `node` syntactically."""
        by_node = self._loops_by_node()
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, _LOOPS) and ancestor in by_node:
                return by_node[ancestor]
        return None

    def _loops_by_node(self) -> dict[cst.CSTNode, TrainingLoop]:
        """`loops` by their node, built once (and again only if loops were added since): a
        lookup per call must not rebuild it, or a file of many loops takes quadratic time."""
        if self._by_node is None or len(self._by_node) != len(self.loops):
            self._by_node = {tl.node: tl for tl in self.loops}
        return self._by_node

    def micro_batch_clears(self, loop: TrainingLoop) -> list[CallRef]:
        """The clears of the gradients among the loop's own calls (`opt.zero_grad()`) that run on
        every micro-batch of an accumulating loop, not only at the update: outside a handler of a
        failed micro-batch (`except OutOfMemoryError:`), with nothing keeping the gradients aside
        across them (a copy before and a write-back after, before the step). With one, `.grad` holds
        one micro-batch's gradient at a time, never a window's partial sum: TL104 reports the clear,
        and the rules whose premise is a partial sum of the window (TL202's clip) read it too."""
        if not (loop.innermost and loop.accumulates):
            return []
        key = id(loop)
        cached = self._micro_clears.get(key)
        if cached is not None and cached[0] is loop:
            return cached[1]
        order = {id(ref.node): position for position, ref in enumerate(loop.calls)}
        first_step = min((order.get(id(r.node), -1) for r in loop.step_calls), default=-1)
        found = [ref for ref in self.own_calls(loop)
                 if self.is_zero_grad(ref.node, ref.scope) and not self.runs_per_update(loop, ref)
                 and self.failure_handler(loop, ref) is None
                 and not _kept_aside(self.ctx, loop, ref, order, first_step)]
        self._micro_clears[key] = (loop, found)
        return found

    def own_calls(self, loop: TrainingLoop) -> list[CallRef]:
        """The loop's calls that are not inside a training loop nested in it."""
        return [ref for ref in loop.calls if self._inner_loop(loop, ref) is None]

    def _inner_loop(self, loop: TrainingLoop, ref: CallRef | cst.CSTNode) -> TrainingLoop | None:
        by_node = self._loops_by_node()
        if len(by_node) < 2:
            return None
        for segment in self.path(loop, ref):
            for node in segment:
                other = by_node.get(node)
                if other is not None and other is not loop:
                    return other
        return None

    # -- the update guard ----------------------------------------------------------------------------
    def _find_guard(self, loop: TrainingLoop) -> Guard | None:
        steps = [ref for ref in loop.step_calls if self._inner_loop(loop, ref) is None]
        backwards = [ref for ref in loop.backward_calls if self._inner_loop(loop, ref) is None]
        if not steps or not backwards:
            return None
        step = steps[0]
        guard = self._guard_around(loop, step)
        if guard is not None:
            if guard.kind == "accelerate":
                return guard
            if guard.kind == "branch":
                guard.equivalents = self._equivalent_guards(loop, guard, steps)
            # another optimizer stepping on every iteration (a GAN's critic) is not accumulation
            if any(not self._under_guard(loop, ref, guard) for ref in steps):
                return None
            if any(not self._under_guard(loop, ref, guard) for ref in backwards):
                return guard
            return None
        # the backward in a nested (non-training) loop, the step outside it
        for ref in backwards:
            for position, segment in enumerate(self.path(loop, ref)):
                for node in segment[1:]:
                    if isinstance(node, _LOOPS) and node is not loop.node and not self._holds(node, step, loop) \
                            and (_iterates_micro_batches(node, self.ctx) or self._walks_drawn_item(loop, ref, position, node)) \
                            and not _repeats_only_on_error(node, segment):
                        return Guard(node, "micro_loop", node.iter if isinstance(node, cst.For) else node.test,
                                     _k_of_micro_loop(node), self.index.scope_at(node), ())
        return self._engine_guard(steps, backwards)

    # -- a framework engine that owns accumulation (DeepSpeed) ------------------------------------
    def _engine_guard(self, steps: list[CallRef], backwards: list[CallRef]) -> Guard | None:
        """Every step of the loop is an engine's own (`engine.step()` on every micro-batch, no guard
        of the script's) and the engine is configured with K > 1: the engine accumulates, stepping
        the optimizer once per K calls (kind "engine"; `node` the engine's step call)."""
        if not all(self._is_engine_call(ref, "step") for ref in steps):
            return None
        if not any(self._is_engine_call(ref, "backward") for ref in backwards):
            return None
        step = steps[0]
        known, k = self.engine_k(step.node.func.value, step.scope)
        if not known or k is None:
            return None
        return Guard(step.node, "engine", None, k, step.scope, step.via)

    def _is_engine_call(self, ref: CallRef | cst.CSTNode, method: str) -> bool:
        """`<engine>.step()` (an `engine_step` method) or `<engine>.backward(loss)` on an object
        of the engine role (trainlint/frameworks/*.toml)."""
        call = ref.node if isinstance(ref, CallRef) else ref
        scope = ref.scope if isinstance(ref, CallRef) else self.index.scope_at(call)
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)):
            return False
        attr = call.func.attr.value
        if method == "step" and attr not in frameworks.methods("engine_step") or \
                method == "backward" and attr not in frameworks.methods("backward"):
            return False
        return self.roles.of(call.func.value, scope) == ENGINE

    def engine_k(self, expr: cst.BaseExpression, scope: Scope) -> tuple[bool, cst.BaseExpression | None]:
        """(known, k): the accumulation factor an engine was configured with, read from the dict
        literal handed to its factory (`deepspeed.initialize(..., config={"gradient_accumulation_steps":
        8})`, or a name bound to one); k None when it is 1. Unknown for a JSON file, `args`, a dict
        built elsewhere or one without the key (DeepSpeed may infer K from the batch sizes)."""
        if isinstance(expr, cst.Name):
            statements = [(binding.node, scope) for binding in scope.lookup(expr.value)]
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self" \
                and scope.class_scope() is not None:
            # `self.engine, ... = deepspeed.initialize(...)` in a method of the class
            statements = [(node, self.index.scope_at(node)) for node, _ in
                          self.index.unpacked_attributes.get(scope.class_scope().name, {}).get(expr.attr.value, ())]
        else:
            return False, None
        for node, scope in statements:
            if not (isinstance(node, cst.Assign) and isinstance(node.value, cst.Call)):
                continue
            name = self.index.resolve(node.value.func, scope)
            entry = frameworks.factories().get(name or "")
            if entry is None or entry.accumulation_config_keyword is None:
                continue
            config = keyword_arg(node.value, entry.accumulation_config_keyword)
            value = config.value if config is not None else None
            if isinstance(value, cst.Name):
                bound = [b.value for b in scope.lookup(value.value) if b.kind == "assign"]
                value = bound[-1] if len(bound) == 1 else None
            if not isinstance(value, cst.Dict):
                return False, None
            for element in value.elements:
                if not isinstance(element, cst.DictElement):
                    return False, None  # `{**base, ...}`
                if isinstance(element.key, cst.SimpleString) and \
                        element.key.evaluated_value == entry.accumulation_config_key:
                    k = element.value
                    if isinstance(k, cst.Integer) and k.value == "1":
                        return True, None
                    return True, k
            return False, None
        return False, None

    def _walks_drawn_item(self, loop: TrainingLoop, ref: CallRef, position: int, node: cst.CSTNode) -> bool:
        """`for mb in window:` where `window` is one item drawn from another iteration (the target of
        an enclosing `for`, here or at the call that runs this helper, or a `next(...)` passed to
        it), and each `mb` is handed to a call in the loop body: the loop walks the micro-batches
        of one drawn window, whatever the names (`for window in loader: step(window)`)."""
        if not (isinstance(node, cst.For) and isinstance(node.iter, cst.Name)):
            return False
        targets = {n.value for n in walk(node.target) if isinstance(n, cst.Name)}
        if not any(_item_of(arg.value, targets) for call in self.index.calls_under(node.body) for arg in call.args):
            return False
        scope = self.index.scope_at(node)
        bindings = scope.lookup(node.iter.value)
        if not bindings:
            return False
        for binding in bindings:
            if binding.kind == "for" and isinstance(binding.node, cst.For) and binding.node in self.index.ancestors(node):
                continue
            if binding.kind != "param" or scope.kind != "function":
                return False
            function = self.index.function_of_node.get(scope.node)
            if function is None:
                return False
            if position > 0:
                sites = [(ref.via[position - 1], self.index.scope_at(ref.via[position - 1]))]
            elif loop.function is not None and loop.node is loop.function.node:
                sites = [(site.node, site.scope) for site in self.index.callers(function)]
            else:
                return False
            if not sites:
                return False
            for call, caller_scope in sites:
                argument = self.index.argument_for(call, function, node.iter.value)
                if not _drawn_item(argument, call, caller_scope, self.index):
                    return False
        return True

    def _guard_around(self, loop: TrainingLoop, ref: CallRef) -> Guard | None:
        """The nearest update guard of the step call: an enclosing update-looking `if`, a preceding
        `if ...: continue`/`return`, or an enclosing `with accelerator.accumulate(...)`."""
        segments = self.path(loop, ref)
        via = ref.via
        for position in range(len(segments) - 1, -1, -1):
            segment = segments[position]
            scope = self._segment_scope(loop, ref, position)
            seg_via = via[:position]
            for child, node in zip(segment, segment[1:]):
                if isinstance(node, cst.If) and child is not node.test:
                    k = self._update_condition(node.test, scope)
                    if k is False and child is node.body:
                        k = self._window_counter(node, scope)
                    if k is not False and position == 0 and fixed_setting(self.index, node.test, loop.node):
                        # `if self.accum_count == 1:` in the loop's own body: the same on every
                        # micro-batch, so the step runs on all of them or none, no window boundary
                        # (an accumulation with K > 1 is done elsewhere: once after this loop)
                        return None
                    if k is not False:
                        return Guard(node, "branch", node.test, k or None, scope, seg_via, branch=child)
                if isinstance(node, cst.With) and self._accumulate_item(node, scope) is not None:
                    item = self._accumulate_item(node, scope)
                    known, k = self.accelerator_k(item.func.value, scope)
                    if not known or k is not None:
                        return Guard(node, "accelerate", item, k, scope, seg_via)
                if isinstance(node, cst.IndentedBlock):
                    jump = cst.Continue if position == 0 else cst.Return
                    for statement in node.body:
                        if statement is child:
                            break
                        if isinstance(statement, cst.If) and _jumps(statement, jump):
                            k = self._update_condition(statement.test, scope)
                            if k is not False and position == 0 and \
                                    fixed_setting(self.index, statement.test, loop.node):
                                return None  # the same on every micro-batch: no window boundary
                            if k is not False:
                                return Guard(statement, "continue", statement.test, k or None, scope, seg_via)
                if isinstance(node, _LOOPS) and node is not loop.node:
                    break  # a continue/guard beyond a nested loop is not about this step
        return None

    def _window_counter(self, node: cst.If, scope: Scope):
        """`if n == K:` (or `n >= K`) holding the update, where `n += 1` runs in a loop around it and
        the branch sets `n = 0` again: a count of the window's micro-batches, whatever its name.
        The K it is compared with (None when not a plain value), or False."""
        test = node.test
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name)
                and isinstance(test.comparisons[0].operator, (cst.Equal, cst.GreaterThanEqual, cst.GreaterThan))):
            return False
        counter = test.left.value
        resets = any(isinstance(n, cst.Assign) and isinstance(n.value, cst.Integer) and n.value.value == "0"
                     and any(isinstance(t.target, cst.Name) and t.target.value == counter for t in n.targets)
                     for n in walk(node.body))
        if not resets:
            return False
        loops = [a for a in self.index.ancestors(node) if isinstance(a, _LOOPS)]
        for binding in scope.lookup(counter):
            step = binding.node
            if binding.kind == "augassign" and isinstance(step, cst.AugAssign) and \
                    isinstance(step.operator, cst.AddAssign) and isinstance(step.value, cst.Integer) and \
                    step.value.value == "1" and any(l in loops for l in self.index.ancestors(step)):
                k = test.comparisons[0].comparator
                return k if isinstance(k, (cst.Name, cst.Attribute, cst.Integer)) else None
        return False

    def _equivalent_guards(self, loop: TrainingLoop, guard: Guard, steps: list[CallRef]):
        """Guards of the other steps that test the same condition, written the same way: one update
        on two paths (the AMP and the full-precision branch), not a step on every iteration."""
        text = self.ctx.code_for(guard.condition)
        found = []
        for ref in steps:
            other = self._guard_around(loop, ref)
            if other is not None and other.kind == "branch" and other.node is not guard.node and \
                    self.ctx.code_for(other.condition) == text:
                found.append((other.node, other.branch))
        return tuple(found)

    def _segment_scope(self, loop: TrainingLoop, ref: CallRef, position: int) -> Scope:
        if position == 0:
            return loop.scope
        element = (ref.via + (ref.node,))[position]
        return self.index.scope_at(element)

    def _under_guard(self, loop: TrainingLoop, ref: CallRef | cst.CSTNode, guard: Guard) -> bool:
        """The node runs only when the guard lets the update through."""
        for segment in self.path(loop, ref):
            if guard.kind in ("branch", "accelerate", "micro_loop"):
                for child, node in zip(segment, segment[1:]):
                    if node is guard.node and child is (guard.branch if guard.branch is not None else node.body):
                        return True
                    if any(node is other and child is branch for other, branch in guard.equivalents):
                        return True
            elif guard.kind == "continue":
                for child, node in zip(segment, segment[1:]):
                    if isinstance(node, cst.IndentedBlock) and guard.node in node.body:
                        body = list(node.body)
                        return child in body and body.index(child) > body.index(guard.node)
        return False

    def _holds(self, outer: cst.CSTNode, ref: CallRef, loop: TrainingLoop) -> bool:
        return any(outer in segment for segment in self.path(loop, ref))

    def _update_condition(self, test: cst.BaseExpression, scope: Scope, depth: int = 0):
        """False when `test` does not read as an accumulation boundary; else the K expression it
        names, or None when it names none."""
        if depth > 2:
            return False
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self._update_condition(test.expression, scope, depth)
        if isinstance(test, cst.BooleanOperation):
            left = self._update_condition(test.left, scope, depth)
            right = self._update_condition(test.right, scope, depth)
            if left is False and right is False:
                return False
            return left if left not in (False, None) else (right if right is not False else None)
        for node in walk(test):
            if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
                return node.right
        if isinstance(test, cst.Attribute) and test.attr.value in frameworks.methods("sync_flag"):
            known, k = self.accelerator_k(test.value, scope)
            return False if known and k is None else k
        if isinstance(test, cst.Comparison):
            names = [_identifier(n) for n in walk(test) if isinstance(n, (cst.Name, cst.Attribute))]
            if any(isinstance(c.operator, _COUNTER_COMPARE) for c in test.comparisons) and \
                    any(n and _UPDATE_WORDS.search(n) for n in names):
                return _k_of_comparison(test)
            return False
        if isinstance(test, cst.Name):
            for binding in scope.lookup(test.value):
                if binding.kind == "assign" and binding.value is not None:
                    k = self._update_condition(binding.value, scope, depth + 1)
                    if k is not False:
                        return k
            return None if _UPDATE_WORDS.search(test.value) else False
        if isinstance(test, cst.Attribute):
            return None if _UPDATE_WORDS.search(test.attr.value) else False
        if isinstance(test, cst.Call):  # `if self.should_step(i):`
            name = _identifier(test.func)
            return None if name and _UPDATE_WORDS.search(name) else False
        return False

    # -- Accelerate ------------------------------------------------------------------------------------
    def _accumulate_item(self, with_node: cst.With, scope: Scope) -> cst.Call | None:
        for item in with_node.items:
            call = item.item
            if (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                    and call.func.attr.value in frameworks.methods("accumulation_context")
                    and self.roles.of(call.func.value, scope) == ACCELERATOR):
                return call
        return None

    def accelerator_k(self, expr: cst.BaseExpression, scope: Scope) -> tuple[bool, cst.BaseExpression | None]:
        """(known, k): whether the Accelerator's construction was found, and its
        `gradient_accumulation_steps` (or plugin) expression; k None when not set or set to 1."""
        construction = self._accelerator_construction(expr, scope)
        if construction is None:
            return False, None
        arg = next((found for found in (keyword_arg(construction, keyword)
                                        for keyword in frameworks.accumulation_keywords()) if found is not None), None)
        if arg is None and any(a.star == "**" for a in construction.args):
            return False, None  # `Accelerator(**kwargs)` may set it
        if arg is None or (isinstance(arg.value, cst.Integer) and arg.value.value == "1"):
            return True, None
        return True, arg.value

    def unlinks_schedulers(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """The Accelerator `expr` is built with its prepared schedulers cut loose from the optimizer
        (`step_scheduler_with_optimizer=False`, framework data): they step on every call."""
        construction = self._accelerator_construction(expr, scope)
        if construction is None:
            return False
        name = self.index.resolve(construction.func, self.index.scope_at(construction)) or ""
        setting = frameworks.scheduler_unlinking(name.rsplit(".", 1)[-1])
        if setting is None:
            return False
        arg = keyword_arg(construction, setting[0])
        if arg is None:
            return False
        literal = {"False": False, "True": True}.get(arg.value.value) if isinstance(arg.value, cst.Name) else None
        return literal is not None and literal in setting[1]

    def _accelerator_construction(self, expr: cst.BaseExpression, scope: Scope) -> cst.Call | None:
        values: list[tuple[cst.BaseExpression, Scope]] = []
        if isinstance(expr, cst.Name):
            values = [(b.value, scope) for b in scope.lookup(expr.value) if b.value is not None]
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            for value in self.index.self_attribute_values(expr.attr.value, scope):
                values.append((value, self.index.scope_at(value)))
        for value, value_scope in values:
            if isinstance(value, cst.Call):
                name = self.index.resolve(value.func, value_scope) or ""
                if name.rsplit(".", 1)[-1] in frameworks.class_names(ACCELERATOR):
                    return value
        return None

    def accelerate_accumulation(self, loop: TrainingLoop) -> AccelerateAccumulation | None:
        key = id(loop)
        if key not in self._accelerate:
            self._accelerate[key] = self._find_accelerate(loop)
        return self._accelerate[key]

    def _find_accelerate(self, loop: TrainingLoop) -> AccelerateAccumulation | None:
        for ref in loop.backward_calls:
            if self._inner_loop(loop, ref) is not None:
                continue
            for position, segment in enumerate(self.path(loop, ref)):
                scope = self._segment_scope(loop, ref, position)
                for node in segment[1:]:
                    if isinstance(node, cst.With):
                        item = self._accumulate_item(node, scope)
                        if item is not None:
                            known, k = self.accelerator_k(item.func.value, scope)
                            if known and k is None:
                                return None
                            return AccelerateAccumulation(node, item.func.value, scope, k, self)
        return None

    def is_prepared(self, expr: cst.BaseExpression, scope: Scope) -> bool | None:
        """Whether `expr` (a name or `self.attr`) holds an object returned by `accelerator.prepare`
        (or `prepare_scheduler`/`prepare_optimizer`); None when its origin is not in this file."""
        text = _identifier_path(expr)
        if text is None:
            return None
        prepared = self._prepared_targets()
        if self._passed_in_list(text, scope):
            return None  # handed to `prepare(*objs)` in a list: what it is rebound to is not followed
        if text in prepared:
            if text.startswith("self."):
                if any(s.class_name == scope.class_name for _, s in prepared[text]):
                    return True
            elif isinstance(expr, cst.Name):
                visible = {b.node for b in scope.lookup(expr.value)}
                if any(assign in visible for assign, _ in prepared[text]):
                    return True
        # created in this file (a constructor call bound to it) and never prepared
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            if bindings and all(b.kind in ("assign", "param") for b in bindings) and \
                    any(b.kind == "assign" and isinstance(b.value, cst.Call) for b in bindings) and \
                    not any(b.kind == "param" for b in bindings):
                return False
            return None
        if text.startswith("self."):
            values = self.index.self_attribute_values(text[5:], scope)
            if values and all(isinstance(v, cst.Call) for v in values):
                return False
        return None

    def _passed_in_list(self, text: str, scope: Scope) -> bool:
        """`objs.append(self.optimizer)` (or `objs.extend([...])`, `objs = [...]`, `objs += [...]`) and
        then `accelerator.prepare(*objs)`: the object went through `prepare`, and what the prepared
        results are bound to (`setattr(self, name, obj)` over a list of names) is not followed."""
        if self._list_passed is None:
            self._list_passed = []
            for site in self.index.calls:
                func = site.node.func
                if not (isinstance(func, cst.Attribute) and func.attr.value in _PREPARE_METHODS):
                    continue
                for arg in site.node.args:
                    if arg.star == "*" and isinstance(arg.value, cst.Name):
                        for element in self._list_elements(arg.value.value, site.scope):
                            path = _identifier_path(element)
                            if path:
                                self._list_passed.append((path, site.scope))
        for path, site_scope in self._list_passed:
            if path != text:
                continue
            if text.startswith("self.") and site_scope.class_name == scope.class_name:
                return True
            if not text.startswith("self.") and site_scope is scope:
                return True
        return False

    def _list_elements(self, name: str, scope: Scope) -> list[cst.BaseExpression]:
        """The elements put into the list `name` of `scope`: its assigned list literals, and what its
        `.append(x)`, `.extend([...])` and `+= [...]` add (through `a if c else b`)."""
        sources: list[cst.BaseExpression] = [b.value for b in scope.lookup(name) if b.value is not None]
        for site in self.index.calls:
            func = site.node.func
            if site.scope is scope and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                    and func.value.value == name and func.attr.value in ("append", "extend", "insert") \
                    and site.node.args:
                value = site.node.args[-1].value
                sources.append(cst.List([cst.Element(value)]) if func.attr.value != "extend" else value)
        elements: list[cst.BaseExpression] = []
        pending = list(sources)
        while pending:
            expr = pending.pop()
            if isinstance(expr, (cst.List, cst.Tuple)):
                elements.extend(e.value for e in expr.elements if isinstance(e, cst.Element))
            elif isinstance(expr, cst.IfExp):
                pending += [expr.body, expr.orelse]
            elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
                pending += [expr.left, expr.right]
        return elements

    def _prepared_targets(self) -> dict[str, list[tuple[cst.Assign, Scope]]]:
        if self._prepared is None:
            self._prepared = {}
            for site in self.index.calls:
                func = site.node.func
                if not (isinstance(func, cst.Attribute)
                        and func.attr.value in _PREPARE_METHODS):
                    continue
                statement = self.index.enclosing_statement(site.node)
                if isinstance(statement, cst.Assign) and statement.value is site.node:
                    for target in statement.targets:
                        elements = target.target.elements if isinstance(target.target, (cst.Tuple, cst.List)) \
                            else [target.target]
                        for element in elements:
                            value = element.value if isinstance(element, cst.BaseElement) else element
                            text = _identifier_path(value)
                            if text:
                                self._prepared.setdefault(text, []).append((statement, site.scope))
        return self._prepared

    # -- per-update queries ------------------------------------------------------------------------------
    def after_training(self, node: cst.CSTNode) -> bool:
        chain = [node]
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, _LOOPS):
                return False  # it runs again and again: training may go on after it
            if isinstance(ancestor, (cst.ClassDef, cst.Lambda)):
                return False
            chain.append(ancestor)
            if isinstance(ancestor, cst.FunctionDef):
                break
        owner = chain[-1]  # the function, or the module
        body = owner.body.body if isinstance(owner, cst.FunctionDef) and isinstance(owner.body, cst.IndentedBlock) \
            else owner.body if isinstance(owner, cst.Module) else None
        if body is None:
            return False
        position = {id(s): i for i, s in enumerate(body)}
        statement = next((n for n in chain if id(n) in position), None)
        if statement is None:
            return False
        earlier = body[:position[id(statement)]]
        if not any(self._runs_training(s) for s in earlier):
            return False
        function = self.index.function_of_node.get(owner) if isinstance(owner, cst.FunctionDef) else None
        if function is not None:
            callers = self.index.callers(function)
            if not callers:
                return False  # called from another file, perhaps once per epoch: cannot tell
            for site in callers:
                if any(isinstance(a, _LOOPS) for a in self.index.ancestors(site.node)):
                    return False  # the helper is called from a loop: more training may follow
        return True

    def trains_after(self, node: cst.CSTNode) -> bool:
        """Training can run after `node`: it sits in a loop, or a later statement of its function
        (or module) holds a training loop or calls a same-file function that runs one."""
        chain = [node]
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, _LOOPS):
                return True
            chain.append(ancestor)
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
        owner = chain[-1]
        body = owner.body.body if isinstance(owner, cst.FunctionDef) and isinstance(owner.body, cst.IndentedBlock) \
            else owner.body if isinstance(owner, cst.Module) else None
        if body is None:
            return True
        position, trains_from = self._statement_table(owner, body)
        statement = next((n for n in chain if id(n) in position), None)
        if statement is None:
            return True
        return trains_from[position[id(statement)] + 1]

    def _statement_table(self, owner: cst.CSTNode, body) -> tuple[dict[int, int], list[bool]]:
        """For a body: each statement's position, and whether a statement at or after position i
        runs training (built once per body: a script asks at each of its thousands of saves)."""
        table = self._statement_tables.get(id(owner))
        if table is None or table[0] is not owner:
            trains_from = [False] * (len(body) + 1)
            for i in range(len(body) - 1, -1, -1):
                trains_from[i] = trains_from[i + 1] or self._runs_training(body[i])
            table = self._statement_tables[id(owner)] = (owner, {id(s): i for i, s in enumerate(body)}, trains_from)
        return table[1], table[2]

    def _runs_training(self, statement: cst.CSTNode) -> bool:
        """A training loop is written in `statement` or runs in a same-file function it calls
        (not one merely defined there)."""
        memo = self._runs_training_memo  # the node is kept beside its id so the id is never reused
        if id(statement) not in memo:
            memo[id(statement)] = (statement, self._walk_for_training(statement))
        return memo[id(statement)][1]

    def _walk_for_training(self, statement: cst.CSTNode) -> bool:
        by_node = self._loops_by_node()
        if self._trained_functions is None:
            self._trained_functions = {tl.function.node for tl in self.loops if tl.function is not None}
        trained = self._trained_functions
        pending = [statement]
        while pending:
            node = pending.pop()
            if node in by_node:
                return True
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if isinstance(node, cst.Call) and trained:
                target = self.index.callee(node, self.index.scope_at(node))
                if target is not None and target.node in trained:
                    return True
            pending.extend(iter_children(node))
        return False

    def runs_per_update(self, loop: TrainingLoop, node: CallRef | cst.CSTNode) -> bool:
        ref = node if isinstance(node, CallRef) else self._ref_for(loop, node)
        visited = set()  # loops nest through helpers; a loop met twice is a cycle (recursion)
        while not loop.innermost:
            visited.add(id(loop))
            inner = self._inner_loop(loop, ref)
            if inner is None or id(inner) in visited:
                return False
            loop, ref = inner, self._relative_ref(inner, ref)
        if not loop.accumulates or loop.guard is None:
            return True
        guard = loop.guard
        if guard.kind == "micro_loop":
            return not self._under_guard(loop, ref, guard)
        if guard.kind == "engine" and self._is_engine_call(ref, "step"):
            return True  # the engine's step: its optimizer and scheduler step once per window
        if self._under_guard(loop, ref, guard):
            if guard.kind != "accelerate":
                return True
            return self._accelerate_skips(loop, ref) or self._under_other_update_condition(loop, ref)
        if guard.kind == "accelerate" and self._accelerate_skips(loop, ref):
            return True
        return self._under_other_update_condition(loop, ref)

    def _accelerate_skips(self, loop: TrainingLoop, ref: CallRef | cst.CSTNode) -> bool:
        """A call Accelerate itself runs once per update inside `accumulate`: `.step()` /
        `.zero_grad()` of a prepared optimizer or scheduler (not a scheduler's step when the
        Accelerator is built with `step_scheduler_with_optimizer=False`: it then steps on every call)."""
        call = ref.node if isinstance(ref, CallRef) else ref
        scope = ref.scope if isinstance(ref, CallRef) else self.index.scope_at(call)
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                and call.func.attr.value in ("step", "zero_grad")):
            return False
        receiver = call.func.value
        role = self.roles.of(receiver, scope)
        if role not in (OPTIMIZER, SCHEDULER):
            return False
        if role == SCHEDULER and call.func.attr.value == "step":
            accelerate = self.accelerate_accumulation(loop)
            if accelerate is not None and self.unlinks_schedulers(accelerate.accelerator, accelerate.scope):
                return False
        return self.is_prepared(receiver, scope) is not False

    def _under_other_update_condition(self, loop: TrainingLoop, ref: CallRef | cst.CSTNode) -> bool:
        """Under an update-looking `if` (or `if accelerator.sync_gradients`) that holds no backward."""
        segments = self.path(loop, ref)
        for position, segment in enumerate(segments):
            scope = ref.scope if isinstance(ref, CallRef) and position == len(segments) - 1 else \
                (loop.scope if position == 0 else self.index.scope_at(segment[0]))
            for child, node in zip(segment, segment[1:]):
                if isinstance(node, cst.IndentedBlock) and self._after_skip_guard(loop, node, child, scope, position):
                    return True
                if not isinstance(node, cst.If) or child is node.test or \
                        (loop.guard is not None and node is loop.guard.node):
                    continue
                if self._update_condition(node.test, scope) is False or \
                        any(self._holds(node, b, loop) for b in loop.backward_calls):
                    continue
                # `if i % K == 0:` runs its body at window boundaries; `if i % K:` off them
                at_boundary = self.boundary_polarity(node.test)
                in_body = child is node.body
                if at_boundary is None or at_boundary == in_body:
                    return True
        return False

    def _after_skip_guard(self, loop: TrainingLoop, block: cst.IndentedBlock, child: cst.CSTNode, scope: Scope,
                          position: int) -> bool:
        """`child` comes after an `if not do_step: continue` (a `return` in a helper) of `block` that
        leaves the iteration between window boundaries: the update's own guard, written a second
        time for the code after it (the step itself sits under `if do_step:` elsewhere)."""
        jump = cst.Continue if position == 0 else cst.Return
        for statement in block.body:
            if statement is child:
                return False
            if not (isinstance(statement, cst.If) and _jumps(statement, jump)):
                continue
            if self._update_condition(statement.test, scope) is False:
                continue
            if self.boundary_polarity(statement.test) is False:  # it skips what is not a boundary
                return True
        return False

    def _ref_for(self, loop: TrainingLoop, node: cst.CSTNode) -> CallRef | cst.CSTNode:
        for ref in loop.calls:
            if ref.node is node:
                return ref
        return node

    def _relative_ref(self, inner: TrainingLoop, ref: CallRef | cst.CSTNode) -> CallRef | cst.CSTNode:
        if not isinstance(ref, CallRef):
            return ref
        for candidate in inner.calls:
            if candidate.node is ref.node:
                return candidate
        return ref.node

    def varying_test(self, loop: TrainingLoop, ref: CallRef | cst.CSTNode) -> cst.If | cst.While | None:
        """The first `if` (or `while`) on the way from the loop body (through helpers) to `ref` whose
        test can change between micro-batches: not the update's guard, not holding a backward of
        the loop (where it is false nothing accumulates), and not a test with the same value on
        every iteration (`iterations.same_on_every_iteration`: a setting such as `if args.fp16:`).
        None: `ref` runs on every micro-batch the loop runs, if it runs at all."""
        guard = loop.guard.node if loop.guard is not None else None
        for position, segment in enumerate(self.path(loop, ref)):
            owner = loop.node if position == 0 else next(
                (a for a in self.index.ancestors(segment[0]) if isinstance(a, cst.FunctionDef)), None)
            for child, node in zip(segment, segment[1:]):
                if not isinstance(node, (cst.If, cst.While)) or child is node.test or node is guard:
                    continue
                if any(self._holds(node, b, loop) for b in loop.backward_calls):
                    continue
                if owner is None or not same_on_every_iteration(self.index, node.test, owner):
                    return node
        return None

    def failure_handler(self, loop: TrainingLoop, ref: CallRef | cst.CSTNode) -> cst.ExceptHandler | None:
        """The `except` clause on the way from the loop body (through helpers) to `ref`, if any: the
        code there runs only after a statement of its `try` raised (`except OutOfMemoryError:
        optimizer.zero_grad(); continue` recovers from a failed micro-batch), never on a micro-batch
        that went through; so it is not code that "runs on every micro-batch"."""
        for segment in self.path(loop, ref):
            for child, node in zip(segment, segment[1:]):
                if isinstance(node, cst.ExceptHandler) and child is node.body:
                    return node
        return None

    def clears_within_window(self, loop: TrainingLoop) -> tuple[list[CallRef], list[tuple[CallRef, cst.CSTNode]]]:
        """The clears (`zero_grad()`) that keep the window's gradients from adding up: those that
        run on every micro-batch (off the update's guard, under no test that changes between
        micro-batches) and those under the update's condition before its last backward
        (`cleared_before_last_backward`); and, apart, the clears off the guard whose test can
        change between micro-batches, with that test (where they run is unknown)."""
        proven: list[CallRef] = [w.clear for w in self.window_clears(loop)]
        proven += self._cleared_after_micro_loop(loop)
        unknown: list[tuple[CallRef, cst.CSTNode]] = []
        for ref in self.own_calls(loop):
            if not self.is_zero_grad(ref.node, ref.scope) or self.runs_per_update(loop, ref) \
                    or self.failure_handler(loop, ref) is not None:
                continue
            test = self.varying_test(loop, ref)
            if test is None:
                proven.append(ref)
            else:
                unknown.append((ref, test))
        return proven, unknown

    def _cleared_after_micro_loop(self, loop: TrainingLoop) -> list[CallRef]:
        """For a window whose backward runs in a nested micro-batch loop: the clears that come after
        that loop and before every optimizer step of the window, on its way (a statement of a block
        that holds the step, written before it): what the micro-batch loop accumulated never
        reaches a step (a meta-learning step that clears, then backpropagates a mean of the task
        losses). Empty when some step can be reached without such a clear."""
        guard = loop.guard
        place = self.index.place
        if guard is None or guard.kind != "micro_loop" or guard.node not in place:
            return []
        micro_end = self.index.subtree_end(place[guard.node])
        steps = [r for r in loop.step_calls if not r.via and self._inner_loop(loop, r) is None]
        clears = [r for r in self.own_calls(loop) if not r.via and self.is_zero_grad(r.node, r.scope)
                  and place.get(r.node, -1) >= micro_end]
        found: list[CallRef] = []
        for step in steps:
            clear = next((c for c in clears if place.get(step.node, -1) > place[c.node]
                          and self._on_the_way(c.node, step.node)), None)
            if clear is None:
                return []
            found.append(clear)
        return found

    def _on_the_way(self, first: cst.CSTNode, second: cst.CSTNode) -> bool:
        """`first` runs on every way to `second`: its statement belongs to a block that holds
        `second`, before the statement of that block that holds `second`."""
        statement, block = first, None
        for ancestor in self.index.ancestors(first):
            if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
                block = ancestor
                break
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            statement = ancestor
        if block is None:
            return False
        child = second
        for ancestor in self.index.ancestors(second):
            if ancestor is block:
                body = list(block.body)
                return statement in body and child in body and body.index(statement) < body.index(child)
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            child = ancestor
        return False

    # -- order within the update window -------------------------------------------------------------
    def window_clears(self, loop: TrainingLoop) -> list[WindowClear]:
        """The clears (`zero_grad()`) that run once per update, on the window's last micro-batch
        (`_at_update_boundary`), at a place of that iteration that loses the window's gradients:

        - "before_last_backward": before that micro-batch's backward, with the optimizer step of
          the same update after the backward: what the window's first K-1 micro-batches
          accumulated is thrown away, and the step sees only the last one's gradient;
        - "before_step": after the iteration's backward and before the optimizer step, with no
          backward between: the step runs on cleared gradients (it updates nothing, or only by
          weight decay and momentum).

        A clear under a test of the window's first micro-batch (`if i % K == 0:` while the step
        tests `(i + 1) % K == 0`) is where a window starts: it is not one of these; nor is a clear
        that follows the step, nor one on the other side of an `if`/`else` from the backward or
        the step (they never run in one iteration)."""
        guard = loop.guard
        if not (loop.innermost and loop.accumulates) or guard is None or \
                guard.kind not in ("branch", "continue", "accelerate"):
            return []
        order = {id(ref.node): position for position, ref in enumerate(loop.calls)}
        steps = [ref for ref in loop.step_calls if id(ref.node) in order and self._at_update_boundary(loop, ref)]
        backwards = [ref for ref in loop.backward_calls if id(ref.node) in order and self._inner_loop(loop, ref) is None
                     and (not self.runs_per_update(loop, ref) or self._at_update_boundary(loop, ref))]
        found: list[WindowClear] = []
        all_steps = steps
        for clear in self.own_calls(loop):
            if not self.is_zero_grad(clear.node, clear.scope) or not self._at_update_boundary(loop, clear):
                continue
            # the steps that can apply what this clear clears: not those of another optimizer
            # (`opt_g.zero_grad()` beside `opt_d.step()`: their gradients are not the same tensors)
            steps = [r for r in all_steps if not self._other_optimizers(clear, r)]
            at = order[id(clear.node)]
            later = [b for b in backwards if order[id(b.node)] > at and not self._exclusive(clear, b)]
            hit = None
            for backward in later:
                step = next((r for r in steps if order[id(r.node)] > order[id(backward.node)]
                             and not self._exclusive(backward, r) and not self._exclusive(clear, r)), None)
                if step is not None and not any(at < order[id(r.node)] < order[id(backward.node)] for r in steps):
                    hit = WindowClear(clear, backward, step, "before_last_backward")
                    break
            if hit is None:
                earlier = [b for b in backwards if order[id(b.node)] < at and not self._exclusive(clear, b)]
                step = next((r for r in steps if order[id(r.node)] > at and not self._exclusive(clear, r)), None)
                if earlier and step is not None and not any(
                        at < order[id(b.node)] < order[id(step.node)] for b in backwards) and \
                        not any(order[id(r.node)] < at for r in steps if not self._exclusive(clear, r)
                                and order[id(r.node)] > order[id(earlier[-1].node)]):
                    hit = WindowClear(clear, earlier[-1], step, "before_step")
            if hit is not None:
                found.append(hit)
        return found

    def _other_optimizers(self, clear: CallRef, step: CallRef) -> bool:
        """`a.zero_grad()` and `b.step()` where `a` and `b` are both optimizers and two objects: two
        plain names (or `self.` attributes) spelled differently, each bound (in its call's scope,
        or as the class's attribute) to values none of which is the other name."""
        a, b = clear.node.func, step.node.func
        if not (isinstance(a, cst.Attribute) and isinstance(b, cst.Attribute)):
            return False
        x, y = a.value, b.value
        if self.roles.of(x, clear.scope) != OPTIMIZER or self.roles.of(y, step.scope) != OPTIMIZER:
            return False
        texts = []
        for expr in (x, y):
            if isinstance(expr, cst.Name):
                texts.append(expr.value)
            elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
                texts.append(f"self.{expr.attr.value}")
            else:
                return False
        if texts[0] == texts[1]:
            return False
        for expr, scope, other in ((x, clear.scope, texts[1]), (y, step.scope, texts[0])):
            if isinstance(expr, cst.Name):
                values = [b.value for b in scope.lookup(expr.value)]
                if not values or any(v is None and b.kind != "assign" for v, b in zip(values, scope.lookup(expr.value))):
                    return False
            else:
                values = [v for attrs in self.index.class_attributes.values() for v in attrs.get(expr.attr.value, [])]
            for value in values:
                if value is not None and "".join(self.ctx.code_for(value).split()) == other:
                    return False
        return True

    def cleared_before_last_backward(self, loop: TrainingLoop) -> list[tuple[CallRef, CallRef, CallRef]]:
        """(clear, backward, step) of the `window_clears` made before the window's last backward."""
        return [(w.clear, w.backward, w.step) for w in self.window_clears(loop) if w.where == "before_last_backward"]

    def _exclusive(self, a: CallRef, b: CallRef) -> bool:
        """`a` and `b` sit on the two sides of one `if`/`else` (`if scaler: ... zero_grad()` and
        `else: loss.backward()`): they never run in the same iteration."""
        x, y = (a.node, b.node) if a.via == b.via else (a.anchor, b.anchor)
        ancestors = self.index.ancestors
        chain = {id(node): child for child, node in zip([x, *ancestors(x)], ancestors(x))}
        child = y
        for ancestor in ancestors(y):
            if id(ancestor) in chain:
                other = chain[id(ancestor)]
                return isinstance(ancestor, cst.If) and ancestor.orelse is not None and \
                    {id(other), id(child)} == {id(ancestor.body), id(ancestor.orelse)}
            child = ancestor
        return False

    def _at_update_boundary(self, loop: TrainingLoop, ref: CallRef) -> bool:
        """The call runs only on the window's last micro-batch: under the update guard's branch
        (after its `continue` guard; for Accelerate, a prepared optimizer's step or clear, which
        Accelerate runs only when the gradients sync), or under an `if` whose test is the guard's
        condition, read through the assignments that reach it (`do_step = (i + 1) % K == 0` then
        `if do_step:`; `if not do_step: continue` and `if do_step:`), on the boundary's side; for
        Accelerate, under `if accelerator.sync_gradients:`."""
        guard = loop.guard
        if guard is None or guard.kind not in ("branch", "continue", "accelerate"):
            return False
        if self._under_guard(loop, ref, guard) and (guard.kind != "accelerate" or (
                self._accelerate_skips(loop, ref) and not self._engine_clears(loop, ref))):
            return True
        boundary = self._boundary_key(loop)
        for position, segment in enumerate(self.path(loop, ref)):
            scope = self._segment_scope(loop, ref, position) if isinstance(ref, CallRef) else loop.scope
            for child, node in zip(segment, segment[1:]):
                if not isinstance(node, cst.If) or child is node.test:
                    continue
                text, positive = self.condition_key(node.test)
                holds = positive if child is node.body else not positive
                if boundary is not None and text == boundary[0] and holds == boundary[1]:
                    return True
                if guard.kind == "accelerate" and holds and self._sync_flag(node.test, scope):
                    return True
        return False

    def _engine_clears(self, loop: TrainingLoop, ref: CallRef) -> bool:
        """A prepared optimizer's `zero_grad()` under an Accelerator built with a keyword that hands
        the update to an engine (`deepspeed_plugin=`: framework data): the call does nothing."""
        if not (isinstance(ref.node.func, cst.Attribute) and ref.node.func.attr.value == "zero_grad"):
            return False
        accelerate = self.accelerate_accumulation(loop)
        construction = self._accelerator_construction(accelerate.accelerator, accelerate.scope) \
            if accelerate is not None else None
        if construction is None:
            return False
        name = self.index.resolve(construction.func, self.index.scope_at(construction)) or ""
        return any(keyword_arg(construction, k) is not None for k in frameworks.engine_keywords(name.rsplit(".", 1)[-1]))

    def _boundary_key(self, loop: TrainingLoop) -> tuple[str, bool] | None:
        """The guard's condition as `condition_key` reads it, with the truth value it has on the
        window's last micro-batch (the update's side)."""
        guard = loop.guard
        if guard is None or guard.condition is None or guard.kind not in ("branch", "continue"):
            return None
        text, positive = self.condition_key(guard.condition)
        if guard.kind == "continue":
            return text, not positive  # `if C: continue` skips what is not a boundary
        on_body = guard.branch is None or guard.branch is getattr(guard.node, "body", None)
        return text, positive if on_body else not positive

    def condition_key(self, test: cst.BaseExpression) -> tuple[str, bool]:
        """A test as the value it reads: `not`s taken off (each flips the polarity) and a name
        followed to the condition the assignment reaching it stores (`stored_condition`):
        `if not do_step:` with `do_step = (i + 1) % K == 0` reads ("(i + 1) % K == 0", False)."""
        positive = True
        for _ in range(4):
            while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                test, positive = test.expression, not positive
            if not isinstance(test, cst.Name):
                break
            value, statement = self.stored_condition(test)
            if statement is None:
                break
            test = value
        return " ".join(self.ctx.code_for(test).split()), positive

    def stored_test(self, test: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.CSTNode | None]:
        """The condition a test reads through a name (`if do_step:` -> `(i + 1) % K == 0 or
        last`), with the assignment that stores it (None when the test is read as written)."""
        inner = test
        while isinstance(inner, cst.UnaryOperation) and isinstance(inner.operator, cst.Not):
            inner = inner.expression
        if not isinstance(inner, cst.Name):
            return test, None
        value, statement = inner, None
        for _ in range(3):  # `ready = do_step` then `do_step = ...`
            if not isinstance(value, cst.Name):
                break
            found, assignment = self.stored_condition(value)
            if assignment is None:
                break
            value, statement = found, assignment
        return (value, statement) if statement is not None else (test, None)

    def stored_condition(self, name: cst.Name) -> tuple[cst.BaseExpression, cst.CSTNode | None]:
        """The value of the one plain assignment of `name` that reaches this use (the index's
        reaching bindings; literal `True`/`False` narrowings aside), with that assignment; `name`
        and None when a parameter, a loop target, an augmented assignment, tuple unpacking or
        several computed values reach it. (Dataflow.stored_condition answers the same for the
        rules; the model below it reads the index's bindings.)"""
        bindings = self.index.reaching_bindings(name, name.value, self.index.scope_at(name))
        computed = [b for b in bindings
                    if not (b.kind == "assign" and isinstance(b.value, cst.Name) and b.value.value in ("True", "False"))]
        if len(computed) != 1:
            return name, None
        binding = computed[0]
        if binding.kind != "assign" or binding.value is None or binding.value is name or \
                not isinstance(binding.node, (cst.Assign, cst.AnnAssign)):
            return name, None
        place = self.index.place
        at, where = place.get(binding.node), place.get(name)
        if at is None or where is None or self.index.subtree_end(at) >= where:
            return name, None  # written after the use (last iteration's value) or around it
        return binding.value, binding.node

    def _sync_flag(self, test: cst.BaseExpression, scope: Scope) -> bool:
        """`accelerator.sync_gradients` (an Accelerator's sync flag, trainlint/frameworks/
        accelerate.toml), read through a name that stores it."""
        value, _ = self.stored_test(test)
        return isinstance(value, cst.Attribute) and value.attr.value in frameworks.methods("sync_flag") and \
            self.roles.of(value.value, scope) == ACCELERATOR

    def boundary_polarity(self, test: cst.BaseExpression) -> bool | None:
        """`_boundary_polarity` of the condition the test reads (through a stored name first:
        `boundary = (i + 1) % K == 0`, `if not boundary:` holds between boundaries), whatever
        the names say."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self.boundary_polarity(test.expression)
            return None if inner is None else not inner
        value, statement = self.stored_test(test)
        if statement is not None:
            return _boundary_polarity(value)
        return _boundary_polarity(test)

    def update_calls(self, loop: TrainingLoop) -> list[CallRef]:
        """The calls that run once per update, in statement order."""
        if not loop.innermost:
            return []
        return [ref for ref in self.own_calls(loop) if self.runs_per_update(loop, ref)]

    # -- building ----------------------------------------------------------------------------------
    def _build(self) -> None:
        for loop in self.index.loops:
            scope = self.index.scope_at(loop)
            backward, steps, calls = [], [], []
            for ref in self.reachable_calls(loop.body, scope):
                calls.append(ref)
                if self.is_backward(ref.node, ref.scope):
                    backward.append(ref)
                elif self.is_optimizer_step(ref.node, ref.scope):
                    steps.append(ref)
            if backward and steps:
                self.loops.append(TrainingLoop(loop, self.index.function_at(loop), scope, backward, steps,
                                               calls=calls))
        for tl in self.loops:
            tl.innermost = not any(self._inner_loop(tl, ref) is not None for ref in tl.step_calls)
        for tl in self.loops:
            if tl.innermost:
                tl.guard = self._find_guard(tl)
                tl.accumulates = tl.guard is not None
        self._build_window_functions()

    def _build_window_functions(self) -> None:
        covered = {id(ref.node) for tl in self.loops for ref in tl.backward_calls}
        for function in self.index.functions:
            direct = self.index.calls_under(function.node.body)
            # the backward written here, or the step written here and the backward in a helper it
            # calls per micro-batch (`for mb in micro_batches: self._loss_and_backward(mb)`, then
            # `self.optimizer.step()`): one update split across methods
            if not any(self.is_backward(c, function.scope) or self.is_optimizer_step(c, function.scope)
                       for c in direct if id(c) not in covered):
                continue
            backward, steps, calls = [], [], []
            for ref in self.reachable_calls(function.node.body, function.scope):
                calls.append(ref)
                if self.is_backward(ref.node, ref.scope):
                    backward.append(ref)
                elif self.is_optimizer_step(ref.node, ref.scope):
                    steps.append(ref)
            if not steps or any(id(ref.node) in covered for ref in backward):
                continue
            window = TrainingLoop(function.node, function, function.scope, backward, steps, calls=calls)
            window.guard = self._find_guard(window)
            window.accumulates = window.guard is not None
            if window.accumulates:
                self.window_functions.append(window)


def training_model(ctx) -> TrainingModel:
    """The file's training-loop model, shared by every rule: `ctx.model(training_model)`."""
    return TrainingModel(ctx)


def _boundary_polarity(test: cst.BaseExpression) -> bool | None:
    """True when the condition holds at window boundaries (`i % K == 0`, `sync_gradients`,
    `do_step`), False when it holds between them (`i % K`, `i % K != 0`, `is_accumulating`),
    None when it cannot be told."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _boundary_polarity(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.BinaryOperation) and isinstance(test.operator, cst.Modulo):
        return False
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        operator = test.comparisons[0].operator
        if isinstance(operator, (cst.Equal, cst.GreaterThanEqual, cst.GreaterThan)):
            return True
        if isinstance(operator, cst.NotEqual):
            return False
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        left, right = _boundary_polarity(test.left), _boundary_polarity(test.right)
        return left if left == right else None
    name = _identifier(test)
    if name:
        if re.search(r"accumulating|skip", name, re.I):
            return False
        return True
    return None


def _jumps(statement: cst.If, jump: type) -> bool:
    """`if cond: continue` (the body ends in the jump, with no else)."""
    if statement.orelse is not None:
        return False
    body = statement.body
    last = body.body[-1] if isinstance(body, cst.IndentedBlock) and body.body else None
    if isinstance(body, cst.SimpleStatementSuite):
        small = body.body
    elif isinstance(last, cst.SimpleStatementLine):
        small = last.body
    else:
        return False
    return bool(small) and isinstance(small[-1], jump)


def _identifier(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


_PREPARE_METHODS = ("prepare", "prepare_scheduler", "prepare_optimizer", "setup")


def _identifier_path(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
        return f"{expr.value.value}.{expr.attr.value}"
    return None


def _k_of_comparison(test: cst.Comparison) -> cst.BaseExpression | None:
    """`micro_step == accumulation_steps - 1` -> `accumulation_steps`; `n >= self.accum` -> `self.accum`."""
    sides = [test.left] + [c.comparator for c in test.comparisons]
    for side in sides:
        expr = side
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract) and \
                isinstance(expr.right, cst.Integer):
            expr = expr.left
        name = _identifier(expr)
        if name and re.search(r"accum|grad_acc|update_freq", name, re.I) and not re.search(r"micro|step$|count", name):
            return expr
    return None


_MICRO_ITER = re.compile(r"batch|chunk|micro|split|accum|shard|\bmbs?\b|(^|_)mb_|window|grad_acc|update_freq", re.I)
_K_ARG = re.compile(r"^\s*(self\.|args\.|cfg\.|config\.)?[Kk]\s*$|\bga(_steps)?\b", re.I)


def _iterates_micro_batches(node: cst.CSTNode, ctx) -> bool:
    """A nested loop that walks micro-batches: an iterable or loop variable named like micro-batches
    (`for micro_step in range(n)`, `for _ in range(grad_accum)`, `for mb in micro_batches`), not
    tasks, loaders or time steps."""
    if isinstance(node, cst.While):
        return bool(_MICRO_ITER.search(ctx.code_for(node.test)))
    if _MICRO_ITER.search(ctx.code_for(node.target)):
        return True
    iterable = node.iter
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range":
        text = ctx.code_for(iterable.args[-1].value) if iterable.args else ""
        return bool(_MICRO_ITER.search(text) or _K_ARG.search(text))
    return bool(_MICRO_ITER.search(ctx.code_for(iterable)))


def _item_of(expr: cst.BaseExpression, names: set[str]) -> bool:
    """`mb`, `mb["input_ids"]`, `mb.x` for a name of `names`."""
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        expr = expr.value
    return isinstance(expr, cst.Name) and expr.value in names


def _drawn_item(argument: cst.BaseExpression | None, call: cst.Call, scope: Scope, index: FileIndex) -> bool:
    """`argument` is one item of an iteration at `call`: `next(it)`, or a target of a `for` around
    the call (`for window in loader: step(window)`)."""
    if isinstance(argument, cst.Call) and isinstance(argument.func, cst.Name) and argument.func.value == "next" \
            and not any(b.kind != "import" for b in scope.lookup("next")):
        return True
    if not isinstance(argument, cst.Name):
        return False
    bindings = scope.lookup(argument.value)
    around = set(index.ancestors(call))
    return bool(bindings) and all(b.kind == "for" and b.node in around for b in bindings)


def _repeats_only_on_error(loop: cst.CSTNode, path: list[cst.CSTNode]) -> bool:
    """`while chunk_size: try: <backward> ... except OOM: chunk_size //= 2 else: break`: the loop ends
    with a `try` whose success path breaks out (`else: break`, or `break` closing its body) and the
    backward (on `path`) is in that `try`'s body. An iteration follows another only after an
    exception: a retry of the same batch, not a loop over micro-batches whose gradients add up."""
    body = getattr(loop, "body", None)
    if not isinstance(body, cst.IndentedBlock) or not body.body or not any(n is body for n in path):
        return False
    last = body.body[-1]
    if not isinstance(last, cst.Try) or last.finalbody is not None or not any(n is last.body for n in path):
        return False  # the backward is not in the `try` body (a handler, the `else`, elsewhere)

    def breaks(block: cst.BaseSuite | None) -> bool:
        if not isinstance(block, cst.IndentedBlock) or not block.body:
            return False
        final = block.body[-1]
        return isinstance(final, cst.SimpleStatementLine) and any(isinstance(s, cst.Break) for s in final.body)

    return breaks(last.orelse.body if last.orelse is not None else None) or breaks(last.body)


def _k_of_micro_loop(node: cst.CSTNode) -> cst.BaseExpression | None:
    """`for _ in range(K)` -> K."""
    if isinstance(node, cst.For) and isinstance(node.iter, cst.Call) and \
            isinstance(node.iter.func, cst.Name) and node.iter.func.value == "range":
        args = positional_args(node.iter)
        if len(args) == 1:
            return args[0].value
    return None


def _kept_aside(ctx, loop: "TrainingLoop", clear: "CallRef", order: dict[int, int], first_step: int) -> bool:
    """A call of the iteration before the clear keeps a copy of the gradients (`pgd.backup_grad()`,
    whose code stores `p.grad.clone()`), and one after it, before the optimizer step, writes them
    back (`pgd.restore_grad()`: `p.grad = backup[name]`): what the window accumulated survives the
    clear (an adversarial-training inner loop)."""
    at = order.get(id(clear.node), -1)
    copied = written = False
    for ref in loop.calls:
        position = order.get(id(ref.node), -1)
        if ref.via or position < 0:
            continue
        found = _grad_effects(ctx, ref)
        if found is None:
            continue
        copies, writes = found
        if position < at and copies:
            copied = True
        if at < position and (first_step < 0 or position < first_step) and writes:
            written = True
    return copied and written


def _grad_effects(ctx, ref: "CallRef") -> tuple[bool, bool] | None:
    """(keeps a copy of gradients, writes gradients back) for the function or method of the project
    that `ref` calls: one of this file (its body read), one another file defines, or a method of
    the project class that built the receiver (their summaries)."""
    from trainlint.model.summaries import FunctionSummary, copies_grads, instance_class, writes_grads

    index = ctx.index
    func = ref.node.func
    target = index.callee(ref.node, ref.scope)
    if target is not None:
        nodes = list(walk(target.node.body))
        return copies_grads(nodes), writes_grads(nodes)
    summary = None
    if isinstance(func, cst.Attribute):
        built = instance_class(index, func.value, ref.scope, ("grad",))
        summary = built.method(func.attr.value) if built is not None else None
    else:
        found = index.summary_of(func, ref.scope, ("grad",))
        summary = found if isinstance(found, FunctionSummary) else None
    return (summary.copies_grads, summary.writes_grads) if summary is not None else None
