"""TL702 resume-restarts-data-order."""

from __future__ import annotations

import bisect
import sys

import libcst as cst

from trainlint.finding import Severity
from trainlint.gate import iterates_loader, named, refers_to
from trainlint.model.checkpoint_base import LOAD_FUNCTIONS, SAVE_FUNCTIONS, string_value
from trainlint.model.checkpoints import checkpoint_model
from trainlint.model.dataflow import dataflow, loader_constructor, loader_of_loop
from trainlint.model.index import dotted_name, positional_args, walk
from trainlint.model.roles import ACCELERATOR, ENGINE, MODEL, OPTIMIZER, SCHEDULER, SCALER, roles
from trainlint.model.summaries import SAVE_WORDS, callable_summary
from trainlint.model.training import calls_in, training_model
from trainlint.rule import Rule, bad, good
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import code, loader_premise, role_premise, training_premises

# checkpoint keys that hold a position in the run
_STEP_KEYS = ("step", "iter", "update")
_EPOCH_KEYS = ("epoch",)
# methods whose call with the checkpoint restores a data position (a stateful loader or sampler)
_POSITION_METHODS = frozenset({"load_state_dict", "set_state", "set_start_index", "set_start_iter",
                               "set_position", "skip", "fast_forward", "set_epoch_and_step"})
_SAVE_METHODS = frozenset({"save_state", "save_checkpoint"})


