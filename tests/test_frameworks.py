"""The framework models (trainlint/frameworks/*.toml): every entry's example is checked (its bad code
draws the codes it names, its good twin none of them), every entry is spelled like a real attribute
path of its framework (checked against the installed package's sources where it is installed, by
reading them), the loader refuses a malformed file clearly, and the model reads the data."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from trainlint.engine import lint_source
from trainlint.model import frameworks
from trainlint.settings import Settings, resolve_selection

ALL = Settings(select=resolve_selection(["ALL"], [], []))
FRAMEWORKS = frameworks.frameworks()
ENTRIES = [entry for fw in FRAMEWORKS for entry in fw.entries]
DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


def _codes(source: str) -> set[str]:
    result = lint_source(source, "example.py", ALL)
    assert result.errors == []
    return {f.code for f in result.findings}


def test_the_shipped_models_are_found():
    assert {fw.id for fw in FRAMEWORKS} >= {"accelerate", "lightning", "transformers", "deepspeed"}
    assert len(ENTRIES) >= 30


@pytest.mark.parametrize("fw, example", [(fw, ex) for fw in FRAMEWORKS for ex in fw.examples.values()],
                         ids=lambda v: getattr(v, "id", None))
def test_example(fw, example):
    assert example.codes, f"{fw.path} example {example.id} names no code"
    assert set(example.codes) <= _codes(example.bad), f"{fw.path} example {example.id}: bad is quiet"
    assert not set(example.codes) & _codes(example.good), f"{fw.path} example {example.id}: good fires"


def test_every_entry_has_an_example_and_every_example_an_entry():
    for fw in FRAMEWORKS:
        used = {entry.example for entry in fw.entries}
        assert used == set(fw.examples), f"{fw.path}: examples without an entry {set(fw.examples) - used}"
        for entry in fw.entries:
            assert entry.rules, f"{entry.name} names no rule"
            # the example draws a code of a rule the entry says reads it
            assert set(fw.examples[entry.example].codes) & set(entry.rules), entry.name


def test_rules_named_by_entries_exist():
    from trainlint.rules import registry

    codes = set(registry())
    for entry in ENTRIES:
        assert set(entry.rules) <= codes, entry.name


# -- spelling: a real attribute path of the framework ---------------------------------------------
def _package_dir(root: str) -> Path | None:
    spec = importlib.util.find_spec(root)  # locates the package; a top-level find_spec runs nothing
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _module_file(package: Path, parts: list[str]) -> Path | None:
    base = package.joinpath(*parts)
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _defines(tree: ast.Module, name: str) -> ast.AST | str | None:
    """The class/function node `name` in a module, or the dotted module a `from X import name`
    re-exports it from (relative to the module), or None."""
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return node
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            return "." * node.level + (node.module or "")
    return None


def _resolves(qualified: str) -> bool | None:
    """Whether an installed package defines `qualified` (None: the package is not installed)."""
    root, *rest = qualified.split(".")
    package = _package_dir(root)
    if package is None:
        return None
    parts: list[str] = []  # the module path below the package
    i = 0
    while i < len(rest) and _module_file(package, parts + [rest[i]]) is not None:
        parts.append(rest[i])
        i += 1
    if i == len(rest):
        return True
    for _ in range(5):  # follow re-exports
        tree = ast.parse(_module_file(package, parts).read_text(encoding="utf-8"))
        found = _defines(tree, rest[i])
        if isinstance(found, str):
            dots = len(found) - len(found.lstrip("."))
            if dots == 0:
                return _resolves(".".join([found, *rest[i:]]))
            base = parts if _module_file(package, parts).name == "__init__.py" else parts[:-1]
            parts = base[:len(base) - (dots - 1)] + [p for p in found.lstrip(".").split(".") if p]
            continue
        if found is None:
            return False
        for attr in rest[i + 1:]:
            if not isinstance(found, ast.ClassDef):
                return False
            found = next((n for n in found.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                          and n.name == attr), None)
            if found is None:
                return False
        return True
    return False


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_entry_names_a_real_attribute_path(entry):
    fw = next(f for f in FRAMEWORKS if f.id == entry.framework)
    assert DOTTED.match(entry.name), entry.name
    assert entry.name.split(".")[0] in fw.packages, f"{entry.name} is outside {fw.packages}"
    found = _resolves(entry.name)
    if found is None:
        pytest.skip(f"{entry.name.split('.')[0]} is not installed here: spelling checked, not resolved")
    assert found, f"{entry.name} is not defined in the installed {entry.name.split('.')[0]}"


def test_accelerate_entries_resolve_against_the_installed_accelerate():
    """Accelerate is a dev dependency: its entries are resolved, not skipped, and a misspelled
    name is caught (the checker above is not vacuous)."""
    if _package_dir("accelerate") is None:
        pytest.skip("accelerate is not installed")
    assert _resolves("accelerate.Accelerator.accumulate") is True
    assert _resolves("accelerate.Accelerator.sync_gradients") is True
    assert _resolves("accelerate.utils.set_seed") is True
    assert _resolves("accelerate.Accelerator.no_sync_or_accumulate") is False
    assert _resolves("accelerate.utils.set_seeds") is False


def test_accumulation_and_fp16_keywords_are_the_constructors_parameters():
    package = _package_dir("accelerate")
    if package is None:
        pytest.skip("accelerate is not installed")
    tree = ast.parse((package / "accelerator.py").read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Accelerator")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    params = {a.arg for a in init.args.args + init.args.kwonlyargs}
    entry = frameworks.lookup("accelerate.Accelerator")
    assert set(entry.accumulation_keywords) <= params
    assert entry.fp16_keyword in params


# -- the loader ------------------------------------------------------------------------------------
def test_queries_answer_from_the_data():
    assert ("accelerate.Accelerator", "accelerator") in frameworks.constructors()
    assert frameworks.class_names("accelerator") >= {"Accelerator", "Fabric"}
    assert frameworks.hooks("eval") >= {"validation_step", "test_step", "predict_step"}
    assert frameworks.hook_kind("training_step") == "train"
    assert frameworks.hook_kind("forward") is None
    assert frameworks.owns_accumulation("accelerate.Accelerator.backward")
    assert not frameworks.owns_accumulation("accelerate.Accelerator.prepare")
    assert frameworks.clock("accelerate.Accelerator.accumulate") == "sync"
    assert frameworks.lookup("deepspeed.ops.adam.FusedAdam").role == "optimizer"
    assert frameworks.methods("save_state", "accelerator") >= {"save_state", "save_model", "save"}
    assert "TL801" in {code for e in frameworks.for_rule("TL801") for code in e.rules}


@pytest.mark.parametrize("text, message", [
    ('framework = "x"\n[[entry]]\nname = "x.y"\nkind = "teleport"\nexample = "e"\n', "unknown kind"),
    ('framework = "x"\n[[entry]]\nname = "x.y"\nkind = "seed"\nexample = "missing"\n', "names no example"),
    ('framework = "x"\n[[entry]]\nname = "x.y"\nkind = "hook"\nexample = "e"\n'
     '[example.e]\ntitle = "t"\ncodes = []\nbad = ""\ngood = ""\n', "a hook's `step`"),
    ('framework = "x"\n[[entry]]\nname = "x.y"\nkind = "seed"\nexample = "e"\ncolour = 1\n', "unknown keys"),
    ('framework = = "x"\n', "bad.toml"),
])
def test_a_malformed_model_file_is_refused_naming_the_file(tmp_path, text, message):
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(frameworks.FrameworkModelError, match=re.escape(message)) as err:
        frameworks.load_folder(tmp_path)
    assert "bad.toml" in str(err.value)


def test_the_model_reads_the_data(monkeypatch):
    """Without the data's `accumulate` context or its accumulation keywords, Accelerate's loop is
    not understood: the examples that rely on them go quiet (the model asks the data, it keeps no
    list of its own)."""
    accelerate = next(fw for fw in FRAMEWORKS if fw.id == "accelerate")
    example = accelerate.examples["prepared_scheduler"]
    assert "TL101" in _codes(example.bad)
    real = frameworks.methods
    monkeypatch.setattr(frameworks, "methods",
                        lambda kind, owner_role=None: frozenset() if kind == "accumulation_context"
                        else real(kind, owner_role))
    assert "TL101" not in _codes(example.bad)
    monkeypatch.setattr(frameworks, "methods", real)
    monkeypatch.setattr(frameworks, "accumulation_keywords", lambda: ())
    assert "TL101" not in _codes(example.bad)


def test_each_rule_an_entry_names_is_shown_to_read_it():
    """An entry names a rule (what `trainlint explain CODE` lists) only when its example draws the
    rule's code or the rule's module (its documentation and examples) uses the entry's name."""
    import sys

    from trainlint.rules import registry

    for fw in FRAMEWORKS:
        for entry in fw.entries:
            for code in entry.rules:
                module = Path(sys.modules[registry()[code].__module__].__file__).read_text(encoding="utf-8")
                shown = code in fw.examples[entry.example].codes or re.search(rf"\b{re.escape(entry.attr)}\b", module)
                assert shown, f"{entry.name} names {code}, but neither its example nor {code}'s docs show it"


