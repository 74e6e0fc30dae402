#include "graidd/event_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>

#include "graid/checksum.h"
#include "graidd/durable_file.h"

namespace graid::daemon {

namespace {

constexpr std::string_view kPrefix = R"({"crc":")";
constexpr std::string_view kMiddle = R"(","event":)";
constexpr std::size_t kCrcDigits = 8;

std::uint32_t crc_of(std::string_view text) {
  return crc32c(text);
}

nlohmann::ordered_json id_or_null(const std::optional<std::uint32_t>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

std::optional<std::uint32_t> id_of(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<std::uint32_t>();
}

// The whole file, or "" when there is none.
Result<std::string> read_all(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return std::string();
    return make_error(Errc::kIoError, "open {}: {}", path, std::strerror(errno));
  }
  std::string text;
  char chunk[65536];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return make_error(Errc::kIoError, "read {}: {}", path, std::strerror(err));
    }
    if (n == 0) break;
    text.append(chunk, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

// Appends the events of `text`'s complete lines to `out` (seq increasing: a line whose seq does
// not follow is damaged).
void decode_lines(std::string_view text, EventFileContents& out) {
  while (!text.empty()) {
    const auto nl = text.find('\n');
    if (nl == std::string_view::npos) break;  // the caller cuts an unfinished line
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    if (line.empty()) continue;
    auto e = decode_event_line(line);
    if (!e || (!out.events.empty() && e->seq <= out.events.back().seq)) {
      ++out.damaged;
      continue;
    }
    out.events.push_back(std::move(*e));
  }
}

}  // namespace

std::string encode_event_line(const Event& e) {
  nlohmann::ordered_json j;
  j["seq"] = e.seq;
  j["time"] = rfc3339(e.time);
  j["time_ms"] =
      std::chrono::duration_cast<std::chrono::milliseconds>(e.time.time_since_epoch()).count();
  j["severity"] = severity_name(e.severity);
  j["kind"] = e.kind;
  j["dg_id"] = id_or_null(e.dg_id);
  j["pd_id"] = id_or_null(e.pd_id);
  j["vd_id"] = id_or_null(e.vd_id);
  j["slot"] = id_or_null(e.slot);
  j["message"] = e.message;
  // Invalid UTF-8 in a message (a device name, say) is replaced, never a reason to lose the event.
  const std::string event = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return fmt::format("{}{:08x}{}{}}}\n", kPrefix, crc_of(event), kMiddle, event);
}

std::optional<Event> decode_event_line(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  const std::size_t head = kPrefix.size() + kCrcDigits + kMiddle.size();
  if (line.size() < head + 1 || !line.starts_with(kPrefix) || line.back() != '}')
    return std::nullopt;
  if (line.substr(kPrefix.size() + kCrcDigits, kMiddle.size()) != kMiddle) return std::nullopt;
  std::uint32_t crc = 0;
  const char* first = line.data() + kPrefix.size();
  const auto [end, err] = std::from_chars(first, first + kCrcDigits, crc, 16);
  if (err != std::errc() || end != first + kCrcDigits) return std::nullopt;
  const std::string_view event = line.substr(head, line.size() - head - 1);
  if (crc_of(event) != crc) return std::nullopt;
  try {
    const auto j = nlohmann::json::parse(event);
    Event e;
    e.seq = j.at("seq").get<std::uint64_t>();
    if (e.seq == 0) return std::nullopt;
    e.time = std::chrono::system_clock::time_point(
        std::chrono::milliseconds(j.at("time_ms").get<std::int64_t>()));
    const auto severity = parse_severity(j.at("severity").get<std::string>());
    if (!severity) return std::nullopt;
    e.severity = *severity;
    e.kind = j.at("kind").get<std::string>();
    e.dg_id = id_of(j, "dg_id");
    e.pd_id = id_of(j, "pd_id");
    e.vd_id = id_of(j, "vd_id");
    e.slot = id_of(j, "slot");
    e.message = j.at("message").get<std::string>();
    return e;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

EventFile::EventFile(Key, std::string dir, int fd, std::uint64_t size, std::size_t rotate_bytes)
    : dir_(std::move(dir)), fd_(fd), size_(size), rotate_bytes_(rotate_bytes) {}

EventFile::~EventFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<EventFile>> EventFile::open(const std::string& dir,
                                                   EventFileContents* contents,
                                                   std::size_t rotate_bytes) {
  EventFileContents found;
  const std::string path = dir + "/" + std::string(kEventFileName);
  auto older = read_all(path + ".1");
  if (!older.is_ok()) return older.status();
  // The older file was complete when it was renamed; an unfinished line there is damage.
  decode_lines(*older, found);
  if (!older->empty() && older->back() != '\n') ++found.damaged;
  auto current = read_all(path);
  if (!current.is_ok()) return current.status();
  decode_lines(*current, found);

  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return make_error(Errc::kIoError, "open {}: {}", path, std::strerror(errno));
  std::uint64_t size = current->size();
  if (!current->empty() && current->back() != '\n') {
    // An append a crash cut short: cut it off, so the next line starts on a line of its own.
    const auto nl = current->rfind('\n');
    size = nl == std::string::npos ? 0 : nl + 1;
    found.cut_tail = true;
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0 || ::fdatasync(fd) != 0) {
      const int err = errno;
      ::close(fd);
      return make_error(Errc::kIoError, "cutting the unfinished last line of {}: {}", path,
                        std::strerror(err));
    }
  }
  if (current->empty()) {
    // A new file: its name must survive a crash too.
    if (Status st = fsync_directory(dir); !st) {
      ::close(fd);
      return st;
    }
  }
  if (contents) *contents = std::move(found);
  return std::make_unique<EventFile>(Key{}, dir, fd, size, rotate_bytes);
}

Status EventFile::rotate() {
  const std::string path = dir_ + "/" + std::string(kEventFileName);
  if (::rename(path.c_str(), (path + ".1").c_str()) != 0)
    return make_error(Errc::kIoError, "rename {} to {}.1: {}", path, path, std::strerror(errno));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return make_error(Errc::kIoError, "open {}: {}", path, std::strerror(errno));
  ::close(fd_);
  fd_ = fd;
  size_ = 0;
  return fsync_directory(dir_);
}

Status EventFile::append(const Event& e) {
  const std::string line = encode_event_line(e);
  if (size_ > 0 && size_ + line.size() > rotate_bytes_) GRAID_RETURN_IF_ERROR(rotate());
  if (Status st =
          write_all(fd_, line, fmt::format("event {} to {}/{}", e.seq, dir_, kEventFileName));
      !st) {
    // Nothing half-written stays: the next line must start on a line of its own.
    (void)!::ftruncate(fd_, static_cast<off_t>(size_));
    return st;
  }
  size_ += line.size();
  if (::fdatasync(fd_) != 0)
    return make_error(Errc::kIoError, "fdatasync {}/{}: {}", dir_, kEventFileName,
                      std::strerror(errno));
  return Status::ok();
}

}  // namespace graid::daemon
