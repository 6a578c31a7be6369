"""Every rule, one module each. Installed as `trainlint.rules`.

Importing this package imports each module in it, which registers the rule classes they define.
"""

import importlib
import pkgutil

from trainlint.rule import Rule, registered


def registry() -> dict[str, type[Rule]]:
    """Every rule class by code, in code order (this package has imported them all)."""
    return registered()


for _module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")