# -- trainlint explain -------------------------------------------------------------------------------
def _tl(*args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "trainlint", *args], capture_output=True, text=True, timeout=120)


def test_explain_lists_the_frameworks_a_rule_understands():
    result = _tl("explain", "TL801")
    assert result.returncode == 0, result.stderr
    section = result.stdout.split("## Frameworks", 1)[1]
    for entry in frameworks.for_rule("TL801"):
        assert f"`{entry.name}`" in section
    assert "`accelerate.utils.set_seed` (seed)" in section and "Lightning" in section
    assert "`accelerate.Accelerator.backward`" not in section  # an entry that does not name TL801


def test_explain_of_a_rule_no_model_names():
    result = _tl("explain", "TL000")
    assert result.returncode == 0
    assert "No framework model names this rule" in result.stdout.split("## Frameworks", 1)[1]


def test_explain_frameworks_lists_every_model_and_entry():
    result = _tl("explain", "--frameworks")
    assert result.returncode == 0, result.stderr
    for fw in FRAMEWORKS:
        assert f"{fw.id}: {fw.title} ({fw.path}" in result.stdout
        for entry in fw.entries:
            assert f"`{entry.name}" in result.stdout
    assert "`accelerate.Accelerator.accumulate` (accumulation_context; owns accumulation; clock: sync)" \
        in result.stdout


