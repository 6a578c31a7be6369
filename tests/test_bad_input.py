"""Bad input of every kind, through the real CLI in every format and through the language server:
never a traceback, never a hang, the right exit code, and the other files still checked.

Also the regression tests of issue 11's crash and misreporting items, each a small reproducer.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BAD, BAD_LINE, GOOD
from trainlint.engine import lint_paths, lint_source
from trainlint.guard import MAX_DEPTH, TOO_DEEP
from trainlint.reporters.text import summary
from trainlint.rule import _REGISTRY, Rule
from trainlint.settings import Settings, resolve_selection

ALL = Settings(select=resolve_selection(["ALL"], [], []))
TL401 = Settings(select=resolve_selection(["TL401"], [], []))
FORMATS = ("text", "json", "github", "sarif", "lsp")

#: Deep inputs that crash LibCST's native parser (a segfault) or take it minutes.
DEEP = {
    "parens-1500": "x = " + "(" * 1500 + "1" + ")" * 1500 + "\n",
    "unary-minus-10000": "x = " + "-" * 10_000 + "1\n",
    "sum-8000-terms": "x = " + " + ".join(["a"] * 8000) + "\n",
    "lambda-4000": "f = " + "lambda: " * 4000 + "1\n",
}

#: File contents that are bad in some way, and whether they give TL000.
CONTENTS = {
    "latin1-without-cookie": ("x = 'caf\xe9'\n".encode("latin-1"), True),
    "latin1-with-cookie": ("# -*- coding: latin-1 -*-\nx = 'caf\xe9'\n".encode("latin-1"), False),
    "bom": (b"\xef\xbb\xbf" + BAD.encode(), False),
    "bom-and-other-cookie": (b"\xef\xbb\xbf# coding: latin-1\nx = 1\n", True),
    "unknown-cookie": (b"# coding: klingon\nx = 1\n", True),
    "nul": (b"import torch\nx = 1\0\n", True),
    "cr-only": (BAD.replace("\n", "\r").encode(), False),
    "crlf": (BAD.replace("\n", "\r\n").encode(), False),
    "form-feed": (("\x0c\n" + BAD).encode(), False),
    "u2028-in-comment": (("# a\u2028b\n" + BAD).encode(), False),
    "empty": (b"", False),
    "only-comment": (b"# nothing", False),
    "unterminated-string": (b"x = '''\n", True),
    "tabs-and-spaces": (b"if x:\n\ty = 1\n        z = 2\n", True),
    "return-outside-function": (b"return 1\n", True),
    **{name: (text.encode(), True) for name, text in DEEP.items()},
}


def trainlint(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def check_output(fmt: str, stdout: str) -> None:
    """The report is whole: JSON formats parse, the text format ends with its summary."""
    if fmt in ("json", "sarif", "lsp"):
        json.loads(stdout)
    elif fmt == "text":
        assert stdout.splitlines()[-1].startswith(("All checks passed", "Found ", "No findings"))


# -- contents: through the engine, and through the CLI in every format ------------------------------

@pytest.mark.parametrize("name", list(CONTENTS))
def test_bad_contents_through_the_engine(name):
    data, syntax_error = CONTENTS[name]
    result = lint_source(data, "input.py", ALL)
    assert result.errors == []
    assert any(f.code == "TL000" for f in result.findings) is syntax_error
    lines = max(1, data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n") + 1)
    for finding in result.findings:
        assert 1 <= finding.line <= finding.end_line <= lines


@pytest.fixture(scope="module")
def bad_tree(tmp_path_factory) -> Path:
    """Every bad content as a file, plus a buggy file the run must still report."""
    root = tmp_path_factory.mktemp("bad_tree")
    for name, (data, _) in CONTENTS.items():
        (root / f"{name}.py").write_bytes(data)
    (root / "zz_buggy.py").write_text(BAD)
    return root


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_bad_contents_through_the_cli(bad_tree, fmt, jobs):
    done = trainlint("check", "--no-cache", "-j", jobs, "--format", fmt, ".", cwd=bad_tree)
    assert "Traceback" not in done.stderr
    assert done.returncode == 1, done.stderr
    check_output(fmt, done.stdout)
    assert "zz_buggy.py" in done.stdout
    if fmt == "json":
        findings = json.loads(done.stdout)["findings"]
        tl000 = {f["path"][:-3] for f in findings if f["code"] == "TL000"}
        assert tl000 == {name for name, (_, error) in CONTENTS.items() if error}
        assert json.loads(done.stdout)["files_checked"] == len(CONTENTS) + 1


# -- 5. nesting that crashes LibCST -----------------------------------------------------------------

@pytest.mark.parametrize("name", list(DEEP))
def test_deep_nesting_is_tl000_not_a_crash(name):
    """In a subprocess: before the guard, these killed the process with a segfault."""
    program = ("import sys, json\nfrom trainlint.engine import lint_source\n"
               "r = lint_source(sys.stdin.read(), 'deep.py')\n"
               "print(json.dumps([[f.code, f.line, f.message] for f in r.findings]))\n")
    done = subprocess.run([sys.executable, "-c", program], input=DEEP[name], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-500:]
    [[code, line, message]] = json.loads(done.stdout)
    assert (code, line) == ("TL000", 1)
    assert TOO_DEEP in message


def test_nesting_just_under_the_bound_is_checked():
    depth = MAX_DEPTH - 100
    source = "import torch\n\ndef save(model, cfg):\n    torch.save(model.state_dict(), cfg" + ".b" * depth + ")\n"
    result = lint_source(source, "deep.py", ALL)
    assert result.errors == []
    assert [f.code for f in result.findings] == ["TL402"]


@pytest.fixture
def crashing_rule():
    """A rule whose check kills its process (as a native-code crash would) on a marked file."""

    class Crashing(Rule):
        code = "TL997"
        name = "crashing"
        summary = message = "kills the process"

        def check(self, ctx):
            if "CRASH_HERE" in ctx.source:
                os.kill(os.getpid(), signal.SIGKILL)
            return iter(())

    try:
        yield Crashing
    finally:
        _REGISTRY.pop("TL997", None)


def test_a_crashing_worker_loses_only_its_file(crashing_rule, tmp_path):
    paths = []
    for number in range(12):
        path = tmp_path / f"m{number:02}.py"
        path.write_text(("# CRASH_HERE\n" if number == 5 else "") + (BAD if number % 2 else GOOD))
        paths.append(str(path))
    settings = Settings(select=resolve_selection(["TL997", "TL401"], [], []))
    results = list(lint_paths(paths, settings, jobs=2))
    assert [r.path for r in results] == paths
    crashed = results[5]
    assert crashed.findings == [] and len(crashed.errors) == 1 and "crashed" in crashed.errors[0]
    for number, result in enumerate(results):
        if number != 5:
            assert result.errors == []
            assert [f.code for f in result.findings] == (["TL401"] if number % 2 else [])


# -- 6. recursion in the models, and the summary when a rule fails ----------------------------------

@pytest.fixture
def fresh_recursion_limit():
    """Python's default limit, as in a new process (an earlier check may have raised it)."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(before)


