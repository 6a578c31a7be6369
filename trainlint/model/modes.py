"""Module mode (`train()`/`eval()`) and grad mode (`no_grad`, `inference_mode`, `set_grad_enabled`)
along the code of one file, built once and queried by the TL3xx rules.

The two switches are independent, so the model tracks both through each function with a small
abstract interpreter over statements:

- the **mode facts** of each model (keyed by its normalised expression, `self.model`, `model`):
  the set of ways it may have been left (`eval`, `train`, freshly built, restored to a saved mode,
  chosen by a condition, unknown), each fact remembering the call that set it;
- the **grad state**: on, off, or chosen by a condition;
- branches join (a model put in train mode on one branch and eval mode on the other by the same
  `if` is "chosen by the condition", the train/val phase idiom), loops iterate to a fixpoint so
  that what the end of one iteration leaves reaches the next iteration's backward, `continue`,
  `break` and `return` leave by their own edges, `finally` always runs;
- same-file functions and methods are run in place where they are called (a few levels deep),
  with their parameters standing for the caller's arguments, and `@contextmanager` helpers are
  split at their `yield` around the `with` body;
- a function's entry state is the join of the states at its same-file call sites, so an
  `evaluate()` whose callers all call `model.eval()` (or wrap the call in `no_grad`) is known to
  start that way.

Rules read three things: `forwards()` (each forward call with the model's mode facts and the grad
state there), `unrestored()` (eval calls in a training loop that the next backward still sees) and
the evaluation-region helpers (`is_evaluation_function`, `evaluation_loop_of`, `computes_grad`).
"""

from __future__ import annotations

import builtins
import re
from typing import Iterable, Iterator

import libcst as cst

from trainlint.model import file_facts, frameworks
from trainlint.model.file_facts import file_fact
from trainlint.model.framework_classes import hook_step
from trainlint.model.grad_mode import (GRAD_FUNCTIONS, GRAD_ON_CONTEXTS, GRAD_WORDS, decorator_grad, is_false, is_true,
                                       literal_flags, literal_value, skipped_branch)
from trainlint.model.index import (FunctionInfo, Scope, dotted_name, iter_children, positional_args, unpacked_position,
                                   walk)
from trainlint.model.layers import (DEPENDENT, DETECTION_TARGETS, FREE, LIBRARY, builds_detection_model,
                                    passes_targets, verdict)
from trainlint.model.mode_names import (PASS_THROUGH_METHODS, WRAPPER_ATTRS, deep_copied, function_name,
                                        last_component, parameter_owners, strip_wrappers)
from trainlint.model.mode_state import (Abandon, ENTRY, Fact, Flow, Forward, Frame, NEW, OFF, ON, State, TRAINED,
                                        Unrestored, join_all)
from trainlint.model.mode_walk import FunctionRun, body_statements, statements_of
from trainlint.model.roles import MODEL, OPTIMIZER, SCALER, role_of_callee
from trainlint.model.summaries import _MEAN_REDUCED_LOSSES, ClassSummary
from trainlint.model.training import TrainingModel, training_model


# (the frameworks' own, `accelerator.unwrap_model(model)`, are the framework models' "unwrap" entries)
_UNWRAPPERS = frozenset({"unwrap", "compile",
                         "DistributedDataParallel", "DataParallel", "DDP", "FSDP", "FullyShardedDataParallel",
                         "prepare_model", "_unwrap_model"}) | frameworks.methods("unwrap")
_MODULE_CONSTRUCTOR_PREFIXES = ("torch.nn.", "torchvision.models.", "timm.create_model", "timm.models.")
_NOT_CONSTRUCTORS = ("torch.nn.parallel", "torch.nn.DataParallel", "torch.nn.functional", "torch.nn.utils",
                     "torch.nn.init", "torch.nn.Parameter")
# torch's module classes and the frameworks' model bases (LightningModule, PreTrainedModel: the data)
_MODULE_BASES = re.compile(r"(^|\.)(" + "|".join(("Module", *sorted(frameworks.model_bases()), "Sequential",
                                                  "ModuleDict", "ModuleList")) + r")$")
EVAL_FUNCTION_NAME = re.compile(
    r"^_*(?:(?:evaluate|evaluation|validate|validation|valid|val|eval|test)(?:_.*)?"
    r"|.*_(?:evaluate|evaluation|validate|validation|val|eval|test))$", re.IGNORECASE)

# pytest's test functions are named like evaluations; these test-loop names are not
_PYTEST_NAME = re.compile(r"^test_(?!(?:epoch|loop|model|one_epoch|step|batch|dataset|set|split)$)", re.IGNORECASE)
EVAL_LOADER_TEXT = re.compile(r"(?:^|[^a-z])(?:val|valid|validation|test|testing|eval|evaluation|dev|holdout)"
                              r"(?:[^a-z]|$)", re.IGNORECASE)
_MAX_ENTRY_DEPTH = 3
# torch.nn.functional's losses: one computed from a forward's output with grad off only measures it
_TORCH_LOSSES = _MEAN_REDUCED_LOSSES
_BUILTIN_NAMES = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__loader__",
                                             "__package__", "__path__", "__builtins__", "__debug__"}


