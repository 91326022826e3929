# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rendering a cluster to files: what the cluster_manifests module does, without Ansible."""

from __future__ import annotations

import os
import tempfile
from typing import Any, Dict, List, Mapping, NamedTuple, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.model.schema import render_crds
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import render_cluster

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    HAS_YAML = False


class ManifestError(SlurmkubeError):
    """The input cannot be rendered; the message says which field and why."""


class ManifestSet(NamedTuple):
    """What one rendering produced."""

    manifests: List[Dict[str, Any]]
    config_files: Dict[str, str]
    files: Dict[str, str]


class SyncResult(NamedTuple):
    """What writing a ManifestSet into a directory changed."""

    changed: bool
    paths: List[str]
    diffs: List[Dict[str, str]]


def manifest_file_name(obj: Mapping[str, Any]) -> str:
    """<kind>-<name>.yaml, lower case: unique within one cluster's objects."""
    return "%s-%s.yaml" % (obj["kind"].lower(), obj["metadata"]["name"])


def to_yaml(obj: Mapping[str, Any]) -> str:
    """One manifest as a YAML document."""
    return "---\n" + yaml.safe_dump(dict(obj), sort_keys=False, default_flow_style=False)


def render_manifest_set(cluster: Mapping[str, Any], node_sets: Sequence[Mapping[str, Any]],
                        include_crds: bool) -> ManifestSet:
    """Validate the resources and render manifests, config files and file texts."""
    if not HAS_YAML:
        raise ManifestError("PyYAML is required")
    try:
        model = parse_cluster(cluster)
        sets = [parse_nodeset(n) for n in node_sets]
        rendered = render_cluster(model, sets)
    except SpecError as exc:
        raise exc.within("invalid cluster") from exc
    manifests = (render_crds() if include_crds else []) + rendered.objects
    files = {manifest_file_name(m): to_yaml(m) for m in manifests}
    return ManifestSet(manifests, rendered.config_files, files)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return ""


def _write_atomically(path: str, text: str) -> None:
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".slurmkube-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def sync_directory(dest: str, files: Mapping[str, str], write: bool) -> SyncResult:
    """Make dest hold these files; only files whose content differs are (re)written."""
    paths, diffs = [], []
    for name in sorted(files):
        path = os.path.join(dest, name)
        before, after = _read(path), files[name]
        paths.append(path)
        if before == after:
            continue
        diffs.append({"before": before, "after": after, "before_header": path, "after_header": path})
        if write:
            os.makedirs(dest, exist_ok=True)
            _write_atomically(path, after)
    return SyncResult(bool(diffs), paths, diffs)
