"""The response cache at paper scale: one append-only file per process, read together.

    python benchmarks/cache_store.py --entries 75000 --writers 8

Writes ENTRIES answers of ~2 KB (a paper-scale run: 10 models x 756 instances x ~10 calls)
spread over WRITERS caches (processes or shards sharing a directory), then opens a fresh
reader as a new process would and prints: the write rate, the reader's first scan (indexing
every file), a hit's latency, a miss's latency (a miss re-scans the directory for lines
other processes appended), the index's memory, and the directory's size on disk.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from cupid.utils.models.cache import ResponseCache  # noqa: E402
from cupid.utils.models.request import Completion, Usage  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=75000)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--answer_bytes", type=int, default=2000)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="cache_store_")) / ".llm_cache"
    try:
        writers = [ResponseCache(directory) for _ in range(args.writers)]
        text = "x" * args.answer_bytes
        started = time.perf_counter()
        for i in range(args.entries):
            writers[i % args.writers].put(f"{i:064x}", Completion(text, Usage(3000, 200)))
        write_s = time.perf_counter() - started
        for writer in writers:
            writer.close()

        reader = ResponseCache(directory)
        started = time.perf_counter()
        assert reader.get(f"{0:064x}") is not None  # the first miss scans every file
        scan_s = time.perf_counter() - started
        tracemalloc.start()  # the index's memory, measured on a second reader
        other = ResponseCache(directory)
        assert other.get(f"{0:064x}") is not None
        index_bytes = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        other.close()

        n = 2000
        started = time.perf_counter()
        for i in range(0, args.entries, max(1, args.entries // n)):
            assert reader.get(f"{i:064x}").text == text
        hit_us = (time.perf_counter() - started) / n * 1e6
        started = time.perf_counter()
        for i in range(n):
            assert reader.get(f"absent-{i}") is None
        miss_us = (time.perf_counter() - started) / n * 1e6
        size = sum(p.stat().st_size for p in directory.iterdir())
        print(f"entries {args.entries} over {args.writers} files, answers {args.answer_bytes} B")
        print(f"write: {args.entries / write_s:,.0f} answers/s")
        print(f"a new process's first lookup (indexes every file): {scan_s:.2f} s")
        print(f"hit: {hit_us:.0f} us; miss (re-scans {args.writers} files): {miss_us:.0f} us")
        print(f"index memory: {index_bytes / 2**20:.1f} MiB; on disk: {size / 2**20:.1f} MiB")
        reader.close()
    finally:
        shutil.rmtree(directory.parent)


if __name__ == "__main__":
    main()