class ModeModel:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.index = ctx.index
        self.training: TrainingModel = ctx.model(training_model)
        self.training_loops = {loop.node: loop for loop in self.training.loops}
        self._flows: dict[object, Flow] = {}
        self._entries: dict[object, State] = {}
        self._in_progress: set = set()
        self._computes_grad: dict[tuple[cst.CSTNode, tuple], bool] = {}
        self._loads: dict[cst.CSTNode, dict[str, list[cst.Name]]] = {}  # `_name_loads`
        self._module_classes: dict[str, bool] = {}
        self._trained: frozenset[str] | None = None
        self._frozen: frozenset[str] = frozenset()
        self._users: frozenset[str] | None | bool = False  # not computed yet
        self._volatile: bool | None = None
        self._foreign_writes: frozenset[str] | None = None
        self._unbound: frozenset[str] | None = None  # names bound nowhere (never_bound)
        self._star_modules: list[str] = []  # attributes assigned other than through `self`
        self._differentiating: list | None = None  # `_differentiating_classes`
        self._detection: list | None = None  # `_detection_classes`

    @property
    def has_volatile(self) -> bool:
        """The file passes `volatile=` to some call (legacy `Variable`s): only then are forward
        inputs traced back to one (a look-up per forward)."""
        if self._volatile is None:
            self._volatile = any(arg.keyword is not None and arg.keyword.value == "volatile"
                                 for site in self.index.calls for arg in site.node.args)
        return self._volatile

    # -- public queries ----------------------------------------------------------------------------
    def flow(self, function: FunctionInfo | None) -> Flow:
        """The interpreted flow of a function (None: the module's top-level code)."""
        key = function.node if function is not None else self.ctx.module
        if key not in self._flows:
            self._in_progress.add(key)
            try:
                self._flows[key] = self._run(function)
            finally:
                self._in_progress.discard(key)
        return self._flows[key]

    def candidate_functions(self) -> list[FunctionInfo | None]:
        """Functions worth interpreting: those with a mode switch, a training loop, an evaluation,
        and the module's own code."""
        wanted: set = set()
        for site in self.index.calls:
            func = site.node.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("eval", "train") and site.function:
                wanted.add(site.function.node)
        # helpers that functions switching modes call may run in the mode their caller chose, and
        # functions calling a switching helper run in the mode it leaves
        switching = set(wanted)
        for site in self.index.calls:
            target = self.index.callee(site.node, site.scope)
            if target is None:
                continue
            if site.function is not None and site.function.node in switching or (
                    site.function is None and _is_mode_call(site.node)):
                wanted.add(target.node)
            if target.node in switching and site.function is not None:
                wanted.add(site.function.node)
        for loop in self.training.loops:
            if loop.function is not None:
                wanted.add(loop.function.node)
        for function in self.index.functions:
            if self.is_evaluation_function(function):
                wanted.add(function.node)
        for site in self.index.calls:  # a function that measures a call's output (accuracy, a loss read)
            if site.function is not None and site.function.node not in wanted and \
                    self.metric_use(site.node) is not None:
                wanted.add(site.function.node)
        for loop in self.index.loops:
            if self.is_evaluation_loop(loop):
                function = self.index.function_at(loop)
                if function is not None:
                    wanted.add(function.node)
        result: list[FunctionInfo | None] = [None]
        result += [f for f in self.index.functions if f.node in wanted]
        return result

    def forwards(self) -> Iterator[Forward]:
        for function in self.candidate_functions():
            yield from self.flow(function).forwards

    def helper_forwards(self) -> Iterator[Forward]:
        """Calls of same-file helpers that run a model's forward in the eval mode the calling
        function set (`Forward.helper`), at the call."""
        for function in self.candidate_functions():
            yield from self.flow(function).helper_forwards

    def unrestored(self) -> list[Unrestored]:
        """Eval calls in training loops that a later backward still sees: per anchor, every model
        it leaves in eval mode (in key order, so the answer does not depend on which rule asked
        first), as named by one flow."""
        found: dict[cst.CSTNode, dict[str, Unrestored]] = {}
        chosen: dict[cst.CSTNode, Flow] = {}
        # the loop's own function first: its keys are the names written there; but an anchor in
        # another function (the caller's `evaluate(net)` seen again through the helper's loop) is
        # named in the terms of the flow of the function that holds it
        functions = [loop.function for loop in self.training.loops if loop.function is not None] + [None]
        seen = set()
        named_here: set[cst.CSTNode] = set()  # anchors named by the flow of their own function
        for function in functions:
            key = function.node if function is not None else None
            if key in seen:
                continue
            seen.add(key)
            flow = self.flow(function)
            for item in flow.unrestored:
                if item.anchor not in found or (item.anchor not in named_here and chosen[item.anchor] is not flow and
                                                self.index.function_at(item.anchor) is function):
                    found[item.anchor] = {}
                    chosen[item.anchor] = flow
                    if self.index.function_at(item.anchor) is function:
                        named_here.add(item.anchor)
                if chosen[item.anchor] is flow:
                    # per model, a backward the loop proves trains it (a forward of it with grad on)
                    # over one of a loop that may train something else (a probe inside the evaluation)
                    known = found[item.anchor].get(item.key)
                    if known is None or (known.forward is None and item.forward is not None):
                        found[item.anchor][item.key] = item
        return [items[k] for anchor, items in found.items() for k in sorted(items)
                if not self._refuted_by_own_function(items[k])
                and not chosen[anchor].untrained_in(items[k].loop, items[k].key)
                and not self.stepped_without(items[k].loop, items[k].key)]

    def never_bound(self, name: str) -> bool:
        """`name` is bound nowhere, so evaluating it raises NameError: not a builtin, every
        occurrence of it in the file is a bare expression statement (`stop`, a debugging halt), and
        each module the file star-imports is a project file whose text never mentions it (and that
        star-imports nothing itself); a file with `exec`, `globals()` or `__builtins__`, or a star
        import of a module outside the project, may bind anything."""
        if self._unbound is None:
            counts: dict[str, int] = {}
            bare: dict[str, int] = {}
            dynamic = False
            self._star_modules = []
            for node in walk(self.ctx.module):
                if isinstance(node, cst.Name):
                    counts[node.value] = counts.get(node.value, 0) + 1
                    parent = self.index.parents.get(node)
                    if node.value in ("exec", "globals", "vars", "locals", "__builtins__", "setattr", "eval") and \
                            not (isinstance(parent, cst.Attribute) and parent.attr is node):
                        dynamic = True  # `exec(...)`, `globals()[k] = v`; not `model.eval()`
                elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Name):
                    bare[node.value.value] = bare.get(node.value.value, 0) + 1
                elif isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar):
                    base = dotted_name(node.module) if node.module is not None else ""
                    self._star_modules.append("." * len(node.relative) + (base or ""))
            self._unbound = frozenset() if dynamic else frozenset(
                n for n, c in bare.items() if counts.get(n) == c and n not in _BUILTIN_NAMES)
        return name in self._unbound and all(self._star_module_lacks(base, name) for base in self._star_modules)

    def _star_module_lacks(self, base: str, name: str) -> bool:
        """`from <base> import *` cannot bind `name`: `base` is a project file whose text has no
        such word and no star import of its own."""
        linker = getattr(self.index, "linker", None)
        project = getattr(linker, "project", None)
        if project is None:
            return False
        qualname = f"{base}.{name}" if base and not base.endswith(".") else f"{base}{name}"
        found = project.find_module(qualname, linker.path)
        if found is None:
            return False
        text = project.source(found[0])
        return text is not None and "import *" not in text and re.search(rf"\b{re.escape(name)}\b", text) is None

    def loss_through_hand_over(self, item: Unrestored) -> cst.Call | None:
        """A call of the loop, handed `item.key` (or a model holding it) with grad on, whose body the
        run does not follow and whose result flows into the loss of `item.backward` in the same
        function (`loss = forward_pass(model, batch)` with `forward_pass` in another file): the
        backward reaches what that call computed from the model."""
        from trainlint.model.dataflow import dataflow  # dataflow builds on modes' neighbours
        parts = item.key.split(".")
        holders = {".".join(parts[:end]) for end in range(1, len(parts) + 1)}
        calls = [call for flow in self._flows.values() for key in holders
                 for call in flow.handed_calls.get(item.loop, {}).get(key, ())]
        if not calls:
            return None
        data = self.ctx.model(dataflow)
        root = data.backward_root(item.backward, self.index.scope_at(item.backward))
        if root is None:
            return None
        owner = self.index.function_at(item.backward)
        fed = data.names_feeding([root], item.backward)
        for call in calls:
            if self.index.function_at(call) is not owner:
                continue
            if any(node is call for node in walk(root)):
                return call
            assign = self.index.enclosing_statement(call)
            if isinstance(assign, cst.Assign) and assign.value is call and any(
                    dotted_name(n) in fed for t in assign.targets for n in walk(t)
                    if isinstance(n, (cst.Name, cst.Attribute)) and dotted_name(n)):
                return call
        return None

    def stepped_without(self, loop_node: cst.CSTNode, key: str) -> bool:
        """The loop steps optimizers whose constructions are all seen, and none holds parameters of
        `key` (nor of a module holding it or held by it): its backward may reach the model (a frozen
        teacher's logits feeding a generator's loss), but the loop never updates it."""
        loop = self.training_loops.get(loop_node)
        if loop is None or not loop.step_calls:
            return False
        for ref in loop.step_calls:
            owners = self._optimizer_owners(ref.node, ref.scope, full=True)
            if owners is None:
                return False
            for owner in owners:
                if owner == key or owner.startswith(key + ".") or key.startswith(owner + ".") or \
                        last_component(owner) == last_component(key):
                    return False
        return True

    def _refuted_by_own_function(self, item: Unrestored) -> bool:
        """An eval that reached a helper's backward through the helper's entry state (the join of
        all its callers) is refuted by the run of the function holding the eval, which follows
        each call with its own arguments (`self.model.train()` before `run_epoch(epoch)`,
        `run_epoch(epoch, cross_valid=True)` skipping the backward): that run reached the same
        backward, completely, and saw no eval left there (the module's own code, for an eval at
        the top level of a script)."""
        function = self.index.function_at(item.anchor)
        if (function.node if function is not None else self.ctx.module) in self._in_progress:
            return False
        flow = self.flow(function)
        if not flow.complete or item.backward not in flow.backwards:
            return False
        return not any(other.anchor is item.anchor for other in flow.unrestored)

    def undone_by_next_phase(self, item: Unrestored) -> bool:
        """Alternating phases (a GAN: `D.train(); G.eval()` for the discriminator's phase, `G.train();
        D.eval()` for the generator's): the `eval()` freezes a partner network for one phase, not an
        evaluation. It is undone when the loop calls `train()` on that network before coming back
        to the eval (later in the iteration or at the top of the next), an optimizer steps in between
        (the other phase's update), and none stepped in between holds its parameters (known from the
        optimizer's construction; when that is not known, the loop must step two or more optimizers,
        one per phase)."""
        between = self.until_train(item)
        if between is None or not any(ref.node is item.backward for ref in between):
            return False
        loop = self.training_loops[item.loop]
        name = last_component(item.key)
        steps = [ref for ref in between if self.training.is_optimizer_step(ref.node, ref.scope)]
        if not steps:
            return False  # no phase update happens while it is frozen: its own backward ran in eval mode
        stepped_receivers = {dotted_name(ref.node.func.value) for ref in loop.step_calls}
        for ref in steps:
            owners = self._optimizer_owners(ref.node, ref.scope)
            if owners is None:
                if len(stepped_receivers) < 2:
                    return False
            elif name in owners:
                return False
        return True

    def until_train(self, item: Unrestored) -> list | None:
        """The loop's calls from the `eval()` of `item` up to the next `train()` of the same module
        (later in the iteration or, wrapping, earlier in the next one); None when there is none."""
        loop = self.training_loops.get(item.loop)
        if loop is None:
            return None
        refs = loop.calls
        start = next((i for i, ref in enumerate(refs) if ref.anchor is item.anchor), None)
        if start is None:
            return None
        name = last_component(item.key)
        between = []
        for ref in refs[start + 1:] + refs[:start]:
            func = ref.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "train" and self._is_train_of(ref.node, name, ref):
                return between
            between.append(ref)
        return None

    def _is_train_of(self, call: cst.Call, name: str, ref) -> bool:
        """`call` is `<name>.train()`, in the loop or in a helper it calls (`G.train()` in
        `generator_step(generator, ...)`, its parameter standing for the loop's argument)."""
        args = positional_args(call)
        if len(call.args) > 1 or (args and not is_true(args[0].value)):
            return False
        receiver = dotted_name(strip_wrappers(call.func.value))
        for site in reversed(ref.via):  # innermost helper first, back to the loop's own call
            if receiver is None:
                return False
            target = self.index.callee(site, self.index.scope_at(site))
            if target is None:
                return False
            caller = Frame(self.index.function_at(site), self.index.scope_at(site), {})
            mapping = self._argument_keys(site, target, caller)
            head = receiver.split(".")[0]
            receiver = mapping[head] + receiver[len(head):] if head in mapping else None
        return receiver is not None and last_component(receiver) == name

    def _optimizer_owners(self, step: cst.Call, scope: Scope, full: bool = False) -> set[str] | None:
        """The modules whose parameters the optimizer of `opt.step()` / `scaler.step(opt)` holds,
        from its construction (`Adam(D.parameters())`); None when that is not seen. Their last
        components, or with `full` the whole names (`self.generative_model`)."""
        func = step.func
        args = positional_args(step)
        receiver = args[0].value if args and self.training.roles.of(func.value, scope) == SCALER else func.value
        if isinstance(receiver, cst.Name):
            values = [b.value for b in scope.lookup(receiver.value) if b.kind == "assign"]
        elif isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) and \
                receiver.value.value == "self":
            values = self.index.self_attribute_values(receiver.attr.value, scope)
        else:
            return None
        owners: set[str] = set()
        for value in values:
            if value is None:
                return None
            found = parameter_owners(value, scope)
            if not found:
                return None
            if full:
                found = _parameter_owner_names(value, scope)
                if found is None:
                    return None
            owners |= found
        return owners or None

    def is_evaluation_function(self, function: FunctionInfo | None) -> bool:
        return function is not None and is_evaluation_name(function.name)

    def is_test_function(self, function: FunctionInfo | None) -> bool:
        """A pytest/unittest test (`test_forward_matches`): it checks behaviour, it does not
        evaluate a model, and may run a configuration on purpose."""
        return function is not None and _PYTEST_NAME.match(function.name) is not None

    def is_evaluation_loop(self, loop: cst.CSTNode) -> bool:
        """A loop over a validation/test loader (`for xb, yb in val_loader`, `enumerate(tqdm(test_dl))`)."""
        if not isinstance(loop, cst.For):
            return False
        return EVAL_LOADER_TEXT.search(self.ctx.code_for(_unwrap_iterable(loop.iter))) is not None

    def evaluation_loop_of(self, node: cst.CSTNode, function: FunctionInfo | None) -> cst.For | None:
        """The innermost validation/test loader loop around `node` within its function."""
        stop = function.node if function is not None else None
        for ancestor in self.index.ancestors(node):
            if ancestor is stop or isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return None
            if isinstance(ancestor, cst.For) and self.is_evaluation_loop(ancestor):
                return ancestor
        return None

    def in_loop(self, node: cst.CSTNode, function: FunctionInfo | None) -> bool:
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(ancestor, (cst.For, cst.While, cst.ListComp, cst.SetComp, cst.DictComp,
                                     cst.GeneratorExp)):
                return True
        return False

    def computes_grad(self, node: cst.CSTNode, scope: Scope, flags: tuple[tuple[str, object], ...] = ()) -> bool:
        """`node` (directly or through same-file helpers) runs a backward, an optimizer step,
        `torch.autograd.grad`, `enable_grad` or turns `requires_grad` on: not an evaluation.
        With `flags` (parameters a caller binds to literals), a branch those values skip
        (`if train: loss.backward()` with `train=False`) does not count."""
        memo = (node, flags)
        if memo in self._computes_grad:
            return self._computes_grad[memo]
        result = False
        for ref in self.training.reachable_calls(node, scope):
            call = ref.node
            if flags and skipped_branch(self.index, ref.via[0] if ref.via else call, node, dict(flags)):
                continue
            if self.training.is_backward(call, ref.scope) or self.training.is_optimizer_step(call, ref.scope):
                result = True
                break
            name = self.index.resolve(call.func, ref.scope)
            if name in GRAD_FUNCTIONS or name in GRAD_ON_CONTEXTS:
                result = True
                break
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("requires_grad_", "retain_grad"):
                args = positional_args(call)
                if not args or not is_false(args[0].value):
                    result = True
                    break
        if not result:
            for sub in walk(node):
                if isinstance(sub, cst.Assign) and any(
                        isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
                        for t in sub.targets) and not is_false(sub.value):
                    result = True
                    break
        self._computes_grad[memo] = result
        return result

    def scope_of(self, function: FunctionInfo | None) -> Scope:
        return function.scope if function is not None else self.index.module_scope

    def is_graph_free_evaluation(self, forward: Forward) -> bool:
        """TL301's region: the forward is part of an evaluation that needs no gradient: a
        validation/test loader loop, or the code from the `eval()` call(s) to the forward (the
        whole function when the mode comes from its callers), holding no backward, no optimizer
        step and no `autograd.grad`, and evaluating batches (in a loop) or named as an evaluation."""
        function = forward.function
        if self.is_test_function(function):
            return False
        scope = self.scope_of(function)
        loop = self.evaluation_loop_of(forward.call, function)
        if loop is not None and not self.computes_grad(loop, scope):
            return True
        sites = [fact.site for fact in forward.facts]
        if function is not None and any(site is None for site in sites):
            region = function.node.body
        else:
            region = self.common_ancestor([s for s in sites if s is not None] + [forward.call])
        if region is None or self.computes_grad(region, scope):
            return False
        if self.backward_fed_by(forward.call) is not None or self.backward_through_callee(forward.call) is not None:
            return False  # its output is backpropagated: a frozen partner in a training step
        return self.in_loop(forward.call, function) or self.is_evaluation_function(function)

    def forward_needs_grad(self, forward: Forward) -> tuple[bool, str] | None:
        """Whether the model's forward needs grad recording on, so the evaluation could not run
        under `no_grad` (`FunctionSummary.differentiates`: it computes `torch.autograd.grad`, a
        backward, turns `requires_grad` on, itself or through the project code it calls).
        (True, "Cls.forward") when a construction of the model builds such a project class;
        (False, "Cls.forward") when a construction of the model builds a class chosen at run time
        (`get_class(cfg.model_class)(conf)`, `registry[name](...)`, a project factory's product) and
        the project defines a module class whose forward does: it may be that one; None otherwise
        (also when the model's constructions are not traced)."""
        call = forward.inner if forward.inner is not None else forward.call
        func = call.func
        receiver = func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func
        scope = self.index.scope_at(call)
        constructions = self._constructions(receiver, scope)
        if not constructions:
            return None
        dynamic = []  # the constructions of a class chosen at run time
        for built, where in constructions:
            summary = self.index.summary_of(built.func, where)
            choices = self._registry_classes(built.func, where) if summary is None else None
            for klass in [summary] if isinstance(summary, ClassSummary) else choices or ():
                target = klass.method("forward")
                if target is not None and target.differentiates:
                    # a registry's entry that differentiates: the model may be that one
                    return (choices is None), f"{klass.name}.forward"
            if choices is None and not isinstance(summary, ClassSummary) and (
                    summary is not None or self.index.resolve(built.func, where) is None):
                dynamic.append(built)  # a factory's product, a class looked up at run time
        for built in dynamic:
            for klass in self._differentiating_classes():
                if _accepts(klass, built):
                    return False, f"{klass.name}.forward"
        return None

    def asks_train_outputs(self, forward: Forward) -> tuple[bool, str] | None:
        """Whether the forward asks the model for what it returns only in train mode: a torchvision
        detection model handed targets returns its losses in train mode and its detections in eval
        mode (`layers.builds_detection_model`), so a pass that reads its losses under `no_grad`
        needs train mode, and `eval()` would break it. (True, what) when every construction of the
        model builds one that this call hands its targets (directly, or a project class whose
        forward passes them on: `ClassSummary.detection_targets`); (False, what) when some
        construction builds one, or builds a class chosen at run time (`getattr(models, name)(...)`,
        `registry[name](...)`) that can be a project class of that kind; None otherwise."""
        call = forward.inner if forward.inner is not None else forward.call
        func = call.func
        receiver = func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func
        constructions = self._constructions(receiver, self.index.scope_at(call))
        if not constructions:
            return None
        found: list[str] = []  # what each construction that builds such a model builds
        maybe: str | None = None
        others = False  # a construction that builds something else
        for built, where in constructions:
            if builds_detection_model(self.index, built, where):
                if passes_targets(call, DETECTION_TARGETS):
                    found.append("a torchvision detection model")
                else:
                    others = True
                continue
            summary = self.index.summary_of(built.func, where)
            choices = self._registry_classes(built.func, where) if summary is None else None
            if isinstance(summary, ClassSummary):
                targets = summary.detection_targets
                if targets is not None and passes_targets(call, targets):
                    found.append(summary.name)
                else:
                    others = True
                continue
            if choices and all(k.detection_targets is not None and passes_targets(call, k.detection_targets)
                               for k in choices):
                found.append(choices[0].name)
                continue
            others = True
            dynamic = choices is None and (summary is not None or self.index.resolve(built.func, where) is None)
            for klass in choices if choices is not None else self._detection_classes() if dynamic else ():
                targets = klass.detection_targets
                if targets is not None and passes_targets(call, targets) and (choices is not None or
                                                                              _accepts(klass, built)):
                    maybe = maybe or klass.name
        if found and not others:
            return True, found[0]
        if found or maybe is not None:
            return False, found[0] if found else maybe
        return None

    def _detection_classes(self) -> list:
        """The module classes of the project (this file's, and those of the files of its import
        component that spell `detection`) whose forward hands targets to a torchvision detection
        model."""
        if self._detection is None:
            linker = self.index.linker
            classes = linker.classes_mentioning("detection") if linker is not None else None
            if classes is None:
                own = [self.index.summary_of(cst.Name(name), self.index.module_scope) for name in self.index.classes]
                classes = [(None, klass) for klass in own if isinstance(klass, ClassSummary)]
            self._detection = [klass for _, klass in classes if klass.detection_targets is not None]
        return self._detection

    def _registry_classes(self, func: cst.BaseExpression, scope: Scope) -> list | None:
        """`networks[name](...)` where `networks` is bound once, to a dict literal whose values all
        name project classes: those classes (the class is one of them); None otherwise."""
        if not isinstance(func, cst.Subscript) or not isinstance(func.value, cst.Name):
            return None
        bindings = scope.lookup(func.value.value)
        if len(bindings) != 1 or bindings[0].kind != "assign" or not isinstance(bindings[0].value, cst.Dict):
            return None
        found = []
        for element in bindings[0].value.elements:
            if not isinstance(element, cst.DictElement) or not isinstance(element.value, (cst.Name, cst.Attribute)):
                return None
            summary = self.index.summary_of(element.value, self.index.scope_at(element.value))
            if not isinstance(summary, ClassSummary):
                return None
            found.append(summary)
        return found

    def _differentiating_classes(self) -> list:
        """The module classes of the project (this file's, and those of the files of its import
        component that compute gradients somewhere) whose forward computes gradients."""
        if self._differentiating is None:
            linker = self.index.linker
            classes = linker.classes_mentioning(*_GRAD_USE_WORDS) if linker is not None else None
            if classes is None:
                own = [self.index.summary_of(cst.Name(name), self.index.module_scope) for name in self.index.classes]
                classes = [(None, klass) for klass in own if isinstance(klass, ClassSummary)]
            self._differentiating = [klass for _, klass in classes if klass.role == MODEL and
                                     (klass.method("forward") is not None and klass.method("forward").differentiates)]
        return self._differentiating

    def grad_off_by_arguments(self, call: cst.Call) -> cst.Call | None:
        """The construction of the model `call` runs (`model(x, mode="inference")`), when every
        construction of it builds a project class whose `forward`, under the literals this call
        passes, runs all its submodules under a grad-off context (`FunctionSummary.grad_off_when`);
        None when that is not proven."""
        func = call.func
        receiver = func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func
        scope = self.index.scope_at(call)
        constructions = self._constructions(receiver, scope)
        if not constructions or any(arg.star for arg in call.args):
            return None
        positional = tuple(literal_value(a.value) for a in positional_args(call))
        keywords = {a.keyword.value: literal_value(a.value) for a in call.args if a.keyword is not None}
        for built, where in constructions:
            summary = self.index.summary_of(built.func, where, GRAD_WORDS)
            forward = summary.method("forward") if summary is not None and hasattr(summary, "method") else None
            if forward is None or not forward.grad_off_for(positional, keywords):
                return None
        return constructions[0][0]

    def backward_fed_by(self, call: cst.Call) -> cst.Call | None:
        """A backward of the same function that the result of `call` flows into: the call is in
        what it backpropagates, or is the value of an assignment (`logits += teacher(z) * w`) whose
        binding is the one reaching a name there (`loss = criterion(logits, y)`, then
        `loss.backward()`), following reaching bindings a few steps back."""
        from trainlint.model.dataflow import dataflow  # dataflow builds on modes' neighbours

        flow = self.ctx.model(dataflow)
        function = self.index.function_at(call)
        owner = function.node if function is not None else self.ctx.module
        holder = next((a for a in self.index.ancestors(call)
                       if isinstance(a, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.BaseSmallStatement,
                                         cst.BaseCompoundStatement))), None)
        def held(name: cst.Name, binding) -> bool:
            # the binding reaching it, or its alternative on the other branch
            return binding.node is holder or (binding.node is not None and _binds(holder, name.value)
                                              and flow.exclusive(holder, binding.node))

        for site, root in self._own_backward_roots(flow, function, owner):
            if self.contains(root, call):
                return site
            if isinstance(holder, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and _traced_back(
                    flow, [n for n in walk(root) if isinstance(n, cst.Name)],
                    lambda value: [n for n in walk(value) if isinstance(n, cst.Name)], held):
                return site
        return None

    def backward_through_callee(self, call: cst.Call) -> cst.Call | None:
        """What `call` computes is handed, in the same function, to a function of this file whose
        backward backpropagates what it computes from that argument: the names an assignment of
        `call`'s result binds reach an argument of a later call (`self.update(old_logp, new_logp)`)
        whose callee's loss is computed from the parameter it lands in (`loss = -(ratio(new_logp,
        old_logp) * adv).mean()`, then `loss.backward()`): that backward (a PPO learner's forward of
        the policy in eval mode, its log-probabilities trained on), else None."""
        from trainlint.model.dataflow import dataflow  # dataflow builds on modes' neighbours

        holder = next((a for a in self.index.ancestors(call) if isinstance(a, cst.BaseSmallStatement)), None)
        if not isinstance(holder, cst.Assign) or not self.contains(holder.value, call):
            return None
        bound = {n.value for t in holder.targets for n in walk(t.target) if isinstance(n, cst.Name)}
        if not bound:
            return None
        flow = self.ctx.model(dataflow)
        function = self.index.function_at(call)
        owner = function.node if function is not None else self.ctx.module
        for site in self.index.calls_under(owner):
            if site is call or self.index.function_at(site) is not function:
                continue
            scope = self.index.scope_at(site)
            target = self.index.callee(site, scope)
            if target is None or target is function:
                continue
            params = [p.name.value for p in (*target.node.params.posonly_params, *target.node.params.params)]
            if target.class_name is not None and params and params[0] in ("self", "cls") and \
                    isinstance(site.func, cst.Attribute):
                params = params[1:]
            positional = positional_args(site)
            for arg in site.args:
                if arg.star:
                    break
                fed = any(n.value in bound and (b := flow.reaching(n)) is not None and b.node is holder
                          for n in _graph_names(arg.value))
                if not fed:
                    continue
                position = next((i for i, a in enumerate(positional) if a is arg), None)
                param = arg.keyword.value if arg.keyword is not None else \
                    params[position] if position is not None and position < len(params) else None
                if param is None:
                    continue
                backward = self._backprops_parameter(flow, target, param)
                if backward is not None:
                    return backward
        return None

    def _backprops_parameter(self, flow, target, param: str) -> cst.Call | None:
        """A backward in `target`'s own body whose root is computed from its parameter `param`,
        followed through the assignments reaching each name a few steps back."""
        def from_param(name: cst.Name, binding) -> bool | None:
            if binding.kind == "param":
                return True if name.value == param else None  # another parameter: not followed
            return False

        for site, root in self._own_backward_roots(flow, target, target.node):
            if _traced_back(flow, _graph_names(root), _graph_names, from_param):
                return site
        return None

    def _own_backward_roots(self, flow, function, owner: cst.CSTNode):
        """(backward call, what it backpropagates) for each backward of `function`'s own body
        (`owner`: its node, or the module for module-level code)."""
        for site in self.index.calls_under(owner):
            if self.index.function_at(site) is not function or \
                    not self.training.is_backward(site, self.index.scope_at(site)):
                continue
            root = flow.backward_root(site, self.index.scope_at(site))
            if root is not None:
                yield site, root

    def no_grad_evaluation_region(self, forward: Forward) -> cst.CSTNode | None:
        """TL302's region: a validation/test loader loop, or the body of a function named as an
        evaluation, with no backward, optimizer step or `autograd.grad` in it (None: not an
        evaluation)."""
        function = forward.function
        if self.is_test_function(function):
            return None
        scope = self.scope_of(function)
        if forward.via is not None:
            # a helper its caller runs with grad off by a literal (`train=False`): that pass is an
            # evaluation unless, with that value, it still computes gradients
            body = function.node.body if function is not None else None
            return body if body is not None and not self.computes_grad(body, scope, forward.flags) else None
        loop = self.evaluation_loop_of(forward.call, function)
        if loop is not None and not self.computes_grad(loop, scope):
            return loop
        if self.is_evaluation_function(function) and not self.computes_grad(function.node.body, scope):
            return function.node.body
        measured = self.metric_region(forward)
        if measured is not None and not self.computes_grad(measured[0], scope):
            return measured[0]
        return None

    def metric_use(self, call: cst.Call, depth: int = 0) -> cst.CSTNode | None:
        """Where the output of `call` (a forward) is measured, in its function: compared with `==`
        (`(model(x).argmax(-1) == y).sum()`: an accuracy) or handed to a torch loss
        (`F.cross_entropy(model(x), y).item()`), directly, through methods on it, or through a
        variable it is assigned to. Under grad off, with no backward around, that pass measures
        the model: an evaluation, whatever its function or loader is called."""
        node: cst.CSTNode = call
        parents = self.index.parents
        while True:
            parent = parents.get(node)
            if isinstance(parent, cst.Attribute) and parent.value is node:
                node = parent
            elif isinstance(parent, cst.Call) and parent.func is node:
                node = parent
            elif isinstance(parent, cst.Subscript) and parent.value is node:
                node = parent
            else:
                break
        parent = parents.get(node)
        if isinstance(parent, cst.Arg):
            outer = parents.get(parent)
            if isinstance(outer, cst.Call) and self._torch_loss(outer):
                return outer
            return None
        if isinstance(parent, cst.ComparisonTarget):
            parent = parents.get(parent)
        if isinstance(parent, cst.Comparison) and any(isinstance(c.operator, (cst.Equal, cst.NotEqual))
                                                      for c in parent.comparisons):
            return parent
        if depth < 2 and isinstance(parent, cst.Assign) and len(parent.targets) == 1 and \
                isinstance(parent.targets[0].target, cst.Name):
            name = parent.targets[0].target.value
            function = self.index.function_at(parent)
            after = self.index.place.get(parent, 0)
            for use in self._name_loads(function).get(name, ()):
                if self.index.place.get(use, 0) > after:
                    found = self.metric_use(use, depth + 1)
                    if found is not None:
                        return found
        return None

    def _name_loads(self, function: FunctionInfo | None) -> dict[str, list[cst.Name]]:
        """The names a function's own code reads (not assigns), by name: built once per function,
        not once per assignment that `metric_use` follows."""
        key = function.node if function is not None else self.index.module
        memo = self._loads
        if key not in memo:
            found: dict[str, list[cst.Name]] = {}
            body = function.node.body if function is not None else self.index.module
            parents = self.index.parents
            for use in self.index.scope_nodes(body):
                if type(use) is cst.Name and not isinstance(parents.get(use), cst.AssignTarget):
                    found.setdefault(use.value, []).append(use)
            memo[key] = found
        return memo[key]

    def _torch_loss(self, call: cst.Call) -> bool:
        qualname = self.index.resolve(call.func, self.index.scope_at(call)) or ""
        return qualname.startswith("torch.nn.functional.") and qualname.rsplit(".", 1)[-1] in _TORCH_LOSSES

    def metric_region(self, forward: Forward) -> tuple[cst.CSTNode, cst.CSTNode] | None:
        """(region, use) when the forward's output is measured (`metric_use`) in the same pass: the
        innermost loop around the forward that holds the use, else the forward's function body."""
        use = self.metric_use(forward.call)
        if use is None:
            return None
        function = forward.function
        stop = function.node if function is not None else None
        for ancestor in self.index.ancestors(forward.call):
            if ancestor is stop or isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            if isinstance(ancestor, (cst.For, cst.While)) and self.contains(ancestor, use):
                return ancestor, use
        return (function.node.body, use) if function is not None else None

    def contains(self, outer: cst.CSTNode, node: cst.CSTNode | None) -> bool:
        return node is not None and (node is outer or outer in set(self.index.ancestors(node)))

    def common_ancestor(self, nodes: list) -> cst.CSTNode | None:
        """The innermost node holding all `nodes` (themselves included)."""
        if not nodes:
            return None
        chain = [nodes[0]] + list(self.index.ancestors(nodes[0]))
        others = [set([n] + list(self.index.ancestors(n))) for n in nodes[1:]]
        for node in chain:
            if all(node in other for other in others):
                return node
        return None

    def is_trained(self, key: str) -> bool:
        """A model the file trains: `key.train()` somewhere, or its parameters go to an optimizer,
        `accelerator.prepare`, `fabric.setup` or DDP (and it is not frozen), and it may be
        optimized (see `may_be_optimized`)."""
        return last_component(key) in self.trained_names and self.may_be_optimized(key)

    def may_be_optimized(self, key: str) -> bool:
        """False when the file proves no optimizer holds the model's parameters: it builds its
        optimizers from the parameters of known modules, this one is not among them, and the file
        neither reads its parameters nor hands it to code that could (a frozen teacher beside
        `SGD(student.parameters())`, even when `accelerator.prepare` wraps both)."""
        users = self._parameter_users()
        return users is None or last_component(key) in users

    def _parameter_users(self) -> frozenset[str] | None:
        if self._users is False:
            found, optimizers, unknown = set(), 0, False
            for kind, name in file_facts.values(self.ctx, "modes.parameter_users"):
                if kind == "unknown":
                    unknown = True
                elif kind == "optimizer":
                    optimizers += 1
                else:
                    found.add(name)
            self._users = None if unknown or not optimizers else frozenset(found)
        return self._users

    @property
    def trained_names(self) -> frozenset[str]:
        if self._trained is None:
            self._trained = self._trained_names()
        return self._trained

    @property
    def frozen_names(self) -> frozenset[str]:
        self.trained_names  # noqa: B018  (computes both)
        return self._frozen

    def mode_matters(self, receiver: cst.BaseExpression, scope: Scope, facts: Iterable[Fact] = ()) -> bool:
        """Whether switching the module `receiver` names between train and eval may change what it
        computes: False only when `mode_dependence` proves it mode-free."""
        return self.mode_dependence(receiver, scope, facts)[0] != FREE

    def mode_dependence(self, receiver: cst.BaseExpression, scope: Scope,
                        facts: Iterable[Fact] = ()) -> tuple[str | None, cst.Call | None]:
        """How the module `receiver` names depends on its mode (`layers` verdicts): DEPENDENT when
        a construction of it holds dropout, batch statistics or a family known for them (with
        that construction when it is in this file; None when callers elsewhere built it); FREE
        when every construction of it is known and each builds a mode-free module (a loss
        criterion, a GroupNorm-only net) or a library class not known to hold dropout/batch norm;
        None (not known) otherwise: a parameter no caller shows, a factory, a class whose layers
        come from a library the project cannot see into. A `NEW` fact names the construction a
        caller made."""
        facts = list(facts)
        calls = [(strip_wrappers(f.node.value), self.index.scope_at(f.node)) for f in facts
                 if f.kind == NEW and isinstance(f.node, (cst.Assign, cst.AnnAssign))
                 and isinstance(strip_wrappers(f.node.value), cst.Call)]
        if not calls or any(f.kind not in (NEW, ENTRY) for f in facts):
            own = self._constructions(receiver, scope)
            if own is None:
                passed = self._passed_modes(receiver, scope) if not calls else None
                if passed is None:
                    return None, None
                if DEPENDENT in passed:
                    return DEPENDENT, None
                return (FREE, None) if passed <= {FREE, LIBRARY} else (None, None)
            calls += own
        if not calls:
            return None, None
        verdicts = [(verdict(self.index, call, call_scope), call) for call, call_scope in calls]
        for found, call in verdicts:
            if found == DEPENDENT:
                return DEPENDENT, call
        return (FREE, None) if all(found in (FREE, LIBRARY) for found, _ in verdicts) else (None, None)

    def _passed_modes(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> set | None:
        """How the modules a parameter stands for depend on their mode (`layers` verdicts), from what
        every caller passes: a same-file caller's construction (or its own parameter, followed), or,
        when no caller is in this file, the calls of the project's other files (each argument's
        construction judged there, `CallArguments.positional_modes`; a method's calls whose receiver
        is built from another class do not count). None when some caller's argument is not known."""
        expr = strip_wrappers(expr)
        if depth > 3 or not isinstance(expr, cst.Name):
            return None
        bindings = scope.lookup(expr.value)
        if len(bindings) != 1 or bindings[0].kind != "param":
            return None
        function = self.index.function_at(bindings[0].node)
        if function is None:
            return None
        found: set = set()
        sites = self.index.callers(function)
        if sites:
            for site in sites:
                arg = self.index.argument_for(site.node, function, expr.value)
                if arg is None:
                    return None
                own = self._constructions(arg, site.scope)
                if own:
                    found |= {verdict(self.index, call, call_scope) for call, call_scope in own}
                    continue
                more = self._passed_modes(arg, site.scope, depth + 1)
                if more is None:
                    return None
                found |= more
            return found if None not in found else None
        linker = getattr(self.index, "linker", None)
        if linker is None:
            return None
        params = [p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params)]
        if function.class_name is not None:
            if not params or params[0] not in ("self", "cls"):
                return None
            params = params[1:]
            calls = [call for _, call in linker.method_callers_by_file(function.name)
                     if not call.receiver_classes or
                     any(name.rsplit(".", 1)[-1] == function.class_name for name, _ in call.receiver_classes)]
        elif self.index.scope_at(function.node) is self.index.module_scope:
            calls = [call for _, call in linker.callers_by_file(function.name)]
        else:
            return None
        for call in calls:
            mode = call.mode_of(tuple(params), expr.value)
            if mode is None:
                return None
            found.add(mode)
        return found or None

    def _constructions(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> list | None:
        """The calls that bind `expr` (a name or `self.<attr>`), or None when some binding is not a
        call (a parameter, an item of a dict, ...)."""
        expr = strip_wrappers(expr)
        if depth > 3:
            return None
        found: list = []
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            values = [b.value if b.value is not None else _prepared_argument(b.node, expr.value)
                      for b in bindings if b.kind == "assign"]
            params = [b for b in bindings if b.kind == "param"]
            if len(values) + len(params) != len(bindings):
                return None
            if params:  # what the same-file callers pass for it
                function = self.index.function_at(params[0].node)
                sites = self.index.callers(function) if function is not None else []
                if function is not None and not sites and function.name == "__init__":
                    sites = self._class_builds(function)  # `Trainer(model, ...)`: what `__init__` is handed
                if not sites:
                    return None
                for site in sites:
                    arg = self.index.argument_for(site.node, function, expr.value)
                    more = self._constructions(arg, site.scope, depth + 1) if arg is not None else None
                    if more is None:
                        return None
                    found += more
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            values = self.index.self_attribute_values(expr.attr.value, scope)
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, (cst.Name, cst.Attribute)):
            return self._member_constructions(expr, scope, depth)  # `net.head`, `self.net.head`
        elif isinstance(expr, cst.Call):  # `main(torchvision.models.resnet18())`: built right there
            return [(expr, self.index.scope_at(expr))]
        else:
            return None
        for value in values:
            if isinstance(value, (cst.Name, cst.Attribute)):
                if dotted_name(value) == dotted_name(expr):
                    continue  # `vae, opt = accelerator.prepare(vae, opt)`: the module it already was
                # another name for the same module, read where it is bound (`self.model = model` in
                # `__init__`: its parameter)
                more = self._constructions(value, self.index.scope_at(value), depth + 1)
                if more is None:
                    return None
                found += more
                continue
            if not isinstance(value, cst.Call):
                return None
            inner = strip_wrappers(value)
            func = inner.func if isinstance(inner, cst.Call) else None
            last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if last in _UNWRAPPERS and positional_args(inner):  # `accelerator.unwrap_model(vae)`: the same module
                wrapped = positional_args(inner)[0].value
                if dotted_name(wrapped) == dotted_name(expr):
                    continue  # `vae = unwrap_model(vae)`: its other bindings say what it is
                more = self._constructions(wrapped, scope, depth + 1)
                if more is None:
                    return None
                found += more
                continue
            if isinstance(inner, cst.Call):  # `nn.CrossEntropyLoss().to(device)`
                found.append((inner, self.index.scope_at(inner)))
                continue
            if inner is not value:  # `model = model.to(device)`: the same module
                if dotted_name(inner) == dotted_name(expr):
                    continue
                more = self._constructions(inner, scope, depth + 1)
                if more is None:
                    return None
                found += more
                continue
            found.append((value, self.index.scope_at(value)))
        return found

    def _class_builds(self, init: FunctionInfo) -> list:
        """The same-file constructions `Name(...)` of the class whose `__init__` is `init`, as call
        sites of it (what each passes is what `__init__` is handed)."""
        owner = init.scope.parent
        if init.class_name is None or owner is None or owner.parent is None:
            return []
        found = []
        for site in self.index.class_calls(init.class_name):
            bindings = site.scope.lookup(init.class_name)
            if bindings and all(b.kind == "class" and b.node is owner.node for b in bindings):
                found.append(site)
        return found

    def _member_constructions(self, expr: cst.Attribute, scope: Scope, depth: int) -> list | None:
        """`net.network` where every binding of `net` builds an instance of a class of this file
        (`net = Policy()`): what the class's methods (or its same-file bases') assign to
        `self.network`, provided no code assigns that attribute other than through `self`
        (`net.network = other`, `setattr(...)`)."""
        attr = expr.attr.value
        written = self._attributes_written_elsewhere()
        if attr in written or "*" in written:
            return None
        owners = self._constructions(expr.value, scope, depth + 1)
        if not owners:
            return None
        found: list = []
        for call, call_scope in owners:
            func = call.func if isinstance(call, cst.Call) else None
            member = _module_dict_member(self.index, call, call_scope, attr)
            if member is not None:  # `nn.ModuleDict({"encoder": ..., ...}).encoder`
                more = self._constructions_of_value(member, depth)
                if more is None:
                    return None
                found += more
                continue
            if not (isinstance(func, cst.Name) and func.value in self.index.classes):
                return None
            values = self._class_attribute_values(func.value, attr)
            if not values:
                return None
            for value in values:
                more = self._constructions_of_value(value, depth)
                if more is None:
                    return None
                found += more
        return found

    def _class_attribute_values(self, class_name: str, attr: str, depth: int = 0) -> list | None:
        """What the methods of a same-file class, or of its same-file bases, assign to `self.<attr>`;
        None when a base is a class of another file (it may assign it too)."""
        node = self.index.classes.get(class_name)
        if node is None or depth > 5:
            return None
        values = list(self.index.class_attributes.get(class_name, {}).get(attr, []))
        for base in node.bases:
            text = dotted_name(base.value) or ""
            if text in self.index.classes and text != class_name:
                inner = self._class_attribute_values(text, attr, depth + 1)
                if inner is None:
                    return None
                values += inner
            elif text not in ("object",) and not _MODULE_BASES.search(text):
                return None
        return values

    def _constructions_of_value(self, value: cst.BaseExpression, depth: int) -> list | None:
        """The constructions of what a method assigns (`self.network = Comm(...)`), in its scope."""
        inner = strip_wrappers(value)
        if isinstance(inner, cst.Call):
            return [(inner, self.index.scope_at(inner))]
        if isinstance(inner, (cst.Name, cst.Attribute)):
            return self._constructions(inner, self.index.scope_at(value), depth + 1)
        return None

    def _attributes_written_elsewhere(self) -> frozenset[str]:
        """Attribute names the file assigns other than as `self.<attr> = ...` (`net.network = m`,
        `setattr(net, "network", m)`): an instance's attribute may then hold something else."""
        if self._foreign_writes is None:
            found: set[str] = set()
            for node in walk(self.ctx.module):
                targets: list = []
                if isinstance(node, cst.Assign):
                    targets = [t.target for t in node.targets]
                elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
                    targets = [node.target]
                elif isinstance(node, (cst.For, cst.CompFor)):
                    targets = [node.target]
                elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "setattr":
                    args = positional_args(node)
                    if len(args) > 1 and isinstance(args[1].value, cst.SimpleString):
                        found.add(args[1].value.evaluated_value)
                    elif len(args) > 1:
                        found.add("*")
                for target in targets:
                    for inner in walk(target):
                        if isinstance(inner, cst.Attribute) and not (
                                isinstance(inner.value, cst.Name) and inner.value.value == "self"):
                            found.add(inner.attr.value)
            self._foreign_writes = frozenset(found)
        return self._foreign_writes

    def key_of(self, expr: cst.BaseExpression, scope: Scope) -> str | None:
        return self._key(expr, Frame(None, scope, {}))

    # -- entry states ------------------------------------------------------------------------------
    def entry_state(self, function: FunctionInfo | None, depth: int = 0) -> State:
        """The join of the states at the function's same-file call sites, translated to its
        parameters; with no known caller, nothing is known of modes and grad is on."""
        default = State({}, frozenset({ON}))
        if function is None:
            return default
        if function.node in self._entries:
            return self._entries[function.node]
        sites = self.index.callers(function)
        if not sites and self._called_elsewhere_without_grad(function):
            # every call of it, all in other project files, runs under `no_grad`
            self._entries[function.node] = State({}, frozenset({OFF}))
            return self._entries[function.node]
        if not sites or depth >= _MAX_ENTRY_DEPTH:
            return default
        states = []
        for site in sites:
            caller_key = site.function.node if site.function is not None else self.ctx.module
            if caller_key in self._in_progress:
                states.append(State({}, frozenset({ON, OFF})))
                continue
            flow = self.flow(site.function)
            before = flow.at_call.get(site.node)
            if before is None or not flow.complete:
                states.append(State({}, frozenset({ON, OFF})))
                continue
            states.append(self._translate_entry(site, function, before))
        state = join_all(states) or default
        self._entries[function.node] = state
        return state

    def _called_elsewhere_without_grad(self, function: FunctionInfo) -> bool:
        """A module-level function that the project's other files call, each call under a grad-off
        context (`with torch.no_grad(): validate(...)` in train.py) or after the script turned
        recording off for the whole process (`torch.set_grad_enabled(False)`); a pytest test
        calling it (`test_*` in a `test_*.py` file) checks its behaviour and evaluates nothing."""
        linker = getattr(self.index, "linker", None)
        if linker is None:
            return False
        if function.class_name is not None:
            # a method: every call of a method by that name that the project's files reachable from
            # here make (`with torch.no_grad(): self.evaluator.evaluate(model)`), this file's included
            owner = function.scope.parent
            if function.name.startswith("__") or owner is None or owner.parent is not self.index.module_scope:
                return False
            class_name = function.class_name

            def answers(where, call) -> bool:  # the loop below returns False at such a call
                return not (_pytest_call(where, call) or _another_class_method(call, class_name)) \
                    and not call.grad_off

            # a call with grad on that the files summarised already, or Python's parse of the
            # others, show answers without LibCST parsing them (`Linker.method_called_with_grad`)
            if linker.method_called_with_grad(function.name, answers, later=_GRAD_OFF_WORDS):
                return False
            # one call with grad on answers: the files least likely to turn it off are read first
            found = linker.iter_method_callers(function.name, later=_GRAD_OFF_WORDS)
        elif self.index.scope_at(function.node) is not self.index.module_scope:
            return False
        else:
            found = linker.iter_callers(function.name, later=_GRAD_OFF_WORDS)
        called = False
        for where, call in found:
            if _pytest_call(where, call) or _another_class_method(call, function.class_name):
                continue
            if not call.grad_off:
                return False
            called = True
        return called

    def _translate_entry(self, site, function: FunctionInfo, before: State) -> State:
        caller_frame = Frame(site.function, site.scope, {})
        mapping = self._argument_keys(site.node, function, caller_frame)  # callee name -> caller key
        local_names = set(function.scope.bindings)
        modes: dict[str, frozenset[Fact]] = {}
        implicit = self._trains_before(site)
        flags = tuple(sorted(literal_flags(site.node, function).items(), key=lambda item: item[0]))
        for caller_key, facts in before.modes.items():
            facts = frozenset(f._replace(site=None, entry_flags=flags) for f in facts)
            passed = False
            for name, arg_key in mapping.items():
                if caller_key == arg_key or caller_key.startswith(arg_key + "."):
                    modes[name + caller_key[len(arg_key):]] = facts
                    passed = True
            # a model the function reaches as a global keeps the caller's name; one passed in is
            # known only by its parameter's (kept under both, `model.train()` would leave the
            # caller's name in eval mode and a backward of the helper would see a stale eval)
            if not passed and caller_key.split(".")[0] not in local_names:
                modes.setdefault(caller_key, facts)
        if implicit:
            # no recorded switch, but the caller has been training this model: it is in train mode
            for name, arg_key in mapping.items():
                if name not in modes and self.is_trained(arg_key):
                    modes[name] = frozenset({Fact(TRAINED, site.node, None, via=function_name(site.function),
                                                  in_training=True)})
        # what the caller froze stays frozen, under the names the function knows it by
        frozen: dict[str, cst.CSTNode] = {}
        for caller_key, node in before.frozen.items():
            passed = False
            for name, arg_key in mapping.items():
                if caller_key == arg_key or caller_key.startswith(arg_key + "."):
                    frozen[name + caller_key[len(arg_key):]] = node
                    passed = True
            if not passed and caller_key.split(".")[0] not in local_names:
                frozen.setdefault(caller_key, node)
        return State(modes, before.grad, frozen)

    def _trains_before(self, site) -> bool:
        """The call site is inside a training loop, or after one in the same function."""
        function_node = site.function.node if site.function is not None else None
        for loop in self.training.loops:
            loop_function = loop.function.node if loop.function is not None else None
            if loop_function is not function_node:
                continue
            if loop.node in set(self.index.ancestors(site.node)):
                return True
            if _precedes(self.index, loop.node, site.node):
                return True
        return False

    # -- building the interpretation ---------------------------------------------------------------
    def _run(self, function: FunctionInfo | None) -> Flow:
        flow = Flow(function)
        run = FunctionRun(self, flow)
        if function is None:
            body = [s for s in self.ctx.module.body if not isinstance(s, (cst.FunctionDef, cst.ClassDef))]
            frame = Frame(None, self.index.module_scope, {})
            entry = State({}, frozenset({ON}))
        else:
            body = body_statements(function.node)
            frame = Frame(function, function.scope, {})
            entry = self.entry_state(function)
            grad = decorator_grad(self.index, function)
            if grad is not None:
                entry = entry.with_grad(frozenset({grad}))
            elif hook_step(self.index, function) == "eval":
                # a framework's evaluation hook (a LightningModule's `validation_step`): the framework
                # runs it with recording off; a call of the project's own joins its state to that
                entry = entry.with_grad(frozenset({OFF}) if not self.index.callers(function)
                                        else entry.grad | {OFF})
        try:
            run.block(body, entry, frame)
        except (Abandon, RecursionError):
            flow.complete = False
        return flow

    def _argument_keys(self, call: cst.Call, target: FunctionInfo, frame: Frame) -> dict[str, str]:
        """For each parameter of `target`, the caller-side key of the argument bound to it."""
        params = target.node.params
        positional = [p.name.value for p in (*params.posonly_params, *params.params)]
        mapping: dict[str, str] = {}
        func = call.func
        if target.class_name is not None and positional and positional[0] in ("self", "cls"):
            receiver_key = self._key(func.value, frame) if isinstance(func, cst.Attribute) else None
            if receiver_key:
                mapping[positional[0]] = receiver_key
            positional = positional[1:]
        for name, value in zip(positional, _positional_values(call, frame.scope)):
            key = self._key(value, frame)
            if key:
                mapping[name] = key
        for arg in call.args:
            if arg.keyword is not None:
                key = self._key(arg.value, frame)
                if key:
                    mapping[arg.keyword.value] = key
        return mapping

    def _key(self, expr: cst.BaseExpression, frame: Frame, depth: int = 0) -> str | None:
        """A model's normalised key in the analysed function's terms, or None."""
        if depth > 6:
            return None
        if isinstance(expr, cst.Call):
            func = expr.func
            args = positional_args(expr)
            if isinstance(func, cst.Attribute) and func.attr.value in PASS_THROUGH_METHODS:
                return self._key(func.value, frame, depth + 1)
            last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if last in _UNWRAPPERS and args:
                return self._key(args[0].value, frame, depth + 1)
            return None
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in WRAPPER_ATTRS:
                return self._key(expr.value, frame, depth + 1)
            base = self._key(expr.value, frame, depth + 1)
            return f"{base}.{expr.attr.value}" if base else None
        if isinstance(expr, cst.Name):
            name = expr.value
            if name in frame.subst and not deep_copied(self.index, expr, frame.scope):
                return frame.subst[name]
            bindings = frame.scope.lookup(name)
            # `model = self.model; if n_gpu > 1: model = DataParallel(model)`: a rebinding that wraps
            # the name's own value (or moves it, `model.to(dev)`) names the same module
            bindings = [b for b in bindings if not (b.kind == "assign" and _rewraps(b.value, name))] or bindings
            if len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
                value = bindings[0].value
                if isinstance(value, (cst.Attribute, cst.Name)) or (
                        isinstance(value, cst.Call) and self._key(value, frame, depth + 1) is not None):
                    aliased = self._key(value, frame, depth + 1)
                    if aliased:
                        return aliased
            if frame.prefix and name in frame.scope.bindings:
                return frame.prefix + name
            return name
        return None

    def is_module_constructor(self, call: cst.Call, scope: Scope) -> bool:
        """A call that builds a fresh module (in train mode): a torch.nn layer, a torchvision/timm
        model, or a same-file `nn.Module` subclass."""
        name = self.index.resolve(call.func, scope)
        if name and name.startswith(_MODULE_CONSTRUCTOR_PREFIXES) and not name.startswith(_NOT_CONSTRUCTORS):
            return not name.startswith("torch.nn.") or name.rsplit(".", 1)[-1][:1].isupper()
        if isinstance(call.func, cst.Name) and call.func.value in self.index.classes:
            return self._is_module_class(call.func.value)
        return False

    def _is_module_class(self, name: str, depth: int = 0) -> bool:
        if name in self._module_classes:
            return self._module_classes[name]
        self._module_classes[name] = False
        result = False
        node = self.index.classes.get(name)
        if node is not None and depth < 5:
            for base in node.bases:
                text = dotted_name(base.value) or ""
                if _MODULE_BASES.search(text) or (text in self.index.classes and self._is_module_class(text, depth + 1)):
                    result = True
                    break
        self._module_classes[name] = result
        return result

    def _trained_names(self) -> frozenset[str]:
        """Last components of the models the file trains (see `is_trained`)."""
        names, frozen, called = set(), set(), set()
        for kind, name in file_facts.values(self.ctx, "modes.trained"):
            (names if kind == "train" else frozen if kind == "frozen" else called).add(name)
        self._frozen = frozenset(frozen - called)
        return frozenset(names - self._frozen)


def modes(ctx) -> ModeModel:
    """The file's mode model, shared by the TL3xx rules: `ctx.model(modes)`."""
    return ModeModel(ctx)


def is_evaluation_name(name: str) -> bool:
    """A function named as an evaluation (`evaluate`, `val_epoch`), and not a pytest test."""
    return EVAL_FUNCTION_NAME.match(name) is not None and _PYTEST_NAME.match(name) is None


def _rewraps(value: cst.BaseExpression | None, name: str) -> bool:
    """`value` hands back the module `name` already holds: `DataParallel(name)`, `name.to(dev)`,
    `accelerator.unwrap_model(name)` (wrappers and pass-through calls, nested)."""
    while isinstance(value, cst.Call):
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in PASS_THROUGH_METHODS:
            value = func.value
            continue
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        args = positional_args(value)
        if last not in _UNWRAPPERS or not args:
            return False
        value = args[0].value
    return isinstance(value, cst.Name) and value.value == name


def _accepts(klass, call: cst.Call) -> bool:
    """Building `klass` with the arguments of `call` binds them all: its `__init__` (when its own)
    takes that many positional arguments and every keyword `call` names."""
    init = klass.method("__init__")
    if init is None or any(arg.star for arg in call.args):
        return True
    if len(positional_args(call)) > len(init.params) and not init.star_args:
        return False
    return init.keywords is None or all(arg.keyword.value in init.keywords for arg in call.args
                                        if arg.keyword is not None)


def _is_mode_call(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in ("eval", "train")


def _positional_values(call: cst.Call, scope: Scope) -> list[cst.BaseExpression]:
    """The expressions a call passes by position, a `*params` expanded when `params` is a tuple or
    list literal (`params = (loader, model, opt)`, `train_epoch(*params, epoch)`); the positions
    after a star that cannot be expanded are not known."""
    values: list[cst.BaseExpression] = []
    for arg in call.args:
        if arg.keyword is not None or arg.star == "**":
            continue
        if arg.star == "*":
            elements = _literal_elements(arg.value, scope)
            if elements is None:
                break
            values += elements
            continue
        values.append(arg.value)
    return values


def _literal_elements(expr: cst.BaseExpression, scope: Scope) -> list[cst.BaseExpression] | None:
    if isinstance(expr, cst.Name):
        bindings = scope.lookup(expr.value)
        if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].value is None:
            return None
        expr = bindings[0].value
    if not isinstance(expr, (cst.Tuple, cst.List)) or not all(isinstance(e, cst.Element) for e in expr.elements):
        return None
    return [e.value for e in expr.elements]


def _unwrap_iterable(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`enumerate(tqdm(val_loader))` -> `val_loader`."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, (cst.Name, cst.Attribute)):
        name = expr.func.value if isinstance(expr.func, cst.Name) else expr.func.attr.value
        args = positional_args(expr)
        if name in ("enumerate", "tqdm", "iter", "zip", "progress_bar", "track", "islice") and args:
            expr = args[0].value
        else:
            break
    return expr


def _prepared_argument(assign: cst.CSTNode, name: str) -> cst.BaseExpression | None:
    """`model, opt, loader = accelerator.prepare(model, opt, loader)`: the argument standing where
    `name` is unpacked (the same object, wrapped), as `unwrap_model(model)` stands for `model`."""
    if not (isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call)):
        return None
    func = assign.value.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "prepare"):
        return None
    position = unpacked_position(assign, name)
    args = positional_args(assign.value)
    if position is None or position[1] != len(args) or any(a.star for a in assign.value.args):
        return None
    return args[position[0]].value


