"""What each function and class of a file does, as plain data that call sites in any file can use.

Computed once per file from its `FileIndex` (and cached by the project per content hash):

- `grad_off`: using the function turns autograd recording off: it returns `torch.no_grad()` /
  `torch.inference_mode()` (or one of them chosen by a flag), it is a `@contextmanager` that yields
  inside one, or it is a decorator (factory) whose wrapper runs under one
  (`@smart_inference_mode()`, `@torch_no_grad_eval`); `body_grad_off`: its own body runs under one;
- `modes`: which parameter or `self.<attr>` it calls `.eval()`/`.train()` on, first and last;
- `grad_off_when`: for a `forward`, the literal arguments that send it down a branch running its
  submodules under a grad-off context (`model(batch, mode="inference")`);
- `detached`: which part of its result is detached (`.detach()`, `.item()`, computed without grad):
  all of it, tuple positions, or dict keys;
- `saves`: which parameter it writes with `torch.save`/`pickle.dump`/`safetensors`, and whether the
  function moves the file into place afterwards (atomic);
- `returns`: the role of what it returns (a factory of a model, optimizer, scheduler, loader);
- for classes, the role their instances play, judged by what `step()` does (a warmup wrapper whose
  `step()` calls an inner optimizer's `step()` is an optimizer; one that only sets learning rates
  is a scheduler), and which `__init__` parameter each `self.<attr>` comes from.

Summaries hold names and flags only (no syntax nodes), so they can be kept and shared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from trainlint.model import frameworks
from trainlint.model.index import (FileIndex, FunctionInfo, Scope, dotted_name, is_property, iter_children, keyword_value,
                                   main_guard, positional_args, unpacked_position, walk)
from trainlint.model.array_kinds import array_kind
from trainlint.model.layers import DEPENDENT, FREE, LIBRARY, class_verdict, detection_targets, verdict
from trainlint.model.loader_use import drawn_once, parameter_only_drawn_from
from trainlint.model.grad_mode import (GRAD_FUNCTIONS, GRAD_OFF_CONTEXTS, GRAD_ON_CONTEXTS, GRAD_SETTERS, GRAD_WORDS,
                                       context_grad,
                                       decorator_grad, flag_value, is_false, is_true, literal_value, switched_grad)
from trainlint.model.mode_names import deep_copied
from trainlint.model.mode_state import OFF, ON, Frame
from trainlint.model.path_literals import load_literals
from trainlint.model.roles import MODEL, OPTIMIZER, OTHER, ROLE_WORDS, SCALER, SCHEDULER, Roles
from trainlint.model.value_kinds import is_number, is_synthetic_tensor

# Words a project file must hold for its summaries to answer a question: one without them is not
# parsed for it (the answer cannot be there), which keeps a whole-library check close to per-file cost
# (GRAD_WORDS and MODE_WORDS live in modes.py, ROLE_WORDS in roles.py).
DETACH_WORDS = ("detach", ".item(", ".tolist(", ".numpy(", "no_grad", "inference_mode", ".eq(", ".argmax(")
SAVE_WORDS = ("save", "dump")
MEAN_WORDS = ("mean", "mse_loss", "l1_loss")
# torch.nn.functional losses whose `reduction` defaults to "mean"
_MEAN_REDUCED_LOSSES = frozenset({
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss", "gaussian_nll_loss", "hinge_embedding_loss",
    "margin_ranking_loss", "soft_margin_loss", "multilabel_soft_margin_loss", "multilabel_margin_loss",
    "multi_margin_loss", "cosine_embedding_loss", "triplet_margin_loss", "ctc_loss"})

GRAD_OFF_NAMES = GRAD_OFF_CONTEXTS  # torch's and the torch-like frameworks' (grad_mode.py)
_CONTEXTMANAGER = frozenset({"contextlib.contextmanager", "contextmanager"})
_SAVERS = frozenset({"torch.save", "torch.serialization.save", "pickle.dump", "joblib.dump",
                     "safetensors.torch.save_file", "safetensors.torch.save_model", "save_file"})
_RENAMES = frozenset({"os.replace", "os.rename", "shutil.move"})
_DETACHING_METHODS = frozenset({"detach", "item", "tolist", "numpy", "detach_"})
_DETACHING_FUNCTIONS = frozenset({"float", "int", "bool", "round", "len", "str", "math.sqrt", "math.exp"})
#: torch calls that copy data into a new tensor (`torch.as_tensor` may hand its argument back: not one)
_DATA_FACTORIES = frozenset({"torch.tensor", "torch.from_numpy", "torch.Tensor", "torch.FloatTensor",
                             "torch.DoubleTensor", "torch.HalfTensor", "torch.LongTensor", "torch.IntTensor",
                             "torch.BoolTensor", "torch.ByteTensor"})
_SAME_GRAPH_METHODS = frozenset({"cpu", "cuda", "to", "float", "double", "half", "clone", "contiguous", "view",
                                 "reshape", "squeeze", "unsqueeze", "mean", "sum", "flatten"})
#: tensor methods whose result never carries a graph (comparisons, indices, integer casts)
_NON_DIFFERENTIABLE_METHODS = frozenset({"argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "long",
                                         "int", "bool", "byte", "nonzero", "isnan", "isinf", "isfinite", "any",
                                         "all", "bincount", "count_nonzero"})
#: tensor arithmetic methods: their result carries the graph of the receiver and of the operands
_ARITHMETIC_METHODS = frozenset({"add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "true_divide"})
#: `nn.Module` methods that return the module itself
_MODULE_RETURNING_METHODS = frozenset({"cuda", "cpu", "to", "float", "double", "half", "bfloat16", "train", "eval",
                                       "requires_grad_", "type"})
# `ClassSummary.rate_clock` values
COUNTER, POSITION = "counter", "position"
_SCHEDULER_BASES = ("LRScheduler", "_LRScheduler", "LambdaLR", "ReduceLROnPlateau", "Scheduler")
_OPTIMIZER_BASES = ("Optimizer",)
_MODEL_BASES = ("Module", *sorted(frameworks.model_bases()), "Sequential", "ModuleDict", "ModuleList")


@dataclass(frozen=True)
class Detached:
    """Which part of a function's result carries no graph."""

    whole: bool = False
    positions: frozenset[int] = frozenset()
    keys: frozenset[str] = frozenset()
    #: (position, parameter): every return gives at that position the parameter's value as the
    #: caller passed it (never rebound but to a value without graph, never changed in place) or a
    #: value without graph: the element has a graph only when the caller's argument has one
    through: frozenset[tuple[int, str]] = frozenset()
    #: (position, field): every return gives at that position (-1: the returned value itself) an
    #: object of a project class built with a value without graph for that field, which the class
    #: keeps as given (`return loss, Parts(total=float(loss.item()))`): reading the field of the
    #: result (`parts.total`) reads no graph
    fields: frozenset[tuple[int, str]] = frozenset()


_PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


@dataclass(frozen=True)
class FunctionSummary:
    name: str
    params: tuple[str, ...] = ()  # positional parameters, without self/cls
    # the parameters a call may name by keyword (positional-or-keyword and keyword-only); None when
    # it takes `**kwargs` (any keyword); whether it takes `*args`
    keywords: tuple[str, ...] | None = ()
    star_args: bool = False
    grad_off: bool = False
    body_grad_off: bool = False
    modes: tuple[tuple[str, str, str], ...] = ()  # (param or self.attr, first mode, last mode)
    # each `.eval()`/`.train()` in order: (param or self.attr, mode, guards), the guards being the
    # (flag parameter, value) pairs under which its `if`s run it (`if not is_training: model.eval()`
    # -> (("is_training", False),)); a caller passing the other value skips it
    mode_calls: tuple[tuple[str, str, tuple[tuple[str, bool], ...]], ...] = ()
    # parameters with a literal True/False default that the body never rebinds
    flag_defaults: tuple[tuple[str, bool], ...] = ()
    # its `set_grad_enabled(...)` statements, when each runs on every call whose flag parameters
    # take the values its guards name (no `if` around it but tests of such a flag, no loop, `with`,
    # `try`, no `return`/`raise` in the body, no grad decorator): (what it sets: "on", "off", a
    # flag parameter's name or "not <name>", and its guards), in source order; None otherwise
    grad_switches: tuple[tuple[str, tuple[tuple[str, bool], ...]], ...] | None = None
    detached: Detached = Detached()
    saves: tuple[tuple[str, bool], ...] = ()  # (parameter written, atomic)
    save_path: str | None = None  # the parameter naming the file it writes
    returns: str | None = None
    returns_mean: bool = False  # a mean over its inputs (a Dice/IoU/RMSE helper: `.mean()`, `sqrt(mse)`)
    # how every value it returns is reduced over the batch: "mean" (`.mean()`, `F.cross_entropy(a, b)`
    # with the default reduction), "sum" (`.sum()`, `reduction="sum"`), None when its returns differ
    # or one is reduced by what a caller passes (`reduction=reduction`) or cannot be told
    returns_reduction: str | None = None
    # the keys of the one dict literal it returns (a `state_dict()` override: `{"model": ...,
    # "optimizer": ..., "step": ...}`), None when it returns anything else
    returned_keys: tuple[str, ...] | None = None
    # what it returns makes batches of one size: a `DataLoader(..., drop_last=True)` (or
    # `batch_size=1`), or the keyword arguments for one (`{"batch_size": b, "drop_last": True}`)
    equal_batches: bool = False
    sets_epoch: bool = False  # it calls `.set_epoch(...)` (on a sampler or loader it is handed)
    # parameters it only draws batches from (`next(iter(p))`, a loop that breaks after a few
    # batches, `cycle(p)`): a loader handed to it is not gone through (`loader_use`)
    drawn_params: tuple[str, ...] = ()
    # parameters a training loop of its own iterates (`for x, y in loader:` whose body runs a
    # backward and an optimizer step): a loader handed there feeds the training, one handed to
    # another parameter (the validation loader beside it) does not
    trains_over: tuple[str, ...] = ()
    # what it returns makes batches of one size depending on an argument: (parameter, ((constant,
    # equal), ...), equal otherwise or None, the parameter's default as a constant or None). From
    # `if flag == "test": drop_last = False ... else: drop_last = True` before `DataLoader(...,
    # drop_last=drop_last)`, or `DataLoader(..., drop_last=drop_last)` with `drop_last=True` a
    # parameter; or a helper that passes its parameter on to one (`equal_batches_for` reads it)
    equal_batches_by: tuple | None = None
    # the condition (as text) that chooses between `drop_last = True` and `drop_last = False` before
    # the returned loader is built, when it is none of its parameters (`if args.data == "m4":`): a
    # configuration the caller's code does not show, so whether its last batch is short is unknown
    drop_last_chosen_by: str | None = None
    # the role of each element of the tuple it returns (`return data_set, data_loader`), when every
    # return is a tuple of that length: what `_, loader = make(...)` in another file is
    returns_at: tuple[str | None, ...] = ()
    # the array library of what it returns (`array_kinds.TORCH`, `NUMPY`, `SEQUENCE`), when every
    # return shows the same one; and of each element of the tuple every return gives (same length)
    array_kind: str | None = None
    array_kinds_at: tuple[str | None, ...] = ()
    # a `@property` (or `cached_property`, `.getter`): reading the attribute gives what it returns
    is_property: bool = False
    # parameters it only runs or looks at (`p(x)`, `p.eval()`, `isinstance(p, ...)`, handed on to
    # functions of its file that do the same): it adds no parameter to a model handed to it and
    # turns none of its parameters' `requires_grad` back on
    run_only: tuple[str, ...] = ()
    # it runs a backward (`loss.backward()`, `engine.backward(loss)`) and steps nothing: one
    # micro-batch's half of an update whose step its caller runs (`backward_step(model, batch, k)`)
    backward_only: bool = False
    #: positional parameters whose value reaches nothing: never named, or read only to rebind the
    #: same name (`idx = idx.tolist()`, under `if torch.is_tensor(idx):`) that nothing reads after
    #: (`__getitem__(self, index)` that draws a fresh random sample whatever the index: an order of
    #: indices changes nothing it returns)
    ignored_params: tuple[str, ...] = ()
    # a `forward` whose parameter, bound to one of these literals, sends it down a branch that runs
    # every call that could reach a submodule under a grad-off context (`forward(data, mode)` with
    # `elif mode == "inference": with torch.no_grad(): ...`): (parameter, literal True/False/string)
    grad_off_when: tuple[tuple[str, object], ...] = ()
    # a `forward` that, whatever it is passed, runs every call that could reach a submodule under a
    # grad-off context it enters itself or in a method of its class it dispatches to
    # (`def embed(self, x): with torch.no_grad(): return self.encoder(x)`), reading no parameter of
    # its own (`nn.Parameter`) outside it
    grad_off_always: bool = False
    # () -> the parameters whose value it writes to a file (`json.dump(p, f)`, `f.write(json.dumps(p))`
    # on a file it opened, `torch.save(p, ...)`, `np.save(path, p)`, or handing it to a function that
    # does): `write_json({"step": step}, path)` keeps the step beside a checkpoint. Worked out when
    # first asked (`persists`): it reads the functions it calls
    persists_of: object = field(default=None, compare=False, repr=False)

    @property
    def persists(self) -> tuple[str, ...]:
        found = self.__dict__.get("_persists")
        if found is None:
            object.__setattr__(self, "_persists", ())  # a function reaching itself: nothing more
            found = self.persists_of() if self.persists_of is not None else ()
            object.__setattr__(self, "_persists", found)
        return found
    # () -> the parameters whose graph is the only one what it returns can carry: every return is a
    # call of a submodule of its class whose parameters the class freezes and never turns back on
    # (`return self.key_encoder(x)`, `p.requires_grad = False` over `self.key_encoder.parameters()`),
    # handed only parameters of the method; None when a return is anything else. Worked out when
    # first asked (`graph_through`)
    graph_through_of: object = field(default=None, compare=False, repr=False)

    @property
    def graph_through(self) -> tuple[str, ...] | None:
        found = self.__dict__.get("_graph_through", False)
        if found is False:
            object.__setattr__(self, "_graph_through", None)
            found = self.graph_through_of() if self.graph_through_of is not None else None
            object.__setattr__(self, "_graph_through", found)
        return found

    # (position) -> the parameters whose graph is the only one the returned value (-1) or the
    # element at `position` of the tuple every return gives can carry: computed from them by
    # differentiable operations (arithmetic, torch functions, tensor methods, a dict's values, a
    # submodule its class freezes), nothing else that could hold a graph; frozenset() when it
    # carries none (`.item()`), None when not known. Worked out when first asked (`graph_sources`)
    graph_sources_of: object = field(default=None, compare=False, repr=False)

    def graph_sources(self, position: int = -1) -> frozenset[str] | None:
        memo = self.__dict__.get("_graph_sources")
        if memo is None:
            memo = {}
            object.__setattr__(self, "_graph_sources", memo)
        if position not in memo:
            memo[position] = None  # a function reaching itself: not known
            memo[position] = self.graph_sources_of(position) if self.graph_sources_of is not None else None
        return memo[position]

    # (words) -> {position: ClassSummary}: the project class whose construction every return gives
    # at that position of its tuple (-1: the returned value itself), built directly or bound once in
    # the function (`scheduler = WarmupCosine(opt, ...)` ... `return opt, scheduler`). Worked out
    # when first asked (`returned_class`)
    classes_of: object = field(default=None, compare=False, repr=False)

    def returned_class(self, position: int, words: tuple[str, ...] = ()) -> "ClassSummary | None":
        """The project class of what a call gives at `position` of its tuple (-1: the whole result)."""
        memo = self.__dict__.get("_classes")
        if memo is None:
            memo = {}
            object.__setattr__(self, "_classes", memo)
        if words not in memo:
            memo[words] = {}  # a function reaching itself: nothing
            memo[words] = self.classes_of(words) if self.classes_of is not None else {}
        return memo[words].get(position)
    #: it keeps a copy of parameters' gradients (`backup[name] = p.grad.clone()`)
    copies_grads: bool = False
    #: it writes parameters' gradients with values (`p.grad = backup[name]`, `p.grad.copy_(g)`)
    writes_grads: bool = False
    # () -> whether, run in eval mode, it needs grad recording on: it (or what it calls that the
    # project defines: its file's functions, its class's methods, the methods and forwards of the
    # classes its `self.<attr>` are built from, another file's functions and classes) calls
    # `torch.autograd.grad` (normals of a signed distance field, a physics residual), runs a
    # backward, enters `enable_grad` or turns `requires_grad` on; a branch under `if self.training:`
    # does not run in eval mode. Worked out when first asked (`differentiates`)
    differentiates_of: object = field(default=None, compare=False, repr=False)

    @property
    def differentiates(self) -> bool:
        found = self.__dict__.get("_differentiates")
        if found is None:
            object.__setattr__(self, "_differentiates", False)  # a function reaching itself: nothing more
            found = bool(self.differentiates_of()) if self.differentiates_of is not None else False
            object.__setattr__(self, "_differentiates", found)
        return found

    def grad_off_for(self, positional: tuple[object, ...], keywords: dict[str, object]) -> bool:
        """A call binding these literals (None: not a literal) runs this function without grad."""
        if self.grad_off_always:
            return True
        bound = dict(zip(self.params, positional))
        bound.update(keywords)
        return any(param in bound and type(bound[param]) is type(value) and bound[param] == value
                   for param, value in self.grad_off_when)

    @property
    def produces(self) -> str | None:
        """The role of what a call of it gives (a factory's product)."""
        return self.returns

    def produces_at(self, position: int) -> str | None:
        """The role of the element at `position` of the tuple a call of it gives."""
        return self.returns_at[position] if position < len(self.returns_at) else None

    def grad_exit(self, flags: dict[str, bool]) -> str | None:
        """The grad state a call binding these flags leaves for the rest of the thread's run
        (`torch.set_grad_enabled(enable)` as a statement, `enable` bound to False: OFF); None when
        it switches nothing, or what it leaves cannot be told."""
        if not self.grad_switches:
            return None
        state = None
        for value, guards in self.grad_switches:
            taken = [flags.get(param) == wanted if param in flags else None for param, wanted in guards]
            if None in taken:
                return None  # a guard on a value not known here
            if not all(taken):
                continue
            if value in ("on", "off"):
                state = ON if value == "on" else OFF
                continue
            negated = value.startswith("not ")
            name = value[4:] if negated else value
            if name not in flags:
                return None
            state = ON if flags[name] != negated else OFF
        return state

    def mode_effect(self, target: str, flags: dict[str, bool] | None = None) -> tuple[str, str] | None:
        """(first, last) mode the function sets on `target`; with `flags` (the flag parameters a
        call binds to literals, defaults included), only the switches those values run."""
        if flags:
            kinds = [mode for name, mode, guards in self.mode_calls if name == target
                     and all(flags.get(param, value) == value for param, value in guards)]
            return (kinds[0], kinds[-1]) if kinds else None
        for name, first, last in self.modes:
            if name == target:
                return first, last
        return None


