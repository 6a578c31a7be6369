"""FileIndex.resolve on a name bound by a call of an attribute of itself (`data = data.to(device)`)."""

from __future__ import annotations

import libcst as cst

from trainlint.model.index import FileIndex


def test_a_name_rebound_by_a_call_of_its_own_attribute_resolves_to_nothing():
    module = cst.parse_module("import torch\ndata = load()\ndata = data.to('cpu')\nx = data.cpu()\n")
    index = FileIndex(module)
    call = [site.node for site in index.calls if isinstance(site.node.func, cst.Attribute)
            and site.node.func.attr.value == "cpu"][0]
    assert index.resolve(call.func, index.module_scope) is None  # no RecursionError
    lazy = cst.parse_module("import importlib\nnp = importlib.import_module('numpy')\ny = np.zeros(3)\n")
    index = FileIndex(lazy)
    call = [site.node for site in index.calls if isinstance(site.node.func, cst.Attribute)
            and site.node.func.attr.value == "zeros"][0]
    assert index.resolve(call.func, index.module_scope) == "numpy.zeros"
