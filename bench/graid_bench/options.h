// graid-bench's command line: parsing (CLI11) and validation of every argument, with messages
// that name the argument and say what would work.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "graid/array.h"
#include "graid/geometry.h"
#include "profiles.h"

namespace graid::bench {

enum class OutputFormat : std::uint8_t { kTable, kJson };

// The most requests (or raw member I/Os) one thread keeps in flight.
inline constexpr std::uint32_t kMaxQueueDepth = 1024;

struct BenchOptions {
  RaidLevel level = RaidLevel::kRaid5;
  std::uint32_t members = 0;
  std::uint32_t strip_bytes = 64 * 1024;
  std::string dir;                        // create member files here ...
  std::vector<std::string> member_paths;  // ... or use these existing files/devices
  std::uint64_t member_size = 0;          // bytes per member; 0 = whole device (--member only)
  std::string backend = "cpu";
  JournalPolicy journal = JournalPolicy::kDegradedOnly;  // --journal
  std::vector<Profile> profiles;
  std::uint32_t queue_depth = 32;
  std::uint32_t raw_queue_depth = 0;  // member I/Os in flight per raw thread; 0 = queue_depth
  std::uint32_t threads = 1;
  double seconds = 10;
  double warmup_seconds = 1;
  std::uint32_t rounds = 3;  // raw/array rounds per profile; --seconds is split among them
  std::uint64_t span = 0;    // 0 = the whole array
  OutputFormat format = OutputFormat::kTable;
  bool keep = false;
  bool raw_only = false;
  bool batcher = false;  // parity through the kernels/ Batcher (async, batched across threads)
  unsigned parity_workers = 0;  // parity on a ParityWorker of this many threads (0: inline)
  bool verify = false;
  std::uint64_t verify_bytes = 64ull << 20;
  bool force = false;
  std::uint64_t seed = 1;
  double target_iops = 0;  // --rate: open loop at this many requests per second; 0 = closed
};

// Smallest member a run accepts: room for metadata and enough stripes to spread I/O over.
inline constexpr std::uint64_t kMinMemberBytes = 16ull << 20;

// Parses and validates argv. Returns the options, or the exit status to leave with after the
// parser has printed help (0) or an error (non-zero) on stderr.
std::variant<BenchOptions, int> parse_command_line(int argc, char** argv);

}  // namespace graid::bench
