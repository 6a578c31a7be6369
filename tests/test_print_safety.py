"""Nothing a checked repository wrote reaches the terminal raw (issue 34, item 12).

Source strings, comments and file names can hold terminal escape sequences: OSC 52 writes the
reader's clipboard, OSC 0 sets the window title, CSI `2K` erases a line, U+202E reverses what
follows. The real `trainlint` process prints them escaped (`\\x1b`, `\\u202e`) in every text
output: finding lines, `--show-source`, warnings and errors, `--diff`, `--show-settings`. JSON
and SARIF keep the exact text (JSON escapes control characters itself).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainlint.sanitize import escape_controls, keep_lines, no_commands, one_line, plain_text

OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"  # writes `rm -rf ~` to the clipboard
TITLE = "\x1b]0;pwned\x07"
ERASE = "\x1b[2K\x1b[1A"  # erase this line, move up
BIDI = "\u202e"
C1_CSI = "\x9b"  # the one-character CSI of the C1 set

#: what must never be printed raw: C0 but tab and newline (CR only before LF), DEL, C1, bidi controls
RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|\r(?!\n)")

# a file name that sets the title; a load of an unsafe checkpoint (TL401) whose line holds a
# clipboard write in its string, an erase and a bidi override in its comment
NAMED = f"train{TITLE}.py"
LOAD = f'import torch\n\nstate = torch.load("ckpt{OSC52}.pt", weights_only=False)  # {ERASE}{BIDI}{C1_CSI}\n'
# TL102 quotes the loss expression in its message and fixes it (unsafely): the clipboard write
# is in the message, the source line and the diff
# (the model is a transformers one, built on the spot: its loss is a token mean, the premise proven)
LOSS = ("import torch\nimport transformers\nfor i, (x, y) in enumerate(train_loader):\n"
        "    out = transformers.AutoModel.from_pretrained(name)(x)\n"
        f'    out["{OSC52}"].backward()\n'
        "    if (i + 1) % accum_steps == 0:\n        optimizer.step()\n        optimizer.zero_grad()\n")


def _trainlint(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "FORCE_COLOR")}
    # bytes, decoded here: text mode would turn a raw CR into LF and hide it
    proc = subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, env=env, capture_output=True,
                          timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "surrogateescape"),
                                       proc.stderr.decode("utf-8", "surrogateescape"))


def _assert_no_raw_controls(*texts: str) -> None:
    for text in texts:
        raw = RAW.findall(text)
        assert not raw, f"raw control characters {raw!r} in:\n{text!r}"


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    (tmp_path / NAMED).write_text(LOAD, encoding="utf-8")
    (tmp_path / "loss.py").write_text(LOSS, encoding="utf-8")
    return tmp_path


def test_finding_lines_and_source_are_escaped(hostile):
    proc = _trainlint(hostile, "check", "--no-cache", "--show-source", "--color", ".")
    assert proc.returncode == 1, proc.stderr
    # colour is on (the only escapes are trainlint's own): strip them to read the text
    out = re.sub(r"\x1b\[[0-9;]*m|\x1b\]8;;[^\x1b]*\x1b\\", "", proc.stdout)
    _assert_no_raw_controls(out, proc.stderr)
    # the file name, the source line and the message, each shown with its escapes spelled out
    assert "train\\x1b]0;pwned\\x07.py:3:9: TL401" in out
    assert 'torch.load("ckpt\\x1b]52;c;cm0gLXJmIH4=\\x07.pt", weights_only=False)  # \\x1b[2K\\x1b[1A\\u202e\\x9b' in out
    assert 'TL102 [accumulated-loss-not-scaled] `out["\\x1b]52;c;cm0gLXJmIH4=\\x07"]`' in out
    # the carets still sit under the span as printed (the escaped text is wider than the raw one)
    lines = out.splitlines()
    source = next(i for i, line in enumerate(lines) if line.startswith("5 |"))
    printed, carets = lines[source][len("5 | "):], lines[source + 1][len("  | "):]
    assert printed[carets.index("^"):carets.index("^") + carets.count("^")] == \
        'out["\\x1b]52;c;cm0gLXJmIH4=\\x07"].backward()'


def test_warnings_and_errors_name_files_escaped(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.trainlint]\nmax-file-size = 1000\n")
    (tmp_path / f"big{TITLE}.py").write_text("x = 1\n" * 400)  # skipped: over max-file-size
    os.symlink(tmp_path / "missing", tmp_path / f"gone{ERASE}.py")  # cannot be read
    proc = _trainlint(tmp_path, "check", "--no-cache", ".")
    _assert_no_raw_controls(proc.stdout, proc.stderr)
    # a skipped file is an error (exit 2) unless --allow-skipped accepts it
    assert "trainlint: error: skipped big\\x1b]0;pwned\\x07.py:" in proc.stderr
    assert "trainlint: error: cannot read gone\\x1b[2K\\x1b[1A.py" in proc.stderr
    assert proc.returncode == 2
    missing = _trainlint(tmp_path, "check", "--no-cache", f"nowhere{OSC52}.py")
    _assert_no_raw_controls(missing.stderr)
    assert "no such file or directory: nowhere\\x1b]52;c;cm0gLXJmIH4=\\x07.py" in missing.stderr


def test_diff_is_escaped_when_printed_and_exact_in_a_file(hostile):
    proc = _trainlint(hostile, "check", "--no-cache", "--diff", "--unsafe-fixes", "loss.py")
    assert proc.returncode == 1, proc.stderr
    _assert_no_raw_controls(proc.stdout, proc.stderr)
    assert '+    (out["\\x1b]52;c;cm0gLXJmIH4=\\x07"] / accum_steps).backward()' in proc.stdout
    # written to a file, the diff is the patch itself: exact, so it applies
    patch = hostile / "fix.patch"
    written = _trainlint(hostile, "check", "--no-cache", "--diff", "--unsafe-fixes", "-o", str(patch), "loss.py")
    assert written.returncode == 1 and written.stdout == ""
    assert f'+    (out["{OSC52}"] / accum_steps).backward()\n' in patch.read_text(encoding="utf-8")


def test_show_settings_escapes_configured_values_and_paths(tmp_path):
    folder = tmp_path / f"proj{TITLE}\n::error x"
    folder.mkdir()
    # a TOML escape puts a real ESC into the value
    (folder / "pyproject.toml").write_text('[tool.trainlint]\nextend-exclude = ["\\u001b]52;c;eA==\\u0007"]\n')
    (folder / "train.py").write_text("x = 1\n")
    proc = _trainlint(folder, "check", "--show-settings", "train.py")
    assert proc.returncode == 0, proc.stderr
    _assert_no_raw_controls(proc.stdout, proc.stderr)
    assert "\\x1b]52;c;eA==\\x07" in proc.stdout or "\\u001b]52;c;eA==\\u0007" in proc.stdout
    assert "proj\\x1b]0;pwned\\x07\\n::error x/pyproject.toml" in proc.stdout  # on its line


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_json_and_sarif_keep_the_exact_text(hostile, fmt):
    proc = _trainlint(hostile, "check", "--no-cache", "--format", fmt, ".")
    assert proc.returncode == 1, proc.stderr
    _assert_no_raw_controls(proc.stdout)  # JSON escapes them itself
    data = json.loads(proc.stdout)
    if fmt == "json":
        messages = {f["path"]: f["message"] for f in data["findings"]}
        assert NAMED in messages
        assert f'`out["{OSC52}"]`' in messages["loss.py"]
    else:
        results = data["runs"][0]["results"]
        assert any(f'`out["{OSC52}"]`' in r["message"]["text"] for r in results)


# -- the sanitiser itself -------------------------------------------------------------------------

def test_every_control_character_is_escaped_but_tab():
    controls = [*map(chr, range(0x20)), "\x7f", *map(chr, range(0x80, 0xA0)), "\u061c", "\u200e", "\u200f",
                *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A)), "\u2028", "\u2029", "\udcff"]
    for char in controls:
        shown = one_line(f"a{char}b")
        if char == "\t":
            assert shown == "a\tb"
        else:
            assert shown == "a" + repr(char)[1:-1] + "b" and shown.isascii(), (char, shown)
    ordinary = "naïve 学习率 — émoji 🙂 ‘quotes’ \u00a0nbsp"
    assert one_line(ordinary) == ordinary


def test_lines_keep_their_breaks_and_lose_lone_carriage_returns():
    assert keep_lines("a\r\nb\n") == "a\r\nb\n"
    assert keep_lines("secret\rshown\n") == "secret\\rshown\n"  # a lone CR would print over the line
    assert one_line("a\r\nb") == "a\\r\\nb"
    assert escape_controls("a\r\n\x1bb", keep="\r\n") == "a\r\n\\x1bb"


def test_no_line_starts_a_runner_command():
    text = "ok\n::error file=a::x\n   \t::add-mask::s\n\u00a0::warning::w\nx ##[error]y ##vso[task.setvariable]z\n"
    safe = no_commands(text)
    for line in safe.splitlines():
        assert not line.lstrip().startswith("::") and "##[" not in line and "##vso[" not in line.lower(), line
    assert safe.splitlines()[1] == "\\x3a:error file=a::x"
    assert no_commands("a::b\n: :c\n") == "a::b\n: :c\n"  # only a line's start, only a double colon
    assert plain_text(f"{TITLE}\n::x::y") == "\\x1b]0;pwned\\x07\n\\x3a:x::y"


def test_show_source_prints_a_bounded_line_of_a_file_that_is_one_long_line(tmp_path):
    """TL000 on a file of data (an environment dump: NUL-separated, one line of 200 kB) shows at
    most MAX_LINE_WIDTH characters of it, escaped and cut with `…`, never the whole file."""
    from trainlint.reporters.text import MAX_LINE_WIDTH

    secret = "".join(f"TOKEN_{i}=s3cr3t{TITLE}{i:06d}\x00" for i in range(5000))
    (tmp_path / "environ.py").write_bytes(secret.encode())
    (tmp_path / "long.py").write_text("x = [" + ", ".join(map(str, range(40000))) + ", ]]\n")  # the error at the end
    proc = _trainlint(tmp_path, "check", "--no-cache", "--show-source", ".")
    _assert_no_raw_controls(proc.stdout, proc.stderr)
    assert proc.stdout.count(" TL000 ") == 2, proc.stdout
    source_lines = [line for line in proc.stdout.splitlines() if line.startswith("1 | ")]
    assert len(source_lines) == 2
    for line in source_lines:
        assert len(line) <= len("1 | ") + MAX_LINE_WIDTH and "…" in line, line
    assert max(map(len, proc.stdout.splitlines())) < 600  # the finding lines quote no source either
    long_line = next(line for line in source_lines if "39999" in line)
    assert long_line.startswith("1 | …") and long_line.endswith("39999, ]]")  # the part at the error


def test_trace_report_is_escaped(tmp_path):
    """`trainlint trace` prints the script's name and what it raised: escaped too (the script's
    own output on stderr is the script's, which the user chose to run)."""
    pytest.importorskip("torch")
    script = f"crash{TITLE}.py"
    (tmp_path / script).write_text(f'import torch\nraise RuntimeError("bad {BIDI}{C1_CSI} config")\n')
    proc = _trainlint(tmp_path, "trace", "--timeout", "120", script)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    _assert_no_raw_controls(proc.stdout)
    assert "trainlint trace crash\\x1b]0;pwned\\x07.py" in proc.stdout
    assert "RuntimeError: bad \\u202e\\x9b config" in proc.stdout
