"""The command line: in-process through click's runner, and as a real subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BAD, BAD_COLUMN, BAD_LINE, GOOD
from trainlint import __version__
from trainlint.cli import FORMATS
from trainlint.reporters import REPORTERS
from trainlint.reporters.catalog import catalog
from trainlint.rules import registry

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def finding_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if ": TL" in line]


def tl401_paths(output: str) -> list[str]:
    """The paths of the TL401 findings in text output, sorted (TL000 is always selected)."""
    return sorted(line.split(":")[0] for line in finding_lines(output) if " TL401 " in line)


# -- check: exit codes, default command ---------------------------------------------------------

def test_findings_exit_1_and_the_text_line(project, run):
    result = run("check", "--select", "TL401", "bad.py", "good.py")
    assert result.exit_code == 1
    assert finding_lines(result.stdout) == [
        f"bad.py:{BAD_LINE}:{BAD_COLUMN}: TL401 [unsafe-torch-load] "
        + result.stdout.split("[unsafe-torch-load] ", 1)[1].splitlines()[0]
    ]
    assert result.stdout.splitlines()[-1] == "Found 1 finding (1 error; 1 with an unsafe fix) in 1 file (2 checked)."
    assert "\x1b[" not in result.stdout  # no colour when not on a terminal


def test_clean_run_exits_0_with_summary(project, run):
    result = run("--select", "TL401", "good.py")
    assert result.exit_code == 0
    assert result.stdout == "All checks passed (1 file).\n"


def test_bare_paths_mean_check(project, run):
    plain = run("bad.py", "good.py", "--select", "TL401", "--no-cache")
    explicit = run("check", "bad.py", "good.py", "--select", "TL401", "--no-cache")
    assert plain.exit_code == explicit.exit_code == 1
    assert plain.stdout == explicit.stdout
    options_first = run("--select", "TL401", "--no-cache", "bad.py", "good.py")
    assert options_first.stdout == explicit.stdout


def test_no_path_checks_the_current_directory(project, run):
    result = run("check", "--select", "TL401,TL000", "--no-cache")
    assert result.exit_code == 1
    assert {line.split(":")[0] for line in finding_lines(result.stdout)} == {"bad.py", "broken.py"}
    assert "(3 checked)" in result.stdout


def test_exit_zero(project, run):
    result = run("check", "--exit-zero", "bad.py")
    assert result.exit_code == 0
    assert "TL401" in result.stdout


def test_syntax_error_among_good_files(project, run):
    result = run("check", "--select", "TL401", "--no-cache", ".")
    assert result.exit_code == 1
    codes = sorted((line.split(":")[0], line.split()[1]) for line in finding_lines(result.stdout))
    assert codes == [("bad.py", "TL401"), ("broken.py", "TL000")]


def test_missing_paths_one_line_each(project, run):
    result = run("check", "nope.py", "bad.py", "missing_dir")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "trainlint: error: no such file or directory: nope.py",
        "trainlint: error: no such file or directory: missing_dir",
    ]


def test_unreadable_file_is_one_line_and_exit_2(project, run):
    os.symlink("loop.py", project / "loop.py")  # reading it fails: too many levels of symlinks
    result = run("check", "--select", "TL401", "--no-cache", ".")
    assert result.exit_code == 2
    assert "bad.py:3:9: TL401" in result.stdout  # the other files are still checked
    errors = result.stderr.splitlines()
    assert len(errors) == 1 and errors[0].startswith("trainlint: error: cannot read loop.py: ")


@pytest.mark.parametrize("option", ["--select", "--ignore", "--extend-select"])
def test_bad_selector_is_one_line(project, run, option):
    result = run("check", option, "TL401,TL999", "bad.py")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"trainlint: error: {option}: unknown rule selector 'TL999' (see `trainlint rules`)"
    ]


@pytest.mark.parametrize("selector", ["tl999", "Unsafe-Torch-Lod"])
def test_bad_selector_is_echoed_as_written(project, run, selector):
    result = run("check", "--ignore", selector, "bad.py")
    assert result.exit_code == 2
    assert f"unknown rule selector '{selector}'" in result.stderr


# -- selection ---------------------------------------------------------------------------------

@pytest.mark.parametrize("selector", ["TL401", "TL4", "tl40", "ALL", "TL000,TL401", "unsafe-torch-load",
                                      "TL000,Unsafe-Torch-Load"])
def test_selectors_that_include_tl401(project, run, selector):
    result = run("check", "--select", selector, "--no-cache", "bad.py")
    assert result.exit_code == 1 and "TL401" in result.stdout


@pytest.mark.parametrize("args", [
    ["--select", "TL000"],
    ["--ignore", "TL401"],
    ["--ignore", "TL4"],
    ["--select", "ALL", "--ignore", "TL401"],
    ["--select", "TL0", "--extend-select", "TL000"],
    ["--ignore", "unsafe-torch-load"],
    ["--select", "TL0", "--extend-select", "non-atomic-checkpoint-save"],
])
def test_selections_that_exclude_tl401(project, run, args):
    result = run("check", *args, "--no-cache", "bad.py")
    assert result.exit_code == 0, result.stdout
    assert "TL401" not in result.stdout


def test_extend_select_adds_to_a_selection(project, run):
    result = run("check", "--select", "TL000", "--extend-select", "TL401", "--no-cache", "bad.py", "broken.py")
    assert sorted(line.split()[1] for line in finding_lines(result.stdout)) == ["TL000", "TL401"]


def test_repeated_and_comma_separated_options(project, run):
    result = run("check", "--select", "TL000", "--select", "TL401", "--no-cache", "bad.py", "broken.py")
    assert sorted(line.split()[1] for line in finding_lines(result.stdout)) == ["TL000", "TL401"]


# -- stdin, output file, statistics, show-source, formats ---------------------------------------

def test_stdin_with_filename(project, run):
    result = run("check", "-", "--stdin-filename", "pkg/train.py", "--select", "TL401", input=BAD)
    assert result.exit_code == 1
    assert finding_lines(result.stdout)[0].startswith(f"pkg/train.py:{BAD_LINE}:{BAD_COLUMN}: TL401 ")
    assert "(1 checked)" in result.stdout


def test_stdin_without_filename_and_clean(project, run):
    result = run("-", "--select", "TL401", input=GOOD)
    assert result.exit_code == 0
    assert result.stdout == "All checks passed (1 file).\n"


def test_stdin_filename_alone_reads_stdin(project, run):
    result = run("check", "--stdin-filename", "x.py", "--select", "TL401", input=BAD)
    assert result.exit_code == 1 and "x.py:3:9: TL401" in result.stdout


def test_stdin_undecodable_is_tl000(project, run):
    result = run("-", input=b"x = '\xff\xfe'\n")
    assert result.exit_code == 1 and result.stdout.startswith("-:1:1: TL000 [syntax-error] cannot decode")


def test_output_file(project, run):
    result = run("check", "--format", "json", "--output", "report.json", "bad.py")
    assert result.exit_code == 1
    assert result.stdout == ""
    report = json.loads((project / "report.json").read_text())
    assert [f["code"] for f in report["findings"]] == ["TL401"]


def test_output_file_that_cannot_be_written(project, run):
    result = run("check", "--output", "no/such/dir/report.txt", "bad.py")
    assert result.exit_code == 2
    assert result.stderr.startswith("trainlint: error: cannot write no/such/dir/report.txt: ")
    assert len(result.stderr.splitlines()) == 1


def test_statistics_text_and_json(project, run):
    (project / "bad2.py").write_text(BAD + BAD.replace("state", "other"))
    text = run("check", "--statistics", "--select", "TL401,TL000", "--no-cache", ".")
    assert text.exit_code == 1
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["3", "TL401", "unsafe-torch-load", "[error]"]
    assert lines[1].split() == ["1", "TL000", "syntax-error", "[error]"]
    assert lines[2] == "Found 4 findings (4 errors; 3 with an unsafe fix) in 3 files (4 checked)."
    as_json = run("check", "--statistics", "--format", "json", "--select", "TL401,TL000", "--no-cache", ".")
    assert json.loads(as_json.stdout) == [
        {"code": "TL401", "name": "unsafe-torch-load", "severity": "error", "count": 3},
        {"code": "TL000", "name": "syntax-error", "severity": "error", "count": 1},
    ]


def test_statistics_with_other_formats_is_a_usage_error(project, run):
    result = run("check", "--statistics", "--format", "sarif", "bad.py")
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1


def test_show_source_puts_carets_under_the_span(project, run):
    result = run("check", "--show-source", "--select", "TL401", "bad.py")
    lines = result.stdout.splitlines()
    source_line = BAD.splitlines()[BAD_LINE - 1]
    at = lines.index(f"3 | {source_line}")
    caret_line = lines[at + 1]
    assert caret_line.startswith("  | ")
    carets = caret_line[4:]
    span = source_line[BAD_COLUMN - 1:]
    assert carets == " " * (BAD_COLUMN - 1) + "^" * len(span)
    assert "fix" in lines[at + 2]


def test_show_source_for_stdin_keeps_tabs(project, run):
    source = 'import torch\nif True:\n\tstate = torch.load("c.pt", map_location="cpu", weights_only=False)\n'
    result = run("-", "--show-source", "--select", "TL401", input=source)
    assert finding_lines(result.stdout)[0].startswith("-:3:10: TL401")
    # a tab before the span stays a tab in the padding, so the carets line up in any terminal
    assert any(line.startswith("  | \t        ^^^^") for line in result.stdout.splitlines())


def test_github_format_by_default_under_github_actions(project, run):
    result = run("check", "--select", "TL401", "bad.py", env={"GITHUB_ACTIONS": "true"})
    assert result.stdout.startswith("::error file=bad.py,line=3,col=9,endLine=3,")
    assert "title=TL401 unsafe-torch-load::" in result.stdout
    text = run("check", "--format", "text", "--select", "TL401", "bad.py", env={"GITHUB_ACTIONS": "true"})
    assert text.stdout.startswith("bad.py:3:9: TL401")


def test_every_format_is_a_reporter():
    assert set(FORMATS) == set(REPORTERS)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_runs(project, run, fmt):
    result = run("check", "--format", fmt, "--select", "TL401", "bad.py", "good.py")
    assert result.exit_code == 1
    assert result.stdout
    if fmt in ("json", "sarif", "lsp"):
        json.loads(result.stdout)


def test_color_when_forced(project, run):
    result = run("check", "--select", "TL401", "bad.py", env={"FORCE_COLOR": "1"})
    assert "\x1b[" in result.stdout


# -- discovery --------------------------------------------------------------------------------

def test_default_excludes_and_non_python_files(project, run):
    for folder in (".venv/lib", "build", "node_modules/pkg", "__pycache__", "proj.egg-info"):
        (project / folder).mkdir(parents=True)
        (project / folder / "x.py").write_text(BAD)
    (project / "notes.txt").write_text(BAD)
    (project / "src").mkdir()
    (project / "src" / "y.py").write_text(BAD)
    result = run("check", "--select", "TL401", "--no-cache", ".")
    assert tl401_paths(result.stdout) == ["bad.py", "src/y.py"]


def test_a_named_file_is_checked_even_when_excluded(project, run):
    (project / "build").mkdir()
    (project / "build" / "gen.py").write_text(BAD)
    (project / "script").write_text(BAD)  # no .py suffix
    result = run("check", "--select", "TL401", "build/gen.py", "script")
    assert tl401_paths(result.stdout) == ["build/gen.py", "script"]


def test_each_file_checked_once(project, run):
    result = run("check", "--select", "TL401", "--no-cache", "bad.py", ".", "./bad.py")
    assert tl401_paths(result.stdout) == ["bad.py"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_ignored_paths_are_skipped(project, run):
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / ".gitignore").write_text("ignored/\n*_generated.py\n")
    (project / "ignored").mkdir()
    (project / "ignored" / "x.py").write_text(BAD)
    (project / "model_generated.py").write_text(BAD)
    (project / "kept").mkdir()
    (project / "kept" / "y.py").write_text(BAD)
    result = run("check", "--select", "TL401", "--no-cache", ".")
    assert tl401_paths(result.stdout) == ["bad.py", "kept/y.py"]
    named = run("check", "--select", "TL401", "--no-cache", "ignored")  # named explicitly: checked
    assert tl401_paths(named.stdout) == ["ignored/x.py"]


def test_jobs_give_the_same_results(project, run):
    for number in range(12):
        (project / f"m{number:02}.py").write_text(BAD if number % 3 == 0 else GOOD)
    serial = run("check", "--format", "json", "--no-cache", "-j", "1", ".")
    parallel = run("check", "--format", "json", "--no-cache", "-j", "3", ".")
    assert json.loads(serial.stdout) == json.loads(parallel.stdout)
    assert json.loads(serial.stdout)["files_checked"] == 15


def test_cache_is_written_and_reused(project, run):
    first = run("check", "--format", "json", "bad.py", "good.py")
    assert (project / ".trainlint_cache").is_dir()
    second = run("check", "--format", "json", "bad.py", "good.py")
    assert json.loads(first.stdout) == json.loads(second.stdout)


def test_no_cache_writes_nothing(project, run):
    run("check", "--no-cache", "bad.py")
    assert not (project / ".trainlint_cache").exists()


# -- rules, explain, confirm, lsp, version ------------------------------------------------------

def test_rules_json_lists_every_rule():
    from click.testing import CliRunner

    from trainlint.cli import cli

    result = CliRunner().invoke(cli, ["rules", "--format", "json"])
    listed = json.loads(result.stdout)
    assert [r["code"] for r in listed] == ["TL000", *registry()]
    for entry in listed[1:]:
        rule = registry()[entry["code"]]
        assert entry == {"code": rule.code, "name": rule.name, "severity": rule.severity.value,
                         "enabled_by_default": rule.enabled_by_default, "summary": rule.summary}


@pytest.mark.parametrize("fmt", ["table", "md"])
def test_rules_table_and_markdown(run, fmt):
    result = run("rules", "--format", fmt)
    assert result.exit_code == 0
    for info in catalog():
        assert info.code in result.stdout and info.name in result.stdout


def test_explain_prints_the_rule_documentation(run):
    from trainlint.reporters.framework_models import rule_section

    for code, rule in registry().items():
        result = run("explain", code.lower())
        assert result.exit_code == 0
        assert result.stdout == rule.documentation() + rule_section(code)  # + the frameworks it understands
    assert "## Example" in run("explain", "TL000").stdout


def test_explain_unknown_code(run):
    result = run("explain", "TL999")
    assert result.exit_code == 2
    assert result.stderr == "trainlint: error: unknown rule code or name 'TL999' (see `trainlint rules`)\n"


def test_version(run):
    result = run("--version")
    assert result.exit_code == 0 and result.stdout == f"trainlint {__version__}\n"


def test_help_lists_the_subcommands(run):
    result = run("--help")
    for command in ("check", "rules", "explain", "confirm", "lsp"):
        assert command in result.stdout


BLOCK_IMPORT = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
sys.argv = ["trainlint", *{args!r}]
from trainlint.cli import main
main()
"""


