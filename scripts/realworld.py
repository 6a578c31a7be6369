"""Precision of a default trainlint run on real code, against the judged findings of issue 13.

    python scripts/realworld.py DIR                   # DIR holds one <owner>+<name> folder per repository
    python scripts/realworld.py DIR --json            # the same report as one JSON object
    python scripts/realworld.py DIR --repo huggingface/peft --show-all
    python scripts/realworld.py DIR --first-contact 2 --half test   # a first-contact round of issue 24

Each folder of DIR is an exported tree of one public repository (its `.py` files at one commit). It is
checked as its own project, the way a user runs trainlint on it (`trainlint . --output-format json
--no-cache` inside the folder, default selection). Every finding is matched to a judgment of
`tests/realworld/judgments.json` ({repository, commit, path, line, code, text, verdict, reason}) by
repository, path, code and the stripped text of the reported line (the line number is only for
people, so judgments survive small shifts of the code); repeated identical lines match the nearest.

The report gives, per rule: the findings, how many are judged TP, minor (true, of little consequence)
and FP, the precision (TP + minor over judged findings; minor also shown on its own), then the judged
findings that no longer appear (a fix removed them: welcome for an FP, a regression for a TP) and the
findings nobody has judged yet, which must be read and judged before the numbers mean anything.

The commit of each folder comes from DIR/manifest.json ({"repositories": {folder: {"repository",
"commit"}}}), else from tests/realworld/manifest.json (the review set as judged), else from the judgments. A folder whose commit differs from its judgments' is reported:
its judgments describe other code. Exit status: 0, or 1 with --strict when a finding is unjudged or a
judged TP disappeared.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JUDGMENTS = ROOT / "tests" / "realworld" / "judgments.json"
MANIFEST = ROOT / "tests" / "realworld" / "manifest.json"  # the repositories and commits of the review set
VERDICTS = ("TP", "minor", "FP")
FIELDS = ("repository", "commit", "path", "line", "code", "text", "verdict", "reason")
# The first-contact set (issue 24, `first_contact.json`) also records which half of a seeded split
# of its repositories a judgment belongs to (rules are tuned on one, measured on the other) and when
# it was made (on first contact, or on a finding that appeared at the end).
FIRST_CONTACT = ROOT / "tests" / "realworld" / "first_contact.json"
FIRST_CONTACT_MANIFEST = ROOT / "tests" / "realworld" / "first_contact_manifest.json"
# each round of first contact is a new set of repositories: round 1 (18 repositories, seed 24) and
# round 2 (14 repositories, seed 25, judged after round 1's false positives had been read and fixed)
FIRST_CONTACT_ROUNDS = {
    1: (FIRST_CONTACT, FIRST_CONTACT_MANIFEST),
    2: (ROOT / "tests" / "realworld" / "first_contact_2.json",
        ROOT / "tests" / "realworld" / "first_contact_2_manifest.json"),
    # round 3 (issue 35: 230 repositories, seed 35, two reviewers on the test half, a third settling)
    3: (ROOT / "tests" / "realworld" / "first_contact_3.json",
        ROOT / "tests" / "realworld" / "first_contact_3_manifest.json"),
    # round 5 (issue 35: 210 repositories split by a hash of their names before collection, at most 5
    # findings per repository, 150 per half; two reviewers on both halves, a third settling). Round 4's
    # data was lost with the machine that held it.
    5: (ROOT / "tests" / "realworld" / "first_contact_5.json",
        ROOT / "tests" / "realworld" / "first_contact_5_manifest.json"),
    # round 6 (issue 35: 204 repositories split by a hash of their names before collection, at most 5
    # findings per repository, 100 per half; two reviewers on both halves, a third settling; fixes
    # from round 5's judged test half and round 6's tune half, round 6's test half held out)
    6: (ROOT / "tests" / "realworld" / "first_contact_6.json",
        ROOT / "tests" / "realworld" / "first_contact_6_manifest.json"),
}
OPTIONAL_FIELDS = {"half": ("tune", "test"), "phase": ("first-contact", "end")}
# round 3 also keeps each reviewer's verdict ({"A": "FP", "B": "minor", "C": ...}) and a false
# finding's class of cause ("role-from-name", "helper-args-ignored", ...)
FREE_FIELDS = ("reviewers", "cause")


@dataclass(frozen=True)
class Finding:
    repository: str
    path: str
    line: int
    code: str
    message: str
    text: str  # the reported line, stripped
    severity: str = "warning"

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.repository, self.path, self.code, self.text)


def load_judgments(path: Path = JUDGMENTS) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))


def validate(judgments: object) -> list[str]:
    """What is wrong with the judgments' shape (empty when nothing is)."""
    if not isinstance(judgments, list):
        return ["the judgments must be a JSON list"]
    problems = []
    seen: Counter = Counter()
    for i, item in enumerate(judgments):
        where = f"judgment {i}"
        if not isinstance(item, dict):
            problems.append(f"{where}: not an object")
            continue
        missing = [f for f in FIELDS if f not in item]
        extra = [f for f in item if f not in FIELDS and f not in OPTIONAL_FIELDS and f not in FREE_FIELDS]
        if missing or extra:
            problems.append(f"{where}: missing {missing}, unexpected {extra}")
            continue
        for field, allowed in OPTIONAL_FIELDS.items():
            if field in item and item[field] not in allowed:
                problems.append(f"{where}: {field} {item[field]!r} is not one of {allowed}")
        if item["verdict"] not in VERDICTS:
            problems.append(f"{where}: verdict {item['verdict']!r} is not one of {VERDICTS}")
        if not isinstance(item["line"], int) or item["line"] < 1:
            problems.append(f"{where}: line must be a positive integer")
        if not (isinstance(item["code"], str) and item["code"].startswith("TL")):
            problems.append(f"{where}: code {item['code']!r} is not a trainlint code")
        if not (isinstance(item["commit"], str) and len(item["commit"]) == 40):
            problems.append(f"{where}: commit must be a 40-hex-digit hash")
        if not (isinstance(item["reason"], str) and item["reason"].strip()):
            problems.append(f"{where}: a reason is required")
        if not (isinstance(item["repository"], str) and item["repository"].count("/") == 1):
            problems.append(f"{where}: repository must be owner/name")
        if not isinstance(item["text"], str):
            problems.append(f"{where}: text (the reported line, stripped) must be a string")
        seen[(item["repository"], item["path"], item["line"], item["code"])] += 1
    problems += [f"judged twice: {k}" for k, n in seen.items() if n > 1]
    return problems


