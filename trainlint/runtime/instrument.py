"""In the traced child only: hooks on torch that record what a training script does, and the
runtime check of each rule that turns those records into findings.

Imported by `trace_child` (never by the linter). Public hooks are used where torch has them
(global optimizer step pre-hooks, global module forward hooks, saved-tensor hooks, tensor hooks on
one parameter per optimizer); thin wrappers elsewhere (LR scheduler step, GradScaler, clipping,
backward, Module.train, zero_grad, torch.save/load, os.replace, pickle, DataLoader iteration).

Each event carries the user's call stack: the file:line of every frame in the user's code, innermost
first. A runtime finding matches a static finding when the static line is one of those frames
(`model.eval()` inside `evaluate()` is seen at both lines).

The update clock: optimizer `o`'s window is everything that happened since `o`'s previous step;
the window checks (TL101, TL102, TL104, TL105, TL202) run when `o` steps. "Accumulation" means
one backward call site ran more than once in a window.
"""

from __future__ import annotations

import ast
import collections
import ctypes
import functools
import hashlib
import json
import linecache
import multiprocessing.process
import os
import pickle
import re
import shutil
import site
import sys
import sysconfig
import threading
import warnings
import weakref
from pathlib import Path

import torch
import torch.nn.functional as F
import torch.utils.data.dataloader as dataloader
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.dropout import _DropoutNd
from torch.nn.modules.loss import _Loss
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

_LOSS_FUNCTIONS = ("cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                   "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div")
_PACKAGE = os.path.join(str(Path(__file__).resolve().parents[1]), "")  # trainlint's own files
_GRAPH_LIMIT = 50_000  # autograd nodes counted per kept value before giving up (a lower bound then)


class StopTrace(BaseException):
    """Raised into the script at the optimizer step after --max-steps.

    A BaseException, so a script's `except Exception:` does not swallow it; `finally:` blocks run.
    """


class UserCode:
    """Which source files are the user's: everything but the standard library, installed packages
    and trainlint itself."""

    def __init__(self) -> None:
        paths = sysconfig.get_paths()
        roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
        roots.update(site.getsitepackages())
        roots.add(site.getusersitepackages())
        # package folders a `.pth` file added (a venv sharing another environment's packages,
        # Debian's dist-packages): installed code too, not the user's
        roots.update(p for p in sys.path if os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages"))
        roots.add(str(Path(__file__).resolve().parents[1]))  # the trainlint package
        self._roots = tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)
        self._known: dict[str, bool] = {}

    def __contains__(self, filename: str) -> bool:
        known = self._known.get(filename)
        if known is None:
            real = os.path.realpath(filename)
            known = not filename.startswith("<") and not real.startswith(self._roots)
            self._known[filename] = known
        return known

    def stack(self, frame) -> tuple[tuple[str, int], ...]:
        """(path, line) of each user frame from `frame` outwards, innermost first."""
        out = []
        while frame is not None:
            if frame.f_code.co_filename in self:
                out.append((os.path.abspath(frame.f_code.co_filename), frame.f_lineno))
            frame = frame.f_back
        return tuple(out)


def _clears(event, opt) -> bool:
    """A `zero_grad()` of the stepped optimizer itself (another optimizer's clears other gradients)."""
    return event.kind == "zero_grad" and event.data.get("opt") == id(opt)


def _where(stack, via: bool = False) -> str:
    """`file.py:12` of the innermost user frame; with `via`, `file.py:12 (via file.py:40)`."""
    if not stack:
        return "library code"
    text = f"{os.path.basename(stack[0][0])}:{stack[0][1]}"
    if via and len(stack) > 1:
        text += f" (via {os.path.basename(stack[1][0])}:{stack[1][1]})"
    return text


def _base_optimizer(opt):
    """The torch optimizer inside wrappers (Accelerate's AcceleratedOptimizer, ...)."""
    while isinstance(getattr(opt, "optimizer", None), Optimizer):
        opt = opt.optimizer
    return opt


def _graph_size(tensors) -> int:
    """Autograd nodes reachable from the tensors' grad_fn (stops counting at _GRAPH_LIMIT)."""
    seen: set[int] = set()
    keep = []  # node wrappers stay alive while counting, so ids stay unique
    todo = [t.grad_fn for t in tensors if t.grad_fn is not None]
    while todo and len(seen) < _GRAPH_LIMIT:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        keep.append(node)
        todo.extend(n for n, _ in getattr(node, "next_functions", ()))
    return len(seen)


def _graph_tensors(value, limit: int = 10_000) -> list:
    """Tensors carrying an autograd graph held by a value or one container level of it."""
    if isinstance(value, torch.Tensor):
        return [value] if value.grad_fn is not None else []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple, collections.deque)):
        return [v for v in list(value)[-limit:] if isinstance(v, torch.Tensor) and v.grad_fn is not None]
    return []


def _tensors_in(obj, limit: int = 100_000):
    """Tensors inside a loaded or saved object (dicts, lists, tuples), depth-first."""
    todo, found = [obj], 0
    while todo and found < limit:
        item = todo.pop()
        if isinstance(item, torch.Tensor):
            found += 1
            yield item
        elif isinstance(item, dict):
            todo.extend(item.values())
        elif isinstance(item, (list, tuple)):
            todo.extend(item)


def _plain(obj, limit: int = 100_000) -> bool:
    """Only tensors, numbers, strings and plain containers: what weights_only=True accepts."""
    todo, count = [obj], 0
    while todo and count < limit:
        item = todo.pop()
        count += 1
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, (list, tuple, set)):
            todo.extend(item)
        elif not isinstance(item, (torch.Tensor, int, float, bool, str, bytes, type(None), torch.Size,
                                   torch.dtype, torch.device)):
            return False
    return True


def _batch_size(batch) -> int | None:
    todo = [batch]
    while todo:
        item = todo.pop(0)
        if isinstance(item, torch.Tensor):
            return int(item.shape[0]) if item.dim() else None
        if isinstance(item, dict):
            todo.extend(item.values())
        elif isinstance(item, (list, tuple)):
            todo.extend(item)
    return None


def _writable(f) -> bool:
    try:
        return bool(f.writable())
    except Exception:  # noqa: BLE001 - a file-like object without writable(), or a closed one
        return False


def _mb(nbytes: int) -> str:
    return f"{nbytes / 1e6:.2f} MB" if nbytes >= 10_000 else f"{nbytes} bytes"


class Event:
    __slots__ = ("kind", "stack", "data")

    def __init__(self, kind: str, stack, **data) -> None:
        self.kind, self.stack, self.data = kind, stack, data

    @property
    def site(self):
        return self.stack[0] if self.stack else None


class _OptimizerState:
    def __init__(self, kind: str = "Optimizer") -> None:
        self.kind = kind  # the optimizer's class name
        self.site = None  # (path, line) of its first step call in the user's code
        self.steps = 0
        self.start = 0  # index in Trace.events where the current window starts
        self.watched = False  # a tensor hook sits on one of its parameters


class _ScalerState:
    def __init__(self) -> None:
        self.pending = False  # a scaled backward ran since the last update()
        self.unscaled = False  # unscale_() ran since that backward
        self.stepped: set[int] = set()  # optimizers whose step() ran since the last update()
        self.used = False  # a scaled backward ran at all (the checkpoint must hold the scaler)
        self.updates = 0  # update() calls (TL205: a scaler replaced after it adapted)


class _EvalForward:
    """One outermost forward of a module in eval mode with grad recording on."""

    __slots__ = ("stack", "module", "saved", "used")

    def __init__(self, stack, module: str) -> None:
        self.stack, self.module, self.saved, self.used = stack, module, 0, False


class _ManualUpdates:
    """Parameters updated by hand (`p -= lr * p.grad` under no_grad) in a run with no optimizer step:
    a change of the watched parameter between two backward calls counts as one update."""

    def __init__(self) -> None:
        self.ref = None  # weakref to the watched parameter
        self.value = None  # its value at the last backward
        self.count = 0

    def check(self, modules) -> bool:
        """At a backward: did the watched parameter change since the last one? Then watch again."""
        param = self.ref() if self.ref is not None else None
        changed = param is not None and not torch.equal(param.detach(), self.value)
        self.count += changed
        candidates = [p for module in modules for p in module.parameters() if p.requires_grad]
        if candidates:
            param = min(candidates, key=lambda p: p.numel())  # the smallest: a cheap copy per backward
            self.ref, self.value = weakref.ref(param), param.detach().clone()
        return changed


