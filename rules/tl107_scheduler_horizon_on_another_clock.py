"""TL107 scheduler-horizon-on-another-clock."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.model.accumulation import (_counts_micro_batches, _factors, _k_names, _loop_loaders,
                                          _times_k, describe_k, is_plateau_scheduler)
from trainlint.model import frameworks
from trainlint.model.dataflow import dataflow
from trainlint.model.index import FunctionInfo, Scope, dotted_name, positional_args, walk
from trainlint.model.roles import SCHEDULER, _unpacked_prepare_argument, role_of_callee, roles as roles_model
from trainlint.model.shipped import k_condition, string_defaults
from trainlint.model.training import CallRef, TrainingLoop, TrainingModel, training_model
from trainlint.rule import Rule, bad, good
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import accumulation_premises, loop_premises, role_premise, scheduler_premise, training_premises, unit_premises

# the clocks a scheduler's `.step()` can run on
EPOCH, BATCH, MICRO, UPDATE = "epoch", "batch", "micro-batch", "update"
# the keyword that sets a scheduler's length, by library (warmup lengths are not the horizon)
_HORIZON_KEYWORDS = ("T_max", "total_steps", "num_training_steps", "total_iters", "t_initial", "max_steps",
                     "num_steps", "total_epochs")
# the position of the length when it is passed positionally, by the constructor's last name
_HORIZON_POSITIONS = {
    "CosineAnnealingLR": 1, "PolynomialLR": 1, "OneCycleLR": 2, "LinearLR": 3,
    "get_linear_schedule_with_warmup": 2, "get_cosine_schedule_with_warmup": 2,
    "get_cosine_with_hard_restarts_schedule_with_warmup": 2, "get_polynomial_decay_schedule_with_warmup": 2,
    "get_wsd_schedule": 2, "get_scheduler": 3,
}
# `get_scheduler(name, ...)` (transformers, diffusers) builds the schedule its name says; these
# ignore `num_training_steps` (a constant rate, a rate of the step's square root, a plateau's, or
# diffusers' piecewise rules): with them the length sets nothing
_NAMES_WITHOUT_HORIZON = frozenset({"constant", "constant_with_warmup", "inverse_sqrt", "reduce_lr_on_plateau",
                                    "piecewise_constant"})
_NAMED_SCHEDULE_FACTORIES = frozenset({"get_scheduler"})
_WORLD_SIZE = frozenset({"torch.distributed.get_world_size", "torch.distributed.distributed_c10d.get_world_size"})


@dataclass
class _Horizon:
    arg: cst.Arg
    construction: cst.Call
    scope: Scope


class SchedulerHorizonOnAnotherClock(Rule):
    code = "TL107"
    name = "scheduler-horizon-on-another-clock"
    severity = Severity.ERROR
    summary = "An LR scheduler's horizon is counted on another clock than the one its step() runs on"
    message = "the scheduler's horizon is counted on a different clock than its step() calls"
    triggers = (("step(", "sched"), ("step(", "LR"), ("step(", "schedule"), "configure_optimizers")
    gate = named("^step$") | named("^configure_optimizers$")
    what_it_does = """
        Reads the length a scheduler is built with (`T_max`, `total_steps`, `num_training_steps`,
        `total_iters`, `t_initial`, or the positional length of `CosineAnnealingLR`, `OneCycleLR`,
        `get_linear_schedule_with_warmup`, `get_scheduler`, ...), follows the scheduler to the
        `.step()` calls of the training loops (through assignments, `accelerator.prepare`, `self.`
        attributes and the parameters of same-file helpers), and compares the two clocks.
        `get_scheduler(name, ...)` uses the length only for a schedule that decays over it: quiet
        when every name it is given as shipped (a literal, an option's default) is one that ignores
        it (`constant`, `constant_with_warmup`, `inverse_sqrt`, `reduce_lr_on_plateau`,
        `piecewise_constant`), unproven when the code does not show the name. The clocks compared:

        - a length equal to the bound of the epoch loop (`for epoch in range(epochs)` and
          `T_max=epochs`) for a scheduler stepped in the batch loop;
        - a length counted in micro-batches (`epochs * len(train_loader)` with K nowhere in it, or
          multiplied by the accumulation factor K) for a scheduler stepped once per update: in the
          update branch of an accumulating loop, or inside `accelerator.accumulate(...)` when the
          scheduler was passed to `accelerator.prepare` (which holds it back between syncs);
        - a length counted in samples (`len(train_dataset)`, `len(loader.dataset)`) for a scheduler
          stepped per batch or update;
        - a length multiplied by the process count (`accelerator.num_processes`,
          `dist.get_world_size()`) for a scheduler stepped once per update that Accelerate does not
          own (a prepared scheduler steps once per process on each update, so there it is right);
        - a length counted in batches (`len(train_loader)` in it) for a scheduler stepped once per
          epoch, after the batch loop;
        - in a Lightning `configure_optimizers`, `"interval": "step"` with a length of
          `self.trainer.max_epochs`, or the default epoch interval with
          `self.trainer.estimated_stepping_batches` (not when the module overrides a hook Lightning
          runs once per optimizer step, `optimizer_step`, and steps the scheduler there: it then
          advances once per update).

        `step(epoch)`/`step(metric)` calls, `ReduceLROnPlateau` and schedulers whose length cannot be
        told are left alone. A length on the micro-batch clock for a scheduler stepped on every
        micro-batch is right (that is TL101's good case). When K is 1 as the code ships, a finding
        that depends on K is reported as conditional on K > 1, one severity lower.
        """
    why_bad = """
        A schedule's length is a count of `.step()` calls. Counted on another clock, the schedule
        is stretched or squeezed by the ratio of the two: `CosineAnnealingLR(T_max=epochs)` stepped
        every batch reaches its minimum after `epochs` batches and then climbs back, so the LR
        oscillates through the whole run instead of decaying once; a horizon in micro-batches (or
        multiplied by K) for a scheduler that steps once per update ends after K times as many
        updates as the run has, so the LR never decays past the first part of its curve and warmup
        is K times too long; a horizon in samples is off by the batch size; a per-epoch step on a
        horizon counted in batches never leaves warmup. `OneCycleLR` raises once stepped past its
        `total_steps`; the others go on silently, and the model just trains worse.
        """
    references = (
        "https://pytorch.org/docs/stable/generated/torch.optim.lr_scheduler.CosineAnnealingLR.html",
        "https://huggingface.co/docs/accelerate/usage_guides/gradient_accumulation",
        "https://lightning.ai/docs/pytorch/stable/api/lightning.pytorch.core.LightningModule.html#lightning.pytorch.core.LightningModule.configure_optimizers",
    )
    examples = (
        good(
            """
            import torch
            import lightning as L
            from transformers import get_cosine_schedule_with_warmup


            class Classifier(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    return torch.nn.functional.cross_entropy(self.net(x), y)

                def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_closure):
                    optimizer.step(closure=optimizer_closure)
                    self.lr_schedulers().step()

                def configure_optimizers(self):
                    optimizer = torch.optim.AdamW(self.parameters(), lr=3e-4)
                    scheduler = get_cosine_schedule_with_warmup(
                        optimizer, num_warmup_steps=100, num_training_steps=self.trainer.estimated_stepping_batches)
                    return [optimizer], [scheduler]
            """,
            title="an `optimizer_step` override steps the scheduler once per update: a horizon in optimizer steps is on its clock",
        ),
        bad(
            """
            import torch
            import lightning as L
            from transformers import get_cosine_schedule_with_warmup


            class Classifier(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    return torch.nn.functional.cross_entropy(self.net(x), y)

                def configure_optimizers(self):
                    optimizer = torch.optim.AdamW(self.parameters(), lr=3e-4)
                    scheduler = get_cosine_schedule_with_warmup(
                        optimizer, num_warmup_steps=100, num_training_steps=self.trainer.estimated_stepping_batches)
                    return [optimizer], [scheduler]
            """,
            line=14,
            title="no override: Lightning steps the scheduler once per epoch (the default interval)",
        ),
        bad(
            """
            import torch
            from torch.optim.lr_scheduler import CosineAnnealingLR

            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            scheduler = CosineAnnealingLR(optimizer, T_max=args.epochs)
            for epoch in range(args.epochs):
                for x, y in train_loader:
                    loss = criterion(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    scheduler.step()
            """,
            line=5,
            title="plain loops: a cosine over epochs stepped every batch (the LR oscillates)",
        ),
        bad(
            """
            import torch
            from tqdm import tqdm

            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, num_epochs)
            for epoch in tqdm(range(1, num_epochs + 1), desc="Training"):
                for batch in train_loader:
                    loss = loss_fn(model(batch["input"]), batch["gt"])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    scheduler.step()
            """,
            line=5,
            title="epochs counted from 1 under a progress bar: `num_epochs` is still the epoch count",
        ),
        good(
            """
            import torch
            from tqdm import tqdm

            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, num_epochs)
            for epoch in tqdm(range(1, num_epochs + 1), desc="Training"):
                for batch in train_loader:
                    loss = loss_fn(model(batch["input"]), batch["gt"])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                scheduler.step()
            """,
            title="the same epoch loop with the cosine stepped once per epoch",
        ),
        bad(
            """
            import torch
            from transformers import get_linear_schedule_with_warmup


            def train(model, train_loader, epochs, grad_accum):
                optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
                total = epochs * len(train_loader)
                scheduler = get_linear_schedule_with_warmup(optimizer, 100, total)
                for epoch in range(epochs):
                    for i, batch in enumerate(train_loader):
                        loss = model(**batch).loss / grad_accum
                        loss.backward()
                        if (i + 1) % grad_accum == 0:
                            optimizer.step()
                            scheduler.step()
                            optimizer.zero_grad()
            """,
            line=8,
            title="a length in micro-batches for a scheduler stepped once per update",
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
                    num_training_steps=max_train_steps * args.gradient_accumulation_steps,
                )
                model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(
                    model, optimizer, train_dataloader, lr_scheduler)
                for epoch in range(args.num_train_epochs):
                    for batch in train_dataloader:
                        with accelerator.accumulate(model):
                            loss = model(**batch).loss
                            accelerator.backward(loss)
                            optimizer.step()
                            lr_scheduler.step()
                            optimizer.zero_grad()
            """,
            line=17,
            title="Accelerate: a horizon times K for a prepared scheduler, which only advances on real updates",
        ),
        good(
            """
            import torch
            from accelerate import Accelerator
            from diffusers.optimization import get_scheduler


            def main(cfg, unet, loader):
                accelerator = Accelerator(gradient_accumulation_steps=cfg.accum)
                optimizer = torch.optim.AdamW(unet.parameters(), lr=cfg.lr)
                lr_scheduler = get_scheduler(
                    "constant",
                    optimizer=optimizer,
                    num_training_steps=cfg.max_updates * cfg.accum,
                )
                unet, optimizer, loader, lr_scheduler = accelerator.prepare(unet, optimizer, loader, lr_scheduler)
                for batch in loader:
                    with accelerator.accumulate(unet):
                        accelerator.backward(unet(**batch).loss)
                        optimizer.step()
                        lr_scheduler.step()
                        optimizer.zero_grad()
            """,
            title="`get_scheduler(\"constant\", ...)` ignores its length: a horizon times K sets nothing",
        ),
        bad(
            """
            import argparse

            import torch
            from accelerate import Accelerator
            from diffusers.optimization import get_scheduler

            parser = argparse.ArgumentParser()
            parser.add_argument("--schedule", type=str, default="cosine", help="constant, linear or cosine")
            parser.add_argument("--accum", type=int, default=4)


            def main(cfg, unet, loader):
                accelerator = Accelerator(gradient_accumulation_steps=cfg.accum)
                optimizer = torch.optim.AdamW(unet.parameters(), lr=cfg.lr)
                lr_scheduler = get_scheduler(
                    cfg.schedule,
                    optimizer=optimizer,
                    num_training_steps=cfg.max_updates * cfg.accum,
                )
                unet, optimizer, loader, lr_scheduler = accelerator.prepare(unet, optimizer, loader, lr_scheduler)
                for batch in loader:
                    with accelerator.accumulate(unet):
                        accelerator.backward(unet(**batch).loss)
                        optimizer.step()
                        lr_scheduler.step()
                        optimizer.zero_grad()
            """,
            line=18,
            title="the schedule's name comes from an option that defaults to `cosine`, which decays over the length",
        ),
        bad(
            """
            import torch


            class Trainer:
                def __init__(self, model, loader, epochs):
                    self.model, self.loader, self.epochs = model, loader, epochs
                    self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                    self.scheduler = torch.optim.lr_scheduler.OneCycleLR(
                        self.optimizer, max_lr=1e-3, total_steps=len(loader.dataset) * epochs)

                def train_epoch(self):
                    for x, y in self.loader:
                        loss = torch.nn.functional.cross_entropy(self.model(x), y)
                        loss.backward()
                        self.optimizer.step()
                        self.scheduler.step()
                        self.optimizer.zero_grad()

                def fit(self):
                    for epoch in range(self.epochs):
                        self.train_epoch()
            """,
            line=9,
            title="Trainer class: a horizon counted in samples for a scheduler stepped every batch",
        ),
        good(
            """
            import torch


            class Trainer:
                def __init__(self, model, loader, epochs):
                    self.model, self.loader, self.epochs = model, loader, epochs
                    self.optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
                    self.scheduler = torch.optim.lr_scheduler.OneCycleLR(
                        self.optimizer, max_lr=1e-2, total_steps=len(loader.dataset) * epochs)

                def train_epoch(self):
                    for xs, ys in self.loader:
                        for x, y in zip(xs, ys):
                            loss = torch.nn.functional.cross_entropy(self.model(x[None]), y[None])
                            loss.backward()
                            self.optimizer.step()
                            self.scheduler.step()
                            self.optimizer.zero_grad()

                def fit(self):
                    for epoch in range(self.epochs):
                        self.train_epoch()
            """,
            title="Trainer class: a horizon in samples for a scheduler stepped once per sample (online updates)",
        ),
        bad(
            """
            import torch
            from torch.optim.lr_scheduler import OneCycleLR


            def train_one_epoch(model, loader, optimizer):
                for x, y in loader:
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()


            def main(model, train_loader, epochs):
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                scheduler = OneCycleLR(optimizer, max_lr=1e-2, total_steps=epochs * len(train_loader))
                for epoch in range(epochs):
                    train_one_epoch(model, train_loader, optimizer)
                    scheduler.step()
            """,
            line=15,
            title="a horizon counted in batches for a scheduler stepped once per epoch: it never leaves warmup",
        ),
        bad(
            """
            import torch
            import lightning as L


            class LitModel(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    return self.model(**batch).loss

                def configure_optimizers(self):
                    optimizer = torch.optim.AdamW(self.parameters(), lr=1e-3)
                    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=self.trainer.max_epochs)
                    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
            """,
            line=11,
            title="Lightning: an epoch count for a scheduler Lightning steps every optimizer step",
        ),
        bad(
            """
            import torch
            import lightning as L
            from transformers import get_cosine_schedule_with_warmup


            class Tagger(L.LightningModule):
                def configure_optimizers(self):
                    opt = torch.optim.AdamW(self.parameters(), lr=2e-5)
                    sched = get_cosine_schedule_with_warmup(
                        opt, num_warmup_steps=100, num_training_steps=self.trainer.estimated_stepping_batches)
                    per_step = {"scheduler": sched, "interval": "step"}
                    return [opt], [sched]
            """,
            line=10,
            title="Lightning: a per-step config is built but the bare scheduler is returned (stepped per epoch)",
        ),
        bad(
            """
            import torch
            import torch.distributed as dist
            from transformers import get_cosine_schedule_with_warmup


            def train(model, loader, max_steps, accum):
                optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
                scheduler = get_cosine_schedule_with_warmup(optimizer, 200, max_steps * dist.get_world_size())
                for i, batch in enumerate(loader):
                    loss = model(**batch).loss / accum
                    loss.backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        scheduler.step()
                        optimizer.zero_grad()
            """,
            line=8,
            title="a horizon multiplied by the process count for a scheduler stepped once per update by each process",
        ),
        good(
            """
            import torch
            from torch.optim.lr_scheduler import CosineAnnealingLR

            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            scheduler = CosineAnnealingLR(optimizer, T_max=args.epochs)
            for epoch in range(args.epochs):
                for x, y in train_loader:
                    loss = criterion(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                scheduler.step()
            """,
            title="CosineAnnealingLR(T_max=epochs) stepped once per epoch",
        ),
        good(
            """
            import torch
            from torch.optim.lr_scheduler import CosineAnnealingLR

            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            scheduler = CosineAnnealingLR(optimizer, T_max=args.epochs * len(train_loader))
            for epoch in range(args.epochs):
                for x, y in train_loader:
                    loss = criterion(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    scheduler.step()
            """,
            title="a horizon in batches for a scheduler stepped every batch",
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
            title="a horizon multiplied by K for a scheduler stepped on every micro-batch",
        ),
        good(
            """
            import torch
            from transformers import get_linear_schedule_with_warmup


            def train(model, train_loader, epochs, grad_accum):
                optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
                total = epochs * len(train_loader) // grad_accum
                scheduler = get_linear_schedule_with_warmup(optimizer, 100, total)
                for epoch in range(epochs):
                    for i, batch in enumerate(train_loader):
                        loss = model(**batch).loss / grad_accum
                        loss.backward()
                        if (i + 1) % grad_accum == 0:
                            optimizer.step()
                            scheduler.step()
                            optimizer.zero_grad()
            """,
            title="a horizon in updates (len(loader) // K) for a scheduler stepped once per update",
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
                    num_warmup_steps=args.num_warmup_steps * accelerator.num_processes,
                    num_training_steps=max_train_steps * accelerator.num_processes,
                )
                model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(
                    model, optimizer, train_dataloader, lr_scheduler)
                for epoch in range(args.num_train_epochs):
                    for batch in train_dataloader:
                        with accelerator.accumulate(model):
                            loss = model(**batch).loss
                            accelerator.backward(loss)
                            optimizer.step()
                            lr_scheduler.step()
                            optimizer.zero_grad()
            """,
            title="Accelerate: a prepared scheduler steps once per process on each update, so the horizon is times the process count",
        ),
        good(
            """
            import torch


            class Trainer:
                def __init__(self, model, loader, epochs):
                    self.model, self.loader, self.epochs = model, loader, epochs
                    self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                    self.scheduler = torch.optim.lr_scheduler.OneCycleLR(
                        self.optimizer, max_lr=1e-3, epochs=epochs, steps_per_epoch=len(loader))

                def train_epoch(self):
                    for x, y in self.loader:
                        loss = torch.nn.functional.cross_entropy(self.model(x), y)
                        loss.backward()
                        self.optimizer.step()
                        self.scheduler.step()
                        self.optimizer.zero_grad()

                def fit(self):
                    for epoch in range(self.epochs):
                        self.train_epoch()
            """,
            title="Trainer class: OneCycleLR sized by epochs and steps per epoch, stepped every batch",
        ),
        good(
            """
            import torch
            import lightning as L


            class LitModel(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    return self.model(**batch).loss

                def configure_optimizers(self):
                    optimizer = torch.optim.AdamW(self.parameters(), lr=1e-3)
                    scheduler = torch.optim.lr_scheduler.OneCycleLR(
                        optimizer, max_lr=1e-3, total_steps=self.trainer.estimated_stepping_batches)
                    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
            """,
            title="Lightning: the estimated number of optimizer steps, stepped every optimizer step",
        ),
        good(
            """
            import torch
            import lightning as L
            from transformers import get_cosine_schedule_with_warmup


            class Tagger(L.LightningModule):
                def configure_optimizers(self):
                    opt = torch.optim.AdamW(self.parameters(), lr=2e-5)
                    sched = get_cosine_schedule_with_warmup(
                        opt, num_warmup_steps=100, num_training_steps=self.trainer.estimated_stepping_batches)
                    sched = {"scheduler": sched, "interval": "step"}
                    return [opt], [sched]
            """,
            title="Lightning: the name returned was rebound to the config that asks for per-step stepping",
        ),
        good(
            """
            import torch
            import lightning as L


            class LitModel(L.LightningModule):
                def configure_optimizers(self):
                    optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
                    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=self.trainer.max_epochs)
                    return [optimizer], [scheduler]
            """,
            title="Lightning: an epoch count with the default per-epoch interval",
        ),
        good(
            """
            import torch
            from timm.scheduler import CosineLRScheduler


            def main(model, loader, optimizer, epochs):
                scheduler = CosineLRScheduler(optimizer, t_initial=epochs, warmup_t=5)
                num_updates = 0
                for epoch in range(epochs):
                    for x, y in loader:
                        loss = model(x, y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        num_updates += 1
                        scheduler.step_update(num_updates=num_updates)
                    scheduler.step(epoch + 1)
            """,
            title="timm: a schedule in epochs, stepped with the epoch number",
        ),
        good(
            """
            import torch
            from transformers import get_linear_schedule_with_warmup


            def train_epoch(model, loader, optimizer, scheduler, grad_accum=4):
                for i, batch in enumerate(loader):
                    loss = model(**batch).loss / grad_accum
                    loss.backward()
                    if (i + 1) % grad_accum == 0:
                        optimizer.step()
                        scheduler.step()
                        optimizer.zero_grad()


            def main(model, loader, epochs):
                optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
                scheduler = get_linear_schedule_with_warmup(optimizer, 10, epochs * len(loader) // 4)
                for epoch in range(epochs):
                    train_epoch(model, loader, optimizer, scheduler)
            """,
            title="a length divided by K written as a literal: counted in updates",
        ),
        good(
            """
            import torch
            from accelerate import Accelerator
            from transformers import get_linear_schedule_with_warmup


            def run(config, model, train_dataloader, epochs):
                accelerator = Accelerator(**config)
                optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
                scheduler = get_linear_schedule_with_warmup(optimizer, 0, len(train_dataloader) * epochs)
                model, optimizer, train_dataloader, scheduler = accelerator.prepare(
                    model, optimizer, train_dataloader, scheduler)
                for epoch in range(epochs):
                    for batch in train_dataloader:
                        with accelerator.accumulate(model):
                            accelerator.backward(model(**batch).loss)
                            optimizer.step()
                            scheduler.step()
                            optimizer.zero_grad()
            """,
            title="an Accelerator configured elsewhere: whether it accumulates cannot be told",
        ),
    )

    def check(self, ctx):
        model = ctx.model(training_model)
        seen: set[int] = set()
        for loop in model.loops + model.window_functions:
            for ref in model.own_calls(loop):
                if not model.is_scheduler_step(ref.node, ref.scope) or ref.node.args or \
                        is_plateau_scheduler(model, ref):
                    continue
                clock = _step_clock(model, loop, ref)
                if clock is None:
                    continue
                for horizon in _horizons(ctx, model, ref):
                    if id(horizon.arg) in seen:
                        continue
                    found = _mismatch(ctx, model, loop, ref, clock, horizon)
                    if found is not None:
                        seen.add(id(horizon.arg))
                        condition, message = found
                        sets = _horizon_premise(ctx, horizon)
                        if sets is None:
                            continue  # the schedule it names ignores its length
                        evidence = [*loop_premises(ctx, loop), *scheduler_premise(ctx, ref.node, ref.scope),
                                    premise(f"the scheduler's `.step()` runs on the {clock} clock", ref.node, "call"),
                                    sets]
                        yield self.report_if(condition, horizon.arg, message, evidence=evidence)
        yield from self._lightning(ctx, seen)

    @staticmethod
    def _lightning_evidence(ctx, horizon, returned) -> list:
        return [premise("`configure_optimizers` returns the scheduler with its interval: Lightning steps it",
                        returned, "framework"),
                premise(f"`{ctx.code_for(horizon.arg)}` sets the schedule's horizon", horizon.arg, "argument")]

    def _lightning(self, ctx, seen):
        """`configure_optimizers` hooks: the interval Lightning steps the scheduler at against its length."""
        for function in ctx.index.functions:
            if function.name != "configure_optimizers" or function.class_name is None:
                continue
            for node in walk(function.node.body):
                if not isinstance(node, cst.Return) or node.value is None:
                    continue
                for scheduler, interval in _lightning_schedulers(ctx, node.value, function.scope):
                    for horizon in _constructed_horizons(ctx, scheduler, function.scope):
                        if id(horizon.arg) in seen:
                            continue
                        text = ctx.code_for(horizon.arg.value)
                        if interval == "step" and text.endswith("trainer.max_epochs"):
                            seen.add(id(horizon.arg))
                            yield self.report(horizon.arg, (
                                f"`{ctx.code_for(horizon.arg)}` counts epochs, but `\"interval\": \"step\"` makes "
                                "Lightning step the scheduler after every optimizer step: the schedule ends after "
                                "max_epochs updates and then repeats or stays at its end; use "
                                "`self.trainer.estimated_stepping_batches`"),
                                evidence=self._lightning_evidence(ctx, horizon, node))
                        elif interval == "epoch" and text.endswith("trainer.estimated_stepping_batches") \
                                and not _stepped_per_update_hook(ctx, function):
                            seen.add(id(horizon.arg))
                            yield self.report(horizon.arg, (
                                f"`{ctx.code_for(horizon.arg)}` counts optimizer steps, but Lightning steps this "
                                "scheduler once per epoch (the default interval): it never gets past the first "
                                "epochs' worth of its schedule; set `\"interval\": \"step\"` or count epochs"),
                                evidence=self._lightning_evidence(ctx, horizon, node))


def _horizon_premise(ctx, horizon: _Horizon):
    """That the argument sets the schedule's length. A factory that builds the schedule its name
    says (`get_scheduler("cosine", ...)`) uses the length only for some names: proven when every
    name the code gives it as shipped (a literal, an option's default) is one of them; None when
    every one ignores it (`"constant"`); unknown when the code does not show the name."""
    construction, scope = horizon.construction, horizon.scope
    text = f"`{ctx.code_for(horizon.arg)}` sets the schedule's horizon"
    qualname = ctx.index.resolve(construction.func, scope) or ""
    if qualname.rsplit(".", 1)[-1] not in _NAMED_SCHEDULE_FACTORIES:
        return premise(text, horizon.arg, "argument")
    named = next((a.value for a in construction.args if a.keyword is not None and a.keyword.value == "name"), None)
    if named is None:
        args = positional_args(construction)
        named = args[0].value if args else None
    names = None
    if isinstance(named, cst.Attribute) and (dotted_name(named.value) or "").endswith("SchedulerType"):
        names = [named.attr.value.lower()]  # `SchedulerType.COSINE`
    elif named is not None:
        names = string_defaults(ctx, named, scope)
    if names is None:
        return unknown(f"{text}: the schedule `{ctx.code_for(construction.func)}` builds is named by "
                       f"`{ctx.code_for(named) if named is not None else 'its default'}`, which the code does not "
                       "show, and some schedules ignore their length (`constant`)", horizon.arg, "argument")
    if all(name in _NAMES_WITHOUT_HORIZON for name in names):
        return None
    if any(name in _NAMES_WITHOUT_HORIZON for name in names):
        return unknown(f"{text}: only some of the schedules `{ctx.code_for(named)}` names as shipped "
                       f"({', '.join(names)}) use their length", horizon.arg, "argument")
    return premise(f"{text}: the `{'`, `'.join(names)}` schedule `{ctx.code_for(named)}` names decays over it",
                   named, "argument")


def _step_clock(model: TrainingModel, loop: TrainingLoop, ref: CallRef) -> str | None:
    """How often the scheduler's `.step()` runs: every micro-batch, once per update, once per batch
    (no accumulation), or once per epoch (in an epoch loop, after its batch loop)."""
    if not loop.innermost:
        return EPOCH if isinstance(loop.node, (cst.For, cst.While)) else None
    if not loop.accumulates:
        return BATCH
    return UPDATE if model.runs_per_update(loop, ref) else MICRO


def _horizons(ctx, model: TrainingModel, ref: CallRef) -> list[_Horizon]:
    receiver = ref.node.func.value
    found = []
    for call, scope in _constructions(ctx, model, receiver, ref.scope, ref.via, 0):
        found += _constructed_horizons(ctx, call, scope)
    return found


def _constructions(ctx, model: TrainingModel, expr: cst.BaseExpression, scope: Scope,
                   via: tuple[cst.Call, ...], depth: int) -> list[tuple[cst.Call, Scope]]:
    """The scheduler constructor calls `expr` holds: through assignments, `accelerator.prepare`,
    `self.` attributes, and a helper's parameter to the argument its caller passes."""
    if depth > 4:
        return []
    index = ctx.index
    if isinstance(expr, cst.Call):
        name = index.resolve(expr.func, scope)
        if role_of_callee(name) == SCHEDULER:
            return [(expr, scope)]
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "prepare" and \
                len(positional_args(expr)) == 1:
            return _constructions(ctx, model, positional_args(expr)[0].value, scope, via, depth + 1)
        return []
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        found = []
        for value in index.self_attribute_values(expr.attr.value, scope):
            found += _constructions(ctx, model, value, index.scope_at(value), (), depth + 1)
        return found
    if not isinstance(expr, cst.Name):
        return []
    found = []
    for binding in scope.lookup(expr.value):
        if binding.kind == "assign":
            value = binding.value
            if value is None and isinstance(binding.node, cst.Assign):
                value = _unpacked_prepare_argument(binding.node, expr.value)
            if value is not None and value is not expr:
                found += _constructions(ctx, model, value, scope, via, depth + 1)
        elif binding.kind == "param":
            function = index.function_of_node.get(scope.node) if scope.kind == "function" else None
            if function is None:
                continue
            callers = [(via[-1], index.scope_at(via[-1]), via[:-1])] if via else \
                [(site.node, site.scope, ()) for site in index.callers(function)]
            for call, caller_scope, rest in callers:
                argument = index.argument_for(call, function, expr.value)
                if argument is not None:
                    found += _constructions(ctx, model, argument, caller_scope, rest, depth + 1)
    return found


def _constructed_horizons(ctx, call: cst.Call, scope: Scope) -> list[_Horizon]:
    """The argument of a scheduler's construction that sets its length."""
    if isinstance(call, cst.Name):
        values = [v for v in _reaching_values(ctx, call, scope) if isinstance(v, cst.Call)]
        return [h for v in values for h in _constructed_horizons(ctx, v, scope)]
    if not isinstance(call, cst.Call):
        return []
    found = [a for a in call.args if a.keyword is not None and a.keyword.value in _HORIZON_KEYWORDS]
    if not found:
        name = (ctx.index.resolve(call.func, scope) or "").rsplit(".", 1)[-1]
        position = _HORIZON_POSITIONS.get(name)
        args = positional_args(call)
        if position is not None and position < len(args):
            found = [args[position]]
    return [_Horizon(a, call, scope) for a in found]


def _mismatch(ctx, model: TrainingModel, loop: TrainingLoop, ref: CallRef, clock: str,
              horizon: _Horizon) -> tuple[str | None, str] | None:
    """(condition, message) when the horizon counts another clock than `clock`, else None."""
    expr, scope = horizon.arg.value, horizon.scope
    arg = ctx.code_for(horizon.arg)
    name = ctx.code_for(ref.node.func.value)
    if clock == EPOCH:
        loaders = _epoch_loaders(ctx, model, loop)
        if loaders and _counts_micro_batches(expr, set(), loaders, scope):
            return None, (f"`{arg}` counts batches of the loader, but `{name}.step()` runs once per epoch, after "
                          "the batch loop: the schedule advances one step per epoch and never gets past its "
                          "first epochs' worth (warmup included); count the length in epochs, or step it per batch")
        return None
    if _counts_epochs(ctx, model, loop, expr, scope):
        per = {BATCH: "every batch", MICRO: "every micro-batch", UPDATE: "once per update"}[clock]
        return None, (f"`{arg}` counts epochs (it bounds the epoch loop), but `{name}.step()` runs {per}: the "
                      "schedule reaches its end after that many steps, within the first epoch, then repeats or "
                      "stays at its end (a cosine climbs back: the LR oscillates); count the length in the steps it "
                      "takes (epochs times the steps per epoch), or step it once per epoch")
    product = _epochs_by_use(ctx, loop, expr)
    if product is not None:
        per = {BATCH: "every batch", MICRO: "every micro-batch", UPDATE: "once per update"}[clock]
        return None, (f"`{arg}` counts epochs (`{ctx.code_for(product)}` multiplies it by the loader's length "
                      f"to count steps), but `{name}.step()` runs {per}: the schedule reaches its end after that "
                      "many steps, within the first epoch, then repeats or stays at its end (a cosine climbs back: "
                      "the LR oscillates); count the length in the steps it takes, or step it once per epoch")
    samples = _counts_samples(ctx, loop, expr, scope)
    if samples is not None:
        return None, (f"`{arg}` counts samples (`{samples}`), but `{name}.step()` runs once per "
                      f"{'update' if clock == UPDATE else 'batch' if clock == BATCH else 'micro-batch'}: the "
                      "schedule is a batch size times too long and the LR never gets far into it; divide by the "
                      "samples each step consumes")
    if clock != UPDATE:
        return None
    k = _k_names(ctx, loop)
    k_text = describe_k(ctx, loop)
    accelerate = model.accelerate_accumulation(loop)
    prepared = model.is_prepared(ref.node.func.value, ref.scope) is True
    condition = k_condition(ctx, loop)
    if loop.accumulates and k and _times_k(expr, k, scope):
        owner = ("`accelerator.prepare` made it skip the micro-batches between gradient syncs, so it "
                 "advances once per update" if prepared and accelerate is not None else "it is stepped once per update")
        return condition, (f"`{arg}` is multiplied by the accumulation factor {k_text}, but {owner}: the "
                           f"schedule is {k_text} times too long (warmup too) and the run ends "
                           "before the LR has decayed; count the length in updates")
    if loop.accumulates and loop.k is not None and k and _undivided(expr, scope) and \
            _counts_micro_batches(expr, k, _loop_loaders(ctx, loop), scope):
        return condition, (f"`{arg}` counts the loader's micro-batches, but `{name}.step()` runs once per update, "
                           f"every {k_text} micro-batches: the schedule is {k_text} times too long and the LR never "
                           f"decays past its first part; divide the length by {k_text}")
    processes = _process_factor(ctx, expr, scope)
    if processes is not None and not prepared:
        return None, (f"`{arg}` is multiplied by the process count (`{processes}`), but each process steps "
                      f"`{name}` once per update: the schedule is that many times too long; only a scheduler "
                      "prepared by Accelerate (which steps once per process) needs that factor")
    return None


def _undivided(expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
    """No division in the length, nor in the one assignment of a name it reads: `len(loader) // 4`
    may divide by K written another way."""
    for node in walk(expr):
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Divide, cst.FloorDivide)):
            return False
        if isinstance(node, cst.Name) and depth < 2:
            values = [b.value for b in scope.lookup(node.value) if b.kind == "assign" and b.value is not None]
            if len(values) == 1 and not _undivided(values[0], scope, depth + 1):
                return False
    return True


def _inner_loops(model: TrainingModel, loop: TrainingLoop) -> list[TrainingLoop]:
    found = []
    for ref in loop.step_calls:
        inner = model._inner_loop(loop, ref)
        if inner is not None and inner not in found:
            found.append(inner)
    return found


def _epoch_loaders(ctx, model: TrainingModel, loop: TrainingLoop) -> set[str]:
    """The loaders the batch loops inside an epoch loop iterate, as the epoch loop's code names them
    (a helper's `loader` parameter is the `train_loader` its call passes)."""
    found = set()
    for ref in loop.step_calls:
        inner = model._inner_loop(loop, ref)
        if inner is None:
            continue
        for name in _loop_loaders(ctx, inner):
            found.add(name)
            if ref.via and inner.function is not None and model.callee(ref.via[0], loop.scope) is inner.function:
                argument = ctx.index.argument_for(ref.via[0], inner.function, name)
                if argument is not None:
                    found.add(ctx.code_for(argument))
    return found


def _epoch_loops_around(ctx) -> dict[TrainingLoop, list[TrainingLoop]]:
    """Each training loop -> the `for` loops around it whose steps run in it (the epoch loops),
    read once per file rather than every loop's inner loops at each loop."""
    model = ctx.model(training_model)
    around: dict[TrainingLoop, list[TrainingLoop]] = {}
    for outer in model.loops:
        if not outer.innermost and isinstance(outer.node, cst.For):
            for inner in _inner_loops(model, outer):
                around.setdefault(inner, []).append(outer)
    return around


def _epoch_bounds(ctx, model: TrainingModel, loop: TrainingLoop) -> set[str]:
    """The bounds of the epoch loops that run `loop` (`for epoch in range(args.epochs)` -> args.epochs)."""
    bounds = set()
    for outer in ctx.model(_epoch_loops_around).get(loop, ()):
        iterable = _counted_range(ctx, outer.node.iter, outer.scope)
        if iterable is not None and 1 <= len(positional_args(iterable)) <= 2 and \
                not any(a.keyword for a in iterable.args):
            args = positional_args(iterable)
            stop = args[-1].value
            bounds.add(ctx.code_for(stop))
            # `range(1, epochs + 1)`: `epochs` iterations
            if len(args) == 2 and isinstance(stop, cst.BinaryOperation) and isinstance(stop.operator, cst.Add) \
                    and ctx.code_for(stop.right) == ctx.code_for(args[0].value):
                bounds.add(ctx.code_for(stop.left))
    return bounds


# progress bars and counters around the epoch range iterate it once each (`tqdm(range(epochs))`)
_RANGE_WRAPPERS = frozenset({"tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.std.tqdm", "enumerate"})
_RANGES = frozenset({"range", "tqdm.trange", "tqdm.auto.trange", "tqdm.notebook.trange"})


def _counted_range(ctx, iterable: cst.BaseExpression, scope: Scope) -> cst.Call | None:
    """The `range(...)` call (or tqdm's `trange`) an epoch loop counts, through one progress-bar
    wrapper or `enumerate` (`tqdm(range(1, epochs + 1))`), or None."""
    for _ in range(2):
        if not isinstance(iterable, cst.Call):
            return None
        name = dotted_name(iterable.func)
        resolved = ctx.index.resolve(iterable.func, scope) or name
        if name == "range" or resolved in _RANGES:
            return iterable
        if resolved not in _RANGE_WRAPPERS or not positional_args(iterable):
            return None
        iterable = positional_args(iterable)[0].value
    return None


def _counts_epochs(ctx, model: TrainingModel, loop: TrainingLoop, expr: cst.BaseExpression, scope: Scope,
                   depth: int = 0) -> bool:
    """The horizon is the epoch loop's bound (or it minus/plus something: warmup epochs)."""
    bounds = _epoch_bounds(ctx, model, loop)
    if not bounds or depth > 2:
        return False
    expr = _unwrapped(expr)
    if ctx.code_for(expr) in bounds or _bound_by_self(ctx, expr, bounds):
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)):
        return _counts_epochs(ctx, model, loop, expr.left, scope, depth + 1)
    if isinstance(expr, cst.Name):
        values = [b.value for b in scope.lookup(expr.value) if b.kind in ("assign", "param")]
        if len(values) == 1 and values[0] is not None:
            return _counts_epochs(ctx, model, loop, values[0], scope, depth + 1)
        if len(values) == 1 and ctx.code_for(expr) in bounds:
            return True
    return False


def _epochs_by_use(ctx, loop: TrainingLoop, expr: cst.BaseExpression) -> cst.BinaryOperation | None:
    """The horizon (inside `max(1, x)`, `int(x)`) is what the file multiplies by the length of the
    loader the loop iterates to count steps (`num_training_steps = epochs * len(train_loader)`):
    an epoch count, shown by its use, where no `for epoch in range(...)` bounds the epochs (a
    `while step < num_training_steps` loop)."""
    expr = _unwrapped(expr)
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return None
    loaders = _loop_loaders(ctx, loop)
    if not loaders:
        return None
    text = ctx.code_for(expr)
    for product, factor, loader in ctx.model(_products_with_lengths):
        if factor == text and loader in loaders:
            return product
    return None


def _unwrapped(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`max(1, x)`, `int(x)`, `math.ceil(x)` -> `x`: a guard against 0 or a rounding leaves the count."""
    while isinstance(expr, cst.Call) and dotted_name(expr.func) in ("max", "min", "int", "math.ceil") and \
            not any(a.keyword or a.star for a in expr.args):
        inner = [a.value for a in expr.args if not isinstance(a.value, cst.Integer)]
        if len(inner) != 1:
            return expr
        expr = inner[0]
    return expr


def _products_with_lengths(ctx) -> list[tuple[cst.BinaryOperation, str, str]]:
    """Each `x * len(y)` (or `len(y) * x`) of the file, once: (the product, `x`, `y`) as text."""
    found = []
    for node in walk(ctx.module):
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
            for factor, length in ((node.left, node.right), (node.right, node.left)):
                if isinstance(length, cst.Call) and dotted_name(length.func) == "len" and len(length.args) == 1 \
                        and isinstance(factor, (cst.Name, cst.Attribute)):
                    found.append((node, ctx.code_for(factor), ctx.code_for(length.args[0].value)))
    return found


def _bound_by_self(ctx, expr: cst.BaseExpression, bounds: set[str]) -> bool:
    """`epochs` in `__init__` and `range(self.epochs)` in the loop: `self.epochs = epochs` links them."""
    if not isinstance(expr, cst.Name):
        return False
    for bound in bounds:
        if bound.startswith("self.") and bound[5:] == expr.value:
            return True
    return False


def _counts_samples(ctx, loop: TrainingLoop, expr: cst.BaseExpression, scope: Scope) -> str | None:
    """`len(loader.dataset)` or `len(ds)` of the dataset the loop's loader reads, not divided."""
    if any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, (cst.Divide, cst.FloorDivide))
           for n in walk(expr)):
        return None
    loaders = _loop_loaders(ctx, loop)
    datasets = {f"{l}.dataset" for l in loaders}
    for loader in loaders:
        datasets |= _loader_datasets(ctx, loader, loop.scope)
    for node in walk(expr):
        if isinstance(node, cst.Call) and dotted_name(node.func) == "len" and len(node.args) == 1:
            text = ctx.code_for(node.args[0].value)
            if text in datasets or (text.endswith(".dataset") and
                                    _held_by_loop_loader(ctx, loop, text.rsplit(".", 1)[0], scope)):
                return ctx.code_for(node)
    return None


