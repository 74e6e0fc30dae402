// Helpers for tests that drive member I/O through an IoContext: a request that counts its
// completions, file members and page-aligned buffers that fail the test when they cannot be made.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "graid/buffer.h"
#include "graid/member.h"

namespace graid::testing {

constexpr std::size_t kTestPage = 4096;

// Counts its completions; remembers the last result; bumps *total when set.
class CountingRequest final : public MemberRequest {
 public:
  void on_done(std::int32_t r) override {
    ++calls;
    result = r;
    if (total != nullptr) ++*total;
  }
  int calls = 0;
  std::int32_t result = 0;
  int* total = nullptr;
};

// Makes `req` a one-page `op` on page `page` of the member, through page `page` of `base`.
inline void set_page_io(MemberRequest& req, MemberOp op, std::size_t page, std::byte* base) {
  req.op = op;
  req.offset = page * kTestPage;
  req.len = kTestPage;
  req.buf = base + page * kTestPage;
}

// A file member of `size` bytes at `path` (created or grown); null (and a failed test) on error.
inline std::unique_ptr<MemberDevice> make_member(const std::string& path, std::uint64_t size,
                                                 bool direct = true) {
  OpenOptions options;
  options.create = true;
  options.create_size = size;
  options.direct = direct;
  auto member = open_member(path, options);
  EXPECT_TRUE(member.is_ok()) << member.status().to_string();
  return member.is_ok() ? std::move(member).value() : nullptr;
}

// Zeroed, page-aligned memory (what O_DIRECT wants).
inline AlignedBuffer make_buffer(std::size_t size) {
  auto buffer = AlignedBuffer::allocate(size, kTestPage);
  EXPECT_TRUE(buffer.is_ok());
  return std::move(buffer).value();
}

}  // namespace graid::testing
