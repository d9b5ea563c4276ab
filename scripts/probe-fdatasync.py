#!/usr/bin/env python3
"""fdatasync latency after writing through a shared mapping, after pwrite, and after pwrite over
blocks that were written (zeroed) before.

Writes N rounds of a 62 KiB chunk sequentially into a fresh fallocated file (as the commit-log
writer does per group commit), each followed by one fdatasync, and prints the fdatasync latency
percentiles for each way of writing. In "zeroed" mode the file is first filled with zeros and
synced, so the rounds overwrite written blocks instead of converting unwritten extents (which
costs the filesystem a journal commit per fdatasync). Usage: probe-fdatasync.py [DIR] [ROUNDS]
"""
import mmap
import os
import sys
import time

DIR = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
SIZE = 256 << 20
CHUNK = b"x" * 63488


def run(mode):
    path = os.path.join(DIR, f"probe-fdatasync-{os.getpid()}.bin")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.posix_fallocate(fd, 0, SIZE)
        m = mmap.mmap(fd, SIZE) if mode == "mmap" else None
        if mode == "zeroed":
            zeros = bytes(1 << 20)
            for at in range(0, SIZE, len(zeros)):
                os.pwrite(fd, zeros, at)
            os.fdatasync(fd)
        lat, off = [], 0
        for _ in range(ROUNDS):
            if m is not None:
                m[off:off + len(CHUNK)] = CHUNK
            else:
                os.pwrite(fd, CHUNK, off)
            off += len(CHUNK)
            t = time.perf_counter()
            os.fdatasync(fd)
            lat.append((time.perf_counter() - t) * 1e3)
        if m is not None:
            m.close()
    finally:
        os.close(fd)
        os.remove(path)
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(len(lat) * p))]
    print(f"{mode:6} fdatasync ms: p50 {pct(.5):.2f} p90 {pct(.9):.2f} p99 {pct(.99):.2f} "
          f"mean {sum(lat) / len(lat):.2f} ({ROUNDS} rounds of {len(CHUNK)} B)")


for mode in ("mmap", "pwrite", "zeroed", "mmap", "pwrite", "zeroed"):
    run(mode)
