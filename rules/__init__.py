"""Every rule, one module each. Installed as `trainlint.rules`.

A rule's module is imported only when a run needs it: `heads()` (the generated table `_table.py`,
checked against the rule classes by tests/test_rule_table.py) gives each rule's code, name,
severity, default, triggers and gate without importing any rule, so selection, the text pre-filter
and the gate decide first, and `load` imports the modules of the rules that can fire. `registry()`
imports them all (documentation, SARIF metadata, tests). TRAINLINT_EAGER_RULES=1 imports every
rule when this package is imported, as before the table (the differential test's reference).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

from trainlint.gate import RuleHead

if TYPE_CHECKING:  # the Rule base class is imported with the first rule module, not for selection
    from trainlint.rule import Rule

_HEADS: dict[str, RuleHead] = {}
_all_imported = False


def heads() -> dict[str, RuleHead]:
    """Every rule's head by code, in code order; imports no rule. (The table is imported here,
    not with the package, so the script that writes it can import the rules whatever it holds.)
    A rule class registered in this process that the table does not know (a test's, a plugin's)
    has its head made from the class."""
    if not _HEADS:
        from trainlint.rules._table import HEADS

        _HEADS.update((head.code, head) for head in HEADS)
    extra = {code: head_of(rule) for code, rule in _registered().items() if code not in _HEADS}
    return dict(sorted({**_HEADS, **extra}.items())) if extra else _HEADS


def _registered() -> dict[str, type[Rule]]:
    """The rule classes registered in this process: none before trainlint.rule is imported (a rule
    class is a subclass of its Rule), so a run that imports no rule never imports it."""
    rule = sys.modules.get("trainlint.rule")
    return rule.registered() if rule is not None else {}


def head_of(rule: type[Rule]) -> RuleHead:
    """A rule class's head (what `scripts/update_rule_table.py` writes into the table)."""
    return RuleHead(rule.code, rule.name, rule.severity, rule.enabled_by_default, rule.code[:3],
                    rule.__module__.rsplit(".", 1)[-1], rule.triggers, rule.gate, rule.imported_triggers,
                    rule.imported_gate)


def _modules() -> list[str]:
    import pkgutil  # only to list every rule (registry), never on a run's path

    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def registry() -> dict[str, type[Rule]]:
    """Every rule class by code, in code order (imports every rule module)."""
    global _all_imported
    if not _all_imported:
        for name in _modules():
            importlib.import_module(f"{__name__}.{name}")
        _all_imported = True
    from trainlint.rule import registered

    return registered()


def rule_class(code: str) -> type[Rule]:
    """The class of one rule, importing its module only; KeyError for an unknown code."""
    found = _registered().get(code)
    if found is None:
        importlib.import_module(f"{__name__}.{heads()[code].module}")
        found = _registered()[code]
    return found


def load(chosen: list[RuleHead]) -> list[Rule]:
    """The rules of `chosen` heads, in their order (their modules imported now)."""
    rules = []
    for head in chosen:
        rule = rule_class(head.code)()
        if head.via_imports:
            rule.via_imports = True
        rules.append(rule)
    return rules


if os.environ.get("TRAINLINT_EAGER_RULES") == "1":
    registry()
