"""What checking a file may cost in memory, estimated before anything parses it.

LibCST's tree takes 2-3 KB per token of source (500 bytes per byte of realistic training code,
1,800 for a file of `x = 1` lines), Python's own tree and the model's index add about a third:
a 9 MB file of short statements took 16 GB. The estimate counts tokens with one regular
expression (C speed, a few hundred ms for 1 MB) at 4 KB each, the measured peak of a whole check
with a margin. A file whose estimate passes its budget (300 bytes per byte of source, and never
less than 512 MB: a small file's trees take tens of MB) is declined with a skipped-file notice,
by the command line and the language server alike.
"""

from __future__ import annotations

import re

MEMORY_PER_SOURCE_BYTE = 300
MEMORY_FLOOR = 512 << 20
#: The measured peak memory of a whole check per token (`scripts/scaling.py` shapes, `x = 1` lines).
BYTES_PER_TOKEN = 4096
_TOKEN = re.compile(r"[A-Za-z_0-9]+|[^\sA-Za-z_0-9]")


def budget(size: int) -> int:
    """Bytes of memory a check of `size` bytes of source may take."""
    return max(MEMORY_FLOOR, MEMORY_PER_SOURCE_BYTE * size)


def over_budget(source: str, path: str) -> str | None:
    """The skipped-file notice of a source whose check would take more memory than its budget;
    None when it fits."""
    if len(source) * BYTES_PER_TOKEN <= MEMORY_FLOOR:
        return None  # fewer characters than the floor allows tokens: nothing to count
    size = len(source.encode("utf-8", "surrogatepass"))
    allowed = budget(size)
    tokens = _TOKEN.subn("", source)[1]
    estimate = tokens * BYTES_PER_TOKEN
    if estimate <= allowed:
        return None
    return (f"skipped {path}: checking it would take about {estimate >> 20:,} MB of memory ({tokens:,} tokens "
            f"in {size:,} bytes), over its budget of {allowed >> 20:,} MB ({MEMORY_PER_SOURCE_BYTE} MB per MB "
            f"of source, at least {MEMORY_FLOOR >> 20} MB)")
