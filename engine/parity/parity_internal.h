// Helpers shared by the parity backends (engine/parity only).
#pragma once

#include <span>
#include <string_view>

#include "graid/parity.h"
#include "graid/status.h"

namespace graid::parity_detail {

// Validates every job of a batch before any backend writes a byte, so an invalid job fails the
// whole batch with nothing written. The Status names the job ("job 3 (reconstruct kPQ k=8
// len=4096): ...") and keeps validate_job()'s error code.
Status validate_batch(std::span<const StripeJob> jobs);

std::string_view op_name(ParityOp op) noexcept;
std::string_view scheme_name(ParityScheme scheme) noexcept;

}  // namespace graid::parity_detail
