"""What rules need to state a fix that moves or adds whole statements (see `FixSpec.lines`).

A rule asks here whether a call is a statement of its own, which block holds it, and what its line
says; it then builds `before`/`after`/`delete`/`rewrite` line edits. Each helper answers None when
the code is not in the plain shape a mechanical fix needs, and the rule then offers no fix.
"""

from __future__ import annotations

import re
import sys

import libcst as cst

from trainlint.model.index import FileIndex
from trainlint.positions import split_lines

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*(\.[A-Za-z_][A-Za-z_0-9]*)*$")


def own_line(index: FileIndex, call: cst.CSTNode, assign: bool = False) -> cst.SimpleStatementLine | None:
    """The statement line that is just `call` (`sched.step()`), or with `assign` also `x = call`,
    as the only statement on its line (in a block or at top level)."""
    statement = index.parent(call)
    if isinstance(statement, cst.Expr) and statement.value is call:
        pass
    elif assign and isinstance(statement, cst.Assign) and statement.value is call:
        pass
    else:
        return None
    line = index.parent(statement)
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    if not isinstance(index.parent(line), (cst.IndentedBlock, cst.Module)):
        return None
    return line


def line_holding(index: FileIndex, node: cst.CSTNode) -> cst.SimpleStatementLine | None:
    """The statement line (one statement, in a block or at top level) whose statement holds `node`."""
    statement = index.enclosing_statement(node)
    line = index.parent(statement)
    if not isinstance(statement, cst.BaseSmallStatement) or not isinstance(line, cst.SimpleStatementLine) \
            or len(line.body) != 1 or not isinstance(index.parent(line), (cst.IndentedBlock, cst.Module)):
        return None
    return line


def block_of(index: FileIndex, statement: cst.CSTNode) -> cst.IndentedBlock | cst.Module | None:
    """The block (or the module) whose statements `statement` is one of."""
    block = index.parent(statement)
    return block if isinstance(block, (cst.IndentedBlock, cst.Module)) else None


def position_in(block: cst.IndentedBlock, statement: cst.CSTNode) -> int | None:
    for number, candidate in enumerate(block.body):
        if candidate is statement:
            return number
    return None


def line_text(module: cst.Module, line: cst.SimpleStatementLine) -> str | None:
    """The line as written (its trailing comment included, no indentation, no newline); None when
    it spans several lines (moving it would re-indent its continuation lines) or has comment
    lines above it (they would stay behind, describing another line)."""
    if any(empty.comment for empty in line.leading_lines):
        return None
    text = module.code_for_node(line.with_changes(leading_lines=())).rstrip("\r\n")
    return None if "\n" in text or "\r" in text else text


def dotted(module: cst.Module, expr: cst.CSTNode) -> str | None:
    """`model` / `self.model`: an expression that can be named again in new code."""
    text = module.code_for_node(expr)
    return text if _DOTTED.match(text) else None


def has_multiline_string(node: cst.CSTNode) -> bool:
    """Any string literal spanning lines under `node` (re-indenting its lines would change it)."""
    from trainlint.model.index import walk

    return any(isinstance(n, (cst.SimpleString, cst.FormattedString)) and "\n" in _code(n) for n in walk(node))


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def module_name(index: FileIndex, scope, module: str) -> str | None:
    """How the code names an imported module where `scope` is: `torch`, or `t` after
    `import torch as t`; None when it is not imported (new code would need an import)."""
    candidates = [module] + [name for name in index.import_aliases(module) if name != module]
    for name in candidates:
        bindings = scope.lookup(name)
        if bindings and all(b.kind == "import" and b.qualname == module for b in bindings):
            return name
    return None


