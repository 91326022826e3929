"""Apply what the server would store differently: a no-op writes nothing, an out-of-band edit is
reverted, a field the server drops is not applied again, and the diff holds only what changes."""

from __future__ import annotations

import copy

from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import (
    SeenEqual,
    apply_changed,
    changed_fields,
    comparable,
    diff_of,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import (
    status_unchanged,
    without_empty_maps,
)


class DroppingServer(MemoryKube):
    """Stores what is applied as an API server does: an env value "" is dropped, quantities are
    normalised, an atomic list is replaced whole, and every write bumps the bookkeeping."""

    def server_form(self, obj):
        out = copy.deepcopy(obj)
        for env in out.get("spec", {}).get("env", []):
            if env.get("value") == "":
                del env["value"]
        if out.get("spec", {}).get("cpu") == "1000m":
            out["spec"]["cpu"] = "1"
        out["metadata"]["managedFields"] = [{"manager": "slurmkube", "time": str(self.version)}]
        out["metadata"]["resourceVersion"] = str(self.version)
        return out

    def apply(self, obj, dry_run=False):
        self.version += 1
        stored = self.server_form(obj)
        if not dry_run:
            self.writes += 1
            self.objects[self.key(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))] = stored
        return copy.deepcopy(stored)


def deployment(**spec):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op", "namespace": "ns"},
            "spec": dict(spec)}


def test_a_second_apply_writes_nothing_even_where_the_server_changed_our_values():
    kube = DroppingServer()
    obj = deployment(cpu="1000m", env=[{"name": "WATCH", "value": ""}, {"name": "A", "value": "a"}])
    assert len(apply_changed(kube, [obj])) == 1
    assert apply_changed(kube, [obj]) == []
    assert kube.writes == 1


def test_an_out_of_band_edit_of_our_field_is_reverted_and_the_diff_names_only_it():
    kube = DroppingServer()
    obj = deployment(partitions=[{"name": "main"}], replicas=1)
    apply_changed(kube, [obj])
    kube.objects[("Deployment", "ns", "op")]["spec"]["partitions"].append({"name": "extra"})
    applied = apply_changed(kube, [obj])
    assert [a.obj for a in applied] == [obj]
    assert kube.objects[("Deployment", "ns", "op")]["spec"]["partitions"] == [{"name": "main"}]
    diff = diff_of(applied[0])
    assert diff["before"] == {"spec": {"partitions": [{"name": "main"}, {"name": "extra"}]}}
    assert diff["after"] == {"spec": {"partitions": [{"name": "main"}]}}
    assert diff["before_header"] == "Deployment ns/op"


def test_check_mode_makes_only_dry_runs():
    kube = DroppingServer()
    obj = deployment(replicas=1)
    apply_changed(kube, [obj])
    applied = apply_changed(kube, [deployment(replicas=3)], dry_run=True)
    assert applied[0].after["spec"]["replicas"] == 3
    assert kube.objects[("Deployment", "ns", "op")]["spec"]["replicas"] == 1 and kube.writes == 1


def test_a_new_object_diffs_as_what_we_asked_for_without_server_bookkeeping():
    kube = DroppingServer()
    diff = diff_of(apply_changed(kube, [deployment(replicas=1)], dry_run=True)[0])
    assert diff["before"] == {} and diff["after"] == deployment(replicas=1)
    assert kube.objects == {}


def test_comparable_leaves_out_status_and_bookkeeping_only():
    live = deployment(replicas=1)
    live["metadata"].update(managedFields=[{}], resourceVersion="9", generation=3, labels={"a": "b"})
    live["status"] = {"readyReplicas": 1}
    expected = dict(deployment(replicas=1), metadata={"name": "op", "namespace": "ns", "labels": {"a": "b"}})
    assert comparable(live) == expected


def test_changed_fields_follows_maps_down_and_shows_lists_whole():
    before = {"spec": {"a": 1, "b": {"c": [1, 2], "d": "same"}}, "kind": "X"}
    after = {"spec": {"a": 1, "b": {"c": [1], "d": "same"}, "e": True}, "kind": "X"}
    assert changed_fields(before, after) == ({"spec": {"b": {"c": [1, 2]}}}, {"spec": {"b": {"c": [1]}, "e": True}})


def test_a_status_is_unchanged_when_its_fields_hold_and_others_are_ignored():
    live = {"phase": "Ready", "kopf": {"progress": {}}, "conditions": [{"type": "A", "status": "True"}]}
    assert status_unchanged({"phase": "Ready", "conditions": [{"type": "A", "status": "True"}]}, live)
    assert not status_unchanged({"phase": "Pending"}, live)
    assert not status_unchanged({"conditions": []}, live)


def test_empty_maps_are_left_out_of_a_status_at_every_depth():
    status = {"phase": "Ready", "nodesByState": {}, "replicas": 0, "conditions": [{"type": "A"}],
              "restKeys": {"signing": "k2", "retiring": {}}, "slurm": {"rollout": {"images": {}}}}
    assert without_empty_maps(status) == {"phase": "Ready", "replicas": 0, "conditions": [{"type": "A"}],
                                          "restKeys": {"signing": "k2"}}


