"""Building blocks of the self-contained HTML reports (evaluation and synthesis).

A page is one file: its styles and shared scripts come from ``utils/templates/`` (a page's
own script, such as the report's, from its package) and are inlined, figures become data
URIs, and bulky data travels as gzip-compressed chunks inside ``<script
type="application/octet-stream">`` elements that the page's script decodes
(``DecompressionStream``) only when a view needs them. Nothing is fetched.

A page with chunks is a windows-1252 document whose chunks hold the gzip bytes themselves
(one character per byte, four byte values escaped), a quarter smaller than base64: every
other character of the page is ASCII (HTML character references, ``\\u`` escapes in
the script, ``\\XXXX`` escapes in the style sheet).
"""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import Any, Iterable, Iterator

import deflate
import orjson
from markdown_it import MarkdownIt


TEMPLATES = Path(__file__).resolve().parent / "templates"


def template(name: str | Path) -> str:
    """A shared template by name (``report.css``), or a page's own script by its path."""
    return (name if isinstance(name, Path) else TEMPLATES / name).read_text(encoding="utf-8")


def esc(text: Any) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def script_json(value: Any) -> str:
    """JSON for a ``<script type="application/json">`` element that the page reads with
    ``JSON.parse``: every ``<``, ``>`` and ``&`` written as a JSON escape (``\\u003c``...), so
    no ``</script>`` or ``<!--`` in a text can end or change the element, and what the script
    parses is still JSON."""
    return orjson.dumps(value).decode("utf-8").replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def byte_text(data: bytes) -> str:
    """``data`` as the text of a windows-1252 <script> data block: one character per byte,
    except the bytes the HTML parser would change or that could end the element (NUL, CR,
    '<') and the escape byte itself, written as 0x01 followed by the byte + 0x40. report.js
    (``chunkBytes``) reverses it."""
    data = data.replace(b"\x01", b"\x01A").replace(b"\x00", b"\x01@").replace(b"\r", b"\x01M").replace(b"<", b"\x01|")
    return data.decode("latin-1")


def gzip_json(value: Any) -> str:
    """``value`` as JSON, gzip-compressed, as a chunk's text: the page inflates it on demand.
    orjson encodes a paper-scale report's ~75 MB of JSON in a sixth of the standard library's
    time (NaN becomes null). libdeflate at level 6 makes a member a little smaller than zlib's
    default level in a third of its time, and releases the GIL, so chunks compress on other
    threads while the page is assembled."""
    return byte_text(deflate.gzip_compress(orjson.dumps(value), 6))


def chunk_element(name: str, text: str) -> str:
    """A data chunk whose ``text`` ``gzip_json`` made."""
    return f'<script type="application/octet-stream" id="chunk-{esc(name)}">{text}</script>'


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
    """A PNG figure (the only kind the reports draw) as a data URI; None when there is none."""
    if path.suffix.lower() != ".png" or not path.is_file():
        return None
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _opening(charset: str, title: str, style: str, body: str, extra_head: str = "") -> str:
    """A document up to its body's end tag."""
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="{charset}">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{title}</title>\n<style>\n{style}\n</style>\n{extra_head}</head>\n<body>\n{body}\n")


def page(title: str, body: str, *, scripts: tuple[str | Path, ...] = (), extra_head: str = "") -> str:
    """A whole UTF-8 document: the shared stylesheet and the named scripts inlined."""
    code = "\n".join(template(name) for name in scripts)
    script = f"<script>\n{code}\n</script>" if code else ""
    return _opening("utf-8", esc(title), template("report.css"), body, extra_head) + f"{script}\n</body>\n</html>\n"


ANNOTATION_STYLE = """<style>
.task .entry { border-top: 1px solid var(--line); padding: 8px 0; }
.task fieldset { border: 0; padding: 0; margin: 4px 0; } .task label { margin-right: 14px; cursor: pointer; }
.nav { display: flex; flex-wrap: wrap; gap: 10px; align-items: center; margin: 10px 0; }
button.primary { background: var(--accent); color: #fff; border-color: var(--accent); }
button:disabled { opacity: 0.45; cursor: default; }
</style>
"""


def radios(name: str, options: Iterable[tuple[str, str]]) -> str:
    """An entry's radio buttons on an annotation page, ``(value, label)`` each."""
    return "".join(f'<label><input type="radio" name="{esc(name)}" value="{esc(value)}"> {esc(label)}</label>'
                   for value, label in options)


