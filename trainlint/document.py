"""Linting an open document edit after edit: only what an edit can reach is checked again.

An edit in an editor changes one or two top-level definitions of a file. Each version is split
into pieces at top-level statements (`trainlint.incremental.split`); the pieces whose text is
new, and the definitions they can reach, are linted together with the file's module-level code
(imports, assignments, `if __name__ == "__main__":`) as one smaller file, the *slice*. The
definitions outside it keep the findings they had, moved with their lines.

What an edit can reach, read from the text of the definitions (a function or class is one piece):
- two definitions are linked when either's text holds a word the other declares: its name (a
  call, a construction, a subclass, a reference in a string), a class-level field, a command-line
  option it adds (`--grad-accum` declares `grad_accum`); or when one reads an attribute (`cfg.x`,
  not `self.x`) that the other assigns as `self.x`; or when both hold a name the module-level
  code binds (the shared `model = Net()` two functions use);
- module-level code is in every slice, with the definitions it names, and so is a piece with a
  `disable-file` directive;
- the slice holds the changed definitions, the definitions linked to what the old text of the
  changed or removed ones declared, and everything linked to those, transitively.

Everything else is a full check, on the whole file: the first version, a changed module-level
statement, a file the guard refuses, a slice that would hold most of the file anyway, a different
configuration or project, a rule's internal error, and any version whose text did not change
(after a helper was saved, the same text can give other findings).

A few facts are gathered over the whole file rather than read through names (which names are
ever put in train mode, the dicts the file saves, whether it seeds a generator): they are file
facts (`trainlint.model.file_facts`), recorded per piece at each check. A slice is checked with
the values the pieces outside it contributed last time, and the rules the whole document passes
the pre-filter and the gate with; text facts read the whole document (`FileContext.document`).
The findings outside the slice are kept only if every file fact has the same values over the
whole file as before (else the whole file is checked).

The tests compare the findings of every version of edits of every example and fixture with a
full check's; the language server also checks the whole file again when the editor has been idle
for a moment, and publishes the difference, if any (`TrainlintServer`).
"""

from __future__ import annotations

import ast
import bisect
import re
from collections import Counter
from dataclasses import dataclass, field, replace

from trainlint.engine import document_rules, lint_source
from trainlint.finding import Edit, FileResult, Finding
from trainlint.model import file_facts
from trainlint.settings import SYNTAX_ERROR_CODE
from trainlint.incremental import _LINE, DocumentParser

_WORD = re.compile(r"\w+")
_FILE_DIRECTIVE = re.compile(r"trainlint:\s*disable-file")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# A slice this large (a share of the file's lines) gains too little over checking the whole file
_MOST_OF_THE_FILE = 0.5


@dataclass
class _Version:
    """A version of the document that was checked, and what checked it."""

    source: str
    pieces: list[tuple[int, str]]  # (0-based first line, text)
    findings: list[Finding]
    settings: object
    project: object
    # file fact -> piece -> the values it contributed; None when they are not known (the check
    # built no context, or not on this document's joined tree)
    facts: dict[str, dict[int, list]] | None = None


@dataclass
class Slice:
    """Which pieces of a version a sliced check lints (indices into its pieces)."""

    linted: list[int]
    kept: dict[int, int]  # a piece outside the slice -> the index of the same text in the last version
    matched: dict[int, int]  # the last version's pieces whose text is in this one -> their index here


@dataclass
class View:
    """What a check of a slice sees of the whole document (`lint_source(view=...)`), and what it
    observes of the check: its context, with every file fact in `required` computed."""

    document: str
    outside_facts: dict[str, list]
    required: set[str]
    rules: list | None = None  # a slice's: the whole document's (`engine.document_rules`)
    ctx: object = field(default=None, repr=False)

    def observe(self, ctx) -> None:
        for name in self.required:
            file_facts.values(ctx, name)
        self.ctx = ctx