def test_a_dry_run_that_found_an_object_applied_is_not_repeated_until_it_changes():
    kube = DroppingServer()
    obj = deployment(replicas=1)
    seen = SeenEqual()
    apply_changed(kube, [obj], seen=seen)
    version = kube.version
    assert apply_changed(kube, [obj], seen=seen) == []  # a dry run finds it applied
    assert kube.version == version + 1
    assert apply_changed(kube, [obj], seen=seen) == []  # no call at all now
    assert kube.version == version + 1
    live = kube.objects[("Deployment", "ns", "op")]
    live["status"] = {"readyReplicas": 1}
    live["metadata"]["resourceVersion"] = "status-written"
    assert apply_changed(kube, [obj], seen=seen) == []  # its status moved: still no call
    assert kube.version == version + 1
    live["spec"]["replicas"] = 5
    live["metadata"]["resourceVersion"] = "edited"
    assert len(apply_changed(kube, [obj], seen=seen)) == 1  # an edit is seen again
    assert kube.objects[("Deployment", "ns", "op")]["spec"]["replicas"] == 1
    # Put back as a dry run found it applied: no call.
    assert apply_changed(kube, [obj], seen=seen) == [] and kube.version == version + 3
    kube.objects[("Deployment", "ns", "op")]["metadata"]["labels"] = {"by-hand": "yes"}
    apply_changed(kube, [obj], seen=seen)
    assert kube.version > version + 3  # a label's edit is seen too: the server is asked again


class OrphaningServer(MemoryKube):
    """Deletes with propagation Orphan as the API server does: the object stays, terminating,
    until the garbage collector has released its pods (gc())."""

    def __init__(self):
        super().__init__()
        self.deletes = []

    def delete(self, api_version, kind, name, namespace=None, propagation="Background"):
        self.deletes.append((kind, name, propagation))
        self.writes += 1
        self.objects[self.key(kind, name, namespace)]["metadata"]["deletionTimestamp"] = "2026-11-25T00:00:00Z"
        return True

    def gc(self):
        self.objects = {k: o for k, o in self.objects.items() if "deletionTimestamp" not in o["metadata"]}


def statefulset(service, image="a"):
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "login", "namespace": "ns"},
            "spec": {"serviceName": service, "template": {"spec": {"containers": [{"image": image}]}}}}


def test_a_statefulset_whose_service_name_changes_is_made_again_with_its_pods_orphaned():
    kube = OrphaningServer()
    apply_changed(kube, [statefulset("old")])
    [applied] = apply_changed(kube, [statefulset("new")])
    assert kube.deletes == [("StatefulSet", "login", "Orphan")]
    assert (applied.before["spec"]["serviceName"], applied.after["spec"]["serviceName"]) == ("old", "new")
    # While the old one terminates nothing is written; once it is gone the new one is made.
    writes = kube.writes
    assert apply_changed(kube, [statefulset("new")]) == [] and kube.writes == writes
    kube.gc()
    [made] = apply_changed(kube, [statefulset("new")])
    assert made.before is None and kube.get("apps/v1", "StatefulSet", "login", "ns")["spec"]["serviceName"] == "new"
    assert apply_changed(kube, [statefulset("new")]) == []


def with_claims(sts, *claims):
    """The StatefulSet with claim templates of these names, as the server keeps them (its defaults filled in)."""
    spec = dict(sts["spec"], volumeClaimTemplates=[
        {"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"},
         "status": {"phase": "Pending"}} for name in claims])
    return dict(sts, spec=spec)


def test_a_statefulset_whose_claim_templates_change_is_made_again_and_one_whose_do_not_is_not():
    # 0.3's controllers made their state claim from a template; 0.4's mount the claim it made.
    kube = OrphaningServer()
    apply_changed(kube, [with_claims(statefulset("svc"), "state")])
    assert apply_changed(kube, [with_claims(statefulset("svc"), "state")]) == [] and kube.deletes == []
    apply_changed(kube, [statefulset("svc")])
    assert kube.deletes == [("StatefulSet", "login", "Orphan")]


def test_check_mode_reports_the_replacement_and_deletes_nothing():
    kube = OrphaningServer()
    apply_changed(kube, [statefulset("old")])
    [applied] = apply_changed(kube, [statefulset("new")], dry_run=True)
    assert applied.after["spec"]["serviceName"] == "new" and kube.deletes == []


def test_a_template_change_is_applied_in_place():
    kube = OrphaningServer()
    apply_changed(kube, [statefulset("svc", image="a")])
    apply_changed(kube, [statefulset("svc", image="b")])
    assert kube.deletes == []
    template = kube.get("apps/v1", "StatefulSet", "login", "ns")["spec"]["template"]
    assert template["spec"]["containers"][0]["image"] == "b"
