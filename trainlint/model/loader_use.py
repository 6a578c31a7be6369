"""How a loader is used: iterated (an epoch over it, an evaluation over it), or only drawn from.

`imgs = next(iter(val_loader))` takes one batch (sample pictures, a shape probe, a warm-up): the
loader is never gone through, so what makes an evaluation loader wrong (a shuffled order, a dropped
last batch) does not apply to it. A loader is "only drawn from" when every use of its name in its
function (in the file, for an attribute), apart from its binding, is a draw:

- `next(iter(name))` (or Python 2's `iter(name).next()`): the first batch of a fresh iterator;
- `it = iter(name)` with `it` drawn from only by `next(it)` (`it.next()`) in a `for` over
  `range(B)` whose bound is capped by a number the code states (`min(max_iter, len(name))` with
  `max_iter=100` a parameter's default, or a literal): a capped sample, not a pass over the set;
- a `for` over `name` (or `enumerate(name)`) that stops after a fixed number of batches: its body
  ends in an unconditional `break` (one batch), or breaks when the `enumerate` index reaches a
  bound (`if i > samples: break`): a spot check, not a pass over the set;
- `it = iter(name)` drawn from one batch per call (`it.next()`, outside any loop of its function),
  the draw in a `try:` whose `except StopIteration:` binds `it = iter(name)` again: a stream of
  single batches restarted when it runs out (a picture to log), never a pass over the set;
- `it = iter(name)` bound to a local name read only by `next(it)` written outside any loop of its
  function (`source, target = next(it)`): a fixed number of batches from a fresh iterator;
- `it = cycle(name)` (itertools, or a generator of the project that repeats its argument inside
  `while True:`) with `it` used only as `next(it)`: an endless stream never ends an epoch;
- handed to a project function (this file or one it imports) whose parameter is only drawn from.

`len(name)` iterates nothing and is neither a draw nor a pass, and a rebinding of the name (`name =
DataLoader(...)` again, when the first one is exhausted) is no use of it. Any other use (a `for` to
the end, `it = iter(name)` drawn from batch after batch or `range(len(name))` times, handing it to
a function that may go through it) may go through it.

`never_read`: a function's local loader whose name is never read in that function at all (built,
never used), or a module's whose name is read neither in the module nor named by any file that
can import it: it feeds nothing, an evaluation least of all. `never_runs`: a module-level function
replaced by a later `def` of its name before anything reads it: a loader it would build is never
built. `named_nowhere`: one whose name no file that can import it holds (it may still be an entry
point named outside Python: unproven that it runs, not refuted); `reached_by_no_code`: one that
other files may name only as their own object (their own `def` of the name, an import of it from
another module, a method of an object), the same unproven-not-refuted premise.
"""

from __future__ import annotations

import libcst as cst

from trainlint.model.index import FileIndex, FunctionInfo, dotted_name, positional_args, walk

# a file whose text has none of these draws nothing from a loader (its summaries are not parsed)
DRAW_WORDS = ("next(", "break")
_CYCLES = frozenset({"itertools.cycle", "cycle"})


def only_drawn_from(index: FileIndex, holder: str, binding: cst.CSTNode) -> bool:
    """Every use of the loader named `holder` (a name or `self.attr`) is a draw (see above)."""
    targets = [t.target for t in binding.targets] if isinstance(binding, cst.Assign) else \
        [binding.target] if isinstance(binding, cst.AnnAssign) else []
    if not any(isinstance(t, (cst.Name, cst.Attribute)) and dotted_name(t) == holder for t in targets):
        return False  # a dict entry or a keyword argument: its uses are not written under this name
    function = index.function_at(binding)
    # a local name is used in its function; an attribute (`self.val_loader`) anywhere in the file
    region = function.node if function is not None and "." not in holder else index.module
    return _only_drawn(index, holder, region, {id(n) for n in walk(binding)}, 0)


def parameter_only_drawn_from(index: FileIndex, function: FunctionInfo, param: str) -> bool:
    """Every use of parameter `param` in `function`'s body is a draw (for `FunctionSummary`)."""
    return _only_drawn(index, param, function.node.body, set(), 1)


