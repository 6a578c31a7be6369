"""TL601 mean-of-batch-means."""

from __future__ import annotations

import bisect
import heapq
import re
from typing import Iterator

import libcst as cst

from trainlint.model.dataflow import dataflow, loader_constructor, loader_of_loop
from trainlint.model.dataset_sizes import full_batches
from trainlint.model.summaries import FunctionSummary, equal_batch_arguments, equal_batches_for
from trainlint.model.training import training_model
from trainlint.finding import Severity
from trainlint.gate import iterates_loader, named, refers_to
from trainlint.model import frameworks
from trainlint.model.framework_classes import ancestors
from trainlint.model.index import dotted_name, keyword_value, positional_args, walk, walk_expression
from trainlint.model.iterations import first_values
from trainlint.model.summaries import MEAN_WORDS, callable_summary
from trainlint.model.roles import ACCELERATOR, _unpacked_prepare_argument
from trainlint.rule import Rule, bad, good
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import code, loader_premise, role_premise, training_premises

# torch.nn.functional losses whose default reduction is a mean over the batch
_MEAN_LOSSES = frozenset({
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss",
    "gaussian_nll_loss", "soft_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss",
    "hinge_embedding_loss", "cosine_embedding_loss", "margin_ranking_loss", "triplet_margin_loss",
    "multilabel_margin_loss",
})
_CRITERION_NAME = re.compile(r"^(criterion|criteria|crit|loss_?fn|loss_?func(tion)?|lossfn)$", re.IGNORECASE)
_UNWRAP_METHODS = frozenset({"item", "detach", "cpu", "float", "double", "tolist", "numpy"})
_UNWRAP_FUNCTIONS = frozenset({"float"})
_MEAN_FUNCTIONS = frozenset({"numpy.mean", "numpy.average", "statistics.mean", "statistics.fmean",
                             "numpy.nanmean"})
_BATCH_SIZE_NAME = re.compile(r"^(bs|batch_?size|n_?batch|bsz)$", re.IGNORECASE)
# Words a project file must hold for its functions to be read for the loaders they build
_LOADER_WORDS = ("drop_last", "batch_size")


