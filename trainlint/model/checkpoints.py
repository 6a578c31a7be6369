"""The model of checkpoints in one file, shared by the TL4xx/TL7xx rules.

What it knows:
- every `torch.save(obj, dest)` call, what the saved object holds (a dict's keys and values,
  followed through `ckpt = {...}`, `ckpt["k"] = v`, `ckpt.update(...)`, `dict(...)` and same-file
  helpers that `return {...}`), and whether it is a checkpoint at all;
- whether a save is atomic: into a `BytesIO`, into a temporary path or file, or to a path that the
  same function (or a same-file helper it calls) later moves onto the final path with
  `os.replace`/`os.rename`/`Path.replace`/`Path.rename`/`shutil.move`; a save whose destination is a
  parameter is judged at its same-file callers;
- whether a destination path is fixed (overwritten on every save) or unique per save;
- what training state the code around a save has (optimizer, LR scheduler, GradScaler, step or
  epoch counter, RNG seeding), by role (`trainlint.model.roles`), never by name alone for assignments.

The line between a checkpoint and a data artefact: training state (a `state_dict()`, a dict of
state dicts or of keys such as model/optimizer/epoch/step, a whole model or optimizer object) is a
checkpoint whatever its path. An object we cannot see into is a checkpoint when its own name says so
(`checkpoint`, `ckpt`, `state_dict`), when the function saving it is a `*checkpoint*` helper, or when
its path says so (ckpt, checkpoint, last, best, latest, resume, snapshot, weights, model, `.ckpt`,
`.pth`, `.tar`); `.pt`/`.bin` alone are not enough (they are the usual suffix of saved tensors). A
file name or object named like data (embeddings, features, cache, dataset, tokens, predictions, ...),
a tensor factory's result, a list or a slice, and configuration (`args`, `config`, `hparams`) are
never checkpoints.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from typing import Iterator

import libcst as cst

from trainlint.model import file_facts, frameworks
from trainlint.model.atomic_saves import AtomicSaves
from trainlint.model.checkpoint_base import (COUNTER_NAME, CheckpointUses, LOAD_FUNCTIONS, ROLE_KIND, SAVE_FUNCTIONS,
                                             Save, SavedDict, string_value, walk_scope)
from trainlint.model.checkpoint_kinds import SaveKinds
from trainlint.model.file_facts import file_fact
from trainlint.model.path_literals import constant_path, path_literals
from trainlint.model.index import (CallSite, FileIndex, FunctionInfo, Scope, dotted_name, keyword_arg, positional_args,
                                   walk)
from trainlint.model.resume_checkpoints import ResumeCheckpoints
from trainlint.model.roles import MODULE_ROLES, roles
from trainlint.model.save_paths import SavePaths
from trainlint.model.saved_views import SavedViews
from trainlint.model.summaries import ClassSummary, SAVE_WORDS, callable_summary


# project helpers worth reading for what they save (`save_checkpoint`, `save_ckpt`, `dump_state`)
_SAVE_HELPER_NAME = re.compile(r"save|checkpoint|ckpt|dump|snapshot", re.I)
SEED_FUNCTIONS = re.compile(
    r"(^|\.)(manual_seed|manual_seed_all|seed_everything|set_seed|enable_full_determinism)$"
    r"|^(random\.seed|numpy\.random\.seed|np\.random\.seed)$")

# Calls whose result is RNG state.
RNG_STATE_CALLS = re.compile(r"(get_rng_state(_all)?|getstate|get_state)$")


class CheckpointModel(SaveKinds, AtomicSaves, SavePaths, ResumeCheckpoints, SavedViews):
    """The checkpoint model of one file. Each question has its own part (a mixin in the module named
    after it); this class builds what they share: the saves, loads and the dicts filled by assignment."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.index: FileIndex = ctx.index
        self.roles = ctx.model(roles)
        self.order: dict[cst.Call, int] = {site.node: i for i, site in enumerate(self.index.calls)}
        self.saves: list[Save] = []
        #: loads into the dict they are handed (`dcp.load`): `obj` is that dict, `dest` where it is read from
        self.in_place_loads: list[Save] = []
        self._save_nodes: set[cst.Call] = set()
        self.loads: list[CallSite] = []
        # (scope, name) -> [(key, value)] from `name["key"] = value` and `name.update(...)`
        self.subscript_sets: dict[tuple[Scope, str], list[tuple[str | None, cst.BaseExpression]]] = {}
        # (scope, name) of dicts handed to a call or aliased: someone else may fill them
        self.escapes: set[tuple[Scope, str]] = set()
        self._node_order: dict[cst.CSTNode, int] | None = None
        self._replayed: set[str] | None = None
        self._kinds_by_scope: dict[int, tuple[Scope, list[tuple[str, str]]]] = {}
        self._loaded_texts: set[str] | None = None
        self._moves: dict[tuple[cst.CSTNode, int], dict[str, int]] = {}
        self._groups: dict[tuple[FunctionInfo | None, int],
                           tuple[int, list[tuple[frozenset[str], str | None]]]] | None = None
        self._other_saves: dict[cst.CSTNode, bool] = {}
        self._written_names: dict[cst.CSTNode, set[str]] = {}
        self._starts: set[str] | None = None
        self._from_start: dict[str, bool] = {}
        self._assigned: dict[str, list[cst.Assign]] | None = None
        self._restarted: dict[tuple[str, str], bool] = {}
        self._training_loops: set | None = None  # `_around_training`
        self._kinds: dict[int, set[str] | None] = {}
        self._binding_tables: dict[int, tuple[list, list[int], list[int]]] = {}
        self._uses: dict[tuple[cst.CSTNode, int], CheckpointUses] = {}
        self._sources: dict[cst.Call, frozenset[str]] = {}  # load -> the path texts it reads
        self._kinds_of_load: dict[cst.Call, frozenset[str]] = {}  # load -> what its result is used for
        self._by_source: dict[str, Counter] | None = None  # path text -> kind -> loads using it
        self._written: dict[str, str] | None = None  # path text a save writes -> that save's code
        self._params: dict[tuple[int, str], bool] = {}  # (scope, name) -> bound only as a parameter
        self._name_uses: dict[tuple, tuple] = {}  # (body, scope, name) -> _uses_of_checkpoint's answer
        self._counters: dict[tuple, list] = {}  # (body, scope, name) -> the kept counter reads (_restored_counter)
        self._name_reuse: dict[tuple[int, str, int], str | None] = {}  # (scope, name, depth) -> path verdict
        self._temporary_names: dict[tuple[int, str, int], bool] = {}  # (scope, name, depth) -> from a temp file
        self._texts: dict[cst.CSTNode, str] = {}  # node -> its code: a save's path is read by several parts
        self._saved_dicts: set[tuple[frozenset, frozenset]] | None = None  # distinct (keys, state held)
        self._kinds_with_keys: dict[frozenset, set[str]] = {}  # keys a load reads -> `_saved_with_keys`
        self._build()

    def _build(self) -> None:
        index = self.index
        for site in index.calls:
            name = index.call_name(site)
            if name in SAVE_FUNCTIONS:
                args = positional_args(site.node)
                obj = args[0].value if args else _kw(site.node, "obj")
                dest = args[1].value if len(args) > 1 else _kw(site.node, "f")
                self.saves.append(Save(site, obj, dest))
                self._save_nodes.add(site.node)
            elif name in frameworks.state_saves():  # `dcp.save(state_dict, checkpoint_id=...)`
                entry = frameworks.state_saves()[name]
                args = positional_args(site.node)
                obj = args[0].value if args else _kw(site.node, entry.saves)
                self.saves.append(Save(site, obj, _kw(site.node, entry.path), framework=name))
                self._save_nodes.add(site.node)
            elif name in LOAD_FUNCTIONS:
                self.loads.append(site)
            elif name in frameworks.state_loads():  # `dcp.load(state_dict, checkpoint_id=...)`: in place
                entry = frameworks.state_loads()[name]
                args = positional_args(site.node)
                obj = args[0].value if args else _kw(site.node, entry.into)
                self.in_place_loads.append(Save(site, obj, _kw(site.node, entry.path), framework=name))
            elif _SAVE_HELPER_NAME.search((name or dotted_name(site.node.func) or "").rsplit(".", 1)[-1]):
                self._helper_save(site)
            func = site.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "update" and isinstance(func.value, cst.Name):
                key = (site.scope, func.value.value)
                for arg in site.node.args:
                    if arg.keyword is not None:
                        self.subscript_sets.setdefault(key, []).append((arg.keyword.value, arg.value))
                    else:
                        self.subscript_sets.setdefault(key, []).append((None, arg.value))
        # every node of the file: `type(...) is` on LibCST's concrete classes, not ABCMeta's isinstance
        for node, parent in index.parents.items():
            kind = type(node)
            if kind is cst.Name and (
                    (type(parent) is cst.Arg and parent.value is node)
                    or (type(parent) is cst.Assign and parent.value is node)):
                call = index.parent(parent) if isinstance(parent, cst.Arg) else None
                if not (isinstance(call, cst.Call) and call.func is not None
                        and _writes_state(index.resolve(call.func, index.scope_at(call)))):
                    self.escapes.add((index.scope_at(node), node.value))
            if kind is cst.AssignTarget and isinstance(node.target, cst.Subscript) \
                    and isinstance(parent, cst.Assign):
                target = node.target
                if isinstance(target.value, cst.Name) and len(target.slice) == 1 \
                        and isinstance(target.slice[0].slice, cst.Index):
                    scope = index.scope_at(parent)
                    key = string_value(target.slice[0].slice.value)
                    self.subscript_sets.setdefault((scope, target.value.value), []).append((key, parent.value))

    def _helper_save(self, site: CallSite) -> None:
        """`save_checkpoint(state, path)` where a project helper, of this file or another, `torch.save`s
        its `state` parameter: a save of the argument (TL402 judges the helper's own `torch.save`)."""
        summary = callable_summary(self.index, site.node.func, site.scope, SAVE_WORDS)
        if summary is None:
            self._local_helper_save(site)
            return
        if len(summary.saves) != 1:
            return  # a dict the helper builds from several parameters is judged at its own save
        def argument(param: str | None, keyword: str) -> cst.BaseExpression | None:
            if param is None:
                return None
            args = positional_args(site.node)
            if param.startswith("*"):  # forwarded through `*args` (see summaries._forwarded_position)
                position, found = int(param[1:]), keyword_arg(site.node, keyword)
            else:
                position, found = summary.params.index(param) if param in summary.params else len(args), \
                    keyword_arg(site.node, param)
            if found is not None:
                return found.value
            return args[position].value if position < len(args) else None
        obj = argument(summary.saves[0][0], "obj")
        if obj is not None:
            self.saves.append(Save(site, obj, argument(summary.save_path, "f"), summary.name))
            self._save_nodes.add(site.node)

    def _local_helper_save(self, site: CallSite) -> None:
        """`save_state(self.optimizer.state_dict(), "optimizer")` where `save_state` is a def of this
        file that no summary covers (nested in the method that fills a checkpoint directory) and
        whose one `torch.save` writes its parameter: a save of the argument, like `_helper_save`."""
        target = self.index.callee(site.node, site.scope)
        if target is None:
            return
        inner = [node for node in walk(target.node.body) if isinstance(node, cst.Call)
                 and self.index.resolve(node.func, target.scope) in SAVE_FUNCTIONS
                 and self.index.function_at(node) is target]
        args = positional_args(inner[0]) if len(inner) == 1 else []
        if not args or not isinstance(args[0].value, cst.Name):
            return
        params = [p.name.value for p in (*target.node.params.posonly_params, *target.node.params.params)]
        if target.class_name is not None and params[:1] in (["self"], ["cls"]):
            params = params[1:]
        name = args[0].value.value
        if name not in params or any(b.kind != "param" for b in target.scope.lookup(name)):
            return  # the helper saves something else, or rebinds what it was handed
        found = keyword_arg(site.node, name)
        given = positional_args(site.node)
        position = params.index(name)
        obj = found.value if found is not None else given[position].value if position < len(given) else None
        if obj is not None:
            self.saves.append(Save(site, obj, None, target.name))
            self._save_nodes.add(site.node)

    def value_of(self, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0,
                 at: cst.CSTNode | None = None) -> cst.BaseExpression | None:
        """`expr`, or for a name its assigned value (followed a few times): the only one, or, given
        the node `at` which the name is used, the last assignment before it in source order."""
        while isinstance(expr, cst.Name) and depth < 6:
            bindings = scope.lookup(expr.value)
            if len(bindings) > 1 and at is not None:
                last = self._last_before(bindings, self.node_order.get(at, -1))
                bindings = [last] if last is not None else []
            if len(bindings) != 1 or bindings[0].kind not in ("assign", "with") or bindings[0].value is None:
                return expr
            expr = bindings[0].value
            depth += 1
        return expr

    def _last_before(self, bindings: list, where: int):
        """The last of `bindings` (in their order) whose node comes before position `where`: a
        search in a table made once per list, since a script may bind a name thousands of times."""
        table = self._binding_tables.get(id(bindings))
        if table is None or table[0] is not bindings:
            entries = sorted((self.node_order.get(b.node, -1), number) for number, b in enumerate(bindings))
            latest, running = [], -1
            for _, number in entries:  # the latest binding among the first k entries
                running = max(running, number)
                latest.append(running)
            table = self._binding_tables[id(bindings)] = (bindings, [order for order, _ in entries], latest)
        _, orders, latest = table
        count = bisect.bisect_left(orders, where)
        return bindings[latest[count - 1]] if count else None

    @property
    def node_order(self) -> dict[cst.CSTNode, int]:
        """Every node's position in a source-order walk (built only when a name has several values)."""
        if self._node_order is None:
            self._node_order = {node: i for i, node in enumerate(walk(self.index.module))}
        return self._node_order

    def is_param(self, expr: cst.BaseExpression | None, scope: Scope) -> bool:
        """A name bound only as a parameter (once per scope and name: a script's module-level name
        can have thousands of bindings, and every save asks)."""
        if not isinstance(expr, cst.Name):
            return False
        key = (id(scope), expr.value)
        known = self._params.get(key)
        if known is None:
            bindings = scope.lookup(expr.value)
            known = self._params[key] = bool(bindings) and all(b.kind == "param" for b in bindings)
        return known

    def text(self, node: cst.CSTNode | None) -> str:
        if node is None:
            return ""
        text = self._texts.get(node)
        if text is None:
            text = self._texts[node] = self.ctx.code_for(node).strip()
        return text

    def loaded_texts(self) -> set[str]:
        """The text of the first argument of every `torch.load` of the file (the paths a resume
        reads), gathered once rather than once per save."""
        if self._loaded_texts is None:
            self._loaded_texts = {self.text(site.node.args[0].value) for site in self.loads if site.node.args}
        return self._loaded_texts

    def saved_dict(self, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> SavedDict | None:
        """The dict a saved expression builds, or None when it is not (known to be) a dict."""
        if expr is None or depth > 4:
            return None
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].value is None:
                return None
            base = self.saved_dict(bindings[0].value, scope, depth + 1)
            if base is None:
                return None
            owner = self.index.scope_at(bindings[0].node)
            if (owner, expr.value) in self.escapes:
                base.complete = False
            for key, value in self.subscript_sets.get((owner, expr.value), []):
                if key is None:
                    base.merge(self.saved_dict(value, scope, depth + 1))
                else:
                    base.items.append((key, value, scope))
            return base
        if isinstance(expr, cst.Dict):
            result = SavedDict()
            for element in expr.elements:
                if isinstance(element, cst.DictElement):
                    result.items.append((string_value(element.key), element.value, scope))
                    if string_value(element.key) is None:
                        result.complete = False
                else:  # `**other`
                    result.merge(self.saved_dict(element.value, scope, depth + 1))
            return result
        if isinstance(expr, cst.Call):
            name = self.index.resolve(expr.func, scope)
            if name in ("dict", "collections.OrderedDict", "OrderedDict"):
                result = SavedDict()
                for arg in expr.args:
                    if arg.keyword is not None:
                        result.items.append((arg.keyword.value, arg.value, scope))
                    elif arg.star == "**" or arg.star == "":
                        result.merge(self.saved_dict(arg.value, scope, depth + 1))
                return result
            target = self.index.callee(expr, scope)
            if target is None and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "state_dict":
                target = self._state_dict_override(expr.func.value, scope)
                if isinstance(target, SavedDict):
                    return target
            if target is not None:
                returns = [n for n in walk_scope(target.node.body) if isinstance(n, cst.Return)]
                if len(returns) == 1 and returns[0].value is not None:
                    return self.saved_dict(returns[0].value, target.scope, depth + 1)
        return None

    def _state_dict_override(self, receiver: cst.BaseExpression, scope: Scope) -> FunctionInfo | SavedDict | None:
        """`trainer.state_dict()` where `trainer` is built from a class that overrides `state_dict()`:
        the override of this file, or, for a class of another project file, the keys of the dict
        its override returns (what its values are is that file's business)."""
        built = self.value_of(receiver, scope)
        if not isinstance(built, cst.Call):
            return None
        name = dotted_name(built.func)
        if name in self.index.classes:
            return self.index.method(name, "state_dict")
        summary = self.index.summary_of(built.func, scope, ("state_dict",))
        method = summary.method("state_dict") if isinstance(summary, ClassSummary) else None
        if method is None or method.returned_keys is None:
            return None
        return SavedDict([(key, cst.Name("None"), scope) for key in method.returned_keys])

    def holds(self, content: SavedDict, depth: int = 0) -> set[str]:
        """Kinds of state a saved dict holds: model, optimizer, scheduler, scaler, step, rng."""
        kinds: set[str] = set()
        for key, value, scope in content.items:
            if key is not None:
                kinds |= self._key_kinds(key)
            kinds |= self.value_kinds(value, scope)
            if depth < 3 and isinstance(value, (cst.Dict, cst.Call, cst.Name)):
                nested = self.saved_dict(value, scope, 1)
                if nested is not None:
                    kinds |= self.holds(nested, depth + 1)
        return kinds

    def counts_step(self, content: SavedDict, depth: int = 0) -> bool:
        """A saved dict holds a step/epoch counter that counts: a counter key whose value is not a
        number written down (`"global_step": 0` is the start of another run, not a position), or
        a value that is a counter (`epoch + 1`)."""
        for key, value, scope in content.items:
            if key is not None and "step" in self._key_kinds(key) and not _number_literal(value):
                return True
            if "step" in self.value_kinds(value, scope):
                return True
            if depth < 3 and isinstance(value, (cst.Dict, cst.Call, cst.Name)):
                nested = self.saved_dict(value, scope, 1)
                if nested is not None and self.counts_step(nested, depth + 1):
                    return True
        return False

    def value_kinds(self, value: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> set[str]:
        """Kinds of state a dict value carries, from its head: `optimizer.state_dict()` is optimizer
        state, `epoch + 1` a counter, `random.getstate()` RNG state; `optimizer.param_groups[0]["lr"]`
        is nothing (a number read from the optimizer is not its state)."""
        if value is None or depth > 6:
            return set()
        if isinstance(value, cst.Call):
            func = value.func
            name = self.index.resolve(func, scope) or dotted_name(func) or ""
            last = func.attr.value if isinstance(func, cst.Attribute) else name.rsplit(".", 1)[-1]
            if RNG_STATE_CALLS.search(name or last):
                return {"rng"}
            if last == "get_optimizer_state_dict":
                return {"optimizer"}
            if isinstance(func, cst.Attribute) and last in _PASS_THROUGH_METHODS:
                return self.value_kinds(func.value, scope, depth + 1)
            if last in _PASS_THROUGH_CALLS:
                args = positional_args(value)
                return self.value_kinds(args[0].value, scope, depth + 1) if args else set()
            return set()
        if isinstance(value, cst.BinaryOperation):
            return self.value_kinds(value.left, scope, depth + 1) | self.value_kinds(value.right, scope, depth + 1)
        if isinstance(value, cst.IfExp):
            return self.value_kinds(value.body, scope, depth + 1)
        if isinstance(value, (cst.Name, cst.Attribute)):
            if isinstance(value, cst.Name) and value.value in ("self", "cls", "None", "True", "False"):
                return set()
            if isinstance(value, cst.Attribute) and value.attr.value in ("module", "_orig_mod", "model"):
                inner = self.value_kinds(value.value, scope, depth + 1)
                if inner:
                    return inner
            kinds: set[str] = set()
            role = self.state_role(value, scope)
            if role in ROLE_KIND:
                kinds.add(ROLE_KIND[role])
            elif role in MODULE_ROLES:
                kinds.add("model")
            last = value.value if isinstance(value, cst.Name) else value.attr.value
            if COUNTER_NAME.match(last):
                kinds.add("step")
            return kinds
        return set()

    def state_role(self, expr: cst.BaseExpression, scope: Scope) -> str | None:
        """The role of a name or attribute (`optimizer`, `self.scaler`, `trainer.lr_scheduler`)."""
        return self.roles.of(expr, scope)

    def seeds_rng(self) -> bool:
        return bool(file_facts.values(self.ctx, "checkpoints.seeds"))


@file_fact("checkpoints.saved_dicts")
def _saved_dict_facts(ctx) -> Iterator[tuple[cst.CSTNode, tuple[frozenset, frozenset]]]:
    """(keys, kinds of state held) of each dict the file saves."""
    model = ctx.model(checkpoint_model)
    for save in model.saves:
        content = model.saved_dict(save.obj, save.scope)
        if content is not None:
            yield save.node, (frozenset(content.keys()), frozenset(model.holds(content)))


@file_fact("checkpoints.written_paths")
def _written_path_facts(ctx) -> Iterator[tuple[cst.CSTNode, tuple[str, str]]]:
    """(path text, the save's code) of each save's destination and of the value a name there holds:
    a load of the same text reads what the save writes (TL404's load side)."""
    model = ctx.model(checkpoint_model)
    for save in model.saves:
        if save.dest is None:
            continue
        value = model.value_of(save.dest, save.scope, at=save.node)
        shown = " ".join(model.text(save.node).split())[:80]
        for node in {save.dest, value} - {None}:
            yield save.node, (model.text(node), shown)


def _shown_load(model, node: cst.Call) -> str:
    """A load as a message shows it: the call with its first argument (`torch.load(args.resume,
    ...)`). Its other arguments are left out: a file fact holds this text, and an edit of
    `weights_only=` or `map_location=` changes nothing a save's verdict reads, so the language
    server can still check the edited definition alone."""
    args = list(node.args)
    shown = model.text(node.func) + "(" + (model.text(args[0].value) if args else "")
    return " ".join((shown + (", ...)" if len(args) > 1 else ")")).split())[:80]


@file_fact("checkpoints.resume_reads")
def _resume_read_facts(ctx) -> Iterator[tuple[cst.CSTNode, tuple]]:
    """For each load: (path texts, file names its path spells out, keys read from its result,
    whether training runs after it, its whole path when every piece of it is a constant, its
    code): what TL404 needs to tell that a save's file is read back by a resume, from any
    definition of the file."""
    model = ctx.model(checkpoint_model)
    for site in model.loads:
        args = positional_args(site.node)
        if not args:
            continue
        name = model._loaded_name(site)
        keys: frozenset[str] = frozenset()
        required: frozenset[str] = frozenset()
        if name is not None:
            body = site.function.node if site.function is not None else ctx.index.module
            keys = frozenset(model._uses_of_checkpoint(name, body, site.scope)[3])
            # `ckpt["optim_state"]`: a key the load cannot do without (`.get` may miss)
            required = frozenset(key for node in model._checkpoint_uses(body, site.scope).subscripts.get(name, ())
                                 if isinstance(node.slice[0].slice, cst.Index)
                                 and (key := string_value(node.slice[0].slice.value)) is not None)
        yield site.node, (model._load_sources(site), path_literals(args[0].value, site.scope), keys, required,
                          model._training_follows(site.node), constant_path(args[0].value, site.scope),
                          _shown_load(model, site.node))


@file_fact("checkpoints.in_place_reads")
def _in_place_read_facts(ctx) -> Iterator[tuple[cst.CSTNode, tuple]]:
    """For each load into the dict it is handed (`dcp.load(state, checkpoint_id=...)`): (its
    path's text, the file names it spells out, its code): a resume that reads back what a
    framework's save of the same path writes (TL404). A bare parameter is left out: two
    functions' `path` parameters are the same text, not the same path."""
    model = ctx.model(checkpoint_model)
    for load in model.in_place_loads:
        if load.dest is None or model.is_param(load.dest, load.scope):
            continue
        yield load.node, (model.text(load.dest), path_literals(load.dest, load.scope),
                          _shown_load(model, load.node))


@file_fact("checkpoints.restored_counters")
def _restored_counter_facts(ctx) -> Iterator[tuple[cst.CSTNode, tuple]]:
    """For each load that keeps a step/epoch key of what it loaded (`start_epoch = ckpt["epoch"]
    + 1`, `return ckpt["iter"]`): (that key, the load's path when it is all constants, the load's
    code): a resume that goes on from the position a save of that key wrote (TL404)."""
    model = ctx.model(checkpoint_model)
    for site in model.loads:
        name = model._loaded_name(site)
        if name is None:
            continue
        body = site.function.node if site.function is not None else ctx.index.module
        counter = model._restored_counter(name, body, site.scope, site)
        key = None
        if isinstance(counter, cst.Subscript) and isinstance(counter.slice[0].slice, cst.Index):
            key = string_value(counter.slice[0].slice.value)
        elif isinstance(counter, cst.Call) and counter.args:
            key = string_value(counter.args[0].value)
        if key is not None:
            args = positional_args(site.node)
            yield site.node, (frozenset({key}), constant_path(args[0].value, site.scope) if args else None,
                              _shown_load(model, site.node))


@file_fact("checkpoints.read_back")
def _read_back_facts(ctx) -> Iterator[tuple[cst.CSTNode, tuple[str, str]]]:
    """What the file reads back, for TL402: ("load", path text) and ("string", the path's string)
    of each `torch.load`, ("marker", text) of what a `latest` link or marker names. A bare
    parameter is left out: two functions' `path` parameters are the same text, not the same path."""
    model = ctx.model(checkpoint_model)
    for site in model.loads:
        if not site.node.args:
            continue
        path = site.node.args[0].value
        for kind, text in _path_facts(model, path, site.scope, site.node):
            yield site.node, (kind, text)
    for site in ctx.index.calls:
        func = site.node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name in _MARKERS and not any(s.node is site.node for s in model.saves):
            for arg in site.node.args:
                for node in walk(arg.value):
                    if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.SimpleString, cst.FormattedString)) \
                            and not model.is_param(node, site.scope):
                        yield site.node, ("marker", model.text(node))


