import pytest

from harness.units import format_size, format_time, parse_size, parse_time


@pytest.mark.parametrize("text,value", [
    ("8", 8), ("8B", 8), ("64KiB", 65536), ("4 KiB", 4096), ("52MiB", 52 * 2**20),
    ("1GiB", 2**30), ("1MB", 10**6), ("1.5KiB", 1536), (4096, 4096), ("0", 0)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["12 parsecs", "-5", "1.3B", "", "KiB", "1e400xB", True])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError, match="size|bytes"):
        parse_size(text)


@pytest.mark.parametrize("text,value", [
    ("50ms", 0.05), ("2s", 2.0), ("200us", 200e-6), ("1.5", 1.5), ("3min", 180.0), (0, 0.0)])
def test_parse_time(text, value):
    assert parse_time(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["-5ms", "soon", "5 parsecs", -1])
def test_parse_time_rejects(text):
    with pytest.raises(ValueError, match="time"):
        parse_time(text)


def test_format():
    assert format_size(65536) == "64KiB"
    assert format_size(3 * 2**20) == "3MiB"
    assert format_size(100) == "100B"
    assert format_time(0.00123) == "1.23 ms"
    assert format_time(5.6e-5) == "56 us"
    assert format_time(2.0) == "2 s"
