"""Recall of trainlint on real bug-fix commits mined from public git histories (issues 24 and 25).

    python scripts/mined_bugs.py export MIRRORS [--out /work/mined]   # write the two versions of each file
    python scripts/mined_bugs.py score [--out /work/mined] [--json]    # run trainlint on them, recall per class

`tests/realworld/mined_bugs.json` lists commits that fix a silent training bug of a class of the rule
catalogue: {repository, buggy, fix, path, line, class, why}. `buggy` is the fix's parent, `line` the
line of the buggy version where the catalogue says the finding is reported, `class` the rule code,
`why` one sentence on what was wrong. No code of those repositories is kept in the project: `export`
takes it from git mirrors (MIRRORS/<owner>+<name>, a bare git directory or one holding `repo/`, as
the `fetch` tool leaves them) and writes, outside the project,
OUT/<owner>+<name>/<fix>/{buggy,fixed}/<folder of path>/*.py — the file and the Python files of its
folder at each commit, so that the file can also be checked with the folder as its project.

`score` checks each buggy and fixed file with every rule selected (in-process engine API), once alone
and once with its folder as the project. A bug counts as found when a finding of its class is
reported within 2 lines of `line` in the buggy version and none of that class is reported within 2
lines of the corresponding line (through a line diff) of the fixed version. Exit status 0, or 2 when
the data is malformed or an exported file is missing.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "realworld" / "mined_bugs.json"
DEFAULT_OUT = Path("/work/mined")
FIELDS = ("repository", "buggy", "fix", "path", "line", "class", "why")
# the codes of ../shared/RULES.md, rules written or not yet (a class may precede its rule)
CATALOGUE = frozenset(
    "TL101 TL102 TL103 TL104 TL105 TL106 TL107 TL108 TL201 TL202 TL203 TL204 TL205 TL301 TL302 TL303 "
    "TL401 TL402 TL403 TL404 TL501 TL502 TL601 TL602 TL603 TL701 TL702 TL801".split())
SLACK = 2  # lines either side of the recorded line
_SHA = re.compile(r"[0-9a-f]{40}")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


def load(path: Path = DATA) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))


def validate(entries: object) -> list[str]:
    """What is wrong with the data's shape (empty when nothing is)."""
    if not isinstance(entries, list):
        return ["the data must be a JSON list"]
    problems = []
    seen = set()
    for i, item in enumerate(entries):
        where = f"entry {i}"
        if not isinstance(item, dict):
            problems.append(f"{where}: not an object")
            continue
        missing = [f for f in FIELDS if f not in item]
        extra = [f for f in item if f not in FIELDS]
        if missing or extra:
            problems.append(f"{where}: missing {missing}, unexpected {extra}")
            continue
        if not isinstance(item["repository"], str) or not _REPO.fullmatch(item["repository"]):
            problems.append(f"{where}: repository must be owner/name")
        for key in ("buggy", "fix"):
            if not isinstance(item[key], str) or not _SHA.fullmatch(item[key]):
                problems.append(f"{where}: {key} must be a full 40-digit lower-case commit")
        if item["buggy"] == item["fix"]:
            problems.append(f"{where}: the buggy and fixed commits are the same")
        path = item["path"]
        if not isinstance(path, str) or not path.endswith(".py") or path.startswith(("/", "./")) or ".." in path.split("/"):
            problems.append(f"{where}: path must be a relative .py path inside the repository")
        if not isinstance(item["line"], int) or isinstance(item["line"], bool) or item["line"] < 1:
            problems.append(f"{where}: line must be a positive integer")
        if item["class"] not in CATALOGUE:
            problems.append(f"{where}: class {item['class']!r} is not a code of the rule catalogue")
        if not isinstance(item["why"], str) or len(item["why"].split()) < 6:
            problems.append(f"{where}: why must be a sentence")
        key = (item["repository"], item["fix"], item["path"], item["class"])
        if key in seen:
            problems.append(f"{where}: {key} is listed twice")
        seen.add(key)
    return problems


# -- export -------------------------------------------------------------------------------------
def _git_dir(mirrors: Path, repository: str) -> Path:
    folder = mirrors / repository.replace("/", "+")
    return folder / "repo" if (folder / "repo").is_dir() else folder


def _git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True).stdout


def version_dir(out: Path, entry: dict, side: str) -> Path:
    """Where one side ("buggy" or "fixed") of an entry is exported."""
    return out / entry["repository"].replace("/", "+") / entry["fix"][:12] / side


def export(entry: dict, mirrors: Path, out: Path) -> None:
    git_dir = _git_dir(mirrors, entry["repository"])
    folder = entry["path"].rpartition("/")[0]
    for side, commit in (("buggy", entry["buggy"]), ("fixed", entry["fix"])):
        listing = _git(git_dir, "ls-tree", "--name-only", commit, f"{folder}/" if folder else ".").decode()
        names = {n for n in listing.splitlines() if n.endswith(".py")} | {entry["path"]}
        for name in sorted(names):
            target = version_dir(out, entry, side) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(_git(git_dir, "show", f"{commit}:{name}"))


