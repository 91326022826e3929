# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one exception base of the collection.

Every error of ours that a module reports derives from SlurmkubeError, and each module's main()
catches it once and turns it into fail_json(msg=...). Its message is complete: it names the
option or field at fault, so the module adds nothing.
"""

from __future__ import annotations


class SlurmkubeError(Exception):
    """An error a module reports to its user as it is."""
