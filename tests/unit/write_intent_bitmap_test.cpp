// Write-intent bitmap: layout and region sizing, header encode/decode (pinned bytes, every
// corruption class, random damage never crashes), and the bitmap itself over file members in a
// temp dir: counting, persistence before begin_write() returns (checked by reading the files),
// no I/O on the fast path, member errors, load() union and rejection, clearing, dirty ranges, and
// concurrent begin/end with a clearer running (also run under TSan).
#include "meta/write_intent_bitmap.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gate_member.h"
#include "graid/member.h"
#include "meta/crc32c.h"
#include "meta/metadata_io.h"
#include "temp_dir.h"

namespace graid::meta {
namespace {

using namespace std::chrono_literals;

#ifndef PR_GET_IO_FLUSHER
#define PR_GET_IO_FLUSHER 58
#endif

constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr std::uint64_t kGiB = 1024 * kMiB;
// The array's superblock event count the clears are told (the re-add baseline), and what the
// fixtures' bitmaps are created with: the same, so a clear writes no header of its own.
constexpr std::uint64_t kSbEvents = 1;

ArrayUuidBytes test_uuid(std::uint8_t seed) {
  ArrayUuidBytes u{};
  for (std::size_t i = 0; i < u.size(); ++i)
    u[i] = static_cast<std::byte>(seed + i);
  return u;
}

template <typename T>
T read_le(std::span<const std::byte> b, std::size_t off) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<std::uint64_t>(b[off + i]) << (8 * i);
  return static_cast<T>(v);
}

template <typename T>
void write_le(std::span<std::byte> b, std::size_t off, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    b[off + i] = static_cast<std::byte>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xff);
}

// Recomputes the header crc (field at byte 12, taken as zero) after a deliberate edit.
void fix_crc(std::span<std::byte> block) {
  write_le<std::uint32_t>(block, 12, 0);
  write_le<std::uint32_t>(block, 12, crc32c(block.first(kBitmapHeaderSize)));
}

// ---- Layout and sizing --------------------------------------------------------------------------

TEST(BitmapLayout, CapacityAndCounts) {
  EXPECT_EQ(bitmap_page_capacity(0), 0u);
  EXPECT_EQ(bitmap_page_capacity(kBitmapPagesOffset), 0u);
  EXPECT_EQ(bitmap_page_capacity(kBitmapPagesOffset + 4096), 1u);
  EXPECT_EQ(bitmap_page_capacity(kMiB), (kMiB - 12288) / 4096);  // 253 pages
  EXPECT_EQ(bitmap_region_count(1, kMiB), 1u);
  EXPECT_EQ(bitmap_region_count(kMiB, kMiB), 1u);
  EXPECT_EQ(bitmap_region_count(kMiB + 1, kMiB), 2u);
  EXPECT_EQ(bitmap_region_count(~std::uint64_t{0}, std::uint64_t{1} << 63), 2u);  // no overflow
  EXPECT_EQ(bitmap_page_count(1), 1u);
  EXPECT_EQ(bitmap_page_count(kBitsPerPage), 1u);
  EXPECT_EQ(bitmap_page_count(kBitsPerPage + 1), 2u);
}

TEST(BitmapLayout, ChooseRegionBytesPicksSmallestFittingPowerOfTwo) {
  // Small arrays get the 1 MiB floor.
  EXPECT_EQ(*choose_region_bytes(1, kMiB), kMiB);
  EXPECT_EQ(*choose_region_bytes(64 * kGiB, kMiB), kMiB);
  // One bit page (32768 bits) below data_offset: 32 GiB fits at 1 MiB, 32 GiB + 1 needs 2 MiB.
  const std::uint64_t one_page = kBitmapPagesOffset + 4096;
  EXPECT_EQ(*choose_region_bytes(32 * kGiB, one_page), kMiB);
  EXPECT_EQ(*choose_region_bytes(32 * kGiB + 1, one_page), 2 * kMiB);
  EXPECT_EQ(*choose_region_bytes(1000 * kGiB, one_page), 32 * kMiB);
  // A huge member with the default 1 MiB data offset (253 pages).
  for (const std::uint64_t size : {kGiB, 7 * 1024 * kGiB, 100 * 1024 * kGiB, ~std::uint64_t{0}}) {
    auto r = choose_region_bytes(size, kMiB);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_TRUE(std::has_single_bit(*r));
    EXPECT_GE(*r, kDefaultMinRegionBytes);
    EXPECT_TRUE(validate_layout(kMiB, size, *r).is_ok());
    if (*r > kDefaultMinRegionBytes) {
      EXPECT_FALSE(validate_layout(kMiB, size, *r / 2).is_ok());
    }
  }
  EXPECT_EQ(choose_region_bytes(0, kMiB).status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(choose_region_bytes(kGiB, kBitmapPagesOffset).status().code(), Errc::kNoSpace);
}

TEST(BitmapLayout, ValidateLayoutRules) {
  EXPECT_TRUE(validate_layout(kMiB, kGiB, 64 * 1024).is_ok());
  EXPECT_EQ(validate_layout(kMiB, kGiB, 32 * 1024).code(), Errc::kInvalidArgument);  // < 64K
  EXPECT_EQ(validate_layout(kMiB, kGiB, 3 * kMiB).code(), Errc::kInvalidArgument);   // not 2^n
  EXPECT_EQ(validate_layout(kMiB, kGiB, 0).code(), Errc::kInvalidArgument);
  EXPECT_EQ(validate_layout(kMiB, 0, kMiB).code(), Errc::kInvalidArgument);
  EXPECT_EQ(validate_layout(kMiB + 512, kGiB, kMiB).code(), Errc::kInvalidArgument);
  const Status s = validate_layout(kBitmapPagesOffset + 4096, 64 * kGiB, kMiB);  // needs 2 pages
  EXPECT_EQ(s.code(), Errc::kNoSpace);
  EXPECT_NE(s.message().find("bit pages"), std::string::npos) << s.message();
}

// ---- Header encoding ----------------------------------------------------------------------------

BitmapHeader sample_header() {
  BitmapHeader h;
  h.array_uuid = test_uuid(0x40);
  h.region_bytes = 2 * kMiB;
  h.data_size = 100 * kGiB + 4096;
  h.data_offset = kMiB;
  h.events = 0x0102030405060708ull;
  h.events_cleared = 0x1122334455667788ull;
  return h;
}

TEST(BitmapHeaderCodec, RoundTripAndPinnedLayout) {
  const BitmapHeader h = sample_header();
  EncodedBitmapHeader block{};
  ASSERT_TRUE(encode_header(h, block).is_ok());
  auto decoded = decode_header(block);
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, h);

  // The byte layout documented in docs/on-disk-format.md.
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(block.data()), 8), "graid-bm");
  EXPECT_EQ(read_le<std::uint16_t>(block, 8), kBitmapMajorVersion);
  EXPECT_EQ(read_le<std::uint16_t>(block, 10), kBitmapMinorVersion);
  EXPECT_EQ(block[16], std::byte{0x40});
  EXPECT_EQ(block[31], std::byte{0x4f});
  EXPECT_EQ(read_le<std::uint64_t>(block, 32), h.region_bytes);
  EXPECT_EQ(read_le<std::uint64_t>(block, 40), h.region_count());
  EXPECT_EQ(h.region_count(), 51201u);
  EXPECT_EQ(read_le<std::uint64_t>(block, 48), h.data_size);
  EXPECT_EQ(read_le<std::uint64_t>(block, 56), h.data_offset);
  EXPECT_EQ(read_le<std::uint64_t>(block, 64), h.events);
  EXPECT_EQ(read_le<std::uint64_t>(block, 72), kBitmapPagesOffset);
  EXPECT_EQ(read_le<std::uint64_t>(block, 80), h.events_cleared);  // minor 1
  EXPECT_EQ(h.events_cleared, 0x1122334455667788u);
  for (std::size_t i = 88; i < block.size(); ++i)
    ASSERT_EQ(block[i], std::byte{0}) << i;
  // crc32c over the block with the crc field as zero.
  EncodedBitmapHeader copy = block;
  write_le<std::uint32_t>(copy, 12, 0);
  EXPECT_EQ(read_le<std::uint32_t>(block, 12), crc32c(copy));
}

