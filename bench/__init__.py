"""The benchmarks: each script prints figures for one property of the product (run from a
checkout with `PYTHONPATH=. .venv/bin/python bench/<name>.py --help`); `tests/` holds the tests
of their measuring parts. They build their worlds from `nachtwacht.demo_world` and `tests.worlds`.
"""
