"""Which library an array-like value belongs to, from what made it (never from its name)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from trainlint.model.array_kinds import NUMPY, SEQUENCE, TORCH, array_kind
from trainlint.model.index import FileIndex, walk


def _kind(source: str):
    """The kind of the argument of the last `keep(...)` call in `source`."""
    module = cst.parse_module(textwrap.dedent(source))
    index = FileIndex(module)
    call = [n for n in walk(module) if isinstance(n, cst.Call) and isinstance(n.func, cst.Name)
            and n.func.value == "keep"][-1]
    scope = index.scope_at(call)

    def follow(name, where):
        bindings = where.lookup(name.value)
        return bindings[0].value if len(bindings) == 1 and bindings[0].kind == "assign" else None

    found = array_kind(index, call.args[0].value, scope, follow)
    return found.kind if found is not None else None


@pytest.mark.parametrize("source, expected", [
    ("import torch\nx = torch.randn(4, 4)\nkeep(x[:2].T)", TORCH),
    ("import numpy as np\nrng = np.random.default_rng(0)\nidx = rng.permutation(10)\nkeep(idx[:5])", NUMPY),
    ("import numpy as np\nidx = np.argsort(scores)\nkeep(idx[3:])", NUMPY),
    ("import torch\ndef f(t: torch.Tensor):\n    keep(t[:1])", TORCH),
    ("import numpy as np\ndef f(a: np.ndarray):\n    keep(a[:1])", NUMPY),
    ("keep(layer.weight[:3])", TORCH),
    ("import torch.nn.functional as F\nkeep(F.pad(x, (1, 1))[..., :3])", TORCH),
    ("keep(unknown.narrow(0, 0, 2))", TORCH),  # a method only tensors have
    ("keep(t.detach().numpy()[:2])", NUMPY),
    ("keep(list(items)[:2])", SEQUENCE),
    ("import torch\nfor i, piece in enumerate(torch.arange(8).split(2)):\n    keep(piece)", TORCH),
    # not known: a parameter without annotation, a load, a list's item, a size
    ("def f(t):\n    keep(t[:1])", None),
    ("import torch\nd = torch.load('x.pt')\nkeep(d[:1])", None),
    ("import torch\nrows = [torch.ones(2)]\nkeep(rows[0])", None),
    ("import torch\nx = torch.ones(3)\nkeep(x.size()[:1])", None),
])
def test_kind_from_what_made_it(source, expected):
    assert _kind(source) == expected
