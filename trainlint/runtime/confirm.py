"""`trainlint confirm`: prove each rule's hazard at run time, beside its static finding.

For every registered rule that has a demo (a runnable bad/good pair, see `demo.py`):
1. lint both variants with every rule: the bad one must get the rule's finding at the stated
   line, the good one must get none of it;
2. run both variants under torch on the CPU, each in a fresh process with fixed seeds;
3. judge the two measurements with the rule's criterion;
4. for a rule with a fix: apply it to the bad variant as `check --fix --unsafe-fixes` would
   (`trainlint.fixes`), lint the result (the finding must be gone) and run it: the FIXED column
   must measure like the good variant (the rule's criterion holds between bad and fixed).
A row is CONFIRMED only when the static and the runtime verdicts agree (and the fix removes the
hazard, where the rule has one). The fences (facts the
rules rest on: accumulation, clipping, storage, the mode switches, exact resume, weighting by
sample count) follow as rows of their own, with no static column.

The exit code is 0 when every row is confirmed, 1 when one is not, 2 on bad usage or when torch
cannot be imported. This process never imports torch: the scripts run in worker processes.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from trainlint.engine import lint_source
from trainlint.fixes import FixPolicy, fix_source
from trainlint.rules import registry
from trainlint.runtime.demo import Demo, Fence, show
from trainlint.runtime.runner import DEFAULT_WORKERS, RunResult, Script, TorchUnavailable, run_scripts
from trainlint.settings import Settings, resolve_selection

CONFIRMED = "CONFIRMED"
NOT_CONFIRMED = "NOT CONFIRMED"
INSTALL_HINT = "trainlint confirm needs torch: pip install 'trainlint[runtime]'"


class SelectionError(ValueError):
    """A code on the command line that names no demo or fence; the message says which."""


@dataclass
class StaticVerdict:
    bad_ok: bool  # the bad variant has the rule's finding at the stated line
    good_ok: bool  # the good variant has none of the rule's findings
    notes: list[str] = field(default_factory=list)


@dataclass
class Row:
    code: str
    static_bad: bool | None
    static_good: bool | None
    bad: dict
    good: dict
    verdict: str
    bad_text: str
    good_text: str
    notes: list[str] = field(default_factory=list)
    #: the bad variant after the rule's fix, measured (None: the rule has no fix there)
    fixed: dict | None = None
    fixed_text: str = "-"

    def to_dict(self) -> dict:
        return {"code": self.code, "static_bad": self.static_bad, "static_good": self.static_good,
                "bad": self.bad, "good": self.good, "fixed": self.fixed, "verdict": self.verdict}


def _settings() -> Settings:
    return Settings(select=resolve_selection(["ALL"], [], []))


def _snippet(source: str, line: int) -> str:
    lines = source.splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def static_verdict(demo: Demo, settings: Settings | None = None) -> StaticVerdict:
    """Lint both variants with every rule and compare with what the demo states."""
    settings = settings or _settings()
    line = demo.line
    bad = lint_source(demo.bad, f"{demo.code.lower()}_bad.py", settings)
    good = lint_source(demo.good, f"{demo.code.lower()}_good.py", settings)
    bad_lines = [f.line for f in bad.findings if f.code == demo.code]
    good_lines = [f.line for f in good.findings if f.code == demo.code]
    notes = [f"static: {error}" for error in bad.errors + good.errors]
    if line not in bad_lines:
        found = f"reported at line(s) {', '.join(map(str, bad_lines))}" if bad_lines else "not reported at all"
        notes.append(f"static: the bad variant should get {demo.code} at line {line} "
                     f"(`{_snippet(demo.bad, line)}`); {found}")
    for extra in good_lines:
        notes.append(f"static: {demo.code} fired on the good variant at line {extra} "
                     f"(`{_snippet(demo.good, extra)}`)")
    return StaticVerdict(line in bad_lines and not bad.errors, not good_lines and not good.errors, notes)


@dataclass
class FixedVariant:
    """The bad variant with the rule's own fix applied, and whether the finding is gone."""

    source: str
    finding_gone: bool
    notes: list[str] = field(default_factory=list)


def fixed_variant(demo: Demo, settings: Settings | None = None) -> FixedVariant | None:
    """The demo's bad variant after `--fix --unsafe-fixes` of its rule alone; None when the rule
    offers no fix there."""
    settings = settings or _settings()
    path = f"{demo.code.lower()}_fixed.py"
    outcome = fix_source(demo.bad, lambda source: lint_source(source, path, settings),
                         FixPolicy(unsafe=True, fixable=frozenset({demo.code})))
    if not outcome.changed:
        return None
    left = [f.line for f in outcome.result.findings if f.code == demo.code]
    notes = [f"static: the fixed variant still gets {demo.code} at line(s) {', '.join(map(str, left))}"] if left else []
    return FixedVariant(outcome.source, not left and not outcome.result.errors, notes)


