"""The entry point runs a plain check without click (issue 38): the options it reads are the ones
click would hand `check`, anything it does not read goes to click, a text run in a fresh process
never imports click, and the output helpers write what click's would."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import click
import pytest

from trainlint import check_command, cli, launch
from trainlint.finding import Severity
from trainlint.reporters.options import ReportOptions
from trainlint.reporters.text import _COLOURS, _style

ROOT = Path(__file__).resolve().parent.parent


def _click_options(args: list[str], monkeypatch) -> dict:
    """What click hands `check` for `args` (the run itself replaced by a recorder)."""
    seen = []
    monkeypatch.setattr(cli, "run_check", lambda options: seen.append(vars(options)))
    cli.cli.main(args, prog_name="trainlint", standalone_mode=False)
    assert len(seen) == 1
    return seen[0]


FAST = [
    [],
    ["check"],
    ["a.py"],
    ["check", "a.py", "b.py"],
    ["check", "--force-exclude", "--no-stdin", "--", "a.py", "--exit-zero", "-o"],  # the pre-commit hook
    ["a.py", "--no-cache", "-q", "b.py"],  # options between paths
    ["check", "check"],  # a path named check
    ["a.py", "rules"],  # a subcommand's name after a path is a path
    ["check", "--", "-"] + ["--no-stdin"],
    ["--color", "--no-color", "a.py"],  # the last one wins
    ["--no-color", "--color"],
    ["--include-unproven", "--no-include-unproven"],
    ["--no-include-unproven", "--include-unproven"],
    ["--", "--"],
] + [[flag, "a.py"] for flag in launch.FAST_FLAGS]


@pytest.mark.parametrize("args", FAST, ids=lambda args: " ".join(args) or "nothing")
def test_the_fast_path_reads_what_click_reads(args, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    fast = launch.fast_options(args)
    if "-" in args[args.index("--") + 1:] if "--" in args else False:
        assert fast is None  # stdin, or a file named `-`: click's
        return
    assert fast is not None
    assert vars(fast) == _click_options(args, monkeypatch)


def test_defaults_are_clicks(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert launch.DEFAULTS == _click_options([], monkeypatch)
    flags = {param.opts[0] for param in cli.check.params if isinstance(param, click.Option)}
    flags |= {opt for param in cli.check.params for opt in (*param.opts, *param.secondary_opts)}
    assert set(launch.FAST_FLAGS) <= flags  # each fast flag is one of check's own


@pytest.mark.parametrize("args", [
    ["--select", "TL1", "a.py"], ["--select=TL1"], ["-j", "2"], ["-j2"], ["--format", "json"],
    ["-o", "out.txt"], ["--fix"], ["--diff"], ["--watch"], ["--add-noqa"], ["--show-settings", "a.py"],
    ["-"], ["a.py", "-"], ["-h"], ["--help"], ["check", "--help"], ["--version"], ["rules"], ["explain", "TL101"],
    ["lsp"], ["confirm"], ["trace", "x.py"], ["--unknown"], ["-qj2"], ["--unsafe-fixes"], ["--config", "x.toml"],
    ["--stdin-filename", "x.py", "-"],
], ids=" ".join)
def test_anything_else_goes_to_click(args):
    assert launch.fast_options(args) is None


def test_an_unreadable_path_goes_to_click(tmp_path):
    """click.Path() refuses a path that exists and cannot be read, with its own message."""
    secret = tmp_path / "secret.py"
    secret.write_text("x = 1\n")
    secret.chmod(0)
    try:
        if os.access(secret, os.R_OK):
            pytest.skip("running as a user who reads every file")
        assert launch.fast_options([str(secret)]) is None
        assert launch.fast_options([str(tmp_path / "missing.py")]) is not None  # click passes it on
    finally:
        secret.chmod(0o644)


def test_the_program_and_python_m_start_at_the_launcher():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"trainlint": "trainlint.launch:main"}
    assert "from trainlint.launch import main" in (ROOT / "trainlint" / "__main__.py").read_text()


_RUN = """
import json, runpy, sys
sys.argv = ["trainlint", *sys.argv[1:]]
try:
    runpy.run_module("trainlint", run_name="__main__")
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "click": sorted(m for m in sys.modules if m.split(".")[0] == "click")}))
"""


def _run(*args: str, cwd: Path, env: dict | None = None) -> tuple[dict, str]:
    proc = subprocess.run([sys.executable, "-c", _RUN, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})
    lines = proc.stdout.splitlines()
    return json.loads(lines[-1]), "\n".join(lines[:-1])


def test_a_text_check_never_imports_click(tmp_path):
    (tmp_path / "restore.py").write_text("import torch\n\n\ndef restore(path):\n"
                                         "    return torch.load(path, weights_only=False)\n")
    (tmp_path / "plain.py").write_text("x = 1\n")
    env = {"GITHUB_ACTIONS": "", "NO_COLOR": ""}
    done, out = _run("check", "--no-cache", "restore.py", cwd=tmp_path, env=env)
    assert done == {"code": 1, "click": []} and "TL401" in out
    done, out = _run("--force-exclude", "--no-stdin", "--color", "--", "plain.py", cwd=tmp_path, env=env)
    assert done == {"code": 0, "click": []} and "All checks passed" in out
    done, out = _run("check", "--select", "TL401", "restore.py", cwd=tmp_path, env=env)  # click reads it
    assert done["code"] == 1 and "click" in done["click"] and "TL401" in out


def test_a_text_check_of_a_file_no_rule_can_fire_in_imports_no_rule_code(tmp_path):
    """Not even the Rule base class (its examples and dataclasses): selection, the pre-filter and
    the gate read the table of heads, and the reporters link codes without it."""
    (tmp_path / "plain.py").write_text("import json\n\n\ndef dump(options, path):\n"
                                       "    json.dump(options, open(path, 'w'))\n")
    probe = _RUN.replace('m.split(".")[0] == "click"', 'm in ("click", "libcst", "trainlint.rule")')
    proc = subprocess.run([sys.executable, "-c", probe, "check", "--no-cache", "plain.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "GITHUB_ACTIONS": ""})
    assert json.loads(proc.stdout.splitlines()[-1]) == {"code": 0, "click": []}


def test_the_fast_path_and_click_print_the_same(tmp_path):
    (tmp_path / "restore.py").write_text("import torch\n\n\ndef restore(path):\n"
                                         "    return torch.load(path, weights_only=False)\n")
    env = {**os.environ, "GITHUB_ACTIONS": ""}
    for flags in ([], ["--color"], ["--no-color", "--show-source", "--show-evidence"], ["--statistics", "-q"]):
        runs = [subprocess.run([sys.executable, "-c", program, "check", "--no-cache", *flags, "restore.py"],
                               cwd=tmp_path, capture_output=True, env=env, timeout=120)
                for program in ("import sys; sys.argv[0] = 'trainlint'; from trainlint.launch import main; main()",
                                "import sys; sys.argv[0] = 'trainlint'; from trainlint.cli import main; main()")]
        assert [(r.returncode, r.stdout, r.stderr) for r in runs[:1]] == \
            [(r.returncode, r.stdout, r.stderr) for r in runs[1:]], flags
        assert runs[0].returncode == 1 and runs[0].stdout


@pytest.mark.parametrize("severity", list(_COLOURS))
def test_the_text_reporters_styles_are_clicks(severity):
    on, off = ReportOptions(color=True), ReportOptions(color=False)
    for style in ({"fg": _COLOURS[severity], "bold": True}, {"bold": True}, {"fg": _COLOURS[severity]}, {}):
        assert _style("TL101", on, **style) == click.style("TL101", **style)
        assert _style("TL101", off, **style) == "TL101"
    assert Severity.ERROR in _COLOURS


class _Stream(io.TextIOWrapper):
    def __init__(self, tty: bool) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", newline="")
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty

    def text(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode()


@pytest.mark.parametrize("tty", [False, True])
@pytest.mark.parametrize("color", [None, False, True])
@pytest.mark.parametrize("nl", [True, False])
@pytest.mark.parametrize("err", [False, True])
def test_echo_writes_what_click_echo_writes(tty, color, nl, err, monkeypatch):
    for message in ("", "plain", "\033[31m\033[1mTL101\033[0m: é ✓\n", "a\033[?25lb"):
        written = []
        for write in (check_command.echo, click.echo):
            stream = _Stream(tty)
            monkeypatch.setattr(sys, "stderr" if err else "stdout", stream)
            write(message, err=err, nl=nl, color=color)
            written.append(stream.text())
        assert written[0] == written[1], (message, tty, color, nl)


def test_echo_with_no_stream_writes_nothing(monkeypatch):
    monkeypatch.setattr(sys, "stdout", None)
    check_command.echo("nothing")  # no error, as click.echo


def test_the_click_command_hands_check_its_namespace(monkeypatch, tmp_path):
    """`trainlint.cli.check` passes its options unchanged (the namespace the fast path builds)."""
    monkeypatch.chdir(tmp_path)
    seen = _click_options(["--no-cache", "x.py"], monkeypatch)
    assert SimpleNamespace(**seen) == launch.fast_options(["--no-cache", "x.py"])


@pytest.mark.parametrize("setting", ["windows", "completion", "option"])
def test_main_hands_to_click_where_click_reads_the_arguments_itself(setting, monkeypatch):
    """On Windows click expands globs in the arguments; a completion request is click's to answer."""
    called = []
    monkeypatch.setattr(cli, "main", lambda: called.append("click"))
    monkeypatch.setattr(check_command, "run_check", lambda options: called.append("fast"))
    monkeypatch.setattr(sys, "argv", ["trainlint", "check", "--select", "TL1"] if setting == "option"
                        else ["trainlint", "check", "*.py"])
    if setting == "windows":
        monkeypatch.setattr(os, "name", "nt")
    if setting == "completion":
        monkeypatch.setenv("_TRAINLINT_COMPLETE", "bash_complete")
    launch.main()
    assert called == ["click"]