class ResumeRestartsDataOrder(Rule):
    code = "TL702"
    name = "resume-restarts-data-order"
    severity = Severity.WARNING
    summary = "A resume restores the step counter but replays the epoch's batches from the first one"
    message = "after this resume the loop iterates the loader from the start of the epoch"
    triggers = (("load", "step"), ("load", "epoch"))
    # a loop over a loader, or a training loop (it steps an optimizer) that shows it iterates its data
    gate = (refers_to(*LOAD_FUNCTIONS) | named("^load_state$")) & (iterates_loader() | named("^step$"))
    what_it_does = """
        Flags the training loop over a data loader that runs after a resume when the resume restores
        a position in the run from the checkpoint (`global_step = ckpt["step"]`,
        `start_epoch = ckpt["epoch"] + 1`, `self.step = state["global_step"]`), the checkpoint is
        written in the middle of an epoch (the save runs inside that loop, directly or through a
        helper), and nothing makes the loop start where the interrupted run stopped:

        - no skip of the batches already consumed: the loader is not passed through a call that
          takes the restored counter (`accelerator.skip_first_batches(loader, n)`,
          `itertools.islice(loader, n, None)`), and no `if ... < resume_step: continue` in the loop
          tests a value derived from it;
        - no restored data position: no `load_state_dict`/`set_state` of the checkpoint into the
          loader or its sampler (a `StatefulDataLoader`), and the loader and its sampler are not
          built from the restored counter (a step-indexed permutation that starts at the step).

        Also flags a skip computed on the wrong clock: under gradient accumulation, a skip by the
        restored *update* counter (incremented once per optimizer step) while the loader counts
        micro-batches, with no factor K in the skip: `skip_first_batches(loader, completed_steps)`
        skips K times too few batches.

        Also flags an epoch loop that counts from 0 (`for epoch in range(epochs)`) around a loop
        over a loader, when a same-file helper that reads a checkpoint restored the step counter
        that loop advances before it (`self.global_step = self.load_checkpoints()`, or
        `self._load_checkpoint()` setting `self.global_steps`) and neither the range nor a
        `continue` uses it: even with the loader's position restored, the completed epochs run again.

        What proves each premise is code, not a name: the loop iterates the training data when it
        iterates a loader (built, typed or handed one) or, whatever it is called, a collection whose
        elements it hands to the calls of a loop that steps the optimizer (not a `range`, an
        iterator or a generator of the script, which draws in its own order); a helper restores a
        counter it assigns from the checkpoint it reads, or from where it reads it (the step parsed from
        the checkpoint folder's name, `int(folder.split("global_step_")[-1])`, when the helper loads a
        file under that folder), and the counter is the loop's when the loop advances it by a constant;
        a `load_state_dict` of the checkpoint restores a data position only into an object that is not
        run forward (`model(batch)`) nor an optimizer, scheduler or scaler.

        The finding is at the loop. Restores of epoch counters with checkpoints written at the end
        of the epoch are fine (the next epoch starts from its first batch) and stay quiet, as do
        loops that draw random batches (`get_batch()`) instead of iterating a loader.
        """
    why_bad = """
        A resumed run should see the same data the uninterrupted run would have seen. The restored
        step counter says the run is 3,000 batches into the epoch, but a loader iterated from the
        start hands out the epoch's first batches again: those examples are trained on twice in
        that epoch, and the examples between the checkpoint and the epoch's end are seen once less
        (with a step-bounded run, never). With a learning-rate schedule keyed on the step, the
        replayed batches are also trained at a different learning rate than the first time.
        Preemptible jobs that resume many times drift far from the intended data distribution, and
        the loss curve after each resume shows a dip as the model revisits data it just saw. Skip
        the consumed batches (in micro-batches: the restored update count times K), or restore a
        sampler position, or draw batches from a step-indexed permutation.
        """
    references = (
        "https://huggingface.co/docs/accelerate/usage_guides/checkpoint#restoring-the-state-of-the-dataloader",
        "https://pytorch.org/data/beta/torchdata.stateful_dataloader.html",
        "https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html",
    )
    examples = (
        bad(
            """
            import torch


            class PPOTrainer:
                def load_checkpoint(self):
                    state = torch.load(self.resume_path, map_location="cpu", weights_only=False)
                    self.policy.load_state_dict(state["policy"])
                    self.train_dataloader.load_state_dict(state["dataloader"])
                    self.global_steps = state["global_steps"]

                def fit(self):
                    self.global_steps = 0
                    self.load_checkpoint()
                    for epoch in range(self.config.total_epochs):
                        for batch in self.train_dataloader:
                            self.update_policy(batch)
                            self.global_steps += 1
                            if self.global_steps % self.config.save_freq == 0:
                                self.save_checkpoint()
            """,
            line=15,
            title="the step restored by a helper, the epoch loop restarted at 0 (the loader's position is restored)",
        ),
        good(
            """
            import torch


            class PPOTrainer:
                def load_checkpoint(self):
                    state = torch.load(self.resume_path, map_location="cpu", weights_only=False)
                    self.policy.load_state_dict(state["policy"])
                    self.train_dataloader.load_state_dict(state["dataloader"])
                    self.global_steps = state["global_steps"]

                def fit(self):
                    self.global_steps = 0
                    self.load_checkpoint()
                    first_epoch = self.global_steps // len(self.train_dataloader)
                    for epoch in range(first_epoch, self.config.total_epochs):
                        for batch in self.train_dataloader:
                            self.update_policy(batch)
                            self.global_steps += 1
                            if self.global_steps % self.config.save_freq == 0:
                                self.save_checkpoint()

                def evaluate_all(self):
                    self.load_checkpoint()
                    for epoch in range(3):
                        for batch in self.val_dataloader:
                            self.score(batch)
            """,
            title="the epoch loop starts at the restored epoch; a loop that advances no restored counter is no resume",
        ),
        good(
            """
            import torch


            class PPOTrainer:
                def load_checkpoint(self):
                    state = torch.load(self.resume_path, map_location="cpu", weights_only=False)
                    self.policy.load_state_dict(state["policy"])
                    self.loss_sum = state["loss_sum"]

                def fit(self):
                    self.loss_sum = 0.0
                    self.load_checkpoint()
                    for epoch in range(self.config.total_epochs):
                        for batch in self.train_dataloader:
                            self.loss_sum += self.update_policy(batch)
                            self.save_checkpoint()
            """,
            title="a running loss restored by the helper and summed in the loop is no step counter",
        ),
        bad(
            """
            import os

            import torch


            class RayPPOTrainer:
                def load_checkpoints(self):
                    folder = find_latest_checkpoint(self.cfg.ckpt_path)
                    if folder is None:
                        return 0
                    global_step = int(os.path.basename(folder).split("global_step_")[-1])
                    with open(os.path.join(folder, "data.pt"), "rb") as f:
                        self.train_dataloader.load_state_dict(torch.load(f, weights_only=False))
                    self.policy.load_checkpoint(os.path.join(folder, "policy"))
                    return global_step

                def train(self):
                    self.global_step = self.load_checkpoints()
                    for epoch in range(self.cfg.epochs):
                        for i, prompts in enumerate(self.train_dataloader):
                            self.train_step(prompts)
                            self.global_step += 1
                            if self.global_step % self.cfg.ckpt_interval == 0:
                                self.save_checkpoints()
            """,
            line=20,
            title="the step parsed from the name of the checkpoint folder the helper loads, the epoch loop from 0",
        ),
        good(
            """
            import os

            import torch


            class RayPPOTrainer:
                def load_checkpoints(self):
                    folder = find_latest_checkpoint(self.cfg.ckpt_path)
                    if folder is None:
                        return 0
                    global_step = int(os.path.basename(folder).split("global_step_")[-1])
                    with open(os.path.join(folder, "data.pt"), "rb") as f:
                        self.train_dataloader.load_state_dict(torch.load(f, weights_only=False))
                    self.policy.load_checkpoint(os.path.join(folder, "policy"))
                    return global_step

                def train(self):
                    self.global_step = self.load_checkpoints()
                    start_epoch = self.global_step // len(self.train_dataloader)
                    for epoch in range(start_epoch, self.cfg.epochs):
                        for i, prompts in enumerate(self.train_dataloader):
                            self.train_step(prompts)
                            self.global_step += 1
                            if self.global_step % self.cfg.ckpt_interval == 0:
                                self.save_checkpoints()
            """,
            title="the step parsed from the checkpoint folder's name, the epoch loop from the restored epoch",
        ),
        good(
            """
            import os

            import torch


            class RayPPOTrainer:
                def load_pretrained(self, path):
                    warmup = self.cfg.warmup_steps
                    state = torch.load(os.path.join(path, "policy.pt"), weights_only=True)
                    self.policy.load_state_dict(state)
                    return warmup

                def train(self):
                    self.global_step = self.load_pretrained(self.cfg.init_from)
                    for epoch in range(self.cfg.epochs):
                        for i, prompts in enumerate(self.train_dataloader):
                            self.train_step(prompts)
                            self.global_step += 1
                            if self.global_step % self.cfg.ckpt_interval == 0:
                                self.save_checkpoints()
            """,
            title="the helper returns a number that is neither read from the checkpoint nor from its location",
        ),
        bad(
            """
            import torch

            global_step = 0
            if args.resume:
                ckpt = torch.load(args.resume, weights_only=True)
                model.load_state_dict(ckpt["model"])
                optimizer.load_state_dict(ckpt["optimizer"])
                global_step = ckpt["step"]
            for epoch in range(global_step // len(train_loader), args.epochs):
                for batch in train_loader:
                    loss = model(batch)
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                    global_step += 1
                    if global_step % args.save_every == 0:
                        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                    "step": global_step}, "last.pt")
            """,
            line=10,
            title="the step restored, the epoch's batches replayed from the first",
        ),
        good(
            """
            import itertools
            import torch

            global_step = 0
            if args.resume:
                ckpt = torch.load(args.resume, weights_only=True)
                model.load_state_dict(ckpt["model"])
                optimizer.load_state_dict(ckpt["optimizer"])
                global_step = ckpt["step"]
            start_epoch, skip = divmod(global_step, len(train_loader))
            for epoch in range(start_epoch, args.epochs):
                batches = itertools.islice(train_loader, skip, None) if epoch == start_epoch else train_loader
                for batch in batches:
                    loss = model(batch)
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                    global_step += 1
                    if global_step % args.save_every == 0:
                        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                    "step": global_step}, "last.pt")
            """,
            title="the consumed batches skipped with islice",
        ),
        bad(
            """
            import torch


            class Trainer:
                def __init__(self, model, optimizer, train_loader):
                    self.model, self.optimizer, self.train_loader = model, optimizer, train_loader
                    self.global_step = 0

                def resume(self, path):
                    state = torch.load(path, weights_only=True)
                    self.model.load_state_dict(state["model"])
                    self.optimizer.load_state_dict(state["optimizer"])
                    self.global_step = state["global_step"]

                def save(self, path):
                    torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                                "global_step": self.global_step}, path)

                def train_epoch(self):
                    for batch in self.train_loader:
                        self.optimizer.zero_grad()
                        self.model(batch).backward()
                        self.optimizer.step()
                        self.global_step += 1
                        if self.global_step % 1000 == 0:
                            self.save("last.pt")
            """,
            line=20,
            title="a Trainer: resume() restores the step, train_epoch() starts the loader over",
        ),
        good(
            """
            import torch


            class Trainer:
                def __init__(self, model, optimizer, train_loader):
                    self.model, self.optimizer, self.train_loader = model, optimizer, train_loader
                    self.global_step = 0

                def resume(self, path):
                    state = torch.load(path, weights_only=True)
                    self.model.load_state_dict(state["model"])
                    self.optimizer.load_state_dict(state["optimizer"])
                    self.global_step = state["global_step"]

                def save(self, path):
                    torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                                "global_step": self.global_step}, path)

                def train_epoch(self):
                    skip = self.global_step % len(self.train_loader)
                    for i, batch in enumerate(self.train_loader):
                        if i < skip:
                            continue
                        self.optimizer.zero_grad()
                        self.model(batch).backward()
                        self.optimizer.step()
                        self.global_step += 1
                        if self.global_step % 1000 == 0:
                            self.save("last.pt")
            """,
            title="the consumed batches skipped with `if i < skip: continue`",
        ),
        bad(
            """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=args.grad_accum)
            model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
            completed_steps = 0
            if args.resume_from_checkpoint:
                state = torch.load(args.resume_from_checkpoint, weights_only=True)
                model.load_state_dict(state["model"])
                optimizer.load_state_dict(state["optimizer"])
                completed_steps = state["completed_steps"]
            active_dataloader = accelerator.skip_first_batches(train_dataloader, completed_steps)
            for batch in active_dataloader:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
                if accelerator.sync_gradients:
                    completed_steps += 1
                    if completed_steps % args.checkpointing_steps == 0:
                        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                    "completed_steps": completed_steps}, "last.pt")
            """,
            line=13,
            title="Accelerate: the skip counts updates while the loader counts micro-batches",
        ),
        good(
            """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=args.grad_accum)
            model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
            completed_steps = 0
            if args.resume_from_checkpoint:
                state = torch.load(args.resume_from_checkpoint, weights_only=True)
                model.load_state_dict(state["model"])
                optimizer.load_state_dict(state["optimizer"])
                completed_steps = state["completed_steps"]
            resume_batches = completed_steps * args.grad_accum
            active_dataloader = accelerator.skip_first_batches(train_dataloader, resume_batches)
            for batch in active_dataloader:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
                if accelerator.sync_gradients:
                    completed_steps += 1
                    if completed_steps % args.checkpointing_steps == 0:
                        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                    "completed_steps": completed_steps}, "last.pt")
            """,
            title="skip_first_batches by the update count times K",
        ),
        good(
            """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=args.grad_accum)
            train_loader = torch.utils.data.DataLoader(corpus, batch_size=8, shuffle=True)
            model, optimizer = accelerator.prepare(model, optimizer)
            updates, skip = 0, 0
            if args.resume:
                state = torch.load(args.resume, weights_only=True)
                model.load_state_dict(state["model"])
                optimizer.load_state_dict(state["optimizer"])
                updates = state["updates"]
                skip = updates * args.grad_accum
            for i, batch in enumerate(train_loader):
                if i < skip:
                    continue
                corpus.curriculum = updates / args.max_updates
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
                if accelerator.sync_gradients:
                    updates += 1
                    if updates % args.save_every == 0:
                        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                    "updates": updates}, "last.pt")
            """,
            title="the dataset gets an attribute from the update count (a curriculum); the skip is the "
                  "`continue` over `updates * K` micro-batches: setting `corpus.curriculum` makes no skip of `corpus`",
        ),
        bad(
            """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=args.grad_accum)
            train_loader = torch.utils.data.DataLoader(corpus, batch_size=8, shuffle=True)
            model, optimizer = accelerator.prepare(model, optimizer)
            updates, skip = 0, 0
            if args.resume:
                state = torch.load(args.resume, weights_only=True)
                model.load_state_dict(state["model"])
                optimizer.load_state_dict(state["optimizer"])
                updates = state["updates"]
                skip = updates
            for i, batch in enumerate(train_loader):
                if i < skip:
                    continue
                corpus.curriculum = updates / args.max_updates
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
                if accelerator.sync_gradients:
                    updates += 1
                    if updates % args.save_every == 0:
                        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                    "updates": updates}, "last.pt")
            """,
            line=14,
            title="the same loop whose `continue` skips only the update count: K times too few micro-batches",
        ),
        good(
            """
            import torch

            def train(args, accelerator, model, optimizer, train_dataloader):
                completed_steps, resume_batches = 0, None
                if args.resume_from_checkpoint:
                    state = torch.load(args.resume_from_checkpoint, weights_only=True)
                    model.load_state_dict(state["model"])
                    optimizer.load_state_dict(state["optimizer"])
                    completed_steps = state["completed_steps"]
                    resume_batches = completed_steps * args.gradient_accumulation_steps
                    first_epoch = resume_batches // len(train_dataloader)
                    resume_batches -= first_epoch * len(train_dataloader)  # into the resumed epoch
                for epoch in range(args.epochs):
                    if resume_batches is not None and epoch == 0:
                        active = accelerator.skip_first_batches(train_dataloader, resume_batches)
                    else:
                        active = train_dataloader
                    for batch in active:
                        with accelerator.accumulate(model):
                            accelerator.backward(model(**batch).loss)
                            optimizer.step()
                            optimizer.zero_grad()
                        if accelerator.sync_gradients:
                            completed_steps += 1
                            if completed_steps % args.checkpointing_steps == 0:
                                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                            "completed_steps": completed_steps}, "last.pt")
            """,
            title="the resume branch skips the update count times K; the other branch skips nothing",
        ),
        bad(
            """
            import torch

            def train(args, accelerator, model, optimizer, train_dataloader):
                completed_steps, resume_batches = 0, None
                if args.resume_from_checkpoint:
                    state = torch.load(args.resume_from_checkpoint, weights_only=True)
                    model.load_state_dict(state["model"])
                    optimizer.load_state_dict(state["optimizer"])
                    completed_steps = state["completed_steps"]
                    resume_batches = completed_steps
                    first_epoch = resume_batches // len(train_dataloader)
                    resume_batches -= first_epoch * len(train_dataloader)  # into the resumed epoch
                for epoch in range(args.epochs):
                    if resume_batches is not None and epoch == 0:
                        active = accelerator.skip_first_batches(train_dataloader, resume_batches)
                    else:
                        active = train_dataloader
                    for batch in active:
                        with accelerator.accumulate(model):
                            accelerator.backward(model(**batch).loss)
                            optimizer.step()
                            optimizer.zero_grad()
                        if accelerator.sync_gradients:
                            completed_steps += 1
                            if completed_steps % args.checkpointing_steps == 0:
                                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                            "completed_steps": completed_steps}, "last.pt")
            """,
            line=18,
            title="the resume branch skips the update count, not the micro-batches",
        ),
        bad(
            """
            import torch


            def save_checkpoint(model, optimizer, step):
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                           f"ckpt/{step:08d}.pt")


            def train(model, optimizer, loader, resume=None):
                step = 0
                if resume is not None:
                    checkpoint = torch.load(resume, map_location="cpu", weights_only=True)
                    model.load_state_dict(checkpoint["model"])
                    optimizer.load_state_dict(checkpoint["optim"])
                    step = checkpoint.get("iteration", 0)
                while step < 100_000:
                    for x, y in loader:
                        optimizer.zero_grad()
                        model(x, y).backward()
                        optimizer.step()
                        step += 1
                        if step % 5000 == 0:
                            save_checkpoint(model, optimizer, step)
            """,
            line=17,
            title="a step-bounded run: a while loop around the loader, a save helper",
        ),
        good(
            """
            import torch


            def save_checkpoint(model, optimizer, loader, step):
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "loader": loader.state_dict(), "step": step}, f"ckpt/{step:08d}.pt")


            def train(model, optimizer, loader, resume=None):
                step = 0
                if resume is not None:
                    checkpoint = torch.load(resume, map_location="cpu", weights_only=True)
                    model.load_state_dict(checkpoint["model"])
                    optimizer.load_state_dict(checkpoint["optim"])
                    loader.load_state_dict(checkpoint["loader"])
                    step = checkpoint.get("iteration", 0)
                while step < 100_000:
                    for x, y in loader:
                        optimizer.zero_grad()
                        model(x, y).backward()
                        optimizer.step()
                        step += 1
                        if step % 5000 == 0:
                            save_checkpoint(model, optimizer, loader, step)
            """,
            title="the same run with a stateful loader handed in: its position is restored with the weights",
        ),
        good(
            """
            import torch


            def random_batches(data, batch_size):
                while True:
                    yield data[torch.randint(len(data), (batch_size,))]


            def train(model, optimizer, data, resume=None):
                step = 0
                if resume is not None:
                    checkpoint = torch.load(resume, map_location="cpu", weights_only=True)
                    model.load_state_dict(checkpoint["model"])
                    optimizer.load_state_dict(checkpoint["optim"])
                    step = checkpoint["step"]
                for x in random_batches(data, 64):
                    optimizer.zero_grad()
                    model(x).backward()
                    optimizer.step()
                    step += 1
                    if step % 5000 == 0:
                        torch.save({"model": model.state_dict(), "optim": optimizer.state_dict(), "step": step},
                                   "last.pt")
                    if step == 100_000:
                        break
            """,
            title="batches drawn at random by a generator of the script: no epoch order to replay",
        ),
        bad(
            """
            import os
            from accelerate import Accelerator


            def main(args, model, optimizer, train_dataloader):
                accelerator = Accelerator()
                model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
                completed_steps, starting_epoch = 0, 0
                if args.resume_from_checkpoint:
                    accelerator.load_state(args.resume_from_checkpoint)
                    folder = os.path.basename(args.resume_from_checkpoint.rstrip("/"))
                    completed_steps = int(folder.replace("step_", ""))
                    starting_epoch = completed_steps // len(train_dataloader)
                for epoch in range(starting_epoch, args.num_train_epochs):
                    model.train()
                    for step, batch in enumerate(train_dataloader):
                        loss = model(**batch).loss
                        accelerator.backward(loss)
                        optimizer.step()
                        optimizer.zero_grad()
                        completed_steps += 1
                        if completed_steps % args.checkpointing_steps == 0:
                            accelerator.save_state(f"{args.output_dir}/step_{completed_steps}")
            """,
            line=16,
            title="Accelerate: load_state restores the step from the folder name, the epoch restarts at batch 0",
        ),
        good(
            """
            import os
            from accelerate import Accelerator


            def main(args, model, optimizer, train_dataloader):
                accelerator = Accelerator()
                model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
                completed_steps, starting_epoch, resume_step = 0, 0, None
                if args.resume_from_checkpoint:
                    accelerator.load_state(args.resume_from_checkpoint)
                    folder = os.path.basename(args.resume_from_checkpoint.rstrip("/"))
                    completed_steps = int(folder.replace("step_", ""))
                    starting_epoch = completed_steps // len(train_dataloader)
                    resume_step = completed_steps - starting_epoch * len(train_dataloader)
                for epoch in range(starting_epoch, args.num_train_epochs):
                    model.train()
                    if resume_step is not None and epoch == starting_epoch:
                        active_dataloader = accelerator.skip_first_batches(train_dataloader, resume_step)
                    else:
                        active_dataloader = train_dataloader
                    for step, batch in enumerate(active_dataloader):
                        loss = model(**batch).loss
                        accelerator.backward(loss)
                        optimizer.step()
                        optimizer.zero_grad()
                        completed_steps += 1
                        if completed_steps % args.checkpointing_steps == 0:
                            accelerator.save_state(f"{args.output_dir}/step_{completed_steps}")
            """,
            title="Accelerate: skip_first_batches in the resumed epoch only",
        ),
        good(
            """
            import torch
            from torchdata.stateful_dataloader import StatefulDataLoader

            loader = StatefulDataLoader(train_set, batch_size=32, shuffle=True)
            step = 0
            if args.resume:
                ckpt = torch.load(args.resume, weights_only=True)
                model.load_state_dict(ckpt["model"])
                optimizer.load_state_dict(ckpt["optimizer"])
                loader.load_state_dict(ckpt["loader"])
                step = ckpt["step"]
            for epoch in range(args.epochs):
                for batch in loader:
                    optimizer.zero_grad()
                    model(batch).backward()
                    optimizer.step()
                    step += 1
                    if step % 500 == 0:
                        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                    "loader": loader.state_dict(), "step": step}, "last.pt")
            """,
            title="a stateful loader whose position is restored",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            step = 0
            if args.resume:
                ckpt = torch.load(args.resume, weights_only=True)
                model.load_state_dict(ckpt["model"])
                optimizer.load_state_dict(ckpt["optimizer"])
                step = ckpt["step"]
            sampler = StepIndexedSampler(len(train_set), seed=0, start=step * args.batch_size)
            loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
            for batch in loader:
                optimizer.zero_grad()
                model(batch).backward()
                optimizer.step()
                step += 1
                if step % 500 == 0:
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                "step": step}, "last.pt")
            """,
            title="a step-indexed permutation that starts at the restored step",
        ),
        good(
            """
            import torch

            start_epoch = 0
            if args.resume:
                ckpt = torch.load(args.resume, weights_only=True)
                model.load_state_dict(ckpt["model"])
                optimizer.load_state_dict(ckpt["optimizer"])
                start_epoch = ckpt["epoch"] + 1
            for epoch in range(start_epoch, args.epochs):
                for x, y in train_loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "last.pt")
            """,
            title="checkpoints at the end of the epoch: the next epoch starts at its first batch",
        ),
        good(
            """
            import torch

            start_epoch = 0
            if args.resume:
                ckpt = torch.load(args.resume, weights_only=True)
                model.load_state_dict(ckpt["model"])
                optimizer.load_state_dict(ckpt["optimizer"])
                start_epoch = ckpt["epoch"] + 1
            best = float("inf")
            for epoch in range(start_epoch, args.epochs):
                for step, (x, y) in enumerate(train_loader):
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if loss.item() < best:
                        best = loss.item()
                        torch.save(model.state_dict(), "best.pt")
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "last.pt")
            """,
            title="inside the epoch only a weights export; the resume point is written at the epoch's end",
        ),
        good(
            """
            import torch

            iter_num = 0
            if init_from == "resume":
                checkpoint = torch.load(ckpt_path, map_location=device, weights_only=True)
                model.load_state_dict(checkpoint["model"])
                optimizer.load_state_dict(checkpoint["optimizer"])
                iter_num = checkpoint["iter_num"]
            while iter_num < max_iters:
                X, Y = get_batch("train")
                _, loss = model(X, Y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                iter_num += 1
                if iter_num % eval_interval == 0:
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                "iter_num": iter_num}, "ckpt.pt")
            """,
            title="random batches drawn by step: there is no epoch order to resume",
        ),
        good(
            """
            import torch

            def train(model, optimizer, loader, resume=None):
                step = 0
                if resume is not None:
                    ckpt = torch.load(resume, weights_only=True)
                    model.load_state_dict(ckpt["model"])
                    optimizer.load_state_dict(ckpt["optimizer"])
                    step = ckpt["step"]
                resume_batch = step % len(loader)
                for epoch in range(step // len(loader), 10):
                    for i, (x, y) in enumerate(loader):
                        if epoch == step // len(loader) and i < resume_batch:
                            continue
                        optimizer.zero_grad()
                        model(x, y).backward()
                        optimizer.step()
                        step += 1
                        if step % 100 == 0:
                            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                        "step": step}, "last.pt")
            """,
            title="the skip tests a value derived from the restored step",
        ),
    )

    def check(self, ctx):
        reported = set()
        for finding in self._check(ctx):
            reported.add(id(finding.node))
            yield finding
        for restart in _epoch_restarts(ctx, ctx.model(dataflow)):
            inner, outer, counter, via, stop = restart
            finding = self.report(
                inner,
                f"the resume restores `{counter}` (in `{via}`), but the epoch loop around this one starts "
                f"again at epoch 0 (`range({ctx.code_for(stop).strip()})`): the epochs the interrupted run "
                "completed are trained again and the run goes past its planned length; start the epoch "
                f"loop at the restored epoch (`{counter} // len(loader)`) or skip the completed ones",
                evidence=[premise(f"`{via}` restores `{counter}` from a checkpoint before the loops", restart.call,
                                  "call"),
                          premise(f"the loop advances `{counter}`", restart.advance, "use"),
                          premise("the epoch loop counts from 0, whatever was restored", outer.iter, "use")])
            if id(finding.node) not in reported:
                yield finding

    def _check(self, ctx):
        flow = ctx.model(dataflow)
        training = ctx.model(training_model)
        loops = [loop for loop in training.loops if isinstance(loop.node, cst.For) and loop.innermost]
        for restore in _restores(ctx, flow):
            for loop in _loops_after(flow, loops, restore):
                node = loop.node
                loader = loader_of_loop(flow, node)
                iterated = _iterated_chain(ctx, flow, node)
                data = None
                if loader is None and not iterated:
                    data = _data_of_loop(ctx, flow, node)
                    if data is None:
                        continue
                    loader, iterated = data, _iterated_chain(ctx, flow, node, data=True)
                if not _after_restore(ctx, flow, restore, node):
                    continue
                used = sorted((c for c in restore["counters"] if _used_by(ctx, flow, c, node)),
                              key=lambda c: (not _incremented_in(c, node), c))  # the loop's own counter first
                if not used:
                    continue  # nothing restored drives this loop
                restore = dict(restore, counter=used[0])
                if not _saves_inside(ctx, loop):
                    continue  # checkpoints only between epochs: the next epoch starts at its first batch
                derived = set(restore["derived"])
                function = ctx.index.function_at(node)
                if function is not None and flow._owner(node) is not restore["owner"]:
                    # a `self.<counter>` restored by another method: the loop's own method computes
                    # its skip from it (`skip = self.step % len(self.loader)`)
                    for counter in restore["counters"]:
                        derived |= _derived_names(ctx.index, function, counter)
                skip = _skip(ctx, flow, node, iterated, derived)
                if skip is None and not _position_restored(ctx, flow, restore, node, loader):
                    yield self.report(
                        node,
                        f"the resume restores `{restore['counter']}` from the checkpoint, which is written in the "
                        "middle of an epoch (inside this loop), but this loop iterates the loader from its first "
                        "batch: the batches consumed before the checkpoint are trained on again; skip them "
                        "(`skip_first_batches`, `itertools.islice`) or restore the sampler position",
                        evidence=_evidence_of(ctx, restore, node, loop, data))
                    break
                if skip is not None and loop.accumulates and _counts_updates(ctx, training, loop, restore) \
                        and not _scaled(ctx, flow, skip):
                    yield self.report(
                        node,
                        f"the skip `{ctx.code_for(skip).strip()}` counts optimizer updates (`{restore['counter']}` "
                        "grows once per update) while the loader yields micro-batches: under gradient accumulation "
                        "it skips K times too few batches; skip the restored update count times K",
                        evidence=[*_evidence_of(ctx, restore, node, loop, data),
                                  premise(f"the skip `{ctx.code_for(skip).strip()}` counts updates", skip, "use")])
                    break


class _Restart(tuple):
    """(inner loader loop, epoch loop, counter, the call that restores it, the epoch range's stop),
    with the restoring call and the counter's advance in the loop for the evidence."""

    call: cst.Call
    advance: cst.CSTNode


def _epoch_restarts(ctx, flow):
    """Epoch loops from 0 (`for epoch in range(E)`) around a loop over a loader, after a same-file
    helper restored the loop's step counter from a checkpoint: `self.global_step =
    self.load_checkpoints()` (a helper that reads a checkpoint and returns the step), or
    `self._load_checkpoint()` (a method that reads one and sets `self.global_steps`). The counter
    is this loop's (advanced in it), the range does not use it or anything computed from it, and
    no `continue` skips epochs."""
    index = ctx.index
    for function in index.functions:
        restored = _counters_restored_by_helpers(ctx, function)
        if not restored:
            continue
        for outer in walk(function.node.body):
            if not isinstance(outer, cst.For) or index.function_at(outer) is not function:
                continue
            stop = _range_from_zero(outer.iter)
            if stop is None or any(isinstance(n, cst.Continue) for n in walk(outer.body)
                                   if _only_in(index, n, outer)):
                continue
            inner = next((n for n in walk(outer.body) if isinstance(n, cst.For) and n is not outer
                          and index.function_at(n) is function and loader_of_loop(flow, n) is not None), None)
            if inner is None:
                continue
            for counter, call in restored.items():
                if not flow.before(call, outer):
                    continue
                # a step counter: advanced by a constant step in the loop (a restored running loss
                # summed there is none)
                advance = next((n for n in walk(outer.body) if isinstance(n, cst.AugAssign)
                                and isinstance(n.operator, cst.AddAssign) and isinstance(n.value, cst.Integer)
                                and dotted_name(n.target) == counter), None)
                if advance is None:
                    continue
                derived = _derived_names(index, function, counter)
                if _mentions(stop, derived):
                    continue
                via = ctx.code_for(call.func).strip() + "()"
                restart = _Restart((inner, outer, counter, via, stop))
                restart.call, restart.advance = call, advance
                yield restart
                break


def _only_in(index, node, loop) -> bool:
    """`node` belongs to `loop` itself, not to a loop nested in it (a `continue` of the inner loop
    skips batches, not epochs)."""
    for ancestor in index.ancestors(node):
        if ancestor is loop:
            return True
        if isinstance(ancestor, (cst.For, cst.While, cst.FunctionDef)):
            return False
    return False


def _range_from_zero(iterable) -> cst.BaseExpression | None:
    """The stop of `range(E)` / `range(0, E)`, or None."""
    if not (isinstance(iterable, cst.Call) and dotted_name(iterable.func) == "range") or \
            any(a.keyword or a.star for a in iterable.args):
        return None
    args = [a.value for a in iterable.args]
    if len(args) == 1:
        return args[0]
    if len(args) == 2 and isinstance(args[0], cst.Integer) and args[0].value == "0":
        return args[1]
    return None


def _counters_restored_by_helpers(ctx, function) -> dict[str, cst.Call]:
    """Step counters (`self.global_step`, `global_step`) a call in `function` restores through a
    same-file helper that reads a checkpoint: assigned from what it returns, or set by it on `self`."""
    index = ctx.index
    found: dict[str, cst.Call] = {}
    reads = ctx.model(_checkpoint_readers)
    for node in walk(function.node.body):
        if not isinstance(node, cst.Call) or index.function_at(node) is not function:
            continue
        target = index.callee(node, index.scope_at(node))
        if target is None or target is function or not reads(target):
            continue
        parent = index.parent(node)
        loaded = _loaded_names(ctx, target)
        if isinstance(parent, cst.Assign) and parent.value is node and len(parent.targets) == 1:
            # `self.global_step = self.load_checkpoints()`: the helper returns what it read
            name = dotted_name(parent.targets[0].target)
            if name and any(isinstance(r, cst.Return) and r.value is not None and index.function_at(r) is target
                            and _mentions(r.value, loaded) for r in walk(target.node.body)):
                found.setdefault(name, node)
        elif isinstance(parent, cst.Expr) and isinstance(node.func, cst.Attribute) and \
                dotted_name(node.func.value) == "self":
            # `self._load_checkpoint()` setting `self.global_steps = state["global_steps"]`
            for assign in walk(target.node.body):
                if isinstance(assign, cst.Assign) and index.function_at(assign) is target \
                        and _mentions(assign.value, loaded):
                    for t in assign.targets:
                        name = dotted_name(t.target)
                        if name and name.startswith("self."):
                            found.setdefault(name, node)
    return found


def _loaded_names(ctx, target) -> set[str]:
    """The names a helper binds to a checkpoint it reads (`state = torch.load(...)`,
    `ckpt = self.engine.load_checkpoint(...)`): a value read from one of them was restored. So is a
    value computed from the checkpoint's location (`int(folder.split("global_step_")[-1])`,
    `step_of(path)` where the helper loads `torch.load(os.path.join(folder, "state.pt"))`): the
    step is read from the checkpoint's name."""
    names = set()
    for node in walk(target.node.body):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and ctx.index.function_at(node) is target:
            if _is_checkpoint_read(ctx, target, node.value):
                names |= {n for t in node.targets for n in [dotted_name(t.target)] if n}
    return names | _location_names(ctx, target)


def _is_checkpoint_read(ctx, target, call: cst.Call) -> bool:
    func = call.func
    return ctx.index.resolve(func, target.scope) in LOAD_FUNCTIONS or \
        isinstance(func, cst.Attribute) and func.attr.value == "load_checkpoint"


def _location_names(ctx, target) -> set[str]:
    """The local names of a helper that hold where it reads a checkpoint from (the names in the
    argument of its `torch.load(...)`/`.load_checkpoint(...)` and the names they are computed
    from, `with open(path) as f` included), and the names computed from those. Only names the
    helper binds (its parameters, assignments, `with ... as` targets) count: a module (`os`) or
    `self` is no location."""
    index = ctx.index
    bindings: list[tuple[set[str], cst.BaseExpression]] = []  # (bound names, the value they get)
    for node in walk(target.node.body):
        if index.function_at(node) is not target:
            continue
        if isinstance(node, cst.Assign):
            bindings.append(({n for t in node.targets if isinstance(t.target, cst.Name)
                              for n in [t.target.value]}, node.value))
        elif isinstance(node, cst.AnnAssign) and node.value is not None and isinstance(node.target, cst.Name):
            bindings.append(({node.target.value}, node.value))
        elif isinstance(node, cst.WithItem) and node.asname is not None and isinstance(node.asname.name, cst.Name):
            bindings.append(({node.asname.name.value}, node.item))
    local = {p.name.value for p in walk(target.node.params) if isinstance(p, cst.Param)} - {"self", "cls"}
    for names, _ in bindings:
        local |= names

    def names_in(expr) -> set[str]:
        return {n.value for n in walk(expr) if isinstance(n, cst.Name) and n.value in local}

    location: set[str] = set()
    for node in walk(target.node.body):
        if isinstance(node, cst.Call) and index.function_at(node) is target and _is_checkpoint_read(ctx, target, node):
            for arg in node.args:
                location |= names_in(arg.value)
    if not location:
        return set()
    for _ in range(4):  # where the location comes from: `path = os.path.join(folder, "state.pt")`
        grown = set(location)
        for names, value in bindings:
            if names & location:
                grown |= names_in(value)
        if grown == location:
            break
        location = grown
    derived = set(location)
    for _ in range(4):  # what is computed from it: `step = int(folder.split("global_step_")[-1])`
        grown = set(derived)
        for names, value in bindings:
            if names_in(value) & derived:
                grown |= names
        if grown == derived:
            break
        derived = grown
    return derived


def _checkpoint_readers(ctx):
    """`reads(function)`: `_reads_checkpoint`, answered once per function of the file."""
    known: dict = {}

    def reads(target) -> bool:
        if target.node not in known:
            known[target.node] = _reads_checkpoint(ctx, target)
        return known[target.node]
    return reads


def _reads_checkpoint(ctx, target) -> bool:
    """The helper loads a checkpoint itself: `torch.load`, or a `load_state_dict`/`load_checkpoint`."""
    for node in walk(target.node.body):
        if isinstance(node, cst.Call):
            if ctx.index.resolve(node.func, target.scope) in LOAD_FUNCTIONS:
                return True
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("load_state_dict", "load_checkpoint"):
                return True
    return False


def _derived_names(index, function, counter: str) -> set[str]:
    """The counter and the names of `function` computed from it (`start_epoch = step // n`)."""
    derived = {counter}
    assigns = [n for n in walk(function.node.body) if isinstance(n, cst.Assign) and index.function_at(n) is function]
    for _ in range(3):
        for node in assigns:
            if _mentions(node.value, derived):
                derived |= {name for t in node.targets for name in [dotted_name(t.target)] if name}
    return derived


def _evidence_of(ctx, restore, node, loop, data=None) -> list:
    load = restore.get("load") if isinstance(restore, dict) else None
    found = [premise(f"the resume restores `{restore['counter']}` from a checkpoint",
                     load if isinstance(load, cst.CSTNode) else node, "call")]
    found.append(premise("a resume checkpoint is written inside this loop, mid-epoch", loop.node, "call"))
    if data is not None:  # known by what the loop does with it, not by a loader's name or construction
        found.append(premise(f"the loop hands each element of `{ctx.code_for(data).strip()}` to the calls of a "
                             "loop that steps the optimizer: it iterates the training data", data, "use"))
    found.append(premise("this loop iterates the loader from its first batch", node, "use"))
    return found


def _restores(ctx, flow):
    """Each resume that restores a counter: {"load", "counter" (the first counter restored),
    "counters", "derived" (names computed from the checkpoint), "owner", "loaded"}. A resume is
    a `torch.load` whose step/epoch key is read into a counter, or an Accelerator's `load_state`
    followed, in the same block, by counters computed from what was loaded (the checkpoint's
    folder name, `step_1200`)."""
    index = ctx.index
    role_model = ctx.model(roles)
    windows = _ResumeWindows(ctx, flow)
    for site in index.calls:
        func = site.node.func
        owner = flow._owner(site.node)
        assigns = None
        counters: list[str] = []
        loaded = None
        if index.resolve(func, site.scope) in LOAD_FUNCTIONS:
            parent = index.parent(site.node)
            if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1):
                continue
            loaded = dotted_name(parent.targets[0].target)
            if loaded is None:
                continue
            assigns = windows.assignments_after(site.node, owner)
            for node in assigns:
                if isinstance(node, cst.Assign) and _reads_key(node.value, loaded, _STEP_KEYS + _EPOCH_KEYS):
                    counters += [n for n in (dotted_name(t.target) for t in node.targets) if n]
        elif isinstance(func, cst.Attribute) and func.attr.value == "load_state" \
                and role_model.of(func.value, site.scope) == ACCELERATOR:
            block = index.enclosing_statement(site.node)
            holder = index.parent(index.parent(block)) if isinstance(index.parent(block), cst.SimpleStatementLine) \
                else None
            if not isinstance(holder, cst.IndentedBlock):
                continue
            assigns = windows.assignments_after(site.node, owner)
            counters = [name for node in _assignments(index, holder) if flow.before(site.node, node)
                        and isinstance(node, cst.Assign) and not _constant(node.value)
                        for name in (dotted_name(t.target) for t in node.targets) if name]
        if not counters:
            continue
        derived = set(counters) | ({loaded} if loaded else set())
        for _ in range(3):  # names computed from the counters (`resume_step = step % len(loader)`)
            for node in assigns:
                value = node.value
                if value is None or isinstance(node, cst.AugAssign) or not _mentions(value, derived):
                    continue
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                for target in targets:
                    for name in _stored_names(target):
                        if loaded is None or name != loaded and not name.startswith(loaded + "."):
                            derived.add(name)
        yield {"load": site.node, "counter": counters[0], "counters": set(counters), "derived": derived,
               "owner": owner, "loaded": loaded, "until": windows.until(site.node, owner)}