class MeanOfBatchMeans(Rule):
    code = "TL601"
    name = "mean-of-batch-means"
    severity = Severity.WARNING
    summary = "A metric averaged as the sum of per-batch means divided by the number of batches"
    message = "a mean of per-batch means overweights a short last batch: accumulate sums and counts"
    # the accumulation must run in a loop over a data loader
    triggers = ("loader", "Loader", "_dl", "dl_", " dl", "(dl", "batch_size")
    # a loop over a data loader; or a framework's per-step log given a `batch_size` (trainlint/frameworks/*.toml)
    gate = iterates_loader() | (
        named("|".join(sorted({f"^{e.attr}$" for e, _, _ in frameworks.epoch_logs()})))
        & named("|".join(sorted({f"^{e.weight}$" for e, _, _ in frameworks.epoch_logs()})))
        & refers_to(*sorted(frameworks.epoch_log_owners())))
    what_it_does = """
        Flags a loss or accuracy accumulated over a data loader as per-batch means
        (`total += loss.item()` where the loss is a batch mean, `acc += correct / len(y)`,
        `losses.append(outputs.loss.item())`) and then divided by the number of batches
        (`len(loader)`, the `enumerate` counter, a counter incremented once per batch,
        `len(losses)`, `np.mean(losses)`). The finding is at the division. A criterion handed in
        as a parameter is taken to use PyTorch's default `reduction="mean"`; one built in the file
        is read (`nn.CrossEntropyLoss(reduction="sum")` is a sum). When the divisor counts the
        batches of the other split's loader (`eval_loss / len(train_dataloader)` for a sum over
        the evaluation loader), the message says so: that average is wrong by the ratio of the two
        lengths.

        It stays quiet on sums divided by a sample count (`reduction="sum"`,
        `loss.item() * x.size(0)` divided by `len(loader.dataset)`), on running averages weighted
        by batch size (`AverageMeter.update(val, n)`), on running displays inside the loop, on a
        division that reads the name only after it is bound anew past the loop (`losses = []`
        before a second loop, on every way to it, by a value that does not read the name), on
        values collected only on iterations a test of the loop's position picks (`if i % 10 ==
        9: losses.append(loss.item())`, or after `if step < warmup: continue`: a sample of the
        batches, not one value per batch of the loader), on values collected only from batches of a
        size fixed for the loop (`if x.size(0) != batch_size: continue` before the sum, `x` read from
        the loop's batch and the size a value no statement of the loop changes: every mean summed is
        over as many samples; a one-sided test such as `if len(x) < 2: continue` proves nothing), and
        when the loader's dataset has a length the code states that is a multiple of a batch size
        it states (`Subset(ds, list(range(batch_size * 10)))` in batches of `batch_size = 32`,
        `TensorDataset(torch.rand(320, 4), ...)`: every batch is full; a dataset or batch size
        that is a parameter counts when every call of its function in the file states one, the
        function is called from no other file and handed nowhere), and
        when the loader is built with `drop_last=True` or `batch_size=1` (written, or left at
        DataLoader's default with no `batch_size`, `sampler`, `batch_sampler` or `**kwargs`) (in the same file, or by a
        project function, in another file too, or with keyword arguments one returns; a name one
        step away counts: a variable bound to `True`, a parameter every call leaves at a default of
        `True`, `**options` of a dict literal; also
        through `accelerator.prepare`, whose loaders keep the batches of those they wrap): every
        batch then has the same size and the mean of means is exact. When the project function
        turns `drop_last` off only under a configuration value (`if args.data == "m4":`) rather
        than an argument the caller passes, whether the last batch is short is unknown: the
        finding is unproven (`--include-unproven`); so is it when the function returns one loader
        per branch of configuration tests (`if args.task_name == "classification": ... return`),
        and when the loop's loader is a parameter every caller fills with such a loader (or one
        of equal batches). A loader kept as `self.loader`, set only from a parameter of the class's
        `__init__`, makes batches of one size, in a run over the whole project, when every
        construction of the class and of its subclasses (in any file, none defining its own
        `__init__` or setting the attribute) passes a loader built with `drop_last=True` or
        `batch_size=1` (written there, by a project factory, or an element of the tuple a helper of
        that file returns); a construction whose instance is bound to a name that
        is read only for methods that cannot run the averaging one (`scorer.score_text()` when the
        loop is in `score_audio`) does not count, when the class has no subclass.

        An average taken inside a training loop (the loop runs the backward and the step) is a
        logged training loss, not a metric a model is chosen or reported by: it is reported at
        **info**, and the message says so, unless it divides by the length of another loader
        (a wrong count, not only a weighting). Averages over validation/test loaders stay warnings.

        A framework that averages a logged value over the epoch for you is read from its model
        (trainlint/frameworks/lightning.toml): Lightning's `self.log(name, value, on_epoch=True)`
        (the default in `validation_step` and `test_step`) reduces the steps' values to a mean
        weighted by `batch_size`, which it reads off the batch when it is not given; that mean is
        right. Given a fixed number instead (`batch_size=self.hparams.batch_size`, a literal, an
        attribute only the constructor sets, `args.batch_size`), every step weighs the same: a
        batch mean logged that way is a mean of batch means. A weight read off what the step hook
        is handed (`batch_size=batch.batch_size`, an attribute or property of its `batch`) is that
        step's own, whatever the expression: not reported. Reported at the `self.log` call, in a
        class deriving from the framework's `LightningModule` (its resolved import); quiet when the
        class's loader hook for that split drops the short last batch. A weight of 1 states one sample
        per step, which leaves no short batch: it is reported only when the class's loader hook for the
        split batches more than one sample (unknown, so not reported by default, when the loader
        feeding the step is not seen). In `training_step` (with
        `on_epoch=True`) it is a logged training loss: info.
        """
    why_bad = """
        A mean-reduced loss is already an average over its batch. Averaging those averages gives
        every batch the same weight, whatever its size. When the dataset size is not a multiple of
        the batch size, the last batch is smaller and its samples count for more than the others:
        with 1,001 validation samples and batches of 100, the single last sample weighs as much as
        a whole batch. The reported validation loss or accuracy then depends on the batch size and
        on which samples land in the tail, so runs with different batch sizes (or a different
        number of GPUs) are not comparable, and early stopping or checkpoint selection acts on a
        biased number. Summing per-sample values and dividing by the sample count is exact.
        """
    references = (
        "https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader (drop_last)",
        "https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html (reduction)",
        "https://github.com/pytorch/examples/blob/main/imagenet/main.py (AverageMeter.update(val, n))",
        "https://lightning.ai/docs/pytorch/stable/extensions/logging.html#automatic-logging (batch_size)",
    )
    examples = (
        good(
            """
            import numpy as np
            import torch
            from torch.utils.data import DataLoader, Subset, TensorDataset

            def regression_check(model, rows):
                batch_size = 32
                data = Subset(TensorDataset(rows[:, :-1], rows[:, -1]), list(range(batch_size * 10)))
                loader = DataLoader(data, batch_size=batch_size)
                losses = []
                with torch.no_grad():
                    for x, y in loader:
                        losses.append(torch.nn.functional.mse_loss(model(x), y).item())
                return np.mean(losses)
            """,
            title="a subset of 320 samples in batches of 32: the stated length is a multiple of the batch size, "
                  "every batch is full",
        ),
        bad(
            """
            import numpy as np
            import torch
            from torch.utils.data import DataLoader, TensorDataset

            def regression_check(model):
                batch_size = 32
                count = batch_size * 10 + 5
                data = TensorDataset(torch.rand(count, 4), torch.rand(count))
                loader = DataLoader(data, batch_size=batch_size)
                losses = []
                with torch.no_grad():
                    for x, y in loader:
                        losses.append(torch.nn.functional.mse_loss(model(x), y).item())
                return np.mean(losses)
            """,
            line=14,
            title="325 samples in batches of 32: the stated length leaves a last batch of 5",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader, TensorDataset


            def toy_tokens(rows, width):
                return TensorDataset(torch.randint(0, 100, (rows, width)), torch.randint(100, (rows,)))


            @torch.no_grad()
            def score(model, data, batch_size=4):
                total, batches = 0.0, 0
                for tokens, target in DataLoader(data, batch_size=batch_size):
                    total += torch.nn.functional.cross_entropy(model(tokens), target).item()
                    batches += 1
                return total / batches


            def smoke(model):
                print(score(model, toy_tokens(40, 7), batch_size=8))
                print(score(model, toy_tokens(12, 7)))
            """,
            title="every call of the scoring function states its dataset (40 and 12 rows) and batch size (8, "
                  "the default 4): each length is a multiple, every batch is full",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader, TensorDataset


            def toy_tokens(rows, width):
                return TensorDataset(torch.randint(0, 100, (rows, width)), torch.randint(100, (rows,)))


            @torch.no_grad()
            def score(model, data, batch_size=4):
                total, batches = 0.0, 0
                for tokens, target in DataLoader(data, batch_size=batch_size):
                    total += torch.nn.functional.cross_entropy(model(tokens), target).item()
                    batches += 1
                return total / batches


            def smoke(model):
                print(score(model, toy_tokens(40, 7), batch_size=8))
                print(score(model, toy_tokens(14, 7)))
            """,
            line=15,
            title="one call passes 14 rows in batches of the default 4: its last batch holds 2",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader


            def loader_options(batch_size):
                return {"batch_size": batch_size, "drop_last": True, "num_workers": 4}


            @torch.no_grad()
            def validate(model, dataset):
                loader = DataLoader(dataset, **loader_options(128))
                running, steps = 0.0, 0
                for x, y in loader:
                    running += torch.nn.functional.cross_entropy(model(x), y).item()
                    steps += 1
                return running / steps
            """,
            title="drop_last=True comes with the keyword arguments a helper returns: equal batches",
        ),
        good(
            """
            import numpy as np
            import torch
            from torch.utils.data import DataLoader


            def build_loader(cfg, split):
                drop_last = True
                if cfg.task == "detection":
                    drop_last = False
                    windows = Windows(cfg.root, split)
                    return windows, DataLoader(windows, batch_size=cfg.batch_size, drop_last=drop_last)
                if cfg.dataset == "weekly":
                    drop_last = False
                series = Series(cfg.root, split)
                return series, DataLoader(series, batch_size=cfg.batch_size, drop_last=drop_last)


            def score(model, cfg):
                _, val_loader = build_loader(cfg, "val")
                losses = []
                with torch.no_grad():
                    for x, y in val_loader:
                        losses.append(torch.nn.functional.mse_loss(model(x), y).item())
                return np.average(losses)
            """,
            title="a loader factory with one return per task: which branch runs, and so whether the last batch "
                  "is kept, is a configuration value (unproven)",
        ),
        bad(
            """
            import numpy as np
            import torch
            from torch.utils.data import DataLoader


            def build_loader(cfg, split):
                drop_last = True
                if split == "val":
                    drop_last = False
                    windows = Windows(cfg.root, split)
                    return windows, DataLoader(windows, batch_size=cfg.batch_size, drop_last=drop_last)
                if cfg.dataset == "weekly":
                    drop_last = False
                series = Series(cfg.root, split)
                return series, DataLoader(series, batch_size=cfg.batch_size, drop_last=drop_last)


            def score(model, cfg):
                _, val_loader = build_loader(cfg, "val")
                losses = []
                with torch.no_grad():
                    for x, y in val_loader:
                        losses.append(torch.nn.functional.mse_loss(model(x), y).item())
                return np.average(losses)
            """,
            line=24,
            title="the same factory, but the split it is called with picks the branch that keeps the short last batch",
        ),
        good(
            """
            import numpy as np
            import torch
            from torch.utils.data import DataLoader


            def data_provider(args, flag):
                if flag == "test":
                    drop_last = True
                elif flag == "pred":
                    drop_last = False
                else:
                    drop_last = True
                data_set = Series(args.root, flag=flag)
                return data_set, DataLoader(data_set, batch_size=args.batch_size, drop_last=drop_last)


            class Experiment:
                def _get_data(self, flag):
                    data_set, data_loader = data_provider(self.args, flag)
                    return data_set, data_loader

                def vali(self, vali_loader, criterion):
                    total_loss = []
                    with torch.no_grad():
                        for x, y in vali_loader:
                            total_loss.append(criterion(self.model(x), y).item())
                    return np.average(total_loss)

                def train(self, criterion):
                    vali_data, vali_loader = self._get_data(flag="val")
                    test_data, test_loader = self._get_data(flag="test")
                    return self.vali(vali_loader, criterion), self.vali(test_loader, criterion)
            """,
            title="every loader vali() is handed drops its last batch: drop_last chosen by the flag passed through two helpers",
        ),
        bad(
            """
            import numpy as np
            import torch
            from torch.utils.data import DataLoader


            def data_provider(args, flag):
                if flag == "test":
                    drop_last = False
                elif flag == "pred":
                    drop_last = False
                else:
                    drop_last = True
                data_set = Series(args.root, flag=flag)
                return data_set, DataLoader(data_set, batch_size=args.batch_size, drop_last=drop_last)


            class Experiment:
                def _get_data(self, flag):
                    data_set, data_loader = data_provider(self.args, flag)
                    return data_set, data_loader

                def vali(self, vali_loader, criterion):
                    total_loss = []
                    with torch.no_grad():
                        for x, y in vali_loader:
                            total_loss.append(criterion(self.model(x), y).item())
                    return np.average(total_loss)

                def train(self, criterion):
                    vali_data, vali_loader = self._get_data(flag="val")
                    test_data, test_loader = self._get_data(flag="test")
                    return self.vali(vali_loader, criterion), self.vali(test_loader, criterion)
            """,
            line=27,
            title="the same helpers, but the test flag keeps the short last batch",
        ),
        good(
            """
            import numpy as np
            import torch
            from accelerate import Accelerator
            from torch.utils.data import DataLoader


            def data_provider(args, flag):
                drop_last = True
                if args.data == "m4":
                    drop_last = False
                data_set = Series(args.root, flag=flag)
                return data_set, DataLoader(data_set, batch_size=args.batch_size, drop_last=drop_last)


            def main(args, model):
                accelerator = Accelerator()
                vali_data, vali_loader = data_provider(args, "val")
                vali_loader, model = accelerator.prepare(vali_loader, model)
                total_loss = []
                with torch.no_grad():
                    for x, y in vali_loader:
                        total_loss.append(torch.nn.functional.mse_loss(model(x), y).item())
                return np.average(total_loss)
            """,
            title="through `accelerator.prepare`, a loader whose `drop_last` only a dataset setting turns off: "
                  "whether a batch is short is not shown (unproven)",
        ),
        bad(
            """
            import numpy as np
            import torch
            from accelerate import Accelerator
            from torch.utils.data import DataLoader


            def data_provider(args, flag):
                drop_last = True
                if flag == "val":
                    drop_last = False
                data_set = Series(args.root, flag=flag)
                return data_set, DataLoader(data_set, batch_size=args.batch_size, drop_last=drop_last)


            def main(args, model):
                accelerator = Accelerator()
                vali_data, vali_loader = data_provider(args, "val")
                vali_loader, model = accelerator.prepare(vali_loader, model)
                total_loss = []
                with torch.no_grad():
                    for x, y in vali_loader:
                        total_loss.append(torch.nn.functional.mse_loss(model(x), y).item())
                return np.average(total_loss)
            """,
            line=23,
            title="the same path, but the flag it is called with keeps the short last batch",
        ),
        good(
            """
            import numpy as np
            import torch
            from accelerate import Accelerator
            from torch.utils.data import DataLoader


            def data_provider(args, flag):
                if flag == "test":
                    drop_last = True
                else:
                    drop_last = True
                data_set = Series(args.root, flag=flag)
                return data_set, DataLoader(data_set, batch_size=args.batch_size, drop_last=drop_last)


            def main(args, model):
                accelerator = Accelerator()
                vali_data, vali_loader = data_provider(args, "val")
                vali_loader, model = accelerator.prepare(vali_loader, model)
                total_loss = []
                with torch.no_grad():
                    for x, y in vali_loader:
                        total_loss.append(torch.nn.functional.mse_loss(model(x), y).item())
                return np.average(total_loss)
            """,
            title="a prepared loader keeps the `drop_last=True` of the one it wraps",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader


            @torch.no_grad()
            def evaluate(model, dataset, drop_last=True):
                options = {"batch_size": 64, "shuffle": False}
                loader = DataLoader(dataset, drop_last=drop_last, **options)
                total = 0.0
                for x, y in loader:
                    total += torch.nn.functional.mse_loss(model(x), y).item()
                return total / len(loader)


            def report(model, val_set):
                return evaluate(model, val_set)
            """,
            title="`drop_last` is a parameter that every call leaves at its default of `True`",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader


            @torch.no_grad()
            def evaluate(model, dataset, drop_last=True):
                options = {"batch_size": 64, "shuffle": False}
                loader = DataLoader(dataset, drop_last=drop_last, **options)
                total = 0.0
                for x, y in loader:
                    total += torch.nn.functional.mse_loss(model(x), y).item()
                return total / len(loader)


            def report(model, val_set):
                return evaluate(model, val_set, drop_last=False)
            """,
            line=12,
            title="the same parameter, but its one call passes `False`",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader


            @torch.no_grad()
            def evaluate(model, dataset):
                options = {"batch_size": 64, "shuffle": False, "drop_last": True}
                loader = DataLoader(dataset, **options)
                total = 0.0
                for x, y in loader:
                    total += torch.nn.functional.mse_loss(model(x), y).item()
                return total / len(loader)
            """,
            title="`drop_last=True` from a dict of options built beside the loader",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader


            def make_loader(dataset, batch_size, drop_last=True):
                return DataLoader(dataset, batch_size=batch_size, drop_last=drop_last)


            @torch.no_grad()
            def validate(model, dataset):
                running, steps = 0.0, 0
                for x, y in make_loader(dataset, 128):
                    running += torch.nn.functional.cross_entropy(model(x), y).item()
                    steps += 1
                return running / steps
            """,
            title="a loader helper whose drop_last=True is its parameter's default: batches of one size",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader


            def make_loader(dataset, batch_size, drop_last=False):
                return DataLoader(dataset, batch_size=batch_size, drop_last=drop_last)


            @torch.no_grad()
            def validate(model, dataset):
                running, steps = 0.0, 0
                for x, y in make_loader(dataset, 128):
                    running += torch.nn.functional.cross_entropy(model(x), y).item()
                    steps += 1
                return running / steps
            """,
            line=15,
            title="the same helper with drop_last=False by default keeps the short last batch",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader


            def loader_options(batch_size):
                return {"batch_size": batch_size, "num_workers": 4}


            @torch.no_grad()
            def validate(model, dataset):
                loader = DataLoader(dataset, **loader_options(128))
                running, steps = 0.0, 0
                for x, y in loader:
                    running += torch.nn.functional.cross_entropy(model(x), y).item()
                    steps += 1
                return running / steps
            """,
            line=16,
            title="the helper's keyword arguments keep the short last batch",
        ),
        bad(
            """
            import torch


            def dice_score(pred, target, eps=1e-6):
                inter = (pred * target).sum(dim=(1, 2))
                union = pred.sum(dim=(1, 2)) + target.sum(dim=(1, 2))
                return ((2 * inter + eps) / (union + eps)).mean()


            @torch.no_grad()
            def evaluate(model, loader: torch.utils.data.DataLoader):
                model.eval()
                total = 0.0
                for images, masks in loader:
                    preds = (model(images).sigmoid() > 0.5).float()
                    total += dice_score(preds, masks).item()
                return total / len(loader)
            """,
            line=17,
            title="a Dice helper that returns the batch mean, averaged over batches",
        ),
        good(
            """
            import torch


            def dice_per_image(pred, target, eps=1e-6):
                inter = (pred * target).sum(dim=(1, 2))
                union = pred.sum(dim=(1, 2)) + target.sum(dim=(1, 2))
                return (2 * inter + eps) / (union + eps)


            @torch.no_grad()
            def evaluate(model, loader):
                model.eval()
                total, count = 0.0, 0
                for images, masks in loader:
                    preds = (model(images).sigmoid() > 0.5).float()
                    scores = dice_per_image(preds, masks)
                    total += scores.sum().item()
                    count += scores.numel()
                return total / count
            """,
            title="per-image scores summed and divided by the number of images",
        ),
        bad(
            """
            import torch
            val_loader = torch.utils.data.DataLoader(val_set, batch_size=64)
            model.eval()
            val_loss = 0.0
            for batch in val_loader:
                with torch.no_grad():
                    val_loss += model(**batch).loss.item()
            print("val ppl", torch.exp(torch.tensor(val_loss / len(train_loader))))
            """,
            line=8,
            title="the sum runs over the validation batches, the count is the training loader's",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F

            @torch.no_grad()
            def evaluate(model, loader: torch.utils.data.DataLoader):
                total = 0.0
                for x, y in loader:
                    total += F.cross_entropy(model(x), y).item()
                return total / len(loader)
            """,
            line=9,
            title="a mean loss summed per batch, divided by len(loader)",
        ),
        bad(
            """
            import torch

            def validate(model, val_loader: torch.utils.data.DataLoader):
                model.eval()
                running_acc = 0.0
                with torch.no_grad():
                    for i, (images, labels) in enumerate(val_loader):
                        logits = model(images)
                        running_acc += (logits.argmax(1) == labels).sum().item() / labels.size(0)
                return running_acc / (i + 1)
            """,
            line=10,
            title="per-batch accuracy divided by the enumerate counter",
        ),
        bad(
            """
            import numpy as np
            import torch

            def eval_epoch(model, eval_dataloader: torch.utils.data.DataLoader):
                model.eval()
                losses = []
                for batch in eval_dataloader:
                    with torch.no_grad():
                        outputs = model(**batch)
                    losses.append(outputs.loss.item())
                return np.mean(losses)
            """,
            line=11,
            title="HF-style losses list averaged with np.mean",
        ),
        bad(
            """
            class Trainer:
                def __init__(self, val_loader: "torch.utils.data.DataLoader"):
                    self.val_loader = val_loader

                def validate(self):
                    self.model.eval()
                    val_loss, n_batches = 0.0, 0
                    for x, y in self.val_loader:
                        with torch.no_grad():
                            val_loss += self.loss_fn(self.model(x), y).item()
                        n_batches += 1
                    val_loss /= n_batches
                    return val_loss
            """,
            line=12,
            title="a batch counter in a Trainer class",
        ),
        bad(
            """
            from torch.utils.data import DataLoader

            train_loader = DataLoader(train_set, batch_size=32)
            for epoch in range(epochs):
                epoch_loss = 0
                for x, y in train_loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    epoch_loss += loss.item()
                print(epoch, epoch_loss / len(train_loader))
            """,
            line=12,
            title="training loss averaged per batch: a log, reported at info",
            severity=Severity.INFO,
        ),
        good(
            """
            import torch
            import torch.nn.functional as F

            @torch.no_grad()
            def evaluate(model, loader):
                loss_sum, count = 0.0, 0
                for x, y in loader:
                    loss_sum += F.cross_entropy(model(x), y, reduction="sum").item()
                    count += y.size(0)
                return loss_sum / count
            """,
            title="a summed loss divided by the sample count",
        ),
        good(
            """
            import torch

            def validate(model, criterion, val_loader):
                total = 0.0
                with torch.no_grad():
                    for images, labels in val_loader:
                        loss = criterion(model(images), labels)
                        total += loss.item() * images.size(0)
                return total / len(val_loader.dataset)
            """,
            title="batch means weighted by batch size, divided by len(dataset)",
        ),
        good(
            """
            def validate(model, criterion, val_loader):
                losses = AverageMeter()
                for images, target in val_loader:
                    loss = criterion(model(images), target)
                    losses.update(loss.item(), images.size(0))
                return losses.avg
            """,
            title="a running average weighted by batch size",
        ),
        good(
            """
            from torch.utils.data import DataLoader

            train_loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)
            for epoch in range(epochs):
                epoch_loss = 0.0
                for x, y in train_loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    epoch_loss += loss.item()
                print(epoch_loss / len(train_loader))
            """,
            title="drop_last=True: every batch has the same size, the mean of means is exact",
        ),
        good(
            """
            import torch

            @torch.no_grad()
            def estimate_loss(model):
                out = {}
                for split in ["train", "val"]:
                    losses = torch.zeros(eval_iters)
                    for k in range(eval_iters):
                        x, y = get_batch(split)
                        losses[k] = model(x, y).item()
                    out[split] = losses.mean()
                return out
            """,
            title="fixed-size random batches, not a loader's tail",
        ),
        good(
            """
            from tqdm import tqdm

            total = 0.0
            bar = tqdm(enumerate(val_loader))
            for i, (x, y) in bar:
                total += criterion(model(x), y).item()
                bar.set_postfix(loss=total / (i + 1))
            """,
            title="a running display inside the loop",
        ),
        bad(
            """
            import torch


            def train(model, train_dataloader: torch.utils.data.DataLoader, eval_dataloader: torch.utils.data.DataLoader, optimizer, epochs):
                for epoch in range(epochs):
                    model.train()
                    total_loss = 0.0
                    for batch in train_dataloader:
                        loss = model(**batch).loss
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                        total_loss += loss.detach().float()
                    train_epoch_loss = total_loss / len(eval_dataloader)
                    print(epoch, train_epoch_loss)
            """,
            line=14,
            title="a training-loss average divided by the other split's loader length: a warning, not a log",
        ),
        bad(
            """
            import torch.nn.functional as F
            from torch.autograd import Variable


            def score(net, val_loader: "torch.utils.data.DataLoader"):
                net.eval()
                nll = 0
                for images, digits in val_loader:
                    logp = net(Variable(images, volatile=True))
                    nll += F.nll_loss(logp, Variable(digits)).data[0]
                nll /= len(val_loader)
                return nll
            """,
            line=11,
            title="old-style `.data[0]` batch means summed, divided by the number of val_loader",
        ),
        good(
            """
            import torch.nn.functional as F
            from torch.autograd import Variable


            def score(net, val_loader):
                net.eval()
                nll = 0
                for images, digits in val_loader:
                    logp = net(Variable(images, volatile=True))
                    nll += F.nll_loss(logp, Variable(digits), size_average=False).data[0]
                nll /= len(val_loader.dataset)
                return nll
            """,
            title="old-style `.data[0]` of a summed loss, divided by the number of samples",
        ),
        bad(
            """
            import lightning as L
            import torch.nn.functional as F


            class LitClassifier(L.LightningModule):
                def __init__(self, net, lr=1e-3, batch_size=128):
                    super().__init__()
                    self.save_hyperparameters(ignore=["net"])
                    self.net = net

                def validation_step(self, batch, batch_idx):
                    images, labels = batch
                    logits = self.net(images)
                    acc = (logits.argmax(dim=1) == labels).float().mean()
                    self.log("val_acc", acc, batch_size=self.hparams.batch_size)
            """,
            line=15,
            title="Lightning's epoch mean weighted by a fixed `batch_size`: the short last batch weighs like a "
                  "full one",
        ),
        good(
            """
            import lightning as L
            import torch.nn.functional as F


            class LitClassifier(L.LightningModule):
                def __init__(self, net, lr=1e-3, batch_size=128):
                    super().__init__()
                    self.save_hyperparameters(ignore=["net"])
                    self.net = net

                def validation_step(self, batch, batch_idx):
                    images, labels = batch
                    logits = self.net(images)
                    acc = (logits.argmax(dim=1) == labels).float().mean()
                    self.log("val_acc", acc, batch_size=labels.size(0))
            """,
            title="the same log weighted by the batch's own size (or with no `batch_size`: Lightning reads it "
                  "off the batch)",
        ),
        good(
            """
            from dataclasses import dataclass

            import lightning as L
            import torch
            import torch.nn.functional as F


            @dataclass
            class Pairs:
                source: torch.Tensor
                target: torch.Tensor

                @property
                def count(self) -> int:
                    return self.source.shape[0]


            class PairRegressor(L.LightningModule):
                def __init__(self, net):
                    super().__init__()
                    self.net = net

                def validation_step(self, pairs: Pairs, step):
                    loss = F.mse_loss(self.net(pairs.source), pairs.target)
                    self.log("val/mse", loss, on_epoch=True, batch_size=pairs.count)
            """,
            title="the weight is read off the step's own batch (a property of the batch object the hook is "
                  "handed): each step weighs by its own size",
        ),
        bad(
            """
            from types import SimpleNamespace

            import lightning as L
            import torch.nn.functional as F

            settings = SimpleNamespace(count=64)


            class PairRegressor(L.LightningModule):
                def __init__(self, net):
                    super().__init__()
                    self.net = net

                def validation_step(self, pairs, step):
                    loss = F.mse_loss(self.net(pairs[0]), pairs[1])
                    self.log("val/mse", loss, on_epoch=True, batch_size=settings.count)
            """,
            line=16,
            title="the same log weighted by a module-level setting: one number for every step, the short last "
                  "batch weighs like a full one",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            def validate(model, samples):
                # the batch size is left at DataLoader's default of 1: every step is one sample
                loader = DataLoader(samples, shuffle=False)
                total = 0.0
                with torch.no_grad():
                    for x, y in loader:
                        total += F.cross_entropy(model(x), y).item()
                return total / len(loader)
            """,
            title="the loader leaves the batch size at DataLoader's default of 1: every step is one sample, none is short",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            def validate(model, samples, loader_options):
                loader = DataLoader(samples, shuffle=False, **loader_options)
                total = 0.0
                with torch.no_grad():
                    for x, y in loader:
                        total += F.cross_entropy(model(x), y).item()
                return total / len(loader)
            """,
            line=12,
            title='a loader whose batch size comes in `**loader_options`: the default of 1 is not known to hold',
        ),
        good(
            """
            import lightning as L
            import torch.nn.functional as F


            class PerImageTuner(L.LightningModule):
                def __init__(self, renderer):
                    super().__init__()
                    self.renderer = renderer

                def validation_step(self, batch, batch_idx):
                    camera, image = batch
                    loss = F.l1_loss(self.renderer(camera), image)
                    self.log("val/loss", loss, on_epoch=True, batch_size=1)
            """,
            title='a logged weight of 1 with no loader in sight: one sample per step is the size it states, nothing shows it wrong',
        ),
        bad(
            """
            import lightning as L
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            class PerImageTuner(L.LightningModule):
                def __init__(self, renderer, views):
                    super().__init__()
                    self.renderer = renderer
                    self.views = views

                def val_dataloader(self):
                    return DataLoader(self.views, batch_size=8)

                def validation_step(self, batch, batch_idx):
                    camera, image = batch
                    loss = F.l1_loss(self.renderer(camera), image)
                    self.log("val/loss", loss, on_epoch=True, batch_size=1)
            """,
            line=18,
            title="the same weight of 1 while the class's own val_dataloader batches eight samples: the short last batch weighs like a full one",
        ),
        good(
            """
            import numpy as np
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            def probe(model, held_out):
                loader = DataLoader(held_out, batch_size=50)
                snapshots = []
                with torch.no_grad():
                    for i, (x, y) in enumerate(loader):
                        loss = F.mse_loss(model(x), y)
                        if i % 20 == 19:
                            snapshots.append(loss.item())
                return np.mean(snapshots)
            """,
            title="every twentieth batch's loss kept as a snapshot: a sample of batches, not one mean per batch of the loader",
        ),
        bad(
            """
            import numpy as np
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            def probe(model, held_out):
                loader = DataLoader(held_out, batch_size=50)
                snapshots = []
                with torch.no_grad():
                    for i, (x, y) in enumerate(loader):
                        loss = F.mse_loss(model(x), y)
                        snapshots.append(loss.item())
                        if i % 20 == 19:
                            print(i, loss.item())
                return np.mean(snapshots)
            """,
            line=16,
            title="every batch's mean kept, only the print picked by position: the short last batch weighs like a full one",
        ),
        good(
            """
            import numpy as np
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            @torch.no_grad()
            def audit(model, held_out, shifted):
                errors = []
                for x, y in DataLoader(held_out, batch_size=50):
                    errors.append(F.l1_loss(model(x), y).item())
                print("worst batch", max(errors))
                errors = []
                for step, (x, y) in enumerate(DataLoader(shifted, batch_size=50)):
                    errors.append(F.l1_loss(model(x), y).item())
                    print(step, np.mean(errors))
            """,
            title="the list is bound anew after the first loop: the later mean (a running display of the "
                  "second loop) reads none of the first loop's batch means",
        ),
        bad(
            """
            import numpy as np
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            @torch.no_grad()
            def audit(model, held_out, fresh):
                errors = []
                for x, y in DataLoader(held_out, batch_size=50):
                    errors.append(F.l1_loss(model(x), y).item())
                print("worst batch", max(errors))
                if fresh:
                    errors = []
                print(np.mean(errors))
            """,
            line=15,
            title="bound anew only under a test: on the other way the mean is the first loop's mean of batch means",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            def fit_critic(critic, opt, pairs, epochs, batch_size=16):
                history = []
                for epoch in range(epochs):
                    running, seen = 0.0, 0
                    for batch in DataLoader(pairs, batch_size=batch_size, shuffle=True):
                        left = batch["left"].float()
                        if left.size(0) != batch_size:
                            continue
                        loss = F.mse_loss(critic(left), batch["score"])
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                        running += loss.item()
                        seen += 1
                    history.append(running / seen)
                return history
            """,
            title="a batch smaller than the batch size is skipped before anything is summed: every mean summed "
                  "is over the same number of samples, so their mean weighs every sample alike",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            def fit_critic(critic, opt, pairs, epochs, batch_size=16):
                history = []
                for epoch in range(epochs):
                    running, seen = 0.0, 0
                    for batch in DataLoader(pairs, batch_size=batch_size, shuffle=True):
                        left = batch["left"].float()
                        if left.size(0) < 2:
                            continue
                        loss = F.mse_loss(critic(left), batch["score"])
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                        running += loss.item()
                        seen += 1
                    history.append(running / seen)
                return history
            """,
            line=20,
            severity=Severity.INFO,
            title="only batches of one sample are skipped: a short last batch of 2 to 15 samples is still "
                  "summed as one mean among the full ones",
        ),
    )

    def check(self, ctx):
        flow = ctx.model(dataflow)
        divisions: dict[cst.CSTNode, _Divisions] = {}
        training_loops = {loop.node for loop in ctx.model(training_model).loops}
        for loop in ctx.index.loops:
            loader = loader_of_loop(flow, loop)
            if loader is None or _equal_batches(flow, loader):
                continue
            owner = flow._owner(loop)
            accumulators = _accumulators(flow, loop)
            if not accumulators:
                continue
            counts = _batch_counts(flow, loop, loader)
            if owner not in divisions:  # one walk per function, not one per loop in it
                divisions[owner] = _Divisions(flow, owner)
            end = flow.end(loop)
            if end < 0:
                continue
            for node in divisions[owner].after(end, accumulators):
                found = _division(flow, node, accumulators, counts)
                if found is not None and _rebound_after(flow, loop, node, found[0]):
                    continue  # the division reads a fresh value of the name, not the loop's sum
                if found is not None:
                    # reported once: a later loop's report of it would repeat it at the same place
                    divisions[owner].drop(node)
                    key, what = found
                    other = _other_split_loader(node, ctx.code_for(loader))
                    if other is not None:
                        yield self.report(
                            node,
                            f"`{ctx.code_for(node).strip()}` sums per-batch means ({what}) over the batches of "
                            f"`{ctx.code_for(loader)}` but divides by the number of batches of `{other}`, another "
                            "split: the average is off by the ratio of their lengths; divide by the batches "
                            "actually summed, or better sum per-sample values and divide by the number of samples",
                            evidence=self._evidence(ctx, flow, loop, loader, node, what),
                        )
                        continue
                    message = (
                        f"`{ctx.code_for(node).strip()}` averages per-batch means ({what}) over the number of "
                        f"batches of `{ctx.code_for(loader)}`: every batch weighs the same, so a short last "
                        "batch is overweighted; sum per-sample values (`loss.item() * len(y)` or "
                        "`reduction=\"sum\"`) and divide by the number of samples")
                    if loop in training_loops and not _counts_another_loader(node, loader):
                        # a logged training loss, not a metric a model is chosen by
                        yield self.report(node, f"a logged training-loss average, reported at info: {message}",
                                          severity=Severity.INFO,
                                          evidence=self._evidence(ctx, flow, loop, loader, node, what))
                    else:
                        yield self.report(node, message, evidence=self._evidence(ctx, flow, loop, loader, node, what))

        yield from _framework_epoch_logs(self, ctx, flow)

    @staticmethod
    def _evidence(ctx, flow, loop, loader, division, what) -> list:
        short = _short_batch_premise(ctx, flow, loader)
        return [loader_premise(ctx, loader, flow.scope_of(loop)),
                *([short] if short is not None else []),
                premise(f"the loop sums per-batch means ({what})", loop, "use"),
                premise("the sum is divided by a number of batches", division, "use")]


