"""The model accepts good specs with the documented defaults and rejects bad ones by name."""

from __future__ import annotations

import pytest
from example_clusters import EXAMPLES, example

from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    munge_secret_name,
    slurm_cpus,
    slurm_job_memory_mib,
    slurm_mem_spec_limit_mib,
    slurm_node_names,
    slurm_real_memory_mib,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.model.rules import check_references
from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import render_slurm_conf


def cluster(spec=None, name="demo", namespace="hpc"):
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec or {}}


def nodeset(spec=None, name="cpu", namespace="hpc"):
    full = {"clusterName": "demo"}
    full.update(spec or {})
    return {"metadata": {"name": name, "namespace": namespace}, "spec": full}


def problems_of(parse, resource):
    with pytest.raises(SpecError) as info:
        parse(resource)
    return dict(info.value.problems)


def message_of(parse, resource):
    with pytest.raises(SpecError) as info:
        parse(resource)
    return str(info.value)


def test_empty_cluster_spec_gets_defaults():
    model = parse_cluster(cluster())
    assert model.spec.login.replicas == 1
    assert model.spec.login.service_type == "NodePort"
    assert model.spec.jail.user_paths == ["/home", "/root"]
    assert model.spec.slurm.max_node_count == 1024
    assert model.spec.health_checks.enabled is True
    assert munge_secret_name(model) == "demo-munge-key"


def test_missing_namespace_means_default():
    assert parse_cluster({"metadata": {"name": "demo"}, "spec": {}}).namespace == "default"


@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_are_valid(name):
    cl, sets = example(name)
    check_references(cl, sets)


@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [
        ({"replicas": -1}, "spec.replicas", "must be at least 0, got -1"),
        ({"replicas": "3"}, "spec.replicas", "must be an integer, got '3'"),
        ({"resources": {"cpu": "500m"}}, "spec.resources.cpu", "whole number of CPUs"),
        ({"resources": {"cpu": "0"}}, "spec.resources.cpu", "must be more than 0, got '0'"),
        ({"resources": {"memory": "lots"}}, "spec.resources.memory", "Kubernetes quantity"),
        ({"resources": {"memory": "256Mi"}}, "spec.resources.memory", "at least 512Mi"),
        ({"resources": {"gpus": -2}}, "spec.resources.gpus", "at least 0"),
        ({"resources": {"cpu": 2, "cpuRequest": "3"}}, "spec.resources.cpuRequest", "at most cpu (2), got '3'"),
        ({"gpuType": "h100"}, "spec.gpuType", "needs resources.gpus > 0"),
        ({"gres": ["gpu:4"]}, "spec.gres[0]", "GPUs come from resources.gpus"),
        ({"gres": ["nic 4"]}, "spec.gres[0]", "name[:type]:count"),
        ({"features": ["has space"]}, "spec.features[0]", "has space"),
        ({"replica": 3}, "spec.replica", "unknown field; known fields are"),
        ({"drainTimeoutSeconds": True}, "spec.drainTimeoutSeconds", "must be an integer, got True"),
        ({"clusterName": "Bad_Name"}, "spec.clusterName", "must match"),
    ],
)
def test_bad_nodeset_specs_name_field_and_value(spec, path, fragment):
    problems = problems_of(parse_nodeset, nodeset(spec))
    assert path in problems, problems
    assert fragment in problems[path]


@pytest.mark.parametrize("name", ["rest", "controller", "login", "login-hosts", "slurmdbd", "mariadb", "exporter"])
def test_a_nodeset_may_not_take_the_name_of_the_clusters_own_objects(name):
    """Its StatefulSet and Service would be '<cluster>-<name>', the name of the REST API's Service,
    the controller's StatefulSet, ..."""
    problems = problems_of(parse_nodeset, {"metadata": {"name": name}, "spec": {"clusterName": "hpc"}})
    assert "the cluster's own StatefulSets and Services" in problems["metadata.name"], problems