class DocumentLinter:
    """Checks successive versions of one document; see the module's docstring."""

    def __init__(self, largest_slice: float = _MOST_OF_THE_FILE) -> None:
        self.largest_slice = largest_slice  # a larger slice (share of the lines) is a full check
        self.parser = DocumentParser()  # the whole document's trees
        self._slices = DocumentParser(borrow=self.parser)  # the slices' trees
        self._last: _Version | None = None
        self._said: dict[str, _Names] = {}  # by piece text: what it says (`_names`)
        self.sliced = 0  # versions checked as a slice (for the tests and the latency script)

    def forget(self) -> None:
        """Check the next version whole (the project's files on disk changed)."""
        self._last = None

    def lint(self, source: str, path: str, settings, project=None, *, whole: bool = False) -> FileResult:
        pieces = self.parser.pieces(source) if source else []
        plan = None if whole else self._plan(source, path, pieces, settings, project)
        done = self._lint_slice(source, path, pieces, plan, settings, project) if plan is not None else None
        if done is not None:
            self.sliced += 1
            result, facts = done
        else:
            view = View(source, {}, set())
            result = lint_source(source, path, settings, project, parser=self.parser, view=view)
            facts = _facts_by_piece(view.ctx, self.parser, len(pieces))
        self._last = _Version(source, pieces, result.findings, settings, project, facts) \
            if not result.errors else None
        return result

    # -- what to lint ----------------------------------------------------------------------------
    def _plan(self, source: str, path: str, pieces: list[tuple[int, str]], settings, project) -> Slice | None:
        last = self._last
        if last is None or last.facts is None or last.source == source or last.project is not project \
                or last.settings != settings:
            return None
        if "\0" in source or len(pieces) < 2:
            return None
        tree = self.parser.python_tree(source, path)
        if tree is None or self.parser.guard_check(source, path, tree) is not None:
            return None  # a TL000 is the whole file's
        trees = [self.parser.piece_tree(line, text) for line, text in pieces]
        if any(tree is None for tree in trees):
            return None  # a piece that is not whole statements (a split inside a decorator)
        by_text: dict[str, list[int]] = {}  # the last version's pieces not yet matched, by text
        for number, (_, text) in enumerate(last.pieces):
            by_text.setdefault(text, []).append(number)
        kept: dict[int, int] = {}
        for number, (_, text) in enumerate(pieces):
            if by_text.get(text):
                kept[number] = by_text[text].pop(0)
        removed = [number for numbers in by_text.values() for number in numbers]
        changed = [number for number in range(len(pieces)) if number not in kept]
        names = [_defined_name(tree, text) for tree, (_, text) in zip(trees, pieces)]
        if not changed or any(names[number] is None for number in changed):
            return None  # a module-level statement changed
        old = []
        for number in removed:
            tree, text = self.parser.piece_tree(*last.pieces[number]), last.pieces[number][1]
            name = _defined_name(tree, text)
            if name is None:
                return None  # a module-level statement was removed
            old.append(self._said.get(text) or _names(text, tree, name))  # said last version
        said = {text: self._said.get(text) or _names(text, tree, name)
                for (_, text), tree, name in zip(pieces, trees, names)}
        self._said = said  # this version's pieces only: memory follows the document
        linted = _reach(trees, names, changed, old, [said[text] for _, text in pieces])
        lines = [_line_count(pieces, number) for number in range(len(pieces))]
        if sum(lines[number] for number in linted) > self.largest_slice * sum(lines):
            return None
        inside = set(linted)
        return Slice(linted, {n: was for n, was in kept.items() if n not in inside},
                     {was: n for n, was in kept.items()})

    # -- linting the slice -----------------------------------------------------------------------
    def _lint_slice(self, source: str, path: str, pieces: list[tuple[int, str]], plan: Slice,
                    settings, project) -> tuple[FileResult, dict[str, dict[int, list]]] | None:
        """The findings of the version, and the file facts of each of its pieces; None when the
        slice cannot be checked on its own after all (a full check is made instead)."""
        text = "".join(pieces[number][1] for number in plan.linted)
        starts, origins = [], []  # each linted piece's first line in the slice and in the document
        line = 0
        for number in plan.linted:
            starts.append(line)
            origins.append(pieces[number][0])
            line += _line_count(pieces, number)
        last = self._last
        outside = {name: [value for old in plan.kept.values() for value in by_piece.get(old, ())]
                   for name, by_piece in last.facts.items()}
        rules = document_rules(source, path, settings, project, self.parser)
        if not rules:
            return None  # nothing to check: the whole file is as quick
        view = View(source, outside, set(last.facts), rules)
        result = lint_source(text, path, settings, project, parser=self._slices, view=view)
        if result.errors or any(f.code == SYNTAX_ERROR_CODE for f in result.findings):
            return None  # a slice the compiler refuses alone (the whole file compiled): say the whole's
        own = _facts_by_piece(view.ctx, self._slices, len(plan.linted))
        if own is None or set(own) - set(last.facts):
            return None  # a fact the last check did not gather: the rest's part of it is unknown
        facts: dict[str, dict[int, list]] = {}
        for name, by_piece in last.facts.items():
            # what the rest of the file reads of a fact must not have changed
            before = Counter(value for values in by_piece.values() for value in values)
            if Counter(view.ctx.fact_values[name]) != before:
                return None
            facts[name] = {plan.linted[number]: values for number, values in own[name].items()}
            facts[name].update({number: by_piece[old] for number, old in plan.kept.items() if old in by_piece})

        def place(number: int) -> int:  # a 1-based line of the slice -> of the document
            at = bisect.bisect_right(starts, number - 1) - 1
            return origins[at] + number - 1 - starts[at] + 1

        findings = []
        for finding in result.findings:
            moved = _moved(finding, place)
            if moved is None:
                return None  # a finding spanning pieces the slice put side by side
            findings.append(moved)
        old_starts = [line for line, _ in last.pieces]
        kept = set(plan.kept.values())

        def move(number: int) -> int:  # a 1-based line of the last version -> of this one
            old = bisect.bisect_right(old_starts, number - 1) - 1
            if old not in plan.matched:
                raise LookupError(number)  # in a piece this version changed or removed
            return number - old_starts[old] + pieces[plan.matched[old]][0]

        for finding in last.findings:
            if bisect.bisect_right(old_starts, finding.line - 1) - 1 in kept:
                try:
                    moved = _moved(finding, move)  # its fix may edit other pieces (an import at the top)
                except LookupError:
                    return None
                if moved is None:
                    return None
                findings.append(moved)
        return FileResult(path, sorted(findings, key=lambda f: f.sort_key)), facts


