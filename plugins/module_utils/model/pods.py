# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster model's pod part: what a site adds to the pods the product makes (pull secrets,
priority class, scheduling, labels, annotations, environment, volumes), once for every pod of a
cluster (SlurmClusterSpec.pods) and per component and node set (their `pod`), beside types.py,
which holds them; how the two combine, and the checks on them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    LABEL_KEY,
    LABEL_VALUE,
    FreeForm,
    spec_field,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import describe

# A Kubernetes object name (Secret, PriorityClass): a DNS-1123 subdomain.
# What Kubernetes takes as an environment variable's name.
ENV_NAME = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
# The label and annotation prefixes the product's own keys live under: a site's would change what
# the product selects its pods by, or what its operator reads from them.
PRODUCT_LABEL_PREFIXES = ("app.kubernetes.io/", C.API_GROUP + "/")
PRODUCT_ANNOTATION_PREFIXES = (C.API_GROUP + "/",)
PRODUCT_ENV_PREFIX = "SLURMKUBE_"
AFFINITY_KINDS = ("nodeAffinity", "podAffinity", "podAntiAffinity")


@dataclass(frozen=True)
class PodOptions:
    """What a site adds to pods; lists are added to the product's own, maps merged (the product's
    keys win), so nothing here can take away what a pod needs to run."""

    labels: Dict[str, str] = spec_field(
        "Labels on each pod (cost centre, team, a service mesh's opt-out); app.kubernetes.io/ and "
        "slurmkube.io/ keys are the product's.", factory=dict)
    annotations: Dict[str, str] = spec_field(
        "Annotations on each pod; slurmkube.io/ keys are the product's.", factory=dict)
    image_pull_secrets: List[str] = spec_field(
        "Secrets (type kubernetes.io/dockerconfigjson, in the cluster's namespace) the kubelet pulls "
        "the images with: a private registry.", factory=list, pattern=DNS1123_SUBDOMAIN,
        max_length=253, max_items=16, unique=True)
    priority_class_name: Optional[str] = spec_field(
        "PriorityClass of the pods (one that preempts less important workloads for the controller, "
        "for example).", None, pattern=DNS1123_SUBDOMAIN)
    node_selector: Dict[str, str] = spec_field("Node labels a pod's Kubernetes node must have.", factory=dict)
    affinity: Optional[FreeForm] = spec_field(
        "Kubernetes affinity (nodeAffinity, podAffinity, podAntiAffinity) in Kubernetes' own form; its "
        "terms are added to the product's (the controllers' one per Kubernetes node).", None)
    tolerations: List[FreeForm] = spec_field(
        "Kubernetes tolerations in Kubernetes' own form (a dedicated GPU node pool's taint).", factory=list)
    env: List[FreeForm] = spec_field(
        "More environment of each container (not the init containers) in Kubernetes' own form: "
        "{name, value} or {name, valueFrom}; SLURMKUBE_ names are the product's.", factory=list)
    volumes: List[FreeForm] = spec_field(
        "More pod volumes in Kubernetes' own form ({name, <source>}); names the product uses are refused.",
        factory=list)
    volume_mounts: List[FreeForm] = spec_field(
        "Where each container (not the init containers) mounts them ({name, mountPath, readOnly}); a "
        "path the product mounts is refused by the API server (a container mounts a path once).",
        factory=list)


def combined(*layers: PodOptions) -> PodOptions:
    """The options of a pod whose settings come in LAYERS, the cluster's first: maps merged (a later
    layer's key wins), lists added in order (an env variable or volume of a later layer replaces the
    same name's), a later priority class replaces an earlier one, affinity terms added."""
    out = PodOptions()
    for layer in layers:
        out = PodOptions(
            labels={**out.labels, **layer.labels},
            annotations={**out.annotations, **layer.annotations},
            image_pull_secrets=_unique(out.image_pull_secrets + layer.image_pull_secrets),
            priority_class_name=layer.priority_class_name or out.priority_class_name,
            node_selector={**out.node_selector, **layer.node_selector},
            affinity=merged_affinity(out.affinity, layer.affinity),
            tolerations=out.tolerations + layer.tolerations,
            env=_by_name(out.env + layer.env),
            volumes=_by_name(out.volumes + layer.volumes),
            volume_mounts=out.volume_mounts + layer.volume_mounts,
        )
    return out


def merged_affinity(first: Optional[Dict[str, Any]], second: Optional[Dict[str, Any]]) -> Optional[FreeForm]:
    """Both affinities' terms: for each kind and each of its rules, the lists of terms added (every
    required pod (anti-)affinity term must hold, preferred ones add weights); a rule that is one
    object (nodeAffinity's required nodeSelectorTerms, which are ORed) is the second's when both set it."""
    if not first or not second:
        return FreeForm(dict(first or second)) if (first or second) else None
    out: Dict[str, Any] = {kind: dict(rules) for kind, rules in first.items()}
    for kind, rules in second.items():
        mine = out.setdefault(kind, {})
        for rule, terms in rules.items():
            mine[rule] = mine[rule] + terms if isinstance(terms, list) and isinstance(mine.get(rule), list) else terms
    return FreeForm(out)


def _unique(values: Sequence[str]) -> List[str]:
    return list(dict.fromkeys(values))


def _by_name(items: Sequence[FreeForm]) -> List[FreeForm]:
    """One item per name, where the first of that name was, holding the last one given."""
    last: Dict[Any, FreeForm] = {}
    for item in items:
        last[item.get("name")] = item
    return list(last.values())