def _digest(value, into=None) -> str:
    """A SHA-256 of the exact bytes of the tensors in a value (dicts by key, lists in order) and
    the repr of everything else: equal digests mean bitwise-equal values."""
    top = into is None
    into = hashlib.sha256() if top else into
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        into.update(f"{tensor.dtype}{tuple(tensor.shape)}".encode())
        if tensor.numel():
            into.update(ctypes.string_at(tensor.data_ptr(), tensor.numel() * tensor.element_size()))
    elif isinstance(value, dict):
        for key in sorted(value, key=repr):
            into.update(repr(key).encode())
            _digest(value[key], into)
    elif isinstance(value, (list, tuple)):
        into.update(b"[")
        for item in value:
            _digest(item, into)
        into.update(b"]")
    else:
        into.update(repr(value).encode())
    return into.hexdigest()[:16] if top else ""


class _Recorder:
    """For `--resume-check`: per update step of every optimizer (numbered in the order the
    optimizers are built: both runs build them in the same order), what the step starts from (the
    loss of its backward, each param group's learning rate, digests of its parameters and state, of
    every optimizer's parameters, of the input batches since the last step and of torch's RNG state;
    Python's `random` is seeded from the OS in each process, and what it draws shows in the batch);
    and a copy of every file the script saves once the optimizer that stepped first has taken
    `save_after` steps, until the next step of any optimizer (a GAN saves its generator and its
    critic to two files).

    The run then goes on until every optimizer has taken `steps_after` steps past its count at that
    save (the resumed run: `bound` steps), or one of them 10 times that many (one that stopped
    training)."""

    def __init__(self, config: dict) -> None:
        self.save_after = config.get("save_after")
        self.steps_after = config.get("steps_after", 0)
        self.bound = config.get("bound")
        self.copy_to = config.get("copy_to")  # a folder
        self.checkpoint = None  # {"files": [{"path", "copy"}], "steps": [count per optimizer]}
        self.closed = False  # an optimizer stepped after the checkpoint's saves
        self.steps: list[dict] = []
        self.order: dict[int, int] = {}  # id(optimizer) -> its number
        self.optimizers: list = []  # weakrefs, by number
        self.labels: list[str | None] = []  # by number, once it stepped
        self.first = None  # id of the optimizer that stepped first
        self.batches: list[str] = []  # digests of the batches since the last step
        self.loss = None

    def batch(self, value) -> None:
        if len(self.batches) < 64:  # the tensors only: other objects' reprs may hold addresses
            self.batches.append(_digest(list(_tensors_in(value))))

    def built(self, opt) -> None:
        """An optimizer was built (or stepped before it was seen built: a class that skips
        Optimizer.__init__): it gets the next number."""
        if id(opt) not in self.order or self.optimizers[self.order[id(opt)]]() is not opt:
            self.order[id(opt)] = len(self.optimizers)
            self.optimizers.append(weakref.ref(opt))
            self.labels.append(None)

    def counts(self, states: dict) -> list[int]:
        """Each numbered optimizer's steps so far."""
        counts = [0] * len(self.optimizers)
        for oid, index in self.order.items():
            if oid in states and self.optimizers[index]() is not None:
                counts[index] = states[oid].steps
        return counts

    def stop_before(self, opt, states: dict) -> bool:
        """Before a step of `opt`: has the run taken the steps it needs?"""
        counts = self.counts(states)
        # optimizers that have not stepped (yet, or by the checkpoint) set no limit
        if self.bound is not None:
            limits = [self.bound if count else None for count in counts]
        elif self.checkpoint is not None:
            saved = self.checkpoint["steps"]
            limits = [c + self.steps_after if c else None for c in saved] + [None] * (len(counts) - len(saved))
        else:
            return False
        index = self.order.get(id(opt))
        if index is None or limits[index] is None or counts[index] < limits[index]:
            return False
        reached = all(limit is None or count >= limit for count, limit in zip(counts, limits))
        return reached or counts[index] >= limits[index] + 10 * max(self.bound or self.steps_after, 1)

    def step(self, opt, number: int, stack) -> None:
        if self.checkpoint is not None:
            self.closed = True
        self.built(opt)
        index = self.order[id(opt)]
        if self.first is None:
            self.first = id(opt)
        if self.labels[index] is None:
            self.labels[index] = _label(opt, stack)
        models = []
        for ref in self.optimizers:
            other = ref()
            models.append(_digest([p for g in other.param_groups for p in g["params"]]) if other is not None
                          else None)
        state = [opt.state.get(p, {}) for group in opt.param_groups for p in group["params"]]
        self.steps.append({"opt": index, "step": number, "loss": self.loss,
                           "lr": [float(g["lr"]) for g in opt.param_groups], "params": models[index],
                           "optimizer": _digest(state), "batch": _digest(self.batches),
                           "rng": _digest(torch.get_rng_state()), "models": models})
        self.batches = []

    def saved(self, path: str, counts: list[int]) -> None:
        if self.save_after is None or self.closed or not os.path.isfile(path):
            return
        if self.checkpoint is None:
            first = self.order.get(self.first)
            if first is None or counts[first] < self.save_after:
                return
            self.checkpoint = {"files": [], "steps": counts}
        files = self.checkpoint["files"]
        entry = next((f for f in files if f["path"] == path), None)
        if entry is None:
            entry = {"path": path, "copy": os.path.join(self.copy_to, f"{len(files)}-{os.path.basename(path)}")}
            files.append(entry)
        shutil.copyfile(path, entry["copy"])

    def moved(self, src: str, dst: str) -> None:
        """A checkpoint written to a temporary file is moved into place: its place is `dst`."""
        for entry in (self.checkpoint or {}).get("files", []):
            if entry["path"] == src:
                entry["path"] = dst

    def result(self) -> dict:
        return {"steps": self.steps, "checkpoint": self.checkpoint, "optimizers": self.labels,
                "first": self.order.get(self.first)}


def _label(opt, stack) -> str:
    """`opt_g (Adam at gan.py:40)`: the name it is stepped by (`opt_g.step()`, `scaler.step(opt_g)`)
    when the line shows one, its class and where it first stepped."""
    where = f"{type(opt).__name__} at {_where(stack)}"
    text = linecache.getline(stack[0][0], stack[0][1]) if stack else ""
    match = re.search(r"([\w.]+)\.step\(\s*\)", text) or re.search(r"\.step\(\s*([\w.]+)\s*[,)]", text)
    return f"{match.group(1)} ({where})" if match else where


def _reads_training(cls) -> bool:
    """A module class whose forward reads `self.training` (a mode-dependent forward)."""
    code = getattr(getattr(cls, "forward", None), "__code__", None)
    return code is not None and "training" in code.co_names


