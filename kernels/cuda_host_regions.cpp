#include "cuda_host_regions.h"

#include <algorithm>
#include <utility>

#include "cuda_util.h"

namespace graid::kernels {

Status HostRegions::add(std::span<std::byte> region, int device) {
  MutexLock lock(mu_);
  const Snapshot current = snapshot();
  const auto b = reinterpret_cast<std::uintptr_t>(region.data());
  const std::uintptr_t e = b + region.size();
  for (const HostRegion& r : *current) {
    if (b < r.end && r.begin < e) {
      return Status(Errc::kInvalidArgument, "region overlaps a registered region");
    }
  }
  cudaError_t err = cudaSetDevice(device);
  if (err == cudaSuccess) {
    err = cudaHostRegister(region.data(), region.size(),
                           cudaHostRegisterPortable | cudaHostRegisterMapped);
  }
  if (err != cudaSuccess) return cuda_status(err, "cudaHostRegister");
  void* dev = nullptr;
  err = cudaHostGetDevicePointer(&dev, region.data(), 0);
  if (err != cudaSuccess) {
    (void)cudaHostUnregister(region.data());
    return cuda_status(err, "cudaHostGetDevicePointer");
  }
  auto next = std::make_shared<Table>(*current);
  next->push_back(HostRegion{b, e, static_cast<std::uint8_t*>(dev)});
  std::sort(next->begin(), next->end(),
            [](const HostRegion& x, const HostRegion& y) { return x.begin < y.begin; });
  publish(std::move(next));
  return Status::ok();
}

bool HostRegions::remove(std::span<std::byte> region) {
  MutexLock lock(mu_);
  const Snapshot current = snapshot();
  const auto b = reinterpret_cast<std::uintptr_t>(region.data());
  auto next = std::make_shared<Table>(*current);
  auto it =
      std::find_if(next->begin(), next->end(), [b](const HostRegion& r) { return r.begin == b; });
  if (it == next->end()) return false;
  next->erase(it);
  publish(std::move(next));
  (void)cudaHostUnregister(region.data());
  return true;
}

void HostRegions::clear() {
  MutexLock lock(mu_);
  const Snapshot current = snapshot();
  publish(std::make_shared<const Table>());
  for (const HostRegion& r : *current)
    (void)cudaHostUnregister(reinterpret_cast<void*>(r.begin));
}

const HostRegion* HostRegions::find(const Table& table, const void* p, std::size_t len) {
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  auto it = std::upper_bound(table.begin(), table.end(), b,
                             [](std::uintptr_t v, const HostRegion& r) { return v < r.begin; });
  if (it == table.begin()) return nullptr;
  --it;
  return (b >= it->begin && b + len <= it->end) ? &*it : nullptr;
}

}  // namespace graid::kernels
