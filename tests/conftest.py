"""Test configuration.

* The CUDA simulator must be chosen before numba is imported.
* The CPU budget guard: the default selection must fit 2 minutes of CPU (user + sys) on the
  2-core CI machine (CONTRIBUTING.md, "Tests").  Every session ends with one line giving
  its CPU time -- this process plus the subprocesses it waited for -- split into start-up
  and collection versus test bodies, so a change that makes the default run heavier shows
  in its own output.  ``--cpu-durations=N`` lists the N tests and files that used the
  most CPU (wall-clock ``--durations`` mixes in the machine's load and the sleeps of the
  fault tests).  A process reaped only at exit (a forkserver pool) is not in the line;
  ``/usr/bin/time`` counts it.  Nothing asserts on time: the line is for the reviewer.
* The cyclic garbage collector is off while pytest collects (importing every test module
  and building ~6,300 items allocates hundreds of thousands of long-lived objects, and each
  full collection rescans them all: about 6 s of CPU per session), and what collection
  built is frozen afterwards (``gc.freeze``), so the tests' full collections scan only
  what the tests allocate.  Nothing is leaked: cycles created during collection stay until
  exit, as the items themselves do.
"""
import gc
import os
import resource

import pytest

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

DEFAULT_BUDGET_S = 120.0     # CPU seconds for `python -m pytest` (addopts: -m 'not slow')


def _cpu() -> float:
    """User + sys CPU seconds of this process and of its waited-for children so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


_CPU = {"tests": 0.0, "first": None}
_PER_TEST: dict[str, float] = {}


def pytest_addoption(parser):
    parser.addoption("--cpu-durations", type=int, default=0, metavar="N",
                     help="list the N tests and the N test files that used the most CPU "
                          "time (setup + call + teardown, waited-for subprocesses included)")


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    gc.disable()
    try:
        return (yield)
    finally:
        gc.enable()
        gc.freeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # the whole protocol: fixtures' setup and teardown count towards the test that ran them
    if _CPU["first"] is None:
        _CPU["first"] = _cpu()
    start = _cpu()
    try:
        return (yield)
    finally:
        _record(item, _cpu() - start)


def _record(item, used):
    _CPU["tests"] += used
    _PER_TEST[item.nodeid] = used


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _PER_TEST:
        return
    n = config.getoption("--cpu-durations")
    if n:
        terminalreporter.write_sep("=", f"{n} tests using the most CPU")
        top = sorted(_PER_TEST.items(), key=lambda kv: -kv[1])[:n]
        for nodeid, used in top:
            terminalreporter.write_line(f"{used:7.2f}s cpu  {nodeid}")
        files: dict[str, list] = {}
        for nodeid, used in _PER_TEST.items():
            entry = files.setdefault(nodeid.split("::")[0], [0.0, 0])
            entry[0] += used
            entry[1] += 1
        terminalreporter.write_sep("=", f"{n} test files using the most CPU")
        for path, (used, count) in sorted(files.items(), key=lambda kv: -kv[1][0])[:n]:
            terminalreporter.write_line(f"{used:7.2f}s cpu  {count:5d} tests  {path}")
    total = _cpu()
    start = _CPU["first"] if _CPU["first"] is not None else total
    markexpr = config.getoption("markexpr") or "all"
    terminalreporter.write_line(
        f"CPU time: {total:.1f} s user+sys ({start:.1f} s start-up and collection, "
        f"{_CPU['tests']:.1f} s in {len(_PER_TEST)} tests; -m {markexpr!r}); the default "
        f"selection's budget is {DEFAULT_BUDGET_S:.0f} s on the 2-core CI machine "
        f"(CONTRIBUTING.md, Tests)")
