"""The progress line of a long `check`: files done out of the total and the rate, on stderr.

Shown only where someone watches it and it cannot end up in a report: stderr is a terminal, the
format is text, `-q` is not given, and more than `MIN_FILES` files are checked. The line is
cleared when the run ends, before the report is printed (tqdm draws it; `leave=False`).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator

#: below this many files a run is quick enough to need no sign of life
MIN_FILES = 200


def wanted(total: int, fmt: str, quiet: bool, stream=None) -> bool:
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return total > MIN_FILES and fmt == "text" and not quiet and bool(isatty and isatty())


@contextmanager
def progress(total: int, enabled: bool, stream=None) -> Iterator[Callable[[], None]]:
    """A function to call once per file checked (it does nothing when not `enabled`)."""
    if not enabled:
        yield lambda: None
        return
    from tqdm import tqdm

    bar = tqdm(total=total, desc="Checking", unit=" files", file=stream if stream is not None else sys.stderr,
               leave=False, dynamic_ncols=True, mininterval=0.2,
               bar_format="{desc} {n_fmt}/{total_fmt} files [{elapsed}, {rate_fmt}]")
    try:
        yield lambda: bar.update(1)
    finally:
        bar.close()
