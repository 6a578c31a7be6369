"""How the loss of an accumulating training loop is scaled, and whether its micro-batches are equal.

Under accumulation the gradients of K backward passes add up in `.grad`. A per-micro-batch mean
loss must be divided by K (exact when the micro-batches of a window have equal size), or the summed
losses divided by the window's total example/token count (exact always). This module traces the
expression handed to backward back through the assignments of its name (and one helper boundary)
and classifies it; TL102 and TL103 read the result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterator

import libcst as cst

from trainlint.model import file_facts, frameworks
from trainlint.model.arithmetic import fold
from trainlint.model.dataflow import dataflow
from trainlint.model.file_facts import file_fact
from trainlint.model.index import Scope, dotted_name, keyword_arg, positional_args, unpacked_position, walk
from trainlint.model.roles import _PASS_THROUGH_FUNCTIONS, _PASS_THROUGH_METHODS, LOADER, \
    _unpacked_prepare_argument
from trainlint.model.summaries import FunctionSummary
from trainlint.model.proofs import role_premise
from trainlint.model.training import CallRef, TrainingLoop, TrainingModel

# Divisors that are the number of micro-batches (or the accumulation factor) by their name.
_K_WORDS = re.compile(r"accum|grad_acc|update_freq|micro|n_?chunks|num_chunks|sub_?batches|(^|\.)k$|^K$", re.I)
_SIZE_WORDS = re.compile(r"size|len|tokens|count|numel|items", re.I)
# Names of a micro-batch's own size: dividing by them still gives a per-micro-batch mean.
_LOCAL_NAMES = re.compile(r"(^|_)batch_?size$|^(mb|micro)_?bs$|^bs$|^B$|^mbs$", re.I)
# `len(...)` of these is the number of micro-batches in the window.
_WINDOW_LISTS = re.compile(r"batches|chunks|micro|splits|shards|window", re.I)
# A count taken from the current micro-batch alone: the loss becomes a per-micro-batch mean.
_LOCAL_COUNT_METHODS = {"sum", "numel", "size", "count_nonzero", "nelement"}
# Text that shows a token-level loss with padding (valid-token counts differ between micro-batches).
_TOKEN_EVIDENCE = re.compile(r"ignore_index|-100\b|CausalLM|Seq2SeqLM|MaskedLM|ForLanguageModeling|"
                             r"DataCollatorForSeq2Seq")
_LOSS_COUNTS = re.compile(r"mask|valid|ntok|n_tok|num_tok|tokens", re.I)

MEAN, SUM, SCALED, UNKNOWN, CYCLE = "mean", "sum", "scaled", "unknown", "cycle"


@dataclass
class Trace:
    """What a backpropagated loss expression is: a per-micro-batch MEAN, a SUM, SCALED (divided by K
    or weighted by the window's count), or UNKNOWN. `k_division` is the node holding a division by
    a constant number of micro-batches; `token_level` the evidence of a token-level loss."""

    kind: str
    k_division: cst.CSTNode | None = None
    token_level: str | None = None
    producers: list[cst.CSTNode] = field(default_factory=list)
    #: what was divided by K at `k_division` (MEAN: a per-micro-batch mean, the TL103 case)
    k_numerator: str | None = None
    #: factors a MEAN was multiplied by that read nothing K is computed from (`criterion(...) *
    #: args.alpha`): a weight, not the window's share, so the gradient still grows with K
    weights: list[cst.CSTNode] = field(default_factory=list)


@dataclass
class BackwardLoss:
    ref: CallRef
    loss: cst.BaseExpression | None  # the expression handed to backward
    scope: Scope
    accelerate_divides: bool  # `accelerator.backward` divides by the Accelerator's K itself


class LossTracer:
    def __init__(self, model: TrainingModel, loop: TrainingLoop) -> None:
        self.model = model
        self.ctx = model.ctx
        self.index = model.index
        self.loop = loop
        guard = loop.guard
        self.k_text = self.ctx.code_for(guard.k) if guard is not None and guard.k is not None else None
        self.window_iter = self.ctx.code_for(guard.condition) if guard is not None and \
            guard.kind == "micro_loop" and guard.condition is not None else None
        self._memo: dict[tuple, Trace] = {}

    # -- what backward receives ---------------------------------------------------------------
    def backward_loss(self, ref: CallRef) -> BackwardLoss:
        call = ref.node
        func = call.func
        args = positional_args(call)
        if any(a.star for a in call.args):  # `backward(**kwargs)` may pass a gradient
            return BackwardLoss(ref, None, ref.scope, False)
        if isinstance(func, cst.Attribute) and func.attr.value == "backward" and not args and \
                not any(a.keyword and a.keyword.value in ("gradient", "grad_tensors") for a in call.args):
            receiver = func.value
            # `scaler.scale(loss).backward()`
            if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and \
                    receiver.func.attr.value == "scale" and positional_args(receiver):
                return BackwardLoss(ref, positional_args(receiver)[0].value, ref.scope, False)
            return BackwardLoss(ref, receiver, ref.scope, False)
        if isinstance(func, cst.Attribute) and func.attr.value in frameworks.backward_methods() and args:
            divides = False
            if self.loop.guard is not None and self.loop.guard.kind == "engine":
                # the engine's backward divides by the K it was configured with (framework data)
                return BackwardLoss(ref, args[0].value, ref.scope, self.model._is_engine_call(ref, "backward"))
            if func.attr.value == "backward" and not _is_self(func.value):
                known, k = self.model.accelerator_k(func.value, ref.scope)
                if known and k is not None:
                    divides = True
                elif not known and self.loop.guard is not None and (
                        self.loop.guard.kind == "accelerate" or _mentions_sync(self.loop.guard, self.ctx)):
                    divides = True  # an Accelerator configured elsewhere, used the accumulating way
                elif not known and _is_accelerator_like(self.ctx.code_for(func.value)):
                    return BackwardLoss(ref, None, ref.scope, False)  # cannot tell its K
            return BackwardLoss(ref, args[0].value, ref.scope, divides)
        if self.index.resolve(func, ref.scope) == "torch.autograd.backward" and args:
            return BackwardLoss(ref, args[0].value, ref.scope, False)
        return BackwardLoss(ref, None, ref.scope, False)

    # -- tracing ---------------------------------------------------------------------------------
    def trace(self, expr: cst.BaseExpression, scope: Scope, via: tuple[cst.Call, ...] = (),
              depth: int = 0) -> Trace:
        if depth > 6:
            return Trace(UNKNOWN)
        key = (id(expr), id(scope), via)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = Trace(CYCLE)  # `loss = loss / k` refers back to itself: contributes nothing
        result = self._trace(expr, scope, via, depth)
        self._memo[key] = result
        return result

    def _trace(self, expr: cst.BaseExpression, scope: Scope, via, depth: int) -> Trace:
        if isinstance(expr, cst.BinaryOperation):
            return self._trace_binary(expr, scope, via, depth)
        if isinstance(expr, cst.Name):
            return self._trace_name(expr, scope, via, depth)
        if isinstance(expr, cst.Call):
            return self._trace_call(expr, scope, via, depth)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in ("loss", "total_loss"):
                if self._window_normalised(expr.value, scope):
                    return Trace(SCALED)
                return Trace(MEAN, producers=[expr])
            if isinstance(expr.value, cst.Name) and expr.value.value == "self":
                return Trace(UNKNOWN)
            return Trace(MEAN, producers=[expr]) if re.search(r"loss", expr.attr.value, re.I) else Trace(UNKNOWN)
        if isinstance(expr, cst.Subscript):
            keyed = self._returned_entry(expr, scope, via, depth)
            return keyed if keyed is not None else Trace(MEAN, producers=[expr])
        if isinstance(expr, (cst.List, cst.Tuple)) and expr.elements:
            return self._sum_of([e.value for e in expr.elements], scope, via, depth)
        return Trace(UNKNOWN)

    def _returned_entry(self, expr: cst.Subscript, scope: Scope, via, depth: int) -> Trace | None:
        """`out["loss"]` with `out = model.step(batch)`, a function or method of this file every
        return of which is a dict literal holding that key: what the dict holds there."""
        key = expr.slice[0].slice.value if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) \
            else None
        if not isinstance(key, cst.SimpleString) or not isinstance(key.evaluated_value, str):
            return None
        base = expr.value
        if isinstance(base, cst.Name):
            bindings = self.index.reaching_bindings(expr, base.value, scope)
            if len(bindings) != 1 or bindings[0].kind != "assign" or not isinstance(bindings[0].value, cst.Call):
                return None
            base = bindings[0].value
        if not isinstance(base, cst.Call):
            return None
        target = self.model.callee(base, scope) or self._forward_of(base.func, scope)
        if target is None and isinstance(base.func, cst.Attribute):
            # `model.step(batch)` on a parameter: the one method of that name the file's classes define
            named = [f for f in self.index.functions if f.class_name and f.name == base.func.attr.value]
            target = named[0] if len(named) == 1 else None
        if target is None:
            return None
        returns = [n.value for n in walk(target.node.body) if isinstance(n, cst.Return) and n.value is not None]
        values = []
        for value in returns:
            if not isinstance(value, cst.Dict):
                return None
            entry = next((e.value for e in value.elements if isinstance(e, cst.DictElement)
                          and isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == key.evaluated_value),
                         None)
            if entry is None:
                return None
            values.append(entry)
        if not values:
            return None
        return _combine([self.trace(v, target.scope, via + (base,), depth + 1) for v in values])

    def model_output_producers(self, trace: Trace) -> list[cst.CSTNode]:
        """The producers of a MEAN trace that are one of several outputs of a call whose code is not
        read (`out["loss"]` or `out.loss` of `out = net(batch)`, `_, loss, _ = net(...)`): a forward
        that computes its loss among other things, with a reduction (a mean, or a sum over its
        tokens) the code does not show. A call handing back the loss itself (`criterion(out, y)`)
        is a loss function, a mean by default; a transformers model's loss is a token mean (the
        library's contract): neither is listed."""
        found = []
        for producer in trace.producers:
            scope = self.index.scope_at(producer)
            calls: list[cst.Call] = []
            if isinstance(producer, (cst.Subscript, cst.Attribute)):
                base = producer.value
                if isinstance(base, cst.Call):
                    calls = [base]
                elif isinstance(base, cst.Name):
                    bindings = scope.lookup(base.value)
                    calls = [b.value for b in bindings if b.kind == "assign" and isinstance(b.value, cst.Call)]
                    if len(calls) != len(bindings):
                        calls = []
            elif isinstance(producer, cst.Call):
                parent = self.index.parent(producer)
                if isinstance(parent, cst.Assign) and any(isinstance(t.target, (cst.Tuple, cst.List))
                                                          for t in parent.targets) \
                        and self._object_called(producer.func, scope):
                    calls = [producer]  # `predicts, loss, metrics = net(...)`
            if calls and all(self._untraced_forward(call, scope) for call in calls):
                found.append(producer)
        return found

    def _object_called(self, func: cst.BaseExpression, scope: Scope) -> bool:
        """`func` holds an object (a parameter, a variable, an attribute), not a function a module
        defines or an import names (`compute_loss` from a library: a loss function)."""
        if self.index.resolve(func, scope) is not None:
            return False
        if isinstance(func, cst.Name):
            return not any(b.kind in ("def", "class", "import") for b in scope.lookup(func.value))
        return isinstance(func, (cst.Attribute, cst.Subscript))

    def _untraced_forward(self, call: cst.Call, scope: Scope) -> bool:
        func = call.func
        if self.model.callee(call, scope) is not None or self._forward_of(func, scope) is not None:
            return False  # a function or module class of this file: its code is read
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            # `self.model = Seq2Seq(...)`, a module class of this file: its forward is read
            built = self.index.self_attribute_values(func.attr.value, scope)
            classes = {self._class_of(value, self.index.scope_at(value), 0) for value in built}
            if built and None not in classes and all(self.index.method(c, "forward") is not None for c in classes):
                return False
        target = func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func
        built = role_premise(self.ctx, target, scope, "model")
        # built by transformers (here, or by a caller that passes it): the library's loss is a token mean
        return not (built.proven and re.search(r"`(transformers|peft|diffusers)\.", built.text))

    def _sum_of(self, terms: list[cst.BaseExpression], scope: Scope, via, depth: int) -> Trace:
        """The sum of several loss terms, as `a + b` reads: scaled if one is, a mean if one is."""
        traces = [t for t in (self.trace(term, scope, via, depth + 1) for term in terms) if t.kind != CYCLE]
        if not traces:
            return Trace(UNKNOWN)
        kinds = {t.kind for t in traces}
        kind = SCALED if SCALED in kinds else MEAN if MEAN in kinds else SUM if kinds == {SUM} else UNKNOWN
        divided = next((t.k_division for t in traces if t.k_division is not None), None)
        return Trace(kind, divided, next((t.token_level for t in traces if t.token_level), None),
                     [p for t in traces for p in t.producers])

    def _summed_container(self, call: cst.Call, scope: Scope, via, depth: int) -> Trace | None:
        """`sum(losses.values())`, `sum([lm_loss, aux_loss])`, `sum(loss_terms)`: the sum of what
        the container holds, one step away (`Dataflow.container_values`)."""
        args = positional_args(call)
        if len(args) != 1 or self.index.resolve(call.func, scope) != "sum":
            return None
        summed = args[0].value
        if isinstance(summed, cst.Call) and isinstance(summed.func, cst.Attribute) \
                and summed.func.attr.value == "values" and not summed.args:
            summed = summed.func.value
        if isinstance(summed, (cst.List, cst.Tuple)):
            return self._sum_of([e.value for e in summed.elements], scope, via, depth) if summed.elements else None
        if isinstance(summed, cst.Name):
            values = self.ctx.model(dataflow).container_values(summed)
            return self._sum_of(values, scope, via, depth) if values else None
        return None

    def _trace_binary(self, expr: cst.BinaryOperation, scope: Scope, via, depth: int) -> Trace:
        op = expr.operator
        if isinstance(op, (cst.Divide, cst.FloorDivide)):
            divisor = self._divisor_kind(expr.right, scope)
            left = self.trace(expr.left, scope, via, depth + 1)
            if divisor == "k":
                return Trace(SCALED, expr, left.token_level, left.producers, left.kind)
            if divisor == "other" and via and left.kind == SUM and isinstance(expr.right, (cst.Integer, cst.Float)):
                # a sum halved by a constant inside the loss function a micro-batch calls: still
                # a sum over its samples (that function cannot know the window's count)
                return left
            if divisor == "local":
                token = left.token_level or (self.ctx.code_for(expr.right)
                                             if _LOSS_COUNTS.search(self.ctx.code_for(expr.right)) else None)
                kind = MEAN if left.kind in (SUM, MEAN) else left.kind
                return Trace(kind, left.k_division, token, left.producers)
            return Trace(SCALED, None, left.token_level, left.producers)  # weighted by the window's count
        if isinstance(op, (cst.Add, cst.Subtract)):
            # `a + b + c + d` nests one level per term: a sum of terms is one step deeper, not four
            left = self.trace(expr.left, scope, via, depth)
            right = self.trace(expr.right, scope, via, depth + 1)
            if CYCLE in (left.kind, right.kind):
                return right if left.kind == CYCLE else left
            kinds = {left.kind, right.kind}
            kind = SCALED if SCALED in kinds else MEAN if MEAN in kinds else SUM if kinds == {SUM} else UNKNOWN
            return Trace(kind, left.k_division or right.k_division, left.token_level or right.token_level,
                         left.producers + right.producers, weights=left.weights + right.weights)
        if isinstance(op, cst.Multiply):
            # `loss * world_size` (undoing DDP's average over processes) leaves a per-micro-batch
            # loss per micro-batch: the factor counts processes, not the window's share
            # `token_loss * loss_mask` zeroes the padding: the same per-token losses, fewer of them
            for factor, other in ((expr.right, expr.left), (expr.left, expr.right)):
                if _process_count(factor, scope) or _is_mask(factor):
                    return self.trace(other, scope, via, depth + 1)
            left = self.trace(expr.left, scope, via, depth + 1)
            right = self.trace(expr.right, scope, via, depth + 1)
            if any(t.kind == SCALED for t in (left, right)):
                return Trace(SCALED, left.k_division or right.k_division, left.token_level or right.token_level)
            # `criterion(out, y) * args.alpha`: a weight that reads nothing K is computed from (and
            # nothing that changes per micro-batch) cannot be the window's share: whatever it is set
            # to, the accumulated gradient still grows with K; the loss is the mean it weights
            for mean, factor, other in ((left, expr.right, right), (right, expr.left, left)):
                if mean.kind == MEAN and other.kind == UNKNOWN and not via and self.free_of_k(factor, scope):
                    return Trace(MEAN, mean.k_division, mean.token_level, mean.producers, mean.k_numerator,
                                 [factor, *mean.weights])
            return Trace(UNKNOWN)  # weighted by something: not ours to judge
        return Trace(UNKNOWN)

    def free_of_k(self, factor: cst.BaseExpression, scope: Scope, depth: int = 0,
                  site_k: cst.BaseExpression | None = None) -> bool:
        """`factor` reads nothing the window's K is computed from, and nothing the loop changes
        between micro-batches: a literal (not the reciprocal of a constant K), a name whose
        reaching assignments are such values (a parameter: what every same-file caller passes),
        `self.<attr>` set only to such values, a setting (`args.alpha`) no assignment of the file
        computes from K, and arithmetic or `float`/`int`/`min`/`max`/`abs` of these. False when
        K's expression is not known."""
        k = self.loop.k
        if k is None or depth > 3:
            return False
        k_names = _k_names(self.ctx, self.loop)
        if site_k is not None:  # at a caller: what it passes for K's parameter is K there
            k_names = k_names | {n.value for n in walk(site_k) if isinstance(n, cst.Name)}
        value = fold(factor, floats=True)
        if value is not None:  # `0.5`, `1 / 8`: not the reciprocal of a K the code fixes
            constant = fold(site_k, floats=True) if site_k is not None else self._k_constant(k, scope)
            return constant is None or abs(value * constant - 1) > 1e-9
        if isinstance(factor, cst.UnaryOperation):
            return self.free_of_k(factor.expression, scope, depth + 1, site_k)
        if isinstance(factor, cst.BinaryOperation):
            return self.free_of_k(factor.left, scope, depth + 1, site_k) and \
                self.free_of_k(factor.right, scope, depth + 1, site_k)
        if isinstance(factor, cst.Call):
            if not (isinstance(factor.func, cst.Name) and factor.func.value in ("float", "int", "min", "max", "abs")):
                return False
            return bool(factor.args) and all(not a.star and self.free_of_k(a.value, scope, depth + 1, site_k)
                                             for a in factor.args)
        if isinstance(factor, cst.Name):
            if factor.value in k_names:
                return False
            if site_k is not None:
                bindings = scope.lookup(factor.value)
                return bool(bindings) and all(
                    b.kind == "assign" and b.value is not None and b.value is not factor
                    and self.free_of_k(b.value, self.index.scope_at(b.node), depth + 1, site_k) for b in bindings)
            bindings = self.index.reaching_bindings(factor, factor.value, scope)
            if not bindings:
                return False
            for binding in bindings:
                if self.loop.node in self.index.ancestors(binding.node):
                    return False  # set per micro-batch: it may be the micro-batch's share
                if binding.kind == "assign" and binding.value is not None and binding.value is not factor:
                    if not self.free_of_k(binding.value, self.index.scope_at(binding.node), depth + 1):
                        return False
                elif binding.kind == "param":
                    if not self._passed_free_of_k(binding, scope, depth):
                        return False
                else:
                    return False
            return True
        if isinstance(factor, cst.Attribute):
            text = " ".join(self.ctx.code_for(factor).split())
            if text in k_names or factor.attr.value in k_names:
                return False
            if _is_self(factor.value):
                values = self.index.self_attribute_values(factor.attr.value, scope)
                return bool(values) and all(self.free_of_k(v, self.index.scope_at(v), depth + 1) for v in values)
            for node in self.ctx.model(attribute_writes).get(text, ()):
                value = node.value
                if value is None or not self.free_of_k(value, self.index.scope_at(node), depth + 1, site_k):
                    return False
            return True
        return False

    def _passed_free_of_k(self, binding, scope: Scope, depth: int) -> bool:
        """A parameter: every same-file caller passes a value free of K (and there is one; a default
        alone is read when no caller passes the parameter)."""
        function = self.index.function_of_node.get(scope.node) if scope.kind == "function" else None
        if function is None:
            return False
        sites = list(self.index.callers(function))
        if not sites:
            return False
        k = self.loop.k
        for site in sites:
            argument = self.index.argument_for(site.node, function, binding.name)
            if argument is None:
                param = binding.node if isinstance(binding.node, cst.Param) else None
                argument = param.default if param is not None else None
            site_k = self.index.argument_for(site.node, function, k.value) if isinstance(k, cst.Name) else None
            if argument is None or not self.free_of_k(argument, site.scope, depth + 1, site_k):
                return False
        return True

    def _k_constant(self, k: cst.BaseExpression, scope: Scope) -> float | None:
        """K's value when the code fixes it (`4`, `ACCUM = 4`), else None."""
        if isinstance(k, cst.Integer):
            return float(k.value)
        if isinstance(k, cst.Name):
            values = [b.value for b in scope.lookup(k.value) if b.kind == "assign"]
            if values and all(isinstance(v, cst.Integer) for v in values):
                return float(values[0].value)
        return None

    def _divisor_kind(self, divisor: cst.BaseExpression, scope: Scope) -> str:
        """"k" (the number of micro-batches), "local" (a count of the current micro-batch), or
        "other" (the window's count, or anything not known)."""
        text = self.ctx.code_for(divisor)
        if self.k_text is not None and text == self.k_text:
            return "k"
        if isinstance(divisor, cst.BinaryOperation) and isinstance(divisor.operator, cst.Add) and \
                _tiny(divisor.right):  # `n_tokens + 1e-8`: an epsilon against 0 leaves the count
            return self._divisor_kind(divisor.right if _tiny(divisor.left) else divisor.left, scope)
        if self._k_like(divisor):
            return "k"
        if isinstance(divisor, cst.Call) and isinstance(divisor.func, cst.Name) and divisor.func.value == "len":
            args = positional_args(divisor)
            return "local" if args and not any(isinstance(n, (cst.GeneratorExp, cst.ListComp)) for n in walk(divisor)) \
                and self._per_micro_batch(divisor, scope) else "other"
        if isinstance(divisor, cst.Call) and isinstance(divisor.func, cst.Attribute) and \
                divisor.func.attr.value in _LOCAL_COUNT_METHODS:
            return "local" if self._per_micro_batch(divisor, scope) else "other"
        if isinstance(divisor, cst.Subscript) and isinstance(divisor.value, cst.Attribute) and \
                divisor.value.attr.value == "shape":
            return "local" if self._per_micro_batch(divisor, scope) else "other"
        if isinstance(divisor, (cst.Integer, cst.Float)):
            return "k" if self.k_text is not None and divisor.value == self.k_text else "other"
        if isinstance(divisor, (cst.Name, cst.Attribute)) and _LOCAL_NAMES.search(_name_text(divisor) or ""):
            return "local"
        if isinstance(divisor, cst.Name):
            # `n_tokens = (labels != -100).sum()` bound from the current micro-batch
            for binding in scope.lookup(divisor.value):
                if binding.kind == "assign" and binding.value is not None and \
                        self._divisor_kind(binding.value, scope) == "local" and \
                        not isinstance(binding.value, cst.Name):
                    return "local"
        return "other"

    def _per_micro_batch(self, count: cst.BaseExpression, scope: Scope) -> bool:
        """A count (`len(x)`, `y.numel()`, `x.shape[0]`) of data that changes every micro-batch.

        In the loop's own scope that means it reads a name bound inside the loop (its target or an
        assignment in its body); `total = len(x)` before the loop counts the whole window. Inside a
        helper called per micro-batch, its names are taken as per micro-batch.
        """
        if scope is not self.loop.scope:
            return True
        loop = self.loop.node
        bound_outside = False
        not_data = {id(n.func) for n in walk(count) if isinstance(n, cst.Call)} | \
            {id(n.attr) for n in walk(count) if isinstance(n, cst.Attribute)}
        for node in walk(count):
            if not isinstance(node, cst.Name) or id(node) in not_data:  # `len`, `.shape`: not data
                continue
            bindings = scope.lookup(node.value)
            if not bindings:
                return True  # bound nowhere in the file: cannot tell, keep the per-micro-batch reading
            for binding in bindings:
                if binding.node is loop or any(a is loop for a in self.index.ancestors(binding.node)):
                    return True
            bound_outside = True
        return not bound_outside

    def _k_like(self, divisor: cst.BaseExpression) -> bool:
        """The number of micro-batches: a name like `grad_accum`, `len(micro_batches)`, `float(K)`."""
        if isinstance(divisor, (cst.Name, cst.Attribute)):
            name = _name_text(divisor)
            return bool(name and _K_WORDS.search(name) and not _SIZE_WORDS.search(name))
        if isinstance(divisor, cst.BinaryOperation):
            return self._k_like(divisor.left) or self._k_like(divisor.right)
        if isinstance(divisor, cst.Call) and isinstance(divisor.func, cst.Name):
            args = positional_args(divisor)
            if len(args) != 1:
                return False
            if divisor.func.value in ("float", "int"):
                return self._k_like(args[0].value)
            if divisor.func.value == "len":
                text = self.ctx.code_for(args[0].value)
                return text == self.window_iter or bool(_WINDOW_LISTS.search(text))
        return False

    def _trace_name(self, expr: cst.Name, scope: Scope, via, depth: int) -> Trace:
        bindings = self.index.reaching_bindings(expr, expr.value, scope)
        if not bindings:
            return Trace(UNKNOWN)
        traces = []
        for binding in bindings:
            if binding.kind == "augassign" and isinstance(binding.node, cst.AugAssign):
                op = binding.node.operator
                if isinstance(op, cst.DivideAssign):
                    kind = self._divisor_kind(binding.node.value, scope)
                    if kind == "k":
                        traces.append(Trace(SCALED, binding.node, k_numerator=self._augassign_numerator(
                            binding, expr, scope, via, depth)))
                    elif kind == "other":
                        traces.append(Trace(SCALED))
                elif isinstance(op, cst.MultiplyAssign):
                    traces.append(Trace(UNKNOWN))
                elif isinstance(op, cst.AddAssign):
                    traces.append(self.trace(binding.node.value, scope, via, depth + 1))
            elif binding.kind == "assign":
                if binding.value is not None:
                    if binding.value is expr or _is_zero(binding.value):
                        continue  # `total = 0` before `total += ...`: the start adds nothing
                    traces.append(self.trace(binding.value, scope, via, depth + 1))
                elif isinstance(binding.node, cst.Assign) and isinstance(binding.node.value, cst.Call):
                    # `logits, loss = model(x, y)`; a same-file helper's returned tuple is read
                    traces.append(self._trace_unpacked(binding.node, expr.value, scope, via, depth))
                else:
                    traces.append(Trace(UNKNOWN))
            elif binding.kind == "param":
                traces.append(self._trace_param(binding, scope, via, depth))
            else:
                traces.append(Trace(UNKNOWN))
        return _combine(traces)

    def _trace_unpacked(self, assign: cst.Assign, name: str, scope: Scope, via, depth: int) -> Trace:
        call = assign.value
        target_fn = self.model.callee(call, scope)
        unpacked = unpacked_position(assign, name)
        if target_fn is None:
            if unpacked is not None and self._forward_sums(call, scope, via, depth, unpacked):
                return Trace(SUM, producers=[call])
            return Trace(MEAN, producers=[call])
        if unpacked is not None:
            position, count = unpacked
            traces = [self.trace(node.value.elements[position].value, target_fn.scope, via + (call,), depth + 1)
                      for node in walk(target_fn.node.body)
                      if isinstance(node, cst.Return) and isinstance(node.value, cst.Tuple)
                      and len(node.value.elements) == count]
            return _combine(traces)
        return Trace(UNKNOWN)

    def _augassign_numerator(self, binding, expr: cst.Name, scope: Scope, via, depth: int) -> str:
        others = [b for b in scope.lookup(expr.value) if b is not binding and b.kind == "assign"]
        if not others:
            return UNKNOWN
        return _combine([self.trace(b.value, scope, via, depth + 1) if b.value is not None else Trace(MEAN)
                         for b in others]).kind

    def _trace_param(self, binding, scope: Scope, via, depth: int) -> Trace:
        """A helper's parameter: trace the argument the loop's call passed."""
        if not via:
            return Trace(UNKNOWN)
        call = via[-1]
        function = self.index.function_of_node.get(scope.node) if scope.kind == "function" else None
        if function is None:
            return Trace(UNKNOWN)
        params = [p.name.value for p in function.node.params.params]
        if params and params[0] in ("self", "cls"):
            params = params[1:]
        name = binding.name
        arg = keyword_arg(call, name)
        if arg is None and name in params:
            positional = positional_args(call)
            position = params.index(name)
            arg = positional[position] if position < len(positional) else None
        if arg is None:
            return Trace(UNKNOWN)
        caller_scope = self.index.scope_at(call)
        return self.trace(arg.value, caller_scope, via[:-1], depth + 1)

    def _trace_call(self, call: cst.Call, scope: Scope, via, depth: int) -> Trace:
        func = call.func
        reduced = self.index.resolve(func, scope)
        if reduced in ("torch.sum", "torch.mean") and positional_args(call) and len(call.args) == 1:
            # `torch.sum(x)`: the reduction of its argument, as `x.sum()` is
            inner = self.trace(positional_args(call)[0].value, scope, via, depth + 1)
            if reduced == "torch.sum":
                return Trace(SUM, None, inner.token_level, [call])
            return inner if inner.kind == SCALED else Trace(MEAN, None, inner.token_level, [call])
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in ("float", "to", "cuda", "contiguous", "squeeze", "clone"):
                return self.trace(func.value, scope, via, depth + 1)
            if method == "mean":
                inner = self.trace(func.value, scope, via, depth + 1)
                return inner if inner.kind == SCALED else Trace(MEAN, None, inner.token_level, [call])
            if method == "sum":
                inner = self.trace(func.value, scope, via, depth + 1)
                return Trace(SUM, None, inner.token_level, [call])
            if method in ("div", "true_divide") and positional_args(call):
                fake = cst.BinaryOperation(func.value, cst.Divide(), positional_args(call)[0].value)
                kind = self._divisor_kind(positional_args(call)[0].value, scope)
                return Trace(SCALED, call if kind == "k" else None) if kind != "local" else \
                    self.trace(fake.left, scope, via, depth + 1)
            if method in ("mul", "multiply"):
                return Trace(UNKNOWN)
        summed = self._summed_container(call, scope, via, depth)
        if summed is not None:
            return summed
        target = self.model.callee(call, scope)
        if target is not None:
            returns = [n.value for n in walk(target.node.body)
                       if isinstance(n, cst.Return) and n.value is not None]
            if not returns:
                return Trace(UNKNOWN)
            traces = []
            for value in returns:
                if isinstance(value, cst.Tuple) and value.elements:
                    value = value.elements[0].value
                traces.append(self.trace(value, target.scope, via + (call,), depth + 1))
            return _combine(traces)
        if self._forward_sums(call, scope, via, depth, None):
            return Trace(SUM, producers=[call])
        return self._loss_call(call, scope)

    # -- the gradients divided by K after the window ----------------------------------------------
    def gradients_divided_by_k(self) -> bool:
        """The loop divides the accumulated gradients by K itself before stepping:
        `for p in model.parameters(): p.grad /= K` (also `p.grad.div_(K)`, `p.grad.mul_(1 / K)`,
        `torch._foreach_div_(grads, K)`), so the loss need not be."""
        loop = self.loop
        for node in self.index.subtree(loop.node.body):
            if isinstance(node, cst.AugAssign) and _is_grad(node.target):
                if isinstance(node.operator, cst.DivideAssign) and self._divisor_kind(node.value, loop.scope) == "k":
                    return True
                if isinstance(node.operator, cst.MultiplyAssign) and self._reciprocal_of_k(node.value, loop.scope):
                    return True
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                method, args = node.func.attr.value, positional_args(node)
                if method in ("div_", "mul_") and _is_grad(node.func.value) and args:
                    value = args[0].value
                    if (method == "div_" and self._divisor_kind(value, loop.scope) == "k") or \
                            (method == "mul_" and self._reciprocal_of_k(value, loop.scope)):
                        return True
                if method in ("_foreach_div_", "_foreach_mul_") and len(args) == 2:
                    value = args[1].value
                    if (method == "_foreach_div_" and self._divisor_kind(value, loop.scope) == "k") or \
                            (method == "_foreach_mul_" and self._reciprocal_of_k(value, loop.scope)):
                        return True
        return False

    def _reciprocal_of_k(self, value: cst.BaseExpression, scope: Scope) -> bool:
        """`1 / K`, `1.0 / K`."""
        return isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Divide) and \
            isinstance(value.left, (cst.Integer, cst.Float)) and value.left.evaluated_value == 1 and \
            self._divisor_kind(value.right, scope) == "k"

    # -- a model of this file whose forward returns the loss ----------------------------------------
    def _forward_sums(self, call: cst.Call, scope: Scope, via, depth: int,
                      unpacked: tuple[int, int] | None) -> bool:
        """`model(x, y)` where `model` is an instance of a module class of this file whose forward
        returns a sum-reduced loss (`F.cross_entropy(..., reduction="sum")`; at `unpacked`'s
        position of a returned tuple). Only a sum changes the reading: any other forward keeps
        the default reading of a model's loss, a mean."""
        forward = self._forward_of(call.func, scope)
        if forward is None:
            return False
        traces = []
        for node in walk(forward.node.body):
            if not isinstance(node, cst.Return) or node.value is None:
                continue
            value = node.value
            if unpacked is not None:
                position, count = unpacked
                if not (isinstance(value, cst.Tuple) and len(value.elements) == count):
                    return False
                value = value.elements[position].value
            traces.append(self.trace(value, forward.scope, via + (call,), depth + 1))
        return bool(traces) and all(t.kind == SUM for t in traces)

    def _forward_of(self, func: cst.BaseExpression, scope: Scope):
        if not isinstance(func, cst.Name):
            return None
        found = self._class_of(func, scope, 0)
        return self.index.method(found, "forward") if found is not None else None

    def _class_of(self, value: cst.BaseExpression, scope: Scope, depth: int) -> str | None:
        """The class of this file that `value` builds: `GPT(cfg)`, `GPT(cfg).cuda()`,
        `torch.compile(model)` / `DDP(model)` of a name bound to one."""
        if depth > 4:
            return None
        if isinstance(value, cst.Name):
            # every binding must build the same class; `model = torch.compile(model)` wraps what is there
            found = {self._class_of(b.value, scope, depth + 1) if b.kind == "assign" and b.value is not None else None
                     for b in scope.lookup(value.value) if not self._wraps_itself(b.value, value.value, scope)}
            return found.pop() if len(found) == 1 else None
        if not isinstance(value, cst.Call):
            return None
        func = value.func
        if isinstance(func, cst.Name) and func.value in self.index.classes and self.index.resolve(func, scope) is None:
            return func.value
        if isinstance(func, cst.Attribute) and func.attr.value in _PASS_THROUGH_METHODS:
            return self._class_of(func.value, scope, depth + 1)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and \
                func.value.value in self.index.classes and self.index.resolve(func.value, scope) is None:
            method = self.index.method(func.value.value, func.attr.value)  # `GPT.from_pretrained(name)`
            if method is not None and any(dotted_name(d.decorator) == "classmethod" for d in method.node.decorators):
                return func.value.value
        args = positional_args(value)
        if args and self._wrapper(func, scope):
            return self._class_of(args[0].value, scope, depth + 1)
        return None

    def _wrapper(self, func: cst.BaseExpression, scope: Scope) -> bool:
        """`torch.compile`, `DistributedDataParallel`, `DataParallel` (by name when imported so)."""
        name = self.index.resolve(func, scope) or ""
        return name in _PASS_THROUGH_FUNCTIONS or name.rsplit(".", 1)[-1] in ("DDP", "DistributedDataParallel",
                                                                          "DataParallel")

    def _wraps_itself(self, value: cst.BaseExpression | None, name: str, scope: Scope) -> bool:
        if isinstance(value, cst.Call) and self._wrapper(value.func, scope):
            args = positional_args(value)
            return bool(args) and isinstance(args[0].value, cst.Name) and args[0].value.value == name
        return False

    def _window_normalised(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """`model(**batch, num_items_in_batch=n)` (directly or through the name holding its output):
        a transformers loss already divided by the window's token count."""
        if isinstance(expr, cst.Name):
            return any(isinstance(b.value, cst.Call) and keyword_arg(b.value, "num_items_in_batch") is not None
                       for b in scope.lookup(expr.value))
        return isinstance(expr, cst.Call) and keyword_arg(expr, "num_items_in_batch") is not None

    def _loss_call(self, call: cst.Call, scope: Scope) -> Trace:
        """A call that computes a loss: its reduction, and whether it is token-level."""
        if keyword_arg(call, "num_items_in_batch") is not None:
            return Trace(SCALED)
        name = self.index.resolve(call.func, scope)
        if name in ("sum", "torch.sum", "math.fsum"):
            return Trace(SUM, producers=[call])
        reduction = self._reduction(call, scope)
        if reduction == "sum":
            return Trace(SUM, producers=[call])
        if reduction == "none":
            return Trace(UNKNOWN)
        if reduction is None:
            # a function of another project file: what its returns are, not what its name suggests
            # (`policy_loss(logp, adv, cfg.loss_reduction)` returns `.mean()` or `.sum()` as told)
            summary = self.index.summary_of(call.func, scope)
            if isinstance(summary, FunctionSummary):
                if summary.returns_reduction == "sum":
                    return Trace(SUM, producers=[call])
                if summary.returns_reduction != "mean":
                    return Trace(UNKNOWN)
        token = self._token_evidence(call, scope)
        return Trace(MEAN, token_level=token, producers=[call])

    def _reduction(self, call: cst.Call, scope: Scope) -> str | None:
        for candidate in (call, self._constructor_of(call.func, scope)):
            if isinstance(candidate, cst.Call):
                arg = keyword_arg(candidate, "reduction")
                if arg is not None and isinstance(arg.value, cst.SimpleString):
                    return arg.value.evaluated_value
        return None

    def _token_evidence(self, call: cst.Call, scope: Scope) -> str | None:
        for candidate in (call, self._constructor_of(call.func, scope)):
            if isinstance(candidate, cst.Call):
                if keyword_arg(candidate, "ignore_index") is not None:
                    return "ignore_index"
        return None

    def _constructor_of(self, func: cst.BaseExpression, scope: Scope) -> cst.Call | None:
        """`criterion = nn.CrossEntropyLoss(...)` for a call through `criterion`."""
        if isinstance(func, cst.Name):
            for binding in scope.lookup(func.value):
                if isinstance(binding.value, cst.Call):
                    return binding.value
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            for value in self.index.self_attribute_values(func.attr.value, scope):
                if isinstance(value, cst.Call):
                    return value
        return None

    # -- window sizes (TL103) -------------------------------------------------------------------------
    def file_token_evidence(self) -> str | None:
        return self.ctx.model(_file_token_evidence)  # once per file, not once per loop

    def file_label_masking(self) -> str | None:
        """What in the file masks label positions out of a model's loss (a fact, not a name): an
        `ignore_index` a label can hold, the integer -100 put into a value (`labels[pad] = -100`,
        `t if t != pad else -100`, `label_pad_token_id=-100`; compared with, `labels == -100`: the labels
        it reads hold it), or a collator that writes it."""
        return self.ctx.model(_file_label_masking)

    def file_masks_labels(self) -> bool:
        """The file passes `ignore_index` to a loss and a label can hold its value."""
        return "ignore_index" in self.ctx.document and self.ctx.model(_ignored_labels_possible)

    def own_module(self, call: cst.Call) -> bool:
        """`call` runs the forward of a module class of this file (`model = GPT(cfg)`; `model(x, y)`)."""
        return self._forward_of(call.func, self.index.scope_at(call)) is not None

    def loader_of_loop(self) -> tuple[cst.Call | None, str | None]:
        """The DataLoader call feeding the loop's micro-batches (through enumerate/tqdm/zip, `iter`
        and `next`, names, `self.` attributes and `accelerator.prepare`), and the loader's text."""
        loop = self.loop
        sources: list[tuple[cst.BaseExpression, Scope]] = []
        if isinstance(loop.node, cst.For):
            sources.append((loop.node.iter, loop.scope))
        guard = loop.guard
        if guard is not None and guard.kind == "micro_loop" and isinstance(guard.node, cst.For):
            sources.insert(0, (guard.node.iter, guard.scope or loop.scope))
        for ref in loop.calls:
            if isinstance(ref.node.func, cst.Name) and ref.node.func.value == "next" and positional_args(ref.node):
                sources.append((positional_args(ref.node)[0].value, ref.scope))
        for expr, scope in sources:
            loader = self._loader_call(expr, scope, 0)
            if loader is not None:
                return loader, _loader_name(self.ctx, expr)
        return None, None

    def _loader_call(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> cst.Call | None:
        if depth > 6 or expr is None:
            return None
        if isinstance(expr, cst.Call):
            name = self.index.resolve(expr.func, scope) or ""
            last = name.rsplit(".", 1)[-1]
            if last == "DataLoader":
                return expr
            if last in ("enumerate", "tqdm", "iter", "cycle", "islice", "zip") or \
                    (isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "prepare"):
                args = positional_args(expr)
                return self._loader_call(args[0].value, scope, depth + 1) if args else None
            return None
        if isinstance(expr, cst.Name):
            for binding in reversed(scope.lookup(expr.value)):
                value = binding.value
                if value is None and isinstance(binding.node, cst.Assign):
                    value = _unpacked_prepare_argument(binding.node, expr.value)
                    if value is None:
                        found = self._returned_loader(binding.node, expr.value, scope, depth)
                        if found is not None:
                            return found
                if value is not None and value is not expr:
                    found = self._loader_call(value, scope, depth + 1)
                    if found is not None:
                        return found
                if binding.kind == "param" and binding.value is None:
                    found = self._argument_loader(binding, scope, depth)
                    if found is not None:
                        return found
            return None
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            for value in self.index.self_attribute_values(expr.attr.value, scope):
                found = self._loader_call(value, self.index.scope_at(value), depth + 1)
                if found is not None:
                    return found
        return None

    def _argument_loader(self, binding, scope: Scope, depth: int) -> cst.Call | None:
        """A loader parameter: the DataLoader that this file's callers of the function pass."""
        function = self.index.function_of_node.get(scope.node) if scope.kind == "function" else None
        if function is None:
            return None
        for site in self.index.callers(function):  # not a scan of every call: once per loop
            arg = self.index.argument_for(site.node, function, binding.name)
            if arg is not None:
                found = self._loader_call(arg, site.scope, depth + 1)
                if found is not None:
                    return found
        return None

    def _returned_loader(self, assign: cst.Assign, name: str, scope: Scope, depth: int) -> cst.Call | None:
        """`train_dl, eval_dl = get_dataloaders(...)`: the DataLoader a same-file function returns
        in `name`'s position."""
        if not isinstance(assign.value, cst.Call):
            return None
        target_fn = self.model.callee(assign.value, scope)
        if target_fn is None:
            return None
        unpacked = unpacked_position(assign, name)
        if unpacked is not None:
            position, count = unpacked
            for node in walk(target_fn.node.body):
                if isinstance(node, cst.Return) and isinstance(node.value, cst.Tuple) and \
                        len(node.value.elements) == count:
                    found = self._loader_call(node.value.elements[position].value, target_fn.scope, depth + 1)
                    if found is not None:
                        return found
        return None

    def is_loader(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        return self.model.roles.of(expr, scope) == LOADER


def _file_token_evidence(ctx) -> str | None:
    found = [m.group(0) for m in _TOKEN_EVIDENCE.finditer(ctx.document)]
    if not found:
        return None
    if all(word == "ignore_index" for word in found) and not _ignored_labels_possible(ctx):
        return None  # `ignore_index=-1` as a loss's default, and nothing in the file ever writes -1
    return found[0]


# `transformers` collators that pad (or mask) the labels with -100 unless told otherwise
_MASKING_COLLATORS = frozenset({"DataCollatorForSeq2Seq", "DataCollatorForLanguageModeling",
                                "DataCollatorForTokenClassification", "DataCollatorForWholeWordMask",
                                "DataCollatorForCompletionOnlyLM"})


def _file_label_masking(ctx) -> str | None:
    if "ignore_index" in ctx.document and _ignored_labels_possible(ctx) and any(
            kind == "ignore" for kind, _ in file_facts.values(ctx, "accumulation.label_values")):
        return "ignore_index"
    scalars: set[int] = set()  # `best_acc = -100`: a number stored in a variable, no label
    constants: set[str] = set()  # `IGNORE_INDEX = -100`: written into labels where it is used
    for node in walk(ctx.module):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
            [node.target] if isinstance(node, cst.AnnAssign) else []
        if targets and node.value is not None and all(isinstance(t, (cst.Name, cst.Attribute)) for t in targets):
            scalars.add(id(node.value))
            scalars.update(id(t) for t in targets)
            if _int_literal(node.value) == -100:
                constants.update(t.value for t in targets if isinstance(t, cst.Name))
        elif isinstance(node, cst.Param) and node.default is not None:
            scalars.add(id(node.default))
        elif isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value == "ignore_index":
            scalars.add(id(node.value))  # read by the loss: proves nothing unless a label holds it
    for node in walk(ctx.module):
        if isinstance(node, cst.Call):
            tail = node.func.attr.value if isinstance(node.func, cst.Attribute) else \
                node.func.value if isinstance(node.func, cst.Name) else ""
            if tail in _MASKING_COLLATORS:
                return tail
        elif id(node) not in scalars and (_int_literal(node) == -100 or
                                          (isinstance(node, cst.Name) and node.value in constants)):
            return "-100"
    return None


_FILLING_CALLS = {"masked_fill", "masked_fill_", "fill_", "full", "full_like", "new_full", "where", "pad",
                  "index_fill_", "index_fill", "scatter_", "fill_diagonal_"}


def _ignored_labels_possible(ctx) -> bool:
    """Whether a label can hold the `ignore_index` value: it is not a plain integer (a name, an
    attribute: set elsewhere), or this file writes that integer somewhere (`y[pad] = -1`,
    `masked_fill(mask, -1)`, `F.pad(y, ..., value=-1)`, `torch.where(keep, y, -1)`)."""
    ignored, written = set(), set()
    for kind, value in file_facts.values(ctx, "accumulation.label_values"):
        if kind == "ignore" and value is None:
            return True
        (ignored if kind == "ignore" else written).add(value)
    return not ignored or bool(ignored & written)


@file_fact("accumulation.label_values")
def _label_value_facts(ctx) -> Iterator[tuple[cst.CSTNode, tuple[str, int | None]]]:
    """("ignore", v) for each `ignore_index=v` (None when v is not an integer literal), and
    ("written", v) for each integer literal written into a tensor (`y[pad] = v`, a filling call)."""
    for node in walk(ctx.module):
        if isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value == "ignore_index":
            yield node, ("ignore", _int_literal(node.value))
        elif isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Subscript) for t in node.targets):
            value = _int_literal(node.value)
            if value is not None:
                yield node, ("written", value)
        elif isinstance(node, cst.Call):
            func = node.func
            name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if name in _FILLING_CALLS:
                for arg in node.args:
                    value = _int_literal(arg.value)
                    if value is not None and (arg.keyword is None or arg.keyword.value in ("value", "fill_value")):
                        yield node, ("written", value)


def _int_literal(expr: cst.BaseExpression) -> int | None:
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) and \
            isinstance(expr.expression, cst.Integer):
        return -int(expr.expression.evaluated_value)
    return None


