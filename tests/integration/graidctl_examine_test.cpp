// graidctl examine (cli/examine.h) against members the engine wrote: a clean RAID5 with VDs, the
// same after a crash with writes in flight (bitmap bits and journal records), a failed member in
// the table, lost ranges, and what is not graid's (blank, damaged, newer, missing, a directory).
// Each member is read while nothing is changed: the files' bytes are the same afterwards, and
// examining an array that is running works (no lock is taken).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include "array/superblock_io.h"
#include "array_harness.h"
#include "examine.h"
#include "graidctl.h"
#include "meta/superblock.h"

namespace graid::testing {
namespace {

using nlohmann::json;

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, std::uint64_t offset, std::span<const std::byte> bytes) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

meta::Superblock superblock_of(const std::string& path) {
  const std::string bytes = file_bytes(path);
  auto sb = meta::decode(std::as_bytes(std::span(bytes.data(), meta::kSuperblockSize)));
  EXPECT_TRUE(sb.is_ok()) << sb.status().to_string();
  return *sb;
}

// graidctl's whole run for `args`: exit code and stdout.
std::pair<int, std::string> graidctl(std::vector<std::string> args) {
  std::ostringstream out;
  std::ostringstream err;
  const int rc = cli::run_graidctl(args, cli::Environment{}, out, err);
  return {rc, out.str() + err.str()};
}

class ExamineTest : public ::testing::Test {
 protected:
  void SetUp() override { parity_ = std::move(*make_parity_backend("cpu")); }

  std::unique_ptr<Array> make(std::uint32_t n, JournalPolicy journal) {
    auto devs = files_.open(n, 8u << 20, true);
    EXPECT_TRUE(devs.is_ok());
    CreateOptions c;
    c.level = RaidLevel::kRaid5;
    c.strip_bytes = 4096;
    c.name = "examined";
    c.settings.journal_policy = journal;
    ArrayOptions o;
    o.parity = parity_.get();
    auto array = Array::create(std::move(*devs), c, o);
    EXPECT_TRUE(array.is_ok()) << array.status().to_string();
    return std::move(*array);
  }

  ArrayFiles files_;
  std::unique_ptr<ParityBackend> parity_;
};

TEST_F(ExamineTest, ACleanArrayReadsAsTheEngineWroteIt) {
  auto array = make(4, JournalPolicy::kDegradedOnly);
  ASSERT_TRUE(array->create_vd("db", 4u << 20).is_ok());
  ASSERT_TRUE(array->create_vd("logs", 1u << 20).is_ok());
  // While the array runs: the files are open and in use; examine takes no lock and finds them.
  json running = cli::examine_path(files_.paths[2]);
  EXPECT_TRUE(cli::examined_ok(running)) << running.dump(2);
  ASSERT_TRUE(array->stop().is_ok());
  array.reset();

  for (std::uint32_t i = 0; i < 4; ++i) {
    const std::string before = file_bytes(files_.paths[i]);
    const meta::Superblock sb = superblock_of(files_.paths[i]);
    json e = cli::examine_path(files_.paths[i]);
    EXPECT_EQ(file_bytes(files_.paths[i]), before) << "examine changed member " << i;
    ASSERT_TRUE(cli::examined_ok(e)) << e.dump(2);
    const json& s = e["superblock"];
    EXPECT_EQ(s["array_uuid"], sb.array_uuid.to_string());
    EXPECT_EQ(s["name"], "examined");
    EXPECT_EQ(s["level"], "raid5");
    EXPECT_EQ(s["member_count"], 4);
    EXPECT_EQ(s["strip"], 4096);
    EXPECT_EQ(s["events"], sb.events);
    EXPECT_EQ(s["member_index"], i);
    EXPECT_EQ(s["clean"], true);
    EXPECT_EQ(s["capacity"], sb.data_capacity());
    EXPECT_EQ(s["settings"]["journal"], "degraded-only");
    ASSERT_EQ(e["members"].size(), 4u);
    for (std::uint32_t m = 0; m < 4; ++m) {
      EXPECT_EQ(e["members"][m]["state"], "active");
      EXPECT_EQ(e["members"][m]["this"], m == i);
    }
    ASSERT_EQ(e["vds"].size(), 2u);
    EXPECT_EQ(e["vds"][0]["name"], "db");
    EXPECT_EQ(e["vds"][0]["size"], 4u << 20);
    EXPECT_EQ(e["vds"][1]["name"], "logs");
    EXPECT_EQ(e["lost_ranges"].size(), 0u);
    EXPECT_EQ(e["bitmap"]["found"], true);
    EXPECT_EQ(e["bitmap"]["regions_set"], 0) << "a clean stop clears every bit";
    EXPECT_EQ(e["journal"]["present"], true);
    EXPECT_EQ(e["journal"]["records"], 0) << "the epoch moves at a clean stop";
  }
  auto [rc, text] = graidctl({"examine", files_.paths[0], files_.paths[1]});
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find(files_.paths[1] + ":"), std::string::npos) << text;
  EXPECT_NE(text.find("raid5, 4 members + 0 spares, strip 4 KiB"), std::string::npos) << text;
  EXPECT_NE(text.find("stopped:"), std::string::npos) << text;
  EXPECT_NE(text.find("<- this drive"), std::string::npos) << text;
  EXPECT_NE(text.find("logs"), std::string::npos) << text;
  auto [jrc, js] = graidctl({"--format", "json", "examine", files_.paths[3]});
  EXPECT_EQ(jrc, 0);
  EXPECT_EQ(json::parse(js)[0]["superblock"]["member_index"], 3) << js;
}