def folder_of(repository: str) -> str:
    return repository.replace("/", "+", 1)


def read_manifest(directory: Path, judgments: list[dict], manifest: Path | None = None) -> dict[str, dict]:
    """folder -> {"repository", "commit"[, "half"]} for the folders present in `directory`."""
    manifest_path = manifest or directory / "manifest.json"
    if not manifest_path.is_file():
        manifest_path = MANIFEST
    entries: dict[str, dict] = {}
    if manifest_path.is_file():
        entries = json.loads(manifest_path.read_text(encoding="utf-8")).get("repositories", {})
    for item in judgments:
        entries.setdefault(folder_of(item["repository"]), {"repository": item["repository"],
                                                           "commit": item["commit"]})
    return {folder: entry for folder, entry in sorted(entries.items())
            if (directory / folder).is_dir() and entry.get("commit")}


def line_text(file: Path, line: int) -> str:
    try:
        lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def run_trainlint(folder: Path, repository: str, jobs: int) -> list[Finding]:
    """A default check of one exported repository, as its own project."""
    # --allow-skipped: an exported repository may hold a file over max-file-size or a link out of
    # it; the measure is about the findings of the files that are checked
    command = [sys.executable, "-P", "-m", "trainlint", ".", "--output-format", "json", "--no-cache", "--allow-skipped"]
    if jobs > 1:
        command += ["--jobs", str(jobs)]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"trainlint failed on {folder} (exit {done.returncode}):\n{done.stderr[-2000:]}")
    findings = []
    for item in json.loads(done.stdout)["findings"]:
        path = item["path"].removeprefix("./")
        findings.append(Finding(repository, path, item["line"], item["code"], item["message"],
                                line_text(folder / path, item["line"]), item.get("severity", "warning")))
    return findings


def match(findings: list[Finding], judgments: list[dict]) -> tuple[list[tuple[Finding, dict]], list[Finding], list[dict]]:
    """(finding, judgment) pairs, unjudged findings, judgments whose finding disappeared."""
    pool: dict[tuple, list[dict]] = defaultdict(list)
    for item in judgments:
        pool[(item["repository"], item["path"], item["code"], item["text"])].append(item)
    pairs, unjudged = [], []
    for finding in sorted(findings, key=lambda f: (f.repository, f.path, f.line, f.code)):
        candidates = pool.get(finding.key)
        if not candidates:
            unjudged.append(finding)
            continue
        best = min(candidates, key=lambda j: abs(j["line"] - finding.line))
        candidates.remove(best)
        pairs.append((finding, best))
    gone = [item for items in pool.values() for item in items]
    return pairs, unjudged, sorted(gone, key=lambda j: (j["repository"], j["path"], j["line"], j["code"]))


