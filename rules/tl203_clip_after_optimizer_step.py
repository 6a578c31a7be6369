"""TL203 clip-after-optimizer-step."""

from __future__ import annotations

from trainlint.model.amp import (BACKWARDS, CLIP, OPTIMIZER_STEPS, SCALER_STEP, amp_model, describe, measures_only,
                           per_update)
from trainlint.model.amp import CLIP_NAMES
from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.fixkit import move_line, own_line
from trainlint.rule import Rule, bad, good
from trainlint.model.premises import premise
from trainlint.model.proofs import accumulation_premises, loop_premises, role_premise, unit_premises


class ClipAfterOptimizerStep(Rule):
    code = "TL203"
    name = "clip-after-optimizer-step"
    severity = Severity.ERROR
    summary = "Gradient clipping after the optimizer step of the same update: it changes nothing"
    message = "gradients are clipped after the optimizer has already applied them"
    triggers = ("clip_grad", "clip_gradients")
    gate = named(CLIP_NAMES)
    what_it_does = """
        Flags a clipping call (`torch.nn.utils.clip_grad_norm_`, `clip_grad_value_`,
        `clip_grads_with_norm_`, `accelerator.clip_grad_norm_`, `fabric.clip_gradients`, a model's
        `clip_grad_norm_`) that runs after `opt.step()` or `scaler.step(opt)` and before the next
        backward: in the same update, once the step has used the gradients.

        The order is read as the loop runs: a clip at the top of an iteration whose gradients come
        from the previous iteration's backward, before this iteration's step, is in order and not
        flagged. A clip that runs on every micro-batch under accumulation is TL202, not this rule.
        """
    why_bad = """
        `opt.step()` reads `.grad` when it is called. Clipping afterwards rescales gradients that
        have already been applied, and the next `zero_grad()` (or `set_to_none`) throws them away, so
        the run trains completely unclipped while the code and the logged norm suggest otherwise.
        The first loss spike that clipping was meant to absorb goes straight into the weights (and,
        with Adam, into the moment estimates for many steps). Clip after the last backward of the
        update and before the step: `scaler.unscale_(opt)` (with fp16 AMP), clip, `scaler.step(opt)`
        or `opt.step()`, then `zero_grad`.
        """
    fix_safety = """
        Unsafe: clipping before the step changes every update; if the clip after the step is
        deliberate, the fix changes the run.
        """
    references = (
        "https://pytorch.org/docs/stable/generated/torch.nn.utils.clip_grad_norm_.html",
        "https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping",
        "https://pytorch.org/docs/stable/optim.html#taking-an-optimization-step",
    )
    examples = (
        bad(
            """
            import torch

            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            """,
            line=8,
            fixed="""
            import torch

            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
                optimizer.step()
            """,
            title="clip after the step, before the next iteration's zero_grad",
        ),
        bad(
            """
            import torch

            def train(model, loader, opt, sched):
                model.train()
                for it, batch in enumerate(loader):
                    loss = model(**batch).loss
                    loss.backward()
                    opt.step()
                    sched.step()
                    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.zero_grad(set_to_none=True)
                    if it % 100 == 0:
                        print(it, loss.item(), gnorm.item())
            """,
            line=10,
            fixed="""
            import torch

            def train(model, loader, opt, sched):
                model.train()
                for it, batch in enumerate(loader):
                    loss = model(**batch).loss
                    loss.backward()
                    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
                    sched.step()
                    opt.zero_grad(set_to_none=True)
                    if it % 100 == 0:
                        print(it, loss.item(), gnorm.item())
            """,
            title="norm computed for logging after the step",
        ),
        bad(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            for step, (x, y) in enumerate(loader):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = loss_fn(model(x), y)
                scaler.scale(loss).backward()
                scaler.unscale_(optim)
                scaler.step(optim)
                scaler.update()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optim.zero_grad(set_to_none=True)
            """,
            line=11,
            title="AMP: unscale_ then step, clip last",
        ),
        bad(
            """
            from accelerate import Accelerator

            accelerator = Accelerator()
            model, opt, loader = accelerator.prepare(model, opt, loader)
            for batch in loader:
                outputs = model(**batch)
                accelerator.backward(outputs.loss)
                opt.step()
                opt.zero_grad()
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            """,
            line=10,
            fixed="""
            from accelerate import Accelerator

            accelerator = Accelerator()
            model, opt, loader = accelerator.prepare(model, opt, loader)
            for batch in loader:
                outputs = model(**batch)
                accelerator.backward(outputs.loss)
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad()
            """,
            title="Accelerate: clip after step and zero_grad",
        ),
        bad(
            """
            import torch
            import torch.nn as nn

            class Trainer:
                def __init__(self, model, optimizer, max_norm):
                    self.model, self.optimizer, self.max_norm = model, optimizer, max_norm

                def optimizer_step(self):
                    self.optimizer.step()
                    nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
                    self.optimizer.zero_grad()

                def fit(self, loader):
                    for x, y in loader:
                        loss = nn.functional.mse_loss(self.model(x), y)
                        loss.backward()
                        self.optimizer_step()
            """,
            line=10,
            title="inside the Trainer's step helper",
        ),
        good(
            """
            import torch

            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
                optimizer.step()
            """,
            title="clip between backward and step",
        ),
        good(
            """
            import torch

            grad_accum = 4
            for it, (x, y) in enumerate(loader):
                if it > 0 and it % grad_accum == 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                loss = criterion(model(x), y) / grad_accum
                loss.backward()
            """,
            title="update at the top of the iteration, on the previous iterations' gradients",
        ),
        good(
            """
            import torch

            for real, _ in loader:
                d_loss = d_criterion(netD, netG, real)
                d_loss.backward()
                optD.step()
                optD.zero_grad()
                g_loss = g_criterion(netD, netG, real)
                g_loss.backward()
                torch.nn.utils.clip_grad_norm_(netG.parameters(), 5.0)
                optG.step()
                optG.zero_grad()
            """,
            title="GAN: the generator's clip follows its own backward",
        ),
        good(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = loss_fn(model(x), y)
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(opt)
                scaler.update()
                opt.zero_grad(set_to_none=True)
                log(grad_norm)
            """,
            title="the returned norm is logged after the step; the clip itself ran before it",
        ),
        good(
            """
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=8)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    if accelerator.sync_gradients:
                        accelerator.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="Accelerate accumulation with the clip guarded by sync_gradients",
        ),
        good(
            """
            import torch

            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
                optimizer.zero_grad(set_to_none=True)
                logger.log({"loss": loss.item(), "grad_norm": total_norm.item()}, step=step)
            """,
            title="max_norm=inf only measures the norm for the logs",
        ),
        good(
            """
            import torch

            for src, tgt in loader:
                loss = seq2seq_loss(encoder, decoder, src, tgt)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(encoder.parameters(), 1.0)
                enc_opt.step()
                torch.nn.utils.clip_grad_norm_(decoder.parameters(), 1.0)
                dec_opt.step()
                enc_opt.zero_grad()
                dec_opt.zero_grad()
            """,
            title="two optimizers: the decoder's clip precedes the decoder's step",
        ),
    )

    def check(self, ctx):
        model = ctx.model(amp_model)
        for unit in model.units:
            for clip in unit.of_kind(CLIP):
                if measures_only(clip) or not per_update(model, unit, clip):
                    continue  # a norm for the logs; a per-micro-batch clip is TL202
                found = unit.nearest_before(clip, *BACKWARDS, *OPTIMIZER_STEPS)
                if found is None or found.kind not in OPTIMIZER_STEPS:
                    continue
                later = unit.nearest_after(clip, *BACKWARDS, *OPTIMIZER_STEPS)
                if later is not None and later.kind in OPTIMIZER_STEPS and later is not found:
                    continue  # another optimizer of the update steps after it (encoder/decoder optimizers)
                step = describe(found.node, ctx)
                scaler = ctx.code_for(found.node.func.value) if found.kind == SCALER_STEP else None
                advice = (f"after `{scaler}.unscale_({found.subject})` and before `{step}`" if scaler
                          else f"between the backward and `{step}`")
                yield self.report(
                    clip.node,
                    f"`{describe(clip.node, ctx)}` runs after `{step}` in the same update: the step has "
                    f"already applied the unclipped gradients, so this clip changes nothing; clip {advice}",
                    _fix(ctx, clip, found),
                    evidence=[*unit_premises(ctx, unit),
                              premise(f"`{step}` runs before the clip in the same update", found.node, "call"),
                              premise("no backward runs between that step and this clip", clip.node, "call")],
                )


def _fix(ctx, clip, step):
    """Move the clip's line to just above `opt.step()` (the same block, only calls between).
    Not for `scaler.step(opt)`: the clip would then also need `scaler.unscale_(opt)` first."""
    if step.kind == SCALER_STEP or clip.via or step.via:
        return None
    line, anchor = own_line(ctx.index, clip.node, assign=True), own_line(ctx.index, step.node)
    if line is None or anchor is None:
        return None
    return move_line(ctx.module, ctx.index, line, anchor, "before",
                     f"Move the clip before `{describe(step.node, ctx)}`", safe=False)