def test_nodeset_without_cluster_name_is_rejected():
    problems = problems_of(parse_nodeset, {"metadata": {"name": "cpu"}, "spec": {}})
    assert problems["spec.clusterName"] == "is required"


def test_every_problem_is_reported_at_once():
    bad = nodeset({"replicas": -1, "resources": {"memory": "x"}})
    assert set(problems_of(parse_nodeset, bad)) == {"spec.replicas", "spec.resources.memory"}
    assert "spec.replicas: must be at least 0, got -1" in message_of(parse_nodeset, bad)


@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [
        ({"login": {"serviceType": "Ingress"}}, "spec.login.serviceType", "must be one of"),
        ({"login": {"nodePort": 80}}, "spec.login.nodePort", "at least 30000"),
        ({"login": {"serviceType": "ClusterIP", "nodePort": 30022}}, "spec.login.nodePort", "only valid with"),
        ({"login": {"service": {"annotations": {"slurmkube.io/nodes": "1"}}}}, "spec.login.service.annotations",
         "outside slurmkube.io/, got 'slurmkube.io/nodes'"),
        ({"login": {"service": {"annotations": {"bad key": "1"}}}}, "spec.login.service.annotations",
         "Kubernetes annotation keys"),
        ({"login": {"serviceType": "LoadBalancer", "service": {"loadBalancerSourceRanges": ["10.0.0.1/8"]}}},
         "spec.login.service.loadBalancerSourceRanges[0]", "no host bits set, got '10.0.0.1/8'"),
        ({"login": {"serviceType": "LoadBalancer", "service": {"loadBalancerSourceRanges": ["anywhere"]}}},
         "spec.login.service.loadBalancerSourceRanges[0]", "address range"),
        ({"login": {"service": {"loadBalancerSourceRanges": ["10.0.0.0/8"]}}},
         "spec.login.service.loadBalancerSourceRanges", "only valid with serviceType LoadBalancer, got serviceType "
         "'NodePort'"),
        ({"login": {"serviceType": "ClusterIP", "service": {"externalTrafficPolicy": "Local"}}},
         "spec.login.service.externalTrafficPolicy", "NodePort or LoadBalancer"),
        ({"login": {"service": {"externalTrafficPolicy": "Nearest"}}}, "spec.login.service.externalTrafficPolicy",
         "must be one of"),
        ({"accounting": {"enabled": True, "config": {"StorageHost": "evil"}}}, "spec.accounting.config.StorageHost",
         "set by slurmkube"),
        ({"accounting": {"enabled": True, "config": {"archivescript": "/bin/sh"}}},
         "spec.accounting.config.archivescript", "runs a program or writes a file in slurmdbd's pod"),
        ({"accounting": {"enabled": True, "config": {"ArchiveDir": "/x"}}}, "spec.accounting.config.ArchiveDir",
         "lost with it"),
        ({"accounting": {"enabled": True, "config": {"Purge Job": "1"}}}, "spec.accounting.config['Purge Job']",
         "not a slurmdbd.conf option"),
        ({"accounting": {"enabled": True, "host": "dbd.example", "config": {"PurgeJobAfter": "12month"}}},
         "spec.accounting.config", "slurmdbd runs elsewhere"),
        ({"accounting": {"enabled": True, "database": {"tlsCaSecret": "site-ca"}}},
         "spec.accounting.database.tlsCaSecret", "is for an external database"),
        ({"slurm": {"config": {"SlurmctldHost": "x"}}}, "spec.slurm.config.SlurmctldHost", "set by slurmkube"),
        ({"slurm": {"config": {"bad key": 1}}}, "spec.slurm.config['bad key']", "not a Slurm option"),
        ({"slurm": {"config": {"Min\nJobAge": 1}}}, "spec.slurm.config['Min\\nJobAge']", "not a Slurm option"),
        ({"slurm": {"config": {"Foo": {"a": 1}}}}, "spec.slurm.config.Foo", "must be text"),
        ({"slurm": {"maxNodeCount": 0}}, "spec.slurm.maxNodeCount", "at least 1"),
        ({"jail": {"size": "10 GB"}}, "spec.jail.size", "Kubernetes quantity"),
        ({"jail": {"existingClaim": "x", "nfs": {"server": "s", "path": "/p"}}}, "spec.jail", "at most one"),
        ({"jail": {"nfs": {"server": "s", "path": "relative"}}}, "spec.jail.nfs.path", "must match"),
        ({"jail": {"userPaths": ["home"]}}, "spec.jail.userPaths[0]", "must match"),
        ({"jail": {"userPaths": ["/"]}}, "spec.jail.userPaths[0]", "absolute path below /"),
        ({"jail": {"userPaths": ["/data,/x"]}}, "spec.jail.userPaths[0]", "must match"),
        ({"jail": {"subMounts": [{"name": "a", "mountPath": "/a b"}]}}, "spec.jail.subMounts[0].mountPath",
         "must be a normalized path below /"),
        ({"jail": {"subMounts": [{"name": "a", "mountPath": "/x"}, {"name": "a", "mountPath": "/y"}]}},
         "spec.jail.subMounts[1].name", "used twice"),
        ({"jail": {"subMounts": [{"name": "a", "mountPath": "/x/../etc"}]}},
         "spec.jail.subMounts[0].mountPath", "normalized"),
        ({"partitions": [{"name": "a", "default": True}, {"name": "b", "default": True}]},
         "spec.partitions", "at most one partition may be default"),
        ({"partitions": [{"name": "a"}, {"name": "a"}]}, "spec.partitions[1].name", "used twice"),
        ({"partitions": [{"name": "a", "nodeSets": ["cpu", "gpu", "cpu"]}]}, "spec.partitions[0].nodeSets[2]",
         "used twice: 'cpu'"),
        ({"partitions": [{"name": "p%d" % i} for i in range(65)]}, "spec.partitions", "at most 64 items, got 65"),
        ({"partitions": [{"name": "a", "config": {"Nodes": "x"}}]}, "spec.partitions[0].config.Nodes", "derived"),
        ({"slurm": {"topology": [{"name": "s", "switches": ["nope"]}]}}, "spec.slurm.topology[0].switches",
         "unknown switch 'nope'"),
        ({"slurm": {"topology": [{"name": "s", "nodes": "n1"}, {"name": "s", "nodes": "n2"}]}},
         "spec.slurm.topology[1].name", "used twice: 's'"),
        ({"slurm": {"topology": [{"name": "s", "switches": ["l", "l"]}, {"name": "l", "nodes": "n1"}]}},
         "spec.slurm.topology[0].switches[1]", "used twice: 'l'"),
        ({"slurm": {"topology": [{"name": "s%d" % i, "nodes": "n%d" % i} for i in range(257)]}},
         "spec.slurm.topology", "at most 256 items, got 257"),
        ({"controller": {"resources": {"memory": "1Mi"}}}, "spec.controller.resources.memory", "at least 64Mi"),
        ({"healthChecks": {"nodeState": "SOMETIMES"}}, "spec.healthChecks.nodeState", "must be one of"),
    ],
)
def test_bad_cluster_specs_name_field_and_value(spec, path, fragment):
    problems = problems_of(parse_cluster, cluster(spec))
    assert path in problems, problems
    assert fragment in problems[path]


@pytest.mark.parametrize("name", ["Demo", "demo_1", "-demo", "a" * 64])
def test_bad_cluster_names(name):
    problems = problems_of(parse_cluster, cluster(name=name))
    assert "metadata.name" in problems


def test_cluster_name_leaves_room_for_derived_names():
    problems = problems_of(parse_cluster, cluster(name="a" * 45))
    assert "derived object names" in problems["metadata.name"]


def test_unknown_nodeset_in_partition_is_reported():
    cl = parse_cluster(cluster({"partitions": [{"name": "p", "nodeSets": ["gpu"]}]}))
    with pytest.raises(SpecError) as info:
        check_references(cl, [parse_nodeset(nodeset())])
    assert "unknown node set 'gpu'; known: cpu" in str(info.value)


def test_nodeset_of_another_cluster_is_reported():
    cl = parse_cluster(cluster())
    other = parse_nodeset(nodeset({"clusterName": "other"}))
    with pytest.raises(SpecError, match="belongs to cluster hpc/other"):
        check_references(cl, [other])


def test_more_nodes_than_max_node_count_is_reported():
    cl = parse_cluster(cluster({"slurm": {"maxNodeCount": 4}}))
    with pytest.raises(SpecError, match="maxNodeCount: is 4 but the node sets ask for 5 nodes"):
        check_references(cl, [parse_nodeset(nodeset({"replicas": 5}))])


def test_an_on_demand_sets_nodes_count_at_their_most():
    cl = parse_cluster(cluster({"slurm": {"maxNodeCount": 4}}))
    check_references(cl, [parse_nodeset(nodeset({"replicas": 1, "maxReplicas": 4}))])
    with pytest.raises(SpecError, match="maxNodeCount: is 4 but the node sets ask for 5 nodes"):
        check_references(cl, [parse_nodeset(nodeset({"replicas": 0, "maxReplicas": 5}))])


def test_max_replicas_below_replicas_is_refused_naming_the_field():
    problems = problems_of(parse_nodeset, nodeset({"replicas": 3, "maxReplicas": 2}))
    assert "must be at least replicas (3" in problems["spec.maxReplicas"]


def test_switches_from_a_label_are_refused_with_an_on_demand_set():
    cl = parse_cluster(cluster({"slurm": {"switchLabel": "example.com/switch"}}))
    with pytest.raises(SpecError, match="switchLabel: is not yet supported with on-demand node sets"):
        check_references(cl, [parse_nodeset(nodeset({"maxReplicas": 2}))])


def test_derived_node_values():
    ns = parse_nodeset(nodeset({"replicas": 3, "resources": {"cpu": "8", "memory": "32Gi"}}))
    assert slurm_node_names(ns) == ["demo-cpu-0", "demo-cpu-1", "demo-cpu-2"]
    assert slurm_cpus(ns) == 8
    # Slurm sees the pod's whole memory (32 GiB = 32768 MiB) and keeps 5 % of it (1638, more
    # than the 256 MiB floor) for the daemons: jobs get the rest.
    assert slurm_real_memory_mib(ns) == 32768
    assert slurm_mem_spec_limit_mib(ns) == 1638
    assert slurm_job_memory_mib(ns) == 32768 - 1638
    small = parse_nodeset(nodeset({"resources": {"memory": "1Gi"}}))
    assert (slurm_real_memory_mib(small), slurm_mem_spec_limit_mib(small)) == (1024, 256)


# What reaches a config file must stay one value: a newline, a blank or '#' would add settings
# (a second PlugStackConfig turns the jail off) or cut the line.
INJECTIONS = [
    ({"slurm": {"config": {"MinJobAge": "300\nPlugStackConfig=/dev/null"}}}, "spec.slurm.config.MinJobAge",
     "one word"),
    ({"slurm": {"config": {"MinJobAge": "300 PlugStackConfig=/dev/null"}}}, "spec.slurm.config.MinJobAge",
     "one word"),
    ({"slurm": {"config": {"MailDomain": "x#y"}}}, "spec.slurm.config.MailDomain", "one word"),
    ({"slurm": {"config": {"SchedulerParameters": ["bf_continue", "a\rb"]}}},
     "spec.slurm.config.SchedulerParameters[1]", "one word"),
    ({"slurm": {"config": {"MinJobAge": '"300"'}}}, "spec.slurm.config.MinJobAge", "quotes"),
    ({"slurm": {"cgroupConfig": {"ConstrainCores": "yes\nCgroupPlugin=autodetect"}}},
     "spec.slurm.cgroupConfig.ConstrainCores", "one word"),
    ({"slurm": {"cgroupConfig": {"CgroupMountpoint": "/sys/fs/cgroup"}}}, "spec.slurm.cgroupConfig.CgroupMountpoint",
     "set by slurmkube"),
    ({"slurm": {"cgroupConfig": {"bad key": "x"}}}, "spec.slurm.cgroupConfig['bad key']", "not a cgroup.conf option"),
    ({"partitions": [{"name": "p", "config": {"MaxTime": "1:00:00 Nodes=ALL"}}]},
     "spec.partitions[0].config.MaxTime", "one word"),
    ({"slurm": {"config": {"Prolog": "/mnt/jail/tmp/x"}}}, "spec.slurm.config.Prolog", "privilegedConfig"),
    ({"slurm": {"config": {"pluginDir": "/mnt/jail/lib"}}}, "spec.slurm.config.pluginDir", "privilegedConfig"),
    ({"slurm": {"config": {"SlurmdLogFile": "/etc/passwd"}}}, "spec.slurm.config.SlurmdLogFile", "privilegedConfig"),
    ({"slurm": {"privilegedConfig": {"MinJobAge": 300}}}, "spec.slurm.privilegedConfig.MinJobAge",
     "not a privileged setting"),
    ({"slurm": {"privilegedConfig": {"Epilog": "/x y"}}}, "spec.slurm.privilegedConfig.Epilog", "one word"),
    ({"slurm": {"topology": [{"name": "s", "nodes": "n[1-2]\nSwitchName=t"}]}}, "spec.slurm.topology[0].nodes",
     "control characters"),
    ({"slurm": {"topology": [{"name": "s", "nodes": "n1 Switches=x"}]}}, "spec.slurm.topology[0].nodes",
     "must match"),
    ({"images": {"worker": "slurmkube/worker:latest\nx"}}, "spec.images.worker", "control characters"),
    ({"images": {"worker": "slurmkube/worker:latest x"}}, "spec.images.worker", "must match"),
    ({"images": {"jail": "Slurmkube/jail"}}, "spec.images.jail", "must match"),
    ({"accounting": {"host": "db;rm -rf"}}, "spec.accounting.host", "must match"),
    ({"accounting": {"host": "db PlugStackConfig=/dev/null"}}, "spec.accounting.host", "must match"),
    ({"jail": {"nfs": {"server": "nfs.example.com\n", "path": "/p"}}}, "spec.jail.nfs.server",
     "control characters"),
    ({"jail": {"nfs": {"server": "nfs server", "path": "/p"}}}, "spec.jail.nfs.server", "must match"),
    ({"healthChecks": {"longChecks": {"ncclPython": "/usr/bin/python3; id"}}},
     "spec.healthChecks.longChecks.ncclPython", "must match"),
    ({"healthChecks": {"longChecks": {"schedule": "0 * * * *\n* * * * *"}}},
     "spec.healthChecks.longChecks.schedule", "control characters"),
    ({"jail": {"subMounts": [{"name": "root", "mountPath": "/node", "hostPath": "/"}]}},
     "spec.jail.subMounts[0].hostPath", "not / itself"),
    ({"jail": {"subMounts": [{"name": "up", "mountPath": "/node", "hostPath": "/mnt/nvme/../../etc"}]}},
     "spec.jail.subMounts[0].hostPath", "normalized"),
    ({"jail": {"subMounts": [{"name": "dot", "mountPath": "/node/./x", "hostPath": "/mnt//nvme"}]}},
     "spec.jail.subMounts[0].hostPath", "normalized"),
    ({"workerSeccomp": {"kubeletRootDir": "/"}}, "spec.workerSeccomp.kubeletRootDir", "must match"),
    ({"workerSeccomp": {"kubeletRootDir": "/var/lib//kubelet"}}, "spec.workerSeccomp.kubeletRootDir",
     "normalized"),
    ({"workerSeccomp": {"kubeletRootDir": "/var/lib/../../etc"}}, "spec.workerSeccomp.kubeletRootDir",
     "normalized"),
    ({"workerSeccomp": {"kubeletRootDir": "var/lib/kubelet"}}, "spec.workerSeccomp.kubeletRootDir", "must match"),
    ({"workerSeccomp": {"profile": "RuntimeDefault"}}, "spec.workerSeccomp.profile", "one of"),
]


