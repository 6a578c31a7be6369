"""TL102 accumulated-loss-not-scaled."""

from __future__ import annotations

import libcst as cst

from trainlint.model import frameworks
from trainlint.model.accumulation import MEAN, LossTracer, describe_k
from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.rule import FixSpec, Rule, bad, good
from trainlint.rules import rule_class
from trainlint.model.training import training_model
from trainlint.model.shipped import k_condition, k_fixed_at_one
from trainlint.model.index import keyword_arg, positional_args, walk
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import accumulation_premises, loop_premises, role_premise, training_premises


# the keywords that turn a pipeline schedule's gradient scaling off (`scale_grads`): trainlint/frameworks/*.toml
_SCALING_KEYWORDS = tuple(sorted({e.grad_scaling_keyword for e in frameworks.micro_batch_runners().values()}))


class AccumulatedLossNotScaled(Rule):
    code = "TL102"
    name = "accumulated-loss-not-scaled"
    severity = Severity.ERROR
    summary = "Under gradient accumulation, backward on a per-micro-batch mean loss that is not divided by K"
    message = "the accumulated gradient is K times too large: the mean loss is not divided by K"
    # a training loop: a backward and an optimizer step; or a pipeline schedule (trainlint/frameworks/
    # pipelining.toml) whose gradient scaling is turned off by its keyword, and its train step
    triggers = (("backward", "step("), *((keyword, "step(") for keyword in _SCALING_KEYWORDS))
    gate = (named("backward") | named("|".join(f"^{k}$" for k in _SCALING_KEYWORDS))) & named("^step$")
    what_it_does = """
        Finds training loops that accumulate gradients over K micro-batches (the backward runs on
        every iteration while the optimizer step is guarded, or the backward runs in a nested
        micro-batch loop; not an out-of-memory retry loop whose `try` breaks out on success) and flags the backward call when the loss it receives is a
        per-micro-batch mean (`criterion(out, y)`, `model(**batch).loss`, `F.cross_entropy(...)`)
        that is neither divided by K nor weighted by the window's sample or token count.

        The loss is followed through its assignments (`loss = loss / K`, `loss /= K`,
        `(loss / K).backward()`, `scaler.scale(loss / K)`) and into same-file helpers. A loss built
        by arithmetic on a mean is that mean: `criterion(out, y) + aux` adds a term, and
        `criterion(out, y) * alpha + reg` weights it by a factor that reads nothing K is computed
        from and nothing that changes between micro-batches (a literal, a setting such as
        `self.args.alpha` that no assignment of the file computes from K, a parameter every
        same-file caller passes such a value for), so the accumulated gradient still grows with
        K; a factor computed from K (`w = 1 / accum`), or one a caller the file does not show
        passes, may be the window's share and is left alone.
        `accelerator.backward(loss)` on an Accelerator created with `gradient_accumulation_steps`
        divides by K itself and is not flagged; sum-reduced losses (also a model or loss module of
        this file whose `forward` returns one: terms with `reduction="sum"` added up from a zero
        start, a term halved by a constant included) and losses weighted by anything the rule
        cannot read are left alone,
        and so is a loop that divides the accumulated gradients by K itself before the step
        (`p.grad /= K`), or one whose window is cleared between its micro-batches (a `zero_grad()`
        on every micro-batch, or under the update's condition before its last backward: TL104):
        no K gradients add up there, nor where a clear after a nested micro-batch loop comes before
        every step (a meta-update that clears the per-task gradients, then backpropagates the
        mean of the task losses). A clear under a test that can change between micro-batches
        (`if i == 0:`) leaves that premise unproven. A loss computed by a function of another
        project file is a mean only when every value it returns is one (`return F.mse_loss(a, b)`,
        `.mean()`); one that reduces as its caller's setting says (`.mean()` or `.sum()` by a
        `reduction` argument) is left alone.

        That the loss is a mean must show in the code: a `.mean()`, a loss function's default
        reduction, a same-file forward or helper (a dict it returns: `out["loss"]`), or a
        transformers model's loss. A model's own output from a forward that is not read
        (`out["loss"]`, `_, loss, _ = model(...)` of a module built elsewhere) may as well be a sum
        over its tokens: unproven (`--include-unproven`).

        A torch.distributed.pipelining schedule (`ScheduleGPipe`, `Schedule1F1B`,
        `ScheduleInterleaved1F1B`, `ScheduleLoopedBFS`, `ScheduleInterleavedZeroBubble`,
        `ScheduleZBVZeroBubble`, `ScheduleDualPipeV`; trainlint/frameworks/pipelining.toml) owns the
        accumulation of one `schedule.step(...)`: it runs the backward of `n_microbatches`
        micro-batches and, with `scale_grads` (the default), divides their summed gradients by their
        number, so its step is never reported for an undivided loss. Built with `scale_grads=False`
        and a `loss_fn` that returns a per-micro-batch mean (a `torch.nn.functional` loss, a torch
        loss module without `reduction="sum"`, a def or lambda of this file that returns one), the
        gradients of its micro-batch means add up undivided: the step that computes the loss (the
        one handed `target=`) is reported. A loss_fn that divides by `n_microbatches` itself, or
        one the code does not show (a wrapper that rescales it), is left alone.

        When K is 1 as the code ships (an argparse option, a config/dataclass field or a parameter
        that defaults to 1, `cfg.get("accum", 1)`, `ACCUM = 1`), nothing accumulates until someone
        raises it: the finding then says it holds only when K is set above 1 and is reported one
        severity lower (warning). When K is a parameter of a plain function that every call of it
        in the project binds to 1 (and the function is handed on as a value nowhere), nothing
        accumulates as the project runs, and nothing is reported.
        """
    why_bad = """
        `backward()` adds into `.grad`. Over a window of K micro-batches the accumulated gradient is
        the sum of K mean-loss gradients, which is K times the gradient of the mean over the whole
        window. Under SGD that multiplies the effective learning rate by K; Adam mostly hides the
        scale, but gradient-clipping thresholds, logged gradient norms and weight decay balance are
        all off by K, and changing K changes the training dynamics. Dividing each micro-batch mean
        by K (or the summed losses by the window's total count) makes the accumulated gradient
        equal to the large-batch gradient.
        """
    fix_safety = """
        Unsafe: dividing the loss changes every gradient; if the loss is already scaled
        elsewhere (in the criterion, in a wrapper), the fix makes the steps K times too small.
        Where the micro-batches can differ in size (a token-level loss, a short last window),
        `/ K` weighs them equally, which TL103 then reports; the fix's title says so.
        """
    references = (
        "https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-accumulation",
        "https://huggingface.co/docs/accelerate/usage_guides/gradient_accumulation",
        "https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html",
    )
    examples = (
        good(
            """
            import torch


            def run(net, opt, batches, window):
                for t, (a, b) in enumerate(batches):
                    err = torch.nn.functional.cross_entropy(net(a), b)
                    err.backward()
                    if (t + 1) % window == 0:
                        opt.step()
                        opt.zero_grad()


            def main(net, batches):
                opt = torch.optim.SGD(net.parameters(), lr=0.1)
                run(net, opt, batches, window=1)
            """,
            title="K is a parameter that the project's only call binds to 1: every micro-batch is an update",
        ),
        bad(
            """
            import torch


            def run(net, opt, batches, window):
                for t, (a, b) in enumerate(batches):
                    err = torch.nn.functional.cross_entropy(net(a), b)
                    err.backward()
                    if (t + 1) % window == 0:
                        opt.step()
                        opt.zero_grad()


            def main(net, batches, big):
                opt = torch.optim.SGD(net.parameters(), lr=0.1)
                run(net, opt, batches, window=1)
                run(net, opt, big, window=8)
            """,
            line=7,
            fixed="""
            import torch


            def run(net, opt, batches, window):
                for t, (a, b) in enumerate(batches):
                    err = torch.nn.functional.cross_entropy(net(a), b)
                    (err / window).backward()
                    if (t + 1) % window == 0:
                        opt.step()
                        opt.zero_grad()


            def main(net, batches, big):
                opt = torch.optim.SGD(net.parameters(), lr=0.1)
                run(net, opt, batches, window=1)
                run(net, opt, big, window=8)
            """,
            title="one call binds K to 1, another to 8: the second accumulates eight micro-batch means",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

            stage = PipelineStage(stage_module, pp_rank, pp_size, device)
            schedule = ScheduleGPipe(stage, n_microbatches=8, loss_fn=F.cross_entropy, scale_grads=False)
            for x, y in loader:
                optimizer.zero_grad()
                if pp_rank == 0:
                    schedule.step(x)
                elif pp_rank == pp_size - 1:
                    losses = []
                    schedule.step(target=y, losses=losses)
                else:
                    schedule.step()
                optimizer.step()
            """,
            line=13,
            title="a pipeline schedule built with `scale_grads=False` around a mean loss: its 8 micro-batch "
                  "gradients add up undivided",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F
            from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

            stage = PipelineStage(stage_module, pp_rank, pp_size, device)
            schedule = ScheduleGPipe(stage, n_microbatches=8, loss_fn=F.cross_entropy)
            for x, y in loader:
                optimizer.zero_grad()
                if pp_rank == 0:
                    schedule.step(x)
                elif pp_rank == pp_size - 1:
                    losses = []
                    schedule.step(target=y, losses=losses)
                    print(sum(loss.item() for loss in losses) / len(losses))
                else:
                    schedule.step()
                optimizer.step()
            """,
            title="the same schedule with `scale_grads` left at its default: it divides the summed gradients "
                  "by n_microbatches itself (and the mean of its per-micro-batch losses is the batch's loss)",
        ),
        good(
            """
            import torch
            from torch.distributed.pipelining import PipelineStage, Schedule1F1B

            criterion = torch.nn.CrossEntropyLoss(reduction="sum")
            stage = PipelineStage(stage_module, pp_rank, pp_size, device)
            schedule = Schedule1F1B(stage, n_microbatches=4, loss_fn=criterion, scale_grads=False)
            for x, y in loader:
                optimizer.zero_grad()
                schedule.step(x, target=y)
                optimizer.step()
            """,
            title="`scale_grads=False` around a sum-reduced loss: the setting the keyword is for",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F

            class Schedule1F1B:
                def __init__(self, model, optimizer, scale_grads=False):
                    self.model, self.optimizer = model, optimizer

                def step(self):
                    self.optimizer.step()

            schedule = Schedule1F1B(model, optimizer, scale_grads=False)
            for x, y in loader:
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                schedule.step()
            """,
            title="a class of the project's own that only shares the name: not torch's pipeline schedule",
        ),
        good(
            """
            import torch

            WINDOW = 4


            def train(net, opt, batches):
                for n, (x, y) in enumerate(batches):
                    last = (n + 1) % WINDOW == 0
                    if last:
                        opt.zero_grad()
                    torch.nn.functional.mse_loss(net(x), y).backward()
                    if last:
                        opt.step()
            """,
            title="the window's clear runs before its last backward (TL104's finding): only one micro-batch's "
                  "gradient reaches the step, not K of them",
        ),
        bad(
            """
            import torch

            WINDOW = 4


            def train(net, opt, batches):
                for n, (x, y) in enumerate(batches):
                    if n % WINDOW == 0:
                        opt.zero_grad()
                    torch.nn.functional.mse_loss(net(x), y).backward()
                    if (n + 1) % WINDOW == 0:
                        opt.step()
            """,
            line=10,
            fixed="""
            import torch

            WINDOW = 4


            def train(net, opt, batches):
                for n, (x, y) in enumerate(batches):
                    if n % WINDOW == 0:
                        opt.zero_grad()
                    (torch.nn.functional.mse_loss(net(x), y) / WINDOW).backward()
                    if (n + 1) % WINDOW == 0:
                        opt.step()
            """,
            title="the clear at the window's first micro-batch: the K mean-loss gradients add up",
        ),
        good(
            """
            import torch


            def fit_batch(model, optimizer, batch, micro_batch_size):
                optimizer.zero_grad()
                while micro_batch_size > 0:
                    try:
                        loss = model(batch).mean()
                        loss.backward()
                    except torch.cuda.OutOfMemoryError:
                        optimizer.zero_grad()
                        micro_batch_size //= 2
                    else:
                        break
                optimizer.step()
            """,
            title="an out-of-memory retry loop: one successful backward per step, nothing adds up",
        ),
        bad(
            """
            import torch


            def fit_batch(model, optimizer, micro_batches):
                optimizer.zero_grad()
                while micro_batches:
                    try:
                        loss = model(micro_batches.pop()).mean()
                        loss.backward()
                    except torch.cuda.OutOfMemoryError:
                        torch.cuda.empty_cache()
                optimizer.step()
            """,
            line=9,
            title="the same try/except with no `break` on success: every micro-batch's mean adds up",
        ),
        good(
            """
            import torch
            import torch.nn as nn
            import torch.nn.functional as F


            class Yolo_loss(nn.Module):
                def forward(self, xin, labels=None):
                    loss, loss_xy, loss_wh, loss_obj, loss_cls = 0, 0, 0, 0, 0
                    for output_id, output in enumerate(xin):
                        loss_xy += F.binary_cross_entropy(input=output[..., :2], target=labels[..., :2], reduction='sum')
                        loss_wh += F.mse_loss(input=output[..., 2:4], target=labels[..., 2:4], reduction='sum') / 2
                        loss_obj += F.binary_cross_entropy(input=output[..., 4], target=labels[..., 4], reduction='sum')
                        loss_cls += F.binary_cross_entropy(input=output[..., 5:], target=labels[..., 5:], reduction='sum')
                    loss = loss_xy + loss_wh + loss_obj + loss_cls
                    return loss, loss_xy, loss_wh, loss_obj, loss_cls


            def train(model, train_loader, optimizer, config):
                criterion = Yolo_loss()
                global_step = 0
                for i, batch in enumerate(train_loader):
                    global_step += 1
                    loss, loss_xy, loss_wh, loss_obj, loss_cls = criterion(model(batch[0]), batch[1])
                    loss.backward()
                    if global_step % config.subdivisions == 0:
                        optimizer.step()
                        model.zero_grad()
            """,
            title="a loss module that sums over the micro-batch's samples (reduction='sum', from a zero start): summed over the window too",
        ),
        bad(
            """
            import torch
            import torch.nn as nn
            import torch.nn.functional as F


            class Yolo_loss(nn.Module):
                def forward(self, xin, labels=None):
                    loss, loss_xy, loss_wh, loss_obj, loss_cls = 0, 0, 0, 0, 0
                    for output_id, output in enumerate(xin):
                        loss_xy += F.binary_cross_entropy(input=output[..., :2], target=labels[..., :2])
                        loss_wh += F.mse_loss(input=output[..., 2:4], target=labels[..., 2:4]) / 2
                        loss_obj += F.binary_cross_entropy(input=output[..., 4], target=labels[..., 4])
                        loss_cls += F.binary_cross_entropy(input=output[..., 5:], target=labels[..., 5:])
                    loss = loss_xy + loss_wh + loss_obj + loss_cls
                    return loss, loss_xy, loss_wh, loss_obj, loss_cls


            def train(model, train_loader, optimizer, config):
                criterion = Yolo_loss()
                global_step = 0
                for i, batch in enumerate(train_loader):
                    global_step += 1
                    loss, loss_xy, loss_wh, loss_obj, loss_cls = criterion(model(batch[0]), batch[1])
                    loss.backward()
                    if global_step % config.subdivisions == 0:
                        optimizer.step()
                        model.zero_grad()
            """,
            line=24,
            fixed="""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F


            class Yolo_loss(nn.Module):
                def forward(self, xin, labels=None):
                    loss, loss_xy, loss_wh, loss_obj, loss_cls = 0, 0, 0, 0, 0
                    for output_id, output in enumerate(xin):
                        loss_xy += F.binary_cross_entropy(input=output[..., :2], target=labels[..., :2])
                        loss_wh += F.mse_loss(input=output[..., 2:4], target=labels[..., 2:4]) / 2
                        loss_obj += F.binary_cross_entropy(input=output[..., 4], target=labels[..., 4])
                        loss_cls += F.binary_cross_entropy(input=output[..., 5:], target=labels[..., 5:])
                    loss = loss_xy + loss_wh + loss_obj + loss_cls
                    return loss, loss_xy, loss_wh, loss_obj, loss_cls


            def train(model, train_loader, optimizer, config):
                criterion = Yolo_loss()
                global_step = 0
                for i, batch in enumerate(train_loader):
                    global_step += 1
                    loss, loss_xy, loss_wh, loss_obj, loss_cls = criterion(model(batch[0]), batch[1])
                    (loss / config.subdivisions).backward()
                    if global_step % config.subdivisions == 0:
                        optimizer.step()
                        model.zero_grad()
            """,
            title="the same loss module with the default mean reduction: each micro-batch's mean adds up",
        ),
        bad(
            """
            import torch

            for i, (x, y) in enumerate(train_loader):
                loss = criterion(model(x), y)
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            line=5,
            fixed="""
            import torch

            for i, (x, y) in enumerate(train_loader):
                loss = criterion(model(x), y)
                (loss / accum_steps).backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="plain loop, loss not divided",
        ),
        bad(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            for it in range(max_iters):
                for micro_step in range(grad_accum):
                    x, y = get_batch("train")
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                    scaler.scale(loss).backward()
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(opt)
                scaler.update()
                opt.zero_grad(set_to_none=True)
            """,
            line=9,
            fixed="""
            import torch

            scaler = torch.amp.GradScaler("cuda")
            for it in range(max_iters):
                for micro_step in range(grad_accum):
                    x, y = get_batch("train")
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                    scaler.scale(loss / grad_accum).backward()
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(opt)
                scaler.update()
                opt.zero_grad(set_to_none=True)
            """,
            title="nested micro-batch loop with AMP",
        ),
        bad(
            """
            from transformers import AutoModelForSequenceClassification


            def train(model, loader, optim, sched, accumulation_steps):
                model.train()
                for step, batch in enumerate(loader):
                    outputs = model(**batch)
                    outputs.loss.backward()
                    if step % accumulation_steps != 0:
                        continue
                    optim.step()
                    sched.step()
                    optim.zero_grad()


            train(AutoModelForSequenceClassification.from_pretrained(args.model), loader, optim, sched, args.accum)
            """,
            line=8,
            fixed="""
            from transformers import AutoModelForSequenceClassification


            def train(model, loader, optim, sched, accumulation_steps):
                model.train()
                for step, batch in enumerate(loader):
                    outputs = model(**batch)
                    (outputs.loss / accumulation_steps).backward()
                    if step % accumulation_steps != 0:
                        continue
                    optim.step()
                    sched.step()
                    optim.zero_grad()


            train(AutoModelForSequenceClassification.from_pretrained(args.model), loader, optim, sched, args.accum)
            """,
            title="HF-style batch dict with a continue guard, for a transformers model (its loss a token mean)",
        ),
        bad(
            """
            import torch.nn.functional as F

            class Trainer:
                def compute_loss(self, batch):
                    logits = self.model(batch["x"])
                    return F.cross_entropy(logits, batch["y"])

                def fit(self):
                    for it, batch in enumerate(self.train_loader):
                        loss = self.compute_loss(batch)
                        loss.backward()
                        if (it + 1) % self.grad_accum == 0:
                            self.opt.step()
                            self.opt.zero_grad(set_to_none=True)
            """,
            line=11,
            fixed="""
            import torch.nn.functional as F

            class Trainer:
                def compute_loss(self, batch):
                    logits = self.model(batch["x"])
                    return F.cross_entropy(logits, batch["y"])

                def fit(self):
                    for it, batch in enumerate(self.train_loader):
                        loss = self.compute_loss(batch)
                        (loss / self.grad_accum).backward()
                        if (it + 1) % self.grad_accum == 0:
                            self.opt.step()
                            self.opt.zero_grad(set_to_none=True)
            """,
            title="Trainer class: the loss comes from a helper method",
        ),
        bad(
            """
            from accelerate import Accelerator
            from transformers import AutoModelForSequenceClassification

            accelerator = Accelerator()
            model = AutoModelForSequenceClassification.from_pretrained(args.model)
            model, opt, loader = accelerator.prepare(model, opt, loader)
            for micro_step, batch in enumerate(loader):
                loss = model(**batch).loss
                accelerator.backward(loss)
                if micro_step == accumulation_steps - 1 or (micro_step + 1) % accumulation_steps == 0:
                    opt.step()
                    opt.zero_grad()
            """,
            line=9,
            fixed="""
            from accelerate import Accelerator
            from transformers import AutoModelForSequenceClassification

            accelerator = Accelerator()
            model = AutoModelForSequenceClassification.from_pretrained(args.model)
            model, opt, loader = accelerator.prepare(model, opt, loader)
            for micro_step, batch in enumerate(loader):
                loss = model(**batch).loss
                accelerator.backward(loss / accumulation_steps)
                if micro_step == accumulation_steps - 1 or (micro_step + 1) % accumulation_steps == 0:
                    opt.step()
                    opt.zero_grad()
            """,
            title="manual accumulation around an Accelerator created without gradient_accumulation_steps",
        ),
        bad(
            """
            def update_window(model, optimizer, micro_batches, loss_fn):
                optimizer.zero_grad(set_to_none=True)
                for inputs, target in micro_batches:
                    loss = loss_fn(model(inputs), target)
                    loss.backward()
                optimizer.step()
            """,
            line=5,
            title="a function that runs one accumulation window (its caller lives elsewhere)",
        ),
        bad(
            """
            import torch.nn as nn
            import torch.nn.functional as F

            class TinyLM(nn.Module):
                def forward(self, idx, targets):
                    logits = self.head(self.body(idx))
                    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

            lm = TinyLM().cuda()
            for step in range(total_steps):
                for micro in range(grad_accum_steps):
                    idx, targets = next(batches)
                    lm(idx, targets).backward()
                optim.step()
                optim.zero_grad(set_to_none=True)
            """,
            line=13,
            fixed="""
            import torch.nn as nn
            import torch.nn.functional as F

            class TinyLM(nn.Module):
                def forward(self, idx, targets):
                    logits = self.head(self.body(idx))
                    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

            lm = TinyLM().cuda()
            for step in range(total_steps):
                for micro in range(grad_accum_steps):
                    idx, targets = next(batches)
                    (lm(idx, targets) / grad_accum_steps).backward()
                optim.step()
                optim.zero_grad(set_to_none=True)
            """,
            title="a model of this file whose forward returns a mean loss",
        ),
        bad(
            """
            import torch.distributed as dist

            for it in range(iters):
                for x, y in micro_batches(it):
                    loss = criterion(net(x), y)
                    loss.backward()
                for p in net.parameters():
                    dist.all_reduce(p.grad)
                    p.grad /= world_size
                opt.step()
                opt.zero_grad()
            """,
            line=6,
            title="the gradients are averaged over ranks, not over the window's micro-batches",
        ),
        good(
            """
            for step in range(num_steps):
                for micro in range(1, accumulation_steps + 1):
                    x, y = loader.next_batch()
                    loss = model(x, y)
                    loss.backward()
                for p in model.parameters():
                    p.grad /= accumulation_steps
                optimizer.step()
                model.zero_grad(set_to_none=True)
            """,
            title="the accumulated gradients are divided by K after the window, before the step",
        ),
        good(
            """
            import torch
            import torch.nn as nn
            import torch.nn.functional as F

            class Decoder(nn.Module):
                def forward(self, tokens, labels):
                    logits = self.out(self.blocks(self.embed(tokens)))
                    return F.cross_entropy(logits.view(labels.numel(), -1), labels.view(-1), reduction="sum")

            decoder = Decoder(vocab, width).cuda()
            decoder = torch.compile(decoder)
            for step in range(steps):
                tokens, labels = next(stream)
                for i in range(len(tokens) // mbs):
                    decoder(tokens[i * mbs:(i + 1) * mbs], labels[i * mbs:(i + 1) * mbs]).backward()
                for opt in optimizers:
                    opt.step()
                decoder.zero_grad(set_to_none=True)
            """,
            title="the model's own forward returns a summed loss: the window's gradient is a sum by design",
        ),
        good(
            """
            import torch

            for i, (x, y) in enumerate(train_loader):
                loss = criterion(model(x), y)
                loss = loss / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="`loss = loss / K` on its own line before backward",
        ),
        good(
            """
            def update_window(model, optimizer, batches, loss_fn):
                total = sum(len(target) for _, target in batches)
                optimizer.zero_grad(set_to_none=True)
                for inputs, target in batches:
                    loss = loss_fn(model(inputs), target)
                    (loss * len(target) / total).backward()
                optimizer.step()

            for step in range(num_updates):
                update_window(model, optimizer, next_window(), loss_fn)
            """,
            title="each micro-batch mean weighted by its share of the window",
        ),
        good(
            """
            import torch.nn.functional as F

            for step in range(num_updates):
                micro_batches = next(windows)
                n_tokens = sum(int((mb["labels"] != -100).sum()) for mb in micro_batches)
                for mb in micro_batches:
                    logits = model(mb["input_ids"])
                    loss = F.cross_entropy(logits.flatten(0, 1), mb["labels"].flatten(),
                                           ignore_index=-100, reduction="sum")
                    (loss / n_tokens).backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            """,
            title="reduction='sum' divided by the window's token count",
        ),
        good(
            """
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=8)
            model, optimizer, dl = accelerator.prepare(model, optimizer, dl)
            for batch in dl:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="accelerator.backward divides by gradient_accumulation_steps itself",
        ),
        good(
            """
            import torch

            for x, y in loader:
                optim.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optim.step()
            """,
            title="no accumulation: one batch per update",
        ),
        good(
            """
            import torch

            scaler = torch.cuda.amp.GradScaler()
            for i, batch in enumerate(loader):
                with torch.autocast("cuda"):
                    loss = model(**batch).loss / grad_accum
                scaler.scale(loss).backward()
                if (i + 1) % grad_accum == 0:
                    scaler.step(opt)
                    scaler.update()
                    opt.zero_grad()
            """,
            title="division inside the autocast block, AMP backward",
        ),
        good(
            """
            import torch.nn.functional as F

            x, y = next(windows)  # one update's worth of examples
            window = list(zip(x.split([12, 12, 8]), y.split([12, 12, 8])))
            total = len(x)  # examples in the whole window, counted before the loop
            for i, (xb, yb) in enumerate(window):
                loss = F.cross_entropy(model(xb), yb, reduction="sum") / total
                loss.backward()
                if (i + 1) % len(window) == 0:
                    opt.step()
                    opt.zero_grad()
            """,
            title="summed loss divided by the window's example count",
        ),
        bad(
            """
            import torch


            def train(model, loader, optimizer, accum_steps=1):
                for i, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    if (i + 1) % accum_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            line=7,
            fixed="""
            import torch


            def train(model, loader, optimizer, accum_steps=1):
                for i, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    (loss / accum_steps).backward()
                    if (i + 1) % accum_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            title="K a parameter that defaults to 1: reported as conditional on K > 1",
            severity=Severity.WARNING,
        ),
        good(
            """
            import torch


            def outer_update(net, opt, task_batches, loss_fn):
                losses = []
                for x, y in task_batches:
                    loss = loss_fn(net(x), y)
                    loss.backward(retain_graph=True)
                    losses.append(loss)
                opt.zero_grad()
                torch.stack(losses).mean().backward()
                opt.step()
            """,
            title="the per-task gradients are cleared after the task loop: only the mean's backward reaches the step",
        ),
        good(
            """
            import torch


            def train(model, loader, optimizer, accum=8):
                for i, batch in enumerate(loader):
                    out = model(batch)
                    out["loss"].backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            title="the model's own loss, from a module whose forward is not read: a mean or a sum over its tokens, "
                  "the code does not show which (unproven)",
        ),
        bad(
            """
            import torch


            def outer_update(net, opt, task_batches, loss_fn):
                losses = []
                for x, y in task_batches:
                    loss = loss_fn(net(x), y)
                    loss.backward(retain_graph=True)
                    losses.append(loss)
                torch.stack(losses).mean().backward()
                opt.step()
                opt.zero_grad()
            """,
            line=8,
            title="the clear comes after the step: the task loop's K mean gradients reach it",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            class Speller(torch.nn.Module):
                def __init__(self, vocab, dim):
                    super().__init__()
                    self.embed = torch.nn.Embedding(vocab, dim)
                    self.head = torch.nn.Linear(dim, vocab)

                def forward(self, batch):
                    logits = self.head(self.embed(batch["tokens"]))
                    return {"loss": F.cross_entropy(logits.flatten(0, 1), batch["targets"].flatten()), "logits": logits}


            def train(loader, accum=8):
                model = Speller(1000, 64)
                optimizer = torch.optim.AdamW(model.parameters())
                for i, batch in enumerate(loader):
                    out = model(batch)
                    out["loss"].backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            line=21,
            fixed="""
            import torch
            import torch.nn.functional as F


            class Speller(torch.nn.Module):
                def __init__(self, vocab, dim):
                    super().__init__()
                    self.embed = torch.nn.Embedding(vocab, dim)
                    self.head = torch.nn.Linear(dim, vocab)

                def forward(self, batch):
                    logits = self.head(self.embed(batch["tokens"]))
                    return {"loss": F.cross_entropy(logits.flatten(0, 1), batch["targets"].flatten()), "logits": logits}


            def train(loader, accum=8):
                model = Speller(1000, 64)
                optimizer = torch.optim.AdamW(model.parameters())
                for i, batch in enumerate(loader):
                    out = model(batch)
                    (out["loss"] / accum).backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            title="the model's forward is in the file and returns a mean cross-entropy under `\"loss\"`",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            class Tagger(torch.nn.Module):
                def __init__(self, dim, tags):
                    super().__init__()
                    self.proj = torch.nn.Linear(dim, tags)

                def forward(self, x, y):
                    logits = self.proj(x)
                    return F.cross_entropy(logits, y), logits


            class Runner:
                def __init__(self, dim, tags):
                    self.model = Tagger(dim, tags)
                    self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

                def fit(self, loader, accum=4):
                    for i, (x, y) in enumerate(loader):
                        loss, _ = self.model(x, y)
                        loss.backward()
                        if (i + 1) % accum == 0:
                            self.opt.step()
                            self.opt.zero_grad()
            """,
            line=23,
            fixed="""
            import torch
            import torch.nn.functional as F


            class Tagger(torch.nn.Module):
                def __init__(self, dim, tags):
                    super().__init__()
                    self.proj = torch.nn.Linear(dim, tags)

                def forward(self, x, y):
                    logits = self.proj(x)
                    return F.cross_entropy(logits, y), logits


            class Runner:
                def __init__(self, dim, tags):
                    self.model = Tagger(dim, tags)
                    self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

                def fit(self, loader, accum=4):
                    for i, (x, y) in enumerate(loader):
                        loss, _ = self.model(x, y)
                        (loss / accum).backward()
                        if (i + 1) % accum == 0:
                            self.opt.step()
                            self.opt.zero_grad()
            """,
            title="the loss unpacked from `self.model`, built from a module class of this file whose forward "
                  "returns a mean",
        ),
        bad(
            """
            import torch


            class DistillTrainer:
                def __init__(self, student, teacher, loader, args):
                    self.student, self.teacher, self.loader, self.args = student, teacher, loader, args
                    self.optimizer = torch.optim.AdamW(student.parameters(), lr=args.lr)
                    self.criterion = torch.nn.CrossEntropyLoss()

                def train_epoch(self):
                    for step, (x, y) in enumerate(self.loader):
                        logits = self.student(x)
                        with torch.no_grad():
                            target = self.teacher(x).softmax(-1)
                        distill = torch.nn.functional.kl_div(logits.log_softmax(-1), target, reduction="batchmean")
                        loss = self.criterion(logits, y) * self.args.alpha + distill
                        loss.backward()
                        if (step + 1) % self.args.accum_steps == 0:
                            self.optimizer.step()
                            self.optimizer.zero_grad()
            """,
            line=17,
            fixed="""
            import torch


            class DistillTrainer:
                def __init__(self, student, teacher, loader, args):
                    self.student, self.teacher, self.loader, self.args = student, teacher, loader, args
                    self.optimizer = torch.optim.AdamW(student.parameters(), lr=args.lr)
                    self.criterion = torch.nn.CrossEntropyLoss()

                def train_epoch(self):
                    for step, (x, y) in enumerate(self.loader):
                        logits = self.student(x)
                        with torch.no_grad():
                            target = self.teacher(x).softmax(-1)
                        distill = torch.nn.functional.kl_div(logits.log_softmax(-1), target, reduction="batchmean")
                        loss = self.criterion(logits, y) * self.args.alpha + distill
                        (loss / self.args.accum_steps).backward()
                        if (step + 1) % self.args.accum_steps == 0:
                            self.optimizer.step()
                            self.optimizer.zero_grad()
            """,
            title="a weighted mean plus a distillation term: a setting's weight is not the window's share",
        ),
        good(
            """
            import torch


            class DistillTrainer:
                def __init__(self, student, teacher, loader, args):
                    self.student, self.teacher, self.loader, self.args = student, teacher, loader, args
                    self.optimizer = torch.optim.AdamW(student.parameters(), lr=args.lr)
                    self.criterion = torch.nn.CrossEntropyLoss()
                    self.share = 1.0 / args.accum_steps

                def train_epoch(self):
                    for step, (x, y) in enumerate(self.loader):
                        logits = self.student(x)
                        with torch.no_grad():
                            target = self.teacher(x).softmax(-1)
                        distill = torch.nn.functional.kl_div(logits.log_softmax(-1), target, reduction="batchmean")
                        loss = (self.criterion(logits, y) + distill) * self.share
                        loss.backward()
                        if (step + 1) % self.args.accum_steps == 0:
                            self.optimizer.step()
                            self.optimizer.zero_grad()
            """,
            title="the factor is computed from K (`1.0 / args.accum_steps`): the window's share",
        ),
        bad(
            """
            import torch

            ACCUM = 4
            criterion = torch.nn.CrossEntropyLoss()
            for i, (x, y) in enumerate(loader):
                logits, aux = model(x)
                loss = criterion(logits, y) + 0.4 * criterion(aux, y)
                loss.backward()
                if (i + 1) % ACCUM == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            line=8,
            fixed="""
            import torch

            ACCUM = 4
            criterion = torch.nn.CrossEntropyLoss()
            for i, (x, y) in enumerate(loader):
                logits, aux = model(x)
                loss = criterion(logits, y) + 0.4 * criterion(aux, y)
                (loss / ACCUM).backward()
                if (i + 1) % ACCUM == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="a main loss plus a weighted auxiliary head: the sum of two means, neither divided by K",
        ),
        good(
            """
            import torch

            ACCUM = 4
            criterion = torch.nn.CrossEntropyLoss()
            for i, (x, y) in enumerate(loader):
                logits, aux = model(x)
                loss = criterion(logits, y) * 0.25 + 0.1 * criterion(aux, y) * 0.25
                loss.backward()
                if (i + 1) % ACCUM == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="each term weighted by 0.25 with K fixed at 4: the factor may be 1 / K written out",
        ),
    )

    def check(self, ctx):
        model = ctx.model(training_model)
        yield from self._unscaled_schedules(ctx, model)
        for loop in model.loops + model.window_functions:
            if not (loop.innermost and loop.accumulates):
                continue
            if k_fixed_at_one(ctx, loop):
                continue
            tracer = LossTracer(model, loop)
            if tracer.gradients_divided_by_k():
                continue
            discarding, maybe = model.clears_within_window(loop)
            if discarding:
                continue  # a clear inside the window: the step sees one micro-batch's gradient (TL104)
            for ref in loop.backward_calls:
                if model._inner_loop(loop, ref) is not None or model.runs_per_update(loop, ref):
                    continue
                backward = tracer.backward_loss(ref)
                if backward.loss is None or backward.accelerate_divides:
                    continue
                trace = tracer.trace(backward.loss, ref.scope, ref.via)
                if trace.kind != MEAN:
                    continue
                k = describe_k(ctx, loop)
                loss_text = ctx.code_for(backward.loss)
                message = (f"`{loss_text}` is a per-micro-batch mean, but gradients of {k} micro-batches add up "
                           f"before each optimizer step: the update's gradient is {k} times too large; divide the "
                           f"loss by {k} (or weight it by the micro-batch's share of the window's samples/tokens)")
                # a mean the code shows (`.mean()`, a loss function's default reduction); a model's
                # own output (`out["loss"]`) is a mean only if its forward says so, which is not read
                if trace.producers and len(tracer.model_output_producers(trace)) == len(trace.producers):
                    is_mean = unknown(f"`{loss_text}` is a mean over the micro-batch: it is the model's own output "
                                      f"(`{ctx.code_for(trace.producers[0])[:60]}`), whose reduction (a mean, or a "
                                      "sum over its tokens) the code read does not show", backward.loss, "call")
                else:
                    is_mean = premise(f"`{loss_text}` is a mean over the micro-batch, not divided by {k} before "
                                      "the backward", backward.loss, "call")
                evidence = [*accumulation_premises(ctx, loop), is_mean]
                for factor in trace.weights[:1]:
                    evidence.append(premise(
                        f"the factor `{ctx.code_for(factor)}` reads nothing {k} is computed from, nor anything that "
                        "changes between micro-batches: a weight, not the window's share, so the accumulated "
                        f"gradient still grows with {k}", factor, "use"))
                for clear, test in maybe[:1]:
                    evidence.append(unknown(
                        f"the window's gradients add up: `{ctx.code_for(clear.node)}` runs under "
                        f"`{ctx.code_for(test.test)}`, which can change between micro-batches", test.test, "use"))
                yield self.report_if(k_condition(ctx, loop), ref.node, message,
                                     self._fix(ctx, loop, ref, backward, tracer, trace), evidence)

    def _unscaled_schedules(self, ctx, model):
        """A framework object whose train step accumulates its micro-batches itself (a
        torch.distributed.pipelining schedule: framework data) built with its gradient scaling
        turned off (`scale_grads=False`) and a mean loss_fn not divided by its micro-batch count:
        the gradients of `n_microbatches` micro-batch means add up undivided. Reported once per
        schedule and loop, at the train step that computes the loss (the one handed `target=`)."""
        for loop in model.loops:
            if not loop.innermost:
                continue
            seen: dict[int, list] = {}
            for ref in loop.backward_calls:
                found = model.train_step_construction(ref.node, ref.scope)
                if found is not None:
                    seen.setdefault(id(found[1]), [found]).append(ref)
            for found, *refs in seen.values():
                entry, construction, scope = found
                ref = next((r for r in refs if keyword_arg(r.node, "target") is not None), refs[0])
                report = self._unscaled_schedule(ctx, LossTracer(model, loop), loop, ref, entry, construction, scope)
                if report is not None:
                    yield report

    def _unscaled_schedule(self, ctx, tracer, loop, ref, entry, construction, scope):
        scaling = keyword_arg(construction, entry.grad_scaling_keyword)
        if any(a.star for a in construction.args):
            return None  # `**kwargs` may set it
        if scaling is None:
            if entry.grad_scaling_default:
                return None  # the default: the schedule divides
            scaling_node = construction
        elif isinstance(scaling.value, cst.Name) and scaling.value.value == "False":
            scaling_node = scaling
        else:
            return None  # true, or a value the code does not spell
        args = positional_args(construction)
        loss = keyword_arg(construction, entry.loss) or (args[2] if len(args) > 2 else None)
        count = keyword_arg(construction, entry.micro_batches) or (args[1] if len(args) > 1 else None)
        if loss is None or count is None or _mean_loss_fn(tracer, loss.value, scope) is None:
            return None
        n = ctx.code_for(count.value)
        loss_text = ctx.code_for(loss.value)
        schedule = ctx.code_for(ref.node.func.value)
        message = (f"`{schedule}` runs {n} micro-batches per `.{entry.train_step}()` with "
                   f"`{entry.grad_scaling_keyword}=False`: their gradients add up undivided, and `{loss_text}` is a "
                   f"per-micro-batch mean, so the update's gradient is {n} times the batch's; keep "
                   f"`{entry.grad_scaling_keyword}=True` (the default) or divide the loss by {n}")
        evidence = [
            premise(f"`{ctx.code_for(construction.func)}(...)` builds the schedule whose `.{entry.train_step}()` "
                    f"runs the forward and backward of {n} micro-batches (`{entry.name}`)", construction, "framework"),
            premise(f"`{entry.grad_scaling_keyword}=False`: the schedule does not divide the summed gradients by {n}",
                    scaling_node, "argument"),
            premise(f"`{loss_text}` returns a mean over the micro-batch, not divided by {n}", loss.value, "call"),
            *loop_premises(ctx, loop),
        ]
        return self.report(ref.node, message, evidence=evidence)

    def _fix(self, ctx, loop, ref, backward, tracer, trace) -> FixSpec | None:
        """`(loss / K)` in place of the loss, when K is a name or number readable where backward is.
        Where the micro-batches can differ in size (TL103's reasons), `/ K` weighs them equally,
        which TL103 then reports: the title says so (weighting by the window's real size needs its
        sample or token count before the first backward, which no mechanical edit can supply)."""
        k = loop.k
        if k is None or not _readable_at(ctx, loop, k, ref):
            return None
        loss = backward.loss
        loss_text = ctx.code_for(loss)
        if not isinstance(loss, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            loss_text = f"({loss_text})"
        divided = f"{loss_text} / {ctx.code_for(k)}"
        func = ref.node.func
        in_receiver = isinstance(func, cst.Attribute) and func.value is loss
        replacement = f"({divided})" if in_receiver else divided
        title = f"Divide the loss by `{ctx.code_for(k)}` before backward"
        if rule_class("TL103")().why_unequal(ctx, tracer, trace) is not None:
            title += " (micro-batches of different sizes then weigh the same: TL103 stays)"
        return FixSpec(title, safe=False, replacements=((loss, replacement),))


def _mean_loss_fn(tracer, expr: cst.BaseExpression, scope) -> cst.CSTNode | None:
    """The node proving that the loss function `expr` (handed to a schedule, called once per
    micro-batch) returns a per-micro-batch mean: a function of `torch.nn.functional` (its default
    reduction), a torch loss module built without `reduction="sum"`/`"none"` (inline or bound to a
    name), or a def or lambda of this file whose returns trace to a mean. Anything else (a wrapper
    that rescales it, a loss of another file): None."""
    index = tracer.index
    if isinstance(expr, cst.Lambda):
        return expr if tracer.trace(expr.body, scope).kind == MEAN else None
    if isinstance(expr, cst.Name):
        function = index.callee(cst.Call(func=expr), scope)
        if function is not None:
            returns = [n.value for n in walk(function.node.body) if isinstance(n, cst.Return) and n.value is not None
                       and index.function_at(n) is function]
            kinds = {tracer.trace(value, function.scope).kind for value in returns}
            return function.node if kinds == {MEAN} else None
        bindings = [b for b in scope.lookup(expr.value) if b.kind == "assign"]
        if len(bindings) == 1 and isinstance(bindings[0].value, cst.Call):
            return _mean_loss_fn(tracer, bindings[0].value, scope)
    name = index.resolve(expr.func if isinstance(expr, cst.Call) else expr, scope) or ""
    if isinstance(expr, cst.Call):
        if name.startswith("torch.nn.") and name.endswith("Loss") and not any(a.star for a in expr.args):
            reduction = keyword_arg(expr, "reduction")
            if reduction is None:
                return expr
            if isinstance(reduction.value, cst.SimpleString) and reduction.value.evaluated_value == "mean":
                return expr
        return None
    if name.startswith("torch.nn.functional.") and (name.endswith("_loss") or name.rsplit(".", 1)[-1] in _MEAN_FUNCTIONS):
        return expr
    return None


# the losses of torch.nn.functional (their `reduction` defaults to "mean") not named `*_loss`
_MEAN_FUNCTIONS = frozenset({"cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
                             "kl_div"})


def _readable_at(ctx, loop, k: cst.BaseExpression, ref) -> bool:
    if isinstance(k, (cst.Integer, cst.Float)):
        return True
    if loop.guard is None or loop.guard.scope is None:
        return False
    root = k
    while isinstance(root, cst.Attribute):  # `self.accum` or `self.cfg.accum_steps`
        root = root.value
    if isinstance(k, cst.Attribute) and isinstance(root, cst.Name) and root.value == "self":
        return any(s.kind == "class" for s in _scopes(ref.scope)) and \
            any(s.kind == "class" for s in _scopes(loop.guard.scope))
    if isinstance(k, (cst.Name, cst.Attribute)):
        return loop.guard.scope is ref.scope
    return False


def _scopes(scope):
    while scope is not None:
        yield scope
        scope = scope.parent
