"""Does a value carry an autograd graph? Source order, reaching bindings and grad-disabled regions.

Three answers: True (it carries a graph: a model output, a loss, anything computed from them),
False (it does not: detached by `.item()`/`.detach()`/`float()`/`.tolist()`/`.numpy()`, integer or
boolean results such as `argmax` and comparisons, constants, values created under `torch.no_grad()`
or `torch.inference_mode()`), None (cannot tell). Rules report only on True.

Built once per file: `ctx.model(dataflow)`.
"""

from __future__ import annotations

import bisect
import builtins
import re
from typing import Iterator

import libcst as cst

from trainlint.model import frameworks
from trainlint.model.index import (Binding, FileIndex, FunctionInfo, Scope, dotted_name, is_property, iter_children,
                             keyword_value, main_guard, positional_args, unpacked_position, walk, walk_expression)
from trainlint.model.roles import ACCELERATOR, ENGINE, LOADER, MODULE_ROLES, roles
from trainlint.model.grad_mode import (GRAD_OFF_CONTEXTS, GRAD_ON_CONTEXTS, GRAD_SETTERS, GRAD_WORDS, switch_unsettled,
                                       switched_grad)
from trainlint.model.held_flags import UNKNOWN, atoms, literal
from trainlint.model.mode_state import ON
from trainlint.model.summaries import (DETACH_WORDS, ClassSummary, callable_summary, called_method,
                                      construction_fields, instance_class)
from trainlint.model.training import training_model
from trainlint.model.value_kinds import NUMBER_ATTRIBUTES, NUMBER_FUNCTIONS, NUMBER_METHODS, NUMBER_WORDS, is_number

# differentiation that returns the gradients (a graph of their own only with create_graph=True)
AUTOGRAD_GRAD = frozenset({"torch.autograd.grad"})
# methods whose result never carries a graph
DETACHING_METHODS = frozenset({"item", "detach", "detach_", "tolist", "numpy"})
NON_DIFFERENTIABLE_METHODS = frozenset({
    "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "long", "int", "bool", "byte",
    "short", "nonzero", "size", "dim", "numel", "isnan", "isinf", "isfinite", "any", "all",
    "count_nonzero", "element_size", "nelement", "data_ptr", "stride", "is_contiguous", "get_device",
    "sign", "floor_divide", "bincount", "unique",
}) | NUMBER_METHODS
NON_GRAPH_ATTRIBUTES = frozenset({"data", "grad", "shape", "dtype", "device", "requires_grad", "ndim",
                                  "is_cuda", "is_leaf", "layout", "T_shape"}) | NUMBER_ATTRIBUTES
NON_GRAPH_BUILTINS = frozenset({"float", "int", "len", "str", "bool", "round", "repr", "format", "range",
                                "enumerate", "isinstance", "print", "id", "hash", "type"}) | NUMBER_FUNCTIONS
NON_GRAPH_TORCH = frozenset({
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange", "linspace", "randn",
    "rand", "randint", "randperm", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
    "randn_like", "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf",
    "isfinite", "numel", "count_nonzero", "bincount", "unique", "no_grad", "inference_mode",
    "multinomial", "bernoulli", "manual_seed", "device", "Generator", "LongTensor", "FloatTensor",
})
# Functions named for what they do to a model (unwrap it, build it, load it): no forward.
_MODEL_VERB = re.compile(r"_?(unwrap|wrap|build|create|make|get|init|setup|load|prepare|save|copy|export|convert)_", re.I)
_LOSS_CALLEE = re.compile(r"(^|_)(criterion|criteria|crit|loss|losses|loss_?fn|loss_?func|lossfn)($|_)|loss$",
                          re.IGNORECASE)
# the grad switches, torch's and the torch-like frameworks' (one list: grad_mode.py)
GRAD_OFF, GRAD_ON, SET_GRAD = GRAD_OFF_CONTEXTS, GRAD_ON_CONTEXTS, GRAD_SETTERS
# framework hooks that the framework runs with grad recording off
# framework hooks run under no_grad (Lightning's validation_step, ...): trainlint/frameworks/*.toml
NO_GRAD_HOOKS = frameworks.hooks("eval")
_BACKWARD_RECEIVER_NAMES = re.compile(r"^(accelerator|fabric|engine|model_engine|strategy|trainer|self)$")


