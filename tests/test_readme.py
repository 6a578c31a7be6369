"""The README's rule table is generated from the registry, and its commands are the real ones."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from trainlint.reporters.catalog import catalog, render_reference, render_rules

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
SCRIPT = REPO / "scripts" / "update_readme.py"
START, END = "<!-- rules:start -->", "<!-- rules:end -->"


def table_in(text: str) -> str:
    return text[text.index(START) + len(START):text.index(END)].strip("\n") + "\n"


def test_rule_table_is_current():
    assert table_in(README.read_text()) == render_rules("md"), (
        "README.md's rule table is stale: run `python scripts/update_readme.py`"
    )


def test_every_rule_is_in_the_table():
    table = table_in(README.read_text())
    from trainlint.rule import registry

    for code, rule in registry().items():
        assert f"| {code} | `{rule.name}` |" in table


def test_rule_reference_is_current_and_every_docs_link_resolves():
    reference = REPO / "docs" / "rules.md"
    assert reference.read_text() == render_reference(), (
        "docs/rules.md is stale: run `python scripts/update_readme.py`"
    )
    text = reference.read_text()
    for info in catalog():
        anchor = info.docs_url.rsplit("#", 1)[1]
        assert info.docs_url.split("#")[0].endswith("/docs/rules.md")
        assert f'<a id="{anchor}"></a>' in text


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_update_script_detects_and_fixes_a_stale_table(tmp_path):
    stale = tmp_path / "README.md"
    stale.write_text(f"# title\n\n{START}\n| code | name |\n|---|---|\n| TL001 | `gone` |\n{END}\n\nafter\n")
    reference = tmp_path / "rules.md"
    reference.write_text(render_reference())
    check = run_script("--check", "--readme", str(stale), "--reference", str(reference))
    assert check.returncode == 1 and "stale" in check.stderr
    assert run_script("--readme", str(stale), "--reference", str(reference)).returncode == 0
    assert run_script("--check", "--readme", str(stale), "--reference", str(reference)).returncode == 0
    text = stale.read_text()
    assert text.startswith("# title\n\n") and text.endswith(f"{END}\n\nafter\n")
    assert table_in(text) == render_rules("md")


def test_update_script_without_markers(tmp_path):
    plain = tmp_path / "README.md"
    plain.write_text("# no markers\n")
    reference = tmp_path / "rules.md"
    reference.write_text(render_reference())
    result = run_script("--check", "--readme", str(plain), "--reference", str(reference))
    assert result.returncode == 2 and "rules:start" in result.stderr


def test_readme_states_the_two_commands():
    text = README.read_text()
    assert "pip install . && trainlint examples/" in text
    assert "pip install -e '.[dev]' && pytest" in text
    for heading in ("## Configuration", "## Suppressing findings", "## Output formats", "### Exit codes",
                    "## Runtime confirmation (`trainlint confirm`)", "## Editor (LSP) and pre-commit"):
        assert heading in text


def test_update_script_detects_a_stale_reference(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# t\n\n{START}\n{render_rules('md')}{END}\n")
    reference = tmp_path / "docs" / "rules.md"
    result = run_script("--check", "--readme", str(readme), "--reference", str(reference))
    assert result.returncode == 1 and "rules.md" in result.stderr
    assert run_script("--readme", str(readme), "--reference", str(reference)).returncode == 0
    assert reference.read_text() == render_reference()


def test_every_check_option_is_in_the_options_table():
    from trainlint.cli import check

    table = README.read_text().split("| option | meaning |", 1)[1].split("\n\n", 1)[0]
    first_column = [row.split("|")[1] for row in table.splitlines() if row.startswith("| ")]
    documented = {name for cell in first_column for name in re.findall(r"(?<![\w-])(--?[a-z][-a-z]*)", cell)}
    options = {name for param in check.params if param.param_type_name == "option"
               for name in [*param.opts, *param.secondary_opts]}
    missing = sorted(o for o in options - {"-h", "--help"} if o not in documented)
    assert missing == [], f"options missing from the README's table: {missing}"
