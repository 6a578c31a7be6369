"""An update split across methods and files (issue 36, item 2): the clip and `scaler.step` of an
updater whose scaled backward runs in its callers, checked with and without its project."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst

from trainlint.context import FileContext
from trainlint.engine import lint_path
from trainlint.model.amp import amp_model
from trainlint.reader.project import Project
from trainlint.settings import Settings, resolve_selection

TL201 = Settings(select=resolve_selection(["TL201"], [], []))

UPDATER = '''
    import torch


    class Updater:
        def __init__(self, model):
            self.model = model
            self.optimizer = torch.optim.AdamW(model.parameters())

        def step(self, scaler: torch.amp.GradScaler):
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            scaler.step(self.optimizer)
            scaler.update()
            self.optimizer.zero_grad()
'''

ENGINE = '''
    import torch

    from pkg.updater import Updater


    def train(model, loader):
        updater = Updater(model)
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = torch.nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            updater.step(scaler)
'''


def write(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    for name, text in files.items():
        (root / "pkg" / name).write_text(textwrap.dedent(text))


def codes(root: Path, name: str, project: bool = True) -> list[tuple[int, str]]:
    result = lint_path(str(root / "pkg" / name), TL201, project=Project(root) if project else None)
    assert result.errors == []
    return [(f.line, f.code) for f in result.findings]


def test_the_callers_scaled_backward_reaches_the_updaters_clip(tmp_path):
    write(tmp_path, {"updater.py": UPDATER, "engine.py": ENGINE})
    assert codes(tmp_path, "updater.py") == [(11, "TL201")]


def test_checked_alone_the_callers_are_unknown(tmp_path):
    write(tmp_path, {"updater.py": UPDATER, "engine.py": ENGINE})
    assert codes(tmp_path, "updater.py", project=False) == []


def test_a_caller_that_unscales_first_keeps_it_quiet(tmp_path):
    engine = ENGINE.replace("            updater.step(scaler)",
                            "            scaler.unscale_(updater.optimizer)\n            updater.step(scaler)")
    write(tmp_path, {"updater.py": UPDATER, "engine.py": engine})
    assert codes(tmp_path, "updater.py") == []


def test_no_scaled_loss_in_the_project_keeps_it_quiet(tmp_path):
    engine = ENGINE.replace("scaler.scale(loss).backward()", "loss.backward()")
    write(tmp_path, {"updater.py": UPDATER, "engine.py": engine})
    assert codes(tmp_path, "updater.py") == []


def test_a_helper_of_a_same_file_update_is_no_update_of_its_own(tmp_path):
    """`train_step` runs the scaled backward and calls `optimizer_step`: the helper's clip belongs
    to that update (one finding), and the helper is no update end of its own."""
    write(tmp_path, {"trainer.py": TRAINER})
    assert codes(tmp_path, "trainer.py") == [(12, "TL201")]
    path = tmp_path / "pkg" / "trainer.py"
    source = path.read_text()
    ctx = FileContext(str(path), source, cst.parse_module(source), (2, 6), project=Project(tmp_path))
    units = ctx.model(amp_model).units
    assert [unit.node.name.value for unit in units] == ["train_step"]
    assert not any(unit.scaled_in for unit in units)


TRAINER = """
        import torch


        class Trainer:
            def __init__(self, model):
                self.model = model
                self.optimizer = torch.optim.AdamW(model.parameters())
                self.scaler = torch.amp.GradScaler("cuda")

            def optimizer_step(self):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.scaler.step(self.optimizer)
                self.scaler.update()
                self.optimizer.zero_grad()

            def train_step(self, batch):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = self.model(batch)
                self.scaler.scale(loss).backward()
                self.optimizer_step()
"""
