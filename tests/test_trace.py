"""`trainlint trace`: the user's script really runs (a child interpreter with torch), and every
static finding is joined to what the run showed.

The scripts in tests/fixtures/trace/ mark their static findings with `# expect:` (test_fixtures
checks the static side); here each bad script must have every marked finding CONFIRMED, and each
good twin nothing CONFIRMED and nothing RUNTIME-ONLY. All traces start at once, two at a time, in
a module fixture (each takes a few seconds, mostly importing torch).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from trainlint.finding import Finding, Severity
from trainlint.runtime.trace import (CONFIRMED, NOT_CONFIRMED, NOT_REACHED, TraceReport, join, render_text,
                                     trace_script)

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


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trace")
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

    def run(item):
        name, (script, args, steps) = item
        timeout = TIMEOUT if name == "timeout" else 300
        return name, trace_script(str(script), args, max_steps=steps, timeout=timeout, output=subprocess.DEVNULL)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, runs.items()))


def statuses(report: TraceReport) -> dict[tuple[int, str], str]:
    return {(f["line"], f["code"]): f["status"] for f in report.findings}


@pytest.mark.parametrize("style", STYLES)
def test_bad_variant_confirms_every_finding(reports, style):
    report = reports[f"{style}_bad"]
    assert report.error is None
    want = expected(SCRIPTS / f"{style}_bad.py")
    assert set(statuses(report)) == want
    unconfirmed = {k: f["evidence"] for f in report.findings if (k := (f["line"], f["code"])) and
                   f["status"] != CONFIRMED}
    assert not unconfirmed
    for finding in report.findings:  # the evidence names the line it saw the hazard at
        assert f"{Path(finding['path']).name}:" in finding["evidence"] or finding["code"] in ("TL501", "TL601")


@pytest.mark.parametrize("style", STYLES)
def test_good_twin_confirms_nothing(reports, style):
    report = reports[f"{style}_good"]
    assert report.error is None
    assert report.steps == (0 if style == "eval" else 8) or style == "checkpoint"
    assert not [f for f in report.findings if f["status"] == CONFIRMED]
    assert report.runtime_only == []
    assert report.exit_code == 0


def test_direct_optimizer_step_on_scaled_gradients_is_confirmed_and_the_crash_reported(reports):
    """scaler.update() without scaler.step() raises in GradScaler: the report keeps what ran before."""
    report = reports["amp_step_bad"]
    assert report.error == ("AssertionError: No inf checks were recorded prior to update. "
                            "(at amp_step_bad.py:22)")
    assert report.steps == 1 and report.exit_code == 1
    assert statuses(report) == {(line, code): CONFIRMED for line, code in expected(SCRIPTS / "amp_step_bad.py")}


def test_timeout_stops_the_script_and_still_reports(reports):
    report = reports["timeout"]
    assert report.stopped == "timeout" and report.steps == 2
    assert report.error == "timed out: the script was stopped before it finished"
    # what ran before the stop is reported, and the script's finally block ran after it
    assert statuses(report) == {(11, "TL105"): CONFIRMED, (15, "TL402"): CONFIRMED,
                                 (15, "TL404"): CONFIRMED}
    assert report.runtime_only == []


def test_evidence_has_the_numbers(reports):
    bad = {f["code"]: f["evidence"] for f in reports["plain_accumulation_bad"].findings}
    assert "4x per optimizer step" in bad["TL101"]
    assert "scale 1.0, expected 1/4" in bad["TL102"]
    assert "only the last reached the step" in bad["TL104"]
    amp = {f["code"]: f["evidence"] for f in reports["amp_bad"].findings}
    assert "GradScaler's scale (65536)" in amp["TL201"]
    trainer = {f["code"]: f["evidence"] for f in reports["trainer_bad"].findings}
    assert "since eval() at trainer_bad.py:18 (via trainer_bad.py:39)" in trainer["TL303"]


def test_a_line_reached_only_after_n_steps_is_not_reached(reports):
    report = reports["not_reached"]
    assert report.steps == 3 and report.error is None
    for line, code in expected(SCRIPTS / "checkpoint_bad.py"):
        assert statuses(report)[(line, code)] == NOT_REACHED
    evidence = {f["evidence"] for f in report.findings}
    assert evidence == {"the line never ran in 3 optimizer steps (stopped at --max-steps 3)"}
    assert report.exit_code == 0


def test_runtime_only_scheduler_in_a_callback_from_configuration(reports):
    report = reports["callback"]
    assert report.findings == []
    assert [(r["code"], r["line"]) for r in report.runtime_only] == [("TL101", 14)]
    assert "4x per optimizer step" in report.runtime_only[0]["evidence"]
    assert report.exit_code == 1


def test_runtime_only_where_the_static_pass_stops(reports):
    """The slice saved in place (static sees only TL403 there) and a resume bundle without the
    optimizer's state that the static pass does not take for a checkpoint."""
    lines = (SCRIPTS / "checkpoint_bad.py").read_text().splitlines()
    head = next(n for n, text in enumerate(lines, 1) if '"head.pt"' in text)
    bundle = next(n for n, text in enumerate(lines, 1) if '"resume.pt"' in text)
    report = reports["checkpoint_bad"]
    assert [(r["code"], r["line"]) for r in report.runtime_only] == [("TL402", head), ("TL404", bundle)]
    assert "not the state of the optimizer (2 steps taken)" in report.runtime_only[1]["evidence"]


