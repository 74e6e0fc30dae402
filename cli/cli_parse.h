// Argument parsing helpers for graidctl: sizes ("64K", "1.5G") and id lists ("0-3,5"). Pure
// functions; every refusal is a Status of Errc::kInvalidArgument whose message quotes the input
// and says what is wrong, ready to print after "graidctl: ".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "graid/status.h"

namespace graid::cli {

// The largest pd/dg/vd id graidctl accepts, and the most ids one list may name.
inline constexpr std::uint32_t kMaxId = 1023;
inline constexpr std::size_t kMaxIdListEntries = 256;

// Parses a byte count: decimal digits, an optional fraction, and an optional binary unit K, M, G
// or T, each optionally followed by "iB" or "B" (any case; 1K = 1KiB = 1KB = 1024), or a bare
// "B". Examples: "4096", "64K", "64KiB", "1m", "2G", "1T", "1.5G", "512B".
// Fractions are accepted only when the result is a whole number of bytes ("1.5K" = 1536, "0.5"
// and "0.3K" are refused), with at most 18 digits after the point. Zero is accepted (callers that
// need a positive size check it). Refused: empty text, a sign, spaces, a missing number ("K",
// ".5K"), an unknown unit, and values of 2^64 bytes or more.
Result<std::uint64_t> parse_size(std::string_view text);

// Parses a list of ids: comma-separated items, each an id ("5") or an inclusive range ("0-3").
// Returns the ids sorted ascending. Refused: empty text or an empty item ("1,,2", "1,"), anything
// but digits around the '-', a reversed range ("3-0"), an id over kMaxId, an id named twice
// (directly or by overlapping ranges; the message names it), and lists naming more than
// kMaxIdListEntries ids.
Result<std::vector<std::uint32_t>> parse_id_list(std::string_view text);

// A size for tables, in binary units with at most one decimal, rounded to nearest:
// 512 -> "512 B", 65536 -> "64 KiB", 1610612736 -> "1.5 GiB", 1100 -> "1.1 KiB". Units go up to
// EiB. Exact only when the value is a whole number of tenths of its unit.
std::string format_size(std::uint64_t bytes);

}  // namespace graid::cli
