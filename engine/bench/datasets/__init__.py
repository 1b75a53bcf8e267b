"""Dataset loaders shared by the benchmarks and training."""
