// The consistency check as a background job (Array::check) on RAID1, RAID10, RAID5 and RAID6:
// a consistent array checks clean; strips corrupted behind the array's back (parity, or a
// mirror copy other than the first) are reported by stripe number, exactly those; repair
// rewrites them, a second check is clean and every byte still reads as written; a check stopped
// part way records its position and the next one resumes there; a check while writes run finds
// no false mismatch.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "array_harness.h"

namespace graid::testing {
namespace {

using namespace std::chrono_literals;

constexpr std::uint32_t kStrip = 4096;
constexpr std::uint64_t kMemberBytes = 4u << 20;

struct Shape {
  RaidLevel level;
  std::uint32_t members;
};

std::string shape_name(const ::testing::TestParamInfo<Shape>& param_info) {
  return std::string(raid_level_name(param_info.param.level));
}

// Keeps the messages of the events an array raises (delivered on its notifier thread).
class MessageLog final : public ArrayObserver {
 public:
  void on_event(const ArrayEvent& e) override {
    std::lock_guard lock(mu_);
    messages_.push_back(std::string(array_event_kind_name(e.kind)) + ": " + e.message);
  }
  std::vector<std::string> messages() {
    std::lock_guard lock(mu_);
    return messages_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> messages_;
};

class ArrayCheckTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    parity_ = std::move(*make_parity_backend("cpu"));
    auto devs = files_.open(GetParam().members, kMemberBytes, true);
    ASSERT_TRUE(devs.is_ok());
    CreateOptions c;
    c.level = GetParam().level;
    c.strip_bytes = kStrip;
    c.bitmap_region_bytes = 1u << 20;
    c.name = "check";
    ArrayOptions o;
    o.parity = parity_.get();
    o.observer = &events_;
    auto array = Array::create(std::move(*devs), c, o);
    ASSERT_TRUE(array.is_ok()) << array.status().to_string();
    array_ = std::move(*array);
    // Random data everywhere, so parity and copies are not trivially zero.
    model_ = random_bytes(array_->capacity(), 5);
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array_->attach(*ctx));
    auto buf = std::move(*AlignedBuffer::allocate(1u << 20, 4096));
    for (std::uint64_t at = 0; at < array_->capacity(); at += buf.size()) {
      const auto len =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(buf.size(), array_->capacity() - at));
      std::memcpy(buf.data(), model_.data() + at, len);
      ASSERT_TRUE(run_one(*queue, IoKind::kWrite, at, len, buf.data()).is_ok());
    }
  }

  // Flips bytes of `member`'s strip in `stripe`, in its file, behind the array's back.
  void corrupt(std::uint32_t member, std::uint64_t stripe) {
    const int fd = ::open(files_.paths[member].c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const std::uint64_t at = array_->member_data_offset() + stripe * kStrip + 100;
    std::byte b[16];
    ASSERT_EQ(::pread(fd, b, sizeof b, static_cast<off_t>(at)), 16);
    for (auto& x : b)
      x ^= std::byte{0x5a};
    ASSERT_EQ(::pwrite(fd, b, sizeof b, static_cast<off_t>(at)), 16);
    ::close(fd);
  }
  // The member holding redundancy, not the first copy of data, in `stripe`: what repair
  // rewrites (so the data reads the same after it).
  std::uint32_t redundant_member(std::uint64_t stripe) const {
    const Geometry& g = array_->geometry();
    if (g.redundancy() == Redundancy::kParity) return g.p_member(stripe);
    return g.data_member(stripe, 0, 1);
  }
  void verify() {
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array_->attach(*ctx));
    auto buf = std::move(*AlignedBuffer::allocate(1u << 20, 4096));
    for (std::uint64_t at = 0; at < array_->capacity(); at += buf.size()) {
      const auto len =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(buf.size(), array_->capacity() - at));
      ASSERT_TRUE(run_one(*queue, IoKind::kRead, at, len, buf.data()).is_ok());
      ASSERT_EQ(std::memcmp(buf.data(), model_.data() + at, len), 0) << "at " << at;
    }
  }
  std::uint64_t stripes() const { return array_->geometry().stripes(array_->member_data_bytes()); }

  ArrayFiles files_;
  std::unique_ptr<ParityBackend> parity_;
  MessageLog events_;  // outlives the array, which delivers its last events as it goes
  std::unique_ptr<Array> array_;
  std::vector<std::byte> model_;
};

TEST_P(ArrayCheckTest, CleanArrayChecksClean) {
  auto report = array_->check();
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_TRUE(report->finished);
  EXPECT_EQ(report->stripes, stripes());
  EXPECT_EQ(report->mismatches, 0u);
  EXPECT_EQ(report->skipped, 0u);
  EXPECT_FALSE(array_->check_progress().has_value()) << "nothing pending once finished";
}

TEST_P(ArrayCheckTest, FindsExactlyTheCorruptedStripesAndRepairFixesThem) {
  const std::set<std::uint64_t> bad = {0, 7, stripes() / 2, stripes() - 1};
  for (std::uint64_t stripe : bad)
    corrupt(redundant_member(stripe), stripe);
  auto found = array_->check();
  ASSERT_TRUE(found.is_ok()) << found.status().to_string();
  EXPECT_EQ(found->mismatches, bad.size());
  EXPECT_EQ(std::set<std::uint64_t>(found->mismatch_stripes.begin(), found->mismatch_stripes.end()),
            bad);
  EXPECT_EQ(found->repaired, 0u);
  auto again = array_->count_inconsistent_stripes();
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, bad.size()) << "a check without repair writes nothing";

  CheckControl repair;
  repair.repair = true;
  auto fixed = array_->check(repair);
  ASSERT_TRUE(fixed.is_ok()) << fixed.status().to_string();
  EXPECT_EQ(fixed->mismatches, bad.size());
  EXPECT_EQ(fixed->repaired, bad.size());
  auto clean = array_->check();
  ASSERT_TRUE(clean.is_ok());
  EXPECT_EQ(clean->mismatches, 0u);
  verify();
}