TEST(BitmapHeaderCodec, EncodeRefusesBadInput) {
  BitmapHeader h = sample_header();
  std::array<std::byte, 100> small{};
  EXPECT_EQ(encode_header(h, small).code(), Errc::kInvalidArgument);
  h.region_bytes = 1000;
  EncodedBitmapHeader block{};
  EXPECT_EQ(encode_header(h, block).code(), Errc::kInvalidArgument);
}

// Decoding `block` fails with `code` and a message containing `what`.
void expect_decode_error(std::span<const std::byte> block, Errc code, const std::string& what) {
  auto r = decode_header(block);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
}

TEST(BitmapHeaderCodec, CorruptionClasses) {
  EncodedBitmapHeader good{};
  ASSERT_TRUE(encode_header(sample_header(), good).is_ok());

  expect_decode_error(std::span(good).first(4095), Errc::kCorrupt, "truncated");
  {
    auto b = good;
    b[3] = std::byte{'X'};
    expect_decode_error(b, Errc::kCorrupt, "magic");
  }
  {
    auto b = good;
    b[40] ^= std::byte{1};
    expect_decode_error(b, Errc::kCorrupt, "crc32c");
  }
  {
    auto b = good;
    b[4000] = std::byte{0xff};  // even the reserved bytes are under the crc
    expect_decode_error(b, Errc::kCorrupt, "crc32c");
  }
  {
    auto b = good;
    write_le<std::uint16_t>(b, 8, 2);
    fix_crc(b);
    expect_decode_error(b, Errc::kUnsupported, "major version 2");
  }
  {
    auto b = good;
    write_le<std::uint16_t>(b, 8, 0);
    fix_crc(b);
    expect_decode_error(b, Errc::kCorrupt, "major version 0");
  }
  {
    auto b = good;
    write_le<std::uint64_t>(b, 40, 51200);  // region count does not match data_size
    fix_crc(b);
    expect_decode_error(b, Errc::kCorrupt, "region count 51200 does not match");
  }
  {
    auto b = good;
    write_le<std::uint64_t>(b, 32, 64 * 1024);  // 1.6M regions: 50 pages, fine...
    write_le<std::uint64_t>(b, 40, bitmap_region_count(100 * kGiB + 4096, 64 * 1024));
    fix_crc(b);
    EXPECT_TRUE(decode_header(b).is_ok());
    write_le<std::uint64_t>(b, 56, 64 * 1024);  // ...but not below a 64 KiB data offset
    fix_crc(b);
    expect_decode_error(b, Errc::kCorrupt, "bit pages");
  }
  {
    auto b = good;
    write_le<std::uint64_t>(b, 32, 3 * kMiB);
    fix_crc(b);
    expect_decode_error(b, Errc::kCorrupt, "power of two");
  }
  {
    auto b = good;
    write_le<std::uint64_t>(b, 72, 0);
    fix_crc(b);
    expect_decode_error(b, Errc::kCorrupt, "pages offset");
  }
  {
    // A newer minor decodes (its fields would live in reserved bytes).
    auto b = good;
    write_le<std::uint16_t>(b, 10, 7);
    fix_crc(b);
    auto r = decode_header(b);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->minor_version, 7);
  }
}

TEST(BitmapHeaderCodec, RandomDamageNeverCrashes) {
  EncodedBitmapHeader good{};
  ASSERT_TRUE(encode_header(sample_header(), good).is_ok());
  std::mt19937_64 rng(42);
  for (int iter = 0; iter < 3000; ++iter) {
    auto b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f)
      b[rng() % 96] ^= static_cast<std::byte>(1 + rng() % 255);
    if (iter % 2 == 0) fix_crc(b);  // get past the crc to the field checks
    auto r = decode_header(b);
    if (r.is_ok()) {
      // Whatever decodes re-encodes to a header that decodes the same (the minor version and
      // reserved bytes are written as this version's).
      EncodedBitmapHeader again{};
      ASSERT_TRUE(encode_header(*r, again).is_ok());
      auto r2 = decode_header(again);
      ASSERT_TRUE(r2.is_ok()) << r2.status().to_string();
      r->minor_version = kBitmapMinorVersion;
      EXPECT_EQ(*r2, *r);
    } else {
      EXPECT_TRUE(r.status().code() == Errc::kCorrupt || r.status().code() == Errc::kUnsupported);
    }
  }
  // Arbitrary bytes, including a short buffer.
  for (int iter = 0; iter < 200; ++iter) {
    std::vector<std::byte> junk(rng() % 5000);
    for (auto& x : junk)
      x = static_cast<std::byte>(rng());
    EXPECT_FALSE(decode_header(junk).is_ok());
  }
}

// ---- A member wrapper that counts, fails on command and tracks durability --------------------

// Forwards to a file member. Counts bitmap writes and flushes, fails writes while `fail_writes`
// is set, and keeps a shadow of the bitmap pages that reached stable storage (copied at each
// successful flush) so the concurrency test can check durability at any moment.
class CountingMember final : public MemberDevice {
 public:
  CountingMember(std::unique_ptr<MemberDevice> inner, std::uint64_t pages)
      : inner_(std::move(inner)),
        pending_(pages * kBitmapPageSize, std::byte{0}),
        durable_(pending_) {}

  const std::string& path() const noexcept override { return inner_->path(); }
  std::uint64_t size() const noexcept override { return inner_->size(); }
  bool direct_io() const noexcept override { return inner_->direct_io(); }
  void submit(IoContext& ctx, MemberRequest& req) override { inner_->submit(ctx, req); }
  Status read_sync(std::uint64_t offset, std::span<std::byte> buf) override {
    return inner_->read_sync(offset, buf);
  }
  Status write_sync(std::uint64_t offset, std::span<const std::byte> buf) override {
    writes.fetch_add(1);
    if (fail_writes.load()) return make_error(Errc::kIoError, "injected write error");
    GRAID_RETURN_IF_ERROR(inner_->write_sync(offset, buf));
    std::lock_guard lock(mutex_);
    log_.push_back(offset);
    if (offset >= kBitmapPagesOffset) {
      const std::uint64_t at = offset - kBitmapPagesOffset;
      if (at + buf.size() <= pending_.size())
        std::copy(buf.begin(), buf.end(), pending_.begin() + static_cast<std::ptrdiff_t>(at));
    }
    return Status::ok();
  }
  Status flush_sync() override {
    flushes.fetch_add(1);
    GRAID_RETURN_IF_ERROR(inner_->flush_sync());
    std::lock_guard lock(mutex_);
    log_.push_back(kFlushed);
    durable_ = pending_;
    return Status::ok();
  }

