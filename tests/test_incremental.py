"""The language server's incremental parse gives the trees and findings of a fresh parse, on every
fixture and on a run of edits of each (the document parser sees every version in turn)."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from test_speed import TRICKY
from trainlint.engine import lint_source
from trainlint.incremental import DocumentParser, split
from trainlint.rules import registry
from trainlint.settings import Settings, resolve_selection

ALL = Settings(select=resolve_selection(["ALL"], [], []))
FIXTURES = Path(__file__).parent / "fixtures"


def _files():
    yield pytest.param(TRICKY, id="tricky")
    for path in sorted(FIXTURES.rglob("*.py")):
        yield pytest.param(path.read_text(), id=str(path.relative_to(FIXTURES)))


def _sources():
    yield from _files()
    for code, rule in registry().items():
        for number, example in enumerate(rule.examples):
            yield pytest.param(example.code, id=f"{code}-{number}")


def _same_parse(parser: DocumentParser, source: str) -> None:
    module, error = parser.libcst_module(source, "x.py")
    assert error is None
    assert module.code == source
    assert module.deep_equals(cst.parse_module(source))
    tree = parser.python_tree(source, "x.py")
    assert ast.dump(tree, include_attributes=True) == ast.dump(ast.parse(source), include_attributes=True)


@pytest.mark.parametrize("source", list(_sources()))
def test_joined_parse_equals_a_parse_of_the_whole(source):
    parser = DocumentParser()
    _same_parse(parser, source)
    assert len(split(source)) >= 1


def test_pieces_are_top_level_statements():
    pieces = [text for _, text in split(TRICKY)]
    assert "".join(pieces) == TRICKY
    assert any(text.startswith("@decorator\n# a comment between decorator and def\n@other(") for text in pieces)
    assert any(text.startswith("if x:\n    pass\nelif y:\n    pass\nelse:\n") for text in pieces)
    assert any(text.startswith("x = (1,\n     2); y = 3\n") for text in pieces)


def _edits(source: str):
    """Versions of a document as someone edits it: a changed line, added and removed lines, a new
    function at the top, a syntax error and its repair, and back to the start."""
    lines = source.splitlines(keepends=True)
    middle = len(lines) // 2
    yield source.replace("weights_only=True", "weights_only=False", 1).replace("zero_grad()", "zero_grad(set_to_none=True)", 1)
    yield "".join(lines[:middle] + ["\n"] + lines[middle:])
    yield "".join(lines[:middle] + lines[middle + 1:])
    yield "import torch\n\n\ndef added(path):\n    return torch.load(path, weights_only=False)\n\n\n" + source
    yield "".join(lines[:middle] + ["x = (\n"] + lines[middle:])
    yield "".join(lines[:middle] + ["    # an indented comment\n"] + lines[middle:])
    yield source.replace("\n\n\n", "\n\n# between two definitions\n\n", 1)
    yield source


def _findings(source: str, parser=None) -> list[tuple]:
    kwargs = {"parser": parser} if parser is not None else {}
    result = lint_source(source, "x.py", ALL, **kwargs)
    assert result.errors == []
    return [(f.code, f.line, f.column, f.end_line, f.end_column, f.message, f.fix) for f in result.findings]


@pytest.mark.parametrize("source", list(_files()))
def test_trees_and_findings_on_edits_equal_a_fresh_parse(source):
    parser = DocumentParser()
    for version in [source, *_edits(source)]:
        try:
            cst.parse_module(version)
        except cst.ParserSyntaxError:
            assert parser.libcst_module(version, "x.py")[0] is None  # the whole parse's TL000
        else:
            _same_parse(parser, version)
        assert _findings(version, parser) == _findings(version)


def test_a_mixed_indent_document_is_parsed_whole():
    source = "def f():\n  return 1\n\n\ndef g():\n    return 2\n"
    _same_parse(DocumentParser(), source)


COMPILE_ACROSS_STATEMENTS = {
    "global-after-binding": "import torch\n\nx = 1\n\n\ndef f():\n    return x\n\n\nglobal x\n",
    "global-in-module-if": "x = 1\nif True:\n    global x\n",
    "future-annotations": "from __future__ import annotations\n\nimport torch\n\n\nx: (yield) = 1\n",
    "future-not-first": "import torch\nfrom __future__ import annotations\n",
    "return-outside-function": "import torch\n\n\ndef f():\n    pass\n\n\nreturn 1\n",
    "nonlocal-at-module-level": "import torch\nnonlocal x\n",
    "two-errors": "import torch\n\n\ndef f(a, a):\n    pass\n\n\nbreak\n",
}


@pytest.mark.parametrize("name", list(COMPILE_ACROSS_STATEMENTS))
def test_compiling_the_pieces_gives_the_compilers_answer_for_the_whole(name):
    """The document parser compiles only changed pieces; what CPython refuses only across
    statements (`global` after a binding, `__future__` imports) is still refused, at the place and
    with the message the compiler gives for the whole source."""
    source = COMPILE_ACROSS_STATEMENTS[name]
    clean = "import torch\n\n\ndef g(path):\n    return torch.load(path, weights_only=False)\n"
    parser = DocumentParser()
    for version in [clean, source, clean + source, clean]:
        assert _findings(version, parser) == _findings(version)
    assert any(code == "TL000" for code, *_ in _findings(source, DocumentParser()))


def _nested(depth: int) -> str:
    """A statement Python parses whose tree is `depth` levels deep (a chain of additions)."""
    return "x = " + "+".join(["1"] * depth) + "\n"


def test_the_nesting_bound_walks_only_changed_pieces_and_answers_as_the_whole(monkeypatch):
    """The guard's nesting bound on a document is walked piece by piece, each piece once per text:
    an edit of one function walks that piece only, and a piece too deep gives the TL000 the
    walk of the whole source gives (same place, same message)."""
    from trainlint import guard

    walked = []
    real = guard._too_deep
    monkeypatch.setattr(guard, "_too_deep", lambda tree, source="": walked.append(source) or real(tree, source))
    functions = [f"def f{n}(x):\n    return x + {n}\n" for n in range(6)]
    source = "import torch\n\n\n" + "\n\n".join(functions)
    parser = DocumentParser()
    assert parser.guard_check(source, "x.py", parser.python_tree(source, "x.py")) is None
    walked.clear()
    edited = source.replace("x + 3", "x * 3")
    assert parser.guard_check(edited, "x.py", parser.python_tree(edited, "x.py")) is None
    assert walked == ["def f3(x):\n    return x * 3\n\n\n"]  # the changed piece alone

    deep = edited + "\n\n" + _nested(guard.MAX_DEPTH + 5)
    problem = parser.guard_check(deep, "x.py", parser.python_tree(deep, "x.py"))
    assert problem is not None and problem.message == guard.TOO_DEEP and problem == guard.check(deep, "x.py")
    assert _findings(deep, parser) == _findings(deep)
