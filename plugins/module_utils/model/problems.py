# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an invalid spec reports: every (path, message) found, quoted one way."""

from __future__ import annotations

import re
from typing import Any, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError


class SpecError(SlurmkubeError):
    """A spec is invalid; ``problems`` holds every (path, message) found, ``context`` what a
    module's user reads first ("invalid cluster: spec.x: ...")."""

    def __init__(self, problems: Sequence[Tuple[str, str]], context: str = "") -> None:
        self.problems = list(problems)
        text = "; ".join("%s: %s" % p for p in self.problems)
        super().__init__("%s: %s" % (context, text) if context else text)

    def within(self, context: str) -> SpecError:
        """The same problems, told in a context."""
        return SpecError(self.problems, context)


def describe(value: Any) -> str:
    """How a bad value is quoted in an error message."""
    return repr(value)


def key_path(path: str, key: str) -> str:
    """The path of a mapping's entry: path.key, or path['key'] (quoted, escapes and all) when the
    key holds anything but a plain name, so no message carries a raw newline."""
    return "%s.%s" % (path, key) if re.match(r"^[A-Za-z0-9_.-]+$", key) else "%s[%s]" % (path, describe(key))
