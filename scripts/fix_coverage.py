"""What `check --fix --unsafe-fixes` does to every fixture: per rule, the findings before and
after, fixes applied, and what must stay zero (fixed files that do not parse, findings a fix added,
fixed files that are not the same fix when the file has CRLF or CR line endings).

    python scripts/fix_coverage.py [--files]

Files are fixed in memory (nothing is written), each with the configuration that applies to it and
checked as part of its project, as `check` would. "fixable" rules are those with a fix in their
examples; the total line is the share of their findings that the fixes removed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from trainlint.config import Resolver  # noqa: E402
from trainlint.engine import lint_source  # noqa: E402
from trainlint.fixes import FixPolicy, fix_source, parses  # noqa: E402
from trainlint.reader.project import Project  # noqa: E402
from trainlint.rules import registry

FIXTURES = ROOT / "tests" / "fixtures"


def fixable_codes() -> set[str]:
    return {code for code, rule in registry().items() if any(e.fixed for e in rule.bad_examples())}


def fixture_groups() -> list[list[Path]]:
    """Each project of tests/fixtures/projects as one group, every other fixture on its own."""
    projects = FIXTURES / "projects"
    groups = [sorted(p.rglob("*.py")) for p in sorted(projects.iterdir()) if p.is_dir()]
    groups += [[p] for p in sorted(FIXTURES.rglob("*.py")) if projects not in p.parents]
    return groups


ENDINGS = (("CRLF", "\r\n"), ("CR", "\r"))


def measure(verbose: bool = False) -> tuple[dict[str, Counter], list[str], list[str]]:
    """Counters by code (before, after, fixed, new), the files whose fixed text does not parse, and
    those whose fix in CRLF or CR is not the same fix with the file's line ending on every line."""
    resolver = Resolver()
    policy = FixPolicy(unsafe=True)
    stats = {key: Counter() for key in ("before", "after", "fixed", "new")}
    broken, endings = [], []
    for group in fixture_groups():
        project = Project.for_paths([str(p) for p in group], 10 * 1024 * 1024)
        for path in group:
            name = str(path)
            # the fixtures sit under tests/, but they stand for training scripts, not test code
            settings = dataclasses.replace(resolver.settings_for(name), test_code_ignore=frozenset())
            text = path.read_text(encoding="utf-8")
            outcome = fix_source(text, lambda s: lint_source(s, name, settings, project), policy)
            before = Counter(f.code for f in lint_source(text, name, settings, project).findings)
            after = Counter(f.code for f in outcome.result.findings)
            stats["before"].update(before)
            stats["after"].update(after)
            stats["fixed"].update(outcome.fixed)
            stats["new"].update({code: n - before[code] for code, n in after.items() if n > before[code]})
            if not parses(outcome.source) or any(f.code == "TL000" for f in outcome.result.findings):
                broken.append(name)
            for label, ending in ENDINGS if outcome.changed else ():
                other = text.replace("\n", ending)
                if fix_source(other, lambda s: lint_source(s, name, settings, project), policy).source \
                        != outcome.source.replace("\n", ending):
                    endings.append(f"{name} ({label})")
            if verbose and outcome.changed:
                print(f"{path.relative_to(ROOT)}: fixed {dict(outcome.fixed)}; left {dict(after)}")
    return stats, broken, endings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", action="store_true", help="also print what was fixed in each file")
    args = parser.parse_args()
    stats, broken, endings = measure(args.files)
    fixable = fixable_codes()
    print(f"{'code':<7}{'fixable':>8}{'before':>8}{'after':>7}{'fixed':>7}{'removed':>9}{'new':>5}")
    for code in sorted(set(stats["before"]) | set(stats["after"])):
        before, after = stats["before"][code], stats["after"][code]
        removed = f"{100 * (before - after) / before:.0f} %" if before else "-"
        print(f"{code:<7}{'yes' if code in fixable else 'no':>8}{before:>8}{after:>7}{stats['fixed'][code]:>7}"
              f"{removed:>9}{stats['new'][code]:>5}")
    before = sum(stats["before"][c] for c in fixable)
    after = sum(stats["after"][c] for c in fixable)
    share = 100 * (before - after) / before if before else 100.0
    print(f"\nfixable rules: {before} findings before, {after} after: {share:.1f} % removed; "
          f"{len(broken)} parse failures; {sum(stats['new'].values())} new findings; "
          f"{len(endings)} fixes that change in CRLF or CR")
    for name in broken:
        print(f"  does not parse after fixing: {name}")
    for name in endings:
        print(f"  another fix, or another line ending, in: {name}")
    return 0 if not broken and not endings and not sum(stats["new"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
