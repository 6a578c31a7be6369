"""Fixes as `check --fix` applies them (trainlint.fixes): every example's fix through the real
fixing loop, idempotence, the property over every fixture and example (what `--fix
--unsafe-fixes` produces parses and gains no finding), and the pieces: overlapping edits, line
edits at the end of a file, line endings, writing a file atomically."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from pathlib import Path

import pytest

from trainlint.config import Resolver
from trainlint.engine import lint_source
from trainlint.finding import Edit, Fix
from trainlint.fixes import MAX_ROUNDS, FixPolicy, WriteError, apply_fixes, fix_source, parses, write_fixed
from trainlint.reader.project import Project
from trainlint.rules import registry
from trainlint.settings import Settings, resolve_selection

ALL = Settings(select=resolve_selection(["ALL"], [], []))
UNSAFE = FixPolicy(unsafe=True)
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def lint(path: str = "example.py", settings: Settings = ALL, project: Project | None = None):
    return lambda source: lint_source(source, path, settings, project)


def _fixed_examples():
    for code, rule in registry().items():
        for number, example in enumerate(rule.bad_examples()):
            if example.fixed is not None:
                yield pytest.param(code, example, id=f"{code}-bad-{number}")


@pytest.mark.parametrize("code, example", list(_fixed_examples()))
def test_fix_loop_gives_the_stated_fixed_text_and_is_idempotent(code, example):
    only = FixPolicy(unsafe=True, fixable=frozenset({code}))
    outcome = fix_source(example.code, lint(), only)
    assert outcome.source == example.fixed
    assert outcome.fixed == Counter({code: 1})
    assert parses(outcome.source)
    assert [f for f in outcome.result.findings if f.code == code] == []
    assert not fix_source(outcome.source, lint(), only).changed  # a second --fix changes nothing
    # every rule's fixes together reach a source that a second run leaves alone
    everything = fix_source(example.code, lint(), UNSAFE)
    assert not fix_source(everything.source, lint(), UNSAFE).changed


def _fixed_safely(code: str) -> bool:
    return any(f.fix is not None and f.fix.safe for e in registry()[code].bad_examples()
               for f in lint_source(e.code, "example.py", ALL).findings if f.code == code)


def test_safe_fixes_need_no_unsafe_flag():
    safe_codes = [code for code in registry() if _fixed_safely(code)]
    assert {"TL001", "TL402"} <= set(safe_codes)
    # a fix that changes behaviour where the finding is wrong is unsafe: `model.train()` after the
    # evaluation of a backbone kept in eval mode on purpose turns its dropout on
    assert not {"TL303", "TL602"} & set(safe_codes)
    for code in safe_codes:
        example = next(e for e in registry()[code].bad_examples() if e.fixed is not None and any(
            f.fix is not None and f.fix.safe for f in lint_source(e.code, "example.py", ALL).findings if f.code == code))
        assert fix_source(example.code, lint(), FixPolicy(fixable=frozenset({code}))).source == example.fixed


def test_unsafe_fix_is_not_applied_without_the_flag():
    source = 'import torch\n\nstate = torch.load("ckpt.pt", weights_only=False)\n'
    assert not fix_source(source, lint(), FixPolicy()).changed
    assert fix_source(source, lint(), UNSAFE).source == source.replace("False", "True")
    assert not fix_source(source, lint(), FixPolicy(unsafe=True, unfixable=frozenset({"TL401"}))).changed
    assert not fix_source(source, lint(), FixPolicy(unsafe=True, fixable=frozenset({"TL402"}))).changed


# -- the property: over every fixture and every example ------------------------------------------

def _fixture_groups():
    projects = FIXTURES / "projects"
    groups = [sorted(p.rglob("*.py")) for p in sorted(projects.iterdir()) if p.is_dir()]
    return groups + [[p] for p in sorted(FIXTURES.rglob("*.py")) if projects not in p.parents]


def _assert_no_harm(source: str, check, name: str) -> int:
    before = check(source)
    outcome = fix_source(source, check, UNSAFE, before)
    assert parses(outcome.source), f"{name}: the fixed source does not parse"
    assert not any(f.code == "TL000" for f in outcome.result.findings), f"{name}: TL000 after fixing"
    was, now = Counter(f.code for f in before.findings), Counter(f.code for f in outcome.result.findings)
    added = {code: n - was[code] for code, n in now.items() if n > was[code]}
    assert not added, f"{name}: fixing added findings {added}"
    assert outcome.result.errors == []
    return sum(outcome.fixed.values())


def test_fixing_every_fixture_never_breaks_the_syntax_nor_adds_a_finding():
    resolver = Resolver()
    fixed = 0
    for group in _fixture_groups():
        project = Project.for_paths([str(p) for p in group], 10 * 1024 * 1024)
        for path in group:
            # the fixtures sit under tests/, but they stand for training scripts, not test code
            settings = dataclasses.replace(resolver.settings_for(str(path)), test_code_ignore=frozenset())
            fixed += _assert_no_harm(path.read_text(encoding="utf-8"), lint(str(path), settings, project), str(path))
    assert fixed >= 50  # the fixtures' findings are mostly fixable (scripts/fix_coverage.py has the numbers)


def test_fixing_every_example_never_breaks_the_syntax_nor_adds_a_finding():
    for code, rule in registry().items():
        for number, example in enumerate(rule.examples):
            for kind, source in (("code", example.code), ("fixed", example.fixed)):
                if source is not None:
                    _assert_no_harm(source, lint(), f"{code} example {number} ({kind})")


# -- the pieces -----------------------------------------------------------------------------------

def _fix(*edits: tuple[int, int, int, int, str]) -> Fix:
    return Fix("t", True, tuple(Edit(*e) for e in edits))


def test_overlapping_fixes_apply_one_and_leave_the_other():
    source = "a = 1\nb = 2\n"
    first, overlapping, elsewhere = _fix((1, 5, 1, 6, "9")), _fix((1, 1, 1, 6, "a = 0")), _fix((2, 5, 2, 6, "8"))
    text, applied = apply_fixes(source, [first, overlapping, elsewhere])
    assert (text, applied) == ("a = 9\nb = 8\n", [0, 2])
    # two insertions at one point: their order would be a guess, so only the first goes in
    assert apply_fixes(source, [_fix((2, 1, 2, 1, "x\n")), _fix((2, 1, 2, 1, "y\n"))]) == ("a = 1\nx\nb = 2\n", [0])


def test_the_rounds_are_bounded():
    calls = []

    def ever_fixable(source: str):
        from trainlint.finding import FileResult, Finding, Severity

        calls.append(source)
        # a new fix every round (its text differs), so only the bound stops it
        fix = _fix((1, 1, 1, 1, f"# {len(calls)}\n"))
        return FileResult("x.py", [Finding("x.py", 1, 1, 1, 1, "TL999", "n", Severity.ERROR, "m", fix)])

    outcome = fix_source("x = 1\n", ever_fixable, UNSAFE)
    assert len(calls) == MAX_ROUNDS + 1
    assert outcome.source == "".join(f"# {n}\n" for n in range(MAX_ROUNDS, 0, -1)) + "x = 1\n"


def test_a_fix_that_does_not_remove_its_finding_is_applied_once():
    def stuck(source: str):
        from trainlint.finding import FileResult, Finding, Severity

        line = source.count("\n") + 1  # the finding moves down as lines go in above it
        fix = _fix((1, 1, 1, 1, "model.train()\n"))
        return FileResult("x.py", [Finding("x.py", line, 1, line, 1, "TL303", "n", Severity.ERROR, "m", fix)])

    outcome = fix_source("x = 1\n", stuck, UNSAFE)
    assert outcome.source == "model.train()\nx = 1\n" and outcome.fixed == {"TL303": 1}


def test_line_edits_at_the_end_of_a_file_without_a_newline_and_with_crlf():
    loop = "import torch\nfor x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()"
    fixed = fix_source(loop, lint(), UNSAFE).source
    assert fixed == loop.replace("    loss.backward()", "    optimizer.zero_grad()\n    loss.backward()")
    crlf = loop.replace("\n", "\r\n") + "\r\n"
    assert fix_source(crlf, lint(), UNSAFE).source == fixed.replace("\n", "\r\n") + "\r\n"


def test_a_line_edit_needs_its_statement_alone_on_its_lines():
    inline = ("import torch\nfor x, y in loader:\n    loss = criterion(model(x), y); loss.backward(); optimizer.step()\n")
    findings = [f for f in lint_source(inline, "x.py", ALL).findings if f.code == "TL105"]
    assert len(findings) == 1 and findings[0].fix is None


def test_write_fixed_is_atomic_keeps_the_mode_and_refuses_a_file_changed_on_disk(tmp_path):
    target = tmp_path / "train.py"
    target.write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9'\n")
    os.chmod(target, 0o640)
    original = target.read_bytes()
    write_fixed(str(target), original, "# -*- coding: latin-1 -*-\nname = '\xe9!'\n")
    assert target.read_bytes() == b"# -*- coding: latin-1 -*-\nname = '\xe9!'\n"
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]  # no temporary file left behind
    with pytest.raises(WriteError, match="changed on disk"):
        write_fixed(str(target), original, "x = 1\n")
    assert target.read_bytes() == b"# -*- coding: latin-1 -*-\nname = '\xe9!'\n"


def test_write_fixed_through_a_symlink_fixes_its_target(tmp_path):
    real = tmp_path / "real.py"
    real.write_text("a = 1\n")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    write_fixed(str(link), b"a = 1\n", "a = 2\n")
    assert link.is_symlink() and real.read_text() == "a = 2\n"


def test_no_zero_grad_fix_where_it_would_uncover_another_rule():
    # the clip is guarded by the window, the step is not: clearing before each backward would only
    # make TL104's "update outside its guard" fire; which clock was meant is not mechanical
    source = ("import torch\n\n\ndef train(model, loader, optimizer, scheduler, accum):\n"
              "    for i, batch in enumerate(loader):\n        loss = model(**batch).loss / accum\n"
              "        loss.backward()\n        if (i + 1) % accum == 0:\n"
              "            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
              "        optimizer.step()\n        scheduler.step()\n")
    findings = lint_source(source, "x.py", ALL).findings
    assert [(f.code, f.fix) for f in findings] == [("TL105", None)]


# -- shapes the examples do not show: where a fix goes, and where there is none -------------------

def _fixed(source: str, code: str) -> str | None:
    """The source after `code`'s fixes alone, or None when its findings offer none."""
    findings = [f for f in lint_source(source, "x.py", ALL).findings if f.code == code]
    assert findings, f"{code} does not fire"
    if all(f.fix is None for f in findings):
        return None
    return fix_source(source, lint("x.py"), FixPolicy(unsafe=True, fixable=frozenset({code}))).source


