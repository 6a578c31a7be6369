"""The project a checked file belongs to: its root, which project file an import names, and the
texts and trees of those files.

A training loop spans files (`main.py` calls `engine.evaluate`, whose decorator comes from
`utils/torch_utils.py`), so a rule asking about a name imported from the project gets that file's
summary: the model (`trainlint.model.linker`) makes it from the tree this reader gives. Project
files are read as text and parsed; nothing is ever imported or executed, and torch is never
needed. Files an import names are read even when they were not named on the command line; they
are not reported on.

Safety: an import is resolved only to a file whose real path (symlinks resolved) is inside the
root; such a file is read only if it is a regular file within the size limit, and parsed only
if the nesting guard lets LibCST parse it (`tree_of`). A helper that fails any of these has an
empty summary: it is never a crash, and never a finding (only files named to the checker are
reported on).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import io
import os
import re
import sys
import time
import tokenize
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from trainlint import guard
from trainlint.cache_folder import CacheFolder
from trainlint.parsing import dotted_name, normalize_identifiers
from trainlint.reader import import_store
from trainlint.reader.config_files import ROOT_MARKERS, ConfigError, find_config
from trainlint.reader.discovery import Discovery, MissingPath, discover
from trainlint.notebook import NotebookError, is_notebook, read_notebook
from trainlint.reader.files import DEFAULT_MAX_FILE_SIZE, SYSTEM_FOLDERS, SkippedFile, UnreadableFile, read_source

if TYPE_CHECKING:
    import libcst as cst

# the suffixes of module files, in the order the import system tries them (only `.py` is read)
_SUFFIXES = (*importlib.machinery.EXTENSION_SUFFIXES, ".py", *importlib.machinery.BYTECODE_SUFFIXES)
# the content hash a folder node has in the import store (`_below`), and one that was not listed
_FOLDER, _UNBOUNDED = "folder", "unbounded"
# Folders listed in a run at most. An installed environment's site-packages holds thousands (2,700
# with torch, lightning, accelerate and timm: at 2,000, none of their results was cached, and a
# warm run of them cost 0.37x the cold one); the system's own trees (/proc, /sys, /dev, which a
# root of `/` would list for `import sys`) are never listed at all.
_MAX_FOLDERS = 10_000


_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(?P<base>\.*[\w.]*)[ \t]+import[ \t]+\(?(?P<names>[\w \t,.]*)"
                     r"|import[ \t]+(?P<modules>[\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+"
                     r"(?:[ \t]+as[ \t]+\w+)?)*))", re.MULTILINE)


def imported_names(source: str) -> list[str]:
    """The dotted names a file's import statements name, read from its text (no parse): `from
    .utils import ckpt` gives `.utils` and `.utils.ckpt`. Names continued on the next line of a
    parenthesised import are missed; their module is not."""
    if "\r" in source:  # `^` of the pattern starts a line after a \n only: a CR-only file is one line
        source = source.replace("\r\n", "\n").replace("\r", "\n")
    found = []
    for match in _IMPORT.finditer(source):
        if match.group("modules"):
            found.extend(part.split()[0] for part in match.group("modules").split(","))
            continue
        base = match.group("base")
        found.append(base)
        sep = "" if base.endswith(".") else "."
        for name in (match.group("names") or "").split(","):
            name = name.split()[0] if name.split() else ""
            if name.isidentifier():
                found.append(f"{base}{sep}{name}")
    return found


_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")  # where a statement holds statements


def bound_names(source: str, path: str) -> set[str]:
    """The dotted names the file's import statements bind, as the file index binds them (`import
    a.b` binds `a`, `from .m import x` binds `.m.x`; a star import binds nothing), wherever the
    statements are (unlike `imported_names`, which misses a line joined by `;` or `\\`). Read with
    Python's parser, else LibCST's (syntax newer than this interpreter's) when the guard lets it
    parse; a file neither parses is never indexed, so it binds nothing."""
    simple = _simple_bound_names(source)
    if simple is not None:
        return simple
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _bound_names_libcst(source, path)
    found = set()
    todo = list(tree.body)
    while todo:  # statements only: an import is one, and expressions are most of a tree
        node = todo.pop()
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found.update(f"{base}.{a.name}" if base and not base.endswith(".") else f"{base}{a.name}"
                         for a in node.names if a.name != "*")
        else:
            for field in _BODIES:
                for child in getattr(node, field, ()):
                    todo.extend(child.body if isinstance(child, (ast.ExceptHandler, ast.match_case)) else [child])
    return found


_IMPORT_WORD = re.compile(r"\bimport\b")
_LINE_REST = re.compile(r"[ \t]*(?:#[^\n]*)?")
_PAREN_REST = re.compile(r"[ \t]*\)[ \t]*(?:#[^\n]*)?")
# the lines of a parenthesised `from m import (` list after its first: names, `as`, commas and
# comments up to the `)`, then nothing but a comment on that line
# (a comment runs to its line's end: the match never backtracks into one, a hostile text costs linear time)
_PAREN_LINES = re.compile(r"(?P<more>(?:[\w \t,\n]|#[^\n]*(?=\n|\Z))*)\)[ \t]*(?:#[^\n]*)?(?=\n|\Z)")
_COMMENT = re.compile(r"#[^\n]*")


def _simple_bound_names(source: str) -> set[str] | None:
    """`bound_names` without a parse, for a text whose every `import` word is in a line that
    `_IMPORT` reads whole (nothing after it but a comment: no `;`, `\\` or open parenthesis, and
    no `\\` ending the line before): every import statement is then one of those lines, read as
    `imported_names` reads it. None for any other text (`>>> import x` in a docstring, `if x:
    import y`)."""
    if "\r" in source:
        source = source.replace("\r\n", "\n").replace("\r", "\n")
    spans, found = [], set()
    for match in _IMPORT.finditer(source):
        end = source.find("\n", match.end())
        rest = source[match.end():end if end >= 0 else len(source)]
        opened = match.group("modules") is None and "(" in source[match.start():match.end()]
        joined = source[max(0, match.start() - 2):match.start()] == "\\\n"
        names, span_end = match.group("names") or "", match.end()
        if opened and not joined and not _PAREN_REST.fullmatch(rest):
            # a list continued on the lines below (`from m import (\n    a,\n    b as c,\n)`): read
            # whole when it holds nothing but names, `as`, commas and comments up to its `)`
            more = _PAREN_LINES.match(source, match.end())
            if more is None:
                return None
            names, span_end = f"{names},{_COMMENT.sub('', more.group('more'))}", more.end()
        elif joined or not (_PAREN_REST if opened else _LINE_REST).fullmatch(rest):
            return None  # more of the statement on the line before, or on the next one
        spans.append((match.start(), span_end))
        if match.group("modules"):
            found.update(part.split()[0].split(".")[0] for part in match.group("modules").split(","))
        else:
            base = match.group("base")
            sep = "" if base.endswith(".") else "."
            found.update(f"{base}{sep}{name.split()[0]}" for name in names.split(",")
                         if name.split() and name.split()[0].isidentifier())
    index = 0
    for word in _IMPORT_WORD.finditer(source):
        while index < len(spans) and spans[index][1] <= word.start():
            index += 1
        if index == len(spans) or spans[index][0] > word.start():
            return None
    return found


def _bound_names_libcst(source: str, path: str) -> set[str]:
    import libcst as cst

    problem = guard.check(source, path)
    if problem is not None and problem.final:
        return set()
    if sys.getrecursionlimit() < guard.RECURSION_LIMIT:
        sys.setrecursionlimit(guard.RECURSION_LIMIT)
    try:
        module = cst.parse_module(source)
    except (cst.ParserSyntaxError, cst.CSTValidationError, RecursionError, ValueError, MemoryError):
        return set()
    found = set()

    class Imports(cst.CSTVisitor):
        def visit_Import(self, node: cst.Import) -> None:
            found.update(name.split(".")[0] for name in (dotted_name(a.name) for a in node.names) if name)

        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            if isinstance(node.names, cst.ImportStar):
                return
            base = "." * len(node.relative) + (dotted_name(node.module) or "")
            for alias in node.names:
                name = dotted_name(alias.name)
                if name:
                    found.add(f"{base}.{name}" if base and not base.endswith(".") else f"{base}{name}")

    module.visit(Imports())
    return found


def _real(path: str | os.PathLike) -> Path:
    """The absolute path with symlinks resolved where they can be (a symlink loop stays as it is)."""
    return Path(os.path.realpath(path))


def _real_in(path: str | os.PathLike, folders: dict[str, str]) -> Path:
    """`_real(path)`, with the real paths of folders already resolved in `folders` (and adding its
    own): realpath costs a system call per path component, and files share their folders. A path
    with a `..` part (which realpath applies after the links before it) is resolved whole, and
    so is one that is itself a symlink."""
    return Path(_real_text_in(path, folders))


def _real_text_in(path: str | os.PathLike, folders: dict[str, str]) -> str:
    """`_real_in` as a string (a warm run resolves the tens of thousands of paths of its import
    graph: no pathlib object for each)."""
    text = os.path.abspath(path)
    folder, name = os.path.split(text)
    if not name or ".." in os.fspath(path).split(os.sep):
        return os.path.realpath(text)
    real_folder = folders.get(folder)
    if real_folder is None:
        real_folder = folders[folder] = os.path.realpath(folder)
    candidate = os.path.join(real_folder, name)
    return os.path.realpath(candidate) if os.path.islink(candidate) else candidate


def _reals(paths: Iterable[str | os.PathLike]) -> list[Path]:
    folders: dict[str, str] = {}
    return [_real_in(path, folders) for path in paths]


def _system_folder(folder: str) -> bool:
    """Under /proc, /sys or /dev (`files.SYSTEM_FOLDERS`): kernel state and devices, never listed."""
    return any(folder == top or folder.startswith(top + "/") for top in SYSTEM_FOLDERS)


def _own_place(key: str, component: str | None) -> str | None:
    """What a checked file's cached result depends on besides its bytes: its component's digest
    and its own real path `key` (the same bytes elsewhere in the component are another module)."""
    return None if component is None else f"{key}\0{component}"


def find_root(paths: Iterable[str | os.PathLike]) -> Path:
    """The directory of the nearest configuration file above the paths' common directory (the one
    `config.Resolver` gives them: a trainlint.toml, or a pyproject.toml with `[tool.trainlint]`);
    without one, of the nearest other root marker; else that common directory itself."""
    resolved = _reals(paths)
    if not resolved:
        return _real(Path.cwd())
    dirs = [p if os.path.isdir(p) else p.parent for p in resolved]  # False for a path past the length limit
    try:
        common = Path(os.path.commonpath([str(d) for d in dirs]))
    except ValueError:  # paths on different drives
        return dirs[0]
    config = find_config(common)
    if config is not None:
        return _real(config.parent)
    for directory in (common, *common.parents):
        if any(os.path.exists(directory / marker) for marker in ROOT_MARKERS):
            return directory
    return common


class Project:
    """One project: where its modules are, and their texts and trees, read on demand.

    `discovery_for` gives the excludes of a folder when the project's files must be found (no
    `paths` given): the configuration's (`config.Resolver().discovery_for`), which the reader
    cannot read itself (a configuration names rules); without it, the default excludes.
    """

    def __init__(self, root: str | os.PathLike, paths: Iterable[str | os.PathLike] = (),
                 max_file_size: int = DEFAULT_MAX_FILE_SIZE,
                 discovery_for: Callable[[str], Discovery] | None = None) -> None:
        self.root = _real(root)
        # the checked files, where constructions are looked for (all of the root's when not given)
        self._paths = _reals(paths) or None
        self.max_file_size = max_file_size  # a larger project file is not read
        self.discovery_for = discovery_for
        #: moves on each `refresh`: a layer above that keeps answers about the project drops them
        self.generation = 0
        self._init_caches()

    def _init_caches(self) -> None:
        self._listings: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self._bases: dict[str, list[Path]] = {}
        self._root_prefix = str(self.root).rstrip(os.sep) + os.sep
        self._found: dict[tuple[str, str], tuple[Path, list[str]] | None] = {}
        self._files: dict[str, tuple[tuple[int, int], str, str]] = {}  # path -> (stat stamp, hash, text)
        self._components: dict[str, tuple[str | None, str | None]] | None = None  # `key_components`
        self._folders_listed = 0  # by `_below`, in this run
        self._imports: dict[tuple[str, int, int], list[Path]] = {}  # (path, text) -> imported_files
        self._paths_of: dict[str, tuple[str, ...]] = {}  # an importing file's folder -> _search_path
        self._modules: dict[tuple[tuple[str, ...], str], tuple | None] = {}  # (locations, name) -> _spec
        self._reals: dict[str, Path] = {}  # realpath of each path asked about (a few stat calls each)
        self._real_keys: dict[str, str] = {}  # the same, as strings (the cache keys' graph is of strings)
        self._real_folders: dict[str, str] = {}  # realpath of their folders
        self._names: dict[str, list[str]] = {}  # content hash -> imported_names of that text
        # what a file's bytes may read, kept between runs (`import_store`): real path -> (content
        # hash, `_reach`), and each listed folder's (modification time, when listed)
        self._resolved: dict[str, tuple[str, list[Path | str]]] = {}
        self._stamps: dict[str, tuple[int | None, int]] = {}
        # each file's (size, modification time, inode) when its content hash was taken, with that
        # hash (settled stamps only: `import_store.settled`): while the stamp is unchanged, the
        # hash is not taken again
        self._file_stamps: dict[str, tuple[tuple[int, int, int], str]] = {}
        self._resolved_changed = False
        self._everything: bool | None = None  # `checks_everything`

    # worker processes get the root, the paths, what the imports resolve to and the cache keys'
    # components, and build their own caches
    def __getstate__(self) -> dict:
        return {"root": self.root, "paths": self._paths, "max_file_size": self.max_file_size,
                "resolved": self._resolved, "stamps": self._stamps, "components": self._components,
                "file_stamps": self._file_stamps}

    def __setstate__(self, state: dict) -> None:
        self.root, self._paths, self.max_file_size = state["root"], state["paths"], state["max_file_size"]
        self.discovery_for, self.generation = None, 0  # the paths are known: they were found before
        self._init_caches()
        self._resolved, self._stamps = state["resolved"], state["stamps"]
        self._components, self._file_stamps = state["components"], state["file_stamps"]

    @property
    def paths(self) -> list[Path]:
        if self._paths is None:
            try:
                self._paths = _reals(discover([str(self.root)], self.discovery_for))
            except (ConfigError, MissingPath, OSError):
                self._paths = []
        return self._paths

    def checks_everything(self) -> bool:
        """Every Python file under the root (with the default excludes) is a checked file: a run
        over the whole project, where a file that can import a checked one is checked too (its
        import component holds all that can read its names). Found once per process."""
        if self._everything is None:
            if self._paths is None:
                self._everything = True  # no paths given: the root's files are the checked ones
            else:
                try:
                    found = set(_reals(discover([str(self.root)], None)))
                    self._everything = bool(found) and found <= set(self._paths)
                except (ConfigError, MissingPath, OSError):
                    self._everything = False
        return self._everything

    @classmethod
    def for_paths(cls, paths: Iterable[str | os.PathLike], max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> Project:
        paths = _reals(paths)
        return cls(find_root(paths), paths, max_file_size)

    # -- where modules are ------------------------------------------------------------------------
    def refresh(self) -> None:
        """Forget which files exist and who builds which class (a long-lived project, in the editor,
        after a file is saved); summaries stay cached by content."""
        self.generation += 1
        self._listings.clear()
        self._found.clear()
        self._components = None
        self._folders_listed = 0
        self._imports.clear()
        self._reals.clear()
        self._real_keys.clear()
        self._real_folders.clear()
        self._modules.clear()
        self._paths_of.clear()
        self._resolved.clear()
        self._stamps.clear()
        self._file_stamps.clear()

    @staticmethod
    def file_key(path: str | os.PathLike) -> Path:
        """How the project names a file (absolute, symlinks resolved)."""
        return _real(path)

    def contains(self, path: str | os.PathLike) -> bool:
        try:
            _real(path).relative_to(self.root)
            return True
        except (ValueError, OSError):
            return False

    def _search_path(self, from_path: str) -> tuple[str, ...]:
        folder = os.path.dirname(from_path)
        found = self._paths_of.get(folder)
        if found is None:
            found = self._paths_of[folder] = tuple(str(base) for base in self._search_bases(from_path))
        return found

    def _search_bases(self, from_path: str) -> list[Path]:
        """Where an absolute import may start: the importing file's folder (a script's sys.path[0]),
        each folder above it up to the root, and the root's `src/` layout."""
        folder = os.path.dirname(from_path)
        bases = self._bases.get(folder)
        if bases is None:
            here = self._real(from_path).parent
            if not self._inside(here):
                bases = [here]
            else:
                bases = [here]
                while here != self.root:
                    here = here.parent
                    bases.append(here)
                bases.append(self.root / "src")
            self._bases[folder] = bases
        return bases

    def real(self, path: str | os.PathLike) -> Path:
        """How the project names a file, as `file_key`, remembered until `refresh`."""
        return self._real(path)

    def _real(self, path: str | os.PathLike) -> Path:
        """`_real(path)`, remembered until `refresh`: every file of a folder resolves its folder's
        relative imports, and realpath costs a system call per path component."""
        key = str(path)
        found = self._reals.get(key)
        if found is None:
            found = self._reals[key] = _real_in(key, self._real_folders)
        return found

    def _real_key(self, path: str | os.PathLike) -> str:
        """`str(self._real(path))`, remembered until `refresh`."""
        key = path if type(path) is str else str(path)
        found = self._real_keys.get(key)
        if found is None:
            found = self._real_keys[key] = _real_text_in(key, self._real_folders)
        return found

    def _inside(self, path: Path | str) -> bool:
        """`path` (already absolute and resolved) is in the project."""
        text = path if type(path) is str else str(path)
        return text.startswith(self._root_prefix) or text == str(self.root)

    def _listing(self, folder: str | Path) -> tuple[frozenset[str], frozenset[str]]:
        """(files, folders) in a folder, listed once: most imports name no project file, and one
        listing answers them all without a stat call each. A link counts as what it points to (as
        the import system's `isfile`/`isdir`); a dangling one is neither."""
        key = str(folder)
        found = self._listings.get(key)
        if found is None:
            self._stamps[key] = import_store.folder_stamp(key)  # before listing: a later change shows
            files, folders = set(), set()
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        try:
                            if entry.is_dir():
                                folders.add(entry.name)
                            elif entry.is_file():
                                files.add(entry.name)
                        except OSError:
                            continue
            except OSError:
                pass
            found = self._listings[key] = (frozenset(files), frozenset(folders))
        return found

    def _spec(self, locations: tuple[str, ...], name: str) -> tuple[str | None, tuple[str, ...] | None] | None:
        """What the import system finds for the module `name` in `locations` (a search path, or a
        package's `__path__`): (its file, None) for a module, (its `__init__` file, its folder) for
        a package, (None, every portion) for a namespace package; None when nothing is there. The
        file is None too when it is not Python source (an extension module, bytecode alone).

        In the import system's order: in each location, a folder with an `__init__` first, then a
        module file (extension, source, bytecode); a folder without `__init__` is a namespace
        portion, taken only when no location has the package or the module."""
        key = (locations, name)
        if key in self._modules:
            return self._modules[key]
        found, portions = None, []
        for location in locations:
            files, folders = self._listing(location)
            if name in folders:
                package = os.path.join(location, name)
                inits = self._listing(package)[0]
                init = next((f"__init__{suffix}" for suffix in _SUFFIXES if f"__init__{suffix}" in inits), None)
                if init is not None:
                    found = (os.path.join(package, init) if init == "__init__.py" else None, (package,))
                    break
            module = next((f"{name}{suffix}" for suffix in _SUFFIXES if f"{name}{suffix}" in files), None)
            if module is not None:
                found = (os.path.join(location, module) if module.endswith(".py") else None, None)
                break
            if name in folders:
                portions.append(os.path.join(location, name))
        if found is None and portions:
            found = (None, tuple(portions))
        self._modules[key] = found
        return found

    def find_module(self, qualname: str, from_path: str) -> tuple[Path, list[str]] | None:
        """The project file a dotted name (as written in an import, relative ones with their dots)
        lives in, and the attribute path that is left: `utils.ckpt.save` -> (utils/ckpt.py, [save])."""
        key = (qualname, os.path.dirname(from_path))
        if key not in self._found:
            self._found[key] = self._find_module(qualname, from_path)
        found = self._found[key]
        return (found[0], list(found[1])) if found is not None else None

    def _find_module(self, qualname: str, from_path: str) -> tuple[Path, list[str]] | None:
        """As Python imports `a.b.c`: `a` from the search path, `a.b` from where `a` is (a
        package's folder, a namespace package's portions), and so on while each is a package; the
        deepest module found holds what is left. A namespace package has no file to read."""
        dots = len(qualname) - len(qualname.lstrip("."))
        parts = [p for p in qualname[dots:].split(".") if p]
        if dots:
            base = self._real(from_path).parent
            for _ in range(dots - 1):
                base = base.parent
            locations: tuple[str, ...] | None = (str(base),)
            init = "__init__.py" in self._listing(base)[0]  # the package the import is relative to
            found: tuple[str | None, int] | None = (str(base / "__init__.py") if init else None, 0)
        else:
            if not parts:
                return None
            locations, found = self._search_path(from_path), None
        for number, part in enumerate(parts):
            spec = self._spec(locations, part)
            if spec is None:
                break
            found = (spec[0], number + 1)
            locations = spec[1]
            if locations is None:
                break  # a module: nothing below it is a module
        if found is None or found[0] is None:
            return None
        path = self._real(found[0])  # a symlink is followed only to a file inside the project
        return (path, parts[found[1]:]) if self._inside(path) else None

    def module_files(self, imported: Iterable[str], from_path: str) -> set[Path]:
        """The project files that the imported dotted names of a file resolve to."""
        files = set()
        for qualname in imported:
            found = self.find_module(qualname, from_path)
            if found is not None:
                files.add(found[0])
        return files

    def imported_files(self, path: str, source: str) -> list[Path]:
        """The project files that the file at `path` (with text `source`) imports, in a stable order
        (found once per path and text until `refresh`: the text gate and the editor ask again)."""
        key = (str(path), len(source), hash(source))
        found = self._imports.get(key)
        if found is None:
            found = self._imports[key] = sorted(self.module_files(imported_names(source), path) - {self._real(path)})
        return found

    def imported_sources(self, path: str, source: str) -> list[str]:
        """The texts of the project files the file imports (for the cheap text gate: a rule whose
        trigger words are only in a helper the file calls still runs)."""
        texts = []
        for found in self.imported_files(path, source):
            text = self.source(found)
            if text is not None:
                texts.append(text)
        return texts

    # -- what a cached result depends on ---------------------------------------------------------
    # A file's findings read other files in two directions: forwards, the summaries of the project
    # files a name it uses resolves to (and what those summaries resolve in turn), and backwards,
    # the checked files that call its functions or build its classes (wherever their names
    # resolve to it; judging such a call reads that caller's imports too). So its result is a
    # function of its connected component in the graph whose nodes are the files reachable from
    # the checked files and whose edges go from each file to every file it may read directly
    # (`_reach`), taken undirected: a key over that whole component is sound.
    #
    # `_reach` over-approximates what any name in a file can resolve to. A name the linker asks
    # about is what an import binds (`import a.b` binds `a`, `from m import x` binds `m.x`; the
    # text's `imported_names` are followed for re-exports too) followed by attributes of any
    # length (identifiers), and `find_module` answers with a module file of one of its prefixes,
    # found below one of the search path's locations. So the reach holds, in every location,
    # every module file (of any kind the import system tries: which one is imported depends on
    # all of them) of every prefix of the bound name, and the folder the bound name itself names
    # (the attributes may go down any path under it): a folder is a node too, whose edges go to
    # its module files and its folders. Whatever the listings hold and whatever order the import
    # system takes them in, the answer is among them. The component's digest holds each node's
    # path, content hash, whether it is checked (only checked files are searched for callers)
    # and its edges: a change that alters an answer changes one of these (a new module that
    # shadows another is in the reach of the files it shadows it for). A candidate that is a
    # symlink is named among the edges too: a new link to a file already reached moves an answer
    # without adding a node. The checked file's own place (its real path) is part of what its
    # result depends on too: two files with the same bytes in one component (a copy beside the
    # original) resolve their relative imports from different folders and have different callers.

    def dependency_digest(self, path: str, data: bytes) -> str | None:
        """What a cached result of `data`, the bytes of the checked file at `path`, depends on
        besides those bytes: the digest of its component (see above). None when it cannot be
        said (the file is not one of the checked files, or it changed since the project read it):
        such a result is not cached."""
        key = self._real_key(path)
        entry = self.key_components().get(key)
        if entry is None or entry[0] != hashlib.sha256(data).hexdigest():
            return None
        return _own_place(key, entry[1])  # None for a component too large to list

    def unchanged_digests(self, path: str) -> tuple[str, str] | None:
        """(content hash, `dependency_digest`) of the checked file at `path` without reading it:
        when its stat stamp (size, modification time, inode) is the one recorded when that hash
        was taken, in this run or a run whose import store this one loaded. None otherwise (it may
        have changed: read it, and key its result by its bytes)."""
        key = self._real_key(path)
        entry = self.key_components().get(key)
        if entry is None or entry[0] is None or entry[1] is None:
            return None
        if not self._unchanged(key, entry[0]) or self._file_stamps[key][0][0] > self.max_file_size:
            return None
        return entry[0], _own_place(key, entry[1])

    def _unchanged(self, key: str, digest: str) -> bool:
        """The file `key` (a real path) still has the content hash `digest`, as its stat stamp says."""
        recorded = self._file_stamps.get(key)
        return recorded is not None and recorded[1] == digest and import_store.file_stamp(key) == recorded[0]

    def key_components(self) -> dict[str, tuple[str | None, str | None]]:
        """Each node (its real path, a string) reachable from the checked files -> (its content
        hash, its component's digest); found once per run, or per `refresh` (called before worker
        processes start, they get it with the project)."""
        if self._components is None:
            real = self._real_key
            checked = {str(path) for path in self.paths}
            edges: dict[str, list[Path | str]] = {}
            real_edges: dict[str, list[str]] = {}  # each edge resolved once (a warm run has tens of thousands)
            hashes: dict[str, str | None] = {}
            todo = sorted(checked)
            while todo:
                node = todo.pop()
                if node not in edges:
                    hashes[node], edges[node] = self._node(node)
                    real_edges[node] = [real(other) for other in edges[node]]
                    todo.extend(real_edges[node])
            group = {node: node for node in edges}  # union-find: each node's representative

            def find(node: str) -> str:
                while group[node] != node:
                    group[node] = group[group[node]]
                    node = group[node]
                return node

            for node, others in real_edges.items():
                for other in others:
                    a, b = find(node), find(other)
                    if a != b:
                        group[a] = b
            members: dict[str, list[str]] = {}
            for node in edges:
                members.setdefault(find(node), []).append(node)
            self._components = {}
            for nodes in members.values():
                digest = hashlib.sha256(f"{self.root}\0".encode("utf-8", "surrogatepass"))
                for node in sorted(nodes):
                    digest.update(f"{node}\0{hashes[node] or '-'}\0{int(node in checked)}\0"
                                  f"{' '.join(map(str, edges[node]))}\n".encode("utf-8", "surrogatepass"))
                bounded = all(hashes[node] != _UNBOUNDED for node in nodes)
                for node in nodes:
                    self._components[node] = (hashes[node], digest.hexdigest() if bounded else None)
        return self._components

    def _node(self, node: str) -> tuple[str | None, list[Path | str]]:
        """(content hash, edges) of a node (a real path): a folder's from `_below`, a file's
        `_reach` from the store when it has it for that content; a file whose stat stamp is the
        one recorded when its hash was taken is not read at all."""
        key = node
        known = self._resolved.get(key)
        if known is not None and known[0] in (_FOLDER, _UNBOUNDED):
            return known
        if known is not None and self._unchanged(key, known[0]):
            return known
        # an extension or bytecode module is never read: it only changes what is imported
        read = self._read(node) if key.endswith(".py") or is_notebook(key) else None
        if read is None:
            if not os.path.isdir(node):
                return None, []
            self._below(key)  # a folder the store did not hold
            return self._resolved[key]
        if known is not None and known[0] == read[0]:
            return read[0], known[1]
        found = self._reach(Path(node), read[1])
        self._resolved[key] = (read[0], found)
        self._resolved_changed = True
        return read[0], found

    def _reach(self, path: Path, source: str) -> list[Path]:
        """Every project file or folder a name in the file at `path` (with text `source`) may
        resolve to or below, and the symlinks among the candidates (see above)."""
        found: set[Path] = set()
        for target in set(imported_names(source)) | bound_names(source, str(path)):
            dots = len(target) - len(target.lstrip("."))
            parts = [p for p in target[dots:].split(".") if p]
            if dots:  # as `_find_module` climbs
                base = self._real(path).parent
                for _ in range(dots - 1):
                    base = base.parent
                bases = [str(base)]
                self._add_modules(found, bases[0], "__init__")  # the package it is relative to
            elif parts:
                bases = list(self._search_path(str(path)))
            else:
                continue
            for folder in bases:  # each prefix's modules, in every location, whatever the order
                for part in parts:
                    self._add_modules(found, folder, part)
                    if part not in self._listing(folder)[1]:
                        break
                    folder = os.path.join(folder, part)
                    self._add_modules(found, folder, "__init__")
                else:
                    if parts and self._add_candidate(found, Path(folder)):
                        self._below(str(self._real(folder)))
        return sorted(found)

    def _add_modules(self, found: set[Path], folder: str, name: str) -> None:
        """The module files of `name` in `folder`, of every kind the import system tries (an
        extension or bytecode beside a source file changes what is imported)."""
        files = self._listing(folder)[0]
        for suffix in _SUFFIXES:
            if f"{name}{suffix}" in files:
                self._add_candidate(found, Path(folder, f"{name}{suffix}"))

    def _add_candidate(self, found: set[Path], candidate: Path | None) -> bool:
        if candidate is None:
            return False
        real = self._real(candidate)
        if not self._inside(real):
            return False  # never read, and skipped by `find_module` as if it were not there
        found.add(real)
        if real != candidate and self._inside(candidate):
            found.add(candidate)
        return True

    def _below(self, folder: str) -> list[Path]:
        """The edges of the folder node `folder` (a real path): its modules and its folders (those
        named as a name's part can be: identifiers), through the listings `find_module` reads;
        the folders under it get theirs too. Past `_MAX_FOLDERS` listed in a run, and under
        /proc, /sys or /dev (a root of `/`, where `import sys` names /sys), a folder is
        `_UNBOUNDED`: its component is not cached."""
        todo = [folder]
        while todo:
            here = todo.pop()
            if here in self._resolved and self._resolved[here][0] in (_FOLDER, _UNBOUNDED):
                continue
            self._resolved_changed = True
            if self._folders_listed >= _MAX_FOLDERS or _system_folder(here):
                self._resolved[here] = (_UNBOUNDED, [])
                continue
            self._folders_listed += 1
            files, folders = self._listing(here)
            found: set[Path] = set()
            for name in sorted(files):
                if any(name.endswith(suffix) and name[:-len(suffix)].isidentifier() for suffix in _SUFFIXES):
                    self._add_candidate(found, Path(here, name))
            for name in sorted(folders):
                if name.isidentifier() and self._add_candidate(found, Path(here, name)):
                    todo.append(str(self._real(os.path.join(here, name))))
            self._resolved[here] = (_FOLDER, sorted(found))
        return self._resolved[folder][1]

    def load_imports(self, directory: str | os.PathLike, code: str) -> None:
        """Take what the imports resolve to from the store in the cache folder `directory`, if it
        is there (written by this user's trainlint, whose code has the fingerprint `code`:
        `CacheFolder`, `import_store.store_name`) and no folder it depends on
        changed."""
        loaded = import_store.load(CacheFolder(directory), self._store(code), self._inside)
        if loaded is not None:
            stamps, resolved, file_stamps = loaded
            self._stamps.update(stamps)
            self._resolved.update(resolved)
            self._file_stamps.update((path, (stamp, resolved[path][0])) for path, stamp in file_stamps.items())

    def save_imports(self, directory: str | os.PathLike, code: str) -> None:
        """Write what the imports resolved to into the store, when this run resolved any (with
        what it loaded from there: a run that checks a few files keeps the others' entries)."""
        if not self._resolved_changed:  # a warm run: the store already holds all of it
            return
        # a stamp is stored with the entry whose content hash it was taken for
        stamps = {path: stamp for path, (stamp, digest) in self._file_stamps.items()
                  if path in self._resolved and self._resolved[path][0] == digest}
        if import_store.save(CacheFolder(directory), self._store(code), self._stamps,
                                                        self._resolved, stamps):
            self._resolved_changed = False

    def _store(self, code: str) -> tuple[str, str]:
        return import_store.store_name(self.root, self.max_file_size, code)

    # -- reading and parsing files -------------------------------------------------------------
    def _read(self, path: Path | str) -> tuple[str, str] | None:
        """(content hash, text) of a file, read again only when its size or modification time changes."""
        key = str(path)
        now = time.time_ns()
        try:
            stat = os.stat(key)
        except (OSError, ValueError):
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        known = self._files.get(key)
        if known is not None and known[0] == stamp:
            return known[1], known[2]
        try:  # as a checked file is read: regular files only, never blocking, within the size limit
            data = read_source(key, self.max_file_size)
        except (UnreadableFile, SkippedFile):
            return None
        text = _decode(data)
        if is_notebook(key):  # what the engine checks of a notebook: its code cells as one module
            text = _notebook_python(text)
        read = (hashlib.sha256(data).hexdigest(), text)
        self._files[key] = (stamp, *read)
        # the stamp of these bytes, kept only when a later change must move it (stat before the
        # read: a change in between moves it too, and the hash is taken again next time)
        file_stamp = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
        if import_store.settled(file_stamp, now) and len(data) == stat.st_size:
            if self._file_stamps.get(key) != (file_stamp, read[0]):
                self._file_stamps[key] = (file_stamp, read[0])
                self._resolved_changed = True  # the store keeps the stamps
        else:
            self._file_stamps.pop(key, None)
        return read

    def read(self, path: Path) -> tuple[str, str] | None:
        """(content hash, text) of a project file; None when it cannot be read."""
        return self._read(path)

    def source(self, path: Path) -> str | None:
        read = self._read(path)
        return read[1] if read is not None else None

    def imported_names_of(self, path: Path) -> list[str]:
        """`imported_names` of a project file's text, found once per content: lookups through a
        package's `__init__` re-exports read the same files again and again."""
        read = self._read(path)
        if read is None:
            return []
        names = self._names.get(read[0])
        if names is None:
            names = self._names[read[0]] = imported_names(read[1])
        return names

    def content_hash(self, path: Path) -> str | None:
        read = self._read(path)
        return read[0] if read is not None else None


def tree_of(text: str, path: str) -> cst.Module | None:
    """LibCST's tree of a project file's text; None when the nesting guard does not let LibCST
    parse it or LibCST cannot (such a file answers nothing)."""
    import libcst as cst

    problem = guard.check(text, path)
    if problem is not None and problem.final:
        return None
    if sys.getrecursionlimit() < guard.RECURSION_LIMIT:
        sys.setrecursionlimit(guard.RECURSION_LIMIT)
    try:
        return cst.parse_module(text)
    except (cst.ParserSyntaxError, cst.CSTValidationError, RecursionError, ValueError, MemoryError):
        return None


def _notebook_python(text: str) -> str:
    """A notebook's code cells joined as the engine checks them; nothing for a notebook that is
    not one (the engine reports it as TL000)."""
    try:
        return read_notebook(text).joined().source
    except NotebookError:
        return ""


def _decode(data: bytes) -> str:
    """A project file's text as the engine decodes it (its PEP 263 coding cookie, else UTF-8);
    undecodable bytes are replaced (such a file is never parsed for a checked one)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        text = data.decode("utf-8", "replace")
    return normalize_identifiers(text)[0]  # its identifiers as Python reads them, as a checked file's


