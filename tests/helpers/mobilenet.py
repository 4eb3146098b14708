"""MobileNetV1 built with the planner's builder API (no TFLite needed), for planner tests."""
from planner import parts
from planner.graph import GraphBuilder, PlannerGraph


def mobilenet_v1(size: int = 224, alpha: float = 1.0, classes: int = 1001) -> PlannerGraph:
    b = GraphBuilder(f"mobilenet_v1_{alpha}_{size}")
    x = b.input("input", (1, size, size, 3))

    def ch(n: int) -> int:
        return max(8, int(n * alpha))
    t = b.add(parts.conv2d("conv0", x, ch(32), 3, 2, padding=parts.same_padding(size, 3, 2) * 2,
                           activation="relu6"))
    cfg = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1),
           (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1)]
    for i, (oc, s) in enumerate(cfg):
        h = t.shape[1]
        ph = parts.same_padding(h, 3, s)
        t = b.add(parts.depthwise_conv2d(f"dw{i}", t, 3, s, padding=(ph[0], ph[0], ph[1], ph[1]),
                                         activation="relu6"))
        t = b.add(parts.conv2d(f"pw{i}", t, ch(oc), 1, activation="relu6"))
    t = b.add(parts.mean("mean", t))
    t = b.add(parts.reshape("reshape", t, (1, t.shape[3])))
    t = b.add(parts.fully_connected("fc", t, classes))
    return b.build([t])
