"""Atomic files: a checkpoint written to a locked temporary beside its destination, fsynced,
renamed into place and the folder fsynced (abandoned temporaries removed); small files written
whole or not at all."""
from __future__ import annotations

import contextlib
import os
import re
import tempfile

from .._kernels._crc import crc32c
from ._format import _PIECE, HEADER, _set_checksum

try:  # the lock that tells a live save's temporary from an abandoned one (POSIX)
    import fcntl
except ImportError:  # Windows: no temporary is provably abandoned, so none is removed
    fcntl = None  # type: ignore[assignment]


def _temporary_name(path: str) -> re.Pattern:
    """The names mkstemp gives the temporaries of `path` (the prefix, 8 random characters)."""
    return re.compile(re.escape("." + os.path.basename(path) + ".") + r"[A-Za-z0-9_]{8}\.tmp")


def _locked_temporary(folder: str, path: str) -> tuple[int, str]:
    """A new temporary for `path`, open and (on POSIX) locked. Another save may take it for
    abandoned between its creation and the lock; then its name is gone and a new one is made."""
    while True:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".",
                                   suffix=".tmp")
        if fcntl is None:
            return fd, tmp
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:  # a file system without flock: no save can lock it to remove it
                return fd, tmp
            if os.path.samestat(os.stat(tmp), os.fstat(fd)):
                return fd, tmp
        except FileNotFoundError:  # removed before the lock: make another
            pass
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(fd)


def _remove_abandoned(folder: str, path: str) -> None:
    """Removes the temporaries of `path` that no live save holds locked."""
    if fcntl is None:  # without the lock none is provably abandoned
        return
    pattern = _temporary_name(path)
    for entry in os.scandir(folder):
        if not pattern.fullmatch(entry.name):
            continue
        with contextlib.suppress(OSError):  # a live save's lock (BlockingIOError), or gone
            fd = os.open(entry.path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.path.samestat(os.stat(entry.path), os.fstat(fd)):
                    os.unlink(entry.path)
            finally:
                os.close(fd)


def _write_piece(fd: int, view: memoryview, path: str) -> None:
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(f"checkpoint: writing {path} made no progress")
        view = view[written:]


def _write_all(fd: int, chunks: list, path: str) -> None:
    """Writes the chunks; for version 2, checksums each piece as it goes, then writes the header
    again with the checksum."""
    checksummed = HEADER.unpack_from(chunks[0])[1] == 2
    crc = 0
    for i, chunk in enumerate(chunks):
        view = memoryview(chunk)
        for start in range(0, len(view), _PIECE):
            piece = view[start:start + _PIECE]
            if checksummed:
                crc = crc32c(piece[HEADER.size:] if i == start == 0 else piece, crc)
            _write_piece(fd, piece, path)
    if checksummed:
        _set_checksum(chunks, crc)
        os.lseek(fd, 0, os.SEEK_SET)
        _write_piece(fd, memoryview(chunks[0])[:HEADER.size], path)


def _atomic_write(path: str, chunks: list) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = _locked_temporary(folder, path)
        try:
            try:
                _write_all(fd, chunks, path)
                os.fsync(fd)
                if fcntl is None:  # Windows renames no open file (and it holds no lock)
                    unlocked, fd = fd, -1
                    os.close(unlocked)
                # The lock is held through the rename: until then no other save removes tmp.
                os.replace(tmp, path)
            finally:
                if fd >= 0:
                    os.close(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _remove_abandoned(folder, path)
        _fsync_folder(folder)
    except OSError as e:  # the caller's path, not the hidden temporary's name
        if e.errno is not None:
            e.filename, e.filename2 = path, None
        raise


def _fsync_folder(folder: str) -> None:
    if os.name != "posix":  # Windows cannot open a folder for fsync; the rename is durable
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_small_file(path: str, data: bytes) -> None:
    """`data` at `path` whole or not at all: a temporary beside it (one writer a folder: the
    next write replaces one a kill left), fsynced, renamed, the folder fsynced."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(os.path.dirname(os.path.abspath(path)))
