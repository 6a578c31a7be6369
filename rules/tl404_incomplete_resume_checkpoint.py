"""TL404 incomplete-resume-checkpoint."""

from __future__ import annotations

from trainlint.model.checkpoint_base import LOAD_FUNCTIONS, SAVE_FUNCTIONS, STATE_KINDS, STATE_LABELS, quoted_state
from trainlint.model import frameworks
from trainlint.model.checkpoints import checkpoint_model
from trainlint.model.loader_use import reached_by_no_code
from trainlint.finding import Severity
from trainlint.gate import reference_text, refers_to
from trainlint.rule import Rule, bad, good
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import state_premise

_CONSEQUENCE = {
    "optimizer": "the optimizer restarts with empty moments",
    "scheduler": "the learning-rate schedule restarts from its first value",
    "scaler": "the loss scale restarts from its initial value",
    "step": "the resumed run does not know where it stopped",
}


# trainlint/frameworks/*.toml: `torch.distributed.checkpoint.save`, `.load`, ...
_FRAMEWORK_IO = tuple(sorted({*frameworks.state_saves(), *frameworks.state_loads()}))


def _missing_text(missing: dict[str, list[str]]) -> str:
    return ", ".join(f"{STATE_LABELS[kind]} ({quoted_state(names[0])})" for kind, names in missing.items())


