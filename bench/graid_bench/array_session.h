// The array under test: graid members opened on the benchmark's member paths, a parity backend,
// and graid::Array::create over them. Lives for the whole benchmark; every profile runs on it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graid/array.h"
#include "graid/geometry.h"
#include "graid/status.h"

namespace graid {
class Array;
}

namespace graid::bench {

struct ArraySpec {
  std::vector<std::string> paths;
  RaidLevel level = RaidLevel::kRaid5;
  std::uint32_t strip_bytes = 64 * 1024;
  std::string backend = "cpu";  // parity backend name (make_parity_backend)
  bool force = false;           // overwrite members that carry a live graid superblock
  // Parity through the kernels/ Batcher (asynchronous, batched across threads; the backend is
  // its device, the cpu backend its fallback) instead of each thread calling the backend.
  bool batcher = false;
  unsigned parity_workers = 0;  // a ParityWorker of this many threads as the async parity
  // The write-hole journal policy of the array (its cost is what --journal measures).
  JournalPolicy journal = JournalPolicy::kDegradedOnly;
};

class ArraySession {
 public:
  // Opens the members and creates the array on them, assume-clean: member files graid-bench made
  // are all zero, hence consistent; on --member devices parity may not match old contents, which
  // costs nothing here as reads in an optimal array never consult it.
  static Result<std::unique_ptr<ArraySession>> create(const ArraySpec& spec);
  ~ArraySession();
  ArraySession(const ArraySession&) = delete;
  ArraySession& operator=(const ArraySession&) = delete;

  Array& array() noexcept;
  // Array data bytes.
  std::uint64_t capacity() const noexcept;
  // Member byte where the data area starts (the raw baseline stays behind it).
  std::uint64_t data_offset() const noexcept;
  // Name of the parity backend in use (as the backend reports it).
  std::string backend_name() const;
  // True once the parity device (the cuda backend, or the batcher's device) has failed and parity
  // went to the cpu: figures from then on are not the device's.
  bool parity_device_failed() const;
  // The GPU parity runs on (model, PCI address, SMs, memory, driver), or "" for the cpu.
  std::string parity_device() const;

  // Stops the array cleanly. Call once no queue is attached.
  Status stop();

  struct Impl;
  // Made by create(); only it can name Impl.
  explicit ArraySession(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace graid::bench
