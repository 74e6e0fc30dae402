#include "copy_runs.h"

#include <algorithm>

namespace graid::kernels {
namespace {

void sort_by_host(std::span<CopyRun> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const CopyRun& a, const CopyRun& b) { return a.host < b.host; });
}

}  // namespace

std::size_t place_runs(std::span<CopyRun> runs, std::size_t cursor, std::size_t align) {
  sort_by_host(runs);
  const CopyRun* prev = nullptr;
  for (CopyRun& r : runs) {
    if (prev == nullptr || prev->host + prev->len != r.host) {
      cursor = (cursor + align - 1) & ~(align - 1);
    }
    r.device_offset = cursor;
    cursor += r.len;
    prev = &r;
  }
  return cursor;
}

void coalesce_runs(std::vector<CopyRun>& runs) {
  sort_by_host(runs);
  std::size_t out = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (out > 0) {
      CopyRun& last = runs[out - 1];
      if (last.host + last.len == runs[i].host &&
          last.device_offset + last.len == runs[i].device_offset) {
        last.len += runs[i].len;
        continue;
      }
    }
    runs[out++] = runs[i];
  }
  runs.resize(out);
}

}  // namespace graid::kernels
