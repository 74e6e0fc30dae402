#include "timed_member.h"

#include <fmt/format.h>
#include <liburing.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

namespace graid::bench {
namespace {

std::uint64_t monotonic_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// "3GB/s" -> 3e9, "800MB/s", "1.5G/s", "500000000B/s".
Result<double> parse_bandwidth(std::string_view key, std::string_view v) {
  double number = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), number);
  if (ec != std::errc() || !(number > 0) || !std::isfinite(number)) {
    return make_error(Errc::kInvalidArgument, "{}={}: not a positive bandwidth", key, v);
  }
  std::string_view unit(end, static_cast<std::size_t>(v.data() + v.size() - end));
  double scale = 1;
  if (!unit.empty() && (unit[0] == 'k' || unit[0] == 'K')) scale = 1e3;
  if (!unit.empty() && unit[0] == 'M') scale = 1e6;
  if (!unit.empty() && unit[0] == 'G') scale = 1e9;
  if (scale != 1) unit.remove_prefix(1);
  if (unit != "B/s" && unit != "/s") {
    return make_error(Errc::kInvalidArgument, "{}={}: the unit must be B/s, kB/s, MB/s or GB/s",
                      key, v);
  }
  return number * scale;
}

Result<std::uint64_t> parse_latency(std::string_view v) {
  double number = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), number);
  if (ec != std::errc() || number < 0 || !std::isfinite(number)) {
    return make_error(Errc::kInvalidArgument, "lat={}: not a latency", v);
  }
  const std::string_view unit(end, static_cast<std::size_t>(v.data() + v.size() - end));
  double scale = 0;
  if (unit == "ns") scale = 1;
  if (unit == "us") scale = 1e3;
  if (unit == "ms") scale = 1e6;
  if (unit == "s") scale = 1e9;
  if (scale == 0 || number * scale > 10e9) {
    return make_error(Errc::kInvalidArgument,
                      "lat={}: give ns, us, ms or s, at most 10 s (e.g. lat=80us)", v);
  }
  return static_cast<std::uint64_t>(number * scale);
}

// Sleeps (no CPU) until CLOCK_MONOTONIC reads `at_ns`.
void wait_until(std::uint64_t at_ns) noexcept {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(at_ns / 1'000'000'000ull);
  ts.tv_nsec = static_cast<long>(at_ns % 1'000'000'000ull);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

}  // namespace

Result<TimedModel> parse_timed_model(std::string_view text) {
  constexpr std::string_view kPrefix = "timed:";
  if (!text.starts_with(kPrefix)) {
    return make_error(Errc::kInvalidArgument,
                      "member model '{}': expected timed:read=<bw>,write=<bw>,lat=<time>", text);
  }
  text.remove_prefix(kPrefix.size());
  TimedModel m;
  bool read = false, write = false, lat = false;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return make_error(Errc::kInvalidArgument, "member model: '{}' is not key=value", item);
    }
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    bool* seen = key == "read" ? &read : key == "write" ? &write : key == "lat" ? &lat : nullptr;
    if (seen == nullptr) {
      return make_error(Errc::kInvalidArgument,
                        "member model: unknown key '{}' (read, write and lat are known)", key);
    }
    if (*seen) return make_error(Errc::kInvalidArgument, "member model: '{}' given twice", key);
    *seen = true;
    if (key == "lat") {
      auto ns = parse_latency(value);
      if (!ns) return ns.status();
      m.latency_ns = *ns;
    } else {
      auto bw = parse_bandwidth(key, value);
      if (!bw) return bw.status();
      (key == "read" ? m.read_bytes_per_s : m.write_bytes_per_s) = *bw;
    }
  }
  if (!read || !write || !lat) {
    return make_error(Errc::kInvalidArgument,
                      "member model: read=, write= and lat= are all "
                      "required (e.g. timed:read=3GB/s,write=2GB/s,"
                      "lat=80us)");
  }
  return m;
}

std::string describe(const TimedModel& m) {
  return fmt::format("timed: read {:.2f} GB/s, write {:.2f} GB/s, latency {} us",
                     m.read_bytes_per_s / 1e9, m.write_bytes_per_s / 1e9,
                     static_cast<double>(m.latency_ns) / 1e3);
}

// One request's wait: an absolute io_uring timeout, then the request's completion. Pooled per
// thread (a timer completes on the thread that started it).
class TimedMember::Timer final : public RingCommand {
 public:
  MemberRequest* req = nullptr;
  std::int32_t result = 0;
  __kernel_timespec at{};

  std::int32_t prep(io_uring_sqe& sqe, std::span<std::byte> /*cmd*/) override {
    io_uring_prep_timeout(&sqe, &at, 0, IORING_TIMEOUT_ABS);
    return 0;
  }
  void on_complete(std::int32_t res, std::span<const std::uint64_t> /*big_cqe*/) override;
};

// The calling thread's timers: all it made, and those not in flight.
struct TimedMember::TimerPool {
  std::vector<std::unique_ptr<Timer>> all;
  std::vector<Timer*> idle;
};

TimedMember::TimerPool& TimedMember::timer_pool() {
  thread_local TimerPool pool;
  return pool;
}

void TimedMember::Timer::on_complete(std::int32_t res, std::span<const std::uint64_t>) {
  MemberRequest& r = *req;
  // -ETIME is the timeout expiring, as planned; anything else (the ring going away) fails it.
  const std::int32_t out = res == -ETIME || res == 0 ? result : -EIO;
  req = nullptr;
  timer_pool().idle.push_back(this);
  r.on_done(out);
}

