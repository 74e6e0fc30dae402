#include "graidd/device_signatures.h"

#include <blkid/blkid.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>

#include "graid/member.h"

namespace graid::daemon {

namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

class Probe {
 public:
  Probe() : pr_(blkid_new_probe()) {}
  ~Probe() {
    if (pr_) blkid_free_probe(pr_);
  }
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;
  blkid_probe get() const noexcept { return pr_; }

 private:
  blkid_probe pr_;
};

// Loops give up after this many signatures (no device holds that many; a wipe that does not
// take would otherwise loop for ever).
constexpr int kMaxSignatures = 64;

Result<int> open_for(const std::string& path, bool write) {
  const int fd = ::open(path.c_str(), (write ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) {
    return make_error(Errc::kIoError, "{}: opening it to look for signatures: {}", path,
                      std::strerror(errno));
  }
  return fd;
}

struct Extent {
  std::uint64_t size = 0;
  std::uint32_t logical_block = 512;
};

Result<Extent> extent_of(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return make_error(Errc::kIoError, "{}: fstat: {}", path, std::strerror(errno));
  Extent e;
  if (S_ISBLK(st.st_mode)) {
    std::uint64_t bytes = 0;
    int block = 512;
    if (::ioctl(fd, BLKGETSIZE64, &bytes) != 0 || ::ioctl(fd, BLKSSZGET, &block) != 0)
      return make_error(Errc::kIoError, "{}: its size: {}", path, std::strerror(errno));
    e.size = bytes;
    e.logical_block = static_cast<std::uint32_t>(block);
  } else {
    e.size = static_cast<std::uint64_t>(st.st_size);
  }
  return e;
}

Status set_up(blkid_probe pr, int fd, const std::string& path) {
  if (pr == nullptr) return make_error(Errc::kIoError, "{}: libblkid: out of memory", path);
  if (blkid_probe_set_device(pr, fd, 0, 0) != 0)
    return make_error(Errc::kIoError, "{}: libblkid cannot read it", path);
  blkid_probe_enable_superblocks(pr, 1);
  blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_MAGIC | BLKID_SUBLKS_TYPE |
                                            BLKID_SUBLKS_LABEL | BLKID_SUBLKS_UUID |
                                            BLKID_SUBLKS_USAGE | BLKID_SUBLKS_BADCSUM);
  blkid_probe_enable_partitions(pr, 1);
  blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC);
  return Status::ok();
}

std::string value(blkid_probe pr, const char* name) {
  const char* v = nullptr;
  if (blkid_probe_lookup_value(pr, name, &v, nullptr) != 0 || v == nullptr) return {};
  return v;
}

// The signature the last successful blkid_do_probe() found.
DeviceSignature current(blkid_probe pr) {
  DeviceSignature s;
  s.type = value(pr, "TYPE");
  std::string offset;
  if (!s.type.empty()) {
    s.usage = value(pr, "USAGE");
    s.label = value(pr, "LABEL");
    s.uuid = value(pr, "UUID");
    offset = value(pr, "SBMAGIC_OFFSET");
  } else {
    s.type = value(pr, "PTTYPE");
    s.usage = "partition table";
    offset = value(pr, "PTMAGIC_OFFSET");
  }
  if (s.type.empty()) s.type = "unknown";
  if (s.usage.empty()) s.usage = "other";
  s.offset = offset.empty() ? 0 : std::strtoull(offset.c_str(), nullptr, 10);
  return s;
}

constexpr std::array<char, 8> kGptMagic = {'E', 'F', 'I', ' ', 'P', 'A', 'R', 'T'};

// A GPT backup header in the device's last logical block ("EFI PART" whose own-LBA field names
// that block). libblkid looks for it only behind a protective MBR, so a disk whose start was
// overwritten still has a partition table that gdisk or a kernel with gpt=force would restore.
std::optional<DeviceSignature> gpt_backup(int fd, const Extent& e) {
  for (const std::uint64_t block :
       {std::uint64_t{e.logical_block}, std::uint64_t{512}, std::uint64_t{4096}}) {
    if (e.size < 2 * block || e.size % block != 0) continue;
    const std::uint64_t at = e.size - block;
    std::array<unsigned char, 32> head{};
    if (::pread(fd, head.data(), head.size(), static_cast<off_t>(at)) !=
        static_cast<ssize_t>(head.size()))
      continue;
    if (std::memcmp(head.data(), kGptMagic.data(), kGptMagic.size()) != 0) continue;
    std::uint64_t my_lba = 0;
    for (int i = 7; i >= 0; --i)
      my_lba = my_lba << 8 | head[24 + i];
    if (my_lba != at / block) continue;
    return DeviceSignature{"gpt", "partition table", "", "", at};
  }
  return std::nullopt;
}

bool is_gpt_at(std::span<const DeviceSignature> found, std::uint64_t offset) {
  for (const auto& s : found)
    if (s.type == "gpt" && s.offset == offset) return true;
  return false;
}

