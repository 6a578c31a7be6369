"""Module mode (`train()`/`eval()`) and grad mode (`no_grad`, `inference_mode`, `set_grad_enabled`)
along the code of one file, built once and queried by the TL3xx rules.

The two switches are independent, so the model tracks both through each function with a small
abstract interpreter over statements:

- the **mode facts** of each model (keyed by its normalised expression, `self.model`, `model`):
  the set of ways it may have been left (`eval`, `train`, freshly built, restored to a saved mode,
  chosen by a condition, unknown), each fact remembering the call that set it;
- the **grad state**: on, off, or chosen by a condition;
- branches join (a model put in train mode on one branch and eval mode on the other by the same
  `if` is "chosen by the condition", the train/val phase idiom), loops iterate to a fixpoint so
  that what the end of one iteration leaves reaches the next iteration's backward, `continue`,
  `break` and `return` leave by their own edges, `finally` always runs;
- same-file functions and methods are run in place where they are called (a few levels deep),
  with their parameters standing for the caller's arguments, and `@contextmanager` helpers are
  split at their `yield` around the `with` body;
- a function's entry state is the join of the states at its same-file call sites, so an
  `evaluate()` whose callers all call `model.eval()` (or wrap the call in `no_grad`) is known to
  start that way.

Rules read three things: `forwards()` (each forward call with the model's mode facts and the grad
state there), `unrestored()` (eval calls in a training loop that the next backward still sees) and
the evaluation-region helpers (`is_evaluation_function`, `evaluation_loop_of`, `computes_grad`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator, NamedTuple

import libcst as cst

from trainlint.model.index import (FunctionInfo, Scope, dotted_name, iter_children, keyword_arg, positional_args,
                                   unpacked_position, walk)
from trainlint.model import file_facts
from trainlint.model.file_facts import file_fact
from trainlint.model.layers import FREE, LIBRARY, verdict
from trainlint.model.roles import OPTIMIZER, SCALER, role_of_callee
from trainlint.model.training import TrainingModel, training_model

# -- vocabulary ------------------------------------------------------------------------------------
GRAD_OFF_CONTEXTS = frozenset({
    "torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.inference_mode",
    "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode",
})
# the words a project file must hold to be read for grad-mode or module-mode effects (summaries.py)
GRAD_WORDS = ("no_grad", "inference_mode", "set_grad_enabled", "grad_mode")
MODE_WORDS = (".eval(", ".train(")
GRAD_ON_CONTEXTS = frozenset({"torch.enable_grad", "torch.autograd.enable_grad",
                              "torch.autograd.grad_mode.enable_grad"})
GRAD_SETTERS = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled",
                          "torch.autograd.grad_mode.set_grad_enabled", "torch._C._set_grad_enabled"})
CONTEXTMANAGER = frozenset({"contextlib.contextmanager", "contextmanager"})
# calls that compute gradients: a region holding one is not an evaluation
GRAD_FUNCTIONS = frozenset({
    "torch.autograd.grad", "torch.autograd.backward", "torch.func.grad", "torch.func.grad_and_value",
    "torch.func.vjp", "torch.func.jacrev", "torch.func.jacfwd", "torch.func.hessian",
    "torch.autograd.functional.jacobian", "torch.autograd.functional.hessian",
    "torch.autograd.functional.vjp", "torch.autograd.functional.jvp", "functorch.grad", "functorch.vjp",
})
# `x.to(dev)`, `DDP(model)`, `accelerator.unwrap_model(model)`: the same model
_PASS_THROUGH_METHODS = frozenset({"to", "cuda", "cpu", "float", "half", "bfloat16", "double", "train", "eval",
                                   "requires_grad_"})
_UNWRAPPERS = frozenset({"unwrap_model", "unwrap", "extract_model_from_parallel", "compile",
                         "DistributedDataParallel", "DataParallel", "DDP", "FSDP", "FullyShardedDataParallel",
                         "prepare_model", "_unwrap_model"})
_WRAPPER_ATTRS = frozenset({"module", "_orig_mod", "_forward_module"})
_FORWARD_METHODS = frozenset({"forward", "generate"})
_MODULE_CONSTRUCTOR_PREFIXES = ("torch.nn.", "torchvision.models.", "timm.create_model", "timm.models.")
_NOT_CONSTRUCTORS = ("torch.nn.parallel", "torch.nn.DataParallel", "torch.nn.functional", "torch.nn.utils",
                     "torch.nn.init", "torch.nn.Parameter")
_MODULE_BASES = re.compile(r"(^|\.)(Module|LightningModule|PreTrainedModel|Sequential|ModuleDict|ModuleList)$")

EVAL_FUNCTION_NAME = re.compile(
    r"^_*(?:(?:evaluate|evaluation|validate|validation|valid|val|eval|test)(?:_.*)?"
    r"|.*_(?:evaluate|evaluation|validate|validation|val|eval|test))$", re.IGNORECASE)
# pytest's test functions are named like evaluations; these test-loop names are not
_PYTEST_NAME = re.compile(r"^test_(?!(?:epoch|loop|model|one_epoch|step|batch|dataset|set|split)$)", re.IGNORECASE)
EVAL_LOADER_TEXT = re.compile(r"(?:^|[^a-z])(?:val|valid|validation|test|testing|eval|evaluation|dev|holdout)"
                              r"(?:[^a-z]|$)", re.IGNORECASE)

# an `if` testing the mode (`if was_training:`, `if self.training:`, `if phase == "train":`)
_MODE_TEST = re.compile(r"train|mode", re.IGNORECASE)
# external helpers that (by their name) put a model they receive back in train mode
_TRAIN_HELPER = re.compile(r"(^|_)train(_mode|ing_mode)?$|^set_train|^train_mode|^to_train", re.IGNORECASE)

_MAX_INLINE_DEPTH = 3
_MAX_ENTRY_DEPTH = 3
_LOOP_ROUNDS = 4
_BUDGET = 40_000  # statements interpreted per function run; beyond it the run is abandoned


# -- facts and states ------------------------------------------------------------------------------
TRAIN, EVAL, NEW, RESTORE, CHOSEN, UNKNOWN, ENTRY = "train", "eval", "new", "restore", "chosen", "unknown", "entry"
TRAINED = "trained"  # no switch seen, but a caller trains the model in a loop before the call
TRAINING_KINDS = (TRAIN, NEW, TRAINED)
ON, OFF, COND = "on", "off", "cond"
GRAD_ON = frozenset({ON})


class Fact(NamedTuple):
    """One way a model's mode may have been left.

    `node` is the call (or assignment) that set it, `site` the call in the analysed function that
    led there (the same node when it is in that function; None when it comes from a caller),
    `anchor` the call in the innermost training loop's own body that led there, `in_training`
    whether it was set while a training loop was running, `via` the function where `node` is.
    """

    kind: str
    node: cst.CSTNode | None = None
    site: cst.CSTNode | None = None
    anchor: cst.CSTNode | None = None
    in_training: bool = False
    via: str | None = None


ENTRY_FACTS = frozenset({Fact(ENTRY)})
UNKNOWN_FACTS = frozenset({Fact(UNKNOWN)})


class State:
    """Mode facts per model key and the grad state; immutable, compared by value."""

    __slots__ = ("modes", "grad")

    def __init__(self, modes: dict[str, frozenset[Fact]], grad: frozenset[str]) -> None:
        self.modes = modes
        self.grad = grad

    def facts(self, key: str) -> frozenset[Fact]:
        return self.modes.get(key, ENTRY_FACTS)

    def set(self, key: str, facts: frozenset[Fact]) -> "State":
        modes = dict(self.modes)
        modes[key] = facts
        return State(modes, self.grad)

    def with_grad(self, grad: frozenset[str]) -> "State":
        return State(self.modes, grad)

    def without_prefix(self, prefix: str) -> "State":
        return State({k: v for k, v in self.modes.items() if not k.startswith(prefix)}, self.grad)

    def __eq__(self, other) -> bool:
        return isinstance(other, State) and self.grad == other.grad and self.modes == other.modes

    __hash__ = None  # type: ignore[assignment]


def join(a: State | None, b: State | None) -> State | None:
    if a is None:
        return b
    if b is None or a is b:
        return a
    modes = {}
    for key in a.modes.keys() | b.modes.keys():
        modes[key] = a.facts(key) | b.facts(key)
    return State(modes, a.grad | b.grad)


def join_all(states: Iterable[State | None]) -> State | None:
    result = None
    for state in states:
        result = join(result, state)
    return result


@dataclass
class Outcome:
    """How a block can be left: falling through, returning, breaking, continuing."""

    fall: State | None = None
    ret: State | None = None
    brk: State | None = None
    cont: State | None = None

    def absorb(self, other: "Outcome") -> None:
        self.ret = join(self.ret, other.ret)
        self.brk = join(self.brk, other.brk)
        self.cont = join(self.cont, other.cont)


@dataclass(frozen=True)
class Frame:
    """Where statements run: the function's scope, what its parameters stand for in the analysed
    function, a prefix for its own locals, and the calls that led into it."""

    function: FunctionInfo | None
    scope: Scope
    subst: dict
    prefix: str = ""
    chain: tuple[cst.Call, ...] = ()
    active: frozenset = frozenset()
    flags: dict = field(default_factory=dict)  # parameters this call binds to a literal True/False

    @property
    def depth(self) -> int:
        return len(self.chain)


@dataclass(eq=False)
class Forward:
    """A forward call of a model in the analysed function, with what is known there."""

    call: cst.Call
    key: str
    function: FunctionInfo | None
    facts: frozenset[Fact]
    grad: frozenset[str]
    method: str | None  # None for `model(x)`, else "forward" / "generate"
    # a forward in a helper that this function's call `via` runs with grad off by the literal it
    # passes (`run_epoch(model, val_loader, train=False)` into `with torch.set_grad_enabled(train)`)
    via: cst.Call | None = None
    flags: tuple[tuple[str, bool], ...] = ()


@dataclass(eq=False)
class Unrestored:
    """An eval call in a training loop that a later backward of that loop still sees."""

    anchor: cst.CSTNode
    key: str
    fact: Fact
    backward: cst.Call
    loop: cst.CSTNode


class _Abandon(Exception):
    pass


@dataclass(eq=False)
class Flow:
    function: FunctionInfo | None
    complete: bool = True
    at_call: dict = field(default_factory=dict)  # call node -> State before it (analysed function only)
    forwards: list[Forward] = field(default_factory=list)
    unrestored: list[Unrestored] = field(default_factory=list)


# -- the model ------------------------------------------------------------------------------------
class ModeModel:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.index = ctx.index
        self.training: TrainingModel = ctx.model(training_model)
        self.training_loops = {loop.node: loop for loop in self.training.loops}
        self._flows: dict[object, Flow] = {}
        self._entries: dict[object, State] = {}
        self._in_progress: set = set()
        self._computes_grad: dict[tuple[cst.CSTNode, tuple], bool] = {}
        self._module_classes: dict[str, bool] = {}
        self._trained: frozenset[str] | None = None
        self._frozen: frozenset[str] = frozenset()

    # -- public queries ----------------------------------------------------------------------------
    def flow(self, function: FunctionInfo | None) -> Flow:
        """The interpreted flow of a function (None: the module's top-level code)."""
        key = function.node if function is not None else self.ctx.module
        if key not in self._flows:
            self._in_progress.add(key)
            try:
                self._flows[key] = self._run(function)
            finally:
                self._in_progress.discard(key)
        return self._flows[key]

    def candidate_functions(self) -> list[FunctionInfo | None]:
        """Functions worth interpreting: those with a mode switch, a training loop, an evaluation,
        and the module's own code."""
        wanted: set = set()
        for site in self.index.calls:
            func = site.node.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("eval", "train") and site.function:
                wanted.add(site.function.node)
        # helpers that functions switching modes call may run in the mode their caller chose, and
        # functions calling a switching helper run in the mode it leaves
        switching = set(wanted)
        for site in self.index.calls:
            target = self.index.callee(site.node, site.scope)
            if target is None:
                continue
            if site.function is not None and site.function.node in switching or (
                    site.function is None and _is_mode_call(site.node)):
                wanted.add(target.node)
            if target.node in switching and site.function is not None:
                wanted.add(site.function.node)
        for loop in self.training.loops:
            if loop.function is not None:
                wanted.add(loop.function.node)
        for function in self.index.functions:
            if self.is_evaluation_function(function):
                wanted.add(function.node)
        for loop in self.index.loops:
            if self.is_evaluation_loop(loop):
                function = self.index.function_at(loop)
                if function is not None:
                    wanted.add(function.node)
        result: list[FunctionInfo | None] = [None]
        result += [f for f in self.index.functions if f.node in wanted]
        return result

    def forwards(self) -> Iterator[Forward]:
        for function in self.candidate_functions():
            yield from self.flow(function).forwards

    def unrestored(self) -> list[Unrestored]:
        """Eval calls in training loops that a later backward still sees, once per anchor."""
        found: dict[cst.CSTNode, Unrestored] = {}
        # the loop's own function first: its keys are the names written there; but an anchor in
        # another function (the caller's `evaluate(net)` seen again through the helper's loop) is
        # named in the terms of the flow of the function that holds it
        functions = [loop.function for loop in self.training.loops if loop.function is not None] + [None]
        seen = set()
        named_here: set[cst.CSTNode] = set()  # anchors named by the flow of their own function
        for function in functions:
            key = function.node if function is not None else None
            if key in seen:
                continue
            seen.add(key)
            for item in self.flow(function).unrestored:
                if item.anchor not in found or (item.anchor not in named_here and
                                                self.index.function_at(item.anchor) is function):
                    found[item.anchor] = item
                    if self.index.function_at(item.anchor) is function:
                        named_here.add(item.anchor)
        return list(found.values())

    def undone_by_next_phase(self, item: Unrestored) -> bool:
        """Alternating phases (a GAN: `D.train(); G.eval()` for the discriminator's phase, `G.train();
        D.eval()` for the generator's): the `eval()` freezes a partner network for one phase, not an
        evaluation. It is undone when the loop calls `train()` on that network before coming back
        to the eval (later in the iteration or at the top of the next), an optimizer steps in between
        (the other phase's update), and none stepped in between holds its parameters (known from the
        optimizer's construction; when that is not known, the loop must step two or more optimizers,
        one per phase)."""
        between = self.until_train(item)
        if between is None or not any(ref.node is item.backward for ref in between):
            return False
        loop = self.training_loops[item.loop]
        name = _last_component(item.key)
        steps = [ref for ref in between if self.training.is_optimizer_step(ref.node, ref.scope)]
        if not steps:
            return False  # no phase update happens while it is frozen: its own backward ran in eval mode
        stepped_receivers = {dotted_name(ref.node.func.value) for ref in loop.step_calls}
        for ref in steps:
            owners = self._optimizer_owners(ref.node, ref.scope)
            if owners is None:
                if len(stepped_receivers) < 2:
                    return False
            elif name in owners:
                return False
        return True

    def until_train(self, item: Unrestored) -> list | None:
        """The loop's calls from the `eval()` of `item` up to the next `train()` of the same module
        (later in the iteration or, wrapping, earlier in the next one); None when there is none."""
        loop = self.training_loops.get(item.loop)
        if loop is None:
            return None
        refs = loop.calls
        start = next((i for i, ref in enumerate(refs) if ref.anchor is item.anchor), None)
        if start is None:
            return None
        name = _last_component(item.key)
        between = []
        for ref in refs[start + 1:] + refs[:start]:
            func = ref.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "train" and self._is_train_of(ref.node, name, ref):
                return between
            between.append(ref)
        return None

    def _is_train_of(self, call: cst.Call, name: str, ref) -> bool:
        """`call` is `<name>.train()`, in the loop or in a helper it calls (`G.train()` in
        `generator_step(generator, ...)`, its parameter standing for the loop's argument)."""
        args = positional_args(call)
        if len(call.args) > 1 or (args and not _is_true(args[0].value)):
            return False
        receiver = dotted_name(_strip_wrappers(call.func.value))
        for site in reversed(ref.via):  # innermost helper first, back to the loop's own call
            if receiver is None:
                return False
            target = self.index.callee(site, self.index.scope_at(site))
            if target is None:
                return False
            caller = Frame(self.index.function_at(site), self.index.scope_at(site), {})
            mapping = self._argument_keys(site, target, caller)
            head = receiver.split(".")[0]
            receiver = mapping[head] + receiver[len(head):] if head in mapping else None
        return receiver is not None and _last_component(receiver) == name

    def _optimizer_owners(self, step: cst.Call, scope: Scope) -> set[str] | None:
        """The modules whose parameters the optimizer of `opt.step()` / `scaler.step(opt)` holds,
        from its construction (`Adam(D.parameters())`); None when that is not seen."""
        func = step.func
        args = positional_args(step)
        receiver = args[0].value if args and self.training.roles.of(func.value, scope) == SCALER else func.value
        if isinstance(receiver, cst.Name):
            values = [b.value for b in scope.lookup(receiver.value) if b.kind == "assign"]
        elif isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) and \
                receiver.value.value == "self":
            values = self.index.self_attribute_values(receiver.attr.value, scope)
        else:
            return None
        owners: set[str] = set()
        for value in values:
            if value is None:
                return None
            found = _parameter_owners(value, scope)
            if not found:
                return None
            owners |= found
        return owners or None

    def is_evaluation_function(self, function: FunctionInfo | None) -> bool:
        return function is not None and is_evaluation_name(function.name)

    def is_test_function(self, function: FunctionInfo | None) -> bool:
        """A pytest/unittest test (`test_forward_matches`): it checks behaviour, it does not
        evaluate a model, and may run a configuration on purpose."""
        return function is not None and _PYTEST_NAME.match(function.name) is not None

    def is_evaluation_loop(self, loop: cst.CSTNode) -> bool:
        """A loop over a validation/test loader (`for xb, yb in val_loader`, `enumerate(tqdm(test_dl))`)."""
        if not isinstance(loop, cst.For):
            return False
        return EVAL_LOADER_TEXT.search(self.ctx.code_for(_unwrap_iterable(loop.iter))) is not None

    def evaluation_loop_of(self, node: cst.CSTNode, function: FunctionInfo | None) -> cst.For | None:
        """The innermost validation/test loader loop around `node` within its function."""
        stop = function.node if function is not None else None
        for ancestor in self.index.ancestors(node):
            if ancestor is stop or isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return None
            if isinstance(ancestor, cst.For) and self.is_evaluation_loop(ancestor):
                return ancestor
        return None

    def in_loop(self, node: cst.CSTNode, function: FunctionInfo | None) -> bool:
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(ancestor, (cst.For, cst.While, cst.ListComp, cst.SetComp, cst.DictComp,
                                     cst.GeneratorExp)):
                return True
        return False

    def computes_grad(self, node: cst.CSTNode, scope: Scope, flags: tuple[tuple[str, bool], ...] = ()) -> bool:
        """`node` (directly or through same-file helpers) runs a backward, an optimizer step,
        `torch.autograd.grad`, `enable_grad` or turns `requires_grad` on: not an evaluation.
        With `flags` (parameters a caller binds to literals), a branch those values skip
        (`if train: loss.backward()` with `train=False`) does not count."""
        memo = (node, flags)
        if memo in self._computes_grad:
            return self._computes_grad[memo]
        result = False
        for ref in self.training.reachable_calls(node, scope):
            call = ref.node
            if flags and _skipped_branch(self.index, ref.via[0] if ref.via else call, node, dict(flags)):
                continue
            if self.training.is_backward(call, ref.scope) or self.training.is_optimizer_step(call, ref.scope):
                result = True
                break
            name = self.index.resolve(call.func, ref.scope)
            if name in GRAD_FUNCTIONS or name in GRAD_ON_CONTEXTS:
                result = True
                break
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("requires_grad_", "retain_grad"):
                args = positional_args(call)
                if not args or not _is_false(args[0].value):
                    result = True
                    break
        if not result:
            for sub in walk(node):
                if isinstance(sub, cst.Assign) and any(
                        isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
                        for t in sub.targets) and not _is_false(sub.value):
                    result = True
                    break
        self._computes_grad[memo] = result
        return result

    def scope_of(self, function: FunctionInfo | None) -> Scope:
        return function.scope if function is not None else self.index.module_scope

    def is_graph_free_evaluation(self, forward: Forward) -> bool:
        """TL301's region: the forward is part of an evaluation that needs no gradient: a
        validation/test loader loop, or the code from the `eval()` call(s) to the forward (the
        whole function when the mode comes from its callers), holding no backward, no optimizer
        step and no `autograd.grad`, and evaluating batches (in a loop) or named as an evaluation."""
        function = forward.function
        if self.is_test_function(function):
            return False
        scope = self.scope_of(function)
        loop = self.evaluation_loop_of(forward.call, function)
        if loop is not None and not self.computes_grad(loop, scope):
            return True
        sites = [fact.site for fact in forward.facts]
        if function is not None and any(site is None for site in sites):
            region = function.node.body
        else:
            region = self.common_ancestor([s for s in sites if s is not None] + [forward.call])
        if region is None or self.computes_grad(region, scope):
            return False
        return self.in_loop(forward.call, function) or self.is_evaluation_function(function)

    def no_grad_evaluation_region(self, forward: Forward) -> cst.CSTNode | None:
        """TL302's region: a validation/test loader loop, or the body of a function named as an
        evaluation, with no backward, optimizer step or `autograd.grad` in it (None: not an
        evaluation)."""
        function = forward.function
        if self.is_test_function(function):
            return None
        scope = self.scope_of(function)
        if forward.via is not None:
            # a helper its caller runs with grad off by a literal (`train=False`): that pass is an
            # evaluation unless, with that value, it still computes gradients
            body = function.node.body if function is not None else None
            return body if body is not None and not self.computes_grad(body, scope, forward.flags) else None
        loop = self.evaluation_loop_of(forward.call, function)
        if loop is not None and not self.computes_grad(loop, scope):
            return loop
        if self.is_evaluation_function(function) and not self.computes_grad(function.node.body, scope):
            return function.node.body
        return None

    def contains(self, outer: cst.CSTNode, node: cst.CSTNode | None) -> bool:
        return node is not None and (node is outer or outer in set(self.index.ancestors(node)))

    def common_ancestor(self, nodes: list) -> cst.CSTNode | None:
        """The innermost node holding all `nodes` (themselves included)."""
        if not nodes:
            return None
        chain = [nodes[0]] + list(self.index.ancestors(nodes[0]))
        others = [set([n] + list(self.index.ancestors(n))) for n in nodes[1:]]
        for node in chain:
            if all(node in other for other in others):
                return node
        return None

    def is_trained(self, key: str) -> bool:
        """A model the file trains: `key.train()` somewhere, or its parameters go to an optimizer,
        `accelerator.prepare`, `fabric.setup` or DDP (and it is not frozen)."""
        return _last_component(key) in self.trained_names

    @property
    def trained_names(self) -> frozenset[str]:
        if self._trained is None:
            self._trained = self._trained_names()
        return self._trained

    @property
    def frozen_names(self) -> frozenset[str]:
        self.trained_names  # noqa: B018  (computes both)
        return self._frozen

    def mode_matters(self, receiver: cst.BaseExpression, scope: Scope, facts: Iterable[Fact] = ()) -> bool:
        """Whether switching the module `receiver` names between train and eval changes what it
        computes. False only when every construction of it is known and each builds a mode-free
        module (a loss criterion, a GroupNorm-only net; `layers.py`) or a library class not known to
        hold dropout/batch norm; a `NEW` fact names the construction a caller made."""
        calls = [(_strip_wrappers(f.node.value), self.index.scope_at(f.node)) for f in facts
                 if f.kind == NEW and isinstance(f.node, (cst.Assign, cst.AnnAssign))
                 and isinstance(_strip_wrappers(f.node.value), cst.Call)]
        if not calls or any(f.kind not in (NEW, ENTRY) for f in facts):
            own = self._constructions(receiver, scope)
            if own is None:
                return True
            calls += own
        if not calls:
            return True
        return any(verdict(self.index, call, call_scope) not in (FREE, LIBRARY) for call, call_scope in calls)

    def _constructions(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> list | None:
        """The calls that bind `expr` (a name or `self.<attr>`), or None when some binding is not a
        call (a parameter, an item of a dict, ...)."""
        expr = _strip_wrappers(expr)
        if depth > 3:
            return None
        found: list = []
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            values = [b.value if b.value is not None else _prepared_argument(b.node, expr.value)
                      for b in bindings if b.kind == "assign"]
            params = [b for b in bindings if b.kind == "param"]
            if len(values) + len(params) != len(bindings):
                return None
            if params:  # what the same-file callers pass for it
                function = self.index.function_at(params[0].node)
                sites = self.index.callers(function) if function is not None else []
                if not sites:
                    return None
                for site in sites:
                    arg = self.index.argument_for(site.node, function, expr.value)
                    more = self._constructions(arg, site.scope, depth + 1) if arg is not None else None
                    if more is None:
                        return None
                    found += more
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            values = self.index.self_attribute_values(expr.attr.value, scope)
        else:
            return None
        for value in values:
            if isinstance(value, (cst.Name, cst.Attribute)):
                if dotted_name(value) == dotted_name(expr):
                    continue  # `vae, opt = accelerator.prepare(vae, opt)`: the module it already was
                more = self._constructions(value, scope, depth + 1)  # another name for the same module
                if more is None:
                    return None
                found += more
                continue
            if not isinstance(value, cst.Call):
                return None
            inner = _strip_wrappers(value)
            func = inner.func if isinstance(inner, cst.Call) else None
            last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if last in _UNWRAPPERS and positional_args(inner):  # `accelerator.unwrap_model(vae)`: the same module
                wrapped = positional_args(inner)[0].value
                if dotted_name(wrapped) == dotted_name(expr):
                    continue  # `vae = unwrap_model(vae)`: its other bindings say what it is
                more = self._constructions(wrapped, scope, depth + 1)
                if more is None:
                    return None
                found += more
                continue
            if isinstance(inner, cst.Call):  # `nn.CrossEntropyLoss().to(device)`
                found.append((inner, self.index.scope_at(inner)))
                continue
            if inner is not value:  # `model = model.to(device)`: the same module
                if dotted_name(inner) == dotted_name(expr):
                    continue
                more = self._constructions(inner, scope, depth + 1)
                if more is None:
                    return None
                found += more
                continue
            found.append((value, self.index.scope_at(value)))
        return found

    def key_of(self, expr: cst.BaseExpression, scope: Scope) -> str | None:
        return self._key(expr, Frame(None, scope, {}))

    # -- entry states ------------------------------------------------------------------------------
    def entry_state(self, function: FunctionInfo | None, depth: int = 0) -> State:
        """The join of the states at the function's same-file call sites, translated to its
        parameters; with no known caller, nothing is known of modes and grad is on."""
        default = State({}, frozenset({ON}))
        if function is None:
            return default
        if function.node in self._entries:
            return self._entries[function.node]
        sites = self.index.callers(function)
        if not sites or depth >= _MAX_ENTRY_DEPTH:
            return default
        states = []
        for site in sites:
            caller_key = site.function.node if site.function is not None else self.ctx.module
            if caller_key in self._in_progress:
                states.append(State({}, frozenset({ON, OFF})))
                continue
            flow = self.flow(site.function)
            before = flow.at_call.get(site.node)
            if before is None or not flow.complete:
                states.append(State({}, frozenset({ON, OFF})))
                continue
            states.append(self._translate_entry(site, function, before))
        state = join_all(states) or default
        self._entries[function.node] = state
        return state

    def _translate_entry(self, site, function: FunctionInfo, before: State) -> State:
        caller_frame = Frame(site.function, site.scope, {})
        mapping = self._argument_keys(site.node, function, caller_frame)  # callee name -> caller key
        local_names = set(function.scope.bindings)
        modes: dict[str, frozenset[Fact]] = {}
        implicit = self._trains_before(site)
        for caller_key, facts in before.modes.items():
            facts = frozenset(f._replace(site=None) for f in facts)
            passed = False
            for name, arg_key in mapping.items():
                if caller_key == arg_key or caller_key.startswith(arg_key + "."):
                    modes[name + caller_key[len(arg_key):]] = facts
                    passed = True
            # a model the function reaches as a global keeps the caller's name; one passed in is
            # known only by its parameter's (kept under both, `model.train()` would leave the
            # caller's name in eval mode and a backward of the helper would see a stale eval)
            if not passed and caller_key.split(".")[0] not in local_names:
                modes.setdefault(caller_key, facts)
        if implicit:
            # no recorded switch, but the caller has been training this model: it is in train mode
            for name, arg_key in mapping.items():
                if name not in modes and self.is_trained(arg_key):
                    modes[name] = frozenset({Fact(TRAINED, site.node, None, via=_function_name(site.function),
                                                  in_training=True)})
        return State(modes, before.grad)

    def _trains_before(self, site) -> bool:
        """The call site is inside a training loop, or after one in the same function."""
        function_node = site.function.node if site.function is not None else None
        for loop in self.training.loops:
            loop_function = loop.function.node if loop.function is not None else None
            if loop_function is not function_node:
                continue
            if loop.node in set(self.index.ancestors(site.node)):
                return True
            if _precedes(self.index, loop.node, site.node):
                return True
        return False

    # -- building the interpretation ---------------------------------------------------------------
    def _run(self, function: FunctionInfo | None) -> Flow:
        flow = Flow(function)
        run = _Run(self, flow)
        if function is None:
            body = [s for s in self.ctx.module.body if not isinstance(s, (cst.FunctionDef, cst.ClassDef))]
            frame = Frame(None, self.index.module_scope, {})
            entry = State({}, frozenset({ON}))
        else:
            body = _body(function.node)
            frame = Frame(function, function.scope, {})
            entry = self.entry_state(function)
            grad = decorator_grad(self.index, function)
            if grad is not None:
                entry = entry.with_grad(frozenset({grad}))
        try:
            run.block(body, entry, frame)
        except (_Abandon, RecursionError):
            flow.complete = False
        return flow

    def _argument_keys(self, call: cst.Call, target: FunctionInfo, frame: Frame) -> dict[str, str]:
        """For each parameter of `target`, the caller-side key of the argument bound to it."""
        params = target.node.params
        positional = [p.name.value for p in (*params.posonly_params, *params.params)]
        mapping: dict[str, str] = {}
        func = call.func
        if target.class_name is not None and positional and positional[0] in ("self", "cls"):
            receiver_key = self._key(func.value, frame) if isinstance(func, cst.Attribute) else None
            if receiver_key:
                mapping[positional[0]] = receiver_key
            positional = positional[1:]
        args = positional_args(call)
        for name, arg in zip(positional, args):
            key = self._key(arg.value, frame)
            if key:
                mapping[name] = key
        for arg in call.args:
            if arg.keyword is not None:
                key = self._key(arg.value, frame)
                if key:
                    mapping[arg.keyword.value] = key
        return mapping

    def _key(self, expr: cst.BaseExpression, frame: Frame, depth: int = 0) -> str | None:
        """A model's normalised key in the analysed function's terms, or None."""
        if depth > 6:
            return None
        if isinstance(expr, cst.Call):
            func = expr.func
            args = positional_args(expr)
            if isinstance(func, cst.Attribute) and func.attr.value in _PASS_THROUGH_METHODS:
                return self._key(func.value, frame, depth + 1)
            last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if last in _UNWRAPPERS and args:
                return self._key(args[0].value, frame, depth + 1)
            return None
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _WRAPPER_ATTRS:
                return self._key(expr.value, frame, depth + 1)
            base = self._key(expr.value, frame, depth + 1)
            return f"{base}.{expr.attr.value}" if base else None
        if isinstance(expr, cst.Name):
            name = expr.value
            if name in frame.subst:
                return frame.subst[name]
            bindings = frame.scope.lookup(name)
            if len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
                value = bindings[0].value
                if isinstance(value, (cst.Attribute, cst.Name)) or (
                        isinstance(value, cst.Call) and self._key(value, frame, depth + 1) is not None):
                    aliased = self._key(value, frame, depth + 1)
                    if aliased:
                        return aliased
            if frame.prefix and name in frame.scope.bindings:
                return frame.prefix + name
            return name
        return None

    def is_module_constructor(self, call: cst.Call, scope: Scope) -> bool:
        """A call that builds a fresh module (in train mode): a torch.nn layer, a torchvision/timm
        model, or a same-file `nn.Module` subclass."""
        name = self.index.resolve(call.func, scope)
        if name and name.startswith(_MODULE_CONSTRUCTOR_PREFIXES) and not name.startswith(_NOT_CONSTRUCTORS):
            return not name.startswith("torch.nn.") or name.rsplit(".", 1)[-1][:1].isupper()
        if isinstance(call.func, cst.Name) and call.func.value in self.index.classes:
            return self._is_module_class(call.func.value)
        return False

    def _is_module_class(self, name: str, depth: int = 0) -> bool:
        if name in self._module_classes:
            return self._module_classes[name]
        self._module_classes[name] = False
        result = False
        node = self.index.classes.get(name)
        if node is not None and depth < 5:
            for base in node.bases:
                text = dotted_name(base.value) or ""
                if _MODULE_BASES.search(text) or (text in self.index.classes and self._is_module_class(text, depth + 1)):
                    result = True
                    break
        self._module_classes[name] = result
        return result

    def _trained_names(self) -> frozenset[str]:
        """Last components of the models the file trains (see `is_trained`)."""
        names, frozen, called = set(), set(), set()
        for kind, name in file_facts.values(self.ctx, "modes.trained"):
            (names if kind == "train" else frozen if kind == "frozen" else called).add(name)
        self._frozen = frozenset(frozen - called)
        return frozenset(names - self._frozen)


def modes(ctx) -> ModeModel:
    """The file's mode model, shared by the TL3xx rules: `ctx.model(modes)`."""
    return ModeModel(ctx)


# -- the interpreter --------------------------------------------------------------------------------
class _Run:
    def __init__(self, model: ModeModel, flow: Flow) -> None:
        self.model = model
        self.index = model.index
        self.training = model.training
        self.flow = flow
        self.steps = 0
        # (training loop node, depth of the frame it runs in)
        self.loop_stack: list[tuple[cst.CSTNode, int]] = []
        self.flag_off = 0  # open `with set_grad_enabled(<parameter bound to False>)` blocks of a helper
        # models forwarded with grad on inside a training loop: the ones it trains
        self.grad_forwarded: set[str] = set()

    # statements
    def block(self, statements, state: State | None, frame: Frame) -> Outcome:
        outcome = Outcome()
        current = state
        for statement in statements:
            if current is None:
                break
            result = self.statement(statement, current, frame)
            outcome.absorb(result)
            current = result.fall
        outcome.fall = current
        return outcome

    def statement(self, node: cst.CSTNode, state: State, frame: Frame) -> Outcome:
        self.steps += 1
        if self.steps > _BUDGET:
            raise _Abandon()
        if isinstance(node, cst.SimpleStatementLine):
            return self.block(node.body, state, frame)
        if isinstance(node, (cst.Return, cst.Raise)):
            value = node.value if isinstance(node, cst.Return) else node.exc
            after = self.expression(value, state, frame) if value is not None else state
            return Outcome(ret=after) if isinstance(node, cst.Return) else Outcome()
        if isinstance(node, cst.Break):
            return Outcome(brk=state)
        if isinstance(node, cst.Continue):
            return Outcome(cont=state)
        if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            return Outcome(fall=self.assignment(node, state, frame))
        if isinstance(node, cst.If):
            return self.if_(node, state, frame)
        if isinstance(node, (cst.For, cst.While)):
            return self.loop(node, state, frame)
        if isinstance(node, cst.With):
            return self.with_(node, state, frame)
        if isinstance(node, (cst.Try, cst.TryStar)):
            return self.try_(node, state, frame)
        if isinstance(node, cst.Match):
            after = self.expression(node.subject, state, frame)
            outcome = Outcome()
            falls = []
            for case in node.cases:
                result = self.block(_body(case), after, frame)
                outcome.absorb(result)
                falls.append(result.fall)
            outcome.fall = join_all(falls + [after])
            return outcome
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return Outcome(fall=state)
        return Outcome(fall=self.expression(node, state, frame))

    def assignment(self, node, state: State, frame: Frame) -> State:
        value = node.value
        state = self.expression(value, state, frame) if value is not None else state
        if isinstance(node, cst.AugAssign) or value is None:
            return state
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if not isinstance(target, (cst.Name, cst.Attribute)):
                continue
            key = self.model._key(target, frame)
            if key is None:
                continue
            if isinstance(value, cst.Call) and self.model.is_module_constructor(value, frame.scope):
                state = state.set(key, frozenset({self._fact(NEW, node, frame)}))
                continue
            source = self.model._key(value, frame)
            if source is not None and source != key:
                if source in state.modes:
                    state = state.set(key, state.facts(source))
            elif source is None and key in state.modes:
                state = state.set(key, UNKNOWN_FACTS)
        return state

    def if_(self, node: cst.If, state: State, frame: Frame) -> Outcome:
        state = self.expression(node.test, state, frame)
        chosen = _flag_value(node.test, frame)
        if chosen is False:  # `if train:` in `_run_batch(x, train=False)`: only the other branch runs
            return self._else(node, state, frame)
        then = self.block(_body(node.body), state, frame)
        if chosen is True:
            return then
        other = self._else(node, state, frame)
        outcome = Outcome()
        outcome.absorb(then)
        outcome.absorb(other)
        outcome.fall = self._join_branches(node, state, then.fall, other.fall)
        return outcome

    def _else(self, node: cst.If, state: State, frame: Frame) -> Outcome:
        if isinstance(node.orelse, cst.If):
            return self.if_(node.orelse, state, frame)
        if isinstance(node.orelse, cst.Else):
            return self.block(_body(node.orelse.body), state, frame)
        return Outcome(fall=state)

    def _join_branches(self, node: cst.If, before: State, a: State | None, b: State | None) -> State | None:
        """Join two branches; a model put in train mode on one and eval mode on the other is in the
        mode the condition chose (the train/val phase idiom), neither fact on its own."""
        joined = join(a, b)
        if a is None or b is None or joined is None:
            return joined
        mode_test = _MODE_TEST.search(self.model.ctx.code_for(node.test)) is not None
        for key in a.modes.keys() | b.modes.keys():
            fa, fb = a.facts(key), b.facts(key)
            if fa == fb:
                continue
            kinds = {frozenset(f.kind for f in fa), frozenset(f.kind for f in fb)}
            if fa != before.facts(key) and fb != before.facts(key) and \
                    kinds == {frozenset({TRAIN}), frozenset({EVAL})}:
                joined = joined.set(key, frozenset({Fact(CHOSEN, node)}))
            elif mode_test and frozenset({TRAIN}) in kinds and (fa == before.facts(key) or fb == before.facts(key)):
                # `if was_training: model.train()` puts back the mode the model had
                joined = joined.set(key, frozenset({Fact(RESTORE, node)}))
        return joined

    def loop(self, node, state: State, frame: Frame) -> Outcome:
        if isinstance(node, cst.For):
            state = self.expression(node.iter, state, frame)
        training = node in self.model.training_loops
        if training:
            self.loop_stack.append((node, frame.depth))
        try:
            head = state
            outcome = Outcome()
            body = _body(node.body)
            for _ in range(_LOOP_ROUNDS):
                if isinstance(node, cst.While):
                    head = self.expression(node.test, head, frame)
                result = self.block(body, head, frame)
                outcome.ret = join(outcome.ret, result.ret)
                outcome.brk = join(outcome.brk, result.brk)
                new_head = join(join(head, result.fall), result.cont)
                if new_head == head:
                    break
                head = new_head
        finally:
            if training:
                self.loop_stack.pop()
        after = head
        if node.orelse is not None:
            after = self.block(_body(node.orelse.body), head, frame).fall
        return Outcome(fall=join(after, outcome.brk), ret=outcome.ret)

    def with_(self, node: cst.With, state: State, frame: Frame) -> Outcome:
        grad_before = state.grad
        exits: list[tuple[list, Frame]] = []
        opened_flag = 0
        for item in node.items:
            call = item.item
            flagged = self._flag_grad(call, frame)
            grad = flagged or context_grad(self.index, call, frame.scope)
            opened_flag += flagged == OFF
            if grad is not None:
                if isinstance(call, cst.Call):
                    for arg in call.args:
                        state = self.expression(arg.value, state, frame)
                state = state.with_grad(frozenset({grad}))
                continue
            manager = self._context_manager(call, frame)
            if manager is not None:
                target, inner = manager
                before, after = _split_at_yield(target.node)
                state = self.block(before, state, inner).fall or state
                exits.append((after, inner))
                continue
            state = self.expression(call, state, frame)
        self.flag_off += opened_flag
        try:
            result = self.block(_body(node.body), state, frame)
        finally:
            self.flag_off -= opened_flag
        fall = result.fall
        for after, inner in reversed(exits):
            if fall is not None:
                fall = self.block(after, fall, inner).fall or fall
            if result.ret is not None:
                result.ret = self.block(after, result.ret, inner).fall or result.ret
        restore = lambda s: s.with_grad(grad_before) if s is not None else None  # noqa: E731
        return Outcome(fall=restore(fall), ret=restore(result.ret), brk=restore(result.brk),
                       cont=restore(result.cont))

    def _flag_grad(self, expr: cst.BaseExpression, frame: Frame) -> str | None:
        """`with torch.set_grad_enabled(train):` where this call binds `train` to a literal."""
        if not frame.flags or not isinstance(expr, cst.Call) or len(expr.args) != 1 or \
                self.index.resolve(expr.func, frame.scope) not in GRAD_SETTERS:
            return None
        flag = _flag_value(expr.args[0].value, frame)
        return None if flag is None else ON if flag else OFF

    def _context_manager(self, expr, frame: Frame):
        if not isinstance(expr, cst.Call) or frame.depth >= _MAX_INLINE_DEPTH:
            return None
        target = self.index.callee(expr, frame.scope)
        if target is None or target.node in frame.active:
            return None
        if not any(self.index.resolve(_decorator_callee(d.decorator), target.scope.parent or target.scope)
                   in CONTEXTMANAGER for d in target.node.decorators):
            return None
        return target, self._callee_frame(expr, target, frame)

    def try_(self, node, state: State, frame: Frame) -> Outcome:
        body = self.block(_body(node.body), state, frame)
        outcome = Outcome()
        outcome.absorb(body)
        falls = []
        handler_entry = join(state, body.fall)
        for handler in node.handlers:
            result = self.block(_body(handler.body), handler_entry, frame)
            outcome.absorb(result)
            falls.append(result.fall)
        main = body.fall
        if node.orelse is not None and main is not None:
            result = self.block(_body(node.orelse.body), main, frame)
            outcome.absorb(result)
            main = result.fall
        fall = join_all([main] + falls)
        if node.finalbody is not None:
            final = _body(node.finalbody.body)
            fall = self.block(final, fall, frame).fall if fall is not None else None
            for name in ("ret", "brk", "cont"):
                value = getattr(outcome, name)
                if value is not None:
                    setattr(outcome, name, self.block(final, value, frame).fall or value)
        outcome.fall = fall
        return outcome

    # expressions and calls
    def expression(self, node: cst.CSTNode, state: State, frame: Frame) -> State:
        for call in _calls_post_order(node):
            state = self.call(call, state, frame)
        return state

    def call(self, call: cst.Call, state: State, frame: Frame) -> State:
        if frame.depth == 0:
            self.flow.at_call[call] = join(self.flow.at_call.get(call), state)
        model = self.model
        scope = frame.scope
        func = call.func
        name = self.index.resolve(func, scope)
        if name in GRAD_SETTERS:
            args = positional_args(call) or [a for a in call.args if a.keyword is not None]
            value = args[0].value if args else None
            flag = _flag_value(value, frame) if value is not None else None
            if flag is not None:
                return state.with_grad(frozenset({ON if flag else OFF}))
            grad = OFF if value is not None and _is_false(value) else ON if value is not None and _is_true(value) else COND
            return state.with_grad(frozenset({grad}))
        target = self.index.callee(call, scope) or self._mode_method(call, scope)
        if isinstance(func, cst.Attribute) and func.attr.value in ("eval", "train") and (
                target is None or _overrides_module_mode(target)):
            kind = self._mode_kind(call)
            key = model._key(func.value, frame) if kind is not None else None
            if key is not None:
                return state.set(key, frozenset({self._fact(kind, call, frame)}))
        if self.loop_stack and self.training.is_backward(call, scope):
            self._check_backward(call, state)
        self._record_forward(call, state, frame)
        if target is not None and frame.depth < _MAX_INLINE_DEPTH and target.node not in frame.active:
            after = self._inline(call, target, state, frame)
            if target.class_name is not None and self.index.callee(call, scope) is None:
                after = self._own_train_mode(call, target, after, frame)
            return after
        if target is None and call.args:
            summary = self.index.summary_of(func, scope, MODE_WORDS)
            if summary is not None and hasattr(summary, "mode_effect"):
                return self._project_mode_effects(call, summary, state, frame)
            state = self._external_train_helper(call, name, state, frame)
        return state

    def _mode_method(self, call: cst.Call, scope: Scope) -> FunctionInfo | None:
        """`model.train_custom()` on an instance of a class of this file (every binding of the name
        builds it) whose method switches modes (`self.train(); self.encoder.eval()`): followed like a
        helper, its `self` standing for the receiver."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)) or \
                func.attr.value in ("eval", "train", "forward", "__call__"):
            return None
        if not any(f.class_name is not None for f in self.index.functions_named(func.attr.value)):
            return None  # no class of this file defines it: `optimizer.step()`, `loss.backward()`
        # what builds the receiver: its assignments, or what same-file callers pass for a parameter
        # (`Discriminator(...).to(device)` in `main`, `discriminator` in `train_epoch`)
        constructions = self.model._constructions(func.value, scope)
        classes = {dotted_name(_strip_wrappers(c).func) if isinstance(_strip_wrappers(c), cst.Call) else None
                   for c, _ in constructions or ()}
        if len(classes) != 1 or None in classes or next(iter(classes)) not in self.index.classes:
            return None
        method = self.index.method(next(iter(classes)), func.attr.value)
        if method is None or not any(isinstance(n, cst.Attribute) and n.attr.value in ("eval", "train")
                                     for n in walk(method.node.body)):
            return None
        return method

    def _own_train_mode(self, call: cst.Call, method: FunctionInfo, state: State, frame: Frame) -> State:
        """After `model.train_custom()`, a method of the model's class that puts the model or some of
        its parts in train mode (`self.classifier_head.train()` beside a frozen `self.encoder`): it is
        the class's own way into training, so the model itself counts as restored; the parts the
        method leaves in eval mode keep their own facts."""
        key = self.model._key(call.func.value, frame)
        if key is None or not any(f.kind == EVAL for f in state.facts(key)):
            return state
        inside = set(walk(method.node))
        switched = [f for k, facts in state.modes.items() if k == key or k.startswith(key + ".")
                    for f in facts if f.node in inside]
        if not switched or not any(f.kind == TRAIN for f in switched) or \
                any(f.kind == EVAL for f in state.facts(key) if f.node in inside):
            return state
        return state.set(key, frozenset({self._fact(RESTORE, call, frame)}))

    def _project_mode_effects(self, call: cst.Call, summary, state: State, frame: Frame) -> State:
        """A function of another project file that calls `.eval()`/`.train()` on a parameter: the
        argument is left the way the function leaves it (`evaluate(model, loader)` that never
        calls `model.train()` again leaves `model` in eval mode, set at this call)."""
        positional = positional_args(call)
        for position, param in enumerate(summary.params):
            effect = summary.mode_effect(param)
            if effect is None:
                continue
            arg = keyword_arg(call, param)
            value = arg.value if arg is not None else positional[position].value if position < len(positional) else None
            key = self.model._key(value, frame) if value is not None else None
            if key is None:
                continue
            first, last = effect
            kind = RESTORE if last == "restore" or (first == EVAL and last == TRAIN) else \
                EVAL if last == "eval" else TRAIN
            if kind == RESTORE and not any(f.kind == EVAL for f in state.facts(key)):
                continue  # put back the way it was: nothing changes for the caller
            state = state.set(key, frozenset({self._fact(kind, call, frame)}))
        return state

    def _external_train_helper(self, call: cst.Call, name: str | None, state: State, frame: Frame) -> State:
        """`set_train_mode(model)` / `utils.train_mode(model)` from another module: the model it
        receives is taken as restored (its body cannot be seen)."""
        func = call.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if not _TRAIN_HELPER.search(last) or (name or "").startswith("torch."):
            return state
        for arg in call.args:
            key = self.model._key(arg.value, frame)
            if key is not None and any(f.kind == EVAL for f in state.facts(key)):
                state = state.set(key, frozenset({self._fact(RESTORE, call, frame)}))
        return state

    def _mode_kind(self, call: cst.Call) -> str | None:
        func = call.func
        if func.attr.value == "eval":
            return EVAL if not call.args else None
        args = call.args
        if len(args) > 1:
            return None
        if not args:
            receiver = func.value
            # `trainer.train()` starts a training run; only models take a mode
            if isinstance(receiver, cst.Name) and receiver.value not in ("self",) and \
                    re.search(r"trainer|agent|learner|runner|engine|pipeline|experiment", receiver.value, re.I):
                return None
            return TRAIN
        value = args[0].value
        if _is_false(value):
            return EVAL
        if _is_true(value):
            return TRAIN
        return RESTORE

    def _fact(self, kind: str, node: cst.CSTNode, frame: Frame) -> Fact:
        site = frame.chain[0] if frame.chain else node
        anchor = node
        if self.loop_stack:
            loop_depth = self.loop_stack[-1][1]
            if loop_depth < frame.depth:
                anchor = frame.chain[loop_depth]
        via = _function_name(frame.function)
        return Fact(kind, node, site, anchor, bool(self.loop_stack), via)

    def _check_backward(self, call: cst.Call, state: State) -> None:
        for key, facts in state.modes.items():
            for fact in facts:
                if fact.kind == EVAL and fact.in_training and fact.anchor is not None and self._trains(key):
                    self.flow.unrestored.append(Unrestored(fact.anchor, key, fact, call, self.loop_stack[-1][0]))

    def _trains(self, key: str) -> bool:
        return self.model.is_trained(key) or (
            key in self.grad_forwarded and _last_component(key) not in self.model.frozen_names)

    def _forward_key(self, call: cst.Call, frame: Frame) -> tuple[str | None, str | None]:
        """The model key a call runs forward (`model(x)`, `self.net.forward(x)`, `m.generate(...)`)
        and the method used (None for a plain call)."""
        func = call.func
        method = None
        receiver: cst.BaseExpression = func
        if isinstance(func, cst.Attribute) and func.attr.value in _FORWARD_METHODS:
            method, receiver = func.attr.value, func.value
        elif isinstance(func, cst.Name):
            if any(b.kind in ("def", "class", "import") for b in frame.scope.lookup(func.value)):
                return None, None
        elif not isinstance(func, cst.Attribute):
            return None, None
        return self.model._key(receiver, frame), method

    def _record_forward(self, call: cst.Call, state: State, frame: Frame) -> None:
        key, method = self._forward_key(call, frame)
        if key is None:
            return
        if self.loop_stack and state.grad == GRAD_ON:
            self.grad_forwarded.add(key)
        if frame.depth != 0:
            if frame.depth == 1 and self.flag_off and state.grad == frozenset({OFF}) and \
                    (facts := state.facts(key)) != ENTRY_FACTS:
                self.flow.forwards.append(Forward(call, key, frame.function, facts, state.grad, method,
                                                  frame.chain[0], tuple(sorted(frame.flags.items()))))
            return
        facts = state.facts(key)
        if facts == ENTRY_FACTS:
            return
        self.flow.forwards.append(Forward(call, key, frame.function, facts, state.grad, method))

    def _inline(self, call: cst.Call, target: FunctionInfo, state: State, frame: Frame) -> State:
        inner = self._callee_frame(call, target, frame)
        grad = decorator_grad(self.index, target)
        entry = state.with_grad(frozenset({grad})) if grad is not None else state
        result = self.block(_body(target.node), entry, inner)
        after = join(result.fall, result.ret)
        if after is None:  # always raises
            return state
        return after.without_prefix(inner.prefix).with_grad(state.grad)

    def _callee_frame(self, call: cst.Call, target: FunctionInfo, frame: Frame) -> Frame:
        subst = self.model._argument_keys(call, target, frame)
        prefix = f"{target.qualname}@{frame.depth + 1}:"
        return Frame(target, target.scope, subst, prefix, frame.chain + (call,), frame.active | {target.node},
                     _literal_flags(call, target))


# -- helpers -------------------------------------------------------------------------------------------
def is_evaluation_name(name: str) -> bool:
    """A function named as an evaluation (`evaluate`, `val_epoch`), and not a pytest test."""
    return EVAL_FUNCTION_NAME.match(name) is not None and _PYTEST_NAME.match(name) is None


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
        if value is None or _is_true(value):
            return OFF
        return None if _is_false(value) else COND
    if name in GRAD_ON_CONTEXTS:
        return ON
    if name in GRAD_SETTERS:
        args = positional_args(expr) or [a for a in expr.args if a.keyword is not None]
        value = args[0].value if args else None
        if value is not None and _is_false(value):
            return OFF
        if value is not None and _is_true(value):
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


def _is_mode_call(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in ("eval", "train")


def _decorator_callee(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.func if isinstance(expr, cst.Call) else expr


def _overrides_module_mode(target: FunctionInfo) -> bool:
    """A `train`/`eval` method that calls `super().train(...)` is still the module's mode switch."""
    if target.name not in ("train", "eval") or target.class_name is None:
        return False
    for node in walk(target.node.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                node.func.attr.value in ("train", "eval"):
            receiver = node.func.value
            if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name) and receiver.func.value == "super":
                return True
            if dotted_name(receiver) and dotted_name(receiver).endswith("Module"):
                return True
    return False


def _body(node) -> list:
    """Statements of a function, suite or module."""
    if isinstance(node, cst.FunctionDef):
        node = node.body
    body = getattr(node, "body", ())
    if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        body = body.body
    return list(body)


_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def _calls_post_order(node: cst.CSTNode) -> list[cst.Call]:
    """Calls under `node` with arguments before the call that takes them (evaluation order),
    not entering nested functions, classes or lambdas."""
    result: list[cst.Call] = []

    def visit(current: cst.CSTNode) -> None:
        kind = type(current)  # exact types: isinstance on LibCST nodes goes through ABCMeta
        if current is not node and kind in _NESTED:
            return
        if kind is cst.Call:
            visit(current.func)
            for arg in current.args:
                visit(arg.value)
            result.append(current)
            return
        for child in iter_children(current):
            visit(child)

    visit(node)
    return result


def _split_at_yield(function: cst.FunctionDef) -> tuple[list, list]:
    """Statements a `@contextmanager` runs before its `yield` and after it (finally blocks
    included), flattened in order."""
    yield_stmt = None
    for node in walk(function.body):
        if isinstance(node, _NESTED) and node is not function:
            continue
        if isinstance(node, cst.SimpleStatementLine) and any(
                isinstance(s, cst.Expr) and isinstance(s.value, cst.Yield) or
                isinstance(s, cst.Assign) and isinstance(s.value, cst.Yield) for s in node.body):
            yield_stmt = node
            break
    if yield_stmt is None:
        return _body(function), []
    path = []  # (container node, child on the way to the yield)
    child: cst.CSTNode = yield_stmt
    for parent in _parent_chain(function, yield_stmt):
        path.append((parent, child))
        child = parent
    before: list = []
    after: list = []
    for container, child in reversed(path):
        statements = _statements_of(container)
        if statements is not None and child in statements:
            position = statements.index(child)
            before.extend(statements[:position])
    for container, child in path:
        statements = _statements_of(container)
        if statements is not None and child in statements:
            after.extend(statements[statements.index(child) + 1:])
        if isinstance(container, (cst.Try, cst.TryStar)) and container.finalbody is not None \
                and child is container.body:
            after.extend(_body(container.finalbody.body))
    return before, after


def _parent_chain(root: cst.CSTNode, target: cst.CSTNode) -> list:
    """Ancestors of `target` up to `root`, innermost first (found by a search from `root`)."""
    stack: list[tuple[cst.CSTNode, tuple]] = [(root, ())]
    while stack:
        node, ancestors = stack.pop()
        if node is target:
            return list(reversed(ancestors))
        for child in iter_children(node):
            stack.append((child, ancestors + (node,)))
    return []


def _statements_of(container: cst.CSTNode) -> list | None:
    if isinstance(container, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        return list(container.body)
    return None


def _unwrap_iterable(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`enumerate(tqdm(val_loader))` -> `val_loader`."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, (cst.Name, cst.Attribute)):
        name = expr.func.value if isinstance(expr.func, cst.Name) else expr.func.attr.value
        args = positional_args(expr)
        if name in ("enumerate", "tqdm", "iter", "zip", "progress_bar", "track", "islice") and args:
            expr = args[0].value
        else:
            break
    return expr


def _prepared_argument(assign: cst.CSTNode, name: str) -> cst.BaseExpression | None:
    """`model, opt, loader = accelerator.prepare(model, opt, loader)`: the argument standing where
    `name` is unpacked (the same object, wrapped), as `unwrap_model(model)` stands for `model`."""
    if not (isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call)):
        return None
    func = assign.value.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "prepare"):
        return None
    position = unpacked_position(assign, name)
    args = positional_args(assign.value)
    if position is None or position[1] != len(args) or any(a.star for a in assign.value.args):
        return None
    return args[position[0]].value


def _strip_wrappers(expr: cst.BaseExpression) -> cst.BaseExpression:
    while True:
        if isinstance(expr, cst.Attribute) and expr.attr.value in _WRAPPER_ATTRS:
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and \
                expr.func.attr.value in _PASS_THROUGH_METHODS:
            expr = expr.func.value
        else:
            return expr


def _parameter_owners(expr: cst.BaseExpression, scope: Scope | None, depth: int = 0) -> set[str]:
    """Last components of `X` in `X.parameters()` / `X.named_parameters()` under `expr` (through
    one level of a variable holding them)."""
    owners: set[str] = set()
    for node in walk(expr):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                node.func.attr.value in ("parameters", "named_parameters"):
            text = dotted_name(_strip_wrappers(node.func.value))
            if text:
                owners.add(_last_component(text))
        elif isinstance(node, cst.Name) and scope is not None and depth == 0:
            for binding in scope.lookup(node.value):
                if binding.value is not None and binding.value is not node:
                    owners |= _parameter_owners(binding.value, scope, depth + 1)
    return owners


@file_fact("modes.trained")
def _trained_facts(ctx) -> Iterator[tuple[cst.CSTNode, tuple[str, str]]]:
    """What says a model is trained somewhere in the file: ("train", name) for `name.train()`,
    `accelerator.prepare(name)`, an optimizer or DDP over its parameters; ("frozen", name) for
    `name.requires_grad_(False)` or its parameters' `requires_grad = False`; ("called", name) for
    a bare `name.train()`, which unfreezes its mode."""
    index = ctx.index
    for site in index.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute):
            attr = func.attr.value
            receiver = dotted_name(_strip_wrappers(func.value))
            if attr == "train" and receiver and len(site.node.args) <= 1:
                args = positional_args(site.node)
                if not args or not _is_false(args[0].value):
                    yield site.node, ("train", _last_component(receiver))
                if not site.node.args:
                    yield site.node, ("called", _last_component(receiver))
            elif attr == "requires_grad_" and receiver:
                args = positional_args(site.node)
                if args and _is_false(args[0].value):
                    yield site.node, ("frozen", _last_component(receiver))
            elif attr in ("prepare", "setup", "prepare_model") and receiver:
                for arg in site.node.args:
                    text = dotted_name(_strip_wrappers(arg.value))
                    if text:
                        yield site.node, ("train", _last_component(text))
        qualname = index.resolve(func, site.scope)
        last = (qualname or dotted_name(func) or "").rsplit(".", 1)[-1]
        if role_of_callee(qualname) == OPTIMIZER or last.endswith("Optimizer") or last in (
                "DistributedDataParallel", "DDP", "FSDP", "FullyShardedDataParallel"):
            for arg in site.node.args:
                for owner in _parameter_owners(arg.value, site.scope):
                    yield site.node, ("train", owner)
    # `for p in teacher.parameters(): p.requires_grad = False`
    for loop in index.loops:
        if isinstance(loop, cst.For):
            owners = _parameter_owners(loop.iter, None)
            if owners and any(isinstance(n, cst.Assign) and _is_false(n.value) and any(
                    isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
                    for t in n.targets) for n in walk(loop.body)):
                for owner in owners:
                    yield loop, ("frozen", owner)


