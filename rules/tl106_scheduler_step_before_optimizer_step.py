"""TL106 scheduler-step-before-optimizer-step."""

from __future__ import annotations

import libcst as cst

from trainlint.model.dataflow import dataflow
from trainlint.model.amp import OPTIMIZER_STEPS, SCHED_STEP, STEP, amp_model, describe, per_update
from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.fixkit import block_of, move_line, own_line, position_in
from trainlint.model.index import walk
from trainlint.model.roles import OPTIMIZER, ROLE_WORDS, roles
from trainlint.model.summaries import instance_class
from trainlint.rule import FixSpec, Rule, bad, good
from trainlint.model.iterations import runs_on_first_iteration
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import accumulation_premises, loop_premises, role_premise, scheduler_premise, training_premises, unit_premises


class SchedulerStepBeforeOptimizerStep(Rule):
    code = "TL106"
    name = "scheduler-step-before-optimizer-step"
    severity = Severity.WARNING
    summary = "Within one update, the LR scheduler steps before the optimizer"
    message = "the scheduler steps before the optimizer in the same update"
    triggers = (".step(",)
    gate = named("^step$")  # an optimizer step and a scheduler step
    what_it_does = """
        Flags `sched.step()` when, within one update of a training loop (or of a function that runs
        one update), it runs before the optimizer's `opt.step()` / `scaler.step(opt)`: at the top
        of the iteration, or between the backward and the step. The `step()` of a class that holds
        an optimizer and its scheduler and steps both is one update too, wherever the backward is.
        A scheduler is paired with the optimizer its construction names (`LambdaLR(opt_b, ...)`):
        with several optimizers in one update it is flagged only before that optimizer's step, and
        not when that optimizer is not one the update steps.

        In an outer loop (epochs, or the rollouts of an RL trainer) whose iterations run their
        updates in inner loops or helpers, `sched.step()` is flagged when it comes before the first
        optimizer step of the iteration: the first iteration's updates then use the schedule's
        second value. A per-epoch scheduler stepped after the epoch's updates, `ReduceLROnPlateau.step(val_loss)` (or any
        `step(...)` with a metric or epoch argument), a scheduler stepped on every micro-batch while
        the optimizer is guarded (that is TL101), and a scheduler stepped after the step are not
        flagged; nor is one that does not run on the first iteration that steps the optimizer (a
        test on its way, not shared with the optimizer's step, that is false then: `if epoch > 0:`,
        the `else:` of `if epoch < warmup:`, with the counter's first value read from its `range`
        or `enumerate`): each call then follows the previous iteration's updates; when such a test
        cannot be evaluated there (`if self.steps > warmup:`), the finding is unproven; nor is one built where it would be stepped, on the other side of one test
        (`if not hasattr(self, "decay"): self.decay = StepLR(...)` / `else: self.decay.step()`: the
        pass that builds it does not step it, so each step follows an iteration's updates); nor one
        that no construction of the scheduler can reach: each branch that builds it also sets what
        a test on the step's way rules out (`per_batch = True` in every branch but the plateau one,
        the step under `if not per_batch:` and `if kind != "plateau":`); nor is a
        schedule class of the project's own (no base class) whose `step()` writes the learning
        rate of the coming update into the param groups while building it writes
        none: it is meant to step before the update it sets (also when it reaches the loop as a
        parameter: every call of that function in the file passes one, or None; or when a project
        function builds it and returns it, `optimizer, schedule = make_optim(...)`); nor a scheduler
        whose optimizer was replaced: the optimizer stepped is, on every binding that reaches the
        step, a new optimizer constructed after the scheduler was built (from a call that does not
        read the earlier one, which `accelerator.prepare(opt)` does), so the scheduler sets no rate
        the update uses (torch's scheduler contract holds for the optimizer it was built on). A function that
        holds only the step half of an update (no backward: `OptimizerScheduler.step()`, whose
        caller runs the backward) is flagged when both its scheduler and its optimizer are proven,
        also by what the constructions of its class pass (`self.scheduler = scheduler` in
        `__init__`, `OptimizerScheduler(opt, get_linear_schedule_with_warmup(opt, ...))`). When the scheduler's line sits right above the optimizer's, the fix swaps the two
        lines; it changes which learning rate each update uses, so it is offered as unsafe.
        """
    why_bad = """
        Since PyTorch 1.1 a scheduler's `step()` is meant to follow `optimizer.step()`: constructing
        the scheduler sets the initial learning rate, and each `sched.step()` advances it for the next
        update. Stepping the scheduler first moves to the second value before any update has used the
        first one, so the whole schedule is shifted by one update: warmup starts at its second value
        and the final value is never used. PyTorch notices the first occurrence and warns
        ("Detected call of `lr_scheduler.step()` before `optimizer.step()`"), which many runs
        filter out; with a schedule counted in epochs the skipped value is a whole epoch.
        """
    fix_safety = """
        Unsafe: moving the scheduler step shifts the schedule by one step; if the order is
        deliberate (a warm-up written for it), the fix changes the run.
        """
    references = (
        "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
        "https://pytorch.org/docs/stable/generated/torch.optim.lr_scheduler.LRScheduler.html",
    )
    examples = (
        good(
            """
            import torch
            import torch.nn.functional as F


            def fit(model, opt, loader, kind, epochs):
                if kind == "onecycle":
                    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=epochs * len(loader))
                    per_batch = True
                elif kind == "plateau":
                    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
                    per_batch = False
                else:
                    raise ValueError(kind)
                for epoch in range(epochs):
                    if not per_batch:
                        if kind != "plateau":
                            sched.step()
                    for x, y in loader:
                        loss = F.cross_entropy(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                        if per_batch:
                            sched.step()
                    if kind == "plateau":
                        sched.step(loss.item())
            """,
            title="the epoch-start step runs only where no branch that builds the scheduler can have run "
                  "(`per_batch` is False only for the plateau branch, which the inner test excludes)",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            def fit(model, opt, loader, kind, epochs):
                if kind == "onecycle":
                    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=epochs * len(loader))
                    per_batch = True
                elif kind == "plateau":
                    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
                    per_batch = False
                elif kind == "step":
                    sched = torch.optim.lr_scheduler.StepLR(opt, 10)
                    per_batch = False
                else:
                    raise ValueError(kind)
                for epoch in range(epochs):
                    if not per_batch:
                        if kind != "plateau":
                            sched.step()
                    for x, y in loader:
                        loss = F.cross_entropy(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                        if per_batch:
                            sched.step()
                    if kind == "plateau":
                        sched.step(loss.item())
            """,
            line=20,
            title="a third branch builds a `StepLR` with `per_batch = False`: the epoch-start step runs on it",
        ),
        good(
            """
            import torch
            from zero_opt import ZeroOptimizer

            base_opt = ZeroOptimizer(model, lr=1e-4)
            base_sched = torch.optim.lr_scheduler.LambdaLR(base_opt, lambda s: min(1.0, s / 100))
            prompt_opt = torch.optim.AdamW(prompt_embeddings.parameters(), lr=1e-3)
            prompt_sched = torch.optim.lr_scheduler.LambdaLR(prompt_opt, lambda s: min(1.0, s / 100))
            for batch in loader:
                loss = compute_loss(model, prompt_embeddings, batch)
                base_opt.backward(loss)
                base_opt.step()
                base_sched.step()
                prompt_opt.step()
                prompt_sched.step()
                base_opt.zero_grad()
                prompt_opt.zero_grad()
            """,
            title="a scheduler steps after the optimizer it was built on, before another optimizer's step",
        ),
        bad(
            """
            import torch
            from zero_opt import ZeroOptimizer

            base_opt = ZeroOptimizer(model, lr=1e-4)
            base_sched = torch.optim.lr_scheduler.LambdaLR(base_opt, lambda s: min(1.0, s / 100))
            prompt_opt = torch.optim.AdamW(prompt_embeddings.parameters(), lr=1e-3)
            prompt_sched = torch.optim.lr_scheduler.LambdaLR(prompt_opt, lambda s: min(1.0, s / 100))
            for batch in loader:
                loss = compute_loss(model, prompt_embeddings, batch)
                base_opt.backward(loss)
                base_opt.step()
                base_sched.step()
                prompt_sched.step()
                prompt_opt.step()
                base_opt.zero_grad()
                prompt_opt.zero_grad()
            """,
            line=13,
            fixed="""
            import torch
            from zero_opt import ZeroOptimizer

            base_opt = ZeroOptimizer(model, lr=1e-4)
            base_sched = torch.optim.lr_scheduler.LambdaLR(base_opt, lambda s: min(1.0, s / 100))
            prompt_opt = torch.optim.AdamW(prompt_embeddings.parameters(), lr=1e-3)
            prompt_sched = torch.optim.lr_scheduler.LambdaLR(prompt_opt, lambda s: min(1.0, s / 100))
            for batch in loader:
                loss = compute_loss(model, prompt_embeddings, batch)
                base_opt.backward(loss)
                base_opt.step()
                base_sched.step()
                prompt_opt.step()
                prompt_sched.step()
                base_opt.zero_grad()
                prompt_opt.zero_grad()
            """,
            title="the second scheduler steps before the optimizer it was built on",
        ),
        good(
            """
            import math
            import torch


            class WarmupCosine:
                def __init__(self, optimizer, warmup, total, peak):
                    self.optimizer, self.warmup, self.total, self.peak = optimizer, warmup, total, peak
                    self.count = 0

                def step(self):
                    self.count += 1
                    if self.count <= self.warmup:
                        rate = self.peak * self.count / self.warmup
                    else:
                        progress = (self.count - self.warmup) / (self.total - self.warmup)
                        rate = 0.5 * self.peak * (1 + math.cos(math.pi * progress))
                    for group in self.optimizer.param_groups:
                        group["lr"] = rate


            opt = torch.optim.AdamW(model.parameters(), lr=0.0)
            schedule = WarmupCosine(opt, warmup=500, total=20_000, peak=3e-4)
            for x, y in loader:
                schedule.step()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """,
            title="a schedule of its own writes the rate the coming update uses: it must step first",
        ),
        bad(
            """
            import torch


            class StepDecay:
                def __init__(self, optimizer, every, gamma, base):
                    self.optimizer, self.every, self.gamma, self.base = optimizer, every, gamma, base
                    self.count = 0
                    for group in optimizer.param_groups:
                        group["lr"] = base

                def step(self):
                    self.count += 1
                    for group in self.optimizer.param_groups:
                        group["lr"] = self.base * self.gamma ** (self.count // self.every)


            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            decay = StepDecay(opt, every=1000, gamma=0.5, base=0.1)
            for x, y in loader:
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                decay.step()
                opt.step()
            """,
            fixed="""
            import torch


            class StepDecay:
                def __init__(self, optimizer, every, gamma, base):
                    self.optimizer, self.every, self.gamma, self.base = optimizer, every, gamma, base
                    self.count = 0
                    for group in optimizer.param_groups:
                        group["lr"] = base

                def step(self):
                    self.count += 1
                    for group in self.optimizer.param_groups:
                        group["lr"] = self.base * self.gamma ** (self.count // self.every)


            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            decay = StepDecay(opt, every=1000, gamma=0.5, base=0.1)
            for x, y in loader:
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                decay.step()
            """,
            line=22,
            title="a project schedule that, like torch's, sets the first rate when it is built",
        ),
        good(
            """
            import torch


            class Cycle:
                def __init__(self, optimizer, peak, total):
                    self.optimizer, self.peak, self.total = optimizer, peak, total
                    self.count = 0

                def step(self):
                    self.count += 1
                    for group in self.optimizer.param_groups:
                        group["lr"] = self.peak * min(1.0, 2 - 2 * self.count / self.total)


            def train_epoch(loader, model, opt, scheduler):
                for x, y in loader:
                    if scheduler is not None:
                        scheduler.step()
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()


            opt = torch.optim.Adam(model.parameters())
            scheduler = None
            if use_schedule:
                scheduler = Cycle(opt, 3e-4, total=10_000)
            for epoch in range(10):
                train_epoch(loader, model, opt, scheduler)
            """,
            title="a scheduler of its own handed to the training function (or None): it writes the coming rate",
        ),
        bad(
            """
            import torch


            def train_epoch(loader, model, opt, scheduler: torch.optim.lr_scheduler.LRScheduler | None):
                for x, y in loader:
                    if scheduler is not None:
                        scheduler.step()
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()


            opt = torch.optim.Adam(model.parameters(), lr=3e-4)
            scheduler = None
            if use_schedule:
                scheduler = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-4, total_steps=10_000)
            for epoch in range(10):
                train_epoch(loader, model, opt, scheduler)
            """,
            line=7,
            title="torch's OneCycleLR handed to the same training function still steps too early",
        ),
        bad(
            """
            import torch

            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, total_steps=10_000)
            for x, y in loader:
                opt.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                sched.step()
                opt.step()
            """,
            line=8,
            fixed="""
            import torch

            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, total_steps=10_000)
            for x, y in loader:
                opt.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                opt.step()
                sched.step()
            """,
            title="the two lines the wrong way round",
        ),
        bad(
            """
            from transformers import get_linear_schedule_with_warmup

            lr_scheduler = get_linear_schedule_with_warmup(optimizer, 500, total_steps)
            for step, batch in enumerate(train_dataloader):
                lr_scheduler.step()
                outputs = model(**batch)
                outputs.loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """,
            line=5,
            title="scheduler at the top of the iteration",
        ),
        bad(
            """
            import torch

            def train(model, loader, optim, sched: torch.optim.lr_scheduler.LRScheduler, grad_accum):
                scaler = torch.amp.GradScaler("cuda")
                for it, (x, y) in enumerate(loader):
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = model(x, y) / grad_accum
                    scaler.scale(loss).backward()
                    if (it + 1) % grad_accum == 0:
                        sched.step()
                        scaler.step(optim)
                        scaler.update()
                        optim.zero_grad(set_to_none=True)
            """,
            line=10,
            fixed="""
            import torch

            def train(model, loader, optim, sched: torch.optim.lr_scheduler.LRScheduler, grad_accum):
                scaler = torch.amp.GradScaler("cuda")
                for it, (x, y) in enumerate(loader):
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = model(x, y) / grad_accum
                    scaler.scale(loss).backward()
                    if (it + 1) % grad_accum == 0:
                        scaler.step(optim)
                        scaler.update()
                        sched.step()
                        optim.zero_grad(set_to_none=True)
            """,
            title="inside the accumulation guard, before scaler.step",
        ),
        bad(
            """
            import torch

            class Trainer:
                def __init__(self, model, optimizer, total_steps):
                    self.model = model
                    self.optimizer = optimizer
                    self.lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, total_steps)

                def optimizer_step(self):
                    self.optimizer.step()
                    self.optimizer.zero_grad(set_to_none=True)

                def train(self, loader):
                    for batch in loader:
                        loss = self.model(**batch).loss
                        loss.backward()
                        self.lr_scheduler.step()
                        self.optimizer_step()
            """,
            line=17,
            title="the optimizer step in a Trainer helper",
        ),
        bad(
            """
            import torch
            from transformers import get_linear_schedule_with_warmup


            class OptimizerScheduler:
                def __init__(self, optimizer, scheduler):
                    self.optimizer = optimizer
                    self.scheduler = scheduler

                def step(self):
                    self.scheduler.step()
                    self.optimizer.step()


            def create_optimizer(model, t_total):
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
                scheduler = get_linear_schedule_with_warmup(optimizer, 0, t_total)
                return OptimizerScheduler(optimizer, scheduler)
            """,
            line=11,
            fixed="""
            import torch
            from transformers import get_linear_schedule_with_warmup


            class OptimizerScheduler:
                def __init__(self, optimizer, scheduler):
                    self.optimizer = optimizer
                    self.scheduler = scheduler

                def step(self):
                    self.optimizer.step()
                    self.scheduler.step()


            def create_optimizer(model, t_total):
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
                scheduler = get_linear_schedule_with_warmup(optimizer, 0, t_total)
                return OptimizerScheduler(optimizer, scheduler)
            """,
            title="a wrapper whose step() is one update, the scheduler first",
        ),
        good(
            """
            import torch
            from transformers import get_linear_schedule_with_warmup


            class OptimizerScheduler:
                def __init__(self, optimizer, scheduler):
                    self.optimizer = optimizer
                    self.scheduler = scheduler

                def step(self):
                    self.optimizer.step()
                    self.scheduler.step()


            class NoamOpt:
                def __init__(self, optimizer, warmup, d_model):
                    self.optimizer = optimizer
                    self.warmup, self.d_model, self._step = warmup, d_model, 0

                def step(self):
                    self._step += 1
                    rate = self.d_model ** -0.5 * min(self._step ** -0.5, self._step * self.warmup ** -1.5)
                    for group in self.optimizer.param_groups:
                        group["lr"] = rate
                    self.optimizer.step()


            def create_optimizer(model, t_total):
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
                scheduler = get_linear_schedule_with_warmup(optimizer, 0, t_total)
                return OptimizerScheduler(optimizer, scheduler)
            """,
            title="the wrapper steps the optimizer first; a wrapper that sets the rate itself steps no scheduler",
        ),
        bad(
            """
            import torch

            def train_step(model, batch, opt, sched: torch.optim.lr_scheduler.LRScheduler):
                sched.step()
                loss = model(**batch).loss
                loss.backward()
                opt.step()
                opt.zero_grad()
                return loss.item()
            """,
            line=4,
            title="an update function",
        ),
        good(
            """
            import torch

            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, total_steps=10_000)
            for x, y in loader:
                opt.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                opt.step()
                sched.step()
            """,
            title="scheduler after the optimizer",
        ),
        bad(
            """
            import torch

            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.1)
            for epoch in range(90):
                scheduler.step()
                for x, y in train_loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
            line=5,
            title="a per-epoch scheduler stepped at the top of the epoch, before its updates",
        ),
        bad(
            """
            import torch


            def learn(policy, buffer, opt, sched: torch.optim.lr_scheduler.LRScheduler, iterations, passes):
                for it in range(iterations):
                    sched.step()
                    episodes = buffer.fill(policy)
                    for _ in range(passes):
                        for chunk in episodes.split(256):
                            opt.zero_grad()
                            policy.surrogate_loss(chunk).backward()
                            opt.step()
            """,
            line=6,
            title="an RL update loop stepping its scheduler before the optimisation passes that follow",
        ),
        good(
            """
            import torch

            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.1)
            for epoch in range(90):
                for x, y in train_loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                scheduler.step()
            """,
            title="per-epoch scheduler stepped at the end of the epoch",
        ),
        good(
            """
            import math


            class EpochWarmup:
                def __init__(self, optimizer, warmup, peak):
                    self.optimizer, self.warmup, self.peak, self.epoch = optimizer, warmup, peak, 0

                def step(self):
                    self.epoch += 1
                    scale = min(1.0, self.epoch / self.warmup)
                    for group in self.optimizer.param_groups:
                        group["lr"] = self.peak * scale


            warm = EpochWarmup(optimizer, warmup=5, peak=3e-4)
            for epoch in range(epochs):
                warm.step()
                for x, y in train_loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
            """,
            title="a schedule of its own that sets the coming epoch's rate, meant to step first",
        ),
        good(
            """
            import torch

            plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", patience=3)
            for step, (x, y) in enumerate(loader):
                if step % eval_every == 0:
                    plateau.step(evaluate(model, val_loader))
                loss = criterion(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
            """,
            title="ReduceLROnPlateau stepped with a validation metric",
        ),
        good(
            """
            import torch

            for real, _ in loader:
                d_loss = d_criterion(netD, netG, real)
                d_loss.backward()
                optD.step()
                schedD.step()
                optD.zero_grad()
                g_loss = g_criterion(netD, netG, real)
                g_loss.backward()
                optG.step()
                schedG.step()
                optG.zero_grad()
            """,
            title="GAN: each scheduler follows its own optimizer",
        ),
        good(
            """
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=4)
            model, optimizer, loader, lr_scheduler = accelerator.prepare(model, optimizer, loader, lr_scheduler)
            for batch in loader:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()
            """,
            title="Accelerate accumulation with a prepared scheduler after the step",
        ),
        good(
            """
            import torch

            sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.999)
            for step, (x, y) in enumerate(loader):
                if step > 0:
                    sched.step()
                loss = criterion(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
            """,
            title="`if step > 0:` at the top: each call follows the previous iteration's step",
        ),
        good(
            """
            import torch


            def fit(model, batches, epochs, peak):
                opt = torch.optim.SGD(model.parameters(), lr=peak)
                cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
                for epoch in range(epochs):
                    if epoch < 2:
                        for group in opt.param_groups:
                            group["lr"] = peak * (epoch + 1) / 2
                    else:
                        cosine.step()
                    for x, y in batches:
                        opt.zero_grad()
                        torch.nn.functional.mse_loss(model(x), y).backward()
                        opt.step()
            """,
            title="an epoch-start step only from the third epoch on (the first two set the rate by hand)",
        ),
        good(
            """
            import torch


            class Runner:
                def adjust(self, optimizer, cfg):
                    if not hasattr(self, "decay"):
                        self.decay = torch.optim.lr_scheduler.StepLR(optimizer, step_size=cfg.step, gamma=0.5)
                    else:
                        self.decay.step()

                def fit(self, model, optimizer, loader, cfg):
                    for epoch in range(cfg.epochs):
                        self.adjust(optimizer, cfg)
                        for x, y in loader:
                            loss = torch.nn.functional.cross_entropy(model(x), y)
                            optimizer.zero_grad()
                            loss.backward()
                            optimizer.step()
            """,
            title="the scheduler is built on the first pass instead of stepped: each later step follows an "
                  "epoch's updates",
        ),
        bad(
            """
            import torch


            def fit(model, batches, epochs, peak):
                opt = torch.optim.SGD(model.parameters(), lr=peak)
                cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
                for epoch in range(2, epochs):
                    if epoch < 2:
                        for group in opt.param_groups:
                            group["lr"] = peak * (epoch + 1) / 2
                    else:
                        cosine.step()
                    for x, y in batches:
                        opt.zero_grad()
                        torch.nn.functional.mse_loss(model(x), y).backward()
                        opt.step()
            """,
            line=12,
            title="the same test, but the epochs count from 2: the first iteration already takes the step",
        ),
        bad(
            """
            import torch


            class Runner:
                def adjust(self, optimizer, cfg):
                    if not hasattr(self, "decay"):
                        self.decay = torch.optim.lr_scheduler.StepLR(optimizer, step_size=cfg.step, gamma=0.5)
                    self.decay.step()

                def fit(self, model, optimizer, loader, cfg):
                    for epoch in range(cfg.epochs):
                        self.adjust(optimizer, cfg)
                        for x, y in loader:
                            loss = torch.nn.functional.cross_entropy(model(x), y)
                            optimizer.zero_grad()
                            loss.backward()
                            optimizer.step()
            """,
            line=8,
            title="built on the first pass and stepped on the same pass: the first epoch skips its first value",
        ),
        good(
            """
            import math

            import torch


            class CosineWarmup:
                def __init__(self, optimizer, warmup, total, peak):
                    self.optimizer, self.warmup, self.total, self.peak = optimizer, warmup, total, peak
                    self.count = 0

                def step(self):
                    self.count += 1
                    if self.count < self.warmup:
                        rate = self.peak * self.count / self.warmup
                    else:
                        rate = 0.5 * self.peak * (1 + math.cos(math.pi * self.count / self.total))
                    for group in self.optimizer.param_groups:
                        group["lr"] = rate


            def make_optim(model, total, peak):
                optimizer = torch.optim.AdamW(model.parameters(), lr=0.0)
                schedule = CosineWarmup(optimizer, warmup=total // 20, total=total, peak=peak)
                return optimizer, schedule


            def train(model, loader, total):
                optimizer, schedule = make_optim(model, total, peak=1e-3)
                for x, y in loader:
                    schedule.step()
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            title="a factory of the project returns its own schedule, which writes the coming update's rate",
        ),
        bad(
            """
            import torch


            def make_optim(model, total, peak):
                optimizer = torch.optim.AdamW(model.parameters(), lr=peak)
                schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=peak, total_steps=total)
                return optimizer, schedule


            def train(model, loader, total):
                optimizer, schedule = make_optim(model, total, peak=1e-3)
                for x, y in loader:
                    schedule.step()
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            line=13,
            title="the same factory returns torch's scheduler, which set the first rate when it was built",
        ),
        good(
            """
            import torch


            def make_optim(model, total):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total)
                return optimizer, schedule


            def train(model, loader, total, groups):
                optimizer, schedule = make_optim(model, total)
                optimizer = torch.optim.AdamW(groups, lr=3e-4)
                for x, y in loader:
                    schedule.step()
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            title="the optimizer stepped is a new one, made after the scheduler was built on another",
        ),
        bad(
            """
            import torch


            def make_optim(model, total):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total)
                return optimizer, schedule


            def train(model, loader, total, groups):
                optimizer, schedule = make_optim(model, total)
                optimizer = torch.optim.AdamW(groups, lr=3e-4)
                schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total)
                for x, y in loader:
                    schedule.step()
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            line=15,
            title="the scheduler is rebuilt on the new optimizer too",
        ),
    )

    def check(self, ctx):
        model = ctx.model(amp_model)
        yield from self._in_step_functions(ctx, model)
        for unit in model.units:
            if unit.loop is not None and not unit.loop.innermost:
                # an outer loop's scheduler runs on a slower clock (per epoch, per rollout): only its
                # place against the first optimizer step of the iteration matters
                yield from self._before_inner_updates(ctx, model, unit)
                continue
            steps = [e for e in unit.of_kind(*OPTIMIZER_STEPS) if not e.engine]
            if not steps:
                continue
            first_step = steps[0]
            position = unit.events.index(first_step)
            if not per_update(model, unit, first_step):
                continue
            for sched in unit.events[:position]:
                if sched.kind != SCHED_STEP or sched.has_args:
                    continue
                if not per_update(model, unit, sched):
                    continue  # stepped per micro-batch: TL101
                first = _first_iteration(ctx, unit, sched, first_step.anchor)
                if first is None:
                    continue  # `if step > 0: sched.step()` follows the previous iteration's step
                if _sets_next_rate(ctx, sched.node):
                    continue  # a schedule of its own that writes the coming update's rate
                if _never_built_there(ctx, sched.node):
                    continue  # no construction of the scheduler can reach this call
                step = first_step
                built_on = model.scheduler_arguments(sched.node.func.value, sched.scope)
                if built_on:  # paired with the optimizer it was built on, not the one stepped first
                    own = [e for e in unit.of_kind(*OPTIMIZER_STEPS)
                           if e.subject in built_on or (model.stepped_object(e) is not None and
                                                        model.aliases(model.stepped_object(e), e.scope) & built_on)]
                    if own:
                        if unit.events.index(own[0]) < unit.events.index(sched):
                            continue  # its own optimizer steps before it
                        step = own[0]
                    elif not any(e.via for e in unit.of_kind(*OPTIMIZER_STEPS)):
                        continue  # every optimizer this update steps is named here, none is its own
                if _built_after(ctx, model, sched, step):
                    continue  # the optimizer stepped is a new one, made after the scheduler was built
                yield self.report(
                    sched.node,
                    f"`{describe(sched.node, ctx)}` runs before `{describe(step.node, ctx)}` in the "
                    f"same update: the schedule skips its first value and every update uses the next "
                    f"one; step the scheduler after the optimizer",
                    _swap_fix(ctx, sched, step),
                    evidence=[*unit_premises(ctx, unit), *scheduler_premise(ctx, sched.node, sched.scope),
                              premise(f"`{describe(sched.node, ctx)}` runs before the optimizer step in the same "
                                      "update", sched.node, "call"), first],
                )


    def _in_step_functions(self, ctx, model):
        """The step half of an update in a function of its own (`OptimizerScheduler.step()`, the
        caller runs the backward): a scheduler stepped before the optimizer there, when both are
        proven (built, typed or handed in as such; a name is not enough)."""
        found = ctx.model(roles)
        for unit in model.step_functions:
            steps = [e for e in unit.of_kind(STEP) if not e.engine]
            first_step = steps[0]
            receiver = first_step.node.func.value
            source = found.source(receiver, first_step.scope)
            if source is None or not source.proven:
                continue
            for sched in unit.events[:unit.events.index(first_step)]:
                if sched.kind != SCHED_STEP or sched.has_args or _sets_next_rate(ctx, sched.node):
                    continue
                sched_source = found.source(sched.node.func.value, sched.scope)
                if sched_source is None or not sched_source.proven or _skips_first_call(ctx, unit, sched):
                    continue
                yield self.report(
                    sched.node,
                    f"`{describe(sched.node, ctx)}` runs before `{describe(first_step.node, ctx)}` in the step "
                    f"of one update: the schedule skips its first value and every update uses the next one; "
                    f"step the scheduler after the optimizer",
                    _swap_fix(ctx, sched, first_step),
                    evidence=[*scheduler_premise(ctx, sched.node, sched.scope),
                              role_premise(ctx, receiver, first_step.scope, "optimizer"),
                              premise(f"`{describe(sched.node, ctx)}` runs before the optimizer step, with no "
                                      "backward or loop between them", sched.node, "call")],
                )
                break

    def _before_inner_updates(self, ctx, model, unit):
        """`sched.step()` in the body of an outer loop (epochs, RL rollouts), before the first
        optimizer step that the inner loops (or the helpers it calls) run in the same iteration:
        the first iteration's updates all use the schedule's second value."""
        loop = unit.loop
        first_at: dict[int, int] = {}
        for position, ref in enumerate(loop.calls):
            first_at.setdefault(id(ref.node), position)
        engines = {id(e.node) for u in model.units for e in u.events if e.engine}
        steps = [first_at[id(r.node)] for r in loop.step_calls
                 if id(r.node) in first_at and id(r.node) not in engines]
        if not steps:
            return
        first_step = min(steps)
        step_node = loop.calls[first_step].node
        for sched in unit.of_kind(SCHED_STEP):
            if sched.has_args or sched.loops:
                continue  # a metric or epoch argument; or stepped inside a nested (non-training) loop
            position = first_at.get(id(sched.node))
            if position is None or position > first_step:
                continue
            first = _first_iteration(ctx, unit, sched, step_node)
            if first is None or _sets_next_rate(ctx, sched.node) or _never_built_there(ctx, sched.node):
                continue
            yield self.report(
                sched.node,
                f"`{describe(sched.node, ctx)}` runs at the start of each iteration of the outer loop, before "
                f"the `{describe(step_node, ctx)}` of its updates: the first iteration's updates skip the "
                f"schedule's first value and each later one uses the next; step the scheduler after them",
                evidence=[*loop_premises(ctx, loop), *scheduler_premise(ctx, sched.node, sched.scope),
                          premise("it runs before the first optimizer step of the iteration", sched.node, "call"),
                          first])


