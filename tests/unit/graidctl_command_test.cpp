// graidctl's command line (cli/command_line.h): every command of docs/cli.md turned into the
// request it sends, the verb and object aliases, global options anywhere on the line, and a table
// of bad command lines each refused before anything is sent, with its message.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "command_line.h"
#include "graidctl.h"

namespace graid::cli {
namespace {

using nlohmann::json;

std::vector<std::string> split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;)
    words.push_back(w);
  return words;
}

Environment test_env() {
  Environment env;
  env.cwd = "/home/op";
  return env;
}

struct Case {
  const char* line;
  const char* verb;
  const char* object;
  const char* args;  // JSON text
};

TEST(GraidctlCommandTest, EveryCommandSendsItsRequest) {
  const Case kCases[] = {
      {"create pd /dev/nvme0n1 /dev/nvme1n1", "create", "pd",
       R"({"paths":["/dev/nvme0n1","/dev/nvme1n1"],"force":false})"},
      {"create pd /dev/nvme0n1 --force", "create", "pd",
       R"({"paths":["/dev/nvme0n1"],"force":true})"},
      {"create pd disks/a.img ../b.img ./c.img", "create", "pd",
       R"({"paths":["/home/op/disks/a.img","/home/b.img","/home/op/c.img"],"force":false})"},
      {"list pd", "list", "pd", "{}"},
      {"describe pd 3", "describe", "pd", R"({"pd_id":3})"},
      {"delete pd 0-2,5", "delete", "pd", R"({"pd_ids":[0,1,2,5]})"},
      {"delete pd 4 1 2", "delete", "pd", R"({"pd_ids":[1,2,4]})"},
      {"create dg raid5 0-3", "create", "dg",
       R"({"level":"raid5","pd_ids":[0,1,2,3],"assume_clean":false,"force":false})"},
      {"create dg RAID6 0 1 2 3 --strip 64K --spare 4,5 --assume-clean --name fast --force",
       "create", "dg",
       R"({"level":"raid6","pd_ids":[0,1,2,3],"strip":65536,"spare_ids":[4,5],
           "assume_clean":true,"name":"fast","force":true})"},
      {"create dg 10 0-3 --strip 4K", "create", "dg",
       R"({"level":"raid10","pd_ids":[0,1,2,3],"strip":4096,"assume_clean":false,"force":false})"},
      {"create dg raid1 0,1 --strip 1M", "create", "dg",
       R"({"level":"raid1","pd_ids":[0,1],"strip":1048576,"assume_clean":false,"force":false})"},
      {"list dg", "list", "dg", "{}"},
      {"describe dg 1", "describe", "dg", R"({"dg_id":1})"},
      {"delete dg 1 --confirm", "delete", "dg", R"({"dg_id":1,"confirm":true})"},
      {"delete dg 1 --confirm --force", "delete", "dg",
       R"({"dg_id":1,"confirm":true,"force":true})"},
      {"create vd 1", "create", "vd", R"({"dg_id":1})"},
      {"create vd 1 --size 1.5G --name db", "create", "vd",
       R"({"dg_id":1,"size":1610612736,"name":"db"})"},
      {"list vd", "list", "vd", "{}"},
      {"list vd 2", "list", "vd", R"({"dg_id":2})"},
      {"describe vd 1 0", "describe", "vd", R"({"dg_id":1,"vd_id":0})"},
      {"delete vd 1 0 --confirm", "delete", "vd", R"({"dg_id":1,"vd_id":0,"confirm":true})"},
      {"delete vd 1 0 --confirm --force", "delete", "vd",
       R"({"dg_id":1,"vd_id":0,"confirm":true,"force":true})"},
      {"edit dg 1 rebuild_speed high", "edit", "dg",
       R"({"dg_id":1,"key":"rebuild_speed","value":"high"})"},
      {"edit dg 1 init_speed extreme", "edit", "dg",
       R"({"dg_id":1,"key":"init_speed","value":"extreme"})"},
      {"edit dg 1 check_speed low", "edit", "dg",
       R"({"dg_id":1,"key":"check_speed","value":"low"})"},
      {"edit dg 1 resync_speed normal", "edit", "dg",
       R"({"dg_id":1,"key":"resync_speed","value":"normal"})"},
      {"edit dg 1 journal degraded-only", "edit", "dg",
       R"({"dg_id":1,"key":"journal","value":"degraded-only"})"},
      {"edit pd 2 marker offline", "edit", "pd", R"({"pd_id":2,"key":"marker","value":"offline"})"},
      {"edit pd 2 marker online", "edit", "pd", R"({"pd_id":2,"key":"marker","value":"online"})"},
      {"edit pd 3 io_mode passthrough", "edit", "pd",
       R"({"pd_id":3,"key":"io_mode","value":"passthrough"})"},
      {"edit pd 3 io_mode block", "edit", "pd", R"({"pd_id":3,"key":"io_mode","value":"block"})"},
      {"edit pd 4 hotspare 0", "edit", "pd", R"({"pd_id":4,"key":"hotspare","value":"0"})"},
      {"replace pd 0 1 4", "replace", "pd", R"({"dg_id":0,"old_pd_id":1,"new_pd_id":4})"},
      {"start check 2", "start", "check", R"({"dg_id":2,"repair":false})"},
      {"start check 2 --repair", "start", "check", R"({"dg_id":2,"repair":true})"},
      {"stop check 2", "stop", "check", R"({"dg_id":2})"},
      {"export vd 1 0 --nbd unix:/run/vd.sock", "export", "vd",
       R"({"dg_id":1,"vd_id":0,"nbd":"unix:/run/vd.sock","read_only":false})"},
      {"export vd 1 0 --nbd unix:vd.sock --read-only --name db", "export", "vd",
       R"({"dg_id":1,"vd_id":0,"nbd":"unix:/home/op/vd.sock","read_only":true,"name":"db"})"},
      {"export vd 1 0 --nbd tcp:0.0.0.0:10809", "export", "vd",
       R"({"dg_id":1,"vd_id":0,"nbd":"tcp:0.0.0.0:10809","read_only":false})"},
      {"export vd 1 0 --nbd tcp:0.0.0.0:10809 --tls-psk keys/vd.psk", "export", "vd",
       R"({"dg_id":1,"vd_id":0,"nbd":"tcp:0.0.0.0:10809","read_only":false,
           "tls_psk":"/home/op/keys/vd.psk"})"},
      {"export vd 1 0 --nbd tcp:127.0.0.1:10809 --insecure-tcp", "export", "vd",
       R"({"dg_id":1,"vd_id":0,"nbd":"tcp:127.0.0.1:10809","read_only":false,"insecure_tcp":true})"},
      {"export vd 1 0 --nbd tcp:[::1]:10809", "export", "vd",
       R"({"dg_id":1,"vd_id":0,"nbd":"tcp:[::1]:10809","read_only":false})"},
      {"export vd 1 0 --ublk", "export", "vd", R"({"dg_id":1,"vd_id":0,"ublk":true})"},
      {"create vd 1 --ublk", "create", "vd", R"({"dg_id":1,"ublk":true})"},
      {"create vd 1 --no-ublk --size 1G", "create", "vd",
       R"({"dg_id":1,"ublk":false,"size":1073741824})"},
      {"unexport vd 1 0", "unexport", "vd", R"({"dg_id":1,"vd_id":0,"nbd":false,"ublk":false})"},
      {"unexport vd 1 0 --nbd", "unexport", "vd",
       R"({"dg_id":1,"vd_id":0,"nbd":true,"ublk":false})"},
      {"unexport vd 1 0 --ublk --nbd", "unexport", "vd",
       R"({"dg_id":1,"vd_id":0,"nbd":true,"ublk":true})"},
      {"unexport vd 1 0 --ublk --force", "unexport", "vd",
       R"({"dg_id":1,"vd_id":0,"nbd":false,"ublk":true,"force":true})"},
      {"describe controller", "describe", "controller", "{}"},
      {"list event", "list", "event", "{}"},
      {"list event --since 42", "list", "event", R"({"since":42})"},
      {"stats", "stats", "", "{}"},
      {"version", "version", "", "{}"},
      // aliases
      {"ls pd", "list", "pd", "{}"},
      {"ls physical_drive", "list", "pd", "{}"},
      {"desc drive_group 1", "describe", "dg", R"({"dg_id":1})"},
      {"del virtual_drive 1 2 --confirm-to-delete", "delete", "vd",
       R"({"dg_id":1,"vd_id":2,"confirm":true})"},
      {"del dg 3 --confirm-to-delete", "delete", "dg", R"({"dg_id":3,"confirm":true})"},
      {"e dg 0 journal off", "edit", "dg", R"({"dg_id":0,"key":"journal","value":"off"})"},
      {"edit dg 2 force_online", "edit", "dg",
       R"({"dg_id":2,"key":"force_online","value":"","confirm":false})"},
      {"edit dg 2 force_online --confirm", "edit", "dg",
       R"({"dg_id":2,"key":"force_online","value":"","confirm":true})"},
      {"edit pd 4 hotspare global", "edit", "pd",
       R"({"pd_id":4,"key":"hotspare","value":"global"})"},
      {"edit pd 4 hotspare none", "edit", "pd", R"({"pd_id":4,"key":"hotspare","value":"none"})"},
      {"edit vd 0 1 size 64G", "edit", "vd",
       R"({"dg_id":0,"vd_id":1,"key":"size","size":68719476736})"},
      {"e vd 2 0 size 4096", "edit", "vd", R"({"dg_id":2,"vd_id":0,"key":"size","size":4096})"},
      {"desc cx", "describe", "controller", "{}"},
      {"events", "list", "event", "{}"},
      {"events --since 7", "list", "event", R"({"since":7})"},
      {"events --since 7 --wait 30", "list", "event", R"({"since":7,"wait":30})"},
      {"list event --wait 0", "list", "event", R"({"wait":0})"},
      {"events test", "test", "event", "{}"},
      {"events test disk 3 pulled", "test", "event", R"({"message":"disk 3 pulled"})"},
      {"list events", "list", "event", "{}"},
      // global options before, between and after
      {"--format json list pd", "list", "pd", "{}"},
      {"list pd --format json", "list", "pd", "{}"},
      {"--socket /tmp/g.sock describe dg 1", "describe", "dg", R"({"dg_id":1})"},
  };
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.line);
    ParsedCommandLine parsed = parse_command_line(split(c.line), test_env());
    ASSERT_TRUE(parsed.command.has_value()) << parsed.error;
    const Command& cmd = *parsed.command;
    EXPECT_EQ(cmd.verb, c.verb);
    EXPECT_EQ(cmd.object, c.object);
    EXPECT_EQ(cmd.args, json::parse(c.args)) << cmd.args.dump();
    EXPECT_EQ(cmd.action, cmd.verb == "stats" ? Action::kStats : Action::kRequest);
  }
}

