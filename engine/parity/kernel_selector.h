// Chooses, among kernels that compute the same thing, the one that runs fastest where it runs,
// by timing real calls.
//
// ISA-L picks its SIMD kernel once, by CPU features: the widest one the CPU has. That is not
// always the fastest in place. Measured in the VM harness (qemu TCG, tests/vm), pq_gen_avx2 ran
// at about 0.28 GB/s inside graidd's I/O thread and pq_gen_sse at 1.5 GB/s, although a quiet
// micro-benchmark in the same guest put the two within 30 % of each other, so a benchmark at
// start-up (what the kernel's raid6 code does) would not have seen it either; wide-vector
// frequency limits on some CPUs are a real-hardware case of the same kind. So the cpu backend
// times its candidates on the work it is given:
//
//   explore   each candidate serves kExploreCalls calls in turn, each call timed;
//   exploit   the candidate with the fewest nanoseconds per byte in that round serves the next
//             kExploitCalls calls, untimed; then the next round explores again.
//
// Every candidate must give the same bytes (tests check each against pq_gen), so the
// choice changes speed only. Not thread-safe: one selector per thread.
#pragma once

#include <cstdint>
#include <vector>

namespace graid {

class KernelSelector {
 public:
  static constexpr std::uint32_t kExploreCalls = 4;
  static constexpr std::uint32_t kExploitCalls = 4096;

  // `candidates` >= 1; candidate 0 is served first and is the choice until a round ends.
  explicit KernelSelector(std::uint32_t candidates) : rounds_(candidates) {}

  struct Pick {
    std::uint32_t index = 0;  // the candidate to call
    bool timed = false;       // time the call and report it with record()
  };
  Pick next() noexcept {
    if (exploit_left_ > 0) {
      --exploit_left_;
      return {best_, false};
    }
    return {exploring_, true};
  }

  // The cost of a call next() asked to time.
  void record(std::uint32_t index, std::uint64_t ns, std::uint64_t bytes) noexcept {
    if (index != exploring_ || exploit_left_ > 0) return;
    Round& r = rounds_[index];
    r.ns += ns;
    r.bytes += bytes;
    if (++r.calls < kExploreCalls) return;
    if (++exploring_ < rounds_.size()) return;
    // Round over: the cheapest per byte wins (compared as ns_a * bytes_b < ns_b * bytes_a).
    std::uint32_t best = 0;
    for (std::uint32_t i = 1; i < rounds_.size(); ++i) {
      const Round& a = rounds_[i];
      const Round& b = rounds_[best];
      if (static_cast<double>(a.ns) * static_cast<double>(b.bytes) <
          static_cast<double>(b.ns) * static_cast<double>(a.bytes)) {
        best = i;
      }
    }
    best_ = best;
    ++decisions_;
    for (Round& round : rounds_)
      round = Round{};
    exploring_ = 0;
    exploit_left_ = kExploitCalls;
  }

  std::uint32_t best() const noexcept { return best_; }
  std::uint64_t decisions() const noexcept { return decisions_; }

 private:
  struct Round {
    std::uint64_t ns = 0;
    std::uint64_t bytes = 0;
    std::uint32_t calls = 0;
  };
  std::vector<Round> rounds_;
  std::uint32_t exploring_ = 0;
  std::uint32_t best_ = 0;
  std::uint32_t exploit_left_ = 0;
  std::uint64_t decisions_ = 0;
};

}  // namespace graid
