"""The gate: which selected rules can fire in a file, decided from Python's own parse.

LibCST's parse and the models built on it cost most of a check, and most files of a project hold
nothing a rule looks at. Python's `ast` parses the same file at about a tenth of LibCST's cost (and
the engine needs that parse anyway: it is the syntax check of files no rule wants). From it the gate
gathers these facts about the code (comments are never read; strings only where noted):

- `names`: every identifier (names, attribute names, parameters, keyword arguments, imported names,
  defined functions and classes, `True`/`False`/`None`, and the words of string annotations);
- `functions`: the names of the functions and methods defined;
- `loop_words`: the words (names, attributes, keywords, words of strings) of what each `for` loop
  iterates, the text a loop over a validation loader is told by;
- `references`: every dotted name a `Name`/`Attribute` chain may stand for, through the file's
  imports, as `FileIndex.resolve` reads them (`t.load` after `import torch as t` is `torch.load`;
  a chain whose root is not imported stands for itself). Scopes are ignored, so this is a superset
  of what the index resolves in any one scope;
- `iterates_loader()`: whether some `for` loop may iterate a data loader, as the role model
  (`trainlint.model.roles`) tells one: by a name matching `LOADER_NAME`, or through assignments,
  parameters, imports and same-file returns from something so named (`batches = DataLoader(ds)`,
  `def make(): return DataLoader(ds)`), scopes ignored. A binding's value is read as the role model
  reads it: a name, an attribute's name, a call's callee and positional arguments; strings and
  subscripts have no role. (A loader made by a project function in another file whose name says
  nothing of loaders is not followed.)

A rule states with its `gate` what the code must hold for it to have anything to report
(`refers_to("torch.save") & named("seed")`); the gate only ever narrows the rules that passed the
text pre-filter, and a rule without a gate runs whenever its text triggers occur. A gate must be a
necessary condition of the rule's findings: a test runs every rule's examples and every fixture
with and without the gate and compares the findings.
"""

from __future__ import annotations

import ast
import bisect
import re
import warnings
from dataclasses import dataclass
from typing import Callable, Iterator


_WORD = re.compile(r"[A-Za-z_]\w*")

#: Where a rule's documentation is (`trainlint.rule.DOCS_URL`; kept here, beside the heads, so the
#: reporters link a code without importing the Rule base class)
DOCS_URL = "https://github.com/trainlint/trainlint/blob/main/docs/rules.md#{code}"


#: A loader's name, as the role model reads one (`trainlint.model.roles.LOADER_NAME`: kept equal by a
#: test; the gate must not import the models).
LOADER_NAME = re.compile(r"(^|_)(data_?)?loader($|_)|(^|_)dl($|_)", re.I)


@dataclass(frozen=True)
class Facts:
    names: frozenset[str]
    references: frozenset[str]
    functions: frozenset[str]  # names of the defined functions and methods
    loop_words: frozenset[str]  # the words of what `for` loops iterate (names, attributes, strings)
    parts: tuple["Gathered", ...] = ()  # what the facts were made of, for the facts found on demand

    def iterates_loader(self) -> bool:
        """Some `for` loop may iterate a data loader (see the module's docstring)."""
        found = self.__dict__.get("_iterates_loader")
        if found is None:
            found = _iterates_loader(self.parts)
            object.__setattr__(self, "_iterates_loader", found)
        return found

    def text(self, field: str) -> str:
        """A set of words, one a line, for patterns (`^`/`$` anchor one word)."""
        key = "_text_" + field
        text = self.__dict__.get(key)
        if text is None:
            text = "\n".join(sorted(getattr(self, field)))
            object.__setattr__(self, key, text)
        return text


def facts(source: str, filename: str = "<unknown>") -> Facts:
    """The gate's facts of a source text; raises SyntaxError (or ValueError, RecursionError,
    MemoryError) when Python cannot parse it."""
    return facts_of_tree(ast.parse(source, filename=filename))


def facts_of_tree(tree: ast.AST) -> Facts:
    return facts_of_parts([gather(tree)])


