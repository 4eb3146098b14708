"""Block configs of the planned command streams: how many operations run the block the
planner's performance model costed them with, and what that is worth by that model's own
estimate (the functional model runs no clock: every cycle figure here is estimated).

For every model and configuration, one compile at the default budget (the fastest plan
within the system's SRAM), its operations counted by where their block came from
(``plan_report["streams"][...]["block_configs"]``), and per operation whose Part the
planner lowered to one NPU operation of its class, the planner's estimate (Vela's formula,
``EthosUPerfModel``) of that stripe run with the block the stream programs against the
block of the previous rule (the largest of Vela's ``npu_find_block_configs`` list). Flash
bytes change with the blocks because weights are encoded for each block's depth; the
"largest" column is a second compile with the previous rule. ``--vela`` adds how many of our
operations program the block Vela's own compiler (``--optimise Performance``, its stream read
back on the functional model) programs for an operation of the same kind, OFM shape, kernel
and stride ("same" / "matched": operations with such a twin in Vela's stream).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/stream_blocks.py [--models ...] [--configs ...]
"""
from __future__ import annotations

import argparse
import math
import os

MODELS = ("ds_cnn_kws", "resnet8_cifar", "mobilenet_v1_0.25_96")
CONFIGS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")


def _block_config(acc, op, block):
    """The planner's BlockConfig of ``op`` with OFM block ``block`` (h, w, d): its IFM block
    as the search sizes it (``planner.perf.ethos_u_npu.block_axis``)."""
    from planner.perf.ethos_u_npu import SUBKERNEL_MAX, BlockConfig, search_settings

    ifm = op.ifm if op.ifm2 is None or math.prod(op.ifm) >= math.prod(op.ifm2) else op.ifm2
    g = search_settings(acc, op, ifm)
    ib = []
    for axis in (0, 1):
        b, u = block[axis], acc.ofm_ublock[axis]
        k = min((op.kernel[axis] - 1) * op.dilation[axis] + 1, SUBKERNEL_MAX[axis])
        n = -(-((b - 1) * op.stride[axis] + k + op.rounding) // op.upscale)
        ib.append(-(-n // u) * u)
    depth = block[2] if g.equal_depth else g.ifm_block_depth
    return BlockConfig(tuple(block), (ib[0], ib[1], depth), g.traversal, g.acc_bits)


_BLOCK_OPS = {"NPU_OP_CONV": "conv", "NPU_OP_DEPTHWISE": "dw", "NPU_OP_POOL": "pool",
              "NPU_OP_ELEMENTWISE": "ew"}


def _blocks(run) -> dict:
    """{(operation, OFM shape, kernel, stride): {OFM blocks}} of a stream, read from its
    registers as the functional model runs it (``run(trace)``)."""
    out: dict = {}

    def keep(cmd, state, mem):
        if cmd.name not in _BLOCK_OPS:
            return
        p = state.param
        key = (cmd.name, tuple(p(f"OFM_{a}_M1") + 1 for a in ("HEIGHT", "WIDTH", "DEPTH")),
               (p("KERNEL_HEIGHT_M1") + 1, p("KERNEL_WIDTH_M1") + 1), p("KERNEL_STRIDE"))
        out.setdefault(key, []).append(tuple(p(f"OFM_BLK_{a}_M1") + 1
                                             for a in ("HEIGHT", "WIDTH", "DEPTH")))

    run(keep)
    return out


def vela_agreement(path: str, config: str, payload) -> dict:
    """Per operation kind: (our operations whose block is one Vela programs for a twin,
    operations with a twin)."""
    import numpy as np

    from ethosu_stream.tflite_custom_op import read_ethos_u_ops
    from planner.vela_run import run_vela
    from tvm_ethos.backends.ethos_u.stream_run import run_payload

    run = run_vela(path, config, "--optimise", "Performance")
    theirs: dict = {}
    for op in read_ethos_u_ops(run.tflite):
        zeros = [np.zeros(s.shape, s.dtype) for s in op.inputs]
        for k, v in _blocks(lambda keep, op=op, z=zeros: op.run(z, config, keep)).items():
            theirs.setdefault(k, []).extend(v)
    zeros = [np.zeros(a.shape, a.dtype) for a in payload.inputs]
    ours = _blocks(lambda keep: run_payload(payload, zeros, keep))
    counts: dict = {}
    for key, blocks in ours.items():
        if key in theirs:
            same, matched = counts.get(_BLOCK_OPS[key[0]], (0, 0))
            counts[_BLOCK_OPS[key[0]]] = (same + sum(b in theirs[key] for b in blocks),
                                          matched + len(blocks))
    return counts


def measure(model: str, config: str, vela: bool = False) -> dict:
    """Counts and estimated cycles of one model's planned stream on ``config``."""
    import tvm_ethos
    from planner.perf.ethos_u import lower_part
    from tvm_ethos.backends.ethos_u import npu_ops, stream_cascade

    seen = []
    real = stream_cascade._Emitter.block_config

    def spy(self, npu, key):
        cfg = real(self, npu, key)
        if self.step_at is not None and self.perf is not None:
            largest = npu_ops.block_config(npu, self.acc)
            seen.append((self, self.step_at, npu, (cfg.height, cfg.width, cfg.depth),
                         (largest.height, largest.width, largest.depth)))
        return cfg

    path = os.path.join(os.environ.get("TVM_ETHOS_MODELS", "/work/shared/models"),
                        f"{model}.tflite")
    target = f"ethos-u -accelerator_config={config},llvm"
    stream_cascade._Emitter.block_config = spy
    try:
        cm = tvm_ethos.compile(path, target, npu_runtime="stream", cache_dir=False)
    finally:
        stream_cascade._Emitter.block_config = real
    ours = largest = 0
    for em, (part, box), npu, block, big in seen:
        shape = tuple(hi - lo for lo, hi in box)
        cls = stream_cascade._NPU_CLASS.get(type(npu).__name__)
        ops = [op for op in lower_part(em.parts[part], shape) if op.npu == cls]
        if len(ops) != 1:
            continue
        acc = em.perf.accelerator
        ours += em.perf._estimate_uncached(ops[0], _block_config(acc, ops[0], block), None).cycles
        largest += em.perf._estimate_uncached(ops[0], _block_config(acc, ops[0], big),
                                              None).cycles
    # the previous rule, for its flash bytes
    original = stream_cascade.chosen_block
    stream_cascade.chosen_block = lambda npu, acc, wanted: original(npu, acc, None)
    try:
        before = tvm_ethos.compile(path, target, npu_runtime="stream", cache_dir=False)
    finally:
        stream_cascade.chosen_block = original
    (sym, entry), = cm.plan_report["streams"].items()
    (_, old), = before.plan_report["streams"].items()
    return {"model": model, "config": config, "ops": sum(entry["block_configs"].values()),
            "blocks": entry["block_configs"], "plan_cycles": cm.plan_report["subgraphs"][sym]
            ["cycles"], "est_ours": ours, "est_largest": largest,
            "flash": entry["flash_bytes"], "flash_largest": old["flash_bytes"],
            "sram": entry["sram_high_water_bytes"], "sram_region": entry["sram_region"],
            "peak": entry["planned_peak_bytes"],
            "vela": vela_agreement(path, config, cm.program.payloads[sym]) if vela else None}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS))
    ap.add_argument("--vela", action="store_true",
                    help="also compare with the blocks of Vela's own streams")
    args = ap.parse_args(argv)
    short = {"planner": "plan", "planner, not in npu_find_block_configs' list": "plan*",
             "fallback: planner block not legal": "illegal",
             "fallback: no planner block": "none",
             "planner's search, operation not costed": "search"}
    print(f"{'model':22} {'config':14} {'ops':>5} {'plan':>5} {'plan*':>5} {'illegal':>7} "
          f"{'none':>5} {'search':>6} | {'plan est':>10} {'est ours':>10} {'est largest':>11} | "
          f"{'flash':>7} {'largest':>7} | SRAM touched = peak (region)")
    for model in args.models:
        for config in args.configs:
            r = measure(model, config, args.vela)
            c = {short[k]: v for k, v in r["blocks"].items()}
            print(f"{model:22} {config:14} {r['ops']:>5} {c.get('plan', 0):>5} "
                  f"{c.get('plan*', 0):>5} {c.get('illegal', 0):>7} {c.get('none', 0):>5} "
                  f"{c.get('search', 0):>6} | "
                  f"{r['plan_cycles']:>10,} {r['est_ours']:>10,} {r['est_largest']:>11,} | "
                  f"{r['flash']:>7,} {r['flash_largest']:>7,} | {r['sram']:,} = "
                  f"{r['peak']:,} ({r['sram_region']})"
                  + (" | Vela's block: " + " ".join(f"{k} {a}/{b}" for k, (a, b) in
                                                   sorted(r["vela"].items()))
                     if args.vela else ""),
                  flush=True)


if __name__ == "__main__":
    main()