@pytest.mark.parametrize("command, blocked, message", [
    (["confirm"], "torch", "trainlint confirm needs torch: pip install 'trainlint[runtime]'"),
    (["lsp"], "pygls", "pip install 'trainlint[lsp]'"),
])
def test_optional_commands_without_their_extra(command, blocked, message):
    code = BLOCK_IMPORT.format(blocked=blocked, args=command)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(proc.stderr.splitlines()) == 1 and message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_check_imports_neither_torch_nor_pygls(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    code = (
        "import sys\nfrom trainlint.cli import main\n"
        f"sys.argv = ['trainlint', '--no-cache', {str(tmp_path / 'bad.py')!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LOADED', sorted(m for m in ('torch', 'pygls', 'lsprotocol') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.splitlines()[-1] == "LOADED []"


# -- a real subprocess and the bundled examples -------------------------------------------------

def _subprocess(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "FORCE_COLOR")}
    return subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, env=env, timeout=120)


def test_subprocess_exit_codes_and_output(project):
    found = _subprocess("--select", "TL401", "--no-cache", ".", cwd=project)
    assert found.returncode == 1
    assert finding_lines(found.stdout)[0].startswith("bad.py:3:9: TL401 [unsafe-torch-load] ")
    clean = _subprocess("check", "--select", "TL401", "good.py", cwd=project)
    assert (clean.returncode, clean.stdout) == (0, "All checks passed (1 file).\n")
    missing = _subprocess("check", "absent.py", cwd=project)
    assert missing.returncode == 2
    assert missing.stderr == "trainlint: error: no such file or directory: absent.py\n"


