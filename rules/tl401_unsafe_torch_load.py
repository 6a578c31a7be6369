"""TL401 unsafe-torch-load."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model.checkpoints import checkpoint_model
from trainlint.finding import Severity
from trainlint.gate import reference_text, refers_to
from trainlint.model.checkpoint_base import SAVE_FUNCTIONS
from trainlint.model import file_facts
from trainlint.model.file_facts import file_fact
from trainlint.model.index import keyword_arg, positional_args, walk
from trainlint.rule import FixSpec, Rule, bad, good
from trainlint.model.path_literals import path_literals
from trainlint.model.premises import Premise, premise, unknown
from trainlint.model.proofs import state_premise

TORCH_LOADS = ("torch.load", "torch.serialization.load")
PICKLE_LOADS = ("pickle.load", "dill.load", "cloudpickle.load", "_pickle.load", "pickle.Unpickler")
# What a checkpoint path looks like (checked on the source text of the path expression).
CHECKPOINT_PATH = re.compile(r"ckpt|checkpoint|\.pth?\b|\.bin\b|\.tar\b|state_dict|weights|model|resume|last|best",
                             re.IGNORECASE)


class UnsafeTorchLoad(Rule):
    code = "TL401"
    name = "unsafe-torch-load"
    severity = Severity.ERROR
    summary = "`torch.load` with the full unpickler, or `pickle.load` of a checkpoint"
    message = "`torch.load(..., weights_only=False)` runs arbitrary code from a crafted file"
    triggers = (("torch", reference_text(*TORCH_LOADS)), "pickle", "dill")
    gate = refers_to(*TORCH_LOADS, *PICKLE_LOADS)
    what_it_does = """
        Flags loads that unpickle a checkpoint with Python's full unpickler:
        `torch.load(..., weights_only=False)` (also when `weights_only` comes from a variable or a
        parameter whose default is False, or when a custom `pickle_module` is passed without
        `weights_only=True`), `pickle.load`/`dill.load` of a checkpoint file (not of a file that the
        file's own `pickle.dump`s write holding no training state and with none saved beside them:
        the project's data, whatever the path says), and `torch.load`
        without `weights_only` when the configured `min-torch-version` is below 2.6 (where the
        default was still False). Not a load in a class's `__setstate__` of a buffer unpacked from
        the state it is handed when the class's `__getstate__` wrote that buffer with `torch.save`
        into an `io.BytesIO`: pickle is already loading the object, and these bytes are part of it.
        """
    why_bad = """
        Pickle runs code by design: an object's `__reduce__` can return `(os.system, ("...",))`,
        and unpickling calls it. Loading a downloaded or shared checkpoint with the full unpickler
        is arbitrary code execution. Since torch 2.6, `torch.load` defaults to a restricted
        unpickler that only builds tensors, primitive containers and allowlisted classes, and never
        imports anything while unpickling. `weights_only=False` switches that protection off.
        """
    fix_safety = """
        Unsafe: `weights_only=True` refuses any pickled class outside torch's allowlist, so a
        checkpoint that loaded before may raise; allowlist its classes with
        `torch.serialization.safe_globals`.
        """
    references = (
        "https://pytorch.org/docs/stable/notes/serialization.html#weights-only",
        "https://docs.python.org/3/library/pickle.html (the warning at the top)",
    )
    examples = (
        good(
            """
            import io
            import torch


            class Batch:
                def __getstate__(self):
                    buffer = io.BytesIO()
                    torch.save(self.tensors, buffer)
                    return buffer, self.meta

                def __setstate__(self, state):
                    buffer, meta = state
                    buffer.seek(0)
                    self.tensors = torch.load(buffer, weights_only=False)
                    self.meta = meta
            """,
            title="__setstate__ reads back the bytes its own __getstate__ wrote into the pickle: already being unpickled",
        ),
        bad(
            """
            import torch


            class Batch:
                def __getstate__(self):
                    torch.save(self.tensors, self.path)
                    return self.path, self.meta

                def __setstate__(self, state):
                    path, meta = state
                    self.tensors = torch.load(path, weights_only=False)
                    self.meta = meta
            """,
            line=11,
            fixed="""
            import torch


            class Batch:
                def __getstate__(self):
                    torch.save(self.tensors, self.path)
                    return self.path, self.meta

                def __setstate__(self, state):
                    path, meta = state
                    self.tensors = torch.load(path, weights_only=True)
                    self.meta = meta
            """,
            title="a __setstate__ that loads a file named in the state: the file is a new source",
        ),
        bad(
            """
            import torch

            state = torch.load("checkpoint.pt", weights_only=False)
            """,
            line=3,
            fixed="""
            import torch

            state = torch.load("checkpoint.pt", weights_only=True)
            """,
            title="explicit weights_only=False",
        ),
        bad(
            """
            import pickle
            import torch

            def read_encoder(path):
                try:
                    return torch.load(path, map_location="cpu", weights_only=True)
                except pickle.UnpicklingError:
                    return torch.load(path, map_location="cpu", weights_only=False)
            """,
            line=8,
            fixed="""
            import pickle
            import torch

            def read_encoder(path):
                try:
                    return torch.load(path, map_location="cpu", weights_only=True)
                except pickle.UnpicklingError:
                    return torch.load(path, map_location="cpu", weights_only=True)
            """,
            title="a retry without weights_only when the safe load refuses the file",
        ),
        bad(
            """
            import torch as t

            def restore(model, path):
                model.load_state_dict(t.load(path, map_location="cpu", weights_only=False))
            """,
            line=4,
            fixed="""
            import torch as t

            def restore(model, path):
                model.load_state_dict(t.load(path, map_location="cpu", weights_only=True))
            """,
            title="aliased import",
        ),
        bad(
            """
            from torch import load

            ckpt = load(args.resume, weights_only=False)
            """,
            line=3,
            fixed="""
            from torch import load

            ckpt = load(args.resume, weights_only=True)
            """,
            title="from-import",
        ),
        bad(
            """
            import torch.serialization

            sd = torch.serialization.load("model.pth", weights_only=False)
            """,
            line=3,
            fixed="""
            import torch.serialization

            sd = torch.serialization.load("model.pth", weights_only=True)
            """,
            title="torch.serialization.load",
        ),
        bad(
            """
            import pickle
            import torch

            sd = torch.load("model.pt", "cpu", pickle)
            """,
            line=4,
            title="a positional pickle_module turns weights_only off",
        ),
        bad(
            """
            import pickle

            with open("runs/exp1/checkpoint.pkl", "rb") as f:
                state = pickle.load(f)
            """,
            line=4,
            title="pickle.load of a checkpoint",
        ),
        bad(
            """
            import torch

            def load_checkpoint(path, trusted=False):
                return torch.load(path, map_location="cpu", weights_only=trusted)
            """,
            line=4,
            title="weights_only from a parameter whose default is False",
        ),
        bad(
            """
            import torch

            def restore(path):
                weights_only = False
                return torch.load(path, map_location="cpu", weights_only=weights_only)
            """,
            line=5,
            title="weights_only from a local variable assigned False",
        ),
        bad(
            """
            import torch

            LOAD_KWARGS = {"map_location": "cpu", "weights_only": False}

            def restore(path):
                return torch.load(path, **LOAD_KWARGS)
            """,
            line=6,
            title="weights_only=False through **kwargs",
        ),
        bad(
            """
            import torch

            def restore(path, trust_remote=False):
                kwargs = dict(map_location="cpu")
                kwargs["weights_only"] = trust_remote
                return torch.load(path, **kwargs)
            """,
            line=6,
            title="**kwargs filled from a parameter whose default is False",
        ),
        good(
            """
            import torch

            state = torch.load("checkpoint.pt", map_location="cpu", weights_only=True)
            """,
            title="weights_only=True",
        ),
        good(
            """
            import torch

            LOAD_KWARGS = {"map_location": "cpu", "weights_only": True}

            def restore(path):
                return torch.load(path, **LOAD_KWARGS)
            """,
            title="weights_only=True through **kwargs",
        ),
        good(
            """
            import torch

            def restore(path, trusted):
                weights_only = False if trusted else True
                return torch.load(path, weights_only=weights_only)
            """,
            title="a variable that is False only for trusted files",
        ),
        good(
            """
            import torch

            def load(path, weights_only=False):
                with open(path) as f:
                    return f.read()

            config = load("config.yaml", weights_only=False)
            """,
            title="a local function named load shadows nothing from torch",
        ),
        good(
            """
            import json

            with open("checkpoint_meta.json") as f:
                meta = json.load(f)
            """,
            title="json.load is not pickle",
        ),
        good(
            """
            import numpy as np

            weights = np.load("weights.npy")
            """,
            title="np.load refuses pickles by default",
        ),
        good(
            """
            import pickle

            with open("cache/tokenized_dataset.pkl", "rb") as f:
                tokens = pickle.load(f)
            """,
            title="pickle.load of a data cache, not a checkpoint",
        ),
        good(
            """
            import os
            import pickle


            def prepare_split(ckpt_dir, corpus):
                if os.path.exists(os.path.join(ckpt_dir, "split.pkl")):
                    with open(os.path.join(ckpt_dir, "split.pkl"), "rb") as f:
                        return pickle.load(f)
                split = corpus.shuffled_ids()
                with open(os.path.join(ckpt_dir, "split.pkl"), "wb") as f:
                    pickle.dump(split, f)
                return split
            """,
            title="a file in the checkpoint folder that the project itself writes once, with the data split "
                  "and no training state: its data, whatever the folder is called",
        ),
        bad(
            """
            import os
            import pickle


            def resume(ckpt_dir):
                with open(os.path.join(ckpt_dir, "split.pkl"), "rb") as f:
                    return pickle.load(f)


            def train(ckpt_dir, model, optimizer, loader, epochs):
                for epoch in range(epochs):
                    for x, y in loader:
                        optimizer.zero_grad()
                        model(x).loss(y).backward()
                        optimizer.step()
                    with open(os.path.join(ckpt_dir, "split.pkl"), "wb") as f:
                        pickle.dump({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, f)
            """,
            line=7,
            title="the same file written after every epoch with the model and optimizer state: a checkpoint",
        ),
        good(
            """
            import torch

            def load_checkpoint(path, trusted=True):
                return torch.load(path, weights_only=trusted)
            """,
            title="weights_only from a parameter whose default is True",
        ),
    )

    def check(self, ctx):
        index = ctx.index
        for site in index.calls:
            name = index.call_name(site)
            if name in TORCH_LOADS:
                yield from self._check_torch_load(ctx, site)
            elif name in PICKLE_LOADS:
                written = _what_the_project_wrote(ctx, site)
                if written is False or (written is None and not self._loads_checkpoint(ctx, site)):
                    continue  # the project's own writes of this file show data, or nothing says checkpoint
                yield self.report(
                    site.node,
                    f"`{name}` of a checkpoint runs arbitrary code from the file; "
                    "store tensors and plain containers with `torch.save` and load them with "
                    "`weights_only=True` (or use safetensors for weights)",
                    evidence=[premise(f"`{name}` unpickles arbitrary objects", site.node, "call"),
                              written or unknown("the file is a checkpoint: its path reads as one",
                                                 positional_args(site.node)[0].value, "argument", required=False)],
                )

    def _check_torch_load(self, ctx, site):
        call = site.node
        if _reads_own_pickled_state(ctx.index, site):
            return  # the bytes are part of a pickle being loaded already: no new source of code
        arg = keyword_arg(call, "weights_only")
        if arg is not None:
            if _is_false(arg.value) or _false_by_default(ctx, site, arg.value):
                fix = None
                if _is_false(arg.value):
                    fix = FixSpec("Load with weights_only=True", safe=False,
                                  replacements=((arg.value, cst.Name("True")),))
                how = "" if _is_false(arg.value) else f" (`{ctx.code_for(arg.value)}` is False by default)"
                yield self.report(
                    call,
                    f"`torch.load` with `weights_only=False`{how} unpickles arbitrary objects: a crafted "
                    "checkpoint runs code on load; use `weights_only=True` and allowlist any extra class "
                    "with `torch.serialization.safe_globals`",
                    fix,
                    evidence=[premise("`torch.load` unpickles the file", call, "call"),
                              premise(f"`weights_only` is `{ctx.code_for(arg.value)}`" + (
                                  "" if _is_false(arg.value) else ", False wherever it is bound"),
                                      arg.value if _is_false(arg.value) else _binding_of(site, arg.value),
                                      "argument")],
                )
            return
        spread = _spread_weights_only(ctx, site)
        if spread is not None:
            if _is_false(spread) or _false_by_default(ctx, site, spread):
                yield self.report(
                    call,
                    "`torch.load` gets `weights_only=False` through `**` keyword arguments: it unpickles "
                    "arbitrary objects, so a crafted checkpoint runs code on load; use `weights_only=True`",
                    evidence=[premise("`torch.load` unpickles the file", call, "call"),
                              premise("the `**` dict sets `weights_only` to False", spread, "argument")],
                )
            return
        pickle_module = keyword_arg(call, "pickle_module")
        positional = positional_args(call)
        if pickle_module is not None or len(positional) >= 3:
            yield self.report(
                call,
                "`torch.load` with a custom `pickle_module` and no `weights_only=True` falls back to the "
                "full unpickler: a crafted checkpoint runs code on load",
                evidence=[premise("`torch.load` unpickles the file", call, "call"),
                          premise("a custom `pickle_module` is passed, `weights_only` is not",
                                  pickle_module if pickle_module is not None else positional[2], "argument")],
            )
            return
        if ctx.min_torch_version < (2, 6) and not any(a.star == "**" for a in call.args):
            version = ".".join(map(str, ctx.min_torch_version))
            yield self.report(
                call,
                f"`torch.load` without `weights_only` uses the full unpickler before torch 2.6 "
                f"(min-torch-version is {version}): pass `weights_only=True`",
                _add_weights_only(call),
                evidence=[premise("`torch.load` is called without `weights_only`", call, "call"),
                          premise(f"the configured min-torch-version is {version}: before 2.6 the default is False",
                                  call, "metadata")],
            )

    def _loads_checkpoint(self, ctx, site) -> bool:
        args = positional_args(site.node)
        if not args:
            return False
        source = _opened_path_text(ctx, site, args[0].value)
        return source is not None and CHECKPOINT_PATH.search(source) is not None


PICKLE_DUMPS = ("pickle.dump", "dill.dump", "cloudpickle.dump", "_pickle.dump")
_TRAINING_STATE = {"model", "optimizer", "scheduler", "scaler"}


def _what_the_project_wrote(ctx, site) -> Premise | bool | None:
    """Whether the file a `pickle.load` reads is a checkpoint, from the dumps of this file that write
    the same file (a path sharing a file-name constant: `f"{prefix}_train.pkl"`): a dump of training
    state, or a dump beside a save of training state, proves it; when every such dump writes a
    value holding no training state with none saved beside it (the run's data split, written at
    its start), the path's name is refuted by what the project puts there (False). None: no dump of
    this file writes it (the path's name is all there is). The dumps are a file fact, so a check of
    one edited definition sees those of the rest of the file."""
    args = positional_args(site.node)
    read = _opened_path_expr(ctx, site.scope, args[0].value) if args else None
    names = path_literals(read, site.scope)
    if not names:
        return None
    writes = [(how, text) for written, how, text in file_facts.values(ctx, "tl401.pickle_writes") if written & names]
    if not writes:
        return None
    for how, text in writes:
        if how == "state":
            return premise(f"the file is a checkpoint: the project writes training state into it (`{text}`)",
                           read, "use")
        if how == "beside":
            return premise(f"the file is a checkpoint: the project writes it (`{text}`) beside a save of "
                           "training state", read, "use")
    return False


@file_fact("tl401.pickle_writes")
def _pickle_writes(ctx):
    """Each `pickle.dump(value, f)` of the file with a path it writes: the path's file-name pieces,
    whether it writes training state ("state"), sits beside a save of training state ("beside") or
    neither (""), and its code."""
    index = ctx.index
    model = None
    for dump in index.calls:
        if index.call_name(dump) not in PICKLE_DUMPS:
            continue
        dump_args = positional_args(dump.node)
        target = keyword_arg(dump.node, "file")
        target = target.value if target is not None else dump_args[1].value if len(dump_args) > 1 else None
        if target is None or not dump_args:
            continue
        written = _opened_path_expr(ctx, dump.scope, target)
        names = frozenset(path_literals(written, dump.scope)) if written is not None else frozenset()
        if not names:
            continue
        model = model or ctx.model(checkpoint_model)
        value = dump_args[0].value
        content = model.saved_dict(value, dump.scope)
        kinds = model.holds(content) if content is not None else model.value_kinds(value, dump.scope)
        how = "state" if kinds & _TRAINING_STATE else "beside" if _state_saved_beside(ctx, model, dump) else ""
        yield dump.node, (names, how, ctx.code_for(dump.node)[:60])


def _opened_path_expr(ctx, scope, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The path of `open(p, ...)` (inline, or the value of a name bound to one); a path itself
    when `expr` is no file object made by `open` (`torch.save(obj, path)`)."""
    if isinstance(expr, cst.Call) and ctx.index.resolve(expr.func, scope) in ("open", "io.open"):
        args = positional_args(expr)
        return args[0].value if args else None
    if isinstance(expr, cst.Name):
        for binding in scope.lookup(expr.value):
            value = binding.value
            if isinstance(value, cst.Call) and ctx.index.resolve(value.func, scope) in ("open", "io.open"):
                args = positional_args(value)
                return args[0].value if args else None
    return None


def _state_saved_beside(ctx, model, dump) -> bool:
    """A save of this file that writes training state runs with the dump: a statement of the
    innermost block that holds the dump (past the `with open(...)` it writes through), so on the
    same branch and in the same sequence (a save in the `try:` whose `except` writes the dump, or
    one deep in a training loop that follows a dump of dataset statistics, does not count)."""
    index = ctx.index
    block = None
    for ancestor in index.ancestors(dump.node):
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)) and not isinstance(index.parent(ancestor), cst.With):
            block = ancestor
            break
    if block is None:
        return False
    statements = {id(statement) for statement in block.body}
    for save in model.saves:
        if not model.is_checkpoint(save):
            continue
        line = index.enclosing_statement(save.node)
        line = index.parent(line) if isinstance(index.parent(line), cst.SimpleStatementLine) else line
        if id(line) in statements:
            return True
    return False


def _spread_weights_only(ctx, site) -> cst.BaseExpression | None:
    """The `weights_only` value a `**kwargs` argument supplies, when the dict can be read."""
    model = ctx.model(checkpoint_model)
    for arg in site.node.args:
        if arg.star == "**":
            content = model.saved_dict(arg.value, site.scope)
            if content is None:
                continue
            for key, value, _ in content.items:
                if key == "weights_only":
                    return value
    return None


def _is_false(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def _binding_of(site, expr: cst.BaseExpression) -> cst.CSTNode:
    """Where the name `expr` gets its (False) value: its last binding, else the name itself."""
    bindings = [b for b in site.scope.lookup(expr.value) if b.kind in ("param", "assign")] \
        if isinstance(expr, cst.Name) else []
    return bindings[-1].node if bindings else expr


def _false_by_default(ctx, site, expr: cst.BaseExpression) -> bool:
    """A name whose only values in scope are False (a parameter default or an assignment)."""
    if not isinstance(expr, cst.Name):
        return False
    bindings = site.scope.lookup(expr.value)
    values = [b.value for b in bindings if b.kind in ("param", "assign")]
    return bool(values) and len(values) == len(bindings) and all(v is not None and _is_false(v) for v in values)


def _opened_path_text(ctx, site, expr: cst.BaseExpression) -> str | None:
    """Source text of the path a file object was opened from (`open(p)` inline or `with ... as f`)."""
    if isinstance(expr, cst.Call) and ctx.index.resolve(expr.func, site.scope) in ("open", "io.open"):
        args = positional_args(expr)
        return ctx.code_for(args[0].value) if args else None
    if isinstance(expr, cst.Name):
        for binding in site.scope.lookup(expr.value):
            if binding.value is not None and binding.value is not expr:
                text = _opened_path_text(ctx, site, binding.value)
                if text is not None:
                    return text
    return None


def _add_weights_only(call: cst.Call) -> FixSpec:
    args = list(call.args)
    if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(cst.Arg(cst.Name("True"), keyword=cst.Name("weights_only"),
                        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
    return FixSpec("Pass weights_only=True", safe=False, replacements=((call, call.with_changes(args=args)),))


def _reads_own_pickled_state(index, site) -> bool:
    """`torch.load(buf)` in a class's `__setstate__`, `buf` unpacked from the state it is handed,
    and the class's `__getstate__` writes that state with `torch.save` into an `io.BytesIO`: the
    object is being unpickled already (pickle calls `__setstate__` with what `__getstate__`
    returned), so this load reads bytes of that same pickle and trusts nothing new. A load of a
    file named in the state, or of a state `__getstate__` did not write, is not this."""
    function = site.function
    if function is None or function.name != "__setstate__" or not function.class_name:
        return False
    params = [p.name.value for p in function.node.params.params][1:]
    source = positional_args(site.node)[0].value if positional_args(site.node) else None
    if len(params) != 1 or not isinstance(source, cst.Name):
        return False
    # `buf, extra = state` (or `buf = state[0]`): the loaded bytes come from the state argument
    from_state = False
    for binding in site.scope.lookup(source.value):
        node = binding.node
        value = node.value if isinstance(node, cst.Assign) else None
        root = value.value if isinstance(value, cst.Subscript) else value
        if not (isinstance(root, cst.Name) and root.value == params[0]):
            return False
        from_state = True
    getstate = index.method(function.class_name, "__getstate__")
    if not from_state or getstate is None:
        return False
    buffers: set[str] = set()  # the `io.BytesIO()` objects `__getstate__` makes
    for node in walk(getstate.node.body):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) \
                and index.resolve(node.value.func, getstate.scope) == "io.BytesIO" \
                and isinstance(node.targets[0].target, cst.Name):
            buffers.add(node.targets[0].target.value)
    return any(isinstance(node, cst.Call) and index.resolve(node.func, getstate.scope) in SAVE_FUNCTIONS
               and len(node.args) >= 2 and isinstance(node.args[1].value, cst.Name)
               and node.args[1].value.value in buffers for node in walk(getstate.node.body))