def attribute_writes(ctx) -> dict[str, list[cst.CSTNode]]:
    """The file's assignments to attributes (`args.alpha = ...`, `cfg.w += ...`), by the target's
    code: built once per file (`ctx.model(attribute_writes)`)."""
    found: dict[str, list[cst.CSTNode]] = {}
    for node in walk(ctx.module):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
            [node.target] if isinstance(node, (cst.AugAssign, cst.AnnAssign)) else []
        for target in targets:  # `args.alpha, x = ...`: the whole right side (not read: not free of K)
            for written in ([e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List))
                            else [target]):
                if isinstance(written, cst.Attribute):
                    found.setdefault(" ".join(ctx.code_for(written).split()), []).append(node)
    return found


def _is_zero(expr: cst.BaseExpression) -> bool:
    """The literal `0` / `0.0`."""
    return isinstance(expr, (cst.Integer, cst.Float)) and float(expr.value) == 0


def _is_mask(expr: cst.BaseExpression) -> bool:
    """`loss_mask`, `attention_mask.to(dev)`, `self.mask`: a 0/1 mask of valid positions."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and \
            expr.func.attr.value in ("to", "float", "type_as", "view", "reshape", "flatten", "cuda"):
        expr = expr.func.value
    name = _name_text(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    return bool(name and re.search(r"(^|_)mask$", name.rsplit(".", 1)[-1]))


def _tiny(expr: cst.BaseExpression) -> bool:
    """A float literal below 1e-3 (`1e-8`, `1e-6`): an epsilon added to a count."""
    if not isinstance(expr, cst.Float):
        return False
    try:
        return 0 < float(expr.value) < 1e-3
    except ValueError:
        return False


# Attributes that hold the number of training processes (`self.world_size`, `accelerator.num_processes`).
_PROCESS_COUNT_ATTRS = frozenset({"world_size", "num_processes", "dp_size", "dp_world_size"})


def _process_count(expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
    """The number of data-parallel processes, by its value: `dist.get_world_size()`,
    `mesh.size("dp")`, `accelerator.num_processes`, a literal 1, or a name every assignment of
    which is one of these (`dp_size = mesh.size("dp") if sp else dist.get_world_size()`)."""
    if depth > 2:
        return False
    if isinstance(expr, cst.Integer):
        return expr.value == "1"
    if isinstance(expr, cst.IfExp):
        return _process_count(expr.body, scope, depth + 1) and _process_count(expr.orelse, scope, depth + 1)
    if isinstance(expr, cst.Call) and isinstance(expr.func, (cst.Attribute, cst.Name)):
        name = expr.func.attr.value if isinstance(expr.func, cst.Attribute) else expr.func.value
        args = positional_args(expr)
        return name == "get_world_size" or (
            name == "size" and len(args) == 1 and isinstance(args[0].value, cst.SimpleString))
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in _PROCESS_COUNT_ATTRS
    if isinstance(expr, cst.Name):
        bindings = scope.lookup(expr.value)
        return bool(bindings) and all(b.kind == "assign" and b.value is not None and b.value is not expr
                                      and _process_count(b.value, scope, depth + 1) for b in bindings)
    return False


def _combine(traces: list[Trace]) -> Trace:
    """The bindings of one name: scaled if any binding scales it, else unknown if any is unknown."""
    traces = [t for t in traces if t.kind != CYCLE]
    if not traces:
        return Trace(UNKNOWN)
    kind = next(k for k in (SCALED, UNKNOWN, SUM, MEAN) if any(t.kind == k for t in traces))
    divided = next((t for t in traces if t.k_division is not None), None)
    token = next((t.token_level for t in traces if t.token_level), None)
    producers = [p for t in traces for p in t.producers]
    return Trace(kind, divided.k_division if divided else None, token, producers,
                 divided.k_numerator if divided else None, [w for t in traces for w in t.weights])


def _is_grad(expr: cst.BaseExpression) -> bool:
    """`p.grad` or `p.grad.data`."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        expr = expr.value
    return isinstance(expr, cst.Attribute) and expr.attr.value == "grad"


