"""The linker's text filters decide which files are parsed when it looks for the callers of a
function; they must never drop a file that may hold such a call (trainlint/model/linker.py)."""

from __future__ import annotations

import pytest

from trainlint.engine import lint_paths
from trainlint.model.linker import _may_call_another
from trainlint.settings import Settings, resolve_selection

OWN = "def f(x):\n    return x\n\n\ndef g():\n    return f(1)\n"


@pytest.mark.parametrize(("text", "may"), [
    (OWN, False),  # only its own module-level f, called plainly
    (OWN.replace("return f(1)", "return tools.f(1)"), True),  # an attribute call may be anyone's
    ("from tools import f\n" + OWN, True),
    ("from tools import (\n    g,\n    f,\n)\n" + OWN, True),
    ("from tools import \\\n    f\n" + OWN, True),
    ("def g():\n    from tools import f\n    return f(1)\n\n\ndef f():\n    pass\n", True),
    ("class C:\n    def f(self):\n        pass\n\n\nf(1)\n", True),  # no module-level def: imported
    ("f(1)\n", True),
])
def test_a_file_may_call_another_files_function(text, may):
    assert _may_call_another(text, "f") is may


def test_callers_in_other_files_are_still_found_beside_files_with_their_own_namesake(tmp_path):
    """evaluate() of helpers.py is called under no_grad in train.py; other.py has its own evaluate
    (skipped by the filter): the evaluation is still known to run with grad off (no TL301)."""
    (tmp_path / "helpers.py").write_text(
        "import torch\n\n\ndef evaluate(model, loader):\n    model.eval()\n"
        "    return sum(model(x).sum() for x, _ in loader)\n")
    (tmp_path / "other.py").write_text("def evaluate(x):\n    return x\n\n\nprint(evaluate(1))\n")
    (tmp_path / "train.py").write_text(
        "import torch\nimport helpers\n\n\ndef run(model, loader):\n    with torch.no_grad():\n"
        "        return helpers.evaluate(model, loader)\n")
    settings = Settings(select=resolve_selection(["TL301"], [], []))
    results = list(lint_paths(sorted(str(p) for p in tmp_path.glob("*.py")), settings))
    assert [f for r in results for f in r.findings if f.code == "TL301"] == []
    (tmp_path / "train.py").write_text(
        "import torch\nimport helpers\n\n\ndef run(model, loader):\n    return helpers.evaluate(model, loader)\n")
    results = list(lint_paths(sorted(str(p) for p in tmp_path.glob("*.py")), settings))
    assert [f.code for r in results for f in r.findings] == ["TL301"]


HELPER = ("import torch\n\n\ndef evaluate(model, loader, **options):\n    model.eval()\n"
          "    return sum(model(x).sum() for x, _ in loader)\n")


@pytest.mark.parametrize(("calls", "fires"), [
    # the one call spreads keyword arguments: it is still a call, under no_grad
    (["    with torch.no_grad():\n        return evaluate(model, loader, **options)\n"], False),
    (["    with torch.no_grad():\n        return evaluate(*args)\n"], False),
    # a spread call with grad on beside a plain one under no_grad: grad is on for one of them
    (["    with torch.no_grad():\n        evaluate(model, loader)\n", "    return evaluate(model, loader, **options)\n"],
     True),
    (["    return evaluate(model, loader, **options)\n"], True),
])
def test_a_call_spreading_its_arguments_tells_its_grad_mode(tmp_path, calls, fires):
    """Calls that spread `*args`/`**kwargs` cannot be matched to parameters, but they still run
    with grad on or off: evaluate() of helpers.py runs without grad only if every call of it does."""
    (tmp_path / "helpers.py").write_text(HELPER)
    body = "".join(f"def run{n}(model, loader, args, options):\n{call}\n\n" for n, call in enumerate(calls))
    (tmp_path / "train.py").write_text(f"import torch\nfrom helpers import evaluate\n\n\n{body}")
    settings = Settings(select=resolve_selection(["TL301"], [], []))
    results = list(lint_paths(sorted(str(p) for p in tmp_path.glob("*.py")), settings))
    assert [f.code for r in results for f in r.findings] == (["TL301"] if fires else [])


TRAIN = """import torch

from steps import backward_step


def train(model, loader, accum):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for i, batch in enumerate(loader):
        optimizer.zero_grad()
        backward_step(model, batch, accum)
        if (i + 1) % accum == 0:
            optimizer.step()
"""


@pytest.mark.parametrize(("backward", "fires"), [
    ("loss.backward()", True),
    ("accelerator.backward(loss)", True),
    ("loss.\\\n        backward()", True),  # a line continuation inside the call
    ("(loss\n     .backward())", True),
    ("loss . backward ( )", True),
    # the file speaks of a backward in a comment only: its helper runs none, no update is split
    ("loss.detach()  # no backward here", False),
])
def test_a_helper_in_another_file_runs_a_backward_however_it_is_spelled(tmp_path, backward, fires):
    """TL104: the caller clears gradients on every micro-batch of an update whose backward runs in
    steps.py; the linker reads steps.py only when its text may call a backward method."""
    (tmp_path / "steps.py").write_text(
        "def backward_step(model, batch, accum, accelerator=None):\n"
        f"    loss = model(batch) / accum\n    {backward}\n    return loss\n")
    (tmp_path / "train.py").write_text(TRAIN)
    settings = Settings(select=resolve_selection(["TL104"], [], []))
    results = list(lint_paths(sorted(str(p) for p in tmp_path.glob("*.py")), settings))
    assert [f.code for r in results for f in r.findings] == (["TL104"] if fires else [])
