"""`check --fix`, `--unsafe-fixes`, `--diff` and the `fix`/`unsafe-fixes`/`fixable`/`unfixable`
keys: in-process through click's runner, and once as a real subprocess."""

from __future__ import annotations

import subprocess
import sys

from conftest import BAD, GOOD

# TL402 (a safe fix: same bytes, written atomically) and TL401 (unsafe: weights_only=True may
# refuse a checkpoint that loaded before)
BOTH = '''import torch

state = torch.load("ckpt.pt", map_location="cpu", weights_only=False)
torch.save(state, "ckpt.pt")  # overwritten in place
'''
SAFE_FIXED = '''import os

import torch


def atomic_save(obj, path):
    # into a temporary file, synced to disk, then renamed: `path` is never half-written
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


state = torch.load("ckpt.pt", map_location="cpu", weights_only=False)
atomic_save(state, "ckpt.pt")  # overwritten in place
'''
ALL_FIXED = SAFE_FIXED.replace("weights_only=False", "weights_only=True")
SELECT = ("--select", "TL401,TL402", "--no-cache")


def test_fix_applies_the_safe_fixes_and_reports_what_remains(project, run):
    (project / "both.py").write_text(BOTH)
    good_before = (project / "good.py").stat().st_mtime_ns
    result = run("check", "--fix", *SELECT, "both.py", "good.py")
    assert (project / "both.py").read_text() == SAFE_FIXED
    assert (project / "good.py").stat().st_mtime_ns == good_before  # nothing to fix: not rewritten
    assert result.exit_code == 1
    assert [line.split(" ")[1] for line in result.stdout.splitlines() if ": TL" in line] == ["TL401"]
    assert result.stdout.splitlines()[-1] == ("Found 1 finding (1 error; 1 with an unsafe fix) in 1 file "
                                              "(2 checked). Fixed 1 finding (1 remaining).")


def test_unsafe_fixes_apply_the_rest_and_a_second_run_changes_nothing(project, run):
    (project / "both.py").write_text(BOTH)
    result = run("check", "--fix", "--unsafe-fixes", *SELECT, "both.py")
    assert (result.exit_code, (project / "both.py").read_text()) == (0, ALL_FIXED)
    assert result.stdout == "All checks passed (1 file). Fixed 2 findings (0 remaining).\n"
    again = run("check", "--fix", "--unsafe-fixes", *SELECT, "both.py")
    assert again.stdout == "All checks passed (1 file). Fixed 0 findings (0 remaining).\n"


def test_unsafe_fixes_without_fix_only_report(project, run):
    result = run("check", "--unsafe-fixes", *SELECT, "bad.py")
    assert result.exit_code == 1 and (project / "bad.py").read_text() == BAD
    assert "Fixed" not in result.stdout


def test_diff_prints_the_change_and_writes_nothing(project, run):
    (project / "both.py").write_text(BOTH)
    result = run("check", "--diff", *SELECT, "both.py", "good.py")
    assert result.exit_code == 1
    assert (project / "both.py").read_text() == BOTH
    assert result.stdout.splitlines()[:3] == ["--- both.py", "+++ both.py", "@@ -1,4 +1,17 @@"]
    assert "+import os" in result.stdout.splitlines() and "-torch.save(state, \"ckpt.pt\")  # overwritten in place" \
        in result.stdout.splitlines()
    assert "TL401" not in result.stdout  # a diff, not a report
    assert result.stderr == "Would fix 1 finding.\n"
    unsafe = run("check", "--diff", "--unsafe-fixes", *SELECT, "both.py")
    assert '+state = torch.load("ckpt.pt", map_location="cpu", weights_only=True)' in unsafe.stdout.splitlines()
    assert unsafe.stderr == "Would fix 2 findings.\n"


def test_diff_exits_0_when_nothing_would_change(project, run):
    clean = run("check", "--diff", *SELECT, "good.py")
    assert (clean.exit_code, clean.stdout, clean.stderr) == (0, "", "No fixes to apply.\n")
    unsafe_only = run("check", "--diff", *SELECT, "bad.py")  # TL401's fix needs --unsafe-fixes
    assert (unsafe_only.exit_code, unsafe_only.stdout) == (0, "")


