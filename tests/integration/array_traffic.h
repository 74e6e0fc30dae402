// Random verified I/O on an array from a thread of its own, while a background job (rebuild,
// hot replace) runs: writes of fresh data recorded in a byte model of the array, reads compared
// with it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "array_harness.h"

namespace graid::testing {

// Every event an array reports, for tests that look for some kind of them.
class ArrayEventLog final : public ArrayObserver {
 public:
  void on_event(const ArrayEvent& event) override {
    std::lock_guard guard(mu_);
    events_.push_back(event);
  }
  std::vector<ArrayEvent> of(ArrayEventKind kind) const {
    std::lock_guard guard(mu_);
    std::vector<ArrayEvent> out;
    for (const ArrayEvent& e : events_)
      if (e.kind == kind) out.push_back(e);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<ArrayEvent> events_;
};

// Random verified I/O on the array from one thread until `stop`: writes of fresh data recorded
// in `model`, reads compared with it. One batch of non-overlapping requests at a time.
class Traffic {
 public:
  Traffic(Array& array, std::vector<std::byte>& model, std::uint64_t seed)
      : array_(array), model_(model), thread_([this, seed] { run(seed); }) {}
  ~Traffic() { finish(); }
  void finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::uint64_t ios() const { return ios_.load(); }
  std::uint64_t mismatches() const { return mismatches_.load(); }
  std::uint64_t errors() const { return errors_.load(); }

 private:
  void run(std::uint64_t seed) {
    auto ctx = std::move(*IoContext::create(64));
    auto queue = std::move(*array_.attach(*ctx));
    std::mt19937_64 rng(seed);
    const std::uint64_t blocks = array_.capacity() / 4096;
    constexpr std::uint32_t kBatch = 8, kMaxBlocks = 8;
    std::vector<TestIo> ios(kBatch);
    auto buf = std::move(*AlignedBuffer::allocate(kBatch * kMaxBlocks * 4096, 4096));
    while (!stop_.load()) {
      // Non-overlapping: each request in its own slice of the array.
      const std::uint64_t slice = blocks / kBatch;
      std::vector<TestIo*> batch;
      for (std::uint32_t i = 0; i < kBatch; ++i) {
        TestIo& io = ios[i];
        const std::uint32_t n = 1 + static_cast<std::uint32_t>(rng() % kMaxBlocks);
        io.kind = rng() % 2 == 0 ? IoKind::kWrite : IoKind::kRead;
        io.offset = (i * slice + rng() % (slice - n)) * 4096;
        io.len = n * 4096;
        io.buf = buf.data() + i * kMaxBlocks * 4096;
        if (io.kind == IoKind::kWrite) {
          for (std::uint32_t w = 0; w < io.len / 8; ++w) {
            const std::uint64_t v = rng();
            std::memcpy(io.buf + w * 8, &v, 8);
          }
        }
        batch.push_back(&io);
      }
      run_all(*queue, batch);
      for (TestIo* io : batch) {
        ++ios_;
        if (!io->status) {
          ++errors_;
          continue;
        }
        std::byte* at = model_.data() + io->offset;
        if (io->kind == IoKind::kWrite) {
          std::memcpy(at, io->buf, io->len);
        } else if (std::memcmp(at, io->buf, io->len) != 0) {
          ++mismatches_;
        }
      }
    }
  }

