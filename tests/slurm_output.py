"""Reading what Slurm commands and the MPI test program print, for the docker and k8s tiers alike."""

from __future__ import annotations

import re


def key_values(text: str) -> dict:
    """KEY=value words, as `scontrol show job|node -o` prints a record (values without blanks)."""
    return dict(re.findall(r"(\w+)=(\S*)", text))


def size_kib(size: str) -> int:
    """A size as sstat prints it ('123K', '4.5M', '0') in KiB."""
    match = re.fullmatch(r"([\d.]+)([KMGT]?)", size)
    assert match, size
    return int(float(match.group(1)) * 1024 ** "KMGT".index(match.group(2) or "K"))


def seconds(duration: str) -> float:
    """A duration as sstat and sacct print it ('1-02:03:04', '02:03:04', '03:04.567') in seconds."""
    match = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", duration)
    assert match, duration
    days, hours, minutes, secs = match.groups()
    return ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes)) * 60 + float(secs)


def mpi_ranks(output: str) -> dict:
    """rank -> {size, host, sum (of the allreduce)} from tests/data/mpi_hello.c's lines (a tty adds \\r)."""
    lines = re.findall(r"^rank (\d+) of (\d+) on (\S+) sum (\d+)\r?$", output, re.MULTILINE)
    return {int(r): {"size": int(n), "host": host, "sum": int(total)} for r, n, host, total in lines}
