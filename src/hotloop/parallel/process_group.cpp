#include "hotloop/parallel/process_group.h"

#include <algorithm>
#include <map>

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "hotloop/core/first_line.h"
#include "hotloop/cuda/nccl_backend.h"
#include "hotloop/errors.h"

namespace hotloop::parallel {

namespace {

bool loopback(const std::string& host) {
  return host == "localhost" || host.starts_with("127.");
}

c10::intrusive_ptr<c10d::Backend> make_backend(
    const c10::intrusive_ptr<c10d::Store>& store,
    int rank,
    int size,
    const std::string& master_addr,
    const GroupOptions& options) {
  if (options.backend == Backend::Nccl) {
    return cuda::make_nccl_backend(
        store, rank, size, nccl_watchdog_timeout(options.timeout));
  }
  auto o = c10d::ProcessGroupGloo::Options::create();
  o->timeout = options.timeout;
  o->devices.push_back(
      loopback(master_addr)
          ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
          : c10d::ProcessGroupGloo::createDefaultDevice());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, o);
}

} // namespace

struct ProcessGroup::Impl {
  int rank = 0;
  int size = 1;
  std::string master_addr;
  GroupOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  std::shared_ptr<RankStatus> status; // shared with the siblings
  std::map<std::string, std::shared_ptr<ProcessGroup>> siblings;

  // Runs a collective; a failure (a rank that died, a timeout) becomes an
  // Error naming this rank, the collective and the ranks that stopped
  // reporting (with their last step and phase).
  template <typename F>
  void guarded(const std::string& phase, F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      // c10::DistBackendError, or Gloo's own exceptions from a dead peer.
      const std::string what = first_line(e.what());
      throw Error(
          fmt::format(
              "rank {}: the {} collective ({}) failed: {}; {}",
              rank,
              phase,
              options.backend == Backend::Nccl ? "NCCL" : "Gloo",
              what,
              status ? status->describe_peers(size) : std::string()),
          "another rank stopped or stopped answering (the launcher names it too); --dist-timeout sets how long ranks wait");
    }
  }

  // Gloo: waits on the host (the work runs on Gloo's threads), at most the
  // group's timeout, for every collective.
  //
  // NCCL, Wait::Stream (the gradient buckets): makes the current stream
  // wait for the collective and returns, so the host runs ahead; a timeout
  // would block the host until the collective finished on the GPU
  // (ProcessGroupNCCL.cpp, synchronizeInternal), a synchronization per
  // bucket.
  //
  // NCCL, Wait::Host (the small agreements the host reads anyway: the
  // per-step one, the figures, the start's broadcast): WorkNCCL::wait with
  // the group's timeout blocks the host until the collective finished, or
  // throws DistBackendError (after aborting the communicator) once it is
  // older than the timeout or failed. guarded() turns that into the error
  // naming the ranks. Without it (a timeout-free wait and a blocking copy
  // of the result), the host sat in cudaStreamSynchronize behind the
  // collective a dead rank never joins until NCCL's watchdog took the
  // process down with its own message: the watchdog's timeout is the
  // group's plus a margin (nccl_watchdog_timeout) and it is told to abort
  // the communicator but not the process (nccl_backend.cpp), so this wait
  // is the one that reports.
  enum class Wait { Stream, Host };
  void wait(const c10::intrusive_ptr<c10d::Work>& work, Wait how) {
    if (options.backend == Backend::Nccl && how == Wait::Stream) {
      work->wait();
    } else {
      work->wait(options.timeout);
    }
  }

  // A small host value as the backend's tensor. NCCL: filled on the device
  // (a kernel argument, no copy from pageable memory, which would wait for
  // the current stream: behind the gradient buckets a dead rank never
  // joins).
  at::Tensor values_for_backend(const std::vector<double>& values) const {
    if (options.backend != Backend::Nccl) {
      return at::tensor(values, at::kDouble);
    }
    at::Tensor t = at::empty(
        {static_cast<std::int64_t>(values.size())},
        at::TensorOptions().dtype(at::kDouble).device(at::kCUDA));
    for (std::size_t i = 0; i < values.size(); ++i) {
      t.select(0, static_cast<std::int64_t>(i)).fill_(values[i]);
    }
    return t;
  }
  at::Tensor value_for_backend(std::int64_t value) const {
    return options.backend == Backend::Nccl
        ? at::full(
              {1},
              value,
              at::TensorOptions().dtype(at::kLong).device(at::kCUDA))
        : at::tensor({value}, at::kLong);
  }

  // Starts the collective `launch` returns (guarded) and returns its wait
  // (guarded, Wait::Stream): what every start_* collective hands back.
  template <typename F>
  std::function<void()> started(const std::string& phase, F&& launch) {
    c10::intrusive_ptr<c10d::Work> work;
    guarded(phase, [&] { work = launch(); });
    return [this, work, phase] {
      guarded(phase, [&] { wait(work, Wait::Stream); });
    };
  }
};

std::chrono::milliseconds nccl_watchdog_timeout(
    std::chrono::milliseconds timeout) {
  return timeout +
      std::max<std::chrono::milliseconds>(
             std::chrono::seconds(30), timeout / 10);
}

ProcessGroup::ProcessGroup() : impl_(std::make_unique<Impl>()) {}
ProcessGroup::~ProcessGroup() = default;

