"""`# noqa` comments and `# trainlint: disable-file=...` directives.

A `# noqa` or `# trainlint: disable-file` counts only in a real comment (the tokenizer's COMMENT
tokens, on the line Python's tokenizer gives them): text in a string that looks like a comment
suppresses nothing. The grammar of `# noqa`:

    # noqa                          every code on the line
    # noqa: TL401                   these codes (or rule names: unsafe-torch-load), separated by
    # noqa: TL401, TL402 TL403      commas and/or spaces
    ...then nothing, another `# comment`, or a `(reason)`.

Anything else after `noqa` (`# noqa TL401` without the colon, `# noqa:` without codes, words after
the codes) is malformed: it suppresses nothing and is reported as TL002 when it is meant for
trainlint: it names a TL code or a rule name, or it names no code at all and a finding of ours is on
its line (the finding it fails to silence is the proof; with none, `# noqa, register module` is
flake8's blanket comment, not ours to judge). Comments of other tools are left
alone: other codes (`# noqa: E501`, `# noqa F401`, `# noqa: E501  trusted source`) and words that
are no code of ours (`# noqa: GB_REGISTRY`, `# noqa: set_linter`, prose). A later `# noqa` in the
same comment (`# noqa: E501 long  # noqa: TL401`) is read when the first is another tool's.
A code that suppressed nothing on its line, or a TL code that does not exist, is reported as TL001
with a fix removing it.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, replace
from typing import Callable, Iterable

from trainlint.finding import PROVEN, Edit, Evidence, FileResult, Finding, Fix
from trainlint.notebook import NotebookError, is_notebook, read_notebook
from trainlint.positions import split_lines

UNUSED_NOQA, MALFORMED_NOQA = "TL001", "TL002"
#: Codes reported by the suppression pass below, not by a rule's check().
NOQA_CODES = frozenset({UNUSED_NOQA, MALFORMED_NOQA})

_DIRECTIVE = re.compile(r"#\s*noqa(?![\w-])", re.IGNORECASE)
_CODE_LIKE = re.compile(r"[A-Za-z]+[0-9]+\Z")
_OUR_CODE = re.compile(r"TL[0-9]+\Z")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_SEPARATORS = re.compile(r"[\s,]*")
_QUOTES = ("\"", "'", "`")
#: a whole comment token (COMMENT tokens hold no line break)
_DISABLE_FILE = re.compile(
    r"#[ \t\f]*trainlint:[ \t\f]*disable-file(?:[ \t\f]*=[ \t\f]*(?P<codes>[A-Za-z0-9, \t\f-]+?))?[ \t\f]*")
#: where the text may hold one (searched before the tokenizer runs)
_DISABLE_FILE_TEXT = re.compile(r"trainlint:[ \t\f]*disable-file")
ALL = frozenset({"*"})


def _rule_names() -> dict[str, str]:
    from trainlint.rules import heads

    return {rule.name: code for code, rule in heads().items()}


def _known_codes() -> frozenset[str]:
    from trainlint.rules import heads
    from trainlint.settings import SYNTAX_ERROR_CODE

    return frozenset(heads()) | {SYNTAX_ERROR_CODE}


@dataclass(frozen=True)
class Code:
    """One code of a directive, as written and as understood."""

    text: str
    code: str  # TL401 for `unsafe-torch-load`; other tools' codes upper-cased
    start: int  # 0-based columns in the line
    end: int

    @property
    def is_ours(self) -> bool:
        return _OUR_CODE.match(self.code) is not None


@dataclass(frozen=True)
class Directive:
    """A `# noqa` comment: where it is (0-based columns) and what it says."""

    line: int  # 1-based
    start: int  # the `#` of `# noqa`
    end: int  # after `noqa` or the last code
    comment_end: int  # the end of the comment token that holds it
    codes: tuple[Code, ...] = ()
    problem: str | None = None  # why it is malformed
    #: malformed for trainlint, but naming only what is not ours (`# noqa: set_linter`): another tool's
    foreign: bool = False
    #: some word after `noqa` is a TL code or a rule name (proof that the comment is meant for trainlint)
    names_ours: bool = False

    @property
    def blanket(self) -> bool:
        return not self.codes and self.problem is None

    def suppresses(self, code: str) -> bool:
        return self.problem is None and (self.blanket or any(c.code == code for c in self.codes))

    @property
    def concerns_trainlint(self) -> bool:
        """A malformed directive is reported when it could be meant for trainlint: one that names
        no codes (it reads as a blanket `# noqa` to other tools) or names one of ours."""
        return not self.foreign and (not self.codes or any(c.is_ours for c in self.codes))

    @property
    def mine(self) -> bool:
        """Whether it says anything to trainlint: a blanket `# noqa`, one of our codes, or a
        malformed comment that could be meant for trainlint."""
        if self.problem is not None:
            return self.concerns_trainlint
        return self.blanket or any(c.is_ours for c in self.codes)


def _tail_is_allowed(tail: str) -> bool:
    """After the codes: nothing, another comment, or a parenthesised reason."""
    tail = tail.strip()
    return not tail or tail[0] in "#("


def _read_codes(comment: str, at: int, offset: int, names: dict[str, str]) -> tuple[list[Code], int]:
    """The codes and rule names written from `at` on (separated by commas and/or spaces), and
    where the last one ends (`at` when there is none)."""
    codes: list[Code] = []
    end = at
    while True:
        at = at + _SEPARATORS.match(comment, at).end() - at
        word = _WORD.match(comment, at)
        if word is None:
            break
        text = word.group()
        if _CODE_LIKE.match(text):
            code = text.upper()
        elif text.lower() in names:
            code = names[text.lower()]
        else:
            break
        codes.append(Code(text, code, offset + word.start(), offset + word.end()))
        at = end = word.end()
    return codes, end


def _looks_ours(text: str, names: dict[str, str]) -> bool:
    """Some word of `text` is a TL code or a rule name."""
    return any(_OUR_CODE.match(word.upper()) or word.lower() in names
               for word in re.findall(r"[A-Za-z0-9_-]+", text))


def parse_directive(comment: str, line: int = 1, offset: int = 0,
                    names: dict[str, str] | None = None) -> Directive | None:
    """The `# noqa` directive in one comment's text (None if it has none): the first that says
    something to trainlint, else the first. `offset` is the comment's column in its line, so that
    columns are the line's."""
    names = _rule_names() if names is None else names
    first = None
    # `"# noqa"` in quotes (a commented-out line of code, a note on usage) is text, not a directive
    for match in _DIRECTIVE.finditer(comment):
        if comment[match.end():match.end() + 1] in _QUOTES:
            continue
        directive = _directive_at(comment, match, line, offset, names)
        if directive.problem is not None and _looks_ours(comment[match.end():], names):
            directive = replace(directive, names_ours=True)
        if directive.mine:
            return directive
        first = first or directive
    return first