def _only_drawn(index: FileIndex, holder: str, region: cst.CSTNode, skip: set[int], depth: int) -> bool:
    drawn = False
    for node in walk(region):
        if not isinstance(node, (cst.Name, cst.Attribute)) or id(node) in skip:
            continue
        if dotted_name(node) != holder or _part_of_longer_name(index, node):
            continue
        if isinstance(index.parent(node), cst.Param) or _rebound(index, node):
            continue  # the parameter's own declaration, or a new loader bound to the name
        if _call_with_only_argument(index, node, "len") is not None:
            continue  # its number of batches: iterates nothing
        if _drawn_once(index, node) or _bounded_loop(index, node) or _cycled(index, node) \
                or _capped_draws(index, node) or _restarted_stream(index, node) or _fixed_draws(index, node) \
                or _handed_to_drawing_function(index, node, depth):
            drawn = True
            continue
        return False
    return drawn


def never_read(index: FileIndex, holder: str, binding: cst.CSTNode) -> bool:
    """The loader bound to the local name `holder` by `binding` is never read in its function
    (nor in a function nested in it): no loop, no call, no return hands it anywhere."""
    function = index.function_at(binding)
    if "." in holder or not isinstance(binding, (cst.Assign, cst.AnnAssign)):
        return False  # an attribute can be read anywhere
    targets = [t.target for t in binding.targets] if isinstance(binding, cst.Assign) else [binding.target]
    if not any(isinstance(t, cst.Name) and t.value == holder for t in targets):
        return False
    if function is None:  # a module's name: unread in it, and no file that can import it names it
        return not _read_in(index, holder, index.module) and not _dynamic_names(index) \
            and _unmentioned_elsewhere(index, holder, importers_only=True)
    for node in index.subtree(function.node.body):
        if isinstance(node, (cst.Global, cst.Nonlocal)) and any(n.name.value == holder for n in node.names):
            return False  # the module's (or an enclosing function's) name: read elsewhere
        if isinstance(node, cst.Name) and node.value == holder and not _part_of_longer_name(index, node) \
                and not _rebound(index, node):
            return False
    return True


def never_runs(index: FileIndex, function: FunctionInfo) -> bool:
    """A module-level, undecorated function that no code can call: its name is bound again at
    module level before anything reads it (a second `def` of the same name replaces it)."""
    node = function.node
    if not _module_function(index, function):
        return False
    name = function.name
    start = index.place.get(node)
    if start is None:
        return False
    end = index.subtree_end(start)
    reads = [index.place.get(n, -1) for n in _reads(index, name, index.module)]
    later = sorted(index.place.get(b.node, -1) for b in index.module_scope.bindings.get(name, ())
                   if index.place.get(b.node, -1) >= end and b.kind in ("def", "class", "assign", "import"))
    return bool(later) and not any(start <= at < later[0] for at in reads)


def named_nowhere(index: FileIndex, function: FunctionInfo) -> bool:
    """A module-level, undecorated function whose name nothing in its file reads and no other
    file of its import component holds (no `globals()`, `vars()`, `exec`/`eval` or argument-less
    `fire.Fire()` reaching names by text). It may still be an entry point named outside Python
    (a console script, a config's `_target_`): that it runs is unproven, not refuted."""
    return _module_function(index, function) and not _reads(index, function.name, index.module) \
        and not _dynamic_names(index) and _unmentioned_elsewhere(index, function.name)


def reached_by_no_code(index: FileIndex, function: FunctionInfo) -> bool:
    """A module-level, undecorated function of a script (`_script`: its own code is the entry
    point) that no code of the project can reach: nothing in its file reads its name or holds it in a string (no `globals()`, `vars()`, `exec`/`eval` or
    argument-less `fire.Fire()` either), and every other file that holds the name means another
    object by it (`Linker.named_by_no_other_file`: its own `def` of the name, an import of it from
    another module, a method). Like `named_nowhere`, an entry point named outside Python may still
    run it: unproven that it runs, not refuted."""
    if not _module_function(index, function) or not _script(index) or _reads(index, function.name, index.module) \
            or _dynamic_names(index) or index.linker is None:
        return False
    name = function.name
    if any(isinstance(node, (cst.SimpleString, cst.FormattedStringText)) and name in str(getattr(node, "value", ""))
           for node in index.parents):
        return False
    return index.linker.named_by_no_other_file(name)


def _script(index: FileIndex) -> bool:
    """The module is a script whose own code is its entry point: an `if __name__ == "__main__":`
    block, or module-level code (outside any def or class) calling a function the module defines
    (`main()`, `test(199)`). A module of definitions only is a library: code the project does not
    hold (a notebook, a configuration's `_target_`, a user) may call any of its functions."""
    for statement in index.module.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(statement, cst.If) and "__main__" in index.module.code_for_node(statement.test) \
                and "__name__" in index.module.code_for_node(statement.test):
            return True
        for node in walk(statement):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and any(
                    b.kind == "def" for b in index.module_scope.bindings.get(node.func.value, ())):
                return True
    return False


