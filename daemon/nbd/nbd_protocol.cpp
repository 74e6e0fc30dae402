#include "nbd/nbd_protocol.h"

#include <algorithm>
#include <cstring>

namespace graid::nbd {
namespace {

// Big-endian stores and loads. Callers have checked the sizes.
template <typename T>
void put_be(std::byte* p, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    p[i] = static_cast<std::byte>(value >> (8 * (sizeof(T) - 1 - i)));
}

template <typename T>
T get_be(const std::byte* p) {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    value = static_cast<T>((value << 8) | static_cast<T>(std::to_integer<std::uint8_t>(p[i])));
  return value;
}

// Appends big-endian numbers and bytes to a growing message.
class Writer {
 public:
  explicit Writer(std::vector<std::byte>& out) : out_(out) {}
  template <typename T>
  Writer& num(T value) {
    const std::size_t at = out_.size();
    out_.resize(at + sizeof(T));
    put_be(out_.data() + at, value);
    return *this;
  }
  Writer& bytes(std::span<const std::byte> b) {
    out_.insert(out_.end(), b.begin(), b.end());
    return *this;
  }
  Writer& str(std::string_view s) { return bytes(std::as_bytes(std::span(s.data(), s.size()))); }

 private:
  std::vector<std::byte>& out_;
};

// Reads big-endian numbers from an untrusted span; a read past the end fails and leaves
// `ok()` false for good.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  template <typename T>
  T num() {
    if (!ok_ || in_.size() - pos_ < sizeof(T)) {
      ok_ = false;
      return 0;
    }
    const T v = get_be<T>(in_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }
  std::span<const std::byte> bytes(std::size_t n) {
    if (!ok_ || in_.size() - pos_ < n) {
      ok_ = false;
      return {};
    }
    auto s = in_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == in_.size(); }

 private:
  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

Result<std::string> to_name(std::span<const std::byte> s) {
  if (s.size() > kMaxStringLength)
    return make_error(Errc::kInvalidArgument, "name of {} bytes (at most {})", s.size(),
                      kMaxStringLength);
  if (std::find(s.begin(), s.end(), std::byte{0}) != s.end())
    return make_error(Errc::kInvalidArgument, "name holds a NUL byte");
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}

std::vector<std::byte> reply_with(std::uint32_t option, std::uint32_t type,
                                  std::size_t payload_size) {
  std::vector<std::byte> out;
  out.reserve(kOptionReplyHeaderSize + payload_size);
  Writer(out)
      .num(kOptReplyMagic)
      .num(option)
      .num(type)
      .num(static_cast<std::uint32_t>(payload_size));
  return out;
}

std::string_view cut(std::string_view s, std::size_t max) {
  return s.substr(0, max);
}

}  // namespace

std::array<std::byte, kGreetingSize> encode_greeting() {
  std::array<std::byte, kGreetingSize> out{};
  put_be(out.data(), kNbdMagic);
  put_be(out.data() + 8, kOptMagic);
  put_be(out.data() + 16, static_cast<std::uint16_t>(kFlagFixedNewstyle | kFlagNoZeroes));
  return out;
}

Result<std::uint32_t> parse_client_flags(std::span<const std::byte> in) {
  if (in.size() < kClientFlagsSize)
    return make_error(Errc::kCorrupt, "client flags: {} bytes, want {}", in.size(),
                      kClientFlagsSize);
  const auto flags = get_be<std::uint32_t>(in.data());
  if ((flags & ~std::uint32_t{kFlagFixedNewstyle | kFlagNoZeroes}) != 0)
    return make_error(Errc::kUnsupported, "unknown client flags {:#x}", flags);
  return flags;
}

Status parse_option_header(std::span<const std::byte> in, OptionHeader& out) {
  if (in.size() < kOptionHeaderSize)
    return make_error(Errc::kCorrupt, "option header: {} bytes, want {}", in.size(),
                      kOptionHeaderSize);
  const auto magic = get_be<std::uint64_t>(in.data());
  if (magic != kOptMagic) return make_error(Errc::kCorrupt, "option magic {:#x}", magic);
  out.option = get_be<std::uint32_t>(in.data() + 8);
  out.length = get_be<std::uint32_t>(in.data() + 12);
  if (out.length > kMaxOptionLength)
    return make_error(Errc::kNoSpace, "option {} has {} bytes of data (at most {})", out.option,
                      out.length, kMaxOptionLength);
  return Status::ok();
}

Result<InfoRequest> parse_info_request(std::span<const std::byte> data) {
  Reader r(data);
  const auto name_len = r.num<std::uint32_t>();
  auto name_bytes = r.bytes(name_len);
  const auto count = r.num<std::uint16_t>();
  if (!r.ok())
    return make_error(Errc::kInvalidArgument, "INFO/GO data of {} bytes is too short", data.size());
  auto name = to_name(name_bytes);
  if (!name) return name.status();
  InfoRequest req;
  req.name = std::move(*name);
  req.infos.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i)
    req.infos.push_back(r.num<std::uint16_t>());
  if (!r.ok() || !r.at_end())
    return make_error(Errc::kInvalidArgument,
                      "INFO/GO: {} information requests do not fill {} bytes", count, data.size());
  return req;
}

Result<std::string> parse_export_name(std::span<const std::byte> data) {
  return to_name(data);
}

std::vector<std::byte> encode_option_reply(std::uint32_t option, std::uint32_t type,
                                           std::span<const std::byte> payload) {
  auto out = reply_with(option, type, payload.size());
  Writer(out).bytes(payload);
  return out;
}

std::vector<std::byte> encode_option_error(std::uint32_t option, std::uint32_t type,
                                           std::string_view message) {
  message = cut(message, kMaxStringLength);
  auto out = reply_with(option, type, message.size());
  Writer(out).str(message);
  return out;
}

std::vector<std::byte> encode_rep_server(std::uint32_t option, std::string_view name,
                                         std::string_view description) {
  name = cut(name, kMaxStringLength);
  description = cut(description, kMaxStringLength);
  auto out = reply_with(option, kRepServer, 4 + name.size() + description.size());
  Writer(out).num(static_cast<std::uint32_t>(name.size())).str(name).str(description);
  return out;
}

std::vector<std::byte> encode_info_export(std::uint32_t option, std::uint64_t size,
                                          std::uint16_t transmission_flags) {
  auto out = reply_with(option, kRepInfo, 12);
  Writer(out).num(kInfoExport).num(size).num(transmission_flags);
  return out;
}

std::vector<std::byte> encode_info_name(std::uint32_t option, std::string_view name) {
  name = cut(name, kMaxStringLength);
  auto out = reply_with(option, kRepInfo, 2 + name.size());
  Writer(out).num(kInfoName).str(name);
  return out;
}

std::vector<std::byte> encode_info_description(std::uint32_t option, std::string_view text) {
  text = cut(text, kMaxStringLength);
  auto out = reply_with(option, kRepInfo, 2 + text.size());
  Writer(out).num(kInfoDescription).str(text);
  return out;
}

std::vector<std::byte> encode_info_block_size(std::uint32_t option, std::uint32_t minimum,
                                              std::uint32_t preferred, std::uint32_t maximum) {
  auto out = reply_with(option, kRepInfo, 14);
  Writer(out).num(kInfoBlockSize).num(minimum).num(preferred).num(maximum);
  return out;
}

std::vector<std::byte> encode_export_name_reply(std::uint64_t size, std::uint16_t flags,
                                                bool no_zeroes) {
  std::vector<std::byte> out;
  Writer(out).num(size).num(flags);
  if (!no_zeroes) out.resize(out.size() + 124);
  return out;
}

Result<RequestHeader> parse_request_header(std::span<const std::byte> in) {
  if (in.size() < kRequestHeaderSize)
    return make_error(Errc::kCorrupt, "request header: {} bytes, want {}", in.size(),
                      kRequestHeaderSize);
  const auto magic = get_be<std::uint32_t>(in.data());
  if (magic != kRequestMagic) return make_error(Errc::kCorrupt, "request magic {:#x}", magic);
  RequestHeader h;
  h.flags = get_be<std::uint16_t>(in.data() + 4);
  h.type = get_be<std::uint16_t>(in.data() + 6);
  h.handle = get_be<std::uint64_t>(in.data() + 8);
  h.offset = get_be<std::uint64_t>(in.data() + 16);
  h.length = get_be<std::uint32_t>(in.data() + 24);
  return h;
}

RequestCheck check_request(const RequestHeader& r, const ExportLimits& limits) {
  RequestCheck c;
  const bool writes = r.type == kCmdWrite || r.type == kCmdTrim || r.type == kCmdWriteZeroes;
  if (r.type == kCmdWrite) {
    if (r.length > limits.max_payload) return {kErrOverflow, 0, true};
    c.payload = r.length;  // consumed whatever the verdict
  }
  std::uint16_t allowed = kCmdFlagFua;  // valid on every command once SEND_FUA is offered
  switch (r.type) {
    case kCmdRead:
      allowed |= kCmdFlagDf;  // reads are never fragmented, so DF costs nothing
      break;
    case kCmdWrite:
    case kCmdTrim:
    case kCmdFlush:
    case kCmdDisc:
      break;
    case kCmdWriteZeroes:
      allowed |= kCmdFlagNoHole;
      break;
    default:
      c.error = kErrInval;  // CACHE, BLOCK_STATUS (no metadata contexts) and unknown types
      return c;
  }
  if ((r.flags & ~allowed) != 0) {
    c.error = kErrInval;
    return c;
  }
  if (r.type == kCmdFlush || r.type == kCmdDisc) {
    if (r.offset != 0 || r.length != 0) c.error = kErrInval;
    return c;
  }
  if (writes && limits.read_only) {
    c.error = kErrPerm;
    return c;
  }
  if (r.type == kCmdRead && r.length > limits.max_payload) {
    c.error = kErrOverflow;
    return c;
  }
  const bool past_end = r.offset > limits.size || limits.size - r.offset < r.length;
  if (past_end) {
    c.error = (r.type == kCmdWrite || r.type == kCmdWriteZeroes) ? kErrNoSpc : kErrInval;
    return c;
  }
  if (limits.block > 1 && (r.offset % limits.block != 0 || r.length % limits.block != 0))
    c.error = kErrInval;
  return c;
}

std::array<std::byte, kSimpleReplySize> encode_simple_reply(std::uint32_t error,
                                                            std::uint64_t handle) {
  std::array<std::byte, kSimpleReplySize> out{};
  put_be(out.data(), kSimpleReplyMagic);
  put_be(out.data() + 4, error);
  put_be(out.data() + 8, handle);
  return out;
}

void encode_structured_header(std::span<std::byte, kStructuredHeaderSize> out, std::uint16_t flags,
                              std::uint16_t type, std::uint64_t handle, std::uint32_t length) {
  put_be(out.data(), kStructuredReplyMagic);
  put_be(out.data() + 4, flags);
  put_be(out.data() + 6, type);
  put_be(out.data() + 8, handle);
  put_be(out.data() + 16, length);
}

std::array<std::byte, kOffsetDataHeaderSize> encode_offset_data_header(std::uint64_t handle,
                                                                       std::uint64_t offset,
                                                                       std::uint32_t data_length,
                                                                       bool done) {
  std::array<std::byte, kOffsetDataHeaderSize> out{};
  encode_structured_header(std::span(out).first<kStructuredHeaderSize>(), done ? kReplyFlagDone : 0,
                           kReplyTypeOffsetData, handle, data_length + 8);
  put_be(out.data() + kStructuredHeaderSize, offset);
  return out;
}

std::size_t encode_error_chunk(std::span<std::byte, kErrorChunkMaxSize> out, std::uint64_t handle,
                               std::uint32_t error, std::string_view message) {
  message = cut(message, kMaxErrorMessage);
  const auto payload = static_cast<std::uint32_t>(6 + message.size());
  encode_structured_header(out.first<kStructuredHeaderSize>(), kReplyFlagDone, kReplyTypeError,
                           handle, payload);
  put_be(out.data() + kStructuredHeaderSize, error);
  put_be(out.data() + kStructuredHeaderSize + 4, static_cast<std::uint16_t>(message.size()));
  std::memcpy(out.data() + kStructuredHeaderSize + 6, message.data(), message.size());
  return kStructuredHeaderSize + payload;
}

std::array<std::byte, kStructuredHeaderSize> encode_none_chunk(std::uint64_t handle) {
  std::array<std::byte, kStructuredHeaderSize> out{};
  encode_structured_header(out, kReplyFlagDone, kReplyTypeNone, handle, 0);
  return out;
}

std::uint32_t nbd_error_for(Errc code) noexcept {
  switch (code) {
    case Errc::kOk:
      return 0;
    case Errc::kInvalidArgument:
    case Errc::kOutOfRange:
      return kErrInval;
    case Errc::kNoSpace:
      return kErrNoSpc;
    case Errc::kUnsupported:
      return kErrNotSup;
    default:
      return kErrIo;
  }
}

}  // namespace graid::nbd
