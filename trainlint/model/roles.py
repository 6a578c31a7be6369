"""What an object is for (optimizer, scheduler, scaler, model, loader, accelerator), from what bound it.

Known first from the constructor or factory that created it (`torch.optim.AdamW(...)`,
`get_cosine_schedule_with_warmup(...)`, `GradScaler()`), through plain copies, wrappers
(`DDP(model)`, `accelerator.prepare(...)`), `self.x = ...` in any method of the class, and
parameter annotations and defaults; or from its use: `x.scale(...)`, `x.step(...)` and `x.update()`
make a GradScaler, `x.zero_grad()` and `x.step()` an optimizer, `x(...)` and `x.eval()`/`x.train()`
a module. Only when nothing is known is the variable's name used.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import libcst as cst

from trainlint.model import frameworks
from trainlint.model.index import (FileIndex, Scope, dotted_name, iter_children, keyword_arg, positional_args,
                                   unpacked_position, walk)

OPTIMIZER, SCHEDULER, SCALER, MODEL, LOADER, ACCELERATOR = (
    "optimizer", "scheduler", "scaler", "model", "loader", "accelerator")
# A framework engine that owns the whole update (a DeepSpeed engine: trainlint/frameworks/deepspeed.toml):
# a module (its forward, `state_dict()`, `train()`/`eval()`), whose `backward(loss)` divides the loss
# by its accumulation factor and whose `step()`, called on every micro-batch, steps its optimizer and
# scheduler once per window and clears the gradients. Known only from the framework's factory.
ENGINE = "engine"
# The roles whose object is a module: its forward computes, its state_dict() is the model's.
MODULE_ROLES = frozenset({"model", ENGINE})
# Known to be none of the above: its `.step()` is not an optimizer's (a profiler, a progress bar, a
# logger, a project class whose `step()` does something else) ...
OTHER = "other"
# ... or configuration (`args = parser.parse_args()`, a dict of options): never an optimizer,
# whatever it is called (`opt.lr`).
CONFIG = "config"
# The frameworks' constructors may give other roles (trainlint/frameworks/*.toml): a
# torch.distributed.pipelining schedule is a "pipeline_schedule", whose `step()` the data names as
# its train step (a backward over micro-batches: training.py's `is_train_step`), never an optimizer's.

# (qualified-name prefix, role); the longest matching prefix wins.
_CONSTRUCTORS: tuple[tuple[str, str], ...] = (
    ("torch.optim.lr_scheduler.", SCHEDULER),
    ("torch.optim.swa_utils.SWALR", SCHEDULER),
    ("torch.optim.swa_utils.AveragedModel", MODEL),
    ("torch.optim.", OPTIMIZER),
    ("torch.distributed.optim.", OPTIMIZER),
    ("transformers.AdamW", OPTIMIZER),
    ("transformers.Adafactor", OPTIMIZER),
    ("transformers.optimization.AdamW", OPTIMIZER),
    ("transformers.optimization.Adafactor", OPTIMIZER),
    ("transformers.create_optimizer", OPTIMIZER),
    ("transformers.get_", SCHEDULER),
    ("transformers.optimization.get_", SCHEDULER),
    ("diffusers.optimization.get_", SCHEDULER),
    ("timm.scheduler.", SCHEDULER),
    ("timm.optim.", OPTIMIZER),
    ("bitsandbytes.optim.", OPTIMIZER),
    ("apex.optimizers.", OPTIMIZER),
    ("torch.amp.GradScaler", SCALER),
    ("torch.GradScaler", SCALER),
    ("torch.cuda.amp.GradScaler", SCALER),
    ("torch.cpu.amp.GradScaler", SCALER),
    ("torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler", SCALER),
    ("torch.utils.data.DataLoader", LOADER),
    ("torch.utils.data.dataloader.DataLoader", LOADER),
    ("torch.nn.parallel.DistributedDataParallel", MODEL),
    ("torch.nn.DataParallel", MODEL),
    # a stack of layers built in place (`self.net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), ...)`):
    # a network, its call a forward. (Single layers and loss modules are not: a head, a criterion.)
    ("torch.nn.Sequential", MODEL),
    ("torch.nn.modules.container.Sequential", MODEL),
    ("torch.nn.parallel.DataParallel", MODEL),
    ("torchvision.models.", MODEL),
    ("timm.create_model", MODEL),
    ("torch.profiler.profile", OTHER),
    ("torch.autograd.profiler.profile", OTHER),
    ("torch.utils.tensorboard.SummaryWriter", OTHER),
    ("tensorboardX.SummaryWriter", OTHER),
    ("tqdm", OTHER),
    ("wandb", OTHER),
    ("argparse.Namespace", CONFIG),
    ("omegaconf.OmegaConf", CONFIG),
    ("yaml.safe_load", CONFIG),
    ("yaml.load", CONFIG),
    ("json.load", CONFIG),
    ("json.loads", CONFIG),
    ("types.SimpleNamespace", CONFIG),
    # the frameworks' classes (Accelerator, Fabric, DeepSpeed's optimizers): trainlint/frameworks/*.toml
    *frameworks.constructors(),
)
# Words a project file must hold to be read for the role of what it builds (see summaries.py)
ROLE_WORDS = ("step", "optim", "sched", "Module", "model", "DataLoader", "Optimizer", "GradScaler", "parse_args")
# Methods whose result is configuration (`parser.parse_args()`, `cfg.copy()` is not listed: unknown).
_CONFIG_METHODS = frozenset({"parse_args", "parse_known_args", "parse_args_into_dataclasses"})
# Bare factory names commonly imported from many places (`from transformers import get_scheduler`
# resolves through the import; these cover star imports and re-exports).
_FACTORY_NAMES = {
    "get_scheduler": SCHEDULER, "create_scheduler": SCHEDULER, "create_scheduler_v2": SCHEDULER,
    "create_optimizer": OPTIMIZER, "create_optimizer_v2": OPTIMIZER, "GradScaler": SCALER,
    "ShardedGradScaler": SCALER, "DataLoader": LOADER,
    **dict.fromkeys(frameworks.class_names(ACCELERATOR), ACCELERATOR),  # `Accelerator`, `Fabric`
}
_SCHEDULE_FACTORY = re.compile(r"^get_\w*schedule\w*$")
# project functions whose name says they build something (their returns are worth reading)
_FACTORY_WORDS = re.compile(r"^_?(build|create|make|get|init|setup|configure|load|prepare|new)_|"
                            r"optim|sched|model|loader|net", re.I)
# Annotation names (last dotted component) that state a role.
_ANNOTATIONS = {
    "Optimizer": OPTIMIZER, "LRScheduler": SCHEDULER, "_LRScheduler": SCHEDULER, "LambdaLR": SCHEDULER,
    "ReduceLROnPlateau": SCHEDULER, "GradScaler": SCALER, "ShardedGradScaler": SCALER, "Module": MODEL,
    "DataLoader": LOADER,
    **dict.fromkeys(frameworks.model_bases(), MODEL),  # `PreTrainedModel`, `LightningModule`
    **dict.fromkeys(frameworks.class_names(ACCELERATOR), ACCELERATOR),  # `Accelerator`, `Fabric`
}
# Calls that hand back (a wrapped) version of their first argument.
_PASS_THROUGH_METHODS = {"to", "cuda", "cpu", "float", "half", "bfloat16", "train", "eval", "double"}
_PASS_THROUGH_FUNCTIONS = {"torch.compile", "torch.nn.parallel.DistributedDataParallel", "torch.nn.DataParallel"}
# A loader's name. Every way a loader is known matches it: this name, or its constructor, factory or
# annotation `DataLoader` (the rules' gate relies on that).
LOADER_NAME = re.compile(r"(^|_)(data_?)?loader($|_)|(^|_)dl($|_)", re.I)
_NAMES: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"(^|_)(lr_)?sched(uler)?s?($|_)|^lr_?(sched|policy|warmup|decay)", re.I), SCHEDULER),
    (re.compile(r"(^|_)(grad_?)?scaler($|_)", re.I), SCALER),
    (re.compile(r"(^|_)(opt|optim|optimi[sz]er)s?($|_)|^opt_?[a-z]$", re.I), OPTIMIZER),
    (LOADER_NAME, LOADER),
    (re.compile(r"^accelerator$|^fabric$", re.I), ACCELERATOR),
    (re.compile(r"(^|_)(model|net|network|module|generator|discriminator|student|teacher|encoder|decoder|"
                r"critic|actor|policy)s?($|_)|^(g|d)_?net$", re.I), MODEL),
)


#: The methods whose calls on one object tell its role by use (`Roles._stepped_and_cleared`): an
#: optimizer's, a GradScaler's, an Accelerator's
_PROTOCOL_METHODS = frozenset({"zero_grad", "step", "scale", "update", "unscale_", "backward",
                               *frameworks.methods("accumulation_context")})
#: the calls `_stepped_and_cleared` records: the protocol's, and a module's mode switches
_USE_METHODS = _PROTOCOL_METHODS | {"eval", "train"}


#: What code does with an optimizer or a scheduler (torch's, and the wrappers' usual extras): a name
#: with one of these used on it keeps the role its name suggests.
_STATE_API = frozenset({
    "step", "zero_grad", "param_groups", "state_dict", "load_state_dict", "add_param_group", "state",
    "defaults", "get_last_lr", "get_lr", "last_epoch", "base_lrs", "optimizer", "synchronize",
    "skip_synchronize", "consolidate_state_dict", "backward", "update", "rate", "lr",
})


def role_from_name(name: str) -> str | None:
    """The role a variable's name suggests (`lr_sched` -> scheduler), the last resort."""
    for pattern, role in _NAMES:
        if pattern.search(name):
            return role
    return None


