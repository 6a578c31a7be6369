"""The training-loop model: loops, the update guard, what runs once per update, Accelerate."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from trainlint.context import FileContext
from trainlint.model.training import TrainingModel, training_model


def build(source: str) -> tuple[FileContext, TrainingModel]:
    source = textwrap.dedent(source)
    ctx = FileContext("t.py", source, cst.parse_module(source), (2, 6))
    return ctx, ctx.model(training_model)


def innermost(model: TrainingModel):
    loops = [loop for loop in model.loops if loop.innermost]
    assert len(loops) == 1, loops
    return loops[0]


def per_update(ctx, model, loop) -> dict[str, bool]:
    """Call text (first line) -> runs once per update, for the loop's own calls."""
    return {ctx.code_for(ref.node).splitlines()[0]: model.runs_per_update(loop, ref) for ref in model.own_calls(loop)}


GUARDS = [
    pytest.param("""
        for i, (x, y) in enumerate(loader):
            loss = crit(model(x), y) / K
            loss.backward()
            if (i + 1) % K == 0:
                opt.step()
                opt.zero_grad()
        """, "branch", "K", id="modulo-branch"),
    pytest.param("""
        for micro, (x, y) in enumerate(loader, start=1):
            (crit(model(x), y) / accum).backward()
            if micro % accum:
                continue
            opt.step()
        """, "continue", "accum", id="truthy-modulo-continue"),
    pytest.param("""
        def train(model, loader, opt, args):
            for step, batch in enumerate(loader):
                model(**batch).loss.backward()
                if step % args.grad_accum != 0:
                    continue
                opt.step()
        """, "continue", "args.grad_accum", id="not-equal-continue"),
    pytest.param("""
        for it, batch in enumerate(loader):
            loss = model(**batch).loss
            loss.backward()
            if (it + 1) % grad_accum == 0 or it == len(loader) - 1:
                optim.step()
        """, "branch", "grad_accum", id="or-last-batch"),
    pytest.param("""
        for micro_step, batch in enumerate(loader):
            model(**batch).loss.backward()
            if micro_step == accumulation_steps - 1:
                opt.step()
        """, "branch", "accumulation_steps", id="equality-with-k-minus-one"),
    pytest.param("""
        for i, batch in enumerate(loader):
            model(**batch).loss.backward()
            do_step = (i + 1) % self_accum == 0
            if do_step:
                opt.step()
        """, "branch", "self_accum", id="condition-through-a-name"),
    pytest.param("""
        for step, batch in enumerate(dl):
            accelerator.backward(model(**batch).loss)
            if accelerator.sync_gradients:
                optimizer.step()
        """, "branch", None, id="sync-gradients"),
    pytest.param("""
        from accelerate import Accelerator
        accelerator = Accelerator(gradient_accumulation_steps=4)
        for batch in dl:
            with accelerator.accumulate(model):
                accelerator.backward(model(**batch).loss)
                optimizer.step()
        """, "accelerate", "4", id="accelerate-accumulate"),
    pytest.param("""
        for it in range(max_iters):
            for micro_step in range(gradient_accumulation_steps):
                logits, loss = model(*get_batch())
                scaler.scale(loss / gradient_accumulation_steps).backward()
            scaler.step(optimizer)
            scaler.update()
        """, "micro_loop", "gradient_accumulation_steps", id="nested-micro-loop"),
    pytest.param("""
        class Trainer:
            def step_if_ready(self):
                if self.micro % self.accum:
                    return
                self.optimizer.step()

            def fit(self):
                for batch in self.loader:
                    self.model(**batch).loss.backward()
                    self.micro += 1
                    self.step_if_ready()
        """, "continue", "self.accum", id="return-guard-in-helper"),
    pytest.param("""
        for batch in loader:
            model(**batch).loss.backward()
            if trainer.should_step():
                opt.step()
        """, "branch", None, id="predicate-call"),
]


@pytest.mark.parametrize("source, kind, k", GUARDS)
def test_guard_kinds(source, kind, k):
    ctx, model = build(source)
    loop = innermost(model)
    assert loop.accumulates
    assert loop.guard is not None and loop.guard.kind == kind
    assert (ctx.code_for(loop.k) if loop.k is not None else None) == k


