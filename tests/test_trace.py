"""`trainlint trace`: the user's script really runs (a child interpreter with torch), and every
static finding is joined to what the run showed.

The scripts in tests/fixtures/trace/ mark their static findings with `# expect:` (test_fixtures
checks the static side); here each bad script must have every marked finding CONFIRMED, and each
good twin nothing CONFIRMED and nothing RUNTIME-ONLY. The traces start at once, three at a time, in
module fixtures (each takes a few seconds of CPU, mostly importing torch): `quick_reports` for the
default suite, `reports` (every script and shape, about 45 children) for the tests marked `slow`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import signal
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from trainlint.finding import Finding, Severity
from trainlint.settings import Settings, resolve_selection
from trainlint.runtime import resume
from trainlint.runtime.resume import resume_check
from trainlint.runtime.trace import (CONFIRMED, NOT_CONFIRMED, NOT_REACHED, TraceFailed, TraceReport, join,
                                     render_json, render_text, trace_script)

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "tests" / "fixtures" / "trace"
EXAMPLES = ROOT / "examples"
EXPECT = re.compile(r"#.*?\bexpect:\s*(?P<codes>TL\d{3}(?:\s*,\s*TL\d{3})*)")
STYLES = ("plain_accumulation", "amp", "trainer", "accelerate", "eval", "checkpoint", "data_order")


def expected(path: Path) -> set[tuple[int, str]]:
    found = set()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            found.update((number, code.strip()) for code in match.group("codes").split(","))
    return found


def _make_checkpoints(folder: Path) -> tuple[Path, Path]:
    """A pickled checkpoint for evaluate_checkpoint.py and a real resume checkpoint written by
    finetune_accumulation.py itself (one epoch, untraced)."""
    pickled = folder / "classifier.pkl"
    code = textwrap.dedent(f"""
        import importlib.util, pickle
        spec = importlib.util.spec_from_file_location("ev", {str(EXAMPLES / "evaluate_checkpoint.py")!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        with open({str(pickled)!r}, "wb") as handle:
            pickle.dump({{"model": module.Classifier().state_dict()}}, handle)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    out = folder / "finetune"
    subprocess.run([sys.executable, str(EXAMPLES / "finetune_accumulation.py"), "--epochs", "1", "--out", str(out)],
                   check=True, capture_output=True, cwd=folder)
    return pickled, out / "last.pt"


TIMEOUT = 30  # seconds for the script that never ends (torch imports well within it)


def _hanging_script(folder: Path) -> Path:
    """Two optimizer steps, then it waits forever; `finally:` shows the stop reaches the script."""
    path = folder / "hangs.py"
    path.write_text(textwrap.dedent("""\
        import os
        import time

        import torch

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        try:
            for step in range(2):
                model(torch.randn(8, 4)).pow(2).mean().backward()
                optimizer.step()
            while True:
                time.sleep(0.05)
        finally:
            torch.save(model.state_dict(), os.path.join(os.path.dirname(__file__), "last.pt"))
    """))
    return path


# Small scripts of the shapes `trace` once got wrong (issue 27), traced in the module fixture.
SHAPES = {
    # LBFGS: the closure clears and backpropagates several times inside one step
    "closure.py": """\
        import torch

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5)
        x, y = torch.randn(16, 4), torch.randn(16, 1)
        for step in range(10):
            def closure():
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                return loss
            optimizer.step(closure)
        """,
    # the stop after --max-steps is caught by a bare except and the loop goes on
    "swallows.py": """\
        import sys

        import torch

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(50):
            with open(sys.argv[1], "a") as log:
                log.write(f"{step}\\n")
            try:
                model(torch.randn(8, 4)).pow(2).mean().backward()
                model(torch.randn(8, 4)).pow(2).mean().backward()
                optimizer.step()
                optimizer.zero_grad()
            except:
                continue
        """,
    "file_object_save.py": """\
        import sys

        import torch

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            model(torch.randn(8, 4)).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            with open(sys.argv[1], "wb") as f:
                torch.save(model.state_dict(), f)
        """,
    # the model comes from another module: its mode dependence is known only at run time
    "nets.py": """\
        from torch import nn


        class Gate(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = nn.Linear(4, 1)

            def forward(self, x):
                return self.inner(x) if self.training else self.inner(x) * 0.5


        def build(gated=False):
            return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), Gate() if gated else nn.Linear(4, 1))
        """,
    "modes.py": """\
        import sys

        import torch

        from nets import build


        def evaluate(model):
            model.eval()
            with torch.no_grad():
                return model(torch.randn(4, 4)).mean().item()


        def probe(model):
            with torch.no_grad():
                return model(torch.randn(4, 4)).mean().item()


        model = build(gated=sys.argv[1:] == ["--gated"])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model.train()
        for step in range(6):
            model(torch.randn(8, 4)).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            print(probe(model))
            if step % 2 == 0:
                print(evaluate(model))
        """,
    # ignores the stop signals, leaves a grandchild in a session of its own, then never ends
    "stubborn.py": """\
        import os
        import signal
        import sys
        import time

        import torch

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                with open(sys.argv[1], "w") as handle:
                    handle.write(str(os.getpid()))
                while True:
                    time.sleep(0.1)
            os._exit(0)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(2):
            model(torch.randn(8, 4)).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
        with open(sys.argv[2], "w") as handle:
            handle.write(str(os.getpid()))
        while True:
            time.sleep(0.05)
        """,
    "exits.py": """\
        import os
        import signal
        import sys

        import torch

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(2):
            model(torch.randn(8, 4)).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
        if sys.argv[1] == "exit":
            os._exit(7)
        os.kill(os.getpid(), signal.SIGKILL)
        """,
    "crashes_early.py": """\
        import torch

        model = torch.nn.Linear(4, 1)
        raise RuntimeError("\\x1b[31mno such config\\x1b[0m")
        """,
    # a hand-written SGD update: no optimizer step ever runs
    "manual_sgd.py": """\
        import torch

        model = torch.nn.Linear(4, 1)
        for step in range(2000):
            model(torch.randn(8, 4)).pow(2).mean().backward()
            with torch.no_grad():
                for param in model.parameters():
                    param -= 0.01 * param.grad
                    param.grad = None
        """,
    "gan.py": """\
        import torch

        generator, critic = torch.nn.Linear(2, 4), torch.nn.Linear(4, 1)
        opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
        opt_d = torch.optim.Adam(critic.parameters(), lr=1e-3)
        for step in range(10):
            fake = generator(torch.randn(8, 2))
            opt_d.zero_grad()
            (critic(fake.detach()).mean() - critic(torch.randn(8, 4)).mean()).backward()
            opt_d.step()
            opt_g.zero_grad()
            (-critic(fake).mean()).backward()
            opt_g.step()
        """,
    # `--resume-check`: a checkpoint saved once an epoch (6 update steps of 2 micro-batches), after
    # the step K=2 asks for; atomically (a temporary file, then os.replace) or in place
    "epoch_save.py": """\
        import os
        import sys

        import torch

        out, how = sys.argv[1], sys.argv[2]
        resume = sys.argv[sys.argv.index("--resume") + 1] if "--resume" in sys.argv else None
        if resume is None and os.path.exists(out):
            resume = out
        torch.manual_seed(0)
        data, target = torch.randn(48, 4), torch.randn(48, 1)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        start = 0
        if resume is not None:
            checkpoint = torch.load(resume)
            model.load_state_dict(checkpoint["model"])
            optimizer.load_state_dict(checkpoint["optimizer"])
            start = checkpoint["epoch"] + 1
        for epoch in range(start, 3):
            order = torch.randperm(48, generator=torch.Generator().manual_seed(epoch))
            for micro in range(12):
                batch = order[micro * 4:micro * 4 + 4]
                (torch.nn.functional.mse_loss(model(data[batch]), target[batch]) / 2).backward()
                if micro % 2 == 1:
                    optimizer.step()
                    optimizer.zero_grad()
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}
            if how == "atomic":
                torch.save(state, out + ".tmp")
                os.replace(out + ".tmp", out)
            else:
                torch.save(state, out)
        """,
}


# `--resume-check`: a script that saves and restores everything (model, optimizer, scheduler,
# scaler, step, RNG state and its data order), and variants that leave one part out.
RESUME_SCRIPT = """\
import os
import sys

import torch
from torch import nn

out = sys.argv[1]
resume = sys.argv[sys.argv.index("--resume") + 1] if "--resume" in sys.argv else None
if resume is None and os.path.exists(out):
    resume = out  # a run that was stopped goes on from its last checkpoint
torch.manual_seed(0)
data, target = torch.randn(64, 4), torch.randn(64, 1)
model = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.2), nn.Linear(16, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 1 / (1 + epoch))
scaler = torch.amp.GradScaler("cpu", enabled=False)
order = torch.randperm(64, generator=torch.Generator().manual_seed(1))
step = 0
if resume is not None:
    checkpoint = torch.load(resume)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])  # SAVES_OPTIMIZER
    scheduler.load_state_dict(checkpoint["scheduler"])  # SAVES_SCHEDULER
    scaler.load_state_dict(checkpoint["scaler"])
    torch.set_rng_state(checkpoint["rng"])  # SAVES_RNG
    step, order = checkpoint["step"], checkpoint["order"]
while step < 12:
    batch = order[(step * 8) % 64:(step * 8) % 64 + 8]
    loss = nn.functional.mse_loss(model(data[batch]), target[batch])
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    step += 1
    state = {"model": model.state_dict(), "scaler": scaler.state_dict(), "step": step, "order": order}
    state["optimizer"] = optimizer.state_dict()  # SAVES_OPTIMIZER
    state["scheduler"] = scheduler.state_dict()  # SAVES_SCHEDULER
    state["rng"] = torch.get_rng_state()  # SAVES_RNG
    torch.save(state, out + ".tmp")
    os.replace(out + ".tmp", out)
"""


def resume_script(leaves_out: str | None) -> str:
    return "".join(line + "\n" for line in RESUME_SCRIPT.splitlines()
                   if leaves_out is None or f"# SAVES_{leaves_out.upper()}" not in line)


def _shapes(folder: Path) -> Path:
    shapes = folder / "shapes"
    shapes.mkdir()
    for name, source in SHAPES.items():
        (shapes / name).write_text(textwrap.dedent(source))
    for part in (None, "scheduler", "optimizer", "rng"):
        (shapes / f"resume_{part or 'exact'}.py").write_text(resume_script(part))
    return shapes


# The styles traced in the default suite (a few seconds of CPU each); `reports`, every run of
# this module (about 45 traced children, minutes of CPU on 2 cores), is for the tests marked slow.
QUICK_STYLES = ("plain_accumulation", "amp")


# the scripts mark the hazards of TL501 and TL502 too, which are off by default: the runs select them
_MARKED_RULES = Settings(select=resolve_selection(None, ["TL501", "TL502"], []))


def _run_all(runs: dict) -> dict:
    def run(item):
        name, (script, args, steps) = item
        if name.startswith("resume_"):
            k = 2 if name.startswith("resume_epoch_") else 3
            try:
                return name, resume_check(str(script), args, k, resume_arg=steps, output=subprocess.DEVNULL)
            except TraceFailed as err:  # kept for the test that expects this run to succeed
                return name, err
        timeout = TIMEOUT if name in ("timeout", "stubborn") else 300
        return name, trace_script(str(script), args, max_steps=steps, settings=_MARKED_RULES, timeout=timeout,
                                  output=subprocess.DEVNULL)

    # three at a time: two of the runs mostly sleep until their timeout
    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(pool.map(run, runs.items()))


@pytest.fixture(scope="module")
def quick_reports():
    return _run_all({f"{style}_{variant}": (SCRIPTS / f"{style}_{variant}.py", [], 8)
                     for style in QUICK_STYLES for variant in ("bad", "good")})


def _style_reports(request, style: str) -> dict:
    return request.getfixturevalue("quick_reports" if style in QUICK_STYLES else "reports")


def _styles() -> list:
    return [style if style in QUICK_STYLES else pytest.param(style, marks=pytest.mark.slow) for style in STYLES]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trace")
    shapes = _shapes(folder)
    pickled, resume = _make_checkpoints(folder)
    runs = {}
    for style in STYLES:
        for variant in ("bad", "good"):
            args = [str(folder / f"{style}_{variant}"), "2"] if style == "checkpoint" else []
            runs[f"{style}_{variant}"] = (SCRIPTS / f"{style}_{variant}.py", args, 8)
    runs["amp_step_bad"] = (SCRIPTS / "amp_step_bad.py", [], 8)
    runs["timeout"] = (_hanging_script(folder), [], 20)
    runs["not_reached"] = (SCRIPTS / "checkpoint_bad.py", [str(folder / "late"), "5"], 3)
    runs["callback"] = (SCRIPTS / "callback_runtime_only.py", [], 8)
    runs["evaluate_checkpoint"] = (EXAMPLES / "evaluate_checkpoint.py", [str(pickled)], 8)
    runs["finetune_accumulation"] = (EXAMPLES / "finetune_accumulation.py",
                                     ["--resume", str(resume), "--epochs", "2", "--out", str(folder / "ft")], 8)
    runs["finetune_no_accumulation"] = (EXAMPLES / "finetune_accumulation.py",
                                        ["--accum-steps", "1", "--out", str(folder / "ft1")], 8)
    runs["train_amp"] = (EXAMPLES / "train_amp.py", ["--epochs", "1", "--eval-every", "4", "--num-images", "700"], 8)
    runs["train_clean"] = (EXAMPLES / "train_clean.py", ["--out", str(folder / "clean")], 8)
    runs["closure"] = (shapes / "closure.py", [], 3)
    runs["swallows"] = (shapes / "swallows.py", [str(folder / "swallows.log")], 3)
    runs["file_object_save"] = (shapes / "file_object_save.py", [str(folder / "model.pt")], 8)
    runs["modes_plain"] = (shapes / "modes.py", [], 5)
    runs["modes_gated"] = (shapes / "modes.py", ["--gated"], 5)
    runs["stubborn"] = (shapes / "stubborn.py", [str(folder / "grandchild.pid"), str(folder / "stepped")], 20)
    runs["os_exit"] = (shapes / "exits.py", ["exit"], 20)
    runs["sigkill"] = (shapes / "exits.py", ["kill"], 20)
    runs["crashes_early"] = (shapes / "crashes_early.py", [], 8)
    runs["manual_sgd"] = (shapes / "manual_sgd.py", [], 3)
    runs["gan"] = (shapes / "gan.py", [], 3)

    for part in ("exact", "scheduler", "optimizer", "rng"):
        # the exact script resumes from its own checkpoint file; the others are told where it is
        how = None if part == "exact" else "--resume {checkpoint}"
        runs[f"resume_{part}"] = (shapes / f"resume_{part}.py", [str(folder / f"resume_{part}.pt")], how)
    # the atomic save is put back where the script resumes from; the in-place one is passed to it
    runs["resume_epoch_atomic"] = (shapes / "epoch_save.py", [str(folder / "epoch_atomic.pt"), "atomic"], None)
    runs["resume_epoch_plain"] = (shapes / "epoch_save.py", [str(folder / "epoch_plain.pt"), "plain"],
                                  "--resume {checkpoint}")

    done = _run_all(runs)
    done["folder"] = folder
    return done


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (an unreaped zombie holds no resources)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_no_process_of_a_traced_script_survives(reports):
    """Every child, its process group, and the grandchild that left for a session of its own."""
    traced = {name: r for name, r in reports.items() if isinstance(r, TraceReport)}
    traced.update((name, r[0]) for name, r in reports.items() if name.startswith("resume_") and isinstance(r, tuple))
    assert all(r.pid for r in traced.values())
    assert [name for name, r in traced.items() if _alive(r.pid) or _group_alive(r.pid)] == []
    grandchild = int((reports["folder"] / "grandchild.pid").read_text())
    assert not _alive(grandchild)


def statuses(report: TraceReport) -> dict[tuple[int, str], str]:
    return {(f["line"], f["code"]): f["status"] for f in report.findings}


@pytest.mark.parametrize("style", _styles())
def test_bad_variant_confirms_every_finding(request, style):
    report = _style_reports(request, style)[f"{style}_bad"]
    assert report.error is None
    want = expected(SCRIPTS / f"{style}_bad.py")
    assert set(statuses(report)) == want
    unconfirmed = {k: f["evidence"] for f in report.findings if (k := (f["line"], f["code"])) and
                   f["status"] != CONFIRMED}
    assert not unconfirmed
    for finding in report.findings:  # the evidence names the line it saw the hazard at
        assert f"{Path(finding['path']).name}:" in finding["evidence"] or finding["code"] in ("TL501", "TL601")


@pytest.mark.parametrize("style", _styles())
def test_good_twin_confirms_nothing(request, style):
    report = _style_reports(request, style)[f"{style}_good"]
    assert report.error is None
    assert report.steps == (0 if style == "eval" else 8) or style == "checkpoint"
    assert not [f for f in report.findings if f["status"] == CONFIRMED]
    assert report.runtime_only == []
    assert report.exit_code == (4 if style == "eval" else 0)  # an evaluation script: no optimizer step


@pytest.mark.slow
def test_direct_optimizer_step_on_scaled_gradients_is_confirmed_and_the_crash_reported(reports):
    """scaler.update() without scaler.step() raises in GradScaler: the report keeps what ran before."""
    report = reports["amp_step_bad"]
    assert report.error == ("AssertionError: No inf checks were recorded prior to update. "
                            "(at amp_step_bad.py:22)")
    assert report.steps == 1 and report.exit_code == 1
    assert statuses(report) == {(line, code): CONFIRMED for line, code in expected(SCRIPTS / "amp_step_bad.py")}


@pytest.mark.slow
def test_timeout_stops_the_script_and_still_reports(reports):
    report = reports["timeout"]
    assert report.stopped == "timeout" and report.steps == 2
    assert report.error == "timed out: the script was stopped before it finished"
    # what ran before the stop is reported, and the script's finally block ran after it. (No TL404:
    # a weights file named last.pt that no load of the project reads back is not proven a resume
    # point, so the static pass leaves it unreported by default.)
    assert statuses(report) == {(11, "TL105"): CONFIRMED, (15, "TL402"): CONFIRMED}
    assert report.runtime_only == []


@pytest.mark.slow
def test_evidence_has_the_numbers(reports):
    bad = {f["code"]: f["evidence"] for f in reports["plain_accumulation_bad"].findings}
    assert "4x per optimizer step" in bad["TL101"]
    assert "TL102" not in bad  # the clear on every micro-batch (TL104): nothing adds up to be too large
    assert "only the last reached the step" in bad["TL104"]
    amp = {f["code"]: f["evidence"] for f in reports["amp_bad"].findings}
    assert "GradScaler's scale (65536)" in amp["TL201"]
    trainer = {f["code"]: f["evidence"] for f in reports["trainer_bad"].findings}
    assert "since eval() at trainer_bad.py:18 (via trainer_bad.py:39)" in trainer["TL303"]


@pytest.mark.slow
def test_a_line_reached_only_after_n_steps_is_not_reached(reports):
    report = reports["not_reached"]
    assert report.steps == 3 and report.error is None
    for line, code in expected(SCRIPTS / "checkpoint_bad.py"):
        assert statuses(report)[(line, code)] == NOT_REACHED
    evidence = {f["evidence"] for f in report.findings}
    assert evidence == {"the line never ran in 3 optimizer steps (stopped at --max-steps 3)"}
    assert report.exit_code == 0


@pytest.mark.slow
def test_runtime_only_scheduler_in_a_callback_from_configuration(reports):
    report = reports["callback"]
    assert report.findings == []
    assert [(r["code"], r["line"]) for r in report.runtime_only] == [("TL101", 14)]
    assert "4x per optimizer step" in report.runtime_only[0]["evidence"]
    assert report.exit_code == 1


@pytest.mark.slow
def test_runtime_only_where_the_static_pass_stops(reports):
    """The slice saved in place (static sees only TL403 there); the resume bundle without the
    optimizer's state, a file of its own beside the full checkpoint, is a static finding the run
    confirms."""
    lines = (SCRIPTS / "checkpoint_bad.py").read_text().splitlines()
    head = next(n for n, text in enumerate(lines, 1) if '"head.pt"' in text)
    bundle = next(n for n, text in enumerate(lines, 1) if '"resume.pt"' in text)
    report = reports["checkpoint_bad"]
    assert [(r["code"], r["line"]) for r in report.runtime_only] == [("TL402", head)]
    assert statuses(report)[(bundle, "TL404")] == CONFIRMED
    evidence = {(f["code"], f["line"]): f["evidence"] for f in report.findings}
    assert "not the state of the optimizer (2 steps taken)" in evidence[("TL404", bundle)]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["evaluate_checkpoint", "finetune_accumulation", "train_amp"])
def test_bundled_example_findings_are_all_confirmed(reports, name):
    report = reports[name]
    assert report.error is None
    want = expected(EXAMPLES / f"{name}.py")
    assert want and set(statuses(report)) == want
    assert {k: s for k, s in statuses(report).items() if s != CONFIRMED} == {}


@pytest.mark.slow
def test_clean_example_confirms_nothing(reports):
    report = reports["train_clean"]
    assert report.error is None and report.steps == 8
    assert report.findings == [] and report.runtime_only == []


@pytest.mark.slow
def test_without_accumulation_at_run_time_the_findings_are_not_confirmed(reports):
    """--accum-steps 1: the static findings stand in the code, but this run has no accumulation.
    (The 9th backward runs before the 9th step stops the run.)"""
    report = reports["finetune_no_accumulation"]
    got = {f["code"]: (f["status"], f["evidence"]) for f in report.findings}
    # the example clears gradients on every micro-batch (TL104, the root): its undivided loss adds
    # nothing up, so TL102 is not a static finding to confirm (issue 35, round 6)
    assert "TL102" not in got
    assert got["TL101"][0] == NOT_CONFIRMED and "once per optimizer step" in got["TL101"][1]
    assert got["TL104"][0] == NOT_CONFIRMED and "once per optimizer step" in got["TL104"][1]
    assert got["TL401"][0] == NOT_REACHED


# ----- shapes of real scripts (issue 27) ---------------------------------------------------------

@pytest.mark.slow
def test_a_closure_step_is_one_step_and_owns_its_backward_calls(reports):
    """LBFGS evaluates the closure (zero_grad, backward) several times inside one step(closure)."""
    report = reports["closure"]
    assert report.error is None and report.stopped == "max-steps"
    assert report.steps == 3 and [o["steps"] for o in report.optimizers] == [3]
    assert report.runtime_only == [] and report.exit_code == 0


@pytest.mark.slow
def test_a_swallowed_stop_still_ends_the_run(reports):
    """`except: continue` catches the stop: the run is ended at the next training call, with the
    report as it stood at the stop (the calls after it are not findings)."""
    report = reports["swallows"]
    assert report.stopped == "max-steps" and report.steps == 3 and report.error is None
    assert report.caught_stop == "swallows.py:11"
    assert report.runtime_only == [] and report.exit_code == 0
    iterations = (reports["folder"] / "swallows.log").read_text().split()
    assert iterations == ["0", "1", "2", "3", "4"]  # the 4th step is stopped, the 5th iteration ended
    assert "the script caught the stop and went on at swallows.py:11" in render_text(report)


@pytest.mark.slow
def test_a_save_through_a_file_object_is_judged_by_its_file(reports):
    report = reports["file_object_save"]
    (line, status, evidence), = [(f["line"], f["status"], f["evidence"]) for f in report.findings
                                 if f["code"] == "TL402"]
    assert (line, status) == (12, CONFIRMED)
    assert "model.pt' in place through a file object opened on it" in evidence


@pytest.mark.slow
def test_eval_mode_is_a_hazard_only_for_a_mode_dependent_forward(reports):
    """The same script: a model without dropout, batch norm or a forward reading self.training (eval
    mode changes nothing), and one with a module whose forward reads self.training."""
    plain = reports["modes_plain"]
    assert statuses(plain) == {(28, "TL303"): NOT_CONFIRMED}
    assert "no dropout, batch norm or forward reading self.training" in plain.findings[0]["evidence"]
    assert plain.runtime_only == [] and plain.exit_code == 0
    gated = reports["modes_gated"]
    assert statuses(gated) == {(28, "TL303"): CONFIRMED}
    assert "Gate (its forward reads self.training) ran in inference behaviour in training forwards" in \
        gated.findings[0]["evidence"]
    assert [(r["code"], r["line"]) for r in gated.runtime_only] == [("TL302", 16)]
    assert "Gate (its forward reads self.training) active" in gated.runtime_only[0]["evidence"]


@pytest.mark.slow
def test_a_script_that_ignores_the_stop_is_killed_and_keeps_its_steps(reports):
    report = reports["stubborn"]
    assert int((reports["folder"] / "stepped").read_text()) == report.pid
    assert report.stopped == "timeout" and report.steps == 2
    assert report.error == f"timed out after {TIMEOUT} s; the script did not stop when asked and was killed"
    assert report.exit_code == 0


@pytest.mark.slow
def test_os_exit_and_a_kill_keep_the_steps_seen(reports):
    exited = reports["os_exit"]
    assert (exited.stopped, exited.steps, exited.error) == ("error", 2, "the script exited with code 7 (os._exit)")
    assert exited.exit_code == 3
    killed = reports["sigkill"]
    assert (killed.stopped, killed.steps, killed.error) == ("killed", 2, "the script was killed by SIGKILL")


@pytest.mark.slow
def test_a_script_failing_before_its_first_step_exits_3_with_a_plain_error(reports):
    report = reports["crashes_early"]
    assert report.error == "RuntimeError: no such config (at crashes_early.py:4)"
    assert report.exit_code == 3


@pytest.mark.slow
def test_a_hand_written_update_stops_at_max_steps_and_exits_4_with_a_hint(reports):
    report = reports["manual_sgd"]
    assert report.steps == 0 and report.stopped == "max-steps" and report.error is None
    assert report.manual_updates == {"count": 3, "where": "manual_sgd.py:8"}
    assert report.exit_code == 4
    assert "hint: no optimizer step was seen: the parameters were updated by hand 3x (at manual_sgd.py:8)" in \
        render_text(report)
    assert "--timeout" in reports["eval_good"].hint and reports["eval_good"].exit_code == 4


@pytest.mark.slow
def test_step_counts_per_optimizer(reports):
    report = reports["gan"]
    assert report.steps == 6 and report.stopped == "max-steps"
    assert [(o["type"], o["line"], o["steps"]) for o in report.optimizers] == [("Adam", 10, 3), ("Adam", 13, 3)]
    assert render_text(report).split(": ", 1)[1].startswith(
        "3 optimizer steps per optimizer (2 optimizers: Adam at gan.py:10: 3, Adam at gan.py:13: 3) "
        "(stopped at --max-steps)")
    assert report.to_dict()["optimizers"][0] == {"type": "Adam", "path": report.optimizers[0]["path"],
                                                 "line": 10, "steps": 3}


def test_an_info_finding_confirmed_does_not_fail_the_run():
    script = os.path.abspath("train.py")
    result = {"steps": 2, "stopped": "end", "error": None, "notes": [], "loader_passes": [],
              "lines": {script: {"9": 2}},
              "findings": [{"code": "TL402", "path": script, "line": 9, "stack": [[script, 9]], "evidence": "in place"}]}
    info = Finding("train.py", 9, 1, 9, 2, "TL402", "name", Severity.INFO, "message")
    assert join([info], result, "train.py", max_steps=5).exit_code == 0
    assert join([_finding(9, "TL402")], result, "train.py", max_steps=5).exit_code == 1


# ----- --resume-check ------------------------------------------------------------------------------

@pytest.mark.parametrize("part, step, parts", [
    ("exact", None, []),
    ("scheduler", 5, ["lr"]),  # the restored optimizer holds step 4's LR; the fresh schedule restarts at 5
    ("optimizer", 4, ["lr", "optimizer"]),  # a fresh optimizer: no moments, and the initial LR
    ("rng", 4, ["rng"]),
])
@pytest.mark.slow
def test_resume_check_names_the_first_divergent_step_and_part(reports, part, step, parts):
    report, result = reports[f"resume_{part}"]
    assert report.error is None and report.steps == 6
    assert (result.exact, result.checkpoint_step, result.first_divergent_step, result.parts) == (
        part == "exact", 3, step, parts)
    got = json.loads(resume.render_json(report, result))["resume"]
    line = next(n for n, text in enumerate(resume_script(part if part != "exact" else None).splitlines(), 1)
                if "scaler.step(optimizer)" in text)
    label = f"optimizer (Adam at resume_{part}.py:{line})"
    assert got == {"exact": part == "exact", "checkpoint_step": 3, "first_divergent_step": step, "parts": parts,
                   "optimizers": [{"optimizer": label, "checkpoint_step": 3, "compared": 3 if part == "exact" else
                                   step - 3}],
                   "differences": [{"part": p, "optimizer": label} for p in parts]}
    text = resume.render_text(report, result)
    assert "(bitwise: CPU, one thread, deterministic kernels)" in text
    if part == "exact":
        assert "resume is exact" in text and result.compared == 3
        assert report.findings == [] and report.runtime_only == []
    else:
        assert f"resume diverges at step {step}: {', '.join(parts)}" in text


@pytest.mark.slow
@pytest.mark.parametrize("how", ["atomic", "plain"])
def test_resume_check_waits_for_a_save_after_step_k(reports, how):
    """K=2, and the script saves once an epoch (after step 6): that save is the checkpoint, and the
    run goes on to step 6+3 so that three steps are compared."""
    got = reports[f"resume_epoch_{how}"]
    assert not isinstance(got, TraceFailed), str(got)
    report, result = got
    assert (result.exact, result.checkpoint_step, result.compared) == (True, 6, 3)
    assert result.checkpoint == reports["folder"].joinpath(f"epoch_{how}.pt").as_posix()
    assert report.error is None and report.steps == 9 and report.stopped == "max-steps"
    text = resume.render_text(report, result)
    assert "saved after step 6" in text and "resume is exact" in text and "steps 7-9 " in text


@pytest.mark.slow
def test_resume_check_judges_the_static_checkpoint_findings(reports):
    report, result = reports["resume_scheduler"]
    (tl404,) = [f for f in report.findings if f["code"] == "TL404"]
    assert tl404["status"] == CONFIRMED
    assert tl404["evidence"].startswith("the resumed run diverged at step 5: learning rate (the LR scheduler's state "
                                        "was not restored): [0.005] resumed, [0.002] uninterrupted")


def test_resume_compare_without_running():
    base = {"loss": 1.0, "lr": [0.1], "params": "p", "optimizer": "o", "batch": "b", "rng": "r"}
    reference = [dict(base, step=n) for n in range(1, 7)]
    same = [dict(base, step=n) for n in range(1, 4)]
    assert resume.compare(reference, same, 3).exact
    masks = [dict(base, step=1), dict(base, step=2, loss=2.0), dict(base, step=3)]
    got = resume.compare(reference, masks, 3)
    assert (got.exact, got.first_divergent_step, got.parts) == (False, 5, ["rng"])


# ----- the child process: isolation, arguments, errors ------------------------------------------

HOSTILE = "raise SystemExit('the hostile module in the current directory was imported')\n"


def test_child_is_isolated_and_reports_the_scripts_error(tmp_path, monkeypatch):
    """A torch.py and a trainlint/ in the current directory are never imported; the script's folder
    comes first on sys.path (its helper module is imported and linted); argv comes from SCRIPT_ARGS;
    an exception ends the run and is part of the report, with what happened before it."""
    cwd = tmp_path / "cwd"
    (cwd / "trainlint").mkdir(parents=True)
    (cwd / "torch.py").write_text(HOSTILE)
    (cwd / "trainlint" / "__init__.py").write_text(HOSTILE)
    project = tmp_path / "project"
    project.mkdir()
    (project / "helpers.py").write_text(textwrap.dedent("""\
        import torch


        def validate(model, batches):
            model.eval()
            for x in batches:
                model(x)
            model.train()
    """))
    (project / "train.py").write_text(textwrap.dedent("""\
        import sys

        import torch
        from torch import nn

        from helpers import validate

        assert sys.argv[1:] == ["--lr", "0.1"], sys.argv
        model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=float(sys.argv[2]))
        for step in range(100):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            optimizer.step()
            validate(model, [torch.randn(2, 4)])
            if step == 2:
                raise RuntimeError("diverged")
    """))
    monkeypatch.chdir(cwd)
    report = trace_script(str(project / "train.py"), ["--lr", "0.1"], max_steps=20, timeout=120,
                          output=subprocess.DEVNULL)
    assert report.error == "RuntimeError: diverged (at train.py:17)"
    assert report.steps == 3
    got = {(Path(f["path"]).name, f["line"], f["code"]): f["status"] for f in report.findings}
    assert got[("train.py", 14, "TL105")] == CONFIRMED
    assert got[("helpers.py", 7, "TL301")] == CONFIRMED
    assert "error: RuntimeError: diverged (at train.py:17)" in render_text(report)


# ----- the join, without running anything ------------------------------------------------------------

def _finding(line: int, code: str, path: str = "train.py") -> Finding:
    return Finding(path, line, 1, line, 2, code, "name", Severity.ERROR, "message")


def test_join_statuses_and_runtime_only():
    script = os.path.abspath("train.py")
    result = {
        "steps": 5, "stopped": "max-steps", "error": None,
        "findings": [
            {"code": "TL303", "path": os.path.abspath("helpers.py"), "line": 3,
             "stack": [[os.path.abspath("helpers.py"), 3], [script, 40]], "evidence": "eval at helpers.py:3"},
            {"code": "TL101", "path": script, "line": 50, "stack": [[script, 50]], "evidence": "4x"},
            {"code": "TL404", "path": script, "line": 70, "stack": [[script, 70]], "evidence": "weights alone",
             "confirm_only": True},
        ],
        "notes": [{"code": "TL102", "path": script, "line": 30, "note": "one backward call per optimizer step"}],
        "lines": {script: {"30": 5, "40": 5, "50": 20}},
        "loader_passes": [],
    }
    static = [_finding(30, "TL102"), _finding(40, "TL303"), _finding(60, "TL103"), _finding(50, "TL103")]
    report = join(static, result, "train.py", max_steps=5)
    assert [(f["line"], f["code"], f["status"]) for f in report.findings] == [
        (30, "TL102", NOT_CONFIRMED), (40, "TL303", CONFIRMED), (50, "TL103", NOT_CONFIRMED), (60, "TL103", NOT_REACHED)]
    assert report.findings[0]["evidence"] == "the line ran 5x: one backward call per optimizer step"
    assert report.findings[1]["evidence"] == "eval at helpers.py:3"  # matched through the call stack
    assert report.findings[2]["evidence"] == "the line ran 20x; trace has no runtime check for TL103"
    assert [(r["code"], r["line"]) for r in report.runtime_only] == [("TL101", 50)]
    assert report.to_dict().keys() == {"version", "script", "steps", "optimizers", "stopped", "error", "hint",
                                       "findings", "runtime_only"}
    assert report.exit_code == 1


# ----- the command line (a real subprocess) ---------------------------------------------------------

def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=180)


