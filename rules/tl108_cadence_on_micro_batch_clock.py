"""TL108 cadence-on-micro-batch-clock."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from trainlint.finding import Severity
from trainlint.fixkit import has_multiline_string
from trainlint.gate import named
from trainlint.model import arithmetic, frameworks
from trainlint.model.dataflow import dataflow
from trainlint.model.index import Scope, walk
from trainlint.model.mode_state import MODE_WORDS
from trainlint.model.roles import ACCELERATOR, CONFIG, ENGINE, MODEL, OTHER
from trainlint.model.summaries import SAVE_WORDS, FunctionSummary, callable_summary
from trainlint.model.training import RUNS_BACKWARD, CallRef, TrainingLoop, TrainingModel, backward_triggers, training_model
from trainlint.model.accumulation import describe_k
from trainlint.model.shipped import k_condition
from trainlint.rule import FixSpec, Rule, after, bad, delete, good
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import accumulation_premises, loop_premises, role_premise, scheduler_premise, training_premises, unit_premises

_SAVERS = frozenset({"torch.save", "torch.serialization.save", "safetensors.torch.save_file",
                     "safetensors.torch.save_model"})
# methods that write a checkpoint, by the role of their receiver
_SAVE_METHODS = {ACCELERATOR: frameworks.methods_on("save_state", ACCELERATOR),
                 ENGINE: frameworks.methods_on("save_state", ENGINE), MODEL: {"save_pretrained"}}
MICRO, UPDATE = "micro", "update"


@dataclass
class _Cadence:
    node: cst.If
    scope: Scope
    via: tuple[cst.Call, ...]
    modulo: cst.BinaryOperation  # `counter % every`
    #: the assignment whose value the test reads (`should_eval = step % every == 0` then
    #: `if should_eval:`), None when the test holds the modulo itself
    stored: cst.CSTNode | None = None


class CadenceOnMicroBatchClock(Rule):
    code = "TL108"
    name = "cadence-on-micro-batch-clock"
    severity = Severity.WARNING
    summary = "Under accumulation, evaluation or checkpoint cadence is tested on every micro-batch, outside the update"
    message = "the evaluation/checkpoint cadence is tested on the micro-batch clock, outside the update branch"
    triggers = backward_triggers(("backward", "%"))
    gate = RUNS_BACKWARD & named("^step$")  # a training loop (a pipeline schedule's step too); the cadence test is a `%`
    what_it_does = """
        In a training loop that accumulates gradients (the optimizer steps once every K
        micro-batches), flags an `if counter % every ...:` whose body evaluates the model (a call
        that puts a model in eval mode, directly or through a function of the project) or writes
        a checkpoint (`torch.save`, `accelerator.save_state`, `model.save_pretrained`, a project
        function that saves), when that test runs on every micro-batch: outside the update branch
        (`if (i + 1) % K == 0:`, after `if ...: continue`, under `if accelerator.sync_gradients:`)
        or inside the nested micro-batch loop. A test stored in a name first is read through it
        (`should_eval = step % eval_every == 0` in the loop, then `if should_eval:`), and so is a
        predicate of the file that returns one test (`if self._should_evaluate(step):`), its
        counter taken as the caller passes it.

        Two counters are flagged: the micro-batch counter (the loop's `enumerate` index, or a counter
        bumped on every iteration), and the update counter when it is bumped inside the update
        branch but tested outside it: it keeps its value for the K micro-batches of a window, so
        the test holds K times in a row.

        A test inside the update branch, on the counter of a loop over updates (with the
        micro-batches in a nested loop), or that also tests the update condition, is left alone;
        so is a period that is the length of the loader the counter walks (`(i + 1) %
        len(loader) == 0` over `enumerate(loader)`, also through a name bound to it): it holds on
        one micro-batch of each epoch, a cadence of epochs (`len(loader) // 4` is still flagged).
        So is a loop whose window is cleared between its micro-batches (a `zero_grad()` on every
        micro-batch, or under the update's condition before its last backward: TL104's finding):
        no gradient adds up across the window for a checkpoint or an evaluation to land in.
        When the update counter is tested right after the update branch, the fix moves the test
        to the end of that branch; it changes when the evaluation runs, so it is offered as unsafe.

        Nor is a test that also requires a flag the loop sets true only in the update branch and
        that the tested block clears (`and save_due` with `save_due = True` beside
        `optimizer.step()`, `save_due = False` as a statement of the block every run of it passes):
        the block runs at most once per update.

        Nor is a test of a multiple of K on the update's own counter (`step % (every * K) == 0`
        beside the update's `step % K == 0`, the counter unchanged between the two tests): it
        holds only on micro-batches where the update ran, every `every` updates.

        When K is 1 as the code ships (`GRAD_ACCUM = 1`, an argparse option or a config field that
        defaults to 1), every micro-batch is an update and there is no window to land in: the
        finding then says it holds only when K is set above 1 and is reported one severity lower.
        """
    why_bad = """
        Evaluation and checkpoint cadence belong to the update clock: "every 500 steps" means every
        500 optimizer updates. Tested on the micro-batch counter, the evaluation runs every 500
        micro-batches, 500/K updates apart, and in the middle of an accumulation window: the model
        it scores is the one before the update being accumulated, and with `model.eval()` /
        `model.train()` or a `torch.save` in between, a checkpoint written mid-window does not hold
        the gradients accumulated so far, so a resume from it silently drops part of an update.
        Tested on an update counter outside the update branch, the counter sits at the multiple
        of 500 for K micro-batches, so the evaluation (and an early-stopping decision made from it)
        runs K times for one update, and K checkpoints overwrite each other.
        """
    fix_safety = """
        Unsafe: the evaluation or save then runs once per update instead of on the micro-batch
        counter; where the counter was meant to count micro-batches (an evaluation that is
        supposed to see a partial window), the cadence and what is logged change.
        """
    references = (
        "https://huggingface.co/docs/accelerate/usage_guides/gradient_accumulation",
        "https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments.eval_steps",
        "https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-accumulation",
    )
    examples = (
        good(
            """
            import torch


            def fit(net, opt, batches, held_out, k, check_every):
                for n, (inp, tgt) in enumerate(batches):
                    (torch.nn.functional.mse_loss(net(inp), tgt) / k).backward()
                    if n % k == 0:
                        opt.step()
                        opt.zero_grad()
                    if n % (check_every * k) == 0:
                        net.eval()
                        with torch.no_grad():
                            print(sum(torch.nn.functional.mse_loss(net(a), b).item() for a, b in held_out))
                        net.train()
            """,
            title="the period is a multiple of K on the update's own counter: it holds only where the update ran",
        ),
        bad(
            """
            import torch


            def fit(net, opt, batches, held_out, k, check_every):
                for n, (inp, tgt) in enumerate(batches):
                    (torch.nn.functional.mse_loss(net(inp), tgt) / k).backward()
                    if n % k == 0:
                        opt.step()
                        opt.zero_grad()
                    if (n + 1) % (check_every * k) == 0:
                        net.eval()
                        with torch.no_grad():
                            print(sum(torch.nn.functional.mse_loss(net(a), b).item() for a, b in held_out))
                        net.train()
            """,
            line=10,
            title="a multiple of K, but of the counter shifted by one: it holds on the micro-batch before an update",
        ),
        good(
            """
            import torch


            def train(model, optimizer, loader, val_loader, accum, epochs):
                validate_at = len(loader)
                for epoch in range(epochs):
                    for i, (x, y) in enumerate(loader):
                        model.train()
                        (torch.nn.functional.cross_entropy(model(x), y) / accum).backward()
                        if (i + 1) % accum == 0:
                            optimizer.step()
                            optimizer.zero_grad()
                        if (i + 1) % validate_at == 0:
                            model.eval()
                            with torch.no_grad():
                                print(sum(model(v).argmax(1).eq(t).sum().item() for v, t in val_loader))
            """,
            title="the period is the length of the loader the counter walks: the test holds once, on each "
                  "epoch's last micro-batch",
        ),
        bad(
            """
            import torch


            def train(model, optimizer, loader, val_loader, accum, epochs):
                validate_at = len(loader) // 4
                for epoch in range(epochs):
                    for i, (x, y) in enumerate(loader):
                        model.train()
                        (torch.nn.functional.cross_entropy(model(x), y) / accum).backward()
                        if (i + 1) % accum == 0:
                            optimizer.step()
                            optimizer.zero_grad()
                        if (i + 1) % validate_at == 0:
                            model.eval()
                            with torch.no_grad():
                                print(sum(model(v).argmax(1).eq(t).sum().item() for v, t in val_loader))
            """,
            line=13,
            title="a quarter of the loader's length: four evaluations an epoch on the micro-batch clock",
        ),
        bad(
            """
            import torch

            GRAD_ACCUM = 1


            def train(model, optimizer, loader, save_every):
                for step, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / GRAD_ACCUM
                    loss.backward()
                    if (step + 1) % GRAD_ACCUM == 0:
                        optimizer.step()
                        optimizer.zero_grad()
                    if step % save_every == 0:
                        torch.save(model.state_dict(), f"ckpt_{step}.pt")
            """,
            line=13,
            title="K is a constant 1 as shipped: every micro-batch is an update; reported only as conditional on K > 1",
            severity=Severity.INFO,
        ),
        bad(
            """
            import torch

            GRAD_ACCUM = 4


            def train(model, optimizer, loader, save_every):
                for step, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / GRAD_ACCUM
                    loss.backward()
                    if (step + 1) % GRAD_ACCUM == 0:
                        optimizer.step()
                        optimizer.zero_grad()
                    if step % save_every == 0:
                        torch.save(model.state_dict(), f"ckpt_{step}.pt")
            """,
            line=13,
            title="the same cadence with K = 4: a checkpoint lands mid-window",
        ),
        good(
            """
            import torch

            WINDOW = 4


            def train(net, opt, batches, snapshot_every):
                for n, (x, y) in enumerate(batches):
                    last = (n + 1) % WINDOW == 0
                    if last:
                        opt.zero_grad()
                    torch.nn.functional.mse_loss(net(x), y).backward()
                    if last:
                        opt.step()
                    if n % snapshot_every == 0:
                        torch.save(net.state_dict(), "snapshot.pt")
            """,
            title="the window's clear runs before its last backward (TL104): no gradient adds up across micro-batches, "
                  "so a snapshot between them loses nothing",
        ),
        bad(
            """
            import torch

            WINDOW = 4


            def train(net, opt, batches, snapshot_every):
                for n, (x, y) in enumerate(batches):
                    if n % WINDOW == 0:
                        opt.zero_grad()
                    (torch.nn.functional.mse_loss(net(x), y) / WINDOW).backward()
                    if (n + 1) % WINDOW == 0:
                        opt.step()
                    if n % snapshot_every == 0:
                        torch.save(net.state_dict(), "snapshot.pt")
            """,
            line=13,
            title="the clear at the window's first micro-batch: gradients add up, and the snapshot lands mid-window",
        ),
        bad(
            """
            import torch

            global_step = 0
            for i, (x, y) in enumerate(train_loader):
                loss = criterion(model(x), y) / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
                    global_step += 1
                if global_step % eval_every == 0:
                    model.eval()
                    val_loss = evaluate(model, val_loader)
                    model.train()
            """,
            line=11,
            fixed="""
            import torch

            global_step = 0
            for i, (x, y) in enumerate(train_loader):
                loss = criterion(model(x), y) / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
                    global_step += 1
                    if global_step % eval_every == 0:
                        model.eval()
                        val_loss = evaluate(model, val_loader)
                        model.train()
            """,
            title="the update counter tested on every micro-batch: K evaluations per cadence point",
        ),
        bad(
            """
            import torch


            def evaluate(model, loader):
                model.eval()
                with torch.no_grad():
                    total = sum(model(x, y).item() for x, y in loader)
                model.train()
                return total / len(loader)


            def train(model, loader, val_loader, optimizer, grad_accum, eval_steps):
                for step, batch in enumerate(loader):
                    loss = model(**batch).loss / grad_accum
                    loss.backward()
                    if step % eval_steps == 0:
                        print(step, evaluate(model, val_loader))
                    if step % grad_accum != 0:
                        continue
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            line=16,
            title="the enumerate index (micro-batches) drives the evaluation, before the continue guard",
        ),
        bad(
            """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=8)
            model, optimizer, loader, lr_scheduler = accelerator.prepare(model, optimizer, loader, lr_scheduler)
            completed_steps = 0
            for batch in loader:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()
                if accelerator.sync_gradients:
                    completed_steps += 1
                if completed_steps % checkpointing_steps == 0:
                    accelerator.save_state(f"step_{completed_steps}")
            """,
            line=16,
            fixed="""
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=8)
            model, optimizer, loader, lr_scheduler = accelerator.prepare(model, optimizer, loader, lr_scheduler)
            completed_steps = 0
            for batch in loader:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()
                if accelerator.sync_gradients:
                    completed_steps += 1
                    if completed_steps % checkpointing_steps == 0:
                        accelerator.save_state(f"step_{completed_steps}")
            """,
            title="Accelerate: the checkpoint test sits outside `if accelerator.sync_gradients:`",
        ),
        bad(
            """
            import torch


            class Trainer:
                def __init__(self, model, optimizer, loader, accum, save_every):
                    self.model, self.optimizer, self.loader = model, optimizer, loader
                    self.accum, self.save_every = accum, save_every

                def save(self, step):
                    torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                                "step": step}, f"ckpt_{step}.pt")

                def maybe_save(self, step):
                    if (step + 1) % self.save_every == 0:
                        self.save(step)

                def fit(self):
                    for it, (x, y) in enumerate(self.loader):
                        loss = self.model(x, y) / self.accum
                        loss.backward()
                        self.maybe_save(it)
                        if (it + 1) % self.accum == 0:
                            self.optimizer.step()
                            self.optimizer.zero_grad()
            """,
            line=14,
            title="Trainer class: a per-micro-batch helper saves on the micro-batch index, mid-window",
        ),
        bad(
            """
            import torch

            for it in range(max_iters):
                for micro_step in range(gradient_accumulation_steps):
                    x, y = get_batch("train")
                    loss = model(x, y) / gradient_accumulation_steps
                    loss.backward()
                    if it % eval_interval == 0:
                        model.eval()
                        losses = estimate_loss(model)
                        model.train()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            """,
            line=8,
            title="the evaluation inside the micro-batch loop: it runs for each of its K micro-batches",
        ),
        bad(
            """
            import torch

            step = 0
            for batch in loader:
                step += 1
                loss = model(**batch).loss / accum
                loss.backward()
                if step % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
                if step % save_interval == 0:
                    model.save_pretrained(f"out/checkpoint-{step}")
            """,
            line=11,
            title="a counter bumped on every micro-batch: checkpoints land save_interval / accum updates apart",
        ),
        good(
            """
            import torch

            global_step = 0
            for i, (x, y) in enumerate(train_loader):
                loss = criterion(model(x), y) / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
                    global_step += 1
                    if global_step % eval_every == 0:
                        model.eval()
                        val_loss = evaluate(model, val_loader)
                        model.train()
            """,
            title="the cadence test inside the update branch, on the update counter",
        ),
        good(
            """
            import torch

            for it in range(max_iters):
                if it % eval_interval == 0:
                    model.eval()
                    losses = estimate_loss(model)
                    model.train()
                for micro_step in range(gradient_accumulation_steps):
                    x, y = get_batch("train")
                    loss = model(x, y) / gradient_accumulation_steps
                    loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            """,
            title="a loop over updates with a nested micro-batch loop: its counter is the update clock",
        ),
        good(
            """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=8)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            completed_steps = 0
            for batch in loader:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
                if accelerator.sync_gradients:
                    completed_steps += 1
                    if completed_steps % checkpointing_steps == 0:
                        accelerator.save_state(f"step_{completed_steps}")
            """,
            title="Accelerate: the checkpoint test under `if accelerator.sync_gradients:`",
        ),
        good(
            """
            import torch

            for step, batch in enumerate(loader):
                loss = model(**batch).loss / accum
                loss.backward()
                if (step + 1) % accum == 0 and (step + 1) % (accum * eval_every) == 0:
                    model.eval()
                    run_validation(model)
                    model.train()
                if (step + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="the cadence test also tests the window boundary",
        ),
        good(
            """
            import torch

            for step, batch in enumerate(loader):
                loss = model(**batch).loss / accum
                loss.backward()
                if step % log_every == 0:
                    print(f"step {step} loss {loss.item() * accum:.4f}")
                if (step + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="a logging cadence on micro-batches: no evaluation, no checkpoint",
        ),
        good(
            """
            import torch

            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if step % eval_every == 0:
                    model.eval()
                    validate(model)
                    model.train()
            """,
            title="no accumulation: every batch is an update",
        ),
        good(
            """
            import torch


            class Trainer:
                def __init__(self, model, optimizer, loader, accum, save_every):
                    self.model, self.optimizer, self.loader = model, optimizer, loader
                    self.accum, self.save_every = accum, save_every
                    self.updates = 0

                def save(self):
                    torch.save({"model": self.model.state_dict(), "updates": self.updates}, "last.pt")

                def update(self):
                    self.optimizer.step()
                    self.optimizer.zero_grad()
                    self.updates += 1
                    if self.updates % self.save_every == 0:
                        self.save()

                def fit(self):
                    for it, (x, y) in enumerate(self.loader):
                        loss = self.model(x, y) / self.accum
                        loss.backward()
                        if (it + 1) % self.accum == 0:
                            self.update()
            """,
            title="Trainer class: the save test lives in the update method",
        ),
        good(
            """
            import torch

            for epoch in range(epochs):
                for i, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y) / accum
                    loss.backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
                if epoch % save_every == 0:
                    torch.save(model.state_dict(), f"epoch_{epoch}.pt")
            """,
            title="an epoch cadence, tested after the batch loop",
        ),
        good(
            """
            import torch

            global_step = 0
            for i, batch in enumerate(loader):
                loss = model(**batch).loss / accum
                loss.backward()
                if (i + 1) % accum != 0:
                    continue
                optimizer.step()
                optimizer.zero_grad()
                global_step += 1
                if global_step % eval_steps == 0:
                    model.eval()
                    evaluate(model)
                    model.train()
            """,
            title="the cadence test after the continue guard runs once per update",
        ),
        good(
            """
            import torch
            import lightning as L


            def fit(fabric, model, optimizer, train_dataloader, val_dataloader, accum_iters, eval_interval):
                step_count = 0
                for iter_num, batch in enumerate(train_dataloader):
                    is_accumulating = (iter_num + 1) % accum_iters != 0
                    with fabric.no_backward_sync(model, enabled=is_accumulating):
                        loss = model(batch).loss
                        fabric.backward(loss / accum_iters)
                    if not is_accumulating:
                        optimizer.step()
                        optimizer.zero_grad()
                        step_count += 1
                    if not is_accumulating and step_count % eval_interval == 0:
                        model.eval()
                        validate(fabric, model, val_dataloader)
                        model.train()
            """,
            title="Fabric: the cadence test also requires the end of the window (`not is_accumulating`)",
        ),
        good(
            """
            import torch


            def train(model, optimizer, loader, val_loader, accum, eval_every):
                updates, due = 0, False
                for i, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / accum
                    loss.backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
                        updates += 1
                        due = True
                    if updates % eval_every == 0 and due:
                        due = False
                        model.eval()
                        with torch.no_grad():
                            score = sum(model(v).argmax(1).eq(t).sum().item() for v, t in val_loader)
                        model.train()
                        print(updates, score)
            """,
            title="the test also needs a flag that only the update sets and the evaluation clears: once per update",
        ),
        bad(
            """
            import torch


            def train(model, optimizer, loader, val_loader, accum, eval_every):
                updates, due = 0, False
                for i, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / accum
                    loss.backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
                        updates += 1
                        due = True
                    if updates % eval_every == 0 and due:
                        print("evaluating")
                        model.eval()
                        with torch.no_grad():
                            score = sum(model(v).argmax(1).eq(t).sum().item() for v, t in val_loader)
                        model.train()
                        print(updates, score)
            """,
            line=14,
            fixed="""
            import torch


            def train(model, optimizer, loader, val_loader, accum, eval_every):
                updates, due = 0, False
                for i, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / accum
                    loss.backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
                        updates += 1
                        due = True
                        if updates % eval_every == 0 and due:
                            print("evaluating")
                            model.eval()
                            with torch.no_grad():
                                score = sum(model(v).argmax(1).eq(t).sum().item() for v, t in val_loader)
                            model.train()
                            print(updates, score)
            """,
            title="the same flag, set by the update but never cleared: it stays true for the window",
        ),
    )

    def check(self, ctx):
        model = ctx.model(training_model)
        reported: set[int] = set()
        for loop in model.loops + model.window_functions:
            if not (loop.innermost and loop.accumulates):
                continue
            discarding, maybe = model.clears_within_window(loop)
            if discarding:
                continue  # a clear inside the window: nothing accumulates across it to land in (TL104)
            for ref in model.own_calls(loop):
                work = _cadenced_work(ctx, model, ref)
                if work is None:
                    continue
                cadence = _cadence_around(ctx, model, loop, ref)
                if cadence is None or id(cadence.node) in reported:
                    continue
                if model.runs_per_update(loop, CallRef(cadence.node, cadence.scope, cadence.via)):
                    continue
                clock = _clock(ctx, model, loop, cadence)
                if clock is None:
                    continue
                if clock == MICRO and _once_per_pass(ctx, loop, cadence):
                    continue  # `(i + 1) % len(loader) == 0` over `enumerate(loader)`: the end of each epoch
                if _window_multiple(ctx, loop, cadence):
                    continue  # `step % (every * K) == 0` beside the update's `step % K == 0`: only at a window's end
                if _latched_per_update(ctx, model, loop, cadence):
                    continue  # `and save_valid`: armed only by the update, disarmed by the block itself
                reported.add(id(cadence.node))
                evidence = [*accumulation_premises(ctx, loop),
                            premise(f"`{ctx.code_for(cadence.node.test)}` tests the micro-batch counter, outside the "
                                    "update's branch", cadence.node.test, "use"),
                            premise(f"under it: {work}", ref.node, "call")]
                if cadence.stored is not None:
                    evidence.insert(-1, premise(f"`{ctx.code_for(cadence.node.test)}` holds "
                                                f"`{_condition_text(ctx, cadence)}`", cadence.stored, "use"))
                for clear, test in maybe[:1]:
                    evidence.append(unknown(
                        f"the window's gradients add up: `{ctx.code_for(clear.node)}` runs under "
                        f"`{ctx.code_for(test.test)}`, which can change between micro-batches", test.test, "use"))
                yield self.report_if(k_condition(ctx, loop), cadence.node.test,
                                     _message(ctx, loop, cadence, clock, work),
                                     _fix(ctx, loop, cadence) if clock == UPDATE else None, evidence=evidence)