TEST(GraidctlCommandTest, GlobalOptions) {
  auto parsed = parse_command_line(split("list pd"), test_env());
  ASSERT_TRUE(parsed.command);
  EXPECT_EQ(parsed.command->socket, kDefaultSocket);
  EXPECT_EQ(parsed.command->format, OutputFormat::kTable);

  Environment env = test_env();
  env.graid_socket = "/tmp/env.sock";
  parsed = parse_command_line(split("list pd"), env);
  ASSERT_TRUE(parsed.command);
  EXPECT_EQ(parsed.command->socket, "/tmp/env.sock");

  parsed = parse_command_line(split("list pd --socket /tmp/flag.sock --format json"), env);
  ASSERT_TRUE(parsed.command);
  EXPECT_EQ(parsed.command->socket, "/tmp/flag.sock");
  EXPECT_EQ(parsed.command->format, OutputFormat::kJson);
  EXPECT_EQ(parsed.format, OutputFormat::kJson);

  parsed = parse_command_line({"--format=json", "--socket=/s", "version"}, env);
  ASSERT_TRUE(parsed.command);
  EXPECT_EQ(parsed.command->socket, "/s");
  EXPECT_EQ(parsed.command->format, OutputFormat::kJson);

  parsed = parse_command_line(split("--version"), env);
  ASSERT_TRUE(parsed.command);
  EXPECT_EQ(parsed.command->action, Action::kVersion);

  for (const char* line : {"--help", "create --help", "create dg --help", "stats -h"}) {
    SCOPED_TRACE(line);
    parsed = parse_command_line(split(line), env);
    ASSERT_TRUE(parsed.command) << parsed.error;
    EXPECT_EQ(parsed.command->action, Action::kHelp);
    EXPECT_NE(parsed.command->help_text.find("graidctl"), std::string::npos);
  }
  parsed = parse_command_line(split("create dg --help"), env);
  ASSERT_TRUE(parsed.command);
  EXPECT_NE(parsed.command->help_text.find("--strip"), std::string::npos);
}

