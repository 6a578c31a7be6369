"""Where a training loader's order comes from: samplers, generators, the epoch loop around it.

Shared by TL801 (the order never changes between epochs) and TL702 (a resume restarts it).

What it knows, for one file (`ctx.model(data_order)`):
- every sampler construction: `DistributedSampler(...)` (torch's, or a subclass of it that keeps
  its `__iter__`), and instances of the file's own sampler classes, described by what their
  `__iter__` reads: the attribute `set_epoch` writes (an epoch-keyed sampler, like torch's), an
  epoch it advances itself, or only a seed fixed at construction (one order for ever);
- the holder of an object (the name or `self.<attr>` an assignment binds it to), the DataLoaders
  built with a sampler (`sampler=`, `batch_sampler=BatchSampler(sampler, ...)`), and the loops
  that iterate a loader (through `enumerate`/`tqdm`/`zip`/`iter`);
- the epoch loop of a loader: the loop around the loop that iterates it (in the same function, or
  around the same-file calls of the function holding it), or a loop that hands the loader to a
  call that runs an epoch (a same-file function that trains, or a call that also receives an
  optimizer);
- whether `set_epoch` reaches a sampler: a `.set_epoch(...)` on it, on its loader (`loader.sampler`,
  `loader.batch_sampler.sampler`, `loader.set_epoch`), or inside a function the loader or sampler is
  handed to (same file, or a project file's summary); a receiver that cannot be told apart counts
  as reaching it (the rule then stays quiet).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from trainlint.model import frameworks
from trainlint.model.dataflow import dataflow
from trainlint.model.index import FunctionInfo, Scope, assigned_targets, dotted_name, keyword_value, positional_args, walk
from trainlint.model.roles import ACCELERATOR, ENGINE, OPTIMIZER, roles
from trainlint.model.summaries import FunctionSummary, iterated_names
from trainlint.model.training import calls_in, training_model

DISTRIBUTED_SAMPLERS = ("torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler")
# calls that hand the loader on unchanged, for the loop that iterates it
_WRAPPERS = frozenset({"enumerate", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "iter", "zip", "itertools.islice",
                       "trange"})
_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
# generator and RNG constructors that take a seed
SEEDED_RNG = frozenset({"torch.Generator", "numpy.random.RandomState", "numpy.random.default_rng",
                        "numpy.random.Generator", "random.Random"})
# "epoch": keyed on an epoch that `set_epoch` sets; "advances": changes by itself every pass;
# "fixed": one seeded order for ever; "global": draws from a global RNG (changes every pass)
EPOCH_KEYED, ADVANCES, FIXED, GLOBAL = "epoch", "advances", "fixed", "global"


@dataclass(eq=False)
class SamplerBuild:
    """One sampler construction and what the file does with it."""

    call: cst.Call
    scope: Scope
    function: FunctionInfo | None
    kind: str  # EPOCH_KEYED | FIXED (other kinds are not recorded)
    what: str  # for messages: `DistributedSampler`, `ShardSampler` (a class of this file)
    shuffle_off: bool = False  # `shuffle=False`
    holder: str | None = None  # `sampler`, `self.train_sampler`
    loader_call: cst.Call | None = None
    loader: str | None = None  # the holder of the DataLoader built with it


def holder_of(index, node: cst.CSTNode) -> str | None:
    """`x` / `self.x` for `x = node` / `self.x = node` (an annotated assignment too), also as one
    branch of a conditional expression (`x = RandomSampler(d) if single else DistributedSampler(d)`)."""
    parent = index.parent(node)
    while isinstance(parent, cst.IfExp) and node is not parent.test:
        node, parent = parent, index.parent(parent)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        return dotted_name(parent.targets[0].target)
    if isinstance(parent, cst.AnnAssign) and parent.value is node:
        return dotted_name(parent.target)
    return None


def same_holder(text: str | None, holder: str | None) -> bool:
    """`text` is `holder` or an attribute path under it (`loader.sampler`)."""
    return bool(text and holder) and (text == holder or text.startswith(holder + "."))


class DataOrder:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.index = ctx.index
        self.roles = ctx.model(roles)
        self.training = ctx.model(training_model)
        self.samplers: list[SamplerBuild] = []
        self._build()

    # -- samplers ---------------------------------------------------------------------------------
    def _build(self) -> None:
        for site in self.index.calls:
            found = self.sampler_kind(site.node, site.scope)
            if found is None:
                continue
            kind, what = found
            shuffle = keyword_value(site.node, "shuffle")
            build = SamplerBuild(site.node, site.scope, site.function, kind, what,
                                 shuffle_off=isinstance(shuffle, cst.Name) and shuffle.value == "False",
                                 holder=holder_of(self.index, site.node))
            build.loader_call = self._loader_built_with(build)
            if build.loader_call is not None:
                build.loader = holder_of(self.index, build.loader_call)
            self.samplers.append(build)

    def views(self, build: SamplerBuild) -> list[SamplerBuild]:
        """The sampler as its own function holds it; as each same-file caller holds it when the
        function returns it and its loader (`sampler, loader = build_loaders(...)`) or returns the
        loader alone (`loader = make_loader(...)`, `self.loader = self._make_loader(...)`); and as
        a class of the file holds a loader handed to its constructor (`self.data = data`)."""
        found = [build] + self._tuple_views(build) + self._returned_loader_views(build)
        for view in list(found):
            found.extend(self._constructor_views(view))
        return found

    def _returned_loader_views(self, build: SamplerBuild) -> list[SamplerBuild]:
        """The loader as the callers of a function that returns it bind it."""
        function = build.function
        if function is None or build.loader_call is None:
            return []
        returned = any(isinstance(node, cst.Return) and node.value is not None
                       and (node.value is build.loader_call or (build.loader is not None
                                                               and dotted_name(node.value) == build.loader))
                       for node in walk(function.node.body))
        if not returned:
            return []
        found = []
        for site in self.index.callers(function):
            loader = holder_of(self.index, site.node)
            if loader is not None:
                found.append(SamplerBuild(build.call, site.scope, site.function, build.kind, build.what,
                                          build.shuffle_off, None, build.loader_call, loader))
        return found

    def _constructor_views(self, view: SamplerBuild) -> list[SamplerBuild]:
        """The loader as `self.<attr>` of a class of the file whose constructor is handed it by
        name (`Trainer(model, loader)` with `self.train_data = train_data` in `__init__`)."""
        if view.loader is None or "." in view.loader:
            return []
        found = []
        for site in self.index.calls:
            func = site.node.func
            if not (isinstance(func, cst.Name) and func.value in self.index.classes
                    and site.function is view.function and site.scope is view.scope):
                continue
            init = self.index.method(func.value, "__init__")
            if init is None:
                continue
            params = [p.name.value for p in (*init.node.params.posonly_params, *init.node.params.params,
                                                 *init.node.params.kwonly_params)]
            for param in params:
                if dotted_name(self.index.argument_for(site.node, init, param)) != view.loader:
                    continue
                for node in walk(init.node.body):
                    if isinstance(node, cst.Assign) and len(node.targets) == 1 \
                            and isinstance(node.value, cst.Name) and node.value.value == param:
                        attr = dotted_name(node.targets[0].target)
                        if attr is not None and attr.startswith("self.") and attr.count(".") == 1:
                            found.append(SamplerBuild(view.call, init.scope, init, view.kind, view.what,
                                                      view.shuffle_off, None, view.loader_call, attr))
        return found

    def _tuple_views(self, build: SamplerBuild) -> list[SamplerBuild]:
        found: list[SamplerBuild] = []
        function = build.function
        if function is None:
            return found
        positions: dict[str, int] = {}
        for node in walk(function.node.body):
            if isinstance(node, cst.Return) and isinstance(node.value, cst.Tuple):
                for number, element in enumerate(node.value.elements):
                    text = dotted_name(element.value)
                    if text in (build.holder, build.loader):
                        positions[text] = number
        if not positions:
            return found
        for site in self.index.callers(function):
            parent = self.index.parent(site.node)
            if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1
                    and isinstance(parent.targets[0].target, (cst.Tuple, cst.List))):
                continue
            targets = [dotted_name(e.value) for e in parent.targets[0].target.elements]
            def at(holder):
                number = positions.get(holder) if holder else None
                return targets[number] if number is not None and number < len(targets) else None
            found.append(SamplerBuild(build.call, site.scope, site.function, build.kind, build.what,
                                      build.shuffle_off, at(build.holder), build.loader_call, at(build.loader)))
        return found

    def sampler_kind(self, call: cst.Call, scope: Scope) -> tuple[str, str] | None:
        name = self.index.resolve(call.func, scope)
        if name in DISTRIBUTED_SAMPLERS or (name or "").endswith(".DistributedSampler") \
                or name == "DistributedSampler":
            return EPOCH_KEYED, "DistributedSampler"
        if isinstance(call.func, cst.Name) and call.func.value in self.index.classes:
            kind = self.class_order(call.func.value)
            if kind in (EPOCH_KEYED, FIXED):
                return kind, call.func.value
        return None

    def class_order(self, class_name: str, seen: frozenset = frozenset()) -> str | None:
        """How a sampler class of this file orders its data (see the kinds above), or None."""
        node = self.index.classes.get(class_name)
        if node is None or class_name in seen:
            return None
        iterate = self.index.method(class_name, "__iter__")
        bases = [dotted_name(b.value) for b in node.bases]
        own_iter = iterate is not None and iterate.class_name == class_name
        if not own_iter:
            for base in bases:
                resolved = self.index.resolve(cst.parse_expression(base), self.index.module_scope) if base else None
                if resolved in DISTRIBUTED_SAMPLERS or (base or "").endswith("DistributedSampler"):
                    return EPOCH_KEYED
                if base in self.index.classes:
                    return self.class_order(base, seen | {class_name})
            return None
        read = _self_attributes_read(iterate.node)
        written_in_iter = _self_attributes_written(iterate.node)
        setter = self.index.method(class_name, "set_epoch")
        if setter is not None and read & _self_attributes_written(setter.node):
            return ADVANCES if read & _self_attributes_written(setter.node) & written_in_iter else EPOCH_KEYED
        if written_in_iter & read:
            return ADVANCES  # `self.epoch += 1` in `__iter__`
        seeds = [call for call in calls_in(iterate.node.body) if self._seeds_rng(call, iterate.scope)]
        if not seeds:
            return GLOBAL
        for seed in seeds:
            attrs = {dotted_name(n) for n in walk(seed) if isinstance(n, cst.Attribute)}
            attrs = {a[5:] for a in attrs if a and a.startswith("self.")}
            if any(self._written_outside_init(class_name, attr) for attr in attrs):
                return ADVANCES
        return FIXED

    def _seeds_rng(self, call: cst.Call, scope: Scope) -> bool:
        """`torch.Generator().manual_seed(s)`, `g.manual_seed(s)`, `np.random.RandomState(s)`, ...
        with a seed argument."""
        name = self.index.resolve(call.func, scope) or ""
        if name in SEEDED_RNG or name in ("numpy.random.seed", "random.seed", "torch.manual_seed"):
            return bool(call.args)
        return isinstance(call.func, cst.Attribute) and call.func.attr.value in ("manual_seed", "seed") \
            and bool(call.args)

    def _written_outside_init(self, class_name: str, attr: str) -> bool:
        for function in self.index.functions:
            if function.class_name == class_name and function.name != "__init__" \
                    and attr in _self_attributes_written(function.node):
                return True
        return False

    def _loader_built_with(self, build: SamplerBuild) -> cst.Call | None:
        """The call that builds a loader with this sampler (directly, by its holder, or in a
        BatchSampler): the DataLoader call, with the sampler as its keyword or in a `**mapping`
        (`loader_kwargs["sampler"] = sampler`); or, when a same-file factory hands its `**kwargs`
        on to the DataLoader and returns it, the factory's call that passes the sampler
        (`build_loader(ds, sampler=sampler)`)."""
        flow = self.ctx.model(dataflow)
        for site in self.index.calls:
            if (self.index.resolve(site.node.func, site.scope) or "").rsplit(".", 1)[-1] != "DataLoader":
                continue
            for word in ("sampler", "batch_sampler"):
                for value, writer in flow.keyword_values(site.node, word):
                    if not self._holds_sampler(value, build, self.index.scope_at(value)):
                        continue
                    if writer is site.node or not self._returns(site):
                        return site.node
                    return writer
        return None

    def _returns(self, site) -> bool:
        """The function holding the DataLoader call returns it (or the name it is bound to)."""
        if site.function is None:
            return False
        holder = holder_of(self.index, site.node)
        return any(isinstance(node, cst.Return) and node.value is not None
                   and (node.value is site.node or (holder is not None and dotted_name(node.value) == holder))
                   for node in walk(site.function.node.body))

    def _holds_sampler(self, value: cst.BaseExpression, build: SamplerBuild, scope: Scope, depth: int = 0) -> bool:
        if value is build.call:
            return True
        if depth > 2:
            return False
        if isinstance(value, cst.IfExp):
            return any(self._holds_sampler(v, build, scope, depth + 1) for v in (value.body, value.orelse))
        if isinstance(value, cst.Call):  # BatchSampler(sampler, ...)
            return any(self._holds_sampler(a.value, build, scope, depth + 1) for a in value.args)
        text = dotted_name(value)
        if text is None or build.holder is None or text != build.holder:
            if isinstance(value, cst.Name):  # `batch_sampler = BatchSampler(sampler, 32, True)`
                values = [b.value for b in scope.lookup(value.value) if b.value is not None]
                return any(self._holds_sampler(v, build, scope, depth + 1) for v in values)
            return False
        return self._same_place(value, build)

    def _same_place(self, use: cst.CSTNode, build: SamplerBuild, holder: str | None = None) -> bool:
        """A plain name is the sampler's holder (or `holder`, its loader's) in the same function;
        `self.x`, in the same class."""
        function = self.index.function_at(use)
        holder = holder or build.holder
        if holder and holder.startswith("self."):
            return function is not None and build.function is not None and \
                function.class_name == build.function.class_name
        return function is build.function or (build.function is None and function is None)

    # -- loops ------------------------------------------------------------------------------------
    def iterated(self, loop: cst.For) -> cst.BaseExpression:
        """What a `for` loop iterates, through `enumerate`/`tqdm`/`zip`/`iter`/`islice`."""
        expr = loop.iter
        scope = self.index.scope_at(loop)
        for _ in range(4):
            if isinstance(expr, cst.Name):  # `epoch_iterator = tqdm(train_dataloader)`
                values = [b.value for b in scope.lookup(expr.value) if b.kind == "assign" and b.value is not None]
                if len(values) == 1 and isinstance(values[0], cst.Call):
                    expr = values[0]
            if not isinstance(expr, cst.Call):
                break
            name = self.index.resolve(expr.func, scope) or ""
            if name not in _WRAPPERS and name.rsplit(".", 1)[-1] not in _WRAPPERS or not positional_args(expr):
                break
            expr = positional_args(expr)[0].value
        return expr

    def named_iterable(self, loop: cst.For) -> cst.BaseExpression:
        """What a `for` loop iterates through the wrappers only, stopping at a name (`loader`
        where `loader = make_loader(...)`: the factory's callers hold its loader by that name)."""
        expr = loop.iter
        scope = self.index.scope_at(loop)
        for _ in range(4):
            if not isinstance(expr, cst.Call) or not positional_args(expr):
                break
            name = self.index.resolve(expr.func, scope) or ""
            if name not in _WRAPPERS and name.rsplit(".", 1)[-1] not in _WRAPPERS:
                break
            expr = positional_args(expr)[0].value
        return expr

    def loops_over(self, holder: str | None, call: cst.Call | None, where: SamplerBuild) -> list[cst.For]:
        """The `for` loops over the loader (by its holder, or over the DataLoader call itself)."""
        found = []
        for loop in self.index.loops:
            if not isinstance(loop, cst.For):
                continue
            iterated = self.iterated(loop)
            if iterated is call or any(holder is not None and dotted_name(it) == holder
                                       and self._same_place(it, where, holder)
                                       for it in (iterated, self.named_iterable(loop))):
                found.append(loop)
        return found

    def enclosing_loop(self, node: cst.CSTNode) -> cst.For | cst.While | None:
        """The nearest loop whose body (not its iterable) holds `node`, in the same function."""
        child = node
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.For, cst.While)) and child is ancestor.body:
                return ancestor
            if isinstance(ancestor, _NESTED):
                return None
            child = ancestor
        return None

    def epoch_loops(self, build: SamplerBuild) -> list[tuple[cst.For | cst.While, cst.CSTNode]]:
        """(epoch loop, the loop or call inside it that runs one epoch over the sampler's loader),
        for a loader a training loop iterates."""
        holder = build.loader
        found: list[tuple[cst.For | cst.While, cst.CSTNode]] = []
        training_loops = {t.node for t in self.training.loops}
        for loop in self.loops_over(holder, build.loader_call, build):
            if loop not in training_loops:
                continue
            outer = self.enclosing_loop(loop)
            if outer is not None:
                found.append((outer, loop))
                continue
            function = self.index.function_at(loop)
            if function is not None:
                for site in self.index.callers(function):
                    caller_loop = self.enclosing_loop(site.node)
                    if caller_loop is not None:
                        found.append((caller_loop, site.node))
        if holder is not None:
            for site in self.index.calls:
                if not any(dotted_name(a.value) == holder for a in site.node.args) \
                        or not self._same_place(site.node, build, holder):
                    continue
                outer = self.enclosing_loop(site.node)
                if outer is not None and self._runs_an_epoch(site.node, site.scope, holder):
                    found.append((outer, site.node))
            found += self._engine_epochs(holder, build)
        return [(outer, inner) for outer, inner in found if repeats(outer, self.index)]

    def _engine_epochs(self, holder: str, build: SamplerBuild) -> list[tuple[cst.For | cst.While, cst.CSTNode]]:
        """A framework engine that trains a whole window per call on an iterator of the loader
        (DeepSpeed's pipeline engine: `data_iter = iter(loader)`, then `engine.train_batch(data_iter)`
        in a loop, trainlint/frameworks/deepspeed.toml `engine_batch` entries): the loop holding
        those calls runs one epoch, and the loop around it is the epoch loop."""
        methods = frameworks.engine_batches("train")
        if not methods:
            return []
        iterators: dict[str, cst.Call] = {}  # a name bound to `iter(<loader>)` -> that call
        made: list[cst.Call] = []
        for site in self.index.calls:
            func = site.node.func
            if not (isinstance(func, cst.Name) and func.value == "iter" and not site.scope.lookup("iter")):
                continue
            args = positional_args(site.node)
            if not (args and dotted_name(args[0].value) == holder and self._same_place(site.node, build, holder)):
                continue
            made.append(site.node)
            statement = self.index.enclosing_statement(site.node)
            if isinstance(statement, cst.Assign) and statement.value is site.node and len(statement.targets) == 1 \
                    and isinstance(statement.targets[0].target, cst.Name):
                iterators[statement.targets[0].target.value] = site.node
        if not made:
            return []
        found = []
        for site in self.index.calls:
            func = site.node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value in methods
                    and self.roles.of(func.value, site.scope) == ENGINE):
                continue
            handed = any(a.value in made or isinstance(a.value, cst.Name) and a.value.value in iterators
                         for a in site.node.args)
            inner = self.enclosing_loop(site.node) if handed else None
            outer = self.enclosing_loop(inner) if inner is not None else None
            if outer is not None:
                found.append((outer, inner))
        return found

    def _runs_an_epoch(self, call: cst.Call, scope: Scope, holder: str) -> bool:
        """A call handed the loader that trains on it: a same-file function holding a training loop,
        or a call that also receives an optimizer. Not when the function's training loop goes
        through another of its parameters (`fit_one_epoch(..., gen, gen_val, ...)` trains on `gen`,
        and `gen_val` only feeds its evaluation), here or in a project file's summary."""
        callee = self.index.callee(call, scope)
        if callee is not None:
            loops = [t for t in self.training.loops if t.function is callee]
            if not loops:
                return False
            params = _params(callee)
            trained = {name for t in loops if isinstance(t.node, cst.For)
                       for name in iterated_names(self.iterated(t.node)) if name in params}
            return not trained or _receiving_param(call, params, holder) in trained
        if not any(self.roles.of(a.value, scope) == OPTIMIZER for a in call.args):
            return False
        summary = self.index.summary_of(call.func, scope)
        if isinstance(summary, FunctionSummary) and summary.trains_over:
            return _receiving_param(call, summary.params, holder) in summary.trains_over
        return True

    # -- set_epoch ----------------------------------------------------------------------------------
    def set_epoch_reaches(self, build: SamplerBuild) -> bool:
        """Some `set_epoch` may reach the sampler (see the module docstring)."""
        known = {b.holder for b in self.samplers if b.holder} | {b.loader for b in self.samplers if b.loader}
        mine = {build.holder, build.loader} - {None}
        for site in self.index.calls:
            func = site.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "set_epoch":
                text = dotted_name(func.value)
                if text is None or any(same_holder(text, h) for h in mine):
                    return True
                if not any(same_holder(text, h) for h in known):
                    return True  # a receiver that cannot be told apart: it may be ours
        for site in self.index.calls:
            if not any(dotted_name(a.value) in mine for a in site.node.args):
                continue
            if self._hands_on(site.node, site.scope):
                return True
        return False

    def _hands_on(self, call: cst.Call, scope: Scope) -> bool:
        """The sampler or loader goes to a call that may set its epoch: a same-file function or
        class that calls `set_epoch`, a project function whose summary says so, `prepare` of an
        Accelerator (its loaders set their sampler's epoch on each pass), or a call we cannot see
        into. Not: DataLoader/BatchSampler, `len`, `print`, the iteration wrappers."""
        func = call.func
        name = self.index.resolve(func, scope) or ""
        if name.rsplit(".", 1)[-1] in _HARMLESS or name in _WRAPPERS:
            return False
        if isinstance(func, cst.Attribute) and func.attr.value in frameworks.epoch_setting_wrappers():
            return self.roles.of(func.value, scope) in (ACCELERATOR, None)
        callee = self.index.callee(call, scope)
        if callee is not None:
            return _calls_set_epoch(callee.node)
        if isinstance(func, cst.Name) and func.value in self.index.classes:
            return any(_calls_set_epoch(f.node) for f in self.index.functions if f.class_name == func.value)
        summary = self.index.summary_of(func, scope)
        if isinstance(summary, FunctionSummary):
            return summary.sets_epoch
        return True