NOT_ACCUMULATING = [
    pytest.param("""
        for x, y in loader:
            opt.zero_grad()
            crit(model(x), y).backward()
            opt.step()
        """, id="plain-loop"),
    pytest.param("""
        for step, (x, y) in enumerate(loader):
            crit(model(x), y).backward()
            opt.step()
            if step % log_every == 0:
                print(step)
        """, id="modulo-only-for-logging"),
    pytest.param("""
        for i, (real, _) in enumerate(loader):
            d_loss = critic_loss(D, G, real)
            d_loss.backward()
            opt_d.step()
            opt_d.zero_grad()
            if i % n_critic == 0:
                g_loss = -D(G(noise())).mean()
                g_loss.backward()
                opt_g.step()
                opt_g.zero_grad()
        """, id="gan-critic-steps-every-iteration"),
    pytest.param("""
        for x, y in loader:
            loss = crit(model(x), y)
            if not torch.isfinite(loss):
                continue
            loss.backward()
            opt.step()
        """, id="skip-guard-before-backward"),
    pytest.param("""
        from accelerate import Accelerator
        accelerator = Accelerator()
        for batch in dl:
            with accelerator.accumulate(model):
                accelerator.backward(model(**batch).loss)
                optimizer.step()
        """, id="accelerator-without-accumulation-steps"),
]


@pytest.mark.parametrize("source", NOT_ACCUMULATING)
def test_not_accumulating(source):
    _, model = build(source)
    loop = innermost(model)
    assert not loop.accumulates and loop.guard is None


def test_runs_per_update_branch_and_other_update_conditions():
    ctx, model = build("""
        for i, (x, y) in enumerate(loader):
            if i % K == 0:
                opt.zero_grad()
            loss = crit(model(x), y) / K
            loss.backward()
            sched_every_micro.step()
            if (i + 1) % K == 0:
                opt.step()
                lr_sched.step()
        """)
    loop = innermost(model)
    assert per_update(ctx, model, loop) == {
        "opt.zero_grad()": True, "crit(model(x), y)": False, "model(x)": False, "loss.backward()": False,
        "sched_every_micro.step()": False, "opt.step()": True, "lr_sched.step()": True,
    }
    assert [ctx.code_for(r.node) for r in model.update_calls(loop)] == ["opt.zero_grad()", "opt.step()", "lr_sched.step()"]


def test_runs_per_update_continue_guard_and_helpers():
    ctx, model = build("""
        class Trainer:
            def micro_step(self, batch):
                self.optimizer.zero_grad()
                self.model(**batch).loss.backward()

            def update(self):
                self.optimizer.step()
                self.lr_scheduler.step()

            def fit(self):
                for micro, batch in enumerate(self.loader, start=1):
                    self.micro_step(batch)
                    if micro % self.accum:
                        continue
                    self.update()
        """)
    loop = innermost(model)
    assert loop.guard.kind == "continue"
    placed = {ctx.code_for(r.node): model.runs_per_update(loop, r) for r in loop.calls}
    assert placed["self.optimizer.zero_grad()"] is False
    assert placed["self.optimizer.step()"] is True and placed["self.lr_scheduler.step()"] is True
    order = [ctx.code_for(r.node) for r in model.update_calls(loop)]
    assert order == ["self.update()", "self.optimizer.step()", "self.lr_scheduler.step()"]
    step = next(r for r in loop.step_calls)
    assert ctx.code_for(step.anchor) == "self.update()"


def test_micro_loop_runs_per_update():
    ctx, model = build("""
        for it in range(max_iters):
            optimizer.zero_grad(set_to_none=True)
            for micro_step in range(accum):
                x, y = get_batch("train")
                _, loss = model(x, y)
                (loss / accum).backward()
                sched.step()
            optimizer.step()
        """)
    loop = innermost(model)
    placed = per_update(ctx, model, loop)
    assert placed["optimizer.zero_grad(set_to_none=True)"] and placed["optimizer.step()"]
    assert not placed["sched.step()"] and not placed["(loss / accum).backward()"]


