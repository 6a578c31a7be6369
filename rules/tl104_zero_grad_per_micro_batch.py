"""TL104 zero-grad-per-micro-batch."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model.accumulation import describe_k
from trainlint.model.amp import CLIP_NAMES
from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.fixkit import block_of, line_text, loop_body_line, move_line, own_line, position_in, update_anchor
from trainlint.model.window_sums import clip_after_clear
from trainlint.rule import FixSpec, Rule, after, bad, good, delete
from trainlint.model.index import walk
from trainlint.model.training import RUNS_BACKWARD, CallRef, backward_triggers, training_model
from trainlint.model.shipped import k_condition
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import accumulation_premises, loop_premises, role_premise, training_premises

_CLIPS = ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "unscale_")


def _clip_only_guard(ctx, loop) -> cst.If | None:
    """An `if ... % K ...:` in the loop body that clips gradients but does not step, in a loop whose
    loss is divided by that same K (written to accumulate; a clip every N steps to log the gradient
    norm divides nothing)."""
    steps = {id(ref.anchor) for ref in loop.step_calls}
    divisors = {ctx.code_for(n.right) for n in walk(loop.node.body)
                if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Divide)}
    for statement in loop.node.body.body if isinstance(loop.node.body, cst.IndentedBlock) else ():
        if not isinstance(statement, cst.If):
            continue
        if not any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)
                   and ctx.code_for(n.right) in divisors for n in walk(statement.test)):
            continue
        inside = list(walk(statement.body))
        clips = any(isinstance(n, cst.Call) and isinstance(n.func, (cst.Attribute, cst.Name))
                    and (n.func.attr.value if isinstance(n.func, cst.Attribute) else n.func.value) in _CLIPS
                    for n in inside)
        if clips and not any(id(n) in steps for n in inside):
            return statement
    return None


class ZeroGradPerMicroBatch(Rule):
    code = "TL104"
    name = "zero-grad-per-micro-batch"
    severity = Severity.ERROR
    summary = "Under gradient accumulation, gradients are cleared on every micro-batch"
    message = "gradients are cleared on every micro-batch, so only the last micro-batch reaches the step"
    triggers = backward_triggers(("backward", "zero_grad"), ("backward", ".grad = None"), ("backward", ".grad=None"))
    gate = RUNS_BACKWARD & named("^step$")  # a training loop: a backward (or a pipeline schedule's step) and a step
    what_it_does = """
        Finds training loops that accumulate gradients over K micro-batches and flags a
        `zero_grad()` (on the optimizer or the model) or a `p.grad = None` that runs on every
        micro-batch instead of once per update.

        Clearing at the bottom of the guarded update, after a `continue` guard and the step, under
        its own `if i % K == 0:`, before a nested micro-batch loop, or through a prepared optimizer
        after its step inside `with accelerator.accumulate(model):` (Accelerate skips it between
        gradient syncs) is correct and not flagged (a prepared optimizer includes one handed to
        `accelerator.prepare(*objs)` in a list). `model.zero_grad()` inside the Accelerate block is
        flagged: only the prepared optimizer's `zero_grad` is skipped. Under an Accelerator built
        with a DeepSpeed plugin (`deepspeed_plugin=`, trainlint/frameworks/accelerate.toml) the
        prepared optimizer's `zero_grad()` does nothing (the engine clears after its own step) and
        is never flagged for its place. A retry loop
        (`while size: try: ... backward ... except OOM: size //= 2 else: break`) is not a micro-batch
        loop: it repeats only after a failure, and a clear in it drops the failed attempt's gradients.
        Nor does a clear in an `except` clause of the micro-batch's `try` (`except
        OutOfMemoryError: optimizer.zero_grad()`) run on every micro-batch: only after one failed
        (one in `finally:` does, and is flagged).
        A clear is said to run on every micro-batch only when each test on its way (other than the
        update's guard and tests that also hold the backward) has the same value on every
        micro-batch: a setting (`if args.fp16:`, an attribute set only in `__init__`). Under a test
        that can change between micro-batches (`if i == 0:`, `if self.seen == 0:`, an attribute a
        base class of another file keeps), where it may mark the window's start, the finding is
        unproven.

        The clear's place within the window counts too (`TrainingModel.window_clears`): a
        `zero_grad()` that runs only on the window's last micro-batch (under the step's `if`, after
        its `continue` guard, under a test reading the same condition, also through a variable
        that stores it: `boundary = (i + 1) % K == 0` then `if boundary:`; under Accelerate, a
        prepared optimizer's clear inside `accumulate`, which Accelerate runs only when the
        gradients sync, or a clear under `if accelerator.sync_gradients:`) is flagged when it runs
        before that micro-batch's backward, with the step after that backward (it throws away
        what the window's other micro-batches accumulated), or after the backward and before the
        step with no backward between (the step sees cleared gradients). Under a test of the window's first
        micro-batch (`if i % K == 0:` while the step tests `(i + 1) % K == 0`) it is correct, and
        so is a clear on one side of an `if`/`else` (`if scaler: ... zero_grad()`) whose backward
        and step are on the other side: they never run in the same iteration. Nor is a clear that a
        call before it in the iteration guards by copying the gradients aside (its code stores
        `p.grad.clone()`) while one after it, before the step, writes them back (`p.grad = saved`):
        what the window accumulated survives it (an adversarial-training inner loop).

        When K is 1 as the code ships (an argparse option, a config/dataclass field or a parameter
        that defaults to 1, `cfg.get("accum", 1)`, `ACCUM = 1`), nothing accumulates until someone
        raises it: the finding then says it holds only when K is set above 1 and is reported one
        severity lower (warning).
        """
    why_bad = """
        Accumulation relies on `backward()` adding into `.grad` across the K micro-batches of a
        window. Clearing the gradients on every micro-batch throws the first K-1 contributions
        away: the optimizer steps on the last micro-batch's gradient alone (and, when the loss was
        divided by K, a K-times-too-small one). The run trains with a K-times smaller effective
        batch and a wrong gradient scale, and nothing fails.
        """
    fix_safety = """
        Unsafe: moving or removing the clear changes which gradients add up; if the micro-
        batches were meant to be independent updates, the fix merges them. No fix is offered when a
        clip runs on every micro-batch: once the window adds up, that clip would cut its partial sum
        (TL202), which moving the clear alone does not mend.
        """
    references = (
        "https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html",
        "https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-accumulation",
        "https://huggingface.co/docs/accelerate/usage_guides/gradient_accumulation",
    )
    examples = (
        good(
            """
            import torch


            def adversarial(gen, critic, batches, k):
                g_opt = torch.optim.Adam(gen.parameters())
                c_opt = torch.optim.Adam(critic.parameters())
                for j, (real, z) in enumerate(batches):
                    last = (j + 1) % k == 0
                    fake = gen(z)
                    (-critic(fake).mean() / k).backward()
                    if last:
                        g_opt.step()
                        g_opt.zero_grad()
                    (critic(fake.detach()).mean() - critic(real).mean()).div(k).backward()
                    if last:
                        c_opt.step()
                        c_opt.zero_grad()
            """,
            title="two optimizers: the generator's clear follows its own step; the step after the critic's "
                  "backward is the critic's",
        ),
        bad(
            """
            import torch


            def adversarial(gen, critic, batches, k):
                g_opt = torch.optim.Adam(gen.parameters())
                c_opt = torch.optim.Adam(critic.parameters())
                for j, (real, z) in enumerate(batches):
                    last = (j + 1) % k == 0
                    fake = gen(z)
                    if last:
                        g_opt.zero_grad()
                    (-critic(fake).mean() / k).backward()
                    if last:
                        g_opt.step()
                    (critic(fake.detach()).mean() - critic(real).mean()).div(k).backward()
                    if last:
                        c_opt.step()
                        c_opt.zero_grad()
            """,
            line=11,
            title="two optimizers, but the generator's clear precedes the generator's own last backward and step",
        ),
        good(
            """
            class Runner:
                def __init__(self, model, optimizer, accum_count):
                    self.model, self.optimizer, self.accum_count = model, optimizer, accum_count

                def update(self, micro_batches):
                    if self.accum_count > 1:
                        self.optimizer.zero_grad()
                    for batch in micro_batches:
                        if self.accum_count == 1:
                            self.optimizer.zero_grad()
                        self.model(batch).loss.backward()
                        if self.accum_count == 1:
                            self.optimizer.step()
                    if self.accum_count > 1:
                        self.optimizer.step()
            """,
            title="a test the same on every micro-batch (`accum_count == 1`): the loop steps on all of them or "
                  "accumulates and steps once after, never clears inside a window",
        ),
        bad(
            """
            class Runner:
                def __init__(self, model, optimizer, accum_count):
                    self.model, self.optimizer, self.accum_count = model, optimizer, accum_count

                def update(self, micro_batches):
                    for i, batch in enumerate(micro_batches):
                        self.optimizer.zero_grad()
                        self.model(batch).loss.backward()
                        if (i + 1) % self.accum_count == 0:
                            self.optimizer.step()
            """,
            line=7,
            fixed="""
            class Runner:
                def __init__(self, model, optimizer, accum_count):
                    self.model, self.optimizer, self.accum_count = model, optimizer, accum_count

                def update(self, micro_batches):
                    for i, batch in enumerate(micro_batches):
                        self.model(batch).loss.backward()
                        if (i + 1) % self.accum_count == 0:
                            self.optimizer.step()
                            self.optimizer.zero_grad()
            """,
            title="the same runner, its step guarded by the micro-batch counter: the clear on every micro-batch "
                  "loses the window",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            from torch.distributed.pipelining import ScheduleGPipe

            schedule = ScheduleGPipe(stage, n_microbatches=8, scale_grads=False,
                                     loss_fn=lambda out, y: F.cross_entropy(out, y) / (8 * accum_steps))
            for i, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                schedule.step(x, target=y)
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
            """,
            line=8,
            fixed="""
            import torch
            import torch.nn.functional as F
            from torch.distributed.pipelining import ScheduleGPipe

            schedule = ScheduleGPipe(stage, n_microbatches=8, scale_grads=False,
                                     loss_fn=lambda out, y: F.cross_entropy(out, y) / (8 * accum_steps))
            for i, (x, y) in enumerate(loader):
                schedule.step(x, target=y)
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="the clear before each pipeline schedule's `step()` (a backward over its micro-batches): "
                  "only the last batch of the window reaches the update",
        ),
        good(
            """
            import torch

            scaler = torch.amp.GradScaler() if use_amp else None
            for i, (x, y) in enumerate(loader):
                loss = torch.nn.functional.mse_loss(model(x), y) / accum
                if scaler is not None:
                    scaler.scale(loss).backward()
                    if (i + 1) % accum == 0:
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad()
                else:
                    loss.backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            title="the AMP branch clears after its step; the plain backward is on the other side of the `else`",
        ),
        bad(
            """
            import torch

            scaler = torch.amp.GradScaler() if use_amp else None
            for i, (x, y) in enumerate(loader):
                loss = torch.nn.functional.mse_loss(model(x), y) / accum
                if scaler is not None:
                    scaler.scale(loss).backward()
                    if (i + 1) % accum == 0:
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad()
                else:
                    if (i + 1) % accum == 0:
                        optimizer.zero_grad()
                    loss.backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
            """,
            line=14,
            title="the plain branch clears before its own backward on the window's last micro-batch",
        ),
        good(
            """
            import torch


            def fit_batch(model, optimizer, batch, micro_batch_size):
                while micro_batch_size > 0:
                    try:
                        optimizer.zero_grad()
                        loss = model(batch).mean()
                        loss.backward()
                    except torch.cuda.OutOfMemoryError:
                        micro_batch_size //= 2
                    else:
                        break
                optimizer.step()
            """,
            title="an out-of-memory retry loop: it repeats only after a failure, whose partial gradients the clear drops",
        ),
        bad(
            """
            import torch


            def fit_batch(model, optimizer, micro_batches):
                while micro_batches:
                    try:
                        optimizer.zero_grad()
                        loss = model(micro_batches.pop()).mean()
                        loss.backward()
                    except torch.cuda.OutOfMemoryError:
                        torch.cuda.empty_cache()
                optimizer.step()
            """,
            line=7,
            title="the same try/except with no `break` on success: every micro-batch runs, each clearing the last",
        ),
        good(
            """
            import torch
            from accelerate import Accelerator


            class Finetuner:
                def __init__(self, model, loader, accum):
                    self.accelerator = Accelerator(gradient_accumulation_steps=accum)
                    self.optimizer = torch.optim.AdamW(model.parameters())
                    keys, values = ["model"], [model]
                    keys.extend(["optimizer"])
                    values.extend([self.optimizer])
                    for key, value in zip(keys, self.accelerator.prepare(*values)):
                        setattr(self, key, value)
                    self.loader = loader

                def epoch(self):
                    for batch in self.loader:
                        with self.accelerator.accumulate(self.model):
                            loss = self.model(**batch).loss
                            self.accelerator.backward(loss)
                            self.optimizer.step()
                            self.optimizer.zero_grad()
            """,
            title="the optimizer went through `accelerator.prepare(*values)` in a list: Accelerate skips its clears between syncs",
        ),
        bad(
            """
            import torch
            from accelerate import Accelerator


            class Finetuner:
                def __init__(self, model, loader, accum):
                    self.accelerator = Accelerator(gradient_accumulation_steps=accum)
                    self.optimizer = torch.optim.AdamW(model.parameters())
                    self.model, self.optimizer, self.loader = self.accelerator.prepare(model, self.optimizer, loader)

                def epoch(self):
                    for batch in self.loader:
                        with self.accelerator.accumulate(self.model):
                            self.optimizer.zero_grad()
                            loss = self.model(**batch).loss
                            self.accelerator.backward(loss)
                            self.optimizer.step()
            """,
            line=14,
            title="the prepared optimizer's clear at the top of `accumulate`: Accelerate runs it on the syncing "
                  "micro-batch, before that micro-batch's backward, and the window is lost",
        ),
        bad(
            """
            import torch
            from accelerate import Accelerator


            class Finetuner:
                def __init__(self, model, loader, accum):
                    self.accelerator = Accelerator(gradient_accumulation_steps=accum)
                    self.optimizer = torch.optim.AdamW(model.parameters())
                    keys, values = ["model"], [model]
                    for key, value in zip(keys, self.accelerator.prepare(*values)):
                        setattr(self, key, value)
                    self.loader = loader

                def epoch(self):
                    for batch in self.loader:
                        with self.accelerator.accumulate(self.model):
                            self.optimizer.zero_grad()
                            loss = self.model(**batch).loss
                            self.accelerator.backward(loss)
                            self.optimizer.step()
            """,
            line=17,
            title="the prepared list holds only the model: the optimizer's clear runs on every micro-batch",
        ),
        bad(
            """
            import torch


            def train(model, loader, optimizer, scheduler, accum):
                global_step = 0
                for i, batch in enumerate(loader):
                    loss = model(**batch).loss / accum
                    loss.backward()
                    if (i + 1) % accum == 0:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                        global_step += 1
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
            """,
            line=14,
            title="the accumulation guard holds the clip and the counter, but not the step",
        ),
        good(
            """
            import torch


            def train(model, loader, optimizer, log_every):
                for i, batch in enumerate(loader):
                    loss = model(**batch).loss
                    loss.backward()
                    if i % log_every == 0:
                        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
                        print(f"step {i}: grad norm {norm:.2f}")
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="measuring the gradient norm every N steps is not an accumulation guard",
        ),
        bad(
            """
            import torch

            for i, (x, y) in enumerate(train_loader):
                optimizer.zero_grad()
                loss = criterion(model(x), y) / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
            """,
            line=4,
            fixed="""
            import torch

            for i, (x, y) in enumerate(train_loader):
                loss = criterion(model(x), y) / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="zero_grad at the top of every iteration",
        ),
        bad(
            """
            def train(model, loader, opt, sched, grad_accum):
                for step, batch in enumerate(loader):
                    loss = model(**batch).loss / grad_accum
                    loss.backward()
                    opt.zero_grad(set_to_none=True)
                    if step % grad_accum != 0:
                        continue
                    opt.step()
                    sched.step()
            """,
            line=5,
            fixed="""
            def train(model, loader, opt, sched, grad_accum):
                for step, batch in enumerate(loader):
                    loss = model(**batch).loss / grad_accum
                    loss.backward()
                    if step % grad_accum != 0:
                        continue
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    sched.step()
            """,
            title="zero_grad before the continue guard",
        ),
        bad(
            """
            import torch

            class Trainer:
                def __init__(self, model, accum):
                    self.model, self.accum = model, accum
                    self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

                def training_step(self, batch):
                    self.optimizer.zero_grad()
                    loss = self.model(**batch).loss / self.accum
                    loss.backward()

                def fit(self, loader):
                    for it, batch in enumerate(loader):
                        self.training_step(batch)
                        if (it + 1) % self.accum == 0:
                            self.optimizer.step()
            """,
            line=9,
            title="Trainer class: zero_grad in the per-micro-batch helper",
        ),
        good(
            """
            import torch


            class Learner:
                def __init__(self, net, window):
                    self.net, self.window = net, window
                    self.opt = torch.optim.SGD(net.parameters(), lr=0.01)
                    self.seen = 0

                def learn(self, x, y):
                    if self.seen == 0:
                        self.opt.zero_grad()
                    (torch.nn.functional.cross_entropy(self.net(x), y) / self.window).backward()
                    self.seen += 1
                    if self.seen % self.window == 0:
                        self.opt.step()
                        self.seen = 0
            """,
            title="called once per micro-batch: the clear is under a counter that changes between calls (the window's start)",
        ),
        bad(
            """
            import torch


            class Learner:
                def __init__(self, net, window, reset_each_batch):
                    self.net, self.window = net, window
                    self.reset_each_batch = reset_each_batch
                    self.opt = torch.optim.SGD(net.parameters(), lr=0.01)
                    self.seen = 0

                def learn(self, x, y):
                    if self.reset_each_batch:
                        self.opt.zero_grad()
                    (torch.nn.functional.cross_entropy(self.net(x), y) / self.window).backward()
                    self.seen += 1
                    if self.seen % self.window == 0:
                        self.opt.step()
            """,
            line=13,
            title="the clear's test is a setting fixed at construction: when it holds, it holds on every micro-batch",
        ),
        bad(
            """
            import torch

            scaler = torch.amp.GradScaler()
            for it in range(max_iters):
                for micro_step in range(accumulation_steps):
                    x, y = get_batch("train")
                    for p in model.parameters():
                        p.grad = None
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        _, loss = model(x, y)
                    scaler.scale(loss / accumulation_steps).backward()
                scaler.step(optim)
                scaler.update()
            """,
            line=8,
            title="p.grad = None inside the micro-batch loop",
        ),
        bad(
            """
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=4)
            model, optimizer, dl = accelerator.prepare(model, optimizer, dl)
            for batch in dl:
                with accelerator.accumulate(model):
                    model.zero_grad()
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
            """,
            line=7,
            fixed="""
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=4)
            model, optimizer, dl = accelerator.prepare(model, optimizer, dl)
            for batch in dl:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="Accelerate skips the prepared optimizer's zero_grad, not model.zero_grad()",
        ),
        good(
            """
            import torch

            for i, (x, y) in enumerate(train_loader):
                loss = criterion(model(x), y) / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="zero_grad at the bottom of the guarded update",
        ),
        good(
            """
            for i, (x, y) in enumerate(loader):
                if i % grad_accum == 0:
                    opt.zero_grad(set_to_none=True)
                (loss_fn(model(x), y) / grad_accum).backward()
                if (i + 1) % grad_accum == 0:
                    opt.step()
            """,
            title="zero_grad under its own once-per-window condition",
        ),
        good(
            """
            import torch


            def run_epoch(model, loader, optimizer, accum):
                for i, batch in enumerate(loader):
                    try:
                        loss = model(**batch).loss / accum
                        loss.backward()
                        if (i + 1) % accum == 0:
                            optimizer.step()
                            optimizer.zero_grad()
                    except torch.cuda.OutOfMemoryError:
                        optimizer.zero_grad()  # only after a micro-batch failed: drop its partial gradients
                        torch.cuda.empty_cache()
                        continue
            """,
            title="a clear in the `except` clause runs only when a micro-batch failed",
        ),
        bad(
            """
            import torch


            def run_epoch(model, loader, optimizer, accum):
                for i, batch in enumerate(loader):
                    try:
                        optimizer.zero_grad()
                        loss = model(**batch).loss / accum
                        loss.backward()
                        if (i + 1) % accum == 0:
                            optimizer.step()
                    except torch.cuda.OutOfMemoryError:
                        torch.cuda.empty_cache()
                        continue
            """,
            line=7,
            title="the same loop with the clear in the `try` body: it runs on every micro-batch that goes through",
        ),
        bad(
            """
            import torch


            def run_epoch(model, loader, optimizer, accum):
                for i, batch in enumerate(loader):
                    try:
                        loss = model(**batch).loss / accum
                        loss.backward()
                        if (i + 1) % accum == 0:
                            optimizer.step()
                    except torch.cuda.OutOfMemoryError:
                        torch.cuda.empty_cache()
                    finally:
                        optimizer.zero_grad()
            """,
            line=14,
            title="a clear in `finally` runs after every micro-batch, failed or not",
        ),
        good(
            """
            for it in range(max_iters):
                model.zero_grad(set_to_none=True)
                for micro_step in range(accumulation_steps):
                    x, y = get_batch("train")
                    _, loss = model(x, y)
                    (loss / accumulation_steps).backward()
                optim.step()
            """,
            title="model.zero_grad() before the nested micro-batch loop",
        ),
        good(
            """
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=4)
            model, optimizer, dl = accelerator.prepare(model, optimizer, dl)
            for batch in dl:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="Accelerate: the prepared optimizer's zero_grad is skipped between syncs",
        ),
        good(
            """
            import torch

            for x, y in loader:
                for p in model.parameters():
                    p.grad = None
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
            """,
            title="no accumulation: clearing every iteration is right",
        ),
        good(
            """
            def train(model, loader, opt, accum):
                for micro, (x, y) in enumerate(loader, start=1):
                    (model(x, y) / accum).backward()
                    if micro % accum:
                        continue
                    opt.step()
                    for p in model.parameters():
                        p.grad = None
            """,
            title="p.grad = None after the continue guard",
        ),
        good(
            """
            import torch


            def train(model, loader, optimizer, scheduler, args):
                model.train()
                num_batches = len(loader)
                for step, batch in enumerate(loader):
                    loss = model(**batch).loss / args.gradient_accumulation_steps
                    loss.backward()
                    last_batch = step == num_batches - 1
                    do_step = last_batch or (step + 1) % args.gradient_accumulation_steps == 0
                    if not do_step:
                        continue
                    torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
            """,
            title="a named boolean guard: `if not do_step: continue` before the clear",
        ),
        good(
            """
            import torch


            def main(model, loader, optimizer, lr_scheduler, accum):
                def optimizer_step():
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    lr_scheduler.step()

                for epoch in range(3):
                    for i, batch in enumerate(loader):
                        loss = model(batch) / accum
                        loss.backward()
                        do_step = (i + 1) % accum == 0 or i == len(loader) - 1
                        if do_step:
                            optimizer_step()
                            optimizer.zero_grad()
            """,
            title="the step in a nested helper called under `if do_step:`, the clear beside it",
        ),
        bad(
            """
            import torch


            def train(model, loader, optimizer, scheduler, args):
                model.train()
                num_batches = len(loader)
                for step, batch in enumerate(loader):
                    loss = model(**batch).loss / args.gradient_accumulation_steps
                    loss.backward()
                    last_batch = step == num_batches - 1
                    do_step = last_batch or (step + 1) % args.gradient_accumulation_steps == 0
                    optimizer.zero_grad()
                    if not do_step:
                        continue
                    optimizer.step()
                    scheduler.step()
            """,
            line=12,
            fixed="""
            import torch


            def train(model, loader, optimizer, scheduler, args):
                model.train()
                num_batches = len(loader)
                for step, batch in enumerate(loader):
                    loss = model(**batch).loss / args.gradient_accumulation_steps
                    loss.backward()
                    last_batch = step == num_batches - 1
                    do_step = last_batch or (step + 1) % args.gradient_accumulation_steps == 0
                    if not do_step:
                        continue
                    optimizer.step()
                    optimizer.zero_grad()
                    scheduler.step()
            """,
            title="a named boolean guard, but the clear comes before its `continue`",
        ),
        bad(
            """
            from dataclasses import dataclass

            import torch


            @dataclass
            class TrainConfig:
                lr: float = 3e-4
                grad_accum: int = 1


            def train(cfg: TrainConfig, model, loader, optimizer):
                for i, (x, y) in enumerate(loader):
                    optimizer.zero_grad()
                    loss = torch.nn.functional.cross_entropy(model(x), y) / cfg.grad_accum
                    loss.backward()
                    if (i + 1) % cfg.grad_accum == 0:
                        optimizer.step()
            """,
            line=14,
            fixed="""
            from dataclasses import dataclass

            import torch


            @dataclass
            class TrainConfig:
                lr: float = 3e-4
                grad_accum: int = 1


            def train(cfg: TrainConfig, model, loader, optimizer):
                for i, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / cfg.grad_accum
                    loss.backward()
                    if (i + 1) % cfg.grad_accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            title="K from a config dataclass field that defaults to 1: reported as conditional on K > 1",
            severity=Severity.WARNING,
        ),
        good(
            """
            import torch


            def train_one_epoch(model, loader, optimizer, accum_steps, max_norm=None):
                last_idx = len(loader) - 1
                optimizer.zero_grad()
                for idx, (images, labels) in enumerate(loader):
                    is_last = idx == last_idx
                    do_update = is_last or (idx + 1) % accum_steps == 0

                    def backward_and_step(loss):
                        loss.backward()
                        if do_update:
                            if max_norm is not None:
                                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                            optimizer.step()

                    loss = torch.nn.functional.cross_entropy(model(images), labels) / accum_steps
                    backward_and_step(loss)
                    if not do_update:
                        continue
                    optimizer.zero_grad()
            """,
            title="the step under `if do_update:` in a nested helper, the clear after `if not do_update: continue`",
        ),
        bad(
            """
            import torch

            def fit(net, batches, scheduler, accum_steps):
                # `scheduler` is a warmup wrapper that owns the optimizer: it clears and applies gradients
                for n, (inputs, labels) in enumerate(batches):
                    scheduler.zero_grad()
                    loss = torch.nn.functional.mse_loss(net(inputs), labels) / accum_steps
                    loss.backward()
                    if (n + 1) % accum_steps == 0:
                        scheduler.step()
            """,
            line=6,
            fixed="""
            import torch

            def fit(net, batches, scheduler, accum_steps):
                # `scheduler` is a warmup wrapper that owns the optimizer: it clears and applies gradients
                for n, (inputs, labels) in enumerate(batches):
                    loss = torch.nn.functional.mse_loss(net(inputs), labels) / accum_steps
                    loss.backward()
                    if (n + 1) % accum_steps == 0:
                        scheduler.step()
                        scheduler.zero_grad()
            """,
            title="an object called scheduler whose zero_grad() and step() are called is the optimizer",
        ),
        good(
            """
            import torch


            class GradStash:
                def __init__(self, model):
                    self.model = model
                    self.saved = {}

                def keep(self):
                    for name, p in self.model.named_parameters():
                        if p.grad is not None:
                            self.saved[name] = p.grad.clone()

                def put_back(self):
                    for name, p in self.model.named_parameters():
                        if name in self.saved:
                            p.grad = self.saved[name]


            def train(model, loader, optimizer, perturb, accum=4, rounds=3):
                stash = GradStash(model)
                for i, (x, y) in enumerate(loader):
                    torch.nn.functional.cross_entropy(model(x), y).backward()
                    stash.keep()
                    for r in range(rounds):
                        perturb(model, r)
                        if r < rounds - 1:
                            model.zero_grad()
                        else:
                            stash.put_back()
                        torch.nn.functional.cross_entropy(model(x), y).backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            title="an adversarial inner loop clears between its passes, but the window's gradients are copied "
                  "aside before and written back before the last pass",
        ),
        bad(
            """
            import torch


            class GradStash:
                def __init__(self, model):
                    self.model = model
                    self.saved = {}

                def keep(self):
                    for name, p in self.model.named_parameters():
                        if p.grad is not None:
                            self.saved[name] = p.grad.clone()

                def put_back(self):
                    for name, p in self.model.named_parameters():
                        if name in self.saved:
                            p.grad = self.saved[name]


            def train(model, loader, optimizer, perturb, accum=4, rounds=3):
                stash = GradStash(model)
                for i, (x, y) in enumerate(loader):
                    torch.nn.functional.cross_entropy(model(x), y).backward()
                    stash.keep()
                    for r in range(rounds):
                        perturb(model, r)
                        model.zero_grad()
                        torch.nn.functional.cross_entropy(model(x), y).backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            line=27,
            title="the copy is kept but never written back: the clears throw the window's gradients away",
        ),
        bad(
            """
            import torch


            def train(model, loader, optimizer, accum):
                for step, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / accum
                    loss.backward()
                    if (step + 1) % accum == 0:
                        optimizer.zero_grad()
                        optimizer.step()
            """,
            line=9,
            fixed="""
            import torch


            def train(model, loader, optimizer, accum):
                for step, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / accum
                    loss.backward()
                    if (step + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            title="the clear inside the update, between the window's last backward and the step: the step sees nothing",
        ),
        bad(
            """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=8)
            optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                with accelerator.accumulate(model):
                    if accelerator.sync_gradients:
                        model.zero_grad()
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
            """,
            line=10,
            title="a clear under `if accelerator.sync_gradients:` before the backward: it runs on the window's last "
                  "micro-batch and throws away the seven before it",
        ),
        good(
            """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=8)
            optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    if accelerator.sync_gradients:
                        accelerator.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    if accelerator.sync_gradients:
                        model.zero_grad()
            """,
            title="the same sync test, after the step: the window is cleared once it has been used",
        ),
        bad(
            """
            import torch


            class Loop:
                def __init__(self, model, optimizer, accum):
                    self.model, self.optimizer, self.accum = model, optimizer, accum

                def run(self, loader):
                    for it, (x, y) in enumerate(loader):
                        boundary = (it + 1) % self.accum == 0
                        if boundary:
                            self.model.zero_grad(set_to_none=True)
                        loss = torch.nn.functional.mse_loss(self.model(x), y) / self.accum
                        loss.backward()
                        if not boundary:
                            continue
                        self.optimizer.step()
            """,
            line=12,
            title="the boundary test kept in a variable: the clear under it runs before the last micro-batch's "
                  "backward, the step after the `continue`",
        ),
        good(
            """
            import torch


            class Loop:
                def __init__(self, model, optimizer, accum):
                    self.model, self.optimizer, self.accum = model, optimizer, accum

                def run(self, loader):
                    for it, (x, y) in enumerate(loader):
                        opens = it % self.accum == 0
                        if opens:
                            self.model.zero_grad(set_to_none=True)
                        loss = torch.nn.functional.mse_loss(self.model(x), y) / self.accum
                        loss.backward()
                        if (it + 1) % self.accum != 0:
                            continue
                        self.optimizer.step()
            """,
            title="the variable holds the window's first micro-batch: the clear opens the window",
        ),
        good(
            """
            import torch
            from accelerate import Accelerator, DeepSpeedPlugin

            plugin = DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=4)
            accelerator = Accelerator(gradient_accumulation_steps=4, deepspeed_plugin=plugin)
            optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                with accelerator.accumulate(model):
                    optimizer.zero_grad()
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
            """,
            title="with a DeepSpeed plugin the engine owns the update: the prepared optimizer's clear does nothing",
        ),
        bad(
            """
            import torch

            model = build_model()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            accum = 4
            for i, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y) / accum
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if (i + 1) % accum == 0:
                    optimizer.step()
            """,
            line=7,
            title="a clip runs on every micro-batch after the clear: no fix (moved into the update, the clear would leave that clip cutting a partial sum of the window)",
        ),
    )

    def check(self, ctx):
        model = ctx.model(training_model)
        for loop in model.loops + model.window_functions:
            if not (loop.innermost and loop.accumulates):
                continue
            k = describe_k(ctx, loop)
            order = {id(ref.node): position for position, ref in enumerate(loop.calls)}
            last_backward = max((order.get(id(b.node), -1) for b in loop.backward_calls), default=-1)
            first_step = min((order.get(id(r.node), -1) for r in loop.step_calls), default=-1)
            for ref in model.micro_batch_clears(loop):
                name = f"`{ctx.code_for(ref.node.func.value)}.zero_grad()`"
                fix = _fix(ctx, model, loop, ref)
                if last_backward >= 0 and last_backward < order[id(ref.node)] < first_step:
                    yield self.report_if(k_condition(ctx, loop), ref.node, (
                        f"{name} runs on every micro-batch, between the backward and the optimizer step, which "
                        f"runs once every {k} micro-batches: the gradients are cleared before the step can use "
                        "them, so the optimizer steps on nothing; clear once per update, after the "
                        "optimizer step"), fix, self._evidence(ctx, model, loop, ref, name))
                else:
                    yield self.report_if(k_condition(ctx, loop), ref.node, self._message(name, k), fix,
                                         self._evidence(ctx, model, loop, ref, name))
            for window in model.window_clears(loop):
                yield self._window_clear(ctx, model, loop, window, k)
            for ref in _grad_none_assignments(model, loop):
                if not model.runs_per_update(loop, ref):
                    yield self.report_if(k_condition(ctx, loop), ref.node, self._message(f"`{ctx.code_for(ref.node)}`", k),
                                         evidence=self._evidence(ctx, model, loop, ref, f"`{ctx.code_for(ref.node)}`"))
        yield from self._update_left_outside_its_guard(ctx, model)

    def _window_clear(self, ctx, model, loop, window, k: str):
        """A clear on the window's last micro-batch that loses the window (`TrainingModel.window_clears`):
        before that micro-batch's backward, or between the backward and the optimizer step."""
        clear, backward, step = window.clear, window.backward, window.step
        name = f"`{ctx.code_for(clear.node.func.value)}.zero_grad()`"
        backward_text = ctx.code_for(backward.node).strip()
        if window.where == "before_last_backward":
            message = (f"{name} runs once per update, on the window's last micro-batch, but before that micro-batch's "
                       f"`{backward_text}`: it throws away the gradients of the window's other micro-batches, and the "
                       f"step sees only the last micro-batch's gradient (1 of {k}); clear after the optimizer step "
                       "(or at the window's first micro-batch)")
            order = premise("the last micro-batch's backward runs after it", backward.node, "call")
        else:
            message = (f"{name} runs once per update, after the window's last `{backward_text}` but before the "
                       f"optimizer step: it clears the gradients the {k} micro-batches accumulated before the step can "
                       "use them, so the update steps on zero gradients; clear after the optimizer step")
            order = premise("the window's last backward runs before it, and no backward runs between it and the step",
                            backward.node, "call")
        fix = None
        if window.where == "before_step" and not clear.via and not step.via:
            line, anchor = own_line(ctx.index, clear.node), own_line(ctx.index, step.node)
            if line is not None and anchor is not None:
                fix = move_line(ctx.module, ctx.index, line, anchor, "after",
                                "Move the clear after the optimizer step", safe=False)
        return self.report_if(k_condition(ctx, loop), clear.node, message, fix, evidence=[
            *accumulation_premises(ctx, loop), _boundary_premise(ctx, model, loop, clear, name), order,
            premise("the optimizer step of the same update runs after it", step.node, "call")])

    def _update_left_outside_its_guard(self, ctx, model):
        """`if (i + 1) % K == 0:` holds the clip (and a step counter) but not the optimizer step and
        the clear after it: the loop updates on every micro-batch although it was written to
        accumulate K of them."""
        for loop in model.loops:
            if loop.accumulates or not loop.innermost or not loop.step_calls or not isinstance(loop.node, cst.For):
                continue
            guard = _clip_only_guard(ctx, loop)
            if guard is None:
                continue
            for ref in model.own_calls(loop):
                if model.is_zero_grad(ref.node, ref.scope) and ref.anchor not in walk(guard):
                    yield self.report(ref.node, (
                        f"`{ctx.code_for(ref.node.func.value)}.zero_grad()` and the optimizer step run on every "
                        f"micro-batch, outside `if {ctx.code_for(guard.test)}:`, which holds only the clip: every "
                        "micro-batch is an update, not one every window; move the step and the clear into "
                        "that branch"), evidence=[*loop_premises(ctx, loop),
                                                  premise(f"`if {ctx.code_for(guard.test)}:` guards only the clip",
                                                          guard, "use")])
                    break

    @staticmethod
    def _evidence(ctx, model, loop, ref, name: str) -> list:
        return [*accumulation_premises(ctx, loop), _every_micro_batch(ctx, model, loop, ref, name)]

    @staticmethod
    def _message(what: str, k: str) -> str:
        return (f"{what} runs on every micro-batch, but the optimizer steps once every {k} micro-batches: "
                "each clear throws away the gradients accumulated so far and the step sees only the last "
                "micro-batch's gradient; clear once per update, after the optimizer step")


def _boundary_premise(ctx, model, loop, clear, name: str):
    """The clear runs on the window's last micro-batch only: under the update's condition (read
    through the assignment that stores it), or, under Accelerate, because Accelerate runs a
    prepared optimizer's clear only when the gradients sync (framework data)."""
    guard = loop.guard
    if guard is not None and guard.kind == "accelerate" and model._accelerate_skips(loop, clear):
        return premise(f"{name} clears a prepared optimizer inside `accumulate`: Accelerate runs it only when the "
                       "gradients sync, on the window's last micro-batch", clear.node, "framework")
    for ancestor in ctx.index.ancestors(clear.anchor if clear.via else clear.node):
        if isinstance(ancestor, cst.If):
            value, stored = model.stored_test(ancestor.test)
            if stored is not None:
                return premise(f"{name} runs under `{ctx.code_for(ancestor.test)}`, which holds "
                               f"`{ctx.code_for(value)}`: the update's condition",
                               clear.node, "use")
            if model._sync_flag(ancestor.test, clear.scope if not clear.via else loop.scope):
                return premise(f"{name} runs under `{ctx.code_for(ancestor.test)}`: Accelerate sets it only on the "
                               "window's last micro-batch, when the gradients sync", ancestor.test, "framework")
            break
    return premise(f"{name} runs under the update's condition", clear.node, "call")


def _every_micro_batch(ctx, model, loop, ref, name: str):
    """The clear runs on every micro-batch: proven when no test on its way can change between
    micro-batches (`TrainingModel.varying_test`); under one that can (`if i == 0:`,
    `if self.epoch_iteration == 0:`: the window's first micro-batch, where a clear belongs) unknown."""
    text = f"{name} is not under the update's guard: it runs on every micro-batch"
    test = model.varying_test(loop, ref)
    if test is not None:
        return unknown(f"{text} (`{ctx.code_for(test.test)}` can change between micro-batches)", test.test, "use")
    return premise(text, ref.node, "call")


def _grad_none_assignments(model, loop) -> list[CallRef]:
    """`p.grad = None` statements in the loop body and the same-file helpers it calls, as refs
    (the statement, its scope and the helper chain) so `runs_per_update` can place them."""
    bodies = [(loop.node.body, loop.scope, ())]
    for ref in model.own_calls(loop):
        target = model.callee(ref.node, ref.scope)
        if target is not None and len(ref.via) < 3:
            bodies.append((target.node.body, target.scope, ref.via + (ref.node,)))
    found = []
    for body, scope, via in bodies:
        for node in model.index.scope_nodes(body):
            if type(node) is cst.Assign and isinstance(node.value, cst.Name) and node.value.value == "None" and \
                    any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "grad" for t in node.targets):
                found.append(CallRef(node, scope, via))
    return found


def _fix(ctx, model, loop, ref) -> FixSpec | None:
    """Move the clear from the loop body into the update, right after the optimizer step; when
    the update clears already, only remove the per-micro-batch one."""
    if ref.via or clip_after_clear(model, loop, ref):  # moved, the clear would leave that clip a partial sum
        return None
    if _clips_per_micro_batch(ctx, model, loop):
        return None  # once the window accumulates, that clip would cut its partial sum (TL202): not one edit
    if loop.guard is not None and loop.guard.kind == "accelerate":
        return _clear_prepared_optimizer(ctx, model, loop, ref)
    line = loop_body_line(ctx.index, loop, ref.node)
    anchor = update_anchor(ctx.index, loop)
    if line is None or anchor is None:
        return None
    if any(model.is_zero_grad(other.node, other.scope) for other in model.update_calls(loop)):
        return FixSpec("Remove the per-micro-batch clear (the update clears already)", safe=False,
                       lines=(delete(line),))
    return move_line(ctx.module, ctx.index, line, anchor, "after",
                     "Move the clear into the update, after the optimizer step", safe=False, same_block=False)


def _clips_per_micro_batch(ctx, model, loop) -> bool:
    """A clip of the gradients (`clip_grad_norm_`) outside the update: on every micro-batch."""
    pattern = re.compile(CLIP_NAMES)
    for other in loop.calls:
        func = other.node.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if pattern.match(last) and not model.runs_per_update(loop, other):
            return True
    return False


def _clear_prepared_optimizer(ctx, model, loop, ref) -> FixSpec | None:
    """Under `accelerator.accumulate`, clear through the one prepared optimizer instead, after its
    step (Accelerate runs a prepared optimizer's `zero_grad()` only when the gradients sync, which
    is the whole last micro-batch of the window: before the step it would clear the window)."""
    steps = [r for r in loop.step_calls if not r.via]
    if len(steps) != 1 or len(loop.step_calls) != 1 or not isinstance(steps[0].node.func, cst.Attribute):
        return None
    optimizer = steps[0].node.func.value
    receiver = ref.node.func.value if isinstance(ref.node.func, cst.Attribute) else None
    if receiver is None or model.is_prepared(optimizer, steps[0].scope) is not True \
            or not isinstance(optimizer, (cst.Name, cst.Attribute)) or ctx.code_for(receiver) == ctx.code_for(optimizer):
        return None
    index, name = ctx.index, ctx.code_for(optimizer)
    line, anchor = own_line(index, ref.node), own_line(index, steps[0].node)
    block = block_of(index, line) if line is not None else None
    if block is None or anchor is None or block_of(index, anchor) is not block:
        return None
    title = f"Clear through the prepared `{name}` after its step (Accelerate holds it back while accumulating)"
    if position_in(block, line) > position_in(block, anchor):
        return FixSpec(title, safe=False, replacements=((receiver, name),))
    call = ref.node.with_changes(func=ref.node.func.with_changes(value=cst.parse_expression(name)))
    text = line_text(ctx.module, line.with_changes(body=[line.body[0].with_changes(value=call)]))
    return FixSpec(title, safe=False, lines=(delete(line), after(anchor, text))) if text else None


