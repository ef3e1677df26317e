"""The benchmark harness behind ``weavehost bench``: BFCL cases, BFCL's correctness rules, the
stock llama-cpp-python peer, the runner and the summary.

Stage: benchmark (outside the host's request path). Every strategy runs on the same engine in
one process, cases interleaved across strategies; see ``docs/benchmarks.md``.
"""