@pytest.mark.parametrize("args", [("explain",), ("explain", "TL101", "--frameworks")])
def test_explain_needs_a_code_or_frameworks(args):
    result = _tl(*args)
    assert result.returncode == 2
    assert result.stderr == "trainlint: error: give a rule CODE or --frameworks (see `trainlint explain --help`)\n"
    assert result.stdout == ""


def test_the_model_reads_the_backward_methods_from_the_data(monkeypatch):
    """`self.manual_backward(loss)` is a backward because lightning.toml says so."""
    lightning = next(fw for fw in FRAMEWORKS if fw.id == "lightning")
    example = lightning.examples["manual_optimization"]
    assert {"TL101", "TL102"} <= _codes(example.bad)
    monkeypatch.setattr(frameworks, "backward_methods", lambda: frozenset({"backward"}))
    assert not {"TL101", "TL102"} & _codes(example.bad)


# -- a framework's train hook names the window's size (TL103) -----------------------------------
_FIXED_K_STEP = '''
    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = self.compute_loss(model, inputs)
        loss = loss / self.args.gradient_accumulation_steps
        self.accelerator.backward(loss)
        return loss.detach()
'''


def test_a_trainer_of_the_project_own_making_is_not_the_frameworks():
    """The same override in a class that only shares HF's names (its own `Trainer`, no import):
    nothing says a framework runs it on windows that can be short."""
    source = "class Trainer:\n    pass\n\n\nclass MyTrainer(Trainer):" + _FIXED_K_STEP
    assert "TL103" not in _codes(source)
    assert "TL103" in _codes("from transformers import Trainer\n\n\nclass MyTrainer(Trainer):" + _FIXED_K_STEP)


