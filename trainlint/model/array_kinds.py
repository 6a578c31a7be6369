"""Which library an array-like value belongs to: a torch tensor, a NumPy array, a Python sequence.

It matters where pickling differs: `torch.save` of a torch view writes the whole storage it looks
into, while a NumPy view (or a list slice) pickles only its own elements. Known from what made
the value, never from its name:

- a call: `torch.*` functions (not `torch.nn`/`torch.optim`/`torch.utils`, but
  `torch.nn.functional`) and `nn.Parameter` make tensors; `numpy.*` functions (`np.argsort`, `np.random.default_rng`) make NumPy objects;
  `list`/`tuple`/`sorted`/`range`/`str` make Python sequences; a project function's return (in
  any project file: `FunctionSummary.array_kind`/`array_kinds_at`);
- a method: `.numpy()` gives NumPy, `.tolist()` a list; a number method (`.size()`, `.item()`)
  nothing of the three; any other method keeps its receiver's library (a slice, a transpose, a
  `.permutation(n)` of a NumPy Generator, a `.split(n)` piece of a tensor); a method only torch
  tensors have (`.narrow()`, `.chunk()`, `.detach()`) shows its receiver is one;
- `.weight`/`.bias`/`.grad` (a module's parameters): tensors; `.T`, `.mT` and a subscript keep
  the library of what they apply to; a list/tuple/string literal or comprehension is a sequence;
- a parameter's annotation (`torch.Tensor`, `np.ndarray`, `List[...]`).

`array_kind(index, expr, scope, follow)` -> `Kind(kind, node, how)` or None (not known);
`follow(name, scope)` gives the one value a name holds there (or None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import libcst as cst

from trainlint.model.index import FileIndex, Scope, unpacked_position
from trainlint.model.value_kinds import NUMBER_METHODS

TORCH, NUMPY, SEQUENCE = "torch", "numpy", "sequence"
# Words a project file must hold for a function of it to return an array this module recognises.
ARRAY_WORDS = ("torch", "numpy", "np.")
_NOT_TENSOR_FACTORIES = ("torch.nn.", "torch.optim", "torch.utils", "torch.distributed", "torch.cuda",
                         "torch.backends", "torch.autograd", "torch.jit", "torch.save", "torch.load",
                         "torch.device", "torch.Generator", "torch.no_grad", "torch.inference_mode")
_SEQUENCE_BUILTINS = frozenset({"list", "tuple", "sorted", "range", "str", "bytes", "reversed"})
# methods only a torch tensor has (no NumPy array, list, string or dict has one of these names):
# calling one shows what it is called on is a tensor
TORCH_ONLY_METHODS = frozenset({"narrow", "unbind", "chunk", "tensor_split", "as_strided", "expand", "expand_as",
                                "view_as", "permute", "unflatten", "movedim", "detach", "detach_", "contiguous",
                                "requires_grad_", "unsqueeze", "narrow_copy", "cuda", "cpu"})
_SAME_KIND_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "real", "imag"})
_PARAMETER_ATTRIBUTES = frozenset({"weight", "bias", "grad"})
_ANNOTATIONS = ((re.compile(r"\b(Tensor|Parameter)\b"), TORCH), (re.compile(r"\b(ndarray|NDArray)\b"), NUMPY),
                (re.compile(r"^(typing\.)?(List|Tuple|Sequence|list|tuple|str)\b"), SEQUENCE))


@dataclass(frozen=True)
class Kind:
    kind: str  # TORCH | NUMPY | SEQUENCE
    node: cst.CSTNode  # the code that shows it
    how: str


def array_kind(index: FileIndex, expr: cst.BaseExpression, scope: Scope,
               follow: Callable[[cst.Name, Scope], cst.BaseExpression | None],
               summary_of: Callable | None = None, depth: int = 0) -> Kind | None:
    """`summary_of(func, scope, words)`: the project function a call runs (default: the index's)."""
    if depth > 10:
        return None
    summary_of = summary_of or index.summary_of
    if isinstance(expr, (cst.List, cst.Tuple, cst.ListComp, cst.SimpleString, cst.FormattedString,
                         cst.ConcatenatedString)):
        return Kind(SEQUENCE, expr, "a Python sequence literal")
    if isinstance(expr, cst.Name):
        return _name_kind(index, expr, scope, follow, summary_of, depth)
    if isinstance(expr, cst.Subscript):
        whole = array_kind(index, expr.value, scope, follow, summary_of, depth + 1)
        if whole is not None and whole.kind == SEQUENCE and not all(isinstance(e.slice, cst.Slice)
                                                                   for e in expr.slice):
            return None  # an item of a list: whatever was put in it
        return whole
    if isinstance(expr, cst.Attribute):
        if expr.attr.value in _SAME_KIND_ATTRIBUTES:
            return array_kind(index, expr.value, scope, follow, summary_of, depth + 1)
        if expr.attr.value in _PARAMETER_ATTRIBUTES:
            return Kind(TORCH, expr, f"`.{expr.attr.value}` of a module is a tensor")
        return None
    if isinstance(expr, cst.Call):
        return _call_kind(index, expr, scope, follow, summary_of, depth)
    return None


def _call_kind(index, call: cst.Call, scope, follow, summary_of, depth) -> Kind | None:
    name = index.resolve(call.func, scope)
    if name:
        if name in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
            return Kind(TORCH, call, f"made by `{name}(...)`")
        if name.startswith("torch.nn.functional.") or \
                (name.startswith("torch.") and not name.startswith(_NOT_TENSOR_FACTORIES)):
            return Kind(TORCH, call, f"made by `{name}(...)`")
        if name.startswith("numpy."):
            return Kind(NUMPY, call, f"made by `{name}(...)`")
        if name in _SEQUENCE_BUILTINS:
            return Kind(SEQUENCE, call, f"made by `{name}(...)`")
    summary = summary_of(call.func, scope, ARRAY_WORDS)
    if summary is not None:
        kind = getattr(summary, "array_kind", None)
        return Kind(kind, call, f"returned by `{summary.name}`") if kind else None
    func = call.func
    if isinstance(func, cst.Attribute):
        method = func.attr.value
        if method == "numpy":
            return Kind(NUMPY, call, "made by `.numpy()`")
        if method == "tolist":
            return Kind(SEQUENCE, call, "made by `.tolist()`")
        if method in NUMBER_METHODS:
            return None
        receiver = array_kind(index, func.value, scope, follow, summary_of, depth + 1)
        if receiver is not None:
            return receiver
        if method in TORCH_ONLY_METHODS:
            return Kind(TORCH, call, f"`.{method}()` is a method only torch tensors have")
    return None


def _name_kind(index, name: cst.Name, scope, follow, summary_of, depth) -> Kind | None:
    bindings = scope.lookup(name.value)
    if len(bindings) == 1 and bindings[0].kind == "param":
        annotation = bindings[0].annotation
        if annotation is None:
            return None
        text = _code(annotation)
        for pattern, kind in _ANNOTATIONS:
            if pattern.search(text):
                return Kind(kind, annotation, f"annotated `{text}`")
        return None
    value = follow(name, scope)
    if value is not None and value is not name:
        return array_kind(index, value, scope, follow, summary_of, depth + 1)
    if len(bindings) != 1:
        return None
    binding = bindings[0]
    node = binding.node
    if binding.kind == "assign" and isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
        # `a, b = t.chunk(2)`: pieces of what the call returns; `x, y = make()`: a project
        # function's tuple, position by position
        position = unpacked_position(node, name.value)
        if position is None:
            return None
        summary = summary_of(node.value.func, scope, ARRAY_WORDS)
        if summary is not None:
            kinds = getattr(summary, "array_kinds_at", ())
            kind = kinds[position[0]] if position[1] == len(kinds) else None
            return Kind(kind, node.value, f"returned by `{summary.name}`") if kind else None
        return array_kind(index, node.value, scope, follow, summary_of, depth + 1)
    if binding.kind == "for" and isinstance(node, cst.For):
        # an item of what the loop goes over: `for piece in t.split(n)`, `for i, piece in enumerate(...)`
        iterable, target = node.iter, node.target
        if isinstance(iterable, cst.Call) and index.resolve(iterable.func, scope) == "enumerate" \
                and iterable.args and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
            iterable, target = iterable.args[0].value, target.elements[1].value
        if not (isinstance(target, cst.Name) and target.value == name.value):
            return None
        whole = array_kind(index, iterable, scope, follow, summary_of, depth + 1)
        return whole if whole is not None and whole.kind != SEQUENCE else None  # a list's items: unknown
    return None


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)
