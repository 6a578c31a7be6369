"""Rename a program's own names to neutral ones (`v1`, `f2`, `C3`) with LibCST, keeping its behaviour:
every local and module variable, parameter, attribute of `self` and function or class the file
defines. Imports, library calls, attributes of other objects, keyword names of calls into
libraries, methods (a method's name is a protocol: `forward`, `step`, `__init__`) stay.

Used by tests/test_rename.py: a premise proven from code survives this; one taken from a name
does not.
"""

from __future__ import annotations

import builtins

import libcst as cst

_KEEP = frozenset(dir(builtins)) | {"self", "cls", "__name__", "__file__", "__all__", "_"}


def _targets(node: cst.BaseExpression):
    if isinstance(node, cst.Name):
        yield node
    elif isinstance(node, (cst.Tuple, cst.List)):
        for element in node.elements:
            yield from _targets(element.value)
    elif isinstance(node, cst.StarredElement):
        yield from _targets(node.value)


class _Collect(cst.CSTVisitor):
    """What the file binds (by name), what it imports, its functions, classes, methods and the
    attributes it sets on `self`."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.functions: set[str] = set()
        self.classes: set[str] = set()
        self.methods: set[str] = set()
        self.imported: set[str] = set()
        self.self_attributes: set[str] = set()
        self.class_level: set[str] = set()
        self._depth_in_class: list[bool] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.add(node.name.value)
        for statement in node.body.body:  # names bound in a class body are attributes
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, (cst.Assign, cst.AnnAssign)):
                        targets = small.targets if isinstance(small, cst.Assign) else [small]
                        for target in targets:
                            self.class_level |= {n.value for n in _targets(target.target)}
            elif isinstance(statement, cst.FunctionDef):
                self.methods.add(statement.name.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.add(node.name.value)
        params = node.params
        for param in [*params.posonly_params, *params.params, *params.kwonly_params]:
            self.bound.add(param.name.value)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                self.bound.add(star.name.value)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        for param in node.params.params:
            self.bound.add(param.name.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind(target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind(node.asname.name)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._bind(node.name.name)

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        if node.asname is not None and isinstance(node.asname.name, cst.Name):
            self.imported.add(node.asname.name.value)
        else:
            name = node.name
            while isinstance(name, cst.Attribute):
                name = name.value
            self.imported.add(name.value)

    def _bind(self, target: cst.BaseExpression) -> None:
        for name in _targets(target):
            self.bound.add(name.value)
        for node in ([target] if not isinstance(target, (cst.Tuple, cst.List)) else [e.value for e in target.elements]):
            if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
                self.self_attributes.add(node.attr.value)


class _Rename(cst.CSTTransformer):
    def __init__(self, names: dict[str, str], attributes: dict[str, str], project_callables: set[str]) -> None:
        self.names = names
        self.attributes = attributes
        self.project_callables = project_callables

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.names.get(updated.value, updated.value))

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        # `self.<attr>` is renamed (its value, `self`, is never renamed itself), and so is the same
        # attribute read through a variable of the file (`learner.net` of a class setting `self.net`)
        if isinstance(original.value, cst.Name) and original.attr.value in self.attributes and \
                (original.value.value == "self" or original.value.value in self.names):
            return updated.with_changes(attr=cst.Name(self.attributes[original.attr.value]))
        return updated.with_changes(attr=original.attr)  # an attribute of anything else stays

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        func = original.func
        callee = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
        project = callee in self.project_callables
        args = []
        for arg in updated.args:
            if arg.keyword is not None:
                keyword = original.args[len(args)].keyword.value
                arg = arg.with_changes(keyword=cst.Name(self.names.get(keyword, keyword) if project else keyword))
            args.append(arg)
        return updated.with_changes(args=args)

    def leave_ImportAlias(self, original: cst.ImportAlias, updated: cst.ImportAlias) -> cst.ImportAlias:
        return original

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        return original

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if original.name.value in self.methods_kept:
            return updated.with_changes(name=original.name)
        return updated

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        return updated


def neutralize(source: str) -> str:
    """`source` with its own names replaced by `v<n>` (variables, parameters, attributes of
    `self`), `f<n>` (functions) and `C<n>` (classes)."""
    module = cst.parse_module(source)
    found = _Collect()
    module.visit(found)
    keep = _KEEP | found.imported | found.methods | found.class_level
    names: dict[str, str] = {}
    counter = 0
    for group, prefix in ((sorted(found.classes), "C"), (sorted(found.functions - found.methods), "f"),
                          (sorted(found.bound), "v")):
        for name in group:
            if name in keep or name in names or name.startswith("__"):
                continue
            counter += 1
            names[name] = f"{prefix}{counter}"
    attributes = {}
    for attr in sorted(found.self_attributes - found.methods):
        counter += 1
        attributes[attr] = f"v{counter}"
    # keyword names of calls into the file's own functions, classes (their `__init__`) and methods
    renamer = _Rename(names, attributes, found.functions | found.classes | found.methods)
    renamer.methods_kept = found.methods
    return module.visit(renamer).code
