"""Uploaded corpus files: streamed to the data folder under a size limit, zip folders unpacked safely, removed once
their import job has ended (the stored corpus is the record) or after PCAPP_UPLOAD_RETENTION_HOURS, and named in
messages by the names they were uploaded under, never by their path on the server."""

from __future__ import annotations

import re
import shutil
import time
import uuid
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import QueryDict
from django.utils.datastructures import MultiValueDict

from ..ingest.errors import ImportFailure
from ..models import ImportJob, JobStatus

# A request body may be this much longer than the limit for the form fields and multipart headers around the files.
BODY_OVERHEAD = 1024 * 1024
_UPLOAD_FOLDER = re.compile(r"[0-9a-f]{32}")


def upload_root() -> Path:
    return Path(settings.PCAPP_DATA_DIR) / "uploads"


def over_limit_message(limit: int) -> str:
    return f"The upload is over the limit of {limit:,} bytes (PCAPP_MAX_UPLOAD_BYTES)."


class SizeLimitUploadHandler(FileUploadHandler):
    """Stops reading an upload as soon as its files pass the limit, so an upload over it never lands on disk in
    full. A body whose declared length is over the limit by more than the form's overhead is not read at all: the
    request then has no fields and no files, and `exceeded` is set (the view answers with the form error or 413).
    Neither case raises out of the request's parsing."""

    def __init__(self, request=None, limit: int | None = None) -> None:
        super().__init__(request)
        self.limit = limit if limit is not None else settings.PCAPP_MAX_UPLOAD_BYTES
        self.seen = 0
        self.exceeded = False

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if content_length and content_length > self.limit + BODY_OVERHEAD:
            self.exceeded = True
            return QueryDict(encoding=encoding), MultiValueDict()
        return None

    def receive_data_chunk(self, raw_data: bytes, start: int):
        self.seen += len(raw_data)
        if self.seen > self.limit:
            self.exceeded = True
            raise StopUpload(connection_reset=True)  # caught by Django's parser: the rest of the body is not read
        return raw_data

    def file_complete(self, file_size: int):
        return None


@dataclass
class SavedUpload:
    """Files written under PCAPP_DATA_DIR/uploads/<random>/: the paths to import, and what each server path (a file,
    or the folder a zip was unpacked into) was called when uploaded."""

    folder: Path
    paths: list[str]
    names: dict[str, str] = field(default_factory=dict)

    def job_options(self) -> dict:
        """What the import job keeps to name the files and remove them when it ends."""
        return {"upload_dir": str(self.folder), "upload_names": self.names}

    def public(self, message: str) -> str:
        return public_message(message, self.names)

    def remove(self) -> None:
        remove_upload_dir(self.folder)


def save_uploads(files: list[UploadedFile], *, folder_zip: bool = False) -> SavedUpload:
    """Write uploads under PCAPP_DATA_DIR/uploads/<random>/. A zip of a folder (`folder_zip`) is only checked here
    (`check_zip`: its directory, not its contents); the import task unpacks it (`unpack_upload`), off the request.
    On any error the folder is removed again and an ImportFailure names the file as uploaded."""
    folder = upload_root() / uuid.uuid4().hex
    folder.mkdir(parents=True)
    upload = SavedUpload(folder, [])
    try:
        taken: set[str] = set()
        for i, f in enumerate(files):
            name = _unique(Path(f.name or f"upload-{i}").name or f"upload-{i}", taken)
            target = folder / f"{i:02d}-{name}"
            with target.open("wb") as out:
                for chunk in f.chunks():
                    out.write(chunk)
            upload.paths.append(str(target))
            upload.names[str(target)] = name
        if folder_zip:
            check_zip(Path(upload.paths[0]), label=upload.names[upload.paths[0]])
    except ImportFailure as exc:
        upload.remove()
        raise ImportFailure(upload.public(str(exc))) from None
    except BaseException:
        upload.remove()
        raise
    return upload


def _unique(name: str, taken: set[str]) -> str:
    """The upload's own name, or 'name (2)' when an earlier file of the same upload has it."""
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        stem, dot, ext = name.partition(".")
        candidate = f"{stem} ({n}){dot}{ext}"
    taken.add(candidate)
    return candidate


# What zipfile and zlib raise for a damaged, truncated, encrypted or exotic archive.
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError)


def check_zip(path: Path, *, label: str | None = None) -> list[zipfile.ZipInfo]:
    """The zip's file members, read from its directory only (milliseconds for tens of thousands of members): refused
    when it is no zip, has more than PCAPP_MAX_ZIP_MEMBERS members, unpacks to more than the upload limit or has a
    member whose path leaves the folder."""
    limit, most = settings.PCAPP_MAX_UPLOAD_BYTES, settings.PCAPP_MAX_ZIP_MEMBERS
    label = label or path.name
    try:
        with zipfile.ZipFile(path) as zf:
            members = [m for m in zf.infolist() if not m.is_dir()]
    except _ZIP_ERRORS as exc:
        raise ImportFailure(f"not a valid zip file ({exc})", path=label) from None
    if len(members) > most:
        raise ImportFailure(
            f"holds {len(members):,} files, over the limit of {most:,} (PCAPP_MAX_ZIP_MEMBERS)", path=label
        )
    total = sum(m.file_size for m in members)
    if total > limit:
        raise ImportFailure(f"unpacks to {total:,} bytes, over the limit of {limit:,}", path=label)
    for m in members:
        parts = Path(m.filename).parts
        if m.filename.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
            raise ImportFailure(f"member '{m.filename}' points outside the folder", path=label)
    return members


