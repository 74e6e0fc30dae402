#include "examine.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "cli_parse.h"
#include "graid/buffer.h"
#include "graid/geometry.h"
#include "graid/status.h"
#include "meta/bitmap_header.h"
#include "meta/crc32c.h"
#include "meta/journal_record.h"
#include "meta/superblock.h"
#include "render_table.h"

namespace graid::cli {

namespace {

using nlohmann::json;

// Reads are 4 KiB-aligned in offset, length and memory: O_DIRECT on 512 B and 4 KiB devices.
constexpr std::size_t kAlign = 4096;

// A device or file opened for reading only: no O_EXCL, no flock, never written.
class ReadOnlyDevice {
 public:
  static Result<ReadOnlyDevice> open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    // Filesystems without O_DIRECT (tmpfs) refuse it: read through the page cache there.
    if (fd < 0 && errno == EINVAL) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return make_error(Errc::kIoError, "cannot open {}: {}", path, std::strerror(errno));
    ReadOnlyDevice d(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0)
      return make_error(Errc::kIoError, "cannot stat {}: {}", path, std::strerror(errno));
    if (S_ISBLK(st.st_mode)) {
      std::uint64_t bytes = 0;
      if (::ioctl(fd, BLKGETSIZE64, &bytes) != 0)
        return make_error(Errc::kIoError, "cannot size {}: {}", path, std::strerror(errno));
      d.size_ = bytes;
    } else if (S_ISREG(st.st_mode)) {
      d.size_ = static_cast<std::uint64_t>(st.st_size);
    } else if (S_ISCHR(st.st_mode)) {
      // /dev/ngXnY (NVMe passthrough PDs) takes commands, not reads: the same namespace's block
      // device holds the same bytes.
      return make_error(Errc::kInvalidArgument,
                        "{} is a character device; for an NVMe generic device (/dev/ngXnY) "
                        "examine the namespace's block device (/dev/nvmeXnY)",
                        path);
    } else {
      return make_error(Errc::kInvalidArgument, "{} is not a block device or a file", path);
    }
    return d;
  }
  ReadOnlyDevice(ReadOnlyDevice&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}
  ReadOnlyDevice& operator=(ReadOnlyDevice&&) = delete;
  ~ReadOnlyDevice() {
    if (fd_ >= 0) ::close(fd_);
  }

  std::uint64_t size() const noexcept { return size_; }

