"""The admin's manual cannot rot: every command block of a guide is run by a test against a real
cluster, every spec block is one the model accepts (tests/manual_blocks.py says how blocks are
marked), and its build resolves Ansible's own labels offline."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Dict, List

import pytest
import yaml
from collection_path import REPO
from manual_blocks import MANUAL, RUNNERS, Block, as_run, guide_blocks, manual_blocks

from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster

TESTS = REPO / "tests"
SHOWN = ("text",)  # output, never run


def test_every_block_of_the_guides_is_run_by_a_test_or_checked_by_the_model():
    blocks = manual_blocks()
    assert blocks, "no guide under docs/manual"
    unmarked = [b.where for b in blocks
                if not b.mark and b.language not in SHOWN and not b.language.startswith("{")]
    assert not unmarked, "blocks neither run nor checked (mark them <!-- run: ID --> or <!-- spec -->): %s" % unmarked
    wrong = [b.where for b in blocks if b.mark and b.language not in ("bash", "yaml")]
    wrong += [b.where for b in blocks if b.mark == "spec" and b.language != "yaml"]
    assert not wrong, "a marked block is bash or yaml (spec: yaml): %s" % wrong


def named_in_tests() -> Dict[str, List[str]]:
    """Command block ID -> the test files that run it (the unit tier's aside)."""
    calls = re.compile(r"\b(?:%s)\(\s*\"([a-z0-9-]+)\"" % "|".join(RUNNERS))
    found: Dict[str, List[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        if (TESTS / "unit") in path.parents:
            continue
        for block_id in calls.findall(path.read_text()):
            found.setdefault(block_id, []).append(str(path.relative_to(REPO)))
    return found


def test_each_command_block_has_one_id_and_a_test_that_runs_it():
    ids = [b.mark for b in manual_blocks() if b.mark and b.mark != "spec"]
    assert len(ids) == len(set(ids)), "an ID marks two blocks: %s" % sorted(i for i in ids if ids.count(i) > 1)
    run = named_in_tests()
    assert not set(ids) - set(run), "command blocks no test runs: %s" % sorted(set(ids) - set(run))
    assert not set(run) - set(ids), "tests run blocks the guides no longer have: %s" % {
        i: run[i] for i in set(run) - set(ids)}


@pytest.mark.parametrize("block", [b for b in manual_blocks() if b.mark == "spec"], ids=lambda b: b.where)
def test_a_spec_block_is_a_cluster_the_model_accepts(block: Block):
    fragment = yaml.safe_load(block.text)
    assert set(fragment) == {"spec"}, "%s: a spec block holds spec: alone" % block.where
    parse_cluster({"apiVersion": "slurmkube.io/v1alpha1", "kind": "SlurmCluster",
                   "metadata": {"name": "demo", "namespace": "slurm"}, "spec": fragment["spec"]})


def test_blocks_are_read_with_their_marks_and_a_block_left_open_is_an_error(tmp_path: Path):
    guide = tmp_path / "guide.md"
    guide.write_text("# A guide\n\n<!-- run: look -->\n```bash\nkubectl -n slurm get pods\n```\n\n"
                     "Says:\n\n```text\nNAME READY\n```\n\n<!-- spec -->\n```yaml\nspec: {}\n```\n")
    blocks = guide_blocks(guide)
    assert [(b.line, b.language, b.mark, b.text) for b in blocks] == [
        (4, "bash", "look", "kubectl -n slurm get pods\n"), (10, "text", "", "NAME READY\n"),
        (15, "yaml", "spec", "spec: {}\n")]
    guide.write_text("```bash\nnever closed\n")
    with pytest.raises(AssertionError, match="never ends"):
        guide_blocks(guide)


def test_a_guides_names_become_the_tests_and_nothing_else_changes():
    text = ("kubectl -n slurm create job --from=cronjob/demo-backup demo-backup-now\n"
            "kubectl -n slurmkube-system logs deployment/slurmkube-operator | grep slurmkube.actions\n"
            "- slurmkube.core.slurm_restore:\n    cluster: demo\n    namespace: slurm\n"
            "    name: demonstration  # slurm.conf, the slurmkube-system namespace\n")
    assert as_run(text, "acct", "k8s-test-1", "ops") == (
        "kubectl -n k8s-test-1 create job --from=cronjob/acct-backup acct-backup-now\n"
        "kubectl -n ops logs deployment/slurmkube-operator | grep slurmkube.actions\n"
        "- slurmkube.core.slurm_restore:\n    cluster: acct\n    namespace: k8s-test-1\n"
        "    name: demonstration  # slurm.conf, the slurmkube-system namespace\n")
    assert "-n k8s-test-1 logs" in as_run("kubectl -n slurmkube-system logs x", "acct", "k8s-test-1")


def sphinx_conf():
    spec = importlib.util.spec_from_file_location("manual_conf", MANUAL / "conf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("label, url", [
    ("ansible_collections.community.okd.k8s_auth_module",
     "https://docs.ansible.com/ansible/latest/collections/community/okd/k8s_auth_module.html"),
    ("ansible_collections.kubernetes.core.k8s_info_module",
     "https://docs.ansible.com/ansible/latest/collections/kubernetes/core/k8s_info_module.html"),
    ("common_return_values", "https://docs.ansible.com/ansible/latest/reference_appendices/common_return_values.html"),
    ("ansible_collections.slurmkube.core.slurm_cluster_module", None),
    ("backups", None),
])
def test_the_manual_links_ansibles_own_labels_to_its_site_and_leaves_ours_to_fail(label, url):
    assert sphinx_conf().ansible_docs_url(label) == url
