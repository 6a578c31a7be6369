"""TL201 clip-before-unscale."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model.amp import (BACKWARDS, CLIP, OPTIMIZER_STEPS, SCALED_BACKWARD, SCALER_STEP, UNSCALE, ZERO_GRAD, amp_model, describe,
                           measures_only, per_update)
from trainlint.model.amp import CLIP_NAMES
from trainlint.model.roles import SCALER
from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.rule import FixSpec, Rule, bad, good
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import accumulation_premises, loop_premises, role_premise, unit_premises


class ClipBeforeUnscale(Rule):
    code = "TL201"
    name = "clip-before-unscale"
    severity = Severity.ERROR
    summary = "Gradient clipping on GradScaler-scaled gradients, with no `scaler.unscale_(opt)` before it"
    message = "gradients are clipped while still multiplied by the GradScaler's scale"
    triggers = ("clip_grad", "clip_gradients")
    gate = named(CLIP_NAMES)
    what_it_does = """
        In a loop (or an update function) whose backward runs on `scaler.scale(loss)`, flags
        `torch.nn.utils.clip_grad_norm_`, `clip_grad_value_`, `clip_grads_with_norm_` (and an FSDP
        model's `clip_grad_norm_`) when no `scaler.unscale_(opt)` runs before it in the same update.

        Clipping helpers that unscale by themselves are not flagged: Accelerate's
        `accelerator.clip_grad_norm_`/`clip_grad_value_`, Fabric's `fabric.clip_gradients` and a
        LightningModule's `self.clip_gradients`. A bf16 `torch.autocast` loop without a GradScaler has
        nothing to unscale and is not flagged either. With an Accelerator created with
        `mixed_precision="fp16"` (or a Fabric with `precision="16-mixed"`), `accelerator.backward(loss)`
        scales the loss, so a plain `torch.nn.utils.clip_grad_norm_` after it is flagged too (use the
        framework's clip, or `accelerator.unscale_gradients()` first). A norm taken with
        `max_norm=inf` clips nothing and is not flagged. A clip on the other branch of the `if` that
        holds every scaled backward (`if scaler: scaler.scale(loss).backward() ... else:
        loss.backward(); clip_grad_norm_(...)`) runs only without the scaler and is not flagged; so
        does a clip under the opposite of the test that guards every scaled backward, written the
        same way (`backward(loss, scaler)` scaling under `if scaler is not None:`, the clip under
        `if scaler is None:`).

        An update split across files is followed too: a method that clips and then calls
        `scaler.step(opt)` (an `Updater.step(grad_scaler)`) with no backward of its own receives
        the gradients of its callers' backward; when a file of its part of the project scales a
        loss before a backward and none calls `unscale_`, the clip is flagged there.

        When the clip is a statement of its own that runs once per update, and the update steps one
        optimizer through the scaler, the fix inserts `scaler.unscale_(opt)` on the line above it
        (unsafe: it changes the update, as intended).

        A scaler built with `enabled=` a test that the file's values make False (`enabled=(dtype ==
        "float16")` with `dtype = "bfloat16"` its only binding) scales nothing and is not flagged;
        when the file runs `exec(...)` or writes `globals()` (a configurator that may set the value
        from the command line), whether the scaler is on is unknown, and the finding is reported
        only with `--include-unproven`.
        """
    why_bad = """
        With fp16 AMP the backward runs on the loss multiplied by the scaler's current scale (65536 at
        the start, then whatever the dynamic scaling settles on), so every `.grad` is that many times
        too large until `scaler.step(opt)` divides it back. A clip before that compares `max_norm` with
        the scaled norm: `clip_grad_norm_(params, 1.0)` then shrinks the true gradient by about the
        scale factor on every step (the update nearly vanishes), and `clip_grad_value_` clamps
        elements that were never large. The returned norm that people log is also scaled, so the
        logs look like a gradient explosion. The documented order per update is
        `scaler.unscale_(opt)`, then clip, then `scaler.step(opt)` (which knows the gradients are
        already unscaled), then `scaler.update()`.
        """
    fix_safety = """
        Unsafe: clipping unscaled gradients changes the threshold the clip applies; if the
        gradients were unscaled in a way the rule cannot see, the added unscale raises at run
        time.
        """
    references = (
        "https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping",
        "https://pytorch.org/docs/stable/amp.html#torch.amp.GradScaler.unscale_",
        "https://pytorch.org/docs/stable/generated/torch.nn.utils.clip_grad_norm_.html",
    )
    examples = (
        good(
            """
            import torch

            precision = "bf16"
            scaler = torch.amp.GradScaler("cuda", enabled=precision in ("fp16", "half"))
            for xb, yb in batches:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    err = torch.nn.functional.l1_loss(net(xb), yb)
                scaler.scale(err).backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 2.0)
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
            """,
            title="the scaler is built disabled (the only value the file gives `precision` turns it off): it scales nothing",
        ),
        bad(
            """
            import torch

            precision = "bf16"
            if torch.cuda.get_device_capability()[0] < 8:
                precision = "fp16"
            scaler = torch.amp.GradScaler("cuda", enabled=precision in ("fp16", "half"))
            for xb, yb in batches:
                with torch.autocast("cuda", dtype=torch.float16 if precision == "fp16" else torch.bfloat16):
                    err = torch.nn.functional.l1_loss(net(xb), yb)
                scaler.scale(err).backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 2.0)
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
            """,
            line=11,
            fixed="""
            import torch

            precision = "bf16"
            if torch.cuda.get_device_capability()[0] < 8:
                precision = "fp16"
            scaler = torch.amp.GradScaler("cuda", enabled=precision in ("fp16", "half"))
            for xb, yb in batches:
                with torch.autocast("cuda", dtype=torch.float16 if precision == "fp16" else torch.bfloat16):
                    err = torch.nn.functional.l1_loss(net(xb), yb)
                scaler.scale(err).backward()
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(net.parameters(), 2.0)
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
            """,
            title="the same test, but the file can set the precision to fp16: the scaler may be on",
        ),
        good(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            optimizer = torch.optim.AdamW(net.parameters())
            for x, y in loader:
                optimizer.zero_grad()
                with torch.autocast("cuda"):
                    loss = torch.nn.functional.mse_loss(net(x), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                scaler.update()
            """,
            title="clipped after `scaler.step`, which unscaled the gradients in place: too late (TL203), "
                  "but not on scaled gradients",
        ),
        bad(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            opt_g = torch.optim.Adam(gen.parameters())
            opt_d = torch.optim.Adam(disc.parameters())
            for real in loader:
                opt_g.zero_grad()
                opt_d.zero_grad()
                with torch.autocast("cuda"):
                    loss_d, loss_g = gan_losses(gen, disc, real)
                scaler.scale(loss_d).backward(retain_graph=True)
                scaler.scale(loss_g).backward()
                scaler.step(opt_d)
                torch.nn.utils.clip_grad_norm_(gen.parameters(), 1.0)
                scaler.step(opt_g)
                scaler.update()
            """,
            line=14,
            title="the step before the clip unscaled the critic's optimizer only: the generator's gradients "
                  "are still scaled",
        ),
        good(
            """
            import torch


            def train(model, loader, optimizer, scaler, max_norm):
                for x, y in loader:
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = torch.nn.functional.mse_loss(model(x), y)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad(set_to_none=True)
            """,
            title="a clip before the backward sees the gradients the last iteration cleared, none scaled "
                  "(misplaced: TL203)",
        ),
        bad(
            """
            import torch


            def train(model, loader, optimizer, scaler, max_norm, accum):
                for i, (x, y) in enumerate(loader):
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = torch.nn.functional.mse_loss(model(x), y) / accum
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                    scaler.scale(loss).backward()
                    if (i + 1) % accum == 0:
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad(set_to_none=True)
            """,
            line=8,
            title="the same clip under accumulation: the clear runs only at the update, so between updates it "
                  "clips the micro-batches' scaled gradients",
        ),
        bad(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                optimizer.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = criterion(model(x), y)
                scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
                scaler.step(optimizer)
                scaler.update()
            """,
            line=9,
            fixed="""
                import torch

                scaler = torch.amp.GradScaler("cuda")
                for x, y in loader:
                    optimizer.zero_grad(set_to_none=True)
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = criterion(model(x), y)
                    scaler.scale(loss).backward()
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
                    scaler.step(optimizer)
                    scaler.update()
            """,
            title="plain AMP loop that forgot unscale_",
        ),
        bad(
            """
            import torch
            from torch.cuda.amp import GradScaler, autocast
            from torch.nn.utils import clip_grad_norm_

            class Trainer:
                def __init__(self, model, optimizer):
                    self.model = model
                    self.optimizer = optimizer
                    self.scaler = GradScaler()

                def train_epoch(self, loader):
                    for batch in loader:
                        self.optimizer.zero_grad()
                        with autocast():
                            loss = self.model(**batch).loss
                        self.scaler.scale(loss).backward()
                        clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
                        self.scaler.step(self.optimizer)
                        self.scaler.update()
            """,
            line=17,
            fixed="""
                import torch
                from torch.cuda.amp import GradScaler, autocast
                from torch.nn.utils import clip_grad_norm_

                class Trainer:
                    def __init__(self, model, optimizer):
                        self.model = model
                        self.optimizer = optimizer
                        self.scaler = GradScaler()

                    def train_epoch(self, loader):
                        for batch in loader:
                            self.optimizer.zero_grad()
                            with autocast():
                                loss = self.model(**batch).loss
                            self.scaler.scale(loss).backward()
                            self.scaler.unscale_(self.optimizer)
                            clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
                            self.scaler.step(self.optimizer)
                            self.scaler.update()
            """,
            title="Trainer class with self.scaler and an HF-style model",
        ),
        bad(
            """
            import torch
            import torch.nn as nn

            def train(model, loader, opt, grad_accum=4):
                scaler = torch.amp.GradScaler("cuda")
                for it, (x, y) in enumerate(loader):
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = nn.functional.cross_entropy(model(x), y) / grad_accum
                    scaler.scale(loss).backward()
                    if (it + 1) % grad_accum == 0:
                        nn.utils.clip_grad_value_(model.parameters(), 0.5)
                        scaler.step(opt)
                        scaler.update()
                        opt.zero_grad(set_to_none=True)
            """,
            line=11,
            fixed="""
                import torch
                import torch.nn as nn

                def train(model, loader, opt, grad_accum=4):
                    scaler = torch.amp.GradScaler("cuda")
                    for it, (x, y) in enumerate(loader):
                        with torch.autocast("cuda", dtype=torch.float16):
                            loss = nn.functional.cross_entropy(model(x), y) / grad_accum
                        scaler.scale(loss).backward()
                        if (it + 1) % grad_accum == 0:
                            scaler.unscale_(opt)
                            nn.utils.clip_grad_value_(model.parameters(), 0.5)
                            scaler.step(opt)
                            scaler.update()
                            opt.zero_grad(set_to_none=True)
            """,
            title="clip_grad_value_ in the guarded update of an accumulation loop",
        ),
        bad(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")

            def clip_gradients(model, max_norm):
                return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)

            for step, batch in enumerate(train_loader):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(**batch).loss
                scaler.scale(loss).backward()
                grad_norm = clip_gradients(model, 1.0)
                scaler.step(optim)
                scaler.update()
                optim.zero_grad()
            """,
            line=6,
            title="the clip inside a helper the loop calls",
        ),
        bad(
            """
            import torch
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

            model = FSDP(net)
            scaler = ShardedGradScaler()
            for batch in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(batch).mean()
                scaler.scale(loss).backward()
                model.clip_grad_norm_(1.0)
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
            """,
            line=11,
            fixed="""
                import torch
                from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
                from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

                model = FSDP(net)
                scaler = ShardedGradScaler()
                for batch in loader:
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = model(batch).mean()
                    scaler.scale(loss).backward()
                    scaler.unscale_(opt)
                    model.clip_grad_norm_(1.0)
                    scaler.step(opt)
                    scaler.update()
                    opt.zero_grad()
            """,
            title="FSDP's clip_grad_norm_ does not unscale",
        ),
        good(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                optimizer.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = criterion(model(x), y)
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
                scaler.step(optimizer)
                scaler.update()
            """,
            title="unscale_, then clip, then step and update",
        ),
        good(
            """
            import torch

            for x, y in loader:
                opt.zero_grad()
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = criterion(model(x), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
            """,
            title="bf16 autocast without a GradScaler: nothing to unscale",
        ),
        good(
            """
            from accelerate import Accelerator

            accelerator = Accelerator(mixed_precision="fp16")
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                loss = model(**batch).loss
                accelerator.backward(loss)
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
            """,
            title="Accelerate's clip_grad_norm_ unscales by itself",
        ),
        bad(
            """
            from accelerate import Accelerator
            from torch.nn.utils import clip_grad_norm_

            accelerator = Accelerator(mixed_precision="fp16")
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                loss = model(**batch).loss
                accelerator.backward(loss)
                clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
            """,
            line=9,
            fixed="""
            from accelerate import Accelerator
            from torch.nn.utils import clip_grad_norm_

            accelerator = Accelerator(mixed_precision="fp16")
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                loss = model(**batch).loss
                accelerator.backward(loss)
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
            """,
            title="torch's clip after an fp16 Accelerator's backward",
        ),
        good(
            """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator(mixed_precision="bf16")
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                loss = model(**batch).loss
                accelerator.backward(loss)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
            """,
            title="bf16 Accelerator: no loss scaling, torch's clip is fine",
        ),
        good(
            """
            import torch

            class Trainer:
                def __init__(self, model, opt):
                    self.model, self.opt = model, opt
                    self.scaler = torch.amp.GradScaler("cuda")

                def unscale_and_clip(self):
                    self.scaler.unscale_(self.opt)
                    return torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)

                def fit(self, loader):
                    for x, y in loader:
                        with torch.autocast("cuda", dtype=torch.float16):
                            loss = self.model(x, y)
                        self.scaler.scale(loss).backward()
                        gnorm = self.unscale_and_clip()
                        self.scaler.step(self.opt)
                        self.scaler.update()
                        self.opt.zero_grad(set_to_none=True)
            """,
            title="unscale_ in the same helper as the clip",
        ),
        good(
            """
            import torch

            def train(model, loader, opt, use_amp):
                scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
                for micro_step, (x, y) in enumerate(loader):
                    with torch.autocast("cuda", dtype=torch.float16, enabled=use_amp):
                        loss = model(x, y) / 8
                    scaler.scale(loss).backward()
                    if (micro_step + 1) % 8 != 0:
                        continue
                    scaler.unscale_(opt)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    scaler.step(opt)
                    scaler.update()
                    opt.zero_grad(set_to_none=True)
            """,
            title="unscale_ after a continue guard, once per update",
        ),
        good(
            """
            from lightning.fabric import Fabric

            fabric = Fabric(precision="16-mixed")
            model, optimizer = fabric.setup(model, optimizer)
            for batch in loader:
                loss = model(batch)
                fabric.backward(loss)
                fabric.clip_gradients(model, optimizer, max_norm=1.0)
                optimizer.step()
                optimizer.zero_grad()
            """,
            title="Fabric's clip_gradients unscales by itself",
        ),
        good(
            """
            import torch

            def train(model, loader, opt, scaler, args):
                for x, y in loader:
                    opt.zero_grad()
                    with torch.autocast("cuda", enabled=scaler is not None):
                        loss = model(x, y)
                    if scaler:
                        scaler.scale(loss).backward()
                        scaler.unscale_(opt)
                        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
                        scaler.step(opt)
                        scaler.update()
                    else:
                        loss.backward()
                        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
                        opt.step()
            """,
            title="the clip in the non-AMP branch clips unscaled gradients",
        ),
        good(
            """
            import torch

            def train(model, loader, opt, scaler, args):
                for x, y in loader:
                    opt.zero_grad()
                    loss = model(x, y)
                    if scaler is not None:
                        scaler.scale(loss).backward()
                        scaler.step(opt)
                        scaler.update()
                    else:
                        loss.backward()
                        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
                        opt.step()
            """,
            title="only the fp32 branch clips; the AMP branch does not",
        ),
        bad(
            """
            import torch


            def train(model, loader, optimizer, scaler, max_norm):
                for x, y in loader:
                    optimizer.zero_grad(set_to_none=True)
                    with torch.autocast("cuda", dtype=torch.float16, enabled=scaler is not None):
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                    if scaler is not None:
                        scaler.scale(loss).backward()
                    else:
                        loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                    if scaler is not None:
                        scaler.step(optimizer)
                        scaler.update()
                    else:
                        optimizer.step()
            """,
            line=13,
            title="AMP optional: the clip after both branches sees scaled gradients when the scaler is on",
        ),
        good(
            """
            import torch


            class Trainer:
                def __init__(self, model, optimizer, cfg):
                    self.model = model
                    self.optimizer = optimizer
                    self.cfg = cfg
                    self.scaler = torch.amp.GradScaler("cuda") if cfg.amp else None

                def run_batch(self, x, y, train=True):
                    with torch.set_grad_enabled(train):
                        loss = torch.nn.functional.cross_entropy(self.model(x), y)
                    if train:
                        self.optimizer.zero_grad(set_to_none=True)
                        if self.scaler is not None:
                            self.scaler.scale(loss).backward()
                            self.scaler.unscale_(self.optimizer)
                            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip)
                            self.scaler.step(self.optimizer)
                            self.scaler.update()
                        else:
                            loss.backward()
                            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip)
                            self.optimizer.step()
                    return loss.item()

                def run_epoch(self, loader, train=True):
                    return [self.run_batch(x, y, train) for x, y in loader]

                def fit(self, train_loader, val_loader, epochs):
                    for epoch in range(epochs):
                        self.run_epoch(train_loader)
                        self.run_epoch(val_loader, train=False)
            """,
            title="a Trainer's batch helper run for training and evaluation: the clip in its non-AMP branch",
        ),
        good(
            """
            import torch


            def backward(loss, scaler):
                if scaler is not None:
                    scaler.scale(loss).backward()
                else:
                    loss.backward()


            def train_one_epoch(model, loader, optimizer, scaler, clip_norm):
                for images, texts in loader:
                    optimizer.zero_grad()
                    with torch.autocast("cuda", enabled=scaler is not None):
                        loss = model(images, texts)
                    backward(loss, scaler)
                    if scaler is None:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
                        optimizer.step()
                    else:
                        scaler.unscale_(optimizer)
                        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
                        scaler.step(optimizer)
                        scaler.update()
            """,
            title="the scaled backward in a helper under `if scaler is not None:`, the clip under `if scaler is None:`",
        ),
        good(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            body_opt = torch.optim.AdamW(backbone.parameters(), lr=1e-4)
            head_opt = torch.optim.SGD(prefix.parameters(), lr=1e-2)
            for frames, target in loader:
                body_opt.zero_grad()
                head_opt.zero_grad()
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = criterion(backbone(prefix(frames)), target)
                scaler.scale(loss).backward()
                scaler.unscale_(body_opt)
                head_opt.step()
                torch.nn.utils.clip_grad_norm_(backbone.parameters(), 1.0)
                scaler.step(body_opt)
                scaler.update()
            """,
            title="another optimizer steps between `unscale_(body_opt)` and the clip: body_opt's update is not over",
        ),
        bad(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            for real, noise in loader:
                d_opt.zero_grad()
                with torch.autocast("cuda", dtype=torch.float16):
                    d_loss = critic(real).mean() - critic(gen(noise).detach()).mean()
                scaler.scale(d_loss).backward()
                scaler.unscale_(d_opt)
                torch.nn.utils.clip_grad_norm_(critic.parameters(), 1.0)
                scaler.step(d_opt)
                g_opt.zero_grad()
                with torch.autocast("cuda", dtype=torch.float16):
                    g_loss = -critic(gen(noise)).mean()
                scaler.scale(g_loss).backward()
                torch.nn.utils.clip_grad_norm_(gen.parameters(), 1.0)
                scaler.step(g_opt)
                scaler.update()
            """,
            line=16,
            title="the unscale_ earlier in the iteration belongs to d_opt's update, ended by its step: g's clip sees scaled gradients",
        ),
    )

    def check(self, ctx):
        model = ctx.model(amp_model)
        for unit in model.units:
            if not unit.uses_scaler:
                continue
            for clip in unit.of_kind(CLIP):
                if not clip.needs_unscale or measures_only(clip):
                    continue
                if _unscaled_before(ctx, unit, clip):
                    continue
                if _cleared_since_backward(ctx, unit, clip):
                    continue  # it clips cleared gradients, nothing scaled (TL203 reports where it sits)
                scaled = unit.of_kind(SCALED_BACKWARD)
                if scaled and all(unit.exclusive(ctx.index, clip, event) for event in scaled):
                    continue  # the non-AMP branch: its backward and its clip see true gradients
                if unit.scaled_in:
                    yield from self._update_end(ctx, unit, clip)
                    continue
                if not unit.has(SCALED_BACKWARD):
                    framework = unit.framework_scaler
                    yield self.report(
                        clip.node,
                        f"`{describe(clip.node, ctx)}` clips gradients that `{framework}.backward(loss)` "
                        f"scaled for fp16 and nothing has unscaled yet: use `{framework}.clip_grad_norm_(...)` "
                        f"(or `{framework}.clip_grad_value_`/`clip_gradients`), which unscales first",
                        _accelerator_clip(ctx, clip, framework),
                        evidence=[*unit_premises(ctx, unit),
                                  premise(f"`{framework}` was created for fp16: its `backward(loss)` scales the loss",
                                          unit.of_kind(*BACKWARDS)[0].node, "framework"),
                                  premise("nothing unscales the gradients before this clip", clip.node, "call")],
                    )
                    continue
                off = _scaler_off(ctx, model, scaled)
                if off is not None and off[1] is None:
                    continue  # built with `enabled=` a test the file's constants make False: it scales nothing
                scaler = unit.of_kind(SCALED_BACKWARD)[0].subject
                scaler_steps = unit.of_kind(SCALER_STEP)
                optimizer = scaler_steps[0].subject if scaler_steps else "optimizer"
                fix = None
                if len(scaler_steps) == 1 and scaler_steps[0].has_args and not unit.has(UNSCALE) \
                        and per_update(model, unit, clip) and not _scaler_optional(ctx, clip, scaled):
                    fix = _insert_unscale(ctx, clip, f"{scaler}.unscale_({optimizer})")
                condition, enabled = None, []
                if off is not None:  # False as shipped, but something the file runs may rebind what it reads
                    condition = (f"`{ctx.code_for(off[0])}` holds (with the values the file gives, it is False "
                                 f"and `{scaler}` scales nothing)")
                    enabled = [unknown(f"`{scaler}` is enabled: `enabled={ctx.code_for(off[0])}` is False with the "
                                       f"values the file gives; only what `{ctx.code_for(off[1].func)}(...)` binds "
                                       "could make it True", off[0], "argument")]
                yield self.report_if(
                    condition,
                    clip.node,
                    f"`{describe(clip.node, ctx)}` clips gradients of `{scaler}.scale(loss)` that are still "
                    f"multiplied by the loss scale: call `{scaler}.unscale_({optimizer})` before clipping "
                    f"in the update, so the threshold applies to the true gradients",
                    fix,
                    evidence=[*unit_premises(ctx, unit),
                              premise(f"the backward runs on `{scaler}.scale(loss)`: the gradients are scaled",
                                      scaled[0].node, "call"),
                              *enabled,
                              premise(f"no `{scaler}.unscale_(...)` runs before this clip in the update", clip.node,
                                      "call")],
                )


    def _update_end(self, ctx, unit, clip):
        """The clip in a function that ends an update whose scaled backward runs in its callers
        (`AmpModel._build_update_ends`): reported when a `scaler.step` follows it on its path."""
        steps = [event for event in unit.of_kind(SCALER_STEP)
                 if unit.events.index(event) > unit.events.index(clip) and not unit.exclusive(ctx.index, clip, event)]
        if not steps:
            return
        step = steps[0]
        scaler = ctx.code_for(step.node.func.value) if isinstance(step.node.func, cst.Attribute) else "scaler"
        yield self.report(
            clip.node,
            f"`{describe(clip.node, ctx)}` clips the gradients that `{describe(step.node, ctx)}` receives "
            f"from the callers' backward on a loss scaled by `{scaler}.scale(...)` ({unit.scaled_in}); nothing "
            f"unscales them first: call `{scaler}.unscale_({step.subject})` before clipping, so the threshold applies "
            f"to the true gradients",
            evidence=[premise(f"`{describe(step.node, ctx)}` steps on gradients of a scaled loss: the scaler "
                              f"unscales them itself only inside `step`, after this clip", step.node, "call"),
                      role_premise(ctx, step.node.func.value, step.scope, SCALER),
                      premise(f"the loss is scaled before its backward ({unit.scaled_in}), and no file of this "
                              "part of the project calls `unscale_`", clip.node, "call")],
        )


def _scaler_off(ctx, model, scaled) -> tuple[cst.BaseExpression, object] | None:
    """When every construction of the scaler of each scaled backward passes `enabled=` an expression
    that the file's values make False (`GradScaler(enabled=(dtype == "float16"))` with `dtype = "bfloat16"`
    the only binding of a module-level name): (that expression, None) when nothing can rebind what it
    reads, (that expression, the dynamic binder) when the file runs `exec`/`globals()` (a configurator
    that may set it from the command line). A scaler built disabled returns the loss unscaled.
    None when some construction may be enabled (or is not seen)."""
    found = None
    for event in scaled:
        receiver = event.node.func.value if isinstance(event.node.func, cst.Attribute) else None
        scale = model._scale_call(receiver, event.scope) if receiver is not None else None
        if scale is None:
            return None
        values = model._bound_values(scale.func.value, event.scope)
        if not values:
            return None
        for value, value_scope in values:
            if not isinstance(value, cst.Call):
                return None
            enabled = next((a.value for a in value.args if a.keyword is not None and a.keyword.value == "enabled"), None)
            if enabled is None or _constant(ctx, enabled, value_scope, 0) is not False:
                return None
            found = enabled
    if found is None:
        return None
    return found, _dynamic_binder(ctx)


def _dynamic_binder(ctx) -> object:
    """A call of `exec`/`eval` or a read of `globals()`/`vars()` in the file: module names can be
    rebound unseen (nanoGPT's `exec(open("configurator.py").read())`)."""
    for node in ctx.index.subtree(ctx.index.module):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and \
                node.func.value in ("exec", "eval", "globals", "vars", "setattr"):
            return node
    return None


def _constant(ctx, expr: cst.BaseExpression, scope, depth: int) -> object:
    """The value of a test built from literals, names bound exactly once in the file to one of them
    (a module-level setting, never a parameter or a loop target), `==`/`!=`/`in`, `not`, `and`/`or`;
    `_UNKNOWN` otherwise."""
    if depth > 4:
        return _UNKNOWN
    if isinstance(expr, (cst.SimpleString, cst.Integer, cst.Float)):
        try:
            return expr.evaluated_value
        except Exception:  # noqa: BLE001 - a literal Python itself would reject
            return _UNKNOWN
    if isinstance(expr, cst.Name):
        if expr.value in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[expr.value]
        bindings = [b for s in ctx.index.scopes for b in s.bindings.get(expr.value, ())]
        owner = scope.lookup(expr.value)
        if len(bindings) != 1 or len(owner) != 1 or owner[0] is not bindings[0]:
            return _UNKNOWN
        binding = bindings[0]
        if binding.kind != "assign" or binding.value is None:
            return _UNKNOWN
        return _constant(ctx, binding.value, ctx.index.scope_at(binding.value), depth + 1)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = _constant(ctx, expr.expression, scope, depth + 1)
        return _UNKNOWN if inner is _UNKNOWN else not inner
    if isinstance(expr, cst.BooleanOperation):
        left = _constant(ctx, expr.left, scope, depth + 1)
        right = _constant(ctx, expr.right, scope, depth + 1)
        if isinstance(expr.operator, cst.And):
            if left is not _UNKNOWN and not left or right is not _UNKNOWN and not right:
                return False
            return _UNKNOWN if _UNKNOWN in (left, right) else bool(left and right)
        if left is not _UNKNOWN and left or right is not _UNKNOWN and right:
            return True
        return _UNKNOWN if _UNKNOWN in (left, right) else bool(left or right)
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        target = expr.comparisons[0]
        left = _constant(ctx, expr.left, scope, depth + 1)
        if isinstance(target.operator, (cst.In, cst.NotIn)) and isinstance(target.comparator, (cst.Tuple, cst.List, cst.Set)):
            options = [_constant(ctx, e.value, scope, depth + 1) for e in target.comparator.elements]
            if left is _UNKNOWN or _UNKNOWN in options or any(isinstance(e, cst.StarredElement) for e in target.comparator.elements):
                return _UNKNOWN
            return (left in options) == isinstance(target.operator, cst.In)
        right = _constant(ctx, target.comparator, scope, depth + 1)
        if _UNKNOWN in (left, right) or not isinstance(target.operator, (cst.Equal, cst.NotEqual)):
            return _UNKNOWN
        return (left == right) == isinstance(target.operator, cst.Equal)
    return _UNKNOWN


_UNKNOWN = object()


def _cleared_since_backward(ctx, unit, clip) -> bool:
    """Going back from the clip (in a loop, round to the previous iteration's end), a clear of the
    gradients (`zero_grad`) comes before any backward, and it runs whenever that backward runs (no
    `if`, loop or `except` around it that the backward is not in): the clip sees the cleared
    gradients, none scaled (`clip; scaler.scale(loss).backward(); scaler.step(opt); opt.zero_grad()`
    clips nothing; under accumulation, a clear only at the update leaves the micro-batches' scaled
    gradients to a clip on the others)."""
    for earlier in unit.before(clip):
        if earlier.kind in BACKWARDS:
            return False
        if earlier.kind == ZERO_GRAD and not unit.exclusive(ctx.index, earlier, clip):
            backward = next((e for e in unit.before(earlier) if e.kind in BACKWARDS), None)
            return backward is not None and _runs_with(ctx.index, earlier.anchor, backward.anchor, unit.node)
    return False


def _runs_with(index, node: cst.CSTNode, other: cst.CSTNode, root: cst.CSTNode) -> bool:
    """Every branch, loop or `except` around `node` below `root` is also around `other`."""
    around_other = set(index.ancestors(other))
    for ancestor in index.ancestors(node):
        if ancestor is root:
            return True
        if isinstance(ancestor, (cst.If, cst.Else, cst.ExceptHandler, cst.For, cst.While)) and ancestor not in around_other:
            return False
    return True


def _unscaled_before(ctx, unit, clip) -> bool:
    """An `unscale_` runs before the clip in the same update: the nearest one before it, with no
    step between them that ends the update it unscaled. A step ends that update when it steps the
    optimizer `unscale_` was given (or any optimizer, for an unscale of every optimizer such as
    `accelerator.unscale_gradients()`, or when which optimizer is stepped cannot be told apart);
    a step of another optimizer (a second optimizer over other parameters, `prompt_opt.step()`
    between `scaler.unscale_(opt)` and the clip of `opt`'s parameters) leaves `opt`'s gradients
    unscaled. A scaled backward between them adds scaled gradients again: no unscale before it counts.
    A `scaler.step(opt)` before the clip is an unscale of `opt` too (it unscales in place)."""
    steps = []
    subjects = {event.subject for event in unit.of_kind(*OPTIMIZER_STEPS)}
    for earlier in unit.before(clip):
        if earlier.kind == SCALED_BACKWARD:
            return False  # gradients scaled again after any unscale before this backward
        if earlier.kind == SCALER_STEP and len(subjects) == 1 and earlier.subject \
                and not unit.exclusive(ctx.index, earlier, clip):
            backward = next((e for e in unit.before(earlier) if e.kind in BACKWARDS), None)
            if backward is None or not _runs_with(ctx.index, earlier.anchor, backward.anchor, unit.node):
                return False  # a step only at the update: the micro-batches between keep scaled gradients
            # `scaler.step(opt)` unscales `opt`'s gradients in place (when nothing did) before it
            # steps: a clip after it, with no scaled backward between, whenever the backward before it
            # runs (not a step only at the update), sees the true gradients (it
            # clips after the step: TL203's finding, not this one). With one optimizer only: a
            # step of another optimizer unscales only that one's gradients.
            return True
        if earlier.kind in OPTIMIZER_STEPS:
            steps.append(earlier)
        elif earlier.kind == UNSCALE:
            unscaled = _unscaled_optimizer(earlier)
            return all(unscaled is not None and _other_optimizer(ctx, step, unscaled) for step in steps)
    return False


def _unscaled_optimizer(event) -> cst.BaseExpression | None:
    """The optimizer a `scaler.unscale_(opt)` is given; None for an unscale of every optimizer."""
    node = event.node
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "unscale_":
        args = [a for a in node.args if not a.star]
        return args[0].value if args else None
    return None


def _other_optimizer(ctx, step, unscaled: cst.BaseExpression) -> bool:
    """The step steps an optimizer other than `unscaled`: both are plain names (or `self.` attributes)
    written differently, neither assigned from the other in the step's scope (`opt_b = opt_a` makes
    one object of two names)."""
    text = ctx.code_for(unscaled)
    subject = step.subject
    plain = re.compile(r"(self\.)?[A-Za-z_]\w*")
    if not subject or not plain.fullmatch(subject) or not plain.fullmatch(text) or subject == text:
        return False
    for name, other in ((subject, text), (text, subject)):
        if "." in name:
            continue
        for binding in step.scope.lookup(name):
            if binding.value is not None and ctx.code_for(binding.value) == other:
                return False
    return True


def _scaler_optional(ctx, clip, scaled) -> bool:
    """The scaled backward sits under an `if` that the clip is not under (`if scaler is not None:`):
    an unconditional `scaler.unscale_` there would fail when the scaler is off."""
    around_clip = set(ctx.index.ancestors(clip.anchor))
    return any(isinstance(a, cst.If) and a not in around_clip
               for event in scaled for a in ctx.index.ancestors(event.anchor) if a is not clip.node)


def _insert_unscale(ctx, clip, unscale: str) -> FixSpec | None:
    """Put `scaler.unscale_(opt)` on its own line right above the clip's statement, when the clip
    is (the value of) the only statement on its line and runs once per update with one optimizer."""
    index = ctx.index
    statement = index.enclosing_statement(clip.node)
    value = getattr(statement, "value", None)
    if not isinstance(statement, (cst.Expr, cst.Assign, cst.AnnAssign)) or value is not clip.node:
        return None
    line = index.parent(statement)
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    indent = ""
    for ancestor in index.ancestors(line):
        if isinstance(ancestor, cst.IndentedBlock):
            indent = (ancestor.indent if ancestor.indent is not None else ctx.module.default_indent) + indent
        elif isinstance(ancestor, cst.SimpleStatementSuite):
            return None
    return FixSpec(f"Call `{unscale}` before clipping", safe=False,
                   replacements=((statement, f"{unscale}\n{indent}{ctx.code_for(statement)}"),))



def _accelerator_clip(ctx, clip, framework: str | None) -> FixSpec | None:
    """`accelerator.clip_grad_norm_(...)` in place of `torch.nn.utils.clip_grad_norm_(...)` (same
    arguments; Accelerate unscales first). Only for Accelerate: Fabric's `clip_gradients` takes
    other arguments."""
    func = clip.node.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    if not framework or name not in ("clip_grad_norm_", "clip_grad_value_") or clip.via:
        return None
    if not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*(\.[A-Za-z_][A-Za-z_0-9]*)*", framework):
        return None
    bindings = ctx.index.module_scope.bindings.values()
    if not any(b.kind == "import" and (b.qualname or "").startswith("accelerate") for group in bindings for b in group):
        return None
    resolved = ctx.index.resolve(func, clip.scope) or ""
    if not resolved.startswith("torch.nn.utils"):
        return None
    return FixSpec(f"Clip with `{framework}.{name}`, which unscales first", safe=False,
                   replacements=((func, f"{framework}.{name}"),))
