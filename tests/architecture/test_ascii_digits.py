"""A pattern the product compiles with `\\d` matches ASCII digits only (`re.ASCII`). Python's `\\d`
also matches other scripts' digits, and `int` reads them: a version "1\\u0663.0.0" would be 13.0.0
under another name. Read from every product module's compiled patterns (bytes patterns are ASCII
by nature); a number read without a pattern goes through `ground.whole_numbers`."""

from __future__ import annotations

import importlib
import re

from tests.architecture.test_layers import _product_modules


def _unicode_digit_patterns(namespace: dict[str, object]) -> list[str]:
    return [
        name
        for name, value in namespace.items()
        if isinstance(value, re.Pattern)
        and isinstance(value.pattern, str)
        and "\\d" in value.pattern
        and not value.flags & re.ASCII
    ]


def test_every_compiled_digit_pattern_is_ascii() -> None:
    found = []
    for name in _product_modules():
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        found += [f"{name}.{attr}" for attr in _unicode_digit_patterns(vars(module))]
    assert found == []


def test_a_unicode_digit_pattern_is_found() -> None:
    namespace: dict[str, object] = {
        "UNICODE": re.compile(r"v(\d+)"),
        "ASCII": re.compile(r"v(\d+)", re.ASCII),
        "BYTES": re.compile(rb"v(\d+)"),
        "NO_DIGITS": re.compile(r"[0-9]+"),
    }
    assert _unicode_digit_patterns(namespace) == ["UNICODE"]