def _directive_at(comment: str, match: re.Match, line: int, offset: int, names: dict[str, str]) -> Directive:
    rest_at = match.end()
    colon = re.match(r"\s*:", comment[rest_at:])
    base = dict(line=line, start=offset + match.start(), comment_end=offset + len(comment))
    if colon is None:
        tail = comment[rest_at:]
        if _tail_is_allowed(tail):
            return Directive(end=offset + rest_at, **base)
        word = _WORD.match(tail.strip())
        codes, _ = _read_codes(comment, rest_at, offset, names)
        if word and (_CODE_LIKE.match(word.group()) or word.group().lower() in names):
            problem = f"missing `:` before `{word.group()}` (write `# noqa: {word.group()}`)"
        else:
            problem = (f"`{tail.strip()[:30]}` after a bare `# noqa` (it takes only a `# comment` or a "
                       f"`(reason)` after it; codes go after a colon: `# noqa: CODE`)")
        # the codes it names tell whose comment it is: `# noqa F401` is flake8's, not ours to judge
        return Directive(end=offset + len(comment.rstrip()), codes=tuple(codes), problem=problem, **base)

    codes_at = rest_at + colon.end()
    codes, end = _read_codes(comment, codes_at, offset, names)
    tail = comment[end:]
    if not codes:
        text = comment[codes_at:].split("#", 1)[0].strip()
        if not text:
            return Directive(end=offset + len(comment.rstrip()), codes=(),
                             problem="no codes after `noqa:` (write `# noqa` for every code, or `# noqa: CODE`)",
                             **base)
        word = text.split()[0].rstrip(",")
        if not _looks_ours(text, names):  # `# noqa: GB_REGISTRY`, `# noqa: set_linter`: another tool's
            return Directive(end=offset + len(comment.rstrip()), problem=f"`{word}` is not a trainlint code",
                             foreign=True, **base)
        return Directive(end=offset + len(comment.rstrip()), codes=(),
                         problem=f"`{word[:30]}` is not a rule code or name (the codes come first after "
                                 f"`noqa:`; a reason goes in parentheses after them)", **base)
    if not _tail_is_allowed(tail.lstrip(" ,")):
        return Directive(end=offset + len(comment.rstrip()), codes=tuple(codes),
                         problem=f"unexpected `{tail.strip()[:30]}` after the codes (codes are separated "
                                 f"by commas or spaces; a reason goes in parentheses)", **base)
    return Directive(end=offset + end, codes=tuple(codes), **base)


