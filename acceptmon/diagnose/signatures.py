"""The signature types rules are built from, by name. Pure.

A rule file's ``signature`` names one of :data:`SIGNATURES`; its ``params`` are checked
against that type's parameter model when the rule loads. A new signature type is a
:class:`~acceptmon.diagnose.detector.Detector` subclass, its parameter model, and one entry here.
"""

from __future__ import annotations

from acceptmon.diagnose import detect_accept as a
from acceptmon.diagnose import detect_context as c
from acceptmon.diagnose import detect_load as m
from acceptmon.diagnose import detect_serving as s
from acceptmon.diagnose.detector import Signature

SIGNATURES: dict[str, Signature] = {
    sig.name: sig
    for sig in (
        Signature(
            "draft_algorithm",
            a.StuckParams,
            a.Stuck,
            "the launch pairs an algorithm with a draft made for another, or accept len sits at 1.00",
        ),
        Signature("accept_len_low", a.LowParams, a.Low, "the run's mean accept length is under a tier's threshold"),
        Signature(
            "chain_depth",
            a.DepthParams,
            a.Depth,
            "(L - 1)/k, or the last drafted position's rate, is under its threshold",
        ),
        Signature(
            "below_expected", c.ExpectedParams, c.Expected, "accept length under a ratio of --expected-accept-len"
        ),
        Signature(
            "long_context",
            c.ContextParams,
            c.LongContext,
            "sequences beyond the draft's context length, or L falling with sequence length",
        ),
        Signature(
            "launch_signal",
            s.SignalParams,
            s.Signal,
            "a launch warning/error code, or server_args values, show the pattern",
        ),
        Signature("cuda_graph_off", s.GraphParams, s.GraphOff, "speculative decode batches run without CUDA graphs"),
        Signature(
            "queue_at_cap",
            s.CapParams,
            s.QueueAtCap,
            "running requests pinned at a speculative cap with requests queued",
        ),
        Signature(
            "retractions",
            m.RetractParams,
            m.Retractions,
            "KV retractions while speculating, or a large speculative KV reserve",
        ),
        Signature(
            "large_batch", m.BatchParams, m.LargeBatch, "verify work at large batches outweighs the accepted tokens"
        ),
        Signature("speedup", m.SpeedupParams, m.Speedup, "against a baseline, speculation loses or barely pays"),
    )
}