def test_cli_json_report_and_exit_code(tmp_path):
    # the fixture stands for a user's training script: under this repository's tests/ it is test
    # code, where the checkpoint rules are not reported by default (`test-code-ignore`)
    script = tmp_path / "checkpoint_bad.py"
    script.write_text((SCRIPTS / "checkpoint_bad.py").read_text())
    done = _cli("trace", str(script), "--max-steps", "4", "--format", "json", "--",
                str(tmp_path / "out"), "2", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert list(report) == ["version", "script", "steps", "optimizers", "stopped", "error", "hint", "findings",
                            "runtime_only"]
    assert report["steps"] == 4 and report["error"] is None and report["stopped"] == "max-steps"
    assert [(o["type"], o["steps"]) for o in report["optimizers"]] == [("SGD", 4)]
    assert all(list(f) == ["code", "path", "line", "severity", "status", "evidence"] for f in report["findings"])
    assert all(list(r) == ["code", "path", "line", "severity", "evidence"] for r in report["runtime_only"])
    assert {f["status"] for f in report["findings"]} == {CONFIRMED}


def test_cli_text_report_clean_script_exits_zero(tmp_path):
    done = _cli("trace", str(SCRIPTS / "plain_accumulation_good.py"), "--max-steps", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"trainlint trace {SCRIPTS / 'plain_accumulation_good.py'}: 2 optimizer steps "
                                  f"(SGD) (stopped at --max-steps)")


def test_cli_warnings_point_at_the_users_line_and_output_goes_to_stderr(tmp_path):
    """torch warns with stacklevel=2 from a function trace wraps: the warning names the script's line."""
    script = tmp_path / "warns.py"
    script.write_text(textwrap.dedent("""\
        import torch

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 2)
        model(torch.randn(8, 4)).pow(2).mean().backward()
        scheduler.step()
        optimizer.step()
        print("trained")
    """))
    done = _cli("trace", str(script), cwd=tmp_path)
    assert f"{script}:7: UserWarning: Detected call of `lr_scheduler.step()`" in done.stderr
    assert "instrument.py" not in done.stderr
    assert "trained" in done.stderr and "trained" not in done.stdout


def test_cli_interrupt_stops_the_script_and_cleans_up(tmp_path):
    """SIGINT to trainlint (Ctrl-C): forwarded; the script ignores it, so after the grace period its
    group is killed, the grandchild in its own session too; the temporary folder is gone."""
    (tmp_path / "stubborn.py").write_text(textwrap.dedent(SHAPES["stubborn.py"]))
    temp = tmp_path / "tmp"
    temp.mkdir()
    stepped, grandchild = tmp_path / "stepped", tmp_path / "grandchild.pid"
    process = subprocess.Popen([sys.executable, "-m", "trainlint", "trace", "stubborn.py", "--", str(grandchild),
                                str(stepped)], cwd=tmp_path, env=dict(os.environ, TMPDIR=str(temp)),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(1200):
            if stepped.exists() or process.poll() is not None:
                break
            time.sleep(0.1)
        assert stepped.exists()
        time.sleep(0.2)  # the pid is written whole
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert err.splitlines()[-1] == "trainlint: error: interrupted by SIGINT: the traced script was stopped"
    assert [p.name for p in temp.iterdir() if p.name.startswith("trainlint-")] == []
    child = int(stepped.read_text())
    assert not _alive(child) and not _group_alive(child) and not _alive(int(grandchild.read_text()))


def test_cli_usage_errors_and_help(tmp_path):
    missing = _cli("trace", "nope.py", cwd=tmp_path)
    assert missing.returncode == 2 and "nope.py" in missing.stderr and "Traceback" not in missing.stderr
    bad_steps = _cli("trace", str(SCRIPTS / "eval_good.py"), "--max-steps", "0", cwd=tmp_path)
    assert bad_steps.returncode == 2
    lone = _cli("trace", str(SCRIPTS / "eval_good.py"), "--resume-arg", "--resume {checkpoint}", cwd=tmp_path)
    assert lone.returncode == 2 and lone.stderr.strip().endswith("--resume-arg needs --resume-check K")
    help_text = _cli("trace", "--help", cwd=tmp_path).stdout
    assert "(your code)" in help_text and "only run scripts you trust" in help_text


def test_only_the_trace_command_reaches_the_tracer():
    """check, pre-commit (which runs check) and the language server never start a trace."""
    package = ROOT / "trainlint"
    users = sorted(str(p.relative_to(package)) for p in package.rglob("*.py")
                   if re.search(r"runtime\.trace|trace_child|runtime\.instrument", p.read_text())
                   and p.parent.name != "runtime")
    assert users == ["cli.py"]
    cli = (package / "cli.py").read_text()
    body = cli[cli.index("def trace("):]
    assert body.index("from trainlint.runtime.trace") < body.index("\ndef ", 1)


@pytest.mark.slow
def test_a_grad_scaler_rebuilt_every_epoch_is_confirmed():
    """TL205 is off by default: selected, its finding is CONFIRMED with the scale it threw away;
    by default the run still shows it, as RUNTIME-ONLY; one scaler for the run shows nothing."""
    from trainlint.settings import Settings, resolve_selection

    selected = Settings(select=resolve_selection(["ALL"], [], []))
    bad = SCRIPTS / "scaler_bad.py"
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(trace_script, str(script), [], 8, settings)
                for script, settings in ((bad, selected), (bad, None), (SCRIPTS / "scaler_good.py", selected))]
        confirmed, default, good = (run.result() for run in runs)
    assert statuses(confirmed) == {(14, "TL205"): CONFIRMED}
    evidence = next(f["evidence"] for f in confirmed.findings if f["code"] == "TL205")
    assert "restarted at 65536" in evidence and "scaler_bad.py:14" in evidence
    assert [(r["line"], r["code"]) for r in default.runtime_only] == [(14, "TL205")]
    assert good.findings == [] and good.runtime_only == [] and good.exit_code == 0


# ----- issue 34: TorchScript, resumes of real shapes, reports and processes -----------------------

JIT_SCRIPT = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 6 * 6, 2)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(torch.randn(8, 1, 8, 8)), torch.randint(0, 2, (8,))).backward()
    optimizer.step()
    if step == 1:
        torch.jit.trace(model, torch.randn(2, 1, 8, 8))  # in train mode; the check reruns it under no_grad
        model.eval()
        traced = torch.jit.trace(model, torch.randn(2, 1, 8, 8))  # as SummaryWriter.add_graph does
        scripted = torch.jit.script(model)
        with torch.no_grad():
            assert torch.equal(traced(torch.ones(1, 1, 8, 8)), scripted(torch.ones(1, 1, 8, 8)))
        model.train()
print("trained")
"""


@pytest.mark.slow
def test_torch_jit_trace_and_script_run_as_without_trace(tmp_path):
    """The JIT traces the model twice and compares the graphs: the instrumentation's hooks must add
    nothing to them, and the compiler's forwards (train mode under no_grad, eval mode with grad
    recording on) are not the script's forwards."""
    script = tmp_path / "jit_export.py"
    script.write_text(JIT_SCRIPT)
    plain_run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert plain_run.returncode == 0 and "trained" in plain_run.stdout, plain_run.stderr
    done = _cli("trace", str(script), "--format", "json", cwd=tmp_path)
    assert done.returncode == plain_run.returncode, done.stderr
    report = json.loads(done.stdout)
    assert report["error"] is None and report["stopped"] == "end" and report["steps"] == 4
    assert report["runtime_only"] == [] and "trained" in done.stderr


# a script that resumes from its one fixed checkpoint path when told `--resume` (no path given)
FIXED_PATH_RESUME = """\
import os
import sys

import torch

out = sys.argv[1]
torch.manual_seed(0)
data, target = torch.randn(64, 4), torch.randn(64, 1)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
step = 0
if "--resume" in sys.argv:
    checkpoint = torch.load(out)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    step = checkpoint["step"]
while step < 12:
    rows = slice(step * 8 % 64, step * 8 % 64 + 8)
    loss = torch.nn.functional.mse_loss(model(data[rows]), target[rows])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    step += 1
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, out + ".tmp")
    os.replace(out + ".tmp", out)
"""


