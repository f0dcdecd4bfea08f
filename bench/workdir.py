"""A bench's work folder (its price store, prepared files, logs): made in the system's temporary
folder and removed when the bench's process exits, whether it ends well or not.

The benches that keep a failed run's folder instead, for the server's log in it, remove theirs
themselves after a run that went well (``load.server``, ``soak.py``, ``abuse.py``).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path


def work_folder(prefix: str) -> Path:
    """A new folder named ``<prefix>…``, removed at exit."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    return work
