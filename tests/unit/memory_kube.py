"""An in-memory stand-in for the thin Kubernetes client, for unit tests of decisions."""

from __future__ import annotations

import copy


class MemoryKube:
    """Stores what is applied, as an API server without defaulting would; counts writes."""

    def __init__(self):
        self.objects = {}
        self.writes = 0

    def key(self, kind, name, namespace):
        return (kind, namespace, name)

    def get(self, api_version, kind, name, namespace=None):
        obj = self.objects.get(self.key(kind, name, namespace))
        return copy.deepcopy(obj) if obj else None

    def list(self, api_version, kind, namespace=None, labels=None):
        return [copy.deepcopy(o) for key, o in sorted(self.objects.items()) if key[:2] == (kind, namespace)]

    def apply(self, obj, dry_run=False):
        if dry_run:
            return obj
        self.writes += 1
        self.objects[self.key(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))] = \
            copy.deepcopy(obj)
        return obj

    def merge_patch(self, api_version, kind, name, namespace, patch):
        self.writes += 1
        obj = self.objects[self.key(kind, name, namespace)]
        obj["metadata"].setdefault("annotations", {}).update(patch["metadata"]["annotations"])
        return copy.deepcopy(obj)

    def delete(self, api_version, kind, name, namespace=None, propagation="Background"):
        self.writes += 1
        return self.objects.pop(self.key(kind, name, namespace), None) is not None

    def exec(self, *args, **kwargs):
        raise AssertionError("no pod runs in memory")
