"""What a ruff or flake8 user types by habit, each through the real command in a subprocess:
per-file configuration, --show-settings, strict `# noqa`, --add-noqa, and the usual options."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import BAD, GOOD

SAFE_LOAD = 'import torch\n\nstate = torch.load("checkpoint.pt", map_location="cpu", weights_only=True)\n'
LOAD = 'state = torch.load("checkpoint.pt", map_location="cpu", weights_only=False)'
DOCS = "https://github.com/trainlint/trainlint/blob/main/docs/rules.md#tl401"


def tl(*args: str, cwd: Path, input: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "FORCE_COLOR", "NO_COLOR")}
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, capture_output=True, text=True,
                          input=input, stdin=None if input is not None else subprocess.DEVNULL,
                          env=environment, timeout=120)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def found(proc: subprocess.CompletedProcess) -> list[tuple[str, int, str]]:
    """(path, line, code) of every finding of a `--format json` run."""
    assert proc.returncode in (0, 1), proc.stderr
    return [(f["path"], f["line"], f["code"]) for f in json.loads(proc.stdout)["findings"]]


# -- configuration per file -----------------------------------------------------------------------

@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """proj/ with per-file-ignores for tests/; a TL401 in proj/train.py and proj/tests/test_ckpt.py."""
    root = tmp_path / "proj"
    # test-code-ignore = []: these files stand for any code; what is tested here is the globbing
    write(root / "pyproject.toml", '[tool.trainlint]\nselect = ["TL4"]\ntest-code-ignore = []\n\n'
                                   '[tool.trainlint.per-file-ignores]\n"tests/*" = ["TL4"]\n')
    write(root / "train.py", BAD)
    write(root / "tests" / "test_ckpt.py", BAD)
    return root


def test_per_file_ignores_apply_from_inside_the_folder(proj):
    assert found(tl("check", "--format", "json", "--no-cache", "test_ckpt.py", cwd=proj / "tests")) == []
    assert found(tl("check", "--format", "json", "--no-cache", ".", cwd=proj)) == [("train.py", 3, "TL401")]


def test_each_file_uses_its_own_projects_configuration(proj, tmp_path):
    # run from outside the project: proj/pyproject.toml still applies to proj's files
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = tl("check", "--format", "json", "--no-cache", str(proj / "tests" / "test_ckpt.py"),
                str(proj / "train.py"), cwd=elsewhere)
    assert found(result) == [(str(proj / "train.py"), 3, "TL401")]
    # a nested project with its own configuration, walked from the outer one
    write(proj / "sub" / "trainlint.toml", 'select = ["TL401"]\nextend-exclude = ["gen"]\ntest-code-ignore = []\n'
                                           '[per-file-ignores]\n"legacy/*" = ["TL401"]\n')
    write(proj / "sub" / "tests" / "t.py", BAD)  # the outer tests/* glob does not reach here
    write(proj / "sub" / "legacy" / "old.py", BAD)
    write(proj / "sub" / "gen" / "g.py", BAD)
    write(proj / "gen" / "g.py", BAD)  # excluded only in sub/
    result = tl("check", "--format", "json", "--no-cache", ".", cwd=proj)
    assert sorted(found(result)) == [("gen/g.py", 3, "TL401"), ("sub/tests/t.py", 3, "TL401"),
                                     ("train.py", 3, "TL401")]


def test_config_option_overrides_every_file(proj, tmp_path):
    write(tmp_path / "strict.toml", 'select = ["TL401"]\ntest-code-ignore = []\n')
    result = tl("check", "--format", "json", "--no-cache", "--config", str(tmp_path / "strict.toml"), ".", cwd=proj)
    assert sorted(found(result)) == [("tests/test_ckpt.py", 3, "TL401"), ("train.py", 3, "TL401")]


def test_show_settings_says_what_applies_and_where_from(proj):
    result = tl("check", "--show-settings", "tests/test_ckpt.py", cwd=proj)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert result.stdout.splitlines()[0] == "Settings for tests/test_ckpt.py"
    assert f"{proj / 'pyproject.toml'} (the nearest above the file)" in rows["configuration"]
    assert '["TL4"]' in rows["select"] and f"[{proj / 'pyproject.toml'}]" in rows["select"]
    assert '"2.6"' in rows["min-torch-version"] and "[default]" in rows["min-torch-version"]
    assert "TL401" in rows["ignored"] and "[per-file-ignores]" in rows["ignored"]
    assert rows["rules"].split()[-1] == "TL000"  # only TL000 is left to run on this file
    overridden = tl("check", "--show-settings", "--select", "TL401", "train.py", cwd=proj)
    rows = {line.split()[0]: line for line in overridden.stdout.splitlines()[1:]}
    assert '["TL401"]' in rows["select"] and "command line" in rows["select"]
    assert tl("check", "--show-settings", "a.py", "b.py", cwd=proj).returncode == 2


def test_show_settings_shows_the_defaults_that_apply(tmp_path):
    write(tmp_path / "t.py", "x = 1\n")
    result = tl("check", "--isolated", "--show-settings", "t.py", cwd=tmp_path)
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert rows["max-file-size"].split()[1] == str(10 * 1024 * 1024) and "null" not in rows["max-file-size"]
    assert "the rules on by default" in rows["select"]
    write(tmp_path / "trainlint.toml", "max-file-size = 2048\n")
    configured = tl("check", "--show-settings", "t.py", cwd=tmp_path)
    assert "2048" in {line.split()[0]: line for line in configured.stdout.splitlines()[1:]}["max-file-size"]


def test_language_server_settings_match_the_cli(proj):
    # The server's settings for a document come from trainlint.lsp.project; check the same file
    # with both and compare the findings.
    code = ("import sys, json; from trainlint.lsp.project import ProjectSettings; "
            "from trainlint.engine import lint_path; p = sys.argv[1]; "
            "s = ProjectSettings(on_error=print).settings_for(p); "
            "print(json.dumps([f.code for f in lint_path(p, s).findings]))")
    for path, cwd in ((proj / "tests" / "test_ckpt.py", proj.parent), (proj / "train.py", proj / "tests")):
        server = subprocess.run([sys.executable, "-c", code, str(path)], cwd=cwd, capture_output=True, text=True,
                                timeout=120)
        cli = tl("check", "--format", "json", "--no-cache", str(path), cwd=cwd)
        assert json.loads(server.stdout) == [c for _, _, c in found(cli)], server.stderr


#: A file that even root cannot read (a write-only sysctl): root bypasses file modes.
WRITE_ONLY = Path("/proc/sys/vm/compact_memory")


@pytest.mark.parametrize("kind", ["too deep", "unreadable"])
def test_unreadable_or_too_deep_pyproject_is_one_line(tmp_path, kind):
    write(tmp_path / "train.py", BAD)
    pyproject = tmp_path / "pyproject.toml"
    if kind == "too deep":  # tomllib recurses once per nested array
        write(pyproject, '[tool.trainlint]\nselect = ["TL4"]\n\n[tool.other]\nx = ' + "[" * 500 + "]" * 500 + "\n")
        expected = "invalid TOML: nested too deeply"
    elif os.geteuid() != 0:
        write(pyproject, '[tool.trainlint]\nselect = ["TL4"]\n').chmod(0)
        expected = "Permission denied"
    elif os.access(WRITE_ONLY, os.F_OK):
        pyproject.symlink_to(WRITE_ONLY)
        expected = "Permission denied"
    else:
        pytest.skip("running as root without a file root cannot read")
    proc = tl("check", "--no-cache", "train.py", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("trainlint: error: ") and str(pyproject) in proc.stderr
    assert expected in proc.stderr


# -- suppressions ---------------------------------------------------------------------------------

@pytest.mark.parametrize("comment, codes", [
    ("# noqa: unsafe-torch-load", []),  # a rule name suppresses that rule only
    ("# noqa: TL402, unsafe-torch-load", ["TL001"]),  # TL401 suppressed; TL402 unused
    ("# noqa: TL402 TL401", ["TL001"]),  # spaces separate codes too
    ("# noqa: TL402", ["TL001", "TL401"]),  # a name or code of another rule suppresses nothing here
    ("# noqa TL402", ["TL002", "TL401"]),  # no colon: malformed, suppresses nothing
    ("# noqa: TL401 trusted", ["TL002", "TL401"]),
    ("# noqa: TL401, TL999", ["TL001"]),  # unknown code
    ("# noqa: E501", ["TL401"]),  # another tool's code: not ours to judge
])
def test_noqa_grammar(tmp_path, comment, codes):
    write(tmp_path / "t.py", f"import torch\n\n{LOAD}  {comment}\n")
    result = tl("check", "--format", "json", "--no-cache", "--isolated", "--select", "TL4,TL0", "t.py", cwd=tmp_path)
    assert sorted(code for _, _, code in found(result)) == codes


def test_noqa_inside_a_string_suppresses_nothing(tmp_path):
    source = ('import torch\n\nstate = torch.load(f"{"# noqa"}.pt", weights_only=False)\n'
              'other = torch.load("""\n# noqa: TL401\n""", weights_only=False)\n')
    write(tmp_path / "t.py", source)
    result = tl("check", "--format", "json", "--no-cache", "--isolated", "--select", "TL401", "t.py", cwd=tmp_path)
    assert found(result) == [("t.py", 3, "TL401"), ("t.py", 4, "TL401")]