TRAIN_THEN_VALIDATE = '''import torch
import torch.nn.functional as F


def train(model, optimizer, train_loader, val_loader, epochs):
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        model.eval()
        correct = 0
        # validation
        for x, y in val_loader:
            correct += (model(x).argmax(-1) == y).sum().item()  # per batch
        print(epoch, correct)
'''


def test_tl301_wraps_the_validation_loop_of_a_function_that_also_trains():
    assert _fixed(TRAIN_THEN_VALIDATE, "TL301") == TRAIN_THEN_VALIDATE.replace(
        "        for x, y in val_loader:\n            correct += (model(x).argmax(-1) == y).sum().item()  # per batch\n",
        "        with torch.no_grad():\n            for x, y in val_loader:\n"
        "                correct += (model(x).argmax(-1) == y).sum().item()  # per batch\n")


def test_tl301_offers_no_wrap_that_would_change_a_multiline_string():
    source = TRAIN_THEN_VALIDATE.replace("  # per batch\n", '  # per batch\n            log("""a\nb""")\n')
    assert _fixed(source, "TL301") is None


def test_tl402_leaves_a_save_into_an_open_file_alone():
    source = ('import torch\n\n\ndef save(model, path):\n    with open(path, "wb") as f:\n'
              '        torch.save(model.state_dict(), f)\n')
    assert _fixed(source, "TL402") is None


