"""Write sample_logs/llamacpp_*.log: llama-server logs built from llama.cpp's own format strings.

Deterministic (seeded). Every message below is a format string of the llama.cpp source it names
(the grammars' descriptions name the same), printed through common/log.cpp's prefix
(``--log-prefix --log-timestamps``: ``M.SS.mmm.uuu L ``) and the server's macros (``slot %12.*s: id
%2d | task %d | ``, ``srv  %12.*s: ``, ``spec %12.*s: ``). Speculation is simulated per verify step
(a draft of k tokens, accepted as a prefix), so each request's line and the statistics rows' counters
(since the implementation was made: cumulative) keep llama.cpp's semantics. Run 1 has the wording of
tools/server/server.cpp (no mean length, the statistics row at info level), run 2 that of
tools/server/server-context.cpp (mean length; at ``-lv 4`` the trace ``acc per pos`` line and statistics
row; ``-v`` verify steps); the build numbers on the ``build:`` lines are illustrative, not the releases
where the wording changed.

    python scripts/make_llamacpp_sample_logs.py   # rewrite sample_logs/llamacpp_*.log
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "sample_logs"


@dataclass
class Impl:
    """common_speculative_impl's counters (common/speculative.cpp)."""

    name: str
    calls: list[int] = field(default_factory=lambda: [0, 0, 0])
    gen_drafts: int = 0
    acc_drafts: int = 0
    gen_tokens: int = 0
    acc_tokens: int = 0
    per_pos: list[int] = field(default_factory=list)


@dataclass
class Log:
    rng: random.Random
    pid: int | None
    lines: list[str] = field(default_factory=list)
    us: int = 0
    task: int = 0

    def emit(self, level: str, msg: str, gap_us: int = 150) -> None:
        self.us += gap_us
        t = self.us
        stamp = f"{t // 1000000 // 60}.{t // 1000000 % 60:02d}.{t // 1000 % 1000:03d}.{t % 1000:03d}"
        wrap = f"[{self.pid}] " if self.pid is not None else ""
        self.lines.append(f"{wrap}{stamp} {level} {msg}")

    def slot(self, level: str, func: str, slot: int, msg: str, gap_us: int = 150) -> None:
        self.emit(level, f"slot {func[:12]:>12}: id {slot:2d} | task {self.task} | {msg}", gap_us)

    def srv(self, func: str, msg: str) -> None:
        self.emit("I", f"srv  {func[:12]:>12}: {msg}")


def step(log: Log, k: int, p: float) -> int:
    """One verify step of a k-token draft: the accepted prefix's length."""
    n = 0
    while n < k and log.rng.random() < p:
        n += 1
    return n


def request(log: Log, impl: Impl, k: int, p: float, *, era: str, rounds: bool, trace: bool = False) -> None:
    """One request on a random slot: its verify steps, print_timings() and the statistics row."""
    slot = log.rng.randrange(4)
    n_prompt, target = log.rng.randint(40, 900), log.rng.randint(60, 400)
    log.slot("I", "launch_slot_", slot, "processing task", gap_us=log.rng.randint(2000, 900000))
    steps = accepted = drafted = generated = hits = 0
    per_pos = [0] * k
    impl.calls[0] += 1
    while generated < target:
        a = step(log, k, p)
        d = k
        if rounds and log.rng.random() < 0.03:
            d, a = 0, 0  # a release logged 0 drafted tokens for some steps
        steps += 1
        accepted += a
        hits += a > 0
        drafted += k
        generated += a + 1
        for i in range(a):
            per_pos[i] += 1
        if rounds:
            log.slot("D", "update_slots", slot, f"accepted {a}/{d} draft tokens, new n_tokens = {n_prompt + generated}")
    impl.calls[1] += steps
    impl.calls[2] += steps
    impl.gen_drafts += steps
    impl.acc_drafts += hits
    impl.gen_tokens += drafted
    impl.acc_tokens += accepted
    impl.per_pos += [0] * (k - len(impl.per_pos))
    for i in range(k):
        impl.per_pos[i] += per_pos[i]
    # A verify step costs a plain decode step (15.9 ms) and 8 % of one per draft token: the speed a request
    # logs is its tokens over its steps' time, so deeper accepted drafts make it faster.
    t_prompt, t_gen = n_prompt * 0.55, steps * 15.9 * (1 + 0.08 * k)
    f = "print_timing"
    log.slot(
        "I",
        f,
        slot,
        f"prompt eval time = {t_prompt:10.2f} ms / {n_prompt:5d} tokens "
        f"({t_prompt / n_prompt:8.2f} ms per token, {1e3 * n_prompt / t_prompt:8.2f} tokens per second)",
        9000,
    )
    log.slot(
        "I",
        f,
        slot,
        f"       eval time = {t_gen:10.2f} ms / {generated:5d} tokens "
        f"({t_gen / generated:8.2f} ms per token, {1e3 * generated / t_gen:8.2f} tokens per second)",
        1,
    )
    log.slot("I", f, slot, f"      total time = {t_prompt + t_gen:10.2f} ms / {n_prompt + generated:5d} tokens", 1)
    ratio = accepted / drafted
    if era == "server":  # tools/server/server.cpp
        log.slot("I", f, slot, f"draft acceptance = {ratio:0.5f} ({accepted:5d} accepted / {drafted:5d} generated)", 1)
    else:  # tools/server/server-context.cpp
        log.slot("I", f, slot, f"   graphs reused = {steps:10d}", 1)
        mean = 1.0 + accepted / steps
        log.slot(
            "I",
            f,
            slot,
            f"draft acceptance = {ratio:0.5f} ({accepted:5d} accepted / {drafted:5d} generated), "
            f"mean len = {mean:5.2f}",
            1,
        )
        if trace:  # SLT_TRC("     acc per pos = (%s)"): per position, n_accepted_per_pos[i] / n_draft_verif_steps
            log.slot("T", f, slot, "     acc per pos = (" + ", ".join(f"{n / steps:.3f}" for n in per_pos) + ")", 0)
    statistics(log, impl, era)
    log.slot("I", "release", slot, f"stop processing: n_tokens = {n_prompt + generated}, truncated = 0", 60)
    log.task += 1


