// graidctl's completion (cli/completion.h): candidates from the command tree for every position,
// and ids asked of graidd for the right object (and DG), with a fake id source.
#include <gtest/gtest.h>

#include <algorithm>

#include "completion.h"

namespace graid::cli {
namespace {

using V = std::vector<std::string>;

// Answers "pd": 0 1 2, "dg": 4 5, "vd" of dg N: N0 N1; records what was asked.
struct FakeIds {
  std::vector<std::string> asked;
  IdSource source() {
    return [this](const std::string& object, std::optional<std::uint32_t> dg) {
      asked.push_back(object + (dg ? " " + std::to_string(*dg) : ""));
      if (object == "pd") return V{"0", "1", "2"};
      if (object == "dg") return V{"4", "5"};
      return V{std::to_string(*dg) + "0", std::to_string(*dg) + "1"};
    };
  }
};

V words(const std::string& line) {
  V out;
  std::size_t at = 0;
  while (at <= line.size()) {
    const std::size_t space = line.find(' ', at);
    out.push_back(line.substr(at, space == std::string::npos ? std::string::npos : space - at));
    if (space == std::string::npos) break;
    at = space + 1;
  }
  return out;
}

// The candidates for the last word of `line` (after "graidctl"), sorted.
V offered(const std::string& line, FakeIds& ids, bool* files = nullptr) {
  const V w = words(line);
  Completion c = complete(w, w.size() - 1, ids.source());
  if (files != nullptr) *files = c.files;
  std::sort(c.candidates.begin(), c.candidates.end());
  return c.candidates;
}

bool has(const V& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(GraidctlCompletionTest, VerbsObjectsAndAliases) {
  FakeIds ids;
  const V verbs = offered("", ids);
  for (const char* v :
       {"create", "list", "describe", "delete", "edit", "export", "unexport", "replace", "start",
        "stop", "stats", "status", "examine", "version", "events"})
    EXPECT_TRUE(has(verbs, v)) << v;
  EXPECT_EQ(offered("describe ", ids), (V{"controller", "dg", "pd", "vd"}));
  EXPECT_EQ(offered("desc ", ids), (V{"controller", "dg", "pd", "vd"})) << "an alias is its verb";
  EXPECT_EQ(offered("ls ", ids), (V{"dg", "event", "pd", "vd"}));
  EXPECT_EQ(offered("start ", ids), (V{"check"}));
  EXPECT_EQ(offered("bogus ", ids), V{}) << "nothing follows an unknown verb";
  EXPECT_TRUE(ids.asked.empty()) << "no ids asked for verbs and objects";
}

TEST(GraidctlCompletionTest, IdsAreAskedForTheRightObjectAndDg) {
  FakeIds ids;
  EXPECT_EQ(offered("describe pd ", ids), (V{"0", "1", "2"}));
  EXPECT_EQ(offered("describe dg ", ids), (V{"4", "5"}));
  EXPECT_EQ(offered("describe vd ", ids), (V{"4", "5"}));
  EXPECT_EQ(offered("describe vd 7 ", ids), (V{"70", "71"}));
  EXPECT_EQ(offered("describe vd 7 1 ", ids), V{}) << "describe vd takes two words";
  EXPECT_EQ(offered("delete pd 0 ", ids), (V{"0", "1", "2"})) << "a list goes on";
  EXPECT_EQ(offered("replace pd 4 ", ids), (V{"0", "1", "2"}));
  EXPECT_EQ(offered("replace pd ", ids), (V{"4", "5"}));
  EXPECT_EQ(offered("create vd ", ids), (V{"4", "5"}));
  EXPECT_EQ(offered("create dg raid5 ", ids), (V{"0", "1", "2"}));
  EXPECT_EQ(offered("stats vd 5 ", ids), (V{"50", "51"}));
  EXPECT_EQ(offered("stats dg ", ids), (V{"4", "5"}));
  EXPECT_EQ(offered("--socket /tmp/s describe pd ", ids), (V{"0", "1", "2"}))
      << "global options before the verb are skipped with their values";
  EXPECT_EQ(ids.asked,
            (V{"pd", "dg", "dg", "vd 7", "pd", "pd", "dg", "dg", "pd", "vd 5", "dg", "pd"}));
}

TEST(GraidctlCompletionTest, WordsOptionsAndPaths) {
  FakeIds ids;
  EXPECT_EQ(offered("create dg ", ids), (V{"raid0", "raid1", "raid10", "raid5", "raid6"}));
  EXPECT_TRUE(has(offered("edit dg 4 ", ids), "rebuild_speed"));
  EXPECT_TRUE(has(offered("edit dg 4 ", ids), "journal"));
  EXPECT_EQ(offered("edit dg 4 check_speed ", ids), (V{"extreme", "high", "low", "normal"}));
  EXPECT_EQ(offered("edit pd 1 ", ids), (V{"hotspare", "io_mode", "marker"}));
  EXPECT_EQ(offered("edit pd 1 hotspare ", ids), (V{"4", "5", "global", "none"}));
  EXPECT_EQ(offered("edit vd 4 40 ", ids), (V{"size"}));
  EXPECT_EQ(offered("stats ", ids), (V{"dg", "vd"}));
  EXPECT_EQ(offered("events ", ids), (V{"test"}));
  EXPECT_EQ(offered("--format ", ids), (V{"json", "table"}));
  EXPECT_EQ(offered("create dg raid5 0-2 --spare ", ids), (V{"0", "1", "2"}));
  const V opts = offered("delete dg 4 --", ids);
  for (const char* o : {"--confirm", "--force", "--socket", "--format"})
    EXPECT_TRUE(has(opts, o)) << o;
  EXPECT_FALSE(has(opts, "--repair")) << "another command's option";
  bool files = false;
  EXPECT_EQ(offered("create pd ", ids, &files), V{});
  EXPECT_TRUE(files);
  EXPECT_EQ(offered("examine /dev/nvme0n1 ", ids, &files), V{});
  EXPECT_TRUE(files);
  EXPECT_EQ(offered("--socket ", ids, &files), V{});
  EXPECT_TRUE(files);
  EXPECT_EQ(offered("describe pd 1 ", ids, &files), V{});
  EXPECT_FALSE(files);
}

}  // namespace
}  // namespace graid::cli
