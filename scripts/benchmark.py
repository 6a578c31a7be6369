"""Time a full trainlint check against LibCST's bare parse of the same files, in one process.

    python scripts/benchmark.py                          # the installed torch package's sources
    python scripts/benchmark.py DIR [DIR ...] --repeat 3 --json

All times are CPU seconds of this process (on a shared machine wall time says more about the
neighbours than about trainlint) and are reported as ratios to `libcst.parse_module` of the same
files, timed in the same run:

- cold: every rule, no cache, one process, `lint_source` on each file's bytes with a project
  index built cold inside the timing, as `trainlint check DIR` builds it (`--per-file`: each file
  alone); files are read into memory first, so no timing includes disk reads. The bare parse and
  the cold check alternate (`--repeat` pairs), so a machine that slows down for a while slows
  both; the ratio of the best of each is reported, and each pair's ratio too;
- phases: a second, instrumented cold run split into the gate (Python's parse and the gate's
  facts), the guard (trainlint.guard: the nesting bound and CPython's compiler), the compile of
  the files no rule reads, LibCST's parse of the checked files, the file index, the models, each
  rule's own checking, and the rest (the project index and the summaries of imported files,
  positions, fixes, suppression comments); plus the files the text pre-filter and the gate drop;
- warm: `lint_paths` with a result cache filled by a first run (`warm / cold`);
- jobs: `lint_paths` with `--jobs` 1, 2 and all CPUs: wall seconds and the speed-up over the first
  (meaningful only on an otherwise idle machine), and the CPU time of all processes against the
  first run's (the cost of the workers: on N idle CPUs the speed-up is about N over this);
- peak memory: this process's peak resident set during the cold runs, and the peak of fresh
  processes that check nothing, only the largest file LibCST parses, and all files (bounded by the
  largest file, not by the number of files, when no tree outlives its file).

One file (`--one-file FILE...`, alone): what a pre-commit hook or an editor's save hook pays per
file, as whole processes. `trainlint check FILE` (the default settings and result cache; the file
gets a new last line before each run, so the cache misses as for a file just edited) against
`python -c "import libcst; libcst.parse_module(open(F).read())"` on the same file, alternating,
best of `--runs`: wall and CPU (user + system of the child) ratios to the baseline, for the check
run in its own process (`TRAINLINT_RESIDENT=0`) and, wall only, for the check served by the
resident process (trainlint/resident.py; its CPU is spent in the server's fork, not in the child).

torch is located with `importlib.util.find_spec`, never imported. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import libcst

import trainlint.context
from trainlint.cache import ResultCache
from trainlint.reader.discovery import discover
from trainlint.engine import _rules_for, decode_source, lint_paths, lint_source
from trainlint.parsing import Parser
from trainlint.reader.project import Project
from trainlint.rules import registry
from trainlint.settings import Settings, resolve_selection
from trainlint.suppress import NOQA_CODES


def torch_sources() -> Path:
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch is not installed; pass a directory to benchmark")
    return Path(next(iter(spec.submodule_search_locations)))


def load(directories: list[Path]) -> list[tuple[str, bytes]]:
    return [(path, Path(path).read_bytes()) for path in discover([str(d) for d in directories])]


def cpu_time(run) -> float:
    gc.collect()  # what an earlier run left for the collector is not this run's cost
    start = time.process_time()
    run()
    return time.process_time() - start


def lint_all(files: list[tuple[str, bytes]], settings: Settings, as_project: bool = True) -> int:
    """A cold check: a fresh project index (imports resolved, imported files read and summarised
    on demand) is built inside the timing, as `trainlint check DIR` builds it."""
    project = Project.for_paths([path for path, _ in files]) if as_project else None
    return sum(len(lint_source(data, path, settings, project).findings) for path, data in files)


def parse_all(texts: list[str]) -> None:
    for text in texts:
        try:
            libcst.parse_module(text)
        except (libcst.ParserSyntaxError, RecursionError):
            pass


class PhaseClock:
    """CPU time per phase; a phase's time excludes the phases nested in it (a model built while a
    rule checks is the model's, not the rule's)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._stack: list[list] = []  # [phase, start, time of nested phases]

    @contextmanager
    def phase(self, name: str):
        start = time.process_time()
        self._stack.append([name, start, 0.0])
        try:
            yield
        finally:
            _, _, nested = self._stack.pop()
            elapsed = time.process_time() - start
            self.seconds[name] += elapsed - nested
            if self._stack:
                self._stack[-1][2] += elapsed

    def wrap(self, name, function):
        def timed(*args, **kwargs):
            with self.phase(name if isinstance(name, str) else name(*args)):
                return function(*args, **kwargs)
        return timed


