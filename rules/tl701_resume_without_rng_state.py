"""TL701 resume-without-rng-state."""

from __future__ import annotations

from trainlint.model.checkpoints import checkpoint_model
from trainlint.model.checkpoint_base import SAVE_FUNCTIONS
from trainlint.finding import Severity
from trainlint.gate import named, reference_text, refers_to
from trainlint.rule import Rule, bad, good
from trainlint.model.premises import premise


class ResumeWithoutRngState(Rule):
    code = "TL701"
    name = "resume-without-rng-state"
    severity = Severity.INFO
    enabled_by_default = False
    summary = "A complete resume checkpoint of a seeded run leaves out the random-number-generator state"
    message = "this resume checkpoint of a seeded run leaves out the RNG state"
    triggers = (("torch", "seed", reference_text(*SAVE_FUNCTIONS)),)
    gate = refers_to(*SAVE_FUNCTIONS) & named("seed|enable_full_determinism")
    what_it_does = """
        Flags a `torch.save` of a resume checkpoint that already holds everything TL404 asks for
        (model, optimizer, and the scheduler, scaler and step counter the code has) but no
        random-number-generator state, in a file that seeds its generators (`torch.manual_seed`,
        `random.seed`, `np.random.seed`, `set_seed`, `seed_everything`). RNG state is a value of
        `torch.get_rng_state()`, `torch.cuda.get_rng_state_all()`, `random.getstate()`,
        `np.random.get_state()`, a generator's `get_state()`, or a key naming it (`rng`,
        `rng_state`, `random_state`, ...).

        Off by default and of severity info: it is about exact (bitwise) resume, which not every
        run needs, and it should not drown the findings that break a resume outright. Enable it with
        `--extend-select TL701` for runs that promise reproducibility.
        """
    why_bad = """
        A seeded run promises that the same seed gives the same run. A resume rebuilds the model and
        optimizer, which consumes random numbers, and then restores their state; the generators
        are left wherever the new process put them. Dropout masks, augmentation and, when the
        DataLoader has no generator of its own, the shuffle order (it draws from the global torch
        generator) then differ from the uninterrupted run, so the resumed run diverges from the
        first step after the resume. Restoring RNG state after building fresh objects and before
        the first forward, together with the sampler position, makes the continuation exact.
        """
    references = (
        "https://pytorch.org/docs/stable/notes/randomness.html",
        "https://pytorch.org/docs/stable/generated/torch.get_rng_state.html",
        "https://docs.python.org/3/library/random.html#random.getstate",
    )
    examples = (
        bad(
            """
            import torch

            torch.manual_seed(0)
            model = Net()
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(10):
                train_one_epoch(model, optimizer)
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "last.pt")
            """,
            line=8,
            title="a seeded script",
        ),
        bad(
            """
            import torch
            from transformers import set_seed, get_cosine_schedule_with_warmup

            class Trainer:
                def __init__(self, model, cfg):
                    set_seed(cfg.seed)
                    self.model = model
                    self.optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
                    self.scheduler = get_cosine_schedule_with_warmup(self.optimizer, 100, cfg.steps)
                    self.step = 0

                def save(self, path):
                    torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                                "scheduler": self.scheduler.state_dict(), "step": self.step}, path)
            """,
            line=13,
            title="a Trainer seeded with set_seed",
        ),
        bad(
            """
            import random
            import numpy as np
            import torch

            def seed_all(seed):
                random.seed(seed)
                np.random.seed(seed)
                torch.manual_seed(seed)

            def save_checkpoint(model, optimizer, step, path):
                state = dict(model=model.state_dict(), optimizer=optimizer.state_dict(), step=step)
                torch.save(state, path)
            """,
            line=12,
            title="a helper module that seeds three generators",
        ),
        bad(
            """
            import lightning as L
            import torch

            L.seed_everything(42)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            global_step = 0
            for batch in loader:
                global_step += 1
                ckpt = {"net": net.state_dict()}
                ckpt["opt"] = opt.state_dict()
                ckpt["global_step"] = global_step
                torch.save(ckpt, "ckpt/latest.pt")
            """,
            line=12,
            title="a dict filled key by key",
        ),
        good(
            """
            import random
            import numpy as np
            import torch

            torch.manual_seed(0)
            model = Net()
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(10):
                train_one_epoch(model, optimizer)
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch, "torch_rng": torch.get_rng_state(),
                            "python_rng": random.getstate(),
                            "numpy_rng": torch.from_numpy(np.random.get_state()[1])}, "last.pt")
            """,
            title="RNG state saved",
        ),
        good(
            """
            import torch

            model = Net()
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(10):
                train_one_epoch(model, optimizer)
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "last.pt")
            """,
            title="an unseeded run promises no exact resume",
        ),
        good(
            """
            import torch

            torch.manual_seed(0)
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(10):
                train_one_epoch(model, optimizer)
                torch.save(model.state_dict(), "best.pt")
            """,
            title="a weights-only export",
        ),
        good(
            """
            import torch

            torch.manual_seed(0)
            optimizer = torch.optim.AdamW(model.parameters())
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
            for epoch in range(10):
                train_one_epoch(model, optimizer, scheduler)
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "last.pt")
            """,
            title="an incomplete checkpoint is TL404's finding, not this one's",
        ),
        good(
            """
            import torch

            torch.manual_seed(0)
            def save(model, optimizer, step, path):
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                            "rng_state": {"cpu": torch.get_rng_state(),
                                          "cuda": torch.cuda.get_rng_state_all()}}, path)
            """,
            title="RNG state nested under one key",
        ),
    )

    def check(self, ctx):
        model = ctx.model(checkpoint_model)
        if not model.seeds_rng():
            return
        for resume in model.resume_saves():
            if resume.missing or "rng" in resume.kinds or not {"optimizer", "step"} <= resume.kinds:
                continue
            yield self.report(
                resume.save.node,
                "this resume checkpoint holds the model, optimizer and step but no RNG state, while the "
                "run seeds its generators: a resumed run draws different dropout masks and shuffle "
                "order than an uninterrupted one; save `torch.get_rng_state()` (and CUDA's), "
                "`random.getstate()`, `np.random.get_state()` and the sampler position, and restore "
                "them after rebuilding the objects",
                evidence=[premise("this save writes model, optimizer and step: a resume point",
                                  resume.save.node, "call"),
                          # a file fact (`checkpoints.seeds`): the seed call may sit in another part of
                          # the document than a language server's sliced check holds, so it is
                          # stated at the save, the same in every check
                          premise("the file seeds its random generators (a `manual_seed`/`seed` call)",
                                  resume.save.node, "call"),
                          premise("no RNG state is in the saved dict", resume.save.node, "use")],
            )

