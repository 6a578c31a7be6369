"""The shortcuts taken for speed give exactly what the long way gives."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata.position_provider import NEWLINE_RE

from trainlint.positions import first_lines, split_lines
from trainlint.rule import registry

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


def _sources():
    yield pytest.param(TRICKY, id="tricky")
    for path in sorted(FIXTURES.rglob("*.py")):
        yield pytest.param(path.read_text(), id=str(path.relative_to(FIXTURES)))
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
