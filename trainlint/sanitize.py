"""Text made safe to print: what a checked repository wrote never reaches the terminal or CI log raw.

Messages quote source code, `--show-source` prints source lines, warnings and errors name files:
all of it comes from the repository being checked. A string or comment holding `ESC ] 52 ; ...`
would write the reader's clipboard (OSC 52), set the window title or erase earlier lines (CSI),
and a Unicode bidi override (U+202E) reorders what the reader sees (Trojan Source). So every
control character is shown escaped, as Python writes it in a string (`\\x1b`, `\\u202e`):

- the C0 controls but tab (a newline only where the text keeps its lines), DEL and the C1 controls
  (U+0080-U+009F: a terminal may read U+009B as CSI);
- the bidi controls (U+061C, U+200E/F, U+202A-U+202E, U+2066-U+2069) and the line and paragraph
  separators (U+2028/9);
- lone surrogates (a file name that is not UTF-8, decoded with surrogateescape), which could not
  even be encoded for output.

A CI log is read by its runner too. GitHub Actions runs any line that starts with `::` after
leading whitespace as a workflow command (`::error file=...::`, `::add-mask::`, `::stop-commands::`)
and the legacy `##[command]` form anywhere in a line (Azure Pipelines does the same with `##vso[`).
`no_commands` makes such a line inert by escaping the character that starts the command.

JSON, SARIF and the LSP output need none of this: JSON escapes control characters itself and
keeps the exact text. The reporters and the CLI apply these functions to everything they print as
text; nothing here imports the rest of the package (the progress line and the language server may
use it too).
"""

from __future__ import annotations

import re
from functools import lru_cache

_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS = (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI, 0x2028, 0x2029, *range(0xD800, 0xE000))


def _escape(code: int) -> str:
    if code == 0x0A:
        return "\\n"
    if code == 0x0D:
        return "\\r"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


#: every control but tab, for str.translate; the second also keeps newlines
_ONE_LINE = {code: _escape(code) for code in _CONTROLS if code != 0x09}
_LINES = {code: text for code, text in _ONE_LINE.items() if code != 0x0A}
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
                     "\ud800-\udfff]")
#: a CR that ends a line (a CRLF file's diff) is kept with its LF: only a lone CR can overwrite
_CRLF = re.compile(r"\\r(?=\n)")

#: a line the GitHub runner reads as a command: `::` after leading whitespace (.NET's TrimStart)
_COMMAND_START = re.compile(r"^([^\S\n]*):(?=:)", re.MULTILINE)
#: the legacy `##[command]` (GitHub) and `##vso[...]` (Azure Pipelines) forms, anywhere in a line
_LEGACY_COMMAND = re.compile(r"##(?=\[|vso\[)", re.IGNORECASE)


def one_line(text: str) -> str:
    """`text` on one line, every control character escaped (a tab is kept: it moves the cursor
    only forwards). For a path, a message, a field of a report."""
    if not _UNSAFE.search(text):
        return text
    return text.translate(_ONE_LINE)


def escape_controls(text: str, keep: str) -> str:
    """`one_line`, but the characters of `keep` are left for the caller to escape its own way
    (GitHub's `%0D`/`%0A`)."""
    if not _UNSAFE.search(text):
        return text
    return text.translate(_table_keeping(keep))


@lru_cache(maxsize=None)
def _table_keeping(keep: str) -> dict[int, str]:
    return {code: escaped for code, escaped in _ONE_LINE.items() if chr(code) not in keep}


def keep_lines(text: str) -> str:
    """`text` with its line breaks (LF, and CR before LF) kept, every other control escaped."""
    if not _UNSAFE.search(text):
        return text
    return _CRLF.sub("\r", text.translate(_LINES))


def no_commands(text: str) -> str:
    """Each line of `text` made inert for a CI runner: a line that would start with `::` (after
    whitespace) gets its first colon escaped (`\\x3a:`), and `##[` or `##vso[` gets `#\\x23[`."""
    if "::" not in text and "##" not in text:
        return text
    text = _COMMAND_START.sub(r"\1\\x3a", text)
    return _LEGACY_COMMAND.sub(r"#\\x23", text)


def plain_text(text: str) -> str:
    """Free text of many lines (a diff, the settings, a warning): `keep_lines`, then `no_commands`."""
    return no_commands(keep_lines(text))
