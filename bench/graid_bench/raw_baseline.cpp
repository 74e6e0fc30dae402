#include "raw_baseline.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "graid/buffer.h"
#include "workload.h"

namespace graid::bench {

namespace {

constexpr std::size_t kBufferAlign = 4096;

// Owns the members' file descriptors for the length of one baseline run.
class MemberFds {
 public:
  MemberFds() = default;
  MemberFds(const MemberFds&) = delete;
  MemberFds& operator=(const MemberFds&) = delete;
  ~MemberFds() {
    for (int fd : fds_)
      ::close(fd);
  }

  Status open_all(const std::vector<std::string>& paths) {
    for (const std::string& path : paths) {
      const int fd = ::open(path.c_str(), O_RDWR | O_DIRECT);
      if (fd < 0) {
        return make_error(Errc::kIoError, "raw baseline: cannot open {} with O_DIRECT: {}", path,
                          std::strerror(errno));
      }
      fds_.push_back(fd);
    }
    return Status::ok();
  }
  const std::vector<int>& fds() const noexcept { return fds_; }

 private:
  std::vector<int> fds_;
};

// Where the next member I/O of one thread goes.
struct Target {
  std::uint32_t member;
  std::uint64_t offset;
};

// Random: any member, any io-aligned offset. Sequential: each thread walks its own slice of every
// member, visiting the members in turn, as a striped sequential stream does.
class TargetStream {
 public:
  TargetStream(const RawConfig& config, std::uint32_t thread)
      : members_(static_cast<std::uint32_t>(config.paths.size())),
        io_(config.cost.io_bytes),
        pattern_(config.pattern) {
    const std::uint64_t rows = config.member_bytes / io_;
    if (pattern_ == AccessPattern::kRandom || config.timing.threads <= 1) {
      rows_ = rows;
    } else {
      rows_ = rows / config.timing.threads;
      first_row_ = rows_ * thread;
    }
  }

  Target next(Rng& rng) noexcept {
    if (pattern_ == AccessPattern::kRandom) {
      const auto member = static_cast<std::uint32_t>(rng.below(members_));
      return Target{member, rng.below(rows_) * io_};
    }
    const Target t{member_, (first_row_ + row_) * io_};
    if (++member_ == members_) {
      member_ = 0;
      row_ = row_ + 1 == rows_ ? 0 : row_ + 1;
    }
    return t;
  }

 private:
  std::uint32_t members_;
  std::uint64_t io_;
  AccessPattern pattern_;
  std::uint64_t rows_ = 0;
  std::uint64_t first_row_ = 0;
  std::uint32_t member_ = 0;
  std::uint64_t row_ = 0;
};

class RawWorker final : public TimedWorker {
 public:
  RawWorker(const RawConfig& config, const std::vector<int>& fds, std::uint32_t thread)
      : config_(config),
        fds_(fds),
        targets_(config, thread),
        rng_(thread_seed(config.seed, thread)),
        // Reads are chosen with this probability out of 2^20: fine enough for any mix.
        read_threshold_(static_cast<std::uint64_t>(
            config.cost.read_fraction() * static_cast<double>(1 << 20) + 0.5)),
        slots_(config.queue_depth) {}

  RawWorker(const RawWorker&) = delete;
  RawWorker& operator=(const RawWorker&) = delete;

  ~RawWorker() override {
    if (ring_ready_) io_uring_queue_exit(&ring_);
  }

  Status setup() {
    const std::size_t io = config_.cost.io_bytes;
    auto buffer = AlignedBuffer::allocate(io * config_.queue_depth, kBufferAlign);
    if (!buffer.is_ok()) return buffer.status();
    buffer_ = std::move(*buffer);  // zero-filled: what the baseline writes

    // Fastest setup the kernel offers first; older kernels refuse the newer flags.
    const unsigned flag_sets[] = {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
                                  IORING_SETUP_COOP_TASKRUN, 0};
    int rc = -EINVAL;
    for (unsigned flags : flag_sets) {
      rc = io_uring_queue_init(config_.queue_depth, &ring_, flags);
      if (rc == 0) break;
    }
    if (rc != 0) {
      return make_error(Errc::kIoError, "raw baseline: io_uring_queue_init({}): {}",
                        config_.queue_depth, std::strerror(-rc));
    }
    ring_ready_ = true;

    // Registered files and buffers spare the kernel a lookup and a page pinning per I/O; the
    // baseline goes without them only where the kernel refuses (e.g. a low RLIMIT_MEMLOCK).
    fixed_files_ =
        io_uring_register_files(&ring_, fds_.data(), static_cast<unsigned>(fds_.size())) == 0;
    const iovec region{buffer_.data(), buffer_.size()};
    fixed_buffers_ = io_uring_register_buffers(&ring_, &region, 1) == 0;
    return Status::ok();
  }

