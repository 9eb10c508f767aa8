.PHONY: check test format lint types demo bench goldens

check:  ## format check, lint, types and tests: what CI runs
	./scripts/test

test:
	.venv/bin/python -m pytest -q -n 2

format:
	.venv/bin/ruff format acceptmon tests benchmarks
	.venv/bin/ruff check --fix acceptmon tests benchmarks

lint:
	.venv/bin/ruff check acceptmon tests benchmarks

types:
	.venv/bin/mypy

demo:
	./scripts/demo

goldens:  ## rewrite tests/golden/*.jsonl from sample_logs/ (review the diff!)
	.venv/bin/python -m tests.update_goldens

bench:
	.venv/bin/python benchmarks/bench_parse.py