def test_the_framework_class_is_found_through_a_project_base_in_another_file(tmp_path):
    """LLaMA-Factory's HyperParallelTrainer derives from CustomSeq2SeqTrainer (another file), which
    derives from transformers' Seq2SeqTrainer."""
    from trainlint.engine import lint_path
    from trainlint.reader.project import Project

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "base.py").write_text("from transformers import Seq2SeqTrainer\n\n\n"
                                      "class CustomSeq2SeqTrainer(Seq2SeqTrainer):\n    pass\n")
    (tmp_path / "parallel.py").write_text("from base import CustomSeq2SeqTrainer\n\n\n"
                                          "class HyperParallelTrainer(CustomSeq2SeqTrainer):" + _FIXED_K_STEP)
    result = lint_path(str(tmp_path / "parallel.py"), ALL, project=Project(tmp_path))
    assert [(f.line, f.code) for f in result.findings if f.code == "TL103"] == [(7, "TL103")]
    alone = lint_path(str(tmp_path / "parallel.py"), ALL)
    assert "TL103" not in {f.code for f in alone.findings}


def test_window_size_facts_go_together_on_a_train_hook(tmp_path):
    (tmp_path / "bad.toml").write_text('framework = "x"\n[[entry]]\nname = "x.T.training_step"\nkind = "hook"\n'
                                       'step = "eval"\nwindow_size = "w"\nfixed_window_size = "k"\nexample = "e"\n'
                                       '[example.e]\ntitle = "t"\ncodes = []\nbad = ""\ngood = ""\n')
    with pytest.raises(frameworks.FrameworkModelError, match="train hook"):
        frameworks.load_folder(tmp_path)


def test_explain_names_the_window_size_a_hook_relies_on():
    from trainlint.reporters.framework_models import rule_section

    section = rule_section("TL103")
    assert "`transformers.Trainer.training_step` (hook; step: train; window size: " \
           "self.current_gradient_accumulation_steps, not self.args.gradient_accumulation_steps)" in section


# -- HF datasets: a dataset that orders itself (TL801) -------------------------------------------
def test_the_dataset_model_reads_the_data(monkeypatch):
    """`IterableDataset.shuffle` replays one order per epoch because datasets.toml gives its class an
    `epoch_setter`; without that fact the same code is quiet (the model keeps no list of its own)."""
    example = next(fw for fw in FRAMEWORKS if fw.id == "datasets").examples["streaming_shuffle"]
    assert "TL801" in _codes(example.bad)
    real = frameworks.lookup
    monkeypatch.setattr(frameworks, "lookup", lambda name: None if name == "datasets.IterableDataset.shuffle"
                        else real(name))
    assert "TL801" not in _codes(example.bad)


_STREAM = '''
from datasets import load_dataset
from torch.utils.data import DataLoader

ds = load_dataset("c4", split="train", streaming={streaming}).shuffle(seed=1)
loader = DataLoader(ds{format}, batch_size=4)
for epoch in range(3):
    {set_epoch}
    for batch in loader:
        model(batch).backward()
        opt.step()
        opt.zero_grad()
'''


@pytest.mark.parametrize("streaming, format, set_epoch, fires", [
    ("True", "", "pass", True),
    ("True", "", "ds.set_epoch(epoch)", False),
    ("True", "", "loader.dataset.set_epoch(epoch)", False),
    ("True", ".with_format('torch')", "ds.set_epoch(epoch)", True),  # another object: its own epoch
    ("True", ".with_format('torch')", "loader.dataset.set_epoch(epoch)", False),
    ("True", "", "helper.set_epoch(epoch)", False),  # a receiver that cannot be told apart
    ("False", "", "pass", True),  # map-style: one permutation, and the loader does not shuffle
    ("False", ", shuffle=True", "pass", False),  # map-style: the loader's sampler orders it
    ("args.streaming", "", "pass", False),  # not known to be an IterableDataset
])
def test_an_iterable_dataset_shuffle_needs_set_epoch_on_the_object_iterated(streaming, format, set_epoch, fires):
    source = _STREAM.format(streaming=streaming, format=format, set_epoch=set_epoch)
    assert ("TL801" in _codes(source)) is fires


