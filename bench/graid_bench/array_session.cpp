#include "array_session.h"

#include <fmt/format.h>

#include <utility>

#include "backend.h"
#include "graid/array.h"
#include "graid/host_memory.h"
#include "graid/member.h"
#include "graid/parity.h"
#include "graid/parity_worker.h"
#include "kernels/batcher.h"
#include "kernels/batcher_parity.h"
#include "kernels/cuda_backend.h"

namespace graid::bench {

struct ArraySession::Impl {
  // Declared before the array so they are destroyed after it: the array holds raw pointers.
  std::unique_ptr<ParityBackend> parity;  // the backend, or with the batcher its cpu fallback
  std::unique_ptr<ParityBackend> device_backend;  // with the batcher: the backend it feeds
  std::unique_ptr<kernels::DeviceQueue> device;
  std::unique_ptr<kernels::Batcher> batcher;
  std::unique_ptr<kernels::BatcherParity> batcher_parity;
  std::unique_ptr<ParityWorker> parity_worker;
  std::unique_ptr<Array> array;
  bool stopped = false;

  // The backend the parity work runs on: the batcher's device, or the backend called directly.
  ParityBackend* worker() const { return device_backend ? device_backend.get() : parity.get(); }
  const CudaBackend* cuda() const { return dynamic_cast<const CudaBackend*>(worker()); }
};

ArraySession::ArraySession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ArraySession::~ArraySession() {
  if (impl_ && impl_->array && !impl_->stopped) {
    // Best effort on early exits; the normal path calls stop() and reports its error.
    (void)impl_->array->stop();
  }
}

Result<std::unique_ptr<ArraySession>> ArraySession::create(const ArraySpec& spec) {
  auto impl = std::make_unique<Impl>();
  if (spec.batcher) {
    auto device_backend = open_backend(spec.backend, /*for_batcher=*/true);
    if (!device_backend.is_ok()) return device_backend.status();
    impl->device_backend = std::move(*device_backend);
    auto cpu = make_parity_backend("cpu");
    if (!cpu.is_ok()) return cpu.status();
    impl->parity = std::move(*cpu);
    impl->device = kernels::make_backend_device_queue(*impl->device_backend, 2);
    impl->batcher = std::make_unique<kernels::Batcher>(*impl->device, *impl->parity);
    impl->batcher_parity = std::make_unique<kernels::BatcherParity>(*impl->batcher);
  } else {
    auto parity = open_backend(spec.backend);
    if (!parity.is_ok()) return parity.status();
    impl->parity = std::move(*parity);
  }

  std::vector<std::unique_ptr<MemberDevice>> members;
  for (const std::string& path : spec.paths) {
    // The member files exist already: MemberSet made and zeroed them before the raw baseline,
    // which runs before the array exists. Block devices are opened exclusively (the default).
    OpenOptions open;
    open.create = false;
    auto member = open_member(path, open);
    if (!member.is_ok()) return member.status();
    members.push_back(std::move(*member));
  }

  CreateOptions create;
  create.level = spec.level;
  create.strip_bytes = spec.strip_bytes;
  create.name = "graid-bench";
  create.assume_clean = true;
  create.settings.journal_policy = spec.journal;
  ArrayOptions options;
  options.parity = impl->parity.get();
  options.async_parity = impl->batcher_parity.get();
  if (spec.parity_workers > 0) {
    impl->parity_worker = std::make_unique<ParityWorker>(*impl->parity, spec.parity_workers);
    options.async_parity = impl->parity_worker.get();
  }
  // A backend that pins host memory (cuda) gets the engine's staging slabs, once each.
  options.host_memory = dynamic_cast<HostMemoryRegistry*>(impl->worker());
  auto array = Array::create(std::move(members), create, options, spec.force);
  if (!array.is_ok()) return array.status();
  impl->array = std::move(*array);
  return std::make_unique<ArraySession>(std::move(impl));
}

Array& ArraySession::array() noexcept {
  return *impl_->array;
}

std::uint64_t ArraySession::data_offset() const noexcept {
  return impl_->array->member_data_offset();
}

std::uint64_t ArraySession::capacity() const noexcept {
  return impl_->array->capacity();
}

std::string ArraySession::backend_name() const {
  if (impl_->batcher) return fmt::format("{}+batcher", impl_->device_backend->name());
  if (impl_->parity_worker) return fmt::format("{}+worker", impl_->parity->name());
  return std::string(impl_->parity->name());
}

bool ArraySession::parity_device_failed() const {
  if (impl_->batcher && impl_->batcher->device_dead()) return true;
  const CudaBackend* cuda = impl_->cuda();
  return cuda != nullptr && cuda->dead();
}

std::string ArraySession::parity_device() const {
  const CudaBackend* cuda = impl_->cuda();
  if (cuda == nullptr) return "";
  const CudaDeviceInfo& d = cuda->device_info();
  return fmt::format("{} ({}, {} SMs, {} MiB, driver {})", d.name, d.pci_bus_id, d.sm_count,
                     d.total_memory >> 20, d.driver_version);
}

Status ArraySession::stop() {
  impl_->stopped = true;
  return impl_->array->stop();
}

}  // namespace graid::bench
