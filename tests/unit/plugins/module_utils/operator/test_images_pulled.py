"""ImagesPulled: a pod the kubelet refuses an image of the spec (it backs off, or will never pull)
turns the condition false naming the image and the pod, with one Warning Event per new message;
a pod on an earlier spec's image, or a single failed pull, does not."""

from __future__ import annotations

import copy

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.operator.images import (
    EVENT_REASON,
    images_message,
    spec_images,
    unpullable,
)


def pod(name, image, reason, message="", init=False):
    statuses = [{"name": "c", "image": image, "state": {"waiting": {"reason": reason, "message": message}}}]
    key = "initContainerStatuses" if init else "containerStatuses"
    return {"metadata": {"name": name}, "status": {key: statuses}}


def test_only_a_backing_off_or_never_pulling_image_of_the_spec_counts(world):
    _kube, raw = world
    wanted = spec_images(parse_cluster(raw))
    login = parse_cluster(raw).spec.images.login
    pods = [pod("a-login-0", login, "ImagePullBackOff", 'Back-off pulling image "%s"' % login),
            pod("a-cpu-0", login, "ErrImageNeverPull", init=True),
            pod("a-cpu-1", login, "ErrImagePull", "dial tcp: lookup registry: no such host"),
            pod("a-login-1", "old/login:1", "ImagePullBackOff"),
            pod("a-cpu-2", login, "CrashLoopBackOff")]
    assert unpullable(pods, wanted) == [
        'image %s (pod a-login-0): ImagePullBackOff: Back-off pulling image "%s"' % (login, login),
        "image %s (pod a-cpu-0): ErrImageNeverPull" % login]
    assert images_message(["x%d" % i for i in range(5)]) == "cannot pull x0; x1; x2; and 2 more"


def conditions_of(outcome):
    return {c["type"]: c for c in outcome.status["conditions"]}


def test_a_pod_refused_its_image_is_the_clusters_first_failing_condition_with_one_event(world):
    kube, cluster = world
    first = R.Reconciler(kube).reconcile(cluster)
    assert conditions_of(first)[C.CONDITION_IMAGES_PULLED]["status"] == "True"
    image = parse_cluster(cluster).spec.images.worker
    stuck = copy.deepcopy(pod("cpu-compute-0", image, "ImagePullBackOff", 'Back-off pulling image "%s"' % image))
    stuck.update(apiVersion="v1", kind="Pod")
    stuck["metadata"].update(namespace="research", labels={C.LABEL_CLUSTER: "cpu"})
    kube.apply(stuck)
    live = dict(cluster, status=first.status)
    second = R.Reconciler(kube).reconcile(live)
    found = conditions_of(second)
    assert found[C.CONDITION_IMAGES_PULLED]["status"] == "False"
    assert "image %s (pod cpu-compute-0)" % image in found[C.CONDITION_IMAGES_PULLED]["message"]
    assert found["Ready"]["reason"] == C.CONDITION_IMAGES_PULLED
    assert [e.reason for e in second.events if e.reason == EVENT_REASON] == [EVENT_REASON]
    third = R.Reconciler(kube).reconcile(dict(cluster, status=second.status))
    assert not [e for e in third.events if e.reason == EVENT_REASON]  # the same message: no new Event