def test_long_attribute_chain_in_a_save_path(fresh_recursion_limit):
    source = "import torch\n\ndef save(model, cfg):\n    torch.save(model.state_dict(), cfg" + ".b" * 1000 + ")\n"
    result = lint_source(source, "save.py", ALL)
    assert result.errors == []
    assert [(f.code, f.line) for f in result.findings] == [("TL402", 4)]


def test_long_attribute_chain_on_a_load_keeps_the_other_findings(fresh_recursion_limit):
    source = ("import torch\nstate = torch.load('a.pt', weights_only=False)\n"
              "other = torch" + ".load" * 1000 + "(p)\n")
    result = lint_source(source, "load.py", ALL)
    assert result.errors == []
    assert [(f.code, f.line) for f in result.findings] == [("TL401", 2)]


def test_a_training_function_that_calls_itself():
    source = '''import torch


def train(model, loader, opt):
    for epoch in range(3):
        for i, batch in enumerate(loader):
            train(model, loader, opt)
            loss = model(batch)
            loss.backward()
            opt.step()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.zero_grad()
'''
    result = lint_source(source, "recursive.py", ALL)
    assert result.errors == []
    assert [(f.code, f.line) for f in result.findings] == [("TL203", 11)]


def test_a_training_method_that_calls_itself():
    source = '''import torch


class Trainer:
    def train_epoch(self):
        for epoch in range(self.epochs):
            for i, batch in enumerate(self.loader):
                self.train_epoch()
                loss = self.model(batch)
                loss.backward()
                self.opt.step()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.opt.zero_grad()
'''
    result = lint_source(source, "recursive.py", ALL)
    assert result.errors == []
    assert [(f.code, f.line) for f in result.findings] == [("TL203", 12)]


