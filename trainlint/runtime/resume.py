"""`trainlint trace --resume-check K`: does the user's script resume exactly from its own checkpoint?

Two traced runs of SCRIPT, each recording per update step (of its first optimizer) what the step
starts from: the loss of its backward, each param group's learning rate, and digests of the
parameters, the optimizer state, the input batch and the RNG states (`instrument._Recorder`).

1. The uninterrupted run. The first checkpoint the script saves to a file once it has taken K steps
   is copied aside (its step is the checkpoint step C, K or later: a script may save once an epoch);
   the run goes on to step C+M and stops there (before that save, only the script's end or the
   timeout stops it).
2. The resumed run, a fresh process, M steps: with `--resume-arg "--resume {checkpoint}"` the copy
   is passed to it; without `{checkpoint}` (no --resume-arg, or one such as `--resume` for a script
   that resumes from a fixed path) the copy is put back where the script saved it, as a run stopped
   right after that save leaves it, and the arguments are passed as they are.

Step i of the resumed run is compared with step C+i of the uninterrupted one. The first step that
differs, and which parts differ there, say what the checkpoint left out: "lr" (the LR scheduler's
state: TL404), "optimizer" (its moments: TL404), "params" (the model), "batch" (the data order
was not resumed) or "rng" (dropout masks and sampling: TL701). On CPU with one thread the kernels
repeat bitwise, so equal means bitwise equal.

This process never imports torch (the runs are `trace.run_child` children).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass

from trainlint.runtime import trace
from trainlint.settings import Settings

PARTS = ("lr", "optimizer", "params", "batch", "rng")
_WHAT = {"lr": "learning rate (the LR scheduler's state was not restored)",
         "optimizer": "optimizer state (its moments were not restored)",
         "params": "parameters (the model's weights were not restored)",
         "batch": "input batch (the data order was not resumed)",
         "rng": "RNG state (dropout masks and sampling differ: the RNG state was not restored)"}
# which parts of a divergence confirm each static finding (a rule absent from this checkout is skipped)
_CONFIRMS = {"TL404": {"lr", "optimizer"}, "TL701": {"rng"}, "TL702": {"batch"}}
DEFAULT_RESUME_STEPS = 3
_UNBOUNDED = 2**62


@dataclass(frozen=True)
class ResumeResult:
    exact: bool
    checkpoint_step: int
    checkpoint: str  # the path the script saved it to
    first_divergent_step: int | None
    parts: list[str]
    compared: int  # steps compared
    detail: list[str]  # one line per differing part at the first divergent step

    def to_dict(self) -> dict:
        return {"exact": self.exact, "checkpoint_step": self.checkpoint_step,
                "first_divergent_step": self.first_divergent_step, "parts": self.parts}


def compare(reference: list[dict], resumed: list[dict], checkpoint_step: int, checkpoint: str = "") -> ResumeResult:
    """Step i of the resumed run against step checkpoint_step + i of the uninterrupted run."""
    by_step = {s["step"]: s for s in reference}
    compared = 0
    for step in resumed:
        want = by_step.get(checkpoint_step + step["step"])
        if want is None:
            break
        compared += 1
        parts = [part for part in PARTS if step[part] != want[part]]
        if step["loss"] != want["loss"] and not parts:
            parts = ["rng"]  # the same inputs, weights and state gave another loss: random masks
        if parts:
            detail = [_WHAT[part] + (f": {_short(step['lr'])} resumed, {_short(want['lr'])} uninterrupted"
                                     if part == "lr" else "") for part in parts]
            if step["loss"] != want["loss"]:
                detail.append(f"loss {_short(step['loss'])} resumed, {_short(want['loss'])} uninterrupted")
            return ResumeResult(False, checkpoint_step, checkpoint, want["step"], parts, compared, detail)
    return ResumeResult(True, checkpoint_step, checkpoint, None, [], compared, [])


def _short(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def resume_check(script: str, args: list[str], k: int, m: int = DEFAULT_RESUME_STEPS, resume_arg: str | None = None,
                 settings: Settings | None = None, timeout: float = trace.DEFAULT_TIMEOUT,
                 output=None) -> tuple[trace.TraceReport, ResumeResult]:
    """Both runs and the comparison; the report is the uninterrupted run's, with TL404/TL701/TL702
    judged by the comparison. Raises trace.TraceFailed (no checkpoint saved, no resume)."""
    with tempfile.TemporaryDirectory(prefix="trainlint-resume-") as folder:
        copy = os.path.join(folder, "checkpoint.pt")
        # no step bound until the save: the child sets it to C+M once it has copied the checkpoint
        first = trace.run_child(script, args, _UNBOUNDED, timeout, output,
                                record={"save_after": k, "steps_after": m, "copy_to": copy})
        record = first.get("record") or {}
        saved = record.get("checkpoint")
        if first["steps"] == 0 or not saved:
            ended = first.get("error") or "the script ended"
            raise trace.TraceFailed(
                f"--resume-check {k}: the script took {len(record.get('steps', []))} update steps ({ended}) and "
                f"saved no checkpoint file (torch.save to a path or an open file) at or after step {k}: pick K "
                f"at or before a step where it saves")
        if not resume_arg or "{checkpoint}" not in resume_arg:
            # the script resumes from where it saved (a fixed path, told only to resume or not even
            # that): put the copy back there, as a run stopped right after that save leaves it;
            # the uninterrupted run wrote later checkpoints over it
            shutil.copyfile(copy, saved["path"])
        again = [*args, *(part.replace("{checkpoint}", copy) for part in shlex.split(resume_arg or ""))]
        second = trace.run_child(script, again, m, timeout, output, record={})
    reference, resumed = record["steps"], (second.get("record") or {}).get("steps", [])
    if not resumed:
        raise trace.TraceFailed(f"the resumed run took no update step ({second.get('error') or 'the script ended'})")
    after = next((s for s in reference if s["step"] == saved["step"] + 1), None)
    if after is not None and resumed[0]["params"] == reference[0]["params"] != after["params"]:
        raise trace.TraceFailed("the resumed run started from the initial weights, not from the checkpoint: "
                                "say how the script resumes with --resume-arg \"--resume {checkpoint}\"")
    result = compare(reference, resumed, saved["step"], trace._display(saved["path"]))
    static = trace.lint_for_trace(script, first, settings or Settings())
    report = trace.join(static, first, script, saved["step"] + m)
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


def render_text(report: trace.TraceReport, result: ResumeResult) -> str:
    head = trace.render_text(report)
    last = result.checkpoint_step + result.compared
    lines = [f"resume check: checkpoint {result.checkpoint} saved after step {result.checkpoint_step}, "
             f"resumed in a fresh process, steps {result.checkpoint_step + 1}-{last} compared with the "
             f"uninterrupted run (bitwise: CPU, one thread, deterministic kernels)"]
    if result.exact:
        lines.append(f"resume is exact: loss, learning rates, parameters, optimizer state, input batch and RNG "
                     f"state equal at every step {result.checkpoint_step + 1}-{last}")
    else:
        lines.append(f"resume diverges at step {result.first_divergent_step}: {', '.join(result.parts)}")
        lines += [f"  {line}" for line in result.detail]
    return head + "\n" + "\n".join(lines) + "\n"


def render_json(report: trace.TraceReport, result: ResumeResult) -> str:
    import json

    return json.dumps({**report.to_dict(), "resume": result.to_dict()}, indent=2) + "\n"
