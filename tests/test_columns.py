"""Per-batch numbers as columns and records packed as tuples: the same values as the objects they replace,
in a fraction of the memory (``compare`` and ``doctor`` on logs of millions of decode lines)."""

from __future__ import annotations

import multiprocessing
import pickle
import random
import tracemalloc
from concurrent.futures import ProcessPoolExecutor
from itertools import accumulate
from operator import itemgetter

import pytest

from acceptmon.diagnose.engine import Doctor
from acceptmon.diagnose.read import DoctorJob
from acceptmon.diagnose.rules import load_rules
from acceptmon.errors import InputError
from acceptmon.measure.bootstrap import block_length, bootstrap_means, draw_starts
from acceptmon.measure.columns import NONE_INT, Batches, Floats, pack, unpack
from acceptmon.measure.compare import Batch, Sample, compare
from acceptmon.measure.normalize import READS, Fact, Load, Normalizer
from acceptmon.measure.normalize import Batch as NormBatch
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import DecodeStats, prepare
from acceptmon.pipeline import batch, sides
from acceptmon.pipeline.sides import read_side
from acceptmon.pipeline.workers import Shipped
from tests.conftest import SAMPLES

LOGS = sorted(SAMPLES.glob("*.log"))


def records_of(grammars, path, wanted=None):
    return Parser(grammars, str(path), records=wanted).feed(path.read_bytes())