class IncompleteResumeCheckpoint(Rule):
    code = "TL404"
    name = "incomplete-resume-checkpoint"
    severity = Severity.WARNING
    summary = "A resume checkpoint leaves out optimizer, scheduler, scaler or step state the script has"
    message = "this resume checkpoint leaves out training state the script has"
    # `torch.save`/`torch.load`, and the frameworks' saves of (and loads into) a state dict (`dcp.save`, `dcp.load`)
    triggers = (("torch", reference_text(*SAVE_FUNCTIONS, *LOAD_FUNCTIONS, *_FRAMEWORK_IO)),)
    gate = refers_to(*SAVE_FUNCTIONS, *LOAD_FUNCTIONS, *_FRAMEWORK_IO)
    what_it_does = """
        Flags a `torch.save` of a checkpoint meant for resuming that omits state the surrounding code
        has. A checkpoint is meant for resuming when it holds model state and optimizer state or a
        step/epoch counter (a counter key holding a number written down, `"epoch": 0`, counts
        nothing: the start of another run). Such a checkpoint is a resume point when a load of the
        project reads it back: the weights with their optimizer state or their step/epoch are also what
        a best-model snapshot or a run's final artefact holds, and nothing resumes from those. So it
        must be shown, by a load of this file that reads its path back (the same path text or the same
        file name: `torch.load(path)`, or `dcp.load(state, checkpoint_id=...)` of the id the save
        writes), keeps a step/epoch key it writes (`start_epoch = ckpt["epoch"] + 1`, `self.epochs_run
        = snap["EPOCHS_RUN"]`: the run's position restored), reads every key it writes or restores the
        weights from the key it writes them under before training goes on, or by the loop around the
        save starting from a position it is told (`for epoch in range(args.start_epoch, n)`) whose
        counter the dict writes. A save nobody reads back is unproven and reported only with
        `--include-unproven`; on 78 judged real-world TL404 findings, asking this of saves with
        optimizer state too (they were taken for resume points by that alone) removed 9 false and 21
        minor findings and lost no true one.
        One of the weights alone whose file name says it is one (last, latest,
        resume, checkpoint, ckpt) must be shown to be read back by a resume: a load of this file reads
        the same path (or a file name the two paths spell alike, `"last.pth"`), or every key the
        saved dict has (indexing no key it lacks) before training goes on, or a file that calls the saving function loads that
        file name. A best-model export that nothing reads back is no resume point, whatever its
        name (such a finding is unproven: `--include-unproven`). The
        state the code has is what the saving function can reach: its own names and parameters, the
        module's, the attributes of its class, and the local names of same-file callers of a save
        helper. Optimizers, LR schedulers and GradScalers are known by what built them
        (`torch.optim.AdamW(...)`, `get_cosine_schedule_with_warmup(...)`, `GradScaler()`) or by a
        parameter's name or annotation; a counter by its code, whatever it is called: the index of
        a `for ... in range(...)` around the loop that steps the optimizer (no other loop's, and
        building no new model or optimizer on each pass: a fold loop starts other runs), or a name
        advanced by a constant in such a loop, never set back in it, that a condition reads
        (`while step < n`, `if step % k == 0`); a batch tally that only averages a loss is none. A
        counter known only by its name (`for epoch in ...`, `step += 1`, a `global_step` parameter)
        is still read as one: TL404's documented name premise. State written
        by another `torch.save` in the same function (one file per object, each may carry the step
        counter too; one holding the model again is a file of its own) counts as saved, and so
        does a counter written into the file name (`f"{out}/{step:07d}.pt"`): a resume parses it back;
        whatever it is called and however it advances (`f"state-{seen // 1000}.pt"` with `seen +=
        batch_size`: a name counted up in a loop around the save that steps the optimizer, by an
        amount that loop never changes, and never set back in a loop around it; the samples of the
        current epoch are no position of the run), or one
        that a method other than `__init__` sets to a number unconditionally before its loop counts
        it up (`self.step = 0` then `while self.step < n:`): every call starts it again, so a
        restored value would be overwritten,
        or written to a file by another call of the saving function (`json.dump({"step": step}, f)`,
        `f.write(...)` on a file it opened, a project helper that does either).
        A function that fills a checkpoint directory file by file (`model.pt`, `optimizer.pt`, each
        a bare `state_dict()`, directly or through a helper nested in it) writes one checkpoint:
        its saves are judged together, at the first (at the helper's `torch.save` when they all go
        through one).
        A scheduler fast-forwarded on resume by replaying its `step()` (a loop that steps it and
        trains nothing, `for _ in range(start_epoch): sched.step()`) is restored from the counter,
        and so is a timm schedule (not the plateau one) every `step(...)`/`step_update(...)` of
        which is told its position (`sched.step_update(epoch * len(loader) + i)`): its rate is a
        function of that position, it counts nothing itself. So is a scheduler whose construction is
        handed the value a training loop's counter starts from where it sets the schedule's position
        (`last_epoch=`, or the rate function: `LambdaLR(opt, lambda e: f(e + start_epoch))` beside
        `for epoch in range(start_epoch, n)`; not a length such as `T_max=n - start_epoch`): a
        resume that starts from the saved epoch builds it at its position. So is one every
        construction of which is given `last_epoch=` a value the resume reads back from a key the
        saved dict writes (`last_epoch=ckpt["epoch"]`, or a name set from it); one placed by an
        option (`last_epoch=args.start_epoch - 1`) is not. A save that writes some optimizers'
        state leaves out only the schedulers built on them: one built on another optimizer belongs
        to that optimizer's checkpoint (one file per network).

        Also flags the load side: a `torch.load` of a resumable checkpoint (one the same file saves
        with optimizer state, or one whose step/epoch the code reads back) after which only the model
        is restored while an optimizer (or a scheduler or scaler the checkpoint holds) is in reach.
        The load must continue this run: it keeps the checkpoint's step/epoch (assigned or returned,
        not only printed) or reads the file a save of this file writes and training can run after it
        (in its function, or after a call of its function by a caller of this file; unproven when
        callers in other files decide: `--include-unproven`). A fresh model initialised
        from another run's file (a pretrained backbone for fine-tuning or a linear evaluation) is
        not a resume, however its path is called (`args.checkpoint`): unproven, not reported by default.
        A load that only feeds an evaluation is not a resume: no training runs after it in its
        function, and a model is put in `eval()` (or a `no_grad` block runs) after it.

        Quiet on weights-only exports (`torch.save(model.state_dict(), "best.pt")`, safetensors,
        `best`/`final`/`export` files without optimizer state, a bare state dict saved once training
        is over: after the training loops, in no loop, at module level or in a function this file
        calls and never in a loop), on dicts built with `**other` or handed to helpers we cannot
        see into, and on evaluation code with no optimizer. RNG state is TL701's business.

        A framework's save of the state dict it is handed is read the same way as `torch.save`
        (trainlint/frameworks/distributed_checkpoint.toml: `torch.distributed.checkpoint.save`,
        `async_save`, `save_state_dict`): `dcp.save({"model": model.state_dict(), "step": step},
        checkpoint_id=...)` leaves out the optimizer. Values the model cannot tell (`get_state_dict(model,
        optimizer)`'s results, a `Stateful` object) are not judged. A framework's load into the dict
        it is handed (`dcp.load(state, checkpoint_id=...)`, in place) restores only what that dict
        holds: a dict of the model (and the step, or the path this file's save writes: a resume)
        without the optimizer, scheduler or scaler the code has is reported at the load, unless the
        function restores them otherwise (`optimizer.load_state_dict(...)`, `set_state_dict(...)`).

        A framework's save of the whole training state in the same function writes that state too
        (trainlint/frameworks/*.toml `save_state` entries: `engine.save_checkpoint(dir, tag)` of the
        engine `deepspeed.initialize` returns holds the module, the optimizer, the LR scheduler and
        the step counters; `accelerator.save_state(dir)`), and a framework's load there restores it
        (`engine.load_checkpoint(dir)`; with `load_optimizer_states=`, `load_lr_scheduler_states=` or
        `load_module_only=` passed, the model alone is taken as restored).
        """
    why_bad = """
        A resume that restores the weights but not the optimizer restarts Adam with zero moments
        and a fresh bias correction: the first updates after a resume are far too large and the loss
        spikes. Without the scheduler the learning rate jumps back to its warm-up value; without the
        GradScaler the loss scale restarts at 65536 and the first steps are skipped as overflows;
        without the step counter the schedule, evaluation and checkpoint cadence and the data
        position all restart. The run does not fail, it silently trains a different model.
        """
    references = (
        "https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html",
        "https://pytorch.org/docs/stable/amp.html#saving-resuming",
        "https://pytorch.org/docs/stable/distributed.checkpoint.html",
    )
    examples = (
        good(
            """
            import torch
            from timm.scheduler import CosineLRScheduler

            model = Net()
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            schedule = CosineLRScheduler(optimizer, t_initial=epochs * len(loader), t_in_epochs=False)
            for epoch in range(epochs):
                for i, batch in enumerate(loader):
                    optimizer.zero_grad()
                    model(batch).loss.backward()
                    optimizer.step()
                    schedule.step_update(epoch * len(loader) + i)
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "last.pt")
            """,
            title="a timm schedule told its position at every step: its rate follows the saved epoch",
        ),
        bad(
            """
            import torch
            from timm.scheduler import PlateauLRScheduler

            model = Net()
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            schedule = PlateauLRScheduler(optimizer, patience_t=3)
            start = 0
            if args.resume:
                ckpt = torch.load("last.pt")
                model.load_state_dict(ckpt["model"])
                optimizer.load_state_dict(ckpt["optimizer"])
                start = ckpt["epoch"] + 1
            for epoch in range(start, epochs):
                for batch in loader:
                    optimizer.zero_grad()
                    model(batch).loss.backward()
                    optimizer.step()
                schedule.step(epoch, evaluate(model))
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "last.pt")
            """,
            line=19,
            title="a timm plateau schedule keeps the history of its metric: told the epoch, it still has state",
        ),
        bad(
            """
            import torch

            model = Net()
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=100)
            start = 0
            if args.resume:
                ckpt = torch.load("last.pt")
                model.load_state_dict(ckpt["model"])
                optimizer.load_state_dict(ckpt["optimizer"])
                start = ckpt["epoch"] + 1
            for epoch in range(start, 100):
                train_one_epoch(model, optimizer, scheduler)
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "last.pt")
            """,
            line=14,
            title="the LR scheduler is left out",
        ),
        bad(
            """
            import torch

            def build(cfg):
                model = Net(cfg)
                opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
                sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup(cfg))
                return model, opt, sched

            model, opt, sched = build(cfg)
            for step in range(cfg.start_step, cfg.steps):
                train_step(model, opt, sched)
                if step % 1000 == 0:
                    torch.save({"model": model.state_dict(), "step": step}, "checkpoint.pt")
            """,
            line=13,
            title="objects built by a same-file factory",
        ),
        good(
            """
            import numpy as np
            import torch


            def get_noise_schedule(steps):
                return np.linspace(1e-4, 0.02, steps)


            model = Denoiser()
            optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
            betas = get_noise_schedule(1000)
            for epoch in range(100):
                train_one_epoch(model, optimizer, betas)
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "last.pt")
            """,
            title="a project function named like a schedule factory that returns a noise schedule: no LR "
                  "scheduler to save",
        ),
        bad(
            """
            import torch


            def get_warmup_schedule(opt, steps):
                return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / steps))


            model = Denoiser()
            optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
            betas = get_warmup_schedule(optimizer, 500)
            start = 0
            if args.resume:
                ckpt = torch.load("last.pt")
                model.load_state_dict(ckpt["model"])
                optimizer.load_state_dict(ckpt["optimizer"])
                start = ckpt["epoch"] + 1
            for epoch in range(start, 100):
                train_one_epoch(model, optimizer, betas)
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "last.pt")
            """,
            line=19,
            title="the same factory returning a torch LR scheduler: its state is left out",
        ),
        bad(
            """
            import torch

            class Trainer:
                def __init__(self, model, lr):
                    self.model = model
                    self.opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
                    self.scaler = torch.amp.GradScaler("cuda")
                    self.global_step = 0

                def save_checkpoint(self, path):
                    state = {"model": self.model.state_dict(), "optimizer": self.opt.state_dict()}
                    torch.save(state, path)

                def fit(self, loader, resume_from=None):
                    if resume_from:
                        state = torch.load(resume_from)
                        self.model.load_state_dict(state["model"])
                        self.opt.load_state_dict(state["optimizer"])
                    for x, y in loader:
                        self.opt.zero_grad()
                        self.scaler.scale(loss_fn(self.model(x), y)).backward()
                        self.scaler.step(self.opt)
                        self.scaler.update()
                        self.global_step += 1
            """,
            line=12,
            title="a Trainer without its GradScaler and step counter",
        ),
        bad(
            """
            import torch

            def save_checkpoint(model, optimizer: torch.optim.Optimizer, epoch, path="checkpoint.pth"):
                torch.save({"epoch": epoch, "state_dict": model.state_dict()}, path)

            def load_checkpoint(model, path="checkpoint.pth"):
                checkpoint = torch.load(path, map_location="cpu", weights_only=True)
                model.load_state_dict(checkpoint["state_dict"])
                return checkpoint["epoch"] + 1
            """,
            line=4,
            title="a helper that is handed the optimizer and drops it; the file's resume goes on from the epoch",
        ),
        good(
            """
            import torch

            def save_checkpoint(model, optimizer: torch.optim.Optimizer, epoch, path="checkpoint.pth"):
                torch.save({"epoch": epoch, "state_dict": model.state_dict()}, path)

            def load_for_eval(model, path="checkpoint.pth"):
                checkpoint = torch.load(path, map_location="cpu", weights_only=True)
                model.load_state_dict(checkpoint["state_dict"])
                print("weights of epoch", checkpoint["epoch"])
                return model.eval()
            """,
            title="the weights with the epoch they were reached at, read back only to be evaluated: no resume "
                  "goes on from the file",
        ),
        good(
            """
            import torch

            def fit(model, loader, cfg):
                optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
                best = float("inf")
                for epoch in range(1, cfg.epochs + 1):
                    for x, y in loader:
                        optimizer.zero_grad()
                        torch.nn.functional.mse_loss(model(x), y).backward()
                        optimizer.step()
                    score = validate(model)
                    if score < best:
                        best = score
                        torch.save({"weights": model.state_dict(), "epoch": epoch, "score": score},
                                   cfg.out / "model_last.pt")
            """,
            title="the weights with their epoch after every improvement, under a name a resume could use, but no "
                  "load of the project reads the file and the epochs always start at 1",
        ),
        good(
            """
            import torch

            def run(model, data, args):
                optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
                for step in range(args.steps):
                    optimizer.zero_grad()
                    physics_loss(model, data).backward()
                    optimizer.step()
                summary = {"optimizer": {"name": "adam", "lr": args.lr}, "steps": args.steps}
                torch.save({"model": model.state_dict(), "meta": {"optimizer": summary["optimizer"]}},
                           args.out / "checkpoint.pt")
            """,
            title="a key named `optimizer` that holds the settings, not the optimizer's state: the weights of a "
                  "finished run with their metadata",
        ),
        bad(
            """
            import torch
            from transformers import get_linear_schedule_with_warmup

            def main(resume_from=None):
                optimizer = torch.optim.AdamW(model.parameters())
                lr_scheduler = get_linear_schedule_with_warmup(optimizer, 100, 1000)
                step = 0
                if resume_from:
                    state = torch.load(resume_from)
                    model.load_state_dict(state["model"])
                    optimizer.load_state_dict(state["optimizer"])
                    step = state["step"]
                for batch in loader:
                    step += 1
                    ckpt = {"model": model.state_dict()}
                    ckpt["step"] = step
                    ckpt["optimizer"] = optimizer.state_dict()
                    torch.save(ckpt, f"ckpt_{step}.pt")
            """,
            line=18,
            title="a dict filled key by key, without the scheduler",
        ),
        bad(
            """
            import torch

            model = Net()
            optimizer = torch.optim.Adam(model.parameters())
            ckpt = torch.load(args.resume, map_location="cpu", weights_only=True)
            model.load_state_dict(ckpt["model"])
            start_epoch = ckpt["epoch"] + 1
            """,
            line=5,
            title="the load side: a resume that restores only the model",
        ),
        bad(
            """
            import torch

            def resume(model, optimizer, scaler: torch.amp.GradScaler, path):
                checkpoint = torch.load(path, map_location="cpu", weights_only=True)
                state_dict = checkpoint["model"]
                model.load_state_dict(state_dict)
                optimizer.load_state_dict(checkpoint["optimizer"])
                return checkpoint["iter_num"]

            def save(model, optimizer, scaler, iter_num, path):
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "scaler": scaler.state_dict(), "iter_num": iter_num}, path)
            """,
            line=4,
            title="the load side: the checkpoint this file saves holds a scaler that is not restored",
        ),
        good(
            """
            import torch

            def resume_model(resume_path, model):
                checkpoint = torch.load(resume_path, map_location="cpu", weights_only=True)
                model.load_state_dict(checkpoint["state_dict"])
                return model

            def resume_train_utils(resume_path, optimizer, scheduler):
                checkpoint = torch.load(resume_path, map_location="cpu", weights_only=True)
                optimizer.load_state_dict(checkpoint["optimizer"])
                scheduler.load_state_dict(checkpoint["scheduler"])
                return checkpoint["epoch"] + 1

            def main(opt):
                model = build_model(opt)
                optimizer = torch.optim.SGD(model.parameters(), lr=opt.lr, momentum=0.9)
                scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, opt.milestones)
                begin_epoch = 1
                if opt.resume_path is not None:
                    model = resume_model(opt.resume_path, model)
                    begin_epoch = resume_train_utils(opt.resume_path, optimizer, scheduler)
                train(model, optimizer, scheduler, begin_epoch, opt)
            """,
            title="the resume is split over two helpers reading the same file; `opt` is the options namespace",
        ),
        bad(
            """
            import torch

            def load_weights(path, model):
                checkpoint = torch.load(path, map_location="cpu", weights_only=True)
                model.load_state_dict(checkpoint["state_dict"])
                return checkpoint["epoch"] + 1

            def load_schedule(path, scheduler):
                checkpoint = torch.load(path, map_location="cpu", weights_only=True)
                scheduler.load_state_dict(checkpoint["scheduler"])

            def main(opt):
                model = build_model(opt)
                optimizer = torch.optim.SGD(model.parameters(), lr=opt.lr, momentum=0.9)
                scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, opt.milestones)
                if opt.resume_path is not None:
                    begin_epoch = load_weights(opt.resume_path, model)
                    load_schedule(opt.schedule_path, scheduler)
                train(model, optimizer, scheduler, opt)
            """,
            line=4,
            title="the other helper reads another file, and nothing restores the optimizer",
        ),
        good(
            """
            import torch

            model = Net()
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=100)
            for epoch in range(100):
                train_one_epoch(model, optimizer, scheduler)
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "scheduler": scheduler.state_dict(), "epoch": epoch}, "last.pt")
            """,
            title="everything the run has",
        ),
        good(
            """
            import torch

            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(10):
                train_one_epoch(model, optimizer)
                if val_acc > best_acc:
                    torch.save(model.state_dict(), "best.pt")
            """,
            title="a weights-only export of the best model",
        ),
        good(
            """
            import os
            import torch

            def save_checkpoint(model, optimizer, lr_scheduler, output_dir):
                torch.save(model.state_dict(), os.path.join(output_dir, "pytorch_model.bin"))
                torch.save(optimizer.state_dict(), os.path.join(output_dir, "optimizer.pt"))
                torch.save(lr_scheduler.state_dict(), os.path.join(output_dir, "scheduler.pt"))
            """,
            title="one file per object",
        ),
        good(
            """
            import os

            import torch


            class Runner:
                def __init__(self, net, lr, milestones):
                    self.net = net
                    self.opt = torch.optim.Adam(net.parameters(), lr=lr)
                    self.decay = torch.optim.lr_scheduler.MultiStepLR(self.opt, milestones)

                def save(self, folder, epoch):
                    torch.save({"epoch": epoch, "net": self.net.state_dict()}, os.path.join(folder, "net", "last.pt"))
                    torch.save({"epoch": epoch, "opt": self.opt.state_dict()}, os.path.join(folder, "opt", "last.pt"))
                    torch.save({"epoch": epoch, "decay": self.decay.state_dict()},
                               os.path.join(folder, "decay", "last.pt"))
            """,
            title="one file per object, each stamped with the epoch: the counter they share does not make them "
                  "separate checkpoints",
        ),
        bad(
            """
            import os
            import tempfile

            import torch


            class Engine:
                def __init__(self, model, optimizer, amp):
                    self.model = model
                    self.optimizer = optimizer
                    self.grad_scaler = torch.cuda.amp.GradScaler() if amp else None

                def save_checkpoint(self, checkpoint_dir):
                    def save_state(state, name):
                        tmp = tempfile.NamedTemporaryFile("w+b", dir=checkpoint_dir, delete=False)
                        torch.save(state, tmp)
                        tmp.close()
                        os.replace(tmp.name, os.path.join(checkpoint_dir, f"{name}.pt"))

                    save_state(self.model.state_dict(), "model")
                    save_state(self.optimizer.state_dict(), "optimizer")
            """,
            line=16,
            title="a directory filled file by file through a nested helper, without the GradScaler",
        ),
        good(
            """
            import os
            import tempfile

            import torch


            class Engine:
                def __init__(self, model, optimizer, amp):
                    self.model = model
                    self.optimizer = optimizer
                    self.grad_scaler = torch.cuda.amp.GradScaler() if amp else None

                def save_checkpoint(self, checkpoint_dir):
                    def save_state(state, name):
                        tmp = tempfile.NamedTemporaryFile("w+b", dir=checkpoint_dir, delete=False)
                        torch.save(state, tmp)
                        tmp.close()
                        os.replace(tmp.name, os.path.join(checkpoint_dir, f"{name}.pt"))

                    save_state(self.model.state_dict(), "model")
                    save_state(self.optimizer.state_dict(), "optimizer")
                    if self.grad_scaler is not None:
                        save_state(self.grad_scaler.state_dict(), "grad_scaler")

                def export(self, out_dir):
                    torch.save(self.model.state_dict(), os.path.join(out_dir, "model.pt"))
                    torch.save(self.model.config, os.path.join(out_dir, "config.pt"))
            """,
            title="the scaler saved beside the others; an export of weights and config is no resume point",
        ),
        good(
            """
            import torch
            from safetensors.torch import save_file

            optimizer = torch.optim.AdamW(model.parameters())
            save_file(model.state_dict(), "model.safetensors")
            """,
            title="safetensors weights",
        ),
        bad(
            """
            import os

            import torch

            net = Net()
            opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
            if os.path.exists("latest.ckpt"):
                net.load_state_dict(torch.load("latest.ckpt", weights_only=True))
            for epoch in range(90):
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(net(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                torch.save(net.state_dict(), "latest.ckpt")
            """,
            line=15,
            title="the weights alone, after every epoch, to the file a restart reads",
        ),
        bad(
            """
            import torch

            def train_round(model, opt, loader):
                for x, y in loader:
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                torch.save(model.state_dict(), "round.ckpt")

            model = Net()
            opt = torch.optim.Adam(model.parameters())
            if args.resume:
                model.load_state_dict(torch.load("round.ckpt", weights_only=True))
            for r in range(rounds):
                train_round(model, opt, loader)
            """,
            line=9,
            title="saved after a helper's loop, but the helper itself runs round after round",
        ),
        bad(
            """
            import torch

            def train_one_epoch(model, opt, loader, out_dir):
                for x, y in loader:
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                torch.save(model.state_dict(), f"{out_dir}/last.ckpt")

            def resume(model, out_dir):
                model.load_state_dict(torch.load(f"{out_dir}/last.ckpt", weights_only=True))
            """,
            line=9,
            title="saved after the epoch's loop by a function other files call, perhaps every epoch, "
                  "and read back by a resume",
        ),
        good(
            """
            import torch

            net = Net()
            opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
            for epoch in range(90):
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(net(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()

            evaluate(net, test_loader)
            torch.save(net.state_dict(), "net.ckpt")
            """,
            title="the weights saved once, after the last epoch: nothing resumes from them",
        ),
        good(
            """
            import os

            import torch

            def save_model(args, model):
                torch.save(model.state_dict(), os.path.join(args.output_dir, f"{args.name}_checkpoint.bin"))

            def train(args, model, opt, loader, evaluate):
                best_acc = 0.0
                for epoch in range(args.epochs):
                    for x, y in loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    accuracy = evaluate(model)
                    if accuracy > best_acc:
                        save_model(args, model)
                        best_acc = accuracy
            """,
            title="the best model's weights, written every time it improves: no load of the project reads "
                  "the file back, whatever its name",
        ),
        good(
            """
            import torch

            def train(model, loader, evaluate, epochs):
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
                best_loss = float("inf")
                for epoch in range(epochs):
                    for x, y in loader:
                        optimizer.zero_grad()
                        torch.nn.functional.mse_loss(model(x), y).backward()
                        optimizer.step()
                    scheduler.step()
                    val_loss = evaluate(model)
                    if val_loss < best_loss:
                        best_loss = val_loss
                        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                    "epoch": epoch}, "best_model.pt")
            """,
            title="a best-model snapshot with the optimizer and the epoch but not the scheduler: nothing in "
                  "the project loads it back, so it is not shown to be a resume point (unproven, reported "
                  "only with --include-unproven)",
        ),
        bad(
            """
            import torch

            def train(model, opt, loader):
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()

            if __name__ == "__main__":
                args = parse_args()
                ckpt = {}
                if args.ckpt is not None:
                    ckpt = torch.load(args.ckpt, weights_only=False)
                    args = ckpt["args"]
                model = Net(args)
                if "model" in ckpt:
                    model.load_state_dict(ckpt["model"])
                opt = torch.optim.Adam(model.parameters(), lr=args.lr)
                for i in range(args.epochs):
                    train(model, opt, loader)
                    torch.save({"model": model.state_dict(), "args": args}, f"checkpoint/net_{i + 1:03d}.pt")
            """,
            line=22,
            title="the load reads back every key the save writes, and the epochs go on after it",
        ),
        good(
            """
            import torch

            def fit(model, opt, loader, epochs):
                for _ in range(epochs):
                    for batch in loader:
                        opt.zero_grad()
                        model(**batch).loss.backward()
                        opt.step()

            def main(loader):
                model = Net()
                opt = torch.optim.AdamW(model.parameters())
                fit(model, opt, loader, epochs=3)
                if args.save:
                    torch.save(model.state_dict(), "checkpoint.pt")

            if __name__ == "__main__":
                main(make_loader())
            """,
            title="a final export after the training helper has returned",
        ),
        good(
            """
            import os
            import tempfile
            import torch

            def test_model_round_trip(model):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                path = os.path.join(tempfile.mkdtemp(), "checkpoint.pt")
                torch.save({"model": model.state_dict()}, path)
                assert torch.load(path, weights_only=True)["model"].keys() == model.state_dict().keys()
            """,
            title="a test's scratch file in a temporary directory",
        ),
        good(
            """
            import torch

            model = Net()
            ckpt = torch.load("runs/exp/last.pt", map_location="cpu", weights_only=True)
            model.load_state_dict(ckpt["model"])
            print(evaluate(model, test_loader), "at epoch", ckpt["epoch"])
            """,
            title="an evaluation script restores only the model on purpose",
        ),
        good(
            """
            import torch


            def fit(model, optimizer, loader, epochs, out):
                for epoch in range(epochs):
                    for x, y in loader:
                        loss = torch.nn.functional.mse_loss(model(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, out)


            def main(cfg, model, loader):
                if cfg.mode == "train":
                    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
                    fit(model, optimizer, loader, cfg.epochs, cfg.checkpoint)
                    torch.save({"model": model.state_dict()}, cfg.weights)
                if cfg.mode == "sample":
                    state = torch.load(cfg.weights, map_location="cpu", weights_only=True)
                    model.load_state_dict(state["model"])
                    write_samples(generate(model, cfg.num_samples), cfg.out)


            if __name__ == "__main__":
                main(parse_config(), build_model(), build_loader())
            """,
            title="the sampling branch reads the run's final weights back, and no path trains after it "
                  "(here, or after any call of its function): not a resume",
        ),
        bad(
            """
            import torch


            def fit(model, optimizer, loader, epochs, out):
                for epoch in range(epochs):
                    for x, y in loader:
                        loss = torch.nn.functional.mse_loss(model(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, out)


            def main(cfg, model, loader):
                optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
                if cfg.mode == "resume":
                    state = torch.load(cfg.weights, map_location="cpu", weights_only=True)
                    model.load_state_dict(state["model"])
                if cfg.mode in ("train", "resume"):
                    fit(model, optimizer, loader, cfg.epochs, cfg.checkpoint)
                    torch.save({"model": model.state_dict()}, cfg.weights)


            if __name__ == "__main__":
                main(parse_config(), build_model(), build_loader())
            """,
            line=17,
            title="the same load with the training after it: a resume that restarts the optimizer",
        ),
        good(
            """
            import torch

            model = Net()
            optimizer = torch.optim.Adam(model.parameters())
            ckpt = torch.load(args.resume, map_location="cpu", weights_only=True)
            model.load_state_dict(ckpt["model"])
            optimizer.load_state_dict(ckpt["optimizer"])
            start_epoch = ckpt["epoch"] + 1
            """,
            title="the load side restores the optimizer too",
        ),
        bad(
            """
            import copy
            import torch

            student = build_net()
            optimizer = torch.optim.AdamW(student.parameters(), lr=3e-4)
            anchor = copy.deepcopy(student)
            weights = torch.load(args.anchor, map_location="cpu", weights_only=True)
            anchor.load_state_dict(weights["net"])
            anchor.requires_grad_(False)
            start = 0
            if args.resume:
                weights = torch.load(args.resume, map_location="cpu", weights_only=True)
                student.load_state_dict(weights["net"])
                start = weights["iteration"]
            for it in range(start, args.iterations):
                x, y = next(batches)
                loss = torch.nn.functional.mse_loss(student(x), y) + kl(student(x), anchor(x))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
            line=12,
            title="two loads into one name: the frozen anchor's load (line 7) restores no counter, since "
                  "`weights[\"iteration\"]` reads only the resume's binding; the resume restarts the optimizer",
        ),
        good(
            """
            import glob
            import os

            import torch


            def latest_checkpoint(out_dir):
                paths = sorted(glob.glob(os.path.join(out_dir, "*.pt")))
                return paths[-1] if paths else None


            def train(model, optimizer, loader, out_dir, max_steps, save_every=1000):
                step = 0
                path = latest_checkpoint(out_dir)
                if path is not None:
                    ckpt = torch.load(path, map_location="cpu", weights_only=True)
                    model.load_state_dict(ckpt["model"])
                    optimizer.load_state_dict(ckpt["optimizer"])
                    step = int(os.path.basename(path).split(".")[0])
                while step < max_steps:
                    for x, y in loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        step += 1
                        if step % save_every == 0:
                            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
                            final = f"{out_dir}/{step:07d}.pt"
                            torch.save(state, final + ".tmp")
                            os.replace(final + ".tmp", final)
            """,
            title="the step counter saved in the file name, parsed back on resume",
        ),
        good(
            """
            import torch


            def fit(net, batches, rounds, opts):
                opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
                begin = 0
                if opts.resume:
                    snap = torch.load(opts.resume, weights_only=True)
                    net.load_state_dict(snap["weights"])
                    opt.load_state_dict(snap["adam"])
                    begin = snap["round"] + 1
                decay = torch.optim.lr_scheduler.ExponentialLR(opt, 0.97, last_epoch=snap["round"] if opts.resume else -1)
                for r in range(begin, rounds):
                    for a in batches:
                        opt.zero_grad()
                        net(a).sum().backward()
                        opt.step()
                    decay.step()
                    torch.save({"weights": net.state_dict(), "adam": opt.state_dict(), "round": r}, "run.pt")
            """,
            title="the resume rebuilds the schedule at the restored position (last_epoch= the loaded round): no scheduler entry needed",
        ),
        bad(
            """
            import torch


            def fit(net, batches, rounds, opts):
                opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
                begin = 0
                if opts.resume:
                    snap = torch.load(opts.resume, weights_only=True)
                    net.load_state_dict(snap["weights"])
                    opt.load_state_dict(snap["adam"])
                    begin = snap["round"] + 1
                decay = torch.optim.lr_scheduler.ExponentialLR(opt, 0.97, last_epoch=opts.first_round - 1)
                for r in range(begin, rounds):
                    for a in batches:
                        opt.zero_grad()
                        net(a).sum().backward()
                        opt.step()
                    decay.step()
                    torch.save({"weights": net.state_dict(), "adam": opt.state_dict(), "round": r}, "run.pt")
            """,
            line=19,
            title="the schedule placed by an option (last_epoch=opts.first_round - 1), not by what the checkpoint holds",
        ),
        good(
            """
            import os

            import torch


            def run(net, opt, stream, out, budget, per_batch, seen=0, dump_every=50):
                rounds = 0
                while seen < budget:
                    for x in stream:
                        opt.zero_grad()
                        net(x).mean().backward()
                        opt.step()
                        seen += per_batch
                    rounds += 1
                    if rounds % dump_every == 0:
                        torch.save({"net": net.state_dict(), "opt": opt.state_dict()},
                                   os.path.join(out, f"state-{seen // 1000:06d}.pt"))
            """,
            title="the samples seen (counted up by the batch size) carried in the file name: the run's position is saved",
        ),
        bad(
            """
            import os

            import torch


            def run(net, opt, stream, out, epochs, per_batch, dump_every=50):
                step = 0
                for epoch in range(epochs):
                    seen = 0
                    for x in stream:
                        opt.zero_grad()
                        net(x).mean().backward()
                        opt.step()
                        step += 1
                        seen += per_batch
                        if step % dump_every == 0:
                            torch.save({"net": net.state_dict(), "opt": opt.state_dict()},
                                       os.path.join(out, f"state-{seen // 1000:06d}.pt"))


            def resume(net, opt, path, stream, out, epochs, per_batch):
                state = torch.load(path)
                net.load_state_dict(state["net"])
                opt.load_state_dict(state["opt"])
                run(net, opt, stream, out, epochs, per_batch)
            """,
            line=17,
            title="the file name holds the samples seen in this epoch (set back every epoch): the run's position is not saved",
        ),
        good(
            """
            import os

            import torch


            def save_checkpoint(model, optimizer, path):
                tmp = path + ".tmp"
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp)
                os.replace(tmp, path)


            def train(model, optimizer, loader, out_dir, save_every=1000):
                step = 0
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    step += 1
                    if step % save_every == 0:
                        save_checkpoint(model, optimizer, os.path.join(out_dir, f"step_{step:08d}.pt"))
            """,
            title="a save helper whose callers put the step counter in the file name",
        ),
        good(
            """
            import torch

            def main(net, loader, epochs, resume_from=None):
                opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
                decay = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[30, 60])
                first = 0
                if resume_from:
                    state = torch.load(resume_from, weights_only=True)
                    net.load_state_dict(state["net"])
                    opt.load_state_dict(state["opt"])
                    first = state["epoch"] + 1
                    for _ in range(first):  # the schedule is a function of the epoch: replay it
                        decay.step()
                for epoch in range(first, epochs):
                    train_one_epoch(net, loader, opt)
                    decay.step()
                    torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, "resume.pt")
            """,
            title="the scheduler is fast-forwarded on resume by replaying step(), not read from the file",
        ),
        good(
            """
            import torch

            def main(net, loader, test_loader, epochs):
                opt = torch.optim.Adam(net.parameters())
                for epoch in range(epochs):
                    for inputs, labels in loader:
                        opt.zero_grad()
                        torch.nn.functional.cross_entropy(net(inputs), labels).backward()
                        opt.step()
                    torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, "last.pt")
                final = torch.load("last.pt", weights_only=True)
                net.load_state_dict(final["net"])
                net.eval()
                with torch.no_grad():
                    print(sum((net(x).argmax(1) == y).sum().item() for x, y in test_loader))
            """,
            title="the finished run's weights read back for a test evaluation: not a resume",
        ),
        good(
            """
            import os
            import torch

            def init_from_pretrained(cfg, net):
                ckpt = torch.load(cfg.init_weights, map_location="cpu", weights_only=True)
                weights = ckpt["model"]
                weights.pop("classifier.weight")
                net.load_state_dict(weights, strict=False)

            def save_state(cfg, epoch, net, opt, sched):
                torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(),
                            "lr_scheduler": sched.state_dict(), "epoch": epoch},
                           os.path.join(cfg.out_dir, f"epoch_{epoch}.pth"))

            def main(cfg, net, loader):
                opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr)
                sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg.epochs)
                if cfg.init_weights:
                    init_from_pretrained(cfg, net)
                for epoch in range(cfg.epochs):
                    train_epoch(net, opt, loader)
                    sched.step()
                    save_state(cfg, epoch, net, opt, sched)
            """,
            title="a fine-tuning start takes only the weights of another run's file: not a resume",
        ),
        bad(
            """
            import os
            import torch

            def resume_from(cfg, net):
                ckpt = torch.load(os.path.join(cfg.out_dir, "last.pth"), map_location="cpu", weights_only=True)
                net.load_state_dict(ckpt["model"])

            def save_state(cfg, epoch, net, opt, sched):
                torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(),
                            "lr_scheduler": sched.state_dict(), "epoch": epoch},
                           os.path.join(cfg.out_dir, "last.pth"))

            def main(cfg, net, loader):
                opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr)
                sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg.epochs)
                if cfg.resume_path:
                    resume_from(cfg, net)
                for epoch in range(cfg.epochs):
                    train_epoch(net, opt, loader)
                    sched.step()
                    save_state(cfg, epoch, net, opt, sched)
            """,
            line=5,
            title="a resume that takes only the weights of the run's own checkpoint (the file `save_state` writes)",
        ),
        good(
            """
            import torch

            def main(args, encoder, classifier, loader):
                ckpt = torch.load(args.resume, map_location="cpu", weights_only=True)
                encoder.load_state_dict(ckpt["model"])
                print("loaded the encoder trained for", ckpt["epoch"], "epochs")
                opt = torch.optim.SGD(classifier.parameters(), lr=0.1, momentum=0.9)
                for epoch in range(args.epochs):
                    for x, y in loader:
                        loss = torch.nn.functional.cross_entropy(classifier(encoder(x)), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    torch.save({"model": classifier.state_dict(), "optimizer": opt.state_dict(),
                                "epoch": epoch}, f"classifier_{epoch}.pth")
            """,
            title="a linear evaluation starts from a pretrained encoder: its epoch is only printed, and the "
                  "path is no file this script writes",
        ),
        bad(
            """
            import torch
            from torch import nn


            class Synthesizer(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
                    self.step = 0

                def forward(self, x):
                    self.step += 1
                    return self.net(x)

                def reset_step(self):
                    self.step = 0

                def save(self, path, optimizer):
                    torch.save({"model_state": self.state_dict(), "optimizer_state": optimizer.state_dict()}, path)


            model = Synthesizer(64)
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            checkpoint = torch.load("synth.pt", weights_only=True)
            model.load_state_dict(checkpoint["model_state"])
            optimizer.load_state_dict(checkpoint["optimizer_state"])
            for x in batches:
                optimizer.zero_grad()
                model(x).pow(2).mean().backward()
                optimizer.step()
            model.save("synth.pt", optimizer)
            """,
            line=19,
            title="the step counter is a plain attribute: the module's state_dict() does not hold it",
        ),
        good(
            """
            import torch
            from torch import nn


            class Synthesizer(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
                    self.register_buffer("step", torch.zeros(1, dtype=torch.long))

                def forward(self, x):
                    self.step += 1
                    return self.net(x)

                def reset_step(self):
                    self.step = torch.zeros_like(self.step)

                def save(self, path, optimizer):
                    torch.save({"model_state": self.state_dict(), "optimizer_state": optimizer.state_dict()}, path)

                def load(self, path, optimizer):
                    checkpoint = torch.load(path, weights_only=True)
                    self.load_state_dict(checkpoint["model_state"])
                    optimizer.load_state_dict(checkpoint["optimizer_state"])
            """,
            title="the step counter is a registered buffer, saved inside the module's state_dict()",
        ),
        good(
            """
            import torch


            class Runner:
                def __init__(self, net, opt, start_iter, batch, epochs):
                    self.net, self.opt = net, opt
                    self.start_iter, self.batch, self.epochs = start_iter, batch, epochs
                    self.epoch = 0

                def fit(self, loader):
                    self.epoch = self.start_iter * self.batch // len(loader.dataset)
                    while self.epoch < self.epochs:
                        for x, y in loader:
                            self.opt.zero_grad()
                            torch.nn.functional.mse_loss(self.net(x), y).backward()
                            self.opt.step()
                        self.epoch += 1

                def save(self, i):
                    torch.save({"model": self.net.state_dict(), "optimizer": self.opt.state_dict()},
                               f"ckpt-{i:06d}.pt")
            """,
            title="the epoch is recomputed from the iteration at the start of the method that counts it: a "
                  "restored value would be overwritten",
        ),
        bad(
            """
            import torch


            class Runner:
                def __init__(self, net, opt, start_iter, batch, size, epochs):
                    self.net, self.opt, self.epochs = net, opt, epochs
                    self.epoch = start_iter * batch // size

                def fit(self, loader):
                    while self.epoch < self.epochs:
                        for x, y in loader:
                            self.opt.zero_grad()
                            torch.nn.functional.mse_loss(self.net(x), y).backward()
                            self.opt.step()
                        self.epoch += 1

                def save(self, path):
                    torch.save({"model": self.net.state_dict(), "optimizer": self.opt.state_dict()}, path)

                def resume(self, path, loader):
                    state = torch.load(path)
                    self.net.load_state_dict(state["model"])
                    self.opt.load_state_dict(state["optimizer"])
                    self.fit(loader)
            """,
            line=18,
            title="the epoch counts on from where the constructor set it: the file needs it",
        ),
        bad(
            """
            import os

            import torch


            def train(model, optimizer, loader, epochs, out):
                for epoch in range(epochs):
                    for x, y in loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    torch.save({"model": model.state_dict()},
                               os.path.join(out, "model.pt"))
                    torch.save({"optimizer": optimizer.state_dict()}, os.path.join(out, f"optimizer_{epoch}.pt"))


            def resume(model, optimizer, out, epoch):
                model.load_state_dict(torch.load(os.path.join(out, "model.pt"))["model"])
                optimizer.load_state_dict(torch.load(os.path.join(out, f"optimizer_{epoch}.pt"))["optimizer"])
            """,
            line=13,
            title="the weights and the optimizer in two files of one checkpoint: together they still lack the epoch",
        ),
        good(
            """
            import torch


            def cross_validate(folds, make_model, out):
                for k in range(len(folds)):
                    model = make_model()
                    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                    for x, y in folds[k]:
                        optimizer.zero_grad()
                        torch.nn.functional.cross_entropy(model(x), y).backward()
                        optimizer.step()
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, out)
            """,
            title="a fresh model and optimizer for every fold: the fold's index is no position of one run",
        ),
        good(
            """
            import torch


            def train(generator, critic, gen_opt, critic_opt, batches, out):
                for real in batches:
                    for i in range(5):
                        critic_opt.zero_grad()
                        (critic(generator(real)).mean() - critic(real).mean()).backward()
                        critic_opt.step()
                    gen_opt.zero_grad()
                    (-critic(generator(real)).mean()).backward()
                    gen_opt.step()
                    torch.save({"generator": generator.state_dict(), "critic": critic.state_dict(),
                                "gen_opt": gen_opt.state_dict(), "critic_opt": critic_opt.state_dict()}, out)
            """,
            title="a count of critic updates that starts again on every batch is no position of the run",
        ),
        good(
            """
            import torch


            def train_pass(model, optimizer, loader, out):
                seen, total = 0, 0.0
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    seen += 1
                    total += loss.item()
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, out)
                return total / seen
            """,
            title="a batch tally that only averages the loss positions nothing",
        ),
        good(
            """
            import os

            import torch


            def train(model, optimizer, loader, epochs, out):
                for epoch in range(epochs):
                    for x, y in loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()},
                               os.path.join(out, f"checkpoint_{epoch}.pt"))
                    torch.save({"model": model.state_dict()}, os.path.join(out, "weights.pt"))
            """,
            title="a weights file saved beside a full checkpoint is a file of its own (both hold the model), not a part of it",
        ),
        good(
            """
            import os

            import torch


            class Saver:
                def __init__(self, expdir):
                    self.expdir = expdir
                    self.global_step = 0

                def save_model(self, model, optimizer, name="model"):
                    path = os.path.join(self.expdir, name + ".pt")
                    if optimizer is not None:
                        torch.save({"global_step": self.global_step, "model": model.state_dict(),
                                    "optimizer": optimizer.state_dict()}, path)
                    else:
                        torch.save({"global_step": self.global_step, "model": model.state_dict()}, path)
            """,
            title="two branches write the same file, with the optimizer when there is one",
        ),
        bad(
            """
            import torch
            import torch.distributed.checkpoint as dcp

            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-4, total_steps=total_steps)
            start = 0
            if args.resume_step:
                step = args.resume_step
                restored = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
                dcp.load(restored, checkpoint_id=f"{args.output_dir}/step_{step}")
                optimizer.load_state_dict(restored["optimizer"])
                start = step + 1
            for step, batch in enumerate(loader, start):
                model(**batch).loss.backward()
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                if step % args.save_every == 0:
                    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
                    dcp.save(state, checkpoint_id=f"{args.output_dir}/step_{step}")
            """,
            line=20,
            title="`torch.distributed.checkpoint.save` writes what the dict holds: the scheduler is left out",
        ),
        good(
            """
            import torch
            import torch.distributed.checkpoint as dcp
            from torch.distributed.checkpoint.state_dict import get_state_dict

            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            for step, batch in enumerate(loader):
                model(**batch).loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if step % args.save_every == 0:
                    model_sd, optim_sd = get_state_dict(model, optimizer)
                    dcp.save({"model": model_sd, "optim": optim_sd, "step": step},
                             checkpoint_id=f"{args.output_dir}/step_{step}")
            """,
            title="DCP's `get_state_dict(model, optimizer)`: the optimizer's state is in the dict",
        ),
        good(
            """
            import json
            import os
            import torch

            def keep(model, optimizer, scheduler, folder, global_step):
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "scheduler": scheduler.state_dict()}, os.path.join(folder, "state.pt"))
                with open(os.path.join(folder, "progress.json"), "w") as handle:
                    handle.write(json.dumps({"global_step": global_step}))
            """,
            title="the step counter written to a JSON file beside the checkpoint by the same function",
        ),
        bad(
            """
            import json
            import os
            import torch

            def keep(model, optimizer, scheduler, folder, global_step):
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "scheduler": scheduler.state_dict()}, os.path.join(folder, "state.pt"))
                print(json.dumps({"global_step": global_step}))

            def restore(model, optimizer, scheduler, folder):
                state = torch.load(os.path.join(folder, "state.pt"))
                model.load_state_dict(state["model"])
                optimizer.load_state_dict(state["optimizer"])
                scheduler.load_state_dict(state["scheduler"])
            """,
            line=6,
            title="the step counter only printed: no file keeps it",
        ),
        good(
            """
            import torch


            def main(args, model, loader):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                start_epoch = 0
                if args.resume:
                    state = torch.load(args.resume, weights_only=True)
                    model.load_state_dict(state["weights"])
                    optimizer.load_state_dict(state["opt"])
                    start_epoch = state["epoch"] + 1
                else:
                    torch.save({"weights": model.state_dict(), "opt": optimizer.state_dict(), "epoch": 0}, args.out)
                for epoch in range(start_epoch, args.epochs):
                    for x, y in loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    torch.save({"weights": model.state_dict(), "opt": optimizer.state_dict(), "epoch": epoch}, args.out)
            """,
            title="the state saved before the first epoch writes `\"epoch\": 0`, and the resume sets `start_epoch` "
                  "from that key: the counter is in the dict",
        ),
        bad(
            """
            import torch


            def main(args, model, loader):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                start_epoch = 0
                if args.resume:
                    state = torch.load(args.resume, weights_only=True)
                    model.load_state_dict(state["weights"])
                    optimizer.load_state_dict(state["opt"])
                    start_epoch = args.start_epoch
                else:
                    torch.save({"weights": model.state_dict(), "opt": optimizer.state_dict(), "epoch": 0}, args.out)
                for epoch in range(start_epoch, args.epochs):
                    for x, y in loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    torch.save({"weights": model.state_dict(), "opt": optimizer.state_dict(), "epoch": epoch}, args.out)
            """,
            line=13,
            title="the same initial save, but the resume takes its start from the command line: no load reads "
                  "the epoch back, and the constant 0 positions nothing",
        ),
        good(
            """
            import torch

            teacher = Net()
            optimizer = torch.optim.SGD(teacher.parameters(), lr=0.1, momentum=0.9)
            for epoch in range(epochs):
                train_one_epoch(teacher, optimizer, loader)
                torch.save({"model": teacher.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "teacher_resume.pt")
            student = SmallNet()
            student.load_state_dict(teacher.state_dict(), strict=False)
            torch.save({"model": student.state_dict(), "epoch": 0}, "student_init.pt")
            """,
            title="a starting point for another run: its epoch is written down as 0, not counted",
        ),
        bad(
            """
            import torch

            teacher = Net()
            optimizer = torch.optim.SGD(teacher.parameters(), lr=0.1, momentum=0.9)
            for epoch in range(args.start_epoch, args.epochs):
                train_one_epoch(teacher, optimizer, loader)
                torch.save({"model": teacher.state_dict(), "epoch": epoch}, "teacher.pt")
            """,
            line=7,
            title="the epoch the loop counts, saved without the optimizer, in a run that starts from the epoch it "
                  "is told",
        ),
        good(
            """
            import torch

            class Learner:
                def __init__(self, net):
                    self.net = net
                    self.opt = torch.optim.Adam(net.parameters(), lr=1e-3)
                    self.current_step = 0

                def learn(self, batches, steps):
                    self.current_step = 0
                    while self.current_step < steps:
                        self.opt.zero_grad()
                        self.net(next(batches)).backward()
                        self.opt.step()
                        self.current_step += 1

                def save(self, path):
                    torch.save({"net": self.net.state_dict(), "opt": self.opt.state_dict()}, path)
            """,
            title="a count every call of `learn` starts again at 0: a restored value would be overwritten",
        ),
        bad(
            """
            import torch

            class Learner:
                def __init__(self, net):
                    self.net = net
                    self.opt = torch.optim.Adam(net.parameters(), lr=1e-3)
                    self.current_step = 0

                def learn(self, batches, steps, fresh=False):
                    if fresh:
                        self.current_step = 0
                    while self.current_step < steps:
                        self.opt.zero_grad()
                        self.net(next(batches)).backward()
                        self.opt.step()
                        self.current_step += 1

                def save(self, path):
                    torch.save({"net": self.net.state_dict(), "opt": self.opt.state_dict()}, path)

                def resume(self, path, batches, steps):
                    state = torch.load(path)
                    self.net.load_state_dict(state["net"])
                    self.opt.load_state_dict(state["opt"])
                    self.learn(batches, steps)
            """,
            line=19,
            title="the count goes on from where it was unless told to start afresh: it is the run's position",
        ),
        good(
            """
            import torch

            def run(net, loader, first_epoch, last_epoch):
                opt = torch.optim.Adam(net.parameters(), lr=2e-4)
                decay = torch.optim.lr_scheduler.LambdaLR(
                    opt, lambda e: 1.0 - max(0, e + first_epoch - 100) / 100)
                for epoch in range(first_epoch, last_epoch):
                    for batch in loader:
                        opt.zero_grad()
                        net(batch).backward()
                        opt.step()
                    decay.step()
                    torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, "run.pt")
            """,
            title="the schedule is built from the epoch the run starts at: a resume from the saved epoch rebuilds it",
        ),
        bad(
            """
            import torch

            def run(net, loader, first_epoch, last_epoch):
                opt = torch.optim.Adam(net.parameters(), lr=2e-4)
                decay = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 1.0 - max(0, e - 100) / 100)
                for epoch in range(first_epoch, last_epoch):
                    for batch in loader:
                        opt.zero_grad()
                        net(batch).backward()
                        opt.step()
                    decay.step()
                    torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, "run.pt")
            """,
            line=12,
            title="the loop starts at the given epoch but the schedule from its first value",
        ),
        bad(
            """
            import torch

            def run(net, loader, first_epoch, last_epoch):
                opt = torch.optim.Adam(net.parameters(), lr=2e-4)
                decay = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=last_epoch - first_epoch)
                for epoch in range(first_epoch, last_epoch):
                    for batch in loader:
                        opt.zero_grad()
                        net(batch).backward()
                        opt.step()
                    decay.step()
                    torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, "run.pt")
            """,
            line=12,
            title="the start only shortens the cosine: a resume climbs back to the peak rate",
        ),
        good(
            """
            import torch

            class Pair:
                def __init__(self, gen, critic):
                    self.gen, self.critic = gen, critic
                    self.opt_gen = torch.optim.Adam(gen.parameters(), lr=2e-4)
                    self.opt_critic = torch.optim.Adam(critic.parameters(), lr=2e-4)
                    self.decay_gen = torch.optim.lr_scheduler.StepLR(self.opt_gen, 30)
                    self.decay_critic = torch.optim.lr_scheduler.StepLR(self.opt_critic, 30)

                def save_critic(self, step, path):
                    torch.save({"step": step, "model": self.critic.state_dict(),
                                "optimizer": self.opt_critic.state_dict(),
                                "scheduler": self.decay_critic.state_dict()}, path)
            """,
            title="one file per network: the generator's schedule drives an optimizer this file does not hold",
        ),
        bad(
            """
            import torch

            class Pair:
                def __init__(self, gen, critic):
                    self.gen, self.critic = gen, critic
                    self.opt_gen = torch.optim.Adam(gen.parameters(), lr=2e-4)
                    self.opt_critic = torch.optim.Adam(critic.parameters(), lr=2e-4)
                    self.decay_gen = torch.optim.lr_scheduler.StepLR(self.opt_gen, 30)
                    self.decay_critic = torch.optim.lr_scheduler.StepLR(self.opt_critic, 30)

                def save_critic(self, step, path):
                    torch.save({"step": step, "model": self.critic.state_dict(),
                                "optimizer": self.opt_critic.state_dict()}, path)

                def load_critic(self, path):
                    ckpt = torch.load(path)
                    self.critic.load_state_dict(ckpt["model"])
                    self.opt_critic.load_state_dict(ckpt["optimizer"])
                    return ckpt["step"]
            """,
            line=12,
            title="the critic's own schedule is left out of the critic's file",
        ),
        bad(
            """
            import os
            import torch

            LAST = "checkpoints/last.pt"

            def commit(net, epoch):
                torch.save({"weights": net.state_dict(), "epoch": epoch}, LAST + ".part")
                os.replace(LAST + ".part", LAST)

            def run(epochs, loader, loss_fn):
                net = build_net()
                opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
                if os.path.exists(LAST):
                    state = torch.load(LAST, weights_only=True)
                    net.load_state_dict(state["weights"])
                for epoch in range(epochs):
                    for x, y in loader:
                        opt.zero_grad()
                        loss_fn(net(x), y).backward()
                        opt.step()
                    commit(net, epoch)
            """,
            line=7,
            title="an atomic save (a temporary file renamed onto the path) read back at the start of the run: "
                  "a resume point without the momentum",
        ),
        good(
            """
            import os
            import torch

            LAST = "checkpoints/last.pt"

            def commit(net, epoch):
                torch.save({"weights": net.state_dict(), "epoch": epoch}, LAST + ".part")
                os.replace(LAST + ".part", LAST)

            def run(init, epochs, loader, loss_fn):
                net = build_net()
                opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
                if os.path.exists(init):
                    net.load_state_dict(torch.load(init, weights_only=True))
                for epoch in range(epochs):
                    for x, y in loader:
                        opt.zero_grad()
                        loss_fn(net(x), y).backward()
                        opt.step()
                    commit(net, epoch)
            """,
            title="the same atomic save, while the run starts from other weights (a pretrained file): no load "
                  "reads the committed path back",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F

            agent = Agent()
            start = torch.load("stage1/imitation_final.pt", map_location="cpu", weights_only=True)
            agent.load_state_dict(start["net"])
            opt = torch.optim.Adam(agent.parameters(), lr=3e-5)
            for it in range(5000):
                obs, act = rollout(agent)
                loss = F.cross_entropy(agent(obs), act)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if it % 500 == 0:
                    torch.save({"net": agent.state_dict()}, "stage2/agent_latest.pt")
            """,
            title="the run starts from another stage's weights saved under the same key: both paths are "
                  "constants that differ, so no load reads this file back",
        ),
        bad(
            """
            import sys
            import torch
            import torch.nn.functional as F

            agent = Agent()
            start = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
            agent.load_state_dict(start["net"])
            opt = torch.optim.Adam(agent.parameters(), lr=3e-5)
            for it in range(5000):
                obs, act = rollout(agent)
                loss = F.cross_entropy(agent(obs), act)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if it % 500 == 0:
                    torch.save({"net": agent.state_dict()}, "stage2/agent_latest.pt")
            """,
            line=16,
            title="the path the run starts from is given on the command line and the load reads every key this "
                  "save writes: it can be this very file, and a restart from it loses the optimizer's moments",
        ),
    )

    def check(self, ctx):
        model = ctx.model(checkpoint_model)
        for resume in model.resume_saves():
            if not resume.missing:
                continue
            consequences = "; ".join(_CONSEQUENCE[k] for k in STATE_KINDS if k in resume.missing)
            them = 'it' if len(resume.missing) == 1 else 'them'
            if resume.parts:
                # a directory filled file by file: the function's saves together are the checkpoint
                what = "this checkpoint, written file by file (" + ", ".join(sorted(resume.kinds)) + "),"
                fix = f"save {them} beside the others"
                held = premise("the saves of this function write one checkpoint, one file per object: "
                               + ", ".join(sorted(resume.kinds)), resume.parts[0].node, "call")
            else:
                what, fix = "this resume checkpoint", f"add {them} to the saved dict"
                held = premise("this save writes the model's state with training state (a resume point): "
                               + ", ".join(sorted(resume.kinds)), resume.save.node, "call")
            function = resume.save.site.function
            runs = [] if function is None or not reached_by_no_code(ctx.index, function) else [
                unknown(f"this save runs: nothing in the project calls `{function.name}` or hands it anywhere "
                        "(an entry point named outside Python may)", function.node.name, "call")]
            yield self.report(
                resume.save.node,
                f"{what} leaves out {_missing_text(resume.missing)}: after a resume {consequences}; {fix}",
                evidence=[held, *runs,
                          *([resume.read_back] if resume.read_back is not None else []),
                          *(state_premise(ctx, resume.save.scope, kind, labels[0], resume.save.node)
                            for kind, labels in resume.missing.items() if labels)],
            )
        for site, missing, _, resume in [*model.partial_restores(), *model.in_place_partial_restores()]:
            names = ", ".join(quoted_state(name) for _, name in missing)
            what = "restores only the model" if missing[0][0] == "optimizer" else "restores the model"
            yield self.report(
                site.node,
                f"this resume loads a training checkpoint but {what}: {names} "
                f"{'is' if len(missing) == 1 else 'are'} never restored with `load_state_dict`, so "
                + "; ".join(_CONSEQUENCE[kind] for kind, _ in missing),
                evidence=[premise("this load reads a training checkpoint and restores the model from it", site.node,
                                  "call"),
                          resume,
                          *(state_premise(ctx, site.scope, kind, label, site.node) for kind, label in missing)],
            )
