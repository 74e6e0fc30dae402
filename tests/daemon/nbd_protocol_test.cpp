// The NBD wire format as pure functions: encodings byte for byte, and every parser against
// hostile input (wrong magic, short buffers, lengths that do not add up, oversized options and
// requests, requests past the end, unknown commands and flags).
#include "nbd/nbd_protocol.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace graid::nbd {
namespace {

std::vector<std::byte> be(std::initializer_list<std::pair<std::uint64_t, int>> fields) {
  std::vector<std::byte> out;
  for (auto [value, bytes] : fields) {
    for (int i = bytes - 1; i >= 0; --i)
      out.push_back(static_cast<std::byte>(value >> (8 * i)));
  }
  return out;
}

std::vector<std::byte> request(std::uint16_t flags, std::uint16_t type, std::uint64_t handle,
                               std::uint64_t offset, std::uint32_t length,
                               std::uint32_t magic = kRequestMagic) {
  return be({{magic, 4}, {flags, 2}, {type, 2}, {handle, 8}, {offset, 8}, {length, 4}});
}

std::uint64_t load(std::span<const std::byte> b, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v = (v << 8) | std::to_integer<std::uint8_t>(b[at + static_cast<std::size_t>(i)]);
  return v;
}

TEST(NbdProtocol, GreetingIsNbdmagicIhaveoptAndFlags) {
  const auto g = encode_greeting();
  EXPECT_EQ(std::memcmp(g.data(), "NBDMAGICIHAVEOPT", 16), 0);
  EXPECT_EQ(load(g, 16, 2), kFlagFixedNewstyle | kFlagNoZeroes);
}

TEST(NbdProtocol, ClientFlags) {
  EXPECT_EQ(*parse_client_flags(be({{3, 4}})), 3u);
  EXPECT_EQ(*parse_client_flags(be({{0, 4}})), 0u);
  EXPECT_EQ(parse_client_flags(be({{4, 4}})).status().code(), Errc::kUnsupported);
  EXPECT_EQ(parse_client_flags(be({{1, 2}})).status().code(), Errc::kCorrupt);
}

TEST(NbdProtocol, OptionHeader) {
  OptionHeader h;
  ASSERT_TRUE(parse_option_header(be({{kOptMagic, 8}, {kOptGo, 4}, {12, 4}}), h).is_ok());
  EXPECT_EQ(h.option, kOptGo);
  EXPECT_EQ(h.length, 12u);
  // Wrong magic: close.
  EXPECT_EQ(parse_option_header(be({{kNbdMagic, 8}, {kOptGo, 4}, {0, 4}}), h).code(),
            Errc::kCorrupt);
  // Truncated.
  EXPECT_EQ(parse_option_header(be({{kOptMagic, 8}, {kOptGo, 4}}), h).code(), Errc::kCorrupt);
  // Oversized: TOO_BIG, with the option still named.
  h = {};
  EXPECT_EQ(parse_option_header(be({{kOptMagic, 8}, {kOptInfo, 4}, {0xffffffff, 4}}), h).code(),
            Errc::kNoSpace);
  EXPECT_EQ(h.option, kOptInfo);
  EXPECT_TRUE(
      parse_option_header(be({{kOptMagic, 8}, {kOptInfo, 4}, {kMaxOptionLength, 4}}), h).is_ok());
}

TEST(NbdProtocol, InfoRequest) {
  auto ok = parse_info_request(be({{3, 4}, {'a', 1}, {'b', 1}, {'c', 1}, {2, 2}, {3, 2}, {1, 2}}));
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->name, "abc");
  EXPECT_EQ(ok->infos, (std::vector<std::uint16_t>{3, 1}));
  EXPECT_TRUE(parse_info_request(be({{0, 4}, {0, 2}})).is_ok());
  // Name longer than the data, count that overruns, trailing bytes, NUL, truncated, huge name.
  for (const auto& bad : {be({{5, 4}, {'a', 1}, {0, 2}}), be({{0, 4}, {2, 2}, {1, 2}}),
                          be({{0, 4}, {0, 2}, {7, 1}}), be({{1, 4}, {0, 1}, {0, 2}}),
                          be({{0, 4}, {0, 1}}), be({{0xffffffff, 4}, {0, 2}}), be({})}) {
    EXPECT_EQ(parse_info_request(bad).status().code(), Errc::kInvalidArgument);
  }
  std::vector<std::byte> long_name = be({{kMaxStringLength + 1, 4}});
  long_name.resize(long_name.size() + kMaxStringLength + 1, std::byte{'x'});
  auto tail = be({{0, 2}});
  long_name.insert(long_name.end(), tail.begin(), tail.end());
  EXPECT_EQ(parse_info_request(long_name).status().code(), Errc::kInvalidArgument);
}