  // Whether region `r`'s bit is on stable storage (as of the last successful flush).
  bool durable_bit(std::uint64_t r) {
    std::lock_guard lock(mutex_);
    return ((static_cast<unsigned>(durable_[r / 8]) >> (r % 8)) & 1) != 0;
  }

  std::atomic<std::uint64_t> writes{0};
  std::atomic<std::uint64_t> flushes{0};
  std::atomic<bool> fail_writes{false};

  // What reached the member since the last call, in order: the offset of each write, kFlushed
  // for each flush.
  static constexpr std::uint64_t kFlushed = ~std::uint64_t{0};
  std::vector<std::uint64_t> take_log() {
    std::lock_guard lock(mutex_);
    return std::exchange(log_, {});
  }

 private:
  std::unique_ptr<MemberDevice> inner_;
  std::mutex mutex_;
  std::vector<std::uint64_t> log_;
  std::vector<std::byte> pending_;
  std::vector<std::byte> durable_;
};

// ---- Fixture: file members in a temp dir --------------------------------------------------------

class BitmapTest : public ::testing::Test {
 protected:
  static constexpr std::uint32_t kMembers = 3;

  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("graid-bm-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    params_.array_uuid = test_uuid(0x10);
    params_.data_offset = kMiB;
    params_.data_size = 256 * kMiB + 12345;  // 257 regions of 1 MiB, the last one partial
    params_.region_bytes = kMiB;
    params_.events_cleared = kSbEvents;
    open_members();
  }

  void TearDown() override {
    members_.clear();
    std::filesystem::remove_all(dir_);
  }

  std::string path(std::uint32_t m) const { return (dir_ / ("m" + std::to_string(m))).string(); }

  // (Re)opens the member files (created on first use) behind counting wrappers.
  void open_members() {
    members_.clear();
    ptrs_.clear();
    for (std::uint32_t m = 0; m < kMembers; ++m) {
      OpenOptions opts;
      opts.create = true;
      opts.create_size = kMiB;  // the bitmap area only; the data area is never touched here
      auto dev = open_member(path(m), opts);
      ASSERT_TRUE(dev.is_ok()) << dev.status().to_string();
      members_.push_back(std::make_unique<CountingMember>(std::move(dev).value(), 253));
      ptrs_.push_back(members_.back().get());
    }
  }

  WriteIntentBitmap fresh() {
    auto bm = WriteIntentBitmap::create_fresh(ptrs_, params_);
    EXPECT_TRUE(bm.is_ok()) << bm.status().to_string();
    Status s = bm->write_all();
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return std::move(bm).value();
  }

  // Reads `len` bytes at `offset` of member file `m` directly, past the member layer.
  std::vector<std::byte> read_file(std::uint32_t m, std::uint64_t offset, std::size_t len) const {
    std::vector<std::byte> out(len);
    std::ifstream f(path(m), std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    f.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(len));
    EXPECT_TRUE(f.good()) << path(m);
    return out;
  }
  void write_file(std::uint32_t m, std::uint64_t offset, std::span<const std::byte> bytes) const {
    std::fstream f(path(m), std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(f.good());
  }

  // Region `r`'s bit as stored in member file `m`.
  bool file_bit(std::uint32_t m, std::uint64_t r) const {
    const auto b = read_file(m, kBitmapPagesOffset + r / 8, 1);
    return ((static_cast<unsigned>(b[0]) >> (r % 8)) & 1) != 0;
  }
  void set_file_bit(std::uint32_t m, std::uint64_t r, bool value) const {
    auto b = read_file(m, kBitmapPagesOffset + r / 8, 1);
    const auto mask = static_cast<std::byte>(1u << (r % 8));
    b[0] = value ? (b[0] | mask) : (b[0] & ~mask);
    write_file(m, kBitmapPagesOffset + r / 8, b);
  }
  std::uint64_t total_writes() const {
    std::uint64_t n = 0;
    for (const auto& m : members_)
      n += m->writes.load();
    return n;
  }

  std::filesystem::path dir_;
  BitmapParams params_;
  std::vector<std::unique_ptr<CountingMember>> members_;
  std::vector<MemberDevice*> ptrs_;
};

TEST_F(BitmapTest, FreshBitmapIsOnEveryMember) {
  WriteIntentBitmap bm = fresh();
  EXPECT_EQ(bm.region_bytes(), kMiB);
  EXPECT_EQ(bm.region_count(), 257u);
  EXPECT_EQ(bm.events(), 1u);
  EXPECT_TRUE(bm.dirty_ranges().empty());
  for (std::uint32_t m = 0; m < kMembers; ++m) {
    auto h = decode_header(read_file(m, kBitmapOffset, kBitmapHeaderSize));
    ASSERT_TRUE(h.is_ok()) << h.status().to_string();
    EXPECT_EQ(h->array_uuid, params_.array_uuid);
    EXPECT_EQ(h->region_bytes, kMiB);
    EXPECT_EQ(h->data_size, params_.data_size);
    EXPECT_EQ(h->events, 1u);
    EXPECT_EQ(members_[m]->flushes.load(), 1u);
  }
}

TEST_F(BitmapTest, CreateFreshChoosesRegionAndRefusesBadLayouts) {
  params_.region_bytes = 0;
  auto bm = WriteIntentBitmap::create_fresh(ptrs_, params_);
  ASSERT_TRUE(bm.is_ok());
  EXPECT_EQ(bm->region_bytes(), kMiB);
  params_.region_bytes = 12345;
  EXPECT_EQ(WriteIntentBitmap::create_fresh(ptrs_, params_).status().code(),
            Errc::kInvalidArgument);
  params_.region_bytes = 64 * 1024;
  params_.data_offset = kBitmapPagesOffset + 4096;
  params_.data_size = 4 * kGiB;  // 65536 regions: 2 pages, 1 fits
  EXPECT_EQ(WriteIntentBitmap::create_fresh(ptrs_, params_).status().code(), Errc::kNoSpace);
}

TEST_F(BitmapTest, BeginEndCountsPerRegion) {
  WriteIntentBitmap bm = fresh();
  ASSERT_TRUE(bm.begin_write(0, 4096).is_ok());
  ASSERT_TRUE(bm.begin_write(kMiB - 4096, 8192).is_ok());   // straddles regions 0 and 1
  ASSERT_TRUE(bm.begin_write(3 * kMiB, 3 * kMiB).is_ok());  // regions 3..5 exactly
  EXPECT_EQ(bm.in_flight(0), 2u);
  EXPECT_EQ(bm.in_flight(1), 1u);
  EXPECT_EQ(bm.in_flight(2), 0u);
  EXPECT_EQ(bm.in_flight(3), 1u);
  EXPECT_EQ(bm.in_flight(5), 1u);
  EXPECT_EQ(bm.in_flight(6), 0u);
  EXPECT_TRUE(bm.begin_write(0, 0).is_ok());  // empty: nothing
  bm.end_write(0, 4096);
  bm.end_write(kMiB - 4096, 8192);
  bm.end_write(3 * kMiB, 3 * kMiB);
  for (std::uint64_t r = 0; r < bm.region_count(); ++r)
    EXPECT_EQ(bm.in_flight(r), 0u) << r;
  // Bits stay set after end_write.
  EXPECT_TRUE(bm.is_dirty(0) && bm.is_dirty(1) && bm.is_dirty(3) && bm.is_dirty(5));
  EXPECT_FALSE(bm.is_dirty(2) || bm.is_dirty(6));
  EXPECT_EQ(bm.region_of(kMiB - 1), 0u);
  EXPECT_EQ(bm.region_of(kMiB), 1u);

  // The last, partial region is usable to the byte; beyond it is out of range.
  EXPECT_TRUE(bm.begin_write(params_.data_size - 512, 512).is_ok());
  bm.end_write(params_.data_size - 512, 512);
  EXPECT_EQ(bm.begin_write(params_.data_size - 512, 1024).code(), Errc::kOutOfRange);
  EXPECT_EQ(bm.begin_write(params_.data_size, 1).code(), Errc::kOutOfRange);
  EXPECT_EQ(bm.begin_write(~std::uint64_t{0}, 2).code(), Errc::kOutOfRange);
}

TEST_F(BitmapTest, SetBitIsOnEveryMemberBeforeBeginWriteReturns) {
  WriteIntentBitmap bm = fresh();
  const std::uint64_t flushes_before = members_[0]->flushes.load();
  ASSERT_TRUE(bm.begin_write(200 * kMiB + 4096, 4096).is_ok());
  for (std::uint32_t m = 0; m < kMembers; ++m) {
    EXPECT_TRUE(file_bit(m, 200)) << "member " << m;
    EXPECT_FALSE(file_bit(m, 199));
    EXPECT_FALSE(file_bit(m, 201));
    EXPECT_TRUE(members_[m]->durable_bit(200));  // written *and* flushed
    EXPECT_EQ(members_[m]->flushes.load(), flushes_before + 1);
  }
  bm.end_write(200 * kMiB + 4096, 4096);
}

TEST_F(BitmapTest, NoDiskWriteWhenBitAlreadySet) {
  WriteIntentBitmap bm = fresh();
  ASSERT_TRUE(bm.begin_write(5 * kMiB, 4096).is_ok());
  const std::uint64_t writes = total_writes();
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(bm.begin_write(5 * kMiB + 4096 * (i % 200), 4096).is_ok());
    bm.end_write(5 * kMiB + 4096 * (i % 200), 4096);
  }
  EXPECT_EQ(total_writes(), writes);
  bm.end_write(5 * kMiB, 4096);
  // Touching one new region next to it writes again (once per member).
  ASSERT_TRUE(bm.begin_write(5 * kMiB, kMiB + 4096).is_ok());
  EXPECT_EQ(total_writes(), writes + kMembers);
  bm.end_write(5 * kMiB, kMiB + 4096);
}

