// What a member's -errno means for the array (error classes), and the per-member count of
// corrected read errors. Internal to engine/array and engine/stripe.
//
//   kUnsupported  the member cannot do this kind of operation (discard or write-zeroes it has
//                 no support for): never a member failure; the array falls back (writing
//                 zeroes) and stops advertising the operation.
//   kRequest      the request itself was wrong for the member (-EINVAL, -ERANGE: misaligned or
//                 out of range; -ERANGE also for discard and write-zeroes; -EFAULT: a buffer the
//                 kernel could not reach). The engine validates
//                 requests so this should not happen; if it does, the request fails and the
//                 member stays.
//   kMedia        a read that failed on this range (-EIO, -EILSEQ, -ENODATA, -EBADMSG): the
//                 strip is reconstructed from redundancy and rewritten in place (md's read-error
//                 correction), and counted; the member fails only past a threshold.
//   kDevice       anything else (a write error, a vanished device, an NVMe path or "not ready"
//                 status that the passthrough member retried for 30 s: -ENOLINK, -EREMOTEIO):
//                 the member fails.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "graid/member.h"
#include "graid/thread_annotations.h"

namespace graid {

enum class MemberErrorClass : std::uint8_t { kUnsupported, kRequest, kMedia, kDevice };

MemberErrorClass classify_member_error(MemberOp op, std::int32_t result) noexcept;

// Corrected read errors per member, decaying by half for every hour without one (md's
// max_read_errors, whose default of 20 this shares). Thread-safe.
class ReadErrorCounts {
 public:
  ReadErrorCounts(std::uint32_t members, std::uint32_t limit);

  // Counts one corrected read error on `member`; true when that puts it past the limit (the
  // member is then to be failed).
  bool record(std::uint32_t member) EXCLUDES(mu_);
  // Corrected read errors ever counted on `member` (no decay).
  std::uint64_t total(std::uint32_t member) const EXCLUDES(mu_);

 private:
  struct Entry {
    std::uint32_t count = 0;
    std::uint64_t total = 0;
    std::chrono::steady_clock::time_point last;
  };
  void decay(Entry& e, std::chrono::steady_clock::time_point now);

  mutable Mutex mu_;                                  // read errors are rare: one lock is fine
  std::unique_ptr<Entry[]> entries_ GUARDED_BY(mu_);  // and the entries it points to
  std::uint32_t members_;
  std::uint32_t limit_;
};

}  // namespace graid
