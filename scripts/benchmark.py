"""Time a full trainlint check against LibCST's bare parse of the same files, in one process.

    python scripts/benchmark.py                 # the installed torch package's sources
    python scripts/benchmark.py path/to/project --repeat 3

trainlint runs with every rule selected, no cache and one process (`lint_source` on each file's
bytes, with a project index built cold inside the timing; `--per-file` checks each file alone);
the baseline is `libcst.parse_module` on each file's text. Files are read into memory
first so neither timing includes disk reads. torch is located with `importlib.util.find_spec`,
never imported. The numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import libcst

from trainlint.discovery import discover
from trainlint.engine import decode_source, lint_source
from trainlint.model.project import Project
from trainlint.rule import registry
from trainlint.settings import Settings, resolve_selection


def torch_sources() -> Path:
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch is not installed; pass a directory to benchmark")
    return Path(next(iter(spec.submodule_search_locations)))


def load(directory: Path) -> list[tuple[str, bytes]]:
    return [(path, Path(path).read_bytes()) for path in discover([str(directory)])]


class Timer:
    """Wall-clock and CPU seconds of this process (CPU time stays honest on a busy machine)."""

    def __enter__(self) -> "Timer":
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu


def time_trainlint(files: list[tuple[str, bytes]], settings: Settings,
                   as_project: bool = True) -> tuple[Timer, int, int]:
    """A cold check: a fresh project index (imports resolved, imported files read and summarised
    on demand) is built inside the timing, as `trainlint check DIR` builds it."""
    findings = errors = 0
    with Timer() as timer:
        project = Project.for_paths([path for path, _ in files]) if as_project else None
        for path, data in files:
            result = lint_source(data, path, settings, project)
            findings += len(result.findings)
            errors += len(result.errors)
    return timer, findings, errors


def time_libcst(texts: list[str]) -> tuple[Timer, int]:
    failures = 0
    with Timer() as timer:
        for text in texts:
            try:
                libcst.parse_module(text)
            except (libcst.ParserSyntaxError, RecursionError):
                failures += 1
    return timer, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path, help="default: the installed torch package")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each timing; the best is reported")
    parser.add_argument("--per-file", action="store_true",
                        help="check each file alone, without the project index (the old behaviour)")
    args = parser.parse_args(argv)

    directory = args.directory or torch_sources()
    files = load(directory)
    if not files:
        raise SystemExit(f"no Python files under {directory}")
    texts = []
    for path, data in files:
        text, _ = decode_source(data, path)
        if text is not None:
            texts.append(text)
    settings = Settings(select=resolve_selection(["ALL"], [], []))
    rules = [rule for code, rule in registry().items() if code in settings.select]
    prefiltered = sum(1 for text in texts if not any(rule.may_match(text) for rule in rules))
    lines = sum(text.count("\n") + (not text.endswith("\n") and bool(text)) for text in texts)

    # warm up imports and caches on one file so neither timing pays for them
    lint_source(files[0][1], files[0][0], settings)
    libcst.parse_module(texts[0] if texts else "")

    lint_runs, parse_runs = [], []
    findings = errors = parse_failures = 0
    for _ in range(max(1, args.repeat)):
        timer, parse_failures = time_libcst(texts)
        parse_runs.append(timer)
        timer, findings, errors = time_trainlint(files, settings, not args.per_file)
        lint_runs.append(timer)

    lint = min(lint_runs, key=lambda t: t.cpu)
    parse = min(parse_runs, key=lambda t: t.cpu)
    print(f"directory:          {directory}")
    print(f"files:              {len(files)} ({lines} lines)")
    print(f"rules:              {len(rules)} (all selected), no cache, 1 process, "
          f"{'each file alone' if args.per_file else 'as one project (index built cold, inside the timing)'}")
    print(f"pre-filter skipped: {prefiltered} files (no rule's trigger words: LibCST never parses them)")
    print(f"trainlint check:     {lint.cpu:8.2f} s CPU ({lint.wall:.2f} s wall)  "
          f"{findings} findings, {errors} internal errors")
    print(f"libcst.parse_module: {parse.cpu:8.2f} s CPU ({parse.wall:.2f} s wall)  "
          f"{parse_failures} files failed to parse")
    print(f"ratio:               {lint.cpu / parse.cpu:.2f}x the bare parse (CPU), "
          f"{lint.wall / parse.wall:.2f}x (wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
