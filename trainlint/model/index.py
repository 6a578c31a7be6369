"""The one traversal of a file: scopes, bindings, calls, functions, loops and parent links.

LibCST's visitor machinery rebuilds nodes as it goes, which costs more than the parse itself on
large files. This walk reads each node's dataclass fields directly and skips the whitespace,
comma and parenthesis fields that no rule looks at.
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field
from typing import Iterator

import libcst as cst

from trainlint.parsing import dotted_name  # noqa: F401 - the model's modules import it from here

_SKIP_FIELD_WORDS = ("whitespace", "leading_lines", "lines_after", "comma", "lpar", "rpar",
                     "semicolon", "header", "footer", "colon", "equal", "star", "dot",
                     "lbracket", "rbracket", "lbrace", "rbrace", "asynchronous", "newline",
                     "first_line", "last_line", "empty_lines", "between")
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(cls: type) -> tuple[str, ...]:
    fields = _CHILD_FIELDS.get(cls)
    if fields is None:
        fields = tuple(
            f.name
            for f in dataclasses.fields(cls)
            if not any(word in f.name for word in _SKIP_FIELD_WORDS)
        )
        _CHILD_FIELDS[cls] = fields
    return fields


_IS_NODE: dict[type, bool] = {}


def _is_node_type(cls: type) -> bool:
    # CSTNode is an ABC, and isinstance against an ABC is slow; this walk runs on every node.
    known = _IS_NODE.get(cls)
    if known is None:
        known = _IS_NODE[cls] = issubclass(cls, cst.CSTNode)
    return known


def iter_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Direct children that carry code (no whitespace, commas or parentheses), in source order.

    A list rather than a generator: every model walks with this, and a generator's resumption per
    child cost more than the list; the lookups are inlined rather than called per child."""
    known = _IS_NODE
    fields = _CHILD_FIELDS.get(type(node))
    children = []
    for name in fields if fields is not None else child_fields(type(node)):
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            for item in value:
                is_node = known.get(type(item))
                if is_node or (is_node is None and _is_node_type(type(item))):
                    children.append(item)
        else:
            is_node = known.get(kind)
            if is_node or (is_node is None and _is_node_type(kind)):
                children.append(value)
    return children


