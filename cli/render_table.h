// graidctl's table output (--format table, the default): each command's result as aligned
// columns (list), key: value blocks with sub-tables (describe), or one line (delete, version).
// Pure: JSON in, text out. The daemon is written against docs/cli.md by other hands, so a field
// that is missing or of an unexpected type prints as "-" instead of failing, and a result of an
// unexpected shape is printed as indented JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "stats_view.h"

namespace graid::cli {

// Columns of text, each as wide as its widest cell, separated by two spaces; a header row on
// top. Right-aligned columns suit numbers.
class TextTable {
 public:
  struct Column {
    std::string header;
    bool right = false;
  };
  explicit TextTable(std::vector<Column> columns);

  // Adds a row; missing cells are empty, extra cells are dropped.
  void add_row(std::vector<std::string> cells);
  // The table, one line per row, each ending with "\n", no trailing spaces.
  std::string render() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// A duration as a person reads it: "39 s", "4 min 12 s", "2 h 03 min".
std::string duration_text(double seconds);

// One event as one line, for `events --follow`: "SEQ TIME SEVERITY KIND dg N pd N: MESSAGE".
std::string event_line(const nlohmann::json& event);

// A field of a JSON object as table text: strings as they are ("-" when empty), numbers, bools
// as yes/no, null or absent as "-".
std::string field_text(const nlohmann::json& object, std::string_view key);

// An array field of a JSON object; an empty array when absent or not an array.
const nlohmann::json& array_field(const nlohmann::json& object, std::string_view key);

// A byte-count field through format_size ("64 KiB"); "-" when absent or not a count.
std::string size_text(const nlohmann::json& object, std::string_view key);

// The table text for the successful result of `verb object` (the wire names), ending with a
// newline.
std::string render_result(std::string_view verb, std::string_view object,
                          const nlohmann::json& result);

// One line of `describe dg --watch`: the DG's state and, while a job runs (rebuild,
// initialisation, check), a 30-column bar, percent, rate and ETA, e.g.
// "dg 0 rebuilding [#########.....................]  31%  98.2 MB/s  ETA 1m05s", with a newline.
std::string dg_progress_line(const nlohmann::json& dg);
// Whether a DG JSON shows a job in progress (rebuilding, initialising, checking).
bool dg_job_running(const nlohmann::json& dg);

// One stats interval as a table: a line with the interval, then a row per DG and per VD with
// IOPS, MB/s (10^6 bytes) read and write, and p50/p99 latency in microseconds.
std::string render_stats(const StatsInterval& interval);

}  // namespace graid::cli