def test_a_dataset_is_known_from_resolved_imports_not_names():
    source = _STREAM.format(streaming="True", format="", set_epoch="pass")
    assert "TL801" in _codes(source)
    own = source.replace("from datasets import load_dataset\n",
                         "def load_dataset(*args, **kwargs):\n    return Corpus(*args, **kwargs)\n")
    assert "TL801" not in _codes(own)


# -- torch.distributed.checkpoint: a save of the state dict it is handed (TL404) ----------------------
def test_a_state_save_names_what_it_saves_and_where(tmp_path):
    (tmp_path / "bad.toml").write_text('framework = "x"\n[[entry]]\nname = "x.save"\nkind = "state_save"\n'
                                       'saves = "state_dict"\nexample = "e"\n'
                                       '[example.e]\ntitle = "t"\ncodes = []\nbad = ""\ngood = ""\n')
    with pytest.raises(frameworks.FrameworkModelError, match="state_save"):
        frameworks.load_folder(tmp_path)


def test_the_checkpoint_model_reads_the_state_saves_from_the_data(monkeypatch):
    """`dcp.save` is a save because distributed_checkpoint.toml says so."""
    example = next(fw for fw in FRAMEWORKS if fw.id == "distributed_checkpoint").examples["dcp_save"]
    assert "TL404" in _codes(example.bad)
    monkeypatch.setattr(frameworks, "state_saves", lambda: {})
    assert "TL404" not in _codes(example.bad)


def test_a_dcp_save_is_no_torch_save_for_the_atomic_and_view_rules():
    """DCP writes its shards and then its metadata (no single file to rename): TL402 and TL403,
    which judge a `torch.save` to one path, leave it alone."""
    source = ("import torch\nimport torch.distributed.checkpoint as dcp\n\n"
              "optimizer = torch.optim.AdamW(model.parameters())\n"
              "for step, batch in enumerate(loader):\n"
              "    model(batch).backward()\n    optimizer.step()\n    optimizer.zero_grad()\n"
              "    dcp.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict(), 'step': step,\n"
              "              'embed': model.embed.weight[:10]}, checkpoint_id='ckpt/last')\n")
    assert not {"TL402", "TL403", "TL404"} & _codes(source)
    assert {"TL402", "TL403"} <= _codes(source.replace("dcp.save(", "torch.save(").replace(
        "checkpoint_id='ckpt/last'", "'ckpt/last.pt'"))


_DCP_RESUME = '''
import torch
import torch.distributed.checkpoint as dcp

optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
state = {load_dict}
dcp.load(state, checkpoint_id={load_path})
{after}
for step in range(args.max_steps):
    model(**next(batches)).loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if step % 1000 == 0:
        state = {{"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}}
        dcp.save(state, checkpoint_id="ckpt/latest")
'''


@pytest.mark.parametrize("load_dict, load_path, after, fires", [
    ('{"model": model.state_dict(), "step": 0}', "args.resume", "", True),  # keeps the counter: a resume
    ('{"model": model.state_dict()}', '"ckpt/latest"', "", True),  # reads what this file's save writes
    ('{"model": model.state_dict()}', "args.pretrained", "", False),  # another run's weights: a fresh start
    ('{"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": 0}', "args.resume", "", False),
    ('{"model": model.state_dict(), "step": 0}', "args.resume",
     'optimizer.load_state_dict(torch.load(args.optim_file, weights_only=True))', False),
])
def test_an_in_place_load_restores_only_what_its_dict_holds(load_dict, load_path, after, fires):
    source = _DCP_RESUME.format(load_dict=load_dict, load_path=load_path, after=after)
    found = [f.line for f in lint_source(source, "example.py", ALL).findings if f.code == "TL404"]
    assert (found == [7]) is fires, found


# -- Lightning's self.log(..., on_epoch=True): an epoch mean weighted by batch_size (TL601) -----------
_LOGGING_MODULE = '''
{import_line}
import torch.nn.functional as F


class Classifier({base}):
    def __init__(self, backbone, batch_size=64):
        super().__init__()
        self.save_hyperparameters(ignore=["backbone"])
        self.backbone = backbone
        self.batch_size = batch_size

    def {hook}(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.backbone(x), y)
        self.log("loss", loss{arguments})
        return loss
{more}'''


