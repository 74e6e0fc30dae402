// The NVMe SMART / Health Information log (graid/member.h): every field at its offset from
// canned pages, 128-bit counters saturated, short pages refused, the warning bits named, and
// devices that are not NVMe told apart.
#include <gtest/gtest.h>

#include <array>
#include <fstream>

#include "graid/member.h"
#include "temp_dir.h"

namespace graid {
namespace {

std::array<std::byte, kNvmeSmartLogBytes> page() {
  std::array<std::byte, kNvmeSmartLogBytes> p{};
  return p;
}

void put(std::span<std::byte> p, std::size_t at, std::uint64_t v, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i)
    p[at + i] = static_cast<std::byte>(v >> (8 * i));
}

TEST(NvmeHealthTest, EveryFieldIsReadAtItsOffset) {
  auto p = page();
  p[0] = std::byte{0x05};    // spare below threshold + reliability degraded
  put(p, 1, 318, 2);         // 45 C
  p[3] = std::byte{4};       // available spare 4 %
  p[4] = std::byte{10};      // threshold 10 %
  p[5] = std::byte{103};     // 103 % of the rated endurance used
  put(p, 32, 123456789, 8);  // data units read
  put(p, 48, 987654321, 8);  // data units written
  put(p, 112, 77, 8);        // power cycles
  put(p, 128, 26'280, 8);    // power-on hours
  put(p, 144, 3, 8);         // unsafe shutdowns
  put(p, 160, 12, 8);        // media errors
  put(p, 176, 40, 8);        // error log entries
  auto h = parse_nvme_smart_log(p);
  ASSERT_TRUE(h.is_ok()) << h.status().to_string();
  EXPECT_EQ(h->critical_warning, 0x05);
  EXPECT_EQ(h->temperature_kelvin, 318);
  EXPECT_EQ(h->available_spare, 4);
  EXPECT_LT(h->available_spare, h->available_spare_threshold);
  EXPECT_EQ(h->available_spare_threshold, 10);
  EXPECT_EQ(h->percentage_used, 103);
  EXPECT_EQ(h->data_units_read, 123456789u);
  EXPECT_EQ(h->data_units_written, 987654321u);
  EXPECT_EQ(h->power_cycles, 77u);
  EXPECT_EQ(h->power_on_hours, 26'280u);
  EXPECT_EQ(h->unsafe_shutdowns, 3u);
  EXPECT_EQ(h->media_errors, 12u);
  EXPECT_EQ(h->error_log_entries, 40u);
  EXPECT_EQ(nvme_critical_warning_text(h->critical_warning),
            "available spare below threshold, NVM subsystem reliability degraded");
}

TEST(NvmeHealthTest, CountersPastSixtyFourBitsSaturateAndShortPagesAreRefused) {
  auto p = page();
  put(p, 160, 1, 8);
  p[160 + 9] = std::byte{1};  // bit 72 of media errors
  auto h = parse_nvme_smart_log(p);
  ASSERT_TRUE(h.is_ok());
  EXPECT_EQ(h->media_errors, ~std::uint64_t{0});
  EXPECT_EQ(h->critical_warning, 0);
  EXPECT_EQ(nvme_critical_warning_text(0), "none");
  EXPECT_EQ(nvme_critical_warning_text(0x02), "temperature past a threshold");
  EXPECT_EQ(nvme_critical_warning_text(0x18),
            "media placed in read-only mode, volatile memory backup failed");
  EXPECT_FALSE(parse_nvme_smart_log(std::span(p).first(511)).is_ok());
}

TEST(NvmeHealthTest, DevicesThatAreNotNvmeAreUnsupported) {
  testing::TempDir dir;
  const std::string file = dir.file("member");
  std::ofstream(file) << "not a drive";
  auto h = read_nvme_health(file);
  ASSERT_FALSE(h.is_ok());
  EXPECT_EQ(h.status().code(), Errc::kUnsupported) << h.status().to_string();
  auto null = read_nvme_health("/dev/null");
  ASSERT_FALSE(null.is_ok());
  EXPECT_EQ(null.status().code(), Errc::kUnsupported) << null.status().to_string();
  auto gone = read_nvme_health(dir.file("none"));
  ASSERT_FALSE(gone.is_ok());
  EXPECT_EQ(gone.status().code(), Errc::kNotFound);
}

}  // namespace
}  // namespace graid
