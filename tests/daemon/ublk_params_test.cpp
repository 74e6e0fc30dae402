// The ublk parameter planner and the driver ABI constants (daemon/ublk/ublk_params.h,
// ublk_uapi.h): what a VD of each geometry advertises, how the memory budget shapes queues, and
// the encodings the 6.12 driver expects.
#include "ublk/ublk_params.h"

#include <gtest/gtest.h>

#include "ublk/ublk_control.h"
#include "ublk/ublk_uapi.h"

namespace graid::ublk {
namespace {

UblkShape raid5(std::uint32_t data, std::uint32_t strip = 64 << 10) {
  UblkShape s;
  s.size_bytes = 1ull << 30;
  s.logical_block = 512;
  s.strip_bytes = strip;
  s.data_strips = data;
  return s;
}

TEST(UblkAbi, CommandEncodingsAreThoseOfLinux612) {
  // _IOWR('u', nr, 32-byte ctrl cmd) / _IOR(...) / _IOWR('u', nr, 16-byte io cmd).
  EXPECT_EQ(ctrl_cmd_op(kCmdAddDev), 0xc0207504u);
  EXPECT_EQ(ctrl_cmd_op(kCmdDelDev), 0xc0207505u);
  EXPECT_EQ(ctrl_cmd_op(kCmdStartDev), 0xc0207506u);
  EXPECT_EQ(ctrl_cmd_op(kCmdStopDev), 0xc0207507u);
  EXPECT_EQ(ctrl_cmd_op(kCmdSetParams), 0xc0207508u);
  EXPECT_EQ(ctrl_cmd_op(kCmdGetDevInfo), 0x80207502u);
  EXPECT_EQ(ctrl_cmd_op(kCmdGetParams), 0x80207509u);
  EXPECT_EQ(ctrl_cmd_op(kCmdGetFeatures), 0x80207513u);
  EXPECT_EQ(ctrl_cmd_op(kCmdStartUserRecovery), 0xc0207510u);
  EXPECT_EQ(ctrl_cmd_op(kCmdEndUserRecovery), 0xc0207511u);
  // Later kernels: UBLK_U_CMD_UPDATE_SIZE and QUIESCE_DEV (6.16), TRY_STOP_DEV (7.0), all
  // _IOWR, and their feature bits.
  EXPECT_EQ(ctrl_cmd_op(kCmdUpdateSize), 0xc0207515u);
  EXPECT_EQ(ctrl_cmd_op(kCmdQuiesceDev), 0xc0207516u);
  EXPECT_EQ(ctrl_cmd_op(kCmdTryStopDev), 0xc0207517u);
  EXPECT_EQ(kFlagQuiesce, 1ull << 12);
  EXPECT_EQ(flag_names(kFlagUserRecovery | kFlagUpdateSize | kFlagQuiesce | kFlagSafeStopDev |
                       (1ull << 40)),
            (std::vector<std::string>{"USER_RECOVERY", "UPDATE_SIZE", "QUIESCE", "SAFE_STOP_DEV",
                                      "bit 40"}));
  EXPECT_TRUE(flag_names(0).empty());
  EXPECT_EQ(kFlagUpdateSize, 1ull << 10);
  EXPECT_EQ(kFlagSafeStopDev, 1ull << 17);
  EXPECT_EQ(io_cmd_op(kIoFetchReq), 0xc0107520u);
  EXPECT_EQ(io_cmd_op(kIoCommitAndFetchReq), 0xc0107521u);
  // Descriptor areas: 4096 x 24 bytes, rounded to the kernel's page, per queue; each queue maps
  // its own depth's, page-rounded. (Main f1b45f8 used 4 KiB pages whatever the kernel's: a
  // 64 KiB-page kernel refused every queue after the first.)
  EXPECT_EQ(desc_area_stride(4096), 98304u);
  EXPECT_EQ(desc_area_stride(16384), 98304u);
  EXPECT_EQ(desc_area_stride(65536), 131072u);
  EXPECT_EQ(desc_map_bytes(128, 4096), 4096u);
  EXPECT_EQ(desc_map_bytes(171, 4096), 8192u);  // 171 x 24 = 4104
  EXPECT_EQ(desc_map_bytes(128, 65536), 65536u);
  EXPECT_EQ(user_copy_offset(1, 2, 512), 0x80000000ull + (1ull << 41) + (2ull << 25) + 512);
}

TEST(UblkParams, Raid5FourPlusOneAdvertisesStripAndStripe) {
  auto l = plan_ublk(raid5(4), {.queues = 2});
  ASSERT_TRUE(l.is_ok()) << l.status().to_string();
  const ParamBasic& b = l->params.basic;
  EXPECT_EQ(l->params.len, sizeof(Params));
  EXPECT_EQ(l->params.types, kParamBasic);  // no discard: the shape has none
  EXPECT_EQ(b.logical_bs_shift, 9);
  EXPECT_EQ(b.physical_bs_shift, 12);
  EXPECT_EQ(b.io_min_shift, 16);   // 64 KiB strip
  EXPECT_EQ(b.io_opt_shift, 18);   // 256 KiB of data per stripe
  EXPECT_EQ(b.chunk_sectors, 0u);  // a split would break full-stripe writes
  EXPECT_EQ(b.dev_sectors, (1ull << 30) >> 9);
  EXPECT_EQ(b.attrs, kAttrVolatileCache | kAttrFua);
  EXPECT_EQ(l->max_io_bytes, 1u << 20);
  EXPECT_GE(std::uint64_t{b.max_sectors} << 9, 4u * (64 << 10));  // a full stripe fits
  EXPECT_EQ(std::uint64_t{b.max_sectors} << 9, l->max_io_bytes);
  EXPECT_EQ(l->queues, 2);
  EXPECT_EQ(l->depth, 128);
  EXPECT_EQ(l->buffer_bytes, 2ull * 128 * (1 << 20));
}

TEST(UblkParams, NonPowerOfTwoStripeFallsBackToTheStrip) {
  auto l = plan_ublk(raid5(3), {.queues = 1});
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->params.basic.io_min_shift, 16);
  EXPECT_EQ(l->params.basic.io_opt_shift, 16);  // 192 KiB cannot be a shift
}

TEST(UblkParams, StripedLevelsSetChunkSectors) {
  UblkShape s = raid5(4, 128 << 10);
  s.striped = true;
  auto l = plan_ublk(s, {.queues = 1});
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->params.basic.chunk_sectors, (128u << 10) >> 9);
}