def _window_multiple(ctx, loop: TrainingLoop, cadence: _Cadence) -> bool:
    """The update runs when `c % K == 0` (the `if` whose body steps) and the cadence requires
    `c % M == 0` of the same counter `c`, with `M` a multiple of `K` (`every * K`, or literals such
    as 8 and 4), and nothing rebinds `c`'s names between the two tests: whenever the cadence holds,
    the update ran on this micro-batch, so it fires only at a window's end, every `M / K` updates."""
    guard = loop.guard
    if guard is None or guard.kind != "branch" or not isinstance(guard.node, cst.If) or guard.branch is not guard.node.body:
        return False
    window = _zero_modulo(guard.condition)
    if window is None or cadence.stored is not None:
        return False
    if not any(_zero_modulo(part) is cadence.modulo for part in _conjuncts(cadence.node.test)):
        return False  # `c % M == 0` must be required for the block to run
    counter, k = window.left, window.right
    if _text(ctx, counter) != _text(ctx, cadence.modulo.left) or _counter(counter) is None:
        return False
    every = cadence.modulo.right
    factors = [_text(ctx, f) for f in _factors(every)]
    if _text(ctx, k) not in factors:
        k_value, m_value = arithmetic.fold(k), arithmetic.fold(every)
        if not (isinstance(k_value, int) and isinstance(m_value, int) and k_value > 0 and m_value % k_value == 0):
            return False
    # the counter keeps its value from the guard to the cadence test: no statement between them binds it
    names = {n.value for n in walk(counter) if isinstance(n, cst.Name)}
    attrs = {_text(ctx, n) for n in walk(counter) if isinstance(n, cst.Attribute)}
    if cadence.via or ctx.index.function_at(cadence.node) is not ctx.index.function_at(guard.node):
        return False
    start, end = _position(ctx, guard.node), _position(ctx, cadence.node)
    if start is None or end is None or start >= end:
        return False
    for node in ctx.index.subtree(loop.node.body if isinstance(loop.node, (cst.For, cst.While)) else loop.node):
        if type(node) not in (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For):
            continue
        targets = ([t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target])
        bound = {_text(ctx, n) for t in targets for n in walk(t) if isinstance(n, (cst.Name, cst.Attribute))}
        if bound & (names | attrs):
            at = _position(ctx, node)
            if at is None or start <= at <= end or isinstance(node, cst.For) and node is not loop.node:
                return False
    return True


