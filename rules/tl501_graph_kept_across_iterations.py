"""TL501 graph-kept-across-iterations."""

from __future__ import annotations

import libcst as cst

from trainlint.model.dataflow import dataflow
from trainlint.finding import Severity
from trainlint.gate import iterates_loader, named
from trainlint.model import frameworks
from trainlint.model.framework_classes import ancestors
from trainlint.model.index import dotted_name, positional_args, walk, walk_expression
from trainlint.rule import FixSpec, Rule, bad, good
from trainlint.model.training import training_model
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import code, loader_premise, role_premise, training_premises

_STORE_METHODS = ("append", "extend", "insert", "appendleft")
# Framework hooks that run once per training batch: their body is an iteration of a hidden loop.
# (`training_step`: the framework models' "train" hooks; `train_step`: the usual name elsewhere)
_PER_BATCH_HOOKS = (*sorted(frameworks.hooks("train")), "train_step")


class GraphKeptAcrossIterations(Rule):
    code = "TL501"
    name = "graph-kept-across-iterations"
    severity = Severity.WARNING
    # off by default (measured): on code nobody on the team had read (rounds 5-7 of first contact,
    # ~900 judged findings), 24 of its 38 judged findings were false (8 of 9 in round 7) and no
    # mined bug-fix commit was one of its class; `--extend-select TL501` turns it on
    enabled_by_default = False
    summary = "A tensor that carries an autograd graph is kept across loop iterations"
    message = "a tensor with an autograd graph is kept across iterations: memory grows every step"
    # the store must run once per batch: a training loop, a loop over a loader, a per-batch hook
    triggers = ("backward", "loader", "Loader", "training_step", "train_step", "_dl", "dl_", " dl", "(dl")
    # a batch loop, as `_batch_iteration` finds one: a training loop (a backward and a step), a loop
    # over a loader, a per-batch hook. (A loop whose items feed a module or a loss is not one: see
    # `_iterates_data`; the gate no longer lets such files through, 68 of the benchmark's 652.)
    gate = (named("backward") & named("^step$")) | iterates_loader() | \
        named("^(" + "|".join(_PER_BATCH_HOOKS) + ")$")
    what_it_does = """
        Flags a loop that keeps a value carrying an autograd graph beyond its iteration: the loss
        (or a model output, or anything computed from them without `.item()`, `.detach()`,
        `float()`, `.tolist()` or `.numpy()`; the gradients `torch.autograd.grad` returns carry a
        graph only when it is called with `create_graph=True`) appended to a list, added to an accumulator, or stored
        in a dict, where the container was created before the loop (or is an attribute such as
        `self.history`, also in a Lightning `training_step`, whose returned loss Lightning
        backpropagates: that value carries a graph whatever computed it; the loop goes over
        batches: a training loop, a loop over a loader, or one whose items a forward takes in or a
        torch loss compares; a loop whose every turn steps another
        optimizer, picked by its loop variable (`optim = optims[level]`), goes over the parts of one
        update: the loop around it is the step); and a recurrent state fed back into
        the model batch after batch (`output, hidden = model(x, hidden)`) without being detached.

        It stays quiet on detached values, on values computed under `torch.no_grad()` /
        `torch.inference_mode()` (also in a function every caller runs that way, the callers in
        the project's other files included, and in
        `validation_step`/`test_step`/`predict_step`) or after a `torch.set_grad_enabled(False)`
        statement that every path to the value passes with no switch back on (a switch taken only
        under an `if` leaves recording unknown: quiet too), on integer results such as `argmax` and
        comparisons, on an accumulator reset inside the iteration, and on accumulators that are
        meant to carry the graph: a sum or list of losses that is backpropagated afterwards
        (`total = total + loss_i` then `total.backward()`, `torch.stack(losses).mean().backward()`)
        (also one element at a time, `[autograd.grad(s, params) for s in torch.cat(kept)]`)
        or returned to a caller that does so, or handed to (or read as the same global or `self.`
        attribute by) a same-file function this one calls whose backward it feeds (an episode's
        actor-critic update that sums the kept values and log-probabilities into its loss). A state is a name the assignment rebinds
        (`pipeline.unet = accelerator.unwrap_model(unet)` stores a module, it feeds nothing back),
        and calls named for what they do to a model (`unwrap_model`, `get_model`) run no forward;
        nor does a method of a project class (`self.update_actor(...)`, `agent.eval_model(...)`,
        defined in the class, a base class or another project file; not a `@property`): its name
        says nothing of what it returns, so what it hands back is not known to carry a graph.
        A state the forward hands back as the caller passed it, or as a new tensor made from data
        (`torch.tensor(...)`, a factory), on every return, gains no graph from it.
        The state's call must be shown to be a forward: its callee is built as a module (typed, or
        handed one by a caller), or another of its outputs is backpropagated; a name alone is no
        proof (unproven). A value fed back that the loop calls or asks for its parameters, state
        dict or mode is a module, not a tensor (`model, opt = surgeon.shrink_model(model)`).
        A module the file freezes and never turns back on (`emb.weight.requires_grad = False`,
        `net.requires_grad_(False)`, `p.requires_grad = False` over `net.parameters()`) gives a
        graph only through its inputs. What a project function or criterion returns is followed
        into its file (`loss, acc = self.crit.forward(out, y)` with `acc` counted from `eq` on
        detached scores: no graph), also through `from helpers import *`; a loss module handed to
        the function as a parameter is read as the class every caller passes (or its annotation,
        `loss_fn: PhysicsLoss`), and a dict it returns is as detached as every value its literal and
        its `parts[key] = ...` stores hold (`.item()`). A method of a project class that the call can
        only be (the object is one of the classes its bindings build, exactly one of which defines
        it) and that returns a forward of a submodule its class freezes (`requires_grad = False`
        over the submodule's parameters, a momentum encoder's) has a graph only through the
        arguments it hands that submodule.
        """
    why_bad = """
        A tensor produced by differentiable operations holds a reference to the node that made it,
        and through it to the whole graph of the step. `total_loss += loss` makes `total_loss` the
        output of one more addition node per iteration, so it ends up referencing every step's
        graph; `losses.append(loss)` keeps every step's graph reachable from the list. Where the
        graph was never backpropagated (an evaluation without `no_grad`, logged model outputs) the
        saved activations stay alive too. Memory grows with the number of iterations until the run
        slows down or dies with an out-of-memory error, long after the line that caused it.
        """
    fix_safety = """
        Unsafe: a detached value carries no gradient; if the kept value is meant to be
        differentiated through later (a loss summed over iterations on purpose), the fix stops
        that.
        """
    references = (
        "https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory",
        "https://pytorch.org/docs/stable/notes/autograd.html",
        "https://pytorch.org/docs/stable/generated/torch.Tensor.item.html",
    )
    examples = (
        good(
            """
            import torch
            from torch import nn


            class Pruned(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)

                def forward(self, tokens):
                    kept = tokens[:, ::2]
                    return self.proj(kept), kept.size(1) / tokens.size(1)


            model = Pruned(64)
            opt = torch.optim.AdamW(model.parameters())
            seen, ratio_sum = 0, 0.0
            for tokens, target in loader:
                out, ratio = model(tokens)
                loss = torch.nn.functional.mse_loss(out, target)
                opt.zero_grad()
                loss.backward()
                opt.step()
                batch, length = out.shape[:2]
                seen += batch * length
                ratio_sum += ratio * tokens.size(0)
            """,
            title="a keep ratio the model computes from sizes, and token counts: Python numbers",
        ),
        bad(
            """
            import torch
            from torch import nn


            class Gated(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)
                    self.gate = nn.Linear(dim, 1)

                def forward(self, tokens):
                    g = torch.sigmoid(self.gate(tokens))
                    return self.proj(tokens) * g, g.mean()


            model = Gated(64)
            opt = torch.optim.AdamW(model.parameters())
            gate_sum = 0.0
            for tokens, target in loader:
                out, gate = model(tokens)
                loss = torch.nn.functional.mse_loss(out, target)
                opt.zero_grad()
                loss.backward()
                opt.step()
                gate_sum += gate * tokens.size(0)
            """,
            fixed="""
            import torch
            from torch import nn


            class Gated(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)
                    self.gate = nn.Linear(dim, 1)

                def forward(self, tokens):
                    g = torch.sigmoid(self.gate(tokens))
                    return self.proj(tokens) * g, g.mean()


            model = Gated(64)
            opt = torch.optim.AdamW(model.parameters())
            gate_sum = 0.0
            for tokens, target in loader:
                out, gate = model(tokens)
                loss = torch.nn.functional.mse_loss(out, target)
                opt.zero_grad()
                loss.backward()
                opt.step()
                gate_sum += (gate * tokens.size(0)).detach()
            """,
            line=25,
            title="the model's second output is a mean of a gate: a tensor with the step's graph",
        ),
        good(
            """
            import torch


            class ComputeLoss:
                def __init__(self, bce):
                    self.bce = bce

                def __call__(self, preds, targets):
                    lbox = (preds[..., :4] - targets[..., :4]).abs().mean()
                    lcls = self.bce(preds[..., 4:], targets[..., 4:])
                    return lbox + lcls, torch.stack((lbox, lcls)).detach()


            compute_loss = ComputeLoss(torch.nn.BCEWithLogitsLoss())
            mloss = torch.zeros(2)
            for i, (images, targets) in enumerate(loader):
                loss, loss_items = compute_loss(model(images), targets)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                mloss = (mloss * i + loss_items) / (i + 1)
            """,
            title="a loss class returns its parts detached for logging (in another module too)",
        ),
        bad(
            """
            from collections import defaultdict

            totals = defaultdict(float)
            for images, targets in loader:
                loss_dict = model(images, targets)
                losses = sum(loss for loss in loss_dict.values())
                optimizer.zero_grad()
                losses.backward()
                optimizer.step()
                for name, value in loss_dict.items():
                    totals[name] += value
            """,
            line=11,
            fixed="""
            from collections import defaultdict

            totals = defaultdict(float)
            for images, targets in loader:
                loss_dict = model(images, targets)
                losses = sum(loss for loss in loss_dict.values())
                optimizer.zero_grad()
                losses.backward()
                optimizer.step()
                for name, value in loss_dict.items():
                    totals[name] += value.detach()
            """,
            title="a detection model's dict of losses summed per name for logging",
        ),
        good(
            """
            from collections import defaultdict

            totals = defaultdict(float)
            for images, targets in loader:
                loss_dict = model(images, targets)
                losses = sum(loss for loss in loss_dict.values())
                optimizer.zero_grad()
                losses.backward()
                optimizer.step()
                for name, value in loss_dict.items():
                    totals[name] += value.item()
            """,
            title="the per-name totals keep numbers",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F

            def saliency(model, loader):
                total = 0
                for x, y in loader:
                    x.requires_grad_(True)
                    loss = F.cross_entropy(model(x), y)
                    total = total + torch.autograd.grad(loss, x)[0].abs().sum(0)
                return total
            """,
            title="gradients from torch.autograd.grad without create_graph: plain tensors, no graph",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F

            def saliency(model, loader):
                total = 0
                for x, y in loader:
                    x.requires_grad_(True)
                    loss = F.cross_entropy(model(x), y)
                    total = total + torch.autograd.grad(loss, x, create_graph=True)[0].abs().sum(0)
                return total
            """,
            line=9,
            fixed="""
            import torch
            import torch.nn.functional as F

            def saliency(model, loader):
                total = 0
                for x, y in loader:
                    x.requires_grad_(True)
                    loss = F.cross_entropy(model(x), y)
                    total = total + torch.autograd.grad(loss, x, create_graph=True)[0].abs().sum(0).detach()
                return total
            """,
            title="gradients built with create_graph=True carry a graph of their own",
        ),
        bad(
            """
            import torch.nn.functional as F

            def train(model, loader, opt):
                losses = []
                for x, y in loader:
                    opt.zero_grad()
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                    opt.step()
                    losses.append(loss)
                return sum(losses) / len(losses)
            """,
            line=10,
            fixed="""
            import torch.nn.functional as F

            def train(model, loader, opt):
                losses = []
                for x, y in loader:
                    opt.zero_grad()
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                    opt.step()
                    losses.append(loss.detach())
                return sum(losses) / len(losses)
            """,
            title="a list of backpropagated losses",
        ),
        bad(
            """
            total_loss = 0.0
            for step, batch in enumerate(train_loader):
                outputs = model(**batch)
                loss = outputs.loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
                total_loss += loss
            print(total_loss / (step + 1))
            """,
            line=8,
            fixed="""
            total_loss = 0.0
            for step, batch in enumerate(train_loader):
                outputs = model(**batch)
                loss = outputs.loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
                total_loss += loss.detach()
            print(total_loss / (step + 1))
            """,
            title="an accumulator outside the loop (HF / Accelerate style)",
        ),
        bad(
            """
            import torch

            def predict(model, loader):
                model.eval()
                all_logits = []
                for x, _ in loader:
                    all_logits.append(model(x).cpu())
                return torch.cat(all_logits)
            """,
            line=7,
            fixed="""
            import torch

            def predict(model, loader):
                model.eval()
                all_logits = []
                for x, _ in loader:
                    all_logits.append(model(x).cpu().detach())
                return torch.cat(all_logits)
            """,
            title="model outputs kept by an evaluation that records a graph",
        ),
        bad(
            """
            import lightning as L
            import torch.nn.functional as F

            class Classifier(L.LightningModule):
                def __init__(self, net):
                    super().__init__()
                    self.net = net
                    self.train_losses = []

                def training_step(self, batch, batch_idx):
                    x, y = batch
                    loss = F.cross_entropy(self.net(x), y)
                    self.train_losses.append(loss)
                    return loss
            """,
            line=13,
            fixed="""
            import lightning as L
            import torch.nn.functional as F

            class Classifier(L.LightningModule):
                def __init__(self, net):
                    super().__init__()
                    self.net = net
                    self.train_losses = []

                def training_step(self, batch, batch_idx):
                    x, y = batch
                    loss = F.cross_entropy(self.net(x), y)
                    self.train_losses.append(loss.detach())
                    return loss
            """,
            title="an attribute filled by every Lightning training_step",
        ),
        good(
            """
            import lightning as L
            import torch.nn.functional as F

            class Classifier(L.LightningModule):
                def __init__(self, net):
                    super().__init__()
                    self.net = net
                    self.train_losses = []

                def training_step(self, batch, batch_idx):
                    x, y = batch
                    loss = F.cross_entropy(self.net(x), y)
                    self.train_losses.append(loss.detach())
                    return loss
            """,
            title="the same Lightning training_step keeps the returned loss detached",
        ),
        good(
            """
            def block_outputs(model, x):
                model.eval()
                outputs = []
                for block in model.blocks:
                    x = block(x)
                    outputs.append(x)
                return outputs
            """,
            title="outputs kept across a loop over a model's blocks: the turns are one forward, not batches",
        ),
        bad(
            """
            class Trainer:
                def fit(self, loader):
                    history = {}
                    for epoch in range(self.epochs):
                        for x, y in loader:
                            loss = self.criterion(self.model(x), y)
                            self.optimizer.zero_grad()
                            loss.backward()
                            self.optimizer.step()
                        history[epoch] = {"loss": loss}
                    return history
            """,
            line=10,
            title="a dict of per-epoch records holding the loss tensor",
        ),
        bad(
            """
            hidden = model.init_hidden(batch_size)
            for x, y in train_loader:
                optimizer.zero_grad()
                output, hidden = model(x, hidden)
                loss = criterion(output, y)
                loss.backward(retain_graph=True)
                optimizer.step()
            """,
            line=4,
            title="a recurrent state carried from batch to batch without detach",
        ),
        bad(
            """
            h, c = encoder.zero_state(batch_size)
            for step, (tokens, targets) in enumerate(train_loader):
                logits, (h, c) = lstm_model(tokens, (h, c))
                loss = criterion(logits.flatten(0, 1), targets.flatten())
                opt.zero_grad()
                loss.backward(retain_graph=True)
                opt.step()
            """,
            line=3,
            title="an LSTM's (h, c) pair unpacked and fed back every batch",
        ),
        good(
            """
            import torch


            def finetune(model, loader, surgeon, epochs, prune_at):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
                for epoch in range(epochs):
                    if epoch == prune_at:
                        model, optimizer = surgeon.shrink_model(model)
                    for x, y in loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
            title="a pruned model handed back once per epoch by a method named `*_model`: the value fed back is "
                  "a module (it is called and asked for its parameters), which carries no graph",
        ),
        bad(
            """
            import torch


            def train(tracker, loader, optimizer):
                memory = torch.zeros(1, 64)
                for frames, target in loader:
                    estimate, memory = tracker.recurrent_model(frames, memory)
                    loss = torch.nn.functional.mse_loss(estimate, target)
                    optimizer.zero_grad()
                    loss.backward(retain_graph=True)
                    optimizer.step()
            """,
            line=7,
            title="a state fed back into a callee only its name calls a model, whose other output is backpropagated: "
                  "a forward, proven by that use",
        ),
        good(
            """
            import torch


            def train(nets, optims, sampler, steps):
                for step in range(steps):
                    rays, target = sampler.sample()
                    outputs = []
                    for level in range(len(nets)):
                        optim = optims[level]
                        optim.zero_grad()
                        net = nets[level]
                        out = net(rays)
                        outputs.append(out)
                        loss = torch.nn.functional.mse_loss(out, target)
                        loss.backward()
                        optim.step()
                    log_levels(outputs)
            """,
            title="the inner loop goes over the levels of one update, each with its own optimizer: the list is "
                  "made anew every step and holds one step's outputs",
        ),
        bad(
            """
            import torch


            def train(nets, optims, sampler, steps):
                outputs = []
                for step in range(steps):
                    rays, target = sampler.sample()
                    for level in range(len(nets)):
                        optim = optims[level]
                        optim.zero_grad()
                        net = nets[level]
                        out = net(rays)
                        outputs.append(out)
                        loss = torch.nn.functional.mse_loss(out, target)
                        loss.backward()
                        optim.step()
                log_levels(outputs)
            """,
            line=13,
            fixed="""
            import torch


            def train(nets, optims, sampler, steps):
                outputs = []
                for step in range(steps):
                    rays, target = sampler.sample()
                    for level in range(len(nets)):
                        optim = optims[level]
                        optim.zero_grad()
                        net = nets[level]
                        out = net(rays)
                        outputs.append(out.detach())
                        loss = torch.nn.functional.mse_loss(out, target)
                        loss.backward()
                        optim.step()
                log_levels(outputs)
            """,
            title="the same levels, but the list is made once before the steps: it outlives every one of them",
        ),
        good(
            """
            from diffusers import UNet2DConditionModel

            unet = UNet2DConditionModel.from_pretrained(base_model, subfolder="unet")
            unet, optimizer, train_dataloader = accelerator.prepare(unet, optimizer, train_dataloader)
            for step, batch in enumerate(train_dataloader):
                loss = unet(batch["latents"], batch["t"]).sample.pow(2).mean()
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
                if step % validation_every == 0:
                    pipeline.unet = accelerator.unwrap_model(unet)
                    images = pipeline(prompt).images
            """,
            title="a module handed to a pipeline's attribute: no tensor is fed back",
        ),
        good(
            """
            model = build_model(cfg)
            for it, (x, y) in enumerate(train_loader):
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if it == swap_at:
                    model = accelerator.unwrap_model(model)
            """,
            title="unwrap_model hands the module back; it runs no forward",
        ),
        good(
            """
            import torch.nn.functional as F

            def train(model, loader, opt):
                losses = []
                for x, y in loader:
                    opt.zero_grad()
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                    opt.step()
                    losses.append(loss.item())
                return sum(losses) / len(losses)
            """,
            title="the Python number of the loss",
        ),
        good(
            """
            for batch in loader:
                optimizer.zero_grad()
                total = 0.0
                for head, target in zip(model(batch["x"]), batch["targets"]):
                    total = total + criterion(head, target)
                total.backward()
                optimizer.step()
            """,
            title="an accumulator reset every iteration and backpropagated (several losses)",
        ),
        good(
            """
            import torch

            for batch in loader:
                optimizer.zero_grad()
                micro_losses = []
                for chunk in batch.split(8):
                    micro_losses.append(loss_fn(model(chunk)))
                torch.stack(micro_losses).mean().backward()
                optimizer.step()
            """,
            title="a list of micro-batch losses backpropagated together",
        ),
        good(
            """
            import torch

            @torch.no_grad()
            def evaluate(model, loader):
                model.eval()
                outputs, preds = [], []
                for x, y in loader:
                    logits = model(x)
                    outputs.append(logits)
                    preds.append(logits.argmax(-1))
                return torch.cat(outputs), torch.cat(preds)
            """,
            title="outputs collected under no_grad",
        ),
        good(
            """
            import torch

            def evaluate(model, loader):
                correct = 0
                all_preds = []
                for x, y in loader:
                    logits = model(x)
                    all_preds.append(logits.argmax(dim=-1))
                    correct += (logits.argmax(-1) == y).sum()
                return correct, all_preds
            """,
            title="argmax and comparison results carry no graph",
        ),
        good(
            """
            def compute_loss(outputs, targets, criterion):
                total = 0
                for out, target in zip(outputs, targets):
                    total += criterion(out, target)
                return total
            """,
            title="a summed loss returned to the caller that backpropagates it",
        ),
        good(
            """
            import torch

            def reinforce(policy, env, optimizer, episodes):
                for _ in range(episodes):
                    state, done, log_probs, rewards = env.reset(), False, [], []
                    while not done:
                        probs = policy(torch.as_tensor(state))
                        action = torch.multinomial(probs, 1).item()
                        log_probs.append(torch.log(probs[action]))
                        state, reward, done, _ = env.step(action)
                        rewards.append(reward)
                    terms = [-lp * r for lp, r in zip(log_probs, discount(rewards))]
                    optimizer.zero_grad()
                    torch.stack(terms).sum().backward()
                    optimizer.step()
            """,
            title="REINFORCE: an episode's log-probabilities are backpropagated at its end",
        ),
        good(
            """
            import torch

            def update(rewards, gamma=0.99):
                returns, value_losses, policy_losses, running = [], [], [], 0.0
                for r in reversed(rewards):
                    running = r + gamma * running
                    returns.insert(0, running)
                for log_prob, value, ret in zip(actor.saved_log_probs, critic.saved_values, returns):
                    advantage = ret - value.item()
                    policy_losses.append(-log_prob * advantage)
                    value_losses.append(torch.nn.functional.smooth_l1_loss(value, torch.tensor([ret])))
                optimizer.zero_grad()
                (torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()).backward()
                optimizer.step()
                del actor.saved_log_probs[:]
                del critic.saved_values[:]

            def train(env, episodes):
                for episode in range(episodes):
                    state, done, rewards = env.reset(), False, []
                    while not done:
                        probs = actor(torch.as_tensor(state))
                        dist = torch.distributions.Categorical(probs)
                        action = dist.sample()
                        actor.saved_log_probs.append(dist.log_prob(action))
                        critic.saved_values.append(critic(torch.as_tensor(state)))
                        state, reward, done, _ = env.step(action.item())
                        rewards.append(reward)
                    update(rewards)
            """,
            title="actor-critic: the step's values and log-probabilities are kept for the episode's update, "
                  "which backpropagates and clears them",
        ),
        bad(
            """
            import torch

            def report(rewards):
                print(sum(rewards), torch.stack(critic.saved_values).mean().item())
                del critic.saved_values[:]

            def train(env, episodes):
                for episode in range(episodes):
                    state, done, rewards = env.reset(), False, []
                    while not done:
                        probs = actor(torch.as_tensor(state))
                        action = torch.distributions.Categorical(probs).sample()
                        critic.saved_values.append(critic(torch.as_tensor(state)))
                        loss = -torch.log(probs[action])
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        state, reward, done, _ = env.step(action.item())
                        rewards.append(reward)
                    report(rewards)
            """,
            line=13,
            fixed="""
            import torch

            def report(rewards):
                print(sum(rewards), torch.stack(critic.saved_values).mean().item())
                del critic.saved_values[:]

            def train(env, episodes):
                for episode in range(episodes):
                    state, done, rewards = env.reset(), False, []
                    while not done:
                        probs = actor(torch.as_tensor(state))
                        action = torch.distributions.Categorical(probs).sample()
                        critic.saved_values.append(critic(torch.as_tensor(state)).detach())
                        loss = -torch.log(probs[action])
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        state, reward, done, _ = env.step(action.item())
                        rewards.append(reward)
                    report(rewards)
            """,
            title="the critic's values kept for the episode's report, which only prints them: never "
                  "backpropagated",
        ),
        good(
            """
            import torch

            def collect(model, loader):
                outputs = []
                for x, _ in loader:
                    outputs.append(model(x))
                return outputs

            def main(model, val_loader):
                model.eval()
                with torch.inference_mode():
                    outputs = collect(model, val_loader)
            """,
            title="a helper that every caller runs under inference_mode",
        ),
        good(
            """
            def repackage(h):
                return tuple(t.detach() for t in h) if isinstance(h, tuple) else h.detach()

            hidden = model.init_hidden(batch_size)
            for x, y in train_loader:
                hidden = repackage(hidden)
                optimizer.zero_grad()
                output, hidden = model(x, hidden)
                loss = criterion(output, y)
                loss.backward()
                optimizer.step()
            """,
            title="truncated backpropagation through time: the state is detached every batch",
        ),
        bad(
            """
            smoothed = None
            for step, (x, y) in enumerate(loader):
                loss = loss_fn(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                smoothed = loss if smoothed is None else 0.98 * smoothed + 0.02 * loss
            """,
            line=7,
            title="an exponential moving average of the loss tensor",
        ),
        good(
            """
            smoothed = None
            for step, (x, y) in enumerate(loader):
                loss = loss_fn(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                value = loss.item()
                smoothed = value if smoothed is None else 0.98 * smoothed + 0.02 * value
            """,
            title="the moving average of the Python number",
        ),
        good(
            """
            running_loss = 0.0
            for i, (inputs, labels) in enumerate(trainloader):
                optimizer.zero_grad()
                loss = criterion(net(inputs), labels)
                loss.backward()
                optimizer.step()
                running_loss += loss.item() * inputs.size(0)
            """,
            title="running loss as a Python float",
        ),
        good(
            """
            import torch
            from torch import nn


            def hit_rate(scores, targets):
                rates = []
                best = scores.argmax(dim=1)
                hits = best.eq(targets).float().sum()
                rates.append(hits.mul_(100.0 / targets.size(0)))
                return rates


            class MarginHead(nn.Module):
                def forward(self, scores, targets):
                    loss = nn.functional.cross_entropy(scores * 30.0, targets)
                    return loss, hit_rate(scores.detach(), targets)[0]


            class Learner(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(64, 32)
                    self.head = MarginHead().cuda()
                    self.opt = torch.optim.SGD(self.parameters(), lr=0.1)

                def fit(self, loader):
                    total = 0
                    for feats, targets in loader:
                        self.opt.zero_grad()
                        loss, rate = self.head.forward(self.encoder(feats), targets)
                        loss.backward()
                        self.opt.step()
                        total += rate
                    print("total", total)
            """,
            title="a criterion's second result is a count of `eq` hits on detached scores: no graph",
        ),
        bad(
            """
            import torch
            from torch import nn


            class MarginHead(nn.Module):
                def forward(self, scores, targets):
                    loss = nn.functional.cross_entropy(scores * 30.0, targets)
                    return loss, scores.softmax(dim=1).max(dim=1)[0].mean()


            class Learner(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(64, 32)
                    self.head = MarginHead().cuda()
                    self.opt = torch.optim.SGD(self.parameters(), lr=0.1)

                def fit(self, loader):
                    total = 0
                    for feats, targets in loader:
                        self.opt.zero_grad()
                        loss, confidence = self.head.forward(self.encoder(feats), targets)
                        loss.backward()
                        self.opt.step()
                        total += confidence
                    print("total", total)
            """,
            line=25,
            fixed="""
            import torch
            from torch import nn


            class MarginHead(nn.Module):
                def forward(self, scores, targets):
                    loss = nn.functional.cross_entropy(scores * 30.0, targets)
                    return loss, scores.softmax(dim=1).max(dim=1)[0].mean()


            class Learner(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(64, 32)
                    self.head = MarginHead().cuda()
                    self.opt = torch.optim.SGD(self.parameters(), lr=0.1)

                def fit(self, loader):
                    total = 0
                    for feats, targets in loader:
                        self.opt.zero_grad()
                        loss, confidence = self.head.forward(self.encoder(feats), targets)
                        loss.backward()
                        self.opt.step()
                        total += confidence.detach()
                    print("total", total)
            """,
            title="a criterion's second result is the mean confidence of the undetached scores",
        ),
        good(
            """
            import torch
            from torch import nn
            import pytorch_lightning as pl

            class Tower(nn.Module):
                def __init__(self, count, dim):
                    super().__init__()
                    self.table = nn.Embedding(count, dim)

                def forward(self, ids):
                    return self.table(ids)

            class Factors(pl.LightningModule):
                def __init__(self, n_users, n_items, dim, reg):
                    super().__init__()
                    self.user_tower = Tower(n_users, dim)
                    self.item_tower = Tower(n_items, dim)
                    self.user_tower.requires_grad_(False)
                    self.item_tower.requires_grad_(False)
                    self.reg = reg

                def training_step(self, batch, batch_idx):
                    user_ids, item_ids, ratings = batch
                    v = self.item_tower(item_ids)
                    gram = v.transpose(1, 2) @ v + self.reg
                    rhs = v.transpose(1, 2) @ ratings.unsqueeze(-1)
                    solved = torch.linalg.solve(gram, rhs).squeeze(-1)
                    self.user_tower.table.weight[user_ids] = solved
                    return ((self.user_tower(user_ids).unsqueeze(1) * v).sum(-1) - ratings).pow(2).mean()
            """,
            title="a closed-form solve from towers whose parameters are frozen: no graph to keep",
        ),
        bad(
            """
            import torch
            from torch import nn
            import pytorch_lightning as pl


            class Tower(nn.Module):
                def __init__(self, count, dim):
                    super().__init__()
                    self.table = nn.Embedding(count, dim)

                def forward(self, ids):
                    return self.table(ids)


            class Factors(pl.LightningModule):
                def __init__(self, n_users, n_items, dim, reg):
                    super().__init__()
                    self.user_tower = Tower(n_users, dim)
                    self.item_tower = Tower(n_items, dim)
                    self.user_tower.requires_grad_(False)
                    self.item_tower.requires_grad_(False)
                    self.reg = reg

                def thaw(self):
                    self.item_tower.requires_grad_(True)

                def training_step(self, batch, batch_idx):
                    user_ids, item_ids, ratings = batch
                    v = self.item_tower(item_ids)
                    gram = v.transpose(1, 2) @ v + self.reg
                    rhs = v.transpose(1, 2) @ ratings.unsqueeze(-1)
                    solved = torch.linalg.solve(gram, rhs).squeeze(-1)
                    self.user_tower.table.weight[user_ids] = solved
                    return ((self.user_tower(user_ids).unsqueeze(1) * v).sum(-1) - ratings).pow(2).mean()
            """,
            line=33,
            fixed="""
            import torch
            from torch import nn
            import pytorch_lightning as pl


            class Tower(nn.Module):
                def __init__(self, count, dim):
                    super().__init__()
                    self.table = nn.Embedding(count, dim)

                def forward(self, ids):
                    return self.table(ids)


            class Factors(pl.LightningModule):
                def __init__(self, n_users, n_items, dim, reg):
                    super().__init__()
                    self.user_tower = Tower(n_users, dim)
                    self.item_tower = Tower(n_items, dim)
                    self.user_tower.requires_grad_(False)
                    self.item_tower.requires_grad_(False)
                    self.reg = reg

                def thaw(self):
                    self.item_tower.requires_grad_(True)

                def training_step(self, batch, batch_idx):
                    user_ids, item_ids, ratings = batch
                    v = self.item_tower(item_ids)
                    gram = v.transpose(1, 2) @ v + self.reg
                    rhs = v.transpose(1, 2) @ ratings.unsqueeze(-1)
                    solved = torch.linalg.solve(gram, rhs).squeeze(-1)
                    self.user_tower.table.weight[user_ids] = solved.detach()
                    return ((self.user_tower(user_ids).unsqueeze(1) * v).sum(-1) - ratings).pow(2).mean()
            """,
            title="the item tower is turned back on elsewhere: the solve may carry its graph",
        ),
        good(
            """
            import torch
            from torch import nn


            class Learner:
                def __init__(self, width):
                    self.policy = nn.Linear(width, 1)
                    self.opt = torch.optim.SGD(self.policy.parameters(), lr=0.1)

                def actor_update(self, obs, target):
                    err = nn.functional.smooth_l1_loss(self.policy(obs).squeeze(-1), target)
                    self.opt.zero_grad()
                    err.backward()
                    self.opt.step()
                    return {"err": err.item(), "n": obs.size(0)}

                def fit(self, loader):
                    err_sum = 0.0
                    for obs, target in loader:
                        stats = self.actor_update(obs, target)
                        err_sum += stats["err"]
                    return err_sum
            """,
            title="a method of the class (named like a model) runs and hands back numbers: no forward",
        ),
        bad(
            """
            import torch
            from torch import nn


            class Learner:
                def __init__(self, width):
                    self.actor_update = nn.Linear(width, 1)
                    self.opt = torch.optim.SGD(self.actor_update.parameters(), lr=0.1)

                def fit(self, loader):
                    err_sum = 0.0
                    for obs, target in loader:
                        err = nn.functional.smooth_l1_loss(self.actor_update(obs).squeeze(-1), target)
                        self.opt.zero_grad()
                        err.backward()
                        self.opt.step()
                        err_sum += err
                    return err_sum
            """,
            line=17,
            fixed="""
            import torch
            from torch import nn


            class Learner:
                def __init__(self, width):
                    self.actor_update = nn.Linear(width, 1)
                    self.opt = torch.optim.SGD(self.actor_update.parameters(), lr=0.1)

                def fit(self, loader):
                    err_sum = 0.0
                    for obs, target in loader:
                        err = nn.functional.smooth_l1_loss(self.actor_update(obs).squeeze(-1), target)
                        self.opt.zero_grad()
                        err.backward()
                        self.opt.step()
                        err_sum += err.detach()
                    return err_sum
            """,
            title="the same name bound to a module: calling it is a forward",
        ),
        good(
            """
            import torch
            from torch import nn


            class Decoder(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.cell = nn.LSTMCell(width, width)
                    self.proj = nn.Linear(width, width)

                def forward(self, x, steps):
                    h = c = torch.zeros(x.size(0), self.cell.hidden_size)
                    frames = []
                    for t in range(steps):
                        h, c = self.cell(x[:, t], (h, c))
                        frames.append(self.proj(h))
                    return torch.stack(frames, dim=1)
            """,
            title="a decoder unrolled over time steps inside one forward: one graph by design",
        ),
        good(
            """
            import torch
            from torch import nn
            from torch.utils.data import DataLoader


            class Solver:
                def __init__(self, dataset):
                    self.net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
                    self.dataset = dataset
                    self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3)

                def data_loss(self):
                    loss = 0
                    for x, y in DataLoader(self.dataset, batch_size=64):
                        loss += nn.functional.mse_loss(self.net(x), y)
                    return loss

                def update(self):
                    self.opt.zero_grad()
                    total = self.data_loss() + 0.1 * sum(p.pow(2).sum() for p in self.net.parameters())
                    total.backward()
                    self.opt.step()
                    return total.item()
            """,
            title="losses summed over a loader and returned to the caller that backpropagates them",
        ),
        bad(
            """
            import torch
            from torch import nn
            from torch.utils.data import DataLoader


            class Solver:
                def __init__(self, dataset):
                    self.net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
                    self.dataset = dataset
                    self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3)

                def data_loss(self):
                    loss = 0
                    for x, y in DataLoader(self.dataset, batch_size=64):
                        loss += nn.functional.mse_loss(self.net(x), y)
                    return loss

                def update(self, x, y):
                    self.opt.zero_grad()
                    nn.functional.mse_loss(self.net(x), y).backward()
                    self.opt.step()

                def report(self):
                    total = self.data_loss()
                    print(f"loss {total.item():.4f}")
            """,
            line=15,
            fixed="""
            import torch
            from torch import nn
            from torch.utils.data import DataLoader


            class Solver:
                def __init__(self, dataset):
                    self.net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
                    self.dataset = dataset
                    self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3)

                def data_loss(self):
                    loss = 0
                    for x, y in DataLoader(self.dataset, batch_size=64):
                        loss += nn.functional.mse_loss(self.net(x), y).detach()
                    return loss

                def update(self, x, y):
                    self.opt.zero_grad()
                    nn.functional.mse_loss(self.net(x), y).backward()
                    self.opt.step()

                def report(self):
                    total = self.data_loss()
                    print(f"loss {total.item():.4f}")
            """,
            title="the same sum returned to a caller that only prints it: every batch's graph is kept for nothing",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            def fit(net, opt, train_set, val_set, epochs):
                train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
                val_loader = DataLoader(val_set, batch_size=64)
                for epoch in range(epochs):
                    net.train()
                    torch.set_grad_enabled(True)
                    for x, y in train_loader:
                        loss = F.cross_entropy(net(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    net.eval()
                    torch.set_grad_enabled(False)
                    val_loss = 0
                    for x, y in val_loader:
                        val_loss += F.cross_entropy(net(x), y)
                    print(epoch, val_loss / len(val_loader))
            """,
            title="recording switched off by a `torch.set_grad_enabled(False)` statement before the "
                  "validation loop (and on again at the top of each epoch): no graph to keep",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            def fit(net, opt, train_set, val_set, epochs):
                train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
                val_loader = DataLoader(val_set, batch_size=64)
                for epoch in range(epochs):
                    net.train()
                    for x, y in train_loader:
                        loss = F.cross_entropy(net(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    net.eval()
                    torch.set_grad_enabled(False)
                    sample = net(next(iter(val_loader))[0])
                    torch.set_grad_enabled(True)
                    val_loss = 0
                    for x, y in val_loader:
                        val_loss += F.cross_entropy(net(x), y)
                    print(epoch, sample.shape, val_loss / len(val_loader))
            """,
            line=22,
            fixed="""
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            def fit(net, opt, train_set, val_set, epochs):
                train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
                val_loader = DataLoader(val_set, batch_size=64)
                for epoch in range(epochs):
                    net.train()
                    for x, y in train_loader:
                        loss = F.cross_entropy(net(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    net.eval()
                    torch.set_grad_enabled(False)
                    sample = net(next(iter(val_loader))[0])
                    torch.set_grad_enabled(True)
                    val_loss = 0
                    for x, y in val_loader:
                        val_loss += F.cross_entropy(net(x), y).detach()
                    print(epoch, sample.shape, val_loss / len(val_loader))
            """,
            title="switched off, then on again before the validation loop: its losses record a graph",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            def curvature(model, dataset, batches):
                model.train()
                scores = []
                for x, y in DataLoader(dataset, batch_size=16):
                    scores.append(F.log_softmax(model(x), dim=1).gather(1, y[:, None]))
                    if len(scores) == batches:
                        break
                per_sample = torch.cat(scores).flatten()
                grads = [torch.autograd.grad(s, list(model.parameters()), retain_graph=True) for s in per_sample]
                return [torch.stack(g).pow(2).mean(0) for g in zip(*grads)]
            """,
            title="the kept scores are differentiated one by one after the loop, through a comprehension "
                  "over them: their graphs are the point",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            def curvature(model, dataset, batches):
                model.train()
                scores = []
                for x, y in DataLoader(dataset, batch_size=16):
                    scores.append(F.log_softmax(model(x), dim=1).gather(1, y[:, None]))
                    if len(scores) == batches:
                        break
                per_sample = torch.cat(scores).flatten()
                print([s.item() for s in per_sample])
                return [p.grad for p in model.parameters()]
            """,
            line=10,
            fixed="""
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            def curvature(model, dataset, batches):
                model.train()
                scores = []
                for x, y in DataLoader(dataset, batch_size=16):
                    scores.append(F.log_softmax(model(x), dim=1).gather(1, y[:, None]).detach())
                    if len(scores) == batches:
                        break
                per_sample = torch.cat(scores).flatten()
                print([s.item() for s in per_sample])
                return [p.grad for p in model.parameters()]
            """,
            title="the kept scores are only read as numbers after the loop: no backward needs their graphs",
        ),
        good(
            """
            import numpy as np
            import torch
            from torch import nn


            class Aligner(nn.Module):
                def __init__(self, n, dim):
                    super().__init__()
                    self.w = nn.Parameter(torch.rand(n, dim))

                def forward(self, k, bandwidth):
                    z = k @ self.w
                    if bandwidth == 0:
                        bandwidth = torch.tensor([np.median(z.detach().numpy())])
                    return (z / bandwidth).pow(2).mean(), bandwidth


            def fit(k, steps):
                model = Aligner(k.shape[0], 8)
                opt = torch.optim.Adam(model.parameters())
                bandwidth = torch.zeros(1)
                for step in range(steps):
                    opt.zero_grad()
                    loss, bandwidth = model(k, bandwidth)
                    loss.backward()
                    opt.step()
            """,
            title="the forward hands the state back as it was given, or as a new tensor made from data: "
                  "no graph rides on it",
        ),
        bad(
            """
            import numpy as np
            import torch
            from torch import nn


            class Aligner(nn.Module):
                def __init__(self, n, dim):
                    super().__init__()
                    self.w = nn.Parameter(torch.rand(n, dim))

                def forward(self, k, bandwidth):
                    z = k @ self.w
                    if bandwidth == 0:
                        bandwidth = torch.tensor([np.median(z.detach().numpy())])
                    bandwidth = 0.9 * bandwidth + 0.1 * z.var()
                    return (z / bandwidth).pow(2).mean(), bandwidth


            def fit(k, steps):
                model = Aligner(k.shape[0], 8)
                opt = torch.optim.Adam(model.parameters())
                bandwidth = torch.zeros(1)
                for step in range(steps):
                    opt.zero_grad()
                    loss, bandwidth = model(k, bandwidth)
                    loss.backward()
                    opt.step()
            """,
            line=25,
            title="the forward blends the state with a statistic of its output: the state carries the graph",
        ),
        good(
            """
            from torch import nn
            from torch.utils.data import DataLoader

            def train(model: nn.Module, data, update, w):
                for x, y in DataLoader(data, batch_size=32):
                    out = model(x, y)
                    loss = out.loss
                    if out.aux is not None:
                        loss += w * out.aux
                    update(loss)
            """,
            title="the loss is bound afresh from the output's `.loss` at every step before the term is added "
                  "(`out.loss` reads the output's attribute, not the variable `loss`)",
        ),
        bad(
            """
            from torch import nn
            from torch.utils.data import DataLoader

            def train(model: nn.Module, data, update, w):
                loss = 0
                for x, y in DataLoader(data, batch_size=32):
                    out = model(x, y)
                    update(out.loss)
                    loss = loss + w * out.aux
                print(float(loss))
            """,
            line=9,
            fixed="""
            from torch import nn
            from torch.utils.data import DataLoader

            def train(model: nn.Module, data, update, w):
                loss = 0
                for x, y in DataLoader(data, batch_size=32):
                    out = model(x, y)
                    update(out.loss)
                    loss = loss + (w * out.aux).detach()
                print(float(loss))
            """,
            title="the running sum reads itself (not only the output's `.loss`): it chains every step's graph",
        ),
        good(
            """
            from dataclasses import dataclass

            import torch.nn.functional as F


            @dataclass
            class Parts:
                total: float
                ce: float


            def joint_loss(logits, y):
                ce = F.cross_entropy(logits, y)
                total = ce + 0.1 * logits.pow(2).mean()
                return total, Parts(total=float(total.item()), ce=ce.item())


            def train(model, loader, opt):
                history = []
                for x, y in loader:
                    loss, parts = joint_loss(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    history.append(parts.ce)
                print(sum(history) / len(history))
            """,
            title="the loss function hands back a record whose fields it filled with `.item()`/`float()`: "
                  "a field of it holds a number, whatever the loss carries",
        ),
        bad(
            """
            from dataclasses import dataclass

            import torch.nn.functional as F


            @dataclass
            class Parts:
                total: float
                ce: float


            def train(model, loader, opt):
                history = []
                for x, y in loader:
                    ce = F.cross_entropy(model(x), y)
                    opt.zero_grad()
                    ce.backward()
                    opt.step()
                    parts = Parts(total=float(ce.item()), ce=ce)
                    history.append(parts.ce)
                print(sum(history) / len(history))
            """,
            line=20,
            fixed="""
            from dataclasses import dataclass

            import torch.nn.functional as F


            @dataclass
            class Parts:
                total: float
                ce: float


            def train(model, loader, opt):
                history = []
                for x, y in loader:
                    ce = F.cross_entropy(model(x), y)
                    opt.zero_grad()
                    ce.backward()
                    opt.step()
                    parts = Parts(total=float(ce.item()), ce=ce)
                    history.append(parts.ce.detach())
                print(sum(history) / len(history))
            """,
            title="the same record, but the field kept is given the loss tensor itself",
        ),
        good(
            """
            import torch
            from torch import nn


            class PhysicsLoss(nn.Module):
                def forward(self, pred, target):
                    fit = (pred - target).pow(2).mean()
                    smooth = (pred[:, 1:] - pred[:, :-1]).abs().mean()
                    total = fit + 0.1 * smooth
                    parts = {"fit": fit.item()}
                    parts["smooth"] = smooth.item()
                    parts["total"] = total.item()
                    return total, parts


            def run_epoch(model, loader, optimizer, loss_fn: PhysicsLoss):
                model.train()
                sums = {"fit": 0.0, "smooth": 0.0, "total": 0.0}
                for x, y in loader:
                    loss, parts = loss_fn(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    sums["total"] += parts["total"]
                    sums["fit"] += parts.get("fit", 0.0)
                print(sums)
            """,
            title="a loss module handed in (typed) returns its parts as numbers: `.item()` in a dict",
        ),
        bad(
            """
            import torch
            from torch import nn


            class PhysicsLoss(nn.Module):
                def forward(self, pred, target):
                    fit = (pred - target).pow(2).mean()
                    smooth = (pred[:, 1:] - pred[:, :-1]).abs().mean()
                    total = fit + 0.1 * smooth
                    parts = {"fit": fit.item()}
                    parts["smooth"] = smooth.item()
                    parts["total"] = total
                    return total, parts


            def run_epoch(model, loader, optimizer, loss_fn: PhysicsLoss):
                model.train()
                sums = {"fit": 0.0, "smooth": 0.0, "total": 0.0}
                for x, y in loader:
                    loss, parts = loss_fn(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    sums["total"] += parts["total"]
                print(sums)
            """,
            line=24,
            fixed="""
            import torch
            from torch import nn


            class PhysicsLoss(nn.Module):
                def forward(self, pred, target):
                    fit = (pred - target).pow(2).mean()
                    smooth = (pred[:, 1:] - pred[:, :-1]).abs().mean()
                    total = fit + 0.1 * smooth
                    parts = {"fit": fit.item()}
                    parts["smooth"] = smooth.item()
                    parts["total"] = total
                    return total, parts


            def run_epoch(model, loader, optimizer, loss_fn: PhysicsLoss):
                model.train()
                sums = {"fit": 0.0, "smooth": 0.0, "total": 0.0}
                for x, y in loader:
                    loss, parts = loss_fn(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    sums["total"] += parts["total"].detach()
                print(sums)
            """,
            title="the same loss module stores the total itself in its dict of parts",
        ),
        good(
            """
            import copy

            import torch
            from torch import nn


            class Plain(nn.Module):
                def __init__(self, encoder):
                    super().__init__()
                    self.online = encoder

                def forward(self, x):
                    return self.online(x)


            class Momentum(nn.Module):
                def __init__(self, encoder, decay=0.99):
                    super().__init__()
                    self.online = encoder
                    self.target = copy.deepcopy(encoder)
                    self.decay = decay
                    for online, target in zip(self.online.parameters(), self.target.parameters()):
                        target.requires_grad = False

                def forward(self, x):
                    return self.online(x)

                def key_encoder(self, x):
                    return self.target(x)


            def cluster_epoch(net, loader, optimizer):
                net.train()
                kept = []
                for views, _ in loader:
                    loss = net(views).pow(2).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    kept.append(net.key_encoder(views))
                print(torch.cat(kept).shape)


            def main(encoder, loader, slow):
                if slow:
                    net = Momentum(encoder).cuda()
                else:
                    net = Plain(encoder).cuda()
                optimizer = torch.optim.SGD(net.online.parameters(), lr=0.05)
                return cluster_epoch(net, loader, optimizer)
            """,
            title="a method of the class runs a key encoder whose parameters the class freezes: no graph",
        ),
        bad(
            """
            import copy

            import torch
            from torch import nn


            class Plain(nn.Module):
                def __init__(self, encoder):
                    super().__init__()
                    self.online = encoder

                def forward(self, x):
                    return self.online(x)


            class Momentum(nn.Module):
                def __init__(self, encoder, decay=0.99):
                    super().__init__()
                    self.online = encoder
                    self.target = copy.deepcopy(encoder)
                    self.decay = decay
                    for online, target in zip(self.online.parameters(), self.target.parameters()):
                        target.requires_grad = False

                def forward(self, x):
                    return self.online(x)

                def key_encoder(self, x):
                    return self.target(x)


            def cluster_epoch(net, loader, optimizer):
                net.train()
                kept = []
                for views, _ in loader:
                    loss = net(views).pow(2).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    kept.append(net.key_encoder(net(views)))
                print(torch.cat(kept).shape)


            def main(encoder, loader, slow):
                if slow:
                    net = Momentum(encoder).cuda()
                else:
                    net = Plain(encoder).cuda()
                optimizer = torch.optim.SGD(net.online.parameters(), lr=0.05)
                return cluster_epoch(net, loader, optimizer)
            """,
            line=40,
            fixed="""
            import copy

            import torch
            from torch import nn


            class Plain(nn.Module):
                def __init__(self, encoder):
                    super().__init__()
                    self.online = encoder

                def forward(self, x):
                    return self.online(x)


            class Momentum(nn.Module):
                def __init__(self, encoder, decay=0.99):
                    super().__init__()
                    self.online = encoder
                    self.target = copy.deepcopy(encoder)
                    self.decay = decay
                    for online, target in zip(self.online.parameters(), self.target.parameters()):
                        target.requires_grad = False

                def forward(self, x):
                    return self.online(x)

                def key_encoder(self, x):
                    return self.target(x)


            def cluster_epoch(net, loader, optimizer):
                net.train()
                kept = []
                for views, _ in loader:
                    loss = net(views).pow(2).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    kept.append(net.key_encoder(net(views)).detach())
                print(torch.cat(kept).shape)


            def main(encoder, loader, slow):
                if slow:
                    net = Momentum(encoder).cuda()
                else:
                    net = Plain(encoder).cuda()
                optimizer = torch.optim.SGD(net.online.parameters(), lr=0.05)
                return cluster_epoch(net, loader, optimizer)
            """,
            title="the same frozen key encoder, handed the online output: the graph comes through its input",
        ),
    )

    def check(self, ctx):
        flow = ctx.model(dataflow)
        index = ctx.index
        # per loop and per function, computed once: a file of many stores must not re-walk them
        self._resets: dict[cst.CSTNode, dict[str, list[cst.CSTNode]]] = {}
        self._returned: dict[cst.CSTNode, tuple[set[str], set[str]]] = {}
        seen: set[cst.CSTNode] = set()
        regions: list[cst.CSTNode] = list(index.loops)
        regions += [f.node for f in index.functions if f.class_name and f.name in _PER_BATCH_HOOKS]
        for region in regions:
            body = region.body
            for node in walk(body):
                if type(node) not in _STORE_NODES or node in seen:
                    continue  # (the only nodes `_as_store` and the carried-state check read)
                store = _as_store(node)
                if store is None:
                    if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
                        seen.add(node)
                        report = self._check_carried_state(ctx, flow, node)
                        if report is not None:
                            yield report
                    continue
                seen.add(node)
                report = self._check_store(ctx, flow, node, *store)
                if report is not None:
                    yield report

    def _check_carried_state(self, ctx, flow, node):
        """`out, hidden = model(x, hidden)` with `hidden` from the previous batch, never detached."""
        targets = {name for t in node.targets for name in _bound_names(t.target)}
        arguments = _names_read(node.value)
        scope = flow.scope_of(node)
        if not flow.is_model(node.value.func, scope):
            return None
        for name in sorted(targets & arguments):
            loop = _batch_iteration(ctx, flow, node)
            if loop is None or isinstance(loop, cst.FunctionDef):
                return None
            if not any(flow.before(b.node, loop) for b in flow.bindings_in_function(name, node)):
                continue  # created inside the batch loop: starts fresh every batch
            if _state_cut_within(flow, loop, name, node):
                continue
            if flow.carries_graph(node.value) is not True:
                return None
            if flow.handed_back(node, name):
                continue  # the forward hands `name` back as it was given, or new without a graph
            if _used_as_module(flow, name, loop):
                return None  # `model = pruner.prune_model(model)`: a module is fed back, no tensor
            forward = _forward_premise(ctx, flow, node, targets & arguments, scope)
            return self.report(
                node,
                f"`{name}` is fed back into `{ctx.code_for(node.value.func)}` on the next iteration of "
                f"`{_loop_header(ctx, loop)}` without `.detach()`: every batch's graph stays attached to "
                f"it, so memory grows and backward runs through all earlier batches (or fails without "
                f"`retain_graph=True`); detach it at the start of each batch (`{name} = {name}.detach()`, "
                "or a tuple of detached tensors for an LSTM)",
                evidence=[forward,
                          premise(f"`{name}` is bound before `{_loop_header(ctx, loop)}` and fed back on each "
                                  "iteration, never detached", node, "use"),
                          premise("the loop repeats over batches", loop, "use")],
            )
        return None

    def _check_store(self, ctx, flow, node, container, value, verb):
        key = dotted_name(container)
        if key is None or key == "self":
            return None
        loop = _batch_iteration(ctx, flow, node)
        if loop is None:
            return None  # loops over layers, configs or files: not an iteration over batches
        if not key.startswith("self.") and isinstance(loop, cst.FunctionDef):
            return None  # in a per-batch hook only attributes outlive the call
        framework = None
        carries = flow.carries_graph(value)
        if carries is None:  # unknown: a framework that backpropagates what the hook returns proves it
            framework = _returned_for_backward(ctx, flow, loop, value)
        if carries is not True and framework is None:
            return None
        if loop not in self._resets:
            self._resets[loop] = _resets_in(loop, flow.index)
        if any(reset is not node for reset in self._resets[loop].get(key, ())):
            return None  # rebound or cleared inside the iteration: it does not outlive it
        owner = flow._owner(node)
        if owner not in self._returned:
            # what feeds the function's backward calls and its return values is the same for every
            # store in it (names are followed through the function's bindings): asked once
            returned = [n.value for n in flow.index.subtree(owner) if type(n) in _RETURNS  # every node: no ABC isinstance
                        and n.value is not None and flow._owner(n) is owner]
            self._returned[owner] = (flow.names_feeding(flow.backward_roots(owner), node),
                                     flow.names_feeding(returned, node))
        backpropagated, returned_names = self._returned[owner]
        if key in backpropagated:
            return None  # the kept graph is backpropagated: the point of keeping it
        if key in flow.backpropagated_by_calls(owner):
            return None  # ... by a function this one calls (an episode's update): needed until then
        if key in returned_names and not _backpropagated_each_iteration(flow, loop, value) \
                and (not _iterates_data(ctx, flow, loop) or _returned_to_a_backward(ctx, flow, owner)):
            return None  # a sum of loss terms handed to the caller, which backpropagates it
        what = ctx.code_for(value)
        where = _describe_iteration(ctx, loop)
        fix = None
        if isinstance(value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
            detached = cst.Call(cst.Attribute(value, cst.Name("detach")))
            fix = FixSpec(f"Keep `{what}.detach()` instead", safe=False, replacements=((value, detached),))
        elif isinstance(value, (cst.BinaryOperation, cst.UnaryOperation)) and "\n" not in what:
            # a running average of graph-carrying tensors: detach the result
            inner = what if value.lpar else f"({what})"
            fix = FixSpec(f"Keep `{inner}.detach()` instead", safe=False,
                          replacements=((value, f"{inner}.detach()"),))
        if fix is not None:
            # `(a * b).item()`, not `a * b.item()`: a compound value is wrapped before the method
            kept = f"({what})" if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation)) and not value.lpar \
                else what
            instead = f"keep `{kept}.item()` for logging or `{kept}.detach()` for a tensor"
        else:
            instead = "keep the loss's `.item()` for logging or its `.detach()` for a tensor"
        return self.report(
            node,
            f"`{key}` {verb} `{what}`, which carries its autograd graph, and outlives {where}: every "
            f"step's graph stays reachable and memory grows; {instead}",
            fix,
            evidence=[premise(f"`{what[:60]}` carries an autograd graph (computed from a forward, never detached)",
                              value, "use") if framework is None else
                      premise(f"`{what[:60]}` carries an autograd graph: `{loop.name.value}` returns it and "
                              f"`{framework}` backpropagates what its `{loop.name.value}` returns", value, "framework"),
                      premise(f"`{key}` outlives the iteration: it is bound outside it and never reset inside",
                              node, "use"),
                      premise(f"the loop repeats: {where}", loop, "use")],
        )


def _as_store(node: cst.CSTNode):
    """(container, value, verb) for `c.append(v)`, `c += v`, `c = c + v`, `c[k] = v` (dict)."""
    if isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
        call = node.value
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _STORE_METHODS:
            args = positional_args(call)
            if args:
                container = func.value
                while isinstance(container, cst.Subscript):
                    container = container.value
                return container, args[-1].value, "keeps"
        return None
    if isinstance(node, cst.AugAssign) and isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign)):
        container = node.target
        while isinstance(container, cst.Subscript):  # `totals[name] += value`: the dict keeps the sum
            container = container.value
        return container, node.value, "accumulates"
    if isinstance(node, cst.Assign) and len(node.targets) == 1:
        target = node.targets[0].target
        value = node.value
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Subtract)):
            key = dotted_name(target)
            if key is not None and dotted_name(value.left) == key:
                return target, value.right, "accumulates"
        if isinstance(value, (cst.BinaryOperation, cst.IfExp)):
            # `ema = 0.98 * ema + 0.02 * loss`: the running value chains every step's graph
            key = dotted_name(target)
            if key is not None and _reads(value, key):
                return target, value, "accumulates"
        if isinstance(target, cst.Subscript) and not _constant_key(target):
            container = target.value
            return container, value, "stores"
    return None


def _constant_key(target: cst.Subscript) -> bool:
    return all(isinstance(e.slice, cst.Index) and isinstance(e.slice.value, (cst.SimpleString, cst.Integer))
               for e in target.slice)


def _returned_for_backward(ctx, flow, hook, value) -> str | None:
    """The framework class (`L.LightningModule`) when `hook` is its train hook whose returned loss the
    framework backpropagates (`training_step`: framework data, `backpropagates_return`) and `value`
    is a variable the hook returns as it is: that value carries a graph, whatever built it."""
    if not isinstance(hook, cst.FunctionDef) or not isinstance(value, cst.Name):
        return None
    function = ctx.index.function_of_node.get(hook)
    klass = ctx.index.classes.get(function.class_name) if function is not None and function.class_name else None
    if klass is None:
        return None
    if not any(isinstance(n, cst.Return) and isinstance(n.value, cst.Name) and n.value.value == value.value
               and flow._owner(n) is hook for n in walk(hook.body)):
        return None
    for name in sorted(ancestors(ctx.index, klass)):
        root, last = name.split(".", 1)[0], name.rsplit(".", 1)[-1]
        for owner, packages, hooks in frameworks.backpropagated_returns():
            if last == owner and root in packages and hook.name.value in hooks:
                return name
    return None


def _batch_iteration(ctx, flow, node):
    """The loop whose one turn handles one batch, holding `node`: the innermost loop over a data
    loader or innermost training loop around it (else any training loop around it), or a
    per-batch framework hook. A container rebound inside it lives for one batch at most."""
    training = ctx.model(_training_loops)
    fallback = None
    parts = False
    for ancestor in ctx.index.ancestors(node):
        if isinstance(ancestor, (cst.For, cst.While)):
            if ancestor.orelse is not None and any(n is node for n in walk(ancestor.orelse)):
                continue
            loop = training.get(ancestor)
            data = _iterates_data(ctx, flow, ancestor)
            if loop is not None and loop.innermost and not data and _steps_parts(ctx, loop, ancestor):
                # each turn steps another optimizer, picked by the loop variable: the turns are the
                # parts of one update (cascade levels, a GAN's players); the loop around is the step
                parts = True
                continue
            if (loop is not None and (loop.innermost or parts)) or data:
                return ancestor
            if loop is not None and fallback is None:
                fallback = ancestor
        elif isinstance(ancestor, cst.FunctionDef):
            if fallback is None and ancestor.name.value in _PER_BATCH_HOOKS:
                return ancestor
            return fallback
        elif isinstance(ancestor, (cst.ClassDef, cst.Lambda)):
            return fallback
    return fallback


def _steps_parts(ctx, loop, node: cst.For | cst.While) -> bool:
    """Every optimizer step in the loop's body is of an optimizer chosen by the loop variable
    (`optim = models["optim_{}".format(m)]`, `opts[i].step()`, bound in the body): the loop goes
    over the parts of one update, each with its own optimizer, not over batches of one."""
    if not isinstance(node, cst.For):
        return False
    variables = _bound_names(node.target)
    own = [ref for ref in loop.step_calls if not ref.via and isinstance(ref.node.func, cst.Attribute)]
    if not variables or not own or len(own) != len(loop.step_calls):
        return False
    for ref in own:
        receiver = ref.node.func.value
        if isinstance(receiver, cst.Subscript):
            if not _names_read(receiver.slice[0].slice.value if isinstance(receiver.slice[0].slice, cst.Index)
                               else receiver) & variables:
                return False
            continue
        if not isinstance(receiver, cst.Name):
            return False
        bindings = [b for b in ref.scope.lookup(receiver.value)
                    if b.kind == "assign" and b.value is not None
                    and any(a is node.body for a in ctx.index.ancestors(b.node))]
        if not bindings or not all(_names_read(b.value) & variables for b in bindings):
            return False
    return True


_RETURNS = frozenset((cst.Return, cst.Yield))
_STORE_NODES = frozenset((cst.Expr, cst.AugAssign, cst.Assign))


def _training_loops(ctx) -> dict[cst.CSTNode, object]:
    return {tl.node: tl for tl in ctx.model(training_model).loops}


_RESETTING = frozenset((cst.Assign, cst.AnnAssign, cst.With, cst.Call, cst.Del))


def _resets_in(loop, index) -> dict[str, list[cst.CSTNode]]:
    """Containers rebound (not from themselves) or cleared inside the iteration, by dotted name,
    with the nodes that do it: such a container does not outlive the iteration."""
    resets: dict[str, list[cst.CSTNode]] = {}

    def add(key, node):
        if key is not None:
            resets.setdefault(key, []).append(node)

    for node in index.subtree(loop.body):
        kind = type(node)  # every node of the loop: LibCST's concrete classes, no ABC isinstance
        if kind not in _RESETTING:
            continue
        if isinstance(node, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                for element in _flatten(target):
                    key = dotted_name(element)
                    if key is not None and not _self_referential(node, key):
                        add(key, node)
        elif isinstance(node, cst.With):
            for item in node.items:
                if item.asname is not None:
                    add(dotted_name(item.asname.name), node)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "clear":
            add(dotted_name(node.func.value), node)
        elif isinstance(node, cst.Del):
            for target in walk(node.target):
                add(dotted_name(target), node)
    return resets


def _flatten(target):
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _flatten(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _flatten(target.value)
    else:
        yield target


def _self_referential(assign, key) -> bool:
    return assign.value is not None and _reads(assign.value, key)


def _reads(expr: cst.BaseExpression, key: str) -> bool:
    """`expr` reads the variable or attribute chain `key`: `loss` in `loss + aux` or `loss * 0.9`,
    not in `out.loss` (an attribute of another object) nor `f(loss=x)` (a keyword's name)."""
    names_only = set()
    for node in walk_expression(expr):
        if isinstance(node, cst.Attribute):
            names_only.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            names_only.add(id(node.keyword))
    return any(dotted_name(n) == key for n in walk_expression(expr)
               if isinstance(n, (cst.Name, cst.Attribute)) and id(n) not in names_only)


def _backpropagated_each_iteration(flow, loop, value) -> bool:
    """The stored value is (built from) a loss backpropagated inside the same iteration."""
    names = {n.value for n in walk_expression(value) if isinstance(n, cst.Name)}
    for root in flow.backward_roots(loop.body if not isinstance(loop, cst.FunctionDef) else loop):
        if names & {n.value for n in walk_expression(root) if isinstance(n, cst.Name)}:
            return True
    return False


def _iterates_data(ctx, flow, loop) -> bool:
    """A loop over a data loader (directly or through `enumerate`/`tqdm`/`zip`): one batch per turn."""
    if not isinstance(loop, cst.For):
        return False
    scope = ctx.index.scope_at(loop)
    iterable = loop.iter
    while isinstance(iterable, cst.Call) and positional_args(iterable):
        if flow.is_loader(iterable, scope):
            return True
        iterable = positional_args(iterable)[0].value
    # (whether the items feed a forward or a torch loss, `_items_are_examples`, is not enough: on real
    # code it took loops over a forward's time steps, a loss's heads and a step's data groups for
    # loops over batches, 14 false findings of 15 new ones in round 6)
    return flow.is_loader(iterable, scope)


def _returned_to_a_backward(ctx, flow, owner: cst.CSTNode) -> bool:
    """Every same-file caller of the function `owner` hands what it returns to a backward
    (`loss = self.solution_loss() + w * self.pde_loss(); loss.backward()`): the graphs the function
    keeps across its loop are the ones that backward needs, not a leak."""
    info = ctx.index.function_of_node.get(owner)
    sites = ctx.index.callers(info) if info is not None else []
    if not sites:
        return False
    for site in sites:
        caller = site.function.node if site.function is not None else ctx.module
        roots = flow.backward_roots(caller)
        if any(site.node is n for root in roots for n in walk(root)):
            continue  # `self.loss_terms().backward()`
        statement = next((a for a in ctx.index.ancestors(site.node) if isinstance(a, (cst.Assign, cst.AnnAssign))), None)
        if statement is None or not roots:
            return False
        targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else [statement.target]
        names = {name for target in targets for name in _bound_names(target)}
        if not names or not names <= flow.names_feeding(roots, site.node):
            return False
    return True


def _bound_names(target: cst.BaseExpression) -> set[str]:
    """The names an assignment target rebinds: `h`, `out, h`, `*rest`; not `pipe.unet` or `d[k]`,
    which store into an object (their `unet`, `k` are no variables of this scope)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {name for element in target.elements for name in _bound_names(element.value)}
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    return set()


_MODULE_METHODS = frozenset({"parameters", "named_parameters", "state_dict", "load_state_dict", "modules",
                             "named_modules", "children", "train", "eval", "zero_grad", "buffers"})


def _used_as_module(flow, name: str, loop: cst.CSTNode) -> bool:
    """In the loop, `name` is called (`name(x)`) or asked for a module's parts or mode
    (`name.parameters()`, `name.state_dict()`, `name.eval()`): it holds a module, which carries
    no autograd graph, not a tensor."""
    for node in flow.index.subtree(loop):
        if type(node) is not cst.Call:
            continue
        func = node.func
        if isinstance(func, cst.Name) and func.value == name:
            return True
        if isinstance(func, cst.Attribute) and func.attr.value in _MODULE_METHODS and \
                isinstance(func.value, cst.Name) and func.value.value == name:
            return True
    return False


def _forward_premise(ctx, flow, node: cst.Assign, carried: set[str], scope):
    """That `node`'s call runs a forward whose outputs carry a graph: the callee is shown to hold a
    model (built as a module, typed, handed one by a caller), or another of its outputs feeds a
    backward of the function (`output, hidden = net(x, hidden)` with `criterion(output, y)
    .backward()`). Unknown when only a name says so (`pruner.prune_model(model)`)."""
    call = node.value
    head = f"`{ctx.code_for(call.func)}(...)` runs a forward, its outputs carry a graph"
    found = role_premise(ctx, call.func, scope, "model")
    if found.proven:
        return type(found)(f"{head}: {found.text}", found.node, found.kind, found.proven, found.required)
    owner = flow._owner(node)
    fed = flow.names_feeding(flow.backward_roots(owner), node)
    outputs = sorted({n for t in node.targets for n in _bound_names(t.target)} - carried)
    used = [n for n in outputs if n in fed]
    if used:
        return premise(f"{head}: its output `{used[0]}` is backpropagated", node, "use")
    return type(found)(f"{head}: {found.text}", found.node, found.kind, found.proven, found.required)


def _names_read(expr: cst.BaseExpression) -> set[str]:
    """The variables an expression reads: not attribute names (`x.hidden`) nor keyword names."""
    not_variables = set()
    for node in walk_expression(expr):
        if isinstance(node, cst.Attribute):
            not_variables.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            not_variables.add(id(node.keyword))
    return {n.value for n in walk_expression(expr) if isinstance(n, cst.Name) and id(n) not in not_variables}


def _state_cut_within(flow, loop, name, carry) -> bool:
    """Inside the batch loop, `name` is rebound to something without a graph (`h.detach()`,
    `repackage_hidden(h)`, `None`, zeros) or detached in place (`h.detach_()`)."""
    for node in walk(loop.body):
        if node is carry:
            continue
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if any(isinstance(e, cst.Name) and e.value == name for t in targets for e in walk(t)):
                if node.value is None or flow.carries_graph(node.value) is not True:
                    return True
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value == "detach_":
            if any(isinstance(n, cst.Name) and n.value == name for n in walk(node.func.value)):
                return True
        elif isinstance(node, cst.For) and any(isinstance(n, cst.Name) and n.value == name for n in walk(node.iter)):
            if any(isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute) and c.func.attr.value == "detach_"
                   for c in walk(node.body)):
                return True
    return False


def _loop_header(ctx, loop) -> str:
    if isinstance(loop, cst.For):
        return f"for {ctx.code_for(loop.target)} in {ctx.code_for(loop.iter)}"
    return f"while {ctx.code_for(loop.test)}"


def _describe_iteration(ctx, loop) -> str:
    if isinstance(loop, cst.For):
        return f"the iteration of `for {ctx.code_for(loop.target)} in {ctx.code_for(loop.iter)}`"
    if isinstance(loop, cst.While):
        return f"the iteration of `while {ctx.code_for(loop.test)}`"
    return f"the call of `{loop.name.value}` (run once per batch)"
