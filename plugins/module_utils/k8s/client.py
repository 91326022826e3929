# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A thin Kubernetes client: get, list, server-side apply, delete, exec. It knows no model."""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError

try:
    from kubernetes import config as kube_config
    from kubernetes.client import ApiClient, CoreV1Api, VersionApi
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import ConflictError as ApiConflictError
    from kubernetes.dynamic.exceptions import NotFoundError
    from kubernetes.stream import stream
    from urllib3.exceptions import HTTPError as TransportError  # the client's HTTP library

    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None
    TRANSPORT_ERRORS: Tuple[type, ...] = (OSError, TransportError)
except ImportError as exc:  # the modules report it with missing_required_lib
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = exc
    TRANSPORT_ERRORS = (OSError,)

Obj = Dict[str, Any]


# The API's answers that say "try again": too many requests, and the server or the proxy before
# it not able to answer now.
TRANSIENT_STATUSES = frozenset((429, 500, 502, 503, 504))


class KubeError(SlurmkubeError):
    """A Kubernetes call failed; the message names the object and the reason."""

    @property
    def transient(self) -> bool:
        """What failed may pass by itself: a status that says so, or no answer at all (the
        connection refused, reset or timed out)."""
        return is_transient(self.__cause__)


def is_transient(exc: Optional[BaseException]) -> bool:
    """An error of the client library that a later call may not meet."""
    if exc is None:
        return False
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status:
        return status in TRANSIENT_STATUSES
    return isinstance(exc, TRANSPORT_ERRORS)


class ConflictError(KubeError):
    """Someone else wrote first: the object exists already, or our resourceVersion is stale."""


def api_client(kubeconfig: Optional[str] = None, context: Optional[str] = None) -> Any:
    """An ApiClient from a kubeconfig, or from the pod's service account when none is given."""
    if not HAS_KUBERNETES:
        raise KubeError("the Python 'kubernetes' package is required: %s" % KUBERNETES_IMPORT_ERROR)
    if kubeconfig is None and context is None:
        try:
            kube_config.load_incluster_config()
            return ApiClient()
        except kube_config.ConfigException:
            pass
    return kube_config.new_client_from_config(config_file=kubeconfig, context=context)


def error_cause(exc: BaseException) -> str:
    """What went wrong, in one line: an API status with its reason (and the server's message),
    else the error itself (not the HTTP headers the client library puts in its text)."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status:
        message = ""
        body = getattr(exc, "body", None)
        if body:
            try:
                message = json.loads(body).get("message", "")
            except (ValueError, AttributeError):
                message = ""
        reason = getattr(exc, "reason", "") or ""
        return "HTTP %d %s%s" % (status, reason, (": " + message) if message else "")
    return " ".join(str(exc).split()) or type(exc).__name__


def _json(response: Any) -> Obj:
    """An answer's body as plain data. Not the client's ResourceInstance: it turns every field into
    an object and back, 1.1 CPU-s for a list of 1,000 pods where json.loads takes 0.17 s."""
    return json.loads(response.data)


def listed_items(listed: Mapping[str, Any], kind: str) -> List[Obj]:
    """A list's items, each with the apiVersion and kind the API server leaves out of them."""
    items = listed.get("items") or []
    for item in items:
        item.setdefault("apiVersion", listed.get("apiVersion"))
        item.setdefault("kind", kind)
    return items


# Every Event posted is also a line of this log: an admin reading the operator's `kubectl logs`
# sees each action (drain, requeue, delete, reconfigure, key step) with its object and reason.
ACTIONS = logging.getLogger("slurmkube.actions")


def _describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return "%s %s/%s" % (obj.get("kind"), meta.get("namespace", ""), meta.get("name"))


