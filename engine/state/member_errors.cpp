#include "state/member_errors.h"

#include <cerrno>

namespace graid {

MemberErrorClass classify_member_error(MemberOp op, std::int32_t result) noexcept {
  const int err = -result;
  if (err == EOPNOTSUPP || err == ENOTTY) return MemberErrorClass::kUnsupported;
  if ((op == MemberOp::kDiscard || op == MemberOp::kWriteZeroes) && err == EINVAL) {
    return MemberErrorClass::kUnsupported;
  }
  // EFAULT: the kernel could not reach the request's buffer (a zero-copy window a member cannot
  // use as a fixed buffer): the buffer's fault, never the drive's.
  if ((op == MemberOp::kRead || op == MemberOp::kWrite) &&
      (err == EINVAL || err == ERANGE || err == EFAULT)) {
    return MemberErrorClass::kRequest;
  }
  // A range the member says it does not have (NVMe LBA Out of Range on a Write Zeroes or
  // deallocate) is the request's fault as it is for a read or write.
  if ((op == MemberOp::kDiscard || op == MemberOp::kWriteZeroes) && err == ERANGE) {
    return MemberErrorClass::kRequest;
  }
  if (op == MemberOp::kRead && (err == EIO || err == EILSEQ || err == ENODATA || err == EBADMSG)) {
    return MemberErrorClass::kMedia;
  }
  return MemberErrorClass::kDevice;
}

ReadErrorCounts::ReadErrorCounts(std::uint32_t members, std::uint32_t limit)
    : entries_(std::make_unique<Entry[]>(members)), members_(members), limit_(limit) {}

void ReadErrorCounts::decay(Entry& e, std::chrono::steady_clock::time_point now) {
  if (e.count == 0) return;
  const auto hours = std::chrono::duration_cast<std::chrono::hours>(now - e.last).count();
  if (hours <= 0) return;
  e.count = hours >= 32 ? 0 : e.count >> hours;
  e.last += std::chrono::hours(hours);
}

bool ReadErrorCounts::record(std::uint32_t member) {
  if (member >= members_) return false;
  const auto now = std::chrono::steady_clock::now();
  MutexLock guard(mu_);
  Entry& e = entries_[member];
  decay(e, now);
  if (e.count == 0) e.last = now;
  ++e.count;
  ++e.total;
  return e.count > limit_;
}

std::uint64_t ReadErrorCounts::total(std::uint32_t member) const {
  if (member >= members_) return 0;
  MutexLock guard(mu_);
  return entries_[member].total;
}

}  // namespace graid
