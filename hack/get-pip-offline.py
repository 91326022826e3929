"""Stand-in for the get-pip.py that ansible-test downloads from ci-files.testing.ansible.com.

That host is unreachable from these machines; PyPI is not. ansible-test runs this file in a
fresh virtual environment with pip's install arguments (e.g. `pip==24.2 --no-wheel`):
bootstrap pip from the standard library's ensurepip, then let that pip install the
requested versions from the package index.
"""

import subprocess
import sys

IGNORED = {"--no-setuptools", "--no-wheel"}


def main() -> int:
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
    args = [a for a in sys.argv[1:] if a not in IGNORED]
    return subprocess.call([sys.executable, "-m", "pip", "install", *args])


if __name__ == "__main__":
    sys.exit(main())
