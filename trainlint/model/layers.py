"""Whether a module's mode can change what it computes: what `train()`/`eval()` would switch.

Only dropout, batch statistics (BatchNorm, InstanceNorm with running stats), recurrent/attention
layers with a dropout argument, RReLU and code that reads `self.training` behave differently in
train and eval mode. A loss criterion (`nn.CrossEntropyLoss()`, a project loss class computing on
its inputs), a GroupNorm/LayerNorm-only network or a plain `nn.Linear` computes the same in both,
so a "train mode" evaluation of it, or an `eval()` left on it, changes nothing.

`verdict(index, call, scope)` judges the call that built a module:

- FREE: known to compute the same in both modes (a torch.nn loss or mode-free layer, an
  `nn.Module` subclass of this file or another project file whose layers are all mode-free and
  that never reads its mode, or a project factory function whose every return builds such a module);
- DEPENDENT: known to hold mode-dependent layers (torch.nn Dropout/BatchNorm/RNN/Transformer...,
  torchvision/timm/transformers/segmentation_models_pytorch models, a same-file class holding one);
- LIBRARY: a class from a package whose source is not in the project and whose family is not known
  to hold such layers (`diffusers.UNet2DModel`): nothing says its mode matters;
- None: not known (a factory, a parameter, a class whose submodules come from unknown calls).
"""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model import frameworks
from trainlint.model.index import FileIndex, Scope, dotted_name, walk

FREE, DEPENDENT, LIBRARY = "free", "dependent", "library"

# torch.nn classes whose forward depends on `self.training`
_MODE_DEPENDENT_NN = re.compile(r"Dropout|BatchNorm|InstanceNorm|RNN|LSTM|GRU|Transformer|MultiheadAttention|RReLU")
_LOSS_NAME = re.compile(r"(Loss|Criterion|CrossEntropy)$")
_NN_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})
_NN_UNKNOWN = frozenset({"Module", "DataParallel"})
# packages whose models are known to hold dropout or batch norm
# (the frameworks with model base classes, transformers and lightning, come from trainlint/frameworks/)
_DEPENDENT_PACKAGES = ("torchvision.models", "timm", "segmentation_models_pytorch", "torch.hub",
                       *frameworks.model_packages())
_NN_BASES = re.compile(r"^(torch\.)?nn\.(Module|modules\.loss\._Loss|modules\.loss\._WeightedLoss)$"
                       r"|^torch\.nn\.(Module|modules\.module\.Module)$|^(Module|_Loss|_WeightedLoss)$")
_SAFE_CALL_ROOTS = ("torch", "math", "numpy", "np", "F", "functools", "itertools", "collections")
_BUILTINS = frozenset({"float", "int", "bool", "str", "list", "tuple", "dict", "set", "len", "range", "max",
                       "min", "abs", "sum", "super", "getattr", "isinstance", "zip", "enumerate", "sorted"})
_MAX_DEPTH = 8  # a class of containers of classes of layers: each level counts
_WEIGHT_NORM = frozenset({"torch.nn.utils.weight_norm", "torch.nn.utils.parametrizations.weight_norm"})
# methods of a module that return that same module
_SAME_MODULE_METHODS = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train",
                                  "requires_grad_", "apply", "type", "share_memory"})
_SPECTRAL_NORM = frozenset({"torch.nn.utils.spectral_norm", "torch.nn.utils.parametrizations.spectral_norm"})


def verdict(index: FileIndex, call: cst.Call, scope: Scope, depth: int = 0) -> str | None:
    """How the module built by `call` depends on its mode (see the module docstring)."""
    if depth > _MAX_DEPTH:
        return None
    func = call.func
    # `AutoencoderKL.from_pretrained(...)`, `Model.from_config(cfg)`: the class's own constructor
    if isinstance(func, cst.Attribute) and func.attr.value.startswith("from_") and \
            (dotted_name(func.value) or "").rsplit(".", 1)[-1][:1].isupper():
        func = func.value
    name = index.resolve(func, scope)
    if isinstance(func, cst.Name) and func.value in index.classes and _bound_to_class(func.value, scope):
        return class_verdict(index, func.value, depth + 1)
    if isinstance(func, cst.Name) and _bound_to_def(func.value, scope):
        return factory_verdict(index, func.value, depth + 1)  # a factory of this file
    if not name:
        return None
    if not name.startswith("torch.") and (isinstance(func, (cst.Name, cst.Attribute))):
        summary = index.summary_of(func, scope, ("Module",))  # a class of another project file
        if summary is not None and not hasattr(summary, "mode_dependence"):
            return _project_factory_verdict(index, name, depth + 1)  # a factory of another project file
        if summary is not None:
            return getattr(summary, "mode_dependence", None)
    if name in _WEIGHT_NORM:  # the module it is given, its weight reparametrized the same in both modes
        args = [a.value for a in call.args if a.keyword is None and not a.star]
        return verdict(index, args[0], scope, depth + 1) if args and isinstance(args[0], cst.Call) else None
    if name in _SPECTRAL_NORM:
        return DEPENDENT  # power iteration runs only in train mode
    if name.startswith("torch.nn."):
        last = name.rsplit(".", 1)[-1]
        if last in _NN_UNKNOWN or name.startswith(("torch.nn.parallel", "torch.nn.functional")):
            return None
        if last in _NN_CONTAINERS:
            return _container_verdict(index, call, scope, depth)
        if last[:1].isupper():
            return DEPENDENT if _MODE_DEPENDENT_NN.search(last) else FREE
        return None
    last = name.rsplit(".", 1)[-1]
    if _LOSS_NAME.search(last):
        return FREE  # a library's loss criterion (`timm.loss.LabelSmoothingCrossEntropy`)
    if any(name == package or name.startswith(package + ".") for package in _DEPENDENT_PACKAGES):
        return DEPENDENT
    if last[:1].isupper() and _from_library(index, func, scope):
        return LIBRARY
    return None


