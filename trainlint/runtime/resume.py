"""`trainlint trace --resume-check K`: does the user's script resume exactly from its own checkpoint?

Two traced runs of SCRIPT, each recording per update step of every optimizer what the step starts
from: the loss of its backward, each param group's learning rate, and digests of its parameters,
its state, every optimizer's parameters, the input batch and the RNG states (`instrument._Recorder`).

1. The uninterrupted run. The files the script saves once its first optimizer has taken K steps,
   until the next step of any optimizer (a GAN saves its generator and its critic to two files),
   are copied aside; the checkpoint step C (per optimizer: its count then) is K or later (a script
   may save once an epoch). The run goes on until every optimizer has taken M steps past C and
   stops there (before that save, only the script's end or the timeout stops it).
2. The resumed run, a fresh process, M steps: every copy is put back where the script saved it, as
   a run stopped right after those saves leaves them (the uninterrupted run saved over them), for a
   script that resumes from its own checkpoint files; `--resume-arg "--resume {checkpoint}"` also
   passes the first file's copy, and a `--resume-arg` without `{checkpoint}` (`--resume` for a
   script that resumes from a fixed path) is passed as it is.

Step i of each optimizer in the resumed run is compared with its step C+i in the uninterrupted
one, in the order the steps ran. The first step that differs, and which parts differ there, say
what the checkpoint left out: "lr" (the LR scheduler's state: TL404), "optimizer" (its moments:
TL404), "params" (a model; with several optimizers, whose), "batch" (the data order was not
resumed) or "rng" (dropout masks and sampling: TL701). On CPU with one thread the kernels repeat
bitwise, so equal means bitwise equal.

This process never imports torch (the runs are `trace.run_child` children).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field

from trainlint.runtime import trace
from trainlint.settings import Settings

PARTS = ("lr", "optimizer", "params", "batch", "rng")
_WHAT = {"lr": ("learning rate", "the LR scheduler's state was not restored"),
         "optimizer": ("optimizer state", "its moments were not restored"),
         "params": ("parameters", "the model's weights were not restored"),
         "batch": ("input batch", "the data order was not resumed"),
         "rng": ("RNG state", "dropout masks and sampling differ: the RNG state was not restored")}
# which parts of a divergence confirm each static finding (a rule absent from this checkout is skipped)
_CONFIRMS = {"TL404": {"lr", "optimizer"}, "TL701": {"rng"}, "TL702": {"batch"}}
DEFAULT_RESUME_STEPS = 3
_UNBOUNDED = 2**62


@dataclass(frozen=True)
class ResumeResult:
    exact: bool
    checkpoint_step: int  # of the first optimizer
    checkpoint: str  # the path(s) the script saved it to
    first_divergent_step: int | None  # of the optimizer whose step differed first
    parts: list[str]
    compared: int  # steps of the first optimizer compared
    detail: list[str]  # one line per difference at the first divergent step
    optimizers: list[dict] = field(default_factory=list)  # {"optimizer", "checkpoint_step", "compared"}
    differences: list[dict] = field(default_factory=list)  # {"part", "optimizer"} at the first divergent step
    diverged_optimizer: str | None = None  # whose step differed first

    def to_dict(self) -> dict:
        return {"exact": self.exact, "checkpoint_step": self.checkpoint_step,
                "first_divergent_step": self.first_divergent_step, "parts": self.parts,
                "optimizers": self.optimizers, "differences": self.differences}


def compare(reference: list[dict], resumed: list[dict], checkpoint_step, checkpoint: str = "",
            labels: list | None = None, first: int = 0) -> ResumeResult:
    """Step i of each optimizer in the resumed run against its step checkpoint_step + i (a count per
    optimizer, or one for a single optimizer) of the uninterrupted run, in the order they ran.
    `first`: the optimizer whose steps K counted."""
    starts = list(checkpoint_step) if isinstance(checkpoint_step, (list, tuple)) else [checkpoint_step]
    labels = [label or f"optimizer {n + 1}" for n, label in enumerate(labels or [])]
    labels += [f"optimizer {n + 1}" for n in range(len(labels), len(starts))]
    trained = sorted({s.get("opt", 0) for s in reference} & set(range(len(starts))))
    several = len(trained) > 1
    by_step = {(s.get("opt", 0), s["step"]): s for s in reference}
    initial = {}  # each optimizer's first recorded step of the uninterrupted run
    for s in reference:
        initial.setdefault(s.get("opt", 0), s)
    compared = [0] * len(starts)

    def summary():
        return [{"optimizer": labels[n], "checkpoint_step": starts[n], "compared": compared[n]} for n in trained]

    for step in resumed:
        index = step.get("opt", 0)
        want = by_step.get((index, starts[index] + step["step"])) if index < len(starts) else None
        if want is None:
            break
        compared[index] += 1
        found = [(part, index) for part in PARTS if step[part] != want[part]]
        models = list(zip(step.get("models", []), want.get("models", [])))
        found += [("params", n) for n, (got, expected) in enumerate(models) if n != index and got != expected]
        if any(part == "params" for part, n in found if n != index):
            # another model's weights differ: a batch it computed differs with them
            found = [(part, n) for part, n in found if part != "batch"]
        if step["loss"] != want["loss"] and not found:
            found = [("rng", index)]  # the same inputs, weights and state gave another loss: random masks
        if found:
            found.sort(key=lambda item: (PARTS.index(item[0]), item[1]))
            detail = []
            for part, n in found:
                noun, why = _WHAT[part]
                line = f"{noun} of {labels[n]} ({why})" if several else f"{noun} ({why})"
                if part == "lr":
                    line += f": {_short(step['lr'])} resumed, {_short(want['lr'])} uninterrupted"
                if part == "params" and n in initial and _initial_weights(step, n, index, initial[n]):
                    line += ": it started from its initial weights"
                detail.append(line)
            if step["loss"] != want["loss"]:
                detail.append(f"loss {_short(step['loss'])} resumed, {_short(want['loss'])} uninterrupted")
            parts = [part for part in PARTS if any(p == part for p, _ in found)]
            return ResumeResult(False, starts[first], checkpoint, want["step"], parts, compared[first], detail, summary(),
                                [{"part": part, "optimizer": labels[n]} for part, n in found],
                                labels[index] if several else None)
    return ResumeResult(True, starts[first], checkpoint, None, [], compared[first], [], summary())


def _initial_weights(step: dict, model: int, index: int, first: dict) -> bool:
    """The resumed run's weights of optimizer `model` are those its first step started from."""
    if model == index:
        return step["params"] == first["params"]
    got, start = step.get("models", []), first.get("models", [])
    return model < len(got) and model < len(start) and got[model] == start[model]