def _module_function(index: FileIndex, function: FunctionInfo) -> bool:
    return function.class_name is None and function.scope.parent is index.module_scope \
        and not function.node.decorators


def _reads(index: FileIndex, name: str, region: cst.CSTNode) -> list[cst.Name]:
    """The uses of the name `name` in `region` that read it (not a def's own name, a target
    receiving a value, a parameter, or the attribute of another object)."""
    found = []
    for node in walk(region):
        if not isinstance(node, cst.Name) or node.value != name:
            continue
        parent = index.parent(node)
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef)) and parent.name is node \
                or isinstance(parent, cst.Param) or _rebound(index, node) \
                or isinstance(parent, cst.Attribute) and parent.attr is node:
            continue
        found.append(node)
    return found


def _read_in(index: FileIndex, name: str, region: cst.CSTNode) -> bool:
    return bool(_reads(index, name, region))


def _dynamic_names(index: FileIndex) -> bool:
    """The module reaches its names by text: `globals()`, `vars()`, `locals()`, `exec`, `eval`,
    or `fire.Fire()` with no argument (every module-level function a command); `vars(args)` reads
    an object's attributes, no name of the module."""
    for site in index.calls:
        func = site.node.func
        if isinstance(func, cst.Name) and func.value in ("globals", "locals", "exec", "eval"):
            return True
        if isinstance(func, cst.Name) and func.value == "vars" and not site.node.args:
            return True
        if index.resolve(func, site.scope) == "fire.Fire" and not site.node.args:
            return True
    return False


def _unmentioned_elsewhere(index: FileIndex, name: str, importers_only: bool = False) -> bool:
    """No other file of the project that can import this one holds the text `name`: known only
    when the run checks the whole project (a file left out may import it). `importers_only`: of
    its import component, only the files that spell this module's name (or star-import) can read
    a module-level variable of it (`linker.readers_mentioning`)."""
    linker = index.linker
    if linker is None or not linker.whole_project():
        return False  # a file not checked in this run may import it
    files = linker.readers_mentioning(name) if importers_only else linker.files_mentioning(name)
    return files is not None and len(files) <= 1


def _rebound(index: FileIndex, node: cst.CSTNode) -> bool:
    """`node` is the whole target of an assignment (`name = ...`): it receives a value, reads none."""
    parent = index.parent(node)
    return isinstance(parent, cst.AssignTarget) and parent.target is node \
        or isinstance(parent, cst.AnnAssign) and parent.target is node


def _part_of_longer_name(index: FileIndex, node: cst.CSTNode) -> bool:
    """`self` of `self.val_loader`, or `val_loader` of `x.val_loader`: not a use of this name."""
    parent = index.parent(node)
    return isinstance(parent, cst.Attribute) and (parent.value is node or parent.attr is node)


def _drawn_once(index: FileIndex, node: cst.CSTNode) -> bool:
    """`next(iter(node))` or `iter(node).next()`: the first batch of a fresh iterator, not an epoch."""
    call = _call_with_only_argument(index, node, "iter")
    return call is not None and _next_of(index, call)


def _next_of(index: FileIndex, node: cst.CSTNode) -> bool:
    """`next(node)`, or Python 2's `node.next()`: one batch drawn from the iterator `node`."""
    if _call_with_only_argument(index, node, "next") is not None:
        return True
    attribute = index.parent(node)
    call = index.parent(attribute)
    return isinstance(attribute, cst.Attribute) and attribute.value is node and attribute.attr.value == "next" \
        and isinstance(call, cst.Call) and call.func is attribute and not call.args


def _capped_draws(index: FileIndex, node: cst.CSTNode) -> bool:
    """`it = iter(node)`, and `it` only drawn from (`next(it)`) in `for _ in range(B)` loops whose
    bound B is capped by a stated number: at most B batches, whatever the set's size."""
    call = _call_with_only_argument(index, node, "iter")
    statement = index.parent(call) if call is not None else None
    if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0].target, cst.Name)):
        return False
    name = statement.targets[0].target.value
    function = index.function_at(call)
    region = function.node if function is not None else index.module
    uses = [n for n in walk(region) if isinstance(n, cst.Name) and n.value == name
            and n is not statement.targets[0].target and not _attribute_of_another(index, n)]
    return bool(uses) and all(_next_of(index, n) and _in_capped_range(index, n) for n in uses)