@pytest.mark.slow
def test_resume_check_with_a_fixed_path_puts_the_checkpoint_back(tmp_path):
    """`--resume-arg --resume` names no {checkpoint}: the script reads its fixed path, which the
    uninterrupted run overwrote after step 3; the saved copy is put back there first."""
    script = tmp_path / "fixed_path.py"
    script.write_text(FIXED_PATH_RESUME)
    checkpoint = tmp_path / "last.pt"
    report, result = resume_check(str(script), [str(checkpoint)], 3, resume_arg="--resume",
                                  output=subprocess.DEVNULL)
    assert report.error is None and report.steps == 6
    assert (result.exact, result.checkpoint_step, result.compared, result.parts) == (True, 3, 3, [])
    assert "resume is exact" in resume.render_text(report, result)


# a GAN: two models, two optimizers, two checkpoint files saved after each step; with `--resume` it
# loads the critic's file (its step and the RNG state) and, unless told "critic", the generator's
GAN_RESUME = """\
import os
import sys

import torch
from torch import nn

folder, restore = sys.argv[1], sys.argv[2]
g_path, d_path = os.path.join(folder, "generator.pt"), os.path.join(folder, "critic.pt")
torch.manual_seed(0)
real = torch.randn(64, 4)
generator, critic = nn.Linear(2, 4), nn.Linear(4, 1)
opt_g = torch.optim.Adam(generator.parameters(), lr=1e-2)
opt_d = torch.optim.Adam(critic.parameters(), lr=1e-2)
step = 0
if "--resume" in sys.argv:
    saved_d = torch.load(d_path)
    critic.load_state_dict(saved_d["model"])
    opt_d.load_state_dict(saved_d["optimizer"])
    step = saved_d["step"]
    torch.set_rng_state(saved_d["rng"])
    if restore != "critic":
        saved_g = torch.load(g_path)
        generator.load_state_dict(saved_g["model"])
        opt_g.load_state_dict(saved_g["optimizer"])
while step < 10:
    fake = generator(torch.randn(8, 2))
    opt_d.zero_grad()
    (critic(fake.detach()).mean() - critic(real[step * 8 % 64:step * 8 % 64 + 8]).mean()).backward()
    opt_d.step()
    opt_g.zero_grad()
    (-critic(fake).mean()).backward()
    opt_g.step()
    step += 1
    torch.save({"model": generator.state_dict(), "optimizer": opt_g.state_dict()}, g_path)
    torch.save({"model": critic.state_dict(), "optimizer": opt_d.state_dict(), "step": step,
                "rng": torch.get_rng_state()}, d_path)
"""


