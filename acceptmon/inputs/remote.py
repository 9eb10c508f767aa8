"""Logs by URL (``s3://``, ``gs://``, ``http(s)://``, ``file://``), read through fsspec: bytes in, never parsed.

fsspec and the filesystems behind it are optional extras, imported only when a URL is named:
``acceptmon[remote]`` (fsspec, s3fs, aiohttp: S3 and HTTP) and ``acceptmon[gcs]`` (fsspec, gcsfs: ``gs://``).
A URL is one object, read from its start as one stream (like stdin or a ``.gz`` file: no byte ranges,
whatever ``-j`` says); ``.gz`` objects are decompressed by :func:`acceptmon.inputs.files.open_log` as local
ones are. A glob in a URL (``s3://bucket/logs/*.log.gz``) names the objects it matches, in sorted order
(:func:`expand`). Whatever goes wrong (the extra missing, a scheme not read, a missing object, no
credentials, a refused connection, a read failing half-way) is an :class:`~acceptmon.errors.InputError`
naming the URL: one line, never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterable
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, BinaryIO, Final

from acceptmon.errors import InputError

URL: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}://")
"""A URL's start: ``scheme://``."""
SCHEMES: Final = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "http": "aiohttp", "https": "aiohttp"}
"""The schemes read, and the package each needs beside fsspec (``file://`` needs fsspec only)."""
READ: Final = "s3://, gs://, http://, https:// and file://"
BLOCK: Final = 8 << 20
"""Bytes an object store's file fetches at a time (s3fs's default is 50 MiB)."""
_GLOB: Final = re.compile(r"[*?\[]")
_info: dict[str, dict[str, Any]] = {}
"""What the store said of each URL checked (size, type, modification time): asked once a command."""


def is_url(path: str) -> bool:
    """Whether ``path`` names an object by URL (``scheme://...``) rather than a local file."""
    return URL.match(path) is not None


def scheme(url: str) -> str:
    return url.split("://", 1)[0].lower()


def is_pattern(url: str) -> bool:
    """Whether a URL is a glob: ``*``, ``?`` or ``[`` after the scheme; for HTTP only ``*`` before the query
    (``?`` starts one: a presigned URL is one object)."""
    rest = url.split("://", 1)[1]
    if scheme(url) in ("http", "https"):
        return "*" in rest.split("?", 1)[0]
    return _GLOB.search(rest) is not None


def _filesystem(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, its path) for ``url``; the extra missing or a scheme not read: InputError."""
    name = scheme(url)
    if name not in SCHEMES and name != "file":
        raise InputError(url, f"URL scheme {name}:// is not read; acceptmon reads {READ} URLs")
    extra = "gcs" if SCHEMES.get(name) == "gcsfs" else "remote"
    try:
        import fsspec
    except ImportError:
        raise InputError(
            url, f"reading URLs needs the optional extra acceptmon[{extra}] (fsspec): pip install 'acceptmon[{extra}]'"
        ) from None
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError:
        need = SCHEMES.get(name, "fsspec")
        raise InputError(url, f"reading {name}:// URLs needs {need}: pip install 'acceptmon[{extra}]'") from None
    except Exception as exc:  # a malformed URL: fsspec's own reason, one line
        raise url_error(url, exc) from None
    return fs, path


def url_error(url: str, exc: BaseException) -> InputError:
    """What went wrong with ``url``, as one line: not found, access denied, no credentials, cannot connect..."""
    cause = exc.__cause__ or exc.__context__
    names = {type(e).__name__ for e in (exc, cause) if e is not None}
    if any("Credentials" in n for n in names):
        return InputError(url, f"no credentials for {scheme(url)}:// ({_first_line(exc)}); {_credentials(url)}")
    if any(
        n.startswith("ClientConnector") or n in ("ConnectionRefusedError", "EndpointConnectionError") for n in names
    ):
        return InputError(url, f"cannot connect: {_first_line(cause if cause is not None else exc)}")
    if any("PayloadError" in n or n == "IncompleteRead" for n in names):
        return InputError(url, f"the transfer broke off ({_first_line(exc)})")
    status = getattr(exc, "status", None) or getattr(cause, "status", None)
    if isinstance(exc, FileNotFoundError):
        return InputError(url, "no such object" if status is None else f"no such object (HTTP {status})")
    if isinstance(exc, PermissionError):
        return InputError(url, f"access denied ({_first_line(exc)})")
    if isinstance(status, int):
        return InputError(url, f"HTTP {status}: {_first_line(exc)}")
    return InputError(url, f"cannot read: {type(exc).__name__}: {_first_line(exc)}")


def _credentials(url: str) -> str:
    if scheme(url).startswith("s3"):
        return "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run where an IAM role is"
    return "run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def check_url(url: str) -> None:
    """Raise InputError with a one-line reason if ``url`` is no object that can be read as a log."""
    if url in _info:
        return
    if is_pattern(url):
        raise InputError(url, "is a pattern: name one object here")
    fs, path = _filesystem(url)
    try:
        info = fs.info(path)
    except Exception as exc:
        raise url_error(url, exc) from None
    if info.get("type") == "directory":
        raise InputError(
            url, f"is a directory (a prefix), not a log object: name objects, or a glob like {url.rstrip('/')}/*.log"
        )
    if info.get("type") != "file":
        raise InputError(url, f"not a file object ({info.get('type')!r})")
    _info[url] = info


def expand(paths: Iterable[str]) -> list[str]:
    """``paths`` with each URL glob replaced by the objects it matches, sorted; none matching is an error."""
    out: list[str] = []
    for path in paths:
        if not is_url(path) or not is_pattern(path):
            out.append(path)
            continue
        fs, pattern = _filesystem(path)
        try:
            found = fs.glob(pattern, detail=True)
        except Exception as exc:
            raise url_error(path, exc) from None
        matched = sorted(_full_url(name, path) for name, info in found.items() if info.get("type") == "file")
        if not matched:
            raise InputError(path, "no object matches this pattern")
        for name, info in found.items():
            if info.get("type") == "file":
                _info.setdefault(_full_url(name, path), info)
        out.extend(matched)
    return out


def _full_url(name: str, pattern: str) -> str:
    """A glob match as a URL of the pattern's own scheme (``s3a://`` stays ``s3a://``)."""
    return name if is_url(name) else f"{scheme(pattern)}://{name}"


