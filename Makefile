# The two commands of the README: `make demo` (the main job) and `make test` (the suite).
.PHONY: setup demo test lint unit bench down

setup:
	scripts/setup

demo:
	scripts/demo

test:
	scripts/test

lint: setup
	scripts/lint

unit: setup
	.venv/bin/python -m pytest -q tests/unit

bench: setup
	devstack/up k8s
	.venv/bin/python benchmarks/render.py
	.venv/bin/python benchmarks/launch.py

down:
	devstack/down
