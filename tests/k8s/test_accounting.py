"""Accounting on the embedded cluster (issue 16): spec.accounting deploys slurmdbd and its
MariaDB, built from Debian here; jobs are recorded and `sacct`/`sreport` answer from them.

Real slurmctld, slurmd, slurmdbd and MariaDB; the network policy enforced by kube-router.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess

import pytest
from localkube_helpers import REPO, Cluster, localkube, wait_for
from slurm_helpers import (
    SLURM_IMAGES,
    TINY,
    Operator,
    SlurmView,
    cluster_manifest,
    manifests,
    nodeset_manifest,
    tiny_cluster_spec,
    wait_ready,
)

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

pytestmark = pytest.mark.k8s

CLUSTER = "acct"
NODESET = "cpu"
NODE = "%s-%s-0" % (CLUSTER, NODESET)
ACCOUNTING_IMAGES = ("slurmdbd", "mariadb")
# MariaDB with its 64 MiB buffer pool stays near 150 MiB.
DATABASE_RESOURCES = dict(TINY, memory="512Mi")


@pytest.fixture(scope="module")
def images(localkube_cluster: Cluster, slurm_images: dict) -> dict:
    build = subprocess.run(["bash", str(REPO / "images" / "build.sh"), *ACCOUNTING_IMAGES], capture_output=True,
                           text=True, timeout=3600, check=False)
    assert build.returncode == 0, build.stderr[-4000:]
    refs = json.loads(build.stdout)
    for name in ACCOUNTING_IMAGES:
        localkube("import-image", refs[name])
    return {**slurm_images, **{name: refs[name] for name in ACCOUNTING_IMAGES}}


@pytest.fixture(scope="module")
def slurm(localkube_cluster: Cluster, images: dict, operator: Operator) -> SlurmView:
    kube = localkube_cluster
    spec = dict(tiny_cluster_spec(), accounting={
        "enabled": True, "resources": TINY,
        "database": {"resources": DATABASE_RESOURCES, "storage": {"size": "1Gi"}}})
    spec["images"] = dict({n: images[n] for n in (*SLURM_IMAGES, *ACCOUNTING_IMAGES)}, pullPolicy="Never")
    kube.apply(manifests(cluster_manifest(kube.namespace, CLUSTER, images, spec),
                         nodeset_manifest(kube.namespace, CLUSTER, NODESET, 1)))
    wait_ready(kube, CLUSTER, operator)
    view = SlurmView(kube, CLUSTER)
    # slurmctld registers the cluster with slurmdbd when it first connects.
    wait_for(lambda: CLUSTER in view.run("sacctmgr", "-n", "-P", "list", "cluster", "format=Cluster").split(),
             120, 2, explain=lambda: kube.kubectl("-n", kube.namespace, "logs", "%s-slurmdbd-0" % CLUSTER,
                                                  "--tail=50", check=False).stdout)
    yield view
    kube.kubectl("-n", kube.namespace, "delete", "slurmcluster", CLUSTER, "--wait=true", check=False, timeout=180)
    kube.kubectl("-n", kube.namespace, "delete", "nodeset", NODESET, "--wait=true", check=False, timeout=180)


def sacct_rows(slurm: SlurmView, jobs: list) -> dict:
    out = slurm.kube.exec("%s-controller-0" % CLUSTER, "sacct", "-X", "-n", "-P", "-o",
                          "JobID,State,ExitCode,ElapsedRaw,Account", "-j", ",".join(jobs), check=False).stdout
    return {row.split("|")[0]: row.split("|")[1:] for row in out.splitlines() if row.count("|") == 4}


def test_jobs_are_in_sacct_with_state_exit_code_elapsed_time_and_account(slurm: SlurmView):
    slurm.run("sacctmgr", "-i", "add", "account", "physics", "Description=physics", "Organization=science")
    slurm.run("sacctmgr", "-i", "add", "user", "root", "Account=physics")
    # slurmdbd pushes the new association to slurmctld; until then -A physics is refused.
    wait_for(lambda: "physics" in slurm.run("scontrol", "show", "assoc_mgr", "flags=assoc", "accounts=physics"),
             60, 2)
    ok = slurm.run("sbatch", "--parsable", "-A", "physics", "-o", "/dev/null", "--wrap", "sleep 2").split()[0]
    bad = slurm.run("sbatch", "--parsable", "-A", "physics", "-o", "/dev/null", "--wrap", "exit 3").split()[0]

    def recorded() -> dict:
        rows = sacct_rows(slurm, [ok, bad])
        return rows if all(rows.get(j, [""])[0] in ("COMPLETED", "FAILED") for j in (ok, bad)) else {}

    rows = wait_for(recorded, 120, 2)
    assert rows[ok][0:2] == ["COMPLETED", "0:0"] and rows[bad][0:2] == ["FAILED", "3:0"], rows
    assert int(rows[ok][2]) >= 2, rows
    assert rows[ok][3] == rows[bad][3] == "physics", rows


def test_sreport_answers_for_the_cluster(slurm: SlurmView):
    out = slurm.kube.exec("%s-controller-0" % CLUSTER, "sreport", "cluster", "utilization", "-P")
    assert "Cluster Utilization" in out.stdout and "Cluster|" in out.stdout, out.stdout


def test_the_database_password_is_generated_once_and_kept(slurm: SlurmView, operator: Operator):
    name = "%s-accounting-db" % CLUSTER
    secret = slurm.kube.get_json("secret", name)
    password = base64.b64decode(secret["data"][C.DB_PASSWORD_SECRET_KEY]).decode()
    assert re.fullmatch(r"[0-9a-f]{48}", password)
    assert C.DB_PASSWORD_SECRET_KEY + "=" not in operator.logs(tail=2000)
    assert slurm.kube.get_json("secret", name)["metadata"]["resourceVersion"] == secret["metadata"]["resourceVersion"]


PROBE = ('for t in "$@"; do timeout 3 bash -c "exec 3<>/dev/tcp/${t%:*}/${t##*:}" 2>/dev/null '
         '&& echo "$t open" || echo "$t closed"; done')


def test_jobs_reach_slurmdbd_but_never_the_database(slurm: SlurmView):
    """sacct in a job talks to slurmdbd; the database answers slurmdbd only."""
    targets = ["%s-slurmdbd:%d" % (CLUSTER, C.SLURMDBD_PORT), "%s-mariadb:%d" % (CLUSTER, C.DATABASE_PORT)]
    out = slurm.run("srun", "-w", NODE, "bash", "-c", PROBE, "probe", *targets)
    assert out.split("\n")[:2] == ["%s open" % targets[0], "%s closed" % targets[1]], out
