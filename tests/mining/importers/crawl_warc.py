"""Small WARC files written in the tests (warcio), with every kind of bad record an import must skip and count."""

from __future__ import annotations

import io
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

EN = (
    "The quick brown fox jumps over the lazy dog near the river bank. It was a sunny afternoon and everybody "
    "was outside enjoying the warm weather. Children played football in the park while their parents talked."
)
FR = (
    "Le renard brun rapide saute par-dessus le chien paresseux près de la rivière. C'était un après-midi "
    "ensoleillé et tout le monde était dehors pour profiter du beau temps. Les enfants jouaient au football."
)
DE = (
    "Der schnelle braune Fuchs springt über den faulen Hund am Flussufer. Es war ein sonniger Nachmittag und alle "
    "waren draußen, um das warme Wetter zu genießen. Die Kinder spielten im Park Fußball."
)


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
DATA = Path(__file__).resolve().parents[2] / "data" / "import"


def admin_pages() -> list[tuple[str, str]]:
    """Eight (English, French) page texts of five sentence pairs each, from the Django admin's translations."""
    lines = [line.split("\t") for line in (DATA / "admin-en-fr.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    pairs = [(en.strip(), fr.strip()) for en, fr in lines if en.strip() and fr.strip()]
    return [
        (" ".join(en for en, _ in pairs[i : i + 5]), " ".join(fr for _, fr in pairs[i : i + 5]))
        for i in range(0, 40, 5)
    ]


def page(title: str, text: str, *, nav: str = "Home | About | Contact", charset: str = "utf-8") -> str:
    """An HTML page with navigation, a cookie banner and a footer around its main text."""
    paras = "".join(f"<p>{p}</p>" for p in text.split("\n\n"))
    return (
        f'<html><head><meta charset="{charset}"><title>{title}</title></head><body>'
        f'<header><nav><a href="/">{nav}</a></nav></header><div class="cookie-banner">We use cookies.</div>'
        f"<main><article><h1>{title}</h1>{paras}</article></main>"
        "<footer>Copyright 2024 Example. All rights reserved.</footer></body></html>"
    )


class Warc:
    """Records written in order; `offsets` remembers where each URL's response starts."""

    def __init__(self, path: Path, *, gz: bool = True) -> None:
        self.path = path
        self.fh = path.open("wb")
        self.writer = WARCWriter(self.fh, gzip=gz)
        self.offsets: dict[str, int] = {}

    def response(
        self,
        url: str,
        body: bytes | str,
        *,
        ctype: str = "text/html; charset=utf-8",
        status: str = "200 OK",
        headers=(),
    ) -> None:
        if isinstance(body, str):
            body = body.encode("utf-8")
        http = StatusAndHeaders(status, [("Content-Type", ctype), *headers], protocol="HTTP/1.1")
        self.offsets.setdefault(url, self.fh.tell())
        self.writer.write_record(
            self.writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http)
        )

    def request(self, url: str) -> None:
        http = StatusAndHeaders("GET / HTTP/1.1", [("Host", url.split("/")[2])], is_http_request=True)
        self.writer.write_record(
            self.writer.create_warc_record(url, "request", payload=io.BytesIO(b""), http_headers=http)
        )

    def conversion(self, url: str, text: str) -> None:
        self.offsets.setdefault(url, self.fh.tell())
        record = self.writer.create_warc_record(
            url, "conversion", payload=io.BytesIO(text.encode()), warc_content_type="text/plain"
        )
        self.writer.write_record(record)

    def raw(self, data: bytes) -> None:
        """Bytes written as they are (damage between records)."""
        self.fh.write(data)

    def close(self) -> Path:
        self.fh.close()
        return self.path
