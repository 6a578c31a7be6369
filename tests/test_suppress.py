"""`# noqa` and `# trainlint: disable-file`, through the engine and the command line."""

from __future__ import annotations

import pytest

from conftest import BAD
from trainlint.engine import lint_source
from trainlint.settings import Settings, resolve_selection
from trainlint.suppress import ALL, file_disabled_codes, parse_directive

TL401_ONLY = Settings(select=resolve_selection(["TL401"], [], []))
LOAD = 'state = torch.load("checkpoint.pt", map_location="cpu", weights_only=False)'


def tl401_lines(source: str) -> list[int]:
    result = lint_source(source, "train.py", TL401_ONLY)
    assert result.errors == []
    return [f.line for f in result.findings if f.code == "TL401"]


def script(load_line: str, header: str = "") -> str:
    return f"{header}import torch\n\n{load_line}\n"


@pytest.mark.parametrize("comment", [
    "# noqa: TL401",
    "# noqa:TL401",
    "#noqa: tl401",
    "# noqa: TL101, TL401",
    "# noqa",
    "# NOQA",
    "# noqa  (checkpoints written by this job only)",
    "# type: ignore  # noqa: TL401",
])
def test_noqa_suppresses(comment):
    assert tl401_lines(script(f"{LOAD}  {comment}")) == []


@pytest.mark.parametrize("comment", [
    "# noqa: TL101",
    "# noqa: TL4010",
    "# noqa: TL40",
    "# no qa",
    "# trainlint: noqa-ish",
])
def test_noqa_for_other_codes_does_not_suppress(comment):
    assert tl401_lines(script(f"{LOAD}  {comment}")) == [3]


def test_noqa_on_another_line_does_not_suppress():
    source = "import torch  # noqa: TL401\n\n" + LOAD + "\n# noqa: TL401\n"
    assert tl401_lines(source) == [3]


def test_noqa_applies_to_the_line_a_multi_line_finding_starts_on():
    starts = 'import torch\n\nstate = torch.load(  # noqa: TL401\n    "c.pt", map_location="cpu", weights_only=False,\n)\n'
    ends = 'import torch\n\nstate = torch.load(\n    "c.pt", map_location="cpu", weights_only=False,\n)  # noqa: TL401\n'
    assert tl401_lines(starts) == []
    assert tl401_lines(ends) == [3]


@pytest.mark.parametrize("header", [
    "# trainlint: disable-file=TL401\n",
    "# trainlint: disable-file = TL402, TL401\n",
    "# trainlint: disable-file\n",
    "#trainlint:disable-file=tl401\n",
])
def test_disable_file(header):
    assert tl401_lines(script(LOAD, header)) == []
    assert tl401_lines(script(LOAD, "") + header) == []  # anywhere in the file, on its own line


@pytest.mark.parametrize("header", [
    "# trainlint: disable-file=TL402\n",
    "x = 1  # trainlint: disable-file=TL401\n",  # not on a line of its own
])
def test_disable_file_for_other_codes_or_inline(header):
    assert tl401_lines(script(LOAD, header)) == [4]


def test_syntax_errors_are_not_suppressed_by_noqa_codes_elsewhere():
    result = lint_source("# trainlint: disable-file=TL401\nprint 'x'\n", "old.py", TL401_ONLY)
    assert [f.code for f in result.findings] == ["TL000"]


def test_parsers():
    assert parse_directive("# a comment") is None
    assert parse_directive("# noqa").blanket
    assert [c.code for c in parse_directive("# noqa: tl101 , TL202").codes] == ["TL101", "TL202"]
    assert file_disabled_codes("a\n# trainlint: disable-file=TL101\n# trainlint: disable-file=TL2\n") == \
        frozenset({"TL101", "TL2"})
    assert file_disabled_codes("# trainlint: disable-file\n") is ALL


def test_noqa_through_the_cli(project, run):
    (project / "quiet.py").write_text(BAD.replace("weights_only=False)", "weights_only=False)  # noqa: TL401"))
    result = run("check", "--select", "TL401", "--no-cache", "quiet.py", "bad.py")
    assert result.exit_code == 1
    assert [line.split(":")[0] for line in result.stdout.splitlines() if " TL401 " in line] == ["bad.py"]


def test_a_quoted_noqa_is_text_and_the_directive_after_it_still_counts():
    assert parse_directive('# TABLE = repr(rows) + "  # noqa"') is None
    directive = parse_directive('# see "# noqa" in the docs  # noqa: TL401')
    assert directive is not None and [c.code for c in directive.codes] == ["TL401"]
    assert directive.problem is None