def _zero_modulo(test: cst.BaseExpression | None) -> cst.BinaryOperation | None:
    """`x % m` of a test `x % m == 0` (or `0 == x % m`, `not x % m`)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = test.expression
        return inner if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Modulo) else None
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal)):
        return None
    for side, other in ((test.left, test.comparisons[0].comparator), (test.comparisons[0].comparator, test.left)):
        if isinstance(side, cst.BinaryOperation) and isinstance(side.operator, cst.Modulo) and \
                isinstance(other, cst.Integer) and other.value == "0":
            return side
    return None


def _factors(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of a `*` chain (the expression itself otherwise)."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return _factors(expr.left) + _factors(expr.right)
    return [expr]


def _text(ctx, node: cst.CSTNode) -> str:
    """The code of `node` with no spaces and no parentheses around it."""
    text = "".join(ctx.code_for(node).split())
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    return text


def _position(ctx, node: cst.CSTNode) -> int | None:
    """`node`'s place in the file's pre-order (a node inside an earlier statement comes first)."""
    return ctx.index.place.get(node)


def _latched_per_update(ctx, model: TrainingModel, loop: TrainingLoop, cadence: _Cadence) -> bool:
    """The cadence test also requires a flag (`if step % every == 0 and save_valid:`) that the loop
    sets true only inside the update branch (`save_valid = True` beside `optimizer.step()`) and
    that the tested block itself sets false, as a statement of its own body that every run of the
    block passes: the block runs at most once per update, whatever the counter does between."""
    statement = cadence.node
    if cadence.stored is not None or not isinstance(statement.body, cst.IndentedBlock):
        return False
    flags = [part.value for part in _conjuncts(statement.test) if isinstance(part, cst.Name)]
    for flag in flags:
        disarmed = False
        for line in statement.body.body:
            if isinstance(line, cst.SimpleStatementLine):
                if any(_literal_assigned(small, flag) is False for small in line.body):
                    disarmed = True
                    break
                if any(isinstance(small, (cst.Continue, cst.Break, cst.Return, cst.Raise)) for small in line.body):
                    break
            elif any(isinstance(n, (cst.Continue, cst.Break, cst.Return)) for n in walk(line)):
                break  # a way out of the block before the flag is cleared
        if not disarmed:
            continue
        armed = True
        for node in ctx.index.subtree(loop.node.body if isinstance(loop.node, (cst.For, cst.While)) else loop.node):
            if type(node) not in (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.NamedExpr):
                continue
            value = _literal_assigned(node, flag)
            if value is None and _binds(node, flag):
                armed = False  # given a value that is not a literal: not a latch
                break
            if value is True and not model.runs_per_update(loop, node):
                armed = False
                break
        if armed:
            return True
    return False


def _binds(node: cst.CSTNode, name: str) -> bool:
    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
        [node.target] if isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.NamedExpr)) else []
    return any(isinstance(n, cst.Name) and n.value == name for t in targets for n in walk(t))


def _literal_assigned(node: cst.CSTNode, name: str) -> bool | None:
    """The literal `True`/`False` the statement gives `name` (`flag = False`, `a, flag = True, False`),
    None when it gives it anything else or does not bind it."""
    if not isinstance(node, cst.Assign):
        return None
    found = None
    for target in node.targets:
        t, value = target.target, node.value
        pairs = [(t, value)]
        if isinstance(t, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
                and len(t.elements) == len(value.elements):
            pairs = [(e.value, v.value) for e, v in zip(t.elements, value.elements)]
        for bound, given in pairs:
            if isinstance(bound, cst.Name) and bound.value == name:
                if not (isinstance(given, cst.Name) and given.value in ("True", "False")):
                    return None
                found = given.value == "True"
    return found


def _condition_text(ctx, cadence: _Cadence) -> str:
    """The stored condition's text (`step % eval_every == 0`), or the predicate's returned one."""
    value = cadence.stored.value if isinstance(cadence.stored, (cst.Assign, cst.AnnAssign, cst.Return)) else None
    return " ".join(ctx.code_for(value).split()) if value is not None else ""


def _message(ctx, loop: TrainingLoop, cadence: _Cadence, clock: str, work: str) -> str:
    test = ctx.code_for(cadence.node.test)
    shown = f"`if {test}:`"
    if isinstance(cadence.stored, cst.Return):
        shown += f" (it returns `{_condition_text(ctx, cadence)}`)"
    elif cadence.stored is not None:
        shown += f" (`{test} = {_condition_text(ctx, cadence)}`)"
    counter = ctx.code_for(cadence.modulo.left)
    k = describe_k(ctx, loop)
    every = ctx.code_for(cadence.modulo.right)
    if clock == MICRO:
        return (f"{shown} counts micro-batches (`{counter}` advances on every one), outside the update: the "
                f"{work} runs every `{every}` micro-batches (`{every}` / {k} updates apart) "
                "and in the middle of an accumulation window (a checkpoint then drops the gradients "
                "accumulated so far); test an update counter inside the update branch")
    return (f"`{counter}` advances once per update, but {shown} is tested on every micro-batch: while it is "
            f"a multiple, the {work} runs on each of the {k} micro-batches of the window, {k} times for one update; "
            "move the test inside the update branch")


def _cadenced_work(ctx, model: TrainingModel, ref: CallRef) -> str | None:
    """"evaluation" when the call puts a model in eval mode, "checkpoint" when it writes one."""
    call, scope = ref.node, ref.scope
    func = call.func
    roles = model.roles
    if isinstance(func, cst.Attribute):
        name = func.attr.value
        if name == "eval" and not call.args and roles.of(func.value, scope) not in (OTHER, CONFIG):
            return "evaluation"
        role = roles.of(func.value, scope)
        if name in _SAVE_METHODS.get(role, ()):
            return "checkpoint"
    if ctx.index.resolve(func, scope) in _SAVERS:
        return "checkpoint"
    if model.callee(call, scope) is not None:
        return None  # a same-file helper: its own calls are reached and judged
    summary = callable_summary(ctx.index, func, scope, MODE_WORDS + SAVE_WORDS)
    if isinstance(summary, FunctionSummary):
        if any(first == "eval" or last == "eval" for _, first, last in summary.modes):
            return "evaluation"
        if summary.saves or summary.save_path:
            return "checkpoint"
    return None


def _cadence_around(ctx, model: TrainingModel, loop: TrainingLoop, ref: CallRef) -> _Cadence | None:
    """The innermost `if <counter> % <every> ...:` holding the call, between the loop and the call,
    that is not an update condition (`% K`, `sync_gradients`)."""
    segments = model.path(loop, ref)
    flow = ctx.model(dataflow)
    k_text = ctx.code_for(loop.k) if loop.k is not None else None
    for position in range(len(segments) - 1, -1, -1):
        segment = segments[position]
        scope = loop.scope if position == 0 else ctx.index.scope_at(segment[0])
        via = ref.via[:position]
        for child, node in zip(segment, segment[1:]):
            if not isinstance(node, cst.If) or child is node.test:
                continue
            # the condition itself, or the value a name it tests was given in the same iteration
            test, stored = flow.stored_condition(node.test)
            if stored is not None and not (position > 0 or flow.inside(stored, loop.node)):
                test, stored = node.test, None  # computed once before the loop: not this loop's clock
            predicate = None
            if isinstance(test, cst.Call):  # `if self.should_eval(step):` a predicate of the file
                predicate = _predicate(ctx, model, test, scope)
                if predicate is not None:
                    test, stored = predicate[0], predicate[1]
            modulos = [n for n in walk(test) if isinstance(n, cst.BinaryOperation)
                       and isinstance(n.operator, cst.Modulo)]
            if not modulos:
                continue
            if any(k_text is not None and ctx.code_for(m.right) == k_text for m in modulos) or \
                    any(isinstance(n, cst.Attribute) and n.attr.value == "sync_gradients" for n in walk(test)):
                return None  # it tests the window boundary as well
            if len(modulos) != 1 or _counter(modulos[0].left) is None:
                return None
            test_scope = predicate[2].scope if predicate is not None else scope
            if any(model._update_condition(part, test_scope) is not False for part in _conjuncts(test)
                   if not any(n is modulos[0] for n in walk(part))):
                return None  # `if not is_accumulating and step % every == 0:`: it tests the boundary too
            modulo = modulos[0]
            if predicate is not None:
                # the predicate's counter as the caller names it: its argument, or the same `self.x`
                counter = _argument_counter(ctx, modulo, predicate)
                if counter is None:
                    return None
                modulo = cst.BinaryOperation(counter, cst.Modulo(), modulo.right)
            return _Cadence(node, scope, via, modulo, stored)
    return None


def _predicate(ctx, model: TrainingModel, call: cst.Call, scope: Scope):
    """(returned expression, its `return` statement, the function) for a call of a same-file
    function or method whose body returns one expression (`def should_eval(self, step): return
    step % self.eval_every == 0`), else None."""
    function = model.callee(call, scope)
    if function is None:
        return None
    returns = [n for n in walk(function.node.body) if isinstance(n, cst.Return)]
    if len(returns) != 1 or returns[0].value is None:
        return None
    return returns[0].value, returns[0], function, call


def _argument_counter(ctx, modulo: cst.BinaryOperation, predicate) -> cst.BaseExpression | None:
    """The counter a predicate's `counter % every` reads, as the caller passes it: the argument
    for a parameter, or `self.<attr>` when the caller is a method of the same class."""
    _, _, function, call = predicate
    counter = _counter(modulo.left)
    if isinstance(counter, cst.Name):
        bindings = function.scope.bindings.get(counter.value, ())
        if not any(b.kind == "param" for b in bindings):
            return None
        argument = ctx.index.argument_for(call, function, counter.value)
        return _counter(argument) if argument is not None else None
    if isinstance(counter, cst.Attribute) and isinstance(counter.value, cst.Name) and counter.value.value == "self":
        caller = ctx.index.function_at(call)
        if function.class_name and caller is not None and getattr(caller, "class_name", None) == function.class_name:
            return counter
    return None


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of an `and` chain (the test itself otherwise)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def _counter(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """`step`, `(step + 1)`, `self.global_step`: the counter a cadence test reads."""
    if isinstance(expr, (cst.Name, cst.Attribute)):
        return expr
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)) and \
            isinstance(expr.right, cst.Integer):
        return _counter(expr.left)
    return None


def _clock(ctx, model: TrainingModel, loop: TrainingLoop, cadence: _Cadence) -> str | None:
    """Which clock the cadence test's counter follows: MICRO (it advances on every micro-batch),
    UPDATE (only once per update), None when it cannot be told."""
    counter, scope = _counter(cadence.modulo.left), cadence.scope
    # a helper's parameter: what the loop passes for it
    for call in reversed(cadence.via):
        if not isinstance(counter, cst.Name):
            break
        caller_scope = ctx.index.scope_at(call)
        function = model.callee(call, caller_scope)
        bindings = scope.lookup(counter.value)
        if function is None or not bindings or bindings[0].kind != "param":
            break
        argument = ctx.index.argument_for(call, function, counter.value)
        counter = _counter(argument) if argument is not None else None
        scope = caller_scope
        if counter is None:
            return None
    if counter is None:
        return None
    text = ctx.code_for(counter)
    guard = loop.guard
    # loop targets: the training loop's own counts its iterations; a nested micro-batch loop's, micro-batches
    for node, clock in ((loop.node, UPDATE if guard.kind == "micro_loop" else MICRO),
                        (guard.node if guard.kind == "micro_loop" else None, MICRO)):
        if isinstance(node, cst.For) and text in _target_names(ctx, node):
            return clock
    increments = list(_increments(ctx, model, loop, text))
    if not increments:
        return None
    per_update = [model.runs_per_update(loop, ref) for ref in increments]
    if all(per_update):
        return UPDATE
    return MICRO if not any(per_update) else None


def _once_per_pass(ctx, loop: TrainingLoop, cadence: _Cadence) -> bool:
    """`if (i + 1) % n == 0:` where `i` counts the iterations of `for i, b in enumerate(loader)`
    (or `for i in range(len(loader))`) and `n` is `len(loader)`, every binding of it: the counter
    stays below `n`, so the test holds on one micro-batch of each pass over the loader (its last,
    or its first): a cadence of epochs, not of micro-batches. (`len(loader) // 4` is a cadence.)"""
    modulo = cadence.modulo
    if not any(isinstance(n, cst.Comparison) and n.left is modulo and len(n.comparisons) == 1
               and isinstance(n.comparisons[0].operator, cst.Equal)
               and isinstance(n.comparisons[0].comparator, cst.Integer)
               for n in walk(cadence.node.test if cadence.stored is None else cadence.stored)):
        return False
    counter = _counter(modulo.left)
    if not isinstance(counter, cst.Name) or cadence.via:
        return False
    guard = loop.guard
    for node in (loop.node, guard.node if guard.kind == "micro_loop" else None):
        if not isinstance(node, cst.For) or counter.value not in _target_names(ctx, node):
            continue
        iterated = node.iter.args[0].value if isinstance(node.iter, cst.Call) and node.iter.args else None
        if isinstance(node.iter, cst.Call) and isinstance(node.iter.func, cst.Name) and node.iter.func.value == "range":
            if len(node.iter.args) != 1:
                return False
            iterated = _length_of(iterated)  # `range(len(loader))`
        return iterated is not None and _length_of_each(ctx, modulo.right, cadence.node) == ctx.code_for(iterated)
    return False


def _length_of(expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """`len(x)` -> `x`."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "len" \
            and len(expr.args) == 1 and expr.args[0].keyword is None and not expr.args[0].star:
        return expr.args[0].value
    return None