def display_key(key: str) -> str:
    """A key as the code names it (without the `helper@2:` prefix of a helper's own locals)."""
    return key.rsplit(":", 1)[-1]


def _last_component(key: str) -> str:
    return key.rsplit(".", 1)[-1].split(":")[-1]


def _function_name(function: FunctionInfo | None) -> str | None:
    return function.name if function is not None and function.name != "<module>" else None


def _precedes(index, first: cst.CSTNode, second: cst.CSTNode) -> bool:
    """`first` is a statement that runs before `second` in a block they share."""
    second_chain = [second] + list(index.ancestors(second))
    first_chain = [first] + list(index.ancestors(first))
    first_set = set(first_chain)
    for position, node in enumerate(second_chain):
        if node in first_set:
            if node is first:
                return False  # `second` is inside `first`
            container = node
            a = first_chain[first_chain.index(container) - 1]
            b = second_chain[position - 1] if position > 0 else None
            statements = _statements_of(container) or list(iter_children(container))
            if b is None or a not in statements or b not in statements:
                return False
            return statements.index(a) < statements.index(b)
    return False


def _literal_flags(call: cst.Call, target: FunctionInfo) -> dict[str, bool]:
    """The parameters of `target` that `call` binds to a literal True/False, passed or by default,
    and that the body never rebinds: `self._run_batch(x, train=False)` is analysed with `train`
    false, not joined over both values its callers pass."""
    if any(arg.star for arg in call.args):
        return {}
    params = target.node.params
    positional = [*params.posonly_params, *params.params]
    if target.class_name is not None and positional and positional[0].name.value in ("self", "cls"):
        positional = positional[1:]
    values = {p.name.value: p.default for p in (*positional, *params.kwonly_params) if p.default is not None}
    values.update((p.name.value, arg.value) for p, arg in zip(positional, positional_args(call)))
    values.update((arg.keyword.value, arg.value) for arg in call.args if arg.keyword is not None)
    bindings = target.scope.bindings
    return {name: _is_true(value) for name, value in values.items()
            if (_is_true(value) or _is_false(value))
            and all(binding.kind == "param" for binding in bindings.get(name, ()))}


def _flag_value(expr: cst.BaseExpression, frame: Frame) -> bool | None:
    """What a test on a literal-bound parameter evaluates to in this frame (`train`, `not train`)."""
    if not frame.flags:
        return None
    if isinstance(expr, cst.Name):
        return frame.flags.get(expr.value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = _flag_value(expr.expression, frame)
        return None if inner is None else not inner
    return None


def _skipped_branch(index, node: cst.CSTNode, root: cst.CSTNode, flags: dict[str, bool]) -> bool:
    """`node` sits in a branch of an `if` under `root` that the literal `flags` never take."""
    child = node
    for ancestor in index.ancestors(node):
        if ancestor is root:
            return False
        if isinstance(ancestor, cst.If):
            value = _flag_value(ancestor.test, Frame(None, index.module_scope, {}, flags=flags))
            if value is not None and (child is ancestor.body or child is ancestor.orelse) and \
                    (child is ancestor.body) != value:
                return True
        child = ancestor
    return False


def _is_false(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def _is_true(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"
