# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pass's render and apply: every object of the cluster rendered once (with the scale plan's
replicas and the workers' placement), then applied where it differs from what is live. The
cluster owns what it applies, but the claims: deleting a cluster never deletes users' data or
the controllers' state."""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, List, Mapping, Sequence, Set

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import loaded_at_start
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import (
    LiveKey,
    apply_changed,
    listed_live,
    live_key,
    owned_by,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import Pass
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_upgrade import (
    held_live,
    is_slurm_config,
    rendered_images,
    with_images,
    with_live_workloads,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Event
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import render_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.render.jail import populate_job_name
from ansible_collections.slurmkube.core.plugins.module_utils.render.power_saving import are_cloud_node_words

# Components of features a spec can turn off (spec.exporter, spec.rest, spec.accounting, or
# accounting moved to an external slurmdbd or database, spec.backup): their objects go once not
# rendered (a backup's repository is the site's, never touched), as do
# NetworkPolicies (spec.networkPolicy). Never claims or Secrets (users' data, state, keys,
# passwords), nor a node set's objects (its retirement drains the nodes first), nor an upgrade's
# pre-flight (upgrade.py makes and removes it).
PRUNED_COMPONENTS = frozenset((C.COMPONENT_EXPORTER, C.COMPONENT_REST, C.COMPONENT_SLURMDBD, C.COMPONENT_DATABASE,
                               C.COMPONENT_BACKUP, C.COMPONENT_DIRECTORY))
PRUNED_KINDS = (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("v1", "Service"), ("v1", "ConfigMap"),
                ("policy/v1", "PodDisruptionBudget"), ("networking.k8s.io/v1", "NetworkPolicy"),
                ("batch/v1", "CronJob"))


def render_objects(p: Pass) -> None:
    """The cluster's objects and config files, once per pass (with the images a rollout's stage
    renders, when one is under way, and no pods of what a restore holds down)."""
    replicas = {name: scaling.plan.replicas for name, scaling in p.scaling.items()}
    staged = p.slurm_state.render
    cluster = with_images(p.cluster, staged) if staged else p.cluster
    key_ids = loaded_at_start(p.rest_keys) if p.rest_keys is not None else ()
    kept = p.templates.of(p.cluster.namespace, p.cluster.name)
    leaving = {base: (retiring.plan.replicas, declared_words(p, kept.get(base) or retiring.live))
               for base, retiring in p.retiring.items()}
    p.rendered = render_cluster(cluster, p.nodesets, p.placement, replicas, key_ids, leaving)
    if p.held:
        p.rendered = p.rendered._replace(objects=held_down(p.rendered.objects, p.held))
    keep_templates(p, kept)


def held_down(objects: Sequence[Dict[str, Any]], held: FrozenSet[str]) -> List[Dict[str, Any]]:
    """The rendered objects with the StatefulSets of HELD components at no replicas."""
    out = []
    for obj in objects:
        component = (obj["metadata"].get("labels") or {}).get(C.LABEL_COMPONENT)
        if obj["kind"] == "StatefulSet" and component in held:
            obj = dict(obj, spec=dict(obj["spec"], replicas=0))
        out.append(obj)
    return out


def declared_words(p: Pass, template: Mapping[str, Any]) -> str:
    """What slurm.conf said of each node of a deleted on-demand set: its template's words, as this
    operator rendered them or (after a restart) as the live PodTemplate keeps them when they are
    words a renderer writes; anything else would go into slurm.conf, so it is refused (a Warning)
    and the nodes are declared CLOUD nodes with Slurm's defaults until they are gone."""
    words = str((template["metadata"].get("annotations") or {}).get(C.ANNOTATION_NODE_WORDS, ""))
    if are_cloud_node_words(words):
        return words
    p.events.append(Event("Warning", "NodeSetWordsRefused", "%s: annotation %s is not what slurmkube writes; its "
                          "nodes are declared State=CLOUD until they leave" % (template["metadata"]["name"],
                                                                               C.ANNOTATION_NODE_WORDS)))
    return "State=CLOUD"


def keep_templates(p: Pass, kept: Mapping[str, Dict[str, Any]]) -> None:
    """The on-demand sets' templates this pass rendered, and a deleted set's as last rendered with
    the count of nodes still declared: what pods are made from until the next pass."""
    templates = {base: with_node_count(kept[base], retiring.plan.replicas)
                 for base, retiring in p.retiring.items() if base in kept}
    templates.update({obj["metadata"]["name"]: obj for obj in p.rendered.objects if obj["kind"] == "PodTemplate"})
    p.templates.keep(p.cluster.namespace, p.cluster.name, templates)


def with_node_count(template: Mapping[str, Any], count: int) -> Dict[str, Any]:
    """The template with its count of declared nodes set (the power loop's range of ordinals)."""
    meta = dict(template["metadata"])
    meta["annotations"] = dict(meta.get("annotations") or {}, **{C.ANNOTATION_NODES: str(count)})
    return dict(template, metadata=meta)


def apply_objects(p: Pass) -> None:
    """Apply every object that differs (a new populate Job only once the old one is gone; the
    workloads of an earlier release's images, and during an upgrade's backup the database, as
    they run)."""
    earlier = p.slurm_state.earlier or {}
    held = held_live(earlier, rendered_images(p.slurm_state.render, p.cluster.spec.images), p.slurm_state.rollout)
    rendered = p.rendered.objects if "jail" in held else after_stale_populate_jobs(p, p.rendered.objects)
    if "controller" in earlier:
        rendered = without_slurm_config(p, rendered)
    desired = without_made_state_claim(p, rendered)
    owned = [obj if is_kept_on_delete(obj) else owned_by(obj, p.cluster_obj) for obj in desired]
    # Every rendered object carries the cluster's label: a list per kind finds them.
    listed = listed_live(p.kube, owned, {C.LABEL_CLUSTER: p.cluster.name})
    if held:
        by_name = {(key[0], key[2]): obj for key, obj in listed.items()}
        owned = with_live_workloads(p.cluster.name, owned, by_name, held)
    p.applied = ["%s/%s" % (a.obj["kind"], a.obj["metadata"]["name"])
                 for a in apply_changed(p.kube, owned, seen=p.seen, listed=listed)]
    prune_switched_off(p, {live_key(obj) for obj in owned}, listed)


def without_slurm_config(p: Pass, objects: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The objects but the Slurm configuration: an earlier release's slurmctld keeps the files that
    release rendered until its pod is replaced (this release's name the controllers by a Service
    whose DNS names the earlier release's pods do not have: every command then waits for its
    time-out); controller.replace_outdated_controller writes them just before."""
    return [obj for obj in objects if not is_slurm_config(p.cluster.name, obj)]


def prune_switched_off(p: Pass, rendered: Set[LiveKey], listed: Mapping[LiveKey, Dict[str, Any]]) -> None:
    """Delete what a feature turned off left (PRUNED_COMPONENTS, NetworkPolicies): objects this
    cluster owns that the pass no longer renders, with one Event naming them. The kinds a pass
    rendered were listed already; the others are listed here."""
    namespace = p.cluster.namespace
    listed_kinds = {key[0] for key in listed}
    api_versions = {kind: api_version for api_version, kind in PRUNED_KINDS}
    live = [obj for obj in listed.values() if obj["kind"] in api_versions]
    for api_version, kind in PRUNED_KINDS:
        if kind not in listed_kinds:
            live += p.kube.list(api_version, kind, namespace, {C.LABEL_CLUSTER: p.cluster.name})
    gone = []
    for obj in live:
        if live_key(obj) not in rendered and is_pruned(obj, p.cluster_obj["metadata"]["uid"]):
            p.kube.delete(api_versions[obj["kind"]], obj["kind"], obj["metadata"]["name"], namespace)
            gone.append("%s/%s" % (obj["kind"], obj["metadata"]["name"]))
    if gone:
        p.events.append(Event("Normal", "ObjectsPruned", "deleted %s: the spec no longer asks for them"
                              % ", ".join(sorted(gone))))


def is_pruned(obj: Mapping[str, Any], cluster_uid: str) -> bool:
    """Whether a live object no longer rendered goes: one of a feature that can be turned off, or a
    NetworkPolicy, that this cluster owns (never what someone else made with its label)."""
    meta = obj["metadata"]
    if meta.get("deletionTimestamp"):
        return False
    owned = any(ref.get("uid") == cluster_uid and ref.get("controller") for ref in meta.get("ownerReferences") or [])
    component = (meta.get("labels") or {}).get(C.LABEL_COMPONENT)
    return owned and (component in PRUNED_COMPONENTS or obj["kind"] == "NetworkPolicy")


def is_kept_on_delete(obj: Mapping[str, Any]) -> bool:
    """The claims have no owner: deleting the cluster never deletes users' data or slurmctld's state."""
    return obj["kind"] == "PersistentVolumeClaim"


def without_made_state_claim(p: Pass, desired: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The controllers' state claim is made once and left as it is: its access modes are fixed
    then, and one made by slurmkube 0.3 (ReadWriteOnce, by the StatefulSet) keeps the state of a
    cluster of that time where it is."""
    claim = names.controller_state_claim(p.cluster.name)
    live = p.kube.get("v1", "PersistentVolumeClaim", claim, p.cluster.namespace)
    if live is None:
        return list(desired)
    p.state_claim_shared = "ReadWriteMany" in ((live.get("spec") or {}).get("accessModes") or [])
    return [obj for obj in desired if not (obj["kind"] == "PersistentVolumeClaim" and obj["metadata"]["name"] == claim)]


def after_stale_populate_jobs(p: Pass, desired: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Delete an earlier jail image's populate Job; hold the new one back until it is gone.

    Two populate Jobs at once would copy two different trees into one jail.
    """
    cluster = p.cluster
    current = populate_job_name(cluster)
    stale = [job for job in p.kube.list("batch/v1", "Job", cluster.namespace,
                                        names.selector_labels(cluster.name, C.COMPONENT_JAIL))
             if names.is_jail_populate_job(cluster.name, job["metadata"]["name"])
             and job["metadata"]["name"] != current]
    if not stale:
        return list(desired)
    for job in stale:
        if not job["metadata"].get("deletionTimestamp"):
            # Foreground: the Job stays (and the new one waits) until its pods are gone.
            p.kube.delete("batch/v1", "Job", job["metadata"]["name"], cluster.namespace, propagation="Foreground")
    return [obj for obj in desired if not (obj["kind"] == "Job" and obj["metadata"]["name"] == current)]