def old_bootstrap_means(columns, rng, resamples):
    """The bootstrap as it was over lists of Python floats (None: not logged), step for step."""
    n = len(columns[0])
    length = block_length(n)
    blocks = -(-n // length)
    tail = n - (blocks - 1) * length
    tables = []
    for column in columns:
        values = [0.0 if v is None else v for v in column]
        prefix = list(accumulate(values + values, initial=0.0))
        sums = [prefix[i + length] - prefix[i] for i in range(n)] + [0.0]
        tails = [prefix[i + tail] - prefix[i] for i in range(n)]
        if all(v is not None for v in column):
            tables.append((sums, tails, None, []))
            continue
        present = [0 if v is None else 1 for v in column]
        cprefix = list(accumulate(present + present, initial=0))
        counts = [cprefix[i + length] - cprefix[i] for i in range(n)] + [0]
        tables.append((sums, tails, counts, [cprefix[i + tail] - cprefix[i] for i in range(n)]))
    out = [[] for _ in columns]
    for _ in range(resamples):
        starts = draw_starts(rng, n, blocks)
        last = starts.pop()
        full = itemgetter(n, n, *starts)
        for (sums, tails, counts, tail_counts), means in zip(tables, out, strict=True):
            total = sum(full(sums)) + tails[last]
            count = n if counts is None else sum(full(counts)) + tail_counts[last]
            means.append(total / count if count else None)
    return out


def old_side(grammars, path, run_no):
    """compare's batches of a side as the objects it kept before (one Batch per fact with a batch; a side
    without any: per load line), and its load lines' rates where some load line is not a batch (else None)."""
    batches, load_batches, rates, own = [], [], [], True
    for fact in Normalizer().feed(records_of(grammars, path)):
        b, load = fact.batch, fact.load
        if run_no is not None and fact.record.run != run_no:
            continue
        if b is not None:
            batches.append(Batch(b.accept_len, b.accept_rate, b.gen_throughput, b.running_req, b.steady))
        if load is not None:
            own = own and b is not None
            rates += [load.gen_throughput] if load.gen_throughput is not None else []
            if b is None:
                load_batches.append(Batch(None, None, load.gen_throughput, load.running_req, load.steady))
    return batches or load_batches, None if own else rates


NAMES = ("accept_len", "accept_rate", "gen_throughput")


@pytest.mark.parametrize("path", LOGS, ids=[p.stem for p in LOGS])
def test_compares_columns_hold_every_batch_of_every_sample_log_as_before(grammars, path):
    """Each side (the whole file, and its first runs) reads back as the Batch objects and load rates compare
    kept, and the bootstrap over its columns gives exactly (==) the means the list-based bootstrap gave."""
    runs = sorted({r.run for r in records_of(grammars, path) if r.kind == "launch"})
    checked = 0
    for run_no in [None, *runs[:3]]:
        want, rates = old_side(grammars, path, run_no)
        if not want:
            continue
        side = read_side(str(path), run_no, grammars).side
        assert list(side.batches) == want and len(side.batches) == len(want)
        assert (None if side.loads is None else list(side.loads)) == rates
        lists = {n: [getattr(b, n) for b in want] for n in NAMES}
        names = [n for n in NAMES if any(v is not None for v in lists[n])]
        got = bootstrap_means([side.columns.column(n) for n in names], random.Random(4), 60)
        assert got == old_bootstrap_means([lists[n] for n in names], random.Random(4), 60)
        checked += 1
    assert checked


COLUMN_SIDES = {"dp_attention_0.5.7": 400, "newest_0.5.23": 90, "vllm_v0_0.6": 300, "vllm_v1_0.10.2_dp": 500}
"""Sample logs whose sides take the lane's rows as columns, with the stats lines folded so at the least (the lane
learns a shape from its first lines, and lines around a prefill line are normalized one by one)."""


@pytest.mark.parametrize("path", LOGS, ids=[p.stem for p in LOGS])
def test_a_side_read_from_the_lanes_columns_is_the_side_read_record_by_record(grammars, path, monkeypatch):
    """``compare``'s side takes the lane's plain rows as columns (:meth:`Sample.fold`, in a worker too, on ranges
    small enough to cut runs): the same side, figures, loads and what its reading counted as every record's fact
    gives, for the whole file and each of its first runs."""
    monkeypatch.setattr(batch, "FAST_MIN_BYTES", 0)
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(batch, "RANGE_BYTES", 8 << 10)
    monkeypatch.delenv("ACCEPTMON_PURE_PYTHON", raising=False)
    folded = []
    fold = Sample.fold
    monkeypatch.setattr(Sample, "fold", lambda self, facts: folded.append(len(facts)) or fold(self, facts))
    runs = sorted({r.run for r in records_of(grammars, path) if r.kind == "launch"})
    for run_no in [None, *runs[:3]]:
        for jobs in (1, 2):
            try:
                got = read_side(str(path), run_no, grammars, jobs)
            except InputError as e:
                got = str(e)
            with monkeypatch.context() as m:
                m.setattr(sides._SideJob, "takes_unmade", frozenset())  # every record made, and normalized alone
                try:
                    want = read_side(str(path), run_no, grammars, jobs)
                except InputError as e:
                    want = str(e)
            assert got == want
    if path.stem in COLUMN_SIDES:
        assert sum(folded) >= COLUMN_SIDES[path.stem]


def test_bootstrap_over_columns_with_gaps_equals_the_list_bootstrap():
    r = random.Random(11)
    for n in (1, 2, 7, 64, 1000):
        accept = [None if r.random() < 0.3 else round(r.uniform(1, 4), 2) for _ in range(n)]
        tput = [r.uniform(10, 900) for _ in range(n)]
        got = bootstrap_means([Batches.of([Batch(a, None, t, 3, True) for a, t in zip(accept, tput, strict=True)]).column(c)
                               for c in ("accept_len", "gen_throughput")], random.Random(n), 50)  # fmt: skip
        assert got == old_bootstrap_means([accept, tput], random.Random(n), 50)


def test_a_kept_window_reads_as_the_latest_batches_and_a_huge_count_stays_exact():
    kept = Batches(keep=3)
    for i in range(10):
        kept.add(float(i), None, None, i, i % 2 == 0)
    assert len(kept) == 3 and [b.accept_len for b in kept] == [7.0, 8.0, 9.0] and kept[-1].running_req == 9
    assert list(kept.copy()) == list(kept) and list(kept.column("accept_len")) == [7.0, 8.0, 9.0]
    loads = Floats(keep=2)
    for v in (1.0, 2.0, 3.0, 4.0, 5.0):
        loads.append(v)
    assert list(loads) == [4.0, 5.0]
    huge = Batches()
    huge.add(None, None, 1.0, 10**30, True)
    huge.add(None, None, 2.0, None, True)
    assert [b.running_req for b in huge] == [10**30, None] and NONE_INT not in [b.running_req for b in huge]


def _fact(i: int) -> Fact:
    """A decode line's fact with numbers of its own (as the parser makes them: new float objects)."""
    length, rate, tput = float(f"2.{i % 97:02d}"), float(f"0.{i % 89:02d}"), float(f"{100 + i % 800}.5")
    rec = DecodeStats(file="f", line=i, accept_len=length, gen_throughput=tput, running_req=i % 40, queue_req=0)
    return Fact(rec, NormBatch("TP0", length, rate, tput, i % 40, 0, True, False), Load("TP0", tput, i % 40, 0, True))


def test_a_compare_side_keeps_under_100_bytes_a_batch():
    """A side kept ~160 bytes a batch as objects (a Batch with three float objects, the load's rate in a
    deque); as columns 34: 8 bytes for each of four numbers, one for steady, one marking the load line's
    rate as the batch's own."""
    n = 10_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        sample = Sample()
        for i in range(n):  # made here and dropped: what the sample holds of a fact is all that stays
            sample.add(_fact(i))
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(sample) == n
    assert kept / n < 100, f"{kept / n:.0f} bytes a batch"


def test_comparing_takes_under_100_bytes_a_batch_beyond_the_sides():
    """The bootstrap's tables are machine numbers too: its columns, block sums, tails and prefix sums were
    lists of float objects (~150 bytes a batch at the peak; now ~31)."""
    sides = []
    for offset in (0, 7):
        sample = Sample()
        for i in range(6_000):
            sample.add(_fact(i + offset))
        sides.append(sample.side(f"s{offset}", copy=False))
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        compare(*sides, resamples=40)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert peak / 12_000 < 100, f"{peak / 12_000:.0f} bytes a batch"


@pytest.mark.parametrize("path", LOGS, ids=[p.stem for p in LOGS])
def test_packed_records_unpack_to_the_same_records(grammars, path):
    records = records_of(grammars, path)
    back = list(unpack(pickle.loads(pickle.dumps(pack(records)))))
    assert [(type(r), r.__dict__) for r in back] == [(type(r), r.__dict__) for r in records]
    slimmed = list(unpack(pack(records, READS), READS))  # what compare sends: the fields the normalizer reads
    assert [f.batch for f in Normalizer().feed(slimmed)] == [f.batch for f in Normalizer().feed(records)]
    for r, s in zip(records, slimmed, strict=True):  # those fields as they were, every other its default
        defaults = prepare(type(r)).defaults
        want = {k: (v if k in READS else {} if k == "extra" else defaults[k]) for k, v in r.__dict__.items()}
        assert (type(s), list(s.__dict__.items())) == (type(r), list(want.items()))
    extras = [id(r.__dict__["extra"]) for r in slimmed if "extra" in r.__dict__]
    assert len(set(extras)) == len(extras)  # each record's own empty dict


@pytest.mark.parametrize("path", LOGS, ids=[p.stem for p in LOGS])
def test_the_doctor_fed_packed_records_finds_the_same(grammars, path):
    rules = load_rules([])
    direct, packed = Doctor(rules), Doctor(rules)
    wanted = DoctorJob(direct).records_wanted
    records = records_of(grammars, path, wanted)
    direct.feed(records)
    DoctorJob(packed).collect(Shipped([pack(records)]))  # as a worker hands them on
    for d in (direct, packed):
        d.finish()
    assert packed.findings() == direct.findings() and packed.reports() == direct.reports()


def _worker_chunk(data: bytes) -> object:
    from acceptmon.parse.load import load_grammars

    job = DoctorJob(Doctor(load_rules([])))
    return job.chunk(Parser(load_grammars(), "w.log", records=job.records_wanted).feed(data))


def test_a_doctor_worker_sends_its_records_in_under_800_bytes_each(grammars):
    """Each worker result waits in the main process until its turn: as record objects (~2.4 KB each) the
    doctor held hundreds of MB of them on a large file."""
    data = (SAMPLES / "seed_eagle3_moe.log").read_bytes() * 4
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        blob = pickle.dumps(pool.submit(_worker_chunk, data).result())
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        part = pickle.loads(blob)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert type(part) is Shipped and len(part) == 1  # records alone (no lane here): one packed stretch
    n = len(part[0])
    assert n > 1000 and held / n < 800, f"{held / n:.0f} bytes a record"
    here = Parser(grammars, "w.log", records=DoctorJob(Doctor(load_rules([]))).records_wanted).feed(data)
    assert [r.__dict__ for r in unpack(part[0])] == [r.__dict__ for r in here]
