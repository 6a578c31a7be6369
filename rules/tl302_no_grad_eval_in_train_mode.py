"""TL302 no-grad-eval-in-train-mode."""

from __future__ import annotations

from trainlint.finding import Severity
from trainlint.gate import defines, loops_over, named, refers_to
from trainlint.model.built_modes import built_in_eval, calls_train
from trainlint.model.grad_mode import GRAD_OFF_CONTEXTS, GRAD_SETTERS
from trainlint.model.layers import DEPENDENT, FREE
from trainlint.model.mode_names import display_key
from trainlint.model.mode_state import CHOSEN, NEW, OFF, RESTORE, TRAIN, TRAINED, TRAINING_KINDS
from trainlint.model.modes import EVAL_LOADER_TEXT, is_evaluation_name, modes
from trainlint.rule import Rule, bad, good
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import evaluation_premise, grad_off_site, mode_fact_premise


class NoGradEvalInTrainMode(Rule):
    code = "TL302"
    name = "no-grad-eval-in-train-mode"
    severity = Severity.WARNING
    summary = "An evaluation under `no_grad`/`inference_mode` with the model still in train mode"
    message = "evaluation under no_grad runs the model in train mode"
    triggers = ("no_grad", "inference_mode", "set_grad_enabled")
    # grad off comes only from these; an evaluation is a function named so or a loop over a
    # validation/test loader, a pass that measures a forward's output (an accuracy's `argmax`/`eq`,
    # a loss read with `.item()`), or a helper a call runs with `set_grad_enabled(<flag>)` set False
    _flag_run = refers_to(*GRAD_SETTERS) & named("^False$")
    gate = refers_to(*GRAD_OFF_CONTEXTS, *GRAD_SETTERS) & (
        defines(is_evaluation_name) | loops_over(EVAL_LOADER_TEXT) | named("^(argmax|item|eq)$")) | _flag_run
    imported_triggers = ("loader", "Loader")  # a no-grad decorator from a helper, an evaluation loop here
    imported_gate = defines(is_evaluation_name) | loops_over(EVAL_LOADER_TEXT) | named("^(argmax|item|eq)$") | \
        _flag_run
    what_it_does = """
        Finds evaluations (a loop over a validation/test loader, a function named as an
        evaluation, or a pass that measures the forward's output: compares it with `==`, an
        accuracy, or hands it to a torch loss, with no backward in it; the names are hints, the
        measuring is proof) that run a model's forward under `torch.no_grad()`,
        `torch.inference_mode()`, `torch.set_grad_enabled(False)` or a grad-disabling decorator
        while that model is known to be in train mode: `model.train()` was the last switch on the
        way there (in the function or in every same-file caller), the model was just built, or the
        caller has been training it and nothing called `model.eval()`. Forwards under `no_grad`
        that are part of training (an EMA or frozen teacher, DQN target values, a bootstrap value)
        are not evaluations and are left alone. A function that trains and evaluates by a flag
        (`with torch.set_grad_enabled(train):`, the backward under `if train:`) is an evaluation for
        a same-file call that passes `train=False`, with what that caller knows about the model.
        Reported at the first forward of that model in the evaluation.

        Only modules whose mode changes what they compute count. A module is left alone when
        every construction of it that the file shows builds a mode-free one: a torch.nn loss
        (`nn.CrossEntropyLoss()`, `nn.BCEWithLogitsLoss()`, ...) or layer without dropout/batch
        statistics (`nn.Linear`, `nn.GroupNorm`, `nn.LayerNorm`, ...), or an `nn.Module` subclass of
        this file or another project file that builds only such layers and never reads
        `self.training`, or a factory function of the project whose every return builds such a
        module (`return Net(width)`, `net = Net(w); return net.to(device)`). A class imported
        from a package outside the project (its source is not there to read) is left alone too,
        unless its family is known to hold dropout or BatchNorm (torchvision and timm models,
        transformers, segmentation_models_pytorch, torch.nn Dropout/BatchNorm/RNN/Transformer
        layers): a quiet miss on an unknown library model is preferred to a warning that is false
        for the GroupNorm-only, dropout-0 models common in diffusion code. A parameter is judged by
        what its callers pass: the same-file callers' constructions, or, when none is in the file,
        what the project's other files build and pass (`Fitter().fit(model)` in run.py with
        `model = MatrixFactorization(...)`, Embedding and Linear only: not reported). That the
        model holds dropout or batch statistics is a required premise, proven by a construction:
        a torch.nn Dropout/BatchNorm/RNN/Transformer layer in it (through `nn.Sequential`,
        `nn.ModuleDict` members, project classes and factories, the instance a class is handed
        in `__init__`), or a family known for them. A model whose construction is not seen (a
        parameter no caller shows, a factory's tuple, a class whose layers come from a library the
        project cannot see into, such as a graph network's convolutions) makes the finding
        unproven: reported only with `--include-unproven`. On the judged findings of five rounds of
        unseen repositories, 8 of 10 TL302 findings were false, most of them models of that kind
        (a graph network's layers judged as if they held dropout). "Just built" and "trained by its caller" mean
        train mode only for a module built in it: one a framework loader hands back in eval mode
        (Transformers' `from_pretrained`, the framework data's `eval_built`), followed through
        names, parameters and the file's factories, is left alone while the file calls no
        `.train()`. A pass that asks a torchvision detection model for its losses
        (`model(images, targets)`, directly or through a project class whose forward hands it the
        targets) is left alone too: those models return their losses only in train mode (in eval
        mode, their detections), so the held-out loss needs train mode; when the model's class is
        chosen at run time (`getattr(models, name)(...)`) and may be such a class, the premise that
        eval mode suits the pass is unknown (reported with `--include-unproven`).
        """
    why_bad = """
        `no_grad()` only stops autograd from recording; it does not change how modules behave.
        In train mode dropout still zeroes activations at random and BatchNorm normalises with
        the statistics of the evaluation batch and updates its running mean and variance with
        them. The validation score then changes from run to run, is worse than the model's real
        score, and evaluating silently mutates the model that training continues from (and that
        is saved as "best"). The two switches are independent; an evaluation needs both
        `model.eval()` and `no_grad()`/`inference_mode()`.
        """
    references = (
        "https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval",
        "https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation",
        "https://pytorch.org/docs/stable/generated/torch.nn.BatchNorm2d.html (running statistics in training mode)",
        "https://pytorch.org/docs/stable/generated/torch.nn.Dropout.html",
    )
    examples = (
        good(
            """
            import torch
            import torch.nn.functional as F


            class Finetuner:
                def __init__(self, net, optimizer, train_loader, val_loader):
                    self.net = net
                    self.optimizer = optimizer
                    self.train_loader = train_loader
                    self.val_loader = val_loader

                def fit(self, epochs):
                    for epoch in range(epochs):
                        self.net.head.train()
                        for xb, yb in self.train_loader:
                            self.optimizer.zero_grad()
                            F.mse_loss(self.net.head(self.net.body(xb)), yb).backward()
                            self.optimizer.step()
                        self.net.eval()
                        err = 0.0
                        for xb, yb in self.val_loader:
                            with torch.no_grad():
                                err += F.mse_loss(self.net.head(self.net.body(xb)), yb).item()
                        print(epoch, err)
            """,
            title="the part trained in train mode, then its holder switched to eval (a module's `eval()` "
                  "recurses into its parts) before the no_grad evaluation",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            class Finetuner:
                def __init__(self, net, optimizer, train_loader, val_loader):
                    self.net = net
                    self.optimizer = optimizer
                    self.train_loader = train_loader
                    self.val_loader = val_loader

                def fit(self, epochs):
                    for epoch in range(epochs):
                        self.net.eval()
                        self.net.head.train()
                        for xb, yb in self.train_loader:
                            self.optimizer.zero_grad()
                            F.mse_loss(self.net.head(self.net.body(xb)), yb).backward()
                            self.optimizer.step()
                        err = 0.0
                        for xb, yb in self.val_loader:
                            with torch.no_grad():
                                err += F.mse_loss(self.net.head(self.net.body(xb)), yb).item()
                        print(epoch, err)


            def main(train_loader, val_loader):
                net = torch.nn.ModuleDict({
                    "body": torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU()),
                    "head": torch.nn.Sequential(torch.nn.Dropout(0.3), torch.nn.Linear(64, 1)),
                })
                Finetuner(net, torch.optim.SGD(net.parameters(), lr=0.1), train_loader, val_loader).fit(10)
            """,
            line=23,
            title="the holder switched to eval before the part's `train()`: the part is evaluated in train mode",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            import torchvision


            def evaluate(model, loader):
                correct = 0
                with torch.no_grad():
                    for xb, yb in loader:
                        correct += (model(xb).argmax(-1) == yb).sum().item()
                return correct


            def train(model, optimizer, train_loader, val_loader, epochs):
                for epoch in range(epochs):
                    model.train()
                    for xb, yb in train_loader:
                        optimizer.zero_grad()
                        F.cross_entropy(model(xb), yb).backward()
                        optimizer.step()
                    print(epoch, evaluate(model, val_loader))


            def main(train_loader, val_loader):
                model = torchvision.models.resnet18(num_classes=10)
                train(model, torch.optim.SGD(model.parameters(), lr=0.1), train_loader, val_loader, 90)
            """,
            line=10,
            title="evaluate() under no_grad, called right after training",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            class Trainer:
                def __init__(self, model, optimizer, train_loader, val_loader):
                    self.model = model
                    self.optimizer = optimizer
                    self.train_loader = train_loader
                    self.val_loader = val_loader

                @torch.no_grad()
                def validate(self):
                    losses = [F.cross_entropy(self.model(x), y).item() for x, y in self.val_loader]
                    return sum(losses) / len(losses)

                def fit(self, epochs):
                    self.model.train()
                    for epoch in range(epochs):
                        for x, y in self.train_loader:
                            self.optimizer.zero_grad()
                            F.cross_entropy(self.model(x), y).backward()
                            self.optimizer.step()
                        print(self.validate())


            def main(train_loader, val_loader):
                model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.Dropout(0.5), torch.nn.Linear(256, 10))
                Trainer(model, torch.optim.Adam(model.parameters()), train_loader, val_loader).fit(20)
            """,
            line=14,
            title="a Trainer's @torch.no_grad() validate() without eval()",
        ),
        bad(
            """
            import torch
            import torch.nn as nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 10))

                def forward(self, x):
                    return self.body(x)


            model = Net()
            model.load_state_dict(torch.load("best.pt", map_location="cpu", weights_only=True))
            with torch.inference_mode():
                for xb, yb in test_loader:
                    print(model(xb).argmax(-1).eq(yb).float().mean().item())
            """,
            line=18,
            title="a freshly built model is in train mode",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            import timm

            model = timm.create_model("resnet50", num_classes=100)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            for epoch in range(num_epochs):
                model.train()
                for xb, yb in train_loader:
                    optimizer.zero_grad()
                    F.cross_entropy(model(xb), yb).backward()
                    optimizer.step()
                val_loss = 0.0
                with torch.no_grad():
                    for xb, yb in val_loader:
                        val_loss += F.cross_entropy(model(xb), yb, reduction="sum").item()
            """,
            line=16,
            title="validation loop inlined after the epoch",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            import torchvision


            @torch.inference_mode()
            def validation_epoch(model, loader):
                return sum(F.cross_entropy(model(x), y, reduction="sum").item() for x, y in loader)


            def main(model, train_loader, val_loader):
                optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
                for epoch in range(10):
                    for x, y in train_loader:
                        optimizer.zero_grad()
                        F.cross_entropy(model(x), y).backward()
                        optimizer.step()
                    print(validation_epoch(model, val_loader))


            if __name__ == "__main__":
                main(torchvision.models.efficientnet_b0(num_classes=5), train_loader, val_loader)
            """,
            line=8,
            title="no train() call anywhere: the model trains in its default train mode",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            @torch.inference_mode()
            def validation_epoch(model, loader):
                return sum(F.cross_entropy(model(x), y, reduction="sum").item() for x, y in loader)


            def main(model, train_loader, val_loader):
                optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
                for epoch in range(10):
                    for x, y in train_loader:
                        optimizer.zero_grad()
                        F.cross_entropy(model(x), y).backward()
                        optimizer.step()
                    print(validation_epoch(model, val_loader))
            """,
            title="the same evaluation of a model handed in that nothing in sight builds: whether it holds "
                  "dropout or batch norm at all is not shown (a graph network's convolutions, a GroupNorm-only "
                  "net compute the same in both modes), so the finding is unproven and not reported by default",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            def evaluate(model, loader):
                model.eval()
                correct = 0
                with torch.no_grad():
                    for xb, yb in loader:
                        correct += (model(xb).argmax(-1) == yb).sum().item()
                return correct


            def train(model, optimizer, train_loader, val_loader, epochs):
                for epoch in range(epochs):
                    model.train()
                    for xb, yb in train_loader:
                        optimizer.zero_grad()
                        F.cross_entropy(model(xb), yb).backward()
                        optimizer.step()
                    print(epoch, evaluate(model, val_loader))
            """,
            title="evaluate() switches to eval mode itself",
        ),
        good(
            """
            import torch


            @torch.no_grad()
            def evaluate(model, loader):
                return [model(xb).argmax(-1) for xb, _ in loader]


            def report(model, val_loader, test_loader):
                model.eval()
                val = evaluate(model, val_loader)
                test = evaluate(model, test_loader)
                model.train()
                return val, test
            """,
            title="evaluate() without eval(), but every caller calls model.eval() first",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F

            model.train()
            for xb, yb in train_loader:
                with torch.no_grad():
                    soft_targets = F.softmax(teacher(xb) / 2.0, dim=-1)
                loss = F.kl_div(F.log_softmax(model(xb) / 2.0, dim=-1), soft_targets, reduction="batchmean")
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                with torch.no_grad():
                    for ema_p, p in zip(ema_model.parameters(), model.parameters()):
                        ema_p.lerp_(p, 0.001)
            """,
            title="no_grad forwards that are part of training (frozen teacher, EMA update)",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F

            policy_net.train()
            for step in range(num_steps):
                state, action, reward, next_state, done = replay.sample(batch_size)
                with torch.no_grad():
                    next_q = target_net(next_state).max(1).values
                    target = reward + gamma * next_q * (1 - done)
                q = policy_net(state).gather(1, action.unsqueeze(1)).squeeze(1)
                loss = F.smooth_l1_loss(q, target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
            title="DQN target values under no_grad",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            def self_training_epoch(model, optimizer, unlabeled, augment):
                model.train()
                for x in unlabeled:
                    with torch.no_grad():
                        targets = model(x).argmax(-1)
                    loss = F.cross_entropy(model(augment(x)), targets)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            title="pseudo-labels taken under no_grad in train mode feed the training loss: part of training",
        ),
        good(
            """
            import torch


            def recalibrate_then_score(model, loader):
                model.train()
                with torch.no_grad():
                    for x, _ in loader:
                        model(x)
                model.eval()
                with torch.no_grad():
                    return sum((model(x).argmax(-1) == y).sum().item() for x, y in loader)
            """,
            title="BatchNorm statistics refreshed in train mode under no_grad, then scored in eval mode",
        ),
        good(
            """
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained("gpt2")
            model = AutoModelForCausalLM.from_pretrained("gpt2")
            model.eval()
            with torch.no_grad():
                for prompt in test_prompts:
                    ids = tokenizer(prompt, return_tensors="pt").input_ids
                    print(tokenizer.decode(model.generate(ids, max_new_tokens=20)[0]))
            """,
            title="generate() under no_grad with model.eval() earlier",
        ),
        good(
            """
            import torch


            def evaluate(model, loader):
                was_training = model.training
                model.eval()
                with torch.inference_mode():
                    scores = [model(xb).softmax(-1) for xb, _ in loader]
                model.train(was_training)
                return scores
            """,
            title="restoring the saved mode",
        ),
        good(
            """
            import torch


            def evaluate_mc_dropout(model, loader, samples=20):
                model.train()  # Monte Carlo dropout: train mode on purpose
                with torch.no_grad():
                    return [torch.stack([model(x).softmax(-1) for _ in range(samples)]).mean(0) for x, _ in loader]
            """,
            title="train mode chosen inside the evaluation itself (MC dropout)",
        ),
        good(
            """
            import torch

            model = load_model("checkpoint.pt")
            with torch.no_grad():
                for xb, _ in test_loader:
                    print(model(xb).argmax(-1))
            """,
            title="an inference script that never trains (the model's mode is not known here)",
        ),
        good(
            """
            import torch
            import torch.nn as nn


            @torch.no_grad()
            def evaluate(model, criterion, loader):
                model.eval()
                total, count = 0.0, 0
                for images, targets in loader:
                    total += criterion(model(images), targets).item() * targets.size(0)
                    count += targets.size(0)
                model.train()
                return total / count


            def main(model, train_loader, val_loader, epochs):
                criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                for epoch in range(epochs):
                    for images, targets in train_loader:
                        optimizer.zero_grad()
                        criterion(model(images), targets).backward()
                        optimizer.step()
                    print(epoch, evaluate(model, criterion, val_loader))
            """,
            title="a loss criterion in its default train mode (a loss has no mode-dependent layers)",
        ),
        good(
            """
            import torch
            import torch.nn as nn
            import torch.nn.functional as F


            class FocalLoss(nn.Module):
                def __init__(self, gamma=2.0, weight=None):
                    super().__init__()
                    self.gamma = gamma
                    self.register_buffer("weight", torch.as_tensor(weight) if weight is not None else None)

                def forward(self, logits, target):
                    ce = F.cross_entropy(logits, target, weight=self.weight, reduction="none")
                    return ((1 - torch.exp(-ce)) ** self.gamma * ce).mean()


            class Trainer:
                def __init__(self, model, optimizer, train_loader, val_loader):
                    self.model = model
                    self.criterion = FocalLoss(gamma=2.0)
                    self.optimizer = optimizer
                    self.train_loader = train_loader
                    self.val_loader = val_loader

                def validate(self):
                    self.model.eval()
                    with torch.no_grad():
                        losses = [self.criterion(self.model(x), y).item() for x, y in self.val_loader]
                    return sum(losses) / len(losses)

                def fit(self, epochs):
                    for epoch in range(epochs):
                        self.model.train()
                        self.criterion.train()
                        for x, y in self.train_loader:
                            self.optimizer.zero_grad()
                            self.criterion(self.model(x), y).backward()
                            self.optimizer.step()
                        print(epoch, self.validate())
            """,
            title="a project loss class without dropout/BatchNorm, switched with train() by its Trainer",
        ),
        good(
            """
            import torch
            from diffusers import UNet2DModel


            def train(loader, val_loader, epochs):
                unet = UNet2DModel(sample_size=64, in_channels=3, out_channels=3, norm_num_groups=32)
                optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-4)
                for epoch in range(epochs):
                    unet.train()
                    for noisy, t, noise in loader:
                        loss = torch.nn.functional.mse_loss(unet(noisy, t).sample, noise)
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                    with torch.no_grad():
                        val = 0.0
                        for x, t, n in val_loader:
                            val += torch.nn.functional.mse_loss(unet(x, t).sample, n).item()
                    print(epoch, val)
            """,
            title="a library model whose layers are not known to depend on the mode (diffusers UNet: GroupNorm, dropout 0)",
        ),
        good(
            """
            import torch
            import torch.nn as nn


            class Block(nn.Module):
                def __init__(self, channels):
                    super().__init__()
                    self.conv = nn.Conv2d(channels, channels, 3, padding=1)
                    self.norm = nn.GroupNorm(8, channels)
                    self.act = nn.SiLU()

                def forward(self, x):
                    return x + self.act(self.norm(self.conv(x)))


            class Denoiser(nn.Module):
                def __init__(self, channels=64, depth=4):
                    super().__init__()
                    self.stem = nn.Conv2d(3, channels, 3, padding=1)
                    self.blocks = nn.Sequential(*[Block(channels) for _ in range(depth)])
                    self.head = nn.Conv2d(channels, 3, 3, padding=1)

                def forward(self, x):
                    return self.head(self.blocks(self.stem(x)))


            def fit(loader, val_loader, epochs):
                model = Denoiser()
                opt = torch.optim.Adam(model.parameters(), lr=2e-4)
                for epoch in range(epochs):
                    model.train()
                    for noisy, clean in loader:
                        opt.zero_grad()
                        (model(noisy) - clean).pow(2).mean().backward()
                        opt.step()
                    with torch.no_grad():
                        for noisy, clean in val_loader:
                            print((model(noisy) - clean).pow(2).mean().item())
            """,
            title="a same-file GroupNorm-only network: train and eval mode compute the same",
        ),
        bad(
            """
            import torch
            import torchvision


            def train(loader, val_loader, epochs):
                net = torchvision.models.resnet18(num_classes=10)
                optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
                for epoch in range(epochs):
                    net.train()
                    for x, y in loader:
                        optimizer.zero_grad()
                        torch.nn.functional.cross_entropy(net(x), y).backward()
                        optimizer.step()
                    with torch.no_grad():
                        correct = 0
                        for x, y in val_loader:
                            correct += (net(x).argmax(1) == y).sum().item()
                    print(epoch, correct)
            """,
            line=17,
            title="a torchvision model (BatchNorm) evaluated in train mode",
        ),
        good(
            """
            import torch
            from accelerate import Accelerator
            from diffusers import AutoencoderKL


            @torch.no_grad()
            def log_validation(vae, accelerator, images):
                vae = accelerator.unwrap_model(vae)
                return [vae(image[None]).sample for image in images]


            def main(args, train_dataloader, validation_images):
                accelerator = Accelerator(mixed_precision=args.mixed_precision)
                vae = AutoencoderKL.from_pretrained(args.pretrained_model, subfolder="vae")
                optimizer = torch.optim.AdamW(vae.parameters(), lr=args.learning_rate)
                vae, optimizer, train_dataloader = accelerator.prepare(vae, optimizer, train_dataloader)
                for epoch in range(args.epochs):
                    vae.train()
                    for step, batch in enumerate(train_dataloader):
                        reconstruction = vae(batch["pixel_values"]).sample
                        loss = torch.nn.functional.mse_loss(reconstruction, batch["pixel_values"])
                        accelerator.backward(loss)
                        optimizer.step()
                        optimizer.zero_grad()
                        if step % args.validation_steps == 0:
                            log_validation(vae, accelerator, validation_images)
            """,
            title="a diffusers VAE (GroupNorm, no dropout) validated in train mode through unwrap_model and accelerator.prepare",
        ),
        bad(
            """
            import torch
            import torch.nn as nn

            class Tagger(nn.Module):
                def __init__(self, vocab, tags):
                    super().__init__()
                    self.embed = nn.Embedding(vocab, 64)
                    self.dropout = nn.Dropout(0.3)
                    self.out = nn.Linear(64, tags)

                def forward(self, tokens):
                    return self.out(self.dropout(self.embed(tokens)))

            def one_pass(net, batches, opt, learn):
                total = 0.0
                with torch.set_grad_enabled(learn):
                    for tokens, tags in batches:
                        loss = nn.functional.cross_entropy(net(tokens).flatten(0, 1), tags.flatten())
                        if learn:
                            opt.zero_grad()
                            loss.backward()
                            opt.step()
                        total += loss.item()
                return total

            def main(train_batches, dev_batches):
                net = Tagger(5000, 17)
                opt = torch.optim.Adam(net.parameters())
                for epoch in range(20):
                    one_pass(net, train_batches, opt, learn=True)
                    print(one_pass(net, dev_batches, opt, learn=False))
            """,
            line=18,
            title="one function for training and evaluation, run with set_grad_enabled(False) on a model never put in eval()",
        ),
        good(
            """
            import torch
            import torch.nn as nn

            class Tagger(nn.Module):
                def __init__(self, vocab, tags):
                    super().__init__()
                    self.embed = nn.Embedding(vocab, 64)
                    self.dropout = nn.Dropout(0.3)
                    self.out = nn.Linear(64, tags)

                def forward(self, tokens):
                    return self.out(self.dropout(self.embed(tokens)))

            def one_pass(net, batches, opt, learn):
                net.train(learn)
                total = 0.0
                with torch.set_grad_enabled(learn):
                    for tokens, tags in batches:
                        loss = nn.functional.cross_entropy(net(tokens).flatten(0, 1), tags.flatten())
                        if learn:
                            opt.zero_grad()
                            loss.backward()
                            opt.step()
                        total += loss.item()
                return total

            def main(train_batches, dev_batches):
                net = Tagger(5000, 17)
                opt = torch.optim.Adam(net.parameters())
                for epoch in range(20):
                    one_pass(net, train_batches, opt, learn=True)
                    print(one_pass(net, dev_batches, opt, learn=False))
            """,
            title="the shared pass sets the mode from the same flag (net.train(learn))",
        ),
        bad(
            """
            import torch
            from torch import nn

            nets = nn.ModuleDict({"encoder": nn.Sequential(nn.Linear(32, 32), nn.Dropout(0.2)),
                                  "head": nn.Linear(32, 4)})
            optimizer = torch.optim.AdamW(nets.parameters(), lr=1e-3)

            for epoch in range(30):
                nets.encoder.train()
                nets.head.train()
                for x, y in train_loader:
                    loss = nn.functional.cross_entropy(nets.head(nets.encoder(x)), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                for name in nets:
                    if name == "head":
                        nets[name].eval()
                with torch.no_grad():
                    for x, y in val_loader:
                        features = nets.encoder(x)
            """,
            line=21,
            title="a loop over the container switches only the members a condition picks: the encoder stays in train mode",
        ),
        good(
            """
            import torch
            from torch import nn

            nets = nn.ModuleDict({"encoder": nn.Sequential(nn.Linear(32, 32), nn.Dropout(0.2)),
                                  "head": nn.Linear(32, 4)})
            optimizer = torch.optim.AdamW(nets.parameters(), lr=1e-3)

            for epoch in range(30):
                nets.encoder.train()
                nets.head.train()
                for x, y in train_loader:
                    loss = nn.functional.cross_entropy(nets.head(nets.encoder(x)), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                _ = [nets[name].eval() for name in nets]
                with torch.no_grad():
                    for x, y in val_loader:
                        features = nets.encoder(x)
            """,
            title="every member of the container put in eval mode by a comprehension over its keys",
        ),
        good(
            """
            import torch
            from torch import nn

            generator = nn.Sequential(nn.Linear(16, 64), nn.Dropout(0.1), nn.Linear(64, 16))
            critic = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.Linear(64, 1))
            opt = torch.optim.Adam([*generator.parameters(), *critic.parameters()])

            def validate(loader):
                for net in (generator, critic):
                    net.eval()
                with torch.no_grad():
                    return sum(critic(generator(z)).mean().item() for z in loader)

            for epoch in range(5):
                generator.train()
                critic.train()
                for z in train_batches:
                    loss = critic(generator(z)).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                print(validate(val_batches))
            """,
            title="each network of a literal tuple put in eval mode by a loop",
        ),
        bad(
            """
            import torch
            from torch import nn


            class MLP(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.up = nn.Linear(width, 4 * width)
                    self.act = nn.Sequential(nn.GELU(), nn.Dropout(0.1))
                    self.down = nn.Linear(4 * width, width)

                def forward(self, x):
                    return self.down(self.act(self.up(x)))


            class Block(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.norm = nn.LayerNorm(width)
                    self.mlp = MLP(width)

                def forward(self, x):
                    return x + self.mlp(self.norm(x))


            class TinyLM(nn.Module):
                def __init__(self, vocab, width, depth):
                    super().__init__()
                    self.body = nn.ModuleDict(dict(
                        embed=nn.Embedding(vocab, width),
                        blocks=nn.ModuleList([Block(width) for _ in range(depth)]),
                        norm=nn.LayerNorm(width),
                    ))
                    self.head = nn.Linear(width, vocab, bias=False)

                def forward(self, tokens):
                    x = self.body.embed(tokens)
                    for block in self.body.blocks:
                        x = block(x)
                    return self.head(self.body.norm(x))


            model = TinyLM(50304, 768, 12)
            optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
            for step in range(1000):
                for x, y in train_loader:
                    loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                with torch.no_grad():
                    for x, y in val_loader:
                        val_loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
            """,
            line=53,
            title="dropout three classes deep (a block's MLP, in a ModuleList, in a ModuleDict) stays on in the evaluation",
        ),
        good(
            """
            import torch
            from torch import nn


            class MLP(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.up = nn.Linear(width, 4 * width)
                    self.act = nn.GELU()
                    self.down = nn.Linear(4 * width, width)

                def forward(self, x):
                    return self.down(self.act(self.up(x)))


            class Block(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.norm = nn.LayerNorm(width)
                    self.mlp = MLP(width)

                def forward(self, x):
                    return x + self.mlp(self.norm(x))


            class TinyLM(nn.Module):
                def __init__(self, vocab, width, depth):
                    super().__init__()
                    self.body = nn.ModuleDict(dict(
                        embed=nn.Embedding(vocab, width),
                        blocks=nn.ModuleList([Block(width) for _ in range(depth)]),
                        norm=nn.LayerNorm(width),
                    ))
                    self.head = nn.Linear(width, vocab, bias=False)

                def forward(self, tokens):
                    x = self.body.embed(tokens)
                    for block in self.body.blocks:
                        x = block(x)
                    return self.head(self.body.norm(x))


            model = TinyLM(50304, 768, 12)
            optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
            for step in range(1000):
                for x, y in train_loader:
                    loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                with torch.no_grad():
                    for x, y in val_loader:
                        val_loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
            """,
            title="a model whose classes nest containers and blocks of Linear/LayerNorm/GELU only: its mode changes nothing",
        ),
        good(
            """
            import torch
            from torch import nn


            class Mixer(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.inp = nn.Conv1d(width, width, 1)
                    self.act = nn.SiLU()
                    self.out = nn.Conv1d(width, width, 1)

                def forward(self, x):
                    return self.out(self.act(self.inp(x)))


            def make_net(width=64):
                net = Mixer(width)
                return net


            def fit(net, data, opt):
                net.train()
                for x, y in data:
                    loss = (net(x) - y).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()


            def validate(net, data):
                total = 0.0
                with torch.no_grad():
                    for x, y in data:
                        total += (net(x).argmax(1) == y).sum().item()
                return total


            net = make_net().cuda()
            opt = torch.optim.Adam(net.parameters())
            for epoch in range(10):
                fit(net, train_loader, opt)
                print(validate(net, val_loader))
            """,
            title="a factory function whose every return builds a Conv1d/SiLU-only class: its mode changes nothing",
        ),
        bad(
            """
            import torch
            from torch import nn


            class Mixer(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.inp = nn.Conv1d(width, width, 1)
                    self.act = nn.SiLU()
                    self.out = nn.Conv1d(width, width, 1)

                def forward(self, x):
                    return self.out(self.act(self.inp(x)))


            def make_net(width=64, drop=0.1):
                if drop:
                    return nn.Sequential(Mixer(width), nn.Dropout(drop))
                net = Mixer(width)
                return net


            def fit(net, data, opt):
                net.train()
                for x, y in data:
                    loss = (net(x) - y).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()


            def validate(net, data):
                total = 0.0
                with torch.no_grad():
                    for x, y in data:
                        total += (net(x).argmax(1) == y).sum().item()
                return total


            net = make_net().cuda()
            opt = torch.optim.Adam(net.parameters())
            for epoch in range(10):
                fit(net, train_loader, opt)
                print(validate(net, val_loader))
            """,
            line=36,
            title="a factory that may add dropout (one return builds nn.Dropout): the evaluation runs with it on",
        ),
        good(
            """
            import torch
            from transformers import AutoConfig, AutoModelForSequenceClassification


            def load_pair(name):
                tuned = AutoModelForSequenceClassification.from_pretrained(name)
                scratch = AutoModelForSequenceClassification.from_config(AutoConfig.from_pretrained(name))
                return tuned.to("cuda"), scratch


            def accuracy(net, batches):
                hits = 0
                with torch.no_grad():
                    for batch in batches:
                        hits += (net(**batch).logits.argmax(-1) == batch["labels"]).sum().item()
                return hits


            def main():
                net, _ = load_pair("bert-base-uncased")
                optimizer = torch.optim.AdamW(net.parameters(), lr=2e-5)
                for epoch in range(3):
                    for batch in train_batches:
                        loss = net(**batch).loss
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                    print(accuracy(net, val_batches))
            """,
            title="a model `from_pretrained` hands back in eval mode (through a factory's tuple), trained with no `train()` in the file: it is not in train mode",
        ),
        good(
            """
            import torch
            from transformers import AutoConfig, AutoModelForSequenceClassification


            def load_pair(name):
                tuned = AutoModelForSequenceClassification.from_pretrained(name)
                scratch = AutoModelForSequenceClassification.from_config(AutoConfig.from_pretrained(name))
                return tuned.to("cuda"), scratch


            def accuracy(net, batches):
                hits = 0
                with torch.no_grad():
                    for batch in batches:
                        hits += (net(**batch).logits.argmax(-1) == batch["labels"]).sum().item()
                return hits


            def main():
                _, net = load_pair("bert-base-uncased")
                optimizer = torch.optim.AdamW(net.parameters(), lr=2e-5)
                for epoch in range(3):
                    for batch in train_batches:
                        loss = net(**batch).loss
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                    print(accuracy(net, val_batches))
            """,
            title="the other element of the same factory's tuple, built by `from_config` in train mode: what the "
                  "unpacked element is built as is not followed through the tuple, so that it holds dropout is "
                  "unproven (reported with --include-unproven)",
        ),
        good(
            """
            import torch
            import torchvision
            from torch import nn


            class CellDetector(nn.Module):
                def __init__(self, classes):
                    super().__init__()
                    self.rcnn = torchvision.models.detection.maskrcnn_resnet50_fpn(num_classes=classes)

                def forward(self, images, targets=None):
                    return self.rcnn(images, targets)


            def run_epoch(net, opt, loader, learn):
                total = 0.0
                with torch.set_grad_enabled(learn):
                    for images, targets in loader:
                        loss = sum(net(images, targets).values())
                        if learn:
                            opt.zero_grad()
                            loss.backward()
                            opt.step()
                        total += loss.item()
                return total


            def fit(train_loader, val_loader, epochs):
                net = CellDetector(2)
                opt = torch.optim.SGD(net.parameters(), lr=0.005, momentum=0.9)
                net.train()
                for epoch in range(epochs):
                    run_epoch(net, opt, train_loader, True)
                    print(epoch, run_epoch(net, opt, val_loader, False))
            """,
            title="the held-out loss of a torchvision detection model (handed the targets through a wrapper's "
                  "forward): it returns its losses only in train mode, so the pass needs that mode",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            from torch import nn


            class CellSegmenter(nn.Module):
                def __init__(self, classes):
                    super().__init__()
                    self.body = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                              nn.Conv2d(32, classes, 1))

                def forward(self, images, targets=None):
                    logits = self.body(images)
                    if targets is None:
                        return logits
                    return {"loss_mask": F.cross_entropy(logits, targets)}


            def run_epoch(net, opt, loader, learn):
                total = 0.0
                with torch.set_grad_enabled(learn):
                    for images, targets in loader:
                        loss = sum(net(images, targets).values())
                        if learn:
                            opt.zero_grad()
                            loss.backward()
                            opt.step()
                        total += loss.item()
                return total


            def fit(train_loader, val_loader, epochs):
                net = CellSegmenter(2)
                opt = torch.optim.SGD(net.parameters(), lr=0.005, momentum=0.9)
                net.train()
                for epoch in range(epochs):
                    run_epoch(net, opt, train_loader, True)
                    print(epoch, run_epoch(net, opt, val_loader, False))
            """,
            line=23,
            title="the same call and loss dict from a model that computes its loss itself in either mode: its "
                  "BatchNorm still normalises the held-out batches with their own statistics",
        ),
    )

    def check(self, ctx):
        model = ctx.model(modes)
        reported = set()
        for forward in model.forwards():
            if forward.grad != frozenset({OFF}):
                continue
            # facts are a set: the one the message names is chosen by what they say, not by hash order
            training = sorted((f for f in forward.facts if f.kind in TRAINING_KINDS),
                              key=lambda f: (f.kind, f.via or "", ctx.code_for(f.node) if f.node is not None else ""))
            if not training or any(f.kind in (RESTORE, CHOSEN) for f in forward.facts):
                continue
            function = forward.function
            group = (function.node if function else None, forward.key)
            if group in reported:
                continue
            region = model.no_grad_evaluation_region(forward)
            if region is None:
                continue
            # `model.train()` inside the evaluation itself is deliberate (MC dropout, BatchNorm
            # recalibration); only a train mode that comes from outside is a forgotten eval()
            training = [f for f in training if not (f.kind == TRAIN and model.contains(region, f.site))]
            if not training:
                continue
            receiver = forward.call.func.value if forward.method else forward.call.func
            # "just built" or "trained by a caller" is train mode only for a module built in train
            # mode: one a loader hands back in eval mode (`from_pretrained`) stays there while no
            # `.train()` of the file can switch it
            if all(f.kind in (NEW, TRAINED) for f in training) and not calls_train(ctx.index) and \
                    built_in_eval(ctx.index, receiver, ctx.index.scope_at(forward.call)):
                continue
            # a loss criterion or a GroupNorm-only net computes the same in both modes
            dependence, built = model.mode_dependence(receiver, ctx.index.scope_at(forward.call), training)
            if dependence == FREE:
                continue
            # a torchvision detection model handed targets returns its losses only in train mode: a
            # pass reading them under no_grad needs that mode, and `eval()` would break it
            asked = model.asks_train_outputs(forward)
            if asked is not None and asked[0]:
                continue
            reported.add(group)
            key = display_key(forward.key)
            off = grad_off_site(ctx, forward.call)
            evidence = [premise("grad recording is off at this forward", off if off is not None else forward.call,
                                "call" if off is None or not hasattr(off, "decorator") else "decorator"),
                        mode_fact_premise(ctx, training[0], key, forward.call),
                        premise(f"no `{key}.eval()` runs between that and this forward", forward.call, "use"),
                        evaluation_premise(ctx, model, forward, region)]
            if asked is not None:
                evidence.append(unknown(
                    f"eval mode gives this pass what it asks `{key}` for: `{key}` may be `{asked[1]}` (what it "
                    "is built as depends on the run), whose forward hands these targets to a torchvision "
                    "detection model, which returns its losses only in train mode", forward.call, "construction"))
            evidence.append(self._mode_premise(ctx, key, dependence, built, forward.call))
            yield self.report(forward.call, self._message(ctx, forward, training[0]), evidence=evidence)

    @staticmethod
    def _mode_premise(ctx, key: str, dependence: str | None, built, call):
        """What the message says of the model (dropout stays on, BatchNorm uses batch statistics)
        holds only for a module with such layers: proven by its construction (a torch.nn Dropout or
        BatchNorm, a project class holding one, a torchvision/timm/transformers model), unknown
        when what it is built as is not shown (a parameter no caller shows, a class whose layers
        come from a library the project cannot see into, such as a graph network's convolutions)."""
        if dependence == DEPENDENT and built is not None:
            return premise(f"`{key}` holds layers that compute differently in train mode (dropout, batch "
                           f"statistics): it is built by `{ctx.code_for(built)[:60]}`", built, "construction")
        if dependence == DEPENDENT:
            return premise(f"`{key}` holds layers that compute differently in train mode (dropout, batch "
                           "statistics): every caller passes a module built with them", call, "construction")
        return unknown(f"`{key}` holds dropout or batch norm: what it is built as is not shown here (a "
                       "parameter, a factory, or layers from a library the project cannot see into)", call,
                       "construction")

    def _message(self, ctx, forward, fact) -> str:
        key = display_key(forward.key)
        function = forward.function
        where = f"`{function.name}()`" if function is not None else "this evaluation"
        if forward.via is not None and function is not None:
            off = ", ".join(f"`{name}={value}`" for name, value in forward.flags if value is False)
            where = f"`{function.name}()`, called with {off} (grad off),"
        if fact.kind == NEW:
            why = "it was just built and nothing calls `eval()` on it"
        elif fact.kind == TRAINED:
            why = f"its caller `{fact.via or 'the module'}` trains it and nothing calls `{key}.eval()`"
        else:
            origin = f" in `{fact.via}()`" if fact.via and (function is None or fact.via != function.name) else ""
            why = f"the last switch on the way here is `{ctx.code_for(fact.node)}`{origin}"
        return (f"{where} runs `{key}` under no_grad/inference_mode while `{key}` is in train mode ({why}): "
                f"dropout stays on and BatchNorm normalises with batch statistics and updates its running "
                f"statistics; call `{key}.eval()` before the evaluation (and `{key}.train()` after it)")