def test_accelerate_semantics():
    ctx, model = build("""
        import torch
        from accelerate import Accelerator
        from transformers import get_scheduler

        accelerator = Accelerator(gradient_accumulation_steps=8)
        optimizer = torch.optim.AdamW(model.parameters())
        prepared_sched = get_scheduler("cosine", optimizer, 100, 1000)
        plain_sched = torch.optim.lr_scheduler.StepLR(optimizer, 10)
        model, optimizer, dl, prepared_sched = accelerator.prepare(model, optimizer, dl, prepared_sched)
        for batch in dl:
            with accelerator.accumulate(model):
                accelerator.backward(model(**batch).loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                prepared_sched.step()
                plain_sched.step()
                model.zero_grad()
                optimizer.zero_grad()
        """)
    loop = innermost(model)
    acc = model.accelerate_accumulation(loop)
    assert acc is not None and ctx.code_for(acc.k) == "8"
    assert loop.guard.kind == "accelerate"
    placed = per_update(ctx, model, loop)
    assert placed["optimizer.step()"] and placed["prepared_sched.step()"] and placed["optimizer.zero_grad()"]
    assert placed["accelerator.clip_grad_norm_(model.parameters(), 1.0)"]
    assert not placed["plain_sched.step()"] and not placed["model.zero_grad()"]
    assert not placed["accelerator.backward(model(**batch).loss)"]
    known, k = model.accelerator_k(acc.accelerator, acc.scope)
    assert known and ctx.code_for(k) == "8"


def test_accelerator_without_accumulation_is_plain_pytorch():
    _, model = build("""
        from accelerate import Accelerator
        accelerator = Accelerator(mixed_precision="bf16")
        for i, batch in enumerate(dl):
            with accelerator.accumulate(model):
                accelerator.backward(model(**batch).loss / K)
            if (i + 1) % K == 0:
                optimizer.step()
        """)
    loop = innermost(model)
    assert model.accelerate_accumulation(loop) is None
    assert loop.guard.kind == "branch"


def test_outer_loop_and_innermost_through_a_helper():
    ctx, model = build("""
        def train_one_epoch(model, loader, opt, K):
            for i, (x, y) in enumerate(loader):
                (crit(model(x), y) / K).backward()
                if (i + 1) % K == 0:
                    opt.step()
                    opt.zero_grad()

        for epoch in range(10):
            train_one_epoch(model, loader, opt, 4)
            sched.step()
        """)
    outer = next(loop for loop in model.loops if isinstance(loop.node.iter, cst.Call)
                 and ctx.code_for(loop.node.iter) == "range(10)")
    inner = innermost(model)
    assert not outer.innermost and not outer.accumulates and outer.guard is None
    assert inner.accumulates
    sched = next(r for r in outer.calls if ctx.code_for(r.node) == "sched.step()")
    assert model.runs_per_update(outer, sched) is False  # the epoch clock
    step = next(r for r in outer.calls if ctx.code_for(r.node) == "opt.step()")
    assert model.runs_per_update(outer, step) is True  # answered for the inner loop
    assert model.update_calls(outer) == []


def test_plain_loop_update_is_the_whole_iteration():
    ctx, model = build("""
        for x, y in loader:
            opt.zero_grad()
            loss = crit(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            sched.step()
        """)
    loop = innermost(model)
    names = [ctx.code_for(r.node.func) for r in model.update_calls(loop)]
    assert names == ["opt.zero_grad", "crit", "model", "scaler.scale(loss).backward", "scaler.scale",
                     "scaler.unscale_", "clip_grad_norm_", "model.parameters", "scaler.step", "scaler.update",
                     "sched.step"]