TEST_F(ExamineTest, ACrashLeavesBitsAndJournalRecordsAndAFailedMemberShows) {
  {
    auto array = make(4, JournalPolicy::kAlways);
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array->attach(*ctx));
    // Partial-stripe writes (journalled under `always`) in two places a bitmap region apart.
    AlignedBuffer data = std::move(*AlignedBuffer::allocate(4096, 4096));
    const std::vector<std::byte> random = random_bytes(4096, 7);
    std::copy(random.begin(), random.end(), data.data());
    ASSERT_TRUE(run_one(*queue, IoKind::kWrite, 0, 4096, data.data()).is_ok());
    ASSERT_TRUE(run_one(*queue, IoKind::kWrite, 3u << 20, 4096, data.data()).is_ok());
    ASSERT_TRUE(array->fail_member(1, "pulled for the test").is_ok());
    ASSERT_TRUE(run_one(*queue, IoKind::kWrite, 8192, 4096, data.data()).is_ok());
    queue.reset();
    // No stop(): as after a crash.
  }
  json e = cli::examine_path(files_.paths[0]);
  ASSERT_TRUE(cli::examined_ok(e)) << e.dump(2);
  EXPECT_EQ(e["superblock"]["clean"], false);
  EXPECT_EQ(e["members"][1]["state"], "failed") << e["members"].dump();
  EXPECT_GE(e["bitmap"]["regions_set"].get<std::uint64_t>(), 1u) << e["bitmap"].dump();
  EXPECT_EQ(e["bitmap"]["dirty_bytes"].get<std::uint64_t>(),
            e["bitmap"]["regions_set"].get<std::uint64_t>() *
                e["bitmap"]["region_bytes"].get<std::uint64_t>());
  // Member 0 holds parity or data of the stripes written: at least one record is its to replay.
  std::uint64_t records = 0;
  for (std::uint32_t i : {0u, 2u, 3u}) {
    json m = cli::examine_path(files_.paths[i]);
    records += m["journal"]["records"].get<std::uint64_t>();
    EXPECT_EQ(m["journal"]["damaged"], 0) << m["journal"].dump();
  }
  EXPECT_GE(records, 1u);
  auto [rc, text] = graidctl({"examine", files_.paths[0]});
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("not cleanly"), std::string::npos) << text;
  EXPECT_NE(text.find("to re-sync"), std::string::npos) << text;
}

