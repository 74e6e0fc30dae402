// An administrator's day with graidctl, end to end: devices that hold data or graid metadata this
// build cannot read are refused (and wiped only with --force), members that come back after a
// restart, members removed while their DG runs, and the messages that say what happened.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "graidd_harness.h"
#include "nbd_harness.h"
#include "nbd_test_client.h"
#include "superblock_bytes.h"

namespace graid::testing {
namespace {

using nlohmann::json;

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The error message of a refused graidctl run (JSON form).
std::string error_of(const CtlRun& r) {
  if (!r.json.is_object() || !r.json.contains("error")) return describe(r);
  return r.json["error"]["message"].get<std::string>();
}

// graid metadata this build cannot decode (a newer format, a damaged block) is not a blank
// device: create pd refuses it naming what it is, and a PD that came to hold it while graidd was
// down is neither assembled nor taken by create dg without --force.
TEST_F(GraiddTest, MetadataThisBuildCannotReadIsNeverTakenForABlankDrive) {
  make_pds(4);
  ok({"create", "dg", "raid5", "0-2", "--strip", "16K"});
  // Copies of a member's superblock, as a newer graid would have rewritten it and damaged.
  const std::string newer = dir_.file("newer");
  const std::string damaged = dir_.file("damaged");
  EXPECT_EQ(d_->stop(SIGTERM), 0);
  for (const auto& to : {newer, damaged})
    ASSERT_EQ(run_tool("cp --sparse=always '" + dir_.file("pd0") + "' '" + to + "'").status, 0);
  stamp_superblock_version(newer, 2, 0);
  flip_bit(damaged, 150);
  ASSERT_TRUE(d_->start()) << d_->log();
  const json before = snapshot();
  const std::string newer_bytes = file_text(newer);
  CtlRun r = d_->ctl({"create", "pd", newer});
  EXPECT_EQ(r.exit, 1) << describe(r);
  EXPECT_NE(error_of(r).find("graid metadata of format 2.0, newer than this build"),
            std::string::npos)
      << error_of(r);
  EXPECT_NE(error_of(r).find("upgrade graid, or add --force"), std::string::npos) << error_of(r);
  r = d_->ctl({"create", "pd", damaged});
  EXPECT_EQ(r.exit, 1) << describe(r);
  EXPECT_NE(error_of(r).find("a damaged graid superblock"), std::string::npos) << error_of(r);
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(file_text(newer), newer_bytes) << "a refusal writes nothing";

  // pd 3 (free) comes to hold a newer graid's metadata while graidd is down.
  EXPECT_EQ(d_->stop(SIGTERM), 0);
  ASSERT_EQ(run_tool("cp --sparse=always '" + newer + "' '" + dir_.file("pd3") + "'").status, 0);
  ASSERT_TRUE(d_->start()) << d_->log();
  const json pd3 = ok({"describe", "pd", "3"});
  EXPECT_EQ(pd3["dg_id"], nullptr) << pd3.dump();
  EXPECT_NE(pd3["message"].get<std::string>().find("graid metadata of format 2.0"),
            std::string::npos)
      << pd3.dump();
  const std::string pd3_bytes = file_text(dir_.file("pd3"));
  make_pds(2);  // pds 4 and 5
  r = d_->ctl({"create", "dg", "raid5", "3-5"});
  EXPECT_NE(r.exit, 0) << describe(r);
  EXPECT_NE(error_of(r).find("graid metadata of format 2.0"), std::string::npos) << error_of(r);
  EXPECT_EQ(file_text(dir_.file("pd3")), pd3_bytes) << "a refusal writes nothing";
  // --force takes it.
  const json dg = ok({"create", "dg", "raid5", "3-5", "--force"});
  EXPECT_EQ(dg["state"], "optimal") << dg.dump();
}

// Devices that hold other software's data (a filesystem, swap, a partition table) are refused
// wherever graid would write them: create pd, create dg (a PD formatted after it was registered),
// replace pd, and a hot spare; each refusal names what was found and where and changes nothing;
// --force wipes what was found (an event says what) and goes on.
TEST_F(GraiddTest, DevicesHoldingDataAreRefusedAndWipedOnlyWithForce) {
  for (const char* tool : {"mkfs.ext4", "mkswap", "sfdisk", "blkid"})
    if (!have_tool(tool)) GTEST_SKIP() << tool << " not installed (Debian: e2fsprogs, fdisk)";
  const auto signatures_left = [](const std::string& path) {
    // blkid -p exits 2 when it finds nothing.
    return run_tool("blkid -p '" + path + "'").status != 2;
  };
  // create pd of a file holding ext4.
  const std::string ext4 = make_pd_file(dir_, "ext4", kPdBytes);
  ASSERT_EQ(run_tool("mkfs.ext4 -q -F -L data '" + ext4 + "'").status, 0);
  json before = snapshot();
  std::string bytes = file_text(ext4);
  CtlRun r = d_->ctl({"create", "pd", ext4});
  EXPECT_EQ(r.exit, 1) << describe(r);
  EXPECT_NE(error_of(r).find(ext4 + " holds an ext4 filesystem (label \"data\", UUID "),
            std::string::npos)
      << error_of(r);
  EXPECT_NE(error_of(r).find("at byte 1080): add --force to wipe it and use it"), std::string::npos)
      << error_of(r);
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(file_text(ext4), bytes) << "a refusal writes nothing";
  ok({"create", "pd", ext4, "--force"});  // pd 0
  EXPECT_FALSE(signatures_left(ext4));
  bool wiped_event = false;
  const json events = ok({"list", "event"})["events"];  // a copy: ok()'s result is a temporary
  for (const auto& e : events)
    wiped_event |= e["kind"] == "pd_wiped" &&
                   e["message"].get<std::string>().find("ext4 filesystem") != std::string::npos;
  EXPECT_TRUE(wiped_event);

  // A PD formatted after it was registered: create dg refuses it, naming the PD.
  make_pds(5);  // pds 1-5
  const auto path_of = [&](int pd) {
    return ok({"describe", "pd", std::to_string(pd)})["path"].get<std::string>();
  };
  ASSERT_EQ(run_tool("mkswap -q '" + path_of(1) + "'").status, 0);
  before = snapshot();
  bytes = file_text(path_of(1));
  r = d_->ctl({"create", "dg", "raid5", "0-2"});
  EXPECT_EQ(r.exit, 1) << describe(r);
  EXPECT_NE(error_of(r).find("pd 1: " + path_of(1) + " holds swap space"), std::string::npos)
      << error_of(r);
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(file_text(path_of(1)), bytes);
  ok({"create", "dg", "raid5", "0-2", "--force"});
  EXPECT_FALSE(signatures_left(path_of(1)));

  // replace pd onto a PD with a partition table; a hot spare with a filesystem.
  ASSERT_EQ(run_tool("printf 'label: gpt\\n,\\n' | sfdisk -q '" + path_of(3) + "'").status, 0);
  ASSERT_EQ(run_tool("mkfs.ext4 -q -F '" + path_of(4) + "'").status, 0);
  before = snapshot();
  r = d_->ctl({"replace", "pd", "0", "1", "3"});
  EXPECT_EQ(r.exit, 1) << describe(r);
  EXPECT_NE(error_of(r).find("holds a gpt partition table"), std::string::npos) << error_of(r);
  r = d_->ctl({"edit", "pd", "4", "hotspare", "0"});
  EXPECT_EQ(r.exit, 1) << describe(r);
  EXPECT_NE(error_of(r).find("holds an ext4 filesystem"), std::string::npos) << error_of(r);
  r = d_->ctl({"edit", "pd", "4", "hotspare", "global"});
  EXPECT_EQ(r.exit, 1) << describe(r);
  EXPECT_EQ(snapshot(), before);
  EXPECT_TRUE(signatures_left(path_of(3)));
  EXPECT_TRUE(signatures_left(path_of(4)));
  ok({"edit", "pd", "4", "hotspare", "0", "--force"});
  EXPECT_EQ(ok({"describe", "pd", "4"})["state"], "spare");
  const json dg = ok({"replace", "pd", "0", "1", "3", "--force"});
  EXPECT_EQ(dg["state"], "replacing") << dg.dump();
  EXPECT_FALSE(signatures_left(path_of(3)));
  EXPECT_FALSE(signatures_left(path_of(4)));
}

// Items 1, 2 and 7: a RAID5 with a member taken offline during writes, stopped cleanly and
// started again, says nothing of a re-sync (it is clean; the bits say what the member missed),
// names the member's drive as stale, not missing, and takes it back with marker online, rebuilt
// only where it missed writes; fio verifies every block. How the DG was initialised survives the
// restart.
TEST_F(GraiddTest, AnOfflineMemberComesBackAfterACleanRestart) {
  if (!have_tool("fio")) GTEST_SKIP() << "fio not installed (Debian: fio)";
  make_pds(5);
  ok({"create", "dg", "raid5", "0-4", "--strip", "16K"});
  const std::string init = ok({"describe", "dg", "0"})["init_method"];
  EXPECT_EQ(init, "members read zeroes: nothing to initialise");
  ok({"create", "vd", "0", "--size", "24M"});
  const std::string sock = dir_.file("vd.sock");
  ok({"export", "vd", "0", "0", "--nbd", "unix:" + sock});
  ToolRun w = fio_over_nbd(nbd_uri(sock), 21, "--rw=randwrite --io_size=8M --do_verify=0", 120);
  ASSERT_EQ(w.status, 0) << w.output;
  ok({"edit", "pd", "2", "marker", "offline"});
  w = fio_over_nbd(nbd_uri(sock), 22,
                   "--rw=randwrite --io_size=4M --offset=8M --size=4M "
                   "--do_verify=0",
                   120);
  ASSERT_EQ(w.status, 0) << w.output;
  EXPECT_EQ(d_->stop(SIGTERM), 0);
  ASSERT_TRUE(d_->start()) << d_->log();

  json dg = ok({"describe", "dg", "0"});
  EXPECT_EQ(dg["clean"], true) << dg.dump();
  EXPECT_EQ(dg["state"], "degraded") << dg.dump();
  EXPECT_EQ(dg["init_method"], init) << "recorded in the superblocks";
  EXPECT_FALSE(dg.contains("resync")) << dg.dump();
  EXPECT_EQ(dg["members"][2]["state"], "stale") << dg.dump();
  EXPECT_EQ(dg["members"][2]["pd_id"], 2) << dg.dump();
  EXPECT_NE(dg["message"].get<std::string>().find("slot 2: stale (pd 2"), std::string::npos)
      << dg.dump();
  EXPECT_EQ(ok({"describe", "pd", "2"})["state"], "offline");
  const json events = ok({"list", "event"})["events"];  // a copy: ok()'s result is a temporary
  for (const auto& e : events) {
    EXPECT_NE(e["kind"], "resync_started") << e.dump();
    EXPECT_NE(e["kind"], "resync_finished") << e.dump();
    if (e["kind"] == "dg_assembled") {
      const std::string m = e["message"];
      EXPECT_NE(m.find("clean"), std::string::npos) << m;
      EXPECT_NE(m.find("slot 2: stale (pd 2)"), std::string::npos) << m;
      EXPECT_EQ(m.find("missing"), std::string::npos) << m;
    }
  }
  EXPECT_EQ(d_->log().find("trusted as written"), std::string::npos) << d_->log();

  const json pd2 = ok({"edit", "pd", "2", "marker", "online"});
  EXPECT_EQ(pd2["slot"], 2) << pd2.dump();
  bool limited = false;
  const json after = ok({"list", "event"})["events"];
  for (const auto& e : after)
    limited |= e["kind"] == "pd_online" &&
               e["message"].get<std::string>().find("where the bitmap marks") != std::string::npos;
  EXPECT_TRUE(limited) << after.dump();
  dg = wait_for(
      "dg", "0", [](const json& j) { return j["state"] == "optimal"; }, 1200);
  EXPECT_EQ(dg["state"], "optimal") << dg.dump();
  EXPECT_EQ(dg["members"][2]["state"], "active") << dg.dump();
  // Every block, with another member failed: pd 2's rebuilt regions answer too.
  ok({"edit", "pd", "0", "marker", "offline"});
  w = fio_over_nbd(nbd_uri(sock), 21, "--rw=randwrite --io_size=8M --verify_only", 120);
  EXPECT_EQ(w.status, 0) << w.output;
  w = fio_over_nbd(nbd_uri(sock), 22,
                   "--rw=randwrite --io_size=4M --offset=8M --size=4M "
                   "--verify_only",
                   120);
  EXPECT_EQ(w.status, 0) << w.output;
}

// Items 2 and 3: after a restart a stale member can be replaced in its slot (rebuilt onto the
// new PD), and then taken out of the DG with delete pd; a member whose slot a hot spare took is
// taken out while the DG runs (md's --remove), a DG's spare too; a working member is refused,
// saying how to take it out. Each removal is an event, and the state dir forgets the PD.
TEST_F(GraiddTest, FailedAndStaleMembersAreReplacedAndRemovedWhileTheDgRuns) {
  make_pds(7);
  ok({"create", "dg", "raid6", "0-4", "--strip", "16K", "--spare", "5"});
  // A working member: refused, saying what to do.
  json before = snapshot();
  CtlRun r = d_->ctl({"delete", "pd", "1"});
  EXPECT_EQ(r.exit, 1) << describe(r);
  EXPECT_NE(error_of(r).find("is an active member of dg 0 (slot 1): take it out of the dg first"),
            std::string::npos)
      << error_of(r);
  EXPECT_EQ(snapshot(), before);

  // pd 1 offline: the spare (pd 5) takes its slot and is rebuilt; pd 1 can go.
  ok({"edit", "pd", "1", "marker", "offline"});
  json dg = wait_for(
      "dg", "0", [](const json& j) { return j["state"] == "optimal"; }, 1200);
  ASSERT_EQ(dg["state"], "optimal") << dg.dump();
  EXPECT_EQ(ok({"describe", "pd", "5"})["slot"], 1);
  ok({"delete", "pd", "1"});
  EXPECT_EQ(d_->ctl({"describe", "pd", "1"}).exit, 3);
  bool removed = false;
  const json events = ok({"list", "event"})["events"];
  for (const auto& e : events)
    removed |= e["kind"] == "pd_removed" && e["pd_id"] == 1;
  EXPECT_TRUE(removed) << events.dump();

  // pd 2 offline, then a restart: stale in its slot; replace pd puts pd 6 there.
  ok({"edit", "pd", "2", "marker", "offline"});
  EXPECT_EQ(d_->stop(SIGTERM), 0);
  ASSERT_TRUE(d_->start()) << d_->log();
  EXPECT_EQ(ok({"describe", "pd", "2"})["state"], "offline");
  EXPECT_EQ(d_->ctl({"describe", "pd", "1"}).exit, 3) << "the state dir forgot pd 1";
  r = d_->ctl({"replace", "pd", "0", "2", "2"});
  EXPECT_NE(error_of(r).find("marker online takes it back"), std::string::npos) << error_of(r);
  ok({"replace", "pd", "0", "2", "6"});
  dg = wait_for(
      "dg", "0", [](const json& j) { return j["state"] == "optimal"; }, 1200);
  ASSERT_EQ(dg["state"], "optimal") << dg.dump();
  EXPECT_EQ(ok({"describe", "pd", "6"})["slot"], 2);
  r = d_->ctl({"edit", "pd", "2", "marker", "online"});
  EXPECT_NE(error_of(r).find("has been taken"), std::string::npos) << error_of(r);
  // After another restart it is stale with its slot taken: the message points at delete pd.
  EXPECT_EQ(d_->stop(SIGTERM), 0);
  ASSERT_TRUE(d_->start()) << d_->log();
  const json pd2 = ok({"describe", "pd", "2"});
  EXPECT_NE(pd2["message"].get<std::string>().find("slot 2 another drive has taken"),
            std::string::npos)
      << pd2.dump();
  ok({"delete", "pd", "2"});

  // A DG's hot spare goes too, blank again: registering it needs no --force.
  const std::string spare_path = make_pd_file(dir_, "late-spare", kPdBytes);
  ok({"create", "pd", spare_path});  // pd 1
  ok({"edit", "pd", "1", "hotspare", "0"});
  EXPECT_EQ(ok({"describe", "dg", "0"})["spare_count"], 1);
  ok({"delete", "pd", "1"});
  EXPECT_EQ(ok({"describe", "dg", "0"})["spare_count"], 0);
  ok({"create", "pd", spare_path});
  EXPECT_EQ(d_->stop(SIGTERM), 0);
  ASSERT_TRUE(d_->start()) << d_->log();
  dg = ok({"describe", "dg", "0"});
  EXPECT_EQ(dg["state"], "optimal") << dg.dump();
  EXPECT_EQ(dg["spare_count"], 0) << dg.dump();
}

// Item 6: unexport vd and delete vd of a VD whose NBD export has a client refuse (kBusy), naming
// each client (who, since when) and changing nothing, unless --force; a connection still in its
// handshake is not a client. describe vd lists the clients.
TEST_F(GraiddTest, UnexportAndDeleteOfAVdInUseOverNbdNameItsClients) {
  make_pds(3);
  ok({"create", "dg", "raid5", "0-2", "--strip", "16K"});
  ok({"create", "vd", "0", "--size", "8M"});
  ok({"create", "vd", "0", "--size", "8M"});
  const std::string sock0 = dir_.file("vd0.sock"), sock1 = dir_.file("vd1.sock");
  ok({"export", "vd", "0", "0", "--nbd", "unix:" + sock0});
  ok({"export", "vd", "0", "1", "--nbd", "unix:" + sock1});
  // One client of vd 0 past NBD_OPT_GO; one connection to vd 1 still in its handshake.
  NbdTestClient client;
  ASSERT_TRUE(client.connect_unix(sock0));
  ASSERT_TRUE(client.handshake("", /*structured=*/true));
  NbdTestClient greeting;
  ASSERT_TRUE(greeting.connect_unix(sock1));
  json vd = ok({"describe", "vd", "0", "0"});
  ASSERT_EQ(vd["exports"][0]["clients"].size(), 1u) << vd.dump();
  const std::string peer = vd["exports"][0]["clients"][0]["peer"];
  EXPECT_NE(peer.find("unix (pid " + std::to_string(::getpid())), std::string::npos) << peer;
  EXPECT_TRUE(ok({"describe", "vd", "0", "1"})["exports"][0]["clients"].empty());

  const json before = snapshot();
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"unexport", "vd", "0", "0"},
                                             {"unexport", "vd", "0", "0", "--nbd"},
                                             {"delete", "vd", "0", "0", "--confirm"}}) {
    const CtlRun r = d_->ctl(args);
    EXPECT_EQ(r.exit, 1) << describe(r);
    const std::string m = error_of(r);
    EXPECT_NE(m.find("1 NBD client is connected (" + peer + " since 20"), std::string::npos) << m;
    EXPECT_NE(m.find("add --force"), std::string::npos) << m;
  }
  EXPECT_EQ(snapshot(), before);
  // The client is still served.
  ASSERT_TRUE(client.send_request(nbd::kCmdRead, 0, 1, 0, 4096, {}));
  auto reply = client.recv_reply([](std::uint64_t) { return 4096; });
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->error, 0u);
  // A connection that never finished its handshake is nobody's: vd 1 goes.
  ok({"unexport", "vd", "0", "1"});
  // --force disconnects the client.
  ok({"delete", "vd", "0", "0", "--confirm", "--force"});
  EXPECT_TRUE(client.sees_eof());
  EXPECT_EQ(d_->ctl({"describe", "vd", "0", "0"}).exit, 3);
}