def summarise(pairs, unjudged, gone) -> dict:
    rules: dict[str, Counter] = defaultdict(Counter)
    for finding, judgment in pairs:
        rules[finding.code][judgment["verdict"]] += 1
        rules[finding.code]["findings"] += 1
    for finding in unjudged:
        rules[finding.code]["unjudged"] += 1
        rules[finding.code]["findings"] += 1
    for judgment in gone:
        rules[judgment["code"]][f"gone_{judgment['verdict']}"] += 1

    def row(counts: Counter) -> dict:
        judged = sum(counts[v] for v in VERDICTS)
        return {"findings": counts["findings"], "TP": counts["TP"], "minor": counts["minor"], "FP": counts["FP"],
                "unjudged": counts["unjudged"],
                "precision": round((counts["TP"] + counts["minor"]) / judged, 4) if judged else None,
                "strict_precision": round(counts["TP"] / judged, 4) if judged else None,
                "gone": {v: counts[f"gone_{v}"] for v in VERDICTS if counts[f"gone_{v}"]}}

    total = sum(rules.values(), Counter())
    # a finding reported at info (a documented lower severity) asks for less than an error/warning
    by_severity: dict[str, Counter] = defaultdict(Counter)
    for finding, judgment in pairs:
        group = "info" if finding.severity == "info" else "error/warning"
        by_severity[group][judgment["verdict"]] += 1
        by_severity[group]["findings"] += 1
    for finding in unjudged:
        group = "info" if finding.severity == "info" else "error/warning"
        by_severity[group]["unjudged"] += 1
        by_severity[group]["findings"] += 1
    return {"rules": {code: row(rules[code]) for code in sorted(rules)}, "total": row(total),
            "by_severity": {group: row(by_severity[group]) for group in sorted(by_severity)}}


def _percent(value) -> str:
    return "   -  " if value is None else f"{100 * value:5.1f}%"


def print_report(summary: dict, pairs, unjudged, gone, stale: list[str], show_all: bool) -> None:
    print("rule   findings    TP minor    FP unjudged  precision (TP+minor)  TP only  disappeared")
    for code, row in [*summary["rules"].items(), ("all", summary["total"])]:
        disappeared = ", ".join(f"{n} {v}" for v, n in row["gone"].items()) or "-"
        print(f"{code:6} {row['findings']:8} {row['TP']:5} {row['minor']:5} {row['FP']:5} {row['unjudged']:8}"
              f"  {_percent(row['precision']):>20}  {_percent(row['strict_precision']):>7}  {disappeared}")
    for group, row in summary["by_severity"].items():
        print(f"  at {group}: {row['findings']} findings, {_percent(row['precision']).strip()} true, "
              f"{_percent(row['strict_precision']).strip()} TP")
    for warning in stale:
        print(f"\nWARNING: {warning}")
    if gone:
        print(f"\nJudged findings that no longer appear ({len(gone)}), by verdict and reason:")
        groups: dict[tuple, list[dict]] = defaultdict(list)
        for item in gone:
            groups[(VERDICTS.index(item["verdict"]), item["code"], item["reason"])].append(item)
        for (verdict, code, reason), items in sorted(groups.items()):
            flag = "  <-- TRUE FINDINGS LOST" if VERDICTS[verdict] == "TP" else ""
            print(f"  {len(items):3} {VERDICTS[verdict]:5} {code}  {reason}{flag}")
            for item in items[:3] if VERDICTS[verdict] != "TP" else items:
                print(f"        {item['repository']} {item['path']}:{item['line']}")
            if VERDICTS[verdict] != "TP" and len(items) > 3:
                print(f"        ... and {len(items) - 3} more")
    if unjudged:
        print(f"\nUNJUDGED findings ({len(unjudged)}): read each one and add a judgment to {JUDGMENTS.relative_to(ROOT)}"
              " (or run with --template for the entries to fill in):")
        for f in unjudged:
            print(f"  {f.repository} {f.path}:{f.line} {f.code}  {f.text[:90]}\n      {f.message[:200]}")
    else:
        print("\nEvery finding is judged.")
    if show_all:
        print("\nJudged findings:")
        for f, j in pairs:
            print(f"  {j['verdict']:5} {f.repository} {f.path}:{f.line} {f.code}  {j['reason']}")


