"""vLLM's speculative method when its launch lines do not print it: the release's own inference. Pure.

A vLLM user may give a draft model and k without a method (``--speculative-model`` before
0.8, a ``speculative_config`` dict without ``method`` after); vLLM then works the method out
from the draft, by rules that changed from release to release. Only from 0.8.3 does the
engine line print the method it settled on (``SpeculativeConfig(method=...)``): that answer
is ``logged`` and always wins. Otherwise :func:`infer_launch_method` applies the rules of the
launch's release (the newest when no line names it) to what the log shows, marks the method
``inferred``, and works it out again when a later line of the same start adds the version.

The rules, as read from the released sources (``[ngram]`` is ngram throughout, ``ngram`` from 0.8.2):

- <= 0.7.2: the draft's HF ``model_type`` decides (medusa, mlp_speculator, else a draft model).
- 0.7.3: ``eagle-`` in the name is EAGLE; k without a draft on a DeepSeek-V3/R1 target is MTP
  (the log shows the target as the draft).
- 0.8.2 - 0.8.4: the ``speculative_config`` dict; detection overrides any method given.
- 0.8.5 - 0.10.1: ``eagle``/``eagle3`` given are kept; ``eagle-`` or ``eagle3-`` in the name is EAGLE.
- 0.10.2: ``eagle3`` anywhere in the name is EAGLE-3; MTP labels per target (``ernie_mtp``, ...).
- 0.11+: every ``*_mtp`` is ``mtp``; k alone is refused; 0.25+: ``dflash``/``dspark`` by name.

The draft's HF config never appears in a log, so two name conventions stand in for it
(``medusa``; ``accelerator`` or ``speculator``, IBM's MLP speculators), and a draft that
matches no rule is ``draft_model``, as vLLM calls it: speculation, in any case.
"""

from __future__ import annotations

import re
from typing import Any

Version = tuple[int, int, int]

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")
_MTP_TARGET = re.compile(r"deepseek-(?:v3|r1)|mimo|glm-4\.[5-9]|ernie-4\.5|qwen3-next|longcat-flash", re.IGNORECASE)
"""Targets whose own MTP layers vLLM drafts with when the draft model is the target."""
_DETECTED = frozenset({"draft_model", "eagle", "eagle3", "medusa", "mlp_speculator", "mtp"})
"""Methods that vLLM's detection may replace; any other method given is what ran (ngram_gpu, suffix, ...)."""


def infer_vllm_method(
    method: str | None,
    draft_model: str | None,
    version: str | None = None,
    *,
    target_model: str | None = None,
    num_spec_tokens: int | None = None,
) -> str | None:
    """The speculative method vLLM ran, by the rules of its release, from what a launch line shows.

    Args:
        method: the method the user gave (a ``speculative_config`` key), or None.
        draft_model: the draft model as logged (``speculative_model``, the config's ``model``).
        version: the release (``0.10.2``); None applies the newest rules.
        target_model: the served model (a draft that is the target means MTP).
        num_spec_tokens: k, which alone (no draft, no method) asks for MTP.

    Returns:
        vLLM's name for the method (``eagle``, ``draft_model``, ``deepseek_mtp``, ...), or None
        when the line asks for no speculation (or for one that the release refuses to start).
    """
    m, d, v = _clean(method), _clean(draft_model), parse_version(version)
    if m == "[ngram]":
        m = "ngram"
    before_ngram_name = v is not None and v < (0, 8, 2)  # 'ngram' without brackets counts from 0.8.2
    if m == "ngram" or d == "[ngram]" or (d == "ngram" and not before_ngram_name):
        return "ngram"
    if m is not None and m.endswith("_mtp") and (v is None or v >= (0, 11, 0)):
        m = "mtp"  # 0.11+: 'method `%s` is deprecated and replaced with mtp.'
    if m is not None and m not in _DETECTED and not m.endswith("_mtp"):
        return m  # suffix, ngram_gpu, dflash, dspark, ...: as given
    if d is None:
        return _without_draft(m, v, target_model, num_spec_tokens)
    return _with_draft(m, d.lower(), v, target_model)


