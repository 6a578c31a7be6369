"""How a check scales with file size: generated training files of growing size, each timed against
LibCST's bare parse of the same text in the same process (every ratio should stay flat).

    python scripts/scaling.py                                   # every shape, 1k to 200k lines
    python scripts/scaling.py --shapes functions --lines 2000 8000
    python scripts/scaling.py --profile functions --lines 8000  # cProfile of one check

A file is one of several shapes of realistic training code, repeated until it has the asked number
of lines:
- `functions`: many small functions, each training (AMP, accumulation, clipping), evaluating,
  saving a checkpoint and resuming from one (the shape of issue 23's TL402 report);
- `script`: one long top-level script doing all of that at module level;
- `resume`: one long script that restores a checkpoint at each of its rounds;
- `class`: one Trainer class with many methods reading the same attributes;
- `chain`: a deep chain of helpers, each calling the previous one, with a save helper and a
  training step reached through the whole chain;
- `mixed`: the shapes issue 11 found super-linear (accumulating AMP functions, top-level loops,
  small Trainer classes), `training_file(size)`, sized in characters.

For each shape and size the whole check (`lint_source`, its own parse included) and each part of
it are timed in CPU seconds and divided by LibCST's bare parse of the text: the file's index, each
model (the first time a rule asks for it, without the models it asks for in turn) and each rule
(without the models). The last column is how much a ratio grew from the smallest size to the
largest; none should pass 2. Parts below 0.2 % of the parse at the largest size are left out of
that verdict (timer noise). Sizes up to 20k lines take the fastest of three checks, larger ones
one (`--runs N` to change that); each check is timed between two parses and the fastest parse
is the unit (a parse slowed down by the host would flatter the ratio). The garbage collector is
paused for the parse as the check pauses it for itself. `tests/test_size_guard.py` checks memory
on the `mixed` shape; time is only measured here, never asserted.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections import defaultdict

_FUNCTION = '''
def train_{i}(model, loader, opt, sched, scaler, accum=4):
    model.train()
    total = 0.0
    for step, batch in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(**batch).loss / accum
        scaler.scale(loss).backward()
        total = total + loss.item()
        if (step + 1) % accum == 0:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            sched.step()
            opt.zero_grad(set_to_none=True)
    model.eval()
    with torch.no_grad():
        for batch in loader:
            out = model(**batch)
    torch.save(model.state_dict(), "ckpt_{i}.pt")
    return total
'''

_TOP_LEVEL_LOOP = '''
for i{i}, batch in enumerate(loader):
    with torch.autocast("cuda"):
        loss = model(batch).mean() / 4
    scaler.scale(loss).backward()
    running = running + loss
    if (i{i} + 1) % 4 == 0:
        scaler.step(opt)
        scaler.update()
        sched.step()
        opt.zero_grad()
'''

_CLASS = '''
class Trainer{i}:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        self.losses = []

    def train_epoch(self):
        for batch in self.loader:
            loss = self.model(batch)
            loss.backward()
            self.opt.step()
            self.opt.zero_grad()
            self.losses.append(loss.item())
'''

_HEADER = '''import torch

model = torch.nn.Linear(2, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, 10)
scaler = torch.amp.GradScaler()
running = 0.0
'''

# -- the shapes sized in lines ---------------------------------------------------------------------

_IMPORTS = '''import os
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
'''

_FUNCTIONS_HEADER = _IMPORTS + '''

def build(args):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.1), torch.nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps)
    scaler = torch.cuda.amp.GradScaler()
    return model, opt, sched, scaler
'''

_FUNCTIONS_PIECE = '''

def train_{i}(model, loader, opt, sched, scaler, args, accum=4):
    model.train()
    total = 0.0
    hidden = None
    for step, (x, y) in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            out = model(x)
            loss = F.cross_entropy(out, y)
        scaler.scale(loss).backward()
        total += loss
        if (step + 1) % accum == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
        sched.step()
    torch.save(model.state_dict(), os.path.join(args.out, "model_{i}.pt"))
    return total


def evaluate_{i}(model, data, args):
    loader = DataLoader(data, batch_size=32, shuffle=True, drop_last=True)
    accuracies = []
    with torch.no_grad():
        for x, y in loader:
            pred = model(x).argmax(-1)
            accuracies.append((pred == y).float().mean())
    return sum(accuracies) / len(accuracies)


def save_checkpoint_{i}(model, opt, sched, epoch, args):
    state = {{"model": model.state_dict(), "optimizer": opt.state_dict(),
             "scheduler": sched.state_dict(), "epoch": epoch}}
    torch.save(state, os.path.join(args.out, "last.pt"))


def resume_{i}(model, opt, args):
    checkpoint = torch.load(os.path.join(args.out, "last.pt"), weights_only=False)
    model.load_state_dict(checkpoint["model"])
    return checkpoint["epoch"]
'''

_SCRIPT_HEADER = _IMPORTS + '''
from config import args, dataset, eval_set

random.seed(args.seed)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10)
scaler = torch.amp.GradScaler()
loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
eval_loader = DataLoader(eval_set, batch_size=64, shuffle=True)
accum = args.accum
start = 0
if os.path.exists(args.resume):
    state = torch.load(args.resume)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    start = state["epoch"]
'''

_SCRIPT_PIECE = '''
# stage {i}
model.train()
epoch_loss = 0.0
for step, (x, y) in enumerate(loader):
    with torch.autocast("cuda"):
        loss = F.mse_loss(model(x), y) / accum
    scaler.scale(loss).backward(retain_graph=True)
    epoch_loss += loss
    if (step + 1) % accum == 0:
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        sched.step()
model.eval()
batch_means = []
with torch.no_grad():
    for x, y in eval_loader:
        batch_means.append(F.mse_loss(model(x), y))
print("stage {i}", sum(batch_means) / len(batch_means))
features = model[0].weight[:4]
torch.save(features, "features_{i}.pt")
torch.save({{"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": {i}}},
           os.path.join(args.out, "checkpoint.pth"))
'''

_CLASS_HEADER = _IMPORTS + '''

class Trainer:
    def __init__(self, model, data, args):
        self.model = model
        self.args = args
        self.loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)
        self.opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=args.epochs)
        self.scaler = torch.cuda.amp.GradScaler()
        self.accum = args.accum
        self.history = []
'''

_CLASS_PIECE = '''
    def train_epoch_{i}(self):
        self.model.train()
        for step, batch in enumerate(self.loader):
            with torch.autocast("cuda"):
                loss = self.model(**batch).loss
            self.scaler.scale(loss).backward()
            self.history.append(loss)
            if (step + 1) % self.accum == 0:
                self.scaler.step(self.opt)
                self.scaler.update()
                self.opt.zero_grad()
            self.sched.step()

    def validate_{i}(self, loader: DataLoader):
        self.model.eval()
        losses = []
        for batch in loader:
            losses.append(self.model(**batch).loss.mean())
        return sum(losses) / len(losses)

    def save_{i}(self, path):
        torch.save({{"model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                    "step": {i}}}, path)

    def load_{i}(self, path):
        state = torch.load(path)
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
'''

_CLASS_FOOTER = '''

def main(args, data):
    trainer = Trainer(torch.nn.Linear(8, 2), data, args)
    trainer.load_0(args.resume)
    for epoch in range(args.epochs):
        trainer.train_epoch_0()
        trainer.save_0(os.path.join(args.out, "last.pt"))
'''

_CHAIN_HEADER = _IMPORTS + '''

def write_0(state, path):
    torch.save(state, path)


def forward_0(model, batch):
    return model(batch["x"]).mean()
'''

_CHAIN_PIECE = '''

def write_{i}(state, path):
    write_{p}(state, path)


def forward_{i}(model, batch):
    return forward_{p}(model, batch)


def stage_{i}(model, opt: torch.optim.Optimizer, sched: torch.optim.lr_scheduler.LRScheduler, loader, out):
    for step, batch in enumerate(loader):
        loss = forward_{i}(model, batch) / 4
        loss.backward()
        if (step + 1) % 4 == 0:
            opt.step()
            opt.zero_grad()
        sched.step()
    write_{i}({{"model": model.state_dict(), "optimizer": opt.state_dict()}}, out + "/last.pt")
'''

# a script that restores from a checkpoint at every round (fine-tuning rounds, evaluation sweeps)
_RESUME_PIECE = '''
# round {i}
state = torch.load(os.path.join(args.out, "round_{p}.pth"))
sd = state["model"]
model.load_state_dict(sd)
opt.load_state_dict(state.get("optimizer"))
for step, (x, y) in enumerate(loader):
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    sched.step()
torch.save({{"model": model.state_dict(), "optimizer": opt.state_dict()}}, os.path.join(args.out, "round_{i}.pth"))
'''

SHAPES = {
    "functions": (_FUNCTIONS_HEADER, _FUNCTIONS_PIECE, ""),
    "script": (_SCRIPT_HEADER, _SCRIPT_PIECE, ""),
    "resume": (_SCRIPT_HEADER, _RESUME_PIECE, ""),
    "class": (_CLASS_HEADER, _CLASS_PIECE, _CLASS_FOOTER),
    "chain": (_CHAIN_HEADER, _CHAIN_PIECE, ""),
}


def training_file(size: int) -> str:
    """Training code of about `size` characters (at least one of each shape of issue 11)."""
    parts = [_HEADER]
    length, i = len(_HEADER), 0
    while length < size or i < 1:
        for template in (_FUNCTION, _TOP_LEVEL_LOOP, _CLASS):
            part = template.format(i=i)
            parts.append(part)
            length += len(part)
        i += 1
    return "".join(parts)


def generated_file(shape: str, lines: int) -> str:
    """Training code of the given shape with about `lines` lines (at least one piece)."""
    if shape == "mixed":
        return training_file(lines * 30)
    header, piece, footer = SHAPES[shape]
    parts = [header]
    count, i = header.count("\n") + footer.count("\n"), 1
    while count < lines or i == 1:
        part = piece.format(i=i, p=i - 1)
        parts.append(part)
        count += part.count("\n")
        i += 1
    parts.append(footer)
    return "".join(parts)


# -- timing the parts of a check -------------------------------------------------------------------

class Timings:
    """CPU seconds spent in each timed part, exclusive of the timed parts it calls."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)
        self._stack: list[list] = []  # [name, start, time spent in nested parts]

    def run(self, name: str, function, *args):
        self._stack.append([name, time.process_time(), 0.0])
        try:
            return function(*args)
        finally:
            _, start, nested = self._stack.pop()
            elapsed = time.process_time() - start
            self.spent[name] += elapsed - nested
            if self._stack:
                self._stack[-1][2] += elapsed