// Item 8: messages that said the wrong thing.
TEST_F(GraiddTest, MessagesSayWhatHappens) {
  make_pds(6);
  ok({"create", "dg", "raid5", "0-3", "--strip", "16K"});
  ok({"create", "vd", "0", "--size", "8M"});
  // delete dg without --confirm promised to destroy "every vd in it"; it refuses while VDs exist.
  CtlRun r = d_->ctl({"delete", "dg", "0"}, /*json=*/false);
  EXPECT_EQ(r.exit, 2) << describe(r);
  EXPECT_EQ(r.err.find("every vd in it"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("a dg that still has VDs is refused"), std::string::npos) << r.err;
  // stats of a DG or VD that does not exist: exit 3, not an empty table.
  r = d_->ctl({"stats", "dg", "7"});
  EXPECT_EQ(r.exit, 3) << describe(r);
  EXPECT_NE(error_of(r).find("dg 7 does not exist"), std::string::npos) << error_of(r);
  r = d_->ctl({"stats", "vd", "0", "9"});
  EXPECT_EQ(r.exit, 3) << describe(r);
  EXPECT_NE(error_of(r).find("vd 9 of dg 0 does not exist"), std::string::npos) << error_of(r);
  EXPECT_EQ(d_->ctl({"stats", "dg", "0"}).exit, 0);
  // A second edit vd size: the note names the size the NBD clients see, the first one.
  const std::string sock = dir_.file("vd.sock");
  ok({"export", "vd", "0", "0", "--nbd", "unix:" + sock});
  ok({"edit", "vd", "0", "0", "size", "12M"});
  const json second = ok({"edit", "vd", "0", "0", "size", "16M"});
  const std::string notes = second["notes"].dump();
  EXPECT_NE(notes.find("keeps telling clients 8388608 bytes"), std::string::npos) << notes;
  EXPECT_EQ(second["previous_size"], 12u << 20);
  // A hot replace on a degraded DG does not claim it keeps its redundancy.
  ok({"edit", "pd", "0", "marker", "offline"});
  ok({"replace", "pd", "0", "1", "4"});
  std::string replacing;
  const json events = ok({"list", "event"})["events"];  // a copy: ok()'s result is a temporary
  for (const auto& e : events)
    if (e["kind"] == "pd_replacing") replacing = e["message"];
  EXPECT_EQ(replacing.find("keeps its redundancy"), std::string::npos) << replacing;
  EXPECT_NE(replacing.find("stays degraded"), std::string::npos) << replacing;
}

}  // namespace
}  // namespace graid::testing
