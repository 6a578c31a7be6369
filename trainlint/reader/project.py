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

import hashlib
import importlib.machinery
import io
import os
import re
import sys
import tokenize
from pathlib import Path
from typing import Callable, Iterable

import libcst as cst

from trainlint import guard
from trainlint.cache_folder import CacheFolder
from trainlint.reader import import_store
from trainlint.reader.config_files import ROOT_MARKERS, ConfigError, find_config
from trainlint.reader.discovery import Discovery, MissingPath, discover
from trainlint.reader.files import DEFAULT_MAX_FILE_SIZE, SkippedFile, UnreadableFile, read_source

# the suffixes of module files, in the order the import system tries them (only `.py` is read)
_SUFFIXES = (*importlib.machinery.EXTENSION_SUFFIXES, ".py", *importlib.machinery.BYTECODE_SUFFIXES)


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


def _real(path: str | os.PathLike) -> Path:
    """The absolute path with symlinks resolved where they can be (a symlink loop stays as it is)."""
    return Path(os.path.realpath(path))


def _real_in(path: str | os.PathLike, folders: dict[str, str]) -> Path:
    """`_real(path)`, with the real paths of folders already resolved in `folders` (and adding its
    own): realpath costs a system call per path component, and files share their folders. A path
    with a `..` part (which realpath applies after the links before it) is resolved whole, and
    so is one that is itself a symlink."""
    text = os.path.abspath(path)
    folder, name = os.path.split(text)
    if not name or ".." in os.fspath(path).split(os.sep):
        return _real(text)
    real_folder = folders.get(folder)
    if real_folder is None:
        real_folder = folders[folder] = os.path.realpath(folder)
    candidate = os.path.join(real_folder, name)
    return _real(candidate) if os.path.islink(candidate) else Path(candidate)


