#include "graidd/pd_probe.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fstream>
#include <string>

namespace graid::daemon {
namespace {

std::string read_trimmed(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!in || !std::getline(in, text)) return {};
  const auto first = text.find_first_not_of(" \t");
  const auto last = text.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  return text.substr(first, last - first + 1);
}

}  // namespace

PdInfo probe_pd(const MemberDevice& device) {
  PdInfo info;
  const DeviceIdentity id = device.identity();
  const bool passthrough = device.io_mode() == MemberIoMode::kPassthrough;
  info.kind = passthrough ? "nvme" : id.known && id.block ? "block" : "file";
  info.size = device.size();
  info.logical_block_size = device.logical_block_size();
  info.direct_io = device.direct_io();
  info.io_mode = passthrough ? "passthrough" : info.direct_io ? "direct" : "buffered";
  if (info.kind == "file") {
    info.model = "file";
    return info;
  }
  // /sys/dev/block/MAJ:MIN/device is the disk's device: for NVMe the namespace's controller
  // (model, serial, firmware_rev), for SCSI/virtio the disk (model, vendor, rev). An NVMe generic
  // device's (/sys/dev/char/MAJ:MIN/device) is the same controller, or its subsystem with native
  // multipath, which has the same attributes.
  const auto dev = static_cast<dev_t>(id.dev);
  std::string base = std::string(passthrough ? "/sys/dev/char/" : "/sys/dev/block/") +
                     std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
  // A partition's attributes are its disk's.
  if (read_trimmed(base + "/partition").size() > 0) base += "/..";
  info.model = read_trimmed(base + "/device/model");
  info.serial = read_trimmed(base + "/device/serial");
  info.firmware = read_trimmed(base + "/device/firmware_rev");
  if (info.firmware.empty()) info.firmware = read_trimmed(base + "/device/rev");
  if (info.model.empty()) info.model = read_trimmed(base + "/device/name");
  return info;
}

}  // namespace graid::daemon
