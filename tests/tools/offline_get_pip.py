"""Stand-in for the get-pip.py bootstrap script that ansible-test downloads from a
host this machine cannot reach. ansible-test runs it (via runpy) inside an empty
virtual environment with pip-install arguments; it installs pip from Python's own
bundled wheel (ensurepip), then the requested packages from the package index.
`make sanity` copies it into ansible-test's cache under the name it looks for."""

import subprocess
import sys

GET_PIP_ONLY = ("--no-setuptools", "--no-wheel")

if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
    subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)
