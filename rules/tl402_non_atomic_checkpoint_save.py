"""TL402 non-atomic-checkpoint-save."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model.checkpoints import COUNTER_NAME, SAVE_FUNCTIONS, checkpoint_model
from trainlint.model.index import dotted_name, walk
from trainlint.model.training import training_model
from trainlint.finding import Severity
from trainlint.gate import reference_text, refers_to
from trainlint.fixkit import module_name, own_line
from trainlint.rule import FixSpec, Rule, after, bad, before, good

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

        Severity: a warning where a crash mid-save loses state a run needs: a save inside a loop
        (or in a function called from one, or a helper whose callers are not all in the file), a
        save holding optimizer/scheduler/scaler state, and the file a `torch.load` of the same
        path resumes from. A single save of final weights after training (model state only, not in
        a loop, every caller of its function seen and none in a loop) is reported at **info**, and
        the message says so: a crash then truncates that one file but loses no training state. So
        is a save in a file that runs no training loop at all (a conversion, merge or export
        script), of no optimizer/scheduler/scaler state, outside loops over epochs or steps and
        functions named for checkpointing, when every caller of its function is seen.
        """
    why_bad = """
        `torch.save` opens the destination for writing, which truncates it, then streams a ZIP
        archive into it. A preempted job, an OOM kill or a full disk in between leaves a file that
        `torch.load` rejects. When the path is the one checkpoint the run keeps (`last.pt`), the
        previous good checkpoint was destroyed when the write began, so hours of training are lost.
        A rename within one filesystem is atomic on POSIX: readers see the old file or the new one.
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
            """,
            line=4,
            fixed="""
            import os
            import torch

            def save(model, optimizer, epoch):
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, "checkpoints/last.pt.tmp")
                os.replace("checkpoints/last.pt.tmp", "checkpoints/last.pt")
            """,
            title="a fixed path overwritten on every save",
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

            for epoch in range(10):
                train_one_epoch()
                torch.save(model.state_dict(), os.path.join(args.out_dir, f"epoch_{epoch}.pth") + ".tmp")
                os.replace(os.path.join(args.out_dir, f"epoch_{epoch}.pth") + ".tmp", os.path.join(args.out_dir, f"epoch_{epoch}.pth"))
            """,
            title="a unique name per save",
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
            title="an open file handle on the final path",
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

            def save_checkpoint(state, filename="checkpoint.pth.tar"):
                torch.save(state, f"{filename}.tmp")
                os.replace(f"{filename}.tmp", filename)

            save_checkpoint({"model": model.state_dict()}, os.path.join(out, "ckpt.pth.tar"))
            """,
            title="a helper whose caller passes the final path",
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

            T.save(net, "model_best.pth.tmp")
            os.replace("model_best.pth.tmp", "model_best.pth")
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


            def main(args):
                model = build_model(args)
                optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
                for epoch in range(args.epochs):
                    train_one_epoch(model, optimizer, args)
                torch.save(model.state_dict(), f"{args.out_dir}/final.pt.tmp")
                os.replace(f"{args.out_dir}/final.pt.tmp", f"{args.out_dir}/final.pt")


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

            ckpt = "weights/model.pt"
            if os.path.exists(ckpt):
                model.load_state_dict(torch.load(ckpt, weights_only=True))
            for epoch in range(10):
                train_one_epoch(model, loader, optimizer)
            torch.save(model.state_dict(), f"{ckpt}.tmp")
            os.replace(f"{ckpt}.tmp", ckpt)
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


            def convert(checkpoint_path, output_dir):
                state_dict = torch.load(checkpoint_path, map_location="cpu", weights_only=True)["model"]
                state_dict = {key.removeprefix("module."): value for key, value in state_dict.items()}
                os.makedirs(output_dir, exist_ok=True)
                torch.save(state_dict, os.path.join(output_dir, "pytorch_model.bin") + ".tmp")
                os.replace(os.path.join(output_dir, "pytorch_model.bin") + ".tmp", os.path.join(output_dir, "pytorch_model.bin"))


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
            if save.helper or not model.is_checkpoint(save):
                continue  # a helper's save is judged at its own `torch.save`, in its file
            verdict = model.is_atomic(save)
            if verdict is True:
                continue
            case = self._one_off_case(ctx, model, save)
            if case is not None:
                yield self.report(save.node, self._one_off_message(model, save, case), fix=_fix(ctx, save), severity=Severity.INFO)
                continue
            yield self.report(save.node, self._message(model, save), _fix(ctx, save))

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


def _fix(ctx, save) -> FixSpec | None:
    """`torch.save(obj, <dest>.tmp)` then `os.replace(<dest>.tmp, dest)` on the next line, with
    `import os` added when the module has no `os`. Safe when the destination is written as a
    path (a string, an f-string, `os.path.join`); unsafe for a name, which could hold a file."""
    dest = save.dest
    line = own_line(ctx.index, save.node)
    if dest is None or line is None or not any(arg.value is dest and arg.keyword is None for arg in save.node.args):
        return None
    code = ctx.code_for(dest)
    if isinstance(dest, cst.SimpleString) and dest.value[-3:] not in ('"""', "'''") \
            and "b" not in dest.prefix.lower():
        quote = dest.value[-1]
        tmp, path_like = dest.value[:-1] + ".tmp" + quote, True
    elif isinstance(dest, cst.FormattedString) and len(dest.end) == 1:
        tmp, path_like = ctx.code_for(dest.with_changes(parts=[*dest.parts, cst.FormattedStringText(".tmp")])), True
    elif isinstance(dest, cst.Attribute) or (isinstance(dest, cst.Name) and _path_name(save.scope.lookup(dest.value))):
        tmp, path_like = f'f"{{{code}}}.tmp"', False
    elif isinstance(dest, cst.Call) and ctx.index.resolve(dest.func, save.scope) == "os.path.join" and "\n" not in code:
        tmp, path_like = f'{code} + ".tmp"', True
    else:
        return None
    if "\n" in code:
        return None
    os_name = module_name(ctx.index, save.scope, "os")
    lines = []
    if os_name is None:
        first_import = next((s for s in ctx.module.body if isinstance(s, cst.SimpleStatementLine)
                             and isinstance(s.body[0], (cst.Import, cst.ImportFrom))
                             and not (isinstance(s.body[0], cst.ImportFrom) and isinstance(s.body[0].module, cst.Name)
                                      and s.body[0].module.value == "__future__")), None)
        if first_import is None or save.scope.lookup("os"):
            return None  # nowhere to put `import os`, or `os` means something else here
        os_name = "os"
        lines.append(before(first_import, "import os"))
    lines.append(after(line, f"{os_name}.replace({tmp}, {code})"))
    return FixSpec("Save to a temporary file next to it, then `os.replace` it", safe=path_like,
                   replacements=((dest, tmp),), lines=tuple(lines))


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