class ClassSummary:
    """A class of the project: the role its instances play, whether it is a no-grad context
    manager, which `__init__` parameter each `self.<attr>` comes from; its methods' summaries are
    computed when asked for."""

    def __init__(self, name: str, bases: tuple[str, ...] = (), role: str | None = None, grad_off: bool = False,
                 init_attrs: dict[str, str] | None = None, methods=None, trains: bool = False, mode=None,
                 sets_next_rate: bool = False, rate_clock: str | None = None, plain=None,
                 record_fields: tuple[str, ...] | None = None, positional_fields: bool = False,
                 stored_params: dict[str, str] | None = None, frozen_init=None, targets=None,
                 frozen_parts=None) -> None:
        self.name = name
        # () -> (position, name) of the argument its forward hands a torchvision detection model
        # as targets, returning what that model returns (`layers.detection_targets`), or None
        self._targets = targets or (lambda: None)
        self._targets_value: tuple | None = None
        # (call) -> the statement of `__init__` that adds the part whose parameters the
        # construction `call` leaves frozen, when every part it adds is frozen (a wrapper of a
        # frozen backbone: `self.net = Backbone(requires_grad=False)`), else None
        self._frozen_parts = frozen_parts or (lambda call: None)
        # () -> how its `__init__` leaves its parameters (computed when first asked): None, or
        # (param, position, node): every parameter frozen at the end of `__init__` by `node`
        # (`for p in self.parameters(): p.requires_grad = False`, `self.requires_grad_(False)`),
        # unless `param` (an `__init__` parameter whose default is False, at `position` among the
        # arguments) is passed a value other than False; param None: always
        self._frozen_init = frozen_init or (lambda: None)
        self._frozen_init_value: tuple | None = None
        self._plain = plain or (lambda: False)  # () -> `plain` (computed when first asked)
        self._plain_value: tuple[bool] | None = None
        # the fields a construction sets as given, never reassigned by the class: a dataclass's or
        # NamedTuple's declared fields (in order; `positional_fields` when a positional argument
        # is the field of its position: no base class declares fields before them), else None
        self.record_fields = record_fields
        self.positional_fields = positional_fields
        # `self.<attr> = <param>` in `__init__`, the attribute assigned nowhere else: attr -> param
        self.stored_params = stored_params or {}
        # the clock a schedule of the project's own keeps (its `step()` writes the rate itself):
        # COUNTER (a `self.<n> += 1` each call advances, like torch's `last_epoch`) or POSITION
        # (`step(epoch, it)` is told where it is: calling it again for the same position sets the
        # same rate, so calling it every micro-batch does not run the schedule ahead); None for
        # torch's schedulers and anything else.
        self.rate_clock = rate_clock
        # a schedule of its own (no base class): `step()` writes the learning rate of the coming
        # update into the optimizer's param groups, and building it writes none, so its `step()`
        # is meant to run before that update's `optimizer.step()` (torch's schedulers: after)
        self.sets_next_rate = sets_next_rate
        self.trains = trains  # its methods run `.backward()`/`.step()`/`.zero_grad()` (a Trainer, a Runner)
        self.bases = bases
        self.role = role
        self.grad_off = grad_off  # a context manager class whose `__enter__` turns recording off
        self.init_attrs = init_attrs or {}  # self.<attr> -> __init__ parameter
        self._methods = methods or (lambda name: None)  # name -> FunctionSummary | None
        self._mode = mode or (lambda: None)  # () -> how its instances depend on their mode (layers.py)
        self._mode_dependence: tuple[str | None] | None = None

    def method(self, name: str) -> FunctionSummary | None:
        return self._methods(name)

    @property
    def plain(self) -> bool:
        """Every class it derives from is `object` or a class of the project that is plain too (read
        through the project's files): no torch `nn.Module`, no library class at all is among its
        ancestors, so its `eval()`/`train()`/`__call__` are the project's own methods, whatever they
        are called. False when a base cannot be read (a library class, a base built at run time)."""
        if self._plain_value is None:
            self._plain_value = (False,)  # a class derived from itself, through other files
            self._plain_value = (bool(self._plain()),)
        return self._plain_value[0]

    def frozen_by_construction(self, call: cst.Call) -> cst.CSTNode | None:
        """The statement of `__init__` that leaves every parameter of the instance `call` builds
        frozen (`requires_grad=False`), or None when some parameter may record."""
        if self._frozen_init_value is None:
            self._frozen_init_value = (None,)  # a class built from itself, through other files
            self._frozen_init_value = (self._frozen_init(),)
        found = self._frozen_init_value[0]
        if found is None:
            if self.name in _PARTS_IN_PROGRESS:
                return None  # a class built from itself
            _PARTS_IN_PROGRESS.add(self.name)
            try:
                return self._frozen_parts(call)
            finally:
                _PARTS_IN_PROGRESS.discard(self.name)
        param, position, node = found
        if param is None:
            return node
        if any(a.star for a in call.args):
            return None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == param:
                return node if is_false(arg.value) else None
        positional = positional_args(call)
        if position < len(positional):
            return node if is_false(positional[position].value) else None
        return node  # the default, False

    @property
    def mode_dependence(self) -> str | None:
        """`layers.FREE` / `layers.DEPENDENT` / None: whether `train()`/`eval()` changes what an
        instance computes, judged from the class's own source (computed when first asked)."""
        if self._mode_dependence is None:
            self._mode_dependence = (None,)  # a class built from itself, through other files
            self._mode_dependence = (self._mode(),)
        return self._mode_dependence[0]

    @property
    def detection_targets(self) -> tuple[int, str] | None:
        """Where a call of an instance passes the targets its forward hands a torchvision detection
        model (whose losses it returns, in train mode only): (position, name), or None."""
        if self._targets_value is None:
            self._targets_value = (None,)
            self._targets_value = (self._targets(),)
        return self._targets_value[0]

    @property
    def produces(self) -> str | None:
        """The role of what a call of it gives: an instance."""
        return self.role

    def produces_at(self, position: int) -> str | None:
        """An instance is no tuple to unpack."""
        return None

    @property
    def params(self) -> tuple[str, ...]:
        init = self.method("__init__")
        return init.params if init is not None else ()

    def __repr__(self) -> str:
        return f"ClassSummary({self.name!r}, role={self.role!r}, grad_off={self.grad_off})"


def construction_fields(summary: ClassSummary, call: cst.Call) -> dict[str, cst.BaseExpression]:
    """For `call`, a construction of the project class `summary` describes: the argument each
    field of the new object holds as given (`Parts(total=t, n=k)` -> {"total": t, "n": k}); a
    field not known to be kept as given is left out."""
    if any(a.star for a in call.args):
        return {}
    found: dict[str, cst.BaseExpression] = {}
    positional = positional_args(call)
    if summary.record_fields is not None:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value in summary.record_fields:
                found[arg.keyword.value] = arg.value
        if summary.positional_fields:
            for name, arg in zip(summary.record_fields, positional):
                found[name] = arg.value
        return found
    params = summary.params
    by_param = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
    by_param.update({name: arg.value for name, arg in zip(params, positional)})
    for attr, param in summary.stored_params.items():
        if param in by_param:
            found[attr] = by_param[param]
    return found


@dataclass(frozen=True)
class Construction:
    """`Trainer(model, opt, sched=...)`: a class built with arguments whose roles are known."""

    callee: str  # the dotted name as resolved in the file (`lmtrain.trainer.Trainer`, `Trainer`)
    positional: tuple[str | None, ...]
    keywords: tuple[tuple[str, str], ...]

    def role_for(self, params: tuple[str, ...], param: str) -> str | None:
        for keyword, role in self.keywords:
            if keyword == param:
                return role
        position = params.index(param) if param in params else len(self.positional)
        return self.positional[position] if position < len(self.positional) else None


@dataclass(frozen=True)
class CallArguments:
    """`save_on_master(checkpoint, os.path.join(out, "checkpoint.pth"))` in some file: the callee as
    resolved there, and the source text of each argument (what a helper is handed)."""

    callee: str
    positional: tuple[str, ...]
    keywords: tuple[tuple[str, str], ...]
    #: (name, role) of the optimizers, schedulers and scalers the calling function holds: state a
    #: checkpoint helper was not handed is still state the caller's run has
    state: tuple[tuple[str, str], ...] = ()
    #: the call runs with autograd recording off: inside `with torch.no_grad():` (or another
    #: grad-off context) in its function, or in a function decorated to run without grad
    grad_off: bool = False
    #: the function holding the call (None: the module's own code)
    caller: str | None = None
    #: for a method call, the classes its receiver is built from when every binding of it is a
    #: construction (`evaluator = CrowdHumanEvaluator(...)`), each with whether that class defines
    #: the called method itself; empty when not known
    receiver_classes: tuple[tuple[str, bool], ...] = ()
    #: per positional argument, and per keyword, how the module it is depends on its mode
    #: (`layers.verdict` of its construction: "free", "dependent", "library"; None when not known)
    positional_modes: tuple[str | None, ...] = ()
    keyword_modes: tuple[tuple[str, str | None], ...] = ()
    #: what the caller does with a method call's result: "drawn" (single batches only, as from a
    #: loader: `next(iter(x.test_dataloader()))`), "dropped" (a statement of its own), None otherwise
    result: str | None = None

    def mode_of(self, params: tuple[str, ...], param: str) -> str | None:
        """How the module passed for `param` depends on its mode (None: not known, or not passed)."""
        for keyword, mode in self.keyword_modes:
            if keyword == param:
                return mode
        position = params.index(param) if param in params else -1
        return self.positional_modes[position] if 0 <= position < len(self.positional_modes) else None

    def argument(self, params: tuple[str, ...], param: str | None, keyword: str) -> str | None:
        """The text passed for `param` (a name of `params`, or `*N` for the N-th positional argument
        forwarded through `*args`); `keyword` is the name the forwarded argument may go by."""
        if param is None:
            return None
        name = keyword if param.startswith("*") else param
        for passed, text in self.keywords:
            if passed == name:
                return text
        position = int(param[1:]) if param.startswith("*") else params.index(param) if param in params else -1
        return self.positional[position] if 0 <= position < len(self.positional) else None


@dataclass(frozen=True)
class InstanceBuild:
    """`Tester(model, test_loader=loader)` in some file: a class built, which of its arguments are
    loaders of equal batches (`DataLoader(..., drop_last=True)` or `batch_size=1`, or a project
    factory's that are, through the names they are bound to), and what the built instance is used
    for."""

    callee: str  # the dotted name as resolved in the file
    starred: bool  # `*args`/`**kwargs`: the arguments cannot be matched to parameters
    positional_equal: tuple[bool, ...]
    keyword_equal: tuple[tuple[str, bool], ...]
    #: the attributes read off the built instance (`tester.test_rnn()`: "test_rnn") when it is bound
    #: to a local name (or one of a script's `__main__` block) that nothing else reads; None when it
    #: may go anywhere else (passed, returned, stored, rebound)
    used_attrs: tuple[str, ...] | None

    def equal_for(self, params: tuple[str, ...], param: str) -> bool:
        """The argument given for `param` (of `__init__`'s `params`) is a loader of equal batches."""
        if self.starred:
            return False
        for keyword, equal in self.keyword_equal:
            if keyword == param:
                return equal
        position = params.index(param) if param in params else -1
        return 0 <= position < len(self.positional_equal) and self.positional_equal[position]


@dataclass(frozen=True)
class Subclass:
    """A class of a file deriving from a class named `base` (as resolved there)."""

    name: str
    base: str
    defines_init: bool
    writes: tuple[str, ...]  # the `self.<attr>` its methods assign
    module_level: bool


class FileSummary:
    """The summary of one file. Its module-level functions and classes are summarised when first
    asked for (a file is imported for one or two names, rarely for all), then kept."""

    def __init__(self, index: FileIndex | None = None) -> None:
        self.imports: dict[str, str] = {}  # module-level name -> what it was imported as
        self._summariser = _Summariser(index) if index is not None else None
        self._functions: dict[str, FunctionInfo] = {}
        self._classes: dict[str, cst.ClassDef] = {}
        self._constructions: dict[str, list[Construction]] = {}
        self._calls: dict[tuple[str, bool], list[CallArguments]] = {}
        self._method_calls: dict[str, list[CallArguments]] = {}
        self._instance_builds: dict[str, list[InstanceBuild]] = {}
        self._loaded: frozenset[str] | None = None
        if index is None:
            return
        for name, bindings in index.module_scope.bindings.items():
            if bindings and bindings[-1].kind == "import" and bindings[-1].qualname:
                self.imports[name] = bindings[-1].qualname
        for function in index.functions:
            if function.scope.parent is index.module_scope:
                self._functions[function.name] = function
        for name, node in index.classes.items():
            if index.scope_of_node[node].parent is index.module_scope:
                self._classes[name] = node

    @property
    def index(self) -> FileIndex | None:
        return self._summariser.index if self._summariser is not None else None

    @property
    def loaded_files(self) -> frozenset[str]:
        """The file names the file's `torch.load` calls spell out (`path_literals`)."""
        if self._loaded is None:
            self._loaded = load_literals(self.index) if self.index is not None else frozenset()
        return self._loaded

    def function(self, name: str) -> FunctionSummary | None:
        found = self._functions.get(name)
        return self._summariser.function(found) if found is not None else None

    def klass(self, name: str) -> ClassSummary | None:
        found = self._classes.get(name)
        return self._summariser.klass(found) if found is not None else None

    def member(self, path: list[str]) -> FunctionSummary | ClassSummary | None:
        if len(path) == 1:
            return self.function(path[0]) or self.klass(path[0])
        if len(path) == 2:
            found = self.klass(path[0])
            return found.method(path[1]) if found is not None else None
        return None

    @property
    def functions(self) -> dict[str, FunctionSummary]:
        return {name: self.function(name) for name in self._functions}

    @property
    def classes(self) -> dict[str, ClassSummary]:
        return {name: self.klass(name) for name in self._classes}

    def calls_of(self, function_name: str, starred: bool = False) -> list[CallArguments]:
        """Where this file calls a function named `function_name`, with the arguments' text. A
        call spreading `*args`/`**kwargs` cannot be matched to parameters and is left out, unless
        `starred`: then it is kept with no arguments, for what a call tells without them (whether
        it runs with grad recording off, and in which function)."""
        key = (function_name, starred)
        if key not in self._calls:
            self._calls[key] = self._summariser.calls(function_name, starred) \
                if self._summariser is not None else []
        return self._calls[key]

    def method_calls_of(self, name: str) -> list[CallArguments]:
        """Every call of a method named `name` in this file (`x.name(...)`, whatever `x` is)."""
        if name not in self._method_calls:
            self._method_calls[name] = self._summariser.method_calls(name) if self._summariser is not None else []
        return self._method_calls[name]

    def instance_builds_of(self, class_name: str) -> list[InstanceBuild]:
        """Every call in this file of a callee named `class_name` (or ending in `.class_name`),
        with the arguments that are loaders of equal batches and the uses of what it builds."""
        if class_name not in self._instance_builds:
            self._instance_builds[class_name] = self._summariser.instance_builds(class_name) \
                if self._summariser is not None else []
        return self._instance_builds[class_name]

    def class_handed_around(self, class_name: str) -> bool:
        """This file reads the name `class_name` otherwise than to call it, import it, derive from
        it, annotate with it or test an instance against it (`registry = {"a": Cls}`,
        `Cls.from_config(...)`): its instances may be built where no call of it shows."""
        return self._summariser.class_handed_around(class_name) if self._summariser is not None else True

    def subclasses_of(self, class_name: str) -> list[Subclass]:
        """The classes of this file (nested ones too) with a base named `class_name`."""
        return self._summariser.subclasses(class_name) if self._summariser is not None else []

    def constructions_of(self, class_name: str) -> list[Construction]:
        """Where this file builds a class called `class_name` with arguments of a known role."""
        if class_name not in self._constructions:
            self._constructions[class_name] = self._summariser.constructions(class_name) \
                if self._summariser is not None else []
        return self._constructions[class_name]


_NAMES: dict[str, cst.Name] = {}


def _name_node(name: str) -> cst.Name:
    """One `Name` node per name, so the roles model's memo recognises a repeated question."""
    node = _NAMES.get(name)
    if node is None:
        node = _NAMES[name] = cst.Name(name)
    return node


def summarise(index: FileIndex) -> FileSummary:
    return FileSummary(index)


