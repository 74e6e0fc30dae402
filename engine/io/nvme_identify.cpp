#include "io/nvme_identify.h"

#include <algorithm>
#include <cstring>

namespace graid::nvme {
namespace {

// Identify Controller fields (NVMe base specification, figure "Identify Controller Data
// Structure").
constexpr std::size_t kCtrlSerial = 4, kCtrlSerialLen = 20;
constexpr std::size_t kCtrlModel = 24, kCtrlModelLen = 40;
constexpr std::size_t kCtrlFirmware = 64, kCtrlFirmwareLen = 8;
constexpr std::size_t kCtrlMdts = 77;
constexpr std::size_t kCtrlCrdt = 128;  // CRDT1, CRDT2, CRDT3: 16 bits each (NVMe 1.4 and later)
constexpr std::size_t kCtrlOncs = 520;
constexpr std::size_t kCtrlVwc = 525;
// Identify Namespace fields.
constexpr std::size_t kNsNsze = 0;
constexpr std::size_t kNsNsfeat = 24;
constexpr std::size_t kNsNlbaf = 25;
constexpr std::size_t kNsFlbas = 26;
constexpr std::size_t kNsDps = 29;
constexpr std::size_t kNsDlfeat = 33;
constexpr std::size_t kNsLbaf = 128;  // 4 bytes each: MS (15:0), LBADS (23:16), RP (25:24)

std::uint8_t u8(std::span<const std::byte> p, std::size_t at) {
  return static_cast<std::uint8_t>(p[at]);
}
std::uint16_t u16(std::span<const std::byte> p, std::size_t at) {
  return static_cast<std::uint16_t>(u8(p, at) | u8(p, at + 1) << 8);
}
std::uint64_t u64(std::span<const std::byte> p, std::size_t at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i)
    v |= std::uint64_t{u8(p, at + i)} << (8 * i);
  return v;
}
std::string text(std::span<const std::byte> p, std::size_t at, std::size_t len) {
  std::string s(reinterpret_cast<const char*>(p.data() + at), len);
  s.erase(std::find(s.begin(), s.end(), '\0'), s.end());
  const auto last = s.find_last_not_of(' ');
  s.resize(last == std::string::npos ? 0 : last + 1);
  return s;
}

}  // namespace

Result<NamespaceInfo> parse_identify_namespace(std::span<const std::byte> page,
                                               const std::string& path) {
  if (page.size() < kIdentifyBytes) {
    return make_error(Errc::kInternal, "{}: short Identify Namespace page", path);
  }
  NamespaceInfo info;
  info.blocks = u64(page, kNsNsze);
  if (info.blocks == 0) {
    return make_error(Errc::kNotFound,
                      "{}: the namespace is inactive (Identify Namespace says 0 "
                      "blocks)",
                      path);
  }
  const std::uint8_t flbas = u8(page, kNsFlbas);
  const unsigned formats = u8(page, kNsNlbaf) + 1U;  // 0's based
  // FLBAS bits 3:0 are the format index, bits 6:5 its high bits when there are more than 16.
  unsigned index = flbas & 0xfU;
  if (formats > 16) index |= ((flbas >> 5) & 3U) << 4;
  if (index >= formats || index >= 64) {
    return make_error(Errc::kUnsupported, "{}: LBA format {} is not among the {} it lists", path,
                      index, formats);
  }
  info.format_index = static_cast<std::uint8_t>(index);
  const std::size_t lbaf = kNsLbaf + 4 * index;
  const std::uint16_t metadata = u16(page, lbaf);
  const std::uint8_t lbads = u8(page, lbaf + 2);
  const unsigned pi_type = u8(page, kNsDps) & 7U;
  if (metadata != 0 || pi_type != 0) {
    return make_error(
        Errc::kUnsupported,
        "{}: LBA format {} carries {} bytes of metadata per block{}; graid cannot use "
        "metadata or protection information through passthrough: reformat the "
        "namespace to a format without metadata (nvme id-ns -H lists them; nvme "
        "format --lbaf=N destroys its data)",
        path, index, metadata,
        pi_type != 0 ? fmt::format(" with protection information type {}", pi_type)
                     : std::string(flbas & 0x10U ? " (extended LBA)" : ""));
  }
  if (lbads < 9 || lbads > 12) {
    return make_error(Errc::kUnsupported,
                      "{}: LBA format {} has {}-byte blocks; graid takes 512 to 4096 bytes", path,
                      index, lbads < 32 ? (std::uint64_t{1} << lbads) : 0);
  }
  info.lba_shift = lbads;
  info.nsfeat = u8(page, kNsNsfeat);
  info.dlfeat = u8(page, kNsDlfeat);
  return info;
}

