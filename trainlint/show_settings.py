"""`trainlint check --show-settings FILE`: the settings that apply to FILE and where each came from."""

from __future__ import annotations

import json
import os
from dataclasses import fields

from trainlint.config import SCHEMA, FileConfig, Resolver
from trainlint.sanitize import one_line
from trainlint.reader.discovery import DEFAULT_INCLUDE
from trainlint.settings import DEFAULT_MAX_FILE_SIZE, DEFAULT_MIN_TORCH, DEFAULT_TEST_CODE_IGNORE, is_test_code

_DEFAULTS = FileConfig()
#: Command-line options that override or extend a configuration key.
_CLI = {"select": "--select", "extend-select": "--extend-select", "ignore": "--ignore", "exclude": "--exclude"}
#: Command-line switches that replace a boolean key.
_FLAGS = {"fix": "--fix/--no-fix", "unsafe-fixes": "--unsafe-fixes/--no-unsafe-fixes",
          "allow-skipped": "--allow-skipped",
          "include-unproven": "--include-unproven/--no-include-unproven"}


def _show(key: str, value) -> str:
    if key == "min-torch-version":
        return '"' + ".".join(map(str, value or DEFAULT_MIN_TORCH)) + '"'
    if key == "per-file-ignores":
        return "{" + ", ".join(f"{json.dumps(p)} = {json.dumps(list(c))}" for p, c in value) + "}"
    if value is None and key in ("fix", "unsafe-fixes", "allow-skipped", "include-unproven"):
        return "false"
    if value is None and key == "fixable":
        return '["ALL"]'
    if value is None and key == "max-file-size":
        return f"{DEFAULT_MAX_FILE_SIZE}  (10 MB)"
    if value is None and key == "select":
        return "null  (the rules on by default)"
    if isinstance(value, tuple):
        return json.dumps(list(value))
    return json.dumps(value)


def render_settings(resolver: Resolver, path: str) -> str:
    config = resolver.config_for(path)
    settings = resolver.settings_for(path)
    cli = resolver.cli
    if resolver.isolated:
        origin = "none (--isolated)"
    elif resolver.config_file is not None:
        origin = f"{config.path} (--config)"
    elif config.path is not None:
        origin = f"{config.path} (the nearest above the file)"
    else:
        origin = "none found above the file: the defaults"
    where = str(config.path) if config.path else "default"
    names = {f.name for f in fields(FileConfig)}

    rows = [("configuration", origin, "")]
    for key, (field_name, _) in SCHEMA.items():
        if field_name not in names:
            continue
        value = getattr(config, field_name)
        source = where if key in config.keys else "default"
        if key == "exclude" and value is None:
            value = _show_default_excludes()
        if key == "test-code-ignore" and value is None:
            value = DEFAULT_TEST_CODE_IGNORE
        if key == "include" and value is None:
            value = DEFAULT_INCLUDE
        shown = value if isinstance(value, str) else _show(key, value)
        if key in _FLAGS and getattr(cli, field_name) is not None:  # --fix/--no-fix, --unsafe-fixes/...
            rows.append((key, json.dumps(getattr(cli, field_name)), f"command line ({_FLAGS[key]})"))
            continue
        given = getattr(cli, field_name, None) if key in _CLI else None
        if key in ("select", "extend-select", "ignore") and cli.select is not None:
            if key == "select":
                shown, source = _show(key, cli.select), "command line (--select replaces the file's selection)"
            else:
                shown, source = _show(key, given), "command line"
        elif given:
            shown = f"{shown} + {_show(key, given)}" if source != "default" or key != "select" else _show(key, given)
            source = f"{source} + command line ({_CLI[key]})"
        rows.append((key, shown, source))

    ignored_here = sorted(settings.select - settings.codes_for_path(path))
    why = " and ".join(w for w, on in (("per-file-ignores", bool(settings.per_file_ignores)),
                                        ("test code: test-code-ignore",
                                         is_test_code(path, settings.root) and bool(settings.test_code_ignore))) if on)
    rows.append(("ignored in this file", ", ".join(ignored_here) or "-", why if ignored_here else ""))
    rows.append(("rules run on this file", ", ".join(sorted(settings.codes_for_path(path))), ""))
    parent = os.path.dirname(os.path.abspath(path))
    excluded = resolver.discovery_for(parent).is_excluded(path) or resolver.is_force_excluded(path)
    rows.append(("excluded when walked", "yes" if excluded else "no", ""))

    width = max(len(key) for key, _, _ in rows)
    # paths and configured values are the repository's: each on its line, escaped (the CLI also
    # escapes the whole text as it prints it)
    lines = [f"Settings for {one_line(path)}"]
    for key, value, source in rows:
        lines.append(f"  {key:<{width}}  {one_line(value)}" + (f"  [{one_line(source)}]" if source else ""))
    return "\n".join(lines) + "\n"


def _show_default_excludes() -> str:
    from trainlint.reader.discovery import DEFAULT_EXCLUDES

    return json.dumps(list(DEFAULT_EXCLUDES))
