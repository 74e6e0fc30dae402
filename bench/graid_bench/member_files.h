// The drives a benchmark runs on: files it creates in a directory (and removes afterwards), or
// existing files and block devices named on the command line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graid/status.h"

namespace graid::bench {

class MemberSet {
 public:
  // Creates `count` files DIR/member-N.img of `size` bytes each, with every byte allocated (so
  // neither the raw baseline nor the array reads holes or pays first-touch costs in the measured
  // window) and all zero (which is consistent parity for every level, so the array can be created
  // assume-clean). Checks first that DIR exists, is writable, accepts O_DIRECT and has room.
  // The files are removed when the set is destroyed, unless `keep`.
  static Result<MemberSet> create_in_dir(const std::string& dir, std::uint32_t count,
                                         std::uint64_t size, bool keep);

  // Uses existing regular files or block devices as they are (their contents will be
  // overwritten). `size` > 0 limits the bytes used on each; 0 uses the smallest member's size.
  static Result<MemberSet> use_existing(const std::vector<std::string>& paths, std::uint64_t size);

  MemberSet(MemberSet&& other) noexcept;
  MemberSet& operator=(MemberSet&& other) noexcept;
  MemberSet(const MemberSet&) = delete;
  MemberSet& operator=(const MemberSet&) = delete;
  ~MemberSet();

  const std::vector<std::string>& paths() const noexcept { return paths_; }
  // Bytes used on every member.
  std::uint64_t member_bytes() const noexcept { return member_bytes_; }

 private:
  MemberSet() = default;
  void remove_created() noexcept;

  std::vector<std::string> paths_;
  std::vector<std::string> created_;  // files this set made and must remove
  std::uint64_t member_bytes_ = 0;
  bool keep_ = false;
};

}  // namespace graid::bench
