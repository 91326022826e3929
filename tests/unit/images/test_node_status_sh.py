"""images/common/node-status.sh: how the worker's stop hook, the entrypoint and the health check
read a node's reason, state flags and GRES from `scontrol show node --json` (Slurm 24.11's shape,
here from a stand-in scontrol on PATH; the images' own tests run it against real slurmctld)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from collection_path import REPO

HELPERS = REPO / "images/common/node-status.sh"

pytestmark = pytest.mark.skipif(not shutil.which("jq"), reason="jq (tests/run installs it, as the images have it)")


def helpers(tmp_path: Path, script: str, node: dict | None) -> subprocess.CompletedProcess:
    """Runs `script` with the helpers sourced; scontrol answers with `node`, or fails when None."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    scontrol = bin_dir / "scontrol"
    if node is None:
        scontrol.write_text("#!/bin/sh\necho 'slurm_load_node error: Invalid node name specified' >&2\nexit 1\n")
    else:
        (tmp_path / "node.json").write_text(json.dumps({"nodes": [node]}))
        scontrol.write_text(f'#!/bin/sh\n[ "$1 $2 $3 $4" = "show node n1 --json" ] && cat "{tmp_path}/node.json"\n')
    scontrol.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    return subprocess.run(["bash", "-euo", "pipefail", "-c", f'. "{HELPERS}"\n{script}'], env=env,
                          capture_output=True, text=True, timeout=30, check=False)  # fmt: skip


READ = """status="$(node_status n1)"
printf 'reason=[%s] gres=[%s]' "$(status_reason "$status")" "$(status_gres "$status")"
for flag in IDLE DRAIN DOWN; do status_has "$status" "$flag" && printf ' %s' "$flag"; done
echo
"""


def test_an_idle_node_with_no_reason_and_no_gres(tmp_path: Path):
    out = helpers(tmp_path, READ, {"name": "n1", "reason": "", "state": ["IDLE"], "gres": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "reason=[] gres=[] IDLE\n"


def test_an_empty_reason_does_not_shift_the_fields(tmp_path: Path):
    """`IFS=$'\\t' read reason state gres` read the state as the reason here (tab is IFS white space)."""
    out = helpers(tmp_path, READ, {"name": "n1", "state": ["MIXED"], "gres": "gpu:h100:8(S:0-1)"})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "reason=[] gres=[gpu:h100:8(S:0-1)]\n"


def test_a_drained_down_node_keeps_its_whole_reason(tmp_path: Path):
    reason = "slurmkube: pod stopping under jobs: 12,13"
    out = helpers(tmp_path, READ, {"name": "n1", "reason": reason, "state": ["DOWN", "DRAIN"], "gres": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"reason=[{reason}] gres=[] DRAIN DOWN\n"


def test_a_flag_matches_whole_not_inside_another(tmp_path: Path):
    out = helpers(tmp_path, READ, {"name": "n1", "reason": "x", "state": ["IDLE", "UNDRAIN"], "gres": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "reason=[x] gres=[] IDLE\n"


def test_a_node_slurmctld_cannot_show_fails_and_reads_as_nothing(tmp_path: Path):
    script = 'if status="$(node_status n1)"; then echo "read: $status"; else echo failed; fi\n' + (
        'status_has "" DRAIN || echo "no flags"\nprintf "[%s][%s]\\n" "$(status_reason "")" "$(status_gres "")"\n')
    out = helpers(tmp_path, script, None)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "failed\nno flags\n[][]\n"