@pytest.mark.parametrize(("spec", "path", "fragment"), INJECTIONS)
def test_values_that_would_add_a_setting_or_line_are_rejected_naming_the_field(spec, path, fragment):
    problems = problems_of(parse_cluster, cluster(spec))
    assert path in problems, problems
    assert fragment in problems[path]


@pytest.mark.parametrize(
    "spec",
    [
        {"slurm": {"config": {"SchedulerParameters": ["bf_continue", "bf_max_job_test=1000"], "MinJobAge": 300,
                              "SlurmctldParameters": "enable_configless", "MailDomain": "example.com"}}},
        {"slurm": {"privilegedConfig": {"Prolog": "/etc/slurm/prolog.d/*", "PluginDir": "/usr/lib/slurm"}}},
        {"images": {"worker": "registry.example.com:5000/hpc/slurm-worker:24.11.5-1@sha256:" + "a" * 64,
                    "jail": "localhost/jail_image:v1.2"}},
        {"accounting": {"enabled": True, "host": "slurmdbd.hpc.svc.cluster.local"}},
        {"accounting": {"enabled": True, "host": "fd00::10"}},
        {"jail": {"nfs": {"server": "10.0.0.5", "path": "/export/jail"}}},
        {"slurm": {"topology": [{"name": "leaf", "nodes": "demo-cpu-[0-3,7],demo-gpu-0"},
                                {"name": "spine", "switches": ["leaf"]}]}},
    ],
)
def test_ordinary_values_still_pass(spec):
    parse_cluster(cluster(spec))


def test_privileged_settings_reach_slurm_conf_after_the_others():
    model = parse_cluster(cluster({"slurm": {"config": {"MinJobAge": 300},
                                             "privilegedConfig": {"Epilog": "/etc/slurm/epilog"}}}))
    text = render_slurm_conf(model, [])
    assert "\nEpilog=/etc/slurm/epilog\n" in text and "\nMinJobAge=300\n" in text


def test_the_bridge_names_a_partition_the_cluster_has_and_gives_accounts_to_its_own_namespaces():
    bridge = parse_cluster(cluster({"bridge": {"namespaces": ["ml"], "accounts": [
        {"namespace": "ml", "accounts": ["ml-team"]}]}})).spec.bridge
    assert (bridge.namespaces, bridge.partition, bridge.exclusive) == (["ml"], None, False)
    assert [(a.namespace, a.accounts) for a in bridge.accounts] == [("ml", ["ml-team"])]
    problems = problems_of(parse_cluster, cluster({"bridge": {"namespaces": ["ml"], "partition": "gpu", "accounts": [
        {"namespace": "ai", "accounts": ["x"]}]}}))
    assert "must name a partition of the cluster (main), got 'gpu'" in problems["spec.bridge.partition"]
    assert "must be one of spec.bridge.namespaces, got 'ai'" in problems["spec.bridge.accounts[0].namespace"]
    assert "spec.bridge.namespaces[0]" in problems_of(parse_cluster, cluster({"bridge": {"namespaces": ["ML"]}}))
    twice = problems_of(parse_cluster, cluster({"bridge": {"namespaces": ["ml"], "accounts": [
        {"namespace": "ml", "accounts": ["a"]}, {"namespace": "ml", "accounts": ["b"]}]}}))
    assert "is given twice: 'ml'" in twice["spec.bridge.accounts[1].namespace"]
