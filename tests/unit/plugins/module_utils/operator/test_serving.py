"""The operator takes a slurmctld pod being deleted out of its Service (operator/serving.py)."""

from __future__ import annotations

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.operator.serving import stopping_pod_patch


def test_the_operator_takes_a_deleted_controller_pod_out_of_its_service_once():
    serving = {"metadata": {"name": "c-0", "labels": {C.LABEL_SERVING: "true"}}}
    stopping = {"metadata": dict(serving["metadata"], deletionTimestamp="2026-11-26T11:00:00Z")}
    assert stopping_pod_patch(serving) is None
    assert stopping_pod_patch(stopping) == {"metadata": {"labels": {C.LABEL_SERVING: "false"}}}
    done = {"metadata": dict(stopping["metadata"], labels={C.LABEL_SERVING: "false"})}
    assert stopping_pod_patch(done) is None
    assert stopping_pod_patch({"metadata": {"deletionTimestamp": "2026-11-26T11:00:00Z"}}) is None
