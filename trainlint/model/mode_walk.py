"""The abstract interpreter behind the mode model: it runs one function's statements with the mode
facts and grad state (branches joined, loops to a fixpoint, same-file calls inlined a few levels
deep, `@contextmanager` helpers split at their `yield`), and records each forward and each eval
call that a later backward of the training loop still sees.

`ModeModel` (modes.py) owns the queries and the per-function entry states; it creates a
`FunctionRun` per function. This module does not import modes.py (that would be a circle), so
`model` is annotated by name only.
"""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model.grad_mode import (GRAD_SETTERS, bool_flag_value, bound_arguments, context_grad, decorator_grad,
                                       flag_value, is_false, is_true, literal_flags, skipped_branch, volatile_input)
from trainlint.model.index import FunctionInfo, Scope, dotted_name, iter_children, keyword_arg, positional_args, walk
from trainlint.model.mode_names import (MEMBERS_AND_SELF, SELF, function_name, last_component, strip_wrappers,
                                        switched_members)
from trainlint.model import file_facts
from trainlint.model.summaries import ClassSummary
from trainlint.model.mode_state import (Abandon, CHOSEN, COND, ENTRY_FACTS, EVAL, Fact, Flow, Forward, Frame, GRAD_ON,
                                        MODE_WORDS, NEW, OFF, ON, Outcome, RESTORE, State, TRAIN, UNKNOWN, UNKNOWN_FACTS,
                                        Unrestored, join, join_all)


CONTEXTMANAGER = frozenset({"contextlib.contextmanager", "contextmanager"})
_INSPECTING = frozenset({"isinstance", "type", "len", "id", "repr", "str", "print", "hasattr"})
# attributes of a torch (or Transformers) module that describe it and hold no parameter
_MODULE_FACTS = frozenset({"device", "dtype", "config", "training"})
# a module's methods that add no parameter and set no `requires_grad` (a frozen model stays frozen)
_KEEPS_FLAGS = frozenset({"eval", "train", "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "state_dict",
                          "load_state_dict", "buffers", "named_buffers", "zero_grad", "forward", "generate",
                          "parameters", "named_parameters"})
# a module's methods that run no forward of it (its mode, its parameters, where it lives, its state)
_NOT_FORWARDING = frozenset({"eval", "train", "parameters", "named_parameters", "buffers", "named_buffers",
                             "state_dict", "load_state_dict", "to", "cuda", "cpu", "float", "half", "requires_grad_",
                             "zero_grad", "apply", "modules", "children", "named_modules", "register_buffer"})
_FORWARD_METHODS = frozenset({"forward", "generate"})
_CYCLE = object()  # `_frozen_value` of a name whose bindings were all followed already

# an `if` testing the mode (`if was_training:`, `if self.training:`, `if phase == "train":`)
_MODE_TEST = re.compile(r"train|mode", re.IGNORECASE)

# external helpers that (by their name) put a model they receive back in train mode
_TRAIN_HELPER = re.compile(r"(^|_)train(_mode|ing_mode)?$|^set_train|^train_mode|^to_train", re.IGNORECASE)
_MAX_INLINE_DEPTH = 3
# a local of a called function, as the walk names it (`evaluate@1:encoder`)
_PREFIXED = re.compile(r"^[\w.]+@\d+:")
_LOOP_ROUNDS = 4
_BUDGET = 40_000  # statements interpreted per function run; beyond it the run is abandoned


