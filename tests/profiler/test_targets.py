"""Targets: constants against the reference figures (reference/ipu_model.md §1) and the report row."""

import math

import pytest

from profiler.chip.targets import TARGET_NAMES, get_target, ipu_model, target_row
from report_format import schema
from report_format.reader import open_report
from report_format.writer import ReportWriter


def test_gc200_matches_the_real_profile_target_block():
    # ref §5 "Small MLP on 2 x GC200": clockFrequency 1.33e9, bytesPerTile 638976,
    # bytesPerIPU 940572672, tilesPerIpu 1472, totalMemory 1881145344 (2 IPUs).
    t = get_target("GC200", num_ipus=2)
    assert (t.tiles_per_ipu, t.bytes_per_tile, t.clock_hz) == (1472, 638976, 1.33e9)
    assert t.bytes_per_ipu == 940572672
    assert t.total_memory == 1881145344
    assert t.num_tiles == 2944
    assert t.architecture == "ipu2" and t.type == "IPU"


def test_gc2_bow_c600_constants():
    gc2 = get_target("GC2")
    assert (gc2.tiles_per_ipu, gc2.bytes_per_tile, gc2.architecture) == (1216, 262144, "ipu1")
    assert gc2.bytes_per_ipu == 318767104  # ref §1 "Bytes per IPU" 304 MiB
    assert gc2.interleaved_memory_start == 131072  # Mk1 lowered-vars example
    assert gc2.memory_bank_bytes == 32 * 1024 and get_target("GC200").memory_bank_bytes == 16 * 1024
    bow = get_target("bow")
    assert bow.clock_hz == 1.85e9 and bow.architecture == "ipu2"
    c600 = get_target("C600")
    assert c600.architecture == "ipu21" and c600.fp8_flops_per_cycle == 256
    assert all(get_target(n).fp8_flops_per_cycle == 0 for n in ("GC2", "GC200", "Bow", "IPUModel"))
    assert all(get_target(n).num_worker_contexts == 6 for n in TARGET_NAMES)


def test_peak_rates_reproduce_published_tflops():
    # ref §1 "Derived peaks": GC200 250.6 TF fp16, 62.6 TF fp32; Bow 348.6 TF; GC2 31.1 TF fp32, 124.5 mixed.
    def tf(t, rate):
        return t.num_tiles * t.clock_hz * rate / 1e12

    gc200, bow, gc2, c600 = (get_target(n) for n in ("GC200", "Bow", "GC2", "C600"))
    assert tf(gc200, gc200.fp16_flops_per_cycle) == pytest.approx(250.6, abs=0.1)
    assert tf(gc200, gc200.fp32_flops_per_cycle) == pytest.approx(62.6, abs=0.1)
    assert tf(bow, bow.fp16_flops_per_cycle) == pytest.approx(348.6, abs=0.1)
    assert tf(gc2, gc2.fp32_flops_per_cycle) == pytest.approx(31.1, abs=0.1)
    assert tf(gc2, gc2.fp16_fp32acc_flops_per_cycle) == pytest.approx(124.5, abs=0.1)
    assert tf(c600, c600.fp16_flops_per_cycle) == pytest.approx(280, rel=0.002)
    assert tf(c600, c600.fp8_flops_per_cycle) == pytest.approx(560, rel=0.002)


@pytest.mark.parametrize(("num_ipus", "expected"), [(1, 40), (2, 40), (4, 80), (16, 200)])
def test_external_sync_follows_poplibs_global_sync_latency(num_ipus, expected):
    # ref §1: ceil(15 ns x 1.33 GHz x hops x 2), hops = 1 + numIPUs/4: 2 IPUs -> 40, 16 IPUs -> 200.
    hops = 1 + num_ipus // 4
    assert math.ceil(15e-9 * 1.33e9 * hops * 2) == expected
    assert get_target("GC200", num_ipus).external_sync_cycles == expected


def test_link_rates_are_per_cycle_of_the_tile_clock():
    t = get_target("GC200")
    # M2000 gateway: 2 x 100 Gb/s shared by 4 IPUs = 6.25e9 B/s per IPU, over 1.33e9 cycles/s = 4.70 B/cycle
    assert t.host_bytes_per_cycle == pytest.approx(2 * 100e9 / 8 / 4 / 1.33e9)
    assert t.ipu_link_bytes_per_cycle == pytest.approx(4 * 128 * 2**30 / 8 * 0.85 / 1.33e9)
    assert t.exchange_bytes_per_cycle == 4