TEST(NbdProtocol, OptionReplies) {
  const auto ack = encode_option_reply(kOptGo, kRepAck);
  EXPECT_EQ(ack, be({{kOptReplyMagic, 8}, {kOptGo, 4}, {kRepAck, 4}, {0, 4}}));
  const auto info = encode_info_export(kOptGo, 1 << 20, 0x1234);
  EXPECT_EQ(info, be({{kOptReplyMagic, 8},
                      {kOptGo, 4},
                      {kRepInfo, 4},
                      {12, 4},
                      {kInfoExport, 2},
                      {1 << 20, 8},
                      {0x1234, 2}}));
  const auto bs = encode_info_block_size(kOptInfo, 512, 4096, kMaxPayload);
  EXPECT_EQ(bs, be({{kOptReplyMagic, 8},
                    {kOptInfo, 4},
                    {kRepInfo, 4},
                    {14, 4},
                    {kInfoBlockSize, 2},
                    {512, 4},
                    {4096, 4},
                    {kMaxPayload, 4}}));
  const auto srv = encode_rep_server(kOptList, "vd0", "d");
  EXPECT_EQ(srv, be({{kOptReplyMagic, 8},
                     {kOptList, 4},
                     {kRepServer, 4},
                     {8, 4},
                     {3, 4},
                     {'v', 1},
                     {'d', 1},
                     {'0', 1},
                     {'d', 1}}));
  EXPECT_EQ(encode_export_name_reply(4096, 1, false).size(), 10u + 124u);
  EXPECT_EQ(encode_export_name_reply(4096, 1, true), be({{4096, 8}, {1, 2}}));
  const auto err = encode_option_error(9, kRepErrUnsup, "no");
  EXPECT_EQ(err, be({{kOptReplyMagic, 8}, {9, 4}, {kRepErrUnsup, 4}, {2, 4}, {'n', 1}, {'o', 1}}));
}

TEST(NbdProtocol, RequestHeader) {
  auto r = parse_request_header(request(kCmdFlagFua, kCmdWrite, 0xabcdef, 4096, 512));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->flags, kCmdFlagFua);
  EXPECT_EQ(r->type, kCmdWrite);
  EXPECT_EQ(r->handle, 0xabcdefu);
  EXPECT_EQ(r->offset, 4096u);
  EXPECT_EQ(r->length, 512u);
  EXPECT_EQ(parse_request_header(request(0, 0, 0, 0, 0, 0x25609514)).status().code(),
            Errc::kCorrupt);
  auto shortened = request(0, 0, 0, 0, 0);
  shortened.pop_back();
  EXPECT_EQ(parse_request_header(shortened).status().code(), Errc::kCorrupt);
  EXPECT_EQ(parse_request_header({}).status().code(), Errc::kCorrupt);
}