def test_tl303_puts_nothing_after_a_return():
    source = '''import torch
import torch.nn.functional as F


def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        return sum(F.cross_entropy(model(x), y).item() for x, y in loader)


def train(model, optimizer, loader, val_loader):
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        if step == 100:
            evaluate(model, val_loader)
        if step % 10 == 0:
            print(evaluate(model, val_loader))
'''
    fixed = _fixed(source, "TL303")
    assert fixed is not None and parses(fixed)
    assert [f for f in lint_source(fixed, "x.py", ALL).findings if f.code == "TL303"] == []
    assert fixed.count("model.train()") == 2


def test_tl101_no_move_when_the_update_has_two_guarded_paths():
    source = '''import torch
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)  # a scheduler the code proves
for i, (x, y) in enumerate(loader):
    if use_amp:
        scaler.scale(criterion(model(x), y) / accum).backward()
        if (i + 1) % accum == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
    else:
        (criterion(model(x), y) / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
    scheduler.step()
'''
    assert _fixed(source, "TL101") is None


def test_tl501_detaches_a_running_average():
    source = '''import torch

mloss = torch.zeros(3)
for i, (x, y) in enumerate(loader):
    loss, parts = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    mloss = (mloss * i + parts) / (i + 1)  # running mean of the parts
'''
    assert _fixed(source, "TL501") == source.replace("mloss = (mloss * i + parts) / (i + 1)",
                                                     "mloss = ((mloss * i + parts) / (i + 1)).detach()")


