"""Files that someone else controls, read without letting them reach past their root; outputs nobody else can aim.

The commands that run as root on a node (`record --container`, `clean-tmp`, `jit-inject`, `profile`)
read files that a container or another local user wrote: a container's `/tmp` through
`/proc/<pid>/root`, the host's shared `/tmp`, a directory an image's program filled.  Everything in
them is hostile input:

- **a link** (`/tmp/perf-12.map -> /etc/shadow`, or a container whose `/tmp` or `/usr/lib` is a link):
  through `/proc/<pid>/root` an absolute link resolves against the reader's root, the host's.
  `ForeignRoot` opens every path with `openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)` from a
  descriptor of the root, so every component resolves as it would for the container's own processes,
  never above it; the last component is opened `O_NOFOLLOW` (an interpreter writes its map and dump as
  regular files).  On a kernel without openat2 (before 5.6) each component is opened by itself with
  `O_NOFOLLOW`: a link anywhere in the path is refused.
- **a file that is not a regular file** (a FIFO whose open or read never returns, a device): opened
  `O_NONBLOCK | O_NOCTTY`, then `fstat`; anything but a regular file is refused.
- **a file of any size** (a huge sparse file, one that grows for ever): reads are bounded by the
  caller's limit, and a refusal says so.

What is refused raises `Refused`, whose text says what and why; the callers list those in their summary and
go on with the rest.

`PrivateDir` is the other side: a directory of the caller's own (an output directory), made or opened
without following a link, mode 0700, in which every file is created new (`O_CREAT | O_EXCL | O_NOFOLLOW`,
relative to the directory's descriptor) with mode 0600, so another user can neither read what the command
copies nor plant a link that root would then write through.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

# openat2(2): struct open_how {u64 flags; u64 mode; u64 resolve}; the syscall has one number on every arch
SYS_OPENAT2 = 437
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_IN_ROOT = 0x10
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
CHUNK = 1 << 20


class Refused(OSError):
    """A file that was not opened or read: what it is (the path inside its root) and why."""

    def __init__(self, path: str, why: str):
        super().__init__(f"{path}: {why}")
        self.path, self.why = path, why


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_openat2_works: bool | None = None   # None: not tried yet; False: the kernel has no openat2 (ENOSYS)


def openat2(dir_fd: int, path: str, flags: int, resolve: int, mode: int = 0) -> int:
    """openat2(2); OSError(ENOSYS) where the kernel (or a seccomp filter) lacks it."""
    how = _OpenHow(flags, mode, resolve)
    fd = _libc.syscall(ctypes.c_long(SYS_OPENAT2), ctypes.c_int(dir_fd), os.fsencode(path),
                       ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return fd


def has_openat2() -> bool:
    """Whether this kernel answers openat2 (tried once)."""
    global _openat2_works
    if _openat2_works is None:
        try:
            os.close(openat2(-100, "/", os.O_PATH | os.O_CLOEXEC, RESOLVE_NO_MAGICLINKS))   # AT_FDCWD
            _openat2_works = True
        except OSError as exc:
            _openat2_works = exc.errno not in (errno.ENOSYS, errno.EPERM)
    return _openat2_works


def _parts(path: str) -> list[str]:
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts:
        raise Refused(path, "an empty path")
    return parts


def _describe(st: os.stat_result) -> str:
    mode = st.st_mode
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


@dataclass(frozen=True)
class FileIdentity:
    """What a judged file was: compared again just before it is removed."""

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> "FileIdentity":
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class ForeignRoot:
    """A directory tree someone else controls (a container's `/proc/<pid>/root`, a shared `/tmp`), every path
    resolved inside it.  `where` names it in refusals (e.g. "container web")."""

    def __init__(self, root: str | os.PathLike, where: str | None = None):
        self.root = os.fspath(root)
        self.where = where or self.root
        # The root itself is the caller's choice (trusted): /proc/<pid>/root is followed here, on purpose
        self.fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "ForeignRoot":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- opening

    def open(self, path: str, flags: int = READ_FLAGS) -> int:
        """A descriptor of path (relative to the root; a leading / is the root's), resolved inside the root;
        the last component is never followed if it is a link.  Raises FileNotFoundError where it is absent,
        Refused where the path is not acceptable."""
        parts = _parts(path)
        flags |= os.O_NOFOLLOW | os.O_CLOEXEC
        if has_openat2():
            return self._open_in_root(path, parts, flags)
        return self._open_walking(path, parts, flags)

    def _open_in_root(self, path: str, parts: list[str], flags: int) -> int:
        """openat2 with RESOLVE_IN_ROOT: an absolute link or `..` stops at the root.  EAGAIN (a rename elsewhere
        in the tree raced the resolution of `..`) is tried again, twice."""
        for attempt in range(3):
            try:
                return openat2(self.fd, "/".join(parts), flags, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
            except FileNotFoundError:
                raise
            except OSError as exc:
                if exc.errno == errno.EAGAIN and attempt < 2:
                    continue
                raise self._refusal(path, exc) from None
        raise AssertionError("unreachable")

    def _open_walking(self, path: str, parts: list[str], flags: int) -> int:
        """Without openat2: one component at a time, none of them followed; `..` and links are refused."""
        if ".." in parts:
            raise Refused(path, "a path with '..' (this kernel has no openat2 to resolve it inside the root)")
        fd = os.dup(self.fd)
        try:
            for part in parts[:-1]:
                try:
                    nxt = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except FileNotFoundError:
                    raise
                except OSError as exc:
                    raise self._refusal(path, exc, walking=True) from None
                os.close(fd)
                fd = nxt
            try:
                return os.open(parts[-1], flags, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError as exc:
                raise self._refusal(path, exc, walking=True) from None
        finally:
            os.close(fd)

    def _refusal(self, path: str, exc: OSError, walking: bool = False) -> OSError:
        if exc.errno == errno.ELOOP:
            return Refused(path, "a symbolic link" + (" in its path (this kernel has no openat2 to resolve links "
                                                       "inside the root: Linux 5.6 or newer)" if walking else ""))
        if exc.errno == errno.ENOTDIR and walking:
            return Refused(path, "a component of its path is a link or not a directory (this kernel has no openat2 "
                                 "to resolve links inside the root: Linux 5.6 or newer)")
        if exc.errno == errno.EXDEV:
            return Refused(path, "its path leads out of the root")
        return Refused(path, exc.strerror or str(exc))

    def open_dir(self, path: str, follow: bool = False) -> int:
        """A descriptor (O_RDONLY | O_DIRECTORY, good for listing and for *at() calls) of a directory inside the
        root; a link as its last component is refused, or with follow resolved inside the root too (a container
        whose /tmp is a link to /var/tmp: its own /var/tmp, never the host's).  Following needs openat2 (Linux
        5.6): without it such a link is refused, saying so."""
        if not follow:
            return self.open(path, os.O_RDONLY | os.O_DIRECTORY)
        if not has_openat2():
            try:
                return self.open(path, os.O_RDONLY | os.O_DIRECTORY)
            except Refused as refused:
                raise Refused(path, f"{refused.why}; this kernel has no openat2 to resolve it inside the root "
                                    "(Linux 5.6 or newer)") from None
        return self._open_in_root(path, _parts(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    # -- reading

    def open_regular(self, path: str) -> tuple[int, os.stat_result]:
        """A descriptor of a regular file and its stat; anything else (a FIFO, a device, a link) is Refused
        without blocking."""
        fd = self.open(path)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise Refused(path, f"{_describe(st)}, not a regular file")
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    def read(self, path: str, offset: int = 0, limit: int = CHUNK) -> tuple[bytes, os.stat_result]:
        """At most limit bytes of the regular file path from offset, and its stat (taken when opened)."""
        fd, st = self.open_regular(path)
        try:
            return read_at(fd, offset, min(limit, max(0, st.st_size - offset))), st
        finally:
            os.close(fd)

    def lstat(self, path: str) -> os.stat_result:
        """The stat of path itself (a link is not followed), resolved inside the root."""
        fd = self.open(path, os.O_PATH)
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)


def read_at(fd: int, offset: int, size: int) -> bytes:
    """Up to size bytes of fd from offset (fewer where the file ends first)."""
    parts = []
    while size > 0:
        data = os.pread(fd, min(size, CHUNK), offset)
        if not data:
            break
        parts.append(data)
        offset += len(data)
        size -= len(data)
    return b"".join(parts)


def open_private_file(path: str | os.PathLike, limit: int) -> tuple[int, os.stat_result]:
    """A regular file of a shared directory (the host's /tmp: another user may have put a link, a FIFO or a
    huge file under the expected name), opened without following a link or blocking; Refused otherwise,
    and past limit bytes."""
    path = os.fspath(path)
    try:
        fd = os.open(path, READ_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Refused(path, "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(path, f"{_describe(st)}, not a regular file")
        if st.st_size > limit:
            raise Refused(path, f"{st.st_size} bytes, more than the {limit >> 20} MiB read of such a file")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


class PrivateDir:
    """A directory of the caller's (an output directory): made 0700 if absent, opened without following a link,
    and every file in it created new and 0600.  Paths are relative to it; their directories are made 0700 as
    needed, none of their components followed."""

    def __init__(self, path: str | os.PathLike, mode: int = 0o700):
        self.path = Path(path)
        try:
            os.mkdir(self.path, mode)
        except FileExistsError:
            pass
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise Refused(str(self.path), "a symbolic link, not a directory" if exc.errno in (errno.ELOOP, errno.ENOTDIR)
                          else exc.strerror or str(exc)) from None
        st = os.fstat(self.fd)
        if st.st_uid != os.geteuid():
            os.close(self.fd)
            raise Refused(str(self.path), f"owned by uid {st.st_uid}, not by this user ({os.geteuid()})")
        os.fchmod(self.fd, mode)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _dir_of(self, relative: str, make: bool) -> tuple[int, str]:
        """(a new descriptor of relative's directory, its last component)."""
        parts = _parts(relative)
        if ".." in parts:
            raise Refused(relative, "a path with '..'")
        fd = os.dup(self.fd)
        try:
            for part in parts[:-1]:
                if make:
                    try:
                        os.mkdir(part, 0o700, dir_fd=fd)
                    except FileExistsError:
                        pass
                try:
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError as exc:
                    raise Refused(relative, f"{part} in its path is a link or not a directory"
                                  if exc.errno in (errno.ELOOP, errno.ENOTDIR) else exc.strerror or str(exc)) from None
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd, parts[-1]

    def create(self, relative: str, mode: int = 0o600) -> int:
        """A new file (write only), never an existing one or through a link; its directories made."""
        fd, name = self._dir_of(relative, make=True)
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
        except FileExistsError:
            raise Refused(relative, "already exists in the output directory") from None
        finally:
            os.close(fd)

    def append(self, relative: str) -> int:
        """A file made by create(), opened again to append (never through a link)."""
        fd, name = self._dir_of(relative, make=False)
        try:
            return os.open(name, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        finally:
            os.close(fd)

    def remove(self, relative: str) -> None:
        fd, name = self._dir_of(relative, make=False)
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)

    def symlink(self, target: str, relative: str) -> None:
        """A link the caller chose (its target is the caller's, never an input's)."""
        fd, name = self._dir_of(relative, make=True)
        try:
            os.symlink(target, name, dir_fd=fd)
        finally:
            os.close(fd)


def read_regular_file(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of a regular file in a directory someone else can write (a container's output mounted from the
    host), no link followed and no blocking; Refused otherwise, and past limit bytes."""
    fd, st = open_private_file(path, limit)
    try:
        return read_at(fd, 0, st.st_size)
    finally:
        os.close(fd)


def write_new_file(path: str | os.PathLike, data: bytes, mode: int = 0o644) -> None:
    """Write path as a new file: whatever is at that name (a link someone planted) is removed first, and the
    file is created O_EXCL | O_NOFOLLOW, so nothing is written through a link."""
    path = os.fspath(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
