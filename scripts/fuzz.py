"""Fuzz the engine: generated and mutated programs must never raise, never give an internal
error, and every finding (and fix edit) must lie inside its file.

    python scripts/fuzz.py --count 100000            # the release check
    python scripts/fuzz.py --count 2000 --seed 7 --jobs 2

Programs come from two sources, in a fixed, seeded order:
- mutants of the repository's whole-file fixtures and examples: statements deleted, duplicated,
  swapped, names renamed, training calls added (`opt.step()`, `model.eval()`, `torch.save(...)`),
  several mutations stacked; about one in three no longer parses, which exercises TL000;
- hypothesmith's grammar- and LibCST-node-based generators (slow to generate: `--generated`
  sets their share).

Every program goes through `trainlint.engine.lint_source` in-process with every rule selected.
A failure is printed with the program that caused it (and saved under `--save`); the exit code
is 1 if any program failed. `tests/test_fuzz.py` runs a few hundred of these in the suite.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Iterator

from trainlint.engine import lint_source
from trainlint.positions import split_lines
from trainlint.settings import Settings, resolve_selection

REPO = Path(__file__).resolve().parent.parent
ALL = Settings(select=resolve_selection(["ALL"], [], []))

#: Calls a mutation may add: the events the training-loop model reasons about.
CALLS = ("opt.step()", "optimizer.zero_grad()", "loss.backward()", "scheduler.step()", "model.eval()",
         "model.train()", "scaler.update()", "torch.save(model.state_dict(), path)",
         "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", "state = torch.load(path)",
         "losses.append(loss)", "total = total + loss", "with torch.no_grad():\n    pass",
         "if (step + 1) % accum == 0:\n    opt.step()", "self.train_epoch()", "accelerator.backward(loss)")
_IDENTIFIER = re.compile(r"\b[A-Za-z_][A-Za-z_0-9]*\b")


def seeds() -> list[str]:
    """The corpus mutants start from: every whole-file fixture and example, sorted by path."""
    paths = sorted((REPO / "tests" / "fixtures").rglob("*.py")) + sorted((REPO / "examples").glob("*.py"))
    return [p.read_text(encoding="utf-8") for p in paths]


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def mutate(source: str, rng: random.Random) -> str:
    """One to four stacked mutations of `source`'s lines."""
    lines = source.split("\n")
    for _ in range(rng.randint(1, 4)):
        if len(lines) < 2:
            break
        at = rng.randrange(len(lines))
        kind = rng.randrange(6)
        if kind == 0:  # delete a statement line
            del lines[at]
        elif kind == 1:  # duplicate one
            lines.insert(at, lines[at])
        elif kind == 2:  # swap two lines (often of different blocks)
            other = min(len(lines) - 1, at + rng.randint(1, 3))
            lines[at], lines[other] = lines[other], lines[at]
        elif kind == 3:  # rename an identifier everywhere
            names = sorted(set(_IDENTIFIER.findall(source)))
            if names:
                old, new = rng.choice(names), rng.choice(names + ["x", "loss", "opt", "self", "step"])
                lines = [re.sub(rf"\b{re.escape(old)}\b", new, line) for line in lines]
        elif kind == 4:  # add a training call at the indentation of a neighbouring line
            indent = _indent(lines[at])
            lines[at:at] = [indent + part for part in rng.choice(CALLS).split("\n")]
        else:  # move a line into another block
            line = lines.pop(at).strip()
            target = rng.randrange(len(lines))
            lines.insert(target, _indent(lines[target]) + line)
    return "\n".join(lines)