@pytest.mark.parametrize("import_line, base, hook, arguments, more, expected", [
    ("import lightning.pytorch as pl", "pl.LightningModule", "validation_step",
     ", batch_size=self.hparams.batch_size", "", "warning"),
    ("from pytorch_lightning import LightningModule", "LightningModule", "test_step",
     ", batch_size=self.batch_size", "", "warning"),  # set once, in the constructor
    ("import lightning as L", "L.LightningModule", "validation_step", ", batch_size=64", "", "warning"),
    ("import lightning as L", "L.LightningModule", "training_step", ", on_epoch=True, batch_size=64", "", "info"),
    # quiet: the batch's own size, or none (read off the batch)
    ("import lightning as L", "L.LightningModule", "validation_step", ", batch_size=len(y)", "", None),
    ("import lightning as L", "L.LightningModule", "validation_step", "", "", None),
    # quiet: training_step logs per step unless `on_epoch=True`; a sum is not a mean
    ("import lightning as L", "L.LightningModule", "training_step", ", batch_size=64", "", None),
    ("import lightning as L", "L.LightningModule", "validation_step", ", batch_size=64, reduce_fx='sum'", "", None),
    # quiet: the attribute moves with every batch
    ("import lightning as L", "L.LightningModule", "validation_step", ", batch_size=self.batch_size",
     "\n    def on_validation_batch_start(self, batch, batch_idx, dataloader_idx=0):\n"
     "        self.batch_size = len(batch[0])\n", None),
    # quiet: the class's validation loader drops the short last batch
    ("import lightning as L\nfrom torch.utils.data import DataLoader", "L.LightningModule", "validation_step",
     ", batch_size=64", "\n    def val_dataloader(self):\n"
     "        return DataLoader(self.val_set, batch_size=64, drop_last=True)\n", None),
    # quiet: a class of the project's own that only shares the name
    ("class LightningModule:\n    pass", "LightningModule", "validation_step", ", batch_size=64", "", None),
])
def test_a_framework_log_weighted_by_a_fixed_batch_size(import_line, base, hook, arguments, more, expected):
    source = _LOGGING_MODULE.format(import_line=import_line, base=base, hook=hook, arguments=arguments, more=more)
    result = lint_source(source, "example.py", ALL)
    found = [f for f in result.findings if f.code == "TL601"]
    if expected is None:
        assert found == []
    else:
        assert [f.severity.value for f in found] == [expected], found
        assert found[0].line == source.splitlines().index('        self.log("loss", loss' + arguments + ")") + 1


@pytest.mark.parametrize("hook, arguments, expected", [
    ("validation_step", ', batch_size=self.hparams.batch_size', "warning"),
    ("training_step", ", on_epoch=True, batch_size=64", "info"),
    ("validation_step", ", batch_size=len(y)", None),  # the batch's own size
    ("validation_step", "", None),  # read off the batch
    ("training_step", ", batch_size=64", None),  # logged per step
    ("validation_step", ", on_epoch=False, batch_size=64", None),
])
@pytest.mark.parametrize("form", ["literal", "name"])
def test_log_dict_is_logged_like_log(hook, arguments, expected, form):
    """`self.log_dict({...}, ...)` reduces each value of the dict like `self.log` (lightning.toml's
    `values`): a fixed `batch_size` weighs a short last batch like a full one."""
    source = _LOGGING_MODULE.format(import_line="import lightning.pytorch as pl", base="pl.LightningModule",
                                    hook=hook, arguments="", more="")
    logged = ('{"loss": loss, "acc": (self.backbone(x).argmax(-1) == y).float().mean()}' if form == "literal"
              else "metrics")
    line = f"        self.log_dict({logged}{arguments})"
    setup = "" if form == "literal" else \
        '        metrics = {"loss": loss}\n        metrics["acc"] = (self.backbone(x).argmax(-1) == y).float().mean()\n'
    source = source.replace('        self.log("loss", loss)\n', setup + line + "\n")
    found = [f for f in lint_source(source, "example.py", ALL).findings if f.code == "TL601"]
    if expected is None:
        assert found == []
    else:
        assert [f.severity.value for f in found] == [expected], found
        assert found[0].line == source.splitlines().index(line) + 1


