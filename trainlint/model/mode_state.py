"""What the mode walk tracks: the facts of how each model's mode may have been left, the grad
state, how branches join, how a block can be left, and what a run of one function records
(forwards, eval calls that a later backward still sees).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

import libcst as cst

from trainlint.model.index import FunctionInfo, Scope


MODE_WORDS = (".eval(", ".train(")
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
    whether it was set while a training loop was running, `via` the function where `node` is;
    `loops` the training loops running when it was set; `evaluated` (for an eval) what used the
    model in that mode outside a training loop entered after it: a forward with grad recording off,
    a forward at the loop level of the eval, the model handed to code the walk does not follow, or
    the call of another file's function that left it so (None: nothing yet, the mode was only
    chosen for what follows); `entry_flags` the literal arguments of the call that brought a
    caller's fact in.
    """

    kind: str
    node: cst.CSTNode | None = None
    site: cst.CSTNode | None = None
    anchor: cst.CSTNode | None = None
    in_training: bool = False
    via: str | None = None
    loops: frozenset = frozenset()
    evaluated: cst.CSTNode | None = None
    # for a fact that came from a caller (`site` None): the parameters the call it came through
    # binds to literals (`step(model, val_loader, if_train=False)`): in the function's own run, a
    # branch those values skip (`if if_train: loss.backward()`) never runs with that fact
    entry_flags: tuple = ()


ENTRY_FACTS = frozenset({Fact(ENTRY)})
UNKNOWN_FACTS = frozenset({Fact(UNKNOWN)})


class State:
    """Mode facts per model key, the grad state, and the models whose parameters are all frozen
    (key -> the call or loop that froze them: `model.requires_grad_(False)`, `for p in
    model.parameters(): p.requires_grad = False`); immutable, compared by value."""

    __slots__ = ("modes", "grad", "frozen")

    def __init__(self, modes: dict[str, frozenset[Fact]], grad: frozenset[str],
                 frozen: dict[str, cst.CSTNode] | None = None) -> None:
        self.modes = modes
        self.grad = grad
        self.frozen = frozen or {}

    def facts(self, key: str) -> frozenset[Fact]:
        return self.modes.get(key, ENTRY_FACTS)

    def set(self, key: str, facts: frozenset[Fact]) -> "State":
        modes = dict(self.modes)
        modes[key] = facts
        return State(modes, self.grad, self.frozen)

    def set_under(self, key: str, facts: frozenset[Fact], itself: bool) -> "State":
        """Every model under `key` (`model.bert` under `model`), and `key` itself when `itself`,
        left by the same facts."""
        modes = {k: facts if k.startswith(key + ".") else v for k, v in self.modes.items()}
        if itself:
            modes[key] = facts
        return State(modes, self.grad, self.frozen)

    def with_grad(self, grad: frozenset[str]) -> "State":
        return State(self.modes, grad, self.frozen)

    def without_prefix(self, prefix: str) -> "State":
        return State({k: v for k, v in self.modes.items() if not k.startswith(prefix)}, self.grad,
                     {k: v for k, v in self.frozen.items() if not k.startswith(prefix)})

    # -- frozen parameters ---------------------------------------------------------------------
    def frozen_by(self, key: str) -> cst.CSTNode | None:
        """What froze every parameter of `key`: a freeze of `key` itself or of a model holding it
        (`model.requires_grad_(False)` freezes `model.encoder`); None when not proven frozen."""
        parts = key.split(".")
        for end in range(len(parts), 0, -1):
            found = self.frozen.get(".".join(parts[:end]))
            if found is not None:
                return found
        return None

    def freeze(self, key: str, node: cst.CSTNode) -> "State":
        frozen = dict(self.frozen)
        frozen[key] = node
        return State(self.modes, self.grad, frozen)

    def unfreeze(self, key: str) -> "State":
        """Some parameter of `key` may record again (`key.requires_grad_(True)`, a part of it
        unfrozen, `key` bound to another object): neither it, its parts nor a model holding it is
        known frozen."""
        if not self.frozen:
            return self
        frozen = {k: v for k, v in self.frozen.items()
                  if not (k == key or k.startswith(key + ".") or key.startswith(k + "."))}
        return self if len(frozen) == len(self.frozen) else State(self.modes, self.grad, frozen)

    def __eq__(self, other) -> bool:
        return isinstance(other, State) and self.grad == other.grad and self.modes == other.modes and \
            self.frozen.keys() == other.frozen.keys()

    __hash__ = None  # type: ignore[assignment]


