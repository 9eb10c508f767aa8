"""A run too short to judge says so: "no finding" must not read as "healthy" where nothing was judged."""

from __future__ import annotations

import json

from tests.conftest import SAMPLES
from tests.serving import decode_line, launch_line
from tests.test_cli import acceptmon


def test_doctor_says_too_few_batches_and_what_they_show(tmp_path):
    log = tmp_path / "few.log"
    log.write_text("\n".join([launch_line(), *(decode_line(i, acc=1.0) for i in range(3))]) + "\n")
    p = acceptmon("doctor", log)
    text = " ".join(p.stdout.decode().split())
    assert "too few batches (1 past warm-up) to judge: no finding means nothing here" in text
    assert "in the batches there are, speculation accepted nothing (accept len 1.00)" in text
    assert "no finding" not in text.replace("no finding means", "")
    (run,) = json.loads(acceptmon("doctor", log, "--format", "json").stdout)["runs"]
    assert run["too_few_to_judge"] is True and run["judged_batches"] == 1


def test_a_long_enough_run_is_judged_as_before():
    runs = json.loads(acceptmon("doctor", SAMPLES / "seed_eagle3_moe.log", "--format", "json").stdout)["runs"]
    assert [r["too_few_to_judge"] for r in runs] == [False] * 5