def _short(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def resume_check(script: str, args: list[str], k: int, m: int = DEFAULT_RESUME_STEPS, resume_arg: str | None = None,
                 settings: Settings | None = None, timeout: float = trace.DEFAULT_TIMEOUT,
                 output=None) -> tuple[trace.TraceReport, ResumeResult]:
    """Both runs and the comparison; the report is the uninterrupted run's, with TL404/TL701/TL702
    judged by the comparison. Raises trace.TraceFailed (no checkpoint saved, no resume)."""
    try:
        return _both_runs(script, args, k, m, resume_arg, settings, timeout, output)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:  # the script wrote over it
        raise trace.TraceFailed(f"the traced runs of {script} left a malformed recording ({type(err).__name__}: "
                                f"{str(err)[:80]})") from None
    except OSError as err:
        raise trace.TraceFailed(f"--resume-check: {err}") from None


def _both_runs(script: str, args: list[str], k: int, m: int, resume_arg: str | None, settings: Settings | None,
               timeout: float, output) -> tuple[trace.TraceReport, ResumeResult]:
    with tempfile.TemporaryDirectory(prefix="trainlint-resume-") as folder:
        # no step bound until the save: the child sets it once it has copied the checkpoint
        first = trace.run_child(script, args, _UNBOUNDED, timeout, output,
                                record={"save_after": k, "steps_after": m, "copy_to": folder})
        record = first.get("record") or {}
        saved = record.get("checkpoint")
        if first["steps"] == 0 or not saved or not saved.get("files"):
            ended = first.get("error") or "the script ended"
            first_opt = record.get("first") or 0
            taken = sum(1 for s in record.get("steps", []) if s.get("opt", 0) == first_opt)
            raise trace.TraceFailed(
                f"--resume-check {k}: the script took {taken} update steps ({ended}) and "
                f"saved no checkpoint file (torch.save to a path or an open file) at or after step {k}: pick K "
                f"at or before a step where it saves")
        for entry in saved["files"]:
            # where the script saved it, as a run stopped right after the save leaves it (the
            # uninterrupted run saved over it since); the script may resume from there
            shutil.copyfile(entry["copy"], entry["path"])
        copy = saved["files"][0]["copy"]
        again = [*args, *(part.replace("{checkpoint}", copy) for part in shlex.split(resume_arg or ""))]
        second = trace.run_child(script, again, m, timeout, output, record={"bound": m})
    return _judge(script, k, m, resume_arg, settings, first, second, record, saved)


def _judge(script: str, k: int, m: int, resume_arg: str | None, settings: Settings | None, first: dict,
           second: dict, record: dict, saved: dict) -> tuple[trace.TraceReport, ResumeResult]:
    reference, resumed = record["steps"], (second.get("record") or {}).get("steps", [])
    labels, starts, first_opt = record.get("optimizers") or [], saved["steps"], record.get("first") or 0
    if not resumed:
        raise trace.TraceFailed(f"the resumed run took no update step ({second.get('error') or 'the script ended'})")
    if all(_fresh(reference, resumed, n, c) for n, c in enumerate(starts) if c):
        how = ("did not load the checkpoint it was given with --resume-arg" if resume_arg and "{checkpoint}" in resume_arg
               else f"did not resume from its checkpoint file with --resume-arg {resume_arg!r}" if resume_arg
               else "say how the script resumes with --resume-arg \"--resume {checkpoint}\"")
        raise trace.TraceFailed(f"the resumed run started from the initial weights, not from the checkpoint: "
                                f"{'the script ' if resume_arg else ''}{how}")
    shown = ", ".join(trace._display(entry["path"]) for entry in saved["files"])
    result = compare(reference, resumed, starts, shown, labels, first_opt)
    static = trace.lint_for_trace(script, first, settings or Settings())
    report = trace.join(static, first, script, starts[first_opt] + m)
    for finding in report.findings:
        confirming = _CONFIRMS.get(finding["code"])
        if confirming is None or finding["status"] == trace.NOT_REACHED:  # another save than the one compared
            continue
        if confirming & set(result.parts):
            finding.update(status=trace.CONFIRMED, evidence=f"the resumed run diverged at step "
                           f"{result.first_divergent_step}: {'; '.join(result.detail)}")
        elif result.exact:
            finding.update(status=trace.NOT_CONFIRMED, evidence=f"the resume from the checkpoint of step "
                           f"{result.checkpoint_step} was exact for {result.compared} steps")
    return report, result


def _fresh(reference: list[dict], resumed: list[dict], index: int, start: int) -> bool:
    """Optimizer `index` of the resumed run started from the weights its uninterrupted run started
    from, though it had trained them by the checkpoint (nothing restored them)."""
    mine = [s for s in reference if s.get("opt", 0) == index]
    first = next((s for s in resumed if s.get("opt", 0) == index), None)
    after = next((s for s in mine if s["step"] == start + 1), None)
    return bool(mine) and first is not None and after is not None and \
        first["params"] == mine[0]["params"] != after["params"]


def render_text(report: trace.TraceReport, result: ResumeResult) -> str:
    head = trace.render_text(report)
    last = result.checkpoint_step + result.compared
    files = "checkpoints" if ", " in result.checkpoint else "checkpoint"
    after = f"step {result.checkpoint_step}"
    if len(result.optimizers) > 1:  # each optimizer's own count at the save
        after = "steps " + ", ".join(f"{o['checkpoint_step']} of {o['optimizer']}" for o in result.optimizers)
    lines = [f"resume check: {files} {result.checkpoint} saved after {after}, "
             f"resumed in a fresh process, steps {result.checkpoint_step + 1}-{last} compared with the "
             f"uninterrupted run (bitwise: CPU, one thread, deterministic kernels)"]
    if result.exact:
        lines.append(f"resume is exact: loss, learning rates, parameters, optimizer state, input batch and RNG "
                     f"state equal at every step {result.checkpoint_step + 1}-{last}")
    elif result.diverged_optimizer:
        parts = ", ".join(f"{d['part']} of {d['optimizer']}" for d in result.differences)
        lines.append(f"resume is not exact: diverges at step {result.first_divergent_step} of "
                     f"{result.diverged_optimizer}: {parts}")
        lines += [f"  {line}" for line in result.detail]
    else:
        lines.append(f"resume diverges at step {result.first_divergent_step}: {', '.join(result.parts)}")
        lines += [f"  {line}" for line in result.detail]
    return head + "\n" + "\n".join(lines) + "\n"


def render_json(report: trace.TraceReport, result: ResumeResult) -> str:
    import json

    return json.dumps({**report.to_dict(), "resume": result.to_dict()}, indent=2) + "\n"
