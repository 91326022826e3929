"""spec.directory: SSSD beside the login, controller, worker and slurmdbd containers, its sockets theirs
(read-only) and the jobs' in the jail, sssd.conf from the spec without the bind password, the
spec refused naming the field when passwords would cross the network in clear; nothing of it
without a directory."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import render_cluster

LDAPS = {"uris": ["ldaps://ldap1.example.org", "ldaps://ldap2.example.org:636"], "searchBase": "dc=example,dc=org",
         "bindDn": "cn=reader,dc=example,dc=org", "bindPasswordSecret": "ldap-reader", "caSecret": "ldap-ca"}


# The pods whose daemons look users up: sshd, slurmctld, slurmd, slurmdbd.
LOOKING_UP = ("c1-login", "c1-controller", "c1-cpu", "c1-slurmdbd")


def rendered(directory: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The cluster's objects by kind/name."""
    cluster = parse_cluster({"metadata": {"name": "c1", "namespace": "hpc"},
                             "spec": {"directory": directory, "accounting": {"enabled": True}}})
    nodeset = parse_nodeset({"metadata": {"name": "cpu", "namespace": "hpc"}, "spec": {"clusterName": "c1"}})
    return {"%s/%s" % (o["kind"], o["metadata"]["name"]): o for o in render_cluster(cluster, [nodeset]).objects}