def test_noqa_lines_are_pythons_lines(tmp_path):
    # A form feed is no line break for Python: the noqa is on the finding's line.
    write(tmp_path / "t.py", f"import torch\n\x0c\n{LOAD}  # noqa: TL401\n")
    result = tl("check", "--format", "json", "--no-cache", "--isolated", "--select", "TL401,TL001", "t.py",
                cwd=tmp_path)
    assert found(result) == []


def test_unused_noqa_finding_and_its_fix(tmp_path):
    write(tmp_path / "t.py", SAFE_LOAD.rstrip("\n") + "  # noqa: TL401, E501  # see #7\n")
    result = tl("check", "--format", "json", "--no-cache", "--isolated", "t.py", cwd=tmp_path)
    (finding,) = json.loads(result.stdout)["findings"]
    assert (finding["code"], finding["name"], finding["line"]) == ("TL001", "unused-noqa", 3)
    assert "TL401 suppressed nothing here" in finding["message"]
    assert finding["fix"]["safe"] is True
    edit = finding["fix"]["edits"][0]
    line = SAFE_LOAD.splitlines()[2] + "  # noqa: TL401, E501  # see #7"
    fixed = line[:edit["column"] - 1] + edit["content"] + line[edit["end_column"] - 1:]
    assert fixed == SAFE_LOAD.splitlines()[2] + "  # noqa: E501  # see #7"