def main_guard(test: cst.BaseExpression) -> bool:
    """`__name__ == "__main__"` (either way round): the test of a script's entry block."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal)):
        return False
    sides = (test.left, test.comparisons[0].comparator)
    return any(isinstance(s, cst.Name) and s.value == "__name__" for s in sides) and any(
        isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__" for s in sides)


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every code-carrying node under `node` (itself included), depth first, in source order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(iter_children(current)))


#: what `walk_scope` does not descend into (concrete classes: `type(x) in` skips ABCMeta)
NESTED_TYPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})


def assigned_targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """The targets an assignment statement writes (`a = b = v`: both, `a += v`, `a: int = v`); none
    for any other node."""
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    if isinstance(node, (cst.AugAssign, cst.AnnAssign)):
        return [node.target]
    return []


def walk_scope(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Nodes under `node`, not descending into nested defs, classes or lambdas (`FileIndex.scope_nodes`
    slices the same nodes from the index)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if current is not node and type(current) in NESTED_TYPES:
            continue
        stack.extend(reversed(iter_children(current)))


# Node types that can bind a name (besides defs, classes, for-loops and parameters).
_BINDING_NODES = frozenset({cst.Assign, cst.AnnAssign, cst.AugAssign, cst.NamedExpr, cst.WithItem,
                            cst.Import, cst.ImportFrom})


# Where a name's scope ends, and the nodes that run whatever they hold each time they run.
_SCOPE_BOUNDARIES = (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp,
                     cst.GeneratorExp)
_STRAIGHT_LINE = (cst.Assign, cst.AnnAssign, cst.AssignTarget, cst.WithItem, cst.With, cst.SimpleStatementLine,
                  cst.IndentedBlock, cst.Tuple, cst.List, cst.Element, cst.StarredElement)


@dataclass(eq=False)
class Binding:
    """One way a name got a value in a scope."""

    name: str
    kind: str  # import | assign | param | def | class | for | with | augassign
    node: cst.CSTNode
    value: cst.BaseExpression | None = None  # the assigned expression, when there is one
    qualname: str | None = None  # for imports: what the name refers to
    annotation: cst.BaseExpression | None = None


@dataclass(eq=False)
class Scope:
    kind: str  # module | class | function
    node: cst.CSTNode
    parent: "Scope | None"
    name: str = ""
    bindings: dict[str, list[Binding]] = field(default_factory=dict)

    def bind(self, binding: Binding) -> None:
        self.bindings.setdefault(binding.name, []).append(binding)

    def class_scope(self) -> "Scope | None":
        """The innermost class whose body holds this scope (for a method: its class)."""
        scope: Scope | None = self
        while scope is not None and scope.kind != "class":
            scope = scope.parent
        return scope

    @property
    def class_name(self) -> str | None:
        found = self.class_scope()
        return found.name if found is not None else None

    def lookup(self, name: str) -> list[Binding]:
        """Bindings of `name` as Python resolves it: this scope, enclosing functions, module."""
        scope: Scope | None = self
        first = True
        while scope is not None:
            if (first or scope.kind != "class") and name in scope.bindings:
                return scope.bindings[name]
            first = False
            scope = scope.parent
        return []


@dataclass(eq=False)
class FunctionInfo:
    node: cst.FunctionDef
    name: str
    class_name: str | None
    scope: Scope  # the function's own scope

    @property
    def qualname(self) -> str:
        return f"{self.class_name}.{self.name}" if self.class_name else self.name


@dataclass(eq=False)
class CallSite:
    node: cst.Call
    scope: Scope
    function: FunctionInfo | None  # the function or method the call is in (None: module level)


class FileIndex:
    """Facts gathered in one pass over a module; rules and models query it."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.module_scope = Scope("module", module, None)
        self.scopes: list[Scope] = [self.module_scope]
        self.scope_of_node: dict[cst.CSTNode, Scope] = {module: self.module_scope}
        self.functions: list[FunctionInfo] = []
        self.function_of_node: dict[cst.CSTNode, FunctionInfo] = {}
        self.classes: dict[str, cst.ClassDef] = {}
        #: self.<attr> assignments per class: class name -> attr -> assigned values
        self.class_attributes: dict[str, dict[str, list[cst.BaseExpression]]] = {}
        #: class -> `self.<attr>` -> (statement, position) of each `self.a, self.b = call(...)`
        self.unpacked_attributes: dict[str, dict[str, list[tuple[cst.Assign, int]]]] = {}
        self.calls: list[CallSite] = []
        self.loops: list[cst.For | cst.While] = []
        #: every node in `walk` order (pre-order, source order) and each node's place in it: the
        #: nodes under a node are the slice from its place to its subtree's end (`subtree`)
        self.nodes: list[cst.CSTNode] = []
        self.place: dict[cst.CSTNode, int] = {}
        self._followers: list[cst.CSTNode | None] = []  # the node after each node's subtree
        self._nested_places: list[int] = []  # places of the defs, classes and lambdas
        self._call_places: list[int] = []  # the place of each of `calls`
        # per place, the scope and the function whose code holds the node (`scope_at`, `function_at`)
        self._scope_by_place: list[Scope] = []
        self._function_by_place: list[FunctionInfo | None] = []
        self._callers: dict[cst.CSTNode, list[CallSite]] | None = None
        self._class_calls: dict[str, list[CallSite]] | None = None
        self._functions_by_name: dict[str, list[FunctionInfo]] | None = None
        self._aliases: dict[str | None, list[str]] | None = None
        #: the file's view of its project (`trainlint.model.linker.Linker`), set by whoever knows it
        self.linker = None
        self._loop_bindings: dict[int, tuple[list[Binding], dict]] = {}
        self._build()

    # -- building ---------------------------------------------------------------------------
    def _build(self) -> None:
        parents = self.parents
        # (node, scope, function, class name); children inherit the context of their parent
        stack: list[tuple[cst.CSTNode, Scope, FunctionInfo | None, str | None]] = [
            (self.module, self.module_scope, None, None)
        ]
        nodes, place, followers = self.nodes, self.place, self._followers
        scopes, functions = self._scope_by_place, self._function_by_place
        while stack:
            node, scope, function, class_name = stack.pop()
            place[node] = len(nodes)
            nodes.append(node)
            scopes.append(scope)
            functions.append(function)
            # what the stack holds under a node's children is what comes after its subtree
            followers.append(stack[-1][0] if stack else None)
            child_scope, child_function, child_class = scope, function, class_name
            # `type(...) is` rather than isinstance: these node classes are concrete, and
            # isinstance on LibCST nodes goes through ABCMeta, which is slow on every node
            kind = type(node)
            if kind is cst.FunctionDef:
                child_scope = Scope("function", node, scope, node.name.value)
                self.scopes.append(child_scope)
                self.scope_of_node[node] = child_scope
                self._nested_places.append(place[node])
                child_function = FunctionInfo(node, node.name.value, class_name, child_scope)
                self.functions.append(child_function)
                self.function_of_node[node] = child_function
                scope.bind(Binding(node.name.value, "def", node))
                self._bind_params(node.params, child_scope)
                child_class = None
            elif kind is cst.ClassDef:
                child_scope = Scope("class", node, scope, node.name.value)
                self.scopes.append(child_scope)
                self.scope_of_node[node] = child_scope
                self.classes[node.name.value] = node
                self._nested_places.append(place[node])
                scope.bind(Binding(node.name.value, "class", node))
                child_class = node.name.value
            elif kind is cst.Call:
                self.calls.append(CallSite(node, scope, function))
                self._call_places.append(place[node])
            elif kind is cst.For or kind is cst.While:
                self.loops.append(node)
                if kind is cst.For:
                    self._bind_target(node.target, scope, "for", node, None, function)
            elif kind in _BINDING_NODES:
                self._record_binding(node, scope, function)
            elif kind is cst.Lambda:
                self._nested_places.append(place[node])
            children = iter_children(node)
            for child in reversed(children):
                parents[child] = node
                stack.append((child, child_scope, child_function, child_class))

    def _bind_params(self, params: cst.Parameters, scope: Scope) -> None:
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            scope.bind(Binding(param.name.value, "param", param, param.default,
                               annotation=param.annotation.annotation if param.annotation else None))
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                scope.bind(Binding(star.name.value, "param", star))

    def _record_binding(self, node: cst.CSTNode, scope: Scope, function: FunctionInfo | None) -> None:
        if isinstance(node, cst.Assign):
            for target in node.targets:
                self._bind_target(target.target, scope, "assign", node, node.value, function)
        elif isinstance(node, cst.AnnAssign):
            self._bind_target(node.target, scope, "assign", node, node.value, function,
                              annotation=node.annotation.annotation)
        elif isinstance(node, cst.AugAssign):
            self._bind_target(node.target, scope, "augassign", node, node.value, function)
        elif isinstance(node, cst.NamedExpr):
            self._bind_target(node.target, scope, "assign", node, node.value, function)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            self._bind_target(node.asname.name, scope, "with", node, node.item, function)
        elif isinstance(node, cst.Import):
            for alias in node.names:
                full = dotted_name(alias.name)
                if full is None:
                    continue
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    scope.bind(Binding(alias.asname.name.value, "import", node, qualname=full))
                else:
                    top = full.split(".")[0]
                    scope.bind(Binding(top, "import", node, qualname=top))
        elif isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
            base = dotted_name(node.module) if node.module is not None else ""
            base = "." * len(node.relative) + (base or "")
            for alias in node.names:
                name = dotted_name(alias.name)
                if name is None:
                    continue
                local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
                qual = f"{base}.{name}" if base and not base.endswith(".") else f"{base}{name}"
                scope.bind(Binding(local, "import", node, qualname=qual))

    def _bind_target(self, target: cst.BaseExpression, scope: Scope, kind: str, node: cst.CSTNode,
                     value: cst.BaseExpression | None, function: FunctionInfo | None,
                     annotation: cst.BaseExpression | None = None) -> None:
        if isinstance(target, cst.Name):
            scope.bind(Binding(target.value, kind, node, value, annotation=annotation))
        elif isinstance(target, (cst.Tuple, cst.List)):
            values: list[cst.BaseExpression | None] = [None] * len(target.elements)
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
                values = [e.value for e in value.elements]
            elif isinstance(value, cst.Call) and kind == "assign" and function is not None and function.class_name:
                # `self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(...)`: each
                # attribute is an element of what the call returns (`unpacked_attributes`)
                for position, element in enumerate(target.elements):
                    attr = element.value
                    if (isinstance(attr, cst.Attribute) and isinstance(attr.value, cst.Name)
                            and attr.value.value == "self"):
                        unpacked = self.unpacked_attributes.setdefault(function.class_name, {})
                        unpacked.setdefault(attr.attr.value, []).append((node, position))
            for element, element_value in zip(target.elements, values):
                self._bind_target(element.value, scope, kind, node, element_value, function)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value, scope, kind, node, None, function)
        elif (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
              and target.value.value == "self" and function is not None and function.class_name
              and value is not None and kind == "assign"):
            attrs = self.class_attributes.setdefault(function.class_name, {})
            attrs.setdefault(target.attr.value, []).append(value)

    # -- queries ----------------------------------------------------------------------------
    def subtree(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """`list(walk(node))`, sliced from the pre-order list instead of walked: many models and
        rules read every node of a function (or of a long script's module) once each."""
        start = self.place.get(node)
        if start is None:  # not in this module's tree (a node built by a rule)
            return list(walk(node))
        return self.nodes[start:self.subtree_end(start)]

    def scope_nodes(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """The nodes under `node` without those inside a nested def, class or lambda (the nested
        node itself included), in `walk` order: `walk_scope`, sliced."""
        segments = self._scope_segments(node)
        if segments is None:  # a node built by a rule: walked
            return list(walk_scope(node))
        nodes = self.nodes
        if len(segments) == 1:
            return nodes[segments[0][0]:segments[0][1]]
        return [n for start, stop in segments for n in nodes[start:stop]]

    def calls_under(self, node: cst.CSTNode) -> list[cst.Call]:
        """The calls of `scope_nodes(node)`, in source order (`training.calls_in`, looked up)."""
        segments = self._scope_segments(node)
        if segments is None:
            return [n for n in walk_scope(node) if type(n) is cst.Call]
        places, calls = self._call_places, self.calls
        found = []
        for start, stop in segments:
            found.extend(site.node for site in calls[bisect.bisect_left(places, start):bisect.bisect_left(places, stop)])
        return found

    def _scope_segments(self, node: cst.CSTNode) -> list[tuple[int, int]] | None:
        """[start, stop) ranges of places: `node`'s subtree less the insides of nested defs."""
        start = self.place.get(node)
        if start is None:
            return None
        end = self.subtree_end(start)
        nested = self._nested_places
        segments = []
        cursor = start
        at = bisect.bisect_right(nested, start)
        while at < len(nested) and nested[at] < end:
            inner = nested[at]
            segments.append((cursor, inner + 1))
            cursor = self.subtree_end(inner)
            at = bisect.bisect_left(nested, cursor, at + 1)
        segments.append((cursor, end))
        return segments

    def subtree_end(self, start: int) -> int:
        """One past the place of the last node under the node at place `start`: the place of the
        node that follows its subtree in pre-order."""
        follower = self._followers[start]
        return self.place[follower] if follower is not None else len(self.nodes)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self.parents.get(node)
        while current is not None:
            yield current
            current = self.parents.get(current)

    def scope_at(self, node: cst.CSTNode) -> Scope:
        """The scope whose code contains `node` (a def's own name and decorators included): the
        scope of its nearest def or class above it, recorded for every node by `_build`."""
        at = self.place.get(node)
        return self._scope_by_place[at] if at is not None else self.module_scope

    def function_at(self, node: cst.CSTNode) -> FunctionInfo | None:
        """The function or method whose code holds `node` (its nearest def above it), if any."""
        at = self.place.get(node)
        return self._function_by_place[at] if at is not None else None

    def enclosing_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        """The innermost statement (simple or compound) that holds `node`."""
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(current, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            current = self.parents.get(current)
        return current or node

    def resolve(self, expr: cst.BaseExpression, scope: Scope) -> str | None:
        """The dotted name an expression refers to through imports (`t.load` -> `torch.load`).

        None when the name is bound to something other than an import in the scope that resolves
        it (a local `def load` shadows `from torch import load`). A name bound nowhere is taken as
        a global or builtin of that name.
        """
        attributes = []  # a loop, not recursion: attribute chains can be thousands long
        # `type(...) is`: LibCST's node classes are concrete, and isinstance goes through ABCMeta
        while type(expr) is cst.Attribute:
            attributes.append(expr.attr.value)
            expr = expr.value
        if type(expr) is not cst.Name:
            return None
        bindings = scope.lookup(expr.value)
        if not bindings:
            base = expr.value
        elif all(b.kind == "import" for b in bindings):
            base = bindings[-1].qualname
        elif attributes:
            base = self._module_bound(bindings)
        else:
            return None
        return ".".join([base, *reversed(attributes)]) if base else None

    def _module_bound(self, bindings: list[Binding]) -> str | None:
        """The module a name holds when it is read for an attribute (`torch.no_grad`) and its
        bindings other than imports are a module by other means or a placeholder:
        - `torch = importlib.import_module("torch")` / `__import__("torch")`;
        - `torch = _torch()`, a function of this file whose every return is a module it imports
          (`import torch` then `return torch`: a lazy import);
        - `torch = None` (the `except ImportError:` of an optional import): `None` has no
          attributes, so a read of `torch.no_grad` is a read of the module when the code runs.
        All the module bindings must agree; None otherwise."""
        modules = set()
        for binding in bindings:
            if binding.kind == "import":
                modules.add(binding.qualname)
            elif binding.kind == "assign" and isinstance(binding.value, cst.Name) and binding.value.value == "None":
                continue
            elif binding.kind == "assign" and isinstance(binding.value, cst.Call):
                modules.add(self._imported_by_call(binding.value))
            elif binding.kind == "assign" and binding.value is None and isinstance(binding.node, cst.Assign) \
                    and isinstance(binding.node.value, cst.Call):
                # `torch, nn = _deps()`: the element of what a lazy-import helper returns
                position = unpacked_position(binding.node, binding.name)
                if position is None:
                    return None
                modules.add(self._imported_by_call(binding.node.value, position))
            else:
                return None
        return modules.pop() if len(modules) == 1 and None not in modules else None

    def _imported_by_call(self, call: cst.Call, position: tuple[int, int] | None = None) -> str | None:
        """`importlib.import_module("m")`, `__import__("m")`, or `f()` for a module-level `def f` of
        this file whose every return is a module its body imports."""
        args = call.args
        func = call.func
        # read without `resolve`, which would come back here for `torch = torch.compile(...)`
        importer = isinstance(func, cst.Name) and func.value == "__import__" or \
            isinstance(func, cst.Attribute) and func.attr.value == "import_module" and isinstance(func.value, cst.Name) \
            and any(b.kind == "import" and b.qualname == "importlib" for b in self.module_scope.bindings.get(func.value.value, []))
        if importer and position is None:
            if len(args) == 1 and isinstance(args[0].value, cst.SimpleString) and args[0].keyword is None:
                name = args[0].value.evaluated_value
                return name if isinstance(name, str) and name.replace(".", "").replace("_", "").isalnum() else None
            return None
        if args or not isinstance(call.func, cst.Name):
            return None
        defs = self.module_scope.bindings.get(call.func.value, [])
        if len(defs) != 1 or defs[0].kind != "def" or not isinstance(defs[0].node, cst.FunctionDef):
            return None
        function = defs[0].node
        memo = self.__dict__.setdefault("_lazy_imports", {})
        if (function, position) not in memo:
            memo[function, position] = self._returned_module(function, position)
        return memo[function, position]

    def _returned_module(self, function: cst.FunctionDef, position: tuple[int, int] | None) -> str | None:
        inner = self.scope_of_node.get(function)
        returns = [n for n in walk(function.body) if isinstance(n, cst.Return)]
        if inner is None or not returns:
            return None
        modules = set()
        for ret in returns:
            value = ret.value
            if position is not None:  # the element of a returned tuple of as many elements
                at, count = position
                elements = value.elements if isinstance(value, cst.Tuple) else ()
                if len(elements) != count or any(isinstance(e, cst.StarredElement) for e in elements):
                    return None
                value = elements[at].value
            if not isinstance(value, cst.Name):
                return None
            found = inner.bindings.get(value.value, [])
            if not found or not all(b.kind == "import" for b in found):
                return None
            modules.add(found[-1].qualname)
        return modules.pop() if len(modules) == 1 else None

    def reaching_bindings(self, use: cst.CSTNode, name: str, scope: Scope) -> list[Binding]:
        """`scope.lookup(name)` narrowed to the bindings that can reach `use` through loops: when
        the innermost loop around `use` assigns the name unconditionally before `use` in its body,
        the bindings outside that loop are overwritten on every iteration before `use` runs.
        (Without this, a file of N loops that each assign `loss` follows N bindings at each use.)"""
        bindings = scope.lookup(name)
        if len(bindings) < 2:
            return bindings
        loop, position = self._loop_position(use)
        if loop is None:
            return self._after_last_kill(use, bindings)
        inside = self._bindings_by_loop(bindings).get(loop)
        if not inside or not any(kills and at < position for _, at, kills in inside):
            return self._after_last_kill(use, bindings)
        return self._after_last_kill(use, [binding for binding, _, _ in inside])

    def _after_last_kill(self, use: cst.CSTNode, bindings: list[Binding]) -> list[Binding]:
        """`bindings` narrowed by the nearest plain assignment of the name that runs on every way to
        `use`: a statement of a block around `use`, written before it there. The bindings before
        it are overwritten (`loss = loss_fn(x)` in one branch, then `loss = loss.sum() / n` and
        `loss.backward()`: the backward sees the last); those from it to `use` are kept, and a
        binding after `use` can come back to it only through a loop that enters the block at its
        start, past that assignment again."""
        if len(bindings) < 2:
            return bindings
        statement_of = {}
        for binding in bindings:
            if isinstance(binding.node, cst.Assign):
                statement_of.setdefault(id(self.parents.get(binding.node)), binding)
        if not statement_of:
            return bindings
        child = use
        for ancestor in self.ancestors(use):
            if isinstance(ancestor, _SCOPE_BOUNDARIES):
                break
            if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
                body = list(ancestor.body)
                position = next((i for i, s in enumerate(body) if s is child), None)
                for at in range(position - 1 if position is not None else -1, -1, -1):
                    if id(body[at]) in statement_of:
                        span = {id(s) for s in body[at:position + 1]}
                        return [b for b in bindings
                                if any(id(a) in span for a in (b.node, *self.ancestors(b.node)))]
            child = ancestor
        return bindings

    def _loop_position(self, node: cst.CSTNode) -> tuple[cst.For | cst.While | None, int]:
        """The innermost loop whose body holds `node` (in the same scope) and the index, in that
        body, of the statement holding `node`."""
        child = node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.IndentedBlock) and isinstance(self.parents.get(ancestor), (cst.For, cst.While)) \
                    and self.parents[ancestor].body is ancestor:
                return self.parents[ancestor], next(i for i, s in enumerate(ancestor.body) if s is child)
            if isinstance(ancestor, _SCOPE_BOUNDARIES):
                break
            child = ancestor
        return None, -1

    def _bindings_by_loop(self, bindings: list[Binding]) -> dict[cst.CSTNode, list[tuple[Binding, int, bool]]]:
        """For each loop around some of `bindings`: (binding, index of its statement in the loop's
        body, whether it assigns the name on every pass through that statement)."""
        cached = self._loop_bindings.get(id(bindings))
        if cached is not None and cached[0] is bindings:
            return cached[1]
        by_loop: dict[cst.CSTNode, list[tuple[Binding, int, bool]]] = {}
        for binding in bindings:
            kills = isinstance(binding.node, (cst.Assign, cst.WithItem)) or \
                (isinstance(binding.node, cst.AnnAssign) and binding.node.value is not None)
            child = binding.node
            for ancestor in self.ancestors(binding.node):
                parent = self.parents.get(ancestor)
                if isinstance(ancestor, cst.IndentedBlock) and isinstance(parent, (cst.For, cst.While)) \
                        and parent.body is ancestor:
                    at = next(i for i, s in enumerate(ancestor.body) if s is child)
                    by_loop.setdefault(parent, []).append((binding, at, kills))
                if isinstance(ancestor, _SCOPE_BOUNDARIES):
                    break
                if not isinstance(ancestor, _STRAIGHT_LINE):
                    kills = False  # under an if, a loop, a try: it may not run
                child = ancestor
        self._loop_bindings[id(bindings)] = (bindings, by_loop)
        return by_loop

    def summary_of(self, expr: cst.BaseExpression, scope: Scope, words: tuple[str, ...] = ()):
        """The summary (`trainlint.model.summaries`) of the function or class that `expr` names, when
        it is defined at module level in this file or in a project file it imports; else None.
        `words`: a project file whose text has none of them is not read for it (the question cannot
        be answered there), which saves parsing most of a library."""
        return self.linker.summary_of(self, expr, scope, words) if self.linker is not None else None

    def import_aliases(self, qualname: str) -> list[str]:
        """The module-level names whose last binding imports `qualname` (`t` for `import torch as
        t`), in binding order; the table is made once per file, not once per question."""
        if self._aliases is None:
            self._aliases = {}
            for name, bindings in self.module_scope.bindings.items():
                if bindings and bindings[-1].kind == "import":
                    self._aliases.setdefault(bindings[-1].qualname, []).append(name)
        return self._aliases.get(qualname, [])

    def call_name(self, call: CallSite) -> str | None:
        return self.resolve(call.node.func, call.scope)

    def calls_to(self, *qualnames: str) -> Iterator[CallSite]:
        wanted = set(qualnames)
        for site in self.calls:
            if self.call_name(site) in wanted:
                yield site

    def functions_named(self, name: str, class_name: str | None = None) -> list[FunctionInfo]:
        if self._functions_by_name is None:
            self._functions_by_name = {}
            for function in self.functions:
                self._functions_by_name.setdefault(function.name, []).append(function)
        found = self._functions_by_name.get(name, [])
        return found if class_name is None else [f for f in found if f.class_name == class_name]

    # -- the same-file call graph ---------------------------------------------------------------
    def callee(self, call: cst.Call, scope: Scope) -> FunctionInfo | None:
        """The function or method of this file that `call` runs, when it can be told: `helper(...)`
        bound by a module-level def (not shadowed by an import), or `self.method(...)` of the
        enclosing class or a base class defined in this file."""
        func = call.func
        kind = type(func)
        if kind is cst.Name:
            if not self.functions_named(func.value) or self.resolve(func, scope) is not None:
                return None  # no such def here, or imported / a builtin: not ours
            found = [f for f in self.functions_named(func.value) if f.class_name is None]
            return found[0] if len(found) == 1 else None
        if kind is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
            class_scope = scope.class_scope()
            if class_scope is not None:
                return self.method(class_scope.name, func.attr.value)
        return None

    def self_attribute_values(self, attr: str, scope: Scope) -> list[cst.BaseExpression]:
        """What any method of the class enclosing `scope` assigns to `self.<attr>`."""
        class_scope = scope.class_scope()
        if class_scope is None:
            return []
        return self.class_attributes.get(class_scope.name, {}).get(attr, [])

    def method(self, class_name: str, name: str, _seen: frozenset = frozenset()) -> FunctionInfo | None:
        """`name` as defined in class `class_name` or, failing that, its same-file base classes."""
        found = self.functions_named(name, class_name)
        if found:
            return found[-1]  # a later def in the class body replaces an earlier one
        node = self.classes.get(class_name)
        if node is None or class_name in _seen:
            return None
        for base in node.bases:
            base_name = dotted_name(base.value)
            if base_name in self.classes:
                hit = self.method(base_name, name, _seen | {class_name})
                if hit is not None:
                    return hit
        return None

    def callers(self, function: FunctionInfo) -> list[CallSite]:
        """Same-file call sites of `function`."""
        if self._callers is None:
            self._callers = {}
            for site in self.calls:
                target = self.callee(site.node, site.scope)
                if target is not None:
                    self._callers.setdefault(target.node, []).append(site)
        return self._callers.get(function.node, [])

    def class_calls(self, class_name: str) -> list[CallSite]:
        """The call sites `ClassName(...)` of the file for a class it defines, by the name spelled
        (one pass, asked per class; a caller that needs the name bound to that very class checks
        the site's scope)."""
        if self._class_calls is None:
            self._class_calls = {}
            for site in self.calls:
                func = site.node.func
                if type(func) is cst.Name and func.value in self.classes:
                    self._class_calls.setdefault(func.value, []).append(site)
        return self._class_calls.get(class_name, [])

    @staticmethod
    def argument_for(call: cst.Call, function: FunctionInfo, param: str) -> cst.BaseExpression | None:
        """The expression `call` passes for parameter `param` of `function` (None if not passed)."""
        arg = keyword_arg(call, param)
        if arg is not None:
            return arg.value
        params = [p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params)]
        if function.class_name and params and params[0] in ("self", "cls"):
            params = params[1:]
        positional = positional_args(call)
        if param in params and params.index(param) < len(positional):
            return positional[params.index(param)].value
        return None


def keyword_arg(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def keyword_value(call: cst.Call, name: str) -> cst.BaseExpression | None:
    """The value passed as keyword `name`, or None."""
    arg = keyword_arg(call, name)
    return arg.value if arg is not None else None


def walk_expression(expr: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Nodes of an expression in source order, not descending into lambdas (their own scope)."""
    stack = [expr]
    while stack:
        current = stack.pop()
        yield current
        if current is not expr and isinstance(current, cst.Lambda):
            continue
        stack.extend(reversed(iter_children(current)))


def is_property(function: cst.FunctionDef) -> bool:
    """`@property`, `@functools.cached_property`, `@x.getter`/`.setter`: reading the attribute runs
    it, so what the attribute holds is the value it returns (a module, a tensor), not a method."""
    for decorator in function.decorators:
        expr = decorator.decorator
        name = dotted_name(expr.func if isinstance(expr, cst.Call) else expr) or ""
        last = name.rsplit(".", 1)[-1]
        if last.endswith("property") or last in ("getter", "setter", "deleter"):
            return True
    return False


def unpacked_position(assign: cst.Assign, name: str) -> tuple[int, int] | None:
    """For `a, b, c = value`: (position of `name` among the targets, number of targets)."""
    for target in assign.targets:
        if isinstance(target.target, (cst.Tuple, cst.List)):
            names = [e.value.value if isinstance(e.value, cst.Name) else None for e in target.target.elements]
            if name in names:
                return names.index(name), len(names)
    return None


def positional_args(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]
