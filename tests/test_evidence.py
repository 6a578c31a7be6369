"""Findings carry their evidence (RULES.md, "Evidence"): the premises the message asserts, each at
the line that proves it, through every output: JSON, SARIF relatedLocations, LSP
relatedInformation (a real client), text `--show-evidence`, and the result cache."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import libcst as cst
import pytest

from test_reporters import SARIF_SCHEMA
from trainlint.cache import ResultCache
from trainlint.engine import lint_source
from trainlint.finding import EVIDENCE_KINDS, Evidence, Finding
from trainlint.model.premises import premise, unknown
from trainlint.settings import Settings, resolve_selection

# TL105: the step at line 7; the backward (6), the optimizer's construction (3), the loop (4)
MISSING_ZERO_GRAD = '''import torch
model = torch.nn.Linear(2, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in range(10):
    loss = model(x).sum()
    loss.backward()
    opt.step()
'''
TL105 = Settings(select=resolve_selection(["TL105"], [], []))
EXPECTED = [
    {"premise": "the loop runs a backward pass (gradients are computed each iteration)", "verdict": "proven",
     "kind": "call", "line": 6},
    {"premise": "the loop steps the optimizer", "verdict": "proven", "kind": "call", "line": 7},
    {"premise": "`opt` is an optimizer: built by `torch.optim.SGD(...)`", "verdict": "proven",
     "kind": "construction", "line": 3},
    {"premise": "no call in the loop or the helpers it runs clears `opt`'s gradients (`zero_grad()`, "
                "`p.grad = None`)", "verdict": "proven", "kind": "use", "line": 4},
]


def _cli(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--select", "TL105", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_engine_locates_each_premise_at_the_code_that_proves_it():
    [finding] = lint_source(MISSING_ZERO_GRAD, "train.py", TL105).findings
    assert [{k: v for k, v in e.to_dict().items() if k != "path"} for e in finding.evidence] == EXPECTED
    assert all(e.path == "train.py" for e in finding.evidence)


def test_json_output_carries_evidence(tmp_path):
    (tmp_path / "train.py").write_text(MISSING_ZERO_GRAD)
    done = _cli("--format", "json", "train.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    [finding] = json.loads(done.stdout)["findings"]
    assert finding["evidence"] == [{**e, "path": "train.py"} for e in EXPECTED]


def test_text_shows_evidence_only_when_asked(tmp_path):
    (tmp_path / "train.py").write_text(MISSING_ZERO_GRAD)
    plain = _cli("train.py", cwd=tmp_path).stdout
    assert "[proven" not in plain
    shown = _cli("--show-evidence", "train.py", cwd=tmp_path).stdout.splitlines()
    assert shown[1:5] == [
        "    train.py:6: [proven, call] the loop runs a backward pass (gradients are computed each iteration)",
        "    train.py:7: [proven, call] the loop steps the optimizer",
        "    train.py:3: [proven, construction] `opt` is an optimizer: built by `torch.optim.SGD(...)`",
        "    train.py:4: [proven, use] no call in the loop or the helpers it runs clears `opt`'s gradients "
        "(`zero_grad()`, `p.grad = None`)",
    ]


def test_sarif_related_locations_are_the_premises_away_from_the_finding(tmp_path):
    (tmp_path / "train.py").write_text(MISSING_ZERO_GRAD)
    done = _cli("--format", "sarif", "train.py", cwd=tmp_path)
    data = json.loads(done.stdout)
    jsonschema.validate(data, SARIF_SCHEMA)
    [result] = data["runs"][0]["results"]
    related = result["relatedLocations"]
    # the step's own premise sits on the finding's line: not repeated as a related location
    assert [r["physicalLocation"]["region"]["startLine"] for r in related] == [6, 3, 4]
    assert [r["id"] for r in related] == [0, 1, 2]
    assert related[1]["message"]["text"] == \
        "`opt` is an optimizer: built by `torch.optim.SGD(...)` (proven: construction)"
    assert related[0]["physicalLocation"]["artifactLocation"] == {"uri": "train.py", "uriBaseId": "%SRCROOT%"}
    assert [e["line"] for e in result["properties"]["evidence"]] == [6, 7, 3, 4]


def test_lsp_format_gives_related_information(tmp_path):
    (tmp_path / "train.py").write_text(MISSING_ZERO_GRAD)
    data = json.loads(_cli("--format", "lsp", "train.py", cwd=tmp_path).stdout)
    [(uri, [diagnostic])] = data.items()
    assert [r["location"]["range"]["start"]["line"] for r in diagnostic["relatedInformation"]] == [5, 2, 3]
    assert all(r["location"]["uri"] == uri for r in diagnostic["relatedInformation"])


def test_cache_round_trip_keeps_evidence(tmp_path):
    data = MISSING_ZERO_GRAD.encode()
    result = lint_source(data, "train.py", TL105)
    assert result.findings[0].evidence
    cache = ResultCache(tmp_path / "cache", tmp_path)
    cache.put(data, "train.py", TL105, result)
    again = cache.get(data, "train.py", TL105)
    assert again is not None and again.findings == result.findings


def test_a_cache_entry_with_malformed_evidence_is_a_miss(tmp_path):
    data = MISSING_ZERO_GRAD.encode()
    result = lint_source(data, "train.py", TL105)
    cache = ResultCache(tmp_path / "cache", tmp_path)
    forged = Evidence("by its name", "proven", "name", "train.py", 3)  # a name is never evidence
    result.findings[0] = Finding(**{**result.findings[0].__dict__, "evidence": (forged,)})
    cache.put(data, "train.py", TL105, result)
    assert cache.get(data, "train.py", TL105) is None


def test_finding_dict_round_trip():
    [finding] = lint_source(MISSING_ZERO_GRAD, "train.py", TL105).findings
    assert Finding.from_dict(json.loads(json.dumps(finding.to_dict()))) == finding


def test_a_name_is_not_a_kind_of_evidence():
    node = cst.Name("opt")
    with pytest.raises(ValueError):
        premise("`opt` is an optimizer", node, kind="name")
    assert "name" not in EVIDENCE_KINDS
    assert not unknown("`opt` is an optimizer: only its name says so", node, "construction").proven


@pytest.mark.asyncio
async def test_language_server_diagnostics_carry_related_information(tmp_path):
    pytest.importorskip("pygls")
    from lsprotocol import types
    from test_lsp import TIMEOUT, open_document, published, start, stop

    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\nselect = ["TL105"]\n')
    client = await start()
    uri = (tmp_path / "train.py").as_uri()
    try:
        open_document(client, uri, MISSING_ZERO_GRAD)
        params = await published(client, uri, 1)
        [diagnostic] = params.diagnostics
        assert diagnostic.code == "TL105" and diagnostic.range.start.line == 6
        related = diagnostic.related_information
        assert [(r.location.uri, r.location.range.start.line, r.location.range.end.character) for r in related] == \
            [(uri, 5, len("    loss.backward()")), (uri, 2, len(MISSING_ZERO_GRAD.splitlines()[2])),
             (uri, 3, len("for x in range(10):"))]
        assert related[1].message == "`opt` is an optimizer: built by `torch.optim.SGD(...)` (proven: construction)"
        # pulled diagnostics carry the same
        report = await asyncio.wait_for(client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=uri))), TIMEOUT)
        assert report.items[0].related_information == related
    finally:
        assert await stop(client) == 0


# -- every rule's default findings carry evidence ---------------------------------------------------
ALL = Settings(select=resolve_selection(["ALL"], [], []))


def _bad_example_findings():
    from trainlint.rules import registry

    for code, rule in registry().items():
        for number, example in enumerate(rule.bad_examples()):
            found = [f for f in lint_source(example.code, "example.py", ALL).findings
                     if f.code == code and f.line == example.line]
            yield f"{code}-bad-{number}", example, found


def test_every_bad_example_finding_carries_evidence_at_real_lines():
    counts = []
    for name, example, found in _bad_example_findings():
        assert found, f"{name}: no finding at line {example.line}"
        lines = example.code.splitlines()
        for finding in found:
            assert finding.evidence, f"{name}: a finding without evidence: {finding.message}"
            for item in finding.evidence:
                assert 1 <= item.line <= len(lines) and lines[item.line - 1].strip(), (name, item)
                assert item.kind in EVIDENCE_KINDS and item.verdict in ("proven", "unknown")
                assert item.path == "example.py" and item.premise.strip()
            counts.append(len(finding.evidence))
    assert sum(counts) / len(counts) >= 2, sum(counts) / len(counts)


# -- the policy: a finding resting on a name is not reported by default -----------------------------
SCHEDULER_BY_NAME = '''import torch

def train_step(model, batch, opt, sched):
    sched.step()
    loss = model(**batch).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
'''
TL106 = Settings(select=resolve_selection(["TL106"], [], []))


def test_a_role_known_only_by_name_is_not_reported_by_default():
    assert lint_source(SCHEDULER_BY_NAME, "train.py", TL106).findings == []


def test_include_unproven_reports_it_at_info_saying_why():
    settings = Settings(select=TL106.select, include_unproven=True)
    [finding] = lint_source(SCHEDULER_BY_NAME, "train.py", settings).findings
    assert finding.severity.value == "info" and finding.line == 4
    assert finding.message.startswith("unproven (`sched` is an LR scheduler: only the name `sched` says so): ")
    guessed = [e for e in finding.evidence if e.verdict == "unknown"]
    assert [(e.line, e.kind) for e in guessed] == [(4, "construction")]


def test_the_same_role_proven_by_a_caller_or_a_type_is_reported():
    built = SCHEDULER_BY_NAME + ('\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n'
                                 'train_step(model, batch, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0))\n')
    [finding] = lint_source(built, "train.py", TL106).findings
    [role] = [e for e in finding.evidence if "LR scheduler" in e.premise]
    assert role.verdict == "proven" and role.kind == "argument" and role.line == 11
    typed = SCHEDULER_BY_NAME.replace("sched):", "sched: torch.optim.lr_scheduler.LRScheduler):")
    [finding] = lint_source(typed, "train.py", TL106).findings
    assert any(e.kind == "type" and e.line == 3 for e in finding.evidence)


def test_include_unproven_from_the_command_line_and_the_configuration(tmp_path):
    (tmp_path / "train.py").write_text(SCHEDULER_BY_NAME)
    run = lambda *args: subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--select", "TL106",
                                        *args, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run().returncode == 0
    flagged = run("--include-unproven")
    assert flagged.returncode == 1 and "unproven (`sched`" in flagged.stdout
    (tmp_path / "pyproject.toml").write_text("[tool.trainlint]\ninclude-unproven = true\n")
    assert run().returncode == 1
    assert run("--no-include-unproven").returncode == 0
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\ninclude-unproven = "yes"\n')
    bad = run()
    assert bad.returncode == 2 and "include-unproven" in bad.stderr


def test_a_premise_outside_the_module_is_stated_at_the_finding():
    """A premise whose node is not in the checked module (made up to ask a question, or another
    file's) costs neither the finding nor an internal error: it sits at the finding's line."""
    from trainlint.model.premises import premise as state
    from trainlint.rule import Rule, bad, good

    class Probe(Rule):
        code = ""  # not registered
        name = "probe"

        def check(self, ctx):
            call = next(site.node for site in ctx.index.calls)
            yield self.report(call, "probe", evidence=[state("made up", cst.Name("elsewhere"), "use"),
                                                       state("the call", call, "call")])

    from trainlint import engine
    original, original_load = engine._rules_for, engine.load
    engine._rules_for = lambda source, codes, imported: ([Probe()], [])
    engine.load = lambda chosen: list(chosen)  # the probe is a rule already, not a head to import
    try:
        result = lint_source("x = 1\n\nprint(x)\n", "probe.py", Settings(select=resolve_selection(["ALL"], [], [])))
    finally:
        engine._rules_for, engine.load = original, original_load
    assert result.errors == []
    [finding] = [f for f in result.findings if f.name == "probe"]
    assert [(e.premise, e.line) for e in finding.evidence] == [("made up", 3), ("the call", 3)]