def pod_specs(objects: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    return {name: objects["StatefulSet/%s" % name]["spec"]["template"]["spec"]
            for name in LOOKING_UP}


def sidecars(pod: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [c for c in pod.get("initContainers") or [] if c["name"] == C.CONTAINER_SSSD]


def test_without_a_directory_no_sssd_anywhere_and_sshd_without_pam():
    objects = rendered({})
    assert "ConfigMap/%s" % names.sssd_config("c1") not in objects
    for pod in pod_specs(objects).values():
        assert not sidecars(pod)
        assert all(C.SSSD_PIPES_DIR not in str(c.get("volumeMounts")) for c in pod["containers"])
    sshd = objects["ConfigMap/c1-sshd-config"]["data"][C.SSHD_CONFIG_FILE]
    assert "UsePAM no" in sshd and "PasswordAuthentication no" in sshd
    assert C.SSSD_PIPES_DIR not in objects["ConfigMap/c1-slurm-config"]["data"]["plugstack.conf"]


def test_sssd_runs_first_beside_each_container_that_looks_users_up_and_shares_its_sockets_read_only():
    objects = rendered({"ldap": LDAPS})
    for name, pod in pod_specs(objects).items():
        (sssd,) = sidecars(pod)
        assert pod["initContainers"][0] is sssd or pod["initContainers"][0] == sssd, name
        assert sssd["restartPolicy"] == "Always" and sssd["image"] == "slurmkube/sssd:latest"
        assert sssd["startupProbe"]["exec"]["command"] == ["test", "-S", C.SSSD_PIPES_DIR + "/nss"]
        assert sssd["securityContext"]["readOnlyRootFilesystem"] is True
        assert sssd["securityContext"]["capabilities"]["drop"] == ["ALL"]
        password = [e for e in sssd["env"] if e["name"] == C.ENV_DIRECTORY_BIND_PASSWORD]
        assert password == [{"name": C.ENV_DIRECTORY_BIND_PASSWORD, "valueFrom": {"secretKeyRef": {
            "name": "ldap-reader", "key": C.DIRECTORY_PASSWORD_SECRET_KEY}}}]
        assert {"name": "directory-ca", "mountPath": C.DIRECTORY_CA_MOUNT_DIR, "readOnly": True} in sssd["volumeMounts"]
        for container in pod["containers"]:
            pipes = [m for m in container["volumeMounts"] if m["mountPath"] == C.SSSD_PIPES_DIR]
            assert pipes == [{"name": "sssd-pipes", "mountPath": C.SSSD_PIPES_DIR, "readOnly": True}], name
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["directory-ca"]["secret"]["secretName"] == "ldap-ca"
        assert volumes["sssd-template"]["configMap"]["name"] == names.sssd_config("c1")
    # The jobs see the sockets in the jail, read-only; nothing else of plugstack.conf changes.
    plugstack = objects["ConfigMap/c1-slurm-config"]["data"]["plugstack.conf"]
    assert "binds=/etc/hosts:ro,/etc/resolv.conf:ro,%s,%s:ro " % (C.NODE_TMP_DIR, C.SSSD_PIPES_DIR) in plugstack


def test_sssd_conf_follows_the_spec_and_never_holds_the_bind_password():
    conf = rendered({"ldap": dict(LDAPS, uris=["ldap://ldap.example.org"], schema="rfc2307bis", minId=5000,
                                  userSearchBase="ou=people,dc=example,dc=org")})[
        "ConfigMap/%s" % names.sssd_config("c1")]["data"][C.SSSD_CONFIG_FILE]
    lines = conf.splitlines()
    for line in ("services = nss, pam", "filter_users = root", "[domain/directory]", "id_provider = ldap",
                 "ldap_uri = ldap://ldap.example.org", "ldap_search_base = dc=example,dc=org",
                 "ldap_user_search_base = ou=people,dc=example,dc=org", "ldap_schema = rfc2307bis", "min_id = 5000",
                 "ldap_default_bind_dn = cn=reader,dc=example,dc=org", "ldap_tls_reqcert = demand",
                 "ldap_tls_cacert = %s/%s" % (C.DIRECTORY_CA_MOUNT_DIR, C.DIRECTORY_CA_SECRET_KEY),
                 "ldap_id_use_start_tls = true"):
        assert line in lines, line
    assert "authtok" not in conf and "ldap_group_search_base" not in conf


def test_login_uses_pam_makes_homes_and_takes_passwords_only_when_asked():
    plain = rendered({"ldap": LDAPS})
    sshd = plain["ConfigMap/c1-sshd-config"]["data"][C.SSHD_CONFIG_FILE]
    assert "UsePAM yes" in sshd and "PasswordAuthentication no" in sshd
    login = pod_specs(plain)["c1-login"]["containers"][0]
    assert {"name": C.ENV_DIRECTORY_MAKE_HOMES, "value": "1"} in login["env"]
    with_passwords = rendered({"ldap": LDAPS, "passwordLogin": True, "makeHomes": False})
    assert "PasswordAuthentication yes" in with_passwords["ConfigMap/c1-sshd-config"]["data"][C.SSHD_CONFIG_FILE]
    login = pod_specs(with_passwords)["c1-login"]["containers"][0]
    assert C.ENV_DIRECTORY_MAKE_HOMES not in {e["name"] for e in login["env"]}


def test_a_changed_sssd_conf_rolls_the_pods_it_runs_in():
    def digests(directory: Dict[str, Any]) -> Dict[str, str]:
        objects = rendered(directory)
        return {name: objects["StatefulSet/%s" % name]["spec"]["template"]["metadata"]["annotations"][
            C.ANNOTATION_CONFIG_HASH] for name in LOOKING_UP}

    none, first, same, other = (digests({}), digests({"ldap": LDAPS}), digests({"ldap": LDAPS}),
                                digests({"ldap": dict(LDAPS, minId=2000)}))
    assert first == same
    for name in none:
        assert len({none[name], first[name], other[name]}) == 3, name


@pytest.mark.parametrize("directory, message", [
    ({"passwordLogin": True}, "spec.directory.passwordLogin: is a directory password"),
    ({"ldap": {"searchBase": "dc=x"}}, "spec.directory.ldap.uris: name at least one server"),
    ({"ldap": {"uris": ["ldap://x"]}}, "spec.directory.ldap.searchBase: is required"),
    ({"ldap": {"uris": ["ldap://x"], "searchBase": "dc=x", "bindDn": "cn=r,dc=x"}},
     "spec.directory.ldap.bindPasswordSecret: and bindDn go together"),
    ({"ldap": {"uris": ["ldap://x"], "searchBase": "dc=x"}, "passwordLogin": True},
     "spec.directory.ldap.caSecret: is required with passwordLogin"),
    ({"ldap": {"uris": ["ldap://x"], "searchBase": "dc=x", "bindDn": "cn=r,dc=x", "bindPasswordSecret": "s"}},
     "spec.directory.ldap.caSecret: is required with bindDn"),
    ({"ldap": {"uris": ["ldap://x, ldap://y"], "searchBase": "dc=x"}}, "spec.directory.ldap.uris[0]: must match"),
    ({"ldap": {"uris": ["ldap://x"], "searchBase": "dc=x\nldap_uri = ldap://evil"}},
     "spec.directory.ldap.searchBase: must not contain control characters"),
])
def test_a_directory_that_would_not_work_or_would_send_passwords_in_clear_is_refused(directory, message):
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_cluster({"metadata": {"name": "c1", "namespace": "hpc"}, "spec": {"directory": directory}})
