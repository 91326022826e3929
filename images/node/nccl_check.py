# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl_check: NCCL all-reduce bus bandwidth of this node's GPUs (a program for GPU nodes).

Prints what nccl-tests' all_reduce_perf prints (the same columns), so one parser
(nodecheck.parse_allreduce_output) reads both. No CUDA toolkit and no compiler: NCCL and the
CUDA runtime are loaded with ctypes from the PyPI wheels nvidia-nccl-cu12 and
nvidia-cuda-runtime-cu12 of the Python that runs this file (only the NVIDIA driver comes from
the node). One process drives every visible GPU (ncclCommInitAll); float32 sum, out-of-place
then in-place, message sizes doubling from --min-bytes to --max-bytes.

The jail image carries a copy (images/build.sh stages it beside nodecheck.py); the long check
runs it on GPU nodes, so it imports nothing but the standard library:

    <python with the wheels> nccl_check.py [--min-bytes N] [--max-bytes N] [--iters N]
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import importlib.util
import os
import sys
import time
from typing import List, Sequence, Tuple

NCCL_FLOAT32 = 7  # ncclFloat32 in nccl.h
NCCL_SUM = 0  # ncclSum
CUDA_MEMCPY_DEVICE_TO_HOST = 2
FLOAT_BYTES = 4
FILL_BYTE = 0x3F  # every float is 0x3F3F3F3F (0.747...): a sum of n of them is known
CHECKED_FLOATS = 1024


