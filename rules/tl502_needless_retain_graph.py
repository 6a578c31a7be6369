"""TL502 needless-retain-graph."""

from __future__ import annotations

import bisect

import libcst as cst

from trainlint.model.dataflow import dataflow
from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.model.index import keyword_value, positional_args, walk, walk_expression
from trainlint.rule import FixSpec, Rule, bad, good
from trainlint.model.training import training_model
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import code, loader_premise, role_premise, training_premises

_AUTOGRAD = ("torch.autograd.backward", "torch.autograd.grad")


class NeedlessRetainGraph(Rule):
    code = "TL502"
    name = "needless-retain-graph"
    severity = Severity.WARNING
    # off by default (measured): on code nobody on the team had read (rounds 5-7 of first contact),
    # 7 of its 14 judged findings were false and no mined bug-fix commit was one of its class;
    # `--extend-select TL502` turns it on
    enabled_by_default = False
    summary = "`backward(retain_graph=True)` with no second backward through the same graph"
    message = "`retain_graph=True` keeps the graph alive but nothing backpropagates through it again"
    triggers = (("retain_graph", "backward"), ("retain_graph", "grad("))
    gate = named("^retain_graph$")
    what_it_does = """
        Flags `loss.backward(retain_graph=True)` (also `scaler.scale(loss).backward(...)`,
        `accelerator.backward(loss, retain_graph=True)`, `torch.autograd.backward` and
        `torch.autograd.grad`) when nothing after it in the same function, directly or through a
        helper of the same file, runs another backward, and the graph does not reach into the next
        iteration of the loop.

        Only graphs built in the same function are judged (a forward or a loss computed there):
        a tensor handed in by a caller or a closure may be backpropagated again elsewhere (a
        `vjp_fn` that gradcheck calls once per row). It stays quiet when a later backward may use
        the same graph (several losses sharing a
        trunk, GAN-style discriminator then generator updates, a gradient penalty), when the call
        also passes `create_graph=True` (higher-order gradients), when the backward runs once per
        element of a collection of losses built before the loop, and when the loop carries a
        recurrent state (`hidden = model(x, hidden)`) whose graph spans iterations, or when a
        value computed before the loop with a graph (`adj_norm = F.normalize(adj + perturbation)`,
        `perturbation` requiring grad) feeds every turn's loss: the next turn's backward runs
        through that part again. When such a value's graph cannot be told (a project function's
        result), that premise is unknown and the finding is not reported by default. The same holds
        across a call: when the graph takes in a parameter for which a same-file caller, calling
        the function in a loop, passes a variable bound before that loop (fakes generated once,
        then several critic steps on them), the next call's backward runs through that variable's
        graph again: quiet when it carries one, unknown when that cannot be told. It stays quiet
        too when the function reads the allocator's statistics after the backward
        (`torch.cuda.memory_allocated()`, also through a same-file helper): a memory profile that
        measures what the graph keeps. When the
        function returns a value computed from the retained graph's variables (an auxiliary loss
        backpropagated with `retain_graph=True`, then the main loss summed from the same terms
        returned), a caller's backward runs through the retained part again: it stays quiet when
        a same-file caller backpropagates the result, and the premise is unknown when the function
        has no caller in the file.
        """
    why_bad = """
        A backward pass frees the tensors that the graph saved for it (activations, inputs of
        each operation) as soon as it has used them. `retain_graph=True` asks autograd to keep all
        of them so that the same graph can be backpropagated again. With no second backward they
        stay alive until the loss tensor goes away: the step's peak memory stays at its forward
        level through the optimizer step, and if the loss is kept (logged, appended) the graph
        with all its activations is kept with it. It is often added to silence "Trying to
        backward through the graph a second time", which usually means a tensor from an earlier
        step (a recurrent state, a cached output) should have been detached.
        """
    fix_safety = """
        Unsafe: without `retain_graph=True` a second `backward()` through the same graph raises;
        if one runs that the rule cannot see, the fix breaks it.
        """
    references = (
        "https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html",
        "https://pytorch.org/docs/stable/generated/torch.autograd.backward.html",
        "https://pytorch.org/docs/stable/notes/autograd.html#saved-tensors",
    )
    examples = (
        bad(
            """
            import torch

            criterion = torch.nn.BCEWithLogitsLoss()
            for real in loader:
                ones, zeros = torch.ones(real.size(0), 1), torch.zeros(real.size(0), 1)
                fake = generator(torch.randn(real.size(0), nz, 1, 1))
                opt_d.zero_grad()
                loss_d = criterion(discriminator(real), ones) + criterion(discriminator(fake.detach()), zeros)
                loss_d.backward(retain_graph=True)
                opt_d.step()
                opt_g.zero_grad()
                loss_g = criterion(discriminator(fake), ones)
                loss_g.backward()
                opt_g.step()
            """,
            line=9,
            fixed="""
            import torch

            criterion = torch.nn.BCEWithLogitsLoss()
            for real in loader:
                ones, zeros = torch.ones(real.size(0), 1), torch.zeros(real.size(0), 1)
                fake = generator(torch.randn(real.size(0), nz, 1, 1))
                opt_d.zero_grad()
                loss_d = criterion(discriminator(real), ones) + criterion(discriminator(fake.detach()), zeros)
                loss_d.backward()
                opt_d.step()
                opt_g.zero_grad()
                loss_g = criterion(discriminator(fake), ones)
                loss_g.backward()
                opt_g.step()
            """,
            title="a discriminator loss on `fake.detach()`; the generator loss runs a fresh forward",
        ),
        good(
            """
            import torch

            criterion = torch.nn.BCEWithLogitsLoss()
            for real in loader:
                ones, zeros = torch.ones(real.size(0), 1), torch.zeros(real.size(0), 1)
                fake = generator(torch.randn(real.size(0), nz, 1, 1))
                opt_d.zero_grad()
                d_fake = discriminator(fake)
                loss_d = criterion(discriminator(real), ones) + criterion(d_fake, zeros)
                loss_d.backward(retain_graph=True)
                opt_d.step()
                opt_g.zero_grad()
                loss_g = criterion(d_fake, ones)
                loss_g.backward()
                opt_g.step()
            """,
            title="the generator loss reuses the discriminator's output on the undetached fake",
        ),
        bad(
            """
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward(retain_graph=True)
                optimizer.step()
            """,
            line=4,
            fixed="""
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            """,
            title="a single loss per step",
        ),
        good(
            """
            def train_step(model, batch, optimizer, scaler):
                with torch.autocast("cuda"):
                    outputs = model(**batch)
                scaler.scale(outputs.loss).backward(retain_graph=True)
                scaler.scale(outputs.aux_loss).backward()
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
            """,
            title="AMP step in a helper whose second loss backpropagates through the same forward",
        ),
        bad(
            """
            def train_step(model, batch, optimizer, scaler):
                with torch.autocast("cuda"):
                    loss = model(**batch).loss
                scaler.scale(loss).backward(retain_graph=True)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
                return loss.item()
            """,
            line=4,
            fixed="""
            def train_step(model, batch, optimizer, scaler):
                with torch.autocast("cuda"):
                    loss = model(**batch).loss
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
                return loss.item()
            """,
            title="AMP step in a helper",
        ),
        bad(
            """
            for batch in train_dataloader:
                outputs = model(**batch)
                accelerator.backward(outputs.loss, retain_graph=True)
                optimizer.step()
                optimizer.zero_grad()
            """,
            line=3,
            fixed="""
            for batch in train_dataloader:
                outputs = model(**batch)
                accelerator.backward(outputs.loss)
                optimizer.step()
                optimizer.zero_grad()
            """,
            title="accelerator.backward",
        ),
        bad(
            """
            class Trainer:
                def step(self, x, y):
                    self.optimizer.zero_grad()
                    loss = self.loss_fn(self.model(x), y) + self.l2 * self.penalty()
                    loss.backward(
                        retain_graph=True,
                    )
                    self.optimizer.step()
                    return loss.detach()
            """,
            line=5,
            fixed="""
            class Trainer:
                def step(self, x, y):
                    self.optimizer.zero_grad()
                    loss = self.loss_fn(self.model(x), y) + self.l2 * self.penalty()
                    loss.backward()
                    self.optimizer.step()
                    return loss.detach()
            """,
            title="a Trainer method",
        ),
        bad(
            """
            import torch

            for x, y in loader:
                loss = loss_fn(model(x), y)
                grads = torch.autograd.grad(loss, list(model.parameters()), retain_graph=True)
                for p, g in zip(model.parameters(), grads):
                    p.data.add_(g, alpha=-lr)
            """,
            line=5,
            fixed="""
            import torch

            for x, y in loader:
                loss = loss_fn(model(x), y)
                grads = torch.autograd.grad(loss, list(model.parameters()))
                for p, g in zip(model.parameters(), grads):
                    p.data.add_(g, alpha=-lr)
            """,
            title="torch.autograd.grad with no second use",
        ),
        good(
            """
            for x, y in loader:
                optimizer.zero_grad()
                features = backbone(x)
                cls_loss = cls_criterion(cls_head(features), y)
                aux_loss = aux_criterion(aux_head(features), y)
                cls_loss.backward(retain_graph=True)
                aux_loss.backward()
                optimizer.step()
            """,
            title="two losses sharing the backbone's graph",
        ),
        good(
            """
            for real in loader:
                fake = generator(torch.randn(real.size(0), 128))
                d_opt.zero_grad()
                d_loss = bce(discriminator(real), ones) + bce(discriminator(fake), zeros)
                d_loss.backward(retain_graph=True)
                d_opt.step()
                g_opt.zero_grad()
                g_loss = bce(discriminator(fake), ones)
                g_loss.backward()
                g_opt.step()
            """,
            title="GAN: the generator's graph is reused by the second backward",
        ),
        good(
            """
            import torch

            def gradient_penalty(critic, real, fake):
                mix = (0.5 * real + 0.5 * fake).requires_grad_(True)
                score = critic(mix)
                grad, = torch.autograd.grad(score.sum(), mix, create_graph=True, retain_graph=True)
                return ((grad.norm(2, dim=1) - 1) ** 2).mean()
            """,
            title="higher-order gradients (create_graph=True)",
        ),
        good(
            """
            losses = model.compute_losses(batch)
            for name, loss in losses.items():
                optimizer.zero_grad()
                loss.backward(retain_graph=True)
                record_grad_norm(name, model)
            """,
            title="one backward per loss term of the same forward",
        ),
        good(
            """
            class Learner:
                def update(self, batch):
                    loss = self.loss(batch)
                    loss.backward(retain_graph=True)
                    self.log_grads()
                    self.second_pass(loss)

                def second_pass(self, loss):
                    (loss * self.weight).backward()
            """,
            title="a helper of the same class backpropagates again",
        ),
        good(
            """
            import torch

            def jacobian_rows(output, inputs):
                def vjp(v):
                    return torch.autograd.grad(output, inputs, v, retain_graph=True)
                return [vjp(row) for row in torch.eye(output.numel())]
            """,
            title="a graph handed in from outside, differentiated once per row",
        ),
        good(
            """
            hidden = model.init_hidden(batch_size)
            for x, y in loader:
                output, hidden = model(x, hidden)
                loss = criterion(output, y)
                optimizer.zero_grad()
                loss.backward(retain_graph=True)
                optimizer.step()
            """,
            title="a recurrent state carries the graph into the next iteration (a different problem)",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F


            def meta_gradient(model, features, adj, labels, steps):
                perturbation = torch.zeros_like(adj, requires_grad=True)
                adj_norm = F.normalize(adj + perturbation, p=1, dim=1)
                total = torch.zeros_like(adj)
                for _ in range(steps):
                    loss = F.cross_entropy(model(adj_norm @ features), labels)
                    total += torch.autograd.grad(loss, perturbation, retain_graph=True)[0]
                return total
            """,
            title="a normalised matrix built once before the loop: every turn backpropagates through it again",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F


            def meta_gradient(model, features, adj, labels, steps):
                perturbation = torch.zeros_like(adj, requires_grad=True)
                total = torch.zeros_like(adj)
                for _ in range(steps):
                    adj_norm = F.normalize(adj + perturbation, p=1, dim=1)
                    loss = F.cross_entropy(model(adj_norm @ features), labels)
                    total += torch.autograd.grad(loss, perturbation, retain_graph=True)[0]
                return total
            """,
            line=11,
            fixed="""
            import torch
            import torch.nn.functional as F


            def meta_gradient(model, features, adj, labels, steps):
                perturbation = torch.zeros_like(adj, requires_grad=True)
                total = torch.zeros_like(adj)
                for _ in range(steps):
                    adj_norm = F.normalize(adj + perturbation, p=1, dim=1)
                    loss = F.cross_entropy(model(adj_norm @ features), labels)
                    total += torch.autograd.grad(loss, perturbation)[0]
                return total
            """,
            title="the same matrix rebuilt in every turn: each graph is used once",
        ),
        good(
            """
            class Critic:
                def penalised_loss(self, states, targets):
                    values = self.net(states)
                    gap = (values - targets).abs().mean()
                    weighted = self.log_weight.exp() * gap
                    self.weight_opt.zero_grad()
                    (-weighted).backward(retain_graph=True)
                    self.weight_opt.step()
                    return ((values - targets) ** 2).mean() + weighted

                def update(self, states, targets):
                    total = self.penalised_loss(states, targets)
                    self.net_opt.zero_grad()
                    total.backward()
                    self.net_opt.step()
            """,
            title="the returned loss shares the retained terms and the caller backpropagates it",
        ),
        bad(
            """
            class Critic:
                def penalised_loss(self, states, targets):
                    values = self.net(states)
                    gap = (values - targets).abs().mean()
                    weighted = self.log_weight.exp() * gap
                    self.weight_opt.zero_grad()
                    (-weighted).backward(retain_graph=True)
                    self.weight_opt.step()
                    return ((values - targets) ** 2).mean() + weighted

                def report(self, states, targets):
                    total = self.penalised_loss(states, targets)
                    return {"loss": total.item()}
            """,
            line=7,
            fixed="""
            class Critic:
                def penalised_loss(self, states, targets):
                    values = self.net(states)
                    gap = (values - targets).abs().mean()
                    weighted = self.log_weight.exp() * gap
                    self.weight_opt.zero_grad()
                    (-weighted).backward()
                    self.weight_opt.step()
                    return ((values - targets) ** 2).mean() + weighted

                def report(self, states, targets):
                    total = self.penalised_loss(states, targets)
                    return {"loss": total.item()}
            """,
            title="the returned loss shares the retained terms, but its only caller just logs it",
        ),
        good(
            """
            import torch
            from torch import nn

            critic = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
            generator = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
            c_opt = torch.optim.Adam(critic.parameters())


            def critic_step(real, fake):
                c_opt.zero_grad()
                mix = 0.5 * real + 0.5 * fake
                loss = critic(fake.detach()).mean() - critic(real).mean() + critic(mix).pow(2).mean()
                loss.backward(retain_graph=True)
                c_opt.step()


            def train(loader, n_critic):
                for real in loader:
                    fake = generator(torch.randn(real.size(0), 8))
                    for _ in range(n_critic):
                        critic_step(real, fake)
            """,
            title="the caller makes the fakes once before its critic loop and hands them to every call; the "
                  "penalty mixes them in undetached: each call's backward runs through the generator's graph "
                  "again",
        ),
        bad(
            """
            import torch
            from torch import nn

            critic = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
            generator = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
            c_opt = torch.optim.Adam(critic.parameters())


            def critic_step(real, fake):
                c_opt.zero_grad()
                mix = 0.5 * real + 0.5 * fake
                loss = critic(fake.detach()).mean() - critic(real).mean() + critic(mix).pow(2).mean()
                loss.backward(retain_graph=True)
                c_opt.step()


            def train(loader, n_critic):
                for real in loader:
                    for _ in range(n_critic):
                        fake = generator(torch.randn(real.size(0), 8))
                        critic_step(real, fake)
            """,
            line=13,
            fixed="""
            import torch
            from torch import nn

            critic = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
            generator = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
            c_opt = torch.optim.Adam(critic.parameters())


            def critic_step(real, fake):
                c_opt.zero_grad()
                mix = 0.5 * real + 0.5 * fake
                loss = critic(fake.detach()).mean() - critic(real).mean() + critic(mix).pow(2).mean()
                loss.backward()
                c_opt.step()


            def train(loader, n_critic):
                for real in loader:
                    for _ in range(n_critic):
                        fake = generator(torch.randn(real.size(0), 8))
                        critic_step(real, fake)
            """,
            title="the same critic step, but the caller draws new fakes for every call: each graph is "
                  "backpropagated once",
        ),
        good(
            """
            import torch
            from torch import nn


            def allocated():
                return torch.cuda.memory_allocated()


            def profile(model: nn.Module, x):
                base = allocated()
                loss = model(x).pow(2).mean()
                after_forward = allocated() - base
                loss.backward(retain_graph=True)
                with_grads = allocated() - base
                print(after_forward, with_grads - after_forward)
            """,
            title="a memory profile reads the allocator after the backward: the kept activations are part of "
                  "what it measures",
        ),
        bad(
            """
            import torch
            from torch import nn


            def allocated():
                return torch.cuda.memory_allocated()


            def profile(model: nn.Module, x, opt):
                base = allocated()
                loss = model(x).pow(2).mean()
                print(allocated() - base)
                loss.backward(retain_graph=True)
                opt.step()
                opt.zero_grad()
            """,
            line=13,
            fixed="""
            import torch
            from torch import nn


            def allocated():
                return torch.cuda.memory_allocated()


            def profile(model: nn.Module, x, opt):
                base = allocated()
                loss = model(x).pow(2).mean()
                print(allocated() - base)
                loss.backward()
                opt.step()
                opt.zero_grad()
            """,
            title="the allocator is read only before the backward: nothing observes what the graph keeps",
        ),
    )

    def check(self, ctx):
        flow = ctx.model(dataflow)
        model = ctx.model(training_model)
        backwards = {}  # owner -> its backpropagating calls (`_backward_calls`)
        for site in ctx.index.calls:
            call = site.node
            retain = keyword_value(call, "retain_graph")
            if retain is None or not (isinstance(retain, cst.Name) and retain.value == "True"):
                continue
            root = flow.backward_root(call, site.scope)
            if root is None:
                continue
            create = keyword_value(call, "create_graph")
            if create is not None and not (isinstance(create, cst.Name) and create.value == "False"):
                continue
            if not flow.built_here(root, call):
                continue  # the graph came from a caller or a closure: it may be backpropagated again there
            owner = flow._owner(call)
            if self._later_backward(flow, model, owner, call, site.scope, root, backwards):
                continue
            if _memory_read_after(flow, model, owner, call):
                continue  # the kept tensors are measured: the allocator is read after the backward
            loop = _innermost_loop(ctx.index, call)
            if loop is not None and (_root_from_before_loop(flow, loop, root) or _carried_state(flow, loop)):
                continue
            before = _graph_from_before_loop(flow, loop, root, call) if loop is not None else None
            if before is not None and flow.carries_graph(before[1]):
                continue  # the next turn's backward runs again through the part built before the loop
            stays = [premise("the graph does not reach into the loop's next iteration", loop, "use")] \
                if loop is not None else []
            returned = _returned_share(flow, owner, call, root)
            if returned is not None:  # the function hands part of the retained graph to its callers
                backprop = _callers_backpropagate(ctx.index, flow, owner)
                if backprop is True:
                    continue  # a caller's backward runs through the retained graph again
                stays.append(premise(f"no caller backpropagates the returned `{code(ctx, returned)}`, which "
                                     "shares that graph", returned, "call", proven=backprop is False))
            if before is not None:  # a value from before the loop, which may carry a graph, feeds it
                stays = [unknown(f"the graph does not reach into the loop's next iteration through "
                                 f"`{before[0]}` (built before the loop)", before[1], "use")]
            handed = _argument_from_before_a_callers_loop(ctx.index, flow, owner, root, call)
            if handed is not None:
                param, argument, carries = handed
                if carries is True:
                    continue  # the next call's backward runs again through the caller's argument
                stays.append(unknown(f"the graph does not reach into the caller's next call through `{param}` "
                                     f"(the caller passes `{code(ctx, argument)}`, bound before its loop)",
                                     argument, "call"))
            yield self.report(
                call,
                f"`{ctx.code_for(call.func)}(..., retain_graph=True)` keeps every saved activation of the "
                "graph alive, but nothing after it backpropagates through that graph again; drop "
                "`retain_graph=True` (if it silenced \"backward through the graph a second time\", "
                "detach the tensor carried over from the previous step instead)",
                FixSpec("Remove `retain_graph=True`", safe=False, replacements=((call, _without(call, "retain_graph")),)),
                evidence=[premise("`retain_graph=True` keeps the graph's saved tensors", retain, "argument"),
                          premise(f"the graph of `{code(ctx, root)}` is built in this function", root, "use"),
                          premise("no later backward runs through that graph", call, "use"), *stays],
            )

    def _later_backward(self, flow, model, owner, call, scope, root, backwards) -> bool:
        if owner not in backwards:
            backwards[owner] = _backward_calls(flow, model, owner)
        positions, calls = backwards[owner]
        end = flow.end(call)
        if end < 0:
            return False
        retained = None
        for later, later_root in calls[bisect.bisect_right(positions, end):]:  # the calls after `call`
            if later_root is None:
                return True  # a helper that backpropagates
            if retained is None:
                retained = flow.graph_sources(root, call)
            if not _separate_graphs(flow, retained, later_root, later):
                return True
        return False


