#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_healthcheck
short_description: Configure a Slurm cluster's node health checks, or run them now
version_added: "0.2.0"
description:
  - Sets the health checks of a C(SlurmCluster) (its C(spec.healthChecks)) - which fast checks
    run, their thresholds, the long checks and whether drained nodes are replaced - by merging
    O(checks) into the live spec. The model validates the result before anything is written, and
    only a changed spec is written. In check mode the change is sent as a server-side dry run.
  - With O(run_now=true) it runs the fast check of chosen nodes at once, in their worker pods,
    and returns each node's problems; with O(drain=true) it drains the failing nodes with reason
    C(slurmkube:) followed by the problems. A drain set by someone else is never rewritten.
  - Despite its name it serves CPU-only clusters too; the GPU checks run only on nodes with GPUs.
author:
  - slurmkube maintainers (@slurmkube)
options:
  name:
    description: Name of the SlurmCluster.
    type: str
    required: true
  namespace:
    description: Namespace of the SlurmCluster.
    type: str
    default: default
  checks:
    description:
      - Settings merged into C(spec.healthChecks), with the CRD's camelCase keys, for example
        C(interval), C(checks), C(scratchMinFreeMib), C(gpuMaxTemperatureCelsius),
        C(gpuCriticalXids), C(replaceDrainedNodes) or C(longChecks) (itself merged key by key).
      - Keys left out keep their current values. When M(slurmkube.core.slurm_cluster) later
        applies a spec without them, that spec wins; keep both in one place.
    type: dict
    default: {}
  run_now:
    description: Run the fast check on O(nodes) now and return the results.
    type: bool
    default: false
  nodes:
    description: Slurm nodes (worker pod names) to check with O(run_now); every worker when empty.
    type: list
    elements: str
    default: []
  drain:
    description:
      - With O(run_now), drain the nodes whose check fails. In check mode nothing is drained and
        RV(node_results) tells which nodes would be.
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - slurmkube.core.kube_auth
seealso:
  - module: slurmkube.core.slurm_cluster_info
  - module: slurmkube.core.slurm_cluster
attributes:
  check_mode:
    support: full
    description: Settings are sent as a server-side dry run; checks run, drains do not.
  diff_mode:
    support: full
    description: Shows C(spec.healthChecks) before and after.
"""

EXAMPLES = r"""
- name: Tighter GPU checks, and replace nodes with broken hardware
  slurmkube.core.gpu_healthcheck:
    name: ml
    namespace: slurm
    checks:
      interval: 30
      gpuMaxTemperatureCelsius: 80
      replaceDrainedNodes: true
      longChecks:
        enabled: true
        schedule: "0 3 * * *"
        minNcclBusBandwidthGbPerSecond: 150

- name: Check two nodes now and drain them if they fail
  slurmkube.core.gpu_healthcheck:
    name: ml
    namespace: slurm
    run_now: true
    nodes: [ml-h100-0, ml-h100-1]
    drain: true
  register: check

- name: Show what failed
  ansible.builtin.debug:
    msg: "{{ check.node_results | dict2items | rejectattr('value.healthy') | list }}"
"""

RETURN = r"""
health_checks:
  description: The cluster's C(spec.healthChecks) after the change (as sent; the model's defaults fill the rest).
  returned: always
  type: dict
  sample: {"interval": 30, "replaceDrainedNodes": true}
node_results:
  description: Per node, with O(run_now=true) - healthy, its problems, and whether it was (would be) drained.
  returned: when O(run_now=true)
  type: dict
  sample: {"ml-h100-0": {"healthy": false, "problems": ["gpu 00000000:34:00.0: 1 uncorrectable ECC errors (max 0)"],
                         "drained": true}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import kube_for, with_common
from ansible_collections.slurmkube.core.plugins.module_utils.ops.gpu_healthcheck import (
    HEALTH_CHECKS_KEY,
    configure,
    drain_failed,
    live_cluster,
    run_checks,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=with_common({
            "name": {"type": "str", "required": True},
            "namespace": {"type": "str", "default": "default"},
            "checks": {"type": "dict", "default": {}},
            "run_now": {"type": "bool", "default": False},
            "nodes": {"type": "list", "elements": "str", "default": []},
            "drain": {"type": "bool", "default": False},
        }),
        supports_check_mode=True,
    )
    p = module.params
    if p["drain"] and not p["run_now"]:
        module.fail_json(msg="drain: drains the nodes a check run finds bad; it needs run_now=true")
    result = {"changed": False}
    try:
        kube = kube_for(module)
        spec = live_cluster(kube, p["name"], p["namespace"]).get("spec") or {}
        result["health_checks"] = spec.get(HEALTH_CHECKS_KEY) or {}
        if p["checks"]:
            change = configure(kube, p["name"], p["namespace"], p["checks"], module.check_mode)
            result["changed"] = change.changed
            if change.changed:
                result["health_checks"] = change.diffs[0]["after"]
            if module._diff:
                result["diff"] = change.diffs
        if p["run_now"]:
            results = run_checks(kube, p["name"], p["namespace"], p["nodes"])
            if p["drain"]:
                results = drain_failed(kube, p["name"], p["namespace"], results, module.check_mode)
                result["changed"] = result["changed"] or any(r.drained for r in results.values())
            # Not "results": Ansible keeps that key for loops and renames it in a module result.
            result["node_results"] = {node: r.as_dict() for node, r in results.items()}
    except SlurmkubeError as exc:
        module.fail_json(msg=str(exc), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
