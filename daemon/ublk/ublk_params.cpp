#include "ublk/ublk_params.h"

#include <algorithm>
#include <bit>

namespace graid::ublk {

std::uint64_t floor_pow2(std::uint64_t v) noexcept {
  return v == 0 ? 0 : std::bit_floor(v);
}

unsigned log2_exact(std::uint64_t pow2) noexcept {
  return static_cast<unsigned>(std::countr_zero(pow2));
}

CopyChoice choose_copy(CopyMode mode, std::uint64_t driver_features, bool parity) noexcept {
  constexpr std::uint64_t kZeroCopyFlags = kFlagZeroCopy | kFlagAutoBufReg | kFlagUserCopy;
  const bool can_zero = (driver_features & kZeroCopyFlags) == kZeroCopyFlags;
  switch (mode) {
    case CopyMode::kKernel:
      return {};
    case CopyMode::kUser:
      return {.user_copy = true};
    case CopyMode::kZero:
      return {.user_copy = true, .zero_copy = can_zero};
    case CopyMode::kAuto:
      if (can_zero && !parity) return {.user_copy = true, .zero_copy = true};
      return {};
  }
  return {};
}

namespace {

std::uint32_t ceil_pow2(std::uint64_t v) {
  return static_cast<std::uint32_t>(std::bit_ceil(v));
}

}  // namespace

Result<UblkLayout> plan_ublk(const UblkShape& shape, const UblkLimits& limits) {
  const std::uint32_t lbs = shape.logical_block;
  if (lbs < 512 || lbs > 4096 || !std::has_single_bit(lbs))
    return make_error(Errc::kInvalidArgument, "logical block size {} is not 512..4096", lbs);
  if (shape.size_bytes == 0 || shape.size_bytes % lbs != 0)
    return make_error(Errc::kInvalidArgument,
                      "device size {} is not a non-zero multiple of the {}-byte block",
                      shape.size_bytes, lbs);
  if (shape.strip_bytes < 4096 || !std::has_single_bit(shape.strip_bytes) || shape.data_strips == 0)
    return make_error(Errc::kInvalidArgument, "strip {} x {} is not a RAID geometry",
                      shape.strip_bytes, shape.data_strips);
  if (limits.queues == 0 || limits.queues > kMaxQueueDepth)
    return make_error(Errc::kInvalidArgument, "{} queues: must be 1..4096", limits.queues);
  if (limits.max_depth == 0 || limits.max_depth > kMaxQueueDepth)
    return make_error(Errc::kInvalidArgument, "queue depth {}: must be 1..4096", limits.max_depth);

  const std::uint64_t stripe = std::uint64_t{shape.strip_bytes} * shape.data_strips;
  // A full stripe fits one request; beyond 32 MiB (a 1 MiB strip x 32+) it cannot.
  std::uint32_t want_io = std::clamp<std::uint64_t>(ceil_pow2(std::max<std::uint64_t>(stripe, 1)),
                                                    1u << 20, kMaxMaxIoBytes);
  const std::uint32_t floor_io =
      std::clamp<std::uint64_t>(ceil_pow2(stripe), kMinMaxIoBytes, kMaxMaxIoBytes);
  std::uint32_t depth = limits.max_depth;
  std::uint32_t io = want_io;
  if (!limits.user_copy) {
    auto fits = [&](std::uint32_t d, std::uint32_t b) {
      return std::uint64_t{limits.queues} * d * b <= limits.memory_budget;
    };
    const std::uint32_t min_depth = std::min<std::uint32_t>(16, limits.max_depth);
    while (!fits(depth, io) && depth / 2 >= min_depth)
      depth /= 2;
    while (!fits(depth, io) && io / 2 >= floor_io)
      io /= 2;
    while (!fits(depth, io) && depth > 1)
      depth = std::max<std::uint32_t>(1, depth / 2);
    if (!fits(depth, io))
      return make_error(Errc::kNoSpace,
                        "a ublk device with {} queues needs at least {} MiB of request buffers "
                        "(one {} KiB request per queue); the budget is {} MiB",
                        limits.queues, (std::uint64_t{limits.queues} * io) >> 20, io >> 10,
                        limits.memory_budget >> 20);
  }

  UblkLayout out;
  out.queues = static_cast<std::uint16_t>(limits.queues);
  out.depth = static_cast<std::uint16_t>(depth);
  out.max_io_bytes = io;
  out.buffer_bytes = limits.user_copy ? 0 : std::uint64_t{limits.queues} * depth * io;

  Params& p = out.params;
  p.len = sizeof(Params);
  p.types = kParamBasic;
  ParamBasic& b = p.basic;
  b.attrs = kAttrVolatileCache | kAttrFua | (shape.read_only ? kAttrReadOnly : 0);
  b.logical_bs_shift = static_cast<std::uint8_t>(log2_exact(lbs));
  b.physical_bs_shift = 12;
  b.io_min_shift = static_cast<std::uint8_t>(log2_exact(shape.strip_bytes));
  b.io_opt_shift = static_cast<std::uint8_t>(log2_exact(floor_pow2(stripe)));
  if (!std::has_single_bit(stripe)) b.io_opt_shift = b.io_min_shift;
  b.max_sectors = io >> 9;
  b.chunk_sectors = shape.striped ? shape.strip_bytes >> 9 : 0;
  b.dev_sectors = shape.size_bytes >> 9;
  b.virt_boundary_mask = 0;
  if (shape.discard || shape.write_zeroes) {
    p.types |= kParamDiscard;
    ParamDiscard& d = p.discard;
    d.discard_alignment = 0;
    d.discard_granularity = 4096;
    d.max_discard_sectors = shape.discard ? (io >> 9) : 0;
    d.max_write_zeroes_sectors = shape.write_zeroes ? (io >> 9) : 0;
    d.max_discard_segments = 1;
  }
  return out;
}

}  // namespace graid::ublk
