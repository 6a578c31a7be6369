"""Where a loader goes: whether the value a `DataLoader(...)` call builds reaches an evaluation.

A loader "feeds an evaluation" when, followed from its construction through the code, it reaches
a pass over it that evaluates: a `for` over it (through `enumerate`/`tqdm`/`zip`/`iter`) whose body
runs with grad recording off (a `no_grad`/`inference_mode` block or decorator around the loop,
around the call that hands the loader to the function holding the loop, or a function every caller
runs without grad) and computes no gradient (no backward, step or `autograd.grad`, with the literal
flags the call passes: `step(model, loader, train=False)` skips its `if train:` backward); or it is
returned by a framework hook whose loader the framework evaluates with (`val_dataloader`), when
the framework asks for it: a method that does (`frameworks.hook_runners`: `trainer.test(...)` for
`test_dataloader`) is called, or a command-line runner (`LightningCLI`) is built, in a file of the
project; in a run over the whole project where none is, the loader goes where the project's own
calls of the hook take it (`next(iter(dm.test_dataloader()))`: one batch drawn, no pass). A
module's hook whose batches reach nothing that computes (the framework's `batches_to`: the class's
own `validation_step` and every batch hook of the project only `pass`/a docstring/`return None`,
in a run over the whole project) feeds no evaluation either.

The loader is followed through:
- the name it is bound to: the reads that binding can reach (`FileIndex.reaching_bindings`: a
  plain assignment of the name on every way to a read hides the earlier loader from it; a
  binding reaches a read written before it only through a loop around both); a module's name
  may be read by the files that import the module, unless it is bound under `if __name__ ==
  "__main__":` (an importer never runs that block) or a later plain assignment at module level
  replaces it (an importer sees the module's last value), or no file that can import the module
  names it in a run over the whole project;
- another name it is assigned to (`loader = val_loader`);
- a return: to every call of the returning module-level function, in its file and (in a run
  over the whole project) no other file naming it; a call whose result is dropped (a statement
  of its own) takes the loader nowhere, `a, b = make()` hands the returned tuple's element to `b`;
  in other files, when every file naming the function only imports and calls it
  (`_results_elsewhere`), each call that drops the loader or binds it to a name nothing reads
  (`train, _ = make()` in a script) takes it nowhere (any other naming: out of sight);
  a function that nothing calls or reads, in its file or (in a run over the whole project) any
  other, where its name is at most imported (`Linker.only_imported_elsewhere`: no call,
  attribute, alias, other read or string naming it), takes the loader nowhere;
- an attribute of `self` (`_attribute`), in a run over the whole project where no other file
  spells `.attr` and the file reaches nothing by text: every read of the attribute in the file;
  one handed to `prepare` (the framework models' kind "prepare", its receiver proven an
  Accelerator) goes on to the same position of the tuple it is unpacked into;
- an argument of a function of the same file: the reads of the parameter in its body (a method
  of a class that a class of the project may derive from may be overridden: out of sight).

Reading its length, an attribute (`loader.dataset`), drawing single batches (`loader_use`'s
draws), a loop that reads none of the batches it draws (`for _ in loader: pass`), or a pass in
which no call can run a model (`_runs_no_model`: builtins, data-module functions, tensor and
container methods, handed no callable; summing feature statistics) is no pass
over it that evaluates. Anything else (an attribute of `self`, a container, a function of
another file or a library, a caller in a file this run does not check) is where the code cannot
follow: the loader may still feed an evaluation there (unknown).

`reach(ctx, call)`: "unused" (no pass over the loader anywhere the code goes: it feeds no
evaluation), "evaluates" (one reached pass evaluates; `only_evaluations` when no consumer reached
is anything else), or "unknown".
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from trainlint.model import frameworks
from trainlint.model.dataflow import dataflow
from trainlint.model.framework_classes import ancestors
from trainlint.model.grad_mode import literal_flags
from trainlint.model.index import FunctionInfo, main_guard, positional_args, walk
from trainlint.model.loader_use import (_bounded_loop, _capped_draws, _cycled, _drawn_once, _dynamic_names,
                                        _fixed_draws, _restarted_stream, _unmentioned_elsewhere)
from trainlint.model.mode_state import EVAL
from trainlint.model.modes import modes

UNUSED, EVALUATES, UNKNOWN = "unused", "evaluates", "unknown"
# calls whose result iterates their first argument (`for i, (x, y) in enumerate(tqdm(loader))`)
_WRAPPERS = frozenset({"enumerate", "zip", "iter", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm",
                       "reversed"})
_EVAL_LOADER_HOOKS = frameworks.hooks("eval_loader")
# what a pass may call and still run no model (`_runs_no_model`)
_PLAIN_BUILTINS = frozenset({"print", "len", "enumerate", "range", "zip", "min", "max", "sum", "abs", "float",
                             "int", "str", "round", "isinstance", "list", "tuple", "dict", "set", "sorted", "bool",
                             "repr", "format"})
_DATA_MODULES = frozenset({"torch", "numpy", "math", "sys", "os", "time", "logging", "json"})
# modules that hold only data containers (a graph sample, a batch of graphs): building one runs no
# model, whatever it is handed
_CONTAINER_MODULES = ("torch_geometric.data.",)


def _data_call(name: str | None) -> bool:
    """A function of a data module that takes no callable, or a data container's class."""
    if not name:
        return False
    if _container(name):
        return True
    return name.split(".", 1)[0] in _DATA_MODULES and not any(w in name for w in _RUNS_CALLABLES)


