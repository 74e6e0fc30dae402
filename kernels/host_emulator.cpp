#include "host_emulator.h"

#include "kernel_batch.h"

namespace graid::kernels {

void emulate_batch(const KernelBatch& batch, GfMul gf) noexcept {
  // Same order of work as a grid-stride loop with one block: tile after tile, lane after lane.
  for (std::uint64_t tile = 0; tile < batch.tile_count; ++tile) {
    for (std::uint32_t lane = 0; lane < kTileLanes; ++lane) {
      if (gf == GfMul::kBitSerial) {
        run_tile_lane<GfMul::kBitSerial>(batch, kHostGfTables, tile, lane);
      } else if (gf == GfMul::kNibble) {
        run_tile_lane<GfMul::kNibble>(batch, kHostGfTables, tile, lane);
      } else {
        run_tile_lane<GfMul::kLogExp>(batch, kHostGfTables, tile, lane);
      }
    }
  }
}

namespace {

class KernelHostBackend final : public ParityBackend {
 public:
  explicit KernelHostBackend(GfMul gf) : gf_(gf) {}
  std::string_view name() const noexcept override { return "kernel-host"; }
  ParityCaps caps() const noexcept override {
    return ParityCaps{.raid5 = true, .raid6 = true, .reconstruct = true, .verify = true};
  }

  Status execute(std::span<StripeJob> jobs) override {
    GRAID_RETURN_IF_ERROR(validate_jobs(jobs));
    KernelBatchBuilder builder;  // per call: execute() may run on several threads at once
    for (const StripeJob& job : jobs)
      builder.add(materialize(plan_stripe(job), host_addrs(job)));
    emulate_batch(builder.view(), gf_);
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].op == ParityOp::kVerify) jobs[i].parity_ok = builder.mismatch()[i] == 0;
    }
    return Status::ok();
  }

 private:
  const GfMul gf_;
};

}  // namespace

std::unique_ptr<ParityBackend> make_kernel_host_backend(GfMul gf) {
  return std::make_unique<KernelHostBackend>(gf);
}

}  // namespace graid::kernels
