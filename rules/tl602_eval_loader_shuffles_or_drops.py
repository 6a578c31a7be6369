"""TL602 eval-loader-shuffles-or-drops."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model import frameworks
from trainlint.model.dataflow import dataflow
from trainlint.model.data_order import seeded_before_each_pass, seeded_generator
from trainlint.model.dataset_sizes import full_batches
from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.model.index import dotted_name, keyword_value, positional_args, walk
from trainlint.model.modes import modes
from trainlint.model.loader_reach import EVALUATES, UNUSED, loader_reach
from trainlint.model.loader_use import named_nowhere, never_read, never_runs, only_drawn_from
from trainlint.model.summaries import ClassSummary
from trainlint.rule import FixSpec, Rule, bad, good
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import code, loader_premise, role_premise, training_premises

_EVAL_TOKEN = re.compile(r"^(val|valid|validation|eval|evaluation|test|testing|dev|holdout)"
                         r"(loader|dataloader|dl|set|dataset|ds|data|iter)?s?$")
_TRAIN_TOKEN = re.compile(r"^(train|training|trn|fit)(loader|dataloader|dl|set|dataset|ds|data|iter)?s?$")
_EVAL_SPLIT = re.compile(r"^(val|valid|validation|eval|evaluation|test|testing|dev|holdout)(\[.*\])?$")
# hooks whose loader the framework uses for evaluation only (Lightning's, the Trainer's: the framework
# models), and the usual names of such methods
_EVAL_HOOKS = frameworks.hooks("eval_loader") | {"eval_dataloader", "valid_dataloader"}


def _tokens(name: str) -> list[str]:
    return [t.lower() for t in re.split(r"_+|(?<=[a-z0-9])(?=[A-Z])|\.", name) if t]


def name_kind(name: str | None) -> str | None:
    """"eval" or "train" when an identifier says which split it holds."""
    if not name:
        return None
    tokens = _tokens(name.rsplit(".", 1)[-1])
    if any(_TRAIN_TOKEN.match(t) for t in tokens):
        return "train"
    if any(_EVAL_TOKEN.match(t) for t in tokens):
        return "eval"
    return None


class EvalLoaderShufflesOrDrops(Rule):
    code = "TL602"
    name = "eval-loader-shuffles-or-drops"
    severity = Severity.WARNING
    summary = "A validation/test `DataLoader` with `shuffle=True` or `drop_last=True`"
    message = "an evaluation DataLoader should neither shuffle nor drop the last batch"
    triggers = ("DataLoader",)
    gate = named("^DataLoader$")
    what_it_does = """
        Flags a `DataLoader(...)` built with `shuffle=True` or `drop_last=True` when it is clearly
        for validation or test: its variable or dataset is named so (`val_loader`, `testloader`,
        `valid_dataset`, `eval_dataloader`, `loaders["test"]`), its dataset is built as a held-out
        split (`MNIST(..., train=False)`, `load_dataset(..., split="validation")`, `ds["test"]`),
        it is returned by `val_dataloader`/`test_dataloader`/`get_eval_dataloader` (unless, in a run
        over the whole project, no file asks the framework for that loader: no `trainer.test(...)`
        for `test_dataloader`, no `LightningCLI`; the loader then goes where the project's own
        calls of the hook take it, `next(iter(dm.test_dataloader()))` being one batch; nor when the
        hook is a LightningModule's whose batches go only to methods that compute nothing: the class
        defines the step hook, `validation_step` for `val_dataloader`, and every definition of it
        there and in its subclasses, and of the batch hooks `on_validation_batch_end` & co. in any
        class of the project, is only `pass`, `...`, a docstring or `return None`) or built inside an
        evaluation function, or it is only iterated by evaluation loops (no backward, grad off).
        The flags may come through a `**mapping` the function fills (`test_kwargs.update(cuda_kwargs)`
        with `"shuffle": True` in `cuda_kwargs`, `kwargs["shuffle"] = True`); such a value is often
        shared with the training loader, so no fix is offered for it.

        Training loaders, samplers (shuffling through `sampler=` is the sampler's business) and
        loaders whose names say nothing are left alone, and so is `drop_last=True` on batches of
        one sample (`batch_size=1`, or no batch size at all), which leave no partial batch, or on a
        dataset whose length the code states as a multiple of the batch size it states
        (`Subset(test_set, range(batch_size * 20))`: every batch is full). A loader
        that is only drawn from is no evaluation loader, whatever its name: `next(iter(val_loader))`
        for preview pictures, `it = iter(val_loader)` read only by `next(it)` statements outside any
        loop (a fixed number of batches), a loop that breaks after one batch or when its `enumerate` index
        reaches a bound, `next(...)` on an endless `itertools.cycle(val_loader)` (or a generator of
        the project that repeats it inside `while True:`), or a project function (in any file) that
        draws from it only in these ways; such a loader is never gone through, so neither its order
        nor a dropped last batch changes a result. A loader whose one batch holds its whole dataset
        (`batch_size=len(test_set)` over `test_set`) drops nothing and has no batch order; a batch size
        read from a project's configuration module (`cfg.VAL.BATCH_SIZE` with `__C.VAL.BATCH_SIZE =
        1` there, written by no file of the project) is known as plainly as a literal. The same holds for a loader drawn from through
        `it = iter(loader)` only by `next(it)` in a loop of `range(B)` with B capped by a number
        the code states (`min(max_iter, len(loader))`, `max_iter=100`): a capped random sample
        (`range(len(loader))` draws are a pass and still count), and for `self.it = iter(loader)`
        drawn one batch per call (`self.it.next()`, outside any loop of its function) and bound
        again to `iter(loader)` under `except StopIteration:`: a restarted stream of single batches
        for the logs. That a loader feeds an evaluation is followed from its construction through
        the code (trainlint/model/loader_reach.py): the reads its binding reaches (a name bound
        again on every way to a read hides the first loader from it), another name, a return to
        the callers of the function (a call whose result is dropped takes it nowhere; `a, b =
        make()` hands `b` the second element; in a run over the whole project, callers in other files
        too, when every file naming the function only imports and calls it and each call drops the
        loader or binds it to a name nothing reads: `train, _ = make()` in a script takes it nowhere),
        an attribute of `self` (in a run over the whole project where no other file spells `.attr`
        and the file reaches no attribute by text: every read of the attribute in the file, through
        the Accelerator's `prepare` to the same position of the tuple it is unpacked into), the
        parameter of a method of a class no file of the project derives from, the parameter of a function of the file it is
        handed to; there, a pass over it that computes no gradient (with the literal flags the
        call passes: `run(model, loader, train=False)` skips its `if train:` backward) and runs with
        grad recording off (around the loop or around the call that hands it on) or a model in eval
        mode on every way to its forward is an evaluation, and proves the premise (so does a loader with a name that says nothing, when
        every pass reached evaluates). A loader that reaches no pass at all feeds no evaluation:
        replaced before any read (`val_loader` built again at the top of every epoch), returned
        to callers that all drop it, built in a script's `if __name__ == "__main__":` block that
        reads it nowhere (no importer runs that block), or a module's name replaced by a later
        assignment before any read; returned by a function no file of the project calls (another
        file importing its name at most); or gone through only by passes in which no call can run a
        model (builtins, `torch`/`numpy` functions and tensor methods handed no callable: summing
        feature statistics over the data), the batch read nowhere after the pass. Where the code cannot follow it (a library call, a function of
        another file, an attribute of `self` other files may read, a module's name other files may import) the premise
        stays what its name or dataset says (unknown, reported). A function's local loader that is never read at all (built, never used), a
        module's loader read neither in the module nor named by a project file that can import it,
        and a loader built by a module-level function that never runs (replaced by a later `def` of
        its name before anything reads it) feed no evaluation and are left alone. A loader built by
        a module-level function that no file of its import component names may come from an entry
        point named outside Python: that it runs is unproven (reported with `--include-unproven`). `shuffle=True` is left alone on a dataset of a project
        class whose `__getitem__` never uses its index (a fresh random sample at every call; a read
        that only converts the index into itself, `if torch.is_tensor(i): i = i.item()`, with
        nothing reading it after, is no use): no order of indices changes what it yields. A pass
        that reads none of its batches (`for _ in loader: pass`, timing the loading) feeds no
        evaluation. Nor does `shuffle=True` with a `generator=` seeded by a value fixed for the run
        (`torch.Generator().manual_seed(seed)`, not a seed a call computes such as the clock),
        or a loader (no `generator=`) read only by `for` loops each written directly after
        `torch.manual_seed(seed)`: the order is the same on every run.
        """
    why_bad = """
        `drop_last=True` silently leaves the tail of the validation or test set out of every
        evaluation: with 10,050 test images and batches of 100, fifty images are never scored, and
        which fifty depends on the batch size and the number of processes. `shuffle=True` makes the
        order of batches random, so anything order-dependent (the first batch shown as examples,
        per-batch logs, a metric that averages batch means, a tie in early stopping) changes from
        run to run, and costs a permutation per epoch for nothing. An evaluation should see every
        sample once, in a fixed order.
        """
    fix_safety = """
        Unsafe: both change which batches the loader yields; if the loader is not only an
        evaluation's (the rule judges that from names and use), `shuffle=False` takes the
        shuffling out of training and `drop_last=False` adds a smaller last batch.
        """
    references = (
        "https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader",
        "https://lightning.ai/docs/pytorch/stable/data/datamodule.html",
    )
    examples = (
        good(
            """
            import torch
            from torch.utils.data import DataLoader
            from torch_geometric.data import Data


            def to_graphs(loader, edges, channels):
                graphs = []
                for pixels, label in loader:
                    nodes = pixels.view(channels, -1).T
                    graphs.append(Data(x=nodes, y=label, edge_index=edges))
                return graphs


            def build(test_set, edges):
                test_loader = DataLoader(test_set, batch_size=1, shuffle=True)
                torch.save(to_graphs(test_loader, edges, 3), "test_graphs.pt")
            """,
            title="a shuffled test loader only converted into graph samples: the pass runs no model, "
                  "no evaluation sees its order",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader
            from torch_geometric.data import Data


            def to_graphs(loader, edges, channels, net):
                graphs = []
                with torch.no_grad():
                    for pixels, label in loader:
                        nodes = pixels.view(channels, -1).T
                        graphs.append(Data(x=net(nodes), y=label, edge_index=edges))
                return graphs


            def build(test_set, edges, net):
                test_loader = DataLoader(test_set, batch_size=1, shuffle=True)
                torch.save(to_graphs(test_loader, edges, 3, net), "test_graphs.pt")
            """,
            line=16,
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            from torch_geometric.data import Data


            def to_graphs(loader, edges, channels, net):
                graphs = []
                with torch.no_grad():
                    for pixels, label in loader:
                        nodes = pixels.view(channels, -1).T
                        graphs.append(Data(x=net(nodes), y=label, edge_index=edges))
                return graphs


            def build(test_set, edges, net):
                test_loader = DataLoader(test_set, batch_size=1, shuffle=False)
                torch.save(to_graphs(test_loader, edges, 3, net), "test_graphs.pt")
            """,
            title="the same conversion, but each sample goes through a network first: an evaluation pass",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader


            class Sampler:
                def __init__(self, model, seed):
                    self.model, self.seed = model, seed

                def score(self, test_set):
                    loader = DataLoader(test_set, batch_size=8, shuffle=True)
                    total = 0.0
                    with torch.no_grad():
                        torch.manual_seed(self.seed)
                        for blurred, sharp in loader:
                            total += (self.model(blurred) - sharp).abs().sum().item()
                    return total / len(test_set)
            """,
            title="torch's global generator seeded right before the one pass: the same shuffled order every run",
        ),
        bad(
            """
            import time

            import torch
            from torch.utils.data import DataLoader


            class Sampler:
                def __init__(self, model, seed):
                    self.model, self.seed = model, seed

                def score(self, test_set):
                    loader = DataLoader(test_set, batch_size=8, shuffle=True)
                    total = 0.0
                    with torch.no_grad():
                        torch.manual_seed(time.time_ns())
                        for blurred, sharp in loader:
                            total += (self.model(blurred) - sharp).abs().sum().item()
                    return total / len(test_set)
            """,
            line=12,
            fixed="""
            import time

            import torch
            from torch.utils.data import DataLoader


            class Sampler:
                def __init__(self, model, seed):
                    self.model, self.seed = model, seed

                def score(self, test_set):
                    loader = DataLoader(test_set, batch_size=8, shuffle=False)
                    total = 0.0
                    with torch.no_grad():
                        torch.manual_seed(time.time_ns())
                        for blurred, sharp in loader:
                            total += (self.model(blurred) - sharp).abs().sum().item()
                    return total / len(test_set)
            """,
            title="seeded from the clock right before the pass: a different order every run",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            @torch.no_grad()
            def sample_pairs(generator, val_set, count):
                val_loader = DataLoader(val_set, batch_size=count, shuffle=True)
                stream = iter(val_loader)
                first_source, first_target = next(stream)
                second_source, second_target = next(stream)
                return generator(first_source), first_target, generator(second_source), second_target
            """,
            title="two batches drawn from a fresh iterator, each `next` written once outside any loop: no pass",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            @torch.no_grad()
            def sample_pairs(generator, val_set, count):
                val_loader = DataLoader(val_set, batch_size=count, shuffle=True)
                stream = iter(val_loader)
                error = 0.0
                for _ in range(len(val_loader)):
                    source, target = next(stream)
                    error += (generator(source) - target).abs().sum().item()
                return error / len(val_set)
            """,
            line=6,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            @torch.no_grad()
            def sample_pairs(generator, val_set, count):
                val_loader = DataLoader(val_set, batch_size=count, shuffle=False)
                stream = iter(val_loader)
                error = 0.0
                for _ in range(len(val_loader)):
                    source, target = next(stream)
                    error += (generator(source) - target).abs().sum().item()
                return error / len(val_set)
            """,
            title="the iterator drawn from in a loop as long as the loader: a pass over the whole set, an evaluation",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            def channel_moments(test_set, channels):
                loader = DataLoader(test_set, batch_size=32, shuffle=True)
                first, second, pixels = torch.zeros(channels), torch.zeros(channels), 0
                with torch.no_grad():
                    for images, _ in loader:
                        first += images.sum(dim=(0, 2, 3))
                        second += images.pow(2).sum(dim=(0, 2, 3))
                        pixels += images.numel() // channels
                mean = first / pixels
                return mean, second / pixels - mean ** 2
            """,
            title="a pass over the held-out images that runs no model (per-channel moments): no evaluation",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            def channel_moments(model, test_set, channels):
                loader = DataLoader(test_set, batch_size=32, shuffle=True)
                first, second, pixels = torch.zeros(channels), torch.zeros(channels), 0
                with torch.no_grad():
                    for images, _ in loader:
                        features = model(images)
                        first += features.sum(dim=(0, 2, 3))
                        second += features.pow(2).sum(dim=(0, 2, 3))
                        pixels += features.numel() // channels
                mean = first / pixels
                return mean, second / pixels - mean ** 2
            """,
            line=5,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def channel_moments(model, test_set, channels):
                loader = DataLoader(test_set, batch_size=32, shuffle=False)
                first, second, pixels = torch.zeros(channels), torch.zeros(channels), 0
                with torch.no_grad():
                    for images, _ in loader:
                        features = model(images)
                        first += features.sum(dim=(0, 2, 3))
                        second += features.pow(2).sum(dim=(0, 2, 3))
                        pixels += features.numel() // channels
                mean = first / pixels
                return mean, second / pixels - mean ** 2
            """,
            title="the same moments of a model's features: the pass runs the model, an evaluation",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            def fit(generator, critic, train_set, val_set, opt):
                train_loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)
                val_loader = DataLoader(val_set, batch_size=16, shuffle=True)
                preview, _ = next(iter(val_loader))
                for epoch in range(20):
                    for real, _ in train_loader:
                        loss = critic(generator(real)).mean()
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    with torch.no_grad():
                        write_grid(generator(preview), f"epoch_{epoch}.png")
            """,
            title="one random batch drawn from the validation set for preview pictures",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            def fit(model, val_set, opt):
                val_loader = DataLoader(val_set, batch_size=16, shuffle=True, drop_last=True)
                preview, _ = next(iter(val_loader))
                correct = 0
                with torch.no_grad():
                    for x, y in val_loader:
                        correct += (model(x).argmax(1) == y).sum().item()
                return correct / len(val_set), preview
            """,
            line=5,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def fit(model, val_set, opt):
                val_loader = DataLoader(val_set, batch_size=16, shuffle=False, drop_last=False)
                preview, _ = next(iter(val_loader))
                correct = 0
                with torch.no_grad():
                    for x, y in val_loader:
                        correct += (model(x).argmax(1) == y).sum().item()
                return correct / len(val_set), preview
            """,
            title="a preview batch drawn, but the same loader also feeds the accuracy",
        ),
        good(
            """
            import itertools
            import torch
            from torch.utils.data import DataLoader

            def fit(model, opt, train_set, val_set, steps):
                train_batches = itertools.cycle(DataLoader(train_set, batch_size=32, shuffle=True))
                val_loader = DataLoader(val_set, batch_size=32, shuffle=True, drop_last=True)
                val_batches = itertools.cycle(val_loader)
                for step in range(steps):
                    x, y = next(train_batches)
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    if step % 500 == 0:
                        with torch.no_grad():
                            vx, vy = next(val_batches)
                            print(step, torch.nn.functional.cross_entropy(model(vx), vy).item())
            """,
            title="a validation loader drawn from through an endless cycle, one batch per probe: no pass over the set",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            def fit(model, opt, train_set, test_set, epochs):
                train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
                test_loader = DataLoader(test_set, batch_size=32, shuffle=True)
                for epoch in range(epochs):
                    for x, y in train_loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
            """,
            title="a test loader built and never used: it feeds no evaluation",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader, Subset

            @torch.no_grad()
            def quick_score(model, test_set):
                batch_size = 50
                subset = Subset(test_set, range(batch_size * 20))
                loader = DataLoader(subset, batch_size=batch_size, drop_last=True)
                hits = sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
                return hits / len(subset)
            """,
            title="drop_last=True on 1,000 samples in batches of 50: every batch is full, nothing is dropped",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader, Subset

            @torch.no_grad()
            def quick_score(model, test_set):
                batch_size = 50
                subset = Subset(test_set, range(batch_size * 20 + 10))
                loader = DataLoader(subset, batch_size=batch_size, drop_last=True)
                hits = sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
                return hits / len(subset)
            """,
            line=8,
            fixed="""
            import torch
            from torch.utils.data import DataLoader, Subset

            @torch.no_grad()
            def quick_score(model, test_set):
                batch_size = 50
                subset = Subset(test_set, range(batch_size * 20 + 10))
                loader = DataLoader(subset, batch_size=batch_size, drop_last=False)
                hits = sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
                return hits / len(subset)
            """,
            title="the same on 1,010 samples: the last ten are never scored",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            def fit(model, opt, train_set, val_set, epochs):
                val_loader = DataLoader(val_set, batch_size=32, shuffle=True)
                for epoch in range(epochs):
                    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
                    val_loader = DataLoader(val_set, batch_size=32)
                    for x, y in train_loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    with torch.no_grad():
                        for vx, vy in val_loader:
                            print(epoch, torch.nn.functional.cross_entropy(model(vx), vy).item())
            """,
            title="a shuffled validation loader replaced, at the top of every epoch, before any pass over it",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            def fit(model, opt, train_set, val_set, epochs):
                val_loader = DataLoader(val_set, batch_size=32, shuffle=True)
                for epoch in range(epochs):
                    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
                    for x, y in train_loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    with torch.no_grad():
                        for vx, vy in val_loader:
                            print(epoch, torch.nn.functional.cross_entropy(model(vx), vy).item())
                    val_loader = DataLoader(val_set, batch_size=32)
            """,
            line=5,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def fit(model, opt, train_set, val_set, epochs):
                val_loader = DataLoader(val_set, batch_size=32, shuffle=False)
                for epoch in range(epochs):
                    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
                    for x, y in train_loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    with torch.no_grad():
                        for vx, vy in val_loader:
                            print(epoch, torch.nn.functional.cross_entropy(model(vx), vy).item())
                    val_loader = DataLoader(val_set, batch_size=32)
            """,
            title="the same loader replaced only after the first epoch's evaluation has gone through it",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader
            from leaves import LeafImages, build_net

            if __name__ == "__main__":
                train_dl = DataLoader(LeafImages("folds.csv", fold=0), batch_size=32, shuffle=True)
                valid_dl = DataLoader(LeafImages("folds.csv", fold=1), batch_size=32, shuffle=True)
                net = build_net()
                opt = torch.optim.Adam(net.parameters(), lr=1e-3)
            """,
            title="a script that stops after building its loaders: the validation loader is read by nothing "
                  "(and no importer runs a `__main__` block)",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            def main(model, opt, train_set, test_set, epochs):
                def make_loaders():
                    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
                    test_loader = DataLoader(test_set, batch_size=64, shuffle=True)
                    return train_loader, test_loader

                train_loader, _ = make_loaders()
                for epoch in range(epochs):
                    for x, y in train_loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
            """,
            title="a test loader returned by a helper whose only caller drops it",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            def main(model, opt, first, second, epochs):
                def make_loaders():
                    a = DataLoader(first, batch_size=64, shuffle=True)
                    b = DataLoader(second, batch_size=64, shuffle=True)
                    return a, b

                fit_loader, score_loader = make_loaders()
                for epoch in range(epochs):
                    for x, y in fit_loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                correct = 0
                with torch.no_grad():
                    for x, y in score_loader:
                        correct += (model(x).argmax(1) == y).sum().item()
                return correct
            """,
            line=7,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def main(model, opt, first, second, epochs):
                def make_loaders():
                    a = DataLoader(first, batch_size=64, shuffle=True)
                    b = DataLoader(second, batch_size=64, shuffle=False)
                    return a, b

                fit_loader, score_loader = make_loaders()
                for epoch in range(epochs):
                    for x, y in fit_loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                correct = 0
                with torch.no_grad():
                    for x, y in score_loader:
                        correct += (model(x).argmax(1) == y).sum().item()
                return correct
            """,
            title="a loader with no telling name, returned to a caller that goes through it with grad off to score",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            def run_epoch(model, loader, opt, learn=True):
                total = 0.0
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x), y, reduction="sum")
                    if learn:
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    total += loss.item()
                return total

            def fit(model, opt, d1, d2, epochs):
                v3 = DataLoader(d2, batch_size=50, shuffle=True)
                for epoch in range(epochs):
                    run_epoch(model, DataLoader(d1, batch_size=50, shuffle=True), opt)
                    with torch.no_grad():
                        print(epoch, run_epoch(model, v3, opt, learn=False) / len(d2))
            """,
            line=16,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def run_epoch(model, loader, opt, learn=True):
                total = 0.0
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x), y, reduction="sum")
                    if learn:
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    total += loss.item()
                return total

            def fit(model, opt, d1, d2, epochs):
                v3 = DataLoader(d2, batch_size=50, shuffle=False)
                for epoch in range(epochs):
                    run_epoch(model, DataLoader(d1, batch_size=50, shuffle=True), opt)
                    with torch.no_grad():
                        print(epoch, run_epoch(model, v3, opt, learn=False) / len(d2))
            """,
            title="a neutrally named loader handed, under no_grad and with `learn=False`, to the epoch helper",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            @torch.no_grad()
            def probe(model, dataset, max_iter=100):
                val_loader = DataLoader(dataset, batch_size=32, shuffle=True)
                batches = iter(val_loader)
                correct = 0
                max_iter = min(max_iter, len(val_loader))
                for i in range(max_iter):
                    x, y = next(batches)
                    correct += (model(x).argmax(1) == y).sum().item()
                return correct / (max_iter * 32)
            """,
            title="a random sample of at most 100 batches drawn from a shuffled set: shuffling is the point",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            @torch.no_grad()
            def probe(model, dataset):
                val_loader = DataLoader(dataset, batch_size=32, shuffle=True, drop_last=True)
                batches = iter(val_loader)
                correct = 0
                for i in range(len(val_loader)):
                    x, y = next(batches)
                    correct += (model(x).argmax(1) == y).sum().item()
                return correct / len(dataset)
            """,
            line=6,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            @torch.no_grad()
            def probe(model, dataset):
                val_loader = DataLoader(dataset, batch_size=32, shuffle=False, drop_last=False)
                batches = iter(val_loader)
                correct = 0
                for i in range(len(val_loader)):
                    x, y = next(batches)
                    correct += (model(x).argmax(1) == y).sum().item()
                return correct / len(dataset)
            """,
            title="every batch drawn one by one: a whole pass over the set",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            def fit(model, opt, train_set, val_set, epochs):
                train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
                val_loader = DataLoader(val_set, batch_size=32, shuffle=True, drop_last=True)
                for epoch in range(epochs):
                    for x, y in train_loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    with torch.no_grad():
                        total = 0.0
                        for vx, vy in val_loader:
                            total += torch.nn.functional.cross_entropy(model(vx), vy, reduction="sum").item()
                    print(epoch, total / len(val_set))
            """,
            line=6,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def fit(model, opt, train_set, val_set, epochs):
                train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
                val_loader = DataLoader(val_set, batch_size=32, shuffle=False, drop_last=False)
                for epoch in range(epochs):
                    for x, y in train_loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    with torch.no_grad():
                        total = 0.0
                        for vx, vy in val_loader:
                            total += torch.nn.functional.cross_entropy(model(vx), vy, reduction="sum").item()
                    print(epoch, total / len(val_set))
            """,
            title="the same validation loader gone through to the end for the epoch's loss",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            def listen(model, loader, samples):
                for i, (mel, wav) in enumerate(loader, 1):
                    if i > samples:
                        break
                    save_wav(model.generate(mel), f"sample_{i}.wav")

            def fit(model, opt, dataset, epochs):
                test_loader = DataLoader(dataset, batch_size=1, shuffle=True)
                for epoch in range(epochs):
                    for mel, wav in DataLoader(dataset, batch_size=16, shuffle=True):
                        loss = torch.nn.functional.l1_loss(model(mel), wav)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    with torch.no_grad():
                        listen(model, test_loader, samples=4)
            """,
            title="a test loader handed to a helper that listens to a few random samples and stops",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            def listen(model, loader, samples):
                total = 0.0
                for i, (mel, wav) in enumerate(loader, 1):
                    total += torch.nn.functional.l1_loss(model(mel), wav).item()
                return total / i

            def fit(model, opt, dataset, epochs):
                test_loader = DataLoader(dataset, batch_size=1, shuffle=True)
                for epoch in range(epochs):
                    for mel, wav in DataLoader(dataset, batch_size=16, shuffle=True):
                        loss = torch.nn.functional.l1_loss(model(mel), wav)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    with torch.no_grad():
                        print(epoch, listen(model, test_loader, samples=4))
            """,
            line=11,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def listen(model, loader, samples):
                total = 0.0
                for i, (mel, wav) in enumerate(loader, 1):
                    total += torch.nn.functional.l1_loss(model(mel), wav).item()
                return total / i

            def fit(model, opt, dataset, epochs):
                test_loader = DataLoader(dataset, batch_size=1, shuffle=False)
                for epoch in range(epochs):
                    for mel, wav in DataLoader(dataset, batch_size=16, shuffle=True):
                        loss = torch.nn.functional.l1_loss(model(mel), wav)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    with torch.no_grad():
                        print(epoch, listen(model, test_loader, samples=4))
            """,
            title="the same test loader handed to a helper that goes through all of it",
        ),
        bad(
            """
            from torch.utils.data import DataLoader

            train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
            val_loader = DataLoader(val_set, batch_size=64, shuffle=True)
            """,
            line=4,
            fixed="""
            from torch.utils.data import DataLoader

            train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
            val_loader = DataLoader(val_set, batch_size=64, shuffle=False)
            """,
            title="a validation loader that shuffles",
        ),
        bad(
            """
            import torch
            import torchvision

            testset = torchvision.datasets.CIFAR10(root="./data", train=False, download=True)
            loader = torch.utils.data.DataLoader(testset, batch_size=128, drop_last=True)
            """,
            line=5,
            fixed="""
            import torch
            import torchvision

            testset = torchvision.datasets.CIFAR10(root="./data", train=False, download=True)
            loader = torch.utils.data.DataLoader(testset, batch_size=128, drop_last=False)
            """,
            title="a held-out split that drops its tail",
        ),
        bad(
            """
            from torch.utils.data import DataLoader

            valid_loader = DataLoader(valid_clips, batch_size=1, shuffle=True, drop_last=True)
            """,
            line=3,
            fixed="""
            from torch.utils.data import DataLoader

            valid_loader = DataLoader(valid_clips, batch_size=1, shuffle=False, drop_last=True)
            """,
            title="one clip per batch drops nothing, but the order still changes",
        ),
        good(
            """
            from torch.utils.data import DataLoader

            validation_loader = DataLoader(validset, num_workers=1, shuffle=False, batch_size=1,
                                           pin_memory=True, drop_last=True)
            """,
            title="drop_last=True with batches of one sample: no partial batch exists",
        ),
        bad(
            """
            import lightning as L
            from torch.utils.data import DataLoader

            class DataModule(L.LightningDataModule):
                def val_dataloader(self):
                    return DataLoader(self.data, batch_size=self.batch_size, shuffle=True, drop_last=True)
            """,
            line=6,
            fixed="""
            import lightning as L
            from torch.utils.data import DataLoader

            class DataModule(L.LightningDataModule):
                def val_dataloader(self):
                    return DataLoader(self.data, batch_size=self.batch_size, shuffle=False, drop_last=False)
            """,
            title="a Lightning val_dataloader hook",
        ),
        bad(
            """
            import lightning as L
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            class Colorizer(L.LightningModule):
                def __init__(self, net, photos, sketches):
                    super().__init__()
                    self.net, self.photos, self.sketches = net, photos, sketches

                def training_step(self, batch, batch_idx):
                    sketch, photo = batch
                    return F.l1_loss(self.net(sketch), photo)

                def train_dataloader(self):
                    return DataLoader(self.photos, batch_size=16, shuffle=True)

                def val_dataloader(self):
                    return DataLoader(self.sketches, batch_size=4, shuffle=True)

                def validation_step(self, batch, batch_idx):
                    sketch, photo = batch
                    self.log("val/l1", F.l1_loss(self.net(sketch), photo))
            """,
            line=19,
            fixed="""
            import lightning as L
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            class Colorizer(L.LightningModule):
                def __init__(self, net, photos, sketches):
                    super().__init__()
                    self.net, self.photos, self.sketches = net, photos, sketches

                def training_step(self, batch, batch_idx):
                    sketch, photo = batch
                    return F.l1_loss(self.net(sketch), photo)

                def train_dataloader(self):
                    return DataLoader(self.photos, batch_size=16, shuffle=True)

                def val_dataloader(self):
                    return DataLoader(self.sketches, batch_size=4, shuffle=False)

                def validation_step(self, batch, batch_idx):
                    sketch, photo = batch
                    self.log("val/l1", F.l1_loss(self.net(sketch), photo))
            """,
            title="a module whose validation_step computes and logs a loss from each shuffled batch (when no "
                  "validation hook of the project computes anything, the batches measure nothing: not reported)",
        ),
        bad(
            """
            from datasets import load_dataset
            from torch.utils.data import DataLoader

            raw = load_dataset("glue", "mrpc")
            eval_dataloader = DataLoader(raw["validation"], collate_fn=collate, batch_size=32, shuffle=True)
            """,
            line=5,
            fixed="""
            from datasets import load_dataset
            from torch.utils.data import DataLoader

            raw = load_dataset("glue", "mrpc")
            eval_dataloader = DataLoader(raw["validation"], collate_fn=collate, batch_size=32, shuffle=False)
            """,
            title="HF datasets validation split",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            def main(holdout):
                loader = DataLoader(holdout, batch_size=256, shuffle=True)
                model.eval()
                with torch.no_grad():
                    for x, y in loader:
                        update_metrics(model(x), y)
            """,
            line=5,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def main(holdout):
                loader = DataLoader(holdout, batch_size=256, shuffle=False)
                model.eval()
                with torch.no_grad():
                    for x, y in loader:
                        update_metrics(model(x), y)
            """,
            title="only consumed by an evaluation loop",
        ),
        good(
            """
            from torch.utils.data import DataLoader

            train_loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)
            val_loader = DataLoader(val_set, batch_size=64, shuffle=False)
            """,
            title="training loader shuffles and drops, validation loader does neither",
        ),
        good(
            """
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler

            sampler = DistributedSampler(val_dataset, shuffle=False)
            val_loader = DataLoader(val_dataset, batch_size=32, sampler=sampler)
            """,
            title="evaluation through a sampler",
        ),
        good(
            """
            import lightning as L
            from torch.utils.data import DataLoader

            class DataModule(L.LightningDataModule):
                def train_dataloader(self):
                    return DataLoader(self.train_ds, batch_size=32, shuffle=True, drop_last=True)

                def test_dataloader(self):
                    return DataLoader(self.test_ds, batch_size=32)
            """,
            title="Lightning hooks: only the training loader shuffles",
        ),
        good(
            """
            from torch.utils.data import DataLoader

            def make_loader(dataset, training):
                return DataLoader(dataset, batch_size=32, shuffle=training, drop_last=training)
            """,
            title="shuffle chosen by a flag",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32, shuffle=True)
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            """,
            title="an unnamed loader used for training",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader
            from torchvision.datasets import MNIST
            from torchvision.transforms import ToTensor


            class Monitor:
                def __init__(self, model, root, writer):
                    self.model, self.writer = model, writer
                    self.val_loader = DataLoader(MNIST(root, train=False, transform=ToTensor()), batch_size=8, shuffle=True, drop_last=True)
                    self.val_batches = iter(self.val_loader)

                @torch.no_grad()
                def snapshot(self, step):
                    try:
                        images, masks = next(self.val_batches)
                    except StopIteration:
                        self.val_batches = iter(self.val_loader)
                        images, masks = next(self.val_batches)
                    self.writer.add_images("val/pred", self.model(images).sigmoid(), step)
            """,
            title="one random batch per call for the logs, the iterator restarted when it runs out",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader
            from torchvision.datasets import MNIST
            from torchvision.transforms import ToTensor


            class Monitor:
                def __init__(self, model, root, writer):
                    self.model, self.writer = model, writer
                    self.val_loader = DataLoader(MNIST(root, train=False, transform=ToTensor()), batch_size=8, shuffle=True, drop_last=True)
                    self.val_batches = iter(self.val_loader)

                @torch.no_grad()
                def score(self, step):
                    hits = 0
                    for _ in range(len(self.val_loader)):
                        try:
                            images, masks = next(self.val_batches)
                        except StopIteration:
                            self.val_batches = iter(self.val_loader)
                            images, masks = next(self.val_batches)
                        hits += (self.model(images).sigmoid().round() == masks).sum().item()
                    self.writer.add_scalar("val/hits", hits, step)
            """,
            line=10,
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            from torchvision.datasets import MNIST
            from torchvision.transforms import ToTensor


            class Monitor:
                def __init__(self, model, root, writer):
                    self.model, self.writer = model, writer
                    self.val_loader = DataLoader(MNIST(root, train=False, transform=ToTensor()), batch_size=8, shuffle=False, drop_last=False)
                    self.val_batches = iter(self.val_loader)

                @torch.no_grad()
                def score(self, step):
                    hits = 0
                    for _ in range(len(self.val_loader)):
                        try:
                            images, masks = next(self.val_batches)
                        except StopIteration:
                            self.val_batches = iter(self.val_loader)
                            images, masks = next(self.val_batches)
                        hits += (self.model(images).sigmoid().round() == masks).sum().item()
                    self.writer.add_scalar("val/hits", hits, step)
            """,
            title="the same restarted iterator drawn len(loader) times in a loop: a whole pass",
        ),
        good(
            """
            from torch.utils.data import DataLoader
            from torchvision.datasets import MNIST


            def holdout_loader(root, batch_size):
                return DataLoader(MNIST(root, train=False), batch_size=batch_size, drop_last=True)


            def holdout_loader(root, batch_size):
                return DataLoader(MNIST(root, train=False), batch_size=batch_size)


            def run(model, holdout):
                return [model(x) for x in holdout_loader(holdout, 64)]
            """,
            title="a factory replaced by a later def of the same name before anything calls it",
        ),
        bad(
            """
            from torch.utils.data import DataLoader
            from torchvision.datasets import MNIST


            def holdout_loader(root, batch_size):
                return DataLoader(MNIST(root, train=False), batch_size=batch_size, drop_last=True)


            FACTORIES = {"holdout": holdout_loader}


            def holdout_loader(root, batch_size):
                return DataLoader(MNIST(root, train=False), batch_size=batch_size)


            def run(model, holdout):
                return [model(x) for x in FACTORIES["holdout"](holdout, 64)]
            """,
            line=6,
            fixed="""
            from torch.utils.data import DataLoader
            from torchvision.datasets import MNIST


            def holdout_loader(root, batch_size):
                return DataLoader(MNIST(root, train=False), batch_size=batch_size, drop_last=False)


            FACTORIES = {"holdout": holdout_loader}


            def holdout_loader(root, batch_size):
                return DataLoader(MNIST(root, train=False), batch_size=batch_size)


            def run(model, holdout):
                return [model(x) for x in FACTORIES["holdout"](holdout, 64)]
            """,
            title="the first def is registered before the second replaces it: it still runs",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader, Dataset


            class RandomFields(Dataset):
                def __init__(self, size, count):
                    self.size, self.count = size, count

                def __len__(self):
                    return self.count

                def __getitem__(self, i):
                    field = torch.randn(self.size)
                    return field, simulate(field)


            test_set = RandomFields(64, 200)
            test_loader = DataLoader(test_set, batch_size=10, shuffle=True)
            model.eval()
            with torch.no_grad():
                for field, target in test_loader:
                    report((model(field) - target).abs().mean().item())
            """,
            title="every item is a fresh random draw whatever its index: shuffled indices change nothing",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader, Dataset


            class RandomFields(Dataset):
                def __init__(self, size, count):
                    self.size, self.count = size, count

                def __len__(self):
                    return self.count

                def __getitem__(self, i):
                    field = torch.randn(self.size, generator=torch.Generator().manual_seed(i))
                    return field, simulate(field)


            test_set = RandomFields(64, 200)
            test_loader = DataLoader(test_set, batch_size=10, shuffle=True)
            model.eval()
            with torch.no_grad():
                for field, target in test_loader:
                    report((model(field) - target).abs().mean().item())
            """,
            line=18,
            fixed="""
            import torch
            from torch.utils.data import DataLoader, Dataset


            class RandomFields(Dataset):
                def __init__(self, size, count):
                    self.size, self.count = size, count

                def __len__(self):
                    return self.count

                def __getitem__(self, i):
                    field = torch.randn(self.size, generator=torch.Generator().manual_seed(i))
                    return field, simulate(field)


            test_set = RandomFields(64, 200)
            test_loader = DataLoader(test_set, batch_size=10, shuffle=False)
            model.eval()
            with torch.no_grad():
                for field, target in test_loader:
                    report((model(field) - target).abs().mean().item())
            """,
            title="each item is seeded by its index: the shuffled order changes the batches",
        ),
        good(
            """
            import random
            import torch
            from torch.utils.data import DataLoader, Dataset


            class ScenePatches(Dataset):
                def __init__(self, scenes, count):
                    self.scenes, self.count = scenes, count

                def __len__(self):
                    return self.count

                def __getitem__(self, i):
                    if torch.is_tensor(i):
                        i = i.item()
                    scene = random.choice(self.scenes)
                    return crop_at_random(scene)


            val_loader = DataLoader(ScenePatches(load_scenes("val"), 1000), batch_size=8, shuffle=True)
            model.eval()
            with torch.no_grad():
                for x, y in val_loader:
                    report((model(x) - y).abs().mean().item())
            """,
            title="the index is only converted into itself and never used: every item is a random patch",
        ),
        bad(
            """
            import random
            import torch
            from torch.utils.data import DataLoader, Dataset


            class ScenePatches(Dataset):
                def __init__(self, scenes, count):
                    self.scenes, self.count = scenes, count

                def __len__(self):
                    return self.count

                def __getitem__(self, i):
                    if torch.is_tensor(i):
                        i = i.item()
                    scene = self.scenes[i % len(self.scenes)]
                    return crop_at_random(scene)


            val_loader = DataLoader(ScenePatches(load_scenes("val"), 1000), batch_size=8, shuffle=True)
            model.eval()
            with torch.no_grad():
                for x, y in val_loader:
                    report((model(x) - y).abs().mean().item())
            """,
            line=20,
            fixed="""
            import random
            import torch
            from torch.utils.data import DataLoader, Dataset


            class ScenePatches(Dataset):
                def __init__(self, scenes, count):
                    self.scenes, self.count = scenes, count

                def __len__(self):
                    return self.count

                def __getitem__(self, i):
                    if torch.is_tensor(i):
                        i = i.item()
                    scene = self.scenes[i % len(self.scenes)]
                    return crop_at_random(scene)


            val_loader = DataLoader(ScenePatches(load_scenes("val"), 1000), batch_size=8, shuffle=False)
            model.eval()
            with torch.no_grad():
                for x, y in val_loader:
                    report((model(x) - y).abs().mean().item())
            """,
            title="the same conversion, then the index picks the scene: the shuffled order changes the batches",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            def score(detector, held_out):
                test_loader = DataLoader(held_out, batch_size=len(held_out), shuffle=True, drop_last=True)
                with torch.no_grad():
                    for x, label in test_loader:
                        errors = (detector(x) - x).pow(2).mean(dim=1)
                        show_worst(x[:8], errors[:8])
                        auc = roc_auc(label, errors)
                return auc
            """,
            title="one batch holding the whole held-out set: nothing is dropped and there is no batch order",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            def score(detector, held_out):
                test_loader = DataLoader(held_out, batch_size=len(held_out) // 4, drop_last=True)
                total = 0.0
                with torch.no_grad():
                    for x, label in test_loader:
                        total += (detector(x) - x).pow(2).sum().item()
                return total / len(held_out)
            """,
            line=5,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def score(detector, held_out):
                test_loader = DataLoader(held_out, batch_size=len(held_out) // 4, drop_last=False)
                total = 0.0
                with torch.no_grad():
                    for x, label in test_loader:
                        total += (detector(x) - x).pow(2).sum().item()
                return total / len(held_out)
            """,
            title="a quarter of the set per batch: a size not divisible by four loses its tail",
        ),
        good(
            """
            import time
            import torch
            from torch.utils.data import DataLoader

            @torch.no_grad()
            def evaluate_io(model, shards, workers):
                loader = DataLoader(shards, batch_size=256, shuffle=True, num_workers=workers)
                started = time.perf_counter()
                for _ in loader:
                    pass
                return (time.perf_counter() - started) / len(loader)
            """,
            title="a pass that times the loading and reads no batch: no model or metric sees their order",
        ),
        bad(
            """
            import time
            import torch
            from torch.utils.data import DataLoader

            @torch.no_grad()
            def evaluate_io(model, shards, workers):
                loader = DataLoader(shards, batch_size=256, shuffle=True, num_workers=workers)
                started = time.perf_counter()
                for batch in loader:
                    model(batch)
                return (time.perf_counter() - started) / len(loader)
            """,
            line=7,
            fixed="""
            import time
            import torch
            from torch.utils.data import DataLoader

            @torch.no_grad()
            def evaluate_io(model, shards, workers):
                loader = DataLoader(shards, batch_size=256, shuffle=False, num_workers=workers)
                started = time.perf_counter()
                for batch in loader:
                    model(batch)
                return (time.perf_counter() - started) / len(loader)
            """,
            title="the same timing loop that runs the model on each batch it reads",
        ),
        good(
            """
            import time
            import torch
            from torch.utils.data import DataLoader

            def validate(model, val_set, seed):
                order = torch.Generator()
                order.manual_seed(seed)
                val_loader = DataLoader(val_set, batch_size=32, shuffle=True, generator=order)
                errors = []
                with torch.no_grad():
                    for x, y in val_loader:
                        errors.append((model(x) - y).abs().mean())
                return torch.stack(errors)
            """,
            title="shuffled by a generator seeded with the run's fixed seed: the same order on every run",
        ),
        bad(
            """
            import time
            import torch
            from torch.utils.data import DataLoader

            def validate(model, val_set, seed):
                order = torch.Generator()
                order.manual_seed(time.time_ns())
                val_loader = DataLoader(val_set, batch_size=32, shuffle=True, generator=order)
                errors = []
                with torch.no_grad():
                    for x, y in val_loader:
                        errors.append((model(x) - y).abs().mean())
                return torch.stack(errors)
            """,
            line=8,
            fixed="""
            import time
            import torch
            from torch.utils.data import DataLoader

            def validate(model, val_set, seed):
                order = torch.Generator()
                order.manual_seed(time.time_ns())
                val_loader = DataLoader(val_set, batch_size=32, shuffle=False, generator=order)
                errors = []
                with torch.no_grad():
                    for x, y in val_loader:
                        errors.append((model(x) - y).abs().mean())
                return torch.stack(errors)
            """,
            title="the same generator seeded from the clock: a new order on every run",
        ),
    )

    def check(self, ctx):
        index = ctx.index
        for site in index.calls:
            name = index.call_name(site) or ""
            if name.rsplit(".", 1)[-1] != "DataLoader":
                continue
            call = site.node
            shuffle = _passed(ctx, call, "shuffle")
            if shuffle is None and len(positional_args(call)) >= 3:
                shuffle = positional_args(call)[2].value
            drop = _passed(ctx, call, "drop_last")
            if _one_sample_batches(ctx, call, site.scope):
                drop = None  # batches of one sample: there is no partial batch to drop
            if drop is not None and full_batches(ctx.model(dataflow), call):
                drop = None  # a stated length that is a multiple of the stated batch size: nothing to drop
            if _whole_set_batch(call, site.scope):
                # one batch holding the whole dataset: no partial batch, and no order of batches
                drop = shuffle = None
            if shuffle is not None and _index_ignored(ctx, _dataset_arg(call), site.scope):
                shuffle = None  # its items do not depend on the index: no order of indices changes them
            if shuffle is not None and seeded_generator(index, keyword_value(call, "generator"), site.scope, call):
                shuffle = None  # a generator seeded with a value fixed for the run: the same order every run
            if shuffle is not None and seeded_before_each_pass(index, call):
                shuffle = None  # the global generator seeded right before every pass: the same order every run
            bad_args = [(word, value) for word, value in (("shuffle", shuffle), ("drop_last", drop))
                        if isinstance(value, cst.Name) and value.value == "True"]
            if not bad_args:
                continue
            reach = ctx.model(loader_reach).of_call(call)
            if reach.state == UNUSED:
                continue  # no pass over it wherever the code takes it: it feeds no evaluation
            why = self._evaluation_evidence(ctx, site, reach)
            if why is None:
                continue
            holder = _holder_name(ctx.index, call)
            if holder is not None and only_drawn_from(ctx.index, holder, ctx.index.enclosing_statement(call)):
                continue  # `next(iter(loader))` only: one batch for pictures or a probe, no evaluation
            if holder is not None and never_read(ctx.index, holder, ctx.index.enclosing_statement(call)):
                continue  # built and never used: it feeds no evaluation, whatever its name
            if site.function is not None and never_runs(ctx.index, site.function):
                continue  # built by a function replaced by a later def before anything reads it
            uncalled = site.function is not None and named_nowhere(ctx.index, site.function)
            words = " and ".join(f"`{w}=True`" for w, _ in bad_args)
            consequence = []
            if any(w == "drop_last" for w, _ in bad_args):
                consequence.append("the last partial batch is never evaluated")
            if any(w == "shuffle" for w, _ in bad_args):
                consequence.append("the batch order changes from run to run")
            # a value written into a mapping may be shared with the training loader: no fix then
            fix = FixSpec(
                "Set " + " and ".join(f"`{w}=False`" for w, _ in bad_args),
                safe=False,
                replacements=tuple((value, cst.Name("False")) for _, value in bad_args),
            ) if all(any(a.value is value for a in call.args if not a.star) for _, value in bad_args) else None
            yield self.report(
                call,
                f"evaluation DataLoader ({why}) built with {words}: " + " and ".join(consequence)
                + "; an evaluation should see every sample once, in a fixed order",
                fix,
                evidence=[premise("a `DataLoader` is built here", call, "construction"),
                          *(premise(f"`{w}=True`", value, "argument") for w, value in bad_args),
                          self._evaluation_premise(ctx, site, why, reach, uncalled)],
            )

    @staticmethod
    def _evaluation_premise(ctx, site, why: str, reach, uncalled: bool = False):
        """Proven by an argument (`train=False`, a split), a framework hook (`val_dataloader`) or
        its use (iterated only by evaluation loops); a name alone (the holder's, the dataset's, the
        function's) leaves it unknown. Built by a function no file of its import component names
        (`uncalled`), it is unknown and required: that the function runs at all is unproven."""
        text = f"the loader feeds an evaluation: {why}"
        if reach.state == EVALUATES:
            return premise(f"{text}; it is {reach.text}", reach.node, reach.kind)
        if uncalled:
            return unknown(f"{text}, and `{site.function.name}` runs: no file that can import it calls it",
                           site.function.node, "call")
        if why.startswith("returned by"):
            return premise(text, site.function.node, "framework")
        if "`train=False`" in why or "split" in why and "=" in why:
            return premise(text, site.node, "argument")
        if why.endswith("only iterated by evaluation loops"):
            return premise(text, site.node, "use")
        # not required yet: the evaluation sets of real code are mostly known by their names
        return unknown(f"{text} (the loader is {reach.text})" if reach.text else text, site.node, "use",
                       required=False)

    def _evaluation_evidence(self, ctx, site, reach) -> str | None:
        index = ctx.index
        call = site.node
        holder = _holder_name(index, call)
        dataset = _dataset_arg(call)
        dataset_text = ctx.code_for(dataset) if dataset is not None else None
        # a training name anywhere wins: never flag a loader that says it trains
        if name_kind(holder) == "train" or name_kind(dotted_name(dataset) if dataset is not None else None) == "train":
            return None
        if name_kind(holder) == "eval":
            return f"`{holder}`"
        if dataset is not None:
            kind = _dataset_kind(ctx, dataset, site.scope)
            if kind == "train":
                return None
            if kind is not None:
                return f"dataset `{dataset_text}` {kind}"
        function = site.function
        if function is not None and function.name in _EVAL_HOOKS \
                and ctx.model(loader_reach).framework_runs(function) is not False:
            return f"returned by `{function.name}`"
        mode_model = ctx.model(modes)
        if function is not None and mode_model.is_evaluation_function(function) \
                and not mode_model.computes_grad(function.node.body, function.scope):
            return f"built in the evaluation function `{function.name}`"
        if holder is not None and "." not in holder and _only_evaluated(ctx, call, holder):
            return f"`{holder}` is only iterated by evaluation loops"
        if reach.state == EVALUATES and reach.only_evaluations:
            return "every pass over it that the code reaches evaluates"
        return None


def _holder_name(index, call) -> str | None:
    """The variable, attribute or dict key that receives the loader."""
    parent = index.parent(call)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        target = parent.targets[0].target
        if isinstance(target, cst.Subscript) and len(target.slice) == 1 \
                and isinstance(target.slice[0].slice, cst.Index) \
                and isinstance(target.slice[0].slice.value, cst.SimpleString):
            return target.slice[0].slice.value.evaluated_value
        return dotted_name(target)
    if isinstance(parent, cst.AnnAssign):
        return dotted_name(parent.target)
    if isinstance(parent, cst.DictElement) and isinstance(parent.key, cst.SimpleString):
        return parent.key.evaluated_value
    if isinstance(parent, cst.Arg) and parent.keyword is not None:
        return parent.keyword.value
    return None


def _dataset_arg(call) -> cst.BaseExpression | None:
    dataset = keyword_value(call, "dataset")
    if dataset is None:
        args = positional_args(call)
        dataset = args[0].value if args else None
    return dataset


def _index_ignored(ctx, dataset, scope) -> bool:
    """The dataset is an instance of a project class whose `__getitem__` never uses its index
    (a fresh random sample at every call): shuffling the indices changes nothing it yields."""
    if isinstance(dataset, cst.Name):
        values = [b.value for b in scope.lookup(dataset.value)]
        if not values or any(v is None for v in values):
            return False
    elif isinstance(dataset, cst.Call):
        values = [dataset]
    else:
        return False
    for value in values:
        if not isinstance(value, cst.Call):
            return False
        built = ctx.index.summary_of(value.func, ctx.index.scope_at(value))
        method = built.method("__getitem__") if isinstance(built, ClassSummary) else None
        if method is None or not method.params or method.params[0] not in method.ignored_params:
            return False
    return True


def _dataset_kind(ctx, dataset, scope, depth: int = 0) -> str | None:
    """How a dataset expression shows it is a held-out split (text for the message), or "train"."""
    if depth > 3:
        return None
    kind = name_kind(dotted_name(dataset))
    if kind == "train":
        return "train"
    if kind == "eval":
        return "is a held-out split"
    if isinstance(dataset, cst.Subscript) and len(dataset.slice) == 1 \
            and isinstance(dataset.slice[0].slice, cst.Index) \
            and isinstance(dataset.slice[0].slice.value, cst.SimpleString):
        key = dataset.slice[0].slice.value.evaluated_value
        if isinstance(key, str):
            if _EVAL_SPLIT.match(key.lower()):
                return "is a held-out split"
            if name_kind(key) == "train":
                return "train"
    if isinstance(dataset, cst.Call):
        train = keyword_value(dataset, "train")
        if isinstance(train, cst.Name) and train.value == "False":
            return "is built with `train=False`"
        if isinstance(train, cst.Name) and train.value == "True":
            return "train"
        split = keyword_value(dataset, "split")
        if isinstance(split, cst.SimpleString) and isinstance(split.evaluated_value, str):
            value = split.evaluated_value.lower()
            if _EVAL_SPLIT.match(value):
                return f"is the `{split.evaluated_value}` split"
            if name_kind(value) == "train":
                return "train"
        return None
    if isinstance(dataset, cst.Name):
        values = [b.value for b in scope.lookup(dataset.value) if b.value is not None]
        if len(values) == 1:
            return _dataset_kind(ctx, values[0], ctx.index.scope_at(values[0]), depth + 1)
    return None


def _only_evaluated(ctx, call, holder: str) -> bool:
    """Every loop over the loader variable is an evaluation: grad off, no backward or step."""
    flow = ctx.model(dataflow)
    mode_model = ctx.model(modes)
    owner = flow._owner(call)
    loops = []
    for node in ctx.index.subtree(owner.body if isinstance(owner, cst.FunctionDef) else owner):
        if isinstance(node, cst.For) and holder in {n.value for n in walk(node.iter) if isinstance(n, cst.Name)}:
            loops.append(node)
        elif isinstance(node, cst.Call):
            loops.extend(_loops_of_callee_over(ctx, node, holder))
    if not loops:
        return False
    return all(flow.under_no_grad(loop.body) and not mode_model.computes_grad(loop, flow.scope_of(loop))
               for loop in loops)


def _loops_of_callee_over(ctx, call: cst.Call, holder: str) -> list[cst.For]:
    """The loops of a same-file function that `call` hands the loader `holder` to, over the
    parameter it arrives in (`evaluate(model, test_loader)`: `for x, y in loader:` in `evaluate`)."""
    index = ctx.index
    callee = index.callee(call, index.scope_at(call))
    if callee is None:
        return []
    params = [p.name.value for p in (*callee.node.params.posonly_params, *callee.node.params.params)]
    received = {param for param in params
                if isinstance(argument := index.argument_for(call, callee, param), cst.Name) and argument.value == holder}
    return [node for node in index.subtree(callee.node.body)
            if isinstance(node, cst.For) and received & {n.value for n in walk(node.iter) if isinstance(n, cst.Name)}]


def _batch_size(call: cst.Call) -> cst.BaseExpression | None:
    size = keyword_value(call, "batch_size")
    if size is None and len(positional_args(call)) >= 2:
        size = positional_args(call)[1].value
    return size


def _one_sample_batches(ctx, call: cst.Call, scope) -> bool:
    """`batch_size=1`, written or left at DataLoader's default (with no batch sampler, no `**kwargs`),
    or a setting of a project configuration module that every value it is given there is 1 and no
    file of the project writes (`cfg.PG.VAL.BATCH_SIZE` with `__C.PG.VAL.BATCH_SIZE = 1`)."""
    if any(a.star for a in call.args):
        return False
    size = _batch_size(call)
    if size is None:
        return keyword_value(call, "batch_sampler") is None
    if isinstance(size, cst.Attribute) and ctx.index.linker is not None:
        values = ctx.index.linker.configured_values(ctx.index, size, scope)
        return bool(values) and all(isinstance(v, cst.Integer) and v.evaluated_value == 1 for v in values)
    return isinstance(size, cst.Integer) and size.evaluated_value == 1


def _whole_set_batch(call: cst.Call, scope) -> bool:
    """`batch_size=len(dataset)` with `dataset` the loader's own dataset (the same name, bound
    once): one batch holding every sample, so nothing is dropped and there is no batch order
    (without a sampler of its own, `**kwargs`, or a batch sampler)."""
    if any(a.star for a in call.args) or keyword_value(call, "sampler") is not None \
            or keyword_value(call, "batch_sampler") is not None:
        return False
    size = _batch_size(call)
    dataset = _dataset_arg(call)
    if not (isinstance(size, cst.Call) and isinstance(size.func, cst.Name) and size.func.value == "len"
            and len(size.args) == 1 and not size.args[0].star and dataset is not None):
        return False
    counted = size.args[0].value
    if isinstance(counted, cst.Name) and isinstance(dataset, cst.Name):
        return counted.value == dataset.value and len(scope.lookup(dataset.value)) == 1
    return False


def _passed(ctx, call: cst.Call, word: str) -> cst.BaseExpression | None:
    """The value `call` is given for keyword `word`: directly, or through a `**mapping` filled in
    the same function (`test_kwargs.update(cuda_kwargs)` with `"shuffle": True` in it) or a
    factory's `**kwargs`; a direct keyword first, then the last value found."""
    direct = keyword_value(call, word)
    if direct is not None:
        return direct
    values = [value for value, writer in ctx.model(dataflow).keyword_values(call, word) if writer is call]
    return values[-1] if values else None

