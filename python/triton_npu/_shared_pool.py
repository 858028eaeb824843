"""Runtime memory that closed shared buffers gave back, kept for the next buffer of the same
size on the same device (upstream's page pool: ``empty_cache``, ``set_cache_enabled``,
``cache_stats``).

An entry is the flat ``uint8`` array over one runtime allocation; the allocation stays
registered with its runtime (so dispatches still pass it in place) for as long as the entry
is held. Entries are keyed by byte count and device only: shape and dtype are views. Memory
is given back only by a buffer nothing else still views (see ``SharedBuffer.close``), so a
reused allocation never aliases a live array or tensor.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

#: Bytes the pool may hold before it releases its oldest entries.
DEFAULT_LIMIT = 256 << 20


class Pool:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        # Reentrant: a collection run while this lock is held can close an unreachable
        # buffer, whose close() gives its memory back here on the same thread.
        self._lock = threading.RLock()
        self._entries: list[tuple[Any, np.ndarray]] = []
        self._bytes = 0
        self.limit = limit
        self.enabled = True
        self.hits = 0
        self.misses = 0

    def take(self, key: Any) -> np.ndarray | None:
        """The most recently given back allocation for `key`, or ``None`` (a miss)."""
        with self._lock:
            found = None
            if self.enabled:
                for i in reversed(range(len(self._entries))):
                    if self._entries[i][0] == key:
                        found = self._entries.pop(i)[1]
                        self._bytes -= found.nbytes
                        break
            self.hits += found is not None
            self.misses += found is None
            return found

    def give_back(self, key: Any, pages: np.ndarray) -> None:
        """Keeps `pages` for reuse (when enabled), releasing the oldest entries over the
        limit; what is not kept is freed when the last reference to it goes."""
        with self._lock:
            if not self.enabled or pages.nbytes > self.limit:
                return
            self._entries.append((key, pages))
            self._bytes += pages.nbytes
            while self._bytes > self.limit:
                self._bytes -= self._entries.pop(0)[1].nbytes

    def clear(self) -> None:
        with self._lock:
            self._entries = []
            self._bytes = 0

    def set_enabled(self, enabled: bool) -> None:
        with self._lock:
            self.enabled = bool(enabled)
            if not self.enabled:
                self.clear()

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "buffers": len(self._entries),
                "bytes": self._bytes,
                "hits": self.hits,
                "misses": self.misses,
            }


#: The process's pool (one per process, as the runtimes are).
POOL = Pool()
