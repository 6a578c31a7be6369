"""`trainlint trace`, the command: a plain trace, or `--resume-check`'s two runs and their
comparison (this module imports both `trace` and `resume`, which import only downwards)."""

from __future__ import annotations

import sys

from trainlint.runtime import resume as resume_module
from trainlint.sanitize import one_line, plain_text
from trainlint.runtime.trace import (EXIT_NO_STEP, Interrupted, TraceFailed, plain, render_json, render_text,
                                     trace_script)


_ERROR_LIMIT = 2000  # characters: a message may quote the script's own error, of any length


def _error(message: str, code: int = 2) -> int:
    text = plain(message)
    if len(text) > _ERROR_LIMIT:
        text = f"{text[:_ERROR_LIMIT * 3 // 4]} … {text[-_ERROR_LIMIT // 5:]} [{len(text):,} characters]"
    print(f"trainlint: error: {one_line(text)}", file=sys.stderr)
    return code


def command(script: str, args: list[str], max_steps: int, fmt: str, timeout: float,
            resume: tuple[int, int, str | None] | None = None) -> int:
    """`trainlint trace`: print the report; the exit code (see the module docstring)."""
    import importlib.util

    from trainlint.config import CliSelection, ConfigError, build_settings, resolve_config
    from trainlint.settings import SelectorError

    try:
        if importlib.util.find_spec("torch") is None:
            raise ImportError("torch")
    except (ImportError, ValueError):
        return _error("trainlint trace needs torch: pip install 'trainlint[runtime]'")
    try:
        settings = build_settings(resolve_config(None, False), CliSelection())
    except (ConfigError, SelectorError) as err:
        return _error(str(err))
    try:
        if resume is not None:
            k, m, resume_arg = resume
            report, result = resume_module.resume_check(script, args, k, m, resume_arg, settings, timeout)
        else:
            report, result = trace_script(script, args, max_steps, settings, timeout), None
    except TraceFailed as err:
        return _error(str(err))
    except Interrupted as err:
        return _error(f"interrupted by {err}: the traced script was stopped", 128 + err.signum)
    if result is not None:
        render = resume_module.render_json if fmt == "json" else resume_module.render_text
        text = render(report, result)
    else:
        text = render_json(report) if fmt == "json" else render_text(report)
    # the text names the script's files and quotes what it raised: escaped as all text output is
    sys.stdout.write(text if fmt == "json" else plain_text(text))
    sys.stdout.flush()
    if result is not None and not result.exact:
        return 1 if report.exit_code in (0, 1, EXIT_NO_STEP) else report.exit_code
    return report.exit_code
