"""TL402's severity policy (issue 35, item 6): a warning only for a save that rewrites in place a
path something reads back; every other non-atomic save at info. Each case is a twin of the other."""

from __future__ import annotations

import pytest

from trainlint.engine import lint_source
from trainlint.finding import Severity
from trainlint.settings import Settings, resolve_selection

TL402 = Settings(select=resolve_selection(["TL402"], [], []))

SAVE = '''import json
import os
import torch

def save(model, optimizer, out):
    path = os.path.join(out, "last.pt")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
'''


def _one(source: str):
    [finding] = [f for f in lint_source(source, "train.py", TL402).findings]
    return finding


@pytest.mark.parametrize("reader, kind", [
    ('    os.symlink(path, os.path.join(out, "latest"))\n', "marker"),
    ('    with open(os.path.join(out, "latest.json"), "w") as f:\n        json.dump({"latest": path}, f)\n', "marker"),
    ('\ndef resume(model, out):\n    model.load_state_dict(torch.load(os.path.join(out, "last.pt"), weights_only=True))\n',
     "load"),
])
def test_a_fixed_path_read_back_is_a_warning(reader, kind):
    finding = _one(SAVE + reader)
    assert finding.severity is Severity.WARNING and finding.line == 7
    read = finding.evidence[-1]
    assert read.verdict == "proven" and read.line == 7
    assert ("reads this path back" if kind == "load" else "marker") in read.premise


def test_the_same_save_not_read_back_is_info():
    finding = _one(SAVE)
    assert finding.severity is Severity.INFO
    assert finding.message.endswith("(reported at info: nothing in this file reads this path back)")
    assert "nothing in this file reads this path back" in finding.evidence[-1].premise


def test_a_unique_path_is_info_even_when_a_load_reads_some_path():
    source = SAVE.replace('"last.pt"', 'f"step_{step}.pt"').replace("out):", "out, step):") + \
        '\ndef resume(model, path):\n    model.load_state_dict(torch.load(path, weights_only=True))\n'
    assert _one(source).severity is Severity.INFO


def test_two_functions_path_parameters_are_not_the_same_path():
    source = ('import torch\n\ndef save(model, path):\n    torch.save({"model": model.state_dict()}, path)\n\n'
              'def load(model, path):\n    model.load_state_dict(torch.load(path, weights_only=True))\n')
    assert _one(source).severity is Severity.INFO


def test_a_load_of_another_string_does_not_count():
    source = SAVE + '\ndef load_pretrained(model):\n    model.load_state_dict(torch.load("pretrained.pt", weights_only=True))\n'
    assert _one(source).severity is Severity.INFO
