"""TL205 grad-scaler-recreated."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from trainlint.finding import Severity
from trainlint.fixkit import block_of, move_line, own_line
from trainlint.gate import named
from trainlint.model.index import FunctionInfo, Scope, walk
from trainlint.model.roles import OPTIMIZER, SCALER, role_of_callee
from trainlint.model.training import TrainingModel, training_model
from trainlint.rule import Rule, bad, good
from trainlint.model.premises import premise
from trainlint.model.proofs import accumulation_premises, loop_premises, role_premise, unit_premises

_LOOPS = (cst.For, cst.While)
_SCALER_CLASSES = ("GradScaler", "ShardedGradScaler")


@dataclass
class _Repeat:
    """Why a scaler construction runs more than once per training run."""

    loop: cst.For | cst.While  # the training loop whose iterations repeat it
    helper: FunctionInfo | None  # the function holding the construction, called in `loop` (else None)


class GradScalerRecreated(Rule):
    code = "TL205"
    name = "grad-scaler-recreated"
    severity = Severity.WARNING
    # off until its findings on real code are measured: the review set holds no GradScaler built
    # in a loop, and the only ones found elsewhere (an evolution loop calling train()) were runs
    enabled_by_default = False
    summary = "A GradScaler is constructed inside the epoch or training loop, so its scale restarts every time"
    message = "the GradScaler is constructed anew on every iteration of the training loop"
    triggers = ("GradScaler",)
    gate = named("^(GradScaler|ShardedGradScaler)$") & named("backward") & named("^step$")
    what_it_does = """
        Flags the construction of a `GradScaler` (`torch.amp.GradScaler`, `torch.cuda.amp.GradScaler`,
        FSDP's `ShardedGradScaler`) that runs on every iteration of a training loop: written in the
        body of the epoch loop or the batch loop, or in a function of the file that trains (its
        body runs a backward and an optimizer step) and that is called from inside a loop, such as
        a `train_one_epoch()` or a `Trainer.train_epoch()` method called once per epoch.

        A construction that builds a new run is left alone: when the optimizer the loop steps is
        constructed in the same repeated code (a hyperparameter sweep, cross-validation folds),
        every iteration is a fresh training run. So is a lazy construction guarded by a test of the
        variable it assigns (`if scaler is None: scaler = GradScaler()`), which runs once.

        When the construction is a plain `scaler = GradScaler(...)` line in a loop's body whose
        arguments do not depend on that loop, the fix moves it above the outermost training loop.
        It changes the scale the following updates use, so it is offered as unsafe.

        Off by default until its precision on real code is measured; select it with
        `--extend-select TL205` (or `extend-select = ["TL205"]` in the configuration).
        """
    why_bad = """
        A GradScaler is stateful: its scale starts at `init_scale` (65536) and adapts to the run,
        halving after each overflow and doubling after `growth_interval` (2000) clean steps; the
        first updates of a fresh scaler are often skipped while it finds the right scale. Building
        a new scaler every epoch throws that away: every epoch restarts from 65536, skips steps
        again until the scale comes back down, and the scale never grows past what one epoch can
        reach. A checkpoint that saves `scaler.state_dict()` saves the state of a scaler that is
        about to be replaced, so a resume does not continue what ran. Nothing fails; the run loses
        updates and its loss-scale logs look like a sawtooth.
        """
    fix_safety = """
        Unsafe: the scaler is then built once before the loop and its scale carries over from one
        epoch (or call) to the next; where a fresh scale each time was intended (a sweep that also
        rebuilds the model), the loss scale in use changes.
        """
    references = (
        "https://pytorch.org/docs/stable/amp.html#gradient-scaling",
        "https://pytorch.org/docs/stable/notes/amp_examples.html#typical-mixed-precision-training",
        "https://pytorch.org/docs/stable/amp.html#torch.amp.GradScaler",
    )
    examples = (
        bad(
            """
            import torch

            model = build_model().cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            for epoch in range(num_epochs):
                scaler = torch.amp.GradScaler("cuda")
                for x, y in train_loader:
                    optimizer.zero_grad(set_to_none=True)
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = criterion(model(x.cuda()), y.cuda())
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
            """,
            line=6,
            fixed="""
            import torch

            model = build_model().cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            scaler = torch.amp.GradScaler("cuda")
            for epoch in range(num_epochs):
                for x, y in train_loader:
                    optimizer.zero_grad(set_to_none=True)
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = criterion(model(x.cuda()), y.cuda())
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
            """,
            title="plain loops: the scaler is built at the top of every epoch",
        ),
        bad(
            """
            import torch
            from torch.cuda.amp import GradScaler, autocast


            def train_one_epoch(model, loader, optimizer, device, use_amp=True):
                model.train()
                scaler = GradScaler(enabled=use_amp)
                for images, targets in loader:
                    with autocast(enabled=use_amp):
                        loss = model(images.to(device), targets.to(device))
                    optimizer.zero_grad()
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()


            def main(args, model, loader):
                optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
                for epoch in range(args.epochs):
                    train_one_epoch(model, loader, optimizer, args.device)
            """,
            line=7,
            title="the scaler is built in the per-epoch function, called once per epoch",
        ),
        bad(
            """
            import torch


            class Trainer:
                def __init__(self, model, loader, lr):
                    self.model, self.loader = model, loader
                    self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

                def train_epoch(self):
                    self.scaler = torch.amp.GradScaler("cuda")
                    for batch in self.loader:
                        with torch.autocast("cuda", dtype=torch.float16):
                            loss = self.model(**batch).loss
                        self.scaler.scale(loss).backward()
                        self.scaler.step(self.optimizer)
                        self.scaler.update()
                        self.optimizer.zero_grad()

                def fit(self, epochs):
                    for epoch in range(epochs):
                        self.train_epoch()
            """,
            line=10,
            title="Trainer class: the epoch method replaces self.scaler",
        ),
        bad(
            """
            import torch


            def train_step(model, batch, optimizer):
                scaler = torch.amp.GradScaler("cuda")
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(**batch).loss
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                return loss.item()


            def fit(model, loader, optimizer, epochs):
                for epoch in range(epochs):
                    for batch in loader:
                        train_step(model, batch, optimizer)
            """,
            line=5,
            title="a fresh scaler on every step: the scale never leaves its initial value",
        ),
        bad(
            """
            import torch

            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            for step, batch in enumerate(loader):
                scaler = torch.amp.GradScaler("cuda", init_scale=2.0 ** 16)
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(**batch).loss / accum
                scaler.scale(loss).backward()
                if (step + 1) % accum == 0:
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
            """,
            line=5,
            fixed="""
            import torch

            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            scaler = torch.amp.GradScaler("cuda", init_scale=2.0 ** 16)
            for step, batch in enumerate(loader):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(**batch).loss / accum
                scaler.scale(loss).backward()
                if (step + 1) % accum == 0:
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
            """,
            title="inside the batch loop under accumulation: the scaled gradients of one window meet two scalers",
        ),
        bad(
            """
            import torch
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler


            def run(model, loader, optimizer, epochs, resume=None):
                for epoch in range(epochs):
                    scaler = ShardedGradScaler()
                    if resume is not None:
                        scaler.load_state_dict(resume["scaler"])
                    for batch in loader:
                        with torch.autocast("cuda", dtype=torch.bfloat16):
                            loss = model(batch).mean()
                        scaler.scale(loss).backward()
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad()
                    torch.save({"model": model.state_dict(), "scaler": scaler.state_dict()}, f"ckpt_{epoch}.pt")
            """,
            line=7,
            fixed="""
            import torch
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler


            def run(model, loader, optimizer, epochs, resume=None):
                scaler = ShardedGradScaler()
                for epoch in range(epochs):
                    if resume is not None:
                        scaler.load_state_dict(resume["scaler"])
                    for batch in loader:
                        with torch.autocast("cuda", dtype=torch.bfloat16):
                            loss = model(batch).mean()
                        scaler.scale(loss).backward()
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad()
                    torch.save({"model": model.state_dict(), "scaler": scaler.state_dict()}, f"ckpt_{epoch}.pt")
            """,
            title="FSDP's ShardedGradScaler rebuilt (and reloaded from the resume) every epoch",
        ),
        good(
            """
            import torch

            model = build_model().cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            scaler = torch.amp.GradScaler("cuda")
            for epoch in range(num_epochs):
                for x, y in train_loader:
                    optimizer.zero_grad(set_to_none=True)
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = criterion(model(x.cuda()), y.cuda())
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
            """,
            title="one scaler for the whole run, built before the epoch loop",
        ),
        good(
            """
            import torch
            from torch.cuda.amp import GradScaler, autocast


            def train_one_epoch(model, loader, optimizer, scaler, device):
                model.train()
                for images, targets in loader:
                    with autocast():
                        loss = model(images.to(device), targets.to(device))
                    optimizer.zero_grad()
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()


            def main(args, model, loader):
                optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
                scaler = GradScaler()
                for epoch in range(args.epochs):
                    train_one_epoch(model, loader, optimizer, scaler, args.device)
            """,
            title="the scaler is created once in main and passed to the per-epoch function",
        ),
        good(
            """
            import torch


            class Trainer:
                def __init__(self, model, loader, lr):
                    self.model, self.loader = model, loader
                    self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
                    self.scaler = torch.amp.GradScaler("cuda")

                def train_epoch(self):
                    for batch in self.loader:
                        with torch.autocast("cuda", dtype=torch.float16):
                            loss = self.model(**batch).loss
                        self.scaler.scale(loss).backward()
                        self.scaler.step(self.optimizer)
                        self.scaler.update()
                        self.optimizer.zero_grad()

                def fit(self, epochs):
                    for epoch in range(epochs):
                        self.train_epoch()
            """,
            title="Trainer class: the scaler is built in __init__ with the optimizer",
        ),
        good(
            """
            import torch


            def train(model_fn, loader, epochs):
                model = model_fn().cuda()
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                scaler = torch.amp.GradScaler("cuda")
                for epoch in range(epochs):
                    for x, y in loader:
                        with torch.autocast("cuda", dtype=torch.float16):
                            loss = torch.nn.functional.cross_entropy(model(x), y)
                        scaler.scale(loss).backward()
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad()
                return model


            models = [train(build, loader, 10) for build in candidates]
            """,
            title="one run per call: the function builds its scaler with its optimizer, before its loops",
        ),
        good(
            """
            import torch

            for lr in (1e-4, 3e-4, 1e-3):
                model = build_model().cuda()
                optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
                scaler = torch.amp.GradScaler("cuda")
                for epoch in range(epochs):
                    for x, y in loader:
                        with torch.autocast("cuda", dtype=torch.float16):
                            loss = criterion(model(x), y)
                        scaler.scale(loss).backward()
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad()
            """,
            title="a learning-rate sweep: each trial builds its own optimizer and scaler",
        ),
        good(
            """
            import torch

            scaler = None
            for epoch in range(epochs):
                for x, y in loader:
                    if scaler is None:
                        scaler = torch.amp.GradScaler("cuda")
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = criterion(model(x), y)
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
            """,
            title="built lazily on the first batch, once",
        ),
        good(
            """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator(mixed_precision="fp16")
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for epoch in range(epochs):
                for batch in loader:
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="Accelerate owns the scaler: built once by the Accelerator",
        ),
        good(
            """
            import torch


            def main(model, loader, optimizer, epochs, resume_path=None):
                scaler = torch.amp.GradScaler("cuda")
                start = 0
                if resume_path is not None:
                    state = torch.load(resume_path, weights_only=True)
                    model.load_state_dict(state["model"])
                    optimizer.load_state_dict(state["optimizer"])
                    scaler.load_state_dict(state["scaler"])
                    start = state["epoch"] + 1
                for epoch in range(start, epochs):
                    for x, y in loader:
                        with torch.autocast("cuda", dtype=torch.float16):
                            loss = model(x, y)
                        scaler.scale(loss).backward()
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad()
            """,
            title="built once and restored once from the checkpoint, before the epoch loop",
        ),
        good(
            """
            import torch


            def build_optimizer(model, hyp):
                return torch.optim.SGD(model.parameters(), lr=hyp["lr0"], momentum=hyp["momentum"])


            def train(hyp, model_fn, loader):
                model = model_fn()
                optimizer = build_optimizer(model, hyp)
                scaler = torch.cuda.amp.GradScaler()
                for epoch in range(hyp["epochs"]):
                    for x, y in loader:
                        with torch.autocast("cuda"):
                            loss = model(x, y)
                        scaler.scale(loss).backward()
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad()
                return evaluate(model)


            for generation in range(generations):
                hyp = mutate(best_hyp)
                fitness = train(hyp, build_model, loader)
            """,
            title="hyperparameter evolution: each call of train() is a new run with an optimizer from a factory",
        ),
    )

    def check(self, ctx):
        model = ctx.model(training_model)
        trains: dict[cst.CSTNode, bool] = {}
        for site in ctx.index.calls:
            if not _is_scaler_construction(ctx, site.node, site.scope):
                continue
            repeat = _repeated_by(ctx, model, site.node, site.function, trains)
            if repeat is None:
                continue
            name = ctx.code_for(site.node.func)
            if repeat.helper is None:
                message = (f"`{name}(...)` runs on every iteration of the training loop: each one starts a new "
                           "scaler at its initial scale with a fresh growth tracker, so overflow-skipped steps "
                           "come back and the scale never settles; a saved `state_dict()` is not what the next "
                           "iteration uses. Build the scaler once, before the loop")
                fix = _fix(ctx, model, site.node, site.function)
            else:
                message = (f"`{name}(...)` runs on every call of `{repeat.helper.name}()`, which is called inside "
                           "a training loop: each call starts a new scaler at its initial scale, so the scale "
                           "restarts and a saved `state_dict()` is not the state in use. Build the scaler once "
                           "with the optimizer and pass it in")
                fix = None
            evidence = [premise(f"`{name}(...)` constructs a GradScaler", site.node, "construction"),
                        *loop_premises(ctx, model.loop_of(site.node) if repeat.helper is None else
                                       model._loops_by_node().get(repeat.loop))]
            if repeat.helper is not None:
                evidence.append(premise(f"the training loop calls `{repeat.helper.name}()` on every iteration",
                                        repeat.loop, "call"))
            yield self.report(site.node, message, fix, evidence=evidence)


