"""TL202 clip-per-micro-batch."""

from __future__ import annotations

from trainlint.model.amp import BACKWARDS, CLIP, OPTIMIZER_STEPS, amp_model, describe, measures_only, per_update
from trainlint.model.amp import CLIP_NAMES
from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.rule import Rule, bad, good
from trainlint.model.shipped import k_condition
from trainlint.model.training import training_model
from trainlint.model.window_sums import clears_stepped, engine_stepped, engine_zero_stage
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import accumulation_premises, loop_premises, role_premise, unit_premises


class ClipPerMicroBatch(Rule):
    code = "TL202"
    name = "clip-per-micro-batch"
    severity = Severity.ERROR
    summary = "Under gradient accumulation, clipping on every micro-batch instead of once per update"
    message = "gradients are clipped on every micro-batch, on a partial sum of the window"
    triggers = ("clip_grad", "clip_gradients")
    gate = named(CLIP_NAMES)
    what_it_does = """
        Under accumulation (the backward runs on every micro-batch while the optimizer step is
        guarded by `if (i + 1) % K == 0:`, `if micro % K: continue`, a nested micro-batch loop, or
        `with accelerator.accumulate(model):`), flags a clipping call that runs on every micro-batch
        rather than once per update: outside the guarded branch, before the `continue` guard, inside
        the micro-batch loop, or inside `accelerator.accumulate` without
        `if accelerator.sync_gradients:`. Quiet when the gradients the loop steps are cleared on
        every micro-batch (`TrainingModel.micro_batch_clears`, the fact TL104 reports, of the
        stepped optimizer or of a module it was built on): `.grad` then never holds a partial sum
        of the window for the clip to cut, whether the clear runs before the clip or after it (the
        accumulation is broken another way). A clear under a test (`if i % K == 0:`) or of another
        optimizer (a GAN critic's) does not count.

        When K is 1 as the code ships (an argparse option, a config/dataclass field or a parameter
        that defaults to 1, `cfg.get("accum", 1)`, `ACCUM = 1`), nothing accumulates until someone
        raises it: the finding then says it holds only when K is set above 1 and is reported one
        severity lower (warning).

        When a DeepSpeed engine owns the update (`deepspeed.initialize`), `.grad` holds the window's
        partial sum only under ZeRO stage 0 or 1: stage 2 and 3 move the gradients into the
        engine's partitioned buffers on every backward. The stage is read from the configuration
        dict literal handed to `initialize` (no `zero_optimization`: stage 0); a configuration the
        code does not show (a JSON file) leaves the premise unknown (`--include-unproven`).
        """
    why_bad = """
        `clip_grad_norm_` rescales the whole `.grad`, which at that point holds the sum of the window
        so far. Clipping it on every micro-batch clips partial sums: an early micro-batch's
        contribution is shrunk once per later clip while the last one is shrunk once, so the window's
        gradient is no longer the (clipped) gradient of the large batch, and the threshold is compared
        with norms of 1/K, 2/K, ... of the window rather than with the update's norm. The logged norm
        is the norm of a partial sum. With fp16 AMP it is worse: `scaler.unscale_(opt)` may run only
        once per update, so an unscale per micro-batch raises, and Accelerate's `clip_grad_norm_`
        unscales on each call. Clip once, after the last backward of the window and before the step.
        """
    references = (
        "https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-accumulation",
        "https://huggingface.co/docs/accelerate/usage_guides/gradient_accumulation",
        "https://pytorch.org/docs/stable/generated/torch.nn.utils.clip_grad_norm_.html",
    )
    examples = (
        good(
            """
            import torch

            for i, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
            """,
            title="the gradients are cleared on every micro-batch (TL104's finding): the clip sees one "
                  "micro-batch's gradient, no partial sum of a window",
        ),
        bad(
            """
            import torch

            optimizer.zero_grad()
            for i, (x, y) in enumerate(loader):
                loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            line=7,
            title="cleared only after the step: the clip on each micro-batch cuts the window's partial sum",
        ),
        bad(
            """
            import torch

            grad_accum = 4
            for it, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / grad_accum
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if (it + 1) % grad_accum == 0:
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            """,
            line=7,
            title="clip before the accumulation guard",
        ),
        bad(
            """
            import torch

            def train(model, loader, optim, accumulation_steps=8, max_norm=1.0):
                for micro_step, batch in enumerate(loader):
                    loss = model(**batch).loss / accumulation_steps
                    loss.backward()
                    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                    if (micro_step + 1) % accumulation_steps != 0:
                        continue
                    optim.step()
                    optim.zero_grad()
            """,
            line=7,
            title="clip before a continue guard",
        ),
        bad(
            """
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=4)
            model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
            for batch in loader:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
            """,
            line=9,
            title="Accelerate accumulate block without a sync_gradients guard",
        ),
        bad(
            """
            import torch

            class Trainer:
                def __init__(self, model, opt, grad_accum):
                    self.model, self.opt, self.grad_accum = model, opt, grad_accum

                def train_step(self, batches):
                    for micro_batch in batches:
                        loss = self.model(micro_batch) / self.grad_accum
                        loss.backward()
                        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                    self.opt.step()
                    self.opt.zero_grad(set_to_none=True)

                def fit(self, loader):
                    for batches in loader:
                        self.train_step(batches)
            """,
            line=11,
            title="clip inside the micro-batch loop of a Trainer step",
        ),
        bad(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            for i, (x, y) in enumerate(loader):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = criterion(model(x), y) / 2
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if (i + 1) % 2 == 0:
                    scaler.step(opt)
                    scaler.update()
                    opt.zero_grad()
            """,
            line=9,
            title="AMP: unscale_ and clip on every micro-batch",
        ),
        bad(
            """
            import torch

            def train_step(model, optimizer, micro_batches, max_norm=1.0):
                optimizer.zero_grad(set_to_none=True)
                for input_ids, labels in micro_batches:
                    loss = model(input_ids, labels=labels).loss / len(micro_batches)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()
            """,
            line=8,
            title="an update function that clips inside its micro-batch loop",
        ),
        good(
            """
            import torch

            grad_accum = 4
            for it, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / grad_accum
                loss.backward()
                if (it + 1) % grad_accum == 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            """,
            title="clip inside the guarded update",
        ),
        good(
            """
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=4)
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
            title="Accelerate: clip only when gradients are synchronised",
        ),
        good(
            """
            import torch

            for x, y in loader:
                opt.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
            """,
            title="no accumulation: every batch is an update",
        ),
        good(
            """
            import torch

            def train(model, loader, optim, grad_accum):
                for micro_step, batch in enumerate(loader):
                    loss = model(**batch).loss / grad_accum
                    loss.backward()
                    if (micro_step + 1) % grad_accum != 0:
                        continue
                    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optim.step()
                    optim.zero_grad(set_to_none=True)
            """,
            title="clip after the continue guard",
        ),
        good(
            """
            import torch

            for step in range(max_steps):
                for micro in range(grad_accum):
                    x, y = get_batch("train")
                    loss = model(x, y) / grad_accum
                    loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            """,
            title="nanoGPT style: clip after the micro-batch loop",
        ),
        good(
            """
            import torch

            class Trainer:
                def __init__(self, model, opt):
                    self.model, self.opt = model, opt

                def train_step(self, batches):
                    for micro_batch in batches:
                        loss = self.model(micro_batch)
                        loss.backward()
                        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                        self.opt.step()
                        self.opt.zero_grad(set_to_none=True)

                def fit(self, loader):
                    for batches in loader:
                        self.train_step(batches)
            """,
            title="the same Trainer step, but every batch of the drawn group is an update of its own",
        ),
        bad(
            """
            import torch


            def train(model, loader, optimizer, accum_steps=1, max_norm=1.0):
                for i, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                    if (i + 1) % accum_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            line=8,
            title="K a parameter that defaults to 1: reported as conditional on K > 1",
            severity=Severity.WARNING,
        ),
        good(
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
            title="the stepped optimizer's zero_grad() opens every micro-batch: the clip sees one micro-batch's gradient, no window sum",
        ),
        bad(
            """
            import torch

            gen, critic = build_gen(), build_critic()
            opt_g = torch.optim.Adam(gen.parameters(), lr=1e-4)
            opt_c = torch.optim.Adam(critic.parameters(), lr=1e-4)
            accum = 4
            for i, z in enumerate(loader):
                opt_c.zero_grad()
                loss = -critic(gen(z)).mean() / accum
                loss.backward()
                torch.nn.utils.clip_grad_norm_(gen.parameters(), 1.0)
                if (i + 1) % accum == 0:
                    opt_g.step()
                    opt_g.zero_grad()
            """,
            line=11,
            title="the clear on every micro-batch is another optimizer's (the critic's): the generator's window still sums",
        ),
        bad(
            """
            import torch

            model = build_model()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            accum = 4
            for i, (x, y) in enumerate(loader):
                if i % accum == 0:
                    optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y) / accum
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if (i + 1) % accum == 0:
                    optimizer.step()
            """,
            line=11,
            title="the clear runs only at a window's start (under `if i % accum == 0:`): the clip sees a partial sum",
        ),
        good(
            """
            import deepspeed
            import torch

            ds_config = {
                "train_micro_batch_size_per_gpu": 4,
                "gradient_accumulation_steps": 8,
                "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}},
            }
            engine, _, _, _ = deepspeed.initialize(config=ds_config, model=net, model_parameters=net.parameters())
            for i, batch in enumerate(loader):
                loss = engine(**batch).loss / 8
                engine.backward(loss)
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                if (i + 1) % 8 == 0:
                    engine.step()
            """,
            title="a DeepSpeed engine configured with ZeRO stage 2: every backward moves the gradients out of `.grad` into its partitions, so the clip sees no window sum",
        ),
        bad(
            """
            import deepspeed
            import torch

            ds_config = {
                "train_micro_batch_size_per_gpu": 4,
                "gradient_accumulation_steps": 8,
                "zero_optimization": {"stage": 1},
            }
            engine, _, _, _ = deepspeed.initialize(config=ds_config, model=net, model_parameters=net.parameters())
            for i, batch in enumerate(loader):
                loss = engine(**batch).loss / 8
                engine.backward(loss)
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                if (i + 1) % 8 == 0:
                    engine.step()
            """,
            line=13,
            title="the same engine configured with ZeRO stage 1: `.grad` keeps the window's partial sum and the clip cuts it",
        ),
        good(
            """
            import json

            import deepspeed
            import torch

            ds_config = json.load(open("ds_config.json"))
            engine, _, _, _ = deepspeed.initialize(config=ds_config, model=net, model_parameters=net.parameters())
            for i, batch in enumerate(loader):
                loss = engine(**batch).loss / 8
                engine.backward(loss)
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                if (i + 1) % 8 == 0:
                    engine.step()
            """,
            title="the engine's configuration read from a JSON file: whether `.grad` holds a window sum is unknown (reported with --include-unproven only)",
        ),
    )

    def check(self, ctx):
        model = ctx.model(amp_model)
        for unit in model.units:
            loop = unit.loop
            if loop is None:
                yield from self._check_update_function(ctx, unit)
                continue
            if not loop.innermost or not loop.accumulates or loop.guard is None:
                continue
            # the stepped gradients are cleared on every micro-batch (TL104): no partial sum to clip
            if clears_stepped(model.training, loop, ctx.model(training_model).micro_batch_clears(loop)):
                continue
            for clip in unit.of_kind(CLIP):
                if measures_only(clip) or per_update(model, unit, clip):
                    continue
                # an engine (DeepSpeed) owns the gradients: under ZeRO stage 2 or 3 they leave `.grad`
                # for its partitioned buffers on every backward, so `.grad` holds no window sum
                engine = engine_stepped(model.training, loop)
                stage = engine_zero_stage(model.training, engine) if engine is not None else None
                if stage is not None and stage >= 2:
                    continue
                held = []
                if engine is not None:
                    text = ("`.grad` holds the window's partial sum: the engine's configuration "
                            f"({'ZeRO stage ' + str(stage) if stage is not None else 'its ZeRO stage'})")
                    held = [premise(text + " keeps the gradients in `.grad`", engine.node, "construction")
                            if stage is not None else
                            unknown(text + " is not in the code: under ZeRO stage 2 or 3 the engine moves them "
                                    "to its partitioned buffers on every backward", engine.node, "construction")]
                yield self.report_if(
                    k_condition(ctx, loop),
                    clip.node,
                    f"`{describe(clip.node, ctx)}` runs on every micro-batch but the optimizer steps "
                    f"{_window(ctx, loop.guard)}: it clips a partial sum of the window; "
                    f"{_advice(loop.guard)}",
                    evidence=[*accumulation_premises(ctx, loop),
                              premise("the clip is not under the update's guard: it runs on every micro-batch",
                                      clip.node, "call"), *held],
                )


    def _check_update_function(self, ctx, unit):
        """A function that runs one update: a clip inside its micro-batch loop (the loop that holds
        the backward) while the step comes after that loop."""
        steps = unit.of_kind(*OPTIMIZER_STEPS)
        backwards = unit.of_kind(*BACKWARDS)
        for clip in unit.of_kind(CLIP):
            if not clip.loops or measures_only(clip):
                continue
            micro_loop = clip.loops[-1]
            if not any(micro_loop in b.loops for b in backwards):
                continue
            if not steps or any(micro_loop in s.loops for s in steps):
                continue
            target = getattr(micro_loop, "target", None)
            over = f"for {describe(target, ctx, 20)} in {describe(micro_loop.iter, ctx, 30)}" \
                if target is not None else "the micro-batch loop"
            yield self.report(
                clip.node,
                f"`{describe(clip.node, ctx)}` runs on every micro-batch but the optimizer steps once "
                f"after the micro-batch loop (`{over}`): it clips a partial sum of the window; clip once "
                f"after the micro-batch loop, before the step",
                evidence=[*unit_premises(ctx, unit),
                          premise(f"the backward runs in the micro-batch loop (`{over}`)",
                                  next(b for b in backwards if micro_loop in b.loops).node, "call"),
                          premise("the clip runs inside that loop, the step after it", clip.node, "call")],
            )


def _window(ctx, guard) -> str:
    if guard.kind == "accelerate":
        return "once per `accelerator.accumulate` window"
    if guard.kind == "micro_loop":
        target = guard.node.target if hasattr(guard.node, "target") else None
        over = f"for {describe(target, ctx, 20)} in {describe(guard.condition, ctx, 30)}" if target is not None \
            else "the micro-batch loop"
        return f"once after the micro-batch loop (`{over}`)"
    if guard.condition is None:
        return "once per update"
    condition = describe(guard.condition, ctx, 40)
    if guard.kind == "continue":
        return f"only when `{condition}` does not skip to the next micro-batch"
    return f"only when `{condition}`"


def _advice(guard) -> str:
    if guard.kind == "accelerate":
        return "clip under `if accelerator.sync_gradients:`"
    if guard.kind == "micro_loop":
        return "clip once after the micro-batch loop, before the step"
    if guard.kind == "continue":
        return "clip after the `continue` guard, before the step"
    return "clip inside the guarded update, before the step"