def _facts_by_piece(ctx, parser: DocumentParser, pieces: int) -> dict[str, dict[int, list]] | None:
    """The file facts the check with context `ctx` gathered, by piece of the source `parser`
    joined; None without a context, or when its tree is not the parser's joined one."""
    counts = parser.statement_counts(ctx.module) if ctx is not None else None
    if counts is None or len(counts) != pieces:
        return None
    starts = [0]
    for count in counts:
        starts.append(starts[-1] + count)
    facts: dict[str, dict[int, list]] = {}
    for name, items in ctx.fact_items.items():
        by_piece = facts[name] = {}
        for statement, value in items:
            by_piece.setdefault(bisect.bisect_right(starts, statement) - 1, []).append(value)
    return facts


def _line_count(pieces: list[tuple[int, str]], number: int) -> int:
    if number + 1 < len(pieces):
        return pieces[number + 1][0] - pieces[number][0]
    return len(_LINE.findall(pieces[number][1]))


def _moved(finding: Finding, place) -> Finding | None:
    """The finding with its lines (and its fix's) placed by `place`, or None when the lines it
    spans do not stay consecutive."""
    line, end_line = place(finding.line), place(finding.end_line)
    if end_line - line != finding.end_line - finding.line:
        return None
    fix = finding.fix
    if fix is not None:
        edits = []
        for edit in fix.edits:
            start, end = place(edit.line), place(edit.end_line)
            if end - start != edit.end_line - edit.line:
                return None
            edits.append(Edit(start, edit.column, end, edit.end_column, edit.content))
        fix = replace(fix, edits=tuple(edits))
    evidence = tuple(replace(e, line=place(e.line)) for e in finding.evidence)
    return replace(finding, line=line, end_line=end_line, fix=fix, evidence=evidence)