def problems(source: str) -> list[str]:
    """What is wrong with linting `source`: an exception, an internal error, a span outside it."""
    try:
        result = lint_source(source, "fuzz.py", ALL)
    except BaseException as exc:  # noqa: BLE001 - a fuzzer reports every kind of failure
        if isinstance(exc, KeyboardInterrupt):
            raise
        return ["exception: " + "".join(traceback.format_exception_only(type(exc), exc)).strip()]
    found = [f"internal error: {error}" for error in result.errors]
    lines = split_lines(source)

    def inside(what: str, line: int, column: int, end_line: int, end_column: int) -> None:
        if not (1 <= line <= end_line <= len(lines) and column >= 1 and end_column >= 1
                and column <= len(lines[line - 1]) + 1 and end_column <= len(lines[end_line - 1]) + 1
                and (line, column) <= (end_line, end_column)):
            found.append(f"{what} span {line}:{column}-{end_line}:{end_column} outside the file "
                         f"({len(lines)} lines)")

    for finding in result.findings:
        inside(finding.code, finding.line, finding.column, finding.end_line, finding.end_column)
        for edit in finding.fix.edits if finding.fix else ():
            inside(f"{finding.code} fix", edit.line, edit.column, edit.end_line, edit.end_column)
    return found


def generated(count: int, seed: int) -> Iterator[str]:
    """`count` programs from hypothesmith, half from the grammar and half from LibCST nodes."""
    if count <= 0:
        return
    import hypothesmith
    from hypothesis import HealthCheck, given
    from hypothesis import seed as hypothesis_seed
    from hypothesis import settings as hypothesis_settings

    programs: list[str] = []
    for strategy, share in ((hypothesmith.from_grammar(), count - count // 2), (hypothesmith.from_node(), count // 2)):
        if share == 0:
            continue

        @hypothesis_seed(seed)  # the same programs for the same seed
        @hypothesis_settings(max_examples=share, database=None, deadline=None,
                             suppress_health_check=list(HealthCheck))
        @given(strategy)
        def collect(program: str) -> None:
            programs.append(program)

        collect()
    yield from programs[:count]


def programs(count: int, seed: int, generated_share: float) -> Iterator[str]:
    """`count` programs: mutants of the corpus, then hypothesmith's (their share of the count)."""
    rng = random.Random(seed)
    corpus = seeds()
    hypothesis_count = int(count * generated_share)
    for _ in range(count - hypothesis_count):
        yield mutate(rng.choice(corpus), rng)
    yield from generated(hypothesis_count, seed)


def _check_batch(batch: list[tuple[int, str]]) -> list[tuple[int, str, list[str]]]:
    return [(number, source, found) for number, source in batch if (found := problems(source))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="programs to check (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generated", type=float, default=0.01,
                        help="share of hypothesmith programs (default 0.01; they are slow to generate)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--save", type=Path, default=None, help="folder for failing programs")
    args = parser.parse_args(argv)

    start = time.monotonic()
    failures = checked = 0

    def batches() -> Iterator[list[tuple[int, str]]]:  # generated lazily: 100,000 programs do not fit
        batch: list[tuple[int, str]] = []
        for number, source in enumerate(programs(args.count, args.seed, args.generated)):
            batch.append((number, source))
            if len(batch) == 200:
                yield batch
                batch = []
        if batch:
            yield batch

    def report(results: list[tuple[int, str, list[str]]], size: int) -> None:
        nonlocal failures, checked
        checked += size
        for number, source, found in results:
            failures += 1
            print(f"program {number}: " + "; ".join(found), flush=True)
            if args.save is not None:
                args.save.mkdir(parents=True, exist_ok=True)
                (args.save / f"program_{number}.py").write_text(source, encoding="utf-8", errors="surrogatepass")
        if checked % 5000 < size or checked == args.count:
            print(f"{checked}/{args.count} checked, {failures} failing, {time.monotonic() - start:.0f} s",
                  flush=True)

    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            pending: list = []
            for batch in batches():  # a few batches in flight at a time
                pending.append((len(batch), pool.submit(_check_batch, batch)))
                while len(pending) > 2 * args.jobs:
                    size, future = pending.pop(0)
                    report(future.result(), size)
            for size, future in pending:
                report(future.result(), size)
    else:
        for batch in batches():
            report(_check_batch(batch), len(batch))
    print(f"done: {checked} programs, {failures} failing, seed {args.seed}, {time.monotonic() - start:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
