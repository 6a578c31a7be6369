"""TL402 non-atomic-checkpoint-save."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model.checkpoint_base import COUNTER_NAME, SAVE_FUNCTIONS
from trainlint.model.checkpoints import checkpoint_model, read_back
from trainlint.model.index import dotted_name, walk
from trainlint.model.training import training_model
from trainlint.finding import Severity
from trainlint.gate import reference_text, refers_to
from trainlint.fixkit import add_import, blank_lines_after, import_block, module_name
from trainlint.rule import FixSpec, Rule, after, bad, good
from trainlint.model.premises import premise

_TRAINING_CALL = re.compile(r"train|fit|step|backward|epoch", re.IGNORECASE)
_CHECKPOINT_HELPER = re.compile(r"checkpoint|ckpt|resume|snapshot|save_state", re.IGNORECASE)
_ADVICE = ("write to a temporary file next to it and `os.replace` it onto the final path "
           "(readers then see the old file or the new one, never half of one)")


class NonAtomicCheckpointSave(Rule):
    code = "TL402"
    name = "non-atomic-checkpoint-save"
    severity = Severity.WARNING
    summary = "`torch.save` writes a checkpoint straight to its final path"
    message = f"`torch.save` writes this checkpoint straight to its final path: a crash mid-save leaves a truncated file; {_ADVICE}"
    triggers = (("torch", reference_text(*SAVE_FUNCTIONS)),)
    gate = refers_to(*SAVE_FUNCTIONS)
    what_it_does = """
        Flags `torch.save` of a checkpoint whose destination is the checkpoint's final path. A
        checkpoint is training state: a `state_dict()`, a dict holding state dicts or keys such as
        model/optimizer/epoch/step, a whole model or optimizer object, or, when the object cannot be
        seen into, a path named like one (`ckpt`, `checkpoint`, `last`, `best`, `latest`, `resume`,
        `weights`, `model`, `.pth`, `.ckpt`, `.tar`), an object named like one (`checkpoint`,
        `ckpt`, `state_dict`) or a helper named `save_checkpoint`. A `.pt` or `.bin` suffix alone
        is not enough: it is also the usual suffix of saved tensors. Tensors, data artefacts
        (`embeddings.pt`, `features.pt`, `predictions.pt`, a cache) and configuration objects
        (`torch.save(args, "training_args.bin")`) are not checkpoints; a crash while writing them
        costs a recomputation, not a run.

        Quiet on the atomic patterns: saving to a temporary path or file (`*.tmp`, `tempfile`, an
        `atomic_*` context manager) that is then moved onto the final path with `os.replace`,
        `os.rename`, `Path.replace`, `Path.rename` or `shutil.move` in the same function (directly or
        through a helper of the same file); saving into an `io.BytesIO`; and a helper whose
        destination parameter every caller in the file fills with a temporary or buffer. A call to
        a save helper imported from another module is not checked here: that module is checked on
        its own, where its `torch.save` is.

        The message says which failure to expect: a fixed name (`last.pt`) is overwritten on every
        save, so a crash leaves no checkpoint at all; a name that is unique per save
        (`ckpt_{step}.pt`) leaves a truncated newest file that a resume will pick up.

        Severity (the policy): a **warning** only where the save rewrites in place a path that
        something reads back: the destination is not unique per save (`last.pt`, a fixed string,
        a variable bound to one, `os.path.join(out_dir, "last.pt")`), and the file loads that same path (the same
        expression, the same string, or what a caller of the saving helper passes: the file a
        resume or a best-model reload reads) or records it as the one to read (a `latest` link or
        marker: `os.symlink(path, ...)`, `f.write(path)`, `json.dump(...)` naming it), or a load
        spells out the same file name (`"agent.pt"` of `f"{folder}/agent.pt"` saved and of
        `os.path.join(folder, "agent.pt")` loaded in the class's `load()`; the `enc.pt` a second-stage
        script of the same project loads: another file of the saving file's import component). A crash
        mid-save then destroys the one checkpoint the run comes back to. Every other non-atomic
        save is still reported, at **info**: a name unique per save (a crash truncates only the newest file, the
        older ones stay), a fixed path nothing in the file reads back (an export, per-epoch files,
        a path another program reads), a single save of final weights after training (model
        state only, not in a loop, every caller of its function seen and none in a loop), and a
        save in a file that runs no training loop at all (a conversion, merge or export script).
        On public training code (issue 35) 2 of 15 sampled TL402 findings were this default case
        and 13 were minor: the warning is kept for the case a maintainer acts on. Of 30 sampled
        later (round 5's held-out half), 3 true findings were at warning and 3 at info, read back
        in another method or file under another spelling of the path: what the file-name match
        now finds. The evidence
        (`--show-evidence`) names the load or marker that reads the path back.
        """
    why_bad = """
        `torch.save` opens the destination for writing, which truncates it, then streams a ZIP
        archive into it. A preempted job, an OOM kill or a full disk in between leaves a file that
        `torch.load` rejects. When the path is the one checkpoint the run keeps (`last.pt`), the
        previous good checkpoint was destroyed when the write began, so hours of training are lost.
        A rename within one filesystem is atomic on POSIX: readers see the old file or the new one.
        """
    fix_safety = """
        Safe for a destination written as a path (a string, an f-string, `os.path.join`): the
        same bytes reach the same path, through a temporary file that is flushed, synced and
        renamed onto it, so a save that is not a checkpoint is written just the same. Unsafe for
        a name, which could hold an open file rather than a path.
        """
    references = (
        "https://pytorch.org/docs/stable/notes/serialization.html",
        "https://docs.python.org/3/library/os.html#os.replace",
    )
    examples = (
        bad(
            """
            import torch

            def save(model, optimizer, epoch):
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "checkpoints/last.pt")

            def resume(model, optimizer):
                state = torch.load("checkpoints/last.pt", weights_only=True)
                model.load_state_dict(state["model"])
                optimizer.load_state_dict(state["optimizer"])
                return state["epoch"]
            """,
            line=4,
            fixed="""
            import os

            import torch


            def atomic_save(obj, path):
                # into a temporary file, synced to disk, then renamed: `path` is never half-written
                tmp = f"{path}.tmp"
                with open(tmp, "wb") as f:
                    torch.save(obj, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)


            def save(model, optimizer, epoch):
                atomic_save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "checkpoints/last.pt")

            def resume(model, optimizer):
                state = torch.load("checkpoints/last.pt", weights_only=True)
                model.load_state_dict(state["model"])
                optimizer.load_state_dict(state["optimizer"])
                return state["epoch"]
            """,
            title="the file the resume reads, rewritten in place on every save",
        ),
        bad(
            """
            import torch

            def save(model, optimizer, epoch):
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "checkpoints/last.pt")
            """,
            line=4,
            fixed="""
            import os

            import torch


            def atomic_save(obj, path):
                # into a temporary file, synced to disk, then renamed: `path` is never half-written
                tmp = f"{path}.tmp"
                with open(tmp, "wb") as f:
                    torch.save(obj, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)


            def save(model, optimizer, epoch):
                atomic_save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "checkpoints/last.pt")
            """,
            title="a fixed path overwritten on every save, that nothing in the file reads back: info",
            severity=Severity.INFO,
        ),
        bad(
            """
            import os
            import torch

            class Agent:
                def save(self, folder):
                    torch.save(self.net.state_dict(), f"{folder}/agent.pt")

                def load(self, folder):
                    self.net.load_state_dict(torch.load(os.path.join(folder, "agent.pt")))
            """,
            line=6,
            fixed="""
            import os
            import torch


            def atomic_save(obj, path):
                # into a temporary file, synced to disk, then renamed: `path` is never half-written
                tmp = f"{path}.tmp"
                with open(tmp, "wb") as f:
                    torch.save(obj, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)


            class Agent:
                def save(self, folder):
                    atomic_save(self.net.state_dict(), f"{folder}/agent.pt")

                def load(self, folder):
                    self.net.load_state_dict(torch.load(os.path.join(folder, "agent.pt")))
            """,
            title="the file another method loads, spelled differently there: the file name it writes is read back",
        ),
        bad(
            """
            import os
            import torch

            class Agent:
                def save(self, folder):
                    torch.save(self.net.state_dict(), f"{folder}/agent.pt")

                def load(self, folder):
                    self.net.load_state_dict(torch.load(os.path.join(folder, "pretrained.pt")))
            """,
            line=6,
            fixed="""
            import os
            import torch


            def atomic_save(obj, path):
                # into a temporary file, synced to disk, then renamed: `path` is never half-written
                tmp = f"{path}.tmp"
                with open(tmp, "wb") as f:
                    torch.save(obj, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)


            class Agent:
                def save(self, folder):
                    atomic_save(self.net.state_dict(), f"{folder}/agent.pt")

                def load(self, folder):
                    self.net.load_state_dict(torch.load(os.path.join(folder, "pretrained.pt")))
            """,
            title="a load of another file name (`pretrained.pt`) does not read this save back: info",
            severity=Severity.INFO,
        ),
        bad(
            """
            import os
            import torch

            for epoch in range(10):
                train_one_epoch()
                torch.save(model.state_dict(), os.path.join(args.out_dir, f"epoch_{epoch}.pth"))
            """,
            line=6,
            fixed="""
            import os
            import torch


            def atomic_save(obj, path):
                # into a temporary file, synced to disk, then renamed: `path` is never half-written
                tmp = f"{path}.tmp"
                with open(tmp, "wb") as f:
                    torch.save(obj, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)


            for epoch in range(10):
                train_one_epoch()
                atomic_save(model.state_dict(), os.path.join(args.out_dir, f"epoch_{epoch}.pth"))
            """,
            title="a unique name per save (a crash truncates only the newest): info",
            severity=Severity.INFO,
        ),
        bad(
            """
            from pathlib import Path
            import torch

            class Trainer:
                def save_checkpoint(self, path: Path):
                    with open(path, "wb") as f:
                        torch.save(self.state(), f)
            """,
            line=7,
            title="an open file handle on the final path, not read back here: info",
            severity=Severity.INFO,
        ),
        bad(
            """
            import os
            import torch

            def save_checkpoint(state, filename="checkpoint.pth.tar"):
                torch.save(state, filename)

            save_checkpoint({"model": model.state_dict()}, os.path.join(out, "ckpt.pth.tar"))
            """,
            line=5,
            fixed="""
            import os
            import torch


            def atomic_save(obj, path):
                # into a temporary file, synced to disk, then renamed: `path` is never half-written
                tmp = f"{path}.tmp"
                with open(tmp, "wb") as f:
                    torch.save(obj, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)


            def save_checkpoint(state, filename="checkpoint.pth.tar"):
                atomic_save(state, filename)

            save_checkpoint({"model": model.state_dict()}, os.path.join(out, "ckpt.pth.tar"))
            """,
            title="a helper whose caller passes the final path, not read back here: info",
            severity=Severity.INFO,
        ),
        bad(
            """
            import torch as T

            T.save(net, "model_best.pth")
            """,
            line=3,
            fixed="""
            import os

            import torch as T


            def atomic_save(obj, path):
                # into a temporary file, synced to disk, then renamed: `path` is never half-written
                tmp = f"{path}.tmp"
                with open(tmp, "wb") as f:
                    T.save(obj, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)


            atomic_save(net, "model_best.pth")
            """,
                        title="a whole model pickled to its final path, once (info)",
            severity=Severity.INFO,
        ),
        bad(
            """
            import torch


            def main(args):
                model = build_model(args)
                optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
                for epoch in range(args.epochs):
                    train_one_epoch(model, optimizer, args)
                torch.save(model.state_dict(), f"{args.out_dir}/final.pt")


            if __name__ == "__main__":
                main(parse_args())
            """,
            line=9,
            fixed="""
            import os

            import torch


            def atomic_save(obj, path):
                # into a temporary file, synced to disk, then renamed: `path` is never half-written
                tmp = f"{path}.tmp"
                with open(tmp, "wb") as f:
                    torch.save(obj, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)


            def main(args):
                model = build_model(args)
                optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
                for epoch in range(args.epochs):
                    train_one_epoch(model, optimizer, args)
                atomic_save(model.state_dict(), f"{args.out_dir}/final.pt")


            if __name__ == "__main__":
                main(parse_args())
            """,
            title="final weights saved once after training: reported at info",
            severity=Severity.INFO,
        ),
        bad(
            """
            import os
            import torch

            ckpt = "weights/model.pt"
            if os.path.exists(ckpt):
                model.load_state_dict(torch.load(ckpt, weights_only=True))
            for epoch in range(10):
                train_one_epoch(model, loader, optimizer)
            torch.save(model.state_dict(), ckpt)
            """,
            line=9,
            fixed="""
            import os
            import torch


            def atomic_save(obj, path):
                # into a temporary file, synced to disk, then renamed: `path` is never half-written
                tmp = f"{path}.tmp"
                with open(tmp, "wb") as f:
                    torch.save(obj, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)


            ckpt = "weights/model.pt"
            if os.path.exists(ckpt):
                model.load_state_dict(torch.load(ckpt, weights_only=True))
            for epoch in range(10):
                train_one_epoch(model, loader, optimizer)
            atomic_save(model.state_dict(), ckpt)
            """,
            title="a single save to the file the script resumes from",
        ),
        good(
            """
            import os
            import torch

            def save(state, path):
                tmp = path + ".tmp"
                torch.save(state, tmp)
                os.replace(tmp, path)

            save({"model": model.state_dict(), "step": step}, "checkpoints/last.pt")
            """,
            title="write to a temporary path, then os.replace",
        ),
        good(
            """
            import os
            import torch
            from pathlib import Path

            def atomic_save(obj, path: Path):
                tmp = path.with_name(path.name + ".tmp")
                with open(tmp, "wb") as f:
                    torch.save(obj, f)
                    f.flush()
                    os.fsync(f.fileno())
                tmp.replace(path)
            """,
            title="an open temporary file, fsync, Path.replace",
        ),
        good(
            """
            import io
            import torch

            buffer = io.BytesIO()
            torch.save({"model": model.state_dict()}, buffer)
            upload("s3://bucket/ckpt/last.pt", buffer.getvalue())
            """,
            title="into a BytesIO buffer",
        ),
        good(
            """
            import tempfile
            import shutil
            import torch

            with tempfile.NamedTemporaryFile(dir=ckpt_dir, delete=False) as f:
                torch.save(checkpoint, f)
            shutil.move(f.name, ckpt_dir / "last.pt")
            """,
            title="tempfile plus shutil.move",
        ),
        good(
            """
            import torch

            torch.save(model.token_embedding.weight.detach().cpu(), "embeddings.pt")
            """,
            title="a data artefact, not a checkpoint",
        ),
        good(
            """
            import os
            import torch

            def save_run_config(args, output_dir):
                torch.save(args, os.path.join(output_dir, "training_args.bin"))
            """,
            title="a configuration object, not training state",
        ),
        good(
            """
            import os
            import torch

            def _commit(tmp, path):
                os.replace(tmp, path)

            def save(state, path):
                partial = f"{path}.partial"
                torch.save(state, partial)
                _commit(partial, path)
            """,
            title="the rename happens in a helper of the same file",
        ),
        bad(
            """
            import argparse
            import os

            import torch


            def convert(checkpoint_path, output_dir):
                state_dict = torch.load(checkpoint_path, map_location="cpu", weights_only=True)["model"]
                state_dict = {key.removeprefix("module."): value for key, value in state_dict.items()}
                os.makedirs(output_dir, exist_ok=True)
                torch.save(state_dict, os.path.join(output_dir, "pytorch_model.bin"))


            if __name__ == "__main__":
                parser = argparse.ArgumentParser()
                parser.add_argument("checkpoint")
                parser.add_argument("output_dir")
                args = parser.parse_args()
                convert(args.checkpoint, args.output_dir)
            """,
            line=11,
            fixed="""
            import argparse
            import os

            import torch


            def atomic_save(obj, path):
                # into a temporary file, synced to disk, then renamed: `path` is never half-written
                tmp = f"{path}.tmp"
                with open(tmp, "wb") as f:
                    torch.save(obj, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)


            def convert(checkpoint_path, output_dir):
                state_dict = torch.load(checkpoint_path, map_location="cpu", weights_only=True)["model"]
                state_dict = {key.removeprefix("module."): value for key, value in state_dict.items()}
                os.makedirs(output_dir, exist_ok=True)
                atomic_save(state_dict, os.path.join(output_dir, "pytorch_model.bin"))


            if __name__ == "__main__":
                parser = argparse.ArgumentParser()
                parser.add_argument("checkpoint")
                parser.add_argument("output_dir")
                args = parser.parse_args()
                convert(args.checkpoint, args.output_dir)
            """,
            title="a conversion script that trains nothing: reported at info",
            severity=Severity.INFO,
        ),
    )

    def check(self, ctx):
        model = ctx.model(checkpoint_model)
        for save in model.saves:
            if save.helper or save.framework or not model.is_checkpoint(save):
                continue  # a helper's save is judged at its own `torch.save`, in its file; a framework's
                # save (`dcp.save`: shards, then its metadata) is not a `torch.save` to one path
            verdict = model.is_atomic(save)
            if verdict is True:
                continue
            case = self._one_off_case(ctx, model, save)
            where = premise("`torch.save` writes the checkpoint straight to its final path, with no temporary "
                            "file renamed onto it", save.node, "call")
            if case is not None:
                yield self.report(save.node, self._one_off_message(model, save, case), fix=_fix(ctx, save),
                                  severity=Severity.INFO, evidence=[where, _after_training(ctx, save, case)])
                continue
            reuse = model.path_reuse(save)
            # who reads the path back matters only where it is rewritten in place (the search may
            # parse other files of the project)
            reader = _reader_premise(ctx, save) if reuse != "unique" else None
            evidence = [where, _reuse_premise(model, save, reuse)]
            if reader is not None:
                # the default finding: the one file something reads back is rewritten in place
                yield self.report(save.node, self._message(model, save), _fix(ctx, save),
                                  evidence=evidence + [reader])
                continue
            evidence.append(premise("nothing in this file reads this path back (no `torch.load` of it, no `latest` "
                                    "marker naming it)", save.node, "use"))
            yield self.report(save.node, self._message(model, save) + " (reported at info: nothing in this file "
                              "reads this path back)", _fix(ctx, save), severity=Severity.INFO, evidence=evidence)

    @staticmethod
    def _one_off_case(ctx, model, save) -> str | None:
        """Why a crash mid-save would lose no training state, or None:

        - "final": a save of final weights (model state, no optimizer state) that runs once, after
          training: not in a loop, nor are the same-file callers of its function;
        - "export": a save in a file that runs no training loop at all (a conversion, merge or
          export script), of no optimizer/scheduler/scaler state, not in a loop that looks like
          training, and not in a function named for checkpointing (`save_checkpoint`).

        Either way every caller of its function must be seen (a helper nobody in the file calls,
        `save_checkpoint`, is taken to run during training) and no `torch.load` in the file reads
        the same path (the file a resume reads)."""
        kinds = model.object_kinds(save)
        if kinds and kinds & {"optimizer", "scheduler", "scaler", "rng"}:
            return None  # a point to resume from
        training = ctx.model(training_model)
        trains = bool(training.loops or training.window_functions)
        if trains and (not kinds or not kinds <= {"model", "step"}):
            return None  # what is saved is not seen: it may be training state
        index = ctx.index
        if model.text(save.dest) in model.loaded_texts():
            return None  # the file a resume reads
        frontier, seen = [(save.node, save.site.function)], set()
        while frontier:
            node, function = frontier.pop()
            loop = _enclosing_loop(index, node, function)
            if loop is not None and (trains or _training_like(index, loop)):
                return None
            if function is None:
                continue
            if not trains and _CHECKPOINT_HELPER.search(function.name):
                return None  # `save_checkpoint()`: the checkpointing of a run that trains elsewhere
            if function.node in seen:
                continue
            seen.add(function.node)
            callers = index.callers(function)
            if not callers or len(seen) > 4:
                return None
            frontier += [(site.node, site.function) for site in callers]
        return "final" if trains else "export"

    def _one_off_message(self, model, save, case) -> str:
        when = "in a single save after training" if case == "final" else \
            "in a script that runs no training (an export or conversion)"
        return (f"`torch.save` writes `{model.text(save.dest)}` straight to its final path {when}: a crash "
                f"mid-save leaves a truncated file, though no training state a run resumes from is lost "
                f"(reported at info); {_ADVICE}")

    def _message(self, model, save) -> str:
        where = f"`{model.text(save.dest)}`" if save.dest is not None else "the path its callers give"
        passed = [p for p in model.caller_arguments(save) if p != model.text(save.dest)]
        if passed:
            where += " (callers pass " + ", ".join(f"`{p}`" for p in dict.fromkeys(passed)) + ")"
        reuse = model.path_reuse(save)
        if reuse == "fixed":
            return (f"`torch.save` overwrites the checkpoint at {where} in place: the old file is truncated "
                    f"when the write starts, so a crash mid-save leaves no checkpoint at all; {_ADVICE}")
        if reuse == "unique":
            return (f"`torch.save` writes the checkpoint straight to {where}: a crash mid-save leaves a "
                    f"truncated newest checkpoint that a resume will pick up; {_ADVICE}")
        return (f"`torch.save` writes the checkpoint straight to {where}: a crash mid-save leaves a "
                f"truncated file (and no checkpoint at all if the path is reused); {_ADVICE}")


def _reader_premise(ctx, save):
    """That something in the file reads the saved path back (a file fact: the reading code may sit
    in another part of the document than a language server's sliced check holds, so the premise
    is stated at the save, naming what reads it, the same in every check)."""
    found = read_back(ctx, save)
    if found is None:
        return None
    kind, text = found
    if kind == "marker":
        return premise(f"a `latest` link or marker in this file names this path (`{text[:60]}`)", save.node, "use")
    if kind == "name":
        return premise(f"the file it writes is read back: `{text[:120]}`", save.node, "call")
    shown = f'"{text}"' if kind == "string" else text
    return premise(f"a `torch.load` in this file reads this path back (`{shown[:60]}`): a resume or a reload",
                   save.node, "call")


def _reuse_premise(model, save, reuse):
    node = save.dest if save.dest is not None else save.node
    if reuse == "fixed":
        return premise("the path is the same on every save: it is rewritten in place", node, "argument")
    if reuse == "unique":
        return premise("the path changes from one save to the next", node, "argument")
    return premise("whether the path is reused cannot be told from the code", node, "argument")


def _after_training(ctx, save, case):
    if case == "final":
        return premise("it runs once, after training, with no optimizer state", save.node, "use")
    return premise("the file runs no training loop: an export or conversion", save.node, "use")


#: the helper the fix adds once per file, and calls in place of `torch.save`
HELPER = "atomic_save"


def helper_code(torch_name: str, os_name: str, indent: str = "    ") -> str:
    """The helper the fix adds: `torch.save` into an open temporary file next to `path`, flushed
    and synced to disk, then renamed onto `path`."""
    return "\n".join([
        f"def {HELPER}(obj, path):",
        f"{indent}# into a temporary file, synced to disk, then renamed: `path` is never half-written",
        f'{indent}tmp = f"{{path}}.tmp"',
        f'{indent}with open(tmp, "wb") as f:',
        f"{indent}{indent}{torch_name}.save(obj, f)",
        f"{indent}{indent}f.flush()",
        f"{indent}{indent}{os_name}.fsync(f.fileno())",
        f"{indent}{os_name}.replace(tmp, path)",
    ])


def _names_helper(ctx) -> bool:
    """The file's text holds the helper's name (searched once per file, not once per save; the
    source text, since `module.code` would generate the whole file again)."""
    return re.search(rf"\b{HELPER}\b", ctx.source) is not None


def _fix(ctx, save) -> FixSpec | None:
    """`atomic_save(obj, dest)` in place of `torch.save(obj, dest)`, with the helper (`helper_code`)
    added after the module's imports, once per file, and `import os` where isort puts it when the
    module has no `os`. The destination is still evaluated once. Safe when it is written as a path
    (a string, an f-string, `os.path.join`); unsafe for a name, which could hold an open file."""
    dest, call, index, module = save.dest, save.node, ctx.index, ctx.module
    if dest is None or len(call.args) != 2 or any(arg.keyword is not None or arg.star for arg in call.args) \
            or call.args[1].value is not dest:
        return None
    if isinstance(dest, (cst.SimpleString, cst.FormattedString)) or \
            (isinstance(dest, cst.Call) and index.resolve(dest.func, save.scope) == "os.path.join"):
        path_like = True
    elif isinstance(dest, cst.Attribute) or (isinstance(dest, cst.Name) and _path_name(save.scope.lookup(dest.value))):
        path_like = False
    else:
        return None
    scope = index.module_scope
    torch_name = module_name(index, scope, "torch")
    if torch_name is None or ctx.code_for(call.func) != f"{torch_name}.save" or scope.lookup("open"):
        return None  # the helper names torch (and `open`) at module level
    layout = ctx.model(_module_layout)
    if not layout.imports or not _runs_after(index, module, layout, call):
        return None
    replacement = ((call.func, HELPER),)
    title = f"Save through `{HELPER}` (a temporary file, synced, then `os.replace`)"
    existing = layout.helpers
    if existing:  # added by this fix for another save: call it
        if len(existing) != 1 or not _is_helper(module, existing[0]) or len(scope.lookup(HELPER)) != 1 \
                or save.scope.lookup(HELPER) != scope.lookup(HELPER):
            return None
        return FixSpec(title, safe=path_like, replacements=replacement)
    if ctx.model(_names_helper):
        return None  # the name means something else here
    os_name = module_name(index, scope, "os")
    import_edit = None
    if os_name is None:
        if scope.lookup("os"):
            return None  # `os` means something else here
        os_name, import_edit = "os", add_import(module, "os")
        if import_edit is None:
            return None
    anchor = layout.imports[-1]
    # two blank lines around a top-level function (the blank lines already below the imports follow
    # it); a line edit's last newline ends its last line
    code = "\n\n" + helper_code(torch_name, os_name, module.default_indent) \
        + "\n" * (max(0, 2 - layout.blank_after_imports) + 1)
    lines = []
    if import_edit is not None and import_edit[0] == "after" and import_edit[1] is anchor:
        code = import_edit[2] + "\n" + code  # both go below the last import: one edit
    elif import_edit is not None:
        lines.append(import_edit)
    lines.append(after(anchor, code))
    return FixSpec(title, safe=path_like, replacements=replacement, lines=tuple(lines))


def _is_helper(module, function: cst.FunctionDef) -> bool:
    text = module.code_for_node(function.with_changes(leading_lines=())).strip()
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # as written in a CRLF or CR file
    return any(text == helper_code(t, o, module.default_indent) for t, o in _names_in(text))


def _names_in(text: str):
    """The (torch, os) names a helper's text was written with."""
    torch_name = re.search(r"(\w+)\.save\(obj, f\)", text)
    os_name = re.search(r"(\w+)\.fsync\(", text)
    return [(torch_name.group(1), os_name.group(1))] if torch_name and os_name else []