def _framework_epoch_logs(rule, ctx, flow):
    """A framework's per-step log reduced to an epoch mean weighted by a fixed number
    (`self.log("val_loss", loss, batch_size=self.hparams.batch_size)` in a LightningModule's
    `validation_step`): the mean of the steps' batch means, every batch weighing the same."""
    index = ctx.index
    for class_name, class_node in index.classes.items():
        bases = None
        for entry, owner, roots in frameworks.epoch_logs():
            if bases is None:
                bases = ancestors(index, class_node)
            derived = next((b for b in bases if b.rsplit(".", 1)[-1] == owner and b.split(".")[0] in roots), None)
            if derived is None:
                continue
            for function in index.functions:
                if function.class_name != class_name or frameworks.hook_kind(function.name) not in ("train", "eval"):
                    continue
                if _equal_batches_by_hook(flow, class_name, function.name):
                    continue
                for node in walk_expression(function.node.body):
                    found = _fixed_weight_log(ctx, flow, entry, function, node)
                    if found is None:
                        continue
                    weight, why_fixed, value, why_mean = found
                    message = (f"`self.{entry.attr}(..., {entry.weight}={code(ctx, weight)})` averages the steps' "
                               f"values over the epoch weighted by `{entry.weight}`, and {why_fixed}: every batch "
                               f"weighs the same, so a short last batch is overweighted; pass the batch's own size "
                               f"(`{entry.weight}=len(y)`) or leave it out for the framework to read it off the batch")
                    evidence = [premise(f"`{class_name}` derives from `{derived}`: the framework reduces "
                                        f"`self.{entry.attr}(..., on_epoch=True)` to a mean weighted by "
                                        f"`{entry.weight}`", class_node, "construction"),
                                premise(f"the weight is fixed: {why_fixed}", weight, "argument"),
                                premise(f"the logged value is {why_mean}", value, "use")]
                    several = _several_samples_premise(ctx, flow, weight, class_name, function.name)
                    if several is not None:
                        evidence.append(several)
                    if frameworks.hook_kind(function.name) == "train":
                        yield rule.report(node, f"a logged training-loss average, reported at info: {message}",
                                          severity=Severity.INFO, evidence=evidence)
                    else:
                        yield rule.report(node, message, evidence=evidence)