@dataclass
class Review:
    manifest: dict[str, dict]
    summary: dict
    pairs: list[tuple[Finding, dict]]
    unjudged: list[Finding]
    gone: list[dict]
    stale: list[str]


def evaluate(directory: Path, judgments: list[dict], repos: list[str] | tuple = (), jobs: int = 1,
             manifest_path: Path | None = None, half: str | None = None) -> Review:
    """Check every exported repository of `directory` (or only `repos`, or one half of the split)
    and match the findings."""
    manifest = read_manifest(directory, judgments, manifest_path)
    if repos:
        manifest = {k: v for k, v in manifest.items() if v["repository"] in repos}
    if half:
        manifest = {k: v for k, v in manifest.items() if v.get("half") == half}
    if not manifest:
        raise SystemExit(f"no exported repository found in {directory}")
    findings: list[Finding] = []
    stale: list[str] = []
    commits = {(j["repository"], j["commit"]) for j in judgments}
    for folder, entry in manifest.items():
        repository, commit = entry["repository"], entry["commit"]
        judged_commits = {c for r, c in commits if r == repository}
        if judged_commits and commit not in judged_commits:
            stale.append(f"{repository} is exported at {commit[:12]} but judged at "
                         f"{', '.join(sorted(c[:12] for c in judged_commits))}: its judgments may not apply")
        findings += run_trainlint(directory / folder, repository, jobs)
    checked = {entry["repository"] for entry in manifest.values()}
    pairs, unjudged, gone = match(findings, [j for j in judgments if j["repository"] in checked])
    return Review(manifest, summarise(pairs, unjudged, gone), pairs, unjudged, gone, stale)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path, help="the folder holding the exported <owner>+<name> trees")
    parser.add_argument("--judgments", type=Path, default=JUDGMENTS)
    parser.add_argument("--manifest", type=Path, default=None,
                        help="the repositories and commits (default: DIR/manifest.json, else the review set's)")
    parser.add_argument("--first-contact", nargs="?", type=int, const=1, choices=sorted(FIRST_CONTACT_ROUNDS),
                        metavar="ROUND", help="use a first-contact set of issue 24, its judgments and manifest "
                                              "(round 1 when no ROUND is given)")
    parser.add_argument("--half", choices=OPTIONAL_FIELDS["half"], help="only this half of the first-contact split")
    parser.add_argument("--repo", action="append", default=[], help="only this owner/name (repeatable)")
    parser.add_argument("--jobs", "-j", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--show-all", action="store_true", help="also list every judged finding")
    parser.add_argument("--template", action="store_true",
                        help="print judgment entries (verdict and reason empty) for the unjudged findings")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when a finding is unjudged or a judged TP disappeared")
    args = parser.parse_args(argv)

    if args.first_contact:
        judged, listed = FIRST_CONTACT_ROUNDS[args.first_contact]
        args.judgments, args.manifest = judged, args.manifest or listed
    judgments = load_judgments(args.judgments)
    problems = validate(judgments)
    if problems:
        raise SystemExit("invalid judgments:\n  " + "\n  ".join(problems))
    review = evaluate(args.directory, judgments, args.repo, args.jobs, args.manifest, args.half)
    summary, pairs, unjudged, gone, stale = (review.summary, review.pairs, review.unjudged, review.gone,
                                             review.stale)
    manifest = review.manifest

    if args.template:
        commit_of = {e["repository"]: e["commit"] for e in manifest.values()}
        half_of = {e["repository"]: e.get("half") for e in manifest.values()}
        print(json.dumps([{"repository": f.repository, "commit": commit_of[f.repository], "path": f.path,
                           "line": f.line, "code": f.code, "text": f.text, "verdict": "", "reason": "",
                           **({"half": half_of[f.repository], "phase": "end"} if half_of[f.repository] else {})}
                          for f in unjudged], indent=1))
    elif args.json:
        print(json.dumps({**summary, "stale": stale,
                          "unjudged": [f.__dict__ for f in unjudged], "disappeared": gone}, indent=1))
    else:
        print_report(summary, pairs, unjudged, gone, stale, args.show_all)
    lost_tp = any(j["verdict"] == "TP" for j in gone)
    return 1 if args.strict and (unjudged or lost_tp) else 0


if __name__ == "__main__":
    sys.exit(main())
