"""Write a built-in model as ONNX, to run with `tilescope run` (no downloads: seeded random weights).

Decoder LLMs (profiler.frontends.onnx.decoders): gpt2-xl and llama2-7b at their published sizes,
tiny-gpt2 and tiny-llama (2 layers, hidden 64) for quick checks; a --mode prefill graph of --seq
tokens, or a --mode generate step of one token after a KV cache of --past tokens. Encoders and CNNs
(profiler.frontends.onnx.examples): bert-base, bert-large (SQuAD heads, --seq tokens), resnet50.

Models past 1 GiB of float32 weights (gpt2-xl, llama2-7b) are written with --weights external by
default: the weights are external-data references into a sparse FILE.data beside the model (sized,
never written), so the model is a few MB and made in seconds; a compile-only run reads only shapes.
--ipus N places each node on an IPU (PopART's __ipu_number) layer by layer, for --ipus N --pipeline.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tilescope.errors import CommandError
from tilescope.outputs import FORCE_HELP

if TYPE_CHECKING:
    import onnx

HELP = "write a built-in model (GPT-2 XL, Llama-2-7B, BERT, ResNet-50) as ONNX"

EPILOG = """\
examples:
  tilescope model llama2-7b --seq 2048 --ipus 16 --out llama2_7b_prefill.onnx
  tilescope model gpt2-xl --mode generate --past 1023 --ipus 4 --out gpt2_xl_step.onnx
  tilescope model tiny-llama --seq 16 --out tiny.onnx && tilescope run tiny.onnx --check
  tilescope model bert-large --seq 384 --out bert_large.onnx && tilescope run bert_large.onnx --ipus 4 --pipeline --check
"""

ENCODERS = ("bert-base", "bert-large", "resnet50")
#: weights past this many bytes (float32) are external-data references unless --weights random
EXTERNAL_FROM = 2**30


def add_arguments(p: argparse.ArgumentParser) -> None:
    from profiler.frontends.onnx.decoders import CONFIGS

    p.epilog = EPILOG
    p.add_argument("name", choices=[*CONFIGS, *ENCODERS], help="the model")
    p.add_argument("--out", required=True, metavar="FILE.onnx", help="where to write it")
    p.add_argument(
        "--mode", choices=["prefill", "generate"], default="prefill", help="decoders: the graph (default prefill)"
    )
    p.add_argument("--seq", type=int, default=None, help="prompt / sequence tokens (default 128; BERT 384)")
    p.add_argument("--past", type=int, default=None, help="--mode generate: cached tokens (default --seq)")
    p.add_argument("--layers", type=int, default=None, help="fewer (or more) layers than the published model")
    p.add_argument("--batch", type=int, default=1, help="batch size of the inputs (default 1)")
    p.add_argument("--ipus", type=int, default=None, help="decoders: place the layers over N IPUs (pipeline stages)")
    p.add_argument(
        "--weights",
        choices=["auto", "random", "external"],
        default="auto",
        help="seeded random values, or external-data references into a sparse FILE.data (default: external "
        "past 1 GiB of weights)",
    )
    p.add_argument("--force", action="store_true", help=FORCE_HELP)


def run(args: argparse.Namespace) -> int:
    import onnx

    from tilescope.outputs import check_output_file

    out = check_output_file(args.out, "--out", follow_symlinks=args.force)
    for option in ("seq", "past", "layers", "ipus"):
        value = getattr(args, option)
        if value is not None and value < (0 if option == "past" else 1):
            raise CommandError(f"--{option} must be >= {0 if option == 'past' else 1}, got {value}")
    if args.batch < 1:
        raise CommandError(f"--batch must be >= 1, got {args.batch}")
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if args.name in ENCODERS:
        if args.mode != "prefill" or args.past is not None or args.ipus is not None or args.weights == "external":
            raise CommandError(f"{args.name}: --mode, --past, --ipus and --weights external are for the decoders")
        onnx.save(_encoder(args), str(out))
    else:
        _decoder(args, out)
    size = out.stat().st_size
    print(f"wrote {out} ({size / 2**20:.1f} MiB, {time.perf_counter() - start:.1f} s)")
    return 0


def _encoder(args: argparse.Namespace) -> onnx.ModelProto:
    from profiler.frontends.onnx import examples

    if args.name == "resnet50":
        return examples.resnet(batch=args.batch)
    seq = args.seq or 384
    if args.name == "bert-base":
        return examples.bert(layers=args.layers or 12, seq=seq, batch=args.batch)
    # BERT-large: Devlin et al. 2019 §3: L=24, H=1024, A=16 (feed-forward 4H = 4096)
    return examples.bert(layers=args.layers or 24, hidden=1024, heads=16, ff=4096, seq=seq, batch=args.batch)


def _decoder(args: argparse.Namespace, out: Path) -> None:
    from dataclasses import replace

    from profiler.frontends.onnx import decoders

    config = decoders.CONFIGS[args.name]
    if args.layers:
        config = replace(config, layers=args.layers)
    seq = args.seq or 128
    weights = args.weights
    if weights == "auto":
        weights = "external" if 4 * config.parameters > EXTERNAL_FROM else "random"
    try:
        model = decoders.decoder(config, args.mode, seq=seq, past=seq if args.past is None else args.past,
                                 batch=args.batch, ipus=args.ipus, weights=weights,
                                 data_file=f"{out.name}.data")  # fmt: skip
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    decoders.save(model, out)
    if weights == "external":
        print(f"weights: external references into {out.name}.data ({4 * config.parameters / 2**30:.1f} GiB, sparse)")