_HARMLESS = frozenset({"DataLoader", "BatchSampler", "len", "print", "list", "next", "isinstance", "str", "iter"})


def _params(function: FunctionInfo) -> tuple[str, ...]:
    params = [p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params)]
    if function.class_name and params and params[0] in ("self", "cls"):
        params = params[1:]
    return tuple(params)


def _receiving_param(call: cst.Call, params: tuple[str, ...], holder: str) -> str | None:
    """The parameter of the called function that `holder` is passed to."""
    positional = positional_args(call)
    for arg in call.args:
        if dotted_name(arg.value) != holder:
            continue
        if arg.keyword is not None:
            return arg.keyword.value
        if arg.star == "" and arg in positional and positional.index(arg) < len(params):
            return params[positional.index(arg)]
    return None


def _calls_set_epoch(function: cst.FunctionDef) -> bool:
    return any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "set_epoch" for c in calls_in(function.body))


def repeats(loop: cst.For | cst.While, index=None) -> bool:
    """The loop may run more than once: not `for _ in range(1)`, nor (given the file's `index`)
    `for epoch in range(max_epoch)` with every binding of `max_epoch` a literal 0 or 1 and nothing
    that can rebind it otherwise (a `global max_epoch` in a function, `exec`/`globals()`/`vars()`
    as a configurator runs them)."""
    if isinstance(loop, cst.For) and isinstance(loop.iter, cst.Call) and dotted_name(loop.iter.func) == "range":
        args = positional_args(loop.iter)
        if any(arg.star for arg in loop.iter.args):
            return True
        if len(args) == 1 and _at_most_one(args[0].value, loop, index):
            return False
        if len(args) == 2:
            # `range(0, num_epochs)`, `range(start, stop)` with literal bounds: as many passes as
            # the largest stop minus the smallest start
            starts = _literal_values(args[0].value, loop, index)
            stops = _literal_values(args[1].value, loop, index)
            if starts and stops and max(stops) - min(starts) <= 1:
                return False
    return True


