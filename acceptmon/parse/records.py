"""Typed records produced by the parser.

Every recognised log line becomes one frozen pydantic model. The parser builds
them on a hot path, so it uses :func:`build`, which fills a model from values
that the grammar converters have already given their declared types (``int``,
``float``, ``bool``, ``str``, ``datetime``). ``tests/test_parse.py`` checks
that a record built this way equals one built by full pydantic validation, so
the shortcut never lies about types.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Literal, NoReturn, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict, Field

LineKind: TypeAlias = str
"""How a line was classified: a record kind's name (see :mod:`acceptmon.parse.kinds`) or one of
:data:`OTHER_LINE_KINDS`; the ``kind`` label of ``acceptmon_lines_total``."""

OTHER_LINE_KINDS: tuple[str, ...] = ("unrecognized", "oversized", "other")
"""Lines that built no record: format drift, skipped for their length, and everything else."""


class BaseRecord(BaseModel):
    """Fields every record has. Each record model declares ``kind`` (a ``Literal``) and ``run``
    where its columns want them: a model's field order is its table's column order."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    # defer_build: a model's validator and serializer are built at its first validation or dump, not at import:
    # the parser makes records with build(), so `parse` of a small log never pays for them.

    if TYPE_CHECKING:  # declared by every record model, at the column position it wants
        kind: str
        run: int

    file: str = ""
    """The file the line came from, as given on the command line ('-' for stdin)."""
    line: int = 0
    """1-based line number in that file."""
    timestamp: datetime | None = None
    """Log time of the line (naive, as logged)."""
    rank: str | None = None
    """Rank tokens as logged, e.g. ``DP0 TP0 EP0``; None when the prefix has none."""
    server: str = "sglang"
    """Which serving engine wrote the line."""
    # The stream fields (acceptmon.parse.streams.STREAM_FIELDS): tables write them last, after every kind's
    # own columns, so that the columns before them keep their places.
    source: str = ""
    """The stream the line came from, as its prefix names it: ``pod/NAME/CONTAINER`` (``kubectl logs --prefix``),
    a compose container name, stern's ``[NAMESPACE ]POD CONTAINER``; empty for a file's plain lines."""
    namespace: str = ""
    """Kubernetes namespace, when the prefix (stern ``-A``) or the file's path (``/var/log/pods/...``) names it."""
    pod: str = ""
    """Kubernetes pod, when the prefix or the file's path names it."""
    container: str = ""
    """Container, when the prefix or the file's path names it (compose: the container's name)."""


class DecodeStats(BaseRecord):
    """One scheduler decode-batch line (with or without speculative fields)."""

    kind: Literal["decode"] = "decode"
    accept_len: float | None = None
    """Mean tokens emitted per request per verify step, bonus token included."""
    accept_rate: float | None = None
    """``accept rate`` exactly as logged; its definition depends on the SGLang version."""
    draft_accept_rate: float | None = None
    """(accept_len - 1) / (num_draft_tokens - 1): accepted drafts / proposed drafts, one definition."""
    gen_throughput: float | None = None
    running_req: int | None = None
    queue_req: int | None = None
    token_usage: float | None = None
    """``token usage``; on hybrid models the full-attention (or GPU) pool's usage."""
    num_tokens: int | None = None
    """``#token``; on hybrid models ``#full token`` (or ``#gpu token``)."""
    cuda_graph: bool | None = None
    """Whether the last batch ran under a device graph (``cuda/cpu/npu/musa graph``)."""
    run: int = 0
    """Server launch index in the file: 1 for the first launch line, 0 before any."""
    spec_algorithm: str | None = None
    spec_num_steps: int | None = None
    spec_num_draft_tokens: int | None = None
    iteration: int | None = None
    """Forward iteration number (``Decode batch [N]``), when logged."""
    cap_len: float | None = None
    block_accept_len: float | None = None
    est_uncap_accept_len: float | None = None
    pre_allocated_usage: float | None = None
    prealloc_req: int | None = None
    transfer_req: int | None = None
    retracted_req: int | None = None
    swa_token_usage: float | None = None
    mamba_usage: float | None = None
    extra: dict[str, str] = Field(default_factory=dict)
    """``key: value`` pairs the grammar does not know, as logged (format drift shows here)."""