def _container(name: str | None) -> bool:
    return bool(name) and name.startswith(_CONTAINER_MODULES)
_RUNS_CALLABLES = ("functional_call", "vmap", "checkpoint", "compile", "jit", "hub", "load", "export", "apply")
_DATA_METHODS = frozenset({"append", "extend", "item", "tolist", "numpy", "cpu", "cuda", "to", "detach", "float",
                           "double", "long", "int", "sum", "mean", "std", "var", "size", "view", "reshape",
                           "squeeze", "unsqueeze", "pow", "add_", "format", "write", "flush", "keys", "values",
                           "items", "numel", "max", "min", "abs", "sqrt", "square", "clone", "info", "debug"})
# tensor methods whose arguments are sizes, dims, dtypes or devices: a name handed to one is no model it runs
_SHAPE_METHODS = frozenset({"view", "reshape", "squeeze", "unsqueeze", "size", "to", "cuda", "cpu", "float", "double",
                            "long", "int", "numel", "permute", "transpose", "flatten", "sum", "mean", "max", "min"})
# the framework methods that hand back what they are given, wrapped, in the same order (kind "prepare")
_PREPARES = frozenset(e.attr for e in frameworks.entries("prepare"))
_MAX_DEPTH = 4
_BUDGET = 200  # reads followed per loader, at most


@dataclass(frozen=True)
class Reach:
    state: str
    node: cst.CSTNode | None = None
    text: str = ""
    #: every consumer reached evaluates (none unknown)
    only_evaluations: bool = False
    #: the kind of evidence `node` is (trainlint.finding.EVIDENCE_KINDS)
    kind: str = "use"


@dataclass(frozen=True)
class _Use:
    kind: str  # "none", "eval", "other"
    node: cst.CSTNode | None = None
    text: str = ""
    evidence: str = "use"


