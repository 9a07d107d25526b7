"""llama-cpp-python's own OpenAI-compatible server (``python -m llama_cpp.server``, its
``server`` extra) serving the embedded model's GGUF, for tests of the ``vllm:`` /
``local-server:`` path and of PrefMatcher's against a real server.

It is started with the workaround utils/models/smollm2.py applies to the embedded model:
weights in plain CPU buffers, not llama.cpp's extra buffer types (AMX tiles), whose first
matrix product kills the process in virtual machines that report AMX without enabling it.
``llama_cpp.server`` has no flag for this, so this script applies it and then runs the
server's own ``main`` with the same arguments:

    python tests/support/llama_cpp_server.py --model PATH --model_alias NAME --n_ctx 2048 --port 8001

``LlamaServer`` starts it on a free loopback port for a test and stops it afterwards.
"""
from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The server's own packages: llama-cpp-python and its `server` extra.
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context",
                  "pydantic_settings")


def missing_modules() -> list[str]:
    return [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    """``python tests/support/llama_cpp_server.py`` in a subprocess; ``openai_base_url`` once up."""

    def __init__(self, model_path: Path, alias: str, n_ctx: int, startup_timeout: float = 180.0):
        self.model_path = model_path
        self.alias = alias
        self.n_ctx = n_ctx
        self.startup_timeout = startup_timeout
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.log_path: Path | None = None

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, log_path: Path) -> "LlamaServer":
        self.log_path = log_path
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--model", str(self.model_path),
                 "--model_alias", self.alias, "--n_ctx", str(self.n_ctx), "--n_threads", "1",
                 "--n_threads_batch", "1", "--host", "127.0.0.1", "--port", str(self.port)],
                env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.process.returncode}: "
                                   f"{log_path.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.openai_base_url}/models", timeout=2) as answer:
                    json.loads(answer.read())
                    return self
            except (urllib.error.URLError, OSError, ValueError):
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {self.startup_timeout:.0f} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)


def main() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import llama_cpp.llama_cpp as llama_cpp_low_level
    from llama_cpp.server.__main__ import main as serve

    from cupid.utils.models.smollm2 import _without_extra_buffer_types

    # The server loads its model inside ``serve`` and keeps it: hold the workaround throughout.
    with _without_extra_buffer_types(llama_cpp_low_level):
        serve()


if __name__ == "__main__":
    main()