def class_verdict(index: FileIndex, class_name: str, depth: int = 0) -> str | None:
    """A same-file class: FREE when it is an `nn.Module` (or loss) subclass whose bases are
    mode-free, that never reads or switches its mode, and whose every built submodule is mode-free."""
    node = index.classes.get(class_name)
    if node is None or depth > _MAX_DEPTH:
        return None
    scope = index.scope_of_node.get(node) or index.module_scope
    outer = scope.parent or index.module_scope
    module_like = False
    unknown = False  # a part not known: the class is not FREE, but a DEPENDENT part still decides
    for base in node.bases:
        text = dotted_name(base.value) or ""
        resolved = index.resolve(base.value, outer) or text
        if text in index.classes and text != class_name:
            inner = class_verdict(index, text, depth + 1)
            if inner == DEPENDENT:
                return inner
            unknown = unknown or inner != FREE
            module_like = True
        elif _NN_BASES.search(resolved) or (resolved.startswith("torch.nn.") and resolved.endswith("Loss")):
            module_like = True
        else:
            return None
    if not module_like:
        return None
    for inner in walk(node.body):
        if isinstance(inner, cst.Attribute) and inner.attr.value == "training":
            return DEPENDENT  # it reads its own mode
        if isinstance(inner, cst.Call):
            func = inner.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("train", "eval", "add_module",
                                                                        "register_module") and \
                    not _is_super(func.value):  # an `eval()` override calling `super().eval()`
                return None
    for values in index.class_attributes.get(class_name, {}).values():
        for value in values:
            result = _submodule_verdict(index, value, index.scope_at(value), depth)
            if result == DEPENDENT:
                return result
            unknown = unknown or result != FREE
    return None if unknown else FREE


def _submodule_verdict(index: FileIndex, value: cst.BaseExpression, scope: Scope, depth: int) -> str | None:
    """What a `self.<attr> = value` adds to its class: FREE unless it builds a module that is not."""
    unknown = False
    for inner in walk(value):
        if not isinstance(inner, cst.Call):
            continue
        result = verdict(index, inner, scope, depth + 1)
        if result == DEPENDENT:
            return DEPENDENT
        if result == LIBRARY or (result is None and not _harmless_call(index, inner, scope)):
            unknown = True  # not FREE; a later part may still prove it DEPENDENT
    return None if unknown else FREE


def _harmless_call(index: FileIndex, call: cst.Call, scope: Scope) -> bool:
    """A call that does not build a module: a torch/math function, a builtin, a method of a value."""
    func = call.func
    if isinstance(func, cst.Name):
        if func.value in _BUILTINS:
            return True
        if func.value in index.classes and _bound_to_class(func.value, scope):
            return class_verdict(index, func.value) == FREE or not _is_module_class(index, func.value)
        return False
    name = index.resolve(func, scope) or ""
    if name.split(".", 1)[0] in _SAFE_CALL_ROOTS and not name.startswith("torch.nn.") or name.startswith(
            ("torch.nn.functional", "torch.nn.init", "torch.nn.Parameter")):
        return True
    # `weight.float()`, `torch.tensor(w).view(-1)`: a method of a value, not a constructor
    return isinstance(func, cst.Attribute) and not name