def _sets_next_rate(ctx, call: cst.CSTNode) -> bool:
    """`call` is `sched.step()` on a project class whose `step()` sets the rate for the coming update."""
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)):
        return False
    built = instance_class(ctx.index, call.func.value, ctx.index.scope_at(call), ROLE_WORDS)
    return built is not None and built.sets_next_rate


def _built_after(ctx, model, sched, step) -> bool:
    """The optimizer `step` steps is, on every binding that reaches it, a new optimizer constructed
    (by a call that does not read the name's earlier value: `opt = torch.optim.AdamW(groups)`, not
    `opt = accelerator.prepare(opt)`) after every binding of the scheduler that reaches its
    `step()`: the scheduler was built on another optimizer (`opt, sched = init_opt(...)` then
    `opt = AdamW(...)`), so its step sets no rate this update uses, early or late."""
    stepped = model.stepped_object(step)
    receiver = sched.node.func.value if isinstance(sched.node.func, cst.Attribute) else None
    if not isinstance(stepped, cst.Name) or not isinstance(receiver, cst.Name):
        return False
    index = ctx.index
    optimizers = index.reaching_bindings(step.anchor, stepped.value, step.scope)
    schedulers = [b for b in index.reaching_bindings(sched.anchor, receiver.value, sched.scope)
                  if not (isinstance(b.value, cst.Name) and b.value.value == "None")]
    if not optimizers or not schedulers:
        return False
    found = ctx.model(roles)
    last_scheduler = max(index.place.get(b.node, -1) for b in schedulers)
    if any(index.place.get(b.node) is None for b in schedulers):
        return False
    for binding in optimizers:
        value = binding.value
        if binding.kind != "assign" or not isinstance(value, cst.Call) \
                or index.place.get(binding.node, -1) <= last_scheduler:
            return False
        if any(isinstance(n, cst.Name) and n.value == stepped.value for n in walk(value)):
            return False  # a wrapper of the earlier optimizer (`accelerator.prepare(opt)`)
        scope = index.scope_at(binding.node)
        source = found.source(value, scope)
        if found.of(value, scope) != OPTIMIZER or source is None or not source.proven:
            return False  # a construction shown to make an optimizer
    # the scheduler's own construction must not be given the new optimizer later (`sched.optimizer = opt`)
    return not any(isinstance(n, cst.Assign) and any(
        isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name)
        and t.target.value.value == receiver.value for t in n.targets) for n in walk(index.module))