@pytest.mark.slow
def test_resume_check_follows_each_optimizer_and_file_of_a_gan(tmp_path):
    """Both files are followed and put back; each optimizer is compared on its own clock; a
    generator that is not restored is named, with its parameters, not "started from the initial
    weights" for the whole run."""
    script = tmp_path / "gan_resume.py"
    script.write_text(GAN_RESUME)
    runs = {}
    for restore in ("both", "critic"):
        (tmp_path / restore).mkdir()
        runs[restore] = (str(script), [str(tmp_path / restore), restore], 3)
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = dict(zip(runs, pool.map(lambda run: resume_check(*run, resume_arg="--resume",
                                                                  output=subprocess.DEVNULL), runs.values())))
    critic_at, generator_at = "opt_d (Adam at gan_resume.py:29)", "opt_g (Adam at gan_resume.py:32)"
    report, result = done["both"]
    assert report.error is None and [o["steps"] for o in report.optimizers] == [6, 6]
    assert result.exact and result.checkpoint_step == 3 and result.compared == 3
    assert result.optimizers == [{"optimizer": generator_at, "checkpoint_step": 3, "compared": 3},
                                 {"optimizer": critic_at, "checkpoint_step": 3, "compared": 3}]  # as built
    assert result.checkpoint == f"{tmp_path / 'both' / 'generator.pt'}, {tmp_path / 'both' / 'critic.pt'}"
    assert "resume is exact" in resume.render_text(report, result)
    report, result = done["critic"]
    assert (result.exact, result.first_divergent_step, result.parts) == (False, 4, ["params"])
    assert result.differences == [{"part": "params", "optimizer": generator_at}]
    assert result.detail[0] == (f"parameters of {generator_at} (the model's weights were not restored): it started "
                                f"from its initial weights")
    assert f"resume is not exact: diverges at step 4 of {critic_at}: params of {generator_at}" in \
        resume.render_text(report, result)
    assert json.loads(resume.render_json(report, result))["resume"]["differences"] == result.differences