def _is_scaler_construction(ctx, call: cst.Call, scope: Scope) -> bool:
    qualname = ctx.index.resolve(call.func, scope)
    if qualname is None or qualname.rsplit(".", 1)[-1] not in _SCALER_CLASSES:
        return False
    return role_of_callee(qualname) == SCALER


def _repeated_by(ctx, model: TrainingModel, call: cst.Call, function: FunctionInfo | None,
                 trains: dict) -> _Repeat | None:
    index = ctx.index
    training = {loop.node for loop in model.loops}
    target = _assigned_target(ctx, call)
    enclosing = []
    for ancestor in index.ancestors(call):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            break
        if isinstance(ancestor, cst.If) and target is not None and _tests(ctx, ancestor.test, target):
            return None  # `if scaler is None: scaler = GradScaler()`: built once
        if isinstance(ancestor, _LOOPS) and ancestor in training:
            enclosing.append(ancestor)
    if enclosing:
        outer = enclosing[-1]
        if _optimizer_built_in(ctx, model, outer, outer):
            return None  # every iteration is a new run (a sweep, a fold)
        return _Repeat(outer, None)
    if function is None or not _trains(model, function, trains):
        return None
    if _optimizer_built_in(ctx, model, function.node, None):
        return None  # the function builds a whole run
    for site in index.callers(function):
        for ancestor in index.ancestors(site.node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            if isinstance(ancestor, _LOOPS) and ancestor in training and \
                    not _optimizer_built_in(ctx, model, ancestor, ancestor):
                return _Repeat(ancestor, function)
    return None


def _trains(model: TrainingModel, function: FunctionInfo, memo: dict) -> bool:
    """The function's body (or a same-file helper it calls) runs a backward and an optimizer step."""
    if function.node not in memo:
        backward = step = False
        for ref in model.reachable_calls(function.node.body, function.scope):
            backward = backward or model.is_backward(ref.node, ref.scope)
            step = step or model.is_optimizer_step(ref.node, ref.scope)
        memo[function.node] = backward and step
    return memo[function.node]


def _optimizer_built_in(ctx, model: TrainingModel, region: cst.CSTNode, loop_node) -> bool:
    """An optimizer is constructed inside `region` (a loop or a function's def) in its own code."""
    index = ctx.index
    for node in walk(region):
        if not isinstance(node, cst.Call) or not isinstance(index.parent(node), (cst.Assign, cst.AnnAssign)):
            continue
        if model.roles.of(node, index.scope_at(node)) == OPTIMIZER:  # a constructor or a project factory
            return True
    return False


def _assigned_target(ctx, call: cst.Call) -> str | None:
    statement = ctx.index.parent(call)
    if isinstance(statement, cst.Assign) and statement.value is call and len(statement.targets) == 1:
        target = statement.targets[0].target
        if isinstance(target, (cst.Name, cst.Attribute)):
            return ctx.code_for(target)
    return None


def _tests(ctx, test: cst.BaseExpression, target: str) -> bool:
    """The condition reads the variable the construction assigns (`scaler is None`, `not hasattr(...)`)."""
    if any(isinstance(n, (cst.Name, cst.Attribute)) and ctx.code_for(n) == target for n in walk(test)):
        return True
    last = target.rsplit(".", 1)[-1]
    return any(isinstance(n, cst.SimpleString) and n.evaluated_value == last for n in walk(test))


def _fix(ctx, model: TrainingModel, call: cst.Call, function: FunctionInfo | None):
    """Move `scaler = GradScaler(...)` from a loop's body to just above the outermost training loop
    around it, when its arguments read nothing that loop binds."""
    index = ctx.index
    line = own_line(index, call, assign=True)
    if line is None:
        return None
    block = block_of(index, line)
    if block is None or not isinstance(index.parent(block), _LOOPS):
        return None
    training = {loop.node for loop in model.loops}
    outer = None
    for ancestor in index.ancestors(line):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            break
        if isinstance(ancestor, _LOOPS) and ancestor in training:
            outer = ancestor
    if outer is None or not isinstance(block_of(index, outer), (cst.IndentedBlock, cst.Module)):
        return None
    scope = index.scope_at(call)
    for arg in call.args:
        for node in walk(arg.value):
            if isinstance(node, cst.Name) and any(_inside(index, b.node, outer) for b in scope.lookup(node.value)):
                return None  # `GradScaler(enabled=epoch >= warmup)`: it depends on the loop
    return move_line(ctx.module, index, line, outer, "before",
                     f"Build `{ctx.code_for(call.func)}(...)` once, before the training loop",
                     safe=False, same_block=False)


def _inside(index, node: cst.CSTNode, outer: cst.CSTNode) -> bool:
    return node is outer or any(a is outer for a in index.ancestors(node))

