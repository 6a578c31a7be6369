"""The checkpoint model's part that tells checkpoints from data artefacts (which saves count)."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model.checkpoint_base import LOAD_FUNCTIONS, ROLE_KIND, Save, path_words, string_value
from trainlint.model.index import Scope, positional_args, walk
from trainlint.model.roles import MODULE_ROLES


CHECKPOINT_PATH = re.compile(r"ckpt|checkpoint|last|latest|best|resume|snapshot|weights|model|"
                             r"\.pth\b|\.ckpt\b|\.tar\b", re.I)
DATA_WORDS = re.compile(r"embed|feature|cache|dataset|(^|[^a-z])data([^a-z]|$)|token|vocab|index|stats\b|statistic|metric|result|"
                        r"pred|output|logit|activation|sample|batch|mask|label|target|input|buffer|"
                        r"grad|hidden|attention|prompt|image|audio|latent", re.I)

# Names of objects that are checkpoints whatever their path.
CHECKPOINT_OBJECT = re.compile(r"(^|[._])(\w*ckpt\w*|\w*checkpoint\w*|state_dict|save_state|train(ing)?_state|"
                               r"full_state|client_state)$", re.I)

# Objects that are configuration, not training state (`torch.save(args, "training_args.bin")`).
CONFIG_OBJECT = re.compile(r"(^|[._])(args|config|cfg|conf|hparams|hyper_?params|options|opts|settings|"
                           r"training_args|arguments)$", re.I)


class SaveKinds:
    """Which saves are checkpoints: what kinds of state a saved object holds, the path text of a
    save, and the line between a checkpoint and a data artefact (see checkpoints.py's docstring).

    A part of `CheckpointModel` (checkpoints.py), whose `__init__` sets the attributes used here.
    """

    def object_kinds(self, save: Save) -> set[str] | None:
        """Kinds of state the saved object holds; None when we cannot see into it (once per save:
        every save's neighbours ask about it)."""
        if id(save) not in self._kinds:
            self._kinds[id(save)] = self._object_kinds(save)
        kinds = self._kinds[id(save)]
        return set(kinds) if kinds is not None else None

    def _object_kinds(self, save: Save) -> set[str] | None:
        obj = save.obj
        if obj is None:
            return None
        content = self.saved_dict(obj, save.scope)
        if content is not None:
            kinds = self.holds(content)
            return kinds if kinds or content.complete else None
        value = self.value_of(obj, save.scope)
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value == "state_dict":
            return self._state_dict_kinds(value, save.scope)
        if isinstance(value, cst.Call) and not value.args:
            # `self.get_model_state()`: a method of this file that returns a `state_dict()`
            returned = self._returned_state_dicts(value, save.scope)
            if returned:
                return set().union(*(self._state_dict_kinds(call, scope) for call, scope in returned))
        if isinstance(value, (cst.Name, cst.Attribute)):
            role = self.state_role(value, save.scope)
            if role in MODULE_ROLES and isinstance(obj, cst.Name) and self.is_param(obj, save.scope):
                return None
            if role in MODULE_ROLES:
                return {"model"}
            if role in ROLE_KIND:
                return {ROLE_KIND[role]}
        return None

    def _state_dict_kinds(self, value: cst.Call, scope: Scope) -> set[str]:
        """What `X.state_dict()` holds, by what `X` is."""
        receiver = value.func.value
        kinds = self.value_kinds(receiver, scope)
        if kinds:
            return kinds
        role = self.state_role(receiver, scope)
        if role is not None or DATA_WORDS.search(self.text(receiver)) or \
                re.search(r"loader|sampler|dataset|callback|tokenizer", self.text(receiver), re.I):
            return {"data"}  # a data loader's or sampler's state: part of a checkpoint, not a model
        return {"model"}

    def _returned_state_dicts(self, call: cst.Call, scope: Scope) -> list[tuple[cst.Call, Scope]]:
        """The `X.state_dict()` calls a same-file function returns, when every return is one."""
        target = self.index.callee(call, scope)
        if target is None:
            return []
        found = []
        for node in walk(target.node.body):
            if isinstance(node, cst.Return) and self.index.function_at(node) is target:
                value = node.value
                if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                        and value.func.attr.value == "state_dict" and not value.args):
                    return []
                found.append((value, target.scope))
        return found

    def path_text(self, save: Save) -> str:
        """Source text of where a save goes, through single assignments and `open(...)`."""
        dest = save.dest
        if dest is None:
            return ""
        parts = [self.text(dest)]
        value = self.value_of(dest, save.scope, at=save.node)
        if isinstance(value, cst.Name):
            parts += [self.text(b.value) for b in save.scope.lookup(value.value)
                      if b.kind == "param" and b.value is not None]
        if value is not dest and value is not None:
            parts.append(self.text(value))
        if isinstance(value, cst.FormattedString):  # `f"{ckpt}.tmp"`: the path `ckpt` holds
            for part in value.parts:
                if isinstance(part, cst.FormattedStringExpression) and isinstance(part.expression, cst.Name):
                    named = self.value_of(part.expression, save.scope, at=save.node)
                    if named is not part.expression and named is not None:
                        parts.append(self.text(named))
        opened = self.opened_path(value, save.scope)
        if opened is not None:
            parts.append(self.text(opened))
            resolved = self.value_of(opened, save.scope)
            if resolved is not opened and resolved is not None:
                parts.append(self.text(resolved))
        return " ".join(parts)

    def opened_path(self, value: cst.BaseExpression | None, scope: Scope) -> cst.BaseExpression | None:
        """For `open(p, "wb")` (or `p.open("wb")`), the path `p`."""
        if isinstance(value, cst.Call):
            if self.index.resolve(value.func, scope) in ("open", "io.open", "builtins.open"):
                args = positional_args(value)
                return args[0].value if args else None
            if isinstance(value.func, cst.Attribute) and value.func.attr.value == "open":
                args = positional_args(value)
                if args and string_value(args[0].value) not in ("wb", "w+b", "ab", "xb", "rb", "r+b"):
                    return args[0].value  # fs.open(path, "wb"), gcsfs/fsspec style
                return value.func.value  # Path.open("wb")
        return None

    def is_checkpoint(self, save: Save) -> bool:
        kinds = self.object_kinds(save)
        if kinds:
            return bool(kinds & {"model", "optimizer", "scheduler", "scaler", "rng"}) or \
                ("step" in kinds and self.saved_dict(save.obj, save.scope) is not None)
        if kinds is not None:  # a dict we can read, holding nothing that is training state
            return False
        if save.obj is None or self.is_param(save.obj, save.scope):
            for obj, dest in self.project_callers(save):
                if obj and CONFIG_OBJECT.search(obj) or dest and DATA_WORDS.search(path_words(dest)):
                    continue
                if obj and CHECKPOINT_OBJECT.search(obj) or dest and CHECKPOINT_PATH.search(dest):
                    return True  # `save_on_master(checkpoint, ".../checkpoint.pth")` in main.py
        obj_text = self.text(save.obj)
        if CONFIG_OBJECT.search(obj_text) or self._is_data_object(save):
            return False
        path = self.path_text(save)
        if DATA_WORDS.search(path_words(path)):
            return False  # "embeddings.pt", "predictions.pt": the file name says data
        if CHECKPOINT_OBJECT.search(obj_text):
            return True  # `torch.save(checkpoint, file)`
        function = save.site.function
        if function is not None and re.search(r"checkpoint|ckpt", function.name, re.I):
            return True  # `def save_checkpoint(state, filename)`: the helper says what it writes
        if DATA_WORDS.search(obj_text):
            return False
        return bool(path) and bool(CHECKPOINT_PATH.search(path))

    def _is_data_object(self, save: Save) -> bool:
        value = self.value_of(save.obj, save.scope)
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp, cst.Subscript, cst.SimpleString,
                              cst.Integer, cst.Float, cst.ConcatenatedString, cst.FormattedString)):
            return True
        if isinstance(value, cst.Call):
            name = self.index.resolve(value.func, save.scope) or ""
            if name.startswith("torch.") and not name.startswith(("torch.nn", "torch.optim", "torch.jit")) \
                    and name not in LOAD_FUNCTIONS:
                return True  # a tensor factory; what `torch.load` returns is whatever was saved
        return False
