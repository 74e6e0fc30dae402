// graidd's parity engines (daemon/graidd/parity_choice.h), linked with the fake CUDA runtime:
// with the cuda backend the arrays' foreground path and jobs go through the batcher, with cpu
// the jobs' windows go to a ParityWorker; either way an array built with those options writes,
// reads back, initialises and checks clean, and the engine named did the work.
#include "graidd/parity_choice.h"

#include <gtest/gtest.h>

#include <cstring>

#include "fake_cuda.h"
#include "graid/parity_worker.h"
#include "kernels/batcher.h"
#include "kernels/cuda_backend.h"
#include "temp_dir.h"

namespace graid::daemon {
namespace {

// A RAID6 array on files with `choice`'s options (as Registry::array_options builds them),
// initialised by its background job; 1 MiB written through one queue and read back; then a
// check finds nothing.
void exercise(const ParityChoice& choice) {
  testing::TempDir dir;
  std::vector<std::unique_ptr<MemberDevice>> devs;
  for (int i = 0; i < 5; ++i) {
    OpenOptions o;
    o.create = true;
    o.create_size = 8u << 20;
    auto d = open_member(dir.path() + "/m" + std::to_string(i), o);
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    // Not zeroes: the initialisation has parity to compute.
    auto junk = AlignedBuffer::allocate(64 << 10, 4096);
    std::memset(junk->data(), 0x5a, 64 << 10);
    Status st = (*d)->write_sync(2u << 20, junk->span());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    devs.push_back(std::move(*d));
  }
  CreateOptions c;
  c.level = RaidLevel::kRaid6;
  c.strip_bytes = 64 * 1024;
  c.name = "choice";
  c.background_init = true;
  ArrayOptions o;
  o.parity = choice.backend;
  o.async_parity = choice.async;
  o.job_parity = choice.job_async;
  o.host_memory = choice.host_memory;
  auto array = Array::create(std::move(devs), c, o);
  ASSERT_TRUE(array.is_ok()) << array.status().to_string();
  Array& a = **array;
  InitControl init;
  auto done = a.initialise(init);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(done->finished);

  auto ctx = IoContext::create(64);
  ASSERT_TRUE(ctx.is_ok());
  auto queue = a.attach(**ctx);
  ASSERT_TRUE(queue.is_ok());
  const std::uint32_t len = 1u << 20;
  auto out = AlignedBuffer::allocate(len, 4096);
  auto in = AlignedBuffer::allocate(len, 4096);
  for (std::uint32_t i = 0; i < len; ++i)
    out->data()[i] = static_cast<std::byte>(i * 7 + i / 4096);
  struct Io final : ArrayIo {
    bool done = false;
    Status status;
    void on_complete(Status s) override {
      status = std::move(s);
      done = true;
    }
  };
  for (IoKind kind : {IoKind::kWrite, IoKind::kRead}) {
    Io io;
    io.kind = kind;
    io.offset = 3 * 65536;
    io.len = len;
    io.buf = kind == IoKind::kWrite ? out->data() : in->data();
    (*queue)->submit(io);
    while (!io.done)
      (*ctx)->poll(true);
    ASSERT_TRUE(io.status.is_ok()) << io.status.to_string();
  }
  EXPECT_EQ(std::memcmp(out->data(), in->data(), len), 0);
  queue->reset();
  CheckControl check;
  auto report = a.check(check);
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_TRUE(report->finished);
  EXPECT_EQ(report->mismatches, 0u);
}

TEST(ParityChoiceTest, CudaRunsTheForegroundAndTheJobsThroughTheBatcher) {
  fake_cuda::set_knobs({});
  auto engines = choose_parity({"cuda", 2});
  ASSERT_TRUE(engines.is_ok()) << engines.status().to_string();
  const ParityChoice& c = (*engines)->choice;
  EXPECT_EQ(c.backend->name(), "cuda");
  ASSERT_NE(c.async, nullptr);
  EXPECT_EQ(c.async->name(), "batcher");
  EXPECT_EQ(c.job_async, c.async);
  EXPECT_EQ(c.foreground, "batcher (cuda)");
  exercise(c);
  if (HasFatalFailure()) return;
  const kernels::BatcherStats s = c.batcher->stats();
  EXPECT_GT(s.device_jobs + s.cpu_small_jobs, 0u) << "the batcher took the parity";
  EXPECT_GT(s.device_jobs, 0u) << "the initialisation's and check's windows reach the device";
  EXPECT_EQ(fake_cuda::take_violations(), "");
}

TEST(ParityChoiceTest, CpuRunsTheForegroundInlineAndTheJobsOnAWorker) {
  auto engines = choose_parity({"cpu", 2});
  ASSERT_TRUE(engines.is_ok()) << engines.status().to_string();
  const ParityChoice& c = (*engines)->choice;
  EXPECT_EQ(c.backend->name(), "cpu");
  EXPECT_EQ(c.async, nullptr);
  ASSERT_NE(c.job_async, nullptr);
  EXPECT_EQ(c.jobs, "worker (cpu, 2 threads)");
  exercise(c);
  if (HasFatalFailure()) return;
  EXPECT_GT((*engines)->worker->batches(), 0u) << "the jobs' windows went to the worker";
}

TEST(ParityChoiceTest, AutoWithoutAGpuIsCpuAndZeroThreadsKeepTheJobsInline) {
  fake_cuda::Knobs none;
  none.devices = 0;
  fake_cuda::set_knobs(none);
  auto engines = choose_parity({"auto", 0});
  fake_cuda::set_knobs({});
  ASSERT_TRUE(engines.is_ok()) << engines.status().to_string();
  const ParityChoice& c = (*engines)->choice;
  EXPECT_EQ(c.backend->name(), "cpu");
  EXPECT_NE(c.reason.find("no usable GPU"), std::string::npos) << c.reason;
  EXPECT_EQ(c.async, nullptr);
  EXPECT_EQ(c.job_async, nullptr);
  EXPECT_EQ(c.jobs, "inline (cpu)");
  exercise(c);
}

TEST(ParityChoiceTest, AnUnknownBackendIsRefused) {
  auto engines = choose_parity({"fpga", 2});
  ASSERT_FALSE(engines.is_ok());
  EXPECT_EQ(engines.status().code(), Errc::kInvalidArgument);
}

}  // namespace
}  // namespace graid::daemon