def instrument(timings: Timings) -> None:
    """Time the index, each model's build and each rule's check (consumed whole) from now on."""
    from trainlint import context
    from trainlint.rules import registry

    index_class = context.FileIndex
    context.FileIndex = lambda module: timings.run("index", index_class, module)
    model = context.FileContext.model

    def timed_model(self, build):
        if build in self._models:
            return self._models[build]
        name = f"model {build.__module__.rsplit('.', 1)[-1]}.{build.__name__}"
        return timings.run(name, model, self, build)

    context.FileContext.model = timed_model
    for code, rule_cls in registry().items():
        def timed_check(self, ctx, _check=rule_cls.check, _code=code):
            return iter(timings.run(_code, lambda: list(_check(self, ctx))))
        rule_cls.check = timed_check


def measure(source: str, settings, timings: Timings, runs: int) -> tuple[float, float, dict[str, float], int]:
    """(parse seconds, check seconds, seconds per part, findings) for one source: the fastest of
    `runs` parses and of `runs` checks (with that check's parts), which takes most of the noise of
    a shared machine out of the small sizes."""
    import libcst

    from trainlint.engine import lint_source

    def parse_time() -> float:
        gc.collect()
        gc.disable()
        try:
            start = time.process_time()
            libcst.parse_module(source)
            return time.process_time() - start
        finally:
            gc.enable()

    parse = check = float("inf")
    parts: dict[str, float] = {}
    for _ in range(runs):
        parse = min(parse, parse_time())
        gc.collect()
        timings.spent.clear()
        start = time.process_time()
        result = lint_source(source, "generated.py", settings)
        elapsed = time.process_time() - start
        if result.errors:
            raise SystemExit("\n".join(result.errors))
        if elapsed < check:
            check, parts = elapsed, dict(timings.spent)
    # one parse more than checks, each check between two: a parse slowed down by the host is not the unit
    parse = min(parse, parse_time())
    return parse, check, parts, len(result.findings)