@pytest.fixture
def failing_rule():
    class Failing(Rule):
        code = "TL996"
        name = "failing"
        summary = message = "always fails"

        def check(self, ctx):
            raise RecursionError("maximum recursion depth exceeded")

    try:
        yield Failing
    finally:
        _REGISTRY.pop("TL996", None)


def test_the_summary_never_says_all_passed_when_a_rule_failed(failing_rule, project, run):
    result = run("check", "--select", "TL996,TL401", "--no-cache", "good.py")
    assert result.exit_code == 2
    assert "All checks passed" not in result.stdout
    assert result.stdout.strip().splitlines()[-1] == \
        "No findings in 1 file checked; 1 file could not be checked fully (see the errors)."


def test_summary_counts():
    from trainlint.finding import FileResult

    assert summary([FileResult("a.py")], 1) == "All checks passed (1 file)."
    failed = FileResult("b.py", errors=["internal error"])
    assert "All checks passed" not in summary([FileResult("a.py"), failed], 2)


# -- 7. special files in a walked directory ---------------------------------------------------------

@pytest.fixture
def special_tree(tmp_path) -> Path:
    root = tmp_path / "special"
    root.mkdir()
    (root / "buggy.py").write_text(BAD)
    (root / "zero.py").symlink_to("/dev/zero")
    os.mkfifo(root / "fifo.py")
    (root / "loop.py").symlink_to(root / "loop.py")
    (root / "dangling.py").symlink_to(root / "nowhere.py")
    (root / "package.py").mkdir()  # a directory with a .py name
    (root / "big.py").write_text("x = 1\n" * 2000)  # over the limit configured below
    (root / "pyproject.toml").write_text("[tool.trainlint]\nselect = ['TL401']\nmax-file-size = 5000\n")
    return root


@pytest.mark.parametrize("fmt", FORMATS)
def test_special_files_are_skipped_never_read(special_tree, fmt):
    done = trainlint("check", "--no-cache", "--format", fmt, ".", cwd=special_tree, timeout=60)
    assert "Traceback" not in done.stderr
    check_output(fmt, done.stdout)
    assert "buggy.py" in done.stdout
    skipped = sorted(line for line in done.stderr.splitlines() if line.startswith("trainlint: error: skipped"))
    hint = " (--allow-skipped or `allow-skipped = true` accepts it)"
    assert skipped == [  # a file nobody checked must not pass: each is an error
        "trainlint: error: skipped big.py: 12,000 bytes is over the size limit of 5,000 (max-file-size)" + hint,
        "trainlint: error: skipped fifo.py: not a regular file" + hint,
        "trainlint: error: skipped zero.py: it leads to /dev/zero, a system file (under /dev), which is never read"
        + hint,
    ]
    errors = sorted(line for line in done.stderr.splitlines()
                    if line.startswith("trainlint: error:") and line not in skipped)
    assert len(errors) == 2 and "dangling.py" in errors[0] and "loop.py" in errors[1]
    assert done.returncode == 2  # the unreadable ones are errors, and so are the skipped ones
    if fmt == "json":
        assert json.loads(done.stdout)["files_checked"] == 1  # only buggy.py was checked
    if fmt == "text":
        assert done.stdout.splitlines()[-1] == \
            "Found 1 finding (1 error; 1 with an unsafe fix) in 1 file (1 checked); 2 files could not be checked fully (see the errors)."


# -- 11. misreported output ------------------------------------------------------------------------

@pytest.mark.parametrize("separator", ["\x0c", "\u2028", "\x1c", "\x85"])
def test_show_source_counts_lines_as_python_does(project, run, separator):
    source = f"import torch\n# a{separator}b\nstate = torch.load('c.pt', weights_only=False)\n"
    (project / "ff.py").write_text(source, encoding="utf-8")
    result = run("check", "--select", "TL401", "--no-cache", "--show-source", "ff.py")
    assert "3 | state = torch.load('c.pt', weights_only=False)" in result.stdout


