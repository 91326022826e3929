"""The admin's manual's commands as the tests run them (doc tests): docs/manual/*.md.

A fenced block of a guide is one of:
- a command block, the HTML comment `<!-- run: ID -->` on the line before it: shell commands
  (```bash) that a test runs with `run_commands(ID, ...)`, or Ansible tasks (```yaml) that a test
  runs with `manual_tasks(ID, ...)`;
- a spec block, `<!-- spec -->` before it: a SlurmCluster `spec:` fragment, which the unit tier
  checks against the model;
- output (```text), or one of MyST's directives (```{toctree}).
tests/unit/docs/test_manual.py fails on a block of no kind, on an ID twice, and on an ID that no
test under tests/ (the unit tier's aside) names in one of those calls.

The guides use the quickstart's names (GUIDE_CLUSTER, GUIDE_NAMESPACE, GUIDE_OPERATOR_NAMESPACE);
a test runs them with its own: the cluster's name as a word (`demo`, `demo-backup`),
`-n <namespace>` and `namespace: <namespace>` (a YAML key alone on its line), the operator's `-n`.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import yaml
from collection_path import REPO

MANUAL = REPO / "docs" / "manual"
GUIDE_CLUSTER, GUIDE_NAMESPACE, GUIDE_OPERATOR_NAMESPACE = "demo", "slurm", "slurmkube-system"
# The calls that run a command block: the unit tier looks for `<call>("ID"` in the tests.
RUNNERS = ("run_commands", "manual_tasks")

FENCE = re.compile(r"^```(\S*)\s*$")
MARK = re.compile(r"^<!--\s*(run:\s*(?P<id>[a-z0-9-]+)|(?P<spec>spec))\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a guide: where it is, its language, its text, and its mark (the
    command block's ID, "spec", or "" when the line before it marks nothing)."""

    path: Path
    line: int
    language: str
    text: str
    mark: str

    @property
    def where(self) -> str:
        return "%s:%d" % (self.path.relative_to(REPO), self.line)


def guide_blocks(path: Path) -> List[Block]:
    """Every fenced block of the Markdown file PATH, in order."""
    lines = path.read_text().splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opened = FENCE.match(lines[index])
        if not opened:
            index += 1
            continue
        end = next((i for i in range(index + 1, len(lines)) if lines[i].strip() == "```"), None)
        assert end is not None, "%s:%d: a block that never ends" % (path, index + 1)
        mark = MARK.match(lines[index - 1]) if index else None
        blocks.append(Block(path, index + 1, opened.group(1), "\n".join(lines[index + 1:end]) + "\n",
                            "" if mark is None else (mark.group("id") or mark.group("spec"))))
        index = end + 1
    return blocks


def manual_blocks() -> List[Block]:
    return [block for path in sorted(MANUAL.glob("*.md")) for block in guide_blocks(path)]


def command_block(block_id: str) -> Block:
    found = [block for block in manual_blocks() if block.mark == block_id]
    assert len(found) == 1, "docs/manual: %d blocks marked run: %s" % (len(found), block_id)
    return found[0]


def as_run(text: str, cluster: str, namespace: str, operator_namespace: Optional[str] = None) -> str:
    """TEXT with the guides' names replaced by a test's."""
    text = re.sub(r"\b%s\b" % GUIDE_CLUSTER, cluster, text)
    text = re.sub(r"-n %s(?![\w-])" % GUIDE_OPERATOR_NAMESPACE, "-n " + (operator_namespace or namespace), text)
    text = re.sub(r"-n %s(?![\w-])" % GUIDE_NAMESPACE, "-n " + namespace, text)
    return re.sub(r"^(\s*-?\s*namespace:\s*)%s\s*$" % GUIDE_NAMESPACE, r"\g<1>" + namespace, text, flags=re.M)


def run_commands(block_id: str, env: Mapping[str, str], cluster: str, namespace: str,
                 operator_namespace: Optional[str] = None, timeout: float = 900) -> str:
    """Run the shell block BLOCK_ID as a bash script (errexit, pipefail; no terminal, nothing on
    its standard input) with the test's names; its standard output, once it exited 0."""
    block = command_block(block_id)
    assert block.language == "bash", "%s: run: %s is not a bash block" % (block.where, block_id)
    script = as_run(block.text, cluster, namespace, operator_namespace)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=dict(env), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout, check=False)
    assert done.returncode == 0, "%s (%s) exit %d:\n%s\n%s" % (
        block.where, block_id, done.returncode, done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


def manual_tasks(block_id: str, cluster: str, namespace: str) -> List[Dict[str, Any]]:
    """The Ansible tasks of the YAML block BLOCK_ID, with the test's names, for a test to run."""
    block = command_block(block_id)
    assert block.language == "yaml", "%s: run: %s is not a yaml block" % (block.where, block_id)
    tasks = yaml.safe_load(as_run(block.text, cluster, namespace))
    assert isinstance(tasks, list) and all(isinstance(task, dict) for task in tasks), block.where
    return tasks
