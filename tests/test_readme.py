"""The README's rule table is generated from the registry, and its commands are the real ones."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainlint.reporters.catalog import catalog, render_reference, render_rules

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
SCRIPT = REPO / "scripts" / "update_readme.py"
START, END = "<!-- rules:start -->", "<!-- rules:end -->"


def table_in(text: str) -> str:
    return text[text.index(START) + len(START):text.index(END)].strip("\n") + "\n"


def test_rule_table_is_current():
    assert table_in(README.read_text()) == render_rules("md"), (
        "README.md's rule table is stale: run `python scripts/update_readme.py`"
    )


def test_every_rule_is_in_the_table():
    table = table_in(README.read_text())
    from trainlint.rules import registry

    for code, rule in registry().items():
        assert f"| {code} | `{rule.name}` |" in table


def test_rule_reference_is_current_and_every_docs_link_resolves():
    reference = REPO / "docs" / "rules.md"
    assert reference.read_text() == render_reference(), (
        "docs/rules.md is stale: run `python scripts/update_readme.py`"
    )
    text = reference.read_text()
    for info in catalog():
        anchor = info.docs_url.rsplit("#", 1)[1]
        assert info.docs_url.split("#")[0].endswith("/docs/rules.md")
        assert f'<a id="{anchor}"></a>' in text


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_update_script_detects_and_fixes_a_stale_table(tmp_path):
    stale = tmp_path / "README.md"
    stale.write_text(f"# title\n\n{START}\n| code | name |\n|---|---|\n| TL001 | `gone` |\n{END}\n\nafter\n")
    reference = tmp_path / "rules.md"
    reference.write_text(render_reference())
    check = run_script("--check", "--readme", str(stale), "--reference", str(reference))
    assert check.returncode == 1 and "stale" in check.stderr
    assert run_script("--readme", str(stale), "--reference", str(reference)).returncode == 0
    assert run_script("--check", "--readme", str(stale), "--reference", str(reference)).returncode == 0
    text = stale.read_text()
    assert text.startswith("# title\n\n") and text.endswith(f"{END}\n\nafter\n")
    assert table_in(text) == render_rules("md")


def test_update_script_without_markers(tmp_path):
    plain = tmp_path / "README.md"
    plain.write_text("# no markers\n")
    reference = tmp_path / "rules.md"
    reference.write_text(render_reference())
    result = run_script("--check", "--readme", str(plain), "--reference", str(reference))
    assert result.returncode == 2 and "rules:start" in result.stderr


def test_readme_states_the_two_commands():
    text = README.read_text()
    assert "pip install . && trainlint examples/" in text
    assert "pip install -e '.[dev]' && pytest" in text
    for heading in ("## Configuration", "## Suppressing findings", "## Output formats", "### Exit codes",
                    "## Runtime confirmation (`trainlint confirm`)", "## Editor (LSP) and pre-commit"):
        assert heading in text


def test_update_script_detects_a_stale_reference(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# t\n\n{START}\n{render_rules('md')}{END}\n")
    reference = tmp_path / "docs" / "rules.md"
    result = run_script("--check", "--readme", str(readme), "--reference", str(reference))
    assert result.returncode == 1 and "rules.md" in result.stderr
    assert run_script("--readme", str(readme), "--reference", str(reference)).returncode == 0
    assert reference.read_text() == render_reference()


def test_every_check_option_is_in_the_options_table():
    from trainlint.cli import check

    table = README.read_text().split("| option | meaning |", 1)[1].split("\n\n", 1)[0]
    first_column = [row.split("|")[1] for row in table.splitlines() if row.startswith("| ")]
    documented = {name for cell in first_column for name in re.findall(r"(?<![\w-])(--?[a-z][-a-z]*)", cell)}
    options = {name for param in check.params if param.param_type_name == "option"
               for name in [*param.opts, *param.secondary_opts]}
    missing = sorted(o for o in options - {"-h", "--help"} if o not in documented)
    assert missing == [], f"options missing from the README's table: {missing}"


# -- every shell command the README shows, run ---------------------------------------------------

def readme_commands(text: str | None = None) -> list[str]:
    """Each line of a ```sh block (its trailing `# comment` removed, comment lines skipped) and each
    `$ ` line of any other code block."""
    text = README.read_text() if text is None else text
    commands = []
    for language, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        for line in body.splitlines():
            if language == "sh" and line.strip() and not line.lstrip().startswith("#"):
                commands.append(re.sub(r"\s+#\s.*$", "", line).strip())
            elif line.startswith("$ "):
                commands.append(line[2:].strip())
    return commands


#: The exit code of each command, run by bash in a fresh sandbox: a folder holding train.py and
#: src/train.py (the bundled examples/train_amp.py, whose bugs trainlint reports), src/ the other
#: examples, and examples/ itself; `trainlint` on the PATH runs this checkout.
EXIT_CODES = {
    "trainlint": 1,
    "trainlint train.py src/": 1,
    "trainlint check --select TL1,TL401 --show-source src/": 1,
    "cat train.py | trainlint - --stdin-filename train.py": 1,
    "trainlint check --show-settings src/train.py": 0,
    "trainlint check --add-noqa src/": 0,
    "trainlint check --fix src/": 1,
    "trainlint check --diff --unsafe-fixes src/": 1,
    "trainlint rules": 0,
    "trainlint explain TL101": 0,
    "trainlint explain --frameworks": 0,
}
#: Commands that run a training script under torch for a few steps: `pytest -m slow`.
SLOW = {
    "python -m venv .venv && . .venv/bin/activate && pip install . && trainlint examples/": 1,
    "trainlint trace train.py -- --epochs 1": 1,
    "trainlint trace train.py --max-steps 8 -- --epochs 1 --eval-every 4": 1,
    "trainlint trace train.py --format json --max-steps 4 -- --epochs 1 --num-images 256": 1,
    "trainlint trace examples/train_amp.py --max-steps 8 -- --epochs 1 --eval-every 4 --num-images 700": 1,
    # the example neither seeds nor saves its data order: the resume diverges at step 17
    'trainlint trace examples/finetune_accumulation.py --resume-check 16 --resume-arg "--resume {checkpoint}" '
    '-- --epochs 2 --out runs/check': 1,
}
#: Run apart: it runs until Ctrl-C.
WATCH = "trainlint check --watch src/"
#: Not run here, and why.
NOT_RUN = {
    "pip install -e '.[dev]' && pytest": "the whole test suite, this test among it",
    'trainlint trace train.py --resume-check 3 --resume-arg "--resume {checkpoint}" -- runs/last.pt':
        "a transcript of tests/test_trace.py's resume_scheduler script, whose run "
        "test_resume_check_judges_the_static_checkpoint_findings checks",
}


def test_every_readme_command_is_run_by_these_tests():
    shown = readme_commands()
    assert len(shown) == len(set(shown))
    known = {*EXIT_CODES, *SLOW, WATCH, *NOT_RUN}
    assert set(shown) == known, f"README commands without an expected exit code here: {set(shown) - known}"


def test_readme_commands_are_read_from_sh_blocks_and_dollar_lines():
    text = "```sh\ntrainlint a   # why\n  # a note\n```\n\n```\n$ trainlint b\noutput\n```\n"
    assert readme_commands(text) == ["trainlint a", "trainlint b"]


@pytest.fixture
def sandbox(tmp_path: Path) -> tuple[Path, dict]:
    import shutil

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "trainlint"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m trainlint "$@"\n')
    shim.chmod(0o755)
    work = tmp_path / "work"
    shutil.copytree(REPO / "examples", work / "examples")
    shutil.copytree(REPO / "examples", work / "src")
    shutil.copy(REPO / "examples" / "train_amp.py", work / "train.py")
    shutil.copy(REPO / "examples" / "train_amp.py", work / "src" / "train.py")
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "FORCE_COLOR", "NO_COLOR")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return work, env


def _run(command: str, sandbox, timeout: float = 300) -> subprocess.CompletedProcess:
    work, env = sandbox
    return subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


@pytest.mark.parametrize("command", sorted(EXIT_CODES))
def test_readme_command_exits_as_documented(command, sandbox):
    proc = _run(command, sandbox)
    assert proc.returncode == EXIT_CODES[command], proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def _short_id(command: str) -> str:
    """pytest names a parameter over 100 characters by its index: keep `-k` able to pick it."""
    return command if len(command) <= 100 else command[:97] + "..."


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(SLOW), ids=_short_id)
def test_slow_readme_command_exits_as_documented(command, sandbox):
    work, env = sandbox
    if "pip install ." in command:  # the quick start installs this checkout into a new venv
        import shutil

        for name in ("trainlint", "rules", "pyproject.toml", "setup.py", "README.md"):
            (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, work / name)
        env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = _run(command, (work, env), timeout=900)
    assert proc.returncode == SLOW[command], proc.stdout[-2000:] + proc.stderr[-2000:]


def test_readme_watch_command_checks_then_stops_on_ctrl_c(sandbox):
    import signal
    import time

    pytest.importorskip("watchfiles")
    work, env = sandbox
    proc = subprocess.Popen(["bash", "-c", f"exec {WATCH}"], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        first = ""
        deadline = time.monotonic() + 120
        while "Found " not in first and time.monotonic() < deadline and proc.poll() is None:
            first += proc.stdout.readline()
        assert "Found " in first, first
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()


def test_readme_names_every_core_dependency_pre_commit_installs():
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.match(r"[A-Za-z0-9_.-]+", spec).group().lower() for spec in declared}
    listed = re.search(r"core dependencies only \(([^)]*)\)", " ".join(README.read_text().split())).group(1)
    assert {name.strip().lower() for name in listed.split(",")} == names


def test_readme_states_what_discovery_and_show_settings_do():
    text = " ".join(README.read_text().split())
    assert "git ls-files" not in text  # git is never run (trainlint/reader/discovery.py)
    assert "pip install trainlint\n" not in README.read_text()  # not on PyPI: the recipes install from git
