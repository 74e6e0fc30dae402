// What the passthrough member reads before its first I/O: Identify Namespace and Controller pages
// (field offsets, refused formats), the limits derived from them and sysfs, and the sysfs
// pairing of /dev/ngXnY with /dev/nvmeXnY on a fake sysfs tree laid out as Linux 6.12 lays it
// out (seen in the VM: /sys/dev/char/244:1 -> ../../devices/.../nvme/nvme1/ng1n1).
#include "io/nvme_identify.h"

#include <gtest/gtest.h>
#include <sys/sysmacros.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/nvme_sysfs.h"
#include "temp_dir.h"

namespace graid::nvme {
namespace {

using Page = std::array<std::byte, kIdentifyBytes>;

void put(Page& p, std::size_t at, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    p[at + i] = static_cast<std::byte>(v >> (8 * i));
}

// A namespace of `blocks` blocks using format `index` of two: 512-byte and 4096-byte LBAs.
Page namespace_page(std::uint64_t blocks, unsigned index) {
  Page p{};
  put(p, 0, blocks, 8);        // NSZE
  put(p, 25, 1, 1);            // NLBAF: two formats (0's based)
  put(p, 26, index, 1);        // FLBAS
  put(p, 128 + 2, 9, 1);       // LBAF0: LBADS 9
  put(p, 128 + 4 + 2, 12, 1);  // LBAF1: LBADS 12
  put(p, 33, 0x09, 1);         // DLFEAT: reads zeroes, Write Zeroes may deallocate
  return p;
}

TEST(NvmeIdentify, NamespaceSizeFormatAndDeallocateFeatures) {
  Page p = namespace_page(0x123456789ULL, 1);
  auto ns = parse_identify_namespace(p, "/dev/ng0n1");
  ASSERT_TRUE(ns.is_ok()) << ns.status().to_string();
  EXPECT_EQ(ns->blocks, 0x123456789ULL);
  EXPECT_EQ(ns->lba_shift, 12U);
  EXPECT_EQ(ns->format_index, 1);
  EXPECT_EQ(ns->dlfeat, 0x09);
  p = namespace_page(1000, 0);
  ns = parse_identify_namespace(p, "/dev/ng0n1");
  ASSERT_TRUE(ns.is_ok());
  EXPECT_EQ(ns->lba_shift, 9U);
}

TEST(NvmeIdentify, FormatIndexUsesTheHighFlbasBitsBeyondSixteenFormats) {
  Page p{};
  put(p, 0, 100, 8);
  put(p, 25, 19, 1);               // 20 formats
  put(p, 26, 0x1 | (1U << 5), 1);  // index 0x11 = 17
  put(p, 128 + 4 * 17 + 2, 12, 1);
  auto ns = parse_identify_namespace(p, "/dev/ng0n1");
  ASSERT_TRUE(ns.is_ok()) << ns.status().to_string();
  EXPECT_EQ(ns->format_index, 17);
  EXPECT_EQ(ns->lba_shift, 12U);
}

TEST(NvmeIdentify, RefusesMetadataProtectionOddBlockSizesAndInactiveNamespaces) {
  Page p = namespace_page(1000, 1);
  put(p, 128 + 4, 8, 2);  // LBAF1: 8 bytes of metadata
  auto ns = parse_identify_namespace(p, "/dev/ng3n1");
  ASSERT_FALSE(ns.is_ok());
  EXPECT_EQ(ns.status().code(), Errc::kUnsupported);
  EXPECT_NE(ns.status().message().find("/dev/ng3n1"), std::string::npos);
  EXPECT_NE(ns.status().message().find("8 bytes of metadata"), std::string::npos)
      << ns.status().message();
  EXPECT_NE(ns.status().message().find("nvme format"), std::string::npos)
      << "says what to do about it";

  put(p, 29, 1, 1);  // DPS: protection information type 1
  ns = parse_identify_namespace(p, "/dev/ng3n1");
  ASSERT_FALSE(ns.is_ok());
  EXPECT_NE(ns.status().message().find("protection information type 1"), std::string::npos)
      << ns.status().message();

  p = namespace_page(1000, 1);
  put(p, 128 + 4 + 2, 16, 1);  // 64 KiB blocks
  ns = parse_identify_namespace(p, "/dev/ng3n1");
  ASSERT_FALSE(ns.is_ok());
  EXPECT_EQ(ns.status().code(), Errc::kUnsupported);

  p = namespace_page(1000, 1);
  put(p, 26, 5, 1);  // format 5 of 2
  ns = parse_identify_namespace(p, "/dev/ng3n1");
  EXPECT_FALSE(ns.is_ok());

  p = namespace_page(0, 1);
  ns = parse_identify_namespace(p, "/dev/ng3n1");
  ASSERT_FALSE(ns.is_ok());
  EXPECT_EQ(ns.status().code(), Errc::kNotFound);
}

TEST(NvmeIdentify, ControllerStringsMdtsAndOptionalCommands) {
  Page p{};
  const char serial[] = "NVME1               ";
  const char model[] = "QEMU NVMe Ctrl                          ";
  std::memcpy(p.data() + 4, serial, 20);
  std::memcpy(p.data() + 24, model, 40);
  std::memcpy(p.data() + 64, "8.2.2   ", 8);
  put(p, 77, 7, 1);                           // MDTS
  put(p, 520, (1U << 2) | (1U << 3) | 1, 2);  // ONCS: compare, DSM, Write Zeroes
  put(p, 525, 1, 1);                          // VWC
  const ControllerInfo c = parse_identify_controller(p);
  EXPECT_EQ(c.serial, "NVME1");
  EXPECT_EQ(c.model, "QEMU NVMe Ctrl");
  EXPECT_EQ(c.firmware, "8.2.2");
  EXPECT_EQ(c.mdts, 7);
  EXPECT_TRUE(c.has_write_zeroes());
  EXPECT_TRUE(c.has_dataset_management());
  EXPECT_TRUE(c.volatile_write_cache);
}

// CRDT1..3 are bytes 129:128, 131:130 and 133:132 of Identify Controller (NVMe base
// specification 1.4 and later; before 1.4 those bytes are reserved, so 0: no delay asked).
TEST(NvmeIdentify, ControllerRetryDelayTimes) {
  Page p{};
  put(p, 111, 1, 1);       // CNTRLTYPE (I/O controller), just below them
  put(p, 128, 3, 2);       // CRDT1: 300 ms
  put(p, 130, 0x1234, 2);  // CRDT2
  put(p, 132, 0xffff, 2);  // CRDT3: the most, 109 minutes
  put(p, 134, 0xaa, 1);    // reserved, just above them
  const ControllerInfo c = parse_identify_controller(p);
  EXPECT_EQ(c.crdt[0], 3);
  EXPECT_EQ(c.crdt[1], 0x1234);
  EXPECT_EQ(c.crdt[2], 0xffff);
  const Limits l = derive_limits(1, NamespaceInfo{}, c, QueueLimits{});
  EXPECT_EQ(l.crdt, c.crdt) << "the limits the I/O path retries with";
  EXPECT_EQ(parse_identify_controller(Page{}).crdt, (std::array<std::uint16_t, 3>{}));
}

TEST(NvmeLimits, TransferSizeFromSysfsThenMdtsThenADefault) {
  NamespaceInfo ns;
  ns.lba_shift = 12;
  ControllerInfo c;
  c.mdts = 7;
  QueueLimits q;
  q.max_hw_sectors_kb = 256;  // the kernel's limit wins: it already holds MDTS in real pages
  q.max_segments = 33;
  Limits l = derive_limits(5, ns, c, q);
  EXPECT_EQ(l.nsid, 5U);
  EXPECT_EQ(l.lba_shift, 12U);
  EXPECT_EQ(l.max_transfer_bytes, 256U << 10);
  EXPECT_EQ(l.max_segments, 33U);
  q = {};
  l = derive_limits(5, ns, c, q);
  EXPECT_EQ(l.max_transfer_bytes, 512U << 10) << "2^7 x 4 KiB";
  EXPECT_EQ(l.max_segments, 0U);
  c.mdts = 12;
  EXPECT_EQ(derive_limits(5, ns, c, q).max_transfer_bytes, kMaxMdtsTransfer);
  c.mdts = 0;
  EXPECT_EQ(derive_limits(5, ns, c, q).max_transfer_bytes, kDefaultMaxTransfer);
}

TEST(NvmeLimits, WriteZeroesAndDiscardFollowOncsDlfeatAndSysfs) {
  NamespaceInfo ns;
  ns.lba_shift = 12;
  ControllerInfo c;
  QueueLimits q;
  c.oncs = 1U << 3;  // Write Zeroes
  ns.dlfeat = 0x09;
  Limits l = derive_limits(1, ns, c, q);
  EXPECT_EQ(l.max_zeroes_blocks, kMaxBlocksPerCommand);
  EXPECT_EQ(l.discard, DiscardMethod::kWriteZeroesDeallocate);
  ns.dlfeat = 0x01;
  EXPECT_EQ(derive_limits(1, ns, c, q).discard, DiscardMethod::kWriteZeroes);
  q.write_zeroes_max_bytes = 512 << 10;  // what the VM's kernel reports for QEMU's drives
  EXPECT_EQ(derive_limits(1, ns, c, q).max_zeroes_blocks, 128U);
  q.write_zeroes_max_bytes = 0;  // the kernel turned Write Zeroes off for this drive
  l = derive_limits(1, ns, c, q);
  EXPECT_FALSE(l.write_zeroes());
  EXPECT_EQ(l.discard, DiscardMethod::kNone);
  c.oncs = 1U << 2;  // DSM only: deallocate where deallocated blocks read as zeroes
  q = {};
  EXPECT_EQ(derive_limits(1, ns, c, q).discard, DiscardMethod::kDeallocate);
  ns.dlfeat = 0x00;  // reads of deallocated blocks not reported: no discard at all
  EXPECT_EQ(derive_limits(1, ns, c, q).discard, DiscardMethod::kNone);
  ns.dlfeat = 0x08;  // DEAC supported, but deallocated blocks do not read as zeroes
  c.oncs = 1U << 3;
  EXPECT_EQ(derive_limits(1, ns, c, q).discard, DiscardMethod::kWriteZeroes);
}

// NSFEAT bit 2 says the namespace has the Deallocated or Unwritten Logical Block error; the
// Error Recovery feature's DULBE (dword 0 bit 16) says whether it is on. When it is, a
// deallocated block reads as status 2/87h, not as DLFEAT's zeroes: graid must not deallocate to
// zero a range (the array would read errors where it expects zeroes).
TEST(NvmeIdentify, DeallocatedErrorSupportAndTheDulbeBit) {
  Page p = namespace_page(1000, 0);
  put(p, 24, 0x04, 1);  // NSFEAT: DAE
  auto ns = parse_identify_namespace(p, "/dev/ng0n1");
  ASSERT_TRUE(ns.is_ok());
  EXPECT_EQ(ns->nsfeat, 0x04);
  EXPECT_TRUE(ns->has_deallocated_error());
  EXPECT_FALSE(ns->dulbe) << "Identify alone does not say it is on";
  EXPECT_TRUE(ns->deallocated_reads_zeroes());
  put(p, 24, 0x1b, 1);  // thin, atomics, ID reuse, optimal I/O: no DAE
  ns = parse_identify_namespace(p, "/dev/ng0n1");
  ASSERT_TRUE(ns.is_ok());
  EXPECT_FALSE(ns->has_deallocated_error());

  EXPECT_TRUE(error_recovery_dulbe(0x10000));
  EXPECT_TRUE(error_recovery_dulbe(0x1ffff));
  EXPECT_FALSE(error_recovery_dulbe(0xffff)) << "TLER, bits 15:0";
  EXPECT_FALSE(error_recovery_dulbe(0x20000));
}

TEST(NvmeLimits, DulbeOnMeansDeallocatedBlocksDoNotReadAsZeroes) {
  NamespaceInfo ns;
  ns.lba_shift = 12;
  ns.nsfeat = 0x04;
  ns.dlfeat = 0x09;  // reads zeroes, Write Zeroes may deallocate
  ns.dulbe = true;
  EXPECT_FALSE(ns.deallocated_reads_zeroes());
  ControllerInfo c;
  const QueueLimits q;
  c.oncs = (1U << 2) | (1U << 3);  // DSM and Write Zeroes
  Limits l = derive_limits(1, ns, c, q);
  EXPECT_TRUE(l.write_zeroes());
  EXPECT_EQ(l.discard, DiscardMethod::kWriteZeroes) << "Write Zeroes without DEAC";
  c.oncs = 1U << 2;  // DSM only
  EXPECT_EQ(derive_limits(1, ns, c, q).discard, DiscardMethod::kNone)
      << "a deallocate would leave blocks that read as errors: the array writes zeroes itself";
  ns.dulbe = false;  // the same namespace with the error off
  EXPECT_EQ(derive_limits(1, ns, c, q).discard, DiscardMethod::kDeallocate);
  c.oncs = (1U << 2) | (1U << 3);
  EXPECT_EQ(derive_limits(1, ns, c, q).discard, DiscardMethod::kWriteZeroesDeallocate);
}

// ---- sysfs -------------------------------------------------------------------------------------

namespace fs = std::filesystem;

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    roots_.sys = dir_.path() + "/sys";
    roots_.dev = dir_.path() + "/dev";
    fs::create_directories(roots_.dev);
    for (const char* d : {"dev/char", "dev/block", "class/nvme-generic", "class/block", "class/mem",
                          "class/nvme"}) {
      fs::create_directories(roots_.sys + "/" + d);
    }
    add_controller("nvme0", "0000:02:00.0");
    add_controller("nvme1", "0000:01:00.0");
    add_namespace("nvme0", "0000:02:00.0", "ng0n1", "244:0", "nvme0n1", "259:4");
    add_namespace("nvme1", "0000:01:00.0", "ng1n1", "244:1", "nvme1n1", "259:3");
    // /dev/null: a "mem" class device
    const std::string null_dir = roots_.sys + "/devices/virtual/mem/null";
    fs::create_directories(null_dir);
    fs::create_directory_symlink("../../../../class/mem", null_dir + "/subsystem");
    fs::create_directory_symlink("../../devices/virtual/mem/null", roots_.sys + "/dev/char/1:3");
  }
  void write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text << "\n";
  }
  std::string ctrl_dir(const std::string& pci, const std::string& ctrl) {
    return "devices/pci0000:00/" + pci + "/nvme/" + ctrl;
  }
  void add_controller(const std::string& ctrl, const std::string& pci) {
    const std::string dir = roots_.sys + "/" + ctrl_dir(pci, ctrl);
    fs::create_directories(dir);
    write(dir + "/model", "QEMU NVMe Ctrl");
  }
  void add_namespace(const std::string& ctrl, const std::string& pci, const std::string& ng,
                     const std::string& ng_dev, const std::string& blk,
                     const std::string& blk_dev) {
    const std::string rel = ctrl_dir(pci, ctrl);
    const std::string ng_dir = roots_.sys + "/" + rel + "/" + ng;
    const std::string blk_dir = roots_.sys + "/" + rel + "/" + blk;
    fs::create_directories(ng_dir);
    fs::create_directories(blk_dir);
    write(ng_dir + "/dev", ng_dev);
    write(blk_dir + "/dev", blk_dev);
    fs::create_directory_symlink("../../../../../../class/nvme-generic", ng_dir + "/subsystem");
    fs::create_directory_symlink("..", ng_dir + "/device");
    fs::create_directory_symlink("..", blk_dir + "/device");
    write(blk_dir + "/queue/max_hw_sectors_kb", "512");
    write(blk_dir + "/queue/max_segments", "128");
    write(blk_dir + "/queue/write_zeroes_max_bytes", "524288");
    fs::create_directory_symlink("../../" + rel + "/" + ng, roots_.sys + "/dev/char/" + ng_dev);
    fs::create_directory_symlink("../../" + rel + "/" + blk, roots_.sys + "/dev/block/" + blk_dev);
    fs::create_directory_symlink("../../" + rel + "/" + ng,
                                 roots_.sys + "/class/nvme-generic/" + ng);
    fs::create_directory_symlink("../../" + rel + "/" + blk, roots_.sys + "/class/block/" + blk);
  }
  static std::uint64_t devnum(unsigned maj, unsigned min) { return makedev(maj, min); }

  graid::testing::TempDir dir_{"/tmp"};
  SysfsRoots roots_;
};

