#pragma once
// Running the bench matrix with a line per row, and writing its report: what
// `hotloop bench`, `hotloop run` and `hotloop audit` share.

#include <cstdio>
#include <string>

#include "hotloop/testplan/matrix.h"
#include "hotloop/testplan/report.h"

namespace hotloop::cli {

// This process's command line, as typed (from /proc/self/cmdline).
std::string command_line();

// Whether CUDA can run here (GPU rows run, else "skipped: no GPU").
bool gpu_available();

// Runs `options` (gpu_available is set here), printing the plan and a line
// per row to `progress`.
testplan::BenchReport run_bench_matrix(
    testplan::MatrixOptions options,
    std::FILE* progress);

// run_bench_matrix into `options.out_dir`: writes its report there and
// prints the headline (or "no bench row ran") and the report's path.
void run_and_report_matrix(testplan::MatrixOptions options);

} // namespace hotloop::cli
