from bda_jax.cli import main

main()