TEST(NbdProtocol, CheckRequest) {
  const ExportLimits lim{1 << 20, 512, kMaxPayload, false};
  const ExportLimits ro{1 << 20, 512, kMaxPayload, true};
  auto check = [](std::uint16_t flags, std::uint16_t type, std::uint64_t off, std::uint32_t len,
                  const ExportLimits& l) {
    return check_request(RequestHeader{flags, type, 1, off, len}, l);
  };
  EXPECT_EQ(check(0, kCmdRead, 0, 4096, lim).error, 0u);
  EXPECT_EQ(check(kCmdFlagDf | kCmdFlagFua, kCmdRead, 0, 4096, lim).error, 0u);
  EXPECT_EQ(check(0, kCmdWrite, (1 << 20) - 512, 512, lim).error, 0u);
  EXPECT_EQ(check(0, kCmdWrite, 0, 512, lim).payload, 512u);
  EXPECT_EQ(check(kCmdFlagNoHole | kCmdFlagFua, kCmdWriteZeroes, 0, 1 << 20, lim).error, 0u);
  EXPECT_EQ(check(0, kCmdFlush, 0, 0, lim).error, 0u);
  EXPECT_EQ(check(0, kCmdDisc, 0, 0, lim).error, 0u);
  // Past the end: EINVAL for reads and trims, ENOSPC for writes; offset overflow too.
  EXPECT_EQ(check(0, kCmdRead, 1 << 20, 512, lim).error, kErrInval);
  EXPECT_EQ(check(0, kCmdTrim, (1 << 20) - 512, 1024, lim).error, kErrInval);
  EXPECT_EQ(check(0, kCmdWrite, (1 << 20) - 512, 1024, lim).error, kErrNoSpc);
  EXPECT_EQ(check(0, kCmdWrite, (1 << 20) - 512, 1024, lim).payload, 1024u);  // still consumed
  EXPECT_EQ(check(0, kCmdWriteZeroes, ~0ull - 100, 512, lim).error, kErrNoSpc);
  EXPECT_EQ(check(0, kCmdRead, ~0ull, 0xffffffff, lim).error, kErrOverflow);
  EXPECT_EQ(check(0, kCmdRead, ~0ull - 511, 512, lim).error, kErrInval);
  // Too long.
  EXPECT_EQ(check(0, kCmdRead, 0, kMaxPayload + 512, lim).error, kErrOverflow);
  const auto big_write = check(0, kCmdWrite, 0, 0xffffffff, lim);
  EXPECT_EQ(big_write.error, kErrOverflow);
  EXPECT_TRUE(big_write.close);
  EXPECT_EQ(big_write.payload, 0u);
  // Trims may exceed the payload limit.
  const ExportLimits big{8ull << 30, 512, kMaxPayload, false};
  EXPECT_EQ(check(0, kCmdTrim, 0, 1u << 31, big).error, 0u);
  // Alignment.
  EXPECT_EQ(check(0, kCmdRead, 100, 512, lim).error, kErrInval);
  EXPECT_EQ(check(0, kCmdWrite, 0, 100, lim).error, kErrInval);
  EXPECT_EQ(check(0, kCmdWrite, 0, 100, lim).payload, 100u);
  // Unknown or unsupported commands and flags.
  EXPECT_EQ(check(0, kCmdCache, 0, 512, lim).error, kErrInval);
  EXPECT_EQ(check(0, kCmdBlockStatus, 0, 512, lim).error, kErrInval);
  EXPECT_EQ(check(0, 99, 0, 512, lim).error, kErrInval);
  EXPECT_EQ(check(kCmdFlagNoHole, kCmdWrite, 0, 512, lim).error, kErrInval);
  EXPECT_EQ(check(0x8000, kCmdRead, 0, 512, lim).error, kErrInval);
  EXPECT_EQ(check(0, kCmdFlush, 512, 0, lim).error, kErrInval);
  // Read-only exports refuse every write.
  EXPECT_EQ(check(0, kCmdWrite, 0, 512, ro).error, kErrPerm);
  EXPECT_EQ(check(0, kCmdWrite, 0, 512, ro).payload, 512u);
  EXPECT_EQ(check(0, kCmdTrim, 0, 512, ro).error, kErrPerm);
  EXPECT_EQ(check(0, kCmdWriteZeroes, 0, 512, ro).error, kErrPerm);
  EXPECT_EQ(check(0, kCmdRead, 0, 512, ro).error, 0u);
  EXPECT_EQ(check(0, kCmdFlush, 0, 0, ro).error, 0u);
}