def _fixed_weight_log(ctx, flow, entry, function, node):
    """(weight, why it is fixed, value, why it is a batch mean) for `self.<log>(name, value, ...,
    <weight>=<a fixed number>)` reduced to an epoch mean, or None."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == entry.attr
            and isinstance(node.func.value, cst.Name) and node.func.value.value == "self"):
        return None
    if any(arg.star for arg in node.args):
        return None
    on_epoch = keyword_value(node, "on_epoch")
    if on_epoch is None:
        if function.name not in entry.epoch_hooks:
            return None
    elif not (isinstance(on_epoch, cst.Name) and on_epoch.value == "True"):
        return None
    reduce_fx = keyword_value(node, "reduce_fx")
    if reduce_fx is not None and not (isinstance(reduce_fx, cst.SimpleString)
                                      and reduce_fx.evaluated_value in ("mean", "avg")) \
            and flow.index.resolve(reduce_fx, flow.scope_of(reduce_fx)) != "torch.mean":
        return None
    weight = keyword_value(node, entry.weight)
    if weight is None:
        return None  # read off the batch
    why_fixed = _fixed_number(ctx, flow, weight, function, 0)
    if why_fixed is None:
        return None
    args = positional_args(node)
    if entry.values:  # `self.log_dict({"val_loss": loss, ...}, ...)`: each value of the dict is logged
        mapping = keyword_value(node, entry.values) or (args[0].value if args else None)
        candidates = _dict_values(flow, mapping)
    else:
        candidates = [keyword_value(node, "value") or (args[1].value if len(args) > 1 else None)]
    for value in candidates:
        why_mean = _batch_mean(flow, value, 0)
        if why_mean is not None:
            return weight, why_fixed, value, why_mean
    return None


def _dict_values(flow, mapping) -> list:
    """The values a dict literal holds, or the dict a name is bound to holds (and what is written
    into it by key), one step away."""
    if isinstance(mapping, cst.Dict):
        if any(not isinstance(e, cst.DictElement) for e in mapping.elements):
            return []  # `{**other, ...}`
        return [e.value for e in mapping.elements]
    if isinstance(mapping, cst.Name):
        return flow.container_values(mapping)
    return []


def _fixed_number(ctx, flow, expr, function, depth) -> str | None:
    """Why `expr` is the same number at every step, or None: a literal, a configuration value
    (`self.hparams.batch_size`, `args.batch_size`), an attribute of `self` only its constructor sets,
    or a name bound to one of these. What the step hook is handed (`batch.batch_size`, read off its
    `batch` parameter) is the step's own value, whatever it holds: not fixed."""
    if depth > 3:
        return None
    if isinstance(expr, cst.Integer):
        return f"`{expr.value}` is a fixed number"
    if isinstance(expr, cst.Name):
        binding = flow.reaching(expr)
        if binding is None:
            bindings = flow.scope_of(expr).lookup(expr.value)
            binding = bindings[0] if len(bindings) == 1 and bindings[0].kind == "assign" \
                and flow.index.scope_at(bindings[0].node) is flow.index.module_scope else None
        if binding is None or binding.kind != "assign" or binding.value is None:
            return None
        return _fixed_number(ctx, flow, binding.value, function, depth + 1)
    text = dotted_name(expr)
    if not isinstance(expr, cst.Attribute) or text is None:
        return None
    root, *attrs = text.split(".")
    if root == "self":
        if len(attrs) == 1:
            writers = [f for f in flow.index.functions if f.class_name == function.class_name
                       and f.name != "__init__" and _writes_self(f.node, attrs[0])]
            return None if writers else f"`{text}` is set once, in the constructor"
        return f"`{text}` is a configuration value, the same at every step"
    binding = flow.scope_of(expr).lookup(root)
    # a parameter of the step hook itself (`batch.batch_size` of the step's batch) is handed anew at
    # every step: what it holds is that step's, not a fixed number
    if binding and all(b.kind in ("assign", "import", "param") for b in binding) \
            and not any(b.kind in ("assign", "param") and flow.index.function_at(b.node) is function
                        for b in binding):
        return f"`{text}` is a configuration value, the same at every step"
    return None


