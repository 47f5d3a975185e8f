"""An in-memory disk for the Disk seam that loses what a crash loses.

Every file keeps what the OS page cache would hold and how much of it an fsync made
durable. A crash of a host keeps, for each of its files, only the durable bytes plus a
seeded-random prefix of what was appended since (the last unsynced write may be torn
anywhere); a truncation or an overwrite not yet fsynced is undone. Directory changes
(create, rename, remove, ``write_atomic``) are durable at once, as OsDisk makes them
with its directory fsyncs. A host's crash also kills its view of the disk: handles and
views opened before it raise OSError, so a dead broker's late writes cannot reach the
files of its successor.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field

from epochlog.seams import Random


@dataclass
class _Stored:
    data: bytearray = field(default_factory=bytearray)
    # Bytes [0, durable) survive a crash unless ``before_sync`` holds what they were
    # before an unsynced truncation rewrote them.
    durable: int = 0
    before_sync: bytes | None = None

    def sync(self) -> None:
        self.durable = len(self.data)
        self.before_sync = None

    def keep_durable(self, below: int) -> None:
        """About to change bytes before ``below``: keep what a crash would restore."""
        if below < self.durable and self.before_sync is None:
            self.before_sync = bytes(self.data[: self.durable])

    def cut(self, size: int) -> None:
        self.keep_durable(size)
        if size <= len(self.data):
            del self.data[size:]
        else:
            self.data += bytes(size - len(self.data))

    def crash(self, random: Random, garble: Random | None = None) -> int:
        """Keep what survives; returns how many unsynced bytes were kept. With
        ``garble``, the unsynced tail is always torn and the end of what is kept of it
        is garbage (pages half written when the power went)."""
        if self.before_sync is not None:
            self.data = bytearray(self.before_sync)
            self.before_sync = None
            return 0
        unsynced = len(self.data) - self.durable
        if garble is not None and unsynced > 0:
            kept = garble.randint(1, unsynced)
            start = self.durable + garble.randrange(kept)
            end = self.durable + kept
            self.data[start:end] = garble.randbytes(end - start)
        else:
            kept = 0 if unsynced == 0 or random.random() < 0.5 else random.randint(0, unsynced)
        del self.data[self.durable + kept :]
        return kept


class HostCrashed(OSError):
    """I/O by a host after its crash (a dead process's writes go nowhere)."""


class SimDisk:
    """The files of every simulated host, by path."""

    def __init__(self, random: Random) -> None:
        self._random = random
        self._files: dict[str, _Stored] = {}
        self._dirs: set[str] = {"/"}
        self.removed: list[tuple[str, bytes]] = []  # (segment path, bytes removed)

    def view(self, root: str) -> DiskView:
        """A Disk seam for one life of a host whose files live under ``root``."""
        self.makedirs(root)
        return DiskView(self, _norm(root))

    def crash(self, view: DiskView, garble: Random | None = None) -> int:
        """The host of ``view`` crashes: the view dies, its files keep what survives
        (``garble``: torn, ending in garbage). Returns how many unsynced bytes survived
        (torn writes included)."""
        view.alive = False
        prefix = view.root.rstrip("/") + "/"
        return sum(
            stored.crash(self._random, garble)
            for path, stored in self._files.items()
            if path.startswith(prefix)
        )

    def rot(self, root: str, random: Random, flips: int = 3) -> list[tuple[str, int]]:
        """Bit rot in written data, done to a host that is down: ``flips`` bytes of the
        segments under ``root`` (a seeded choice of file and position) are inverted. Returns
        (path, position) of each; nothing when there is no segment data."""
        prefix = _norm(root).rstrip("/") + "/"
        segments = sorted(
            p for p, f in self._files.items() if p.startswith(prefix) and is_segment(p) and f.data
        )
        flipped = []
        for _ in range(flips if segments else 0):
            path = random.choice(segments)
            stored = self._files[path]
            position = random.randrange(len(stored.data))
            stored.data[position] ^= 0xFF
            flipped.append((path, position))
        return flipped

    # What a DiskView does, once it has checked that its host is alive.

    def open(self, path: str) -> _Stored:
        path = _norm(path)
        stored = self._files.get(path)
        if stored is None:
            self._need_dir(posixpath.dirname(path), path)
            stored = self._files[path] = _Stored()
        return stored

    def stored(self, path: str) -> _Stored:
        stored = self._files.get(_norm(path))
        if stored is None:
            raise FileNotFoundError(path)
        return stored

    def write_atomic(self, path: str, data: bytes) -> None:
        stored = self.open(path)
        stored.data = bytearray(data)
        stored.sync()

    def exists(self, path: str) -> bool:
        path = _norm(path)
        return path in self._files or path in self._dirs

    def makedirs(self, path: str) -> None:
        path = _norm(path)
        while path not in self._dirs:
            if path in self._files:
                raise FileExistsError(path)
            self._dirs.add(path)
            path = posixpath.dirname(path)

    def listdir(self, path: str) -> list[str]:
        path = _norm(path)
        if path not in self._dirs:
            raise FileNotFoundError(path)
        prefix = path.rstrip("/") + "/"
        names = {
            entry[len(prefix) :].split("/", 1)[0]
            for entry in (*self._files, *self._dirs)
            if entry.startswith(prefix) and entry != prefix
        }
        return sorted(names)

    def remove(self, path: str) -> None:
        stored = self._files.pop(_norm(path), None)
        if stored is None:
            raise FileNotFoundError(path)
        self.journal_removal(_norm(path), bytes(stored.data))

    def journal_removal(self, path: str, data: bytes) -> None:
        if data and is_segment(path):
            self.removed.append((path, data))

    def files_under(self, directory: str) -> list[tuple[str, bytes]]:
        """(path, bytes) of every file below ``directory``, by path."""
        prefix = _norm(directory).rstrip("/") + "/"
        return sorted((p, bytes(f.data)) for p, f in self._files.items() if p.startswith(prefix))

    def rename(self, src: str, dst: str) -> None:
        src, dst = _norm(src), _norm(dst)
        if src in self._files:
            self._need_dir(posixpath.dirname(dst), dst)
            if is_segment(src) and not is_segment(dst):  # set aside to be removed
                self.journal_removal(src, bytes(self._files[src].data))
            self._files[dst] = self._files.pop(src)
            return
        if src not in self._dirs:
            raise FileNotFoundError(src)
        self._need_dir(posixpath.dirname(dst), dst)
        for table in (self._files, self._dirs):
            moved = [p for p in table if p == src or p.startswith(src + "/")]
            for p in moved:
                new = dst + p[len(src) :]
                if isinstance(table, dict):
                    table[new] = table.pop(p)
                else:
                    table.discard(p)
                    table.add(new)

    def rmtree(self, path: str) -> None:
        path = _norm(path)
        prefix = path + "/"
        for p in [p for p in self._files if p.startswith(prefix)]:
            del self._files[p]
        self._dirs = {d for d in self._dirs if d != path and not d.startswith(prefix)}

    def _need_dir(self, directory: str, path: str) -> None:
        if directory not in self._dirs:
            raise FileNotFoundError(f"no directory {directory} for {path}")


class DiskView:
    """The Disk seam of one life of one host."""

    def __init__(self, disk: SimDisk, root: str) -> None:
        self.disk = disk
        self.root = root
        self.alive = True

    def check(self) -> None:
        if not self.alive:
            raise HostCrashed(f"the host of {self.root} crashed")

    def open(self, path: str) -> SimFile:
        self.check()
        return SimFile(self, _norm(path), self.disk.open(path))

    def read_file(self, path: str) -> bytes:
        self.check()
        return bytes(self.disk.stored(path).data)

    def write_atomic(self, path: str, data: bytes) -> None:
        self.check()
        self.disk.write_atomic(path, data)

    def exists(self, path: str) -> bool:
        self.check()
        return self.disk.exists(path)

    def makedirs(self, path: str) -> None:
        self.check()
        self.disk.makedirs(path)

    def listdir(self, path: str) -> list[str]:
        self.check()
        return self.disk.listdir(path)

    def remove(self, path: str) -> None:
        self.check()
        self.disk.remove(path)

    def rename(self, src: str, dst: str) -> None:
        self.check()
        self.disk.rename(src, dst)

    def rmtree(self, path: str) -> None:
        self.check()
        self.disk.rmtree(path)

    def file_size(self, path: str) -> int:
        self.check()
        return len(self.disk.stored(path).data)

    def disk_usage(self, path: str) -> tuple[int, int]:
        """A simulated volume has no size: unknown, as Kafka's -1 says."""
        self.check()
        return -1, -1

    async def off_loop(self, work: Callable[[], None]) -> None:
        self.check()
        work()


class SimFile:
    """An open file of a DiskView: dies with it."""

    def __init__(self, view: DiskView, path: str, stored: _Stored) -> None:
        self._view = view
        self.path = path
        self._stored = stored

    def pread(self, size: int, offset: int) -> bytes:
        self._view.check()
        return bytes(self._stored.data[offset : offset + size])

    def append(self, data: bytes | memoryview) -> int:
        self._view.check()
        position = len(self._stored.data)
        self._stored.data += data
        return position

    def pwrite(self, data: bytes | memoryview, offset: int) -> None:
        self._view.check()
        end = offset + len(data)
        if offset < 0 or end > len(self._stored.data):
            raise ValueError(f"{self.path}: overwrite of [{offset}, {end}) past the end")
        self._stored.keep_durable(offset)
        self._stored.data[offset:end] = data

    def truncate(self, size: int) -> None:
        self._view.check()
        self._view.disk.journal_removal(self.path, bytes(self._stored.data[size:]))
        self._stored.cut(size)

    def seal(self) -> None:
        """Nothing is reserved ahead in a SimDisk."""

    def fsync(self) -> None:
        self._view.check()
        self._stored.sync()

    def size(self) -> int:
        return len(self._stored.data)

    def close(self) -> None:
        """Nothing to release: the bytes live in the SimDisk."""

    def fileno(self) -> int | None:
        return None


def is_segment(path: str) -> bool:
    """A log segment's data file (quarantine files end in .log too, in their folder)."""
    return path.endswith(".log") and "/quarantine/" not in path


def _norm(path: str) -> str:
    return posixpath.normpath(path) if path else path