class LoaderReach:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.index = ctx.index
        self.flow = ctx.model(dataflow)
        self.modes = ctx.model(modes)
        self._memo: dict[int, Reach] = {}

    def of_call(self, call: cst.Call) -> Reach:
        key = id(call)
        if key not in self._memo:
            self._budget = _BUDGET
            self._seen: set[tuple] = set()
            self._memo[key] = _combine(list(self._value(call, 0, False, ())))
        return self._memo[key]

    # -- the value, where it is written ------------------------------------------------------
    def _value(self, expr: cst.CSTNode, depth: int, grad_off: bool, flags: tuple):
        """The uses of the loader `expr` evaluates to, from what its parent does with it."""
        index = self.index
        self._budget -= 1
        if self._budget < 0 or depth > _MAX_DEPTH:
            yield _Use("other", expr, "followed too far")
            return
        loop = self._iterating_loop(expr)
        if loop is not None:
            yield self._loop_use(loop, grad_off, flags)
            return
        parent = index.parent(expr)
        if isinstance(parent, cst.Expr):
            yield _Use("none", parent, "dropped")
            return
        if isinstance(parent, cst.Assign) and parent.value is expr:
            target = parent.targets[0].target if len(parent.targets) == 1 else None
            if isinstance(target, cst.Name):
                yield from self._name(parent, target.value, depth, grad_off, flags)
            elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) \
                    and target.value.value == "self" and index.function_at(parent) is not None:
                yield from self._attribute(parent, target.attr.value, depth, grad_off, flags)
            else:
                yield _Use("other", parent, "stored where the code is not followed")
            return
        if isinstance(parent, cst.Return) and parent.value is expr:
            yield from self._returned(parent, None, depth)
            return
        if isinstance(parent, cst.Element) and isinstance(tuple_ := index.parent(parent), cst.Tuple) \
                and isinstance(returned := index.parent(tuple_), cst.Return) and returned.value is tuple_ \
                and not any(isinstance(e, cst.StarredElement) for e in tuple_.elements):
            yield from self._returned(returned, next(i for i, e in enumerate(tuple_.elements) if e is parent), depth)
            return
        if isinstance(parent, cst.Arg) and not parent.star:
            yield from self._argument(parent, depth, grad_off, flags)
            return
        yield _Use("other", parent if parent is not None else expr, "used where the code is not followed")

    def _read(self, node: cst.Name, depth: int, grad_off: bool, flags: tuple):
        """One read of a name holding the loader."""
        index = self.index
        parent = index.parent(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            yield _Use("none", parent, "an attribute read")  # `loader.dataset`: no pass over it
            return
        if isinstance(parent, cst.Arg) and isinstance(call := index.parent(parent), cst.Call) \
                and isinstance(call.func, cst.Name) and call.func.value == "len" and not parent.star:
            yield _Use("none", call, "its length")
            return
        if _del_target(index, node):
            yield _Use("none", node, "deleted")
            return
        if _drawn_once(index, node) or _bounded_loop(index, node) or _cycled(index, node) \
                or _capped_draws(index, node) or _restarted_stream(index, node) or _fixed_draws(index, node):
            yield _Use("none", node, "single batches drawn")
            return
        yield from self._value(node, depth, grad_off, flags)

    # -- a name ------------------------------------------------------------------------------
    def _name(self, statement: cst.Assign, name: str, depth: int, grad_off: bool, flags: tuple):
        """The reads the binding of `name` by `statement` reaches."""
        index = self.index
        key = ("name", id(statement), name)
        if key in self._seen:
            return
        self._seen.add(key)
        scope = index.scope_at(statement)
        binding = next((b for b in scope.bindings.get(name, ()) if b.node is statement), None)
        if binding is None:
            yield _Use("other", statement, "bound where the code is not followed")
            return
        function = index.function_at(statement)
        region = function.node.body if function is not None else index.module
        if function is None and not self._module_name_private(statement, name):
            yield _Use("other", statement, f"a module-level name (`{name}`) other files may import")
        elif function is not None and _dynamic_names(index):
            yield _Use("other", statement, "in a file that reaches names by text (`locals()`, `eval`)")
        for node in index.subtree(region):
            if not (isinstance(node, cst.Name) and node.value == name) or not self._reads(node):
                continue
            if binding not in index.reaching_bindings(node, name, index.scope_at(node)):
                continue
            if not self._reaches(statement, node):
                continue
            yield from self._read(node, depth, grad_off, flags)

    def _attribute(self, statement: cst.Assign, attr: str, depth: int, grad_off: bool, flags: tuple):
        """The loader stored in `self.<attr>`: in a run over the whole project where no other file
        spells `.attr` (nor the string `"attr"`), and this file reaches no names or attributes by
        text (`getattr`, `__dict__`, `vars()`), every read of an attribute `attr` in this file (of
        any object: `self.attr` in any method, `x.attr`) is followed like a read of a name; one
        handed to `prepare` (a framework wrapper returning its arguments in order) goes on to the
        same position of the tuple it is unpacked into. Otherwise it is out of sight."""
        index = self.index
        key = ("attribute", attr)
        if key in self._seen:
            return
        self._seen.add(key)
        linker = index.linker
        text = index.linker.project.source(index.linker.project.real(index.linker.path)) \
            if linker is not None and linker.project is not None else None
        elsewhere = linker.files_mentioning(f".{attr}", f'"{attr}"', f"'{attr}'") \
            if linker is not None and linker.whole_project() else None
        if elsewhere is None or len(elsewhere) > 1 or text is None or _dynamic_names(index) \
                or any(word in text for word in ("getattr(", "__dict__", "setattr(", f'"{attr}"', f"'{attr}'")):
            yield _Use("other", statement, "stored where the code is not followed")
            return
        for node in index.subtree(index.module):
            if not (isinstance(node, cst.Attribute) and node.attr.value == attr) or _stored(index, node):
                continue
            yield from self._attribute_read(node, depth + 1, grad_off, flags)

    def _attribute_read(self, node: cst.Attribute, depth: int, grad_off: bool, flags: tuple):
        index = self.index
        parent = index.parent(node)
        if isinstance(parent, cst.Arg) and not parent.star and parent.keyword is None \
                and isinstance(call := index.parent(parent), cst.Call) \
                and isinstance(call.func, cst.Attribute) and call.func.attr.value in _PREPARES \
                and self._prepares(call):
            # `a, b = accelerator.prepare(a, b)`: the wrapped loader is the element in the same position
            assign = index.parent(call)
            args = positional_args(call)
            target = assign.targets[0].target if isinstance(assign, cst.Assign) and assign.value is call \
                and len(assign.targets) == 1 else None
            if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(args) == len(call.args)
                    and not any(isinstance(e, cst.StarredElement) for e in target.elements)):
                yield _Use("other", call, "wrapped where the code is not followed")
                return
            element = target.elements[next(i for i, a in enumerate(args) if a is parent)].value
            if isinstance(element, cst.Name):
                yield from self._name(assign, element.value, depth, grad_off, flags)
            elif isinstance(element, cst.Attribute) and isinstance(element.value, cst.Name) \
                    and element.value.value == "self":
                yield from self._attribute(assign, element.attr.value, depth, grad_off, flags)
            else:
                yield _Use("other", assign, "wrapped and stored where the code is not followed")
            return
        if _drawn_once(index, node) or _bounded_loop(index, node) or _cycled(index, node) \
                or _capped_draws(index, node) or _restarted_stream(index, node) or _fixed_draws(index, node):
            yield _Use("none", node, "single batches drawn")
            return
        yield from self._value(node, depth, grad_off, flags)

    def _prepares(self, call: cst.Call) -> bool:
        """`call` is a framework's `prepare` (the framework models' kind "prepare": Accelerate's
        `accelerator.prepare(...)`), its receiver proven that framework's object."""
        from trainlint.model.roles import ACCELERATOR, roles
        scope = self.index.scope_at(call)
        model = self.ctx.model(roles)
        source = model.source(call.func.value, scope)
        return model.of(call.func.value, scope) == ACCELERATOR and source is not None and source.proven

    def _reads(self, node: cst.Name) -> bool:
        parent = self.index.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            return False  # `x.name`: another object's attribute
        if isinstance(parent, (cst.Param, cst.FunctionDef, cst.ClassDef, cst.Global, cst.Nonlocal, cst.ImportAlias,
                               cst.NameItem)):
            return False
        if isinstance(parent, cst.AssignTarget) and parent.target is node \
                or isinstance(parent, cst.AnnAssign) and parent.target is node:
            return False
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.target is node:
            return False
        if isinstance(parent, cst.AsName):
            return False
        return True

    def _reaches(self, statement: cst.CSTNode, read: cst.CSTNode) -> bool:
        """The binding written by `statement` can come to `read`: after it in the same function, or
        before it with a loop around both; a read in a nested function runs whenever it is called."""
        flow = self.flow
        if flow._owner(read) is not flow._owner(statement):
            return True
        if any(isinstance(a, cst.Lambda) for a in self.index.ancestors(read)):
            return True  # a lambda runs when it is called, maybe after the binding
        if flow.before(statement, read):
            return True
        return any(isinstance(a, (cst.For, cst.While)) and flow.inside(statement, a)
                   for a in self.index.ancestors(read))

    def _module_name_private(self, statement: cst.CSTNode, name: str) -> bool:
        """No other file can read the module's `name` bound by `statement`: bound under `if __name__
        == "__main__":`, replaced by a later plain module-level assignment, or, in a run over the
        whole project, named by no file that can import the module."""
        index = self.index
        if _dynamic_names(index):
            return False
        if any(isinstance(a, cst.If) and main_guard(a.test) for a in index.ancestors(statement)):
            return True
        line = index.parent(statement)
        body = list(index.module.body)
        if line in body:
            position = body.index(line)
            for later in body[position + 1:]:
                if isinstance(later, cst.SimpleStatementLine) and any(
                        isinstance(s, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name
                                                          for t in s.targets) for s in later.body):
                    return True
        return _unmentioned_elsewhere(index, name, importers_only=True)

    # -- a loop ------------------------------------------------------------------------------
    def _iterating_loop(self, expr: cst.CSTNode) -> cst.CSTNode | None:
        """The `for` (or comprehension) that goes through `expr`, through iteration wrappers."""
        index = self.index
        current = expr
        for _ in range(4):
            parent = index.parent(current)
            if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is current:
                return parent
            if not isinstance(parent, cst.Arg) or parent.star:
                return None
            call = index.parent(parent)
            if not isinstance(call, cst.Call):
                return None
            wrapper = index.resolve(call.func, index.scope_at(call))
            if wrapper not in _WRAPPERS or parent.keyword is not None \
                    or wrapper != "zip" and call.args[0] is not parent:
                return None
            current = call
        return None

    def _loop_use(self, loop: cst.CSTNode, grad_off: bool, flags: tuple) -> _Use:
        """A pass over the loader: an evaluation when it computes no gradient and runs with grad
        recording off, or runs a model that is in eval mode on every way to its forward."""
        body = loop
        if isinstance(loop, cst.CompFor):  # the whole comprehension: its element is outside the CompFor
            body = next((a for a in self.index.ancestors(loop)
                         if isinstance(a, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp))), loop)
        holder = body if isinstance(body, cst.For) else self.index.enclosing_statement(body)
        scope = self.flow.scope_of(body)
        if self._batches_unread(loop):
            return _Use("none", holder, "gone through without reading a batch")
        if self.modes.computes_grad(body, scope, flags):
            return _Use("other", holder, "gone through by a loop that computes gradients")
        if self._runs_no_model(body):
            return _Use("none", holder, "gone through by a pass that runs no model (a pass over the data)")
        if grad_off or self.flow.under_no_grad(body):
            return _Use("eval", holder, "gone through with grad recording off and no backward")
        if self._eval_mode_forward(body):
            return _Use("eval", holder, "gone through by a model in eval mode, with no backward")
        return _Use("other", holder, "gone through by a loop that is not shown to evaluate")

    def _runs_no_model(self, body: cst.CSTNode) -> bool:
        """No call of the pass can run a model, so it evaluates none (summing feature statistics
        over the data): every call in it is a builtin (`print`, `len`, `enumerate`, ...) the scope does not
        rebind, a function of `torch`/`numpy`/`math`/`sys`/`os`/`time`/`logging`/`json` reached
        through an import that takes no callable (not `functional_call`, `vmap`, `checkpoint`,
        `compile`, `jit`, `hub`, `load`, `export`), or a tensor/container method (`x.append`,
        `t.to`, `t.sum`); and no argument of one is a name that may hold a model or another callable
        (a parameter, a def, a class, an import of another module, a value some other call built).
        Anything else (`model(x)`, `score(batch)`, `self.net(x)`, `fn()(x)`) may run a model, and
        so may one that reads a batch the loop target binds after the loop (`return model(batch)`)."""
        index = self.index
        if not isinstance(body, cst.For) or _dynamic_names(index):
            return False
        # a batch the pass binds, read after it (`return model(batch)`): a model may see it there
        names = {n.value for n in walk(body.target) if isinstance(n, cst.Name)}
        owner = self.flow._owner(body)
        region = owner.body if isinstance(owner, cst.FunctionDef) else owner
        start, end = self.flow.position(body), self.flow.end(body)
        if not names or end < 0 or any(
                isinstance(n, cst.Name) and n.value in names and not start <= self.flow.position(n) <= end
                and self.flow._owner(n) is owner and self._reads(n) for n in index.subtree(region)):
            return False
        if not isinstance(owner, cst.FunctionDef) \
                and not all(self._module_name_private(body, name) for name in names):
            return False  # a module's name: a file importing it may hand the last batch to a model
        # the wrappers the loader goes through (`enumerate(loader)`) are handed the loader, not a model
        iterating = {id(n) for n in index.subtree(body.iter)}
        for node in index.subtree(body):
            if type(node) is not cst.Call:
                continue
            scope = index.scope_at(node)
            func = node.func
            name = None
            if type(func) is cst.Name:
                name = index.resolve(func, scope) if _imported_head(func, scope) else None
                if not _container(name) and (func.value not in _PLAIN_BUILTINS or scope.lookup(func.value)):
                    return False
            elif type(func) is cst.Attribute:
                name = index.resolve(func, scope) if _imported_head(func, scope) else None
                if name is not None:
                    if not _data_call(name):
                        return False
                elif func.attr.value not in _DATA_METHODS:
                    return False
            else:
                return False
            if _container(name):
                continue  # `Data(x=x, edge_index=edge_index)`: a container holds what it is handed
            if type(func) is cst.Attribute and name is None and func.attr.value in _SHAPE_METHODS:
                continue  # `x.view(c, h * w)`: sizes, dims, a device: what it is handed is never run
            for arg in node.args if id(node) not in iterating else ():
                if type(arg.value) is cst.Name and not self._plain_value(arg.value, scope):
                    return False
        return True

    def _plain_value(self, name: cst.Name, scope) -> bool:
        """`name` holds no model or callable the code can tell: every binding is a plain value (a
        literal, a loop target, an accumulation, a tensor a data module built) or a data module."""
        for binding in scope.lookup(name.value):
            if binding.kind in ("param", "def", "class"):
                return False
            if binding.kind == "import" and (binding.qualname or "").split(".", 1)[0] not in _DATA_MODULES:
                return False
            value = binding.value
            if binding.kind == "assign" and type(value) is cst.Call:
                called = self.index.resolve(value.func, self.index.scope_at(value)) \
                    if _imported_head(value.func, self.index.scope_at(value)) else None
                if called is None or called.split(".", 1)[0] not in _DATA_MODULES and not _container(called):
                    return False
        return True

    def _batches_unread(self, loop: cst.CSTNode) -> bool:
        """The pass reads none of the batches it draws (`for _ in tqdm(loader): pass`, timing the
        loading): the names its target binds for the batch (the second of `for i, batch in
        enumerate(...)`) are read nowhere in the function (nor by text: `locals()`, `eval`), so no
        model, metric or log sees a batch, and their order or a dropped last one changes nothing."""
        index = self.index
        target, iterable = loop.target, loop.iter
        while isinstance(iterable, cst.Call) and len(iterable.args) >= 1 and not iterable.args[0].star:
            wrapper = index.resolve(iterable.func, index.scope_at(iterable))
            if wrapper == "enumerate":
                if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2
                        and not any(isinstance(e, cst.StarredElement) for e in target.elements)):
                    return False
                target = target.elements[1].value
            elif wrapper == "zip" or wrapper not in _WRAPPERS:
                break
            iterable = iterable.args[0].value
        names = {n.value for n in walk(target) if isinstance(n, cst.Name)}
        if not names or _dynamic_names(index):
            return False
        region = self.flow._owner(loop)
        if not isinstance(region, cst.FunctionDef) \
                and not all(_unmentioned_elsewhere(index, name, importers_only=True) for name in names):
            return False  # a module's name: a file importing it may read the last batch
        region = region.body if isinstance(region, cst.FunctionDef) else region
        bound = {id(n) for n in walk(target)}
        return not any(isinstance(n, cst.Name) and n.value in names and id(n) not in bound and self._reads(n)
                       for n in index.subtree(region))

    def _eval_mode_forward(self, body: cst.CSTNode) -> bool:
        """A forward of a model in `body` with the model in eval mode on every way to it."""
        start, end = self.index.place.get(body), None
        if start is None:
            return False
        end = self.index.subtree_end(start)
        for forward in self.modes.forwards():
            at = self.index.place.get(forward.call)
            if at is not None and start <= at < end and forward.facts \
                    and all(fact.kind == EVAL for fact in forward.facts):
                return True
        return False

    # -- a return ----------------------------------------------------------------------------
    def _returned(self, statement: cst.Return, position: int | None, depth: int):
        index = self.index
        function = index.function_at(statement)
        if function is None:
            yield _Use("other", statement, "returned")
            return
        if function.name in _EVAL_LOADER_HOOKS and function.class_name is not None:
            idle = self._idle_batches(function)
            if idle is not None:
                yield _Use("none", idle, f"returned by the framework hook `{function.name}`, whose batches go to "
                                         f"`{idle.name.value}` and hooks that compute nothing", "framework")
                return
            if self.framework_runs(function) is not False:
                yield _Use("eval", function.node, f"returned by the framework hook `{function.name}`", "framework")
                return
            yield from self._hook_calls(function)
            return
        key = ("return", id(function.node), position)
        if key in self._seen:
            return
        self._seen.add(key)
        if function.class_name is not None or function.node.decorators or _dynamic_names(index):
            yield _Use("other", statement, f"returned by `{function.name}` to callers the code does not follow")
            return
        nested = function.scope.parent is not index.module_scope
        region = index.module if not nested else function.scope.parent.node
        calls = [site.node for site in index.callers(function)]
        called = {id(call.func) for call in calls}
        other_reads = [n for n in index.subtree(region) if isinstance(n, cst.Name)
                       and n.value == function.name and id(n) not in called and self._reads(n)]
        if not calls and not other_reads and (nested or index.linker is not None
                                                  and index.linker.only_imported_elsewhere(function.name)):
            # no file of the project calls it (another imports it at most): it runs nowhere
            yield _Use("none", statement, f"returned by `{function.name}`, which no file of the project calls")
            return
        elsewhere = None if nested or other_reads else self._results_elsewhere(function, position)
        if other_reads or not calls and not elsewhere:
            # handed around by name, or called by nothing the code shows (an entry point named in
            # a configuration may call it and use what it returns)
            yield _Use("other", statement, f"returned by `{function.name}` to callers the code does not show")
        elif not nested and elsewhere is None and not _unmentioned_elsewhere(index, function.name):
            # another file may import and call it (or this run does not see the whole project)
            yield _Use("other", statement, f"returned by `{function.name}` to callers in other files")
        yield from elsewhere or ()
        for call in calls:
            yield from self._result(call, position, depth + 1)

    def _results_elsewhere(self, function: FunctionInfo, position: int | None) -> list[_Use] | None:
        """What the other files of the project do with the loader the module-level `function`
        returns (the element `position` of a returned tuple), when every one of them that names
        the function only imports it under its own name and calls it, and each call drops the
        result or binds the loader to a name nothing reads (`train, _ = make_loaders()`: no read of
        `_` in its function, nor, at module level, in its module or a file that can import it):
        each such call takes the loader nowhere. None when that is not known: a run that does not
        check the whole project, a file naming the function any other way (an alias, a registry,
        a string, a read), a call whose loader is read, or a file reaching names by text."""
        linker = self.index.linker
        if linker is None or not linker.whole_project():
            return None
        summaries, own = linker._summaries, linker.project.real(linker.path)
        found: list[_Use] = []
        for where in summaries.mentioning(linker.path, (function.name,)):
            if linker.project.real(where) == own:
                continue
            summary = summaries.file_summary(where)
            other = summary.index if summary is not None else None
            if other is None or _dynamic_names(other):
                return None
            for node in other.parents:
                if isinstance(node, (cst.SimpleString, cst.FormattedStringText)) \
                        and function.name in str(getattr(node, "value", "")):
                    return None
                if not (isinstance(node, cst.Name) and node.value == function.name):
                    continue
                parent = other.parent(node)
                if isinstance(parent, cst.ImportAlias) and parent.name is node and parent.asname is None \
                        and isinstance(other.parent(parent), (cst.Import, cst.ImportFrom)):
                    continue  # `from data import make_loaders`
                func = parent if isinstance(parent, cst.Attribute) and parent.attr is node else node
                call = other.parent(func)
                if not (isinstance(call, cst.Call) and call.func is func):
                    return None
                qualname = other.resolve(func, other.scope_at(call))
                located = summaries.locate(qualname, str(where)) if qualname else None
                if located is None or linker.project.real(located[0]) != own or located[1] != [function.name]:
                    return None
                use = _dropped_result(other, call, position)
                if use is None:
                    return None
                found.append(use)
        return found

    def framework_runs(self, function: FunctionInfo) -> bool | None:
        """Whether the framework asks for the loader the eval_loader hook `function` returns: one
        of the methods that do (`hook_runners`: `trainer.test(...)` for `test_dataloader`) is
        called, spelled `.test(` or named `"test"` in a file that calls `getattr`, or a class that runs one
        named on the command line (`LightningCLI`) is named, in a file of the project that can
        reach this one (True); none is, in a run over the whole project (False); None: not known
        (no runners in the framework model, or files of the project left out of the run)."""
        runners = frameworks.hook_runners(function.name)
        linker = self.index.linker
        if runners is None or linker is None or not linker.whole_project():
            return None
        methods, clis = runners
        if linker.files_mentioning(*(f".{m}(" for m in methods), *clis):
            return True
        named = set(linker.files_mentioning(*(f'"{m}"' for m in methods), *(f"'{m}'" for m in methods)) or ())
        return bool(named & set(linker.files_mentioning("getattr(") or ()))

    def _idle_batches(self, function: FunctionInfo) -> cst.FunctionDef | None:
        """The step hook of the module class whose eval_loader hook `function` is, when the batches
        the framework draws from the hook's loader reach nothing that computes: the class derives
        from the hook's framework class, defines the step hook itself (`frameworks.batch_receivers`:
        `validation_step` for `val_dataloader`), and every definition of a method the framework
        hands a batch to does nothing (`pass`, `...`, a docstring, `return None`) in the run over
        the whole project: the step hook in this class and its subclasses (another file that
        defines it and names the class may hold one: not proven), the batch hooks
        (`on_validation_batch_end`, ...) in any class, a callback's too (only this file may define
        them). None otherwise."""
        receivers = frameworks.batch_receivers(function.name)
        linker = self.index.linker
        class_node = self.index.classes.get(function.class_name)
        if receivers is None or class_node is None or linker is None or not linker.whole_project():
            return None
        hooks, roots, owners = receivers
        bases = ancestors(self.index, class_node)
        tails = {owner.rsplit(".", 1)[-1] for owner in owners}
        if not any(b in owners or (b.rsplit(".", 1)[-1] in tails and b.split(".")[0] in roots) for b in bases):
            return None
        step = self.index.method(function.class_name, hooks[0])
        if step is None:
            return None
        own = str(linker.path)
        # the other methods a batch is handed to may be a callback's, of any class: none elsewhere
        elsewhere = linker.files_mentioning(*(f"def {hook}" for hook in hooks[1:]))
        # the step hook matters in this class and in its subclasses, which name it
        subclassing = set(linker.files_mentioning(f"def {hooks[0]}") or ()) \
            & set(linker.files_mentioning(function.class_name) or ())
        if elsewhere is None or any(not _same_file(where, own) for where in (*elsewhere, *subclassing)):
            return None
        family = {function.class_name} | {name for name, node in self.index.classes.items()
                                          if function.class_name in {b.rsplit(".", 1)[-1]
                                                                     for b in ancestors(self.index, node)}}
        defined = [f for f in self.index.functions
                   if f.name in hooks[1:] or f.name == hooks[0] and f.class_name in family]
        if not all(_does_nothing(f.node) for f in defined):
            return None
        return step.node

    def _hook_calls(self, function: FunctionInfo):
        """The framework never asks for the hook's loader: it goes where the project's own calls
        of the method take it (`next(iter(self.trainer.datamodule.test_dataloader()))`: one batch
        drawn; a call whose result is dropped takes it nowhere), in any file that can reach this one."""
        calls = list(self.index.linker.method_callers_by_file(function.name))
        if not calls:
            yield _Use("none", function.node, f"returned by the framework hook `{function.name}`, which nothing runs")
            return
        for where, use in calls:
            if use.result in ("drawn", "dropped"):
                yield _Use("none", function.node, f"one batch drawn from `{use.callee}()` in {where}")
            else:
                yield _Use("other", function.node,
                           f"returned by `{function.name}` to `{use.callee}()` in {where}, where the code is not followed")

    def _result(self, call: cst.Call, position: int | None, depth: int):
        """What a caller does with the returned loader (the element `position` of a returned tuple)."""
        index = self.index
        parent = index.parent(call)
        if isinstance(parent, cst.Expr):
            yield _Use("none", parent, "the returned value is dropped")
            return
        if position is None:
            yield from self._value(call, depth, False, ())
            return
        if isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1 \
                and isinstance(target := parent.targets[0].target, (cst.Tuple, cst.List)) \
                and len(target.elements) > position \
                and not any(isinstance(e, cst.StarredElement) for e in target.elements):
            element = target.elements[position].value
            if isinstance(element, cst.Name):
                yield from self._name(parent, element.value, depth, False, ())
                return
        yield _Use("other", parent if parent is not None else call, "the returned tuple is used as a whole")

    # -- an argument -------------------------------------------------------------------------
    def _argument(self, arg: cst.Arg, depth: int, grad_off: bool, flags: tuple):
        index = self.index
        call = index.parent(arg)
        if not isinstance(call, cst.Call):
            yield _Use("other", arg, "passed on")
            return
        scope = index.scope_at(call)
        callee = index.callee(call, scope)
        if callee is None:
            yield _Use("other", call, "handed to a function the code does not follow")
            return
        param = _parameter_for(callee, call, arg)
        if param is None:
            yield _Use("other", call, "handed to a function the code does not follow")
            return
        key = ("param", id(callee.node), param, grad_off or self.flow.under_no_grad(call))
        if key in self._seen:
            return
        self._seen.add(key)
        off = grad_off or self.flow.under_no_grad(call)
        inner_flags = tuple(sorted(literal_flags(call, callee, dict(flags)).items()))
        binding = next((b for b in callee.scope.bindings.get(param, ()) if b.kind == "param"), None)
        if binding is None:
            yield _Use("other", call, "handed to a function the code does not follow")
            return
        passes = False
        for node in index.subtree(callee.node.body):
            if isinstance(node, cst.Name) and node.value == param and self._reads(node) \
                    and binding in index.reaching_bindings(node, param, index.scope_at(node)):
                for use in self._read(node, depth + 1, off, inner_flags):
                    passes = passes or use.kind != "none"
                    yield use
        if callee.class_name is not None and not passes and not self._never_subclassed(callee.class_name):
            # a subclass (in any file) may override a method that does nothing with it here
            yield _Use("other", call, f"handed to the method `{callee.name}`, which a subclass may override")

    def _never_subclassed(self, class_name: str) -> bool:
        """In a run over the whole project, no class of the files that can reach this one names a
        base spelled `class_name` (its last dotted part): no subclass can override its methods."""
        linker = self.index.linker
        if linker is None or not linker.whole_project():
            return False
        classes = linker.classes_mentioning(class_name)
        if classes is None:
            return False
        return not any(base.rsplit(".", 1)[-1] == class_name for _, klass in classes for base in klass.bases)