def infer_launch_method(config: dict[str, Any]) -> None:
    """Fill ``spec_algorithm`` of a (merged) vLLM launch config in place, unless a line printed it.

    A method from vLLM's own ``SpeculativeConfig(method=...)`` (``spec_algorithm_source``
    ``logged``), or one a grammar sets directly, is kept; an earlier inference is redone
    with what the config holds now (a later engine line's version, say).
    """
    if config.get("spec_algorithm") is not None and config.get("spec_algorithm_source") != "inferred":
        return
    found = infer_vllm_method(
        config.get("spec_method_given"),
        config.get("spec_draft_model_path"),
        config.get("version"),
        target_model=config.get("model_path"),
        num_spec_tokens=config.get("spec_num_steps"),
    )
    config["spec_algorithm"] = found
    config["spec_algorithm_source"] = None if found is None else "inferred"


def parse_version(text: str | None) -> Version | None:
    """``0.10.2`` (or ``v0.8.5.post1``, ``0.11.0rc1``) as (0, 10, 2); None when it is not a version."""
    m = _VERSION.match(text.strip()) if text else None
    return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None


def _clean(text: str | None) -> str | None:
    text = (text or "").strip().strip("'\"")
    return None if text in ("", "None") else text


def _without_draft(m: str | None, v: Version | None, target: str | None, k: int | None) -> str | None:
    """No draft model named: MTP from the target's own layers, or nothing."""
    if m is None and k is None:
        return None
    if m is not None and m != "mtp" and not m.endswith("_mtp"):
        return m  # eagle, medusa, draft_model without a model: vLLM refuses to start, but it was asked for
    if v is not None and (v < (0, 7, 3) or (m is None and v >= (0, 11, 0))):
        return None  # ValueError: num_speculative_tokens was provided without speculative model
    if m is not None and m != "mtp" and v is not None:
        return m  # 0.9 - 0.10: method='deepseek_mtp' as given
    return _mtp_label(v, target)


def _with_draft(m: str | None, name: str, v: Version | None, target: str | None) -> str:
    """A draft model named (``name`` lower case): EAGLE by name, MTP for the target itself, else by config."""
    is_target = target is not None and name.rstrip("/") == target.lower().rstrip("/")
    if is_target and _MTP_TARGET.search(name) and (v is None or v >= (0, 7, 3)):
        return _mtp_label(v, target)  # hf_config_override: deepseek_v3 -> deepseek_mtp, ...
    if v is not None and v < (0, 8, 5):  # up to 0.8.4 detection overwrites any method given
        if "eagle-" in name:
            return "eagle"  # 0.7.3+: EAGLEConfig; earlier only a converted (model_type eagle) head ran as EAGLE
        if m in ("medusa", "mlp_speculator"):
            return m  # decided by the draft's model_type, which the method given names
        return _by_draft_config(name) or "draft_model"
    if m in ("eagle", "eagle3"):
        return m
    if "eagle-" in name:
        return "eagle"
    if v is None or v >= (0, 10, 2):
        if "eagle3" in name:
            return "eagle3"
    elif "eagle3-" in name:
        return "eagle"  # 0.8.5 - 0.10.1: an EAGLE-3 name without method='eagle3' runs as EAGLE
    if (v is None or v >= (0, 25, 0)) and m is None:
        for key in ("dflash", "dspark"):
            if key in name:
                return key
    return _by_draft_config(name) or m or "draft_model"


def _by_draft_config(name: str) -> str | None:
    """vLLM's rules on the draft's HF config, which no log prints: by the name conventions that stand for it."""
    if "medusa" in name:
        return "medusa"
    if "accelerator" in name or "speculator" in name:
        return "mlp_speculator"
    return None


def _mtp_label(v: Version | None, target: str | None) -> str:
    """What vLLM calls an MTP run: ``mtp`` from 0.11 (and when the release is unknown)."""
    if v is None or v >= (0, 11, 0):
        return "mtp"
    t = (target or "").lower()
    if v >= (0, 10, 2) and "ernie-4.5" in t:
        return "ernie_mtp"
    if v >= (0, 10, 2) and "qwen3-next" in t:
        return "qwen3_next_mtp"
    return "deepseek_mtp"  # 0.7.3 - 0.10.x (0.8.3 - 0.8.5 print 'draft_model' for it, MiMo on 0.9.x too)