def _backward_calls(flow, model, owner) -> tuple[list[int], list[tuple[cst.Call, cst.BaseExpression | None]]]:
    """The calls of a function's (or the module's) own code that backpropagate, in source order:
    their positions, and each call with its backward root (None for a same-file helper that
    backpropagates). Listed once per function, not once per `retain_graph=True` in it."""
    body = owner.body if isinstance(owner, cst.FunctionDef) else owner
    positions, calls = [], []
    for later in flow.index.calls_under(body):
        later_scope = flow.scope_of(later)
        later_root = flow.backward_root(later, later_scope)
        if later_root is None and not any(ref.node is not later and flow.backward_root(ref.node, ref.scope) is not None
                                          for ref in model.reachable_calls(later, later_scope)):
            continue
        positions.append(flow.position(later))
        calls.append((later, later_root))
    return positions, calls


def _returned_share(flow, owner, call, root) -> cst.BaseExpression | None:
    """A value the function returns after `call` that is computed from a variable of the
    retained graph (`alpha_loss` backpropagated with `retain_graph=True`, then
    `return q_loss` with `q_loss` summed from the same terms): a caller may backpropagate it,
    through the nodes the retained graph kept. Only variables the function binds count (a
    parameter or an attribute is a leaf both use, not a shared part of this graph)."""
    if not isinstance(owner, cst.FunctionDef):
        return None
    end = flow.end(call)
    retained = None
    for node in walk(owner.body):
        if not isinstance(node, cst.Return) or node.value is None or flow.position(node) < end \
                or flow._owner(node) is not owner:
            continue
        if retained is None:
            names, _ = flow.graph_sources(root, call)
            retained = {name for name in names if "." not in name and _bound_here(flow, name, call)}
            if not retained:
                return None
        names, _ = flow.graph_sources(node.value, node)
        if retained & names:
            return node.value
    return None


