"""A compaction of the local run catalog in a detached background process (issue 16).

A writer whose journal line crosses ``compact_after`` starts ``python -m
warehouse.stores.local_compaction HOME LOCK_FD``
(:func:`~warehouse.stores.local_catalog_files.start_compaction`) and returns. At most one runs
at a time: the writer takes ``catalog/compact.lock`` without waiting (taken: one runs
already, nothing to do) and hands the locked descriptor to this process, which holds it until
it exits (a SIGKILL'd one releases it too) and records in it whether it succeeded, so that
writers back off after failures instead of starting one per write.

The compaction itself is :meth:`~warehouse.stores.local_catalog.RunCatalog.compact`: three
phases, the writers' lock held only to note what is folded and to install the result.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from warehouse.stores.local_catalog import RunCatalog
from warehouse.stores.local_catalog_files import note_compaction, wait_compaction

log = logging.getLogger(__name__)


def main(argv: list[str]) -> int:
    """``python -m warehouse.stores.local_compaction HOME [LOCK_FD]``: one compaction."""
    catalog = RunCatalog(Path(argv[0]))
    fd = int(argv[1]) if len(argv) > 1 else None
    try:
        ok = catalog.compact()
    except Exception:  # the journal still holds the runs; the next crossing tries again
        log.debug("background compaction of %s failed", catalog.dir, exc_info=True)
        ok = False
    note_compaction(catalog.dir, fd, ok)
    return 0 if ok else 1


wait = wait_compaction  # tests and benchmarks: return once no compaction runs

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