class _ModuleLayout:
    """The module's top-level layout, read once per file (every save's fix asks): its import block
    and the blank lines below it, the position of each top-level statement, the `atomic_save`
    helpers already defined."""

    def __init__(self, module: cst.Module) -> None:
        self.imports = import_block(module)
        self.position = {id(statement): number for number, statement in enumerate(module.body)}
        self.helpers = [s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == HELPER]
        self.blank_after_imports = blank_lines_after(module, self.imports[-1], self.position[id(self.imports[-1])]) \
            if self.imports else 0


def _module_layout(ctx) -> _ModuleLayout:
    return _ModuleLayout(ctx.module)


def _runs_after(index, module, layout: _ModuleLayout, node) -> bool:
    """`node` is in a top-level statement after the import block (so a helper added there is defined)."""
    top = node
    while index.parent(top) is not None and index.parent(top) is not module:
        top = index.parent(top)
    where = layout.position.get(id(top))
    return where is not None and where > layout.position[id(layout.imports[-1])]


def _path_name(bindings) -> bool:
    """A name that holds a path, not an open file: a parameter, or assigned a string or a join."""
    return bool(bindings) and all(b.kind == "param" or (b.kind == "assign" and _path_value(b.value))
                                  for b in bindings)


def _path_value(value) -> bool:
    if isinstance(value, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString, cst.BinaryOperation)):
        return True
    return isinstance(value, cst.Call) and _callee(value) in _PATH_CALLS


_PATH_CALLS = {"join", "Path", "str", "format", "with_suffix", "with_name", "joinpath", "expanduser", "resolve"}


def _callee(call: cst.Call) -> str | None:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None


def _enclosing_loop(index, node, function):
    """The innermost loop of its own function (or of the module's code) that `node` runs in."""
    stop = function.node if function is not None else None
    for ancestor in index.ancestors(node):
        if ancestor is stop or isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            return None
        if isinstance(ancestor, (cst.For, cst.While)):
            return ancestor
    return None


def _training_like(index, loop) -> bool:
    """A loop that looks like it trains through helpers of other files: a `while`, a loop over
    epochs/steps, or one calling something named like training (`train_one_epoch()`, `trainer.fit()`);
    not a loop over the tensors or shards a conversion writes."""
    if not isinstance(loop, cst.For):
        return True
    if any(isinstance(n, cst.Name) and COUNTER_NAME.match(n.value) for n in walk(loop.target)):
        return True
    return any(isinstance(n, cst.Call) and _TRAINING_CALL.search(dotted_name(n.func) or "")
               for n in walk(loop.body))
