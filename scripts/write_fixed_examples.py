"""Maintenance aid: write the `fixed=` text of a rule's bad examples from what its fix produces.

    python scripts/write_fixed_examples.py TL303 [--check]

For each bad example without `fixed=` whose finding now has a fix, the fixed source is printed
(review it!) and, unless --check, inserted after the example's `line=` argument. Examples whose
stated `fixed=` differs from the fix's output are listed. Nothing else in the file changes.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trainlint.engine import lint_source  # noqa: E402
from trainlint.fixes import apply_fix  # noqa: E402
from trainlint.rules import registry
from trainlint.settings import Settings, resolve_selection  # noqa: E402

ALL = Settings(select=resolve_selection(["ALL"], [], []))


def main(code: str, check: bool) -> int:
    rule = registry()[code]
    path = Path(inspect.getfile(rule))
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    calls = [node for node in ast.walk(ast.parse(text))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "bad"]
    calls.sort(key=lambda n: n.lineno)
    inserts = []
    for example, call in zip(rule.bad_examples(), calls):
        findings = [f for f in lint_source(example.code, "example.py", ALL).findings if f.code == code]
        fix = findings[0].fix if findings else None
        fixed = apply_fix(example.code, fix) if fix else None
        if example.fixed is not None:
            if fixed != example.fixed:
                print(f"--- {code} example at line {call.lineno}: stated fixed differs; the fix gives:\n{fixed}")
            continue
        if fixed is None:
            continue
        print(f"--- {code} example at line {call.lineno} ({fix.title}, safe={fix.safe}):\n{fixed}")
        keyword = next(k for k in call.keywords if k.arg == "line")
        indent = " " * keyword.col_offset
        body = textwrap.indent(fixed, indent, lambda line: line.strip() != "")
        inserts.append((keyword.end_lineno, f'{indent}fixed="""\n{body}{indent}""",\n'))
    if not check:
        for after, block in sorted(inserts, reverse=True):
            lines.insert(after, block)
        path.write_text("".join(lines), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1].upper(), "--check" in sys.argv[2:]))