def size(url: str) -> int:
    """The object's size in bytes as the store gives it (0 if unknown); checks the URL first."""
    check_url(url)
    value = _info[url].get("size")
    return value if isinstance(value, int) else 0


def modified(url: str) -> datetime | None:
    """The object's modification time (local time, naive, as a local file's), if the store gives it."""
    info = _info.get(url, {})
    for key in ("mtime", "LastModified", "Last-Modified", "updated", "last_modified"):
        value = info.get(key)
        try:
            if isinstance(value, int | float):
                return datetime.fromtimestamp(value)
            if isinstance(value, datetime):
                return value.astimezone().replace(tzinfo=None) if value.tzinfo else value
            if isinstance(value, str):
                when = parsedate_to_datetime(value) if key == "Last-Modified" else datetime.fromisoformat(value)
                return when.astimezone().replace(tzinfo=None) if when.tzinfo else when
        except (ValueError, TypeError, OverflowError):
            continue
    return None


def file_path(url: str) -> str | None:
    """The local file a ``file://`` URL names, else None."""
    return str(_filesystem(url)[1]) if is_url(url) and scheme(url) == "file" else None


def local_names(paths: Iterable[str]) -> list[str]:
    """The local files among ``paths``: every path but URLs, and the file a ``file://`` URL names."""
    return [p if not is_url(p) else str(file_path(p)) for p in paths if not is_url(p) or scheme(p) == "file"]


def open_url(url: str) -> BinaryIO:
    """The object as a buffered binary stream read from its start (``peek`` works: the format is told from
    its first bytes); a read that fails half-way is an InputError naming the URL."""
    check_url(url)
    fs, path = _filesystem(url)
    opts = {"block_size": 0} if scheme(url) in ("http", "https") else {"block_size": BLOCK}  # HTTP: one GET, streamed
    try:
        f = fs.open(path, "rb", **opts)
    except Exception as exc:
        raise url_error(url, exc) from None
    return io.BufferedReader(_Guarded(url, f), buffer_size=1 << 20)


class _Guarded(io.RawIOBase):
    """An fsspec file whose failures name the URL (InputError), read sequentially."""

    def __init__(self, url: str, f: Any) -> None:
        self.url, self.f = url, f

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        try:
            data = self.f.read(len(b))
        except InputError:
            raise
        except Exception as exc:
            raise url_error(self.url, exc) from None
        n = len(data)
        b[:n] = data
        return n

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):  # a half-read HTTP stream may complain: the bytes read count
                self.f.close()
        super().close()
