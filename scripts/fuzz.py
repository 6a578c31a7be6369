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

    python scripts/fuzz.py --files --count 10000     # configuration and ignore files

`--files` fuzzes what a repository hands the reader instead (issue 34): a folder per case with
random `pyproject.toml`/`trainlint.toml` files (random TOML values, integers past int()'s digit
limit, deep nesting, bad types, unknown keys, junk bytes, files over the 1 MB limit), random
`.gitignore` and `.git/info/exclude` patterns (backtracking shapes, brackets, negations), and any
of them as a link to a fifo, /dev/null, /dev/zero, /dev/stdin or a folder. Each folder is walked
and configured in-process as the command line and the language server do (`discover`,
`Resolver`, `Project`, the server's `ProjectSettings`): a problem is an exception other than a
configuration error, or a case taking more than 10 s.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import sys
import tempfile
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


# -- configuration and ignore files ---------------------------------------------------------------
#: The longest a case may take: the walk and configuration of one small folder.
CASE_SECONDS = 10.0
_KEYS = ("select", "ignore", "extend-select", "per-file-ignores", "exclude", "extend-exclude", "min-torch-version",
         "max-file-size", "fix", "unsafe-fixes", "fixable", "unfixable", "test-code-ignore")
_SELECTORS = ("TL401", "TL4", "TL", "ALL", "", "TL999", "unsafe-torch-load", "tl401", " TL401", "T", "X1")
_GLOB_ATOMS = ("a", "b", "*", "**", "?", "/", "[ab]", "[!a]", "[", "]", "\\", "!", "#", " ", ".py", "[[:alpha:]]",
               "[z-a]", "\u00e9", "\t", "{a,b}")
_LINKS = ("fifo", "/dev/null", "/dev/zero", "/dev/stdin", "folder", "dangling", "self")


def _glob(rng: random.Random) -> str:
    if rng.random() < 0.1:  # the backtracking shape of issue 34
        return "*a" * rng.randint(8, 24) + "*b"
    return "".join(rng.choice(_GLOB_ATOMS) for _ in range(rng.randint(1, 8)))


def _toml_string(rng: random.Random) -> str:
    text = "".join(rng.choice("abc\"\\\n\u00e9\u2028 #=[]{}.") for _ in range(rng.randint(0, 12)))
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _toml_value(rng: random.Random, depth: int = 0) -> str:
    kind = rng.randrange(12 if depth < 4 else 8)
    if kind == 0:
        return str(rng.randint(-10**6, 10**6))
    if kind == 1:  # past int()'s 4,300-digit limit (or just under it)
        return rng.choice("123456789") + "0123456789"[rng.randrange(10)] * rng.randint(4290, 6000)
    if kind == 2:
        return rng.choice(["1.5", "inf", "-nan", "1e400", "0x1F", "0o17", "0b101", "1_000", "+7"])
    if kind == 3:
        return rng.choice(["true", "false", "True", "null"])
    if kind == 4:
        return _toml_string(rng)
    if kind == 5:
        return '"' + _glob(rng).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if kind == 6:
        return rng.choice(["1979-05-27T07:32:00Z", "07:32:00", "1979-05-27", "1979-13-45"])
    if kind == 7:  # nesting past tomllib's recursion
        n = rng.choice([10, 500, 3000])
        return "[" * n + "]" * n
    if kind in (8, 9):
        return "[" + ", ".join(_toml_value(rng, depth + 1) for _ in range(rng.randint(0, 4))) + "]"
    if kind == 10:
        return "[" + ", ".join(f'"{rng.choice(_SELECTORS)}"' for _ in range(rng.randint(0, 4))) + "]"
    return "{" + ", ".join(f"{rng.choice(_KEYS + ('x', 'a.b'))} = {_toml_value(rng, depth + 1)}"
                           for _ in range(rng.randint(0, 3))) + "}"


def _toml_table(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(0, 6)):
        key = rng.choice(_KEYS + ("selct", "per_file_ignores", '"quoted key"', '"a\\nb"', "a.b.c", ""))
        lines.append(f"{key} = {_toml_value(rng)}")
    return "\n".join(lines) + "\n"


def _config_text(rng: random.Random, pyproject: bool) -> bytes:
    kind = rng.randrange(10)
    if kind == 0:  # junk bytes (not UTF-8, a NUL)
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
    if kind == 1:  # over the 1 MB limit
        return (("[tool.trainlint]\n" if pyproject else "") + "#" * (1 << 20) + "\n").encode()
    body = _toml_table(rng)
    if pyproject:
        other = f"[tool.other]\nvalue = {_toml_value(rng)}\n" if rng.random() < 0.5 else ""
        body = (f"[project]\nname = {_toml_string(rng)}\n" if rng.random() < 0.3 else "") + other + \
            ("[tool.trainlint]\n" + body if rng.random() < 0.8 else body)
    return body.encode("utf-8", "surrogatepass")


def _place(path: Path, rng: random.Random, content: bytes) -> None:
    """`content` at `path`, or (one time in six) a link or something that is not a regular file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if rng.random() < 1 / 6:
        link = rng.choice(_LINKS)
        if link == "fifo":
            os.mkfifo(path)
        elif link == "folder":
            path.mkdir()
        elif link == "dangling":
            path.symlink_to(path.parent / "missing-target")
        elif link == "self":
            path.symlink_to(path)
        else:
            path.symlink_to(link)
        return
    path.write_bytes(content)


def make_case(root: Path, rng: random.Random) -> None:
    """A repository of random configuration and ignore files under `root`."""
    (root / ".git" / "info").mkdir(parents=True)
    folders = [root, root / "sub", root / "sub" / "deep"]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("train.py", "a" * rng.randint(1, 200) + ".py", _glob(rng).replace("/", "_")[:100] + ".py"):
            try:
                (folder / name).write_text('import torch\nstate = torch.load("c.pt", weights_only=False)\n')
            except (OSError, ValueError):
                pass  # a name the file system refuses
    for folder in folders:
        if rng.random() < 0.5:
            _place(folder / "pyproject.toml", rng, _config_text(rng, True))
        if rng.random() < 0.25:
            _place(folder / "trainlint.toml", rng, _config_text(rng, False))
        if rng.random() < 0.6:
            lines = [_glob(rng) for _ in range(rng.randint(0, 12))]
            _place(folder / ".gitignore", rng, "\n".join(lines).encode("utf-8", "surrogatepass"))
    if rng.random() < 0.3:
        _place(root / ".git" / "info" / "exclude", rng, "\n".join(_glob(rng) for _ in range(5)).encode())


def check_case(root: Path) -> list[str]:
    """What goes wrong walking and configuring `root` as the command line and the language server
    do: an exception other than a configuration error."""
    from trainlint.config import ConfigError, Resolver, resolve_config
    from trainlint.lsp.project import ProjectSettings
    from trainlint.reader.discovery import discover
    from trainlint.reader.project import Project, find_root
    from trainlint.settings import SelectorError

    found: list[str] = []

    def attempt(what: str, call) -> object:
        try:
            return call()
        except (ConfigError, SelectorError) as err:
            if "\n" in str(err).strip():
                found.append(f"{what}: a configuration error of several lines: {str(err)[:200]!r}")
            return None
        except BaseException as exc:  # noqa: BLE001 - a fuzzer reports every kind of failure
            if isinstance(exc, KeyboardInterrupt):
                raise
            found.append(f"{what}: " + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-1500:])
            return None

    resolver = Resolver()
    errors: list[tuple[str, str]] = []
    files = attempt("discover", lambda: discover([str(root)], resolver.discovery_for, errors)) or []
    for path, message in errors:
        if "\n" in message:
            found.append(f"discover: an error of several lines for {path!r}")
    for path in files:
        attempt(f"settings of {path}", lambda: (resolver.settings_for(path), resolver.fix_policy_for(path),
                                                resolver.fixing(path)))
    attempt("resolve_config", lambda: resolve_config(None, False, root))
    attempt("find_root", lambda: find_root(files or [root]))
    attempt("project walk", lambda: Project(root, discovery_for=Resolver().discovery_for).paths)
    shown: list[str] = []
    server = ProjectSettings(on_error=shown.append)
    for path in files[:3] or [str(root / "train.py")]:
        attempt(f"server settings of {path}", lambda: (server.settings_for(path), server.fix_policy_for(path)))
    return found


def check_files(number: int, seed: int) -> tuple[list[str], float]:
    """Case `number` of the seed's sequence: its problems and how long it took."""
    rng = random.Random(f"{seed}:{number}")
    root = Path(tempfile.mkdtemp(prefix="trainlint-fuzz-"))
    try:
        make_case(root / "repo", rng)
        start = time.monotonic()
        found = check_case(root / "repo")
        took = time.monotonic() - start
        if took > CASE_SECONDS:
            found.append(f"took {took:.1f} s (more than {CASE_SECONDS:.0f} s)")
        return found, took
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _check_files_batch(batch: list[int], seed: int) -> list[tuple[int, list[str], float]]:
    return [(number, *check_files(number, seed)) for number in batch]


def main_files(count: int, seed: int, jobs: int) -> int:
    start = time.monotonic()
    failures = checked = 0
    slowest = 0.0
    batches = [list(range(at, min(at + 100, count))) for at in range(0, count, 100)]

    def report(results) -> None:
        nonlocal failures, checked, slowest
        for number, found, took in results:
            checked += 1
            slowest = max(slowest, took)
            if found:
                failures += 1
                print(f"case {number} (seed {seed}): " + "; ".join(found), flush=True)
        if checked % 1000 < 100 or checked == count:
            print(f"{checked}/{count} cases, {failures} failing, slowest {slowest:.2f} s, "
                  f"{time.monotonic() - start:.0f} s", flush=True)

    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for results in pool.map(_check_files_batch, batches, [seed] * len(batches)):
                report(results)
    else:
        for batch in batches:
            report(_check_files_batch(batch, seed))
    print(f"done: {checked} configuration/ignore cases, {failures} failing, slowest {slowest:.2f} s, "
          f"seed {seed}, {time.monotonic() - start:.0f} s")
    return 1 if failures else 0


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
    parser.add_argument("--files", action="store_true",
                        help="fuzz configuration and ignore files instead of programs")
    args = parser.parse_args(argv)
    if args.files:
        return main_files(args.count, args.seed, args.jobs)

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