def wrap_in(module: cst.Module, statement: cst.CSTNode, header: str) -> str | None:
    """Code for `rewrite(statement, ...)` that puts `statement` in the block of `header`
    (`with torch.no_grad():`), one indentation deeper; None when a string literal spans lines
    (its lines cannot move) or a block ends in comment lines of its own (they would move twice)."""
    from trainlint.model.index import walk

    if has_multiline_string(statement):
        return None
    if any(isinstance(n, cst.IndentedBlock) and n.footer for n in walk(statement)):
        return None
    code = module.code_for_node(statement.with_changes(leading_lines=())).rstrip("\r\n")
    indent = module.default_indent
    body = "\n".join(indent + line if line.strip() else "" for line in split_lines(code))  # "\n": the file's ending later
    return f"{header}\n{body}"


def position_of(index: FileIndex, block: cst.IndentedBlock, node: cst.CSTNode) -> int | None:
    """Which statement of `block` holds `node` (None: not under `block`)."""
    current = node
    while current is not None:
        parent = index.parent(current)
        if parent is block:
            return position_in(block, current)
        current = parent
    return None


def update_anchor(index: FileIndex, loop) -> cst.SimpleStatementLine | None:
    """Where code that must run once per update goes in an accumulating loop (a
    `trainlint.model.training.TrainingLoop`): right after the optimizer step (after
    `scaler.update()` when that is the next line). Only for one optimizer step, on a line of its
    own in the loop's body, under one update guard (`if (i + 1) % K == 0:` or
    `if ...: continue`); None otherwise (Accelerate, a micro-batch loop, a step in a helper)."""
    guard = loop.guard
    if guard is None or guard.kind not in ("branch", "continue") or guard.via or guard.equivalents \
            or not isinstance(loop.node, (cst.For, cst.While)):
        return None
    if len(loop.step_calls) != 1 or loop.step_calls[0].via:
        return None
    line = own_line(index, loop.step_calls[0].node)
    block = block_of(index, line) if line is not None else None
    if block is None:
        return None
    position = position_in(block, line)
    if position + 1 < len(block.body):
        following = block.body[position + 1]
        call = following.body[0].value if isinstance(following, cst.SimpleStatementLine) \
            and len(following.body) == 1 and isinstance(following.body[0], cst.Expr) else None
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                and call.func.attr.value == "update" and not call.args:
            line = following  # `scaler.step(opt)` then `scaler.update()`
    return line


def loop_body_line(index: FileIndex, loop, call: cst.CSTNode) -> cst.SimpleStatementLine | None:
    """`call`'s own line when it sits directly in the body of `loop` (not under an `if`, a
    `with` or a nested loop: moving it would drop that condition)."""
    line = own_line(index, call)
    if line is None or index.parent(block_of(index, line)) is not loop.node:
        return None
    return line


def move_line(module: cst.Module, index: FileIndex, line: cst.SimpleStatementLine,
              anchor: cst.CSTNode, where: str, title: str, safe: bool, same_block: bool = True):
    """A fix moving `line` (its comment with it) to just `where` ("before"/"after") `anchor`.
    With `same_block`, both must be in one block with only calls (no assignments, no compound
    statements) between them, so that nothing the moved line reads or writes changes order."""
    from trainlint.rule import FixSpec, after, before, delete

    text = line_text(module, line)
    if text is None or line is anchor:
        return None
    if same_block:
        block = block_of(index, line)
        if block is None or block_of(index, anchor) is not block:
            return None
        first, second = sorted((position_in(block, line), position_in(block, anchor)))
        for between in block.body[first + 1:second]:
            if not (isinstance(between, cst.SimpleStatementLine)
                    and all(isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) for s in between.body)):
                return None
    edit = after(anchor, text) if where == "after" else before(anchor, text)
    return FixSpec(title, safe, lines=(delete(line), edit))