@file_fact("modes.requires_grad_outside_init")
def _requires_grad_outside_init(ctx):
    """Each mention of `requires_grad`/`requires_grad_` outside a class's `__init__`: code that may
    unfreeze a model after its construction (mode_walk's frozen globals)."""
    if "requires_grad" not in ctx.document:
        return
    for node in walk(ctx.module):
        if (type(node) is cst.Attribute and node.attr.value in ("requires_grad", "requires_grad_")
                or type(node) is cst.Name and node.value in ("requires_grad", "requires_grad_")):
            function = ctx.index.function_at(node)
            if function is None or function.name != "__init__":
                yield node, True


@file_fact("modes.trained")
def _trained_facts(ctx) -> Iterator[tuple[cst.CSTNode, tuple[str, str]]]:
    """What says a model is trained somewhere in the file: ("train", name) for `name.train()`,
    `accelerator.prepare(name)`, an optimizer or DDP over its parameters; ("frozen", name) for
    `name.requires_grad_(False)` or its parameters' `requires_grad = False`; ("called", name) for
    a bare `name.train()`, which unfreezes its mode."""
    index = ctx.index
    for site in index.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute):
            attr = func.attr.value
            receiver = dotted_name(strip_wrappers(func.value))
            if attr == "train" and receiver and len(site.node.args) <= 1:
                args = positional_args(site.node)
                if not args or not is_false(args[0].value):
                    yield site.node, ("train", last_component(receiver))
                if not site.node.args:
                    yield site.node, ("called", last_component(receiver))
            elif attr == "requires_grad_" and receiver:
                args = positional_args(site.node)
                if args and is_false(args[0].value):
                    yield site.node, ("frozen", last_component(receiver))
            elif attr in ("prepare", "setup", "prepare_model") and receiver:
                for arg in site.node.args:
                    text = dotted_name(strip_wrappers(arg.value))
                    if text:
                        yield site.node, ("train", last_component(text))
        qualname = index.resolve(func, site.scope)
        last = (qualname or dotted_name(func) or "").rsplit(".", 1)[-1]
        if role_of_callee(qualname) == OPTIMIZER or last.endswith("Optimizer") or last in (
                "DistributedDataParallel", "DDP", "FSDP", "FullyShardedDataParallel"):
            for arg in site.node.args:
                for owner in parameter_owners(arg.value, site.scope):
                    yield site.node, ("train", owner)
    # `for p in teacher.parameters(): p.requires_grad = False`
    for loop in index.loops:
        if isinstance(loop, cst.For):
            owners = parameter_owners(loop.iter, None)
            if owners and any(isinstance(n, cst.Assign) and is_false(n.value) and any(
                    isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
                    for t in n.targets) for n in walk(loop.body)):
                for owner in owners:
                    yield loop, ("frozen", owner)


