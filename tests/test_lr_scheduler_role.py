"""An LR scheduler is known by what it is, not by a class name ending in `Scheduler`: a library class
of that name that is handed no optimizer (diffusers' noise schedulers) is none (TL404)."""

from __future__ import annotations

import textwrap

from trainlint.engine import lint_source
from trainlint.settings import Settings, resolve_selection

TL404 = Settings(select=resolve_selection(["TL404"], [], []))

_TRAIN = """
import torch
from {module} import {cls}


def train(model, loader, epochs):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    schedule = {build}
    for epoch in range(epochs):
        for x in loader:
            loss = model(x, schedule).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        torch.save({{"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}},
                   "last.pt")


def resume(model, optimizer):
    ckpt = torch.load("last.pt", map_location="cpu")
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    start_epoch = ckpt["epoch"] + 1
    return start_epoch
"""


def _findings(module: str, cls: str, build: str):
    source = textwrap.dedent(_TRAIN.format(module=module, cls=cls, build=build))
    return [f.message for f in lint_source(source, "train.py", TL404).findings]


def test_a_noise_scheduler_handed_no_optimizer_is_no_lr_scheduler():
    assert _findings("diffusers", "DDPMScheduler", "DDPMScheduler(num_train_timesteps=1000)") == []


def test_a_library_scheduler_that_drives_the_optimizer_is_left_out_of_the_checkpoint():
    found = _findings("warmup_lib", "WarmupCosineScheduler", "WarmupCosineScheduler(optimizer, warmup=100)")
    assert len(found) == 1 and "LR scheduler state (`schedule`)" in found[0]


def test_a_torch_lr_scheduler_is_one_whatever_its_arguments():
    found = _findings("torch.optim.lr_scheduler", "StepLR", "StepLR(optimizer, step_size=10)")
    assert len(found) == 1 and "LR scheduler state (`schedule`)" in found[0]