TEST_F(ExamineTest, LostRangesAreListed) {
  auto array = make(3, JournalPolicy::kDegradedOnly);
  ASSERT_TRUE(array->stop().is_ok());
  array.reset();
  // The lost-range list as a rebuild that could not read records it (minor 4).
  meta::Superblock sb = superblock_of(files_.paths[0]);
  sb.bad_ranges = {{65536, 8192}, {1u << 20, 512}};
  auto encoded = meta::encode(sb);
  ASSERT_TRUE(encoded.is_ok()) << encoded.status().to_string();
  write_bytes(files_.paths[0], 0, *encoded);
  json e = cli::examine_path(files_.paths[0]);
  ASSERT_TRUE(cli::examined_ok(e)) << e.dump(2);
  ASSERT_EQ(e["lost_ranges"].size(), 2u);
  EXPECT_EQ(e["lost_ranges"][0]["offset"], 65536);
  EXPECT_EQ(e["lost_ranges"][0]["length"], 8192);
  auto [rc, text] = graidctl({"examine", files_.paths[0]});
  EXPECT_NE(text.find("lost ranges:"), std::string::npos) << text;
  EXPECT_NE(text.find("2 (8.5 KiB)"), std::string::npos) << text;
}

TEST_F(ExamineTest, WhatIsNotGraidsSaysWhatItIsAndExitsOne) {
  auto array = make(3, JournalPolicy::kDegradedOnly);
  ASSERT_TRUE(array->stop().is_ok());
  array.reset();
  TempDir dir;
  const std::string blank = dir.path() + "/blank.img";
  std::ofstream(blank).close();
  ::truncate(blank.c_str(), 1 << 20);
  json b = cli::examine_path(blank);
  EXPECT_FALSE(cli::examined_ok(b));
  EXPECT_NE(b["superblock"]["message"].get<std::string>().find("no graid superblock"),
            std::string::npos);

  // One flipped byte in the VD table: the crc says so.
  const std::string damaged = files_.paths[1];
  std::string bytes = file_bytes(damaged);
  const std::byte flipped{static_cast<unsigned char>(bytes[1300] ^ 0x40)};
  write_bytes(damaged, 1300, std::span(&flipped, 1));
  json d = cli::examine_path(damaged);
  EXPECT_FALSE(cli::examined_ok(d));
  EXPECT_NE(d["superblock"]["message"].get<std::string>().find("crc32c mismatch"),
            std::string::npos)
      << d.dump();

  json missing = cli::examine_path(dir.path() + "/nothing-here");
  EXPECT_NE(missing["error"].get<std::string>().find("cannot open"), std::string::npos);
  json directory = cli::examine_path(dir.path());
  EXPECT_NE(directory["error"].get<std::string>().find("not a block device or a file"),
            std::string::npos)
      << directory.dump();
  json chr = cli::examine_path("/dev/null");
  EXPECT_NE(chr["error"].get<std::string>().find("examine the namespace's block device"),
            std::string::npos)
      << chr.dump();
  // A file shorter than a superblock.
  const std::string tiny = dir.path() + "/tiny.img";
  std::ofstream(tiny) << "graid";
  EXPECT_NE(cli::examine_path(tiny)["error"].get<std::string>().find("past the end"),
            std::string::npos);

  auto [rc, text] = graidctl({"examine", files_.paths[0], blank, damaged});
  EXPECT_EQ(rc, 1) << text;
  EXPECT_NE(text.find(blank + ":\n  no graid superblock"), std::string::npos) << text;
  EXPECT_NE(text.find("crc32c mismatch"), std::string::npos) << text;
  auto [urc, usage] = graidctl({"examine"});
  EXPECT_EQ(urc, 2) << usage;
}

}  // namespace
}  // namespace graid::testing
