"""The file names a path expression spells out: the string constants it is built from that name a
file (`"last.pth"`, `"checkpoint_{}.tar"`, the `"/model.pt"` of `f"{out}/model.pt"`), followed
through a name's assignments in its scope. A save and a load whose paths share one read and
write the same file: a fact of the code, whatever the variables are called."""

from __future__ import annotations

import posixpath

import libcst as cst

from trainlint.model.index import FileIndex, Scope, walk

LOADS = ("torch.load", "torch.serialization.load")


def path_literals(expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> frozenset[str]:
    """The file-name constants of a path expression (a constant with a suffix: `name.ext`)."""
    found: set[str] = set()
    if expr is None or depth > 3:
        return frozenset()
    for node in walk(expr):
        if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str):
            found.add(node.evaluated_value)
        elif isinstance(node, cst.FormattedStringText):
            found.add(node.value)
        elif isinstance(node, cst.Name):
            bindings = scope.lookup(node.value)
            if len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
                found |= path_literals(bindings[0].value, scope, depth + 1)
    return frozenset(name for text in found if (name := _file_name(text)))


def constant_path(expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> str | None:
    """The whole path an expression spells when every piece of it is a constant (`"log/best.pt"`,
    an f-string without placeholders, `"runs/" + "last.pt"`, a name bound once to such a value),
    normalised (`./a//b.pt` is `a/b.pt`); None when any piece is computed at run time. Two
    constant paths that differ name two files, whatever keys their contents share."""
    if expr is None or depth > 3:
        return None
    if isinstance(expr, cst.SimpleString) and isinstance(expr.evaluated_value, str):
        text = expr.evaluated_value
    elif isinstance(expr, cst.FormattedString):
        if not all(isinstance(part, cst.FormattedStringText) for part in expr.parts):
            return None
        text = "".join(part.value for part in expr.parts)
    elif isinstance(expr, cst.ConcatenatedString):
        left, right = constant_path(expr.left, scope, depth), constant_path(expr.right, scope, depth)
        text = left + right if left is not None and right is not None else None
    elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        left, right = constant_path(expr.left, scope, depth), constant_path(expr.right, scope, depth)
        text = left + right if left is not None and right is not None else None
    elif isinstance(expr, cst.Name):
        bindings = scope.lookup(expr.value)
        if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].value is None:
            return None
        text = constant_path(bindings[0].value, scope, depth + 1)
    else:
        return None
    return posixpath.normpath(text) if text else None


def _file_name(text: str) -> str | None:
    """`"/last.ckpt"` -> `last.ckpt`; None for what names no file (a folder, a separator, a word)."""
    name = text.strip().rsplit("/", 1)[-1]
    stem, dot, suffix = name.rpartition(".")
    return name if dot and stem and suffix and " " not in name else None


def load_literals(index: FileIndex) -> frozenset[str]:
    """The file-name constants of every `torch.load` path of a file."""
    found: set[str] = set()
    for site in index.calls_to(*LOADS):
        args = [a for a in site.node.args if a.keyword is None and not a.star]
        if args:
            found |= path_literals(args[0].value, site.scope)
    return frozenset(found)
