"""Stream prefixes: which process of a file a line came from, cut off before the server's envelope.

A *source* is a file plus the stream a prefix names. Tools that merge the output of several
processes into one file put the process's name in front of each line:

- ``kubectl logs --prefix`` (``--all-pods``): ``[pod/NAME/CONTAINER] ``, maybe followed by
  ``--timestamps``' RFC 3339 time. Recognised by the literal ``[pod/``.
- ``docker compose logs`` / ``up`` (and docker-compose v1): ``NAME  | `` (padded to the longest name so
  far, maybe followed by ``-t``'s time). Recognised by the ``|``.
- stern: ``[NAMESPACE ]POD CONTAINER `` (maybe followed by its time), which says nothing of its own
  shape. Recognised only when the pod name has a ``-`` or ``.`` (every controller's pod has) and the rest
  of the line starts like a server envelope (``[2026-``, vLLM's ``(APIServer pid=N)`` or ``INFO 09-20 ``,
  llama-server's ``slot print_timing: ``, ``0.01.003.606 I `` and the like: :data:`_ENVELOPE_START`):
  prose that starts with two words (``look at [2026-...] Decode batch, ...``) is not taken for stern.
- a Kubernetes CRI log file line, ``TIME stdout|stderr F ``: its head is cut off too (it names no
  process: the file's path does, :func:`path_origin`). A ``P`` line (the first 16 KiB of a longer one)
  never reaches the parser whole-file readers feed: the line reader joins pieces first
  (``acceptmon.inputs.container``); one left over at the end of input comes as its ``F`` line.

What a prefix says becomes the record's ``source`` (``pod/NAME/CONTAINER``, the compose name, stern's
columns), ``namespace``, ``pod`` and ``container``; the rest of the line is matched by the grammars as a
line without the prefix would be. The research behind these shapes (each tool's source, read) is in
``docs/streams.md``.

Why a table here and not grammar files: a prefix is not an envelope (one of a server's alternatives
joined in front of its records) but a step before them, whose match is cut off and whose name is
normalised (kubectl's brackets, compose's padding and a wrapper's timestamp are not part of it); stern's
needs to see how the rest starts; a CRI file's names are in its path, not its lines; and a plain line must
cost no more than a look at its first character, as every line of ``serve`` comes here. A grammar kind
for that would need its own stage, schema, checks and fast-lane exemption for four fixed, documented
formats. The patterns are linear: every name class excludes the delimiter after it and every repeat is
bounded or possessive (``tests/test_streams.py`` times them on long adversarial lines). Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STREAM_FIELDS = ("source", "namespace", "pod", "container")
"""The record fields a stream fills (empty strings when unknown): the last columns of ``acceptmon parse``."""

_TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)"
"""RFC 3339 as kubelet, containerd, CRI-O, docker and stern write it (0-9 fraction digits, Z or an offset)."""
_KUBECTL = re.compile(r"\[pod/([a-z0-9][a-z0-9.-]{0,252}+)/([a-z0-9-]{0,63}+)\] (?:" + _TS + " )?+")
_COMPOSE = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.-]{0,254}+) {1,256}+\| (?:" + _TS + " ?)?+")
_ENVELOPE_START = (
    r"\[\d{4}-\d\d-\d\d[ T]\d\d:|\((?:[\w.-]{1,64}+ )?pid=\d|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d "
    r"|\[\d{1,10}+\] |\d{1,6}+\.\d\d\.\d{3}\.\d{3} [IWEDT] |(?:slot|srv|spec) {1,16}+\w{1,12}+: "
    r"|statistics {1,16}+[\w.-]{1,64}+: #calls|draft acceptance|build: \d|\+ (?:exec )?\S{0,256}?llama-server "
)
"""How a line of a known server starts (SGLang, vLLM with or without its process prefix, llama-server: a wrapper's
``[pid] ``, ``--log-timestamps``' ``M.SS.mmm.uuu L ``, the slot/server/speculative macro prefix, or a message the
default log prints without one, a shell's echo of its command line)."""
_NAME = r"[a-z0-9][a-z0-9-]{0,62}+"
_STERN = re.compile(
    rf"(?:({_NAME}) )?((?=[a-z0-9]{{1,253}}+[-.])[a-z0-9][a-z0-9.-]{{0,252}}+) ({_NAME}) "
    rf"(?:(?:{_TS}|\d\d-\d\d \d\d:\d\d:\d\d) )?+(?={_ENVELOPE_START})"
)
_CRI = re.compile(_TS + r" (?:stdout|stderr) F(?::[^ ]{0,64}+)? ")
_PODS_PATH = re.compile(
    r"(?:^|/)pods/([^_/]{1,63})_([^_/]{1,253})_[^_/]{1,64}/([a-z0-9-]{1,63})/\d+\.log(?:\.\d{8}-\d{6})?(?:\.gz)?$"
)
_CONTAINERS_PATH = re.compile(
    r"(?:^|/)containers/([a-z0-9.-]{1,253})_([a-z0-9-]{1,63})_([a-z0-9-]{1,63})-[0-9a-f]{1,64}\.log$"
)


@dataclass(frozen=True)
class Origin:
    """Where a line came from, as its prefix (or its file's path) says; empty strings for unknown."""

    source: str = ""
    """The stream as its prefix names it: ``pod/NAME/CONTAINER``, a compose name, stern's columns."""
    namespace: str = ""
    pod: str = ""
    container: str = ""

    def __bool__(self) -> bool:
        return bool(self.source or self.namespace or self.pod or self.container)

    def values(self) -> dict[str, str]:
        """The non-empty fields, by record field name."""
        given = zip(STREAM_FIELDS, (self.source, self.namespace, self.pod, self.container), strict=True)
        return {k: v for k, v in given if v}


NONE = Origin()


def split(text: str) -> tuple[Origin, str]:
    """A line's stream prefix and the rest: ``(NONE, text)`` for a line without one.

    A CRI head names no stream: ``(NONE, rest)``. Only the first prefix is cut off (a line that lost
    its newline may carry another stream's prefix inside: it is that line's message).
    """
    first = text[:1]
    if first == "[":
        if not text.startswith("[pod/"):
            return NONE, text
        m = _KUBECTL.match(text)
        if m is None:
            return NONE, text
        pod, container = m.groups()
        return Origin(f"pod/{pod}/{container}", "", pod, container), text[m.end() :]
    if not first.isascii() or not first.isalnum():
        return NONE, text
    if first.isdigit():
        m = _CRI.match(text)
        if m is not None:
            return NONE, text[m.end() :]
    m = _COMPOSE.match(text)
    if m is not None:
        name = m.group(1)
        return Origin(name, "", "", name), text[m.end() :]
    if first.isupper():
        return NONE, text
    m = _STERN.match(text)
    if m is not None:
        namespace, pod, container = m.groups()
        source = f"{namespace} {pod} {container}" if namespace else f"{pod} {container}"
        return Origin(source, namespace or "", pod, container), text[m.end() :]
    return NONE, text


def path_origin(path: str) -> Origin:
    """Namespace, pod and container of a Kubernetes log file, from its path; :data:`NONE` for another file.

    ``/var/log/pods/NAMESPACE_POD_UID/CONTAINER/N.log`` (also rotated, ``N.log.20260901-120000[.gz]``)
    and kubelet's ``/var/log/containers/POD_NAMESPACE_CONTAINER-ID.log``; names cannot hold ``_``.
    """
    tail = path[-700:]  # the names are bounded: a long path's head cannot matter
    m = _PODS_PATH.search(tail)
    if m is not None:
        namespace, pod, container = m.groups()
        return Origin("", namespace, pod, container)
    m = _CONTAINERS_PATH.search(tail)
    if m is not None:
        pod, namespace, container = m.groups()
        return Origin("", namespace, pod, container)
    return NONE