  Status run(const Window& window, ThreadTally& tally) override {
    std::this_thread::sleep_until(window.start);
    std::uint32_t in_flight = 0;
    Status error;
    for (std::uint32_t slot = 0; slot < config_.queue_depth; ++slot) {
      prepare(slot, Clock::now());
      ++in_flight;
    }
    while (in_flight > 0) {
      const int rc = io_uring_submit_and_wait(&ring_, 1);
      if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
        return make_error(Errc::kIoError, "raw baseline: io_uring_submit_and_wait: {}",
                          std::strerror(-rc));
      }
      const Clock::time_point now = Clock::now();
      const bool counted = window.counts(now);
      const bool more = window.open_at(now);
      unsigned head = 0;
      unsigned seen = 0;
      io_uring_cqe* cqe = nullptr;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        --in_flight;
        const auto slot = static_cast<std::uint32_t>(io_uring_cqe_get_data64(cqe));
        Slot& s = slots_[slot];
        if (cqe->res != static_cast<int>(config_.cost.io_bytes)) {
          if (error.is_ok()) error = failed(s, cqe->res);
          continue;
        }
        if (counted) {
          (s.read ? tally.reads : tally.writes) += 1;
          tally.bytes += config_.cost.io_bytes;
          tally.latency_ns.record(static_cast<std::uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(now - s.submitted).count()));
        }
        if (more && error.is_ok()) {
          prepare(slot, now);
          ++in_flight;
        }
      }
      io_uring_cq_advance(&ring_, seen);
    }
    return error;
  }

 private:
  struct Slot {
    Clock::time_point submitted;
    std::uint32_t member = 0;
    std::uint64_t offset = 0;
    bool read = false;
  };

  Status failed(const Slot& s, int res) const {
    const std::string& path = config_.paths[s.member];
    if (res < 0) {
      return make_error(Errc::kIoError, "raw baseline: {} of {} bytes at {} on {}: {}",
                        s.read ? "read" : "write", config_.cost.io_bytes, s.offset, path,
                        std::strerror(-res));
    }
    return make_error(Errc::kIoError, "raw baseline: short {} on {} at {}: {} of {} bytes",
                      s.read ? "read" : "write", path, s.offset, res, config_.cost.io_bytes);
  }

  void prepare(std::uint32_t slot, Clock::time_point now) {
    Slot& s = slots_[slot];
    const Target t = targets_.next(rng_);
    s.member = t.member;
    s.offset = config_.member_offset + t.offset;
    s.read = (rng_.next() >> 44) < read_threshold_;  // top 20 bits against a 20-bit threshold
    s.submitted = now;

    const unsigned io = config_.cost.io_bytes;
    std::byte* buf = buffer_.data() + std::size_t{slot} * io;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);  // never null: the SQ holds queue_depth entries
    const int fd = fixed_files_ ? static_cast<int>(t.member) : fds_[t.member];
    if (fixed_buffers_) {
      if (s.read) {
        io_uring_prep_read_fixed(sqe, fd, buf, io, s.offset, 0);
      } else {
        io_uring_prep_write_fixed(sqe, fd, buf, io, s.offset, 0);
      }
    } else if (s.read) {
      io_uring_prep_read(sqe, fd, buf, io, s.offset);
    } else {
      io_uring_prep_write(sqe, fd, buf, io, s.offset);
    }
    if (fixed_files_) sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, slot);
  }

  const RawConfig& config_;
  const std::vector<int>& fds_;
  TargetStream targets_;
  Rng rng_;
  std::uint64_t read_threshold_;
  std::vector<Slot> slots_;
  AlignedBuffer buffer_;
  io_uring ring_{};
  bool ring_ready_ = false;
  bool fixed_files_ = false;
  bool fixed_buffers_ = false;
};

}  // namespace

Result<RunFigures> run_raw_baseline(const RawConfig& config) {
  if (config.paths.empty() || config.cost.io_bytes == 0 ||
      config.member_bytes / config.cost.io_bytes < config.timing.threads) {
    return make_error(Errc::kInvalidArgument,
                      "raw baseline: {} members of {} bytes cannot hold {}-byte I/Os for {} "
                      "threads",
                      config.paths.size(), config.member_bytes, config.cost.io_bytes,
                      config.timing.threads);
  }
  MemberFds fds;
  GRAID_RETURN_IF_ERROR(fds.open_all(config.paths));
  return run_timed(config.timing,
                   [&](std::uint32_t thread) -> Result<std::unique_ptr<TimedWorker>> {
                     auto worker = std::make_unique<RawWorker>(config, fds.fds(), thread);
                     GRAID_RETURN_IF_ERROR(worker->setup());
                     return std::unique_ptr<TimedWorker>(std::move(worker));
                   });
}

}  // namespace graid::bench
