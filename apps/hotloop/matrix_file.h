#pragma once
// `hotloop bench --matrix FILE.toml`: which rows to run. Either a product
//
//   steps = 100                 # optional: flags given on the command line win
//   cpu_row_seconds = 60
//   grow_gpu_batch = true
//   [matrix]
//   devices = ["cpu", "cuda"]
//   precisions = ["fp32", "mixed"]
//   batches = [32, 64]
//   models = ["resnet18-small"]
//   data = ["fashion-mnist"]
//
// or explicit rows ([[rows]] with device, precision, batch, model, data), or
// both (the product first). An unknown key, or a value of the wrong type, is
// a ConfigError naming the key and the file.

#include <string>

#include "hotloop/testplan/matrix.h"

namespace hotloop::cli {

// Fills options.rows (and steps, cpu_row_seconds, grow_gpu_batch when the
// file sets them).
void read_matrix_file(
    const std::string& path,
    testplan::MatrixOptions& options);

} // namespace hotloop::cli
