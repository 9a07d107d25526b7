"""A shard of a run (``--shard I/N``): the instances whose id hashes to I (1..N), stable
across machines and orderings, unlike the first N rows. The shards of a run share its run
directory."""
from __future__ import annotations

import hashlib
from typing import Iterator


def parse_shard(spec: str) -> tuple[int, int]:
    """``"2/4"`` -> (2, 4); the index counts from 1."""
    head, sep, tail = spec.partition("/")
    try:
        index, count = int(head), int(tail)
    except ValueError:
        index, count = 0, 0
    if not sep or count < 1 or not 1 <= index <= count:
        raise ValueError(f"{spec!r}: expected I/N with 1 <= I <= N, e.g. 1/4")
    return index, count


def shard_of(instance_id: str, count: int) -> int:
    """The shard (1..count) an instance belongs to: a hash of its id, so every machine
    computes the same split whatever order it reads the data in."""
    digest = hashlib.sha256(instance_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


class ShardedInstances:
    """The instances of one shard of a source (iterable, with a length)."""

    def __init__(self, source, index: int, count: int) -> None:
        self.source, self.index, self.count = source, index, count
        self._length: int | None = None

    def describe(self) -> dict:
        """The whole data's description: every shard's manifest names the same data, so
        shards share one run directory."""
        return self.source.describe()

    def __iter__(self) -> Iterator:
        return (i for i in self.source if shard_of(i.instance_id, self.count) == self.index)

    def __len__(self) -> int:
        if self._length is None:
            self._length = sum(1 for _ in self)
        return self._length