def test_window_functions_without_a_driving_loop():
    ctx, model = build("""
        def update_window(model, optimizer, batches, loss_fn):
            optimizer.zero_grad(set_to_none=True)
            for inputs, target in batches:
                (loss_fn(model(inputs), target) / len(batches)).backward()
            optimizer.step()

        def train_step(model, opt, batch, i, accum):
            (model(**batch).loss / accum).backward()
            if (i + 1) % accum == 0:
                opt.step()
                opt.zero_grad()

        def plain_step(model, opt, batch):
            opt.zero_grad()
            model(**batch).loss.backward()
            opt.step()
        """)
    assert model.loops == []
    windows = {w.function.name: w for w in model.window_functions}
    assert set(windows) == {"update_window", "train_step"}
    assert windows["update_window"].guard.kind == "micro_loop"
    assert windows["train_step"].guard.kind == "branch" and ctx.code_for(windows["train_step"].k) == "accum"
    placed = per_update(ctx, model, windows["update_window"])
    assert placed["optimizer.zero_grad(set_to_none=True)"] and placed["optimizer.step()"]
    assert not placed["(loss_fn(model(inputs), target) / len(batches)).backward()"]


def test_window_function_called_from_a_loop_is_not_repeated():
    _, model = build("""
        def update_window(model, optimizer, batches, loss_fn):
            for inputs, target in batches:
                (loss_fn(model(inputs), target) / len(batches)).backward()
            optimizer.step()

        for step in range(100):
            update_window(model, optimizer, next(windows), loss_fn)
        """)
    assert model.window_functions == []
    assert innermost(model).guard.kind == "micro_loop"


# -- how the backpropagated loss is scaled (trainlint.model.accumulation, read by TL102/TL103) ----------------

LOSSES = [
    pytest.param("loss = crit(model(x), y)\n    loss.backward()", "mean", None, id="plain-mean"),
    pytest.param("loss = crit(model(x), y) / K\n    loss.backward()", "scaled", "mean", id="divided-inline"),
    pytest.param("loss = crit(model(x), y)\n    loss = loss / K\n    loss.backward()", "scaled", "mean",
                 id="divided-on-its-own-line"),
    pytest.param("loss = crit(model(x), y)\n    loss /= K\n    loss.backward()", "scaled", "mean", id="augassign"),
    pytest.param("loss = crit(model(x), y)\n    (loss / K).backward()", "scaled", "mean", id="at-backward"),
    pytest.param("loss = crit(model(x), y)\n    scaler.scale(loss / K).backward()", "scaled", "mean",
                 id="inside-scaler-scale"),
    pytest.param("loss = crit(model(x), y)\n    (loss * len(y) / total).backward()", "scaled", None,
                 id="weighted-by-window-count"),
    pytest.param("loss = F.cross_entropy(model(x), y, reduction='sum')\n    loss.backward()", "sum", None,
                 id="sum-reduction"),
    pytest.param("loss = (tok * mask).sum() / mask.sum()\n    loss.backward()", "mean", None,
                 id="token-mean-over-mask"),
    pytest.param("loss = model(**batch).loss * weight\n    loss.backward()", "unknown", None,
                 id="weighted-by-something-unknown"),
    pytest.param("loss = sum(losses)\n    loss.backward()", "sum", None, id="builtin-sum"),
    pytest.param("out = model(**batch, num_items_in_batch=n_window)\n    out.loss.backward()", "scaled", None,
                 id="transformers-loss-normalised-by-the-window-token-count"),
    pytest.param("loss = crit(model(x), y) / micro_batch_size\n    loss.backward()", "mean", None,
                 id="divided-by-a-micro-batch-size-is-still-a-mean"),
]


@pytest.mark.parametrize("body, kind, numerator", LOSSES)
def test_loss_scaling_trace(body, kind, numerator):
    from trainlint.model.accumulation import LossTracer

    source = (f"for i, (x, y) in enumerate(loader):\n    {body}\n"
              "    if (i + 1) % K == 0:\n        opt.step()\n        opt.zero_grad()\n")
    ctx, model = build(source)
    loop = innermost(model)
    assert loop.accumulates
    tracer = LossTracer(model, loop)
    (ref,) = loop.backward_calls
    backward = tracer.backward_loss(ref)
    trace = tracer.trace(backward.loss, ref.scope, ref.via)
    assert trace.kind == kind
    assert trace.k_numerator == numerator