def test_steps_are_counted_per_optimizer_as_max_steps_counts_them():
    """--max-steps 14 with two optimizers: 14 steps each, not "28 optimizer steps"."""
    script = os.path.abspath("gan.py")
    result = {"steps": 28, "stopped": "max-steps", "error": None, "findings": [], "notes": [], "loader_passes": [],
              "lines": {script: {"9": 14}},
              "optimizers": [{"type": "Adam", "path": script, "line": 10, "steps": 14},
                             {"type": "Adam", "path": script, "line": 13, "steps": 14}]}
    report = join([_finding(30, "TL102", "gan.py")], result, "gan.py", max_steps=14)
    assert render_text(report).splitlines()[0] == (
        "trainlint trace gan.py: 14 optimizer steps per optimizer (2 optimizers: Adam at gan.py:10: 14, "
        "Adam at gan.py:13: 14) (stopped at --max-steps)")
    assert report.findings[0]["evidence"] == ("the line never ran in 14 optimizer steps per optimizer "
                                              "(stopped at --max-steps 14)")
    result["optimizers"][1]["steps"], result["steps"] = 3, 17  # a critic stepped 14x, the generator 3x
    assert "up to 14 optimizer steps per optimizer (2 optimizers: " in render_text(join([], result, "gan.py", 14))


