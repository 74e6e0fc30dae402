// Test harness for arrays on file-backed members: a temp dir (tmpfs when available), member files
// wrapped in FaultyMember, a byte model of the array, and helpers to drive I/O synchronously.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graid/array.h"
#include "graid/member.h"
#include "graid/parity.h"
#include "io/faulty_member.h"

namespace graid::testing {

class TempDir {
 public:
  TempDir() {
    const char* base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string templ = std::string(base) + "/graid-test-XXXXXX";
    char* made = mkdtemp(templ.data());
    if (made != nullptr) path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A request that records its outcome.
struct TestIo final : ArrayIo {
  bool done = false;
  Status status;
  void on_complete(Status s) override {
    done = true;
    status = std::move(s);
  }
};

// Runs `ios` on `queue` and polls until every one has completed.
inline void run_all(ArrayQueue& queue, std::span<TestIo*> ios) {
  for (TestIo* io : ios) {
    io->done = false;
    queue.submit(*io);
  }
  auto all_done = [&] {
    for (TestIo* io : ios) {
      if (!io->done) return false;
    }
    return true;
  };
  while (!all_done())
    queue.context().poll(true);
}

inline Status run_one(ArrayQueue& queue, IoKind kind, std::uint64_t offset, std::uint32_t len,
                      std::byte* buf) {
  TestIo io;
  io.kind = kind;
  io.offset = offset;
  io.len = len;
  io.buf = buf;
  TestIo* p = &io;
  run_all(queue, std::span(&p, 1));
  return io.status;
}

// Members on files in a temp dir, each behind a FaultyMember the test can poke.
struct ArrayFiles {
  TempDir dir;
  std::vector<std::string> paths;
  std::vector<FaultyMember*> faulty;  // owned by the array

  Result<std::vector<std::unique_ptr<MemberDevice>>> open(std::uint32_t n, std::uint64_t bytes,
                                                          bool create) {
    std::vector<std::unique_ptr<MemberDevice>> out;
    faulty.clear();
    for (std::uint32_t i = 0; i < n; ++i) {
      if (create) paths.push_back(dir.path() + "/member-" + std::to_string(i) + ".img");
      OpenOptions o;
      o.create = create;
      o.create_size = bytes;
      auto dev = open_member(paths[i], o);
      if (!dev) return dev.status();
      auto f = std::make_unique<FaultyMember>(std::move(*dev));
      faulty.push_back(f.get());
      out.push_back(std::move(f));
    }
    return out;
  }
};

}  // namespace graid::testing
