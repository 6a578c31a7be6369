"""TL603 metric-from-last-batch."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.finding import Severity
from trainlint.gate import iterates_loader
from trainlint.model.dataflow import dataflow, loader_constructor, loader_of_loop
from trainlint.model.index import dotted_name, iter_children, keyword_value, positional_args, walk, walk_expression
from trainlint.model.roles import OPTIMIZER
from trainlint.model.summaries import MEAN_WORDS, callable_summary
from trainlint.model.training import calls_in, training_model
from trainlint.rule import Rule, bad, good
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import code, loader_premise, role_premise, training_premises

# methods and functions that hand a value on unchanged (for the question "is this the value itself")
_UNWRAP_METHODS = frozenset({"item", "detach", "cpu", "float", "double", "tolist", "numpy", "mean", "squeeze"})
_UNWRAP_FUNCTIONS = frozenset({"float", "round", "str", "format"})
# calls that report a value: print, loggers, trackers, progress bars
_REPORTING = frozenset({"print", "info", "debug", "warning", "log", "log_dict", "log_metrics", "log_metric",
                        "add_scalar", "add_scalars", "write", "set_postfix", "set_description"})
# statements a per-batch assignment may sit under and still run on every batch
_EVERY_BATCH = (cst.IndentedBlock, cst.SimpleStatementLine, cst.With, cst.Try, cst.Assign, cst.AssignTarget,
                cst.Tuple, cst.List, cst.Element)
_SAYS_LAST = re.compile(r"#.*\blast\b.*\bbatch|#.*\bbatch\b.*\blast\b|#.*\bfinal\s+batch", re.I)
_LAST_NAME = re.compile(r"^(last|final)_", re.I)
_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


class MetricFromLastBatch(Rule):
    code = "TL603"
    name = "metric-from-last-batch"
    severity = Severity.WARNING
    summary = "An evaluation returns or logs the loss or metric of its last batch instead of the whole set"
    message = "this evaluation reports the value of its last batch only"
    triggers = ("loader", "Loader", "_dl", "dl_", " dl", "(dl")
    gate = iterates_loader()
    what_it_does = """
        Flags the `return` or the logging call (`print`, `logger.info`, `wandb.log`,
        `writer.add_scalar`, `self.log`, `accelerator.log`, ...) after an evaluation loop over a data
        loader that reports a loss or metric the loop *assigns* on every batch rather than
        accumulates: `loss = criterion(model(x), y)` in the loop, `return loss.item()` after it.
        Only the last batch's value leaves the function.

        The value is known for a loss or metric by what computes it: a loss function or criterion
        (`F.cross_entropy`, `nn.CrossEntropyLoss()` instances, a callee named as a loss), a
        model output's `.loss`, a mean or sum over a comparison (`(pred == y).float().mean()`), or
        a project helper that returns a mean (a Dice or IoU function), or by how it is reported: a
        value of any callable divided after the loop by the number of the loop's batches
        (`return val_loss / len(val_loader)`) is meant as a per-batch average. The evaluation loop is a loop
        over a loader that runs no backward and no optimizer step. The value reported must be the
        one assigned in the loop (no assignment in between), reported as itself (unwrapped by
        `.item()`, `float()`, in a tuple, a dict or an f-string).

        Quiet on accumulate-then-average evaluations (`total += loss.item()`), lists averaged after
        the loop, running averages updated each batch (`avg = avg + (loss - avg) / (i + 1)`), meters
        (`meter.update(loss, n)`), values reported inside the loop, assignments under a condition
        (`if i == last:`), loops that stop after one batch on purpose (`break` at the end of the
        body), a loader whose one batch is the whole dataset (`batch_size=len(dataset)`), and an
        evaluation that keeps the last batch on purpose and says so (a comment naming the last
        batch, or a variable named `last_...`). Training loops are not checked (a training log of
        the last batch's loss is a display, not a metric).
        """
    why_bad = """
        An evaluation is supposed to summarise the whole validation set. A value assigned on every
        batch holds only the last batch's number when the loop ends: on a set of 10,000 examples
        in batches of 64, the reported loss is that of the last 16 examples. It moves around from
        epoch to epoch far more than the true validation loss, so early stopping, learning-rate
        plateaus and "best checkpoint" selection react to noise, and two runs cannot be compared.
        Nothing fails: the number has the right order of magnitude and looks plausible.
        Accumulate a sum and a count over the loop (or use a meter) and report their ratio.
        """
    references = (
        "https://pytorch.org/tutorials/beginner/basics/optimization_tutorial.html (test_loop accumulates test_loss)",
        "https://github.com/pytorch/examples/blob/main/imagenet/main.py (AverageMeter)",
    )
    examples = (
        bad(
            """
            import torch
            import torch.nn.functional as F


            @torch.no_grad()
            def evaluate(model, val_loader: torch.utils.data.DataLoader):
                model.eval()
                for x, y in val_loader:
                    loss = F.cross_entropy(model(x), y)
                return loss.item()
            """,
            line=10,
            title="the loss of the last batch returned",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            @torch.no_grad()
            def evaluate(model, val_loader):
                model.eval()
                total, count = 0.0, 0
                for x, y in val_loader:
                    total += F.cross_entropy(model(x), y, reduction="sum").item()
                    count += y.size(0)
                return total / count
            """,
            title="accumulate a sum and a count, then average",
        ),
        bad(
            """
            import torch
            import wandb


            def validate(model, criterion, loader: torch.utils.data.DataLoader, step):
                model.eval()
                with torch.no_grad():
                    for images, labels in loader:
                        logits = model(images)
                        val_loss = criterion(logits, labels)
                        val_acc = (logits.argmax(1) == labels).float().mean()
                wandb.log({"val/loss": val_loss.item(), "val/acc": val_acc.item()}, step=step)
            """,
            line=12,
            title="last-batch loss and accuracy logged to a tracker",
        ),
        bad(
            """
            import torch


            class Trainer:
                def __init__(self, model, val_loader: torch.utils.data.DataLoader, writer):
                    self.model = model
                    self.val_loader = val_loader
                    self.writer = writer
                    self.criterion = torch.nn.CrossEntropyLoss()

                @torch.no_grad()
                def validate(self, epoch):
                    self.model.eval()
                    for inputs, targets in self.val_loader:
                        loss = self.criterion(self.model(inputs), targets)
                    self.writer.add_scalar("val/loss", loss.item(), epoch)
                    self.model.train()
            """,
            line=16,
            title="a Trainer method writing the last batch's loss to TensorBoard",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader


            class Solver:
                def __init__(self, model, validation_loader: DataLoader, validation_fn):
                    self.model = model
                    self.validation_loader = validation_loader
                    self.validation_fn = validation_fn

                def validate(self):
                    self.model.eval()
                    validation_loss = 0.0
                    for data, target in self.validation_loader:
                        with torch.no_grad():
                            validation_loss = self.validation_fn(self.model(data), target)
                    self.model.train()
                    return validation_loss / len(self.validation_loader)
            """,
            line=18,
            title="a user-given metric averaged over the batches, but assigned on each (only the last one is averaged)",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader


            class Solver:
                def __init__(self, model, validation_loader: DataLoader, validation_fn):
                    self.model = model
                    self.validation_loader = validation_loader
                    self.validation_fn = validation_fn

                def validate(self):
                    self.model.eval()
                    validation_loss = 0.0
                    for data, target in self.validation_loader:
                        with torch.no_grad():
                            validation_loss += self.validation_fn(self.model(data), target)
                    self.model.train()
                    return validation_loss / len(self.validation_loader)

                def last_output(self):
                    for data, target in self.validation_loader:
                        with torch.no_grad():
                            output = self.model(data)
                    return output
            """,
            title="the metric accumulated over the batches, then averaged (a last output returned as is: no metric)",
        ),
        bad(
            """
            import torch
            from accelerate import Accelerator
            eval_dataloader = torch.utils.data.DataLoader(eval_set, batch_size=64)
            accelerator = Accelerator(log_with="wandb")
            model, eval_dataloader = accelerator.prepare(model, eval_dataloader)
            model.eval()
            for batch in eval_dataloader:
                with torch.no_grad():
                    outputs = model(**batch)
                eval_loss = outputs.loss
            accelerator.log({"eval_loss": eval_loss.item()}, step=completed_steps)
            """,
            line=11,
            title="Accelerate: a model output's loss from the last batch",
        ),
        bad(
            """
            import torch


            def dice(pred, target, eps=1e-6):
                inter = (pred * target).sum()
                return ((2 * inter + eps) / (pred.sum() + target.sum() + eps)).mean()


            def test(model, test_loader: torch.utils.data.DataLoader, logger):
                model.eval()
                with torch.no_grad():
                    for i, (image, mask) in enumerate(test_loader):
                        pred = (model(image) > 0).float()
                        score = dice(pred, mask)
                logger.info(f"test dice {score:.4f}")
                return score
            """,
            line=15,
            title="a metric helper's value from the last batch, logged and returned",
        ),
        good(
            """
            import numpy as np
            import torch


            def evaluate(model, loader):
                model.eval()
                losses = []
                with torch.no_grad():
                    for batch in loader:
                        loss = model(**batch).loss
                        losses.append(loss.item())
                return float(np.mean(losses))
            """,
            title="per-batch losses collected, averaged after the loop",
        ),
        good(
            """
            import torch


            def evaluate(model, criterion, loader):
                model.eval()
                avg = 0.0
                with torch.no_grad():
                    for i, (x, y) in enumerate(loader):
                        loss = criterion(model(x), y).item()
                        avg += (loss - avg) / (i + 1)
                return avg
            """,
            title="a running average updated on every batch",
        ),
        good(
            """
            import torch


            @torch.no_grad()
            def smoke_test(model, criterion, loader):
                model.eval()
                for x, y in loader:
                    loss = criterion(model(x), y)
                # the last batch only: a smoke check that the forward runs and the loss is finite
                return loss.item()
            """,
            title="keeps the last batch on purpose and says so",
        ),
        good(
            """
            import torch


            @torch.no_grad()
            def evaluate(model, criterion, loader):
                model.eval()
                for x, y in loader:
                    loss = criterion(model(x), y)
                    print(f"batch loss {loss.item():.4f}")
                    break
                return loss.item()
            """,
            title="one batch on purpose: the loop stops after the first",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            val_loader = DataLoader(val_set, batch_size=len(val_set))


            @torch.no_grad()
            def evaluate(model, criterion):
                for x, y in val_loader:
                    loss = criterion(model(x), y)
                return loss.item()
            """,
            title="one batch holds the whole validation set",
        ),
        good(
            """
            import lightning as L
            import torch.nn.functional as F


            class LitClassifier(L.LightningModule):
                def validation_step(self, batch, batch_idx):
                    x, y = batch
                    loss = F.cross_entropy(self(x), y)
                    self.log("val_loss", loss, on_epoch=True)
                    return loss
            """,
            title="Lightning's validation_step: the framework averages the logged values over the epoch",
        ),
        good(
            """
            for epoch in range(epochs):
                for x, y in train_loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                print(f"epoch {epoch} loss {loss.item():.3f}")
            """,
            title="a training loop's display of its last loss",
        ),
        good(
            """
            import torch
            from engine import compute_loss_and_backward


            def train_epoch(model, loader, optimizer):
                model.train()
                for batch in loader:
                    loss = compute_loss_and_backward(model, batch, optimizer)
                return loss
            """,
            title="a training epoch whose step is in a helper handed the optimizer: not an evaluation",
        ),
        good(
            """
            import torch


            def evaluate(model, criterion, loader, meter):
                model.eval()
                with torch.no_grad():
                    for x, y in loader:
                        loss = criterion(model(x), y)
                        meter.update(loss.item(), x.size(0))
                        if meter.count >= 1000:
                            break
                loss = meter.avg
                return loss
            """,
            title="the name is re-bound to the meter's average before it is returned",
        ),
    )

    def check(self, ctx):
        flow = ctx.model(dataflow)
        training = {t.node for t in ctx.model(training_model).loops}
        for loop in ctx.index.loops:
            loader = loader_of_loop(flow, loop)
            if loader is None or loop in training or _trains(flow, loop) or _stops_after_one(loop) \
                    or _one_batch(flow, loader):
                continue
            assigned = _per_batch_values(flow, loop)
            if not assigned:
                continue
            owner = flow._owner(loop)
            for use, name, binding, statement in _reports_after(flow, owner, loop, assigned):
                if _says_last(ctx, loop, statement) or _LAST_NAME.match(name):
                    continue
                what = assigned[name]
                if what is None:
                    # `validation_loss = self.validation_fn(out, y)` in the loop, `return
                    # validation_loss / len(loader)` after it: averaged over the batches as a
                    # per-batch metric would be, but it holds the last batch's value only
                    if not _averaged_over_batches(ctx, use, loader):
                        continue
                    what = f"averaged over the batches after the loop: `{ctx.code_for(ctx.index.parent(use))}`"
                yield self.report(
                    statement,
                    f"`{name}` is assigned on every batch of the evaluation loop ({what}) and reported after it: "
                    "only the last batch counts; accumulate a sum and a count over the loop (or a meter) and "
                    "report their ratio",
                    evidence=[loader_premise(ctx, loader, flow.scope_of(loop)),
                              premise(f"`{name}` is assigned, not accumulated, on every batch ({what})",
                                      getattr(binding, "node", binding) if binding is not None else loop, "use"),
                              premise(f"`{name}` is reported after the loop", statement, "use")])
                break  # one finding per loop: the first report of its value


def _trains(flow, loop) -> bool:
    """The loop runs a backward or a step (directly), or hands an optimizer to a call (a training
    step of another file): not an evaluation."""
    for call in calls_in(loop.body):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("backward", "step", "zero_grad"):
            return True
        scope = flow.scope_of(call)
        if any(flow.roles.of(a.value, scope) == OPTIMIZER for a in call.args):
            return True
    return False


def _stops_after_one(loop) -> bool:
    """`break` as the last statement of the body: one batch, on purpose."""
    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
    last = body[-1] if body else None
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, cst.Break) for s in last.body)


def _one_batch(flow, loader) -> bool:
    """A loader whose batch size is the length of its dataset: its one batch is the whole set."""
    call = loader_constructor(flow, loader)
    if call is None:
        return False
    size = keyword_value(call, "batch_size")
    if size is None and len(positional_args(call)) >= 2:
        size = positional_args(call)[1].value
    return isinstance(size, cst.Call) and dotted_name(size.func) == "len"


def _per_batch_values(flow, loop) -> dict[str, str | None]:
    """Names assigned (not accumulated) on every iteration -> why the value is a loss or metric
    (None when what computes it does not say)."""
    found: dict[str, str | None] = {}
    stack = list(loop.body.body) if isinstance(loop.body, cst.IndentedBlock) else []
    while stack:
        node = stack.pop()
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 \
                        and isinstance(small.targets[0].target, cst.Name):
                    name = small.targets[0].target.value
                    reads_itself = any(isinstance(n, cst.Name) and n.value == name for n in walk(small.value))
                    if reads_itself:
                        found.pop(name, None)
                    else:
                        # None: nothing computing it says it is a metric; only its average over the
                        # loop's batches after the loop (`value / len(loader)`) can say so
                        found[name] = _loss_or_metric(flow, small.value, 0)
        elif isinstance(node, (cst.With, cst.Try)):
            stack.extend(node.body.body)
    return found


def _loss_or_metric(flow, expr, depth) -> str | None:
    """Why `expr` is a per-batch loss or metric, or None."""
    if depth > 5 or expr is None:
        return None
    scope = flow.scope_of(expr)
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
                and expr.func.attr.value in ("item", "detach", "cpu", "float", "double") and not expr.args:
            expr = expr.func.value
        elif isinstance(expr, cst.Call) and flow.index.resolve(expr.func, scope) == "float" and len(expr.args) == 1:
            expr = expr.args[0].value
        else:
            break
    if isinstance(expr, cst.Name):
        binding = flow.reaching(expr)
        if binding is None or binding.kind != "assign" or binding.value is None:
            return None
        return _loss_or_metric(flow, binding.value, depth + 1)
    if isinstance(expr, cst.Attribute) and expr.attr.value == "loss":
        return "a model output's loss"
    if isinstance(expr, cst.Subscript) and isinstance(expr.slice[0].slice, cst.Index) \
            and isinstance(expr.slice[0].slice.value, cst.SimpleString) \
            and expr.slice[0].slice.value.evaluated_value == "loss":
        return "a model output's loss"
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in ("mean", "sum") and not expr.args \
            and any(isinstance(n, cst.Comparison) for n in walk_expression(func.value)):
        return "a mean or count over a comparison"
    if expr.args and flow.is_loss_function(func, scope) and not flow.is_model(func, scope):
        return f"a loss: `{flow.ctx.code_for(func)}(...)`"
    summary = callable_summary(flow.index, func, scope, MEAN_WORDS)
    if summary is not None and summary.returns_mean:
        return f"a batch mean: `{summary.name}()` returns one"
    return None


def _reports_after(flow, owner, loop, assigned):
    """(use, name, binding, statement) for each return or reporting call after `loop` whose value
    is one of `assigned`, as assigned in the loop."""
    body = owner.body if isinstance(owner, cst.FunctionDef) else owner
    stack = [body]
    while stack:
        node = stack.pop()
        if node is not body and isinstance(node, _NESTED):
            continue
        if node is loop:
            continue
        candidate = None
        if isinstance(node, cst.Return) and node.value is not None:
            candidate = node.value
        elif isinstance(node, cst.Call) and _is_reporting(node):
            candidate = node
        if candidate is not None and flow.before(loop, node):
            for name_node in _reported_names(candidate):
                name = name_node.value
                if name not in assigned:
                    continue
                binding = flow.reaching(name_node)
                if binding is not None and binding.kind == "assign" and flow.inside(binding.node, loop):
                    yield name_node, name, binding, node
                    break
            continue
        stack.extend(reversed(iter_children(node)))


def _is_reporting(call: cst.Call) -> bool:
    func = call.func
    tail = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return tail in _REPORTING


def _reported_names(expr):
    """Names reported as themselves: the expression, its tuple/list/dict elements, call arguments
    (of a reporting call), f-string parts, unwrapped by `.item()`/`float()`/..."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            yield node
        elif isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in _UNWRAP_METHODS:
                stack.append(func.value)
            elif isinstance(func, cst.Name) and func.value in _UNWRAP_FUNCTIONS:
                stack.extend(a.value for a in node.args[:1])
            elif _is_reporting(node) or (isinstance(func, cst.Name) and func.value == "dict"):
                stack.extend(a.value for a in node.args)
        elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
            stack.append(node.left)  # `value / len(loader)`: the value, averaged
        elif isinstance(node, (cst.Tuple, cst.List)):
            stack.extend(e.value for e in node.elements)
        elif isinstance(node, cst.Dict):
            stack.extend(e.value for e in node.elements if isinstance(e, cst.DictElement))
        elif isinstance(node, cst.FormattedString):
            stack.extend(p.expression for p in node.parts if isinstance(p, cst.FormattedStringExpression))
        elif isinstance(node, cst.ConcatenatedString):
            stack.extend((node.left, node.right))


def _averaged_over_batches(ctx, use: cst.Name, loader: cst.BaseExpression) -> bool:
    """`use / len(loader)` with the loader the evaluation loop iterates."""
    parent = ctx.index.parent(use)
    if not (isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Divide)
            and parent.left is use):
        return False
    divisor = parent.right
    return isinstance(divisor, cst.Call) and dotted_name(divisor.func) == "len" and len(divisor.args) == 1 \
        and dotted_name(divisor.args[0].value) is not None \
        and dotted_name(divisor.args[0].value) == dotted_name(loader)


def _says_last(ctx, loop, statement) -> bool:
    """A comment between the loop and the report that says the last batch is meant."""
    line = ctx.index.parent(ctx.index.enclosing_statement(statement))
    texts = [ctx.code_for(loop)] + ([ctx.code_for(line)] if isinstance(line, cst.SimpleStatementLine) else [])
    return any(_SAYS_LAST.search(text) for text in texts)
