"""TL002 malformed-noqa: reported by the engine's suppression pass (`trainlint.suppress`)."""

from __future__ import annotations

from trainlint.finding import Severity
from trainlint.rule import Rule, bad, good


class MalformedNoqa(Rule):
    code = "TL002"
    name = "malformed-noqa"
    severity = Severity.WARNING
    summary = "A `# noqa` comment that is neither `# noqa` alone nor `# noqa: CODE, ...`"
    message = "malformed `# noqa`, it suppresses nothing"
    what_it_does = """
        Flags a `# noqa` comment that trainlint cannot read: the colon missing before the codes
        (`# noqa TL401`), a colon with no codes after it (`# noqa:`), words after the codes that
        are not a code (`# noqa: TL401 trusted`), or other text after `noqa`. Codes are rule codes
        (`TL401`) or rule names (`unsafe-torch-load`) separated by commas and/or spaces; after
        them may come another `# comment` or a `(reason)`. A malformed comment suppresses nothing.
        Only comments proven meant for trainlint are judged: those naming a TL code (`TL` and
        digits) or a rule name, and those naming no code at all (`# noqa:`, a bare `# noqa`
        followed by words) on a line where trainlint reports a finding, which the comment then
        fails to silence. Naming no code on a line with no finding of ours, the comment is
        flake8's blanket `# noqa` (`import plugins  # noqa, register module`) and is left alone.
        Other tools' comments are left alone: their codes (`# noqa: E501 long
        line`, also without the colon: `# noqa F401`) and words that are no code of ours
        (`# noqa: GB_REGISTRY`, `# noqa: set_linter`, a sentence for another linter). So is a
        quoted `"# noqa"` (text in a comment, such as a commented-out line of code). A second
        `# noqa` in the same comment is read when the first is another tool's
        (`# noqa: E501 long line  # noqa: TL401`, what `--add-noqa` writes there). The message
        says what is wrong: the missing colon, the empty code list, or the word that is not a code.
        """
    why_bad = """
        Tools disagree on what such a comment means: flake8 reads `# noqa TL401` as a bare
        `# noqa` that silences every rule on the line, so a comment written to silence one code
        hides every other finding there too, without anyone seeing it. trainlint reads it as
        nothing and says so, so that the comment is fixed instead of guessed at.
        """
    references = (
        "https://flake8.pycqa.org/en/latest/user/violations.html#in-line-ignoring-errors",
        "https://docs.astral.sh/ruff/linter/#error-suppression",
    )
    examples = (
        bad(
            """
            import torch

            state = torch.load("ckpt.pt", map_location="cpu", weights_only=False)  # noqa TL401
            """,
            line=3,
            title="the colon is missing",
        ),
        bad(
            """
            import torch

            torch.save(model.state_dict(), "last.pt")  # noqa:
            """,
            line=3,
            title="a colon and no codes",
        ),
        bad(
            """
            import torch

            state = torch.load(path, map_location="cpu", weights_only=False)  # noqa: TL401 trusted files
            """,
            line=3,
            title="a reason without parentheses",
        ),
        bad(
            """
            import torch

            state = torch.load(path, weights_only=False)  # noqa because the file is ours
            """,
            line=3,
            title="words after a bare noqa, on a line with a finding it fails to silence",
        ),
        good(
            """
            import torch
            import torch_geometric.graphgym.models.head  # noqa, register module
            from fairseq.hub_utils import BPEHubInterface  # noqa; noqa
            """,
            title="words after a bare noqa on a line with no finding: flake8's blanket comment",
        ),
        good(
            """
            import torch

            state = torch.load(path, map_location="cpu", weights_only=False)  # noqa: TL401  (trusted files)
            """,
            title="a reason in parentheses",
        ),
        good(
            """
            import torch

            state = torch.load(path, map_location="cpu", weights_only=False)  # noqa:TL401,unsafe-torch-load
            """,
            title="codes and names, no spaces",
        ),
        good(
            """
            x = compute()  # noqa: E501 line too long
            """,
            title="another tool's comment",
        ),
        bad(
            """
            import torch

            ckpt = torch.load(path, weights_only=False)  # noqa E501, unsafe-torch-load
            """,
            line=3,
            title="the colon is missing before another tool's code and one of ours",
        ),
        good(
            """
            from .backends import nccl  # noqa: GB_REGISTRY
            import setuptools  # noqa: set_linter
            import readline  # noqa: imported for its side effect on input()
            """,
            title="other tools' codes and words that are no code of ours",
        ),
        good(
            """
            import torch

            state = torch.load(path, weights_only=False)  # noqa: E501  trusted source  # noqa: TL401
            """,
            title="a trainlint `# noqa` after another tool's comment",
        ),
        good(
            '''
            print("write `# noqa TL401` like this")
            ''',
            title="text in a string is not a comment",
        ),
        good(
            """
            from .registry import build_trainer, TRAINER_REGISTRY  # noqa F401
            """,
            title="the colon is missing, but only another tool's code is named: that tool's business",
        ),
        good(
            """
            # generated with:
            # TABLE = repr(rows) + "  # noqa"
            TABLE = [1, 2, 3]
            """,
            title="a quoted `# noqa` in a commented-out line is text, not a directive",
        ),
        good(
            """
            x = compute()  # type: ignore  # noqa
            """,
            title="a bare noqa after another comment",
        ),
    )

    def check(self, ctx):
        return ()  # reported after suppression, where the comments are read