TEST_F(FakeSysfs, ClassesAndNamesOfDeviceNumbers) {
  EXPECT_EQ(char_device_class(roots_, devnum(244, 1)), "nvme-generic");
  EXPECT_EQ(char_device_class(roots_, devnum(1, 3)), "mem");
  EXPECT_EQ(char_device_class(roots_, devnum(9, 9)), "") << "unknown to sysfs";
  EXPECT_EQ(device_name(roots_, false, devnum(244, 1)), "ng1n1");
  EXPECT_EQ(device_name(roots_, true, devnum(259, 4)), "nvme0n1");
  EXPECT_EQ(sysfs_devnum(roots_, true, "nvme1n1"), devnum(259, 3));
  EXPECT_EQ(sysfs_devnum(roots_, false, "ng0n1"), devnum(244, 0));
}

TEST_F(FakeSysfs, PairsGenericAndBlockNodesOfOneNamespace) {
  EXPECT_EQ(block_sibling(roots_, "ng1n1"), "nvme1n1");
  EXPECT_EQ(block_sibling(roots_, "ng0n1"), "nvme0n1");
  EXPECT_EQ(generic_sibling(roots_, "nvme0n1"), "ng0n1");
  EXPECT_EQ(block_sibling(roots_, "ng7n1"), "") << "no such block device";
  EXPECT_EQ(generic_sibling(roots_, "nvme0n1p1"), "") << "a partition has no generic node";
  EXPECT_EQ(block_sibling(roots_, "null"), "");
  EXPECT_EQ(parent_device_dir(roots_, false, "ng1n1"), parent_device_dir(roots_, true, "nvme1n1"));
  EXPECT_NE(parent_device_dir(roots_, false, "ng1n1"), "");
}