def test_syntax_error_span_stays_on_its_line():
    (finding,) = lint_source("def f():\n        x = 1\n    y = 2\n", "indent.py").findings
    assert "unindent does not match" in finding.message
    assert (finding.line, finding.end_line) == (3, 3)
    assert finding.column <= finding.end_column <= len("    y = 2") + 1


def test_return_outside_a_function_is_tl000_without_running_anything(tmp_path):
    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').close()\nreturn 1\n"
    (finding,) = lint_source(source, "ret.py").findings
    assert (finding.code, finding.line, finding.column) == ("TL000", 2, 1)
    assert "'return' outside function" in finding.message
    assert not marker.exists()


@pytest.mark.parametrize("source,message", [
    ("def f():\n    yield 1\nyield 2\n", "'yield' outside function"),
    ("for x in y:\n    pass\nbreak\n", "'break' outside loop"),
    ("nonlocal x\n", "nonlocal declaration not allowed at module level"),
    ("def f():\n    x = 1\n    global x\n", "assigned to before global declaration"),
])
def test_other_compile_errors_are_tl000(source, message):
    (finding,) = lint_source(source, "c.py").findings
    assert finding.code == "TL000" and message in finding.message


def test_an_unreadable_file_does_not_count_as_checked(project, run):
    sub = project / "sub"
    sub.mkdir()
    (sub / "good.py").write_text(GOOD)
    (sub / "gone.py").symlink_to(sub / "deleted.py")  # found by the walk, gone when read
    result = run("check", "--select", "TL401", "--no-cache", "--format", "json", "bad.py", "sub")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["files_checked"] == 2
    assert result.stderr.startswith(f"trainlint: error: cannot read {os.path.join('sub', 'gone.py')}: ")
    text = run("check", "--select", "TL401", "--no-cache", "sub")
    assert text.stdout.splitlines()[-1] == \
        "No findings in 1 file checked; 1 file could not be checked fully (see the errors)."


@pytest.mark.parametrize("option", ["--select", "--extend-select", "--ignore"])
def test_an_empty_selector_is_a_usage_error(project, run, option):
    result = run("check", option, "", "bad.py")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"trainlint: error: {option}: no rule codes given (see `trainlint rules`)"


def test_a_newline_in_a_path_keeps_one_finding_per_line(project, run):
    (project / "a\nb.py").write_text(BAD)
    result = run("check", "--select", "TL401", "--no-cache", "a\nb.py")
    assert result.stdout.splitlines()[0].startswith(f"a\\nb.py:{BAD_LINE}:9: TL401 ")


# -- 10. the language server ------------------------------------------------------------------------

pytest.importorskip("pygls")
from lsprotocol import types  # noqa: E402
from pygls.exceptions import JsonRpcException  # noqa: E402

from test_lsp import TIMEOUT, RawClient, start, stop  # noqa: E402


async def pull(client, uri: str):
    return await asyncio.wait_for(client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=types.TextDocumentIdentifier(uri=uri))), TIMEOUT)


@pytest.mark.asyncio
async def test_server_survives_special_paths_and_bad_documents(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.trainlint]\nselect = ['TL401']\n")
    os.mkfifo(tmp_path / "fifo.py")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "buggy.py").write_text(BAD)
    client = await start(pull=True)
    try:
        for name in ("fifo.py", "zero.py"):  # not open: read from disk, which must not block
            with pytest.raises(JsonRpcException) as error:
                await pull(client, (tmp_path / name).as_uri())
            assert "not a regular file" in error.value.message
        # a document in a symlink-loop directory, open in the editor: diagnostics as usual
        loop_uri = (tmp_path / "loop" / "train.py").as_uri()
        client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=loop_uri, language_id="python", version=1, text=BAD)))
        assert [d.code for d in (await pull(client, loop_uri)).items] == ["TL401"]
        for number, (data, syntax_error) in enumerate(CONTENTS.values()):
            text = data.decode("utf-8", "replace").replace("\0", "")
            uri = (tmp_path / f"doc{number}.py").as_uri()
            client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=text)))
            codes = [d.code for d in (await pull(client, uri)).items]
            assert all(code in ("TL000", "TL401") for code in codes)
        assert [d.code for d in (await pull(client, (tmp_path / "buggy.py").as_uri())).items] == ["TL401"]
    finally:
        assert await stop(client) == 0


