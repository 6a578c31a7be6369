"""Inputs at the edges: deep nesting, form feeds, multi-line quoted code in messages."""

from __future__ import annotations

import pytest

from trainlint.engine import lint_source


@pytest.mark.parametrize("depth", [300, 600])
def test_deeply_chained_expression_is_checked(depth):
    source = "import torch\nx = torch.load('a.pt', weights_only=False)" + ".f()" * depth + "\n"
    result = lint_source(source, "deep.py")
    assert result.errors == []
    assert [(f.code, f.line) for f in result.findings] == [("TL401", 2)]


def test_form_feed_does_not_shift_noqa_lines():
    source = 'import torch\n\x0c\nstate = torch.load("c.pt", weights_only=False)  # noqa: TL401\n'
    assert lint_source(source, "ff.py").findings == []
    unsuppressed = source.replace("  # noqa: TL401", "")
    assert [f.line for f in lint_source(unsuppressed, "ff.py").findings] == [3]


def test_positions_after_many_top_level_statements():
    filler = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(50))
    source = "import torch\n# a comment\n\n" + filler + "class A:\n    def load(self, p):\n" \
        "        return torch.load(\n            p, weights_only=False)\n"
    (finding,) = lint_source(source, "many.py").findings
    line = source.splitlines().index("        return torch.load(") + 1
    assert (finding.line, finding.column, finding.end_line) == (line, 16, line + 1)


def test_syntax_error_uses_python_message():
    (finding,) = lint_source("def train(model:\n    pass\n", "broken.py").findings
    assert finding.code == "TL000"
    assert (finding.line, finding.column) == (1, 10)
    assert "'(' was never closed" in finding.message


def test_messages_are_one_line():
    source = 'import pickle\nwith open("ckpt.pkl", "rb") as f:\n    state = pickle.load(\n        f)\n'
    (finding,) = lint_source(source, "pk.py").findings
    assert "\n" not in finding.message