def annotation_page(title: str, header: str, tasks: Iterable[str], meta: dict, downloads: dict[str, tuple[str, str]],
                    *, extra_head: str = "", end: str = "") -> str:
    """A page of annotation tasks run by templates/annotate.js: ``header``, the tasks (hidden
    ``section.task`` elements whose ``.entry`` elements hold ``radios``), the navigation with
    the ``downloads`` (button id -> (the script's export, label)), then ``end``. ``meta`` tells
    the script the page's storage key (``page``), what an entry is called (``entry``), the
    saved files' ``file_prefix`` and ``format``."""
    buttons = "".join(f'<button type="button" id="{esc(key)}" data-download="{esc(kind)}">{esc(label)}</button>'
                      for key, (kind, label) in downloads.items())
    body = (f'{header}<main>{"".join(tasks)}<div class="nav"><button type="button" id="previous">Previous</button>'
            f'<button type="button" id="next" class="primary">Submit &amp; Next Task</button>{buttons}'
            f'<span id="status" class="muted"></span></div>{end}'
            f'<script type="application/json" id="annotation-page">{script_json(meta)}</script></main>')
    return page(title, body, scripts=("annotate.js",), extra_head=ANNOTATION_STYLE + extra_head)


def chunked_page(title: str, body: str, chunks: Iterable[str], *,
                 scripts: tuple[str | Path, ...] = ()) -> Iterator[str]:
    """A windows-1252 document in parts (write them with ``atomic_write_text(path, parts,
    "latin-1")``: one byte a character): ``body``, then the ``chunk_element`` strings, then
    the scripts. Text outside the chunks becomes ASCII."""
    yield _opening("windows-1252", _ascii_html(esc(title)), _ascii_css(template("report.css")), _ascii_html(body))
    yield from chunks
    code = _ascii_js("\n".join(template(name) for name in scripts))
    yield f"\n<script>\n{code}\n</script>\n</body>\n</html>\n" if code else "\n</body>\n</html>\n"


# ---------------------------------------------------------------------------------------
# report.md as HTML (markdown-it-py, CommonMark with tables; raw HTML and links stay text)
# ---------------------------------------------------------------------------------------
def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def markdown_to_html(text: str, image_dir: Path | None = None) -> tuple[str, list[tuple[int, str, str]]]:
    """HTML of ``text`` and its headings (level, id, title). An image alone in its paragraph
    is read from ``image_dir`` and inlined as a figure; a missing one is said to be missing."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table").disable(["link", "autolink"])
    headings: list[tuple[int, str, str]] = []

    def heading_open(tokens, idx, options, env) -> str:
        level, title = int(tokens[idx].tag[1]), tokens[idx + 1].content
        anchor, used = slug(title), {a for _, a, _ in headings}
        while anchor in used:
            anchor += "-x"
        headings.append((level, anchor, title))
        return f'<h{level} id="{anchor}">'

    def lone_image(inline) -> bool:
        return [c.type for c in inline.children or ()] == ["image"]

    def image(tokens, idx, options, env) -> str:
        alt, src = tokens[idx].content, tokens[idx].attrGet("src")
        if len(tokens) > 1:  # an image inside text: its words only
            return esc(alt)
        uri = data_uri(image_dir / src) if image_dir is not None else None
        return (f'<figure><img alt="{esc(alt)}" src="{uri}"></figure>' if uri
                else f'<p class="note">Figure {esc(src)} not found beside report.md.</p>')

    default = md.renderer.renderToken
    md.renderer.rules.update(
        heading_open=heading_open, image=image,
        paragraph_open=lambda tokens, idx, *args: "" if lone_image(tokens[idx + 1]) else default(tokens, idx, *args),
        paragraph_close=lambda tokens, idx, *args: "\n" if lone_image(tokens[idx - 1]) else default(tokens, idx, *args),
        table_open=lambda *_: '<div class="table-wrap"><table class="md">',
        table_close=lambda *_: "</table></div>\n",
        tr_open=lambda tokens, idx, *_: '<tr class="paper">' if tokens[idx + 2].content.startswith("↳") else "<tr>",
        fence=lambda tokens, idx, *_: (f'<div class="code-block"><pre><code>{esc(tokens[idx].content.rstrip())}'
                                       f'</code></pre><button type="button" class="copy">Copy</button></div>\n'))
    return md.render(text), headings
