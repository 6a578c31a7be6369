"""The settings a document is checked with: the configuration the CLI would find from its folder.

A document is checked like a file named on the command line (excludes do not apply to it), with
the nearest `trainlint.toml` or `pyproject.toml` with `[tool.trainlint]` above it. Loaded settings
are kept per configuration file and reloaded when the file's modification time changes, so an
edit to pyproject.toml applies at the next check without restarting the server.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from trainlint.config import CliSelection, ConfigError, build_fix_policy, build_settings, find_config, load_config
from trainlint.fixes import FixPolicy
from trainlint.settings import SelectorError, Settings


class ProjectSettings:
    def __init__(self, on_error: Callable[[str], None]) -> None:
        self._on_error = on_error
        self._loaded: dict[Path, tuple[int, Settings, FixPolicy]] = {}
        self._default: Settings | None = None

    def settings_for(self, path: str | None) -> Settings:
        """Settings for the document at `path` (None for an unsaved buffer: the server's folder)."""
        return self._load(path)[0]

    def fix_policy_for(self, path: str | None) -> FixPolicy:
        """Which fixes "Fix all" applies: the safe ones, or what the configuration's `unsafe-fixes`,
        `fixable` and `unfixable` say."""
        return self._load(path)[1]

    def _load(self, path: str | None) -> tuple[Settings, FixPolicy]:
        try:
            start = Path(os.path.realpath(Path(path).parent if path else Path.cwd()))
            found = find_config(start)
            stamp = found.stat().st_mtime_ns if found else 0
        except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Path.resolve)
            found = None
        if found is None:
            if self._default is None:
                self._default = Settings()
            return self._default, FixPolicy()
        cached = self._loaded.get(found)
        if cached is not None and cached[0] == stamp:
            return cached[1], cached[2]
        try:
            config = load_config(found)
            settings, policy = build_settings(config, CliSelection()), build_fix_policy(config, CliSelection())
        except (ConfigError, SelectorError) as err:
            # Reported once per version of the file; the document is still checked with defaults.
            self._on_error(f"{err}; checking with the default settings until it is fixed")
            settings, policy = Settings(), FixPolicy()
        self._loaded[found] = (stamp, settings, policy)
        return settings, policy
