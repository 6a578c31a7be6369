"""TL001 unused-noqa: reported by the engine's suppression pass (`trainlint.suppress`)."""

from __future__ import annotations

from trainlint.finding import Severity
from trainlint.rule import Rule, bad, good


class UnusedNoqa(Rule):
    code = "TL001"
    name = "unused-noqa"
    severity = Severity.WARNING
    summary = "A `# noqa` code that suppressed nothing on its line, or a TL code that does not exist"
    message = "unused `# noqa` code"
    what_it_does = """
        Flags each trainlint code (or rule name) in a `# noqa: ...` comment that suppressed no
        finding on its line in this run, and each TL code that names no rule (`TL999`, a typo such
        as `TL41`). Codes of rules that did not run on the file (not selected, or ignored there by
        `per-file-ignores`) are not judged, and neither are other tools' codes (`E501`, `F401`)
        nor a bare `# noqa`, which may be there for another linter. The fix removes the unused
        codes, or the whole comment when none is left (a comment after it stays).
        A `# noqa: TL001` on the same line keeps a code on purpose.
        """
    why_bad = """
        A suppression outlives the code it was written for: the load gets `weights_only=True`,
        the save becomes atomic, and the `# noqa: TL401` stays. It then hides the next real
        finding on that line without anyone deciding so, and tells the reader that the line is
        unsafe when it is not. A misspelt code suppresses nothing while looking as if it did.
        """
    fix_safety = """
        Safe: it edits a comment only, so the program runs the same whether or not the code was
        needed.
        """
    references = (
        "https://docs.astral.sh/ruff/rules/unused-noqa/",
        "https://flake8.pycqa.org/en/latest/user/violations.html#in-line-ignoring-errors",
    )
    examples = (
        bad(
            """
            import torch

            state = torch.load("ckpt.pt", map_location="cpu", weights_only=True)  # noqa: TL401
            """,
            line=3,
            fixed="""
            import torch

            state = torch.load("ckpt.pt", map_location="cpu", weights_only=True)
            """,
            title="the load was made safe; the suppression stayed",
        ),
        bad(
            """
            import torch

            state = torch.load("ckpt.pt", map_location="cpu", weights_only=False)  # noqa: TL401, TL402
            """,
            line=3,
            fixed="""
            import torch

            state = torch.load("ckpt.pt", map_location="cpu", weights_only=False)  # noqa: TL401
            """,
            title="one code is used, the other suppresses nothing",
        ),
        bad(
            """
            def evaluate(model, loader):
                model.eval()  # noqa: TL999  (kept from an old version)
                return [model(x) for x in loader]
            """,
            line=2,
            fixed="""
            def evaluate(model, loader):
                model.eval()
                return [model(x) for x in loader]
            """,
            title="an unknown code",
        ),
        bad(
            """
            import os

            path = os.path.join(out_dir, "last.pt")  # noqa: non-atomic-checkpoint-save  # see #42
            """,
            line=3,
            fixed="""
            import os

            path = os.path.join(out_dir, "last.pt")  # see #42
            """,
            title="a rule name on a line where that rule never reports; the other comment stays",
        ),
        bad(
            """
            import torch

            state = torch.load("ckpt.pt", map_location="cpu", weights_only=False)  # noqa: E501, TL401 TL401
            """,
            line=3,
            fixed="""
            import torch

            state = torch.load("ckpt.pt", map_location="cpu", weights_only=False)  # noqa: E501, TL401
            """,
            title="a code written twice",
        ),
        good(
            """
            import torch

            state = torch.load("ckpt.pt", map_location="cpu", weights_only=False)  # noqa: TL401
            """,
            title="the code suppresses the finding on its line",
        ),
        good(
            """
            import torch

            state = torch.load("ckpt.pt", map_location="cpu", weights_only=False)  # noqa: unsafe-torch-load
            """,
            title="a rule name that suppresses its finding",
        ),
        good(
            """
            from train import *  # noqa: F401, F403
            x = 1  # noqa
            """,
            title="other tools' codes and a bare noqa are not trainlint's to judge",
        ),
        good(
            '''
            HELP = "add `# noqa: TL401` to keep a trusted load"
            ''',
            title="text in a string is not a comment",
        ),
        good(
            """
            import torch

            state = torch.load("ckpt.pt", map_location="cpu", weights_only=True)  # noqa: TL401, TL001
            """,
            title="kept on purpose with `# noqa: TL001`",
        ),
    )

    def check(self, ctx):
        return ()  # reported after suppression, where it is known what each `# noqa` suppressed
