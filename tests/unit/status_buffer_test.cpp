// Status/Result error values and the alignment guarantees of AlignedBuffer/ChunkView.
#include <gtest/gtest.h>

#include <cerrno>

#include "graid/buffer.h"
#include "graid/status.h"

namespace graid {
namespace {

TEST(Status, OkAndErrors) {
  Status ok;
  EXPECT_TRUE(ok.is_ok());
  EXPECT_EQ(ok.to_string(), "ok");
  EXPECT_EQ(ok.to_errno(), 0);
  Status bad = make_error(Errc::kCorrupt, "bad crc on member {}", 3);
  EXPECT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.code(), Errc::kCorrupt);
  EXPECT_EQ(bad.to_string(), "corrupt: bad crc on member 3");
  EXPECT_EQ(make_error(Errc::kIoError, "x").to_errno(), -EIO);
  EXPECT_EQ(make_error(Errc::kInvalidArgument, "x").to_errno(), -EINVAL);
}

TEST(Status, ResultCarriesValueOrError) {
  Result<int> good = 42;
  ASSERT_TRUE(good.is_ok());
  EXPECT_EQ(*good, 42);
  Result<int> bad = make_error(Errc::kNotFound, "no such drive");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), Errc::kNotFound);
}

Status fails_then_stops(int* reached) {
  GRAID_RETURN_IF_ERROR(make_error(Errc::kBusy, "in use"));
  *reached = 1;
  return Status::ok();
}

TEST(Status, ReturnIfErrorPropagates) {
  int reached = 0;
  Status s = fails_then_stops(&reached);
  EXPECT_EQ(s.code(), Errc::kBusy);
  EXPECT_EQ(reached, 0);
}

TEST(AlignedBuffer, AlignedZeroedAndSized) {
  for (std::size_t align : {std::size_t{64}, std::size_t{4096}}) {
    auto buf = AlignedBuffer::allocate(12345, align);
    ASSERT_TRUE(buf.is_ok());
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buf->data()) % align, 0u);
    EXPECT_EQ(buf->size(), 12345u);
    for (std::byte b : buf->span())
      ASSERT_EQ(b, std::byte{0});
  }
}

TEST(AlignedBuffer, RefusesBadAlignment) {
  EXPECT_EQ(AlignedBuffer::allocate(4096, 32).status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(AlignedBuffer::allocate(4096, 96).status().code(), Errc::kInvalidArgument);
}

TEST(AlignedBuffer, MoveTransfersOwnership) {
  auto buf = AlignedBuffer::allocate(4096);
  ASSERT_TRUE(buf.is_ok());
  std::byte* p = buf->data();
  AlignedBuffer moved = std::move(*buf);
  EXPECT_EQ(moved.data(), p);
  EXPECT_EQ(moved.size(), 4096u);
  // The source is empty, not a dangling buffer that still claims its old size.
  EXPECT_EQ(buf->data(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(buf->size(), 0u);
  AlignedBuffer assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.data(), p);
  EXPECT_EQ(moved.size(), 0u);  // NOLINT(bugprone-use-after-move)
}

TEST(ChunkView, ViewsKeepAlignment) {
  auto buf = AlignedBuffer::allocate(8192);
  ASSERT_TRUE(buf.is_ok());
  ChunkView whole = buf->view();
  EXPECT_EQ(whole.size(), 8192u);
  auto sub = buf->view_checked(4096, 1000);
  ASSERT_TRUE(sub.is_ok());
  EXPECT_EQ(sub->data(), buf->data() + 4096);
  EXPECT_EQ(buf->view_checked(100, 64).status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(buf->view_checked(4096, 4097).status().code(), Errc::kOutOfRange);
  EXPECT_EQ(buf->view_checked(8193, 0).status().code(), Errc::kOutOfRange);
}

TEST(ChunkView, AdoptChecksCallerPointers) {
  auto buf = AlignedBuffer::allocate(4096);
  ASSERT_TRUE(buf.is_ok());
  EXPECT_TRUE(ChunkView::adopt(buf->data(), 4096).is_ok());
  EXPECT_TRUE(ChunkView::adopt(buf->data() + 64, 128).is_ok());
  auto misaligned = ChunkView::adopt(buf->data() + 8, 128);
  ASSERT_FALSE(misaligned.is_ok());
  EXPECT_NE(misaligned.status().message().find("aligned"), std::string::npos);
  EXPECT_FALSE(ChunkView::adopt(nullptr, 16).is_ok());
}

}  // namespace
}  // namespace graid
