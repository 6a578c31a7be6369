"""The checkpoint model's part about resuming: the state around a save, resumable checkpoints
and the loads that restore them (TL404, TL701)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterator

import libcst as cst

from trainlint.model import file_facts
from trainlint.model.checkpoint_base import (COUNTER_NAME, ROLE_KIND, STATE_KINDS, CheckpointUses, ResumeSave, Save,
                                             path_words, state_label, string_value, walk_scope)
from trainlint.model.dataflow import dataflow
from trainlint.model.grad_mode import GRAD_OFF_CONTEXTS
from trainlint.model.path_literals import constant_path, path_literals
from trainlint.model.premises import Premise, premise, unknown
from trainlint.model.index import CallSite, FunctionInfo, Scope, dotted_name, keyword_value, positional_args, walk
from trainlint.model import frameworks
from trainlint.model.roles import MODEL, OPTIMIZER, SCHEDULER, roles
from trainlint.model.summaries import written_values
from trainlint.model.training import training_model


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
EXPORT_PATH = re.compile(r"best|final|export|inference|deploy|release|pretrained|weights", re.I)
RESUME_PATH = re.compile(r"last|latest|resume|checkpoint|ckpt", re.I)
# calls that only show a value (a loaded counter passed to them restores nothing)
_ONLY_SHOWN = frozenset({"print", "format", "info", "debug", "warning", "log", "write", "set_description",
                         "set_postfix", "add_scalar"})
_NAME_CACHE: dict[str, cst.Name] = {}


def _is_counter_value(expr: cst.BaseExpression | None) -> bool:
    """`start_epoch = ckpt["epoch"] + 1`: a counter read back from a checkpoint."""
    if isinstance(expr, cst.BinaryOperation):
        expr = expr.left
    return isinstance(expr, cst.Subscript)


# a call that may restore what it is handed (`set_state_dict(model, optimizer, ...)`, `load_optimizer(opt, path)`)
_RESTORING_CALL = re.compile(r"load|restore|resume|set_(\w+_)?state_dict", re.I)


class ResumeCheckpoints:
    """The training state the code around a save has (optimizer, scheduler, scaler, counters, by role),
    which saves are resumable checkpoints and which loads restore them (TL404, TL701).

    A part of `CheckpointModel` (checkpoints.py), whose `__init__` sets the attributes used here.
    """

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
            for where, call in linker.callers_by_file(function.name):  # callers in the project's other files
                for name, role in call.state:
                    if role in ROLE_KIND:
                        add(ROLE_KIND[role], state_label(name, where))
        class_name = function.class_name if function is not None else None
        if class_name:
            for attr, values in self.index.class_attributes.get(class_name, {}).items():
                kind = None
                for value in values:
                    if isinstance(value, (cst.Call, cst.Name, cst.IfExp)):  # `GradScaler() if amp else None`
                        role = self.roles.of(value, self.index.scope_at(value))
                        if role in ROLE_KIND:
                            kind = ROLE_KIND[role]
                if kind is None and (COUNTER_NAME.match(attr) or self._attribute_counts_position(class_name, attr)):
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
                if role in ROLE_KIND:
                    return ROLE_KIND[role]
            elif binding.kind in ("assign", "with") and isinstance(binding.value, (cst.Call, cst.Name)):
                role = self.roles.of(binding.value, scope)
                if role in ROLE_KIND:
                    return ROLE_KIND[role]
            elif binding.kind == "assign" and binding.value is None:
                # unpacked: `model, opt, sched = build(cfg)` (roles follows the returned tuple)
                role = self.roles.of(_NAME_CACHE.setdefault(name, cst.Name(name)), scope)
                if role in ROLE_KIND:
                    return ROLE_KIND[role]
        if COUNTER_NAME.match(name) and any(
                b.kind in ("for", "augassign", "param") or (b.kind == "assign" and _is_counter_value(b.value))
                for b in bindings):
            return "step"
        if any(self._counts_position(b, name) for b in bindings):
            return "step"
        return None

    # -- a counter of the run's position, by what the code does with it ----------------------------
    def _counts_position(self, binding, name: str) -> bool:
        """`name` is a counter of the run's position whatever it is called: the target of a
        `for ... in range(...)` around the loop that steps the optimizer, in which neither the
        model nor the optimizer is built anew (a fold or seed loop starts other runs); or a name
        advanced by a constant in such a loop (or in the training loop itself), never set back inside
        it, that a condition reads (`while step < n`, `if step % k == 0`): it positions the run. The
        `range` loop is no other loop's (a count of critic updates per batch starts again)."""
        if binding.kind == "for" and isinstance(binding.node, cst.For):
            loop = binding.node
            return isinstance(loop.iter, cst.Call) and dotted_name(loop.iter.func) == "range" and \
                dotted_name(loop.target) == name and self._around_training(loop) and \
                not self._in_loop(loop) and not self._builds_state(loop)
        if binding.kind == "augassign" and isinstance(binding.node, cst.AugAssign):
            function = self.index.function_at(binding.node)
            where = function.node if function is not None else self.index.module
            return self._advances(binding.node, name, [where])
        return False

    def _attribute_counts_position(self, class_name: str, attr: str) -> bool:
        """`self.<attr>` advanced by a constant in a training loop of a method of the class, never
        set back in that loop, and read by a condition in the class (see `_counts_position`)."""
        label = "self." + attr
        methods = [f.node for f in self.index.functions if f.class_name == class_name]
        return any(isinstance(node, cst.AugAssign) and dotted_name(node.target) == label
                   and self._advances(node, label, methods)
                   for method in methods for node in walk(method.body))

    def _advances(self, node: cst.AugAssign, label: str, places) -> bool:
        if not (isinstance(node.operator, cst.AddAssign) and isinstance(node.value, cst.Integer)):
            return False
        loop = next((a for a in self.index.ancestors(node) if isinstance(a, (cst.For, cst.While))
                     and self._around_training(a)), None)
        if loop is None:
            return False
        if any(isinstance(n, cst.Assign) and any(dotted_name(t.target) == label for t in n.targets)
               for n in walk(loop)):
            return False  # set back inside the loop: a count per pass, not the run's
        for place in places:
            for n in walk(place):
                test = n.test if isinstance(n, (cst.If, cst.While, cst.IfExp)) else None
                if test is not None and any(type(m) in (cst.Name, cst.Attribute) and dotted_name(m) == label
                                            for m in walk(test)):
                    return True
        return False

    def _around_training(self, loop: cst.CSTNode) -> bool:
        """`loop` is a loop that steps the optimizer, or holds one in its body."""
        if self._training_loops is None:
            self._training_loops = set()
            for tl in self.ctx.model(training_model).loops:
                self._training_loops.add(tl.node)
                for a in self.index.ancestors(tl.node):
                    if isinstance(a, (cst.For, cst.While)):
                        self._training_loops.add(a)
        return loop in self._training_loops

    def _in_loop(self, node: cst.CSTNode) -> bool:
        """`node` runs inside another loop of its function (a count of critic updates per batch
        starts again on every batch)."""
        for a in self.index.ancestors(node):
            if isinstance(a, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(a, (cst.For, cst.While)):
                return True
        return False

    def _builds_state(self, loop: cst.For) -> bool:
        """The loop builds a model or an optimizer anew on every pass."""
        scope = self.index.scope_at(loop)
        return any(isinstance(n, cst.Assign) and isinstance(n.value, cst.Call)
                   and self.roles.of(n.value, scope) in (MODEL, OPTIMIZER) for n in walk(loop.body))

    def resume_saves(self) -> Iterator["ResumeSave"]:
        """Saves meant for resuming, with what they hold and what the code around them has."""
        found = list(self._one_file_saves())
        yield from found
        yield from self._directory_units({(r.save.site.function, id(r.save.scope)) for r in found})

    def _one_file_saves(self) -> Iterator["ResumeSave"]:
        for save in self.saves:
            content = self.saved_dict(save.obj, save.scope)
            kinds = self.object_kinds(save)
            if kinds is None:
                continue
            path = self.path_text(save)
            if content is None:
                # a bare state dict: a weights file, unless its name says it is the one to resume from
                if kinds != {"model"} or not re.search(r"last|latest|resume|checkpoint|ckpt", path_words(path),
                                                       re.I):
                    continue
                if self.ctx.model(training_model).after_training(save.node):
                    continue  # saved once training is over: a final export, whatever its name
            elif not content.complete:
                continue
            # `"global_step": 0` written down: no position of this run
            written_down = content is not None and "step" in kinds and not self.counts_step(content)
            beside = self._kinds_saved_beside(save)
            if beside is None:
                continue
            kinds = kinds | beside
            if written_down:
                kinds.discard("step")
            if "model" not in kinds:
                continue
            resumable = bool(kinds & {"optimizer", "step"}) or bool(RESUME_PATH.search(path))
            if not resumable:
                continue
            if "optimizer" not in kinds and EXPORT_PATH.search(path_words(path) or path):
                continue  # best.pt / final weights with metadata: an export, not a resume point
            if self._scratch_file(save):
                continue
            # a checkpoint of the weights alone, a resume point only by its file's name, or of the
            # weights with their epoch or their optimizer's state (what a best-model snapshot or a
            # final artefact holds too): that a resume reads it back must be shown.
            if kinds & {"optimizer", "step"}:
                read_back = self._resume_evidence(save, content)
            else:
                read_back = self._read_back(save, content)
            available = self.available_state(save.scope, save.site.function)
            yield ResumeSave(save, kinds, available, self._missing(save, kinds, available), read_back=read_back)

    def _missing(self, save: Save, kinds: set[str], available: dict[str, list[str]]) -> dict[str, list[str]]:
        missing = {kind: available[kind] for kind in STATE_KINDS if kind in available and kind not in kinds}
        if "step" in missing and (self._counter_in_path(save, missing["step"]) or self._progress_in_path(save)):
            del missing["step"]  # `f"{out}/{step:07d}.pt"`: the file name holds the counter
        if "step" in missing:
            # `self.register_buffer("step", ...)` saved with `self.state_dict()`: inside the dict
            content = self.saved_dict(save.obj, save.scope)
            read_back = self._counters_read_back(set(content.keys())) if content is not None else set()
            if read_back and any(n in read_back or self._counts_from(n, read_back) for n in missing["step"]):
                missing["step"] = []  # the resume sets the run's counter (or its start) from a key the dict writes
            missing["step"] = [n for n in missing["step"] if not self._in_saved_state_dict(save, n)
                               and n not in self._written_beside(save) and not self._restarted_per_call(save, n)]
            if not missing["step"]:
                del missing["step"]
        if "scheduler" in missing:
            # `for _ in range(start): sched.step()` on resume: replayed, not read from the file
            # `sched.step(position)` of a timm schedule: its rate a function of the position it is told
            missing["scheduler"] = [n for n in missing["scheduler"]
                                    if n not in self.replayed_schedulers and not self._told_position(n)
                                    and not self._built_from_start(n)
                                    and not self._built_at_restored_position(save, n)
                                    and not self._drives_other_optimizer(save, n)]
            if not missing["scheduler"]:
                del missing["scheduler"]
        return missing

    def _counts_from(self, counter: str, starts: set[str]) -> bool:
        """A loop of the file counts `counter` from one of `starts`: `for epoch in range(start, n)`."""
        for node in walk(self.index.module):
            if isinstance(node, cst.For) and isinstance(node.target, cst.Name) and node.target.value == counter \
                    and isinstance(node.iter, cst.Call) and isinstance(node.iter.func, cst.Name) \
                    and node.iter.func.value == "range" and len(node.iter.args) >= 2:
                first = node.iter.args[0].value
                if any(isinstance(n, cst.Name) and n.value in starts for n in walk(first)):
                    return True
        return False

    def _counters_read_back(self, keys: set[str]) -> set[str]:
        """The names a load of this file sets from one of `keys` of what it loaded (`start_epoch =
        ckpt["epoch"] + 1`): a counter the resume restores from that key, so a dict that writes the
        key holds the counter (`"epoch": 0` in the state saved before the first epoch included),
        whatever the key is called."""
        found: set[str] = set()
        if not keys:
            return found
        for site in self.loads:
            name = self._loaded_name(site)
            if name is None:
                continue
            body = site.function.node if site.function is not None else self.index.module
            for node in self._checkpoint_uses(body, site.scope).subscripts.get(name, ()):
                slice_ = node.slice[0].slice
                if not (isinstance(slice_, cst.Index) and string_value(slice_.value) in keys):
                    continue
                if not any(binding.node is self.index.parent(site.node)
                           for binding in self.index.reaching_bindings(node, name, site.scope)):
                    continue  # a read of another load into the same name
                statement = self.index.enclosing_statement(node)
                if isinstance(statement, cst.Assign) and len(statement.targets) == 1 and \
                        isinstance(statement.targets[0].target, cst.Name) and \
                        statement.value is not None and node in set(walk(statement.value)):
                    found.add(statement.targets[0].target.value)
        return found

    def _directory_units(self, done: set) -> Iterator["ResumeSave"]:
        """A checkpoint directory filled file by file: a function that saves the model's state and the
        optimizer's each on its own (`model.pt`, `optimizer.pt`, directly or through a helper it
        calls) writes one resume point, the directory; what none of its saves holds is left out.
        Quiet when one of them is a dict (judged as a file of its own), writes something we cannot
        see into that the function built itself, or the function saves through calls this model
        does not read."""
        groups: dict[tuple, list[Save]] = {}
        for save in self.saves:
            groups.setdefault((save.site.function, id(save.scope)), []).append(save)
        for key, saves in groups.items():
            if key in done or len(saves) < 2:
                continue
            kinds: set[str] = set()
            for save in saves:
                own = self.object_kinds(save)
                if self.saved_dict(save.obj, save.scope) is not None or \
                        own is None and self.is_checkpoint(save) and not self.is_param(save.obj, save.scope):
                    break
                kinds |= own or set()
            else:
                if not {"model", "optimizer"} <= kinds:
                    continue
                function = saves[0].site.function
                body = function.node if function is not None else None
                if body is not None and self._saves_elsewhere(body):
                    continue
                anchor = self._writing_save(saves[0])
                if any(self._scratch_file(s) for s in saves):
                    continue
                available = self.available_state(saves[0].scope, function)
                missing = self._missing(saves[0], kinds, available)
                if any(self._counter_in_path(s, missing.get("step", [])) for s in saves):
                    missing.pop("step", None)
                yield ResumeSave(anchor, kinds, available, missing, parts=tuple(saves))

    def _writing_save(self, save: Save) -> Save:
        """The `torch.save` that writes a save: its own, or that of the same-file helper it calls
        (`save_state(...)` nested in the method: its one `torch.save(state, f)`)."""
        if save.helper is None:
            return save
        target = self.index.callee(save.node, save.scope)
        inner = [s for s in self.saves if target is not None and s.site.function is target and s.helper is None]
        return inner[0] if len(inner) == 1 else save

    def _read_back(self, save: Save, content) -> Premise:
        """That a load reads this save's file back before training goes on: one of this file reads
        the same path (its text, or a file name the two paths spell out alike) or the very keys the
        saved dict has; or a file calling the saving function loads that file name. Unknown when
        nothing but the path's name says the file is read back."""
        written = {self.text(save.dest)} if save.dest is not None else set()
        value = self.value_of(save.dest, save.scope, at=save.node) if save.dest is not None else None
        if value is not None:
            written.add(self.text(value))
        names = path_literals(save.dest, save.scope)
        # an atomic save commits its temporary file onto the final path: what a resume reads is that
        finals = set()
        for final in self.renamed_to(save):
            finals.add(self.text(final))
            written.add(self.text(final))
            final_value = self.value_of(final, save.scope, at=save.node)
            if final_value is not None:
                written.add(self.text(final_value))
            names |= path_literals(final, save.scope)
        saved_keys = frozenset(content.keys()) if content is not None else frozenset()
        shown = save.dest if save.dest is not None else save.node
        constants = self._constant_paths(save)
        # the file's loads, from any of its definitions (file facts: the language server checks
        # an edited definition with the rest's values; both gathered whatever the answer, so that
        # a slice gathers the facts the whole file's check did)
        in_place = file_facts.values(self.ctx, "checkpoints.in_place_reads")
        for sources, literals, keys, required, trains_after, constant, load in file_facts.values(
                self.ctx, "checkpoints.resume_reads"):
            if sources & written or names & literals:
                what = f"`{sorted(names & literals)[0]}`" if names & literals else f"`{self.text(save.dest)[:60]}`"
                if sources & finals:
                    what = f"`{sorted(sources & finals)[0][:60]}`, where a rename commits the file this save writes,"
                return premise(f"a load of this file (`{load}`) reads {what} back: a resume reads this checkpoint",
                               shown, "use")
            # the same keys, and none this save does not write that the load indexes (it would fail
            # here); not when both paths are constants that differ: the load reads another file (the
            # weights a fresh run starts from, `torch.load("sft/best.pt")`, saved alike)
            if saved_keys and trains_after and saved_keys <= keys and required <= saved_keys and \
                    not self._other_file(constant, constants):
                return premise(f"a load of this file (`{load}`) reads every key this save writes "
                               f"({', '.join(sorted(saved_keys))}) and training goes on after it", shown, "use")
        # a load into the dict it is handed (`dcp.load(state, checkpoint_id=...)`) of the same path
        for source, literals, load in in_place:
            if source in written or names & literals:
                what = f"`{sorted(names & literals)[0]}`" if names & literals else f"`{source[:60]}`"
                return premise(f"a load of this file (`{load}`) reads {what} back: a resume reads this checkpoint",
                               shown, "use")
        function = save.site.function
        linker = self.index.linker
        if names and function is not None and function.class_name is None and linker is not None \
                and function.scope.parent is self.index.module_scope:
            shared = names & linker.loaded_by_callers(function.name)
            if shared:
                return premise(f"a file that calls `{function.name}` loads `{sorted(shared)[0]}`, the file it "
                               "writes: a resume reads this checkpoint", save.dest, "use")
        return unknown("a resume reads this file back: only its name says so (no load of the project reads "
                       "it; a weights file such as a best-model export is not read to resume)", shown, "use")

    def _constant_paths(self, save: Save) -> frozenset[str] | None:
        """The paths a save's file ends up at when each is all constants: the one it writes and
        the targets a rename commits it to; None when one of them is computed at run time."""
        if save.dest is None:
            return None
        found = set()
        for path in (save.dest, *self.renamed_to(save)):
            constant = constant_path(path, save.scope)
            if constant is None:
                return None
            found.add(constant)
        return frozenset(found)

    @staticmethod
    def _other_file(load: str | None, saved: frozenset[str] | None) -> bool:
        """A load whose constant path is none of the constant paths a save's file ends up at reads
        another file, whatever keys the two share."""
        return load is not None and saved is not None and load not in saved

    def _resume_evidence(self, save: Save, content) -> Premise:
        """That a resume reads back a checkpoint of the weights with their step/epoch or their
        optimizer's state: a load of this file reads its path back (`_read_back`), or a load of
        this file keeps a step/epoch key this save writes (`start_epoch = ckpt["epoch"] + 1`,
        `self.epochs_run = snap["EPOCHS_RUN"]`: the run goes on from the saved position). Unknown
        otherwise: the weights with the epoch they were reached at, or with the optimizer's state, are
        what a best-model snapshot or a run's final artefact holds too, and nothing then resumes
        from them."""
        found = self._read_back(save, content)
        if found.proven:
            return found
        keys = frozenset(content.keys()) if content is not None else frozenset()
        constants = self._constant_paths(save)
        for restored, constant, load in file_facts.values(self.ctx, "checkpoints.restored_counters"):
            shared = keys & restored
            if shared and not self._other_file(constant, constants):
                return premise(f"a load of this file (`{load}`) restores the run's position from "
                               f"`{sorted(shared)[0]}`, a key this save writes: a resume reads this checkpoint",
                               save.dest if save.dest is not None else save.node, "use")
        for _, _, read, required, trains_after, constant, load in file_facts.values(
                self.ctx, "checkpoints.resume_reads"):
            # `model.load_state_dict(ckpt["model"])` before training goes on: the run continues from
            # the weights this save writes, under the key it writes them (and indexes no key it lacks)
            weights = {key for key in keys & read if "model" in self._key_kinds(key)}
            if trains_after and weights and required <= keys and not self._other_file(constant, constants):
                return premise(f"a load of this file (`{load}`) restores the weights from `{sorted(weights)[0]}`, "
                               "the key this save writes them under, and training goes on after it: a resume "
                               "reads this checkpoint", save.dest if save.dest is not None else save.node, "use")
        started = self._loop_from_start(save, content)
        if started is not None:
            return started
        return unknown("a resume reads this checkpoint back: no load of the project reads its path or keeps "
                       "a step/epoch key it writes (the weights with their epoch or their optimizer's state are "
                       "also what a best-model snapshot or a final artefact holds)",
                       save.dest if save.dest is not None else save.node, "use")

    def _loop_from_start(self, save: Save, content) -> Premise | None:
        """The save runs in a loop `for epoch in range(start, n)` whose start is not a number
        written down (`args.start_epoch`, `self.epochs_run`), and the dict writes that loop's
        counter: the run is built to go on from a position it is given, the one this checkpoint
        records (a resume path set from the command line or a config)."""
        if content is None:
            return None
        mentioned = {node.value for _, value, _ in content.items for node in walk(value)
                     if isinstance(node, cst.Name)}
        for ancestor in self.index.ancestors(save.node):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                break
            if not (isinstance(ancestor, cst.For) and isinstance(ancestor.target, cst.Name)
                    and ancestor.target.value in mentioned and isinstance(ancestor.iter, cst.Call)
                    and isinstance(ancestor.iter.func, cst.Name) and ancestor.iter.func.value == "range"):
                continue
            args = positional_args(ancestor.iter)
            if len(args) >= 2 and not _number(args[0].value) and \
                    not isinstance(args[0].value, (cst.SimpleString, cst.UnaryOperation)):
                return premise(f"the loop around it starts from `{self.text(args[0].value)[:40]}`, not a number "
                               f"written down, and the save writes its counter `{ancestor.target.value}`: the run is "
                               "built to go on from a saved position", ancestor.iter, "use")
        return None

    def _restarted_per_call(self, save: Save, label: str) -> bool:
        """`self.<attr>` is set, unconditionally, at the top level of a method other than `__init__`
        to a value that does not read it (a number, or one computed from other state: `self.epoch =
        self.start_iter * batch // len(data)`) before a loop of that method counts it up
        (`self.step = 0` then `while self.step < n: ... self.step += 1`): every call of that method
        starts the count again, whatever a resume restored, so the saved value would tell the
        resumed run nothing."""
        function = save.site.function
        if not label.startswith("self.") or function is None or function.class_name is None:
            return False
        key = (function.class_name, label)
        if key not in self._restarted:
            self._restarted[key] = self._reset_before_count(function.class_name, label)
        return self._restarted[key]

    def _reset_before_count(self, class_name: str, label: str) -> bool:
        for method in self.index.functions:
            if method.class_name != class_name or method.name == "__init__" \
                    or not isinstance(method.node.body, cst.IndentedBlock):
                continue
            reset = False
            for statement in method.node.body.body:
                if isinstance(statement, cst.SimpleStatementLine):
                    reset |= any(isinstance(small, cst.Assign) and len(small.targets) == 1
                                 and dotted_name(small.targets[0].target) == label
                                 and not any(dotted_name(n) == label for n in walk(small.value))
                                 for small in statement.body)
                elif reset and any(isinstance(node, cst.AugAssign) and dotted_name(node.target) == label
                                   and self._in_loop_of(node, method.node) for node in self.index.subtree(statement)):
                    return True
        return False

    def _in_loop_of(self, node: cst.CSTNode, function: cst.FunctionDef) -> bool:
        for ancestor in self.index.ancestors(node):
            if ancestor is function or isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return False
            if isinstance(ancestor, (cst.For, cst.While)):
                return True
        return False

    def _written_beside(self, save: Save) -> set[str]:
        """The names and `self.<attr>`s whose values the save's function writes to a file by a call
        other than its saves (`write_json({"completed_steps": step}, f"{out}/train_state.json")`,
        `json.dump({"epoch": epoch}, f)`): a counter kept beside the checkpoint (once per function)."""
        function = save.site.function
        body = function.node if function is not None else self.index.module
        found = self._written_names.get(body)
        if found is None:
            found = self._written_names[body] = set()
            for node in self.index.scope_nodes(body):
                if type(node) is not cst.Call or node in self._save_nodes:
                    continue
                for expr in written_values(self.index, node, self.index.scope_at(node)):
                    found |= {name for part in walk(expr) if isinstance(part, (cst.Name, cst.Attribute))
                              and (name := dotted_name(part))}
        return found

    def _in_saved_state_dict(self, save: Save, label: str) -> bool:
        """`self.<attr>` is a registered buffer or parameter of the save's class (so part of its
        `state_dict()`), and the save writes `self.state_dict()`."""
        function = save.site.function
        if not label.startswith("self.") or function is None or function.class_name is None:
            return False
        attr = label[len("self."):]
        if attr not in self._module_state_attrs(function.class_name, function.scope):
            return False
        saved = [save.obj] if save.obj is not None else []
        if isinstance(save.obj, cst.Name):
            saved += [b.value for b in save.scope.lookup(save.obj.value) if b.kind == "assign" and b.value is not None]
        return any(isinstance(node, cst.Call) and dotted_name(node.func) == "self.state_dict" and not node.args
                   for expr in saved for node in walk(expr))

    def _module_state_attrs(self, class_name: str, scope: Scope) -> set[str]:
        """Attributes a class registers as module state: `self.register_buffer("step", t)`,
        `self.register_parameter("step", p)`, `self.step = nn.Parameter(...)`."""
        found = set()
        node = self.index.classes.get(class_name)
        if node is None:
            return found
        for call in (n for n in self.index.subtree(node) if type(n) is cst.Call):  # its methods too
            func = call.func
            args = positional_args(call)
            if isinstance(func, cst.Attribute) and func.attr.value in ("register_buffer", "register_parameter") \
                    and dotted_name(func.value) == "self" and args and isinstance(args[0].value, cst.SimpleString):
                found.add(args[0].value.evaluated_value)
        for attr, values in self.index.class_attributes.get(class_name, {}).items():
            if any(isinstance(v, cst.Call) and self.index.resolve(v.func, self.index.scope_at(v)) in
                   ("torch.nn.Parameter", "torch.nn.parameter.Parameter") for v in values):
                found.add(attr)
        return found

    @property
    def replayed_schedulers(self) -> set[str]:
        """Schedulers fast-forwarded by replaying `step()`: `for _ in range(start_epoch): sched.step()`,
        a loop that steps them and trains nothing (no backward, no other step). Their position is
        restored from the counter the checkpoint holds, not from a state dict."""
        if self._replayed is None:
            self._replayed = set()
            for loop in self.index.loops:
                steps = [n for n in self.index.subtree(loop.body) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                         and n.func.attr.value in ("step", "backward")]
                if not steps or any(n.func.attr.value == "backward" for n in steps):
                    continue
                scope = self.index.scope_at(loop)
                if all(self.roles.of(n.func.value, scope) == SCHEDULER for n in steps):
                    self._replayed |= {name for n in steps if (name := dotted_name(n.func.value))}
        return self._replayed

    def _told_position(self, name: str) -> bool:
        """The scheduler `name` is built only by a timm schedule whose rate is a function of the
        position it is told (`timm.scheduler.CosineLRScheduler`, not the plateau one, which keeps
        the metric's history), and every `step(...)`/`step_update(...)` on it passes that position
        (`sched.step(epoch * len(loader) + i)`): it counts nothing itself, so nothing of it is lost
        when the checkpoint leaves it out (the position comes from the saved counter)."""
        built = [node.value for node in walk(self.index.module) if isinstance(node, cst.Assign)
                 and any(dotted_name(t.target) == name for t in node.targets)]
        if not built:
            return False
        for value in built:
            if not isinstance(value, cst.Call):
                return False
            qualname = self.index.resolve(value.func, self.index.scope_at(value)) or ""
            if not qualname.startswith("timm.scheduler.") or "Plateau" in qualname:
                return False
        steps = [n for n in walk(self.index.module) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                 and n.func.attr.value in ("step", "step_update") and dotted_name(n.func.value) == name]
        return bool(steps) and all(
            any(not a.star and (a.keyword is None or a.keyword.value in ("epoch", "num_updates"))
                and not isinstance(a.value, (cst.Integer, cst.Float)) for a in n.args[:1])
            for n in steps)

    def _built_from_start(self, name: str) -> bool:
        """Every construction of the scheduler `name` is handed (in any argument, or an argument of
        a call among them: `LambdaLR(opt, Decay(n, start_epoch).factor)`, `last_epoch=start - 1`)
        the value a training loop's counter starts from (`for epoch in range(start_epoch, n)`,
        the same value when names are followed through `params = self.params` and `self.params =
        params`): a resumed run that starts from the saved epoch builds the schedule at that
        position, so nothing of it is lost when the checkpoint leaves it out."""
        if name not in self._from_start:
            self._from_start[name] = self._handed_start(name)
        return self._from_start[name]

    def _drives_other_optimizer(self, save: Save, name: str) -> bool:
        """The save writes the state of one or more optimizers (`self.opt_d.state_dict()`) and every
        construction of the scheduler `name` is handed another one (`LambdaLR(self.opt_g, ...)`):
        its schedule belongs to the checkpoint of that optimizer (one file per network)."""
        content = self.saved_dict(save.obj, save.scope)
        if content is None or not content.complete:
            return False
        saved = set()
        for _, value, scope in content.items:
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                    and value.func.attr.value == "state_dict" and "optimizer" in self.value_kinds(value.func.value, scope):
                text = dotted_name(value.func.value)
                if text is None:
                    return False
                saved.add(text)
        if not saved:
            return False
        built = [node.value for node in self._assignments_to(name)]
        if not built:
            return False
        for value in built:
            if not isinstance(value, cst.Call):
                return False
            if any(dotted_name(arg.value) in saved for arg in value.args):
                return False  # handed a saved optimizer, wherever it sits in the call
            args = positional_args(value)
            driven = keyword_value(value, "optimizer") or (args[0].value if args else None)
            text = dotted_name(driven) if driven is not None else None
            # the other optimizer must be shown to be one: a project factory's first argument
            # (`get_schedule(args.rounds, ..., optimizer)`) is not the optimizer it drives
            if text is None or "optimizer" not in self.value_kinds(driven, self.index.scope_at(value)):
                return False
        return True

    def _built_at_restored_position(self, save: Save, name: str) -> bool:
        """Every construction of the scheduler `name` is handed, as `last_epoch=`, a value a load of
        this file reads back from a key the saved dict writes (`last_epoch=ckpt["epoch"]`, or a
        name set from it: `last = ckpt["epoch"]`): the resume builds the schedule at the restored
        position, so the checkpoint needs no scheduler entry. A `last_epoch=` from anything else (an
        option, a number) places it nowhere the checkpoint says."""
        content = self.saved_dict(save.obj, save.scope)
        keys = set(content.keys()) if content is not None else set()
        built = [node.value for node in self._assignments_to(name)]
        if not keys or not built or not all(isinstance(value, cst.Call) for value in built):
            return False
        read_back = self._counters_read_back(keys)
        loaded = {n for site in self.loads if (n := self._loaded_name(site)) is not None}
        for value in built:
            position = keyword_value(value, "last_epoch")
            if position is None:
                return False
            found = False
            for node in walk(position):
                if isinstance(node, cst.Name) and node.value in read_back:
                    found = True
                elif isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) \
                        and node.value.value in loaded and len(node.slice) == 1 \
                        and isinstance(node.slice[0].slice, cst.Index) \
                        and string_value(node.slice[0].slice.value) in keys:
                    found = True
            if not found:
                return False
        return True

    def _handed_start(self, name: str) -> bool:
        starts = self._loop_starts()
        if not starts:
            return False
        built = [node.value for node in self._assignments_to(name)]
        if not built or not all(isinstance(value, cst.Call) for value in built):
            return False
        for value in built:
            scope = self.index.scope_at(value)
            if not any(self._same_value_text(node, scope) in starts for arg in value.args if _positions(arg)
                       for node in walk(arg.value) if isinstance(node, (cst.Name, cst.Attribute))
                       and not isinstance(self.index.parent(node), cst.Attribute)):
                return False
        return True

    def _assignments_to(self, name: str) -> list[cst.Assign]:
        """The file's assignments to the name or attribute `name` (the table made once per file)."""
        if self._assigned is None:
            self._assigned = {}
            for node in self.index.subtree(self.index.module):
                if type(node) is cst.Assign:
                    for target in node.targets:
                        text = dotted_name(target.target)
                        if text is not None:
                            self._assigned.setdefault(text, []).append(node)
        return self._assigned.get(name, [])

    def _loop_starts(self) -> set[str]:
        """The values (as `_same_value_text`) the counters of the file's training loops start from:
        `for epoch in range(start, n)` with a start that is not a number written down (once per file)."""
        if self._starts is None:
            self._starts = set()
            training = self.ctx.model(training_model)
            for node in self.index.loops:
                if not isinstance(node, cst.For) or not isinstance(node.iter, cst.Call):
                    continue
                call = node.iter
                args = positional_args(call)
                if not (isinstance(call.func, cst.Name) and call.func.value == "range" and len(args) >= 2) \
                        or not isinstance(args[0].value, (cst.Name, cst.Attribute)):
                    continue
                if not training._runs_training(node):
                    continue
                text = self._same_value_text(args[0].value, self.index.scope_at(node))
                if text is not None:
                    self._starts.add(text)
        return self._starts

    def _same_value_text(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> str | None:
        """The dotted text of `expr` with its head replaced by what it stands for: a local name
        bound once to another name or attribute (`params = self.params`), and an `__init__`
        parameter the class keeps as an attribute (`self.params = params`)."""
        text = dotted_name(expr)
        if text is None or depth > 3:
            return None
        head, _, rest = text.partition(".")
        bindings = scope.lookup(head) if head != "self" else []
        if len(bindings) == 1:
            binding = bindings[0]
            if binding.kind == "assign" and isinstance(binding.value, (cst.Name, cst.Attribute)):
                inner = self._same_value_text(binding.value, self.index.scope_at(binding.value), depth + 1)
                if inner is not None:
                    return inner + ("." + rest if rest else "")
            elif binding.kind == "param":
                function = self.index.function_at(binding.node)
                if function is not None and function.name == "__init__" and function.class_name:
                    kept = [attr for attr, values in self.index.class_attributes.get(function.class_name, {}).items()
                            if any(isinstance(v, cst.Name) and v.value == head for v in values)]
                    if len(kept) == 1:
                        return f"self.{kept[0]}" + ("." + rest if rest else "")
        return text

    def _counter_in_path(self, save: Save, counters: list[str]) -> bool:
        """The save's path names one of the step/epoch counters, directly or through the variable
        holding the path: a resume reads the counter back from the file name."""
        dest = save.dest
        wanted = set(counters)
        if dest is None and save.helper is not None:
            # a project helper whose path parameter is not told (`atomic_save(state, f"{out}/{step}.pt")`
            # writing through `with open(tmp, "wb") as f`): a counter in an argument beside the
            # saved object goes into what it writes
            return any(isinstance(node, (cst.Name, cst.Attribute)) and dotted_name(node) in wanted
                       for arg in save.node.args if arg.value is not save.obj for node in walk(arg.value))
        if dest is None:
            return False
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

    def _progress_in_path(self, save: Save) -> bool:
        """The save's file name holds a count of the run's progress, whatever it is called and
        however it advances (`f"state-{cur_nimg // 1000:06d}.pt"` with `cur_nimg += batch_size`): a
        name counted up (`+=`) in a loop around the save that steps the optimizer, by an amount
        nothing in that loop changes (a number, or a name the loop never binds), and never set back
        in any loop of the function around the count (a batch index reset every epoch is no
        position of the run). A resume reads the position back from the file name."""
        dest = save.dest
        if dest is not None:
            expressions = [(dest, 0)]
        elif save.helper is not None:  # `atomic_save(state, f"{out}/{step}.pt")`: what goes beside the state
            expressions = [(arg.value, 0) for arg in save.node.args if arg.value is not save.obj]
        else:
            return False
        names: set[str] = set()
        while expressions:
            expr, depth = expressions.pop()
            for node in walk(expr):
                if isinstance(node, cst.Name) and node.value not in names:
                    names.add(node.value)
                    if depth < 2:  # `final + ".tmp"` with `final = f"{out}/{step}.pt"`
                        expressions += [(b.value, depth + 1) for b in save.scope.lookup(node.value)
                                        if b.kind == "assign" and b.value is not None]
        return any(self._progress_count(save, name) for name in names)

    def _progress_count(self, save: Save, name: str) -> bool:
        bindings = save.scope.lookup(name)
        if not bindings or any(b.kind not in ("assign", "augassign", "param") for b in bindings):
            return False
        around = [a for a in self.index.ancestors(save.node) if isinstance(a, (cst.For, cst.While))]
        for binding in bindings:
            node = binding.node
            if binding.kind != "augassign" or not isinstance(node, cst.AugAssign) or \
                    not isinstance(node.operator, cst.AddAssign):
                continue
            loops = []
            for a in self.index.ancestors(node):
                if isinstance(a, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                    break
                if isinstance(a, (cst.For, cst.While)):
                    loops.append(a)
            counting = [loop for loop in loops if loop in around and self._around_training(loop)]
            if not counting:
                continue
            bound_in = {dotted_name(m) for loop in counting for n in walk(loop) for t in _bound_targets(n)
                        for m in walk(t) if isinstance(m, (cst.Name, cst.Attribute))}
            amount = node.value
            if not (isinstance(amount, cst.Integer) or
                    isinstance(amount, (cst.Name, cst.Attribute)) and dotted_name(amount) not in bound_in):
                continue
            if any(isinstance(n, cst.Assign) and any(dotted_name(t.target) == name for t in n.targets)
                   for loop in loops for n in walk(loop)):
                continue  # set back in a loop around the count: a count per pass, not the run's
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
        unseen, saved = group
        own = self.object_kinds(save)
        if own is None:
            if unseen - self.is_checkpoint(save):
                return None
        elif unseen:
            return None
        # a save that holds some of the same state (the model again) is another file of its own,
        # not a part of this one: `checkpoint.th` with the epoch beside a `model.th` of weights;
        # unless it writes the same path (the other branch of `if optimizer is not None:`). The step
        # counter is no such state: a file per object often stamps each with the epoch
        # (`{"epoch": e, "optimizer_state_dict": ...}` beside `{"epoch": e, "model_state_dict": ...}`)
        dest = self._dest_text(save)
        kinds = set().union(*(other for other, where in saved
                              if own is None or not ((other & own) - {"step"})
                              or (where is not None and where == dest)))
        body = save.site.function.node if save.site.function is not None else None
        # a framework's save of the whole training state beside it (`engine.save_checkpoint(dir)`,
        # `accelerator.save_state(dir)`: trainlint/frameworks/*.toml): that state is written too
        framework = self._framework_state_beside(body if body is not None else self.index.module)
        if framework:
            return kinds | framework
        if body is not None and self._saves_elsewhere(body):
            return None  # `save(state, file)`, `save_fsdp_optimizer(...)`: more files we cannot read
        return kinds

    def _framework_state_beside(self, body: cst.CSTNode, kind: str = "save_state") -> set[str]:
        """The state kinds the framework saves (`save_state` entries, on an object of the entry's
        receiver role) in `body` write, its nested definitions aside; with "load_state", what the
        framework loads there restore (`engine.load_checkpoint(dir)`)."""
        table = frameworks.saved_state(kind)
        memo = self.__dict__.setdefault("_framework_state_memo", {})
        if (body, kind) in memo:
            return memo[(body, kind)]
        found: set[str] = set()
        memo[(body, kind)] = found
        role_model = self.ctx.model(roles)
        for node in self.index.scope_nodes(body):
            if type(node) is not cst.Call or not isinstance(node.func, cst.Attribute):
                continue
            for role, state, partial in table.get(node.func.attr.value, ()):
                if role is not None and role_model.of(node.func.value, self.index.scope_at(node)) == role:
                    if any(a.keyword is not None and a.keyword.value in partial for a in node.args) or \
                            any(a.star == "**" for a in node.args):
                        state = ("model",)  # `load_optimizer_states=False`, `**kwargs`: maybe the model alone
                    found |= set(state) & {"model", *STATE_KINDS}
        return found

    def _save_groups(self) -> dict[tuple[FunctionInfo | None, int],
                                   tuple[int, list[tuple[frozenset[str], str | None]]]]:
        """For the saves of each (function, scope): how many are checkpoints we cannot see into,
        and the kinds of state each of the others holds."""
        if self._groups is None:
            self._groups = {}
            for save in self.saves:
                unseen, saved = self._groups.setdefault((save.site.function, id(save.scope)), (0, []))
                kinds = self.object_kinds(save)
                if kinds is None:
                    self._groups[(save.site.function, id(save.scope))] = (unseen + self.is_checkpoint(save), saved)
                else:
                    saved.append((frozenset(kinds), self._dest_text(save)))
        return self._groups

    def _dest_text(self, save: Save) -> str | None:
        return self.ctx.code_for(save.dest) if save.dest is not None else None

    def _saves_elsewhere(self, body: cst.CSTNode) -> bool:
        """`body` calls a save function other than those this model reads (once per function)."""
        found = self._other_saves.get(body)
        if found is None:
            found = self._other_saves[body] = any(
                isinstance(node, cst.Call) and node not in self._save_nodes
                and re.search(r"(^|[._])(save|save_\w+|\w+_save)$", dotted_name(node.func) or "", re.I)
                for node in self.index.scope_nodes(body))
        return found

    def _saved_with_keys(self, keys: set[str]) -> set[str]:
        """State held by the dicts this file saves that have every key a load reads (asked per
        load: the distinct saved dicts are listed once, and each set of keys answered once)."""
        frozen = frozenset(keys)
        kinds = self._kinds_with_keys.get(frozen)
        if kinds is None:
            if self._saved_dicts is None:
                self._saved_dicts = set(file_facts.values(self.ctx, "checkpoints.saved_dicts"))
            kinds = set()
            for saved_keys, held in self._saved_dicts:
                if frozen <= saved_keys:
                    kinds |= held
            self._kinds_with_keys[frozen] = kinds
        return set(kinds)

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
            counter = self._restored_counter(name, body, site.scope, site)
            if not ("optimizer" in saved or counter is not None):
                continue  # nothing says this checkpoint holds more than weights
            resume = self._resume_premise(site, counter)
            if resume is None:
                continue  # it reads the run's file back, but no training can follow: an evaluation
            held = (saved | read) & {"optimizer", "scheduler", "scaler"}
            held.add("optimizer")
            available = self.available_state(site.scope, site.function)
            missing = [(kind, available[kind][0]) for kind in ("optimizer", "scheduler", "scaler")
                       if kind in held and kind in available and kind not in restored | read]
            if missing:
                # a resume split over helpers (`resume_model(path, model)` beside
                # `resume_train_utils(path, optimizer, scheduler)`): what the others restore counts
                elsewhere = self._restored_by_other_loads(site) | self._framework_state_beside(body, "load_state")
                missing = [(kind, label) for kind, label in missing if kind not in elsewhere]
            if missing:
                yield site, missing, saved | read, resume

    def in_place_partial_restores(self) -> Iterator[tuple[CallSite, list[tuple[str, str]], set[str], Premise]]:
        """Loads into the dict they are handed (`dcp.load(state, checkpoint_id=...)`, from the
        framework models) whose dict holds the model but not state the code has: only what the dict
        holds is restored. The load continues a run when its dict holds the step/epoch counter, or
        when it reads the path a save of this file writes (the same text); the checkpoint holds the
        optimizer (a resume point's), and what this file's saves of that kind hold besides. Quiet
        when the function restores that state otherwise (`optimizer.load_state_dict(...)`, or hands
        the object to a call that may)."""
        saved_kinds: set[str] = set()
        written: dict[str, Save] = {}
        for save in self.saves:
            kinds = self.object_kinds(self._reaching_dict(save)) if save.framework else None
            if kinds and "model" in kinds:
                saved_kinds |= kinds
                if save.dest is not None:
                    written[self.text(save.dest)] = save
        for load in self.in_place_loads:
            kinds = self.object_kinds(self._reaching_dict(load))
            if not kinds or "model" not in kinds:
                continue
            path = self.text(load.dest) if load.dest is not None else None
            if "step" in kinds:
                resume = premise("the dict it loads into holds the run's step/epoch counter: training goes on where "
                                 "the checkpoint stopped", load.obj, "use")
            elif path is not None and path in written:
                resume = premise(f"the load reads the checkpoint a save of this file writes (`{path[:60]}`): the "
                                 "run's own", load.dest, "use")
            else:
                continue
            held = (saved_kinds | {"optimizer"}) & {"optimizer", "scheduler", "scaler"}
            available = self.available_state(load.scope, load.site.function)
            restored = self._restored_beside(load)
            missing = [(kind, available[kind][0]) for kind in ("optimizer", "scheduler", "scaler")
                       if kind in held and kind in available and kind not in kinds
                       and not restored & {label.rsplit(" in ", 1)[0] for label in available[kind]}]
            if missing:
                yield load.site, missing, kinds, resume

    def _reaching_dict(self, load: Save) -> Save:
        """The load (or save) with its dict as the assignment that reaches it, when a name is bound
        more than once (`state = {...}` for the load, again for a save)."""
        if isinstance(load.obj, cst.Name) and len(load.scope.lookup(load.obj.value)) > 1:
            binding = self.ctx.model(dataflow).reaching(load.obj)
            if binding is not None and binding.kind == "assign" and isinstance(binding.value, cst.Dict):
                return Save(load.site, binding.value, load.dest, framework=load.framework)
        return load

    def _restored_beside(self, load: Save) -> set[str]:
        """Names (`optimizer`, `self.scheduler`) the load's function restores or hands to a call
        other than the load: `x.load_state_dict(...)`, `set_state_dict(model, optimizer, ...)`."""
        body = load.site.function.node if load.site.function is not None else self.index.module
        found: set[str] = set()
        for node in walk_scope(body):
            if not isinstance(node, cst.Call) or node is load.node:
                continue
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict":
                found.add(dotted_name(func.value) or "")
            called = (dotted_name(func) or "").rsplit(".", 1)[-1]
            if _RESTORING_CALL.search(called):
                found |= {dotted_name(arg.value) or "" for arg in node.args}
        return found - {""}

    def _training_follows(self, node: cst.CSTNode) -> bool:
        """Training runs after `node`: `trains_after`, or a later statement of a block holding it
        (the resume under `if args.ckpt:` inside `if __name__ == "__main__":`, the epochs after it)."""
        training = self.ctx.model(training_model)
        if training.trains_after(node):
            return True
        return any(training._runs_training(later) for later in self._later_statements(node))

    def _resume_premise(self, site: CallSite, counter: cst.CSTNode | None) -> Premise | None:
        """That the load continues a run, not a fresh one started from another run's weights (a
        fine-tuning or linear-evaluation start from a pretrained file): proven when it restores the
        step/epoch counter the loop goes on from, or reads the file a save of this file writes and
        training can run after it; unknown when only the path's name says so (`args.resume`,
        `args.checkpoint`), or when whether training follows is up to callers we cannot see. None
        when it reads the run's file but no training can follow it (a test or sampling branch
        that reads the final weights back)."""
        if counter is not None:
            return premise(f"the load restores the run's counter (`{self.text(counter)}`): training goes on "
                           "where the checkpoint stopped", counter, "use")
        args = positional_args(site.node)
        path = args[0].value if args else site.node
        written = self._written_by(site)
        if written is not None:
            follows = self._training_can_follow(site.node, site.function)
            if follows is False:
                return None
            if follows is None:
                return unknown(f"the load reads the file a save of this file writes (`{written}`), but whether "
                               "training runs after it is up to callers in files not read: a resume, or an "
                               "evaluation of the saved weights", path, "use")
            return premise(f"the load reads the file a save of this file writes (`{written}`) and training "
                           "can run after it: the run's own checkpoint, resumed", path, "use")
        return unknown(f"the load continues this run: only the name of its path (`{self.text(path)[:60]}`) says "
                       "so, and nothing it restores is training state", path, "use")

    def _training_can_follow(self, node: cst.CSTNode, function: FunctionInfo | None, depth: int = 0) -> bool | None:
        """Training can run after `node`: in its own function (a loop around it, a later statement
        that trains), or, for a function, after a call of it by a caller of this file (the same
        question one level up). False when no path can train after it: the module's later code, or
        every caller's, trains nothing; None when callers in files not read may call it."""
        if self._training_follows(node) or self._optimizer_used_after(node):
            return True
        if function is None:
            return False
        if depth > 3:
            return None
        sites = list(self.index.callers(function))
        for caller in sites:
            follows = self._training_can_follow(caller.node, caller.function, depth + 1)
            if follows is not False:
                return follows
        linker = self.index.linker
        if function.class_name is not None or function.scope.parent is not self.index.module_scope:
            # a method, or a nested function: called through objects and names we do not follow
            return None if not sites or function.class_name is not None else False
        if linker is not None and linker.callers_by_file(function.name):
            return None
        return False if sites else None

    def _optimizer_used_after(self, node: cst.CSTNode) -> bool:
        """A later statement of a block holding `node` (in its function) steps an optimizer or
        hands one to a call that may train with it: a function of another file or library
        (`train_epoch(net, opt, loader)`), or a same-file function that does so in turn."""
        return any(self._uses_optimizer(later, 0) for later in self._later_statements(node))

    def _later_statements(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """The statements that follow `node` in each block holding it, innermost block first, up to
        its function (or class, or lambda): what runs after it in that function."""
        child = node
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return
            if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
                statements = list(ancestor.body)
                at = next((i for i, statement in enumerate(statements) if statement is child), None)
                if at is not None:
                    yield from statements[at + 1:]
            child = ancestor

    def _uses_optimizer(self, statement: cst.CSTNode, depth: int) -> bool:
        pending = [statement]
        while pending:
            node = pending.pop()
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not statement:
                continue
            pending.extend(node.children)
            if not isinstance(node, cst.Call):
                continue
            scope = self.index.scope_at(node)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "step" and \
                    self.roles.of(node.func.value, scope) == OPTIMIZER:
                return True
            if not any(self.roles.of(arg.value, scope) == OPTIMIZER for arg in node.args):
                continue
            target = self.index.callee(node, scope)
            if target is None:
                return True  # handed to code we do not read: it may train
            if depth < 3 and self._uses_optimizer(target.node, depth + 1):
                return True
        return False

    def _written_by(self, site: CallSite) -> str | None:
        """The code of a save of this file (in any of its definitions) that writes what the load
        reads (the same path text)."""
        sources = self._load_sources(site)
        if not sources:
            return None
        if self._written is None:  # once per file: every load asks
            self._written = {}
            for text, save in file_facts.values(self.ctx, "checkpoints.written_paths"):
                self._written.setdefault(text, save)
        return next((self._written[source] for source in sorted(sources) if source in self._written), None)

    def _restored_counter(self, name: str, body: cst.CSTNode, scope: Scope,
                          load: CallSite | None = None) -> cst.CSTNode | None:
        """A step/epoch key of the loaded checkpoint whose value is kept (`start_epoch =
        ckpt["epoch"] + 1`, `return ckpt["iter"]`), not only printed or formatted. The reads of
        every load into `name` there are found once (a script may load into `ckpt` hundreds of
        times); for `load`, only a read that the load's own binding of `name` reaches counts (a
        later `ckpt = torch.load(other_path)` of a reference model does not restore the counter an
        earlier load's `ckpt["step"]` read)."""
        memo = (body, id(scope), name)
        if memo not in self._counters:
            self._counters[memo] = self._kept_counters(name, body, scope)
        reads = self._counters[memo]
        if load is not None:
            assign = self.index.parent(load.node)
            reads = [node for node in reads
                     if any(binding.node is assign for binding in self.index.reaching_bindings(node, name, scope))]
        return reads[0] if reads else None

    def _kept_counters(self, name: str, body: cst.CSTNode, scope: Scope) -> list[cst.CSTNode]:
        table = self._checkpoint_uses(body, scope)
        reads = [node for node in table.subscripts.get(name, ())
                 if isinstance(node.slice[0].slice, cst.Index)
                 and "step" in self._key_kinds(string_value(node.slice[0].slice.value) or "")]
        reads += [node for node in table.methods.get(name, ()) if node.func.attr.value in ("get", "pop") and node.args
                  and "step" in self._key_kinds(string_value(node.args[0].value) or "")]
        return [node for node in reads if self._value_kept(node)]

    def _value_kept(self, node: cst.CSTNode) -> bool:
        """The value is assigned or returned, not only handed to a print, a log or a format."""
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, cst.Call):
                func = ancestor.func
                called = func.attr.value if isinstance(func, cst.Attribute) else \
                    func.value if isinstance(func, cst.Name) else ""
                if called in _ONLY_SHOWN:
                    return False
            elif isinstance(ancestor, cst.FormattedString) or (
                    isinstance(ancestor, cst.BinaryOperation) and isinstance(ancestor.operator, cst.Modulo)):
                return False  # `f"epoch {ckpt['epoch']}"`, `"epoch %d" % ckpt["epoch"]`
            elif isinstance(ancestor, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return)):
                return True
            elif isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
        return False

    def _restored_by_other_loads(self, site: CallSite) -> set[str]:
        """The kinds that the file's other loads of the same checkpoint restore or read: same path
        text, or a parameter that same-file callers bind to the same text."""
        own = self._load_kinds(site)
        by_source = self._kinds_by_source()
        # a kind counts when some load other than this one has it: more loads than this one's share
        return {kind for source in self._load_sources(site) for kind, loads in by_source[source].items()
                if loads - (kind in own) > 0}

    def _load_kinds(self, site: CallSite) -> frozenset[str]:
        """What a load's result is read for or restores (once per load: every load of a path asks)."""
        cached = self._kinds_of_load.get(site.node)
        if cached is None:
            name = self._loaded_name(site)
            if name is None:
                cached = frozenset()
            else:
                body = site.function.node if site.function is not None else self.index.module
                read, restored, _, _ = self._uses_of_checkpoint(name, body, site.scope)
                cached = frozenset(read | restored)
            self._kinds_of_load[site.node] = cached
        return cached

    def _kinds_by_source(self) -> dict[str, Counter]:
        """Path text -> kind -> how many of the file's loads of that path read or restore it."""
        if self._by_source is None:
            self._by_source = {}
            for load in self.loads:
                for source in self._load_sources(load):
                    self._by_source.setdefault(source, Counter()).update(self._load_kinds(load))
        return self._by_source

    def _load_sources(self, site: CallSite) -> frozenset[str]:
        """The path texts a load reads: its argument's, or what the callers pass for a parameter."""
        cached = self._sources.get(site.node)
        if cached is not None:
            return cached
        args = positional_args(site.node)
        path = args[0].value if args else None
        if path is None:
            sources: frozenset[str] = frozenset()
        elif isinstance(path, cst.Name) and site.function is not None and self.is_param(path, site.scope):
            sources = frozenset(self.text(arg) for caller in self.index.callers(site.function)
                                if (arg := self.index.argument_for(caller.node, site.function, path.value)) is not None)
        else:
            sources = frozenset({self.text(path)})
        self._sources[site.node] = sources
        return sources

    def _feeds_evaluation(self, site: CallSite, body: cst.CSTNode) -> bool:
        """No training runs after the load and, after it, a model is put in eval mode (or a
        no_grad/inference_mode block runs): the loaded weights are evaluated."""
        if self.ctx.model(training_model).trains_after(site.node):
            return False
        order = self.node_order
        start = order.get(site.node, 0)
        for node in self.index.scope_nodes(body):
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
        restores with `load_state_dict`, and whether it hands the whole checkpoint elsewhere.
        The same for every load into `name` there: answered once (a script may load into `ckpt`
        hundreds of times)."""
        memo = (body, id(scope), name)
        if memo not in self._name_uses:
            self._name_uses[memo] = self._read_uses(name, body, scope)
        read, restored, opaque, keys = self._name_uses[memo]
        return set(read), set(restored), opaque, set(keys)

    def _read_uses(self, name: str, body: cst.CSTNode, scope: Scope) -> tuple[set[str], set[str], bool, set[str]]:
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

    def _checkpoint_uses(self, body: cst.CSTNode, scope: Scope) -> "CheckpointUses":
        """What `_uses_of_checkpoint` reads in a function, by name, from one walk of it (a
        script's loads would otherwise each walk the whole module)."""
        key = (body, id(scope))
        table = self._uses.get(key)
        if table is None:
            table = self._uses[key] = CheckpointUses()
            for node in self.index.scope_nodes(body):
                kind = type(node)  # every node of the function: `type(...) is` skips ABCMeta
                if kind is cst.Subscript and isinstance(node.value, cst.Name):
                    table.subscripts.setdefault(node.value.value, []).append(node)
                elif kind is cst.Call and isinstance(node.func, cst.Attribute):
                    receiver, method = node.func.value, node.func.attr.value
                    if isinstance(receiver, cst.Name):
                        table.methods.setdefault(receiver.value, []).append(node)
                    if method == "load_state_dict" and node.args:
                        for mentioned in self._mentioned(node.args[0].value, scope):
                            table.restores.setdefault(mentioned, []).append(node)
                elif kind is cst.Call:
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


def _number(value: cst.BaseExpression) -> bool:
    """`0`, `-1`, `0.0`: a number written down."""
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        value = value.expression
    return isinstance(value, (cst.Integer, cst.Float))


def _positions(arg: cst.Arg) -> bool:
    """An argument of a scheduler's construction that sets where its schedule stands: `last_epoch=`,
    or the function that gives the rate (`lambda e: ...`, `Decay(n, start).factor`, `partial(...)`);
    a length or a step size (`T_max=epochs - start`) only stretches the schedule from its start."""
    if arg.keyword is not None and arg.keyword.value == "last_epoch":
        return True
    value = arg.value
    while isinstance(value, cst.Attribute):
        value = value.value
    return isinstance(value, (cst.Lambda, cst.Call))


def _bound_targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """What `node` binds: the targets of an assignment, the target of a `for`."""
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    if isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For)):
        return [node.target]
    return []
