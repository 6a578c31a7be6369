"""Configuration files: where they are found, what they may say, and how the CLI overrides them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BAD
from trainlint.config import ConfigError, FileConfig, find_config, load_config

TORCH_LOAD_DEFAULT = 'import torch\n\nstate = torch.load("checkpoint.pt", map_location="cpu")\n'


def codes(result) -> list[tuple[str, str]]:
    """(path, code) of every finding in a --format json run."""
    return [(f["path"], f["code"]) for f in json.loads(result.stdout)["findings"]]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- errors: exit 2, one line naming the key and the file ----------------------------------------

@pytest.mark.parametrize("body, key, detail", [
    ('selct = ["TL401"]', "selct", "did you mean 'select'?"),
    ('per_file_ignores = {}', "per_file_ignores", "did you mean 'per-file-ignores'?"),
    ('select = "TL401"', "select", "must be a list of strings"),
    ('ignore = ["TL999"]', "ignore", "unknown rule selector 'TL999'"),
    ('extend-select = [401]', "extend-select", "must be a list of strings"),
    ('exclude = "build"', "exclude", "must be a list of strings"),
    ('min-torch-version = 2.4', "min-torch-version", "is not a string"),
    ('min-torch-version = "two"', "min-torch-version", "is not a version"),
    ('per-file-ignores = ["tests/*"]', "per-file-ignores", "must be a table"),
    ('[per-file-ignores]\n"tests/*" = ["TL4x"]', "per-file-ignores.tests/*", "unknown rule selector 'TL4x'"),
    ('ignore = ["Unsafe-Torch-Lod"]', "ignore", "unknown rule selector 'Unsafe-Torch-Lod'"),
    ('test-code-ignore = ["TL9"]', "test-code-ignore", "unknown rule selector 'TL9'"),
    ('test-code-ignore = true', "test-code-ignore", "must be a list of strings"),
])
def test_bad_configuration_exits_2_naming_key_and_file(project, run, body, key, detail):
    body = body.replace("[per-file-ignores]", "[tool.trainlint.per-file-ignores]")
    write(project / "pyproject.toml", f"[tool.trainlint]\n{body}\n" if not body.startswith("[") else body)
    result = run("check", "bad.py")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert str(project / "pyproject.toml") in lines[0]
    assert f"'{key}'" in lines[0] and detail in lines[0]
    assert result.stdout == ""


def trainlint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI as a user runs it: a process of its own."""
    return subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("name, header", [("pyproject.toml", "[tool.trainlint]\n"), ("trainlint.toml", "")])
def test_an_empty_select_is_refused_like_the_command_lines(tmp_path, name, header):
    """`select = []` would run no rule and pass every file, as `--select ''` would: both are
    refused, the configuration naming its file and key."""
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / name, f"{header}select = []\n")
    done = trainlint("check", "--no-cache", "--format", "json", "bad.py", cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("trainlint: error: ")
    assert str(tmp_path / name) in line and "'select' is empty" in line
    write(tmp_path / name, f"{header}select = []\nextend-select = [\"TL401\"]\n")
    assert trainlint("check", "--no-cache", "bad.py", cwd=tmp_path).returncode == 2  # refused, not run
    flag = trainlint("check", "--no-cache", "--isolated", "--select", "", "bad.py", cwd=tmp_path)
    assert flag.returncode == 2 and "no rule codes given" in flag.stderr


@pytest.mark.parametrize("body", [
    'select = ["TL0", "non-atomic-checkpoint-save"]',
    'ignore = ["unsafe-torch-load"]',
    'extend-select = ["TL0"]\nignore = ["Unsafe-Torch-Load"]',
    '[tool.trainlint.per-file-ignores]\n"bad.py" = ["unsafe-torch-load"]',
])
def test_rule_names_work_wherever_a_code_does(project, run, body):
    write(project / "pyproject.toml", body if body.startswith("[") else f"[tool.trainlint]\n{body}\n")
    result = run("check", "--format", "json", "--no-cache", "bad.py")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert codes(result) == []


def test_rule_names_in_fixable_and_unfixable(project, run):
    write(project / "pyproject.toml", '[tool.trainlint]\nunfixable = ["unsafe-torch-load"]\n')
    result = run("check", "--fix", "--unsafe-fixes", "--no-cache", "bad.py")
    assert result.exit_code == 1 and (project / "bad.py").read_text() == BAD
    write(project / "pyproject.toml", '[tool.trainlint]\nfixable = ["unsafe-torch-load"]\n')
    result = run("check", "--fix", "--unsafe-fixes", "--no-cache", "bad.py")
    assert result.exit_code == 0 and "weights_only=True" in (project / "bad.py").read_text()


def test_invalid_toml_names_the_file(project, run):
    write(project / "pyproject.toml", "[tool.trainlint]\nselect = [\n")
    result = run("check", "bad.py")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"trainlint: error: {project / 'pyproject.toml'}: invalid TOML")
    assert len(result.stderr.splitlines()) == 1


