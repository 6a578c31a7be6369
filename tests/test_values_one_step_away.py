"""Values one step away (issue 36): a sampler reaching its loader through a `**mapping` or a
factory's `**kwargs`, a loader held under the name a factory's caller gives it, a cadence test
stored in a boolean, and the order of the clear within the update window. Each bad case in a
real idiom fires; its correct look-alike stays quiet."""

from __future__ import annotations

import textwrap

from trainlint.engine import lint_source


def codes_at(source: str, code: str) -> list[int]:
    """Lines where `code` is reported in `source`."""
    result = lint_source(textwrap.dedent(source), "train.py")
    return [f.line for f in result.findings if f.code == code]


# -- TL801: the sampler reaches the DataLoader through a mapping or **kwargs --------------------------
SAMPLER_IN_MAPPING = """
import torch
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def make_loader(dataset, batch_size, distributed):
    loader_kwargs = {"batch_size": batch_size, "num_workers": 4, "pin_memory": True}
    if distributed:
        loader_kwargs["sampler"] = DistributedSampler(dataset)
    else:
        loader_kwargs["shuffle"] = True
    return DataLoader(dataset, **loader_kwargs)


def train(model, dataset, opt, epochs):
    loader = make_loader(dataset, 32, distributed=True)
    for epoch in range(epochs):
{set_epoch}        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


def test_sampler_written_into_the_loader_kwargs_fires():
    assert codes_at(SAMPLER_IN_MAPPING.replace("{set_epoch}", ""), "TL801") == [10]


def test_sampler_in_the_loader_kwargs_with_set_epoch_on_the_loader_is_quiet():
    source = SAMPLER_IN_MAPPING.replace("{set_epoch}", "        loader.sampler.set_epoch(epoch)\n")
    assert codes_at(source, "TL801") == []


def test_sampler_in_a_dict_literal_handed_as_kwargs_fires():
    source = """
    import torch
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler


    def train(model, dataset, opt, epochs):
        loader_args = dict(batch_size=32, sampler=DistributedSampler(dataset), drop_last=True)
        loader = DataLoader(dataset, **loader_args)
        for epoch in range(epochs):
            for x, y in loader:
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
    """
    assert codes_at(source, "TL801") == [8]


SAMPLER_THROUGH_KWARGS = """
import torch
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def build_loader(dataset, batch_size, **kwargs):
    return DataLoader(dataset, batch_size=batch_size, pin_memory=True, **kwargs)


def train(model, dataset, opt, epochs):
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = build_loader(dataset, 32, sampler=sampler, num_workers=2)
    for epoch in range(epochs):
{set_epoch}        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


def test_sampler_through_a_factorys_kwargs_fires():
    assert codes_at(SAMPLER_THROUGH_KWARGS.replace("{set_epoch}", ""), "TL801") == [12]


def test_sampler_through_a_factorys_kwargs_with_set_epoch_is_quiet():
    source = SAMPLER_THROUGH_KWARGS.replace("{set_epoch}", "        sampler.set_epoch(epoch)\n")
    assert codes_at(source, "TL801") == []


def test_kwargs_of_another_caller_do_not_carry_the_sampler():
    """The factory's other caller (a validation loader) passes no sampler: only the training
    call that passes one is the sampler's loader; a single pass over the validation loader is no
    epoch loop."""
    source = """
    import torch
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler


    def build_loader(dataset, **kwargs):
        return DataLoader(dataset, batch_size=32, **kwargs)


    def train(model, train_set, val_set, opt, epochs):
        sampler = DistributedSampler(train_set)
        loader = build_loader(train_set, sampler=sampler)
        val_loader = build_loader(val_set, shuffle=False)
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
    """
    assert codes_at(source, "TL801") == []