def _at_most_one(bound: cst.BaseExpression, loop: cst.For, index) -> bool:
    values = _literal_values(bound, loop, index)
    return bool(values) and max(values) <= 1


def _literal_values(bound: cst.BaseExpression, loop: cst.For, index) -> list[int]:
    """The integers `bound` can hold: a literal, or a name every binding of which is a literal
    integer and that nothing can rebind otherwise; empty when not known."""
    if isinstance(bound, cst.Integer):
        return [bound.evaluated_value]
    if not isinstance(bound, cst.Name) or index is None:
        return []
    bindings = index.scope_at(loop).lookup(bound.value)
    if not bindings or not all(b.kind == "assign" and isinstance(b.value, cst.Integer) for b in bindings):
        return []
    for node in walk(index.module):
        if isinstance(node, cst.Global) and any(n.name.value == bound.value for n in node.names):
            return []
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) \
                and node.func.value in ("exec", "eval", "globals", "vars", "setattr") \
                and not _only_read(index, node):
            return []
    return [b.value.evaluated_value for b in bindings]


def _only_read(index, call: cst.Call) -> bool:
    """`globals().items()` (`.keys()`, `.values()`, `.get(...)`, `.copy()`): the namespace read, not written."""
    parent = index.parent(call)
    return isinstance(call.func, cst.Name) and call.func.value in ("globals", "vars") \
        and isinstance(parent, cst.Attribute) and parent.value is call \
        and parent.attr.value in ("items", "keys", "values", "get", "copy")


