"""What a flag holds where a statement runs, and the tests it rules out: `cfg.frozen = True` just
before `model.eval()` (or `if cfg.frozen:` around it) holds from there on when no code of the file
ever stores another value in `cfg.frozen`; a backward under `if not cfg.frozen:` then never runs
after that eval (TL303: the eval mode it leaves trains nothing).

A flag is a plain name or an attribute chain (`script_args.noupdates`). What it holds at a node is
read from the `if` tests around the node (the side it runs on) and from the nearest earlier
statement of each enclosing block that stores it (`flag = <literal>`; any other store there leaves
it unknown), the innermost first. It keeps that value for the rest of the run only when every
store of it in the file is that literal (for a truth value, a literal of that truth), nothing
stores it otherwise (`+=`, `setattr`, `del`), and the object it belongs to is the same one where
the test reads it: a parameter of the one function holding both nodes, `self` in methods of one
class, or a global bound only at module level outside loops.
"""

from __future__ import annotations

import ast

import libcst as cst

from trainlint.model.index import dotted_name, walk

#: what `literal` returns for an expression that is not a literal
UNKNOWN = object()
TRUTHY, EQUAL, NOT_EQUAL = "truthy", "==", "!="


def literal(expr: cst.BaseExpression) -> object:
    """The value of a literal (`False`, `3`, `0.5`, `"plateau"`, `None`), else UNKNOWN."""
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[expr.value]
    if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
        try:
            return ast.literal_eval(expr.value)
        except (ValueError, SyntaxError):
            return UNKNOWN
    return UNKNOWN


