#include "hotloop/parallel/rank_status.h"

#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace hotloop::parallel {

namespace {

std::string key_for(int rank) {
  return fmt::format("status/{}", rank);
}

} // namespace

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string format_report(const RankReport& r) {
  return fmt::format("{} {} {}", r.unix_ms, r.step, r.phase);
}

std::optional<RankReport> parse_report(const std::string& text) {
  std::istringstream in(text);
  RankReport r;
  if (!(in >> r.unix_ms >> r.step >> r.phase)) {
    return std::nullopt;
  }
  return r;
}

std::string describe_report(const RankReport& r, std::int64_t now_ms) {
  return fmt::format(
      "step {}, {}, {:.1f} s before",
      r.step + 1,
      r.phase,
      static_cast<double>(now_ms - r.unix_ms) / 1e3);
}

RankStatus::RankStatus(
    int rank,
    c10::intrusive_ptr<c10d::Store> store,
    std::string file,
    std::chrono::milliseconds interval)
    : rank_(rank),
      store_(std::move(store)),
      file_(std::move(file)),
      interval_(interval) {
  publish();
  thread_ = std::thread([this] { run(); });
}

RankStatus::~RankStatus() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void RankStatus::publish() {
  RankReport r;
  r.unix_ms = unix_ms_now();
  r.step = step_.load(std::memory_order_relaxed);
  r.phase = to_string(static_cast<Phase>(phase_.load()));
  const std::string text = format_report(r);
  if (!file_.empty()) {
    // Rewritten in place: the launcher reads the last whole line.
    std::ofstream(file_, std::ios::trunc) << text << '\n';
  }
  if (store_) {
    try {
      store_->set(
          key_for(rank_), std::vector<std::uint8_t>(text.begin(), text.end()));
    } catch (const std::exception&) {
      store_.reset(); // the store is gone (rank 0 stopped): the file stays
    }
  }
}

void RankStatus::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    publish();
    lock.lock();
  }
}

std::string RankStatus::describe_peers(int world_size) {
  // Said first, so that ranks that saw the same failure are not blamed for
  // going quiet while they stop.
  set_phase(Phase::Failed);
  publish();
  // A store of our own: the publishing thread keeps using its connection.
  c10::intrusive_ptr<c10d::Store> store;
  try {
    if (store_) {
      store = store_->clone();
      store->setTimeout(std::chrono::seconds(5));
    }
  } catch (const std::exception&) {
    store.reset();
  }
  if (!store) {
    return "the job's store on rank 0 is gone, so rank 0 stopped";
  }
  auto read_all = [&](std::map<int, RankReport>& out) {
    for (int r = 0; r < world_size; ++r) {
      if (r == rank_ || !store->check({key_for(r)})) {
        continue;
      }
      const std::vector<std::uint8_t> v = store->get(key_for(r));
      if (auto rep = parse_report(std::string(v.begin(), v.end()))) {
        out[r] = *rep;
      }
    }
  };
  try {
    std::map<int, RankReport> before;
    std::map<int, RankReport> after;
    read_all(before);
    std::this_thread::sleep_for(interval_ * 3);
    read_all(after);
    const std::int64_t now = unix_ms_now();
    // Silent: the process is gone (killed, crashed). Stuck: it still
    // reports, but neither moved on nor saw the failure: its training thread
    // hangs outside the collective (a deadlock, a stuck loader, a debugger).
    // The healthy ranks waiting in the same collective time out with this
    // one, within the watch, and say so (phase "failed"); one still in the
    // gradients' all-reduce is waiting like this one and is not named.
    std::vector<std::string> silent;
    std::vector<std::string> stuck;
    const std::int64_t my_step = step_.load(std::memory_order_relaxed);
    for (int r = 0; r < world_size; ++r) {
      if (r == rank_) {
        continue;
      }
      const auto b = before.find(r);
      const auto a = after.find(r);
      if (a == after.end()) {
        silent.push_back(fmt::format("rank {} (never reported)", r));
        continue;
      }
      if (a->second.phase == to_string(Phase::Failed) || b == before.end()) {
        continue;
      }
      if (a->second.unix_ms == b->second.unix_ms) {
        silent.push_back(fmt::format(
            "rank {} (last report: {})", r, describe_report(a->second, now)));
      } else if (
          a->second.step == b->second.step &&
          a->second.phase == b->second.phase && a->second.step <= my_step &&
          a->second.phase != to_string(Phase::AllReduce)) {
        stuck.push_back(fmt::format(
            "rank {} (still at {}; it neither joined nor saw the failure)",
            r,
            describe_report(a->second, now)));
      }
    }
    if (silent.empty() && stuck.empty()) {
      return "no other rank stopped reporting without seeing the failure too (look for the cause in the network or the collective library)";
    }
    auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (std::size_t i = 0; i < v.size(); ++i) {
        s += (i > 0 ? "; " : "") + v[i];
      }
      return s;
    };
    std::string s;
    if (!silent.empty()) {
      s = "stopped reporting: " + list(silent);
    }
    if (!stuck.empty()) {
      s += (s.empty() ? "" : "; ") +
          ("alive but stuck outside the collective: " + list(stuck));
    }
    return s;
  } catch (const std::exception&) {
    return "the job's store on rank 0 stopped answering, so rank 0 stopped";
  }
}

} // namespace hotloop::parallel
