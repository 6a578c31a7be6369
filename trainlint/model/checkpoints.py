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
from dataclasses import dataclass, field
from typing import Iterator

import libcst as cst

from trainlint.model import file_facts
from trainlint.model.file_facts import file_fact
from trainlint.model.index import (CallSite, FileIndex, FunctionInfo, Scope, dotted_name, iter_children, keyword_arg,
                             positional_args, walk)
from trainlint.model.modes import GRAD_OFF_CONTEXTS
from trainlint.model.roles import MODEL, OPTIMIZER, SCALER, SCHEDULER, roles
from trainlint.model.summaries import SAVE_WORDS, ClassSummary, callable_summary
from trainlint.model.training import training_model

SAVE_FUNCTIONS = ("torch.save", "torch.serialization.save")
# project helpers worth reading for what they save (`save_checkpoint`, `save_ckpt`, `dump_state`)
_SAVE_HELPER_NAME = re.compile(r"save|checkpoint|ckpt|dump|snapshot", re.I)
LOAD_FUNCTIONS = ("torch.load", "torch.serialization.load")
RENAME_FUNCTIONS = ("os.replace", "os.rename", "shutil.move")
BYTES_BUFFERS = ("io.BytesIO", "_io.BytesIO")
TEMPFILE_PREFIX = "tempfile."
SEED_FUNCTIONS = re.compile(
    r"(^|\.)(manual_seed|manual_seed_all|seed_everything|set_seed|enable_full_determinism)$"
    r"|^(random\.seed|numpy\.random\.seed|np\.random\.seed)$")

# Kinds of training state, in the order a message lists them.
STATE_KINDS = ("optimizer", "scheduler", "scaler", "step")
STATE_LABELS = {"optimizer": "optimizer state", "scheduler": "LR scheduler state",
                "scaler": "GradScaler state", "step": "step/epoch counter"}
_ROLE_KIND = {OPTIMIZER: "optimizer", SCHEDULER: "scheduler", SCALER: "scaler"}

# Dict keys that say what a value is.
KEY_PATTERNS: dict[str, re.Pattern] = {
    "model": re.compile(r"model|state_dict|^net|network|^weights|^params$|^ema|generator|discriminator|encoder|"
                        r"decoder|^module", re.I),
    "optimizer": re.compile(r"optim|^opt($|_)", re.I),
    "scheduler": re.compile(r"sched", re.I),
    "scaler": re.compile(r"scaler|^amp($|_)", re.I),
    "step": re.compile(r"step|epoch|iter|num_updates|^updates?$|^it$", re.I),
    "rng": re.compile(r"rng|random|generator_state|seed_state|np_state|numpy_state|torch_state|cuda_state", re.I),
}
# Calls whose result is RNG state.
RNG_STATE_CALLS = re.compile(r"(get_rng_state(_all)?|getstate|get_state)$")
# Names of counters: a variable bound by `for epoch in ...`, `step += 1`, or a parameter.
# (Totals such as `epochs` or `total_steps` are settings, not counters.)
COUNTER_NAME = re.compile(r"^(global_)?(step|epoch|iteration|iter|it|num_updates|update|"
                          r"completed_steps|train_step|cur_epoch|current_epoch|start_epoch|epoch_idx|step_idx|"
                          r"n_iter|cur_iter|current_step|global_step|iter_num|step_num|epoch_num)$", re.I)

CHECKPOINT_PATH = re.compile(r"ckpt|checkpoint|last|latest|best|resume|snapshot|weights|model|"
                             r"\.pth\b|\.ckpt\b|\.tar\b", re.I)
DATA_WORDS = re.compile(r"embed|feature|cache|dataset|(^|[^a-z])data([^a-z]|$)|token|vocab|index|stats\b|statistic|metric|result|"
                        r"pred|output|logit|activation|sample|batch|mask|label|target|input|buffer|"
                        r"grad|hidden|attention|prompt|image|audio|latent", re.I)
TEMP_WORDS = re.compile(r"tmp|temp|partial|incomplete|\.part\b|staging", re.I)
# Pieces of a path that change from one save to the next (a loop index over models or ranks does not).
UNIQUE_PARTS = re.compile(r"step|epoch|iter|time|stamp|date|uuid|now|version", re.I)
# Names of objects that are checkpoints whatever their path.
CHECKPOINT_OBJECT = re.compile(r"(^|[._])(\w*ckpt\w*|\w*checkpoint\w*|state_dict|save_state|train(ing)?_state|"
                               r"full_state|client_state)$", re.I)
# Objects that are configuration, not training state (`torch.save(args, "training_args.bin")`).
CONFIG_OBJECT = re.compile(r"(^|[._])(args|config|cfg|conf|hparams|hyper_?params|options|opts|settings|"
                           r"training_args|arguments)$", re.I)
EXPORT_PATH = re.compile(r"best|final|export|inference|deploy|release|pretrained|weights", re.I)
RESUME_PATH = re.compile(r"last|latest|resume|checkpoint|ckpt", re.I)


@dataclass(eq=False)
class SavedDict:
    """What a saved dict holds: its string keys and values, and whether we saw all of it."""

    items: list[tuple[str | None, cst.BaseExpression, Scope]] = field(default_factory=list)
    complete: bool = True

    def keys(self) -> list[str]:
        return [k for k, _, _ in self.items if k is not None]

    def merge(self, inner: "SavedDict | None") -> None:
        """Add what `**inner` contributes; an unknown inner dict makes this one incomplete."""
        if inner is None:
            self.complete = False
        else:
            self.items += inner.items
            self.complete &= inner.complete


@dataclass(eq=False)
class _Uses:
    """A function's nodes that may use a loaded checkpoint, by the name they use (`_checkpoint_uses`)."""

    subscripts: dict[str, list[cst.Subscript]] = field(default_factory=dict)  # `name[...]`
    methods: dict[str, list[cst.Call]] = field(default_factory=dict)  # `name.method(...)`
    restores: dict[str, list[cst.Call]] = field(default_factory=dict)  # `x.load_state_dict(<mentions name>)`
    handed: set[str] = field(default_factory=set)  # names passed whole to a plain call `f(name)`


@dataclass(eq=False)
class ResumeSave:
    """A checkpoint meant for resuming: what it holds, what the code has, what it leaves out."""

    save: "Save"
    kinds: set[str]
    available: dict[str, list[str]]
    missing: dict[str, list[str]]


@dataclass(eq=False)
class Save:
    site: CallSite
    obj: cst.BaseExpression | None
    dest: cst.BaseExpression | None
    #: a project helper of another file that does the `torch.save` (`save_checkpoint(state, path)`)
    helper: str | None = None

    @property
    def node(self) -> cst.Call:
        return self.site.node

    @property
    def scope(self) -> Scope:
        return self.site.scope