def test_loader_returned_by_a_factory_and_held_by_name_fires():
    """`loader = make_loader(...)` then `for ... in loader`: the loop iterates the factory's
    loader (before, the name was followed to the factory call and the loop was not matched)."""
    source = """
    import torch
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler


    def make_loader(dataset):
        return DataLoader(dataset, batch_size=32, sampler=DistributedSampler(dataset))


    def train(model, dataset, opt, epochs):
        loader = make_loader(dataset)
        for epoch in range(epochs):
            for x, y in loader:
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
    """
    assert codes_at(source, "TL801") == [8]
    fixed = source.replace("        for epoch in range(epochs):\n",
                           "        for epoch in range(epochs):\n            loader.sampler.set_epoch(epoch)\n")
    assert codes_at(fixed, "TL801") == []


# -- TL108: a cadence test stored in a boolean -------------------------------------------------------
CADENCE_TRAINER = """
import torch


class Trainer:
    def __init__(self, model, optimizer, train_loader, val_loader, accum_steps=8, eval_every=500):
        self.model, self.optimizer = model, optimizer
        self.train_loader, self.val_loader = train_loader, val_loader
        self.accum_steps, self.eval_every = accum_steps, eval_every
        self.global_step = 0

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        total = sum(self.model(**batch).loss.item() for batch in self.val_loader)
        self.model.train()
        return total / len(self.val_loader)

    def train_epoch(self):
        self.model.train()
        for step, batch in enumerate(self.train_loader):
            loss = self.model(**batch).loss / self.accum_steps
            loss.backward()
            if (step + 1) % self.accum_steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()
                self.global_step += 1
{body}
"""

STORED_ON_MICRO_CLOCK = """
            should_eval = step > 0 and step % self.eval_every == 0
            if should_eval:
                print(self.evaluate())
"""


def test_cadence_stored_in_a_boolean_fires():
    source = CADENCE_TRAINER.replace("{body}", STORED_ON_MICRO_CLOCK.strip("\n"))
    lines = codes_at(source, "TL108")
    assert lines == [29]
    result = lint_source(textwrap.dedent(source), "train.py")
    finding = next(f for f in result.findings if f.code == "TL108")
    assert "should_eval = step > 0 and step % self.eval_every == 0" in finding.message
    assert any(p.line == 28 for p in finding.evidence)  # the assignment is a premise


def test_cadence_stored_with_the_update_condition_is_quiet():
    """The boolean also tests the window boundary: it is true once per update."""
    body = """
            do_eval = (step + 1) % self.accum_steps == 0 and self.global_step % self.eval_every == 0
            if do_eval:
                print(self.evaluate())
"""
    assert codes_at(CADENCE_TRAINER.replace("{body}", body.strip("\n")), "TL108") == []


def test_cadence_stored_and_tested_inside_the_update_is_quiet():
    body = """
                should_eval = self.global_step % self.eval_every == 0
                if should_eval:
                    print(self.evaluate())
"""
    assert codes_at(CADENCE_TRAINER.replace("{body}", body.strip("\n")), "TL108") == []


def test_flag_set_before_the_loop_is_not_a_cadence():
    """`run_eval = epoch % 2 == 0` before the micro-batch loop is not this loop's clock."""
    source = """
    import torch


    def train_epoch(model, loader, opt, evaluate, epoch, accum_steps=4):
        run_eval = epoch % 2 == 0
        model.train()
        for step, (x, y) in enumerate(loader):
            loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
            loss.backward()
            if (step + 1) % accum_steps == 0:
                opt.step()
                opt.zero_grad()
            if run_eval and step == 0:
                model.eval()
                evaluate(model)
                model.train()
    """
    assert codes_at(source, "TL108") == []


# -- TL104: the clear's place within the update window -----------------------------------------------
CLEAR_TRAINER = """
import torch


class Trainer:
    def __init__(self, model, optimizer, scheduler, loader, grad_accum=8):
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.loader, self.grad_accum = loader, grad_accum

    def train_epoch(self):
        self.model.train()
        for step, batch in enumerate(self.loader):
            update = (step + 1) % self.grad_accum == 0
            if {clear_test}:
                self.optimizer.zero_grad(set_to_none=True)
            loss = self.model(**batch).loss / self.grad_accum
            loss.backward()
            if update:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                self.scheduler.step()
"""