def test_missing_config_file(project, run):
    result = run("check", "--config", "nowhere.toml", "bad.py")
    assert result.exit_code == 2
    assert result.stderr == "trainlint: error: configuration file not found: nowhere.toml\n"


def test_config_and_isolated_together_is_an_error(project, run):
    write(project / "trainlint.toml", "")
    result = run("check", "--config", "trainlint.toml", "--isolated", "bad.py")
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1


def test_load_config_values(tmp_path):
    path = write(tmp_path / "pyproject.toml", """
[project]
name = "x"

[tool.trainlint]
select = ["tl4", "TL000"]
ignore = ["TL401"]
extend-select = ["ALL"]
exclude = ["gen"]
extend-exclude = ["notebooks/*"]
min-torch-version = "2.4"

[tool.trainlint.per-file-ignores]
"tests/*" = ["TL4"]
""")
    config = load_config(path)
    assert config == FileConfig(
        path=path, select=("TL4", "TL000"), ignore=("TL401",), extend_select=("ALL",),
        per_file_ignores=(("tests/*", ("TL4",)),), exclude=("gen",), extend_exclude=("notebooks/*",),
        min_torch_version=(2, 4), keys=frozenset({"select", "ignore", "extend-select", "exclude", "extend-exclude",
                                                  "min-torch-version", "per-file-ignores"}),
    )
    assert config.root == tmp_path


def test_empty_pyproject_table_is_valid(tmp_path):
    path = write(tmp_path / "pyproject.toml", "[tool.trainlint]\n")
    assert load_config(path) == FileConfig(path=path, keys=frozenset())


def test_load_config_error_type(tmp_path):
    path = write(tmp_path / "trainlint.toml", "unknown = 1\n")
    with pytest.raises(ConfigError, match=r"trainlint.toml: unknown key 'unknown'"):
        load_config(path)


# -- discovery of the configuration file ------------------------------------------------------

def test_nearest_config_walking_up_from_the_current_directory(tmp_path, monkeypatch):
    write(tmp_path / "pyproject.toml", '[tool.trainlint]\nignore = ["TL401"]\n')
    write(tmp_path / "pkg" / "pyproject.toml", "[project]\nname = 'no trainlint table'\n")
    sub = tmp_path / "pkg" / "src"
    sub.mkdir()
    assert find_config(sub) == tmp_path / "pyproject.toml"  # a pyproject without the table is passed over
    write(tmp_path / "pkg" / "trainlint.toml", 'select = ["TL4"]\n')
    assert find_config(sub) == tmp_path / "pkg" / "trainlint.toml"


def test_config_found_from_a_subdirectory(project, run, monkeypatch):
    write(project / "pyproject.toml", '[tool.trainlint]\nignore = ["TL401"]\n')
    write(project / "src" / "train.py", BAD)
    monkeypatch.chdir(project / "src")
    result = run("check", "--format", "json", "--no-cache", "train.py")
    assert result.exit_code == 0 and codes(result) == []


def test_isolated_ignores_the_config(project, run):
    write(project / "pyproject.toml", '[tool.trainlint]\nignore = ["TL401"]\n')
    assert run("check", "--no-cache", "bad.py").exit_code == 0
    assert run("check", "--no-cache", "--isolated", "bad.py").exit_code == 1


def test_explicit_trainlint_toml_and_pyproject(project, run):
    write(project / "conf" / "trainlint.toml", 'ignore = ["TL401"]\n')
    assert run("check", "--no-cache", "--config", "conf/trainlint.toml", "bad.py").exit_code == 0
    write(project / "conf" / "pyproject.toml", '[tool.trainlint]\nignore = ["TL4"]\n')
    assert run("check", "--no-cache", "--config", "conf/pyproject.toml", "bad.py").exit_code == 0
    write(project / "conf" / "other.toml", '[tool.trainlint]\nignore = ["TL4"]\n')
    result = run("check", "--config", "conf/other.toml", "bad.py")  # top-level keys expected here
    assert result.exit_code == 2 and "unknown key 'tool'" in result.stderr


# -- precedence -------------------------------------------------------------------------------