_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


_NESTED_TYPES = frozenset(_NESTED)  # concrete node classes: `type(x) in` skips ABCMeta's isinstance


def _walk_scope(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Nodes under `node`, not descending into nested defs, classes or lambdas."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if current is not node and type(current) in _NESTED_TYPES:
            continue
        stack.extend(reversed(iter_children(current)))


def string_value(expr: cst.BaseExpression | None) -> str | None:
    if isinstance(expr, cst.SimpleString):
        raw = expr.value
        if raw[0] == raw[-1] and "\\" not in raw:  # no prefix, no escape: the text between the quotes
            quotes = 3 if len(raw) >= 6 and raw[:3] == raw[0] * 3 else 1
            return raw[quotes:-quotes]
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):  # evaluated_value runs literal_eval
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


class CheckpointModel:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.index: FileIndex = ctx.index
        self.roles = ctx.model(roles)
        self.order: dict[cst.Call, int] = {site.node: i for i, site in enumerate(self.index.calls)}
        self.saves: list[Save] = []
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
        self._groups: dict[tuple[FunctionInfo | None, int], tuple[int, dict[str, int]]] | None = None
        self._other_saves: dict[cst.CSTNode, bool] = {}
        self._kinds: dict[int, set[str] | None] = {}
        self._binding_tables: dict[int, tuple[list, list[int], list[int]]] = {}
        self._uses: dict[tuple[cst.CSTNode, int], _Uses] = {}
        self._build()

    # -- building ----------------------------------------------------------------------------------
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
            elif name in LOAD_FUNCTIONS:
                self.loads.append(site)
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
                if not (isinstance(call, cst.Call) and index.resolve(call.func, index.scope_at(call)) in SAVE_FUNCTIONS):
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
        if summary is None or len(summary.saves) != 1:
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

    # -- names and values --------------------------------------------------------------------------
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
        return isinstance(expr, cst.Name) and any(b.kind == "param" for b in scope.lookup(expr.value)) \
            and all(b.kind == "param" for b in scope.lookup(expr.value))

    def text(self, node: cst.CSTNode | None) -> str:
        return self.ctx.code_for(node).strip() if node is not None else ""

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
                returns = [n for n in _walk_scope(target.node.body) if isinstance(n, cst.Return)]
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
            if role in _ROLE_KIND:
                kinds.add(_ROLE_KIND[role])
            elif role == MODEL:
                kinds.add("model")
            last = value.value if isinstance(value, cst.Name) else value.attr.value
            if COUNTER_NAME.match(last):
                kinds.add("step")
            return kinds
        return set()

    def state_role(self, expr: cst.BaseExpression, scope: Scope) -> str | None:
        """The role of a name or attribute (`optimizer`, `self.scaler`, `trainer.lr_scheduler`)."""
        return self.roles.of(expr, scope)

    # -- checkpoints ---------------------------------------------------------------------------------
    def object_kinds(self, save: Save) -> set[str] | None:
        """Kinds of state the saved object holds; None when we cannot see into it (once per save:
        every save's neighbours ask about it)."""
        if id(save) not in self._kinds:
            self._kinds[id(save)] = self._object_kinds(save)
        kinds = self._kinds[id(save)]
        return set(kinds) if kinds is not None else None

    def _object_kinds(self, save: Save) -> set[str] | None:
        obj = save.obj
        if obj is None:
            return None
        content = self.saved_dict(obj, save.scope)
        if content is not None:
            kinds = self.holds(content)
            return kinds if kinds or content.complete else None
        value = self.value_of(obj, save.scope)
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value == "state_dict":
            receiver = value.func.value
            kinds = self.value_kinds(receiver, save.scope)
            if kinds:
                return kinds
            role = self.state_role(receiver, save.scope)
            if role is not None or DATA_WORDS.search(self.text(receiver)) or \
                    re.search(r"loader|sampler|dataset|callback|tokenizer", self.text(receiver), re.I):
                return {"data"}  # a data loader's or sampler's state: part of a checkpoint, not a model
            return {"model"}
        if isinstance(value, (cst.Name, cst.Attribute)):
            role = self.state_role(value, save.scope)
            if role == MODEL and isinstance(obj, cst.Name) and self.is_param(obj, save.scope):
                return None
            if role == MODEL:
                return {"model"}
            if role in _ROLE_KIND:
                return {_ROLE_KIND[role]}
        return None

    def path_text(self, save: Save) -> str:
        """Source text of where a save goes, through single assignments and `open(...)`."""
        dest = save.dest
        if dest is None:
            return ""
        parts = [self.text(dest)]
        value = self.value_of(dest, save.scope, at=save.node)
        if isinstance(value, cst.Name):
            parts += [self.text(b.value) for b in save.scope.lookup(value.value)
                      if b.kind == "param" and b.value is not None]
        if value is not dest and value is not None:
            parts.append(self.text(value))
        if isinstance(value, cst.FormattedString):  # `f"{ckpt}.tmp"`: the path `ckpt` holds
            for part in value.parts:
                if isinstance(part, cst.FormattedStringExpression) and isinstance(part.expression, cst.Name):
                    named = self.value_of(part.expression, save.scope, at=save.node)
                    if named is not part.expression and named is not None:
                        parts.append(self.text(named))
        opened = self.opened_path(value, save.scope)
        if opened is not None:
            parts.append(self.text(opened))
            resolved = self.value_of(opened, save.scope)
            if resolved is not opened and resolved is not None:
                parts.append(self.text(resolved))
        return " ".join(parts)

    def opened_path(self, value: cst.BaseExpression | None, scope: Scope) -> cst.BaseExpression | None:
        """For `open(p, "wb")` (or `p.open("wb")`), the path `p`."""
        if isinstance(value, cst.Call):
            if self.index.resolve(value.func, scope) in ("open", "io.open", "builtins.open"):
                args = positional_args(value)
                return args[0].value if args else None
            if isinstance(value.func, cst.Attribute) and value.func.attr.value == "open":
                args = positional_args(value)
                if args and string_value(args[0].value) not in ("wb", "w+b", "ab", "xb", "rb", "r+b"):
                    return args[0].value  # fs.open(path, "wb"), gcsfs/fsspec style
                return value.func.value  # Path.open("wb")
        return None

    def is_checkpoint(self, save: Save) -> bool:
        kinds = self.object_kinds(save)
        if kinds:
            return bool(kinds & {"model", "optimizer", "scheduler", "scaler", "rng"}) or \
                ("step" in kinds and self.saved_dict(save.obj, save.scope) is not None)
        if kinds is not None:  # a dict we can read, holding nothing that is training state
            return False
        if save.obj is None or self.is_param(save.obj, save.scope):
            for obj, dest in self.project_callers(save):
                if obj and CONFIG_OBJECT.search(obj) or dest and DATA_WORDS.search(_path_words(dest)):
                    continue
                if obj and CHECKPOINT_OBJECT.search(obj) or dest and CHECKPOINT_PATH.search(dest):
                    return True  # `save_on_master(checkpoint, ".../checkpoint.pth")` in main.py
        obj_text = self.text(save.obj)
        if CONFIG_OBJECT.search(obj_text) or self._is_data_object(save):
            return False
        path = self.path_text(save)
        if DATA_WORDS.search(_path_words(path)):
            return False  # "embeddings.pt", "predictions.pt": the file name says data
        if CHECKPOINT_OBJECT.search(obj_text):
            return True  # `torch.save(checkpoint, file)`
        function = save.site.function
        if function is not None and re.search(r"checkpoint|ckpt", function.name, re.I):
            return True  # `def save_checkpoint(state, filename)`: the helper says what it writes
        if DATA_WORDS.search(obj_text):
            return False
        return bool(path) and bool(CHECKPOINT_PATH.search(path))

    def _is_data_object(self, save: Save) -> bool:
        value = self.value_of(save.obj, save.scope)
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp, cst.Subscript, cst.SimpleString,
                              cst.Integer, cst.Float, cst.ConcatenatedString, cst.FormattedString)):
            return True
        if isinstance(value, cst.Call):
            name = self.index.resolve(value.func, save.scope) or ""
            if name.startswith("torch.") and not name.startswith(("torch.nn", "torch.optim", "torch.jit")) \
                    and name not in LOAD_FUNCTIONS:
                return True  # a tensor factory; what `torch.load` returns is whatever was saved
        return False

    # -- atomicity -----------------------------------------------------------------------------------
    def is_atomic(self, save: Save, depth: int = 0) -> bool | None:
        """True: the save cannot leave a truncated final file. False: it writes the final path.
        None: the destination is a parameter whose callers we cannot see."""
        if save.dest is None and save.obj is None and _forwards_arguments(save.node):
            # `torch.save(*args, **kwargs)`: where it writes is what the callers pass
            passed = [dest for _, dest in self.project_callers(save)]
            return True if passed and all(dest and TEMP_WORDS.search(dest) for dest in passed) else None
        return self._atomic_dest(save.dest, save.node, save.scope, save.site.function, depth)

    def project_callers(self, save: Save) -> list[tuple[str | None, str | None]]:
        """(object, destination) texts that calls in the project's other files hand the module-level
        helper holding this save, when what it saves comes from its parameters."""
        function = save.site.function
        linker = self.index.linker
        if function is None or linker is None or function.scope.parent is not self.index.module_scope:
            return []
        summary = linker.own(self.index).function(function.name)
        if summary is None or len(summary.saves) != 1:
            return []
        return [(call.argument(summary.params, summary.saves[0][0], "obj"),
                 call.argument(summary.params, summary.save_path, "f"))
                for call in linker.callers(function.name)]

    def _atomic_dest(self, dest, at: cst.Call, scope: Scope, function: FunctionInfo | None, depth: int) -> bool | None:
        if dest is None:
            return True
        value = self.value_of(dest, scope, at=at)
        if self._is_buffer(value, scope) or self._is_temporary(dest, value, scope):
            return True
        if self._renamed_after(dest, at, scope) or (value is not dest and self._renamed_after(value, at, scope)):
            return True
        opened = self.opened_path(value, scope)
        if opened is not None:
            if self._is_temporary(opened, self.value_of(opened, scope), scope) \
                    or self._renamed_after(opened, at, scope):
                return True
            dest, value = opened, self.value_of(opened, scope)
        # a destination handed in by the caller: judge it where the helper is called
        if isinstance(value, cst.Name) and function is not None and self.is_param(value, scope):
            callers = self.index.callers(function)
            if not callers or depth >= 2:
                return None
            verdicts = []
            for site in callers:
                passed = self.index.argument_for(site.node, function, value.value)
                if passed is None:
                    return None
                verdicts.append(self._atomic_dest(passed, site.node, site.scope, site.function, depth + 1))
            if all(v is True for v in verdicts):
                return True
            return False if any(v is False for v in verdicts) else None
        return False

    def _is_buffer(self, value, scope: Scope) -> bool:
        if isinstance(value, cst.Call):
            name = self.index.resolve(value.func, scope) or ""
            return name in BYTES_BUFFERS or name.endswith("BytesIO")
        return False

    def _is_temporary(self, dest, value, scope: Scope, depth: int = 0) -> bool:
        for expr in (dest, value):
            if expr is None:
                continue
            for node in walk(expr):
                if isinstance(node, cst.Name) and depth < 2 and node is not dest:
                    # `fd, tmp = tempfile.mkstemp()` then `os.fdopen(fd, "wb")`: the name came from a temp file
                    for binding in scope.lookup(node.value):
                        source = binding.node.value if isinstance(binding.node, cst.Assign) else None
                        if source is not None and binding.value is None and \
                                self._is_temporary(None, source, scope, depth + 1):
                            return True
                if isinstance(node, cst.Call):
                    name = self.index.resolve(node.func, scope) or dotted_name(node.func) or ""
                    if name.startswith(TEMPFILE_PREFIX) or "atomic" in name.lower():
                        return True
                    target = self.index.callee(node, scope)
                    if target is not None and self._contains_rename(target, 0):
                        return True  # a same-file context manager that replaces on exit
            if TEMP_WORDS.search(self.text(expr)):
                return True
        return False

    def _renamed_after(self, source, at: cst.Call, scope: Scope) -> bool:
        """A later call in the same function moves `source` onto another path."""
        if source is None:
            return False
        body = self.index.function_at(at)
        body_node = body.node if body is not None else self.index.module
        return self._last_moves(body_node, scope).get(self.text(source), -1) > self.order.get(at, -1)

    def _last_moves(self, body: cst.CSTNode, scope: Scope) -> dict[str, int]:
        """For each text a rename-like call in `body` moves, the position of its last such call:
        one walk of a body for all the saves in it."""
        key = (body, id(scope))
        moves = self._moves.get(key)
        if moves is None:
            moves = self._moves[key] = {}
            for node in _walk_scope(body):
                if isinstance(node, cst.Call):
                    moved = self._moved_source(node, scope)
                    if moved is not None:
                        text = self.text(moved)
                        moves[text] = max(moves.get(text, -1), self.order.get(node, -1))
        return moves

    def _moved_source(self, call: cst.Call, scope: Scope, depth: int = 0) -> cst.BaseExpression | None:
        """For a rename-like call, the expression that is moved (`os.replace(tmp, p)` -> `tmp`)."""
        name = self.index.resolve(call.func, scope)
        args = positional_args(call)
        if name in RENAME_FUNCTIONS and args:
            return args[0].value
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("replace", "rename") and len(call.args) == 1 \
                and name not in ("os.replace", "os.rename"):
            return func.value  # Path.replace(target) / Path.rename(target); str.replace takes two
        target = self.index.callee(call, scope)
        if target is not None and args and self._contains_rename(target, depth):
            return args[0].value  # a same-file helper that commits its first argument
        return None

    def _contains_rename(self, function: FunctionInfo, depth: int) -> bool:
        if depth > 2:
            return False
        for node in _walk_scope(function.node.body):
            if isinstance(node, cst.Call):
                name = self.index.resolve(node.func, function.scope)
                if name in RENAME_FUNCTIONS:
                    return True
                func = node.func
                if isinstance(func, cst.Attribute) and func.attr.value in ("replace", "rename") \
                        and len(node.args) == 1:
                    return True
                inner = self.index.callee(node, function.scope)
                if inner is not None and inner is not function and self._contains_rename(inner, depth + 1):
                    return True
        return False

    # -- fixed or unique paths ------------------------------------------------------------------------
    def path_reuse(self, save: Save) -> str | None:
        """"fixed" when every save writes the same path, "unique" when the path varies per save,
        None when we cannot tell (a directory handed in by the caller, for example)."""
        dest = save.dest
        value = self.value_of(dest, save.scope, at=save.node)
        opened = self.opened_path(value, save.scope)
        if opened is not None:
            value = self.value_of(opened, save.scope)
        function = save.site.function
        if isinstance(value, cst.Name) and function is not None and self.is_param(value, save.scope):
            # a path handed in: judge it by what the same-file callers pass
            passed = [self.index.argument_for(site.node, function, value.value) for site in self.index.callers(function)]
            verdicts = [self._reuse(self.value_of(p, site.scope), site.scope, 0)
                        for p, site in zip(passed, self.index.callers(function)) if p is not None]
            return self._combine(verdicts) if verdicts and len(verdicts) == len(passed) else None
        if isinstance(value, cst.Attribute):
            return None  # `config.output_file`: a setting, but nothing says it is written more than once
        return self._reuse(value, save.scope, 0)

    def caller_arguments(self, save: Save) -> list[str]:
        """When a save's destination is a parameter, the source text each same-file caller passes."""
        value = self.value_of(save.dest, save.scope)
        opened = self.opened_path(value, save.scope)
        if opened is not None:
            value = self.value_of(opened, save.scope)
        function = save.site.function
        elsewhere = [dest for _, dest in self.project_callers(save) if dest] \
            if save.dest is None or self.is_param(value, save.scope) else []
        if not (isinstance(value, cst.Name) and function is not None and self.is_param(value, save.scope)):
            return elsewhere
        passed = [self.index.argument_for(site.node, function, value.value) for site in self.index.callers(function)]
        return [self.text(p) for p in passed if p is not None] + elsewhere

    def _reuse(self, expr, scope: Scope, depth: int) -> str | None:
        if expr is None or depth > 5:
            return None
        if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
            return "fixed"
        if isinstance(expr, cst.FormattedString):
            parts = [p.expression for p in expr.parts if isinstance(p, cst.FormattedStringExpression)]
            return self._combine([self._part(p, scope, depth) for p in parts])
        if isinstance(expr, cst.BinaryOperation):
            if isinstance(expr.operator, cst.Modulo) and string_value(expr.left) is not None:
                right = expr.right
                items = [e.value for e in right.elements] if isinstance(right, cst.Tuple) else [right]
                return self._combine([self._part(p, scope, depth) for p in items])
            return self._combine([self._reuse_or_part(expr.left, scope, depth),
                                  self._reuse_or_part(expr.right, scope, depth)])
        if isinstance(expr, cst.Call):
            func = expr.func
            name = self.index.resolve(func, scope) or ""
            if isinstance(func, cst.Attribute) and func.attr.value == "format" and string_value(func.value):
                return self._combine([self._part(a.value, scope, depth) for a in expr.args])
            if name in ("os.path.join", "posixpath.join", "pathlib.Path", "Path", "str", "os.fspath") \
                    or (isinstance(func, cst.Attribute) and func.attr.value in ("joinpath", "with_suffix",
                                                                                  "with_name")):
                parts = [a.value for a in expr.args]
                if isinstance(func, cst.Attribute) and func.attr.value in ("joinpath", "with_suffix", "with_name"):
                    parts.insert(0, func.value)
                return self._combine([self._reuse_or_part(p, scope, depth) for p in parts])
            return None
        return self._part(expr, scope, depth)

    def _reuse_or_part(self, expr, scope, depth):
        if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.BinaryOperation,
                             cst.Call)):
            return self._reuse(expr, scope, depth + 1)
        return self._part(expr, scope, depth)

    def _part(self, expr, scope: Scope, depth: int) -> str | None:
        """A variable piece of a path: a counter or timestamp makes it unique; a setting is fixed."""
        for node in walk(expr):
            if isinstance(node, cst.Name) and UNIQUE_PARTS.search(node.value):
                return "unique"
            if isinstance(node, cst.Attribute) and UNIQUE_PARTS.search(node.attr.value):
                return "unique"
            if isinstance(node, cst.Call):
                name = self.index.resolve(node.func, scope) or dotted_name(node.func) or ""
                if re.search(r"time|uuid|now|date|random", name):
                    return "unique"
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            if not bindings:
                return None
            verdicts = []
            for binding in bindings:
                if binding.kind == "import":
                    verdicts.append("fixed")  # a constant such as WEIGHTS_NAME
                elif binding.kind == "assign" and binding.value is not None:
                    verdicts.append(self._reuse(binding.value, scope, depth + 1))
                else:
                    verdicts.append(None)  # a parameter, a loop variable: not known here
            return self._combine(verdicts)
        if isinstance(expr, cst.Attribute):
            return "fixed"  # args.output_dir, self.ckpt_dir, cfg.path: a setting
        if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
            return "fixed"
        return None

    @staticmethod
    def _combine(verdicts: list[str | None]) -> str | None:
        if "unique" in verdicts:
            return "unique"
        if verdicts and all(v == "fixed" for v in verdicts):
            return "fixed"
        return None

    # -- the state the code around a save has -----------------------------------------------------------
    def available_state(self, scope: Scope, function: FunctionInfo | None) -> dict[str, list[str]]:
        """Training state reachable where a save runs: kind -> names (`optimizer`, `self.scaler`).

        Looks at the function's own names and parameters, the enclosing scopes, the attributes of its
        class, and the local names of same-file callers (state a helper was not handed is still state
        the script has)."""
        found: dict[str, list[str]] = {}

        def add(kind: str, label: str) -> None:
            if label not in found.setdefault(kind, []):
                found[kind].append(label)

        scopes: list[Scope] = []
        current: Scope | None = scope
        while current is not None:
            if current.kind != "class":
                scopes.append(current)
            current = current.parent
        if function is not None and function.class_name is None:
            for site in self.index.callers(function):
                if site.scope not in scopes:
                    scopes.append(site.scope)
        for each in scopes:
            for name, kind in self._scope_kinds(each):
                add(kind, name)
        linker = self.index.linker
        if function is not None and function.class_name is None and linker is not None and \
                function.scope.parent is self.index.module_scope:
            for call in linker.callers(function.name):  # callers in the project's other files
                for name, role in call.state:
                    if role in _ROLE_KIND:
                        add(_ROLE_KIND[role], name)
        class_name = function.class_name if function is not None else None
        if class_name:
            for attr, values in self.index.class_attributes.get(class_name, {}).items():
                kind = None
                for value in values:
                    if isinstance(value, (cst.Call, cst.Name)):
                        role = self.roles.of(value, self.index.scope_at(value))
                        if role in _ROLE_KIND:
                            kind = _ROLE_KIND[role]
                if kind is None and COUNTER_NAME.match(attr):
                    kind = "step"
                if kind:
                    add(kind, f"self.{attr}")
        return found

    def _scope_kinds(self, scope: Scope) -> list[tuple[str, str]]:
        """(name, kind) of the scope's names that hold training state, once per scope: a module's
        names are asked about at every save in it."""
        cached = self._kinds_by_scope.get(id(scope))
        if cached is None or cached[0] is not scope:
            kinds = [(name, kind) for name, bindings in scope.bindings.items()
                     if (kind := self._binding_kind(name, bindings, scope))]
            cached = self._kinds_by_scope[id(scope)] = (scope, kinds)
        return cached[1]

    def _binding_kind(self, name: str, bindings, scope: Scope) -> str | None:
        for binding in bindings:
            if binding.kind == "param":
                if name in ("self", "cls"):
                    return None
                role = self.roles.of(_NAME_CACHE.setdefault(name, cst.Name(name)), scope)
                if role in _ROLE_KIND:
                    return _ROLE_KIND[role]
            elif binding.kind in ("assign", "with") and isinstance(binding.value, (cst.Call, cst.Name)):
                role = self.roles.of(binding.value, scope)
                if role in _ROLE_KIND:
                    return _ROLE_KIND[role]
            elif binding.kind == "assign" and binding.value is None:
                # unpacked: `model, opt, sched = build(cfg)` (roles follows the returned tuple)
                role = self.roles.of(_NAME_CACHE.setdefault(name, cst.Name(name)), scope)
                if role in _ROLE_KIND:
                    return _ROLE_KIND[role]
        if COUNTER_NAME.match(name) and any(
                b.kind in ("for", "augassign", "param") or (b.kind == "assign" and _is_counter_value(b.value))
                for b in bindings):
            return "step"
        return None

    # -- resumable checkpoints (TL404, TL701) ------------------------------------------------------------
    def resume_saves(self) -> Iterator["ResumeSave"]:
        """Saves meant for resuming, with what they hold and what the code around them has."""
        for save in self.saves:
            content = self.saved_dict(save.obj, save.scope)
            kinds = self.object_kinds(save)
            if kinds is None:
                continue
            path = self.path_text(save)
            if content is None:
                # a bare state dict: a weights file, unless its name says it is the one to resume from
                if kinds != {"model"} or not re.search(r"last|latest|resume|checkpoint|ckpt", _path_words(path),
                                                       re.I):
                    continue
                if self.ctx.model(training_model).after_training(save.node):
                    continue  # saved once training is over: a final export, whatever its name
            elif not content.complete:
                continue
            beside = self._kinds_saved_beside(save)
            if beside is None:
                continue
            kinds = kinds | beside
            if "model" not in kinds:
                continue
            resumable = bool(kinds & {"optimizer", "step"}) or bool(RESUME_PATH.search(path))
            if not resumable:
                continue
            if "optimizer" not in kinds and EXPORT_PATH.search(_path_words(path) or path):
                continue  # best.pt / final weights with metadata: an export, not a resume point
            if self._scratch_file(save):
                continue
            available = self.available_state(save.scope, save.site.function)
            missing = {kind: available[kind] for kind in STATE_KINDS if kind in available and kind not in kinds}
            if "step" in missing and self._counter_in_path(save, missing["step"]):
                del missing["step"]  # `f"{out}/{step:07d}.pt"`: the file name holds the counter
            if "scheduler" in missing:
                # `for _ in range(start): sched.step()` on resume: replayed, not read from the file
                missing["scheduler"] = [n for n in missing["scheduler"] if n not in self.replayed_schedulers]
                if not missing["scheduler"]:
                    del missing["scheduler"]
            yield ResumeSave(save, kinds, available, missing)

    @property
    def replayed_schedulers(self) -> set[str]:
        """Schedulers fast-forwarded by replaying `step()`: `for _ in range(start_epoch): sched.step()`,
        a loop that steps them and trains nothing (no backward, no other step). Their position is
        restored from the counter the checkpoint holds, not from a state dict."""
        if self._replayed is None:
            self._replayed = set()
            for loop in self.index.loops:
                steps = [n for n in walk(loop.body) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                         and n.func.attr.value in ("step", "backward")]
                if not steps or any(n.func.attr.value == "backward" for n in steps):
                    continue
                scope = self.index.scope_at(loop)
                if all(self.roles.of(n.func.value, scope) == SCHEDULER for n in steps):
                    self._replayed |= {name for n in steps if (name := dotted_name(n.func.value))}
        return self._replayed

    def _counter_in_path(self, save: Save, counters: list[str]) -> bool:
        """The save's path names one of the step/epoch counters, directly or through the variable
        holding the path: a resume reads the counter back from the file name."""
        dest = save.dest
        if dest is None:
            return False
        wanted = set(counters)
        expressions, seen = [(dest, 0)], set()
        while expressions:
            expr, depth = expressions.pop()
            for node in walk(expr):
                if isinstance(node, (cst.Name, cst.Attribute)) and dotted_name(node) in wanted:
                    return True
                if isinstance(node, cst.Name) and depth < 2 and node.value not in seen:
                    seen.add(node.value)  # `final + ".tmp"` with `final = f"{out}/{step}.pt"`
                    expressions += [(b.value, depth + 1) for b in save.scope.lookup(node.value)
                                    if b.kind == "assign" and b.value is not None]
        # `def save_checkpoint(model, opt, path)` called with `f"{out}/{step}.pt"`: what every
        # same-file caller passes for a parameter the path is made of
        function = save.site.function
        if function is None:
            return False
        for name in seen:
            if not self.is_param(cst.Name(name), save.scope):
                continue
            passed = [self.index.argument_for(site.node, function, name) for site in self.index.callers(function)]
            if passed and all(p is not None and any(isinstance(n, (cst.Name, cst.Attribute)) and
                                                    dotted_name(n) in wanted for n in walk(p)) for p in passed):
                return True
        return False

    def _scratch_file(self, save: Save) -> bool:
        """A save into a temporary file that is never moved onto a real path (a test's scratch file)."""
        dest = save.dest
        value = self.value_of(dest, save.scope, at=save.node)
        if not self._is_temporary(dest, value, save.scope):
            return False
        return not (self._renamed_after(dest, save.node, save.scope)
                    or (value is not dest and self._renamed_after(value, save.node, save.scope)))

    def _kinds_saved_beside(self, save: Save) -> set[str] | None:
        """State written by the other saves of the same function (one file per object). None when
        one of them writes something we cannot see into, or goes through another save function."""
        group = self._save_groups().get((save.site.function, id(save.scope)))
        unseen, counts = group
        own = self.object_kinds(save)
        if own is None:
            if unseen - self.is_checkpoint(save):
                return None
        elif unseen:
            return None
        kinds = {kind for kind, count in counts.items() if count > (own is not None and kind in own)}
        body = save.site.function.node if save.site.function is not None else None
        if body is not None and self._saves_elsewhere(body):
            return None  # `save(state, file)`, `save_fsdp_optimizer(...)`: more files we cannot read
        return kinds

    def _save_groups(self) -> dict[tuple[FunctionInfo | None, int], tuple[int, dict[str, int]]]:
        """For the saves of each (function, scope): how many are checkpoints we cannot see into,
        and how many saves hold each kind of state (a save's others are its group less itself)."""
        if self._groups is None:
            self._groups = {}
            for save in self.saves:
                unseen, counts = self._groups.setdefault((save.site.function, id(save.scope)), (0, {}))
                kinds = self.object_kinds(save)
                if kinds is None:
                    self._groups[(save.site.function, id(save.scope))] = (unseen + self.is_checkpoint(save), counts)
                else:
                    for kind in kinds:
                        counts[kind] = counts.get(kind, 0) + 1
        return self._groups

    def _saves_elsewhere(self, body: cst.CSTNode) -> bool:
        """`body` calls a save function other than those this model reads (once per function)."""
        found = self._other_saves.get(body)
        if found is None:
            found = self._other_saves[body] = any(
                isinstance(node, cst.Call) and node not in self._save_nodes
                and re.search(r"(^|[._])(save|save_\w+|\w+_save)$", dotted_name(node.func) or "", re.I)
                for node in _walk_scope(body))
        return found

    def _saved_with_keys(self, keys: set[str]) -> set[str]:
        """State held by the dicts this file saves that have every key a load reads."""
        kinds: set[str] = set()
        for saved_keys, held in file_facts.values(self.ctx, "checkpoints.saved_dicts"):
            if keys <= saved_keys:
                kinds |= held
        return kinds

    def partial_restores(self) -> Iterator[tuple[CallSite, list[tuple[str, str]], set[str]]]:
        """Loads of a resumable checkpoint that restore the model but not state the code has:
        (the load, [(kind, name)] not restored, what the checkpoint is known to hold)."""
        for site in self.loads:
            name = self._loaded_name(site)
            if name is None:
                continue
            body = site.function.node if site.function is not None else self.index.module
            read, restored, opaque, keys = self._uses_of_checkpoint(name, body, site.scope)
            if opaque or "model" not in restored or not read:  # no keys read: a bare state dict
                continue
            if self._feeds_evaluation(site, body):
                continue  # the weights of a finished run, read back to be evaluated: not a resume
            saved = self._saved_with_keys(keys)
            if not ("optimizer" in saved or "step" in read):
                continue  # nothing says this checkpoint holds more than weights
            held = (saved | read) & {"optimizer", "scheduler", "scaler"}
            held.add("optimizer")
            available = self.available_state(site.scope, site.function)
            missing = [(kind, available[kind][0]) for kind in ("optimizer", "scheduler", "scaler")
                       if kind in held and kind in available and kind not in restored | read]
            if missing:
                # a resume split over helpers (`resume_model(path, model)` beside
                # `resume_train_utils(path, optimizer, scheduler)`): what the others restore counts
                elsewhere = self._restored_by_other_loads(site)
                missing = [(kind, label) for kind, label in missing if kind not in elsewhere]
            if missing:
                yield site, missing, saved | read

    def _restored_by_other_loads(self, site: CallSite) -> set[str]:
        """The kinds that the file's other loads of the same checkpoint restore or read: same path
        text, or a parameter that same-file callers bind to the same text."""
        sources = self._load_sources(site)
        found: set[str] = set()
        if not sources:
            return found
        for other in self.loads:
            if other is site or not sources & self._load_sources(other):
                continue
            name = self._loaded_name(other)
            if name is None:
                continue
            body = other.function.node if other.function is not None else self.index.module
            read, restored, _, _ = self._uses_of_checkpoint(name, body, other.scope)
            found |= read | restored
        return found

    def _load_sources(self, site: CallSite) -> set[str]:
        args = positional_args(site.node)
        path = args[0].value if args else None
        if path is None:
            return set()
        if isinstance(path, cst.Name) and site.function is not None and self.is_param(path, site.scope):
            return {self.text(arg) for caller in self.index.callers(site.function)
                    if (arg := self.index.argument_for(caller.node, site.function, path.value)) is not None}
        return {self.text(path)}

    def _feeds_evaluation(self, site: CallSite, body: cst.CSTNode) -> bool:
        """No training runs after the load and, after it, a model is put in eval mode (or a
        no_grad/inference_mode block runs): the loaded weights are evaluated."""
        if self.ctx.model(training_model).trains_after(site.node):
            return False
        order = self.node_order
        start = order.get(site.node, 0)
        for node in _walk_scope(body):
            if order.get(node, -1) <= start:
                continue
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and (
                    node.func.attr.value == "eval" and not node.args or
                    node.func.attr.value == "train" and node.args and
                    isinstance(node.args[0].value, cst.Name) and node.args[0].value.value == "False"):
                return True
            if isinstance(node, cst.WithItem) and isinstance(node.item, cst.Call) and \
                    self.index.resolve(node.item.func, self.index.scope_at(node)) in GRAD_OFF_CONTEXTS:
                return True
        return False

    def _loaded_name(self, site: CallSite) -> str | None:
        parent = self.index.parent(site.node)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
            return parent.targets[0].target.value
        if isinstance(parent, cst.AnnAssign) and isinstance(parent.target, cst.Name):
            return parent.target.value
        return None

    def _uses_of_checkpoint(self, name: str, body: cst.CSTNode,
                            scope: Scope) -> tuple[set[str], set[str], bool, set[str]]:
        """How a function uses a loaded checkpoint: kinds of keys it reads, kinds of state it
        restores with `load_state_dict`, and whether it hands the whole checkpoint elsewhere."""
        read: set[str] = set()
        keys: set[str] = set()
        restored: set[str] = set()
        opaque = False
        table = self._checkpoint_uses(body, scope)
        # the sets only grow: the nodes can be read by kind, in any order
        for node in table.subscripts.get(name, ()):
            key = string_value(node.slice[0].slice.value) if isinstance(node.slice[0].slice, cst.Index) else None
            if key is None:
                opaque = True
            else:
                read |= self._key_kinds(key)
                keys.add(key)
        for node in table.methods.get(name, ()):
            method = node.func.attr.value
            if method in ("get", "pop") and node.args:
                key = string_value(node.args[0].value)
                read |= self._key_kinds(key) if key else set()
                keys |= {key} if key else set()
                opaque |= key is None
            elif method not in ("keys", "items", "__contains__"):
                opaque = True
        for node in table.restores.get(name, ()):
            receiver = node.func.value
            if not (isinstance(receiver, cst.Name) and receiver.value == name):
                kinds = self.value_kinds(receiver, scope) & {"model", "optimizer", "scheduler", "scaler"}
                restored |= kinds or {"model"}
        if name in table.handed:
            opaque = True  # the whole checkpoint goes to a helper we do not follow
        return read, restored, opaque, keys

    def _checkpoint_uses(self, body: cst.CSTNode, scope: Scope) -> "_Uses":
        """What `_uses_of_checkpoint` reads in a function, by name, from one walk of it (a
        script's loads would otherwise each walk the whole module)."""
        key = (body, id(scope))
        table = self._uses.get(key)
        if table is None:
            table = self._uses[key] = _Uses()
            for node in _walk_scope(body):
                if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name):
                    table.subscripts.setdefault(node.value.value, []).append(node)
                elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                    receiver, method = node.func.value, node.func.attr.value
                    if isinstance(receiver, cst.Name):
                        table.methods.setdefault(receiver.value, []).append(node)
                    if method == "load_state_dict" and node.args:
                        for mentioned in self._mentioned(node.args[0].value, scope):
                            table.restores.setdefault(mentioned, []).append(node)
                elif isinstance(node, cst.Call):
                    table.handed.update(arg.value.value for arg in node.args if isinstance(arg.value, cst.Name))
        return table

    def _mentioned(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> set[str]:
        """Every name `_mentions(expr, name, scope)` finds."""
        found: set[str] = set()
        for node in walk(expr):
            if isinstance(node, cst.Name):
                found.add(node.value)
                value = self.value_of(node, scope, at=expr)
                if depth < 3 and value is not node and value is not None:
                    found |= self._mentioned(value, scope, depth + 1)
        return found

    def _mentions(self, expr: cst.BaseExpression, name: str, scope: Scope, depth: int = 0) -> bool:
        """`expr` uses the name, directly or through a name assigned from it (`sd = ckpt["model"]`)."""
        for node in walk(expr):
            if isinstance(node, cst.Name):
                if node.value == name:
                    return True
                value = self.value_of(node, scope, at=expr)
                if depth < 3 and value is not node and value is not None and \
                        self._mentions(value, name, scope, depth + 1):
                    return True
        return False

    @staticmethod
    def _key_kinds(key: str) -> set[str]:
        """What a key names: "generator_state" is RNG state, not a GAN's generator, and
        "optimizer_state_dict" is optimizer state, not a model's."""
        if KEY_PATTERNS["rng"].search(key):
            return {"rng"}
        kinds = {kind for kind, pattern in KEY_PATTERNS.items() if pattern.search(key)}
        if kinds & {"optimizer", "scheduler", "scaler"}:
            kinds.discard("model")
        return kinds

    # -- views of tensors (TL403) --------------------------------------------------------------------
    def saved_views(self, save: Save) -> list[tuple[cst.BaseExpression, str, bool]]:
        """Views among what a save writes: (the expression, what kind of view, written inline in
        the `torch.save` call). The object itself, a dict's values, a list's or tuple's items."""
        found: list[tuple[cst.BaseExpression, str, bool]] = []
        if save.obj is None:
            return found
        inline = set(walk(save.node))
        candidates: list[tuple[cst.BaseExpression, Scope]] = [(save.obj, save.scope)]
        content = self.saved_dict(save.obj, save.scope)
        if content is not None:
            candidates = [(value, scope) for _, value, scope in content.items]
        else:
            value = self.value_of(save.obj, save.scope)
            if isinstance(value, (cst.List, cst.Tuple)):
                candidates = [(e.value, save.scope) for e in value.elements if isinstance(e, cst.Element)]
            elif isinstance(value, cst.DictComp):
                candidates = [(value.value, save.scope)]
        for expr, scope in candidates:
            kind = self.view_kind(expr, scope)
            if kind:
                found.append((expr, kind, expr in inline and not isinstance(expr, cst.Name)))
        return found

    def view_kind(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> str | None:
        """What makes `expr` a view sharing a larger storage (`a slice`, `.narrow()`), or None."""
        if depth > 6:
            return None
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            if len(bindings) != 1:
                return None
            binding = bindings[0]
            if binding.value is not None and binding.kind == "assign":
                return self.view_kind(binding.value, scope, depth + 1)
            # `a, b = t.chunk(2)` and `for piece in t.split(n)`: each element is a view
            source = None
            if binding.kind == "assign" and isinstance(binding.node, cst.Assign):
                source = binding.node.value
            elif binding.kind == "for" and isinstance(binding.node, cst.For):
                source = binding.node.iter
                if isinstance(source, cst.Call) and dotted_name(source.func) == "enumerate" and source.args:
                    source = source.args[0].value
            if isinstance(source, cst.Call) and _method(source) in _SPLITTING:
                return f"a `.{_method(source)}()` piece"
            return None
        if isinstance(expr, cst.Subscript):
            base = expr.value
            indices = [e.slice for e in expr.slice]
            if any(isinstance(i, cst.Index) and string_value(i.value) is not None for i in indices):
                return None  # `ckpt["model"]`: a dict lookup
            if isinstance(base, cst.Call) and _method(base) in _SPLITTING:
                return f"a `.{_method(base)}()` piece"
            if isinstance(base, cst.Name) and self._is_split_result(base, scope):
                return f"a piece of `{self.text(base)}`"
            if self._is_sequence(base, scope):
                return None
            if not all(self._basic_index(i, scope) for i in indices):
                return None  # a tensor or list index is advanced indexing: it copies
            if any(isinstance(i, cst.Slice) for i in indices) or len(indices) > 1:
                return f"the slice `{self.text(expr)}`"
            if self._is_tensor(base, scope):
                return f"the element `{self.text(expr)}` of a larger tensor"
            return None
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _VIEW_ATTRIBUTES:
                return self.view_kind(expr.value, scope, depth + 1)
            return None
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            if method in _NARROWING_METHODS:
                return f"the view `{self.text(expr)}`"
            if method in _RESHAPING_METHODS:  # `.detach()`/`.contiguous()` can hand back the same view
                return self.view_kind(expr.func.value, scope, depth + 1)
        return None

    def _basic_index(self, index, scope: Scope) -> bool:
        """A slice, an int, `None` or `...`: basic indexing, which returns a view."""
        if isinstance(index, cst.Slice):
            return True
        value = index.value
        if isinstance(value, cst.UnaryOperation):
            value = value.expression
        if isinstance(value, (cst.Integer, cst.Ellipsis)) or (isinstance(value, cst.Name) and value.value == "None"):
            return True
        if isinstance(value, cst.Name):  # `for i in range(n)`
            bindings = scope.lookup(value.value)
            return len(bindings) == 1 and bindings[0].kind == "for" and isinstance(bindings[0].node, cst.For) \
                and isinstance(bindings[0].node.iter, cst.Call) and dotted_name(bindings[0].node.iter.func) == "range"
        return False

    def _is_split_result(self, name: cst.Name, scope: Scope) -> bool:
        value = self.value_of(name, scope)
        return isinstance(value, cst.Call) and _method(value) in _SPLITTING

    def _is_sequence(self, base: cst.BaseExpression, scope: Scope) -> bool:
        """A list, tuple, string or range: slicing it copies."""
        value = self.value_of(base, scope)
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp, cst.SimpleString, cst.FormattedString,
                              cst.ConcatenatedString, cst.Dict, cst.DictComp, cst.GeneratorExp)):
            return True
        if isinstance(value, cst.Call):
            name = self.index.resolve(value.func, scope) or ""
            return name in ("list", "tuple", "sorted", "range", "str", "bytes", "reversed")
        if isinstance(value, cst.Name):
            return any(b.annotation is not None and re.match(r"(typing\.)?(List|Tuple|Sequence|list|tuple|str)\b",
                                                               self.text(b.annotation))
                       for b in scope.lookup(value.value))
        return False

    def _is_tensor(self, base: cst.BaseExpression, scope: Scope) -> bool:
        value = self.value_of(base, scope)
        if isinstance(value, cst.Attribute) and value.attr.value in ("weight", "bias", "data", "grad"):
            return True
        if isinstance(value, cst.Call):
            name = self.index.resolve(value.func, scope) or ""
            if name.startswith("torch.") and not name.startswith(("torch.nn.", "torch.optim", "torch.utils")):
                return True
            if name in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
                return True
            return _method(value) in ("detach", "clone", "contiguous", "float", "half", "cpu")
        if isinstance(value, cst.Name):
            return any(b.annotation is not None and re.search(r"\bTensor\b|Parameter", self.text(b.annotation))
                       for b in scope.lookup(value.value))
        return False

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


