"""On a GitHub Actions runner (GITHUB_ACTIONS=true) and with no --format, the real `trainlint`
process prints workflow commands, escaped the way the runner parses them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

# A file name with the property separators and the escape character in it, CRLF line endings,
# and a finding that spans two lines. (Messages are one line by construction; their escaping of
# `%`, `\r` and `\n` is covered by the reporter's unit tests.)
NAME = "run,1:50%.py"
SOURCE = ('import pickle\r\n'
          '\r\n'
          'with open("runs/checkpoint.pkl", "rb") as f:\r\n'
          '    state = (pickle  # 100% legacy\r\n'
          '             .load)(f)\r\n')


def _trainlint(cwd: Path, *args: str, github: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
    if github:
        env["GITHUB_ACTIONS"] = "true"
    # bytes, decoded here: text mode would turn a raw \r in the output into \n and hide it
    proc = subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, env=env,
                          capture_output=True, timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8"),
                                       proc.stderr.decode("utf-8", "replace"))


def _unescape(text: str) -> str:
    # what the runner does, in its order: %25 last, so that `%253A` stays `%3A`
    for escaped, char in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(escaped, char)
    return text


def _parse(command: str) -> tuple[str, dict[str, str], str]:
    """`::level key=value,...::message` split the way the runner splits it."""
    assert command.startswith("::")
    head, message = command[2:].split("::", 1)
    level, _, props = head.partition(" ")
    properties = {}
    for item in props.split(","):
        key, _, value = item.partition("=")
        properties[key] = _unescape(value)
    return level, properties, _unescape(message)


def test_runner_environment_gives_escaped_workflow_commands(tmp_path):
    (tmp_path / NAME).write_bytes(SOURCE.encode())
    proc = _trainlint(tmp_path, NAME)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.split("\n")
    commands = [line for line in lines if line.startswith("::")]
    assert len(commands) == 1, proc.stdout
    [command] = commands
    # nothing the runner would read as a line break or separator is left raw
    assert "\r" not in command
    assert "run%2C1%3A50%25.py" in command

    level, properties, message = _parse(command)
    assert level == "error"
    assert properties == {"file": NAME, "line": "4", "col": "13", "endLine": "5", "endColumn": "23",
                          "title": "TL401 unsafe-torch-load"}
    assert message.startswith("`pickle.load` of a checkpoint runs arbitrary code")
    as_json = _trainlint(tmp_path, NAME, "--format", "json", "--no-cache")
    assert [f["message"] for f in json.loads(as_json.stdout)["findings"]] == [message]


def test_clean_file_on_the_runner_prints_no_commands(tmp_path):
    (tmp_path / "train.py").write_text('import torch\n\nstate = torch.load("ckpt.pt", weights_only=True)\n')
    proc = _trainlint(tmp_path, "train.py")
    assert proc.returncode == 0, proc.stderr
    assert "::" not in proc.stdout


def test_explicit_format_wins_and_no_runner_means_text(tmp_path):
    (tmp_path / NAME).write_bytes(SOURCE.encode())
    explicit = _trainlint(tmp_path, "--format", "json", NAME)
    assert explicit.returncode == 1
    assert explicit.stdout.lstrip().startswith("{") and "::error" not in explicit.stdout
    local = _trainlint(tmp_path, NAME, github=False)
    assert local.returncode == 1
    assert local.stdout.startswith(f"{NAME}:4:13: TL401") and "::error" not in local.stdout


# -- nothing the checked repository wrote can issue a workflow command (issue 34, item 13) --------

def _runner_commands(output: str) -> list[str]:
    """The workflow commands the runner would run from `output`: it reads lines as .NET's ReadLine
    does (LF, CR and CRLF end a line), takes `::name ...::data` after leading whitespace, and the
    legacy `##[name ...]data` anywhere in a line."""
    commands = []
    for line in re.split(r"\r\n|\r|\n", output):
        stripped = line.lstrip()
        if stripped.startswith("::") and "::" in stripped[2:]:
            commands.append(stripped)
        elif re.search(r"##\[[^\]]*\]", line) or re.search(r"##vso\[", line, re.IGNORECASE):
            commands.append(line)
    return commands


BUGGY = 'import torch\n\nstate = torch.load("ckpt.pt", weights_only=False)\n'
# the finding's line ends inside a string: --add-noqa cannot add a comment there and warns, naming the file
UNNOQAABLE = 'import torch\n\nstate = torch.load("""ckpt\n.pt""", weights_only=False)\n'
NEWLINE_NAME = "a\n::error file=forged.py,line=1::forged by a file name.py"
COLON_NAME = "::error file=forged.py,line=2::forged by a file name.py"
# an unsafe fix (TL102 divides the loss) whose diff shows the docstring's and comment's lines as context
CONTEXT = ('import torch\n\n'
           'for i, (x, y) in enumerate(train_loader):\n'
           '    note = """\n'
           '      ::error file=forged.py,line=3::forged by a diff context line\n'
           '"""\n'
           '    loss = criterion(model(x), y)  # ##[error]forged by the legacy form\n    loss.backward()\n'
           '    if (i + 1) % accum_steps == 0:\n        optimizer.step()\n        optimizer.zero_grad()\n')


def test_file_names_cannot_forge_annotations(tmp_path):
    (tmp_path / NEWLINE_NAME).write_text(UNNOQAABLE)
    (tmp_path / COLON_NAME).write_text(BUGGY)
    annotations = _trainlint(tmp_path, "--no-cache", ".")
    assert annotations.returncode == 1, annotations.stderr
    commands = _runner_commands(annotations.stdout + annotations.stderr)
    # one annotation per finding, each on the file it is about (the runner unescapes the name)
    assert sorted(_parse(c)[1]["file"] for c in commands) == sorted([COLON_NAME, NEWLINE_NAME])

    text = _trainlint(tmp_path, "--no-cache", "--format", "text", "--show-source", ".")
    assert text.returncode == 1, text.stderr
    assert _runner_commands(text.stdout + text.stderr) == []
    assert "\\x3a:error file=forged.py,line=2::forged by a file name.py:3:9: TL401" in text.stdout
    assert "a\\n::error file=forged.py,line=1::forged by a file name.py:3:9: TL401" in text.stdout


def test_add_noqa_warning_cannot_forge_an_annotation(tmp_path):
    (tmp_path / NEWLINE_NAME).write_text(UNNOQAABLE)
    proc = _trainlint(tmp_path, "--no-cache", "--add-noqa", ".")
    assert "no `# noqa` added" in proc.stderr
    assert _runner_commands(proc.stdout + proc.stderr) == []
    assert "trainlint: warning: a\\n::error file=forged.py,line=1::forged by a file name.py:3: no `# noqa`" in proc.stderr


def test_diff_context_lines_cannot_forge_annotations(tmp_path):
    (tmp_path / "train.py").write_text(CONTEXT)
    (tmp_path / NEWLINE_NAME).write_text(CONTEXT)
    proc = _trainlint(tmp_path, "--no-cache", "--diff", "--unsafe-fixes", "--select", "TL102", ".")
    assert proc.returncode == 1, proc.stderr
    assert "+    (loss / accum_steps).backward()" in proc.stdout
    assert _runner_commands(proc.stdout + proc.stderr) == []
    assert "       \\x3a:error file=forged.py,line=3::forged by a diff context line" in proc.stdout
    # the file name in the diff's header stays on its line
    assert "--- a\\n::error file=forged.py,line=1::forged by a file name.py\n" in proc.stdout
    assert "#\\x23[error]forged by the legacy form" in proc.stdout
