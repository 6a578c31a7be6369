"""TL101 scheduler-step-per-micro-batch."""

from __future__ import annotations

import libcst as cst

from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.fixkit import loop_body_line, move_line, prepare_with, update_anchor
from trainlint.rule import Rule, bad, good
from trainlint.model.training import RUNS_BACKWARD, backward_triggers, training_model
from trainlint.model.accumulation import describe_k, is_plateau_scheduler, micro_batch_horizon
from trainlint.model.shipped import k_condition
from trainlint.model.index import walk
from trainlint.model.summaries import COUNTER, POSITION, own_rate_clock
from trainlint.model.premises import premise
from trainlint.model.proofs import accumulation_premises, loop_premises, role_premise, training_premises


class SchedulerStepPerMicroBatch(Rule):
    code = "TL101"
    name = "scheduler-step-per-micro-batch"
    severity = Severity.ERROR
    summary = "Under gradient accumulation, an LR scheduler steps on every micro-batch instead of once per update"
    message = "the LR scheduler steps on every micro-batch while the optimizer steps once per update"
    triggers = backward_triggers(("backward", "step(", "sched"))
    gate = RUNS_BACKWARD & named("^step$")  # a training loop: a backward (or a pipeline schedule's step) and a step
    what_it_does = """
        Finds training loops that accumulate gradients (the backward runs on every iteration while
        the optimizer step is guarded by `if (i + 1) % K == 0:`, `if micro % K: continue`,
        `accelerator.sync_gradients`, or runs after a nested micro-batch loop) and flags an LR
        scheduler's `.step()` that runs on every micro-batch rather than inside the update. A guard
        kept in a variable (`do_step = (i + 1) % K == 0 or last` then `if do_step:`) is read through
        the assignment that reaches the test, whatever the variable is called.

        Under Accelerate, a scheduler passed to `accelerator.prepare` is accumulation-aware (it
        only advances when gradients sync), so stepping it inside `with accelerator.accumulate(...)`
        is fine; a scheduler that was not prepared is flagged. A prepared scheduler of an Accelerator
        built with `step_scheduler_with_optimizer=False` steps on every call by the user's own choice
        (Accelerate's switch for a schedule not counted in updates) and is left alone; one the code
        never passed to `prepare` is not covered by that switch and is still flagged. An object
        handed to `accelerator.prepare(*objs)` in a list counts as prepared. Per-epoch schedulers stepped outside
        the batch loop and `ReduceLROnPlateau.step(metric)` are not about the update clock and are
        left alone. So is a scheduler built on the micro-batch clock: when every length argument
        of its construction (`num_warmup_steps=warmup * K`, `num_training_steps=total * K`, `T_max`,
        `total_steps`, positional lengths after the optimizer; a warmup of 0 aside) is multiplied
        by the loop's K, or counts the loop's micro-batches with K nowhere in it
        (`total_steps=epochs * len(train_loader)`), stepping it every micro-batch ends it on time.
        A warmup given as a stated count (`num_warmup_steps=args.warmup`, a literal) does not
        decide the clock: the horizon beside it does.
        A schedule of the project's own whose `step(epoch, it)` writes the rate for the position it is
        told is left alone too (a repeated call sets the same rate), and so is any `step(...)` handed a
        name the loop binds (`step(cur_epoch=epoch, cur_step=i)`, torch's `step(epoch)`), whatever its
        class: it sets the rate for that position instead of advancing; one that advances its own
        counter on each call runs ahead like torch's, and the message says so. An object whose
        `zero_grad()` is called as well as its `step()` owns the optimizer, whatever its name.

        When K is 1 as the code ships (an argparse option, a config/dataclass field or a parameter
        that defaults to 1, `cfg.get("accum", 1)`, `ACCUM = 1`), nothing accumulates until someone
        raises it: the finding then says it holds only when K is set above 1 and is reported one
        severity lower (warning).

        A framework engine that owns accumulation is read from its model (trainlint/frameworks/
        deepspeed.toml): the engine `deepspeed.initialize(...)` returns, configured with a dict
        literal whose `gradient_accumulation_steps` is above 1, takes `engine.backward(loss)` and
        `engine.step()` on every micro-batch and steps its optimizer and scheduler once per window
        itself; a scheduler `.step()` of the script's own on every micro-batch beside it is
        reported. A JSON config file or a dict built elsewhere leaves K unknown: not judged.
        """
    why_bad = """
        A training run has three clocks: micro-batches, optimizer updates, and data seen. The LR
        schedule belongs to the update clock: warmup and decay lengths are counted in optimizer
        steps. Stepping the scheduler on every micro-batch advances it K times per update, so a
        cosine or linear schedule built for N updates reaches its end after N/K updates and the
        rest of the run trains at the final (often zero) learning rate; warmup is K times shorter
        too. Nothing crashes and the loss still goes down, so the bug shows up only as a worse
        model. (`OneCycleLR` raises once it is stepped past `total_steps`.)
        """
    fix_safety = """
        Unsafe: moving the scheduler step changes the learning-rate schedule the run trains
        with; if the loop does not accumulate as the rule reads it, the schedule it changes was
        right.
        """
    references = (
        "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
        "https://huggingface.co/docs/accelerate/usage_guides/gradient_accumulation",
        "https://huggingface.co/docs/transformers/main_classes/optimizer_schedules",
    )
    examples = (
        bad(
            """
            import torch
            import torch.nn.functional as F
            from torch.distributed.pipelining import ScheduleGPipe

            # accumulation over pipeline steps: the schedule sums its micro-batches (scale_grads=False),
            # the loss is divided by all the micro-batches of the update
            schedule = ScheduleGPipe(stage, n_microbatches=8, scale_grads=False,
                                     loss_fn=lambda out, y: F.cross_entropy(out, y) / (8 * accum_steps))
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_updates)
            for i, (x, y) in enumerate(loader):
                schedule.step(x, target=y)
                scheduler.step()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            line=12,
            fixed="""
            import torch
            import torch.nn.functional as F
            from torch.distributed.pipelining import ScheduleGPipe

            # accumulation over pipeline steps: the schedule sums its micro-batches (scale_grads=False),
            # the loss is divided by all the micro-batches of the update
            schedule = ScheduleGPipe(stage, n_microbatches=8, scale_grads=False,
                                     loss_fn=lambda out, y: F.cross_entropy(out, y) / (8 * accum_steps))
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_updates)
            for i, (x, y) in enumerate(loader):
                schedule.step(x, target=y)
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
            """,
            title="a pipeline schedule's `step()` is the backward of one batch: the LR scheduler steps on it, "
                  "not once per update",
        ),
        good(
            """
            from accelerate import Accelerator
            from transformers import get_constant_schedule_with_warmup


            class Tuner:
                def setup(self, model, opt, loader, accum):
                    self.accelerator = Accelerator(gradient_accumulation_steps=accum, step_scheduler_with_optimizer=False)
                    self.opt = opt
                    self.sched = get_constant_schedule_with_warmup(self.opt, num_warmup_steps=500)
                    names, objs = ["model", "opt", "sched"], [model, self.opt, self.sched]
                    objs.append(loader)
                    wrapped = self.accelerator.prepare(*objs)
                    for attr, obj in zip(names, wrapped):
                        setattr(self, attr, obj)
                    self.loader = wrapped[-1]

                def fit(self):
                    for batch in self.loader:
                        with self.accelerator.accumulate(self.model):
                            loss = self.model(**batch).loss
                            self.accelerator.backward(loss)
                            self.opt.step()
                            self.sched.step()
                            self.opt.zero_grad()
            """,
            title="prepared through a list (`prepare(*objs)`), on an Accelerator told to step schedulers on every call",
        ),
        bad(
            """
            from accelerate import Accelerator
            from transformers import get_constant_schedule_with_warmup


            class Tuner:
                def setup(self, model, opt, loader, accum):
                    self.accelerator = Accelerator(gradient_accumulation_steps=accum, step_scheduler_with_optimizer=False)
                    self.opt = opt
                    self.sched = get_constant_schedule_with_warmup(self.opt, num_warmup_steps=500)
                    names, objs = ["model", "opt"], [model, self.opt]
                    objs.append(loader)
                    wrapped = self.accelerator.prepare(*objs)
                    for attr, obj in zip(names, wrapped):
                        setattr(self, attr, obj)
                    self.loader = wrapped[-1]

                def fit(self):
                    for batch in self.loader:
                        with self.accelerator.accumulate(self.model):
                            loss = self.model(**batch).loss
                            self.accelerator.backward(loss)
                            self.opt.step()
                            self.sched.step()
                            self.opt.zero_grad()
            """,
            line=23,
            title="the same switch, but the scheduler never went into the prepared list",
        ),
        bad(
            """
            import torch
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
            for i, (x, y) in enumerate(loader):
                if use_amp:
                    with torch.autocast("cuda"):
                        loss = criterion(model(x), y) / accum
                    scaler.scale(loss).backward()
                    if (i + 1) % accum == 0:
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad()
                else:
                    loss = criterion(model(x), y) / accum
                    loss.backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
                scheduler.step()
            """,
            line=18,
            title="the same update guard on the AMP and the full-precision path",
        ),
        good(
            """
            import torch

            for i, (x, y) in enumerate(loader):
                if use_amp:
                    with torch.autocast("cuda"):
                        loss = criterion(model(x), y) / accum
                    scaler.scale(loss).backward()
                    if (i + 1) % accum == 0:
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad()
                        scheduler.step()
                else:
                    loss = criterion(model(x), y) / accum
                    loss.backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
                        scheduler.step()
            """,
            title="each path steps the scheduler inside its update guard",
        ),
        bad(
            """
            import torch
            from torch.optim.lr_scheduler import CosineAnnealingLR

            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            scheduler = CosineAnnealingLR(optimizer, T_max=num_updates)
            for i, (x, y) in enumerate(train_loader):
                loss = criterion(model(x), y) / accum_steps
                loss.backward()
                scheduler.step()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            line=9,
            fixed="""
            import torch
            from torch.optim.lr_scheduler import CosineAnnealingLR

            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            scheduler = CosineAnnealingLR(optimizer, T_max=num_updates)
            for i, (x, y) in enumerate(train_loader):
                loss = criterion(model(x), y) / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
            """,
            title="plain loop: the scheduler steps outside the update branch",
        ),
        bad(
            """
            import torch
            from transformers import get_linear_schedule_with_warmup

            def train(model, loader, grad_accum=8):
                optim = torch.optim.AdamW(model.parameters(), lr=5e-5)
                lr_sched = get_linear_schedule_with_warmup(optim, 100, len(loader) // grad_accum)
                for step, batch in enumerate(loader):
                    loss = model(**batch).loss / grad_accum
                    loss.backward()
                    lr_sched.step()
                    if step % grad_accum != 0:
                        continue
                    optim.step()
                    optim.zero_grad()
            """,
            line=10,
            fixed="""
            import torch
            from transformers import get_linear_schedule_with_warmup

            def train(model, loader, grad_accum=8):
                optim = torch.optim.AdamW(model.parameters(), lr=5e-5)
                lr_sched = get_linear_schedule_with_warmup(optim, 100, len(loader) // grad_accum)
                for step, batch in enumerate(loader):
                    loss = model(**batch).loss / grad_accum
                    loss.backward()
                    if step % grad_accum != 0:
                        continue
                    optim.step()
                    lr_sched.step()
                    optim.zero_grad()
            """,
            title="HF-style train() with a continue guard",
        ),
        bad(
            """
            import torch

            class Trainer:
                def __init__(self, model, loader, accum):
                    self.model, self.loader, self.accum = model, loader, accum
                    self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                    self.lr_scheduler = torch.optim.lr_scheduler.OneCycleLR(self.optimizer, 0.1, total_steps=1000)

                def training_step(self, x, y):
                    loss = torch.nn.functional.cross_entropy(self.model(x), y) / self.accum
                    loss.backward()
                    self.lr_scheduler.step()

                def fit(self):
                    for it, (x, y) in enumerate(self.loader):
                        self.training_step(x, y)
                        if (it + 1) % self.accum == 0:
                            self.optimizer.step()
                            self.optimizer.zero_grad(set_to_none=True)
            """,
            line=12,
            title="Trainer class: the scheduler steps inside the per-micro-batch helper",
        ),
        bad(
            """
            import torch
            from accelerate import Accelerator
            from transformers import get_cosine_schedule_with_warmup

            accelerator = Accelerator(gradient_accumulation_steps=4)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            sched = get_cosine_schedule_with_warmup(opt, 500, 10_000)
            model, opt, train_dl = accelerator.prepare(model, opt, train_dl)
            for batch in train_dl:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    opt.step()
                    sched.step()
                    opt.zero_grad()
            """,
            line=14,
            fixed="""
            import torch
            from accelerate import Accelerator
            from transformers import get_cosine_schedule_with_warmup

            accelerator = Accelerator(gradient_accumulation_steps=4)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            sched = get_cosine_schedule_with_warmup(opt, 500, 10_000)
            model, opt, train_dl, sched = accelerator.prepare(model, opt, train_dl, sched)
            for batch in train_dl:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    opt.step()
                    sched.step()
                    opt.zero_grad()
            """,
            title="Accelerate: a scheduler that was not passed to accelerator.prepare",
        ),
        bad(
            """
            import torch
            sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
            scaler = torch.amp.GradScaler("cuda")
            for it in range(max_iters):
                for micro_step in range(gradient_accumulation_steps):
                    x, y = get_batch("train")
                    with torch.autocast("cuda", dtype=torch.float16):
                        logits, loss = model(x, y)
                        loss = loss / gradient_accumulation_steps
                    scaler.scale(loss).backward()
                    sched.step()
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
            """,
            line=11,
            title="nested micro-batch loop with AMP",
        ),
        good(
            """
            import torch
            from torch.optim.lr_scheduler import CosineAnnealingLR

            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            scheduler = CosineAnnealingLR(optimizer, T_max=num_updates)
            for i, (x, y) in enumerate(train_loader):
                loss = criterion(model(x), y) / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
            """,
            title="the scheduler steps inside the update branch",
        ),
        good(
            """
            import torch

            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=30)
            for epoch in range(90):
                for i, (x, y) in enumerate(loader):
                    loss = loss_fn(model(x), y) / 4
                    loss.backward()
                    if (i + 1) % 4 == 0:
                        opt.step()
                        opt.zero_grad()
                sched.step()
            """,
            title="a per-epoch scheduler stepped outside the batch loop",
        ),
        good(
            """
            import torch

            opt = torch.optim.Adam(model.parameters())
            plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=3)
            for step, (x, y) in enumerate(loader):
                (loss_fn(model(x), y) / accum).backward()
                if (step + 1) % accum == 0:
                    opt.step()
                    opt.zero_grad()
                if (step + 1) % eval_every == 0:
                    plateau.step(evaluate(model, val_loader))
            """,
            title="ReduceLROnPlateau stepped once per evaluation",
        ),
        good(
            """
            import torch
            from accelerate import Accelerator
            from transformers import get_scheduler

            accelerator = Accelerator(gradient_accumulation_steps=4)
            optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
            lr_scheduler = get_scheduler("linear", optimizer, num_warmup_steps=0, num_training_steps=1000)
            model, optimizer, loader, lr_scheduler = accelerator.prepare(model, optimizer, loader, lr_scheduler)
            for batch in loader:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()
            """,
            title="a scheduler prepared by Accelerate skips non-sync micro-batches",
        ),
        good(
            """
            import torch

            optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
            sched = torch.optim.lr_scheduler.LinearLR(optim, start_factor=0.1, total_iters=500)
            for batch in loader:
                loss = model(batch["input"]).mean()
                loss.backward()
                optim.step()
                sched.step()
                optim.zero_grad()
            """,
            title="no accumulation: one batch per update",
        ),
        good(
            """
            import torch

            def train(model, loader, opt, sched, accum):
                for micro, (x, y) in enumerate(loader, start=1):
                    loss = torch.nn.functional.mse_loss(model(x), y) / accum
                    loss.backward()
                    if micro % accum:
                        continue
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
                    sched.step()
                    opt.zero_grad(set_to_none=True)
            """,
            title="the scheduler steps after the continue guard",
        ),
        good(
            """
            import math

            import torch
            from accelerate import Accelerator
            from transformers import get_scheduler


            def main(args, model, train_dataloader):
                accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
                optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
                updates_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
                max_train_steps = args.num_train_epochs * updates_per_epoch
                lr_scheduler = get_scheduler(
                    "cosine",
                    optimizer=optimizer,
                    num_warmup_steps=args.num_warmup_steps * args.gradient_accumulation_steps,
                    num_training_steps=max_train_steps * args.gradient_accumulation_steps,
                )
                model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
                for epoch in range(args.num_train_epochs):
                    model.train()
                    for batch in train_dataloader:
                        with accelerator.accumulate(model):
                            loss = model(**batch).loss
                            accelerator.backward(loss)
                            optimizer.step()
                            lr_scheduler.step()
                            optimizer.zero_grad()
            """,
            title="a scheduler built on the micro-batch clock (warmup and length times K), not prepared, stepped every micro-batch",
        ),
        good(
            """
            import torch
            from transformers import get_cosine_schedule_with_warmup

            def main(model, loader, args):
                opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
                total = args.epochs * len(loader) // args.grad_accum
                sched = get_cosine_schedule_with_warmup(
                    opt, num_warmup_steps=args.warmup * args.grad_accum,
                    num_training_steps=total * args.grad_accum)
                for epoch in range(args.epochs):
                    for i, batch in enumerate(loader):
                        loss = model(**batch).loss / args.grad_accum
                        loss.backward()
                        if (i + 1) % args.grad_accum == 0:
                            opt.step()
                            opt.zero_grad()
                        sched.step()
            """,
            title="a manual loop whose schedule lengths are multiplied by K",
        ),
        bad(
            """
            import math

            import torch
            from accelerate import Accelerator
            from transformers import get_scheduler


            def main(args, model, train_dataloader):
                accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
                optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
                updates_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
                max_train_steps = args.num_train_epochs * updates_per_epoch
                lr_scheduler = get_scheduler(
                    "cosine",
                    optimizer=optimizer,
                    num_warmup_steps=args.num_warmup_steps,
                    num_training_steps=max_train_steps,
                )
                model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
                for epoch in range(args.num_train_epochs):
                    model.train()
                    for batch in train_dataloader:
                        with accelerator.accumulate(model):
                            loss = model(**batch).loss
                            accelerator.backward(loss)
                            optimizer.step()
                            lr_scheduler.step()
                            optimizer.zero_grad()
            """,
            line=27,
            fixed="""
            import math

            import torch
            from accelerate import Accelerator
            from transformers import get_scheduler


            def main(args, model, train_dataloader):
                accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
                optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
                updates_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
                max_train_steps = args.num_train_epochs * updates_per_epoch
                lr_scheduler = get_scheduler(
                    "cosine",
                    optimizer=optimizer,
                    num_warmup_steps=args.num_warmup_steps,
                    num_training_steps=max_train_steps,
                )
                model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(model, optimizer, train_dataloader, lr_scheduler)
                for epoch in range(args.num_train_epochs):
                    model.train()
                    for batch in train_dataloader:
                        with accelerator.accumulate(model):
                            loss = model(**batch).loss
                            accelerator.backward(loss)
                            optimizer.step()
                            lr_scheduler.step()
                            optimizer.zero_grad()
            """,
            title="only the warmup is on the micro-batch clock; the schedule length counts updates",
        ),
        bad(
            """
            import argparse

            import torch


            def parse_args():
                parser = argparse.ArgumentParser()
                parser.add_argument("--lr", type=float, default=3e-4)
                parser.add_argument("--gradient-accumulation-steps", type=int, default=1)
                return parser.parse_args()


            def train(args, model, loader, optimizer, scheduler: torch.optim.lr_scheduler.LRScheduler):
                for step, batch in enumerate(loader):
                    loss = model(**batch).loss / args.gradient_accumulation_steps
                    loss.backward()
                    if (step + 1) % args.gradient_accumulation_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad()
                    scheduler.step()
            """,
            line=20,
            fixed="""
            import argparse

            import torch


            def parse_args():
                parser = argparse.ArgumentParser()
                parser.add_argument("--lr", type=float, default=3e-4)
                parser.add_argument("--gradient-accumulation-steps", type=int, default=1)
                return parser.parse_args()


            def train(args, model, loader, optimizer, scheduler: torch.optim.lr_scheduler.LRScheduler):
                for step, batch in enumerate(loader):
                    loss = model(**batch).loss / args.gradient_accumulation_steps
                    loss.backward()
                    if (step + 1) % args.gradient_accumulation_steps == 0:
                        optimizer.step()
                        scheduler.step()
                        optimizer.zero_grad()
            """,
            title="K from an argparse option that defaults to 1: reported as conditional on K > 1",
            severity=Severity.WARNING,
        ),
        good(
            """
            import torch
            from schedules import build_schedule


            def train_epoch(model, optimizer, loader, epoch, accum_steps):
                lr_scheduler: torch.optim.lr_scheduler.LRScheduler = build_schedule(optimizer, iters_per_epoch=len(loader))
                for i, (x, y) in enumerate(loader):
                    lr_scheduler.step(cur_epoch=epoch, cur_step=i)
                    loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
                    loss.backward()
                    if (i + 1) % accum_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            title="a schedule from elsewhere told its position by the loop (step(cur_epoch=epoch, cur_step=i)) on every call",
        ),
        bad(
            """
            import torch
            from schedules import build_schedule


            def train_epoch(model, optimizer, loader, epoch, accum_steps):
                lr_scheduler: torch.optim.lr_scheduler.LRScheduler = build_schedule(optimizer, iters_per_epoch=len(loader))
                for i, (x, y) in enumerate(loader):
                    lr_scheduler.step()
                    loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
                    loss.backward()
                    if (i + 1) % accum_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            line=8,
            fixed="""
            import torch
            from schedules import build_schedule


            def train_epoch(model, optimizer, loader, epoch, accum_steps):
                lr_scheduler: torch.optim.lr_scheduler.LRScheduler = build_schedule(optimizer, iters_per_epoch=len(loader))
                for i, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
                    loss.backward()
                    if (i + 1) % accum_steps == 0:
                        optimizer.step()
                        lr_scheduler.step()
                        optimizer.zero_grad()
            """,
            title="the same schedule stepped with no position: each call advances it",
        ),
        good(
            """
            import torch
            from torch.optim.lr_scheduler import OneCycleLR


            def train(model, train_loader, epochs, accum_steps=4):
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                scheduler = OneCycleLR(optimizer, max_lr=1e-3, total_steps=epochs * len(train_loader))
                for epoch in range(epochs):
                    for i, (x, y) in enumerate(train_loader):
                        loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
                        loss.backward()
                        if (i + 1) % accum_steps == 0:
                            optimizer.step()
                            optimizer.zero_grad()
                        scheduler.step()
            """,
            title="a schedule as long as the loader's micro-batches (epochs * len(train_loader)), stepped per micro-batch",
        ),
        bad(
            """
            import torch
            from torch.optim.lr_scheduler import OneCycleLR


            def train(model, train_loader, epochs, accum_steps=4):
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                scheduler = OneCycleLR(optimizer, max_lr=1e-3, total_steps=epochs * len(train_loader) // accum_steps)
                for epoch in range(epochs):
                    for i, (x, y) in enumerate(train_loader):
                        loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
                        loss.backward()
                        if (i + 1) % accum_steps == 0:
                            optimizer.step()
                            optimizer.zero_grad()
                        scheduler.step()
            """,
            line=15,
            fixed="""
            import torch
            from torch.optim.lr_scheduler import OneCycleLR


            def train(model, train_loader, epochs, accum_steps=4):
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                scheduler = OneCycleLR(optimizer, max_lr=1e-3, total_steps=epochs * len(train_loader) // accum_steps)
                for epoch in range(epochs):
                    for i, (x, y) in enumerate(train_loader):
                        loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
                        loss.backward()
                        if (i + 1) % accum_steps == 0:
                            optimizer.step()
                            scheduler.step()
                            optimizer.zero_grad()
            """,
            title="a schedule counted in updates (len(train_loader) // K), stepped per micro-batch",
        ),
        good(
            """
            import torch
            from torch.optim import lr_scheduler as sched


            def fit(net, batches, n_epochs, warm, micro):
                opt = torch.optim.SGD(net.parameters(), lr=0.05)
                ramp = sched.LinearLR(opt, start_factor=0.01, total_iters=warm * len(batches))
                decay = sched.CosineAnnealingLR(opt, T_max=(n_epochs - warm) * len(batches))
                plan = sched.SequentialLR(opt, schedulers=[ramp, decay], milestones=[warm * len(batches)])
                for _ in range(n_epochs):
                    for j, (a, b) in enumerate(batches):
                        (torch.nn.functional.mse_loss(net(a), b) / micro).backward()
                        if j % micro == micro - 1:
                            opt.step()
                            opt.zero_grad()
                        plan.step()
            """,
            title="a composed schedule (SequentialLR) whose milestones and every schedule it runs count the loader's micro-batches",
        ),
        bad(
            """
            import torch
            from torch.optim import lr_scheduler as sched


            def fit(net, batches, n_epochs, warm, micro):
                opt = torch.optim.SGD(net.parameters(), lr=0.05)
                ramp = sched.LinearLR(opt, start_factor=0.01, total_iters=warm * len(batches))
                decay = sched.CosineAnnealingLR(opt, T_max=(n_epochs - warm) * len(batches) // micro)
                plan = sched.SequentialLR(opt, schedulers=[ramp, decay], milestones=[warm * len(batches)])
                for _ in range(n_epochs):
                    for j, (a, b) in enumerate(batches):
                        (torch.nn.functional.mse_loss(net(a), b) / micro).backward()
                        if j % micro == micro - 1:
                            opt.step()
                            opt.zero_grad()
                        plan.step()
            """,
            line=16,
            fixed="""
            import torch
            from torch.optim import lr_scheduler as sched


            def fit(net, batches, n_epochs, warm, micro):
                opt = torch.optim.SGD(net.parameters(), lr=0.05)
                ramp = sched.LinearLR(opt, start_factor=0.01, total_iters=warm * len(batches))
                decay = sched.CosineAnnealingLR(opt, T_max=(n_epochs - warm) * len(batches) // micro)
                plan = sched.SequentialLR(opt, schedulers=[ramp, decay], milestones=[warm * len(batches)])
                for _ in range(n_epochs):
                    for j, (a, b) in enumerate(batches):
                        (torch.nn.functional.mse_loss(net(a), b) / micro).backward()
                        if j % micro == micro - 1:
                            opt.step()
                            plan.step()
                            opt.zero_grad()
            """,
            title="the same composition, but one of the schedules it runs is counted in updates (// K): stepped per micro-batch, it ends early",
        ),
        good(
            """
            import math
            import torch

            class IterCosine:
                def __init__(self, optimizer, peak, iters_per_epoch, epochs):
                    self.optimizer, self.peak = optimizer, peak
                    self.per_epoch, self.length = iters_per_epoch, iters_per_epoch * epochs

                def step(self, epoch, batch_idx):
                    t = (epoch * self.per_epoch + batch_idx) / self.length
                    for group in self.optimizer.param_groups:
                        group["lr"] = self.peak * 0.5 * (1 + math.cos(math.pi * t))

            opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
            schedule = IterCosine(opt, 1e-3, steps_per_epoch, num_epochs)
            for epoch in range(num_epochs):
                for batch_idx, (inputs, labels) in enumerate(train_loader):
                    schedule.step(epoch=epoch, batch_idx=batch_idx)
                    loss = loss_fn(net(inputs), labels) / accum
                    loss.backward()
                    if (batch_idx + 1) % accum == 0:
                        opt.step()
                        opt.zero_grad()
            """,
            title="a project schedule told its position on every call (step(epoch=..., batch_idx=...)): a repeat sets the same rate",
        ),
        bad(
            """
            import torch


            def train(model, loader, optimizer, accum, total_updates):
                scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-3, total_steps=total_updates)
                last = len(loader) - 1
                for i, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / accum
                    loss.backward()
                    ready = (i + 1) % accum == 0 or i == last
                    if ready:
                        optimizer.step()
                        optimizer.zero_grad()
                    scheduler.step()
            """,
            line=14,
            fixed="""
            import torch


            def train(model, loader, optimizer, accum, total_updates):
                scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-3, total_steps=total_updates)
                last = len(loader) - 1
                for i, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / accum
                    loss.backward()
                    ready = (i + 1) % accum == 0 or i == last
                    if ready:
                        optimizer.step()
                        scheduler.step()
                        optimizer.zero_grad()
            """,
            title="the update's test kept in a variable; the scheduler steps outside the `if` that reads it",
        ),
        good(
            """
            import torch


            def train(model, loader, optimizer, accum, total_updates):
                scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-3, total_steps=total_updates)
                last = len(loader) - 1
                for i, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / accum
                    loss.backward()
                    ready = (i + 1) % accum == 0 or i == last
                    if ready:
                        optimizer.step()
                        scheduler.step()
                        optimizer.zero_grad()
            """,
            title="the same variable, the scheduler stepped under it",
        ),
        good(
            """
            import torch
            from transformers import get_scheduler


            def fit(args, model, loader):
                optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
                per_epoch = len(loader)
                horizon = args.epochs * per_epoch
                schedule = get_scheduler("cosine", optimizer=optimizer, num_warmup_steps=args.warmup,
                                         num_training_steps=horizon)
                for epoch in range(args.epochs):
                    for i, batch in enumerate(loader):
                        loss = model(**batch).loss / args.accum
                        loss.backward()
                        schedule.step()
                        if (i + 1) % args.accum == 0:
                            optimizer.step()
                            optimizer.zero_grad()
            """,
            title="horizon counted in micro-batches (epochs * len(loader)) beside a warmup stated as an option: stepped per micro-batch, it ends on time",
        ),
        bad(
            """
            import torch
            from transformers import get_scheduler


            def fit(args, model, loader):
                optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
                per_epoch = len(loader)
                horizon = args.epochs * per_epoch // args.accum
                schedule = get_scheduler("cosine", optimizer=optimizer, num_warmup_steps=args.warmup,
                                         num_training_steps=horizon)
                for epoch in range(args.epochs):
                    for i, batch in enumerate(loader):
                        loss = model(**batch).loss / args.accum
                        loss.backward()
                        schedule.step()
                        if (i + 1) % args.accum == 0:
                            optimizer.step()
                            optimizer.zero_grad()
            """,
            line=15,
            fixed="""
            import torch
            from transformers import get_scheduler


            def fit(args, model, loader):
                optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
                per_epoch = len(loader)
                horizon = args.epochs * per_epoch // args.accum
                schedule = get_scheduler("cosine", optimizer=optimizer, num_warmup_steps=args.warmup,
                                         num_training_steps=horizon)
                for epoch in range(args.epochs):
                    for i, batch in enumerate(loader):
                        loss = model(**batch).loss / args.accum
                        loss.backward()
                        if (i + 1) % args.accum == 0:
                            optimizer.step()
                            schedule.step()
                            optimizer.zero_grad()
            """,
            title="the same stated warmup, but the horizon is divided by K (counted in updates): it ends K times early",
        ),
    )

    def check(self, ctx):
        model = ctx.model(training_model)
        for loop in model.loops + model.window_functions:
            if not (loop.innermost and loop.accumulates):
                continue
            accelerate = model.accelerate_accumulation(loop)
            for ref in model.own_calls(loop):
                if not model.is_scheduler_step(ref.node, ref.scope) or is_plateau_scheduler(model, ref):
                    continue
                if model.runs_per_update(loop, ref) or micro_batch_horizon(model, loop, ref):
                    continue
                if accelerate is not None and loop.guard.kind == "accelerate" and \
                        model.unlinks_schedulers(accelerate.accelerator, accelerate.scope) and \
                        model.is_prepared(ref.node.func.value, ref.scope) is not False:
                    continue  # prepared, and Accelerate was told to step it on every call: the clock chosen
                clock = own_rate_clock(ctx.index, ref.node.func.value, ref.scope)
                if clock is None and _told_loop_position(ctx.index, loop, ref):
                    clock = POSITION  # `sched.step(cur_epoch=epoch, cur_step=i)`: set, not advanced
                if clock == POSITION:
                    continue  # told where it is (`step(epoch, it)`): a repeated call sets the same rate
                name = ctx.code_for(ref.node.func.value)
                k = describe_k(ctx, loop)
                if accelerate is not None and loop.guard.kind == "accelerate":
                    message = (f"`{name}.step()` runs on every micro-batch: `{name}` was not passed to "
                               "`accelerator.prepare`, so Accelerate does not hold it back between gradient syncs "
                               f"(gradient_accumulation_steps={k.strip('`')}) and the schedule advances {k} times "
                               f"per update; prepare `{name}` together with the optimizer")
                else:
                    message = (f"`{name}.step()` runs on every micro-batch, but the optimizer steps once every "
                               f"{k} micro-batches: the schedule advances {k} times per update (a cosine/linear "
                               "schedule ends that many times early); step it once per update, after the "
                               "optimizer step")
                    if clock == COUNTER:
                        message += f" (`{name}`'s own `step()` advances its counter on each call)"
                fix = _fix(ctx, loop, ref, name)
                if accelerate is not None and loop.guard.kind == "accelerate" and not ref.via \
                        and isinstance(ref.node.func.value, cst.Name):
                    fix = prepare_with(ctx.index, ctx.module, accelerate.accelerator, name, ref.scope)
                evidence = [*accumulation_premises(ctx, loop),
                            role_premise(ctx, ref.node.func.value, ref.scope, "scheduler"),
                            premise(f"`{name}.step()` is not under the update's guard: it runs on every micro-batch",
                                    ref.node, "call")]
                yield self.report_if(k_condition(ctx, loop), ref.node, message, fix, evidence)