class Dataflow:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.index: FileIndex = ctx.index
        self.roles = ctx.model(roles)
        self.training = ctx.model(training_model)
        self._graph_memo: dict[cst.CSTNode, bool | None] = {}
        self._no_grad_memo: dict[cst.CSTNode, bool] = {}
        self._roots: dict[cst.CSTNode | None, list[cst.BaseExpression]] = {}
        self._by_calls: dict[cst.CSTNode, dict[str, cst.Call]] = {}  # `backpropagated_by_calls`
        # asked once per node and per (scope, name, function): a name bound hundreds of times in
        # one function must not cost a walk of every binding's ancestors at every use
        self._owners: dict[cst.CSTNode, cst.CSTNode] = {}
        self._function_bindings: dict[tuple[int, str, cst.CSTNode], list[Binding]] = {}
        self._orders_of_bindings: dict[tuple, tuple] = {}  # `_binding_order`
        self._bindable: tuple[bool, frozenset[str]] | None = None  # `bound_nowhere`
        self._flows: dict[tuple, tuple[list[str], bool]] = {}  # per (scope, name, function): `_flow_of`, `_sources_of`
        self._frozen: set[str] | None = None  # `frozen_modules`

    # -- source order ---------------------------------------------------------------------------
    # Places count in pre-order from the start of the node's enclosing function (or module), as
    # the file index numbers every node; a node outside the module's tree has none (-1).
    def position(self, node: cst.CSTNode) -> int:
        place = self.index.place.get(node)
        return -1 if place is None else place - self.index.place[self._owner(node)]

    def end(self, node: cst.CSTNode) -> int:
        """The place of the last node under `node` (itself for a leaf)."""
        place = self.index.place.get(node)
        if place is None:
            return -1
        return self.index.subtree_end(place) - 1 - self.index.place[self._owner(node)]

    def _owner(self, node: cst.CSTNode) -> cst.CSTNode:
        owner = self._owners.get(node)
        if owner is None:
            function = node if isinstance(node, cst.FunctionDef) else self.index.function_at(node)
            if isinstance(function, FunctionInfo):
                owner = function.node
            else:
                owner = function if function is not None else self.index.module
            self._owners[node] = owner
        return owner

    def before(self, first: cst.CSTNode, second: cst.CSTNode) -> bool:
        """`first` (whole) comes before `second` in source order, in the same function."""
        return 0 <= self.end(first) < self.position(second)

    def inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        start, stop, at = self.position(container), self.end(container), self.position(node)
        return start >= 0 and start <= at <= stop

    # -- bindings -------------------------------------------------------------------------------
    def scope_of(self, node: cst.CSTNode) -> Scope:
        return self.index.scope_at(node)

    def bindings_in_function(self, name: str, at: cst.CSTNode) -> list[Binding]:
        """Bindings of `name` in the scope that resolves it at `at`, limited to the same function."""
        owner = self._owner(at)
        scope = self.scope_of(at)
        key = (id(scope), name, owner)
        if key not in self._function_bindings:
            self._function_bindings[key] = [b for b in scope.lookup(name) if self._owner(b.node) is owner]
        return self._function_bindings[key]

    def reaching(self, name: cst.Name) -> Binding | None:
        """The last binding of `name` written before its use (straight-line approximation): a
        parameter, a loop target bound before it, or an assignment that ends before it; among those
        the one that starts last (the last listed, for one statement). The bindings are sorted
        once per function, so a name bound thousands of times costs a search, not a scan."""
        best, positions, entries = self._binding_order(name)
        at = self.position(name)
        i = bisect.bisect_left(positions, at) - 1  # the bindings that start before the use
        while i >= 0:
            position, number, binding, end = entries[i]
            if binding.kind == "for" or 0 <= end < at:
                if best is None or (position, number) > best[:2]:
                    best = entries[i]
                break
            i -= 1  # an assignment holding the use (`loss = loss + x`) is not yet bound there
        return best[2] if best is not None else None

    def _binding_order(self, name: cst.Name) -> tuple[tuple | None, list[int], list[tuple]]:
        """For `reaching`: the last parameter binding `name` (any parameter reaches its uses), and
        the other bindings as (position, place in the list, binding, end) in source order."""
        owner = self._owner(name)
        key = ("order", id(self.scope_of(name)), name.value, owner)
        order = self._orders_of_bindings.get(key)
        if order is None:
            params, entries = [], []
            for number, binding in enumerate(self.bindings_in_function(name.value, name)):
                entry = (self.position(binding.node), number, binding, self.end(binding.node))
                (params if binding.kind == "param" else entries).append(entry)
            entries.sort(key=lambda entry: entry[:2])
            best = max(params, key=lambda entry: entry[:2]) if params else None
            order = self._orders_of_bindings[key] = (best, [entry[0] for entry in entries], entries)
        return order

    def bound_value(self, binding: Binding) -> cst.BaseExpression | None:
        """The expression a binding took its value from; for tuple unpacking the whole right side."""
        if binding.value is not None:
            return binding.value
        if isinstance(binding.node, (cst.Assign, cst.AnnAssign)) and binding.node.value is not None:
            return binding.node.value
        return None

    # -- conditions stored in a name ------------------------------------------------------------
    def stored_condition(self, test: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.CSTNode | None]:
        """The condition an `if` reads: the test itself, or, for a name (`if should_eval:`), the
        value of the assignment that reaches it in the same function (`should_eval = step %
        every == 0`), followed through up to three names; with that assignment (None for the
        test itself). A name bound by a parameter, a loop or an augmented assignment stays itself."""
        statement: cst.CSTNode | None = None
        for _ in range(3):
            if not isinstance(test, cst.Name):
                break
            binding = self.reaching(test)
            if binding is not None and _is_bool_literal(binding.value):
                # `if not eval_first and step == 0: should_eval = False` only narrows the test the
                # name was given before: read that one
                binding = self._last_computed(test)
            if binding is None or binding.kind != "assign" or not isinstance(binding.node, (cst.Assign, cst.AnnAssign)):
                break
            value = self.bound_value(binding)
            if value is None or binding.value is None:  # tuple unpacking: not one condition
                break
            test, statement = value, binding.node
        return test, statement

    # -- paths ----------------------------------------------------------------------------------
    def branch_sides(self, node: cst.CSTNode) -> set[tuple[str, bool]]:
        """The `if` tests around `node` in its function, as source text, each with the side `node`
        runs on (True: the body, False: the `else`)."""
        found: set[tuple[str, bool]] = set()
        child = node
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            if isinstance(ancestor, cst.If) and child is not ancestor.test:
                found.add((self.ctx.code_for(ancestor.test), child is ancestor.body))
            child = ancestor
        return found

    def exclusive(self, first: cst.CSTNode, second: cst.CSTNode) -> bool:
        """`first` and `second` never run on one path: one sits in the body of an `if` whose `else`
        (or the `else` of an `if` written the same way, the test unchanged between) holds the other
        (`if cfg.dynamic: batches = pack(...)` against `else: loss = loss / k`)."""
        sides = self.branch_sides(second)
        return any((test, not side) in sides for test, side in self.branch_sides(first))

    def bindings_on_path(self, name: cst.Name) -> list[Binding] | None:
        """The bindings of `name` (in its function) that can be the one its use reads, given the
        tests on the use's way: a binding made in a branch of an `if`/`elif` chain holds the facts
        of that branch (its test, the earlier tests failed, the literals the branch's block
        assigns: `flag = False`), and a test around the use, read after the chain, that
        contradicts them (`if flag:`, `if kind != "plateau":`) rules the binding out. A fact counts
        only for a plain name the function binds nowhere but before the chain or inside it (the
        branch that ran still decides it at the use). None when `name` has a binding that is not
        an assignment before the use (a parameter, a loop target, a later rebinding)."""
        bindings = self.bindings_in_function(name.value, name)
        if not bindings or any(b.kind not in ("assign", "augassign") or not self.before(b.node, name)
                               for b in bindings):
            return None
        guards = [(atom, test) for test, side in self._tests_around(name) for atom in _atoms(test, side)]
        if not guards:
            return list(bindings)
        kept = []
        for binding in bindings:
            facts, chain = self._branch_facts(binding.node, name)
            if not any(_contradicts(fact, atom) for fact in facts for atom, test in guards
                       if fact[0] == atom[0] and self.before(chain, test)):
                kept.append(binding)
        return kept

    def _tests_around(self, node: cst.CSTNode) -> list[tuple[cst.BaseExpression, bool]]:
        """The `if` tests around `node` in its function, each with the side `node` runs on."""
        found = []
        child = node
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            if isinstance(ancestor, cst.If) and child is not ancestor.test:
                found.append((ancestor.test, child is ancestor.body))
            child = ancestor
        return found

    def _branch_facts(self, node: cst.CSTNode, use: cst.CSTNode) -> tuple[list[tuple[str, str, object]], cst.CSTNode]:
        """What holds after `node` runs, from the `if`/`elif` chain around it (it must end before
        `use`): the tests taken or failed on its way and the literals its blocks assign (a name
        the block binds once), for names bound nowhere but before the chain or inside it; with
        the chain (the outermost `if` around `node` that does not hold `use`)."""
        facts: list[tuple[str, str, object]] = []
        chain: cst.CSTNode | None = None
        child = node
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) or self.inside(use, ancestor):
                break
            if isinstance(ancestor, cst.IndentedBlock) and isinstance(self.index.parent(ancestor), (cst.If, cst.Else)):
                for statement in ancestor.body:
                    if not isinstance(statement, cst.SimpleStatementLine):
                        continue
                    for small in statement.body:
                        if isinstance(small, cst.Assign) and len(small.targets) == 1 \
                                and isinstance(small.targets[0].target, cst.Name):
                            target = small.targets[0].target.value
                            value = literal(small.value)
                            if value is not UNKNOWN and sum(
                                    self.inside(b.node, ancestor) for b in self.bindings_in_function(target, use)) == 1:
                                facts.append((target, "==", value))
            if isinstance(ancestor, cst.If) and child is not ancestor.test:
                facts += _atoms(ancestor.test, child is ancestor.body)
                chain = ancestor
            child = ancestor
        if chain is None or not self.before(chain, use):
            return [], node
        kept = [fact for fact in facts
                if all(b.kind == "param" or self.before(b.node, chain) or self.inside(b.node, chain)
                       for b in self.bindings_in_function(fact[0], use))]
        return kept, chain

    def _last_computed(self, name: cst.Name) -> Binding | None:
        """The last assignment before `name`'s use whose value is not a literal True/False."""
        _, positions, entries = self._binding_order(name)
        at = self.position(name)
        for position, _, binding, end in reversed(entries[:bisect.bisect_left(positions, at)]):
            if binding.kind == "assign" and 0 <= end < at and not _is_bool_literal(binding.value):
                return binding
        return None

    # -- values through containers and **kwargs -------------------------------------------------
    def keyword_values(self, call: cst.Call, word: str, depth: int = 0) -> list[tuple[cst.BaseExpression, cst.Call]]:
        """What `call` is handed for keyword `word`, with the call that writes it: the keyword
        itself (`DataLoader(ds, sampler=s)`), a `**mapping` the same function fills (a dict
        literal or `dict(...)` bound to it, `mapping["sampler"] = s`), and, when the mapping is the
        enclosing function's own `**kwargs`, what each same-file caller of that function passes
        for `word` (then written by that caller's call: `build_loader(ds, sampler=s)`)."""
        found: list[tuple[cst.BaseExpression, cst.Call]] = []
        value = keyword_value(call, word)
        if value is not None:
            found.append((value, call))
        for arg in call.args:
            if arg.star != "**":
                continue
            if isinstance(arg.value, cst.Dict):
                found += [(v, call) for v in _dict_values(arg.value, word)]
                continue
            if not isinstance(arg.value, cst.Name):
                continue
            name = arg.value
            for binding in self.scope_of(call).lookup(name.value):
                if binding.kind == "param":  # a parameter is bound in the def's header, outside its body
                    found += self._kwargs_from_callers(binding, self.scope_of(call), word, depth)
            for binding in self.bindings_in_function(name.value, call):
                if binding.kind != "param" and binding.value is not None:
                    found += [(v, call) for v in _mapping_values(self.index, binding.value, self.scope_of(call),
                                                                 word)]
            found += [(v, call) for v in self._subscript_writes(name, word)]
            found += [(v, call) for v in self._update_writes(name, word)]
        return found

    def _update_writes(self, name: cst.Name, word: str) -> list[cst.BaseExpression]:
        """What `mapping.update(...)` calls in the function of `name` give `word`: a keyword
        (`kw.update(shuffle=True)`), a dict literal, or a name bound to one in that function
        (`cuda_kwargs = {"shuffle": True}; test_kwargs.update(cuda_kwargs)`)."""
        found: list[cst.BaseExpression] = []
        for call in self.index.calls_under(self._owner(name)):
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "update"
                    and isinstance(func.value, cst.Name) and func.value.value == name.value):
                continue
            value = keyword_value(call, word)
            if value is not None:
                found.append(value)
            for arg in positional_args(call):
                if isinstance(arg.value, cst.Dict):
                    found += _dict_values(arg.value, word)
                elif isinstance(arg.value, cst.Name):
                    for binding in self.bindings_in_function(arg.value.value, call):
                        if binding.value is not None:
                            found += _mapping_values(self.index, binding.value, self.scope_of(call), word)
        return found

    def _kwargs_from_callers(self, binding: Binding, scope: Scope, word: str,
                             depth: int) -> list[tuple[cst.BaseExpression, cst.Call]]:
        """`def build(ds, **kwargs): return DataLoader(ds, **kwargs)`: what the callers pass for `word`."""
        while scope is not None and binding not in scope.bindings.get(binding.name, ()):
            scope = scope.parent
        if depth >= 2 or scope is None or not isinstance(scope.node, cst.FunctionDef) \
                or scope.node.params.star_kwarg is not binding.node:
            return []  # a plain parameter holding a mapping: its callers' dicts are not followed
        function = self.index.function_of_node.get(scope.node)
        if function is None:
            return []
        found = []
        for site in self.index.callers(function):
            found += self.keyword_values(site.node, word, depth + 1)
        return found

    def _subscript_writes(self, name: cst.Name, word: str | None) -> list[cst.BaseExpression]:
        """`mapping["word"] = value` statements in the function of `name` (once per function);
        with `word` None, what is written under any key (`losses[k] = ...`)."""
        owner = self._owner(name)
        key = ("subscript-writes", owner)
        if key not in self._roots:
            writes: dict[tuple[str, str | None], list[cst.BaseExpression]] = {}
            for node in self.index.scope_nodes(owner):
                if type(node) is cst.Assign:
                    for target in node.targets:
                        item = target.target
                        if not (isinstance(item, cst.Subscript) and isinstance(item.value, cst.Name)
                                and len(item.slice) == 1 and isinstance(item.slice[0].slice, cst.Index)):
                            continue
                        writes.setdefault((item.value.value, None), []).append(node.value)
                        index = item.slice[0].slice.value
                        if isinstance(index, cst.SimpleString):
                            writes.setdefault((item.value.value, index.evaluated_value), []).append(node.value)
            self._roots[key] = writes  # type: ignore[assignment]
        return self._roots[key].get((name.value, word), [])  # type: ignore[union-attr]

    # -- reachability -------------------------------------------------------------------------
    def raises_before(self, node: cst.CSTNode) -> cst.Name | None:
        """A read that always raises before `node` runs: in a statement that every path from the
        function's entry to `node` runs first (an earlier statement of a block holding it, no `try`
        around), a name the function binds (so Python takes it for a local), that is no parameter
        nor declared global, read unconditionally, and written nowhere before that read (its first
        mention in the function): the first arrival raises `UnboundLocalError`, so `node` is never
        reached (a loop's body raises on its first iteration, before any later one). In the
        code a script runs as its program (under `if __name__ == "__main__":`), whose globals no
        other module can have set, a read of a global that no code of the file binds
        (`bound_nowhere`) raises NameError the same way."""
        function = self.index.function_at(node)
        if not isinstance(function, FunctionInfo):
            function = None
            if not any(isinstance(a, cst.If) and main_guard(a.test) for a in self.index.ancestors(node)):
                return None  # module code another module may import (or a snippet): its globals are open
        top = function.node if function is not None else self.index.module
        child = node
        parent = self.index.parent(child)
        while parent is not None and parent is not top:
            if isinstance(parent, (cst.Try, cst.TryStar, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return None
            if isinstance(parent, cst.IndentedBlock):
                found = self._raises_in(parent.body, child, function)
                if found is not None:
                    return found
            child, parent = parent, self.index.parent(parent)
        if function is None and parent is top:
            return self._raises_in(top.body, child, None)
        return None

    def _raises_in(self, statements, child, function: FunctionInfo | None) -> cst.Name | None:
        """The always-raising read in the statements of a block that come before `child`."""
        for statement in statements:
            if statement is child:
                break
            if isinstance(statement, cst.SimpleStatementLine):
                found = self._unbound_read(statement, function)
                if found is not None:
                    return found
        return None

    def bound_nowhere(self, word: str) -> bool:
        """No scope of the file binds `word` (no assignment, parameter, import, def, class, loop or
        `with` target, comprehension target, `global`/`except ... as` of it), it is no builtin,
        and nothing can bind it unseen: no star import, no `exec`/`eval`/`globals()`/`vars()`/
        `builtins` nor `setattr` on the module itself in the file."""
        if self._bindable is None:
            names: set[str] = set()
            dynamic = False
            for node in self.index.subtree(self.index.module):
                kind = type(node)
                if kind is cst.Name:
                    parent = self.index.parent(node)
                    if node.value in _DYNAMIC_BINDERS and not (isinstance(parent, cst.Attribute) and parent.attr is node):
                        dynamic = True  # `exec(...)`, `globals()[k] = v`; not `model.eval()`
                    elif node.value == "setattr" and isinstance(parent, cst.Call) and parent.func is node \
                            and parent.args and any(isinstance(n, cst.Name) and n.value in ("sys", "__name__", "modules")
                                                    for n in walk(parent.args[0].value)):
                        dynamic = True  # `setattr(sys.modules[__name__], k, v)`; not `setattr(layer, k, v)`
                elif kind is cst.ImportFrom and isinstance(node.names, cst.ImportStar):
                    dynamic = True
                elif kind is cst.CompFor:
                    names |= {n.value for n in walk(node.target) if isinstance(n, cst.Name)}
                elif kind in (cst.Global, cst.Nonlocal):
                    names |= {item.name.value for item in node.names}
                elif kind is cst.ExceptHandler and node.name is not None and isinstance(node.name.name, cst.Name):
                    names.add(node.name.name.value)
                elif kind in (cst.MatchAs, cst.MatchStar) and node.name is not None:
                    names.add(node.name.value)
            for scope in self.index.scopes:
                names |= set(scope.bindings)
            self._bindable = (dynamic, frozenset(names))
        dynamic, names = self._bindable
        return not dynamic and word not in names and word not in _BUILTIN_NAMES

    def _unbound_read(self, statement: cst.SimpleStatementLine, function: FunctionInfo | None) -> cst.Name | None:
        for small in statement.body:
            if isinstance(small, (cst.Assign, cst.AnnAssign, cst.Expr, cst.Return)):
                exprs = [small.value] if small.value is not None else []  # `batch: dict`, `return`
            elif isinstance(small, cst.AugAssign):
                exprs = [small.target, small.value]
            else:
                continue
            # `x = x.float()`: the statement's own targets are bound after its value is read
            later = {id(n) for t in (small.targets if isinstance(small, cst.Assign) else
                                     [small] if isinstance(small, cst.AnnAssign) else [])
                     for n in walk(t.target)}
            for expr in exprs:
                for name in _unconditional_loads(expr):
                    if self._read_unbound(name, function, later):
                        return name
        return None

    def _read_unbound(self, name: cst.Name, function: FunctionInfo | None, later: set) -> bool:
        word = name.value
        if function is None:
            return self.bound_nowhere(word)  # a script's own code: NameError
        bindings = function.scope.bindings.get(word)
        if not bindings or any(b.kind == "param" for b in bindings):
            return False
        at = self.position(name)
        for node in self.index.subtree(function.node.body):
            if type(node) is cst.Name and node.value == word and node is not name and id(node) not in later \
                    and 0 <= self.position(node) < at:
                return False  # mentioned before: bound (or read) there first
            if type(node) in (cst.Global, cst.Nonlocal) and any(item.name.value == word for item in node.names):
                return False
        return True

    def container_values(self, name: cst.Name) -> list[cst.BaseExpression]:
        """What a container `name` holds in its function, one step away: the elements of the
        literal it was bound to (`{"lm": lm_loss, "aux": 0.1 * aux}`, `[a, b]`), what is written
        into it by key (`losses["aux"] = ...`) and what is appended to it."""
        found: list[cst.BaseExpression] = []
        for binding in self.bindings_in_function(name.value, name):
            value = binding.value
            if isinstance(value, cst.Dict):
                found += [e.value for e in value.elements if isinstance(e, cst.DictElement)]
            elif isinstance(value, (cst.List, cst.Tuple)):
                found += [e.value for e in value.elements if isinstance(e, cst.Element)]
        found += self._subscript_writes(name, None)
        found += self.appended_values(self._owner(name)).get(name.value, [])
        return found

    # -- grad-disabled regions ------------------------------------------------------------------
    def grad_context(self, item: cst.BaseExpression, scope: Scope) -> bool | None:
        """False for a context manager that turns recording off, True for one that turns it on."""
        if not isinstance(item, cst.Call):
            name = self.index.resolve(item, scope)
            return False if name in GRAD_OFF or self._project_grad_off(item, scope) else None
        name = self.index.resolve(item.func, scope)
        if name in GRAD_OFF:
            args = positional_args(item)
            mode = keyword_value(item, "mode")
            if mode is None and args:
                mode = args[0].value
            return not (mode is None or _is_true(mode)) if name.endswith("inference_mode") else False
        if name in GRAD_ON:
            return True
        if name in SET_GRAD:
            args = positional_args(item)
            value = args[0].value if args else keyword_value(item, "mode")
            # `set_grad_enabled(phase == "train")` may be off: treat anything but True as off
            return True if value is not None and _is_true(value) else False
        return False if self._project_grad_off(item.func, scope) else None

    def _project_grad_off(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """A project function that turns recording off where it is used (`@smart_inference_mode()`)."""
        summary = self.index.summary_of(expr, scope, GRAD_WORDS)
        return summary is not None and summary.grad_off

    def under_no_grad(self, node: cst.CSTNode) -> bool:
        """Recording is (or may be) off where `node` runs: a `with` block, a decorator, a framework
        hook run without grad, or a function that every same-file caller calls under no_grad; a
        `torch.set_grad_enabled(False)` statement that dominates `node` in its region (the last
        switch on every path there: `switched_grad`) decides before them."""
        region, off = self._grad_region(node)
        switched = switched_grad(self.index, node, region)
        if switched is not None:
            return switched != ON
        return off if off is not None else self.function_without_grad(region)

    def grad_unsettled(self, node: cst.CSTNode) -> bool:
        """A `set_grad_enabled(False)` statement reaches `node` on some paths only (`if fast:
        torch.set_grad_enabled(False)`): whether recording is on there is not known."""
        return switch_unsettled(self.index, node, self._grad_region(node)[0])

    def _grad_region(self, node: cst.CSTNode) -> tuple[cst.CSTNode, bool | None]:
        """The nearest `with` that sets grad around `node` and whether it turns recording off, else
        `node`'s def (None: its decorators and callers decide), else the module (recording on)."""
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, cst.With):
                scope = self.scope_of(ancestor)
                for item in ancestor.items:
                    state = self.grad_context(item.item, scope)
                    if state is not None:
                        return ancestor, not state
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor, None
        return self.index.module, False

    def function_without_grad(self, function: cst.FunctionDef, depth: int = 0) -> bool:
        if function in self._no_grad_memo:
            return self._no_grad_memo[function]
        self._no_grad_memo[function] = False  # cycles
        scope = self.scope_of(function)
        result = False
        for decorator in function.decorators:
            if self.grad_context(decorator.decorator, scope) is False:
                result = True
        info = self.index.function_of_node.get(function)
        if not result and info is not None and info.class_name and info.name in NO_GRAD_HOOKS:
            result = True
        if not result and depth < 3 and info is not None:
            callers = [site.node for site in self.index.callers(info)]
            result = all(self.under_no_grad(call) for call in callers)
            if result and self._module_level(info):
                # every caller means the other files' too (`generate_centers(model, loader)` called in
                # the training script only inside `with torch.no_grad():`); one call with grad on
                # settles it, so the files that turn recording off are read last
                foreign = False
                for _, use in self.index.linker.iter_callers(info.name, later=_GRAD_OFF_WORDS):
                    foreign = True
                    if not use.grad_off:
                        result = False
                        break
                result = result and (bool(callers) or foreign)
            else:
                result = result and bool(callers)
        self._no_grad_memo[function] = result
        return result

    def _module_level(self, info: FunctionInfo) -> bool:
        """A module-level function of a file the project's other files can call (by its name)."""
        return info.class_name is None and self.index.linker is not None \
            and info.scope.parent is self.index.module_scope

    # -- backward roots -------------------------------------------------------------------------
    def backward_roots(self, owner: cst.CSTNode) -> list[cst.BaseExpression]:
        """Expressions backpropagated (or differentiated with autograd.grad) in a function body."""
        if owner not in self._roots:
            roots: list[cst.BaseExpression] = []
            for call in self.index.calls_under(owner):
                root = self.backward_root(call, self.scope_of(call))
                if root is not None:
                    roots.append(root)
            self._roots[owner] = roots
        return self._roots[owner]

    def backward_root(self, call: cst.Call, scope: Scope) -> cst.BaseExpression | None:
        func = call.func
        name = self.index.resolve(func, scope)
        args = positional_args(call)
        if name in ("torch.autograd.backward", "torch.autograd.grad"):
            value = args[0].value if args else keyword_value(call, "tensors") or keyword_value(call, "outputs")
            return value
        if not isinstance(func, cst.Attribute) or func.attr.value not in frameworks.backward_methods():
            return None
        receiver = func.value
        if isinstance(receiver, (cst.Name, cst.Attribute)) and _is_import_path(receiver, scope):
            return None  # `dist_autograd.backward(ctx, ...)`: some module's function, not Tensor.backward
        if func.attr.value == "manual_backward" or (args and self._backward_helper(receiver, scope)):
            return args[0].value if args else None
        # scaler.scale(loss).backward()
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) \
                and receiver.func.attr.value == "scale" and positional_args(receiver):
            return positional_args(receiver)[0].value
        return receiver

    def _backward_helper(self, receiver: cst.BaseExpression, scope: Scope) -> bool:
        """`accelerator.backward(loss)`, `fabric.backward(loss)`, `engine.backward(loss)`."""
        if self.roles.of(receiver, scope) in (ACCELERATOR, ENGINE):
            return True
        text = dotted_name(receiver)
        return text is not None and _BACKWARD_RECEIVER_NAMES.match(text.rsplit(".", 1)[-1]) is not None

    def backpropagated_by_calls(self, owner: cst.CSTNode) -> dict[str, cst.Call]:
        """Dotted names of `owner` (a function, or the module) that a same-file function it calls
        backpropagates, each with that call: the argument handed to a parameter feeding the
        callee's backward (`update(saved_log_probs)`), or a module-level name (or, from a method of
        the same class, a `self.` attribute) that the callee reads without binding it and that
        feeds its backward (an episode's `Update()` summing `critic.saved_values` into the loss).
        Answered once per function."""
        found = self._by_calls.get(owner)
        if found is not None:
            return found
        found = self._by_calls[owner] = {}
        owner_class = self.index.function_of_node[owner].class_name if owner in self.index.function_of_node else None
        for call in self.index.calls_under(owner):
            if self._owner(call) is not owner:
                continue  # a nested def's call: its own business
            scope = self.scope_of(call)
            callee = self.index.callee(call, scope)
            if callee is None or callee.node is owner:
                continue
            roots = self.backward_roots(callee.node)
            if not roots:
                continue
            fed = self.names_feeding(roots, roots[0])
            params = {p.name.value for p in (*callee.node.params.posonly_params, *callee.node.params.params)}
            for param in params:
                handed = self.index.argument_for(call, callee, param)
                text = dotted_name(handed) if handed is not None else None
                if text is None:
                    continue
                for name in fed:
                    if name == param or name.startswith(param + "."):
                        found.setdefault(text + name[len(param):], call)
            for name in fed:
                head = name.split(".", 1)[0]
                if head == "self":
                    if owner_class is not None and callee.class_name == owner_class:
                        found.setdefault(name, call)
                elif head not in params and not callee.scope.bindings.get(head) \
                        and (owner is self.index.module or not self.bindings_in_function(head, call)):
                    found.setdefault(name, call)  # the same global in both
        return found

    def names_feeding(self, expressions: list[cst.BaseExpression], at: cst.CSTNode, limit: int = 6) -> set[str]:
        """Dotted names that flow into `expressions`, through assignments in the same function."""
        return self._feeding(expressions, at, limit)

    def built_here(self, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """A forward or a loss function computed in this function feeds `expr`: its graph was
        built here, not handed in by a caller or a closure."""
        return self._builds_graph(expr) or any(self._flow_of(key, at)[1] for key in self._feeding([expr], at, 6))

    def _builds_graph(self, expr: cst.BaseExpression) -> bool:
        """`expr` calls a model, its `forward`, a loss function, or a callable the function was
        handed as a parameter (`def train_step(model, batch): loss = model(**batch).loss`: whatever
        it is called, it runs here, on this call's data)."""
        for node in walk_expression(expr):
            if isinstance(node, cst.Call):
                scope = self.scope_of(node)
                if self.is_model(node.func, scope) or self.is_loss_function(node.func, scope):
                    return True
                if isinstance(node.func, cst.Name) and node.args and scope.kind == "function":
                    bindings = scope.lookup(node.func.value)
                    if bindings and all(b.kind == "param" for b in bindings) and node.func.value in scope.bindings:
                        return True
                if isinstance(node.func, cst.Attribute) and node.func.attr.value == "forward" \
                        and self.is_model(node.func.value, scope):
                    return True
        return False

    def _feeding(self, expressions: list[cst.BaseExpression], at: cst.CSTNode, limit: int) -> set[str]:
        """The dotted names met within `limit` steps back from `expressions`: a step goes from a
        name to what its bindings in the function assign it (a loop's iterable) and what is
        appended to it. Each name's step is taken once per function (`_flow_of`): a script that
        binds `loss` in every one of its loops does not walk all of them at every question."""
        found: set[str] = set()
        level = [key for expr in expressions for key in _dotted_names(expr)]
        level += [key for expr in expressions for key in self._comprehension_sources(expr)]
        for _ in range(limit):
            following: list[str] = []
            for key in level:
                if key not in found:
                    found.add(key)
                    following += self._flow_of(key, at)[0]
            if not following:
                break
            level = following
        return found

    def _comprehension_sources(self, expr: cst.BaseExpression) -> list[str]:
        """The dotted names of the iterables that the comprehensions around `expr` draw the names
        it reads from (`[grad(l, ...) for l in losses]`: `l` is an element of `losses`), through
        comprehensions nested in one another. A comprehension's target has no binding of the
        function: its values are its iterable's."""
        names = {n.value for n in walk_expression(expr) if isinstance(n, cst.Name)}
        found: list[str] = []
        for ancestor in self.index.ancestors(expr):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            if not isinstance(ancestor, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
                continue
            clauses = []
            clause = ancestor.for_in
            while clause is not None:
                clauses.append(clause)
                clause = clause.inner_for_in
            for clause in reversed(clauses):  # an inner clause may draw from an outer one's target
                targets = {n.value for n in walk(clause.target) if isinstance(n, cst.Name)}
                if targets & names:
                    drawn = list(_dotted_names(clause.iter))
                    found += drawn
                    names |= {key for key in drawn if "." not in key}
        return found

    def _flow_of(self, key: str, at: cst.CSTNode) -> tuple[list[str], bool]:
        """For a dotted name used at `at`: the dotted names in the values that flow into it (its
        bindings in the function, for a plain name, and what is appended to it), and whether one
        of those values builds a graph (`_builds_graph`)."""
        owner = self._owner(at)
        memo_key = (id(self.scope_of(at)), key, owner)
        flow = self._flows.get(memo_key)
        if flow is None:
            values: list[cst.BaseExpression] = []
            if "." not in key:
                for binding in self.bindings_in_function(key, at):
                    value = self.bound_value(binding)
                    if value is not None:
                        values.append(value)
                    elif binding.kind == "for" and isinstance(binding.node, cst.For):
                        values.append(binding.node.iter)  # `for lp in log_probs`
            values += self.appended_values(owner).get(key, ())  # what was appended flows on with it
            names = list(dict.fromkeys(name for value in values for name in _dotted_names(value)))
            flow = self._flows[memo_key] = (names, any(self._builds_graph(value) for value in values))
        return flow

    def graph_sources(self, expr: cst.BaseExpression, at: cst.CSTNode, limit: int = 6) -> tuple[set[str], bool]:
        """The variables whose graph flows into `expr` (a value cut off by `.detach()`, `.item()` or
        a tensor factory does not; neither do the modules and functions called), and whether a
        `.detach()` cut something off on the way. Each variable's bindings are read once per
        function (`_sources_of`), as in `_feeding`."""
        found: set[str] = set()
        level, detached = self._graph_walk(expr)
        for step in range(limit):
            following: list[str] = []
            for name in level:
                if name in found:
                    continue
                if self._names_a_definition(name, at):
                    continue
                found.add(name)
                if step + 1 < limit:  # its values are read at the next step, if there is one
                    names, cut = self._sources_of(name, at)
                    following += names
                    detached |= cut
            if not following:
                break
            level = following
        return found, detached

    def _names_a_definition(self, name: str, at: cst.CSTNode) -> bool:
        """`name` is bound to an import, a def or a class in the function (once per name)."""
        memo_key = ("definition", id(self.scope_of(at)), name, self._owner(at))
        if memo_key not in self._flows:
            self._flows[memo_key] = any(b.kind in ("import", "def", "class")  # type: ignore[assignment]
                                        for b in self.bindings_in_function(name, at))
        return self._flows[memo_key]  # type: ignore[return-value]

    def _sources_of(self, name: str, at: cst.CSTNode) -> tuple[list[str], bool]:
        """`_graph_walk` of every value the function binds `name` to, joined."""
        memo_key = ("sources", id(self.scope_of(at)), name, self._owner(at))
        sources = self._flows.get(memo_key)
        if sources is None:
            names: list[str] = []
            detached = False
            for binding in self.bindings_in_function(name, at):
                value = self.bound_value(binding)
                if value is not None:
                    found, cut = self._graph_walk(value)
                    names += found
                    detached |= cut
            sources = self._flows[memo_key] = (list(dict.fromkeys(names)), detached)
        return sources

    def _graph_walk(self, expr: cst.BaseExpression) -> tuple[list[str], bool]:
        """The names in `expr` that may carry a graph into it, and whether a `.detach()` (or
        `.item()`, ...) cut a value off in it."""
        names: list[str] = []
        detached = False
        stack: list[cst.CSTNode] = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Call):
                func = node.func
                if isinstance(func, cst.Attribute) and func.attr.value in DETACHING_METHODS:
                    detached = True
                    continue
                if isinstance(node, cst.BaseExpression) and self.carries_graph(node) is False:
                    continue
                stack.extend(a.value for a in node.args)
                if isinstance(func, cst.Attribute) and not self.is_model(func, self.scope_of(node)):
                    stack.append(func.value)  # a tensor method: its receiver's graph flows on
                continue
            if isinstance(node, cst.Name):
                if self.carries_graph(node) is not False:
                    names.append(node.value)
                continue
            if isinstance(node, cst.Lambda):
                continue
            stack.extend(iter_children(node))
        return names, detached

    def appended_values(self, owner: cst.CSTNode) -> dict[str, list[cst.BaseExpression]]:
        """Container (dotted name) -> the values `.append`/`.extend`/`.insert`ed into it in a function."""
        key = ("appended", owner)
        if key not in self._roots:
            found: dict[str, list[cst.BaseExpression]] = {}
            for call in self.index.calls_under(owner):
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend", "insert", "appendleft"):
                    container = dotted_name(func.value)
                    args = positional_args(call)
                    if container is not None and args:
                        found.setdefault(container, []).append(args[-1].value)
            self._roots[key] = found  # type: ignore[assignment]
        return self._roots[key]  # type: ignore[return-value]

    def backwarded_names(self, owner: cst.CSTNode) -> set[str]:
        """The names in what a function backpropagates (once per function: every name asks)."""
        key = ("backwarded", owner)
        if key not in self._roots:
            self._roots[key] = {node.value for root in self.backward_roots(owner)  # type: ignore[assignment]
                                for node in walk_expression(root) if isinstance(node, cst.Name)}
        return self._roots[key]  # type: ignore[return-value]

    # -- the question ---------------------------------------------------------------------------
    def carries_graph(self, expr: cst.BaseExpression, depth: int = 0) -> bool | None:
        if expr in self._graph_memo:
            return self._graph_memo[expr]
        self._graph_memo[expr] = None  # cycles through bindings
        result = self._graph(expr, depth) if depth < 16 else None
        self._graph_memo[expr] = result
        return result

    def _graph(self, expr: cst.BaseExpression, depth: int) -> bool | None:
        if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.FormattedString,
                             cst.ConcatenatedString, cst.Comparison)):
            return False
        if is_number(expr, self.scope_of(expr), self.index.resolve):
            return False  # a size, a count, arithmetic on them: a Python number has no graph
        if isinstance(expr, cst.Name):
            return self._name_graph(expr, depth)
        if isinstance(expr, cst.UnaryOperation):
            return False if isinstance(expr.operator, cst.Not) else self.carries_graph(expr.expression, depth + 1)
        if isinstance(expr, cst.BooleanOperation):
            return None
        if self.under_no_grad(expr):
            return False
        if self.grad_unsettled(expr):
            return None
        if isinstance(expr, cst.BinaryOperation):
            return _any_of(self.carries_graph(expr.left, depth + 1), self.carries_graph(expr.right, depth + 1))
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in NON_GRAPH_ATTRIBUTES:
                return False
            if isinstance(expr.value, cst.Name) and expr.value.value == "self":
                return None
            if isinstance(expr.value, cst.Name):
                kept = self._field_graph(expr.value, expr.attr.value, depth)
                if kept is not None:
                    return kept
            return self.carries_graph(expr.value, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self.carries_graph(expr.value, depth + 1)
        # an empty container literal is filled later: its contents are not known here
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            return _any_of(*(self.carries_graph(e.value, depth + 1) for e in expr.elements)) if expr.elements \
                else None
        if isinstance(expr, cst.Dict):
            values = [e.value for e in expr.elements if isinstance(e, cst.DictElement)]
            return _any_of(*(self.carries_graph(v, depth + 1) for v in values)) if values else None
        if isinstance(expr, cst.IfExp):
            return _any_of(self.carries_graph(expr.body, depth + 1), self.carries_graph(expr.orelse, depth + 1))
        if isinstance(expr, cst.Call):
            return self._call_graph(expr, depth)
        return None

    def _name_graph(self, name: cst.Name, depth: int) -> bool | None:
        binding = self.reaching(name)
        if binding is None:
            return None
        if binding.kind == "for" and isinstance(binding.node, cst.For):
            return self._iterated_value_graph(binding.node, name.value, depth)
        if binding.kind in ("import", "def", "class"):
            return None
        value = self.bound_value(binding)
        if self._detached_element(binding, name.value):
            return False
        unpacked = self._unpacked_graph(binding, name.value, depth)
        if unpacked is not None:
            return unpacked[0]
        result = self.carries_graph(value, depth + 1) if value is not None else None
        if binding.kind == "augassign" and result is not True:
            return None
        if result is None and binding.kind in ("assign", "with") and value is not None \
                and not self.under_no_grad(value) and not self.grad_unsettled(value) \
                and name.value in self.backwarded_names(self._owner(name)):
            return True  # the loss that this function backpropagates
        return result

    def _field_graph(self, name: cst.Name, field: str, depth: int) -> bool | None:
        """`parts.total` where `parts` was built as an object of a project class that keeps the
        argument given for `total` as it is: the graph of that argument (`Parts(total=loss)`: a
        graph; `Parts(total=float(loss.item()))`: none), also when a project function returns the
        object (`loss, parts = compute(...)`, `Detached.fields`). None when not known that way."""
        binding = self.reaching(name)
        if binding is None or binding.kind != "assign" or not isinstance(binding.node, cst.Assign):
            return None
        assign = binding.node
        call = assign.value
        if not isinstance(call, cst.Call):
            return None
        position = unpacked_position(assign, name.value)
        if position is None:
            if not any(isinstance(t.target, cst.Name) and t.target.value == name.value for t in assign.targets):
                return None
            where = -1
        else:
            where = position[0]
        scope = self.scope_of(assign)
        summary = self.index.summary_of(call.func, scope)
        if isinstance(summary, ClassSummary):
            argument = construction_fields(summary, call).get(field) if where == -1 else None
            return self.carries_graph(argument, depth + 1) if argument is not None else None
        summary = callable_summary(self.index, call.func, scope, DETACH_WORDS)
        if summary is not None and (where, field) in summary.detached.fields:
            return False
        return None

    def _iterated_value_graph(self, loop: cst.For, name: str, depth: int) -> bool | None:
        """`for k, v in loss_dict.items()` / `for v in losses.values()`: the values carry the graph
        the dict's values carry (a dict of losses from a forward)."""
        iterated = loop.iter
        if not (isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Attribute)
                and iterated.func.attr.value in ("items", "values") and not iterated.args):
            return None
        target = loop.target
        if iterated.func.attr.value == "items":
            if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
                return None
            target = target.elements[1].value
        if not (isinstance(target, cst.Name) and target.value == name):
            return None
        return True if self.carries_graph(iterated.func.value, depth + 1) else None

    def _detached_element(self, binding: Binding, name: str) -> bool:
        """`loss, items = compute_loss(pred, y)` where the project's loss returns `items` detached."""
        node = binding.node
        if binding.value is not None or not isinstance(node, cst.Assign) or not isinstance(node.value, cst.Call):
            return False
        position = unpacked_position(node, name)
        if position is None:
            return False
        # a returned element may also be a size or a count (`return out, x.size(1) / n`)
        summary = callable_summary(self.index, node.value.func, self.scope_of(node), DETACH_WORDS + NUMBER_WORDS)
        return summary is not None and (position[0] in summary.detached.positions or summary.body_grad_off)

    def _unpacked_graph(self, binding: Binding, name: str, depth: int) -> tuple[bool | None] | None:
        """`loss, parts = loss_fn(pred, y)`: the graph of `parts` read from what the project function
        (or the forward of the project module) returns at its place, as a 1-tuple; None when the
        function's body does not tell."""
        node = binding.node
        if binding.value is not None or not isinstance(node, cst.Assign) or not isinstance(node.value, cst.Call):
            return None
        position = unpacked_position(node, name)
        if position is None:
            return None
        call = node.value
        scope = self.scope_of(node)
        summary = callable_summary(self.index, call.func, scope, DETACH_WORDS)
        if summary is None and isinstance(call.func, cst.Attribute):
            summary = called_method(self.index, call.func, scope)
        if summary is None or summary.graph_sources(position[0]) is None:
            return None
        return (self._returned_graph(call, summary, position[0], depth),)

    def handed_back(self, assign: cst.Assign, name: str) -> bool:
        """`out, state = model(x, state)` where what the callee returns at `state`'s place is, on
        every return, the argument it was handed for `state` (`Detached.through`) or a value without
        graph: the call attaches no graph of its own to `state`, whatever else it computes."""
        call = assign.value
        position = unpacked_position(assign, name)
        if position is None or not isinstance(call, cst.Call) or any(a.star for a in call.args):
            return False
        summary = callable_summary(self.index, call.func, self.scope_of(assign), DETACH_WORDS)
        if summary is None:
            return False
        if position[0] in summary.detached.positions:
            return True
        positional = positional_args(call)
        for where, param in summary.detached.through:
            if where != position[0]:
                continue
            argument = keyword_value(call, param)
            if argument is None and param in summary.params and summary.params.index(param) < len(positional):
                argument = positional[summary.params.index(param)].value
            if isinstance(argument, cst.Name) and argument.value == name:
                return True
        return False

    def _call_graph(self, call: cst.Call, depth: int) -> bool | None:
        func = call.func
        scope = self.scope_of(call)
        summary = callable_summary(self.index, func, scope, DETACH_WORDS)
        if summary is not None and (summary.detached.whole or summary.body_grad_off):
            return False  # a project function whose result is detached (`.item()`, computed without grad)
        args = [a.value for a in call.args]
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in DETACHING_METHODS or method in NON_DIFFERENTIABLE_METHODS:
                return False
            if method == "forward" and self.is_model(func.value, scope):
                return True
        qualname = self.index.resolve(func, scope)
        if qualname is not None:
            if qualname in NON_GRAPH_BUILTINS:
                return False
            if qualname.startswith(("numpy.", "math.", "statistics.")):
                return False
            if qualname in AUTOGRAD_GRAD:
                return _grad_graph(call)
            if qualname.startswith("torch."):
                last = qualname.rsplit(".", 1)[-1]
                if last in NON_GRAPH_TORCH:
                    return True if keyword_value(call, "requires_grad") is not None and \
                        _is_true(keyword_value(call, "requires_grad")) else False
                return _any_of(*(self.carries_graph(a, depth + 1) for a in args)) if args else None
        if summary is None and isinstance(func, cst.Attribute):
            summary = called_method(self.index, func, scope)  # `net.key_encoder(x)`: the method it can only be
        if summary is not None and summary.graph_sources(-1) is not None:
            # what the project function returns, read in its body: a graph only through the
            # arguments it is computed from (a forward of a frozen submodule, `.item()` parts)
            return self._returned_graph(call, summary, -1, depth)
        layer = self._torch_layer(func, scope)
        if layer is not None and dotted_name(func) not in self.frozen_modules():
            # `self.proj = nn.Linear(64, 32)`; `self.proj(x)`: a layer with weights of its own records
            # a graph; one without (`nn.ReLU()`, `nn.Dropout(p)`) only passes its input's on
            last = layer.rsplit(".", 1)[-1]
            return True if last not in PARAMETERLESS_LAYERS and not last.endswith("Loss") else \
                (_any_of(*(self.carries_graph(a, depth + 1) for a in args)) if args else None)
        if self.is_model(func, scope):
            if dotted_name(func) in self.frozen_modules():
                # a module whose parameters (some, or all) are frozen: a graph only through its inputs
                return _any_of(*(self.carries_graph(a, depth + 1) for a in args)) if args else None
            return True
        if isinstance(func, cst.Attribute):
            # a method on a tensor: keeps the receiver's graph
            receiver = self.carries_graph(func.value, depth + 1)
            if receiver is not None:
                return receiver
        if self.is_loss_function(func, scope):
            return True if any(self.carries_graph(a, depth + 1) for a in args) else None
        return None

    def _torch_layer(self, func: cst.BaseExpression, scope: Scope) -> str | None:
        """The `torch.nn` class every binding of `func` (a name, or `self.<attr>`) constructs."""
        if isinstance(func, cst.Name):
            bindings = scope.lookup(func.value)
            if not bindings or any(b.kind != "assign" or b.value is None for b in bindings):
                return None
            values = [(b.value, scope) for b in bindings]
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            values = [(v, self.index.scope_at(v)) for v in self.index.self_attribute_values(func.attr.value, scope)]
        else:
            return None
        found = None
        for value, where in values:
            while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                    and value.func.attr.value in ("cuda", "to", "cpu", "float", "half", "double") \
                    and isinstance(value.func.value, cst.Call):
                value = value.func.value
            qualname = self.index.resolve(value.func, where) if isinstance(value, cst.Call) else None
            if qualname is None or not qualname.startswith("torch.nn.") or qualname.startswith("torch.nn.functional.") \
                    or not qualname.rsplit(".", 1)[-1][:1].isupper() or (found is not None and qualname != found):
                return None
            found = qualname
        return found

    def _returned_graph(self, call: cst.Call, summary, position: int, depth: int) -> bool | None:
        """Whether what `call` gives (at `position` of its tuple; -1: all of it) carries a graph,
        from the parameters the function computes it from (`FunctionSummary.graph_sources`) and
        the graphs of the arguments the call hands them; None when not known."""
        sources = summary.graph_sources(position)
        if sources is None:
            return None
        if not sources:
            return False
        bound = [argument_value(call, summary, param) for param in sorted(sources)]
        if any(a is None for a in bound):
            return None
        return _any_of(*(self.carries_graph(a, depth + 1) for a in bound))

    def frozen_modules(self) -> set[str]:
        """Dotted names of modules whose parameters (some or all) the file freezes and never turns
        back on: `emb.weight.requires_grad = False` (`.weight`/`.bias`), `net.requires_grad_(False)`,
        `for p in net.parameters(): p.requires_grad = False`. Their forward has a graph only when an
        input carries one (which of their parameters stay trainable is not told). A module toggled
        back (`requires_grad = True`, a GAN's discriminator between its updates) is not frozen."""
        if self._frozen is None:
            frozen: set[str] = set()
            thawed: set[str] = set()
            for node in walk(self.index.module):
                if isinstance(node, cst.Assign) and (_is_false(node.value) or _is_true(node.value)):
                    into = frozen if _is_false(node.value) else thawed
                    for target in node.targets:
                        t = target.target
                        if not (isinstance(t, cst.Attribute) and t.attr.value == "requires_grad"):
                            continue
                        holder = t.value
                        if isinstance(holder, cst.Attribute) and holder.attr.value in ("weight", "bias"):
                            name = dotted_name(holder.value)  # `emb.weight.requires_grad`
                        elif isinstance(holder, cst.Name):  # `p.requires_grad` in `for p in net.parameters()`
                            name = self._parameters_loop_owner(node, holder.value)
                        else:
                            name = None
                        if name:
                            into.add(name)
                elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                        and node.func.attr.value == "requires_grad_":
                    name = dotted_name(node.func.value)
                    if not name:
                        continue
                    if "." in name and name.rsplit(".", 1)[1] in ("weight", "bias"):
                        name = name.rsplit(".", 1)[0]  # `emb.weight.requires_grad_(False)`
                    (frozen if node.args and _is_false(node.args[0].value) else thawed).add(name)
            self._frozen = frozen - thawed
        return self._frozen

    def _parameters_loop_owner(self, node: cst.CSTNode, variable: str) -> str | None:
        """`net` when `node` is inside `for <variable> in net.parameters():`."""
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, cst.For) and isinstance(ancestor.target, cst.Name) \
                    and ancestor.target.value == variable and isinstance(ancestor.iter, cst.Call) \
                    and isinstance(ancestor.iter.func, cst.Attribute) and ancestor.iter.func.attr.value == "parameters":
                return dotted_name(ancestor.iter.func.value)
        return None

    def is_model(self, func: cst.BaseExpression, scope: Scope) -> bool:
        """A forward: `model(x)`, `self.model(x)`, `self(x)` inside a module class. The callee must
        be a variable holding a model, never a function or class (`create_model(...)`,
        `get_module_class(...)`, `Model(cfg)` build or look up, they do not run a forward)."""
        if isinstance(func, cst.Name) and func.value == "self":
            return _in_module_class(self.index, scope)
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
        if _MODEL_VERB.match(name):
            return False  # `accelerator.unwrap_model(unet)`, `get_model(cfg)`: they hand a model over
        if isinstance(func, cst.Name):
            bindings = scope.lookup(func.value)
            if any(b.kind in ("def", "class", "import") for b in bindings) or func.value[:1].isupper():
                return False
            return self.roles.of(func, scope) in MODULE_ROLES
        if isinstance(func, cst.Attribute):
            if self.roles._is_module_path(func, scope) or func.attr.value[:1].isupper():
                return False
            # `self.eval_model(...)`: a method of a project class runs, not a module's forward
            return self.roles.of(func, scope) in MODULE_ROLES and not self.calls_a_method(func, scope)
        return False

    def calls_a_method(self, func: cst.BaseExpression, scope: Scope) -> bool:
        """`func` is a method of a project class, not an object held in an attribute: `self.<name>`
        where the enclosing class (or a base class, in this file or another project file) defines
        `<name>` with a plain `def` (not a `@property`, whose value could be a module) and no method
        assigns `self.<name>`; or `obj.<name>` where `obj` is an instance of a project class whose
        `<name>` is such a method. Calling it runs that method's body, whatever its name says
        (`self.update_actor(...)`, `agent.eval_model(...)` are no modules)."""
        if not isinstance(func, cst.Attribute):
            return False
        name, receiver = func.attr.value, func.value
        if isinstance(receiver, cst.Name) and receiver.value == "self":
            class_scope = scope.class_scope()
            if class_scope is None or self.index.self_attribute_values(name, scope):
                return False
            method = self.index.method(class_scope.name, name)
            if method is not None:
                return not is_property(method.node)
            node = self.index.classes.get(class_scope.name)
            for base in node.bases if isinstance(node, cst.ClassDef) else ():
                summary = self.index.summary_of(base.value, self.index.module_scope)
                found = summary.method(name) if isinstance(summary, ClassSummary) else None
                if found is not None:
                    return not found.is_property
            return False
        built = instance_class(self.index, receiver, scope)
        found = built.method(name) if built is not None else None
        return found is not None and not found.is_property

    def is_loss_function(self, func: cst.BaseExpression, scope: Scope) -> bool:
        tail = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) \
            else None
        if tail is None:
            return False
        qualname = self.index.resolve(func, scope)
        if qualname and qualname.startswith("torch.nn.functional."):
            return True
        return _LOSS_CALLEE.search(tail) is not None or _bound_to_loss_module(self, func, scope)

    def is_loader(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        return self.roles.of(expr, scope) == LOADER


def dataflow(ctx) -> Dataflow:
    """The file's dataflow facts, shared by rules: `ctx.model(dataflow)`."""
    return Dataflow(ctx)


# -- helpers --------------------------------------------------------------------------------------
#: `torch.nn` modules that hold no parameters: their output has a graph only through their input
PARAMETERLESS_LAYERS = frozenset({
    "ReLU", "ReLU6", "LeakyReLU", "GELU", "SiLU", "Mish", "ELU", "SELU", "CELU", "Sigmoid", "Tanh", "Softmax",
    "LogSoftmax", "Softplus", "Softsign", "Hardtanh", "Hardswish", "Hardsigmoid", "Tanhshrink", "Threshold",
    "GLU", "Identity", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "Flatten", "Unflatten",
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
    "Upsample", "PixelShuffle", "PixelUnshuffle", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d",
    "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d", "CosineSimilarity",
    "PairwiseDistance", "Softmax2d", "ChannelShuffle",
})


def argument_value(call: cst.Call, summary, param: str) -> cst.BaseExpression | None:
    """What `call` passes for the parameter `param` of the function `summary` describes (None when
    it is not passed plainly: a default, `*args`, `**kwargs`)."""
    if any(a.star for a in call.args):
        return None
    value = keyword_value(call, param)
    if value is not None:
        return value
    positional = positional_args(call)
    where = summary.params.index(param) if param in summary.params else None
    return positional[where].value if where is not None and where < len(positional) else None


def _unconditional_loads(expr: cst.CSTNode) -> Iterator[cst.Name]:
    """The names an expression always reads when it is evaluated: not the right side of `and`/`or`,
    the branches of `x if c else y`, a lambda's body, a comprehension, an attribute's name or a
    keyword's name."""
    if type(expr) is cst.Name:
        yield expr
        return
    if isinstance(expr, (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
        return
    if isinstance(expr, cst.BooleanOperation):
        yield from _unconditional_loads(expr.left)
        return
    if isinstance(expr, cst.IfExp):
        yield from _unconditional_loads(expr.test)
        return
    if isinstance(expr, cst.Attribute):
        yield from _unconditional_loads(expr.value)
        return
    if isinstance(expr, cst.NamedExpr):  # `(x := f())` binds x
        yield from _unconditional_loads(expr.value)
        return
    if isinstance(expr, cst.Arg):
        yield from _unconditional_loads(expr.value)
        return
    for child in iter_children(expr):
        yield from _unconditional_loads(child)


def _is_import_path(expr: cst.BaseExpression, scope: Scope) -> bool:
    """`torch.autograd`, `dist_autograd`: a name (or attribute chain on one) bound by an import."""
    base = expr
    while isinstance(base, cst.Attribute):
        base = base.value
    if not isinstance(base, cst.Name):
        return False
    bindings = scope.lookup(base.value)
    return bool(bindings) and all(b.kind == "import" for b in bindings)


def _is_bool_literal(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value in ("True", "False")


def _grad_graph(call: cst.Call) -> bool | None:
    """`torch.autograd.grad(...)` returns gradients with a graph of their own only when called
    with `create_graph=True` (its fifth parameter); without it (the default, False) they are
    plain tensors (no `grad_fn`), whatever graph the outputs carried."""
    flag = keyword_value(call, "create_graph")
    positional = positional_args(call)
    if flag is None and len(positional) >= 5:
        flag = positional[4].value
    if any(a.star for a in call.args) and flag is None:
        return None  # `**kwargs` may hold it
    if flag is None or isinstance(flag, cst.Name) and flag.value == "False":
        return False
    return True if _is_true(flag) else None


def _is_true(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"


def _is_false(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def _any_of(*values: bool | None) -> bool | None:
    if any(v is True for v in values):
        return True
    if all(v is False for v in values):
        return False
    return None


def _in_module_class(index: FileIndex, scope: Scope) -> bool:
    current = scope.class_scope()
    if current is None or not isinstance(current.node, cst.ClassDef):
        return False
    for base in current.node.bases:
        text = dotted_name(base.value) or ""
        if text.endswith(("Module", "LightningModule", "PreTrainedModel")):
            return True
    return False


def _bound_to_loss_module(flow: Dataflow, func: cst.BaseExpression, scope: Scope) -> bool:
    """`criterion = nn.CrossEntropyLoss()` (or `self.criterion = ...`) then `criterion(out, y)`."""
    values: list[cst.BaseExpression] = []
    if isinstance(func, cst.Name):
        values = [b.value for b in scope.lookup(func.value) if b.value is not None]
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        values = flow.index.self_attribute_values(func.attr.value, scope)
    for value in values:
        if isinstance(value, cst.Call):
            name = flow.index.resolve(value.func, flow.index.scope_at(value)) or ""
            if name.startswith("torch.nn.") and name.endswith("Loss"):
                return True
    return False


def loader_of_loop(flow: Dataflow, loop: cst.CSTNode) -> cst.BaseExpression | None:
    """The data loader a `for` loop iterates, through `enumerate`/`tqdm`/`zip`/`iter` wrappers."""
    if not isinstance(loop, cst.For):
        return None
    scope = flow.scope_of(loop)
    iterable = loop.iter
    for _ in range(4):
        if flow.is_loader(iterable, scope):
            return iterable
        if not (isinstance(iterable, cst.Call) and positional_args(iterable)):
            return None
        iterable = positional_args(iterable)[0].value
    return None


def loader_constructor(flow: Dataflow, expr: cst.BaseExpression) -> cst.Call | None:
    """The `DataLoader(...)` call a loader expression was built by, when it is in this file."""
    scope = flow.scope_of(expr)
    for _ in range(4):
        if isinstance(expr, cst.Call):
            name = flow.index.resolve(expr.func, scope) or ""
            if name.rsplit(".", 1)[-1] == "DataLoader":
                return expr
            return None
        values: list[cst.BaseExpression] = []
        if isinstance(expr, cst.Name):
            binding = flow.reaching(expr)
            bindings = [binding] if binding is not None else scope.lookup(expr.value)
            values = [b.value for b in bindings if b is not None and b.value is not None]
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            values = flow.index.self_attribute_values(expr.attr.value, scope)
        if len(values) != 1:
            return None
        expr = values[0]
        scope = flow.scope_of(expr)
    return None


def _dict_values(mapping: cst.Dict, word: str) -> list[cst.BaseExpression]:
    """The values of `{"word": value}` (a string key)."""
    return [e.value for e in mapping.elements if isinstance(e, cst.DictElement)
            and isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == word]


def _mapping_values(index: FileIndex, value: cst.BaseExpression, scope: Scope, word: str) -> list[cst.BaseExpression]:
    """What a mapping's construction gives `word`: a dict literal or `dict(word=...)`."""
    if isinstance(value, cst.Dict):
        return _dict_values(value, word)
    if isinstance(value, cst.Call) and index.resolve(value.func, scope) == "dict":
        found = keyword_value(value, word)
        return [found] if found is not None else []
    return []


def _atoms(test: cst.BaseExpression, side: bool) -> list[tuple[str, str, object]]:
    """What a test taken on `side` says of plain names (`held_flags.atoms` without the attribute
    chains): (name, "==" | "!=", literal) or (name, "truthy", bool)."""
    return [atom for atom in atoms(test, side) if "." not in atom[0]]


def _contradicts(fact: tuple[str, str, object], guard: tuple[str, str, object]) -> bool:
    """Two statements about one name that cannot both hold."""
    (_, op, value), (_, guard_op, guard_value) = fact, guard
    if op == "==" and guard_op == "==":
        return value != guard_value
    if {op, guard_op} == {"==", "!="}:
        return value == guard_value
    if op == "==" and guard_op == "truthy":
        return bool(value) != guard_value
    if op == "truthy" and guard_op == "==":
        return bool(guard_value) != value
    if op == "truthy" and guard_op == "truthy":
        return value != guard_value
    return False


_BUILTIN_NAMES = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__loader__",
                                             "__package__", "__path__", "__builtins__", "__debug__"}
# what can bind a global name the code never spells as a binding
_DYNAMIC_BINDERS = frozenset({"exec", "eval", "globals", "vars", "locals", "builtins", "__builtins__",
                              "__dict__", "get_ipython"})


_GRAD_OFF_WORDS = ("no_grad", "inference_mode", "set_grad_enabled")


def _dotted_names(expr: cst.BaseExpression) -> Iterator[str]:
    """The dotted name of every name and attribute chain in `expr` (`a.b` gives `a.b` and `a`)."""
    for node in walk_expression(expr):
        if isinstance(node, (cst.Name, cst.Attribute)):
            key = dotted_name(node)
            if key is not None:
                yield key
