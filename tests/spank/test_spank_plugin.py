"""The jail plugin builds warning-free against the images' Slurm, passes its C unit tests, and is a
plugin slurmstepd will load: the right symbols, the right version, the shared constants."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess

import pytest
from slurm_release import images_slurm_series
from spank_support import FETCH_HEADERS, SPANK, make, slurm_version_of

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

TAP_LINE = re.compile(r"^(ok|not ok) (\d+) - (.*)$", re.MULTILINE)

# Cases whose absence would mean a security property went untested.
REQUIRED_CASES = [
    "path: symlinked directory in the jail is not followed",
    "path: relative symlink escape is not followed",
    "path: symlinked file in the jail is not followed",
    "path: normalize refuses relative paths and ..",
    "config: bad arguments are refused with a clear message",
    "plan: only the job's own spool dir is bound",
    "plan: adds the job dir and never binds the cwd",
]


def tap_results(output: str) -> dict[str, bool]:
    return {name: status == "ok" for status, _number, name in TAP_LINE.findall(output)}


@pytest.fixture(scope="module")
def unit_run(spank_build) -> str:
    """`make -C spank test`: builds the C unit test runner and runs it."""
    result = make("test", spank_build.include)
    return result.stdout + result.stderr + "\nmake exit status: %d" % result.returncode


def test_plugin_builds_warning_free(spank_build):
    print("clean build of plugin, harness and probe: %.1f s" % spank_build.seconds)
    assert spank_build.returncode == 0, spank_build.output
    assert "-Wall -Wextra -Werror" in spank_build.output
    assert spank_build.plugin.is_file()


def test_make_test_runs_every_unit_test_and_all_pass(unit_run):
    assert "make exit status: 0" in unit_run, unit_run
    results = tap_results(unit_run)
    plan = re.search(r"^1\.\.(\d+)$", unit_run, re.MULTILINE)
    assert plan and int(plan.group(1)) == len(results), "the runner stopped early"
    assert [name for name, ok in results.items() if not ok] == []


@pytest.mark.parametrize("case", REQUIRED_CASES)
def test_security_unit_case_ran_and_passed(unit_run, case):
    assert tap_results(unit_run).get(case) is True, unit_run


def test_plugin_exports_only_what_slurm_looks_up(spank_build):
    assert spank_build.returncode == 0, spank_build.output
    nm = subprocess.run(
        ["nm", "-D", "--defined-only", str(spank_build.plugin)], capture_output=True, text=True, check=True
    )
    exported = {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}
    assert exported == {
        "plugin_name",
        "plugin_type",
        "plugin_version",
        "spank_plugin_version",
        "slurm_spank_init",
        "slurm_spank_init_post_opt",
        "slurm_spank_task_init_privileged",
    }


def test_plugin_is_a_spank_plugin_for_the_images_slurm(spank_build):
    """slurmstepd refuses a plugin whose plugin_version has another major.minor."""
    assert slurm_version_of(spank_build.include) == images_slurm_series()
    # RTLD_LAZY: the slurm_* functions come from slurmstepd and are not looked up by this load.
    lib = ctypes.CDLL(str(spank_build.plugin), mode=ctypes.RTLD_LOCAL | 1)
    version = ctypes.c_uint.in_dll(lib, "plugin_version").value
    assert (version >> 16, (version >> 8) & 0xFF) == images_slurm_series()
    assert (ctypes.c_char * 6).in_dll(lib, "plugin_type").value == b"spank"


def test_c_defaults_are_the_shared_constants():
    header = (SPANK / "src" / "jail_config.h").read_text()
    source = (SPANK / "src" / "jail_config.c").read_text()
    makefile = (SPANK / "Makefile").read_text()

    def define(name):
        return re.search(r'#define %s "([^"]+)"' % name, header).group(1)

    assert define("JAIL_DEFAULT_PATH") == C.JAIL_MOUNT_PATH
    assert define("JAIL_DEFAULT_MARKER") == C.JAIL_MARKER_FILE
    assert define("JAIL_DEFAULT_SPOOL") == C.SLURMD_SPOOL_DIR
    for path in (C.SLURM_CONFIG_DIR, C.MUNGE_SOCKET_DIR):
        assert '{ "%s",' % path in source
    hidden = define("JAIL_DEFAULT_HIDE").split(",")
    for secret_dir in (C.MUNGE_KEY_MOUNT_DIR, C.SSH_HOST_KEYS_MOUNT_DIR, C.SSHD_CONFIG_MOUNT_DIR):
        assert any(secret_dir == h or secret_dir.startswith(h + "/") for h in hidden), secret_dir
    plugin_dir = re.search(r"^PLUGIN_DIR \?= (\S+)$", makefile, re.MULTILINE).group(1)
    assert "%s/spank_jail.so" % plugin_dir == C.SPANK_PLUGIN_PATH


@pytest.mark.skipif(not shutil.which("shellcheck"), reason="shellcheck is not installed")
def test_scripts_are_shellcheck_clean():
    scripts = sorted(str(p) for p in (SPANK / "scripts").glob("*.sh"))
    assert scripts == [str(FETCH_HEADERS)]
    # -x from the checkout's root, as the gate runs it: the script sources images/slurm-release.sh.
    result = subprocess.run(["shellcheck", "-x", *scripts], cwd=SPANK.parent, capture_output=True, text=True,
                            check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout
