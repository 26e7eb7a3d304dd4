"""``python -m benchmarks [--quick] [--only NAMES] [--with-nuts]``: every benchmark, see run_all."""
from benchmarks.run_all import main

main()