def test_clear_on_the_last_micro_batch_before_its_backward_fires():
    source = CLEAR_TRAINER.replace("{clear_test}", "update")
    assert codes_at(source, "TL104") == [15]
    finding = next(f for f in lint_source(textwrap.dedent(source), "train.py").findings if f.code == "TL104")
    assert "before that micro-batch's `loss.backward()`" in finding.message
    assert {p.line for p in finding.evidence} >= {15, 17, 20}


def test_clear_on_the_first_micro_batch_of_the_window_is_quiet():
    """`step % K == 0` is the window's first micro-batch: clearing before its backward is right."""
    source = CLEAR_TRAINER.replace("{clear_test}", "step % self.grad_accum == 0")
    assert codes_at(source, "TL104") == []


def test_clear_under_the_same_branch_before_the_boundary_backward_fires():
    source = """
    import torch


    def train(model, loader, opt, accum_steps=4):
        model.train()
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
            if (i + 1) % accum_steps == 0:
                opt.zero_grad()
                loss.backward()
                opt.step()
            else:
                loss.backward()
    """
    assert codes_at(source, "TL104") == [10]


def test_clear_after_the_step_in_the_same_branch_is_quiet():
    source = """
    import torch


    def train(model, loader, opt, accum_steps=4):
        model.train()
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0:
                opt.step()
                opt.zero_grad()
    """
    assert codes_at(source, "TL104") == []


# -- TL106: the step half of an update in a wrapper whose parts come from its constructions ------------
STEP_WRAPPER = """
import torch
from torch.optim.lr_scheduler import OneCycleLR


class UpdateStep:
    def __init__(self, optimizer, lr_scheduler, max_norm=1.0):
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.max_norm = max_norm

    def __call__(self, parameters):
        torch.nn.utils.clip_grad_norm_(parameters, self.max_norm)
{steps}
        self.optimizer.zero_grad(set_to_none=True)


def build_update(model, lr, total_steps):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    return UpdateStep(optimizer, OneCycleLR(optimizer, max_lr=lr, total_steps=total_steps))
"""


def test_scheduler_before_optimizer_in_a_step_wrapper_fires():
    steps = "        self.lr_scheduler.step()\n        self.optimizer.step()"
    source = STEP_WRAPPER.replace("{steps}", steps)
    assert codes_at(source, "TL106") == [14]
    finding = next(f for f in lint_source(textwrap.dedent(source), "train.py").findings if f.code == "TL106")
    # the roles are proven by what the construction passes, one step away from `self.lr_scheduler`
    assert all(p.verdict == "proven" for p in finding.evidence)
    assert {p.line for p in finding.evidence} >= {20, 21}


def test_optimizer_before_scheduler_in_a_step_wrapper_is_quiet():
    steps = "        self.optimizer.step()\n        self.lr_scheduler.step()"
    assert codes_at(STEP_WRAPPER.replace("{steps}", steps), "TL106") == []


def test_step_wrapper_whose_parts_only_names_tell_is_quiet():
    """Nothing in the file builds the wrapper: `scheduler` is only a name (it may be a schedule of
    the project's own that sets the coming rate), so the order proves nothing."""
    source = """
    class OptimizerScheduler:
        def __init__(self, optimizer, scheduler):
            self.optimizer = optimizer
            self.scheduler = scheduler

        def step(self):
            self.scheduler.step()
            self.optimizer.step()
    """
    assert codes_at(source, "TL106") == []


