"""The rule base class, its examples, and the registry.

A rule is one class in one module under `rules/`. Subclassing `Rule` with a `code` registers it;
`trainlint.rules` imports every module in its folder, so adding a rule is adding a file.
The examples are the single source for the tests, `trainlint explain`, the README table,
SARIF rule metadata and LSP hover text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Iterable

from trainlint.finding import Severity
from trainlint.gate import DOCS_URL, triggered  # noqa: F401 (DOCS_URL: a rule's docs, as before)

if TYPE_CHECKING:  # LibCST only in annotations: selection imports this module, never LibCST
    import libcst as cst

    from trainlint.model.premises import Premise

    from trainlint.context import FileContext
    from trainlint.gate import Gate


def _clean(code: str) -> str:
    """`textwrap.dedent(code)` without its blank lines at either end, ending in one newline.

    Every rule's examples are cleaned when its module is imported, so a one-file check paid for
    dedent's regular expressions hundreds of times: code indented with spaces only (every example)
    takes a plain loop that gives dedent's result (a line of spaces only becomes empty; the common
    indentation of the other lines is removed); a tab goes to dedent itself."""
    if "\t" in code:
        import textwrap  # compiles its word-splitting patterns when imported: only here

        return textwrap.dedent(code).strip("\n") + "\n"
    lines = code.split("\n")
    margin = min((len(line) - len(line.lstrip(" ")) for line in lines if line.strip(" ")), default=0)
    return "\n".join(line[margin:] if line.strip(" ") else "" for line in lines).strip("\n") + "\n"


@dataclass(frozen=True)
class Example:
    """A snippet the rule must flag (`line` is the 1-based line reported) or leave alone."""

    code: str
    line: int | None = None
    fixed: str | None = None
    title: str = ""
    #: the severity the finding is reported at, when lower than the rule's (a documented case)
    severity: Severity | None = None

    @property
    def is_bad(self) -> bool:
        return self.line is not None


def bad(code: str, line: int, fixed: str | None = None, title: str = "", severity: Severity | None = None) -> Example:
    return Example(_clean(code), line, _clean(fixed) if fixed is not None else None, title, severity)


def good(code: str, title: str = "") -> Example:
    return Example(_clean(code), None, None, title)


@dataclass(frozen=True)
class Report:
    """A finding before positions are resolved: the rule and the node it points at."""

    rule: "Rule"
    node: cst.CSTNode
    message: str
    fix: "FixSpec | None" = None
    #: lower than the rule's own in a documented case (a hazard real only under a setting that is
    #: not the default, a training-loss log); None: the rule's severity
    severity: Severity | None = None
    #: the premises the message asserts, each at the code that proves it (`premise(...)`)
    evidence: tuple[Premise, ...] = ()


@dataclass(frozen=True)
class FixSpec:
    """A fix as a rule states it: replace `node` with `replacement` (a node or source text), and
    line edits of whole statements (`before`, `after`, `delete`, `rewrite` below).

    A line edit needs its statement to stand alone on its lines (nothing before it but
    indentation, nothing after it but a comment); where it does not, the finding gets no fix.
    Its code is written at the statement's indentation, one line per line of `code`."""

    title: str
    safe: bool
    replacements: tuple[tuple[cst.CSTNode, "cst.CSTNode | str"], ...] = ()
    lines: tuple[tuple[str, cst.CSTNode, str], ...] = ()


def before(statement: cst.CSTNode, code: str) -> tuple[str, cst.CSTNode, str]:
    """A line edit: `code` on lines of its own just above `statement` (below its comments)."""
    return ("before", statement, code)


def after(statement: cst.CSTNode, code: str) -> tuple[str, cst.CSTNode, str]:
    """A line edit: `code` on lines of its own just below `statement` (a compound one's whole block)."""
    return ("after", statement, code)


def delete(statement: cst.CSTNode) -> tuple[str, cst.CSTNode, str]:
    """A line edit: remove the lines of `statement`, its trailing comment included."""
    return ("rewrite", statement, "")


def rewrite(statement: cst.CSTNode, code: str) -> tuple[str, cst.CSTNode, str]:
    """A line edit: the lines of `statement` replaced by `code` (relative to its indentation)."""
    return ("rewrite", statement, code)


_REGISTRY: dict[str, type["Rule"]] = {}
_LOWER = {Severity.ERROR: Severity.WARNING, Severity.WARNING: Severity.INFO, Severity.INFO: Severity.INFO}


