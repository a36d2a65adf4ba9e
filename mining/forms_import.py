"""The corpus upload form."""

from __future__ import annotations

from django import forms

from .models import ImportJob


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one field (Django's documented pattern)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(d, initial) for d in data]
        return [single(data, initial)]


class ImportForm(forms.Form):
    name = forms.CharField(max_length=200, label="Corpus name")
    format = forms.ChoiceField(choices=ImportJob.Format.choices)
    files = MultipleFileField(
        help_text="TSV/TMX/PO/JSONL: one or more files. Moses: the source file, then the target file. "
        "Folder: a .zip of language folders (en/..., fr/...) or NAME.LANG.txt files. "
        "Web crawl: WARC, WARC.gz or Common Crawl WET files; saved HTML pages: one .zip of the folder."
    )
    src_lang = forms.CharField(
        max_length=16,
        required=False,
        label="Source language",
        help_text="Aligned formats (TSV, Moses, TMX, PO; PO defaults to en).",
    )
    tgt_lang = forms.CharField(
        max_length=16,
        required=False,
        label="Target language",
        help_text="Aligned formats (PO: from the file's Language header when empty).",
    )
    header = forms.BooleanField(required=False, label="TSV: first line is a header")
    into = forms.BooleanField(required=False, label="Add to the existing corpus of this name")
    extractor = forms.ChoiceField(
        choices=[("resiliparse", "resiliparse (default, fast)"), ("trafilatura", "trafilatura")],
        required=False,
        label="Web crawl: main-text extractor",
    )

    def clean(self):
        data = super().clean()
        fmt, files = data.get("format"), data.get("files") or []
        if fmt == ImportJob.Format.MOSES and len(files) != 2:
            self.add_error("files", "Moses needs exactly two files: source, then target.")
        zipped = (ImportJob.Format.FOLDER, ImportJob.Format.HTML)
        if fmt in zipped and (len(files) != 1 or not files[0].name.lower().endswith(".zip")):
            self.add_error("files", "Upload the folder as one .zip file.")
        if fmt in ("tsv", "moses", "tmx") and not (data.get("src_lang") and data.get("tgt_lang")):
            self.add_error("src_lang", "Aligned formats need both languages.")
        return data

    def options(self) -> dict:
        d = self.cleaned_data
        opts: dict = {"into": d["into"]}
        for key in ("src_lang", "tgt_lang"):
            if d.get(key):
                opts[key] = d[key]
        if d["format"] == ImportJob.Format.TSV:
            opts["header"] = d["header"] or None
        if d["format"] in (ImportJob.Format.WARC, ImportJob.Format.HTML) and d.get("extractor"):
            opts["extractor"] = d["extractor"]
        return opts
