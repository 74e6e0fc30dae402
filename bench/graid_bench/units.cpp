#include "units.h"

#include <fmt/format.h>

#include <cctype>
#include <iterator>
#include <limits>

namespace graid::bench {

namespace {

// Binary shift for a suffix, or -1 when the suffix is not one we know.
int suffix_shift(std::string_view suffix) {
  std::string lower;
  for (char c : suffix)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower.empty() || lower == "b") return 0;
  const char unit = lower.front();
  const std::string_view rest = std::string_view(lower).substr(1);
  if (!(rest.empty() || rest == "b" || rest == "ib")) return -1;
  switch (unit) {
    case 'k':
      return 10;
    case 'm':
      return 20;
    case 'g':
      return 30;
    case 't':
      return 40;
    default:
      return -1;
  }
}

}  // namespace

Result<std::uint64_t> parse_size(std::string_view text, std::string_view what) {
  std::size_t pos = 0;
  std::uint64_t value = 0;
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    const auto digit = static_cast<std::uint64_t>(text[pos] - '0');
    if (value > (kMax - digit) / 10) {
      return make_error(Errc::kInvalidArgument, "{}: '{}' is too large", what, text);
    }
    value = value * 10 + digit;
    ++pos;
  }
  if (pos == 0) {
    return make_error(Errc::kInvalidArgument,
                      "{}: '{}' is not a size (expected digits with an optional K/M/G/T suffix, "
                      "e.g. 64K or 1G)",
                      what, text);
  }
  const int shift = suffix_shift(text.substr(pos));
  if (shift < 0) {
    return make_error(Errc::kInvalidArgument,
                      "{}: unknown size suffix in '{}' (use K, M, G or T; 1K = 1024)", what, text);
  }
  if (shift > 0 && value > (kMax >> shift)) {
    return make_error(Errc::kInvalidArgument, "{}: '{}' is too large", what, text);
  }
  value <<= shift;
  if (value == 0) return make_error(Errc::kInvalidArgument, "{}: must be greater than 0", what);
  return value;
}

std::string format_size(std::uint64_t bytes) {
  static constexpr struct {
    int shift;
    char suffix;
  } kUnits[] = {{40, 'T'}, {30, 'G'}, {20, 'M'}, {10, 'K'}};
  for (const auto& unit : kUnits) {
    const std::uint64_t scale = std::uint64_t{1} << unit.shift;
    if (bytes >= scale && bytes % scale == 0) {
      return std::to_string(bytes / scale) + unit.suffix;
    }
  }
  return std::to_string(bytes);
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kSuffixes[] = {"", "K", "M", "G", "T", "P"};
  auto value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kSuffixes)) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return std::to_string(bytes);
  return fmt::format("{:.1f}{}", value, kSuffixes[unit]);
}

}  // namespace graid::bench
