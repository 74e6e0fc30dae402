// Human sizes on the command line and in tables: "64K", "1G", "4096".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "graid/status.h"

namespace graid::bench {

// Parses a byte count: decimal digits with an optional binary suffix K, M, G or T (also KiB/KB,
// any case; 1K = 1024). Rejects empty text, signs, fractions, zero and values that overflow 64
// bits, with a message naming `what` (e.g. "--strip").
Result<std::uint64_t> parse_size(std::string_view text, std::string_view what);

// The shortest exact binary form: 65536 -> "64K", 1073741824 -> "1G", 1000 -> "1000".
std::string format_size(std::uint64_t bytes);

// Approximate, for messages: 25271037952 -> "23.5G" (binary units, one decimal).
std::string format_bytes(std::uint64_t bytes);

}  // namespace graid::bench
