"""Record construction per record: the pack/unpack round trip of worker records and the typed lane's records.

    python benchmarks/bench_records.py [--mib 4] [--repeat 5]

Per shape (sglang-newest, vllm-dp), a generated log of ``--mib`` MiB is read by the batch pipeline on one
process with the compiled lane, keeping every record and the lane's JSON row parts. Then, per record, best
of ``--repeat``, CPU time: ``pack`` (all fields, and READS as compare sends), ``unpack`` of the pickled packs,
and ``typed.records`` over the captured row parts.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from parse_shapes import SHAPES, generate

from acceptmon.measure.columns import pack, unpack
from acceptmon.measure.normalize import READS
from acceptmon.parse.fast import typed
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.load import load_grammars
from acceptmon.pipeline import batch


class Keep:
    from_lane = True

    def __init__(self) -> None:
        self.records_wanted = frozenset(KINDS)
        self.got: list[Any] = []

    def chunk(self, records: list[Any]) -> list[Any]:
        return records

    def collect(self, part: list[Any]) -> None:
        self.got.extend(part)


def best(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=float, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    grammars = load_grammars()
    for shape in ("sglang-newest", "vllm-dp"):
        figures(shape, grammars, a.mib, a.repeat)


def figures(shape: str, grammars: Any, mib: float, repeat: int) -> None:
    parts: list[tuple[bytes, Any]] = []
    made = typed.records

    def spy(rows: bytes, names: Any = None) -> Any:
        parts.append((rows, names))
        return made(rows, names)

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / f"{shape}.log"
        generate(SHAPES[shape], log, mib)
        typed.records = spy
        batch.FAST_MIN_BYTES = 0
        try:
            job = Keep()
            batch.run([str(log)], grammars, job, jobs=1)
        finally:
            typed.records = made
    records = job.got
    n = len(records)
    lane_n = sum(len(made(r, names)) for r, names in parts)
    full = pickle.dumps(pack(records))
    slim = pickle.dumps(pack(records, READS))
    fig = {
        "pack": best(lambda: pack(records), repeat) / n,
        "pack READS": best(lambda: pack(records, READS), repeat) / n,
        "unpack": best(lambda: list(unpack(pickle.loads(full))), repeat) / n,
        "unpack READS": best(lambda: list(unpack(pickle.loads(slim), READS)), repeat) / n,
        "typed.records": best(lambda: [made(r, names) for r, names in parts], repeat) / max(lane_n, 1),
    }
    print(f"{shape}: {n} records ({lane_n} from the lane), pickled {len(full) / n:.0f} B / {len(slim) / n:.0f} B")
    for name, t in fig.items():
        print(f"  {name:14} {t * 1e6:6.2f} us a record (CPU)")


if __name__ == "__main__":
    main()
