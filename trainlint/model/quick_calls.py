"""Method calls that provably run with grad recording on, read from Python's own parse of a file.

`Summaries.method_called_with_grad` asks this before LibCST parses a project file for the
question "does every call of a method named `m` in this import component run under no_grad?"
(`modes._called_elsewhere_without_grad`): one call with grad on answers no, and such a call is
usually in the first file read. Python's parse costs about a tenth of LibCST's and the answer is
kept per content hash, so the other file is parsed by LibCST only when this cannot tell.

What is proven is exactly what `summaries._Summariser.method_calls` would say of the call (see
`GradOnCalls`), never a guess: a call this module cannot prove to be grad-on is left to the
summary.
"""

from __future__ import annotations

import ast
import re

from trainlint.model.grad_mode import GRAD_SETTERS

#: the names a grad switch (`torch.set_grad_enabled(False)` as a statement) is spelled with: a file
#: holding none of them has no call that resolves to one (`grad_mode._switch_places` is empty)
_SWITCH_WORDS = tuple(sorted({name.rsplit(".", 1)[-1] for name in GRAD_SETTERS}))
_MAX_CALLER_DEPTH = 2  # as `_Summariser._grad_off_at`: the callers of callers, no further


class GradOnCalls:
    """The calls `x.m(...)` of one file that `_Summariser.method_calls` reports with
    `grad_off=False` and no `receiver_classes`, by method name, with the name of the function
    holding each (None: the module's own code).

    `_Summariser._grad_off_at(call, function)` is False when all of these hold, each checked here
    on Python's tree (whose statements, `with` blocks, defs and calls are LibCST's, node for node):
    - no `with` (nor `async with`) between the call and its function (or the module): no grad
      context can decide (one whose items are not grad contexts is not told apart: not proven);
    - no grad switch in the whole file (`_SWITCH_WORDS` absent from its text): `switched_grad`
      finds none;
    - the function has no decorator: `decorator_grad` is None;
    - every call in the file that may run the function (`helper(...)` or `self.helper(...)` by its
      name: a superset of `FileIndex.callers`, which resolves only these two forms) is itself
      proven grad-on the same way, down to the same depth: then not all its same-file callers run
      with grad off (none, or one with grad on).
    The call is directly in the function's body (not in a nested lambda or class body, a
    decorator, a default or an annotation), or in the module's own code outside any class. Its
    receiver is not a bare name (`self.net.m()`, `f(x).m()`: `_receiver_classes` is empty), or is
    a parameter of its function (`self.m()`, `model.m()` for a parameter `model`: a parameter
    binding makes it empty too)."""

    def __init__(self, tree: ast.Module, text: str) -> None:
        #: every identifier the code spells: a name, an attribute, a name an import binds or
        #: imports (`from torch import load as read`: both); what resolves to `torch.load` spells
        #: `load` in one of these places (`Summaries.spelled`)
        self.identifiers = frozenset(_identifiers(tree))
        self._switches = any(word in text for word in _SWITCH_WORDS)
        # method name -> [(function or None, call)] for calls in a provable position
        self._method_calls: dict[str, list[ast.AST | None]] = {}
        # function name -> [(function holding the call or None, position provable)], for
        # `name(...)` and `self.name(...)`: the calls that may run a function of that name
        self._runs: dict[str, list[tuple[ast.AST | None, bool]]] = {}
        self._proven: dict[tuple[int, int], bool] = {}
        if not self._switches:
            self._walk(tree.body, None, True)

    def callers(self, method: str) -> list[str | None]:
        """The names of the functions (None: module code) holding a call `x.<method>(...)` proven
        to run with grad on, as `_Summariser.method_calls` reports them (`CallArguments.caller`)."""
        return [function.name if function is not None else None
                for function in self._method_calls.get(method, ())
                if self._grad_on(function, 0)]

    def _grad_on(self, function: ast.AST | None, depth: int) -> bool:
        if function is None:
            return True  # the module's code, no `with` around, no switch: recording is on
        key = (id(function), depth)
        if key not in self._proven:
            self._proven[key] = False  # (a call of itself is not a proof)
            self._proven[key] = not function.decorator_list and (depth >= _MAX_CALLER_DEPTH or all(
                provable and self._grad_on(holder, depth + 1) for holder, provable in self._runs.get(function.name, ())))
        return self._proven[key]

    def _walk(self, nodes, function, provable: bool, params: frozenset[str] = frozenset()) -> None:
        """Visit `nodes` (statements or expressions) held by `function` (None: module code);
        `provable`: a call here is directly in its function's body with no `with` around it."""
        stack = [(node, provable) for node in reversed(nodes)]
        while stack:
            node, here = stack.pop()
            kind = type(node)
            if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                outer = [*node.decorator_list, *_annotations_and_defaults(node)]
                for child in reversed(outer):  # evaluated where the def is, not in it
                    stack.append((child, False))
                args = node.args
                names = frozenset(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
                self._walk(node.body, node, True, names)
                continue
            if kind is ast.ClassDef:
                for child in reversed([*node.decorator_list, *node.bases, *node.keywords, *node.body]):
                    stack.append((child, False))  # a class body's calls: not proven
                continue
            if kind is ast.Lambda:
                here = False
            elif kind is ast.With or kind is ast.AsyncWith:
                here = False
            elif kind is ast.Call:
                func = node.func
                if type(func) is ast.Attribute:
                    receiver = func.value
                    if here and (type(receiver) is not ast.Name or receiver.id in params):
                        self._method_calls.setdefault(func.attr, []).append(function)
                    if type(receiver) is ast.Name and receiver.id == "self":
                        self._runs.setdefault(func.attr, []).append((function, here))
                elif type(func) is ast.Name:
                    self._runs.setdefault(func.id, []).append((function, here))
            for child in reversed(list(ast.iter_child_nodes(node))):
                stack.append((child, here))


def _identifiers(tree: ast.Module):
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.Name:
            yield node.id
        elif kind is ast.Attribute:
            yield node.attr
        elif kind is ast.alias:
            yield from node.name.split(".")
            if node.asname:
                yield node.asname
        elif kind is ast.ImportFrom and node.module:
            yield from node.module.split(".")


def _annotations_and_defaults(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    args = node.args
    found = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
        if arg is not None and arg.annotation is not None:
            found.append(arg.annotation)
    if node.returns is not None:
        found.append(node.returns)
    return found


def grad_on_calls(text: str, path: str) -> GradOnCalls | None:
    """`GradOnCalls` of a file's text; None when Python cannot parse it (nothing is proven)."""
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    try:
        return GradOnCalls(tree, text)
    except RecursionError:
        return None