class Kube:
    """The few calls the product makes, with errors turned into KubeError."""

    def __init__(self, client: Any, observe: Optional[Callable[[str], None]] = None) -> None:
        self.client = client
        self.dynamic = DynamicClient(client)
        self.writes = 0  # create/patch/delete calls made, to prove a no-op reconcile writes nothing
        # Told the verb of every call made (the operator counts them: slurmkube_operator_api_calls_total).
        self.observe = observe

    def called(self, verb: str) -> None:
        """One call of this verb is being made (exec: a command in a container, Slurm's through the controller)."""
        if self.observe is not None:
            self.observe(verb)

    def _resource(self, api_version: str, kind: str) -> Any:
        return self.dynamic.resources.get(api_version=api_version, kind=kind)

    def ping(self) -> None:
        """Ask the API server its version: proves the address and the credentials at once."""
        try:
            VersionApi(self.client).get_code()
        except Exception as exc:
            raise KubeError("cannot reach the Kubernetes API at %s: %s"
                            % (self.client.configuration.host, error_cause(exc))) from exc

    def get(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None) -> Optional[Obj]:
        """The object as a dict, or None when it does not exist."""
        self.called("get")
        try:
            return _json(self._resource(api_version, kind).get(name=name, namespace=namespace, serialize=False))
        except NotFoundError:
            return None
        except Exception as exc:
            raise KubeError("cannot read %s %s/%s: %s" % (kind, namespace or "", name, error_cause(exc))) from exc

    def list(self, api_version: str, kind: str, namespace: Optional[str] = None,
             labels: Optional[Mapping[str, str]] = None, fields: Optional[Mapping[str, str]] = None) -> List[Obj]:
        """Objects of a kind, optionally filtered by labels and by fields (spec.schedulerName)."""
        self.called("list")
        selector = ",".join("%s=%s" % kv for kv in sorted((labels or {}).items())) or None
        field_selector = ",".join("%s=%s" % kv for kv in sorted((fields or {}).items())) or None
        try:
            listed = _json(self._resource(api_version, kind).get(namespace=namespace, label_selector=selector,
                                                                 field_selector=field_selector, serialize=False))
        except Exception as exc:
            raise KubeError("cannot list %s in %s: %s"
                            % (kind, namespace or "all namespaces", error_cause(exc))) from exc
        return listed_items(listed, kind)

    def apply(self, obj: Mapping[str, Any], dry_run: bool = False) -> Obj:
        """Server-side apply with our field manager; returns the object as the server has it."""
        self.called("apply")
        meta = obj["metadata"]
        try:
            resource = self._resource(obj["apiVersion"], obj["kind"])
            kwargs = {"dry_run": "All"} if dry_run else {}
            result = resource.server_side_apply(body=dict(obj), name=meta["name"], namespace=meta.get("namespace"),
                                                field_manager=C.FIELD_MANAGER, force_conflicts=True, **kwargs)
        except Exception as exc:
            raise KubeError("cannot apply %s: %s" % (_describe(obj), error_cause(exc))) from exc
        if not dry_run:
            self.writes += 1
        return result.to_dict()

    def create(self, obj: Mapping[str, Any]) -> Obj:
        """Create an object; ConflictError when it exists (the loser of a race learns it)."""
        self.called("create")
        meta = obj["metadata"]
        try:
            result = self._resource(obj["apiVersion"], obj["kind"]).create(
                body=dict(obj), namespace=meta.get("namespace"), field_manager=C.FIELD_MANAGER)
        except ApiConflictError as exc:
            raise ConflictError("%s exists already" % _describe(obj)) from exc
        except Exception as exc:
            raise KubeError("cannot create %s: %s" % (_describe(obj), error_cause(exc))) from exc
        self.writes += 1
        return result.to_dict()

    def replace(self, obj: Mapping[str, Any]) -> Obj:
        """Replace an object whose metadata.resourceVersion we read; ConflictError when it changed since."""
        self.called("replace")
        meta = obj["metadata"]
        try:
            result = self._resource(obj["apiVersion"], obj["kind"]).replace(
                body=dict(obj), name=meta["name"], namespace=meta.get("namespace"), field_manager=C.FIELD_MANAGER)
        except ApiConflictError as exc:
            raise ConflictError("%s changed since it was read" % _describe(obj)) from exc
        except Exception as exc:
            raise KubeError("cannot replace %s: %s" % (_describe(obj), error_cause(exc))) from exc
        self.writes += 1
        return result.to_dict()

    def post_event(self, obj: Mapping[str, Any], kind: str, reason: str, message: str, source: str) -> None:
        """A Kubernetes Event about an object (what `kubectl describe` shows under Events), and the
        same as a log line (a Warning as a warning)."""
        self.called("post_event")
        meta = obj["metadata"]
        ACTIONS.log(logging.WARNING if kind == "Warning" else logging.INFO, "%s %s %s/%s: %s", reason, obj["kind"],
                    meta.get("namespace") or "", meta["name"], message)
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": meta["name"] + ".", "namespace": meta.get("namespace")},
            "involvedObject": {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"],
                               "namespace": meta.get("namespace"), "uid": meta.get("uid")},
            "type": kind, "reason": reason, "message": message[:1024], "count": 1,
            "firstTimestamp": now, "lastTimestamp": now, "source": {"component": source},
        }
        try:
            self._resource("v1", "Event").create(body=event, namespace=meta.get("namespace"))
        except Exception as exc:
            raise KubeError("cannot post event %s for %s: %s" % (reason, _describe(obj), error_cause(exc))) from exc
        self.writes += 1

    def apply_status(self, obj: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        """Server-side apply of the status subresource only."""
        self.called("apply_status")
        meta = obj["metadata"]
        body = {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                "metadata": {"name": meta["name"], "namespace": meta.get("namespace")}, "status": dict(status)}
        try:
            self._resource(obj["apiVersion"], obj["kind"]).status.server_side_apply(
                body=body, name=meta["name"], namespace=meta.get("namespace"),
                field_manager=C.FIELD_MANAGER, force_conflicts=True)
        except Exception as exc:
            raise KubeError("cannot update status of %s: %s" % (_describe(obj), error_cause(exc))) from exc
        self.writes += 1

    def merge_patch(self, api_version: str, kind: str, name: str, namespace: Optional[str],
                    patch: Mapping[str, Any]) -> Obj:
        """A JSON merge patch of a few fields of an object we can no longer render whole."""
        self.called("merge_patch")
        try:
            result = self._resource(api_version, kind).patch(body=dict(patch), name=name, namespace=namespace,
                                                             content_type="application/merge-patch+json",
                                                             field_manager=C.FIELD_MANAGER)
        except Exception as exc:
            raise KubeError("cannot patch %s %s/%s: %s" % (kind, namespace or "", name, error_cause(exc))) from exc
        self.writes += 1
        return result.to_dict()

    def delete(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None,
               propagation: str = "Background", grace_period_seconds: Optional[int] = None) -> bool:
        """Delete an object; False when it was already gone. A grace period of 0 removes a pod
        from the API at once, without its kubelet's word (a force delete)."""
        self.called("delete")
        body: Dict[str, Any] = {"propagationPolicy": propagation}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        try:
            self._resource(api_version, kind).delete(name=name, namespace=namespace, body=body)
        except NotFoundError:
            return False
        except Exception as exc:
            raise KubeError("cannot delete %s %s/%s: %s" % (kind, namespace or "", name, error_cause(exc))) from exc
        self.writes += 1
        return True

    def bind(self, namespace: str, pod: str, node: str) -> None:
        """Assign a pod to a node, as a scheduler does (the pods/binding subresource)."""
        self.called("bind")
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            CoreV1Api(self.client).create_namespaced_pod_binding(pod, namespace, body, _preload_content=False)
        except Exception as exc:
            raise KubeError("cannot bind pod %s/%s to node %s: %s" % (namespace, pod, node, error_cause(exc))) from exc
        self.writes += 1

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether the API server serves this kind at this version (a beta API may be off)."""
        try:
            self._resource(api_version, kind)
        except Exception:  # ResourceNotFoundError, or a group the server does not know at all
            return False
        return True

    def exec(self, namespace: str, pod: str, container: str, command: Sequence[str],
             timeout: int = 60) -> Tuple[int, str, str]:
        """Run a command in a container through the exec API: (exit code, stdout, stderr).

        On an ApiClient of its own: the library's stream() swaps the client's call_api for a
        websocket one while it runs and then puts back what it found. On the client the
        operator's threads share, their calls went over websocket meanwhile ("Handshake status
        200 OK": leases, lists and patches failed in CI's operator logs), and two execs that
        overlapped could leave the swap in place for good."""
        self.called("exec")
        own = ApiClient(self.client.configuration)
        try:
            resp = stream(CoreV1Api(own).connect_get_namespaced_pod_exec, pod, namespace,
                          container=container, command=list(command), stderr=True, stdin=False,
                          stdout=True, tty=False, _preload_content=False)
            resp.run_forever(timeout=timeout)
            out, err = resp.read_stdout(), resp.read_stderr()
            code = resp.returncode
            resp.close()
        except Exception as exc:
            raise KubeError("cannot exec %s in %s/%s: %s" % (command[0], namespace, pod, error_cause(exc))) from exc
        finally:
            own.close()
        return (code if code is not None else -1), out or "", err or ""