def pod_rules(options: PodOptions, where: str, volume_names: Optional[Sequence[str]] = ()) -> List[Tuple[str, str]]:
    """What is wrong with OPTIONS at WHERE (a spec path); VOLUME_NAMES: the volumes an earlier layer
    gives the same pods, which its volumeMounts may name (None: not known here, not checked)."""
    return [
        *_map_rules(options.labels, where + ".labels", LABEL_VALUE, PRODUCT_LABEL_PREFIXES),
        *_map_rules(options.annotations, where + ".annotations", None, PRODUCT_ANNOTATION_PREFIXES),
        *_map_rules(options.node_selector, where + ".nodeSelector", LABEL_VALUE, ()),
        *_affinity_rules(options.affinity, where + ".affinity"),
        *_env_rules(options.env, where + ".env"),
        *_volume_rules(options.volumes, where + ".volumes"),
        *(mount_rules(options, where, volume_names) if volume_names is not None else []),
    ]


def _map_rules(values: Dict[str, str], where: str, value_pattern: Optional[str],
               product_prefixes: Sequence[str]) -> List[Tuple[str, str]]:
    problems = []
    for key, value in sorted(values.items()):
        if not re.match(LABEL_KEY, key):
            problems.append((where, "must have Kubernetes keys ([prefix/]name), got %s" % describe(key)))
        elif key.startswith(tuple(product_prefixes)):
            problems.append((where, "%s is the product's own key (%s): choose another" % (
                describe(key), ", ".join(product_prefixes))))
        elif value_pattern and not re.match(value_pattern, value or ""):
            problems.append(("%s.%s" % (where, key), "must be a Kubernetes label value (63 characters at most: "
                             "letters, digits, '-', '_', '.'), got %s" % describe(value)))
    return problems


def _affinity_rules(affinity: Optional[Dict[str, Any]], where: str) -> List[Tuple[str, str]]:
    problems = []
    for kind, rules in sorted((affinity or {}).items()):
        if kind not in AFFINITY_KINDS:
            problems.append((where, "may hold %s, got %s" % (", ".join(AFFINITY_KINDS), describe(kind))))
        elif not isinstance(rules, dict):
            problems.append(("%s.%s" % (where, kind), "must be a mapping, got %s" % describe(rules)))
    return problems


def _env_rules(env: Sequence[Dict[str, Any]], where: str) -> List[Tuple[str, str]]:
    problems, seen = [], set()
    for i, item in enumerate(env):
        path, name = "%s[%d]" % (where, i), item.get("name")
        if not isinstance(name, str) or not re.match(ENV_NAME, name):
            problems.append((path + ".name", "must be an environment variable name, got %s" % describe(name)))
        elif name.startswith(PRODUCT_ENV_PREFIX):
            problems.append((path + ".name", "%s is the product's own (%s...): choose another" % (
                describe(name), PRODUCT_ENV_PREFIX)))
        elif name in seen:
            problems.append((path + ".name", "is used twice: %s" % describe(name)))
        seen.add(name)
        if ("value" in item) == ("valueFrom" in item):
            problems.append((path, "must have exactly one of value and valueFrom"))
        elif "value" in item and not isinstance(item["value"], str):
            problems.append((path + ".value", "must be text (quote numbers and true/false), got %s"
                             % describe(item["value"])))
        elif "valueFrom" in item and not isinstance(item["valueFrom"], dict):
            problems.append((path + ".valueFrom", "must be a mapping, got %s" % describe(item["valueFrom"])))
    return problems


def _volume_rules(volumes: Sequence[Dict[str, Any]], where: str) -> List[Tuple[str, str]]:
    problems, seen = [], set()
    for i, volume in enumerate(volumes):
        path, name = "%s[%d].name" % (where, i), volume.get("name")
        if not isinstance(name, str) or not re.match(DNS1123_LABEL, name) or len(name) > 63:
            problems.append((path, "must be a DNS-1123 label, got %s" % describe(name)))
        elif name in C.PRODUCT_VOLUMES or name.startswith(C.SUB_MOUNT_VOLUME_PREFIX):
            problems.append((path, "%s is a volume of the product's pods (or %s...): choose another" % (
                describe(name), C.SUB_MOUNT_VOLUME_PREFIX)))
        elif name in seen:
            problems.append((path, "is used twice: %s" % describe(name)))
        seen.add(name)
        if len(volume) < 2:
            problems.append(("%s[%d]" % (where, i), "must say where the volume comes from (configMap, secret, "
                             "persistentVolumeClaim, nfs, ...) beside its name"))
    return problems


def mount_rules(options: PodOptions, where: str, volume_names: Sequence[str]) -> List[Tuple[str, str]]:
    """OPTIONS' volumeMounts: each names a volume of its own or of VOLUME_NAMES, at an absolute path."""
    problems, known = [], {*volume_names, *(v.get("name") for v in options.volumes)}
    for i, mount in enumerate(options.volume_mounts):
        path = "%s.volumeMounts[%d]" % (where, i)
        if mount.get("name") not in known:
            problems.append((path + ".name", "must name a volume of volumes (here or in spec.pods), got %s"
                             % describe(mount.get("name"))))
        target = mount.get("mountPath")
        if not isinstance(target, str) or not target.startswith("/"):
            problems.append((path + ".mountPath", "must be an absolute path, got %s" % describe(target)))
    return problems
