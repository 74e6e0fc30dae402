// graidd's event log on disk (graidd/event_file.h, graidd/event_log.h): events survive a restart
// with their sequence numbers, a crash mid-append or a damaged line loses only that line, the
// files stay bounded, and what start-up and the long polls ask of the log.
#include "graidd/event_log.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "graidd/event_file.h"
#include "temp_dir.h"

namespace graid::testing {
namespace {

using namespace graid::daemon;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

TEST(EventFileTest, ALineRoundTripsEveryFieldAndItsChecksumGuardsIt) {
  Event e;
  e.seq = 42;
  e.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'765'000'000'123));
  e.severity = Severity::kCritical;
  e.kind = "member_failed";
  e.dg_id = 3;
  e.pd_id = 7;
  e.slot = 2;
  e.message = "member slot 2 failed: \"EIO\"\nfrom the drive";
  const std::string line = encode_event_line(e);
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
  EXPECT_TRUE(line.starts_with(R"({"crc":")")) << line;
  auto back = decode_event_line(line);
  ASSERT_TRUE(back.has_value()) << line;
  EXPECT_EQ(back->seq, 42u);
  EXPECT_EQ(back->time, e.time);
  EXPECT_EQ(back->severity, Severity::kCritical);
  EXPECT_EQ(back->kind, "member_failed");
  EXPECT_EQ(back->dg_id, 3u);
  EXPECT_EQ(back->pd_id, 7u);
  EXPECT_FALSE(back->vd_id.has_value());
  EXPECT_EQ(back->slot, 2u);
  EXPECT_EQ(back->message, e.message);
  // Any byte changed in the event is caught by the CRC; so is a changed CRC.
  for (std::size_t i = 27; i + 2 < line.size(); i += 7) {
    std::string bad = line;
    bad[i] = bad[i] == 'x' ? 'y' : 'x';
    EXPECT_FALSE(decode_event_line(bad).has_value()) << "byte " << i << ": " << bad;
  }
  std::string bad_crc = line;
  bad_crc[8] = bad_crc[8] == '0' ? '1' : '0';
  EXPECT_FALSE(decode_event_line(bad_crc).has_value());
  EXPECT_FALSE(decode_event_line("").has_value());
  EXPECT_FALSE(decode_event_line(line.substr(0, line.size() / 2)).has_value());
  EXPECT_FALSE(decode_event_line(std::string(line.size(), '\0')).has_value());
}

TEST(EventLogTest, EventsAndTheirSequenceSurviveARestart) {
  TempDir dir;
  {
    EventLog log;
    auto opened = log.open(dir.path());
    ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
    EXPECT_EQ(opened->events, 0u);
    for (std::uint32_t i = 0; i < 5; ++i)
      log.add("pd_added", std::nullopt, i, std::nullopt, fmt::format("pd {}", i));
  }
  struct stat st {};
  ASSERT_EQ(::stat(dir.file("events.jsonl").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EventLog log;
  auto opened = log.open(dir.path());
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  EXPECT_EQ(opened->events, 5u);
  EXPECT_EQ(opened->damaged, 0u);
  EXPECT_FALSE(opened->cut_tail);
  EXPECT_EQ(log.add("member_failed", 1u, 2u, std::nullopt, "gone"), 6u);
  const auto q = log.since(0);
  ASSERT_EQ(q.events.size(), 6u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(q.events[i].seq, i + 1);
    EXPECT_EQ(q.events[i].pd_id, i);
    EXPECT_EQ(q.events[i].message, fmt::format("pd {}", i));
    EXPECT_EQ(q.events[i].severity, Severity::kInfo);
  }
  EXPECT_EQ(q.events[5].severity, Severity::kCritical);
  EXPECT_EQ(q.next_seq, 7u);
  EXPECT_EQ(q.dropped, 0u);
}

TEST(EventLogTest, AnAppendACrashCutShortLosesOnlyThatLine) {
  TempDir dir;
  {
    EventLog log;
    ASSERT_TRUE(log.open(dir.path()).is_ok());
    for (int i = 0; i < 3; ++i)
      log.add("pd_added", std::nullopt, i, std::nullopt, "x");
  }
  // The fourth event's line, half written, then zeroes (a crash after the size grew).
  Event e;
  e.seq = 4;
  e.kind = "member_failed";
  const std::string fourth = encode_event_line(e);
  {
    std::ofstream out(dir.file("events.jsonl"), std::ios::binary | std::ios::app);
    out << fourth.substr(0, fourth.size() / 2) << std::string(100, '\0');
  }
  EventLog log;
  auto opened = log.open(dir.path());
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  EXPECT_EQ(opened->events, 3u);
  EXPECT_TRUE(opened->cut_tail);
  EXPECT_EQ(log.add("dg_degraded", 1u, std::nullopt, std::nullopt, "after"), 4u);
  // The next line starts on a line of its own: every line of the file decodes.
  const auto lines = lines_of(read_file(dir.file("events.jsonl")));
  ASSERT_EQ(lines.size(), 4u);
  for (const auto& line : lines)
    EXPECT_TRUE(decode_event_line(line).has_value()) << line;
  EXPECT_EQ(decode_event_line(lines[3])->kind, "dg_degraded");
}

TEST(EventLogTest, ADamagedLineIsSkippedAndCountedAndQueriesStepOverTheGap) {
  TempDir dir;
  {
    EventLog log;
    ASSERT_TRUE(log.open(dir.path()).is_ok());
    for (int i = 0; i < 5; ++i)
      log.add("pd_added", std::nullopt, i, std::nullopt, "x");
  }
  auto lines = lines_of(read_file(dir.file("events.jsonl")));
  ASSERT_EQ(lines.size(), 5u);
  lines[2][lines[2].size() - 5] ^= 1;  // event 3's message or kind
  std::string text;
  for (const auto& l : lines)
    text += l + "\n";
  write_file(dir.file("events.jsonl"), text);
  EventLog log;
  auto opened = log.open(dir.path());
  ASSERT_TRUE(opened.is_ok());
  EXPECT_EQ(opened->events, 4u);
  EXPECT_EQ(opened->damaged, 1u);
  auto q = log.since(2);
  ASSERT_EQ(q.events.size(), 2u);
  EXPECT_EQ(q.events[0].seq, 4u);
  EXPECT_EQ(log.since(0).events.size(), 4u);
  EXPECT_EQ(log.add("pd_added", std::nullopt, 9u, std::nullopt, "x"), 6u);
}

TEST(EventLogTest, TheFilesStayBoundedAndTheNewestEventsAreReadBack) {
  TempDir dir;
  constexpr std::size_t kRotate = 4096;
  {
    EventLog log;
    ASSERT_TRUE(log.open(dir.path(), kRotate).is_ok());
    for (std::uint32_t i = 0; i < 200; ++i)
      log.add("pd_added", std::nullopt, i, std::nullopt, std::string(40, 'm'));
  }
  const auto current = std::filesystem::file_size(dir.file("events.jsonl"));
  const auto older = std::filesystem::file_size(dir.file("events.jsonl.1"));
  EXPECT_LE(current, kRotate);
  EXPECT_LE(older, kRotate);
  EXPECT_GT(older, kRotate / 2);
  EventLog log;
  auto opened = log.open(dir.path(), kRotate);
  ASSERT_TRUE(opened.is_ok());
  EXPECT_EQ(opened->damaged, 0u);
  const auto q = log.since(0);
  ASSERT_FALSE(q.events.empty());
  EXPECT_EQ(q.events.back().seq, 200u);
  EXPECT_EQ(q.dropped, q.events.front().seq - 1);
  for (std::size_t i = 1; i < q.events.size(); ++i)
    EXPECT_EQ(q.events[i].seq, q.events[i - 1].seq + 1);
  EXPECT_EQ(log.add("pd_added", std::nullopt, 0u, std::nullopt, "x"), 201u);
}

TEST(EventLogTest, MemoryKeepsTheLastEventsOfAReadBackLog) {
  TempDir dir;
  {
    EventLog log(1000);
    ASSERT_TRUE(log.open(dir.path()).is_ok());
    for (int i = 0; i < 30; ++i)
      log.add("pd_added", std::nullopt, i, std::nullopt, "x");
  }
  EventLog log(10);
  ASSERT_TRUE(log.open(dir.path()).is_ok());
  const auto q = log.since(0);
  ASSERT_EQ(q.events.size(), 10u);
  EXPECT_EQ(q.events.front().seq, 21u);
  EXPECT_EQ(q.dropped, 20u);
  EXPECT_EQ(log.since(25).dropped, 0u);
  EXPECT_EQ(log.since(std::numeric_limits<std::uint64_t>::max()).dropped, 0u);
  EXPECT_EQ(log.since(std::numeric_limits<std::uint64_t>::max()).next_seq, 31u);
}

TEST(EventLogTest, KindsHaveTheSeveritiesTheDocsGive) {
  EXPECT_EQ(severity_of("member_failed"), Severity::kCritical);
  EXPECT_EQ(severity_of("dg_failed"), Severity::kCritical);
  EXPECT_EQ(severity_of("dg_offline"), Severity::kCritical);
  EXPECT_EQ(severity_of("data_lost"), Severity::kCritical);
  EXPECT_EQ(severity_of("dg_degraded"), Severity::kWarning);
  EXPECT_EQ(severity_of("check_mismatch"), Severity::kWarning);
  EXPECT_EQ(severity_of("test"), Severity::kWarning);
  EXPECT_EQ(severity_of("dg_optimal"), Severity::kInfo);
  EXPECT_EQ(severity_of("pd_added"), Severity::kInfo);
  EXPECT_EQ(severity_of("rebuild_finished"), Severity::kInfo);
  for (const Severity s : {Severity::kInfo, Severity::kWarning, Severity::kCritical})
    EXPECT_EQ(parse_severity(severity_name(s)), s);
  EXPECT_FALSE(parse_severity("fatal").has_value());
}

TEST(EventLogTest, TheLogKnowsWhetherItsLastWordOnAMemberIsThatItFailed) {
  EventLog log;
  auto member = [&](const char* kind, std::uint32_t dg, std::uint32_t slot) {
    Event e;
    e.kind = kind;
    e.dg_id = dg;
    e.slot = slot;
    log.add(std::move(e));
  };
  EXPECT_FALSE(log.says_member_failed(1, 2));
  member("member_failed", 1, 2);
  EXPECT_TRUE(log.says_member_failed(1, 2));
  EXPECT_FALSE(log.says_member_failed(1, 3));
  EXPECT_FALSE(log.says_member_failed(2, 2));
  member("rebuild_progress", 1, 2);
  EXPECT_TRUE(log.says_member_failed(1, 2));
  member("rebuild_finished", 1, 2);
  EXPECT_FALSE(log.says_member_failed(1, 2));
  member("member_failed", 1, 2);
  log.add("dg_deleted", 1u, std::nullopt, std::nullopt, "deleted");
  EXPECT_FALSE(log.says_member_failed(1, 2));
}

TEST(EventLogTest, EachEventWakesTheLoopAndReachesTheListenerInOrder) {
  EventLog log;
  std::vector<std::uint64_t> heard;
  log.set_listener([&](const Event& e) { heard.push_back(e.seq); });
  pollfd p{log.wake_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  log.add("test", std::nullopt, std::nullopt, std::nullopt, "one");
  log.add("test", std::nullopt, std::nullopt, std::nullopt, "two");
  EXPECT_EQ(::poll(&p, 1, 0), 1);
  EXPECT_EQ(heard, (std::vector<std::uint64_t>{1, 2}));
}

TEST(EventLogTest, AStateDirItCannotWriteIsAnErrorAtOpen) {
  TempDir dir;
  write_file(dir.file("not-a-dir"), "x");
  EventLog log;
  EXPECT_FALSE(log.open(dir.file("not-a-dir")).is_ok());
  // A directory named like the log file cannot be opened for appends either.
  std::filesystem::create_directory(dir.file("events.jsonl"));
  EXPECT_FALSE(log.open(dir.path()).is_ok());
}

}  // namespace
}  // namespace graid::testing