TEST_F(BitmapTest, MemberWriteErrorIsReportedThenDroppedMemberIsSkipped) {
  WriteIntentBitmap bm = fresh();
  members_[1]->fail_writes = true;
  std::vector<std::uint32_t> failed;
  const Status s = bm.begin_write(7 * kMiB, 4096, &failed);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), Errc::kIoError);
  EXPECT_NE(s.message().find("member 1 (" + path(1) + ")"), std::string::npos) << s.message();
  EXPECT_EQ(failed, std::vector<std::uint32_t>{1});
  EXPECT_EQ(bm.in_flight(7), 0u);  // nothing stays counted
  EXPECT_FALSE(bm.is_dirty(7));    // not on every live member, so not set for the fast path
  EXPECT_TRUE(file_bit(0, 7));     // the healthy members did get it
  EXPECT_TRUE(file_bit(2, 7));

  bm.drop_member(1);
  const std::uint64_t member1_writes = members_[1]->writes.load();
  ASSERT_TRUE(bm.begin_write(7 * kMiB, 4096).is_ok());
  EXPECT_TRUE(bm.is_dirty(7));
  EXPECT_EQ(bm.in_flight(7), 1u);
  bm.end_write(7 * kMiB, 4096);
  ASSERT_TRUE(bm.begin_write(9 * kMiB, 4096).is_ok());
  bm.end_write(9 * kMiB, 4096);
  ASSERT_TRUE(bm.clear_idle(kSbEvents).is_ok());
  EXPECT_EQ(members_[1]->writes.load(), member1_writes);

  // No live member at all: refuse rather than write unprotected.
  bm.drop_member(0);
  bm.drop_member(2);
  EXPECT_EQ(bm.begin_write(11 * kMiB, 4096).code(), Errc::kIoError);
}

// The re-add baseline (events_cleared): created as given, raised by a clear to the superblock's
// events, on disk on every member before any page that clears a bit under it (a crash between
// leaves the baseline raised and the bits set), and written again only when it moves. load()
// takes the highest the members record, or none when one of them records none (a minor 0
// header, as an older build rewrites it).
TEST_F(BitmapTest, AClearRecordsTheReaddBaselineBeforeAnyPageItClears) {
  WriteIntentBitmap bm = fresh();
  EXPECT_EQ(bm.events_cleared(), kSbEvents);
  for (std::uint32_t m = 0; m < kMembers; ++m) {
    auto h = decode_header(read_file(m, kBitmapOffset, kBitmapHeaderSize));
    ASSERT_TRUE(h.is_ok());
    EXPECT_EQ(h->events_cleared, kSbEvents);
  }
  ASSERT_TRUE(bm.begin_write(3 * kMiB, 4096).is_ok());
  bm.end_write(3 * kMiB, 4096);
  for (auto& m : members_)
    m->take_log();
  const std::uint64_t events_before = bm.events();
  ASSERT_TRUE(bm.clear_idle(9).is_ok());
  EXPECT_FALSE(bm.is_dirty(3));
  EXPECT_EQ(bm.events_cleared(), 9u);
  EXPECT_EQ(bm.events(), events_before + 2);  // the header alone, then with the page
  using Log = std::vector<std::uint64_t>;
  constexpr std::uint64_t F = CountingMember::kFlushed;
  for (std::uint32_t m = 0; m < kMembers; ++m) {
    EXPECT_EQ(members_[m]->take_log(),
              (Log{kBitmapOffset, F, kBitmapPagesOffset, kBitmapOffset, F}))
        << "member " << m;
    auto h = decode_header(read_file(m, kBitmapOffset, kBitmapHeaderSize));
    ASSERT_TRUE(h.is_ok());
    EXPECT_EQ(h->events_cleared, 9u);
    EXPECT_FALSE(file_bit(m, 3));
  }
  // The same baseline again: one write of page and header, as before.
  ASSERT_TRUE(bm.begin_write(4 * kMiB, 4096).is_ok());
  bm.end_write(4 * kMiB, 4096);
  for (auto& m : members_)
    m->take_log();
  ASSERT_TRUE(bm.clear_idle(9).is_ok());
  EXPECT_EQ(members_[0]->take_log(), (Log{kBitmapPagesOffset, kBitmapOffset, F}));
  // Nothing to clear: nothing written, the baseline unmoved.
  ASSERT_TRUE(bm.clear_idle(12).is_ok());
  EXPECT_TRUE(members_[0]->take_log().empty());
  EXPECT_EQ(bm.events_cleared(), 9u);

  // A member's header as an older build rewrites it (minor 0: the field zero).
  BitmapLoadReport report;
  open_members();
  auto loaded = WriteIntentBitmap::load(ptrs_, params_, &report);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->events_cleared(), 9u);
  EXPECT_EQ(report.events_cleared, 9u);
  auto block = read_file(1, kBitmapOffset, kBitmapHeaderSize);
  write_le<std::uint16_t>(block, 10, 0);
  write_le<std::uint64_t>(block, 80, 0);
  fix_crc(block);
  write_file(1, kBitmapOffset, block);
  open_members();
  auto older = WriteIntentBitmap::load(ptrs_, params_, &report);
  ASSERT_TRUE(older.is_ok()) << older.status().to_string();
  EXPECT_EQ(older->events_cleared(), 0u) << "unknown: an older build wrote a header";
  // The next clear records it anew.
  ASSERT_TRUE(older->begin_write(5 * kMiB, 4096).is_ok());
  older->end_write(5 * kMiB, 4096);
  ASSERT_TRUE(older->clear_idle(14).is_ok());
  EXPECT_EQ(older->events_cleared(), 14u);
  auto h = decode_header(read_file(1, kBitmapOffset, kBitmapHeaderSize));
  ASSERT_TRUE(h.is_ok());
  EXPECT_EQ(h->events_cleared, 14u);
  EXPECT_EQ(h->minor_version, kBitmapMinorVersion);
}

