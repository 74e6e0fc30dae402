// The suite's results: one row per measured run, the JSON document they make (schema
// "graid-bench-report/1", documented in docs/benchmarks.md, read by bench/report/graid_report.py)
// and the terminal table.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "report.h"

namespace graid::bench {

inline constexpr const char* kReportSchema = "graid-bench-report/1";

enum class ArrayState : std::uint8_t { kOptimal, kDegraded, kRebuilding };
const char* array_state_name(ArrayState state) noexcept;

struct SuiteRow {
  std::string backend;  // "cpu", "cuda", "ref" (as the backend names itself)
  std::string device;   // the GPU the parity ran on (model, PCI address, ...); empty for the cpu
  std::string level;    // "raid5"
  std::uint32_t members = 0;
  std::uint32_t strip_bytes = 0;
  ArrayState state = ArrayState::kOptimal;
  Profile profile{};
  std::uint32_t threads = 0;
  std::uint32_t queue_depth = 0;
  RunFigures array;                  // the array's figures
  std::optional<double> limit_iops;  // the members' limit for this profile (optimal rows)
  std::optional<double> limit_share;
  std::string limit_reason;            // why a share above 1.05 is possible; empty below
  double raw_member_iops = 0;          // the best raw run's member IOPS (the limit's numerator)
  std::uint32_t raw_queue_depth = 0;   // the depth the rounds' raw runs used
  double member_ios_per_request = 0;   // the limit's denominator (cost_model.h)
  std::optional<double> load_percent;  // rate-limited rows: the target as % of the maximum
  std::optional<double> target_iops;
  std::uint64_t rebuild_bytes_per_second = 0;  // rebuilding rows: the rebuild's pace per member
  bool rebuild_ran_throughout = true;          // rebuilding rows: not finished before the end

  // Host CPU per request in microseconds (process user + system over the window); numerically
  // also the cores it takes per million IOPS.
  double cpu_us_per_io() const noexcept {
    return array.ops > 0 ? array.cpu_seconds / static_cast<double>(array.ops) * 1e6 : 0;
  }
};

// Where and how the suite ran, for the document's head.
struct SuiteHost {
  std::string generated;  // UTC, ISO 8601
  std::string command;
  std::string cpu;
  unsigned cores = 0;
  std::string kernel;
  std::string members;  // "files on /dev/shm (tmpfs), 256 MiB each"
  bool quick = false;
  double seconds = 0;
};

// The suite's limit for a profile: the most member IOPS any raw run gave (every round and every
// probe of the sweep: the best the members showed, so noise lowers shares, never raises them)
// over the member I/Os a request costs. None without an array run or a raw run.
std::optional<double> suite_limit_iops(const ProfileReport& report);

// The suite's limit for a profile: the most member IOPS any raw run gave (every round and every
// probe of the sweep: the best the members showed, so noise lowers shares, never raises them)
// over the member I/Os a request costs. None without an array run or a raw run.
std::optional<double> suite_limit_iops(const ProfileReport& report);

// The reason a share above 1.05 can be, from what was measured: the pattern (merging across
// requests the limit does not model), a sweep that ended at the deepest queue allowed, or, for
// random I/O, that every raw run gave less than the array. Empty at or below 1.05.
std::string share_reason(const ProfileReport& report);

SuiteRow row_from(const ProfileReport& report, const RunSetup& setup, ArrayState state);

// The document: {"schema", "source", "generated", "command", "host", "plan", "rows"}.
std::string to_report_json(const SuiteHost& host, std::span<const SuiteRow> rows);

// Prints one line per row, grouped as they come; `header` first when true.
void print_suite_rows(std::FILE* out, std::span<const SuiteRow> rows, bool header);

}  // namespace graid::bench