def _held_by_loop_loader(ctx, loop: TrainingLoop, name: str, scope: Scope) -> bool:
    """`name` (a local of the horizon's function) is what the loop's loader `self.<attr>` is set
    to there: `self.loader = loader` in `__init__` and `len(loader.dataset)` beside it."""
    if "." in name:
        return False
    for loader in _loop_loaders(ctx, loop):
        if not loader.startswith("self.") or loader.count(".") != 1:
            continue
        for value in ctx.index.self_attribute_values(loader[5:], loop.scope):
            if isinstance(value, cst.Name) and value.value == name and ctx.index.scope_at(value) is scope:
                return True
    return False


def _loader_datasets(ctx, loader: str, scope: Scope) -> set[str]:
    """`train_loader = DataLoader(train_ds, ...)` -> {"train_ds"}."""
    found = set()
    values = []
    if loader.startswith("self."):
        values = ctx.index.self_attribute_values(loader[5:], scope)
    elif "." not in loader:
        values = [b.value for b in scope.lookup(loader) if b.kind == "assign" and b.value is not None]
    for value in values:
        if isinstance(value, cst.Call) and (ctx.index.resolve(value.func, scope) or "").endswith("DataLoader"):
            args = positional_args(value)
            if args:
                found.add(ctx.code_for(args[0].value))
    return found


