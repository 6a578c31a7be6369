"""The checkpoint model's part that finds saved tensor views (TL403)."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model.array_kinds import Kind, array_kind
from trainlint.model.checkpoint_base import Save, string_value
from trainlint.model.index import Scope, dotted_name, walk


# Methods that return a view of part of the receiver's storage: saving it writes the rest too.
_NARROWING_METHODS = {"narrow", "select", "diagonal", "as_strided"}

# Methods and attributes that return a view of all of it, in another shape or order. Saving one writes
# exactly the receiver's storage, so they matter only on top of a narrowing view (`w[:n].T`).
_RESHAPING_METHODS = {"view", "view_as", "expand", "expand_as", "t", "transpose", "permute", "swapaxes",
                      "swapdims", "detach", "contiguous", "requires_grad_", "detach_", "squeeze", "unsqueeze",
                      "flatten", "reshape", "unflatten", "movedim"}
_VIEW_ATTRIBUTES = {"T", "mT", "H", "mH"}
_SPLITTING = {"chunk", "split", "unbind", "tensor_split", "hsplit", "vsplit", "dsplit", "split_with_sizes"}


def _method(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


class SavedViews:
    """Whether a saved tensor is a view of a larger storage, which `torch.save` writes whole (TL403).

    A part of `CheckpointModel` (checkpoints.py), whose `__init__` sets the attributes used here.
    """

    def saved_views(self, save: Save) -> list[tuple[cst.BaseExpression, str, bool]]:
        """Views among what a save writes: (the expression, what kind of view, written inline in
        the `torch.save` call). The object itself, a dict's values, a list's or tuple's items."""
        found: list[tuple[cst.BaseExpression, str, bool]] = []
        if save.obj is None:
            return found
        inline = set(walk(save.node))
        candidates: list[tuple[cst.BaseExpression, Scope]] = [(save.obj, save.scope)]
        content = self.saved_dict(save.obj, save.scope)
        if content is not None:
            candidates = [(value, scope) for _, value, scope in content.items]
        else:
            value = self.value_of(save.obj, save.scope)
            if isinstance(value, (cst.List, cst.Tuple)):
                candidates = [(e.value, save.scope) for e in value.elements if isinstance(e, cst.Element)]
            elif isinstance(value, cst.DictComp):
                candidates = [(value.value, save.scope)]
        for expr, scope in candidates:
            kind = self.view_kind(expr, scope)
            if kind:
                found.append((expr, kind, expr in inline and not isinstance(expr, cst.Name)))
        return found

    def view_kind(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> str | None:
        """What makes `expr` a view sharing a larger storage (`a slice`, `.narrow()`), or None."""
        if depth > 6:
            return None
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            if len(bindings) != 1:
                return None
            binding = bindings[0]
            if binding.value is not None and binding.kind == "assign":
                return self.view_kind(binding.value, scope, depth + 1)
            # `a, b = t.chunk(2)` and `for piece in t.split(n)`: each element is a view
            source = None
            if binding.kind == "assign" and isinstance(binding.node, cst.Assign):
                source = binding.node.value
            elif binding.kind == "for" and isinstance(binding.node, cst.For):
                source = binding.node.iter
                if isinstance(source, cst.Call) and dotted_name(source.func) == "enumerate" and source.args:
                    source = source.args[0].value
            if isinstance(source, cst.Call) and _method(source) in _SPLITTING:
                return f"a `.{_method(source)}()` piece"
            return None
        if isinstance(expr, cst.Subscript):
            base = expr.value
            indices = [e.slice for e in expr.slice]
            if any(isinstance(i, cst.Index) and string_value(i.value) is not None for i in indices):
                return None  # `ckpt["model"]`: a dict lookup
            if isinstance(base, cst.Call) and _method(base) in _SPLITTING:
                return f"a `.{_method(base)}()` piece"
            if isinstance(base, cst.Name) and self._is_split_result(base, scope):
                return f"a piece of `{self.text(base)}`"
            if self._is_sequence(base, scope):
                return None
            if not all(self._basic_index(i, scope) for i in indices):
                return None  # a tensor or list index is advanced indexing: it copies
            if any(isinstance(i, cst.Slice) for i in indices) or len(indices) > 1:
                return f"the slice `{self.text(expr)}`"
            if self._is_tensor(base, scope):
                return f"the element `{self.text(expr)}` of a larger tensor"
            return None
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _VIEW_ATTRIBUTES:
                return self.view_kind(expr.value, scope, depth + 1)
            return None
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            if method in _NARROWING_METHODS:
                return f"the view `{self.text(expr)}`"
            if method in _RESHAPING_METHODS:  # `.detach()`/`.contiguous()` can hand back the same view
                return self.view_kind(expr.func.value, scope, depth + 1)
        return None

    def storage_kind(self, expr: cst.BaseExpression, scope: Scope) -> Kind | None:
        """Whose storage a saved view looks into: a torch tensor's (which `torch.save` writes
        whole), a NumPy array's or a list's (whose views pickle only their own elements), or None
        when what made it cannot be told (`array_kinds`)."""
        return array_kind(self.index, expr, scope, lambda name, where: self.value_of(name, where))

    def _basic_index(self, index, scope: Scope) -> bool:
        """A slice, an int, `None` or `...`: basic indexing, which returns a view."""
        if isinstance(index, cst.Slice):
            return True
        value = index.value
        if isinstance(value, cst.UnaryOperation):
            value = value.expression
        if isinstance(value, (cst.Integer, cst.Ellipsis)) or (isinstance(value, cst.Name) and value.value == "None"):
            return True
        if isinstance(value, cst.Name):  # `for i in range(n)`
            bindings = scope.lookup(value.value)
            return len(bindings) == 1 and bindings[0].kind == "for" and isinstance(bindings[0].node, cst.For) \
                and isinstance(bindings[0].node.iter, cst.Call) and dotted_name(bindings[0].node.iter.func) == "range"
        return False

    def _is_split_result(self, name: cst.Name, scope: Scope) -> bool:
        value = self.value_of(name, scope)
        return isinstance(value, cst.Call) and _method(value) in _SPLITTING

    def _is_sequence(self, base: cst.BaseExpression, scope: Scope) -> bool:
        """A list, tuple, string or range: slicing it copies."""
        value = self.value_of(base, scope)
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp, cst.SimpleString, cst.FormattedString,
                              cst.ConcatenatedString, cst.Dict, cst.DictComp, cst.GeneratorExp)):
            return True
        if isinstance(value, cst.Call):
            name = self.index.resolve(value.func, scope) or ""
            return name in ("list", "tuple", "sorted", "range", "str", "bytes", "reversed")
        if isinstance(value, cst.Name):
            return any(b.annotation is not None and re.match(r"(typing\.)?(List|Tuple|Sequence|list|tuple|str)\b",
                                                               self.text(b.annotation))
                       for b in scope.lookup(value.value))
        return False

    def _is_tensor(self, base: cst.BaseExpression, scope: Scope) -> bool:
        value = self.value_of(base, scope)
        if isinstance(value, cst.Attribute) and value.attr.value in ("weight", "bias", "data", "grad"):
            return True
        if isinstance(value, cst.Call):
            name = self.index.resolve(value.func, scope) or ""
            if name.startswith("torch.") and not name.startswith(("torch.nn.", "torch.optim", "torch.utils")):
                return True
            if name in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
                return True
            return _method(value) in ("detach", "clone", "contiguous", "float", "half", "cpu")
        if isinstance(value, cst.Name):
            return any(b.annotation is not None and re.search(r"\bTensor\b|Parameter", self.text(b.annotation))
                       for b in scope.lookup(value.value))
        return False