def _bound_here(flow, name: str, at) -> bool:
    """A variable the function binds (not a parameter), to a value carrying a graph (a log dict of
    `.item()` numbers handed to a helper shares no part of the graph)."""
    bindings = flow.bindings_in_function(name, at)
    if not bindings or not all(b.kind in ("assign", "augassign", "annassign", "with") for b in bindings):
        return False
    return any(value is not None and flow.carries_graph(value) is True
               for value in (flow.bound_value(b) for b in bindings))


def _callers_backpropagate(index, flow, owner) -> bool | None:
    """Whether a caller backpropagates what the function returns: True when a same-file call's
    result feeds a backward in the calling function (`q_loss = self._q_loss(batch)` then
    `q_loss.backward()`), False when the function has same-file callers and none does, None when
    it has none in this file (its callers, if any, are elsewhere)."""
    info = index.function_of_node.get(owner)
    if info is None:
        return None
    sites = index.callers(info)
    if not sites:
        return None
    for site in sites:
        caller = flow._owner(site.node)
        roots = flow.backward_roots(caller)
        if not roots:
            continue
        if any(site.node is n for root in roots for n in walk_expression(root)):
            return True
        statement = index.enclosing_statement(site.node)
        targets = set()
        for node in walk(statement):
            if isinstance(node, cst.AssignTarget):
                targets |= {n.value for n in walk(node.target) if isinstance(n, cst.Name)}
        if targets & flow.names_feeding(roots, roots[0]):
            return True
    return False