class _Summariser:
    def __init__(self, index: FileIndex) -> None:
        self.index = index
        self.roles = Roles(index)
        self._memo: dict[cst.CSTNode, FunctionSummary | None] = {}
        self._classes: dict[cst.CSTNode, ClassSummary | None] = {}
        self._own: dict[cst.CSTNode, list[cst.CSTNode]] = {}

    def summary_of(self, expr: cst.BaseExpression, scope: Scope,
                   words: tuple[str, ...] = ()) -> FunctionSummary | ClassSummary | None:
        """Like `FileIndex.summary_of`, but this file's own module-level defs are summarised here."""
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            if bindings and all(b.kind in ("def", "class") for b in bindings):
                node = bindings[-1].node
                if self.index.scope_of_node[node].parent is not self.index.module_scope:
                    return None
                if isinstance(node, cst.ClassDef):
                    return self.klass(node)
                return self.function(self.index.function_of_node[node])
        return self.index.summary_of(expr, scope, words)

    def _calls_named(self, name: str):
        """(call site, callee as resolved here) of the calls in this file whose callee is `name`
        or ends in `.name`."""
        for site in self.index.calls:
            func = site.node.func
            last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if last != name:
                continue
            callee = self.index.resolve(func, site.scope) or (func.value if isinstance(func, cst.Name) else None)
            if callee is not None:
                yield site, callee

    def calls(self, function_name: str, starred: bool = False) -> list[CallArguments]:
        text = self.index.module.code_for_node
        found = [CallArguments(callee, tuple(text(a.value) for a in positional_args(site.node)),
                               tuple((a.keyword.value, text(a.value)) for a in site.node.args if a.keyword is not None),
                               self._state_in(site.scope), self._grad_off_at(site.node, site.function),
                               site.function.name if site.function is not None else None, (),
                               tuple(self._argument_mode(a.value, site.scope) for a in positional_args(site.node)),
                               tuple((a.keyword.value, self._argument_mode(a.value, site.scope))
                                     for a in site.node.args if a.keyword is not None))
                 for site, callee in self._calls_named(function_name) if not any(a.star for a in site.node.args)]
        if starred:
            found += [CallArguments(callee, (), (), (), self._grad_off_at(site.node, site.function),
                                    site.function.name if site.function is not None else None)
                      for site, callee in self._calls_named(function_name) if any(a.star for a in site.node.args)]
        return found

    def method_calls(self, name: str) -> list[CallArguments]:
        found = []
        for site in self.index.calls:
            func = site.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == name:
                starred = any(a.star for a in site.node.args)
                found.append(CallArguments(dotted_name(func) or "", (), (), (),
                                           self._grad_off_at(site.node, site.function),
                                           site.function.name if site.function is not None else None,
                                           self._receiver_classes(func.value, site.scope, name),
                                           () if starred else tuple(self._argument_mode(a.value, site.scope)
                                                                    for a in positional_args(site.node)),
                                           () if starred else tuple((a.keyword.value,
                                                                     self._argument_mode(a.value, site.scope))
                                                                    for a in site.node.args if a.keyword is not None),
                                           self._result_use(site.node)))
        return found

    def _result_use(self, call: cst.Call) -> str | None:
        """What the caller does with `call`'s result (`CallArguments.result`)."""
        if isinstance(self.index.parent(call), cst.Expr):
            return "dropped"
        if drawn_once(self.index, call):
            return "drawn"
        return None

    def _argument_mode(self, value: cst.BaseExpression, scope: Scope) -> str | None:
        """How the module an argument is depends on its mode: a construction, or a local name every
        binding of which builds one (`model = Net(...)`; `model = model.to(device)` keeps it);
        None when not known."""
        if isinstance(value, cst.Call):
            calls = [value]
        elif isinstance(value, cst.Name):
            bindings = scope.lookup(value.value)
            calls = []
            for binding in bindings:
                bound = _unmoved(binding.value) if binding.kind == "assign" else None
                if isinstance(bound, cst.Name) and bound.value == value.value:
                    continue  # `model = model.to(device)`: the same module
                if not isinstance(bound, cst.Call):
                    return None
                calls.append(bound)
        else:
            return None
        verdicts = set()
        for call in calls:
            call = _unmoved(call)
            if not isinstance(call, cst.Call):
                return None
            verdicts.add(verdict(self.index, call, scope))
        if not verdicts or None in verdicts:
            return None
        return DEPENDENT if DEPENDENT in verdicts else LIBRARY if LIBRARY in verdicts else FREE

    def _receiver_classes(self, receiver: cst.BaseExpression, scope: Scope, method: str) -> tuple[tuple[str, bool], ...]:
        """`CallArguments.receiver_classes` of a local name every binding of which builds a class."""
        if not isinstance(receiver, cst.Name):
            return ()
        bindings = scope.lookup(receiver.value)
        found = []
        for binding in bindings:
            value = binding.value
            if binding.kind != "assign" or not isinstance(value, cst.Call):
                return ()
            name = self.index.resolve(value.func, scope) or dotted_name(value.func)
            summary = self.index.summary_of(value.func, scope)
            if name is None or not isinstance(summary, ClassSummary):
                return ()
            found.append((name, summary.method(method) is not None))
        return tuple(found)

    def _grad_off_at(self, node: cst.CSTNode, function: FunctionInfo | None, depth: int = 0) -> bool:
        """`node` runs under a grad-off `with` of its function, after a `torch.set_grad_enabled(False)`
        statement that dominates it (`switched_grad`: process-wide until another switch), or in a
        function decorated so."""
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            if isinstance(ancestor, cst.With):
                scope = self.index.scope_at(ancestor)
                grads = [context_grad(self.index, item.item, scope) for item in ancestor.items]
                if any(g is not None for g in grads):
                    switched = switched_grad(self.index, node, ancestor)
                    if switched is not None:
                        return switched == OFF
                    # an inner `enable_grad()`/`set_grad_enabled(flag)` decides
                    return OFF in grads
        region = function.node if function is not None else self.index.module
        switched = switched_grad(self.index, node, region)
        if switched is not None:
            return switched == OFF
        if function is None:
            return False
        if decorator_grad(self.index, function) == OFF:
            return True
        # a helper of this file whose every call here runs with grad off (`voc_test(...)` called
        # only inside `with torch.no_grad():` in `main`)
        sites = self.index.callers(function) if depth < 2 else []
        return bool(sites) and all(self._grad_off_at(site.node, site.function, depth + 1) for site in sites)

    def _state_in(self, scope: Scope) -> tuple[tuple[str, str], ...]:
        """The names the calling function (or the module's own code) binds to an optimizer, a
        scheduler or a scaler (parameters and assignments, by the roles model)."""
        if scope.kind == "class":
            return ()
        found = []
        for name, bindings in scope.bindings.items():
            if name in ("self", "cls") or not any(b.kind in ("param", "assign", "with") for b in bindings):
                continue
            role = self.roles.of(_name_node(name), scope)
            if role in (OPTIMIZER, SCHEDULER, SCALER):
                found.append((name, role))
        return tuple(sorted(found))

    def instance_builds(self, class_name: str) -> list[InstanceBuild]:
        found = []
        for site, callee in self._calls_named(class_name):
            call = site.node
            found.append(InstanceBuild(
                callee, any(a.star for a in call.args),
                tuple(self._equal_batch_loader(a.value, site.scope, 0) for a in positional_args(call)),
                tuple((a.keyword.value, self._equal_batch_loader(a.value, site.scope, 0))
                      for a in call.args if a.keyword is not None),
                self._instance_uses(call, site.scope)))
        return found

    def _equal_batch_loader(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> bool:
        """`expr` is a loader of equal batches: `DataLoader(...)` with `drop_last=True` or
        `batch_size=1` (`equal_batch_arguments`), a project factory's call that makes one
        (`equal_batches_for`), or a name every binding of which is one of these (an element of the
        tuple a same-file function returns too: `train, val = make_loaders()`)."""
        if depth > 3:
            return False
        if isinstance(expr, cst.Call):
            if (self.index.resolve(expr.func, scope) or "").rsplit(".", 1)[-1] == "DataLoader":
                return equal_batch_arguments(expr)
            summary = self.summary_of(expr.func, scope, ("drop_last", "batch_size"))
            return isinstance(summary, FunctionSummary) and equal_batches_for(summary, expr)
        if not isinstance(expr, cst.Name):
            return False
        bindings = scope.lookup(expr.value)
        if not bindings:
            return False
        for binding in bindings:
            if binding.kind != "assign":
                return False
            where = self.index.scope_at(binding.node)
            if binding.value is not None:
                if not self._equal_batch_loader(binding.value, where, depth + 1):
                    return False
                continue
            if not self._equal_tuple_element(binding, expr.value, where, depth):
                return False
        return True

    def _equal_tuple_element(self, binding, name: str, scope: Scope, depth: int) -> bool:
        """`a, b = make()` with `make` a function of this file every return of which is a tuple
        whose element at `b`'s position is a loader of equal batches."""
        statement = binding.node
        if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0].target, (cst.Tuple, cst.List))
                and isinstance(statement.value, cst.Call)):
            return False
        elements = statement.targets[0].target.elements
        if any(isinstance(e, cst.StarredElement) for e in elements):
            return False
        positions = [i for i, e in enumerate(elements) if isinstance(e.value, cst.Name) and e.value.value == name]
        function = self.index.callee(statement.value, scope)
        if len(positions) != 1 or function is None or function.class_name is not None:
            return False
        returns = [n.value for n in self._own_nodes(function) if isinstance(n, cst.Return)]
        return bool(returns) and all(
            isinstance(value, cst.Tuple) and len(value.elements) == len(elements)
            and not isinstance(value.elements[positions[0]], cst.StarredElement)
            and self._equal_batch_loader(value.elements[positions[0]].value, function.scope, depth + 1)
            for value in returns)

    def _instance_uses(self, call: cst.Call, scope: Scope) -> tuple[str, ...] | None:
        """`InstanceBuild.used_attrs`: `x = Cls(...)`, the only binding of a function's local `x`
        (or of a name of a script's `if __name__ == "__main__":` block), read only as `x.<attr>`."""
        statement = self.index.parent(call)
        if not (isinstance(statement, cst.Assign) and statement.value is call and len(statement.targets) == 1
                and isinstance(statement.targets[0].target, cst.Name)):
            return None
        target = statement.targets[0].target
        if scope.kind == "module":
            if not any(isinstance(a, cst.If) and main_guard(a.test) for a in self.index.ancestors(statement)):
                return None
            region = self.index.module
        elif scope.kind == "function":
            region = scope.node
        else:
            return None
        if len(scope.lookup(target.value)) != 1:
            return None
        attrs = set()
        for node in self.index.subtree(region):
            if not isinstance(node, cst.Name) or node.value != target.value or node is target:
                continue
            parent = self.index.parent(node)
            if not (isinstance(parent, cst.Attribute) and parent.value is node):
                return None  # passed, returned, stored, or a name the code reuses
            attrs.add(parent.attr.value)
        return tuple(sorted(attrs))

    def class_handed_around(self, class_name: str) -> bool:
        for node in self.index.nodes:
            if not (isinstance(node, cst.Name) and node.value == class_name):
                continue
            parent = self.index.parent(node)
            if isinstance(parent, cst.Call) and parent.func is node or isinstance(parent, cst.Attribute) \
                    and parent.attr is node and isinstance(self.index.parent(parent), cst.Call) \
                    and self.index.parent(parent).func is parent:
                continue  # `Cls(...)`, `module.Cls(...)`
            if isinstance(parent, (cst.ImportAlias, cst.Annotation)) or isinstance(parent, cst.Attribute) \
                    and parent.attr is node and isinstance(self.index.parent(parent), cst.ImportAlias) \
                    or isinstance(parent, cst.ClassDef) and parent.name is node:
                continue
            if isinstance(parent, cst.Arg):
                holder = self.index.parent(parent)
                if isinstance(holder, cst.ClassDef) or isinstance(holder, cst.Call) and isinstance(holder.func, cst.Name) \
                        and holder.func.value in ("isinstance", "issubclass") and parent.keyword is None:
                    continue
            if any(isinstance(a, cst.Annotation) for a in self.index.ancestors(node)):
                continue
            return True
        return False

    def subclasses(self, class_name: str) -> list[Subclass]:
        found = []
        for name, node in self.index.classes.items():
            scope = self.index.scope_of_node.get(node)
            if scope is None:
                continue
            outer = scope.parent or scope
            for base in node.bases:
                resolved = self.index.resolve(base.value, outer) or dotted_name(base.value)
                if resolved is None or resolved.rsplit(".", 1)[-1] != class_name:
                    continue
                methods = [f for f in self.index.functions if f.scope.parent is scope]
                found.append(Subclass(name, resolved, any(f.name == "__init__" for f in methods),
                                      tuple(sorted(self.index.class_attributes.get(name, {}))),
                                      outer is self.index.module_scope))
        return found

    def constructions(self, class_name: str) -> list[Construction]:
        """`Trainer(model, opt, build_schedule(...))`: for the roles of the `self.<attr>` that the
        class sets from its `__init__` parameters."""
        found = []
        for site, callee in self._calls_named(class_name):
            if not site.node.args:
                continue
            positional = tuple(self.roles.of(a.value, site.scope) for a in positional_args(site.node))
            keywords = tuple((a.keyword.value, role) for a in site.node.args if a.keyword is not None
                             for role in [self.roles.of(a.value, site.scope)] if role)
            if any(positional) or keywords:
                found.append(Construction(callee, positional, keywords))
        return found

    # -- functions ------------------------------------------------------------------------------
    def function(self, function: FunctionInfo) -> FunctionSummary:
        node = function.node
        if node in self._memo:
            return self._memo[node] or FunctionSummary(function.name)
        self._memo[node] = None  # recursion through itself
        params = [p.name.value for p in (*node.params.posonly_params, *node.params.params)]
        if function.class_name and params and params[0] in ("self", "cls"):
            params = params[1:]
        body_off = self._body_grad_off(function)
        star_kwarg = node.params.star_kwarg
        keywords = None if star_kwarg is not None else tuple(
            p.name.value for p in (*node.params.params, *node.params.kwonly_params))
        summary = FunctionSummary(
            name=function.name, params=tuple(params), keywords=keywords,
            star_args=isinstance(node.params.star_arg, cst.Param),
            grad_off=self._grad_off(function), body_grad_off=body_off,
            modes=self._modes(function), mode_calls=self._mode_calls(function),
            flag_defaults=self._flag_defaults(function), grad_switches=self._grad_switches(function),
            detached=self._detached(function, body_off), saves=self._saves(function),
            save_path=self._save_path(function),
            returns=self._returns(function), returns_mean=self._returns_mean(function),
            returns_reduction=self._returns_reduction(function),
            returns_at=self._returns_at(function),
            array_kind=self._array_kind(function), array_kinds_at=self._array_kinds_at(function),
            is_property=is_property(node),
            returned_keys=self._returned_keys(function), equal_batches=self._equal_batches(function),
            sets_epoch=any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                           and n.func.attr.value == "set_epoch" for n in self._own_nodes(function)),
            drawn_params=self._drawn_params(function, params), equal_batches_by=self._equal_batches_by(function),
            run_only=tuple(p for p in params if self._runs_only(function, p, frozenset({node}))),
            grad_off_when=self._grad_off_when(function, params),
            grad_off_always=self._grad_off_always(function),
            trains_over=trained_params(function, params, self._own_nodes(function)),
            drop_last_chosen_by=self._drop_last_chosen_by(function),
            backward_only=self._backward_only(function),
            ignored_params=self._ignored_params(function, params),
            persists_of=lambda: self._persists(function, params),
            copies_grads=self._copies_grads(function), writes_grads=self._writes_grads(function),
            differentiates_of=lambda: self._differentiates(function),
            classes_of=lambda words: self._returned_classes(function, words),
            graph_through_of=lambda: self._graph_through(function, params),
            graph_sources_of=lambda position: self._graph_sources(function, params, position))
        self._memo[node] = summary
        return summary

    def _persists(self, function: FunctionInfo, params: list[str]) -> tuple[str, ...]:
        wanted = set(params)
        found: list[str] = []
        for node in self._own_nodes(function):
            if type(node) is not cst.Call or not any(isinstance(n, cst.Name) and n.value in wanted
                                                     for a in node.args for n in walk(a.value)):
                continue
            for expr in written_values(self.index, node, function.scope):
                for name in walk(expr):
                    if isinstance(name, cst.Name) and name.value in wanted and name.value not in found:
                        found.append(name.value)
        return tuple(p for p in params if p in found)

    def _copies_grads(self, function: FunctionInfo) -> bool:
        return copies_grads(self._own_nodes(function))

    def _writes_grads(self, function: FunctionInfo) -> bool:
        return writes_grads(self._own_nodes(function))

    def _ignored_params(self, function: FunctionInfo, params: list[str]) -> tuple[str, ...]:
        """The parameters whose value reaches nothing: no name in the body (nested functions
        included) refers to them, or every read of one is in the value of an assignment that only
        rebinds the parameter's name, or in the test of an `if` whose branches do nothing else
        (`if torch.is_tensor(idx): idx = idx.tolist()`): the value only ever flows back into the
        name, which nothing else reads. None when the body reaches its names by text (`locals()`,
        `vars()`, `eval`, `exec`)."""
        names = [n for n in walk(function.node.body) if isinstance(n, cst.Name)]
        if {n.value for n in names} & {"locals", "vars", "eval", "exec"}:
            return ()
        return tuple(p for p in params if all(self._feeds_only_itself(function, n, p)
                                              for n in names if n.value == p))

    def _feeds_only_itself(self, function: FunctionInfo, name: cst.Name, param: str) -> bool:
        """`name` (the parameter's name) is a target rebinding it, or a read whose value goes only
        into rebinding it: the value of `param = ...`, or the test of an `if` whose branches only
        rebind it (a read inside a nested function, or anywhere else, may reach anything)."""
        index = self.index

        def rebinds(statement: cst.CSTNode) -> bool:
            if isinstance(statement, cst.SimpleStatementLine):
                return all(isinstance(small, cst.Pass) or isinstance(small, cst.Assign) and all(
                    isinstance(t.target, cst.Name) and t.target.value == param for t in small.targets)
                    for small in statement.body)
            if isinstance(statement, cst.If):
                return all(rebinds(s) for s in statement.body.body) and (
                    statement.orelse is None or rebinds(statement.orelse))
            if isinstance(statement, cst.Else):
                return all(rebinds(s) for s in statement.body.body)
            return False

        parent = index.parent(name)
        if isinstance(parent, cst.Arg) and isinstance(call := index.parent(parent), cst.Call) \
                and index.resolve(call.func, index.scope_at(call)) not in _INSPECTING_CALLS:
            return False  # handed to a call, which may keep it
        child: cst.CSTNode = name
        for ancestor in index.ancestors(name):
            if ancestor is function.node:
                return False
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return False
            if isinstance(ancestor, cst.AssignTarget):
                return ancestor.target is name  # `param = ...`: receives a value, reads none
            if isinstance(ancestor, cst.Assign):
                return ancestor.value is child and all(
                    isinstance(t.target, cst.Name) and t.target.value == param for t in ancestor.targets)
            if isinstance(ancestor, cst.If):
                return ancestor.test is child and rebinds(ancestor)
            if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
            child = ancestor
        return False

    def _runs_only(self, function: FunctionInfo, param: str, visiting: frozenset) -> bool:
        """Every use of `param` in the function's own body runs it (`param(x)`), calls one of
        `_RUN_ONLY_METHODS` on it, hands it to an inspecting builtin, or hands it to a function of
        this file that does the same (a recursion counts as doing the same); any other use (rebound,
        an attribute assigned or read, kept in a container, returned) may reach anything."""
        if param not in {p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params,
                                                *function.node.params.kwonly_params)}:
            return False
        allowed: set[int] = set()
        for node in self._own_nodes(function):
            if not isinstance(node, cst.Call):
                continue
            func = node.func
            if isinstance(func, cst.Name) and func.value == param:
                allowed.add(id(func))
            elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and \
                    func.value.value == param and func.attr.value in _RUN_ONLY_METHODS:
                allowed.add(id(func.value))
            for position, arg in enumerate(node.args):
                if not (isinstance(arg.value, cst.Name) and arg.value.value == param) or arg.star:
                    continue
                if isinstance(func, cst.Name) and func.value in _INSPECTING_BUILTINS:
                    allowed.add(id(arg.value))
                    continue
                target = self.index.callee(node, function.scope)
                if target is None:
                    continue
                names = [p.name.value for p in (*target.node.params.posonly_params, *target.node.params.params)]
                if target.class_name is not None and names and names[0] in ("self", "cls"):
                    names = names[1:]
                name = arg.keyword.value if arg.keyword is not None else names[position] if position < len(names) \
                    else None
                if name is not None and (target.node in visiting or
                                         self._runs_only(target, name, visiting | {target.node})):
                    allowed.add(id(arg.value))
        # names that are not uses: an attribute's name (`x.model`), a keyword (`f(model=...)`), a parameter
        for node in walk(function.node.body):
            if isinstance(node, cst.Attribute):
                allowed.add(id(node.attr))
            elif isinstance(node, cst.Arg) and node.keyword is not None:
                allowed.add(id(node.keyword))
            elif isinstance(node, cst.Param):
                allowed.add(id(node.name))
        # every use, nested functions' included (a closure may do anything with it)
        return all(id(node) in allowed for node in walk(function.node.body)
                   if isinstance(node, cst.Name) and node.value == param)

    def _equal_batches_by(self, function: FunctionInfo) -> tuple | None:
        """`FunctionSummary.equal_batches_by`: one returned loader (alone or in a returned tuple)
        whose `drop_last` depends on one parameter only."""
        returns = self._returns_of(function)
        if len(returns) != 1:
            return None
        value = returns[0]
        names = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        for name in names:
            if isinstance(name, cst.Call) and \
                    (self.index.resolve(name.func, function.scope) or "").rsplit(".", 1)[-1] == "DataLoader":
                return _drop_last_by(function, keyword_value(name, "drop_last"))
            if not isinstance(name, cst.Name):
                continue
            bindings = function.scope.lookup(name.value)
            if len(bindings) != 1 or bindings[0].kind != "assign":
                continue
            call = bindings[0].value
            if isinstance(call, cst.Call) and \
                    (self.index.resolve(call.func, function.scope) or "").rsplit(".", 1)[-1] == "DataLoader":
                return _drop_last_by(function, keyword_value(call, "drop_last"))
            node = bindings[0].node
            if call is None and isinstance(node, cst.Assign) and isinstance(node.targets[0].target, cst.Tuple) \
                    and isinstance(node.value, cst.Call):
                call = node.value
                # `data_set, data_loader = data_provider(self.args, flag)`: the helper's answer, its
                # parameter our own or a constant
                inner = self.summary_of(call.func, function.scope, ("DataLoader",)) \
                    if not _is_self_or_super(call.func.value if isinstance(call.func, cst.Attribute) else call.func) \
                    else None
                if isinstance(inner, FunctionSummary) and inner.equal_batches_by is not None:
                    param = inner.equal_batches_by[0]
                    argument = _argument(call, inner.params, param)
                    if isinstance(argument, cst.Name) and any(
                            p.name.value == argument.value for p in function.node.params.params):
                        return (argument.value, *inner.equal_batches_by[1:3], None)
        return None

    def _drop_last_chosen_by(self, function: FunctionInfo) -> str | None:
        """`FunctionSummary.drop_last_chosen_by`: every loader the function returns (one return, or
        one per branch: `if args.task_name == "classification": ... return data_set, loader`) is
        built with `drop_last=True` or `drop_last=<name>` bound only to `True` and `False` literals,
        both, and `equal_batches_by` cannot say by which parameter: the test of the `if` around a
        `False` binding that reads no parameter (each `False` binding must sit under such a test)."""
        returns = self._returns_of(function)
        if not returns:
            return None
        loaders: list[cst.Call] = []
        for value in returns:
            for element in [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]:
                if self._is_loader_call(element, function):
                    loaders.append(element)
                    continue
                if not isinstance(element, cst.Name):
                    continue
                bindings = function.scope.lookup(element.value)
                built = [b.value for b in bindings if b.kind == "assign" and self._is_loader_call(b.value, function)]
                if built and len(built) != len(bindings):
                    return None  # a loader on some paths, something else on others
                if not built and len(returns) == 1 and len(bindings) == 1 and bindings[0].kind == "assign" and \
                        bindings[0].value is None and isinstance(bindings[0].node, cst.Assign) and \
                        isinstance(bindings[0].node.value, cst.Call):
                    # `data_set, data_loader = data_provider(self.args, flag)`, returned as it is: the
                    # helper's answer
                    call = bindings[0].node.value
                    func = call.func
                    inner = self.summary_of(func, function.scope, ("DataLoader",)) \
                        if not _is_self_or_super(func.value if isinstance(func, cst.Attribute) else func) else None
                    if isinstance(inner, FunctionSummary) and inner.drop_last_chosen_by is not None:
                        return inner.drop_last_chosen_by
                loaders += built
        if not loaders:
            return None
        params = set(_param_names(function))
        false_bindings, values = [], set()
        for call in loaders:
            drop = keyword_value(call, "drop_last")
            if isinstance(drop, cst.Name) and drop.value == "True":
                values.add("True")
                continue
            if not isinstance(drop, cst.Name) or drop.value == "False" or _drop_last_by(function, drop) is not None:
                return None
            bindings = function.scope.lookup(drop.value)
            if not bindings or any(b.kind != "assign" or not isinstance(b.value, cst.Name)
                                   or b.value.value not in ("True", "False") for b in bindings):
                return None
            values |= {b.value.value for b in bindings}
            false_bindings += [b for b in bindings if b.value.value == "False" and b not in false_bindings]
        if values != {"True", "False"}:
            return None
        chosen = None
        for binding in false_bindings:
            test = next((n.test for n in _path_up(function, binding.node) if isinstance(n, cst.If)), None)
            if test is None or any(isinstance(n, cst.Name) and n.value in params and
                                   not isinstance(self.index.parent(n), cst.Attribute) for n in walk(test)):
                return None
            chosen = chosen or " ".join(cst.Module([]).code_for_node(test).split())
        return chosen

    def _is_loader_call(self, expr: cst.BaseExpression | None, function: FunctionInfo) -> bool:
        return isinstance(expr, cst.Call) and \
            (self.index.resolve(expr.func, function.scope) or "").rsplit(".", 1)[-1] == "DataLoader"

    def _drawn_params(self, function: FunctionInfo, params: list[str]) -> tuple[str, ...]:
        own = self._own_nodes(function)
        if not any(isinstance(n, cst.Break) or (isinstance(n, cst.Call) and isinstance(n.func, cst.Name)
                                                 and n.func.value == "next") for n in own):
            # nothing in it stops early or draws one batch: only a parameter it hands on to
            # another function (which may draw from it) can be drawn from
            handed = {a.value.value for n in own if type(n) is cst.Call for a in n.args
                      if type(a.value) is cst.Name and not a.star}
            params = [p for p in params if p in handed]
        return tuple(p for p in params if parameter_only_drawn_from(self.index, function, p))

    def _equal_batches(self, function: FunctionInfo) -> bool:
        returns = [n.value for n in self._own_nodes(function) if isinstance(n, cst.Return) and n.value is not None]
        if not returns:
            return False
        for value in returns:
            if isinstance(value, cst.Name):  # `loader = DataLoader(...)` then `return loader`
                bindings = function.scope.lookup(value.value)
                if len(bindings) != 1 or bindings[0].value is None:
                    return False
                value = bindings[0].value
            if isinstance(value, cst.Call) and (self.index.resolve(value.func, function.scope) or "") \
                    .rsplit(".", 1)[-1] == "DataLoader":
                if not equal_batch_arguments(value):
                    return False
            elif isinstance(value, cst.Dict):
                if not any(isinstance(e, cst.DictElement) and _string(e.key) == "drop_last"
                           and isinstance(e.value, cst.Name) and e.value.value == "True" for e in value.elements):
                    return False
            else:
                return False
        return True

    def _backward_only(self, function: FunctionInfo) -> bool:
        """`FunctionSummary.backward_only`: a backward call of its own, and no `.step(...)`."""
        methods = [n.func.attr.value for n in self._own_nodes(function)
                   if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)]
        backwards = frameworks.backward_methods()
        return any(m in backwards for m in methods) and "step" not in methods

    def _grad_off_when(self, function: FunctionInfo, params: list[str]) -> tuple[tuple[str, object], ...]:
        """`FunctionSummary.grad_off_when`, for a `forward` method: each literal a test of one of its
        parameters compares with (`mode == "inference"`, `if not trainable:`) under which every
        call it runs that could reach a submodule sits under a grad-off context."""
        if function.name != "forward" or function.class_name is None:
            return ()
        bindings = function.scope.bindings
        candidates: list[tuple[str, object]] = []
        for node in self._own_nodes(function):
            if not isinstance(node, cst.If):
                continue
            test = node.test
            if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                test = test.expression
            if isinstance(test, cst.Name):
                candidates += [(test.value, True), (test.value, False)]
            elif isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
                    isinstance(test.left, cst.Name) and isinstance(test.comparisons[0].operator, (cst.Equal, cst.NotEqual)):
                value = literal_value(test.comparisons[0].comparator)
                if isinstance(value, (bool, str)):
                    candidates.append((test.left.value, value))
        found = []
        for param, value in dict.fromkeys(candidates):
            if param not in params or not all(b.kind == "param" for b in bindings.get(param, ())):
                continue
            frame = Frame(None, function.scope, {}, flags={param: value})
            if self._quiet_block(body_of(function.node), function, frame, 0) is not None:
                found.append((param, value))
        return tuple(found)

    def _grad_off_always(self, function: FunctionInfo) -> bool:
        """`FunctionSummary.grad_off_always`: a `forward` whose every path runs the calls that could
        reach a submodule under a grad-off context (`_quiet_block` with no literal chosen), that
        enters one (itself or in a method of its class it calls), and that reads no `nn.Parameter`
        of its class outside it (`x @ self.weight` records a graph without a call)."""
        if function.name != "forward" or function.class_name is None or \
                not self._enters_grad_off(function, 0) or self._reads_parameter(function, 0):
            return False
        return self._quiet_block(body_of(function.node), function, Frame(None, function.scope, {}), 0) is not None

    def _self_methods(self, function: FunctionInfo):
        """The methods of its class that the function calls on `self`."""
        for node in self._own_nodes(function):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                    isinstance(node.func.value, cst.Name) and node.func.value.value == "self":
                method = self.index.method(function.class_name, node.func.attr.value)
                if method is not None and method.node is not function.node:
                    yield method

    def _enters_grad_off(self, function: FunctionInfo, depth: int) -> bool:
        for node in self._own_nodes(function):
            if isinstance(node, cst.With) and any(
                    context_grad(self.index, item.item, self.index.scope_at(node)) == OFF for item in node.items):
                return True
        return depth < 2 and any(self._enters_grad_off(m, depth + 1) for m in self._self_methods(function))

    def _reads_parameter(self, function: FunctionInfo, depth: int) -> bool:
        """The function (or a method of its class it calls) reads an attribute of `self` that holds
        an `nn.Parameter` other than inside a grad-off context."""
        for node in self._own_nodes(function):
            if not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"):
                continue
            values = self.index.self_attribute_values(node.attr.value, function.scope) or []
            if any(isinstance(v, cst.Call) and self.index.resolve(v.func, self.index.scope_at(v)) in _PARAMETERS
                   for v in values) and not self._under_grad_off(node, function):
                return True
        return depth < 2 and any(self._reads_parameter(m, depth + 1) for m in self._self_methods(function))

    def _under_grad_off(self, node: cst.CSTNode, function: FunctionInfo) -> bool:
        for ancestor in self.index.ancestors(node):
            if ancestor is function.node:
                return False
            if isinstance(ancestor, cst.With) and any(
                    context_grad(self.index, item.item, self.index.scope_at(ancestor)) == OFF for item in ancestor.items):
                return True
        return False

    def _quiet_block(self, statements, function: FunctionInfo, frame: Frame, depth: int) -> bool | None:
        """None when some statement (in the branches `frame`'s literals take) runs a call that could
        reach a submodule with grad on; else whether the block returns (or raises) for sure."""
        for statement in statements:
            if isinstance(statement, cst.If):
                chosen = flag_value(statement.test, frame)
                if chosen is None and not self._quiet_expression(statement.test, function, depth):
                    return None
                branches = [statement.body, statement.orelse] if chosen is None else \
                    [statement.body if chosen else statement.orelse]
                ends = []
                for branch in branches:
                    inner = [branch] if isinstance(branch, cst.If) else body_of(branch) if branch is not None else []
                    result = self._quiet_block(inner, function, frame, depth)
                    if result is None:
                        return None
                    ends.append(result)
                if all(ends):
                    return True
                continue
            if isinstance(statement, cst.With):
                scope = self.index.scope_at(statement)
                if any(context_grad(self.index, item.item, scope) == OFF for item in statement.items):
                    if any(isinstance(n, (cst.Return, cst.Raise)) for n in walk(statement.body)) and not any(
                            isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], (cst.Return, cst.Raise))
                            for s in body_of(statement)):
                        return None  # a return inside, but not for sure: follow no further
                    if any(isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], (cst.Return, cst.Raise))
                           for s in body_of(statement)):
                        return True
                    continue
            if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and \
                    isinstance(statement.body[0], (cst.Return, cst.Raise)):
                small = statement.body[0]
                value = small.value if isinstance(small, cst.Return) else small.exc
                return True if value is None or self._quiet_expression(value, function, depth) else None
            if any(isinstance(n, (cst.Return, cst.Yield)) for n in walk(statement)) or \
                    not self._quiet_expression(statement, function, depth):
                return None
        return False

    def _quiet_expression(self, node: cst.CSTNode, function: FunctionInfo, depth: int) -> bool:
        """Every call under `node` is one that reaches no submodule: a builtin or imported function, a
        method of a value that is not an attribute of `self` (`x.long()`, `label_map.size()`), a
        method of the class that is itself quiet (two levels), or an attribute of `self` assigned
        only imported references (`self.FloatTensor = torch.cuda.FloatTensor`)."""
        scope = function.scope
        for sub in walk(node):
            if isinstance(sub, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
                return False
            if not isinstance(sub, cst.Call):
                continue
            func = sub.func
            if isinstance(func, cst.Name):
                bindings = scope.lookup(func.value)
                if bindings and not all(b.kind == "import" for b in bindings):
                    return False  # a local value or a function of the project: may run a module
                continue
            if not isinstance(func, cst.Attribute):
                return False
            if func.attr.value in ("forward", "generate", "__call__", "apply"):
                return False
            receiver = func.value
            root = receiver
            while isinstance(root, (cst.Attribute, cst.Subscript)):
                root = root.value
            if isinstance(root, cst.Call):
                continue  # a method of what a call gave (`self.FloatTensor(n).zero_()`): that call is checked
            if not (isinstance(root, cst.Name) and root.value == "self"):
                if isinstance(root, cst.Name) and any(
                        b.kind != "import" and isinstance(b.value, cst.Attribute) for b in scope.lookup(root.value)):
                    return False  # `net = self.netG`, then `net.encode(x)`
                continue
            if not (isinstance(receiver, cst.Name) and receiver.value == "self"):
                return False  # `self.netG.encode(x)`: a method of a submodule
            method = self.index.method(function.class_name, func.attr.value)
            if method is not None:
                if depth >= 2 or self._quiet_block(body_of(method.node), method, Frame(None, method.scope, {}),
                                                   depth + 1) is None:
                    return False
                continue
            values = self.index.self_attribute_values(func.attr.value, scope)
            if not values or not all(self._imported_reference(v, scope) or self._not_module(v) for v in values):
                return False
        return True

    def _not_module(self, value: cst.BaseExpression) -> bool:
        """`AutoTokenizer.from_pretrained(name)`: a call that builds an object that is no torch module
        (framework data, `not_module`), resolved in the scope of the assignment."""
        return isinstance(value, cst.Call) and \
            self.index.resolve(value.func, self.index.scope_at(value)) in frameworks.not_modules()

    def _imported_reference(self, value: cst.BaseExpression, scope: Scope) -> bool:
        """`torch.cuda.FloatTensor`, or an `a if c else b` of such: a name of an imported module."""
        if isinstance(value, cst.IfExp):
            return self._imported_reference(value.body, scope) and self._imported_reference(value.orelse, scope)
        if not isinstance(value, (cst.Name, cst.Attribute)):
            return False
        root = value
        while isinstance(root, cst.Attribute):
            root = root.value
        return isinstance(root, cst.Name) and bool(scope.lookup(root.value)) and \
            all(b.kind == "import" for b in scope.lookup(root.value))

    def _differentiates(self, function: FunctionInfo) -> bool:
        """`FunctionSummary.differentiates`: the function or a project function it calls computes
        gradients, in eval mode (what runs only under `if self.training:` left out)."""
        index = self.index
        for node in self._own_nodes(function):
            if isinstance(node, cst.Assign) and not is_false(node.value) and any(
                    isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
                    for t in node.targets) and not _train_only(index, node, function.node):
                return True  # `x.requires_grad = True`
            if not isinstance(node, cst.Call) or _train_only(index, node, function.node):
                continue
            scope = index.scope_at(node)
            name = index.resolve(node.func, scope)
            if name in GRAD_FUNCTIONS or name in GRAD_ON_CONTEXTS:
                return True
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("backward", "requires_grad_", "retain_grad"):
                args = positional_args(node)
                if func.attr.value != "requires_grad_" or not args or not is_false(args[0].value):
                    return True
            if name is not None and name.split(".", 1)[0] in ("torch", "numpy", "np", "math", "builtins"):
                continue  # a library call: not the project's
            for callee in self._project_callees(node, scope, function):
                if callee.differentiates:
                    return True
        return False

    def _project_callees(self, call: cst.Call, scope: Scope, function: FunctionInfo) -> list:
        """The summaries of what `call` runs that the project defines: a function or method of this
        file (`helper(x)`, `self.method(x)`), the method or forward of the class a `self.<attr>` of
        this class is built from (`self.sdf.gradient(x)`, `self.sdf(x)`), another file's function
        or class (its forward, for a call of an instance)."""
        target = self.index.callee(call, scope)
        if target is not None:
            return [self.function(target)]
        func = call.func
        found = []
        # `self.net(x)` runs `net`'s forward; `self.net.gradient(x)` its method
        receiver, method = (func.value, func.attr.value) if isinstance(func, cst.Attribute) else (func, "forward")
        if isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) \
                and receiver.value.value == "self" and function.class_name is not None:
            for value in self.index.class_attributes.get(function.class_name, {}).get(receiver.attr.value, []):
                built = _unmoved(value)
                if isinstance(built, cst.Call):
                    summary = self.summary_of(built.func, self.index.scope_at(built))
                    found.append(summary.method(method) if isinstance(summary, ClassSummary) else None)
            return [f for f in found if f is not None]
        if isinstance(func, (cst.Name, cst.Attribute)):
            summary = self.summary_of(func, scope)
            if isinstance(summary, FunctionSummary):
                found.append(summary)
        return found

    def _own_nodes(self, function: FunctionInfo) -> list[cst.CSTNode]:
        """Nodes of the function's body, not those of nested defs or classes (walked once)."""
        found = self._own.get(function.node)
        if found is None:
            found = self._own[function.node] = []
            stack = [function.node.body]
            while stack:
                node = stack.pop()
                found.append(node)
                if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                    continue
                stack.extend(reversed(iter_children(node)))
        return found

    def _returns_of(self, function: FunctionInfo) -> list[cst.BaseExpression]:
        return [n.value for n in self._own_nodes(function) if isinstance(n, cst.Return) and n.value is not None]

    def grad_of(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
        """`expr` is (or makes) a context or decorator that turns recording off."""
        if depth > 6:
            return False
        if isinstance(expr, cst.IfExp):
            return self.grad_of(expr.body, scope, depth + 1) and self.grad_of(expr.orelse, scope, depth + 1)
        if isinstance(expr, (cst.Name, cst.Attribute)):
            if self.index.resolve(expr, scope) in GRAD_OFF_NAMES:
                return True
            if isinstance(expr, cst.Name):
                for binding in scope.lookup(expr.value)[-1:]:
                    target = self.index.function_of_node.get(binding.node)
                    if target is not None and target.scope.parent is not self.index.module_scope:
                        nested = self.function(target)  # a wrapper defined inside the factory
                        return nested.grad_off or nested.body_grad_off
            summary = self.summary_of(expr, scope, GRAD_WORDS)
            return bool(summary is not None and getattr(summary, "grad_off", False))
        if isinstance(expr, cst.Call):
            if context_grad(self.index, expr, scope) == OFF:
                return True
            return self.grad_of(expr.func, scope, depth + 1)
        return False

    def _grad_off(self, function: FunctionInfo) -> bool:
        scope = function.scope
        decorators = {self.index.resolve(d.decorator, scope.parent or scope) for d in function.node.decorators}
        if decorators & _CONTEXTMANAGER:
            for node in self._own_nodes(function):
                if isinstance(node, cst.Yield) and self._under_grad_off(node, function):
                    return True
        return any(self.grad_of(value, scope) for value in self._returns_of(function))

    def _under_grad_off(self, node: cst.CSTNode, function: FunctionInfo) -> bool:
        for ancestor in self.index.ancestors(node):
            if ancestor is function.node:
                return False
            if isinstance(ancestor, cst.With):
                if any(context_grad(self.index, item.item, function.scope) == OFF for item in ancestor.items):
                    return True
        return False

    def _body_grad_off(self, function: FunctionInfo) -> bool:
        if decorator_grad(self.index, function) == OFF:
            return True
        body = function.node.body
        statements = list(body.body) if isinstance(body, cst.IndentedBlock) else []
        if statements and _is_docstring(statements[0]):
            statements = statements[1:]
        return (len(statements) == 1 and isinstance(statements[0], cst.With)
                and self._under_grad_off(statements[0].body, function))

    # -- modes ----------------------------------------------------------------------------------
    def _modes(self, function: FunctionInfo) -> tuple[tuple[str, str, str], ...]:
        params = {p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params,
                                         *function.node.params.kwonly_params)}
        seen: dict[str, list[str]] = {}
        for node in self._own_nodes(function):
            if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                    and node.func.attr.value in ("eval", "train")):
                continue
            target = _target_name(node.func.value, params)
            if target is None or deep_copied(self.index, node.func.value, function.scope):
                continue
            seen.setdefault(target, []).append(_mode_of(node))
        return tuple((target, kinds[0], kinds[-1]) for target, kinds in seen.items())

    def _mode_calls(self, function: FunctionInfo) -> tuple[tuple[str, str, tuple[tuple[str, bool], ...]], ...]:
        params = {p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params,
                                         *function.node.params.kwonly_params)}
        flags = {name for name in params
                 if all(b.kind == "param" for b in function.scope.bindings.get(name, ()))}
        found = []
        for node in self._own_nodes(function):
            if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                    and node.func.attr.value in ("eval", "train")):
                continue
            target = _target_name(node.func.value, params)
            if target is None or deep_copied(self.index, node.func.value, function.scope):
                continue
            found.append((target, _mode_of(node), self._flag_guards(node, function, flags)))
        return tuple(found)

    def _flag_guards(self, node: cst.CSTNode, function: FunctionInfo, flags: set[str]) -> tuple[tuple[str, bool], ...]:
        """The (parameter, value) pairs the `if`s around `node` need to run it: `if not p:` -> (p, False),
        `if p:` -> (p, True), and the reverse in their `else`."""
        guards = []
        child = node
        for ancestor in self.index.ancestors(node):
            if ancestor is function.node:
                break
            if isinstance(ancestor, cst.If) and (child is ancestor.body or child is ancestor.orelse):
                test, value = ancestor.test, True
                while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                    test, value = test.expression, not value
                if isinstance(test, cst.Name) and test.value in flags:
                    guards.append((test.value, value if child is ancestor.body else not value))
            child = ancestor
        return tuple(guards)

    def _grad_switches(self, function: FunctionInfo):
        """`FunctionSummary.grad_switches`."""
        switches = [n for n in self._own_nodes(function) if isinstance(n, cst.Call)
                    and isinstance(n.func, (cst.Name, cst.Attribute))
                    and (n.func.attr if isinstance(n.func, cst.Attribute) else n.func).value.endswith("set_grad_enabled")
                    and self.index.resolve(n.func, function.scope) in GRAD_SETTERS]
        if not switches or decorator_grad(self.index, function) is not None:
            return None
        if any(isinstance(n, (cst.Return, cst.Raise, cst.Yield)) for n in self._own_nodes(function)):
            return None
        params = {p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params,
                                         *function.node.params.kwonly_params)}
        flags = {name for name in params if all(b.kind == "param" for b in function.scope.bindings.get(name, ()))}
        found = []
        for call in switches:
            statement = self.index.parent(call)
            if not isinstance(statement, cst.Expr) or len(call.args) != 1 or call.args[0].keyword is not None:
                return None  # `with set_grad_enabled(...)`, a keyword: not a plain statement switch
            child = call
            for ancestor in self.index.ancestors(call):
                if ancestor is function.node:
                    break
                if isinstance(ancestor, cst.If):
                    test = ancestor.test
                    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                        test = test.expression
                    if child is ancestor.test or not (isinstance(test, cst.Name) and test.value in flags):
                        return None
                elif not isinstance(ancestor, (cst.IndentedBlock, cst.SimpleStatementLine, cst.Expr, cst.Else)):
                    return None  # a loop, `with`, `try`: not on every call
                child = ancestor
            value = call.args[0].value
            negated = isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Not)
            inner = value.expression if negated else value
            if is_true(value) or is_false(value):
                kind = "on" if is_true(value) else "off"
            elif isinstance(inner, cst.Name) and inner.value in flags:
                kind = ("not " if negated else "") + inner.value
            else:
                return None
            found.append((kind, self._flag_guards(call, function, flags)))
        return tuple(found)

    @staticmethod
    def _flag_defaults(function: FunctionInfo) -> tuple[tuple[str, bool], ...]:
        params = function.node.params
        return tuple((p.name.value, is_true(p.default))
                     for p in (*params.posonly_params, *params.params, *params.kwonly_params)
                     if p.default is not None and (is_true(p.default) or is_false(p.default))
                     and all(b.kind == "param" for b in function.scope.bindings.get(p.name.value, ())))

    # -- detached results -----------------------------------------------------------------------
    def _detached(self, function: FunctionInfo, body_off: bool) -> Detached:
        returns = [n for n in self._own_nodes(function) if isinstance(n, cst.Return) and n.value is not None]
        if not returns:
            return Detached()
        if body_off or all(self._under_grad_off(r, function) for r in returns):
            return Detached(whole=True)
        whole = True
        positions: frozenset[int] | None = None
        keys: frozenset[str] | None = None
        for ret in returns:
            off = self._under_grad_off(ret, function)
            value = ret.value
            if not (off or self.is_detached(value, function.scope)):
                whole = False
            if isinstance(value, (cst.Tuple, cst.List)):
                found = frozenset(i for i, e in enumerate(value.elements)
                                  if off or self.is_detached(e.value, function.scope))
                positions = found if positions is None else positions & found
            elif isinstance(value, cst.Dict):
                found = frozenset(_string(e.key) for e in value.elements if isinstance(e, cst.DictElement)
                                  and _string(e.key) and (off or self.is_detached(e.value, function.scope)))
                keys = found if keys is None else keys & found
        return Detached(whole, positions or frozenset(), keys or frozenset(), self._handed_back(function, returns),
                        self._detached_fields(function, returns))

    def _detached_fields(self, function: FunctionInfo, returns: list[cst.Return]) -> frozenset[tuple[int, str]]:
        """`Detached.fields`: returns under a grad-off context give nothing with a graph and do
        not count; every other return must build the object with the field's value detached."""
        found: set[tuple[int, str]] | None = None
        for ret in returns:
            if self._under_grad_off(ret, function):
                continue
            value = ret.value
            elements = list(enumerate(e.value for e in value.elements)) if isinstance(value, (cst.Tuple, cst.List)) \
                else [(-1, value)]
            here = set()
            for position, element in elements:
                for name, argument in self._built_fields(element, function.scope).items():
                    if self.is_detached(argument, function.scope):
                        here.add((position, name))
            found = here if found is None else found & here
            if not found:
                return frozenset()
        return frozenset(found or ())

    def _built_fields(self, expr: cst.BaseExpression, scope: Scope) -> dict[str, cst.BaseExpression]:
        """The fields of the object `expr` is, when it is (a name bound once to) a construction of a
        project class: `construction_fields`."""
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].value is None:
                return {}
            expr = bindings[0].value
        if not isinstance(expr, cst.Call):
            return {}
        summary = self.summary_of(expr.func, scope)
        return construction_fields(summary, expr) if isinstance(summary, ClassSummary) else {}

    def _handed_back(self, function: FunctionInfo, returns: list[cst.Return]) -> frozenset[tuple[int, str]]:
        """`Detached.through`: the tuple positions where every return gives one parameter back
        (`return out, state` with `state` a parameter, or on another path a new tensor made from
        data: `state = torch.tensor(estimate(...))`)."""
        params = {p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params,
                                         *function.node.params.kwonly_params)}
        found: set[tuple[int, str]] | None = None
        for ret in returns:
            value = ret.value
            if not isinstance(value, (cst.Tuple, cst.List)):
                return frozenset()
            here = set()
            for position, element in enumerate(value.elements):
                name = element.value
                if not isinstance(name, cst.Name) or name.value not in params \
                        or self._changed_in_place(function, name.value):
                    continue
                bindings = function.scope.lookup(name.value)
                if all(b.kind == "param" or (b.kind == "assign" and b.value is not None
                                             and self.is_detached(b.value, function.scope)) for b in bindings):
                    here.add((position, name.value))
            found = here if found is None else found & here
        return frozenset(found or ())

    def _changed_in_place(self, function: FunctionInfo, name: str) -> bool:
        """`name.add_(x)`, `name[i] = x`, `name += x` in the function: its value is not the caller's."""
        for node in self._own_nodes(function):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                    and node.func.attr.value.endswith("_") and not node.func.attr.value.startswith("_") \
                    and isinstance(node.func.value, cst.Name) and node.func.value.value == name:
                return True
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
                [node.target] if isinstance(node, cst.AugAssign) else []
            if any(isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name) and t.value.value == name
                   or isinstance(node, cst.AugAssign) and isinstance(t, cst.Name) and t.value == name
                   for t in targets):
                return True
        return False

    def is_detached(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
        if depth > 6:
            return False
        if is_number(expr, scope, self.index.resolve):
            return True  # `x.size(0) / n`, `len(batch)`: a Python number carries no graph
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString)):
            return True
        if isinstance(expr, cst.Name):
            if expr.value in ("None", "True", "False"):
                return True
            bindings = scope.lookup(expr.value)
            if not bindings or any(b.kind not in ("assign", "augassign") or b.value is None for b in bindings):
                return False
            if not all(self.is_detached(b.value, scope, depth + 1) for b in bindings):
                return False
            # a list filled by `.append(...)` is as detached as what is put in it, a dict as what
            # `d[key] = value` stores in it (`d.update(...)`, `d.setdefault(...)`: not followed)
            stored = self._stored_into(expr.value, scope)
            if stored is None:
                return False
            return all(self.is_detached(value, scope, depth + 1)
                       for value in (*self._put_into(expr.value, scope), *stored))
        if isinstance(expr, cst.Attribute):
            return expr.attr.value == "data"
        if isinstance(expr, (cst.Tuple, cst.List)):
            return all(self.is_detached(e.value, scope, depth + 1) for e in expr.elements)
        if isinstance(expr, cst.Dict):  # `{"mse": mse.item(), "total": total.item()}`
            return all(isinstance(e, cst.DictElement) and self.is_detached(e.value, scope, depth + 1)
                       for e in expr.elements)
        if isinstance(expr, cst.Subscript):
            return self.is_detached(expr.value, scope, depth)  # an element of a detached result
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute):
                if func.attr.value in _DETACHING_METHODS:
                    return True
                if func.attr.value in _SAME_GRAPH_METHODS:  # a step within the expression: no depth
                    return self.is_detached(func.value, scope, depth)
                if func.attr.value in _NON_DIFFERENTIABLE_METHODS:
                    return True  # a comparison, an index, a count: no graph whatever the receiver
                if func.attr.value in _ARITHMETIC_METHODS:
                    return self.is_detached(func.value, scope, depth) \
                        and all(self.is_detached(a.value, scope, depth) for a in expr.args)
            qualname = self.index.resolve(func, scope)
            if qualname in _DETACHING_FUNCTIONS or qualname in _DATA_FACTORIES:
                return True  # (a tensor made from data is a new leaf: it holds no graph)
            if is_synthetic_tensor(expr, scope, self.index.resolve):
                return True
            summary = self.summary_of(func, scope, DETACH_WORDS)
            if isinstance(summary, FunctionSummary):
                return summary.detached.whole or summary.body_grad_off
        return False

    def _stored_into(self, name: str, scope: Scope) -> list[cst.BaseExpression] | None:
        """What `name[key] = value` (or `name[key] += value`) stores into the container `name` in
        `scope`; None when the scope also fills it another way (`name.update(...)`,
        `name.setdefault(...)`, `name[key].append(...)`), whose values are not followed."""
        memo = self.__dict__.setdefault("_stored_memo", {})
        if id(scope) not in memo:
            by_name: dict[str, list[cst.BaseExpression] | None] = {}
            nodes = self.index.scope_nodes(scope.node) if scope.kind != "class" else []
            for node in nodes:
                kind = type(node)
                if kind is cst.Assign or kind is cst.AugAssign:
                    targets = [t.target for t in node.targets] if kind is cst.Assign else [node.target]
                    for target in targets:
                        if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
                            held = by_name.setdefault(target.value.value, [])
                            if held is not None:
                                held.append(node.value)
                elif kind is cst.Call and isinstance(node.func, cst.Attribute) \
                        and node.func.attr.value in ("update", "setdefault", "__setitem__"):
                    receiver = node.func.value
                    if isinstance(receiver, cst.Name):
                        by_name[receiver.value] = None
                elif kind is cst.Call and isinstance(node.func, cst.Attribute) \
                        and isinstance(node.func.value, cst.Subscript) \
                        and isinstance(node.func.value.value, cst.Name):
                    by_name[node.func.value.value.value] = None  # `d[k].append(x)`: filled in place
            memo[id(scope)] = by_name
        return memo[id(scope)].get(name, [])

    def _put_into(self, name: str, scope: Scope) -> list[cst.BaseExpression]:
        """What `name.append(x)` / `.extend` / `.insert` put into the container `name` in `scope`."""
        memo = self.__dict__.setdefault("_put_memo", {})
        if id(scope) not in memo:
            by_name: dict[str, list[cst.BaseExpression]] = {}
            for site in self.index.calls:
                func = site.node.func
                if site.scope is scope and isinstance(func, cst.Attribute) \
                        and func.attr.value in ("append", "extend", "insert") \
                        and isinstance(func.value, cst.Name) and site.node.args:
                    by_name.setdefault(func.value.value, []).append(site.node.args[-1].value)
            memo[id(scope)] = by_name
        return memo[id(scope)].get(name, [])

    # -- saves ----------------------------------------------------------------------------------
    def _saves(self, function: FunctionInfo) -> tuple[tuple[str, bool], ...]:
        params = set(_param_names(function))
        written: list[str] = []
        atomic = False
        for node in self._own_nodes(function):
            if not isinstance(node, cst.Call):
                continue
            name = self.index.resolve(node.func, function.scope)
            if name in _RENAMES or (isinstance(node.func, cst.Attribute) and node.func.attr.value in ("replace", "rename")
                                    and len(node.args) == 1):
                atomic = True
            if name in _SAVERS:
                passed = _forwarded_position(function, node, 0)
                if passed is not None and passed not in written:
                    written.append(passed)
                args = positional_args(node)
                obj = args[0].value if args else keyword_value(node, "obj") or keyword_value(node, "tensors")
                if obj is None:
                    continue
                for part in walk(obj):
                    if isinstance(part, cst.Name) and part.value in params and part.value not in written:
                        written.append(part.value)
        return tuple((name, atomic) for name in written)

    def _save_path(self, function: FunctionInfo) -> str | None:
        """The parameter that the destination of its `torch.save`/`pickle.dump` comes from."""
        params = set(_param_names(function))
        for node in self._own_nodes(function):
            if isinstance(node, cst.Call) and self.index.resolve(node.func, function.scope) in _SAVERS:
                passed = _forwarded_position(function, node, 1)
                if passed is not None:
                    return passed
                args = positional_args(node)
                dest = args[1].value if len(args) > 1 else keyword_value(node, "f") or keyword_value(node, "filename")
                for part in walk(dest) if dest is not None else ():
                    if isinstance(part, cst.Name) and part.value in params:
                        return part.value
        return None

    # -- factories ------------------------------------------------------------------------------
    def _returns(self, function: FunctionInfo) -> str | None:
        values = self._returns_of(function)
        if values and all(self._plain_function(v, function) for v in values):
            return OTHER  # it hands back a plain function (`lambda x: (x + 1) / 2`), whatever its name
        for value in values:
            if isinstance(value, cst.Name) and value.value in _param_names(function):
                continue  # hands back what it was given
            role = self.roles.of(value, function.scope)
            if role:
                return role
        return None

    def _plain_function(self, value: cst.BaseExpression, function: FunctionInfo) -> bool:
        """`value` is a plain function: a lambda, or a name the factory binds only to lambdas and
        functions it defines (`def lr_lambda(step): ...` in one branch, `lr_lambda = lambda s: 1.0`
        in another, `return lr_lambda`): a callable of its arguments, no object with state."""
        if isinstance(value, cst.Lambda):
            return True
        if not isinstance(value, cst.Name):
            return False
        bindings = function.scope.bindings.get(value.value, [])
        return bool(bindings) and all(b.kind == "def" or (b.kind == "assign" and isinstance(b.value, cst.Lambda))
                                      for b in bindings)

    def _returns_at(self, function: FunctionInfo) -> tuple[str | None, ...]:
        """The roles of the elements of the tuple every return gives (same length), else ()."""
        values, length = self._uniform_tuples(function)
        roles: list[str | None] = []
        for position in range(length):
            found = None
            for value in values:
                found = self.roles.of(value.elements[position].value, function.scope)
                if found:
                    break
            roles.append(found)
        return tuple(roles) if any(roles) else ()

    def _graph_through(self, function: FunctionInfo, params: list[str]) -> tuple[str, ...] | None:
        """`FunctionSummary.graph_through`."""
        if not function.class_name:
            return None
        frozen = self._frozen_attributes(function.class_name)
        values = self._returns_of(function)
        if not frozen or not values:
            return None
        through: list[str] = []
        for value in values:
            func = value.func if isinstance(value, cst.Call) else None
            if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                    and func.value.value == "self" and func.attr.value in frozen):
                return None
            for arg in value.args:
                if not (isinstance(arg.value, cst.Name) and arg.value.value in params and not arg.star
                        and all(b.kind == "param" for b in function.scope.lookup(arg.value.value))):
                    return None
                if arg.value.value not in through:
                    through.append(arg.value.value)
        return tuple(through)

    def _graph_sources(self, function: FunctionInfo, params: list[str], position: int) -> frozenset[str] | None:
        """`FunctionSummary.graph_sources`: returns under a grad-off context give no graph."""
        returns = [n for n in self._own_nodes(function) if isinstance(n, cst.Return) and n.value is not None]
        if not returns or any(isinstance(n, (cst.Yield, cst.Global, cst.Nonlocal)) for n in self._own_nodes(function)):
            return None
        found: set[str] = set()
        for ret in returns:
            if self._under_grad_off(ret, function):
                continue
            value = ret.value
            if position >= 0:
                if not isinstance(value, cst.Tuple) or position >= len(value.elements) \
                        or any(isinstance(e, cst.StarredElement) for e in value.elements):
                    return None
                value = value.elements[position].value
            sources = self._sources(value, function, set(params), 0)
            if sources is None:
                return None
            found |= sources
        return frozenset(found)

    def _sources(self, expr: cst.BaseExpression, function: FunctionInfo, params: set[str],
                 depth: int) -> frozenset[str] | None:
        """The parameters whose graph `expr` (in `function`) can carry, when nothing else in it can
        hold one; frozenset() for a value without graph; None when not known."""
        scope = function.scope
        if depth > 24:
            return None
        if self.is_detached(expr, scope):
            return frozenset()
        if isinstance(expr, cst.Name):
            bindings = scope.bindings.get(expr.value)
            if not bindings:
                return None  # a global or a name of an enclosing function: not followed
            if all(b.kind == "param" for b in bindings):
                return frozenset({expr.value}) if expr.value in params else None
            memo = self.__dict__.setdefault("_sources_memo", {})
            key = (function.node, expr.value)
            if key in memo:
                return memo[key]  # (a name read while it is being followed, `x = x + a`: adds nothing)
            memo[key] = frozenset()
            memo[key] = self._name_sources(expr.value, bindings, function, params, depth)
            return memo[key]
        return self._expr_sources(expr, function, params, depth)

    def _name_sources(self, name: str, bindings, function: FunctionInfo, params: set[str],
                      depth: int) -> frozenset[str] | None:
        """`_sources` of a local: what each binding gives it, and what `.append(...)` and
        `name[key] = ...` put into it."""
        scope = function.scope
        found: set[str] = set()
        for binding in bindings:
            if binding.kind not in ("assign", "augassign") or binding.value is None:
                return None
            more = self._sources(binding.value, function, params, depth + 1)
            if more is None:
                return None
            found |= more
        stored = self._stored_into(name, scope)
        if stored is None:
            return None
        for value in (*self._put_into(name, scope), *stored):
            more = self._sources(value, function, params, depth + 1)
            if more is None:
                return None
            found |= more
        return frozenset(found)

    def _expr_sources(self, expr: cst.BaseExpression, function: FunctionInfo, params: set[str],
                      depth: int) -> frozenset[str] | None:
        scope = function.scope
        if isinstance(expr, cst.BinaryOperation):
            return _union(self._sources(expr.left, function, params, depth + 1),
                          self._sources(expr.right, function, params, depth + 1))
        if isinstance(expr, cst.UnaryOperation):
            return self._sources(expr.expression, function, params, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self._sources(expr.value, function, params, depth + 1)
        if isinstance(expr, (cst.Tuple, cst.List)):
            return _union(*(self._sources(e.value, function, params, depth + 1) for e in expr.elements)) \
                if expr.elements and not any(isinstance(e, cst.StarredElement) for e in expr.elements) else None
        if isinstance(expr, cst.Dict):
            if not expr.elements or not all(isinstance(e, cst.DictElement) for e in expr.elements):
                return None
            return _union(*(self._sources(e.value, function, params, depth + 1) for e in expr.elements))
        if isinstance(expr, cst.Call):
            if any(a.star for a in expr.args):
                return None
            arguments = [self._sources(a.value, function, params, depth + 1) for a in expr.args]
            func = expr.func
            qualname = self.index.resolve(func, scope)
            if qualname is not None and qualname.startswith("torch.") and not qualname.startswith("torch.nn.Module"):
                return _union(*arguments) if arguments else frozenset()
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
                if function.class_name and func.attr.value in self._frozen_attributes(function.class_name):
                    return _union(*arguments) if arguments else frozenset()
                return None
            if isinstance(func, cst.Attribute) and qualname is None:
                # a method of a tensor computed here (`pred.diff(dim=1)`): its receiver's graph
                receiver = self._sources(func.value, function, params, depth + 1)
                if receiver is None or not (receiver or isinstance(func.value, (cst.Call, cst.BinaryOperation,
                                                                               cst.Subscript))):
                    return None
                return _union(receiver, *arguments)
            return None
        return None

    def _frozen_attributes(self, class_name: str) -> frozenset[str]:
        """The `self.<attr>` modules whose parameters the class's methods all freeze and never turn
        back on: `self.<attr>.requires_grad_(False)`, `p.requires_grad = False` (or
        `p.requires_grad_(False)`) over `self.<attr>.parameters()`, also as one element of a `zip`
        (`for q, k in zip(self.online.parameters(), self.target.parameters()): k.requires_grad = False`).
        An attribute the class also rebinds outside `__init__` is not counted."""
        memo = self.__dict__.setdefault("_frozen_memo", {})
        if class_name in memo:
            return memo[class_name]
        memo[class_name] = frozenset()
        node = self.index.classes.get(class_name)
        if not isinstance(node, cst.ClassDef):
            return frozenset()
        frozen: set[str] = set()
        thawed: set[str] = set()
        by_class = self.__dict__.get("_functions_by_class")
        if by_class is None:
            by_class = {}
            for function in self.index.functions:
                if function.class_name:
                    by_class.setdefault(function.class_name, []).append(function)
            self.__dict__["_functions_by_class"] = by_class
        for function in by_class.get(class_name, ()):
            for part in self._own_nodes(function):
                if isinstance(part, cst.Assign):
                    flag = is_false(part.value) or is_true(part.value)
                    for target in part.targets:
                        t = target.target
                        if flag and isinstance(t, cst.Attribute) and t.attr.value == "requires_grad" \
                                and isinstance(t.value, cst.Name):
                            owner = self._parameters_owner(part, t.value.value)
                            if owner is not None:
                                (frozen if is_false(part.value) else thawed).add(owner)
                        elif isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) \
                                and t.value.value == "self" and function.name != "__init__":
                            thawed.add(t.attr.value)  # rebound after construction: not known frozen
                elif isinstance(part, cst.Call) and isinstance(part.func, cst.Attribute) \
                        and part.func.attr.value == "requires_grad_":
                    receiver = part.func.value
                    off = bool(part.args) and is_false(part.args[0].value)
                    if isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) \
                            and receiver.value.value == "self":
                        (frozen if off else thawed).add(receiver.attr.value)
                    elif isinstance(receiver, cst.Name):
                        owner = self._parameters_owner(part, receiver.value)
                        if owner is not None:
                            (frozen if off else thawed).add(owner)
        memo[class_name] = frozenset(frozen - thawed)
        return memo[class_name]

    def _parameters_owner(self, node: cst.CSTNode, variable: str) -> str | None:
        """`attr` when `node` is inside `for <variable> in self.<attr>.parameters():`, or inside
        `for a, <variable> in zip(..., self.<attr>.parameters()):` at the same position."""
        for ancestor in self.index.ancestors(node):
            if not isinstance(ancestor, cst.For):
                continue
            target, iterated = ancestor.target, ancestor.iter
            pairs = [(target, iterated)]
            if isinstance(target, cst.Tuple) and isinstance(iterated, cst.Call) \
                    and dotted_name(iterated.func) == "zip" and len(iterated.args) == len(target.elements):
                pairs = [(e.value, a.value) for e, a in zip(target.elements, iterated.args)]
            for name, source in pairs:
                if isinstance(name, cst.Name) and name.value == variable:
                    if isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute) \
                            and source.func.attr.value == "parameters" \
                            and isinstance(source.func.value, cst.Attribute) \
                            and isinstance(source.func.value.value, cst.Name) \
                            and source.func.value.value.value == "self":
                        return source.func.value.attr.value
                    return None
        return None

    def _returned_classes(self, function: FunctionInfo, words: tuple[str, ...]) -> dict:
        """`FunctionSummary.returned_class`: per position (-1: the whole value), the project class
        every return builds there."""
        values = self._returns_of(function)
        if not values:
            return {}

        def built(expr: cst.BaseExpression) -> ClassSummary | None:
            if isinstance(expr, cst.Name):
                bindings = function.scope.lookup(expr.value)
                if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].value is None:
                    return None
                expr = bindings[0].value
            if not isinstance(expr, cst.Call):
                return None
            found = self.summary_of(expr.func, function.scope, words)
            return found if isinstance(found, ClassSummary) else None

        found: dict[int, ClassSummary] = {}
        whole = {built(v) for v in values}
        if len(whole) == 1 and None not in whole:
            found[-1] = whole.pop()
        tuples, length = self._uniform_tuples(function)
        for position in range(length):
            classes = {built(v.elements[position].value) for v in tuples}
            if len(classes) == 1 and None not in classes:
                found[position] = classes.pop()
        return found

    def _array_kind(self, function: FunctionInfo) -> str | None:
        """The library (`array_kinds`) of every value the function returns, when they agree."""
        values = self._returns_of(function)
        kinds = {self._kind_of(v, function) for v in values}
        return kinds.pop() if len(kinds) == 1 else None

    def _uniform_tuples(self, function: FunctionInfo) -> tuple[list[cst.Tuple], int]:
        """Every value the function returns, when each is a tuple of one length with no starred
        element, and that length; else ([], 0)."""
        values = self._returns_of(function)
        if not values or not all(isinstance(v, cst.Tuple) for v in values):
            return [], 0
        lengths = {len(v.elements) for v in values}
        if len(lengths) != 1 or any(isinstance(e, cst.StarredElement) for v in values for e in v.elements):
            return [], 0
        return values, lengths.pop()

    def _array_kinds_at(self, function: FunctionInfo) -> tuple[str | None, ...]:
        """The library of each element of the tuple every return gives (same length), else ()."""
        values, length = self._uniform_tuples(function)
        kinds = []
        for position in range(length):
            found = {self._kind_of(v.elements[position].value, function) for v in values}
            kinds.append(found.pop() if len(found) == 1 else None)
        return tuple(kinds) if any(kinds) else ()

    def _kind_of(self, expr: cst.BaseExpression, function: FunctionInfo) -> str | None:
        def follow(name: cst.Name, scope: Scope):
            bindings = scope.lookup(name.value)
            if len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
                return bindings[0].value
            return None
        found = array_kind(self.index, expr, function.scope, follow, self.summary_of)
        return found.kind if found is not None else None

    def _returned_keys(self, function: FunctionInfo) -> tuple[str, ...] | None:
        values = self._returns_of(function)
        if len(values) != 1 or not isinstance(values[0], cst.Dict):
            return None
        keys = []
        for element in values[0].elements:
            key = element.key if isinstance(element, cst.DictElement) else None
            if not isinstance(key, cst.SimpleString) or not isinstance(key.evaluated_value, str):
                return None  # `**other` or a computed key: not all of what it holds is known
            keys.append(key.evaluated_value)
        return tuple(keys)

    def _returns_reduction(self, function: FunctionInfo) -> str | None:
        values = self._returns_of(function)
        kinds = {self.reduction_of(v, function.scope) for v in values}
        return kinds.pop() if len(kinds) == 1 else None

    def reduction_of(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> str | None:
        """How `expr` is reduced over the batch: "mean", "sum", or None (not told, or chosen by a
        value this function does not fix, as a `reduction` parameter passed on)."""
        if depth > 4:
            return None
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            return self.reduction_of(bindings[0].value, scope, depth + 1) if len(bindings) == 1 and \
                bindings[0].kind == "assign" and bindings[0].value is not None else None
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
            return self.reduction_of(expr.expression, scope, depth + 1)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)):
            left = self.reduction_of(expr.left, scope, depth + 1)
            return left if left == self.reduction_of(expr.right, scope, depth + 1) else None
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
            left, right = (self.reduction_of(side, scope, depth + 1) for side in (expr.left, expr.right))
            constant = (cst.Integer, cst.Float)
            if left is not None and isinstance(expr.right, constant):
                return left
            if right is not None and isinstance(expr.left, constant):
                return right
            return None
        if not isinstance(expr, cst.Call):
            return None
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("mean", "sum") and not expr.args:
            return func.attr.value
        name = self.index.resolve(func, scope) or ""
        if name in ("torch.mean", "torch.sum") and len(expr.args) == 1:
            return name.rsplit(".", 1)[-1]
        if name.startswith("torch.nn.functional.") and name.rsplit(".", 1)[-1] in _MEAN_REDUCED_LOSSES:
            reduction = keyword_value(expr, "reduction")
            if reduction is None:
                return "mean"
            if isinstance(reduction, cst.SimpleString) and reduction.evaluated_value in ("mean", "sum"):
                return reduction.evaluated_value
        return None

    def _returns_mean(self, function: FunctionInfo) -> bool:
        values = self._returns_of(function)
        return bool(values) and all(self.is_mean(v, function.scope) for v in values)

    def is_mean(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
        """`x.mean()` (over everything), `torch.mean(x)`, `F.mse_loss(a, b)`, `sqrt` of one, and
        `.item()`/`float()` of one."""
        if depth > 4:
            return False
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            return len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None \
                and self.is_mean(bindings[0].value, scope, depth + 1)
        if not isinstance(expr, cst.Call):
            return False
        func = expr.func
        if isinstance(func, cst.Attribute):
            if func.attr.value == "mean":
                return not expr.args
            if func.attr.value in ("item", "sqrt", "detach", "cpu") and not expr.args:
                return self.is_mean(func.value, scope, depth + 1)
        name = self.index.resolve(func, scope) or ""
        args = positional_args(expr)
        if name in ("torch.mean", "numpy.mean") and len(expr.args) == 1:
            return True
        if name in ("math.sqrt", "torch.sqrt", "numpy.sqrt", "float") and len(args) == 1:
            return self.is_mean(args[0].value, scope, depth + 1)
        if name in ("torch.nn.functional.mse_loss", "torch.nn.functional.l1_loss") and \
                keyword_value(expr, "reduction") is None:
            return True
        return False

    # -- classes --------------------------------------------------------------------------------
    def klass(self, node: cst.ClassDef) -> ClassSummary:
        if node in self._classes:
            return self._classes[node] or ClassSummary(node.name.value)
        self._classes[node] = None  # a class whose base is itself (through a cycle)
        self._classes[node] = summary = self._klass(node)
        return summary

    def _klass(self, node: cst.ClassDef) -> ClassSummary:
        index = self.index
        scope = index.scope_of_node[node]
        infos = {f.name: f for f in index.functions if f.scope.parent is scope}
        bases = tuple(filter(None, (index.resolve(b.value, scope.parent or scope) for b in node.bases)))
        init_attrs: dict[str, str] = {}
        init = infos.get("__init__")
        if init is not None:
            params = set(_param_names(init))
            for attr, values in index.class_attributes.get(node.name.value, {}).items():
                for value in values:
                    root = value
                    while isinstance(root, cst.Call) and isinstance(root.func, cst.Attribute):
                        root = root.func.value  # `self.model = model.to(device)`
                    if isinstance(root, cst.Name) and root.value in params and index.function_at(value) is init:
                        init_attrs[attr] = root.value
        record_fields, positional_fields, stored_params = self._kept_fields(node, scope, bases, infos, init)
        grad_off = False
        enter = infos.get("__enter__")
        if enter is not None:
            grad_off = any(isinstance(n, cst.Call) and context_grad(index, n, enter.scope) == OFF
                           for n in self._own_nodes(enter))
        trains = any(isinstance(n, cst.Attribute) and n.attr.value in ("backward", "step", "zero_grad")
                     for n in walk(node.body))
        module_level = scope.parent is index.module_scope
        return ClassSummary(node.name.value, bases, self._class_role(node, scope, bases, infos), grad_off,
                            init_attrs, lambda name: self.function(infos[name]) if name in infos else None, trains,
                            (lambda: class_verdict(index, node.name.value)) if module_level else None,
                            self._sets_next_rate(node, infos), self._rate_clock(node, infos),
                            lambda: self._plain_class(node, scope), record_fields, positional_fields, stored_params,
                            (lambda: _frozen_on_init(init)) if init is not None else None,
                            (lambda: detection_targets(index, node.name.value)) if module_level else None,
                            (lambda call: self._frozen_parts(node, init, bases, call)) if init is not None else None)

    def _frozen_parts(self, node: cst.ClassDef, init: FunctionInfo, bases: tuple[str, ...],
                      call: cst.Call) -> cst.CSTNode | None:
        """`ClassSummary.frozen_by_construction` of a module class that freezes nothing itself: the
        statement adding a part, when `call` builds an instance every part of which is frozen. Its
        only base is `torch.nn.Module`; `__init__`, read with the literals `call` binds (defaults
        included: the branch of `if self.kind in ("vgg", "vgg16"):` those decide), adds to `self`
        only constructions of project classes frozen by their own construction, plain values
        (literals, the literal-bound parameters, tensors a torch factory makes) and what is read
        from parts already added (`self.net.n_slices`, `self.shift.cuda()`); nothing registers a
        parameter or a module otherwise (`nn.Parameter`, `add_module`, `setattr`, a method of its
        own called in `__init__`, `self` handed to a call)."""
        if bases != ("torch.nn.Module",) or any(isinstance(n, cst.Attribute) and n.attr.value in _REGISTERS
                                                for n in walk(node.body)):
            return None
        positional = [p.name.value for p in (*init.node.params.posonly_params, *init.node.params.params)][1:]
        params = init.node.params
        defaults = {p.name.value: p.default for p in (*params.posonly_params, *params.params, *params.kwonly_params)
                    if p.default is not None}
        bound = _bound_literals(call, positional, defaults)
        if bound is None:
            return None
        env = {name: value for name, value in bound.items()
               if all(b.kind == "param" for b in init.scope.bindings.get(name, ()))}
        parts: dict[str, bool] = {}  # self.<attr> -> it may hold a part (a frozen module)
        found: list[cst.CSTNode] = []
        ok = self._frozen_block(list(init.node.body.body) if isinstance(init.node.body, cst.IndentedBlock) else [],
                                init, env, parts, found)
        return found[0] if ok and found else None

    def _frozen_block(self, statements, init: FunctionInfo, env: dict, parts: dict, found: list) -> bool:
        for statement in statements:
            if isinstance(statement, cst.If):
                taken = _decide(statement.test, env)  # None: either branch may run, both are read
                orelse = statement.orelse
                branches = [statement.body] if taken is not False else []
                if taken is not True and orelse is not None:
                    branches.append(orelse if isinstance(orelse, cst.If) else orelse.body)
                for branch in branches:
                    if isinstance(branch, cst.If):
                        inner = [branch]
                    elif isinstance(branch, cst.IndentedBlock):
                        inner = list(branch.body)
                    else:
                        return False  # `if x: a = 1` on one line: not read
                    if not self._frozen_block(inner, init, dict(env), parts, found):
                        return False
                continue
            if not isinstance(statement, cst.SimpleStatementLine):
                return False  # a loop, `with`, `try`: not read
            for small in statement.body:
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    if not self._harmless_call(small.value, init, parts):
                        return False
                    continue
                if isinstance(small, (cst.Pass,)) or isinstance(small, cst.Expr) and \
                        isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
                    continue
                if not isinstance(small, cst.Assign) or len(small.targets) != 1:
                    return False
                target = small.targets[0].target
                if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                        and target.value.value == "self"):
                    if isinstance(target, cst.Name) and target.value not in ("self",):
                        env.pop(target.value, None)
                        if self._adds_part(small.value, init, env, parts, found) is None:
                            return False
                        continue
                    return False
                part = self._adds_part(small.value, init, env, parts, found)
                if part is None:
                    return False
                parts[target.attr.value] = part
                literal = literal_value(small.value)
                if literal is None and isinstance(small.value, cst.Name):
                    literal = env.get(small.value.value)
                env["self." + target.attr.value] = literal
                if literal is None:
                    env.pop("self." + target.attr.value)
        return True

    def _adds_part(self, value: cst.BaseExpression, init: FunctionInfo, env: dict, parts: dict,
                   found: list) -> bool | None:
        """What `self.<attr> = value` adds: True a frozen module, False a plain value, None anything
        that may hold a trainable parameter."""
        if literal_value(value) is not None or isinstance(value, (cst.Integer, cst.Float)):
            return False
        if isinstance(value, cst.Name):
            return False if value.value in env else None
        root = value
        while isinstance(root, (cst.Attribute, cst.Call, cst.Subscript)) and not (
                isinstance(root, cst.Attribute) and isinstance(root.value, cst.Name) and root.value.value == "self"):
            if isinstance(root, cst.Call):
                if not isinstance(root.func, cst.Attribute):
                    break
                root = root.func.value
            else:
                root = root.value
        if isinstance(root, cst.Attribute) and isinstance(root.value, cst.Name) and root.value.value == "self" \
                and root.attr.value in parts and not any(isinstance(n, cst.Name) and n.value == "self"
                                                         for n in walk(value) if n is not root.value):
            return parts[root.attr.value]  # read from a part already added
        if isinstance(root, cst.Name) and root.value == "self":
            return None
        if _plain_tensor(value, init.scope, self.index.resolve):
            return False
        if isinstance(value, cst.Call) and isinstance(value.func, (cst.Name, cst.Attribute)):
            summary = self.summary_of(value.func, init.scope, ("requires_grad",))
            if isinstance(summary, ClassSummary):
                frozen = summary.frozen_by_construction(value)
                if frozen is not None:
                    found.append(frozen)
                    return True
        return None

    def _harmless_call(self, call: cst.Call, init: FunctionInfo, parts: dict) -> bool:
        """A call in `__init__` that adds no part: `super().__init__()`, a device move or mode switch
        of a part already added (`self.net.cuda()`), a call that is handed neither `self` nor a part
        (`print(...)`)."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "__init__" and isinstance(func.value, cst.Call) \
                and isinstance(func.value.func, cst.Name) and func.value.func.value == "super":
            return True
        if isinstance(func, cst.Attribute) and func.attr.value in _PART_MOVES and \
                isinstance(func.value, cst.Attribute) and isinstance(func.value.value, cst.Name) and \
                func.value.value.value == "self" and func.value.attr.value in parts and not call.args:
            return True
        return not any(isinstance(n, cst.Name) and n.value == "self" for n in walk(call))

    def _plain_class(self, node: cst.ClassDef, scope: Scope) -> bool:
        """`ClassSummary.plain`: each base is `object` or a project class (this file's or an imported
        one's) that is plain itself, and what its own `eval()`/`train()` switch is plain too: only
        `self.<attr>`s that every assignment builds with a plain project class (a wrapper whose
        `eval()` calls `self.net.eval()` on a torch module it holds is no plain class)."""
        for base in node.bases:
            if isinstance(base.value, cst.Name) and base.value.value == "object":
                continue
            summary = self.summary_of(base.value, scope.parent or scope)
            if not (isinstance(summary, ClassSummary) and summary.plain):
                return False
        index = self.index
        attributes = index.class_attributes.get(node.name.value, {})
        for info in index.functions:
            if info.scope.parent is not scope or info.name not in ("eval", "train"):
                continue
            for call in self._own_nodes(info):
                if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                        and call.func.attr.value in ("eval", "train")):
                    continue
                receiver = call.func.value
                if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name) and \
                        receiver.func.value == "super":
                    continue  # a plain base's own method, checked with the base
                if not (isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name)
                        and receiver.value.value == "self"):
                    return False
                values = attributes.get(receiver.attr.value, [])
                if not values:
                    return False
                for value in values:
                    built = self.summary_of(value.func, scope.parent or scope) if isinstance(value, cst.Call) else None
                    if not (isinstance(built, ClassSummary) and built.plain):
                        return False
        return True

    def _kept_fields(self, node: cst.ClassDef, scope: Scope, bases: tuple[str, ...], infos, init):
        """`ClassSummary.record_fields`, `.positional_fields`, `.stored_params`: the attributes an
        instance holds as its construction gave them. An attribute any method assigns (a
        `__post_init__` that converts it, an `update()`) is not one."""
        assigned: dict[str, int] = {}
        for part in walk(node.body):
            targets = [t.target for t in part.targets] if isinstance(part, cst.Assign) else \
                [part.target] if isinstance(part, (cst.AugAssign, cst.AnnAssign)) else []
            for target in targets:
                for element in walk(target):
                    if isinstance(element, cst.Attribute) and isinstance(element.value, cst.Name) \
                            and element.value.value == "self":
                        assigned[element.attr.value] = assigned.get(element.attr.value, 0) + 1
        record = any(_is_dataclass_decorator(self.index, d.decorator, scope.parent or scope) for d in node.decorators)
        named_tuple = any(b.rsplit(".", 1)[-1] == "NamedTuple" for b in bases)
        if (record or named_tuple) and init is None:
            declared = []
            for statement in node.body.body:
                if not isinstance(statement, cst.SimpleStatementLine):
                    continue
                for small in statement.body:
                    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) \
                            and not any(isinstance(n, cst.Name) and n.value in ("ClassVar", "InitVar")
                                        for n in walk(small.annotation)):
                        declared.append(small.target.value)
            fields = tuple(f for f in declared if f not in assigned)
            positional = fields == tuple(declared) and (named_tuple or not node.bases)
            return fields, positional, {}
        stored: dict[str, str] = {}
        if init is not None:
            params = set(_param_names(init))
            for attr, values in self.index.class_attributes.get(node.name.value, {}).items():
                if assigned.get(attr) == 1 and len(values) == 1 and isinstance(values[0], cst.Name) and values[0].value in params \
                        and self.index.function_at(values[0]) is init and not self._rebound_in(init, values[0].value):
                    stored[attr] = values[0].value
        return None, False, stored

    def _rebound_in(self, function: FunctionInfo, name: str) -> bool:
        """`name` is assigned (not only taken as a parameter) somewhere in `function`."""
        return any(b.kind != "param" for b in function.scope.lookup(name))

    def _rate_clock(self, node: cst.ClassDef, infos) -> str | None:
        """`ClassSummary.rate_clock`: what `step()` computes the rate it writes from."""
        if any(not (isinstance(b.value, cst.Name) and b.value.value == "object") for b in node.bases):
            return None  # it may inherit torch's convention (through a project base too)
        step = infos.get("step")
        if step is None:
            return None
        own = self._own_nodes(step)
        if not any(_assigns_lr(n) for n in own):
            return None
        if any(_advances_self_counter(n) for n in own):
            return COUNTER
        params = step.node.params
        after_self = [*params.posonly_params, *params.params][1:] + list(params.kwonly_params)
        if any(p.default is None for p in after_self):
            return POSITION  # `step(self, epoch, it)`: each call says where the schedule is
        return None

    def _sets_next_rate(self, node: cst.ClassDef, infos) -> bool:
        """`step()` writes the rate for the coming update and construction writes none (see
        `ClassSummary.sets_next_rate`); a class with a base may inherit torch's convention."""
        if any(not (isinstance(b.value, cst.Name) and b.value.value == "object") for b in node.bases):
            return False
        step, init = infos.get("step"), infos.get("__init__")
        if step is None or not any(_assigns_lr(n) for n in self._own_nodes(step)):
            return False
        if init is None:
            return True
        return not any(_assigns_lr(n) or (isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                                          and n.func.attr.value == "step" and _is_self_or_super(n.func.value))
                       for n in self._own_nodes(init))

    def _class_role(self, node: cst.ClassDef, scope: Scope, bases: tuple[str, ...], infos) -> str | None:
        for base in bases:
            last = base.rsplit(".", 1)[-1]
            if base.startswith("torch.optim.lr_scheduler") or last in _SCHEDULER_BASES:
                return SCHEDULER
            if last in _OPTIMIZER_BASES and base.startswith(("torch.", "Optimizer")):
                return OPTIMIZER
            if last in _MODEL_BASES:
                return MODEL
        step = infos.get("step")
        if step is not None:
            inner = {self.roles.of(part.func.value, step.scope) or OPTIMIZER
                     for part in self._own_nodes(step)
                     if isinstance(part, cst.Call) and isinstance(part.func, cst.Attribute)
                     and part.func.attr.value == "step" and not _is_self_or_super(part.func.value)}
            if OPTIMIZER in inner:
                return OPTIMIZER  # a wrapper that steps an optimizer is one, learning rates or not (NoamOpt)
            if SCHEDULER in inner or any(_assigns_lr(part) for part in self._own_nodes(step)):
                return SCHEDULER  # it only sets learning rates, or steps an inner scheduler
        for base in node.bases:  # a project base class, in this file or imported
            summary = self.summary_of(base.value, scope.parent or scope, ROLE_WORDS)
            if isinstance(summary, ClassSummary) and summary.role:
                return summary.role
        return OTHER


_ITERATION_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "zip", "islice", "Prefetcher"})