def _fixed_draws(index: FileIndex, node: cst.CSTNode) -> bool:
    """`it = iter(node)` bound to a local name that is read only by `next(it)` (`it.next()`)
    written outside any loop of its function: a fixed number of batches (one per such statement)
    from a fresh iterator, never a pass over the set. A draw in a loop, a second binding of the
    name, or any other read (`for x in it`, handing `it` on) may go on to the end."""
    call = _call_with_only_argument(index, node, "iter")
    statement = index.parent(call) if call is not None else None
    if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1 and statement.value is call
            and isinstance(statement.targets[0].target, cst.Name)) or _dynamic_names(index):
        return False
    name = statement.targets[0].target.value
    function = index.function_at(call)
    if function is None:
        return False  # a module's name: a file importing it may draw on
    scope = function.scope
    if any(b.kind != "assign" or b.node is not statement for b in scope.bindings.get(name, ())):
        return False  # bound again (or a parameter, a loop target): its other values are not followed
    if any(isinstance(n, (cst.Global, cst.Nonlocal)) for n in walk(function.node)):
        return False
    uses = [n for n in walk(function.node) if isinstance(n, cst.Name) and n.value == name
            and n is not statement.targets[0].target and not _attribute_of_another(index, n)]
    return bool(uses) and all(_next_of(index, n) and not _in_loop(index, n) and index.function_at(n) is function
                              for n in uses)  # (a nested function drawing from it may be called again and again)


def _restarted_stream(index: FileIndex, node: cst.CSTNode) -> bool:
    """`it = iter(node)` (`self.it = iter(self.loader)`) with `it` used only by single draws
    (`next(it)`, `it.next()`) outside any loop of their function, each inside a `try:` whose
    `except StopIteration:` binds `it = iter(node)` again (or inside that handler), and by those
    rebindings: one batch per call, the iterator restarted when it runs out. An endless stream
    of single batches (a picture, a logged loss), never a pass over the set."""
    call = _call_with_only_argument(index, node, "iter")
    statement = index.parent(call) if call is not None else None
    if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1):
        return False
    stream = dotted_name(statement.targets[0].target)
    loader = dotted_name(node)
    if stream is None or loader is None:
        return False
    function = index.function_at(call)
    region = index.module if "." in stream or function is None else function.node
    drawn = False
    for use in walk(region):
        if not isinstance(use, (cst.Name, cst.Attribute)) or dotted_name(use) != stream \
                or _attribute_of_another(index, use):
            continue
        if _restarts(index, use, loader):
            continue
        if not (_next_of(index, use) and not _in_loop(index, use) and _restarted_on_stop(index, use, stream, loader)):
            return False
        drawn = True
    return drawn


def _restarts(index: FileIndex, use: cst.CSTNode, loader: str) -> bool:
    """`use` is the whole target of `use = iter(<loader>)`."""
    parent = index.parent(use)
    statement = index.parent(parent) if isinstance(parent, cst.AssignTarget) and parent.target is use else None
    return isinstance(statement, cst.Assign) and len(statement.targets) == 1 \
        and isinstance(statement.value, cst.Call) and isinstance(statement.value.func, cst.Name) \
        and statement.value.func.value == "iter" and len(statement.value.args) == 1 \
        and dotted_name(statement.value.args[0].value) == loader


def _in_loop(index: FileIndex, node: cst.CSTNode) -> bool:
    """A `for` or `while` of `node`'s own function holds it (its draws repeat within one call)."""
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(ancestor, (cst.For, cst.While, cst.CompFor)):
            return True
    return False


def _restarted_on_stop(index: FileIndex, use: cst.CSTNode, stream: str, loader: str) -> bool:
    """The draw `use` is in the body of a `try:` (or in the handler itself) whose
    `except StopIteration:` binds `stream = iter(<loader>)` again."""
    child = use
    for ancestor in index.ancestors(use):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(ancestor, cst.ExceptHandler) and _catches_stop(ancestor) \
                and _handler_restarts(index, ancestor, stream, loader):
            return True
        if isinstance(ancestor, cst.Try) and child is ancestor.body and any(
                _catches_stop(h) and _handler_restarts(index, h, stream, loader) for h in ancestor.handlers):
            return True
        child = ancestor
    return False


