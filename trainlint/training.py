"""The model of a training loop, built once per file and queried by rules.

A training loop is a `for`/`while` whose body, directly or through a function or method of the
same file that it calls, runs a backward and an optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import libcst as cst

from trainlint.index import FileIndex, FunctionInfo, Scope, iter_children, positional_args, walk
from trainlint.roles import OPTIMIZER, SCALER, SCHEDULER, roles

_NESTED_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_MAX_CALL_DEPTH = 3


def calls_in(node: cst.CSTNode) -> Iterator[cst.Call]:
    """Calls under `node` in source order, not descending into nested defs, classes or lambdas."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Call):
            yield current
        if current is not node and isinstance(current, _NESTED_SCOPES):
            continue
        stack.extend(reversed(list(iter_children(current))))


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
class TrainingLoop:
    node: cst.For | cst.While
    function: FunctionInfo | None
    scope: Scope
    backward_calls: list[CallRef] = field(default_factory=list)
    step_calls: list[CallRef] = field(default_factory=list)
    #: True when no loop nested inside this one is itself a training loop
    innermost: bool = True


class TrainingModel:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.index: FileIndex = ctx.index
        self.roles = ctx.model(roles)
        self.loops: list[TrainingLoop] = []
        self._build()

    # -- classification of calls -----------------------------------------------------------------
    def is_backward(self, call: cst.Call, scope: Scope) -> bool:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("backward", "manual_backward"):
            return True
        return self.index.resolve(func, scope) == "torch.autograd.backward"

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
        # nothing known about the receiver: a bare `.step()` (or with a closure) that is not a
        # scheduler's and not an environment's `env.step(action)`
        return role is None and len(positional_args(call)) == 0 and not call.args

    def is_scheduler_step(self, call: cst.Call, scope: Scope) -> bool:
        func = call.func
        return (isinstance(func, cst.Attribute) and func.attr.value == "step"
                and self.roles.of(func.value, scope) == SCHEDULER)

    # -- same-file helpers -------------------------------------------------------------------------
    def callee(self, call: cst.Call, scope: Scope) -> FunctionInfo | None:
        """The function or method of this file that `call` runs, when it can be told."""
        func = call.func
        if isinstance(func, cst.Name):
            if self.index.resolve(func, scope) is not None:  # imported or a builtin, not ours
                return None
            candidates = [f for f in self.index.functions_named(func.value) if f.class_name is None]
            return candidates[0] if len(candidates) == 1 else None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            class_name = _class_of_scope(scope)
            if class_name:
                candidates = self.index.functions_named(func.attr.value, class_name)
                return candidates[0] if candidates else None
        return None

    def reachable_calls(self, node: cst.CSTNode, scope: Scope, via: tuple[cst.Call, ...] = (),
                        seen: frozenset = frozenset()) -> Iterator[CallRef]:
        """Calls under `node`, then the calls inside same-file helpers it calls (depth-limited)."""
        for call in calls_in(node):
            yield CallRef(call, scope, via)
            if len(via) >= _MAX_CALL_DEPTH:
                continue
            target = self.callee(call, scope)
            if target is not None and target.node not in seen and target.node is not node:
                yield from self.reachable_calls(target.node.body, target.scope, via + (call,),
                                                seen | {target.node})

    # -- building ----------------------------------------------------------------------------------
    def _build(self) -> None:
        for loop in self.index.loops:
            scope = self.index.scope_at(loop)
            backward, steps = [], []
            for ref in self.reachable_calls(loop.body, scope):
                if self.is_backward(ref.node, ref.scope):
                    backward.append(ref)
                elif self.is_optimizer_step(ref.node, ref.scope):
                    steps.append(ref)
            if backward and steps:
                self.loops.append(TrainingLoop(loop, self.index.function_at(loop), scope, backward, steps))
        nodes = {tl.node for tl in self.loops}
        for tl in self.loops:
            tl.innermost = not any(inner in nodes for inner in walk(tl.node.body) if inner is not tl.node)


def training_model(ctx) -> TrainingModel:
    """The file's training-loop model, shared by every rule: `ctx.model(training_model)`."""
    return TrainingModel(ctx)


def _class_of_scope(scope: Scope) -> str | None:
    current: Scope | None = scope
    while current is not None:
        if current.kind == "class":
            return current.name
        current = current.parent
    return None