def _told_loop_position(index, loop, ref) -> bool:
    """`sched.step(...)` written in the loop is handed a name the loop (or a loop around it) binds
    on each iteration (`step(cur_epoch=epoch, cur_step=i)`, torch's `step(epoch)`): whatever its
    class, the rate it sets is the one for the position it is told, so a repeated call for the
    same position does not run the schedule ahead."""
    if ref.via or not isinstance(loop.node, (cst.For, cst.While)):
        return False
    bound: set[str] = set()
    for ancestor in index.ancestors(ref.node):
        if isinstance(ancestor, cst.For):
            bound |= {n.value for n in walk(ancestor.target) if isinstance(n, cst.Name)}
        if isinstance(ancestor, cst.FunctionDef):
            break
    return any(isinstance(n, cst.Name) and n.value in bound for arg in ref.node.args for n in walk(arg.value))


def _fix(ctx, loop, ref, name):
    """Move `sched.step()` from the loop body into the update, right after the optimizer step.
    Not under Accelerate (the fix there is preparing the scheduler) nor through helpers."""
    if ref.via:
        return None
    line = loop_body_line(ctx.index, loop, ref.node)
    anchor = update_anchor(ctx.index, loop)
    if line is None or anchor is None:
        return None
    return move_line(ctx.module, ctx.index, line, anchor, "after",
                     f"Move `{name}.step()` into the update, after the optimizer step", safe=False, same_block=False)