@dataclass(frozen=True)
class Gathered:
    """What one tree (a whole file, or one top-level piece of it) holds for the facts; the facts
    of a file are those of its pieces' `Gathered` together (`facts_of_parts`)."""

    names: frozenset[str]
    functions: frozenset[str]
    loop_words: frozenset[str]
    chains: frozenset[str]  # the dotted Name/Attribute chains used
    imports: tuple[tuple[str, frozenset[str]], ...]  # local name -> the qualnames it imports
    loops: tuple[frozenset[str], ...] = ()  # the words of each `for` loop's iterable
    # (bound words, words of the value): assignments, `with ... as`, parameters, imports, and a
    # function's name with the words of the values it returns
    bindings: tuple[tuple[frozenset[str], frozenset[str]], ...] = ()


def facts_of_parts(parts: list[Gathered]) -> Facts:
    imports: dict[str, set[str]] = {}
    for part in parts:
        for local, qualnames in part.imports:
            imports.setdefault(local, set()).update(qualnames)
    references = set()
    for chain in frozenset().union(*(part.chains for part in parts)):
        references.add(chain)
        root, dot, rest = chain.partition(".")
        for qualname in imports.get(root, ()):
            references.add(qualname + dot + rest)
    union = frozenset().union
    return Facts(union(*(p.names for p in parts)), frozenset(references),
                 union(*(p.functions for p in parts)), union(*(p.loop_words for p in parts)), tuple(parts))


def _iterates_loader(parts: tuple[Gathered, ...]) -> bool:
    """Whether a loop's iterable holds a word that is, or is bound from, a loader's name."""
    loops = [words for part in parts for words in part.loops if words]
    if not loops:
        return False
    bindings = [binding for part in parts for binding in part.bindings]
    words = set().union(*loops, *(value for _, value in bindings))
    loaders = {word for word in words if LOADER_NAME.search(word)}
    changed = True
    while changed:  # until no binding adds a name: each round adds one at least, or ends
        changed = False
        for bound, value in bindings:
            if not bound <= loaders and not value.isdisjoint(loaders):
                loaders |= bound
                changed = True
    return any(not words.isdisjoint(loaders) for words in loops)


def gather(tree: ast.AST) -> Gathered:
    names: set[str] = set()
    functions: set[str] = set()
    loop_words: set[str] = set()
    chains: list[str] = []
    imports: dict[str, set[str]] = {}
    loops: list[frozenset[str]] = []
    bindings: list[tuple[frozenset[str], frozenset[str]]] = []
    spans: list[tuple[str, int, int]] = []  # (function name, first line, last line)
    returns: list[tuple[int, frozenset[str]]] = []  # (line, words of the returned value)
    for node in walk(tree):
        kind = type(node)
        if kind is ast.Name:
            names.add(node.id)
            chains.append(node.id)
        elif kind is ast.Attribute:
            names.add(node.attr)
            chain = _dotted(node)
            if chain is not None:
                chains.append(chain)
        elif kind is ast.keyword:
            if node.arg is not None:
                names.add(node.arg)
        elif kind is ast.arg:
            names.add(node.arg)
            if node.annotation is not None:
                names.update(_string_words(node.annotation))
        elif kind is ast.Assign:
            value = frozenset(_heads(node.value))
            for target in node.targets:
                bindings.append((frozenset(_bound(target)), value))
        elif kind is ast.AnnAssign or kind is ast.NamedExpr:
            value = _heads(node.value) if node.value is not None else set()
            if kind is ast.AnnAssign:
                names.update(_string_words(node.annotation))
                value |= _words(node.annotation)
            bindings.append((frozenset(_bound(node.target)), frozenset(value)))
        elif kind is ast.withitem:
            if node.optional_vars is not None:
                bindings.append((frozenset(_bound(node.optional_vars)), frozenset(_heads(node.context_expr))))
        elif kind is ast.Return:
            if node.value is not None:
                value = node.value
                elements = value.elts if type(value) is ast.Tuple or type(value) is ast.List else [value]
                returns.append((node.lineno, frozenset().union(*map(_heads, elements))))
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            names.add(node.name)
            functions.add(node.name)
            spans.append((node.name, node.lineno, node.end_lineno))
            bindings.extend(_parameters(node.args))
        elif kind is ast.ClassDef:
            names.add(node.name)
        elif kind is ast.For or kind is ast.AsyncFor:
            loop_words.update(_words(node.iter))
            loops.append(frozenset(_heads(node.iter)))
        elif kind is ast.Import:
            for alias in node.names:
                names.update(alias.name.split("."))
                if alias.asname is not None:
                    names.add(alias.asname)
                    imports.setdefault(alias.asname, set()).add(alias.name)
                    bindings.append((frozenset({alias.asname}), frozenset(alias.name.split("."))))
                else:
                    top = alias.name.split(".")[0]
                    imports.setdefault(top, set()).add(top)
        elif kind is ast.ImportFrom:
            base = "." * node.level + (node.module or "")
            if node.module:
                names.update(node.module.split("."))
            for alias in node.names:
                if alias.name == "*":
                    continue
                names.add(alias.name)
                local = alias.asname or alias.name
                names.add(local)
                qualname = f"{base}.{alias.name}" if base and not base.endswith(".") else f"{base}{alias.name}"
                imports.setdefault(local, set()).add(qualname)
                if alias.asname is not None:
                    bindings.append((frozenset({local}), frozenset({alias.name})))
        elif kind is ast.Global or kind is ast.Nonlocal:
            names.update(node.names)
        elif kind is ast.ExceptHandler or kind is ast.MatchAs or kind is ast.MatchStar:
            if node.name:
                names.add(node.name)
        elif kind is ast.MatchMapping:
            if node.rest:
                names.add(node.rest)
        elif kind is ast.Constant:
            value = node.value
            if value is False or value is True or value is None:
                names.add(str(value))  # a literal, as LibCST reads it: a name
    bindings.extend(_returned(spans, returns))
    return Gathered(frozenset(names), frozenset(functions), frozenset(loop_words), frozenset(chains),
                    tuple((local, frozenset(qualnames)) for local, qualnames in imports.items()),
                    tuple(loops), tuple(bindings))