def test_tl501_message_wraps_a_compound_value_before_the_method():
    source = '''import torch

total = 0.0
for x, y in loader:
    out, aux = model(x)
    loss = criterion(out, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    total += aux * x.size(0)
'''
    [finding] = [f for f in lint_source(source, "x.py", ALL).findings if f.code == "TL501"]
    assert "`(aux * x.size(0)).item()` for logging" in finding.message
    assert _fixed(source, "TL501") == source.replace("total += aux * x.size(0)", "total += (aux * x.size(0)).detach()")


def test_tl102_divides_by_a_factor_held_in_the_trainers_config():
    source = '''import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, model, loader, cfg):
        self.model, self.loader, self.cfg = model, loader, cfg
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def fit(self):
        for i, (x, y) in enumerate(self.loader):
            loss = F.cross_entropy(self.model(x), y)
            loss.backward()
            if (i + 1) % self.cfg.accum_steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()
'''
    assert _fixed(source, "TL102") == source.replace("            loss.backward()",
                                                     "            (loss / self.cfg.accum_steps).backward()")


# -- TL402: the path once, synced, through one helper per file; imports where isort puts them --------

TWO_SAVES = '''import time

import torch


def train(model, optimizer, out_dir):
    for epoch in range(3):
        torch.save(model.state_dict(), f"{out_dir}/epoch_{time.time()}.pt")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, "last.pt")
'''


def test_tl402_fix_evaluates_the_path_once_and_syncs_before_the_rename(tmp_path):
    outcome = fix_source(TWO_SAVES, lint(), FixPolicy(unsafe=True, fixable=frozenset({"TL402"})))
    assert outcome.fixed == Counter({"TL402": 2}) and outcome.result.findings == []
    fixed = outcome.source
    assert fixed.count("def atomic_save(") == 1  # one helper for both saves
    assert fixed.count('f"{out_dir}/epoch_{time.time()}.pt"') == 1 and fixed.count('"last.pt"') == 1
    assert fixed.startswith("import os\nimport time\n\nimport torch\n")
    # the helper, run with a stand-in torch: the bytes are flushed and synced before the rename
    calls = []
    namespace = {}
    exec(fixed.split("def train(")[0], namespace)
    namespace["torch"] = type("T", (), {"save": staticmethod(lambda obj, f: (calls.append("save"), f.write(obj)))})
    real_fsync, real_replace = os.fsync, os.replace
    namespace["os"] = type("O", (), {"fsync": staticmethod(lambda fd: (calls.append("fsync"), real_fsync(fd))),
                                     "replace": staticmethod(lambda a, b: (calls.append("replace"), real_replace(a, b)))})
    target = tmp_path / "ckpt.pt"
    namespace["atomic_save"](b"state", str(target))
    assert calls == ["save", "fsync", "replace"]
    assert target.read_bytes() == b"state" and sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]


@pytest.mark.parametrize("header, expected", [
    ("import torch\n", "import os\n\nimport torch\n"),
    ("import argparse\n\nimport torch\n", "import argparse\nimport os\n\nimport torch\n"),
    ("import sys\n\nimport torch\n", "import os\nimport sys\n\nimport torch\n"),
    ("from __future__ import annotations\n\nimport torch\n",
     "from __future__ import annotations\n\nimport os\n\nimport torch\n"),
    ("import argparse\nfrom pathlib import Path\n\nimport torch\n",
     "import argparse\nimport os\nfrom pathlib import Path\n\nimport torch\n"),
    ("from pathlib import Path\n\nimport torch\n", "import os\nfrom pathlib import Path\n\nimport torch\n"),
    ('"""Train."""\nimport torch as T\n', '"""Train."""\nimport os\n\nimport torch as T\n'),
])
def test_tl402_adds_import_os_where_isort_puts_it(header, expected):
    source = header + '\n\ndef save(model):\n    T.save(model.state_dict(), "last.pt")\n'.replace(
        "T.save", "T.save" if "as T" in header else "torch.save")
    outcome = fix_source(source, lint(), FixPolicy(unsafe=True, fixable=frozenset({"TL402"})))
    assert outcome.fixed == Counter({"TL402": 1})
    assert outcome.source.startswith(expected + "\n\ndef atomic_save(obj, path):\n"), outcome.source


