"""`# noqa` comments and `# trainlint: disable-file=...` directives."""

from __future__ import annotations

import re

NOQA_PATTERN = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:\s*,\s*[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)
_DISABLE_FILE = re.compile(
    r"^\s*#\s*trainlint:\s*disable-file(?:\s*=\s*(?P<codes>[A-Za-z0-9,\s]+?))?\s*$", re.MULTILINE
)
ALL = frozenset({"*"})


def noqa_codes(line_text: str) -> frozenset[str] | None:
    """Codes a line's `# noqa` suppresses: None if it has none, ALL for a bare `# noqa`."""
    match = NOQA_PATTERN.search(line_text)
    if match is None:
        return None
    codes = match.group("codes")
    if not codes:
        return ALL
    return frozenset(c.strip().upper() for c in codes.split(","))


def file_disabled_codes(source: str) -> frozenset[str]:
    """Codes disabled for the whole file by `# trainlint: disable-file[=TL402, TL403]`."""
    disabled: set[str] = set()
    for match in _DISABLE_FILE.finditer(source):
        codes = match.group("codes")
        if not codes:
            return ALL
        disabled |= {c.strip().upper() for c in codes.split(",") if c.strip()}
    return frozenset(disabled)


def is_suppressed(code: str, line_codes: frozenset[str] | None, file_codes: frozenset[str]) -> bool:
    if file_codes is ALL or "*" in file_codes or code in file_codes:
        return True
    return line_codes is not None and (line_codes is ALL or "*" in line_codes or code in line_codes)
