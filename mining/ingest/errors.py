"""Import errors that name the problem: the file and the line or element where it is."""

from __future__ import annotations


class ImportFailure(Exception):
    """A corpus file cannot be imported; the message says which file, where, and why."""

    def __init__(
        self, message: str, *, path: str | None = None, line: int | None = None, element: str | None = None
    ) -> None:
        where = []
        if path:
            where.append(f"file '{path}'")
        if line is not None:
            where.append(f"line {line}")
        if element:
            where.append(element)
        self.path, self.line, self.element = path, line, element
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


def decode_line(raw: bytes, path: str, line_no: int) -> str:
    """Strict UTF-8 decoding of one line, naming the file and line of any bad bytes or NUL character (which the
    database cannot store)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.end]
        raise ImportFailure(
            f"bytes {bad!r} at column {exc.start + 1} are not valid UTF-8 (save the file as UTF-8)",
            path=path,
            line=line_no,
        ) from None
    if "\x00" in text:
        raise ImportFailure(
            f"a NUL character (\\x00) at column {text.index(chr(0)) + 1}, which the database cannot store "
            "(is it a binary file?)",
            path=path,
            line=line_no,
        )
    return text


def too_long(what: str, n_chars: int, limit: int) -> str:
    """The message for text over PCAPP_MAX_SENTENCE_CHARS."""
    return f"{what} is {n_chars:,} characters, over the limit of {limit:,} per sentence (PCAPP_MAX_SENTENCE_CHARS)"
