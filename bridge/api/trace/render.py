"""Writing a trace: the JSON document and the one self-contained HTML page that renders it.

The page is ``page.html`` with the document inlined (no network, no CDN: it opens from
``file://`` or a CI artifact folder, and its Content-Security-Policy forbids every request).
Both files are written whole through a temporary file and a rename, so a reader never sees half.
"""

from __future__ import annotations

import html
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

from dsh_sidecar.bridge.api.trace.document import TraceDocument
from dsh_sidecar.bridge.api.trace.redact import Redactor

__all__ = ["json_path_of", "render_html", "write_trace"]

_PAGE = resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")


def json_path_of(html_path: Path) -> Path:
    """The JSON file beside a trace page: ``x.html`` → ``x.json``."""
    return html_path.with_suffix(".json") if html_path.suffix == ".html" else Path(f"{html_path}.json")


def render_html(document: Any, title: str) -> str:
    """The page for ``document`` (builtins, already scrubbed)."""
    # Inside <script>, "</" would end the element: JSON allows the escaped slash.
    data = msgspec.json.encode(document).decode().replace("</", "<\\/")
    return _PAGE.replace("__TITLE__", html.escape(title)).replace("__DATA__", data)


def write_trace(document: TraceDocument, redactor: Redactor, path: Path) -> Path:
    """Write ``path`` (the page) and its JSON beside it; returns the page's path."""
    clean = redactor.scrub(msgspec.to_builtins(document))
    path.parent.mkdir(parents=True, exist_ok=True)
    _write(json_path_of(path), msgspec.json.encode(clean))
    _write(path, render_html(clean, str(clean["title"])).encode())
    return path


def _write(path: Path, data: bytes) -> None:
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
