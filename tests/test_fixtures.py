"""Whole-file fixtures: realistic scripts whose expected findings are trailing comments.

A line ending in `# expect: TL101` (or `# expect: TL101, TL202`) must get exactly those codes;
every other line must get none. All rules are selected.

Files under `projects/<name>/` are checked as one project (imports between them are followed),
like `trainlint check projects/<name>` would.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from trainlint.engine import lint_path
from trainlint.reader.project import Project
from trainlint.settings import Settings, resolve_selection

FIXTURES = Path(__file__).parent / "fixtures"
EXPECT = re.compile(r"#.*?\bexpect:\s*(?P<codes>TL\d{3}(?:\s*,\s*TL\d{3})*)")
ALL = Settings(select=resolve_selection(["ALL"], [], []))


def expected_findings(path: Path) -> Counter:
    expected: Counter = Counter()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            for code in match.group("codes").split(","):
                expected[(number, code.strip())] += 1
    return expected


FILES = sorted(FIXTURES.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIXTURES)) for p in FILES])
def test_fixture(path):
    parts = path.relative_to(FIXTURES).parts
    project = Project(FIXTURES / "projects" / parts[1]) if parts[0] == "projects" else None
    result = lint_path(str(path), ALL, project=project)
    assert result.errors == []
    actual = Counter((f.line, f.code) for f in result.findings)
    expected = expected_findings(path)
    missing = sorted((expected - actual).elements())
    unexpected = sorted((actual - expected).elements())
    details = {(f.line, f.code): f.message for f in result.findings}
    assert not missing and not unexpected, (
        f"missing (line, code): {missing}\nunexpected: {[(k, details[k]) for k in unexpected]}"
    )