def trained_params(function: FunctionInfo, params, own: list[cst.CSTNode]) -> tuple[str, ...]:
    """The parameters a `for` loop of `function` iterates (through `enumerate`/`tqdm`/`zip`)
    whose body calls `backward` and `step`: what a training loop there goes through."""
    found = []
    for node in own:
        if type(node) is not cst.For:
            continue
        methods = {c.func.attr.value for c in walk(node.body)
                   if isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute)}
        if not {"backward", "step"} <= methods:
            continue
        for name in iterated_names(node.iter):
            if name in params and name not in found:
                found.append(name)
    return tuple(found)


def iterated_names(expr: cst.BaseExpression) -> list[str]:
    """The names a loop's iterable goes through: `loader` of `enumerate(tqdm(loader))`, both of `zip(a, b)`."""
    if isinstance(expr, cst.Name):
        return [expr.value]
    if isinstance(expr, cst.Call):
        func = expr.func.attr.value if isinstance(expr.func, cst.Attribute) else \
            expr.func.value if isinstance(expr.func, cst.Name) else None
        if func in _ITERATION_WRAPPERS:
            return [name for arg in positional_args(expr) for name in iterated_names(arg.value)]
    return []


def constant_text(expr: cst.BaseExpression | None) -> str | None:
    """A literal argument as text to compare (`"val"` -> `val`, `True` -> `True`), else None."""
    if isinstance(expr, cst.SimpleString) and isinstance(expr.evaluated_value, str):
        return expr.evaluated_value
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return expr.value
    if isinstance(expr, cst.Integer):
        return expr.value
    return None