_MARKERS = frozenset({"symlink", "link", "write", "write_text", "dump"})


def _path_facts(model, path, scope, at) -> list[tuple[str, str]]:
    """("load", text) of a path expression and of the value a name holds, and ("string", s) when
    that is a string; nothing for a bare parameter."""
    found = []
    if not model.is_param(path, scope):
        found.append(("load", model.text(path)))
    value = model.value_of(path, scope, at=at)
    if value is not None and value is not path and not model.is_param(value, scope):
        found.append(("load", model.text(value)))
    if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
        found.append(("string", value.evaluated_value))
    return found


def read_back(ctx, save) -> tuple[str, str] | None:
    """What reads `save`'s path back (a `torch.load` of the same path or string, a marker naming
    it), as a ("load" | "string" | "marker", text) fact of the whole file, or None."""
    model = ctx.model(checkpoint_model)
    facts = set(file_facts.values(ctx, "checkpoints.read_back"))
    mine = set()
    if save.dest is not None:
        mine = set(_path_facts(model, save.dest, save.scope, save.node))
    for text in model.caller_arguments(save):
        mine.add(("load", text))
    for kind, text in sorted(mine):
        if (kind, text) in facts:
            return kind, text
        if kind == "load" and ("marker", text) in facts:
            return "marker", text
    # the file name the path spells out (`"enc.pt"` of `f"{out}/enc.pt"`), loaded under another
    # spelling of the path: by a load of this file (`torch.load(self.root + "/enc.pt")` in the
    # class's `load()`), or of another file of its import component (the next stage's script)
    names = path_literals(save.dest, save.scope) if save.dest is not None else frozenset()
    if not names:
        return None
    for _, literals, *_, load in file_facts.values(ctx, "checkpoints.resume_reads"):
        if names & literals:
            return "name", f"{sorted(names & literals)[0]}` by `{load}"
    linker = ctx.index.linker
    if linker is not None:
        for where in linker.files_loading(tuple(sorted(names))):
            return "name", f"{where[1]}` by a load in `{where[0]}"
    return None


