"""The project index: its root, how imports resolve to project files, what each file's summary
says, and that the checked project is read, never imported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from trainlint.engine import lint_path, lint_paths, lint_source
from trainlint.model.index import FileIndex
from trainlint.model.linker import summaries_of
from trainlint.reader.project import Project, find_root, imported_names
from trainlint.model.roles import CONFIG, MODEL, OPTIMIZER, OTHER, SCHEDULER
from trainlint.model.summaries import COUNTER, POSITION, summarise
from trainlint.settings import Settings, resolve_selection

ALL = Settings(select=resolve_selection(["ALL"], [], []))
PROJECTS = Path(__file__).parent / "fixtures" / "projects"


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def summary_of(source: str):
    return summarise(FileIndex(cst.parse_module(textwrap.dedent(source))))


# -- root and resolution ------------------------------------------------------------------------------
def test_root_is_the_nearest_configuration_folder_else_the_common_folder(tmp_path):
    write(tmp_path, {"repo/pyproject.toml": "", "repo/pkg/a.py": "", "repo/pkg/sub/b.py": "",
                     "loose/x/c.py": "", "loose/y/d.py": ""})
    assert find_root([tmp_path / "repo/pkg/a.py", tmp_path / "repo/pkg/sub/b.py"]) == (tmp_path / "repo").resolve()
    # no marker anywhere up to the filesystem root: the paths' common folder
    loose = [tmp_path / "loose/x/c.py", tmp_path / "loose/y/d.py"]
    found = find_root(loose)
    assert found == (tmp_path / "loose").resolve() or (found / ".git").exists() or any(
        (found / marker).exists() for marker in ("pyproject.toml", "setup.cfg", "setup.py", "trainlint.toml"))


def test_imports_resolve_to_project_files(tmp_path):
    write(tmp_path, {
        "pyproject.toml": "",
        "src/pkg/__init__.py": "from .helpers import save_checkpoint\n",
        "src/pkg/helpers.py": "def save_checkpoint(state, path): ...\n",
        "src/pkg/train/loop.py": "",
        "scripts/run.py": "",
        "scripts/local_util.py": "def f(): ...\n",
    })
    project = Project(tmp_path)
    loop = str(tmp_path / "src/pkg/train/loop.py")
    run = str(tmp_path / "scripts/run.py")
    root = tmp_path.resolve()
    # absolute from a src/ layout, with the attribute that is left
    assert project.find_module("pkg.helpers.save_checkpoint", loop) == (root / "src/pkg/helpers.py", ["save_checkpoint"])
    # relative
    assert project.find_module("..helpers.save_checkpoint", loop) == (root / "src/pkg/helpers.py", ["save_checkpoint"])
    assert project.find_module("..", loop) == (root / "src/pkg/__init__.py", [])
    # a script's own folder (sys.path[0])
    assert project.find_module("local_util.f", run) == (root / "scripts/local_util.py", ["f"])
    # not the project's
    assert project.find_module("torch.nn.functional", run) is None
    # a re-export through a package __init__ reaches the definition
    assert summaries_of(project).lookup("pkg.save_checkpoint", run).name == "save_checkpoint"


def test_imported_names_from_text():
    source = "import os, torch.nn as nn\nfrom . import engine, utils as u\nfrom ..utils.ckpt import (save,\n  load)\n"
    assert imported_names(source) == ["os", "torch.nn", ".", ".engine", ".utils", "..utils.ckpt",
                                      "..utils.ckpt.save"]


def test_the_checked_project_is_never_imported(tmp_path):
    """A module whose import would write a marker file: checking the project that imports it (with a
    warm and a cold cache, in this process and through the CLI) never writes the marker."""
    marker = tmp_path / "IMPORTED"
    write(tmp_path, {
        "pyproject.toml": "",
        "side_effect.py": f"""
            from pathlib import Path
            Path({str(marker)!r}).write_text("imported")

            import torch

            def smart_inference_mode():
                return torch.no_grad()
            """,
        "train.py": """
            import side_effect
            from side_effect import smart_inference_mode

            @smart_inference_mode()
            def evaluate(model, loader):
                model.eval()
                return [model(x).argmax(-1) for x, _ in loader]
            """,
    })
    results = list(lint_paths([str(tmp_path / "train.py")], ALL))
    assert results[0].findings == [] and results[0].errors == []  # the decorator was read, not run
    subprocess.run([sys.executable, "-m", "trainlint", "check", "--select", "ALL", str(tmp_path)],
                   capture_output=True, cwd=tmp_path, check=False)
    assert not marker.exists()
    assert "side_effect" not in sys.modules


# -- summaries -----------------------------------------------------------------------------------------
def test_no_grad_helpers_in_their_usual_shapes():
    summary = summary_of("""
        import contextlib
        import functools
        import torch

        def smart_inference_mode(torch_1_9=True):
            def decorate(fn):
                return (torch.inference_mode if torch_1_9 else torch.no_grad)()(fn)
            return decorate

        def torch_no_grad_eval(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                with torch.no_grad():
                    return fn(*args, **kwargs)
            return wrapper

        def no_grad_ctx(inference=False):
            return torch.inference_mode() if inference else torch.no_grad()

        @contextlib.contextmanager
        def evaluating(model):
            was = model.training
            model.eval()
            with torch.no_grad():
                yield model
            model.train(was)

        @torch.no_grad()
        def predict(model, x):
            return model(x)

        def timed(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                return fn(*args, **kwargs)
            return wrapper

        def maybe(flag):
            return torch.no_grad() if flag else contextlib.nullcontext()
        """)
    functions = summary.functions
    for name in ("smart_inference_mode", "torch_no_grad_eval", "no_grad_ctx", "evaluating"):
        assert functions[name].grad_off, name
    assert functions["predict"].body_grad_off and functions["predict"].detached.whole
    assert not functions["timed"].grad_off
    assert not functions["maybe"].grad_off  # off only on one branch
    assert functions["evaluating"].mode_effect("model") == ("eval", "restore")


def test_mode_effects_detached_results_saves_and_factories():
    summary = summary_of("""
        import os
        import torch
        from torch.optim.lr_scheduler import LambdaLR

        def evaluate(model, loader):
            model.eval()
            return sum(model(x).sum().item() for x in loader)

        def evaluate_and_restore(model, loader):
            model.eval()
            out = [model(x).detach() for x in loader]
            model.train()
            return out

        def loss_and_parts(pred, target):
            box = (pred - target).abs().mean()
            cls = pred.sigmoid().mean()
            return box + cls, torch.stack((box, cls)).detach()

        def losses(pred, target):
            loss = (pred - target).pow(2).mean()
            return {"loss": loss, "mse": loss.item()}

        def save_checkpoint(state, path):
            tmp = path + ".tmp"
            torch.save(state, tmp)
            os.replace(tmp, path)

        def save_weights(model, path):
            torch.save({"model": model.state_dict()}, path)

        def build_optimizer(model, lr):
            return torch.optim.AdamW(model.parameters(), lr=lr)

        def build_schedule(optimizer, total):
            return LambdaLR(optimizer, lambda step: 1 - step / total)
        """)
    f = summary.functions
    assert f["evaluate"].mode_effect("model") == ("eval", "eval")
    assert f["evaluate_and_restore"].mode_effect("model") == ("eval", "train")
    assert f["loss_and_parts"].detached.positions == frozenset({1})
    assert f["losses"].detached.keys == frozenset({"mse"})
    assert f["save_checkpoint"].saves == (("state", True),)
    assert f["save_weights"].saves == (("model", False),)
    assert f["build_optimizer"].returns == OPTIMIZER
    assert f["build_schedule"].returns == SCHEDULER


def test_classes_play_the_role_their_step_shows():
    summary = summary_of("""
        import torch
        import torch.nn as nn

        class NoamOpt:
            "steps the optimizer and sets its learning rate: an optimizer, whatever it is called"
            def __init__(self, optimizer, warmup):
                self.optimizer = optimizer
                self.warmup = warmup
                self._step = 0

            def step(self):
                self._step += 1
                for p in self.optimizer.param_groups:
                    p["lr"] = self._step ** -0.5
                self.optimizer.step()

        class WarmupLR:
            def __init__(self, optimizer, warmup):
                self.optimizer = optimizer
                self.warmup = warmup
                self.n = 0

            def step(self):
                self.n += 1
                for group in self.optimizer.param_groups:
                    group["lr"] = min(1.0, self.n / self.warmup) * group["initial_lr"]

        class GradualWarmupScheduler(torch.optim.lr_scheduler._LRScheduler):
            pass

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)

        class AverageMeter:
            def __init__(self):
                self.sum = 0

            def update(self, value):
                self.sum += value

        class Environment:
            def step(self, action):
                return action, 0.0, False

        class Trainer:
            def __init__(self, model, optimizer, lr_policy):
                self.model = model.to("cuda")
                self.optimizer = optimizer
                self.lr_policy = lr_policy
        """)
    c = summary.classes
    assert c["NoamOpt"].role == OPTIMIZER
    assert c["WarmupLR"].role == SCHEDULER
    assert c["GradualWarmupScheduler"].role == SCHEDULER
    assert c["Net"].role == MODEL
    assert c["AverageMeter"].role == OTHER and c["Environment"].role == OTHER
    assert c["Trainer"].init_attrs == {"model": "model", "optimizer": "optimizer", "lr_policy": "lr_policy"}


def test_a_schedule_of_its_own_keeps_a_clock():
    """`ClassSummary.rate_clock`: what a project schedule's `step()` computes the rate it writes
    from. A counter it advances, or the position each call is told; not a class with a base (it may
    follow torch's convention), nor a `step()` whose position has a default."""
    summary = summary_of("""
        import math
        import torch

        class WarmupCosine:
            def __init__(self, optimizer, warmup, total):
                self.optimizer, self.warmup, self.total = optimizer, warmup, total
                self.done = 0

            def step(self):
                self.done = self.done + 1
                for group in self.optimizer.param_groups:
                    group["lr"] = min(self.done / self.warmup, math.cos(self.done / self.total))

        class PerIteration:
            def __init__(self, optimizer, per_epoch):
                self.optimizer, self.per_epoch = optimizer, per_epoch

            def step(self, epoch, it):
                for group in self.optimizer.param_groups:
                    group["weight_decay"] = 0.05 * (epoch * self.per_epoch + it) / 1000

        class Defaulted:
            def __init__(self, optimizer):
                self.optimizer = optimizer

            def step(self, epoch=None):
                for group in self.optimizer.param_groups:
                    group["lr"] = 0.1

        class Derived(torch.optim.lr_scheduler.LRScheduler):
            def step(self, epoch):
                self.last_epoch += 1
                for group in self.optimizer.param_groups:
                    group["lr"] = 0.1

        class Counter:
            def step(self, n):
                self.n += n
        """)
    c = summary.classes
    assert c["WarmupCosine"].rate_clock == COUNTER
    assert c["PerIteration"].rate_clock == POSITION and c["PerIteration"].role == SCHEDULER
    assert c["Defaulted"].rate_clock is None
    assert c["Derived"].rate_clock is None and c["Derived"].role == SCHEDULER
    assert c["Counter"].rate_clock is None


def test_configuration_is_never_an_optimizer():
    from trainlint.context import FileContext
    from trainlint.model.roles import roles

    source = textwrap.dedent("""
        import argparse
        import yaml

        parser = argparse.ArgumentParser()
        opt = parser.parse_args()
        optim_cfg = yaml.safe_load(open("optim.yaml"))
        optimizer_kwargs = {"lr": 0.1, "momentum": 0.9}
        """)
    ctx = FileContext("x.py", source, cst.parse_module(source), (2, 0))
    model = ctx.model(roles)
    scope = ctx.index.module_scope
    for name in ("opt", "optim_cfg", "optimizer_kwargs"):
        assert model.of(cst.Name(name), scope) == CONFIG, name


# -- fixture projects: what the index changes ----------------------------------------------------------
PER_FILE_FALSE_POSITIVES = {
    # (project, file): findings a per-file check reports that the project check knows are wrong
    ("detector_good", "eval.py"): {(12, "TL301")},  # @smart_inference_mode() from utils/
    ("detector_good", "engine.py"): {(21, "TL501"), (33, "TL501"), (33, "TL301")},  # detached parts, decorator
}
PROJECT_ONLY_FINDINGS = {
    ("detector_bad", "engine.py"): {(23, "TL303")},  # evaluate() in eval.py leaves eval mode
    ("trainer_bad", "src/lmtrain/trainer.py"): {(27, "TL101")},  # schedule is a LambdaLR built in main.py
    # (trainer_bad's transformer.py, `sched.zero_grad()` on a ScheduledOptim of optim.py, is known in
    # one file too: an object whose zero_grad() and step() are called acts as the optimizer)
    ("gan_bad", "train.py"): {(31, "TL303")},  # save_samples() in utils.py leaves netG in eval mode
    ("detector_bad", "main.py"): {(28, "TL404")},  # save_checkpoint() in utils/ saves this dict
    ("resume_bad", "seg/main.py"): {(31, "TL404")},  # SegTrainer.state_dict() in trainer.py leaves out the scheduler
    ("references_bad", "main.py"): {(46, "TL404")},  # save_on_master(*args, **kwargs) in utils/ forwards to torch.save
}


def _codes(result):
    return {(f.line, f.code) for f in result.findings}


@pytest.mark.parametrize("case", sorted(PER_FILE_FALSE_POSITIVES), ids="/".join)
def test_the_project_silences_what_one_file_cannot_tell(case):
    name, file = case
    path = str(PROJECTS / name / file)
    alone = _codes(lint_path(path, ALL))
    together = _codes(lint_path(path, ALL, project=Project(PROJECTS / name)))
    assert PER_FILE_FALSE_POSITIVES[case] <= alone
    assert not (PER_FILE_FALSE_POSITIVES[case] & together)


@pytest.mark.parametrize("case", sorted(PROJECT_ONLY_FINDINGS), ids="/".join)
def test_the_project_finds_what_one_file_cannot_see(case):
    name, file = case
    path = str(PROJECTS / name / file)
    alone = _codes(lint_path(path, ALL))
    together = _codes(lint_path(path, ALL, project=Project(PROJECTS / name)))
    assert not (PROJECT_ONLY_FINDINGS[case] & alone)
    assert PROJECT_ONLY_FINDINGS[case] <= together


def test_files_outside_the_checked_paths_are_read_but_not_reported():
    files = [str(PROJECTS / "detector_bad" / "engine.py")]
    results = list(lint_paths(files, ALL))
    assert [r.path for r in results] == files
    # losses.py (not named) was summarised: the attached loss parts make line 21 a TL501
    assert (21, "TL501") in _codes(results[0])


def test_a_cached_result_is_stale_when_an_imported_helper_changes(tmp_path):
    from trainlint.cache import ResultCache

    write(tmp_path, {
        "pyproject.toml": "",
        "helpers.py": """
            import torch

            def inference():
                return torch.no_grad()
            """,
        "evaluate.py": """
            from helpers import inference

            @inference()
            def evaluate(model, loader):
                model.eval()
                return [model(x).argmax(-1) for x, _ in loader]
            """,
    })
    cache = ResultCache(tmp_path / ".cache")
    target = [str(tmp_path / "evaluate.py")]
    assert list(lint_paths(target, ALL, cache=cache))[0].findings == []
    (tmp_path / "helpers.py").write_text("import contextlib\n\ndef inference():\n    return contextlib.nullcontext()\n")
    codes = [f.code for f in list(lint_paths(target, ALL, cache=cache))[0].findings]
    assert codes == ["TL301"]


def test_the_command_line_checks_a_directory_as_one_project():
    """A real `trainlint check DIR` run: the correct twin is clean only because the helpers in other
    files are read; the bad twin's findings include those that need them."""
    good = subprocess.run([sys.executable, "-m", "trainlint", "check", "--select", "ALL", "--no-cache",
                           "--format", "json", str(PROJECTS / "detector_good")], capture_output=True, text=True)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = subprocess.run([sys.executable, "-m", "trainlint", "check", "--select", "ALL", "--no-cache",
                          "--format", "json", str(PROJECTS / "detector_bad")], capture_output=True, text=True)
    assert bad.returncode == 1
    import json

    found = {(Path(f["path"]).name, f["line"], f["code"]) for f in json.loads(bad.stdout)["findings"]}
    assert {("engine.py", 23, "TL303"), ("engine.py", 21, "TL501"), ("main.py", 28, "TL404")} <= found


# -- safety: the root, symlinks, and helpers that cannot be summarised ------------------------------
EVALUATE = """
    from helpers import inference

    @inference()
    def evaluate(model, loader):
        model.eval()
        return [model(x).argmax(-1) for x, _ in loader]
    """
NO_GRAD_HELPER = "import torch\n\ndef inference():\n    return torch.no_grad()\n"


def test_the_root_is_the_folder_of_the_configuration_the_resolver_gives(tmp_path):
    """A nearer pyproject.toml without `[tool.trainlint]` is not the configuration, so not the root."""
    from trainlint.config import Resolver

    write(tmp_path, {"repo/trainlint.toml": "", "repo/sub/pyproject.toml": "[project]\nname = 'x'\n",
                     "repo/sub/a.py": ""})
    path = tmp_path / "repo/sub/a.py"
    assert find_root([path]) == (tmp_path / "repo").resolve()
    assert find_root([path]) == Path(Resolver().config_for(str(path)).root).resolve()


def test_an_import_never_follows_a_symlink_out_of_the_project(tmp_path):
    write(tmp_path, {"outside/helpers.py": NO_GRAD_HELPER, "outside/pkg/__init__.py": "",
                     "outside/pkg/util.py": NO_GRAD_HELPER, "proj/pyproject.toml": "", "proj/evaluate.py": EVALUATE,
                     "inside/pyproject.toml": "", "inside/evaluate.py": EVALUATE, "inside/helpers.py": NO_GRAD_HELPER})
    (tmp_path / "proj/helpers.py").symlink_to(tmp_path / "outside/helpers.py")
    (tmp_path / "proj/pkg").symlink_to(tmp_path / "outside/pkg", target_is_directory=True)
    project = Project(tmp_path / "proj")
    evaluate = str(tmp_path / "proj/evaluate.py")
    assert project.find_module("helpers.inference", evaluate) is None
    assert project.find_module("pkg.util.inference", evaluate) is None
    assert summaries_of(project).lookup("helpers.inference", evaluate) is None
    # the outside helper would make the evaluation clean: it was not read, so TL301 stays
    (followed,) = lint_paths([str(tmp_path / "inside/evaluate.py")], ALL)
    assert followed.findings == []
    (refused,) = lint_paths([evaluate], ALL)
    assert [f.code for f in refused.findings] == ["TL301"]
    # inside the project, a symlink is followed to its real file
    (tmp_path / "proj/real.py").write_text(NO_GRAD_HELPER)
    (tmp_path / "proj/alias.py").symlink_to(tmp_path / "proj/real.py")
    project.refresh()  # its folder listings were read before these files existed
    assert project.find_module("alias.inference", evaluate) == ((tmp_path / "proj/real.py").resolve(), ["inference"])


HELPERS_THAT_CANNOT_BE_SUMMARISED = {
    "too-deep": NO_GRAD_HELPER + "f = " + "lambda: " * 4000 + "1\n",
    "too-big": NO_GRAD_HELPER + "#" * 4000 + "\n",
    "unparsable": NO_GRAD_HELPER + "def broken(:\n",
    "nul-byte": NO_GRAD_HELPER + "x = 1\0\n",
    "fifo": None,
}


@pytest.mark.parametrize("name", list(HELPERS_THAT_CANNOT_BE_SUMMARISED))
def test_a_helper_that_cannot_be_summarised_is_skipped_and_never_reported(tmp_path, name):
    """Through the real CLI (a crash would kill the process): the helper is treated as unknown (the
    evaluation keeps its TL301), it is not reported, and nothing fails."""
    write(tmp_path, {"trainlint.toml": "max-file-size = 2000\n", "evaluate.py": EVALUATE})
    helper = tmp_path / "helpers.py"
    if HELPERS_THAT_CANNOT_BE_SUMMARISED[name] is None:
        os.mkfifo(helper)  # opened without a writer, it would block a reader forever
    else:
        helper.write_text(HELPERS_THAT_CANNOT_BE_SUMMARISED[name])
    done = subprocess.run([sys.executable, "-m", "trainlint", "check", "--select", "ALL", "--no-cache",
                           "--format", "json", "evaluate.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stdout + done.stderr
    import json

    report = json.loads(done.stdout)
    assert [(Path(f["path"]).name, f["code"]) for f in report["findings"]] == [("evaluate.py", "TL301")]
    assert report["files_checked"] == 1


def test_the_imported_files_hashes_are_part_of_the_cache_key(tmp_path):
    from trainlint.cache import ResultCache, cache_key
    from trainlint.finding import FileResult

    data = b"from helpers import inference\n"
    assert cache_key(data, "a.py", ALL, "helpers.py:1") != cache_key(data, "a.py", ALL, "helpers.py:2")
    cache = ResultCache(tmp_path)
    cache.put(data, "a.py", ALL, FileResult("a.py"), "helpers.py:1")
    assert cache.get(data, "a.py", ALL, "helpers.py:1") is not None
    assert cache.get(data, "a.py", ALL, "helpers.py:2") is None
    # an entry copied under the other key is refused: it says which imports it was made with
    forged = cache._file(cache_key(data, "a.py", ALL, "helpers.py:2"))
    forged.parent.mkdir(parents=True, exist_ok=True)
    forged.write_text(cache._file(cache_key(data, "a.py", ALL, "helpers.py:1")).read_text())
    assert cache.get(data, "a.py", ALL, "helpers.py:2") is None


def test_a_cached_helper_result_is_stale_when_a_caller_changes(tmp_path):
    """What a save helper writes is what its callers in other files hand it: editing the caller
    changes the helper's findings, cached or not."""
    from trainlint.cache import ResultCache

    write(tmp_path, {
        "pyproject.toml": "",
        "dist_utils.py": """
            import torch

            def save_on_master(*args, **kwargs):
                torch.save(*args, **kwargs)
            """,
        "train.py": """
            from dist_utils import save_on_master

            def main(model, out):
                save_on_master(model.state_dict(), out + "/embeddings.pt")
            """,
    })
    cache = ResultCache(tmp_path / ".cache")
    paths = [str(tmp_path / "dist_utils.py"), str(tmp_path / "train.py")]

    def helper_codes():
        return [f.code for f in list(lint_paths(paths, ALL, cache=cache))[0].findings]

    assert helper_codes() == []
    (tmp_path / "train.py").write_text(
        "from dist_utils import save_on_master\n\n\ndef main(model, out):\n"
        "    save_on_master({'model': model.state_dict()}, out + '/checkpoint.pth')\n")
    assert helper_codes() == ["TL402"]


def test_a_helper_that_builds_the_checkpoint_from_several_parameters_is_judged_at_its_own_save():
    """`save_checkpoint(path, model, opt, sched, step)` writes a dict it builds itself: the call is
    not a save of `model` alone (a false TL404), and a helper that saves the one dict it is handed
    makes the call a save of that dict."""
    source = textwrap.dedent("""
        import os
        import torch

        def save_checkpoint(path, model, optimizer, scheduler, step):
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict(), "step": step}, path + ".tmp")
            os.replace(path + ".tmp", path)

        def save_state(state, path):
            torch.save(state, path + ".tmp")
            os.replace(path + ".tmp", path)

        def train(model, loader, steps, helper_builds_the_dict=True):
            opt = torch.optim.AdamW(model.parameters())
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
            for step, (x, y) in enumerate(loader):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                if helper_builds_the_dict:
                    save_checkpoint("last.pt", model, opt, sched, step)

        def train_and_save_state(model, loader, steps):
            opt = torch.optim.AdamW(model.parameters())
            for step, (x, y) in enumerate(loader):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                save_state({"model": model.state_dict(), "step": step}, "resume.pt")

        def resume(model):
            state = torch.load("resume.pt", weights_only=True)
            model.load_state_dict(state["model"])
            return state["step"] + 1
        """)
    found = [(f.code, f.line) for f in lint_source(source, "train.py", ALL).findings]
    assert found == [("TL404", 33)]  # save_state(...), never save_checkpoint(...)


MODELS_PY = """
import torch.nn as nn


class ResBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.GroupNorm(8, channels)

    def forward(self, x):
        return x + self.norm(self.conv(x)).relu()


class UNet(nn.Module):
    def __init__(self, channels=64):
        super().__init__()
        self.inp = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = nn.ModuleList([ResBlock(channels) for _ in range(4)])
        self.out = nn.Conv2d(channels, 3, 3, padding=1)

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            h = block(h)
        return self.out(h)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 10), nn.Dropout(0.1))

    def forward(self, x):
        return self.body(x)
"""
TRAIN_PY = """
import torch

from models import Classifier, UNet


def fit(loader, val_loader, epochs):
    model = UNet()
    opt = torch.optim.Adam(model.parameters(), lr=2e-4)
    for epoch in range(epochs):
        model.train()
        for noisy, clean in loader:
            opt.zero_grad()
            (model(noisy) - clean).pow(2).mean().backward()
            opt.step()
        with torch.no_grad():
            for noisy, clean in val_loader:
                print((model(noisy) - clean).pow(2).mean().item())


def fit_classifier(loader, val_loader, epochs):
    clf = Classifier()
    opt = torch.optim.Adam(clf.parameters(), lr=2e-4)
    for epoch in range(epochs):
        clf.train()
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(clf(x), y).backward()
            opt.step()
        with torch.no_grad():
            for x, y in val_loader:
                print(clf(x).argmax(-1).eq(y).float().mean().item())
"""


def test_a_project_model_class_is_judged_by_its_own_layers(tmp_path):
    """TL302: `UNet()` from models.py (GroupNorm only) computes the same in train and eval mode, so
    its no_grad evaluation in train mode is not reported; `Classifier()` there holds Dropout, and is."""
    write(tmp_path, {
        "pyproject.toml": "",
        "models.py": MODELS_PY,
        "train.py": TRAIN_PY,
    })
    lines = (tmp_path / "train.py").read_text().splitlines()
    unet = next(n for n, text in enumerate(lines, 1) if "print((model(noisy)" in text)
    clf = next(n for n, text in enumerate(lines, 1) if "print(clf(x)" in text)
    found = {line for line, code in _codes(lint_path(str(tmp_path / "train.py"), ALL, project=Project(tmp_path)))
             if code == "TL302"}
    assert found == {clf}  # the Dropout classifier, not the GroupNorm UNet
    # checked without its project, `models` is a package like any other, its classes not known to
    # hold dropout or BatchNorm: neither is reported
    assert not {line for line, code in _codes(lint_path(str(tmp_path / "train.py"), ALL)) if code == "TL302"}
    assert unet < clf


DETECTORS_PY = """
    import torchvision.models.detection
    from torch import nn


    class Detector(nn.Module):
        def __init__(self, arch, classes):
            super().__init__()
            self.net = getattr(torchvision.models.detection, arch)(num_classes=classes)

        def forward(self, images, targets=None):
            return self.net(images, targets)


    class Tagger(nn.Module):
        def __init__(self, classes):
            super().__init__()
            self.net = nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.LazyLinear(classes))

        def forward(self, images, targets=None):
            logits = self.net(images)
            return logits if targets is None else {"loss": nn.functional.cross_entropy(logits, targets)}
"""

FIT_DETECTOR_PY = """
    import torch
    import detectors


    def run_epoch(net, opt, loader):
        net.train()
        for images, targets in loader:
            opt.zero_grad()
            sum(net(images, targets).values()).backward()
            opt.step()


    def validate(net, val_loader):
        total = 0.0
        with torch.no_grad():
            for images, targets in val_loader:
                total += sum(v.item() for v in net(images, targets).values())
        return total


    def main(cfg, train_loader, val_loader):
        net = {build}
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        for epoch in range(cfg.epochs):
            run_epoch(net, opt, train_loader)
            print(validate(net, val_loader))
"""


@pytest.mark.parametrize("build, expected", [
    ('detectors.Detector("maskrcnn_resnet50_fpn", 2)', "none"),
    ("getattr(detectors, cfg.model)(*cfg.args)", "unproven"),
    ("detectors.Tagger(2)", "reported"),
])
def test_a_detection_model_asked_for_its_losses_needs_train_mode(tmp_path, build, expected):
    """TL302: `Detector` (models file) hands the targets of `net(images, targets)` to a torchvision
    detection model, which returns its losses only in train mode: the held-out loss under no_grad is
    no forgotten `eval()`. Built as `Detector` it is not reported; built from a class named at run
    time (`Detector` or the Dropout `Tagger`), the premise that eval mode suits the pass is unknown:
    reported only with --include-unproven. The look-alike: `Tagger`, asked the same way for a loss
    dict that it computes in either mode, with Dropout on in the pass: reported."""
    write(tmp_path, {
        "pyproject.toml": "",
        "detectors.py": DETECTORS_PY,
        "fit.py": FIT_DETECTOR_PY.replace("{build}", build),
    })
    path = str(tmp_path / "fit.py")
    found = [f for f in lint_path(path, ALL, project=Project(tmp_path)).findings if f.code == "TL302"]
    assert len(found) == (expected == "reported")
    guessed = [f for f in lint_path(path, Settings(select=ALL.select, include_unproven=True),
                                    project=Project(tmp_path)).findings if f.code == "TL302"]
    if expected == "none":
        assert guessed == []
    elif expected == "unproven":
        assert len(guessed) == 1 and "may be `Detector`" in guessed[0].message
    else:
        assert len(guessed) == 1 and "torchvision" not in guessed[0].message


def test_k_is_what_the_callers_in_other_files_pass_not_the_parameter_default():
    """`train_one_epoch(..., accum_iter=1)` is called from main.py with `args.accum_iter` (default
    4): the accumulation finding is a certain one, not "if accum_iter is set above 1"."""
    path = str(PROJECTS / "references_bad" / "engine.py")
    # alone, `lr_scheduler` is a parameter known only by its name: not reported by default, and
    # with --include-unproven at info, saying so; main.py's caller passes a OneCycleLR (evidence)
    alone = [f for f in lint_path(path, ALL).findings if f.code == "TL101"]
    assert alone == []
    guessed = [f for f in lint_path(path, Settings(select=ALL.select, include_unproven=True)).findings
               if f.code == "TL101"]
    assert [f.severity.value for f in guessed] == ["info"] and guessed[0].message.startswith(
        "unproven (`lr_scheduler` is an LR scheduler: only the name `lr_scheduler` says so): if `accum_iter`")
    together = [f for f in lint_path(path, ALL, project=Project(PROJECTS / "references_bad")).findings
                if f.code == "TL101"]
    assert [f.severity.value for f in together] == ["error"] and not together[0].message.startswith("if ")
    [role] = [e for e in together[0].evidence if "LR scheduler" in e.premise]
    assert role.verdict == "proven" and role.kind == "argument" and "main.py" in role.premise


EPOCH_HELPER = """
    import torch

    def train_epoch(epoch, loader, model, criterion, optimizer, out):
        model.train()
        for inputs, targets in loader:
            loss = criterion(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        torch.save({"epoch": epoch + 1, "state_dict": model.state_dict(),
                    "optimizer": optimizer.state_dict()}, f"{out}/save_{epoch}.pth")

    def resume(path, model, optimizer):
        checkpoint = torch.load(path, map_location="cpu")
        model.load_state_dict(checkpoint["state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        start_epoch = checkpoint["epoch"]
        return start_epoch
    """


@pytest.mark.parametrize("script, fires", [
    # the scheduler the caller steps (in another file) is not in the helper's checkpoint
    ("""
        import torch
        from train import train_epoch

        if __name__ == "__main__":
            model = build_model()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, "min", patience=10)
            for epoch in range(1, 200):
                train_epoch(epoch, loader, model, torch.nn.CrossEntropyLoss(), optimizer, "out")
                scheduler.step(validate(model))
        """, True),
    # no scheduler anywhere: model, optimizer and epoch are the whole state
    ("""
        import torch
        from train import train_epoch

        if __name__ == "__main__":
            model = build_model()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            for epoch in range(1, 200):
                train_epoch(epoch, loader, model, torch.nn.CrossEntropyLoss(), optimizer, "out")
        """, False),
], ids=["scheduler-in-the-caller", "no-scheduler"])
def test_state_a_caller_in_another_file_holds_counts_for_the_helpers_checkpoint(tmp_path, script, fires):
    write(tmp_path, {"pyproject.toml": "", "train.py": EPOCH_HELPER, "main.py": script})
    result = lint_path(str(tmp_path / "train.py"), ALL, project=Project(tmp_path))
    assert ((11, "TL404") in _codes(result)) is fires
    assert (11, "TL404") not in _codes(lint_path(str(tmp_path / "train.py"), ALL))
    if fires:  # the scheduler is named with the file that holds it (it is not in scope in train.py)
        message = next(f.message for f in result.findings if f.code == "TL404")
        assert "LR scheduler state (`scheduler` in main.py)" in message, message


def test_mode_effect_of_a_deep_copy_stays_with_the_copy():
    summary = summary_of("""
        import copy

        def attack_deep(model, x):
            model = copy.deepcopy(model)
            model.eval()
            return model(x)

        def attack_shallow(model, x):
            model = copy.copy(model)  # shares the submodules whose mode eval() sets
            model.eval()
            return model(x)

        def attack_maybe(model, x, fresh):
            if fresh:
                model = copy.deepcopy(model)
            model.eval()
            return model(x)
        """)
    f = summary.functions
    assert f["attack_deep"].mode_effect("model") is None
    assert f["attack_shallow"].mode_effect("model") == ("eval", "eval")
    assert f["attack_maybe"].mode_effect("model") == ("eval", "eval")


def test_parameters_a_function_only_runs():
    """`FunctionSummary.run_only`: what a helper of another file does to a model it is handed;
    a frozen model handed to it stays frozen only when it only runs or looks at it."""
    summary = summary_of("""
        import torch

        def predict(model, x, mode=0):
            if isinstance(model, torch.nn.DataParallel):
                print(model)
            return split(model, x) if mode else model.eval()(x)

        def split(model, x):
            return torch.cat([model(part) for part in x.chunk(2)]) if len(x) > 1 else split(model, x[:1])

        def inject(model, rank):
            model.lora = torch.nn.Linear(rank, rank)
            return model

        def unfreeze(model):
            model.requires_grad_(True)

        def keep(model, store):
            store.append(model)

        def hooks(model, fn):
            model.apply(fn)
        """)
    assert summary.function("predict").run_only == ("model",)  # `x` and `mode` are used otherwise
    assert summary.function("split").run_only == ("model",)
    for name in ("inject", "unfreeze", "keep", "hooks"):
        assert "model" not in summary.function(name).run_only, name


_FLAGGED_HELPER = """
    import torch


    def forward_pass(model, batch, is_training=False):
        if not is_training:
            model.eval()
        x, y = batch
        return torch.nn.functional.cross_entropy(model(x), y)
    """
_FLAGGED_TRAINING = """
    import torch
    from torch import nn
    from utils import forward_pass

    model = nn.Sequential(nn.Linear(10, 10), nn.Dropout(0.1), nn.Linear(10, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    for epoch in range(10):{probe}
        for batch in train_loader:
            loss = forward_pass(model, batch, {flag})
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
_PROBE = """
        with torch.no_grad():
            val = forward_pass(model, next(iter(val_loader)))"""


@pytest.mark.parametrize("flag, probe, expected", [
    ("is_training=True", "", set()),  # the helper's eval() runs only when is_training is false
    ("True", "", set()),  # the same flag passed by position
    ("is_training=False", "", {11}),  # the eval() runs in the training call itself
    ("is_training=True", _PROBE, {11}),  # the default (False) switches to eval; nothing restores it
    ("is_training=flag", "", {11}),  # a value not known here: the eval() may run
])
def test_a_helper_of_another_file_switches_modes_under_the_flags_the_call_passes(tmp_path, flag, probe, expected):
    write(tmp_path, {"utils.py": _FLAGGED_HELPER,
                     "train.py": _FLAGGED_TRAINING.replace("{probe}", probe).replace("{flag}", flag)})
    results = list(lint_paths([str(tmp_path / "train.py"), str(tmp_path / "utils.py")], ALL))
    found = {f.line for r in results for f in r.findings if f.code == "TL303"}
    assert found == expected


def test_a_loader_nothing_in_the_project_reads_or_builds_feeds_no_evaluation(tmp_path):
    """TL602: in a run over the whole project, a script's module-level loader no file reads feeds
    no evaluation, and a factory no file calls is unproven to run (not reported by default);
    once another file calls the factory, its loader is an evaluation's again."""
    write(tmp_path, {
        "stats.py": """
            from torch.utils.data import DataLoader

            train_loader = DataLoader(train_set, batch_size=8, shuffle=True)
            val_loader = DataLoader(val_set, batch_size=8, shuffle=True)
            for batch in train_loader:
                record(batch)
            """,
        "data.py": """
            from torch.utils.data import DataLoader

            def test_loader(test_set):
                return DataLoader(test_set, batch_size=8, drop_last=True)
            """,
        "train.py": """
            from data import something_else
            """,
    })
    project = Project(tmp_path)
    for name in ("stats.py", "data.py"):
        assert "TL602" in {code for _, code in _codes(lint_path(str(tmp_path / name), ALL))}, name
        assert "TL602" not in {code for _, code in _codes(lint_path(str(tmp_path / name), ALL, project=project))}, name
        # checked without the rest of the project: a file left out may import it
        partial = list(lint_paths([str(tmp_path / name)], ALL))[0]
        assert "TL602" in {code for _, code in _codes(partial)}, name
    write(tmp_path, {"train.py": """
        from data import test_loader

        for x in test_loader(held_out):
            score(x)
        """})
    assert (5, "TL602") in _codes(lint_path(str(tmp_path / "data.py"), ALL, project=Project(tmp_path)))


def test_a_factory_other_files_only_import_feeds_no_evaluation(tmp_path):
    """TL602: a factory returning a shuffled held-out loader that no file of the project calls,
    another file importing its name and never using it, runs nowhere: its loader feeds nothing.
    Look-alikes that still report: another file hands the factory on by name (a table of
    builders a runner picks from), or spells it in a string (`getattr(module, "...")`)."""
    write(tmp_path, {
        "sets.py": """
            import torch
            from torch.utils.data import DataLoader
            from torchvision import datasets

            def digits(root, batch_size=64):
                train_set = datasets.MNIST(root, train=True, download=True)
                held_out = datasets.MNIST(root, train=False, download=True)
                train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True)
                test_loader = DataLoader(held_out, batch_size=batch_size, shuffle=True)
                return train_loader, test_loader
            """,
        "probe.py": """
            from sets import digits  # kept for later experiments

            print("probe")
            """,
    })
    found = _codes(lint_path(str(tmp_path / "sets.py"), ALL, project=Project(tmp_path)))
    assert (10, "TL602") not in found, found
    for use in ("BUILDERS = {'mnist': digits}", "build = getattr(sets, 'digits')"):
        write(tmp_path, {"probe.py": f"""
            import sets
            from sets import digits

            {use}
            """})
        found = _codes(lint_path(str(tmp_path / "sets.py"), ALL, project=Project(tmp_path)))
        assert (10, "TL602") in found, (use, found)


def test_a_loader_returned_to_a_caller_that_drops_it_feeds_no_evaluation(tmp_path):
    """TL602: a module-level function's returned test loader whose only caller (in its own file; no
    other file of the project names the function) drops the result feeds no evaluation; checked
    without the rest of the project, a file left out may call it and evaluate (reported); a file
    that unpacks it and goes through it under no_grad keeps the finding."""
    write(tmp_path, {
        "prep.py": """
            from torch.utils.data import DataLoader

            def make_loaders(train_rows, test_rows):
                train = DataLoader(train_rows, batch_size=64, shuffle=True)
                test = DataLoader(test_rows, batch_size=64, shuffle=True)
                return train, test

            make_loaders(read("train.txt"), read("test.txt"))
            """,
        "train.py": """
            import torch
            """,
    })
    assert "TL602" not in {code for _, code in _codes(lint_path(str(tmp_path / "prep.py"), ALL,
                                                                project=Project(tmp_path)))}
    partial = list(lint_paths([str(tmp_path / "prep.py")], ALL))[0]
    assert (6, "TL602") in _codes(partial)
    write(tmp_path, {"score.py": """
        import torch
        from prep import make_loaders

        _, held_out = make_loaders(rows_a, rows_b)
        with torch.no_grad():
            for x, y in held_out:
                print(model(x).sum())
        """})
    assert (6, "TL602") in _codes(lint_path(str(tmp_path / "prep.py"), ALL, project=Project(tmp_path)))


def test_a_loader_returned_to_scripts_that_bind_it_and_never_read_it(tmp_path):
    """TL602: a factory's held-out loader whose callers are all in other files, each binding it to
    a name nothing reads (`walks, _ = build_pair(...)` in a script, `_, probe = ...` in a function
    that never reads `probe`), feeds no evaluation; a file that names the factory another way (a
    registry dict) or that reads the name keeps the finding (the loader may be gone through there)."""
    write(tmp_path, {
        "pairs.py": """
            from torch.utils.data import DataLoader

            def build_pair(rows, held_rows, width):
                walks = DataLoader(rows, batch_size=width, shuffle=True)
                holdout = DataLoader(held_rows, batch_size=width, shuffle=True)
                return walks, holdout
            """,
        "fit.py": """
            from pairs import build_pair

            walks, _ = build_pair(load("a"), load("b"), 32)
            for batch in walks:
                step(batch)
            """,
        "sweep.py": """
            from pairs import build_pair

            def sweep(widths):
                for width in widths:
                    walks, probe = build_pair(load("a"), load("b"), width)
                    for batch in walks:
                        step(batch)
            """,
    })
    project = Project(tmp_path)
    assert "TL602" not in {code for _, code in _codes(lint_path(str(tmp_path / "pairs.py"), ALL, project=project))}
    partial = list(lint_paths([str(tmp_path / "pairs.py")], ALL))[0]
    assert (6, "TL602") in _codes(partial)
    write(tmp_path, {"registry.py": """
        from pairs import build_pair

        BUILDERS = {"pair": build_pair}
        """})
    assert (6, "TL602") in _codes(lint_path(str(tmp_path / "pairs.py"), ALL, project=Project(tmp_path)))
    (tmp_path / "registry.py").unlink()
    write(tmp_path, {"sweep.py": """
        from pairs import build_pair

        def sweep(widths):
            for width in widths:
                walks, probe = build_pair(load("a"), load("b"), width)
                for batch in walks:
                    step(batch)
                print(score(probe))
        """})
    assert (6, "TL602") in _codes(lint_path(str(tmp_path / "pairs.py"), ALL, project=Project(tmp_path)))


def test_a_loader_kept_in_an_attribute_is_followed_through_the_class(tmp_path):
    """TL602: in a run over the whole project, a loader stored in `self.<attr>` is followed to every
    read of that attribute in its file when no other file spells `.attr`: one only wrapped by the
    Accelerator's `prepare` back into the attribute and never read again, or handed to a method (of
    a class no file derives from) that draws a fixed number of batches, feeds no evaluation. A
    subclass in another file (it may override the method), or a read of the attribute there, keeps
    the finding."""
    write(tmp_path, {
        "runner.py": """
            import torch
            from accelerate import Accelerator
            from torch.utils.data import DataLoader

            class Runner:
                def __init__(self, net, opt, train_set, holdout_set, test_set):
                    self.acc = Accelerator()
                    self.net, self.opt = net, opt
                    self.train_loader = DataLoader(train_set, batch_size=8, shuffle=True)
                    self.holdout_loader = DataLoader(holdout_set, batch_size=8, drop_last=True)
                    self.test_loader = DataLoader(test_set, batch_size=8, drop_last=True)

                def fit(self):
                    self.net, self.opt, self.train_loader, self.test_loader = self.acc.prepare(
                        self.net, self.opt, self.train_loader, self.test_loader)
                    for x, y in self.train_loader:
                        loss = torch.nn.functional.mse_loss(self.net(x), y)
                        self.acc.backward(loss)
                        self.opt.step()
                        self.opt.zero_grad()
                    self.preview(self.holdout_loader)

                def preview(self, loader):
                    print(next(iter(loader)))
            """,
        "main.py": """
            from runner import Runner

            Runner(make_net(), make_opt(), rows("a"), rows("b"), rows("c")).fit()
            """,
    })
    found = _codes(lint_path(str(tmp_path / "runner.py"), ALL, project=Project(tmp_path)))
    assert (11, "TL602") not in found and (12, "TL602") not in found, found
    partial = _codes(list(lint_paths([str(tmp_path / "runner.py")], ALL))[0])
    assert (12, "TL602") in partial, partial
    write(tmp_path, {"main.py": """
        from runner import Runner

        class Scored(Runner):
            def preview(self, loader):
                print(sum(float(self.net(x).mean()) for x, _ in loader))

        run = Scored(make_net(), make_opt(), rows("a"), rows("b"), rows("c"))
        run.fit()
        print(len(run.test_loader))
        """})
    found = _codes(lint_path(str(tmp_path / "runner.py"), ALL, project=Project(tmp_path)))
    assert (11, "TL602") in found and (12, "TL602") in found, found


def test_a_script_loader_is_read_only_by_files_that_import_the_script(tmp_path):
    """TL602: a script's module-level loader that the script never reads is read by no file of its
    import component that does not import the script, however many of them use the same variable
    name (a helper module it imports with its own `val_loader`); a file that imports the script
    (spells its module's name) and reads the name keeps the finding."""
    write(tmp_path, {
        "helpers.py": """
            def evaluate(model, val_loader):
                return sum(model(x).sum() for x in val_loader)
            """,
        "runs.py": """
            from torch.utils.data import DataLoader
            from helpers import evaluate

            train_loader = DataLoader(train_set, batch_size=8, shuffle=True)
            val_loader = DataLoader(val_set, batch_size=8, shuffle=True)
            for batch in train_loader:
                record(batch)
            print(evaluate(model, train_loader))
            """,
    })
    assert "TL602" not in {code for _, code in _codes(lint_path(str(tmp_path / "runs.py"), ALL,
                                                                project=Project(tmp_path)))}
    write(tmp_path, {"report.py": """
        import runs
        from helpers import evaluate

        print(evaluate(model, runs.val_loader))
        """})
    assert (6, "TL602") in _codes(lint_path(str(tmp_path / "runs.py"), ALL, project=Project(tmp_path)))


def test_a_loader_handed_to_a_method_that_only_draws_one_batch_from_it(tmp_path):
    """TL602: a validation loader handed to a method of a project class (`gan.train(train_loader,
    val_loader)`) that only passes it on to a function drawing one batch (`next(iter(loader))` for
    sample pictures) is never gone through; a method that evaluates over it keeps the finding."""
    write(tmp_path, {
        "pictures.py": """
            def write_samples(generator, loader, path):
                batch = next(iter(loader))
                save_grid(generator(batch), path)
            """,
        "gan.py": """
            from pictures import write_samples

            class Gan:
                def __init__(self, generator, opt):
                    self.generator, self.opt = generator, opt

                def train(self, train_loader, val_loader):
                    for epoch in range(10):
                        for real in train_loader:
                            self.opt.zero_grad()
                            self.generator(real).mean().backward()
                            self.opt.step()
                        write_samples(self.generator, val_loader, f"epoch_{epoch}.png")
            """,
        "main.py": """
            from torch.utils.data import DataLoader
            from gan import Gan

            train_loader = DataLoader(train_set, batch_size=8, shuffle=True)
            val_loader = DataLoader(val_set, batch_size=8, shuffle=True)
            gan = Gan(generator, opt)
            gan.train(train_loader, val_loader)
            """,
    })
    assert "TL602" not in {code for _, code in _codes(lint_path(str(tmp_path / "main.py"), ALL,
                                                                project=Project(tmp_path)))}
    write(tmp_path, {"pictures.py": """
        def write_samples(generator, loader, path):
            for batch in loader:
                save_grid(generator(batch), path)
        """})
    assert (6, "TL602") in _codes(lint_path(str(tmp_path / "main.py"), ALL, project=Project(tmp_path)))


def test_a_batch_size_of_one_read_from_a_configuration_module(tmp_path):
    """TL602: `drop_last=True` with a batch size a project configuration module sets to 1
    (`__C.EVAL.BATCH_SIZE = 1`, `cfg = __C`) leaves no partial batch; the same setting at 4, or
    written again by a file of the project (`cfg.EVAL.BATCH_SIZE = args.bs`), keeps the finding."""
    config = """
        from easydict import EasyDict

        __C = EasyDict()
        cfg = __C
        __C.EVAL = EasyDict()
        __C.EVAL.BATCH_SIZE = {size}
        __C.TRAIN = EasyDict()
        __C.TRAIN.BATCH_SIZE = 16
        """
    script = """
        import torch
        from torch.utils.data import DataLoader
        from settings import cfg

        test_loader = DataLoader(test_set, batch_size=cfg.EVAL.BATCH_SIZE, drop_last=True)
        with torch.no_grad():
            for x, y in test_loader:
                record(model(x), y)
        """
    write(tmp_path, {"settings.py": config.replace("{size}", "1"), "evaluate.py": script})
    assert "TL602" not in {code for _, code in _codes(lint_path(str(tmp_path / "evaluate.py"), ALL,
                                                                project=Project(tmp_path)))}
    write(tmp_path, {"settings.py": config.replace("{size}", "4")})
    assert (6, "TL602") in _codes(lint_path(str(tmp_path / "evaluate.py"), ALL, project=Project(tmp_path)))
    write(tmp_path, {"settings.py": config.replace("{size}", "1"),
                     "launch.py": "from settings import cfg\ncfg.EVAL.BATCH_SIZE = args.bs\n"})
    assert (6, "TL602") in _codes(lint_path(str(tmp_path / "evaluate.py"), ALL, project=Project(tmp_path)))


def test_a_counter_written_beside_the_checkpoint_by_a_helper_of_another_file(tmp_path):
    """TL404: the step counter handed to a project helper that writes it to a file (through another
    helper opening the file) is kept beside the checkpoint; a helper that only prints it is not."""
    helper = """
        import json


        def write_text(text, path):
            with open(path, "w") as handle:
                handle.write(text)


        def write_json(data, path):
            write_text(json.dumps(data, indent=2), path)
        """
    write(tmp_path, {"files.py": helper, "keep.py": """
        import torch
        from files import write_json


        def keep(model, optimizer, folder, global_step):
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, f"{folder}/state.pt")
            write_json({"global_step": global_step}, f"{folder}/progress.json")


        def resume(model, optimizer, folder):
            state = torch.load(f"{folder}/state.pt", map_location="cpu")
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        """})
    assert "TL404" not in {code for _, code in _codes(lint_path(str(tmp_path / "keep.py"), ALL,
                                                                project=Project(tmp_path)))}
    write(tmp_path, {"files.py": helper.replace("write_text(json.dumps(data, indent=2), path)",
                                                "print(json.dumps(data, indent=2), path)")})
    assert (7, "TL404") in _codes(lint_path(str(tmp_path / "keep.py"), ALL, project=Project(tmp_path)))


_EVAL_HELPER = """
import torch.nn.functional as F


def validate(model, loader):
    model.eval()
    total = 0.0
    for x, y in loader:
        total += F.cross_entropy(model(x), y).item()
    return total / len(loader)
"""

_GRAD_OFF_SCRIPT = """
import torch

from evaluation import validate


def main(model, loader):
    {switch}
    print(validate(model, loader))
"""

_UNIT_TEST = """
from evaluation import validate


def test_validate_returns_a_number(model, loader):
    assert validate(model, loader) >= 0
"""


@pytest.mark.parametrize("switch, with_test, expected", [
    ("torch.set_grad_enabled(False)", False, set()),  # the script turns recording off for the process
    ("torch.set_grad_enabled(False)", True, set()),  # a pytest test of the helper evaluates nothing
    ("torch.set_grad_enabled(True)", False, {9}),  # recording on: the evaluation builds graphs
    ("pass", True, {9}),  # nothing turns it off; the unit test does not decide either way
])
def test_a_helper_whose_every_caller_turned_grad_off_for_the_process_evaluates_without_graphs(
        tmp_path, switch, with_test, expected):
    files = {"evaluation.py": _EVAL_HELPER, "run.py": _GRAD_OFF_SCRIPT.replace("{switch}", switch)}
    if with_test:
        files["tests/test_evaluation.py"] = _UNIT_TEST
    write(tmp_path, files)
    results = list(lint_paths([str(tmp_path / name) for name in files], ALL))
    found = {f.line for r in results if r.path.endswith("evaluation.py") and not r.path.endswith("test_evaluation.py")
             for f in r.findings if f.code == "TL301"}
    assert found == expected


_MODE_MODEL = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Translator(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.FloatTensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor
        self.generator = nn.Conv2d(channels, 3, 3, padding=1)

    def prepare(self, batch):
        return batch["label"].float(), batch["image"]

    def forward(self, batch, mode):
        labels, images = self.prepare(batch)
        {before}
        if mode == "loss":
            return F.l1_loss(self.generator(labels), images)
        elif mode == "inference":
            with torch.no_grad():
                fake = self.generator(labels)
            return fake
        raise ValueError(mode)
"""

_MODE_SCRIPT = """
import torch

from models import Translator

model = Translator(8)
model.eval()
for batch in loader:
    fake = model(batch, mode={mode})
    torch.save(fake, "fake.pt")
"""


@pytest.mark.parametrize("mode, before, expected", [
    ('"inference"', "pass", set()),  # the branch it selects runs the generator under no_grad
    ('"loss"', "pass", {9}),  # this branch records a graph
    ('"inference"', "labels = self.generator(labels)", {9}),  # a submodule runs before the branch, grad on
    ("chosen", "pass", {9}),  # a value not known here
])
def test_a_forward_whose_mode_argument_selects_a_branch_under_no_grad(tmp_path, mode, before, expected):
    write(tmp_path, {"models.py": _MODE_MODEL.replace("{before}", before),
                     "infer.py": _MODE_SCRIPT.replace("{mode}", mode)})
    results = list(lint_paths([str(tmp_path / "infer.py"), str(tmp_path / "models.py")], ALL))
    found = {f.line for r in results if r.path.endswith("infer.py") for f in r.findings if f.code == "TL301"}
    assert found == expected


_EVALUATOR = """
class Evaluator:
    def __init__(self, loader):
        self.loader = loader

    def evaluate(self, net):
        net.eval()
        outputs = []
        for x in self.loader:
            outputs.append(net(x))
        return outputs
"""

_OTHER_EVALUATOR = """
class OtherEvaluator:
    def __init__(self, loader):
        self.loader = loader

    def evaluate(self, net):
        return [net(x) for x in self.loader]
"""

_ENGINE = """
import torch


class Engine:
    def __init__(self, evaluator):
        self.evaluator = evaluator

    def after_epoch(self, model):
        with torch.no_grad():
            self.evaluator.evaluate(model)
"""

_EVAL_SCRIPT = """
import torch

from evaluator import Evaluator
from other_evaluator import OtherEvaluator


def run(model, loader):
    evaluator = Evaluator(loader)
    evaluator.evaluate(model)


def run_other(model, loader):
    evaluator = OtherEvaluator(loader)
    evaluator.evaluate(model)


def main(model, loader):
    {wrap}
        run(model, loader)
    run_other(model, loader)
"""


@pytest.mark.parametrize("wrap, expected", [
    ("with torch.no_grad():", set()),  # every call of a method named `evaluate` that can be this one: grad off
    ("if loader is not None:", {10}),  # the script's own call runs with grad on
])
def test_a_method_whose_every_call_in_the_project_runs_without_grad(tmp_path, wrap, expected):
    files = {"evaluator.py": _EVALUATOR, "other_evaluator.py": _OTHER_EVALUATOR, "engine.py": _ENGINE,
             "eval.py": _EVAL_SCRIPT.replace("{wrap}", wrap)}
    write(tmp_path, files)
    results = list(lint_paths([str(tmp_path / name) for name in files], ALL))
    found = {f.line for r in results if r.path.endswith("/evaluator.py") for f in r.findings if f.code == "TL301"}
    assert found == expected


def test_a_criterion_result_detached_through_a_star_import(tmp_path):
    """TL501: `loss, acc = self.crit.forward(out, y)` where the criterion (loss.py) counts `acc`
    with a helper it takes by `from metrics import *` on detached scores: no graph is kept; a
    helper returning the scores' mean confidence keeps it."""
    write(tmp_path, {
        "metrics.py": """
            def hits(scores, labels):
                found = []
                best = scores.argmax(dim=1)
                found.append(best.eq(labels).float().sum().mul_(100.0 / labels.size(0)))
                return found
            """,
        "loss.py": """
            import torch.nn as nn
            from metrics import *

            class Margin(nn.Module):
                def forward(self, scores, labels):
                    return nn.functional.cross_entropy(scores, labels), hits(scores.detach(), labels)[0]
            """,
        "train.py": """
            import torch
            import torch.nn as nn
            from loss import Margin

            class Learner(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(8, 4)
                    self.crit = Margin().cuda()
                    self.opt = torch.optim.SGD(self.parameters(), lr=0.1)

                def fit(self, loader):
                    total = 0
                    for x, y in loader:
                        self.opt.zero_grad()
                        loss, acc = self.crit.forward(self.body(x), y)
                        loss.backward()
                        self.opt.step()
                        total += acc
                    print(total)
            """,
    })
    path = str(tmp_path / "train.py")
    assert (20, "TL501") not in _codes(lint_path(path, ALL, project=Project(tmp_path)))
    write(tmp_path, {"metrics.py": '''
        def hits(scores, labels):
            return [scores.softmax(dim=1).max(dim=1)[0].mean()]
        '''})
    assert (20, "TL501") in _codes(lint_path(path, ALL, project=Project(tmp_path)))


def test_a_record_returned_by_a_loss_in_another_file_keeps_numbers_in_the_fields_it_filled_so(tmp_path):
    """TL501: `loss, parts = joint_loss(...)` where the loss (losses.py) returns an object of a
    class of its file whose `__init__` keeps each argument as given, built with `.item()`/`int()`:
    `parts.ce` and `parts.count` are numbers. The field given the loss tensor itself carries its
    graph, and a class that changes the field it was given (`self.ce = ce * 2`) keeps no argument
    as given (the loss's name decides, as before)."""
    write(tmp_path, {
        "losses.py": """
            import torch.nn.functional as F

            class Parts:
                def __init__(self, ce, count, reg):
                    self.ce = ce
                    self.count = count
                    self.reg = reg

            def joint_loss(logits, y):
                ce = F.cross_entropy(logits, y)
                reg = logits.pow(2).mean()
                n = int((y >= 0).sum().item())
                return ce + 0.1 * reg, Parts(ce.item(), count=n, reg=reg)
            """,
        "train.py": """
            from losses import joint_loss

            def train(model, loader, opt):
                ces, counts, regs = [], [], []
                for x, y in loader:
                    loss, parts = joint_loss(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    ces.append(parts.ce)
                    counts.append(parts.count)
                    regs.append(parts.reg)
                print(sum(ces) / len(ces), sum(counts), len(regs))
            """,
    })
    path = str(tmp_path / "train.py")
    found = {line for line, code in _codes(lint_path(path, ALL, project=Project(tmp_path))) if code == "TL501"}
    assert found == {13}
    write(tmp_path, {"losses.py": """
        import torch.nn.functional as F

        class Parts:
            def __init__(self, ce, count, reg):
                self.ce = ce * 2
                self.count = count
                self.reg = reg

        def joint_loss(logits, y):
            ce = F.cross_entropy(logits, y)
            reg = logits.pow(2).mean()
            n = int((y >= 0).sum().item())
            return ce + 0.1 * reg, Parts(ce.item(), count=n, reg=reg)
        """})
    found = {line for line, code in _codes(lint_path(path, ALL, project=Project(tmp_path))) if code == "TL501"}
    assert found == {11, 13}


def test_a_components_method_callers_are_found_once_for_all_its_files(tmp_path, monkeypatch):
    """A project of near-copies (an editor's `.history/` folder: hundreds of versions of one
    trainer) asks "who calls a method `vali`" from every copy; the answer depends only on the
    component of the import graph, so it is scanned once, not once per file (a quadratic number of
    parses that took one such repository past ten minutes)."""
    trainer = "class Exp:\n    def vali(self, loader):\n        return 0\n\n    def train(self):\n        self.vali(None)\n"
    files = {"pyproject.toml": "", "main.py": "".join(f"import exp_{i}\n" for i in range(6))}
    files.update({f"exp_{i}.py": trainer for i in range(6)})
    write(tmp_path, files)
    project = Project(tmp_path)
    summaries = summaries_of(project)
    scanned = []
    original = type(summaries).file_summary

    def counting(self, path):
        scanned.append(Path(path).name)
        return original(self, path)

    monkeypatch.setattr(type(summaries), "file_summary", counting)
    answers = [summaries.method_callers_by_file(str(tmp_path / f"exp_{i}.py"), "vali") for i in range(6)]
    assert all(len(found) == 6 for found in answers)  # the six copies' `self.vali(None)`
    assert sorted(scanned) == sorted(f"exp_{i}.py" for i in range(6))  # each file read once in all


@pytest.mark.parametrize("loaded, severity", [("enc.pt", "warning"), ("dec.pt", "info")])
def test_a_save_read_back_by_the_next_stage_is_a_warning(tmp_path, loaded, severity):
    """TL402 at default severity needs something to read the file back. Stage one rewrites
    `<out>/enc.pt` in place every epoch; stage two, another script of the same project (both import
    `common`), loads `logs/enc.pt`: the file name the two paths spell out is the same, so a crash
    mid-save destroys what the next stage reads (a warning, naming the reading file). Loading another
    file name (`dec.pt`) proves nothing: the save stays at info."""
    write(tmp_path, {
        "pyproject.toml": "",
        "common.py": "import torch\n\ndef build():\n    return torch.nn.Linear(4, 4)\n",
        "train_enc.py": """
            import torch
            from common import build

            def main(out, loader, epochs):
                model = build()
                opt = torch.optim.Adam(model.parameters())
                for epoch in range(epochs):
                    for x, y in loader:
                        loss = torch.nn.functional.mse_loss(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    torch.save(model.state_dict(), f"{out}/enc.pt")
        """,
        "train_dec.py": f"""
            import torch
            from common import build

            encoder = build()
            encoder.load_state_dict(torch.load("logs/{loaded}", weights_only=True))
        """,
    })
    found = [f for f in lint_path(str(tmp_path / "train_enc.py"), ALL, project=Project(tmp_path)).findings
             if f.code == "TL402"]
    assert [f.severity.value for f in found] == [severity]
    if severity == "warning":
        assert any("train_dec.py" in e.premise for e in found[0].evidence)


@pytest.mark.parametrize("reduce, expected", [
    # the helper reduces as its caller tells it (a setting): whether the loss is a mean is unknown
    ('''
        def objective(pred, target, reduction="mean"):
            err = (pred - target) ** 2
            if reduction == "sum":
                return err.sum()
            return err.mean()
        ''', []),
    # the helper sums: K summed micro-batches add up to the window's sum, nothing to divide
    ('''
        import torch.nn.functional as F

        def objective(pred, target, reduction="mean"):
            return F.mse_loss(pred, target, reduction="sum")
        ''', []),
    # the helper always returns a mean, whatever it is handed: K means add up
    ('''
        import torch.nn.functional as F

        def objective(pred, target, reduction="mean"):
            return 0.5 * F.mse_loss(pred, target)
        ''', ["TL102"]),
])
def test_accumulated_loss_from_a_helper_of_another_file_is_what_its_returns_are(tmp_path, reduce, expected):
    """TL102: a loss computed by a function of another project file is a per-micro-batch mean
    only when every value that function returns is one (its summary's `returns_reduction`), not
    because it is a call: one that reduces as its caller's setting says is unknown."""
    write(tmp_path, {
        "pyproject.toml": "",
        "objectives.py": reduce,
        "train.py": """
            import torch
            from objectives import objective

            def fit(net, opt, batches, cfg):
                opt.zero_grad()
                for n, (x, y) in enumerate(batches):
                    loss = objective(net(x), y, cfg.reduction)
                    loss.backward()
                    if (n + 1) % cfg.window == 0:
                        opt.step()
                        opt.zero_grad()
            """,
    })
    result = lint_path(str(tmp_path / "train.py"), ALL, project=Project(tmp_path))
    assert [f.code for f in result.findings if f.code == "TL102"] == expected


FM_MODELS_PY = """
import torch
from torch import nn


class PairwiseScorer(nn.Module):
    def __init__(self, fields, dim):
        super().__init__()
        self.embed = nn.Embedding(fields, dim)
        self.bias = nn.Linear(dim, 1)
        self.factors = nn.Parameter(torch.randn(dim, 4))

    def forward(self, ids):
        x = self.embed(ids).sum(1)
        return self.bias(x) + (x @ self.factors).pow(2).sum(1, keepdim=True)


class DeepScorer(nn.Module):
    def __init__(self, fields, dim):
        super().__init__()
        self.embed = nn.Embedding(fields, dim)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.Dropout(0.3), nn.Linear(dim, 1))

    def forward(self, ids):
        return self.head(self.embed(ids).sum(1))
"""
FM_TRAINER_PY = """
import torch


class Fitter:
    def __init__(self, loader, val_loader, optimizer, epochs):
        self.loader = loader
        self.val_loader = val_loader
        self.optimizer = optimizer
        self.epochs = epochs

    def fit(self, model):
        for epoch in range(self.epochs):
            model.train()
            for ids, y in self.loader:
                self.optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(ids), y).backward()
                self.optimizer.step()
            print(epoch, self.evaluate(model))

    @torch.no_grad()
    def evaluate(self, model):
        return sum(torch.nn.functional.mse_loss(model(ids), y).item() for ids, y in self.val_loader)
"""
FM_RUN_PY = """
import torch

from models import MODEL
from trainer import Fitter


def main(loader, val_loader):
    model = MODEL(1000, 16).to("cpu")
    fitter = Fitter(loader, val_loader, torch.optim.Adam(model.parameters()), epochs=5)
    fitter.fit(model)
"""


@pytest.mark.parametrize("model, reported", [("PairwiseScorer", False), ("DeepScorer", True)])
def test_a_model_the_callers_in_other_files_build_is_judged_by_its_layers(tmp_path, model, reported):
    """TL302: `Fitter.evaluate(model)` runs the model under no_grad in the train mode `fit()` set; the
    model is a parameter whose only callers are in run.py, which builds it from models.py. An
    Embedding/Linear/Parameter model computes the same in both modes (not reported); the look-alike
    holding Dropout is."""
    write(tmp_path, {
        "pyproject.toml": "",
        "models.py": FM_MODELS_PY,
        "trainer.py": FM_TRAINER_PY,
        "run.py": FM_RUN_PY.replace("MODEL", model),
    })
    lines = (tmp_path / "trainer.py").read_text().splitlines()
    forward = next(n for n, text in enumerate(lines, 1) if "return sum(" in text)
    found = {line for line, code in _codes(lint_path(str(tmp_path / "trainer.py"), ALL, project=Project(tmp_path)))
             if code == "TL302"}
    assert found == ({forward} if reported else set())


def test_a_saved_slice_looks_into_what_another_files_function_returns(tmp_path):
    """TL403's premise that the slice is a torch tensor's: shown by the project function whose
    tuple it unpacks (a tensor at that position), refuted when that function returns a NumPy array."""
    write(tmp_path, {
        "pyproject.toml": "",
        "folds.py": """
            import numpy as np
            import torch

            def draw(n, seed):
                picked = np.random.default_rng(seed).permutation(n)
                return torch.from_numpy(picked), picked
            """,
        "export.py": """
            import torch
            from folds import draw

            order, order_np = draw(1000, 0)
            torch.save(order[:900], "fit.pt")
            torch.save(order_np[:900], "fit_np.pt")
            """,
    })
    path = str(tmp_path / "export.py")
    codes = _codes(lint_path(path, ALL, project=Project(tmp_path)))
    assert (6, "TL403") in codes  # a slice of the tensor `draw` returns first
    assert (7, "TL403") not in codes  # a slice of the NumPy array it returns second
    # alone, what `draw` returns is not known: unproven, not reported by default
    assert not {(6, "TL403"), (7, "TL403")} & _codes(lint_path(path, ALL))


def test_a_method_of_a_project_class_is_no_model_whatever_its_name(tmp_path):
    """TL501's 'computed from a forward': `agent.update_actor(...)` runs a method of a class of
    another file (named like a model), so what it hands back is not known to carry a graph; its
    `agent.actor(...)`, an `nn.Linear` the class holds, is a forward."""
    write(tmp_path, {
        "pyproject.toml": "",
        "agent.py": """
            import torch
            from torch import nn

            class Agent:
                def __init__(self, width):
                    self.actor = nn.Linear(width, 1)
                    self.opt = torch.optim.Adam(self.actor.parameters())

                def update_actor(self, obs, target):
                    loss = nn.functional.mse_loss(self.actor(obs).squeeze(-1), target)
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
                    return {"loss": loss.item()}
            """,
        "train.py": """
            from agent import Agent

            agent = Agent(16)
            seen, outputs = 0.0, []
            for obs, target in loader:
                stats = agent.update_actor(obs, target)
                seen += stats["loss"]
                outputs.append(agent.actor(obs))
            """,
    })
    path = str(tmp_path / "train.py")
    codes = _codes(lint_path(path, ALL, project=Project(tmp_path)))
    assert (8, "TL501") not in codes  # the method's numbers
    assert (9, "TL501") in codes  # the module's outputs


# -- an evaluation whose model's forward differentiates (TL301) -----------------------------------------
# A field whose normals are the gradient of its output: the forward calls `torch.autograd.grad`
# (through a method of a submodule), so the evaluation must record; `no_grad` would break it.
_FIELD_MODELS = """
import torch
from torch import nn


class Field(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, width), nn.Softplus(), nn.Linear(width, 1))

    def forward(self, x):
        return self.net(x)

    def normals(self, x):
        x.requires_grad_(True)
        y = self.forward(x)
        return torch.autograd.grad(y, x, torch.ones_like(y), create_graph=True)[0]


class Shader(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.field = Field(width)
        self.color = nn.Linear(6, 3)

    def forward(self, points):
        {body}
"""

_FIELD_SCRIPT = """
import importlib

import torch
from torch.utils.data import DataLoader

from shading import Shader


def build(name):
    return getattr(importlib.import_module("shading"), name)


REGISTRY = {"shader": Shader}
model = {build}
model.eval()
for points in DataLoader(dataset, batch_size=256):
    torch.save(model(points), "out.pt")
"""


@pytest.mark.parametrize("body, build, expected, unproven", [
    # the forward reaches `torch.autograd.grad` through the submodule's method: the evaluation needs grad
    ("return self.color(torch.cat([points, self.field.normals(points)], -1))", "Shader(64)", set(), set()),
    # the class is chosen at run time and the project's Shader differentiates: unknown, not reported
    ("return self.color(torch.cat([points, self.field.normals(points)], -1))", "build(cfg.model)(64)", set(), {18}),
    # only the training branch differentiates: in eval mode the forward records for nothing
    ("n = points\n"
     "        if self.training:\n"
     "            n = self.field.normals(points)\n"
     "        return self.color(torch.cat([points, n], -1))", "Shader(64)", {18}, {18}),
    # the forward never reaches `normals` (only training code calls it): reported
    ("return self.color(torch.cat([points, self.field(points).expand(-1, 3)], -1))", "Shader(64)", {18}, {18}),
    # the same, with the class chosen at run time: no module of the project differentiates in its forward
    ("return self.color(torch.cat([points, self.field(points).expand(-1, 3)], -1))", "build(cfg.model)(64)",
     {18}, {18}),
    # a class chosen at run time with a keyword Shader does not take: not a Shader
    ("return self.color(torch.cat([points, self.field.normals(points)], -1))", "build(cfg.model)(depth=3)",
     {18}, {18}),
    # picked from a registry of the project's classes, one of which differentiates: unknown
    ("return self.color(torch.cat([points, self.field.normals(points)], -1))", "REGISTRY[cfg.model](64)",
     set(), {18}),
    # a registry none of whose classes differentiates: reported
    ("return self.color(torch.cat([points, self.field(points).expand(-1, 3)], -1))", "REGISTRY[cfg.model](64)",
     {18}, {18}),
])
def test_an_evaluation_whose_forward_computes_gradients_needs_them(tmp_path, body, build, expected, unproven):
    write(tmp_path, {"shading.py": _FIELD_MODELS.replace("{body}", body),
                     "render.py": _FIELD_SCRIPT.replace("{build}", build)})
    files = [str(tmp_path / "render.py"), str(tmp_path / "shading.py")]
    found = {f.line for r in lint_paths(files, ALL) if r.path.endswith("render.py") for f in r.findings
             if f.code == "TL301"}
    assert found == expected
    everything = Settings(select=ALL.select, include_unproven=True)
    found = {f.line for r in lint_paths(files, everything) if r.path.endswith("render.py") for f in r.findings
             if f.code == "TL301"}
    assert found == unproven


def test_a_hook_loader_the_framework_never_asks_for_feeds_no_evaluation(tmp_path):
    """TL602: a `test_dataloader` hook's loader is the framework's evaluation loader only when the
    framework asks for it: in a run over the whole project where no file calls `.test(...)` (nor
    builds a `LightningCLI`, which runs it by name), the loader goes where the project's own calls
    of the hook take it, here one batch drawn for pictures; checked without the rest of the
    project, the hook keeps its framework meaning (reported); a script that calls
    `trainer.test(...)` makes it an evaluation again."""
    write(tmp_path, {
        "data.py": """
            from lightning.pytorch import LightningDataModule
            from torch.utils.data import DataLoader

            class Faces(LightningDataModule):
                def train_dataloader(self):
                    return DataLoader(self.train_set, batch_size=64, shuffle=True)

                def test_dataloader(self):
                    return DataLoader(self.held_out, batch_size=64, shuffle=True)
            """,
        "model.py": """
            from lightning.pytorch import LightningModule

            class AutoEncoder(LightningModule):
                def on_validation_end(self):
                    faces, _ = next(iter(self.trainer.datamodule.test_dataloader()))
                    save_grid(self(faces))
            """,
        "run.py": """
            from lightning.pytorch import Trainer
            from data import Faces
            from model import AutoEncoder

            trainer = Trainer(max_epochs=5)
            trainer.fit(AutoEncoder(), datamodule=Faces())
            """,
    })
    data = str(tmp_path / "data.py")
    assert (10, "TL602") not in _codes(lint_path(data, ALL, project=Project(tmp_path)))
    assert (10, "TL602") in _codes(list(lint_paths([data], ALL))[0])
    with open(tmp_path / "run.py", "a") as script:
        script.write("trainer.test(AutoEncoder(), datamodule=Faces())\n")
    assert (10, "TL602") in _codes(lint_path(data, ALL, project=Project(tmp_path)))


_SCHEDULE_TRAIN = """
    import os

    import torch
    from schedules import get_beta_schedule

    def save(model, optimiser, epoch):
        torch.save({"model": model.state_dict(), "optimizer": optimiser.state_dict(), "epoch": epoch}, "last.pt")

    def train(model, loader):
        optimiser = torch.optim.Adam(model.parameters(), lr=1e-4)
        betas = get_beta_schedule(1000)
        start_epoch = 0
        if os.path.exists("last.pt"):
            ckpt = torch.load("last.pt", map_location="cpu")
            model.load_state_dict(ckpt["model"])
            optimiser.load_state_dict(ckpt["optimizer"])
            start_epoch = ckpt["epoch"] + 1
        for epoch in range(start_epoch, 100):
            for x in loader:
                loss = model(x, betas).mean()
                loss.backward()
                optimiser.step()
                optimiser.zero_grad()
            save(model, optimiser, epoch)
"""


@pytest.mark.parametrize("factory, fires", [
    # a noise schedule: the name `get_*schedule*` of a project function proves no LR scheduler
    ("import numpy as np\n\ndef get_beta_schedule(steps):\n    return np.linspace(1e-4, 0.02, steps)\n", False),
    # the same name returning torch's LR scheduler: the code proves it, and its state is missing
    ("import torch\n\ndef get_beta_schedule(steps, optimizer=None):\n"
     "    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)\n", True),
])
def test_a_project_schedule_factory_is_known_by_what_it_returns(tmp_path, factory, fires):
    write(tmp_path, {"schedules.py": factory, "train.py": _SCHEDULE_TRAIN})
    findings = [f for r in lint_paths([str(tmp_path / "train.py"), str(tmp_path / "schedules.py")], ALL)
                for f in r.findings]
    scheduler_findings = [f for f in findings if f.code == "TL404" and "scheduler" in f.message]
    assert bool(scheduler_findings) == fires, [f.message for f in findings]

def test_a_helper_every_caller_runs_without_grad_in_other_files(tmp_path):
    """TL501's 'computed with recording on': a helper that keeps each batch's embeddings is
    called (through another helper of its file) only inside `with torch.no_grad():` in the
    training script: no graph is kept. One call of it with recording on, from another file,
    makes the kept outputs carry their graphs."""
    write(tmp_path, {
        "embed.py": """
            import torch

            def collect(model, loader):
                kept = []
                for x, y in loader:
                    out = model(x)
                    kept.append(out)
                return torch.cat(kept)

            def centroid(model, loader):
                return collect(model, loader).mean(0)
            """,
        "train.py": """
            import torch
            from embed import centroid

            def fit(model, opt, loader, probe):
                for epoch in range(3):
                    with torch.no_grad():
                        anchor = centroid(model, probe)
                    for x, y in loader:
                        loss = (model(x) - anchor).pow(2).mean()
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
            """,
    })
    path = str(tmp_path / "embed.py")
    assert (8, "TL501") not in _codes(lint_path(path, ALL, project=Project(tmp_path)))
    write(tmp_path, {"report.py": """
        from embed import centroid

        def drift(model, probe):
            return centroid(model, probe).norm()
        """})
    assert (8, "TL501") in _codes(lint_path(path, ALL, project=Project(tmp_path)))

def test_eval_of_an_instance_of_a_plain_project_class_is_no_mode_switch(tmp_path):
    # `Translator` (another file) derives only from project classes that derive from nothing: its
    # `eval()` and `__call__` are its own methods, so the evaluation runs no module (TL301 refuted);
    # the same script over a class whose project base derives from `nn.Module` is still reported
    base = """
        import logging

        class Service:
            def __init__(self):
                self.log = logging.getLogger("svc")

            def eval(self):
                self.log.info("switching to the evaluation dictionary")
        """
    write(tmp_path, {
        "pyproject.toml": "",
        "services/base.py": base,
        "services/translator.py": """
            from services.base import Service

            class Translator(Service):
                def __call__(self, sentence):
                    return sentence[::-1]
            """,
        "score.py": """
            import torch
            from services.translator import Translator

            def main(lines):
                translator = Translator()
                translator.eval()
                outputs = []
                for line in lines:
                    outputs.append(translator(torch.tensor(line)))
                return outputs
            """,
    })
    target = [str(tmp_path / "score.py")]
    assert [f.code for f in list(lint_paths(target, ALL))[0].findings if f.code == "TL301"] == []
    (tmp_path / "services/base.py").write_text(textwrap.dedent(base).replace(
        "import logging\n", "import logging\nfrom torch import nn\n").replace(
        "class Service:", "class Service(nn.Module):"))
    assert [f.code for f in list(lint_paths(target, ALL))[0].findings if f.code == "TL301"] == ["TL301"]
    # a plain wrapper whose own eval() switches a torch module it holds is no plain class either
    (tmp_path / "services/base.py").write_text(textwrap.dedent("""
        from torch import nn

        class Service:
            def __init__(self):
                self.net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))

            def eval(self):
                self.net.eval()
        """))
    assert [f.code for f in list(lint_paths(target, ALL))[0].findings if f.code == "TL301"] == ["TL301"]


def test_a_loss_module_handed_in_returns_a_dict_of_numbers_from_another_file(tmp_path):
    """TL501: `loss, parts = loss_fn(...)` where `loss_fn` is a parameter typed with (and passed)
    a loss module of another file whose forward returns a dict it fills with `.item()` (a literal
    and `parts[key] = ...` stores): the kept parts are numbers. Stored as the tensor itself, the
    total keeps its graph."""
    losses = """
        import torch.nn as nn

        class Physics(nn.Module):
            def forward(self, pred, target):
                fit = (pred - target).pow(2).mean()
                smooth = pred.diff(dim=1).abs().mean()
                total = fit + smooth
                parts = {{"fit": fit.item()}}
                parts["total"] = {total}
                return total, parts
        """
    write(tmp_path, {
        "losses.py": losses.format(total="total.item()"),
        "train.py": """
            from losses import Physics

            def epoch(model, loader, opt, loss_fn: Physics):
                totals = {"fit": 0.0, "total": 0.0}
                for x, y in loader:
                    loss, parts = loss_fn(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    totals["total"] += parts["total"]
                return totals
            """,
    })
    path = str(tmp_path / "train.py")
    assert not {line for line, code in _codes(lint_path(path, ALL, project=Project(tmp_path))) if code == "TL501"}
    write(tmp_path, {"losses.py": losses.format(total="total")})
    found = {line for line, code in _codes(lint_path(path, ALL, project=Project(tmp_path))) if code == "TL501"}
    assert found == {11}


def test_a_schedule_of_the_project_built_by_a_factory_in_another_file(tmp_path):
    """TL106: `opt, sched = make_optim(...)` where the factory (optim.py) builds a schedule class of
    the project (schedules.py) whose `step()` writes the coming update's rate: stepping it first is
    its contract. A factory returning torch's `OneCycleLR` there is flagged."""
    write(tmp_path, {
        "schedules.py": """
            class Warmup:
                def __init__(self, optimizer, peak, warmup):
                    self.optimizer, self.peak, self.warmup = optimizer, peak, warmup
                    self.count = 0

                def step(self):
                    self.count += 1
                    for group in self.optimizer.param_groups:
                        group["lr"] = self.peak * min(1.0, self.count / self.warmup)
            """,
        "optim.py": """
            import torch
            from schedules import Warmup

            def make_optim(model, peak):
                opt = torch.optim.AdamW(model.parameters(), lr=0.0)
                sched = Warmup(opt, peak, warmup=100)
                return opt, sched
            """,
        "train.py": """
            import torch
            from optim import make_optim

            def train(model, loader):
                opt, sched = make_optim(model, 1e-3)
                for x, y in loader:
                    sched.step()
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            """,
    })
    path = str(tmp_path / "train.py")
    assert (8, "TL106") not in _codes(lint_path(path, ALL, project=Project(tmp_path)))
    write(tmp_path, {"optim.py": """
        import torch

        def make_optim(model, peak):
            opt = torch.optim.AdamW(model.parameters(), lr=peak)
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=peak, total_steps=1000)
            return opt, sched
        """})
    assert (8, "TL106") in _codes(lint_path(path, ALL, project=Project(tmp_path)))


def test_a_frozen_key_encoder_method_of_a_model_in_another_file(tmp_path):
    """TL501: `feats = net.key_encoder(x)` kept across a loader loop, where `net` is one of two
    model classes of model.py and only the momentum one defines `key_encoder`, which returns the
    forward of a submodule whose parameters it freezes: no graph. Handed the online output, the
    graph comes through its input."""
    model = """
        import copy
        import torch.nn as nn

        class Plain(nn.Module):
            def __init__(self, body):
                super().__init__()
                self.online = body

            def forward(self, x):
                return self.online(x)

        class Momentum(nn.Module):
            def __init__(self, body):
                super().__init__()
                self.online = body
                self.target = copy.deepcopy(body)
                for p in self.target.parameters():
                    p.requires_grad = False

            def forward(self, x):
                return self.online(x)

            def key_encoder(self, x):
                return self.target(x)
        """
    write(tmp_path, {
        "model.py": model,
        "train.py": """
            import torch
            from model import Momentum, Plain

            def epoch(net, loader, opt):
                kept = []
                for x, _ in loader:
                    loss = net(x).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    kept.append(net.key_encoder(x))
                return torch.cat(kept)

            def main(body, loader, slow):
                if slow:
                    net = Momentum(body).cuda()
                else:
                    net = Plain(body).cuda()
                epoch(net, loader, torch.optim.SGD(net.online.parameters(), lr=0.1))
            """,
    })
    path = str(tmp_path / "train.py")
    assert (12, "TL501") not in _codes(lint_path(path, ALL, project=Project(tmp_path)))
    text = (tmp_path / "train.py").read_text()
    (tmp_path / "train.py").write_text(text.replace("net.key_encoder(x)", "net.key_encoder(net(x))"))
    assert (12, "TL501") in _codes(lint_path(path, ALL, project=Project(tmp_path)))


# -- round 8: premises a finding of TL301 takes from other files -------------------------------------
_FROZEN_NET = """
    import torch.nn as nn


    class Features(nn.Module):
        def __init__(self, width, requires_grad=False):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, width, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
            for param in self.parameters():
                param.requires_grad = requires_grad

        def forward(self, x):
            return self.body(x).flatten(1)
"""

_FEATURE_SCORE = """
    from nets import Features


    def activations(batches, model):
        model.eval()
        return [model(x).cpu().numpy() for x in batches]


    def score(batches):
        model = Features(64{extra})
        return activations(batches, model)
"""


@pytest.mark.parametrize("extra, expected", [("", set()), (", requires_grad=True", {7})])
def test_a_model_whose_class_freezes_every_parameter_in_another_file_records_no_graph(tmp_path, extra, expected):
    """`Features(64)` of a class (in nets.py) whose `__init__` leaves every parameter frozen by default:
    its evaluation records nothing; built with `requires_grad=True`, it records a graph."""
    write(tmp_path, {"nets.py": _FROZEN_NET, "score.py": _FEATURE_SCORE.replace("{extra}", extra)})
    results = list(lint_paths([str(tmp_path / "nets.py"), str(tmp_path / "score.py")], ALL))
    found = {f.line for r in results if r.path.endswith("score.py") for f in r.findings if f.code == "TL301"}
    assert found == expected


_JITTOR_DECODE = """
    import jittor as jt


    def decode(model, prompts):
        model.eval()
        outputs = []
        for ids in prompts:
            logits = model(jt.array(ids))
            outputs.append(jt.argmax(logits, dim=-1)[0].numpy())
        return outputs
"""

_JITTOR_DEMO = """
    import jittor as jt
    from generation import decode


    def main(model, prompts):
    {body}
"""


@pytest.mark.parametrize("body, expected", [
    ("    with jt.no_grad():\n            print(decode(model, prompts))", set()),
    ("    print(decode(model, prompts))", {9}),
])
def test_a_jittor_helper_every_caller_runs_under_jt_no_grad_records_no_graph(tmp_path, body, expected):
    """Jittor's `jt.no_grad()` is a grad switch like torch's: a helper only called under it records nothing."""
    write(tmp_path, {"generation.py": _JITTOR_DECODE, "demo.py": _JITTOR_DEMO.replace("{body}", body)})
    results = list(lint_paths([str(tmp_path / "generation.py"), str(tmp_path / "demo.py")], ALL))
    found = {f.line for r in results if r.path.endswith("generation.py") for f in r.findings if f.code == "TL301"}
    assert found == expected


def test_a_grad_switch_in_another_files_helper_holds_after_its_call(tmp_path):
    """`torch.set_grad_enabled(flag)` run as a statement by a helper of another file switches
    recording for the code after the call, by the literal the call binds to `flag`; a helper that
    switches only inside a `with` leaves recording on (TL301 still reports)."""
    write(tmp_path, {
        "pyproject.toml": "",
        "phases.py": """
            import torch

            def recording(enabled):
                torch.set_grad_enabled(enabled)
            """,
        "scoped.py": """
            import torch

            def recording(enabled):
                with torch.set_grad_enabled(enabled):
                    print(enabled)
            """,
        "evaluate.py": """
            from phases import recording

            def predict(model, loader):
                model.eval()
                recording(False)
                return [model(x).argmax(-1) for x, _ in loader]
            """,
        "evaluate_scoped.py": """
            from scoped import recording

            def predict(model, loader):
                model.eval()
                recording(False)
                return [model(x).argmax(-1) for x, _ in loader]
            """,
    })
    results = {Path(r.path).name: [f.code for f in r.findings if f.code == "TL301"]
               for r in lint_paths([str(tmp_path / "evaluate.py"), str(tmp_path / "evaluate_scoped.py")], ALL)}
    assert results == {"evaluate.py": [], "evaluate_scoped.py": ["TL301"]}


def test_grad_switches_of_a_helper_by_the_flags_a_call_binds():
    """`FunctionSummary.grad_exit`: the state the helper's statement switches leave for these flags."""
    summary = summary_of("""
        import torch

        def set_phase(model, training):
            if training:
                model.train()
                torch.set_grad_enabled(True)
            else:
                model.eval()
                torch.set_grad_enabled(False)

        def follow(enabled):
            torch.set_grad_enabled(not enabled)

        def scoped(enabled):
            with torch.set_grad_enabled(enabled):
                pass

        def sometimes(enabled, fast):
            for _ in range(fast):
                torch.set_grad_enabled(enabled)
        """)
    phase = summary.function("set_phase")
    assert phase.grad_exit({"training": False}) == "off" and phase.grad_exit({"training": True}) == "on"
    assert phase.grad_exit({}) is None  # the flag is not known: either branch
    assert summary.function("follow").grad_exit({"enabled": True}) == "off"
    assert summary.function("scoped").grad_exit({"enabled": False}) is None  # the `with` restores it
    assert summary.function("sometimes").grad_exit({"enabled": False}) is None  # in a loop: maybe never


def test_a_module_class_wrapping_only_frozen_parts_is_frozen_by_construction():
    """`ClassSummary.frozen_by_construction`: every part `__init__` adds is frozen for the literals
    the construction binds (the branch of its `if` they decide), the rest plain values."""
    summary = summary_of("""
        import torch
        from torch import nn

        class Backbone(nn.Module):
            def __init__(self, width, trainable=False):
                super().__init__()
                self.body = nn.Conv2d(3, width, 3)
                if not trainable:
                    for p in self.parameters():
                        p.requires_grad = False

        class Metric(nn.Module):
            def __init__(self, kind="small"):
                super().__init__()
                self.kind = kind
                self.offset = torch.tensor([0.5]).view(1, 1, 1, 1)
                if self.kind in ("small", "tiny"):
                    self.net = Backbone(8)
                else:
                    self.net = nn.Conv2d(3, 8, 3)
                self.width = self.net.body.out_channels

        class Headed(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = Backbone(8)
                self.head = nn.Linear(8, 2)
        """)
    metric = summary.klass("Metric")
    built = lambda text: cst.parse_expression(text)  # noqa: E731
    assert metric.frozen_by_construction(built("Metric()")) is not None
    assert metric.frozen_by_construction(built('Metric(kind="tiny")')) is not None
    assert metric.frozen_by_construction(built('Metric(kind="large")')) is None  # a trainable conv
    assert metric.frozen_by_construction(built("Metric(kind=k)")) is None  # either branch
    assert summary.klass("Backbone").frozen_by_construction(built("Backbone(8, trainable=True)")) is None
    assert summary.klass("Headed").frozen_by_construction(built("Headed()")) is None


_IDLE_VALIDATION = """
    import lightning as L
    import torch.nn.functional as F
    from torch.utils.data import DataLoader


    class Colorizer(L.LightningModule):
        def __init__(self, net, photos, sketches):
            super().__init__()
            self.net, self.photos, self.sketches = net, photos, sketches

        def training_step(self, batch, batch_idx):
            sketch, photo = batch
            return F.l1_loss(self.net(sketch), photo)

        def train_dataloader(self):
            return DataLoader(self.photos, batch_size=16, shuffle=True)

        def val_dataloader(self):
            return DataLoader(self.sketches, batch_size=4, shuffle=True)

        def validation_step(self, batch, batch_idx):
            \"\"\"Not written yet.\"\"\"
            pass
    """


def test_a_validation_loader_whose_hooks_compute_nothing_feeds_no_evaluation(tmp_path):
    """TL602: in a run over the whole project, a LightningModule's shuffled `val_dataloader` whose
    batches go only to a `validation_step` that computes nothing (a docstring and `pass`) measures
    nothing; a subclass in another file that computes in its own `validation_step`, a callback
    that reads the batches (`on_validation_batch_end`), or a check of the file alone keeps it."""
    write(tmp_path, {"model.py": _IDLE_VALIDATION, "train.py": """
        import lightning as L
        from model import Colorizer

        L.Trainer(max_epochs=3).fit(Colorizer(net, photos, sketches))
        """})
    assert (20, "TL602") not in _codes(lint_path(str(tmp_path / "model.py"), ALL, project=Project(tmp_path)))
    assert (20, "TL602") in _codes(lint_path(str(tmp_path / "model.py"), ALL))
    for name, text in (("sub.py", """
            from model import Colorizer

            class Scored(Colorizer):
                def validation_step(self, batch, batch_idx):
                    self.log("val", self.net(batch[0]).mean())
            """), ("callbacks.py", """
            import lightning as L

            class Peek(L.Callback):
                def on_validation_batch_end(self, trainer, module, outputs, batch, batch_idx):
                    trainer.logger.log_metrics({"mean": batch[0].mean().item()})
            """)):
        write(tmp_path, {name: text, "train.py": f"""
            import lightning as L
            from model import Colorizer
            from {name[:-3]} import *

            L.Trainer(max_epochs=3).fit(Colorizer(net, photos, sketches))
            """})
        assert (20, "TL602") in _codes(lint_path(str(tmp_path / "model.py"), ALL, project=Project(tmp_path))), name
        (tmp_path / name).unlink()


_FITTER = """
    import torch
    from torch.utils.data import DataLoader


    class Fitter:
        def __init__(self, model, batches: DataLoader, opt):
            self.model, self.opt = model, opt
            self.batches = batches

        def epoch(self):
            total = 0.0
            for x, y in self.batches:
                self.opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(self.model(x), y)
                loss.backward()
                self.opt.step()
                total += loss.item()
            return total / len(self.batches)


    class LoopFitter(Fitter):
        def run(self, epochs):
            return [self.epoch() for _ in range(epochs)]
    """

_FITTER_RUN = """
    from torch.utils.data import DataLoader

    from fitter import LoopFitter


    def make_batches(dataset, size, drop_last=True):
        return DataLoader(dataset, batch_size=size, shuffle=True, drop_last=drop_last)


    def main(model, opt, dataset, cfg):
        fitter = LoopFitter(model, make_batches(dataset, cfg.batch_size), opt)
        fitter.run(cfg.epochs)
    """

_FITTER_TEST = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from fitter import Fitter


    def _loaders(n=40):
        data = TensorDataset(torch.rand(n, 3), torch.randint(0, 2, (n,)))
        loader = DataLoader(data, batch_size=8, drop_last=True)
        return loader, loader


    def test_epoch():
        class Plain(Fitter):
            pass

        train, _ = _loaders()
        assert Plain(torch.nn.Linear(3, 2), train, opt=None).epoch() > 0
    """


def test_a_loader_every_construction_of_its_class_passes_with_drop_last_has_no_short_batch(tmp_path):
    """TL601: `self.batches` set from an `__init__` parameter, when every construction of the
    class and of its subclasses (another file's, a test's nested class) in the project passes a
    loader built with `drop_last=True` (a factory's default, a test helper's tuple element): every
    batch is full, the mean of batch means is exact. Look-alikes that still fire: a factory whose
    `drop_last` default is False, one call site without it, a subclass with its own `__init__`, a
    class kept in a registry, the file checked alone."""
    files = {"fitter.py": _FITTER, "run.py": _FITTER_RUN, "tests/test_fitter.py": _FITTER_TEST}
    write(tmp_path, files)
    fitter = str(tmp_path / "fitter.py")
    assert (19, "TL601") not in _codes(lint_path(fitter, ALL, project=Project(tmp_path)))
    assert (19, "TL601") in _codes(lint_path(fitter, ALL))
    for name, old, new in (
            ("run.py", "drop_last=True):", "drop_last=False):"),
            ("tests/test_fitter.py", "train, _ = _loaders()", "train = DataLoader(TensorDataset(torch.rand(9, 3)), batch_size=4)"),
            ("tests/test_fitter.py", "            pass\n", "            def __init__(self, model, batches, opt):\n"
                                                          "                super().__init__(model, batches[:1], opt)\n"),
            # the class is handed around by name: an instance may be built where no call shows
            ("run.py", "def main(", "FITTERS = {\"loop\": LoopFitter}\n\n\ndef main(")):
        write(tmp_path, {**files, name: files[name].replace(old, new)})
        assert files[name].replace(old, new) != files[name]
        assert (19, "TL601") in _codes(lint_path(fitter, ALL, project=Project(tmp_path))), (name, new)


_SCORER = """
    import numpy as np
    import torch
    from torch.utils.data import DataLoader


    class Scorer:
        def __init__(self, model, loader: DataLoader):
            self.model = model
            self.loader = loader

        @torch.no_grad()
        def score_text(self):
            losses = [torch.nn.functional.cross_entropy(self.model(x), y).item() for x, y in self.loader]
            for x, y in self.loader:
                losses.append(torch.nn.functional.cross_entropy(self.model(x), y).item())
            return np.mean(losses)

        @torch.no_grad()
        def score_audio(self):
            losses = []
            for x, y in self.loader:
                losses.append(torch.nn.functional.cross_entropy(self.model(x), y).item())
            return np.mean(losses)
    """


def test_a_method_only_run_on_instances_built_with_drop_last_has_no_short_batch(tmp_path):
    """TL601: the construction whose instance runs `score_audio` passes a loader with
    `drop_last=True`; the other construction's instance only runs `score_text` (read as
    `scorer.score_text()` and nothing else): `score_audio` sees full batches, `score_text` does
    not. Once the second instance is handed to a helper, it may run either method."""
    files = {"scorer.py": _SCORER,
             "audio.py": """
                 from torch.utils.data import DataLoader
                 from scorer import Scorer

                 if __name__ == "__main__":
                     clips = DataLoader(clip_set, batch_size=16, drop_last=True)
                     scorer = Scorer(net, clips)
                     print(scorer.score_audio())
                 """,
             "text.py": """
                 from torch.utils.data import DataLoader
                 from scorer import Scorer

                 def main(net, sentences):
                     scorer = Scorer(net, loader=DataLoader(sentences, batch_size=16))
                     print(scorer.score_text())
                 """}
    write(tmp_path, files)
    scorer = str(tmp_path / "scorer.py")
    found = _codes(lint_path(scorer, ALL, project=Project(tmp_path)))
    assert (24, "TL601") not in found and (17, "TL601") in found, found
    write(tmp_path, {"text.py": files["text.py"].replace("print(scorer.score_text())", "report(scorer)")})
    assert (24, "TL601") in _codes(lint_path(scorer, ALL, project=Project(tmp_path)))


@pytest.mark.parametrize("projection, fires", [(False, False), (True, True)])
def test_a_model_of_another_file_whose_forward_runs_under_no_grad_records_nothing(tmp_path, projection, fires):
    """TL301: the model's class is in models.py; its `forward` runs the encoder inside `no_grad`
    through a method of its class. A trainable projection after that block records a graph."""
    head = "return self.project(self.encode(x))" if projection else "return self.encode(x).flatten(1)"
    write(tmp_path, {
        "pyproject.toml": "",
        "models.py": f"""
            import torch
            from torch import nn


            class Frozen(nn.Module):
                def __init__(self, encoder):
                    super().__init__()
                    self.encoder = encoder
                    self.project = nn.Linear(512, 64)

                def encode(self, x):
                    with torch.no_grad():
                        return self.encoder(x)

                def forward(self, x):
                    {head}
            """,
        "embed.py": """
            import torch
            from models import Frozen


            def embed(model, loader):
                model.eval()
                return [model(x).cpu() for x in loader]


            net = Frozen(torch.hub.load("repo", "net"))
            embed(net, loader)
            """,
    })
    result = list(lint_paths([str(tmp_path / "embed.py")], ALL))[0]
    assert ([f.line for f in result.findings if f.code == "TL301"] == [8]) is fires


@pytest.mark.parametrize("hook, fires", [("validation_step", False), ("on_train_epoch_end", True)])
def test_a_lightning_hook_of_a_project_base_in_another_file(tmp_path, hook, fires):
    """TL301: `Classifier` derives from a project base (base.py) that derives from LightningModule;
    the Trainer runs its `validation_step` with grad off, its `on_train_epoch_end` with grad on."""
    write(tmp_path, {
        "pyproject.toml": "",
        "base.py": """
            import pytorch_lightning as pl


            class Base(pl.LightningModule):
                def configure_optimizers(self):
                    return None
            """,
        "model.py": f"""
            from base import Base


            class Classifier(Base):
                def __init__(self, net, loader):
                    super().__init__()
                    self.net, self.loader = net, loader

                def {hook}(self, *args):
                    self.net.eval()
                    for x, y in self.loader:
                        self.log("hits", (self.net(x).argmax(-1) == y).sum())
            """,
    })
    result = list(lint_paths([str(tmp_path / "model.py")], ALL))[0]
    assert any(f.code == "TL301" for f in result.findings) is fires


EPOCH_LOOP = """
    import torch


    def run_epoch(net, opt, feed, sched, cfg):
        done = 0
        for i, (a, b) in enumerate(feed):
            loss = torch.nn.functional.mse_loss(net(a), b) / cfg.micro
            loss.backward()
            done += 1
            if done == cfg.micro or i == len(feed) - 1:
                opt.step()
                opt.zero_grad()
                done = 0
            sched.step()
    """


@pytest.mark.parametrize("horizon, fires", [
    # every length counts the micro-batches of the loader the call hands the loop: on time
    ("per = len(train_feed)", False),
    # counted in updates (divided by the accumulation count under another name): ends early
    ("per = len(train_feed) // cfg.micro", True),
    # the micro-batches of another loader than the one the loop goes through
    ("per = len(val_feed)", True),
], ids=["micro-batches-of-the-loop's-loader", "divided-by-k", "another-loader"])
def test_a_scheduler_built_by_a_caller_in_another_file_on_the_micro_batch_clock(tmp_path, horizon, fires):
    """`run_epoch(..., plan, ...)` steps it on every micro-batch; main.py builds it (a
    SequentialLR of a warmup and a step decay) counted in the micro-batches of the loader it passes."""
    main = f"""
        import torch
        from torch.optim import lr_scheduler
        from loop import run_epoch

        def main(cfg, net, train_feed, val_feed):
            opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr)
            {horizon}
            warm = lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=per * cfg.warm_epochs)
            decay = lr_scheduler.StepLR(opt, step_size=per * cfg.decay_every, gamma=0.5)
            plan = lr_scheduler.SequentialLR(opt, schedulers=[warm, decay], milestones=[per * cfg.warm_epochs])
            for epoch in range(cfg.epochs):
                run_epoch(net, opt, train_feed, plan, cfg)
        """
    write(tmp_path, {"pyproject.toml": "", "loop.py": EPOCH_LOOP, "main.py": main})
    found = [f for f in lint_path(str(tmp_path / "loop.py"), ALL, project=Project(tmp_path)).findings
             if f.code == "TL101"]
    assert [f.line for f in found] == ([15] if fires else [])


UNCALLED_SAVE_SCRIPT = """
    import torch

    net = build()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[30, 60])


    def keep(epoch):
        torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, f"ep{epoch}.pt")


    def restore(epoch):
        ckpt = torch.load(f"ep{epoch}.pt", map_location="cpu")
        net.load_state_dict(ckpt["net"])
        opt.load_state_dict(ckpt["opt"])
        start_epoch = ckpt["epoch"] + 1
        return start_epoch


    def score(epoch):
        net.eval()
        with torch.no_grad():
            return sum(float(net(x).mean()) for x in batches())


    if __name__ == "__main__":
        {use}
        score(0)
    """


@pytest.mark.parametrize("use, other, reported", [
    # nothing calls `keep`; the other script's `keep` is its own def: no resume point runs
    ("pass", "import torch\n\ndef keep(state):\n    torch.save(state, 'k.pt')\n\nkeep({})\n", False),
    # the same, but handed on as a callback in its own file: it may run
    ("hooks = [keep]", "import torch\n\ndef keep(state):\n    torch.save(state, 'k.pt')\n", True),
    # another file imports it from this script and calls it
    ("pass", "from evalrun import keep\n\nkeep(3)\n", True),
    # a star import of this script brings it in
    ("pass", "from evalrun import *\n\nkeep(3)\n", True),
    # a module of definitions only (no `__main__` block, no module code calling its functions): a
    # library, whose functions code the project does not hold may call
    (None, "import torch\n\ndef keep(state):\n    torch.save(state, 'k.pt')\n\nkeep({})\n", True),
], ids=["own-def-elsewhere", "callback", "imported", "star-imported", "library-module"])
def test_a_save_in_a_function_no_code_reaches_is_no_resume_point(tmp_path, use, other, reported):
    script = UNCALLED_SAVE_SCRIPT.replace("{use}", use) if use is not None else \
        UNCALLED_SAVE_SCRIPT[:UNCALLED_SAVE_SCRIPT.index("    if __name__")]
    write(tmp_path, {"pyproject.toml": "", "evalrun.py": script, "other.py": other})
    result = lint_path(str(tmp_path / "evalrun.py"), ALL, project=Project(tmp_path))
    assert ((10, "TL404") in _codes(result)) is reported
    if not reported:  # unproven, not refuted: an entry point named outside Python may still run it
        guessed = lint_path(str(tmp_path / "evalrun.py"), Settings(select=ALL.select, include_unproven=True),
                            project=Project(tmp_path))
        [finding] = [f for f in guessed.findings if f.code == "TL404" and f.line == 10]
        assert any(e.verdict == "unknown" and "`keep`" in e.premise for e in finding.evidence)


def test_the_files_mentioning_a_word_are_found_once_per_component_and_again_after_a_refresh(tmp_path):
    """`mentioning` answers each (component, words) once: the files of a component ask the same
    questions. A refresh (a file saved in the editor) asks again; another component has its own answer."""
    write(tmp_path, {"pyproject.toml": "", "a.py": "import b\nb.run(1)\n", "b.py": "def run(x):\n    return x\n",
                     "c.py": "def run(y):\n    return y\n"})
    project = Project.for_paths([tmp_path / name for name in ("a.py", "b.py", "c.py")])
    summaries = summaries_of(project)
    a, b, c = (project.real(tmp_path / name) for name in ("a.py", "b.py", "c.py"))
    assert summaries.mentioning(str(a), (".run(",)) == [a]
    assert summaries.mentioning(str(b), (".run(",)) == [a]
    found = summaries.mentioning(str(b), ("def run",))
    found.reverse()  # a caller's own copy: reordering it changes no later answer
    assert summaries.mentioning(str(a), ("def run",)) == [b]
    assert summaries.mentioning(str(c), ("def run",)) == [c]  # c imports and is imported by nothing
    (tmp_path / "a.py").write_text("import b\nb.run(1)\nb.run(2)\n")
    (tmp_path / "b.py").write_text("import a\n\ndef run(x):\n    return a.run(x)\n")
    project.refresh()
    assert summaries.mentioning(str(a), (".run(",)) == sorted([a, b])
