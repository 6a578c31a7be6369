"""Whether an accumulation factor K is 1 as the code ships: the hazard is then real only when
someone sets it higher.

`accum_steps` that an argparse option defaults to 1 (`add_argument("--accum-steps", type=int,
default=1)`), a config/dataclass field `gradient_accumulation_steps: int = 1`, a parameter
`accum_steps=1`, `cfg.get("grad_accum", 1)`, or a plain `ACCUM = 1`: as shipped the loop does not
accumulate at all, so a per-micro-batch scheduler step or `zero_grad()` is right until K changes.
The accumulation rules then report the finding with that condition in the message, one severity
lower (`k_condition`, `Rule.report_if`).
"""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model.index import keyword_value, positional_args
from trainlint.model.training import TrainingLoop

_MAX_DEPTH = 4


def k_defaults_to_one(ctx, loop: TrainingLoop) -> str | None:
    """The K expression's text when every value the file gives it by default is 1, else None."""
    k = loop.k
    if k is None or isinstance(k, cst.Integer):
        return None  # a literal K (`% 4`) is what it says
    scope = loop.guard.scope if loop.guard is not None and loop.guard.scope is not None else loop.scope
    return ctx.code_for(k) if _is_one_by_default(ctx, k, scope, 0) else None


def k_condition(ctx, loop: TrainingLoop) -> str | None:
    """The condition an accumulation finding holds under when K is 1 as shipped, else None."""
    k = k_defaults_to_one(ctx, loop)
    if k is None:
        return None
    return f"`{k}` is set above 1 (it defaults to 1, where nothing accumulates and this is correct)"