std::string noun(const DeviceSignature& s) {
  const bool vowel = !s.type.empty() && std::strchr("aeiouAEIOU", s.type[0]) != nullptr;
  const std::string a = vowel ? "an" : "a";
  if (s.usage == "filesystem") return fmt::format("{} {} filesystem", a, s.type);
  if (s.usage == "partition table") return fmt::format("{} {} partition table", a, s.type);
  if (s.usage == "raid") return fmt::format("RAID metadata ({})", s.type);
  if (s.usage == "crypto") return fmt::format("encryption metadata ({})", s.type);
  if (s.type == "swap") return "swap space";
  return fmt::format("{} {} signature", a, s.type);
}

}  // namespace

Result<std::string> signature_probe_path(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) {
    auto sibling = nvme_sibling_path(path);
    if (!sibling.is_ok())
      return make_error(Errc::kInvalidArgument, "{}: its block device, to look for signatures: {}",
                        path, sibling.status().message());
    return *sibling;
  }
  return path;
}

Result<std::vector<DeviceSignature>> probe_signatures(const std::string& path) {
  auto target = signature_probe_path(path);
  if (!target.is_ok()) return target.status();
  auto fd_or = open_for(*target, /*write=*/false);
  if (!fd_or.is_ok()) return fd_or.status();
  const Fd fd(*fd_or);
  auto extent = extent_of(fd.get(), *target);
  if (!extent.is_ok()) return extent.status();
  const Probe probe;
  GRAID_RETURN_IF_ERROR(set_up(probe.get(), fd.get(), *target));
  std::vector<DeviceSignature> found;
  for (int i = 0; i < kMaxSignatures; ++i) {
    const int rc = blkid_do_probe(probe.get());
    if (rc == 1) break;
    if (rc < 0) return make_error(Errc::kIoError, "{}: libblkid could not read it", *target);
    found.push_back(current(probe.get()));
  }
  if (auto backup = gpt_backup(fd.get(), *extent); backup && !is_gpt_at(found, backup->offset))
    found.push_back(*backup);
  return found;
}

std::string describe_signatures(const std::string& path, std::span<const DeviceSignature> found) {
  if (found.empty()) return {};
  std::string out = path + " holds ";
  for (std::size_t i = 0; i < found.size(); ++i) {
    const DeviceSignature& s = found[i];
    if (i > 0) out += i + 1 == found.size() ? " and " : ", ";
    out += noun(s) + " (";
    if (!s.label.empty()) out += fmt::format("label \"{}\", ", s.label);
    if (!s.uuid.empty()) out += fmt::format("UUID {}, ", s.uuid);
    out += fmt::format("at byte {})", s.offset);
  }
  return out;
}

Result<std::vector<DeviceSignature>> wipe_signatures(const std::string& path) {
  auto target = signature_probe_path(path);
  if (!target.is_ok()) return target.status();
  auto fd_or = open_for(*target, /*write=*/true);
  if (!fd_or.is_ok()) return fd_or.status();
  const Fd fd(*fd_or);
  auto extent = extent_of(fd.get(), *target);
  if (!extent.is_ok()) return extent.status();
  std::vector<DeviceSignature> wiped;
  {
    const Probe probe;
    GRAID_RETURN_IF_ERROR(set_up(probe.get(), fd.get(), *target));
    for (int i = 0; i < kMaxSignatures; ++i) {
      const int rc = blkid_do_probe(probe.get());
      if (rc == 1) break;
      if (rc < 0) return make_error(Errc::kIoError, "{}: libblkid could not read it", *target);
      DeviceSignature s = current(probe.get());
      if (blkid_do_wipe(probe.get(), /*dryrun=*/0) != 0) {
        return make_error(Errc::kIoError, "{}: wiping {}: {}", *target, noun(s),
                          std::strerror(errno));
      }
      wiped.push_back(std::move(s));
    }
  }
  if (auto backup = gpt_backup(fd.get(), *extent)) {
    const std::array<char, kGptMagic.size()> zero{};
    if (::pwrite(fd.get(), zero.data(), zero.size(), static_cast<off_t>(backup->offset)) !=
        static_cast<ssize_t>(zero.size()))
      return make_error(Errc::kIoError, "{}: wiping the GPT backup header at byte {}: {}", *target,
                        backup->offset, std::strerror(errno));
    if (!is_gpt_at(wiped, backup->offset)) wiped.push_back(*backup);
  }
  if (::fsync(fd.get()) != 0)
    return make_error(Errc::kIoError, "{}: flushing after the wipe: {}", *target,
                      std::strerror(errno));
  auto left = probe_signatures(path);
  if (!left.is_ok()) return left.status();
  if (!left->empty()) {
    return make_error(Errc::kIoError, "{} after the wipe", describe_signatures(*target, *left));
  }
  return wiped;
}

}  // namespace graid::daemon