LONG_ERROR = """\
import torch

model = torch.nn.Linear(4, 1)
raise RuntimeError("Graphs differed across invocations!\\n" + "\\n".join(f"%{n} : Tensor = aten::linear(%x, %w)"
                                                                          f"{' ' * 400}" for n in range(400)))
"""


def test_a_long_error_is_shortened_in_text_and_whole_in_json(tmp_path):
    script = tmp_path / "long_error.py"
    script.write_text(LONG_ERROR)
    report = trace_script(str(script), [], max_steps=2, timeout=120, output=subprocess.DEVNULL)
    assert report.exit_code == 3
    full = json.loads(render_json(report))["error"]
    assert full == report.error and full.count("\n") == 400 and full.endswith("(at long_error.py:4)")
    text = render_text(report)
    shown = text[text.index("error: "):text.index("\n\n")]
    assert len(shown) < 2100 < len(full)
    assert shown.startswith("error: RuntimeError: Graphs differed across invocations!\n%0 : Tensor")
    assert shown.endswith("(at long_error.py:4)")
    assert f"[{len(full):,} characters in all, 394 more lines: the full text is in --format json]" in shown


MULTIPROCESSING = """\
import torch
import torch.multiprocessing as mp


def train(rank):
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        model(torch.randn(8, 4)).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    mp.spawn(train, nprocs=1)
"""


