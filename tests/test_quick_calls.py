"""trainlint/model/quick_calls.py proves a method call runs with grad on only where the LibCST
summary of the file says so (`_Summariser.method_calls`: grad_off False, no receiver classes),
and the linker's Python-parse shortcuts never change an answer."""

from __future__ import annotations

import pytest

from trainlint.model.linker import summaries_of
from trainlint.model.quick_calls import grad_on_calls
from trainlint.reader.project import Project


def _summary_callers(tmp_path, text: str, name: str = "evaluate") -> list:
    path = tmp_path / "mod.py"
    path.write_text(text)
    project = Project.for_paths([str(path)])
    summary = summaries_of(project).file_summary(project.paths[0])
    return [use for use in summary.method_calls_of(name)]


@pytest.mark.parametrize(("text", "proven"), [
    # plain calls in a function body, receivers that are parameters or not names
    ("def run(self):\n    self.evaluate()\n", ["run"]),
    ("def run(model):\n    model.evaluate()\n", ["run"]),
    ("def run(x):\n    x.net.evaluate()\n", ["run"]),
    ("build().evaluate()\n", [None]),
    # a `with` around it, a decorator, a grad switch in the file: not proven
    ("import torch\n\ndef run(model):\n    with torch.no_grad():\n        model.evaluate()\n", []),
    ("def run(model):\n    with open('f') as f:\n        model.evaluate()\n", []),
    ("import torch\n\n@torch.no_grad()\ndef run(model):\n    model.evaluate()\n", []),
    ("import torch\n\ndef run(model):\n    model.evaluate()\n\ntorch.set_grad_enabled(False)\n", []),
    # the only caller of its function runs it under no_grad (same file): not proven
    ("import torch\n\ndef run(model):\n    model.evaluate()\n\n\ndef main(m):\n    with torch.no_grad():\n"
     "        run(m)\n", []),
    # a caller with grad on: proven
    ("def run(model):\n    model.evaluate()\n\n\ndef main(m):\n    run(m)\n", ["run"]),
    # a local name bound to a construction (the summary may know its class), a lambda, a class body
    ("def run():\n    model = Net()\n    model.evaluate()\n", []),
    ("f = lambda model: model.evaluate()\n", []),
    ("class A:\n    x.evaluate()\n", []),
    # a decorator's or a default's call is not in the function's body
    ("@x.evaluate()\ndef run(model):\n    pass\n", []),
    ("def run(model=x.evaluate()):\n    pass\n", []),
])
def test_proven_calls_are_grad_on_calls_of_the_summary(tmp_path, text, proven):
    quick = grad_on_calls(text, "mod.py")
    assert quick.callers("evaluate") == proven
    uses = _summary_callers(tmp_path, text)
    for caller in proven:
        assert any(u.caller == caller and not u.grad_off and u.receiver_classes == () for u in uses)


def test_identifiers_hold_what_a_load_resolves_through():
    assert "load" in grad_on_calls("from torch import load as read\nread('a.pt')\n", "m.py").identifiers
    assert "load" in grad_on_calls("import torch\ntorch.load('a.pt')\n", "m.py").identifiers
    assert "load" not in grad_on_calls("# load a.pt\nx = 'load'\n", "m.py").identifiers


def test_files_loading_skips_files_that_spell_no_load_only(tmp_path):
    (tmp_path / "train.py").write_text("import torch\nimport evaluate\n\ntorch.save({}, 'best.pt')\n")
    (tmp_path / "evaluate.py").write_text("import torch\n\nstate = torch.load('best.pt')\n")
    (tmp_path / "notes.py").write_text("import train\n# reads best.pt later\nNAME = 'best.pt'\n")
    project = Project.for_paths(sorted(str(p) for p in tmp_path.glob("*.py")))
    from trainlint.model.linker import Linker

    linker = Linker(project, str(tmp_path / "train.py"))
    assert linker.files_loading(("best.pt",)) == [("evaluate.py", "best.pt")]