def _never_built_there(ctx, call: cst.CSTNode) -> bool:
    """`sched.step()` under tests that rule out every branch that builds `sched` (built with
    `each_iter = True` in every branch but the plateau one, stepped under `if not each_iter:` and
    `if name != "plateau":`): the call never runs on a scheduler (`dataflow.bindings_on_path`)."""
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)):
        return False
    return ctx.model(dataflow).bindings_on_path(call.func.value) == []


def _built_instead(ctx, sched) -> bool:
    """Every construction of the stepped scheduler sits on the other side of one test from its
    `step()` (`if not hasattr(self, "sched"): self.sched = StepLR(...)` / `else: self.sched.step()`):
    the pass that builds it does not step it, so the first step comes one iteration later, after
    that iteration's updates."""
    receiver = sched.node.func.value if isinstance(sched.node.func, cst.Attribute) else None
    index = ctx.index
    if isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) and receiver.value.value == "self":
        built = index.self_attribute_values(receiver.attr.value, sched.scope)
    elif isinstance(receiver, cst.Name):
        built = [b.value for b in sched.scope.lookup(receiver.value) if b.kind == "assign" and b.value is not None]
    else:
        return False
    flow = ctx.model(dataflow)
    return bool(built) and all(isinstance(value, cst.Call) and flow.exclusive(value, sched.node) for value in built)


