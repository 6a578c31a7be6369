"""What a runtime demonstration is: a runnable bad/good pair for one rule, or a fence.

A `Demo` holds the bad variant as source text and the fix as text substitutions, so the good
variant differs from the bad one by exactly the rule's mistake and nothing else. `at` names the
line where the static finding must be reported, by its text, so editing a demo cannot leave a
stale line number behind. Both variants print one JSON object (the measurement) as their last
line; `judge` decides from the two measurements whether the hazard showed, and `show` formats a
measurement for the text report.

A `Fence` is one script measuring a fact the rules rest on (the update window, clipping, storage
sharing, the mode switches, exact resume); it prints `{"bad": {...}, "good": {...}}`, the wrong
way and the right way side by side, and its `judge` holds the assertions.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Callable

Judge = Callable[[dict, dict], bool]


def _clean(source: str) -> str:
    return textwrap.dedent(source).strip("\n") + "\n"


@dataclass(frozen=True)
class Demo:
    code: str
    #: What the measurement shows, one line (used in docs and in the text report's notes).
    hazard: str
    bad: str
    #: (old, new) literal substitutions turning the bad variant into the good one; each `old` occurs
    #: exactly once in the (dedented) bad variant.
    fix: tuple[tuple[str, str], ...]
    #: Text occurring on exactly one line of the bad variant: where the finding must be reported.
    at: str
    #: Format string over a measurement, e.g. "update {ratio:.2f}x the full-batch gradient".
    show: str
    judge: Judge

    def __post_init__(self) -> None:
        object.__setattr__(self, "bad", _clean(self.bad))

    @property
    def good(self) -> str:
        source = self.bad
        for old, new in self.fix:
            count = source.count(old)
            if count != 1:
                raise ValueError(f"{self.code} demo: fix text occurs {count} times, expected once: {old!r}")
            start = source.find(old)
            if old[0] in " \t" and start > 0 and source[start - 1] != "\n":
                raise ValueError(f"{self.code} demo: indented fix text must match whole lines: {old!r}")
            source = source.replace(old, new)
        return source

    @property
    def line(self) -> int:
        lines = [n for n, text in enumerate(self.bad.splitlines(), start=1) if self.at in text]
        if len(lines) != 1:
            raise ValueError(f"{self.code} demo: {self.at!r} is on {len(lines)} lines, expected one")
        return lines[0]


@dataclass(frozen=True)
class Fence:
    code: str
    hazard: str
    script: str
    show_bad: str
    show_good: str
    judge: Judge

    def __post_init__(self) -> None:
        object.__setattr__(self, "script", _clean(self.script))


def show(template: str, measure: dict | None, error: str | None = None) -> str:
    """A measurement as text; a failed run shows why it failed."""
    if measure is None:
        return f"failed: {error}" if error else "not run"
    try:
        return template.format(**measure)
    except (KeyError, ValueError, IndexError, TypeError) as exc:
        return f"unexpected measurement {measure} ({type(exc).__name__})"


def close(value, target: float, tolerance: float) -> bool:
    """`value` is a number within `tolerance` (relative) of `target`; False for anything else."""
    return isinstance(value, (int, float)) and abs(value - target) <= tolerance * max(1.0, abs(target))


_PRELUDE = '''\
import json
{imports}
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def norm(tensors):
    """L2 norm of several tensors taken as one vector."""
    return torch.sqrt(sum(t.detach().pow(2).sum() for t in tensors)).item()


def rel_error(got, want):
    """How far `got` is from `want`, relative to the size of `want`."""
    return norm([g - w for g, w in zip(got, want)]) / norm(want)


'''


def script(*parts: str, imports: str = "") -> str:
    """A complete demo program: common imports, a fixed seed, two helpers, then the `parts`
    (each dedented on its own, separated by a blank line)."""
    extra = "".join(f"{line}\n" for line in _clean(imports).splitlines() if line) if imports else ""
    return _PRELUDE.format(imports=extra) + "\n".join(_clean(part) for part in parts)
