"""Slurm's REST API in the docker cluster (issue 35): slurmrestd from the controller image, run
as render/rest.py makes its pod (unprivileged, no key), real slurmctld checking RS256 tokens from
jwt.py against the mounted key set; a job submitted with a user's token runs as that user."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional, Tuple

import pytest
import waiting
from docker_cluster import CONTROLLER_POD, JAIL_UID, JAIL_USER, WORKERS, Cluster, docker, jail_home, wait_for

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import KeySet, jwks_text, new_key_set, sign_token

pytestmark = pytest.mark.slurm

API = "/slurm/v0.0.45"


@pytest.fixture(scope="module")
def rest(cluster: Cluster) -> Cluster:
    cluster.start_rest()
    answers = waiting.wait_for(lambda: call(cluster, "GET", API + "/ping", token(cluster))[0] == 200, 60, 1,
                               explain=cluster.logs, what="slurmrestd answers")
    assert answers
    return cluster


def token(cluster: Cluster, user: str = JAIL_USER, lifetime: int = 300, now: Optional[int] = None) -> str:
    return sign_token(cluster.jwt_keys, user, int(time.time()) if now is None else now, lifetime)


def call(cluster: Cluster, method: str, path: str, user_token: Optional[str],
         body: Optional[dict] = None) -> Tuple[int, dict]:
    """One request from another container on the cluster's network; HTTP status and JSON body."""
    url = "http://%s:%d%s" % (names.rest(cluster.model.name), C.SLURMRESTD_PORT, path)
    args = ["-s", "-X", method, "-w", "\n%{http_code}", url]
    if user_token is not None:
        args += ["-H", "X-SLURM-USER-TOKEN: " + user_token]
    if body is not None:
        args += ["-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
    out = docker("run", "--rm", "--network", cluster.network, "--entrypoint", "curl", cluster.images["jail"], *args,
                 check=False, timeout=60).stdout
    text, _newline, status = out.rpartition("\n")
    try:
        return int(status or 0), json.loads(text or "{}")
    except ValueError:
        return int(status or 0), {"text": text}


def test_slurmrestd_runs_unprivileged_and_holds_no_key(rest: Cluster):
    container = rest.containers[names.rest(rest.model.name)]
    processes = docker("top", container, "-o", "pid,uid,comm").stdout.split("\n")[1:]
    assert any(line.split()[1:] == [str(C.SLURMRESTD_UID), "slurmrestd"] for line in processes), processes
    keys = docker("exec", container, "ls", "-A", C.MUNGE_KEY_MOUNT_DIR, C.JWT_KEYS_MOUNT_DIR, check=False)
    assert keys.returncode != 0 and keys.stdout.strip() == "", keys


def test_a_users_token_lists_jobs_and_submits_one_that_runs_as_that_user(rest: Cluster):
    status, body = call(rest, "GET", API + "/jobs", token(rest))
    assert status == 200 and "jobs" in body and not body.get("errors"), body
    script = "#!/bin/bash\nid -u > rest-job.out\n"
    job = {"script": script, "name": "from-rest", "current_working_directory": "/home/" + JAIL_USER,
           "environment": ["PATH=/usr/bin:/bin"], "required_nodes": [WORKERS[0]]}
    status, body = call(rest, "POST", API + "/job/submit", token(rest), {"job": job})
    assert status == 200 and body.get("job_id"), body
    job_id = body["job_id"]
    status, body = call(rest, "GET", API + "/jobs", token(rest))
    assert job_id in [j["job_id"] for j in body["jobs"]], body
    record = rest.exec(CONTROLLER_POD, "scontrol", "show", "job", str(job_id)).stdout
    assert "UserId=%s(%d)" % (JAIL_USER, JAIL_UID) in record, record
    out = jail_home(rest) / "rest-job.out"
    wait_for("the job's output", lambda: out.is_file() and out.read_text().strip(), timeout=60)
    assert out.read_text().strip() == str(JAIL_UID) and out.stat().st_uid == JAIL_UID


# slurmctld's answer to a request whose credential it refuses (slurm_errno.h).
ESLURM_PROTOCOL_AUTH = 1007


def test_no_token_a_foreign_key_an_expired_token_or_a_changed_user_are_refused(rest: Cluster):
    status, body = call(rest, "GET", API + "/jobs", None)
    assert status == 401, (status, body)  # slurmrestd's own answer: no token at all
    other = sign_token(new_key_set(), JAIL_USER, int(time.time()), 300)
    expired = token(rest, now=int(time.time()) - 600, lifetime=60)
    header, _claims, signature = token(rest).split(".")
    changed_user = ".".join((header, token(rest, user="root").split(".")[1], signature))
    for label, bad in (("foreign key", other), ("expired", expired), ("changed user", changed_user)):
        status, body = call(rest, "GET", API + "/jobs", bad)
        # slurmrestd passes the token on; slurmctld refuses the credential and lists nothing.
        assert [e["error_number"] for e in body["errors"]] == [ESLURM_PROTOCOL_AUTH], (label, status, body)
        assert status != 200 and body["jobs"] == [], (label, status, body)


def test_slurm_issues_no_token_of_its_own(rest: Cluster):
    """Tokens come from slurm_token only (AuthAltParameters disable_token_creation, no HS256 key)."""
    out = rest.exec(CONTROLLER_POD, "setpriv", "--reuid=%d" % JAIL_UID, "--regid=%d" % JAIL_UID, "--clear-groups",
                    "scontrol", "token", check=False)
    assert out.returncode != 0 and "permission denied" in out.stderr, out


def test_slurmctld_takes_a_changed_key_set_on_reconfigure_without_restarting(rest: Cluster):
    """What key rotation stands on: `scontrol reconfigure` makes slurmctld read the key set
    again (it re-executes itself in place, same pid): a key added is accepted, a key removed is
    refused, and nothing restarts."""
    jwks = rest.root / "jwt" / C.JWKS_SECRET_KEY
    before = jwks.read_text()
    pid = rest.exec(CONTROLLER_POD, "pidof", "slurmctld").stdout.split()
    added = new_key_set()
    both = KeySet(rest.jwt_keys.signing, {**rest.jwt_keys.private, **added.private})
    try:
        new_token = sign_token(added, JAIL_USER, int(time.time()), 300)
        assert call(rest, "GET", API + "/jobs", new_token)[1]["errors"], "accepted before the key was published"
        rewrite(jwks, jwks_text(both))
        rest.exec(CONTROLLER_POD, "scontrol", "reconfigure")
        assert wait_for("the new key accepted", lambda: call(rest, "GET", API + "/jobs", new_token)[0] == 200, 60)
        assert call(rest, "GET", API + "/jobs", token(rest))[0] == 200  # the old key still is
        rewrite(jwks, jwks_text(added))
        rest.exec(CONTROLLER_POD, "scontrol", "reconfigure")
        assert wait_for("the old key refused", lambda: call(rest, "GET", API + "/jobs", token(rest))[0] != 200, 60)
        assert call(rest, "GET", API + "/jobs", new_token)[0] == 200
        assert rest.exec(CONTROLLER_POD, "pidof", "slurmctld").stdout.split() == pid
    finally:
        rewrite(jwks, before)
        rest.exec(CONTROLLER_POD, "scontrol", "reconfigure")


def rewrite(path: Path, text: str) -> None:
    """As the kubelet updates a Secret's volume: the new file takes the old one's place at once."""
    new = path.with_name(path.name + ".new")
    new.write_text(text)
    new.chmod(0o444)
    new.replace(path)
