"""What a check produces: findings, fixes and the edits a fix applies.

Lines are 1-based and columns are 1-based character offsets here, as in the JSON contract;
the LSP reporter and server convert to 0-based in `trainlint.positions`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

#: The code of a file that does not parse (or decode); reported by the engine, not by a rule.
SYNTAX_ERROR_CODE = "TL000"


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Edit:
    """Replace the text from (line, column) up to (end_line, end_column) with `content`."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str
    #: in a notebook, the 1-based number of the cell the lines count in (None in a .py file)
    cell: int | None = None

    def to_dict(self) -> dict:
        data = {
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "content": self.content,
        }
        if self.cell is not None:
            data["cell"] = self.cell
        return data


@dataclass(frozen=True)
class Fix:
    title: str
    safe: bool
    edits: tuple[Edit, ...]

    def to_dict(self) -> dict:
        return {"title": self.title, "safe": self.safe, "edits": [e.to_dict() for e in self.edits]}


#: What proves a premise (RULES.md, "Evidence"). A name is never one: a premise resting on a name
#: alone is "unknown", located at the name.
EVIDENCE_KINDS = ("construction", "type", "call", "argument", "use", "decorator", "metadata", "framework")
PROVEN, UNKNOWN = "proven", "unknown"
VERDICTS = (PROVEN, UNKNOWN)


@dataclass(frozen=True)
class Evidence:
    """One premise a finding's message asserts, and the code that proves it (or would: a premise
    that is only guessed is "unknown")."""

    premise: str
    verdict: str
    kind: str
    path: str
    line: int
    #: in a notebook, the cell `line` counts in (as a finding's `cell`); None in a .py file
    cell: int | None = None

    def to_dict(self) -> dict:
        data = {"premise": self.premise, "verdict": self.verdict, "kind": self.kind, "path": self.path,
                "line": self.line}
        if self.cell is not None:
            data["cell"] = self.cell
        return data

    @classmethod
    def from_dict(cls, data: dict, path: str | None = None) -> Evidence:
        return cls(data["premise"], data["verdict"], data["kind"], data["path"] if path is None else path,
                   data["line"], data.get("cell"))


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    name: str
    severity: Severity
    message: str
    fix: Fix | None = None
    #: the premises the message asserts, in the order the rule states them
    evidence: tuple[Evidence, ...] = ()
    #: in a notebook, the 1-based index of the cell among all its cells; `line`/`end_line` count
    #: within that cell (RULES.md, "Notebooks"). None in a .py file.
    cell: int | None = None

    def to_dict(self) -> dict:
        data = {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value,
            "message": self.message,
            "fix": self.fix.to_dict() if self.fix else None,
            "evidence": [e.to_dict() for e in self.evidence],
        }
        if self.cell is not None:  # only in notebooks: a .py file's findings keep their keys
            data["cell"] = self.cell
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Finding:
        fix = data.get("fix")
        return cls(
            path=data["path"],
            line=data["line"],
            column=data["column"],
            end_line=data["end_line"],
            end_column=data["end_column"],
            code=data["code"],
            name=data["name"],
            severity=Severity(data["severity"]),
            message=data["message"],
            fix=Fix(fix["title"], fix["safe"], tuple(Edit(**e) for e in fix["edits"])) if fix else None,
            evidence=tuple(Evidence.from_dict(e, data["path"]) for e in data.get("evidence", ())),
            cell=data.get("cell"),
        )

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.column, self.code)


@dataclass
class FileResult:
    """Everything checking one file produced. `errors` are internal errors (exit code 2)."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: why the file was not checked (too large, not a regular file); it is not an error
    skipped: str | None = None
    #: False when the file could not be read or was skipped: it does not count as checked
    checked: bool = True
