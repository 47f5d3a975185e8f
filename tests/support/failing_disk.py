"""The OS disk with directories that die: once a directory is failed, every read,
write, fsync or listing under it raises EIO, on files opened before as after, as a
disk that stopped answering does (a fault seam, as the simulator's disk is)."""

from __future__ import annotations

import errno

from epochlog.seams.real import OsDisk, OsFile


class FailingDisk(OsDisk):
    def __init__(self) -> None:
        self.failed: set[str] = set()

    def check(self, path: str) -> None:
        if any(path == d or path.startswith(d.rstrip("/") + "/") for d in self.failed):
            raise OSError(errno.EIO, "Input/output error", path)

    def open(self, path: str) -> OsFile:
        self.check(path)
        return FailingFile(self, path)

    def read_file(self, path: str) -> bytes:
        self.check(path)
        return super().read_file(path)

    def write_atomic(self, path: str, data: bytes) -> None:
        self.check(path)
        super().write_atomic(path, data)

    def makedirs(self, path: str) -> None:
        self.check(path)
        super().makedirs(path)

    def listdir(self, path: str) -> list[str]:
        self.check(path)
        return super().listdir(path)

    def remove(self, path: str) -> None:
        self.check(path)
        super().remove(path)

    def rename(self, src: str, dst: str) -> None:
        self.check(src)
        self.check(dst)
        super().rename(src, dst)

    def file_size(self, path: str) -> int:
        self.check(path)
        return super().file_size(path)

    def disk_usage(self, path: str) -> tuple[int, int]:
        self.check(path)
        return super().disk_usage(path)


class FailingFile(OsFile):
    def __init__(self, disk: FailingDisk, path: str) -> None:
        super().__init__(path)
        self._disk = disk

    def pread(self, size: int, offset: int) -> bytes:
        self._disk.check(self.path)
        return super().pread(size, offset)

    def append(self, data: bytes | memoryview) -> int:
        self._disk.check(self.path)
        return super().append(data)

    def pwrite(self, data: bytes | memoryview, offset: int) -> None:
        self._disk.check(self.path)
        super().pwrite(data, offset)

    def truncate(self, size: int) -> None:
        self._disk.check(self.path)
        super().truncate(size)

    def fsync(self) -> None:
        self._disk.check(self.path)
        super().fsync()
