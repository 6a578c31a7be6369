"""Which framework classes a class of the checked file derives from: its bases as resolved import
paths, through the project's own classes in between (`class HyperParallelTrainer(CustomSeq2SeqTrainer)`
in one file, `class CustomSeq2SeqTrainer(Seq2SeqTrainer)` in another: a `transformers.Seq2SeqTrainer`).
The framework models (frameworks.py) say what a framework class's hooks mean; this says which
classes of the project are such classes. Never imports the checked code."""

from __future__ import annotations

import libcst as cst

from trainlint.model import frameworks
from trainlint.model.index import FileIndex
from trainlint.model.summaries import ClassSummary

_MAX_DEPTH = 4


def ancestors(index: FileIndex, class_node: cst.ClassDef) -> frozenset[str]:
    """The resolved names of the class's bases and of theirs, as far as the project's own classes
    go (a same-file class followed through its node, one of another project file through its
    summary, whose bases are resolved there)."""
    found: set[str] = set()
    _collect(index, class_node, found, 0, set())
    return frozenset(found)


def _collect(index: FileIndex, node: cst.ClassDef, found: set[str], depth: int, seen: set) -> None:
    if depth > _MAX_DEPTH or id(node) in seen:
        return
    seen.add(id(node))
    scope = index.module_scope
    for base in node.bases:
        qualname = index.resolve(base.value, scope)
        if qualname:
            found.add(qualname)
        if isinstance(base.value, cst.Name) and base.value.value in index.classes:
            _collect(index, index.classes[base.value.value], found, depth + 1, seen)
            continue
        summary = index.summary_of(base.value, scope)
        if isinstance(summary, ClassSummary):
            found.update(summary.bases)  # resolved in the file that defines it


def hook_step(index: FileIndex, function) -> str | None:
    """The step kind of the framework hook that the method `function` (a FunctionInfo) overrides:
    "eval" for `validation_step` of a class deriving from `pytorch_lightning.LightningModule` (the
    framework runs it with grad recording off), "train" for its `training_step`; None for a
    function of no class, or of a class that derives from no framework class declaring a hook of
    that name (a plain `class Net:` with a `validation_step` method is called by the project)."""
    if function is None or function.class_name is None:
        return None
    klass = index.classes.get(function.class_name)
    if klass is None:
        return None
    hooks = [entry for entry in frameworks.hook_steps() if entry[2] == function.name]
    if not hooks:
        return None
    for name in sorted(ancestors(index, klass)):
        root, last = name.split(".", 1)[0], name.rsplit(".", 1)[-1]
        for owner, packages, _, step in hooks:
            if last == owner and root in packages:
                return step
    return None