@pytest.mark.parametrize("name", ["evaluate_checkpoint", "finetune_accumulation", "train_amp"])
def test_bundled_example_findings_are_all_confirmed(reports, name):
    report = reports[name]
    assert report.error is None
    want = expected(EXAMPLES / f"{name}.py")
    assert want and set(statuses(report)) == want
    assert {k: s for k, s in statuses(report).items() if s != CONFIRMED} == {}


def test_clean_example_confirms_nothing(reports):
    report = reports["train_clean"]
    assert report.error is None and report.steps == 8
    assert report.findings == [] and report.runtime_only == []


def test_without_accumulation_at_run_time_the_findings_are_not_confirmed(reports):
    """--accum-steps 1: the static findings stand in the code, but this run has no accumulation.
    (The 9th backward runs before the 9th step stops the run.)"""
    report = reports["finetune_no_accumulation"]
    got = {f["code"]: (f["status"], f["evidence"]) for f in report.findings}
    assert got["TL102"] == (NOT_CONFIRMED, "the line ran 9x: one backward call per optimizer step: "
                                           "no accumulation at run time")
    assert got["TL101"][0] == NOT_CONFIRMED and "once per optimizer step" in got["TL101"][1]
    assert got["TL104"][0] == NOT_CONFIRMED and "once per optimizer step" in got["TL104"][1]
    assert got["TL401"][0] == NOT_REACHED


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
    assert report.to_dict().keys() == {"version", "script", "steps", "error", "findings", "runtime_only"}
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
    assert list(report) == ["version", "script", "steps", "error", "findings", "runtime_only"]
    assert report["steps"] == 4 and report["error"] is None
    assert all(list(f) == ["code", "path", "line", "status", "evidence"] for f in report["findings"])
    assert all(list(r) == ["code", "path", "line", "evidence"] for r in report["runtime_only"])
    assert {f["status"] for f in report["findings"]} == {CONFIRMED}


def test_cli_text_report_clean_script_exits_zero(tmp_path):
    done = _cli("trace", str(SCRIPTS / "eval_good.py"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"trainlint trace {SCRIPTS / 'eval_good.py'}: 0 optimizer steps (the script ended)")
    assert "accuracy" in done.stderr  # the script's own output goes to stderr


def test_cli_usage_errors_and_help(tmp_path):
    missing = _cli("trace", "nope.py", cwd=tmp_path)
    assert missing.returncode == 2 and "nope.py" in missing.stderr and "Traceback" not in missing.stderr
    bad_steps = _cli("trace", str(SCRIPTS / "eval_good.py"), "--max-steps", "0", cwd=tmp_path)
    assert bad_steps.returncode == 2
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
    assert body.index("from trainlint.runtime.trace import") < body.index("\ndef ", 1)


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