class PrefillStats(BaseRecord):
    """One scheduler prefill-batch line."""

    kind: Literal["prefill"] = "prefill"
    run: int = 0
    """Server launch index in the file: 1 for the first launch line, 0 before any."""
    iteration: int | None = None
    new_seq: int | None = None
    new_token: int | None = None
    cached_token: int | None = None
    token_usage: float | None = None
    running_req: int | None = None
    queue_req: int | None = None
    input_throughput: float | None = None
    extra: dict[str, str] = Field(default_factory=dict)


class SpecStats(BaseRecord):
    """One speculative-decoding metrics line (vLLM: ``Speculative metrics:`` / ``SpecDecoding metrics:``)."""

    kind: Literal["spec"] = "spec"
    accept_len: float | None = None
    """Mean tokens per verify step, bonus token included (logged, or derived: see accept_len_source)."""
    accept_rate: float | None = None
    """Accepted / drafted tokens, 0-1."""
    draft_accept_rate: float | None = None
    """Accepted / drafted tokens (for vLLM the same value as accept_rate)."""
    run: int = 0
    spec_algorithm: str | None = None
    spec_num_steps: int | None = None
    spec_num_draft_tokens: int | None = None
    engine: str | None = None
    """Engine index as logged (``000``), ``all`` for aggregated lines; None when the line has none."""
    accept_len_source: str | None = None
    """``logged`` (printed by the server, made bonus-inclusive) or ``derived`` (from token counts and k)."""
    accepted_tokens: int | None = None
    drafted_tokens: int | None = None
    emitted_tokens: int | None = None
    system_efficiency: float | None = None
    num_spec_tokens: int | None = None
    """k as printed on the line (vLLM v0 only)."""
    position_accept_rates: list[float | None] | None = None
    """Per draft position: the fraction of drafts whose first i+1 tokens were accepted."""
    cumulative: bool | None = None
    """True when the token counters count since server start (vLLM v0), false per interval."""
    extra: dict[str, str] = Field(default_factory=dict)


class ThroughputStats(BaseRecord):
    """One engine throughput line (vLLM ``Avg prompt throughput: ...``, or v0's prefix-cache line)."""

    kind: Literal["throughput"] = "throughput"
    gen_throughput: float | None = None
    running_req: int | None = None
    queue_req: int | None = None
    """Waiting (v1) or Pending (v0) requests."""
    token_usage: float | None = None
    """KV-cache usage of the device (GPU, XPU, ...), 0-1."""
    run: int = 0
    engine: str | None = None
    prompt_throughput: float | None = None
    prefix_cache_hit_rate: float | None = None
    """0-1 (the device cache's, on v0's separate line)."""
    swapped_req: int | None = None
    extra: dict[str, str] = Field(default_factory=dict)


class LaunchConfig(BaseModel):
    """The part of a server launch's ``server_args`` that acceptmon reports on."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    model_path: str | None = None
    spec_algorithm: str | None = None
    spec_num_steps: int | None = None
    spec_eagle_topk: int | None = None
    spec_num_draft_tokens: int | None = None
    spec_draft_model_path: str | None = None
    tp_size: int | None = None
    dp_size: int | None = None
    ep_size: int | None = None
    version: str | None = None
    """The server's version, when a launch line names it (vLLM ``(v0.10.2)``)."""
    spec_method_given: str | None = None
    """vLLM: the method the user gave (``speculative_config``'s ``method``), which vLLM may replace;
    ``spec_algorithm`` is the one that ran."""
    spec_algorithm_source: Literal["logged", "inferred"] | None = None
    """vLLM: ``logged`` when an engine line prints the method it resolved (``SpeculativeConfig(method=...)``),
    ``inferred`` when acceptmon worked it out from the draft model and the release's rules
    (:mod:`acceptmon.parse.vllm_method`); None for SGLang, or without speculation."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Every other server_args key, with its value as logged (Python literals decoded)."""

    @property
    def method(self) -> str | None:
        """The speculative method (``spec_algorithm``, for vLLM inferred where no line prints it); None without
        speculation."""
        return self.spec_algorithm

    @property
    def draft_tokens(self) -> int | None:
        """Tokens proposed per verify step: num_draft_tokens, or steps + 1 for a chain."""
        if self.spec_algorithm is None:
            return None
        if self.spec_num_draft_tokens is not None:
            return self.spec_num_draft_tokens
        if self.spec_num_steps is not None and self.spec_eagle_topk in (None, 1):
            return self.spec_num_steps + 1
        return None