def _is_one_by_default(ctx, expr: cst.BaseExpression, scope, depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return False
    index = ctx.index
    if isinstance(expr, cst.Integer):
        return expr.value == "1"
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value == "1"
    if isinstance(expr, cst.Call):
        func = expr.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        args = positional_args(expr)
        if name == "int" and len(args) == 1:
            return _is_one_by_default(ctx, args[0].value, scope, depth + 1)
        if name in ("get", "getattr", "getenv", "pop") and len(args) >= 2:  # cfg.get("accum", 1)
            return _is_one_by_default(ctx, args[-1].value, scope, depth + 1)
        if name == "max" and len(args) == 2:  # max(1, args.accum)
            return any(isinstance(a.value, cst.Integer) and a.value.value == "1" for a in args) and any(
                _is_one_by_default(ctx, a.value, scope, depth + 1) for a in args if not isinstance(a.value, cst.Integer))
        return False
    if isinstance(expr, cst.Name):
        bindings = scope.lookup(expr.value)
        if not bindings:
            return False
        for binding in bindings:
            if binding.kind == "param":
                default = _param_default(binding.node)
                if default is None or not _is_one_by_default(ctx, default, scope, depth + 1):
                    return False
                if _a_caller_passes_another(ctx, binding, depth):
                    return False
            elif binding.kind == "assign" and binding.value is not None:
                if not _is_one_by_default(ctx, binding.value, index.scope_at(binding.value), depth + 1):
                    return False
            else:
                return False
        return True
    if isinstance(expr, cst.Attribute):
        return _attribute_defaults_to_one(ctx, expr, scope, depth)
    return False


def _a_caller_passes_another(ctx, binding, depth: int) -> bool:
    """`def train_one_epoch(..., accum_iter=1)` called as `train_one_epoch(..., args.accum_iter)`
    (in this file or another file of the project): K is what the caller gives, not the default."""
    index = ctx.index
    node = next((a for a in index.ancestors(binding.node) if isinstance(a, cst.FunctionDef)), None)
    function = index.function_of_node.get(node) if node is not None else None
    if function is None:
        return False
    for site in index.callers(function):
        passed = index.argument_for(site.node, function, binding.name)
        if passed is not None and not _is_one_by_default(ctx, passed, site.scope, depth + 1):
            return True
    linker = index.linker
    if linker is None or function.scope.parent is not index.module_scope:
        return False
    summary = linker.own(index).function(function.name)
    params = summary.params if summary is not None else ()
    return any(text is not None and text.strip() != "1"
               for text in (call.argument(params, binding.name, binding.name) for call in linker.callers(function.name)))


def _param_default(node: cst.CSTNode) -> cst.BaseExpression | None:
    return node.default if isinstance(node, cst.Param) else None


def _attribute_defaults_to_one(ctx, expr: cst.Attribute, scope, depth: int) -> bool:
    """`args.accum_steps`, `cfg.train.grad_accum`, `self.accum`: what the file's declarations of that
    name say: argparse options, class fields, `self.<name> = ...` assignments. Every one found must
    give 1, and at least one must be found."""
    index = ctx.index
    name = expr.attr.value
    options, fields = ctx.model(_declarations)
    found = []
    for site in options.get(name, ()):
        default = keyword_value(site.node, "default")
        found.append(default is not None and _is_one_by_default(ctx, default, site.scope, depth + 1))
    for value in fields.get(name, ()):
        found.append(_field_default_is_one(ctx, value, depth))
    for attrs in index.class_attributes.values():
        for value in attrs.get(name, []):
            found.append(_is_one_by_default(ctx, value, index.scope_at(value), depth + 1))
    return bool(found) and all(found)


def _declarations(ctx) -> tuple[dict[str, list], dict[str, list[cst.BaseExpression]]]:
    """The file's declarations by the name they declare, in source order, gathered once per file
    (every accumulation loop asks about its K): the `add_argument(...)` calls (option name ->
    call sites) and the class fields with a value (`accum: int = 1`: name -> value)."""
    options: dict[str, list] = {}
    for site in ctx.index.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "add_argument":
            for name in _declared_options(site.node):
                options.setdefault(name, []).append(site)
    fields: dict[str, list[cst.BaseExpression]] = {}
    for node in ctx.index.classes.values():  # dataclass / config class fields
        for line in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            for statement in line.body if isinstance(line, cst.SimpleStatementLine) else ():
                if isinstance(statement, cst.AnnAssign) and isinstance(statement.target, cst.Name) and \
                        statement.value is not None:
                    fields.setdefault(statement.target.value, []).append(statement.value)
    return options, fields


def _field_default_is_one(ctx, value: cst.BaseExpression, depth: int) -> bool:
    """`accum: int = 1` or `accum: int = field(default=1)`."""
    if isinstance(value, cst.Call):
        default = keyword_value(value, "default")
        return default is not None and _is_one_by_default(ctx, default, ctx.index.module_scope, depth + 1)
    return _is_one_by_default(ctx, value, ctx.index.module_scope, depth + 1)


def _declared_options(call: cst.Call) -> list[str]:
    """The names `add_argument("--accum-steps", ...)` / `("--accum_steps")` / `dest="accum_steps"`
    declares (a `dest` string alone decides)."""
    dest = keyword_value(call, "dest")
    if isinstance(dest, cst.SimpleString):
        value = dest.evaluated_value
        return [value] if isinstance(value, str) else []
    names = []
    for arg in positional_args(call):
        if isinstance(arg.value, cst.SimpleString):
            text = arg.value.evaluated_value
            if isinstance(text, str) and text.startswith("--"):
                names.append(text.lstrip("-").replace("-", "_"))
    return list(dict.fromkeys(names))


def string_defaults(ctx, expr: cst.BaseExpression, scope, depth: int = 0) -> list[str] | None:
    """The strings the file gives `expr` as it ships: a string literal, what a local name is
    assigned, what the file's declarations of `args.<name>`/`cfg.<name>`/`self.<name>` give by default
    (argparse options' `default=`, class fields, class attributes). None when one of them is not a
    plain string, when a parameter's callers decide, or when none is found."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return [value] if isinstance(value, str) else None
    values: list[cst.BaseExpression] = []
    scopes = []
    if isinstance(expr, cst.Name):
        bindings = scope.lookup(expr.value)
        if not bindings or any(b.kind != "assign" or b.value is None for b in bindings):
            return None
        values = [b.value for b in bindings]
        scopes = [scope] * len(values)
    elif isinstance(expr, cst.Attribute):
        options, fields = ctx.model(_declarations)
        name = expr.attr.value
        for site in options.get(name, ()):
            default = keyword_value(site.node, "default")
            if default is None:
                return None
            values.append(default)
            scopes.append(site.scope)
        for value in fields.get(name, ()):
            if isinstance(value, cst.Call):
                value = keyword_value(value, "default")
                if value is None:
                    return None
            values.append(value)
            scopes.append(ctx.index.module_scope)
        for attrs in ctx.index.class_attributes.values():
            for value in attrs.get(name, []):
                values.append(value)
                scopes.append(ctx.index.scope_at(value))
    else:
        return None
    found: list[str] = []
    for value, where in zip(values, scopes):
        inner = string_defaults(ctx, value, where, depth + 1)
        if inner is None:
            return None
        found += [text for text in inner if text not in found]
    return found or None


def k_fixed_at_one(ctx, loop: TrainingLoop) -> bool:
    """K is a parameter of a plain function that every call of it in the project binds to 1 (a
    literal `1`, or the parameter's default `1` left alone), with at least one such call, and the
    function is used only by those calls (its name never passed on as a value, here or in another
    file that does not call it): as the project runs, every micro-batch is an update and nothing
    accumulates. A call with `*args`/`**kwargs`, a method, or a name whose callers cannot all be
    read is not fixed."""
    k = loop.k
    if not isinstance(k, cst.Name):
        return False
    scope = loop.guard.scope if loop.guard is not None and loop.guard.scope is not None else loop.scope
    bindings = scope.lookup(k.value)
    if len(bindings) != 1 or bindings[0].kind != "param" or not isinstance(bindings[0].node, cst.Param):
        return False
    param = bindings[0].node
    if param.star not in ("", cst.MaybeSentinel.DEFAULT, None):
        return False
    index = ctx.index
    node = next((a for a in index.ancestors(param) if isinstance(a, cst.FunctionDef)), None)
    function = index.function_of_node.get(node) if node is not None else None
    if function is None or function.class_name or node.decorators:
        return False
    default_one = param.default is not None and isinstance(param.default, cst.Integer) and param.default.value == "1"
    name = function.name
    calls = 0
    for site in index.callers(function):
        if any(arg.star for arg in site.node.args):
            return False
        passed = index.argument_for(site.node, function, k.value)
        if passed is None and not default_one or passed is not None and not (
                isinstance(passed, cst.Integer) and passed.value == "1"):
            return False
        calls += 1
    called = {site.node.func for site in index.callers(function)}
    for other in index.subtree(index.module):  # the name only as the callee of those calls
        if type(other) is cst.Name and other.value == name and other is not node.name and other not in called:
            return False
    linker = index.linker
    if linker is not None and linker.project is not None and function.scope.parent is index.module_scope:
        summary = linker.own(index).function(name)
        params = summary.params if summary is not None else ()
        caller_files = set()
        for where, call in linker.callers_by_file(name):
            text = call.argument(params, k.value, k.value)
            if any(t.startswith("*") for t in call.positional) or (text is None and not default_one) or \
                    (text is not None and text.strip() != "1"):
                return False
            caller_files.add(where)
            calls += 1
        mentioning = linker.files_mentioning(name) or []
        own = linker.project.real(linker.path)
        for where in mentioning:
            real = linker.project.real(linker.project.root / where)
            if real == own:
                continue
            if where not in caller_files or not _only_called_or_imported(linker.project.source(real), name):
                return False
    return calls > 0


def _only_called_or_imported(text: str | None, name: str) -> bool:
    """Every mention of the word `name` in another file's text is a call of it (`name(`) or sits in
    an import statement's line: the function is not handed on as a value there (`spawn(name, ...)`)."""
    if text is None:
        return False
    for match in re.finditer(rf"(?<![\w.]){re.escape(name)}\b", text):
        rest = text[match.end():].lstrip(" \t")
        line = text[text.rfind("\n", 0, match.start()) + 1:match.start()].lstrip()
        if rest.startswith("(") or line.startswith(("from ", "import ")):
            continue
        return False
    return True
