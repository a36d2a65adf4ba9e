"""Language codes the importers accept: ISO 639-1/2/3 codes Django knows plus ISO 639-1, with optional region or
script subtags (pt-BR, zh_Hant, sr-Latn)."""

from __future__ import annotations

import re

from django.conf.locale import LANG_INFO

from .errors import ImportFailure

_ISO_639_1 = set(
    "aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy da de dv dz ee el "
    "en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id ie ig ii ik io is it iu "
    "ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu lv mg mh mi mk ml mn mr ms mt my na "
    "nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se sg si sk sl sm sn so "
    "sq sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo za zh "
    "zu".split()
)
_EXTRA = {"fil", "ast", "hsb", "dsb", "kab", "udm", "tzm", "ckb", "yue", "haw", "sco", "nds", "mai", "sat", "chr"}
KNOWN = _ISO_639_1 | {code.split("-")[0] for code in LANG_INFO} | _EXTRA
MAX_CODE = 16  # the length of the lang columns (Document.lang, Sentence.lang)
_SHAPE = re.compile(r"^([A-Za-z]{2,3})(?:[-_]([A-Za-z]{4}|[A-Za-z]{2}|[0-9]{3}))*$")


def check_language(code: str, *, path: str | None = None) -> str:
    """Return `code` unchanged if it is a known language code, else raise an ImportFailure naming it."""
    match = _SHAPE.match(code or "")
    if not match or match.group(1).lower() not in KNOWN or len(code) > MAX_CODE:
        raise ImportFailure(f"unknown language code '{code}'", path=path)
    return code


def base_language(code: str) -> str:
    """'pt-BR' -> 'pt', 'zh_Hant' -> 'zh'."""
    return re.split(r"[-_]", code, maxsplit=1)[0].lower()
