"""Uploaded corpus files: streamed to the data folder under a size limit, zip folders unpacked safely."""

from __future__ import annotations

import shutil
import uuid
import zipfile
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload

from ..ingest.errors import ImportFailure


class SizeLimitUploadHandler(FileUploadHandler):
    """Stops reading an upload as soon as the request body passes the limit (a huge upload never lands on disk)."""

    def __init__(self, request=None, limit: int | None = None) -> None:
        super().__init__(request)
        self.limit = limit if limit is not None else settings.PCAPP_MAX_UPLOAD_BYTES
        self.seen = 0
        self.exceeded = False

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if content_length and content_length > self.limit + 1024 * 1024:
            self.exceeded = True
            raise StopUpload(connection_reset=True)

    def receive_data_chunk(self, raw_data: bytes, start: int):
        self.seen += len(raw_data)
        if self.seen > self.limit:
            self.exceeded = True
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size: int):
        return None


def save_uploads(files: list[UploadedFile], *, unzip: bool = False) -> list[str]:
    """Write uploads under PCAPP_DATA_DIR/uploads/<random>/ and return their paths (a zip: the unpacked folder)."""
    folder = Path(settings.PCAPP_DATA_DIR) / "uploads" / uuid.uuid4().hex
    folder.mkdir(parents=True)
    paths = []
    for i, f in enumerate(files):
        name = Path(f.name or f"upload-{i}").name
        target = folder / f"{i:02d}-{name}"
        with target.open("wb") as out:
            for chunk in f.chunks():
                out.write(chunk)
        paths.append(str(target))
    if unzip:
        return [str(unpack_zip(Path(paths[0]), folder / "folder"))]
    return paths


def unpack_zip(path: Path, dest: Path) -> Path:
    """Unpack a zip of documents, refusing paths outside `dest` and more than the upload limit uncompressed."""
    limit = settings.PCAPP_MAX_UPLOAD_BYTES
    try:
        with zipfile.ZipFile(path) as zf:
            members = [m for m in zf.infolist() if not m.is_dir()]
            total = sum(m.file_size for m in members)
            if total > limit:
                raise ImportFailure(f"unpacks to {total:,} bytes, over the limit of {limit:,}", path=path.name)
            for m in members:
                target = (dest / m.filename).resolve()
                if not target.is_relative_to(dest.resolve()):
                    raise ImportFailure(f"member '{m.filename}' points outside the folder", path=path.name)
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(m) as src, target.open("wb") as out:
                    shutil.copyfileobj(src, out)
    except zipfile.BadZipFile as exc:
        raise ImportFailure(f"not a valid zip file ({exc})", path=path.name) from None
    roots = [p for p in dest.iterdir()] if dest.exists() else []
    # A zip holding one top folder that is not a language folder: use it as the root.
    if len(roots) == 1 and roots[0].is_dir() and len(roots[0].name) > 3:
        return roots[0]
    return dest
