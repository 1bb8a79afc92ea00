"""``make bench``: every benchmark, one after the other."""

from tests.benchmarks import bench_console, bench_harness, bench_provider

if __name__ == "__main__":
    bench_provider.main()
    print()
    bench_harness.main([])
    print()
    bench_console.main()