@pytest.mark.skipif(shutil.which("trainlint") is None, reason="console script not installed")
def test_console_script(project):
    proc = subprocess.run(["trainlint", "check", "--format", "json", "--no-cache", "bad.py"], cwd=project,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 1
    assert [f["code"] for f in json.loads(proc.stdout)["findings"]] == ["TL401"]


def test_examples_contract_json():
    proc = _subprocess("check", "--format", "json", "--select", "ALL", "--no-cache", "examples/", cwd=REPO)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert list(report) == ["version", "files_checked", "findings"]
    assert report["version"] == __version__
    assert report["files_checked"] == len(list(EXAMPLES.glob("*.py")))
    keys = ["path", "line", "column", "end_line", "end_column", "code", "name", "severity", "message", "fix",
            "evidence", "url"]
    help_uris = {rule["id"]: rule["helpUri"] for rule in json.loads(_subprocess(
        "check", "--format", "sarif", "--no-cache", "examples/", cwd=REPO).stdout)["runs"][0]["tool"]["driver"]["rules"]}
    for finding in report["findings"]:
        assert list(finding) == keys
        assert finding["url"] == help_uris[finding["code"]]
        assert finding["path"].startswith("examples/")
        assert finding["severity"] in ("error", "warning", "info")
        assert finding["fix"] is None or set(finding["fix"]) == {"title", "safe", "edits"}
    assert "TL401" in {f["code"] for f in report["findings"]}