def _separate_graphs(flow, retained: tuple[set[str], bool], later_root, later) -> bool:
    """The later backward's graph shares nothing with the retained one, which was cut off from the
    rest with `.detach()`: a discriminator loss on `fake.detach()` and a generator loss on a fresh
    discriminator forward."""
    names, detached = retained
    later_names, _ = flow.graph_sources(later_root, later)
    return detached and bool(names) and bool(later_names) and not (names & later_names)


_LEAF_MAKERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.autograd.Variable"})


def _innermost_loop(index, node):
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.For, cst.While)):
            return ancestor
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None
    return None


def _root_from_before_loop(flow, loop, root) -> bool:
    """The backpropagated tensor is not built inside the loop (a loop target or a value from
    before it): the same graph is backpropagated again on the next turn."""
    names = [n for n in walk_expression(root) if isinstance(n, cst.Name)]
    if not names:
        return False
    for name in names:
        binding = flow.reaching(name)
        if binding is None:
            continue
        if binding.kind == "for" and binding.node is loop:
            continue  # an element of a collection built before the loop
        if flow.inside(binding.node, loop.body):
            return False
    return True


def _graph_from_before_loop(flow, loop, root, call) -> tuple[str, cst.BaseExpression] | None:
    """A variable feeding the retained graph that is computed before the loop and never rebound
    in it, whose value may carry a graph (`adj_norm = normalize(modified_adj)` then
    `hidden = adj_norm @ features @ w` in every turn): the next turn's backward runs through the
    same pre-loop part of the graph again, which the `retain_graph=True` of this turn keeps.
    The name and its value, or None."""
    names, _ = flow.graph_sources(root, call)
    for name in sorted(names):
        if "." in name:
            continue
        bindings = flow.bindings_in_function(name, call)
        if not bindings or not all(b.kind == "assign" and flow.before(b.node, loop) for b in bindings):
            continue
        for binding in bindings:
            value = flow.bound_value(binding)
            if value is not None and not isinstance(value, cst.Name) and not _leaf(flow, value) \
                    and any(isinstance(n, (cst.Call, cst.BinaryOperation)) for n in walk_expression(value)) \
                    and flow.carries_graph(value) is not False:
                return name, value
    return None