def emit(line: str) -> None:
    """One line of output, as all_reduce_perf writes it."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class GpuError(RuntimeError):
    """A CUDA or NCCL call failed."""


def wheel_library(package: str, pattern: str) -> str:
    """Path of a shared library inside an installed nvidia-* wheel (nvidia/<x>/lib/<lib>)."""
    try:
        spec = importlib.util.find_spec(package)
    except ImportError:  # no nvidia.* package at all
        spec = None
    for base in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(glob.glob(os.path.join(base, "lib", pattern)))
        if found:
            return found[-1]
    raise GpuError("no %s in the %s wheel of %s (pip install %s)"
                   % (pattern, package, sys.executable, package.replace("nvidia.", "nvidia-").replace("_", "-")
                      + "-cu12"))


class Gpus:
    """The CUDA runtime and NCCL calls this program makes, checked."""

    def __init__(self) -> None:
        self.cuda = ctypes.CDLL(wheel_library("nvidia.cuda_runtime", "libcudart.so.*"))
        self.nccl = ctypes.CDLL(wheel_library("nvidia.nccl", "libnccl.so.*"))
        self.nccl.ncclGetErrorString.restype = ctypes.c_char_p
        self.cuda.cudaGetErrorString.restype = ctypes.c_char_p

    def cuda_call(self, name: str, *args: object) -> None:
        code = getattr(self.cuda, name)(*args)
        if code != 0:
            raise GpuError("%s: %s" % (name, self.cuda.cudaGetErrorString(code).decode()))

    def nccl_call(self, name: str, *args: object) -> None:
        code = getattr(self.nccl, name)(*args)
        if code != 0:
            raise GpuError("%s: %s" % (name, self.nccl.ncclGetErrorString(code).decode()))

    def count(self) -> int:
        value = ctypes.c_int()
        self.cuda_call("cudaGetDeviceCount", ctypes.byref(value))
        return value.value


class Rank:
    """One GPU: its communicator, stream and buffers."""

    def __init__(self, gpus: Gpus, device: int, comm: ctypes.c_void_p, max_bytes: int) -> None:
        self.gpus, self.device, self.comm = gpus, device, comm
        gpus.cuda_call("cudaSetDevice", device)
        self.stream = ctypes.c_void_p()
        gpus.cuda_call("cudaStreamCreate", ctypes.byref(self.stream))
        self.send, self.recv = ctypes.c_void_p(), ctypes.c_void_p()
        for buffer in (self.send, self.recv):
            gpus.cuda_call("cudaMalloc", ctypes.byref(buffer), ctypes.c_size_t(max_bytes))
        gpus.cuda_call("cudaMemset", self.send, FILL_BYTE, ctypes.c_size_t(max_bytes))

    def all_reduce(self, count: int, in_place: bool) -> None:
        source = self.recv if in_place else self.send
        self.gpus.nccl_call("ncclAllReduce", source, self.recv, ctypes.c_size_t(count), NCCL_FLOAT32, NCCL_SUM,
                            self.comm, self.stream)

    def synchronize(self) -> None:
        self.gpus.cuda_call("cudaSetDevice", self.device)
        self.gpus.cuda_call("cudaStreamSynchronize", self.stream)

    def wrong_values(self, count: int, expected: float) -> int:
        """Sampled result floats that are not the sum every rank contributed."""
        sample = min(count, CHECKED_FLOATS)
        host = (ctypes.c_float * sample)()
        self.gpus.cuda_call("cudaSetDevice", self.device)
        self.gpus.cuda_call("cudaMemcpy", host, self.recv, ctypes.c_size_t(sample * FLOAT_BYTES),
                            CUDA_MEMCPY_DEVICE_TO_HOST)
        return sum(1 for value in host if abs(value - expected) > 1e-3 * abs(expected))


def timed(ranks: Sequence[Rank], count: int, in_place: bool, iters: int, warmup: int) -> float:
    """Seconds per all-reduce over every rank (grouped: one thread drives all GPUs)."""
    gpus = ranks[0].gpus
    start = 0.0
    for index in range(warmup + iters):
        if index == warmup:
            for rank in ranks:
                rank.synchronize()
            start = time.perf_counter()
        gpus.nccl_call("ncclGroupStart")
        for rank in ranks:
            rank.all_reduce(count, in_place)
        gpus.nccl_call("ncclGroupEnd")
    for rank in ranks:
        rank.synchronize()
    return (time.perf_counter() - start) / iters


def refill(ranks: Sequence[Rank], size: int) -> None:
    """In-place runs overwrite recv: give it the send pattern again."""
    for rank in ranks:
        rank.gpus.cuda_call("cudaSetDevice", rank.device)
        rank.gpus.cuda_call("cudaMemset", rank.recv, FILL_BYTE, ctypes.c_size_t(size))


def measure(ranks: Sequence[Rank], size: int, iters: int, warmup: int) -> Tuple[float, ...]:
    """(time us, algbw, busbw, wrong) out-of-place then in-place, as all_reduce_perf reports."""
    count = size // FLOAT_BYTES
    n = len(ranks)
    one = ctypes.c_float.from_buffer_copy(bytes([FILL_BYTE] * FLOAT_BYTES)).value
    out: List[float] = []
    for in_place in (False, True):
        if in_place:
            refill(ranks, size)
        seconds = timed(ranks, count, in_place, 1 if in_place else iters, 0 if in_place else warmup)
        # The in-place result of one pass is checked; timing it again would sum sums.
        wrong = sum(rank.wrong_values(count, one * n) for rank in ranks)
        if in_place:
            refill(ranks, size)
            seconds = timed(ranks, count, True, iters, warmup)
        algbw = size / seconds / 1e9
        out += [seconds * 1e6, algbw, algbw * 2 * (n - 1) / n, wrong]
    return tuple(out)


def format_row(size: int, measured: Sequence[float]) -> str:
    """One all_reduce_perf row: size, count, type, redop, root, then time algbw busbw #wrong twice."""
    t1, a1, b1, w1, t2, a2, b2, w2 = measured
    return "%12d  %12d  %8s  %6s  %6d  %7.1f  %6.2f  %6.2f  %6d  %7.1f  %6.2f  %6.2f  %6d" % (
        size, size // FLOAT_BYTES, "float", "sum", -1, t1, a1, b1, w1, t2, a2, b2, w2)


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-bytes", type=int, default=1 << 20)
    parser.add_argument("--max-bytes", type=int, default=1 << 30)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args(list(argv) or None)
    try:
        gpus = Gpus()
        n = gpus.count()
        emit("# nccl_check nGpus %d minBytes %d maxBytes %d iters: %d warmup iters: %d"
             % (n, args.min_bytes, args.max_bytes, args.iters, args.warmup))
        if n < 2:
            emit("# all-reduce bus bandwidth needs at least 2 GPUs; this node has %d" % n)
            return 0
        comms = (ctypes.c_void_p * n)()
        devices = (ctypes.c_int * n)(*range(n))
        gpus.nccl_call("ncclCommInitAll", comms, n, devices)
        ranks = [Rank(gpus, d, ctypes.c_void_p(comms[d]), args.max_bytes) for d in range(n)]
        emit("#%60s%35s" % ("out-of-place", "in-place"))
        emit("#       size         count      type   redop    root     time   algbw   busbw #wrong"
             "     time   algbw   busbw #wrong")
        emit("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
             "     (us)  (GB/s)  (GB/s)       ")
        size, wrong_total, busbw_sum, rows = args.min_bytes, 0, 0.0, 0
        while size <= args.max_bytes:
            measured = measure(ranks, size, args.iters, args.warmup)
            emit(format_row(size, measured))
            wrong_total += int(measured[3] + measured[7])
            busbw_sum += measured[2] + measured[6]
            rows += 2
            size *= 2
        for comm in comms:
            gpus.nccl.ncclCommDestroy(ctypes.c_void_p(comm))
        emit("# Out of bounds values : %d %s" % (wrong_total, "OK" if not wrong_total else "FAILED"))
        emit("# Avg bus bandwidth    : %g" % (busbw_sum / max(rows, 1)))
    except (GpuError, OSError) as exc:
        emit("# nccl_check failed: %s" % exc)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