def _process_factor(ctx, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> str | None:
    """A factor of the horizon that is the process count: `accelerator.num_processes`, `get_world_size()`."""
    if isinstance(expr, cst.Name) and depth < 2:
        values = [b.value for b in scope.lookup(expr.value) if b.kind == "assign" and b.value is not None]
        return _process_factor(ctx, values[0], scope, depth + 1) if len(values) == 1 else None
    for factor in _factors(expr):
        if isinstance(factor, cst.Attribute) and factor.attr.value == "num_processes":
            return ctx.code_for(factor)
        if isinstance(factor, cst.Call) and ctx.index.resolve(factor.func, scope) in _WORLD_SIZE:
            return ctx.code_for(factor)
    return None


def _stepped_per_update_hook(ctx, configure: FunctionInfo) -> bool:
    """The class of `configure_optimizers` overrides a hook the framework runs once per optimizer step
    (framework data: Lightning's `optimizer_step`) and steps a scheduler there (`self.lr_schedulers().step()`):
    the scheduler advances once per update, the clock `estimated_stepping_batches` counts."""
    update_hooks = frameworks.hooks("update")
    found = ctx.model(roles_model)
    for function in ctx.index.functions:
        if function.class_name != configure.class_name or function.name not in update_hooks:
            continue
        for call in ctx.index.calls_under(function.node.body):
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "step" and \
                    found.of(call.func.value, ctx.index.scope_at(call)) == SCHEDULER:
                return True
    return False


def _lightning_schedulers(ctx, value: cst.BaseExpression, scope: Scope, depth: int = 0):
    """(scheduler expression, interval) of what `configure_optimizers` returns: `[opt], [sched]`,
    `{"optimizer": opt, "lr_scheduler": sched}`, `{"lr_scheduler": {"scheduler": s, "interval": "step"}}`;
    a name is read as the values that reach the return (`config = {...}; return config`)."""
    if isinstance(value, cst.Name) and depth < 3:
        for expr in _reaching_values(ctx, value, scope):
            yield from _lightning_schedulers(ctx, expr, scope, depth + 1)
        return
    if isinstance(value, (cst.Tuple, cst.List)):
        for element in value.elements[1:] if isinstance(value, cst.Tuple) and len(value.elements) == 2 else []:
            inner = element.value
            items = inner.elements if isinstance(inner, (cst.List, cst.Tuple)) else [inner]
            for item in items:
                expr = item.value if isinstance(item, cst.BaseElement) else item
                yield from _lightning_entry(ctx, expr, scope)
        return
    if isinstance(value, cst.Dict):
        for element in value.elements:
            if isinstance(element, cst.DictElement) and _key(element) == "lr_scheduler":
                yield from _lightning_entry(ctx, element.value, scope)


def _reaching_values(ctx, name: cst.Name, scope: Scope) -> list[cst.BaseExpression]:
    """The values `name` can hold where it is read: its assignments that reach the use (a later
    plain assignment overwrites an earlier one: `scheduler = Cosine(...)` then
    `scheduler = {"scheduler": scheduler, "interval": "step"}`). A name that may hold something
    else there (a parameter, a loop target, an unpacked value) or a dict changed after it is built
    (`config["interval"] = ...`, `config.update(...)`) gives nothing: what Lightning reads is unknown."""
    bindings = ctx.index.reaching_bindings(name, name.value, scope)
    values = []
    for binding in bindings:
        if binding.kind != "assign" or binding.value is None:
            return []
        values.append(binding.value)
    if any(isinstance(v, cst.Dict) for v in values):
        flow = ctx.model(dataflow)
        if flow._subscript_writes(name, None) or any(
                isinstance(c.func, cst.Attribute) and c.func.attr.value in ("update", "setdefault")
                and isinstance(c.func.value, cst.Name) and c.func.value.value == name.value
                for c in ctx.index.calls_under(flow._owner(name))):
            return []
    return values


def _lightning_entry(ctx, expr: cst.BaseExpression, scope: Scope, depth: int = 0):
    if isinstance(expr, cst.Name) and depth < 3:
        for value in _reaching_values(ctx, expr, scope):
            yield from _lightning_entry(ctx, value, scope, depth + 1)
    elif isinstance(expr, cst.Dict):
        scheduler, interval = None, "epoch"
        for element in expr.elements:
            if not isinstance(element, cst.DictElement):
                return
            if _key(element) == "scheduler":
                scheduler = element.value
            elif _key(element) == "interval":
                if not isinstance(element.value, cst.SimpleString):
                    return
                interval = element.value.evaluated_value
        if scheduler is not None:
            yield scheduler, interval
    elif isinstance(expr, cst.Call):
        yield expr, "epoch"


def _key(element: cst.DictElement) -> str | None:
    return element.key.evaluated_value if isinstance(element.key, cst.SimpleString) else None