def _writes_self(function: cst.FunctionDef, attr: str) -> bool:
    for node in walk(function.body):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
            [node.target] if isinstance(node, (cst.AugAssign, cst.AnnAssign)) else []
        if any(isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self"
               and t.attr.value == attr for t in targets):
            return True
    return False


_STEP_LOADERS = {"training_step": "train_dataloader", "validation_step": "val_dataloader",
                 "test_step": "test_dataloader"}


def _several_samples_premise(ctx, flow, weight, class_name: str, hook: str):
    """A weight of 1 states that each step is one sample: then no batch is short and the epoch mean
    is the per-sample mean. It is wrong only when the steps hold more than one sample: proven when
    the class's loader hook for the split builds its loader with another batch size, unknown (and
    required) when the loader feeding the step is not seen. None for another weight."""
    if not _literal_one(flow, weight, 0):
        return None
    method = flow.index.method(class_name, _STEP_LOADERS.get(hook, ""))
    for node in walk(method.node.body) if method is not None else ():
        if not (isinstance(node, cst.Return) and node.value is not None):
            continue
        call = loader_constructor(flow, node.value)
        if call is None:
            continue
        size = keyword_value(call, "batch_size")
        if size is None and len(positional_args(call)) >= 2:
            size = positional_args(call)[1].value
        if size is not None and not _literal_one(flow, size, 0):
            return premise(f"the steps hold more than one sample: the loader is built with "
                           f"`batch_size={code(ctx, size)}`", size, "argument")
    return unknown("the steps hold more than one sample: a weight of 1 is each step's own size when the loader "
                   "hands over one sample per step, and the loader feeding this step is not seen", weight, "argument")


def _literal_one(flow, expr, depth: int) -> bool:
    """`1`, or a name bound to it."""
    if isinstance(expr, cst.Integer):
        return expr.value == "1"
    if isinstance(expr, cst.Name) and depth < 3:
        binding = flow.reaching(expr)
        return binding is not None and binding.kind == "assign" and binding.value is not None and \
            _literal_one(flow, binding.value, depth + 1)
    return False


def _equal_batches_by_hook(flow, class_name: str, hook: str) -> bool:
    """The class's loader hook for the step's split returns a loader of equal batches
    (`drop_last=True`, `batch_size=1`)."""
    method = flow.index.method(class_name, _STEP_LOADERS.get(hook, ""))
    if method is None:
        return False
    return any(isinstance(node, cst.Return) and node.value is not None and _equal_batches(flow, node.value)
               for node in walk(method.node.body))


def _counts_another_loader(division: cst.CSTNode, loader: cst.BaseExpression) -> bool:
    """The divisor is the length of a loader other than the one averaged over
    (`total_loss / len(eval_dataloader)` after a loop over the training loader): a wrong number,
    not only an unequal weighting, so it is no mere log."""
    divisor = division.right if isinstance(division, cst.BinaryOperation) else None
    averaged = dotted_name(loader)
    return divisor is not None and any(
        isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "len" and n.args
        and dotted_name(n.args[0].value) not in (None, averaged) for n in walk(divisor))


_TRAIN_SPLIT = re.compile(r"train", re.I)
_EVAL_SPLIT = re.compile(r"eval|val|test|dev", re.I)


def _split(name: str) -> str | None:
    if _TRAIN_SPLIT.search(name):
        return None if _EVAL_SPLIT.search(name) else "train"
    return "eval" if _EVAL_SPLIT.search(name) else None


def _other_split_loader(node: cst.CSTNode, loader_text: str) -> str | None:
    """`eval_loss / len(train_dataloader)` for a sum over `eval_dataloader`: the divisor counts the
    batches of a loader of the other split (told by the names), whose text is returned."""
    divisor = node.right if isinstance(node, cst.BinaryOperation) else node.value if isinstance(node, cst.AugAssign) \
        else None
    if not (isinstance(divisor, cst.Call) and isinstance(divisor.func, cst.Name) and divisor.func.value == "len"
            and len(divisor.args) == 1):
        return None
    counted = dotted_name(divisor.args[0].value)
    if counted is None or counted == loader_text:
        return None
    here, there = _split(loader_text), _split(counted)
    return counted if here is not None and there is not None and here != there else None


def _equal_batches(flow, loader, depth: int = 0) -> bool:
    """The loader makes batches of one size: built with `drop_last=True` or `batch_size=1`, here or
    by a project function (in another file too, `drop_last` chosen there by a constant argument or
    left at a default parameter value), or with keyword arguments one returns; a loader parameter
    when every call of its function in the file passes such a loader."""
    call = loader_constructor(flow, loader)
    if call is not None:
        if equal_batch_arguments(call) or full_batches(flow, call):
            return True
        scope = flow.scope_of(call)
        drop = keyword_value(call, "drop_last")
        if drop is not None and _is_true(flow, drop, scope):
            return True
        return any(a.star == "**" and (isinstance(a.value, cst.Call) and _factory_equal_batches(flow, a.value, scope)
                                       or _dict_drops_last(flow, a.value, scope))
                   for a in call.args)
    if isinstance(loader, cst.Name) and depth < 3:
        binding = flow.reaching(loader)
        if binding is not None and binding.kind == "assign" and isinstance(binding.node, cst.Assign):
            # `train_loader, model, opt = accelerator.prepare(train_loader, model, opt)`: the prepared
            # loader keeps the batch size and `drop_last` of the one it wraps
            prepared = _unpacked_prepare_argument(binding.node, loader.value)
            if prepared is not None and flow.roles.of(binding.node.value.func.value, flow.scope_of(loader)) \
                    in (ACCELERATOR, None):
                return _equal_batches(flow, prepared, depth + 1)
        if binding is not None and binding.kind == "param":
            function = flow.index.function_at(binding.node)
            sites = flow.index.callers(function) if function is not None else []
            arguments = [flow.index.argument_for(site.node, function, loader.value) for site in sites]
            return bool(arguments) and all(a is not None and _equal_batches(flow, a, depth + 1) for a in arguments)
    if isinstance(loader, cst.Attribute) and isinstance(loader.value, cst.Name) and loader.value.value == "self":
        return _constructed_with_equal_batches(flow, loader)
    built = _built_by(flow, loader)
    return built is not None and _factory_equal_batches(flow, built, flow.scope_of(built))


