#pragma once
// Reading `torch.save(model.state_dict(), path)` files (PyTorch's zip format)
// without executing anything. The archive holds `<name>/data.pkl`, a pickle
// that describes the tensors, and `<name>/data/<key>`, each storage's raw
// little-endian bytes. The pickle is interpreted, never run: only plain values
// (None, bools, numbers, strings, tuples, lists, dicts, OrderedDict) and the
// few torch functions that rebuild tensors are accepted; any other global
// (a class, a function such as os.system) is refused by name.
// No LibTorch here: weights.cpp builds tensors from these records, and fuzz/
// fuzzes this parser on its own.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hotloop/model/weight_formats/weight_dtype.h"

namespace hotloop::model {

// The tensors of the state dict in the archive in `bytes`, in the file's order,
// with data offsets into `bytes`. A checkpoint that nests the state dict under
// "state_dict", "model" or "module" is read from there. Throws DataError naming
// `file` for anything malformed or refused.
std::vector<TensorRecord> parse_torch_zip(
    std::span<const std::uint8_t> bytes,
    const std::string& file);

// Writes the archive for `tensors` (contiguous bytes each) into `out`: what
// torch.load() reads back as an OrderedDict of tensors. `archive_name` is the
// folder inside the zip (torch uses the file's stem).
void write_torch_zip(
    const std::vector<TensorBytes>& tensors,
    const std::string& archive_name,
    std::vector<std::uint8_t>& out);

} // namespace hotloop::model
