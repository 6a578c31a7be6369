"""Datasets that order themselves, from the framework models' `dataset_*` entries (HF `datasets`):
which dataset object an expression holds, of which class, shuffled by which calls; the loaders
built on one; and whether its epoch is ever moved.

Shared by TL801 (`ctx.model(dataset_order)`). Everything is asked of resolved imports and the
entries of trainlint/frameworks/*.toml, never of a variable's name:

- `dataset(expr)`: the dataset an expression holds (`DatasetValue`: its class, the shuffle calls in
  its making, the node that made the object). A `dataset_source` call makes one (`load_dataset(...,
  streaming=True)`: an `IterableDataset`); a `dataset_combine` call one of the class of what it is
  handed; a method of a dataset class with no entry (`map`, `with_format`, `filter`, `take`) and a
  subscript (`dsd["train"]`) a new object of the same class; a `dataset_shuffle` method the same
  class, shuffled. Names and `self.<attr>` are followed to the value that reaches them. Two
  expressions hold the same object when they were made by the same node: `ds.set_epoch(e)` moves
  only the object `ds` holds, not one `ds.with_format("torch")` made from it (each keeps its own
  epoch: datasets' `IterableDataset.set_epoch` sets `self._epoch`, and a derived dataset starts at 0).
- `shuffled_loaders`: every DataLoader built on a dataset whose making holds an epoch-keyed shuffle
  (a `dataset_shuffle` of a class with an `epoch_setter`), as a `SamplerBuild` view (the shuffle call
  in the place of the sampler), so that data_order's epoch loops and hand-offs apply to it.
- `epoch_moved(view, made)`: some `set_epoch` may reach the object the loader iterates.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from trainlint.model import frameworks
from trainlint.model.data_order import EPOCH_KEYED, FIXED, SamplerBuild, data_order, holder_of, same_holder
from trainlint.model.dataflow import dataflow
from trainlint.model.index import Scope, dotted_name, keyword_value, positional_args

_DEPTH = 12


@dataclass(frozen=True, eq=False)
class DatasetValue:
    cls: str  # the dataset class, as the entries name it: `datasets.IterableDataset`
    #: the dataset_shuffle calls in its making, each with its entry (epoch-keyed or one permutation)
    shuffles: tuple[tuple[cst.Call, frameworks.Entry], ...]
    made_by: cst.CSTNode  # the expression that made this object


@dataclass(eq=False)
class ShuffledLoader:
    """A loader (or a loop) over a dataset object made with an epoch-keyed shuffle."""

    view: SamplerBuild  # `call`: the shuffle; `loader_call`/`loader`: the DataLoader and its holder
    made: DatasetValue  # the dataset object the loader iterates
    shuffle: cst.Call
    what: str  # `IterableDataset.shuffle`
    kind: str  # EPOCH_KEYED: moved only by `set_epoch`; FIXED: one permutation, under a loader that keeps it


class DatasetOrder:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.index = ctx.index
        self.flow = ctx.model(dataflow)
        self.order = ctx.model(data_order)
        self._memo: dict[int, DatasetValue | None] = {}
        self.shuffled_loaders: list[ShuffledLoader] = []
        self._build()

    # -- what an expression holds ---------------------------------------------------------------
    def dataset(self, expr: cst.BaseExpression | None, depth: int = 0) -> DatasetValue | None:
        if expr is None or depth > _DEPTH:
            return None
        key = id(expr)
        if key not in self._memo:
            self._memo[key] = None  # a cycle through names: unknown
            self._memo[key] = self._dataset(expr, depth)
        return self._memo[key]

    def _dataset(self, expr: cst.BaseExpression, depth: int) -> DatasetValue | None:
        if isinstance(expr, cst.Name):
            value = self._value_of_name(expr)
            return self.dataset(value, depth + 1)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            values = self.index.self_attribute_values(expr.attr.value, self.index.scope_at(expr))
            return self.dataset(values[0], depth + 1) if len(values) == 1 else None
        if isinstance(expr, cst.Subscript):  # `dsd["train"]`: a split, of the same class
            inner = self.dataset(expr.value, depth + 1)
            return DatasetValue(inner.cls, inner.shuffles, expr) if inner is not None else None
        if isinstance(expr, cst.Call):
            return self._call(expr, depth)
        return None

    def _value_of_name(self, name: cst.Name) -> cst.BaseExpression | None:
        """The value that reaches a use of a name: the last assignment before it in its function;
        for a name of an enclosing scope (a module-level dataset used in a function), the last
        assignment of that scope (what the function sees when it runs after the module's code)."""
        binding = self.flow.reaching(name)
        if binding is None:
            bindings = self.index.scope_at(name).lookup(name.value)
            if not bindings or any(b.kind not in ("assign",) for b in bindings):
                return None
            binding = max(bindings, key=lambda b: self.flow.position(b.node))
        if binding.kind != "assign" or binding.value is None:
            return None
        if not isinstance(binding.node, (cst.Assign, cst.AnnAssign)):
            return None
        targets = binding.node.targets if isinstance(binding.node, cst.Assign) else ()
        if any(not isinstance(t.target, (cst.Name, cst.Attribute)) for t in targets):
            return None  # tuple unpacking: which element is not followed
        return binding.value

    def _call(self, call: cst.Call, depth: int) -> DatasetValue | None:
        scope = self.index.scope_at(call)
        entry = self._entry(call.func, scope)
        if entry is not None and entry.kind == "dataset_source":  # reached through an import
            cls = _returned_class(entry, call)
            return DatasetValue(cls, (), call) if cls is not None else None
        if entry is not None and entry.kind == "dataset_combine":
            handed = self._handed(call, depth)
            classes = {d.cls for d in handed}
            if not handed or len(classes) != 1:
                return None
            return DatasetValue(classes.pop(), tuple(s for d in handed for s in d.shuffles), call)
        if not isinstance(call.func, cst.Attribute):
            return None
        receiver = self.dataset(call.func.value, depth + 1)
        if receiver is None:
            return None
        method = frameworks.lookup(f"{receiver.cls}.{call.func.attr.value}")
        if method is None:
            return DatasetValue(receiver.cls, receiver.shuffles, call)  # `map`, `with_format`, ...
        if method.kind == "dataset_source":
            cls = _returned_class(method, call)
            return DatasetValue(cls, receiver.shuffles, call) if cls is not None else None
        if method.kind == "dataset_shuffle":
            return DatasetValue(receiver.cls, receiver.shuffles + ((call, method),), call)
        return None  # `set_epoch` returns nothing

    def _entry(self, func: cst.BaseExpression, scope: Scope):
        name = self.index.resolve(func, scope)
        return frameworks.lookup(name) if name else None

    def _handed(self, call: cst.Call, depth: int) -> list[DatasetValue]:
        """The datasets a `dataset_combine` call is handed: its first argument, or the elements of
        a list or tuple there; empty when one of them is not a known dataset."""
        args = positional_args(call)
        if not args:
            return []
        first = args[0].value
        items = [e.value for e in first.elements] if isinstance(first, (cst.List, cst.Tuple)) else [first]
        found = [self.dataset(item, depth + 1) for item in items]
        return [] if any(d is None for d in found) else found

    # -- loaders over a shuffled dataset ---------------------------------------------------------
    def _build(self) -> None:
        for site in self.index.calls:
            if (self.index.resolve(site.node.func, site.scope) or "").rsplit(".", 1)[-1] != "DataLoader":
                continue
            argument = keyword_value(site.node, "dataset")
            if argument is None and positional_args(site.node):
                argument = positional_args(site.node)[0].value
            self._add(self.dataset(argument), site.node, site.scope, site.function, site.node)
        # a training loop over the dataset itself (`for batch in ds`, `for batch in ds.iter(batch_size=8)`)
        for training in self.order.training.loops:
            if not isinstance(training.node, cst.For):
                continue
            iterated = self.order.iterated(training.node)
            if isinstance(iterated, cst.Call) and \
                    (self.index.resolve(iterated.func, self.index.scope_at(iterated)) or "").endswith("DataLoader"):
                continue
            self._add(self.dataset(iterated), iterated, self.index.scope_at(training.node),
                      self.index.function_at(training.node), None)

    def _add(self, made: DatasetValue | None, iterated: cst.BaseExpression, scope: Scope, function,
             loader_call: cst.Call | None) -> None:
        """Record a loader (`loader_call`) or a loop over `iterated` whose dataset's last shuffle is
        epoch-keyed, or one permutation under a loader that does not shuffle."""
        if made is None or not made.shuffles:
            return
        shuffle, entry = made.shuffles[-1]
        if frameworks.epoch_keyed(entry):
            kind = EPOCH_KEYED
        elif loader_call is None or _loader_keeps_order(loader_call):
            kind = FIXED
        else:
            return
        cls = entry.name.rsplit(".", 1)[0]
        holder = holder_of(self.index, loader_call) if loader_call is not None else dotted_name(iterated)
        call = loader_call if loader_call is not None else iterated if isinstance(iterated, cst.Call) else None
        view = SamplerBuild(shuffle, scope, function, kind, f"{_bare(cls)}.{entry.attr}", holder=None,
                            loader_call=call, loader=holder)
        self.shuffled_loaders.append(ShuffledLoader(view, made, shuffle, view.what, kind))

    def epoch_moved(self, loader: ShuffledLoader, views: list[SamplerBuild]) -> bool:
        """Some `set_epoch` may reach the object the loader iterates: called on it (a name holding
        that same object, `loader.dataset`, the loader itself), or inside a call the object or the
        loader is handed to (data_order's hand-offs: a helper that calls `set_epoch`, Accelerate's
        `prepare`, a call that cannot be seen into). A `set_epoch` on another dataset object (the one
        `with_format(...)` was called on) does not reach it; one on a receiver that cannot be told
        apart counts as reaching it."""
        loaders = {v.loader for v in views} - {None}
        setters = frameworks.methods("epoch_setter")
        samplers = {b.holder for b in self.order.samplers if b.holder} | \
            {b.loader for b in self.order.samplers if b.loader}
        for site in self.index.calls:
            func = site.node.func
            if isinstance(func, cst.Attribute) and func.attr.value in setters:
                text = dotted_name(func.value)
                if text is None or any(same_holder(text, h) for h in loaders):
                    return True
                held = self.dataset(func.value)
                if held is not None:
                    if held.made_by is loader.made.made_by:
                        return True
                    continue  # another dataset object
                if not any(same_holder(text, h) for h in samplers):
                    return True  # a receiver that cannot be told apart
        for site in self.index.calls:
            if self._entry(site.node.func, site.scope) is not None:
                continue  # the frameworks' dataset calls set no epoch
            for arg in site.node.args:
                text = dotted_name(arg.value)
                if text is None:
                    continue
                ours = text in loaders or (self.dataset(arg.value) is not None
                                           and self.dataset(arg.value).made_by is loader.made.made_by)
                if ours and self.order._hands_on(site.node, site.scope):
                    return True
        return False


def _loader_keeps_order(call: cst.Call) -> bool:
    """A DataLoader call that is known not to reorder its dataset: no `shuffle` but a literal
    `False`, no `sampler` or `batch_sampler`, no `*args`/`**kwargs` that may carry them."""
    if any(arg.star for arg in call.args):
        return False
    positional = positional_args(call)
    words = {"shuffle": 2, "sampler": 3, "batch_sampler": 4}
    for word, place in words.items():
        value = keyword_value(call, word)
        if value is None and len(positional) > place:
            value = positional[place].value
        if value is None or isinstance(value, cst.Name) and value.value in ("None", "False"):
            continue
        return False
    return True


def _returned_class(entry, call: cst.Call) -> str | None:
    """The class a `dataset_source` call returns: `keyword_returns`' class when its keyword is a
    literal `True` (`streaming=True`), `returns` when it is absent or a literal `False`; None
    (unknown) when it is anything else (`streaming=args.streaming`)."""
    for word, cls in entry.keyword_returns:
        value = keyword_value(call, word)
        if isinstance(value, cst.Name) and value.value == "True":
            return cls
        if value is not None and not (isinstance(value, cst.Name) and value.value == "False"):
            return None
        if any(arg.star == "**" for arg in call.args):
            return None  # `**load_kwargs` may carry it
    return entry.returns


def _bare(cls: str) -> str:
    return cls.rsplit(".", 1)[-1]


def dataset_order(ctx) -> DatasetOrder:
    """The file's self-ordering datasets, for TL801: `ctx.model(dataset_order)`."""
    return DatasetOrder(ctx)
