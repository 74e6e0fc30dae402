// graidctl's argument parsing helpers (cli/cli_parse.h): sizes and id lists accepted and refused
// with the exact reason, boundaries (2^64, kMaxId, kMaxIdListEntries), format_size's rounding and
// its round trip through parse_size, and random text that must never crash.
#include "cli_parse.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace graid::cli {
namespace {

constexpr std::uint64_t kKi = 1024;
constexpr std::uint64_t kMi = kKi * 1024;
constexpr std::uint64_t kGi = kMi * 1024;
constexpr std::uint64_t kTi = kGi * 1024;

TEST(ParseSizeTest, AcceptsGoodSizes) {
  const std::pair<const char*, std::uint64_t> kGood[] = {
      {"0", 0},
      {"4096", 4096},
      {"512B", 512},
      {"512b", 512},
      {"64K", 64 * kKi},
      {"64k", 64 * kKi},
      {"64KB", 64 * kKi},
      {"64kb", 64 * kKi},
      {"64KiB", 64 * kKi},
      {"64kib", 64 * kKi},
      {"64KIB", 64 * kKi},
      {"1M", kMi},
      {"1MiB", kMi},
      {"2G", 2 * kGi},
      {"2gib", 2 * kGi},
      {"1T", kTi},
      {"1TB", kTi},
      {"1.5G", kGi + kGi / 2},
      {"1.5K", 1536},
      {"0.5K", 512},
      {"2.0", 2},
      {"2.000000000000000000", 2},  // 18 digits after the point
      {"0.25M", kMi / 4},
      {"0.0009765625M", kKi},  // 2^-10 M, exactly
      {"007K", 7 * kKi},
      {"18446744073709551615", 18446744073709551615u},
      {"18446744073709551615B", 18446744073709551615u},
      {"16777215T", 16777215 * kTi},
      {"16777215.5T", 16777215 * kTi + kTi / 2},
  };
  for (const auto& [text, bytes] : kGood) {
    SCOPED_TRACE(text);
    auto r = parse_size(text);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(*r, bytes);
  }
}

TEST(ParseSizeTest, RefusesBadSizesSayingWhy) {
  const std::pair<const char*, const char*> kBad[] = {
      {"", "empty size"},
      {"-1", "size \"-1\" is negative"},
      {"-1G", "size \"-1G\" is negative"},
      {"+1", "size \"+1\" is not a number with an optional unit"},
      {"K", "size \"K\" is not a number"},
      {".5K", "size \".5K\" is not a number"},
      {"1.K", "size \"1.K\" is not a number"},
      {"1..5K", "size \"1..5K\" is not a number"},
      {" 1K", "is not a number"},
      {"1 K", "size \"1 K\" is not a number"},
      {"1K ", "unknown unit \"K \""},
      {"1e3", "unknown unit \"e3\""},
      {"0x10", "unknown unit \"x10\""},
      {"abc", "size \"abc\" is not a number"},
      {"1P", "unknown unit \"P\" in size \"1P\" (use K, M, G or T"},
      {"1KK", "unknown unit \"KK\""},
      {"1iB", "unknown unit \"iB\""},
      {"1Ki", "unknown unit \"Ki\""},
      {"1KiBs", "unknown unit \"KiBs\""},
      {"1.2.3", "size \"1.2.3\" is not a number"},
      {"0.3K", "size \"0.3K\" is not a whole number of bytes"},
      {"0.5", "size \"0.5\" is not a whole number of bytes"},
      {"1.5B", "is not a whole number of bytes"},
      {"0.00048828125K", "is not a whole number of bytes"},  // half a byte
      {"1.0000000000000000000", "has more than 18 digits after the point"},
      {"18446744073709551616", "size \"18446744073709551616\" is 2^64 bytes or more"},
      {"99999999999999999999999999999999", "is 2^64 bytes or more"},
      {"16777216T", "size \"16777216T\" is 2^64 bytes or more"},
      {"17179869184G", "is 2^64 bytes or more"},
      {"16777215.9999999999T", "is not a whole number of bytes"},
  };
  for (const auto& [text, fragment] : kBad) {
    SCOPED_TRACE(text);
    auto r = parse_size(text);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), Errc::kInvalidArgument);
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
  }
}

TEST(ParseIdListTest, AcceptsGoodLists) {
  struct Good {
    const char* text;
    std::vector<std::uint32_t> ids;
  };
  const Good kGood[] = {
      {"0", {0}},
      {"5", {5}},
      {"0-3", {0, 1, 2, 3}},
      {"0-3,5", {0, 1, 2, 3, 5}},
      {"5,0-3", {0, 1, 2, 3, 5}},
      {"9,1,4", {1, 4, 9}},
      {"7-7", {7}},
      {"1023", {1023}},
      {"1000-1023,0", {0,    1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011,
                       1012, 1013, 1014, 1015, 1016, 1017, 1018, 1019, 1020, 1021, 1022, 1023}},
      {"007", {7}},
  };
  for (const Good& g : kGood) {
    SCOPED_TRACE(g.text);
    auto r = parse_id_list(g.text);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(*r, g.ids);
  }
  auto max = parse_id_list("0-255");
  ASSERT_TRUE(max.is_ok());
  EXPECT_EQ(max->size(), kMaxIdListEntries);
  auto spread = parse_id_list("768-1023");
  ASSERT_TRUE(spread.is_ok());
  EXPECT_EQ(spread->front(), 768u);
  EXPECT_EQ(spread->back(), 1023u);
}

