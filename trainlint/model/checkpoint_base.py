"""The vocabulary and the records that every part of the checkpoint model shares: the save and
load functions, the kinds of training state and how a message names them, counters, and the
`Save`/`SavedDict` records.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from trainlint.model.index import CallSite, Scope, walk_scope  # noqa: F401 - checkpoint modules import walk_scope from here
from trainlint.model.premises import Premise  # noqa: F401 - in an annotation
from trainlint.model.roles import OPTIMIZER, SCALER, SCHEDULER


SAVE_FUNCTIONS = ("torch.save", "torch.serialization.save")
LOAD_FUNCTIONS = ("torch.load", "torch.serialization.load")

# Kinds of training state, in the order a message lists them.
STATE_KINDS = ("optimizer", "scheduler", "scaler", "step")
STATE_LABELS = {"optimizer": "optimizer state", "scheduler": "LR scheduler state",
                "scaler": "GradScaler state", "step": "step/epoch counter"}
ROLE_KIND = {OPTIMIZER: "optimizer", SCHEDULER: "scheduler", SCALER: "scaler"}

# Names of counters: a variable bound by `for epoch in ...`, `step += 1`, or a parameter.
# (Totals such as `epochs` or `total_steps` are settings, not counters.)
COUNTER_NAME = re.compile(r"^(global_)?(step|epoch|iteration|iter|it|num_updates|update|"
                          r"completed_steps|train_step|cur_epoch|current_epoch|start_epoch|epoch_idx|step_idx|"
                          r"n_iter|cur_iter|current_step|global_step|iter_num|step_num|epoch_num|"
                          r"steps|global_steps)$", re.I)  # `self.global_steps += 1` (verl), `steps` too


@dataclass(eq=False)
class SavedDict:
    """What a saved dict holds: its string keys and values, and whether we saw all of it."""

    items: list[tuple[str | None, cst.BaseExpression, Scope]] = field(default_factory=list)
    complete: bool = True

    def keys(self) -> list[str]:
        return [k for k, _, _ in self.items if k is not None]

    def merge(self, inner: "SavedDict | None") -> None:
        """Add what `**inner` contributes; an unknown inner dict makes this one incomplete."""
        if inner is None:
            self.complete = False
        else:
            self.items += inner.items
            self.complete &= inner.complete


@dataclass(eq=False)
class CheckpointUses:
    """A function's nodes that may use a loaded checkpoint, by the name they use (`_checkpoint_uses`)."""

    subscripts: dict[str, list[cst.Subscript]] = field(default_factory=dict)  # `name[...]`
    methods: dict[str, list[cst.Call]] = field(default_factory=dict)  # `name.method(...)`
    restores: dict[str, list[cst.Call]] = field(default_factory=dict)  # `x.load_state_dict(<mentions name>)`
    handed: set[str] = field(default_factory=set)  # names passed whole to a plain call `f(name)`


@dataclass(eq=False)
class ResumeSave:
    """A checkpoint meant for resuming: what it holds, what the code has, what it leaves out."""

    save: "Save"
    kinds: set[str]
    available: dict[str, list[str]]
    missing: dict[str, list[str]]
    #: a checkpoint directory written file by file: the saves of its function, one per object (the
    #: unit is the directory, not one file); empty for a checkpoint that is one file
    parts: tuple["Save", ...] = ()
    # for a checkpoint of the weights alone: that a resume reads it back (proven or unknown)
    read_back: "Premise | None" = None


@dataclass(eq=False)
class Save:
    site: CallSite
    obj: cst.BaseExpression | None
    dest: cst.BaseExpression | None
    #: a project helper of another file that does the `torch.save` (`save_checkpoint(state, path)`)
    helper: str | None = None
    #: a framework's save of the state dict it is handed (`torch.distributed.checkpoint.save`, from
    #: trainlint/frameworks/*.toml): it writes the same state, its own way (not through `torch.save`)
    framework: str | None = None

    @property
    def node(self) -> cst.Call:
        return self.site.node

    @property
    def scope(self) -> Scope:
        return self.site.scope


NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def string_value(expr: cst.BaseExpression | None) -> str | None:
    if isinstance(expr, cst.SimpleString):
        raw = expr.value
        if raw[0] == raw[-1] and "\\" not in raw:  # no prefix, no escape: the text between the quotes
            quotes = 3 if len(raw) >= 6 and raw[:3] == raw[0] * 3 else 1
            return raw[quotes:-quotes]
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):  # evaluated_value runs literal_eval
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


def path_words(path: str) -> str:
    """The file-name part of a path text (data words in a directory name do not matter)."""
    strings = [s.rsplit("/", 1)[-1] for s in re.findall(r"[\"']([^\"']*)[\"']", path)]
    names = [s for s in strings if "." in s.strip(".")] or strings
    return names[-1] if names else ""


def state_label(name: str, path: str | None = None) -> str:
    """How the model names state the code has: `scheduler`, or `scheduler in main.py` for state a
    caller in another file holds (that name is not in scope where the finding is)."""
    return name if path is None else f"{name} in {path}"


def quoted_state(label: str) -> str:
    """A `state_label` for a message: the name in backticks, the file after it (names hold no spaces)."""
    name, _, path = label.partition(" in ")
    return f"`{name}` in {path}" if path else f"`{name}`"