def _argument(call: cst.Call, params: tuple[str, ...], param: str) -> cst.BaseExpression | None:
    value = keyword_value(call, param)
    if value is not None:
        return value
    positional = positional_args(call)
    if param in params and params.index(param) < len(positional):
        return positional[params.index(param)].value
    return None


def equal_batches_for(summary: FunctionSummary, call: cst.Call) -> bool:
    """A call of a loader factory makes batches of one size: unconditionally, or for the constant
    it passes (or leaves at the default) for the parameter `drop_last` depends on."""
    if summary.equal_batches:
        return True
    if summary.equal_batches_by is None:
        return False
    param, cases, otherwise, default = summary.equal_batches_by
    argument = _argument(call, summary.params, param)
    text = constant_text(argument) if argument is not None else default
    if text is None:
        return False
    return dict(cases).get(text, bool(otherwise)) if otherwise is not None or text in dict(cases) else False


def _drop_last_by(function: FunctionInfo, drop: cst.BaseExpression | None) -> tuple | None:
    """How `drop_last=<drop>` in `function` depends on one parameter (`FunctionSummary.equal_batches_by`)."""
    if not isinstance(drop, cst.Name):
        return None
    params = {p.name.value: p for p in function.node.params.params}
    bindings = function.scope.lookup(drop.value)
    if len(bindings) == 1 and bindings[0].kind == "param" and drop.value in params:
        default = params[drop.value].default
        return (drop.value, (("True", True), ("False", False)), None,
                constant_text(default) if default is not None else None)
    if not bindings or any(b.kind != "assign" or not isinstance(b.value, cst.Name)
                           or b.value.value not in ("True", "False") for b in bindings):
        return None
    param, cases, otherwise = None, {}, None
    for binding in bindings:
        equal = binding.value.value == "True"
        tests, case = _branch_of(function, binding.node)
        if tests is None:
            return None
        for name, _ in tests:
            if param not in (None, name):
                return None
            param = name
        if case is None:
            otherwise = equal if otherwise in (None, equal) else "mixed"
        else:
            cases.setdefault(case, equal)
    if param is None or param not in params or otherwise == "mixed":
        return None
    return (param, tuple(sorted(cases.items())), otherwise, None)


