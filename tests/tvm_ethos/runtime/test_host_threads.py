"""tvm_ethos.runtime.host_threads: TVM's parallel loops get one thread per physical core (TVM
alone halves the logical CPUs on x86, one thread on a 2-core CPU without SMT), unless the user
chose a number."""
import subprocess
import sys

from tvm_ethos.runtime.host_threads import default_threads, physical_cores


def _sysfs(tmp_path, siblings: dict):
    for cpu, sib in siblings.items():
        d = tmp_path / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "thread_siblings_list").write_text(sib + "\n")
    return tmp_path


def test_physical_cores_counts_sibling_sets_once(tmp_path):
    smt = _sysfs(tmp_path / "smt", {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"})
    assert physical_cores({0, 1, 2, 3}, smt) == 2
    assert physical_cores({0, 2}, smt) == 1  # an affinity mask of one core's two threads
    no_smt = _sysfs(tmp_path / "plain", {0: "0", 1: "1"})
    assert physical_cores({0, 1}, no_smt) == 2
    assert physical_cores({0, 1, 5}, no_smt) == 3  # no topology for cpu5: one core


def test_default_threads_keeps_the_users_choice():
    env = {"TVM_NUM_THREADS": "3"}
    default_threads(env)
    assert env == {"TVM_NUM_THREADS": "3"}
    env = {"OMP_NUM_THREADS": "1"}
    default_threads(env)
    assert "TVM_NUM_THREADS" not in env
    env = {}
    default_threads(env)
    assert env["TVM_NUM_THREADS"] == str(physical_cores())


def test_tvm_runs_on_every_physical_core_after_import():
    """In a fresh process (TVM's pool is made once per thread), ``import tvm_ethos`` gives TVM's
    thread pool one thread per physical core of the affinity mask."""
    code = ("import os; os.environ.pop('TVM_NUM_THREADS', None); "
            "os.environ.pop('OMP_NUM_THREADS', None); import tvm_ethos, tvm; "
            "from tvm_ethos.runtime.host_threads import physical_cores; "
            "print(tvm.get_global_func('runtime.NumThreads')(), physical_cores())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == out[1]
