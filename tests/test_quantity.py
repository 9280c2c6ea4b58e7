import pytest

from koordpy.api.quantity import parse_go_duration, parse_quantity_milli


@pytest.mark.parametrize(("text", "milli"), [
    ("8", 8000), ("500m", 500), ("1.5", 1500), ("32Gi", 32 * 2**30 * 1000), ("1k", 1_000_000),
    (2, 2000), ("1e3", 1_000_000), ("0.1m", 1), ("128974848", 128974848000),
])
def test_quantities(text: str | int, milli: int) -> None:
    assert parse_quantity_milli(text) == milli


@pytest.mark.parametrize("bad", ["", "eight", "8Gb", "-1", True, None, [1]])
def test_bad_quantities(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_quantity_milli(bad)


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90.0), ("10m", 600.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("250ms", 0.25), ("3600s", 3600.0), ("0", 0.0),
])
def test_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "10", "ten minutes", "5x", "1h 30m", 30])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(bad)