def role_of_callee(qualname: str | None) -> str | None:
    return _callee_role(qualname)[0]


def _scheduler_by_name_only(qualname: str | None) -> bool:
    """`role_of_callee` says scheduler from the class name's ending alone (no constructor entry, no
    schedule factory): a library's `*Scheduler` is an LR scheduler only if it drives an optimizer."""
    return _callee_role(qualname) == (SCHEDULER, True)


@functools.lru_cache(maxsize=4096)  # asked for every call of every model; a pure function of the name
def _callee_role(qualname: str | None) -> tuple[str | None, bool]:
    """The role a callee's qualified name gives, and whether only its name's ending (`...LR`,
    `...Scheduler`) gave it."""
    if not qualname:
        return None, False
    best: tuple[int, str] | None = None
    for prefix, role in _CONSTRUCTORS:
        if qualname == prefix or (prefix.endswith(".") and qualname.startswith(prefix)) or \
                qualname.startswith(prefix + "."):
            if best is None or len(prefix) > best[0]:
                best = (len(prefix), role)
    if best:
        return best[1], False
    last = qualname.rsplit(".", 1)[-1]
    if last in _FACTORY_NAMES:
        return _FACTORY_NAMES[last], False
    if _SCHEDULE_FACTORY.match(last):
        return SCHEDULER, False
    if last.endswith("LR") or last.endswith("Scheduler"):
        return SCHEDULER, True
    if qualname.startswith(("transformers.", "diffusers.")) and "Model" in last or last.startswith("AutoModel"):
        return MODEL, False
    return None, False


