#pragma once
// The split a run evaluates on, chosen once for every front end (hotloop
// train, bench's rows, a C++ program): val, else test.

#include <cstdint>
#include <memory>

#include "hotloop/data/data_spec.h"

namespace hotloop::data {

// The val split of `spec`, else its test split; nullptr when it has neither
// (a run then trains without evaluation). A split that is not there moves on
// to the next; instruction data's split that is there but bad is the
// DataError it is (image and token sources cannot tell the two apart, and
// move on).
std::shared_ptr<const Dataset> open_eval_split(
    const DataSpec& spec,
    std::uint64_t seed);

} // namespace hotloop::data
