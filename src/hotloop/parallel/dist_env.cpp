#include "hotloop/parallel/dist_env.h"

#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::parallel {

namespace {

int number(const char* name, const char* text, int min, int max) {
  int v = 0;
  const std::string s(text);
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < min || v > max) {
    throw UsageError(
        fmt::format(
            "{}={}: expected a number from {} to {}", name, s, min, max),
        "the launcher (torchrun, srun, hotloop launch) sets it; unset it to run a single process");
  }
  return v;
}

} // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // Up to the first comma outside brackets.
  std::string first;
  int depth = 0;
  for (const char c : nodelist) {
    if (c == ',' && depth == 0) {
      break;
    }
    depth += c == '[' ? 1 : (c == ']' ? -1 : 0);
    first.push_back(c);
  }
  const auto open = first.find('[');
  if (open == std::string::npos) {
    return first;
  }
  // prefix[07-09,12] -> prefix07
  std::string range = first.substr(open + 1);
  range = range.substr(0, range.find_first_of(",]"));
  return first.substr(0, open) + range.substr(0, range.find('-'));
}

DistEnv read_dist_env(const std::function<const char*(const char*)>& get_fn) {
  auto get = [&](const char* name) -> const char* {
    const char* v = get_fn ? get_fn(name) : std::getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  DistEnv e;
  if (get("RANK") != nullptr || get("WORLD_SIZE") != nullptr) {
    if (get("RANK") == nullptr || get("WORLD_SIZE") == nullptr) {
      throw UsageError(
          "RANK and WORLD_SIZE must be set together",
          "use torchrun or hotloop launch, or unset both");
    }
    e.source = "torchrun";
    e.world_size = number("WORLD_SIZE", get("WORLD_SIZE"), 1, 1 << 20);
    e.rank = number("RANK", get("RANK"), 0, e.world_size - 1);
    e.local_rank = get("LOCAL_RANK")
        ? number("LOCAL_RANK", get("LOCAL_RANK"), 0, 1 << 20)
        : 0;
    e.local_world_size = get("LOCAL_WORLD_SIZE")
        ? number("LOCAL_WORLD_SIZE", get("LOCAL_WORLD_SIZE"), 1, 1 << 20)
        : 1;
    if (get("MASTER_ADDR") != nullptr) {
      e.master_addr = get("MASTER_ADDR");
    }
  } else if (get("SLURM_PROCID") != nullptr && get("SLURM_NTASKS") != nullptr) {
    e.source = "slurm";
    e.world_size = number("SLURM_NTASKS", get("SLURM_NTASKS"), 1, 1 << 20);
    e.rank = number("SLURM_PROCID", get("SLURM_PROCID"), 0, e.world_size - 1);
    e.local_rank = get("SLURM_LOCALID")
        ? number("SLURM_LOCALID", get("SLURM_LOCALID"), 0, 1 << 20)
        : 0;
    if (const char* per_node = get("SLURM_NTASKS_PER_NODE")) {
      // "4", or "4(x2)" for several nodes alike: the leading count.
      const std::string s(per_node);
      e.local_world_size = number(
          "SLURM_NTASKS_PER_NODE",
          s.substr(0, s.find('(')).c_str(),
          1,
          1 << 20);
    }
    if (get("MASTER_ADDR") != nullptr) {
      e.master_addr = get("MASTER_ADDR");
    } else if (get("SLURM_JOB_NODELIST") != nullptr) {
      e.master_addr = first_slurm_host(get("SLURM_JOB_NODELIST"));
    } else if (e.world_size > 1) {
      throw UsageError(
          "SLURM_JOB_NODELIST is not set: cannot tell which host is the master",
          "run under srun, or set MASTER_ADDR");
    }
  } else {
    return e;
  }
  if (get("HOTLOOP_RANK_STATUS_FILE") != nullptr) {
    e.status_file = get("HOTLOOP_RANK_STATUS_FILE");
  }
  if (get("MASTER_PORT") != nullptr) {
    e.master_port = number("MASTER_PORT", get("MASTER_PORT"), 1, 65535);
  }
  return e;
}

} // namespace hotloop::parallel
