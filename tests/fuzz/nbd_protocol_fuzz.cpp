// libFuzzer target for the NBD wire parsers (daemon/nbd/nbd_protocol.h): client flags, option
// headers, INFO/GO data, export names, request headers and the request check. Properties:
//   - no parser crashes, reads out of bounds or hits UB (the sanitizers watch);
//   - a parsed option header never claims more than kMaxOptionLength unless it failed kNoSpace;
//   - a request that passes check_request() lies inside the export and is block-aligned, and no
//     request asks the server to consume more than kMaxPayload bytes of payload.
// Run: nbd_protocol_fuzz -max_len=128 -max_total_time=60
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "nbd/nbd_protocol.h"

namespace graid::nbd {
namespace {

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "nbd_protocol_fuzz: property violated: %s\n", what);
    std::abort();
  }
}

}  // namespace
}  // namespace graid::nbd

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace graid::nbd;
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  (void)parse_client_flags(in);
  OptionHeader h;
  const graid::Status s = parse_option_header(in, h);
  if (s.is_ok()) require(h.length <= kMaxOptionLength, "option length over the maximum");
  if (auto info = parse_info_request(in)) {
    require(info->name.size() <= kMaxStringLength, "INFO name too long");
    require(4 + info->name.size() + 2 + 2 * info->infos.size() == size, "INFO lengths");
  }
  (void)parse_export_name(in);
  if (auto r = parse_request_header(in)) {
    const std::uint64_t export_size = size > 0 ? (std::uint64_t{data[0]} << 20) : 1 << 20;
    const ExportLimits limits{export_size, 512, kMaxPayload, size > 1 && (data[1] & 1) != 0};
    const RequestCheck c = check_request(*r, limits);
    require(c.payload <= kMaxPayload, "payload over the maximum");
    if (c.error == 0 && r->type != kCmdFlush && r->type != kCmdDisc) {
      require(r->offset <= limits.size && limits.size - r->offset >= r->length, "past the end");
      require(r->offset % 512 == 0 && r->length % 512 == 0, "misaligned");
      require(!limits.read_only || r->type == kCmdRead, "write on a read-only export");
    }
  }
  return 0;
}