def _stored_names(target: cst.BaseExpression) -> list[str]:
    """The names an assignment target stores a value in: a name, the attribute `obj.attr` itself
    (not `obj`: `dataset.progress = step / total` sets one attribute of the dataset, and the
    dataset, handed to a loader, is no position computed from the counter), a container written
    by item (`starts[k] = step`), the elements of a tuple or list target."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in _stored_names(element.value)]
    if isinstance(target, cst.StarredElement):
        return _stored_names(target.value)
    if isinstance(target, cst.Subscript):
        target = target.value
    name = dotted_name(target) if isinstance(target, (cst.Name, cst.Attribute)) else None
    return [name] if name else []


class _ResumeWindows:
    """Where a resume's values live: from its load to the next load in the same function (a later
    load rebinds what it restores). A script that resumes in many places is read once per
    function, and each resume looks only at its own stretch, not at the whole file again."""

    def __init__(self, ctx, flow) -> None:
        self.index, self.flow = ctx.index, flow
        self._assigns: dict[int, tuple[list[int], list]] = {}
        self._loads: dict[int, list[int]] = {}
        for site in self.index.calls:
            func = site.node.func
            if self.index.resolve(func, site.scope) in LOAD_FUNCTIONS or \
                    isinstance(func, cst.Attribute) and func.attr.value == "load_state":
                owner = flow._owner(site.node)
                self._loads.setdefault(id(owner), []).append(flow.position(site.node))
        for starts in self._loads.values():
            starts.sort()

    def until(self, load: cst.Call, owner) -> int:
        """The position of the next load in `owner` after `load` (or past the end)."""
        starts = self._loads.get(id(owner), [])
        i = bisect.bisect_right(starts, self.flow.position(load))
        return starts[i] if i < len(starts) else sys.maxsize

    def assignments_after(self, load: cst.Call, owner) -> list:
        """The assignments of `owner` between `load` and the next load there."""
        key = id(owner)
        if key not in self._assigns:
            nodes = _assignments(self.index, owner)  # in source order, as positions count
            self._assigns[key] = ([self.flow.position(n) for n in nodes], nodes)
        positions, nodes = self._assigns[key]
        start = bisect.bisect_right(positions, self.flow.position(load))
        stop = bisect.bisect_left(positions, self.until(load, owner))
        return nodes[start:stop]


_ASSIGNMENTS = frozenset((cst.Assign, cst.AugAssign, cst.AnnAssign))


def _assignments(index, owner) -> list[cst.CSTNode]:
    """The assignments under `owner`, not those inside a nested def, class or lambda."""
    return [n for n in index.scope_nodes(owner) if type(n) in _ASSIGNMENTS]  # `type(...) in`: no ABC isinstance


def _constant(expr) -> bool:
    return isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.Name)) and not (
        isinstance(expr, cst.Name) and expr.value not in ("None", "True", "False"))


def _incremented_in(counter: str, loop) -> bool:
    return any(isinstance(n, cst.AugAssign) and dotted_name(n.target) == counter for n in walk(loop.body))


def _used_by(ctx, flow, counter: str, loop) -> bool:
    """The restored counter drives the loop: read in its body or in what its epoch loop iterates."""
    places = [loop.body]
    outer = next((a for a in ctx.index.ancestors(loop) if isinstance(a, (cst.For, cst.While))
                  and flow._owner(a) is flow._owner(loop)), None)
    if isinstance(outer, cst.For):
        places.append(outer.iter)
    elif isinstance(outer, cst.While):
        places.append(outer.test)
    return any(_mentions(place, {counter}) for place in places)


def _reads_key(expr, loaded: str, words) -> list[str]:
    """Keys of the loaded checkpoint that `expr` reads and that name one of `words`."""
    found = []
    for node in walk(expr):
        key = None
        if isinstance(node, cst.Subscript) and dotted_name(node.value) == loaded \
                and isinstance(node.slice[0].slice, cst.Index):
            key = string_value(node.slice[0].slice.value)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get" \
                and dotted_name(node.func.value) == loaded and node.args:
            key = string_value(node.args[0].value)
        if key and any(word in key.lower() for word in words):
            found.append(key)
    return found


def _mentions(expr, names: set[str]) -> bool:
    return any(type(n) in _NAME_NODES and dotted_name(n) in names for n in walk(expr))


_NAME_NODES = frozenset((cst.Name, cst.Attribute))  # `type(...) in`: no ABC isinstance per node


def _loops_after(flow, loops, restore) -> list:
    """The loops a resume's counters can drive: in its function, between the load and the next load
    there; in other functions only when it restores a `self.<counter>` (see `_after_restore`)."""
    owner, start, until = restore["owner"], flow.position(restore["load"]), restore["until"]
    members = any(c.startswith("self.") for c in restore["counters"])
    found = []
    for loop in loops:
        if flow._owner(loop.node) is owner:  # positions are counted within one function
            if start < flow.position(loop.node) < until:
                found.append(loop)
        elif members:
            found.append(loop)
    return found


def _after_restore(ctx, flow, restore, loop) -> bool:
    """The loop runs after the resume: later in the same function, or in a method of the same class
    that reads a restored `self.<counter>`."""
    owner = restore["owner"]
    if flow._owner(loop) is owner:
        return flow.before(restore["load"], loop)
    members = {c for c in restore["counters"] if c.startswith("self.")}
    if not members:
        return False
    here = ctx.index.function_at(loop)
    there = ctx.index.function_at(restore["load"])
    if here is None or there is None or here.class_name is None or here.class_name != there.class_name:
        return False
    return any(isinstance(n, cst.Attribute) and dotted_name(n) in members for n in walk(here.node.body))


def _iterated_chain(ctx, flow, loop, data: bool = False) -> list[cst.BaseExpression]:
    """What the loop iterates and the expressions that iterable was bound from (one level of
    names): `for batch in active_dataloader` after `active_dataloader = skip_first_batches(...)`.
    Empty unless one of them is a loader, or `data` (the loop is shown to iterate the training
    data by `_data_of_loop`)."""
    chain = [loop.iter]
    expr = loop.iter
    for _ in range(3):
        if isinstance(expr, cst.Call) and expr.args:
            expr = expr.args[0].value
            chain.append(expr)
            continue
        if isinstance(expr, cst.Name):
            # every assignment of the name before the loop (`active = skip_first_batches(...)` in one
            # branch, `active = train_dataloader` in the other)
            values = [b.value for b in flow.bindings_in_function(expr.value, loop)
                      if b.kind == "assign" and b.value is not None and flow.before(b.node, loop)]
            if values:
                chain += values[:-1]
                expr = values[-1]
                chain.append(expr)
                continue
        break
    found = data or any(_is_loaderish(ctx, flow, e) for e in chain)
    return chain if found else []


# what a loop may iterate that is no data in an epoch order: counts, one-shot iterators, endless streams
_ORDERLESS = frozenset({"range", "iter", "next", "itertools.count", "itertools.cycle", "itertools.repeat"})


def _data_of_loop(ctx, flow, loop) -> cst.BaseExpression | None:
    """What a `for` loop iterates when its code shows it is the data the loop trains on, whatever
    it is called: each element is handed to a call in the body (`model(batch)`,
    `self.update_policy(batch)`), and the iterable is a collection iterated from its first element
    every time the loop starts: a name or an attribute (a parameter, `self.<attr>`), through calls
    that hand on their first argument (`enumerate`, `tqdm`, `accelerator.skip_first_batches`) and
    the assignments before the loop. Not a count (`range`), an iterator (`iter(...)`, `cycle`), or
    what a function of this file makes (a generator draws in whatever order its code decides)."""
    if not isinstance(loop, cst.For):
        return None
    elements = {n.value for n in walk(loop.target) if type(n) is cst.Name}
    handed = any(type(n) is cst.Call and any(type(m) is cst.Name and m.value in elements
                                                for a in n.args for m in walk(a.value))
                 for n in walk(loop.body))
    if not elements or not handed:
        return None
    return loop.iter if _restartable(ctx, flow, loop.iter, loop, 0) else None


def _restartable(ctx, flow, expr, loop, depth: int) -> bool:
    """`expr` is a collection that a new `for` iterates from its start (see `_data_of_loop`)."""
    if depth > 4:
        return False
    index = ctx.index
    scope = flow.scope_of(expr)
    if isinstance(expr, cst.Call):
        if index.resolve(expr.func, scope) in _ORDERLESS or index.callee(expr, scope) is not None:
            return False
        args = positional_args(expr)
        return bool(args) and _restartable(ctx, flow, args[0].value, loop, depth + 1)
    if isinstance(expr, cst.Name):
        if expr.value in ("None", "True", "False"):
            return False
        values = [b.value for b in flow.bindings_in_function(expr.value, expr)
                  if b.kind == "assign" and b.value is not None and flow.before(b.node, expr)]
        return all(_restartable(ctx, flow, v, loop, depth + 1) for v in values)
    if isinstance(expr, cst.Attribute):
        if isinstance(expr.value, cst.Name) and expr.value.value == "self":
            values = index.self_attribute_values(expr.attr.value, scope)
            return all(_restartable(ctx, flow, v, loop, depth + 1) for v in values if v is not None)
        return isinstance(expr.value, (cst.Name, cst.Attribute))
    return False


def _is_loaderish(ctx, flow, expr) -> bool:
    return flow.is_loader(expr, flow.scope_of(expr)) or (
        isinstance(expr, cst.Call) and any(flow.is_loader(a.value, flow.scope_of(expr)) for a in expr.args))


def _skip(ctx, flow, loop, iterated, derived) -> cst.CSTNode | None:
    """What skips the consumed batches: a call taking the restored counter that the loop's
    iterable comes from, or an `if <derived>: continue` in the loop body."""
    for expr in iterated or [loop.iter]:
        for node in walk(expr):
            if isinstance(node, cst.Call) and any(_mentions(a.value, derived) for a in node.args):
                return _skip_argument(node, derived)
            if isinstance(node, cst.IfExp) and _mentions(node.test, derived):
                return node
    for node in walk(loop.body):
        if isinstance(node, cst.If) and _mentions(node.test, derived) \
                and any(isinstance(s, cst.Continue) for s in walk(node.body)):
            return node.test
    return None


def _skip_argument(call: cst.Call, derived) -> cst.CSTNode:
    for arg in call.args:
        if _mentions(arg.value, derived):
            return arg.value
    return call


def _position_restored(ctx, flow, restore, loop, loader) -> bool:
    """The loader's or sampler's position comes from the checkpoint: a `load_state_dict`/`set_state`
    of the checkpoint into an object that is no model, optimizer, scheduler or scaler, or a loader
    (or its sampler) built from a value derived from it."""
    derived = restore["derived"]
    index = ctx.index
    role_model = ctx.model(roles)
    for call in calls_in(restore["owner"]):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _POSITION_METHODS \
                and any(_mentions(a.value, derived) for a in call.args):
            role = role_model.of(func.value, index.scope_at(call))
            if role not in (MODEL, ENGINE, OPTIMIZER, SCHEDULER, SCALER) and not _called(ctx, flow, func.value, call):
                return True
    if loader is not None:
        built = loader_constructor(flow, loader)
        if built is not None:
            for arg in built.args:
                value = arg.value
                if _mentions(value, derived):
                    return True
                if isinstance(value, cst.Name):
                    binding = flow.reaching(value)
                    if binding is not None and binding.value is not None and _mentions(binding.value, derived):
                        return True
    return False


def _called(ctx, flow, receiver, at) -> bool:
    """`receiver` is itself called (`model(batch)`, `self.net(x)`) where it is known (its function;
    the class, for `self.<attr>`): a module run forward, whatever it is called, whose `load_state_dict`
    restores weights, not a data position."""
    name = dotted_name(receiver) if isinstance(receiver, (cst.Name, cst.Attribute)) else None
    if name is None:
        return False
    index = ctx.index
    klass = index.function_at(at).class_name if name.startswith("self.") and index.function_at(at) else None
    for site in index.calls:
        if dotted_name(site.node.func) != name:
            continue
        if klass is not None:
            function = index.function_at(site.node)
            if function is not None and function.class_name == klass:
                return True
        elif flow._owner(site.node) is flow._owner(at):
            return True
    return False


def _saves_inside(ctx, loop) -> bool:
    """A resume checkpoint is written inside the loop over the loader (directly or through a
    helper; a weights-only export there does not count)."""
    index = ctx.index
    checkpoints = ctx.model(checkpoint_model)
    # TL404's answer to "is this a resume point": a weights file that no load is shown to read
    # back (`read_back` unknown) is none here either
    resume_points = {resume.save.node for resume in checkpoints.resume_saves()
                     if resume.read_back is None or resume.read_back.proven}
    # saves the checkpoint model reads, helpers' included (`atomic_save(model.state_dict(), "best.pt")`)
    judged = {save.node for save in checkpoints.saves}
    for ref in loop.calls:
        if ref.node in judged:
            if ref.node in resume_points:
                return True
            continue
        func = ref.node.func
        name = index.resolve(func, ref.scope)
        if name in SAVE_FUNCTIONS:
            if ref.node in resume_points:  # a weights export (`best.pt`) is no resume point
                return True
            continue
        if isinstance(func, cst.Attribute) and func.attr.value in _SAVE_METHODS:
            return True
        summary = callable_summary(index, func, ref.scope, SAVE_WORDS)
        if summary is not None and summary.saves:
            return True
    return False


def _counts_updates(ctx, training, loop, restore) -> bool:
    """A restored counter is incremented once per optimizer update in the loop."""
    for node in walk(loop.node.body):
        if isinstance(node, cst.AugAssign) and dotted_name(node.target) in restore["counters"] \
                and training.runs_per_update(loop, node):
            return True
    return False


def _scaled(ctx, flow, skip, depth: int = 0) -> bool:
    """The skip multiplies by something (the accumulation factor), here or in the names it reads.
    A name bound on several branches (`active = skip_first_batches(...)` when resuming, `active =
    loader` otherwise) is scaled when a binding before the use is: the other branches skip nothing."""
    for node in walk(skip):
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
            return True
        if isinstance(node, cst.Name) and depth < 3:
            reaching = flow.reaching(node)
            bindings = [reaching] if reaching is not None else []
            bindings += [b for b in ctx.index.scope_at(node).lookup(node.value)
                         if b is not reaching and b.kind == "assign" and flow.before(b.node, node)]
            if any(b.kind == "assign" and b.value is not None and b.value is not node
                   and _scaled(ctx, flow, b.value, depth + 1) for b in bindings):
                return True
    return False