def test_unused_noqa_not_judged_for_rules_that_did_not_run(tmp_path):
    write(tmp_path / "t.py", SAFE_LOAD.rstrip("\n") + "  # noqa: TL401\n")
    assert tl("check", "--no-cache", "--isolated", "--select", "TL1,TL001", "t.py", cwd=tmp_path).returncode == 0
    assert tl("check", "--no-cache", "--isolated", "--select", "TL4,TL001", "t.py", cwd=tmp_path).returncode == 1


def test_add_noqa_keeps_codes_and_comments(tmp_path):
    source = ("import torch\r\n\r\n"
              f"{LOAD}  # noqa: E501  (long)\r\n"
              f"{LOAD}  # keep this\r\n"
              'note = """\r\ntorch.load(p)\r\n"""\r\n'
              "torch.save(model, 'last.pt')\r\n")
    target = write(tmp_path / "t.py", "")
    target.write_bytes(source.encode())
    before = tl("check", "--format", "json", "--no-cache", "--isolated", "--select", "TL4", "t.py", cwd=tmp_path)
    assert sorted({(line, code) for _, line, code in found(before)}) == [(3, "TL401"), (4, "TL401"), (8, "TL402")]
    added = tl("check", "--add-noqa", "--no-cache", "--isolated", "--select", "TL4", "t.py", cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    assert added.stdout == "Added 3 noqa directives to 1 file.\n"
    after = target.read_bytes().decode()
    assert after.splitlines() == [
        "import torch", "",
        f"{LOAD}  # noqa: E501, TL401  (long)",
        f"{LOAD}  # keep this  # noqa: TL401",
        'note = """', "torch.load(p)", '"""',
        "torch.save(model, 'last.pt')  # noqa: TL402",
    ]
    assert after.count("\r\n") == source.count("\r\n")  # line endings kept
    clean = tl("check", "--no-cache", "--isolated", "--select", "TL4,TL0", "t.py", cwd=tmp_path)
    assert clean.returncode == 0, clean.stdout
    again = tl("check", "--add-noqa", "--no-cache", "--isolated", "--select", "TL4", "t.py", cwd=tmp_path)
    assert again.stdout == "Added 0 noqa directives to 0 files.\n"


# -- options ----------------------------------------------------------------------------------------

@pytest.fixture
def files(tmp_path: Path) -> Path:
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "good.py", GOOD)
    write(tmp_path / "vendor" / "v.py", BAD)
    write(tmp_path / "trainlint.toml", 'select = ["TL401"]\n')
    return tmp_path