def test_loss_scaling_through_helper_parameter_and_accelerator():
    from trainlint.model.accumulation import LossTracer

    ctx, model = build("""
        from accelerate import Accelerator
        accelerator = Accelerator(gradient_accumulation_steps=4)

        class Trainer:
            def backward(self, loss):
                (loss / self.accum).backward()

            def fit(self):
                for it, batch in enumerate(self.loader):
                    self.backward(self.model(**batch).loss)
                    accelerator.backward(self.model(**batch).loss)
                    if (it + 1) % self.accum == 0:
                        self.opt.step()
        """)
    loop = innermost(model)
    tracer = LossTracer(model, loop)
    manual, accelerate = loop.backward_calls
    assert tracer.trace(tracer.backward_loss(manual).loss, manual.scope, manual.via).kind == "scaled"
    assert tracer.backward_loss(accelerate).accelerate_divides


def test_update_in_the_else_branch_and_condition_polarity():
    ctx, model = build("""
        for i, (x, y) in enumerate(loader):
            if i % K == 0:
                opt.zero_grad()
            if i % K:
                log_partial()
            (crit(model(x), y) / K).backward()
            if (i + 1) % K:
                sched_between.step()
            else:
                opt.step()
                sched.step()
        """)
    loop = innermost(model)
    assert loop.guard.kind == "branch" and loop.guard.branch is loop.guard.node.orelse
    placed = per_update(ctx, model, loop)
    assert placed["opt.zero_grad()"] and placed["opt.step()"] and placed["sched.step()"]
    assert not placed["log_partial()"] and not placed["sched_between.step()"]


def test_roles_follow_same_file_factories():
    import libcst as cst

    from trainlint.model.roles import roles

    ctx, _ = build("""
        import torch

        def build_optimizer(model):
            return torch.optim.SGD(model.parameters(), lr=0.1)

        def build(cfg):
            model = Net(cfg)
            opt = build_optimizer(model)
            sched = torch.optim.lr_scheduler.StepLR(opt, 10)
            def inner():
                return 1, 2, 3
            return model, opt, sched

        net, optimizer, lr_policy = build(cfg)
        other = build_optimizer(net)
        """)
    of = ctx.model(roles).of
    scope = ctx.index.module_scope
    assert [of(cst.Name(n), scope) for n in ("optimizer", "lr_policy", "other")] == \
        ["optimizer", "scheduler", "optimizer"]


# -- K as shipped (model/shipped.py) -----------------------------------------------------------------
SHIPPED_LOOP = """
import argparse
import os
from dataclasses import dataclass, field

{setup}

def train(model, loader, optimizer, cfg, args{params}):
    {bind}
    for i, (x, y) in enumerate(loader):
        loss = model(x, y) / K
        loss.backward()
        if (i + 1) % K == 0:
            optimizer.step()
            optimizer.zero_grad()
"""


@pytest.mark.parametrize("setup, params, bind, one", [
    ('parser = argparse.ArgumentParser()\nparser.add_argument("--grad-accum", type=int, default=1)', "",
     "K = args.grad_accum", True),
    ('parser = argparse.ArgumentParser()\nparser.add_argument("--grad-accum", type=int, default=8)', "",
     "K = args.grad_accum", False),
    ('parser = argparse.ArgumentParser()\nparser.add_argument("-k", dest="grad_accum", type=int, default=1)', "",
     "K = args.grad_accum", True),
    ("@dataclass\nclass Config:\n    grad_accum: int = field(default=1)", "", "K = cfg.grad_accum", True),
    ("@dataclass\nclass Config:\n    grad_accum: int = 4", "", "K = cfg.grad_accum", False),
    ("", ", accum=1", "K = accum", True),
    ("", ", accum=2", "K = accum", False),
    ("", "", 'K = cfg.get("grad_accum", 1)', True),
    ("", "", 'K = int(os.environ.get("GRAD_ACCUM", "1"))', True),
    ("", "", 'K = max(1, getattr(args, "grad_accum", 1))', True),
    ("ACCUM = 1", "", "K = ACCUM", True),
    ("", "", "K = args.grad_accum", False),  # nothing says what it defaults to
    ("", "", "K = 4", False),
])
def test_k_is_one_as_shipped(setup, params, bind, one):
    from trainlint.model.shipped import k_defaults_to_one

    ctx, model = build(SHIPPED_LOOP.format(setup=setup, params=params, bind=bind))
    loop = innermost(model)
    assert loop.accumulates
    assert (k_defaults_to_one(ctx, loop) is not None) is one