def report(shape: str, rows: list[tuple[int, float, float, dict[str, float], int]]) -> float:
    """Print one shape's table; returns the largest growth of a ratio over the sizes."""
    parts = sorted({name for *_, spent, _ in rows for name in spent})
    print(f"\n{shape}: lines {' '.join(f'{lines:>8}' for lines, *_ in rows)}   growth")
    print(f"{'parse s':>28} {' '.join(f'{parse:>8.2f}' for _, parse, *_ in rows)}")
    print(f"{'findings':>28} {' '.join(f'{found:>8}' for *_, found in rows)}")
    worst = 0.0

    def line(name: str, ratios: list[float], counted: bool) -> None:
        nonlocal worst
        growth = ratios[-1] / ratios[0] if ratios[0] > 0 else float("inf")
        if counted:
            worst = max(worst, growth)
        mark = f"{growth:>8.2f}" if counted else f"{'(noise)':>8}"
        print(f"{name:>28} {' '.join(f'{r:>8.4f}' for r in ratios)} {mark}", flush=True)

    line("whole check / parse", [check / parse for _, parse, check, *_ in rows], True)
    for name in parts:
        ratios = [spent.get(name, 0.0) / parse for _, parse, _, spent, _ in rows]
        line(name, ratios, ratios[-1] >= 0.002 and len(rows) > 1)
    return worst


