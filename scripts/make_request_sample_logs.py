"""Write sample_logs/request_*.log: SGLang logs with per-request acceptance (``--log-requests``).

The finished-request lines are rendered the way SGLang's request logger renders them
(``utils/request_logger.py``: ``_dataclass_to_string_truncated`` for ``Finish: obj=...``,
``json.dumps`` of ``{"timestamp", "event", "rid", "obj", "out"}`` for the JSON format), with
``meta_info`` built as ``tokenizer_manager.py`` builds it (0.5.10 and 0.5.23 key names).
Prompts and outputs are on those lines; some prompts quote request log lines, which the
parser must not read as the request's own values. Deterministic (seeded).

    python scripts/make_request_sample_logs.py    # rewrite sample_logs/request_*.log
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from make_sample_logs import Log, decode_new, launch, server_args

WORDS = (
    "the draft model proposes tokens and the target verifies them in one forward pass so a long accepted "
    "prefix saves steps while a rejected token costs one step and quotes like ' and \" or braces } ) ] "
    "must not confuse a reader"
).split()
QUOTED = (
    "[2026-09-01 12:00:00] Finish: obj=GenerateReqInput(rid='x'), out={'meta_info': {'id': 'x', "
    "'spec_accept_length': 9.99, 'spec_verify_ct': 1}}"
)
"""A prompt that quotes another request's log line: its 9.99 is never this request's value."""


@dataclass
class Request:
    """One request's logged parts, as SGLang renders them."""

    rid: str
    text: str
    output: str
    meta: dict[str, Any]
    sampling: dict[str, Any] = field(default_factory=lambda: {"max_new_tokens": 512, "temperature": 0.0})