  Array& array_;
  std::vector<std::byte>& model_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> ios_{0}, mismatches_{0}, errors_{0};
  std::thread thread_;
};

// Fills the array with random data and the model with the same.
inline void fill_array(Array& array, std::vector<std::byte>& model, std::uint64_t seed) {
  model = random_bytes(array.capacity(), seed);
  auto ctx = std::move(*IoContext::create(64));
  auto queue = std::move(*array.attach(*ctx));
  auto buf = std::move(*AlignedBuffer::allocate(1u << 20, 4096));
  for (std::uint64_t at = 0; at < array.capacity(); at += buf.size()) {
    const auto len =
        static_cast<std::uint32_t>(std::min<std::uint64_t>(buf.size(), array.capacity() - at));
    std::memcpy(buf.data(), model.data() + at, len);
    ASSERT_TRUE(run_one(*queue, IoKind::kWrite, at, len, buf.data()).is_ok());
  }
}
// Reads the whole array and compares it with the model.
inline void verify_array(Array& array, const std::vector<std::byte>& model, const char* when) {
  auto ctx = std::move(*IoContext::create(64));
  auto queue = std::move(*array.attach(*ctx));
  auto buf = std::move(*AlignedBuffer::allocate(1u << 20, 4096));
  for (std::uint64_t at = 0; at < array.capacity(); at += buf.size()) {
    const auto len =
        static_cast<std::uint32_t>(std::min<std::uint64_t>(buf.size(), array.capacity() - at));
    Status st = run_one(*queue, IoKind::kRead, at, len, buf.data());
    ASSERT_TRUE(st.is_ok()) << when << ": " << st.to_string();
    ASSERT_EQ(std::memcmp(buf.data(), model.data() + at, len), 0)
        << when << ": data differs in array bytes [" << at << ", +" << len << ")";
  }
}

// A RAID level and member count, for tests parameterised over levels.
struct LevelShape {
  RaidLevel level;
  std::uint32_t members;
  // Parity (jobs' and foreground's) on a worker thread that fails every third batch after
  // scribbling over its outputs (ThreadedAsyncParity): the redo path runs too.
  bool async_parity = false;
};
inline std::string level_shape_name(const ::testing::TestParamInfo<LevelShape>& info) {
  return std::string(raid_level_name(info.param.level)) +
         (info.param.async_parity ? "_async_parity" : "");
}

// Arrays for background-job tests (rebuild, hot replace): members on files of kMemberBytes with
// 4 KiB strips and 1 MiB bitmap regions on the CPU parity backend, plus `extra` files of the same
// size opened separately (spares, replacements), and a model of the array's bytes.
class ArrayJobTest : public ::testing::TestWithParam<LevelShape> {
 protected:
  static constexpr std::uint32_t kStrip = 4096;
  static constexpr std::uint64_t kMemberBytes = 6u << 20;

  void SetUp() override {
    parity_ = std::move(*make_parity_backend("cpu"));
    if (GetParam().async_parity) async_ = std::make_unique<ThreadedAsyncParity>(*parity_, 3);
  }

  ArrayOptions options() {
    ArrayOptions o;
    o.parity = parity_.get();
    o.async_parity = async_.get();
    o.bitmap_clear_interval = bitmap_clear_interval_;
    return o;
  }
  // The array, named `name`; extra_[0] is the last extra file, extra_[1] the one before.
  std::unique_ptr<Array> make_array(std::uint32_t extra, const char* name) {
    auto devs = files_.open(GetParam().members + extra, kMemberBytes, true);
    EXPECT_TRUE(devs.is_ok());
    if (!devs.is_ok()) return nullptr;
    extra_count_ = extra;
    for (std::uint32_t i = 0; i < extra; ++i) {
      extra_.push_back(std::move(devs->back()));
      devs->pop_back();
    }
    CreateOptions c;
    c.level = GetParam().level;
    c.strip_bytes = kStrip;
    c.bitmap_region_bytes = 1u << 20;
    c.name = name;
    auto array = Array::create(std::move(*devs), c, options());
    EXPECT_TRUE(array.is_ok()) << array.status().to_string();
    return array.is_ok() ? std::move(*array) : nullptr;
  }
  // The file and the fault injector behind extra_[i].
  const std::string& extra_path(std::uint32_t i) const {
    return files_.paths[GetParam().members + extra_count_ - 1 - i];
  }
  FaultyMember* extra_faulty(std::uint32_t i) const {
    return files_.faulty[GetParam().members + extra_count_ - 1 - i];
  }
  void fill(Array& array, std::uint64_t seed) { fill_array(array, model_, seed); }
  void verify(Array& array, const char* when) { verify_array(array, model_, when); }
  // A member other than `except` whose failure the array survives with `failed` already gone.
  static std::uint32_t other_member(const Array& array, std::uint32_t except,
                                    std::uint64_t failed) {
    for (std::uint32_t m = 0; m < array.member_count(); ++m) {
      if (m == except || (failed >> m & 1u) != 0) continue;
      if (array.geometry().survives(failed | std::uint64_t{1} << m)) return m;
    }
    return array.member_count();
  }

  // Members other than `except`, as many as the level tolerates losing, failed.
  void fail_others(Array& array, std::uint32_t except) {
    std::uint64_t failed = 0;
    for (std::uint32_t round = 0; round < array.geometry().failures_tolerated(); ++round) {
      const std::uint32_t m = other_member(array, except, failed);
      ASSERT_LT(m, array.member_count());
      ASSERT_TRUE(array.fail_member(m, "test").is_ok());
      failed |= std::uint64_t{1} << m;
    }
  }

  // Flushes clear idle regions' write-intent bits at most this often (ArrayOptions).
  std::chrono::milliseconds bitmap_clear_interval_{500};
  ArrayFiles files_;
  std::vector<std::unique_ptr<MemberDevice>> extra_;
  std::uint32_t extra_count_ = 0;
  std::vector<std::byte> model_;
  std::unique_ptr<ParityBackend> parity_;
  std::unique_ptr<ThreadedAsyncParity> async_;  // outlives the arrays the tests make
};

}  // namespace graid::testing