def _heads(expr: ast.AST) -> set[str]:
    """The words the role model reads an expression's role from: a name; an attribute's name;
    a call's callee and (a wrapper such as `enumerate(loader)`, `prepare(loader)`) its positional
    arguments. Other expressions (subscripts, literals, operators) have no role."""
    kind = type(expr)
    if kind is ast.Name:
        return {expr.id}
    if kind is ast.Attribute:
        return {expr.attr}
    if kind is ast.Call:
        heads = _heads(expr.func)
        for arg in expr.args:
            heads |= _heads(arg)
        return heads
    return set()


def _bound(target: ast.AST) -> set[str]:
    """The words an assignment target binds, as the role model looks them up: a name, the
    attribute of `self.x`, each name of an unpacking (a subscript binds no name)."""
    kind = type(target)
    if kind is ast.Name:
        return {target.id}
    if kind is ast.Attribute:
        return {target.attr}
    if kind is ast.Tuple or kind is ast.List:
        return set().union(*(_bound(element) for element in target.elts))
    if kind is ast.Starred:
        return _bound(target.value)
    return set()


def _parameters(args: ast.arguments) -> list[tuple[frozenset[str], frozenset[str]]]:
    """Each parameter with the words of its annotation and default."""
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
    pairs += [(arg, None) for arg in (args.vararg, args.kwarg) if arg is not None]
    found = []
    for arg, default in pairs:
        words = set()
        if arg.annotation is not None:
            words |= _words(arg.annotation)
        if default is not None:
            words |= _heads(default)
        if words:
            found.append((frozenset({arg.arg}), frozenset(words)))
    return found


def _returned(spans: list[tuple[str, int, int]],
              returns: list[tuple[int, frozenset[str]]]) -> list[tuple[frozenset[str], frozenset[str]]]:
    """A function's name bound from the words of the values returned within its lines (a nested
    function's returns included: a superset)."""
    if not spans or not returns:
        return []
    returns.sort(key=lambda item: item[0])
    lines = [line for line, _ in returns]
    found = []
    for name, first, last in spans:
        start, end = bisect.bisect_left(lines, first), bisect.bisect_right(lines, last)
        if start < end:
            found.append((frozenset({name}), frozenset().union(*(words for _, words in returns[start:end]))))
    return found


def _string_words(annotation: ast.AST) -> set[str]:
    """The words of the strings in an annotation (`"DataLoader"`, `Optional["torch.optim.Optimizer"]`),
    which the role model reads as names."""
    words = set()
    for node in walk(annotation):
        if type(node) is ast.Constant and type(node.value) is str:
            words.update(_WORD.findall(node.value))
    return words


def _words(expr: ast.AST) -> set[str]:
    """Every word of an expression's code but its numbers and operators."""
    words = set()
    for node in walk(expr):
        kind = type(node)
        if kind is ast.Name:
            words.add(node.id)
        elif kind is ast.Attribute:
            words.add(node.attr)
        elif kind is ast.keyword and node.arg is not None:
            words.add(node.arg)
        elif kind is ast.Constant and type(node.value) is str:
            words.update(_WORD.findall(node.value))
    return words