class ServerLaunch(BaseRecord):
    """A ``server_args=...`` line: one server launch, which starts a run."""

    kind: Literal["launch"] = "launch"
    run: int = 0
    """Server launch index in the file: 1 for the first launch line, 0 before any."""
    config: LaunchConfig = Field(default_factory=LaunchConfig)


Record: TypeAlias = BaseRecord
"""Any record; :mod:`acceptmon.parse.kinds` says which models there are."""

R = TypeVar("R", bound=BaseModel)


def build(model: type[R], values: dict[str, Any]) -> R:
    """Make a model from values that already have their declared types.

    The parser's converters guarantee the types, so this skips validation (the
    cost that matters at a million lines); fields not given take their defaults.
    Its fields set is the names given, as validation would make it.
    """
    prepared = prepare(model)
    data = {**prepared.defaults, "extra": {}, **values} if prepared.extra else {**prepared.defaults, **values}
    return prepared.make(data, set(values))


class Prepared(Generic[R]):
    """How to make records of one model without validation (:func:`prepare`): the one place that sets
    pydantic's internals of a record.

    A record's ``__dict__`` is its field values, in the model's order; ``__pydantic_extra__`` and
    ``__pydantic_private__`` are None (``extra="forbid"``, no private attributes). Made from values that
    already have their declared types, it equals a validated record (``tests/test_parse.py``). The
    slots are set through their own descriptors, not ``object.__setattr__`` (which looks each one up):
    a record costs a third as much.
    """

    def __init__(self, model: type[R]) -> None:
        self.model = model
        self.names: tuple[str, ...] = tuple(model.model_fields)
        """The fields, in the model's order: a ``__dict__`` 's keys."""
        self.defaults: dict[str, Any] = {
            name: f.get_default(call_default_factory=True) for name, f in model.model_fields.items()
        }
        """Each field's default, in the model's order (a factory's value made once: ``extra`` is made per
        record by whoever fills it)."""
        self.extra = "extra" in self.defaults
        self.every: set[str] = Shared(self.names)
        """The fields set of a record given every field: one set for all of them, which refuses changes."""
        self.make: Callable[[dict[str, Any], set[str] | None], R] = _maker(model, self.every)
        """``make(data, fields_set)``: the record whose ``__dict__`` is ``data`` (kept, not copied: every field,
        in the model's order), its fields set ``fields_set`` (None: :attr:`every`)."""


def _maker(model: type[R], every: set[str]) -> Callable[[dict[str, Any], set[str] | None], R]:
    set_dict, set_fields, set_extra, set_private = (
        _slot(model, name).__set__
        for name in ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")
    )
    new = object.__new__

    def make(data: dict[str, Any], fields_set: set[str] | None = None) -> R:
        obj: R = new(model)
        set_dict(obj, data)
        set_fields(obj, every if fields_set is None else fields_set)
        set_extra(obj, None)
        set_private(obj, None)
        return obj

    return make


class Shared(set[str]):
    """A fields set many records share: it refuses changes, and its copies (what pydantic's ``model_copy``
    adds the updated names to) and pickles are plain sets."""

    def _refuse(self, *args: object) -> NoReturn:
        raise TypeError("a fields set shared by records is not to be changed")

    add = discard = remove = pop = clear = update = _refuse
    difference_update = intersection_update = symmetric_difference_update = _refuse
    __ior__ = __iand__ = __isub__ = __ixor__ = _refuse

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> set[str]:
        return set(self)

    def __reduce__(self) -> tuple[type[set[str]], tuple[list[str]]]:
        return set, (list(self),)


