"""Write `rules/_table.py`, the rules' heads (code, name, severity, default, family, module,
triggers, gate), from the rule classes themselves, so selection, the text pre-filter and the gate
decide without importing a rule (`trainlint.rules.heads`).

    python scripts/update_rule_table.py           # rewrite rules/_table.py
    python scripts/update_rule_table.py --check   # exit 1 when it differs from the rule classes

tests/test_rule_table.py runs the check, so the table cannot drift from the classes.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import re
import sys
import types
from pathlib import Path

TABLE = Path(__file__).resolve().parent.parent / "rules" / "_table.py"

HEADER = '''"""Every rule's head (`trainlint.gate.RuleHead`): generated from the rule classes by
`python scripts/update_rule_table.py`; tests/test_rule_table.py fails when it differs from them.
Do not edit by hand."""

# fmt: off
import re

from trainlint.finding import Severity
from trainlint.gate import {names}

HEADS = (
'''


class _Source:
    """Python source for the values a rule's head holds, the same text on every run (sets are
    sorted, patterns keep their flags)."""

    def __init__(self) -> None:
        self.names: set[str] = {"RuleHead"}

    def __call__(self, value) -> str:
        if isinstance(value, enum.Enum):  # before str: Severity is a str enum
            return f"{type(value).__name__}.{value.name}"
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if isinstance(value, tuple):
            return f"({self(value[0])},)" if len(value) == 1 else "(" + ", ".join(map(self, value)) + ")"
        if isinstance(value, frozenset):
            return "frozenset({" + ", ".join(sorted(map(self, value))) + "})" if value else "frozenset()"
        if isinstance(value, re.Pattern):
            return f"re.compile({value.pattern!r}, {value.flags})"
        if isinstance(value, types.FunctionType):
            self.names.add("Deferred")
            return f"Deferred({value.__module__!r}, {value.__qualname__!r})"
        if dataclasses.is_dataclass(value) and type(value).__module__ == "trainlint.gate":
            self.names.add(type(value).__name__)
            fields = ", ".join(f"{f.name}={self(getattr(value, f.name))}" for f in dataclasses.fields(value))
            return f"{type(value).__name__}({fields})"
        raise TypeError(f"a rule head cannot hold {value!r}: state it with trainlint.gate's conditions")


def table_source() -> str:
    from trainlint.rules import head_of, registry

    source = _Source()
    entries = []
    for rule in registry().values():
        head = head_of(rule)
        fields = [(f.name, getattr(head, f.name)) for f in dataclasses.fields(head) if f.name != "via_imports"]
        body = "".join(f"        {name}={source(value)},\n" for name, value in fields)
        entries.append(f"    RuleHead(\n{body}    ),\n")
    return HEADER.format(names=", ".join(sorted(source.names))) + "".join(entries) + ")\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the table is out of date")
    args = parser.parse_args(argv)
    wanted = table_source()
    current = TABLE.read_text(encoding="utf-8") if TABLE.exists() else ""
    if args.check:
        if current != wanted:
            print(f"{TABLE} is out of date: run python scripts/update_rule_table.py", file=sys.stderr)
            return 1
        return 0
    if current != wanted:
        TABLE.write_text(wanted, encoding="utf-8")
        print(f"wrote {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
