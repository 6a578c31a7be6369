"""Regenerate the rule table in README.md and the rule reference docs/rules.md from the registry.

    python scripts/update_readme.py           # rewrite the table between the markers, and docs/rules.md
    python scripts/update_readme.py --check   # exit 1 if either is stale (what the tests do)

The table is `trainlint rules --format md`, placed between `<!-- rules:start -->` and
`<!-- rules:end -->`; docs/rules.md holds every rule's documentation under the anchor that
`Rule.docs_url()` (SARIF help links, LSP diagnostics) points at.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainlint.reporters.catalog import render_reference, render_rules

START, END = "<!-- rules:start -->", "<!-- rules:end -->"
README = Path(__file__).resolve().parent.parent / "README.md"
REFERENCE = README.parent / "docs" / "rules.md"


def with_table(text: str, table: str) -> str:
    """`text` with the block between the markers replaced by `table`."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README has no {START} ... {END} block")
    return text[: start + len(START)] + "\n" + table + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the README is stale; change nothing")
    parser.add_argument("--readme", type=Path, default=README)
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    args = parser.parse_args(argv)
    reference = render_reference()
    current = args.reference.read_text(encoding="utf-8") if args.reference.exists() else None
    if current != reference:
        if args.check:
            print(f"{args.reference}: the rule reference is stale; run `python scripts/update_readme.py`",
                  file=sys.stderr)
            return 1
        args.reference.parent.mkdir(parents=True, exist_ok=True)
        args.reference.write_text(reference, encoding="utf-8")
        print(f"updated {args.reference}")
    text = args.readme.read_text(encoding="utf-8")
    try:
        updated = with_table(text, render_rules("md"))
    except ValueError as err:
        print(f"{args.readme}: {err}", file=sys.stderr)
        return 2
    if updated == text:
        return 0
    if args.check:
        print(f"{args.readme}: the rule table is stale; run `python scripts/update_readme.py`", file=sys.stderr)
        return 1
    args.readme.write_text(updated, encoding="utf-8")
    print(f"updated the rule table in {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
