"""TL801 same-data-order-every-epoch."""

from __future__ import annotations

import libcst as cst

from trainlint.finding import Severity
from trainlint.gate import named, refers_to
from trainlint.model import frameworks
from trainlint.model.data_order import EPOCH_KEYED, FIXED, data_order, repeats
from trainlint.model.dataset_order import dataset_order
from trainlint.model.dataflow import dataflow, loader_constructor, loader_of_loop
from trainlint.model.index import dotted_name, keyword_value, positional_args, walk
from trainlint.model.training import calls_in
from trainlint.rule import FixSpec, Rule, bad, before, good
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import code, loader_premise, role_premise, training_premises

# seeding calls that reset torch's global generator, which a loader without its own generator draws
# from (`random.seed` and `np.random.seed` do not touch it)
_GLOBAL_SEEDS = ("torch.manual_seed", "torch.random.manual_seed")
# library helpers that seed torch among other generators
_LIBRARY_SEEDS = frameworks.seeds()  # set_seed, seed_everything, ...: trainlint/frameworks/*.toml


class SameDataOrderEveryEpoch(Rule):
    code = "TL801"
    name = "same-data-order-every-epoch"
    severity = Severity.WARNING
    summary = "A multi-epoch training loop whose data order cannot change from one epoch to the next"
    message = "the training data comes in the same order every epoch"
    triggers = ("Sampler", "manual_seed", "seed", "enable_full_determinism", "shuffle")
    # a sampler it reports is a `DistributedSampler` (or a subclass) or a sampler class of the file
    # (its `__iter__`); a seed reset each epoch needs a training loop here (a backward and a step)
    # a framework dataset's epoch-keyed shuffle needs the dataset made here (trainlint/frameworks/datasets.toml)
    gate = named("DistributedSampler|^__iter__$") | (
        named("seed|enable_full_determinism") & named("backward") & named("^step$")) | (
        named("|".join(f"^{m}$" for m in sorted(frameworks.methods("dataset_shuffle"))))
        & refers_to(*sorted(frameworks.dataset_sources())))
    what_it_does = """
        Flags the construction of a training sampler (or the seeding of its generator) whose order
        is the same at every epoch of a training loop that runs several epochs over its loader:

        - a `DistributedSampler` (or a subclass, or a sampler class of the file whose `__iter__`
          reads the epoch that its `set_epoch` stores) whose `set_epoch(epoch)` is never called:
          not on it, not on its loader (`loader.sampler.set_epoch`), not in a helper it is handed
          to. Its permutation is a function of its seed and its epoch, and the epoch stays 0;
        - a training `DistributedSampler(shuffle=False)`: each rank sees the same examples in the
          same order at every epoch;
        - a sampler class of the file whose `__iter__` shuffles with a generator seeded from a
          value fixed at construction (`torch.Generator().manual_seed(self.seed)`,
          `np.random.RandomState(self.seed)`) and nothing that changes between epochs;
        - a seed reset inside the epoch loop, with a value that does not depend on the epoch:
          `torch.manual_seed(seed)` (or a library's `set_seed`/`seed_everything`, or a function of
          the file that calls one) before iterating a shuffling loader that has no generator of its
          own (it draws from torch's global generator; `random.seed` and `np.random.seed` do not
          touch it), `g.manual_seed(seed)` on the generator handed to the loader, or a loader
          rebuilt at every epoch with `generator=torch.Generator().manual_seed(seed)`.
        - a Hugging Face `IterableDataset` (`load_dataset(..., streaming=True)`, `to_iterable_dataset()`,
          `IterableDataset.from_generator`) shuffled with `.shuffle(...)`, seeded or not, under a loader
          (or a loop) that an epoch loop trains on, when no `set_epoch(epoch)` reaches the dataset
          object the loader iterates: its buffer shuffle draws from a generator made once and moved
          only by the epoch. Each dataset object keeps its own epoch, so a `set_epoch` on the object
          that `with_format(...)` or `map(...)` was later called on does not count. What a dataset is
          comes from the framework model (trainlint/frameworks/datasets.toml) and resolved imports;
        - a map-style `Dataset` shuffled once (`Dataset.shuffle(seed=...)`: one permutation of its
          indices) under a DataLoader that does not shuffle (no `shuffle=True`, no sampler, no
          `**kwargs` that may carry one): every epoch replays that permutation. Under a shuffling
          loader its sampler draws a new order every epoch, and nothing is reported.

        The epoch loop is the loop around the training loop over the loader (a loop that runs a
        backward and an optimizer step), in the same function, around a same-file call of the
        function holding it, or a loop that hands the loader to a call that trains (a function of
        the file with a training loop, or a call that also receives the optimizer). The sampler
        reaches its loader directly, through a `**mapping` the same function fills
        (`loader_kwargs["sampler"] = sampler`, `dict(sampler=...)`), or through the `**kwargs` of a
        same-file factory that returns the DataLoader (`build_loader(ds, sampler=sampler)`); the
        loader is followed to the callers of a function or method that returns it, alone or in a
        tuple.

        Quiet when `set_epoch` is called directly or through a helper, when the loader goes
        through `accelerator.prepare` (Accelerate's loaders set their sampler's epoch on every
        pass), on frameworks that own the epoch loop (a Lightning `train_dataloader` hook), on a
        sampler whose `__iter__` advances its own epoch or draws from the global generator, on
        evaluation samplers (`shuffle=False` on a loader no training loop iterates), and on a
        seed that involves the epoch (`torch.manual_seed(seed + epoch)`). An epoch loop over
        `range(1)`, or over `range(n)` (`range(a, n)`) with every binding of `n` a literal 0 or 1 (one more than
        every literal `a`) and nothing that
        can change it otherwise (a `global n` in a function, `exec`/`eval`, a write through
        `globals()` as a configurator does), runs once: there is no later epoch to replay the order.

        The fix (for a sampler whose `set_epoch` is never called) inserts
        `sampler.set_epoch(epoch)` as the first statement of the epoch loop. It is unsafe: the
        order of the data changes from the second epoch on, which is the point but changes the run.
        """
    why_bad = """
        Shuffling exists so that each epoch presents the examples in a new order: the mini-batches
        differ from epoch to epoch, and the gradient noise that helps generalisation is not the
        same sequence replayed. `DistributedSampler` draws its permutation from a generator seeded
        with `seed + epoch`, and the epoch only changes when `set_epoch` is called; without it,
        every epoch on every rank replays epoch 0's order exactly. The same happens when a seed is
        reset at the top of each epoch or a sampler seeds its own generator with a constant. The
        run does not fail: it trains on a fixed sequence of batches, usually to a slightly worse
        model, and nothing in the logs says so. PyTorch's documentation of `DistributedSampler`
        states that `set_epoch()` must be called at the beginning of each epoch.
        """
    fix_safety = """
        Unsafe: from the second epoch on the sampler draws a new order, so the batches, the losses
        and the trained weights differ from the run before the fix (as intended where the finding
        is right; where an identical order every epoch was wanted, the fix removes it).
        """
    references = (
        "https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler",
        "https://pytorch.org/docs/stable/notes/randomness.html",
        "https://huggingface.co/docs/accelerate/package_reference/torch_wrappers",
        "https://huggingface.co/docs/datasets/stream#reshuffle",
    )
    examples = (
        good(
            """
            import torch
            from torch.utils.data import DataLoader, DistributedSampler

            num_epochs = 1
            sampler = DistributedSampler(corpus)
            loader = DataLoader(corpus, batch_size=16, sampler=sampler)
            for epoch in range(num_epochs):
                for tokens in loader:
                    optimizer.zero_grad()
                    loss = lm(tokens).loss
                    loss.backward()
                    optimizer.step()
            """,
            title="a single epoch, its count a literal 1: there is no later epoch to replay the order",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader, DistributedSampler

            epochs = 1
            sampler = DistributedSampler(corpus, shuffle=False)
            loader = DataLoader(corpus, batch_size=16, sampler=sampler)
            for epoch in range(0, epochs):
                for tokens in loader:
                    optimizer.zero_grad()
                    lm(tokens).loss.backward()
                    optimizer.step()
            """,
            title="`range(0, epochs)` with `epochs = 1` written down: one pass, its order never replayed",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader, DistributedSampler

            epochs = 3
            sampler = DistributedSampler(corpus, shuffle=False)
            loader = DataLoader(corpus, batch_size=16, sampler=sampler)
            for epoch in range(0, epochs):
                for tokens in loader:
                    optimizer.zero_grad()
                    lm(tokens).loss.backward()
                    optimizer.step()
            """,
            line=5,
            title="the same loop over three epochs: each replays the first one's order",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader, DistributedSampler

            num_epochs = 1
            exec(open("overrides.py").read())
            sampler = DistributedSampler(corpus)
            loader = DataLoader(corpus, batch_size=16, sampler=sampler)
            for epoch in range(num_epochs):
                for tokens in loader:
                    optimizer.zero_grad()
                    loss = lm(tokens).loss
                    loss.backward()
                    optimizer.step()
            """,
            line=6,
            fixed="""
            import torch
            from torch.utils.data import DataLoader, DistributedSampler

            num_epochs = 1
            exec(open("overrides.py").read())
            sampler = DistributedSampler(corpus)
            loader = DataLoader(corpus, batch_size=16, sampler=sampler)
            for epoch in range(num_epochs):
                sampler.set_epoch(epoch)
                for tokens in loader:
                    optimizer.zero_grad()
                    loss = lm(tokens).loss
                    loss.backward()
                    optimizer.step()
            """,
            title="a default of 1 that a configurator run by `exec` can raise",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader, DistributedSampler

            sampler = DistributedSampler(train_set)
            loader = DataLoader(train_set, batch_size=64, sampler=sampler)
            for epoch in range(epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
            line=4,
            fixed="""
            import torch
            from torch.utils.data import DataLoader, DistributedSampler

            sampler = DistributedSampler(train_set)
            loader = DataLoader(train_set, batch_size=64, sampler=sampler)
            for epoch in range(epochs):
                sampler.set_epoch(epoch)
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
            title="a DistributedSampler whose set_epoch is never called",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader, DistributedSampler

            sampler = DistributedSampler(train_set)
            loader = DataLoader(train_set, batch_size=64, sampler=sampler)
            for epoch in range(epochs):
                sampler.set_epoch(epoch)
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
            title="set_epoch at the top of every epoch",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler


            class Trainer:
                def __init__(self, model, dataset, optimizer):
                    self.model = model
                    self.optimizer = optimizer
                    self.sampler = DistributedSampler(dataset)
                    self.loader = DataLoader(dataset, batch_size=32, sampler=self.sampler)

                def train_epoch(self):
                    for batch in self.loader:
                        loss = self.model(**batch).loss
                        loss.backward()
                        self.optimizer.step()
                        self.optimizer.zero_grad()

                def fit(self, epochs):
                    for epoch in range(epochs):
                        self.train_epoch()
            """,
            line=10,
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler


            class Trainer:
                def __init__(self, model, dataset, optimizer):
                    self.model = model
                    self.optimizer = optimizer
                    self.sampler = DistributedSampler(dataset)
                    self.loader = DataLoader(dataset, batch_size=32, sampler=self.sampler)

                def train_epoch(self):
                    for batch in self.loader:
                        loss = self.model(**batch).loss
                        loss.backward()
                        self.optimizer.step()
                        self.optimizer.zero_grad()

                def fit(self, epochs):
                    for epoch in range(epochs):
                        self.sampler.set_epoch(epoch)
                        self.train_epoch()
            """,
            title="a Trainer class: the epoch loop in one method, the batch loop in another",
        ),
        good(
            """
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler


            def set_epoch(loader, epoch):
                if isinstance(loader.sampler, DistributedSampler):
                    loader.sampler.set_epoch(epoch)


            def main(model, dataset, optimizer, epochs):
                loader = DataLoader(dataset, batch_size=32, sampler=DistributedSampler(dataset))
                for epoch in range(epochs):
                    set_epoch(loader, epoch)
                    for x, y in loader:
                        optimizer.zero_grad()
                        model(x, y).backward()
                        optimizer.step()
            """,
            title="set_epoch called through a helper",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler


            def make_loader(dataset, batch_size):
                return DataLoader(dataset, batch_size=batch_size, sampler=DistributedSampler(dataset))


            class Runner:
                def __init__(self, net, batches, opt):
                    self.net = net
                    self.batches = batches
                    self.opt = opt

                def one_epoch(self, epoch):
                    for inputs, labels in self.batches:
                        self.opt.zero_grad()
                        loss = torch.nn.functional.mse_loss(self.net(inputs), labels)
                        loss.backward()
                        self.opt.step()

                def run(self, epochs):
                    for epoch in range(epochs):
                        self.one_epoch(epoch)


            def main(net, dataset, opt):
                batches = make_loader(dataset, 64)
                Runner(net, batches, opt).run(20)
            """,
            line=7,
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler


            def make_loader(dataset, batch_size):
                return DataLoader(dataset, batch_size=batch_size, sampler=DistributedSampler(dataset))


            class Runner:
                def __init__(self, net, batches, opt):
                    self.net = net
                    self.batches = batches
                    self.opt = opt

                def one_epoch(self, epoch):
                    for inputs, labels in self.batches:
                        self.opt.zero_grad()
                        loss = torch.nn.functional.mse_loss(self.net(inputs), labels)
                        loss.backward()
                        self.opt.step()

                def run(self, epochs):
                    for epoch in range(epochs):
                        self.batches.sampler.set_epoch(epoch)
                        self.one_epoch(epoch)


            def main(net, dataset, opt):
                batches = make_loader(dataset, 64)
                Runner(net, batches, opt).run(20)
            """,
            title="a loader built by a helper, handed to a class whose epoch method iterates it",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler


            def make_loader(dataset, batch_size):
                return DataLoader(dataset, batch_size=batch_size, sampler=DistributedSampler(dataset))


            class Runner:
                def __init__(self, net, batches, opt):
                    self.net = net
                    self.batches = batches
                    self.opt = opt

                def one_epoch(self, epoch):
                    self.batches.sampler.set_epoch(epoch)
                    for inputs, labels in self.batches:
                        self.opt.zero_grad()
                        loss = torch.nn.functional.mse_loss(self.net(inputs), labels)
                        loss.backward()
                        self.opt.step()

                def run(self, epochs):
                    for epoch in range(epochs):
                        self.one_epoch(epoch)


            def main(net, dataset, opt):
                batches = make_loader(dataset, 64)
                Runner(net, batches, opt).run(20)
            """,
            title="the class's epoch method sets its loader's sampler epoch",
        ),
        bad(
            """
            from torch.utils.data import DataLoader, DistributedSampler

            train_loader = DataLoader(train_ds, batch_size=16, sampler=DistributedSampler(train_ds, shuffle=False))
            for epoch in range(args.epochs):
                train_loader.sampler.set_epoch(epoch)
                for step, batch in enumerate(train_loader):
                    loss = model(batch)
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            line=3,
            title="a training DistributedSampler built with shuffle=False",
        ),
        good(
            """
            from torch.utils.data import DataLoader, DistributedSampler

            val_loader = DataLoader(val_ds, batch_size=16, sampler=DistributedSampler(val_ds, shuffle=False))
            for epoch in range(args.epochs):
                train_one_epoch(model, train_loader, optimizer)
                with torch.no_grad():
                    for batch in val_loader:
                        metric.update(model(batch))
            """,
            title="shuffle=False on an evaluation sampler",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader, Sampler


            class ShardSampler(Sampler):
                def __init__(self, n, seed=0):
                    self.n, self.seed = n, seed

                def __iter__(self):
                    g = torch.Generator()
                    g.manual_seed(self.seed)
                    return iter(torch.randperm(self.n, generator=g).tolist())

                def __len__(self):
                    return self.n


            loader = DataLoader(train_set, batch_size=32, sampler=ShardSampler(len(train_set)))
            for epoch in range(10):
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
            """,
            line=18,
            title="a sampler class seeding its generator with a constant",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader, Sampler


            class EpochSampler(Sampler):
                def __init__(self, n, seed=0):
                    self.n, self.seed, self.epoch = n, seed, 0

                def set_epoch(self, epoch):
                    self.epoch = epoch

                def __iter__(self):
                    g = torch.Generator()
                    g.manual_seed(self.seed + self.epoch)
                    return iter(torch.randperm(self.n, generator=g).tolist())


            sampler = EpochSampler(len(train_set))
            loader = DataLoader(train_set, batch_size=32, sampler=sampler)
            for epoch in range(10):
                sampler.set_epoch(epoch)
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
            """,
            title="a sampler whose __iter__ reads the epoch, and set_epoch is called",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(train_set, batch_size=32, shuffle=True)
            for epoch in range(cfg.epochs):
                torch.manual_seed(cfg.seed)
                model.train()
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
            line=6,
            title="the global seed reset at the top of every epoch",
        ),
        bad(
            """
            from torch.utils.data import DataLoader, RandomSampler
            from torch.utils.data.distributed import DistributedSampler
            from tqdm import tqdm, trange

            train_sampler = RandomSampler(train_dataset) if args.local_rank == -1 else DistributedSampler(train_dataset)
            train_dataloader = DataLoader(train_dataset, sampler=train_sampler, batch_size=args.train_batch_size)
            for _ in trange(int(args.num_train_epochs)):
                epoch_iterator = tqdm(train_dataloader, desc="Iteration")
                for step, batch in enumerate(epoch_iterator):
                    loss = model(**batch)[0]
                    loss.backward()
                    optimizer.step()
                    model.zero_grad()
            """,
            line=5,
            title="a sampler chosen by a conditional, a loop over a progress bar (older example scripts)",
        ),
        bad(
            """
            import random
            import numpy as np
            import torch
            from torch.utils.data import DataLoader


            def seed_all(seed):
                random.seed(seed)
                np.random.seed(seed)
                torch.manual_seed(seed)


            def train(model, optimizer, train_set, epochs, seed=0):
                loader = DataLoader(train_set, batch_size=32, shuffle=True, num_workers=4)
                for epoch in range(epochs):
                    seed_all(seed)
                    for x, y in loader:
                        optimizer.zero_grad()
                        model(x, y).backward()
                        optimizer.step()
            """,
            line=16,
            title="a seeding helper of the file called at the top of every epoch",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(train_set, batch_size=32, shuffle=True)
            for epoch in range(cfg.epochs):
                torch.manual_seed(cfg.seed + epoch)
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
            """,
            title="a per-epoch seed that involves the epoch",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            g = torch.Generator()
            loader = DataLoader(train_set, batch_size=32, shuffle=True, generator=g)
            for epoch in range(epochs):
                g.manual_seed(1234)
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
            """,
            line=7,
            title="the loader's own generator re-seeded every epoch",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            for epoch in range(num_epochs):
                loader = DataLoader(train_set, batch_size=32, shuffle=True,
                                    generator=torch.Generator().manual_seed(args.seed))
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
            """,
            line=6,
            title="a loader rebuilt every epoch with a freshly seeded generator",
        ),
        bad(
            """
            import random
            import torch
            from torch.utils.data import DataLoader, RandomSampler

            loader = DataLoader(train_set, batch_size=32, sampler=RandomSampler(train_set))
            for epoch in range(epochs):
                random.seed(0)
                torch.manual_seed(0)
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
            """,
            line=8,
            title="a RandomSampler drawing from the global generator, re-seeded every epoch",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            for epoch in range(num_epochs):
                loader = DataLoader(train_set, batch_size=32, shuffle=True,
                                    generator=torch.Generator().manual_seed(args.seed + epoch))
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
            """,
            title="a loader rebuilt every epoch, its generator seeded with the epoch",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            g = torch.Generator()
            g.manual_seed(1234)
            loader = DataLoader(train_set, batch_size=32, shuffle=True, generator=g)
            for epoch in range(epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
            """,
            title="a generator seeded once: each pass draws a new permutation from it",
        ),
        good(
            """
            from accelerate import Accelerator
            from torch.utils.data import DataLoader, DistributedSampler

            accelerator = Accelerator()
            loader = DataLoader(train_set, batch_size=32, sampler=DistributedSampler(train_set))
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for epoch in range(epochs):
                for batch in loader:
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="Accelerate's prepared loader sets its sampler's epoch on every pass",
        ),
        good(
            """
            import lightning as L
            from torch.utils.data import DataLoader, DistributedSampler


            class LitModel(L.LightningModule):
                def train_dataloader(self):
                    return DataLoader(self.train_set, batch_size=32, sampler=DistributedSampler(self.train_set))

                def training_step(self, batch, batch_idx):
                    return self.model(batch).loss
            """,
            title="Lightning owns the epoch loop and calls set_epoch itself",
        ),
        good(
            """
            from torch.utils.data import DataLoader, DistributedSampler
            from engine import train_one_epoch

            sampler = DistributedSampler(train_set)
            loader = DataLoader(train_set, batch_size=32, sampler=sampler)
            for epoch in range(args.epochs):
                train_one_epoch(model, loader, optimizer, epoch)
            """,
            title="the loader goes to a function of another file that may set the epoch",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader, Sampler


            class SelfAdvancingSampler(Sampler):
                def __init__(self, n, seed=0):
                    self.n, self.seed, self.epoch = n, seed, 0

                def __iter__(self):
                    g = torch.Generator().manual_seed(self.seed + self.epoch)
                    self.epoch += 1
                    return iter(torch.randperm(self.n, generator=g).tolist())


            loader = DataLoader(train_set, batch_size=32, sampler=SelfAdvancingSampler(len(train_set)))
            for epoch in range(10):
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
            """,
            title="a sampler that advances its own epoch on every pass",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader, DistributedSampler


            def fit_one_epoch(model, optimizer, epoch, gen, gen_val):
                model.train()
                for images, targets in gen:
                    optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(model(images), targets).backward()
                    optimizer.step()
                model.eval()
                with torch.no_grad():
                    for images, targets in gen_val:
                        print(torch.nn.functional.cross_entropy(model(images), targets).item())


            train_sampler = DistributedSampler(train_set, shuffle=True)
            val_sampler = DistributedSampler(val_set, shuffle=False)
            gen = DataLoader(train_set, batch_size=16, sampler=train_sampler)
            gen_val = DataLoader(val_set, batch_size=16, sampler=val_sampler)
            for epoch in range(100):
                train_sampler.set_epoch(epoch)
                fit_one_epoch(model, optimizer, epoch, gen, gen_val)
            """,
            title="the validation sampler goes to the epoch function beside the optimizer, but its training "
                  "loop iterates the other loader",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader, DistributedSampler


            def fit_one_epoch(model, optimizer, epoch, gen, gen_val):
                model.train()
                for images, targets in gen:
                    optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(model(images), targets).backward()
                    optimizer.step()
                model.eval()
                with torch.no_grad():
                    for images, targets in gen_val:
                        print(torch.nn.functional.cross_entropy(model(images), targets).item())


            train_sampler = DistributedSampler(train_set, shuffle=True)
            val_sampler = DistributedSampler(val_set, shuffle=False)
            gen = DataLoader(train_set, batch_size=16, sampler=train_sampler)
            gen_val = DataLoader(val_set, batch_size=16, sampler=val_sampler)
            for epoch in range(100):
                fit_one_epoch(model, optimizer, epoch, gen, gen_val)
            """,
            line=17,
            fixed="""
            import torch
            from torch.utils.data import DataLoader, DistributedSampler


            def fit_one_epoch(model, optimizer, epoch, gen, gen_val):
                model.train()
                for images, targets in gen:
                    optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(model(images), targets).backward()
                    optimizer.step()
                model.eval()
                with torch.no_grad():
                    for images, targets in gen_val:
                        print(torch.nn.functional.cross_entropy(model(images), targets).item())


            train_sampler = DistributedSampler(train_set, shuffle=True)
            val_sampler = DistributedSampler(val_set, shuffle=False)
            gen = DataLoader(train_set, batch_size=16, sampler=train_sampler)
            gen_val = DataLoader(val_set, batch_size=16, sampler=val_sampler)
            for epoch in range(100):
                train_sampler.set_epoch(epoch)
                fit_one_epoch(model, optimizer, epoch, gen, gen_val)
            """,
            title="the training sampler handed to the same epoch function, and no `set_epoch`",
        ),
        bad(
            """
            from datasets import load_dataset
            from torch.utils.data import DataLoader

            train_ds = load_dataset("allenai/c4", "en", split="train", streaming=True)
            train_ds = train_ds.shuffle(seed=42, buffer_size=10_000).map(tokenize, batched=True)
            loader = DataLoader(train_ds.with_format("torch"), batch_size=16)
            for epoch in range(num_epochs):
                train_ds.set_epoch(epoch)
                for batch in loader:
                    loss = model(**batch).loss
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            line=5,
            title="a streaming dataset's `set_epoch` called on the object `with_format` copied, not on the one the "
                  "loader iterates (each `IterableDataset` keeps its own epoch)",
        ),
        good(
            """
            from datasets import load_dataset
            from torch.utils.data import DataLoader

            train_ds = load_dataset("imdb", split="train").shuffle(seed=42).map(tokenize, batched=True)
            loader = DataLoader(train_ds.with_format("torch"), batch_size=16, shuffle=True)
            for epoch in range(num_epochs):
                for batch in loader:
                    loss = model(**batch).loss
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="a map-style `Dataset` (no `streaming=True`) shuffled once and handed to a shuffling DataLoader: "
                  "its sampler draws a new order every epoch",
        ),
        good(
            """
            from datasets import load_dataset
            from torch.utils.data import DataLoader

            train_ds = load_dataset("allenai/c4", "en", split="train", streaming=True)
            train_ds = train_ds.shuffle(seed=42, buffer_size=10_000).map(tokenize, batched=True)
            train_ds = train_ds.with_format("torch")
            loader = DataLoader(train_ds, batch_size=16)
            for epoch in range(num_epochs):
                train_ds.set_epoch(epoch)
                for batch in loader:
                    loss = model(**batch).loss
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="`set_epoch` on the very streaming dataset the loader iterates",
        ),
        good(
            """
            from torch.utils.data import DataLoader


            def load_dataset(path, split, streaming=False):
                return ShardedCorpus(path, split, streaming=streaming)


            train_ds = load_dataset("corpus/", split="train", streaming=True).shuffle(seed=42)
            loader = DataLoader(train_ds, batch_size=16)
            for epoch in range(num_epochs):
                for batch in loader:
                    loss = model(**batch).loss
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="a project's own `load_dataset` (not Hugging Face's): nothing says how its shuffle orders",
        ),
        bad(
            """
            from datasets import load_dataset
            from torch.utils.data import DataLoader


            class Trainer:
                def __init__(self, model, optimizer, path):
                    self.model, self.optimizer = model, optimizer
                    stream = load_dataset(path, split="train", streaming=True)
                    self.train_data = stream.shuffle(buffer_size=5_000)

                def fit(self, epochs):
                    loader = DataLoader(self.train_data, batch_size=8, num_workers=2)
                    for epoch in range(epochs):
                        for batch in loader:
                            self.model(**batch).loss.backward()
                            self.optimizer.step()
                            self.optimizer.zero_grad()
            """,
            line=9,
            title="an unseeded shuffle replays too: its generator is drawn once, when `shuffle` is called",
        ),
    )

    def check(self, ctx):
        order = ctx.model(data_order)
        for build in order.samplers:
            views = order.views(build)  # the sampler where it is built, and where a builder's callers hold it
            placed = [(view, loops) for view in views for loops in [order.epoch_loops(view)] if loops]
            if not placed:
                continue
            view, loops = placed[0]
            if build.kind == EPOCH_KEYED and build.shuffle_off:
                yield self.report(
                    build.call,
                    f"a training `{build.what}` built with `shuffle=False`: every epoch each rank sees the same "
                    "examples in the same order; shuffle the training sampler (and call `set_epoch(epoch)`)",
                    evidence=_sampler_evidence(ctx, build, loops, "it is built with `shuffle=False`"))
            elif build.kind == EPOCH_KEYED and not any(order.set_epoch_reaches(v) for v in views):
                yield self.report(
                    build.call,
                    f"`{build.what}` permutes with a generator seeded by `seed + epoch`, and its `set_epoch(epoch)` "
                    "is never called: every epoch replays epoch 0's order; call `set_epoch(epoch)` at the top of "
                    "the epoch loop",
                    _set_epoch_fix(ctx, order, view, loops),
                    evidence=_sampler_evidence(ctx, build, loops, "its `set_epoch(...)` is never called"))
            elif build.kind == FIXED:
                yield self.report(
                    build.call,
                    f"`{build.what}.__iter__` shuffles with a generator seeded from a value fixed at construction: "
                    "every epoch yields the same order; seed it with the epoch too (`seed + epoch`, set by "
                    "`set_epoch`)",
                    evidence=_sampler_evidence(ctx, build, loops, "its generator's seed is fixed at construction"))
        yield from _dataset_shuffles(self, ctx)
        yield from _reseeded_each_epoch(self, ctx)


def _dataset_shuffles(rule, ctx):
    """A framework dataset's shuffle (trainlint/frameworks/datasets.toml) under a loader an epoch loop
    trains on: an epoch-keyed one (HF `IterableDataset.shuffle`) whose epoch nothing moves, or one
    permutation (HF `Dataset.shuffle`) under a loader that does not shuffle. One finding per shuffle."""
    datasets = ctx.model(dataset_order)
    order = ctx.model(data_order)
    reported = set()
    for loader in datasets.shuffled_loaders:
        if id(loader.shuffle) in reported:
            continue
        views = order.views(loader.view)
        placed = [loops for view in views for loops in [order.epoch_loops(view)] if loops]
        if not placed or loader.kind == EPOCH_KEYED and datasets.epoch_moved(loader, views):
            continue
        reported.add(id(loader.shuffle))
        cls = loader.what.split(".", 1)[0]
        shuffled = f"`{code(ctx, loader.shuffle.func)}(...)`"
        if loader.kind == EPOCH_KEYED:
            evidence = [premise(f"{shuffled} shuffles an `{cls}`: its buffer shuffle draws from a generator made "
                                "once, moved only by `set_epoch(epoch)`", loader.shuffle, "construction")]
            if loader.view.loader_call is not None:
                evidence.append(premise("the loader iterates that dataset, and no `set_epoch(...)` reaches it",
                                        loader.view.loader_call, "argument"))
            message = (f"`{loader.what}` draws its shuffle from a generator made once, and `set_epoch(epoch)` is "
                       "never called on the dataset the loader iterates: every epoch replays the same order; call "
                       "`<dataset>.set_epoch(epoch)` on that dataset (or `loader.dataset`) at the top of the epoch "
                       "loop")
        else:
            evidence = [premise(f"{shuffled} permutes the `{cls}` once, when it is called", loader.shuffle,
                                "construction")]
            if loader.view.loader_call is not None:
                evidence.append(premise("the loader over it does not shuffle (no `shuffle=True`, no sampler)",
                                        loader.view.loader_call, "argument"))
            message = (f"`{loader.what}` permutes the dataset once, and the loader over it does not shuffle: every "
                       "epoch replays that one order; pass `shuffle=True` (or a sampler) to the DataLoader")
        epoch_loop, inner = placed[0][0]
        evidence.append(premise("an epoch loop runs the training over its loader more than once", epoch_loop, "use"))
        if isinstance(inner, cst.For):
            evidence += training_premises(ctx, inner.body)[:1]
        yield rule.report(loader.shuffle, message, evidence=evidence)


def _sampler_evidence(ctx, build, loops, why: str) -> list:
    """The sampler's construction, the epoch loop, and what trains on its loader there: a training
    loop over it, or a call whose training loop iterates the parameter it is handed to."""
    found = [premise(f"`{build.what}` is built here: {why}", build.call, "construction")]
    epoch_loop, inner = loops[0]
    found.append(premise("an epoch loop runs the training over its loader more than once", epoch_loop, "use"))
    if isinstance(inner, cst.For):
        found += training_premises(ctx, inner.body)[:1]
    else:
        found.append(premise(f"its loader goes to `{code(ctx, inner.func)}(...)`, whose training loop iterates it",
                             inner, "call"))
    return found


def _set_epoch_fix(ctx, order, build, loops) -> FixSpec | None:
    """`<sampler>.set_epoch(<epoch>)` as the first statement of the epoch loop."""
    epoch_loop, _ = loops[0]
    if not (isinstance(epoch_loop, cst.For) and isinstance(epoch_loop.target, cst.Name)
            and epoch_loop.target.value != "_" and isinstance(epoch_loop.body, cst.IndentedBlock)):
        return None
    subject = None
    if build.holder is not None and order._same_place(epoch_loop, build) \
            and (build.holder.startswith("self.") or order.index.function_at(epoch_loop) is build.function):
        subject = build.holder
    elif build.loader is not None and keyword_value(build.loader_call, "sampler") is build.call \
            and order._same_place(epoch_loop, build, build.loader):
        subject = f"{build.loader}.sampler"
    if subject is None:
        return None
    return FixSpec(f"Call `{subject}.set_epoch({epoch_loop.target.value})` at the top of the epoch loop", safe=False,
                   lines=(before(epoch_loop.body.body[0], f"{subject}.set_epoch({epoch_loop.target.value})"),))


def _reseeded_each_epoch(rule, ctx):
    """A seed reset inside an epoch loop, not depending on the epoch, before a shuffling loader
    draws its order (from the global generator, or from the generator the seed call resets)."""
    order = ctx.model(data_order)
    flow = ctx.model(dataflow)
    index = ctx.index
    for training in order.training.loops:
        loop = training.node
        if not isinstance(loop, cst.For):
            continue
        loader = loader_of_loop(flow, loop)
        epoch_loop = order.enclosing_loop(loop)
        if loader is None or epoch_loop is None or not repeats(epoch_loop, index):
            continue
        call = loader_constructor(flow, loader)
        if call is None:
            continue
        generator = keyword_value(call, "generator")
        shuffles = _shuffles(call) or _global_random_sampler(ctx, keyword_value(call, "sampler"))
        epoch_names = _loop_names(epoch_loop)
        built = _generator_built_in(ctx, flow, generator, epoch_loop, epoch_names)
        if built is not None:
            yield rule.report(
                built,
                f"`{ctx.code_for(built)}` builds the loader's generator anew at every epoch from the same seed: "
                "the shuffled order is the same every epoch; build it once before the epoch loop",
                evidence=[premise("the generator is built inside the epoch loop from a fixed seed", built, "construction"),
                          premise("the loader shuffles with it", call, "argument"),
                          premise("the epoch loop repeats the training loop", epoch_loop, "use")])
            continue
        for seed in _calls_before(index, epoch_loop, loop):
            scope = index.scope_at(seed)
            resets_global = _seeds_torch(index, seed, scope)
            resets_own = generator is not None and isinstance(seed.func, cst.Attribute) \
                and seed.func.attr.value == "manual_seed" and dotted_name(seed.func.value) == dotted_name(generator)
            if not seed.args or not (resets_own or (resets_global and generator is None and shuffles)):
                continue
            if any(isinstance(n, cst.Name) and n.value in epoch_names for a in seed.args for n in walk(a.value)):
                continue  # `seed + epoch`
            where = "the loader's generator" if resets_own else "the global generator the loader shuffles with"
            yield rule.report(
                seed,
                f"`{ctx.code_for(seed)}` resets {where} to the same state at every epoch: the shuffled order is the "
                "same every epoch; seed once before the loop, or with the epoch (`seed + epoch`)",
                evidence=[premise("the seed does not depend on the epoch", seed, "call"),
                          premise("the loader shuffles", call, "construction"),
                          premise("the epoch loop repeats the training loop", epoch_loop, "use")])
            break  # one finding per epoch loop


def _seeds_torch(index, call: cst.Call, scope, depth: int = 0) -> bool:
    """The call seeds torch's global generator: `torch.manual_seed`, a library's `set_seed`, or a
    function of this file that calls one of them."""
    name = index.resolve(call.func, scope) or ""
    if name in _GLOBAL_SEEDS or name in _LIBRARY_SEEDS:
        return True
    callee = index.callee(call, scope)
    return callee is not None and depth < 2 and any(
        _seeds_torch(index, inner, callee.scope, depth + 1) for inner in calls_in(callee.node.body))


def _generator_built_in(ctx, flow, generator, epoch_loop, epoch_names) -> cst.CSTNode | None:
    """`generator=torch.Generator().manual_seed(0)` (written there, or bound to a name) inside the
    epoch loop, with a seed that does not involve the epoch: the construction."""
    value = generator
    if isinstance(value, cst.Name):
        binding = flow.reaching(value)
        value = binding.value if binding is not None and binding.kind == "assign" else None
    if not isinstance(value, cst.Call) or not flow.inside(value, epoch_loop):
        return None
    seeds = [n for n in walk(value) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
             and n.func.attr.value == "manual_seed" and n.args]
    built = any(ctx.index.resolve(n.func, ctx.index.scope_at(n)) == "torch.Generator"
                for n in walk(value) if isinstance(n, cst.Call))
    if not seeds or not built:
        return None
    if any(isinstance(n, cst.Name) and n.value in epoch_names for seed in seeds for n in walk(seed)):
        return None
    return value


def _global_random_sampler(ctx, sampler) -> bool:
    """`sampler=RandomSampler(dataset)` without a generator: it draws from the global generator."""
    if isinstance(sampler, cst.Name):
        values = [b.value for b in ctx.index.scope_at(sampler).lookup(sampler.value) if b.value is not None]
        sampler = values[0] if len(values) == 1 else None
    return isinstance(sampler, cst.Call) and \
        (ctx.index.resolve(sampler.func, ctx.index.scope_at(sampler)) or "").endswith("RandomSampler") \
        and keyword_value(sampler, "generator") is None


def _shuffles(call: cst.Call) -> bool:
    shuffle = keyword_value(call, "shuffle")
    if shuffle is None and len(positional_args(call)) >= 3:
        shuffle = positional_args(call)[2].value
    return isinstance(shuffle, cst.Name) and shuffle.value == "True"


def _loop_names(loop) -> set[str]:
    """Names that change between epochs: the epoch loop's target and what its body assigns."""
    names = set()
    if isinstance(loop, cst.For):
        names |= {n.value for n in walk(loop.target) if isinstance(n, cst.Name)}
    for node in walk(loop.body):
        if isinstance(node, (cst.AugAssign,)):
            names |= {n.value for n in walk(node.target) if isinstance(n, cst.Name)}
    return names


def _calls_before(index, epoch_loop, inner) -> list[cst.Call]:
    """Calls written in the epoch loop's body before the statement holding the inner loop."""
    found = []
    for statement in epoch_loop.body.body:
        if statement is inner or any(node is inner for node in walk(statement)):
            break
        found.extend(calls_in(statement))
    return found
