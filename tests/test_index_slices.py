"""The file index's pre-order tables are the walks they replace: for every node of the fixtures
and of every rule's examples, `subtree` is `walk`, `scope_nodes` is `walk_scope` and
`calls_under` is `training.calls_in`, node for node and in the same order; `scope_at` and
`function_at` are what the node's ancestors say."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from trainlint.model.index import FileIndex, walk, walk_scope
from trainlint.model.training import calls_in
from trainlint.rules import registry

FIXTURES = Path(__file__).parent / "fixtures"


def _sources():
    for path in sorted(FIXTURES.rglob("*.py")):
        yield pytest.param(path.read_text(), id=str(path.relative_to(FIXTURES)))
    for code, rule in registry().items():
        yield pytest.param("\n\n".join(example.code for example in rule.examples), id=code)


@pytest.mark.parametrize("source", list(_sources()))
def test_slices_are_the_walks(source):
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        pytest.skip("not Python")
    index = FileIndex(module)
    assert index.nodes == list(walk(module))
    for node in index.nodes:
        assert index.subtree(node) == list(walk(node))
        assert index.scope_nodes(node) == list(walk_scope(node))
        assert index.calls_under(node) == list(calls_in(node))
        ancestors = list(index.ancestors(node))
        scope = next((index.scope_of_node[a] for a in ancestors if a in index.scope_of_node), index.module_scope)
        function = next((index.function_of_node[a] for a in ancestors if isinstance(a, cst.FunctionDef)), None)
        assert index.scope_at(node) is scope
        assert index.function_at(node) is function


def test_nested_definitions_are_skipped_but_listed():
    module = cst.parse_module(
        "def outer():\n    f(1)\n    g = lambda: h(2)\n    def inner():\n        k(3)\n    class C:\n"
        "        m(4)\n    n(5)\n")
    index = FileIndex(module)
    outer = module.body[0]
    calls = [cst.Module([]).code_for_node(c) for c in index.calls_under(outer)]
    assert calls == ["f(1)", "n(5)"]
    kinds = {type(n) for n in index.scope_nodes(outer)}
    assert {cst.Lambda, cst.FunctionDef, cst.ClassDef} <= kinds


def test_a_node_outside_the_tree_is_walked():
    index = FileIndex(cst.parse_module("x = 1\n"))
    built = cst.parse_expression("f(g(1))")
    assert index.subtree(built) == list(walk(built))
    assert [type(n) for n in index.calls_under(built)] == [cst.Call, cst.Call]