def _argument_from_before_a_callers_loop(index, flow, owner, root, call):
    """A parameter of the function feeding the retained graph (`penalty(real, fake)` mixes the
    parameter `fake` in) for which a same-file caller, calling the function in a loop, passes a
    variable bound before that loop and not rebound in it (`fake = generator(z)` then
    `for _ in range(5): critic_step(real, fake)`): every call's backward runs through the graph
    that variable carries, which only this call's `retain_graph=True` keeps for the next one.
    (parameter, the caller's argument, whether that argument carries a graph), the first that
    does (else one whose graph cannot be told); None when no caller does so."""
    if not isinstance(owner, cst.FunctionDef):
        return None
    info = index.function_of_node.get(owner)
    if info is None:
        return None
    sites = index.callers(info)
    if not sites:
        return None
    names, _ = flow.graph_sources(root, call)
    params = [p.name.value for p in (*owner.params.posonly_params, *owner.params.params, *owner.params.kwonly_params)]
    fed = [p for p in params if p in names and p not in ("self", "cls")
           and all(b.kind == "param" for b in flow.bindings_in_function(p, call))]
    found = None
    for param in fed:
        for site in sites:
            argument = index.argument_for(site.node, info, param)
            loop = _innermost_loop(index, site.node)
            if not isinstance(argument, cst.Name) or loop is None:
                continue
            bindings = flow.bindings_in_function(argument.value, site.node)
            if not bindings or any(b.kind not in ("assign", "annassign") or flow.inside(b.node, loop.body)
                                   for b in bindings):
                continue  # a parameter of the caller, a loop target, or rebound every turn: fresh graphs
            carries = flow.carries_graph(argument)
            if carries is None and _drawn_from_loader(flow, argument):
                carries = False  # a batch of the data: no graph
            if carries is True:
                return param, argument, True
            if carries is None and found is None:
                found = (param, argument, None)
    return found