TEST(UblkParams, FourKnArraysAndReadOnly) {
  UblkShape s = raid5(4);
  s.logical_block = 4096;
  s.read_only = true;
  auto l = plan_ublk(s, {.queues = 1});
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->params.basic.logical_bs_shift, 12);
  EXPECT_NE(l->params.basic.attrs & kAttrReadOnly, 0u);
}

TEST(UblkParams, DiscardAndWriteZeroesOnlyWhereSupported) {
  UblkShape s = raid5(4);
  s.discard = true;
  auto l = plan_ublk(s, {.queues = 1});
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->params.types, kParamBasic | kParamDiscard);
  EXPECT_EQ(l->params.discard.max_discard_segments, 1);  // the driver takes nothing else
  EXPECT_NE(l->params.discard.discard_granularity, 0u);
  EXPECT_EQ(l->params.discard.max_discard_sectors, l->params.basic.max_sectors);
  EXPECT_EQ(l->params.discard.max_write_zeroes_sectors, 0u);
  s.discard = false;
  s.write_zeroes = true;
  l = plan_ublk(s, {.queues = 1});
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->params.discard.max_discard_sectors, 0u);
  EXPECT_EQ(l->params.discard.max_write_zeroes_sectors, l->params.basic.max_sectors);
}

TEST(UblkParams, BudgetShrinksDepthThenRequestSize) {
  // 16 queues x 128 x 1 MiB = 2 GiB: depth goes down to 16 (16 x 16 x 1 MiB = 256 MiB).
  auto l = plan_ublk(raid5(4), {.queues = 16});
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->depth, 16);
  EXPECT_EQ(l->max_io_bytes, 1u << 20);
  EXPECT_LE(l->buffer_bytes, 256ull << 20);
  // 64 queues: depth stays at 16, requests shrink to 256 KiB (still a full stripe).
  l = plan_ublk(raid5(4), {.queues = 64});
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->depth, 16);
  EXPECT_EQ(l->max_io_bytes, 256u << 10);
  EXPECT_LE(l->buffer_bytes, 256ull << 20);
  // A 16 MiB stripe (1 MiB strips x 16) with 4 queues: requests stay whole stripes, depth 4.
  l = plan_ublk(raid5(16, 1 << 20), {.queues = 4});
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->max_io_bytes, 16u << 20);
  EXPECT_EQ(l->depth, 4);
  EXPECT_LE(l->buffer_bytes, 256ull << 20);
  // USER_COPY holds no per-tag buffers: full depth, no budget used.
  l = plan_ublk(raid5(4), {.queues = 64, .user_copy = true});
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->depth, 128);
  EXPECT_EQ(l->buffer_bytes, 0u);
}