# -- TL102: a loss summed from a container of terms ------------------------------------------------------
LOSS_TERMS = """
import torch
import transformers

class Trainer:
    def __init__(self, model, optimizer, loader, grad_accum_steps=4):
        self.model, self.optimizer, self.loader = model, optimizer, loader
        self.grad_accum_steps = grad_accum_steps

    def train_epoch(self):
        self.model.train()
        for step, batch in enumerate(self.loader):
            out = self.model(**batch)
{terms}
            loss.backward()
            if (step + 1) % self.grad_accum_steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()


# a transformers model: its `.loss` is a token mean (the premise proven)
Trainer(transformers.AutoModelForSequenceClassification.from_pretrained(name), optimizer, loader).train_epoch()
"""


def test_loss_summed_from_a_dict_of_terms_fires():
    terms = """
            loss_dict = {"lm": out.loss, "aux": 0.01 * out.aux_loss}
            loss = sum(loss_dict.values())
"""
    assert codes_at(LOSS_TERMS.replace("{terms}", terms.strip("\n")), "TL102") == [16]


def test_loss_summed_from_terms_written_by_key_fires():
    terms = """
            loss_dict = {}
            loss_dict["lm"] = out.loss
            loss_dict["balance"] = 0.01 * out.aux_loss
            loss = sum(loss_dict.values())
"""
    assert codes_at(LOSS_TERMS.replace("{terms}", terms.strip("\n")), "TL102") == [18]


def test_loss_summed_from_scaled_terms_is_quiet():
    terms = """
            loss_dict = {}
            loss_dict["lm"] = out.loss / self.grad_accum_steps
            loss_dict["balance"] = 0.01 * out.aux_loss / self.grad_accum_steps
            loss = sum(loss_dict.values())
"""
    assert codes_at(LOSS_TERMS.replace("{terms}", terms.strip("\n")), "TL102") == []


def test_summed_terms_divided_by_k_are_quiet():
    terms = """
            loss = sum([out.loss, 0.01 * out.aux_loss]) / self.grad_accum_steps
"""
    assert codes_at(LOSS_TERMS.replace("{terms}", terms.strip("\n")), "TL102") == []


# -- TL801: a loader returned inside a tuple by a method ------------------------------------------------
TUPLE_METHOD = """
import torch
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


class Trainer:
    def __init__(self, model, optimizer, train_set, val_set, epochs):
        self.model, self.optimizer, self.epochs = model, optimizer, epochs
        self.train_loader, self.train_sampler, self.val_loader = self.build_loaders(train_set, val_set)

    def build_loaders(self, train_set, val_set):
        sampler = DistributedSampler(train_set)
        train_loader = DataLoader(train_set, batch_size=32, sampler=sampler, num_workers=4)
        val_loader = DataLoader(val_set, batch_size=64)
        return train_loader, sampler, val_loader

    def fit(self):
        for epoch in range(self.epochs):
{set_epoch}            self.model.train()
            for x, y in self.train_loader:
                loss = torch.nn.functional.mse_loss(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
"""


def test_loader_returned_in_a_tuple_by_a_method_fires():
    assert codes_at(TUPLE_METHOD.replace("{set_epoch}", ""), "TL801") == [13]


def test_loader_returned_in_a_tuple_by_a_method_with_set_epoch_is_quiet():
    source = TUPLE_METHOD.replace("{set_epoch}", "            self.train_sampler.set_epoch(epoch)\n")
    assert codes_at(source, "TL801") == []


# -- TL103: micro-batches packed by a token budget, one unpacking away; the path that divides by K -------
PACKED_UPDATE = """
import torch


class PolicyTrainer:
    def __init__(self, policy, optimizer, cfg):
        self.policy, self.optimizer, self.cfg = policy, optimizer, cfg

    def update(self, rollout):
        self.policy.train()
        self.accum = self.cfg.mini_batch_size // self.cfg.micro_batch_size
        for mini_batch in rollout.split(self.cfg.mini_batch_size):
            if self.cfg.pack_by_tokens:
                micro_batches, _ = pack_by_token_budget(mini_batch, max_tokens=self.cfg.max_tokens)
            else:
                micro_batches = mini_batch.split(self.cfg.micro_batch_size)
            self.optimizer.zero_grad()
            for micro in micro_batches:
                logprobs = self.policy(micro["input_ids"])
                pg_loss = policy_gradient_loss(logprobs, micro["advantages"])
{scale}
                loss.backward()
            torch.nn.utils.clip_grad_norm_(self.policy.parameters(), 1.0)
            self.optimizer.step()
"""