TEST(NbdProtocol, Replies) {
  const auto simple = encode_simple_reply(kErrIo, 7);
  EXPECT_EQ(std::vector<std::byte>(simple.begin(), simple.end()),
            be({{kSimpleReplyMagic, 4}, {kErrIo, 4}, {7, 8}}));
  const auto od = encode_offset_data_header(9, 4096, 512, true);
  EXPECT_EQ(std::vector<std::byte>(od.begin(), od.end()), be({{kStructuredReplyMagic, 4},
                                                              {kReplyFlagDone, 2},
                                                              {kReplyTypeOffsetData, 2},
                                                              {9, 8},
                                                              {520, 4},
                                                              {4096, 8}}));
  const auto none = encode_none_chunk(3);
  EXPECT_EQ(
      std::vector<std::byte>(none.begin(), none.end()),
      be({{kStructuredReplyMagic, 4}, {kReplyFlagDone, 2}, {kReplyTypeNone, 2}, {3, 8}, {0, 4}}));
  std::array<std::byte, kErrorChunkMaxSize> buf{};
  const std::size_t n = encode_error_chunk(buf, 5, kErrInval, "bad");
  EXPECT_EQ(std::vector<std::byte>(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n)),
            be({{kStructuredReplyMagic, 4},
                {kReplyFlagDone, 2},
                {kReplyTypeError, 2},
                {5, 8},
                {9, 4},
                {kErrInval, 4},
                {3, 2},
                {'b', 1},
                {'a', 1},
                {'d', 1}}));
  const std::string huge(5000, 'x');
  EXPECT_EQ(encode_error_chunk(buf, 5, kErrIo, huge), kErrorChunkMaxSize);
  EXPECT_EQ(load(buf, 24, 2), kMaxErrorMessage);
}

TEST(NbdProtocol, ErrorMapping) {
  EXPECT_EQ(nbd_error_for(Errc::kIoError), kErrIo);
  EXPECT_EQ(nbd_error_for(Errc::kInvalidArgument), kErrInval);
  EXPECT_EQ(nbd_error_for(Errc::kOutOfRange), kErrInval);
  EXPECT_EQ(nbd_error_for(Errc::kNoSpace), kErrNoSpc);
  EXPECT_EQ(nbd_error_for(Errc::kUnsupported), kErrNotSup);
  EXPECT_EQ(nbd_error_for(Errc::kCorrupt), kErrIo);
  EXPECT_EQ(nbd_error_for(Errc::kInternal), kErrIo);
}

// Random bytes through every parser: nothing may read out of bounds (ASan builds check), and
// what parses must be self-consistent.
TEST(NbdProtocol, RandomInputNeverMisparses) {
  std::mt19937_64 rng(42);
  const ExportLimits lim{1 << 30, 512, kMaxPayload, false};
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::byte> b(rng() % 48);
    for (auto& x : b)
      x = static_cast<std::byte>(rng());
    if (b.size() >= 8 && i % 2 == 0) {  // give half of them a valid magic
      const auto m = be({{i % 4 == 0 ? kOptMagic : std::uint64_t{kRequestMagic} << 32, 8}});
      std::copy(m.begin(), m.begin() + (i % 4 == 0 ? 8 : 4), b.begin());
    }
    OptionHeader h;
    (void)parse_option_header(b, h);
    (void)parse_client_flags(b);
    auto info = parse_info_request(b);
    if (info) {
      EXPECT_LE(info->name.size(), b.size());
    }
    auto r = parse_request_header(b);
    if (r) {
      const RequestCheck c = check_request(*r, lim);
      if (c.error == 0 && r->type != kCmdDisc && r->type != kCmdFlush) {
        EXPECT_LE(r->offset + r->length, lim.size);
      }
      EXPECT_LE(c.payload, kMaxPayload);
    }
  }
}

}  // namespace
}  // namespace graid::nbd
