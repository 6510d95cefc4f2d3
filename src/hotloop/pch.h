#pragma once
// Precompiled for every hotloop target (HOTLOOP_USE_PCH): the heavy headers
// most files include. Keep it to headers that are stable and widely used; a
// change here rebuilds everything.

#include <ATen/core/Tensor.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>