def _length_of_each(ctx, every: cst.BaseExpression, at: cst.CSTNode) -> str | None:
    """The text of `x` when `every` is `len(x)`, or a name every binding of which in its function
    is `len(x)` (the same `x`); else None."""
    found = _length_of(every)
    if found is not None:
        return ctx.code_for(found)
    if not isinstance(every, cst.Name):
        return None
    flow = ctx.model(dataflow)
    bindings = flow.bindings_in_function(every.value, at)
    texts = {ctx.code_for(_length_of(b.value)) if b.kind == "assign" and _length_of(b.value) is not None else None
             for b in bindings}
    return texts.pop() if len(texts) == 1 else None


def _target_names(ctx, node: cst.For) -> set[str]:
    """`for i, (x, y) in enumerate(loader)` -> {"i"}: the names the loop's counter is bound to."""
    target = node.target
    iterable = node.iter
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "enumerate":
        if isinstance(target, cst.Tuple) and target.elements:
            first = target.elements[0].value
            return {ctx.code_for(first)} if isinstance(first, cst.Name) else set()
        return set()
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range" and \
            isinstance(target, cst.Name):
        return {target.value}
    return set()


def _increments(ctx, model: TrainingModel, loop: TrainingLoop, text: str):
    """`counter += n` (or `counter = counter + n`) written in the loop's body or in a same-file helper it
    calls, as refs `runs_per_update` can place."""
    bodies = [(loop.node.body, loop.scope, ())]
    for ref in loop.calls:
        function = model.callee(ref.node, ref.scope)
        if function is not None:
            bodies.append((function.node.body, function.scope, ref.via + (ref.node,)))
    seen = set()
    for body, scope, via in bodies:
        for node in walk(body):
            if id(node) in seen or isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                continue
            seen.add(id(node))
            if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign) and \
                    ctx.code_for(node.target) == text:
                yield CallRef(node, scope, via)
            elif isinstance(node, cst.Assign) and len(node.targets) == 1 and \
                    ctx.code_for(node.targets[0].target) == text and isinstance(node.value, cst.BinaryOperation) and \
                    isinstance(node.value.operator, cst.Add) and ctx.code_for(node.value.left) == text:
                yield CallRef(node, scope, via)


