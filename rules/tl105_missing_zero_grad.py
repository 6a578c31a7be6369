"""TL105 missing-zero-grad."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model.amp import BACKWARDS, OPTIMIZER_STEPS, STEP, ZERO_GRAD, amp_model, describe
from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.model.dataflow import dataflow
from trainlint.model.index import dotted_name, positional_args, walk
from trainlint.model.loop_counters import at_most_once
from trainlint.model.roles import roles as roles_model
from trainlint.fixkit import block_of, dotted, line_holding, position_of, update_anchor
from trainlint.rule import FixSpec, Rule, after, bad, before, good
from trainlint.model.premises import premise
from trainlint.model.proofs import loop_premises


class MissingZeroGrad(Rule):
    code = "TL105"
    name = "missing-zero-grad"
    severity = Severity.ERROR
    summary = "A training loop that steps the optimizer but never clears gradients"
    message = "gradients are never cleared, so they add up across updates"
    triggers = (".step(",)
    gate = named("^step$")  # what it reports is an optimizer step
    what_it_does = """
        Flags the optimizer step (`opt.step()` or `scaler.step(opt)`) of a training loop in which
        nothing clears gradients: no `opt.zero_grad()`/`model.zero_grad()` (with or without
        `set_to_none`), no `p.grad = None` or `del p.grad`, no `p.grad.zero_()`, neither in the loop
        body nor in a function or method of the same file that the loop calls.

        Clearing anywhere in the loop counts (at the top of the iteration, after the step, or once per
        update inside the accumulation guard). Clearing only before the loop, or only in an outer
        epoch loop, does not, unless the loop steps in at most one iteration of each pass: under a
        test on its counter that holds once (`if micro == K - 1:`, the `else` of `if lo + step <
        rows:` over `range(0, rows, step)`, `if not mid:` after `mid = i < len(chunks) - 1`); then a clear in
        the enclosing loop, or before the loop in a function that holds no loop around it, starts
        every update afresh. Engines that own backward and step together (`engine.backward(loss);
        engine.step()` in DeepSpeed) and `opt.step(closure)` (whose closure clears) are not flagged;
        nor is an optimizer built in every iteration over tensors that iteration made anew
        (`x = latents.detach().clone()`, then `SGD([x])`): a new tensor's `.grad` starts empty (a
        tensor made once before the loop is the same object every time: flagged).
        A framework's own clear counts too (framework data: NVIDIA Warp's `tape.zero()` on a
        `wp.Tape`, which holds the gradients its `tape.backward(loss)` wrote).
        """
    why_bad = """
        `backward()` adds into `.grad`; it never overwrites. Without a clear, update n applies the sum
        of the gradients of updates 1..n: the first steps look fine, then the effective step grows
        without bound and momentum-based optimizers go off in the direction of the running sum. The
        loss often still decreases for a while, so the bug survives a smoke test. Start every update
        window with `opt.zero_grad(set_to_none=True)` (or clear right after the step).
        """
    fix_safety = """
        Unsafe: the added clear changes every step after the first; if the gradients are meant
        to add up across steps, the fix stops that.
        """
    references = (
        "https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html",
        "https://pytorch.org/tutorials/recipes/recipes/zeroing_out_gradients.html",
        "https://pytorch.org/docs/stable/notes/autograd.html#gradient-accumulation",
    )
    examples = (
        good(
            """
            import torch


            def refine(denoiser, latents, steps, guidance):
                for t in range(steps):
                    probe = latents.detach().clone()
                    probe.requires_grad_(True)
                    opt = torch.optim.SGD([probe], lr=guidance)
                    energy = denoiser(probe, t).pow(2).mean()
                    energy.backward()
                    opt.step()
                    latents = denoiser(probe.detach(), t)
                return latents
            """,
            title="each iteration steps a new optimizer over a tensor it has just made: its `.grad` starts empty",
        ),
        bad(
            """
            import torch


            def refine(denoiser, latents, steps, guidance):
                probe = latents.detach().clone()
                probe.requires_grad_(True)
                for t in range(steps):
                    opt = torch.optim.SGD([probe], lr=guidance)
                    energy = denoiser(probe, t).pow(2).mean()
                    energy.backward()
                    opt.step()
                return denoiser(probe.detach(), steps)
            """,
            line=11,
            fixed="""
            import torch


            def refine(denoiser, latents, steps, guidance):
                probe = latents.detach().clone()
                probe.requires_grad_(True)
                for t in range(steps):
                    opt = torch.optim.SGD([probe], lr=guidance)
                    energy = denoiser(probe, t).pow(2).mean()
                    opt.zero_grad()
                    energy.backward()
                    opt.step()
                return denoiser(probe.detach(), steps)
            """,
            title="the optimizer is rebuilt each iteration, but over a tensor made once before the loop: "
                  "its `.grad` keeps adding up",
        ),
        good(
            """
            import warp as wp
            from warp_nn.optimizers import Adam

            optimizer = Adam(policy.parameters(), lr=3e-4)
            for update in range(updates):
                with wp.Tape() as tape:
                    loss = policy.loss(observations, returns)
                tape.backward(loss)
                optimizer.step()
                tape.zero()
            """,
            title="NVIDIA Warp: `tape.zero()` clears what the tape's backward wrote",
        ),
        bad(
            """
            import torch

            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            """,
            line=7,
            fixed="""
            import torch

            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            for x, y in loader:
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
            title="plain loop without zero_grad",
        ),
        bad(
            """
            import torch

            def train(model, loader, epochs):
                opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
                opt.zero_grad()
                for epoch in range(epochs):
                    for batch in loader:
                        loss = model(**batch).loss
                        loss.backward()
                        opt.step()
            """,
            line=10,
            fixed="""
            import torch

            def train(model, loader, epochs):
                opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
                opt.zero_grad()
                for epoch in range(epochs):
                    for batch in loader:
                        loss = model(**batch).loss
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
            """,
            title="cleared once before training",
        ),
        bad(
            """
            import torch

            class Trainer:
                def __init__(self, model, lr):
                    self.model = model
                    self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
                    self.scaler = torch.amp.GradScaler("cuda")

                def step(self, x, y):
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = torch.nn.functional.mse_loss(self.model(x), y)
                    self.scaler.scale(loss).backward()
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                    return loss.item()

                def fit(self, loader):
                    for x, y in loader:
                        self.step(x, y)
            """,
            line=13,
            title="Trainer step method with AMP",
        ),
        bad(
            """
            import torch

            grad_accum = 8
            for epoch in range(num_epochs):
                for it, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y) / grad_accum
                    loss.backward()
                    if (it + 1) % grad_accum == 0:
                        optim.step()
                        sched.step()
                model.zero_grad()
            """,
            line=9,
            fixed="""
            import torch

            grad_accum = 8
            for epoch in range(num_epochs):
                for it, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y) / grad_accum
                    loss.backward()
                    if (it + 1) % grad_accum == 0:
                        optim.step()
                        optim.zero_grad()
                        sched.step()
                model.zero_grad()
            """,
            title="cleared only once per epoch",
        ),
        good(
            """
            import torch

            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            for x, y in loader:
                optimizer.zero_grad(set_to_none=True)
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            """,
            title="zero_grad at the top of the iteration",
        ),
        good(
            """
            import torch

            grad_accum = 8
            for it, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / grad_accum
                loss.backward()
                if (it + 1) % grad_accum == 0:
                    optim.step()
                    optim.zero_grad(set_to_none=True)
            """,
            title="cleared once per update inside the accumulation guard",
        ),
        good(
            """
            import torch

            params = [p for p in model.parameters() if p.requires_grad]
            for step, batch in enumerate(loader):
                loss = model(**batch).loss
                loss.backward()
                opt.step()
                for p in params:
                    p.grad = None
            """,
            title="set_to_none by hand",
        ),
        good(
            """
            import torch

            def reset_grads(model):
                for param in model.parameters():
                    if param.grad is not None:
                        param.grad.detach_()
                        param.grad.zero_()

            for x, y in loader:
                reset_grads(net)
                loss = criterion(net(x), y)
                loss.backward()
                optimizer.step()
            """,
            title="a same-file helper that zeroes .grad in place",
        ),
        good(
            """
            import deepspeed

            model_engine, optimizer, _, _ = deepspeed.initialize(model=model, config=ds_config)
            for batch in loader:
                loss = model_engine(batch)
                model_engine.backward(loss)
                model_engine.step()
            """,
            title="a DeepSpeed engine clears its own gradients in step()",
        ),
        good(
            """
            class Trainer:
                def __init__(self, accelerator, model, optimizer, lr_scheduler):
                    self.accelerator, self.model = accelerator, model
                    self.optimizer, self.lr_scheduler = optimizer, lr_scheduler

                def _clear_grads(self):
                    self.model.zero_grad(set_to_none=True)

                def train_epoch(self, loader):
                    for batch in loader:
                        loss = self.model(**batch).loss
                        self.accelerator.backward(loss)
                        self.optimizer.step()
                        self.lr_scheduler.step()
                        self._clear_grads()
            """,
            title="model.zero_grad in a Trainer method the loop calls",
        ),
        good(
            """
            import torch

            for step in range(max_steps):
                optimizer.zero_grad(set_to_none=True)
                for micro_step in range(grad_accum):
                    loss = model(*get_batch()) / grad_accum
                    loss.backward()
                    if micro_step == grad_accum - 1:
                        optimizer.step()
            """,
            title="the inner loop is one update; the outer loop clears once per update",
        ),
        bad(
            """
            import torch

            opt_d = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
            opt_g = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
            for real, _ in loader:
                fake = netG(torch.randn(real.size(0), 100, 1, 1))
                loss_d = bce(netD(real), ones) + bce(netD(fake.detach()), zeros)
                loss_d.backward()
                opt_d.step()
                netG.zero_grad()
                loss_g = bce(netD(fake), ones)
                loss_g.backward()
                opt_g.step()
            """,
            line=9,
            fixed="""
            import torch

            opt_d = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
            opt_g = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
            for real, _ in loader:
                fake = netG(torch.randn(real.size(0), 100, 1, 1))
                loss_d = bce(netD(real), ones) + bce(netD(fake.detach()), zeros)
                opt_d.zero_grad()
                loss_d.backward()
                opt_d.step()
                netG.zero_grad()
                loss_g = bce(netD(fake), ones)
                loss_g.backward()
                opt_g.step()
            """,
            title="a GAN clears the generator only; the discriminator's gradients pile up",
        ),
        good(
            """
            import torch

            opt_d = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
            opt_g = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
            for real, _ in loader:
                fake = netG(torch.randn(real.size(0), 100, 1, 1))
                netD.zero_grad()
                loss_d = bce(netD(real), ones) + bce(netD(fake.detach()), zeros)
                loss_d.backward()
                opt_d.step()
                opt_g.zero_grad()
                loss_g = bce(netD(fake), ones)
                loss_g.backward()
                opt_g.step()
            """,
            title="each of the two optimizers is cleared, one by its network, one by itself",
        ),
        good(
            """
            import torch

            opt_d = torch.optim.Adam(netD.parameters(), lr=2e-4)
            opt_g = torch.optim.Adam(netG.parameters(), lr=2e-4)
            for real, _ in loader:
                for p in params_to_reset:
                    p.grad = None
                loss_d = critic_loss(netD, netG, real)
                loss_d.backward()
                opt_d.step()
                loss_g = generator_loss(netD, netG, real)
                loss_g.backward()
                opt_g.step()
            """,
            title="a clear whose reach cannot be told counts for every optimizer",
        ),
        bad(
            """
            import torch

            def fit(net, batches, scheduler):
                scheduler.zero_grad()  # once, before training: the wrapper owns the optimizer
                for inputs, labels in batches:
                    torch.nn.functional.l1_loss(net(inputs), labels).backward()
                    scheduler.step()
            """,
            line=7,
            fixed="""
            import torch

            def fit(net, batches, scheduler):
                scheduler.zero_grad()  # once, before training: the wrapper owns the optimizer
                for inputs, labels in batches:
                    scheduler.zero_grad()
                    torch.nn.functional.l1_loss(net(inputs), labels).backward()
                    scheduler.step()
            """,
            title="a wrapper called scheduler that owns the optimizer, cleared only once before the loop",
        ),
        good(
            """
            def update(policy, optimizer, rollout, chunks):
                optimizer.zero_grad(set_to_none=True)
                for n, chunk in enumerate(chunks):
                    mid_window = n < len(chunks) - 1
                    loss = policy(rollout[chunk]).mean() / len(chunks)
                    loss.backward()
                    if not mid_window:
                        optimizer.step()
            """,
            title="one step per call, on the last chunk only, after a clear at the top of the call",
        ),
        bad(
            """
            def update(policy, optimizer, rollout, chunks, epochs):
                optimizer.zero_grad(set_to_none=True)
                for epoch in range(epochs):
                    for n, chunk in enumerate(chunks):
                        mid_window = n < len(chunks) - 1
                        loss = policy(rollout[chunk]).mean() / len(chunks)
                        loss.backward()
                        if not mid_window:
                            optimizer.step()
            """,
            line=9,
            fixed="""
            def update(policy, optimizer, rollout, chunks, epochs):
                optimizer.zero_grad(set_to_none=True)
                for epoch in range(epochs):
                    for n, chunk in enumerate(chunks):
                        mid_window = n < len(chunks) - 1
                        loss = policy(rollout[chunk]).mean() / len(chunks)
                        loss.backward()
                        if not mid_window:
                            optimizer.step()
                            optimizer.zero_grad()
            """,
            title="the same last-chunk step, but every epoch repeats the pass with no clear in between",
        ),
        good(
            """
            import torch

            optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
            for batch in loader:
                net.zero_grad()
                rows = batch.size(0)
                for lo in range(0, rows, micro):
                    piece = batch[lo:lo + micro]
                    (net(piece).mean() * piece.size(0) / rows).backward()
                    if lo + micro >= rows:
                        optimizer.step()
            """,
            title="slices of a batch: the step runs on the slice that reaches the end, once per batch",
        ),
        bad(
            """
            import torch

            optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
            for batch in loader:
                net.zero_grad()
                rows = batch.size(0)
                for lo in range(0, rows, micro):
                    piece = batch[lo:lo + micro]
                    (net(piece).mean() * piece.size(0) / rows).backward()
                    if lo + 2 * micro >= rows:
                        optimizer.step()
            """,
            line=11,
            fixed="""
            import torch

            optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
            for batch in loader:
                net.zero_grad()
                rows = batch.size(0)
                for lo in range(0, rows, micro):
                    piece = batch[lo:lo + micro]
                    (net(piece).mean() * piece.size(0) / rows).backward()
                    if lo + 2 * micro >= rows:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            title="a test the last two slices pass: the second step applies the first one's gradients again",
        ),
    )

    def check(self, ctx):
        model = ctx.model(amp_model)
        for unit in model.units:
            if unit.loop is None:
                continue
            cleared = _cleared_optimizers(ctx, unit) if unit.has(ZERO_GRAD) else set()
            if cleared is None:
                continue  # something clears that we cannot attribute: every optimizer may be cleared
            if not cleared and _one_update_per_pass(ctx, unit) and (
                    _outer_loop_clears(ctx, model, unit) or _cleared_before_each_call(ctx, model, unit)):
                continue  # one update per pass of the loop, and a clear before every pass
            reported = set()
            for step in unit.of_kind(*OPTIMIZER_STEPS):
                if step.has_args and step.kind == STEP:
                    continue  # `opt.step(closure)`: the closure clears
                if step.engine or step.subject in reported or step.subject in cleared:
                    continue
                if _new_tensors_each_iteration(ctx, unit, step):
                    continue  # its tensors are made anew each iteration: their `.grad` starts empty
                reported.add(step.subject)
                what = "never clears gradients"
                if cleared:
                    others = ", ".join(f"`{c.subject}`" for c in unit.of_kind(ZERO_GRAD))
                    what = f"never clears `{step.subject}`'s gradients (it clears only {others})"
                yield self.report(
                    step.node,
                    f"`{describe(step.node, ctx)}` runs in a loop that {what}: each "
                    f"backward adds into `.grad`, so every update applies the sum of all earlier "
                    f"gradients; call `{_clear_advice(step)}` once per update",
                    _fix(ctx, unit, step),
                    evidence=[*loop_premises(ctx, unit.loop),
                              premise(f"no call in the loop or the helpers it runs clears `{step.subject}`'s "
                                      f"gradients (`zero_grad()`, `p.grad = None`)", unit.node, "use")],
                )


def _new_tensors_each_iteration(ctx, unit, step) -> bool:
    """The stepped optimizer is built in every iteration over a list of tensors that the same
    iteration made anew (`x = latents.detach().clone()`, `torch.zeros(...)`) before it: a new
    tensor's `.grad` is empty, so what a step applies is that iteration's backward alone. Every
    binding of the optimizer and of each tensor is in the loop, unconditional in its iteration
    (`x = self.latents` or a tensor made once before the loop is the same object every time)."""
    receiver = step.node.func.value if step.kind == STEP else (
        positional_args(step.node)[0].value if positional_args(step.node) else None)
    if not isinstance(receiver, cst.Name):
        return False
    flow = ctx.model(dataflow)
    loop = unit.node
    built = flow.bindings_in_function(receiver.value, step.node)
    if not built or not all(_every_iteration(ctx, loop, b) and isinstance(b.value, cst.Call) for b in built):
        return False
    for binding in built:
        args = positional_args(binding.value)
        params = args[0].value if args else None
        if not isinstance(params, (cst.List, cst.Tuple)) or not params.elements:
            return False
        for element in params.elements:
            name = element.value
            if not isinstance(name, cst.Name):
                return False
            made = flow.bindings_in_function(name.value, binding.node)
            if not made or not all(_every_iteration(ctx, loop, b) and flow.before(b.node, binding.node)
                                   and _new_tensor(ctx, b.value, b.node) for b in made):
                return False
    return True


def _every_iteration(ctx, loop, binding) -> bool:
    """A plain assignment in `loop`'s body that nothing in the iteration can skip."""
    if binding.kind != "assign" or binding.value is None:
        return False
    for ancestor in ctx.index.ancestors(binding.node):
        if ancestor is loop:
            return True
        if isinstance(ancestor, (*_CONDITIONAL, cst.Try, cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
    return False


# methods that return a new tensor object (its `.grad` empty), and those that may hand back their receiver
_NEW_TENSOR_METHODS = frozenset({"detach", "clone"})
_SAME_OBJECT_METHODS = frozenset({"requires_grad_", "to", "cuda", "float", "double", "half", "contiguous"})
_NEW_TENSOR_FUNCTIONS = frozenset({"tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint",
                                   "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
                                   "randn_like", "arange", "linspace", "from_numpy"})


def _new_tensor(ctx, value, at) -> bool:
    """`value` makes a new tensor object: `.detach()`, `.clone()`, a torch factory (moved or cast,
    or `requires_grad_()` on it, at most)."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
            and value.func.attr.value in _SAME_OBJECT_METHODS:
        value = value.func.value
    if not isinstance(value, cst.Call):
        return False
    if isinstance(value.func, cst.Attribute) and value.func.attr.value in _NEW_TENSOR_METHODS:
        return True
    qualname = ctx.index.resolve(value.func, ctx.index.scope_at(at)) or ""
    return qualname.startswith("torch.") and qualname.rsplit(".", 1)[-1] in _NEW_TENSOR_FUNCTIONS


def _cleared_optimizers(ctx, unit) -> set[str] | None:
    """With several optimizers in one loop (a GAN), which of them the loop's clears reach: an
    optimizer's own `zero_grad()`, or `net.zero_grad()` of a network it was built on. None when
    any clear may reach all of them (one optimizer, or a clear of unknown reach)."""
    steps = [e for e in unit.of_kind(*OPTIMIZER_STEPS)]
    subjects = {e.subject for e in steps}
    if len(subjects) < 2:
        return None
    roles = ctx.model(roles_model)
    modules = {}
    for step in steps:
        receiver = step.node.func.value if step.kind == STEP else positional_args(step.node)[0].value \
            if positional_args(step.node) else None
        found = roles.optimized_modules(receiver, step.scope) if receiver is not None else None
        if found is None:
            return None
        modules[step.subject] = found
    cleared = set()
    for clear in unit.of_kind(ZERO_GRAD):
        owners = {s for s, mods in modules.items() if clear.subject == s or clear.subject in mods}
        if not owners:
            return None  # `p.grad = None`, `model.zero_grad()` of a model we cannot tie to one
        cleared |= owners
    return cleared


def _one_update_per_pass(ctx, unit) -> bool:
    """Every optimizer step of the loop runs in at most one iteration of a pass of it: under an
    `if` (or its `else`) whose test holds once at most, read from the loop's counter (`if micro ==
    K - 1:`, `else:` of `if ex + step < stop:` over `range(0, stop, step)`, `if not is_accumulating:`
    with `is_accumulating = i < len(batches) - 1` over `enumerate(batches)`). Then what a pass adds
    to `.grad` is stepped once, and a clear before each pass starts every update afresh."""
    steps = unit.of_kind(*OPTIMIZER_STEPS)
    if not steps or unit.loop is None or not isinstance(unit.loop.node, cst.For):
        return False
    flow = ctx.model(dataflow)
    return all(_step_once_per_pass(ctx, flow, unit.loop.node, step.anchor) for step in steps)


def _step_once_per_pass(ctx, flow, loop, node) -> bool:
    child = node
    for ancestor in ctx.index.ancestors(node):
        if ancestor is loop or isinstance(ancestor, _REPEATING):
            return False  # reached the loop (or a nested one) with no such test
        if isinstance(ancestor, cst.If) and child is not ancestor.test:
            if at_most_once(flow, loop, ancestor.test, child is ancestor.body):
                return True
        child = ancestor
    return False


_REPEATING = (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)
# what may skip a statement it holds (a clear under one of these may not run before the pass)
_CONDITIONAL = (cst.If, cst.Else, cst.ExceptHandler, cst.IfExp, cst.BooleanOperation, cst.For, cst.While)


def _outer_loop_clears(ctx, model, unit) -> bool:
    ancestors = set(ctx.index.ancestors(unit.node))
    for outer in model.units:
        if outer.loop is not None and outer.node in ancestors:
            if any(e.kind == ZERO_GRAD and unit.node not in ctx.index.ancestors(e.anchor) for e in outer.events):
                return True
    return False


def _cleared_before_each_call(ctx, model, unit) -> bool:
    """The loop is in no other loop of its function (or module), and a clear runs before it on
    every path of that function's body: each call of the function clears, then runs one pass."""
    loop = unit.node
    holder = None
    ancestors = []
    for ancestor in ctx.index.ancestors(loop):
        if isinstance(ancestor, (cst.For, cst.While, cst.ClassDef, cst.Lambda)):
            return False  # an enclosing loop repeats the pass: `_outer_loop_clears` answers
        ancestors.append(ancestor)
        if isinstance(ancestor, (cst.FunctionDef, cst.Module)):
            holder = ancestor
            break
    if holder is None:
        return False
    flow = ctx.model(dataflow)
    around = set(map(id, ancestors))
    scope = ctx.index.scope_at(loop) if isinstance(holder, cst.FunctionDef) else ctx.index.module_scope
    body = holder.body if isinstance(holder, cst.FunctionDef) else holder
    for event in model.events_in(body, scope):
        if event.kind != ZERO_GRAD or event.loops or not flow.before(event.anchor, loop):
            continue
        path = []
        for ancestor in ctx.index.ancestors(event.anchor):
            if id(ancestor) in around:
                break
            path.append(ancestor)
        if not any(isinstance(a, _CONDITIONAL) for a in path):
            return True
    return False


def _clear_advice(step) -> str:
    return f"{step.subject}.zero_grad(set_to_none=True)"


def _fix(ctx, unit, step) -> FixSpec | None:
    """`opt.zero_grad()` on its own line before the first backward of the update (the first since
    the previous optimizer step, in the block that holds the step); under accumulation, right
    after the optimizer step instead."""
    subject = step.subject
    if step.via or not subject or dotted(ctx.module, cst.parse_expression(subject)) != subject:
        return None
    index, loop = ctx.index, unit.loop
    title = f"Call `{subject}.zero_grad()` once per update"
    if loop.accumulates:
        anchor = update_anchor(index, loop)
        if anchor is None or loop.step_calls[0].node is not step.node:
            return None
        return FixSpec(title, safe=False, lines=(after(anchor, f"{subject}.zero_grad()"),))
    if _one_update_per_pass(ctx, unit):
        # the pass accumulates into one step: clear right after it, where the update ends
        line = line_holding(index, step.node) if not step.via else None
        return FixSpec(title, safe=False, lines=(after(line, f"{subject}.zero_grad()"),)) if line is not None else None
    if _window_guard_without_step(loop):
        return None  # `if (i + 1) % K == 0:` holding the clip, the step outside it: which clock is meant?
    first = None
    for event in unit.events:
        if event is step:
            break
        if event.kind in OPTIMIZER_STEPS:
            first = None  # the backward of an earlier update (a GAN's other network)
        elif event.kind in BACKWARDS and first is None and not event.via:
            first = event
    line = line_holding(index, first.node) if first is not None else None
    block = block_of(index, line) if line is not None else None
    where = position_of(index, block, step.node) if block is not None else None
    if where is None or where <= position_of(index, block, line):
        return None
    return FixSpec(title, safe=False, lines=(before(line, f"{subject}.zero_grad()"),))


def _window_guard_without_step(loop) -> bool:
    """The loop body has an `if ... % ...:` that handles gradients (a clip, an unscale) but does
    not hold the optimizer step: an accumulation window left without its update. A periodic
    `if i % 500 == 0:` that logs or saves samples is no window."""
    body = getattr(loop.node, "body", None)
    for statement in getattr(body, "body", ()):
        if isinstance(statement, cst.If) and any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)
                                                 for n in walk(statement.test)):
            inside = list(walk(statement.body))
            handles_gradients = any(isinstance(n, cst.Call) and _GRADIENT_CALL.search(dotted_name(n.func) or "")
                                    for n in inside)
            if handles_gradients and not any(n is ref.node for ref in loop.step_calls for n in inside):
                return True
    return False


_GRADIENT_CALL = re.compile(r"clip_grad|unscale_|zero_grad")