def main() -> None:
    from trainlint.engine import lint_source
    from trainlint.settings import Settings, resolve_selection

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="+", choices=[*SHAPES, "mixed"], default=[*SHAPES])
    parser.add_argument("--lines", type=int, nargs="+", default=[1_000, 10_000, 50_000, 200_000])
    parser.add_argument("--select", nargs="+", default=["ALL"], metavar="CODE",
                        help="rules to run (codes or prefixes; default ALL)")
    parser.add_argument("--runs", type=int, metavar="N",
                        help="checks per size, the fastest kept (default: 3 up to 20k lines, else 1)")
    parser.add_argument("--profile", metavar="SHAPE", choices=[*SHAPES, "mixed"],
                        help="print a cProfile of one check of SHAPE at the first --lines size")
    args = parser.parse_args()
    settings = Settings(select=resolve_selection(args.select, [], []))
    for shape in SHAPES:  # every module and rule imported, every model built once
        lint_source(generated_file(shape, 1), "warm.py", settings)
    if args.profile:
        import cProfile
        import pstats

        source = generated_file(args.profile, args.lines[0])
        with cProfile.Profile() as profile:
            lint_source(source, "generated.py", settings)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
        return
    timings = Timings()
    instrument(timings)
    worst = {}
    for shape in args.shapes:
        rows = []
        for lines in sorted(args.lines):
            source = generated_file(shape, lines)
            runs = args.runs or (1 if lines > 20_000 else 3)  # a large file: once (minutes, gigabytes)
            rows.append((source.count("\n"), *measure(source, settings, timings, runs)))
        worst[shape] = report(shape, rows)
    print("\nlargest growth of a ratio: " + ", ".join(f"{shape} {growth:.2f}" for shape, growth in worst.items()))


if __name__ == "__main__":
    main()