def test_division_by_k_of_micro_batches_packed_by_tokens_fires():
    scale = "                loss = pg_loss / self.accum"
    assert codes_at(PACKED_UPDATE.replace("{scale}", scale), "TL103") == [21]


def test_division_by_k_only_on_the_path_of_equal_splits_is_quiet():
    """The fix weights packed micro-batches by their share; `/ K` is left on the path where the
    micro-batches are equal `split` pieces: the two assignments are never on one path."""
    scale = """
                if self.cfg.pack_by_tokens:
                    loss = pg_loss * (len(micro) / self.cfg.mini_batch_size)
                else:
                    loss = pg_loss / self.accum"""
    assert codes_at(PACKED_UPDATE.replace("{scale}", scale.strip("\n")), "TL103") == []


def test_sampler_two_factories_away_fires_and_set_epoch_quiets_it():
    """`sampler=` passed to a factory whose `**kwargs` go to another factory's `**kwargs`, which
    builds the DataLoader: two steps away."""
    source = """
    import torch
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler


    def _make(dataset, **loader_kwargs):
        return DataLoader(dataset, pin_memory=True, **loader_kwargs)


    def build_train_loader(dataset, batch_size, **kwargs):
        return _make(dataset, batch_size=batch_size, drop_last=True, **kwargs)


    def train(model, dataset, opt, epochs):
        sampler = DistributedSampler(dataset)
        loader = build_train_loader(dataset, 32, sampler=sampler)
        for epoch in range(epochs):
            for x, y in loader:
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
    """
    assert codes_at(source, "TL801") == [16]
    fixed = source.replace("        for epoch in range(epochs):\n",
                           "        for epoch in range(epochs):\n            sampler.set_epoch(epoch)\n")
    assert codes_at(fixed, "TL801") == []


# -- TL602: an evaluation loader's shuffle handed in through a mapping ------------------------------------
KWARGS_LOADERS = """
import torch
import torch.nn.functional as F
from torchvision import datasets, transforms


def evaluate(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in loader:
            correct += model(data).argmax(dim=1).eq(target).sum().item()
    return correct / len(loader.dataset)


def main(args, model, optimizer):
    train_kwargs = {"batch_size": args.batch_size}
    test_kwargs = {"batch_size": args.test_batch_size}
    if torch.cuda.is_available():
        cuda_kwargs = {"num_workers": 1, "pin_memory": True{shuffle}}
        train_kwargs.update(cuda_kwargs)
        test_kwargs.update(cuda_kwargs)
{train_shuffle}    train_set = datasets.MNIST("data", train=True, download=True, transform=transforms.ToTensor())
    test_set = datasets.MNIST("data", train=False, transform=transforms.ToTensor())
    train_loader = torch.utils.data.DataLoader(train_set, **train_kwargs)
    test_loader = torch.utils.data.DataLoader(test_set, **test_kwargs)
    for epoch in range(args.epochs):
        model.train()
        for data, target in train_loader:
            optimizer.zero_grad()
            F.nll_loss(model(data), target).backward()
            optimizer.step()
        print(evaluate(model, test_loader))
"""


def test_shuffle_shared_into_the_test_kwargs_fires_without_a_fix():
    source = KWARGS_LOADERS.replace("{shuffle}", ', "shuffle": True').replace("{train_shuffle}", "")
    result = lint_source(textwrap.dedent(source), "train.py")
    found = [f for f in result.findings if f.code == "TL602"]
    assert [f.line for f in found] == [26]
    assert found[0].fix is None  # the `True` is shared with the training loader: no edit is right
    assert any(p.line == 20 for p in found[0].evidence)


