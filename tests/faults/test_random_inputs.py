"""Property-style fault test: random byte strings, random token soups and random truncations of the valid sample
files (tests/data/import/) in every format, uploaded through the API and imported. Each one must end as a clear
error (an ImportFailure naming the problem, rows unchanged, upload removed) or a valid import (every row it reports
is stored), never a 500, an unexpected exception or a partial import. Seeded; PCAPP_FAULT_CASES cases per format
(default 24) keep it to seconds."""

from __future__ import annotations

import io
import logging
import os
import random
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from mining.models import Corpus, Document, GoldSentencePair, ImportJob, JobStatus, Sentence
from mining.services.imports import import_execute

from .conftest import DATA, counts

pytestmark = pytest.mark.django_db
CASES = int(os.environ.get("PCAPP_FAULT_CASES", "24"))

TOKENS = {
    "tsv": ["Hello", " world", ".", "\t", "\n", "\r\n", '"', "\\", "é", "\x00", "😀", "\u2028", " ", "\ufeff"],
    "moses": ["Hello", " world", ".", "\n", "\r\n", "\t", "é", "\x00", "😀", " ", "\ufeff"],
    "po": [
        'msgid "',
        'msgstr "',
        'msgstr[0] "',
        'msgctxt "',
        '"',
        "\\",
        '\\"',
        "\n",
        "#, fuzzy\n",
        "#~ ",
        "Hello",
        "Bonjour",
        '"Language: fr\\n"',
        "\x00",
        " ",
        "é",
    ],
    "tmx": [
        '<?xml version="1.0"?>',
        "<tmx>",
        "</tmx>",
        "<body>",
        "</body>",
        "<tu>",
        "</tu>",
        '<tuv xml:lang="en">',
        '<tuv xml:lang="de">',
        "</tuv>",
        "<seg>",
        "</seg>",
        "Hallo",
        "&amp;",
        "&bogus;",
        "<!DOCTYPE x [",
        "]>",
        '<!ENTITY e "ee">',
        "&e;",
        "\n",
        "<![CDATA[",
        "]]>",
    ],
    "jsonl": [
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        '"id"',
        '"lang"',
        '"en"',
        '"fr"',
        '"text"',
        '"sentences"',
        '"Hello. Hi."',
        "\n",
        "1e400",
        "NaN",
        "-0",
        '"\\u0000"',
        '"\\ud800"',
        "null",
        "true",
        "12345678901234567890",
        '"x"',
    ],
}
VALID = {
    "tsv": ["admin-en-fr.tsv", "html.tsv"],
    "moses": ["admin.en", "admin.fr"],
    "po": ["admin-fr.po"],
    "tmx": ["admin-en-de.tmx"],
    "jsonl": ["admin-docs.jsonl"],
}
LANGS = {"tsv": ("en", "fr"), "moses": ("en", "fr"), "tmx": ("en", "de"), "po": ("", ""), "jsonl": ("", "")}


def _valid_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted((DATA / "folder").rglob("*.txt")):
            zf.write(path, path.relative_to(DATA / "folder"))
    return buffer.getvalue()


def _mutations(rng: random.Random, fmt: str, valid: bytes) -> bytes:
    """One random input: raw bytes, a soup of the format's tokens, the valid file cut anywhere (and maybe damaged),
    cut after a line, or whole."""
    kind = rng.randrange(6)
    if kind == 0:
        return rng.randbytes(rng.randrange(0, 400))
    if kind == 1 and fmt in TOKENS:
        return "".join(rng.choice(TOKENS[fmt]) for _ in range(rng.randrange(1, 80))).encode("utf-8")
    if kind == 4:
        ends = [i + 1 for i, byte in enumerate(valid) if byte == 0x0A]
        return valid[: rng.choice(ends)] if ends else valid
    if kind == 5:
        return valid
    cut = valid[: rng.randrange(0, len(valid) + 1)]
    if kind == 3 and cut:
        pos = rng.randrange(len(cut))
        cut = cut[:pos] + bytes([rng.randrange(256)]) + cut[pos + 1 :]
    return cut


