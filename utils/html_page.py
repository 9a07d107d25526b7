"""Building blocks of the self-contained HTML reports (evaluation and synthesis).

A page is one file: its styles and scripts come from ``utils/templates/`` and are
inlined, figures become data URIs, and bulky data travels as gzip-compressed chunks inside
``<script type="application/octet-stream">`` elements that the page's script decodes
(``DecompressionStream``) only when a view needs them. Nothing is fetched.

A page with chunks is a windows-1252 document whose chunks hold the gzip bytes themselves
(one character per byte, four byte values escaped), a quarter smaller than base64: every
other character of the page is ASCII (HTML character references, ``\\u`` escapes in
the script, ``\\XXXX`` escapes in the style sheet).
"""
from __future__ import annotations

import base64
import gzip
import html
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from cupid.utils.io import temporary_prefix

try:
    import deflate as _libdeflate
except ImportError:  # an optional speed-up: zlib makes the same format
    _libdeflate = None

TEMPLATES = Path(__file__).resolve().parent / "templates"


def template(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def esc(text: Any) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def script_json(value: Any) -> str:
    """JSON safe inside a <script> element (no '</' can close it)."""
    return compact_json(value).replace("</", "<\\/").replace("<!--", "<\\!--")


def byte_text(data: bytes) -> str:
    """``data`` as the text of a windows-1252 <script> data block: one character per byte,
    except the bytes the HTML parser would change or that could end the element (NUL, CR,
    '<') and the escape byte itself, written as 0x01 followed by the byte + 0x40. report.js
    (``chunkBytes``) reverses it."""
    data = data.replace(b"\x01", b"\x01A").replace(b"\x00", b"\x01@").replace(b"\r", b"\x01M").replace(b"<", b"\x01|")
    return data.decode("latin-1")


def text_bytes(text: str) -> bytes:
    """The inverse of ``byte_text`` (report.js's ``chunkBytes``, in Python)."""
    return re.sub(b"\x01(.)", lambda m: bytes([m.group(1)[0] - 0x40]), text.encode("latin-1"), flags=re.S)


def read_chunk(text: str) -> Any:
    """A chunk's value back from its text (for tests and tools; the page does the same)."""
    return json.loads(gzip.decompress(text_bytes(text)).decode("utf-8"))


def gzip_bytes(raw: bytes) -> bytes:
    """``raw`` as a gzip member. libdeflate (the ``deflate`` package) at level 6 makes a
    member a little smaller than zlib's default level in a third of its time (a paper-scale
    report compresses ~75 MB of JSON: ~1.8 s of CPU saved); its level 8 would save 2.5% of
    the bytes for most of that time back. zlib at level 6 where libdeflate is not installed.
    Both release the GIL, so chunks compress on other threads while the page is assembled."""
    if _libdeflate is not None:
        return _libdeflate.gzip_compress(raw, 6)
    return gzip.compress(raw, compresslevel=6, mtime=0)


def gzip_chunk(value: Any) -> str:
    """``value`` as JSON, gzip-compressed, as a chunk's text: the page inflates it on demand."""
    return gzip_text(compact_json(value))


def gzip_text(text: str) -> str:
    """``text`` (JSON), gzip-compressed, as a chunk's text."""
    return byte_text(gzip_bytes(text.encode("utf-8")))


def chunk_element(name: str, value: Any = None, *, text: str | None = None) -> str:
    """A data chunk: ``value`` encoded here, or ``text`` already made by ``gzip_text``."""
    body = gzip_chunk(value) if text is None else text
    return f'<script type="application/octet-stream" id="chunk-{esc(name)}">{body}</script>'


def _ascii_html(text: str) -> str:
    return text.encode("ascii", "xmlcharrefreplace").decode("ascii")


def _ascii_js(code: str) -> str:
    def escape(match: re.Match) -> str:
        units = match.group(0).encode("utf-16-be")
        return "".join(f"\\u{int.from_bytes(units[k:k + 2], 'big'):04x}" for k in range(0, len(units), 2))
    return re.sub(r"[^\x00-\x7f]", escape, code)


def _ascii_css(css: str) -> str:
    return re.sub(r"[^\x00-\x7f]", lambda m: f"\\{ord(m.group(0)):x} ", css)


def data_uri(path: Path) -> str | None:
    kinds = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
    kind = kinds.get(path.suffix.lower())
    if kind is None or not path.is_file():
        return None
    return f"data:{kind};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def page(title: str, body: str, *, scripts: tuple[str, ...] = (), extra_head: str = "") -> str:
    """A whole UTF-8 document: the shared stylesheet and the named scripts inlined."""
    style = template("report.css")
    code = "\n".join(template(name) for name in scripts)
    script = f"<script>\n{code}\n</script>" if code else ""
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{esc(title)}</title>\n<style>\n{style}\n</style>\n{extra_head}</head>\n"
            f"<body>\n{body}\n{script}\n</body>\n</html>\n")