ControllerInfo parse_identify_controller(std::span<const std::byte> page) {
  ControllerInfo info;
  if (page.size() < kIdentifyBytes) return info;
  info.serial = text(page, kCtrlSerial, kCtrlSerialLen);
  info.model = text(page, kCtrlModel, kCtrlModelLen);
  info.firmware = text(page, kCtrlFirmware, kCtrlFirmwareLen);
  info.mdts = u8(page, kCtrlMdts);
  info.oncs = u16(page, kCtrlOncs);
  info.volatile_write_cache = (u8(page, kCtrlVwc) & 1U) != 0;
  for (std::size_t i = 0; i < info.crdt.size(); ++i)
    info.crdt[i] = u16(page, kCtrlCrdt + 2 * i);
  return info;
}

Limits derive_limits(std::uint32_t nsid, const NamespaceInfo& ns, const ControllerInfo& ctrl,
                     const QueueLimits& queue) {
  Limits l;
  l.nsid = nsid;
  l.lba_shift = ns.lba_shift;
  std::uint64_t transfer = kDefaultMaxTransfer;
  if (queue.max_hw_sectors_kb != 0) {
    transfer = std::uint64_t{queue.max_hw_sectors_kb} << 10;
  } else if (ctrl.mdts != 0) {
    transfer = ctrl.mdts >= 20
                   ? kMaxMdtsTransfer
                   : std::min<std::uint64_t>(std::uint64_t{kPage} << ctrl.mdts, kMaxMdtsTransfer);
  }
  const std::uint64_t lba = l.lba_size();
  transfer = std::min<std::uint64_t>(transfer, std::uint64_t{1} << 30);
  transfer = std::max(transfer - transfer % lba, lba);
  l.max_transfer_bytes = static_cast<std::uint32_t>(transfer);
  l.max_segments = queue.max_segments;
  l.crdt = ctrl.crdt;

  const bool kernel_zeroes = !queue.write_zeroes_max_bytes || *queue.write_zeroes_max_bytes != 0;
  if (ctrl.has_write_zeroes() && kernel_zeroes) {
    std::uint64_t blocks = kMaxBlocksPerCommand;
    if (queue.write_zeroes_max_bytes) {
      blocks = std::min(blocks,
                        std::max<std::uint64_t>(*queue.write_zeroes_max_bytes >> l.lba_shift, 1));
    }
    l.max_zeroes_blocks = static_cast<std::uint32_t>(blocks);
  }
  // A deallocated block that reads as an error (DULBE) is not a zeroed block: a stripe read after
  // it would fail as a media error. DEAC deallocates only where DLFEAT says reads return zeroes
  // (the base specification; the kernel sets DEAC on the same condition).
  const bool dealloc_reads_zeroes = ns.deallocated_reads_zeroes();
  const bool write_zeroes_deallocates = dealloc_reads_zeroes && (ns.dlfeat & 0x8U) != 0;
  if (l.write_zeroes()) {
    l.discard = write_zeroes_deallocates ? DiscardMethod::kWriteZeroesDeallocate
                                         : DiscardMethod::kWriteZeroes;
  } else if (ctrl.has_dataset_management() && dealloc_reads_zeroes) {
    l.discard = DiscardMethod::kDeallocate;
  }
  return l;
}

}  // namespace graid::nvme