TimedMember::TimedMember(std::string name, std::uint64_t size, const TimedModel& model,
                         std::uint64_t stored_head)
    : name_(std::move(name)), size_(size), model_(model), head_(std::min(stored_head, size)) {}

TimedMember::~TimedMember() = default;

std::uint64_t TimedMember::schedule(std::atomic<std::uint64_t>& channel, double bw,
                                    std::uint32_t len, std::uint64_t now) noexcept {
  const auto busy = static_cast<std::uint64_t>(static_cast<double>(len) * 1e9 / bw);
  std::uint64_t free = channel.load(std::memory_order_relaxed);
  std::uint64_t done = 0;
  do {
    done = std::max(free, now) + busy;
  } while (!channel.compare_exchange_weak(free, done, std::memory_order_relaxed));
  return done + model_.latency_ns;
}

void TimedMember::copy_head(MemberOp op, std::uint64_t offset, std::byte* buf, std::uint64_t len) {
  if (offset >= head_.size()) return;
  const std::uint64_t n = std::min<std::uint64_t>(len, head_.size() - offset);
  std::lock_guard guard(head_mutex_);
  if (op == MemberOp::kWrite) {
    std::memcpy(head_.data() + offset, buf, n);
  } else {
    std::memcpy(buf, head_.data() + offset, n);
  }
}

Status TimedMember::zero_range(std::uint64_t offset, std::uint64_t len) {
  if (offset > size_ || len > size_ - offset) {
    return make_error(Errc::kOutOfRange, "{}: zero [{}, +{}) beyond its {} bytes", name_, offset,
                      len, size_);
  }
  std::lock_guard guard(head_mutex_);
  if (offset < head_.size()) {
    std::memset(head_.data() + offset, 0, std::min<std::uint64_t>(len, head_.size() - offset));
  }
  return Status::ok();
}

void TimedMember::submit(IoContext& ctx, MemberRequest& req) {
  const bool rw = req.op == MemberOp::kRead || req.op == MemberOp::kWrite;
  const bool ranged = rw || req.op == MemberOp::kDiscard || req.op == MemberOp::kWriteZeroes;
  if (ranged &&
      (req.len == 0 || req.offset % 512 != 0 || req.len % 512 != 0 || (rw && req.buf == nullptr))) {
    ctx.complete_later(req, -EINVAL);
    return;
  }
  if (ranged && (req.offset > size_ || req.len > size_ - req.offset)) {
    ctx.complete_later(req, -ERANGE);
    return;
  }
  const std::uint64_t now = monotonic_ns();
  std::uint64_t at = now;
  std::int32_t result = 0;
  switch (req.op) {
    case MemberOp::kRead:
      copy_head(req.op, req.offset, req.buf, req.len);
      at = schedule(read_free_, model_.read_bytes_per_s, req.len, now);
      bytes_read_.fetch_add(req.len, std::memory_order_relaxed);
      result = static_cast<std::int32_t>(req.len);
      break;
    case MemberOp::kWrite:
      copy_head(req.op, req.offset, req.buf, req.len);
      at = schedule(write_free_, model_.write_bytes_per_s, req.len, now);
      bytes_written_.fetch_add(req.len, std::memory_order_relaxed);
      result = static_cast<std::int32_t>(req.len);
      break;
    case MemberOp::kFlush:
      at = now + model_.latency_ns;
      break;
    case MemberOp::kDiscard:
    case MemberOp::kWriteZeroes:
      (void)zero_range(req.offset, req.len);
      break;
  }
  TimerPool& pool = timer_pool();
  if (pool.idle.empty()) {
    pool.all.push_back(std::make_unique<Timer>());
    pool.idle.push_back(pool.all.back().get());
  }
  Timer& timer = *pool.idle.back();
  pool.idle.pop_back();
  timer.req = &req;
  timer.result = result;
  timer.at.tv_sec = static_cast<std::int64_t>(at / 1'000'000'000ull);
  timer.at.tv_nsec = static_cast<long long>(at % 1'000'000'000ull);
  ctx.submit_command(timer);
}

Status TimedMember::read_sync(std::uint64_t offset, std::span<std::byte> buf) {
  if (offset > size_ || buf.size() > size_ - offset) {
    return make_error(Errc::kOutOfRange, "{}: read beyond its {} bytes", name_, size_);
  }
  copy_head(MemberOp::kRead, offset, buf.data(), buf.size());
  wait_until(schedule(read_free_, model_.read_bytes_per_s, static_cast<std::uint32_t>(buf.size()),
                      monotonic_ns()));
  bytes_read_.fetch_add(buf.size(), std::memory_order_relaxed);
  return Status::ok();
}

Status TimedMember::write_sync(std::uint64_t offset, std::span<const std::byte> buf) {
  if (offset > size_ || buf.size() > size_ - offset) {
    return make_error(Errc::kOutOfRange, "{}: write beyond its {} bytes", name_, size_);
  }
  copy_head(MemberOp::kWrite, offset, const_cast<std::byte*>(buf.data()), buf.size());
  wait_until(schedule(write_free_, model_.write_bytes_per_s, static_cast<std::uint32_t>(buf.size()),
                      monotonic_ns()));
  bytes_written_.fetch_add(buf.size(), std::memory_order_relaxed);
  return Status::ok();
}

Status TimedMember::flush_sync() {
  wait_until(monotonic_ns() + model_.latency_ns);
  return Status::ok();
}

}  // namespace graid::bench