def statistics(log: Log, impl: Impl, era: str) -> None:
    b, g, a = impl.calls
    dur = f", dur(b,g,a) = {0.002 * b:.3f}, {11.7 * g:.3f}, {0.0007 * a:.3f} ms"
    if era == "server":  # LOG_INF("statistics %s: #calls(b,g,a) = %zu %zu %zu, ...%s")
        log.emit(
            "I",
            f"statistics {impl.name}: #calls(b,g,a) = {b} {g} {a}, #gen drafts = {impl.gen_drafts}, "
            f"#acc drafts = {impl.acc_drafts}, #gen tokens = {impl.gen_tokens}, #acc tokens = {impl.acc_tokens}{dur}",
            30,
        )
        return
    # SPC_TRC("statistics %16s: #calls(b,g,a) = %4zu %6zu %6zu, #gen drafts = %6zu, #acc drafts = %5zu, #gen tokens
    # = %6zu, #acc tokens = %5zu%s%s") with ", #mean acc len = %.2f, #acc rate/pos = (%.3f, ...)"
    mean = 1.0 + impl.acc_tokens / a
    rates = ", ".join(f"{n / a:.3f}" for n in impl.per_pos)
    log.emit(
        "T",
        f"spec common_specu: statistics {impl.name:>16}: #calls(b,g,a) = {b:4d} {g:6d} {a:6d}, "
        f"#gen drafts = {impl.gen_drafts:6d}, #acc drafts = {impl.acc_drafts:5d}, #gen tokens = {impl.gen_tokens:6d}, "
        f"#acc tokens = {impl.acc_tokens:5d}, #mean acc len = {mean:.2f}, #acc rate/pos = ({rates}){dur}",
        30,
    )


def launch(log: Log, build: int, commit: str, argv: str, model: str, draft: str | None) -> None:
    log.lines.append(f"+ exec /app/llama-server {argv}")
    log.us, log.task = 0, 0
    log.emit("I", f"build: {build} ({commit}) with cc (GCC) 13.3.0 for x86_64-linux-gnu", 212)
    log.emit("I", "system info: n_threads = 16, n_threads_batch = 16, total_threads = 32")
    log.emit("I", "main: loading model")
    log.srv("load_model", f"loading model '{model}'")
    if draft:
        log.srv("load_model", f"loading draft model '{draft}'")
    log.srv("init", "initializing slots, n_slots = 4")
    log.emit("I", "main: server is listening on http://0.0.0.0:8080 - starting the main loop", 800000)
    log.srv("update_slots", "all slots are idle")


def make() -> str:
    rng = random.Random(24)
    log = Log(rng, pid=None)
    # Run 1: a draft model (tools/server/server.cpp's lines, the statistics row at info level).
    model, draft = "/models/Qwen3-8B-Q4_K_M.gguf", "/models/Qwen3-0.6B-Q8_0.gguf"
    launch(
        log, 6780, "1a2b3c4d", f"-m {model} -md {draft} --draft-max 8 --draft-min 2 -ngl 99 --port 8080", model, draft
    )
    impl = Impl("draft")
    for _ in range(14):
        request(log, impl, 8, 0.86, era="server", rounds=False)
    # Run 2: the same server restarted with MTP under a supervisor that prefixes its pid; debug rounds
    # and the trace statistics row (tools/server/server-context.cpp, -lv 4).
    log.pid = 49965
    launch(log, 7412, "9f7add1c", f"-m {model} --spec-type draft-mtp --draft-max 3 -v -lv 4 --port 8080", model, None)
    impl = Impl("draft-mtp")
    for _ in range(10):
        request(log, impl, 3, 0.83, era="context", rounds=True, trace=True)
    return "\n".join(log.lines) + "\n"


if __name__ == "__main__":
    path = OUT / "llamacpp_draft_mtp.log"
    path.write_text(make())
    print("wrote", path.name)
