"""Each image on its own: what it runs and carries (no cluster)."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest
import yaml
from docker_cluster import (
    BUILD,
    REPO,
    docker,
    run,
    spank_plugin_expected,
)
from slurm_release import images_slurm_series_text

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import Images
from ansible_collections.slurmkube.core.plugins.modules import slurm_operator

pytestmark = pytest.mark.slurm


def test_print_tags_names_the_built_images_without_building(images):
    out = run("bash", str(BUILD), "--print-tags", cwd=REPO)
    assert json.loads(out.stdout) == images
    assert "building" not in out.stderr


def test_every_slurm_image_carries_the_series_it_is_labelled_with(images):
    """slurmctld -V prints "slurm-wlm 26.05.5"; each image's label names the same Debian version."""
    out = docker("run", "--rm", images["controller"], "slurmctld", "-V").stdout
    assert " %s." % images_slurm_series_text() in out
    for name in ("controller", "worker", "login", "jail", "jail-core", "slurmdbd", "exporter"):
        label = docker("image", "inspect", "--format", '{{index .Config.Labels "io.slurmkube.slurm-version"}}',
                       images[name]).stdout.strip()  # fmt: skip
        installed = docker("run", "--rm", "--entrypoint", "dpkg-query", images[name], "-W", "-f", "${Version}",
                           "slurm-client").stdout  # fmt: skip
        assert label == installed and label.startswith(images_slurm_series_text() + "."), (name, label, installed)


def test_every_image_carries_the_oci_labels_of_what_it_is_and_where_it_came_from(images):
    """The OCI image-spec's labels: the image's name, the collection's version (part of the tag),
    when and from which commit it was first built, its licence."""
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    for name, ref in images.items():
        if name == "rootfs":  # docker import of debootstrap's root: Debian's, not ours
            continue
        labels = json.loads(docker("image", "inspect", "--format", "{{json .Config.Labels}}", ref).stdout)
        oci = {k.split(".")[-1]: v for k, v in labels.items() if k.startswith("org.opencontainers.image.")}
        assert oci.get("title") == ref.rsplit(":", 1)[0], (name, labels)
        assert oci.get("version") == version and oci.get("licenses") == "GPL-3.0-or-later", (name, labels)
        assert re.fullmatch(r"[0-9a-f]{40}", oci.get("revision", "")), (name, labels)
        assert datetime.strptime(oci.get("created", ""), "%Y-%m-%dT%H:%M:%SZ"), (name, labels)


def test_the_default_images_of_the_model_and_the_operator_module_are_tags_the_build_makes(images):
    """spec.images left out (and slurm_operator's image) name slurmkube/<name>:latest: each build
    of the default Slurm series moves it, and the collection's version tag, to its newest image."""
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    defaults = {field: getattr(Images(), field) for field in
                ("controller", "worker", "login", "jail", "slurmdbd", "exporter", "mariadb", "backup",
                 "sssd")}  # fmt: skip
    operator_doc = yaml.safe_load(slurm_operator.DOCUMENTATION)["options"]["image"]["default"]
    defaults["operator"] = operator_doc

    def image_id(ref: str) -> str:
        return docker("image", "inspect", "--format", "{{.Id}}", ref).stdout.strip()

    for field, ref in defaults.items():
        repository, tag = ref.rsplit(":", 1)
        assert (repository, tag) == ("slurmkube/" + field, "latest"), ref
        assert image_id(ref) == image_id(images[field]) == image_id("%s:%s" % (repository, version)), field


def test_login_image_runs_sshd(images):
    out = docker("run", "--rm", images["login"], "/usr/sbin/sshd", "-V", check=False)
    assert "OpenSSH_10" in out.stdout + out.stderr


def test_worker_image_has_slurmd_healthcheck_and_plugin(images):
    files = [C.HEALTHCHECK_PROGRAM, C.ENTRYPOINT_PROGRAM]
    if spank_plugin_expected():
        files.append(C.SPANK_PLUGIN_PATH)
    docker("run", "--rm", images["worker"], "sh", "-c", "slurmd -V && " + " && ".join("test -s %s" % f for f in files))


def test_jail_image_has_what_hpc_users_expect(images):
    tools = [
        "srun",
        "sbatch",
        "squeue",
        "mpirun",
        "mpicc",
        "python3",
        "gcc",
        "g++",
        "gfortran",
        "make",
        "vim",
        "less",
        "git",
        "curl",
        "ssh",
        "tmux",
    ]
    docker("run", "--rm", images["jail"], "sh", "-c", " && ".join("command -v %s >/dev/null" % t for t in tools))
    # Both MPIs (Open MPI the default mpicc/mpirun), and Slurm's manuals where users read them.
    docker("run", "--rm", images["jail"], "sh", "-c", "command -v mpicc.mpich mpirun.openmpi >/dev/null"
           " && test -s /usr/share/man/man1/sbatch.1.gz && test -s /usr/share/man/man5/slurm.conf.5.gz")  # fmt: skip
    if spank_plugin_expected():
        docker("run", "--rm", images["jail"], "test", "-s", C.SPANK_PLUGIN_PATH)


def test_the_core_jail_has_slurms_clients_python_and_the_populate_program_and_no_user_software(images):
    """What a jail needs to work (the clients and their manuals, Python for the long checks, curl for
    slurmrestd, the populate program, the plugin) and not the full jail's compilers, MPI and tools: a fifth of it."""
    core = images["jail-core"]
    docker("run", "--rm", core, "sh", "-c", "command -v srun sbatch squeue python3 curl >/dev/null"
           " && test -x /usr/local/sbin/slurmkube-jail-populate && test -s /usr/local/lib/slurmkube/nodecheck.py"
           " && test -s /usr/share/man/man1/sbatch.1.gz")  # fmt: skip
    absent = docker("run", "--rm", core, "sh", "-c", "for t in gcc mpicc mpirun vim git ch-run; do"
                    " command -v $t || true; done").stdout  # fmt: skip
    assert absent == "", absent
    env = docker("image", "inspect", "-f", "{{range .Config.Env}}{{println .}}{{end}}", core).stdout.split()
    assert "SLURMKUBE_JAIL_VERSION=%s" % core.rsplit(":", 1)[1] in env, env
    sizes = {name: int(docker("image", "inspect", "-f", "{{.Size}}", images[name]).stdout)
             for name in ("jail", "jail-core")}
    assert sizes["jail-core"] * 3 < sizes["jail"], sizes


def test_operator_image_imports_its_handlers_unprivileged_on_a_read_only_root(images):
    script = (
        "import kubernetes, kopf, slurmkube_operator;"
        "from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile;"
        "import os; print(os.getuid())"
    )
    out = docker("run", "--rm", "--read-only", images["operator"], "python3", "-c", script).stdout
    assert out.strip() == "65532"
    assert "1.45" in docker("run", "--rm", images["operator"], "kopf", "--version").stdout


@pytest.mark.parametrize("name", ["controller", "worker", "login", "jail", "jail-core"])
def test_every_image_running_slurm_clients_has_the_spank_plugin(images, name):
    if not spank_plugin_expected():
        pytest.skip("spank/Makefile does not exist yet")
    docker("run", "--rm", images[name], "test", "-s", C.SPANK_PLUGIN_PATH)


def test_no_image_ships_a_munge_key_or_ssh_host_keys(images):
    for name in ("controller", "worker", "login", "jail", "jail-core"):
        docker(
            "run",
            "--rm",
            images[name],
            "sh",
            "-c",
            "test ! -e /etc/munge/munge.key && ! ls /etc/ssh/ssh_host_*_key 2>/dev/null",
        )