  // `bytes` (a multiple of 4096) from `offset` (4096-aligned); past the end of the device, or a
  // short read, is an error naming where.
  Result<AlignedBuffer> read(std::uint64_t offset, std::size_t bytes) const {
    if (offset > size_ || bytes > size_ - offset)
      return make_error(Errc::kOutOfRange, "{} bytes at byte {} lie past the end ({} bytes)", bytes,
                        offset, size_);
    auto buf = AlignedBuffer::allocate(bytes, kAlign);
    if (!buf.is_ok()) return buf.status();
    std::size_t done = 0;
    while (done < bytes) {
      const ssize_t n =
          ::pread(fd_, buf->data() + done, bytes - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        return make_error(Errc::kIoError, "read of {} bytes at byte {} failed: {}", bytes - done,
                          offset + done, std::strerror(errno));
      if (n == 0)
        return make_error(Errc::kIoError, "read at byte {} came back short", offset + done);
      done += static_cast<std::size_t>(n);
    }
    return std::move(*buf);
  }

 private:
  explicit ReadOnlyDevice(int fd) : fd_(fd) {}
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

std::string time_text(std::uint64_t ns) {
  if (ns == 0) return "";
  const time_t secs = static_cast<time_t>(ns / 1'000'000'000);
  struct tm tm {};
  ::gmtime_r(&secs, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03}Z", text, (ns / 1'000'000) % 1000);
}

// The stored settings' codes by name (docs/cli.md, edit dg); "" when unset.
std::string speed_name(std::uint8_t code) {
  static constexpr const char* kNames[] = {"", "low", "normal", "high", "extreme"};
  return code < std::size(kNames) ? kNames[code] : fmt::format("code {}", code);
}
std::string journal_name(std::uint8_t code) {
  static constexpr const char* kNames[] = {"", "off", "degraded-only", "always"};
  return code < std::size(kNames) ? kNames[code] : fmt::format("code {}", code);
}
std::string init_method_text(std::uint8_t code) {
  static constexpr const char* kNames[] = {"not recorded", "none (assumed clean)", "known-zero",
                                           "zeroed", "resync"};
  return code < std::size(kNames) ? kNames[code] : fmt::format("code {}", code);
}

json checkpoint_json(const meta::Checkpoint& c) {
  return c ? json(*c) : json(nullptr);
}

json superblock_json(const meta::Superblock& sb) {
  json j = {{"found", true},
            {"format", fmt::format("{}.{}", meta::kMajorVersion, sb.minor_version)},
            {"events", sb.events},
            {"created", time_text(sb.ctime_ns)},
            {"updated", time_text(sb.utime_ns)},
            {"array_uuid", sb.array_uuid.to_string()},
            {"name", sb.name},
            {"level", std::string(raid_level_name(sb.level))},
            {"member_count", sb.member_count},
            {"spare_count", sb.spare_count},
            {"strip", sb.strip_bytes},
            {"clean", sb.clean()},
            {"data_offset", sb.data_offset},
            {"data_size", sb.data_size},
            {"capacity", sb.data_capacity()},
            {"member_index", sb.member_index},
            {"member_uuid", sb.member_uuid.to_string()},
            {"init_method", init_method_text(sb.init_method)}};
  j["settings"] = {{"rebuild_speed", speed_name(sb.settings.rebuild_speed)},
                   {"init_speed", speed_name(sb.settings.init_speed)},
                   {"check_speed", speed_name(sb.settings.check_speed)},
                   {"resync_speed", speed_name(sb.settings.resync_speed)},
                   {"journal", journal_name(sb.settings.journal_policy)}};
  // Checkpoints: member data bytes done of a pending job; null when none is pending.
  j["pending"] = {{"init", checkpoint_json(sb.init_checkpoint)},
                  {"resync", checkpoint_json(sb.resync_checkpoint)},
                  {"check", checkpoint_json(sb.check_checkpoint)}};
  j["replace"] = sb.replace ? json{{"role", sb.replace->role},
                                   {"slot", sb.replace->slot},
                                   {"copied", sb.replace->copied},
                                   {"current", sb.replace->events == sb.events}}
                            : json(nullptr);
  return j;
}

json members_json(const meta::Superblock& sb) {
  json out = json::array();
  const std::uint32_t slots = sb.member_count + sb.spare_count;
  for (std::uint32_t i = 0; i < slots && i < sb.members.size(); ++i) {
    const meta::MemberEntry& m = sb.members[i];
    out.push_back(
        {{"slot", i},
         {"role", i < sb.member_count ? "member" : "spare"},
         {"uuid", m.uuid.is_nil() ? json(nullptr) : json(m.uuid.to_string())},
         {"state", std::string(meta::member_state_name(m.state))},
         {"rebuilt_bytes",
          m.state == meta::MemberState::kRebuilding ? json(m.rebuild_offset) : json(nullptr)},
         {"this", i == sb.member_index}});
  }
  return out;
}

json vds_json(const meta::Superblock& sb) {
  json out = json::array();
  for (const meta::VdEntry& vd : sb.vds) {
    if ((vd.flags & meta::kVdInUse) == 0) continue;
    out.push_back({{"vd_id", vd.id}, {"name", vd.name}, {"start", vd.start}, {"size", vd.size}});
  }
  return out;
}

json lost_ranges_json(const meta::Superblock& sb) {
  json out = json::array();
  for (const meta::BadRange& r : sb.bad_ranges)
    out.push_back({{"offset", r.offset}, {"length", r.len}});
  return out;
}

// The write-intent bitmap: its header and how many regions its bit pages hold set.
json bitmap_json(const ReadOnlyDevice& dev, const meta::Superblock& sb) {
  auto block = dev.read(meta::kBitmapOffset, meta::kBitmapHeaderSize);
  if (!block.is_ok()) return {{"found", false}, {"error", block.status().message()}};
  if (!std::equal(meta::kBitmapMagic.begin(), meta::kBitmapMagic.end(), block->data()))
    return {{"found", false}};
  auto header = meta::decode_header(block->span());
  if (!header.is_ok()) return {{"found", false}, {"error", header.status().message()}};
  json j = {{"found", true},
            {"region_bytes", header->region_bytes},
            {"regions", header->region_count()},
            {"events", header->events},
            {"events_cleared", header->events_cleared}};
  // A header that is not this superblock's (another array, another shape) is reported, its
  // pages not counted: assembly would not take them either.
  std::string mismatch;
  if (header->array_uuid != sb.array_uuid.bytes)
    mismatch = "the bitmap belongs to another array";
  else if (header->data_size != sb.data_size || header->data_offset != sb.bitmap_area_end())
    mismatch = "the bitmap's data area differs from the superblock's";
  if (!mismatch.empty()) {
    j["error"] = mismatch;
    return j;
  }
  const std::uint64_t pages = meta::bitmap_page_count(header->region_count());
  auto bits = dev.read(meta::kBitmapPagesOffset, pages * meta::kBitmapPageSize);
  if (!bits.is_ok()) {
    j["error"] = bits.status().message();
    return j;
  }
  std::uint64_t set = 0;
  std::uint64_t dirty = 0;
  const std::uint64_t regions = header->region_count();
  for (std::uint64_t r = 0; r < regions; ++r) {
    const auto byte = std::to_integer<unsigned>(bits->data()[r / 8]);
    if ((byte & (1U << (r % 8))) == 0) continue;
    ++set;
    const std::uint64_t start = r * header->region_bytes;
    dirty += std::min(header->region_bytes, header->data_size - start);
  }
  j["regions_set"] = set;
  j["dirty_bytes"] = dirty;
  return j;
}

// The write-hole journal area: records of the current epoch (what an assembly would replay).
json journal_json(const ReadOnlyDevice& dev, const meta::Superblock& sb) {
  if (sb.journal_bytes == 0) return {{"present", false}};
  json j = {{"present", true},
            {"offset", sb.journal_offset},
            {"bytes", sb.journal_bytes},
            {"epoch", sb.journal_epoch},
            {"covered", sb.journal_covered()}};
  auto area = dev.read(sb.journal_offset, static_cast<std::size_t>(sb.journal_bytes));
  if (!area.is_ok()) {
    j["error"] = area.status().message();
    return j;
  }
  std::uint64_t records = 0;
  std::uint64_t damaged = 0;
  std::optional<std::uint64_t> first_seq;
  std::uint64_t last_seq = 0;
  const std::span<const std::byte> bytes(area->data(), area->size());
  for (std::size_t at = 0; at + meta::kJournalBlock <= bytes.size();) {
    auto h = meta::decode_journal_header(bytes.subspan(at), sb.array_uuid.bytes, sb.journal_epoch);
    if (!h.is_ok()) {
      if (h.status().code() != Errc::kNotFound) ++damaged;
      at += meta::kJournalBlock;
      continue;
    }
    const std::size_t header_bytes = meta::journal_header_bytes(h->entries.size());
    const std::uint64_t payload = meta::journal_payload_bytes(*h);
    const std::size_t record = meta::journal_record_bytes(h->entries.size(), payload);
    if (record == 0 || record > bytes.size() - at ||
        meta::crc32c(bytes.subspan(at + header_bytes, static_cast<std::size_t>(payload))) !=
            h->payload_crc) {
      ++damaged;  // torn: its header landed, its payload did not (never replayed)
      at += meta::kJournalBlock;
      continue;
    }
    ++records;
    first_seq = std::min(first_seq.value_or(h->seq), h->seq);
    last_seq = std::max(last_seq, h->seq);
    at += record;
  }
  j["records"] = records;
  j["damaged"] = damaged;
  j["first_seq"] = first_seq ? json(*first_seq) : json(nullptr);
  j["last_seq"] = first_seq ? json(last_seq) : json(nullptr);
  return j;
}

}  // namespace

json examine_path(const std::string& path) {
  json out = {{"path", path}};
  auto dev = ReadOnlyDevice::open(path);
  if (!dev.is_ok()) {
    out["error"] = dev.status().message();
    return out;
  }
  out["size"] = dev->size();
  auto block = dev->read(meta::kSuperblockOffset, meta::kSuperblockSize);
  if (!block.is_ok()) {
    out["error"] = block.status().message();
    return out;
  }
  const std::span<const std::byte> bytes(block->data(), block->size());
  if (!std::equal(meta::kSuperblockMagic.begin(), meta::kSuperblockMagic.end(), bytes.begin())) {
    out["superblock"] = {{"found", false},
                         {"message", "no graid superblock (a blank drive, or not graid's)"}};
    return out;
  }
  auto sb = meta::decode(bytes);
  if (!sb.is_ok()) {
    json s = {{"found", false}, {"message", sb.status().message()}};
    if (auto v = meta::peek_version(bytes)) s["format"] = fmt::format("{}.{}", v->major, v->minor);
    out["superblock"] = std::move(s);
    return out;
  }
  out["superblock"] = superblock_json(*sb);
  out["members"] = members_json(*sb);
  out["vds"] = vds_json(*sb);
  out["lost_ranges"] = lost_ranges_json(*sb);
  out["bitmap"] = bitmap_json(*dev, *sb);
  out["journal"] = journal_json(*dev, *sb);
  return out;
}

bool examined_ok(const json& examined) {
  return examined.is_object() && examined.contains("superblock") &&
         examined["superblock"].value("found", false);
}

std::string render_examine(const json& e) {
  std::string out = field_text(e, "path") + ":\n";
  if (e.contains("error")) return out + "  cannot examine: " + field_text(e, "error") + "\n";
  const json& sb = e.value("superblock", json::object());
  if (!sb.value("found", false)) {
    out += "  " + field_text(sb, "message");
    if (sb.contains("format")) out += " (format " + field_text(sb, "format") + ")";
    return out + "\n";
  }
  TextTable t({{"", false}, {"", false}});
  auto row = [&t](std::string key, std::string value) {
    t.add_row({"  " + std::move(key) + ":", std::move(value)});
  };
  row("format", "graid " + field_text(sb, "format") + ", events " + field_text(sb, "events"));
  row("array",
      fmt::format("{} \"{}\", {}, {} members + {} spares, strip {}", field_text(sb, "array_uuid"),
                  sb.value("name", ""), field_text(sb, "level"), field_text(sb, "member_count"),
                  field_text(sb, "spare_count"), size_text(sb, "strip")));
  row("created", field_text(sb, "created"));
  row("updated", field_text(sb, "updated"));
  row("this member",
      fmt::format("slot {} ({})", field_text(sb, "member_index"), field_text(sb, "member_uuid")));
  row("stopped", sb.value("clean", false) ? "cleanly"
                                          : "not cleanly: the bitmap's regions are re-synced at "
                                            "the next assembly");
  row("data", fmt::format("{} per member from byte {}; capacity {}", size_text(sb, "data_size"),
                          field_text(sb, "data_offset"), size_text(sb, "capacity")));
  row("initialised", field_text(sb, "init_method"));
  const json& pending = sb.value("pending", json::object());
  std::vector<std::string> jobs;
  for (const char* job : {"init", "resync", "check"}) {
    if (pending.contains(job) && pending[job].is_number_unsigned())
      jobs.push_back(fmt::format("{} at {}", job, format_size(pending[job].get<std::uint64_t>())));
  }
  row("pending jobs",
      jobs.empty() ? std::string("none") : fmt::format("{}", fmt::join(jobs, ", ")));
  if (sb.contains("replace") && sb["replace"].is_object()) {
    const json& r = sb["replace"];
    row("hot replace", fmt::format("role {} into slot {}, {} copied{}", field_text(r, "role"),
                                   field_text(r, "slot"), size_text(r, "copied"),
                                   r.value("current", false) ? "" : " (void: an older writer)"));
  }
  const json& s = sb.value("settings", json::object());
  row("settings", fmt::format("rebuild {}, init {}, check {}, resync {}, journal {}",
                              field_text(s, "rebuild_speed"), field_text(s, "init_speed"),
                              field_text(s, "check_speed"), field_text(s, "resync_speed"),
                              field_text(s, "journal")));
  const json& bm = e.value("bitmap", json::object());
  if (!bm.value("found", false)) {
    row("bitmap", bm.contains("error") ? "unreadable: " + field_text(bm, "error") : "none");
  } else if (bm.contains("error")) {
    row("bitmap", fmt::format("{} regions of {}, events {}: {}", field_text(bm, "regions"),
                              size_text(bm, "region_bytes"), field_text(bm, "events"),
                              field_text(bm, "error")));
  } else {
    row("bitmap",
        fmt::format("{} of {} regions of {} set ({} to re-sync), events {}, cleared at {}",
                    field_text(bm, "regions_set"), field_text(bm, "regions"),
                    size_text(bm, "region_bytes"), size_text(bm, "dirty_bytes"),
                    field_text(bm, "events"), field_text(bm, "events_cleared")));
  }
  const json& jn = e.value("journal", json::object());
  if (!jn.value("present", false)) {
    row("journal", "no area");
  } else if (jn.contains("error")) {
    row("journal", "unreadable: " + field_text(jn, "error"));
  } else {
    std::string text =
        fmt::format("{} at byte {}, epoch {}, {} records to replay", size_text(jn, "bytes"),
                    field_text(jn, "offset"), field_text(jn, "epoch"), field_text(jn, "records"));
    if (jn.value("records", 0) > 0)
      text += fmt::format(" (seq {}..{})", field_text(jn, "first_seq"), field_text(jn, "last_seq"));
    if (jn.value("damaged", 0) > 0) text += fmt::format(", {} torn", field_text(jn, "damaged"));
    text += jn.value("covered", false) ? ", covered every update" : "";
    row("journal", text);
  }
  const json& lost = e.value("lost_ranges", json::array());
  std::uint64_t lost_bytes = 0;
  for (const json& r : lost)
    lost_bytes += r.value("length", std::uint64_t{0});
  row("lost ranges", lost.empty() ? std::string("none")
                                  : fmt::format("{} ({})", lost.size(), format_size(lost_bytes)));
  std::string text = t.render();
  out += text.substr(text.find('\n') + 1);

  TextTable members({{"  SLOT", true}, {"ROLE"}, {"UUID"}, {"STATE"}, {"REBUILT", true}, {""}});
  for (const json& m : e.value("members", json::array())) {
    members.add_row({field_text(m, "slot"), field_text(m, "role"), field_text(m, "uuid"),
                     field_text(m, "state"),
                     m.contains("rebuilt_bytes") && m["rebuilt_bytes"].is_number()
                         ? size_text(m, "rebuilt_bytes")
                         : "-",
                     m.value("this", false) ? "<- this drive" : ""});
  }
  out += "members:\n" + members.render();
  const json& vds = e.value("vds", json::array());
  if (!vds.empty()) {
    TextTable v({{"  VD", true}, {"NAME"}, {"START", true}, {"SIZE", true}});
    for (const json& vd : vds)
      v.add_row({field_text(vd, "vd_id"), field_text(vd, "name"), size_text(vd, "start"),
                 size_text(vd, "size")});
    out += "vds:\n" + v.render();
  }
  if (!lost.empty()) {
    TextTable l({{"  OFFSET", true}, {"LENGTH", true}});
    for (const json& r : lost)
      l.add_row({field_text(r, "offset"), size_text(r, "length")});
    out += "lost ranges (array bytes):\n" + l.render();
  }
  return out;
}

}  // namespace graid::cli
