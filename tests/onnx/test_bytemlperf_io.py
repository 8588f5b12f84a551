"""bench.bytemlperf's --io-overlap plumbing: the step's shares and the table's header, hand-computed."""

from __future__ import annotations

import pytest

from bench import bytemlperf


def test_overlapped_shares_scale_the_runs_device_work_and_keep_the_exposed_host_io() -> None:
    # a run of 100 cycles: 60 compute, 20 exchange, 0 sync, 20 host I/O (15 in, 5 out); 4 batches a step of
    # 15 + 80 + 2 x 80 + 80 + 5 = 340 cycles: device work 4 x 80 = 320, host I/O exposed 20
    run = {"compute": 0.6, "exchange": 0.2, "sync": 0.0, "host_io": 0.2}
    got = bytemlperf.overlapped_shares(run, 100, (15, 5), 4, 340)
    assert got == pytest.approx({"compute": 240 / 340, "exchange": 80 / 340, "sync": 0.0, "host_io": 20 / 340})
    assert sum(got.values()) == pytest.approx(1.0)


def test_the_header_says_which_rows_ran_with_poprts_host_io() -> None:
    rows = [{"key": "a"}, {"key": "b", "io": {"io_tiles": 64, "batches_per_step": 128}}]
    assert bytemlperf._io_header({"rows": rows[:1]}) == (
        "host I/O: one batch a run, its copies in series with the compute (tilescope's default)"
    )
    assert bytemlperf._io_header({"rows": rows}).endswith(
        "except host I/O as PopRT runs it (--io-overlap poprt) for b (64 I/O tiles, 128 batches a step)"
    )


def test_poprts_io_settings_are_only_for_models_the_table_names() -> None:
    models = {r.model for r in bytemlperf.ROWS}
    assert set(bytemlperf.POPRT_IO) <= models
    assert bytemlperf.POPRT_IO["resnet50-torch-fp32"] == (64, 128)  # interact_infos, a30b4f97
