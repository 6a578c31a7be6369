"""The checkpoint model's part that judges whether a save is atomic (TL402)."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model.checkpoint_base import Save
from trainlint.model.index import FunctionInfo, Scope, dotted_name, positional_args, walk


RENAME_FUNCTIONS = ("os.replace", "os.rename", "shutil.move")
BYTES_BUFFERS = ("io.BytesIO", "_io.BytesIO")
TEMPFILE_PREFIX = "tempfile."
TEMP_WORDS = re.compile(r"tmp|temp|partial|incomplete|\.part\b|staging", re.I)


def _forwards_arguments(call: cst.Call) -> bool:
    """`torch.save(*args, **kwargs)`: every argument comes from the caller."""
    return bool(call.args) and call.args[0].star == "*"


class AtomicSaves:
    """Whether a save is atomic: into a `BytesIO`, into a temporary path or file, or to a path that
    the same function (or a same-file helper it calls) later moves onto the final path; a save whose
    destination is a parameter is judged at its same-file callers (TL402).

    A part of `CheckpointModel` (checkpoints.py), whose `__init__` sets the attributes used here.
    """

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

    def _unpacked_from_temporary(self, name: str, scope: Scope, depth: int) -> bool:
        """`fd, tmp = tempfile.mkstemp()` then `os.fdopen(fd, "wb")`: the name came from a temp file
        (once per scope, name and depth: a module-level name can have thousands of bindings)."""
        key = (id(scope), name, depth)
        known = self._temporary_names.get(key)
        if known is None:
            known = False
            for binding in scope.lookup(name):
                source = binding.node.value if isinstance(binding.node, cst.Assign) else None
                if source is not None and binding.value is None and \
                        self._is_temporary(None, source, scope, depth + 1):
                    known = True
                    break
            self._temporary_names[key] = known
        return known

    def _is_temporary(self, dest, value, scope: Scope, depth: int = 0) -> bool:
        for expr in (dest, value):
            if expr is None:
                continue
            for node in walk(expr):
                if isinstance(node, cst.Name) and depth < 2 and node is not dest \
                        and self._unpacked_from_temporary(node.value, scope, depth):
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
            for node in self.index.scope_nodes(body):
                if type(node) is cst.Call:
                    moved = self._moved_source(node, scope)
                    if moved is not None:
                        text = self.text(moved)
                        moves[text] = max(moves.get(text, -1), self.order.get(node, -1))
        return moves

    def renamed_to(self, save: Save) -> list[cst.BaseExpression]:
        """Where a later rename of the same function moves the file this save writes
        (`torch.save(state, tmp); os.replace(tmp, path)` -> `path`): the final path an atomic save
        commits, which a resume then reads back (`torch.load(path)`)."""
        if save.dest is None:
            return []
        body = self.index.function_at(save.node)
        body_node = body.node if body is not None else self.index.module
        written, at = self.text(save.dest), self.order.get(save.node, -1)
        found = []
        for node in self.index.scope_nodes(body_node):
            if type(node) is not cst.Call or self.order.get(node, -1) <= at:
                continue
            moved = self._moved_source(node, save.scope)
            if moved is None or self.text(moved) != written:
                continue
            args = positional_args(node)
            if self.index.resolve(node.func, save.scope) in RENAME_FUNCTIONS:
                target = args[1].value if len(args) > 1 else None
            else:  # Path.replace(target) / Path.rename(target)
                target = args[0].value if args else None
            if target is not None:
                found.append(target)
        return found

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
        for node in self.index.scope_nodes(function.node.body):
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
