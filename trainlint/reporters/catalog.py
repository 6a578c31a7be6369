"""Every code trainlint can report, with its metadata: TL000 plus the rule registry.

TL000 (a file that does not parse) is produced by the engine, not by a rule class, so its
metadata is defined here, once, for `trainlint rules`, `trainlint explain`, SARIF and the LSP.
The rule listing (`trainlint rules`, the README table) is rendered here too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from trainlint.finding import Severity
from trainlint.gate import DOCS_URL
from trainlint.rules import heads, registry
from trainlint.settings import SYNTAX_ERROR_CODE


@dataclass(frozen=True)
class RuleInfo:
    code: str
    name: str
    severity: Severity
    enabled_by_default: bool
    summary: str
    description: str  # "What it does", plain text
    documentation: str  # markdown
    docs_url: str

    def to_dict(self) -> dict:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value,
            "enabled_by_default": self.enabled_by_default,
            "summary": self.summary,
        }


_SYNTAX_ERROR_DOC = """\
# TL000 syntax-error (error)

The file cannot be read as Python source.

## What it does
Reports a file that does not parse: a syntax error, Python 2 code, bytes that cannot be decoded
with the file's encoding, or a NUL byte. The finding sits where the parser stopped. Every other
file of the run is still checked.

## Why is this bad?
No rule can check a file that does not parse, so a broken file would otherwise pass silently.
A training script that does not parse also fails the moment it is launched.

## Example
```python
print "epoch", epoch
```

## Use instead
```python
print("epoch", epoch)
```
"""

SYNTAX_ERROR = RuleInfo(
    code=SYNTAX_ERROR_CODE,
    name="syntax-error",
    severity=Severity.ERROR,
    enabled_by_default=True,
    summary="The file does not parse (syntax error, Python 2, undecodable bytes, NUL bytes)",
    description="Reports a file that does not parse, at the position where the parser stopped; "
                "every other file is still checked.",
    documentation=_SYNTAX_ERROR_DOC,
    docs_url=DOCS_URL.format(code=SYNTAX_ERROR_CODE.lower()),
)


def _first_paragraph(markdown: str) -> str:
    return " ".join(line.strip() for line in markdown.strip().splitlines()).strip()


def catalog() -> list[RuleInfo]:
    """TL000 and every registered rule, in code order."""
    infos = [SYNTAX_ERROR]
    for code, rule in registry().items():
        infos.append(RuleInfo(
            code=code,
            name=rule.name,
            severity=rule.severity,
            enabled_by_default=rule.enabled_by_default,
            summary=rule.summary,
            description=_first_paragraph(rule.what_it_does) or rule.summary,
            documentation=rule.documentation(),
            docs_url=rule.docs_url(),
        ))
    return infos


def lookup(code_or_name: str) -> RuleInfo | None:
    """A rule by its code (`TL101`, any case) or its name (`scheduler-step-per-micro-batch`)."""
    wanted = code_or_name.strip()
    return next((info for info in catalog() if info.code == wanted.upper() or info.name == wanted.lower()), None)


def docs_urls() -> dict[str, str]:
    """Every code's documentation link (the JSON `url`, SARIF `helpUri`, LSP `codeDescription`):
    from the rules' table, so printing a finding imports no rule (`Rule.docs_url`'s format; a test
    keeps them equal)."""
    return {SYNTAX_ERROR_CODE: SYNTAX_ERROR.docs_url, **{code: DOCS_URL.format(code=code.lower()) for code in heads()}}


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_reference() -> str:
    """docs/rules.md: every code's documentation, each under an anchor that `Rule.docs_url()` names."""
    parts = ["# trainlint rules", "",
             "Generated from the rule classes by `python scripts/update_readme.py`; do not edit by hand.", ""]
    parts += [f"- [{info.code} `{info.name}`](#{info.code.lower()}) ({info.severity.value})" for info in catalog()]
    for info in catalog():
        parts += ["", f'<a id="{info.code.lower()}"></a>', "", info.documentation.rstrip()]
    return "\n".join(parts) + "\n"


def render_rules(fmt: str) -> str:
    """The rule listing as `table` (for a terminal), `json` or `md` (the README table)."""
    infos = catalog()
    if fmt == "json":
        return json.dumps([info.to_dict() for info in infos], indent=2) + "\n"
    if fmt == "md":
        lines = ["| code | name | severity | default | summary |", "|---|---|---|---|---|"]
        for info in infos:
            default = "on" if info.enabled_by_default else "off"
            lines.append(f"| {info.code} | `{info.name}` | {info.severity.value} | {default} | "
                         f"{_md_cell(info.summary)} |")
        return "\n".join(lines) + "\n"
    if fmt == "table":
        header = ("code", "name", "severity", "default", "summary")
        rows = [(i.code, i.name, i.severity.value, "on" if i.enabled_by_default else "off", i.summary)
                for i in infos]
        widths = [max(len(row[c]) for row in [header, *rows]) for c in range(4)]
        out = []
        for row in [header, *rows]:
            out.append("  ".join(cell.ljust(widths[c]) for c, cell in enumerate(row[:4])) + "  " + row[4])
        return "\n".join(out) + "\n"
    raise ValueError(f"unknown rules format '{fmt}'")
