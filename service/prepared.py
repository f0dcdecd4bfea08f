"""A quote's price inputs prepared once per snapshot, for processes that answer once and exit.

A CLI quote that opens the store the full way spends most of its time importing SQLAlchemy,
loading every offer and pruning them, all to look at a few hundred. So after a full answer on a
snapshot, the offer index that answer used (``OfferIndex.prepared()``: only the offers a view can
return, with the counts and price levels of all of them) and the local builds are written to a
file next to the SQLite store, named by the snapshot id; the index for views naming regions, four
times larger, goes to a second file that only such a quote reads. A later command reads which snapshots
are current with ``pricing.store.peek`` (plain ``sqlite3``), and when the file of that id is
there it answers from it: the same offers, builds and dates, so the same answer.

The file is a pickle, trusted as the store beside it is (whoever can write one can write the
other). Its name also carries a digest of the code that shapes its content, so a file written by
other code is never read; an unreadable one is rewritten. PostgreSQL stores, in-memory stores,
stores not yet migrated or seeded, and a missing file all take the full path.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import pickle
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from optimizer.candidates.offer_groups import OfferIndex, index_for, remember_index
from optimizer.native import source_path
from optimizer.offer import LocalBuild, Offer
from pricing.price_view import PriceView
from pricing.store.peek import (
    Current,
    default_db_url,
    peek_sqlite,
    snapshot_key,
    sqlite_path,
)

if TYPE_CHECKING:
    from pricing.store.repository import PriceStore

logger = logging.getLogger(__name__)

FORMAT = 1
SNAPSHOTS_KEPT = 4
# Modules whose code decides what a prepared file holds and means.
_SHAPING = ("optimizer.candidates.offer_groups", "optimizer.candidates.commitment_cover",
            "optimizer.candidates.estimator", "optimizer.estimator.gpus",
            "optimizer.price_warnings", "optimizer.offer", "optimizer.storage_prices", __name__)


@dataclass(frozen=True)
class Prepared:
    index: OfferIndex
    builds: list[LocalBuild]


@functools.cache
def _code_digest() -> str:
    digest = hashlib.sha256(f"format {FORMAT}\n".encode())
    for name in _SHAPING:
        # The source, also for a module served compiled (``optimizer.native``, which uses a build only
        # when made from this very source): the extension's bytes follow the build, not the code (two
        # builds of one source differ), so a compiled and a Python process, or two builds, would
        # otherwise each prepare and keep a file of their own for the same code.
        digest.update(source_path(name).read_bytes())
    return digest.hexdigest()[:12]


def folder_of(db_file: Path) -> Path:
    return db_file.with_name(db_file.name + ".prepared")


def file_of(db_file: Path, snapshot_id: str, part: str = "") -> Path:
    """The snapshot's file: the views without regions and the builds (``part`` empty), or the
    index for views naming regions (``part="regions"``), read only by such a quote."""
    suffix = f".{part}" if part else ""
    return folder_of(db_file) / f"{snapshot_id}-{_code_digest()}{suffix}.pickle"


def load(db_file: Path, snapshot_id: str) -> Prepared | None:
    """The prepared file of ``snapshot_id``; None when there is none. A damaged one is removed,
    so the command's full answer writes it again."""
    found = _read(file_of(db_file, snapshot_id))
    return found if isinstance(found, Prepared) else None


def load_regions(db_file: Path, snapshot_id: str) -> OfferIndex | None:
    found = _read(file_of(db_file, snapshot_id, "regions"))
    return found if isinstance(found, OfferIndex) else None


def _read(path: Path) -> object | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        return pickle.loads(data)
    except Exception as exc:  # noqa: BLE001 - any damage means: prepare it again
        logger.warning("removing an unreadable prepared snapshot %s: %s", path, exc)
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)
    return None


def save(db_file: Path, snapshot_id: str, prepared: Prepared, regions: OfferIndex) -> Path | None:
    """Write both files; None where the folder cannot be written."""
    for part, content in (("regions", regions), ("", prepared)):  # the one readers look for last
        if _write(db_file, file_of(db_file, snapshot_id, part), content) is None:
            return None
    return file_of(db_file, snapshot_id)