def render(value: Any) -> str:
    """SGLang's ``_dataclass_to_string_truncated`` with no truncation: reprs of strings, str() of the rest."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"'{k}': {render(v)}" for k, v in value.items()) + "}"
    return str(value)


def truncated(text: str, max_length: int) -> str:
    """How the repr renderer shortens a long string at --log-requests-level 2."""
    if len(text) <= max_length:
        return repr(text)
    half = max_length // 2
    return f"{text[:half]!r} ... {text[-half:]!r}"


def prose(r: random.Random, n: int) -> str:
    return " ".join(r.choice(WORDS) for _ in range(n))


def meta_info(r: random.Random, rid: str, draft: int, accept: float, *, new_keys: bool) -> dict[str, Any]:
    """meta_info of a finished request: accept length = completion tokens / verify steps."""
    completion = r.randint(24, 700)
    verify = max(1, round(completion / accept))
    proposed = verify * (draft - 1)
    correct = min(max(completion - verify, 0), proposed)
    reason = r.choice([{"type": "stop", "matched": 128009}, {"type": "length", "length": completion}])
    meta: dict[str, Any] = {"id": rid, "finish_reason": reason, "prompt_tokens": r.randint(12, 4000)}
    meta["weight_version"] = "default"
    if new_keys:
        meta.update(num_retractions=0, reasoning_tokens=0)
    meta.update(completion_tokens=completion, cached_tokens=r.randint(0, 64), e2e_latency=round(r.uniform(0.3, 9), 3))
    meta["spec_accept_rate"] = correct / proposed
    meta["spec_accept_length"] = completion / verify
    if new_keys:
        meta.update(spec_num_correct_drafts=correct, spec_num_proposed_drafts=proposed, spec_verify_ct=verify)
        meta["spec_correct_drafts_histogram"] = [r.randint(0, verify) for _ in range(draft)]
    else:
        meta.update(spec_accept_token_num=correct, spec_draft_token_num=proposed, spec_verify_ct=verify)
        meta["spec_accept_histogram"] = [r.randint(0, verify) for _ in range(draft)]
    return meta


def finish_repr(req: Request, level: int) -> str:
    """``Finish: obj=GenerateReqInput(...), out={...}`` at --log-requests-level 1, 2 or 3."""
    text = "" if level < 2 else f"text={truncated(req.text, 2048 if level == 2 else 1 << 30)}, "
    obj = (
        f"GenerateReqInput(rid={req.rid!r}, session_id=None, {text}sampling_params={render(req.sampling)}, "
        "return_logprob=False, logprob_start_len=-1, top_logprobs_num=0, stream=False, log_metrics=True, "
        "modalities=None, lora_id=None, custom_logit_processor=None, bootstrap_host=None, priority=None)"
    )
    out: dict[str, Any] = {"meta_info": req.meta}
    if level >= 2:
        out = {"text": req.output, "output_ids": [101, 2023, 2003], "meta_info": req.meta}
    return f"Finish: obj={obj}, out={render(out)}"


def finish_json(req: Request, at: datetime) -> str:
    obj = {"rid": req.rid, "text": req.text, "sampling_params": req.sampling, "stream": False}
    out = {"text": req.output, "output_ids": [101, 2023], "meta_info": req.meta}
    record = {"timestamp": at.isoformat(), "event": "request.finished", "rid": req.rid, "obj": obj, "out": out}
    return json.dumps(record, ensure_ascii=False)


def eagle3(tokens: int) -> dict[str, object]:
    return {
        "algo": "EAGLE3",
        "draft": "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
        "steps": tokens - 1,
        "topk": 1,
        "tokens": tokens,
    }


def serve(log: Log, n: int, draft: int, *, new_keys: bool, level: int, big_every: int = 0) -> None:
    """Decode lines and finished requests; every ``big_every``-th prompt is long (level 3)."""
    r = log.rng
    for i in range(n):
        accept = r.uniform(2.4, 3.4)
        log.add(decode_new(r, r.randint(2, 8), accept, draft, r.uniform(600, 760)), "TP0")
        rid = f"{r.getrandbits(128):032x}"
        prompt = QUOTED if i % 5 == 2 else prose(r, r.randint(8, 60))
        lvl = level
        if big_every and i % big_every == big_every - 1:
            prompt, lvl = prose(r, 4000), 3
        req = Request(rid, prompt, prose(r, 30), meta_info(r, rid, draft, accept, new_keys=new_keys))
        log.add(f"Receive: obj=GenerateReqInput(rid={rid!r}, text={truncated(prompt, 2048)})")
        log.access()
        log.tick(r.uniform(0.2, 0.8))
        log.add(finish_repr(req, lvl))


def no_spec_requests(log: Log, n: int) -> None:
    """A server without speculative decoding: its Finish lines have no spec keys and are other lines."""
    r = log.rng
    for _ in range(n):
        log.add(decode_new(r, r.randint(2, 8), None, 1, r.uniform(90, 120)), "TP0")
        rid = f"{r.getrandbits(128):032x}"
        meta = {"id": rid, "finish_reason": {"type": "stop", "matched": 2}, "prompt_tokens": 40}
        meta.update(completion_tokens=r.randint(10, 300), cached_tokens=0, e2e_latency=round(r.uniform(1, 5), 3))
        log.add(finish_repr(Request(rid, prose(r, 20), prose(r, 20), meta), 1))
        log.tick(r.uniform(0.5, 1.0))


def request_0523() -> None:
    """0.5.23: dict server_args, level-2 Finish lines, a few level-3 ones with long prompts, then a non-spec run."""
    log = Log(datetime(2026, 9, 1, 11, 59, 0), seed=23)
    launch(log, server_args("meta-llama/Llama-3.1-8B-Instruct", eagle3(4), 1, 1, 1, dict_form=True))
    serve(log, 30, 4, new_keys=True, level=2, big_every=10)
    log.add("Finish: obj=GenerateReqInput(rid='abort-1'), out={'meta_info': {'id': 'abort-1', 'finish_reason': "
            "{'type': 'abort', 'message': 'client disconnected'}, 'prompt_tokens': 9, 'completion_tokens': 1, "
            "'e2e_latency': nan, 'spec_accept_rate': 0.0, 'spec_accept_length': 1.0, 'spec_num_correct_drafts': 0, "
            "'spec_num_proposed_drafts': 3, 'spec_verify_ct': 1}}")  # fmt: skip
    log.tick(60)
    launch(log, server_args("meta-llama/Llama-3.1-8B-Instruct", None, 1, 1, 1, dict_form=True))
    no_spec_requests(log, 6)
    log.write("request_0.5.23.log")


def request_0510() -> None:
    """0.5.10: ServerArgs repr, level-1 Finish lines with the old spec_accept_token_num keys."""
    log = Log(datetime(2026, 3, 1, 12, 0, 0), seed=10)
    launch(log, server_args("meta-llama/Llama-3.1-8B-Instruct", eagle3(4), 1, 1, 1))
    serve(log, 24, 4, new_keys=False, level=1)
    log.write("request_0.5.10.log")


def request_json() -> None:
    """0.5.23 with --log-requests-format json: request.received and request.finished records."""
    log = Log(datetime(2026, 9, 2, 8, 0, 0), seed=24)
    launch(log, server_args("meta-llama/Llama-3.1-8B-Instruct", eagle3(6), 1, 1, 1, dict_form=True))
    r = log.rng
    for i in range(20):
        accept = r.uniform(3.0, 4.6)
        log.add(decode_new(r, r.randint(2, 8), accept, 6, r.uniform(700, 900)), "TP0")
        rid = f"{r.getrandbits(128):032x}"
        prompt = QUOTED if i % 4 == 1 else prose(r, r.randint(8, 80))
        req = Request(rid, prompt, prose(r, 30), meta_info(r, rid, 6, accept, new_keys=True))
        if i == 7:
            req.meta["e2e_latency"] = float("nan")
        received = {"timestamp": log.t.isoformat(), "event": "request.received", "rid": rid, "obj": {"text": prompt}}
        log.add(json.dumps(received))
        log.tick(r.uniform(0.2, 0.8))
        log.add(finish_json(req, log.t))
    log.write("request_json_0.5.23.log")


def main() -> None:
    request_0523()
    request_0510()
    request_json()


if __name__ == "__main__":
    main()
