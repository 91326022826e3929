#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: jail_user
short_description: Ensure a Linux user in a Slurm cluster's jail, with its ssh keys
version_added: "0.2.0"
description:
  - Adds, changes or removes a user in the jail, the shared root filesystem that login
    sessions and jobs run in. Login and controller pods read accounts from the jail, and
    jobs on every worker run inside it, so the user exists on every node at once.
  - The jail's own C(useradd), C(usermod), C(groupadd) and C(userdel) are run inside the
    jail (C(chroot)) in a pod that mounts it, through the Kubernetes exec API; by default a
    ready login pod of the cluster, else a worker pod.
  - Only what differs is changed. The user's C(authorized_keys) is read and written as the
    user inside the jail.
  - A new user gets no password but is not locked (shadow C(*)), so ssh key logins work.
author:
  - slurmkube maintainers (@slurmkube)
options:
  cluster:
    description:
      - Name of the SlurmCluster whose jail holds the user.
      - One of O(cluster) and O(pod) is required.
    type: str
  namespace:
    description: Namespace of the cluster.
    type: str
    default: default
  pod:
    description:
      - Run the account tools in this pod instead of one of the cluster's login or worker pods.
        One of its containers must mount the jail at O(jail_path).
    type: str
  jail_path:
    description: Where the pod mounts the jail.
    type: str
    default: /mnt/jail
  name:
    description: The user's name.
    type: str
    required: true
  state:
    description:
      - V(present) ensures the user; V(absent) removes it (its home stays unless
        O(remove_home=true)).
    type: str
    choices: [present, absent]
    default: present
  uid:
    description:
      - The user's uid; the jail's next free one for a new user when unset. A uid another
        user holds is refused.
    type: int
  group:
    description:
      - The user's primary group; created when it does not exist.
      - A new user gets a group named like the user when unset.
    type: str
  gid:
    description:
      - The primary group's gid. Used when the group is created; an existing group with
        another gid, or a gid another group holds, is refused.
    type: int
  groups:
    description:
      - Supplementary groups; they must exist in the jail. The list is complete unless
        O(append=true). Not managed when unset.
    type: list
    elements: str
  append:
    description: Add the user to O(groups) without removing it from others.
    type: bool
    default: false
  shell:
    description: Login shell; C(/bin/bash) for a new user when unset.
    type: str
  home:
    description:
      - Home directory inside the jail; C(/home/<name>) for a new user when unset. A changed
        home is moved.
    type: str
  ssh_authorized_keys:
    description:
      - The user's complete list of ssh public keys, one per item; the login nodes' sshd
        reads them from C(<home>/.ssh/authorized_keys) in the jail. Not managed when unset.
    type: list
    elements: str
  remove_home:
    description: With O(state=absent), also delete the home directory and its files.
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - slurmkube.core.kube_auth
seealso:
  - module: slurmkube.core.jail_volume
  - module: slurmkube.core.slurm_user
attributes:
  check_mode:
    support: full
    description: The jail is read and nothing is changed.
  diff_mode:
    support: full
    description: Shows the passwd line, supplementary groups and keys before and after.
notes:
  - The cluster must be up (a ready login or worker pod); the jail must be populated.
"""

EXAMPLES = r"""
- name: A user who can ssh to the login nodes and run jobs on every node
  slurmkube.core.jail_user:
    cluster: demo
    namespace: slurm
    name: alice
    uid: 2001
    gid: 2001
    ssh_authorized_keys:
      - "{{ lookup('ansible.builtin.file', 'files/alice.pub') }}"
  register: alice

- name: Remove the user, keep the home directory
  slurmkube.core.jail_user:
    cluster: demo
    namespace: slurm
    name: alice
    state: absent
"""

RETURN = r"""
user:
  description: The user as the jail holds it (in check mode, as it would); empty when it does not exist.
  returned: always
  type: dict
  sample:
    name: alice
    uid: 2001
    gid: 2001
    group: alice
    groups: []
    home: /home/alice
    shell: /bin/bash
    passwd: "alice:x:2001:2001::/home/alice:/bin/bash"
    ssh_authorized_keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG5v alice@laptop"]
pod:
  description: The pod the account tools ran in.
  returned: always
  type: str
  sample: demo-login-0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import kube_for, with_common
from ansible_collections.slurmkube.core.plugins.module_utils.ops.jail_user import (
    JailAccounts,
    ensure_user,
    find_jail_pod,
    wanted_from_params,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=with_common({
            "cluster": {"type": "str"},
            "namespace": {"type": "str", "default": "default"},
            "pod": {"type": "str"},
            "jail_path": {"type": "str", "default": C.JAIL_MOUNT_PATH},
            "name": {"type": "str", "required": True},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "uid": {"type": "int"},
            "group": {"type": "str"},
            "gid": {"type": "int"},
            "groups": {"type": "list", "elements": "str"},
            "append": {"type": "bool", "default": False},
            "shell": {"type": "str"},
            "home": {"type": "str"},
            "ssh_authorized_keys": {"type": "list", "elements": "str", "no_log": False},
            "remove_home": {"type": "bool", "default": False},
        }),
        required_one_of=[("cluster", "pod")],
        supports_check_mode=True,
    )
    p = module.params
    try:
        want = wanted_from_params(p)
        kube = kube_for(module)
        pod, container = find_jail_pod(kube, p["namespace"], p["cluster"], p["pod"], p["jail_path"])
        jail = JailAccounts(lambda argv: kube.exec(p["namespace"], pod, container, argv), p["jail_path"])
        result = ensure_user(jail, want, module.check_mode)
    except SlurmkubeError as exc:
        module.fail_json(msg=str(exc))
    out = {"changed": result.changed, "user": result.user, "pod": pod}
    if module._diff:
        out["diff"] = result.diff
    module.exit_json(**out)


if __name__ == "__main__":
    main()
