"""The shortcuts taken for speed give exactly what the long way gives."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import PositionProvider
from libcst.metadata.position_provider import NEWLINE_RE

from trainlint.model.checkpoint_base import string_value
from trainlint.model.index import FileIndex, walk
from trainlint.positions import split_lines
from trainlint.spans import Positions, _PositionState, _Ranges, first_lines
from trainlint.rules import registry

FIXTURES = Path(__file__).parent / "fixtures"

TRICKY = '''#!/usr/bin/env python
# header comment

"""Module docstring."""
import os; import sys
x = (1,
     2); y = 3


@decorator
# a comment between decorator and def
@other(
    arg,
)
def f():
    pass
    # indented trailing comment
# column-0 comment before the class

@(
    wrapped
)
class A:
  def g(self): return 1
if x:
    pass
elif y:
    pass
else:
    pass
# footer comment
'''


def _files():
    yield pytest.param(TRICKY, id="tricky")
    for path in sorted(FIXTURES.rglob("*.py")):
        yield pytest.param(path.read_text(), id=str(path.relative_to(FIXTURES)))


def _sources():
    yield from _files()
    for code, rule in registry().items():
        for number, example in enumerate(rule.examples):
            yield pytest.param(example.code, id=f"{code}-{number}")


def _generated_first_lines(module: cst.Module) -> list[int]:
    line = 1 + len(module.header)
    found = []
    for statement in module.body:
        found.append(line)
        line += len(NEWLINE_RE.findall(module.code_for_node(statement)))
    return found


@pytest.mark.parametrize("source", list(_sources()))
def test_first_lines_from_python_parse_equal_generated_code(source):
    module = cst.parse_module(source)
    assert first_lines(module, ast.parse(source), split_lines(source)) == _generated_first_lines(module)


@pytest.mark.parametrize("source", list(_files()))
def test_spans_from_the_innermost_statement_equal_the_whole_module(source):
    """The span of every call and statement (what rules report), generated from the statement
    found through Python's parse, equals the span LibCST's PositionProvider gives in a generation
    of the whole module."""
    module = cst.parse_module(source)
    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    expected = wrapper.resolve(PositionProvider)
    index = FileIndex(module)
    tree = ast.parse(source)
    lines = split_lines(source)
    for node in walk(module):
        if not isinstance(node, (cst.Call, cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            continue
        positions = Positions(module, index.parents, tree, lines)  # fresh: nothing generated yet
        code_range = expected[node]
        assert positions.span(node) == (code_range.start.line, code_range.start.column + 1,
                                        code_range.end.line, code_range.end.column + 1), node


@pytest.mark.parametrize("source", list(_files()))
def test_the_position_state_records_what_libcsts_records(source):
    """`positions._PositionState` (LibCST's position-recording codegen, made cheaper) records the
    same range for every node of a whole-module generation as LibCST's PositionProvider."""
    module = cst.parse_module(source)
    expected = cst.MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    ranges = _Ranges()
    state = _PositionState(default_indent=module.default_indent, default_newline=module.default_newline,
                           provider=ranges)
    module._codegen(state)
    assert "".join(state.tokens) == module.code
    assert dict(ranges._computed) == dict(expected)


@pytest.mark.parametrize("literal", ["''", '""', "'a'", '"a\'b"', "'''x'''", '""""""', '"""a"b"""', "'''a''b'''",
                                     "r'x'", "b'x'", "u'x'", "'a\\nb'", "'\\''", "rb'x'"])
def test_string_value_without_literal_eval_equals_evaluated_value(literal):
    expr = cst.parse_expression(literal)
    value = expr.evaluated_value
    assert string_value(expr) == (value if isinstance(value, str) else None)


def test_every_fixture_gives_the_same_findings_at_any_jobs_and_from_the_cache(tmp_path):
    """Worker processes (one file a task, largest first) and the result cache change nothing."""
    from trainlint.cache import ResultCache
    from trainlint.engine import lint_paths
    from trainlint.settings import Settings, resolve_selection

    settings = Settings(select=resolve_selection(["ALL"], [], []))
    paths = [str(path) for path in sorted(FIXTURES.rglob("*.py"))]
    assert len(paths) >= 8  # enough for the worker pool to be used

    def run(**kwargs):
        return [(r.path, [f.to_dict() for f in r.findings], r.errors) for r in lint_paths(paths, settings, **kwargs)]

    serial = run()
    assert run(jobs=2) == serial
    cache = ResultCache(tmp_path / "cache")
    assert run(cache=cache) == serial
    assert run(cache=cache, jobs=2) == serial


def _deepest_first(tree: ast.AST):
    """The first node deeper than MAX_DEPTH in the guard's walk order, walking every node."""
    from trainlint.guard import MAX_DEPTH

    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return node
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return None


def _nested(depth: int) -> dict[str, str]:
    """Deep code of many shapes, on one line and over many lines (a decorator's included)."""
    return {
        "sum-lines": "x = (\n" + " +\n".join(["a"] * depth) + ")\n",
        "attribute-lines": "x = (a\n" + "".join(f" .b{i}\n" for i in range(depth)) + ")\n",
        "subscript-lines": "x = (a" + "".join(f"\n[{i}]" for i in range(depth)) + ")\n",
        "lambda-lines": "f = (" + "lambda:\n " * depth + "1)\n",
        "ifexp-lines": "x = (" + "\n".join(["a if b else"] * depth) + " c)\n",
        "not-lines": "x = (" + "\n".join(["not"] * depth) + " c)\n",
        "unary": "x = " + "-" * depth + "1\n",
        "decorator-lines": "@d(" + "\n + ".join(["a"] * depth) + ")\ndef f():\n    pass\n",
        "in-blocks": "".join(" " * i + "if x:\n" for i in range(60)) + " " * 60 + "y = (" + " +\n".join(["a"] * (depth - 60)) + ")\n",
        "after-a-long-line": "z = 1  # " + "x" * 3000 + "\nx = (\n" + " +\n".join(["a"] * depth) + ")\n",
    }


@pytest.mark.parametrize("depth", [1400, 1497, 1499, 1501, 1600])
def test_the_depth_guard_skips_only_subtrees_too_short_to_be_too_deep(depth):
    from trainlint.guard import _too_deep

    for name, source in _nested(depth).items():
        tree = ast.parse(source)
        assert _too_deep(tree, source) is _deepest_first(tree), name


@pytest.mark.parametrize("source", list(_files()))
def test_the_depth_guard_on_fixtures(source):
    from trainlint.guard import _too_deep

    tree = ast.parse(source)
    assert _too_deep(tree, source) is _deepest_first(tree) is None