@file_fact("checkpoints.seeds")
def _seed_facts(ctx) -> Iterator[tuple[cst.CSTNode, bool]]:
    """Each call that seeds a random generator."""
    index = ctx.index
    for site in index.calls:
        name = index.call_name(site) or dotted_name(site.node.func) or ""
        if SEED_FUNCTIONS.search(name):
            yield site.node, True


_NAME_CACHE: dict[str, cst.Name] = {}
# Calls and methods that hand back (the state of) their receiver or first argument.
_PASS_THROUGH_METHODS = {"state_dict", "cpu", "to", "copy", "clone", "detach", "float", "half", "get_state"}
_PASS_THROUGH_CALLS = {"deepcopy", "unwrap_model", "unwrap", "get_state_dict", "get_model_state_dict",
                       "de_parallel", "unwrap_module"}


def _forwards_arguments(call: cst.Call) -> bool:
    """`torch.save(*args, **kwargs)`: every argument comes from the caller."""
    return bool(call.args) and call.args[0].star == "*"


def _is_none(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _is_counter_value(expr: cst.BaseExpression | None) -> bool:
    """`start_epoch = ckpt["epoch"] + 1`: a counter read back from a checkpoint."""
    if isinstance(expr, cst.BinaryOperation):
        expr = expr.left
    return isinstance(expr, cst.Subscript)


# Methods that return a view of part of the receiver's storage: saving it writes the rest too.
_NARROWING_METHODS = {"narrow", "select", "diagonal", "as_strided"}
# Methods and attributes that return a view of all of it, in another shape or order. Saving one writes
# exactly the receiver's storage, so they matter only on top of a narrowing view (`w[:n].T`).
_RESHAPING_METHODS = {"view", "view_as", "expand", "expand_as", "t", "transpose", "permute", "swapaxes",
                      "swapdims", "detach", "contiguous", "requires_grad_", "detach_", "squeeze", "unsqueeze",
                      "flatten", "reshape", "unflatten", "movedim"}
_VIEW_ATTRIBUTES = {"T", "mT", "H", "mH"}
_SPLITTING = {"chunk", "split", "unbind", "tensor_split", "hsplit", "vsplit", "dsplit", "split_with_sizes"}


def _method(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def _kw(call: cst.Call, name: str) -> cst.BaseExpression | None:
    arg = keyword_arg(call, name)
    return arg.value if arg is not None else None


def _path_words(path: str) -> str:
    """The file-name part of a path text (data words in a directory name do not matter)."""
    strings = [s.rsplit("/", 1)[-1] for s in re.findall(r"[\"']([^\"']*)[\"']", path)]
    names = [s for s in strings if "." in s.strip(".")] or strings
    return names[-1] if names else ""


def checkpoint_model(ctx) -> CheckpointModel:
    """The file's checkpoint model, shared by the checkpoint rules: `ctx.model(checkpoint_model)`."""
    return CheckpointModel(ctx)