# library calls that take a model and never build an optimizer over it
_NOT_OPTIMIZING = frozenset({"prepare", "setup", "prepare_model", "unwrap_model", "to", "cuda", "cpu", "eval",
                             "train", "load_state_dict", "deepcopy", "copy", "print", "len", "isinstance",
                             "hasattr", "getattr", "type", "str", "repr", "id", "format", "info", "debug",
                             "warning"})


@file_fact("modes.parameter_users")
def _parameter_users(ctx) -> Iterator[tuple[cst.CSTNode, tuple[str, str]]]:
    """What could put a model's parameters into an optimizer: ("optimizer", "") per optimizer
    built here, ("params", name) for `name.parameters()` read anywhere and for a model handed
    to a call whose body is not in this file (a project or library helper may build one), and
    ("unknown", "") when an optimizer's parameters or a `.parameters()` receiver cannot be named."""
    index = ctx.index
    for site in index.calls:
        call = site.node
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("parameters", "named_parameters"):
            receiver = dotted_name(strip_wrappers(func.value))
            yield call, ("params", last_component(receiver)) if receiver else ("unknown", "")
            continue
        qualname = index.resolve(func, site.scope)
        last = (qualname or dotted_name(func) or "").rsplit(".", 1)[-1]
        if role_of_callee(qualname) == OPTIMIZER or last.endswith("Optimizer"):
            yield call, ("optimizer", "")
            if not any(parameter_owners(arg.value, site.scope) for arg in call.args):
                yield call, ("unknown", "")
            continue
        if last in _NOT_OPTIMIZING or (qualname or "").startswith("torch.") or \
                index.callee(call, site.scope) is not None:
            continue
        for arg in call.args:
            text = dotted_name(strip_wrappers(arg.value))
            if text:
                yield call, ("params", last_component(text))


