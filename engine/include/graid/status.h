// Errors as values for the graid engine.
//
// Every fallible engine function returns a Status (no value) or a Result<T> (a value or a
// Status). Both are [[nodiscard]]: an ignored error is a compile warning. The engine never throws
// on the data path; negative errno values appear only at the kernel boundary (ublk, io_uring),
// through Status::to_errno().
#pragma once

#include <fmt/format.h>

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace graid {

// What kind of failure. Stable: the daemon maps these onto control-socket error codes.
enum class Errc : int {
  kOk = 0,
  kInvalidArgument,  // a caller passed something that can never work (bad level, bad length)
  kOutOfRange,       // an offset or size beyond what the object holds
  kCorrupt,          // bytes read from a device are not what we wrote (bad magic, bad crc)
  kUnsupported,      // a valid request this build or version cannot serve
  kIoError,          // a member device failed an I/O
  kNoSpace,          // a size that does not fit
  kBusy,             // the object is in use
  kNotFound,         // the named object does not exist
  kInternal,         // a broken invariant inside graid: always a bug
};

// Short lower-case name of an error class ("invalid argument", "corrupt", ...).
std::string_view errc_name(Errc code) noexcept;

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;  // success
  Status(Errc code, std::string message) : code_(code), message_(std::move(message)) {
    assert(code != Errc::kOk);
  }

  static Status ok() noexcept { return Status(); }

  bool is_ok() const noexcept { return code_ == Errc::kOk; }
  explicit operator bool() const noexcept { return is_ok(); }
  Errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }

  // "<class>: <message>", or "ok".
  std::string to_string() const;

  // Negative errno for the kernel boundary (e.g. -EINVAL, -EIO); 0 for success.
  int to_errno() const noexcept;

 private:
  Errc code_ = Errc::kOk;
  std::string message_;
};

// A value or the Status saying why there is none. A small stand-in for C++23 std::expected,
// which the toolchain we target (GCC 12, C++20) does not ship.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.is_ok() && "a Result error needs a failing Status");
  }

  bool is_ok() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return is_ok(); }

  // REQUIRES: is_ok()
  T& value() & {
    assert(is_ok());
    return *value_;
  }
  const T& value() const& {
    assert(is_ok());
    return *value_;
  }
  T&& value() && {
    assert(is_ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

  // The error; Status::ok() when a value is held.
  const Status& status() const noexcept { return status_; }

 private:
  std::optional<T> value_;
  Status status_;
};

// Builds a Status with a formatted message: make_error(Errc::kCorrupt, "bad crc on {}", path).
template <typename... Args>
Status make_error(Errc code, fmt::format_string<Args...> format, Args&&... args) {
  return Status(code, fmt::format(format, std::forward<Args>(args)...));
}

// Propagates a failing Status from an expression: GRAID_RETURN_IF_ERROR(member.write(...));
#define GRAID_RETURN_IF_ERROR(expr)                   \
  do {                                                \
    ::graid::Status graid_status_ = (expr);           \
    if (!graid_status_.is_ok()) return graid_status_; \
  } while (0)

}  // namespace graid