def _reals(paths: Iterable[str | os.PathLike]) -> list[Path]:
    folders: dict[str, str] = {}
    return [_real_in(path, folders) for path in paths]


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
        self._importer_map: dict[Path, list[tuple[Path, str]]] | None = None  # file -> (importer, its hash)
        self._imports: dict[tuple[str, int, int], list[Path]] = {}  # (path, text) -> imported_files
        self._paths_of: dict[str, tuple[str, ...]] = {}  # an importing file's folder -> _search_path
        self._modules: dict[tuple[tuple[str, ...], str], tuple | None] = {}  # (locations, name) -> _spec
        self._reals: dict[str, Path] = {}  # realpath of each path asked about (a few stat calls each)
        self._real_folders: dict[str, str] = {}  # realpath of their folders
        self._names: dict[str, list[str]] = {}  # content hash -> imported_names of that text
        # what a file's bytes import, kept between runs (`import_store`): real path -> (content
        # hash, imported_files), and each listed folder's (modification time, when listed)
        self._resolved: dict[str, tuple[str, list[Path]]] = {}
        self._stamps: dict[str, tuple[int | None, int]] = {}
        self._resolved_changed = False

    # worker processes get the root, the paths and what the imports resolve to, and build their
    # own caches
    def __getstate__(self) -> dict:
        return {"root": self.root, "paths": self._paths, "max_file_size": self.max_file_size,
                "resolved": self._resolved, "stamps": self._stamps}

    def __setstate__(self, state: dict) -> None:
        self.root, self._paths, self.max_file_size = state["root"], state["paths"], state["max_file_size"]
        self.discovery_for, self.generation = None, 0  # the paths are known: they were found before
        self._init_caches()
        self._resolved, self._stamps = state["resolved"], state["stamps"]

    @property
    def paths(self) -> list[Path]:
        if self._paths is None:
            try:
                self._paths = _reals(discover([str(self.root)], self.discovery_for))
            except (ConfigError, MissingPath, OSError):
                self._paths = []
        return self._paths

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
        self._importer_map = None
        self._imports.clear()
        self._reals.clear()
        self._real_folders.clear()
        self._modules.clear()
        self._paths_of.clear()
        self._resolved.clear()
        self._stamps.clear()

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

    def _inside(self, path: Path) -> bool:
        """`path` (already absolute and resolved) is in the project."""
        return path == self.root or str(path).startswith(self._root_prefix)

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
        (found once per path and text until `refresh`: the cache key and the importers ask too)."""
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

    def _importers(self, path: str | os.PathLike) -> dict[Path, str]:
        """The checked files that import the file at `path`, directly or through a package's
        `__init__.py` that imports it (how a class is built and a helper is called there counts for
        the file: `Trainer(model, opt, sched)`, `save_on_master(checkpoint, path)`), each with the
        content hash it had when the map was built (once per run, or per `refresh` in the editor)."""
        importer_map = self.importer_map()
        own = self._real(path)
        found: dict[Path, str] = {}
        queue = [own]
        while queue:
            for importer, digest in importer_map.get(queue.pop(), ()):
                if importer not in found and importer != own:
                    found[importer] = digest
                    if importer.name == "__init__.py":
                        queue.append(importer)
        return found

    def importer_map(self) -> dict[Path, list[tuple[Path, str]]]:
        """Each project file -> the checked files that import it, with their content hashes
        (built once per run, or per `refresh`; called before worker processes start, they get it
        resolved with the project instead of each resolving it again)."""
        if self._importer_map is None:
            self._importer_map = {}
            for candidate in self.paths:
                read = self._read(candidate)
                for found in self._resolved_imports(candidate, read[0], read[1]) if read is not None else ():
                    self._importer_map.setdefault(found, []).append((candidate, read[0]))
        return self._importer_map

    def dependency_digest(self, path: str, data: bytes) -> str:
        """The content hashes of the project files that `data`, the bytes of the file at `path`,
        imports, and of the checked files that import it (the part of a cached result's key that
        changes when a helper it uses, or a caller that hands it its objects, changes)."""
        imported = " ".join(f"{found}:{self.content_hash(found)}"
                            for found in self._resolved_imports(path, hashlib.sha256(data).hexdigest(), data))
        importers = " ".join(f"{found}:{digest}" for found, digest in sorted(
            self._importers(path).items(), key=lambda item: str(item[0])))
        return f"{imported} | {importers}" if importers else imported

    def _resolved_imports(self, path: str | os.PathLike, digest: str, source: str | bytes) -> list[Path]:
        """`imported_files` of the file at `path` whose content hash is `digest`, from the store
        when it has them for that content."""
        key = str(self._real(path))
        known = self._resolved.get(key)
        if known is not None and known[0] == digest:
            return known[1]
        found = self.imported_files(path, source if isinstance(source, str) else _decode(source))
        self._resolved[key] = (digest, found)
        self._resolved_changed = True
        return found

    def load_imports(self, directory: str | os.PathLike, code: str) -> None:
        """Take what the imports resolve to from the store in the cache folder `directory`, if it
        is there (written by this user's trainlint, whose code has the fingerprint `code`:
        `CacheFolder`, `import_store.store_name`) and no folder it depends on
        changed."""
        loaded = import_store.load(CacheFolder(directory), self._store(code), lambda p: self._inside(p))
        if loaded is not None:
            stamps, resolved = loaded
            self._stamps.update(stamps)
            self._resolved.update(resolved)

    def save_imports(self, directory: str | os.PathLike, code: str) -> None:
        """Write what the imports resolved to into the store, when this run resolved any (with
        what it loaded from there: a run that checks a few files keeps the others' entries)."""
        if self._resolved_changed and import_store.save(CacheFolder(directory), self._store(code), self._stamps,
                                                        self._resolved):
            self._resolved_changed = False

    def _store(self, code: str) -> tuple[str, str]:
        return import_store.store_name(self.root, self.max_file_size, code)

    # -- reading and parsing files -------------------------------------------------------------
    def _read(self, path: Path) -> tuple[str, str] | None:
        """(content hash, text) of a file, read again only when its size or modification time changes."""
        key = str(path)
        try:
            stat = path.stat()
        except OSError:
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        known = self._files.get(key)
        if known is not None and known[0] == stamp:
            return known[1], known[2]
        try:  # as a checked file is read: regular files only, never blocking, within the size limit
            data = read_source(key, self.max_file_size)
        except (UnreadableFile, SkippedFile):
            return None
        read = (hashlib.sha256(data).hexdigest(), _decode(data))
        self._files[key] = (stamp, *read)
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
    problem = guard.check(text, path)
    if problem is not None and problem.final:
        return None
    if sys.getrecursionlimit() < guard.RECURSION_LIMIT:
        sys.setrecursionlimit(guard.RECURSION_LIMIT)
    try:
        return cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError, ValueError, MemoryError):
        return None


def _decode(data: bytes) -> str:
    """A project file's text as the engine decodes it (its PEP 263 coding cookie, else UTF-8);
    undecodable bytes are replaced (such a file is never parsed for a checked one)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return data.decode("utf-8", "replace")


