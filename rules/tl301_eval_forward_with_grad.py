"""TL301 eval-forward-with-grad."""

from __future__ import annotations

import libcst as cst

from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.model.mode_names import display_key
from trainlint.model.dataflow import dataflow
from trainlint.model.mode_state import EVAL, ON
from trainlint.model.modes import modes
from trainlint.fixkit import line_holding, module_name, wrap_in
from trainlint.model.value_kinds import is_synthetic_tensor
from trainlint.rule import FixSpec, Rule, bad, before, good, rewrite
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import evaluation_premise, grad_off_site, mode_fact_premise


class EvalForwardWithGrad(Rule):
    code = "TL301"
    name = "eval-forward-with-grad"
    severity = Severity.WARNING
    summary = "An evaluation after `model.eval()` runs its forward with grad recording on"
    message = "evaluation forward after `model.eval()` runs with grad recording on"
    triggers = (".eval(", "train(False", "train(mode=False")
    gate = named("^eval$") | (named("^train$") & named("^False$"))  # eval mode: `.eval()`, `.train(False)`
    imported_triggers = ("loader", "Loader")  # `.eval()` in a helper, then an evaluation loop here
    what_it_does = """
        Finds evaluations (a loop over a validation/test loader, a function named as an
        evaluation, or the batches evaluated after `model.eval()`) whose forward call runs with
        autograd recording on: no `torch.no_grad()` / `torch.inference_mode()` context, no
        `@torch.no_grad()` / `@torch.inference_mode()` decorator, no `torch.set_grad_enabled(False)`
        before it, and no caller in the same file that disables grad around the call (a function
        that only the project's other files call counts as evaluated without grad when every one
        of those calls sits under `no_grad` or after a `torch.set_grad_enabled(False)` statement that
        turns recording off for the process, or inside a helper every call of which in its file does;
        a call of a helper of the project whose body runs such a statement outside a `with`, by the
        literal flag the call passes (`self.switch(False)` into `torch.set_grad_enabled(training)`),
        turns it off for the code after the call, as the statement itself would;
        a method counts when every call of a method by its name in the files that can reach it
        does, leaving out calls on an object built from another class that defines that method
        itself; a pytest test calling it evaluates nothing). Code that
        needs gradients in eval mode (an adversarial attack, a saliency map, `autograd.grad`, a
        frozen teacher in a training step, also when its output reaches the step's backward through
        assignments, `logits = logits + w * teacher(z)` in an inner loop, then `loss(logits, y).backward()`,
        or when it is handed to a function of the file whose backward backpropagates what it computes
        from it: a PPO learner's `new_logp = self.score(policy, ...)` in eval mode, then
        `self.update(old_logp, new_logp, adv)` whose loss comes from `new_logp`)
        is left alone, and so is a model whose `forward` computes gradients itself or through the
        project code it reaches (`torch.autograd.grad` for the normals of a distance field, a
        physics residual; a branch under `if self.training:` does not count in eval mode); when
        the model is built from a class chosen at run time (`get_class(cfg.model)(conf)`, a
        factory's product, `REGISTRY[name](...)`) and a module class of the project it could be
        (one taking the call's arguments; for a dict of the project's classes, one of them) has
        such a forward, the finding is unproven. So is a call
        whose literal argument sends a project model's `forward` down a
        branch that runs its submodules under `no_grad` (`model(batch, mode="inference")` into
        `elif mode == "inference": with torch.no_grad(): ...`, nothing before the branch running a
        submodule; a Transformers tokenizer or processor, `AutoTokenizer.from_pretrained(...)`, is
        no submodule), and so is a call of a project model whose `forward` runs every submodule it
        reaches under `no_grad` whatever it is passed (itself or in a method of its class it
        calls) and reads no `nn.Parameter` outside it, and so is a forward that runs once, in no
        loop, on tensors a torch factory made (`model(torch.zeros(1, 3, 224, 224))`, a warm-up or a
        shape probe), and so is a forward of a model whose every parameter was frozen before it
        (`model.requires_grad_(False)`, `p.requires_grad = False` for each of
        `model.parameters()`; not a part of it, not after the evaluation) on inputs that carry
        no graph: nothing records. A model built by a project module class counts as frozen when
        its `__init__` freezes every parameter for the construction's arguments (also under `if not
        trainable:`), or adds to `self` only such frozen parts, plain tensors and values, the
        branches of its `if`s decided by the literals the construction binds (`PerceptualNet()` whose
        default `kind="vgg"` takes the branch building `Backbone(requires_grad=False)`). Code written for PyTorch before 0.4 turned recording off with
        `Variable(x, volatile=True)`: a forward computed from such an input records nothing and is
        left alone (a `Variable` without `volatile=True` records as before), also when the function
        reads it from a module-level name whose every assignment is a statement of the module's body
        and whose last one precedes the function's `def`. A framework hook the framework runs with
        grad recording off (a LightningModule's `validation_step`, `test_step`, `predict_step`:
        trainlint/frameworks/*.toml) records nothing either; a hook it runs with grad on
        (`on_train_epoch_end`), or a method of that name on a class deriving from no such
        framework class, does. Reported at the first
        forward of that model in the evaluation; when the forward sits in a helper that training
        shares too (`self.module_.eval()`, then `self.infer(x)`), at the evaluation's call of it.
        A forward that is never reached is left alone: an earlier statement of a block holding it
        (no `try` around) reads a local the function binds only later (its first mention), so the
        first batch raises `UnboundLocalError` before it.
        """
    why_bad = """
        `model.eval()` only changes how modules behave (dropout off, BatchNorm uses its running
        statistics); it does not touch autograd. Every forward therefore still records a graph
        and keeps the activations it needs for a backward that never comes, so evaluation uses
        training-sized memory, runs slower, and anything kept from it (`outputs.append(logits)`,
        `total += loss`) holds whole graphs alive: the "out of memory only during validation"
        bug. The two switches are independent; an evaluation needs both.
        """
    fix_safety = """
        Unsafe: under `no_grad` nothing in the block can call `backward()`; if the block is not
        only an evaluation (it trains, or a caller needs its graph), the fix breaks it.
        """
    references = (
        "https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval",
        "https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation",
        "https://pytorch.org/docs/stable/generated/torch.no_grad.html",
        "https://pytorch.org/docs/stable/generated/torch.autograd.grad_mode.inference_mode.html",
    )
    examples = (
        good(
            """
            import torch


            def forward_pass(model, batch):
                if model.training:
                    return model(batch["x"])
                with torch.no_grad():
                    return model(batch["x"])


            def validate(model, loader):
                model.eval()
                total = 0.0
                for batch in loader:
                    total += forward_pass(model, batch).sum().item()
                return total
            """,
            title="a helper that runs the forward under `no_grad` when the model is not training, called after "
                  "`model.eval()`",
        ),
        bad(
            """
            import torch


            def forward_pass(model, batch):
                if not model.training:
                    return model(batch["x"])
                with torch.no_grad():
                    return model(batch["x"])


            def validate(model, loader):
                model.eval()
                total = 0.0
                for batch in loader:
                    total += forward_pass(model, batch).sum().item()
                return total
            """,
            line=15,
            fixed="""
            import torch


            def forward_pass(model, batch):
                if not model.training:
                    return model(batch["x"])
                with torch.no_grad():
                    return model(batch["x"])


            @torch.no_grad()
            def validate(model, loader):
                model.eval()
                total = 0.0
                for batch in loader:
                    total += forward_pass(model, batch).sum().item()
                return total
            """,
            title="the helper's test the other way round: in eval mode the forward records a graph",
        ),
        good(
            """
            try:
                import torch
            except ImportError:  # optional dependency
                torch = None


            def predict(model, loader):
                model.eval()
                outputs = []
                with torch.no_grad():
                    for x in loader:
                        outputs.append(model(x))
                return outputs
            """,
            title="an optional import: `torch = None` only where torch is missing, so `torch.no_grad` is torch's",
        ),
        good(
            """
            def _torch():
                import torch
                return torch


            def predict(model, loader):
                torch = _torch()
                model.eval()
                outputs = []
                with torch.no_grad():
                    for x in loader:
                        outputs.append(model(x))
                return outputs
            """,
            title="a lazy import through a helper that returns the module",
        ),
        good(
            """
            try:
                import torch
                HAVE_TORCH = True
            except ImportError:
                torch, HAVE_TORCH = None, False


            class Sampler:
                @torch.no_grad() if HAVE_TORCH else (lambda fn: fn)
                def sample(self, loader):
                    self.model.eval()
                    return [self.model(x) for x in loader]
            """,
            title="a decorator chosen at run time: grad recording is off whenever torch runs the forward",
        ),
        bad(
            """
            def _torch():
                import torch
                return torch


            def predict(model, loader):
                torch = _torch()
                model.eval()
                outputs = []
                for x in loader:
                    outputs.append(model(x))
                with torch.no_grad():
                    return torch.cat(outputs)
            """,
            line=11,
            title="the same lazy import, but the forwards run before the `no_grad` block",
        ),
        good(
            """
            import torch
            from torchvision.utils import save_image

            def inspect(model, loader):
                model.eval()
                for images, _ in loader:
                    save_image(images[:8], "inputs.png")
                    halt_here
                    outputs = model(images)
                    save_image(outputs[:8], "outputs.png")
            """,
            title="a bare name bound nowhere (a debugging halt) raises NameError before the forward: it never runs",
        ),
        bad(
            """
            import torch
            from torchvision.utils import save_image

            halt_here = None

            def inspect(model, loader):
                model.eval()
                for images, _ in loader:
                    save_image(images[:8], "inputs.png")
                    halt_here
                    outputs = model(images)
                    save_image(outputs[:8], "outputs.png")
            """,
            line=11,
            fixed="""
            import torch
            from torchvision.utils import save_image

            halt_here = None

            @torch.no_grad()
            def inspect(model, loader):
                model.eval()
                for images, _ in loader:
                    save_image(images[:8], "inputs.png")
                    halt_here
                    outputs = model(images)
                    save_image(outputs[:8], "outputs.png")
            """,
            title="the same bare name bound at module level: a statement with no effect, the forward runs with grad on",
        ),
        good(
            """
            import torch

            def evaluate(model, loader, device):
                model.eval()
                probe = torch.randn(8, 3, 224, 224, device=device)
                model(probe)  # warm-up: kernels are chosen on the first call
                hits = 0
                with torch.no_grad():
                    for images, labels in loader:
                        hits += (model(images.to(device)).argmax(1) == labels).sum().item()
                return hits
            """,
            title="one warm-up forward on a made-up tensor before the no_grad evaluation",
        ),
        bad(
            """
            import torch

            def benchmark(model, loader, device):
                model.eval()
                model(torch.randn(8, 3, 224, 224, device=device))
                hits = 0
                for images, labels in loader:
                    hits += (model(images.to(device)).argmax(1) == labels).sum().item()
                return hits
            """,
            line=8,
            fixed="""
            import torch

            @torch.no_grad()
            def benchmark(model, loader, device):
                model.eval()
                model(torch.randn(8, 3, 224, 224, device=device))
                hits = 0
                for images, labels in loader:
                    hits += (model(images.to(device)).argmax(1) == labels).sum().item()
                return hits
            """,
            title="after the warm-up the batches themselves run with grad recording on",
        ),
        good(
            """
            import torch


            class Pruner:
                def __init__(self, model, gates, loader):
                    self.model, self.gates, self.loader = model, gates, loader

                def masked_pass(self):
                    self.gates.eval()
                    masks = self.gates.forward(training=False)
                    kept = sum(m.sum().item() for m in masks)
                    with torch.no_grad():
                        for batch in self.loader:
                            self.model(batch, masks=masks)
                    return kept

                def report(self):
                    print(self.masked_pass())
            """,
            title="the gates' forward runs once, handed only a literal: masks computed from their own "
                  "parameters, no batch flows in",
        ),
        bad(
            """
            import torch


            class Pruner:
                def __init__(self, model, gates, loader):
                    self.model, self.gates, self.loader = model, gates, loader

                def masked_pass(self):
                    self.gates.eval()
                    kept = 0.0
                    for batch in self.loader:
                        masks = self.gates.forward(training=False)
                        kept += sum(m.sum().item() for m in masks)
                        with torch.no_grad():
                            self.model(batch, masks=masks)
                    return kept
            """,
            line=12,
            fixed="""
            import torch


            class Pruner:
                def __init__(self, model, gates, loader):
                    self.model, self.gates, self.loader = model, gates, loader

                @torch.no_grad()
                def masked_pass(self):
                    self.gates.eval()
                    kept = 0.0
                    for batch in self.loader:
                        masks = self.gates.forward(training=False)
                        kept += sum(m.sum().item() for m in masks)
                        with torch.no_grad():
                            self.model(batch, masks=masks)
                    return kept
            """,
            title="the same literal-only forward, run again for every batch: a graph each time",
        ),
        good(
            """
            import torch


            def smart_inference_mode(torch_1_9=True):
                def decorate(fn):
                    return (torch.inference_mode if torch_1_9 else torch.no_grad)()(fn)
                return decorate


            @smart_inference_mode()
            def evaluate(model, loader):
                model.eval()
                correct = 0
                for images, labels in loader:
                    correct += (model(images).argmax(-1) == labels).sum().item()
                return correct
            """,
            title="a decorator factory that applies inference_mode or no_grad (in another module too)",
        ),
        good(
            """
            import functools

            import torch


            def torch_no_grad_eval(fn):
                @functools.wraps(fn)
                def wrapper(*args, **kwargs):
                    with torch.no_grad():
                        return fn(*args, **kwargs)
                return wrapper


            @torch_no_grad_eval
            def predict(model, loader):
                model.eval()
                return [model(x).argmax(-1) for x, _ in loader]
            """,
            title="a plain decorator whose wrapper runs the function under no_grad",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            def evaluate(model, loader):
                model.eval()
                total, correct = 0, 0
                for xb, yb in loader:
                    logits = model(xb)
                    correct += (logits.argmax(-1) == yb).sum().item()
                    total += yb.numel()
                model.train()
                return correct / total
            """,
            line=9,
            fixed="""
            import torch
            import torch.nn.functional as F


            @torch.no_grad()
            def evaluate(model, loader):
                model.eval()
                total, correct = 0, 0
                for xb, yb in loader:
                    logits = model(xb)
                    correct += (logits.argmax(-1) == yb).sum().item()
                    total += yb.numel()
                model.train()
                return correct / total
            """,
            title="an evaluate() function that forgets no_grad",
        ),
        bad(
            """
            import torch
            import torch.nn as nn


            class Trainer:
                def __init__(self, model, val_loader):
                    self.model = model
                    self.val_loader = val_loader
                    self.criterion = nn.CrossEntropyLoss(reduction="sum")

                def validate(self):
                    self.model.eval()
                    loss_sum, count = 0.0, 0
                    for batch in self.val_loader:
                        out = self.model(batch["x"])
                        loss_sum += self.criterion(out, batch["y"]).item()
                        count += len(batch["y"])
                    self.model.train()
                    return loss_sum / count
            """,
            line=15,
            fixed="""
            import torch
            import torch.nn as nn


            class Trainer:
                def __init__(self, model, val_loader):
                    self.model = model
                    self.val_loader = val_loader
                    self.criterion = nn.CrossEntropyLoss(reduction="sum")

                @torch.no_grad()
                def validate(self):
                    self.model.eval()
                    loss_sum, count = 0.0, 0
                    for batch in self.val_loader:
                        out = self.model(batch["x"])
                        loss_sum += self.criterion(out, batch["y"]).item()
                        count += len(batch["y"])
                    self.model.train()
                    return loss_sum / count
            """,
            title="a Trainer's validate() method",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F

            for step, (xb, yb) in enumerate(train_loader):
                loss = F.cross_entropy(model(xb), yb)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if step % 500 == 0:
                    model.eval()
                    val = sum(F.cross_entropy(model(xv), yv, reduction="sum").item() for xv, yv in val_loader)
                    model.train()
            """,
            line=11,
            fixed="""
            import torch
            import torch.nn.functional as F

            for step, (xb, yb) in enumerate(train_loader):
                loss = F.cross_entropy(model(xb), yb)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if step % 500 == 0:
                    model.eval()
                    with torch.no_grad():
                        val = sum(F.cross_entropy(model(xv), yv, reduction="sum").item() for xv, yv in val_loader)
                    model.train()
            """,
            title="evaluation inlined in the training loop",
        ),
        bad(
            """
            import torch


            def run_eval(model, eval_dataloader, metric, accelerator):
                model.eval()
                for batch in eval_dataloader:
                    outputs = model(**batch)
                    predictions = outputs.logits.argmax(dim=-1)
                    predictions, references = accelerator.gather_for_metrics((predictions, batch["labels"]))
                    metric.add_batch(predictions=predictions, references=references)
                return metric.compute()
            """,
            line=7,
            fixed="""
            import torch


            @torch.no_grad()
            def run_eval(model, eval_dataloader, metric, accelerator):
                model.eval()
                for batch in eval_dataloader:
                    outputs = model(**batch)
                    predictions = outputs.logits.argmax(dim=-1)
                    predictions, references = accelerator.gather_for_metrics((predictions, batch["labels"]))
                    metric.add_batch(predictions=predictions, references=references)
                return metric.compute()
            """,
            title="Hugging Face / Accelerate evaluation loop",
        ),
        bad(
            """
            import torch


            def predict_batches(model, loader):
                return [model(xb).argmax(-1) for xb, _ in loader]


            def main(model, test_loader):
                model.eval()
                predictions = predict_batches(model, test_loader)
                return torch.cat(predictions)
            """,
            line=5,
            title="the caller switches to eval mode, the helper forwards with grad on",
        ),
        bad(
            """
            import torch


            class Net:
                def infer(self, x):
                    return self.module_(torch.as_tensor(x, device=self.device))

                def train_step(self, xb, yb):
                    self.module_.train()
                    self.optimizer_.zero_grad()
                    loss = self.criterion_(self.infer(xb), yb)
                    loss.backward()
                    self.optimizer_.step()
                    return loss.item()

                def validation_step(self, xb, yb):
                    self.module_.eval()
                    y_pred = self.infer(xb)
                    return self.criterion_(y_pred, yb).item()
            """,
            line=18,
            fixed="""
            import torch


            class Net:
                def infer(self, x):
                    return self.module_(torch.as_tensor(x, device=self.device))

                def train_step(self, xb, yb):
                    self.module_.train()
                    self.optimizer_.zero_grad()
                    loss = self.criterion_(self.infer(xb), yb)
                    loss.backward()
                    self.optimizer_.step()
                    return loss.item()

                @torch.no_grad()
                def validation_step(self, xb, yb):
                    self.module_.eval()
                    y_pred = self.infer(xb)
                    return self.criterion_(y_pred, yb).item()
            """,
            title="a validation hook runs its forward through a helper that the training step shares",
        ),
        good(
            """
            import torch


            class Net:
                def infer(self, x):
                    return self.module_(torch.as_tensor(x, device=self.device))

                def train_step(self, xb, yb):
                    self.module_.train()
                    self.optimizer_.zero_grad()
                    loss = self.criterion_(self.infer(xb), yb)
                    loss.backward()
                    self.optimizer_.step()
                    return loss.item()

                def validation_step(self, xb, yb):
                    self.module_.eval()
                    with torch.no_grad():
                        y_pred = self.infer(xb)
                    return self.criterion_(y_pred, yb).item()
            """,
            title="the shared helper called under no_grad in the validation hook",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            def evaluate(model, loader):
                model.eval()
                total, correct = 0, 0
                with torch.no_grad():
                    for xb, yb in loader:
                        logits = model(xb)
                        correct += (logits.argmax(-1) == yb).sum().item()
                        total += yb.numel()
                model.train()
                return correct / total
            """,
            title="eval() and no_grad() together",
        ),
        good(
            """
            import torch


            class Trainer:
                @torch.no_grad()
                def validate(self):
                    self.model.eval()
                    losses = [self.criterion(self.model(x), y).item() for x, y in self.val_loader]
                    self.model.train()
                    return sum(losses)

                @torch.inference_mode
                def test(self):
                    self.model.eval()
                    return [self.model(x).argmax(-1) for x, _ in self.test_loader]
            """,
            title="@torch.no_grad() and bare @torch.inference_mode decorators",
        ),
        good(
            """
            import torch


            def evaluate(model, loader):
                model.eval()
                return [model(xb).argmax(-1) for xb, _ in loader]


            def main(model, loader):
                with torch.no_grad():
                    predictions = evaluate(model, loader)
                return predictions
            """,
            title="every caller wraps the evaluation in no_grad",
        ),
        good(
            """
            import torch

            torch.set_grad_enabled(False)
            model = torch.jit.load("model.pt")
            model.eval()
            for xb, _ in test_loader:
                print(model(xb).argmax(-1))
            """,
            title="torch.set_grad_enabled(False) as a call",
        ),
        good(
            """
            import torch


            class Runner:
                def switch(self, training):
                    if training:
                        self.net.train()
                    else:
                        self.net.eval()
                    torch.set_grad_enabled(training)

                def predict(self, loader):
                    self.switch(False)
                    return [self.net(x).argmax(-1) for x in loader]
            """,
            title="a helper whose body calls `torch.set_grad_enabled(training)` as a statement, called with "
                  "`False`: recording stays off after it returns",
        ),
        bad(
            """
            import torch


            class Runner:
                def switch(self, training):
                    if training:
                        self.net.train()
                    else:
                        self.net.eval()
                    with torch.set_grad_enabled(training):
                        self.steps = 0

                def predict(self, loader):
                    self.switch(False)
                    return [self.net(x).argmax(-1) for x in loader]
            """,
            line=15,
            fixed="""
            import torch


            class Runner:
                def switch(self, training):
                    if training:
                        self.net.train()
                    else:
                        self.net.eval()
                    with torch.set_grad_enabled(training):
                        self.steps = 0

                @torch.no_grad()
                def predict(self, loader):
                    self.switch(False)
                    return [self.net(x).argmax(-1) for x in loader]
            """,
            title="the helper switches recording off only inside a `with`, which turns it back on when the "
                  "block ends: the forwards after the call record",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            def pgd_attack(model, x, y, eps=8 / 255, alpha=2 / 255, steps=10):
                model.eval()
                x_adv = x.clone()
                for _ in range(steps):
                    x_adv.requires_grad_(True)
                    loss = F.cross_entropy(model(x_adv), y)
                    grad, = torch.autograd.grad(loss, x_adv)
                    x_adv = (x_adv.detach() + alpha * grad.sign()).clamp(x - eps, x + eps)
                return x_adv
            """,
            title="an adversarial attack needs gradients in eval mode",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F

            teacher.eval()
            teacher.requires_grad_(False)
            for xb, yb in train_loader:
                soft = F.softmax(teacher(xb), dim=-1)
                loss = F.kl_div(F.log_softmax(student(xb), dim=-1), soft, reduction="batchmean")
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """,
            title="a frozen teacher in eval mode inside a training step",
        ),
        good(
            """
            import torch

            for phase in ["train", "val"]:
                if phase == "train":
                    model.train()
                else:
                    model.eval()
                for inputs, labels in dataloaders[phase]:
                    optimizer.zero_grad()
                    with torch.set_grad_enabled(phase == "train"):
                        loss = criterion(model(inputs), labels)
                        if phase == "train":
                            loss.backward()
                            optimizer.step()
            """,
            title="grad chosen by the phase with torch.set_grad_enabled(phase == 'train')",
        ),
        good(
            """
            import torch


            def test(model, loader):
                model.eval()
                for name, param in model.named_parameters():
                    param.requires_grad = False
                return [model(images).argmax(-1) for images, _ in loader]
            """,
            title="every parameter of the evaluated model frozen before the evaluation: nothing records",
        ),
        bad(
            """
            import torch


            def test(model, loader):
                model.eval()
                for name, param in model.backbone.named_parameters():
                    param.requires_grad = False
                return [model(images).argmax(-1) for images, _ in loader]
            """,
            line=8,
            fixed="""
            import torch


            @torch.no_grad()
            def test(model, loader):
                model.eval()
                for name, param in model.backbone.named_parameters():
                    param.requires_grad = False
                return [model(images).argmax(-1) for images, _ in loader]
            """,
            title="only the backbone is frozen: the rest of the model's parameters still record a graph",
        ),
        bad(
            """
            import torch


            def test(model, teacher, loader):
                model.eval()
                teacher.requires_grad_(False)
                predictions = [model(images).argmax(-1) for images, _ in loader]
                model.requires_grad_(False)
                return predictions
            """,
            line=7,
            fixed="""
            import torch


            @torch.no_grad()
            def test(model, teacher, loader):
                model.eval()
                teacher.requires_grad_(False)
                predictions = [model(images).argmax(-1) for images, _ in loader]
                model.requires_grad_(False)
                return predictions
            """,
            title="another model frozen before the evaluation, the evaluated one only after it",
        ),
        good(
            """
            import torch
            from torch import nn


            class FrozenFeatures(nn.Module):
                def __init__(self, width, trainable=False):
                    super().__init__()
                    self.layers = nn.Sequential(nn.Conv2d(3, width, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
                    for weight in self.parameters():
                        weight.requires_grad = trainable

                def forward(self, x):
                    return self.layers(x).flatten(1)


            def embed(net, batches):
                net.eval()
                return [net(x).cpu().numpy() for x in batches]


            SHARED = None


            def embed_all(batches, reuse=False):
                global SHARED
                if SHARED is None or not reuse:
                    net = FrozenFeatures(64)
                    SHARED = net
                else:
                    net = SHARED
                return embed(net, batches)
            """,
            title="a feature net whose `__init__` freezes every parameter (`trainable=False` by default), "
                  "also when kept in a global: nothing records",
        ),
        bad(
            """
            import torch
            from torch import nn


            class FrozenFeatures(nn.Module):
                def __init__(self, width, trainable=False):
                    super().__init__()
                    self.layers = nn.Sequential(nn.Conv2d(3, width, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
                    for weight in self.parameters():
                        weight.requires_grad = trainable
                    self.head = nn.Linear(width, 10)

                def forward(self, x):
                    return self.head(self.layers(x).flatten(1))


            def embed(net, batches):
                net.eval()
                return [net(x).cpu().numpy() for x in batches]


            def embed_all(batches):
                net = FrozenFeatures(64)
                return embed(net, batches)
            """,
            line=19,
            fixed="""
            import torch
            from torch import nn


            class FrozenFeatures(nn.Module):
                def __init__(self, width, trainable=False):
                    super().__init__()
                    self.layers = nn.Sequential(nn.Conv2d(3, width, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
                    for weight in self.parameters():
                        weight.requires_grad = trainable
                    self.head = nn.Linear(width, 10)

                def forward(self, x):
                    return self.head(self.layers(x).flatten(1))


            @torch.no_grad()
            def embed(net, batches):
                net.eval()
                return [net(x).cpu().numpy() for x in batches]


            def embed_all(batches):
                net = FrozenFeatures(64)
                return embed(net, batches)
            """,
            title="the same freezing loop, but a head built after it keeps trainable parameters",
        ),
        good(
            """
            import torch
            from torch import nn


            class Encoder(nn.Module):
                def __init__(self, width, trainable=False):
                    super().__init__()
                    self.body = nn.Sequential(nn.Conv2d(3, width, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
                    if not trainable:
                        for p in self.parameters():
                            p.requires_grad = False

                def forward(self, x):
                    return self.body(x).flatten(1)


            class Distance(nn.Module):
                def __init__(self, kind="small"):
                    super().__init__()
                    self.kind = kind
                    self.offset = torch.tensor([0.5, 0.5, 0.5]).view(1, 3, 1, 1)
                    if self.kind in ("small", "tiny"):
                        self.encoder = Encoder(16, trainable=False)
                    else:
                        self.encoder = nn.Conv2d(3, 64, 3)

                def forward(self, a, b):
                    return (self.encoder(a - self.offset) - self.encoder(b - self.offset)).pow(2).sum(1)


            def score(pairs):
                metric = Distance()
                metric.eval()
                return [metric(a, b).mean().item() for a, b in pairs]
            """,
            title="a wrapper that adds only a backbone whose `__init__` freezes it (`if not trainable:`), chosen by "
                  "the default of its `kind`, and a plain tensor: every parameter is frozen, nothing records",
        ),
        bad(
            """
            import torch
            from torch import nn


            class Encoder(nn.Module):
                def __init__(self, width, trainable=False):
                    super().__init__()
                    self.body = nn.Sequential(nn.Conv2d(3, width, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
                    if not trainable:
                        for p in self.parameters():
                            p.requires_grad = False

                def forward(self, x):
                    return self.body(x).flatten(1)


            class Distance(nn.Module):
                def __init__(self, kind="small"):
                    super().__init__()
                    self.kind = kind
                    self.offset = torch.tensor([0.5, 0.5, 0.5]).view(1, 3, 1, 1)
                    if self.kind in ("small", "tiny"):
                        self.encoder = Encoder(16, trainable=False)
                    else:
                        self.encoder = nn.Conv2d(3, 64, 3)

                def forward(self, a, b):
                    return (self.encoder(a - self.offset) - self.encoder(b - self.offset)).pow(2).sum(1)


            def score(pairs):
                metric = Distance(kind="large")
                metric.eval()
                return [metric(a, b).mean().item() for a, b in pairs]
            """,
            line=34,
            fixed="""
            import torch
            from torch import nn


            class Encoder(nn.Module):
                def __init__(self, width, trainable=False):
                    super().__init__()
                    self.body = nn.Sequential(nn.Conv2d(3, width, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
                    if not trainable:
                        for p in self.parameters():
                            p.requires_grad = False

                def forward(self, x):
                    return self.body(x).flatten(1)


            class Distance(nn.Module):
                def __init__(self, kind="small"):
                    super().__init__()
                    self.kind = kind
                    self.offset = torch.tensor([0.5, 0.5, 0.5]).view(1, 3, 1, 1)
                    if self.kind in ("small", "tiny"):
                        self.encoder = Encoder(16, trainable=False)
                    else:
                        self.encoder = nn.Conv2d(3, 64, 3)

                def forward(self, a, b):
                    return (self.encoder(a - self.offset) - self.encoder(b - self.offset)).pow(2).sum(1)


            @torch.no_grad()
            def score(pairs):
                metric = Distance(kind="large")
                metric.eval()
                return [metric(a, b).mean().item() for a, b in pairs]
            """,
            title="the same wrapper built with `kind=\"large\"`: its branch adds a trainable convolution",
        ),
        bad(
            """
            import torch.nn.functional as F
            from torch.autograd import Variable


            def test(net, loader):
                net.eval()
                total = 0
                for images, labels in loader:
                    images, labels = Variable(images.cuda()), Variable(labels.cuda(), volatile=True)
                    out = net(images)
                    total += F.cross_entropy(out, labels).data[0]
                return total
            """,
            line=10,
            title="legacy code: only the labels are volatile, the images the network sees record a graph",
        ),
        good(
            """
            import torch.nn.functional as F
            from torch.autograd import Variable


            def test(net, loader):
                net.eval()
                total = 0
                for images, labels in loader:
                    images, labels = Variable(images.cuda(), volatile=True), Variable(labels.cuda())
                    out = net(images)
                    total += F.cross_entropy(out, labels).data[0]
                return total
            """,
            title="legacy code (PyTorch < 0.4): inputs wrapped in Variable(..., volatile=True) record no graph",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            def synthesize(generator, teachers, weights, steps, batch_size=64, num_classes=10, noise_dim=100):
                optimizer = torch.optim.Adam(generator.parameters(), lr=1e-4)
                generator.train()
                for step in range(steps):
                    labels = torch.randint(0, num_classes, (batch_size,))
                    images = generator(torch.randn(batch_size, noise_dim), labels)
                    logits = 0
                    for teacher, w in zip(teachers, weights):
                        teacher.eval()
                        logits = logits + w * teacher(images)
                    loss = F.cross_entropy(logits, labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            title="frozen teachers in eval mode whose logits feed the generator's loss: the graph through them is what its backward needs",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            def synthesize(generator, teachers, weights, steps, batch_size=64, num_classes=10, noise_dim=100):
                optimizer = torch.optim.Adam(generator.parameters(), lr=1e-4)
                generator.train()
                for step in range(steps):
                    labels = torch.randint(0, num_classes, (batch_size,))
                    images = generator(torch.randn(batch_size, noise_dim), labels)
                    loss = F.cross_entropy(images.flatten(1)[:, :num_classes], labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    agreement = 0
                    for teacher, w in zip(teachers, weights):
                        teacher.eval()
                        agreement = agreement + w * (teacher(images).argmax(1) == labels).float().mean().item()
                    print(step, agreement)
            """,
            line=18,
            fixed="""
            import torch
            import torch.nn.functional as F


            def synthesize(generator, teachers, weights, steps, batch_size=64, num_classes=10, noise_dim=100):
                optimizer = torch.optim.Adam(generator.parameters(), lr=1e-4)
                generator.train()
                for step in range(steps):
                    labels = torch.randint(0, num_classes, (batch_size,))
                    images = generator(torch.randn(batch_size, noise_dim), labels)
                    loss = F.cross_entropy(images.flatten(1)[:, :num_classes], labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    agreement = 0
                    for teacher, w in zip(teachers, weights):
                        teacher.eval()
                        with torch.no_grad():
                            agreement = agreement + w * (teacher(images).argmax(1) == labels).float().mean().item()
                    print(step, agreement)
            """,
            title="the same teachers scored after the update: their outputs reach no backward, so each forward keeps a graph for nothing",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            class Learner:
                def score(self, net, states, actions):
                    net.eval()
                    logp = []
                    for s, a in zip(states, actions):
                        logp.append(F.log_softmax(net(s), -1).gather(-1, a))
                    return torch.cat(logp)

                def update(self, old_logp, new_logp, adv):
                    self.policy.train()
                    ratio = (new_logp - old_logp).exp()
                    loss = -(ratio * adv).mean()
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()

                def step(self, states, actions, adv):
                    with torch.no_grad():
                        old_logp = self.score(self.policy, states, actions)
                    for _ in range(4):
                        new_logp = self.score(self.policy, states, actions)
                        self.update(old_logp, new_logp, adv)
            """,
            title="a learner scores its policy in eval mode and hands the log-probabilities to `update()`, whose "
                  "loss is computed from them and backpropagated: a training forward, not an evaluation",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            class Learner:
                def score(self, net, states, actions):
                    net.eval()
                    logp = []
                    for s, a in zip(states, actions):
                        logp.append(F.log_softmax(net(s), -1).gather(-1, a))
                    return torch.cat(logp)

                def update(self, old_logp, new_logp, returns, states):
                    self.critic.train()
                    drift = (new_logp - old_logp).mean().item()
                    loss = F.mse_loss(self.critic(states).squeeze(-1), returns)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    return drift

                def step(self, states, actions, returns):
                    with torch.no_grad():
                        old_logp = self.score(self.policy, states, actions)
                    for _ in range(4):
                        new_logp = self.score(self.policy, states, actions)
                        self.update(old_logp, new_logp, returns, states)
            """,
            line=26,
            fixed="""
            import torch
            import torch.nn.functional as F


            class Learner:
                def score(self, net, states, actions):
                    net.eval()
                    logp = []
                    for s, a in zip(states, actions):
                        logp.append(F.log_softmax(net(s), -1).gather(-1, a))
                    return torch.cat(logp)

                def update(self, old_logp, new_logp, returns, states):
                    self.critic.train()
                    drift = (new_logp - old_logp).mean().item()
                    loss = F.mse_loss(self.critic(states).squeeze(-1), returns)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    return drift

                def step(self, states, actions, returns):
                    with torch.no_grad():
                        old_logp = self.score(self.policy, states, actions)
                    for _ in range(4):
                        with torch.no_grad():
                            new_logp = self.score(self.policy, states, actions)
                        self.update(old_logp, new_logp, returns, states)
            """,
            title="the same scoring, but `update()` only logs a drift from the log-probabilities (`.item()`) "
                  "and trains the critic: the policy's graph is kept for nothing",
        ),
        good(
            """
            import torch


            def validate(model, loader):
                model.eval()
                errors = []
                for batch in loader:
                    images = batch["image"]
                    # `target` is bound only below: the first batch raises UnboundLocalError here
                    target = target.float()
                    target = batch["target"]
                    errors.append((model(images) - target).abs().mean().item())
                return errors
            """,
            title='the forward is never reached: the loop reads a local it binds only later, and the first batch raises UnboundLocalError',
        ),
        bad(
            """
            import torch


            def validate(model, loader):
                model.eval()
                errors = []
                target = None
                for batch in loader:
                    images = batch["image"]
                    target = batch["target"] if target is None else target.float()
                    errors.append((model(images) - target).abs().mean().item())
                return errors
            """,
            line=11,
            fixed="""
            import torch


            @torch.no_grad()
            def validate(model, loader):
                model.eval()
                errors = []
                target = None
                for batch in loader:
                    images = batch["image"]
                    target = batch["target"] if target is None else target.float()
                    errors.append((model(images) - target).abs().mean().item())
                return errors
            """,
            title='the same read, of a local bound before the loop: the forward runs on every batch',
        ),
        good(
            """
            import torch
            from torch import nn
            from torch.utils.data import DataLoader


            class Surface(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.sdf = nn.Sequential(nn.Linear(3, width), nn.Softplus(), nn.Linear(width, 1))
                    self.shade = nn.Linear(6, 3)

                def slope(self, x):
                    x.requires_grad_(True)
                    d = self.sdf(x)
                    return torch.autograd.grad(d, x, torch.ones_like(d), create_graph=True)[0]

                def forward(self, x):
                    return self.shade(torch.cat([x, self.slope(x)], dim=-1))


            surface = Surface(128)
            surface.eval()
            for x in DataLoader(points, batch_size=1024):
                torch.save(surface(x).detach(), "shaded.pt")
            """,
            title="the model's forward differentiates (`torch.autograd.grad` through its own method): "
                  "the evaluation needs grad recording",
        ),
        bad(
            """
            import torch
            from torch import nn
            from torch.utils.data import DataLoader


            class Surface(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.sdf = nn.Sequential(nn.Linear(3, width), nn.Softplus(), nn.Linear(width, 1))
                    self.shade = nn.Linear(4, 3)

                def slope(self, x):
                    x.requires_grad_(True)
                    d = self.sdf(x)
                    return torch.autograd.grad(d, x, torch.ones_like(d), create_graph=True)[0]

                def forward(self, x):
                    return self.shade(torch.cat([x, self.sdf(x)], dim=-1))


            surface = Surface(128)
            surface.eval()
            for x in DataLoader(points, batch_size=1024):
                torch.save(surface(x).detach(), "shaded.pt")
            """,
            line=24,
            title="the same class, but its forward never reaches the method that differentiates",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F
            import pytorch_lightning as pl


            class Classifier(pl.LightningModule):
                def __init__(self, backbone, head):
                    super().__init__()
                    self.backbone = backbone
                    self.head = head

                def training_step(self, batch, batch_idx):
                    images, labels = batch
                    self.backbone.train()
                    loss = F.cross_entropy(self.head(self.backbone(images)), labels)
                    self.log("train_loss", loss)
                    return loss

                def validation_step(self, batch, batch_idx):
                    images, labels = batch
                    self.backbone.eval()
                    logits = self.head(self.backbone(images))
                    self.log("val_acc", (logits.argmax(-1) == labels).float().mean())

                def configure_optimizers(self):
                    return torch.optim.AdamW(self.parameters(), lr=1e-3)
            """,
            title="a LightningModule's `validation_step`: the Trainer runs it with grad recording off",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            import pytorch_lightning as pl


            class Classifier(pl.LightningModule):
                def __init__(self, backbone, head, probe_loader):
                    super().__init__()
                    self.backbone = backbone
                    self.head = head
                    self.probe_loader = probe_loader

                def training_step(self, batch, batch_idx):
                    images, labels = batch
                    self.backbone.train()
                    loss = F.cross_entropy(self.head(self.backbone(images)), labels)
                    self.log("train_loss", loss)
                    return loss

                def on_train_epoch_end(self):
                    self.backbone.eval()
                    hits = 0
                    for images, labels in self.probe_loader:
                        hits += (self.head(self.backbone(images)).argmax(-1) == labels).sum().item()
                    self.log("probe_hits", hits)

                def configure_optimizers(self):
                    return torch.optim.AdamW(self.parameters(), lr=1e-3)
            """,
            line=24,
            fixed="""
            import torch
            import torch.nn.functional as F
            import pytorch_lightning as pl


            class Classifier(pl.LightningModule):
                def __init__(self, backbone, head, probe_loader):
                    super().__init__()
                    self.backbone = backbone
                    self.head = head
                    self.probe_loader = probe_loader

                def training_step(self, batch, batch_idx):
                    images, labels = batch
                    self.backbone.train()
                    loss = F.cross_entropy(self.head(self.backbone(images)), labels)
                    self.log("train_loss", loss)
                    return loss

                @torch.no_grad()
                def on_train_epoch_end(self):
                    self.backbone.eval()
                    hits = 0
                    for images, labels in self.probe_loader:
                        hits += (self.head(self.backbone(images)).argmax(-1) == labels).sum().item()
                    self.log("probe_hits", hits)

                def configure_optimizers(self):
                    return torch.optim.AdamW(self.parameters(), lr=1e-3)
            """,
            title='the same module evaluating in `on_train_epoch_end`, a hook the Trainer runs with grad on',
        ),
        good(
            """
            import torch
            from torch.autograd import Variable
            from torchvision.utils import save_image

            preview_noise = torch.randn(16, 64)
            preview_noise = Variable(preview_noise.cuda(), volatile=True)


            def preview(generator, epoch):
                generator.eval()
                samples = generator(preview_noise)
                save_image(samples.data, "preview_%d.png" % epoch)
                generator.train()


            for epoch in range(epochs):
                for real, _ in loader:
                    loss = train_step(generator, real)
                preview(generator, epoch)
            """,
            title='legacy code: the module-level noise a sampling function reads is a `Variable(..., volatile=True)` whenever it runs',
        ),
        bad(
            """
            import torch
            from torch.autograd import Variable
            from torchvision.utils import save_image

            preview_noise = Variable(torch.randn(16, 64).cuda(), volatile=True)


            def preview(generator, epoch):
                generator.eval()
                samples = generator(preview_noise)
                save_image(samples.data, "preview_%d.png" % epoch)
                generator.train()


            preview_noise = Variable(torch.randn(16, 64).cuda())
            for epoch in range(epochs):
                for real, _ in loader:
                    loss = train_step(generator, real)
                preview(generator, epoch)
            """,
            line=19,
            fixed="""
            import torch
            from torch.autograd import Variable
            from torchvision.utils import save_image

            preview_noise = Variable(torch.randn(16, 64).cuda(), volatile=True)


            def preview(generator, epoch):
                generator.eval()
                samples = generator(preview_noise)
                save_image(samples.data, "preview_%d.png" % epoch)
                generator.train()


            preview_noise = Variable(torch.randn(16, 64).cuda())
            for epoch in range(epochs):
                for real, _ in loader:
                    loss = train_step(generator, real)
                with torch.no_grad():
                    preview(generator, epoch)
            """,
            title="the same noise rebound after the function's `def` to a plain `Variable`: the sample records a graph",
        ),
        good(
            """
            import torch
            from torch import nn


            class FrozenEmbedder(nn.Module):
                def __init__(self, encoder):
                    super().__init__()
                    self.encoder = encoder

                def encode(self, x):
                    with torch.no_grad():
                        return self.encoder(x)

                def forward(self, x):
                    x = x.float() / 255
                    return self.encode(x).flatten(1)


            def embed(model, loader):
                model.eval()
                return [model(x).cpu() for x in loader]


            embedder = FrozenEmbedder(torch.hub.load("repo", "net"))
            embed(embedder, loader)
            """,
            title='a project model whose `forward` runs its encoder inside `with torch.no_grad():` (in a method it dispatches to): the call records nothing',
        ),
        bad(
            """
            import torch
            from torch import nn


            class FrozenEmbedder(nn.Module):
                def __init__(self, encoder, width):
                    super().__init__()
                    self.encoder = encoder
                    self.project = nn.Linear(width, 128)

                def encode(self, x):
                    with torch.no_grad():
                        return self.encoder(x)

                def forward(self, x):
                    x = x.float() / 255
                    return self.project(self.encode(x).flatten(1))


            def embed(model, loader):
                model.eval()
                return [model(x).cpu() for x in loader]


            embedder = FrozenEmbedder(torch.hub.load("repo", "net"), 512)
            embed(embedder, loader)
            """,
            line=22,
            fixed="""
            import torch
            from torch import nn


            class FrozenEmbedder(nn.Module):
                def __init__(self, encoder, width):
                    super().__init__()
                    self.encoder = encoder
                    self.project = nn.Linear(width, 128)

                def encode(self, x):
                    with torch.no_grad():
                        return self.encoder(x)

                def forward(self, x):
                    x = x.float() / 255
                    return self.project(self.encode(x).flatten(1))


            @torch.no_grad()
            def embed(model, loader):
                model.eval()
                return [model(x).cpu() for x in loader]


            embedder = FrozenEmbedder(torch.hub.load("repo", "net"), 512)
            embed(embedder, loader)
            """,
            title='the same forward with a trainable projection applied outside the `no_grad` block',
        ),
    )

    def check(self, ctx):
        model = ctx.model(modes)
        reported = set()
        in_functions = set()  # the functions holding a reported forward
        direct = list(model.forwards())
        for forward in direct:
            if forward.method == "generate":  # generate() disables grad itself
                continue
            if not forward.facts or any(fact.kind != EVAL for fact in forward.facts):
                continue
            if forward.grad != frozenset({ON}):
                continue
            function = forward.function
            group = (function.node if function else None, forward.key, frozenset(f.node for f in forward.facts))
            if group in reported or not model.is_graph_free_evaluation(forward):
                continue
            if _one_off_probe(ctx, forward.call):
                continue  # a warm-up or shape probe on a made-up tensor: one graph, freed at once
            if model.grad_off_by_arguments(forward.call) is not None:
                continue  # `model(x, mode="inference")`: the branch of its forward runs under no_grad
            if forward.frozen is not None and not _input_records(ctx, forward.call):
                continue  # every parameter frozen before it, inputs that record nothing: no graph
            if ctx.model(dataflow).raises_before(forward.call) is not None:
                continue  # never reached: a read of a local not yet bound raises first
            needs = model.forward_needs_grad(forward)
            if needs is not None and needs[0]:
                continue  # its forward differentiates (`torch.autograd.grad`): no_grad would break it
            reported.add(group)
            in_functions.add(function.node if function else None)
            yield self._report(ctx, model, forward, needs)
        for forward in model.helper_forwards():
            # `self.module_.eval()` then `self.infer(x)`, a helper whose own forward is reported
            # nowhere (it also serves training, so its callers' modes join to no eval)
            if forward.method == "generate" or forward.grad != frozenset({ON}) or forward.helper is None \
                    or forward.helper.node in in_functions:
                continue
            if forward.inner is not None and ctx.model(dataflow).raises_before(forward.inner) is not None:
                continue  # the helper never reaches its forward
            if forward.inner is not None and _one_off_probe(ctx, forward.inner):
                continue  # the helper's forward runs once, on no data (`gate.forward(training=False)`)
            if forward.frozen is not None and not _input_records(ctx, forward.call) and \
                    (forward.inner is None or not _input_records(ctx, forward.inner)):
                continue  # every parameter frozen before the helper runs it, on inputs that record nothing
            function = forward.function
            group = (function.node if function else None, forward.key, frozenset(f.node for f in forward.facts))
            if group in reported or not model.is_graph_free_evaluation(forward):
                continue
            needs = model.forward_needs_grad(forward)
            if needs is not None and needs[0]:
                continue
            reported.add(group)
            yield self._report(ctx, model, forward, needs)

    def _report(self, ctx, model, forward, needs=None):
        key = display_key(forward.key)
        evidence = [mode_fact_premise(ctx, fact, key, forward.call)
                    for fact in sorted(forward.facts, key=lambda f: ctx.code_for(f.node) if f.node else "")][:2]
        evidence += [premise("grad recording is on at this forward: no `no_grad`/`inference_mode` around it, no "
                             "decorator, no caller that turns it off", forward.call, "call"),
                     evaluation_premise(ctx, model, forward)]
        if forward.helper is not None:
            evidence.append(premise(f"`{forward.helper.name}()` runs the forward of `{key}`", forward.call, "call"))
        if needs is not None:  # the class is not known, and one the project defines needs grad
            evidence.append(unknown(f"`{key}`'s forward needs no gradient: its class is not known here, and "
                                    f"`{needs[1]}` of the project computes gradients (`torch.autograd.grad`, "
                                    f"a backward, `requires_grad`)", forward.call, "construction"))
        return self.report(forward.call, self._message(ctx, forward), _fix(ctx, model, forward), evidence=evidence)

    def _message(self, ctx, forward) -> str:
        function = forward.function
        where = f"`{function.name}()`" if function is not None else "this evaluation"
        switch = sorted({ctx.code_for(f.node) for f in forward.facts if f.node is not None})
        key = display_key(forward.key)
        source = f"`{switch[0]}`" if len(switch) == 1 else f"`{key}.eval()`"
        if any(f.site is None for f in forward.facts):
            source += " in its callers"
        if forward.helper is not None:
            where += f" (through `{forward.helper.name}()`)"
        return (f"{where} runs `{key}` in eval mode ({source}) with grad recording on: "
                f"every batch builds an autograd graph and keeps its activations; wrap the evaluation "
                f"in `with torch.no_grad():` or `torch.inference_mode()`"
                + (f", or decorate `{function.name}` with `@torch.no_grad()`" if function is not None else ""))


def _input_records(ctx, call: cst.Call) -> bool:
    """An input of the forward is known to carry a graph (the output of another forward): with the
    model's parameters frozen, the forward records only through such an input."""
    flow = ctx.model(dataflow)
    return any(flow.carries_graph(arg.value) is True for arg in call.args)


def _one_off_probe(ctx, call) -> bool:
    """A forward in no loop of its function whose inputs are all synthetic tensors
    (`model(torch.zeros(1, 3, 224, 224))`), or that is handed nothing but literals
    (`masks = gate.forward(training=False)`: computed from the parameters alone): it runs once, on
    no data."""
    if not isinstance(call, cst.Call) or any(a.star for a in call.args):
        return False
    only_literals = all(_literal(a.value) for a in call.args)
    for ancestor in ctx.index.ancestors(call):
        if isinstance(ancestor, (cst.For, cst.While, cst.CompFor)):
            return False
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
            break
    if only_literals:
        return True
    scope = ctx.index.scope_at(call)
    return all(is_synthetic_tensor(a.value, scope, ctx.index.resolve) for a in call.args if a.keyword is None) \
        and any(a.keyword is None for a in call.args)


def _literal(expr) -> bool:
    """`False`, `None`, `3`, `-1.0`, `"eval"`: a value no data flows into."""
    if isinstance(expr, cst.UnaryOperation):
        expr = expr.expression
    return isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)) or \
        isinstance(expr, cst.Name) and expr.value in ("True", "False", "None")


def _fix(ctx, model, forward) -> FixSpec | None:
    """`@torch.no_grad()` on an evaluation function that computes no gradient anywhere; else
    `with torch.no_grad():` around the validation loop, or around the forward's statement when it
    sits in the block that switched to eval mode."""
    function = forward.function
    scope = model.scope_of(function)
    torch = module_name(ctx.index, scope, "torch")
    if torch is None or not forward.facts or any(fact.site is None for fact in forward.facts):
        return None  # the mode comes from callers: the helper may also be called while training
    if function is not None and function.node.asynchronous is None and isinstance(function.node, cst.FunctionDef) \
            and not model.computes_grad(function.node.body, function.scope):
        return FixSpec(f"Decorate `{function.name}` with `@{torch}.no_grad()`", safe=False,
                       lines=(before(function.node, f"@{torch}.no_grad()"),))
    target = model.evaluation_loop_of(forward.call, function)
    if target is None:
        target = line_holding(ctx.index, forward.call)
        blocks = {id(ctx.index.parent(line_holding(ctx.index, fact.site) or fact.site)) for fact in forward.facts}
        if target is None or id(ctx.index.parent(target)) not in blocks:
            return None
    if model.computes_grad(target, scope):
        return None
    code = wrap_in(ctx.module, target, f"with {torch}.no_grad():")
    if code is None:
        return None
    return FixSpec(f"Run the evaluation under `with {torch}.no_grad():`", safe=False, lines=(rewrite(target, code),))
