"""TL303 train-mode-not-restored."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.model.mode_names import display_key
from trainlint.model.held_flags import excluded_after
from trainlint.model.modes import modes
from trainlint.fixkit import block_of, dotted, line_holding, own_line
from trainlint.rule import FixSpec, Rule, after, bad, good
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import evaluation_premise, grad_off_site, mode_fact_premise


class TrainModeNotRestored(Rule):
    code = "TL303"
    name = "train-mode-not-restored"
    severity = Severity.ERROR
    summary = "A training loop evaluates and keeps training without `model.train()`"
    message = "the training loop puts the model in eval mode and keeps training without `model.train()`"
    triggers = (".eval(", "train(False", "train(mode=False")
    # an eval mode comes only from `.eval()` / `.train(False)`; what is reported is seen at a backward
    gate = (named("^eval$") | (named("^train$") & named("^False$"))) & named("backward")
    imported_triggers = ("backward",)  # `.eval()` in a helper the training loop here calls
    imported_gate = named("backward")  # the training loop is here
    what_it_does = """
        Follows module mode through a training loop (a loop that runs a backward and an optimizer
        step, directly or through functions and methods of the same file): a `model.eval()` /
        `model.train(False)` in the loop, or a call to a function that leaves the model in eval
        mode (it calls `eval()` and neither `train()`, `train(was_training)`, a `finally` nor a
        context manager restores it), is flagged when a later backward of the loop (in the same
        iteration or in the next ones) can run before any `model.train()`; a method named `backward`
        whose result is read (`flow.backward(z).clamp(-1, 1)`) is the project's own (an inverse pass),
        not autograd's, which returns None. A backward that the
        call's literal arguments skip does not count (`run_epoch(val_loader)` with `optimizer=None` by
        default, into `if optimizer is not None: loss.backward()`), also when the helper is read on
        its own with the modes of all its callers joined: an eval mode that came in through
        `step(model, val_loader, if_train=False)` never reaches its `if if_train: loss.backward()`;
        nor does a backward under a test that a flag held at the eval makes false, when no code of
        the file ever stores another value in it (`cfg.frozen = True` just before `model.eval()`, or
        `if cfg.frozen:` around it, and `if not cfg.frozen: loss.backward()`): once the eval has run,
        no backward does;
        and the code holding the eval (a function, or a script's top level), which follows every
        call with its own arguments and the next iteration of its loop, refutes an eval it never
        saw reach that backward. `model.train()` at the
        top of each epoch is enough when evaluation runs only at the end of the epoch, but not
        when evaluation runs every N steps inside the step loop; a `train()` under `if critic is not None:`
        (or `if critic:`) counts too, since the branch it skips has no module to restore. Models that are never trained
        (a frozen teacher, an EMA copy) may stay in eval mode: a model is untrained when the file
        builds its optimizers from the parameters of named modules and it is not among them (nor
        read with `.parameters()`, nor handed to a helper whose body is elsewhere), or when every
        optimizer the loop steps is built in sight and none holds its parameters; an `eval()`
        on `copy.deepcopy(model)` switches the copy only. A model whose every parameter is frozen
        at the backward (`requires_grad_(False)` before it, in the loop's function or by every
        caller) is not trained there either, nor one that the loop forwards only under `no_grad`
        (a momentum encoder, a reference model) and hands to no code it cannot follow: the
        backward reaches none of its parameters. That the loop trains the model is required: it
        runs the model's forward with grad on, or its loss comes from a call handed the model (a
        helper of another file); a loop that does neither (a linear probe fitted on features taken
        without grad inside the evaluation, a client's copy of a federated global model) is
        unproven and not reported by default. So may a module whose mode
        changes nothing (a loss criterion such as `nn.CrossEntropyLoss()` or a project loss class
        without dropout/BatchNorm, a GroupNorm-only network, a library class not known to hold
        dropout or BatchNorm: the same judgement as TL302's; `holder.net` is judged by what the
        holder's class assigns to `self.net` when every binding of `holder` builds a class of the
        file and no code assigns `.net` other than through `self`). A `.train()` on a receiver that
        every binding builds with an `nn.Module` class is a mode switch whatever its name (`agent`,
        `learner`). An eval that a training step sets before
        its own step loop starts, when nothing but that loop's training forwards uses the model in that
        mode (no forward with grad off, no other forward, not handed to code the walk does not follow),
        is the mode the step chose to train in (a linear probe keeping BatchNorm statistics frozen),
        not one an evaluation left behind; it is reported once it survives into another iteration or
        serves an evaluation first. A backward in a called function that cannot name the model (no
        argument stands for it, it is neither a global nor a local of a function enclosing the callee)
        and whose loop forwards a model of its own trains that model (a probe the evaluation fits):
        `model` there is another object. `nn.Module.train()` recurses: `self.train()` in a method of
        a module class puts `self.model` back in train mode too. An evaluation under
        `if i == len(loader) - 1:` in `for i, x in enumerate(loader)` runs on the last step only: what it
        leaves reaches the code after the loop, not another step. Alternating phases are not evaluations: a GAN
        loop that starts each phase with `D.train(); G.eval()` or `G.train(); D.eval()` freezes the
        partner network and the other phase undoes it; that is left alone when the loop calls the
        network's `train()` before coming back to the `eval()`, another phase's optimizer steps in
        between, and no optimizer stepped in between holds its parameters (known from `Adam(D.parameters())`; when the optimizers' contents are
        not seen, the loop must step two or more optimizers). Reported at the call in the loop
        that switches to eval mode or calls the evaluation function.
        """
    why_bad = """
        Nothing switches a model back to train mode by itself. After the first evaluation the
        rest of training runs with dropout disabled and BatchNorm normalising with frozen running
        statistics instead of batch statistics: regularisation silently disappears, BatchNorm
        statistics stop tracking the weights, and the loss curve still looks plausible. No error,
        no warning; the run just ends worse than it should.
        """
    fix_safety = """
        Unsafe: `model.train()` turns dropout, drop-path and batch-norm updates back on; if the
        model is kept in eval mode on purpose (a frozen backbone whose features are evaluated or
        published), the fix changes what it computes.
        """
    references = (
        "https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.train",
        "https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval",
        "https://pytorch.org/docs/stable/notes/autograd.html#evaluation-mode-nn-module-eval",
    )
    examples = (
        good(
            """
            import torch
            import torch.nn.functional as F


            def adapt(model, loader, val_loader, lr, every=100):
                model.train()
                optimizer = torch.optim.AdamW(model.trainable_parameters(), lr=lr)
                for step, (x, y) in enumerate(loader):
                    if step % every == 0:
                        model.eval()
                        with torch.no_grad():
                            print(sum(F.mse_loss(model(a), b).item() for a, b in val_loader))
                        model.adapter.train()
                    loss = F.mse_loss(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            title="the adapter is put back in train mode after each validation, and the optimizer is not seen to "
                  "hold the rest of the model (its own method picks the parameters): the rest may stay in eval mode "
                  "on purpose",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            def adapt(model, loader, val_loader, lr, every=100):
                model.train()
                optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
                for step, (x, y) in enumerate(loader):
                    if step % every == 0:
                        model.eval()
                        with torch.no_grad():
                            print(sum(F.mse_loss(model(a), b).item() for a, b in val_loader))
                        model.adapter.train()
                    loss = F.mse_loss(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            line=10,
            fixed="""
            import torch
            import torch.nn.functional as F


            def adapt(model, loader, val_loader, lr, every=100):
                model.train()
                optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
                for step, (x, y) in enumerate(loader):
                    if step % every == 0:
                        model.eval()
                        with torch.no_grad():
                            print(sum(F.mse_loss(model(a), b).item() for a, b in val_loader))
                        model.adapter.train()
                        model.train()
                    loss = F.mse_loss(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            title="the adapter put back in train mode, but the optimizer trains the whole model, the rest of it in eval mode",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            class Tuner:
                def __init__(self, model, lr):
                    self.model = model
                    self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)

                def fit(self, loader, val_loader):
                    self.model.train()
                    for step, (x, y) in enumerate(loader):
                        if step % 500 == 0:
                            self.model.eval()
                            with torch.no_grad():
                                print(sum(F.l1_loss(self.model(a), b).item() for a, b in val_loader))
                            self.model.head.train()
                        loss = F.l1_loss(self.model(x), y)
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
            """,
            line=14,
            fixed="""
            import torch
            import torch.nn.functional as F


            class Tuner:
                def __init__(self, model, lr):
                    self.model = model
                    self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)

                def fit(self, loader, val_loader):
                    self.model.train()
                    for step, (x, y) in enumerate(loader):
                        if step % 500 == 0:
                            self.model.eval()
                            with torch.no_grad():
                                print(sum(F.l1_loss(self.model(a), b).item() for a, b in val_loader))
                            self.model.head.train()
                            self.model.train()
                        loss = F.l1_loss(self.model(x), y)
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
            """,
            title="the head put back in train mode, but the optimizer the class builds trains the whole model",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F
            from probes import make_probe


            class Pretrainer:
                def __init__(self, model, optimizer):
                    self.model = model
                    self.optimizer = optimizer

                def probe(self, loader, num_classes):
                    self.model.eval()
                    with torch.no_grad():
                        feats = torch.cat([self.model(x) for x, _ in loader])
                        labels = torch.cat([y for _, y in loader])
                    head, head_opt = make_probe(feats.shape[1], num_classes)
                    for _ in range(50):
                        loss = F.cross_entropy(head(feats), labels)
                        head_opt.zero_grad()
                        loss.backward()
                        head_opt.step()
                    return loss.item()

                def fit(self, loader, val_loader, epochs):
                    for epoch in range(epochs):
                        self.model.train()
                        for x, y in loader:
                            loss = F.cross_entropy(self.model(x), y)
                            self.optimizer.zero_grad()
                            loss.backward()
                            self.optimizer.step()
                        print(epoch, self.probe(val_loader, 10))
            """,
            title="a linear probe trained on features taken without grad: its loop's backward trains the probe, not the frozen model",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            from probes import make_probe


            class Pretrainer:
                def __init__(self, model, optimizer):
                    self.model = model
                    self.optimizer = optimizer

                def probe(self, loader, num_classes):
                    self.model.eval()
                    with torch.no_grad():
                        feats = torch.cat([self.model(x) for x, _ in loader])
                        labels = torch.cat([y for _, y in loader])
                    head, head_opt = make_probe(feats.shape[1], num_classes)
                    for _ in range(50):
                        loss = F.cross_entropy(head(feats), labels)
                        head_opt.zero_grad()
                        loss.backward()
                        head_opt.step()
                    return loss.item()

                def fit(self, loader, val_loader, epochs, probe_every=500):
                    for epoch in range(epochs):
                        self.model.train()
                        for step, (x, y) in enumerate(loader):
                            loss = F.cross_entropy(self.model(x), y)
                            self.optimizer.zero_grad()
                            loss.backward()
                            self.optimizer.step()
                            if step % probe_every == 0:
                                print(step, self.probe(val_loader, 10))
            """,
            line=33,
            fixed="""
            import torch
            import torch.nn.functional as F
            from probes import make_probe


            class Pretrainer:
                def __init__(self, model, optimizer):
                    self.model = model
                    self.optimizer = optimizer

                def probe(self, loader, num_classes):
                    self.model.eval()
                    with torch.no_grad():
                        feats = torch.cat([self.model(x) for x, _ in loader])
                        labels = torch.cat([y for _, y in loader])
                    head, head_opt = make_probe(feats.shape[1], num_classes)
                    for _ in range(50):
                        loss = F.cross_entropy(head(feats), labels)
                        head_opt.zero_grad()
                        loss.backward()
                        head_opt.step()
                    return loss.item()

                def fit(self, loader, val_loader, epochs, probe_every=500):
                    for epoch in range(epochs):
                        self.model.train()
                        for step, (x, y) in enumerate(loader):
                            loss = F.cross_entropy(self.model(x), y)
                            self.optimizer.zero_grad()
                            loss.backward()
                            self.optimizer.step()
                            if step % probe_every == 0:
                                print(step, self.probe(val_loader, 10))
                                self.model.train()
            """,
            title="the same probe run every N steps inside the step loop: the next training step runs in eval mode",
        ),
        good(
            """
            import torch
            import torch.nn as nn
            import torch.nn.functional as F


            class Scorer(nn.Module):
                def __init__(self, n_in, n_out):
                    super().__init__()
                    self.hidden = nn.Linear(n_in, 256)
                    self.out = nn.Linear(256, n_out)

                def forward(self, x):
                    return self.out(F.relu(self.hidden(x)))


            class Learner:
                def __init__(self, n_in, n_out):
                    self.net = Scorer(n_in, n_out)
                    self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)


            def fit(features, targets, rounds):
                learner = Learner(features.shape[1], 4)
                for _ in range(rounds):
                    learner.net.eval()
                    loss = F.cross_entropy(learner.net(features), targets)
                    learner.opt.zero_grad()
                    loss.backward()
                    learner.opt.step()
                    learner.net.train()
            """,
            title="a held network built of Linear layers only: its eval() during the update changes nothing it computes",
        ),
        bad(
            """
            import torch
            import torch.nn as nn
            import torch.nn.functional as F


            class Scorer(nn.Module):
                def __init__(self, n_in, n_out):
                    super().__init__()
                    self.hidden = nn.Linear(n_in, 256)
                    self.drop = nn.Dropout(0.3)
                    self.out = nn.Linear(256, n_out)

                def forward(self, x):
                    return self.out(self.drop(F.relu(self.hidden(x))))


            class Learner:
                def __init__(self, n_in, n_out):
                    self.net = Scorer(n_in, n_out)
                    self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)


            def fit(features, targets, rounds):
                learner = Learner(features.shape[1], 4)
                for _ in range(rounds):
                    learner.net.eval()
                    loss = F.cross_entropy(learner.net(features), targets)
                    learner.opt.zero_grad()
                    loss.backward()
                    learner.opt.step()
                    learner.net.train()
            """,
            line=26,
            title="the same held network with dropout: the update trains it with dropout off",
        ),
        good(
            """
            import torch
            import torch.nn as nn


            class Agent(nn.Module):
                def __init__(self, n_obs, n_act):
                    super().__init__()
                    self.policy = nn.Sequential(nn.Linear(n_obs, 64), nn.Dropout(0.1), nn.Linear(64, n_act))

                def forward(self, obs):
                    return self.policy(obs)


            def run(env, iterations, n_obs, n_act):
                agent = Agent(n_obs, n_act)
                optimizer = torch.optim.Adam(agent.parameters(), lr=3e-4)
                for it in range(iterations):
                    agent.eval()
                    with torch.no_grad():
                        batch = env.rollout(agent)
                    agent.train()
                    for obs, ret in batch:
                        loss = (agent(obs).sum(-1) - ret).pow(2).mean()
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
            title="an RL agent built from an nn.Module class: its `agent.train()` before the update restores the mode",
        ),
        good(
            """
            import torch
            from policies import make_agent


            def run(env, iterations, n_obs, n_act):
                agent = make_agent(n_obs, n_act)
                optimizer = torch.optim.Adam(agent.parameters(), lr=3e-4)
                for it in range(iterations):
                    agent.eval()
                    with torch.no_grad():
                        batch = env.rollout(agent)
                    agent.train()
                    for obs, ret in batch:
                        loss = (agent(obs).sum(-1) - ret).pow(2).mean()
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
            title="an agent a factory of another package builds: the file calls its `eval()`, so its `train()` is a mode switch too",
        ),
        bad(
            """
            import torch
            import torch.nn as nn


            class Agent(nn.Module):
                def __init__(self, n_obs, n_act):
                    super().__init__()
                    self.policy = nn.Sequential(nn.Linear(n_obs, 64), nn.Dropout(0.1), nn.Linear(64, n_act))

                def forward(self, obs):
                    return self.policy(obs)


            def run(env, iterations, n_obs, n_act):
                agent = Agent(n_obs, n_act)
                optimizer = torch.optim.Adam(agent.parameters(), lr=3e-4)
                agent.train()
                for it in range(iterations):
                    agent.eval()
                    with torch.no_grad():
                        batch = env.rollout(agent)
                    for obs, ret in batch:
                        loss = (agent(obs).sum(-1) - ret).pow(2).mean()
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
            line=19,
            title="the same agent with train() only before the loop: every update after the first rollout runs with dropout off",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            def evaluate(model, loader):
                model.eval()
                with torch.no_grad():
                    return sum(F.cross_entropy(model(x), y, reduction="sum").item() for x, y in loader)


            def train(model, optimizer, train_loader, val_loader, epochs, eval_every=200):
                step = 0
                for epoch in range(epochs):
                    model.train()
                    for x, y in train_loader:
                        optimizer.zero_grad()
                        F.cross_entropy(model(x), y).backward()
                        optimizer.step()
                        step += 1
                        if step % eval_every == 0:
                            print(step, evaluate(model, val_loader))
            """,
            line=21,
            fixed="""
            import torch
            import torch.nn.functional as F


            def evaluate(model, loader):
                model.eval()
                with torch.no_grad():
                    return sum(F.cross_entropy(model(x), y, reduction="sum").item() for x, y in loader)


            def train(model, optimizer, train_loader, val_loader, epochs, eval_every=200):
                step = 0
                for epoch in range(epochs):
                    model.train()
                    for x, y in train_loader:
                        optimizer.zero_grad()
                        F.cross_entropy(model(x), y).backward()
                        optimizer.step()
                        step += 1
                        if step % eval_every == 0:
                            print(step, evaluate(model, val_loader))
                            model.train()
            """,
            title="evaluation every N steps, train() only at the top of the epoch",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F

            for step, (xb, yb) in enumerate(train_loader):
                optimizer.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                optimizer.step()
                if step % 1000 == 0:
                    model.eval()
                    with torch.no_grad():
                        acc = (model(val_x).argmax(-1) == val_y).float().mean().item()
                    print(step, acc)
            """,
            line=9,
            fixed="""
            import torch
            import torch.nn.functional as F

            for step, (xb, yb) in enumerate(train_loader):
                optimizer.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                optimizer.step()
                if step % 1000 == 0:
                    model.eval()
                    with torch.no_grad():
                        acc = (model(val_x).argmax(-1) == val_y).float().mean().item()
                    print(step, acc)
                    model.train()
            """,
            title="eval() inlined in the loop",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            class Trainer:
                def __init__(self, model, train_loader, val_loader):
                    self.model = model
                    self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
                    self.train_loader = train_loader
                    self.val_loader = val_loader

                @torch.no_grad()
                def validate(self):
                    self.model.eval()
                    return sum(F.cross_entropy(self.model(x), y).item() for x, y in self.val_loader)

                def fit(self, epochs):
                    for epoch in range(epochs):
                        for x, y in self.train_loader:
                            self.optimizer.zero_grad()
                            F.cross_entropy(self.model(x), y).backward()
                            self.optimizer.step()
                        print(epoch, self.validate())
            """,
            line=23,
            fixed="""
            import torch
            import torch.nn.functional as F


            class Trainer:
                def __init__(self, model, train_loader, val_loader):
                    self.model = model
                    self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
                    self.train_loader = train_loader
                    self.val_loader = val_loader

                @torch.no_grad()
                def validate(self):
                    self.model.eval()
                    return sum(F.cross_entropy(self.model(x), y).item() for x, y in self.val_loader)

                def fit(self, epochs):
                    for epoch in range(epochs):
                        for x, y in self.train_loader:
                            self.optimizer.zero_grad()
                            F.cross_entropy(self.model(x), y).backward()
                            self.optimizer.step()
                        print(epoch, self.validate())
                        self.model.train()
            """,
            title="a Trainer that relies on the default train mode",
        ),
        bad(
            """
            import torch


            def train_loop(model, optimizer, train_dataloader, eval_dataloader, accelerator, eval_steps):
                model.train()
                for step, batch in enumerate(train_dataloader):
                    with accelerator.accumulate(model):
                        loss = model(**batch).loss
                        accelerator.backward(loss)
                        optimizer.step()
                        optimizer.zero_grad()
                    if step % eval_steps == 0:
                        model.train(False)
                        losses = []
                        for eval_batch in eval_dataloader:
                            with torch.no_grad():
                                losses.append(accelerator.gather_for_metrics(model(**eval_batch).loss))
                        accelerator.print(step, torch.cat(losses).mean().item())
            """,
            line=13,
            fixed="""
            import torch


            def train_loop(model, optimizer, train_dataloader, eval_dataloader, accelerator, eval_steps):
                model.train()
                for step, batch in enumerate(train_dataloader):
                    with accelerator.accumulate(model):
                        loss = model(**batch).loss
                        accelerator.backward(loss)
                        optimizer.step()
                        optimizer.zero_grad()
                    if step % eval_steps == 0:
                        model.train(False)
                        losses = []
                        for eval_batch in eval_dataloader:
                            with torch.no_grad():
                                losses.append(accelerator.gather_for_metrics(model(**eval_batch).loss))
                        accelerator.print(step, torch.cat(losses).mean().item())
                        model.train()
            """,
            title="Accelerate style with model.train(False)",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            def evaluate(model, loader):
                model.eval()
                with torch.no_grad():
                    return sum(F.cross_entropy(model(x), y, reduction="sum").item() for x, y in loader)


            def train(model, optimizer, train_loader, val_loader, epochs, eval_every=200):
                step = 0
                for epoch in range(epochs):
                    model.train()
                    for x, y in train_loader:
                        optimizer.zero_grad()
                        F.cross_entropy(model(x), y).backward()
                        optimizer.step()
                        step += 1
                        if step % eval_every == 0:
                            print(step, evaluate(model, val_loader))
                            model.train()
            """,
            title="back to train mode right after the evaluation",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            def evaluate(model, loader):
                model.eval()
                with torch.no_grad():
                    return sum(F.cross_entropy(model(x), y, reduction="sum").item() for x, y in loader)


            def train(model, optimizer, train_loader, val_loader, epochs):
                for epoch in range(epochs):
                    model.train()
                    for x, y in train_loader:
                        optimizer.zero_grad()
                        F.cross_entropy(model(x), y).backward()
                        optimizer.step()
                    print(epoch, evaluate(model, val_loader))
            """,
            title="train() at the top of each epoch, evaluation only at the end of the epoch",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            def evaluate(model, loader):
                was_training = model.training
                model.eval()
                with torch.no_grad():
                    total = sum(F.cross_entropy(model(x), y, reduction="sum").item() for x, y in loader)
                model.train(was_training)
                return total


            def train(model, optimizer, train_loader, val_loader, eval_every=100):
                for step, (x, y) in enumerate(train_loader):
                    optimizer.zero_grad()
                    F.cross_entropy(model(x), y).backward()
                    optimizer.step()
                    if step % eval_every == 0:
                        print(evaluate(model, val_loader))
            """,
            title="evaluate() restores the mode it found",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F

            for step, (xb, yb) in enumerate(train_loader):
                optimizer.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                optimizer.step()
                if step % 1000 == 0:
                    model.eval()
                    try:
                        with torch.no_grad():
                            print((model(val_x).argmax(-1) == val_y).float().mean().item())
                    finally:
                        model.train()
            """,
            title="train() in a finally block after the inline evaluation",
        ),
        good(
            """
            import contextlib

            import torch
            import torch.nn.functional as F


            @contextlib.contextmanager
            def eval_mode(model):
                model.eval()
                try:
                    yield model
                finally:
                    model.train()


            def train(model, optimizer, loader, probe):
                for step, (x, y) in enumerate(loader):
                    optimizer.zero_grad()
                    F.cross_entropy(model(x), y).backward()
                    optimizer.step()
                    if step % 50 == 0:
                        with eval_mode(model), torch.no_grad():
                            print(model(probe).softmax(-1))
            """,
            title="a context manager that restores train mode",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F

            teacher.requires_grad_(False)
            for xb, yb in train_loader:
                teacher.eval()
                with torch.no_grad():
                    soft = F.softmax(teacher(xb), dim=-1)
                loss = F.kl_div(F.log_softmax(student(xb), dim=-1), soft, reduction="batchmean")
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
            title="a frozen teacher stays in eval mode",
        ),
        good(
            """
            import torch
            from apex import amp


            def train_epoch(model, model_ema, loader, optimizer, alpha=0.999):
                model.train()
                model_ema.eval()
                for images, _ in loader:
                    q = model(images)
                    with torch.no_grad():
                        k = model_ema(images)
                    loss = -(q * k).sum(-1).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    with torch.no_grad():
                        for p, p_ema in zip(model.parameters(), model_ema.parameters()):
                            p_ema.mul_(alpha).add_(p, alpha=1 - alpha)


            def main(model, model_ema, loader, epochs):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.03)
                model, optimizer = amp.initialize(model, optimizer)
                optimizer_ema = torch.optim.SGD(model_ema.parameters(), lr=0)  # amp wants one; never stepped
                model_ema, optimizer_ema = amp.initialize(model_ema, optimizer_ema)
                for epoch in range(epochs):
                    train_epoch(model, model_ema, loader, optimizer)
            """,
            title="a momentum encoder forwarded only under no_grad (an optimizer built over it for amp, never stepped)",
        ),
        bad(
            """
            import torch
            from apex import amp


            def train_epoch(model, model_ema, loader, optimizer, alpha=0.999):
                model_ema.eval()
                for images, _ in loader:
                    q = model(images)
                    with torch.no_grad():
                        k = model_ema(images)
                    loss = -(q * k).sum(-1).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    with torch.no_grad():
                        for p, p_ema in zip(model.parameters(), model_ema.parameters()):
                            p_ema.mul_(alpha).add_(p, alpha=1 - alpha)


            def main(model, model_ema, loader, val_loader, epochs):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.03)
                model, optimizer = amp.initialize(model, optimizer)
                optimizer_ema = torch.optim.SGD(model_ema.parameters(), lr=0)  # amp wants one; never stepped
                model_ema, optimizer_ema = amp.initialize(model_ema, optimizer_ema)
                model.train()
                for epoch in range(epochs):
                    train_epoch(model, model_ema, loader, optimizer)
                    model.module.eval()
                    with torch.no_grad():
                        print(sum((model(x).argmax(-1) == y).sum().item() for x, y in val_loader))
            """,
            line=28,
            title="the trained model itself put in eval mode through its wrapper (`model.module`), beside the encoder",
        ),
        good(
            """
            import torch


            def fit_embeddings(unet, text_encoder, loader, optimizer):
                for epoch in range(3):
                    unet.eval()
                    text_encoder.train()
                    for batch in loader:
                        loss = (unet(text_encoder(batch)) - batch).pow(2).mean()
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()


            def fine_tune(unet, text_encoder, loader, optimizer):
                unet.train()
                for batch in loader:
                    loss = unet(text_encoder(batch)).mean()
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()


            def main(unet, text_encoder, loader, make_optimizer):
                unet.requires_grad_(False)
                fit_embeddings(unet, text_encoder, loader, make_optimizer(text_encoder))
                unet.requires_grad_(True)
                fine_tune(unet, text_encoder, loader, make_optimizer(unet))
            """,
            title="a network frozen by the caller for this phase (trained in another) stays in eval mode",
        ),
        good(
            """
            import torch


            def fit_embeddings(unet, text_encoder, loader, optimizer):
                for epoch in range(3):
                    unet.eval()
                    text_encoder.train()
                    for batch in loader:
                        loss = (unet(text_encoder(batch)) - batch).pow(2).mean()
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()


            def fine_tune(unet, text_encoder, loader, optimizer):
                unet.train()
                for batch in loader:
                    loss = unet(text_encoder(batch)).mean()
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()


            def main(unet, text_encoder, loader, make_optimizer):
                unet.encoder.requires_grad_(False)
                fit_embeddings(unet, text_encoder, loader, make_optimizer(text_encoder, unet.decoder))
                unet.requires_grad_(True)
                fine_tune(unet, text_encoder, loader, make_optimizer(unet))
            """,
            title="the epoch chooses eval mode for the step loop that follows (a part of the network frozen, its "
                  "BatchNorm kept on running statistics): no evaluation left it there, each epoch sets it anew",
        ),
        good(
            """
            import torch


            def train_epoch(model, loader, optimizer):
                model.train()
                for x, y in loader:
                    loss = model(x, y)
                    loss.backward()
                    optimizer.step()
                    model.zero_grad()


            def evaluate(model, loader):
                model.eval()
                with torch.no_grad():
                    return sum(model(x, y).item() for x, y in loader)


            def fit(net, train_loader, val_loader, epochs):
                opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
                for epoch in range(epochs):
                    train_epoch(net, train_loader, opt)
                    print(epoch, evaluate(net, val_loader))
            """,
            title="the next epoch's helper starts with model.train() on the model it is passed",
        ),
        good(
            """
            import torch
            from torch import nn


            class Probe(nn.Module):
                def __init__(self, encoder, classes):
                    super().__init__()
                    self.encoder = encoder
                    self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(512, classes))

                def train_head(self):
                    for p in self.encoder.parameters():
                        p.requires_grad = False
                    self.head.train()

                def forward(self, x):
                    return self.head(self.encoder(x))


            def train_epoch(probe, loader, optimizer):
                probe.train_head()
                for x, y in loader:
                    optimizer.zero_grad()
                    nn.functional.cross_entropy(probe(x), y).backward()
                    optimizer.step()


            def evaluate(probe, loader):
                probe.eval()
                with torch.no_grad():
                    return sum(probe(x).argmax(1).eq(y).sum().item() for x, y in loader)


            def main(encoder, train_loader, val_loader, classes):
                probe = Probe(encoder, classes).to("cuda")
                optimizer = torch.optim.Adam(probe.head.parameters())
                for epoch in range(10):
                    train_epoch(probe, train_loader, optimizer)
                    evaluate(probe, val_loader)
            """,
            title="the model's own method puts the trained head back in train mode beside a frozen encoder",
        ),
        bad(
            """
            import torch


            def train_epoch(model, loader, optimizer):
                for x, y in loader:
                    loss = model(x, y)
                    loss.backward()
                    optimizer.step()
                    model.zero_grad()


            def evaluate(model, loader):
                model.eval()
                with torch.no_grad():
                    return sum(model(x, y).item() for x, y in loader)


            def fit(net, train_loader, val_loader, epochs):
                opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
                net.train()
                for epoch in range(epochs):
                    train_epoch(net, train_loader, opt)
                    print(epoch, evaluate(net, val_loader))
            """,
            line=23,
            fixed="""
            import torch


            def train_epoch(model, loader, optimizer):
                for x, y in loader:
                    loss = model(x, y)
                    loss.backward()
                    optimizer.step()
                    model.zero_grad()


            def evaluate(model, loader):
                model.eval()
                with torch.no_grad():
                    return sum(model(x, y).item() for x, y in loader)


            def fit(net, train_loader, val_loader, epochs):
                opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
                net.train()
                for epoch in range(epochs):
                    train_epoch(net, train_loader, opt)
                    print(epoch, evaluate(net, val_loader))
                    net.train()
            """,
            title="the epoch helper never calls model.train(): from the second epoch on it trains in eval mode",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F

            model.train()
            for xb, yb in train_loader:
                optimizer.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                optimizer.step()
            model.eval()
            with torch.no_grad():
                print(sum((model(x).argmax(-1) == y).sum().item() for x, y in test_loader))
            """,
            title="final evaluation after the training loop",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F

            for step, (xb, yb) in enumerate(train_loader):
                model.train()
                optimizer.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                optimizer.step()
                if step % 100 == 0:
                    model.eval()
                    with torch.no_grad():
                        print(model(val_x).argmax(-1).eq(val_y).float().mean().item())
            """,
            title="train() at the top of every step",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            def train_gan(generator, discriminator, loader, epochs, z_dim=128):
                opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
                opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
                for epoch in range(epochs):
                    for real, _ in loader:
                        z = torch.randn(real.size(0), z_dim)
                        # discriminator phase: the generator only produces samples
                        discriminator.train()
                        generator.eval()
                        with torch.no_grad():
                            fake = generator(z)
                        opt_d.zero_grad()
                        d_loss = F.softplus(discriminator(fake)).mean() + F.softplus(-discriminator(real)).mean()
                        d_loss.backward()
                        opt_d.step()
                        # generator phase: the discriminator is a fixed critic
                        generator.train()
                        discriminator.eval()
                        opt_g.zero_grad()
                        g_loss = F.softplus(-discriminator(generator(z))).mean()
                        g_loss.backward()
                        opt_g.step()
            """,
            title="alternating GAN phases: each phase sets both networks' modes at its start",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            def train_gan(generator, discriminator, loader, epochs, z_dim=128):
                opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4)
                opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4)
                for epoch in range(epochs):
                    for real, _ in loader:
                        z = torch.randn(real.size(0), z_dim)
                        generator.train()
                        discriminator.eval()
                        opt_d.zero_grad()
                        fake = generator(z)
                        d_loss = F.softplus(discriminator(fake.detach())).mean() + F.softplus(-discriminator(real)).mean()
                        d_loss.backward()
                        opt_d.step()
                        opt_g.zero_grad()
                        g_loss = F.softplus(-discriminator(fake)).mean()
                        g_loss.backward()
                        opt_g.step()
                        discriminator.train()
            """,
            line=12,
            title="a GAN loop whose discriminator steps while frozen for the generator (restored only after its own step)",
        ),
        good(
            """
            import torch
            import torch.nn as nn


            def validate(model, criterion, loader):
                model.eval()
                criterion.eval()
                with torch.no_grad():
                    total = sum(criterion(model(x), y).item() for x, y in loader)
                model.train()
                return total / len(loader)


            def fit(model, train_loader, val_loader, epochs):
                criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(3.0))
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                for epoch in range(epochs):
                    for step, (x, y) in enumerate(train_loader):
                        optimizer.zero_grad()
                        criterion(model(x), y).backward()
                        optimizer.step()
                        if step % 500 == 0:
                            print(step, validate(model, criterion, val_loader))
            """,
            title="a loss criterion left in eval mode (a loss has no mode-dependent layers)",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            def train_gan(generator, discriminator, loader, epochs, z_dim=128):
                opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4)
                opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4)
                for epoch in range(epochs):
                    for real, _ in loader:
                        z = torch.randn(real.size(0), z_dim)
                        discriminator.eval()
                        opt_d.zero_grad()
                        d_loss = F.softplus(discriminator(generator(z).detach())).mean() + F.softplus(-discriminator(real)).mean()
                        d_loss.backward()
                        discriminator.train()
                        opt_d.step()
                        opt_g.zero_grad()
                        g_loss = F.softplus(-discriminator(generator(z))).mean()
                        g_loss.backward()
                        opt_g.step()
            """,
            line=11,
            title="train() after the discriminator's own backward: its gradients were computed in eval mode",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            def discriminator_step(G, D, real, z, opt_d):
                D.train()
                G.eval()
                with torch.no_grad():
                    fake = G(z)
                opt_d.zero_grad()
                loss = F.softplus(D(fake)).mean() + F.softplus(-D(real)).mean()
                loss.backward()
                opt_d.step()


            def generator_step(G, D, z, opt_g):
                G.train()
                D.eval()
                opt_g.zero_grad()
                loss = F.softplus(-D(G(z))).mean()
                loss.backward()
                opt_g.step()


            def train(generator, discriminator, loader, opt_g, opt_d, z_dim=128):
                for real in loader:
                    z = torch.randn(real.size(0), z_dim)
                    discriminator_step(generator, discriminator, real, z, opt_d)
                    generator_step(generator, discriminator, z, opt_g)
            """,
            title="GAN phases in helpers, each setting both networks' modes at its start",
        ),
        good(
            """
            import torch
            import torch.nn as nn

            class FrozenProbe(nn.Module):
                def __init__(self, backbone, classes):
                    super().__init__()
                    self.backbone = backbone
                    self.fc = nn.Linear(768, classes)
                    self.drop = nn.Dropout(0.1)

                def set_probe_mode(self):
                    self.train()
                    self.backbone.eval()  # the frozen part keeps its statistics

                def forward(self, images):
                    with torch.no_grad():
                        feats = self.backbone(images)
                    return self.fc(self.drop(feats))

            def validate(net, loader):
                net.eval()
                with torch.no_grad():
                    return sum((net(a).argmax(1) == b).sum().item() for a, b in loader)

            def run(backbone, train_loader, val_loader, epochs):
                probe = FrozenProbe(backbone, 100)
                opt = torch.optim.SGD(probe.fc.parameters(), lr=0.1)
                for epoch in range(epochs):
                    probe.set_probe_mode()
                    for images, labels in train_loader:
                        opt.zero_grad()
                        nn.functional.cross_entropy(probe(images), labels).backward()
                        opt.step()
                    print(validate(probe, val_loader))
            """,
            title="a method of the model's class called at the top of each epoch puts it back in train mode (its frozen backbone in eval)",
        ),
        bad(
            """
            import torch
            from torch import nn

            class Solver:
                def __init__(self, model, optimizer, train_loader, val_loader):
                    self.model, self.optimizer = model, optimizer
                    self.train_loader, self.val_loader = train_loader, val_loader

                def fit(self, epochs):
                    self.model.train()
                    for epoch in range(epochs):
                        self.run_epoch(self.train_loader)
                        self.model.eval()
                        with torch.no_grad():
                            self.run_epoch(self.val_loader, validation=True)

                def run_epoch(self, loader, validation=False):
                    total = 0.0
                    for x, y in loader:
                        loss = nn.functional.mse_loss(self.model(x), y)
                        if not validation:
                            self.optimizer.zero_grad()
                            loss.backward()
                            self.optimizer.step()
                        total += loss.item()
                    return total
            """,
            line=13,
            title="the validation pass of a shared epoch helper leaves the model in eval mode: train() runs once, before the epoch loop",
        ),
        good(
            """
            import torch
            from torch import nn

            class Solver:
                def __init__(self, model, optimizer, train_loader, val_loader):
                    self.model, self.optimizer = model, optimizer
                    self.train_loader, self.val_loader = train_loader, val_loader

                def fit(self, epochs):
                    for epoch in range(epochs):
                        self.model.train()
                        self.run_epoch(self.train_loader)
                        self.model.eval()
                        with torch.no_grad():
                            self.run_epoch(self.val_loader, validation=True)

                def run_epoch(self, loader, validation=False):
                    total = 0.0
                    for x, y in loader:
                        loss = nn.functional.mse_loss(self.model(x), y)
                        if not validation:
                            self.optimizer.zero_grad()
                            loss.backward()
                            self.optimizer.step()
                        total += loss.item()
                    return total
            """,
            title="the epoch helper trains or validates by its flag; the caller calls train() at the top of each epoch",
        ),
        bad(
            """
            import torch
            from torch import nn

            def train_epoch(loader, model, optimizer, backbone):
                model.train()
                for x, y in loader:
                    optimizer.zero_grad()
                    nn.functional.cross_entropy(model(backbone(x)), y).backward()
                    optimizer.step()

            def test_epoch(loader, model):
                model.eval()
                with torch.no_grad():
                    return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)

            def main(model, head, train_loader, test_loader, epochs):
                optimizer = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.1)
                for epoch in range(epochs):
                    params = (train_loader, head, optimizer, model)
                    train_epoch(*params)
                    print(test_epoch(test_loader, model))
            """,
            line=21,
            fixed="""
            import torch
            from torch import nn

            def train_epoch(loader, model, optimizer, backbone):
                model.train()
                for x, y in loader:
                    optimizer.zero_grad()
                    nn.functional.cross_entropy(model(backbone(x)), y).backward()
                    optimizer.step()

            def test_epoch(loader, model):
                model.eval()
                with torch.no_grad():
                    return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)

            def main(model, head, train_loader, test_loader, epochs):
                optimizer = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.1)
                for epoch in range(epochs):
                    params = (train_loader, head, optimizer, model)
                    train_epoch(*params)
                    print(test_epoch(test_loader, model))
                    model.train()
            """,
            title="the epoch helper receives its arguments from a tuple: its `model` is the head, the backbone it trains is never put back in train mode",
        ),
        good(
            """
            import torch
            from torch import nn

            def train_epoch(loader, model, optimizer):
                model.train()
                for x, y in loader:
                    optimizer.zero_grad()
                    nn.functional.cross_entropy(model(x), y).backward()
                    optimizer.step()

            def test_epoch(loader, model):
                model.eval()
                with torch.no_grad():
                    return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)

            def main(model, ema, train_loader, test_loader, epochs):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for epoch in range(epochs):
                    params = (train_loader, model, optimizer)
                    train_epoch(*params)
                    print(test_epoch(test_loader, model))
            """,
            title="the epoch helper that calls model.train() receives the model through *params, a tuple literal",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F

            student = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.Dropout(0.2), torch.nn.Linear(256, 10))
            teacher = torch.nn.Sequential(torch.nn.Linear(784, 1200), torch.nn.Dropout(0.5), torch.nn.Linear(1200, 10))
            teacher.load_state_dict(torch.load("teacher.pt", weights_only=True))
            optimizer = torch.optim.SGD([*student.parameters(), *teacher.parameters()], lr=0.01)

            def evaluate(loader):
                student.eval()
                teacher.eval()
                with torch.no_grad():
                    return [(student(x).argmax(1) == teacher(x).argmax(1)).float().mean().item() for x, _ in loader]

            for epoch in range(10):
                student.train()
                for x, y in train_loader:
                    soft = F.softmax(teacher(x) / 4.0, dim=1).detach()
                    loss = F.kl_div(F.log_softmax(student(x) / 4.0, dim=1), soft, reduction="batchmean")
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                print(evaluate(val_loader))
            """,
            line=23,
            fixed="""
            import torch
            import torch.nn.functional as F

            student = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.Dropout(0.2), torch.nn.Linear(256, 10))
            teacher = torch.nn.Sequential(torch.nn.Linear(784, 1200), torch.nn.Dropout(0.5), torch.nn.Linear(1200, 10))
            teacher.load_state_dict(torch.load("teacher.pt", weights_only=True))
            optimizer = torch.optim.SGD([*student.parameters(), *teacher.parameters()], lr=0.01)

            def evaluate(loader):
                student.eval()
                teacher.eval()
                with torch.no_grad():
                    return [(student(x).argmax(1) == teacher(x).argmax(1)).float().mean().item() for x, _ in loader]

            for epoch in range(10):
                student.train()
                for x, y in train_loader:
                    soft = F.softmax(teacher(x) / 4.0, dim=1).detach()
                    loss = F.kl_div(F.log_softmax(student(x) / 4.0, dim=1), soft, reduction="batchmean")
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                print(evaluate(val_loader))
                teacher.train()
            """,
            title="the optimizer holds the teacher's parameters too: it is trained, in the eval mode the evaluation leaves it in",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F

            student = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.Dropout(0.2), torch.nn.Linear(256, 10))
            teacher = torch.nn.Sequential(torch.nn.Linear(784, 1200), torch.nn.Dropout(0.5), torch.nn.Linear(1200, 10))
            teacher.load_state_dict(torch.load("teacher.pt", weights_only=True))
            optimizer = torch.optim.SGD(student.parameters(), lr=0.01)

            def evaluate(loader):
                student.eval()
                teacher.eval()
                with torch.no_grad():
                    return [(student(x).argmax(1) == teacher(x).argmax(1)).float().mean().item() for x, _ in loader]

            for epoch in range(10):
                student.train()
                for x, y in train_loader:
                    soft = F.softmax(teacher(x) / 4.0, dim=1).detach()
                    loss = F.kl_div(F.log_softmax(student(x) / 4.0, dim=1), soft, reduction="batchmean")
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                print(evaluate(val_loader))
            """,
            title="a frozen teacher left in eval mode beside an optimizer that holds only the student's parameters",
        ),
        bad(
            """
            import copy

            import torch
            import torch.nn.functional as F


            def adversarial(model, images, labels, eps=0.03):
                model = copy.copy(model)
                model.eval()
                images = images.clone().requires_grad_(True)
                grad, = torch.autograd.grad(F.cross_entropy(model(images), labels), images)
                return (images + eps * grad.sign()).detach()


            def train(model, optimizer, loader, epochs):
                model.train()
                for epoch in range(epochs):
                    for images, labels in loader:
                        adv = adversarial(model, images, labels)
                        loss = F.cross_entropy(model(images), labels) + F.cross_entropy(model(adv), labels)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
            line=19,
            fixed="""
            import copy

            import torch
            import torch.nn.functional as F


            def adversarial(model, images, labels, eps=0.03):
                model = copy.copy(model)
                model.eval()
                images = images.clone().requires_grad_(True)
                grad, = torch.autograd.grad(F.cross_entropy(model(images), labels), images)
                return (images + eps * grad.sign()).detach()


            def train(model, optimizer, loader, epochs):
                model.train()
                for epoch in range(epochs):
                    for images, labels in loader:
                        adv = adversarial(model, images, labels)
                        model.train()
                        loss = F.cross_entropy(model(images), labels) + F.cross_entropy(model(adv), labels)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
            title="a shallow copy shares its submodules: eval() on it switches the trained model's layers",
        ),
        good(
            """
            import copy

            import torch
            import torch.nn.functional as F


            def adversarial(model, images, labels, eps=0.03):
                model = copy.deepcopy(model)
                model.eval()
                images = images.clone().requires_grad_(True)
                grad, = torch.autograd.grad(F.cross_entropy(model(images), labels), images)
                return (images + eps * grad.sign()).detach()


            def train(model, optimizer, loader, epochs):
                model.train()
                for epoch in range(epochs):
                    for images, labels in loader:
                        adv = adversarial(model, images, labels)
                        loss = F.cross_entropy(model(images), labels) + F.cross_entropy(model(adv), labels)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
            title="the attack puts a deep copy of the model in eval mode; the trained model stays in train mode",
        ),
        bad(
            """
            import torch
            from torch import nn


            class Vocoder(nn.Module):
                def __init__(self, channels):
                    super().__init__()
                    self.net = nn.Sequential(
                        nn.utils.spectral_norm(nn.Conv1d(80, channels, 7, padding=3)),
                        nn.LeakyReLU(0.2),
                        nn.utils.weight_norm(nn.Conv1d(channels, 1, 7, padding=3)),
                        nn.Tanh(),
                    )

                def forward(self, mel):
                    return self.net(mel)

                def eval(self, inference=False):
                    super().eval()
                    if inference:
                        for layer in self.net:
                            if isinstance(layer, nn.Conv1d):
                                nn.utils.remove_weight_norm(layer)


            def validate(model, loader):
                model.eval()
                with torch.no_grad():
                    return sum((model(mel) - wav).abs().mean().item() for mel, wav in loader)


            model = Vocoder(256)
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
            model.train()
            for epoch in range(100):
                for mel, wav in train_loader:
                    loss = (model(mel) - wav).abs().mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                print(validate(model, val_loader))
            """,
            line=41,
            fixed="""
            import torch
            from torch import nn


            class Vocoder(nn.Module):
                def __init__(self, channels):
                    super().__init__()
                    self.net = nn.Sequential(
                        nn.utils.spectral_norm(nn.Conv1d(80, channels, 7, padding=3)),
                        nn.LeakyReLU(0.2),
                        nn.utils.weight_norm(nn.Conv1d(channels, 1, 7, padding=3)),
                        nn.Tanh(),
                    )

                def forward(self, mel):
                    return self.net(mel)

                def eval(self, inference=False):
                    super().eval()
                    if inference:
                        for layer in self.net:
                            if isinstance(layer, nn.Conv1d):
                                nn.utils.remove_weight_norm(layer)


            def validate(model, loader):
                model.eval()
                with torch.no_grad():
                    return sum((model(mel) - wav).abs().mean().item() for mel, wav in loader)


            model = Vocoder(256)
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
            model.train()
            for epoch in range(100):
                for mel, wav in train_loader:
                    loss = (model(mel) - wav).abs().mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                print(validate(model, val_loader))
                model.train()
            """,
            title="spectral norm runs its power iteration only in train mode: the eval() left by validation changes training",
        ),
        good(
            """
            import torch
            from torch import nn


            class Vocoder(nn.Module):
                def __init__(self, channels):
                    super().__init__()
                    self.net = nn.Sequential(
                        nn.utils.weight_norm(nn.Conv1d(80, channels, 7, padding=3)),
                        nn.LeakyReLU(0.2),
                        nn.utils.weight_norm(nn.Conv1d(channels, 1, 7, padding=3)),
                        nn.Tanh(),
                    )

                def forward(self, mel):
                    return self.net(mel)

                def eval(self, inference=False):
                    super().eval()
                    if inference:
                        for layer in self.net:
                            if isinstance(layer, nn.Conv1d):
                                nn.utils.remove_weight_norm(layer)


            def validate(model, loader):
                model.eval()
                with torch.no_grad():
                    return sum((model(mel) - wav).abs().mean().item() for mel, wav in loader)


            model = Vocoder(256)
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
            model.train()
            for epoch in range(100):
                for mel, wav in train_loader:
                    loss = (model(mel) - wav).abs().mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                print(validate(model, val_loader))
            """,
            title="a network of weight-normed convolutions (its eval() override calls super().eval()) computes the same in both modes",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            def fit(model, probe, optimizer, train_loader, val_loader, epochs):
                for epoch in range(epochs):
                    model.train()
                    if probe is not None:
                        probe.train()
                    for x, y in train_loader:
                        loss = F.cross_entropy(model(x), y)
                        if probe is not None:
                            loss = loss + F.cross_entropy(probe(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    model.eval()
                    if probe is not None:
                        probe.eval()
                    with torch.no_grad():
                        print(epoch, sum(F.cross_entropy(model(x), y).item() for x, y in val_loader))
            """,
            title="an optional module switched back to train mode under `if probe is not None:`: skipped only when there is none",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            def fit(model, probe, optimizer, train_loader, val_loader, epochs, probe_dropout=True):
                for epoch in range(epochs):
                    model.train()
                    if probe_dropout:
                        probe.train()
                    for x, y in train_loader:
                        loss = F.cross_entropy(model(x), y) + F.cross_entropy(probe(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    model.eval()
                    probe.eval()
                    with torch.no_grad():
                        print(epoch, sum(F.cross_entropy(model(x), y).item() for x, y in val_loader))
            """,
            line=16,
            title="the train() of a module that always exists is skipped by a setting: it keeps training in eval mode",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            class Runner:
                def __init__(self, model, optimizer):
                    self.model = model
                    self.optimizer = optimizer

                def step(self, x, y, optimizer):
                    loss = F.cross_entropy(self.model(x), y)
                    if optimizer is not None:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    return loss.item()

                def run_epoch(self, loader, optimizer=None):
                    return sum(self.step(x, y, optimizer) for x, y in loader)

                def fit(self, train_loader, val_loader, epochs):
                    for epoch in range(epochs):
                        self.model.train()
                        self.run_epoch(train_loader, optimizer=self.optimizer)
                        self.model.eval()
                        with torch.no_grad():
                            print(epoch, self.run_epoch(val_loader))
            """,
            title="the validation pass runs the shared step without an optimizer: `if optimizer is not None:` skips its backward",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            class Runner:
                def __init__(self, model, optimizer):
                    self.model = model
                    self.optimizer = optimizer

                def step(self, x, y, optimizer):
                    loss = F.cross_entropy(self.model(x), y)
                    if optimizer is not None:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    return loss.item()

                def run_epoch(self, loader, optimizer=None):
                    return sum(self.step(x, y, optimizer) for x, y in loader)

                def fit(self, train_loader, val_loader, epochs):
                    self.model.train()
                    for epoch in range(epochs):
                        self.run_epoch(train_loader, optimizer=self.optimizer)
                        self.model.eval()
                        with torch.no_grad():
                            print(epoch, self.run_epoch(val_loader))
            """,
            line=25,
            title="the same runner with train() only before the epoch loop: the next epoch's training pass runs in eval mode",
        ),
        good(
            """
            import torch


            def train(flow, optimizer, batches, n_steps, sample_every=500):
                for step in range(n_steps):
                    flow.train()
                    z, log_det = flow(next(batches))
                    loss = (0.5 * z.pow(2).flatten(1).sum(1) - log_det).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    flow.eval()
                    if step % sample_every == 0:
                        with torch.no_grad():
                            samples = flow.backward(torch.randn(64, 784)).clamp(-1, 1)
                        torch.save(samples, f"samples_{step}.pt")
            """,
            title="a flow's inverse pass named `backward` (its result is read: autograd's backward returns None) is no training backward",
        ),
        bad(
            """
            import torch


            def train(flow, optimizer, batches, n_steps, sample_every=500):
                flow.train()
                for step in range(n_steps):
                    z, log_det = flow(next(batches))
                    loss = (0.5 * z.pow(2).flatten(1).sum(1) - log_det).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    flow.eval()
                    if step % sample_every == 0:
                        with torch.no_grad():
                            samples = flow.backward(torch.randn(64, 784)).clamp(-1, 1)
                        torch.save(samples, f"samples_{step}.pt")
            """,
            line=12,
            title="the same flow with train() only before the loop: the next step's `loss.backward()` trains it in eval mode",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            def finetune(teacher, loader, epochs):
                optimizer = torch.optim.SGD(teacher.parameters(), lr=0.01)
                teacher.train()
                for epoch in range(epochs):
                    for x, y in loader:
                        loss = F.cross_entropy(teacher(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()


            def synthesize(generator, teacher, steps, batch_size=64, num_classes=10, noise_dim=100):
                optimizer = torch.optim.Adam(generator.parameters(), lr=1e-4)
                generator.train()
                for step in range(steps):
                    labels = torch.randint(0, num_classes, (batch_size,))
                    images = generator(torch.randn(batch_size, noise_dim), labels)
                    teacher.eval()
                    loss = F.cross_entropy(teacher(images), labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            title="a teacher fine-tuned elsewhere in the file is frozen in eval mode for a generator's loop whose only optimizer holds the generator",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            def finetune(teacher, loader, epochs):
                optimizer = torch.optim.SGD(teacher.parameters(), lr=0.01)
                teacher.train()
                for epoch in range(epochs):
                    for x, y in loader:
                        loss = F.cross_entropy(teacher(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()


            def synthesize(generator, teacher, steps, batch_size=64, num_classes=10, noise_dim=100):
                optimizer = torch.optim.Adam([*generator.parameters(), *teacher.parameters()], lr=1e-4)
                generator.train()
                for step in range(steps):
                    labels = torch.randint(0, num_classes, (batch_size,))
                    images = generator(torch.randn(batch_size, noise_dim), labels)
                    teacher.eval()
                    loss = F.cross_entropy(teacher(images), labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            line=22,
            title="the generator's optimizer also holds the teacher's parameters: the loop trains the teacher in eval mode",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F
            from helpers import make_optimizer


            def fit_classifier(model, features, labels, optimizer, epochs=100):
                for epoch in range(epochs):
                    model.train()
                    loss = F.cross_entropy(model(features), labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                return model


            def linear_eval(model, loader, classes):
                model.eval()
                with torch.no_grad():
                    pairs = [(model.embed(x), y) for x, y in loader]
                features = torch.cat([f for f, _ in pairs])
                labels = torch.cat([y for _, y in pairs])
                head = torch.nn.Linear(features.shape[1], classes)
                return fit_classifier(head, features, labels, make_optimizer(head))


            def pretrain(model, loader, probe_loader, epochs, classes):
                optimizer = make_optimizer(model)
                for epoch in range(epochs):
                    model.train()
                    for x in loader:
                        loss = model(x)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    linear_eval(model, probe_loader, classes)
            """,
            title="the evaluation fits a classifier on features computed under no_grad: the callee's loop trains its own `model` (the classifier), a name the caller's model cannot be reached by; the epoch starts with model.train()",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            from helpers import make_optimizer


            def fit_classifier(model, features, labels, optimizer, epochs=100):
                for epoch in range(epochs):
                    model.train()
                    loss = F.cross_entropy(model(features), labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                return model


            def linear_eval(model, loader, classes):
                model.eval()
                with torch.no_grad():
                    pairs = [(model.embed(x), y) for x, y in loader]
                features = torch.cat([f for f, _ in pairs])
                labels = torch.cat([y for _, y in pairs])
                head = torch.nn.Linear(features.shape[1], classes)
                return fit_classifier(head, features, labels, make_optimizer(head))


            def pretrain(model, loader, probe_loader, epochs, classes, probe_every=1000):
                optimizer = make_optimizer(model)
                for epoch in range(epochs):
                    model.train()
                    for step, x in enumerate(loader):
                        loss = model(x)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        if step % probe_every == 0:
                            linear_eval(model, probe_loader, classes)
            """,
            line=36,
            fixed="""
            import torch
            import torch.nn.functional as F
            from helpers import make_optimizer


            def fit_classifier(model, features, labels, optimizer, epochs=100):
                for epoch in range(epochs):
                    model.train()
                    loss = F.cross_entropy(model(features), labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                return model


            def linear_eval(model, loader, classes):
                model.eval()
                with torch.no_grad():
                    pairs = [(model.embed(x), y) for x, y in loader]
                features = torch.cat([f for f, _ in pairs])
                labels = torch.cat([y for _, y in pairs])
                head = torch.nn.Linear(features.shape[1], classes)
                return fit_classifier(head, features, labels, make_optimizer(head))


            def pretrain(model, loader, probe_loader, epochs, classes, probe_every=1000):
                optimizer = make_optimizer(model)
                for epoch in range(epochs):
                    model.train()
                    for step, x in enumerate(loader):
                        loss = model(x)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        if step % probe_every == 0:
                            linear_eval(model, probe_loader, classes)
                            model.train()
            """,
            title="the same probe run every N steps inside the step loop: the caller's own next backward trains the backbone in the eval mode the probe left",
        ),
        good(
            """
            import torch
            from torch import nn


            class Finetuner(nn.Module):
                def __init__(self, model, loader, val_loader):
                    super().__init__()
                    self.model = nn.DataParallel(model)
                    self.criterion = nn.CrossEntropyLoss()
                    self.loader = loader
                    self.val_loader = val_loader
                    self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)

                @torch.no_grad()
                def validate(self):
                    self.model.eval()
                    return sum((self.model(x).argmax(-1) == y).sum().item() for x, y in self.val_loader)

                def fit(self, epochs):
                    for epoch in range(epochs):
                        self.train()
                        for x, y in self.loader:
                            loss = self.criterion(self.model(x), y)
                            loss.backward()
                            self.optimizer.step()
                            self.optimizer.zero_grad()
                        print(epoch, self.validate())
            """,
            title='the trainer is an nn.Module holding the model: its own train() at the top of each epoch puts every submodule back in train mode',
        ),
        bad(
            """
            import torch
            from torch import nn


            class Finetuner:
                def __init__(self, model, loader, val_loader):
                    self.model = nn.DataParallel(model)
                    self.criterion = nn.CrossEntropyLoss()
                    self.loader = loader
                    self.val_loader = val_loader
                    self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)

                @torch.no_grad()
                def validate(self):
                    self.model.eval()
                    return sum((self.model(x).argmax(-1) == y).sum().item() for x, y in self.val_loader)

                def train(self):
                    self.criterion.train()

                def fit(self, epochs):
                    for epoch in range(epochs):
                        self.train()
                        for x, y in self.loader:
                            loss = self.criterion(self.model(x), y)
                            loss.backward()
                            self.optimizer.step()
                            self.optimizer.zero_grad()
                        print(epoch, self.validate())
            """,
            line=29,
            fixed="""
            import torch
            from torch import nn


            class Finetuner:
                def __init__(self, model, loader, val_loader):
                    self.model = nn.DataParallel(model)
                    self.criterion = nn.CrossEntropyLoss()
                    self.loader = loader
                    self.val_loader = val_loader
                    self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)

                @torch.no_grad()
                def validate(self):
                    self.model.eval()
                    return sum((self.model(x).argmax(-1) == y).sum().item() for x, y in self.val_loader)

                def train(self):
                    self.criterion.train()

                def fit(self, epochs):
                    for epoch in range(epochs):
                        self.train()
                        for x, y in self.loader:
                            loss = self.criterion(self.model(x), y)
                            loss.backward()
                            self.optimizer.step()
                            self.optimizer.zero_grad()
                        print(epoch, self.validate())
                        self.model.train()
            """,
            title='a trainer that is not a module: its train() method switches only the criterion, the model stays in eval mode',
        ),
        good(
            """
            import torch
            import torch.nn.functional as F
            from tqdm import tqdm


            def train(model, optimizer, loader, val_x, val_y, epochs):
                for epoch in range(epochs):
                    model.train()
                    with tqdm(loader) as bar:
                        for i, (x, y) in enumerate(bar):
                            loss = F.mse_loss(model(x), y)
                            optimizer.zero_grad()
                            loss.backward()
                            optimizer.step()
                            if i + 1 == len(loader):
                                model.eval()
                                with torch.no_grad():
                                    bar.set_postfix(val=F.mse_loss(model(val_x), val_y).item())
            """,
            title='the evaluation runs only on the last step of the epoch (`i + 1 == len(loader)`): the loop ends there and the next epoch starts with model.train()',
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            from tqdm import tqdm


            def train(model, optimizer, loader, val_x, val_y, epochs):
                for epoch in range(epochs):
                    model.train()
                    with tqdm(loader) as bar:
                        for i, (x, y) in enumerate(bar):
                            loss = F.mse_loss(model(x), y)
                            optimizer.zero_grad()
                            loss.backward()
                            optimizer.step()
                            if i + 1 == len(loader) // 2:
                                model.eval()
                                with torch.no_grad():
                                    bar.set_postfix(val=F.mse_loss(model(val_x), val_y).item())
            """,
            line=16,
            fixed="""
            import torch
            import torch.nn.functional as F
            from tqdm import tqdm


            def train(model, optimizer, loader, val_x, val_y, epochs):
                for epoch in range(epochs):
                    model.train()
                    with tqdm(loader) as bar:
                        for i, (x, y) in enumerate(bar):
                            loss = F.mse_loss(model(x), y)
                            optimizer.zero_grad()
                            loss.backward()
                            optimizer.step()
                            if i + 1 == len(loader) // 2:
                                model.eval()
                                with torch.no_grad():
                                    bar.set_postfix(val=F.mse_loss(model(val_x), val_y).item())
                                model.train()
            """,
            title='the evaluation runs half-way through the epoch: the rest of the epoch trains in eval mode',
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            def train_probe(model, loader, optimizer):
                # the pretrained backbone keeps its BatchNorm statistics: the probe trains in eval mode
                model.eval()
                for x, y in loader:
                    loss = F.cross_entropy(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()


            def validate(model, loader):
                model.eval()
                with torch.no_grad():
                    return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)


            def main(model, train_loader, val_loader, epochs):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for epoch in range(epochs):
                    train_probe(model, train_loader, optimizer)
                    print(epoch, validate(model, val_loader))
            """,
            title="the probe's training step chooses eval mode for the step loop that follows (frozen BatchNorm statistics, the linear-evaluation protocol): no evaluation left it there, each call sets it anew",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            def fit(model, loader, val_loader, optimizer, epochs):
                model.train()
                for epoch in range(epochs):
                    model.eval()
                    with torch.no_grad():
                        print(epoch, sum(F.cross_entropy(model(x), y).item() for x, y in val_loader))
                    for x, y in loader:
                        loss = F.cross_entropy(model(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
            line=8,
            title="eval() set before the step loop also serves an evaluation first: the evaluation's mode is never undone before training",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F
            from torch import nn


            def run_pass(net, batches, opt, learn=True):
                total = 0.0
                for x, y in batches:
                    loss = F.mse_loss(net(x), y)
                    if learn:
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    total += loss.item()
                return total


            net = nn.Sequential(nn.Linear(8, 32), nn.Dropout(0.2), nn.Linear(32, 1))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for epoch in range(20):
                net.train()
                run_pass(net, train_batches, opt, learn=True)
                net.eval()
                with torch.no_grad():
                    print(epoch, run_pass(net, val_batches, opt, learn=False))
                    print(epoch, run_pass(net, test_batches, opt, learn=False))
            """,
            title="a helper that trains only when its flag says so: the calls with `learn=False` in eval mode never "
                  "reach its backward, and each epoch starts with `net.train()`",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            from torch import nn


            def run_pass(net, batches, opt, learn=True):
                total = 0.0
                for x, y in batches:
                    loss = F.mse_loss(net(x), y)
                    if learn:
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    total += loss.item()
                return total


            net = nn.Sequential(nn.Linear(8, 32), nn.Dropout(0.2), nn.Linear(32, 1))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            net.train()
            for epoch in range(20):
                run_pass(net, train_batches, opt, learn=True)
                net.eval()
                with torch.no_grad():
                    print(epoch, run_pass(net, val_batches, opt, learn=False))
                    print(epoch, run_pass(net, test_batches, opt, learn=False))
            """,
            line=23,
            title="the same helper with train() called once before the epochs: from the second epoch on, "
                  "`learn=True` trains in the eval mode the evaluation left",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F
            from torch import nn


            def one_pass(net, batches, opt):
                seen = 0.0
                for x, y in batches:
                    loss = F.mse_loss(net(x), y)
                    if net.training:
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    seen += loss.item()
                return seen


            net = nn.Sequential(nn.Linear(8, 32), nn.Dropout(0.2), nn.Linear(32, 1))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for epoch in range(20):
                net.train()
                one_pass(net, train_batches, opt)
                net.eval()
                with torch.no_grad():
                    print(epoch, one_pass(net, val_batches, opt))
            """,
            title="a helper whose backward runs only `if net.training:`: called for the evaluation after "
                  "`net.eval()`, it never reaches its backward (the module's own flag says eval)",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            from torch import nn


            def one_pass(encoder, head, batches, opt):
                seen = 0.0
                for x, y in batches:
                    loss = F.cross_entropy(head(encoder(x)), y)
                    if head.training:
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    seen += loss.item()
                return seen


            encoder = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU())
            head = nn.Linear(32, 4)
            opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.1)
            for epoch in range(20):
                head.train()
                one_pass(encoder, head, train_batches, opt)
                encoder.eval()
                with torch.no_grad():
                    print(epoch, sum(encoder(x).norm().item() for x, _ in val_batches))
            """,
            line=24,
            title="the helper's backward tests `head.training`, not the evaluated encoder's mode: the encoder "
                  "trains in the eval mode the evaluation left",
        ),
        good(
            """
            import torch.nn.functional as F


            def adapt(model, optimizer, loader, cfg):
                model.train()
                for x, y in loader:
                    loss = F.cross_entropy(model(x), y)
                    if loss.item() < cfg.target:
                        cfg.frozen = True
                        model.eval()
                    if not cfg.frozen:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
            title="the eval comes with a flag that nothing clears and every backward is guarded by its "
                  "negation: once in eval mode, the loop trains nothing",
        ),
        bad(
            """
            import torch.nn.functional as F


            def adapt(model, optimizer, loader, cfg):
                model.train()
                for step, (x, y) in enumerate(loader):
                    loss = F.cross_entropy(model(x), y)
                    if loss.item() < cfg.target:
                        cfg.frozen = True
                        model.eval()
                    if not cfg.frozen:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    if step % cfg.patience == 0:
                        cfg.frozen = False
            """,
            line=10,
            fixed="""
            import torch.nn.functional as F


            def adapt(model, optimizer, loader, cfg):
                model.train()
                for step, (x, y) in enumerate(loader):
                    loss = F.cross_entropy(model(x), y)
                    if loss.item() < cfg.target:
                        cfg.frozen = True
                        model.eval()
                        model.train()
                    if not cfg.frozen:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    if step % cfg.patience == 0:
                        cfg.frozen = False
            """,
            title="the same guard, but the flag is cleared again later: training resumes in the eval mode",
        ),
    )

    def check(self, ctx):
        model = ctx.model(modes)
        reported = set()  # one finding per eval call, for the first model it leaves that matters
        for item in model.unrestored():
            if item.anchor in reported or model.undone_by_next_phase(item) or \
                    not self._mode_matters(ctx, model, item) or _no_backward_after(ctx, model, item):
                continue
            reported.add(item.anchor)
            key = display_key(item.key)
            evidence = [mode_fact_premise(ctx, item.fact, key, item.anchor),
                        premise("the training loop runs a backward after it", item.backward, "call"),
                        premise(f"no `{key}.train()` runs between the evaluation and that backward", item.loop, "use")]
            # what the backward trains: a forward of it with grad on in the loop, its parameters not
            # all frozen there (a model only forwarded under no_grad, or frozen, is not reported).
            # Required (issue 35, round 6): a loop that runs no forward of it may train another model
            # (a linear probe on detached features inside the evaluation, a client's copy of the
            # global model in a federated round): the eval then leaves nothing trained in eval mode.
            # On round 3 a true finding's forward ran through an alias the run does not tie to the
            # model (`model = self.train()`); such a finding is now reported only with `include_unproven`
            handed = model.loss_through_hand_over(item) if item.forward is None else None
            used = item.fact.evaluated
            if isinstance(used, (cst.For, cst.While)):
                evidence.append(premise("the eval mode is left over: it reaches another iteration of this loop",
                                        used, "use"))
            elif used is not None:
                evidence.append(premise("the eval mode serves something other than the training step here "
                                        "(a forward with grad off or outside the step loop, or code not followed)",
                                        used, "call"))
            if item.forward is not None:
                evidence.append(premise(f"the loop trains `{key}`: it runs forward with grad recording on here, its "
                                        f"parameters not all frozen", item.forward, "call"))
            elif handed is not None:
                evidence.append(premise(f"the loop trains `{key}`: the backward's loss comes from "
                                        f"`{_short_call(ctx, handed)}`, handed `{key}` with grad recording on",
                                        handed, "call"))
            else:
                evidence.append(unknown(f"the loop trains `{key}`: no forward of it with grad on is seen in the loop "
                                        f"(it may run in code not followed)", item.loop, "use"))
            if item.restored_part is not None:
                evidence.append(_rest_trained(ctx, item, key))
            yield self.report(item.anchor, self._message(ctx, item), _fix(ctx, item), evidence=evidence)

    @staticmethod
    def _mode_matters(ctx, model, item) -> bool:
        """False for a module whose mode changes nothing (a loss criterion; see TL302)."""
        node = item.fact.node
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and item.anchor is node:
            return model.mode_matters(node.func.value, ctx.index.scope_at(node))
        key = display_key(item.key)  # left in eval mode by a helper: the key names it in the loop
        if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)?", key):
            return True
        return model.mode_matters(cst.parse_expression(key), ctx.index.scope_at(item.anchor))

    def _message(self, ctx, item) -> str:
        fact = item.fact
        key = display_key(item.key)
        switch = ctx.code_for(fact.node)
        backward = _short_call(ctx, item.backward)
        switches = isinstance(fact.node, cst.Call) and isinstance(fact.node.func, cst.Attribute) and \
            fact.node.func.attr.value in ("eval", "train")
        if item.anchor is fact.node and switches:
            late = ctx.model(modes).until_train(item)
            what = f"`{switch}` in the training loop is undone only after `{backward}`" if late else \
                f"`{switch}` in the training loop is never undone"
        else:
            called = ctx.code_for(item.anchor.func) if isinstance(item.anchor, cst.Call) else "this call"
            inside = f" (`{switch}` in `{fact.via}()`)" if fact.via and switches else ""
            args = "(...)" if isinstance(item.anchor, cst.Call) and item.anchor.args else "()"
            what = f"`{called}{args}` leaves `{key}` in eval mode{inside} and nothing restores it"
        return (f"{what}: the loop keeps training `{key}` (`{backward}`) with dropout off and BatchNorm "
                f"frozen on its running statistics; call `{key}.train()` after the evaluation "
                f"(or restore the saved mode at its end)")