@file_fact("checkpoints.seeds")
def _seed_facts(ctx) -> Iterator[tuple[cst.CSTNode, bool]]:
    """Each call that seeds a random generator."""
    index = ctx.index
    for site in index.calls:
        name = index.call_name(site) or dotted_name(site.node.func) or ""
        if SEED_FUNCTIONS.search(name):
            yield site.node, True


# Calls and methods that hand back (the state of) their receiver or first argument.
_PASS_THROUGH_METHODS = {"state_dict", "cpu", "to", "copy", "clone", "detach", "float", "half", "get_state"}
_PASS_THROUGH_CALLS = {"deepcopy", "unwrap_model", "unwrap", "get_state_dict", "get_model_state_dict",
                       "de_parallel", "unwrap_module"}


def _writes_state(name: str | None) -> bool:
    """`torch.save`, or a framework's save of (or in-place load into) the state dict it is handed
    (`dcp.save`, `dcp.load`): the dict is read there, not handed on."""
    return name in SAVE_FUNCTIONS or name in frameworks.state_saves() or name in frameworks.state_loads()


def _kw(call: cst.Call, name: str) -> cst.BaseExpression | None:
    arg = keyword_arg(call, name)
    return arg.value if arg is not None else None


def checkpoint_model(ctx) -> CheckpointModel:
    """The file's checkpoint model, shared by the checkpoint rules: `ctx.model(checkpoint_model)`."""
    return CheckpointModel(ctx)


def _number_literal(value: cst.BaseExpression | None) -> bool:
    """`0`, `-1`, `0.0`: a number the code writes down, not one it counts."""
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        value = value.expression
    return isinstance(value, (cst.Integer, cst.Float))
