"""Figures of tilescope's own host cost that ``--help`` and the README quote, measured once, here.

Each figure carries the command that measured it, when, and on what machine. The help texts are
built from the phrases below (``demo_real_size_cost``, ``resnet50_host_memory``) and
``tests/cli/test_help_docs.py`` requires the README to contain the same phrases, so the two cannot
drift apart: to change a figure, measure it again and change it here (the test then says what the
README must say).
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30

#: Where and how everything below was measured.
MACHINE = "the 2-core development machine, shared with other work (wall times move with its load)"


@dataclass(frozen=True)
class HostCost:
    """Wall time and peak resident memory of one command, as ``/usr/bin/time -v`` reports them
    ("Elapsed (wall clock) time", "Maximum resident set size (kbytes)"), one entry per run."""

    command: str
    date: str
    wall_seconds: tuple[float, ...]
    peak_rss_kib: tuple[int, ...]
    load: str = ""  # the load average seen around the runs

    def seconds(self) -> str:
        """The wall times rounded to 5 s: one figure, or the range of the runs."""
        low, high = (5 * round(s / 5) for s in (min(self.wall_seconds), max(self.wall_seconds)))
        return f"{low} s" if low == high else f"{low}-{high} s"

    def peak(self) -> str:
        """The largest peak, to 0.1 GiB."""
        return f"~{max(self.peak_rss_kib) * 1024 / GIB:.1f} GiB"


#: ``tilescope demo --real-size``: the 7 small samples, ResNet-50 batch 32, BERT-base batch 1 and BERT-base
#: packed at batch 40 compile-only (bert_base_packed_b40: 179.2 s of the run, its import and compile; the
#: nine others took 34-45 s and ~2.4 GiB on 2026-11-27, so the peak is the packed BERT's).
DEMO_REAL_SIZE = HostCost(
    command="/usr/bin/time -v tilescope demo --no-serve --real-size --out /tmp/x",
    date="2026-11-28",
    wall_seconds=(245.8,),
    peak_rss_kib=(7_970_612,),
    load="load average 2.9 before the run, 4.7 after (other engineers' jobs on the 2 cores)",
)

#: ResNet-50 (``profiler.frontends.onnx.examples.resnet()`` saved as resnet50.onnx), float16 on a
#: C600, float partials, one inference run included, no report.
RESNET50_B1 = HostCost(
    command="/usr/bin/time -v tilescope run resnet50.onnx --target C600 --dtype float16 --batch 1 --json",
    date="2026-11-27",
    wall_seconds=(13.4,),
    peak_rss_kib=(744_440,),
)
RESNET50_B32 = HostCost(
    command="/usr/bin/time -v tilescope run resnet50.onnx --target C600 --dtype float16 --batch 32 --json",
    date="2026-11-27",
    wall_seconds=(26.8,),
    peak_rss_kib=(1_425_828,),
)


def demo_real_size_cost() -> str:
    """What ``demo --real-size`` costs the host, as the help and the README say it."""
    return f"about {DEMO_REAL_SIZE.seconds()} and {DEMO_REAL_SIZE.peak()} of host memory"


def resnet50_host_memory() -> str:
    """ResNet-50's peak host memory, as ``run --help`` and the README say it."""
    return f"peaks at {RESNET50_B1.peak()} at batch 1 and {RESNET50_B32.peak()} at batch 32, run included"
