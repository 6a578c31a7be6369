"""The framework models: what a training framework's calls, classes and hooks do, read from the
declarative files in `trainlint/frameworks/*.toml` (one per framework) rather than from lists in
the model's code. Read once per process (about a millisecond), never imported from the checked code.

A file holds `framework` (its id), `title`, `packages` (its import roots), `docs`, `[[entry]]` tables
and `[example.<id>]` tables. An entry is one resolved import path (`name`, e.g.
`accelerate.Accelerator.accumulate`; a method is named on the public class users reach it through,
even when a base class or mixin defines it; `match = "prefix"` makes it a prefix of qualified names) with a `kind`:

- `constructor`: building it gives an object of `role` (roles.py's roles); `accumulation_keywords`
  are the keywords that set its accumulation factor K; `fp16 = {keyword, values}` when its backward
  runs a GradScaler; `unlinks_scheduler = {keyword, values}` when that keyword set to one of the values
  cuts a prepared scheduler loose from the optimizer: it then steps on every call of its `step()`, not
  once per window (Accelerate's `step_scheduler_with_optimizer=False`); `engine_keywords`: keywords
  that, passed at all, hand the prepared optimizer to an engine that owns the update (Accelerate's
  `deepspeed_plugin`): the optimizer's own `zero_grad()` is then a no-op.
- `factory`: a function whose result is a tuple of objects with roles, by position: `unpacks`
  lists them (DeepSpeed's `initialize` returns `(engine, optimizer, training_dataloader,
  lr_scheduler)`); `accumulation_config = {keyword, key}` names the argument holding the
  framework's configuration and the key of its accumulation factor K, read when a dict literal
  is handed (`config={"gradient_accumulation_steps": 8, ...}`; a path to a JSON file: unknown).
  The `engine` role is an object that owns the whole update: its backward divides the loss by K,
  its `engine_step` steps the optimizer and scheduler it holds once per window and clears the
  gradients, its `engine_batch` methods run a whole window per call.
- `engine_step`: a method of an engine called on every micro-batch that steps the engine's
  optimizer and its scheduler only at the window's boundary (`clock`) and clears the gradients
  (`engine.step()` in DeepSpeed).
- `engine_batch`: a method of an engine that consumes a whole window (K micro-batches) per call:
  `step` "train" (forward, backward and the update: `train_batch()`) or "eval" (`eval_batch()`).
- `load_state`: a method that restores a checkpoint written by a `save_state` method of the same
  class, with the `state` it holds (`engine.load_checkpoint(dir)`: module, optimizer, scheduler and
  counters); `partial_keywords`: keywords that, passed at all, may make it restore less
  (`load_optimizer_states=False`, `load_module_only=True`): such a call is taken to restore the
  model alone.
  A constructor of role "pipeline_schedule" (torch.distributed.pipelining's `ScheduleGPipe`, ...)
  names `train_step`, the method of its instances that runs the forward and the backward of every
  micro-batch of the batch it is handed (`schedule.step(x)`: a backward, not an optimizer's nor a
  scheduler's step; the gradients of its micro-batches add up in `.grad`), `micro_batches`, the
  keyword (second positional argument) that sets their number, `loss`, the keyword (third
  positional argument) of the loss function it calls per micro-batch, and `grad_scaling =
  {keyword, default}`: whether it divides the summed gradients by the number of micro-batches
  (`scale_grads`, true unless told). Without that division a mean loss_fn gives a gradient
  `n_microbatches` times the batch's (TL102).
- `model_base`: a class that user models derive from (a torch module).
- `backward`: runs the backward pass; `owns_accumulation`: it divides the loss by the framework's K.
- `accumulation_context`: a context (`with accelerator.accumulate(model):`) inside which prepared
  optimizers and schedulers step once per window; `clock` says on which clock ("sync").
- `sync_flag`: an attribute that is true on the micro-batch that ends a window.
- `prepare`: wraps the user's objects; `scheduler_clock` is the clock a prepared scheduler steps on,
  `sets_epoch` that a prepared loader sets its sampler's epoch.
- `save_state`: writes a checkpoint holding `state` (a save beside a `torch.save` of the same
  function writes that state too: TL404); `receiver` names the role of the object it is called
  on when no constructor entry builds its class (DeepSpeed's engine comes from `initialize`).
- `clip`: clips gradients; `unscales` when it unscales an fp16 run's gradients itself.
- `unscale`: unscales an fp16 run's gradients (`accelerator.unscale_gradients()`).
- `unwrap`: hands back the module it was given, unwrapped (`accelerator.unwrap_model(model)`).
- `hook`: a method the framework calls; `step` is "train" (per micro-batch, gradients on), "eval"
  (under no_grad, in eval mode), "eval_loader" (returns a loader used for evaluation only) or
  "update" (once per optimizer step: Lightning's `optimizer_step`, whose override may step the
  scheduler itself). An eval_loader hook names in `run_by` the framework methods that ask for its
  loader (`test_dataloader`: `["test"]`, called on the trainer) and in `run_by_cli` the classes
  whose construction runs one of them named on the command line (`LightningCLI`): a project that
  calls none of them and builds none of those never has the framework evaluate with it.
  It names in `batches_to` the module's methods the framework hands each of its batches to, the
  step hook first (`validation_step`, `on_validation_batch_start`, ...): when the class defines
  the step hook and every definition of those in the project computes nothing (`pass`, a
  docstring, `return None`), the loader's batches feed no evaluation.
  A train hook of a framework that owns accumulation may name `window_size`, the attribute of
  `self` that holds the number of micro-batches in the current window (fewer in the short last
  window of an epoch), and `fixed_window_size`, the attribute that always holds K: an override
  that divides its loss by the fixed one under-weights the short window (HF's Trainer:
  `current_gradient_accumulation_steps` against `args.gradient_accumulation_steps`).
  A train hook whose returned loss the framework backpropagates itself says `backpropagates_return`
  (Lightning's `training_step`, not HF's, which runs its own backward and returns the loss
  detached): what it returns carries an autograd graph, whatever it is called.
- `eval_built`: builds a module and hands it back in eval mode (`PreTrainedModel.from_pretrained`
  calls `model.eval()`); `on_any_class`: the method called on any class of the entry's package counts
  (`AutoModelForCausalLM.from_pretrained`, `BertModel.from_pretrained` reach it).
- `not_module`: builds an object that is no torch module (Transformers' `AutoTokenizer.from_pretrained`,
  `AutoProcessor.from_pretrained`: a tokenizer or a processor turning text and images into arrays):
  calling it runs no layer and records no graph, so a model's `forward` calling such an attribute of
  `self` outside `no_grad` still runs every submodule it reaches under `no_grad` (TL301).
- `seed`: seeds torch's global generator (among others).
- `accessor`: a method of a model base that hands back an object of `role` the framework built
  (a LightningModule's `self.optimizers()`, `self.lr_schedulers()`); asked of `self.<method>()` in
  a class whose base resolves to the entry's class.
- `grad_off`, `grad_on`, `grad_setter`: a framework whose autograd works like torch's (PaddlePaddle,
  OneFlow: `model.eval()` leaves recording on, a forward records a graph) and its own switches: a
  context or decorator that turns recording off (`paddle.no_grad`) or on (`paddle.enable_grad`), and
  `set_grad_enabled(flag)`. The grad-mode model reads them beside torch's, so an evaluation under
  `paddle.no_grad()` is known to record nothing (without them, its forward would be taken as
  recording).
- `grad_clear`: a method that clears the gradients its object holds, named on the class it is
  called on (NVIDIA Warp's `tape.zero()` on a `wp.Tape`, whose `tape.backward(loss)` wrote them):
  a clear like `zero_grad()`, asked only of objects built by that class.
- `scaler_step`: a method of a framework's GradScaler that unscales the gradients, steps the
  optimizer it is given and updates the scale in one call (Paddle's `scaler.minimize(opt, loss)`).
- `dataset_source`: a call that returns a dataset of the framework: `returns` names its class
  (`datasets.Dataset`), `keyword_returns` the class a literal true keyword makes it return instead
  (`load_dataset(..., streaming=True)`: `{ streaming = "datasets.IterableDataset" }`). A method
  entry (`datasets.Dataset.to_iterable_dataset`) applies to a receiver of its class; a method of
  a dataset class with no entry returns a dataset of the same class (`ds.map(...)`,
  `ds.with_format("torch")`, and `dsd["train"]` too).
- `dataset_combine`: a function that returns a dataset of the kind of the datasets it is handed
  (`split_dataset_by_node(ds, ...)`, `interleave_datasets([a, b])`).
- `dataset_shuffle`: a dataset method that returns the dataset shuffled with a generator drawn once,
  from its `seed`; when the class also has an `epoch_setter` entry, the order is keyed by that seed
  and an epoch only the setter changes (HF's `IterableDataset.shuffle`: without
  `set_epoch(epoch)` every pass replays the same order); otherwise one fixed permutation.
- `epoch_setter`: the method that moves a dataset's shuffle to the next epoch
  (`IterableDataset.set_epoch`).
- `state_save`: a function that writes the state dict it is handed as one checkpoint (the
  checkpoint model reads it beside `torch.save`, for TL404): `saves` names its parameter (the first
  positional argument too), `path` the keyword that says where (`torch.distributed.checkpoint.save`:
  `saves = "state_dict"`, `path = "checkpoint_id"`). Its own writing (a directory of shards, its
  metadata written last) is not `torch.save`'s: TL402 and TL403 leave it alone.
- `state_load`: a function that loads a checkpoint into the state dict it is handed, in place
  (`torch.distributed.checkpoint.load(state_dict, checkpoint_id=...)`): `into` names that parameter
  (the first positional argument too), `path` the keyword that says where. What the dict does not
  hold is not restored (TL404's load side).
- `epoch_log`: a method of a model base that logs a value per step and reduces it over the epoch
  as a mean weighted by `weight` (the keyword that says how many samples the step's value stands
  for; absent, the framework reads it off the batch): Lightning's `self.log(name, value,
  on_epoch=True, batch_size=...)`. `epoch_hooks` are the hooks where `on_epoch` defaults to true
  (`validation_step`, `test_step`; `training_step` logs per step unless told). A fixed number
  passed as the weight (`batch_size=self.hparams.batch_size`) weighs a short last batch like a
  full one: an unweighted mean of batch means (TL601). `values` names the parameter of a method
  that logs every value of a dict at once (Lightning's `self.log_dict(dictionary, ...)`, the first
  positional argument too); without it the value is the second argument (`self.log(name, value)`).

A file may also hold `reexports`, a table from a module to the public module that re-exports its
names (`"torch.distributed.pipelining.schedules" = "torch.distributed.pipelining"`): entries are named
under the public module and also match the names a file imports from the other one.

Every entry names the `rules` that read it (for `trainlint explain`) and an `example`: the id of an
`[example.<id>]` table with `title`, the `codes` its `bad` code draws and its `good` twin does not
(tests/test_frameworks.py runs them).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

KINDS = frozenset({"constructor", "model_base", "backward", "accumulation_context", "sync_flag", "prepare",
                   "save_state", "clip", "unscale", "unwrap", "hook", "seed", "accessor",
                   "grad_off", "grad_on", "grad_setter", "scaler_step", "grad_clear", "dataset_source",
                   "dataset_combine", "dataset_shuffle", "epoch_setter", "state_save", "state_load", "epoch_log",
                   "factory", "engine_step", "engine_batch", "load_state", "eval_built", "not_module"})
CLOCKS = frozenset({"micro_batch", "sync", "epoch"})
HOOK_STEPS = frozenset({"train", "eval", "eval_loader", "update"})
BATCH_STEPS = frozenset({"train", "eval"})


class FrameworkModelError(Exception):
    """A framework model file that does not follow the format above (a packaging or editing error)."""


@dataclass(frozen=True)
class Entry:
    framework: str
    name: str  # the resolved import path (or its prefix with match = "prefix")
    kind: str
    example: str
    rules: tuple[str, ...] = ()
    prefix: bool = False
    role: str | None = None
    owns_accumulation: bool = False
    clock: str | None = None
    scheduler_clock: str | None = None
    sets_epoch: bool = False
    unscales: bool = False
    step: str | None = None
    state: tuple[str, ...] = ()
    accumulation_keywords: tuple[str, ...] = ()
    fp16_keyword: str | None = None
    fp16_values: tuple = ()
    unlinks_scheduler_keyword: str | None = None
    unlinks_scheduler_values: tuple = ()
    window_size: str | None = None
    fixed_window_size: str | None = None
    returns: str | None = None
    keyword_returns: tuple[tuple[str, str], ...] = ()
    saves: str | None = None
    path: str | None = None
    into: str | None = None
    weight: str | None = None
    epoch_hooks: tuple[str, ...] = ()
    unpacks: tuple[str, ...] = ()
    receiver: str | None = None
    partial_keywords: tuple[str, ...] = ()
    values: str | None = None
    accumulation_config_keyword: str | None = None
    accumulation_config_key: str | None = None
    train_step: str | None = None
    micro_batches: str | None = None
    loss: str | None = None
    grad_scaling_keyword: str | None = None
    grad_scaling_default: bool = False
    backpropagates_return: bool = False
    #: constructor keywords that hand the optimizer to an engine owning the update (Accelerate's
    #: `deepspeed_plugin`): the prepared optimizer's own `zero_grad()`/`step()` are then no-ops
    engine_keywords: tuple[str, ...] = ()
    #: the other qualified names the entry is reached by (its module's `reexports`)
    aliases: tuple[str, ...] = ()
    #: an eval_loader hook: the framework methods that ask for its loader (Lightning's `test_dataloader`
    #: by `trainer.test(...)`), and the classes whose construction runs one of them named on the
    #: command line (`LightningCLI`)
    run_by: tuple[str, ...] = ()
    run_by_cli: tuple[str, ...] = ()
    #: an eval_built entry: its method called on any class of its package counts (every model class
    #: and Auto class of Transformers reaches `PreTrainedModel.from_pretrained`)
    on_any_class: bool = False
    #: an eval_loader hook: the methods of the module the framework hands each of its batches to,
    #: its step hook first (Lightning's `val_dataloader`: `validation_step`, then the batch hooks)
    batches_to: tuple[str, ...] = ()

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every qualified name the entry matches: its name, then the re-exported spellings."""
        return (self.name, *self.aliases)

    @property
    def attr(self) -> str:
        """The last component: the method, attribute or class name code writes."""
        return self.name.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Example:
    id: str
    title: str
    codes: tuple[str, ...]
    bad: str
    good: str