def _dropped_result(index, call: cst.Call, position: int | None) -> _Use | None:
    """A call (of another file) whose returned loader (the element `position` of the returned tuple)
    goes nowhere: the result dropped, or the loader bound to a name nothing reads (`_Use` "none");
    None when it may be read."""
    parent = index.parent(call)
    if isinstance(parent, cst.Expr):
        return _Use("none", parent, "the returned value is dropped")
    if not (isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1):
        return None
    target = parent.targets[0].target
    if position is not None:
        if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) > position
                and not any(isinstance(e, cst.StarredElement) for e in target.elements)):
            return None
        target = target.elements[position].value
    if not isinstance(target, cst.Name):
        return None
    name = target.value
    function = index.function_at(parent)
    region = function.node if function is not None else index.module
    for node in index.subtree(region):
        if isinstance(node, cst.Name) and node.value == name and node is not target and not _stored(index, node):
            return None
    if function is None and not _unmentioned_elsewhere(index, name, importers_only=True):
        return None  # a module's name another file may import
    if function is not None and any(name in (n.value for n in walk(d) if isinstance(n, cst.Name))
                                    for d in walk(function.node) if isinstance(d, (cst.Global, cst.Nonlocal))):
        return None
    return _Use("none", parent, f"bound to `{name}`, which nothing reads")