class Rule:
    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    severity: ClassVar[Severity] = Severity.WARNING
    enabled_by_default: ClassVar[bool] = True
    #: One line: what is flagged. Used in tables, SARIF shortDescription, hover titles.
    summary: ClassVar[str] = ""
    #: Default message of a finding.
    message: ClassVar[str] = ""
    #: Documentation sections (markdown). "Example" and "Use instead" come from `examples`.
    what_it_does: ClassVar[str] = ""
    why_bad: ClassVar[str] = ""
    references: ClassVar[tuple[str, ...]] = ()
    #: For a rule with a fix: whether it is safe, as ruff decides it (safe only when it cannot change
    #: behaviour on code where the finding is wrong), starting "Safe", "Unsafe" or "Safe for/where".
    fix_safety: ClassVar[str] = ""
    examples: ClassVar[tuple[Example, ...]] = ()
    #: Text pre-filter: the rule runs only on files matching at least one trigger. A trigger is a
    #: string that must occur (or a text test with a `search(source)` method, as a compiled pattern
    #: or `trainlint.gate.reference_text`), or a tuple of them that must all occur. Empty: always runs.
    triggers: ClassVar[tuple] = ()
    #: The gate (`trainlint.gate`), checked on Python's own parse of a file that passed the text
    #: pre-filter: what the code (not its comments or strings) must hold for this rule to report
    #: anything. It must be a necessary condition; None: the rule runs whenever a trigger occurs.
    gate: ClassVar["Gate | None"] = None
    #: the trigger words may also sit in a project file that the checked file imports (`evaluate(model)`
    #: from engine.py, whose body calls `model.eval()`), provided the file itself holds one of these
    #: words (what the rule needs to find in the file for such a helper to matter)
    imported_triggers: ClassVar[tuple[str, ...]] = ()
    #: The gate when the rule runs because of such an imported file: what this file must still
    #: hold (the evaluation or the training loop the helper's effect reaches). It must be implied
    #: by `gate`; None: the rule then runs ungated.
    imported_gate: ClassVar["Gate | None"] = None
    #: set on an instance that runs because of an imported file (`imported_triggers`)
    via_imports: bool = False

    @classmethod
    def may_match(cls, source: str, found: dict[str, bool] | None = None) -> bool:
        """Some trigger occurs in `source` (`trainlint.gate.triggered`)."""
        return triggered(cls.triggers, source, found)

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.code:
            if cls.code in _REGISTRY and _REGISTRY[cls.code] is not cls:
                raise RuntimeError(f"rule code {cls.code} registered twice")
            _REGISTRY[cls.code] = cls

    # -- checking ---------------------------------------------------------------------------
    def check(self, ctx: "FileContext") -> Iterable[Report]:
        raise NotImplementedError

    def report(self, node: cst.CSTNode, message: str | None = None, fix: FixSpec | None = None,
               severity: Severity | None = None, evidence: Iterable[Premise] = ()) -> Report:
        return Report(self, node, message or self.message, fix, severity, tuple(evidence))

    def report_if(self, condition: str | None, node: cst.CSTNode, message: str, fix: FixSpec | None = None,
                  evidence: Iterable[Premise] = ()) -> Report:
        """A finding that holds only under `condition` (a setting that is not the default, such as
        K > 1 where K defaults to 1): said first in the message, and one severity lower. With no
        condition, a plain report."""
        if condition is None:
            return self.report(node, message, fix, evidence=evidence)
        return self.report(node, f"if {condition}: {message}", fix, severity=_LOWER[self.severity],
                           evidence=evidence)

    # -- documentation ----------------------------------------------------------------------
    @classmethod
    def bad_examples(cls) -> list[Example]:
        return [e for e in cls.examples if e.is_bad]

    @classmethod
    def good_examples(cls) -> list[Example]:
        return [e for e in cls.examples if not e.is_bad]

    @classmethod
    def docs_url(cls) -> str:
        return DOCS_URL.format(code=cls.code.lower())

    @classmethod
    def documentation(cls) -> str:
        """The rule's documentation as markdown, rendered from its fields and tested examples."""
        parts = [f"# {cls.code} {cls.name} ({cls.severity.value})", "", cls.summary, ""]
        parts += ["## What it does", _clean(cls.what_it_does).rstrip(), ""]
        parts += ["## Why is this bad?", _clean(cls.why_bad).rstrip(), ""]
        bads = cls.bad_examples()
        if bads:
            first = bads[0]
            parts += ["## Example", "```python", first.code.rstrip(), "```", ""]
            instead = first.fixed or (cls.good_examples()[0].code if cls.good_examples() else None)
            if instead:
                parts += ["## Use instead", "```python", instead.rstrip(), "```", ""]
        if cls.fix_safety:
            parts += ["## Fix safety", _clean(cls.fix_safety).rstrip(), ""]
        if cls.references:
            parts += ["## References"] + [f"- {r}" for r in cls.references] + [""]
        return "\n".join(parts).rstrip() + "\n"


def registered() -> dict[str, type[Rule]]:
    """The rule classes registered so far by code, in code order (every rule: `trainlint.rules.registry`,
    which imports them first; the base class sits below the rules and never imports them)."""
    return dict(sorted(_REGISTRY.items()))