def test_a_missing_colon_before_only_other_tools_codes_is_not_ours():
    other = parse_directive("# noqa F401 isort:skip")
    assert other.problem is not None and not other.concerns_trainlint
    ours = parse_directive("# noqa F401, unsafe-torch-load")
    assert ours.problem is not None and ours.concerns_trainlint
    assert parse_directive("# noqa because of reasons").concerns_trainlint  # reads as a bare noqa elsewhere


ALL_NOQA = Settings(select=resolve_selection(["ALL"], [], []))


@pytest.mark.parametrize("comment", [
    "# noqa: GB_REGISTRY",
    "# noqa: set_linter",
    "# noqa: this import registers the backends for flake8",
    "# noqa: E501",
    "# noqa: E501  trusted source",
    "# noqa F401",
])
def test_other_tools_noqa_comments_are_left_alone(comment):
    result = lint_source(f"import torch\n\nx = compute()  {comment}\n", "train.py", ALL_NOQA)
    assert [f.code for f in result.findings] == []


@pytest.mark.parametrize("comment, problem", [
    ("# noqa: trusted TL401", "`trusted` is not a rule code or name"),
    ("# noqa: trusted, unsafe-torch-load", "`trusted` is not a rule code or name"),
    ("# noqa TL401", "missing `:` before `TL401`"),
])
def test_malformed_noqa_naming_our_code_names_the_problem(comment, problem):
    result = lint_source(f"import torch\n\nx = compute()  {comment}\n", "train.py", ALL_NOQA)
    (finding,) = result.findings
    assert finding.code == "TL002" and problem in finding.message, finding.message
    assert "names a trainlint code" in finding.evidence[0].premise


CODELESS = [
    ("# noqa:", "no codes after `noqa:`"),
    ("# noqa because the loss is logged", "`because the loss is logged` after a bare `# noqa`"),
    ("# noqa, register module", "`, register module` after a bare `# noqa`"),
    ("# noqa; noqa", "`; noqa` after a bare `# noqa`"),
]


@pytest.mark.parametrize("comment, problem", CODELESS)
def test_codeless_malformed_noqa_on_a_line_we_report_is_ours(comment, problem):
    """Naming no code, the comment is proven meant for trainlint by the finding it fails to silence."""
    result = lint_source(script(f"{LOAD}  {comment}"), "train.py", ALL_NOQA)
    assert sorted(f.code for f in result.findings) == ["TL002", "TL401"]
    (malformed,) = [f for f in result.findings if f.code == "TL002"]
    assert problem in malformed.message, malformed.message
    assert "TL401 is reported on this line" in malformed.evidence[0].premise


@pytest.mark.parametrize("comment, problem", CODELESS)
def test_codeless_malformed_noqa_on_a_quiet_line_is_another_tools(comment, problem):
    """flake8 reads `# noqa, register module` as its blanket comment; with nothing of ours on the
    line, nothing proves it is meant for trainlint."""
    source = f"import torch\nimport torch_geometric.graphgym.models.head  {comment}\n\n{LOAD}\n"
    result = lint_source(source, "train.py", ALL_NOQA)
    assert [(f.code, f.line) for f in result.findings] == [("TL401", 4)]


def test_a_trainlint_noqa_after_another_tools_is_read():
    directive = parse_directive("# noqa: E501  trusted source  # noqa: TL401")
    assert [c.code for c in directive.codes] == ["TL401"] and directive.problem is None
    assert tl401_lines(script(f"{LOAD}  # noqa: set_linter  # noqa: TL401")) == []
    assert tl401_lines(script(f"{LOAD}  # noqa: set_linter")) == [3]


def test_only_tl_and_digits_are_our_codes():
    result = lint_source("x = compute()  # noqa: TLX1\n", "train.py", ALL_NOQA)
    assert result.findings == []  # another tool's code, not an unknown one of ours
    result = lint_source("x = compute()  # noqa: TL999\n", "train.py", ALL_NOQA)
    assert [f.code for f in result.findings] == ["TL001"]


def test_disable_file_takes_rule_names():
    assert file_disabled_codes("# trainlint: disable-file=unsafe-torch-load, TL402\n") == frozenset({"TL401", "TL402"})
    assert tl401_lines(script(LOAD, "# trainlint: disable-file=Unsafe-Torch-Load\n")) == []
