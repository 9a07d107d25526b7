"""A real HTTP server on 127.0.0.1 that plays the Hugging Face hub for the real
``huggingface_hub`` and ``datasets`` libraries (point ``HF_ENDPOINT`` at ``base_url``).

It speaks the part of the hub's API that loading a dataset uses, as ``huggingface_hub``
reads it (``file_download.get_hf_file_metadata``, ``utils.hf_raise_for_status``,
``hf_api.dataset_info`` / ``list_repo_tree`` / ``get_paths_info``):

* ``GET /api/datasets/{repo}`` and ``/api/datasets/{repo}/revision/{rev}``: the repository's
  info at a revision (``sha`` is the commit, ``siblings`` its files);
* ``GET /api/datasets/{repo}/tree/{rev}[/{dir}]``: the files, with ``oid``, ``size`` and
  ``lfs`` for large files; ``POST /api/datasets/{repo}/paths-info/{rev}``: the same for
  the paths asked;
* ``HEAD|GET /datasets/{repo}/resolve/{rev}/{file}``: a small file itself with ``X-Repo-Commit``
  and ``ETag`` (its git blob id); a large file (``.parquet``, stored in LFS on the hub) a
  302 to ``{cdn_url}/cdn/{sha256}`` (another port: another origin) carrying ``X-Repo-Commit``,
  ``X-Linked-Etag`` (the sha256) and ``X-Linked-Size``, as the hub redirects to its CDN; the
  CDN honours ``Range``;
* errors the hub's way: 404 with ``X-Error-Code`` ``RepoNotFound``, ``RevisionNotFound``
  or ``EntryNotFound``; a gated repository answers file downloads 401 ``GatedRepo`` without
  a token and 403 with one it has not granted;
* the dataset viewer (``datasets-server.`` in front of the host, reached when the client
  uses this server as its HTTP proxy, ``proxy_env``): ``GET /info?dataset=`` answers 404,
  as for a dataset the viewer has not processed, so ``datasets`` reads the card.

``FakeHub().add_dataset(repo_id, files)`` commits files (``{path: bytes}``) on ``main`` and
returns the commit; ``gate(repo_id)``; ``cut_downloads_after(n)`` makes the next download
from ``/cdn/`` send ``n`` bytes of the body and the server then stop, as a hub lost
mid-download; ``break_api(how)`` answers every request but ``/`` (``files_only``: every
request for a file) with an HTTP 500 error page (``"500"``), a 200 whose body is not the
hub's (``"garbage"``), or nothing at all until the hub stops (``"hang"``); ``requests``
lists ``(method, path)`` received. ``start()``/``stop()``, or use
it as a context manager; ``start()`` after ``stop()`` serves again on the same port.
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_SUFFIXES = (".parquet", ".arrow")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def parquet_bytes(rows: list[dict], schema=None) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), buffer)
    return buffer.getvalue()


def dataset_card(split_files: dict[str, str], features_yaml: str = "") -> bytes:
    """A README.md whose YAML declares one config, ``default``, with these split files
    (the published kixlab/CUPID card: ``{"test": "test.parquet"}``)."""
    files = "".join(f"  - split: {split}\n    path: {path}\n" for split, path in split_files.items())
    return (f"---\nlicense: cc-by-4.0\n{features_yaml}configs:\n- config_name: default\n"
            f"  data_files:\n{files}---\n# A dataset served by tests/support/fake_hub.py\n").encode()


@dataclass
class _Repo:
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    gated: bool = False
    granted_tokens: set[str] = field(default_factory=set)


class FakeHub:
    def __init__(self):
        self.repos: dict[str, _Repo] = {}
        self.requests: list[tuple[str, str]] = []
        self._cut_after: int | None = None
        self.broken: str | None = None
        self.broken_files_only = False
        self._released = threading.Event()  # set by stop(): a hanging answer ends
        self._lock = threading.Lock()
        self._servers: list[ThreadingHTTPServer] = []
        self.port = self.cdn_port = 0

    # -- the repositories ------------------------------------------------------------------
    def add_dataset(self, repo_id: str, files: dict[str, bytes], branch: str = "main") -> str:
        """Commit ``files`` (the whole tree) on ``branch``; returns the commit's 40-hex id."""
        repo = self.repos.setdefault(repo_id, _Repo())
        digest = hashlib.sha1(repo_id.encode() + str(len(repo.commits)).encode())
        for path in sorted(files):
            digest.update(path.encode() + b"\0" + files[path])
        commit = digest.hexdigest()
        repo.commits[commit] = dict(files)
        repo.branches[branch] = commit
        return commit

    def gate(self, repo_id: str, granted_tokens: tuple[str, ...] = ()) -> None:
        self.repos[repo_id].gated = True
        self.repos[repo_id].granted_tokens = set(granted_tokens)

    def cut_downloads_after(self, n_bytes: int) -> None:
        self._cut_after = n_bytes

    def break_api(self, how: str | None, files_only: bool = False) -> None:
        """``files_only``: the API answers as it should; the files (``resolve``, the CDN) do not."""
        assert how in (None, "500", "garbage", "hang"), how
        self.broken, self.broken_files_only = how, files_only

    def _commit(self, repo: _Repo, revision: str) -> str | None:
        if revision in repo.branches:
            return repo.branches[revision]
        if re.fullmatch(r"[0-9a-f]{7,40}", revision):
            found = [c for c in repo.commits if c.startswith(revision)]
            return found[0] if len(found) == 1 else None
        return None

    # -- the server ------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def proxy_env(self) -> dict[str, str]:
        """Environment for a process whose hub is this one. 127.0.0.1 is reached directly (the
        hub, the CDN, a test's other loopback servers); any other host goes through this
        server as a proxy: plain HTTP to the dataset viewer (``datasets-server.127.0.0.1``,
        derived from HF_ENDPOINT) is answered here, so no name is looked up, and HTTPS is
        refused (this server does not tunnel), so nothing leaves the machine."""
        proxies = {name: self.base_url for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY",
                                                     "https_proxy", "ALL_PROXY", "all_proxy")}
        return {"HF_ENDPOINT": self.base_url, **proxies, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}

    @property
    def cdn_url(self) -> str:
        return f"http://127.0.0.1:{self.cdn_port}"

    def start(self) -> "FakeHub":
        hub = self

        class Handler(_Handler):
            fake = hub

        # The CDN on a port of its own: another origin, as the hub's is, so the client
        # stops at the hub's redirect and reads the file's metadata there.
        self._released.clear()
        for attribute in ("port", "cdn_port"):
            server = ThreadingHTTPServer(("127.0.0.1", getattr(self, attribute)), Handler)
            server.daemon_threads = True
            setattr(self, attribute, server.server_address[1])
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self._servers.append(server)
        return self

    def stop(self) -> None:
        self._released.set()
        servers, self._servers = self._servers, []
        for server in servers:
            server.shutdown()
            server.server_close()

    def _stop_soon(self) -> None:
        threading.Thread(target=self.stop, daemon=True).start()

    def __enter__(self) -> "FakeHub":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._route("HEAD")

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    # -- answers ---------------------------------------------------------------------------
    def _send(self, status: int, body: bytes = b"", headers: dict | None = None,
              content_type: str = "application/json", method: str = "GET") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(body)

    def _json(self, data, method: str = "GET", status: int = 200, headers: dict | None = None) -> None:
        self._send(status, json.dumps(data).encode(), headers, method=method)

    def _error(self, status: int, code: str | None, message: str, method: str, headers: dict | None = None) -> None:
        extra = {"X-Error-Message": message, **(headers or {})}
        if code:
            extra["X-Error-Code"] = code
        self._json({"error": message}, method, status, extra)

    # -- routing ---------------------------------------------------------------------------
    def _route(self, method: str) -> None:
        target = urllib.parse.urlsplit(self.path)
        host = target.hostname or ""  # set when the request came as to a proxy
        raw_path = target.path
        with self.fake._lock:
            self.fake.requests.append((method, (f"//{host}" if host.startswith("datasets-server.") else "") + raw_path))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if host.startswith("datasets-server."):
            return self._error(404, None, "The dataset viewer has not processed this dataset.", method)
        if raw_path in ("", "/"):
            return self._send(200, b"fake hub", content_type="text/plain", method=method)
        broken = self.fake.broken if not self.fake.broken_files_only or "/resolve/" in raw_path \
            or raw_path.startswith("/cdn/") else None
        if broken == "500":
            return self._send(500, b"<html><head><title>500 Internal Server Error</title></head><body><h1>Internal "
                              b"Server Error</h1><p>The server encountered an unexpected condition.</p></body></html>",
                              content_type="text/html", method=method)
        if broken == "garbage":
            return self._send(200, b"\x00\x9c<<not the hub>> " * 40, content_type="application/octet-stream",
                              method=method)
        if broken == "hang":
            self.fake._released.wait()
            self.close_connection = True
            return
        if raw_path.startswith("/cdn/"):
            return self._cdn(raw_path[len("/cdn/"):], method)
        parts = [urllib.parse.unquote(p) for p in raw_path.strip("/").split("/")]
        if parts[:2] == ["api", "datasets"] and len(parts) >= 4:
            repo_id, rest = "/".join(parts[2:4]), parts[4:]
            if not rest:
                return self._api(repo_id, "revision", "main", [], method, body)
            if len(rest) >= 2 and rest[0] in ("revision", "tree", "paths-info"):
                return self._api(repo_id, rest[0], rest[1], rest[2:], method, body)
        if parts[:1] == ["datasets"] and len(parts) >= 6 and parts[3] == "resolve":
            return self._resolve("/".join(parts[1:3]), parts[4], "/".join(parts[5:]), method)
        self._error(404, None, f"Not found: {raw_path}", method)

    def _repo_at(self, repo_id: str, revision: str, method: str) -> tuple[_Repo, str] | None:
        repo = self.fake.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found", method)
            return None
        commit = self.fake._commit(repo, revision)
        if commit is None:
            self._error(404, "RevisionNotFound", "Invalid rev id: " + revision, method)
            return None
        return repo, commit

    def _entry(self, path: str, data: bytes) -> dict:
        entry = {"type": "file", "oid": git_blob_id(data), "size": len(data), "path": path}
        if path.endswith(LFS_SUFFIXES):
            entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        return entry

    def _api(self, repo_id: str, kind: str, revision: str, rest: list[str], method: str, body: bytes) -> None:
        found = self._repo_at(repo_id, revision, method)
        if found is None:
            return
        repo, commit = found
        files = repo.commits[commit]
        if kind == "revision":
            return self._json({
                "_id": hashlib.md5(repo_id.encode()).hexdigest()[:24], "id": repo_id,
                "author": repo_id.split("/")[0], "sha": commit, "private": False,
                "gated": "manual" if repo.gated else False, "disabled": False, "tags": [],
                "downloads": 0, "likes": 0, "lastModified": "2025-08-01T00:00:00.000Z",
                "createdAt": "2025-08-01T00:00:00.000Z",
                "siblings": [{"rfilename": p} for p in sorted(files)]}, method)
        if kind == "tree":
            directory = "/".join(rest).strip("/")
            prefix = directory + "/" if directory else ""
            entries, folders = [], set()
            for path in sorted(files):
                if not path.startswith(prefix):
                    continue
                below = path[len(prefix):]
                if "/" in below:
                    folders.add(prefix + below.split("/")[0])
                else:
                    entries.append(self._entry(path, files[path]))
            if directory and not entries and not folders:
                return self._error(404, "EntryNotFound", f"{directory} does not exist on {revision}", method)
            return self._json([{"type": "directory", "oid": git_blob_id(f.encode()), "size": 0, "path": f}
                               for f in sorted(folders)] + entries, method)
        # paths-info: a form (paths=...&expand=...) or JSON body
        if self.headers.get("Content-Type", "").startswith("application/json"):
            asked = json.loads(body or b"{}").get("paths", [])
        else:
            asked = urllib.parse.parse_qs(body.decode()).get("paths", [])
        return self._json([self._entry(p, files[p]) for p in asked if p in files], method)

    def _resolve(self, repo_id: str, revision: str, path: str, method: str) -> None:
        found = self._repo_at(repo_id, revision, method)
        if found is None:
            return
        repo, commit = found
        token = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        if repo.gated and token not in repo.granted_tokens:
            if not token:
                return self._error(401, "GatedRepo", f"Access to dataset {repo_id} is restricted. You must "
                                   "have access to it and be authenticated to access it. Please log in.", method)
            return self._error(403, "GatedRepo", f"Access to dataset {repo_id} is restricted and you are "
                               "not in the authorized list.", method)
        files = repo.commits[commit]
        if path not in files:
            return self._error(404, "EntryNotFound", f"{path} does not exist on {revision}", method,
                               {"X-Repo-Commit": commit})
        data = files[path]
        headers = {"X-Repo-Commit": commit, "ETag": f'"{git_blob_id(data)}"', "Accept-Ranges": "bytes"}
        if path.endswith(LFS_SUFFIXES):
            sha256 = hashlib.sha256(data).hexdigest()
            headers.update({"X-Linked-Etag": f'"{sha256}"', "X-Linked-Size": str(len(data)),
                            "Location": f"{self.fake.cdn_url}/cdn/{sha256}"})
            return self._send(302, b"", headers, method=method)
        self._send(200, data, headers, "application/octet-stream", method)

    def _cdn(self, sha256: str, method: str) -> None:
        blobs = {hashlib.sha256(d).hexdigest(): d for repo in self.fake.repos.values()
                 for files in repo.commits.values() for d in files.values()}
        if sha256 not in blobs:
            return self._send(404, b"NoSuchKey", content_type="text/plain", method=method)
        data, start, status = blobs[sha256], 0, 200
        headers = {"ETag": f'"{sha256}"', "Accept-Ranges": "bytes"}
        asked = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if asked:
            start, end = int(asked.group(1)), int(asked.group(2) or len(data) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            data, status = data[start:end + 1], 206
        cut = self.fake._cut_after
        if cut is None or method == "HEAD":
            return self._send(status, data, headers, "application/octet-stream", method)
        # The hub is lost mid-download: part of the body, then nothing more.
        self.fake._cut_after = None
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data[:cut])
        self.wfile.flush()
        self.close_connection = True
        self.fake._stop_soon()