def test_an_object_whose_gradients_are_cleared_and_that_steps_is_the_optimizer():
    """A name says `scheduler`, but `scheduler.zero_grad()` and `scheduler.step()` are both called:
    torch's schedulers have no `zero_grad()`, so it owns the optimizer (a warmup wrapper), with the
    evidence kept. Stepped only, or cleared only, the name still decides."""
    import libcst as cst

    from trainlint.model.roles import roles

    ctx, model = build("""
        def train(model, loader, scheduler, lr_scheduler, sched_b):
            for x, y in loader:
                scheduler.zero_grad()
                model(x).sum().backward()
                scheduler.step()
                lr_scheduler.step()
                sched_b.zero_grad()

        class Runner:
            def reset(self):
                self.scheduler.zero_grad()

            def update(self):
                self.scheduler.step()
        """)
    function = next(f for f in ctx.index.functions if f.name == "train")
    model_roles = ctx.model(roles)
    of = lambda name: model_roles.of(cst.Name(name), function.scope)  # noqa: E731
    assert [of("scheduler"), of("lr_scheduler"), of("sched_b")] == ["optimizer", "scheduler", "scheduler"]
    assert any("zero_grad" in why for why in model_roles.evidence.values())
    update = next(f for f in ctx.index.functions if f.name == "update")
    attribute = cst.Attribute(cst.Name("self"), cst.Name("scheduler"))
    assert model_roles.of(attribute, update.scope) == "optimizer"
    step = next(site.node for site in ctx.index.calls if ctx.code_for(site.node) == "scheduler.step()")
    assert not model.is_scheduler_step(step, function.scope)


def test_an_object_whose_accumulate_context_is_entered_and_that_runs_the_backward_is_an_accelerator():
    """`with v1.accumulate(model):` and `v1.backward(loss)` on a parameter nothing types: the
    Accelerator protocol, whatever it is called (issue 35), with the use as its evidence. A
    `backward(loss)` alone (a DeepSpeed engine's), or `accumulate(...)` called outside a `with`, is
    not enough: no role."""
    import libcst as cst

    from trainlint.model.roles import roles

    ctx, model = build("""
        def train(v1, v2, v3, engine, other, loader):
            for batch in loader:
                with v1.accumulate(v2):
                    v1.backward(v2(batch).loss)
                    v3.step()
                    v3.zero_grad()
                engine.backward(v2(batch).loss)
                other.accumulate(batch)
                other.backward(v2(batch).loss)
        """)
    function = next(f for f in ctx.index.functions if f.name == "train")
    model_roles = ctx.model(roles)
    of = lambda name: model_roles.of(cst.Name(name), function.scope)  # noqa: E731
    assert [of("v1"), of("engine"), of("other")] == ["accelerator", None, None]
    source = model_roles.source(cst.Name("v1"), function.scope)
    assert source.kind == "use" and source.proven and "accumulate" in source.how
    loop = innermost(model)
    assert loop.accumulates and loop.guard.kind == "accelerate"


