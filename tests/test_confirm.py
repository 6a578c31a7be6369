"""`trainlint confirm`: every row confirmed, the JSON contract, and that it can say NOT CONFIRMED.

The full confirm runs once (through the real CLI, in a subprocess) and its report is shared by
the tests below; it must finish within 90 seconds on two CPU cores.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import json
import subprocess
import sys
import time

import pytest

from trainlint.rules import registry
from trainlint.runtime.confirm import CONFIRMED, NOT_CONFIRMED, confirm, run_confirm, select, static_verdict
from trainlint.runtime.demo import Demo, Fence
from trainlint.runtime.demos import all_demos
from trainlint.runtime.demos.update_clock import TL102
from trainlint.runtime.fences import FENCES
from trainlint.runtime.runner import Script, run_scripts

# The runtime extra. find_spec, not import: this process never needs torch itself.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs trainlint[runtime]")

ROW_KEYS = {"code", "static_bad", "static_good", "bad", "good", "fixed", "verdict"}
BUDGET_SECONDS = 90


@pytest.fixture(scope="module")
def report():
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "from trainlint.cli import main; main()", "confirm",
                           "--format", "json"], capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout), seconds


def test_every_row_confirmed_within_budget(report):
    code, data, seconds = report
    not_confirmed = [(r["code"], r["bad"], r["good"], r["static_bad"], r["static_good"])
                     for r in data["rows"] if r["verdict"] != CONFIRMED]
    assert not_confirmed == []
    assert code == 0
    assert seconds < BUDGET_SECONDS, f"confirm took {seconds:.1f} s"


def test_json_shape(report):
    _, data, _ = report
    assert set(data) == {"torch", "device", "rows"}
    assert data["device"] == "cpu" and data["torch"].split(".")[0].isdigit()
    for row in data["rows"]:
        assert set(row) == ROW_KEYS
        assert row["verdict"] in (CONFIRMED, NOT_CONFIRMED)
        assert isinstance(row["bad"], dict) and isinstance(row["good"], dict)
    demo_rows = [r for r in data["rows"] if r["static_bad"] is not None]
    assert all(isinstance(r["static_bad"], bool) and isinstance(r["static_good"], bool) for r in demo_rows)


def test_rows_follow_the_registry(report):
    _, data, _ = report
    expected = [code for code in all_demos() if code in registry()] + [f.code for f in FENCES]
    assert [r["code"] for r in data["rows"]] == expected
    assert "TL401" in expected  # the reference rule always has its row


def test_measurements_distinguish_bad_from_good(report):
    _, data, _ = report
    rows = {r["code"]: r for r in data["rows"]}
    if "TL102" in rows:  # K micro-batches without 1/K: exactly K times the gradient of the fix
        bad, good = rows["TL102"]["bad"], rows["TL102"]["good"]
        assert bad["ratio"] == pytest.approx(bad["k"] * good["ratio"], rel=1e-4)
        assert good["ratio"] == pytest.approx(1.0, rel=1e-5)
    tl401 = rows["TL401"]
    assert tl401["bad"] == {"code_ran": True, "refused": False}
    assert tl401["good"] == {"code_ran": False, "refused": True}
    fence1 = rows["FENCE1"]
    assert fence1["bad"]["forgot_ratio"] == pytest.approx(4.0, rel=1e-5)
    resume = rows["RESUME"]
    assert resume["good"]["complete"] == 0.0
    assert all(diff > 0 for diff in resume["bad"].values())


def test_fixed_column_confirms_every_fixable_rule(report):
    """A rule with a fix: its demo's bad variant after `--fix` measures like the good variant."""
    _, data, _ = report
    rows = {r["code"]: r for r in data["rows"]}
    fixable = {code for code, rule in registry().items() if any(e.fixed for e in rule.bad_examples())}
    with_demo = fixable & set(all_demos())
    assert len(with_demo) >= 15
    for code in sorted(with_demo):
        assert isinstance(rows[code]["fixed"], dict) and set(rows[code]["fixed"]) != {"error"}, code
        assert rows[code]["verdict"] == CONFIRMED, code
    assert rows["TL303"]["fixed"] == rows["TL303"]["good"]
    assert all(rows[code]["fixed"] is None for code in set(all_demos()) - fixable if code in rows)
    assert all(r["fixed"] is None for r in data["rows"] if r["static_bad"] is None)  # fences


def test_a_fix_that_leaves_the_hazard_is_not_confirmed():
    # the fix (weights_only=True) does not touch what the judge measures: only the good variant does
    script = ('import json\nimport torch\n\nif False:\n    torch.load("x.pt", weights_only=False)\n'
              'print(json.dumps({"v": 0}))\n')
    demo = Demo("TL401", "v becomes 1", script, (('{"v": 0}', '{"v": 1}'),), "torch.load", "v={v}",
                lambda bad, good: good["v"] == 1)
    report = confirm(["TL401"], demos={"TL401": demo}, fences={})
    row = report.rows[0]
    assert row.fixed == {"v": 0} and row.fixed_text == "v=0"
    assert row.verdict == NOT_CONFIRMED
    assert "runtime: the fixed variant does not measure like the good one (v becomes 1)" in row.notes
    assert "FIXED (after --fix)" in report.to_text()


