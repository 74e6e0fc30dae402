// A temporary directory for a test, removed with everything in it when the object goes.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace graid::testing {

class TempDir {
 public:
  // Under `base`, or by default /dev/shm when it exists (tmpfs: member files cost no disk I/O)
  // and /tmp otherwise. path() is empty (and the test has failed) if it cannot be made.
  explicit TempDir(const char* base = nullptr) {
    if (base == nullptr) base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string templ = std::string(base) + "/graid-test-XXXXXX";
    const char* made = ::mkdtemp(templ.data());
    EXPECT_NE(made, nullptr) << "mkdtemp in " << base << ": " << std::strerror(errno);
    if (made != nullptr) path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace graid::testing