def test_training_after_a_node_and_schedulers_replayed_on_resume():
    """`trains_after`: a later statement of the function runs a training loop (or the node is in a
    loop). `replayed_schedulers`: a loop that only steps a scheduler fast-forwards it."""
    from trainlint.model.checkpoints import checkpoint_model

    ctx, model = build("""
        import torch

        def main(model, loader, epochs, start):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            sched = torch.optim.lr_scheduler.StepLR(opt, 5)
            warm = torch.optim.lr_scheduler.StepLR(opt, 5)
            before = torch.load("last.pt")
            for _ in range(start):
                sched.step()
            for epoch in range(start, epochs):
                for x, y in loader:
                    opt.zero_grad()
                    model(x).sum().backward()
                    opt.step()
                    warm.step()
            after = torch.load("best.pt")
        """)
    loads = {ctx.code_for(site.node): site.node for site in ctx.index.calls if "torch.load" in ctx.code_for(site.node)}
    assert model.trains_after(loads['torch.load("last.pt")'])
    assert not model.trains_after(loads['torch.load("best.pt")'])
    assert ctx.model(checkpoint_model).replayed_schedulers == {"sched"}


def test_window_function_with_the_backward_in_a_per_micro_batch_helper():
    """The step written in `train_step`, the backward in the helper its micro-batch loop calls:
    one accumulation window split across two methods."""
    ctx, model = build("""
        class Trainer:
            def _loss_and_backward(self, mb):
                loss = self.model(mb).loss
                loss.backward()
                return loss

            def train_step(self, batch):
                self.optimizer.zero_grad()
                for mb in batch.split(self.micro_bsz):
                    self._loss_and_backward(mb)
                self.optimizer.step()
        """)
    assert model.loops == []
    [window] = model.window_functions
    assert window.node.name.value == "train_step"
    assert window.guard.kind == "micro_loop"
    assert [ctx.code_for(ref.node) for ref in window.backward_calls] == ["loss.backward()"]


def test_a_caller_of_the_window_function_is_not_another_window():
    """`run()` reaches the backward and the step only through `train_step`: not a second window."""
    ctx, model = build("""
        class Trainer:
            def _loss_and_backward(self, mb):
                self.model(mb).loss.backward()

            def train_step(self, batch):
                for mb in batch.split(self.micro_bsz):
                    self._loss_and_backward(mb)
                self.optimizer.step()
                self.optimizer.zero_grad()

            def run(self, batch):
                return self.train_step(batch)
        """)
    assert [w.node.name.value for w in model.window_functions] == ["train_step"]


def test_reaching_bindings_stop_at_the_last_assignment_before_the_use():
    """A plain assignment that runs on every way to the use overwrites the earlier bindings (both
    branches of an `if`); an assignment between it and the use still reaches."""
    source = textwrap.dedent("""
        def f(x, mask, sp):
            if sp:
                loss = gather(x)
            else:
                loss = crit(x)
            loss = loss.sum() / mask.sum()
            if sp:
                loss = loss * 2
            loss.backward()
    """)
    ctx = FileContext("t.py", source, cst.parse_module(source), (2, 6))
    index = ctx.index
    call = next(site.node for site in index.calls if ctx.code_for(site.node) == "loss.backward()")
    use = call.func.value
    reaching = index.reaching_bindings(use, "loss", index.scope_at(use))
    assert [ctx.code_for(b.value) for b in reaching] == ["loss.sum() / mask.sum()", "loss * 2"]
    # inside the last assignment's own value, no assignment before it runs on every way: the
    # branches above it reach (and, unnarrowed, the rest: the answer stays an over-approximation)
    value = next(b.value for b in reaching if ctx.code_for(b.value) == "loss.sum() / mask.sum()")
    inner = value.left.func.value
    found = {ctx.code_for(b.value) for b in index.reaching_bindings(inner, "loss", index.scope_at(inner))}
    assert {"crit(x)", "gather(x)"} <= found