def _precedes(index, first: cst.CSTNode, second: cst.CSTNode) -> bool:
    """`first` is a statement that runs before `second` in a block they share."""
    second_chain = [second] + list(index.ancestors(second))
    first_chain = [first] + list(index.ancestors(first))
    first_set = set(first_chain)
    for position, node in enumerate(second_chain):
        if node in first_set:
            if node is first:
                return False  # `second` is inside `first`
            container = node
            a = first_chain[first_chain.index(container) - 1]
            b = second_chain[position - 1] if position > 0 else None
            statements = statements_of(container) or list(iter_children(container))
            if b is None or a not in statements or b not in statements:
                return False
            return statements.index(a) < statements.index(b)
    return False


def _parameter_owner_names(expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> set[str] | None:
    """The whole names of `X` in each `X.parameters()` / `X.named_parameters()` under `expr`
    (through one level of a variable holding them); None when one of them cannot be named."""
    owners: set[str] = set()
    for node in walk(expr):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                node.func.attr.value in ("parameters", "named_parameters"):
            text = dotted_name(strip_wrappers(node.func.value))
            if not text:
                return None
            owners.add(text)
        elif isinstance(node, cst.Name) and depth == 0:
            for binding in scope.lookup(node.value):
                if binding.value is not None and binding.value is not node:
                    more = _parameter_owner_names(binding.value, scope, depth + 1)
                    if more is None:
                        return None
                    owners |= more
    return owners


def _binds(statement: cst.CSTNode, name: str) -> bool:
    """`statement` (an assignment) binds the plain name `name`."""
    targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else \
        [statement.target] if isinstance(statement, (cst.AugAssign, cst.AnnAssign)) else []
    return any(isinstance(t, cst.Name) and t.value == name for t in targets)


#: words in a file that turns recording off around a call (an order for reading files, never a fact)
_GRAD_OFF_WORDS = ("no_grad", "inference_mode", "set_grad_enabled")
#: words of a file whose code can compute gradients (`FunctionSummary.differentiates`)
_GRAD_USE_WORDS = ("autograd", "backward", "requires_grad", "enable_grad", "functorch", "torch.func")


def _module_dict_member(index, call, scope: Scope, key: str) -> cst.BaseExpression | None:
    """The value `nn.ModuleDict({"key": value, ...})` or `nn.ModuleDict(dict(key=value, ...))`
    holds under `key` (what `.key` of it is), when the call spells it out."""
    if not isinstance(call, cst.Call) or index.resolve(call.func, scope) != "torch.nn.ModuleDict" or not call.args:
        return None
    arg = call.args[0].value
    if isinstance(arg, cst.Dict):
        for element in arg.elements:
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) \
                    and element.key.evaluated_value == key:
                return element.value
    elif isinstance(arg, cst.Call) and isinstance(arg.func, cst.Name) and arg.func.value == "dict":
        for inner in arg.args:
            if inner.keyword is not None and inner.keyword.value == key:
                return inner.value
    return None