@contextmanager
def instrumented(clock: PhaseClock):
    """Wrap the engine's steps in the clock for one run, and unwrap them afterwards."""
    patches = [
        # the engine parses through a Parser (trainlint.parsing): its methods are the phases
        (Parser, "python_tree", clock.wrap("gate (ast parse)", Parser.python_tree)),
        (Parser, "guard_check", clock.wrap("guard (compile)", Parser.guard_check)),
        (Parser, "compiles", clock.wrap("compile (no rule reads the file)", Parser.compiles)),
        (Parser, "gated", clock.wrap("gate (facts)", Parser.gated)),
        (Parser, "libcst_module", clock.wrap("parse", Parser.libcst_module)),
        (trainlint.context, "FileIndex", clock.wrap("index", trainlint.context.FileIndex)),
        (trainlint.context.FileContext, "model", clock.wrap("models", trainlint.context.FileContext.model)),
    ]
    for code, rule in registry().items():
        def check(self, ctx, _check=rule.check, _code=code):
            with clock.phase(f"rule {_code}"):
                return list(_check(self, ctx))  # the checks are generators: run them here
        patches.append((rule, "check", check))
    saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in patches]
    for owner, name, value in patches:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def phases(files: list[tuple[str, bytes]], settings: Settings, as_project: bool) -> dict[str, float]:
    clock = PhaseClock()
    with instrumented(clock):
        with clock.phase("other"):
            lint_all(files, settings, as_project)
    return dict(clock.seconds)


def jobs_run(paths: list[str], settings: Settings, jobs: int) -> tuple[float, float]:
    """Wall seconds and CPU seconds (this process and its finished workers) of one `lint_paths`."""
    before, start = os.times(), time.perf_counter()
    list(lint_paths(paths, settings, jobs=jobs))
    wall, after = time.perf_counter() - start, os.times()
    cpu = sum(getattr(after, f) - getattr(before, f) for f in ("user", "system", "children_user", "children_system"))
    return wall, cpu