def chunked_page(title: str, body: str, chunks: Iterable[str], *, scripts: tuple[str, ...] = ()) -> Iterator[str]:
    """A windows-1252 document in parts (write them with ``write_page``): ``body``, then the
    ``chunk_element`` strings, then the scripts. Text outside the chunks becomes ASCII."""
    style = _ascii_css(template("report.css"))
    code = _ascii_js("\n".join(template(name) for name in scripts))
    yield (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="windows-1252">\n'
           f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
           f"<title>{_ascii_html(esc(title))}</title>\n<style>\n{style}\n</style>\n</head>\n"
           f"<body>\n{_ascii_html(body)}\n")
    yield from chunks
    yield f"\n<script>\n{code}\n</script>\n</body>\n</html>\n" if code else "\n</body>\n</html>\n"


def write_page(path: str | Path, parts: Iterable[str]) -> Path:
    """Write ``chunked_page`` parts to ``path`` (latin-1: one byte per character) through a
    temporary file in the same directory, so a reader never sees half a page."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=temporary_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="latin-1", newline="") as handle:
            for part in parts:
                handle.write(part)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


# ---------------------------------------------------------------------------------------
# The subset of Markdown that report.md uses
# ---------------------------------------------------------------------------------------
_IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<src>[^)]+)\)\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def inline(text: str) -> str:
    """Escape, then `code` and **bold**."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for part in parts:
        if len(part) >= 2 and part.startswith("`") and part.endswith("`"):
            out.append(f"<code>{esc(part[1:-1])}</code>")
        else:
            out.append(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", esc(part)))
    return "".join(out)


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def _table(lines: list[str]) -> str:
    header = _cells(lines[0])
    rows = [_cells(line) for line in lines[2:]] if len(lines) > 1 and set(lines[1].replace("|", "").strip()) <= set("-: ") \
        else [_cells(line) for line in lines[1:]]
    head = "".join(f"<th>{inline(c)}</th>" for c in header)
    body = []
    for row in rows:
        cls = ' class="paper"' if row and row[0].startswith("↳") else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{inline(c)}</td>" for c in row) + "</tr>")
    return (f'<div class="table-wrap"><table class="md"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def markdown_to_html(text: str, image_dir: Path | None = None) -> tuple[str, list[tuple[int, str, str]]]:
    """HTML of ``text`` and its headings (level, id, title). Images named in the text are
    read from ``image_dir`` and inlined; a missing one is said to be missing."""
    out: list[str] = []
    headings: list[tuple[int, str, str]] = []
    used: set[str] = set()
    lines = text.splitlines()
    i = 0
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            out.append(f"<p>{inline(' '.join(paragraph))}</p>")
            paragraph.clear()

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            flush()
            i += 1
            continue
        if stripped.startswith("```"):
            flush()
            i += 1
            block = []
            while i < len(lines) and not lines[i].strip().startswith("```"):
                block.append(lines[i])
                i += 1
            i += 1
            indent = min((len(b) - len(b.lstrip()) for b in block if b.strip()), default=0)
            code = esc("\n".join(b[indent:] for b in block))
            out.append(f'<div class="code-block"><pre><code>{code}</code></pre>'
                       f'<button type="button" class="copy">Copy</button></div>')
            continue
        heading = _HEADING.match(stripped)
        if heading:
            flush()
            level, title = len(heading.group(1)), heading.group(2)
            anchor = slug(title)
            while anchor in used:
                anchor += "-x"
            used.add(anchor)
            headings.append((level, anchor, title))
            out.append(f'<h{level} id="{anchor}">{inline(title)}</h{level}>')
            i += 1
            continue
        if stripped.startswith("|"):
            flush()
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append(lines[i])
                i += 1
            out.append(_table(block))
            continue
        if stripped.startswith("- "):
            flush()
            items = []
            while i < len(lines) and lines[i].strip().startswith("- "):
                items.append(f"<li>{inline(lines[i].strip()[2:])}</li>")
                i += 1
            out.append(f"<ul>{''.join(items)}</ul>")
            continue
        image = _IMAGE.match(stripped)
        if image:
            flush()
            src = image.group("src")
            uri = data_uri(image_dir / src) if image_dir is not None else None
            if uri:
                out.append(f'<figure><img alt="{esc(image.group("alt"))}" src="{uri}"></figure>')
            else:
                out.append(f'<p class="note">Figure {esc(src)} not found beside report.md.</p>')
            i += 1
            continue
        paragraph.append(stripped)
        i += 1
    flush()
    return "\n".join(out), headings