def test_cli_select_replaces_the_config_selection(project, run):
    write(project / "pyproject.toml", '[tool.trainlint]\nselect = ["TL000"]\nignore = ["TL401"]\n')
    assert codes(run("check", "--format", "json", "--no-cache", "bad.py")) == []
    assert codes(run("check", "--format", "json", "--no-cache", "--select", "TL401", "bad.py")) == [
        ("bad.py", "TL401")]


def test_cli_extend_select_and_ignore_add_to_the_config(project, run):
    write(project / "pyproject.toml", '[tool.trainlint]\nselect = ["TL000"]\n')
    assert codes(run("check", "--format", "json", "--no-cache", "bad.py")) == []
    extended = run("check", "--format", "json", "--no-cache", "--extend-select", "TL401", "bad.py")
    assert codes(extended) == [("bad.py", "TL401")]
    write(project / "pyproject.toml", '[tool.trainlint]\nextend-select = ["TL401"]\n')
    ignored = run("check", "--format", "json", "--no-cache", "--ignore", "TL401", "bad.py")
    assert codes(ignored) == []


def test_per_file_ignores_relative_to_the_config_directory(project, run, monkeypatch):
    (project / "broken.py").unlink()  # TL000 is always selected
    write(project / "pyproject.toml", '[tool.trainlint.per-file-ignores]\n"legacy/*" = ["TL4"]\n'
                                      '"scratch_*.py" = ["TL401"]\n')
    write(project / "legacy" / "old.py", BAD)
    write(project / "src" / "legacy" / "new.py", BAD)  # not under the config's legacy/
    write(project / "src" / "scratch_a.py", BAD)  # a bare name matches anywhere
    result = run("check", "--format", "json", "--no-cache", "--select", "TL401", ".")
    assert sorted(codes(result)) == [("bad.py", "TL401"), ("src/legacy/new.py", "TL401")]
    monkeypatch.chdir(project / "src")
    from_sub = run("check", "--format", "json", "--no-cache", "--select", "TL401", "..")
    assert sorted(codes(from_sub)) == [("../bad.py", "TL401"), ("../src/legacy/new.py", "TL401")]
    absolute = run("check", "--format", "json", "--no-cache", "--select", "TL401", str(project / "legacy"))
    assert codes(absolute) == []


def test_per_file_ignores_apply_even_with_cli_select(project, run):
    write(project / "pyproject.toml", '[tool.trainlint.per-file-ignores]\n"bad.py" = ["TL401"]\n')
    assert codes(run("check", "--format", "json", "--no-cache", "--select", "ALL", "bad.py")) == []


def test_per_file_ignores_match_the_stdin_filename(project, run):
    write(project / "pyproject.toml", '[tool.trainlint.per-file-ignores]\n"legacy/*" = ["TL401"]\n')
    ignored = run("check", "--select", "TL401", "--stdin-filename", "legacy/x.py", "-", input=BAD)
    assert ignored.exit_code == 0
    kept = run("check", "--select", "TL401", "--stdin-filename", "src/x.py", "-", input=BAD)
    assert kept.exit_code == 1


def test_exclude_and_extend_exclude(project, run):
    (project / "broken.py").unlink()  # TL000 is always selected
    write(project / "generated" / "a.py", BAD)
    write(project / "notebooks" / "b.py", BAD)
    write(project / "build" / "c.py", BAD)
    write(project / "pyproject.toml", '[tool.trainlint]\nextend-exclude = ["generated", "notebooks/*"]\n')
    result = run("check", "--format", "json", "--no-cache", "--select", "TL401", ".")
    assert codes(result) == [("bad.py", "TL401")]
    # `exclude` replaces the defaults: build/ is walked again
    write(project / "pyproject.toml", '[tool.trainlint]\nexclude = ["generated"]\n')
    result = run("check", "--format", "json", "--no-cache", "--select", "TL401", ".")
    assert sorted(codes(result)) == [("bad.py", "TL401"), ("build/c.py", "TL401"), ("notebooks/b.py", "TL401")]


def test_min_torch_version(project, run):
    write(project / "load.py", TORCH_LOAD_DEFAULT)
    assert codes(run("check", "--format", "json", "--no-cache", "--select", "TL401", "load.py")) == []
    write(project / "pyproject.toml", '[tool.trainlint]\nmin-torch-version = "2.4"\n')
    assert codes(run("check", "--format", "json", "--no-cache", "--select", "TL401", "load.py")) == [
        ("load.py", "TL401")]


def test_cache_lives_next_to_the_config(project, run, monkeypatch):
    write(project / "pyproject.toml", "[tool.trainlint]\n")
    write(project / "src" / "train.py", BAD)
    monkeypatch.chdir(project / "src")
    run("check", "train.py")
    assert (project / ".trainlint_cache").is_dir()
    assert not (project / "src" / ".trainlint_cache").exists()