def _pytest_call(path: str, call) -> bool:
    """A call in a pytest test: a `test_*` function of a file pytest collects (`test_*.py`, `*_test.py`)."""
    file = path.replace("\\", "/").rsplit("/", 1)[-1]
    return bool(call.caller) and _PYTEST_NAME.match(call.caller) is not None and \
        (file.startswith("test_") or file.endswith("_test.py")) and file.endswith(".py")


def _another_class_method(call, class_name: str | None) -> bool:
    """A method call whose receiver is built from other classes only, each defining that method
    itself (`evaluator = CrowdHumanEvaluator(...)`, then `evaluator.evaluate(model)`): it runs theirs."""
    classes = getattr(call, "receiver_classes", ())
    return bool(classes) and class_name is not None and \
        all(own and name.rsplit(".", 1)[-1] != class_name for name, own in classes)


# calls whose result carries no graph of what they are handed
_GRAPH_CUTTING_METHODS = frozenset({"detach", "item", "tolist", "numpy", "detach_"})
_GRAPH_CUTTING_FUNCTIONS = frozenset({"float", "int", "bool", "len", "str", "round"})


def _traced_back(flow, names: list[cst.Name], names_of, found) -> bool:
    """Whether `found(name, binding)` holds for a binding reaching one of `names`, or one reaching a
    name of the value such a binding assigns, a few steps back (each binding once). `found` answers
    True (found), False (follow its value: `names_of(value)`) or None (do not follow it)."""
    seen: set = set()
    level = names
    for _ in range(6):
        following = []
        for name in level:
            binding = flow.reaching(name)
            if binding is None or id(binding.node) in seen:
                continue
            seen.add(id(binding.node))
            answer = found(name, binding)
            if answer:
                return True
            if answer is None:
                continue
            value = flow.bound_value(binding)
            if value is None and isinstance(binding.node, cst.AugAssign):
                value = binding.node.value
            if value is not None:
                following += names_of(value)
        level = following
        if not level:
            break
    return False


def _graph_names(expr: cst.CSTNode) -> list[cst.Name]:
    """The variables `expr` reads through operations that keep a graph: not the attribute of an
    `a.b`, not an argument's keyword, nothing under `.detach()`/`.item()`/`float(...)`, no lambda."""
    found: list[cst.Name] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            found.append(node)
            continue
        if isinstance(node, cst.Lambda):
            continue
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in _GRAPH_CUTTING_METHODS or \
                    isinstance(func, cst.Name) and func.value in _GRAPH_CUTTING_FUNCTIONS:
                continue
            stack.append(func.value if isinstance(func, cst.Attribute) else func)
            stack.extend(arg.value for arg in node.args)
            continue
        if isinstance(node, cst.Attribute):
            stack.append(node.value)
            continue
        stack.extend(iter_children(node))
    return found
