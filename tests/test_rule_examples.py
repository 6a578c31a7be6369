"""Every rule's own examples are its tests: bad ones fire at their line, good ones stay quiet,
`fixed` is exactly what the fix produces and lints clean, and a bad example without `fixed`
offers no fix."""

from __future__ import annotations

import pytest

from trainlint.engine import lint_source
from trainlint.fixes import apply_fix
from trainlint.rules import registry
from trainlint.settings import Settings, resolve_selection

ALL = Settings(select=resolve_selection(["ALL"], [], []))


def _cases():
    for code, rule in registry().items():
        for kind, examples in (("bad", rule.bad_examples()), ("good", rule.good_examples())):
            for number, example in enumerate(examples):
                yield pytest.param(rule, example, id=f"{code}-{kind}-{number}")


@pytest.mark.parametrize("rule, example", list(_cases()))
def test_example(rule, example):
    result = lint_source(example.code, "example.py", ALL)
    assert result.errors == []
    mine = [f for f in result.findings if f.code == rule.code]
    if not example.is_bad:
        assert mine == [], f"{rule.code} fired on a good example: {mine}"
        return
    assert [f.line for f in mine] == [example.line], f"expected one {rule.code} at line {example.line}: {mine}"
    # a finding is reported below the rule's severity only in the documented cases its examples state
    assert mine[0].severity == (example.severity or rule.severity), mine[0].message
    fix = mine[0].fix
    if example.fixed is None:
        assert fix is None, f"{rule.code} offers a fix but the example states no `fixed`"
        return
    assert fix is not None, f"{rule.code} example states `fixed` but the finding has no fix"
    fixed = apply_fix(example.code, fix)
    assert fixed == example.fixed
    assert [f for f in lint_source(fixed, "example.py", ALL).findings if f.code == rule.code] == []


@pytest.mark.parametrize("code", sorted(registry()))
def test_rule_is_documented(code):
    rule = registry()[code]
    assert rule.name and rule.name == rule.name.lower() and " " not in rule.name
    assert rule.summary and rule.message and rule.what_it_does.strip() and rule.why_bad.strip()
    assert rule.references, f"{code} has no references"
    assert len(rule.bad_examples()) >= 4 and len(rule.good_examples()) >= 3
    docs = rule.documentation()
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## References"):
        assert heading in docs


@pytest.mark.parametrize("code", sorted(registry()))
def test_fix_safety_is_documented_and_true(code):
    """A rule with a fix says in its docs whether it is safe, and its examples' fixes agree."""
    rule = registry()[code]
    fixes = [f.fix for e in rule.bad_examples() if e.fixed
             for f in lint_source(e.code, "example.py", ALL).findings if f.code == code and f.fix]
    text = rule.fix_safety.strip()
    if not fixes:
        assert not text, f"{code} documents the safety of a fix it does not offer"
        return
    assert "## Fix safety" in rule.documentation()
    if text.startswith("Unsafe"):
        assert not any(fix.safe for fix in fixes), f"{code}'s docs say unsafe, a fix is safe"
    elif text.startswith("Safe:"):
        assert all(fix.safe for fix in fixes), f"{code}'s docs say safe, a fix is unsafe"
    else:
        assert text.startswith(("Safe for", "Safe where")) and "Unsafe" in text, text