def _self_attributes_read(function: cst.FunctionDef) -> set[str]:
    written = set()
    for node in walk(function.body):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
            written.add(node.attr.value)
    return written


def _self_attributes_written(function: cst.FunctionDef) -> set[str]:
    found = set()
    for node in walk(function.body):
        for target in assigned_targets(node):
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
                found.add(target.attr.value)
    return found


def data_order(ctx) -> DataOrder:
    """The file's data-order facts, shared by TL801 and TL702: `ctx.model(data_order)`."""
    return DataOrder(ctx)


def seeded_generator(index, expr: cst.BaseExpression | None, scope: Scope, before: cst.CSTNode) -> bool:
    """`expr` (a loader's `generator=`) is a torch generator seeded with a value fixed for the run,
    so the order it shuffles is the same from run to run: `torch.Generator().manual_seed(seed)`, or
    a name every binding of which is that, or a name bound once to `torch.Generator()` that
    `name.manual_seed(seed)` seeds in its function before `before`. A seed computed by a call
    (`time.time_ns()`, `torch.seed()`, `random.randint(...)`) may differ every run: not fixed."""
    def fixed(call: cst.Call) -> bool:
        return len(call.args) == 1 and not call.args[0].star \
            and not any(isinstance(n, cst.Call) for n in walk(call.args[0].value))

    def seeded_call(value: cst.BaseExpression | None) -> bool:
        return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
            and value.func.attr.value == "manual_seed" and isinstance(value.func.value, cst.Call) \
            and index.resolve(value.func.value.func, index.scope_at(value)) == "torch.Generator" and fixed(value)

    if seeded_call(expr):
        return True
    if not isinstance(expr, cst.Name):
        return False
    bindings = scope.lookup(expr.value)
    if not bindings or any(b.value is None for b in bindings):
        return False
    if all(seeded_call(b.value) for b in bindings):
        return True
    if len(bindings) != 1 or not isinstance(built := bindings[0].value, cst.Call) \
            or index.resolve(built.func, index.scope_at(built)) != "torch.Generator":
        return False
    function = index.function_at(before)
    region = function.node.body if function is not None else index.module
    around = {id(a) for a in index.ancestors(before)}

    def runs_before(call: cst.Call) -> bool:
        """Written before `before`, inside no branch or loop that does not also hold `before`."""
        if index.place.get(call, -1) >= index.place.get(before, -1):
            return False
        for ancestor in index.ancestors(call):
            if ancestor is region:
                return True
            if isinstance(ancestor, (cst.If, cst.For, cst.While, cst.Try, cst.FunctionDef, cst.Lambda)) \
                    and id(ancestor) not in around:
                return False
        return True

    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "manual_seed"
               and isinstance(n.func.value, cst.Name) and n.func.value.value == expr.value and fixed(n)
               and index.scope_at(n) is scope and runs_before(n)
               for n in index.subtree(region))