class FunctionRun:
    # `model` is the file's modes.ModeModel (not imported here: modes.py imports this module)
    def __init__(self, model, flow: Flow) -> None:
        self.model = model
        self.index = model.index
        self.training = model.training
        self.flow = flow
        self.steps = 0
        # (training loop node, depth of the frame it runs in)
        self.loop_stack: list[tuple[cst.CSTNode, int]] = []
        self.flag_off = 0  # open `with set_grad_enabled(<parameter bound to False>)` blocks of a helper
        # models forwarded with grad on inside a training loop: the ones it trains
        self.grad_forwarded: set[str] = set()

    # statements
    def block(self, statements, state: State | None, frame: Frame) -> Outcome:
        outcome = Outcome()
        current = state
        for statement in statements:
            if current is None:
                break
            result = self.statement(statement, current, frame)
            outcome.absorb(result)
            current = result.fall
        outcome.fall = current
        return outcome

    def statement(self, node: cst.CSTNode, state: State, frame: Frame) -> Outcome:
        self.steps += 1
        if self.steps > _BUDGET:
            raise Abandon()
        if isinstance(node, cst.SimpleStatementLine):
            return self.block(node.body, state, frame)
        if isinstance(node, (cst.Return, cst.Raise)):
            value = node.value if isinstance(node, cst.Return) else node.exc
            after = self.expression(value, state, frame) if value is not None else state
            return Outcome(ret=after) if isinstance(node, cst.Return) else Outcome()
        if isinstance(node, cst.Assert) and is_false(node.test):
            return Outcome()  # `assert False`: the branch never falls through (a raise)
        if isinstance(node, cst.Expr) and isinstance(node.value, cst.Name) and \
                self.model.never_bound(node.value.value):
            return Outcome()  # a bare `stop` bound nowhere: NameError, the branch never falls through
        if isinstance(node, cst.Break):
            return Outcome(brk=state)
        if isinstance(node, cst.Continue):
            return Outcome(cont=state)
        if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            return Outcome(fall=self.assignment(node, state, frame))
        if isinstance(node, cst.If):
            return self.if_(node, state, frame)
        if isinstance(node, (cst.For, cst.While)):
            return self.loop(node, state, frame)
        if isinstance(node, cst.With):
            return self.with_(node, state, frame)
        if isinstance(node, (cst.Try, cst.TryStar)):
            return self.try_(node, state, frame)
        if isinstance(node, cst.Match):
            after = self.expression(node.subject, state, frame)
            outcome = Outcome()
            falls = []
            for case in node.cases:
                result = self.block(body_statements(case), after, frame)
                outcome.absorb(result)
                falls.append(result.fall)
            outcome.fall = join_all(falls + [after])
            return outcome
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return Outcome(fall=state)
        return Outcome(fall=self.expression(node, state, frame))

    def assignment(self, node, state: State, frame: Frame) -> State:
        value = node.value
        state = self.expression(value, state, frame) if value is not None else state
        if isinstance(node, cst.AugAssign) or value is None:
            return state
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if not isinstance(target, (cst.Name, cst.Attribute)):
                continue
            key = self.model._key(target, frame)
            if key is None:
                continue
            source = self.model._key(value, frame)
            if source != key:  # `model = model.to(dev)` keeps it; another object is not known frozen
                frozen_by = state.frozen_by(source) if source is not None else None
                state = state.unfreeze(key)
                if frozen_by is not None:
                    state = state.freeze(key, frozen_by)
                frozen_by = self._frozen_by_construction(value, frame.scope)
                if frozen_by is not None:  # a class whose `__init__` freezes every parameter it has
                    state = state.freeze(key, frozen_by)
            if isinstance(value, cst.Name) and isinstance(target, cst.Name) and value.value != target.value \
                    and state.frozen_by(key) is None:
                frozen_by = self._frozen_global(value, frame)
                if frozen_by is not None:  # `model = FID_MODEL`, a global only ever bound to such a class
                    state = state.freeze(key, frozen_by)
            if isinstance(value, cst.Call) and self.model.is_module_constructor(value, frame.scope):
                state = state.set(key, frozenset({self._fact(NEW, node, frame)}))
                continue
            if source is not None and source != key:
                if source in state.modes:
                    state = state.set(key, state.facts(source))
            elif source is None and key in state.modes:
                state = state.set(key, UNKNOWN_FACTS)
        return state

    def if_(self, node: cst.If, state: State, frame: Frame) -> Outcome:
        state = self.expression(node.test, state, frame)
        chosen = flag_value(node.test, frame)
        if chosen is None:
            chosen = self._training_flag(node.test, state, frame)
        if chosen is False:  # `if train:` in `_run_batch(x, train=False)`: only the other branch runs
            return self._else(node, state, frame)
        then = self.block(body_statements(node.body), state, frame)
        if chosen is True:
            return then
        last = self._last_iteration(node, frame)
        if last is not None:
            then = self._leave_after(then, last, node, frame)
        other = self._else(node, state, frame)
        outcome = Outcome()
        outcome.absorb(then)
        outcome.absorb(other)
        outcome.fall = self._join_branches(node, state, then.fall, other.fall)
        present = self._presence_test(node.test, frame)
        if present is not None and outcome.fall is not None:
            # `if discriminator: discriminator.train()`: on the other branch there is no module (None),
            # so whatever mode it was left in there concerns no model: it is in the mode of the branch
            # where it exists
            key, in_body = present
            branch = then.fall if in_body else other.fall
            if branch is not None and key in branch.modes:
                outcome.fall = outcome.fall.set(key, branch.facts(key))
        return outcome

    def _last_iteration(self, node: cst.If, frame: Frame) -> cst.For | None:
        """The loop whose last iteration alone takes this `if`: a statement of the body of
        `for i, x in enumerate(seq)` testing `i == len(seq) - 1` (or `i + 1 == len(seq)`), `seq`
        seen through a progress bar (`tqdm(loader)`, or a name bound to one) that yields its items."""
        block = self.index.parent(node)
        loop = self.index.parent(block) if isinstance(block, cst.IndentedBlock) else None
        if not isinstance(loop, cst.For) or loop.body is not block:
            return None
        target, iterated = loop.target, loop.iter
        if not (isinstance(target, cst.Tuple) and target.elements and isinstance(target.elements[0].value, cst.Name)
                and isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Name)
                and iterated.func.value == "enumerate" and len(iterated.args) == 1
                and iterated.args[0].keyword is None and not iterated.args[0].star):
            return None
        counter = target.elements[0].value.value
        test = node.test
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and
                isinstance(test.comparisons[0].operator, cst.Equal)):
            return None
        sides = (test.left, test.comparisons[0].comparator)
        code = self.model.ctx.code_for
        sequence = code(_iterated(iterated.args[0].value, frame.scope))
        for mine, other in (sides, sides[::-1]):
            if isinstance(mine, cst.Name) and mine.value == counter:
                length = _minus_one(other)
            elif _plus_one(mine, counter):
                length = other
            else:
                continue
            if isinstance(length, cst.Call) and isinstance(length.func, cst.Name) and length.func.value == "len" \
                    and len(length.args) == 1 and code(_iterated(length.args[0].value, frame.scope)) == sequence:
                return loop
        return None

    def _leave_after(self, then: Outcome, loop: cst.For, node: cst.If, frame: Frame) -> Outcome:
        """The branch of the last iteration: the rest of the loop's body runs after it, and then the
        loop is over (what it leaves reaches the code after the loop, not another iteration)."""
        statements = body_statements(loop.body)
        rest = statements[statements.index(node) + 1:]
        tail = self.block(rest, then.fall, frame) if then.fall is not None else Outcome()
        leaving = join_all([tail.fall, tail.cont, tail.brk, then.brk, then.cont])
        return Outcome(fall=None, ret=join(then.ret, tail.ret), brk=leaving)

    def _presence_test(self, test: cst.BaseExpression, frame: Frame) -> tuple[str, bool] | None:
        """The model a test checks for presence (`if model:`, `if model is not None:`, `if not model:`,
        `if model is None:`), and whether the `if` body is the branch where it exists."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self._presence_test(test.expression, frame)
            return (inner[0], not inner[1]) if inner is not None else None
        present = True
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            if not (isinstance(target.comparator, cst.Name) and target.comparator.value == "None"):
                return None
            if isinstance(target.operator, (cst.IsNot, cst.NotEqual)):
                present = True
            elif isinstance(target.operator, (cst.Is, cst.Equal)):
                present = False
            else:
                return None
            test = test.left
        if not isinstance(test, (cst.Name, cst.Attribute)):
            return None
        key = self.model._key(test, frame)
        return (key, present) if key is not None else None

    def _training_flag(self, test: cst.BaseExpression, state: State, frame: Frame) -> bool | None:
        """What a test of a module's own mode flag (`if model.training:`, `if not model.training:`)
        evaluates to where every way the module may have been left agrees: False after `eval()` on
        every path, True after `train()` (or a fresh construction) on every path; None otherwise.
        A backward under `if model.training:` never runs in an evaluation that put the model in
        eval mode, whatever the function it sits in is called with."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self._training_flag(test.expression, state, frame)
            return None if inner is None else not inner
        if not (isinstance(test, cst.Attribute) and test.attr.value == "training"):
            return None
        key = self.model._key(test.value, frame)
        if key is None or key not in state.modes:
            return None
        kinds = {fact.kind for fact in state.facts(key)}
        if kinds == {EVAL}:
            return False
        if kinds and kinds <= {TRAIN, NEW}:
            return True
        return None

    def _else(self, node: cst.If, state: State, frame: Frame) -> Outcome:
        if isinstance(node.orelse, cst.If):
            return self.if_(node.orelse, state, frame)
        if isinstance(node.orelse, cst.Else):
            return self.block(body_statements(node.orelse.body), state, frame)
        return Outcome(fall=state)

    def _join_branches(self, node: cst.If, before: State, a: State | None, b: State | None) -> State | None:
        """Join two branches; a model put in train mode on one and eval mode on the other is in the
        mode the condition chose (the train/val phase idiom), neither fact on its own."""
        joined = join(a, b)
        if a is None or b is None or joined is None:
            return joined
        mode_test = _MODE_TEST.search(self.model.ctx.code_for(node.test)) is not None
        for key in a.modes.keys() | b.modes.keys():
            fa, fb = a.facts(key), b.facts(key)
            if fa == fb:
                continue
            kinds = {frozenset(f.kind for f in fa), frozenset(f.kind for f in fb)}
            if fa != before.facts(key) and fb != before.facts(key) and \
                    kinds == {frozenset({TRAIN}), frozenset({EVAL})}:
                joined = joined.set(key, frozenset({Fact(CHOSEN, node)}))
            elif mode_test and frozenset({TRAIN}) in kinds and (fa == before.facts(key) or fb == before.facts(key)):
                # `if was_training: model.train()` puts back the mode the model had
                joined = joined.set(key, frozenset({Fact(RESTORE, node)}))
        return joined

    def loop(self, node, state: State, frame: Frame) -> Outcome:
        if isinstance(node, cst.For):
            state = self.expression(node.iter, state, frame)
        training = node in self.model.training_loops
        if training:
            self.loop_stack.append((node, frame.depth))
        try:
            head = state
            outcome = Outcome()
            body = body_statements(node.body)
            for _ in range(_LOOP_ROUNDS):
                if isinstance(node, cst.While):
                    head = self.expression(node.test, head, frame)
                result = self.block(body, head, frame)
                outcome.ret = join(outcome.ret, result.ret)
                outcome.brk = join(outcome.brk, result.brk)
                again = _left_over(join(result.fall, result.cont), state, node)
                new_head = join(head, again)
                if new_head == head:
                    break
                head = new_head
        finally:
            if training:
                self.loop_stack.pop()
        after = self._members_switched_by(node, head, frame) if isinstance(node, cst.For) else head
        if isinstance(node, cst.For) and after is not None:
            after = self._parameters_frozen_by(node, after, frame)
        if node.orelse is not None:
            after = self.block(body_statements(node.orelse.body), after, frame).fall
        return Outcome(fall=join(after, outcome.brk), ret=outcome.ret)

    def with_(self, node: cst.With, state: State, frame: Frame) -> Outcome:
        grad_before = state.grad
        exits: list[tuple[list, Frame]] = []
        opened_flag = 0
        for item in node.items:
            call = item.item
            flagged = self._flag_grad(call, frame)
            grad = flagged or context_grad(self.index, call, frame.scope)
            opened_flag += flagged == OFF
            if grad is not None:
                if isinstance(call, cst.Call):
                    for arg in call.args:
                        state = self.expression(arg.value, state, frame)
                state = state.with_grad(frozenset({grad}))
                continue
            manager = self._context_manager(call, frame)
            if manager is not None:
                target, inner = manager
                before, after = _split_at_yield(target.node)
                state = self.block(before, state, inner).fall or state
                exits.append((after, inner))
                continue
            state = self.expression(call, state, frame)
        self.flag_off += opened_flag
        try:
            result = self.block(body_statements(node.body), state, frame)
        finally:
            self.flag_off -= opened_flag
        fall = result.fall
        for after, inner in reversed(exits):
            if fall is not None:
                fall = self.block(after, fall, inner).fall or fall
            if result.ret is not None:
                result.ret = self.block(after, result.ret, inner).fall or result.ret
        restore = lambda s: s.with_grad(grad_before) if s is not None else None  # noqa: E731
        return Outcome(fall=restore(fall), ret=restore(result.ret), brk=restore(result.brk),
                       cont=restore(result.cont))

    def _flag_grad(self, expr: cst.BaseExpression, frame: Frame) -> str | None:
        """`with torch.set_grad_enabled(train):` where this call binds `train` to a literal."""
        if not frame.flags or not isinstance(expr, cst.Call) or len(expr.args) != 1 or \
                self.index.resolve(expr.func, frame.scope) not in GRAD_SETTERS:
            return None
        flag = bool_flag_value(expr.args[0].value, frame)
        return None if flag is None else ON if flag else OFF

    def _context_manager(self, expr, frame: Frame):
        if not isinstance(expr, cst.Call) or frame.depth >= _MAX_INLINE_DEPTH:
            return None
        target = self.index.callee(expr, frame.scope)
        if target is None or target.node in frame.active:
            return None
        if not any(self.index.resolve(_decorator_callee(d.decorator), target.scope.parent or target.scope)
                   in CONTEXTMANAGER for d in target.node.decorators):
            return None
        return target, self._callee_frame(expr, target, frame)

    def try_(self, node, state: State, frame: Frame) -> Outcome:
        body = self.block(body_statements(node.body), state, frame)
        outcome = Outcome()
        outcome.absorb(body)
        falls = []
        handler_entry = join(state, body.fall)
        for handler in node.handlers:
            result = self.block(body_statements(handler.body), handler_entry, frame)
            outcome.absorb(result)
            falls.append(result.fall)
        main = body.fall
        if node.orelse is not None and main is not None:
            result = self.block(body_statements(node.orelse.body), main, frame)
            outcome.absorb(result)
            main = result.fall
        fall = join_all([main] + falls)
        if node.finalbody is not None:
            final = body_statements(node.finalbody.body)
            fall = self.block(final, fall, frame).fall if fall is not None else None
            for name in ("ret", "brk", "cont"):
                value = getattr(outcome, name)
                if value is not None:
                    setattr(outcome, name, self.block(final, value, frame).fall or value)
        outcome.fall = fall
        return outcome

    # expressions and calls
    def expression(self, node: cst.CSTNode, state: State, frame: Frame) -> State:
        for call in _calls_post_order(node):
            state = self.call(call, state, frame)
        return state

    def call(self, call: cst.Call, state: State, frame: Frame) -> State:
        if frame.depth == 0:
            self.flow.at_call[call] = join(self.flow.at_call.get(call), state)
        model = self.model
        scope = frame.scope
        func = call.func
        name = self.index.resolve(func, scope)
        if name in GRAD_SETTERS:
            args = positional_args(call) or [a for a in call.args if a.keyword is not None]
            value = args[0].value if args else None
            flag = bool_flag_value(value, frame) if value is not None else None
            if flag is not None:
                return state.with_grad(frozenset({ON if flag else OFF}))
            grad = OFF if value is not None and is_false(value) else ON if value is not None and is_true(value) else COND
            return state.with_grad(frozenset({grad}))
        target = self.index.callee(call, scope) or self._mode_method(call, scope)
        if isinstance(func, cst.Attribute) and func.attr.value in ("eval", "train") and (
                self.training.roles.plain_instance(func.value, scope) is None if target is None
                else _overrides_module_mode(target)):
            # (an instance of a project class with no torch module among its ancestors, built in
            # another file's class: its `eval()` is that class's own method, no mode switch)
            kind = self._mode_kind(call, scope)
            members = switched_members(call, self.index) if kind is not None else []
            if members:  # `[model[k].eval() for k in model]`, `for net in (G, D): net.train()`
                return self._set_members(members, kind, call, state, frame)
            key = model._key(func.value, frame) if kind is not None else None
            if key is not None:
                facts = frozenset({self._fact(kind, call, frame)})
                if self._proven_module(func.value, frame):
                    # `nn.Module.train()` recurses into the children: every model held by it
                    # (`self.model` of a module whose method calls `self.train()`) is switched too
                    return state.set_under(key, facts, itself=True)
                # not proven a torch module: its `eval()` may recurse into the models it holds
                # (`nn.Module.eval()` does) or not (a class's own method): what was known of them is
                # no longer known (`self.model.decoder.train()`, then `self.model.eval()`)
                return state.set_under(key, UNKNOWN_FACTS, itself=False).set(key, facts)
        if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_" and target is None:
            key = model._key(func.value, frame)
            if key is not None:
                flag = _requires_grad_flag(call)
                state = state.freeze(key, call) if flag is False else state.unfreeze(key)
        if self.loop_stack and self.training.is_backward(call, scope):
            self._check_backward(call, state, frame)
        state = self._record_forward(call, state, frame)
        followed = target is not None and frame.depth < _MAX_INLINE_DEPTH and target.node not in frame.active
        if not followed and self.loop_stack and state.grad != frozenset({OFF}):
            self._hand_over(call, frame)
        if not followed:
            state = self._used_unseen(call, state, frame)
        if not followed and state.frozen:
            state = self._may_unfreeze(call, state, frame)
        if followed:
            after = self._inline(call, target, state, frame)
            if target.class_name is not None and self.index.callee(call, scope) is None:
                after = self._own_train_mode(call, target, after, frame)
            return after
        if target is None and call.args:
            summary = self.index.summary_of(func, scope, (*MODE_WORDS, "set_grad_enabled"))
            if summary is not None and hasattr(summary, "mode_effect"):
                return self._project_mode_effects(call, summary, state, frame)
            state = self._external_train_helper(call, name, state, frame)
        return state

    def _may_unfreeze(self, call: cst.Call, state: State, frame: Frame) -> State:
        """A frozen model handed to code the run does not follow may come back with trainable
        parameters (`inject_trainable_lora(unet)`, `unfreeze(model)`): it stays frozen only when
        that code is a project function whose summary says it only runs or inspects that
        argument (`FunctionSummary.run_only`), or an inspecting builtin (`print(model)`)."""
        if self.model._key(call, frame) is not None:
            return state  # `model.to(dev)`, `unwrap_model(model)`: the model itself
        func = call.func
        if isinstance(func, cst.Name) and func.value in _INSPECTING:
            return state
        if isinstance(func, cst.Attribute) and func.attr.value not in _KEEPS_FLAGS:
            key = self.model._key(func.value, frame)
            if key is not None and state.frozen_by(key) is not None:
                state = state.unfreeze(key)  # `unet.add_adapter(...)`: a method of its own
        summary = None
        positional = positional_args(call)
        for arg in call.args:
            value = arg.value
            if isinstance(value, cst.Attribute) and value.attr.value in _MODULE_FACTS:
                continue  # `x.to(unet.device)`: a fact about the model, not the model
            key = self.model._key(value, frame)
            if key is None or arg.star or (state.frozen_by(key) is None and not any(
                    k.startswith(key + ".") for k in state.frozen)):
                continue
            if summary is None:
                summary = self.index.summary_of(func, frame.scope) or False
            run_only = getattr(summary, "run_only", ()) if summary else ()
            params = getattr(summary, "params", ()) if summary else ()
            position = next((i for i, a in enumerate(positional) if a is arg), None)
            name = arg.keyword.value if arg.keyword is not None else \
                params[position] if position is not None and position < len(params) else None
            if name is None or name not in run_only:
                state = state.unfreeze(key)
        return state

    def _hand_over(self, call: cst.Call, frame: Frame) -> None:
        """Models a training loop hands, with grad on, to a call the run does not follow (a helper
        of another file, a library function, a method of the model): that code may forward them."""
        if self.model._key(call, frame) is not None:
            return  # `unwrap_model(model)`, `model.to(dev)`: hands back the model itself
        func = call.func
        receiver = func.value if isinstance(func, cst.Attribute) else None
        keys = {self.model._key(arg.value, frame) for arg in call.args}
        if receiver is not None and func.attr.value not in _NOT_FORWARDING:
            keys.add(self.model._key(receiver, frame))
        keys.discard(None)
        for loop, _ in self.loop_stack:
            self.flow.handed.setdefault(loop, set()).update(keys)
            calls = self.flow.handed_calls.setdefault(loop, {})
            for key in keys:
                calls.setdefault(key, []).append(call)

    def _set_members(self, members, kind: str, call: cst.Call, state: State, frame: Frame) -> State:
        """A mode call that a loop runs on every member of a container (or on each model of a
        literal list): each member is left in that mode."""
        facts = frozenset({self._fact(kind, call, frame)})
        for expr, reached in members:
            key = self.model._key(expr, frame)
            if key is not None:
                state = state.set(key, facts) if reached == SELF else \
                    state.set_under(key, facts, itself=reached == MEMBERS_AND_SELF)
        return state

    def _members_switched_by(self, loop: cst.For, state: State | None, frame: Frame) -> State | None:
        """After `for m in nets.values(): m.eval()`: every member is in eval mode, though the loop
        may also have run no iteration (then the container has no member to leave in another mode).
        Only when each mode call of the body is such a call, run on every iteration."""
        if state is None:
            return state
        switches = []
        for node in self.index.calls_under(loop.body):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("eval", "train"):
                kind = self._mode_kind(node)
                members = switched_members(node, self.index) if kind is not None else []
                if not members:
                    return state
                switches.append((members, kind, node))
        for members, kind, node in switches:
            state = self._set_members(members, kind, node, state, frame)
        return state

    def _frozen_by_construction(self, value: cst.BaseExpression, scope: Scope) -> cst.CSTNode | None:
        """`InceptionV3([idx])` (also `.to(device)`, `.eval()` after it) of a project class whose
        `__init__` leaves every parameter frozen for these arguments (`requires_grad=False` by
        default, `for p in self.parameters(): p.requires_grad = requires_grad`): what froze them."""
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and \
                value.func.attr.value in ("to", "cuda", "cpu", "eval", "train", "float", "half", "double", "bfloat16") \
                and isinstance(value.func.value, cst.Call):
            value = value.func.value
        if not isinstance(value, cst.Call) or not isinstance(value.func, (cst.Name, cst.Attribute)):
            return None
        summary = self.index.summary_of(value.func, scope, ("requires_grad",))
        if not isinstance(summary, ClassSummary):
            return None
        return summary.frozen_by_construction(value)

    def _frozen_global(self, name: cst.Name, frame: Frame) -> cst.CSTNode | None:
        """`model = FID_MODEL`, a global (declared `global` here, or bound only at module level) each
        binding of which holds a construction of a class whose `__init__` freezes every parameter,
        directly or through other names (`FID_MODEL = model` after `model = InceptionV3(...)`), in a
        file that sets `requires_grad` nowhere: what froze it."""
        if not self._no_requires_grad_outside_init():
            return None
        declared = frame.function is not None and any(
            type(n) is cst.Global and any(item.name.value == name.value for item in n.names)
            for n in self.index.scope_nodes(frame.function.node))
        module_level = not declared and frame.scope.lookup(name.value) == \
            self.index.module_scope.bindings.get(name.value, [])
        if not (declared or module_level):
            return None
        found = self._frozen_value(name, frame.scope, set())
        return found if isinstance(found, cst.CSTNode) else None

    def _no_requires_grad_outside_init(self) -> bool:
        """No code of the file but a class's `__init__` sets or reads `requires_grad`: nothing
        unfreezes a model after its construction."""
        return not file_facts.values(self.model.ctx, "modes.requires_grad_outside_init")

    def _frozen_value(self, expr: cst.BaseExpression, scope: Scope, visited: set) -> cst.CSTNode | None:
        expr = strip_wrappers(expr)
        if isinstance(expr, cst.Call):
            return self._frozen_by_construction(expr, scope)
        if not isinstance(expr, cst.Name) or len(visited) > 8:
            return None
        bindings = scope.lookup(expr.value)
        if isinstance(scope.node, cst.FunctionDef) and any(
                type(n) is cst.Global and any(item.name.value == expr.value for item in n.names)
                for n in self.index.scope_nodes(scope.node)):
            bindings = [*bindings, *self.index.module_scope.bindings.get(expr.value, [])]
        if not bindings or any(b.kind != "assign" or b.value is None for b in bindings):
            return None
        found = _CYCLE  # only bindings already followed: they add no other value
        for binding in bindings:
            if id(binding.node) in visited or (isinstance(binding.value, cst.Name) and binding.value.value == "None"):
                continue  # `model = FID_MODEL` seen from `FID_MODEL = model`: nothing new; `SHARED = None`
            visited.add(id(binding.node))
            more = self._frozen_value(binding.value, self.index.scope_at(binding.node), visited)
            if more is None:
                return None
            if more is not _CYCLE:
                found = more
        return found

    def _parameters_frozen_by(self, loop: cst.For, state: State, frame: Frame) -> State:
        """After `for p in model.parameters(): p.requires_grad = False` (or `p.requires_grad_(False)`,
        `for name, p in model.named_parameters()`): every parameter of `model` is frozen, when the
        body sets each one it iterates, as a statement of its own that nothing skips (no `if`
        around it, no `continue`/`break`); any other setting of `requires_grad` in the loop may
        unfreeze some of them."""
        iterated = loop.iter
        if not (isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Attribute) and
                iterated.func.attr.value in ("parameters", "named_parameters")):
            return state
        key = self.model._key(iterated.func.value, frame)
        if key is None:
            return state
        target = loop.target
        if iterated.func.attr.value == "named_parameters":
            if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
                return state
            target = target.elements[1].value
        if not isinstance(target, cst.Name):
            return state
        flags = [_requires_grad_setting(n, target.value) for n in walk(loop.body)]
        if not any(flag is not None for flag in flags):
            return state
        skippable = any(isinstance(n, (cst.Continue, cst.Break, cst.Return, cst.Raise)) for n in walk(loop.body))
        whole = any(_requires_grad_setting(statement, target.value) is False
                    for line in body_statements(loop.body) if isinstance(line, cst.SimpleStatementLine)
                    for statement in line.body)
        if whole and not skippable and all(flag in (None, False) for flag in flags):
            return state.freeze(key, loop)
        return state.unfreeze(key)

    def _mode_method(self, call: cst.Call, scope: Scope) -> FunctionInfo | None:
        """`model.train_custom()` on an instance of a class of this file (every binding of the name
        builds it) whose method switches modes (`self.train(); self.encoder.eval()`): followed like a
        helper, its `self` standing for the receiver."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)) or \
                func.attr.value in ("eval", "train", "forward", "__call__"):
            return None
        if not any(f.class_name is not None for f in self.index.functions_named(func.attr.value)):
            return None  # no class of this file defines it: `optimizer.step()`, `loss.backward()`
        # what builds the receiver: its assignments, or what same-file callers pass for a parameter
        # (`Discriminator(...).to(device)` in `main`, `discriminator` in `train_epoch`)
        constructions = self.model._constructions(func.value, scope)
        classes = {dotted_name(strip_wrappers(c).func) if isinstance(strip_wrappers(c), cst.Call) else None
                   for c, _ in constructions or ()}
        if len(classes) != 1 or None in classes or next(iter(classes)) not in self.index.classes:
            return None
        method = self.index.method(next(iter(classes)), func.attr.value)
        if method is None or not any(isinstance(n, cst.Attribute) and n.attr.value in ("eval", "train")
                                     for n in walk(method.node.body)):
            return None
        return method

    def _own_train_mode(self, call: cst.Call, method: FunctionInfo, state: State, frame: Frame) -> State:
        """After `model.train_custom()`, a method of the model's class that puts the model or some of
        its parts in train mode (`self.classifier_head.train()` beside a frozen `self.encoder`): it is
        the class's own way into training, so the model itself counts as restored; the parts the
        method leaves in eval mode keep their own facts."""
        key = self.model._key(call.func.value, frame)
        if key is None or not any(f.kind == EVAL for f in state.facts(key)):
            return state
        inside = set(walk(method.node))
        switched = [f for k, facts in state.modes.items() if k == key or k.startswith(key + ".")
                    for f in facts if f.node in inside]
        if not switched or not any(f.kind == TRAIN for f in switched) or \
                any(f.kind == EVAL for f in state.facts(key) if f.node in inside):
            return state
        return state.set(key, frozenset({self._fact(RESTORE, call, frame)}))

    def _project_mode_effects(self, call: cst.Call, summary, state: State, frame: Frame) -> State:
        """A function of another project file that calls `.eval()`/`.train()` on a parameter: the
        argument is left the way the function leaves it (`evaluate(model, loader)` that never
        calls `model.train()` again leaves `model` in eval mode, set at this call); one that runs
        `torch.set_grad_enabled(flag)` as a statement leaves recording the way it sets it."""
        positional = positional_args(call)
        flags = _summary_flags(call, summary)
        exit_grad = summary.grad_exit(flags) if hasattr(summary, "grad_exit") else None
        if exit_grad is not None:
            # its `torch.set_grad_enabled(flag)` statement switches recording for the code after it
            state = state.with_grad(frozenset({exit_grad}))
        for position, param in enumerate(summary.params):
            effect = summary.mode_effect(param, flags)
            if effect is None:
                continue
            arg = keyword_arg(call, param)
            value = arg.value if arg is not None else positional[position].value if position < len(positional) else None
            key = self.model._key(value, frame) if value is not None else None
            if key is None:
                continue
            first, last = effect
            kind = RESTORE if last == "restore" or (first == EVAL and last == TRAIN) else \
                EVAL if last == "eval" else TRAIN
            if kind == RESTORE and not any(f.kind == EVAL for f in state.facts(key)):
                continue  # put back the way it was: nothing changes for the caller
            fact = self._fact(kind, call, frame)
            if kind == EVAL:
                fact = fact._replace(evaluated=call)  # what that function runs in it is not seen here
            state = state.set(key, frozenset({fact}))
        return state

    def _external_train_helper(self, call: cst.Call, name: str | None, state: State, frame: Frame) -> State:
        """`set_train_mode(model)` / `utils.train_mode(model)` from another module: the model it
        receives is taken as restored (its body cannot be seen)."""
        func = call.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if not _TRAIN_HELPER.search(last) or (name or "").startswith("torch."):
            return state
        for arg in call.args:
            key = self.model._key(arg.value, frame)
            if key is not None and any(f.kind == EVAL for f in state.facts(key)):
                state = state.set(key, frozenset({self._fact(RESTORE, call, frame)}))
        return state

    def _mode_kind(self, call: cst.Call, scope: Scope | None = None) -> str | None:
        func = call.func
        if func.attr.value == "eval":
            return EVAL if not call.args else None
        args = call.args
        if len(args) > 1:
            return None
        if not args:
            receiver = func.value
            # `trainer.train()` starts a training run; only models take a mode. A receiver that every
            # binding builds with a module class (`agent = Agent(envs).to(device)`, `class Agent(nn.Module)`)
            # is a model whatever its name; only one not known to be a module is judged by its name
            if isinstance(receiver, cst.Name) and receiver.value not in ("self",) and \
                    re.search(r"trainer|agent|learner|runner|engine|pipeline|experiment", receiver.value, re.I) and \
                    not self._built_as_module(receiver, scope) and not self._switched_to_eval(receiver.value):
                return None
            return TRAIN
        value = args[0].value
        if is_false(value):
            return EVAL
        if is_true(value):
            return TRAIN
        return RESTORE

    def _switched_to_eval(self, name: str) -> bool:
        """The file calls `<name>.eval()`: what it names takes a mode (a trainer or a runner has
        no `eval()`), so its `train()` is a mode switch too."""
        found = getattr(self.model, "_eval_receivers", None)
        if found is None:
            found = self.model._eval_receivers = frozenset(
                site.node.func.value.value for site in self.index.calls
                if isinstance(site.node.func, cst.Attribute) and site.node.func.attr.value == "eval"
                and not site.node.args and isinstance(site.node.func.value, cst.Name))
        return name in found

    def _built_as_module(self, receiver: cst.Name, scope: Scope | None) -> bool:
        """Every construction of `receiver` that reaches here is known and builds an `nn.Module`."""
        if scope is None:
            return False
        constructions = self.model._constructions(receiver, scope)
        return bool(constructions) and all(
            isinstance(c, cst.Call) and self.model.is_module_constructor(c, c_scope) for c, c_scope in constructions)

    def _fact(self, kind: str, node: cst.CSTNode, frame: Frame) -> Fact:
        site = frame.chain[0] if frame.chain else node
        anchor = node
        if self.loop_stack:
            loop_depth = self.loop_stack[-1][1]
            if loop_depth < frame.depth:
                anchor = frame.chain[loop_depth]
        via = function_name(frame.function)
        return Fact(kind, node, site, anchor, bool(self.loop_stack), via,
                    frozenset(loop for loop, _ in self.loop_stack))

    def _check_backward(self, call: cst.Call, state: State, frame: Frame) -> None:
        self.flow.backwards.add(call)
        loop = self.loop_stack[-1][0]
        for key, facts in state.modes.items():
            if state.frozen_by(key) is not None:
                continue  # every parameter frozen at this backward: the loop does not train it
            # (a loop that forwards it only under no_grad: filtered once the run is complete,
            # ModeModel.unrestored)
            found = [fact for fact in facts if fact.kind == EVAL and fact.in_training and fact.anchor is not None
                     # an eval set before this training loop started, and nothing used the model in
                     # that mode since but the loop's own training forwards: the mode the training
                     # step chose to train in (a linear probe over frozen BatchNorm), not one an
                     # evaluation left behind
                     and (fact.evaluated is not None or loop in fact.loops)
                     # a caller's fact, brought in by a call whose literal arguments skip the branch
                     # holding this backward (`step(model, val_loader, if_train=False)` then
                     # `if if_train: loss.backward()`): that call never runs it
                     and not (fact.entry_flags and self.flow.function is not None and skipped_branch(
                         self.index, frame.chain[0] if frame.chain else call, self.flow.function.node,
                         dict(fact.entry_flags)))]
            if not found or not self._trains(key) or self._out_of_reach(key, loop, frame):
                continue
            place = self.index.place.get
            # facts are a set: the order they are recorded in (the first one per anchor is kept) is
            # the order of their places in the file, not of their hashes
            found.sort(key=lambda f: (place(f.node, -1), place(f.anchor, -1), f.evaluated is not None,
                                      place(f.evaluated, -1) if f.evaluated is not None else -1))
            # a part of it switched back to train mode after the eval (`model.head.train()`): in train
            # mode on every way here (the eval switched or forgot every part it held, so a part in
            # train mode was switched after it), or switched later in the block of the eval, nothing
            # leaving the block between them; and in eval mode or unknown on no way here
            parts = [f for k, f in state.modes.items() if k.startswith(key + ".") and f
                     and not any(x.kind in (EVAL, UNKNOWN) for x in f) and any(x.kind == TRAIN for x in f)]
            for fact in found:
                restored = None
                for f in parts:
                    trains = sorted((x.node for x in f if x.kind == TRAIN and x.node is not None),
                                    key=lambda n: place(n, -1))
                    if trains and (all(x.kind == TRAIN for x in f) or any(
                            self._follows_in_block(fact.node, n) for n in trains)):
                        restored = trains[-1]
                        break
                self.flow.unrestored.append(Unrestored(fact.anchor, key, fact, call, loop,
                                                       self.flow.trained_through(loop, key), restored))

    def _follows_in_block(self, first: cst.CSTNode | None, second: cst.CSTNode) -> bool:
        """The statement holding `second` comes after the one holding `first` in one block, and no
        statement between them can leave it (`return`, `raise`, `break`, `continue`)."""
        if first is None:
            return False
        a, b = self.index.enclosing_statement(first), self.index.enclosing_statement(second)
        a = self.index.parent(a) if isinstance(a, cst.BaseSmallStatement) else a  # its line
        b = self.index.parent(b) if isinstance(b, cst.BaseSmallStatement) else b
        block = self.index.parent(a)
        if block is None or self.index.parent(b) is not block or not hasattr(block, "body"):
            return False
        body = list(block.body)
        if a not in body or b not in body or body.index(b) <= body.index(a):
            return False
        return not any(type(n) in (cst.Return, cst.Raise, cst.Break, cst.Continue)
                       for s in body[body.index(a):body.index(b)] for n in walk(s))

    def _out_of_reach(self, key: str, loop: cst.CSTNode, frame: Frame) -> bool:
        """The backward runs in a called function that cannot name the model `key` (no argument of
        the call stands for it, a part of it or a model holding it; it is not a global, nor a local of
        a function enclosing the callee), and the training loop there forwards a model of its own with
        grad on: the backward trains that model (a probe the evaluation fits), not `key`."""
        if frame.depth == 0:
            return False
        for value in frame.subst.values():
            if value == key or key.startswith(value + ".") or value.startswith(key + "."):
                return False
        if frame.prefix and key.startswith(frame.prefix):
            return False
        if _PREFIXED.match(key) is None:  # a name of the analysed function, or a global
            analysed = self.flow.function.scope if self.flow.function is not None else self.index.module_scope
            head = key.split(".")[0]
            if analysed is self.index.module_scope or head not in analysed.bindings:
                return False  # a global: any function may name it
            scope = frame.scope
            while scope is not None:
                if scope is analysed:
                    return False  # a closure over the analysed function's locals
                scope = scope.parent
        own = self.flow.grad_on.get(loop, {})
        return any(other != key and self._reachable_here(other, frame) for other in own)

    @staticmethod
    def _reachable_here(key: str, frame: Frame) -> bool:
        """`key` is a model the frame's function names: its own local, or a parameter's argument."""
        return bool(frame.prefix and key.startswith(frame.prefix)) or any(
            value == key or key.startswith(value + ".") for value in frame.subst.values())

    def _proven_module(self, receiver: cst.BaseExpression, frame: Frame) -> bool:
        """The receiver of a mode call is a `torch.nn.Module`: `self` in a method of a class of this
        file deriving from one, or a name every construction of which builds one."""
        if isinstance(receiver, cst.Name) and receiver.value == "self" and "self" not in frame.subst:
            owner = frame.scope.class_name
            return owner is not None and self.model._is_module_class(owner)
        if isinstance(receiver, cst.Name) and receiver.value == "self":
            return False
        if not isinstance(receiver, cst.Name):
            return False
        constructions = self.model._constructions(receiver, frame.scope)
        return bool(constructions) and all(
            isinstance(c, cst.Call) and self.model.is_module_constructor(c, frame.scope) for c, _ in constructions)

    def _mark_used(self, state: State, key: str, node: cst.CSTNode, grad_on: bool) -> State:
        """The model `key` (or a part of it, or a model holding it) is used at `node`: an eval of
        it that no training loop entered since has run under, or any eval when `grad_on` is
        False, now serves something other than training (an evaluation)."""
        current = self.loop_stack[-1][0] if self.loop_stack else None
        for other, facts in state.modes.items():
            if not (other == key or other.startswith(key + ".") or key.startswith(other + ".")):
                continue
            if not any(f.kind == EVAL and f.in_training and f.evaluated is None for f in facts):
                continue
            marked = frozenset(f._replace(evaluated=node) if f.kind == EVAL and f.in_training and f.evaluated is None
                               and (not grad_on or current is None or current in f.loops) else f for f in facts)
            if marked != facts:
                state = state.set(other, marked)
        return state

    def _used_unseen(self, call: cst.Call, state: State, frame: Frame) -> State:
        """A model handed to code the walk does not follow (another file's helper, a library
        function, a method of the model): what that code does with it is not seen, so an eval of
        it counts as used there."""
        if not any(f.kind == EVAL and f.in_training and f.evaluated is None
                   for facts in state.modes.values() for f in facts):
            return state
        if self.model._key(call, frame) is not None:
            return state  # `model.to(dev)`, `unwrap_model(model)`: the model itself
        func = call.func
        if isinstance(func, cst.Name) and func.value in _INSPECTING:
            return state
        keys = {self.model._key(arg.value, frame) for arg in call.args}
        if isinstance(func, cst.Attribute) and func.attr.value not in _NOT_FORWARDING:
            keys.add(self.model._key(func.value, frame))
        keys.discard(None)
        for key in keys:
            state = self._mark_used(state, key, call, grad_on=False)
        return state

    def _trains(self, key: str) -> bool:
        return self.model.is_trained(key) or (
            key in self.grad_forwarded and last_component(key) not in self.model.frozen_names
            and self.model.may_be_optimized(key))

    def _forward_key(self, call: cst.Call, frame: Frame) -> tuple[str | None, str | None]:
        """The model key a call runs forward (`model(x)`, `self.net.forward(x)`, `m.generate(...)`)
        and the method used (None for a plain call)."""
        func = call.func
        method = None
        receiver: cst.BaseExpression = func
        if isinstance(func, cst.Attribute) and func.attr.value in _FORWARD_METHODS:
            method, receiver = func.attr.value, func.value
        elif isinstance(func, cst.Name):
            if any(b.kind in ("def", "class", "import") for b in frame.scope.lookup(func.value)):
                return None, None
        elif not isinstance(func, cst.Attribute):
            return None, None
        return self.model._key(receiver, frame), method

    def _record_forward(self, call: cst.Call, state: State, frame: Frame) -> State:
        key, method = self._forward_key(call, frame)
        if key is None:
            return state
        original = state
        if OFF not in state.grad and self.model.has_volatile and \
                volatile_input(self.index, call, frame.scope) is not None:
            state = state.with_grad(frozenset({OFF}))  # `model(Variable(x, volatile=True))`: records nothing
        marked = self._mark_used(original, key, call, grad_on=state.grad == GRAD_ON)
        if self.loop_stack and state.grad == GRAD_ON:
            self.grad_forwarded.add(key)
        for loop, _ in self.loop_stack:
            if state.grad == frozenset({OFF}):
                self.flow.grad_off.setdefault(loop, set()).add(key)
            else:
                self.flow.grad_on.setdefault(loop, {}).setdefault(key, call)
        if frame.depth != 0:
            if frame.depth == 1 and self.flag_off and state.grad == frozenset({OFF}) and \
                    (facts := state.facts(key)) != ENTRY_FACTS:
                self.flow.forwards.append(Forward(call, key, frame.function, facts, state.grad, method,
                                                  frame.chain[0], tuple(sorted(frame.flags.items()))))
            elif frame.depth == 1 and (facts := state.facts(key)) != ENTRY_FACTS and facts and \
                    all(f.kind == EVAL for f in facts):
                # a helper called right here runs the model in the eval mode this function (or
                # every caller of it) set
                self.flow.helper_forwards.append(Forward(frame.chain[0], key, self.flow.function, facts, state.grad,
                                                         method, helper=frame.function, inner=call,
                                                         frozen=state.frozen_by(key)))
            return marked
        facts = state.facts(key)
        if facts == ENTRY_FACTS:
            return marked
        self.flow.forwards.append(Forward(call, key, frame.function, facts, state.grad, method,
                                          frozen=state.frozen_by(key)))
        return marked

    def _inline(self, call: cst.Call, target: FunctionInfo, state: State, frame: Frame) -> State:
        inner = self._callee_frame(call, target, frame)
        grad = decorator_grad(self.index, target)
        entry = state.with_grad(frozenset({grad})) if grad is not None else state
        result = self.block(body_statements(target.node), entry, inner)
        after = join(result.fall, result.ret)
        if after is None:  # always raises
            return state
        # a grad decorator restores the state it found on return; a `torch.set_grad_enabled(flag)`
        # statement the body runs outside a `with` switches recording for the rest of the thread's
        # run (`self.set_train_mode(False)` whose body turns it off): the caller goes on in it
        return after.without_prefix(inner.prefix).with_grad(state.grad if grad is not None else after.grad)

    def _callee_frame(self, call: cst.Call, target: FunctionInfo, frame: Frame) -> Frame:
        subst = self.model._argument_keys(call, target, frame)
        prefix = f"{target.qualname}@{frame.depth + 1}:"
        return Frame(target, target.scope, subst, prefix, frame.chain + (call,), frame.active | {target.node},
                     literal_flags(call, target, frame.flags))


# calls that iterate the same items as their first argument (a progress bar around a loader)
_SAME_ITEMS = frozenset({"tqdm", "progress_bar", "track"})


def _same_items_call(expr: cst.BaseExpression) -> bool:
    if not isinstance(expr, cst.Call) or not positional_args(expr):
        return False
    func = expr.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return name in _SAME_ITEMS


def _iterated(expr: cst.BaseExpression, scope: Scope) -> cst.BaseExpression:
    """The sequence whose items a loop over `expr` gets: through progress bars (`tqdm(loader)`)
    and a name bound once to one (`with tqdm(loader) as bar`)."""
    for _ in range(4):
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            if len(bindings) == 1 and bindings[0].kind in ("assign", "with") and _same_items_call(bindings[0].value):
                expr = bindings[0].value
                continue
        if _same_items_call(expr):
            expr = positional_args(expr)[0].value
            continue
        break
    return expr


def _minus_one(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """`X` of `X - 1`."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract) and \
            isinstance(expr.right, cst.Integer) and expr.right.evaluated_value == 1:
        return expr.left
    return None