def _write(db_file: Path, target: Path, content: object) -> Path | None:
    """Write atomically (readers see the old file or the new one); keep the newest few."""
    folder = target.parent
    try:
        folder.mkdir(exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".tmp-", delete=False) as tmp:
            try:
                pickle.dump(content, tmp, protocol=pickle.HIGHEST_PROTOCOL)
                tmp.flush()
                # Readable by whoever may read the store (a temporary file starts private).
                os.chmod(tmp.name, db_file.stat().st_mode & 0o666)
            except BaseException:
                os.unlink(tmp.name)
                raise
        os.replace(tmp.name, target)
        files = sorted(folder.glob("*.pickle"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in files[2 * SNAPSHOTS_KEPT:]:
            old.unlink(missing_ok=True)
    except OSError as exc:  # a read-only folder: answers stay right, only slower
        logger.info("cannot keep a prepared snapshot in %s: %s", folder, exc)
        return None
    return target


class PreparedReader:
    """The reads a quote makes of ``PriceStore`` (same names, same values), answered from a
    prepared snapshot; anything else opens the store the full way."""

    def __init__(self, db_file: Path, currents: list[Current], snapshot: str, prepared: Prepared, view: PriceView,
                 open_full: Callable[[], PriceStore]) -> None:
        self._db_file = db_file
        self._currents = currents
        self._snapshot = snapshot
        self._prepared = prepared
        self._open_full = open_full
        self._full: PriceStore | None = None
        self.price_view: PriceView | None = view
        prepared.index.fall_back_to(self._regions_index)
        remember_index(snapshot, prepared.index)

    def current(self) -> PreparedReader:
        return self

    @property
    def db_file(self) -> Path:
        """The SQLite store this reader answers for (its measurements are read from it)."""
        return self._db_file

    def snapshot_id(self) -> str:
        return self._snapshot

    def prices_as_of(self) -> dict[str, datetime]:
        return {c.provider: c.as_of for c in self._currents}

    def local_builds(self) -> list[LocalBuild]:
        return list(self._prepared.builds)

    def local_build(self, build_id: str) -> LocalBuild:
        for build in self._prepared.builds:
            if build.id == build_id:
                return build
        return self._full_store().local_build(build_id)  # the store's error, with close names

    def all_offers(self) -> list[Offer]:
        """Every offer of the snapshots this reader answers for (the store keeps past snapshots,
        so a refresh meanwhile changes nothing here)."""
        from pricing.store.reads import CurrentPrices

        return CurrentPrices(self._full_store(), self._currents).all_offers()

    def _regions_index(self) -> OfferIndex:
        found = load_regions(self._db_file, self._snapshot)
        return found if found is not None else OfferIndex.build(self.all_offers())

    def _full_store(self) -> PriceStore:
        if self._full is None:
            self._full = self._open_full()
        return self._full


def open_reader(db_url: str | None, view: PriceView, open_full: Callable[[], PriceStore]) -> PriceStore | PreparedReader:
    """A ``PreparedReader`` when the SQLite store's current snapshot has a prepared file, else
    ``open_full()``."""
    path = sqlite_path(db_url or default_db_url())
    currents = peek_sqlite(path) if path is not None else None
    if path is None or currents is None:
        return open_full()
    snapshot = snapshot_key(currents, view.fingerprint)
    prepared = load(path, snapshot)
    if prepared is None:
        return open_full()
    return PreparedReader(path, currents, snapshot, prepared, view, open_full)


def keep_prepared(store: PriceStore | PreparedReader, db_url: str | None) -> Path | None:
    """After a full answer on an SQLite store: write its snapshot's prepared file if missing."""
    if isinstance(store, PreparedReader):
        return None
    path = sqlite_path(db_url or default_db_url())
    if path is None:
        return None
    current = store.current()  # one set of snapshots: the file holds what its name says
    snapshot = current.snapshot_id()
    if file_of(path, snapshot).is_file():
        return None
    index = index_for(snapshot, current.all_offers)
    return save(path, snapshot, Prepared(index=index.prepared(regions=False), builds=current.local_builds()),
                index.prepared())