# -- score --------------------------------------------------------------------------------------
def corresponding_line(before: list[str], after: list[str], line: int) -> int:
    """The line of `after` that stands where 1-based `line` of `before` stood (a changed line maps
    to the start of its replacement)."""
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if i1 <= line - 1 < i2:  # an insertion (i1 == i2) holds no line of `before`
            if tag == "equal":
                return j1 + (line - 1 - i1) + 1
            return j1 + 1
    return max(1, len(after))


def _engine():
    from trainlint.engine import lint_source
    from trainlint.settings import Settings, resolve_selection
    try:
        from trainlint.project import Project  # the project reader's own layer (issue 24)
    except ImportError:
        from trainlint.reader.project import Project
    return lint_source, Settings(select=resolve_selection(["ALL"], [], [])), Project


def _lines_of(findings, code: str) -> list[int]:
    return sorted(f.line for f in findings if f.code == code)


def score_entry(entry: dict, out: Path, engine) -> dict:
    lint_source, settings, project_for = engine
    result = {"entry": entry}
    sources = {}
    for side in ("buggy", "fixed"):
        path = version_dir(out, entry, side) / entry["path"]
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: run `export` first")
        sources[side] = path
    buggy_lines = sources["buggy"].read_text(encoding="utf-8", errors="replace").splitlines()
    fixed_lines = sources["fixed"].read_text(encoding="utf-8", errors="replace").splitlines()
    where = {"buggy": entry["line"], "fixed": corresponding_line(buggy_lines, fixed_lines, entry["line"])}
    for mode in ("alone", "project"):
        hits = {}
        for side, path in sources.items():
            project = None
            if mode == "project":
                project = project_for.for_paths(sorted(str(p) for p in path.parent.glob("*.py")))
            findings = lint_source(path.read_bytes(), str(path), settings, project).findings
            hits[side] = [n for n in _lines_of(findings, entry["class"]) if abs(n - where[side]) <= SLACK]
        result[mode] = {"buggy": hits["buggy"], "fixed": hits["fixed"],
                        "found": bool(hits["buggy"]) and not hits["fixed"]}
    result["fixed_line"] = where["fixed"]
    return result


def score(entries: list[dict], out: Path) -> list[dict]:
    engine = _engine()
    return [score_entry(e, out, engine) for e in entries]


def summary(results: list[dict]) -> dict:
    per_class: dict[str, dict[str, int]] = defaultdict(lambda: {"total": 0, "alone": 0, "project": 0})
    for r in results:
        counts = per_class[r["entry"]["class"]]
        counts["total"] += 1
        counts["alone"] += r["alone"]["found"]
        counts["project"] += r["project"]["found"]
    overall = {k: sum(c[k] for c in per_class.values()) for k in ("total", "alone", "project")}
    return {"per_class": dict(sorted(per_class.items())), "overall": overall}


def _report(results: list[dict]) -> str:
    rows = []
    for r in results:
        e = r["entry"]
        mark = "found" if r["project"]["found"] else ("found alone" if r["alone"]["found"] else "missed")
        noisy = " (still reported in the fixed version)" if r["project"]["fixed"] else ""
        rows.append(f"{e['class']}  {mark:11}  {e['repository']}@{e['fix'][:10]} {e['path']}:{e['line']}{noisy}")
    s = summary(results)
    rows.append("")
    rows.append(f"{'class':6} {'total':>5} {'alone':>6} {'project':>8}")
    for code, c in s["per_class"].items():
        rows.append(f"{code:6} {c['total']:5} {c['alone']:6} {c['project']:8}")
    o = s["overall"]
    rows.append(f"{'all':6} {o['total']:5} {o['alone']:6} {o['project']:8}"
                f"   recall {o['alone'] / max(1, o['total']):.0%} alone, {o['project'] / max(1, o['total']):.0%} with the folder")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="write the buggy and fixed versions from git mirrors")
    ex.add_argument("mirrors", type=Path)
    ex.add_argument("--out", type=Path, default=DEFAULT_OUT)
    sc = sub.add_parser("score", help="run trainlint on the exported versions")
    sc.add_argument("--out", type=Path, default=DEFAULT_OUT)
    sc.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        entries = load()
    except (OSError, ValueError) as exc:
        print(f"mined_bugs: cannot read {DATA}: {exc}", file=sys.stderr)
        return 2
    problems = validate(entries)
    if problems:
        print("mined_bugs: " + "; ".join(problems), file=sys.stderr)
        return 2
    if args.command == "export":
        for entry in entries:
            try:
                export(entry, args.mirrors, args.out)
            except subprocess.CalledProcessError as exc:
                print(f"mined_bugs: {entry['repository']}@{entry['fix'][:10]}: {exc.stderr.decode().strip()}", file=sys.stderr)
                return 2
        print(f"exported {len(entries)} fixes to {args.out}")
        return 0
    try:
        results = score(entries, args.out)
    except FileNotFoundError as exc:
        print(f"mined_bugs: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"results": results, **summary(results)}, indent=1) if args.json else _report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