def seeded_before_each_pass(index, call: cst.Call) -> bool:
    """The shuffling `DataLoader(...)` `call` (no `generator=`, `sampler=` or `**kwargs`: its
    order comes from torch's global generator when an iterator is made) is bound to a local name
    read only as the loader a `for` goes through (`for b in loader`, `enumerate(loader)`, `tqdm(...)`),
    each such `for` written directly after `torch.manual_seed(seed)` in its block with a seed no
    call computes: every pass starts the sampler from the same state, so the order is the same on
    every run. Another read (handed on, returned, `iter(loader)` kept), a statement between the
    seeding and the loop, or a seed from the clock leaves the order unknown."""
    if any(a.star for a in call.args) or any(keyword_value(call, w) is not None
                                             for w in ("generator", "sampler", "batch_sampler")):
        return False
    statement = index.parent(call)
    if not (isinstance(statement, cst.Assign) and statement.value is call and len(statement.targets) == 1
            and isinstance(statement.targets[0].target, cst.Name)):
        return False
    name = statement.targets[0].target.value
    function = index.function_at(call)
    if function is None or len(function.scope.bindings.get(name, ())) != 1:
        return False
    reads = [n for n in walk(function.node) if isinstance(n, cst.Name) and n.value == name
             and n is not statement.targets[0].target
             and not (isinstance(index.parent(n), cst.Attribute) and index.parent(n).attr is n)]
    return bool(reads) and all(_seeded_loop(index, read, function) for read in reads)