def _key(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return None
    return dotted_name(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None


def atoms(test: cst.BaseExpression, side: bool) -> list[tuple[str, str, object]]:
    """What a test taken on `side` says of flags: (key, "==" | "!=", literal) or (key, "truthy",
    bool); `and` taken (or `or` failed) says each of its parts."""
    key = _key(test)
    if key is not None:
        return [(key, TRUTHY, side)]
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return atoms(test.expression, not side)
    if isinstance(test, cst.BooleanOperation):
        if isinstance(test.operator, cst.And) and side or isinstance(test.operator, cst.Or) and not side:
            return atoms(test.left, side) + atoms(test.right, side)
        return []
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        operator = test.comparisons[0].operator
        left, right = test.left, test.comparisons[0].comparator
        if _key(left) is None:
            left, right = right, left
        key, value = _key(left), literal(right)
        if key is None or value is UNKNOWN:
            return []
        if isinstance(operator, (cst.Equal, cst.Is)):
            return [(key, EQUAL if side else NOT_EQUAL, value)]
        if isinstance(operator, (cst.NotEqual, cst.IsNot)):
            return [(key, NOT_EQUAL if side else EQUAL, value)]
    return []


def _holds(value: object, atom: tuple[str, str, object]) -> bool:
    """`atom` is true of a flag holding the literal `value`."""
    _, op, expected = atom
    if op == TRUTHY:
        return bool(value) == expected
    same = type(value) is type(expected) and value == expected
    return same if op == EQUAL else not same


def _contradicts(fact: tuple[str, str, object], atom: tuple[str, str, object]) -> bool:
    """Two statements about one flag that cannot both hold."""
    (_, op, value), (_, other_op, other) = fact, atom
    if op == EQUAL:
        return not _holds(value, atom)
    if op == TRUTHY and other_op == TRUTHY:
        return value != other
    if op == TRUTHY and other_op == EQUAL:
        return bool(other) != value
    if op == NOT_EQUAL and other_op == EQUAL:
        return type(value) is type(other) and value == other
    return False


def _tests_around(index, node: cst.CSTNode):
    """The `if` tests around `node` in its function, each with the side `node` runs on."""
    child = node
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return
        if isinstance(ancestor, cst.If) and child is not ancestor.test:
            yield ancestor.test, child is ancestor.body
        child = ancestor


def _stored_keys(node: cst.CSTNode):
    """The flags a statement stores anywhere in it (targets of assignments, `del`)."""
    for n in walk(node):
        if isinstance(n, cst.Assign):
            targets = [t.target for t in n.targets]
        elif isinstance(n, (cst.AnnAssign, cst.AugAssign)):
            targets = [n.target]
        elif isinstance(n, cst.Del):
            targets = [n.target]
        elif isinstance(n, (cst.For, cst.CompFor)):
            targets = [n.target]
        else:
            continue
        for target in targets:
            for part in walk(target):
                key = _key(part) if isinstance(part, (cst.Name, cst.Attribute)) else None
                if key is not None:
                    yield key


def _literal_store(statement: cst.CSTNode) -> tuple[list[str], object] | None:
    """`flag = <literal>` (or `a = b = <literal>`) alone on its line: the keys and the literal."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and
            isinstance(statement.body[0], cst.Assign)):
        return None
    assign = statement.body[0]
    value = literal(assign.value)
    keys = [_key(t.target) for t in assign.targets]
    if value is UNKNOWN or None in keys:
        return None
    return keys, value


def facts_at(index, node: cst.CSTNode) -> list[tuple[str, str, object]]:
    """What the flags hold where `node` runs: the nearest store before it in each enclosing block
    (`flag = <literal>`), the innermost first, else the `if` tests around it."""
    decided: dict[str, tuple[str, str, object] | None] = {}
    child = node
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            break
        body = getattr(ancestor, "body", None)
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)) and isinstance(body, (list, tuple)) and child in body:
            for statement in reversed(body[:body.index(child)]):
                store = _literal_store(statement)
                if store is not None:
                    for key in store[0]:
                        decided.setdefault(key, (key, EQUAL, store[1]))
                    continue
                for key in _stored_keys(statement):
                    decided.setdefault(key, None)
        if isinstance(ancestor, cst.If) and child is not ancestor.test:
            for atom in atoms(ancestor.test, child is ancestor.body):
                decided.setdefault(atom[0], atom)
        child = ancestor
    return [fact for fact in decided.values() if fact is not None]


def _kept(index, fact: tuple[str, str, object]) -> bool:
    """Every store of the flag in the file keeps `fact` true, and nothing else writes it."""
    key = fact[0]
    for n in walk(index.module):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in ("setattr", "delattr", "exec") \
                and n.args and _key(n.args[0].value) is not None and \
                (n.func.value == "exec" or key.startswith(_key(n.args[0].value) + ".")):
            return False
        if isinstance(n, (cst.AugAssign, cst.Del)) and any(
                _key(part) == key for part in walk(n.target) if isinstance(part, (cst.Name, cst.Attribute))):
            return False
        if isinstance(n, cst.Assign):
            stored = [_key(t.target) for t in n.targets]
            if key in stored:
                value = literal(n.value)
                if value is UNKNOWN or not _holds(value, fact):
                    return False
            elif any(_key(part) == key for t in n.targets for part in walk(t.target)
                     if isinstance(part, (cst.Name, cst.Attribute))):
                return False  # `a, flag = ...`
        if isinstance(n, (cst.For, cst.CompFor, cst.AnnAssign, cst.AsName)) and any(
                _key(part) == key for part in walk(n.target if not isinstance(n, cst.AsName) else n.name)
                if isinstance(part, (cst.Name, cst.Attribute))):
            return False  # a loop's target, an annotated store, `with ... as flag`
    return True


def _same_object(index, key: str, first: cst.CSTNode, second: cst.CSTNode) -> bool:
    """The flag read at `second` is the one `first` sees: a parameter (or a local) of the one
    function holding both, `self` in methods of one class, or a global bound only at module level
    outside loops."""
    root = key.split(".")[0]
    one, two = index.function_at(first), index.function_at(second)
    scope = index.scope_at(first)
    bindings = scope.lookup(root)
    if not bindings:
        return False
    if root == "self" and one is not None and two is not None and one.class_name is not None:
        return one.class_name == two.class_name and "." in key
    local = one is not None and root in one.scope.bindings
    if local:
        return one is two
    module = index.module_scope.bindings.get(root, [])
    if bindings != module or two is not None and root in two.scope.bindings:
        return False
    for binding in module:
        if binding.kind not in ("assign", "import") or any(
                isinstance(a, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef)) for a in index.ancestors(binding.node)):
            return False
    return True


def excluded_after(index, first: cst.CSTNode, second: cst.CSTNode) -> tuple | None:
    """A flag held where `first` runs, kept so for the rest of the run, rules out a test around
    `second`: once `first` has run, `second` never does. The fact and the test, or None."""
    facts = facts_at(index, first)
    if not facts:
        return None
    for test, side in _tests_around(index, second):
        for atom in atoms(test, side):
            for fact in facts:
                if fact[0] == atom[0] and _contradicts(fact, atom) and _kept(index, fact) and \
                        _same_object(index, fact[0], first, second):
                    return fact, test
    return None