def test_bare_trainlint_checks_the_current_directory(files):
    result = tl("--no-cache", cwd=files)
    assert result.returncode == 1
    assert sorted(line.split(":")[0] for line in result.stdout.splitlines() if " TL401 " in line) == [
        "bad.py", "vendor/v.py"]
    plain = subprocess.run([sys.executable, "-m", "trainlint"], cwd=files, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=120)
    assert plain.returncode == 1 and "bad.py:3:9: TL401" in plain.stdout


def test_quiet_prints_findings_only(files):
    result = tl("-q", "--no-cache", "bad.py", "good.py", cwd=files)
    assert result.returncode == 1
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == ["bad.py"]
    assert tl("--quiet", "good.py", cwd=files).stdout == ""


def test_exclude_and_force_exclude(files):
    walked = tl("check", "--no-cache", "--format", "json", "--exclude", "vendor", ".", cwd=files)
    assert found(walked) == [("bad.py", 3, "TL401")]
    # a file named on the command line is checked unless --force-exclude (as pre-commit passes files)
    named = tl("check", "--no-cache", "--format", "json", "--exclude", "vendor/*", "vendor/v.py", cwd=files)
    assert found(named) == [("vendor/v.py", 3, "TL401")]
    forced = tl("check", "--no-cache", "--format", "json", "--exclude", "vendor", "--force-exclude",
                "vendor/v.py", "bad.py", cwd=files)
    assert found(forced) == [("bad.py", 3, "TL401")]
    write(files / "trainlint.toml", 'select = ["TL401"]\nextend-exclude = ["vendor"]\n')
    configured = tl("check", "--no-cache", "--format", "json", "--force-exclude", "vendor/v.py", cwd=files)
    assert found(configured) == []


def test_output_format_is_format(files):
    result = tl("check", "--no-cache", "--output-format", "json", "bad.py", cwd=files)
    assert found(result) == [("bad.py", 3, "TL401")]
    assert tl("check", "--output-format", "yaml", "bad.py", cwd=files).returncode == 2


def test_color_and_no_color(files):
    colored = tl("check", "--no-cache", "--color", "bad.py", cwd=files)
    assert "\x1b[" in colored.stdout and f"\x1b]8;;{DOCS}" in colored.stdout  # the code links to its docs
    plain = tl("check", "--no-cache", "--no-color", "bad.py", cwd=files, env={"FORCE_COLOR": "1"})
    assert "\x1b" not in plain.stdout


def test_stdin_filename_needs_dash(files):
    result = tl("check", "--stdin-filename", "x.py", "bad.py", cwd=files, input=BAD)
    assert result.returncode == 2
    assert result.stderr == "trainlint: error: --stdin-filename names what is read from stdin: add `-` to the paths\n"
    assert tl("check", "--stdin-filename", "x.py", "-", cwd=files, input=BAD).returncode == 1


