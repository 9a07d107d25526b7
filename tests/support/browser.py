"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol, stdlib only.

The browser is started with ``--remote-debugging-pipe``: commands are JSON messages
separated by NUL bytes, written to its file descriptor 3 and read from its descriptor 4,
so no port is opened and no websocket library is needed.

    with Browser() as browser:
        browser.open(path)                       # file://, waits for the load event
        browser.wait_for("window.cupidReport.ready")
        browser.evaluate("document.title")
        browser.screenshot(path_png)
        browser.errors                           # console errors and uncaught exceptions
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    explicit = os.environ.get("CUPID_CHROMIUM")
    if explicit:
        return explicit
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, binary: str | None = None, width: int = 1400, height: int = 1000, timeout: float = 30.0):
        self.binary = binary or find_chromium()
        if not self.binary:
            raise BrowserError("no chromium found (apt-get install -y chromium, or set CUPID_CHROMIUM)")
        self.width, self.height, self.timeout = width, height, timeout
        self.errors: list[str] = []
        self.events: list[dict] = []
        self._next_id = 0
        self._pending: dict[int, dict] = {}
        self._cond = threading.Condition()
        self._closed = False
        self.session: str | None = None

    # -- process -------------------------------------------------------------------------
    def start(self) -> "Browser":
        self._profile = tempfile.mkdtemp(prefix="cupid-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire_fds() -> None:  # in the child: descriptors 3 and 4 are the protocol pipes
            high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)  # dup2 clears close-on-exec: the browser inherits 3 and 4
            os.dup2(high_w, 4)

        args = [self.binary, "--headless=new", "--remote-debugging-pipe", "--no-sandbox",
                "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--allow-file-access-from-files", "--hide-scrollbars",
                f"--user-data-dir={self._profile}", f"--window-size={self.width},{self.height}", "about:blank"]
        self.process = subprocess.Popen(args, preexec_fn=wire_fds, close_fds=False,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        targets = self.send("Target.getTargets")["targetInfos"]
        page = next((t for t in targets if t["type"] == "page"), None)
        target_id = page["targetId"] if page else self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target_id, "flatten": True})["sessionId"]
        for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.send(domain, session=True)
        self.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                         "deviceScaleFactor": 1, "mobile": False}, session=True)
        return self

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.send("Browser.close", timeout=5)
        except Exception:  # the browser may already be gone; it is killed below either way
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        os.close(self._to_browser)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- protocol --------------------------------------------------------------------------
    def _read(self) -> None:
        buffer = b""
        with os.fdopen(self._from_browser, "rb", buffering=0) as pipe:
            while True:
                data = pipe.read(1 << 16)
                if not data:
                    break
                buffer += data
                while b"\0" in buffer:
                    raw, buffer = buffer.split(b"\0", 1)
                    self._dispatch(json.loads(raw))
        with self._cond:
            self._cond.notify_all()

    def _dispatch(self, message: dict) -> None:
        with self._cond:
            if "id" in message:
                self._pending[message["id"]] = message
            else:
                self.events.append(message)
                self._note_error(message)
            self._cond.notify_all()

    def _note_error(self, message: dict) -> None:
        method, params = message.get("method"), message.get("params") or {}
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            text = (details.get("exception") or {}).get("description") or details.get("text")
            self.errors.append(f"exception: {text}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = [a.get("value", a.get("description", "")) for a in params.get("args", [])]
            self.errors.append("console.error: " + " ".join(map(str, args)))
        elif method == "Log.entryAdded" and (params.get("entry") or {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())

    def send(self, method: str, params: dict | None = None, *, session: bool = False,
             timeout: float | None = None) -> dict:
        with self._cond:
            self._next_id += 1
            message_id = self._next_id
        message = {"id": message_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode("utf-8") + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cond:
            while message_id not in self._pending:
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    raise BrowserError(f"{method}: no answer from chromium")
                self._cond.wait(min(left, 0.5))
            answer = self._pending.pop(message_id)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    # -- page ------------------------------------------------------------------------------
    def open(self, path: str | Path) -> float:
        """Load a file and wait for its load event; returns the seconds it took."""
        url = Path(path).resolve().as_uri() if not str(path).startswith(("file:", "about:")) else str(path)
        with self._cond:
            seen = len(self.events)
        started = time.monotonic()
        self.send("Page.navigate", {"url": url}, session=True)
        deadline = started + self.timeout
        with self._cond:
            while not any(e.get("method") == "Page.loadEventFired" for e in self.events[seen:]):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BrowserError(f"{url}: no load event within {self.timeout} s")
                self._cond.wait(min(left, 0.5))
        return time.monotonic() - started

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(f"{expression[:80]}: {(details.get('exception') or {}).get('description') or details.get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float | None = None) -> Any:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {expression}")
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        """A real mouse click at the element's centre (scrolled into view first)."""
        box = self.evaluate(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            if (!e) return null; e.scrollIntoView({{block: "center"}}); const r = e.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
        if box is None:
            raise BrowserError(f"no element {selector}")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                   "clickCount": 1}, session=True)

    def type_into(self, selector: str, text: str) -> None:
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.send("Input.insertText", {"text": text}, session=True)

    def viewport(self, width: int, height: int, mobile: bool = False) -> None:
        """Resize the page's viewport (``mobile``: a phone's touch layout and meta viewport)."""
        self.width, self.height = width, height
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1, "mobile": mobile}, session=True)

    def allow_downloads(self, directory: str | Path) -> Path:
        """Save what the page downloads (a click on an ``<a download>``) into ``directory``."""
        directory = Path(directory).resolve()
        directory.mkdir(parents=True, exist_ok=True)
        self.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(directory)})
        return directory

    def wait_for_file(self, path: str | Path, timeout: float | None = None) -> Path:
        """``path`` once a download has written it whole (Chromium renames it at the end)."""
        path, deadline = Path(path), time.monotonic() + (timeout or self.timeout)
        while not path.is_file():
            if time.monotonic() > deadline:
                raise BrowserError(f"no download {path.name} within the timeout")
            time.sleep(0.05)
        return path

    def screenshot(self, path: str | Path, full_page: bool = False) -> Path:
        params: dict = {"format": "png"}
        if full_page:
            size = self.send("Page.getLayoutMetrics", session=True)["cssContentSize"]
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": size["width"],
                                                           "height": min(size["height"], 8000), "scale": 1})
        data = self.send("Page.captureScreenshot", params, session=True)["data"]
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path