@dataclass(frozen=True)
class Framework:
    id: str
    title: str
    packages: tuple[str, ...]
    docs: str
    path: str  # the model file's name
    entries: tuple[Entry, ...] = ()
    examples: dict[str, Example] = field(default_factory=dict)
    reexports: tuple[tuple[str, str], ...] = ()  # (module, the public module that re-exports it)


_ENTRY_KEYS = frozenset({"name", "kind", "example", "rules", "match", "role", "owns_accumulation", "clock",
                         "scheduler_clock", "sets_epoch", "unscales", "step", "state", "accumulation_keywords",
                         "fp16", "unlinks_scheduler", "window_size", "fixed_window_size", "returns", "keyword_returns",
                         "saves", "path", "into", "weight", "epoch_hooks", "unpacks", "receiver", "partial_keywords", "values",
                         "accumulation_config", "train_step", "micro_batches", "loss", "grad_scaling",
                         "backpropagates_return", "engine_keywords", "run_by", "run_by_cli", "on_any_class",
                         "batches_to"})
_TRAIN_STEP_KEYS = ("train_step", "micro_batches", "loss", "grad_scaling")


def _entry(framework: str, raw: dict, where: str) -> Entry:
    unknown = set(raw) - _ENTRY_KEYS
    if unknown:
        raise FrameworkModelError(f"{where}: unknown keys {sorted(unknown)}")
    for key in ("name", "kind", "example"):
        if not isinstance(raw.get(key), str):
            raise FrameworkModelError(f"{where}: `{key}` must be a string")
    if raw["kind"] not in KINDS:
        raise FrameworkModelError(f"{where}: unknown kind {raw['kind']!r}")
    for key in ("clock", "scheduler_clock"):
        if key in raw and raw[key] not in CLOCKS:
            raise FrameworkModelError(f"{where}: `{key}` must be one of {sorted(CLOCKS)}")
    if raw["kind"] == "hook" and raw.get("step") not in HOOK_STEPS:
        raise FrameworkModelError(f"{where}: a hook's `step` must be one of {sorted(HOOK_STEPS)}")
    if raw["kind"] == "engine_batch" and raw.get("step") not in BATCH_STEPS:
        raise FrameworkModelError(f"{where}: an engine_batch's `step` must be one of {sorted(BATCH_STEPS)}")
    if (raw["kind"] == "factory") != bool(raw.get("unpacks")) or \
            "accumulation_config" in raw and raw["kind"] != "factory":
        raise FrameworkModelError(f"{where}: a factory (and only it) names the roles it `unpacks` "
                                  "(and its `accumulation_config`)")
    if "accumulation_config" in raw and not (isinstance(raw["accumulation_config"], dict) and all(
            isinstance(raw["accumulation_config"].get(k), str) for k in ("keyword", "key"))):
        raise FrameworkModelError(f"{where}: `accumulation_config` needs a `keyword` and a `key`")
    if raw["kind"] == "dataset_source" and not isinstance(raw.get("returns"), str) or \
            raw["kind"] != "dataset_source" and ("returns" in raw or "keyword_returns" in raw):
        raise FrameworkModelError(f"{where}: a dataset_source (and only it) names the class it `returns`")
    if (raw["kind"] == "state_save") != (isinstance(raw.get("saves"), str) and isinstance(raw.get("path"), str)) \
            or raw["kind"] not in ("state_save", "state_load") and ("saves" in raw or "path" in raw) \
            or raw["kind"] == "state_load" and "saves" in raw:
        raise FrameworkModelError(f"{where}: a state_save (and only it) names the parameter it `saves` and its `path`")
    if (raw["kind"] == "state_load") != (isinstance(raw.get("into"), str) and isinstance(raw.get("path"), str)):
        raise FrameworkModelError(f"{where}: a state_load (and only it) names the parameter it loads `into` and its "
                                  "`path`")
    if (raw["kind"] == "epoch_log") != isinstance(raw.get("weight"), str) or \
            raw["kind"] != "epoch_log" and ("epoch_hooks" in raw or "values" in raw):
        raise FrameworkModelError(f"{where}: an epoch_log (and only it) names the keyword of its `weight`")
    if raw["kind"] in ("constructor", "accessor") and not isinstance(raw.get("role"), str):
        raise FrameworkModelError(f"{where}: a {raw['kind']} needs a `role`")
    if ("window_size" in raw) != ("fixed_window_size" in raw) or \
            "window_size" in raw and (raw["kind"] != "hook" or raw.get("step") != "train"):
        raise FrameworkModelError(f"{where}: `window_size` and `fixed_window_size` go together, on a train hook")
    scaling = raw.get("grad_scaling", {})
    if any(key in raw for key in _TRAIN_STEP_KEYS) and not (
            raw["kind"] == "constructor" and all(isinstance(raw.get(key), str) for key in _TRAIN_STEP_KEYS[:3])
            and isinstance(scaling, dict) and isinstance(scaling.get("keyword"), str)
            and isinstance(scaling.get("default"), bool)):
        raise FrameworkModelError(f"{where}: `train_step`, `micro_batches`, `loss` and `grad_scaling = {{keyword, "
                                  "default}` go together, on a constructor")
    if "backpropagates_return" in raw and (raw["kind"] != "hook" or raw.get("step") != "train"):
        raise FrameworkModelError(f"{where}: `backpropagates_return` is said of a train hook")
    if "on_any_class" in raw and raw["kind"] != "eval_built":
        raise FrameworkModelError(f"{where}: `on_any_class` is said of an eval_built entry")
    if ("run_by" in raw or "run_by_cli" in raw) and (raw["kind"] != "hook" or raw.get("step") != "eval_loader"
                                                     or not isinstance(raw.get("run_by"), list)):
        raise FrameworkModelError(f"{where}: `run_by` (and `run_by_cli`) are said of an eval_loader hook")
    if "batches_to" in raw and (raw["kind"] != "hook" or raw.get("step") != "eval_loader"
                                or not isinstance(raw["batches_to"], list) or not raw["batches_to"]):
        raise FrameworkModelError(f"{where}: `batches_to` (a list, the step hook first) is said of an eval_loader hook")
    fp16 = raw.get("fp16", {})
    config = raw.get("accumulation_config", {})
    unlinks = raw.get("unlinks_scheduler", {})
    return Entry(framework, raw["name"], raw["kind"], raw["example"], tuple(raw.get("rules", ())),
                 raw.get("match") == "prefix", raw.get("role"), bool(raw.get("owns_accumulation")),
                 raw.get("clock"), raw.get("scheduler_clock"), bool(raw.get("sets_epoch")),
                 bool(raw.get("unscales")), raw.get("step"), tuple(raw.get("state", ())),
                 tuple(raw.get("accumulation_keywords", ())), fp16.get("keyword"), tuple(fp16.get("values", ())),
                 unlinks.get("keyword"), tuple(unlinks.get("values", ())),
                 raw.get("window_size"), raw.get("fixed_window_size"), raw.get("returns"),
                 tuple(sorted(raw.get("keyword_returns", {}).items())), raw.get("saves"), raw.get("path"),
                 raw.get("into"), raw.get("weight"), tuple(raw.get("epoch_hooks", ())),
                 tuple(raw.get("unpacks", ())), raw.get("receiver"),
                 tuple(raw.get("partial_keywords", ())), raw.get("values"), config.get("keyword"), config.get("key"),
                 raw.get("train_step"), raw.get("micro_batches"), raw.get("loss"), scaling.get("keyword"),
                 bool(scaling.get("default")),
                 bool(raw.get("backpropagates_return")), tuple(raw.get("engine_keywords", ())), (),
                 tuple(raw.get("run_by", ())), tuple(raw.get("run_by_cli", ())), bool(raw.get("on_any_class")),
                 tuple(raw.get("batches_to", ())))