def _branch_of(function: FunctionInfo, statement: cst.CSTNode):
    """The `if p == "a": ... elif p == "b": ... else: ...` branch a statement of `function` sits in:
    ([(p, constant) of the chain's tests], the constant of its branch or None for the `else`);
    (None, None) when it sits anywhere else (another condition, a loop, no chain)."""
    tests, case = [], None
    child: cst.CSTNode = statement
    for node in _path_up(function, statement):
        if isinstance(node, cst.If):
            test = _equality_test(node.test)
            if test is None:
                return None, None
            tests.append(test)
            if node.body is child:
                if case is not None or len(tests) > 1:
                    return None, None  # a condition inside another branch
                case = test[1]
            elif node.orelse is not child:
                return None, None
        elif not isinstance(node, (cst.IndentedBlock, cst.Else, cst.SimpleStatementLine)):
            return None, None
        child = node
    if not tests:
        return None, None
    if case is None and not isinstance(_first_else(function, statement), cst.Else):
        return None, None
    return tests, case


def _path_up(function: FunctionInfo, statement: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes from `statement`'s parent up to (not including) the function's body."""
    parents: dict[int, cst.CSTNode] = {}
    for node in walk(function.node.body):
        for child in iter_children(node):
            parents[id(child)] = node
    path, node = [], parents.get(id(statement))
    while node is not None and node is not function.node.body:
        path.append(node)
        node = parents.get(id(node))
    return path


def _first_else(function: FunctionInfo, statement: cst.CSTNode) -> cst.CSTNode | None:
    for node in _path_up(function, statement):
        if isinstance(node, (cst.Else, cst.If)):
            return node
    return None


def _equality_test(test: cst.BaseExpression) -> tuple[str, str] | None:
    """`p == "a"` (or `"a" == p`) -> (p, "a")."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal)):
        return None
    left, right = test.left, test.comparisons[0].comparator
    if isinstance(left, cst.Name) and constant_text(right) is not None:
        return left.value, constant_text(right)
    if isinstance(right, cst.Name) and constant_text(left) is not None:
        return right.value, constant_text(left)
    return None


_MOVES = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16"})


def _train_only(index: FileIndex, node: cst.CSTNode, root: cst.CSTNode) -> bool:
    """`node` runs only in train mode: under `if self.training:` (or the `else` of `if not
    self.training:`, or an `and` holding `self.training`) between `root` and it."""
    child = node
    for ancestor in index.ancestors(node):
        if ancestor is root:
            return False
        if isinstance(ancestor, cst.If) and child in (ancestor.body, ancestor.orelse):
            test, negated = ancestor.test, False
            if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                test, negated = test.expression, True
            terms = [test] if not isinstance(test, cst.BooleanOperation) or negated or \
                not isinstance(test.operator, cst.And) else [test.left, test.right]
            if any(_is_self_training(t) for t in terms) and (child is ancestor.body) != negated:
                return True
        child = ancestor
    return False


def _is_self_training(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and expr.attr.value == "training" and \
        isinstance(expr.value, cst.Name) and expr.value.value == "self"


def _unmoved(expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """`Net(...).to(device)` -> `Net(...)`: a module moved or cast is the same module."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _MOVES:
        expr = expr.func.value
    return expr


def equal_batch_arguments(call: cst.Call) -> bool:
    """A `DataLoader(...)` call written with `drop_last=True` or `batch_size=1`, or leaving the batch
    size at its default of 1 (no `batch_size`, no `batch_sampler`, no `*args`/`**kwargs` that could
    pass one, no `sampler` that could hand over several indices at once): equal batches."""
    drop = keyword_value(call, "drop_last")
    size = keyword_value(call, "batch_size")
    if size is None and len(positional_args(call)) >= 2:
        size = positional_args(call)[1].value
    if isinstance(drop, cst.Name) and drop.value == "True":
        return True
    if size is None:
        return not any(arg.star for arg in call.args) and keyword_value(call, "batch_sampler") is None and \
            keyword_value(call, "sampler") is None and len(positional_args(call)) < 3
    return isinstance(size, cst.Integer) and size.value == "1"


def _is_self_or_super(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Call):
        expr = expr.func
    return isinstance(expr, cst.Name) and expr.value in ("self", "super")


def _advances_self_counter(node: cst.CSTNode) -> bool:
    """`self.n += 1` / `self.n = self.n + 1`."""
    if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign):
        return isinstance(node.target, cst.Attribute) and _is_self_or_super(node.target.value)
    if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, cst.BinaryOperation) \
            and isinstance(node.value.operator, cst.Add):
        target = node.targets[0].target
        return isinstance(target, cst.Attribute) and _is_self_or_super(target.value) and \
            dotted_name(node.value.left) == dotted_name(target)
    return False


def _assigns_lr(node: cst.CSTNode) -> bool:
    """`group["lr"] = ...` / `g['lr'] *= ...` (or the weight decay: a schedule of it)."""
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, cst.AugAssign):
        targets = [node.target]
    else:
        return False
    return any(isinstance(t, cst.Subscript) and len(t.slice) == 1 and isinstance(t.slice[0].slice, cst.Index)
               and _string(t.slice[0].slice.value) in ("lr", "weight_decay") for t in targets)


# calls that write (the first positional argument or `obj=`) to a file: (qualname, position of the value)
_WRITERS = {"json.dump": 0, "yaml.dump": 0, "yaml.safe_dump": 0, "pickle.dump": 0, "joblib.dump": 0,
            "torch.save": 0, "torch.serialization.save": 0, "numpy.save": 1, "numpy.savez": 1,
            "numpy.savetxt": 1, "numpy.savez_compressed": 1}
PERSIST_WORDS = ("write", "dump", "save")


def written_values(index: FileIndex, call: cst.Call, scope: Scope) -> list[cst.BaseExpression]:
    """The arguments whose value `call` writes to a file: `json.dump(state, f)`, `np.save(path,
    a)`, `f.write(text)` on a file opened by `open(...)` (`with open(...) as f`, `f = open(...)`),
    or the arguments a project function it runs writes (its summary's `persists`)."""
    func = call.func
    name = index.resolve(func, scope) or ""
    positional = positional_args(call)
    if name in _WRITERS:
        at = _WRITERS[name]
        value = positional[at].value if len(positional) > at else keyword_value(call, "obj") or keyword_value(call, "arr")
        return [value] if value is not None else []
    if isinstance(func, cst.Attribute) and func.attr.value in ("write", "writelines") and positional:
        handle = func.value
        if isinstance(handle, cst.Name) and any(
                b.kind in ("with", "assign") and isinstance(b.value, cst.Call)
                and (index.resolve(b.value.func, scope) or "") in ("open", "io.open", "builtins.open")
                for b in scope.lookup(handle.value)):
            return [positional[0].value]
        return []
    summary = index.summary_of(func, scope, PERSIST_WORDS)
    persists = getattr(summary, "persists", ())
    if not persists:
        return []
    params = summary.params
    return [a.value for i, a in enumerate(positional) if i < len(params) and params[i] in persists] + \
        [a.value for a in call.args if a.keyword is not None and a.keyword.value in persists]


def _forwarded_position(function: FunctionInfo, call: cst.Call, position: int) -> str | None:
    """`torch.save(*args, **kwargs)` in `def save_on_master(*args, **kwargs)`: the save's argument
    at `position` is the caller's positional argument at `position` past the named ones, written
    `*N` (a parameter name cannot start with `*`)."""
    star = function.node.params.star_arg
    if not call.args or call.args[0].star != "*" or not isinstance(star, cst.Param) \
            or not isinstance(call.args[0].value, cst.Name) or call.args[0].value.value != star.name.value:
        return None
    named = len(function.node.params.posonly_params) + len(function.node.params.params)
    if function.class_name is not None and named:
        named -= 1  # self
    return f"*{named + position}"


_PARTS_IN_PROGRESS: set[str] = set()
# what registers a parameter or a module other than `self.<attr> = <module>`
_REGISTERS = frozenset({"Parameter", "register_parameter", "register_module", "add_module", "ParameterList",
                        "ParameterDict", "requires_grad_", "requires_grad"})
# calls on a part that move it or switch its mode, adding nothing
_PART_MOVES = frozenset({"cuda", "cpu", "to", "eval", "float", "half", "double", "bfloat16"})
_TENSOR_FACTORIES = frozenset({"tensor", "Tensor", "FloatTensor", "as_tensor", "from_numpy", "zeros", "ones", "empty",
                               "full", "rand", "randn", "randint", "arange", "linspace", "eye"})
_TENSOR_VIEWS = frozenset({"to", "cuda", "cpu", "half", "float", "double", "view", "reshape", "unsqueeze", "squeeze",
                           "expand", "contiguous", "permute", "transpose"})


def _plain_tensor(expr: cst.BaseExpression, scope: Scope, resolve) -> bool:
    """A tensor a torch factory makes (`torch.Tensor([0.5, 0.4]).view(1, 2, 1, 1)`), viewed or
    moved at most, not asked to record: kept on a module, it is no parameter."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _TENSOR_VIEWS \
            and isinstance(expr.func.value, cst.Call):
        expr = expr.func.value
    if not isinstance(expr, cst.Call):
        return False
    name = resolve(expr.func, scope) or ""
    requires = keyword_value(expr, "requires_grad")
    return name.startswith("torch.") and name.count(".") == 1 and name.rsplit(".", 1)[-1] in _TENSOR_FACTORIES \
        and (requires is None or is_false(requires))


def _bound_literals(call: cst.Call, positional: list[str], defaults: dict) -> dict | None:
    """The literal each parameter is bound to by `call` (passed, or its default); None when a
    `*args`/`**kwargs` may bind any. A parameter bound to anything else is left out."""
    if any(arg.star for arg in call.args):
        return None
    values = dict(defaults)
    values.update(zip(positional, (arg.value for arg in positional_args(call))))
    values.update((arg.keyword.value, arg.value) for arg in call.args if arg.keyword is not None)
    found = {}
    for name, value in values.items():
        literal = literal_value(value)
        if literal is not None:
            found[name] = literal
    return found


def _decide(test: cst.BaseExpression, env: dict) -> bool | None:
    """What a test of `__init__` evaluates to given the literals its names (and `self.<attr>`s
    stored from them) hold: `==`/`!=`/`in`/`not in` a literal or a list of literals, `not`,
    `and`/`or`; None when it cannot be told."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _decide(test.expression, env)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = _decide(test.left, env), _decide(test.right, env)
        if isinstance(test.operator, cst.And):
            return False if False in (left, right) else True if (left, right) == (True, True) else None
        return True if True in (left, right) else False if (left, right) == (False, False) else None
    key = dotted_name(test) if isinstance(test, (cst.Name, cst.Attribute)) else None
    if key is not None and key in env:
        value = env[key]
        return None if not isinstance(value, (bool, str)) else bool(value)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        key = dotted_name(test.left) if isinstance(test.left, (cst.Name, cst.Attribute)) else None
        if key is None or key not in env or not isinstance(env[key], (bool, str)):
            return None
        value, target = env[key], test.comparisons[0]
        if isinstance(target.operator, (cst.In, cst.NotIn)):
            if not isinstance(target.comparator, (cst.List, cst.Tuple, cst.Set)):
                return None
            options = [literal_value(e.value) for e in target.comparator.elements]
            if any(o is None for o in options):
                return None
            inside = any(type(o) is type(value) and o == value for o in options)
            return inside if isinstance(target.operator, cst.In) else not inside
        other = literal_value(target.comparator)
        if other is None or not isinstance(target.operator, (cst.Equal, cst.NotEqual)):
            return None
        same = type(other) is type(value) and other == value
        return same if isinstance(target.operator, cst.Equal) else not same
    return None


def _frozen_on_init(init: FunctionInfo) -> tuple | None:
    """`ClassSummary.frozen_by_construction`'s fact of an `__init__`: (param, position, node) when a
    statement of its body that nothing skips (no `if` around it, no earlier `return`) sets
    `requires_grad` of every parameter of `self` to False, or to a parameter of `__init__` whose
    default is False and that the body never rebinds, and no later statement adds a part to `self`
    (an assignment to `self.<attr>`, `add_module`, `register_parameter`) or sets `requires_grad`."""
    statements = list(init.node.body.body) if isinstance(init.node.body, cst.IndentedBlock) else []
    params = init.node.params
    names = [p for p in (*params.posonly_params, *params.params)]
    defaults = {p.name.value: p.default for p in (*names, *params.kwonly_params)}
    positions = {p.name.value: i - 1 for i, p in enumerate(names)}  # after `self`
    found = None
    for i, statement in enumerate(statements):
        if any(type(n) is cst.Return for n in walk(statement)):
            return None  # a path that leaves before the rest of the body
        flag = _freezes_self(statement)
        if flag is None and isinstance(statement, cst.If) and statement.orelse is None and \
                isinstance(statement.test, cst.UnaryOperation) and isinstance(statement.test.operator, cst.Not) and \
                isinstance(statement.test.expression, cst.Name) and isinstance(statement.body, cst.IndentedBlock) \
                and len(statement.body.body) == 1 and is_false(_freezes_self(statement.body.body[0]) or cst.Name("x")):
            flag = statement.test.expression  # `if not requires_grad: <freeze>`: frozen when the flag is False
        if flag is not None:
            found = (i, flag)
    if found is None:
        return None
    i, flag = found
    for later in statements[i + 1:]:
        for n in walk(later):
            if type(n) in (cst.Assign, cst.AnnAssign, cst.AugAssign):
                targets = [t.target for t in n.targets] if type(n) is cst.Assign else [n.target]
                for t in targets:
                    for part in walk(t):
                        if isinstance(part, cst.Attribute) and (part.attr.value == "requires_grad" or (
                                isinstance(part.value, cst.Name) and part.value.value == "self")):
                            return None
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in (
                    "add_module", "register_module", "register_parameter", "requires_grad_", "setattr"):
                return None
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "setattr":
                return None
    if is_false(flag):
        return (None, 0, statements[i])
    if not isinstance(flag, cst.Name) or flag.value not in defaults or not is_false(defaults[flag.value]):
        return None
    rebound = any(type(n) in (cst.Assign, cst.AugAssign, cst.AnnAssign) and any(
        isinstance(t, cst.Name) and t.value == flag.value
        for t in ([x.target for x in n.targets] if type(n) is cst.Assign else [n.target]))
        for n in walk(init.node.body))
    if rebound:
        return None
    if flag.value not in positions:  # keyword-only
        return (flag.value, 1 << 20, statements[i])
    return (flag.value, positions[flag.value], statements[i])


def _freezes_self(statement: cst.CSTNode) -> cst.BaseExpression | None:
    """The value a statement sets `requires_grad` of every parameter of `self` to: `for p in
    self.parameters(): p.requires_grad = v` (or `p.requires_grad_(v)`, `named_parameters()`), the
    loop's body that one statement; `self.requires_grad_(v)`. None otherwise."""
    if isinstance(statement, cst.For):
        it = statement.iter
        if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and isinstance(it.func.value, cst.Name)
                and it.func.value.value == "self" and it.func.attr.value in ("parameters", "named_parameters")
                and not it.args) or statement.orelse is not None:
            return None
        target = statement.target
        if it.func.attr.value == "named_parameters":
            if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
                return None
            target = target.elements[1].value
        if not isinstance(target, cst.Name) or not isinstance(statement.body, cst.IndentedBlock):
            return None
        body = statement.body.body
        if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
            return None
        return _sets_requires_grad(body[0].body[0], target.value)
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        return _sets_requires_grad(statement.body[0], "self")
    return None


def _sets_requires_grad(node: cst.CSTNode, name: str) -> cst.BaseExpression | None:
    """The value `name.requires_grad = v` / `name.requires_grad_(v)` sets (None when it is not one)."""
    if isinstance(node, cst.Expr):
        node = node.value
    if isinstance(node, cst.Assign) and len(node.targets) == 1:
        t = node.targets[0].target
        if isinstance(t, cst.Attribute) and t.attr.value == "requires_grad" and isinstance(t.value, cst.Name) \
                and t.value.value == name:
            return node.value
        return None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "requires_grad_" \
            and isinstance(node.func.value, cst.Name) and node.func.value.value == name:
        args = [a for a in node.args if not a.star]
        if len(args) != 1 or len(node.args) != 1:
            return None  # `requires_grad_()`: True
        return args[0].value
    return None


def _param_names(function: FunctionInfo) -> list[str]:
    params = function.node.params
    return [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]


def _target_name(expr: cst.BaseExpression, params: set[str]) -> str | None:
    """`model` for a parameter, `self.model` for an attribute of self; None for anything else."""
    while isinstance(expr, cst.Attribute) and expr.attr.value in ("module", "_orig_mod"):
        expr = expr.value
    if isinstance(expr, cst.Name) and expr.value in params and expr.value not in ("self", "cls"):
        return expr.value
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return f"self.{expr.attr.value}"
    return None


def _mode_of(call: cst.Call) -> str:
    if call.func.attr.value == "eval":
        return "eval"
    args = positional_args(call)
    value = args[0].value if args else keyword_value(call, "mode")
    if value is None or (isinstance(value, cst.Name) and value.value == "True"):
        return "train"
    if isinstance(value, cst.Name) and value.value == "False":
        return "eval"
    return "restore"


def _string(expr: cst.CSTNode | None) -> str | None:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


# what `FunctionSummary.run_only` lets a function do with a model: run it, switch its mode, move it,
# read its state or its parameters' values (not their flags: `parameters()` is not among them)
_RUN_ONLY_METHODS = frozenset({"forward", "eval", "train", "to", "cuda", "cpu", "float", "half", "double",
                               "bfloat16", "state_dict", "named_buffers", "buffers"})
_INSPECTING_BUILTINS = frozenset({"isinstance", "type", "len", "id", "repr", "str", "print", "hasattr"})
# calls that only look at or convert a value they are handed, and keep nothing of it
_INSPECTING_CALLS = _INSPECTING_BUILTINS | frozenset({"int", "float", "bool", "torch.is_tensor", "numpy.isscalar"})


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr) and isinstance(statement.body[0].value, cst.SimpleString))


def instance_class(index: FileIndex, expr: cst.BaseExpression, scope: Scope,
                   words: tuple[str, ...] = (), depth: int = 0) -> ClassSummary | None:
    """The project class that built the object `expr` holds (`sched = WarmupCosine(opt, ...)`,
    `self.sched = ...`), when every binding says the same one. A `None` binding (`sched = None`
    before `if args.sched: sched = Cycle(...)`) holds no object to call; a parameter holds what
    every call of its function in the file passes for it."""
    values: list[cst.BaseExpression] = []
    if isinstance(expr, cst.Name):
        bindings = scope.lookup(expr.value)
        if len(bindings) == 1 and bindings[0].kind == "param" and depth < 3:
            return _parameter_class(index, expr.value, bindings[0], words, depth)
        if any(b.kind != "assign" for b in bindings):
            return None
        unpacked = [b for b in bindings if b.value is None]
        values = [b.value for b in bindings if b.value is not None
                  and not (isinstance(b.value, cst.Name) and b.value.value == "None")]
        if unpacked:  # `opt, sched = init_opt(...)` (beside `sched = None` on another path)
            found = _unpacked_class(index, expr.value, unpacked, words)
            if found is None or any(_built_class(index, v, words) is not found for v in values):
                return None
            return found
    elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        values = index.self_attribute_values(expr.attr.value, scope)
    found: ClassSummary | None = None
    for value in values:
        built = _built_class(index, value, words)
        if built is None or (found is not None and built is not found):
            return None
        found = built
    return found


def called_method(index: FileIndex, func: cst.BaseExpression, scope: Scope,
                  words: tuple[str, ...] = ()) -> FunctionSummary | None:
    """The project method `obj.<name>(...)` runs: `obj` holds an instance of one of the project
    classes its bindings build (through `.cuda()`/`.to(...)`, and for a parameter what the file's
    callers pass), and exactly one of them defines `<name>` with a plain `def` (on the others the
    call cannot run that method: it raises, whatever the name says)."""
    if not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Name) or func.value.value == "self":
        return None
    classes = _candidate_classes(index, func.value, scope, words, 0)
    if not classes:
        return None
    defining = {id(c): c.method(func.attr.value) for c in classes}
    found = [m for m in defining.values() if m is not None]
    if len(found) != 1 or found[0].is_property:
        return None
    return found[0]