TEST_F(BitmapTest, ClearIdleClearsOnlyIdleRegions) {
  WriteIntentBitmap bm = fresh();
  ASSERT_TRUE(bm.begin_write(10 * kMiB, 4096).is_ok());  // stays in flight
  ASSERT_TRUE(bm.begin_write(20 * kMiB, 4096).is_ok());
  bm.end_write(20 * kMiB, 4096);
  ASSERT_TRUE(bm.clear_idle(kSbEvents).is_ok());
  EXPECT_TRUE(bm.is_dirty(10));
  EXPECT_FALSE(bm.is_dirty(20));
  EXPECT_EQ(bm.events(), 2u);
  for (std::uint32_t m = 0; m < kMembers; ++m) {
    EXPECT_TRUE(file_bit(m, 10));
    EXPECT_FALSE(file_bit(m, 20));
    EXPECT_TRUE(members_[m]->durable_bit(10));
    EXPECT_FALSE(members_[m]->durable_bit(20));
    auto h = decode_header(read_file(m, kBitmapOffset, kBitmapHeaderSize));
    ASSERT_TRUE(h.is_ok());
    EXPECT_EQ(h->events, 2u);
  }
  // Nothing to clear: no I/O.
  const std::uint64_t writes = total_writes();
  ASSERT_TRUE(bm.clear_idle(kSbEvents).is_ok());
  EXPECT_EQ(total_writes(), writes);
  bm.end_write(10 * kMiB, 4096);
  ASSERT_TRUE(bm.clear_idle(kSbEvents).is_ok());
  EXPECT_TRUE(bm.dirty_ranges().empty());
  EXPECT_FALSE(file_bit(0, 10));
}

TEST_F(BitmapTest, TwoPhaseClearSkipsRegionsWrittenSinceTheMark) {
  WriteIntentBitmap bm = fresh();
  for (const std::uint64_t r : {1, 2, 3}) {
    ASSERT_TRUE(bm.begin_write(r * kMiB, 4096).is_ok());
    bm.end_write(r * kMiB, 4096);
  }
  ASSERT_TRUE(bm.begin_write(4 * kMiB, 4096).is_ok());  // in flight at the mark
  EXPECT_EQ(bm.mark_clear_candidates(), 3u);
  // Region 2 is written (and completes) after the mark: its data may not be flushed yet.
  ASSERT_TRUE(bm.begin_write(2 * kMiB, 4096).is_ok());
  bm.end_write(2 * kMiB, 4096);
  bm.end_write(4 * kMiB, 4096);  // completes after the mark: not a candidate either
  ASSERT_TRUE(bm.clear_candidates(kSbEvents).is_ok());
  EXPECT_FALSE(bm.is_dirty(1));
  EXPECT_TRUE(bm.is_dirty(2));
  EXPECT_FALSE(bm.is_dirty(3));
  EXPECT_TRUE(bm.is_dirty(4));
  EXPECT_FALSE(file_bit(0, 1));
  EXPECT_TRUE(file_bit(0, 2));
  // Candidates are used up: a second clear_candidates(kSbEvents) does nothing.
  const std::uint64_t writes = total_writes();
  ASSERT_TRUE(bm.clear_candidates(kSbEvents).is_ok());
  EXPECT_EQ(total_writes(), writes);
}

TEST_F(BitmapTest, PinnedRegionsKeepTheirBitsUntilTheyAreUnpinned) {
  WriteIntentBitmap bm = fresh();
  for (const std::uint64_t r : {3, 4, 70}) {
    ASSERT_TRUE(bm.begin_write(r * kMiB, 4096).is_ok());
    bm.end_write(r * kMiB, 4096);
  }
  EXPECT_EQ(bm.pin_dirty(), 3u);
  // A region written after the pin clears as usual.
  ASSERT_TRUE(bm.begin_write(9 * kMiB, 4096).is_ok());
  bm.end_write(9 * kMiB, 4096);
  ASSERT_TRUE(bm.clear_idle(kSbEvents).is_ok());
  EXPECT_FALSE(bm.is_dirty(9));
  for (const std::uint64_t r : {3, 4, 70}) {
    EXPECT_TRUE(bm.is_dirty(r)) << r;
    EXPECT_TRUE(bm.is_pinned(r)) << r;
    EXPECT_TRUE(file_bit(0, r)) << r;
  }
  // The two-phase clear leaves them too.
  EXPECT_EQ(bm.mark_clear_candidates(), 0u);
  // Unpinned only where the whole region lies below the offset: 4 MiB + 1 frees region 3, and
  // region 4 (which ends at 5 MiB) stays.
  bm.unpin_below(4 * kMiB + 1);
  EXPECT_FALSE(bm.is_pinned(3));
  EXPECT_TRUE(bm.is_pinned(4));
  ASSERT_TRUE(bm.clear_idle(kSbEvents).is_ok());
  EXPECT_FALSE(bm.is_dirty(3));
  EXPECT_FALSE(file_bit(0, 3));
  EXPECT_TRUE(bm.is_dirty(4));
  EXPECT_TRUE(file_bit(0, 4));
  // Past the end: every region, the last one included.
  bm.unpin_below(~std::uint64_t{0});
  EXPECT_FALSE(bm.is_pinned(70));
  ASSERT_TRUE(bm.clear_idle(kSbEvents).is_ok());
  EXPECT_TRUE(bm.dirty_ranges().empty());
}

TEST_F(BitmapTest, FailedClearIsRetriedByTheNextClear) {
  WriteIntentBitmap bm = fresh();
  ASSERT_TRUE(bm.begin_write(30 * kMiB, 4096).is_ok());
  bm.end_write(30 * kMiB, 4096);
  members_[2]->fail_writes = true;
  std::vector<std::uint32_t> failed;
  const Status s = bm.clear_idle(kSbEvents, &failed);
  EXPECT_EQ(s.code(), Errc::kIoError);
  EXPECT_EQ(failed, std::vector<std::uint32_t>{2});
  EXPECT_FALSE(bm.is_dirty(30));  // clear in memory; member 2's disk still has it (safe)
  EXPECT_TRUE(file_bit(2, 30));
  members_[2]->fail_writes = false;
  ASSERT_TRUE(bm.clear_idle(kSbEvents).is_ok());  // rewrites the stale page
  EXPECT_FALSE(file_bit(2, 30));
}

