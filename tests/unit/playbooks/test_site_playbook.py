"""site.yml's checks of its users and images, run by a real ansible-playbook before anything is
built or made."""

from __future__ import annotations

import json

from collection_path import REPO
from playbook_runner import run_playbook

SITE = REPO / "playbooks" / "site.yml"
# Nothing is built (images given: every one the example cluster runs, accounting on) and the play
# ends at the first step that would make something: an unknown Kubernetes is refused by role kubernetes.
IMAGES = {name: "registry.example.internal/slurmkube/%s:1" % name
          for name in ("controller", "worker", "login", "jail", "operator", "slurmdbd", "mariadb")}
STOP_BEFORE_MAKING = {"slurmkube_images": IMAGES, "slurmkube_kubernetes": "nowhere"}


def site(users: list, **settings) -> str:
    proc = run_playbook(SITE, "-e", json.dumps(dict(STOP_BEFORE_MAKING, slurmkube_users=users, **settings)))
    assert proc.returncode != 0
    return " ".join(proc.stdout.split())


def test_a_user_listed_twice_is_refused_before_anything_is_built_or_made():
    output = site([{"name": "alice", "uid": 2001}, {"name": "bob"}, {"name": "alice", "uid": 2002}])
    assert "slurmkube_users: each name once, listed more than once: alice" in output, output[-3000:]
    assert "Make the Kubernetes" not in output, output[-3000:]


def test_users_listed_once_pass_the_check():
    """The control: the same users without a repeat get past the check, to the refused Kubernetes."""
    output = site([{"name": "alice", "uid": 2001}, {"name": "bob"}])
    assert "listed more than once" not in output
    assert "Make the Kubernetes" in output and "nowhere" in output, output[-3000:]


def test_images_given_without_one_the_cluster_runs_are_refused_naming_it_before_anything_is_made():
    """The example cluster keeps accounting (slurmdbd, its database); monitoring adds the exporter."""
    partial = {name: ref for name, ref in IMAGES.items() if name not in ("mariadb",)}
    output = site([], slurmkube_images=partial, slurmkube_monitoring=True)
    assert "slurmkube_images: name mariadb, exporter too (the cluster runs them)" in output, output[-3000:]
    assert "Make the Kubernetes" not in output, output[-3000:]


def test_a_prometheus_asked_for_needs_its_image_and_the_exporters():
    """slurmkube_prometheus turns monitoring on (the exporter) and runs the collection's Prometheus."""
    output = site([], slurmkube_prometheus=True)
    assert "slurmkube_images: name exporter, prometheus too (the cluster runs them)" in output, output[-3000:]
    assert "Make the Kubernetes" not in output, output[-3000:]
    given = dict(IMAGES, exporter="registry.example.internal/slurmkube/exporter:1",
                 prometheus="registry.example.internal/slurmkube/prometheus:1")
    assert "Make the Kubernetes" in site([], slurmkube_images=given, slurmkube_prometheus=True)
