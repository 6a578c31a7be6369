"""Columns in the client's position encoding.

The engine's columns count code points (Python string indices). LSP counts UTF-16 code units by
default; a client may offer utf-8 or utf-32 instead, and pygls picks the client's first choice it
supports. Only lines holding non-ASCII text need converting.
"""

from __future__ import annotations

from lsprotocol import types


class Encoder:
    """Converts code-point columns of one document to and from the negotiated encoding."""

    def __init__(self, lines: list[str], encoding: str | None) -> None:
        self.lines = lines
        self.encoding = encoding or types.PositionEncodingKind.Utf16

    def _line(self, line: int) -> str:
        return self.lines[line] if 0 <= line < len(self.lines) else ""

    def to_client(self, line: int, character: int) -> types.Position:
        """A 0-based (line, code-point column) as an LSP position."""
        text = self._line(line)
        if self.encoding == types.PositionEncodingKind.Utf32 or text.isascii():
            return types.Position(line=line, character=character)
        prefix = text[:character]
        if self.encoding == types.PositionEncodingKind.Utf8:
            units = len(prefix.encode("utf-8", "surrogatepass"))
        else:
            units = len(prefix) + sum(1 for c in prefix if ord(c) > 0xFFFF)
        return types.Position(line=line, character=units + max(0, character - len(text)))

    def from_client(self, position: types.Position) -> tuple[int, int]:
        """An LSP position as a 0-based (line, code-point column); a split character rounds down."""
        text = self._line(position.line)
        if self.encoding == types.PositionEncodingKind.Utf32 or text.isascii():
            return position.line, position.character
        units = 0
        for index, char in enumerate(text):
            width = _width(char, self.encoding)
            if units + width > position.character:
                return position.line, index
            units += width
        return position.line, len(text)

    def range_to_client(self, line: int, character: int, end_line: int, end_character: int) -> types.Range:
        return types.Range(start=self.to_client(line, character), end=self.to_client(end_line, end_character))


def _width(char: str, encoding: str) -> int:
    if encoding == types.PositionEncodingKind.Utf8:
        return len(char.encode("utf-8", "surrogatepass"))
    return 2 if ord(char) > 0xFFFF else 1
