"""Engine behaviours every front end relies on: broken files, failing rules, selection."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import BAD, GOOD
from trainlint.cache import ResultCache
from trainlint.engine import lint_path, lint_paths, lint_source
from trainlint.reader.project import Project
from trainlint.rule import _REGISTRY, Rule
from trainlint.rules import registry
from trainlint.settings import SYNTAX_ERROR_CODE, SelectorError, Settings, codes_for, resolve_selection

ALL = Settings(select=resolve_selection(["ALL"], [], []))

BROKEN_FILES = {
    # LibCST places this one on the next line, the parser's own view; the line is not pinned
    "syntax.py": (b"import torch\n\ndef f(:\n    pass\n", None),
    "python2.py": (b"import torch\nprint 'epoch', 1\n", 2),
    "latin1.py": (b"import torch\nname = '\xe9t\xe9'\n", 2),
    "bad_cookie.py": (b"# -*- coding: no-such-codec -*-\nimport torch\n", 1),
    "nul.py": (b"import torch\nx = 1\0\n", 2),
    "unclosed.py": (b"import torch\nx = torch.load(\n", None),
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "a_bad.py").write_text(BAD)
    (tmp_path / "z_good.py").write_text(GOOD)
    for name, (data, _) in BROKEN_FILES.items():
        (tmp_path / name).write_bytes(data)
    return tmp_path


def test_broken_files_are_tl000_and_good_files_still_checked(tree):
    paths = sorted(str(p) for p in tree.iterdir())
    results = {Path(r.path).name: r for r in lint_paths(paths, ALL)}
    assert [Path(r).name for r in results] == [Path(p).name for p in paths]  # order kept
    assert [f.code for f in results["a_bad.py"].findings] == ["TL401"]
    assert results["z_good.py"].findings == []
    for name, (_, line) in BROKEN_FILES.items():
        findings = results[name].findings
        assert [f.code for f in findings] == [SYNTAX_ERROR_CODE], name
        assert findings[0].name == "syntax-error" and findings[0].severity.value == "error"
        if line is not None:
            assert findings[0].line == line, (name, findings[0])
        assert results[name].errors == []


def test_nul_byte_position():
    finding, = lint_source(b"x = 1\nyy = 2\0\n", "f.py", ALL).findings
    assert (finding.code, finding.line, finding.column) == ("TL000", 2, 7)
    finding, = lint_source("x = 1\0", "f.py", ALL).findings  # a str with a NUL too
    assert (finding.code, finding.line) == ("TL000", 1)


def test_tl000_can_be_ignored():
    settings = Settings(select=resolve_selection(["ALL"], [], ["TL000"]))
    assert lint_source(b"print 'x'\n", "old.py", settings).findings == []


def test_source_with_coding_cookie_is_decoded():
    source = "# -*- coding: latin-1 -*-\nimport torch\nname = 'été'\n" + BAD.split("\n", 1)[1]
    result = lint_source(source.encode("latin-1"), "old.py", ALL)
    assert [f.code for f in result.findings] == ["TL401"]


def test_unreadable_path_is_an_error_not_an_exception(tmp_path):
    result = lint_path(str(tmp_path / "missing.py"), ALL)
    assert result.findings == []
    assert result.errors == [f"cannot read {tmp_path / 'missing.py'}: No such file or directory"]


@pytest.fixture
def failing_rule():
    """A throwaway rule that raises; removed from the registry afterwards."""

    class Exploding(Rule):
        code = "TL998"
        name = "exploding"
        summary = message = "always fails"

        def check(self, ctx):
            raise ZeroDivisionError("rule bug")

    try:
        yield Exploding
    finally:
        _REGISTRY.pop("TL998", None)
    assert "TL998" not in registry()


def test_internal_rule_error_is_reported_not_raised(failing_rule, tmp_path):
    settings = Settings(select=resolve_selection(["TL998", "TL401"], [], []))
    (tmp_path / "one.py").write_text(BAD)
    (tmp_path / "two.py").write_text(GOOD)
    results = list(lint_paths([str(tmp_path / "one.py"), str(tmp_path / "two.py")], settings))
    for result in results:
        assert len(result.errors) == 1
        error = result.errors[0]
        assert "TL998" in error and "exploding" in error and result.path in error and "rule bug" in error
    assert [f.code for f in results[0].findings] == ["TL401"]  # the other rules still ran


def test_internal_error_through_the_cli(failing_rule, project, run):
    result = run("check", "--select", "TL998,TL401", "--no-cache", "bad.py", "good.py")
    assert result.exit_code == 2
    assert "bad.py:3:9: TL401" in result.stdout
    errors = result.stderr.splitlines()
    assert len(errors) == 2
    assert all(e.startswith("trainlint: error: internal error in TL998 (exploding) while checking ") for e in errors)
    assert "Traceback" not in result.stderr


def test_results_with_errors_are_not_cached(failing_rule, tmp_path):
    (tmp_path / "one.py").write_text(BAD)
    settings = Settings(select=resolve_selection(["TL998", "TL401"], [], []))
    cache = ResultCache(tmp_path / "cache")
    list(lint_paths([str(tmp_path / "one.py")], settings, cache=cache))
    data = (tmp_path / "one.py").read_bytes()
    depends = Project.for_paths([tmp_path / "one.py"]).dependency_digest(str(tmp_path / "one.py"), data)
    assert cache.get(data, str(tmp_path / "one.py"), settings, depends) is None


def test_cache_round_trip(tmp_path):
    (tmp_path / "one.py").write_text(BAD)
    cache = ResultCache(tmp_path / "cache")
    first = list(lint_paths([str(tmp_path / "one.py")], ALL, cache=cache))
    data = (tmp_path / "one.py").read_bytes()
    # the key lint_paths used: the digest of the file's component of the project's import graph
    depends = Project.for_paths([tmp_path / "one.py"]).dependency_digest(str(tmp_path / "one.py"), data)
    cached = cache.get(data, str(tmp_path / "one.py"), ALL, depends)
    assert cached is not None and cached.findings == first[0].findings
    (tmp_path / "one.py").write_text(GOOD)  # new content, new key
    assert cache.get((tmp_path / "one.py").read_bytes(), str(tmp_path / "one.py"), ALL, depends) is None


# -- selection --------------------------------------------------------------------------------

def test_selectors():
    rules = set(registry())
    assert codes_for("ALL") == rules | {"TL000"}
    assert codes_for("all") == codes_for("ALL")
    assert codes_for("TL401") == {"TL401"}
    assert codes_for("TL4") == {c for c in rules if c.startswith("TL4")}
    assert codes_for("tl40") == {c for c in rules if c.startswith("TL40")}
    for bad in ("TL999", "TL9", "XX1", "401", ""):
        with pytest.raises(SelectorError):
            codes_for(bad)


def test_default_selection_and_tl000():
    default = resolve_selection(None, [], [])
    assert default == {c for c, r in registry().items() if r.enabled_by_default} | {"TL000"}
    assert resolve_selection(["TL401"], [], []) == {"TL401", "TL000"}
    assert resolve_selection(["TL401"], [], ["TL000"]) == {"TL401"}
    assert resolve_selection([], ["TL401"], []) == {"TL401", "TL000"}
    assert resolve_selection(["ALL"], [], ["TL4"]) == (set(registry()) | {"TL000"}) - codes_for("TL4")


def test_off_by_default_rules_need_selecting():
    off = [c for c, r in registry().items() if not r.enabled_by_default]
    default = resolve_selection(None, [], [])
    assert not set(off) & default
    assert set(off) <= resolve_selection(None, off, [])


def test_per_file_ignores():
    settings = Settings(select=resolve_selection(["TL401"], [], []),
                        per_file_ignores=(("tests/*", frozenset({"TL401"})), ("conftest.py", frozenset({"TL401"}))))
    assert lint_source(BAD, "tests/unit/test_x.py", settings).findings == []
    assert lint_source(BAD, "src/conftest.py", settings).findings == []
    assert [f.code for f in lint_source(BAD, "src/train.py", settings).findings] == ["TL401"]


def test_unselected_rule_does_not_run():
    settings = Settings(select=resolve_selection(["TL000"], [], []))
    assert lint_source(BAD, "x.py", settings).findings == []
