"""The meta_info reader: exact values, quotes and brackets in text, nan/None, and one linear pass over long lines."""

from __future__ import annotations

from typing import Any

import pytest

from acceptmon.parse import meta_info as request_body
from acceptmon.parse.grammar import Converter, FieldSpec
from acceptmon.parse.meta_info import dict_members, find_meta_info, read_meta_info

KEYS = {
    "id": Converter("id", FieldSpec(kind="str", field="rid")),
    "finish_reason.type": Converter("finish_reason.type", FieldSpec(kind="str", field="finish_reason")),
    "spec_accept_length": Converter("spec_accept_length", FieldSpec(kind="float", field="accept_len")),
    "spec_accept_rate": Converter("spec_accept_rate", FieldSpec(kind="float", field="accept_rate")),
    "spec_verify_ct": Converter("spec_verify_ct", FieldSpec(kind="int", field="verify_ct")),
    "e2e_latency": Converter("e2e_latency", FieldSpec(kind="float", field="e2e_latency")),
}
META = (
    "{'id': 'r1', 'finish_reason': {'type': 'stop', 'matched': '}'}, 'e2e_latency': 1.5, "
    "'spec_accept_rate': 0.61, 'spec_accept_length': 2.83, 'spec_verify_ct': 147, 'spec_accept_histogram': [1, 2]}"
)


def _read(body: str) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    extra: dict[str, str] = {}
    read_meta_info(body, KEYS, values, extra)
    return values, extra


class Steps:
    """Stands in for the token regex and records every step's span."""

    def __init__(self) -> None:
        self.real = request_body._TOKEN
        self.spans: list[tuple[int, int]] = []

    def match(self, text: str, pos: int) -> Any:
        m = self.real.match(text, pos)
        self.spans.append((pos, m.end() if m else -1))
        return m


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> Steps:
    counter = Steps()
    monkeypatch.setattr(request_body, "_TOKEN", counter)
    return counter


def test_values_of_out_meta_info_only():
    body = (
        "obj=GenerateReqInput(rid='r1', text=\"a prompt quoting out={'meta_info': {'spec_accept_length': 9.9}}\"), "
        f"out={{'text': 'x ) ] }}', 'output_ids': [1, 2], 'meta_info': {META}, 'prompt_token_ids': [3]}}"
    )
    values, extra = _read(body)
    assert values == {
        "rid": "r1",
        "finish_reason": "stop",
        "e2e_latency": 1.5,
        "accept_rate": 0.61,
        "accept_len": 2.83,
        "verify_ct": 147,
    }
    assert extra == {}  # the histogram list and the finish_reason dict are no extras


def test_json_record():
    body = (
        '{"timestamp": "2026-09-01T12:00:00", "event": "request.finished", "rid": "r9", "obj": {"text": '
        '"\\"out\\": {\\"meta_info\\": {\\"spec_verify_ct\\": 1}}", "out": {}}, "out": {"meta_info": '
        '{"id": "r9", "finish_reason": {"type": "length"}, "e2e_latency": NaN, "spec_accept_length": 3.5, '
        '"spec_accept_rate": Infinity, "spec_verify_ct": 20, "weight_version": "v2"}}}'
    )
    values, extra = _read(body)
    assert values == {"rid": "r9", "finish_reason": "length", "accept_len": 3.5, "verify_ct": 20}
    assert extra == {"weight_version": "v2"}


@pytest.mark.parametrize(
    ("raw", "want"),
    [("nan", None), ("inf", None), ("-inf", None), ("None", None), ("null", None), ("NaN", None), ("2.5", 2.5)],
)
def test_nan_and_none_leave_the_field_empty(raw, want):
    values, _ = _read(f"obj=X(), out={{'meta_info': {{'spec_accept_length': {raw}, 'spec_verify_ct': 3}}}}")
    assert values.get("accept_len") == want
    assert values["verify_ct"] == 3


@pytest.mark.parametrize(
    "body",
    [
        "obj=GenerateReqInput(rid='a', text='spec_verify_ct')",  # no out
        "obj=GenerateReqInput(rid='a'), out={'meta_info': {'spec_verify_ct': 3",  # cut short
        "obj=GenerateReqInput(rid='a), out={'meta_info': {'spec_verify_ct': 3}}",  # unterminated quote
        "obj=X(), out={'meta_info': {'spec_verify_ct': 'three'}}",  # a known key that does not convert
        "obj=X(), out={'meta_info': {'spec_verify_ct': [3]}}",
    ],
)
def test_a_line_without_a_readable_meta_info_raises_value_error(body):
    with pytest.raises(ValueError):
        _read(body)


def test_members_are_spans_of_raw_values():
    text = "{'a': 1, 'b': 'x, y', 'c': {'d': [1, {'e': 2}]}, 'f': None}"
    members, end = dict_members(text, 1)
    assert {k: text[s:e] for k, (s, e) in members.items()} == {
        "a": "1",
        "b": "'x, y'",
        "c": "{'d': [1, {'e': 2}]}",
        "f": "None",
    }
    assert end == len(text)


def test_a_500_kb_prompt_is_one_step_and_every_character_is_read_once(steps):
    nasty = "x' \" { ( [ ] ) } \\ out={'meta_info': {" * 12_000  # 500 kB of every character the reader cares about
    body = (
        f"obj=GenerateReqInput(rid='r', text={nasty!r}, sampling_params={{'stop': ['}}']}}), "
        f"out={{'text': {nasty!r}, 'meta_info': {META}}}"
    )
    assert len(body) > 1_000_000
    values, _ = _read(body)
    assert values["accept_len"] == 2.83
    assert len(steps.spans) < 80  # the prompt and the output are one step each, whatever their length
    done, first = 0, 0
    for start, end in steps.spans:  # find_meta_info, then the meta_info members: one contiguous pass
        if start != done:
            break
        done, first = end, first + 1
    assert done == len(body) - 1  # every character once, up to meta_info's closing brace
    nested = steps.spans[first:]  # then only the finish_reason dict again, for its 'type'
    assert sum(e - s for s, e in nested) == len("{'type': 'stop', 'matched': '}'}") - 1


def test_a_long_meta_info_list_is_read_in_steps_proportional_to_its_tokens(steps):
    probs = ", ".join(f"({-i / 1000}, {i}, 'tok{i}')" for i in range(20_000))  # output_token_logprobs
    body = f"obj=X(), out={{'meta_info': {{'output_token_logprobs': [{probs}], 'spec_verify_ct': 7}}}}"
    values, _ = _read(body)
    assert values == {"verify_ct": 7}
    assert len(steps.spans) <= 5 * 20_000 + 20
    assert sum(e - s for s, e in steps.spans) == len(body) - 1  # out's closing brace is never read


def test_unterminated_quote_stops_after_one_failed_step(steps):
    body = 'obj=X(text="' + "a" * 200_000 + ", out={'meta_info': {'spec_verify_ct': 1}}"
    assert find_meta_info(body) is None
    assert steps.spans[-1][1] == -1
    assert len(steps.spans) == 4  # 'obj=X', '(', 'text=', then the quote that never closes


def test_headers_before_out_and_an_embedded_out_kwarg_are_skipped():
    body = (
        "obj=GenerateReqInput(rid='h', sampling_params={'out': {'meta_info': {'spec_verify_ct': 99}}}), "
        "headers={'x-smg-routing-key': 'k'}, out={'meta_info': {'id': 'h', 'spec_verify_ct': 4}}"
    )
    assert _read(body) == ({"rid": "h", "verify_ct": 4}, {})
