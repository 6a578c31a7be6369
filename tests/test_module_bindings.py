"""A name read for an attribute (`torch.no_grad`) resolves to a module bound by other means than
`import`: an optional import's `None` placeholder, `importlib.import_module`, a lazy-import helper
(trainlint.model.index.FileIndex.resolve)."""

import textwrap

import libcst as cst
import pytest

from trainlint.model.index import FileIndex


def _resolve_last_with(source: str) -> str | None:
    index = FileIndex(cst.parse_module(textwrap.dedent(source)))
    item = [n for n in index.nodes if isinstance(n, cst.WithItem)][-1]
    return index.resolve(item.item.func, index.scope_at(item))


@pytest.mark.parametrize("source", [
    """
    try:
        import torch
    except ImportError:
        torch = None
    with torch.no_grad():
        pass
    """,
    """
    import importlib
    def f():
        torch = importlib.import_module("torch")
        with torch.no_grad():
            pass
    """,
    """
    def _lazy():
        import torch
        return torch
    def f():
        torch = _lazy()
        with torch.no_grad():
            pass
    """,
    """
    def _deps():
        try:
            import torch
            from torch import nn
        except ImportError as error:
            raise RuntimeError("needs torch") from error
        return torch, nn
    def f():
        torch, nn = _deps()
        with torch.no_grad():
            pass
    """,
])
def test_a_module_bound_by_other_means(source):
    assert _resolve_last_with(source) == "torch.no_grad"


@pytest.mark.parametrize("source", [
    # another value than the module: a call that returns an object, not an import
    """
    def _make():
        return Thing()
    def f():
        torch = _make()
        with torch.no_grad():
            pass
    """,
    # two different modules
    """
    try:
        import torch
    except ImportError:
        import paddle as torch
    torch = 3 if False else torch
    with torch.no_grad():
        pass
    """,
    # a name rebound from a call on itself: read without coming back to the same name (no recursion)
    """
    import torch
    torch = torch.compile(torch)
    with torch.no_grad():
        pass
    """,
    # the helper returns three values and two names take them: the unpacking would fail
    """
    def _deps():
        import torch
        return torch, 1, 2
    def f():
        torch, one = _deps()
        with torch.no_grad():
            pass
    """,
    # a helper that takes arguments: what it returns depends on them
    """
    def _lazy(name):
        import torch
        return torch
    def f():
        torch = _lazy("x")
        with torch.no_grad():
            pass
    """,
])
def test_other_bindings_stay_unknown(source):
    assert _resolve_last_with(source) is None
