# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pass's step that makes the cluster's secrets once: the munge key, the ssh host keys, the
accounting database password and the REST API's JWT keys. An existing Secret is never replaced
(munge_key.py rolls a new key that an admin put in the Secret)."""

from __future__ import annotations

from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import new_key_set
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import owned_by
from ansible_collections.slurmkube.core.plugins.module_utils.keys import (
    new_db_password,
    new_munge_key,
    new_ssh_host_keys,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    accounting_db_secret_name,
    munge_secret_name,
    runs_slurmdbd,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import Pass
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Event
from ansible_collections.slurmkube.core.plugins.module_utils.render.login import HOST_KEY_TYPES
from ansible_collections.slurmkube.core.plugins.module_utils.render.secrets import (
    render_db_password_secret,
    render_host_keys_secret,
    render_jwt_keys_secret,
    render_munge_secret,
)


def ensure_secrets(p: Pass) -> None:
    """Create the munge key, ssh host keys and the accounting database password once; never
    replace existing ones."""
    kube, cluster, owner = p.kube, p.cluster, p.cluster_obj
    if kube.get("v1", "Secret", munge_secret_name(cluster), cluster.namespace) is None:
        kube.apply(owned_by(render_munge_secret(cluster, new_munge_key()), owner))
        p.events.append(Event("Normal", "MungeKeyCreated", "generated munge key %s" % munge_secret_name(cluster)))
    if kube.get("v1", "Secret", names.ssh_host_keys_secret(cluster.name), cluster.namespace) is None:
        kube.apply(owned_by(render_host_keys_secret(cluster, new_ssh_host_keys(HOST_KEY_TYPES)), owner))
        p.events.append(Event("Normal", "HostKeysCreated", "generated ssh host keys"))
    # An admin's Secret (spec.accounting.database.passwordSecret) is never made here.
    generated = runs_slurmdbd(cluster) and not cluster.spec.accounting.database.password_secret
    if generated and kube.get("v1", "Secret", accounting_db_secret_name(cluster), cluster.namespace) is None:
        kube.apply(owned_by(render_db_password_secret(cluster, new_db_password()), owner))
        p.events.append(Event("Normal", "DatabasePasswordCreated",
                              "generated accounting database password %s" % accounting_db_secret_name(cluster)))
    jwt_keys = names.jwt_keys_secret(cluster.name)
    if cluster.spec.rest.enabled and kube.get("v1", "Secret", jwt_keys, cluster.namespace) is None:
        keys = new_key_set()
        kube.apply(owned_by(render_jwt_keys_secret(cluster, keys), owner))
        p.events.append(Event("Normal", "JwtKeysCreated", "generated the REST API's signing key %s in %s"
                              % (keys.signing, jwt_keys)))
