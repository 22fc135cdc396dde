"""The ``kplace`` console script: runs the command bundled in the package.

The bundled binary finds its kernel libraries and the workloads beside itself
(``_install/bin/kplace`` with ``_install/lib/kplace/`` and ``_install/share/kplace/``), as an
installed ``kplace`` does, so nothing else needs to be on PATH.
"""

import os
import sys

BINARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_install", "bin", "kplace")


def main():
    """Replaces this process with the bundled ``kplace``, passing the arguments on."""
    # Kernels written in Python run in this interpreter, with its packages.
    if sys.executable:
        os.environ.setdefault("KPLACE_PYTHON", sys.executable)
    if not os.access(BINARY, os.X_OK):
        sys.exit(f"kplace: the bundled command {BINARY} is missing or not executable")
    os.execv(BINARY, [BINARY] + sys.argv[1:])