def join(a: State | None, b: State | None) -> State | None:
    if a is None:
        return b
    if b is None or a is b:
        return a
    modes = {}
    for key in a.modes.keys() | b.modes.keys():
        modes[key] = a.facts(key) | b.facts(key)
    # frozen only when frozen on both paths
    return State(modes, a.grad | b.grad, {k: v for k, v in a.frozen.items() if k in b.frozen})


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
    flags: tuple[tuple[str, object], ...] = ()
    # the helper whose body holds the model's forward, when `call` is this function's call of it
    # (skorch's `validation_step`: `self.module_.eval()`, then `self.infer(x)` runs `self.module_(x)`)
    helper: FunctionInfo | None = None
    # the call or loop that froze every parameter of the model before this forward (None: not proven)
    frozen: cst.CSTNode | None = None
    # for a helper's forward (`helper` set): the forward call in the helper's body
    inner: cst.Call | None = None


@dataclass(eq=False)
class Unrestored:
    """An eval call in a training loop that a later backward of that loop still sees."""

    anchor: cst.CSTNode
    key: str
    fact: Fact
    backward: cst.Call
    loop: cst.CSTNode
    # a forward of the model (or of one holding it) that the loop runs with grad on: what its
    # backward trains (None when the run saw none: a forward in code it does not follow)
    forward: cst.CSTNode | None = None
    # a part of the model put back in train mode after the eval and before the backward
    # (`model.head.train()` after `model.eval()`): the call that did (None when none is)
    restored_part: cst.CSTNode | None = None


class Abandon(Exception):
    pass


@dataclass(eq=False)
class Flow:
    function: FunctionInfo | None
    complete: bool = True
    at_call: dict = field(default_factory=dict)  # call node -> State before it (analysed function only)
    forwards: list[Forward] = field(default_factory=list)
    # forwards a helper runs for this function in the modes this function set, at the helper's call
    # (kept apart: the helper's own flow holds its forward, in the modes of all its callers joined)
    helper_forwards: list[Forward] = field(default_factory=list)
    unrestored: list[Unrestored] = field(default_factory=list)
    backwards: set = field(default_factory=set)  # backward calls of training loops this run reached
    # per training loop: the models it forwards with grad on, those it forwards only with grad off,
    # and those it hands (grad on) to a call whose body the run does not follow
    grad_on: dict = field(default_factory=dict)  # loop -> {key: the first such forward}
    grad_off: dict = field(default_factory=dict)
    handed: dict = field(default_factory=dict)
    handed_calls: dict = field(default_factory=dict)  # loop -> {key: [the calls it is handed to]}

    def untrained_in(self, loop: cst.CSTNode, key: str) -> bool:
        """The loop forwards `key` only with grad recording off, records no forward of it (or of a
        model holding it) with grad on, and hands neither to code it does not follow: the loop's
        backward reaches none of its parameters, so the loop does not train it."""
        if key not in self.grad_off.get(loop, ()):
            return False
        parts = key.split(".")
        holders = {".".join(parts[:end]) for end in range(1, len(parts) + 1)}
        return not (holders & self.grad_on.get(loop, {}).keys() or holders & self.handed.get(loop, set()))

    def trained_through(self, loop: cst.CSTNode, key: str) -> cst.CSTNode | None:
        """The first forward of `key`, or of a model holding it, that the loop runs with grad on."""
        forwards = self.grad_on.get(loop, {})
        parts = key.split(".")
        return next((forwards[h] for end in range(len(parts), 0, -1)
                     if (h := ".".join(parts[:end])) in forwards), None)