@pytest.fixture(scope="module")
def broken():
    """A confirm run over deliberately broken demos and a broken fence."""
    # Bad and good identical up to a comment: the good one keeps the finding and the hazard.
    identical = Demo(TL102.code, TL102.hazard, TL102.bad,
                     (("# micro-batches per update", "# micro-batches per update, unchanged"),),
                     TL102.at, TL102.show, TL102.judge)
    # A variant that crashes: no measurement. Its stated line is wrong too (line 2, not 3).
    crashing = Demo("TL401", "a crash", "import torch\nraise RuntimeError('boom')\ntorch.load('x.pt', weights_only=False)\n",
                    (("weights_only=False", "weights_only=True"),), "raise", "{x}", lambda b, g: True)
    # A fence that prints the wrong shape.
    shapeless = Fence("FENCEX", "nothing", "import json\nprint(json.dumps({}))\n", "{x}", "{x}", lambda b, g: True)
    demos = {"TL401": crashing}
    if "TL102" in registry():
        demos["TL102"] = identical
    return confirm([], demos=demos, fences={"FENCEX": shapeless})


def test_broken_demos_are_not_confirmed(broken):
    assert broken.exit_code == 1
    rows = {r["code"]: r for r in broken.to_json()["rows"]}
    assert all(r["verdict"] == NOT_CONFIRMED for r in rows.values())
    assert rows["TL401"]["bad"]["error"].endswith("RuntimeError: boom")
    assert rows["TL401"]["static_bad"] is False and rows["TL401"]["static_good"] is True
    assert "error" in rows["FENCEX"]["bad"]
    if "TL102" in rows:
        assert rows["TL102"]["static_bad"] is True and rows["TL102"]["static_good"] is False
        assert rows["TL102"]["bad"]["ratio"] == pytest.approx(rows["TL102"]["good"]["ratio"])


def test_text_report_names_the_failure(broken):
    text = broken.to_text()
    assert text.count("NOT CONFIRMED") == len(broken.rows)
    assert "the bad variant should get TL401 at line 2 (`raise RuntimeError('boom')`); reported at line(s) 3" in text
    assert "TL401: runtime: the bad variant failed: RuntimeError: boom" in text
    assert "FENCEX: runtime: the fence failed" in text
    if "TL102" in registry():
        assert "flags-fix" in text and "TL102: static: TL102 fired on the good variant at line" in text
    assert f"0 of {len(broken.rows)} rows confirmed" in text


def test_unknown_code_is_a_usage_error(capsys):
    assert run_confirm(["TL999"], "text") == 2
    err = capsys.readouterr().err
    assert "unknown rule or fence 'TL999'" in err and "\n" == err[-1] and err.count("\n") == 1
    assert run_confirm([], "yaml") == 2


def test_selection_by_prefix():
    demos = all_demos()
    fences = {f.code: f for f in FENCES}
    registered = set(registry())
    chosen, chosen_fences = select(["tl4", "FENCE"], demos, fences, registered)
    assert [d.code for d in chosen] == [c for c in demos if c.startswith("TL4") and c in registered]
    assert [f.code for f in chosen_fences] == ["FENCE1", "FENCE2", "FENCE3", "FENCE4"]
    assert select(["RESUME"], demos, fences, registered) == ([], [fences["RESUME"]])


@pytest.mark.parametrize("demo", list(all_demos().values()), ids=lambda d: d.code)
def test_demo_pairs_differ_only_by_the_fix(demo):
    bad, good = demo.bad.splitlines(), demo.good.splitlines()
    opcodes = difflib.SequenceMatcher(a=bad, b=good, autojunk=False).get_opcodes()
    changed = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in opcodes if tag != "equal")
    assert 1 <= changed <= 8, changed
    assert bad[demo.line - 1].strip(), "the stated line is blank"
    compile(demo.bad, f"{demo.code}_bad.py", "exec")
    compile(demo.good, f"{demo.code}_good.py", "exec")


@pytest.mark.parametrize("demo", [d for d in all_demos().values() if d.code in registry()], ids=lambda d: d.code)
def test_static_side_of_each_demo(demo):
    verdict = static_verdict(demo)
    assert verdict.bad_ok and verdict.good_ok, verdict.notes


def test_static_path_does_not_import_torch(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(TL102.bad)
    code = f"""
import sys
import trainlint.engine, trainlint.cli
from trainlint.settings import Settings, resolve_selection
result = trainlint.engine.lint_path({str(target)!r}, Settings(select=resolve_selection(["ALL"], [], [])))
assert result.findings, "the demo should have findings"
import trainlint.runtime.confirm, trainlint.runtime.demos, trainlint.runtime.fences
assert "torch" not in sys.modules, sorted(m for m in sys.modules if m.startswith("torch"))
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_runner_without_fork(monkeypatch):
    """Where os.fork is missing each script is its own interpreter; results and errors are the same."""
    monkeypatch.delattr(os, "fork")
    version, results = run_scripts([Script("prints", "import json\nprint('noise')\nprint(json.dumps({'x': 1}))\n"),
                                    Script("exits", "import sys\nprint('oops', file=sys.stderr)\nsys.exit(3)\n"),
                                    Script("silent", "pass\n")])
    assert version is None
    assert [r.measure for r in results] == [{"x": 1}, None, None]
    assert results[1].error == "oops"
    assert results[2].error.startswith("no JSON on the last line")


def test_runner_timeout_without_fork(monkeypatch):
    monkeypatch.delattr(os, "fork")
    _, results = run_scripts([Script("sleeps", "import time\ntime.sleep(60)\n")], timeout=1)
    assert results[0].measure is None and results[0].error == "timed out after 1 s"
