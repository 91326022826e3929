"""The jail's usage as `du` counts it, for the exporter beside it (spec.exporter).

A storage class that does not enforce a claim's size (hostPath-like and many NFS provisioners)
lets the jail outgrow its claim while statvfs shows the host's filesystem: only a count of what the
jail holds tells. Every SLURMKUBE_JAIL_USAGE_INTERVAL seconds this walks the jail, read-only, and
writes JSON for the exporter (atomically, to the pod's shared directory): the bytes allocated to
every file (hard links counted once, symbolic links never followed, no other filesystem entered)
in all and per directory of /home (each user's home). It runs as root with CAP_DAC_READ_SEARCH
alone: it reads every user's directories and can change nothing.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from typing import Dict, List, Optional, Set, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

Inode = Tuple[int, int]


def measure(jail: str) -> Dict[str, object]:
    """The jail's usage now, one walk: in all, and each home's (the directories of <jail>/home).
    A file is counted where the walk first meets it (a hard link between two homes, once)."""
    started = time.time()
    device = os.lstat(jail).st_dev
    home_dir = os.path.join(jail, "home")
    seen: Set[Inode] = set()
    total = 0
    homes: Dict[str, int] = {}
    pending: List[Tuple[str, Optional[str]]] = [(jail, None)]
    while pending:
        path, home = pending.pop()
        try:
            info = os.lstat(path)
        except OSError:  # gone meanwhile, or unreadable: du skips it too
            continue
        if info.st_dev != device:
            continue
        if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
        size = info.st_blocks * 512
        total += size
        if home is not None:
            homes[home] = homes.get(home, 0) + size
        if stat.S_ISDIR(info.st_mode):
            try:
                entries = list(os.scandir(path))
            except OSError:
                continue
            for entry in entries:
                owner = home
                if path == home_dir and entry.is_dir(follow_symlinks=False):
                    owner = entry.name
                pending.append((entry.path, owner))
    return {"time": started, "seconds": time.time() - started, "used_bytes": total, "homes": homes}


def write_report(report: Dict[str, object], directory: str) -> None:
    """REPORT as JSON in DIRECTORY, whole or not at all (a rename)."""
    path = os.path.join(directory, C.JAIL_USAGE_FILE)
    with open(path + ".new", "w", encoding="utf-8") as out:
        json.dump(report, out)
    os.replace(path + ".new", path)


def main() -> None:
    interval = float(os.environ.get(C.ENV_JAIL_USAGE_INTERVAL, "300"))
    while True:
        started = time.monotonic()
        try:
            write_report(measure(C.JAIL_MOUNT_PATH), C.JAIL_USAGE_DIR)
        except OSError as error:  # the jail away (a hung or lost volume): the next round tries again
            print("slurmkube-jail-usage: %s" % error, file=sys.stderr, flush=True)
        time.sleep(max(1.0, interval - (time.monotonic() - started)))


if __name__ == "__main__":
    main()