_MOVES = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "contiguous", "long", "int"})


def _drawn_from_loader(flow, expr, depth: int = 0) -> bool:
    """`expr` is (an element of, moved or cast) an item of a loop over a data loader (`for data in
    tqdm(loader)`, `real = data[0].to(device)`): a batch of the data, which no forward built."""
    if depth > 6:
        return False
    while True:
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _MOVES:
            expr = expr.func.value
        else:
            break
    if not isinstance(expr, cst.Name):
        return False
    binding = flow.reaching(expr)
    if binding is None:
        return False
    if binding.kind == "for" and isinstance(binding.node, cst.For):
        iterable = binding.node.iter
        scope = flow.scope_of(binding.node)
        for _ in range(6):
            if flow.is_loader(iterable, scope):
                return True
            if isinstance(iterable, cst.Call) and positional_args(iterable):
                iterable = positional_args(iterable)[0].value  # `enumerate(...)`, `tqdm(...)`
            elif isinstance(iterable, cst.Name) and flow.reaching(iterable) is not None \
                    and flow.reaching(iterable).kind in ("with", "assign") and flow.reaching(iterable).value is not None:
                iterable = flow.reaching(iterable).value  # `with tqdm(loader) as bar: for b in bar`
            else:
                return False
        return False
    if binding.kind == "with" and isinstance(binding.node, cst.With):
        return False
    value = flow.bound_value(binding) if binding.kind == "assign" else None
    return value is not None and _drawn_from_loader(flow, value, depth + 1)