std::shared_ptr<ProcessGroup> ProcessGroup::create(
    const DistEnv& env,
    const GroupOptions& options) {
  std::shared_ptr<ProcessGroup> g(new ProcessGroup());
  Impl& m = *g->impl_;
  m.rank = env.rank;
  m.size = env.world_size;
  m.options = options;
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(env.master_port);
    so.isServer = env.rank == 0;
    so.numWorkers = static_cast<std::size_t>(env.world_size);
    so.waitWorkers = true;
    so.timeout = options.timeout;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
    m.store = c10::make_intrusive<c10d::PrefixStore>("hotloop", tcp);
    // Its own connection, so that publishing never waits behind a
    // collective library's use of the store.
    // A short timeout: a master that hangs must not hold the thread (and
    // this process's exit) for the whole --dist-timeout.
    auto status_store = tcp->clone();
    status_store->setTimeout(std::chrono::seconds(5));
    m.status = std::make_shared<RankStatus>(
        env.rank,
        c10::make_intrusive<c10d::PrefixStore>("hotloop", status_store),
        env.status_file);
    m.master_addr = env.master_addr;
    m.backend = make_backend(
        m.store, env.rank, env.world_size, env.master_addr, options);
  } catch (const c10::Error& e) {
    throw EnvError(
        fmt::format(
            "rank {}: cannot join the job at {}:{} ({} ranks): {}",
            env.rank,
            env.master_addr,
            env.master_port,
            env.world_size,
            first_line(e.what())),
        "every rank must start within --dist-timeout and reach MASTER_ADDR:MASTER_PORT; check that the port is free on the master");
  }
  return g;
}

std::shared_ptr<ProcessGroup> ProcessGroup::sibling(
    const std::string& purpose) {
  Impl& m = *impl_;
  if (const auto it = m.siblings.find(purpose); it != m.siblings.end()) {
    return it->second;
  }
  std::shared_ptr<ProcessGroup> g(new ProcessGroup());
  Impl& s = *g->impl_;
  s.rank = m.rank;
  s.size = m.size;
  s.master_addr = m.master_addr;
  s.options = m.options;
  s.status = m.status;
  s.store = c10::make_intrusive<c10d::PrefixStore>(purpose, m.store);
  m.guarded(purpose + " group", [&] {
    s.backend = make_backend(s.store, s.rank, s.size, s.master_addr, s.options);
  });
  m.siblings.emplace(purpose, g);
  return g;
}

int ProcessGroup::rank() const {
  return impl_->rank;
}

int ProcessGroup::size() const {
  return impl_->size;
}

const GroupOptions& ProcessGroup::options() const {
  return impl_->options;
}

void ProcessGroup::broadcast(
    std::vector<at::Tensor>& tensors,
    const std::string& phase) {
  impl_->guarded(phase, [&] {
    for (auto& t : tensors) {
      std::vector<at::Tensor> one = {t};
      impl_->wait(
          impl_->backend->broadcast(one, c10d::BroadcastOptions{}),
          Impl::Wait::Host);
    }
  });
}

std::function<void()> ProcessGroup::start_allreduce_sum(
    at::Tensor tensor,
    const std::string& phase) {
  std::vector<at::Tensor> t = {std::move(tensor)};
  return impl_->started(phase, [&] {
    return impl_->backend->allreduce(t, c10d::AllreduceOptions{});
  });
}

std::function<void()> ProcessGroup::start_reduce_scatter_sum(
    at::Tensor input,
    at::Tensor output,
    const std::string& phase) {
  return impl_->started(phase, [&] {
    return impl_->backend->_reduce_scatter_base(
        output, input, c10d::ReduceScatterOptions{});
  });
}

std::function<void()> ProcessGroup::start_allgather(
    at::Tensor input,
    at::Tensor output,
    const std::string& phase) {
  return impl_->started(phase, [&] {
    return impl_->backend->_allgather_base(
        output, input, c10d::AllgatherOptions{});
  });
}

void ProcessGroup::allreduce_sum_(
    at::Tensor& tensor,
    const std::string& phase) {
  start_allreduce_sum(tensor, phase)();
}

std::int64_t ProcessGroup::allreduce_max(
    std::int64_t value,
    const std::string& phase) {
  std::vector<at::Tensor> t = {impl_->value_for_backend(value)};
  impl_->guarded(phase, [&] {
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::MAX;
    impl_->wait(impl_->backend->allreduce(t, o), Impl::Wait::Host);
  });
  return t[0].cpu().item<std::int64_t>();
}

std::vector<double> ProcessGroup::allreduce_sum(
    std::vector<double> values,
    const std::string& phase) {
  std::vector<at::Tensor> t = {impl_->values_for_backend(values)};
  impl_->guarded(phase, [&] {
    impl_->wait(
        impl_->backend->allreduce(t, c10d::AllreduceOptions{}),
        Impl::Wait::Host);
  });
  const at::Tensor r = t[0].cpu().contiguous();
  const double* p = r.data_ptr<double>();
  return {p, p + r.numel()};
}

void ProcessGroup::barrier(const std::string& phase) {
  allreduce_max(0, phase);
}

void ProcessGroup::set_status(std::int64_t step, Phase phase) {
  impl_->status->set(step, phase);
}

} // namespace hotloop::parallel