def _judge(judge, bad: dict | None, good: dict | None) -> tuple[bool, str | None]:
    if bad is None or good is None:
        return False, None
    try:
        return bool(judge(bad, good)), None
    except Exception as exc:  # noqa: BLE001 - a measurement without the expected keys is a failed row
        return False, f"runtime: cannot judge the measurements ({type(exc).__name__}: {exc})"


def _measure_or_error(result: RunResult) -> dict:
    return result.measure if result.measure is not None else {"error": result.error}


def _demo_row(demo: Demo, static: StaticVerdict, bad: RunResult, good: RunResult,
              variant: FixedVariant | None = None, fixed: RunResult | None = None) -> Row:
    shown, problem = _judge(demo.judge, bad.measure, good.measure)
    notes = list(static.notes)
    for name, result in (("bad", bad), ("good", good), ("fixed", fixed)):
        if result is not None and result.measure is None:
            notes.append(f"runtime: the {name} variant failed: {result.error}")
    if problem:
        notes.append(problem)
    elif bad.measure is not None and good.measure is not None and not shown:
        notes.append(f"runtime: the measurements do not show the hazard ({demo.hazard})")
    fix_ok = True
    if variant is not None and fixed is not None:
        # the fix removes the hazard when it measures like the good variant against the bad one
        gone, fixed_problem = _judge(demo.judge, bad.measure, fixed.measure)
        notes += variant.notes + ([fixed_problem] if fixed_problem else [])
        if fixed.measure is not None and not gone and not fixed_problem:
            notes.append(f"runtime: the fixed variant does not measure like the good one ({demo.hazard})")
        fix_ok = variant.finding_gone and gone
    ok = static.bad_ok and static.good_ok and shown and fix_ok
    return Row(demo.code, static.bad_ok, static.good_ok, _measure_or_error(bad), _measure_or_error(good),
               CONFIRMED if ok else NOT_CONFIRMED, show(demo.show, bad.measure, bad.error),
               show(demo.show, good.measure, good.error), notes,
               _measure_or_error(fixed) if fixed is not None else None,
               show(demo.show, fixed.measure, fixed.error) if fixed is not None else "-")


def _fence_row(fence: Fence, result: RunResult) -> Row:
    measure = result.measure or {}
    bad, good = measure.get("bad"), measure.get("good")
    if result.measure is not None and not (isinstance(bad, dict) and isinstance(good, dict)):
        bad = good = None
        result = RunResult(result.name, None, 'the fence did not print {"bad": {...}, "good": {...}}',
                           result.seconds)
    shown, problem = _judge(fence.judge, bad, good)
    notes = []
    if result.measure is None:
        notes.append(f"runtime: the fence failed: {result.error}")
    elif problem:
        notes.append(problem)
    elif not shown:
        notes.append(f"runtime: the fence does not hold ({fence.hazard})")
    error = {"error": result.error}
    return Row(fence.code, None, None, bad if bad is not None else error, good if good is not None else error,
               CONFIRMED if shown else NOT_CONFIRMED, show(fence.show_bad, bad, result.error),
               show(fence.show_good, good, result.error), notes)


def select(codes: list[str], demos: dict[str, Demo], fences: dict[str, Fence],
           registered: set[str]) -> tuple[list[Demo], list[Fence]]:
    """The demos and fences that `codes` name (all of them when `codes` is empty).

    A code may be a prefix (`TL1`, `FENCE`). Only rules registered now have rows.
    """
    available = [code for code in demos if code in registered]
    if not codes:
        return [demos[c] for c in available], list(fences.values())
    chosen: set[str] = set()
    for selector in codes:
        wanted = selector.strip().upper()
        if wanted == "ALL":
            chosen |= set(available) | set(fences)
            continue
        matched = {c for c in [*available, *fences] if c.startswith(wanted)}
        if not matched:
            if wanted in registered:
                raise SelectionError(f"no runtime demonstration for {wanted}")
            raise SelectionError(f"unknown rule or fence '{selector}' "
                                 f"(rules: {', '.join(available) or 'none'}; fences: {', '.join(fences)})")
        chosen |= matched
    return [demos[c] for c in available if c in chosen], [f for c, f in fences.items() if c in chosen]