def _name_text(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def _is_self(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "self"


def _is_accelerator_like(text: str) -> bool:
    return bool(re.search(r"accelerator", text, re.I))


def _mentions_sync(guard, ctx) -> bool:
    if guard.condition is None:
        return False
    text = ctx.code_for(guard.condition)
    return any(flag in text for flag in frameworks.methods("sync_flag"))


def describe_k(ctx, loop: TrainingLoop) -> str:
    """The accumulation factor as the message names it: `` `grad_accum` `` or K."""
    k = loop.k
    if k is None and loop.guard is not None and loop.guard.kind == "accelerate":
        return "`gradient_accumulation_steps`"
    return f"`{ctx.code_for(k)}`" if k is not None else "K"


def is_plateau_scheduler(model: TrainingModel, ref: CallRef) -> bool:
    """`ReduceLROnPlateau`: stepped with a metric on the evaluation clock, not the update clock."""
    call = ref.node
    if positional_args(call) or keyword_arg(call, "metrics") is not None:
        return True
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    values: list[cst.BaseExpression] = []
    if isinstance(receiver, cst.Name):
        values = [b.value for b in ref.scope.lookup(receiver.value) if b.value is not None]
    elif isinstance(receiver, cst.Attribute) and _is_self(receiver.value):
        values = model.index.self_attribute_values(receiver.attr.value, ref.scope)
    return any(isinstance(v, cst.Call) and "Plateau" in model.ctx.code_for(v.func) for v in values)


# a scheduler's length arguments (transformers, timm and torch names)
_HORIZON_KEYWORDS = frozenset({"num_training_steps", "num_warmup_steps", "T_max", "total_steps", "total_iters",
                               "max_steps", "num_steps", "t_initial", "warmup_t", "warmup_steps", "step_size",
                               "T_0", "num_cycles_steps"})


def micro_batch_horizon(model: TrainingModel, loop: TrainingLoop, ref: CallRef) -> bool:
    """The scheduler stepped at `ref` was built on the micro-batch clock: every length argument of its
    construction (`num_warmup_steps=warmup * K, num_training_steps=total * K`, positional ones after
    the optimizer too; a warmup of 0 aside) is multiplied by the loop's K or counts the loop's
    micro-batches (`epochs * len(train_loader)`, K nowhere in it). Stepped every micro-batch, it ends
    on time. A composed schedule (`SequentialLR(opt, schedulers=[warmup, main], milestones=[n])`,
    `ChainedScheduler([...])`) is on that clock when its milestones and every schedule it runs are.
    A scheduler handed in as a parameter is read where every caller builds it (this file or
    another): its lengths count the micro-batches of the loader the same call hands in for the one
    the loop iterates (`len(train_loader)`, no division on the way)."""
    k = _k_names(model.ctx, loop)
    constructions = [v for v in _scheduler_values(model, ref) if isinstance(v, cst.Call)]
    loaders = _loop_loaders(model.ctx, loop)
    if not constructions:  # (a product of counts with no division: K, whatever its name, is not in it)
        return _passed_on_micro_batch_clock(model, loop, ref, k, loaders)
    if not k:
        return False
    return all(_built_on_micro_batches(call, k, loaders, ref.scope) for call in constructions)


def _built_on_micro_batches(call: cst.Call, k: set[str], loaders: set[str], scope: Scope,
                            undivided: bool = False, depth: int = 0) -> bool:
    """Every length of the scheduler construction `call` (and of the schedules a composed one runs)
    is times K or counts the micro-batches of `loaders` (`undivided`: with no division on the way)."""
    lengths = [a.value for a in call.args if a.keyword is not None and a.keyword.value in _HORIZON_KEYWORDS]
    inner: list[cst.BaseExpression] = []
    for arg in call.args:
        value = arg.value
        if isinstance(value, (cst.List, cst.Tuple)) and (arg.keyword is None or arg.keyword.value in _LIST_KEYWORDS):
            elements = [e.value for e in value.elements]
            if arg.keyword is not None and arg.keyword.value == "milestones":
                lengths += elements  # the steps at which a composed schedule switches
            else:
                inner += elements  # `schedulers=[warmup, main]`: the schedules it runs
    lengths += [a.value for a in positional_args(call)[1:]
                if not isinstance(a.value, (cst.Integer, cst.Float, cst.SimpleString, cst.Lambda, cst.List,
                                            cst.Tuple))]
    lengths = [e for e in lengths if not (isinstance(e, cst.Integer) and e.value == "0")]  # no warmup
    # a warmup given as a stated count (`num_warmup_steps=args.warmup_steps`, `=500`) says nothing
    # of which clock it counts: the horizon beside it does
    warmups = {id(a.value) for a in call.args if a.keyword is not None and a.keyword.value in _WARMUP_KEYWORDS
               and _stated_count(a.value, scope)}
    if inner:
        if depth > 1:
            return False
        for element in inner:
            if not isinstance(element, cst.Name):
                return False
            built = [b.value for b in scope.lookup(element.value)]
            if not built or not all(isinstance(v, cst.Call) and
                                    _built_on_micro_batches(v, k, loaders, scope, undivided, depth + 1)
                                    for v in built):
                return False
    elif not any(id(e) not in warmups for e in lengths):
        return False
    return all(id(e) in warmups or
               not undivided and _times_k(e, k, scope) or
               _counts_micro_batches(e, k, loaders, scope) and (not undivided or _undivided(e, scope))
               for e in lengths)


# the list arguments of a composed schedule: its schedules, and the steps at which it moves on
_LIST_KEYWORDS = frozenset({"schedulers", "milestones"})


def _undivided(expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
    """`expr` is a product or sum of counts (`epochs * len(loader)`), through the one value of each
    name it reads: no division, rounding or other call on the way, which a K of another name could
    have divided it by."""
    if isinstance(expr, cst.BinaryOperation):
        return isinstance(expr.operator, (cst.Multiply, cst.Add)) and \
            _undivided(expr.left, scope, depth) and _undivided(expr.right, scope, depth)
    if isinstance(expr, cst.Call):  # `len(loader)`, `int(n)`
        return isinstance(expr.func, cst.Name) and (expr.func.value == "len" or expr.func.value == "int" and
                                                    len(expr.args) == 1 and _undivided(expr.args[0].value, scope, depth))
    if isinstance(expr, cst.Name):
        values = [b.value for b in scope.lookup(expr.value) if b.kind == "assign" and b.value is not None]
        return not values or len(values) == 1 and depth < 2 and _undivided(values[0], scope, depth + 1)
    return isinstance(expr, (cst.Attribute, cst.Integer))


def _passed_on_micro_batch_clock(model: TrainingModel, loop: TrainingLoop, ref: CallRef, k: set[str],
                                 loaders: set[str]) -> bool:
    """The scheduler stepped at `ref` is a parameter of the loop's function, and so is the loader the
    loop iterates; every call of the function (in this file and the project's others, one at
    least) builds the scheduler it hands in on the micro-batches of the loader it hands in."""
    receiver = ref.node.func.value if isinstance(ref.node.func, cst.Attribute) else None
    if ref.via or not isinstance(receiver, cst.Name) or len(loaders) != 1:
        return False
    loader = next(iter(loaders))
    scope = ref.scope
    function = next((f for f in model.index.functions if f.scope is scope), None) if scope.kind == "function" else None
    if function is None or function.class_name is not None:
        return False
    for name in (receiver.value, loader):
        bindings = scope.lookup(name)
        if len(bindings) != 1 or bindings[0].kind != "param":
            return False
    sites = [(model.index, site) for site in model.index.callers(function)]
    linker = model.index.linker
    if linker is not None:
        others = linker.caller_sites(function.name)
        if others is None:
            return False
        sites += [(index, site) for _, index, site in others]
    if not sites:
        return False
    params = [p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params)]
    for index, site in sites:
        if any(a.star for a in site.node.args):
            return False
        passed_scheduler = _passed(site.node, params, receiver.value)
        passed_loader = _passed(site.node, params, loader)
        if not isinstance(passed_scheduler, cst.Name) or not isinstance(passed_loader, (cst.Name, cst.Attribute)):
            return False
        built = [b.value for b in site.scope.lookup(passed_scheduler.value)]
        code = index.module.code_for_node(passed_loader)
        if not built or not all(isinstance(v, cst.Call) and
                                _built_on_micro_batches(v, k, {code}, site.scope, undivided=True) for v in built):
            return False
    return True


def _passed(call: cst.Call, params: list[str], param: str) -> cst.BaseExpression | None:
    arg = keyword_arg(call, param)
    if arg is not None:
        return arg.value
    positional = positional_args(call)
    position = params.index(param) if param in params else -1
    return positional[position].value if 0 <= position < len(positional) else None


_WARMUP_KEYWORDS = frozenset({"num_warmup_steps", "warmup_t", "warmup_steps"})


def _stated_count(expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
    """A number the code takes as given rather than computes: a literal, an option or config field
    (`args.warmup_steps`, `cfg.train.warmup`), or a name bound once to one of these."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.Attribute):  # not `self.<attr>`, which the class may compute
        head = expr.value
        while isinstance(head, cst.Attribute):
            head = head.value
        return isinstance(head, cst.Name) and head.value != "self"
    if isinstance(expr, cst.Name) and depth < 2:
        bindings = scope.lookup(expr.value)
        return len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None and \
            _stated_count(bindings[0].value, scope, depth + 1)
    return False


def _loop_loaders(ctx, loop: TrainingLoop) -> set[str]:
    """The loader a `for` loop iterates (`enumerate(tqdm(train_loader))` -> `train_loader`)."""
    node = loop.node
    if not isinstance(node, cst.For):
        return set()
    expr = node.iter
    while isinstance(expr, cst.Call) and positional_args(expr):
        expr = positional_args(expr)[0].value
    text = ctx.code_for(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    return {text} if text else set()


def _counts_micro_batches(expr: cst.BaseExpression, k: set[str], loaders: set[str], scope: Scope,
                          depth: int = 0) -> bool:
    """`epochs * len(train_loader)`: a length counted in the loop's micro-batches, with K nowhere in it
    (`math.ceil(len(loader) / K)` counts updates)."""
    if not loaders or depth > 2:
        return False
    found = False
    for node in walk(expr):
        if isinstance(node, (cst.Name, cst.Attribute)) and _factor_name(node) in k:
            return False
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len" and \
                node.args and dotted_name(node.args[0].value) in loaders:
            found = True
        elif isinstance(node, cst.Name) and not found:
            values = [b.value for b in scope.lookup(node.value) if b.kind == "assign" and b.value is not None]
            if len(values) == 1 and any(isinstance(n, (cst.Name, cst.Attribute)) and _factor_name(n) in k
                                        for n in walk(values[0])):
                return False
            if len(values) == 1 and _counts_micro_batches(values[0], k, loaders, scope, depth + 1):
                found = True
    return found


def _scheduler_values(model: TrainingModel, ref: CallRef) -> list[cst.BaseExpression]:
    receiver = ref.node.func.value if isinstance(ref.node.func, cst.Attribute) else None
    if isinstance(receiver, cst.Name):
        return [b.value for b in ref.scope.lookup(receiver.value) if b.value is not None]
    if isinstance(receiver, cst.Attribute) and _is_self(receiver.value):
        return model.index.self_attribute_values(receiver.attr.value, ref.scope)
    return []


def _k_names(ctx, loop: TrainingLoop) -> set[str]:
    """How K is written: its code and its last name (`args.grad_accum`, `grad_accum`)."""
    k = loop.k
    names = {"gradient_accumulation_steps"} if loop.guard is not None and loop.guard.kind == "accelerate" else set()
    if k is None:
        return names
    names.add(ctx.code_for(k))
    last = k.attr.value if isinstance(k, cst.Attribute) else k.value if isinstance(k, cst.Name) else None
    if last:
        names.add(last)
    return names


def _times_k(expr: cst.BaseExpression, k: set[str], scope: Scope, depth: int = 0) -> bool:
    """`expr` is a product with K as a factor, directly or through a variable assigned one."""
    if isinstance(expr, cst.Name) and depth < 2:
        values = [b.value for b in scope.lookup(expr.value) if b.kind == "assign" and b.value is not None]
        return bool(values) and all(_times_k(v, k, scope, depth + 1) for v in values)
    return any(_factor_name(f) in k for f in _factors(expr))


def _factors(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The factors of a product (`a * b * c`); empty when `expr` is not one."""
    if not (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply)):
        return []
    found = []
    for side in (expr.left, expr.right):
        found += _factors(side) or [side]
    return found


def _factor_name(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


def _loader_name(ctx, expr: cst.BaseExpression) -> str:
    """`enumerate(tqdm(train_loader))` -> `train_loader`: the name a message should show."""
    while isinstance(expr, cst.Call) and positional_args(expr) and not \
            (isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "prepare"):
        name = expr.func.value if isinstance(expr.func, cst.Name) else ""
        if name == "DataLoader" or name.endswith("Loader"):
            break
        expr = positional_args(expr)[0].value
    return ctx.code_for(expr)
