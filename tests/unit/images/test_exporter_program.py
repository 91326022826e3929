"""The exporter program over a jail directory: what it reads there, the Prometheus text it
serves, and a hung jail volume that costs its families but never the scrape."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

from collection_path import REPO
from prometheus_client import CollectorRegistry, generate_latest

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

PROGRAM = REPO / "images" / "exporter" / "slurmkube_exporter.py"
SPEC = importlib.util.spec_from_file_location("slurmkube_exporter", PROGRAM)
E = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(E)


def jail(tmp_path: Path) -> Path:
    health = tmp_path / C.HEALTH_RESULTS_DIR.lstrip("/")
    health.mkdir(parents=True)
    (health / "cpu-0").write_text("time 1795660000\njail fail\nmunged pass\n")
    (health / ".cpu-0.tmp").write_text("time 1\njail pass\n")  # a write in progress
    (health / "gone-3").write_text("time 1795600000\njail fail\n")
    long_checks = tmp_path / C.LONG_CHECK_RESULTS_DIR.lstrip("/")
    long_checks.mkdir(parents=True)
    (long_checks / "cpu-0.log").write_text("x\n" * 100000 + "slurmkube-result node=cpu-0 "
                                           "compute_mib_per_s=400.00 memory_mib_per_s=9000.00 PASS\n")
    return tmp_path


class Families:
    def __init__(self, families):
        self.families = families

    def collect(self):
        return [E.converted(f) for f in self.families]


def text_of(families) -> str:
    registry = CollectorRegistry()
    registry.register(Families(families))
    return generate_latest(registry).decode()


def test_the_jail_gives_its_usage_and_each_known_nodes_results(tmp_path):
    text = text_of(E.JailReader(str(jail(tmp_path))).families(frozenset({"cpu-0", "cpu-1"})))
    assert 'slurm_node_health_check_failed{check="jail",node="cpu-0"} 1.0' in text
    assert 'slurm_node_health_check_failed{check="munged",node="cpu-0"} 0.0' in text
    assert "gone-3" not in text
    # The result line sits behind 200 kB of output: only the log's tail is read, and enough.
    assert 'slurm_node_memory_bandwidth_bytes_per_second{node="cpu-0"} 9.437184e+09' in text  # 9000 MiB/s
    assert 'slurm_node_long_check_failed{check="node",node="cpu-0"} 0.0' in text
    assert "slurm_jail_volume_size_bytes " in text and "slurm_jail_volume_free_bytes " in text


def test_a_hung_jail_costs_its_families_not_the_scrape_and_no_second_read_piles_up(tmp_path, monkeypatch):
    release = threading.Event()
    calls = []

    def hung(nodes):
        calls.append(nodes)
        release.wait(10)
        return []

    monkeypatch.setattr(E, "JAIL_TIMEOUT", 0.2)
    reader = E.JailReader(str(tmp_path))
    monkeypatch.setattr(reader, "read", hung)
    assert reader.families(frozenset()) == []
    assert reader.families(frozenset()) == []
    assert len(calls) == 1
    release.set()


def test_slurm_away_is_slurm_up_0_with_the_jail_still_read(tmp_path, monkeypatch):
    monkeypatch.setattr(E, "run", lambda argv: None)
    monkeypatch.setattr(C, "JAIL_MOUNT_PATH", str(jail(tmp_path)))
    collector = E.SlurmCollector()
    collector.refresh()
    text = text_of(collector.families)
    assert "slurm_up 0.0" in text
    assert "slurm_jail_volume_size_bytes" in text
    # Without slurmctld the nodes are unknown: no per-node results rather than stale ones.
    assert "slurm_node_health_check_failed{" not in text


def test_scrapes_within_the_interval_share_one_answer_per_kind(tmp_path, monkeypatch):
    """However many Prometheus servers scrape, Slurm is asked once per kind per interval."""
    asked = []
    monkeypatch.setattr(E, "run", lambda argv: asked.append(argv[0]) or None)
    monkeypatch.setattr(E, "MIN_INTERVAL", 3600)
    monkeypatch.setattr(C, "JAIL_MOUNT_PATH", str(tmp_path))
    collector = E.SlurmCollector()
    for _scrape in range(5):
        list(collector.collect())
    assert sorted(asked) == ["scontrol", "sdiag", "squeue"]


def test_the_jail_usage_containers_report_and_the_claims_size_become_families(tmp_path, monkeypatch):
    usage = tmp_path / "usage"
    usage.mkdir()
    (usage / C.JAIL_USAGE_FILE).write_text('{"time": 1795660000, "used_bytes": 4096, "homes": {"ann": 2048}}')
    monkeypatch.setenv(C.ENV_JAIL_CLAIM_BYTES, "10737418240")
    text = text_of(E.JailReader(str(jail(tmp_path)), str(usage)).families(frozenset()))
    assert "slurm_jail_used_bytes 4096.0" in text and 'slurm_jail_home_used_bytes{user="ann"} 2048.0' in text
    assert "slurm_jail_claim_size_bytes 1.073741824e+10" in text
    # Before the container's first count: the families without samples, the rest as before.
    monkeypatch.delenv(C.ENV_JAIL_CLAIM_BYTES)
    text = text_of(E.JailReader(str(tmp_path), str(tmp_path / "nothing-yet")).families(frozenset()))
    assert "\nslurm_jail_used_bytes " not in text and "\nslurm_jail_volume_size_bytes " in text
