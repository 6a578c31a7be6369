"""How a check scales with file size: generated training files of growing size, each timed against
LibCST's bare parse of the same text in the same process (the ratio should stay flat).

    python scripts/scaling.py                       # 64 KB, 256 KB, 1 MB
    python scripts/scaling.py --sizes 100000 5000000

The files are realistic training code of several shapes repeated (functions with an accumulating
AMP loop and an evaluation, top-level loops, a Trainer class with running sums), the shapes issue
11 found super-linear. `tests/test_size_guard.py` checks memory on such a file; time is only
measured here, never asserted.
"""

from __future__ import annotations

import argparse
import time

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


def training_file(size: int) -> str:
    """Training code of about `size` characters (at least one of each shape)."""
    parts = [_HEADER]
    length, i = len(_HEADER), 0
    while length < size or i < 1:
        for template in (_FUNCTION, _TOP_LEVEL_LOOP, _CLASS):
            part = template.format(i=i)
            parts.append(part)
            length += len(part)
        i += 1
    return "".join(parts)


def main() -> None:
    import libcst

    from trainlint.engine import lint_source
    from trainlint.settings import Settings, resolve_selection

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64_000, 256_000, 1_000_000])
    args = parser.parse_args()
    settings = Settings(select=resolve_selection(["ALL"], [], []))
    lint_source(training_file(1), "warm.py", settings)
    print(f"{'bytes':>10} {'parse s':>8} {'check s':>8} {'ratio':>6} {'check s/MB':>10}")
    for size in args.sizes:
        source = training_file(size)
        start = time.process_time()
        libcst.parse_module(source)
        parse = time.process_time() - start
        start = time.process_time()
        lint_source(source, "generated.py", settings)
        check = time.process_time() - start
        print(f"{len(source):>10} {parse:>8.2f} {check:>8.2f} {check / parse:>6.2f} {check / len(source) * 1e6:>10.2f}")


if __name__ == "__main__":
    main()