def prepare(model: type[R]) -> Prepared[R]:
    """The model's :class:`Prepared` constructor, made once."""
    got = _PREPARED.get(model)
    if got is None:
        got = _PREPARED[model] = Prepared(model)
    return got


def _slot(model: type[BaseModel], name: str) -> Any:
    """The descriptor that ``object.__setattr__(obj, name, ...)`` would use on a ``model``."""
    for klass in model.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    raise TypeError(f"{model.__name__} has no {name}")


_PREPARED: dict[type[BaseModel], Prepared[Any]] = {}


class RequestStats(BaseRecord):
    """One finished request's speculative acceptance (``Finish: ...`` or ``request.finished``, ``--log-requests``).

    Per request, not per decode batch: never a decode row, never in a decode mean.
    """

    kind: Literal["request"] = "request"
    rid: str | None = None
    """The request id (``meta_info['id']``)."""
    finish_reason: str | None = None
    """``meta_info['finish_reason']['type']``: stop, length, abort."""
    accept_len: float | None = None
    """``spec_accept_length`` = completion tokens / verify steps (bonus token included)."""
    accept_rate: float | None = None
    """``spec_accept_rate`` = correct drafts / proposed drafts (no bonus token)."""
    verify_ct: int | None = None
    """``spec_verify_ct``: verify steps the request took."""
    correct_drafts: int | None = None
    """``spec_num_correct_drafts`` (0.5.23; ``spec_accept_token_num`` before)."""
    proposed_drafts: int | None = None
    """``spec_num_proposed_drafts`` (0.5.23; ``spec_draft_token_num`` before)."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    e2e_latency: float | None = None
    """Seconds from arrival to finish, as logged."""
    run: int = 0
    """Server launch index in the file: 1 for the first launch line, 0 before any."""
    spec_algorithm: str | None = None
    spec_num_draft_tokens: int | None = None
    cap_len: float | None = None
    """``spec_cap_length`` (0.5.20+)."""
    block_accept_len: float | None = None
    """``spec_block_accept_length`` (0.5.20+, ragged verify)."""
    accept_histogram: list[int] | None = None
    """``spec_correct_drafts_histogram`` (0.5.23; ``spec_accept_histogram`` 0.5.10+): entry n counts the
    request's verify steps that accepted exactly n drafts (n = 0 .. steps)."""
    extra: dict[str, str] = Field(default_factory=dict)
    """Other short ``meta_info`` scalars, as logged."""


class PositionStats(BaseRecord):
    """One finished request's per-position acceptance on a line of its own: llama.cpp's ``acc per pos = (...)``
    (trace verbosity), printed right after the same slot's ``draft acceptance`` line. Not a request of its own."""

    kind: Literal["positions"] = "positions"
    run: int = 0
    """Server launch index in the file: 1 for the first launch line, 0 before any."""
    position_accept_rates: list[float | None] | None = None
    """Per draft position i: the share of the request's verify steps whose first i+1 drafts were accepted
    (the definition of vLLM's per-position rates)."""
    verify_ct: float | None = None
    """The request's verify steps, which weigh its rates: left empty by the parser, filled by the normalize
    step from the request line before it (:mod:`acceptmon.measure.normalize`)."""
    extra: dict[str, str] = Field(default_factory=dict)


class WarningRecord(BaseRecord):
    """A launch or serving warning/error the doctor reads (grammars ``sglang_warn_*.toml``).

    ``code`` is the message's distinctive phrase exactly as logged (for example ``Max running
    requests is reset to``), so rules name what the log says; the numbers and text around it
    fill ``value``, ``limit`` and ``detail`` as each grammar documents."""

    kind: Literal["warning"] = "warning"
    run: int = 0
    """Server launch index in the file: 1 for the first launch line, 0 before any."""
    code: str = ""
    value: float | None = None
    """The message's first number (a context length, a request count, retracted requests)."""
    limit: float | None = None
    """The message's second number, where it has one (the derived context length)."""
    detail: str | None = None
    """Free text the message carries (an exception, a reason, a backend)."""