TEST(GraidctlCommandTest, StatsSelectionAndWatch) {
  auto parsed = parse_command_line(split("stats"), test_env());
  ASSERT_TRUE(parsed.command);
  EXPECT_TRUE(parsed.command->stats.dgs);
  EXPECT_TRUE(parsed.command->stats.vds);
  EXPECT_FALSE(parsed.command->watch_s);

  parsed = parse_command_line(split("stats dg 0-2 --watch 2.5"), test_env());
  ASSERT_TRUE(parsed.command) << parsed.error;
  EXPECT_TRUE(parsed.command->stats.dgs);
  EXPECT_FALSE(parsed.command->stats.vds);
  EXPECT_EQ(parsed.command->stats.dg_ids, (std::vector<std::uint32_t>{0, 1, 2}));
  ASSERT_TRUE(parsed.command->watch_s);
  EXPECT_DOUBLE_EQ(*parsed.command->watch_s, 2.5);
  EXPECT_EQ(parsed.command->args, json::object());

  parsed = parse_command_line(split("stats virtual_drive 1 0,3"), test_env());
  ASSERT_TRUE(parsed.command) << parsed.error;
  EXPECT_FALSE(parsed.command->stats.dgs);
  EXPECT_TRUE(parsed.command->stats.vds);
  EXPECT_EQ(parsed.command->stats.vd_dg, 1u);
  EXPECT_EQ(parsed.command->stats.vd_ids, (std::vector<std::uint32_t>{0, 3}));

  parsed = parse_command_line(split("stats vd"), test_env());
  ASSERT_TRUE(parsed.command) << parsed.error;
  EXPECT_FALSE(parsed.command->stats.vd_dg);

  parsed = parse_command_line(split("describe dg 3 --watch 0.5"), test_env());
  ASSERT_TRUE(parsed.command) << parsed.error;
  EXPECT_EQ(parsed.command->action, Action::kWatchDg);
  EXPECT_EQ(parsed.command->args, json::parse(R"({"dg_id":3})"));
  ASSERT_TRUE(parsed.command->watch_s);
  EXPECT_DOUBLE_EQ(*parsed.command->watch_s, 0.5);
}

