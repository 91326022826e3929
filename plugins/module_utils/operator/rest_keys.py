# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pass's step that keeps the REST API's key set (jwt.py): given a next key when it has none,
rid of the keys a rotation retired once the tokens they signed have expired. The set as it then
stands is p.rest_keys: reconfigure.py puts it in effect on slurmctld with the configuration, and
slurmdbd, which reads it only at start, is replaced when a key leaves it (render/accounting.py).
Rotations themselves are the rest_keys module's: it writes the Secret, this carries it out."""

from __future__ import annotations

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import (
    key_set_from_text,
    with_next_key,
    without_retired,
)
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import owned_by
from ansible_collections.slurmkube.core.plugins.module_utils.keys import SecretError
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import Pass
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Event
from ansible_collections.slurmkube.core.plugins.module_utils.render.secrets import (
    render_jwt_keys_secret,
    secret_value,
)


def keep_rest_keys(p: Pass) -> None:
    """The key set, completed and pruned, in p.rest_keys (None without the REST API, or with a
    Secret that cannot be read: a Warning says why, and the set in effect stays)."""
    cluster = p.cluster
    if not cluster.spec.rest.enabled:
        return
    # Until reconfigure.py puts another in effect (a pass that ends early keeps what was).
    p.rest_keys_in_effect = (p.previous_status.get("restKeys") or {}).get("inEffect", "")
    name = names.jwt_keys_secret(cluster.name)
    secret = p.kube.get("v1", "Secret", name, cluster.namespace)
    if secret is None:
        return
    try:
        keys = key_set_from_text(secret_value(secret, C.JWT_SIGNING_SECRET_KEY).decode("ascii"))
    except (SecretError, UnicodeDecodeError) as exc:
        p.events.append(Event("Warning", "JwtKeysUnusable", "Secret %s: %s" % (name, exc)))
        return
    kept = without_retired(with_next_key(keys), int(p.clock().timestamp()))
    if kept != keys:
        p.kube.apply(owned_by(render_jwt_keys_secret(cluster, kept), p.cluster_obj))
        if kept.next != keys.next:
            p.events.append(Event("Normal", "JwtKeyPublished", "published the REST API's next key %s in %s; it "
                                  "signs after the next rotation" % (kept.next, name)))
        for kid in sorted(set(keys.private) - set(kept.private)):
            p.events.append(Event("Normal", "JwtKeyRetired", "retired the REST API's key %s from %s: the tokens "
                                  "it signed have expired" % (kid, name)))
    p.rest_keys = kept
