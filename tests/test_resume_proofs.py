"""TL404's premise that a checkpoint is read back to resume training, proven from the code (a load
of the same file, of the keys it writes, a restored counter), never from a path's name."""

from __future__ import annotations

import textwrap

import pytest

from trainlint.engine import lint_paths
from trainlint.settings import Settings, resolve_selection

SAVER = """
import os

import torch


def save_model(args, model, optimizer):
    out = os.path.join(args.model_path, "checkpoint_{}.tar".format(args.current_epoch))
    torch.save(model.state_dict(), out)
"""
MAIN = """
import os

import torch
from model import save_model


def main(args, model, loader):
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    if args.reload:
        {load}
    for epoch in range(args.start_epoch, args.epochs):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        args.current_epoch = epoch
        save_model(args, model, optimizer)
"""


def _check(tmp_path, files: dict[str, str], checked: str, include_unproven: bool = False):
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    settings = Settings(select=resolve_selection(["TL404"], [], []), include_unproven=include_unproven)
    # the whole project is checked, as `trainlint .` does: a file's callers are among the checked files
    results = {r.path: r for r in lint_paths([str(tmp_path / name) for name in sorted(files)], settings)}
    result = results[str(tmp_path / checked)]
    assert result.errors == []
    return result.findings


@pytest.mark.parametrize("load,expected", [
    # the script that calls the saving helper loads the file name it writes: a resume
    ('model.load_state_dict(torch.load(os.path.join(args.model_path, "checkpoint_{}.tar".format(args.epoch_num))))',
     [9]),
    # it loads another file (pretrained weights): nothing reads the helper's file back
    ('model.load_state_dict(torch.load(os.path.join(args.model_path, "backbone.tar")))', []),
])
def test_a_weights_file_is_a_resume_point_only_when_a_load_of_the_project_reads_it_back(tmp_path, load, expected):
    findings = _check(tmp_path, {"model.py": SAVER, "main.py": MAIN.format(load=load)}, "model.py")
    assert [f.line for f in findings] == expected
    if expected:
        assert any(e.verdict == "proven" and "loads `checkpoint_{}.tar`" in e.premise for e in findings[0].evidence)


def test_the_unproven_read_back_is_reported_only_on_request_saying_so(tmp_path):
    files = {"model.py": SAVER, "main.py": MAIN.format(load="pass")}
    assert _check(tmp_path, files, "model.py") == []
    [finding] = _check(tmp_path, files, "model.py", include_unproven=True)
    assert finding.message.startswith("unproven (a resume reads this file back: only its name says so")


PRETRAINED = """
import torch


def main(args, model, loader):
    checkpoint = torch.load(args.checkpoint, map_location="cpu")
    state_dict = checkpoint["model"]
    model.load_state_dict(state_dict, strict=False)
    {counter}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for epoch in range(start_epoch, args.epochs):
        for x, y in loader:
            loss = model(x, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        torch.save({{"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}},
                   f"{{args.output_dir}}/checkpoint_{{epoch:02d}}.pth")
"""


@pytest.mark.parametrize("counter,expected", [
    # a fine-tuning start from a pretrained file: the epoch is only printed
    ('start_epoch = 0; print("pretrained for", checkpoint["epoch"], "epochs")', []),
    # the run's counter is taken back: it continues where the checkpoint stopped
    ('start_epoch = checkpoint["epoch"] + 1', [6]),
])
def test_a_load_is_a_resume_when_it_keeps_the_checkpoints_counter_not_by_its_paths_name(tmp_path, counter, expected):
    findings = _check(tmp_path, {"train.py": PRETRAINED.format(counter=counter)}, "train.py")
    assert [f.line for f in findings] == expected
    if expected:
        assert any(e.verdict == "proven" and "restores the run's counter" in e.premise for e in findings[0].evidence)


RUNNER = """
import os

import torch


class Runner:
    def __init__(self, net, lr, milestones):
        self.net = net
        self.opt = torch.optim.Adam(net.parameters(), lr=lr)
        self.decay = torch.optim.lr_scheduler.MultiStepLR(self.opt, milestones)

    def save(self, folder, epoch):
        torch.save({"epoch": epoch, "net": self.net.state_dict()}, os.path.join(folder, "net", "last.pt"))
        torch.save({"epoch": epoch, "opt": self.opt.state_dict()}, os.path.join(folder, "opt", "last.pt"))
{decay}

    def load(self, folder):
        self.net.load_state_dict(torch.load(os.path.join(folder, "net", "last.pt"))["net"])
        self.opt.load_state_dict(torch.load(os.path.join(folder, "opt", "last.pt"))["opt"])
{load_decay}
"""


@pytest.mark.parametrize("decay,load_decay,expected", [
    # each object in a file of its own, each stamped with the epoch: together they hold everything
    ('        torch.save({"epoch": epoch, "decay": self.decay.state_dict()}, os.path.join(folder, "d", "last.pt"))',
     '        self.decay.load_state_dict(torch.load(os.path.join(folder, "d", "last.pt"))["decay"])', []),
    # the look-alike: the shared epoch does not hide that no file holds the scheduler
    ('', '', [14, 15]),
])
def test_files_of_one_checkpoint_may_each_carry_the_step_counter(tmp_path, decay, load_decay, expected):
    # `load` reads the files back: a resume reads this checkpoint
    runner = RUNNER.replace("{decay}", decay).replace("{load_decay}", load_decay)
    findings = _check(tmp_path, {"runner.py": runner}, "runner.py")
    assert [f.line for f in findings] == expected
    assert all("`self.decay`" in f.message for f in findings)