@dataclass
class Report:
    torch_version: str
    rows: list[Row]
    notes: list[str]
    seconds: float

    @property
    def exit_code(self) -> int:
        return 0 if all(r.verdict == CONFIRMED for r in self.rows) else 1

    def to_json(self) -> dict:
        return {"torch": self.torch_version, "device": "cpu", "rows": [r.to_dict() for r in self.rows]}

    def to_text(self) -> str:
        table = [("CODE", "STATIC", "BAD (the mistake)", "GOOD (the fix)", "FIXED (after --fix)", "VERDICT")]
        table += [(r.code, _static_cell(r), r.bad_text, r.good_text, r.fixed_text, r.verdict) for r in self.rows]
        widths = [max(len(line[i]) for line in table) for i in range(5)]
        out = [f"trainlint confirm: torch {self.torch_version}, device cpu"]
        out += ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)) + "  " + line[5]
                for line in table]
        details = [f"  {r.code}: {note}" for r in self.rows for note in r.notes if r.verdict != CONFIRMED]
        if details or self.notes:
            out += ["", "notes:"] + details + [f"  {note}" for note in self.notes]
        confirmed = sum(r.verdict == CONFIRMED for r in self.rows)
        out += ["", f"{confirmed} of {len(self.rows)} rows confirmed in {self.seconds:.1f} s"]
        return "\n".join(out)


def _static_cell(row: Row) -> str:
    if row.static_bad is None:
        return "-"
    if row.static_bad and row.static_good:
        return "ok"
    return "+".join(p for p, failed in (("missed", not row.static_bad), ("flags-fix", not row.static_good)) if failed)


def confirm(codes: list[str], *, demos: dict[str, Demo] | None = None, fences: dict[str, Fence] | None = None,
            workers: int = DEFAULT_WORKERS) -> Report:
    """Lint and run the selected demos and fences.

    Raises `SelectionError` for a code that names nothing and `TorchUnavailable` without torch.
    """
    start = time.perf_counter()
    if demos is None:
        from trainlint.runtime.demos import all_demos

        demos = all_demos()
    if fences is None:
        from trainlint.runtime.fences import FENCES

        fences = {fence.code: fence for fence in FENCES}
    registered = set(registry())
    chosen, chosen_fences = select(list(codes), demos, fences, registered)

    settings = _settings()
    variants = {d.code: fixed_variant(d, settings) for d in chosen}
    scripts = [Script(f"{d.code}-{kind}", source) for d in chosen
               for kind, source in (("bad", d.bad), ("good", d.good))]
    scripts += [Script(f"{code}-fixed", variant.source) for code, variant in variants.items() if variant]
    scripts += [Script(f.code, f.script) for f in chosen_fences]
    with ThreadPoolExecutor(max_workers=1) as pool:  # lint while the runner imports torch
        statics = [pool.submit(static_verdict, demo, settings) for demo in chosen]
        torch_version, results = run_scripts(scripts, workers=workers)
        static_results = [s.result() for s in statics]
    if torch_version is None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            torch_version = version("torch")
        except PackageNotFoundError:
            torch_version = "unknown"

    by_name = {result.name: result for result in results}
    rows = [_demo_row(d, s, by_name[f"{d.code}-bad"], by_name[f"{d.code}-good"], variants[d.code],
                      by_name.get(f"{d.code}-fixed"))
            for d, s in zip(chosen, static_results)]
    rows += [_fence_row(f, by_name[f.code]) for f in chosen_fences]
    notes = []
    if not codes:
        missing = sorted(registered - set(demos))
        if missing:
            notes.append(f"registered rules without a runtime demonstration: {', '.join(missing)}")
        waiting = sorted(set(demos) - registered)
        if waiting:
            notes.append(f"demos whose rule is not registered (no row): {', '.join(waiting)}")
    return Report(torch_version, rows, notes, time.perf_counter() - start)


def run_confirm(codes: list[str], fmt: str = "text", *, demos: dict[str, Demo] | None = None,
                fences: dict[str, Fence] | None = None, workers: int = DEFAULT_WORKERS) -> int:
    """`trainlint confirm`: print the report in `fmt` (text or json) and return the exit code."""
    if fmt not in ("text", "json"):
        print(f"trainlint confirm: unknown format '{fmt}' (text, json)", file=sys.stderr)
        return 2
    try:
        report = confirm(codes, demos=demos, fences=fences, workers=workers)
    except SelectionError as err:
        print(f"trainlint confirm: {err}", file=sys.stderr)
        return 2
    except TorchUnavailable as err:
        print(f"{INSTALL_HINT} ({err})", file=sys.stderr)
        return 2
    if fmt == "json":
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.to_text())
    return report.exit_code


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m trainlint.runtime.confirm",
                                     description="Prove each rule's hazard at run time.")
    parser.add_argument("codes", nargs="*", help="rule codes, prefixes or fence names (default: all)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    return run_confirm(args.codes, args.format)


if __name__ == "__main__":
    sys.exit(main())