def _first_iteration(ctx, unit, sched, step_node):
    """Whether the scheduler's call runs on the first iteration of the unit's loop, as a premise:
    proven when every test on its way takes its branch then (`iterations.runs_on_first_iteration`),
    None when one provably does not (`if epoch > 0:`, the `else:` of `if epoch == 0:`: each call
    then follows the previous iteration's updates, and the first updates use the schedule's first
    value), unknown otherwise (`if self.steps > warmup:`). A unit that is one call of an update
    function has no first iteration: a plain `if step > 0:` there still keeps the first step.
    None too when the scheduler is built where it would be stepped (`_built_instead`)."""
    if _built_instead(ctx, sched):
        return None
    text = "it runs on the first iteration that steps the optimizer, before any update has used the schedule's first value"
    if unit.loop is None or not isinstance(unit.node, (cst.For, cst.While)):
        return None if _skips_first_call(ctx, unit, sched) else premise(text, sched.anchor, "use")
    runs = runs_on_first_iteration(ctx.index, sched.anchor, unit.node, step_node)
    if runs is False:
        return None
    if runs is None:
        return unknown(text + " (a test on its way cannot be evaluated there)", sched.anchor, "use")
    return premise(text, sched.anchor, "use")


def _skips_first_call(ctx, unit, sched) -> bool:
    """The scheduler's call sits under `if step > 0:` (`!= 0`, `>= 1`, `0 < step`) in a function
    that runs one update per call; or it is built where it would be stepped (`_built_instead`)."""
    if _built_instead(ctx, sched):
        return True
    for ancestor in ctx.index.ancestors(sched.anchor):
        if ancestor is unit.node:
            break
        if isinstance(ancestor, cst.If) and isinstance(ancestor.test, cst.Comparison) \
                and len(ancestor.test.comparisons) == 1:
            left, target = ancestor.test.left, ancestor.test.comparisons[0]
            operator, right = target.operator, target.comparator
            if isinstance(right, cst.Integer) and (
                    (right.value == "0" and isinstance(operator, (cst.GreaterThan, cst.NotEqual))) or
                    (right.value == "1" and isinstance(operator, cst.GreaterThanEqual))):
                return True
            if isinstance(left, cst.Integer) and left.value == "0" and isinstance(operator, cst.LessThan):
                return True
    return False


def _swap_fix(ctx, sched, step) -> FixSpec | None:
    """Move the scheduler's line (with its comment) to just after the optimizer's step (after
    `scaler.update()` when that follows), when both are lines of their own in one block with
    only calls between them."""
    if sched.via or step.via:
        return None
    index = ctx.index
    line, anchor = own_line(index, sched.node), own_line(index, step.node)
    if line is None or anchor is None:
        return None
    block = block_of(index, anchor)
    position = position_in(block, anchor) if block is not None else None
    if position is not None and position + 1 < len(block.body):
        following = block.body[position + 1]
        value = following.body[0].value if isinstance(following, cst.SimpleStatementLine) \
            and len(following.body) == 1 and isinstance(following.body[0], cst.Expr) else None
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value == "update" and not value.args:
            anchor = following  # scaler.step(opt); scaler.update(); then the scheduler
    return move_line(ctx.module, index, line, anchor, "after",
                     f"Move `{describe(sched.node, ctx)}` after `{describe(step.node, ctx)}`", safe=False)