def _framework(path: str, data: dict) -> Framework:
    fid = data.get("framework")
    if not isinstance(fid, str):
        raise FrameworkModelError(f"{path}: `framework` must be a string")
    reexports = data.get("reexports", {})
    if not (isinstance(reexports, dict) and all(isinstance(v, str) for v in reexports.values())):
        raise FrameworkModelError(f"{path}: `reexports` maps a module to the public module that re-exports it")
    entries = tuple(_with_aliases(_entry(fid, raw, f"{path} entry {i + 1}"), reexports)
                    for i, raw in enumerate(data.get("entry", ())))
    examples = {}
    for eid, raw in data.get("example", {}).items():
        try:
            examples[eid] = Example(eid, raw["title"], tuple(raw["codes"]), raw["bad"], raw["good"])
        except (KeyError, TypeError) as err:
            raise FrameworkModelError(f"{path} example {eid}: missing or bad {err}") from None
    for entry in entries:
        if entry.example not in examples:
            raise FrameworkModelError(f"{path}: entry {entry.name} names no example {entry.example!r}")
    return Framework(fid, data.get("title", fid), tuple(data.get("packages", ())), data.get("docs", ""), path,
                     entries, examples, tuple(sorted(reexports.items())))


def _with_aliases(entry: Entry, reexports: dict[str, str]) -> Entry:
    """The entry with the spellings of its name under the modules its public module re-exports."""
    aliases = tuple(module + entry.name[len(public):] for module, public in sorted(reexports.items())
                    if entry.name.startswith(public + "."))
    return replace(entry, aliases=aliases) if aliases else entry