class Trace:
    """The recorder: install() patches torch; report() returns the child's JSON-ready result."""

    def __init__(self, max_steps: int, script: str) -> None:
        self.max_steps = max_steps
        self.script = os.path.abspath(script)
        self.user = UserCode()
        self.events: list[Event] = []
        self.optimizers: dict[int, _OptimizerState] = {}
        self.scalers: dict[int, _ScalerState] = {}
        self.steps = 0  # step() calls of all optimizers
        self.stopping = False
        # called when the script goes on training after the stop (it caught StopTrace): the child
        # writes the report and ends the process; and after each step, with a snapshot of the result
        self.on_swallowed = None
        self.on_step = None
        self.manual = _ManualUpdates()
        config = os.environ.get("TRAINLINT_TRACE_RECORD")
        self.recorder = _Recorder(json.loads(config)) if config else None
        self.findings: dict[tuple, dict] = {}
        self.notes: dict[tuple, str] = {}
        self.lines: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self._local = threading.local()
        # autograd and modules
        self.backward_count = 0
        self.forward_count = 0
        self.current_backward: Event | None = None
        self.loss_outputs: list = []  # weakrefs to loss-function outputs since the last backward
        self.scaled: dict[int, tuple] = {}  # id(scaled loss) -> (weakref, scaler id, scale, weakref(loss))
        self.forwarded: dict[int, weakref.ref] = {}  # modules with a grad-recording forward since the last backward
        self.eval_parts: dict[int, list[str]] = {}  # of those forwarded in eval mode: their mode-dependent parts
        self.trained_modules: set[int] = set()  # modules a backward ran through in train mode
        self.mode_switches: dict[int, tuple] = {}  # id(module) -> (weakref, training, stack)
        self.eval_forwards: list[_EvalForward] = []
        self.retained: list[dict] = []  # TL502: graphs kept with retain_graph=True in this update
        self._mode_dependent: dict[int, list[str]] = {}
        self.sched_first: dict[tuple, str] = {}  # TL106 candidates: site -> evidence
        # TL501: (file, function line, name) -> [(step, tensors, nodes)]
        self.kept: dict[tuple, list] = collections.defaultdict(list)
        # checkpoints and loaders
        self.saves: list[dict] = []
        self.moved: set[str] = set()
        self.loaders: dict[int, dict] = {}
        self.passes: list[dict] = []
        self.samplers: dict[int, dict] = {}  # TL801: id(DistributedSampler) -> construction, set_epoch, passes
        self._trees: dict[str, ast.AST | None] = {}
        # TL205: construction site -> the GradScaler last built there
        self.scaler_sites: dict[tuple, weakref.ref] = {}
        # processes the script started (torch.multiprocessing.spawn, Process, pools): not traced
        self.processes = {"count": 0, "where": None}
        self.pid = os.getpid()
        self._handles = []

    # ----- bookkeeping -------------------------------------------------------------------------
    def _depth(self, name: str) -> int:
        return getattr(self._local, name, 0)

    def _enter(self, name: str) -> bool:
        """True for the outermost entry of a re-entrant wrapper (nested calls are not events)."""
        depth = getattr(self._local, name, 0)
        setattr(self._local, name, depth + 1)
        return depth == 0

    def _leave(self, name: str) -> None:
        setattr(self._local, name, getattr(self._local, name, 1) - 1)

    def _quiet(self) -> bool:
        """Inside torch.jit.trace/script (or any TorchScript tracing): the forwards there are the
        compiler's, not the script's, and the JIT compares graphs of repeated traces, so a hook must
        neither record nor add anything (a saved-tensor hook, a tensor op) to what is traced."""
        return bool(self._depth("jit")) or torch._C._get_tracing_state() is not None

    def _jit(self, original, *args, **kwargs):
        self._enter("jit")
        try:
            return original(*args, **kwargs)
        finally:
            self._leave("jit")

    def stack(self):
        """The user frames of the current call (trainlint's own frames are not user code)."""
        return self.user.stack(sys._getframe(1))

    def find(self, code: str, stack, evidence: str, confirm_only: bool = False) -> None:
        """A runtime finding at the innermost user frame; the first evidence for a site is kept.

        `confirm_only`: evidence that confirms a static finding at that line but is too ambiguous
        to report on its own (a bare state_dict saved: an export or a checkpoint?).
        """
        if not stack:
            return
        key = (code, *stack[0])
        entry = self.findings.get(key)
        if entry is None:
            self.findings[key] = {"code": code, "path": stack[0][0], "line": stack[0][1],
                                  "stack": [list(f) for f in stack], "evidence": evidence, "count": 1,
                                  "confirm_only": confirm_only}
        else:
            entry["count"] += 1
            for frame in stack:
                if list(frame) not in entry["stack"]:
                    entry["stack"].append(list(frame))

    def note(self, code: str, stack, text: str) -> None:
        """Why a hazard did not show at a line that ran (for NOT CONFIRMED)."""
        for frame in stack or ():
            self.notes.setdefault((code, *frame), text)

    def opt_state(self, opt) -> _OptimizerState:
        state = self.optimizers.get(id(opt))
        if state is None:
            state = self.optimizers[id(opt)] = _OptimizerState(type(opt).__name__)
        return state

    def scaler_state(self, scaler) -> _ScalerState:
        return self.scalers.setdefault(id(scaler), _ScalerState())

    # ----- line coverage -------------------------------------------------------------------------
    def _trace_calls(self, frame, event, arg):
        if frame.f_code.co_filename in self.user:
            return self._trace_lines
        return None

    def _trace_lines(self, frame, event, arg):
        if event == "line":
            self.lines[frame.f_code.co_filename][frame.f_lineno] += 1
        return self._trace_lines

    # ----- installation --------------------------------------------------------------------------
    def install(self) -> None:
        self._handles += [
            register_optimizer_step_pre_hook(self._optimizer_pre),
            register_optimizer_step_post_hook(self._optimizer_post),
            register_module_forward_pre_hook(self._forward_pre),
            register_module_forward_hook(self._forward_post, always_call=True),
        ]
        self._wrap(torch.autograd, "backward", self._backward)
        self._wrap(torch.nn.Module, "train", self._module_train)
        self._wrap(torch.nn.Module, "zero_grad", self._module_zero_grad)
        self._wrap(Optimizer, "zero_grad", self._optimizer_zero_grad)
        self._wrap(LRScheduler, "step", self._scheduler_step)
        if not issubclass(ReduceLROnPlateau, LRScheduler) or "step" in vars(ReduceLROnPlateau):
            self._wrap(ReduceLROnPlateau, "step", self._scheduler_step)
        scaler_cls = torch.amp.GradScaler
        self._wrap(scaler_cls, "__init__", self._scaler_init)
        self._wrap(scaler_cls, "scale", self._scaler_scale)
        self._wrap(scaler_cls, "unscale_", self._scaler_unscale)
        self._wrap(scaler_cls, "step", self._scaler_step)
        self._wrap(scaler_cls, "update", self._scaler_update)
        for name in ("clip_grad_norm_", "clip_grad_value_"):
            wrapped = self._wrap(torch.nn.utils, name, functools.partial(self._clip, name))
            setattr(torch.nn.utils.clip_grad, name, wrapped)
        for name in _LOSS_FUNCTIONS:
            self._wrap(F, name, self._loss_function)
        save = self._wrap(torch, "save", self._save)
        load = self._wrap(torch, "load", self._load)
        torch.serialization.save, torch.serialization.load = save, load
        self._wrap(os, "replace", self._move)
        self._wrap(os, "rename", self._move)
        self._wrap(pickle, "load", self._pickle_load)
        self._wrap(pickle, "loads", self._pickle_load)
        self._wrap(dataloader.DataLoader, "__init__", self._loader_init)
        self._wrap(dataloader.DataLoader, "__iter__", self._loader_iter)
        self._wrap(dataloader._BaseDataLoaderIter, "__next__", self._loader_next)
        distributed = torch.utils.data.distributed.DistributedSampler
        self._wrap(distributed, "__init__", self._sampler_init)
        self._wrap(distributed, "set_epoch", self._sampler_set_epoch)
        self._wrap(distributed, "__iter__", self._sampler_iter)
        self._wrap(warnings, "showwarning", self._show_warning)
        self._wrap(multiprocessing.process.BaseProcess, "start", self._process_start)
        if self.recorder is not None:
            self._wrap(Optimizer, "__init__", self._optimizer_init)
        # TorchScript: the instrumentation steps aside while a function or module is traced or
        # compiled (SummaryWriter.add_graph calls torch.jit.trace); both the public names and the
        # modules torch's own callers reach them through
        for owner, names in ((torch.jit, ("trace", "trace_module", "_get_trace_graph", "script")),
                             (torch.jit._trace, ("trace", "trace_module", "_get_trace_graph")),
                             (torch.jit._script, ("script",))):
            for name in names:
                if hasattr(owner, name):
                    self._wrap(owner, name, self._jit)
        sys.settrace(self._trace_calls)
        threading.settrace(self._trace_calls)

    def _process_start(self, original, process, *args, **kwargs):
        if os.getpid() == self.pid:
            self.processes["count"] += 1
            if self.processes["where"] is None:
                stack = self.stack()
                self.processes["where"] = _where(stack) if stack else None
        return original(process, *args, **kwargs)

    def _show_warning(self, original, message, category, filename, lineno, file=None, line=None):
        """A warning that torch raised through one of trainlint's wrappers (its stacklevel then names a
        trainlint frame): shown at the user's line that made the call, as an untraced run shows it."""
        if os.path.realpath(filename).startswith(_PACKAGE):
            stack = self.stack()
            if stack:
                filename, lineno, line = stack[0][0], stack[0][1], None
        return original(message, category, filename, lineno, file, line)

    def _wrap(self, owner, name: str, handler):
        original = getattr(owner, name)

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            return handler(original, *args, **kwargs)

        setattr(owner, name, wrapper)
        return wrapper

    # ----- optimizer steps: the update clock ---------------------------------------------------------
    def _optimizer_pre(self, opt, args, kwargs) -> None:
        if self._depth("scaler_step") or not self._enter("opt_step"):
            return
        closure = args[1] if len(args) > 1 else kwargs.get("closure")
        try:
            self._begin_step(_base_optimizer(opt), self.stack(), via_scaler=None)
        except BaseException:
            self._leave("opt_step")  # the post-hook will not run
            raise
        # step(closure) (LBFGS, ...): the backward calls inside the closure are this step's own
        # evaluations of the loss, not micro-batches of the next window
        self._local.closure = len(self.events) if closure is not None else None

    def _optimizer_init(self, original, opt, *args, **kwargs):
        result = original(opt, *args, **kwargs)
        self.recorder.built(opt)
        return result

    def _optimizer_post(self, opt, args, kwargs) -> None:
        if self._depth("scaler_step"):
            return
        self._leave("opt_step")
        start = getattr(self._local, "closure", None)
        self._local.closure = None
        if start is None or self._depth("opt_step"):
            return
        inside = self.events[start:]
        for e in inside:
            if e.kind == "backward":
                self.note("TL102", e.stack, "backward ran inside the closure given to optimizer.step(): each call "
                                            "is one evaluation of the loss for that step, not accumulation")
            elif e.kind == "zero_grad":
                self.note("TL104", e.stack, "zero_grad ran inside the closure given to optimizer.step(), before "
                                            "that evaluation's backward")
        self.opt_state(_base_optimizer(opt)).start = len(self.events)

    def _scaler_step(self, original, scaler, optimizer, *args, **kwargs):
        stack = self.stack()
        state = self.scaler_state(scaler)
        if id(optimizer) in state.stepped and scaler.is_enabled():
            self.find("TL204", stack, f"scaler.step() at {_where(stack)} ran twice for one optimizer without "
                                      f"scaler.update() between: the scale never adapts (GradScaler raises here)")
        state.stepped.add(id(optimizer))
        self._begin_step(_base_optimizer(optimizer), stack, via_scaler=scaler)
        self._enter("scaler_step")
        try:
            return original(scaler, optimizer, *args, **kwargs)
        finally:
            self._leave("scaler_step")

    def _begin_step(self, opt, stack, via_scaler) -> None:
        self.check_stopped()
        state = self.opt_state(opt)
        window = self.events[state.start:]
        self._check_window(opt, state, window, stack)
        self._check_retained()
        self._scan_kept(state.steps + 1)
        if (self.recorder.stop_before(opt, self.optimizers) if self.recorder is not None
                else state.steps >= self.max_steps):
            self.stop()
            raise StopTrace(f"stopped before optimizer step {state.steps + 1}")
        if via_scaler is None:
            if any(scaler.pending and not scaler.unscaled for scaler in self.scalers.values()):
                self.find("TL204", stack, f"optimizer.step() at {_where(stack)} applied gradients still "
                                          f"multiplied by the GradScaler's scale: the update is that many times "
                                          f"too large and inf/NaN steps are not skipped")
        state.steps += 1
        if self.recorder is not None:
            self.recorder.step(opt, state.steps, stack)
        if state.site is None and stack:
            state.site = stack[0]
        self.steps += 1
        self.events.append(Event("step", stack, opt=id(opt), number=state.steps))
        state.start = len(self.events)
        if not state.watched:
            self._watch(opt, state)
        if self.on_step is not None:
            self.on_step()

    def stop(self) -> None:
        """From now on the run is over: the next hook that sees the script still training ends it."""
        self.stopping = True

    def check_stopped(self) -> None:
        """Called first by every hook of the training loop: after the stop (StopTrace raised, or the
        parent's SIGTERM) the script should be unwinding; if it trains on, it caught the stop
        (`except:` or `except BaseException:`), and nothing it does now may become a finding."""
        if self.stopping and self.on_swallowed is not None:
            self.on_swallowed()

    def _watch(self, opt, state: _OptimizerState) -> None:
        """A tensor hook on one parameter: it sees what `.grad` held when each backward arrives."""
        for group in opt.param_groups:
            for param in group["params"]:
                if param.requires_grad and param.grad is not None:
                    state.watched = True
                    ref = weakref.ref(param)
                    param.register_hook(functools.partial(self._grad_arrives, id(opt), ref))
                    return

    def _grad_arrives(self, opt_id: int, ref, grad) -> None:
        param = ref()
        if param is None:
            return
        held = param.grad
        cleared = held is None or not bool(held.count_nonzero())
        backward = self.current_backward
        self.events.append(Event("grad", backward.stack if backward else (), opt=opt_id, cleared=cleared,
                                 backward=backward))

    def _check_window(self, opt, state: _OptimizerState, window: list[Event], step_stack) -> None:
        """TL101, TL102, TL104, TL105, TL202 over the events since `opt`'s previous step."""
        number = state.steps + 1
        backward_sites = collections.Counter(e.site for e in window if e.kind == "backward")
        accumulated = {site for site, count in backward_sites.items() if count > 1}
        # TL101: steps of each LR scheduler of this optimizer per optimizer step
        if state.steps >= 1:  # before the first step the window is partial (steps follow the scheduler)
            scheds = [e for e in window if e.kind == "sched" and e.data["opt"] == id(opt)]
            for scheduler, times in collections.Counter(e.data["sched"] for e in scheds).items():
                stack = next(e.stack for e in scheds if e.data["sched"] == scheduler)
                if times > 1:
                    self.find("TL101", stack, f"the LR scheduler stepped {times}x per optimizer step at "
                                              f"{_where(stack)}: the schedule runs {times}x too fast")
                else:
                    self.note("TL101", stack, "the LR scheduler stepped once per optimizer step")
        # TL102: backward calls per step and the loss's scale; only the backward calls since the last
        # clear of this optimizer's gradients add up in what the step applies
        arrivals = [e for e in window if e.kind == "grad" and e.data["opt"] == id(opt)]
        last_clear = max((i for i, a in enumerate(arrivals) if a.data["cleared"]), default=0)
        reaching = len(arrivals) - last_clear
        for e in window:
            if e.kind != "backward":
                continue
            count = backward_sites[e.site]
            ratio = e.data.get("ratio")
            if count < 2:
                self.note("TL102", e.stack, "one backward call per optimizer step: no accumulation at run time")
            elif arrivals and reaching < 2:
                self.note("TL102", e.stack, f"backward ran {count}x per optimizer step, but the gradients were "
                                            "cleared between them: only the last one's reached the step, "
                                            "nothing added up (TL104)")
            elif ratio is None:
                self.note("TL102", e.stack, "the loss could not be traced back to a loss function")
            elif e.data.get("reduction") != "mean":
                self.note("TL102", e.stack, f"the loss uses reduction={e.data.get('reduction')!r}")
            elif abs(ratio - 1) < 1e-3:
                what = f"the mean itself ({e.data['root']})" if "root" in e.data else "the un-divided mean loss"
                self.find("TL102", e.stack, f"backward ran {count}x per optimizer step at {_where(e.stack)} on "
                                            f"{what} (scale 1.0, expected 1/{count}): the accumulated gradient "
                                            f"is {count}x too large")
            else:
                self.note("TL102", e.stack, f"the loss was scaled by {ratio:.4g} for {count} backward calls "
                                            f"per optimizer step")
        # TL104 / TL105: what .grad held when each backward arrived (the watched parameter)
        if arrivals and state.steps >= 1:
            if not any(a.data["cleared"] for a in arrivals):
                self.find("TL105", step_stack, f"optimizer.step() at {_where(step_stack)} (update {number}) "
                                               f"applied gradients still holding the previous update's: "
                                               f"nothing cleared them since the last step")
            else:
                self.note("TL105", step_stack, "the gradients were cleared between optimizer steps")
        seen_sites = set()
        for index, arrival in enumerate(arrivals):
            if arrival.data["cleared"] and arrival.site in seen_sites:
                start = window.index(arrivals[index - 1])
                end = window.index(arrival)
                clears = [e for e in window[start:end] if e.kind == "zero_grad"]
                total = backward_sites[arrival.site]
                for clear in clears or [arrival]:
                    self.find("TL104", clear.stack, f"zero_grad at {_where(clear.stack)} cleared the gradients "
                                                    f"between micro-batches: of {total} backward calls per "
                                                    f"optimizer step only the last reached the step")
            seen_sites.add(arrival.site)
        for e in window:
            if e.kind == "zero_grad" and e.site and ("TL104", *e.site) not in self.findings:
                self.note("TL104", e.stack, "zero_grad ran once per optimizer step, not between the "
                                            "micro-batches of one update")
        # TL202: clipping between two backward calls of one accumulation window
        for index, e in enumerate(window):
            if e.kind != "clip":
                continue
            # what the clip sees: the backwards since the last clear before it; what it cuts reaches
            # the step only through the backwards before the next clear after it
            start = max((i + 1 for i, c in enumerate(window[:index]) if _clears(c, opt)), default=0)
            end = next((index + 1 + i for i, c in enumerate(window[index + 1:]) if _clears(c, opt)), len(window))
            before = {b.site for b in window[start:index] if b.kind == "backward"}
            after = {b.site for b in window[index + 1:end] if b.kind == "backward"}
            if before & after & accumulated:
                clips = sum(1 for c in window if c.kind == "clip" and c.site == e.site)
                self.find("TL202", e.stack, f"{e.data['name']} at {_where(e.stack)} ran {clips}x per optimizer "
                                            f"step, between micro-batches: each clip saw a partial sum")
            else:
                self.note("TL202", e.stack, "clipping ran once per optimizer step, after the last backward")

    # ----- backward ------------------------------------------------------------------------------------
    def _backward(self, original, tensors, *args, **kwargs):
        if self._quiet():
            return original(tensors, *args, **kwargs)
        if not self._enter("backward"):
            try:
                return original(tensors, *args, **kwargs)
            finally:
                self._leave("backward")
        try:
            self.check_stopped()
            stack = self.stack()
            self._check_manual(stack)
            root = tensors if isinstance(tensors, torch.Tensor) else (tensors[0] if tensors else None)
            event = Event("backward", stack)
            if isinstance(root, torch.Tensor):
                if self.recorder is not None and root.numel() == 1:
                    self.recorder.loss = float(root.detach().float())
                self._describe_loss(root, event)
                retain = args[1] if len(args) > 1 else kwargs.get("retain_graph")
                self._follow_retained(root, event, bool(retain))
            self._check_train_mode(stack)
            self.events.append(event)
            self.backward_count += 1
            self.current_backward = event
            self.loss_outputs.clear()
            return original(tensors, *args, **kwargs)
        finally:
            self.current_backward = None
            self._leave("backward")

    def _check_manual(self, stack) -> None:
        """With no optimizer step so far: count updates made by hand, and stop after --max-steps."""
        if any(state.steps for state in self.optimizers.values()):
            return
        modules = [m for m in (ref() for ref in self.forwarded.values()) if m is not None]
        try:
            self.manual.check(modules)
        except Exception:  # noqa: BLE001 - a parameter that cannot be compared or copied: not watched
            self.manual.ref = None
        if self.manual.count >= self.max_steps:
            self.stop()
            raise StopTrace(f"stopped before hand-written update {self.max_steps + 1}")

    def manual_update_site(self) -> str | None:
        """`file.py:12` of a line that ran and updates a tensor in place from a `.grad`."""
        for path, counts in self.lines.items():
            tree = self._tree(path)
            if tree is None:
                continue
            for node in ast.walk(tree):
                if getattr(node, "lineno", None) not in counts or not isinstance(node, (ast.AugAssign, ast.Call,
                                                                                        ast.Assign)):
                    continue
                if isinstance(node, ast.AugAssign):
                    update = not ast.unparse(node.target).endswith(".grad")
                elif isinstance(node, ast.Call):
                    update = isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_")
                else:
                    update = any(ast.unparse(t).endswith(".data") for t in node.targets)
                if update and ".grad" in ast.unparse(node):
                    return f"{os.path.basename(path)}:{node.lineno}"
        return None

    def _follow_retained(self, root, event: Event, retain: bool) -> None:
        """TL502: does a later backward go through a graph kept with retain_graph=True?"""
        if not (retain or self.retained) or root.grad_fn is None:
            return
        nodes: dict[int, object] = {}  # the node objects are held, so their ids stay unique
        todo = [root.grad_fn]
        while todo and len(nodes) < _GRAPH_LIMIT:
            node = todo.pop()
            if node is None or id(node) in nodes:
                continue
            nodes[id(node)] = node
            todo.extend(n for n, _ in getattr(node, "next_functions", ()))
        for kept in self.retained:
            if not kept["used"] and not kept["nodes"].keys().isdisjoint(nodes):
                kept["used"] = True
                kept["nodes"] = {}
        if retain:
            self.retained.append({"event": event, "nodes": nodes, "used": False})

    def _check_retained(self) -> None:
        """Graphs kept with retain_graph=True in the update that is ending (or at the end of the run)."""
        for kept in self.retained:
            stack = kept["event"].stack
            if kept["used"]:
                self.note("TL502", stack, "a later backward went through the retained graph")
            else:
                self.find("TL502", stack, f"backward(retain_graph=True) at {_where(stack)} kept the graph and its "
                                          f"saved tensors alive, and no later backward went through it")
        self.retained.clear()

    def _describe_loss(self, root, event: Event) -> None:
        """The root's value relative to the loss functions it came from (TL102), and its GradScaler."""
        base, scale = root, 1.0
        entry = self.scaled.pop(id(root), None)
        if entry is not None and entry[0]() is root:
            _, scaler_id, scale, loss_ref = entry
            self.scaler_state_by_id(scaler_id).pending = True
            self.scaler_state_by_id(scaler_id).used = True
            self.scaler_state_by_id(scaler_id).unscaled = False
            event.data["scale"] = scale
            base = loss_ref() if loss_ref() is not None else root
        losses = [ref() for ref, _ in self.loss_outputs if ref() is not None]
        reductions = {red for ref, red in self.loss_outputs if ref() is not None}
        if base.numel() != 1 or base.grad_fn is None:
            return
        node = base.grad_fn
        while type(node).__name__ == "NegBackward0" and node.next_functions:  # -(...).mean()
            node = node.next_functions[0][0]
        op = type(node).__name__
        if op.startswith("Mean") or "LossBackward" in op:  # the root is a mean itself: nothing divides it
            event.data.update(ratio=1.0, reduction="mean", root=op)
            return
        if not losses:
            return
        targets = {id(t.grad_fn): t for t in losses if t.grad_fn is not None}
        keep = [t.grad_fn for t in losses]
        found, todo, depth = [], [(base.grad_fn, 0)], {}
        while todo:
            node, level = todo.pop()
            if node is None or id(node) in depth:
                continue
            depth[id(node)] = level
            keep.append(node)
            if id(node) in targets:
                found.append(targets[id(node)])
                continue
            if level < 8:
                todo.extend((n, level + 1) for n, _ in node.next_functions)
        total = sum(float(t.detach().float().sum()) for t in found)
        if found and total != 0:
            event.data["ratio"] = float(base.detach().float().sum()) / total
            event.data["reduction"] = reductions.pop() if len(reductions) == 1 else "mixed"

    def scaler_state_by_id(self, scaler_id: int) -> _ScalerState:
        return self.scalers.setdefault(scaler_id, _ScalerState())

    def _loss_function(self, original, *args, **kwargs):
        out = original(*args, **kwargs)
        if self._quiet():
            return out
        self._note_loss(out, kwargs.get("reduction", "mean"))
        return out

    def _note_loss(self, out, reduction) -> None:
        if isinstance(out, torch.Tensor) and out.requires_grad and out.numel() == 1:
            if not any(ref() is out for ref, _ in self.loss_outputs):
                self.loss_outputs.append((weakref.ref(out), reduction))

    # ----- GradScaler ---------------------------------------------------------------------------------
    def _scaler_init(self, original, scaler, *args, **kwargs):
        """TL205: a GradScaler built again at a site whose previous scaler already ran updates."""
        outer = self._enter("scaler_init")
        try:
            original(scaler, *args, **kwargs)
        finally:
            self._leave("scaler_init")
        stack = self.stack() if outer else None
        if not stack:
            return
        self.scalers[id(scaler)] = _ScalerState()  # not the state of a collected scaler with this id
        previous = self.scaler_sites.get(stack[0])
        self.scaler_sites[stack[0]] = weakref.ref(scaler)
        before = previous() if previous is not None else None
        if before is None or not self.scaler_state(before).updates or not scaler.is_enabled():
            return
        self.find("TL205", stack, f"a new GradScaler was built at {_where(stack)} after "
                                  f"{self.scaler_state(before).updates} update(s) of the previous one: its scale "
                                  f"restarted at {float(scaler.get_scale()):g} where the previous scaler had "
                                  f"reached {float(before.get_scale()):g}")

    def _scaler_scale(self, original, scaler, outputs, *args, **kwargs):
        scaled = original(scaler, outputs, *args, **kwargs)
        if isinstance(scaled, torch.Tensor) and isinstance(outputs, torch.Tensor) and scaler.is_enabled():
            self.scaled[id(scaled)] = (weakref.ref(scaled), id(scaler), float(scaler.get_scale()),
                                       weakref.ref(outputs))
        return scaled

    def _scaler_unscale(self, original, scaler, optimizer, *args, **kwargs):
        self.scaler_state(scaler).unscaled = True
        self.events.append(Event("unscale", self.stack()))
        return original(scaler, optimizer, *args, **kwargs)

    def _scaler_update(self, original, scaler, *args, **kwargs):
        state = self.scaler_state(scaler)
        state.updates += 1
        state.pending = state.unscaled = False
        state.stepped.clear()
        return original(scaler, *args, **kwargs)

    # ----- clipping -----------------------------------------------------------------------------------
    def _clip(self, name: str, original, *args, **kwargs):
        if not self._enter("clip"):
            try:
                return original(*args, **kwargs)
            finally:
                self._leave("clip")
        try:
            stack = self.stack()
            scaled = [s for s in self.scalers.values() if s.pending and not s.unscaled]
            scale = next((e.data.get("scale") for e in reversed(self.events) if e.kind == "backward"), None)
            result = original(*args, **kwargs)
            limit = args[1] if len(args) > 1 else kwargs.get("max_norm", kwargs.get("clip_value"))
            measured = f"total norm {float(result):.4g} against max_norm {limit}" if (
                name == "clip_grad_norm_" and isinstance(result, torch.Tensor)) else f"clip value {limit}"
            if scaled:
                self.find("TL201", stack, f"{name} at {_where(stack)} ran on gradients still multiplied by the "
                                          f"GradScaler's scale ({scale:g}): {measured}; scaler.unscale_() had "
                                          f"not run")
            elif any(s.pending for s in self.scalers.values()):
                self.note("TL201", stack, "clipping ran after scaler.unscale_()")
            elif self.scalers:
                self.note("TL201", stack, "no GradScaler-scaled gradients at the clip (the scaler is disabled, or "
                                          "its step and update had already run)")
            else:
                self.note("TL201", stack, "no GradScaler-scaled backward before the clip")
            last = next((e for e in reversed(self.events) if e.kind in ("step", "backward")), None)
            if last is not None and last.kind == "step":
                self.find("TL203", stack, f"{name} at {_where(stack)} ran after the optimizer step at "
                                          f"{_where(last.stack)} with no backward between: the update it was "
                                          f"meant for was already applied")
            else:
                self.note("TL203", stack, "clipping ran before the optimizer step")
            self.events.append(Event("clip", stack, name=name))
            return result
        finally:
            self._leave("clip")

    # ----- LR schedulers and zero_grad ----------------------------------------------------------------
    def _scheduler_step(self, original, scheduler, *args, **kwargs):
        if sys._getframe(2).f_code.co_name == "_initial_step":  # the constructor's own first step
            return original(scheduler, *args, **kwargs)
        if self._enter("sched"):
            stack = self.stack()
            opt = _base_optimizer(getattr(scheduler, "optimizer", None))
            self.events.append(Event("sched", stack, opt=id(opt), sched=id(scheduler)))
            if stack and self.opt_state(opt).steps == 0:
                self.sched_first.setdefault(stack[0], f"the LR scheduler stepped at {_where(stack)} before the "
                                                      f"optimizer's first step: the first LR value was skipped")
        try:
            return original(scheduler, *args, **kwargs)
        finally:
            self._leave("sched")

    def _optimizer_zero_grad(self, original, opt, *args, **kwargs):
        if self._enter("zero_grad"):
            self.events.append(Event("zero_grad", self.stack(), opt=id(_base_optimizer(opt))))
        try:
            return original(opt, *args, **kwargs)
        finally:
            self._leave("zero_grad")

    def _module_zero_grad(self, original, module, *args, **kwargs):
        if self._enter("zero_grad"):
            self.events.append(Event("zero_grad", self.stack(), module=id(module)))
        try:
            return original(module, *args, **kwargs)
        finally:
            self._leave("zero_grad")

    # ----- module mode and forwards (TL301, TL302, TL303) ------------------------------------------------
    def _module_train(self, original, module, mode=True):
        if self._quiet():
            return original(module, mode)
        if self._enter("mode"):
            self.mode_switches[id(module)] = (weakref.ref(module), bool(mode), self.stack())
        try:
            return original(module, mode)
        finally:
            self._leave("mode")

    def _mode_dependent_parts(self, module, training: bool) -> list[str]:
        """The submodules whose forward depends on the mode (dropout, batch norm tracking running
        statistics, a forward that reads `self.training`) that are now in train mode (`training`)
        or in eval mode."""
        cached = self._mode_dependent.get(id(module))
        if cached is None or cached[0]() is not module:
            parts = []
            for sub in module.modules():
                if isinstance(sub, _DropoutNd):
                    if sub.p > 0:
                        parts.append((weakref.ref(sub), f"{type(sub).__name__}(p={sub.p})"))
                elif isinstance(sub, _BatchNorm):
                    if sub.track_running_stats:
                        parts.append((weakref.ref(sub), type(sub).__name__))
                elif isinstance(sub, torch.nn.RNNBase):
                    if sub.dropout > 0:
                        parts.append((weakref.ref(sub), f"{type(sub).__name__}(dropout={sub.dropout})"))
                elif _reads_training(type(sub)):
                    parts.append((weakref.ref(sub), f"{type(sub).__name__} (its forward reads self.training)"))
            cached = self._mode_dependent[id(module)] = (weakref.ref(module), parts)
        return sorted({label for ref, label in cached[1] if ref() is not None and ref().training == training})

    def _forward_pre(self, module, args) -> None:
        if self._quiet():  # counted apart, so the post-hook of this forward stays quiet too
            self._enter("quiet_forward")
            return
        if not self._enter("forward"):
            return
        try:
            self.check_stopped()
        except BaseException:
            self._leave("forward")
            raise
        self.forward_count += 1
        record = None
        if self.recorder is not None and not isinstance(module, _Loss) and module.training:
            self.recorder.batch(args)
        if not isinstance(module, _Loss):
            grad = torch.is_grad_enabled()
            if grad and not module.training:
                record = _EvalForward(self.stack(), type(module).__name__)
                hooks = torch.autograd.graph.saved_tensors_hooks(functools.partial(self._pack, record),
                                                                 self._unpack)
                try:
                    hooks.__enter__()
                    record = (record, hooks)
                except RuntimeError:  # saved-tensor hooks disabled here by the script
                    record = (record, None)
            elif not grad:
                stack = self.stack()
                how = "torch.inference_mode()" if torch.is_inference_mode_enabled() else "torch.no_grad()"
                parts = self._mode_dependent_parts(module, True) if module.training else []
                if parts:
                    self.find("TL302", stack, f"{type(module).__name__} ran forward under {how} in train mode at "
                                              f"{_where(stack)}: {', '.join(parts)} active")
                elif module.training:
                    self.note("TL302", stack, "no dropout, batch norm or forward reading self.training was in train "
                                              "mode: train mode changes nothing in this forward")
                else:
                    self.note("TL302", stack, f"the forward under {how} ran in eval mode")
                    self.note("TL301", stack, f"the forward in eval mode ran under {how}")
        self._local.eval_forward = record

    def _forward_post(self, module, args, output) -> None:
        if self._depth("quiet_forward"):
            self._leave("quiet_forward")
            return
        if self._depth("forward") != 1:
            self._leave("forward")
            return
        self._leave("forward")
        record = getattr(self._local, "eval_forward", None)
        self._local.eval_forward = None
        if record is not None:
            forward, hooks = record
            if hooks is not None:
                hooks.__exit__(None, None, None)
            if forward.saved:
                self.eval_forwards.append(forward)
            else:
                self.note("TL301", forward.stack, "the forward in eval mode built no graph")
        if isinstance(module, _Loss):
            self._note_loss(output, getattr(module, "reduction", "mean"))
        elif torch.is_grad_enabled():
            # the mode-dependent parts in eval mode during this forward (TL303 at the backward)
            self.forwarded[id(module)] = weakref.ref(module)
            if not module.training:
                self.eval_parts[id(module)] = self._mode_dependent_parts(module, False)

    def _pack(self, record: _EvalForward, tensor):
        try:
            record.saved += tensor.numel() * tensor.element_size()
        except Exception:  # noqa: BLE001 - an exotic tensor subclass: still saved, size unknown
            record.saved += 1
        return record, tensor

    @staticmethod
    def _unpack(packed):
        record, tensor = packed
        record.used = True
        return tensor

    def _check_train_mode(self, backward_stack) -> None:
        """TL303: a backward through a module that trained in train mode and is now in eval mode."""
        for ref in list(self.forwarded.values()):
            module = ref()
            if module is None:
                continue
            if module.training:
                self.trained_modules.add(id(module))
                self.note("TL303", backward_stack, "backward ran with the model in train mode")
                switch = self.mode_switches.get(id(module))
                if switch is not None and switch[1]:
                    self.note("TL303", switch[2], "train mode was restored before the next backward")
            elif id(module) in self.trained_modules:
                switch = self._last_switch(module)
                stack = switch[2] if switch else backward_stack
                parts = self.eval_parts.get(id(module), [])
                if not parts:
                    self.note("TL303", stack, f"{type(module).__name__} has no dropout, batch norm or forward reading "
                                              f"self.training: eval mode changed nothing in its forward")
                    continue
                where = f"since eval() at {_where(switch[2], via=True)}" if switch else "in eval mode"
                self.find("TL303", stack,
                          f"backward at {_where(backward_stack)} ran with {type(module).__name__} {where} and "
                          f"no train() since: {', '.join(parts)} ran in inference behaviour in training forwards")
        self.forwarded.clear()
        self.eval_parts.clear()

    def _last_switch(self, module):
        switch = self.mode_switches.get(id(module))
        if switch is not None and switch[0]() is module:
            return switch
        for ref, training, stack in self.mode_switches.values():
            owner = ref()
            if owner is not None and not training and any(m is module for m in owner.modules()):
                return ref, training, stack
        return None

    # ----- TL501: graphs kept across iterations ------------------------------------------------------
    def _scan_kept(self, step: int) -> None:
        frame = sys._getframe(2)
        while frame is not None:
            code = frame.f_code
            if code.co_filename in self.user:
                items = list(frame.f_locals.items())
                owner = frame.f_locals.get("self")
                if owner is not None and hasattr(owner, "__dict__"):
                    items += [(f"self.{k}", v) for k, v in vars(owner).items()]
                for name, value in items:
                    try:
                        tensors = _graph_tensors(value)
                    except Exception:  # noqa: BLE001 - a user object with an odd container protocol
                        continue
                    if tensors:
                        key = (os.path.abspath(code.co_filename), code.co_firstlineno, name)
                        self.kept[key].append((step, len(tensors), _graph_size(tensors)))
            frame = frame.f_back

    def _check_kept(self) -> None:
        for (path, first, name), history in self.kept.items():
            steps = [s for s, _, _ in history]
            if len(history) < 3 or steps != list(range(steps[0], steps[0] + len(steps))):
                continue
            nodes = [n for _, _, n in history]
            counts = [c for _, c, _ in history]
            growing = all(b > a for a, b in zip(nodes, nodes[1:])) or all(b > a for a, b in zip(counts, counts[1:]))
            line = self._keeping_line(path, first, name)
            if line is None:
                continue
            stack = ((path, line),)
            if growing:
                self.find("TL501", stack, f"`{name}` kept autograd graphs across iterations: {counts[0]} "
                                          f"graph-carrying tensor(s) and {nodes[0]} autograd nodes at step "
                                          f"{steps[0]}, {counts[-1]} and {nodes[-1]} at step {steps[-1]}")
            else:
                self.note("TL501", stack, f"`{name}` held a graph of constant size across steps")

    def _tree(self, path: str):
        if path not in self._trees:
            try:
                self._trees[path] = ast.parse(Path(path).read_text(encoding="utf-8"))
            except (OSError, SyntaxError, ValueError):
                self._trees[path] = None
        return self._trees[path]

    def _keeping_line(self, path: str, first: int, name: str) -> int | None:
        """The statement that keeps `name` across iterations: `name.append(...)`, `name += ...`, ..."""
        tree = self._tree(path)
        if tree is None:
            return None
        scope = tree
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if start == first:
                    scope = node
                    break

        def is_name(expr) -> bool:
            return ast.unparse(expr) == name

        for where in (scope, tree):
            for node in ast.walk(where):
                if isinstance(node, ast.AugAssign) and is_name(node.target):
                    return node.lineno
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("append", "extend", "insert", "appendleft", "add")
                        and is_name(node.func.value)):
                    return node.lineno
                if isinstance(node, ast.Assign) and any(
                        (isinstance(t, ast.Subscript) and is_name(t.value))
                        or (is_name(t) and any(is_name(n) for n in ast.walk(node.value)))
                        for t in node.targets):
                    return node.lineno
        return None

    # ----- checkpoints (TL401, TL402, TL403) --------------------------------------------------------
    def _direct_user_caller(self, skip: int = 3) -> bool:
        return sys._getframe(skip).f_code.co_filename in self.user

    def _load(self, original, *args, **kwargs):
        if not self._direct_user_caller():
            return original(*args, **kwargs)
        stack = self.stack()
        flag = kwargs.get("weights_only")
        if flag is None:
            forced = os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0") not in ("0", "")
            flag = not forced
        source = args[0] if args else kwargs.get("f")
        result = original(*args, **kwargs)
        name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else type(source).__name__
        if not flag:
            also = (" It holds only tensors and plain containers, so weights_only=True loads it as well."
                    if _plain(result) else "")
            self.find("TL401", stack, f"torch.load at {_where(stack)} unpickled {name!r} with weights_only=False: "
                                      f"the full unpickler runs any code a crafted file names.{also}")
        else:
            self.note("TL401", stack, "torch.load ran with weights_only=True")
        return result

    def _pickle_load(self, original, *args, **kwargs):
        if not self._direct_user_caller():
            return original(*args, **kwargs)
        stack = self.stack()
        result = original(*args, **kwargs)
        tensors = sum(1 for _ in _tensors_in(result))
        if tensors:
            self.find("TL401", stack, f"pickle at {_where(stack)} unpickled a checkpoint holding {tensors} tensors "
                                      f"with the full unpickler: a crafted file runs code")
        else:
            self.note("TL401", stack, "the unpickled object holds no tensors (not a checkpoint)")
        return result

    def _save(self, original, *args, **kwargs):
        if not self._direct_user_caller():
            return original(*args, **kwargs)
        obj = args[0] if args else kwargs.get("obj")
        f = args[1] if len(args) > 1 else kwargs.get("f")
        stack = self.stack()
        if isinstance(f, (str, os.PathLike)):
            path = os.path.abspath(os.fspath(f))
            self.saves.append({"stack": stack, "path": path, "existed": os.path.exists(path)})
        elif isinstance(getattr(f, "name", None), (str, bytes)) and _writable(f):
            # a file object opened on a path (`with open(p, "wb") as f`): the open already truncated
            # that file, so the save writes it in place exactly as a path would
            path = os.path.abspath(os.fsdecode(f.name))
            self.saves.append({"stack": stack, "path": path, "existed": None})
        for tensor in _tensors_in(obj):
            try:
                storage = tensor.untyped_storage().nbytes()
            except Exception:  # noqa: BLE001 - sparse and other layouts have no plain storage
                continue
            size = tensor.numel() * tensor.element_size()
            if storage > size:
                self.find("TL403", stack, f"torch.save at {_where(stack)} wrote a view of {tensor.numel()} elements "
                                          f"whose storage holds {_mb(storage)}: the whole storage is written "
                                          f"for {_mb(size)} of data")
                break
        self._check_resume_bundle(obj, stack)
        result = original(*args, **kwargs)
        if self.recorder is not None and self.saves and self.saves[-1]["stack"] is stack:
            if hasattr(f, "flush"):
                f.flush()
            self.recorder.saved(self.saves[-1]["path"], self.recorder.counts(self.optimizers))
        return result

    def _check_resume_bundle(self, obj, stack) -> None:
        """TL404: a checkpoint bundle (a dict holding model weights and more) that leaves out the state
        of an optimizer, LR scheduler or GradScaler the run is using. A bare state_dict is an export."""
        def weights(v) -> bool:
            return isinstance(v, dict) and bool(v) and all(isinstance(t, torch.Tensor) for t in v.values())

        if not isinstance(obj, dict):
            return
        stepped = [n for n in self.optimizers.values() if n.steps]
        if weights(obj):
            if stepped:
                self.find("TL404", stack, f"torch.save at {_where(stack)} saved the model's weights alone while the "
                                          f"optimizer had taken {max(n.steps for n in stepped)} steps: a resume "
                                          f"from this file restarts the optimizer", confirm_only=True)
            return
        values = [v for v in obj.values() if isinstance(v, dict)]
        if not any(weights(v) for v in values):
            return
        missing = []
        if stepped and not any({"state", "param_groups"} <= v.keys() for v in values):
            missing.append(f"the optimizer ({max(n.steps for n in stepped)} steps taken)")
        if any(e.kind == "sched" for e in self.events) and not any(
                "last_epoch" in v and "base_lrs" in v for v in values):
            missing.append("the LR scheduler")
        if any(s.used for s in self.scalers.values()) and not any(
                "scale" in v and "growth_factor" in v for v in values):
            missing.append("the GradScaler")
        if missing:
            self.find("TL404", stack, f"torch.save at {_where(stack)} saved a checkpoint with the model's weights "
                                      f"but not the state of {' or '.join(missing)}: a resume from it does not "
                                      f"continue the run")
        else:
            self.note("TL404", stack, "the checkpoint holds the state of every optimizer, scheduler and scaler "
                                      "the run used")

    def _move(self, original, src, dst, *args, **kwargs):
        try:
            self.moved.add(os.path.abspath(os.fspath(src)))
            if self.recorder is not None:
                self.recorder.moved(os.path.abspath(os.fspath(src)), os.path.abspath(os.fspath(dst)))
        except TypeError:
            pass
        return original(src, dst, *args, **kwargs)

    def _check_saves(self) -> None:
        for save in self.saves:
            if save["path"] in self.moved:
                self.note("TL402", save["stack"], "the checkpoint was written to a temporary file and moved "
                                                  "into place")
                continue
            shown = os.path.relpath(save["path"]) if save["path"].startswith(os.getcwd()) else save["path"]
            over = {True: " over an existing file", False: "", None: " through a file object opened on it"}[
                save["existed"]]
            self.find("TL402", save["stack"], f"torch.save at {_where(save['stack'])} wrote {shown!r} in place{over}, "
                                              f"with no temporary file and os.replace: a crash mid-save leaves "
                                              f"a truncated checkpoint")

    # ----- data loaders (TL602; batch sizes for TL601) -----------------------------------------------
    def _loader_init(self, original, loader, *args, **kwargs):
        result = original(loader, *args, **kwargs)
        stack = self.stack()
        sampler = getattr(loader, "sampler", None)
        shuffles = isinstance(sampler, torch.utils.data.RandomSampler) or bool(getattr(sampler, "shuffle", False))
        try:
            size = len(loader.dataset)
        except Exception:  # noqa: BLE001 - an iterable dataset has no length
            size = None
        self.loaders[id(loader)] = {"ref": weakref.ref(loader), "stack": stack, "shuffles": shuffles,
                                    "sampler": type(sampler).__name__, "drop_last": bool(loader.drop_last),
                                    "batch_size": loader.batch_size, "size": size}
        return result

    def _loader_iter(self, original, loader, *args, **kwargs):
        iterator = original(loader, *args, **kwargs)
        info = self.loaders.get(id(loader))
        if info is not None and info["ref"]() is loader and isinstance(iterator, dataloader._BaseDataLoaderIter):
            run = {"loader": info, "sizes": [], "backward": self.backward_count, "forward": self.forward_count,
                   "where": None}
            self.passes.append(run)
            iterator._trainlint_pass = run
        return iterator

    def _loader_next(self, original, iterator, *args, **kwargs):
        self.check_stopped()
        run = getattr(iterator, "_trainlint_pass", None)
        try:
            batch = original(iterator, *args, **kwargs)
        except StopIteration:
            if run is not None:  # the pass is over: what ran during it is known now
                run["end"] = (self.backward_count, self.forward_count)
            raise
        if self.recorder is not None:
            self.recorder.batch(batch)
        if run is not None:
            run["sizes"].append(_batch_size(batch))
            if run["where"] is None:
                frame = sys._getframe(2)
                while frame is not None and frame.f_code.co_filename not in self.user:
                    frame = frame.f_back
                if frame is not None:
                    code = frame.f_code
                    lines = [line for _, _, line in code.co_lines() if line is not None]
                    run["where"] = (os.path.abspath(code.co_filename), min(lines, default=code.co_firstlineno),
                                    max(lines, default=code.co_firstlineno), frame.f_lineno)
        return batch

    # ----- data order (TL801) ----------------------------------------------------------------------
    def _sampler_init(self, original, sampler, *args, **kwargs):
        result = original(sampler, *args, **kwargs)
        self.samplers[id(sampler)] = {"ref": weakref.ref(sampler), "stack": self.stack(), "set_epoch": 0,
                                      "passes": []}
        return result

    def _sampler_set_epoch(self, original, sampler, *args, **kwargs):
        info = self.samplers.get(id(sampler))
        if info is not None and info["ref"]() is sampler:
            info["set_epoch"] += 1
        return original(sampler, *args, **kwargs)

    def _sampler_iter(self, original, sampler, *args, **kwargs):
        indices = list(original(sampler, *args, **kwargs))
        info = self.samplers.get(id(sampler))
        if info is not None and info["ref"]() is sampler:
            info["passes"].append({"order": indices, "backward": self.backward_count})
        return iter(indices)

    def _check_samplers(self) -> None:
        """A DistributedSampler whose passes that trained (a backward ran before the next pass, or
        before the end) yielded the same order."""
        for info in self.samplers.values():
            passes = info["passes"]
            ends = [p["backward"] for p in passes[1:]] + [self.backward_count]
            trained = [p["order"] for p, end in zip(passes, ends) if end > p["backward"]]
            if len(trained) < 2:
                if info["stack"] and passes:
                    self.note("TL801", info["stack"], "the run did not train through a second pass of the sampler")
                continue
            if all(order == trained[0] for order in trained[1:]):
                self.find("TL801", info["stack"],
                          f"the DistributedSampler built at {_where(info['stack'])} yielded the same order in all "
                          f"{len(trained)} training passes (first indices {trained[0][:6]}); set_epoch was called "
                          f"{info['set_epoch']} time(s)")
            else:
                self.note("TL801", info["stack"], "the sampler's order changed between epochs")

    def _check_loaders(self) -> None:
        for run in self.passes:
            info = run["loader"]
            if not run["sizes"] or run["where"] is None:
                continue
            # a pass that did not run to its end (a break, the stop after --max-steps) ends now
            backward_end, forward_end = run.get("end", (self.backward_count, self.forward_count))
            evaluation = backward_end == run["backward"] and forward_end > run["forward"]
            where = f"{os.path.basename(run['where'][0])}:{run['where'][3]}"
            if not evaluation:
                continue
            dropped = (info["drop_last"] and info["size"] is not None and info["batch_size"]
                       and info["size"] % info["batch_size"])
            if info["shuffles"]:
                self.find("TL602", info["stack"], f"the DataLoader built at {_where(info['stack'])} shuffles "
                                                  f"({info['sampler']}) and was iterated for evaluation at {where} "
                                                  f"({len(run['sizes'])} batches, no backward)")
            elif dropped:
                self.find("TL602", info["stack"], f"the DataLoader built at {_where(info['stack'])} dropped the last "
                                                  f"{dropped} of {info['size']} samples (drop_last=True) in an "
                                                  f"evaluation at {where}")
            else:
                self.note("TL602", info["stack"], "the evaluation loader neither shuffled nor dropped samples")

    # ----- the result --------------------------------------------------------------------------------
    def report(self, error: str | None, stopped: str) -> dict:
        sys.settrace(None)
        threading.settrace(None)
        for check in (self._check_kept, self._check_saves, self._check_loaders, self._check_eval_forwards,
                      self._check_retained, self._check_samplers):
            try:
                check()
            except Exception as exc:  # noqa: BLE001 - one failing check must not lose the others
                error = error or f"trainlint trace: internal error in {check.__name__}: {exc}"
        for where, evidence in self.sched_first.items():
            if ("TL101", *where) not in self.findings:
                self.find("TL106", (where,), evidence)
        return self.snapshot(error, stopped)

    def snapshot(self, error: str | None, stopped: str) -> dict:
        """The result as it stands (report() runs the end-of-run checks first)."""
        passes = [{"path": run["where"][0], "first": run["where"][1], "last": run["where"][2],
                   "sizes": run["sizes"]} for run in self.passes if run["where"] and run["sizes"]]
        optimizers = [{"type": state.kind, "path": state.site[0] if state.site else None,
                       "line": state.site[1] if state.site else None, "steps": state.steps}
                      for state in self.optimizers.values() if state.steps]
        manual = None
        if not optimizers and self.manual.count:
            manual = {"count": self.manual.count, "where": self.manual_update_site()}
        return {
            "steps": self.steps,
            "record": self.recorder.result() if self.recorder is not None else None,
            "optimizers": optimizers,
            "manual_updates": manual,
            "processes": self.processes if self.processes["count"] else None,
            "stopped": stopped,
            "error": error,
            "findings": [{k: v for k, v in f.items() if k != "count"} for f in list(self.findings.values())],
            "notes": [{"code": c, "path": p, "line": line, "note": text}
                      for (c, p, line), text in list(self.notes.items())],
            "lines": {os.path.abspath(path): dict(counts) for path, counts in list(self.lines.items())},
            "loader_passes": passes,
        }

    def _check_eval_forwards(self) -> None:
        by_site: dict[tuple, list[_EvalForward]] = collections.defaultdict(list)
        for forward in self.eval_forwards:
            if forward.stack:
                by_site[forward.stack[0]].append(forward)
        for where, forwards in by_site.items():
            unused = [f for f in forwards if not f.used]
            stack = forwards[0].stack
            if unused:
                saved = max(f.saved for f in unused)
                self.find("TL301", stack, f"{unused[0].module} in eval mode ran {len(unused)} forward(s) with grad "
                                          f"recording on at {_where(stack)}: each built an autograd graph holding "
                                          f"{_mb(saved)} for a backward that never ran")
            else:
                self.note("TL301", stack, "the graph built in eval mode was used by a backward (training, not "
                                          "evaluation)")