#: torch calls that report what the caching allocator holds: what `retain_graph=True` keeps shows in them
_MEMORY_PROBES = frozenset({
    "torch.cuda.memory_allocated", "torch.cuda.max_memory_allocated", "torch.cuda.memory_reserved",
    "torch.cuda.max_memory_reserved", "torch.cuda.memory_stats", "torch.cuda.memory_summary",
    "torch.cuda.memory_snapshot", "torch.cuda.mem_get_info", "torch.mps.current_allocated_memory",
    "torch.mps.driver_allocated_memory", "torch.xpu.memory_allocated", "torch.xpu.max_memory_allocated"})


def _memory_read_after(flow, model, owner, call) -> bool:
    """After `call`, the function reads the allocator's statistics (`torch.cuda.memory_allocated()`),
    itself or through a same-file helper: the tensors the graph keeps are part of what it
    measures (a script that measures a step's memory by its parts), so keeping them is observed,
    not needless."""
    end = flow.end(call)
    if end < 0:
        return False
    body = owner.body if isinstance(owner, cst.FunctionDef) else owner
    for later in flow.index.calls_under(body):
        if flow.position(later) < end:
            continue
        for ref in model.reachable_calls(later, flow.scope_of(later)):
            if flow.index.resolve(ref.node.func, ref.scope) in _MEMORY_PROBES:
                return True
    return False