def test_fixed_fixtures_and_examples_keep_sorted_imports_sorted(tmp_path):
    """ruff's I001 on every fixture and fixed example: imports sorted first, then fixed with
    `--unsafe-fixes`, then checked again."""
    import importlib.util
    import shutil
    import subprocess
    import sys

    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed (the dev extra has it)")
    command = [sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select", "I001",
               "--line-length", "200", "-q"]
    shutil.copytree(FIXTURES, tmp_path / "fixtures")
    for code, example in (p.values for p in _fixed_examples()):
        (tmp_path / f"{code}_{abs(hash(example.code))}.py").write_text(example.code)
    subprocess.run([*command, "--fix", str(tmp_path)], capture_output=True, check=False)
    projects = tmp_path / "fixtures" / "projects"
    groups = [sorted(p.rglob("*.py")) for p in sorted(projects.iterdir()) if p.is_dir()]
    groups += [[p] for p in sorted(tmp_path.rglob("*.py")) if projects not in p.parents]
    fixed = []
    for group in groups:
        project = Project.for_paths([str(p) for p in group], 10 * 1024 * 1024)
        for path in group:
            outcome = fix_source(path.read_text(), lint(str(path), ALL, project), UNSAFE)
            if outcome.changed:
                path.write_text(outcome.source)
                fixed.append(str(path))
    assert len(fixed) > 50
    result = subprocess.run([*command, "--output-format", "concise", *fixed], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == "", result.stdout


TL102_SHORT_WINDOW = '''import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader


def train(model, dataset, optimizer, accum_steps=4):
    loader = DataLoader(dataset, batch_size=8, shuffle=True)
    for i, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y, ignore_index=-100)
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
'''


@pytest.mark.parametrize("source, leaves_tl103", [
    (TL102_SHORT_WINDOW, True),  # a token-level loss: valid-token counts differ
    (TL102_SHORT_WINDOW.replace(", ignore_index=-100", ""), True),  # no drop_last: the last window is short
    (TL102_SHORT_WINDOW.replace(", ignore_index=-100", "").replace("shuffle=True", "shuffle=True, drop_last=True"),
     False),
])
def test_tl102_fix_title_says_when_the_division_leaves_tl103(source, leaves_tl103):
    (finding,) = [f for f in lint_source(source, "train.py", ALL).findings if f.code == "TL102"]
    outcome = fix_source(source, lint("train.py"), FixPolicy(unsafe=True, fixable=frozenset({"TL102"})))
    assert outcome.fixed == Counter({"TL102": 1})
    left = [f.code for f in outcome.result.findings]
    assert ("TL103" in left) == leaves_tl103 == ("TL103 stays" in finding.fix.title), (finding.fix.title, left)


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_tl402_fix_adds_one_helper_whatever_the_line_ending(newline):
    policy = FixPolicy(unsafe=True, fixable=frozenset({"TL402"}))
    expected = fix_source(TWO_SAVES, lint(), policy).source
    outcome = fix_source(TWO_SAVES.replace("\n", newline), lint(), policy)
    assert outcome.fixed == Counter({"TL402": 2})
    assert outcome.source == expected.replace("\n", newline)


def test_a_counter_in_the_file_name_passed_to_an_atomic_save_helper_is_saved():
    """TL402's fix routes a save through `atomic_save(obj, path)`, which writes `with open(tmp, "wb")
    as f:`: the epoch in the path handed to it still goes into the file name (no new TL404)."""
    source = (
        "import os\n\nimport torch\n\n\n"
        "def atomic_save(obj, path):\n"
        "    tmp = f\"{path}.tmp\"\n"
        "    with open(tmp, \"wb\") as f:\n"
        "        torch.save(obj, f)\n"
        "    os.replace(tmp, path)\n\n\n"
        "def train(model, optimizer, loader, epochs, out):\n"
        "    for epoch in range(epochs):\n"
        "        for x, y in loader:\n"
        "            loss = torch.nn.functional.cross_entropy(model(x), y)\n"
        "            optimizer.zero_grad()\n"
        "            loss.backward()\n"
        "            optimizer.step()\n"
        "        atomic_save({\"model\": model.state_dict(), \"optimizer\": optimizer.state_dict()},\n"
        "                    os.path.join(out, f\"ckpt_{epoch}.pt\"))\n"
    )
    assert [f.line for f in lint()(source).findings if f.code == "TL404"] == []
    # a resume reads the file back: a resume point, and the epoch is then missing
    unnamed = source.replace("f\"ckpt_{epoch}.pt\"", "\"ckpt.pt\"") + (
        "\n\n"
        "def resume(model, optimizer, loader, epochs, out):\n"
        "    state = torch.load(os.path.join(out, \"ckpt.pt\"))\n"
        "    model.load_state_dict(state[\"model\"])\n"
        "    optimizer.load_state_dict(state[\"optimizer\"])\n"
        "    train(model, optimizer, loader, epochs, out)\n"
    )
    assert [f.line for f in lint()(unnamed).findings if f.code == "TL404"] == [20]
