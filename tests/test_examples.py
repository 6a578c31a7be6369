"""The bundled examples: each `# expect: TLxxx` comment is a finding trainlint must report there,
and no other line may be reported (all rules selected).

Only codes that are registered are checked, so an example can mark a hazard before its rule
lands; once the rule exists it must find the marked line. If this fails after adding a rule,
either the rule misses a realistic spelling or the example's comment is wrong: fix whichever it is.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from trainlint.engine import lint_path
from trainlint.rules import registry
from trainlint.settings import Settings, resolve_selection

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXPECT = re.compile(r"#.*?\bexpect:\s*(?P<codes>TL\d{3}(?:\s*,\s*TL\d{3})*)")
ALL = Settings(select=resolve_selection(["ALL"], [], []))
FILES = sorted(EXAMPLES.glob("*.py"))


def expected(path: Path, known: set[str]) -> Counter:
    found: Counter = Counter()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            for code in (c.strip() for c in match.group("codes").split(",")):
                if code in known:
                    found[(number, code)] += 1
    return found


def test_there_are_buggy_and_clean_examples():
    marked = [p for p in FILES if EXPECT.search(p.read_text())]
    assert len(marked) >= 3 and len(FILES) - len(marked) >= 1


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_example_findings(path):
    result = lint_path(str(path), ALL)
    assert result.errors == []
    known = set(registry()) | {"TL000"}
    actual = Counter((f.line, f.code) for f in result.findings)
    want = expected(path, known)
    missing = sorted((want - actual).elements())
    unexpected = sorted((actual - want).elements())
    messages = {(f.line, f.code): f.message for f in result.findings}
    assert not missing and not unexpected, (
        f"{path.name}: missing (line, code): {missing}; "
        f"unexpected: {[(key, messages[key]) for key in unexpected]}"
    )