# -- test code -------------------------------------------------------------------------------------
# A test that writes a checkpoint and loads it back, with a training loop that clears gradients on
# every micro-batch: the load is the test's own scratch file (TL401 not reported in test code by
# default), the accumulation bug is a wrong gradient wherever it runs (TL104 still reported).
TEST_FILE = """\
import torch


def test_roundtrip(tmp_path, model, loader, optimizer):
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y) / 4
        loss.backward()
        if (i + 1) % 4 == 0:
            optimizer.step()
    torch.save(model, tmp_path / "m.pt")
    assert torch.load(tmp_path / "m.pt", weights_only=False) is not None
"""


@pytest.mark.parametrize("name", ["tests/test_ckpt.py", "tests/unit/helpers.py", "test/io.py", "conftest.py",
                                  "pkg/ckpt_test.py", "src/test_ckpt.py"])
def test_test_code_skips_the_scratch_file_rules_by_default(project, run, name):
    write(project / name, TEST_FILE)
    found = {code for _, code in codes(run("check", "--format", "json", "--no-cache", "--select", "ALL", name))}
    assert "TL104" in found
    assert not found & {"TL401", "TL402"}


def test_test_code_ignore_is_configurable(project, run):
    write(project / "tests" / "test_ckpt.py", TEST_FILE)
    write(project / "train.py", TEST_FILE)  # not test code: everything is reported
    everything = {code for _, code in codes(run("check", "--format", "json", "--no-cache", "--select", "ALL",
                                                "train.py"))}
    assert {"TL104", "TL401"} <= everything
    write(project / "pyproject.toml", '[tool.trainlint]\ntest-code-ignore = []\n')
    full = {code for _, code in codes(run("check", "--format", "json", "--no-cache", "--select", "ALL",
                                          "tests/test_ckpt.py"))}
    assert full == everything
    write(project / "pyproject.toml", '[tool.trainlint]\ntest-code-ignore = ["TL1"]\n')
    chosen = {code for _, code in codes(run("check", "--format", "json", "--no-cache", "--select", "ALL",
                                            "tests/test_ckpt.py"))}
    assert chosen == everything - {"TL104"}
    shown = run("check", "--show-settings", "tests/test_ckpt.py").stdout
    assert "test code: test-code-ignore" in shown and '"TL1"' in shown


def test_a_folder_above_the_project_named_tests_does_not_make_test_code(tmp_path, monkeypatch):
    from trainlint.settings import is_test_code

    root = tmp_path / "tests" / "proj"
    root.mkdir(parents=True)
    assert not is_test_code(str(root / "train.py"), str(root))
    assert is_test_code(str(root / "tests" / "helpers.py"), str(root))
    assert is_test_code(str(root / "conftest.py"), str(root))
    monkeypatch.chdir(root)  # without a configuration: relative to the current directory
    assert not is_test_code(str(root / "train.py"), None)
    assert is_test_code(str(root / "tests" / "helpers.py"), None)


@pytest.mark.parametrize("name, body, key", [
    ("pyproject.toml", '[tool.trainlint]\nselect = "TL401"\n', "'select'"),
    ("trainlint.toml", 'selct = ["TL401"]\n', "'selct'"),
    ("pyproject.toml", '[tool.trainlint]\nselect = [\n', "invalid TOML"),
])
def test_a_nested_configuration_error_stops_only_its_own_files(tmp_path, name, body, key):
    """A configuration in error in a nested folder is reported once (its file and key, and how many
    files it left unchecked); its files are not checked, every other file is, and the run exits 2."""
    write(tmp_path / "pyproject.toml", '[tool.trainlint]\nselect = ["TL401"]\n')
    write(tmp_path / "top.py", BAD)
    write(tmp_path / "other" / "z.py", BAD)
    write(tmp_path / "vendored" / name, body)
    write(tmp_path / "vendored" / "x.py", BAD)
    write(tmp_path / "vendored" / "deeper" / "y.py", BAD)
    for args in (["."], ["top.py", "other/z.py", "vendored/x.py"]):
        done = trainlint("check", "--no-cache", "--format", "json", *args, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert sorted(path for path, _ in codes(done)) == [str(Path("other/z.py")), "top.py"]
        [line] = done.stderr.splitlines()
        assert line.startswith(f"trainlint: error: {tmp_path / 'vendored' / name}: ") and key in line
        assert line.endswith(f"({2 if args == ['.'] else 1} file{'s' if args == ['.'] else ''} it configures "
                             f"not checked)")
        assert json.loads(done.stdout)["files_checked"] == 2
