"""Targets as data: the IPU devices tilescope can simulate.

Every constant cites its source: a section of /work/shared/reference/ipu_model.md ("ref §N")
and the original source that section names. Markers follow the reference: [INF] = inferred or
derived arithmetic, [3P] = unverified third-party figure, [NF] = not found (our assumption).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from report_format import schema

KIB = 1024

# -- shared constants ------------------------------------------------------------------------
# ref §1 "Hardware contexts per tile": 1 supervisor + 6 workers (assembly programming guide §4.2.1).
NUM_WORKER_CONTEXTS = 6
# ref §1 "Exchange bandwidth per tile": 4 B/cycle [INF] (8 TB/s GC200 exchange = 1472 x 1.33 GHz x 4;
# poplibs PoolPlan.cpp `exchangeBytesPerCycle = 4`).
EXCHANGE_BYTES_PER_CYCLE = 4.0
# ref §1 "Internal (on-IPU) sync": maxIPUSyncDelay 126 [3P] (unverified Rust model); ref §8 puts an
# internal sync at about 100-150 cycles.
INTERNAL_SYNC_CYCLES = 126
# Stack per tile: a supervisor stack and one per worker context. Since SDK 1.2 (2020) Poplar sizes them
# at compile time from the codelets' declared use unless the engine options
# `target.workerStackSizeInBytes` / `target.supervisorStackSizeInBytes` fix them (graphcore/tensorflow
# 80ee06b: "the supervisor and workers stack size is automatically determined at graph compile time").
# Its sizing rule is closed and per-codelet figures exist only for PopLibs' assembly, so the automatic
# sizes are two calibration points (docs/fidelity.md "Why the stack matters"):
# * supervisor 96 B: the TensorFlow user guide's example report (graphcore/tensorflow docs/logging.rst,
#   bf04e64, 2019, Mk1, 1,216 tiles) holds Stack 3,852,288 B = 3,168 B a tile with the workers fixed
#   at 0x200 by TensorFlow: 3,168 - 6 x 512 = 96 [INF: the supervisor's size then holds today];
# * workers 48 B each: PopVision screenshots of the PopTorch basics tutorial's FashionMNIST CNN in training on one GC200 (seed
#   002_fcfb2e29a4dcef23.txt, Liveness Report, all tiles) show stack 535 KiB = 372 B a tile, a mean
#   over tiles; (372 - 96) / 6 = 46, rounded up to 8 B [INF: a stack keeps the 8-byte alignment of
#   the 64-bit loads and stores]. 6 x 48 + 96 = 384 B a tile.
AUTO_SUPERVISOR_STACK_BYTES = 96
AUTO_WORKER_STACK_BYTES = 48
# [INF] Poplar IPUModel field `instructionBytes` (ref §1, IPUModel field list); the IPU ISA uses 32-bit
# instructions (assembly programming guide), so 4 bytes.
INSTRUCTION_BYTES = 4
# ref §1 "External/global sync": poplibs lib/poplibs_test/Util.cpp::setGlobalSyncLatency uses
# ceil(15 ns x clock x hops x 2) with hops = 1 + numIPUs/4 (integer division: reproduces the
# reference's 40 cycles for 2 IPUs and 200 for 16 IPUs at 1.33 GHz).
GLOBAL_SYNC_NS_PER_HOP = 15e-9

# -- per-architecture constants --------------------------------------------------------------
# ref §1 "Tiles per IPU": GC2 1216 (Citadel notes); Mk2 1472 (GC200 profile `tilesPerIpu == 1472`,
# ipu_tensorflow_addons profile test; tessellate notebook `num_tiles=1472`; C600 README in ByteMLPerf).
GC2_TILES = 1216
MK2_TILES = 1472
# ref §1 "Bytes per tile": GC2 262144 (Poplar lowered-vars example `tileMemory: 262144`);
# Mk2 638976 = 624 KiB (GC200 profile `bytesPerTile == 638976`).
GC2_BYTES_PER_TILE = 256 * KIB
MK2_BYTES_PER_TILE = 624 * KIB
# ref §1 "Memory bank": 32 KiB (Mk1) and 16 KiB (Mk2) (PopVision GA glossary); C600 16 KiB [INF].
GC2_BANK_BYTES = 32 * KIB
MK2_BANK_BYTES = 16 * KIB
# ref §1 "Regions": Mk1 lowered-vars example `interleavedMemoryStart 131072`.
GC2_INTERLEAVED_START = 128 * KIB
# [NF] ref §1: Mk2 interleaved region start not found. Assumption: 256 KiB, bank-aligned; the
# lowered-vars report's `lowest256KB` flag (ref §5) suggests the low 256 KiB is a distinct region.
MK2_INTERLEAVED_START = 256 * KIB
# ref §1 "Clock": GC2 1.6 GHz [INF] (31.1 TF FP32 / (1216 x 16)); GC200 1.33 GHz (profile
# `clockFrequency == 1330000000.0`); Bow 1.85 GHz (tessellate notebook `tile_clock_frequency`);
# C600 ~1.485 GHz [INF] (280e12 / (1472 x 128)).
GC2_CLOCK_HZ = 1.6e9
GC200_CLOCK_HZ = 1.33e9
BOW_CLOCK_HZ = 1.85e9
C600_CLOCK_HZ = 1.485e9
# ref §1 "AMP peak" rows, FLOP per tile per cycle:
#   fp16 in/fp16 acc: Mk2 128 (tessellate notebook "peak = clock x tiles x 128"); GC2 has only the
#     "mixed" figure 64 (Citadel 124.5 TF = 1216 x 1.6 GHz x 64) [INF: fp16.16 taken equal to it].
#   fp16 in/fp32 acc: GC2 64 (Citadel); Mk2 64 [INF] (8 conv units for float partials).
#   fp32: GC2 16 (Citadel 31.1 TF); Mk2 32 (62.5 TF GC200, 70 TF C600 README).
#   fp8: C600 256 (C600 README 560 TF); 0 elsewhere (unsupported).
MK2_FP16_FLOPS = 128.0
MK2_FP16_FP32ACC_FLOPS = 64.0
MK2_FP32_FLOPS = 32.0
GC2_FP16_FLOPS = 64.0
GC2_FP16_FP32ACC_FLOPS = 64.0
GC2_FP32_FLOPS = 16.0
C600_FP8_FLOPS = 256.0
# Host link, effective bytes per second per direction, per IPU (ref §1 "Host link"):
#   PCIe: a Gen4 lane carries 16 GT/s with 128b/130b encoding, 16e9 x 128/130 / 8 = 1.969e9 B/s (Intel
#     600-series PCH datasheet, "Theoretical Max Bandwidth = Transfer Rate x Encoding x Lanes / 8": Gen4
#     x4 = 7.88 GB/s), so x8 = 15.75e9 B/s. Every transaction-layer packet carries a 5-dword overhead (3-dword
#     header, sequence number, LCRC, framing): with a 256-byte maximum payload at most 256 / (256 + 20)
#     = 92.75 % of that is data (Intel AN 456 "PCI Express High Performance Reference Design" §1.1.2,
#     "Throughput for Posted Writes": "(256/(256+20)), or 92%"; flow-control DLLPs not counted, so an
#     upper bound) [INF: that the IPU's host link negotiates a 256-byte payload].
#   C600: "Dual PCIe Gen4 8-lane interfaces" (seed 000, C600 README): 2 x 15.75e9 x 256/276 = 29.2e9
#     B/s. The two x8 links add up to the x16 slot's raw 31.5 GB/s (what was used before); [INF] that a
#     stream copy spreads over both (on a PCIe card "the IPU has direct access to the buffer in the host
#     memory", Graphcore command-line tools guide §9 gc-hosttraffictest).
#   GC200/Bow: in an IPU-M2000 / Bow-2000 the host is reached through the IPU-Gateway's "2 RNIC ports for
#     connection to the server", the server needing "a 100GbE RoCEv2 NIC" (Graphcore IPU-POD DA and Bow
#     Pod DA build and test guides §2.1-2.2; Bow-2000 datasheet: "Host-Link - PCIe Gen4 RoCEv2
#     NIC/SmartNIC Interface"; its 2 x 100 Gbps GW-Links join Pods, not the host). Per IPU when all
#     four stream: 2 x 100e9 / 8 / 4 = 6.25e9 B/s [INF]. Check: gc-hosttraffictest's example output on
#     an M2000 (1 IPU) moves host -> gateway buffer at 56.49 Gb/s = 7.06 GB/s (command-line tools guide
#     §9; docs/fidelity.md row host_to_ipu_m2000). [3P] A reading of the M2000 BMC user guide's block
#     diagram (vengineer.hatenablog.com, 2023-01-23) puts the RNIC behind a PCIe Gen4 x8 of the gateway,
#     which would cap the pair of ports at ~14.6 GB/s; not applied (unverified).
#   GC2: C2 card, PCIe Gen4, lane count [NF]; assumed x16 like the Mk2 chip's port: 2 x the x8 figure.
PCIE_GEN4_X8_BYTES_PER_S = 8 * 16e9 * 128 / 130 / 8
PCIE_TLP_EFFICIENCY = 256 / (256 + 20)
MK2_HOST_BYTES_PER_S = 2 * 100e9 / 8 / 4
GC2_HOST_BYTES_PER_S = 2 * PCIE_GEN4_X8_BYTES_PER_S * PCIE_TLP_EFFICIENCY
C600_HOST_BYTES_PER_S = 2 * PCIE_GEN4_X8_BYTES_PER_S * PCIE_TLP_EFFICIENCY
# The host link as its spec sheet names it (shown by `tilescope run`).
GC2_HOST_LINK = "PCIe Gen4 x16 (C2 card) [lanes assumed]"
MK2_HOST_LINK = "IPU-Gateway 2 x 100GbE RoCEv2, shared by 4 IPUs"
C600_HOST_LINK = "dual PCIe Gen4 x8"
# IPU-Link, bytes per second between a pair of IPUs, one direction (ref §1 "IPU-Link"):
#   Mk2 (GC200, Bow): poplibs IPUModel `addGlobalExchangeConstraints`: 128 Gibit/s per link x 0.85
#     efficiency, 4 links within a pair -> 4 x 128 x 2^30 / 8 x 0.85 B/s.
#   GC2: the 2 IPUs of a C2 card share links of 64 GB/s bidirectional (Citadel notes); assumed 2
#     usable links x 32 GB/s per direction [INF].
#   C600: 32 lanes, 128 GB/s = 64 GB/s per direction (C600 README).
MK2_IPU_LINK_BYTES_PER_S = 4 * 128 * 2**30 / 8 * 0.85
GC2_IPU_LINK_BYTES_PER_S = 2 * 32e9
C600_IPU_LINK_BYTES_PER_S = 64e9


@dataclass(frozen=True)
class Target:
    """One device: ``num_ipus`` IPUs of one architecture. Rates are per tile unless named otherwise."""

    name: str  # "GC2", "GC200", "Bow", "C600", "IPUModel"
    type: str  # "IPU" or "IPUModel" (libpva Target.Type)
    architecture: str  # "ipu1", "ipu2", "ipu21"
    num_ipus: int
    tiles_per_ipu: int
    bytes_per_tile: int
    clock_hz: float
    num_worker_contexts: int
    exchange_bytes_per_cycle: float
    interleaved_memory_start: int  # byte offset in a tile where the interleaved region starts
    memory_bank_bytes: int
    fp16_flops_per_cycle: float  # AMP fp16 in, fp16 accumulate, peak per tile per cycle
    fp16_fp32acc_flops_per_cycle: float
    fp32_flops_per_cycle: float
    fp8_flops_per_cycle: float  # 0 where unsupported
    internal_sync_cycles: int  # one IPU's sync
    external_sync_cycles: int  # all IPUs of the device
    host_bytes_per_cycle: float  # host link, per IPU, per tile-clock cycle
    ipu_link_bytes_per_cycle: float  # inter-IPU bandwidth per tile-clock cycle
    instruction_bytes: int
    num_replicas: int = 1
    host_link: str = ""  # the host interface as its spec sheet names it; its rate is host_bytes_per_cycle

    def __post_init__(self) -> None:
        for f in ("num_ipus", "tiles_per_ipu", "bytes_per_tile", "num_worker_contexts", "num_replicas"):
            if getattr(self, f) < 1:
                raise ValueError(f"target {self.name}: {f} must be >= 1, got {getattr(self, f)}")
        most = MAX_IPUS.get(self.name)
        if most is not None and self.num_ipus > most:  # however made: get_target, ipu_model, replace
            raise ValueError(f"target {self.name}: at most {most} IPUs (its largest system), got {self.num_ipus}")
        if self.num_ipus % self.num_replicas:
            raise ValueError(
                f"target {self.name}: num_ipus ({self.num_ipus}) is not a multiple of num_replicas ({self.num_replicas})"
            )
        if not 0 <= self.interleaved_memory_start <= self.bytes_per_tile:
            raise ValueError(
                f"target {self.name}: interleaved_memory_start {self.interleaved_memory_start} "
                f"outside the tile's {self.bytes_per_tile} bytes"
            )

    @property
    def num_tiles(self) -> int:
        return self.num_ipus * self.tiles_per_ipu

    @property
    def bytes_per_ipu(self) -> int:
        return self.bytes_per_tile * self.tiles_per_ipu

    @property
    def total_memory(self) -> int:
        return self.bytes_per_ipu * self.num_ipus

    @property
    def ipus_per_replica(self) -> int:
        return self.num_ipus // self.num_replicas


def sharding_view(t: Target) -> Target:
    """One IPU of ``t``, as a virtual graph on it sees the device (Poplar ``createVirtualGraph``)."""
    return replace(t, num_ipus=1, num_replicas=1)


def replica_view(t: Target, replicas: int) -> Target:
    """The IPUs of one of ``replicas`` replicas of ``t`` (what a replicated graph is built on). The
    external sync keeps the whole system's latency: replicas synchronise together."""
    return replace(t, num_ipus=t.num_ipus // replicas, num_replicas=1)


def external_sync_cycles(clock_hz: float, num_ipus: int) -> int:
    """Sync latency across all IPUs of a device (ref §1, poplibs_test Util.cpp::setGlobalSyncLatency)."""
    hops = 1 + num_ipus // 4
    return math.ceil(GLOBAL_SYNC_NS_PER_HOP * clock_hz * hops * 2)


def _make(
    name: str,
    type_: str,
    architecture: str,
    num_ipus: int,
    tiles_per_ipu: int,
    bytes_per_tile: int,
    clock_hz: float,
    interleaved_memory_start: int,
    memory_bank_bytes: int,
    fp16: float,
    fp16_fp32acc: float,
    fp32: float,
    fp8: float,
    host_bytes_per_s: float,
    ipu_link_bytes_per_s: float,
    host_link: str,
) -> Target:
    return Target(
        name=name,
        type=type_,
        architecture=architecture,
        num_ipus=num_ipus,
        tiles_per_ipu=tiles_per_ipu,
        bytes_per_tile=bytes_per_tile,
        clock_hz=clock_hz,
        num_worker_contexts=NUM_WORKER_CONTEXTS,
        exchange_bytes_per_cycle=EXCHANGE_BYTES_PER_CYCLE,
        interleaved_memory_start=interleaved_memory_start,
        memory_bank_bytes=memory_bank_bytes,
        fp16_flops_per_cycle=fp16,
        fp16_fp32acc_flops_per_cycle=fp16_fp32acc,
        fp32_flops_per_cycle=fp32,
        fp8_flops_per_cycle=fp8,
        internal_sync_cycles=INTERNAL_SYNC_CYCLES,
        external_sync_cycles=external_sync_cycles(clock_hz, num_ipus),
        host_bytes_per_cycle=host_bytes_per_s / clock_hz,
        ipu_link_bytes_per_cycle=ipu_link_bytes_per_s / clock_hz,
        instruction_bytes=INSTRUCTION_BYTES,
        host_link=host_link,
    )


def _gc2(num_ipus: int) -> Target:
    return _make(
        "GC2", "IPU", "ipu1", num_ipus, GC2_TILES, GC2_BYTES_PER_TILE, GC2_CLOCK_HZ,
        GC2_INTERLEAVED_START, GC2_BANK_BYTES, GC2_FP16_FLOPS, GC2_FP16_FP32ACC_FLOPS, GC2_FP32_FLOPS, 0.0,
        GC2_HOST_BYTES_PER_S, GC2_IPU_LINK_BYTES_PER_S, GC2_HOST_LINK,
    )  # fmt: skip


def _mk2(name: str, clock_hz: float, num_ipus: int) -> Target:
    return _make(
        name, "IPU", "ipu2", num_ipus, MK2_TILES, MK2_BYTES_PER_TILE, clock_hz,
        MK2_INTERLEAVED_START, MK2_BANK_BYTES, MK2_FP16_FLOPS, MK2_FP16_FP32ACC_FLOPS, MK2_FP32_FLOPS, 0.0,
        MK2_HOST_BYTES_PER_S, MK2_IPU_LINK_BYTES_PER_S, MK2_HOST_LINK,
    )  # fmt: skip


def _c600(num_ipus: int) -> Target:
    # ref §1: C600 is Mk2 silicon with FP8 (`ipu21`); memory as GC200 ("900 MB per IPU").
    return _make(
        "C600", "IPU", "ipu21", num_ipus, MK2_TILES, MK2_BYTES_PER_TILE, C600_CLOCK_HZ,
        MK2_INTERLEAVED_START, MK2_BANK_BYTES, MK2_FP16_FLOPS, MK2_FP16_FP32ACC_FLOPS, MK2_FP32_FLOPS,
        C600_FP8_FLOPS, C600_HOST_BYTES_PER_S, C600_IPU_LINK_BYTES_PER_S, C600_HOST_LINK,
    )  # fmt: skip


def ipu_model(tiles_per_ipu: int = 4, bytes_per_tile: int = 65536, num_ipus: int = 1, **overrides: Any) -> Target:
    """A small configurable IPU-Model target for tests; GC200 constants otherwise.

    The interleaved region starts at half the tile (bank-aligned, the Mk1 layout of ref §1) unless
    overridden. ``overrides`` replace any other field (e.g. ``clock_hz=1e9``), each value of
    its field's type (fields differ in type, hence ``Any``; the names are checked below).
    """
    base = _mk2("IPUModel", overrides.get("clock_hz", GC200_CLOCK_HZ), num_ipus)
    unknown = set(overrides) - {f.name for f in fields(Target)}
    if unknown:
        raise ValueError(f"ipu_model: unknown target field(s) {sorted(unknown)}")
    bank = max(1, min(MK2_BANK_BYTES, bytes_per_tile // 2))
    values: dict[str, Any] = {
        "type": "IPUModel",
        "tiles_per_ipu": tiles_per_ipu,
        "bytes_per_tile": bytes_per_tile,
        "interleaved_memory_start": (bytes_per_tile // 2) // bank * bank,
    }
    values.update(overrides)  # rates per cycle and the external sync already follow clock_hz via base
    return replace(base, **values)


def _ipu_model_full(num_ipus: int) -> Target:
    # [INF] Poplar's IPUModel defaults to a whole Mk2 IPU in SDK 2+; same layout as GC200.
    return ipu_model(MK2_TILES, MK2_BYTES_PER_TILE, num_ipus, interleaved_memory_start=MK2_INTERLEAVED_START)


_FACTORIES = {
    "GC2": _gc2,
    "GC200": lambda n: _mk2("GC200", GC200_CLOCK_HZ, n),
    "Bow": lambda n: _mk2("Bow", BOW_CLOCK_HZ, n),
    "C600": _c600,
    "IPUModel": _ipu_model_full,
}
TARGET_NAMES: tuple[str, ...] = tuple(_FACTORIES)
#: The most IPUs one graph of a target family can span: the largest system of that family.
MAX_IPUS: dict[str, int] = {
    # Mk1: the IPU-Server holds 8 C2 PCIe cards of 2 GC2 IPUs each (Dell DSS8440). [INF]
    "GC2": 16,
    # Mk2: IPU-POD256, the largest Mk2 pod sold as one system (ref §7 quotes Pod256 results).
    "GC200": 256,
    # Bow: Bow Pod1024 ("expansion to Bow Pod256 and beyond", seeds/002). [INF]
    "Bow": 1024,
    # C600: "up to eight C600 cards can be networked together using IPU-Link" (seeds/000, 001).
    "C600": 8,
    # The IPU-Model simulates Mk2 IPUs; bounded as GC200 (host memory grows with tiles).
    "IPUModel": 256,
}
# Graphcore's generation names for the first two (ref §1 header row).
_ALIASES = {"mk1": "GC2", "mk2": "GC200"}
#: Systems by name: (target family, IPUs). IPU-POD16: four IPU-M2000s of four GC200 IPUs each, joined
#: by IPU-Links (Graphcore IPU-POD DA build and test guide §2, "IPU-POD16": 4 x IPU-M2000; the IPU-M2000
#: datasheet: 4 x GC200 per machine); its links are modelled at the Mk2 IPU-Link rate above.
SYSTEMS: dict[str, tuple[str, int]] = {"POD16": ("GC200", 16)}


def get_target(name: str, num_ipus: int = 1) -> Target:
    """The named target with ``num_ipus`` IPUs (name case-insensitive; "Mk1" = GC2, "Mk2" = GC200; a system
    of ``SYSTEMS``, "POD16", is its family with up to its IPUs)."""
    key = name.strip().lower()
    system = next((v for k, v in SYSTEMS.items() if k.lower() == key), None)
    if system is not None:  # a system's IPUs, or fewer of them (--ipus), never more
        family, most = system
        if not 1 <= num_ipus <= most:
            raise ValueError(f"target {name.strip()}: 1 to {most} IPUs ({most} x {family}), got {num_ipus}")
        return _FACTORIES[family](num_ipus)
    canonical = _ALIASES.get(key) or next((n for n in TARGET_NAMES if n.lower() == key), None)
    if canonical is None:
        known = ", ".join(TARGET_NAMES + ("Mk1", "Mk2", *SYSTEMS))
        raise ValueError(f"unknown target {name!r}; known targets: {known}")
    if num_ipus < 1:
        raise ValueError(f"target {canonical}: num_ipus must be >= 1, got {num_ipus}")
    return _FACTORIES[canonical](num_ipus)  # Target checks num_ipus against MAX_IPUS


def target_row(t: Target) -> dict[str, list]:
    """The report's ``target`` table (one row), column for column as report_format defines it."""
    return {column: [getattr(t, column)] for column in schema.TABLES["target"].column_names}
