import time

import pytest

from koordpy.api.quantity import INT64_MAX, format_quantity, parse_go_duration, parse_quantity


@pytest.mark.parametrize(("resource", "text", "value"), [
    ("cpu", "8", 8000), ("cpu", "500m", 500), ("cpu", "1.5", 1500), ("cpu", 2, 2000), ("cpu", 0.5, 500),
    ("cpu", "0.1m", 1), ("cpu", "1e3", 1_000_000), ("cpu", "1E3", 1_000_000), ("cpu", "1e+3", 1_000_000),
    ("cpu", "1.", 1000), ("cpu", ".5", 500), ("cpu", "+1", 1000), ("cpu", "-0", 0), ("cpu", "0", 0),
    ("cpu", "1u", 1), ("cpu", "1n", 1),
    ("memory", "32Gi", 32 * 2**30), ("memory", "1k", 1000), ("memory", "128974848", 128974848),
    ("memory", "129e6", 129_000_000), ("memory", "123Mi", 123 * 2**20), ("memory", "1.5Ki", 1536),
    ("memory", "0.5", 1), ("memory", "1m", 1), ("memory", "1E", 10**18), ("memory", "7Ei", 7 * 2**60),
    ("memory", "10P", 10**16), ("memory", 1e18, 10**18), ("memory", "1e-999999", 1),
    ("ephemeral-storage", "1Ti", 2**40), ("hugepages-2Mi", "4Mi", 4 * 2**20),
    ("pods", "110", 110), ("pods", 110, 110), ("nvidia.com/gpu", "8", 8), ("nvidia.com/gpu", "1e3", 1000),
    ("nvidia.com/gpu", "2.0", 2), ("nvidia.com/gpu", "1k", 1000),
])
def test_quantities(resource: str, text: str | int | float, value: int) -> None:
    assert parse_quantity(resource, text) == value


def test_memory_on_a_petabyte_node_fits_int64() -> None:
    # In milli-units 10P bytes was 10**19, past int64; in bytes it is far from the limit.
    assert parse_quantity("memory", "10P") < INT64_MAX
    assert parse_quantity("memory", str(INT64_MAX)) == INT64_MAX
    assert parse_quantity("cpu", f"{INT64_MAX // 1000}") == INT64_MAX // 1000 * 1000


@pytest.mark.parametrize(("resource", "bad", "words"), [
    ("cpu", "", "not a quantity"), ("cpu", "eight", "not a quantity"), ("memory", "8Gb", "not a quantity"),
    ("memory", "8K", "not a quantity"), ("cpu", "-1", "negative"), ("cpu", -1, "negative"),
    ("cpu", True, "not a quantity"), ("cpu", None, "not a quantity"), ("cpu", [1], "not a quantity"),
    ("memory", "1e3Ki", "not a quantity"), ("memory", "1Ki3", "not a quantity"), ("memory", "1e", "not a quantity"),
    ("cpu", " 2 ", "not a quantity"), ("cpu", "2 ", "not a quantity"), ("cpu", "1_000", "not a quantity"),
    ("cpu", ".", "not a quantity"), ("cpu", "+", "not a quantity"), ("cpu", "1.5.5", "not a quantity"),
    ("cpu", "0x10", "not a quantity"), ("cpu", "\u0661", "not a quantity"), ("cpu", float("inf"), "not a quantity"),
    ("cpu", float("nan"), "not a quantity"), ("cpu", "1" * 101, "longer than 100"),
    ("memory", "8Ei", "does not fit in int64 bytes"), ("memory", "16Ei", "int64"), ("memory", "10E", "int64"),
    ("memory", 2**63, "int64"), ("cpu", "10P", "int64 milli-cpus"),
    ("cpu", str(INT64_MAX), "int64"), ("cpu", "1e999990", "int64"), ("cpu", "1e999999", "int64"),
    ("memory", "1e99999999999", "exponent out of range"), ("memory", "1e-99999999999", "exponent out of range"),
    ("nvidia.com/gpu", "0.5", "whole number"), ("nvidia.com/gpu", 0.5, "whole number"),
    ("nvidia.com/gpu", "1n", "whole number"), ("nvidia.com/gpu", "1500m", "whole number"),
    ("pods", "1.5", "whole number"),
])
def test_bad_quantities(resource: str, bad: object, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_quantity(resource, bad)


def test_a_huge_yaml_integer_is_refused_by_its_size() -> None:
    with pytest.raises(ValueError, match="16610-bit integer does not fit in int64"):
        parse_quantity("memory", 10**5000)


def test_huge_exponents_are_refused_at_once() -> None:
    start = time.perf_counter()
    for text in ("1e999990", "1e999999", "9" * 50 + "e2147483647", "1e-2147483649"):
        with pytest.raises(ValueError):
            parse_quantity("cpu", text)
    assert parse_quantity("memory", "1e-2147483648") == 1
    assert time.perf_counter() - start < 0.05


@pytest.mark.parametrize(("resource", "value", "text"), [
    ("cpu", 500, "500m"), ("cpu", 2000, "2"), ("cpu", 0, "0"), ("memory", 32 * 2**30, "32Gi"),
    ("memory", 1536, "1536"), ("memory", 10**16, "10P"), ("memory", 0, "0"), ("pods", 110, "110"),
    ("nvidia.com/gpu", 8, "8"), ("nvidia.com/gpu", 1024, "1024"), ("hugepages-1Gi", 2**31, "2Gi"),
])
def test_format_quantity(resource: str, value: int, text: str) -> None:
    assert format_quantity(resource, value) == text
    assert parse_quantity(resource, text) == value


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90.0), ("10m", 600.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("250ms", 0.25), ("3600s", 3600.0),
    ("0", 0.0), ("-5s", -5.0), ("+1m", 60.0), (".5s", 0.5), ("5.s", 5.0), ("1µs", 1e-6), ("0s", 0.0),
])
def test_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "10", "ten minutes", "5x", "1h 30m", " 5s", ".s", "-", 30, "3000000h"])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(bad)
