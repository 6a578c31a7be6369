"""torch.distributed.pipelining (trainlint/frameworks/pipelining.toml): a schedule's `step()` runs the
forward and the backward of its micro-batches, owns their accumulation (`scale_grads`) and is no
optimizer's or LR scheduler's step. The schedules are known by their resolved imports, never by a
variable's name; a class of the project's own with a `step()` is judged as before."""

from __future__ import annotations

import re
import textwrap

import pytest

from trainlint.engine import lint_source
from trainlint.model import frameworks
from trainlint.settings import Settings, resolve_selection

ALL = Settings(select=resolve_selection(["ALL"], [], []))
PIPELINING = next(fw for fw in frameworks.frameworks() if fw.id == "pipelining")


def _findings(source: str) -> list[tuple[str, int]]:
    result = lint_source(textwrap.dedent(source), "train.py", ALL)
    assert result.errors == []
    return sorted((f.code, f.line) for f in result.findings)


def _codes(source: str) -> set[str]:
    return {code for code, _ in _findings(source)}


def test_every_public_schedule_is_modelled_under_both_import_paths():
    names = set(frameworks.micro_batch_runners())
    for cls in ("ScheduleGPipe", "Schedule1F1B", "ScheduleInterleaved1F1B", "ScheduleLoopedBFS",
                "ScheduleInterleavedZeroBubble", "ScheduleZBVZeroBubble", "ScheduleDualPipeV"):
        assert f"torch.distributed.pipelining.{cls}" in names
        assert f"torch.distributed.pipelining.schedules.{cls}" in names
        assert frameworks.lookup(f"torch.distributed.pipelining.schedules.{cls}").role == "pipeline_schedule"
    assert "torch.distributed.pipelining.PipelineStage" not in names
    assert frameworks.train_steps() == {"step": frozenset({"pipeline_schedule"})}


def test_the_model_reads_the_schedule_from_the_data(monkeypatch):
    """Without the data's train step, the pipelined loop has no backward: its examples go quiet."""
    examples = PIPELINING.examples
    assert "TL105" in _codes(examples["gpipe_zero_grad"].bad)
    assert "TL102" in _codes(examples["scale_grads_off"].bad)
    monkeypatch.setattr(frameworks, "train_steps", lambda: {})
    assert "TL105" not in _codes(examples["gpipe_zero_grad"].bad)
    assert "TL102" not in _codes(examples["scale_grads_off"].bad)


_NAMED_LIKE_A_SCHEDULER = '''
    import torch
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    stage = PipelineStage(stage_module, stage_index, num_stages, device)
    {name} = ScheduleGPipe(stage, n_microbatches=8, loss_fn=loss_fn)
    optimizer = torch.optim.AdamW(stage_module.parameters(), lr=3e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)
    for step in range(args.steps):
        x, y = next(batches)
        optimizer.zero_grad()
        if stage_index == 0:
            {name}.step(x)
        elif stage_index == num_stages - 1:
            losses = []
            {name}.step(target=y, losses=losses)
            history.append((sum(losses) / len(losses)).item())
        else:
            {name}.step()
        optimizer.step()
        scheduler.step()
'''


@pytest.mark.parametrize("name", ["schedule", "sched", "lr_sched", "pp_schedule", "opt_step"])
def test_a_schedule_step_is_no_optimizer_or_lr_scheduler_step_whatever_its_name(name):
    """Its construction says what it is: a `sched.step(x)` before `optimizer.step()` is not an LR
    scheduler stepping first (TL106), nor an update on another clock (TL101, TL107), nor an
    optimizer step that needs a clear (TL105); averaging the per-micro-batch losses it fills is
    the batch's loss (no TL601, no TL501)."""
    assert _findings(_NAMED_LIKE_A_SCHEDULER.format(name=name)) == []


def test_the_schedule_step_is_a_backward_the_lr_scheduler_still_judged():
    source = _NAMED_LIKE_A_SCHEDULER.format(name="sched").replace(
        "        optimizer.step()\n        scheduler.step()\n", "        scheduler.step()\n        optimizer.step()\n")
    assert _findings(source) == [("TL106", 20)]


_OWN_CLASS = '''
    import torch


    class {cls}:
        """the project's own update object: its step() steps the optimizer"""

        def __init__(self, optimizer, n_microbatches=1, loss_fn=None, scale_grads=True):
            self.optimizer = optimizer

        def step(self):
            self.optimizer.step()


    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    schedule = {cls}(optimizer, n_microbatches=4, loss_fn=torch.nn.functional.cross_entropy, scale_grads=False)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        schedule.step()
'''


@pytest.mark.parametrize("cls", ["ScheduleGPipe", "Schedule1F1B", "Trainer"])
def test_a_class_of_the_project_with_a_step_is_judged_as_before(cls):
    """Same name as torch's schedule, same keywords, not imported from torch.distributed.pipelining:
    its `step()` steps the optimizer (its code says so), the loop never clears: TL105, as for any
    other name; no TL102 for `scale_grads=False`."""
    assert _findings(_OWN_CLASS.format(cls=cls)) == [("TL105", 20)]


def test_a_schedule_of_another_package_is_not_torchs():
    source = '''
        import torch
        import torch.nn.functional as F
        from mypipeline import Schedule1F1B

        schedule = Schedule1F1B(stage, n_microbatches=8, loss_fn=F.cross_entropy, scale_grads=False)
        for x, y in loader:
            optimizer.zero_grad()
            schedule.step(x, target=y)
            optimizer.step()
    '''
    assert _findings(source) == []
    torch_source = source.replace("from mypipeline import", "from torch.distributed.pipelining import")
    assert _findings(torch_source) == [("TL102", 9)]