def _plus_one(expr: cst.BaseExpression, name: str) -> bool:
    """`name + 1` (or `1 + name`)."""
    if not (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add)):
        return False
    sides = (expr.left, expr.right)
    return any(isinstance(a, cst.Name) and a.value == name and isinstance(b, cst.Integer) and b.evaluated_value == 1
               for a, b in (sides, sides[::-1]))


def _left_over(state: State | None, entry: State, loop: cst.CSTNode) -> State | None:
    """The state an iteration hands to the next one: an eval the iteration set (not there when
    the loop was entered) is now left over from an earlier iteration, not chosen for what follows
    it (`Fact.evaluated` is the loop)."""
    if state is None:
        return None
    for key, facts in state.modes.items():
        before = entry.facts(key)
        if not any(f.kind == EVAL and f.in_training and f.evaluated is None and f not in before for f in facts):
            continue
        state = state.set(key, frozenset(f._replace(evaluated=loop) if f.kind == EVAL and f.in_training and
                                         f.evaluated is None and f not in before else f for f in facts))
    return state


def _requires_grad_flag(call: cst.Call) -> bool | None:
    """The flag of `x.requires_grad_(flag)`: True when omitted, None when not a literal."""
    args = positional_args(call) or [a for a in call.args if a.keyword is not None]
    if not args:
        return True
    value = args[0].value
    return False if is_false(value) else True if is_true(value) else None