def test_explain_names_the_facts_of_the_new_entry_kinds():
    from trainlint.reporters.framework_models import rule_section

    assert "`datasets.load_dataset` (dataset_source; returns datasets.Dataset, streaming=True: " \
           "datasets.IterableDataset)" in rule_section("TL801")
    assert "`datasets.IterableDataset.shuffle` (dataset_shuffle; keyed on an epoch only set_epoch moves)" \
        in rule_section("TL801")
    assert "`datasets.Dataset.shuffle` (dataset_shuffle; one permutation)" in rule_section("TL801")
    assert "`torch.distributed.checkpoint.load` (state_load; loads into the dict `state_dict`, at `checkpoint_id`)" \
        in rule_section("TL404")
    assert "`lightning.pytorch.LightningModule.log` (epoch_log; epoch mean weighted by `batch_size`; on_epoch by " \
           "default in validation_step, test_step)" in rule_section("TL601")


# -- DeepSpeed: the engine owns the update and accumulation ------------------------------------------
def _deepspeed_example(eid: str):
    deepspeed = next(fw for fw in FRAMEWORKS if fw.id == "deepspeed")
    return deepspeed.examples[eid]


@pytest.mark.parametrize("name", ["model_engine", "engine", "ds_model", "net", "trainer", "opt"])
def test_the_engine_is_known_by_its_factory_not_its_name(name):
    """The engine is the first element of what `deepspeed.initialize` returns, whatever the script
    calls it: `model_engine` (a model by its name alone) and `opt` (an optimizer by its name) alike."""
    for eid, code in (("engine_steps_the_scheduler", "TL101"), ("engine_steps_every_micro_batch", "TL102")):
        example = _deepspeed_example(eid)
        bad = re.sub(r"\bmodel_engine\b", name, example.bad)
        good = re.sub(r"\bmodel_engine\b", name, example.good)
        assert code in _codes(bad), (name, eid)
        assert code not in _codes(good), (name, eid)
    update = _deepspeed_example("engine_owns_the_update")
    assert "TL105" not in _codes(re.sub(r"\bmodel_engine\b", name, update.good))


_ENGINE_LOOK_ALIKE = '''
import torch


class Engine:
    def __init__(self, model, lr):
        self.model = model
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr)

    def backward(self, loss):
        loss.backward()

    def step(self):
        self.opt.step()
        self.opt.zero_grad()


ds_config = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8}
engine = Engine(model, 3e-4)
lr_scheduler = torch.optim.lr_scheduler.StepLR(engine.opt, 100)
for step, batch in enumerate(loader):
    loss = engine.model(batch)
    engine.backward(loss)
    engine.step()
    lr_scheduler.step()
'''


@pytest.mark.parametrize("source", [
    _ENGINE_LOOK_ALIKE,
    # DeepSpeed's idiom, but `initialize` is the project's own: no framework says what it returns
    _deepspeed_example("engine_steps_the_scheduler").bad.replace("import deepspeed",
                                                                 "from myproject.runtime import initialize")
    .replace("deepspeed.initialize(", "initialize("),
])
def test_methods_named_backward_and_step_are_no_engine_without_the_framework(source):
    """A class of the user's own with `backward`/`step` methods, or a factory of the project's own
    with DeepSpeed's shape, is judged as before: no engine accumulation, so no TL101 for a
    scheduler stepped beside it."""
    assert "TL101" not in _codes(source)


@pytest.mark.parametrize("config, fires", [
    ('{"gradient_accumulation_steps": 8}', True),
    ('{"gradient_accumulation_steps": args.grad_accum, "train_micro_batch_size_per_gpu": 4}', True),
    ('{"gradient_accumulation_steps": 1}', False),  # K = 1: the engine steps on every micro-batch
    ('{"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4}', False),  # K inferred: unknown
    ('"ds_config.json"', False),  # a file: unknown
    ('{**base, "gradient_accumulation_steps": 8}', False),
])
def test_the_engine_accumulates_by_its_configured_k(config, fires):
    source = ("import deepspeed\n\nds_config = " + config + "\n"
              "model_engine, optimizer, _, lr_scheduler = deepspeed.initialize(model=model, config=ds_config)\n"
              "for batch in loader:\n    loss = model_engine(batch)\n    model_engine.backward(loss)\n"
              "    model_engine.step()\n    lr_scheduler.step()\n")
    assert ("TL101" in _codes(source)) is fires