@cache
def frameworks() -> tuple[Framework, ...]:
    """Every framework model shipped in the package, by file name."""
    # next to the package's modules (as package data is installed); not importlib.resources, whose
    # import (zipfile, tempfile, shutil, the compressors) cost a one-file check more than reading
    return load_folder(Path(__file__).resolve().parent.parent / "frameworks")


def load_folder(folder) -> tuple[Framework, ...]:
    """The framework models of the `*.toml` files in a folder (a Path or a resources Traversable)."""
    found = []
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if item.name.endswith(".toml"):
            try:
                data = tomllib.loads(item.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as err:
                raise FrameworkModelError(f"{item.name}: {err}") from None
            found.append(_framework(item.name, data))
    return tuple(found)


def entries(kind: str | None = None) -> tuple[Entry, ...]:
    return _by_kind().get(kind, ()) if kind is not None else tuple(e for f in frameworks() for e in f.entries)


@cache
def _by_kind() -> dict[str, tuple[Entry, ...]]:
    table: dict[str, list[Entry]] = {}
    for entry in entries():
        table.setdefault(entry.kind, []).append(entry)
    return {kind: tuple(found) for kind, found in table.items()}


# -- the queries the model and the rules ask ------------------------------------------------------
@cache
def constructors() -> tuple[tuple[str, str], ...]:
    """(qualified name or prefix, role) of every framework class or factory whose result has a role;
    a prefix entry ends with "." so it matches the names under it."""
    return tuple((name + "." if e.prefix else name, e.role) for e in entries("constructor") for name in e.spellings)


@cache
def class_names(role: str) -> frozenset[str]:
    """The bare class names (`Accelerator`, `Fabric`) of the constructors of a role, for code that
    names them without an import trainlint can resolve (annotations, star imports)."""
    return frozenset(e.attr for e in entries("constructor") if e.role == role and not e.prefix)


@cache
def accessors() -> dict[str, tuple[tuple[str, str, tuple[str, ...]], ...]]:
    """method name -> (owner class name, role, the framework's import roots) of every accessor entry:
    `self.lr_schedulers()` in a class deriving from lightning's LightningModule is a scheduler."""
    table: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {}
    packages = {f.id: f.packages for f in frameworks()}
    for e in entries("accessor"):
        owner = e.name.rsplit(".", 2)[-2]
        table.setdefault(e.attr, []).append((owner, e.role, packages.get(e.framework, ())))
    return {name: tuple(found) for name, found in table.items()}


@cache
def model_bases() -> frozenset[str]:
    """Bare names of the framework classes user models derive from (`LightningModule`)."""
    return frozenset(e.attr for e in entries("model_base"))


@cache
def methods(kind: str, owner_role: str | None = None) -> frozenset[str]:
    """The method or attribute names of the entries of one kind (`accumulate`, `sync_gradients`);
    with `owner_role`, only those of classes whose constructor entry gives that role."""
    if owner_role is None:
        return frozenset(e.attr for e in entries(kind))
    owners = {e.name for e in entries("constructor") if e.role == owner_role}
    return frozenset(e.attr for e in entries(kind) if e.name.rsplit(".", 1)[0] in owners)


@cache
def backward_methods() -> frozenset[str]:
    """Method names that run the backward pass: torch's `loss.backward()` and the frameworks'
    (`accelerator.backward(loss)`, a LightningModule's `self.manual_backward(loss)`)."""
    return frozenset({"backward"}) | methods("backward")


@cache
def accumulation_keywords() -> tuple[str, ...]:
    """Constructor keywords that set a framework's accumulation factor, in the order they are tried."""
    return tuple(dict.fromkeys(k for e in entries("constructor") for k in e.accumulation_keywords))


def fp16_setting(class_name: str) -> tuple[str, tuple] | None:
    """(keyword, values) that make a framework object built by `class_name` run fp16 with a scaler."""
    for entry in entries("constructor"):
        if entry.attr == class_name and entry.fp16_keyword:
            return entry.fp16_keyword, entry.fp16_values
    return None


def engine_keywords(class_name: str) -> tuple[str, ...]:
    """The keywords of a framework object built by `class_name` that hand its prepared optimizer to
    an engine owning the update (the optimizer's own clears are then no-ops)."""
    return tuple(k for entry in entries("constructor") if entry.attr == class_name for k in entry.engine_keywords)


def scheduler_unlinking(class_name: str) -> tuple[str, tuple] | None:
    """(keyword, values) that make a framework object built by `class_name` step its prepared
    schedulers on every call instead of once per accumulation window."""
    for entry in entries("constructor"):
        if entry.attr == class_name and entry.unlinks_scheduler_keyword:
            return entry.unlinks_scheduler_keyword, entry.unlinks_scheduler_values
    return None


@cache
def hooks(step: str) -> frozenset[str]:
    """Method names of the framework hooks of one step kind ("train", "eval", "eval_loader", "update")."""
    return frozenset(e.attr for e in entries("hook") if e.step == step)


def hook_runners(method: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """The framework methods that ask for the loader of the eval_loader hook `method`, and the
    command-line classes that can run them (`run_by`, `run_by_cli`); None when no entry says."""
    found = [e for e in entries("hook") if e.attr == method and e.step == "eval_loader" and e.run_by]
    if not found:
        return None
    return (frozenset(m for e in found for m in e.run_by), frozenset(c for e in found for c in e.run_by_cli))


def batch_receivers(method: str) -> tuple[tuple[str, ...], frozenset[str], tuple[str, ...]] | None:
    """For the eval_loader hook `method`: the methods its batches are handed to (`batches_to`, the
    step hook first), the framework's import roots and the classes it is a method of (its entries'
    owners: `lightning.pytorch.LightningModule`); None when no entry says."""
    packages = {f.id: f.packages for f in frameworks()}
    found = [e for e in entries("hook") if e.attr == method and e.step == "eval_loader" and e.batches_to]
    if not found:
        return None
    return (tuple(dict.fromkeys(h for e in found for h in e.batches_to)),
            frozenset(r for e in found for r in packages.get(e.framework, ())),
            tuple(dict.fromkeys(e.name.rsplit(".", 1)[0] for e in found)))


def hook_kind(method: str) -> str | None:
    """The step kind of a framework hook by its method name, or None."""
    for entry in entries("hook"):
        if entry.attr == method:
            return entry.step
    return None


@cache
def window_hooks() -> dict[str, tuple[Entry, ...]]:
    """Framework class (resolved name) -> its train hooks that name the current window's size
    (`window_size`) and the fixed K (`fixed_window_size`)."""
    table: dict[str, list[Entry]] = {}
    for e in entries("hook"):
        if e.window_size:
            table.setdefault(e.name.rsplit(".", 1)[0], []).append(e)
    return {owner: tuple(found) for owner, found in table.items()}


@cache
def backpropagated_returns() -> tuple[tuple[str, tuple[str, ...], frozenset[str]], ...]:
    """(framework class's bare name, the framework's import roots, its train hooks whose returned
    loss the framework backpropagates): `backpropagates_return`, Lightning's `training_step` (a
    class is matched by its bare name under any of the roots: `lightning.LightningModule`,
    `pytorch_lightning.LightningModule`)."""
    found = []
    for framework in frameworks():
        table: dict[str, set[str]] = {}
        for e in framework.entries:
            if e.kind == "hook" and e.backpropagates_return:
                table.setdefault(e.name.rsplit(".", 2)[-2], set()).add(e.attr)
        found += [(owner, framework.packages, frozenset(hooks)) for owner, hooks in sorted(table.items())]
    return tuple(found)


@cache
def hook_steps() -> tuple[tuple[str, tuple[str, ...], str, str], ...]:
    """(framework class's bare name, the framework's import roots, hook method, its step kind) for
    every hook entry: Lightning's `validation_step` ("eval") of `LightningModule`, matched on a class
    by its bare name under any of the roots (`lightning.LightningModule`,
    `pytorch_lightning.LightningModule`)."""
    return tuple((e.name.rsplit(".", 2)[-2], framework.packages, e.attr, e.step)
                 for framework in frameworks() for e in framework.entries if e.kind == "hook" and e.step)


@cache
def grad_switches(kind: str) -> frozenset[str]:
    """Qualified names of the frameworks' grad switches of one kind ("grad_off", "grad_on",
    "grad_setter"): `paddle.no_grad`, `oneflow.inference_mode`, `paddle.set_grad_enabled`."""
    return frozenset(e.name for e in entries(kind))


@cache
def built_in_eval(qualified_name: str) -> bool:
    """A call of it builds a module and hands it back in eval mode (Transformers' `from_pretrained`
    calls `model.eval()` before returning): `eval_built` entries; one `on_any_class` matches its
    method called on any class of its package (`transformers.AutoModelForCausalLM.from_pretrained`)."""
    root, _, last = qualified_name.partition(".")[0], None, qualified_name.rsplit(".", 1)[-1]
    for entry in entries("eval_built"):
        for spelling in entry.spellings:
            if qualified_name == spelling or (entry.on_any_class and "." in qualified_name[len(root) + 1:]
                                              and spelling.split(".", 1)[0] == root and last == entry.attr):
                return True
    return False


@cache
def not_modules() -> frozenset[str]:
    """Qualified names of the calls that build an object that is no torch module (`not_module`)."""
    return frozenset(name for e in entries("not_module") for name in e.spellings)


def seeds() -> frozenset[str]:
    """Qualified names of the framework helpers that seed torch's global generator."""
    return frozenset(e.name for e in entries("seed"))


def lookup(qualified_name: str) -> Entry | None:
    """The entry of a resolved import path (exact, or the longest prefix entry)."""
    best: tuple[int, Entry] | None = None
    for entry in entries():
        for name in entry.spellings:
            if name == qualified_name:
                return entry
            if entry.prefix and qualified_name.startswith(name + ".") and (best is None or len(name) > best[0]):
                best = (len(name), entry)
    return best[1] if best else None


def owns_accumulation(qualified_name: str) -> bool:
    """`accelerate.Accelerator.backward`: the framework divides the loss by its own K."""
    entry = lookup(qualified_name)
    return entry is not None and entry.owns_accumulation


def clock(qualified_name: str) -> str | None:
    """The clock a framework call runs (or makes prepared objects step) on: "sync", ... or None."""
    entry = lookup(qualified_name)
    return None if entry is None else entry.clock or entry.scheduler_clock


def for_rule(code: str) -> tuple[Entry, ...]:
    """The entries a rule reads, for `trainlint explain CODE`."""
    return tuple(e for e in entries() if code in e.rules)


@cache
def model_packages() -> tuple[str, ...]:
    """Import roots of the frameworks that have model base classes (their models are torch modules)."""
    return tuple(p for f in frameworks() if any(e.kind == "model_base" for e in f.entries) for p in f.packages)


@cache
def epoch_setting_wrappers() -> frozenset[str]:
    """Method names of the `prepare` calls whose prepared loaders set their sampler's epoch."""
    return frozenset(e.attr for e in entries("prepare") if e.sets_epoch)


def epoch_keyed(shuffle: Entry) -> bool:
    """A `dataset_shuffle` whose class has an `epoch_setter`: its order changes only with that epoch."""
    owner = shuffle.name.rsplit(".", 1)[0]
    return any(e.name.rsplit(".", 1)[0] == owner for e in entries("epoch_setter"))


@cache
def dataset_classes() -> frozenset[str]:
    """The dataset classes the `dataset_source` entries return (`datasets.IterableDataset`): a
    method of one of them with no entry of its own returns a dataset of the same class."""
    return frozenset(c for e in entries("dataset_source") for c in (e.returns, *dict(e.keyword_returns).values()))


@cache
def dataset_sources() -> frozenset[str]:
    """Qualified names of the `dataset_source` and `dataset_combine` entries: a file that makes a
    framework dataset refers to one of them (`datasets.load_dataset`)."""
    return frozenset(e.name for kind in ("dataset_source", "dataset_combine") for e in entries(kind))


@cache
def state_saves() -> dict[str, Entry]:
    """Qualified name -> entry of the functions that write a state dict as one checkpoint
    (`torch.distributed.checkpoint.save`), read beside `torch.save`."""
    return {e.name: e for e in entries("state_save")}


@cache
def state_loads() -> dict[str, Entry]:
    """Qualified name -> entry of the functions that load a checkpoint into the state dict they are
    handed, in place (`torch.distributed.checkpoint.load`)."""
    return {e.name: e for e in entries("state_load")}


@cache
def epoch_logs() -> tuple[tuple[Entry, str, tuple[str, ...]], ...]:
    """(entry, owner class's bare name, the framework's import roots) of every `epoch_log` entry:
    `self.log(...)` in a class deriving from lightning's LightningModule (under any of its roots)."""
    packages = {f.id: f.packages for f in frameworks()}
    return tuple((e, e.name.rsplit(".", 2)[-2], packages.get(e.framework, ())) for e in entries("epoch_log"))


@cache
def epoch_log_owners() -> frozenset[str]:
    """Qualified names a file may reach an `epoch_log` entry's class by (`lightning.pytorch.LightningModule`,
    `lightning.LightningModule`, `pytorch_lightning.LightningModule`): for a rule's gate."""
    return frozenset({e.name.rsplit(".", 1)[0] for e, _, _ in epoch_logs()}
                     | {f"{root}.{owner}" for _, owner, roots in epoch_logs() for root in roots})


@cache
def factories() -> dict[str, Entry]:
    """Qualified name -> entry of the functions whose tuple result holds objects with roles, by
    position (`deepspeed.initialize`: engine, optimizer, loader, scheduler)."""
    return {e.name: e for e in entries("factory")}


def unpacked_role(qualified_name: str | None, position: int) -> str | None:
    """The role of the element at `position` of what the factory `qualified_name` returns."""
    entry = factories().get(qualified_name or "")
    return entry.unpacks[position] if entry is not None and position < len(entry.unpacks) else None


@cache
def engine_batches(step: str) -> frozenset[str]:
    """Method names of an engine that consume a whole window per call ("train": `train_batch`)."""
    return frozenset(e.attr for e in entries("engine_batch") if e.step == step)


def receiver_role(entry: Entry) -> str | None:
    """The role of the object a method entry is called on: its `receiver`, else the role of the
    constructor entry that builds its class (`accelerate.Accelerator.save_state`: accelerator)."""
    if entry.receiver:
        return entry.receiver
    owner = entry.name.rsplit(".", 1)[0]
    return next((e.role for e in entries("constructor") if e.name == owner), None)


@cache
def saved_state(kind: str = "save_state") -> dict[str, tuple[tuple[str | None, tuple[str, ...], tuple[str, ...]], ...]]:
    """Method name -> (receiver role, the state it writes or restores, its `partial_keywords`) of the
    `save_state` (or `load_state`) entries: `engine.save_checkpoint(dir)` writes the module,
    optimizer, scheduler and counters."""
    table: dict[str, list[tuple[str | None, tuple[str, ...], tuple[str, ...]]]] = {}
    for e in entries(kind):
        table.setdefault(e.attr, []).append((receiver_role(e), e.state, e.partial_keywords))
    return {name: tuple(found) for name, found in table.items()}


@cache
def methods_on(kind: str, role: str) -> frozenset[str]:
    """The method names of the entries of one kind called on an object of `role` (`receiver_role`):
    `save_state` on the engine -> {"save_checkpoint"}."""
    return frozenset(e.attr for e in entries(kind) if receiver_role(e) == role)


@cache
def train_steps() -> dict[str, frozenset[str]]:
    """method name -> the roles whose objects run a whole train step (forward and backward of every
    micro-batch) when it is called: `{"step": {"pipeline_schedule"}}` (`schedule.step(x)`)."""
    table: dict[str, set[str]] = {}
    for e in entries("constructor"):
        if e.train_step:
            table.setdefault(e.train_step, set()).add(e.role)
    return {method: frozenset(found) for method, found in table.items()}


@cache
def micro_batch_runners() -> dict[str, Entry]:
    """Qualified name (every spelling) -> entry of the classes whose `train_step` runs the forward
    and backward of each micro-batch of a batch (torch.distributed.pipelining's schedules)."""
    return {name: e for e in entries("constructor") if e.train_step for name in e.spellings}