@pytest.mark.slow
def test_training_in_multiprocessing_children_gets_its_own_hint(tmp_path):
    script = tmp_path / "spawns.py"
    script.write_text(MULTIPROCESSING)
    report = trace_script(str(script), [], max_steps=2, timeout=120, output=subprocess.DEVNULL)
    assert report.error is None and report.steps == 0 and report.exit_code == 4
    assert report.hint.startswith("no optimizer step was seen in the traced process: the script started 1 process "
                                  "with multiprocessing (at spawns.py:15) and may train there; trace follows the "
                                  "main process only (its children are not traced)")
    assert "torch.optim" not in report.hint


# a grandchild that leaves the run's session and clears its environment (no token to find it by)
ESCAPES = """\
import os
import sys
import time

import torch

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execve(sys.executable, [sys.executable, "-c", "import os, sys, time\\n"
                  "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid())); os.rename(sys.argv[1] + '.tmp', sys.argv[1])\\n"
                  "time.sleep(600)", sys.argv[1]], {})
    os._exit(0)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    model(torch.randn(8, 4)).pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()
"""


def test_a_grandchild_in_its_own_session_with_no_environment_is_killed(tmp_path):
    script, pid_file = tmp_path / "escapes.py", tmp_path / "grandchild.pid"
    script.write_text(ESCAPES)
    report = trace_script(str(script), [str(pid_file)], max_steps=5, timeout=120, output=subprocess.DEVNULL)
    grandchild = int(pid_file.read_text())
    try:
        assert report.error is None and report.steps == 2
        assert not _alive(grandchild)
    finally:
        if _alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)


EXITS = """\
import os
import posix
import sys

import torch

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    model(torch.randn(8, 4)).pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()
if sys.argv[1] == "posix":
    posix._exit(7)
os._exit(7)
"""


def test_an_exit_with_a_status_is_reported_with_its_code_and_fails_the_run(tmp_path):
    """posix._exit skips the report; os._exit is caught and reports; either way the code is said
    and the run fails (not "killed", not exit 0)."""
    script = tmp_path / "exits_with_code.py"
    script.write_text(EXITS)
    with ThreadPoolExecutor(max_workers=2) as pool:
        posix_exit, os_exit = pool.map(lambda how: trace_script(str(script), [how], max_steps=5, timeout=120,
                                                                  output=subprocess.DEVNULL), ["posix", "os"])
    assert (posix_exit.stopped, posix_exit.steps, posix_exit.error) == (
        "error", 2, "the script exited with code 7 without a report")
    assert (os_exit.stopped, os_exit.steps, os_exit.error) == ("error", 2, "the script exited with code 7 (os._exit)")
    assert posix_exit.exit_code == os_exit.exit_code == 3
    assert "(the script raised)" in render_text(posix_exit) and "killed" not in render_text(posix_exit)


CORRUPTS = """\
import os
import posix

result = open("/proc/self/cmdline", "rb").read().split(b"\\0")[5].decode()  # python -I -c BOOT ROOT RESULT
with open(result, "w") as handle:
    handle.write(os.environ["SHAPE"])
posix._exit(0)
"""


@pytest.mark.parametrize("shape", ['[1, 2]', '{"steps": 1, "stopped": "end", "error": null, "findings": [{"code": 1}], '
                                             '"notes": [], "lines": {}, "loader_passes": []}'])
def test_a_corrupt_result_from_the_child_is_a_clear_error(tmp_path, shape):
    script = tmp_path / "corrupts.py"
    script.write_text(CORRUPTS)
    done = subprocess.run([sys.executable, "-m", "trainlint", "trace", str(script)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=180, env=dict(os.environ, SHAPE=shape))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"trainlint: error: the traced run of {script} left a malformed "
                                                   f"result (")


def test_an_error_line_quoting_a_long_script_error_is_shortened(capsys):
    """`the resumed run took no update step (<the script's error>)`: one line on stderr, bounded."""
    from trainlint.runtime.trace_command import _error

    assert _error("the resumed run took no update step (RuntimeError: " + "x\n" * 50_000 + "(at a.py:3))") == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("trainlint: error: the resumed run took no update step (RuntimeError: x x")
    assert line.endswith("x (at a.py:3)) [100,063 characters]") and len(line) < 2100