def test_main_runs_a_plain_check_itself(monkeypatch):
    called = []
    monkeypatch.setattr(cli, "main", lambda: called.append("click"))
    monkeypatch.setattr(check_command, "run_check", lambda options: called.append(options.paths))
    monkeypatch.setattr(sys, "argv", ["trainlint", "check", "--no-cache", "a.py"])
    monkeypatch.delenv("_TRAINLINT_COMPLETE", raising=False)
    with pytest.raises(SystemExit) as exited:  # run_check exits with the run's code; returning is 0, as in click
        launch.main()
    assert called == [("a.py",)] and exited.value.code == 0


def test_an_interrupt_is_aborted_as_click_aborts(monkeypatch, capsys):
    def interrupted(options):
        raise KeyboardInterrupt

    monkeypatch.setattr(check_command, "run_check", interrupted)
    monkeypatch.setattr(sys, "argv", ["trainlint", "a.py"])
    monkeypatch.delenv("_TRAINLINT_COMPLETE", raising=False)
    with pytest.raises(SystemExit) as exited:
        launch.main()
    assert exited.value.code == 1 and capsys.readouterr().err == "\nAborted!\n"


def test_every_fixture_and_example_is_reported_alike_by_both_paths():
    """A text check of every fixture and example (the projects as projects), through the fast path
    and through click: the same exit code, report and warnings."""
    paths = [str(path.relative_to(ROOT)) for path in
             sorted((ROOT / "tests" / "fixtures").rglob("*.py")) + sorted((ROOT / "examples").rglob("*.py"))]
    env = {key: value for key, value in os.environ.items() if key not in ("GITHUB_ACTIONS", "NO_COLOR", "FORCE_COLOR")}
    runs = [subprocess.run([sys.executable, "-c", f"import sys; sys.argv[0] = 'trainlint'; "
                            f"from trainlint.{module} import main; main()",
                            "check", "--no-cache", "--show-evidence", "--", *paths],
                           cwd=ROOT, capture_output=True, env=env, timeout=600)
            for module in ("launch", "cli")]
    assert runs[0].returncode == 1 and runs[0].stdout.count(b"\n") > 50
    assert (runs[0].returncode, runs[0].stdout, runs[0].stderr) == (runs[1].returncode, runs[1].stdout, runs[1].stderr)