def _no_backward_after(ctx, model, item) -> bool:
    """The eval runs where a flag holds a value (`cfg.frozen = True` just before it, or `if
    cfg.frozen:` around it) that no code of the file ever changes, and every backward of the loop
    (and the one the item names) sits under a test that value makes false (`if not cfg.frozen:`):
    once the eval has run, no backward does, so its eval mode trains nothing (`held_flags`)."""
    eval_call = item.fact.node
    if not isinstance(eval_call, cst.Call) or item.anchor is not eval_call:
        return False
    index = ctx.index
    backwards = [item.backward] + [call for call in index.calls_under(item.loop)
                                   if model.training.is_backward(call, index.scope_at(call))]
    return all(excluded_after(index, eval_call, backward) is not None for backward in backwards)


def _rest_trained(ctx, item, key: str):
    """A part of the model was put back in train mode before the backward (`model.head.train()`
    after `model.eval()`): the rest of it left in eval mode matters only when the backward trains
    it too. Proven when an optimizer built in the loop's function (or, for `self.<model>`, its
    class) holds all of the model's parameters (`Adam(model.parameters())`); unknown otherwise (an optimizer over the part alone,
    `Adam(model.get_head_params())`, or one built out of sight: the rest may be frozen on purpose)."""
    part = ctx.code_for(item.restored_part.func.value) if isinstance(item.restored_part, cst.Call) and \
        isinstance(item.restored_part.func, cst.Attribute) else "a part of it"
    function = ctx.index.function_at(item.loop)
    region = function.node if function is not None else ctx.module
    if key.startswith("self.") and function is not None and function.class_name is not None:
        # `self.model`: an optimizer its class builds (in `__init__`, a setup method) holds it too
        region = next((a for a in ctx.index.ancestors(function.node) if isinstance(a, cst.ClassDef)), region)
    for call in ctx.index.subtree(region):
        if type(call) is not cst.Call:
            continue
        name = ctx.index.resolve(call.func, ctx.index.scope_at(call)) or ""
        if not name.startswith("torch.optim.") or not call.args:
            continue
        for node in ctx.index.subtree(call.args[0].value):
            if type(node) is cst.Call and isinstance(node.func, cst.Attribute) and \
                    node.func.attr.value in ("parameters", "named_parameters") and \
                    dotted(ctx.module, node.func.value) == key:
                return premise(f"the loop trains `{key}` beyond `{part}` (put back in train mode before the "
                               f"backward): the optimizer holds all of `{key}`'s parameters", call, "argument")
    return unknown(f"the loop trains `{key}` beyond `{part}`, which is put back in train mode before the "
                   f"backward: no optimizer built here is seen to hold the rest of its parameters",
                   item.restored_part, "argument")