def test_the_engine_model_reads_the_data(monkeypatch):
    """Without the factory's `unpacks` the engine is unknown (its scheduler steps go unjudged);
    without the `save_state`/`load_state` entries TL404 no longer knows what `save_checkpoint` holds."""
    scheduler = _deepspeed_example("engine_steps_the_scheduler")
    checkpoint = _deepspeed_example("engine_checkpoint")
    assert "TL101" in _codes(scheduler.bad) and "TL404" not in _codes(checkpoint.good)
    monkeypatch.setattr(frameworks, "unpacked_role", lambda name, position: None)
    assert "TL101" not in _codes(scheduler.bad)
    monkeypatch.undo()
    monkeypatch.setattr(frameworks, "saved_state", lambda kind="save_state": {})
    assert "TL404" in _codes(checkpoint.good)


def test_a_load_told_to_skip_the_optimizer_restores_the_model_alone():
    good = _deepspeed_example("engine_checkpoint").good
    assert "TL404" not in _codes(good)
    partial = good.replace("model_engine.load_checkpoint(args.out)",
                           "model_engine.load_checkpoint(args.out, load_optimizer_states=False)")
    partial = partial.replace('ema.load_state_dict(torch.load(f"{args.out}/ema.pt", weights_only=True)["ema"])',
                              'extra = torch.load(f"{args.out}/ema.pt", weights_only=True)\n'
                              '    model_engine.module.load_state_dict(extra["model"])\n'
                              '    ema.load_state_dict(extra["ema"])')
    partial = partial.replace('"model": model_engine.module.state_dict(), "step": step}',
                              '"model": model_engine.module.state_dict(), "optimizer": optimizer.state_dict(), '
                              '"step": step}')
    assert "TL404" in _codes(partial)
    assert "TL404" not in _codes(partial.replace(", load_optimizer_states=False", ""))


def test_a_train_batch_of_the_project_own_is_no_pipeline_engine():
    """`train_batch` on an object no framework model made (a project's `initialize`) trains nothing
    the data order model can tell: no epoch loop, no TL801."""
    example = _deepspeed_example("pipeline_epochs")
    assert "TL801" in _codes(example.bad)
    own = example.bad.replace("import deepspeed", "from mylib import initialize").replace("deepspeed.initialize",
                                                                                           "initialize")
    assert "TL801" not in _codes(own)


DS_TRAINER = '''
import deepspeed
import torch


def build(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, optimizer, None, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)


class Runner:
    def __init__(self, model, loader):
        {a}, {b}, _, {c} = {factory}
        self.loader = loader

    def fit(self, epochs):
        for epoch in range(epochs):
            for batch in self.loader:
                loss = {a}(batch).loss
                {a}.backward(loss)
                {a}.step()
                {c}.step()
'''
DS_CALL = ('deepspeed.initialize(model=model, model_parameters=model.parameters(), '
           'config={{"gradient_accumulation_steps": {k}, "train_micro_batch_size_per_gpu": 8}})')


@pytest.mark.parametrize(("names", "factory", "fires"), [
    (("self.engine", "self.optimizer", "self.scheduler"), DS_CALL.format(k=4), True),
    (("self.v1", "self.v2", "self.v3"), DS_CALL.format(k=4), True),  # the roles are not read from names
    (("self.engine", "self.optimizer", "self.scheduler"), DS_CALL.format(k=1), False),  # no accumulation
    # a project function returning a model, an optimizer and a scheduler: no engine, no accumulation
    (("self.engine", "self.optimizer", "self.scheduler"), "build(model)", False),
])
def test_an_engine_unpacked_into_attributes_is_the_engine(names, factory, fires):
    """TL101: `self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(...)` in
    `__init__`, then the scheduler stepped on every micro-batch of an engine that accumulates 4."""
    a, b, c = names
    source = DS_TRAINER.format(a=a, b=b, c=c, factory=factory)
    assert ("TL101" in _codes(source)) is fires