_PEAK = """
import resource, sys
from trainlint.engine import lint_paths
from trainlint.settings import Settings, resolve_selection
settings = Settings(select=resolve_selection(["ALL"], [], []))
for _ in lint_paths(sys.stdin.read().splitlines(), settings):
    pass
try:  # the high-water mark of this program (ru_maxrss may carry the parent's over the exec)
    with open("/proc/self/status") as status:
        print(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
except (OSError, StopIteration):
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss_mb(paths: list[str]) -> float:
    """Peak resident memory of a fresh process that checks `paths` one after the other."""
    done = subprocess.run([sys.executable, "-c", _PEAK], input="\n".join(paths), capture_output=True,
                          text=True, check=True)
    return int(done.stdout.split()[-1]) / 1024


_BARE_PARSE = "import libcst, sys; libcst.parse_module(open(sys.argv[1]).read())"


# as an installed package runs: its modules' bytecode cached (PYTHONDONTWRITEBYTECODE would make
# every process compile trainlint's modules again; the first, untimed runs write the caches)
_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def _process(command: list[str], cwd: str, env: dict | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one child process."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   env=env or _ENV)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _stop_resident(folder: Path) -> None:
    """End the resident processes a measure started in its own socket folder."""
    for info in folder.glob("*.json"):
        try:
            os.kill(json.loads(info.read_text())["pid"], signal.SIGTERM)
        except (OSError, ValueError, KeyError):
            pass


def one_file(path: Path, runs: int) -> dict:
    """A whole `trainlint check F` process against importing LibCST and parsing F in a bare one:
    checked in the process itself (`TRAINLINT_RESIDENT=0`, the cold path) and served by a resident
    process (the default on Linux outside CI; its own socket folder, started by an untimed run)."""
    original = path.read_bytes()
    check, served, parse = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / path.name
        target.write_bytes(original)
        sockets = Path(folder) / "resident"
        cold_env = {**_ENV, "TRAINLINT_RESIDENT": "0"}
        served_env = {**_ENV, "TRAINLINT_RESIDENT": "1", "TRAINLINT_RESIDENT_DIR": str(sockets)}
        command = [sys.executable, "-m", "trainlint", "check", str(target)]
        _process([sys.executable, "-c", _BARE_PARSE, str(target)], folder)  # untimed: bytecode caches
        _process(command, folder, cold_env)
        _process(command, folder, served_env)  # starts the resident process
        deadline = time.monotonic() + 30
        while not list(sockets.glob("*.sock")) and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            for run in range(max(1, runs)):
                for times, env in ((parse, None), (check, cold_env), (served, served_env)):
                    target.write_bytes(original + f"\n# run {run} {len(times)}\n".encode())  # a cache miss
                    bare = [sys.executable, "-c", _BARE_PARSE, str(target)]
                    times.append(_process(bare if env is None else command, folder, env))
        finally:
            _stop_resident(sockets)
    best = {name: (min(w for w, _ in times), min(c for _, c in times)) for name, times in
            (("check", check), ("served", served), ("parse", parse))}
    return {"file": str(path), "lines": original.count(b"\n"), "runs": max(1, runs),
            "check_wall_s": round(best["check"][0], 4), "parse_wall_s": round(best["parse"][0], 4),
            "wall_ratio": round(best["check"][0] / best["parse"][0], 3),
            "check_cpu_s": round(best["check"][1], 4), "parse_cpu_s": round(best["parse"][1], 4),
            "cpu_ratio": round(best["check"][1] / best["parse"][1], 3) if best["parse"][1] else None,
            "served_wall_s": round(best["served"][0], 4),
            "served_wall_ratio": round(best["served"][0] / best["parse"][0], 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directories", nargs="*", type=Path, help="default: the installed torch package")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each timing; the best is taken")
    parser.add_argument("--jobs", type=int, nargs="*", default=None,
                        help="job counts for the scaling runs (default: 1, 2 and all CPUs; none to skip)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--per-file", action="store_true",
                        help="check each file alone, without the project index (the old behaviour)")
    parser.add_argument("--one-file", type=Path, nargs="+", metavar="FILE",
                        help="only the one-file measure: whole `trainlint check FILE` processes")
    parser.add_argument("--runs", type=int, default=7, help="processes of each kind per file (--one-file)")
    args = parser.parse_args(argv)
    as_project = not args.per_file
    if args.one_file:
        measures = [one_file(path, args.runs) for path in args.one_file]
        if args.json:
            print(json.dumps({"one_file": measures}, indent=2))
            return 0
        print("one file: a whole `trainlint check F` process against "
              "`python -c \"import libcst; libcst.parse_module(open(F).read())\"` (best of runs)")
        for m in measures:
            print(f"  {m['file']} ({m['lines']} lines): checked in its process {m['wall_ratio']:.3f}x wall "
                  f"({m['check_wall_s'] * 1000:.0f} ms vs {m['parse_wall_s'] * 1000:.0f} ms), "
                  f"{m['cpu_ratio']}x CPU ({m['check_cpu_s'] * 1000:.0f} ms vs {m['parse_cpu_s'] * 1000:.0f} ms); "
                  f"served by the resident process {m['served_wall_ratio']:.3f}x wall "
                  f"({m['served_wall_s'] * 1000:.0f} ms)")
        return 0

    directories = args.directories or [torch_sources()]
    files = load(directories)
    if not files:
        raise SystemExit(f"no Python files under {', '.join(map(str, directories))}")
    texts = [text for path, data in files if (text := decode_source(data, path)[0]) is not None]
    settings = Settings(select=resolve_selection(["ALL"], [], []))
    rules = [rule for code, rule in registry().items() if code in settings.select and code not in NOQA_CODES]
    lines = sum(text.count("\n") + (not text.endswith("\n") and bool(text)) for text in texts)
    prefiltered = sum(1 for text in texts if not _rules_for(text, frozenset(settings.select))[0])

    # warm up imports and caches on one file so no timing pays for them
    lint_all(files[:1], settings, as_project)
    parse_all(texts[:1])
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    repeat = max(1, args.repeat)
    findings = lint_all(files, settings, as_project)
    # the baseline and the check alternate, so a machine that slows down for a while (a shared
    # host) slows both alike; each ratio of a pair is kept as well as the ratio of the bests
    pairs = [(cpu_time(lambda: parse_all(texts)), cpu_time(lambda: lint_all(files, settings, as_project)))
             for _ in range(repeat)]
    parse_cpu, cold_cpu = min(p for p, _ in pairs), min(c for _, c in pairs)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    phase_cpu = phases(files, settings, as_project)

    # files that pass the text pre-filter but not the gate
    parsed: list[str] = []
    counting = Parser.libcst_module

    def count(self, source, path, problem=None):
        parsed.append(path)
        return counting(self, source, path, problem)

    Parser.libcst_module = count
    try:
        lint_all(files, settings, as_project)
    finally:
        Parser.libcst_module = counting
    gated_out = len(files) - prefiltered - len(parsed)

    paths = [path for path, _ in files]
    with tempfile.TemporaryDirectory() as folder:
        cache = ResultCache(folder)
        list(lint_paths(paths, settings, cache=cache))  # fills the cache
        warm_cpu = min(cpu_time(lambda: list(lint_paths(paths, settings, cache=cache))) for _ in range(repeat))

    job_counts = args.jobs if args.jobs is not None else sorted({1, 2, os.cpu_count() or 1})
    jobs = {n: min((jobs_run(paths, settings, n) for _ in range(repeat)), key=lambda run: run[0])
            for n in job_counts}
    largest = max(parsed or paths, key=os.path.getsize)  # the largest file LibCST parses
    memory = {"largest_file": largest, "largest_file_mb": round(peak_rss_mb([largest]), 1),
              "all_files_mb": round(peak_rss_mb(paths), 1), "nothing_mb": round(peak_rss_mb([]), 1)}

    report = {
        "directories": [str(d) for d in directories],
        "files": len(files),
        "lines": lines,
        "rules": len(rules),
        "as_project": as_project,
        "findings": findings,
        "prefiltered_files": prefiltered,
        "gated_out_files": gated_out,
        "libcst_parsed_files": len(parsed),
        "libcst_parse_cpu_s": round(parse_cpu, 3),
        "cold_cpu_s": round(cold_cpu, 3),
        "cold_ratio": round(cold_cpu / parse_cpu, 3),
        "cold_ratio_per_pair": [round(c / p, 3) for p, c in pairs],
        "warm_cpu_s": round(warm_cpu, 3),
        "warm_to_cold": round(warm_cpu / cold_cpu, 4),
        "phases_ratio": {name: round(seconds / parse_cpu, 4) for name, seconds in sorted(phase_cpu.items())},
        "jobs_wall_s": {str(n): round(wall, 3) for n, (wall, _) in jobs.items()},
        "jobs_speedup": {str(n): round(jobs[job_counts[0]][0] / wall, 3) for n, (wall, _) in jobs.items()},
        "jobs_cpu_to_first": {str(n): round(cpu / jobs[job_counts[0]][1], 3) for n, (_, cpu) in jobs.items()},
        "peak_rss_mb": round(peak_mb, 1),
        "peak_rss_before_lint_mb": round(rss_before / 1024, 1),
        "peak_rss_fresh_process_mb": memory,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"directories:    {', '.join(report['directories'])}")
    print(f"files:          {len(files)} ({lines} lines), {len(rules)} rules, {findings} findings")
    print(f"pre-filter:     {prefiltered} files hold no rule's trigger words; the gate drops {gated_out} more; "
          f"LibCST parses {len(parsed)}")
    print(f"bare parse:     {parse_cpu:.2f} s CPU (libcst.parse_module of every file): the unit below")
    print(f"cold check:     {report['cold_ratio']:.3f}x  (every rule, no cache, 1 process, "
          f"{'project index built inside the timing' if as_project else 'each file alone'}); "
          f"per pair of runs: {', '.join(f'{r:.3f}' for r in report['cold_ratio_per_pair'])}")
    print(f"warm check:     {report['warm_to_cold']:.4f}x of cold (result cache)")
    print("phases (x bare parse):")
    ordered = sorted(phase_cpu.items(), key=lambda item: (item[0].startswith("rule "), item[0]))
    for name, seconds in ordered:
        print(f"  {name:<18}{seconds / parse_cpu:8.4f}")
    if jobs:
        print("jobs (best wall of runs; speed-up over the first; CPU of all processes against the first's):")
        for n, (wall, _) in jobs.items():
            print(f"  -j{n:<3} {wall:8.2f} s wall  {report['jobs_speedup'][str(n)]:.2f}x  "
                  f"CPU {report['jobs_cpu_to_first'][str(n)]:.2f}x")
    print(f"peak memory:    {peak_mb:.0f} MB resident in this process ({rss_before / 1024:.0f} MB before linting); "
          f"a fresh process: {memory['nothing_mb']:.0f} MB checking nothing, {memory['largest_file_mb']:.0f} MB "
          f"the largest file LibCST parses, alone, {memory['all_files_mb']:.0f} MB all {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
