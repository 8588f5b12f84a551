"""BERT-family encoders as a framework exports them, run through ``tilescope run --check``.

    python bench/exported_encoders.py --torch-python /path/to/venv/bin/python
    python bench/exported_encoders.py --models bert,deberta --target C600 --dtype float16 --seq 128

Optional and not part of CI: the export needs PyTorch and Hugging Face ``transformers``, which
tilescope does not depend on. Give ``--torch-python`` the interpreter of a separate venv that has
them (on this project's machines: ``python -m venv V && V/bin/pip install torch==2.13.0 transformers
onnx``; torch 2.13.0's CPU build is on disk there). Each model is built from its Hugging Face
configuration class at the published base configuration (below) with **random weights** (seed 0),
wrapped to take ``input_ids`` and ``attention_mask`` and return ``last_hidden_state``, and exported
by ``torch.onnx.export(..., opset_version=17, dynamo=False)``, the TorchScript exporter users of
transformers' own ``onnx`` export path meet. Then ``tilescope run MODEL --random-inputs --check
--json`` (a subprocess, its wall time and peak RSS from ``/usr/bin/time``) compares the simulated
outputs with onnxruntime's on the same inputs. The record is ``bench/exported_encoders.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "bench" / "exported_encoders.json"

#: transformers configuration class, model class and the keyword arguments that turn the class's
#: defaults into the published base model (Hugging Face model cards' config.json files).
MODELS: dict[str, tuple[str, str, dict]] = {
    # bert-base-uncased: the class defaults (vocab 30,522, hidden 768, 12 layers, 12 heads, FFN 3,072)
    "bert": ("BertConfig", "BertModel", {}),
    # roberta-base: vocab 50,265, 514 positions (offset by the padding id 1), one token type
    "roberta": ("RobertaConfig", "RobertaModel",
                {"vocab_size": 50265, "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1}),
    # albert-base-v2: embedding 128 factorised to hidden 768, 12 shared layers, vocab 30,000
    "albert": ("AlbertConfig", "AlbertModel",
               {"hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072, "embedding_size": 128,
                "vocab_size": 30000}),
    # distilbert-base-uncased: the class defaults (6 layers, hidden 768, vocab 30,522)
    "distilbert": ("DistilBertConfig", "DistilBertModel", {}),
    # microsoft/deberta-v3-base: vocab 128,100, relative attention over 256 log buckets, c2p and p2c
    "deberta": ("DebertaV2Config", "DebertaV2Model",
                {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
                 "max_position_embeddings": 512, "type_vocab_size": 0, "layer_norm_eps": 1e-7, "vocab_size": 128100,
                 "relative_attention": True, "position_buckets": 256, "max_relative_positions": -1,
                 "pos_att_type": ["p2c", "c2p"], "norm_rel_ebd": "layer_norm", "share_att_key": True,
                 "position_biased_input": False, "hidden_act": "gelu"}),
}  # fmt: skip

EXPORT = """
import sys, time, torch, transformers as T
name, cfg_cls, model_cls, kw, seq, out = sys.argv[1], sys.argv[2], sys.argv[3], eval(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
opset = int(sys.argv[7])
torch.manual_seed(0)
cfg = getattr(T, cfg_cls)(**kw)
cfg._attn_implementation = "eager"  # the attention as matmuls and a softmax, as exported models have it
model = getattr(T, model_cls)(cfg).eval()

class Encoder(torch.nn.Module):  # keyword arguments: transformers 5's forward takes more positionals
    def __init__(self, m):
        super().__init__()
        self.m = m
    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

ids = torch.randint(5, cfg.vocab_size, (1, seq))
mask = torch.ones(1, seq, dtype=torch.int64)
t = time.time()
torch.onnx.export(Encoder(model).eval(), (ids, mask), out, input_names=["input_ids", "attention_mask"],
                  output_names=["last_hidden_state"], opset_version=opset, dynamo=False)
print(sum(p.numel() for p in model.parameters()), time.time() - t, torch.__version__, T.__version__)
"""


def export(torch_python: str, name: str, seq: int, out: Path, opset: int = 17) -> dict:
    """Export one model with ``torch_python`` at ``opset``; its parameter count and versions."""
    cfg_cls, model_cls, kw = MODELS[name]
    proc = subprocess.run([torch_python, "-c", EXPORT, name, cfg_cls, model_cls, repr(kw), str(seq), str(out), str(opset)],
                          capture_output=True, text=True)  # fmt: skip
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"export of {name} failed: {last}")
    params, seconds, torch_v, tf_v = proc.stdout.split()[-4:]
    return {"parameters": int(params), "export_s": round(float(seconds), 1), "torch": torch_v, "transformers": tf_v}


def run(model: Path, args: argparse.Namespace, report: Path) -> dict:
    """``tilescope run MODEL --random-inputs --check --json`` with wall time and peak RSS."""
    cmd = [sys.executable, "-m", "tilescope", "run", str(model), "--random-inputs", "--check", "--json",
           "--target", args.target, "--dtype", args.dtype, "--report-dir", str(report)]  # fmt: skip
    timed = ["/usr/bin/time", "-f", "TIME %e %M", *cmd]
    proc = subprocess.run(timed, capture_output=True, text=True, cwd=ROOT)
    wall, rss_kb = next(line.split()[1:] for line in proc.stderr.splitlines() if line.startswith("TIME "))
    row: dict = {"exit": proc.returncode, "wall_s": float(wall), "peak_rss_gib": round(int(rss_kb) / 2**20, 2)}
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        err = [line for line in proc.stderr.splitlines() if line.startswith("tilescope run: error")]
        row["error"] = err[-1] if err else proc.stderr.strip().splitlines()[-2]
        return row
    row["cycles"] = doc["execution"]["total_cycles"]
    row["max_tile_bytes"] = doc["memory"]["max_tile_bytes"]
    row["out_of_memory_tiles"] = doc["memory"]["out_of_memory_tiles"]
    row["check"] = doc.get("check")
    return row


def verdict(row: dict) -> str:
    """ok / FAILED / why nothing was checked, for one line of output."""
    check = row.get("check")
    if row.get("out_of_memory_tiles"):
        return f"not run: out of memory on {row['out_of_memory_tiles']} tiles (worst {row['max_tile_bytes']:,} B)"
    if check is None:
        return str(row.get("error", "-"))
    return "ok" if check["passed"] else "FAILED"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--torch-python", default=sys.executable, help="a Python with torch and transformers")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma list of {', '.join(MODELS)}")
    p.add_argument("--seq", type=int, default=128, help="sequence length (batch 1)")
    p.add_argument("--target", default="GC200")
    p.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    p.add_argument("--opset", type=int, default=17,
                   help="the export's opset (below 17 layer norm is exported decomposed)")  # fmt: skip
    args = p.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    with tempfile.TemporaryDirectory(prefix="tilescope-exported-") as tmp:
        for name in names:
            model = Path(tmp) / name / f"{name}_{args.seq}.onnx"
            model.parent.mkdir()
            try:
                row = export(args.torch_python, name, args.seq, model, args.opset)
            except RuntimeError as exc:
                print(f"{name}: {exc}", file=sys.stderr)
                return 1
            row.update(run(model, args, Path(tmp) / name / "report"))
            row.update(seq=args.seq, target=args.target, dtype=args.dtype, opset=args.opset,
                       date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"))  # fmt: skip
            opset = "" if args.opset == 17 else f"/opset{args.opset}"  # opset 17 rows keep their keys
            record[f"{name}/{args.target}/{args.dtype}/{args.seq}{opset}"] = row
            print(f"{name:11s} {args.target} {args.dtype} seq {args.seq} opset {args.opset}: exit {row['exit']}, "
                  f"{row.get('cycles', '-')} cycles, check {verdict(row)}, "
                  f"{row['wall_s']:.0f} s, {row['peak_rss_gib']} GiB", flush=True)  # fmt: skip
            RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
