#include "cuda_host_regions.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include "cuda_util.h"

namespace graid::kernels {

HostRegion::HostRegion(HostRegion&& o) noexcept
    : begin(std::exchange(o.begin, 0)), end(o.end), device_base(o.device_base) {}

HostRegion& HostRegion::operator=(HostRegion&& o) noexcept {
  std::swap(begin, o.begin);
  std::swap(end, o.end);
  std::swap(device_base, o.device_base);
  return *this;
}

HostRegion::~HostRegion() {
  if (begin != 0) (void)cudaHostUnregister(reinterpret_cast<void*>(begin));
}

Status HostRegions::add(std::span<std::byte> region, int device) {
  std::unique_lock lock(mu_);
  const auto b = reinterpret_cast<std::uintptr_t>(region.data());
  const std::uintptr_t e = b + region.size();
  for (const HostRegion& r : regions_) {
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
  HostRegion r;
  r.begin = b;
  r.end = e;
  r.device_base = static_cast<std::uint8_t*>(dev);
  regions_.push_back(std::move(r));
  std::sort(regions_.begin(), regions_.end(),
            [](const HostRegion& x, const HostRegion& y) { return x.begin < y.begin; });
  return Status::ok();
}

bool HostRegions::remove(std::span<std::byte> region) {
  std::unique_lock lock(mu_);
  const auto b = reinterpret_cast<std::uintptr_t>(region.data());
  for (auto it = regions_.begin(); it != regions_.end(); ++it) {
    if (it->begin == b) {
      regions_.erase(it);  // ~HostRegion unregisters
      return true;
    }
  }
  return false;
}

void HostRegions::clear() {
  std::unique_lock lock(mu_);
  regions_.clear();
}

const HostRegion* HostRegions::find(const void* p, std::size_t len) const {
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  auto it = std::upper_bound(regions_.begin(), regions_.end(), b,
                             [](std::uintptr_t v, const HostRegion& r) { return v < r.begin; });
  if (it == regions_.begin()) return nullptr;
  --it;
  return (b >= it->begin && b + len <= it->end) ? &*it : nullptr;
}

}  // namespace graid::kernels