def _constructed_with_equal_batches(flow, loader: cst.Attribute) -> bool:
    """`self.loader` set only from a parameter of the class's `__init__`
    (`self.loader = loader`), in a run over the whole project where every construction of the
    class, and of its subclasses in any file (none of which defines its own `__init__` or sets
    the attribute), passes a loader of equal batches for it (`InstanceBuild.equal_for`: built
    with `drop_last=True` or `batch_size=1`, there or by a project factory, through the names it
    is bound to). A construction whose instance is read only for attributes that cannot run the
    averaging method (`tester.test_cnn()` when the loop is in `test_rnn`: `_runners`) does not
    count, when the class has no subclass; at least one construction must count."""
    linker = flow.index.linker
    scope = flow.scope_of(loader)
    function = flow.index.function_at(loader)
    class_scope = scope.class_scope()
    if linker is None or function is None or class_scope is None or function.class_name != class_scope.name \
            or not linker.whole_project():
        return False
    attr = loader.attr.value
    values = flow.index.self_attribute_values(attr, scope)
    if len(values) != 1 or not isinstance(values[0], cst.Name):
        return False
    init = flow.index.function_at(values[0])
    if init is None or init.name != "__init__" or init.class_name != class_scope.name:
        return False
    bindings = init.scope.lookup(values[0].value)
    if len(bindings) != 1 or bindings[0].kind != "param":
        return False
    params = tuple(p.name.value for p in (*init.node.params.posonly_params, *init.node.params.params))[1:]
    found = linker.instance_builds(class_scope.name)
    if found is None:
        return False
    builds, subclasses = found
    if any(sub.defines_init or attr in sub.writes for _, sub in subclasses):
        return False
    runners = _runners(flow, class_scope.name, function.name) if not subclasses else None
    counted = [b for _, b in builds
               if runners is None or b.used_attrs is None or runners & set(b.used_attrs)]
    return bool(counted) and all(b.equal_for(params, values[0].value) for b in counted)


def _runners(flow, class_name: str, method: str) -> set[str]:
    """The methods of the class that can run `method` on an instance: itself and, through each
    other, those that call `self.<one of them>` or hand `self` on (a bare `self`)."""
    methods = [f for f in flow.index.functions if f.class_name == class_name]
    found = {method}
    changed = True
    while changed:
        changed = False
        for f in methods:
            if f.name in found:
                continue
            for node in walk(f.node.body):
                if isinstance(node, cst.Name) and node.value == "self":
                    parent = flow.index.parent(node)
                    if not (isinstance(parent, cst.Attribute) and parent.value is node) or parent.attr.value in found:
                        found.add(f.name)
                        changed = True
                        break
    return found


def _is_true(flow, expr, scope, depth: int = 0) -> bool:
    """`expr` is `True` one step away: a name bound once to it, or a parameter left at a default of
    `True` (or passed `True`) by every call of its function in the file."""
    if isinstance(expr, cst.Name) and expr.value == "True":
        return True
    if not isinstance(expr, cst.Name) or depth > 1:
        return False
    bindings = scope.lookup(expr.value)
    if len(bindings) != 1:
        return False
    binding = bindings[0]
    if binding.kind == "assign" and binding.value is not None:
        return _is_true(flow, binding.value, scope, depth + 1)
    if binding.kind != "param":
        return False
    function = flow.index.function_at(binding.node)
    param = binding.node if isinstance(binding.node, cst.Param) else None
    if function is None or param is None:
        return False
    passed = [flow.index.argument_for(site.node, function, expr.value) for site in flow.index.callers(function)]
    values = [value if value is not None else param.default for value in passed] or [param.default]
    return all(isinstance(value, cst.Name) and value.value == "True" for value in values)


def _dict_drops_last(flow, expr, scope) -> bool:
    """`**options` with `options = {"batch_size": 64, "drop_last": True}` (or `dict(drop_last=True)`)."""
    if not isinstance(expr, cst.Name):
        return False
    bindings = scope.lookup(expr.value)
    value = bindings[0].value if len(bindings) == 1 and bindings[0].kind == "assign" else None
    if isinstance(value, cst.Dict):
        return any(isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
                   and e.key.evaluated_value == "drop_last" and _is_true(flow, e.value, scope, 1)
                   for e in value.elements)
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
        drop = keyword_value(value, "drop_last")
        return drop is not None and _is_true(flow, drop, scope, 1)
    return False


def _built_by(flow, loader) -> cst.Call | None:
    """The call a loader variable was bound to, when there is one binding (`data, loader =
    get_data(flag="val")` too: the factory's summary says which element is the loader)."""
    if isinstance(loader, cst.Call):
        return loader
    if isinstance(loader, cst.Name):
        binding = flow.reaching(loader)
        value = binding.value if binding is not None else None
        if value is None and binding is not None and binding.kind == "assign" and isinstance(binding.node, cst.Assign) \
                and isinstance(binding.node.targets[0].target, cst.Tuple):
            value = binding.node.value
        return value if isinstance(value, cst.Call) else None
    return None


def _factory_equal_batches(flow, call: cst.Call, scope) -> bool:
    summary = _factory_summary(flow, call, scope)
    return isinstance(summary, FunctionSummary) and equal_batches_for(summary, call)


def _factory_summary(flow, call: cst.Call, scope):
    summary = flow.index.summary_of(call.func, scope, _LOADER_WORDS)
    if summary is None:
        method = flow.index.callee(call, scope)  # `self._get_data(flag="val")`
        linker = flow.index.linker
        if method is not None and linker is not None:
            summary = linker.own(flow.index).member([method.class_name, method.name] if method.class_name
                                                    else [method.name])
    return summary


def _short_batch_premise(ctx, flow, loader, depth: int = 0):
    """Whether the last batch can be short is unknown when the project function that built the
    loader picks `drop_last` by a configuration value (`if args.data == "m4": drop_last = False`,
    True otherwise): followed the way `_equal_batches` follows the loader."""
    if isinstance(loader, cst.Name) and depth < 3:
        binding = flow.reaching(loader)
        if binding is not None and binding.kind == "assign" and isinstance(binding.node, cst.Assign):
            prepared = _unpacked_prepare_argument(binding.node, loader.value)
            if prepared is not None:
                return _short_batch_premise(ctx, flow, prepared, depth + 1)
        if binding is not None and binding.kind == "param":
            # a loader parameter: unknown when every call of its function in the file passes a
            # loader of equal batches or one whose `drop_last` a configuration chooses, one at least
            function = flow.index.function_at(binding.node)
            sites = flow.index.callers(function) if function is not None else []
            arguments = [flow.index.argument_for(site.node, function, loader.value) for site in sites]
            if not arguments or any(a is None for a in arguments):
                return None
            found = None
            for argument in arguments:
                if _equal_batches(flow, argument, depth + 1):
                    continue
                short = _short_batch_premise(ctx, flow, argument, depth + 1)
                if short is None:
                    return None  # a caller passes a loader that can end with a short batch
                found = found or short
            return found
    built = _built_by(flow, loader)
    if built is None or loader_constructor(flow, loader) is not None:
        return None
    summary = _factory_summary(flow, built, flow.scope_of(built))
    if isinstance(summary, FunctionSummary) and summary.drop_last_chosen_by is not None:
        return unknown(f"`{code(ctx, loader)}` can end with a short batch: `{summary.name}` turns `drop_last` "
                       f"off only when `{summary.drop_last_chosen_by[:60]}`, a configuration this code does not "
                       "show", built, "argument")
    return None


def _accumulators(flow, loop) -> dict[str, str]:
    """Names bound before the loop that collect per-batch means inside it -> what they collect."""
    found: dict[str, str] = {}
    for node in flow.index.subtree(loop.body):
        kind = type(node)  # every node of the loop: `type(...) is` skips ABCMeta
        if kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda:
            continue
        target = value = None
        if kind is cst.AugAssign and isinstance(node.operator, cst.AddAssign):
            target, value = node.target, node.value
        elif kind is cst.Assign and len(node.targets) == 1 and isinstance(node.value, cst.BinaryOperation) \
                and isinstance(node.value.operator, cst.Add) \
                and dotted_name(node.value.left) == dotted_name(node.targets[0].target):
            target, value = node.targets[0].target, node.value.right
        elif kind is cst.Call and isinstance(node.func, cst.Attribute) and node.func.attr.value == "append" \
                and len(node.args) == 1:
            target, value = node.func.value, node.args[0].value
        key = dotted_name(target) if target is not None else None
        if key is None or not _bound_before(flow, key, loop):
            continue
        if _picked_by_position(flow.index, node, loop):
            continue  # `if i % 10 == 9:` around it: it collects some batches, not one per batch
        if _equal_sized_only(flow, node, loop):
            continue  # `if x.size(0) != batch_size: continue` before it: every batch it collects is as large
        what = _batch_mean(flow, value, 0)
        if what:
            found[key] = f"`{flow.ctx.code_for(value)}` is {what}"
    return found


def _picked_by_position(index, node, loop) -> bool:
    """`node` runs only on the iterations a test of the loop's position picks: an `if` around it
    (within `loop`), or an `if` before it whose body `continue`s or `break`s, tests the loop's
    counter (`for i, b in enumerate(loader)`: `i % 10 == 9`) or a counter the body steps
    (`step += 1`). What it collects is then a sample of the batches, one per picked iteration,
    and a mean over it divides by the number picked, not the loader's batches."""
    counters = set(first_values(index, loop)) | _stepped_counters(loop)
    if not counters:
        return False

    def positional(test) -> bool:
        return any(isinstance(n, cst.Name) and n.value in counters for n in walk(test))

    child = node
    for ancestor in index.ancestors(node):
        if ancestor is loop:
            return False
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(ancestor, cst.If) and ancestor.test is not child and positional(ancestor.test):
            return True
        if isinstance(ancestor, cst.IndentedBlock):
            for statement in ancestor.body:
                if statement is child:
                    break
                if isinstance(statement, cst.If) and positional(statement.test) and _leaves_iteration(statement):
                    return True
        child = ancestor
    return False


