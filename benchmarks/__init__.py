"""Benchmarks and result scripts of bda_jax, each a module run from the repository root:
``python -m benchmarks`` runs them all (``benchmarks/run_all.py``; ``make bench``), and
``python -m benchmarks.bench_kernels --quick`` runs one. They import the installed package only
(``pip install -e .``); shared workloads are imported from sibling modules as
``benchmarks.<module>``. Results are JSON under ``benchmarks/results/`` (docs/performance.md)."""