def _defined_name(tree: ast.Module | None, text: str) -> str | None:
    """The name a piece that is one function or class definition defines; None for any other
    piece (module-level code, or a `disable-file` directive, which speaks for the whole file)."""
    if tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], _DEFINITIONS):
        return None
    if _FILE_DIRECTIVE.search(text):
        return None
    return tree.body[0].name


def _bound_at_module_level(tree: ast.Module | None) -> set[str]:
    """Names module-level code binds other than by import (imported names are shared by every
    definition and link nothing)."""
    names: set[str] = set()
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


@dataclass
class _Names:
    """What one piece says, for the links between definitions."""

    words: set[str]  # every word of its text (strings and comments too; `-` read as `_`)
    declared: set[str]  # what it defines: its name, its class-level fields, the options it adds
    attributes: set[str]  # the `self.<name>` it assigns
    attribute_uses: set[str]  # the `<x>.<name>` it reads, of anything but `self`


def _names(text: str, tree: ast.Module, name: str | None) -> _Names:
    declared = {name} if name is not None else set()
    attributes, uses = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                targets = statement.targets if isinstance(statement, ast.Assign) else \
                    [statement.target] if isinstance(statement, ast.AnnAssign) else []
                declared |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Attribute):
            is_self = isinstance(node.value, ast.Name) and node.value.id == "self"
            if is_self and isinstance(node.ctx, ast.Store):
                attributes.add(node.attr)
            elif not is_self:
                uses.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("--"):
            declared.add(node.value.lstrip("-").replace("-", "_"))  # `add_argument("--grad-accum")`
        elif isinstance(node, ast.keyword) and node.arg == "dest" and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            declared.add(node.value.value)
    return _Names(set(_WORD.findall(text.replace("-", "_"))), declared, attributes, uses)


def _reach(trees: list, names: list[str | None], changed: list[int], old: list[_Names],
           said: list[_Names]) -> list[int]:
    """The pieces a sliced check lints, in document order (see the module's docstring); `old`
    are what the last version's pieces that this one changed or removed said, `said` what this
    one's say."""
    module_code = [number for number, name in enumerate(names) if name is None]
    definitions = [number for number, name in enumerate(names) if name is not None]
    shared: set[str] = set()
    for number in module_code:
        shared |= _bound_at_module_level(trees[number])
    declaring: dict[str, list[int]] = {}  # a declared word -> the definitions declaring it
    assigning: dict[str, list[int]] = {}  # a `self.<name>` -> the definitions assigning it
    holding: dict[str, list[int]] = {}  # a module-level name -> the definitions holding it
    for number in definitions:
        for word in said[number].declared:
            declaring.setdefault(word, []).append(number)
        for word in said[number].attributes:
            assigning.setdefault(word, []).append(number)
        for word in said[number].words & shared:
            holding.setdefault(word, []).append(number)

    def holders(declared: set[str], attributes: set[str]) -> list[int]:
        """The definitions that hold a word in `declared`, or read an attribute in `attributes`."""
        return [n for n in definitions if said[n].words & declared or said[n].attribute_uses & attributes]

    todo = list(changed)
    for names_of in [said[n] for n in module_code] + old:
        todo += holders(names_of.declared, names_of.attributes)
    reached = set(module_code)
    for number in module_code:  # what module-level code names is in every slice
        todo += [n for word in said[number].words for n in declaring.get(word, ())]
        todo += [n for word in said[number].attribute_uses for n in assigning.get(word, ())]
    while todo:
        number = todo.pop()
        if number in reached:
            continue
        reached.add(number)
        names_of = said[number]
        for word in names_of.words:
            todo += declaring.get(word, ())
            todo += holding.get(word, ())
        for word in names_of.attribute_uses:
            todo += assigning.get(word, ())
        todo += [n for n in holders(names_of.declared, names_of.attributes) if n not in reached]
    return sorted(reached)