def _requires_grad_setting(node: cst.CSTNode, name: str) -> bool | None:
    """What `node` sets `name.requires_grad` to (`p.requires_grad = False`, `p.requires_grad_(False)`):
    False, True (or a value not known: True), or None when it does not set it."""
    if isinstance(node, cst.Expr):
        node = node.value
    if isinstance(node, cst.Assign):
        if not any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad" and
                   isinstance(t.target.value, cst.Name) and t.target.value.value == name for t in node.targets):
            return None
        return False if is_false(node.value) else True
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
            node.func.attr.value == "requires_grad_" and isinstance(node.func.value, cst.Name) and \
            node.func.value.value == name:
        return _requires_grad_flag(node) is not False
    return None


def _decorator_callee(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.func if isinstance(expr, cst.Call) else expr


def _overrides_module_mode(target: FunctionInfo) -> bool:
    """A `train`/`eval` method that calls `super().train(...)` is still the module's mode switch."""
    if target.name not in ("train", "eval") or target.class_name is None:
        return False
    for node in walk(target.node.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                node.func.attr.value in ("train", "eval"):
            receiver = node.func.value
            if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name) and receiver.func.value == "super":
                return True
            if dotted_name(receiver) and dotted_name(receiver).endswith("Module"):
                return True
    return False


def body_statements(node) -> list:
    """Statements of a function, suite or module."""
    if isinstance(node, cst.FunctionDef):
        node = node.body
    body = getattr(node, "body", ())
    if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        body = body.body
    return list(body)


_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def _calls_post_order(node: cst.CSTNode) -> list[cst.Call]:
    """Calls under `node` with arguments before the call that takes them (evaluation order),
    not entering nested functions, classes or lambdas."""
    result: list[cst.Call] = []

    def visit(current: cst.CSTNode) -> None:
        kind = type(current)  # exact types: isinstance on LibCST nodes goes through ABCMeta
        if current is not node and kind in _NESTED:
            return
        if kind is cst.Call:
            visit(current.func)
            for arg in current.args:
                visit(arg.value)
            result.append(current)
            return
        for child in iter_children(current):
            visit(child)

    visit(node)
    return result


def _split_at_yield(function: cst.FunctionDef) -> tuple[list, list]:
    """Statements a `@contextmanager` runs before its `yield` and after it (finally blocks
    included), flattened in order."""
    yield_stmt = None
    for node in walk(function.body):
        if isinstance(node, _NESTED) and node is not function:
            continue
        if isinstance(node, cst.SimpleStatementLine) and any(
                isinstance(s, cst.Expr) and isinstance(s.value, cst.Yield) or
                isinstance(s, cst.Assign) and isinstance(s.value, cst.Yield) for s in node.body):
            yield_stmt = node
            break
    if yield_stmt is None:
        return body_statements(function), []
    path = []  # (container node, child on the way to the yield)
    child: cst.CSTNode = yield_stmt
    for parent in _parent_chain(function, yield_stmt):
        path.append((parent, child))
        child = parent
    before: list = []
    after: list = []
    for container, child in reversed(path):
        statements = statements_of(container)
        if statements is not None and child in statements:
            position = statements.index(child)
            before.extend(statements[:position])
    for container, child in path:
        statements = statements_of(container)
        if statements is not None and child in statements:
            after.extend(statements[statements.index(child) + 1:])
        if isinstance(container, (cst.Try, cst.TryStar)) and container.finalbody is not None \
                and child is container.body:
            after.extend(body_statements(container.finalbody.body))
    return before, after


def _parent_chain(root: cst.CSTNode, target: cst.CSTNode) -> list:
    """Ancestors of `target` up to `root`, innermost first (found by a search from `root`)."""
    stack: list[tuple[cst.CSTNode, tuple]] = [(root, ())]
    while stack:
        node, ancestors = stack.pop()
        if node is target:
            return list(reversed(ancestors))
        for child in iter_children(node):
            stack.append((child, ancestors + (node,)))
    return []


def statements_of(container: cst.CSTNode) -> list | None:
    if isinstance(container, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        return list(container.body)
    return None


def _summary_flags(call: cst.Call, summary) -> dict[str, bool]:
    """The flag parameters of another file's function that `call` binds to a literal True/False,
    passed or by default (`evaluate_model(model, path, is_training=True)`)."""
    values = bound_arguments(call, list(summary.params), {})
    if values is None:
        return {}
    flags = dict(getattr(summary, "flag_defaults", ()))
    for name, value in values.items():
        if is_true(value) or is_false(value):
            flags[name] = is_true(value)
        else:
            flags.pop(name, None)  # a value not known here: both branches may run
    return flags