def test_host_links_follow_the_spec_sheets():
    # C600: two PCIe Gen4 x8 links; a lane is 16 GT/s at 128b/130b = 1.969 GB/s, so 2 x 8 x 1.969 = 31.5 GB/s
    # raw, of which 256 of every 276 bytes are payload (256-byte TLPs, 20 bytes of overhead each).
    c600 = get_target("C600")
    assert c600.host_link == "dual PCIe Gen4 x8"
    raw = 2 * 8 * 16e9 * (128 / 130) / 8
    assert raw == pytest.approx(31.5e9, rel=1e-3)
    assert c600.host_bytes_per_cycle * c600.clock_hz == pytest.approx(raw * 256 / 276)
    assert c600.host_bytes_per_cycle * c600.clock_hz == pytest.approx(29.22e9, rel=1e-3)
    # M2000 / Bow-2000: the gateway's two 100GbE RoCE ports shared by the machine's 4 IPUs
    for name in ("GC200", "Bow"):
        t = get_target(name)
        assert "100GbE RoCE" in t.host_link
        assert t.host_bytes_per_cycle * t.clock_hz == pytest.approx(6.25e9)


def test_names_are_case_insensitive_with_aliases():
    assert get_target("mk1").name == "GC2"
    assert get_target("MK2").name == "GC200"
    assert get_target("c600").name == "C600"
    assert get_target("ipumodel").type == "IPUModel"


def test_unknown_target_lists_known_names():
    with pytest.raises(ValueError, match="unknown target 'GC300'.*GC2, GC200, Bow, C600, IPUModel") as e:
        get_target("GC300")
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="num_ipus"):
        get_target("GC200", num_ipus=0)


def test_ipu_model_is_small_and_configurable():
    t = ipu_model()
    assert (t.tiles_per_ipu, t.bytes_per_tile, t.num_ipus, t.type) == (4, 65536, 1, "IPUModel")
    assert t.interleaved_memory_start == 32768
    t2 = ipu_model(tiles_per_ipu=8, bytes_per_tile=4096, num_ipus=2, clock_hz=1e9)
    assert t2.num_tiles == 16 and t2.total_memory == 16 * 4096
    assert t2.interleaved_memory_start == 2048
    assert t2.host_bytes_per_cycle == pytest.approx(6.25e9 / 1e9)  # per-cycle rates follow the clock
    assert t2.external_sync_cycles == math.ceil(15e-9 * 1e9 * 1 * 2)
    with pytest.raises(ValueError, match="unknown target field"):
        ipu_model(tiles=3)
    with pytest.raises(ValueError, match="interleaved_memory_start"):
        ipu_model(bytes_per_tile=1024, interleaved_memory_start=4096)


def test_replicas():
    t = ipu_model(num_ipus=4, num_replicas=2)
    assert t.ipus_per_replica == 2
    with pytest.raises(ValueError, match="multiple of num_replicas"):
        ipu_model(num_ipus=3, num_replicas=2)


def test_target_row_has_exactly_the_schema_columns_and_round_trips(tmp_path):
    t = get_target("GC200")
    row = target_row(t)
    assert tuple(row) == schema.TABLES["target"].column_names
    assert all(len(v) == 1 for v in row.values())
    assert row["bytes_per_ipu"] == [940572672] and row["num_tiles"] == [1472]
    with ReportWriter(tmp_path / "r") as w:
        w.write("target", row)
    back = open_report(tmp_path / "r").table("target").to_pylist()[0]
    assert back["name"] == "GC200" and back["total_memory"] == 940572672 and back["clock_hz"] == 1.33e9


def test_no_target_spans_more_ipus_than_its_largest_system() -> None:
    """However a target is made (get_target, ipu_model, dataclasses.replace, as the pipelined
    workload gives each stage an IPU), it refuses more IPUs than its family's largest system."""
    import dataclasses

    from profiler.chip.targets import MAX_IPUS

    assert get_target("GC200", MAX_IPUS["GC200"]).num_ipus == 256
    for make in (
        lambda: get_target("GC200", 257),
        lambda: ipu_model(num_ipus=MAX_IPUS["IPUModel"] + 1),
        lambda: dataclasses.replace(ipu_model(), num_ipus=300),
        lambda: dataclasses.replace(get_target("C600"), num_ipus=9),
    ):
        with pytest.raises(ValueError, match=r"at most \d+ IPUs \(its largest system\)"):
            make()
