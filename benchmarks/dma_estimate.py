"""The planner's weight-DMA estimate against the streams written for the same Proposals.

For each model x accelerator x budget (the stream golden's cases, ``benchmarks/stream_golden``)
this compiles the ``.tflite`` (target ``ethos-u``), catches every planned subgraph's Proposal
and the stream written for it, and prints, summed over the subgraphs:

- slice loads: the staged Parts' weight slices the DMA loads into the staging buffers, as
  the planner estimates them (``planner.staged_slices``) and as ``stream_weights.Stager``
  emits them (a DMA, or the pair of weight and bias DMAs, before a slice's operation), and
  the slices the stream reads in place from flash instead (encoded past their half);
- weight DMA bytes: ``planner.dma_estimate`` (raw int8 weights, int32 biases) and the
  stream's (encoded weight streams, 10-byte bias/scale entries: emulated, the payload's
  count);
- command-stream bytes: ``planner.stream_estimate`` and the bytes written.

  python benchmarks/dma_estimate.py [--only resnet8_cifar ...] [--accelerators ethos-u55-128]
      [--budgets default,smallest,size]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.stream_golden import compile_case, models  # noqa: E402
from ethosu_stream.tflite_custom_op import command_words  # noqa: E402
from planner import stream_estimate  # noqa: E402
from planner.devices import get_device  # noqa: E402
from planner.dma_estimate import dma_bytes  # noqa: E402
from planner.staged_slices import slice_count, slice_loads  # noqa: E402
from tvm_ethos.backends.ethos_u import stream_cascade, stream_weights  # noqa: E402
from tvm_ethos.backends.ethos_u.stream_base import FLASH_REGION  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
BUDGETS = ("default", "smallest", "size")


def estimated_slice_loads(plans, graph) -> int:
    """The staged Parts' slice loads ``planner.staged_slices`` counts for ``plans``."""
    by_name = {p.name: p for p in graph.parts}
    total = 0
    for plan in plans:
        staged = stream_estimate.staged_part(plan, graph)
        if staged is None:
            continue
        ps = next(s for s in plan.part_schedules if s.part == staged)
        steps = sum(n for shape, n in ps.stripe.count_stripes().items() if 0 not in shape)
        slices = slice_count(by_name[staged].output.shape[-1])
        total += slice_loads(slices, steps)
    return total


def measure(model: str, accelerator: str, budget: str) -> dict:
    """The estimates and the written streams' counts of one case, or ``why`` it was
    refused."""
    caught, loads = [], {"dma": 0, "flash": 0}
    generate, slices = stream_cascade.generate_planned, stream_weights.Stager.slices

    def catch(lw, acc, match, proposal, device=None, **kwargs):
        payload = generate(lw, acc, match, proposal, device, **kwargs)
        caught.append((match.graph, proposal, payload))
        return payload

    def count(self, npu, q, step, channels, block_config):
        out = slices(self, npu, q, step, channels, block_config)
        dma = [isinstance(op, self.api.NpuDmaOperation) for op in out]
        # a slice's DMAs come right before its operation: count the first of each run
        loads["dma"] += sum(d and not (k and dma[k - 1]) for k, d in enumerate(dma))
        loads["flash"] += sum(not d and op.weights[0].region == FLASH_REGION
                              for op, d in zip(out, dma))
        return out

    stream_cascade.generate_planned, stream_weights.Stager.slices = catch, count
    try:
        compile_case(model, accelerator, budget)
    except Exception as e:  # noqa: BLE001 - a refusal is a row of the table
        return {"why": f"{type(e).__name__}: {str(e).splitlines()[0][:60] if str(e) else ''}"}
    finally:
        stream_cascade.generate_planned, stream_weights.Stager.slices = generate, slices
    device = get_device(accelerator)
    return {
        "est_loads": sum(estimated_slice_loads(p.plans, g) for g, p, _ in caught),
        "loads": loads["dma"],
        "in_flash": loads["flash"],
        "est_dma": sum(dma_bytes(p.plans, g, device) for g, p, _ in caught),
        "dma": sum(pl.weight_dma_bytes for _, _, pl in caught),
        "est_stream": sum(stream_estimate.stream_bytes(p.plans, g, device)
                          for g, p, _ in caught),
        "stream": sum(4 * len(command_words(pl.driver_payload)) for _, _, pl in caught),
    }


def _pct(est: int, real: int) -> str:
    return f"{100 * (est - real) / real:+.1f} %" if real else "-"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="models (relative to the models folder)")
    ap.add_argument("--accelerators", default=",".join(ACCELERATORS))
    ap.add_argument("--budgets", default=",".join(BUDGETS))
    args = ap.parse_args(argv)
    print("| case | slice loads est. / stream (read from flash) | weight DMA B est. / emulated | "
          "stream B est. / written |")
    print("|---|---|---|---|")
    for model in models():
        if args.only and model.removesuffix(".tflite") not in args.only and \
                model not in args.only:
            continue
        for accelerator in args.accelerators.split(","):
            for budget in args.budgets.split(","):
                m = measure(model, accelerator, budget)
                case = f"{model.removesuffix('.tflite')} {accelerator} {budget}"
                if "why" in m:
                    print(f"| {case} | {m['why']} | | |")
                    continue
                print(f"| {case} | {m['est_loads']:,} / {m['loads']:,} ({m['in_flash']:,}) | "
                      f"{m['est_dma']:,} / {m['dma']:,} ({_pct(m['est_dma'], m['dma'])}) | "
                      f"{m['est_stream']:,} / {m['stream']:,} "
                      f"({_pct(m['est_stream'], m['stream'])}) |", flush=True)


if __name__ == "__main__":
    main()