def test_explain_by_name(files):
    by_name = tl("explain", "scheduler-step-per-micro-batch", cwd=files)
    assert by_name.returncode == 0 and by_name.stdout.startswith("# TL101 scheduler-step-per-micro-batch")
    assert tl("explain", "tl101", cwd=files).stdout == by_name.stdout
    assert tl("explain", "unused-noqa", cwd=files).stdout.startswith("# TL001 unused-noqa")
    assert tl("explain", "no-such-rule", cwd=files).returncode == 2


def test_text_links_and_summary(files):
    result = tl("check", "--no-cache", "--show-source", "bad.py", cwd=files)
    assert f"= docs: {DOCS}" in result.stdout
    assert result.stdout.splitlines()[-1] == "Found 1 finding (1 error; 1 with an unsafe fix) in 1 file (1 checked)."
    report = json.loads(tl("check", "--no-cache", "--format", "json", "bad.py", cwd=files).stdout)
    assert report["findings"][0]["url"] == DOCS


def test_show_source_prints_every_line_of_a_multi_line_span(tmp_path):
    write(tmp_path / "t.py", 'import torch\n\nstate = torch.load(\n    "c.pt",\n    weights_only=False,\n)\n')
    result = tl("check", "--no-cache", "--isolated", "--select", "TL401", "--show-source", "t.py", cwd=tmp_path)
    lines = result.stdout.splitlines()
    assert lines[1:9] == ["  |", "3 | state = torch.load(", "  |         ^^^^^^^^^^^", '4 |     "c.pt",',
                          "  |     ^^^^^^^", "5 |     weights_only=False,", "  |     ^^^^^^^^^^^^^^^^^^^",
                          "6 | )"]


def test_confirm_accepts_select(files):
    # --select is the same as naming codes; an unknown one is refused before torch is started
    result = tl("confirm", "--select", "TL999", cwd=files)
    assert result.returncode == 2 and "TL999" in result.stderr


# -- --watch ------------------------------------------------------------------------------------------

class _Lines:
    """A process's stdout lines, read by a thread (a select() on the pipe would miss lines that
    are already in Python's buffer)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until(self, wanted: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(wanted in line for line in self.lines):
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {wanted!r} within {timeout} s: {self.lines}") from None
            assert line is not None, f"the process ended: {self.lines}"
            self.lines.append(line)


def test_watch_checks_again_when_a_file_changes(tmp_path):
    target = write(tmp_path / "src" / "train.py", GOOD)
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "FORCE_COLOR")}
    proc = subprocess.Popen([sys.executable, "-m", "trainlint", "check", "--watch", "--no-cache", "--isolated",
                             "--select", "TL401", "src"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env)
    try:
        out = _Lines(proc)
        out.until("All checks passed (1 file).")
        time.sleep(0.5)  # the watcher starts after the first check
        target.write_text(BAD)
        out.until("Found 1 finding")
        assert f"{os.path.join('src', 'train.py')}:3:9: TL401 [unsafe-torch-load]" in "\n".join(out.lines)
        write(tmp_path / "src" / "new.py", GOOD)  # a new file is picked up too
        out.until("in 1 file (2 checked).")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert "changed; checking again." in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_add_noqa_after_other_tools_comments_and_reports_what_it_cannot_change(tmp_path):
    target = write(tmp_path / "t.py", "import torch\n\n"
                   f"{LOAD}  # noqa: E501  trusted source\n"
                   f"{LOAD}  # noqa: set_linter\n"
                   f"{LOAD}  # noqa: TL401 trusted\n")
    added = tl("check", "--add-noqa", "--no-cache", "--isolated", "--select", "TL4", "t.py", cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    assert added.stdout == "Added 2 noqa directives to 1 file.\n"
    assert added.stderr.splitlines() == [
        "trainlint: warning: t.py:5: no `# noqa` added: its `# noqa` is malformed: unexpected `trusted` after "
        "the codes (codes are separated by commas or spaces; a reason goes in parentheses)"]
    assert target.read_text().splitlines()[2:] == [
        f"{LOAD}  # noqa: E501  trusted source  # noqa: TL401",
        f"{LOAD}  # noqa: set_linter  # noqa: TL401",
        f"{LOAD}  # noqa: TL401 trusted",
    ]
    again = tl("check", "--format", "json", "--no-cache", "--isolated", "--select", "TL4,TL0", "t.py", cwd=tmp_path)
    assert sorted((line, code) for _, line, code in found(again)) == [(5, "TL002"), (5, "TL401")]


def test_add_noqa_reports_a_line_ending_inside_a_string(tmp_path):
    write(tmp_path / "t.py", 'import torch\n\nnote = """\n""" + str(torch.load(p, weights_only=False)) + """\n"""\n')
    added = tl("check", "--add-noqa", "--no-cache", "--isolated", "--select", "TL4", "t.py", cwd=tmp_path)
    assert added.stdout == "Added 0 noqa directives to 0 files.\n"
    assert added.stderr.splitlines() == [
        "trainlint: warning: t.py:4: no `# noqa` added: it ends inside a string or with a `\\`, where no comment can go"]


# -- long runs: a progress line on a terminal, sorted output, nothing to check -----------------------

def _with_stderr_on_a_terminal(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess, str]:
    """Run trainlint with stderr on a pseudo-terminal (100 columns) and stdout on a pipe."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        proc = subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, stdout=subprocess.PIPE,
                              stderr=slave, stdin=subprocess.DEVNULL, text=True, timeout=120)
    finally:
        os.close(slave)
        reader.join(timeout=10)
        os.close(master)
    return proc, b"".join(chunks).decode(errors="replace")