TEST_F(BitmapTest, DirtyRangesMergeAdjacentRegionsAndClipTheLast) {
  WriteIntentBitmap bm = fresh();
  for (const std::uint64_t r : {1, 2, 3, 5, 63, 64, 256}) {
    const std::uint64_t off = r * kMiB;
    ASSERT_TRUE(bm.begin_write(off, 512).is_ok());
    bm.end_write(off, 512);
  }
  using Ranges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  EXPECT_EQ(
      bm.dirty_ranges(),
      (Ranges{{kMiB, 3 * kMiB}, {5 * kMiB, kMiB}, {63 * kMiB, 2 * kMiB}, {256 * kMiB, 12345}}));
}

TEST_F(BitmapTest, MultiPageBitmap) {
  // 64 KiB regions over 5 GiB: 81920 regions in 3 bit pages.
  params_.region_bytes = 64 * 1024;
  params_.data_size = 5 * kGiB;
  WriteIntentBitmap bm = fresh();
  const std::uint64_t boundary = kBitsPerPage * 64 * 1024;  // first byte of page 1's regions
  const std::uint64_t writes = total_writes();
  ASSERT_TRUE(bm.begin_write(boundary - 4096, 8192).is_ok());  // spans pages 0 and 1
  EXPECT_EQ(total_writes(), writes + 2 * kMembers);
  for (std::uint32_t m = 0; m < kMembers; ++m) {
    EXPECT_TRUE(file_bit(m, kBitsPerPage - 1));
    EXPECT_TRUE(file_bit(m, kBitsPerPage));
  }
  ASSERT_TRUE(bm.begin_write(5 * kGiB - 4096, 4096).is_ok());
  EXPECT_TRUE(file_bit(0, 81919));
  bm.end_write(boundary - 4096, 8192);
  bm.end_write(5 * kGiB - 4096, 4096);
  using Ranges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  EXPECT_EQ(bm.dirty_ranges(),
            (Ranges{{boundary - 64 * 1024, 128 * 1024}, {5 * kGiB - 64 * 1024, 64 * 1024}}));
}

// ---- load() -------------------------------------------------------------------------------------

TEST_F(BitmapTest, LoadTakesTheUnionAndRepairsMembers) {
  {
    WriteIntentBitmap bm = fresh();
    ASSERT_TRUE(bm.begin_write(4 * kMiB, 4096).is_ok());  // "crash" with it in flight
    ASSERT_TRUE(bm.begin_write(9 * kMiB, 4096).is_ok());
  }
  set_file_bit(0, 9, false);   // member 0 missed the update for region 9
  set_file_bit(2, 100, true);  // member 2 alone knows about region 100
  // A bit beyond region_count (garbage) must be ignored.
  set_file_bit(1, 300, true);
  open_members();
  BitmapLoadReport report;
  params_.region_bytes = 0;  // take it from the headers
  auto bm = WriteIntentBitmap::load(ptrs_, params_, &report);
  ASSERT_TRUE(bm.is_ok()) << bm.status().to_string();
  EXPECT_EQ(bm->region_bytes(), kMiB);
  using Ranges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  EXPECT_EQ(bm->dirty_ranges(), (Ranges{{4 * kMiB, kMiB}, {9 * kMiB, kMiB}, {100 * kMiB, kMiB}}));
  EXPECT_EQ(report.accepted, (std::vector<std::uint32_t>{0, 1, 2}));
  EXPECT_TRUE(report.rejected.empty());
  EXPECT_EQ(report.rewritten, (std::vector<std::uint32_t>{0, 1}));  // 2 already held the union
  EXPECT_EQ(report.events, 1u);
  for (std::uint32_t m = 0; m < kMembers; ++m) {
    EXPECT_TRUE(file_bit(m, 4) && file_bit(m, 9) && file_bit(m, 100)) << m;
    EXPECT_FALSE(file_bit(m, 300));
  }
  // Fresh counters: nothing is in flight after a load.
  EXPECT_EQ(bm->in_flight(4), 0u);
  // The loaded bitmap is usable: a set bit needs no I/O, a clear cleans everything.
  const std::uint64_t writes = total_writes();
  ASSERT_TRUE(bm->begin_write(100 * kMiB, 4096).is_ok());
  EXPECT_EQ(total_writes(), writes);
  bm->end_write(100 * kMiB, 4096);
  ASSERT_TRUE(bm->clear_idle(kSbEvents).is_ok());
  EXPECT_TRUE(bm->dirty_ranges().empty());
}

TEST_F(BitmapTest, LoadRejectsCorruptAndForeignHeadersWithClearErrors) {
  {
    WriteIntentBitmap bm = fresh();
    ASSERT_TRUE(bm.begin_write(4 * kMiB, 4096).is_ok());
  }
  auto header = read_file(1, kBitmapOffset, kBitmapHeaderSize);
  header[50] ^= std::byte{0x10};
  write_file(1, kBitmapOffset, header);  // member 1: bad crc
  open_members();
  BitmapLoadReport report;
  auto bm = WriteIntentBitmap::load(ptrs_, params_, &report);
  ASSERT_TRUE(bm.is_ok()) << bm.status().to_string();
  EXPECT_EQ(report.accepted, (std::vector<std::uint32_t>{0, 2}));
  ASSERT_EQ(report.rejected.size(), 1u);
  EXPECT_EQ(report.rejected[0].member, 1u);
  EXPECT_EQ(report.rejected[0].status.code(), Errc::kCorrupt);
  EXPECT_NE(report.rejected[0].status.message().find("member 1"), std::string::npos);
  EXPECT_NE(report.rejected[0].status.message().find("crc32c"), std::string::npos);
  EXPECT_EQ(report.rewritten, std::vector<std::uint32_t>{1});
  EXPECT_TRUE(decode_header(read_file(1, kBitmapOffset, kBitmapHeaderSize)).is_ok());
  EXPECT_TRUE(file_bit(1, 4));

  // Another array's uuid, a different data size or region size: each named.
  BitmapParams other = params_;
  other.array_uuid = test_uuid(0x77);
  auto r = WriteIntentBitmap::load(ptrs_, other);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Errc::kCorrupt);
  EXPECT_NE(r.status().message().find("another array"), std::string::npos);
  EXPECT_NE(r.status().message().find("member 2"), std::string::npos);
  other = params_;
  other.data_size += kMiB;
  r = WriteIntentBitmap::load(ptrs_, other);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("covers data offset"), std::string::npos);
  other = params_;
  other.region_bytes = 2 * kMiB;
  r = WriteIntentBitmap::load(ptrs_, other);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("region size"), std::string::npos);

  // Every copy corrupt: an error listing every member's reason, and nothing written.
  for (std::uint32_t m = 0; m < kMembers; ++m) {
    auto h = read_file(m, kBitmapOffset, kBitmapHeaderSize);
    h[0] = std::byte{'X'};
    write_file(m, kBitmapOffset, h);
  }
  const std::uint64_t writes = total_writes();
  r = WriteIntentBitmap::load(ptrs_, params_);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Errc::kCorrupt);
  for (std::uint32_t m = 0; m < kMembers; ++m)
    EXPECT_NE(r.status().message().find("member " + std::to_string(m)), std::string::npos);
  EXPECT_NE(r.status().message().find("magic"), std::string::npos);
  EXPECT_EQ(total_writes(), writes);
}

