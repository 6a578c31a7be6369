"""Recall of trainlint on real bug-fix commits mined from public git histories (issues 24 and 25).

    python scripts/mined_bugs.py export MIRRORS [--out /work/mined]   # write the two versions of each file
    python scripts/mined_bugs.py score [--out /work/mined] [--json]    # run trainlint on them, recall per class
    python scripts/mined_bugs.py export-whole MIRRORS [--out /work/mined]  # the whole repository at each commit
    python scripts/mined_bugs.py score-whole [--out /work/mined] [--json] [--half tune|test]  # `trainlint .` there

Every command takes `--data FILE`: another JSON list of cases of the same shape (a newly mined set
kept outside the project before it is added) instead of the project's.

`tests/realworld/mined_bugs.json` lists commits that fix a silent training bug of a class of the rule
catalogue: {repository, buggy, fix, path, line, class, why}. `buggy` is the fix's parent, `line` the
line of the buggy version where the catalogue says the finding is reported, `class` the rule code,
`why` one sentence on what was wrong. Three optional labels (issue 36): `capability`, the missing
capability a case needs (e.g. "framework owns the loop", "update split across methods"),
`framework`, the framework whose idiom holds the bug (e.g. "accelerate", "lightning"), and `half`,
"tune" or "test", fixed before any result is read. No code of those repositories is kept in the project: `export`
takes it from git mirrors (MIRRORS/<owner>+<name>, a bare git directory or one holding `repo/`, as
the `fetch` tool leaves them) and writes, outside the project,
OUT/<owner>+<name>/<fix>/{buggy,fixed}/<folder of path>/*.py — the file and the Python files of its
folder at each commit, so that the file can also be checked with the folder as its project.

`score` checks each buggy and fixed file with every rule selected (in-process engine API), once alone
and once with its folder as the project. A bug counts as found when a finding of its class is
reported within 2 lines of `line` in the buggy version and none of that class is reported within 2
lines of the corresponding line (through a line diff) of the fixed version. Exit status 0, or 2 when
the data is malformed or an exported file is missing.

Whole repositories (issue 36), as `trainlint .` reports a bug in CI: `export-whole` writes every
`.py` file, `pyproject.toml`, `setup.py`, `setup.cfg` and `requirements*.txt` of the repository at
each buggy and fixed commit to OUT/whole/<owner>+<name>/<commit>/ (once per commit, shared by its
cases; a blob the snapshot left out is skipped and counted). `score-whole` runs
`trainlint . --output-format json --no-cache --allow-skipped` there as a subprocess with the default
selection (plus `--extend-select CODE` for a case whose rule is off by default), once per commit,
and keeps the findings in OUT/whole-json/<owner>+<name>/<commit>.json (rerun when trainlint's
sources change). A case is found when a finding of its class is reported within 2 lines of `line`
in its file at the buggy commit, and quiet when fixed when none of that class is within 2 lines of
the corresponding line at the fixed commit. It prints recall per class, capability and framework,
and the share of found cases whose fixed version is quiet; exit status 2 when a run failed.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "realworld" / "mined_bugs.json"
DEFAULT_OUT = Path("/work/mined")
FIELDS = ("repository", "buggy", "fix", "path", "line", "class", "why")
OPTIONAL = ("capability", "framework", "half")  # optional labels, see the docstring
HALVES = ("tune", "test")
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
        extra = [f for f in item if f not in FIELDS + OPTIONAL]
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
        for label in ("capability", "framework"):
            if label in item and (not isinstance(item[label], str) or not item[label].strip()):
                problems.append(f"{where}: {label} must be a non-empty string")
        if "half" in item and item["half"] not in HALVES:
            problems.append(f"{where}: half must be one of {', '.join(HALVES)}")
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


# -- whole repositories -------------------------------------------------------------------------
# Issue 36: a case is scored as `trainlint .` would report it in CI, run at the root of the whole
# repository at the buggy and at the fixed commit, with the default selection.
_METADATA = ("pyproject.toml", "setup.py", "setup.cfg")
_REQUIREMENTS = re.compile(r"requirements[^/]*\.txt")


def _whole_kept(name: str) -> bool:
    base = name.rpartition("/")[2]
    return name.endswith(".py") or base in _METADATA or bool(_REQUIREMENTS.fullmatch(base))


def whole_dir(out: Path, repository: str, commit: str) -> Path:
    """Where the whole repository at `commit` is exported (shared by every case of that commit)."""
    return out / "whole" / repository.replace("/", "+") / commit


def find_git_dir(mirrors: Path, repository: str) -> Path:
    """The git directory of a mirror: MIRRORS/<owner>+<name> itself, or its `repo/` or `.git/`."""
    folder = mirrors / repository.replace("/", "+")
    for candidate in (folder / "repo", folder / ".git", folder):
        if (candidate / "objects").is_dir() and (candidate / "HEAD").is_file():
            return candidate
    raise FileNotFoundError(f"no git directory for {repository} in {folder}")


def export_whole_commit(git_dir: Path, commit: str, target: Path) -> tuple[int, int]:
    """Write the Python and metadata files of `commit` under `target`; (written, missing blobs).

    Blobs are read one by one through `git cat-file --batch` rather than `git archive`, which stops
    at the first large file a snapshot leaves out; such a missing blob is skipped."""
    if (target / ".exported").is_file():  # done before, for another case of the same commit
        return -1, -1
    listing = _git(git_dir, "ls-tree", "-r", "-z", "--full-tree", commit).split(b"\0")
    wanted = []
    for row in listing:
        if not row:
            continue
        meta, _, name = row.partition(b"\t")
        mode, kind, sha = meta.split()
        path = name.decode("utf-8", errors="surrogateescape")
        # regular files only: a symbolic link (120000) or a submodule (commit) is not the project's code
        if kind == b"blob" and mode in (b"100644", b"100755") and _whole_kept(path):
            wanted.append((sha.decode(), path))
    staging = target.with_name(target.name + ".partial")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    written = missing = 0
    with subprocess.Popen(["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as batch:
        for sha, path in wanted:
            batch.stdin.write(sha.encode() + b"\n")
            batch.stdin.flush()
            header = batch.stdout.readline().split()
            if len(header) != 3:  # "<sha> missing": not in this snapshot
                missing += 1
                continue
            data = batch.stdout.read(int(header[2]))
            batch.stdout.read(1)  # the newline after the contents
            file = staging / path
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_bytes(data)
            written += 1
        batch.stdin.close()
    (staging / ".exported").write_text(f"{written} files, {missing} missing blobs\n", encoding="utf-8")
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    return written, missing


def export_whole(entries: list[dict], mirrors: Path, out: Path) -> list[str]:
    """Export every commit of the cases once; a line per commit said."""
    said = []
    commits = sorted({(e["repository"], c) for e in entries for c in (e["buggy"], e["fix"])})
    for repository, commit in commits:
        git_dir = find_git_dir(mirrors, repository)
        written, missing = export_whole_commit(git_dir, commit, whole_dir(out, repository, commit))
        state = "already exported" if written < 0 else f"{written} files" + (f", {missing} missing blobs skipped" if missing else "")
        said.append(f"{repository}@{commit[:10]}: {state}")
    return said


def _trainlint(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    # -P: the checked repository (the working directory) is not put on sys.path, so its own
    # `rules/` or `trainlint/` package cannot stand in for ours
    return subprocess.run([sys.executable, "-P", "-m", "trainlint", *args], cwd=cwd, capture_output=True, text=True)


def off_by_default() -> frozenset[str]:
    """The codes of the rules that exist but are off in the default selection."""
    done = _trainlint("rules", "--format", "json")
    if done.returncode != 0:
        raise RuntimeError(f"`trainlint rules` failed: {done.stderr.strip()}")
    return frozenset(r["code"] for r in json.loads(done.stdout) if not r["enabled_by_default"])


def _fingerprint() -> str:
    """What the cached runs depend on: the linter's own sources (a changed rule reruns every commit)."""
    import hashlib
    import importlib.util
    digest = hashlib.sha256()
    for package in ("trainlint", "trainlint.rules"):
        spec = importlib.util.find_spec(package)
        for folder in spec.submodule_search_locations or ():
            for file in sorted(Path(folder).rglob("*")):
                if file.is_file() and file.suffix in (".py", ".toml", ".json", ".yaml", ".yml"):
                    digest.update(str(file.relative_to(folder)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def run_whole(out: Path, repository: str, commit: str, extend: list[str], fingerprint: str) -> dict:
    """trainlint's JSON report of the whole repository at `commit`, run once and cached."""
    root = whole_dir(out, repository, commit)
    if not (root / ".exported").is_file():
        raise FileNotFoundError(f"{root} is not exported: run `export-whole` first")
    cache = out / "whole-json" / repository.replace("/", "+") / f"{commit}.json"
    key = {"fingerprint": fingerprint, "extend_select": extend}
    if cache.is_file():
        kept = json.loads(cache.read_text(encoding="utf-8"))
        if kept.get("key") == key:
            return kept
    args = [".", "--output-format", "json", "--no-cache", "--allow-skipped"]
    if extend:
        args += ["--extend-select", ",".join(extend)]
    done = _trainlint(*args, cwd=root)
    if done.returncode not in (0, 1):
        kept = {"key": key, "error": f"exit {done.returncode}: {done.stderr.strip()[-500:]}", "findings": []}
    else:
        report = json.loads(done.stdout)
        kept = {"key": key, "error": None, "files_checked": report.get("files_checked"),
                "findings": [{"path": Path(f["path"]).as_posix().removeprefix("./"), "line": f["line"], "code": f["code"]}
                             for f in report["findings"]]}
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(kept), encoding="utf-8")
    return kept


def score_whole_entry(entry: dict, out: Path, runs: dict) -> dict:
    """Found (buggy) and quiet-when-fixed (fixed) for one case from its commits' cached runs."""
    result = {"entry": entry, "error": None, "buggy": [], "fixed": [], "fixed_line": None,
              "found": False, "quiet": None}
    buggy_file = whole_dir(out, entry["repository"], entry["buggy"]) / entry["path"]
    fixed_file = whole_dir(out, entry["repository"], entry["fix"]) / entry["path"]
    errors = [runs[c]["error"] for c in (entry["buggy"], entry["fix"]) if runs[c]["error"]]
    if errors or not buggy_file.is_file():
        result["error"] = errors[0] if errors else f"{entry['path']} is not in the export of {entry['buggy'][:10]}"
        return result

    def near(commit: str, line: int) -> list[int]:
        return sorted(f["line"] for f in runs[commit]["findings"]
                      if f["path"] == entry["path"] and f["code"] == entry["class"] and abs(f["line"] - line) <= SLACK)

    result["buggy"] = near(entry["buggy"], entry["line"])
    result["found"] = bool(result["buggy"])
    if fixed_file.is_file():  # a fix that deletes the file has no fixed version to be quiet in
        before = buggy_file.read_text(encoding="utf-8", errors="replace").splitlines()
        after = fixed_file.read_text(encoding="utf-8", errors="replace").splitlines()
        result["fixed_line"] = corresponding_line(before, after, entry["line"])
        result["fixed"] = near(entry["fix"], result["fixed_line"])
        result["quiet"] = not result["fixed"]
    return result


def score_whole(entries: list[dict], out: Path, progress=None) -> list[dict]:
    """One trainlint run per exported commit (cached), then every case scored from those runs."""
    off = off_by_default()
    fingerprint = _fingerprint()
    extend: dict[tuple[str, str], set[str]] = defaultdict(set)
    for e in entries:
        for commit in (e["buggy"], e["fix"]):
            extend[(e["repository"], commit)] |= {e["class"]} & off
    runs = {}
    for (repository, commit), codes in sorted(extend.items()):
        if progress:
            progress(f"{repository}@{commit[:10]}")
        runs[commit] = run_whole(out, repository, commit, sorted(codes), fingerprint)
    return [score_whole_entry(e, out, runs) for e in entries]


def whole_summary(results: list[dict]) -> dict:
    """Recall per class, capability and framework; the fixed versions' quiet rate over found cases."""
    def table(label) -> dict:
        rows: dict[str, dict[str, int]] = defaultdict(lambda: {"total": 0, "found": 0, "found_quiet": 0, "error": 0})
        for r in results:
            row = rows[label(r["entry"])]
            row["total"] += 1
            row["found"] += r["found"]
            row["found_quiet"] += r["found"] and r["quiet"] is not False
            row["error"] += r["error"] is not None
        return dict(sorted(rows.items()))

    found = [r for r in results if r["found"]]
    judged = [r for r in found if r["quiet"] is not None]
    return {
        "per_class": table(lambda e: e["class"]),
        "per_capability": table(lambda e: e.get("capability", "(none)")),
        "per_framework": table(lambda e: e.get("framework", "(none)")),
        "overall": table(lambda e: "all")["all"] if results else {"total": 0, "found": 0, "found_quiet": 0, "error": 0},
        "fixed_quiet": {"quiet": sum(r["quiet"] for r in judged), "found": len(judged)},
    }


def _whole_report(results: list[dict]) -> str:
    rows = []
    for r in results:
        e = r["entry"]
        if r["error"]:
            mark = "error"
        else:
            mark = "found" if r["found"] else "missed"
        noisy = " (still reported in the fixed version)" if r["quiet"] is False and r["found"] else ""
        why = f" ({r['error']})" if r["error"] else ""
        rows.append(f"{e['class']}  {mark:6}  {e['repository']}@{e['fix'][:10]} {e['path']}:{e['line']}{noisy}{why}")
    s = whole_summary(results)
    for title, key in (("class", "per_class"), ("capability", "per_capability"), ("framework", "per_framework")):
        rows.append("")
        width = max([len(title)] + [len(k) for k in s[key]])
        rows.append(f"{title:{width}} {'total':>5} {'found':>5} {'recall':>6} {'quiet':>5}")
        for name, c in s[key].items():
            rows.append(f"{name:{width}} {c['total']:5} {c['found']:5} {c['found'] / max(1, c['total']):6.0%} {c['found_quiet']:5}")
    o, q = s["overall"], s["fixed_quiet"]
    rows.append("")
    rows.append(f"recall {o['found']}/{o['total']} = {o['found'] / max(1, o['total']):.0%} in whole repositories; "
                f"found and quiet when fixed {o['found_quiet']}/{o['total']}; "
                f"fixed versions quiet in {q['quiet']}/{q['found']} found cases"
                + (f"; {o['error']} cases not scored (error)" if o["error"] else ""))
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="write the buggy and fixed versions from git mirrors")
    ex.add_argument("mirrors", type=Path)
    sc = sub.add_parser("score", help="run trainlint on the exported versions")
    sc.add_argument("--json", action="store_true")
    ew = sub.add_parser("export-whole", help="write the whole repository at each buggy and fixed commit")
    ew.add_argument("mirrors", type=Path)
    sw = sub.add_parser("score-whole", help="run `trainlint .` in each exported repository and score the cases")
    sw.add_argument("--json", action="store_true")
    sw.add_argument("--half", choices=HALVES, help="only the cases of this half")
    for command in (ex, sc, ew, sw):
        command.add_argument("--out", type=Path, default=DEFAULT_OUT)
        command.add_argument("--data", type=Path, default=DATA, help="the JSON list of cases [default: the project's]")
    args = parser.parse_args(argv)
    try:
        entries = load(args.data)
    except (OSError, ValueError) as exc:
        print(f"mined_bugs: cannot read {args.data}: {exc}", file=sys.stderr)
        return 2
    problems = validate(entries)
    if problems:
        print(f"mined_bugs: {args.data}: " + "; ".join(problems), file=sys.stderr)
        return 2
    if getattr(args, "half", None):
        entries = [e for e in entries if e.get("half") == args.half]
        if not entries:
            print(f"mined_bugs: no case of {args.data} is in the {args.half} half", file=sys.stderr)
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
    if args.command == "export-whole":
        try:
            for line in export_whole(entries, args.mirrors, args.out):
                print(line, flush=True)
        except FileNotFoundError as exc:
            print(f"mined_bugs: {exc}", file=sys.stderr)
            return 2
        except subprocess.CalledProcessError as exc:
            print(f"mined_bugs: {' '.join(exc.cmd[1:])}: {exc.stderr.decode().strip()}", file=sys.stderr)
            return 2
        print(f"exported the commits of {len(entries)} cases to {args.out / 'whole'}")
        return 0
    if args.command == "score-whole":
        try:
            results = score_whole(entries, args.out, progress=lambda what: print(f"checking {what}", file=sys.stderr, flush=True))
        except (FileNotFoundError, RuntimeError, ValueError) as exc:
            print(f"mined_bugs: {exc}", file=sys.stderr)
            return 2
        print(json.dumps({"results": results, **whole_summary(results)}, indent=1) if args.json else _whole_report(results))
        return 2 if any(r["error"] for r in results) else 0
    try:
        results = score(entries, args.out)
    except FileNotFoundError as exc:
        print(f"mined_bugs: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"results": results, **summary(results)}, indent=1) if args.json else _report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
