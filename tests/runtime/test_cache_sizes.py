"""runtime.cache_sizes: sysfs's cache size text parsed, the level-2 data or unified cache
found among a cpu's cache indexes, and the 1 MiB fallback where sysfs does not say."""
import pytest

from runtime import cache_sizes


@pytest.mark.parametrize("text,want", [("512K", 512 << 10), ("1024K\n", 1 << 20),
                                       ("2M", 2 << 20), ("65536", 65536), ("1MiB", 1 << 20)])
def test_sizes_parse(text, want):
    assert cache_sizes.parse_size(text) == want


@pytest.mark.parametrize("text", ["", "K", "x512K", "0K", "-1K", "1.5M"])
def test_what_is_no_size_parses_to_none(text):
    assert cache_sizes.parse_size(text) is None


def _index(root, name, level, kind, size):
    d = root / name
    d.mkdir()
    for field, value in (("level", level), ("type", kind), ("size", size)):
        (d / field).write_text(f"{value}\n")


def test_the_level_2_data_or_unified_cache_is_read(tmp_path):
    _index(tmp_path, "index0", 1, "Data", "32K")
    _index(tmp_path, "index1", 1, "Instruction", "32K")
    _index(tmp_path, "index2", 2, "Unified", "512K")
    _index(tmp_path, "index3", 3, "Unified", "32768K")
    assert cache_sizes.read_l2_bytes(str(tmp_path)) == 512 << 10
    (tmp_path / "index2" / "size").write_text("2M\n")
    assert cache_sizes.read_l2_bytes(str(tmp_path)) == 2 << 20


def test_an_instruction_only_l2_or_none_at_all_reads_as_none(tmp_path):
    _index(tmp_path, "index0", 1, "Data", "48K")
    _index(tmp_path, "index1", 2, "Instruction", "1024K")
    assert cache_sizes.read_l2_bytes(str(tmp_path)) is None
    assert cache_sizes.read_l2_bytes(str(tmp_path / "missing")) is None
    _index(tmp_path, "index2", 2, "Data", "")
    assert cache_sizes.read_l2_bytes(str(tmp_path)) is None     # unreadable size


def test_the_hosts_l2_is_read_once_with_the_fallback_where_sysfs_does_not_say(monkeypatch):
    want = cache_sizes.read_l2_bytes() or cache_sizes.L2_FALLBACK
    assert cache_sizes.l2_bytes() == want and cache_sizes.L2_FALLBACK == 1 << 20
    monkeypatch.setattr(cache_sizes, "CACHE_DIR", "/nonexistent/cache")
    assert cache_sizes.l2_bytes() == want     # cached: read once
    cache_sizes.l2_bytes.cache_clear()
    try:
        assert cache_sizes.l2_bytes() == 1 << 20
    finally:
        cache_sizes.l2_bytes.cache_clear()
