"""The admission policy for spec authors: rendered from the admin's lists and the model's
defaults, applied, left alone or removed as the slurm_operator module's option says."""

from __future__ import annotations

import pytest
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_operator import (
    InstallError,
    OperatorSettings,
    admission_settings,
    ensure_operator,
    remove_operator,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.admission import (
    AdmissionRules,
    cel_list,
    render_admission_policy,
)

OPTION = {"state": "present", "image_prefixes": ["registry.example.com/hpc/"], "host_path_prefixes": ["/mnt/nvme/"],
          "munge_secret_names": [], "privileged_config": False, "database_secret_names": []}


def test_the_policy_checks_images_with_the_models_defaults_host_paths_secrets_and_root_programs():
    policy, binding = render_admission_policy("ops", AdmissionRules(("registry.example.com/",)), ("hpc-a",))
    checks = policy["spec"]["validations"]
    assert [c["message"].partition(":")[0] for c in checks] == [
        "spec.images", "spec.jail.subMounts[].hostPath", "spec.munge.secretName",
        "spec.accounting.database.passwordSecret", "spec.slurm.privilegedConfig"]
    # a spec naming no image gets the model's default, which must be allowed too
    assert '"slurmkube/worker:latest"' in checks[0]["expression"]
    # an optional part's image counts only where the spec turns the part on
    for part, image in (("accounting", "slurmdbd"), ("exporter", "exporter")):
        guarded = "object.spec.%s.enabled) ? [(has(object.spec) && has(object.spec.images) && " \
            "has(object.spec.images.%s)" % (part, image)
        assert guarded in checks[0]["expression"], checks[0]["expression"]
    # the backup image also where a restore is named, backups off (its Job runs it)
    guarded = "object.spec.backup.enabled) || (has(object.spec) && has(object.spec.backup) && " \
        "has(object.spec.backup.restore) && has(object.spec.backup.restore.name)) ? [(has(object.spec) && " \
        "has(object.spec.images) && has(object.spec.images.backup)"
    assert guarded in checks[0]["expression"], checks[0]["expression"]
    # the SSSD image where a directory is set (spec.directory has no enabled switch)
    guarded = "((has(object.spec) && has(object.spec.directory) && has(object.spec.directory.ldap)) ? " \
        "[(has(object.spec) && has(object.spec.images) && has(object.spec.images.sssd)"
    assert guarded in checks[0]["expression"], checks[0]["expression"]
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == ["slurmclusters"]
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"], "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["hpc-a"]}]}}}
    everywhere = render_admission_policy("ops", AdmissionRules(), ())[1]
    assert "matchResources" not in everywhere["spec"]


def test_root_programs_are_checked_only_when_not_allowed():
    allowed = render_admission_policy("ops", AdmissionRules(privileged_config=True))[0]
    assert not [c for c in allowed["spec"]["validations"] if "privilegedConfig" in c["message"]]


def test_admin_strings_become_cel_literals_that_cannot_end_the_expression():
    assert cel_list(['a"b', "c\\d"]) == '["a\\"b", "c\\\\d"]'


def test_the_option_is_checked_before_anything_is_written():
    for key, bad in (("image_prefixes", ""), ("host_path_prefixes", "relative"), ("host_path_prefixes", "/a/../etc"),
                     ("munge_secret_names", "Not A Name"), ("database_secret_names", "x_y")):
        with pytest.raises(InstallError, match="admission_policy.%s" % key):
            admission_settings(dict(OPTION, **{key: [bad]}))
    rules, remove = admission_settings(OPTION)
    assert rules.host_path_prefixes == ("/mnt/nvme",) and not remove
    assert admission_settings(None) == (None, False)
    assert admission_settings(dict(OPTION, state="absent")) == (None, True)


def policy_objects(kube, name="slurmkube-operator-ops"):
    """This install's policy and binding (the spec rules' live beside the CRDs)."""
    return [o for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
            for o in kube.list(C.ADMISSION_API, kind) if o["metadata"]["name"] == name]


def test_the_spec_rules_policy_comes_and_goes_with_the_crds():
    kube = MemoryKube()
    ensure_operator(kube, OperatorSettings("ops", "img"), check_mode=False)
    assert len(policy_objects(kube, "slurmkube-spec-rules")) == 2
    remove_operator(kube, "ops", remove_crds=False, check_mode=False)
    assert len(policy_objects(kube, "slurmkube-spec-rules")) == 2
    remove_operator(kube, "ops", remove_crds=True, check_mode=False)
    assert not policy_objects(kube, "slurmkube-spec-rules")


def test_left_out_the_policy_stays_absent_removes_it_and_so_does_removing_the_operator():
    kube = MemoryKube()
    rules = admission_settings(OPTION)[0]
    ensure_operator(kube, OperatorSettings("ops", "img", admission=rules), check_mode=False)
    assert len(policy_objects(kube)) == 2
    assert not ensure_operator(kube, OperatorSettings("ops", "img"), check_mode=False).changed
    assert len(policy_objects(kube)) == 2
    gone = ensure_operator(kube, OperatorSettings("ops", "img", remove_admission=True), check_mode=False)
    assert gone.changed and not policy_objects(kube)
    ensure_operator(kube, OperatorSettings("ops", "img", admission=rules), check_mode=False)
    remove_operator(kube, "ops", remove_crds=False, check_mode=False)
    assert not policy_objects(kube)