@pytest.mark.parametrize("loss_fn, fires", [
    ("F.cross_entropy", True),
    ("torch.nn.CrossEntropyLoss()", True),
    ("torch.nn.CrossEntropyLoss(reduction='mean')", True),
    ("torch.nn.CrossEntropyLoss(reduction='sum')", False),
    ("lambda out, y: F.mse_loss(out, y)", True),
    ("lambda out, y: F.mse_loss(out, y) / n_microbatches", False),
    ("rescale_accumulated_loss(F.cross_entropy, n_microbatches)", False),  # a wrapper whose scaling is not read
    ("functools.partial(F.cross_entropy, ignore_index=-100)", False),
    ("build_loss(cfg)", False),
])
def test_an_unscaled_schedule_needs_a_mean_loss_the_code_shows(loss_fn, fires):
    source = f'''
        import functools
        import torch
        import torch.nn.functional as F
        from torch.distributed.pipelining.schedules import ScheduleGPipe

        schedule = ScheduleGPipe(stage, n_microbatches, loss_fn={loss_fn}, scale_grads=False)
        for x, y in loader:
            optimizer.zero_grad()
            schedule.step(x, target=y)
            optimizer.step()
    '''
    assert _findings(source) == ([("TL102", 10)] if fires else [])


@pytest.mark.parametrize("scaling", ["", ", scale_grads=True", ", scale_grads=args.scale_grads", ", **schedule_kwargs"])
def test_a_schedule_that_scales_or_may_scale_is_quiet(scaling):
    source = f'''
        import torch.nn.functional as F
        from torch.distributed.pipelining import ScheduleGPipe

        schedule = ScheduleGPipe(stage, 8, F.cross_entropy{scaling})
        for x, y in loader:
            optimizer.zero_grad()
            schedule.step(x, target=y)
            optimizer.step()
    '''
    assert _findings(source) == []


def test_the_unscaled_schedule_is_reported_once_at_the_step_that_computes_the_loss():
    example = PIPELINING.examples["scale_grads_off"].bad
    found = [line for code, line in _findings(example) if code == "TL102"]
    lines = example.splitlines()
    assert len(found) == 1 and "target=" in lines[found[0] - 1]


def test_the_finding_names_the_schedule_and_its_setting():
    result = lint_source(PIPELINING.examples["dualpipev_scale_grads"].bad, "train.py", ALL)
    (finding,) = [f for f in result.findings if f.code == "TL102"]
    assert "`scale_grads=False`" in finding.message and "2 * world" in finding.message
    assert re.search(r"`criterion` is a per-micro-batch mean", finding.message)


@pytest.mark.parametrize("text, message", [
    ('framework = "x"\n[[entry]]\nname = "x.S"\nkind = "constructor"\nrole = "pipeline_schedule"\n'
     'train_step = "step"\nexample = "e"\n', "go together, on a constructor"),
    ('framework = "x"\n[[entry]]\nname = "x.S"\nkind = "seed"\ntrain_step = "step"\nmicro_batches = "n"\n'
     'loss = "f"\ngrad_scaling = { keyword = "s", default = true }\nexample = "e"\n', "go together, on a constructor"),
    ('framework = "x"\nreexports = ["x.y"]\n', "`reexports` maps a module"),
])
def test_a_malformed_train_step_is_refused(tmp_path, text, message):
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(frameworks.FrameworkModelError, match=re.escape(message)):
        frameworks.load_folder(tmp_path)


@pytest.mark.parametrize("example", list(PIPELINING.examples.values()), ids=lambda e: e.id)
def test_the_gate_never_changes_what_a_pipelining_example_draws(example):
    for source in (example.bad, example.good):
        with_gate, without = (sorted((f.code, f.line) for f in lint_source(source, "train.py", ALL, gate=use).findings)
                              for use in (True, False))
        assert with_gate == without


_ACCUMULATING_OVER_STEPS = '''
    import torch
    import torch.nn.functional as F
    from torch.distributed.pipelining import ScheduleGPipe

    schedule = ScheduleGPipe(stage, n_microbatches=8, scale_grads=False,
                             loss_fn=lambda out, y: F.cross_entropy(out, y) / (8 * accum_steps))
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_updates)
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        schedule.step(x, target=y)
        scheduler.step()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
'''


def test_a_loop_accumulating_over_schedule_steps_reaches_the_accumulation_rules():
    """No `backward` in the file: the rules that need a training loop still run (their triggers
    and gates accept a reference to a schedule class), and the schedule's `step()` is the loop's
    backward: the clear and the LR scheduler run on every batch of the window."""
    from trainlint.model.training import TRAIN_STEP_CLASSES, backward_triggers

    assert "backward" not in _ACCUMULATING_OVER_STEPS
    assert _findings(_ACCUMULATING_OVER_STEPS) == [("TL101", 12), ("TL104", 10)]
    assert set(TRAIN_STEP_CLASSES) == set(frameworks.micro_batch_runners())
    assert len(backward_triggers(("backward", "%"), "other")) == 3
    own = _ACCUMULATING_OVER_STEPS.replace("from torch.distributed.pipelining import ScheduleGPipe",
                                           "from mypipeline import ScheduleGPipe")
    assert _findings(own) == []