def prepare_with(index: FileIndex, module: cst.Module, accelerator: cst.CSTNode, name: str, scope):
    """A fix passing `name` to the one `a, b = accelerator.prepare(a, b)` of the file as well
    (`a, b, name = accelerator.prepare(a, b, name)`), when `name` is bound once, before it, in the
    same block; None for any other shape."""
    from trainlint.rule import FixSpec

    receiver = module.code_for_node(accelerator)
    found = []
    for site in index.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "prepare" \
                and module.code_for_node(func.value) == receiver:
            found.append(site.node)
    if len(found) != 1:
        return None
    call = found[0]
    assign = index.parent(call)
    if not (isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Tuple)):
        return None
    targets = [e.value for e in assign.targets[0].target.elements]
    args = list(call.args)
    if len(targets) != len(args) or any(a.keyword is not None or a.star or not isinstance(a.value, cst.Name)
                                        for a in args) or not all(isinstance(t, cst.Name) for t in targets):
        return None
    if name in {t.value for t in targets} or name in {a.value.value for a in args}:
        return None
    bindings = scope.lookup(name)
    if len(bindings) != 1 or bindings[0].kind != "assign" or scope.lookup(targets[0].value) is None:
        return None
    bound, prepared = index.parent(index.enclosing_statement(bindings[0].node)), index.parent(assign)
    block = block_of(index, prepared) if prepared is not None else None
    if block is None or block_of(index, bound) is not block or position_in(block, bound) >= position_in(block, prepared):
        return None
    target = assign.targets[0].target
    new_target = target.with_changes(elements=[*target.elements, cst.Element(cst.Name(name))])
    new_call = call.with_changes(args=[*args[:-1], args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT),
                                       cst.Arg(cst.Name(name))])
    return FixSpec(f"Pass `{name}` to `{receiver}.prepare`", safe=False,
                   replacements=((target, new_target), (call, new_call)))


def import_block(module: cst.Module) -> list[cst.SimpleStatementLine]:
    """The module's leading import lines (after its docstring): what isort sorts as one block."""
    lines = []
    for number, statement in enumerate(module.body):
        if number == 0 and isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Expr) \
                and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            continue  # the docstring
        if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
                and isinstance(statement.body[0], (cst.Import, cst.ImportFrom))):
            break
        lines.append(statement)
    return lines


def _imported_module(module: cst.Module, line: cst.SimpleStatementLine) -> str:
    statement = line.body[0]
    if isinstance(statement, cst.Import):
        return module.code_for_node(statement.names[0].name)
    return "." * len(statement.relative) + (module.code_for_node(statement.module) if statement.module else "")


def _section(name: str) -> str:
    """isort's section of an imported module: future, stdlib, or (for this purpose) anything else."""
    top = name.split(".")[0]
    if top == "__future__":
        return "future"
    return "stdlib" if top and top in sys.stdlib_module_names else "other"


def add_import(module: cst.Module, name: str):
    """The line edit adding `import name` (a standard-library module) where isort and ruff's `I001`
    put it: among the block's plain standard-library imports in name order, before its
    standard-library `from` imports, or as a section of its own (a blank line after it) before the
    first import that is not `__future__`. None when the module has no import block."""
    from trainlint.rule import after, before

    block = import_block(module)
    stdlib = [line for line in block if _section(_imported_module(module, line)) == "stdlib"]
    plain = [line for line in stdlib if isinstance(line.body[0], cst.Import)]
    key = name.lower()
    if plain:
        for line in plain:
            if _imported_module(module, line).lower() > key:
                return before(line, f"import {name}")
        return after(plain[-1], f"import {name}")
    if stdlib:
        return before(stdlib[0], f"import {name}")
    first = next((line for line in block if _section(_imported_module(module, line)) != "future"), None)
    return before(first, f"import {name}\n\n") if first is not None else None  # a line edit ends its last line


def blank_lines_after(module: cst.Module, statement: cst.CSTNode, position: int | None = None) -> int:
    """How many blank lines follow a top-level statement before the next one (or its comments);
    `position` is its place in the module's body when the caller knows it."""
    body = module.body
    if position is None:
        position = next((n for n, s in enumerate(body) if s is statement), None)
    if position is None or position + 1 >= len(body):
        return 0
    count = 0
    for line in body[position + 1].leading_lines:
        if line.comment is not None:
            break
        count += 1
    return count
