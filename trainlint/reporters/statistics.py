"""`--statistics`: how many findings of each code."""

from __future__ import annotations

import json
from collections import Counter
from typing import Sequence

from trainlint.finding import FileResult


def count_codes(results: Sequence[FileResult]) -> list[dict]:
    """One entry per code found, most frequent first: code, name, severity, count."""
    counts: Counter = Counter()
    meta: dict[str, tuple[str, str]] = {}
    for result in results:
        for finding in result.findings:
            counts[finding.code] += 1
            meta[finding.code] = (finding.name, finding.severity.value)
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [{"code": code, "name": meta[code][0], "severity": meta[code][1], "count": count}
            for code, count in ordered]


def render_statistics(fmt: str, results: Sequence[FileResult]) -> str:
    """A table (`text`) or a JSON list (`json`) of counts per code."""
    rows = count_codes(results)
    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    if fmt != "text":
        raise ValueError("--statistics supports --format text or json")
    if not rows:
        return ""
    width = max(len(str(r["count"])) for r in rows)
    name_width = max(len(r["name"]) for r in rows)
    return "".join(f"{r['count']:>{width}}  {r['code']}  {r['name']:<{name_width}}  [{r['severity']}]\n"
                   for r in rows)