def _equal_sized_only(flow, node, loop) -> bool:
    """`node` runs only on iterations whose batch holds a number of samples fixed for the loop: an
    `if` around it (within `loop`) testing that the batch's first dimension (`x.size(0)`,
    `x.shape[0]`, `len(x)`, `x` read from the loop's target) equals a value the loop does not
    change (a literal, or a name or attribute no statement of the loop binds), `node` in its body
    (or in the `else:` of a `!=` test); or an `if x.size(0) != batch_size:` before it whose body
    ends by leaving the iteration (`continue`/`break`). Every batch it collects then has the same
    size: a mean of their means weighs every sample alike. A test that bounds the size only from
    one side (`if len(x) < 2: continue`), or compares it with something the loop changes, proves
    nothing."""
    child = node
    for ancestor in flow.index.ancestors(node):
        if ancestor is loop or isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(ancestor, cst.If) and ancestor.test is not child:
            operator = _fixed_size_test(flow, ancestor.test, loop)
            if operator is cst.Equal and ancestor.body is child \
                    or operator is cst.NotEqual and ancestor.orelse is child:
                return True
        if isinstance(ancestor, cst.IndentedBlock):
            for statement in ancestor.body:
                if statement is child:
                    break
                if isinstance(statement, cst.If) and statement.orelse is None \
                        and _fixed_size_test(flow, statement.test, loop) is cst.NotEqual \
                        and _ends_by_leaving(statement.body):
                    return True
        child = ancestor
    return False


def _ends_by_leaving(block) -> bool:
    """The block's last statement is a `continue` or `break` (it leaves the iteration whichever way it runs)."""
    statements = list(block.body) if isinstance(block, cst.IndentedBlock) else [block]
    if not statements:
        return False
    last = statements[-1]
    if isinstance(last, cst.SimpleStatementLine):
        return bool(last.body) and isinstance(last.body[-1], (cst.Continue, cst.Break))
    if isinstance(block, cst.SimpleStatementSuite):
        return bool(block.body) and isinstance(block.body[-1], (cst.Continue, cst.Break))
    return False


def _fixed_size_test(flow, test, loop):
    """`cst.Equal`/`cst.NotEqual` when `test` compares the batch's number of samples with a value
    fixed for the loop (either side), else None."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return None
    operator = type(test.comparisons[0].operator)
    if operator not in (cst.Equal, cst.NotEqual):
        return None
    left, right = test.left, test.comparisons[0].comparator
    for size, fixed in ((left, right), (right, left)):
        if _batch_length(flow, size, loop) and _fixed_in_loop(flow, fixed, loop):
            return operator
    return None


def _batch_length(flow, expr, loop) -> bool:
    """`x.size(0)`, `x.size()[0]`, `x.shape[0]` or `len(x)`, with `x` read from the loop's batch."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "len" \
            and len(expr.args) == 1 and not expr.args[0].star and flow.scope_of(expr).lookup("len") == []:
        return _from_batch(flow, expr.args[0].value, loop, 0)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "size" \
            and len(expr.args) == 1 and expr.args[0].keyword is None and not expr.args[0].star \
            and isinstance(expr.args[0].value, cst.Integer) and expr.args[0].value.value == "0":
        return _from_batch(flow, expr.func.value, loop, 0)
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 \
            and isinstance(expr.slice[0].slice, cst.Index) \
            and isinstance(expr.slice[0].slice.value, cst.Integer) and expr.slice[0].slice.value.value == "0":
        sized = expr.value
        if isinstance(sized, cst.Attribute) and sized.attr.value == "shape":
            return _from_batch(flow, sized.value, loop, 0)
        if isinstance(sized, cst.Call) and isinstance(sized.func, cst.Attribute) and sized.func.attr.value == "size" \
                and not sized.args:
            return _from_batch(flow, sized.func.value, loop, 0)
    return False


_MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "long", "int", "contiguous", "detach"})


def _from_batch(flow, expr, loop, depth: int) -> bool:
    """`expr` is (a part of) the batch the loop's target binds: the target's names (not an
    `enumerate` counter), an item or field of one, a copy moved to a device or dtype, or a name
    the loop body binds to such a value before reading it."""
    while True:
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Attribute):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _MOVES:
            expr = expr.func.value
        else:
            break
    if not isinstance(expr, cst.Name) or depth > 3:
        return False
    targets = {n.value for n in walk(loop.target) if isinstance(n, cst.Name)} - set(first_values(flow.index, loop))
    binding = flow.reaching(expr)
    if binding is None:
        return False
    if binding.kind == "for":
        return binding.node is loop and expr.value in targets
    value = flow.bound_value(binding)
    if binding.kind != "assign" or value is None or not flow.inside(binding.node, loop.body):
        return False
    return _from_batch(flow, value, loop, depth + 1)


def _fixed_in_loop(flow, expr, loop) -> bool:
    """A literal integer, or a name or attribute chain (`batch_size`, `args.batch_size`) whose names
    no statement of the loop binds or assigns: the same value on every iteration."""
    if isinstance(expr, cst.Integer):
        return True
    key = dotted_name(expr)
    if key is None:
        return False
    parts = key.split(".")
    written = set()
    for node in walk(loop):
        targets = []
        if isinstance(node, cst.AssignTarget):
            targets = [node.target]
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, (cst.For, cst.CompFor)):
            targets = [node.target]
        elif isinstance(node, (cst.WithItem,)) and node.asname is not None:
            targets = [node.asname.name]
        for target in targets:
            for part in walk(target):
                name = dotted_name(part)
                if name is not None:
                    written.add(name)
    prefixes = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return not (prefixes & written) and not _from_batch(flow, expr, loop, 0)


def _stepped_counters(loop) -> set[str]:
    """Names the loop body increases by a literal (`step += 1`): counters of its iterations."""
    return {node.target.value for node in walk(loop.body)
            if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign)
            and isinstance(node.target, cst.Name) and isinstance(node.value, cst.Integer)}


def _leaves_iteration(statement) -> bool:
    """A `continue` or `break` of the loop around `statement` inside it (not in a nested loop)."""
    def search(node) -> bool:
        if isinstance(node, (cst.Continue, cst.Break)):
            return True
        if isinstance(node, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        return any(search(child) for child in node.children)
    return any(search(child) for child in statement.body.children)


def _rebound_after(flow, loop, division, key: str) -> bool:
    """Every binding of the accumulator `key` that can reach its read in `division` is a plain
    assignment written after `loop` that does not read the name (`loss_seq = []` between a training
    loop and a test loop that divides its own list): the division averages something the loop did
    not sum. An attribute (`self.losses`), a read no binding is known to reach, or a rebinding that
    carries the sum (`losses = np.array(losses)`, `total += extra`) leaves the loop's sum reaching it."""
    if "." in key:
        return False
    end = flow.end(loop)
    reads = [n for n in walk_expression(division) if isinstance(n, cst.Name) and n.value == key
             and not (isinstance(flow.index.parent(n), cst.Attribute) and flow.index.parent(n).attr is n)]
    if not reads or end < 0:
        return False
    for read in reads:
        reaching = flow.index.reaching_bindings(read, key, flow.scope_of(read))
        if not reaching:
            return False
        for binding in reaching:
            if binding.kind != "assign" or binding.value is None or flow.position(binding.node) <= end \
                    or flow._owner(binding.node) is not flow._owner(loop) \
                    or any(isinstance(n, cst.Name) and n.value == key for n in walk_expression(binding.value)):
                return False
    return True


def _bound_before(flow, key, loop) -> bool:
    if "." in key:
        return key.startswith("self.")
    return any(b.kind != "for" and flow.before(b.node, loop) for b in flow.bindings_in_function(key, loop))


def _batch_mean(flow, expr, depth) -> str | None:
    """Why `expr` is a per-batch mean, or None."""
    if depth > 6 or expr is None:
        return None
    scope = flow.scope_of(expr)
    # unwrap `.item()`, `.detach()`, `float(...)`
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
                and expr.func.attr.value in _UNWRAP_METHODS and not expr.args:
            expr = expr.func.value
        elif isinstance(expr, cst.Call) and flow.index.resolve(expr.func, scope) in _UNWRAP_FUNCTIONS \
                and len(expr.args) == 1:
            expr = expr.args[0].value
        elif isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            expr = expr.value  # `loss.data`: the same tensor, out of the graph
        elif _first_element(expr):
            expr = expr.value  # `loss.data[0]`, `loss[0]`: a 0-dim/one-element loss read as a number (old torch)
        else:
            break
    if isinstance(expr, cst.Name):
        binding = flow.reaching(expr)
        if binding is None or binding.kind not in ("assign", "with") or binding.value is None:
            return None
        return _batch_mean(flow, binding.value, depth + 1)
    if isinstance(expr, cst.Attribute) and expr.attr.value == "loss":
        return "a model's mean loss"
    if isinstance(expr, cst.Subscript) and _subscript_key(expr) == "loss":
        return "a model's mean loss"
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Divide) and _is_batch_size(flow, expr.right):
            return "a per-batch ratio"
        if isinstance(expr.operator, (cst.Multiply,)):
            return None  # weighted by a size: a sum
        if isinstance(expr.operator, cst.Divide) and isinstance(expr.right, (cst.Integer, cst.Float, cst.Name)):
            return _batch_mean(flow, expr.left, depth + 1)  # loss / accumulation_steps
        return None
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value == "mean" and not _has_dim(expr):
        return "a batch mean"
    name = flow.index.resolve(func, scope) or ""
    if name == "torch.mean" and len(expr.args) == 1:
        return "a batch mean"
    reduction = keyword_value(expr, "reduction")
    if name.startswith("torch.nn.functional.") and name.rsplit(".", 1)[-1] in _MEAN_LOSSES:
        return "a mean-reduced loss" if _mean_reduction(reduction) else None
    if _criterion_reduction(flow, func, scope) is not None:
        return "a mean-reduced loss" if _criterion_reduction(flow, func, scope) else None
    summary = callable_summary(flow.index, func, scope, MEAN_WORDS)
    if summary is not None and summary.returns_mean:
        return f"a mean: `{summary.name}()` returns one"  # a Dice/IoU/RMSE helper of the project
    tail = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    if _CRITERION_NAME.match(tail) and _unknown_binding(flow, func, scope):
        return "a loss with the default mean reduction"
    return None