def _fix(ctx, loop: TrainingLoop, cadence: _Cadence) -> FixSpec | None:
    """Move the cadence `if` to the end of the update branch it follows directly in the loop body."""
    guard = loop.guard
    if cadence.via or guard.via or guard.equivalents:
        return None
    if guard.kind == "branch":
        return _move_into(ctx, cadence.node, guard.node, guard.branch)
    return _sync_fix(ctx, loop, cadence)


def _sync_fix(ctx, loop: TrainingLoop, cadence: _Cadence) -> FixSpec | None:
    """Accelerate: the `if accelerator.sync_gradients:` block right before the cadence test."""
    if loop.guard.kind != "accelerate":
        return None
    block = ctx.index.parent(cadence.node)
    if not isinstance(block, cst.IndentedBlock):
        return None
    statements = list(block.body)
    at = next(i for i, s in enumerate(statements) if s is cadence.node)
    previous = statements[at - 1] if at > 0 else None
    if not (isinstance(previous, cst.If) and previous.orelse is None and
            isinstance(previous.test, cst.Attribute) and previous.test.attr.value == "sync_gradients"):
        return None
    return _move_into(ctx, cadence.node, previous, previous.body)


def _move_into(ctx, statement: cst.If, branch_if: cst.CSTNode, branch: cst.CSTNode | None) -> FixSpec | None:
    index = ctx.index
    block = index.parent(statement)
    if not isinstance(block, cst.IndentedBlock) or not isinstance(branch, cst.IndentedBlock) or \
            index.parent(branch_if) is not block or not branch.body:
        return None
    statements = list(block.body)
    if statements.index(branch_if) + 1 != statements.index(statement):
        return None  # only when nothing runs between the branch and the test
    if has_multiline_string(statement) or any(e.comment for e in statement.leading_lines) or \
            any(isinstance(n, cst.IndentedBlock) and n.footer for n in walk(statement)):
        return None
    code = ctx.module.code_for_node(statement.with_changes(leading_lines=())).rstrip("\r\n")
    return FixSpec("Move the cadence test into the update branch", safe=False,
                   lines=(delete(statement), after(branch.body[-1], code)))

