"""The language server's sliced checks (`trainlint.document`) give a full check's findings on
every version of edits of every fixture and rule example: each definition changed in ways that
change findings, moved down, removed and put back."""

from __future__ import annotations

import pytest

from test_incremental import _sources
from trainlint.document import DocumentLinter
from trainlint.engine import lint_source
from trainlint.incremental import split
from trainlint.settings import Settings, resolve_selection

ALL = Settings(select=resolve_selection(["ALL"], [], []))

# Edits that change what the rules report, applied to one definition at a time
MUTATIONS = [
    ("weights_only=True", "weights_only=False"), ("no_grad()", "enable_grad()"), (".train()", ".eval()"),
    (".eval()", ".train()"), ("zero_grad()", "zero_grad"), ("os.replace(", "print("), (".detach()", ""),
    ("scheduler.step()", "pass"), ("/ accum", ""), ("unscale_(", "print("), ("loss.item()", "loss"),
    ("shuffle=False", "shuffle=True"), ("drop_last=False", "drop_last=True"), ("return ", "return None and "),
]


def _definitions(source: str) -> list[int]:
    return [n for n, (_, text) in enumerate(split(source)) if text.startswith(("def ", "class ", "async def ", "@"))]


def _versions(source: str):
    """Edits of each definition in turn, each from the version before it."""
    for number in _definitions(source):
        pieces = [text for _, text in split(source)]
        original = pieces[number]
        for old, new in MUTATIONS:
            if old in original:
                yield "".join(pieces[:number] + [original.replace(old, new, 1)] + pieces[number + 1:])
        head, _, body = original.partition("\n")
        yield "".join(pieces[:number] + [head + "\n    # a comment moves what follows\n" + body] + pieces[number + 1:])
        yield "".join(pieces[:number] + pieces[number + 1:])  # removed
        yield source  # and back


def _findings(result) -> list[dict]:
    assert result.errors == []
    return [f.to_dict() for f in result.findings]


@pytest.mark.parametrize("source", list(_sources()))
def test_sliced_checks_give_the_findings_of_a_full_check(source):
    linter = DocumentLinter(largest_slice=1.0)  # slice whenever the edit allows, even a small file
    assert _findings(linter.lint(source, "x.py", ALL)) == _findings(lint_source(source, "x.py", ALL))
    for version in _versions(source):
        assert _findings(linter.lint(version, "x.py", ALL)) == _findings(lint_source(version, "x.py", ALL))


def test_edits_of_a_long_script_are_checked_as_slices():
    """The latency script's experiment runner: every edit is a slice (not the whole file), and
    each gives the full check's findings."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
    from lsp_latency import edited, training_script

    text = training_script(800)
    linter = DocumentLinter()
    settings = Settings()
    linter.lint(text, "runner.py", settings)
    versions = edited(text, 6)
    for version in versions:
        assert _findings(linter.lint(version, "runner.py", settings)) == _findings(
            lint_source(version, "runner.py", settings))
    assert linter.sliced == len(versions)


def test_a_changed_module_level_statement_is_a_whole_file_check():
    source = "import torch\nLIMIT = 3\n\n\ndef load(path):\n    return torch.load(path, weights_only=True)\n\n\n" \
             "def other(path):\n    return torch.load(path, weights_only=True)\n"
    linter = DocumentLinter(largest_slice=1.0)
    linter.lint(source, "x.py", ALL)
    linter.lint(source.replace("weights_only=True", "weights_only=False", 1), "x.py", ALL)
    assert linter.sliced == 1
    linter.lint(source.replace("LIMIT = 3", "LIMIT = 4"), "x.py", ALL)
    assert linter.sliced == 1


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_sliced_checks_keep_positions_with_other_line_endings(newline):
    """CRLF documents are sliced; a document of bare CRs (which the incremental parse reads
    whole) is checked whole, with the same findings."""
    source = "\n".join(f"def restore_{n}(model, path):\n    state = torch.load(path, weights_only=True)\n"
                       f"    model.load_state_dict(state)\n\n" for n in range(6))
    source = ("import torch\n\n\n" + source).replace("\n", newline)
    linter = DocumentLinter(largest_slice=1.0)
    linter.lint(source, "x.py", ALL)
    for version in _versions(source):
        assert _findings(linter.lint(version, "x.py", ALL)) == _findings(lint_source(version, "x.py", ALL))
    assert (linter.sliced > 0) == (newline == "\r\n")


def test_an_edit_reads_what_only_its_own_new_piece_says(monkeypatch):
    """After the first slice, an edit of one definition works out the names (`_names`) of its new
    text only: the replaced text's were worked out when it was the document's."""
    import sys
    from pathlib import Path

    import trainlint.document as document

    sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
    from lsp_latency import edited, training_script

    said = []
    real = document._names
    monkeypatch.setattr(document, "_names", lambda text, tree, name: said.append(text) or real(text, tree, name))
    text = training_script(600)
    linter = DocumentLinter()
    settings = Settings()
    linter.lint(text, "runner.py", settings)
    versions = edited(text, 4)
    linter.lint(versions[0], "runner.py", settings)  # the first slice reads every piece once
    for before, version in zip(versions, versions[1:]):
        said.clear()
        assert _findings(linter.lint(version, "runner.py", settings)) == _findings(
            lint_source(version, "runner.py", settings))
        new = [text for _, text in split(version) if text not in {t for _, t in split(before)}]
        assert said == new and len(new) == 1
