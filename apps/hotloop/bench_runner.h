#pragma once
// Running the bench matrix with a line per row, and writing its report: what
// `hotloop bench`, `hotloop run` and `hotloop audit` share.

#include <cstdio>
#include <string>

#include "hotloop/bench/matrix.h"
#include "hotloop/bench/report.h"

namespace hotloop::cli {

// This process's command line, as typed (from /proc/self/cmdline).
std::string command_line();

// Whether CUDA can run here (GPU rows run, else "skipped: no GPU").
bool gpu_available();

// Runs `options` (gpu_available is set here), printing the plan and a line
// per row to `progress`.
bench::BenchReport run_bench_matrix(
    bench::MatrixOptions options,
    std::FILE* progress);

} // namespace hotloop::cli