TEST_F(BitmapTest, LoadRefusesMembersThatDisagreeOnRegionSize) {
  { WriteIntentBitmap bm = fresh(); }
  // Member 2 carries a (valid) bitmap of the same array with 2 MiB regions.
  BitmapHeader h;
  h.array_uuid = params_.array_uuid;
  h.region_bytes = 2 * kMiB;
  h.data_size = params_.data_size;
  h.data_offset = params_.data_offset;
  EncodedBitmapHeader block{};
  ASSERT_TRUE(encode_header(h, block).is_ok());
  write_file(2, kBitmapOffset, block);
  open_members();
  params_.region_bytes = 0;
  auto r = WriteIntentBitmap::load(ptrs_, params_);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Errc::kCorrupt);
  EXPECT_NE(r.status().message().find("disagree"), std::string::npos) << r.status().message();
  // Naming the size settles it: member 2 is rejected and repaired.
  params_.region_bytes = kMiB;
  BitmapLoadReport report;
  auto bm = WriteIntentBitmap::load(ptrs_, params_, &report);
  ASSERT_TRUE(bm.is_ok()) << bm.status().to_string();
  ASSERT_EQ(report.rejected.size(), 1u);
  EXPECT_EQ(report.rejected[0].member, 2u);
  EXPECT_EQ(report.rewritten, std::vector<std::uint32_t>{2});
}

TEST_F(BitmapTest, LoadSkipsMissingMembersAndReportsOnesBehind) {
  {
    WriteIntentBitmap bm = fresh();
    ASSERT_TRUE(bm.begin_write(3 * kMiB, 4096).is_ok());
    bm.end_write(3 * kMiB, 4096);
    bm.drop_member(0);
    ASSERT_TRUE(bm.clear_idle(kSbEvents).is_ok());  // members 1, 2 at events 2; member 0 still at 1
  }
  open_members();
  BitmapLoadReport report;
  std::vector<MemberDevice*> with_gap = ptrs_;
  auto bm = WriteIntentBitmap::load(with_gap, params_, &report);
  ASSERT_TRUE(bm.is_ok());
  EXPECT_EQ(report.events, 2u);
  EXPECT_EQ(report.behind, std::vector<std::uint32_t>{0});
  EXPECT_EQ(report.rewritten, (std::vector<std::uint32_t>{1, 2}));  // they lack member 0's bit
  EXPECT_TRUE(bm->is_dirty(3));  // the union keeps member 0's stale bit: safe, an extra resync

  with_gap[1] = nullptr;  // a missing member is neither read nor written
  const std::uint64_t writes1 = members_[1]->writes.load();
  auto bm2 = WriteIntentBitmap::load(with_gap, params_, &report);
  ASSERT_TRUE(bm2.is_ok());
  EXPECT_EQ(report.accepted, (std::vector<std::uint32_t>{0, 2}));
  ASSERT_TRUE(bm2->clear_idle(kSbEvents).is_ok());
  EXPECT_EQ(members_[1]->writes.load(), writes1);
}

// ---- Concurrency --------------------------------------------------------------------------------

TEST_F(BitmapTest, ConcurrentBeginEndKeepsCountersExact) {
  WriteIntentBitmap bm = fresh();
  constexpr int kThreads = 4;
  constexpr int kHeld = 50;
  std::atomic<int> ready{0};
  std::atomic<bool> release{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t));
      std::vector<std::pair<std::uint64_t, std::uint64_t>> held;
      for (int i = 0; i < 2000; ++i) {
        // Overlapping ranges over regions 0..15, some spanning two or three regions.
        const std::uint64_t off = (rng() % (16 * 256)) * 4096;
        const std::uint64_t len = 4096 * (1 + rng() % 600);
        const std::uint64_t end = std::min<std::uint64_t>(off + len, 16 * kMiB);
        if (!bm.begin_write(off, end - off).is_ok()) std::abort();
        if (static_cast<int>(held.size()) < kHeld && i % 7 == 0) {
          held.emplace_back(off, end - off);
        } else {
          bm.end_write(off, end - off);
        }
      }
      ready.fetch_add(1);
      while (!release.load())
        std::this_thread::yield();
      for (const auto& [off, len] : held)
        bm.end_write(off, len);
    });
  }
  while (ready.load() < kThreads)
    std::this_thread::yield();
  // Only the held writes are counted now. Recompute them from the same seeds.
  std::vector<std::uint32_t> expected(16, 0);
  for (int t = 0; t < kThreads; ++t) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(t));
    int held = 0;
    for (int i = 0; i < 2000; ++i) {
      const std::uint64_t off = (rng() % (16 * 256)) * 4096;
      const std::uint64_t len = 4096 * (1 + rng() % 600);
      const std::uint64_t end = std::min<std::uint64_t>(off + len, 16 * kMiB);
      if (held < kHeld && i % 7 == 0) {
        ++held;
        for (std::uint64_t r = off / kMiB; r <= (end - 1) / kMiB; ++r)
          ++expected[r];
      }
    }
  }
  for (std::uint64_t r = 0; r < 16; ++r) {
    EXPECT_EQ(bm.in_flight(r), expected[r]) << r;
    EXPECT_TRUE(bm.is_dirty(r));
    for (std::uint32_t m = 0; m < kMembers; ++m)
      EXPECT_TRUE(members_[m]->durable_bit(r));
  }
  release = true;
  for (auto& t : threads)
    t.join();
  for (std::uint64_t r = 0; r < bm.region_count(); ++r)
    EXPECT_EQ(bm.in_flight(r), 0u) << r;
  EXPECT_FALSE(bm.is_dirty(16));
}

// Writers check, between begin_write() and end_write(), that their regions' bits are durable on
// every member, while another thread keeps clearing with the two-phase protocol.
TEST_F(BitmapTest, ConcurrentWritersWithClearerNeverLoseADurableBit) {
  WriteIntentBitmap bm = fresh();
  constexpr int kThreads = 4;
  std::atomic<int> violations{0};
  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(100 + t));
      for (int i = 0; i < 400; ++i) {
        const std::uint64_t off = (rng() % (8 * 256)) * 4096;
        const std::uint64_t len = std::min<std::uint64_t>(4096 * (1 + rng() % 300), 8 * kMiB - off);
        if (!bm.begin_write(off, len).is_ok()) std::abort();
        // Stay in flight a while, so clears run meanwhile.
        for (int check = 0; check < 8; ++check) {
          for (std::uint64_t r = off / kMiB; r <= (off + len - 1) / kMiB; ++r)
            for (std::uint32_t m = 0; m < kMembers; ++m)
              if (!members_[m]->durable_bit(r)) violations.fetch_add(1);
          std::this_thread::yield();
        }
        bm.end_write(off, len);
      }
      running.fetch_sub(1);
    });
  }
  int clears = 0;
  std::thread clearer([&] {
    while (running.load() > 0) {
      bm.mark_clear_candidates();
      for (auto* m : ptrs_) {
        if (!m->flush_sync().is_ok()) std::abort();
      }
      if (!bm.clear_candidates(kSbEvents).is_ok()) std::abort();
      ++clears;
    }
  });
  for (auto& t : threads)
    t.join();
  clearer.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_GT(clears, 0);
  for (std::uint64_t r = 0; r < bm.region_count(); ++r)
    ASSERT_EQ(bm.in_flight(r), 0u) << r;
  ASSERT_TRUE(bm.clear_idle(kSbEvents).is_ok());
  EXPECT_TRUE(bm.dirty_ranges().empty());
  for (std::uint64_t r = 0; r < 8; ++r)
    EXPECT_FALSE(file_bit(0, r));
}