def _mean_reduction(reduction) -> bool:
    if reduction is None:
        return True
    return isinstance(reduction, cst.SimpleString) and reduction.evaluated_value in ("mean", "batchmean",
                                                                                     "elementwise_mean")


def _criterion_reduction(flow, func, scope) -> bool | None:
    """For `criterion = nn.XLoss(...)`: True when it reduces by mean, False otherwise, None unknown."""
    values: list = []
    if isinstance(func, cst.Name):
        values = [b.value for b in scope.lookup(func.value) if b.value is not None]
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        values = flow.index.self_attribute_values(func.attr.value, scope)
    for value in values:
        if isinstance(value, cst.Call):
            name = flow.index.resolve(value.func, flow.index.scope_at(value)) or ""
            if name.startswith("torch.nn.") and name.endswith("Loss"):
                return _mean_reduction(keyword_value(value, "reduction"))
    return None


def _unknown_binding(flow, func, scope) -> bool:
    """A criterion passed in or set elsewhere: its reduction is the default (mean) unless shown."""
    if isinstance(func, cst.Name):
        bindings = scope.lookup(func.value)
        return all(b.kind in ("param", "import") or b.value is None for b in bindings) if bindings else True
    return isinstance(func, cst.Attribute)


def _has_dim(call) -> bool:
    return bool(call.args)


def _subscript_key(expr: cst.Subscript) -> str | None:
    if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        value = expr.slice[0].slice.value
        if isinstance(value, cst.SimpleString):
            return value.evaluated_value
    return None


def _is_batch_size(flow, expr) -> bool:
    """`len(y)`, `y.size(0)`, `y.shape[0]`, `y.numel()`, `batch_size`."""
    if isinstance(expr, cst.Call):
        if flow.index.resolve(expr.func, flow.scope_of(expr)) == "len":
            return True
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("size", "numel"):
            args = positional_args(expr)
            return not args or (isinstance(args[0].value, cst.Integer) and args[0].value.value == "0")
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape":
        return True
    if isinstance(expr, cst.Name):
        return _BATCH_SIZE_NAME.match(expr.value) is not None
    return False


def _batch_counts(flow, loop, loader) -> dict:
    """What counts the batches of `loop`: enumerate indexes, `+= 1` counters, `len(loader)` names."""
    counters: set[str] = set()
    index_names: set[str] = set()
    if isinstance(loop.iter, cst.Call) and flow.index.resolve(loop.iter.func, flow.scope_of(loop)) == "enumerate" \
            and isinstance(loop.target, (cst.Tuple, cst.List)) and loop.target.elements \
            and isinstance(loop.target.elements[0].value, cst.Name):
        index_names.add(loop.target.elements[0].value.value)
    for node in flow.index.subtree(loop.body):
        if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign) \
                and isinstance(node.value, cst.Integer) and node.value.value == "1":
            key = dotted_name(node.target)
            if key is not None and _bound_before(flow, key, loop):
                counters.add(key)
    return {"loader": dotted_name(loader), "counters": counters, "indexes": index_names}


def _is_batch_count(flow, expr, counts, list_key=None) -> bool:
    while isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add) \
            and isinstance(expr.right, cst.Integer):
        expr = expr.left
    key = dotted_name(expr)
    if key is not None and (key in counts["counters"] or key in counts["indexes"]):
        return True
    if isinstance(expr, cst.Call) and flow.index.resolve(expr.func, flow.scope_of(expr)) == "len" \
            and len(expr.args) == 1:
        arg = expr.args[0].value
        arg_key = dotted_name(arg)
        if arg_key is not None and (arg_key == counts["loader"] or arg_key == list_key):
            return True
        return flow.is_loader(arg, flow.scope_of(expr))
    if isinstance(expr, cst.Name):
        binding = flow.reaching(expr)
        if binding is not None and binding.kind == "assign" and binding.value is not None \
                and binding.value is not expr:
            return _is_batch_count(flow, binding.value, counts, list_key)
    return False


def _accumulated(expr, accumulators) -> str | None:
    """The accumulator an expression reads (`total`, `total.item()`, `float(total)`, `sum(losses)`)."""
    for node in walk_expression(expr):
        key = dotted_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if key in accumulators:
            return key
    return None


def _divisions_by_name(index, owner) -> dict[str, list[tuple[int, cst.CSTNode]]]:
    """The nodes of `owner` that `_division` may match, by the names they would divide, each
    with its place in walk order."""
    found: dict[str, list[tuple[int, cst.CSTNode]]] = {}
    for order, node in enumerate(index.subtree(owner.body if isinstance(owner, cst.FunctionDef) else owner)):
        kind = type(node)  # every node of the function: `type(...) is` on LibCST's concrete classes
        if kind is cst.BinaryOperation and type(node.operator) is cst.Divide:
            keys = {dotted_name(n) for n in walk_expression(node.left) if isinstance(n, (cst.Name, cst.Attribute))}
        elif kind is cst.AugAssign and type(node.operator) is cst.DivideAssign:
            keys = {dotted_name(node.target)}
        elif kind is cst.Call and len(node.args) == 1:
            keys = {dotted_name(node.args[0].value)}
        elif kind is cst.Call and not node.args and isinstance(node.func, cst.Attribute) \
                and isinstance(node.func.value, cst.Call) and len(node.func.value.args) == 1:
            keys = {dotted_name(node.func.value.args[0].value)}
        else:
            continue
        for key in keys - {None}:
            found.setdefault(key, []).append((order, node))
    return found


_STACKING = ("torch.tensor", "torch.stack", "torch.as_tensor", "numpy.array", "numpy.asarray")


class _Divisions:
    """The nodes of a function (or the module) that `_division` may match, by the names they
    would divide (`_divisions_by_name`), in source order; a node drops out once reported. A loop
    reads the ones after it without passing over those before it or those already reported: a
    script of N loops summing into `losses` would otherwise read N divisions after each loop."""

    def __init__(self, flow, owner) -> None:
        self.positions: dict[str, list[int]] = {}
        self.nodes: dict[str, list[cst.CSTNode]] = {}
        self.places: dict[cst.CSTNode, list[tuple[str, int]]] = {}
        # per name, the next place not dropped at or after each place (path-compressed)
        self.next: dict[str, list[int]] = {}
        for key, entries in _divisions_by_name(flow.index, owner).items():
            entries = [entry for entry in entries if _may_divide(flow, entry[1])]
            self.positions[key] = [flow.position(node) for _, node in entries]
            self.nodes[key] = [node for _, node in entries]
            self.next[key] = list(range(len(entries) + 1))
            for place, (_, node) in enumerate(entries):
                self.places.setdefault(node, []).append((key, place))

    def _first(self, key: str, place: int) -> int:
        following = self.next[key]
        root = place
        while following[root] != root:
            root = following[root]
        while following[place] != root:
            following[place], place = root, following[place]
        return root

    def after(self, end: int, keys) -> Iterator[cst.CSTNode]:
        """The nodes of any of `keys` that start after position `end`, in source order, once each."""
        streams = []
        for key in keys:
            if key in self.positions:
                streams.append(self._stream(key, bisect.bisect_right(self.positions[key], end)))
        seen: set = set()
        for _, _, node in heapq.merge(*streams, key=lambda entry: entry[:2]):
            if node not in seen:
                seen.add(node)
                yield node

    def _stream(self, key: str, place: int):
        nodes, positions = self.nodes[key], self.positions[key]
        place = self._first(key, place)
        while place < len(nodes):
            yield positions[place], id(nodes[place]), nodes[place]
            place = self._first(key, place + 1)

    def drop(self, node: cst.CSTNode) -> None:
        for key, place in self.places.get(node, ()):
            self.next[key][place] = place + 1


def _may_divide(flow, node) -> bool:
    """What `_division` asks of a call whatever the loop: a mean function (`statistics.mean(xs)`,
    `torch.stack(xs).mean()`); `len(xs)` and `xs.append(x)` never are one."""
    if isinstance(node, cst.Call) and len(node.args) == 1:
        return flow.index.resolve(node.func, flow.scope_of(node)) in _MEAN_FUNCTIONS
    if isinstance(node, cst.Call) and not node.args:
        inner = node.func.value if isinstance(node.func, cst.Attribute) and node.func.attr.value == "mean" else None
        return isinstance(inner, cst.Call) and len(inner.args) == 1 and \
            (flow.index.resolve(inner.func, flow.scope_of(inner)) or "") in _STACKING
    return True


def _division(flow, node, accumulators, counts):
    """(accumulator, reason) when `node` divides a per-batch-mean accumulator by a batch count."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        key = _accumulated(node.left, accumulators)
        if key is not None and _is_batch_count(flow, node.right, counts, key):
            return key, accumulators[key]
    elif isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.DivideAssign):
        key = dotted_name(node.target)
        if key in accumulators and _is_batch_count(flow, node.value, counts, key):
            return key, accumulators[key]
    elif isinstance(node, cst.Call) and len(node.args) == 1:
        scope = flow.scope_of(node)
        name = flow.index.resolve(node.func, scope)
        arg = dotted_name(node.args[0].value)
        if name in _MEAN_FUNCTIONS and arg in accumulators:
            return arg, accumulators[arg]
    elif isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute) \
            and node.func.attr.value == "mean":
        inner = node.func.value
        if isinstance(inner, cst.Call) and len(inner.args) == 1 and \
                (flow.index.resolve(inner.func, flow.scope_of(inner)) or "") in _STACKING:
            arg = dotted_name(inner.args[0].value)
            if arg in accumulators:
                return arg, accumulators[arg]
    return None


def _first_element(expr: cst.BaseExpression) -> bool:
    """`x[0]`: how a one-element loss tensor was read as a number before `.item()`."""
    return isinstance(expr, cst.Subscript) and len(expr.slice) == 1 \
        and isinstance(expr.slice[0].slice, cst.Index) and isinstance(expr.slice[0].slice.value, cst.Integer) \
        and expr.slice[0].slice.value.value == "0"