# -- order within the update window (issue 36) ----------------------------------------------------
WINDOW_ORDER = [
    pytest.param("""
        for i, (x, y) in enumerate(loader):
            if (i + 1) % K == 0:
                opt.zero_grad()
            (crit(model(x), y) / K).backward()
            if (i + 1) % K == 0:
                opt.step()
        """, [("opt.zero_grad()", "before_last_backward")], id="same-test-before-backward"),
    pytest.param("""
        for i, (x, y) in enumerate(loader):
            (crit(model(x), y) / K).backward()
            if (i + 1) % K == 0:
                opt.zero_grad()
                opt.step()
        """, [("opt.zero_grad()", "before_step")], id="between-backward-and-step"),
    pytest.param("""
        for i, (x, y) in enumerate(loader):
            flag = (i + 1) % K == 0
            if flag:
                net.zero_grad()
            (crit(net(x), y) / K).backward()
            if not flag:
                continue
            opt.step()
        """, [("net.zero_grad()", "before_last_backward")], id="stored-test-and-continue-guard"),
    pytest.param("""
        from accelerate import Accelerator
        acc = Accelerator(gradient_accumulation_steps=4)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model, opt, loader = acc.prepare(model, opt, loader)
        for batch in loader:
            with acc.accumulate(model):
                opt.zero_grad()
                acc.backward(model(**batch).loss)
                opt.step()
        """, [("opt.zero_grad()", "before_last_backward")], id="prepared-clear-at-the-top-of-accumulate"),
    pytest.param("""
        from accelerate import Accelerator
        acc = Accelerator(gradient_accumulation_steps=4)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model, opt, loader = acc.prepare(model, opt, loader)
        for batch in loader:
            with acc.accumulate(model):
                if acc.sync_gradients:
                    model.zero_grad()
                acc.backward(model(**batch).loss)
                opt.step()
        """, [("model.zero_grad()", "before_last_backward")], id="sync-flag-before-backward"),
    # look-alikes
    pytest.param("""
        for i, (x, y) in enumerate(loader):
            if i % K == 0:
                opt.zero_grad()
            (crit(model(x), y) / K).backward()
            if (i + 1) % K == 0:
                opt.step()
        """, [], id="window-start"),
    pytest.param("""
        for i, (x, y) in enumerate(loader):
            opens = i % K == 0
            if opens:
                opt.zero_grad()
            (crit(model(x), y) / K).backward()
            if (i + 1) % K == 0:
                opt.step()
        """, [], id="stored-window-start"),
    pytest.param("""
        for i, (x, y) in enumerate(loader):
            (crit(model(x), y) / K).backward()
            if (i + 1) % K == 0:
                opt.step()
                opt.zero_grad()
        """, [], id="after-the-step"),
    pytest.param("""
        from accelerate import Accelerator
        acc = Accelerator(gradient_accumulation_steps=4)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model, opt, loader = acc.prepare(model, opt, loader)
        for batch in loader:
            with acc.accumulate(model):
                acc.backward(model(**batch).loss)
                opt.step()
                opt.zero_grad()
        """, [], id="prepared-clear-after-the-step"),
    pytest.param("""
        for i, (x, y) in enumerate(loader):
            (crit(model(x), y) / K).backward()
            if (i + 1) % K == 0:
                opt.zero_grad()
                (reg(model) / K).backward()
                opt.step()
        """, [("opt.zero_grad()", "before_last_backward")], id="a-second-backward-after-the-clear-still-loses-the-window"),
]


@pytest.mark.parametrize("source, expected", WINDOW_ORDER)
def test_window_clears_read_the_order_of_the_clear_within_the_update_window(source, expected):
    ctx, model = build(source)
    loop = innermost(model)
    found = [(ctx.code_for(w.clear.node), w.where) for w in model.window_clears(loop)]
    assert found == expected


def test_condition_key_reads_a_stored_condition_and_its_negations():
    ctx, model = build("""
        for i, x in enumerate(loader):
            at_end = (i + 1) % K == 0
            if not at_end:
                continue
        """)
    from trainlint.model.index import walk

    test = next(n for n in walk(ctx.module) if isinstance(n, cst.If)).test
    assert model.condition_key(test) == ("(i + 1) % K == 0", False)
    assert model.boundary_polarity(test) is False


def test_a_condition_stored_after_its_test_is_last_iteration_s_value_not_the_boundary():
    ctx, model = build("""
        for i, (x, y) in enumerate(loader):
            if flag:
                opt.zero_grad()
            (crit(model(x), y) / K).backward()
            flag = (i + 1) % K == 0
            if (i + 1) % K == 0:
                opt.step()
        """)
    assert model.window_clears(innermost(model)) == []