def _stored(index, node: cst.Name) -> bool:
    """`node` only receives a value: an assignment's target, or an element of a target tuple."""
    current = node
    while True:
        parent = index.parent(current)
        if isinstance(parent, cst.Element) or isinstance(parent, (cst.Tuple, cst.List)):
            current = parent
            continue
        if isinstance(parent, cst.AssignTarget) and parent.target is current:
            return True
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.target is current:
            return True
        if isinstance(parent, cst.AnnAssign) and parent.target is current:
            return True
        return False


def _parameter_for(callee: FunctionInfo, call: cst.Call, arg: cst.Arg) -> str | None:
    params = [p.name.value for p in (*callee.node.params.posonly_params, *callee.node.params.params)]
    if callee.class_name and params and params[0] in ("self", "cls"):
        params = params[1:]
    if arg.keyword is not None:
        names = {*params, *(p.name.value for p in callee.node.params.kwonly_params)}
        return arg.keyword.value if arg.keyword.value in names else None
    if any(a.star for a in call.args):
        return None
    positional = positional_args(call)
    position = next((i for i, a in enumerate(positional) if a is arg), None)
    return params[position] if position is not None and position < len(params) else None


def _same_file(relative: str, path: str | None) -> bool:
    """`relative` (a project path from the root) names the file at `path`."""
    return path is not None and (path == relative or path.replace("\\", "/").endswith("/" + relative))


