"""benchmarks/host_kernels.py: every kernel of a shipped model timed alone, and the executor's
own time, read from the same bound calls the executor makes."""

from benchmarks.host_kernels import measure


def test_every_kernel_is_timed_and_the_executor_alone_too():
    res = measure("ds_cnn_kws", seconds=0.01)
    names = [name for name, _us in res["kernels"]]
    assert len(names) == res["cpu_calls"] > 1 and len(set(names)) == len(names)
    assert all(name.startswith("tvm_ethos_llvm_k") for name in names)
    assert all(us > 0 for _name, us in res["kernels"])
    assert res["sum"] == sum(us for _name, us in res["kernels"])
    # the executor runs the same calls plus its own work; with no-op kernels, its work alone
    assert 0 < res["no_op"] < res["executor"] and res["calls"] > 0