@dataclass(frozen=True)
class Source:
    """How a role was established: `kind` of evidence (trainlint.finding.EVIDENCE_KINDS), the node
    that shows it, a phrase for a message; `proven` False when only a name suggests it (then
    `kind` is what would have proven it and `node` the name)."""

    kind: str
    node: cst.CSTNode
    how: str
    proven: bool = True


class Roles:
    """Role queries for one file, memoised."""

    def __init__(self, index: FileIndex) -> None:
        self.index = index
        self._memo: dict[tuple[cst.CSTNode, Scope], str | None] = {}
        self._bindings_memo: dict[tuple[str, Scope, int], str | None] = {}
        self._binding_sources: dict[tuple[str, Scope, int], Source | None] = {}
        self._cleared: dict[tuple[str, cst.CSTNode | None], set[str]] | None = None
        self._contexts: set | None = None  # `_accumulation_contexts`
        self._attributes: dict[tuple[cst.CSTNode | None, str], set[str]] | None = None
        #: why a role was given against what the name or class says: (expr, scope) -> a phrase
        self.evidence: dict[tuple[cst.CSTNode, Scope], str] = {}
        #: how each role `of` gave was established (`source`): (expr, scope) -> Source
        self._sources: dict[tuple[cst.CSTNode, Scope], Source | None] = {}
        # the Source of the role the inference last settled on: every step that settles a role
        # sets it just before returning it, and the steps above return that role unchanged
        self._last: Source | None = None

    def of(self, expr: cst.BaseExpression, scope: Scope) -> str | None:
        key = (expr, scope)
        if key not in self._memo:
            self._memo[key] = None  # breaks cycles such as `model = wrap(model)`
            self._last = None
            role = self._infer(expr, scope, depth=0)
            source = self._last if role is not None else None
            if role in (SCALER, None) and (source is None or not source.proven) and self.scales_losses(expr, scope):
                # `x.scale(loss)`, `x.step(opt)` and `x.update()`: the GradScaler protocol, whatever it is called
                role = SCALER
                source = Source("use", expr, "its `scale(...)`, `step(...)` and `update()` are called: a GradScaler's use")
            elif role is None and self.runs_as_module(expr, scope):
                plain = self.plain_instance(expr, scope)
                if plain is not None:
                    # built by a class of the project with no torch (or any library) class among its
                    # ancestors: its `eval()` and `__call__` are its own methods, not a module's
                    role = OTHER
                    source = Source("construction", plain, f"built by `{dotted_tail(plain.func)}(...)`, a class "
                                    "of the project that derives from no torch module: its `eval()` is its own")
                else:
                    # `x.eval()` (or `x.train()`) and `x(...)`: a module's mode switched and its forward run
                    role = MODEL
                    source = Source("use", expr, "it is called and its `eval()`/`train()` switches its mode: "
                                    "a module's use")
            elif (role in (SCHEDULER, None) or (role == OPTIMIZER and (source is None or not source.proven))) and \
                    self.clears_gradients(expr, scope):
                # torch's schedulers have no `zero_grad()`: an object whose gradients are cleared
                # and that is stepped owns the optimizer (a warmup wrapper named `scheduler`)
                role = OPTIMIZER
                source = Source("use", expr, "its `zero_grad()` and `step()` are both called")
                self.evidence[key] = "its `zero_grad()` and `step()` are called: it acts as the optimizer"
            elif role is None and self.accelerates(expr, scope):
                # `with x.accumulate(model):` and `x.backward(loss)`: the Accelerator protocol, whatever it is called
                role = ACCELERATOR
                source = Source("use", expr, "its `accumulate(...)` context is entered and its `backward(loss)` "
                                "called: an Accelerator's use")
            self._memo[key] = role
            self._sources[key] = source
        return self._memo[key]

    def source(self, expr: cst.BaseExpression, scope: Scope) -> Source | None:
        """How the role `of(expr, scope)` gives was established: the code that proves it, or,
        for a role only a name suggests, the name (`Source.proven` False)."""
        self.of(expr, scope)
        return self._sources.get((expr, scope))

    def _settle(self, role: str | None, kind: str, node: cst.CSTNode, how: str, proven: bool = True) -> str | None:
        """Record how `role` was found (when it was), and give it back."""
        if role is not None:
            self._last = Source(kind, node, how, proven)
        return role

    def clears_gradients(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """Both `<expr>.zero_grad()` and `<expr>.step()` are called on the same object: in the
        function that holds `expr` for a local name, in any method of the class for `self.<attr>`."""
        name = dotted_name(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
        if name is None or name.count(".") > 1 or (isinstance(expr, cst.Attribute) and not name.startswith("self.")):
            return False
        if name.startswith("self."):
            owner = scope.class_scope()
            owner_node = owner.node if owner is not None else None
        else:
            function = scope if scope.kind == "function" else None
            owner_node = function.node if function is not None else None
        return self._stepped_and_cleared().get((name, owner_node), set()) & {"zero_grad", "step", "scale"} == \
            {"zero_grad", "step"}

    def scales_losses(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """`<expr>.scale(...)`, `<expr>.step(...)` and `<expr>.update()` are all called on the same
        object (where `clears_gradients` looks): it is used as a GradScaler."""
        key = self._owner_key(expr, scope)
        return key is not None and {"scale", "step", "update"} <= self._stepped_and_cleared().get(key, set())

    def accelerates(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """`with <expr>.accumulate(...):` is entered and `<expr>.backward(...)` called on the same
        object (where `clears_gradients` looks): it is used as an Accelerator."""
        key = self._owner_key(expr, scope)
        used = self._stepped_and_cleared().get(key, set()) if key is not None else set()
        return "backward" in used and not used.isdisjoint(frameworks.methods("accumulation_context")) and \
            key in self._accumulation_contexts()

    def _accumulation_contexts(self) -> set:
        """The receivers (as `_owner_key` keys) of an accumulation context entered by a `with`."""
        if self._contexts is None:
            self._contexts = set()
            methods = frameworks.methods("accumulation_context")
            for site in self.index.calls:
                func = site.node.func
                if isinstance(func, cst.Attribute) and func.attr.value in methods and \
                        isinstance(self.index.parent(site.node), cst.WithItem):
                    key = self._owner_key(func.value, site.scope)
                    if key is not None:
                        self._contexts.add(key)
        return self._contexts

    def runs_as_module(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """`<expr>(...)` is called and so is `<expr>.eval()` or `<expr>.train()` (where
        `clears_gradients` looks): a module, whose mode is switched and whose forward runs."""
        key = self._owner_key(expr, scope)
        used = self._stepped_and_cleared().get(key, set()) if key is not None else set()
        return "()" in used and bool(used & {"eval", "train"})

    def plain_instance(self, expr: cst.BaseExpression, scope: Scope) -> cst.Call | None:
        """The construction of a local name bound once, by a call of a project class that is plain
        (`ClassSummary.plain`: only `object` and plain project classes among its ancestors); None
        otherwise (a name bound twice, a library class, a class deriving from anything unread)."""
        if not isinstance(expr, cst.Name):
            return None
        bindings = scope.lookup(expr.value)
        if len(bindings) != 1 or bindings[0].kind != "assign" or not isinstance(bindings[0].value, cst.Call):
            return None
        call = bindings[0].value
        summary = self.index.summary_of(call.func, scope)
        # a class's summary says `plain`; a function's has no such field (summaries imports this
        # module, so the type is not named here)
        return call if getattr(summary, "plain", False) else None

    def _owner_key(self, expr: cst.BaseExpression, scope: Scope):
        name = dotted_name(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
        if name is None or name.count(".") > 1 or (isinstance(expr, cst.Attribute) and not name.startswith("self.")):
            return None
        if name.startswith("self."):
            owner = scope.class_scope()
            return name, owner.node if owner is not None else None
        function = scope if scope.kind == "function" else None
        return name, function.node if function is not None else None

    def _stepped_and_cleared(self) -> dict[tuple[str, cst.CSTNode | None], set[str]]:
        """(receiver, its function or, for `self.<attr>`, its class) -> which of `zero_grad`/`step`
        are called on it: one pass over the file's calls."""
        if self._cleared is None:
            self._cleared = {}
            for site in self.index.calls:
                func = site.node.func
                uses = []
                if isinstance(func, (cst.Name, cst.Attribute)) and site.node.args:
                    uses.append(("()", dotted_name(func)))  # the object itself is called (`net(x)`)
                if isinstance(func, cst.Attribute) and func.attr.value in _USE_METHODS:
                    uses.append((func.attr.value, dotted_name(func.value)))
                for method, name in uses:
                    if name is None:
                        continue
                    if name.startswith("self."):
                        owner = site.scope.class_scope()
                        owner_node = owner.node if owner is not None else None
                    else:
                        owner_node = site.function.node if site.function is not None else None
                    self._cleared.setdefault((name, owner_node), set()).add(method)
        return self._cleared

    def is_(self, expr: cst.BaseExpression, scope: Scope, role: str) -> bool:
        return self.of(expr, scope) == role

    # -- inference --------------------------------------------------------------------------
    def _infer(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> str | None:
        if depth > 8:
            return None
        if isinstance(expr, cst.Name):
            return self._from_bindings(expr.value, scope, depth) or self._settle(
                self._role_from_name(expr.value, scope), "construction", expr,
                f"only the name `{expr.value}` says so", proven=False)
        if isinstance(expr, cst.Attribute):
            if self._is_module_path(expr, scope):  # `torch.optim` is a module, not an optimizer
                return None
            if isinstance(expr.value, cst.Name) and expr.value.value == "self":
                role = self._from_self_attribute(expr.attr.value, scope, depth)
                if role:
                    return role
            return self._settle(role_from_name(expr.attr.value), "construction", expr,
                                f"only the name `{expr.attr.value}` says so", proven=False)
        if isinstance(expr, cst.Call):
            return self._from_call(expr, scope, depth)
        if isinstance(expr, cst.Dict):
            return self._settle(CONFIG, "construction", expr, "a dict literal")
        if isinstance(expr, cst.IfExp):
            # `GradScaler() if amp else None`: the object is that, or absent
            branches = [b for b in (expr.body, expr.orelse) if not (isinstance(b, cst.Name) and b.value == "None")]
            if len(branches) == 1:
                return self._infer(branches[0], scope, depth + 1)
        return None

    def _role_from_name(self, name: str, scope: Scope) -> str | None:
        """The role the name suggests, unless how the name is used says otherwise: `opt` whose
        `opt.resume_path`, `opt.arch` are read and that is never stepped, cleared or asked for
        its `param_groups` is an options namespace, not an optimizer."""
        role = role_from_name(name)
        if role not in (OPTIMIZER, SCHEDULER):
            return role
        owner = scope
        while owner is not None and name not in owner.bindings:
            owner = owner.parent
        used = self._attributes_used().get((owner.node if owner is not None else None, name), set())
        if used & _STATE_API or len(used - _STATE_API) < 2:
            return role
        return None

    def _attributes_used(self) -> dict[tuple[cst.CSTNode | None, str], set[str]]:
        """(scope node, name) -> the attributes read or written on the name there: one pass over
        the file."""
        if self._attributes is None:
            self._attributes = {}
            scope_of_node = self.index.scope_of_node
            stack = [(self.index.module, self.index.module_scope)]
            while stack:
                node, scope = stack.pop()
                inner = scope_of_node.get(node, scope)
                stack.extend((child, inner) for child in iter_children(node))
                if type(node) is cst.Attribute and type(node.value) is cst.Name:
                    owner = scope
                    while owner is not None and node.value.value not in owner.bindings:
                        owner = owner.parent
                    key = (owner.node if owner is not None else None, node.value.value)
                    self._attributes.setdefault(key, set()).add(node.attr.value)
        return self._attributes

    def _is_module_path(self, expr: cst.Attribute, scope: Scope) -> bool:
        base = expr.value
        while isinstance(base, cst.Attribute):
            base = base.value
        return isinstance(base, cst.Name) and any(b.kind == "import" for b in scope.lookup(base.value))

    def _from_call(self, call: cst.Call, scope: Scope, depth: int) -> str | None:
        tail = dotted_tail(call.func) or ""
        if tail[:1].isupper() or _FACTORY_WORDS.search(tail):
            # a project class plays the role its code shows (a `WarmupScheduler` whose `step()`
            # steps the optimizer is an optimizer); a project factory, the role of what it returns.
            # (Other project functions are not read for this: that would parse most of a library.)
            # ("lambda": a factory of plain functions, `get_data_scaler`, is read to say it is none)
            summary = self.index.summary_of(call.func, scope, ROLE_WORDS + ("lambda",))
            if summary is not None:
                # project code that was read: what it builds, and when it builds none of the roles
                # its name is no proof (`get_beta_schedule(...)` returns a noise schedule, not an LR
                # scheduler)
                return self._summary_role(summary, call) or self._from_returns(call, scope, depth, position=None)
        qualname = self.index.resolve(call.func, scope)
        role = role_of_callee(qualname)
        if role == SCHEDULER and _scheduler_by_name_only(qualname) and not self._drives_optimizer(call, scope, depth):
            # a library class whose name ends in `Scheduler`/`LR` but is handed no optimizer
            # (diffusers' `DDPMScheduler(num_train_timesteps=1000)`: a noise schedule): no LR scheduler
            role = None
        if role:
            return self._settle(role, "construction", call, f"built by `{qualname}(...)`")
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _CONFIG_METHODS:
            return self._settle(CONFIG, "construction", call, f"made by `.{call.func.attr.value}()`")
        if qualname == "vars" or qualname == "dict":
            return self._settle(CONFIG, "construction", call, f"made by `{qualname}()`")
        args = positional_args(call)
        if qualname in _PASS_THROUGH_FUNCTIONS or (
                isinstance(call.func, cst.Attribute) and call.func.attr.value == "prepare" and len(args) == 1):
            return self._infer(args[0].value, scope, depth + 1) if args else None
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _PASS_THROUGH_METHODS:
            inner = self._infer(call.func.value, scope, depth + 1)
            return inner if inner == MODEL else None
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "from_pretrained":
            if "Model" not in (dotted_tail(call.func.value) or ""):
                return None
            # a model class of the libraries (`transformers.AutoModelForCausalLM`): a construction;
            # any other class whose name says "Model": the name alone
            library = (qualname or "").split(".", 1)[0] in ("transformers", "diffusers", "peft")
            return self._settle(MODEL, "construction", call, f"built by `{qualname}(...)`" if library else
                                f"only the name `{dotted_tail(call.func.value)}` says so", proven=library)
        role = self._from_accessor(call)
        if role is not None:
            return role
        role = self._from_returns(call, scope, depth, position=None)
        if role is None and not (tail[:1].isupper() or _FACTORY_WORDS.search(tail)):
            # a project function whose name says nothing (`build`, `setup`): what its code returns is
            # the proof, not the name of the variable it is bound to. Asked only here, for a value
            # whose role is in question, so a library's other calls are never read for it.
            role = self._from_summary(call, scope, ROLE_WORDS)
        return role

    def _from_summary(self, call: cst.Call, scope: Scope, words: tuple[str, ...],
                      position: int | None = None) -> str | None:
        """The role of what the project function or class `call` runs gives, from its summary (this
        file's or another's): the whole result, or the element at `position` of the tuple it returns."""
        summary = self.index.summary_of(call.func, scope, words)
        return self._summary_role(summary, call, position) if summary is not None else None

    def _drives_optimizer(self, call: cst.Call, scope: Scope, depth: int) -> bool:
        """The call is handed an optimizer (`optimizer=`, or a first argument that is one): what an
        LR scheduler, which sets the learning rate of an optimizer's groups, is always given."""
        handed = keyword_arg(call, "optimizer")
        args = positional_args(call)
        value = handed.value if handed is not None else args[0].value if args else None
        if value is None:
            return False
        return self._infer(value, scope, depth + 1) == OPTIMIZER

    def _summary_role(self, summary, call: cst.Call, position: int | None = None) -> str | None:
        role = summary.produces if position is None else summary.produces_at(position)
        if not role:
            return None
        tail = dotted_tail(call.func) or "the call"
        how = (f"built by `{tail}(...)`, whose code makes one" if position is None else
               f"element {position + 1} of what `{tail}(...)` returns, whose code builds one")
        return self._settle(role, "construction", call, how)

    def _from_accessor(self, call: cst.Call) -> str | None:
        """`self.lr_schedulers()` in a class whose base resolves to a framework class with that
        accessor (the framework models' `accessor` entries): the object the framework built."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
            return None
        found = frameworks.accessors().get(func.attr.value)
        function = self.index.function_at(call) if found else None
        klass = self.index.classes.get(function.class_name) if function is not None and function.class_name else None
        if klass is None:
            return None
        for base in klass.bases:
            qualname = self.index.resolve(base.value, self.index.module_scope) or ""
            root, last = qualname.split(".", 1)[0], qualname.rsplit(".", 1)[-1]
            for owner, role, packages in found:
                if last == owner and root in packages:
                    return self._settle(role, "framework", call,
                                        f"`self.{func.attr.value}()` of a `{qualname}` hands back the {role} it built")
        return None

    def _from_returns(self, call: cst.Call, scope: Scope, depth: int, position: int | None) -> str | None:
        """What a same-file function returns (`opt = build_optimizer(model)`), or the element at
        `position` of the tuple it returns (`model, opt, sched = build(cfg)`)."""
        target = self.index.callee(call, scope)
        if target is None:
            return None
        for node in walk(target.node.body):
            if not isinstance(node, cst.Return) or node.value is None:
                continue
            value = node.value
            if position is not None:
                if isinstance(value, cst.Call) and self.index.function_at(node) is target:
                    # `return make_loader(args, flag)`: the element of what that call returns
                    role = self._from_call_at(value, target.scope, depth + 1, position)
                    if role:
                        return role
                    continue
                if not (isinstance(value, (cst.Tuple, cst.List)) and position < len(value.elements)):
                    continue
                value = value.elements[position].value
            if self.index.function_at(node) is not target:  # a return of a nested def
                continue
            role = self._infer(value, target.scope, depth + 1)
            if role:
                return role
        return None

    def _from_bindings(self, name: str, scope: Scope, depth: int) -> str | None:
        """The role the last binding of `name` that tells one gives it. Once per name, scope and
        depth: every use of a name bound in each of a script's thousand loops asks the same."""
        key = (name, scope, depth)
        if key not in self._bindings_memo:
            role = self._from_each_binding(name, scope, depth)
            self._bindings_memo[key] = role
            self._binding_sources[key] = self._last if role is not None else None
        elif self._bindings_memo[key] is not None:
            self._last = self._binding_sources.get(key)
        return self._bindings_memo[key]

    def _from_each_binding(self, name: str, scope: Scope, depth: int) -> str | None:
        # the last binding that tells a role gives it; one that only guesses it from a name
        # (`model, opt, sched = accelerator.prepare(model, opt, sched)` re-reads `sched`) yields
        # to an earlier binding that proves the same role (`sched = get_scheduler(...)`)
        guessed: tuple[str, Source | None] | None = None
        for binding in reversed(scope.lookup(name)):
            role = self._role_of_binding(binding, name, scope, depth)
            if not role:
                continue
            if self._last is not None and not self._last.proven:
                if guessed is None:
                    guessed = (role, self._last)
                continue
            if guessed is not None and guessed[0] != role:
                break
            return role
        if guessed is not None:
            self._last = guessed[1]
            return guessed[0]
        return None

    def _role_of_binding(self, binding, name: str, scope: Scope, depth: int) -> str | None:
        role = None
        if binding.kind == "param":
            if binding.annotation is not None:
                role = self._settle(_ANNOTATIONS.get(dotted_tail(_unwrap_optional(binding.annotation)) or ""),
                                    "type", binding.annotation, "its parameter annotation")
            if role is None and binding.value is not None:
                role = self._infer(binding.value, scope, depth + 1)
        elif binding.kind in ("assign", "with"):
            value = binding.value
            if value is None and isinstance(binding.node, cst.Assign):
                value = _unpacked_prepare_argument(binding.node, name)
                if value is None:
                    role = self._from_unpacked_return(binding.node, name, scope, depth)
            if value is not None:
                role = self._infer(value, scope, depth + 1)
            if role is None and binding.annotation is not None:
                role = self._settle(_ANNOTATIONS.get(dotted_tail(_unwrap_optional(binding.annotation)) or ""),
                                    "type", binding.annotation, "its annotation")
        return role

    def _from_unpacked_return(self, assign: cst.Assign, name: str, scope: Scope, depth: int) -> str | None:
        unpacked = unpacked_position(assign, name)
        if not isinstance(assign.value, cst.Call) or unpacked is None:
            return None
        return self._from_element(assign.value, unpacked[0], scope, depth)

    def _from_unpacked_attribute(self, attr: str, scope: Scope, depth: int) -> str | None:
        """`self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(...)` in a method
        of the class: the role of the element the attribute takes, as for a local name."""
        class_scope = scope.class_scope()
        if class_scope is None:
            return None
        for assign, position in self.index.unpacked_attributes.get(class_scope.name, {}).get(attr, ()):
            role = self._from_element(assign.value, position, self.index.scope_at(assign), depth + 1)
            if role is not None:
                return role
        return None

    def _from_element(self, call: cst.Call, position: int, scope: Scope, depth: int) -> str | None:
        """The role of the element at `position` of what `call` returns: `engine, optimizer, _,
        scheduler = deepspeed.initialize(...)` from the framework's factory (trainlint/frameworks/
        *.toml `factory` entries, matched through the resolved import), else what the code returns."""
        qualname = self.index.resolve(call.func, scope)
        role = frameworks.unpacked_role(qualname, position)
        if role is not None:
            return self._settle(role, "framework", call,
                                f"element {position + 1} of what `{qualname}(...)` returns: its {role}")
        return self._from_call_at(call, scope, depth, position)

    def _from_call_at(self, call: cst.Call, scope: Scope, depth: int, position: int) -> str | None:
        """The role of the element at `position` of the tuple `call` returns: read in a function of
        this file, else in the summary of a project function of another file (`data_set, loader =
        data_provider(args, flag)`: the loader its code builds)."""
        if depth > 8:
            return None
        return self._from_returns(call, scope, depth, position=position) or \
            self._from_summary(call, scope, ROLE_WORDS, position)

    def _from_self_attribute(self, attr: str, scope: Scope, depth: int) -> str | None:
        guessed: tuple[str, Source | None] | None = None
        for value in self.index.self_attribute_values(attr, scope):
            method_scope = self.index.scope_at(value)
            role = self._infer(value, method_scope, depth + 1)
            if role and self._last is not None and not self._last.proven and guessed is None:
                guessed = (role, self._last)
                # `self.scheduler = scheduler` from a parameter only its name tells: what the
                # same-file constructions of the class pass for it may prove it
                passed = self._from_constructions(value, method_scope, depth)
                if passed == role:
                    return role
                continue
            if role:
                return role
        if guessed is not None:
            self._last = guessed[1]
            return guessed[0]
        role = self._from_unpacked_attribute(attr, scope, depth)
        if role is not None:
            return role
        # `self.warmup = warmup` in `__init__`: what the callers building the class pass
        class_scope = scope.class_scope()
        if class_scope is not None and self.index.linker is not None:
            return self._settle(self.index.linker.constructor_role(self.index, class_scope.name, attr),
                                "argument", class_scope.node, f"what the callers building `{class_scope.name}` pass")
        return None


    def _from_constructions(self, value: cst.BaseExpression, scope: Scope, depth: int) -> str | None:
        """The role every same-file construction of the class gives the `__init__` parameter that
        `value` names (`OptimizerScheduler(optimizer=opt, scheduler=get_linear_schedule_with_warmup(...))`),
        when they all prove the same one; settled as a caller's argument."""
        if not isinstance(value, cst.Name) or scope.kind != "function" or depth > 6:
            return None
        function = self.index.function_of_node.get(scope.node)
        if function is None or function.name != "__init__" or function.class_name is None:
            return None
        if not any(b.kind == "param" for b in scope.bindings.get(value.value, ())):
            return None
        found: set[str | None] = set()
        proof: Source | None = None
        for site in self.index.class_calls(function.class_name):
            argument = self.index.argument_for(site.node, function, value.value)
            if argument is None:
                return None
            role = self._infer(argument, site.scope, depth + 1)
            if role is None or self._last is None or not self._last.proven:
                return None
            found.add(role)
            proof = proof or self._last
        if len(found) != 1 or proof is None:
            return None
        role = found.pop()
        return self._settle(role, "argument", proof.node,
                            f"what the constructions of `{function.class_name}` pass for `{value.value}`: {proof.how}")

    def optimized_modules(self, expr: cst.BaseExpression, scope: Scope) -> set[str] | None:
        """The modules whose parameters an optimizer was built on (`Adam(netD.parameters())` ->
        {"netD"}), as dotted names; None when it cannot be told."""
        values: list[tuple[cst.BaseExpression, Scope]] = []
        if isinstance(expr, cst.Name):
            values = [(b.value, scope) for b in scope.lookup(expr.value) if b.kind == "assign" and b.value is not None]
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            values = [(v, self.index.scope_at(v)) for v in self.index.self_attribute_values(expr.attr.value, scope)]
        found: set[str] = set()
        for value, _ in values:
            if not isinstance(value, cst.Call) or not value.args:
                return None
            for node in walk(value.args[0].value):
                if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                        node.func.attr.value in ("parameters", "named_parameters"):
                    name = dotted_name(node.func.value)
                    if name is None:
                        return None
                    found.add(name)
        return found or None


def roles(ctx) -> Roles:
    """The file's role model, shared by every rule: `ctx.model(roles).of(expr, scope)`."""
    return Roles(ctx.index)


def dotted_tail(expr: cst.BaseExpression | None) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value.rsplit(".", 1)[-1] if isinstance(expr.evaluated_value, str) else None
    return None


def _unwrap_optional(annotation: cst.BaseExpression) -> cst.BaseExpression:
    """`Optional[X]` / `X | None` -> X."""
    if isinstance(annotation, cst.Subscript) and dotted_tail(annotation.value) == "Optional" and annotation.slice:
        inner = annotation.slice[0].slice
        if isinstance(inner, cst.Index):
            return inner.value
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        return annotation.left if not (isinstance(annotation.left, cst.Name) and annotation.left.value == "None") \
            else annotation.right
    return annotation


def _unpacked_prepare_argument(assign: cst.Assign, name: str) -> cst.BaseExpression | None:
    """For `model, opt = accelerator.prepare(model, opt)`, the argument in `name`'s position."""
    value = assign.value
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("prepare", "setup")):
        return None
    args = positional_args(value)
    unpacked = unpacked_position(assign, name)
    if unpacked is None or unpacked[1] != len(args):
        return None
    return args[unpacked[0]].value