def _does_nothing(function: cst.FunctionDef) -> bool:
    """The body is only `pass`, `...`, strings (a docstring) and bare `return`/`return None`."""
    body = function.body
    if not isinstance(body, cst.IndentedBlock):
        statements = [body]
    else:
        statements = list(body.body)
    for statement in statements:
        if not isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            return False
        for small in statement.body:
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, (cst.Ellipsis, cst.SimpleString,
                                                                        cst.ConcatenatedString)):
                continue
            if isinstance(small, cst.Return) and (small.value is None or isinstance(small.value, cst.Name)
                                                  and small.value.value == "None"):
                continue
            return False
    return True


def _imported_head(expr: cst.BaseExpression, scope) -> bool:
    """`torch.zeros`, `np.mean`: an attribute chain on a name bound only by imports."""
    while type(expr) is cst.Attribute:
        expr = expr.value
    if type(expr) is not cst.Name:
        return False
    bindings = scope.lookup(expr.value)
    return bool(bindings) and all(b.kind == "import" for b in bindings)


def _del_target(index, node: cst.CSTNode) -> bool:
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, cst.Del):
            return True
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return False
    return False


def _combine(uses: list[_Use]) -> Reach:
    evaluations = [u for u in uses if u.kind == "eval"]
    others = [u for u in uses if u.kind == "other"]
    if evaluations:
        first = evaluations[0]
        return Reach(EVALUATES, first.node, first.text, only_evaluations=not others, kind=first.evidence)
    if others:
        return Reach(UNKNOWN, others[0].node, others[0].text)
    return Reach(UNUSED)


def loader_reach(ctx) -> LoaderReach:
    return LoaderReach(ctx)