def _candidate_classes(index: FileIndex, name: cst.Name, scope: Scope, words: tuple[str, ...],
                       depth: int) -> list[ClassSummary] | None:
    """Every project class a binding of `name` may build (a parameter: what each same-file call
    passes); None when one binding is anything else."""
    bindings = scope.lookup(name.value)
    if not bindings or depth > 3:
        return None
    found: list[ClassSummary] = []
    if len(bindings) == 1 and bindings[0].kind == "param":
        function = index.function_at(bindings[0].node)
        sites = index.callers(function) if function is not None else []
        if not sites:
            return None
        for site in sites:
            argument = index.argument_for(site.node, function, name.value)
            more = _candidate_classes(index, argument, site.scope, words, depth + 1) \
                if isinstance(argument, cst.Name) else None
            if more is None:
                return None
            found += [c for c in more if all(c is not f for f in found)]
        return found
    for binding in bindings:
        value = binding.value
        if binding.kind != "assign" or value is None:
            return None
        if isinstance(value, cst.Name) and value.value == "None":
            continue
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value in _MODULE_RETURNING_METHODS and isinstance(value.func.value, cst.Call):
            value = value.func.value  # `Model(...).cuda()`: the module itself
        built = _built_class(index, value, words)
        if built is None:
            return None
        if all(built is not f for f in found):
            found.append(built)
    return found


