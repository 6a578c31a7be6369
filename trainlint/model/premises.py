"""Premises: what a finding's message asserts, each tied to the code that proves it.

A rule (or a model answering for it) states a premise with the node that proves it; the engine
turns the node into a line (`trainlint.finding.Evidence`). A premise is *proven* when the model
established it from code (a construction, a type, a call, an argument, a use, a decorator,
project metadata, a framework's contract) and *unknown* when it is only guessed; a name is never
proof, so a premise resting on a name alone is unknown, located at the name, with the kind of
evidence that would have proven it. A finding one of whose *required* premises is unknown is
not reported by default (`--include-unproven`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # LibCST only in annotations: rule.py imports this module, and selection imports rule.py
    import libcst as cst

from trainlint.finding import EVIDENCE_KINDS


@dataclass(frozen=True)
class Premise:
    text: str
    node: cst.CSTNode
    kind: str
    proven: bool = True
    #: the finding stands on it: unknown, the finding is not reported by default
    required: bool = True

    def __post_init__(self) -> None:
        if self.kind not in EVIDENCE_KINDS:  # "name" above all: a name proves nothing
            raise ValueError(f"not a kind of evidence: {self.kind!r}")


def premise(text: str, node: cst.CSTNode, kind: str = "call", *, proven: bool = True,
            required: bool = True) -> Premise:
    """`premise("the optimizer steps after this backward", step_call, kind="call")`."""
    return Premise(" ".join(text.split()), node, kind, proven, required)


def unknown(text: str, node: cst.CSTNode, kind: str, *, required: bool = True) -> Premise:
    """A premise only guessed (from a name, a shape): `kind` is what would have proven it."""
    return Premise(" ".join(text.split()), node, kind, False, required)
