#include "graid/status.h"

#include <cerrno>

namespace graid {

std::string_view errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::kOk:
      return "ok";
    case Errc::kInvalidArgument:
      return "invalid argument";
    case Errc::kOutOfRange:
      return "out of range";
    case Errc::kCorrupt:
      return "corrupt";
    case Errc::kUnsupported:
      return "unsupported";
    case Errc::kIoError:
      return "I/O error";
    case Errc::kNoSpace:
      return "no space";
    case Errc::kBusy:
      return "busy";
    case Errc::kNotFound:
      return "not found";
    case Errc::kInternal:
      return "internal error";
  }
  return "unknown error";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return fmt::format("{}: {}", errc_name(code_), message_);
}

int Status::to_errno() const noexcept {
  switch (code_) {
    case Errc::kOk:
      return 0;
    case Errc::kInvalidArgument:
      return -EINVAL;
    case Errc::kOutOfRange:
      return -ERANGE;
    case Errc::kCorrupt:
      return -EUCLEAN;
    case Errc::kUnsupported:
      return -EOPNOTSUPP;
    case Errc::kIoError:
      return -EIO;
    case Errc::kNoSpace:
      return -ENOSPC;
    case Errc::kBusy:
      return -EBUSY;
    case Errc::kNotFound:
      return -ENOENT;
    case Errc::kInternal:
      return -EFAULT;
  }
  return -EIO;
}

}  // namespace graid