def _catches_stop(handler: cst.ExceptHandler) -> bool:
    caught = handler.type
    names = [e.value for e in caught.elements] if isinstance(caught, cst.Tuple) else [caught]
    return any(isinstance(n, cst.Name) and n.value == "StopIteration" for n in names)


def _handler_restarts(index: FileIndex, handler: cst.ExceptHandler, stream: str, loader: str) -> bool:
    return any(isinstance(n, (cst.Name, cst.Attribute)) and dotted_name(n) == stream and _restarts(index, n, loader)
               for n in walk(handler.body))


def _attribute_of_another(index: FileIndex, node: cst.CSTNode) -> bool:
    """`x.it`: an attribute of another object, not the name `it` (`it.next()` is a use of `it`)."""
    parent = index.parent(node)
    return isinstance(parent, cst.Attribute) and parent.attr is node


def _in_capped_range(index: FileIndex, node: cst.CSTNode) -> bool:
    """The innermost loop around `node` is `for _ in range(B)` with B capped (`_capped`)."""
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.While)):
            return False
        if isinstance(ancestor, cst.For):
            bound = ancestor.iter
            return isinstance(bound, cst.Call) and isinstance(bound.func, cst.Name) \
                and bound.func.value == "range" and len(bound.args) == 1 and not bound.args[0].star \
                and _capped(index, bound.args[0].value, index.scope_at(bound), frozenset())
    return False


def _capped(index: FileIndex, expr: cst.BaseExpression, scope, seen: frozenset) -> bool:
    """`expr` is at most a number the code states: a literal, `min(...)` of which one is capped, or
    a name every binding of which is capped (a parameter by its default: the value its callers get
    when they leave it out)."""
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "min":
        return any(not a.star and _capped(index, a.value, scope, seen) for a in expr.args)
    if not isinstance(expr, cst.Name) or len(seen) > 4:
        return False
    fresh = [b for b in scope.lookup(expr.value) if id(b) not in seen]
    return bool(fresh) and all(
        isinstance(b.value, cst.Integer) if b.kind == "param"
        else b.kind == "assign" and b.value is not None and _capped(index, b.value, scope, seen | {id(b)})
        for b in fresh)


def _bounded_loop(index: FileIndex, node: cst.CSTNode) -> bool:
    """`for b in node:` / `for i, b in enumerate(node):` that stops after a fixed number of batches."""
    counter = None
    iterated: cst.CSTNode = node
    wrapper = _call_with_only_argument(index, node, "enumerate")
    if wrapper is not None:
        iterated = wrapper
    loop = index.parent(iterated)
    if not isinstance(loop, cst.For) or loop.iter is not iterated or loop.orelse is not None:
        return False
    if wrapper is not None and isinstance(loop.target, cst.Tuple) and loop.target.elements \
            and isinstance(loop.target.elements[0].value, cst.Name):
        counter = loop.target.elements[0].value.value
    body = list(loop.body.body) if isinstance(loop.body, cst.IndentedBlock) else []
    if body and _is_break(body[-1]):
        return True  # one batch, whatever the loop does with it
    if counter is None:
        return False
    return any(isinstance(s, cst.If) and _counter_reaches_bound(s.test, counter) and s.orelse is None
               and isinstance(s.body, cst.IndentedBlock) and s.body.body and _is_break(s.body.body[-1])
               for s in body)