// ---- Metadata I/O: every member at once, hung members time out, pages do not wait for each other

// Bitmaps over members that are shared_ptrs behind GateMembers (one gate per member, or one for
// all), on files in a temp dir.
class BitmapMetadataIoTest : public ::testing::Test {
 protected:
  void open(std::uint32_t n, bool one_gate) {
    gates_.clear();
    members_.clear();
    for (std::uint32_t m = 0; m < n; ++m) {
      if (m == 0 || !one_gate) gates_.push_back(std::make_shared<testing::MetadataGate>());
      OpenOptions opts;
      opts.create = true;
      opts.create_size = kMiB;  // the bitmap area only
      auto dev = open_member(dir_.path() + "/m" + std::to_string(m), opts);
      ASSERT_TRUE(dev.is_ok()) << dev.status().to_string();
      members_.push_back(std::make_shared<testing::GateMember>(std::move(*dev), gates_.back()));
    }
  }
  WriteIntentBitmap fresh() {
    auto bm = WriteIntentBitmap::create_fresh(members_, params_);
    EXPECT_TRUE(bm.is_ok()) << bm.status().to_string();
    EXPECT_TRUE(bm->write_all().is_ok());
    return std::move(bm).value();
  }

  testing::TempDir dir_;
  std::vector<std::shared_ptr<testing::MetadataGate>> gates_;
  std::vector<std::shared_ptr<MemberDevice>> members_;
  BitmapParams params_{test_uuid(0x30), kMiB, 256 * kMiB, kMiB, kSbEvents};
};

TEST_F(BitmapMetadataIoTest, AnUpdateWritesEveryMemberAtOnce) {
  constexpr std::uint32_t kN = 8;
  open(kN, /*one_gate=*/true);
  WriteIntentBitmap bm = fresh();
  // Page writes wait until all kN are waiting together (or 500 ms each, which a member-by-member
  // update would spend kN times, with never more than one waiting).
  gates_[0]->arm([](std::uint64_t off) { return off == kBitmapPagesOffset; }, kN, 500ms);
  ASSERT_TRUE(bm.begin_write(5 * kMiB, 4096).is_ok());
  EXPECT_EQ(gates_[0]->max_held(), kN);
  EXPECT_TRUE(bm.is_dirty(5));
  bm.end_write(5 * kMiB, 4096);
  // The workers stay: the next update starts no thread.
  gates_[0]->open();
  const std::size_t threads = metadata_worker_threads();
  EXPECT_GE(threads, kN);
  ASSERT_TRUE(bm.begin_write(7 * kMiB, 4096).is_ok());
  EXPECT_EQ(metadata_worker_threads(), threads);
  bm.end_write(7 * kMiB, 4096);
}

// Once asked (graidd serving ublk), every metadata worker marks itself PR_SET_IO_FLUSHER before
// its next operation, the workers already started included. On main f1b45f8 only graidd's I/O
// threads were marked, not these, which the write path waits on.
TEST_F(BitmapMetadataIoTest, WorkersMarkThemselvesIoFlushersOnceAsked) {
  // PR_SET_IO_FLUSHER needs CAP_SYS_RESOURCE, which a container's root may lack: probe on a
  // thread of its own (the flag is per thread) and skip where the process cannot set it.
  int probe = 0;
  std::thread([&] { probe = ::prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) == 0 ? 0 : errno; }).join();
  if (probe != 0) GTEST_SKIP() << "PR_SET_IO_FLUSHER: " << std::strerror(probe);
  open(4, /*one_gate=*/false);
  // Workers that exist before the call are marked too.
  (void)run_on_members(members_, 5s, [](MemberDevice&, std::uint32_t) { return Status::ok(); });
  set_workers_io_flusher();
  std::atomic<int> marked{0}, unmarked{0};
  const auto statuses = run_on_members(members_, 5s, [&](MemberDevice&, std::uint32_t) {
    (::prctl(PR_GET_IO_FLUSHER, 0, 0, 0, 0) == 1 ? marked : unmarked)++;
    return Status::ok();
  });
  for (const Status& st : statuses)
    EXPECT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(marked.load(), 4);
  EXPECT_EQ(unmarked.load(), 0);
}

TEST_F(BitmapMetadataIoTest, AHungMemberIsReportedAfterTheTimeoutAndOutlivesTheBitmap) {
  open(3, /*one_gate=*/false);
  params_.metadata_timeout = 200ms;
  std::optional<WriteIntentBitmap> bm = fresh();
  gates_[1]->arm([](std::uint64_t) { return true; });  // member 1 hangs in every write
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::uint32_t> failed;
  Status s = bm->begin_write(3 * kMiB, 4096, &failed);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), Errc::kIoError);
  EXPECT_NE(s.message().find("member 1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("did not finish within 200 ms"), std::string::npos) << s.message();
  EXPECT_EQ(failed, std::vector<std::uint32_t>{1});
  EXPECT_GE(took, 200ms);
  EXPECT_LT(took, 5s);
  EXPECT_EQ(bm->in_flight(3), 0u);
  EXPECT_EQ(gates_[1]->held(), 1u);  // still inside the member

  // Without member 1 the update goes through at once.
  bm->drop_member(1);
  ASSERT_TRUE(bm->begin_write(3 * kMiB, 4096).is_ok());
  EXPECT_TRUE(bm->is_dirty(3));
  bm->end_write(3 * kMiB, 4096);

  // The hung write still holds its device and page image: drop every other reference, then let
  // it finish. (Under ASan a freed device or buffer would be reported here.)
  std::weak_ptr<MemberDevice> hung = members_[1];
  bm.reset();
  members_.clear();
  EXPECT_FALSE(hung.expired());
  gates_[1]->open();
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!hung.expired() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(hung.expired()) << "the worker kept the member after its write returned";
}

TEST_F(BitmapMetadataIoTest, AMemberSlowOnOnePageDoesNotHoldUpOtherPages) {
  open(3, /*one_gate=*/false);
  params_.region_bytes = kMinRegionBytes;
  params_.data_size = (kBitsPerPage + 64) * kMinRegionBytes;  // two bit pages
  params_.metadata_timeout = 20s;
  WriteIntentBitmap bm = fresh();
  // Member 1 is slow (5 s) to take bit page 0.
  gates_[1]->arm([](std::uint64_t off) { return off == kBitmapPagesOffset; }, SIZE_MAX, 5s);
  std::atomic<bool> page0_done{false};
  std::thread page0([&] {
    EXPECT_TRUE(bm.begin_write(0, 4096).is_ok());
    page0_done = true;
  });
  ASSERT_TRUE(gates_[1]->wait_for_held(1, 5s));
  // A region in page 1 is set and persisted while page 0's update still waits on member 1.
  const std::uint64_t page1_offset = kBitsPerPage * kMinRegionBytes;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(bm.begin_write(page1_offset, 4096).is_ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_FALSE(page0_done.load()) << "the page 1 update waited for page 0's slow member";
  EXPECT_TRUE(bm.is_dirty(kBitsPerPage));
  gates_[1]->open();
  page0.join();
  EXPECT_TRUE(bm.is_dirty(0));
  bm.end_write(0, 4096);
  bm.end_write(page1_offset, 4096);
}

}  // namespace
}  // namespace graid::meta