def _container_verdict(index: FileIndex, call: cst.Call, scope: Scope, depth: int) -> str | None:
    """`nn.Sequential(conv, nn.GroupNorm(...))`, `nn.ModuleList([Block(c) for _ in range(n)])`: FREE
    when every module built in its arguments is, None when an argument is a module built elsewhere."""
    # the first part that is not FREE decides (LIBRARY or not known), unless a part is DEPENDENT
    modules, first = 0, FREE
    for arg in call.args:
        calls = [n for n in walk(arg.value) if isinstance(n, cst.Call)]
        if not calls:
            first = None if first == FREE else first  # `nn.Sequential(*layers)`: built somewhere else
            continue
        for inner in calls:
            result = verdict(index, inner, scope, depth + 1)
            if result is None and _harmless_call(index, inner, scope):
                continue
            if result == DEPENDENT:
                return result
            if result != FREE:
                first = result if first == FREE else first
                continue
            modules += 1
    if first != FREE:
        return first
    return FREE if modules or not call.args else None


def _is_super(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "super"


def _bound_to_class(name: str, scope: Scope) -> bool:
    bindings = scope.lookup(name)
    return bool(bindings) and all(b.kind == "class" for b in bindings)


def _is_module_class(index: FileIndex, name: str) -> bool:
    node = index.classes.get(name)
    return node is not None and any(
        re.search(r"(^|\.)(Module|Loss|_Loss|Sequential)$", dotted_name(b.value) or "") for b in node.bases)


def _from_library(index: FileIndex, func: cst.BaseExpression, scope: Scope) -> bool:
    """The callee is imported from a package that is not part of the project."""
    head = func
    while isinstance(head, cst.Attribute):
        head = head.value
    if not isinstance(head, cst.Name):
        return False
    bindings = scope.lookup(head.value)
    if not bindings or not all(b.kind == "import" for b in bindings):
        return False
    qualname = bindings[-1].qualname or ""
    if qualname.startswith(".") or not qualname:
        return False
    linker = index.linker
    project = getattr(linker, "project", None)
    if project is not None and project.find_module(qualname, linker.path) is not None:
        return False
    return True


def factory_verdict(index: FileIndex, function_name: str, depth: int = 0) -> str | None:
    """A module-level function of this file used as a module factory (`build_model(cfg)`): the
    verdicts of what its returns build, combined (DEPENDENT when one return may build a
    mode-dependent module, FREE when every return builds a mode-free one). None when a return
    is not a construction the function shows (a parameter, an item, a call of something unknown)."""
    if depth > _MAX_DEPTH:
        return None
    functions = [f for f in index.functions_named(function_name)
                 if f.class_name is None and f.scope.parent is index.module_scope]
    if len(functions) != 1:
        return None
    function = functions[0]
    returns = [n for n in index.scope_nodes(function.node) if type(n) is cst.Return]
    if not returns or any(r.value is None for r in returns):
        return None
    verdicts = set()
    for ret in returns:
        if isinstance(ret.value, cst.Tuple):
            # `return model, other`: whichever element a caller takes holds dropout or batch norm
            # when every element does; anything else is not known here
            parts = {_element_verdict(index, element.value, function.scope, depth) for element in ret.value.elements}
            if parts != {DEPENDENT}:
                return None
            verdicts.add(DEPENDENT)
            continue
        for call, call_scope in _built_by(index, ret.value, function.scope):
            if call is None:
                return None
            verdicts.add(verdict(index, call, call_scope, depth + 1))
    if DEPENDENT in verdicts:
        return DEPENDENT
    return FREE if verdicts == {FREE} else None


def _element_verdict(index: FileIndex, value: cst.BaseExpression, scope: Scope, depth: int) -> str | None:
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and \
            value.func.attr.value in _SAME_MODULE_METHODS:  # `tuned.to("cuda")`: the module `tuned` is
        value = value.func.value
    built = _built_by(index, value, scope)
    if not built or any(call is None for call, _ in built):
        return None
    found = {verdict(index, call, call_scope, depth + 1) for call, call_scope in built}
    return DEPENDENT if found == {DEPENDENT} else None


def _built_by(index: FileIndex, value: cst.BaseExpression, scope: Scope):
    """The constructions a returned value comes from: the call itself (through `.to(device)`-like
    methods of the module it builds), or the one call a local name is bound to; (None, None)
    when it is anything else."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and \
            value.func.attr.value in _SAME_MODULE_METHODS and isinstance(value.func.value, cst.Call):
        value = value.func.value
    if isinstance(value, cst.Call):
        return [(value, scope)]
    if isinstance(value, cst.Name):
        bindings = scope.bindings.get(value.value)
        if bindings and all(b.kind == "assign" for b in bindings):
            found = []
            for binding in bindings:
                if binding.value is None or not isinstance(binding.value, cst.Call) or \
                        binding.value is value:
                    return [(None, None)]
                found += _built_by(index, binding.value, scope)
            return found
    return [(None, None)]


def _project_factory_verdict(index: FileIndex, qualname: str, depth: int) -> str | None:
    """`factory_verdict` of a module-level function of another project file (read in its own file)."""
    linker = getattr(index, "linker", None)
    summaries = getattr(linker, "_summaries", None)
    if summaries is None or depth > _MAX_DEPTH:
        return None
    found = summaries.locate(qualname, linker.path, words=("return",))
    if found is None or len(found[1]) != 1:
        return None
    summary = summaries.file_summary(found[0])
    other = summary.index if summary is not None else None
    if other is None:
        return None
    return factory_verdict(other, found[1][0], depth)


def _bound_to_def(name: str, scope: Scope) -> bool:
    bindings = scope.lookup(name)
    return bool(bindings) and all(b.kind == "def" for b in bindings)


# torchvision's detection models (`torchvision.models.detection`): their builders and classes; in
# train mode, given targets, each returns its losses (a dict), in eval mode its detections, so
# asking one for its losses needs train mode (the heads such as `FastRCNNPredictor` are no model)
_DETECTION_PACKAGE = "torchvision.models.detection"
_DETECTION_MODELS = re.compile(r"^((fasterrcnn|maskrcnn|keypointrcnn|retinanet|fcos|ssd300|ssdlite320)_\w+|"
                               r"FasterRCNN|MaskRCNN|KeypointRCNN|RetinaNet|FCOS|SSD|SSDLite|GeneralizedRCNN)$")
DETECTION_TARGETS = (1, "targets")  # `model(images, targets)`: where a detection model takes its targets


def builds_detection_model(index: FileIndex, call: cst.BaseExpression, scope: Scope) -> bool:
    """`call` builds a torchvision detection model: one of `torchvision.models.detection`'s builders
    or model classes (`maskrcnn_resnet50_fpn(...)`, `detection.faster_rcnn.FasterRCNN(backbone, 2)`),
    or what `getattr(torchvision.models.detection, name)(...)` picks at run time (every model that
    package exports at its top level is a detection model; its heads live in its submodules)."""
    while isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and \
            call.func.attr.value in _SAME_MODULE_METHODS and isinstance(call.func.value, cst.Call):
        call = call.func.value  # `maskrcnn_resnet50_fpn(...).to(device)`
    if not isinstance(call, cst.Call):
        return False
    func = call.func
    if isinstance(func, cst.Call) and isinstance(func.func, cst.Name) and func.func.value == "getattr" and \
            not scope.lookup("getattr") and func.args and func.args[0].keyword is None:
        return index.resolve(func.args[0].value, scope) == _DETECTION_PACKAGE
    name = index.resolve(func, scope) or ""
    return name.startswith(_DETECTION_PACKAGE + ".") and _DETECTION_MODELS.search(name.rsplit(".", 1)[-1]) is not None


def detection_targets(index: FileIndex, class_name: str) -> tuple[int, str] | None:
    """A module class of this file whose `forward` hands one of its parameters to a torchvision
    detection model it holds as that model's targets, and returns what the model returns, on
    every return (`return self.det(images, targets)`, `self.det` built by a detection builder in
    every assignment): (the parameter's position among the call's arguments, its name). A call of
    such a module that passes that argument asks for the losses, which it returns only in train
    mode. None when a return is anything else."""
    forward = index.method(class_name, "forward")
    if forward is None:
        return None
    params = [p.name.value for p in (*forward.node.params.posonly_params, *forward.node.params.params)][1:]
    returns = [n for n in index.scope_nodes(forward.node) if type(n) is cst.Return]
    found = None
    for ret in returns:
        call = ret.value
        if not isinstance(call, cst.Call) or any(arg.star for arg in call.args):
            return None
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "forward":
            func = func.value
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
            return None
        values = index.class_attributes.get(class_name, {}).get(func.attr.value, [])
        if not values or not all(builds_detection_model(index, value, index.scope_at(value)) for value in values):
            return None
        position, keyword = DETECTION_TARGETS
        given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)
        positional = [a.value for a in call.args if a.keyword is None]
        if given is None and len(positional) > position:
            given = positional[position]
        if not isinstance(given, cst.Name) or given.value not in params:
            return None
        here = (params.index(given.value), given.value)
        if found is not None and found != here:
            return None
        found = here
    return found


def passes_targets(call: cst.Call, targets: tuple[int, str]) -> bool:
    """`call` gives the module the argument at `targets` (position, name), and not a literal None."""
    position, name = targets
    given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if given is None and len(positional) > position and not any(a.star for a in call.args[:position + 1]):
        given = positional[position]
    return given is not None and not (isinstance(given, cst.Name) and given.value == "None")