def _union(*parts: frozenset[str] | None) -> frozenset[str] | None:
    """The parameters of every part, None when one part is not known."""
    found: set[str] = set()
    for part in parts:
        if part is None:
            return None
        found |= part
    return frozenset(found)


def _built_class(index: FileIndex, value: cst.BaseExpression, words: tuple[str, ...]) -> ClassSummary | None:
    """The project class `value` constructs: `WarmupCosine(...)`, or a project function whose every
    return builds one (`build_schedule(opt, cfg)`)."""
    built = index.summary_of(value.func, index.scope_at(value), words) if isinstance(value, cst.Call) else None
    if isinstance(built, FunctionSummary):
        built = built.returned_class(-1, words)
    return built if isinstance(built, ClassSummary) else None


def _unpacked_class(index: FileIndex, name: str, bindings, words: tuple[str, ...]) -> ClassSummary | None:
    """`opt, sched = init_opt(...)`: the class the project function's returns build at `sched`'s
    place, when every binding of `name` is such an unpacking and they agree."""
    found: ClassSummary | None = None
    for binding in bindings:
        node = binding.node
        if binding.value is not None or not isinstance(node, cst.Assign) or not isinstance(node.value, cst.Call):
            return None
        position = unpacked_position(node, name)
        summary = index.summary_of(node.value.func, index.scope_at(node), words) if position is not None else None
        built = summary.returned_class(position[0], words) if isinstance(summary, FunctionSummary) else None
        if built is None or (found is not None and built is not found):
            return None
        found = built
    return found


def _parameter_class(index: FileIndex, name: str, binding, words: tuple[str, ...], depth: int) -> ClassSummary | None:
    """The class of what every same-file call passes for parameter `name` (None when a call
    passes something else, leaves it out, or there is no call in the file)."""
    function = index.function_at(binding.node)
    if function is None or any(p.name.value == name and p.default is not None
                               for p in function.node.params.params):
        return None  # a default value is a value the callers need not pass
    found: ClassSummary | None = None
    sites = index.callers(function)
    for site in sites:
        argument = index.argument_for(site.node, function, name)
        built = instance_class(index, argument, site.scope, words, depth + 1) if argument is not None else None
        if built is None or (found is not None and built is not found):
            return None
        found = built
    return found


def own_rate_clock(index: FileIndex, receiver: cst.BaseExpression, scope: Scope) -> str | None:
    """`sched.step()` on a project schedule that computes the rate it writes from its own counter or
    from the position it is given (`ClassSummary.rate_clock`); else None."""
    built = instance_class(index, receiver, scope, ROLE_WORDS)
    return built.rate_clock if built is not None else None


def callable_summary(index: FileIndex, func: cst.BaseExpression, scope: Scope,
                     words: tuple[str, ...] = ()) -> FunctionSummary | None:
    """The summary of what calling `func` runs: a project function, or the `forward`/`__call__` of
    an instance of a project class (`compute_loss = ComputeLoss(model)`, `self.criterion = ...`)."""
    summary = index.summary_of(func, scope, words)
    if isinstance(summary, FunctionSummary):
        return summary
    if summary is not None:
        return None  # calling a class builds an instance
    if isinstance(func, cst.Attribute) and func.attr.value == "forward" \
            and isinstance(func.value, (cst.Name, cst.Attribute)):
        return callable_summary(index, func.value, scope, words)  # `self.criterion.forward(...)`
    values: list[cst.BaseExpression] = []
    if isinstance(func, cst.Name):
        values = [b.value for b in scope.lookup(func.value) if b.kind == "assign" and b.value is not None]
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        values = index.self_attribute_values(func.attr.value, scope)
    for value in values:
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value in _MODULE_RETURNING_METHODS and isinstance(value.func.value, cst.Call):
            value = value.func.value  # `Criterion(...).cuda()`: the module itself
        if isinstance(value, cst.Call):
            built = index.summary_of(value.func, index.scope_at(value), words)
            if isinstance(built, ClassSummary):
                return built.method("__call__") or built.method("forward")
    if isinstance(func, cst.Name) and not values:
        # a parameter: the class every same-file caller passes an instance of, else its annotation
        # (`criterion: CombinedLoss`)
        built = instance_class(index, func, scope, words) or _annotated_class(index, func, scope, words)
        if built is not None:
            return built.method("__call__") or built.method("forward")
    return None


def _annotated_class(index: FileIndex, name: cst.Name, scope: Scope, words: tuple[str, ...]) -> ClassSummary | None:
    """The project class a parameter is annotated with (`criterion: CombinedLoss`), when the
    parameter is never rebound."""
    bindings = scope.lookup(name.value)
    if len(bindings) != 1 or bindings[0].kind != "param":
        return None
    param = bindings[0].node
    annotation = param.annotation.annotation if isinstance(param, cst.Param) and param.annotation else None
    if not isinstance(annotation, (cst.Name, cst.Attribute)):
        return None
    found = index.summary_of(annotation, scope, words)
    return found if isinstance(found, ClassSummary) else None


def body_of(node) -> list:
    """The statements of a function, a suite or an `else`."""
    if isinstance(node, cst.Else):
        node = node.body
    if isinstance(node, (cst.FunctionDef, cst.With)):
        node = node.body
    body = getattr(node, "body", ())
    return list(body) if isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite)) else []


def _grad_copy(value: cst.BaseExpression) -> bool:
    """`p.grad.clone()`, `p.grad.detach().clone()`, `copy.deepcopy(p.grad)`, `p.grad.data.clone()`."""
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value == "clone":
        inner = func.value
        while isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and \
                inner.func.attr.value in ("detach", "cpu", "to"):
            inner = inner.func.value
        if isinstance(inner, cst.Attribute) and inner.attr.value == "data":
            inner = inner.value
        return isinstance(inner, cst.Attribute) and inner.attr.value == "grad"
    if dotted_name(func) in ("copy.deepcopy", "deepcopy"):
        args = positional_args(value)
        return bool(args) and isinstance(args[0].value, cst.Attribute) and args[0].value.attr.value == "grad"
    return False


def copies_grads(nodes) -> bool:
    """An assignment among `nodes` stores a copy of a `.grad` (`.clone()`, `.detach().clone()`,
    `copy.deepcopy(...)`) somewhere: the gradients are kept aside."""
    return any(isinstance(node, cst.Assign) and _grad_copy(node.value) for node in nodes)


def writes_grads(nodes) -> bool:
    """One of `nodes` assigns a value (not None) to a `.grad`, or copies one into it (`p.grad.copy_(g)`)."""
    for node in nodes:
        if isinstance(node, cst.Assign) and not (isinstance(node.value, cst.Name) and node.value.value == "None") \
                and any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "grad" for t in node.targets):
            return True
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "copy_" \
                and isinstance(node.func.value, cst.Attribute) and node.func.value.attr.value == "grad":
            return True
    return False


def _is_dataclass_decorator(index: FileIndex, decorator: cst.BaseExpression, scope: Scope) -> bool:
    """`@dataclass`, `@dataclasses.dataclass(frozen=True)`: the standard library's dataclass."""
    func = decorator.func if isinstance(decorator, cst.Call) else decorator
    return index.resolve(func, scope) in ("dataclasses.dataclass", "dataclass")