@dataclass(frozen=True)
class Comments:
    """What the tokenizer says about a file's comments and line ends."""

    directives: dict[int, Directive]  # by 1-based line
    commentable: frozenset[int]  # 1-based lines whose end can take a comment


def scan(source: str) -> Comments:
    """Every `# noqa` directive, and the lines that can take one: not inside a string, not
    continued by a backslash. Lines are Python's (\\n, \\r\\n, \\r; not form feeds)."""
    names = _rule_names()
    directives: dict[int, Directive] = {}
    commentable: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(source, newline="").readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT):
                commentable.add(token.start[0])
            if token.type == tokenize.COMMENT and token.start[0] not in directives:
                found = parse_directive(token.string, token.start[0], token.start[1], names)
                if found is not None:
                    directives[token.start[0]] = found
    except (tokenize.TokenError, SyntaxError):
        pass  # what was read so far still counts
    return Comments(directives, frozenset(commentable))


def _comment_lines(source: str) -> Iterable[str]:
    """The text of each real comment (the tokenizer's COMMENT tokens) that is alone on its line:
    a `# trainlint:` directive in a string is text, not a directive."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(source, newline="").readline):
            if token.type == tokenize.COMMENT and not token.line[:token.start[1]].strip():
                yield token.string
    except (tokenize.TokenError, SyntaxError):
        pass  # what was read so far still counts


def file_disabled_codes(source: str) -> frozenset[str]:
    """Codes disabled for the whole file by `# trainlint: disable-file[=TL402, TL403]` (or rule names),
    in a comment of its own line. The text is searched first (tokenizing costs as much as parsing);
    a file whose text holds the directive is tokenized, and only its real comments count."""
    if _DISABLE_FILE_TEXT.search(source) is None:
        return frozenset()
    disabled: set[str] = set()
    names = None
    for comment in _comment_lines(source):
        match = _DISABLE_FILE.fullmatch(comment.rstrip())
        if match is None:
            continue
        codes = match.group("codes")
        if not codes:
            return ALL
        for code in (c.strip() for c in codes.split(",") if c.strip()):
            if "-" in code:
                names = names or _rule_names()
                code = names.get(code.lower(), code)
            disabled.add(code.upper())
    return frozenset(disabled)


def _file_disabled(code: str, file_codes: frozenset[str]) -> bool:
    return "*" in file_codes or code in file_codes


def _removal(directive: Directive, unused: set[Code], line_text: str) -> Edit:
    """The edit taking `unused` codes out of the directive (the whole directive when none stay)."""
    kept = [c.text for c in directive.codes if c not in unused]
    if kept:
        first, last = directive.codes[0], directive.codes[-1]
        return Edit(directive.line, first.start + 1, directive.line, last.end + 1, ", ".join(kept))
    after = line_text[directive.end:directive.comment_end]
    if after.strip().startswith("#"):  # another comment follows: keep it
        end = directive.end + after.index("#")
        return Edit(directive.line, directive.start + 1, directive.line, end + 1, "")
    start = len(line_text[:directive.start].rstrip())  # with the spaces before it
    return Edit(directive.line, start + 1, directive.line, directive.comment_end + 1, "")


def _noqa_finding(path: str, code: str, directive: Directive, message: str, fix: Fix | None,
                  premises: tuple[str, ...] = ()) -> Finding:
    from trainlint.rules import heads

    rule = heads()[code]
    # the premises sit on the directive's own line: the comment, read with the tokenizer (a real
    # comment, not text in a string), and the findings checked on that line
    evidence = tuple(Evidence(text, PROVEN, kind, path, directive.line) for text, kind in premises)
    return Finding(path, directive.line, directive.start + 1, directive.line, directive.end + 1, code, rule.name,
                   rule.severity, message, fix, evidence)


def _may_matter(source: str, any_findings: bool) -> bool:
    """Whether the file's `# noqa` comments need the tokenizer: cheap text matching first, since
    `# noqa: E501` for other tools is common and tokenizing costs as much as parsing."""
    names = _rule_names()
    for match in _DIRECTIVE.finditer(source):
        line_end = min((i for i in (source.find("\n", match.end()), source.find("\r", match.end())) if i >= 0),
                       default=len(source))
        directive = parse_directive(source[match.start():line_end], names=names)
        if directive is None:  # a quoted `"# noqa"`
            continue
        if (directive.problem is not None and directive.concerns_trainlint and (directive.names_ours or any_findings)) \
                or any(c.is_ours for c in directive.codes) or (directive.blanket and any_findings):
            return True
    return False


def apply_suppressions(findings: list[Finding], source: str, path: str, codes: frozenset[str]) -> list[Finding]:
    """The findings that survive `# noqa` and `disable-file`, plus TL001/TL002 for the directives.

    `codes` are the codes run on this file: a directive's code for a rule that did not run is not
    called unused (turning the rule on would need it).
    """
    file_codes = file_disabled_codes(source) if "disable-file" in source else frozenset()
    if not _may_matter(source, bool(findings)):
        return [f for f in findings if not _file_disabled(f.code, file_codes)]
    directives = scan(source).directives
    used: dict[int, set[str]] = {}
    kept = []
    for finding in findings:
        directive = directives.get(finding.line)
        if directive is not None and directive.suppresses(finding.code):
            used.setdefault(finding.line, set()).add(finding.code)
        elif not _file_disabled(finding.code, file_codes):
            kept.append(finding)

    known = _known_codes()
    lines: list[str] | None = None
    reported_on: dict[int, list[str]] = {}
    for finding in findings:
        reported_on.setdefault(finding.line, []).append(finding.code)
    for line, directive in directives.items():
        if directive.problem is not None:
            # naming a code of ours proves the comment is ours; naming none, only a finding of ours on
            # its line does (else it is another tool's blanket `# noqa` followed by prose)
            meant = ("it names a trainlint code or rule name" if directive.names_ours else
                     f"{', '.join(sorted(set(reported_on[line])))} is reported on this line, and the comment "
                     f"silences nothing" if line in reported_on else None)
            if MALFORMED_NOQA in codes and directive.concerns_trainlint and meant is not None:
                kept.append(_noqa_finding(path, MALFORMED_NOQA, directive,
                                          f"malformed `# noqa`, it suppresses nothing: {directive.problem}", None,
                                          (("this is a real comment (read by the tokenizer), a `# noqa` directive "
                                            "meant for trainlint: " + meant, "use"),
                                           (f"it does not parse: {directive.problem}", "use"))))
            continue
        if UNUSED_NOQA not in codes or directive.suppresses(UNUSED_NOQA):
            continue
        unused: set[Code] = set()
        unknown, idle = [], []
        seen: set[str] = set()
        for code in directive.codes:
            if not code.is_ours:
                continue
            if code.code not in known:
                unused.add(code)
                unknown.append(code.text)
            elif code.code in seen or (code.code in codes and code.code not in used.get(line, ())):
                unused.add(code)
                idle.append(code.text)
            seen.add(code.code)
        if not unused:
            continue
        parts = ([f"unknown code{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"] if unknown else []) + \
                ([f"{', '.join(idle)} suppressed nothing here"] if idle else [])
        if lines is None:
            lines = split_lines(source)
        line_text = lines[line - 1] if line <= len(lines) else ""
        fix = Fix("Remove the unused `# noqa` code" + ("s" if len(unused) > 1 else ""), True,
                  (_removal(directive, unused, line_text),))
        kept.append(_noqa_finding(path, UNUSED_NOQA, directive, f"unused `# noqa`: {'; '.join(parts)}", fix, (
            ("this is a real comment (read by the tokenizer), a `# noqa` directive naming trainlint codes", "use"),
            (f"no finding of {', '.join(sorted(c.text for c in unused))} was reported on this line"
             if not unknown else f"{', '.join(unknown)} is no rule of trainlint", "metadata"))))
    return [f for f in kept if not (f.code in NOQA_CODES and _file_disabled(f.code, file_codes))]


# -- adding `# noqa` ---------------------------------------------------------------------------

def noqa_edit(line_text: str, directive: Directive | None, codes: Iterable[str]) -> tuple[int, int, str] | None:
    """How to make a line's comment suppress `codes`: (start, end, text) to replace, 0-based columns;
    None when nothing can or need be done (a blanket directive suppresses them already; a malformed
    one meant for trainlint is left to its owner: `cannot_add_noqa` says why)."""
    if directive is not None and (directive.blanket or directive.concerns_trainlint and directive.problem):
        return None
    if directive is not None and directive.problem is None:
        missing = [c for c in dict.fromkeys(codes) if not directive.suppresses(c)]
        if not missing:
            return None
        return directive.end, directive.end, "".join(f", {c}" for c in missing)
    # no directive, or another tool's that trainlint cannot extend (`# noqa: E501  trusted source`):
    # a `# noqa` of our own at the end of the line
    end = len(line_text.rstrip("\r\n"))
    start = len(line_text[:end].rstrip())
    return start, end, f"  # noqa: {', '.join(dict.fromkeys(codes))}"


def cannot_add_noqa(directive: Directive | None) -> str | None:
    """Why `noqa_edit` leaves a line alone that still has findings, or None."""
    if directive is not None and directive.problem is not None and directive.concerns_trainlint:
        return f"its `# noqa` is malformed: {directive.problem}"
    return None


_LINE_BREAK = re.compile(r"(\r\n|\r|\n)")


def add_noqa(source: str, codes_by_line: dict[int, set[str]]) -> tuple[str, int, list[tuple[int, str]]]:
    """`source` with a `# noqa: CODE` for each line's codes; also the number of lines changed and
    the lines that could not be, with why."""
    comments = scan(source)
    parts = _LINE_BREAK.split(source)  # line, break, line, break, ..., line
    changed = 0
    left: list[tuple[int, str]] = []
    for line, codes in sorted(codes_by_line.items()):
        index = 2 * (line - 1)
        if index >= len(parts):
            continue
        if line not in comments.commentable:
            left.append((line, "it ends inside a string or with a `\\`, where no comment can go"))
            continue
        directive = comments.directives.get(line)
        edit = noqa_edit(parts[index], directive, sorted(codes))
        if edit is not None:
            start, end, text = edit
            parts[index] = parts[index][:start] + text + parts[index][end:]
            changed += 1
        elif cannot_add_noqa(directive):
            left.append((line, cannot_add_noqa(directive)))
    return "".join(parts), changed, left


def _add_noqa_to_notebook(data: bytes, findings: list[Finding]) -> tuple[str, int, list[tuple[int, str]]]:
    """`add_noqa` for a notebook: the directives go on the cells' lines (the findings name their
    cell), and the notebook is written back as a fix is. The lines left are counted in the
    joined module, so they are reported by cell too."""
    from trainlint.settings import SYNTAX_ERROR_CODE

    notebook = read_notebook(data.decode("utf-8-sig"))
    joined = notebook.joined()
    starts = {cell.number: cell.start for cell in joined.cells}
    codes_by_line: dict[int, set[str]] = {}
    for finding in findings:
        if finding.cell in starts and finding.code != SYNTAX_ERROR_CODE and finding.code not in NOQA_CODES:
            codes_by_line.setdefault(starts[finding.cell] + finding.line - 1, set()).add(finding.code)
    text, changed, left = add_noqa(joined.source, codes_by_line)
    located = []
    for line, why in left:
        cell, cell_line = joined.locate(line)
        located.append((cell_line, f"(cell {cell.number if cell else '?'}) {why}"))
    return (notebook.with_cells(joined.split(text)) if changed else "", changed, located)


def add_noqa_to_files(results: Iterable[FileResult], root_of: Callable[[str], str | None] = lambda path: None
                      ) -> tuple[int, int, list[tuple[str, int, str]], list[str]]:
    """`--add-noqa`: suppress every finding in place. Returns the directives added or extended,
    the files changed, (path, line, why) of the lines with findings that could not be, and the
    files that could not be written. A file is written as a fix is (`fixes.write_fixed`): only a
    regular, writable file whose real path is inside `root_of(path)`, never through a link out."""
    from trainlint.fixes import WriteError, write_fixed
    from trainlint.settings import SYNTAX_ERROR_CODE

    added = files = 0
    left: list[tuple[str, int, str]] = []
    unwritten: list[str] = []
    for result in results:
        codes_by_line: dict[int, set[str]] = {}
        for finding in result.findings:
            if finding.code != SYNTAX_ERROR_CODE and finding.code not in NOQA_CODES:
                codes_by_line.setdefault(finding.line, set()).add(finding.code)
        if not codes_by_line or result.path == "-":
            continue
        try:
            with open(result.path, "rb") as handle:
                data = handle.read()
            if is_notebook(result.path):
                text, changed, unchanged = _add_noqa_to_notebook(data, result.findings)
            else:
                encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
                text, changed, unchanged = add_noqa(data.decode(encoding), codes_by_line)
            if changed:
                write_fixed(result.path, data, text, root_of(result.path))
        except WriteError as err:  # a link out of the project, a read-only file, a file that changed
            unwritten.append(str(err))
            continue
        except (OSError, SyntaxError, UnicodeError, NotebookError) as err:
            # it was read a moment ago; a file that vanished keeps its findings
            left.append((result.path, 0, f"it could not be rewritten ({getattr(err, 'strerror', None) or err})"))
            continue
        added += changed
        files += bool(changed)
        left += [(result.path, line, why) for line, why in unchanged]
    return added, files, left, unwritten