def test_stdin_fix_writes_the_fixed_source_to_stdout(project, run):
    result = run("check", "-", "--fix", "--unsafe-fixes", *SELECT, input=BAD)
    assert result.stdout == GOOD
    assert result.exit_code == 0
    assert "Fixed 1 finding (0 remaining)." in result.stderr
    # what cannot be fixed is still reported (on stderr) and sets the exit code
    safe_only = run("check", "-", "--stdin-filename", "pkg/train.py", "--fix", *SELECT, input=BOTH)
    assert safe_only.stdout == SAFE_FIXED
    assert safe_only.exit_code == 1 and "pkg/train.py:16:9: TL401" in safe_only.stderr  # a line of the fixed source


def test_stdin_diff(project, run):
    result = run("check", "-", "--diff", "--unsafe-fixes", *SELECT, input=BAD)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[:2] == ["--- -", "+++ -"]


def test_configuration_keys(project, run):
    (project / "both.py").write_text(BOTH)
    (project / "pyproject.toml").write_text('[tool.trainlint]\nfix = true\nunsafe-fixes = true\n'
                                            'unfixable = ["TL401"]\n')
    assert run("check", "--no-fix", *SELECT, "both.py").exit_code == 1
    assert (project / "both.py").read_text() == BOTH  # --no-fix wins over `fix = true`
    result = run("check", *SELECT, "both.py")
    assert (project / "both.py").read_text() == SAFE_FIXED  # TL401 is unfixable here
    assert result.exit_code == 1
    (project / "pyproject.toml").write_text('[tool.trainlint]\nfix = true\nfixable = ["TL401"]\n')
    (project / "both.py").write_text(BOTH)
    assert run("check", "--unsafe-fixes", *SELECT, "both.py").exit_code == 1
    assert (project / "both.py").read_text() == BOTH.replace("weights_only=False", "weights_only=True")


def test_bad_configuration_values_are_one_line_errors(project, run):
    (project / "pyproject.toml").write_text('[tool.trainlint]\nfix = "yes"\n')
    result = run("check", "bad.py")
    assert result.exit_code == 2
    assert result.stderr.strip().endswith("'fix' must be true or false, got 'yes'")
    (project / "pyproject.toml").write_text('[tool.trainlint]\nunfixable = ["TL9"]\n')
    assert run("check", "bad.py").exit_code == 2


def test_fix_conflicts_are_usage_errors(project, run):
    for args in (("--fix", "--add-noqa"), ("--diff", "--add-noqa"), ("--diff", "--watch")):
        result = run("check", *args, "bad.py")
        assert result.exit_code == 2 and "cannot be used together" in result.stderr


def test_fix_in_a_real_process(project):
    (project / "both.py").write_text(BOTH)
    done = subprocess.run([sys.executable, "-m", "trainlint", "check", "--fix", "--unsafe-fixes", *SELECT, "."],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1  # broken.py is TL000, which no fix touches
    assert (project / "both.py").read_text() == ALL_FIXED
    assert (project / "bad.py").read_text() == GOOD
    assert "broken.py:1:1: TL000" in done.stdout and "Fixed 3 findings (1 remaining)." in done.stdout


def test_show_settings_names_the_fix_keys_and_their_origin(project, run):
    (project / "pyproject.toml").write_text('[tool.trainlint]\nfix = true\nunfixable = ["TL4"]\n')
    text = run("check", "--show-settings", "--no-unsafe-fixes", "bad.py").stdout
    rows = {line.split()[0]: line for line in text.splitlines()[1:] if line.strip()}
    assert rows["fix"].split()[1] == "true" and "pyproject.toml" in rows["fix"]
    assert rows["unsafe-fixes"].split()[1] == "false" and "command line" in rows["unsafe-fixes"]
    assert '["TL4"]' in rows["unfixable"] and '["ALL"]' in rows["fixable"]


def test_json_report_after_fixing_counts_the_fixes(project, run):
    import json

    (project / "both.py").write_text(BOTH)
    data = json.loads(run("check", "--fix", "--format", "json", *SELECT, "both.py").stdout)
    assert data["fixed"] == 1 and [f["code"] for f in data["findings"]] == ["TL401"]
    assert "fixed" not in json.loads(run("check", "--format", "json", *SELECT, "both.py").stdout)
