// StripeJob validation and the backend factory.

#include <array>
#include <cstdint>
#include <memory>

#include "graid/parity.h"
#include "parity/parity_internal.h"

namespace graid {

namespace parity_detail {

std::string_view op_name(ParityOp op) noexcept {
  switch (op) {
    case ParityOp::kEncode:
      return "encode";
    case ParityOp::kReconstruct:
      return "reconstruct";
    case ParityOp::kVerify:
      return "verify";
  }
  return "unknown-op";
}

std::string_view scheme_name(ParityScheme scheme) noexcept {
  switch (scheme) {
    case ParityScheme::kP:
      return "kP";
    case ParityScheme::kPQ:
      return "kPQ";
  }
  return "unknown-scheme";
}

Status validate_batch(std::span<const StripeJob> jobs) {
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    Status status = validate_job(jobs[i]);
    if (!status.is_ok()) {
      const StripeJob& job = jobs[i];
      return make_error(status.code(), "job {} ({} {} k={} len={}): {}", i, op_name(job.op),
                        scheme_name(job.scheme), job.k, job.len, status.message());
    }
  }
  return Status::ok();
}

}  // namespace parity_detail

namespace {

bool overlaps(const ChunkView& a, const ChunkView& b, std::size_t len) noexcept {
  // Compare as integers: pointers into different allocations are not ordered by `<`.
  const auto a0 = reinterpret_cast<std::uintptr_t>(a.data());
  const auto b0 = reinterpret_cast<std::uintptr_t>(b.data());
  return a0 < b0 + len && b0 < a0 + len;
}

}  // namespace

Status validate_job(const StripeJob& job) {
  if (job.op != ParityOp::kEncode && job.op != ParityOp::kReconstruct &&
      job.op != ParityOp::kVerify) {
    return make_error(Errc::kInvalidArgument, "unknown operation {}",
                      static_cast<unsigned>(job.op));
  }
  if (job.scheme != ParityScheme::kP && job.scheme != ParityScheme::kPQ) {
    return make_error(Errc::kInvalidArgument, "unknown parity scheme {}",
                      static_cast<unsigned>(job.scheme));
  }
  if (job.k < kMinDataChunks || job.k > kMaxDataChunks) {
    return make_error(Errc::kInvalidArgument, "k={} data chunks is outside [{}, {}]", job.k,
                      kMinDataChunks, kMaxDataChunks);
  }
  if (job.len == 0) return make_error(Errc::kInvalidArgument, "len is 0");

  const std::uint32_t count = job.chunk_count();
  for (std::uint32_t c = 0; c < count; ++c) {
    const ChunkView& chunk = job.chunk[c];
    if (chunk.data() == nullptr) {
      return make_error(Errc::kInvalidArgument, "chunk {} is null", c);
    }
    if (chunk.size() < job.len) {
      return make_error(Errc::kInvalidArgument, "chunk {} holds {} bytes, fewer than len {}", c,
                        chunk.size(), job.len);
    }
  }

  if (job.op == ParityOp::kReconstruct) {
    const unsigned max_missing = job.parity_count();
    if (job.missing_count < 1 || job.missing_count > max_missing) {
      return make_error(Errc::kInvalidArgument, "missing_count {} is outside [1, {}] for scheme {}",
                        job.missing_count, max_missing, parity_detail::scheme_name(job.scheme));
    }
    for (std::uint8_t m = 0; m < job.missing_count; ++m) {
      if (job.missing[m] >= count) {
        return make_error(Errc::kInvalidArgument, "missing[{}]={} is not a chunk index (< {})", m,
                          job.missing[m], count);
      }
    }
    if (job.missing_count == 2 && job.missing[0] == job.missing[1]) {
      return make_error(Errc::kInvalidArgument, "missing lists chunk {} twice", job.missing[0]);
    }
  }

  // Writes must not land on any other chunk of the job, or results would depend on the order
  // bytes are processed in. Sources may alias each other (e.g. one shared zero page): they are
  // only read. At most 2 x 33 comparisons; kept tight because 4 KiB jobs feel every cycle here.
  std::array<std::uint32_t, 2> written{};
  std::uint32_t written_count = 0;
  if (job.op == ParityOp::kEncode) {
    written = {job.k, job.k + 1};
    written_count = job.parity_count();
  } else if (job.op == ParityOp::kReconstruct) {
    written = {job.missing[0], job.missing[1]};
    written_count = job.missing_count;
  }
  for (std::uint32_t w = 0; w < written_count; ++w) {
    const std::uint32_t d = written[w];
    for (std::uint32_t c = 0; c < count; ++c) {
      if (c != d && overlaps(job.chunk[d], job.chunk[c], job.len)) {
        return make_error(Errc::kInvalidArgument,
                          "chunk {} is written but overlaps chunk {} within len", d, c);
      }
    }
  }
  return Status::ok();
}

Result<std::unique_ptr<ParityBackend>> make_parity_backend(std::string_view name) {
  if (name == "ref") return make_ref_backend();
  if (name == "cpu") return make_cpu_backend();
  return make_error(Errc::kNotFound, "no parity backend named '{}' (known: ref, cpu)", name);
}

}  // namespace graid