@pytest.fixture(scope="module")
def many(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("many")
    for n in range(201):
        write(root / f"m{n:03}.py", f"value = {n}\n")
    return root


@pytest.mark.parametrize("options, shown", [
    ((), True),
    (("-j", "2"), True),
    (("-q",), False),
    (("--format", "json"), False),
    (("--exclude", "m200.py"), False),  # 200 files: quick enough without one
])
def test_a_long_run_shows_progress_on_a_terminal_stderr_only(many, options, shown):
    proc, terminal = _with_stderr_on_a_terminal("check", "--isolated", "--no-cache", *options, ".", cwd=many)
    assert proc.returncode == 0
    assert "Checking" not in proc.stdout and "files/s" not in proc.stdout
    assert ("/201 files" in terminal) is shown, terminal
    if shown:
        assert "Checking 0/201 files" in terminal and terminal.endswith("\r")  # the line is cleared at the end


def test_no_progress_when_stderr_is_not_a_terminal(many):
    proc = tl("check", "--isolated", "--no-cache", ".", cwd=many)
    assert proc.stderr == "" and proc.stdout == "All checks passed (201 files).\n"


def test_output_is_sorted_by_path_then_position(tmp_path):
    for name in ("z.py", "a.py", "a/b.py", "a-b.py"):
        write(tmp_path / name, f"import torch\n\n{LOAD}\nother = torch.load(p, weights_only=False)\n")
    proc = tl("check", "--isolated", "--no-cache", "--select", "TL401", "z.py", "a-b.py", "a.py", "a", cwd=tmp_path)
    located = [line.split(": ")[0] for line in proc.stdout.splitlines() if ": TL401 " in line]
    assert located == [f"{path}:{line}:{column}" for path in ("a/b.py", "a-b.py", "a.py", "z.py")
                       for line, column in ((3, 9), (4, 9))]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_no_python_files_is_a_warning(tmp_path, fmt):
    (tmp_path / "empty").mkdir()
    write(tmp_path / "notes.txt", "no code here\n")
    proc = tl("check", "--isolated", "--no-cache", "--format", fmt, "empty", ".", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stderr == "trainlint: warning: No Python files found\n"
    if fmt == "text":
        assert proc.stdout == ""
    else:
        assert json.loads(proc.stdout)["files_checked"] == 0
