"""Memory bandwidth of this machine, measured the way decoding uses it.

Decoding one token reads every weight once (a matrix-vector product per layer),
so the roofline is read bandwidth. Two probes, both with torch's own threads (the
ones decoding uses), on arrays far larger than any CPU cache:

- ``read``: ``torch.sum`` of a large fp32 tensor (bytes read ÷ time);
- ``copy``: ``dst.copy_(src)`` (bytes read + bytes written ÷ time).

The roofline uses the larger of the two medians, so an optimistic bandwidth makes
the decode fraction conservative.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Bandwidth:
    read_gbs: float  # median GB/s (1e9 bytes) of the read probe
    copy_gbs: float  # median GB/s of the copy probe (read + write bytes)
    size_mb: int
    repeats: int

    @property
    def best_gbs(self) -> float:
        return max(self.read_gbs, self.copy_gbs)

    def to_dict(self) -> dict:
        return {**asdict(self), "best_gbs": self.best_gbs}


def measure_bandwidth(size_mb: int = 512, repeats: int = 7, device: str = "cpu") -> Bandwidth:
    """Median read and copy bandwidth over ``repeats`` passes of a ``size_mb`` MB array."""
    import torch

    numel = size_mb * 2**20 // 4
    src = torch.ones(numel, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    nbytes = src.numel() * src.element_size()

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    def timed(fn) -> float:
        sync()
        start = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - start

    timed(lambda: dst.copy_(src))  # first touch: page faults are not bandwidth
    timed(lambda: src.sum())
    reads = [nbytes / timed(lambda: src.sum()) for _ in range(repeats)]
    copies = [2 * nbytes / timed(lambda: dst.copy_(src)) for _ in range(repeats)]
    return Bandwidth(
        read_gbs=round(statistics.median(reads) / 1e9, 2),
        copy_gbs=round(statistics.median(copies) / 1e9, 2),
        size_mb=size_mb,
        repeats=repeats,
    )