def _seeded_loop(index, read: cst.Name, function: FunctionInfo) -> bool:
    node = read
    while True:  # through the wrappers that hand the loader on unchanged
        parent = index.parent(node)
        if isinstance(parent, cst.For) and parent.iter is node:
            loop = parent
            break
        arg, wrapper = parent, index.parent(parent)
        if not (isinstance(arg, cst.Arg) and not arg.star and arg.keyword is None and isinstance(wrapper, cst.Call)
                and wrapper.args[0] is arg
                and index.resolve(wrapper.func, index.scope_at(wrapper)) in _WRAPPERS - {"iter", "zip"}):
            return False
        node = wrapper
    if index.function_at(loop) is not function:
        return False
    block = index.parent(loop)
    body = list(getattr(block, "body", ()))
    if loop not in body or body.index(loop) == 0:
        return False
    previous = body[body.index(loop) - 1]
    if not (isinstance(previous, cst.SimpleStatementLine) and len(previous.body) == 1
            and isinstance(previous.body[0], cst.Expr) and isinstance(seed := previous.body[0].value, cst.Call)):
        return False
    return index.resolve(seed.func, index.scope_at(seed)) == "torch.manual_seed" and len(seed.args) == 1 \
        and not seed.args[0].star and not any(isinstance(n, cst.Call) for n in walk(seed.args[0].value))