def test_shuffle_only_in_the_train_kwargs_is_quiet():
    source = KWARGS_LOADERS.replace("{shuffle}", "").replace(
        "{train_shuffle}", '    train_kwargs["shuffle"] = True\n')
    assert codes_at(source, "TL602") == []


def test_cadence_narrowed_by_a_later_literal_is_still_read():
    """`should_eval = step % every == 0`, then `if step == 0: should_eval = False`: the literal only
    narrows the stored test, which still runs on the micro-batch clock."""
    body = """
            should_eval = step % self.eval_every == 0
            if step == 0:
                should_eval = False
            if should_eval:
                print(self.evaluate())
"""
    assert codes_at(CADENCE_TRAINER.replace("{body}", body.strip("\n")), "TL108") == [31]


def test_flag_set_only_by_literals_is_not_a_cadence():
    body = """
            should_eval = False
            if batch.get("last_of_epoch"):
                should_eval = True
            if should_eval:
                print(self.evaluate())
"""
    assert codes_at(CADENCE_TRAINER.replace("{body}", body.strip("\n")), "TL108") == []


# -- TL108: a cadence test one call away (a predicate method of the trainer) -----------------------------
PREDICATE_TRAINER = """
import torch


class Trainer:
    def __init__(self, model, optimizer, loader, evaluator, accum=4, eval_every=200):
        self.model, self.optimizer, self.loader = model, optimizer, loader
        self.evaluator, self.accum, self.eval_every = evaluator, accum, eval_every
        self.updates = 0

    def _should_evaluate(self, step):
        return {predicate}

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        score = self.evaluator(self.model)
        self.model.train()
        return score

    def train(self):
        self.model.train()
        for step, batch in enumerate(self.loader):
            loss = self.model(**batch).loss / self.accum
            loss.backward()
            if (step + 1) % self.accum == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()
                self.updates += 1
{test}
"""


def test_cadence_in_a_predicate_on_the_micro_batch_counter_fires():
    source = PREDICATE_TRAINER.replace("{predicate}", "step > 0 and step % self.eval_every == 0").replace(
        "{test}", "            if self._should_evaluate(step):\n                print(self.evaluate())")
    assert codes_at(source, "TL108") == [30]
    finding = next(f for f in lint_source(textwrap.dedent(source), "train.py").findings if f.code == "TL108")
    assert "it returns `step > 0 and step % self.eval_every == 0`" in finding.message


def test_cadence_predicate_called_inside_the_update_is_quiet():
    source = PREDICATE_TRAINER.replace("{predicate}", "step % self.eval_every == 0").replace(
        "{test}", "                if self._should_evaluate(self.updates):\n                    print(self.evaluate())")
    assert codes_at(source, "TL108") == []


def test_cadence_predicate_that_tests_the_boundary_too_is_quiet():
    source = PREDICATE_TRAINER.replace(
        "{predicate}", "(step + 1) % self.accum == 0 and self.updates % self.eval_every == 0").replace(
        "{test}", "            if self._should_evaluate(step):\n                print(self.evaluate())")
    assert codes_at(source, "TL108") == []


# -- roles: an attribute set from an __init__ parameter, proven by what the constructions pass ----------
def _role_source(source: str, attribute: str):
    import libcst as cst

    from trainlint.context import FileContext
    from trainlint.model.index import walk
    from trainlint.model.roles import roles

    source = textwrap.dedent(source)
    ctx = FileContext("t.py", source, cst.parse_module(source), (2, 6))
    found = ctx.model(roles)
    for node in walk(ctx.module):
        if isinstance(node, cst.Attribute) and ctx.code_for(node) == attribute \
                and isinstance(ctx.index.parent(node), cst.Attribute):  # `self.x.step` in a method
            scope = ctx.index.scope_at(node)
            return found.of(node, scope), found.source(node, scope)
    raise AssertionError(attribute)


