// What the passthrough member learns from the drive before its first I/O: Identify Namespace
// (size, LBA format, deallocate behaviour), Identify Controller (MDTS, optional commands, strings)
// and, when the namespace also has a block device, that device's queue limits from sysfs. Pure
// parsing and arithmetic (the ioctls and sysfs reads are in nvme_member.cpp), so every field
// offset is unit-tested. Internal to engine/io.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "graid/status.h"
#include "io/nvme_command.h"

namespace graid::nvme {

inline constexpr std::size_t kIdentifyBytes = 4096;
// Identify CNS values (cdw10).
inline constexpr std::uint32_t kCnsNamespace = 0x00;
inline constexpr std::uint32_t kCnsController = 0x01;
// Get Features (admin 0Ah): cdw10 = FID (bits 7:0) | SEL (10:8, 0: current value).
inline constexpr std::uint8_t kAdminGetFeatures = 0x0a;
inline constexpr std::uint32_t kFeatureErrorRecovery = 0x05;  // per namespace
// The transfer limit when neither sysfs nor MDTS gives one (MDTS 0 means "no limit", which the
// kernel still caps), and the most MDTS alone is trusted with (the kernel's own cap on NVMe
// transfers, NVME_MAX_KB_SZ, is 4 MiB on 6.1).
inline constexpr std::uint32_t kDefaultMaxTransfer = 128 << 10;
inline constexpr std::uint32_t kMaxMdtsTransfer = 4 << 20;

struct NamespaceInfo {
  std::uint64_t blocks = 0;  // NSZE
  std::uint32_t lba_shift = 9;
  std::uint8_t format_index = 0;  // FLBAS
  std::uint8_t nsfeat = 0;        // namespace features
  std::uint8_t dlfeat = 0;        // deallocate logical block features
  // DULBE in the namespace's Error Recovery feature (not in Identify: the opener sets it from
  // Get Features): reads of deallocated or unwritten blocks fail with status 2/87h instead of
  // returning what DLFEAT says.
  bool dulbe = false;

  // NSFEAT bit 2 (DAE): the namespace has the Deallocated or Unwritten Logical Block error,
  // which the Error Recovery feature's DULBE bit turns on. Without it DULBE cannot be on.
  bool has_deallocated_error() const noexcept { return (nsfeat & 0x4U) != 0; }
  // Whether a deallocated block reads as zeroes: DLFEAT bits 2:0 = 001b, and DULBE off.
  bool deallocated_reads_zeroes() const noexcept { return (dlfeat & 7U) == 1 && !dulbe; }
};

// DULBE (bit 16) of the Error Recovery feature's value (Get Features dword 0).
inline bool error_recovery_dulbe(std::uint32_t dword0) noexcept {
  return (dword0 & (1U << 16)) != 0;
}

// Reads an Identify Namespace page (4096 bytes). Refuses, naming `path` and what to do, a
// namespace graid cannot use: an inactive one (no blocks, kNotFound), an LBA format with metadata
// (separate or extended, kUnsupported: commands would need a metadata buffer) or protection
// information, and LBA sizes other than 512..4096 bytes (kUnsupported).
Result<NamespaceInfo> parse_identify_namespace(std::span<const std::byte> page,
                                               const std::string& path);

struct ControllerInfo {
  std::uint8_t mdts = 0;   // max data transfer size: 2^mdts units of CAP.MPSMIN; 0 = no limit
  std::uint16_t oncs = 0;  // optional NVM command support
  bool volatile_write_cache = false;
  std::array<std::uint16_t, 3> crdt{};  // Command Retry Delay Times 1..3, in 100 ms
  std::string model, serial, firmware;  // trailing spaces trimmed

  bool has_write_zeroes() const noexcept { return (oncs & (1U << 3)) != 0; }
  bool has_dataset_management() const noexcept { return (oncs & (1U << 2)) != 0; }
};
ControllerInfo parse_identify_controller(std::span<const std::byte> page);

// The namespace's block device queue limits (/sys/block/nvmeXnY/queue), where there is one.
struct QueueLimits {
  std::uint32_t max_hw_sectors_kb = 0;                  // 0: unknown
  std::uint32_t max_segments = 0;                       // 0: unknown
  std::optional<std::uint64_t> write_zeroes_max_bytes;  // 0: the kernel found none
};

// The command limits for the namespace: the transfer size from sysfs's max_hw_sectors_kb (what
// the kernel accepts, MDTS in the controller's real page size), else MDTS x 4 KiB (CAP.MPSMIN,
// the unit of MDTS, cannot be read through /dev/ng; 4 KiB is the smallest and by far the usual
// value, so this errs small) capped at kMaxMdtsTransfer, else kDefaultMaxTransfer; Write Zeroes
// when ONCS has it (and sysfs does not say the kernel turned it off), capped by sysfs; discard as
// in DiscardMethod's order of preference, deallocating (DEAC, or Dataset Management) only where
// deallocated blocks read as zeroes (NamespaceInfo::deallocated_reads_zeroes: DLFEAT, and DULBE
// off); the controller's retry delays (CRDT) as they are.
Limits derive_limits(std::uint32_t nsid, const NamespaceInfo& ns, const ControllerInfo& ctrl,
                     const QueueLimits& queue);

}  // namespace graid::nvme