def _short_call(ctx, call: cst.Call) -> str:
    """`loss.backward()` / `accelerator.backward(...)`, without a long receiver expression."""
    func = call.func
    if isinstance(func, cst.Attribute):
        receiver = ctx.code_for(func.value)
        prefix = f"{receiver}." if len(receiver) <= 30 else "..."
        return f"{prefix}{func.attr.value}({'...' if call.args else ''})"
    return f"{ctx.code_for(func)}(...)"


def _fix(ctx, item) -> FixSpec | None:
    """`model.train()` on the line after the evaluation call's statement; for an inlined
    `model.eval()` in an `if` branch of the loop, at the end of that branch."""
    key = display_key(item.key)
    if dotted(ctx.module, cst.parse_expression(key) if _parses(key) else cst.Name("_")) != key:
        return None
    index = ctx.index
    fact = item.fact
    anchor = item.anchor
    if anchor is fact.node and isinstance(anchor, cst.Call) and isinstance(anchor.func, cst.Attribute) \
            and anchor.func.attr.value in ("eval", "train"):  # the switch itself is in the loop
        line = own_line(index, item.anchor)
        block = block_of(index, line) if line is not None else None
        if block is None or not isinstance(index.parent(block), cst.If) or index.parent(block).body is not block:
            return None
        anchor = block.body[-1]
        if isinstance(anchor, cst.SimpleStatementLine) and \
                any(isinstance(s, (cst.Return, cst.Raise, cst.Break, cst.Continue)) for s in anchor.body):
            return None
    else:
        anchor = line_holding(index, item.anchor)
        if anchor is None or isinstance(anchor.body[0], (cst.Return, cst.Raise, cst.Break, cst.Continue)):
            return None  # nothing after that line runs
    return FixSpec(f"Call `{key}.train()` after the evaluation", safe=False,
                   lines=(after(anchor, f"{key}.train()"),))


def _parses(text: str) -> bool:
    try:
        cst.parse_expression(text)
    except Exception:
        return False
    return True