def test_a_message_without_content_length_does_not_swallow_the_next(tmp_path):
    client = RawClient()
    try:
        client.send({"id": 1, "method": "initialize", "params": {"capabilities": {}}})
        assert client.response(1)["result"]["serverInfo"]["name"] == "trainlint"
        headless = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}).encode()
        client.process.stdin.write(b"Content-Type: application/vscode-jsonrpc\r\n\r\n" + headless)
        client.process.stdin.flush()
        client.send({"id": 3, "method": "shutdown"})
        assert client.response(3)["result"] is None
        client.send({"method": "exit"})
        assert client.process.wait(TIMEOUT) == 0
        assert b"Traceback" not in client.process.stderr.read()
    finally:
        if client.process.poll() is None:
            client.process.kill()
            client.process.wait()


def test_compiling_prints_no_python_warnings(project):
    (project / "warns.py").write_text('import re\npattern = re.compile("\\d+")\nx = 1(2)\nassert (x, "why")\n')
    done = trainlint("check", "--no-cache", "warns.py", cwd=project)
    assert done.stderr == ""
    assert done.returncode == 0


def test_deep_nesting_in_a_file_no_rule_reads_is_not_reported(fresh_recursion_limit):
    """The nesting bound protects LibCST; a file no rule reads is only compiled, and a chain
    deeper than the bound that CPython compiles is no finding there, in any process state."""
    source = "x = a" + ".b" * (MAX_DEPTH + 100) + "\n"
    assert lint_source(source, "chain.py", ALL).findings == []
    sys.setrecursionlimit(30_000)  # what an earlier check of a deep file leaves
    assert lint_source(source, "chain.py", ALL).findings == []
    deep_sum = "x = " + " + ".join(["a"] * 8000) + "\n"  # beyond the compiler's bound at the default limit
    assert [f.code for f in lint_source(deep_sum, "sum.py", ALL).findings] == ["TL000"]
    read = "import torch\nx = torch.load(a" + ".b" * (MAX_DEPTH + 100) + ")\n"  # TL401 reads this one
    [finding] = lint_source(read, "load.py", ALL).findings
    assert (finding.code, finding.message) == ("TL000", TOO_DEEP)


#: valid Python that LibCST's parser reads but whose tree it will not build (`CSTValidationError`:
#: it wants a space before `for` after a parenthesised element); met in a real repository
LIBCST_REFUSES = ("import torch\n\n\ndef grey(samples):\n"
                  "    return [(x.repeat(1, 3, 1, 1) if x.shape[1] == 1 else x)for x in samples]\n\n\n"
                  "for epoch in range(3):\n    model.eval()\n    print(model(x))\n")


def test_valid_python_libcst_will_not_build_is_a_skipped_file_not_a_crash(project, run):
    compile(LIBCST_REFUSES, "refused.py", "exec")  # Python's own parser and compiler accept it
    (project / "refused.py").write_text(LIBCST_REFUSES)
    result = run("check", "--select", "ALL", "--no-cache", "--format", "json", "bad.py", "refused.py")
    assert result.exit_code == 2  # a file that could not be checked, as any skipped file
    findings = json.loads(result.stdout)["findings"]
    assert [f["path"] for f in findings] == ["bad.py"] and findings[0]["line"] == BAD_LINE
    assert "skipped refused.py: LibCST cannot build a tree of it, though Python parses it" in result.stderr
    accepted = run("check", "--select", "ALL", "--no-cache", "--allow-skipped", "refused.py")
    assert accepted.exit_code == 0 and "trainlint: warning: skipped refused.py" in accepted.stderr
    # as an imported project file (its summary), and through the language server's parser
    (project / "user.py").write_text("import refused\n\nrefused.grey([])\n")
    assert run("check", "--select", "ALL", "--no-cache", "user.py").exit_code == 0
    from trainlint.incremental import DocumentParser

    assert lint_source(LIBCST_REFUSES, "refused.py", ALL, parser=DocumentParser()).skipped.startswith(
        "skipped refused.py: LibCST cannot build a tree of it")