def _leaf(flow, value: cst.BaseExpression) -> bool:
    """A tensor made to require gradients (`torch.zeros(..., requires_grad=True)`,
    `nn.Parameter(...)`, `x.requires_grad_()`): a leaf, with no graph of its own to free."""
    if not isinstance(value, cst.Call):
        return False
    if keyword_value(value, "requires_grad") is not None:
        return True
    if isinstance(value.func, cst.Attribute) and value.func.attr.value == "requires_grad_":
        return True
    return flow.index.resolve(value.func, flow.scope_of(value)) in _LEAF_MAKERS


def _carried_state(flow, loop) -> bool:
    """`h = f(x, h)` inside the loop with `h` also bound before it: the graph spans iterations."""
    for node in walk(loop.body):
        if not isinstance(node, cst.Assign) or not isinstance(node.value, cst.Call):
            continue
        targets = set()
        for target in node.targets:
            for element in walk(target.target):
                if isinstance(element, cst.Name):
                    targets.add(element.value)
        used = {n.value for n in walk_expression(node.value) if isinstance(n, cst.Name)}
        for name in targets & used:
            before_loop = any(flow.before(b.node, loop) for b in flow.bindings_in_function(name, node))
            if before_loop and not any(isinstance(n, cst.Attribute) and n.attr.value in ("detach", "detach_")
                       for n in walk_expression(node.value)):
                return True
    return False


def _without(call: cst.Call, keyword: str) -> cst.Call:
    """The call without one keyword argument, keeping the remaining commas and layout tidy."""
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == keyword)]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return call.with_changes(args=args)
    return call.with_changes(args=(), whitespace_before_args=cst.SimpleWhitespace(""))