def _is_break(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(isinstance(s, cst.Break) for s in statement.body)


def _counter_reaches_bound(test: cst.BaseExpression, counter: str) -> bool:
    """`i > n`, `i >= n`, `i == n` (or `n < i`, ...): the index has come to a bound."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    operator, right = test.comparisons[0].operator, test.comparisons[0].comparator
    left_is = isinstance(test.left, cst.Name) and test.left.value == counter
    right_is = isinstance(right, cst.Name) and right.value == counter
    if left_is:
        return isinstance(operator, (cst.GreaterThan, cst.GreaterThanEqual, cst.Equal))
    if right_is:
        return isinstance(operator, (cst.LessThan, cst.LessThanEqual, cst.Equal))
    return False


def _cycled(index: FileIndex, node: cst.CSTNode) -> bool:
    """`it = cycle(node)` (or a project generator repeating it forever), `it` used only in `next(it)`."""
    arg = index.parent(node)
    call = index.parent(arg) if isinstance(arg, cst.Arg) else None
    if not (isinstance(call, cst.Call) and call.args and call.args[0] is arg):
        return False
    scope = index.scope_at(call)
    if index.resolve(call.func, scope) not in _CYCLES and not _repeats_forever(index, call, scope):
        return False
    statement = index.parent(call)
    if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0].target, cst.Name)):
        return False
    name = statement.targets[0].target.value
    function = index.function_at(call)
    region = function.node if function is not None else index.module
    uses = [n for n in walk(region) if isinstance(n, cst.Name) and n.value == name
            and n is not statement.targets[0].target and not _part_of_longer_name(index, n)]
    return bool(uses) and all(_call_with_only_argument(index, n, "next") is not None for n in uses)


def _repeats_forever(index: FileIndex, call: cst.Call, scope) -> bool:
    """`call` runs a generator of this file whose first parameter is iterated inside `while True:`
    (`def data_loop(dl): while True: for x in dl: yield x`) and that never returns or breaks out."""
    if not isinstance(call.func, cst.Name):
        return False
    defs = [b.node for b in scope.lookup(call.func.value) if b.kind == "def"]
    if len(defs) != 1 or not isinstance(defs[0], cst.FunctionDef):
        return False
    function = defs[0]
    params = function.params.params
    if not params:
        return False
    first = params[0].name.value
    nodes = list(walk(function.body))
    if any(isinstance(n, cst.Return) for n in nodes):
        return False
    for loop in nodes:
        if isinstance(loop, cst.While) and isinstance(loop.test, cst.Name) and loop.test.value == "True":
            inner = list(walk(loop.body))
            if any(isinstance(n, (cst.Yield)) for n in inner) and not any(
                    isinstance(n, cst.Break) and not _inside_inner_loop(index, n, loop) for n in inner) \
                    and any(isinstance(n, cst.For) and any(isinstance(m, cst.Name) and m.value == first
                                                             for m in walk(n.iter)) for n in inner):
                return True
    return False


def _inside_inner_loop(index: FileIndex, node: cst.CSTNode, outer: cst.While) -> bool:
    for ancestor in index.ancestors(node):
        if ancestor is outer:
            return False
        if isinstance(ancestor, (cst.For, cst.While)):
            return True
    return False


def _handed_to_drawing_function(index: FileIndex, node: cst.CSTNode, depth: int) -> bool:
    """`node` passed to a project function whose matching parameter is only drawn from."""
    if depth > 2:
        return False
    arg = index.parent(node)
    call = index.parent(arg) if isinstance(arg, cst.Arg) else None
    if not isinstance(call, cst.Call) or arg.star:
        return False
    scope = index.scope_at(call)
    summary = index.summary_of(call.func, scope, DRAW_WORDS)
    if summary is None:
        summary = _method_of_instance(index, call.func, scope)
    params = getattr(summary, "params", None)
    drawn = getattr(summary, "drawn_params", ())
    if params is None or not drawn:
        return False
    if arg.keyword is not None:
        return arg.keyword.value in drawn
    positional = positional_args(call)
    position = next((i for i, a in enumerate(positional) if a is arg), None)
    return position is not None and position < len(params) and params[position] in drawn


def _method_of_instance(index: FileIndex, func: cst.BaseExpression, scope):
    """The summary of `obj.method` when every binding of the name `obj` builds an instance of one
    project class (`trainer = Trainer(cfg)` ... `trainer.fit(train_loader, val_loader)`): the method
    of that class. Its file is read whatever its text: the method may only hand the loader on."""
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return None
    bindings = scope.lookup(func.value.value)
    if not bindings or any(b.kind != "assign" or not isinstance(b.value, cst.Call) for b in bindings):
        return None
    found = None
    for binding in bindings:
        built = index.summary_of(binding.value.func, index.scope_at(binding.value))
        method = getattr(built, "method", None)
        summary = method(func.attr.value) if method is not None else None
        if summary is None or found is not None and summary is not found:
            return None
        found = summary
    return found


def _call_with_only_argument(index: FileIndex, node: cst.CSTNode, function: str) -> cst.Call | None:
    arg = index.parent(node)
    call = index.parent(arg) if isinstance(arg, cst.Arg) else None
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == function \
            and call.args and call.args[0] is arg:
        return call
    return None


def drawn_once(index: FileIndex, node: cst.CSTNode) -> bool:
    """`next(iter(node))`: one batch of a fresh iterator over what `node` gives, no pass over it."""
    return _drawn_once(index, node)