TEST_P(ArrayCheckTest, StoppedCheckResumesWhereItStopped) {
  corrupt(redundant_member(stripes() - 2), stripes() - 2);
  std::atomic<bool> stop{false};
  CheckControl control;
  control.stop = &stop;
  control.window_stripes = 4;
  control.bytes_per_second = 4u << 20;
  std::thread stopper([&] {
    while (array_->check_progress().value_or(0) < kMemberBytes / 4)
      std::this_thread::sleep_for(1ms);
    stop = true;
  });
  auto first = array_->check(control);
  stopper.join();
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_FALSE(first->finished);
  EXPECT_EQ(first->mismatches, 0u);
  auto at = array_->check_progress();
  ASSERT_TRUE(at.has_value()) << "a stopped check stays pending";
  EXPECT_EQ(*at, first->stripes * kStrip);
  auto rest = array_->check();
  ASSERT_TRUE(rest.is_ok());
  EXPECT_TRUE(rest->finished);
  EXPECT_EQ(rest->from_stripe, first->stripes);
  EXPECT_EQ(first->stripes + rest->stripes, stripes()) << "every stripe once";
  EXPECT_EQ(rest->mismatches, 1u);
  EXPECT_FALSE(array_->check_progress().has_value());
}

TEST_P(ArrayCheckTest, CheckWhileWritingFindsNoFalseMismatch) {
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array_->attach(*ctx));
    std::mt19937_64 rng(9);
    auto buf = std::move(*AlignedBuffer::allocate(4 * 4096, 4096));
    while (!stop.load()) {
      for (std::size_t w = 0; w < buf.size() / 8; ++w) {
        const std::uint64_t v = rng();
        std::memcpy(buf.data() + w * 8, &v, 8);
      }
      const std::uint64_t at = (rng() % (array_->capacity() / 4096 - 4)) * 4096;
      ASSERT_TRUE(run_one(*queue, IoKind::kWrite, at, 4 * 4096, buf.data()).is_ok());
    }
  });
  std::uint64_t mismatches = 0;
  for (int round = 0; round < 3; ++round) {
    CheckControl control;
    control.window_stripes = 2;
    auto r = array_->check(control);
    ASSERT_TRUE(r.is_ok());
    mismatches += r->mismatches;
  }
  stop = true;
  writer.join();
  EXPECT_EQ(mismatches, 0u);
}

TEST_P(ArrayCheckTest, ADegradedArraySkipsWhatItCannotCompare) {
  ASSERT_TRUE(array_->fail_member(0, "test").is_ok());
  auto r = array_->check();
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(r->finished);
  EXPECT_GT(r->skipped, 0u);
  EXPECT_EQ(r->mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Levels, ArrayCheckTest,
                         ::testing::Values(Shape{RaidLevel::kRaid1, 2},
                                           Shape{RaidLevel::kRaid10, 4},
                                           Shape{RaidLevel::kRaid5, 4},
                                           Shape{RaidLevel::kRaid6, 5}),
                         shape_name);

// Item 8 of the resilience review: repair used to rewrite parity (or every copy) from the data as
// read, so a corrupt data strip that RAID6 parity could locate, or a bad first copy of a three-way
// mirror that the other two outvote, was made permanent. Repair now fixes the strip that is wrong,
// and says which it was.
class ArrayCheckRepairTest : public ArrayCheckTest {};

TEST_P(ArrayCheckRepairTest, RepairFixesTheStripThatIsWrong) {
  const Geometry& g = array_->geometry();
  // Stripe -> the member whose strip is corrupted there: data strips at several indices (for
  // mirrors, the first copy), and on RAID6 P alone and Q alone as well.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> bad;
  for (std::uint32_t d = 0; d < g.data_strips(); ++d)
    bad.emplace_back(3 + 5 * d, g.data_member(3 + 5 * d, d, 0));
  if (g.parity_strips() == 2) {
    bad.emplace_back(60, g.p_member(60));
    bad.emplace_back(61, g.q_member(61));
  }
  for (const auto& [stripe, member] : bad)
    corrupt(member, stripe);
  CheckControl repair;
  repair.repair = true;
  auto fixed = array_->check(repair);
  ASSERT_TRUE(fixed.is_ok()) << fixed.status().to_string();
  EXPECT_EQ(fixed->mismatches, bad.size());
  EXPECT_EQ(fixed->repaired, bad.size());
  EXPECT_EQ(*array_->count_inconsistent_stripes(), 0u);
  verify();
  // The other members answer for what one more lost member held.
  const std::uint32_t other = bad.front().second == 0 ? 1 : 0;
  ASSERT_TRUE(array_->fail_member(other, "test").is_ok());
  verify();
  array_.reset();  // delivers the events
  std::size_t located = 0;
  for (const std::string& m : events_.messages()) {
    if (m.rfind("check-mismatch", 0) != 0) continue;
    const bool names_it =
        m.find("was wrong") != std::string::npos || m.find("outvoted") != std::string::npos;
    EXPECT_TRUE(names_it) << m;
    located += names_it ? 1 : 0;
  }
  EXPECT_EQ(located, bad.size());
}

INSTANTIATE_TEST_SUITE_P(Locating, ArrayCheckRepairTest,
                         ::testing::Values(Shape{RaidLevel::kRaid1, 3},
                                           Shape{RaidLevel::kRaid6, 6}),
                         shape_name);

}  // namespace
}  // namespace graid::testing