def unpack_upload(path: str, *, label: str | None = None) -> str:
    """The folder to import for a `folder` upload: a zip (as saved by save_uploads) is unpacked into `folder/` beside
    it (again, from scratch, on a re-run); a folder is itself."""
    zip_path = Path(path)
    if not zip_path.is_file():
        return path
    dest = zip_path.parent / "folder"
    shutil.rmtree(dest, ignore_errors=True)
    return str(unpack_zip(zip_path, dest, label=label))


def unpack_zip(path: Path, dest: Path, *, label: str | None = None) -> Path:
    """Unpack a zip of documents, refusing paths outside `dest` and more than the upload limit uncompressed; errors
    name the zip as `label` (its uploaded name)."""
    label = label or path.name
    dest.mkdir(parents=True, exist_ok=True)
    check_zip(path, label=label)
    try:
        with zipfile.ZipFile(path) as zf:
            members = [m for m in zf.infolist() if not m.is_dir()]
            for m in members:
                target = (dest / m.filename).resolve()
                if not target.is_relative_to(dest.resolve()) or target == dest.resolve():
                    raise ImportFailure(f"member '{m.filename}' points outside the folder", path=label)
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(m) as src, target.open("wb") as out:
                    shutil.copyfileobj(src, out)
    except _ZIP_ERRORS as exc:
        raise ImportFailure(f"not a valid zip file ({exc})", path=label) from None
    except OSError as exc:  # a member name the file system refuses (too long, a file where a folder must go)
        raise ImportFailure(f"cannot unpack member ({exc.strerror or exc})", path=label) from None
    roots = list(dest.iterdir())
    # A zip holding one top folder that is not a language folder: use it as the root.
    if len(roots) == 1 and roots[0].is_dir() and len(roots[0].name) > 3:
        return roots[0]
    return dest


def import_path_roots() -> list[Path]:
    """The folders an import may read files from by path (the API): PCAPP_DATA_DIR/crawls and
    PCAPP_IMPORT_PATH_ROOTS."""
    return [Path(settings.PCAPP_DATA_DIR) / "crawls", *(Path(p) for p in settings.PCAPP_IMPORT_PATH_ROOTS)]


def check_server_paths(paths: list[str]) -> list[str]:
    """The paths, resolved, when each is under one of `import_path_roots()`; ImportFailure naming the first that
    is not (so the API cannot read arbitrary files of the server)."""
    roots = [r.resolve() for r in import_path_roots()]
    out = []
    for raw in paths:
        path = Path(raw).resolve()
        if not any(path.is_relative_to(root) for root in roots):
            allowed = ", ".join(str(r) for r in roots)
            raise ImportFailure(
                f"is not under a folder imports may read from ({allowed}; PCAPP_IMPORT_PATH_ROOTS)", path=raw
            )
        out.append(str(path))
    return out


def public_message(message: str, names: dict[str, str]) -> str:
    """`message` with every server path of an upload replaced by the name it was uploaded under (a file inside an
    unpacked zip: 'docs.zip/en/a.txt'), and any other upload path cut down to what follows the upload's folder."""
    for server_path in sorted(names, key=len, reverse=True):
        message = message.replace(server_path, names[server_path])
    root = re.escape(str(upload_root()))
    return re.sub(rf"{root}/[0-9a-f]{{32}}/(?:folder/|\d\d-)?", "", message)


def remove_upload_dir(folder: str | Path | None) -> bool:
    """Delete one upload folder; anything that is not a folder directly under PCAPP_DATA_DIR/uploads is left alone."""
    if not folder:
        return False
    path = Path(folder)
    root = upload_root().resolve()
    if not (_UPLOAD_FOLDER.fullmatch(path.name) and path.resolve().parent == root and path.is_dir()):
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True


def job_upload_remove(*, job: ImportJob) -> bool:
    """Remove the upload an import job read, once the job has ended (its corpus, or its error, is the record)."""
    return remove_upload_dir((job.options or {}).get("upload_dir"))


def uploads_cleanup(*, older_than_hours: float | None = None, dry_run: bool = False) -> list[Path]:
    """Remove upload folders last changed more than `older_than_hours` ago (default PCAPP_UPLOAD_RETENTION_HOURS)
    that no pending or running import job still needs; returns the folders removed (or that would be)."""
    hours = settings.PCAPP_UPLOAD_RETENTION_HOURS if older_than_hours is None else older_than_hours
    root = upload_root()
    if not root.is_dir():
        return []
    in_use: set[str] = set()
    for options, paths in ImportJob.objects.filter(status__in=[JobStatus.PENDING, JobStatus.RUNNING]).values_list(
        "options", "paths"
    ):
        for p in [(options or {}).get("upload_dir") or "", *paths]:
            rel = Path(p).relative_to(root) if Path(p).is_relative_to(root) else None
            if rel is not None and rel.parts:
                in_use.add(rel.parts[0])
    cutoff = time.time() - hours * 3600
    removed = []
    for folder in sorted(root.iterdir()):
        if folder.name in in_use or not (_UPLOAD_FOLDER.fullmatch(folder.name) and folder.is_dir()):
            continue
        if folder.stat().st_mtime > cutoff:
            continue
        if dry_run or remove_upload_dir(folder):
            removed.append(folder)
    return removed
