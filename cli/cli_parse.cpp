#include "cli_parse.h"

#include <fmt/format.h>

#include <bitset>
#include <charconv>
#include <limits>
#include <system_error>

namespace graid::cli {

namespace {

// 128-bit arithmetic keeps the size checks exact without overflow tricks.
__extension__ using u128 = unsigned __int128;

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();
constexpr std::size_t kMaxFractionDigits = 18;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// The binary shift for a unit ("", "b", "k", "kb", "kib", ... in any case), or -1.
int unit_shift(std::string_view unit) {
  if (unit.empty()) return 0;
  if (unit.size() == 1 && lower(unit[0]) == 'b') return 0;
  int shift = 0;
  switch (lower(unit[0])) {
    case 'k':
      shift = 10;
      break;
    case 'm':
      shift = 20;
      break;
    case 'g':
      shift = 30;
      break;
    case 't':
      shift = 40;
      break;
    default:
      return -1;
  }
  const std::string_view rest = unit.substr(1);
  if (rest.empty()) return shift;
  if (rest.size() == 1 && lower(rest[0]) == 'b') return shift;
  if (rest.size() == 2 && lower(rest[0]) == 'i' && lower(rest[1]) == 'b') return shift;
  return -1;
}

Status not_a_size(std::string_view text) {
  return make_error(Errc::kInvalidArgument,
                    "size \"{}\" is not a number with an optional unit (e.g. 4096, 64K, 1.5G, "
                    "2GiB)",
                    text);
}

Status too_large(std::string_view text) {
  return make_error(Errc::kInvalidArgument, "size \"{}\" is 2^64 bytes or more", text);
}

}  // namespace

Result<std::uint64_t> parse_size(std::string_view text) {
  if (text.empty()) return Status(Errc::kInvalidArgument, "empty size");
  if (text.front() == '-') {
    return make_error(Errc::kInvalidArgument, "size \"{}\" is negative", text);
  }
  std::size_t pos = 0;
  u128 whole = 0;
  while (pos < text.size() && is_digit(text[pos])) {
    whole = whole * 10 + static_cast<unsigned>(text[pos] - '0');
    if (whole > kU64Max) return too_large(text);
    ++pos;
  }
  if (pos == 0) return not_a_size(text);
  u128 fraction = 0;
  u128 fraction_scale = 1;  // 10^(digits after the point)
  if (pos < text.size() && text[pos] == '.') {
    const std::size_t start = ++pos;
    while (pos < text.size() && is_digit(text[pos])) {
      if (pos - start == kMaxFractionDigits) {
        return make_error(Errc::kInvalidArgument,
                          "size \"{}\" has more than {} digits after the point", text,
                          kMaxFractionDigits);
      }
      fraction = fraction * 10 + static_cast<unsigned>(text[pos] - '0');
      fraction_scale *= 10;
      ++pos;
    }
    if (pos == start) return not_a_size(text);
  }
  const std::string_view unit = text.substr(pos);
  const int shift = unit_shift(unit);
  if (shift < 0) {
    if (!unit.empty() && (is_digit(unit[0]) || unit[0] == '.' || unit[0] == ' ')) {
      return not_a_size(text);
    }
    return make_error(Errc::kInvalidArgument,
                      "unknown unit \"{}\" in size \"{}\" (use K, M, G or T, optionally followed "
                      "by iB or B; 1K = 1024)",
                      unit, text);
  }
  // fraction < 10^18 < 2^60 and shift <= 40: the products fit in 128 bits.
  const u128 scaled_fraction = fraction << shift;
  if (scaled_fraction % fraction_scale != 0) {
    return make_error(Errc::kInvalidArgument, "size \"{}\" is not a whole number of bytes", text);
  }
  const u128 bytes = (whole << shift) + scaled_fraction / fraction_scale;
  if (bytes > kU64Max) return too_large(text);
  return static_cast<std::uint64_t>(bytes);
}

Result<std::vector<std::uint32_t>> parse_id_list(std::string_view text) {
  if (text.empty()) return Status(Errc::kInvalidArgument, "empty id list");
  std::bitset<kMaxId + 1> seen;
  std::size_t count = 0;
  std::string_view rest = text;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    if (item.empty()) {
      return make_error(Errc::kInvalidArgument, "empty item in id list \"{}\"", text);
    }
    const auto not_an_id = [&] {
      return make_error(Errc::kInvalidArgument,
                        "\"{}\" in id list \"{}\" is not an id or a range of ids (e.g. 5 or 0-3)",
                        item, text);
    };
    // Reads one id: digits only, at most kMaxId.
    const auto read_id = [&](std::string_view digits) -> Result<std::uint32_t> {
      if (digits.empty()) return not_an_id();
      for (const char c : digits) {
        if (!is_digit(c)) return not_an_id();
      }
      std::uint64_t value = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      (void)end;
      if (ec != std::errc() || value > kMaxId) {
        return make_error(Errc::kInvalidArgument, "id {} is over the maximum {}", digits, kMaxId);
      }
      return static_cast<std::uint32_t>(value);
    };
    const std::size_t dash = item.find('-');
    auto first = read_id(item.substr(0, dash));
    if (!first) return first.status();
    std::uint32_t last = *first;
    if (dash != std::string_view::npos) {
      auto end = read_id(item.substr(dash + 1));
      if (!end) return end.status();
      last = *end;
      if (last < *first) {
        return make_error(Errc::kInvalidArgument, "range \"{}\" is reversed (write {}-{})", item,
                          last, *first);
      }
    }
    count += last - *first + 1;
    if (count > kMaxIdListEntries) {
      return make_error(Errc::kInvalidArgument, "id list \"{}\" names more than {} ids", text,
                        kMaxIdListEntries);
    }
    for (std::uint32_t id = *first; id <= last; ++id) {
      if (seen.test(id)) {
        return make_error(Errc::kInvalidArgument, "id {} appears twice in id list \"{}\"", id,
                          text);
      }
      seen.set(id);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  std::vector<std::uint32_t> ids;
  ids.reserve(count);
  for (std::uint32_t id = 0; id <= kMaxId; ++id) {
    if (seen.test(id)) ids.push_back(id);
  }
  return ids;
}

std::string format_size(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  constexpr int kLastUnit = 6;
  int unit = 0;
  while (unit < kLastUnit && (bytes >> (10 * (unit + 1))) != 0)
    ++unit;
  const auto tenths_in = [bytes](int u) {
    const int shift = 10 * u;
    const u128 scaled = u128{bytes} * 10;
    return shift == 0 ? scaled : (scaled + (u128{1} << (shift - 1))) >> shift;
  };
  u128 tenths = tenths_in(unit);
  if (tenths >= 10240 && unit < kLastUnit) tenths = tenths_in(++unit);  // 1023.96 KiB -> 1 MiB
  const auto whole = static_cast<std::uint64_t>(tenths / 10);
  const auto tenth = static_cast<unsigned>(tenths % 10);
  if (tenth == 0) return fmt::format("{} {}", whole, kUnits[unit]);
  return fmt::format("{}.{} {}", whole, tenth, kUnits[unit]);
}

}  // namespace graid::cli
