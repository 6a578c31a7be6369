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


# -- a backward run by a function of another file (round 9) ------------------------------------------
def _lint(root: Path, name: str, code: str, **options) -> list[tuple[int, str]]:
    settings = Settings(select=resolve_selection([code], [], []), **options)
    result = lint_path(str(root / "pkg" / name), settings, project=Project(root))
    assert result.errors == []
    return [(f.line, f.code) for f in result.findings]


PASS = '''
    def run_pass(net, crit, xb, yb):
        err = crit(net(xb), yb)
        err.backward()
        return err
'''

LOOP = '''
    import torch

    from pkg.passes import run_pass


    def fit(net, crit, batches):
        opt = torch.optim.Adam(net.parameters())
        for xb, yb in batches:
            opt.zero_grad()
            run_pass(net, crit, xb, yb)
            torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)
            opt.step()
'''


def test_a_clip_after_a_helper_that_runs_the_backward_is_before_the_step(tmp_path):
    """`run_pass` (another file) runs the backward and steps nothing: the clip after it and before
    `opt.step()` is in order."""
    write(tmp_path, {"passes.py": PASS, "loop.py": LOOP})
    assert _lint(tmp_path, "loop.py", "TL203") == []


def test_a_clip_after_the_step_still_fires_after_a_backward_helper(tmp_path):
    loop = LOOP.replace("            torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)\n            opt.step()",
                        "            opt.step()\n            torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)")
    write(tmp_path, {"passes.py": PASS, "loop.py": loop})
    assert _lint(tmp_path, "loop.py", "TL203") == [(13, "TL203")]


RUNNER = '''
    import torch


    def run(net, opt, batches, window):
        for t, (a, b) in enumerate(batches):
            err = torch.nn.functional.cross_entropy(net(a), b)
            err.backward()
            if (t + 1) % window == 0:
                opt.step()
                opt.zero_grad()
'''


def test_k_that_every_call_in_the_project_binds_to_one_accumulates_nothing(tmp_path):
    main = "from pkg.runner import run\n\n\ndef main(net, opt, batches):\n    run(net, opt, batches, window=1)\n"
    write(tmp_path, {"runner.py": RUNNER, "main.py": main})
    assert _lint(tmp_path, "runner.py", "TL102") == []


def test_k_that_another_files_call_sets_to_four_accumulates(tmp_path):
    main = "from pkg.runner import run\n\n\ndef main(net, opt, batches):\n    run(net, opt, batches, window=4)\n"
    write(tmp_path, {"runner.py": RUNNER, "main.py": main})
    assert _lint(tmp_path, "runner.py", "TL102") == [(8, "TL102")]


def test_k_handed_on_as_a_value_in_another_file_is_not_known(tmp_path):
    main = ("from pkg.runner import run\n\n\ndef main(net, opt, batches, spawn):\n"
            "    run(net, opt, batches, window=1)\n    spawn(run, (net, opt, batches, 8))\n")
    write(tmp_path, {"runner.py": RUNNER, "main.py": main})
    assert _lint(tmp_path, "runner.py", "TL102") == [(8, "TL102")]


CONFIGURED = '''
    import torch

    precision = "bf16"
    exec(open("overrides.py").read())
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")
    for xb, yb in batches:
        err = torch.nn.functional.l1_loss(net(xb), yb)
        scaler.scale(err).backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 2.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
'''


def test_a_scaler_off_unless_a_configurator_rebinds_the_setting_is_unproven(tmp_path):
    """`exec(...)` may set `precision` to "fp16": the scaler being on is unknown, so the finding
    needs --include-unproven, and then holds only under that condition."""
    write(tmp_path, {"script.py": CONFIGURED})
    assert _lint(tmp_path, "script.py", "TL201") == []
    assert _lint(tmp_path, "script.py", "TL201", include_unproven=True) == [(10, "TL201")]
    without = CONFIGURED.replace('    exec(open("overrides.py").read())\n', "")
    (tmp_path / "pkg" / "script.py").write_text(textwrap.dedent(without))
    assert _lint(tmp_path, "script.py", "TL201", include_unproven=True) == []