WRAPPER = """
import torch


class Stepper:
    def __init__(self, opt, sched):
        self.opt = opt
        self.sched = sched

    def step(self):
        self.opt.step()
        self.sched.step()

{built}
"""


def test_constructions_prove_the_role_of_a_parameter_attribute():
    built = ("def make(model):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
             "    return Stepper(opt, torch.optim.lr_scheduler.StepLR(opt, 10))")
    role, source = _role_source(WRAPPER.replace("{built}", built), "self.sched")
    assert role == "scheduler" and source.proven and source.kind == "argument"


def test_constructions_that_pass_unknown_values_leave_the_name_guess():
    built = "def make(opt, sched):\n    return Stepper(opt, sched)"
    role, source = _role_source(WRAPPER.replace("{built}", built), "self.sched")
    assert role == "scheduler" and not source.proven


# -- TL102: a loss built by arithmetic on a mean -------------------------------------------------------
WEIGHTED_LOSS = """
import argparse
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--accum", type=int, default=4)
parser.add_argument("--alpha", type=float, default=0.5)
args = parser.parse_args()
criterion = torch.nn.CrossEntropyLoss()
{share}
for i, (x, y) in enumerate(loader):
    out = model(x)
    loss = criterion(out, y) * {factor} + out.pow(2).mean() * 0.01
    loss.backward()
    if (i + 1) % args.accum == 0:
        optimizer.step()
        optimizer.zero_grad()
"""


def test_a_mean_weighted_by_a_setting_that_does_not_read_k_fires():
    source = WEIGHTED_LOSS.replace("{share}", "").replace("{factor}", "args.alpha")
    assert codes_at(source, "TL102") == [14]
    finding = next(f for f in lint_source(textwrap.dedent(source), "train.py").findings if f.code == "TL102")
    assert any("`args.alpha` reads nothing" in p.premise and p.verdict == "proven" for p in finding.evidence)


def test_a_mean_weighted_by_a_factor_computed_from_k_is_quiet():
    source = WEIGHTED_LOSS.replace("{share}", "share = 1.0 / args.accum").replace("{factor}", "share")
    assert codes_at(source, "TL102") == []


def test_a_mean_weighted_by_a_parameter_no_caller_shows_is_quiet():
    source = """
    import torch


    def train(model, loader, optimizer, accum, weight):
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.mse_loss(model(x), y) * weight
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    assert codes_at(source, "TL102") == []
    called = source + "\n    train(net, batches, opt, accum=8, weight=0.5)\n"
    assert codes_at(called, "TL102") == [8]
    shared = source + "\n    train(net, batches, opt, accum=8, weight=1 / 8)\n"
    assert codes_at(shared, "TL102") == []  # 1 / 8 with K = 8 at that call: the window's share
    from_k = source + "\n    k = 8\n    train(net, batches, opt, accum=k, weight=1 / k)\n"
    assert codes_at(from_k, "TL102") == []


# -- TL101: the update's test kept in a variable --------------------------------------------------------
def test_a_stored_update_test_is_proven_by_the_assignment_that_reaches_it():
    source = """
    import torch


    def train(model, loader, optimizer, accum):
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 100)
        for i, (x, y) in enumerate(loader):
            (torch.nn.functional.mse_loss(model(x), y) / accum).backward()
            flag = (i + 1) % accum == 0 or i == len(loader) - 1
            if flag:
                optimizer.step()
                optimizer.zero_grad()
            scheduler.step()
    """
    finding = next(f for f in lint_source(textwrap.dedent(source), "train.py").findings if f.code == "TL101")
    guard = next(p for p in finding.evidence if "once per accumulation window" in p.premise)
    assert guard.verdict == "proven" and guard.line == 9 and "`flag` holds `(i + 1) % accum == 0" in guard.premise
