"""TL204 grad-scaler-misuse."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model.amp import (BACKWARD, SCALE, SCALED_BACKWARD, SCALER_STEP, SCALER_UPDATE, STEP, amp_model,
                           describe)
from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.model.index import positional_args, walk
from trainlint.rule import Rule, bad, good
from trainlint.model.premises import premise
from trainlint.model.proofs import accumulation_premises, loop_premises, role_premise, unit_premises


class GradScalerMisuse(Rule):
    code = "TL204"
    name = "grad-scaler-misuse"
    severity = Severity.ERROR
    summary = "A GradScaler used half-way: `opt.step()` on scaled gradients, or `scaler.step` without `scaler.update()`"
    message = "the GradScaler is not used through scaler.step(opt) and scaler.update()"
    triggers = ("scaler", "Scaler")
    gate = named("^step$") & named("scaler", re.IGNORECASE)  # a step and a GradScaler
    what_it_does = """
        In a training loop (or an update function) that uses a GradScaler, flags:
        - `opt.step()` called directly when the backward ran on `scaler.scale(loss)` and the update has
          no `scaler.step(opt)`;
        - `scaler.step(opt)` in a loop that never calls `scaler.update()` (not a loop whose every
          iteration steps a different optimizer, `scaler.step(optims[key])` for the loop's `key`,
          with `scaler.update()` once after it: PyTorch's pattern for several optimizers);
        - `scaler.step(opt)` in a loop whose backward runs on the plain loss, with no `scaler.scale`
          anywhere in the update.

        A loop with both an AMP branch (`scaler.step(opt)`) and a plain branch (`opt.step()`) is not
        flagged; neither are Accelerate or Fabric loops, which own their scaler. PaddlePaddle's
        `scaler.minimize(opt, scaled_loss)` (on a `paddle.amp.GradScaler`, known from the framework
        model) unscales, steps and updates in one call: it counts as the scaler's step and update.
        """
    why_bad = """
        `scaler.scale(loss)` multiplies the loss by the current scale (65536 at the start), so every
        gradient is that many times too large. `scaler.step(opt)` divides them back, skips the step
        when they contain inf/NaN, and records that for `scaler.update()`, which then lowers or raises
        the scale. Calling `opt.step()` directly applies gradients 65536 times too large (SGD
        diverges; Adam hides most of it but weight decay, clipping and any inf do not), and never
        skips an overflowed step, so one inf turns the weights into NaN. Without `scaler.update()` the
        scale never adapts and the scaler's per-step state is never reset: the second
        `scaler.step(opt)` raises, or, with the call in a rarely taken branch, overflowed steps keep
        being skipped. Stepping through the scaler without scaling the loss divides correct gradients
        by the scale: the model barely moves.
        """
    references = (
        "https://pytorch.org/docs/stable/amp.html#gradient-scaling",
        "https://pytorch.org/docs/stable/notes/amp_examples.html#typical-mixed-precision-training",
        "https://pytorch.org/docs/stable/amp.html#torch.amp.GradScaler.step",
    )
    examples = (
        good(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            head_optimizers = {name: torch.optim.AdamW(head.parameters(), lr=1e-3) for name, head in heads.items()}


            def update_heads(features, targets):
                for name in heads:
                    head_opt = head_optimizers[name]
                    head_opt.zero_grad()
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = torch.nn.functional.mse_loss(heads[name](features), targets[name])
                    scaler.scale(loss).backward()
                    scaler.step(head_opt)
                scaler.update()
            """,
            title="one scaler, a different optimizer each iteration, one update() after the loop (torch's multi-optimizer pattern)",
        ),
        bad(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            shared_opt = torch.optim.AdamW(heads.parameters(), lr=1e-3)


            def update_heads(features, targets):
                for name in heads:
                    shared_opt.zero_grad()
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = torch.nn.functional.mse_loss(heads[name](features), targets[name])
                    scaler.scale(loss).backward()
                    scaler.step(shared_opt)
                scaler.update()
            """,
            line=13,
            title="the same optimizer stepped on every iteration before the one update(): the second step raises",
        ),
        bad(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = criterion(model(x), y)
                scaler.scale(loss).backward()
                opt.step()
            """,
            line=9,
            title="opt.step() after a scaled backward",
        ),
        bad(
            """
            import torch
            from accelerate import Accelerator

            def baseline(model, optimizer, loader):
                scaler = torch.amp.GradScaler("cuda")
                for batch in loader:
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = model(**batch).loss
                    scaler.scale(loss).backward()
                    optimizer.step()
                    optimizer.zero_grad()

            def with_accelerate(model, optimizer, loader):
                accelerator = Accelerator(mixed_precision="fp16")
                model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
                for batch in loader:
                    accelerator.backward(model(**batch).loss)
                    optimizer.step()
                    optimizer.zero_grad()

            for trial in range(3):
                baseline(*make_run(trial))
                with_accelerate(*make_run(trial))
            """,
            line=10,
            title="a sweep over two training functions: only the one that scales without the scaler's step is wrong",
        ),
        bad(
            """
            import torch
            from torch.cuda.amp import GradScaler, autocast

            class Trainer:
                def __init__(self, model, optimizer, scheduler):
                    self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
                    self.scaler = GradScaler()

                def train(self, loader):
                    for batch in loader:
                        with autocast():
                            loss = self.model(**batch).loss
                        self.scaler.scale(loss).backward()
                        self.scaler.step(self.optimizer)
                        self.scheduler.step()
                        self.optimizer.zero_grad()
            """,
            line=14,
            title="scaler.step without scaler.update()",
        ),
        bad(
            """
            import torch

            def train(model, loader, optim, grad_accum):
                scaler = torch.amp.GradScaler("cuda")
                for micro_step, (x, y) in enumerate(loader):
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = model(x, y) / grad_accum
                    scaled = scaler.scale(loss)
                    scaled.backward()
                    if (micro_step + 1) % grad_accum == 0:
                        optim.step()
                        optim.zero_grad(set_to_none=True)
            """,
            line=11,
            title="scaled loss bound to a name; the step in the accumulation guard",
        ),
        bad(
            """
            import torch

            scaler = torch.cuda.amp.GradScaler()
            for it, batch in enumerate(train_loader):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(**batch).loss
                loss.backward()
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
            """,
            line=8,
            title="stepping through the scaler without scaling the loss",
        ),
        bad(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")

            def train_step(model, opt, x, y):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad()
                return loss.detach()
            """,
            line=10,
            title="an update function called from elsewhere",
        ),
        good(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = criterion(model(x), y)
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            """,
            title="scale, step through the scaler, update",
        ),
        good(
            """
            import torch

            def train(model, loader, opt, use_amp):
                scaler = torch.amp.GradScaler("cuda") if use_amp else None
                for x, y in loader:
                    with torch.autocast("cuda", dtype=torch.float16, enabled=use_amp):
                        loss = model(x, y)
                    if scaler is not None:
                        scaler.scale(loss).backward()
                        scaler.step(opt)
                        scaler.update()
                    else:
                        loss.backward()
                        opt.step()
                    opt.zero_grad(set_to_none=True)
            """,
            title="an AMP branch and a plain branch",
        ),
        good(
            """
            import torch

            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = criterion(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
            """,
            title="bf16 autocast needs no scaler: opt.step() is right",
        ),
        good(
            """
            import torch

            class Trainer:
                def __init__(self, model, optimizer):
                    self.model, self.optimizer = model, optimizer
                    self.scaler = torch.amp.GradScaler("cuda")

                def backward(self, loss):
                    self.scaler.scale(loss).backward()

                def step(self):
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                    self.optimizer.zero_grad(set_to_none=True)

                def fit(self, loader):
                    for x, y in loader:
                        with torch.autocast("cuda", dtype=torch.float16):
                            loss = self.model(x, y)
                        self.backward(loss)
                        self.step()
            """,
            title="scale, step and update spread over Trainer methods",
        ),
        good(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            for step, batch in enumerate(loader):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(**batch).loss / 4
                scaler.scale(loss).backward()
                if (step + 1) % 4 == 0:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad(set_to_none=True)
            """,
            title="scaler.step and update inside the accumulation guard",
        ),
    )

    def check(self, ctx):
        model = ctx.model(amp_model)
        for unit in model.units:
            scaler_steps = unit.of_kind(SCALER_STEP)
            if unit.has(SCALED_BACKWARD) and not scaler_steps:
                for step in unit.of_kind(STEP):
                    if step.engine or step.has_args:
                        continue
                    opt = step.subject
                    scaler = unit.of_kind(SCALED_BACKWARD)[0].subject
                    yield self.report(
                        step.node,
                        f"`{opt}.step()` applies gradients of `{scaler}.scale(...)` that are still "
                        f"multiplied by the loss scale and never skips an overflowed step: use "
                        f"`{scaler}.step({opt})` followed by `{scaler}.update()`",
                        evidence=[*unit_premises(ctx, unit),
                                  premise(f"the backward runs on `{scaler}.scale(...)`: the gradients are scaled",
                                          unit.of_kind(SCALED_BACKWARD)[0].node, "call"),
                                  premise(f"the update steps `{opt}` itself, not through the scaler", step.node,
                                          "call")],
                    )
            if unit.loop is None:
                continue  # the caller may scale the loss or update the scaler
            for step in scaler_steps:
                scaler = ctx.code_for(step.node.func.value)
                if not unit.has(SCALER_UPDATE) and not step.updates:
                    if _one_step_per_optimizer(ctx, unit, step):
                        continue  # each optimizer stepped once, one update after the loop: torch's pattern
                    yield self.report(
                        step.node,
                        f"`{describe(step.node, ctx)}` without `{scaler}.update()` in the loop: the scale "
                        f"never adapts and the next `{scaler}.step(...)` raises; call `{scaler}.update()` "
                        f"once per update, after the step",
                        evidence=[*unit_premises(ctx, unit),
                                  premise(f"`{describe(step.node, ctx)}` steps through the scaler", step.node, "call"),
                                  premise(f"no `{scaler}.update()` runs in the loop or the helpers it calls",
                                          unit.node, "use")],
                    )
                elif not unit.has(SCALE, SCALED_BACKWARD) and self._plain_backwards_only(unit):
                    backward = unit.of_kind(BACKWARD)[0]
                    loss = ctx.code_for(backward.node.func.value)
                    yield self.report(
                        step.node,
                        f"`{describe(step.node, ctx)}` divides the gradients by the loss scale, but the "
                        f"backward ran on `{describe(backward.node.func.value, ctx)}`, not "
                        f"`{scaler}.scale({loss})`: the update is that many times too small; use "
                        f"`{scaler}.scale({loss}).backward()`",
                        evidence=[*unit_premises(ctx, unit),
                                  premise(f"`{describe(step.node, ctx)}` unscales by the loss scale", step.node, "call"),
                                  premise(f"the backward runs on `{loss}`, never scaled", backward.node, "call")],
                    )

    @staticmethod
    def _plain_backwards_only(unit) -> bool:
        """Every backward is `<tensor>.backward()` on a local loss (not `accelerator.backward(loss)`
        and not a loss handed in by a caller that may have scaled it)."""
        backwards = unit.of_kind(BACKWARD)
        if not backwards:
            return False
        for event in backwards:
            call = event.node
            if positional_args(call) or not isinstance(call.func, cst.Attribute):
                return False
            if call.func.attr.value != "backward":
                return False
            receiver = call.func.value
            if isinstance(receiver, cst.Name):
                bindings = event.scope.lookup(receiver.value)
                if not bindings or any(b.kind == "param" for b in bindings):
                    return False
        return True


def _one_step_per_optimizer(ctx, unit, step) -> bool:
    """`for key in keys: ... scaler.step(optims[key])` (or `for opt in optims: scaler.step(opt)`), then
    `scaler.update()` after the loop in the same function: each iteration steps a different optimizer
    (chosen by the loop variable) and the scale is updated once after all of them, the pattern of
    PyTorch's "multiple optimizers" AMP example. A second `scaler.step` of one optimizer before the
    update, the only one that raises, is not shown."""
    loop = unit.loop.node
    if not isinstance(loop, cst.For) or step.via:
        return False
    index = ctx.index
    targets = {n.value for n in walk(loop.target) if isinstance(n, cst.Name)}
    args = positional_args(step.node)
    if not args or not targets:
        return False
    stepped = args[0].value
    if isinstance(stepped, cst.Name) and stepped.value not in targets:
        bindings = step.scope.lookup(stepped.value)
        if not bindings or not all(b.kind == "assign" and b.value is not None and
                                   any(a is loop for a in index.ancestors(b.node)) for b in bindings):
            return False
        values = [b.value for b in bindings]
    else:
        values = [stepped]
    for value in values:
        if isinstance(value, cst.Name) and value.value in targets:
            continue
        if not (isinstance(value, cst.Subscript) and any(
                isinstance(n, cst.Name) and n.value in targets for e in value.slice for n in walk(e.slice))):
            return False
    scaler = ctx.code_for(step.node.func.value)
    function = index.function_at(loop)
    end = index.place[loop]
    for site in index.calls:
        call = site.node
        if site.function is function and index.place[call] > end and \
                not any(a is loop for a in index.ancestors(call)) and \
                isinstance(call.func, cst.Attribute) and call.func.attr.value == "update" and \
                ctx.code_for(call.func.value) == scaler:
            return True
    return False
