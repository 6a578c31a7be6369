"""The file names a path expression spells out: the string constants it is built from that name a
file (`"last.pth"`, `"checkpoint_{}.tar"`, the `"/model.pt"` of `f"{out}/model.pt"`), followed
through a name's assignments in its scope. A save and a load whose paths share one read and
write the same file: a fact of the code, whatever the variables are called."""

from __future__ import annotations

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