TEST(UblkParams, RefusesWhatCannotWork) {
  // Not even one full-stripe request per queue fits.
  auto l = plan_ublk(raid5(4, 1 << 20), {.queues = 4, .memory_budget = 8ull << 20});
  ASSERT_FALSE(l.is_ok());
  EXPECT_EQ(l.status().code(), Errc::kNoSpace);
  EXPECT_NE(l.status().message().find("budget"), std::string::npos);
  UblkShape s = raid5(4);
  s.size_bytes = 1000;  // not a block multiple
  EXPECT_EQ(plan_ublk(s, {}).status().code(), Errc::kInvalidArgument);
  s = raid5(4);
  s.logical_block = 8192;
  EXPECT_EQ(plan_ublk(s, {}).status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(plan_ublk(raid5(4), {.queues = 0}).status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(plan_ublk(raid5(4), {.queues = 1, .max_depth = 5000}).status().code(),
            Errc::kInvalidArgument);
}

TEST(UblkAbi, BatchCommandEncodingsAreThoseOfLinux70) {
  // _IOWR('u', 0x25..0x27, 16-byte struct ublk_batch_io).
  EXPECT_EQ(batch_cmd_op(kIoPrepIoCmds), 0xc0107525u);
  EXPECT_EQ(batch_cmd_op(kIoCommitIoCmds), 0xc0107526u);
  EXPECT_EQ(batch_cmd_op(kIoFetchIoCmds), 0xc0107527u);
  EXPECT_EQ(kFlagBatchIo, 1ull << 15);
}

TEST(UblkCopyChoice, EachModeOnEachDriverAndLevel) {
  constexpr std::uint64_t k612 = kFlagUserCopy | kFlagZeroCopy;  // no AUTO_BUF_REG
  constexpr std::uint64_t k73 = kFlagUserCopy | kFlagZeroCopy | kFlagAutoBufReg;
  const CopyChoice kernel{}, user{.user_copy = true}, zero{.user_copy = true, .zero_copy = true};
  for (const bool parity : {false, true}) {
    SCOPED_TRACE(parity);
    EXPECT_EQ(choose_copy(CopyMode::kKernel, k73, parity), kernel);
    EXPECT_EQ(choose_copy(CopyMode::kUser, k73, parity), user);
    EXPECT_EQ(choose_copy(CopyMode::kZero, k73, parity), zero);
    EXPECT_EQ(choose_copy(CopyMode::kZero, k612, parity), user);
    EXPECT_EQ(choose_copy(CopyMode::kAuto, k612, parity), kernel);
    // AUTO_BUF_REG without USER_COPY beside it cannot serve what zero copy refuses.
    EXPECT_EQ(choose_copy(CopyMode::kZero, kFlagZeroCopy | kFlagAutoBufReg, parity), user);
  }
  // auto: zero copy only where no parity needs the data in memory.
  EXPECT_EQ(choose_copy(CopyMode::kAuto, k73, false), zero);
  EXPECT_EQ(choose_copy(CopyMode::kAuto, k73, true), kernel);
}

}  // namespace
}  // namespace graid::ublk
