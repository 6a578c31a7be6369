"""The mode model: grad state and module mode at each forward, and eval calls a training loop
never undoes. The rules' examples and fixtures cover the findings; these tests pin the facts the
rules are built on."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from trainlint.context import FileContext
from trainlint.model.mode_state import CHOSEN, COND, EVAL, NEW, OFF, ON, RESTORE, TRAIN, TRAINED
from trainlint.model.modes import modes


def _model(source: str):
    source = textwrap.dedent(source)
    ctx = FileContext("t.py", source, cst.parse_module(source), (2, 6))
    return ctx, ctx.model(modes)


def _forwards(source: str):
    """(line text of the forward, key, sorted fact kinds, sorted grad states) per forward."""
    ctx, model = _model(source)
    result = []
    for forward in model.forwards():
        line = ctx.code_for(ctx.index.enclosing_statement(forward.call)).strip()
        result.append((line, forward.key, sorted({f.kind for f in forward.facts}), sorted(forward.grad)))
    return result


@pytest.mark.parametrize("wrapper", [
    "with torch.no_grad():",
    "with torch.inference_mode():",
    "with torch.set_grad_enabled(False):",
    "with no_grad():",
    "with torch.autograd.grad_mode.no_grad():",
])
def test_grad_off_contexts(wrapper):
    source = f"""
        import torch
        from torch import no_grad

        def run(model, x):
            model.eval()
            {wrapper}
                return model(x)
        """
    assert _forwards(source) == [("return model(x)", "model", [EVAL], [OFF])]


@pytest.mark.parametrize("decorator", ["@torch.no_grad()", "@torch.no_grad", "@torch.inference_mode()",
                                       "@torch.inference_mode"])
def test_grad_off_decorators(decorator):
    source = f"""
        import torch

        {decorator}
        def run(model, x):
            model.eval()
            return model(x)
        """
    assert _forwards(source) == [("return model(x)", "model", [EVAL], [OFF])]


@pytest.mark.parametrize("imports, wrapper", [
    ("import paddle", "with paddle.no_grad():"),
    ("import paddle", "with paddle.set_grad_enabled(False):"),
    ("from paddle import no_grad", "with no_grad():"),
    ("import oneflow as flow", "with flow.inference_mode():"),
])
def test_grad_off_contexts_of_torch_like_frameworks(imports, wrapper):
    """Paddle's and OneFlow's switches (trainlint/frameworks/*.toml), by their resolved imports."""
    source = f"""
        {imports}

        def run(model, x):
            model.eval()
            {wrapper}
                return model(x)
        """
    assert _forwards(source) == [("return model(x)", "model", [EVAL], [OFF])]


def test_a_framework_named_in_text_only_turns_nothing_off():
    """`paddle.no_grad` is known by its import: a torch file whose own `no_grad` is a project
    helper, or that only names paddle in a string, still records."""
    source = """
        import torch

        class paddle:
            @staticmethod
            def no_grad():
                return open("paddle.no_grad")

        def run(model, x):
            model.eval()
            print("paddle.no_grad()")
            with paddle.no_grad():
                return model(x)
        """
    assert _forwards(source) == [("return model(x)", "model", [EVAL], [ON])]


def test_enable_grad_turns_grad_back_on_and_the_context_ends():
    source = """
        import torch

        @torch.no_grad()
        def run(model, x):
            model.eval()
            with torch.enable_grad():
                a = model(x)
            b = model(x)
        """
    assert _forwards(source) == [("a = model(x)", "model", [EVAL], [ON]),
                                 ("b = model(x)", "model", [EVAL], [OFF])]


def test_set_grad_enabled_as_a_call_and_a_condition():
    source = """
        import torch

        def run(model, x, training):
            model.eval()
            torch.set_grad_enabled(False)
            a = model(x)
            torch.set_grad_enabled(training)
            b = model(x)
        """
    assert [f[3] for f in _forwards(source)] == [[OFF], [COND]]


def test_callers_decide_the_entry_state():
    source = """
        import torch

        def forward_all(net, batches):
            return [net(b) for b in batches]

        def a(model, batches):
            model.eval()
            with torch.no_grad():
                return forward_all(model, batches)

        def b(model, batches):
            model.eval()
            with torch.no_grad():
                forward_all(model, batches)
        """
    assert _forwards(source) == [("return [net(b) for b in batches]", "net", [EVAL], [OFF])]


def test_one_caller_with_grad_makes_the_entry_mixed():
    source = """
        import torch

        def forward_all(net, batches):
            return [net(b) for b in batches]

        def a(model, batches):
            model.eval()
            with torch.no_grad():
                return forward_all(model, batches)

        def b(model, batches):
            model.eval()
            return forward_all(model, batches)
        """
    assert _forwards(source)[0][3] == [OFF, ON]


def test_branches_that_choose_the_mode_join_to_chosen():
    source = """
        import torch

        def run(model, loader, phase):
            if phase == "train":
                model.train()
            else:
                model.eval()
            for x in loader:
                model(x)
        """
    assert _forwards(source)[0][2] == [CHOSEN]


def test_restore_kinds_and_fresh_modules():
    source = """
        import torch
        import torch.nn as nn

        def run(model, x):
            was_training = model.training
            model.eval()
            model.train(was_training)
            a = model(x)
            head = nn.Linear(4, 2)
            b = head(x)
            model.train(False)
            c = model(x)
        """
    assert [(f[1], f[2]) for f in _forwards(source)] == [("model", [RESTORE]), ("head", [NEW]), ("model", [EVAL])]


def test_aliases_and_wrappers_share_a_key():
    source = """
        import torch

        def run(self, accelerator, x):
            unwrapped = accelerator.unwrap_model(self.model)
            unwrapped.eval()
            self.model.module(x)
            self.model.to("cpu").eval()
        """
    assert [f[1] for f in _forwards(source)] == ["self.model"]


def test_helper_effects_are_followed_through_parameters():
    source = """
        import torch

        def to_eval(net):
            net.eval()

        def run(model, x):
            model.train()
            to_eval(model)
            with torch.no_grad():
                return model(x)
        """
    assert _forwards(source) == [("return model(x)", "model", [EVAL], [OFF])]


def test_context_manager_restores_after_its_block():
    source = """
        import contextlib
        import torch

        @contextlib.contextmanager
        def eval_mode(net):
            net.eval()
            try:
                yield
            finally:
                net.train()

        def run(model, x):
            with eval_mode(model):
                a = model(x)
            b = model(x)
        """
    assert [f[2] for f in _forwards(source)] == [[EVAL], [TRAIN]]


def test_implicit_train_mode_from_a_training_caller():
    source = """
        import torch
        import torch.nn.functional as F

        @torch.no_grad()
        def evaluate(model, loader):
            return [model(x) for x, _ in loader]

        def main(model, loader, val_loader):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                opt.zero_grad()
                F.cross_entropy(model(x), y).backward()
                opt.step()
            evaluate(model, val_loader)
        """
    forwards = [f for f in _forwards(source) if f[0].startswith("return")]
    assert forwards == [("return [model(x) for x, _ in loader]", "model", [TRAINED], [OFF])]


def _unrestored(source: str):
    ctx, model = _model(source)
    return sorted((ctx.code_for(u.anchor), u.key) for u in model.unrestored())


def test_unrestored_follows_loops_break_and_continue():
    source = """
        import torch

        def train(model, opt, loader, evaluate):
            model.train()
            for step, (x, y) in enumerate(loader):
                if step % 2:
                    continue
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
                if step % 100 == 0:
                    model.eval()
                if step > 1000:
                    model.eval()
                    break
        """
    # the eval before `break` never reaches another backward
    assert _unrestored(source) == [("model.eval()", "model")]


def test_untrained_models_may_stay_in_eval_mode():
    source = """
        import torch

        def train(student, teacher, opt, loader):
            teacher.requires_grad_(False)
            student.train()
            for x in loader:
                teacher.eval()
                with torch.no_grad():
                    t = teacher(x)
                opt.zero_grad()
                (student(x) - t).pow(2).mean().backward()
                opt.step()
        """
    assert _unrestored(source) == []


def test_evaluation_regions():
    source = """
        import torch

        def validate(model, loader):
            pass

        def test_training_converges():
            pass

        def train(model, train_loader, val_loader):
            for x in train_loader:
                pass
            for x in enumerate(val_loader):
                pass
        """
    ctx, model = _model(source)
    names = {f.name: model.is_evaluation_function(f) for f in ctx.index.functions}
    assert names == {"validate": True, "test_training_converges": False, "train": False}
    loops = [model.is_evaluation_loop(loop) for loop in ctx.index.loops]
    assert loops == [False, True]


def test_a_budget_stops_runaway_interpretation(monkeypatch):
    import trainlint.model.mode_walk as mode_walk

    monkeypatch.setattr(mode_walk, "_BUDGET", 5)
    source = """
        import torch

        def run(model, loader):
            model.eval()
            for x in loader:
                a = 1
                b = 2
                c = 3
                model(x)
        """
    ctx, model = _model(source)
    function = ctx.index.functions[0]
    assert model.flow(function).complete is False
    assert list(model.forwards()) == []


def test_conditional_restore_of_the_saved_mode():
    source = """
        import torch

        def evaluate(model, x):
            was_training = model.training
            model.eval()
            with torch.no_grad():
                out = model(x)
            if was_training:
                model.train()
            return out

        def train(model, opt, loader):
            for step, (x, y) in enumerate(loader):
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
                if step % 10 == 0:
                    evaluate(model, x)
        """
    assert _unrestored(source) == []


def test_an_imported_train_mode_helper_restores():
    source = """
        import torch
        from utils import set_train_mode

        def train(model, opt, loader):
            for step, (x, y) in enumerate(loader):
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
                if step % 10 == 0:
                    model.eval()
                    set_train_mode(model)
        """
    assert _unrestored(source) == []


def test_an_eval_on_one_branch_only_reaches_the_next_backward():
    source = """
        import torch

        def train(model, opt, loader):
            model.train()
            for step, (x, y) in enumerate(loader):
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
                if step % 10 == 0:
                    model.eval()
        """
    assert _unrestored(source) == [("model.eval()", "model")]


def test_test_functions_are_not_evaluations():
    source = """
        import torch

        class TestInference:
            def test_eval_mode_forward_is_deterministic(self, model, x):
                model.eval()
                outputs = [model(x) for _ in range(3)]
                assert all(torch.equal(outputs[0], o) for o in outputs)
        """
    ctx, model = _model(source)
    forwards = list(model.forwards())
    assert forwards and not any(model.is_graph_free_evaluation(f) for f in forwards)


def test_unrestored_keys_are_named_as_in_the_loop_function():
    source = """
        import torch

        def evaluate(net, loader):
            net.eval()
            with torch.no_grad():
                return [net(x) for x in loader]

        def main(loader):
            model = build()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
                evaluate(model, loader)

        if __name__ == "__main__":
            main(make_loader())
        """
    assert _unrestored(source) == [("evaluate(model, loader)", "model")]


def test_a_helper_run_with_grad_off_by_its_callers_literal():
    """`run_epoch(model, val_loader, train=False)` into `with torch.set_grad_enabled(train)`: the
    helper's forward runs with grad off for that call (with the caller's facts about the model), and
    the backward under `if train:` is a branch that call never takes, so the pass is an evaluation."""
    source = """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(0.1)

            def forward(self, x):
                return self.drop(x)

        def run_epoch(model, loader, opt, train):
            with torch.set_grad_enabled(train):
                for x, y in loader:
                    loss = model(x).sum()
                    if train:
                        opt.zero_grad()
                        loss.backward()
                        opt.step()

        def main(loader, val_loader):
            model = Net()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                run_epoch(model, loader, opt, train=True)
                run_epoch(model, val_loader, opt, train=False)
        """
    ctx, model = _model(source)
    called = [f for f in model.forwards() if f.via is not None]
    assert [(ctx.code_for(f.via), f.key, sorted(f.grad), f.flags) for f in called] == [
        ("run_epoch(model, val_loader, opt, train=False)", "model", [OFF], (("train", False),))]
    assert model.no_grad_evaluation_region(called[0]) is not None
    own = [f for f in model.forwards() if f.via is None]
    assert own and all(f.grad == frozenset({COND}) for f in own)


def test_a_method_of_a_same_file_class_that_switches_modes_is_followed():
    """`model.train_custom()` whose body calls `self.train()` (and keeps a frozen part in eval) puts
    the model back in train mode for the next epoch; a method that never calls `self.train()`
    does not."""
    template = """
        import torch
        import torch.nn as nn

        class Probe(nn.Module):
            def __init__(self, encoder):
                super().__init__()
                self.encoder = encoder
                self.head = nn.Linear(8, 2)

            def train_custom(self):
                {restore}
                self.encoder.eval()

        def evaluate(net, loader):
            net.eval()
            with torch.no_grad():
                return [net(x) for x in loader]

        def fit(encoder, loader, val_loader, opt):
            model = Probe(encoder)
            for epoch in range(3):
                model.train_custom()
                for x, y in loader:
                    opt.zero_grad()
                    model(x).sum().backward()
                    opt.step()
                evaluate(model, val_loader)
        """
    assert _unrestored(template.format(restore="self.train()")) == []
    assert _unrestored(template.format(restore="pass")) == [("evaluate(model, val_loader)", "model")]


@pytest.mark.parametrize("switch, kinds", [
    ("_ = [nets[k].eval() for k in nets]", [EVAL]),
    ("for k in nets.keys():\n    nets[k].eval()", [EVAL]),
    ("for m in nets.values():\n    m.eval()", [EVAL]),
    ("for name, m in nets.items():\n    m.eval()", [EVAL]),
    ("for name, m in nets.items():\n    nets[name].eval()", [EVAL]),
    ("for m in (nets.enc, nets.dec):\n    m.eval()", [EVAL]),
    # the loop switches to train: every member is in train mode, the evaluation sees it
    ("for m in nets.values():\n    m.train()", [TRAIN]),
    # a member may be skipped: nothing is proven, the last known switch stands
    ("_ = [nets[k].eval() for k in nets if k != 'dec']", [TRAIN]),
    ("for k in nets:\n    if k != 'dec':\n        nets[k].eval()", [TRAIN]),
    ("for k in nets:\n    if k == 'dec':\n        continue\n    nets[k].eval()", [TRAIN]),
    ("_ = (nets[k].eval() for k in nets)", [TRAIN]),  # a generator nobody consumes runs nothing
    ("for k in other:\n    nets[k].eval()", [TRAIN]),  # the keys of another container
])
def test_mode_set_by_a_loop_over_a_container(switch, kinds):
    switch = switch.replace("\n", "\n            ")
    source = f"""
        import torch

        def run(nets, x):
            nets.enc.train()
            nets.dec.train()
            {switch}
            with torch.no_grad():
                return nets.dec(nets.enc(x))
        """
    found = {key: fact_kinds for _, key, fact_kinds, _ in _forwards(source)}
    assert found == {"nets.enc": kinds, "nets.dec": kinds}


def test_modules_loop_reaches_the_model_itself():
    source = """
        import torch

        def run(model, x):
            model.train()
            for m in model.modules():
                m.eval()
            with torch.no_grad():
                return model(x)
        """
    assert _forwards(source) == [("return model(x)", "model", [EVAL], [OFF])]


def test_train_loop_over_a_container_undoes_eval():
    source = """
        import torch

        def run(nets, x):
            nets.enc.eval()
            for m in nets.values():
                m.train()
            with torch.no_grad():
                return nets.enc(x)
        """
    assert _forwards(source) == [("return nets.enc(x)", "nets.enc", [TRAIN], [OFF])]


@pytest.mark.parametrize("inputs, grad", [
    ("x = Variable(batch, volatile=True)", [OFF]),
    ("x = Variable(batch.cuda(), volatile=True).view(-1, 4)", [OFF]),
    ("x, y = Variable(batch, volatile=True), Variable(labels)", [OFF]),
    ("x = Variable(batch, volatile=True)\nx = x.cuda()", [OFF]),  # computed from a volatile input
    ("x = Variable(batch)", [ON]),
    ("x = Variable(batch, volatile=False)", [ON]),
    ("x, y = Variable(batch), Variable(labels, volatile=True)", [ON]),  # the model never sees y
    ("x = Variable(batch, volatile=True)\nif flip:\n    x = batch", [ON]),  # not on every path
])
def test_legacy_volatile_input_records_no_graph(inputs, grad):
    inputs = inputs.replace("\n", "\n            ")
    source = f"""
        from torch.autograd import Variable

        def evaluate(model, batch, labels, flip):
            model.eval()
            {inputs}
            return model(x)
        """
    assert _forwards(source) == [("return model(x)", "model", [EVAL], grad)]


def test_volatile_input_rebound_later_in_the_loop_records_a_graph():
    source = """
        from torch.autograd import Variable

        def evaluate(model, batches):
            model.eval()
            x = Variable(batches[0], volatile=True)
            for batch in batches:
                out = model(x)
                x = batch
        """
    assert _forwards(source) == [("out = model(x)", "model", [EVAL], [ON])]


@pytest.mark.parametrize("last, kinds", [
    ("assert False", [CHOSEN]),  # never falls through: the mode is one the condition chose
    ("assert setting in ('finetune', 'freeze')", [EVAL, TRAIN]),  # may fall through: the first train() stands
])
def test_assert_false_branch_never_falls_through(last, kinds):
    source = f"""
        import torch

        def run(model, x, setting):
            model.train()
            if setting == "finetune":
                model.train()
            elif setting == "freeze":
                model.eval()
            else:
                {last}
            with torch.no_grad():
                return model(x)
        """
    assert [k for _, _, k, _ in _forwards(source)] == [kinds]


@pytest.mark.parametrize("setup, trained", [
    # every optimizer's parameters are known and the teacher's are not among them
    ("opt = torch.optim.AdamW(student.parameters())\nstudent, teacher, opt = accelerator.prepare(student, teacher, opt)",
     {"student"}),
    ("opt = torch.optim.AdamW([*student.parameters(), *teacher.parameters()])", {"student", "teacher"}),
    # a helper whose body is not here receives the teacher: it may build an optimizer over it
    ("opt = torch.optim.AdamW(student.parameters())\nextra = make_optimizer(teacher)\nteacher.train()",
     {"student", "teacher"}),
    # no optimizer built here: nothing is proven, the old evidence stands
    ("opt = make_optimizer(student)\nstudent, teacher, opt = accelerator.prepare(student, teacher, opt)",
     {"student", "teacher"}),
])
def test_a_model_no_optimizer_holds_is_not_trained(setup, trained):
    source = f"""
import torch
{setup}
student.train()
"""
    _, model = _model(source)
    assert {name for name in ("student", "teacher") if model.is_trained(name)} == trained


def test_unrestored_lists_every_model_an_eval_call_leaves_in_key_order():
    source = """
        import torch

        def validate(gen, disc, loader):
            gen.eval()
            disc.eval()
            with torch.no_grad():
                return [disc(gen(z)) for z in loader]

        def train(gen, disc, opt, loader, val_loader):
            gen.train()
            disc.train()
            for epoch in range(10):
                for z in loader:
                    loss = disc(gen(z)).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                validate(gen, disc, val_loader)
        """
    ctx, model = _model(source)
    items = model.unrestored()
    assert {ctx.code_for(item.anchor) for item in items} == {"validate(gen, disc, val_loader)"}
    assert [item.key for item in items] == ["disc", "gen"]


@pytest.mark.parametrize("rebind, found", [
    # wrapped on one branch: `model` is `self.model` or a wrapper around it, the same module's mode
    ("model = torch.nn.DataParallel(model)", True),
    ("model = model.to(self.device)", True),
    # a copy or another module on one branch: `model` may not be `self.model`, nothing is proven
    ("model = copy.deepcopy(model)", False),
    ("model = self.ema_model", False),
])
def test_a_name_rewrapped_on_a_branch_still_names_the_module(rebind, found):
    """simpletransformers' `train`/`evaluate`: `model = self.model`, then `if args.n_gpu > 1: model =
    DataParallel(model)`; `evaluate` (reached through `eval_model`) calls `model.eval()`, so the
    loop that calls `eval_model` mid-epoch keeps training `self.model` in eval mode."""
    source = f"""
        import copy
        import torch

        class Runner:
            def train(self, loader, args, optimizer):
                model = self.model
                if args.n_gpu > 1:
                    {rebind}
                for epoch in range(args.epochs):
                    model.train()
                    for step, batch in enumerate(loader):
                        loss = model(**batch)[0]
                        loss.backward()
                        optimizer.step()
                        model.zero_grad()
                        if step % args.eval_every == 0:
                            self.eval_model(args)

            def eval_model(self, args):
                return self.evaluate(args)

            def evaluate(self, args):
                model = self.model
                if args.n_gpu > 1:
                    {rebind}
                model.eval()
                with torch.no_grad():
                    return model(args.x)
        """
    expected = [("self.eval_model(args)", "self.model")] if found else []
    assert _unrestored(source) == expected


def _helper_forwards(source: str):
    ctx, model = _model(source)
    return sorted((ctx.code_for(ctx.index.enclosing_statement(f.call)).strip(), f.key, f.helper.name)
                  for f in model.helper_forwards())


@pytest.mark.parametrize("forward_body, expected", [
    ("return self._model.forward(batch)", [("out = self._forward(batch)", "self._model", "_forward")]),
    # the helper turns recording off itself: still a helper forward in eval mode (TL301 reads the grad)
    ("with torch.no_grad():\n                    return self._model(batch)",
     [("out = self._forward(batch)", "self._model", "_forward")]),
    ("return self._other(batch)", []),  # another model: not the one the caller switched
])
def test_a_helper_runs_the_forward_in_the_mode_its_caller_set(forward_body, expected):
    """jiant's trainer: `_validate` calls `self._model.eval()`, then `_calculate_validation_performance`
    (its only caller is `_validate`) runs each batch through `self._forward`, which the training
    loop shares: the forward runs in eval mode at the evaluation's call of `_forward`."""
    source = f"""
        import torch

        class Trainer:
            def _forward(self, batch):
                {forward_body}

            def train(self, loader):
                for batch in loader:
                    self._model.train()
                    loss = self._forward(batch)["loss"]
                    loss.backward()
                    self._optimizer.step()
                    self._optimizer.zero_grad()
                    self._validate(loader)

            def _validate(self, loader):
                self._model.eval()
                return self._calculate_validation_performance(loader)

            def _calculate_validation_performance(self, loader):
                total = 0.0
                for batch in loader:
                    out = self._forward(batch)
                    total += out["loss"].item()
                return total
        """
    assert _helper_forwards(source) == expected


def test_a_helper_after_train_mode_is_no_eval_forward():
    source = """
        class Runner:
            def infer(self, x):
                return self.module_(x)

            def validation_step(self, x):
                self.module_.eval()
                self.module_.train()
                return self.infer(x)
        """
    assert _helper_forwards(source) == []


def _frozen_at_forwards(source: str):
    """(line text of the forward, the line text of what froze it or None) per forward."""
    ctx, model = _model(source)
    result = []
    for forward in model.forwards():
        line = ctx.code_for(ctx.index.enclosing_statement(forward.call)).strip()
        by = forward.frozen
        result.append((line, ctx.code_for(by).strip().splitlines()[0] if by is not None else None))
    return result


@pytest.mark.parametrize("freeze, frozen_by", [
    ("model.requires_grad_(False)", "model.requires_grad_(False)"),
    ("model.eval().requires_grad_(False).to(device)", "model.eval().requires_grad_(False)"),
    ("for p in model.parameters():\n        p.requires_grad = False", "for p in model.parameters():"),
    ("for k, v in model.named_parameters():\n        v.requires_grad_(False)", "for k, v in model.named_parameters():"),
    ("for p in model.parameters():\n        p.requires_grad = False\n    model = model.to(device)",
     "for p in model.parameters():"),
    # not every parameter, not on every path, or undone
    ("model.backbone.requires_grad_(False)", None),
    ("teacher.requires_grad_(False)", None),
    ("for name, p in model.named_parameters():\n        if 'head' not in name:\n            p.requires_grad = False",
     None),
    ("for p in model.parameters():\n        p.requires_grad = freeze_all", None),
    ("model.requires_grad_(False)\n    model.head.requires_grad_(True)", None),
    ("model.requires_grad_(False)\n    model = Net()", None),
    ("if frozen:\n        model.requires_grad_(False)", None),
    # handed to code not followed here, it may come back with trainable parameters
    ("model.requires_grad_(False)\n    inject_trainable_lora(model, r=4)", None),
    ("model.requires_grad_(False)\n    model.add_adapter(config)", None),
    ("model.requires_grad_(False)\n    model.fc = torch.nn.Linear(8, 2)", None),
    ("model.requires_grad_(False)\n    print(model, model.device)\n    x0 = torch.zeros(1).to(model.device)",
     "model.requires_grad_(False)"),
])
def test_frozen_parameters_along_the_flow(freeze, frozen_by):
    freeze = freeze.replace("\n", "\n        ")  # the source's own indentation
    source = f"""
        import torch

        from peft_helpers import inject_trainable_lora

        def run(model, teacher, loader, device, frozen, freeze_all, config):
            model.eval()
            {freeze}
            for x in loader:
                print(model(x))
        """
    assert _frozen_at_forwards(source) == [("print(model(x))", frozen_by)]


def test_a_freeze_after_the_forward_proves_nothing_there():
    source = """
        import torch

        def run(model, loader):
            model.eval()
            for x in loader:
                print(model(x))
            model.requires_grad_(False)
        """
    assert _frozen_at_forwards(source) == [("print(model(x))", None)]


def test_what_every_caller_froze_is_frozen_in_the_helper():
    """The freeze reaches a helper through its parameter, only when every caller made it."""
    helper = """
        import torch

        def predict(net, loader):
            net.eval()
            return [net(x) for x in loader]

        def main(model, loader):
            model.requires_grad_(False)
            predict(model, loader)
        """
    assert ("return [net(x) for x in loader]", "model.requires_grad_(False)") in _frozen_at_forwards(helper)
    mixed = helper + """
        def other(model, loader):
            predict(model, loader)
        """
    assert ("return [net(x) for x in loader]", None) in _frozen_at_forwards(mixed)


@pytest.mark.parametrize("encode, reported", [
    ("with torch.no_grad():\n            k = model_ema(x)", []),
    # the loop records a graph through it, or hands it to code the run does not follow
    ("k = model_ema(x)", ["model_ema"]),
    ("with torch.no_grad():\n            k = model_ema(x)\n        k = k + encode(model_ema, x)", ["model_ema"]),
])
def test_a_model_forwarded_only_without_grad_is_not_trained_by_the_loop(encode, reported):
    """`model_ema` is held by an optimizer (apex wants one), so the file alone says it may be
    trained; the loop's own forwards say its backward never reaches it."""
    encode = encode.replace("\n", "\n        ")
    source = f"""
        import torch
        from helpers import encode

        def run(model, model_ema, loader, optimizer):
            optimizer_ema = torch.optim.SGD(model_ema.parameters(), lr=0)
            model.train()
            for x in loader:
                model_ema.eval()
                q = model(x)
                {encode}
                optimizer.zero_grad()
                (q * k).sum().backward()
                optimizer.step()
        """
    assert [item.key for item in _model(source)[1].unrestored()] == reported


@pytest.mark.parametrize("call, expected", [
    ("run(model, opt, val_loader)", []),  # `optim=None` by default: the backward is skipped
    ("run(model, opt, val_loader, optim=None)", []),
    ('run(model, opt, val_loader, optim=opt, phase="val")', []),  # `phase != "train"` returns first
    # the backward runs in eval mode, but in the mode chosen right before the loop that trains in it (no
    # evaluation used it, the next epoch's train() comes first): not a mode an evaluation left behind
    ("run(model, opt, val_loader, optim=opt)", []),
    # an evaluation (another file's helper handed the model) used the eval mode before the loop trains in it
    ("evaluate(model, val_loader) or run(model, opt, train_loader, optim=opt)", [("model.eval()", "model")]),
])
def test_literal_none_and_string_arguments_decide_the_helpers_tests(call, expected):
    source = """
        import torch

        def step(model, x, optim, phase):
            loss = model(x).sum()
            if phase != "train":
                return loss
            if optim is not None:
                optim.zero_grad()
                loss.backward()
                optim.step()
            return loss

        def run(model, opt, loader, optim=None, phase="train"):
            for x in loader:
                step(model, x, optim, phase)

        def fit(model, opt, train_loader, val_loader, epochs):
            for epoch in range(epochs):
                model.train()
                run(model, opt, train_loader, optim=opt)
                model.eval()
                CALL
        """.replace("CALL", call)
    assert _unrestored(source) == expected