TEST_F(FakeSysfs, NamesAloneDoNotPairNodesOfDifferentControllers) {
  // ng0n1's parent link pointed at the other controller: the names match, the drives do not.
  const std::string link = roots_.sys + "/class/nvme-generic/ng0n1/device";
  fs::remove(link);
  fs::create_directory_symlink("../../../../0000:01:00.0/nvme/nvme1", link);
  EXPECT_NE(parent_device_dir(roots_, false, "ng0n1"), parent_device_dir(roots_, true, "nvme0n1"));
  EXPECT_EQ(block_sibling(roots_, "ng0n1"), "");
  EXPECT_EQ(generic_sibling(roots_, "nvme0n1"), "");
}

TEST_F(FakeSysfs, QueueLimitsOfTheBlockDevice) {
  const QueueLimits q = read_queue_limits(roots_, "nvme1n1");
  EXPECT_EQ(q.max_hw_sectors_kb, 512U);
  EXPECT_EQ(q.max_segments, 128U);
  ASSERT_TRUE(q.write_zeroes_max_bytes.has_value());
  EXPECT_EQ(*q.write_zeroes_max_bytes, 524288U);
  const QueueLimits none = read_queue_limits(roots_, "nvme9n1");
  EXPECT_EQ(none.max_hw_sectors_kb, 0U);
  EXPECT_FALSE(none.write_zeroes_max_bytes.has_value());
}

TEST_F(FakeSysfs, DeviceNodesMustExistWithTheRightNumber) {
  // No /dev nodes in the fake tree (making device nodes needs CAP_MKNOD): nothing is found, which
  // is what the member then does without (no O_EXCL claim, no sibling to switch to).
  EXPECT_EQ(device_node(roots_, true, "nvme1n1"), "");
  write(roots_.dev + "/nvme1n1", "a regular file where the node should be");
  EXPECT_EQ(device_node(roots_, true, "nvme1n1"), "") << "not a block device";
}

}  // namespace
}  // namespace graid::nvme
