"""zlog's benchmarks: the standalone scripts (`make bench`) and the side-by-side suite."""