_FIELDS: dict[type, tuple[str, ...]] = {}


def walk(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node under `tree` (itself included), in no particular order: `ast.walk` without its
    generators and without the `ctx` (Load/Store) leaves, at half the cost."""
    stack = [tree]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        yield node
        kind = type(node)
        fields = _FIELDS.get(kind)
        if fields is None:
            fields = _FIELDS[kind] = tuple(name for name in kind._fields if name != "ctx")
        for name in fields:
            value = getattr(node, name)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        push(item)
            elif isinstance(value, ast.AST):
                push(value)


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


class Gate:
    """A condition on a file's `Facts`; `a & b` and `a | b` combine conditions."""

    def __call__(self, facts: Facts) -> bool:
        raise NotImplementedError

    def __and__(self, other: "Gate") -> "Gate":
        return _All((self, other))

    def __or__(self, other: "Gate") -> "Gate":
        return _Any((self, other))


@dataclass(frozen=True)
class _All(Gate):
    parts: tuple[Gate, ...]

    def __call__(self, facts: Facts) -> bool:
        return all(part(facts) for part in self.parts)


@dataclass(frozen=True)
class _Any(Gate):
    parts: tuple[Gate, ...]

    def __call__(self, facts: Facts) -> bool:
        return any(part(facts) for part in self.parts)


@dataclass(frozen=True)
class _RefersTo(Gate):
    qualnames: frozenset[str]

    def __call__(self, facts: Facts) -> bool:
        return not self.qualnames.isdisjoint(facts.references)


@dataclass(frozen=True)
class _Matches(Gate):
    field: str
    pattern: re.Pattern

    def __call__(self, facts: Facts) -> bool:
        return self.pattern.search(facts.text(self.field)) is not None


@dataclass(frozen=True)
class _Defines(Gate):
    test: Callable[[str], bool]

    def __call__(self, facts: Facts) -> bool:
        return any(self.test(name) for name in facts.functions)


@dataclass(frozen=True)
class _IteratesLoader(Gate):
    def __call__(self, facts: Facts) -> bool:
        return facts.iterates_loader()


def iterates_loader() -> Gate:
    """Some `for` loop may iterate a data loader (see `Facts.iterates_loader`)."""
    return _IteratesLoader()


def reference_text(*qualnames: str) -> "ReferenceText":
    """A text test that every source `refers_to(*qualnames)` passes also passes (a trigger for the
    text pre-filter; see `ReferenceText`)."""
    bare = {q for q in qualnames if "." not in q}
    tails = {q.rsplit(".", 1)[-1] for q in qualnames}
    return ReferenceText(tuple(sorted((tail, tail not in bare) for tail in tails)))


@dataclass(frozen=True)
class ReferenceText:
    """Whether a source may refer to a dotted name: its last part occurs as a word after a dot
    (`torch.load`, `t . load`), or as a name an import statement binds (`from torch import load as
    read`, also over lines in brackets or after a backslash); an undotted name, anywhere as a word.
    Found with `str.find`, much faster than a regex that tries alternatives at every position."""

    tails: tuple[tuple[str, bool], ...]  # (last part, whether only dotted names end in it)

    def search(self, source: str) -> bool | None:
        """True when the source may refer to a name; None when it cannot (as `re.search`)."""
        for tail, dotted in self.tails:
            start = source.find(tail)
            while start >= 0:
                end = start + len(tail)
                if not (_is_word_char(source, start - 1) or _is_word_char(source, end)) \
                        and (not dotted or _after_dot(source, start) or _imported(source, start)):
                    return True
                start = source.find(tail, end)
        return None


def _is_word_char(source: str, at: int) -> bool:
    return 0 <= at < len(source) and (source[at].isalnum() or source[at] == "_")


def _after_dot(source: str, at: int) -> bool:
    at -= 1
    while at >= 0 and source[at] in " \t\r\n\\":
        at -= 1
    return at >= 0 and source[at] == "."


def _imported(source: str, at: int) -> bool:
    """The word at `at` is in an import statement: an `import` earlier on its line, in the
    brackets that follow one, or on a line continued from one with a backslash."""
    keyword = at
    for _ in range(3):  # the nearest few `import` words: one of them starts the statement
        keyword = source.rfind("import", 0, keyword)
        if keyword < 0:
            return False
        between = source[keyword + len("import"):at]
        if "\n" not in between:
            return True
        if between.lstrip().startswith("(") and ")" not in between:
            return True
        if all(line.rstrip(" \t\r").endswith("\\") for line in between.split("\n")[:-1]):
            return True
    return False


def refers_to(*qualnames: str) -> Gate:
    """The code refers to one of these dotted names (through its imports, as the index resolves)."""
    return _RefersTo(frozenset(qualnames))


def named(pattern: str | re.Pattern, flags: int = 0) -> Gate:
    """Some identifier of the code matches `pattern` (searched; `^` and `$` anchor one name)."""
    return _Matches("names", _per_word(pattern, flags))


def defines(test: Callable[[str], bool]) -> Gate:
    """Some function or method the file defines has a name that passes `test`."""
    return _Defines(test)


def loops_over(pattern: str | re.Pattern, flags: int = 0) -> Gate:
    """Some word of what a `for` loop iterates matches `pattern` (searched; `^`/`$` anchor one word)."""
    return _Matches("loop_words", _per_word(pattern, flags))


def _per_word(pattern: str | re.Pattern, flags: int) -> re.Pattern:
    """`pattern` (a model's own compiled pattern keeps its flags) for words one a line."""
    if isinstance(pattern, re.Pattern):
        pattern, flags = pattern.pattern, pattern.flags | flags
    return re.compile(pattern, flags | re.MULTILINE)


def python_tree(source: str, filename: str) -> ast.Module | None:
    """Python's own parse of a file, or None when Python cannot parse it (`trainlint.guard` then
    says why)."""
    try:
        with warnings.catch_warnings():  # `"\d"` and the like: not the linter's findings
            warnings.simplefilter("ignore")
            return ast.parse(source, filename=filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def gated(rules: list, tree: ast.AST, facts: Callable[[], Facts] | None = None) -> list:
    """The rules (instances of `Rule`) whose gate this parse passes; `facts` gives the tree's
    facts when the caller has them (the language server's, from the pieces of a document)."""
    tests = [rule.imported_gate if rule.via_imports else rule.gate for rule in rules]
    if all(test is None for test in tests):
        return rules
    found = facts() if facts is not None else facts_of_tree(tree)
    return [rule for rule, test in zip(rules, tests) if test is None or test(found)]


def triggered(triggers: tuple, source: str, found: dict | None = None) -> bool:
    """Some trigger occurs in `source` (`Rule.triggers`: a string that must occur, a text test
    with `search`, or a tuple of them that must all occur; none: always). `found` remembers, across
    the rules checked on one text, which words occur (rules share words: each is searched once)."""
    if not triggers:
        return True
    if found is None:
        found = {}
    for trigger in triggers:
        for word in (trigger,) if not isinstance(trigger, tuple) else trigger:
            present = found.get(word)
            if present is None:
                present = found[word] = word in source if isinstance(word, str) else \
                    word.search(source) is not None
            if not present:
                break
        else:
            return True
    return False


@dataclass(frozen=True)
class RuleHead:
    """What selection, the text pre-filter and the gate need of a rule, without importing its
    module (and LibCST with it): the generated table `trainlint.rules._table` holds one per rule,
    checked against the rule classes by a test. `trainlint.rules.load` makes the rules of heads
    that passed."""

    code: str
    name: str
    severity: object  # trainlint.finding.Severity
    enabled_by_default: bool
    family: str  # the code's family: "TL1" for TL101
    module: str  # the rule's module in trainlint.rules
    triggers: tuple = ()
    gate: Gate | None = None
    imported_triggers: tuple[str, ...] = ()
    imported_gate: Gate | None = None
    via_imports: bool = False  # as `Rule.via_imports`

    def may_match(self, source: str, found: dict | None = None) -> bool:
        return triggered(self.triggers, source, found)


@dataclass(frozen=True)
class Deferred:
    """A function of a gate (`defines(is_evaluation_name)`) named by its module, imported when the
    gate first asks it (the module may import LibCST; a gate reached only in files that refer to
    what the rule is about)."""

    module: str
    qualname: str

    def __call__(self, *args):
        import importlib

        function = self.__dict__.get("_function")
        if function is None:
            function = importlib.import_module(self.module)
            for part in self.qualname.split("."):
                function = getattr(function, part)
            object.__setattr__(self, "_function", function)
        return function(*args)