TEST(ParseIdListTest, RefusesBadListsSayingWhy) {
  const std::pair<const char*, const char*> kBad[] = {
      {"", "empty id list"},
      {",", "empty item in id list \",\""},
      {"1,,2", "empty item in id list \"1,,2\""},
      {"1,", "empty item in id list \"1,\""},
      {",1", "empty item"},
      {"a", "\"a\" in id list \"a\" is not an id or a range of ids (e.g. 5 or 0-3)"},
      {"1-", "\"1-\" in id list \"1-\" is not an id or a range"},
      {"-1", "\"-1\" in id list \"-1\" is not an id"},
      {"1-2-3", "\"1-2-3\" in id list \"1-2-3\" is not an id"},
      {"1 ,2", "\"1 \" in id list \"1 ,2\" is not an id"},
      {"+1", "is not an id"},
      {"0x1", "is not an id"},
      {"1.5", "is not an id"},
      {"3-0", "range \"3-0\" is reversed (write 0-3)"},
      {"0-3,9-5", "range \"9-5\" is reversed (write 5-9)"},
      {"1024", "id 1024 is over the maximum 1023"},
      {"0-1024", "id 1024 is over the maximum 1023"},
      {"99999999999999999999999", "id 99999999999999999999999 is over the maximum 1023"},
      {"1,2,1", "id 1 appears twice in id list \"1,2,1\""},
      {"0-3,2", "id 2 appears twice in id list \"0-3,2\""},
      {"0-3,3-5", "id 3 appears twice"},
      {"0-256", "id list \"0-256\" names more than 256 ids"},
      {"0-1023", "names more than 256 ids"},
      {"0-200,300-400", "names more than 256 ids"},
  };
  for (const auto& [text, fragment] : kBad) {
    SCOPED_TRACE(text);
    auto r = parse_id_list(text);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), Errc::kInvalidArgument);
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
  }
}

TEST(FormatSizeTest, Table) {
  const std::pair<std::uint64_t, const char*> kRows[] = {
      {0, "0 B"},
      {1, "1 B"},
      {1023, "1023 B"},
      {1024, "1 KiB"},
      {1100, "1.1 KiB"},
      {1536, "1.5 KiB"},
      {64 * kKi, "64 KiB"},
      {kMi - 1, "1 MiB"},  // 1023.999 KiB rounds up into the next unit
      {kMi - 52, "1023.9 KiB"},
      {kGi + kGi / 2, "1.5 GiB"},
      {3 * kTi, "3 TiB"},
      {kTi * 1024, "1 PiB"},
      {kTi * 1024 * 1024, "1 EiB"},
      {18446744073709551615u, "16 EiB"},
      {25271037952, "23.5 GiB"},
  };
  for (const auto& [bytes, text] : kRows) {
    EXPECT_EQ(format_size(bytes), text) << bytes;
  }
}

// Exact values (whole tenths of their unit) survive format_size -> parse_size (the space removed).
TEST(FormatSizeTest, RoundTripsThroughParseSize) {
  for (int unit = 0; unit <= 4; ++unit) {
    for (std::uint64_t n = 1; n < 1024; ++n) {
      for (const std::uint64_t halves : {0, 1}) {
        if (unit == 0 && halves == 1) continue;
        const std::uint64_t bytes = (n << (10 * unit)) + (halves << (10 * unit)) / 2;
        std::string text = format_size(bytes);
        text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
        auto back = parse_size(text);
        ASSERT_TRUE(back.is_ok()) << text << ": " << back.status().to_string();
        EXPECT_EQ(*back, bytes) << text;
      }
    }
  }
}

TEST(CliParseTest, RandomTextNeverCrashes) {
  std::mt19937_64 rng(99);
  const std::string alphabet = "0123456789,-.KkMmGgTtiIBbPx +";
  for (int i = 0; i < 10000; ++i) {
    std::string text(rng() % 24, '\0');
    for (char& c : text) {
      c = i % 2 == 0 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng());
    }
    SCOPED_TRACE(text);
    auto size = parse_size(text);
    if (!size.is_ok()) {
      EXPECT_FALSE(size.status().message().empty());
    }
    auto ids = parse_id_list(text);
    if (ids.is_ok()) {
      EXPECT_TRUE(std::is_sorted(ids->begin(), ids->end()));
      EXPECT_TRUE(std::adjacent_find(ids->begin(), ids->end()) == ids->end());
      EXPECT_LE(ids->size(), kMaxIdListEntries);
      for (const std::uint32_t id : *ids)
        EXPECT_LE(id, kMaxId);
    } else {
      EXPECT_FALSE(ids.status().message().empty());
    }
  }
}

}  // namespace
}  // namespace graid::cli
