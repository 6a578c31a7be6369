"""The checkpoint model's part that judges whether a save's path is fixed or unique (TL402)."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model.checkpoint_base import Save, string_value
from trainlint.model.index import Scope, dotted_name, walk


# Pieces of a path that change from one save to the next (a loop index over models or ranks does not).
UNIQUE_PARTS = re.compile(r"step|epoch|iter|time|stamp|date|uuid|now|version", re.I)


class SavePaths:
    """Whether a save's destination is fixed (overwritten on every save) or unique per save (TL402).

    A part of `CheckpointModel` (checkpoints.py), whose `__init__` sets the attributes used here.
    """

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
            # once per scope, name and depth: a script's module-level `path` can have thousands of
            # bindings, and every save that writes it asks
            key = (id(scope), expr.value, depth)
            if key in self._name_reuse:
                return self._name_reuse[key]
            bindings = scope.lookup(expr.value)
            verdicts = []
            for binding in bindings:
                if binding.kind == "import":
                    verdicts.append("fixed")  # a constant such as WEIGHTS_NAME
                elif binding.kind == "assign" and binding.value is not None:
                    verdicts.append(self._reuse(binding.value, scope, depth + 1))
                else:
                    verdicts.append(None)  # a parameter, a loop variable: not known here
            verdict = self._name_reuse[key] = self._combine(verdicts) if bindings else None
            return verdict
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