TEST(GraidctlCommandTest, EventsFollow) {
  for (const char* line : {"events --follow", "events -f", "list event --follow --since 12"}) {
    SCOPED_TRACE(line);
    auto parsed = parse_command_line(split(line), test_env());
    ASSERT_TRUE(parsed.command) << parsed.error;
    EXPECT_EQ(parsed.command->action, Action::kFollowEvents);
    EXPECT_EQ(parsed.command->verb, "list");
    EXPECT_EQ(parsed.command->object, "event");
  }
  auto parsed = parse_command_line(split("events -f --since 12"), test_env());
  ASSERT_TRUE(parsed.command) << parsed.error;
  EXPECT_EQ(parsed.command->args, json::parse(R"({"since":12})"));
}

struct Bad {
  const char* line;
  const char* fragment;  // the message must contain it
};

TEST(GraidctlCommandTest, RefusesBadCommandLines) {
  const Bad kBad[] = {
      {"", "no command given"},
      {"frobnicate pd", "unknown command \"frobnicate\""},
      {"list", "list needs an object (pd, dg, vd or event)"},
      {"create", "create needs an object (pd, dg or vd)"},
      {"list widget", "list does not take \"widget\""},
      {"describe event", "describe does not take \"event\""},
      {"export pd 1", "export does not take \"pd\""},
      {"create pd", "create pd needs more arguments"},
      {"describe pd", "describe pd needs more arguments"},
      {"describe pd 1 2", "describe pd does not take \"2\""},
      {"describe pd x", "bad pd id \"x\""},
      {"describe pd 1024", "over the maximum 1023"},
      {"describe dg 0-3", "names 4 ids where one dg id is wanted"},
      {"describe vd 1", "describe vd needs more arguments"},
      {"list pd 1", "list pd does not take \"1\""},
      {"list vd 1 2", "list vd does not take \"2\""},
      {"delete pd 3-1", "is reversed"},
      {"delete pd 1,,2", "empty item"},
      {"delete pd 1 1", "appears twice"},
      {"delete dg 1", "refusing to delete dg 1 without --confirm"},
      {"describe dg 1 --watch 0", "bad --watch \"0\""},
      {"describe pd 1 --watch 1", "--watch"},
      {"edit dg 1 force_online now", "does not take \"now\""},
      {"edit dg 1 journal off --confirm", "--confirm is for edit dg <id> force_online only"},
      {"edit pd 1 hotspare everywhere", "bad hotspare \"everywhere\""},
      {"delete vd 1 2", "refusing to delete vd 2 of dg 1 without --confirm"},
      {"delete pd 1 --confirm", "unknown option \"--confirm\""},
      {"describe dg 1 --force", "unknown option \"--force\""},
      {"export vd 1 0 --ublk --force", "unknown option \"--force\""},
      {"export vd 1 0 --ublk --tls-psk /k", "--tls-psk and --insecure-tcp are for --nbd exports"},
      {"export vd 1 0 --ublk --insecure-tcp", "are for --nbd exports"},
      {"create dg raid7 0-3", "unknown RAID level 'raid7'"},
      {"create dg raid5", "create dg needs more arguments"},
      {"create dg raid5 0-3 --strip 96K", "--strip 96K is not a power of two"},
      {"create dg raid5 0-3 --strip 2K", "is not a power of two from 4 KiB to 1 MiB"},
      {"create dg raid5 0-3 --strip 2M", "is not a power of two from 4 KiB to 1 MiB"},
      {"create dg raid5 0-3 --strip 64X", "bad --strip"},
      {"create dg raid5 0-3 --spare 3", "pd 3 is named both as a member and as a spare"},
      {"create dg raid5 0-3 --spare x", "bad --spare ids"},
      {"create vd 1 --size -5G", "bad --size"},
      {"create vd 1 --size 1P", "bad --size"},
      {"create vd 1 --size 0", "--size 0 is an empty vd"},
      {"create vd 1 2", "create vd does not take \"2\""},
      {"edit dg 1 speed high", "dg has no setting \"speed\""},
      {"edit vd 0 1 name big", "vd has no setting \"name\""},
      {"edit vd 0 1 size huge", "bad size"},
      {"edit vd 0 size 1G", "edit vd <dg> <vd> size SIZE"},
      {"edit vd 0 1 size 1G --confirm", "unknown option \"--confirm\""},
      {"edit dg 1 rebuild_speed ludicrous", "bad rebuild_speed \"ludicrous\""},
      {"edit dg 1 journal sometimes", "bad journal \"sometimes\""},
      {"edit dg 1 journal", "edit dg needs more arguments"},
      {"edit pd 1 state offline", "pd has no setting \"state\""},
      {"edit pd 1 marker gone", "bad marker \"gone\""},
      {"export vd 1 0", "export vd needs --ublk or --nbd"},
      {"export vd 1 0 --ublk --nbd unix:/x", "--ublk or --nbd, not both"},
      {"export vd 1 0 --ublk --read-only", "are for --nbd exports"},
      {"create vd 1 --ublk --no-ublk", "--ublk or --no-ublk, not both"},
      {"edit pd 1 io_mode direct", "bad io_mode \"direct\"; write passthrough or block"},
      {"edit pd 1 hotspare everywhere", "bad hotspare \"everywhere\""},
      {"replace pd 0 1", "needs more arguments"},
      {"start check", "needs more arguments"},
      {"start check 0 1", "does not take \"1\""},
      {"export vd 1 0 --nbd http://x", "is neither unix:PATH nor tcp:ADDR:PORT"},
      {"export vd 1 0 --nbd tcp:host", "needs an address and a port"},
      {"export vd 1 0 --nbd tcp:host:99999", "is not 0..65535"},
      {"export vd 1 0 --nbd unix:", "has no socket path"},
      {"list event --since -1", "bad --since"},
      {"list event --since soon", "bad --since"},
      {"events --wait 301", "bad --wait \"301\""},
      {"events --wait soon", "bad --wait"},
      {"events --wait 5 --follow", "--wait and --follow do not go together"},
      {"events test --since 3", "events test takes no --since"},
      {"list event test", "list event does not take"},
      {"stats pd", "stats does not take \"pd\""},
      {"stats dg x", "bad dg ids"},
      {"stats --watch 0", "bad --watch \"0\""},
      {"stats --watch fast", "bad --watch"},
      {"version now", "version does not take \"now\""},
      {"list pd --bogus", "unknown option \"--bogus\""},
      {"--format yaml list pd", "unknown --format \"yaml\""},
      {"--socket", "--socket"},
  };
  for (const Bad& b : kBad) {
    SCOPED_TRACE(b.line);
    ParsedCommandLine parsed = parse_command_line(split(b.line), test_env());
    ASSERT_FALSE(parsed.command.has_value()) << parsed.command->args.dump();
    EXPECT_NE(parsed.error.find(b.fragment), std::string::npos) << parsed.error;
    // "<what is wrong>; <what to do>", on one line.
    EXPECT_NE(parsed.error.find("; "), std::string::npos) << parsed.error;
    EXPECT_EQ(parsed.error.find('\n'), std::string::npos) << parsed.error;

    // Through the whole program: exit 2, one line on stderr, nothing on stdout, and with
    // --format json the error as the one JSON document on stdout.
    std::ostringstream out, err;
    EXPECT_EQ(run_graidctl(split(b.line), test_env(), out, err), 2);
    EXPECT_EQ(out.str(), "");
    EXPECT_EQ(err.str(), "graidctl: " + parsed.error + "\n");

    std::vector<std::string> json_args = split(b.line);
    if (std::string(b.line).find("--format") == std::string::npos) {
      json_args.insert(json_args.begin(), {"--format", "json"});
      std::ostringstream jout, jerr;
      EXPECT_EQ(run_graidctl(json_args, test_env(), jout, jerr), 2);
      EXPECT_EQ(jerr.str(), "");
      json doc = json::parse(jout.str(), nullptr, false);
      ASSERT_FALSE(doc.is_discarded()) << jout.str();
      EXPECT_EQ(doc["error"]["code"], "usage");
      EXPECT_NE(doc["error"]["message"].get<std::string>().find(b.fragment), std::string::npos);
    }
  }
}

TEST(GraidctlCommandTest, RelativePathsNeedAWorkingDirectory) {
  Environment env;  // getcwd failed
  auto parsed = parse_command_line(split("create pd a.img"), env);
  ASSERT_FALSE(parsed.command);
  EXPECT_NE(parsed.error.find("cannot make \"a.img\" absolute"), std::string::npos);
  parsed = parse_command_line(split("create pd /abs/a.img"), env);
  ASSERT_TRUE(parsed.command) << parsed.error;
}

TEST(GraidctlCommandTest, LocalVersionNeedsNoDaemon) {
  std::ostringstream out, err;
  Environment env = test_env();
  env.graid_socket = "/nonexistent/graidd.sock";
  EXPECT_EQ(run_graidctl({"--version"}, env, out, err), 0);
  EXPECT_EQ(out.str().rfind("graidctl ", 0), 0u) << out.str();
  std::ostringstream jout;
  EXPECT_EQ(run_graidctl({"--version", "--format", "json"}, env, jout, err), 0);
  EXPECT_TRUE(json::parse(jout.str())["version"].is_string());
}

}  // namespace
}  // namespace graid::cli
