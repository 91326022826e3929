"""An in-memory stand-in for the thin Kubernetes client, for unit tests of decisions."""

from __future__ import annotations

import copy

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import ConflictError


def merge_into(target, patch):
    """A JSON merge patch (RFC 7386): maps merge, null deletes, anything else replaces."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_into(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def field_value(obj, path):
    for step in path.split("."):
        obj = (obj or {}).get(step)
    return obj


class MemoryKube:
    """Stores what is applied, as an API server without defaulting would; counts writes."""

    def __init__(self):
        self.objects = {}
        self.writes = 0
        self.version = 0
        self.forced = []  # (kind, name) deleted with a grace period of 0
        self.unserved = set()  # (api version, kind) this API server does not serve
        self.events = []  # (involved object's namespace/name, type, reason, message)

    def key(self, kind, name, namespace):
        return (kind, namespace, name)

    def get(self, api_version, kind, name, namespace=None):
        obj = self.objects.get(self.key(kind, name, namespace))
        return copy.deepcopy(obj) if obj else None

    def list(self, api_version, kind, namespace=None, labels=None, fields=None):
        """As the API server lists: namespace None means every namespace (and cluster-scoped kinds);
        only the objects that carry every label asked for, and every field (a dotted path) value."""
        wanted = (labels or {}).items()
        return [copy.deepcopy(o) for key, o in sorted(self.objects.items(), key=lambda item: str(item[0]))
                if key[0] == kind and namespace in (None, key[1])
                and wanted <= ((o.get("metadata") or {}).get("labels") or {}).items()
                and all(field_value(o, path) == value for path, value in (fields or {}).items())]

    def serves(self, api_version, kind):
        return (api_version, kind) not in self.unserved

    def bind(self, namespace, pod, node):
        self.writes += 1
        obj = self.objects[self.key("Pod", pod, namespace)]
        assert not obj["spec"].get("nodeName"), "%s is bound already" % pod
        obj["spec"]["nodeName"] = node

    def post_event(self, obj, kind, reason, message, source):
        self.writes += 1
        meta = obj["metadata"]
        self.events.append(("%s/%s" % (meta.get("namespace"), meta["name"]), kind, reason, message))

    def apply(self, obj, dry_run=False):
        if dry_run:
            return obj
        self.writes += 1
        key = self.key(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
        stored = copy.deepcopy(obj)
        if "status" not in stored and "status" in self.objects.get(key, {}):
            stored["status"] = self.objects[key]["status"]  # an apply leaves the status subresource be
        self.objects[key] = stored
        return obj

    def create(self, obj):
        key = self.key(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
        if key in self.objects:
            raise ConflictError("%s/%s exists already" % key[1:])
        return self._store(key, obj)

    def replace(self, obj):
        """Honours metadata.resourceVersion as the API server does: a stale one is a conflict."""
        key = self.key(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
        live = self.objects.get(key)
        if live is None or live["metadata"]["resourceVersion"] != obj["metadata"].get("resourceVersion"):
            raise ConflictError("%s/%s changed since it was read" % key[1:])
        return self._store(key, obj)

    def _store(self, key, obj):
        self.writes += 1
        self.version += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.objects[key] = stored
        return copy.deepcopy(stored)

    def merge_patch(self, api_version, kind, name, namespace, patch):
        self.writes += 1
        obj = self.objects[self.key(kind, name, namespace)]
        merge_into(obj, patch)
        return copy.deepcopy(obj)

    def delete(self, api_version, kind, name, namespace=None, propagation="Background", grace_period_seconds=None):
        self.writes += 1
        if grace_period_seconds == 0:
            self.forced.append((kind, name))
        return self.objects.pop(self.key(kind, name, namespace), None) is not None

    def exec(self, *args, **kwargs):
        raise AssertionError("no pod runs in memory")