def _zip_of_damaged_documents(rng: random.Random) -> bytes:
    """A sound zip whose documents are damaged or misnamed (what the folder reader itself must refuse)."""
    buffer = io.BytesIO()
    names = ["en/a.txt", "fr/a.txt", "a.de.txt", "zz/a.txt", "notes.txt", "en/deep/b.txt", "__MACOSX/en/a.txt"]
    used: set[str] = set()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path in sorted((DATA / "folder").rglob("*.txt"))[: rng.randrange(1, 7)]:
            content = path.read_bytes()
            name = rng.choice(names) if rng.random() < 0.3 else str(path.relative_to(DATA / "folder"))
            if name in used:
                continue
            used.add(name)
            zf.writestr(name, _mutations(rng, "folder", content) if rng.random() < 0.5 else content)
    return buffer.getvalue()


def _files(rng: random.Random, fmt: str) -> list[SimpleUploadedFile]:
    if fmt == "folder":
        content = _zip_of_damaged_documents(rng) if rng.random() < 0.5 else _mutations(rng, fmt, _valid_zip())
        return [SimpleUploadedFile("docs.zip", content)]
    names = VALID[fmt]
    if fmt == "moses":
        keep = rng.randrange(2)  # one side intact, the other damaged
        return [
            SimpleUploadedFile(
                name, (DATA / name).read_bytes() if i == keep else _mutations(rng, fmt, (DATA / name).read_bytes())
            )
            for i, name in enumerate(names)
        ]
    name = rng.choice(names)
    return [SimpleUploadedFile(f"sample.{fmt}", _mutations(rng, fmt, (DATA / name).read_bytes()))]


def _left_on_disk(settings) -> list:
    root = settings.PCAPP_DATA_DIR / "uploads"
    return list(root.iterdir()) if root.exists() else []


@pytest.mark.parametrize("fmt", ["tsv", "moses", "po", "tmx", "jsonl", "folder"])
def test_random_and_truncated_inputs_end_as_a_clear_error_or_a_whole_import(
    fmt, staff_api, settings, caplog, django_capture_on_commit_callbacks
):
    settings.PCAPP_IMPORT_WORKERS = 0  # language id inline: no process pool per import
    rng = random.Random(f"pcapp-faults-{fmt}")
    outcomes = {"refused": 0, "failed": 0, "succeeded": 0}
    for case in range(CASES):
        files = _files(rng, fmt)
        src, tgt = LANGS.get(fmt, ("", ""))
        data = {"name": f"{fmt}-{case}", "format": fmt, "files": files}
        if src:
            data.update(src_lang=src, tgt_lang=tgt)
        before = counts()
        caplog.clear()
        with django_capture_on_commit_callbacks(execute=False):
            response = staff_api.post("/api/corpora/import/", data, format="multipart")
        assert response.status_code in (202, 400), (case, response.status_code, response.content[:500])
        if response.status_code == 400:
            outcomes["refused"] += 1
            message = response.content.decode()  # {"detail": ...} or the serializer's field errors (an empty file)
            assert response.json() and "uploads" not in message and str(settings.PCAPP_DATA_DIR) not in message
            assert counts() == before and not ImportJob.objects.filter(corpus_name=data["name"]).exists()
            assert not _left_on_disk(settings), case
            continue
        job = import_execute(job=ImportJob.objects.get(pk=response.json()["id"]))
        unexpected = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert not unexpected, (case, job.error, [r.getMessage() for r in unexpected])
        assert not _left_on_disk(settings), case
        if job.status == JobStatus.FAILED:
            outcomes["failed"] += 1
            assert job.error and "uploads" not in job.error and str(settings.PCAPP_DATA_DIR) not in job.error
            assert counts() == before, (case, job.error)
            continue
        assert job.status == JobStatus.SUCCEEDED, (case, job.status, job.error)
        outcomes["succeeded"] += 1
        corpus = Corpus.objects.get(name=data["name"])
        stored = Sentence.objects.filter(corpus=corpus)
        assert stored.count() == job.stats["sentences"] > 0
        assert Document.objects.filter(corpus=corpus).count() == job.stats["documents_written"]
        assert GoldSentencePair.objects.filter(corpus=corpus).count() == job.stats["gold_sentence_pairs"]
        assert max(len(t) for t in stored.values_list("text", flat=True)) <= settings.PCAPP_MAX_SENTENCE_CHARS
    # The seeded cases reach both ends: some inputs import, most are refused with a message.
    assert outcomes["failed"] + outcomes["refused"] > 0 and outcomes["succeeded"] > 0, outcomes
