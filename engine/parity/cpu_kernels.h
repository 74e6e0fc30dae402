// The ISA-L kernels the cpu backend chooses among for P+Q (parity/kernel_selector.h): ISA-L's
// own dispatch first, then each SIMD level this CPU (and its OS) supports, and the portable one.
// Every entry computes the same bytes as pq_gen.
#pragma once

#include <span>
#include <string_view>

namespace graid::parity_detail {

struct PqKernel {
  std::string_view name;
  int (*gen)(int vects, int len, void** array);
};

std::span<const PqKernel> pq_kernels();

// The P+Q kernel the calling thread's selector uses now (tests, diagnostics).
std::string_view current_pq_kernel();

}  // namespace graid::parity_detail
