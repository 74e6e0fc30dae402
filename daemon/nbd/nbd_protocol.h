// The NBD wire format (fixed newstyle handshake, simple and structured replies), as pure
// functions over byte buffers: no sockets, no state. The session (nbd_session.h) moves the bytes;
// everything that interprets or produces them is here, so it can be unit-tested and fuzzed on its
// own. Facts are from the protocol document (NetworkBlockDevice/nbd doc/proto.md). Every number
// on the wire is big-endian.
//
// Handshake (S: server, C: client):
//   S: "NBDMAGIC" u64, "IHAVEOPT" u64, u16 handshake flags (FIXED_NEWSTYLE | NO_ZEROES)
//   C: u32 client flags
//   C: "IHAVEOPT" u64, u32 option, u32 length, data          (repeated)
//   S: 0x3e889045565a9 u64, u32 option, u32 reply type, u32 length, data   (option replies)
//   EXPORT_NAME ends with S: u64 size, u16 transmission flags, 124 zero bytes (unless NO_ZEROES);
//   GO ends with NBD_REP_ACK.
// Transmission:
//   C: 0x25609513 u32, u16 command flags, u16 type, u64 handle, u64 offset, u32 length, [data]
//   S: simple     0x67446698 u32, u32 error, u64 handle, [data: a successful READ]
//   S: structured 0x668e33ef u32, u16 flags, u16 type, u64 handle, u32 length, payload
//
// Untrusted input: every parser checks lengths before reading and never reads past its span;
// what a bad input means for the connection is in the result (see RequestCheck).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graid/status.h"

namespace graid::nbd {

// Magic numbers.
inline constexpr std::uint64_t kNbdMagic = 0x4e42444d41474943;  // "NBDMAGIC"
inline constexpr std::uint64_t kOptMagic = 0x49484156454F5054;  // "IHAVEOPT"
inline constexpr std::uint64_t kOptReplyMagic = 0x3e889045565a9;
inline constexpr std::uint32_t kRequestMagic = 0x25609513;
inline constexpr std::uint32_t kSimpleReplyMagic = 0x67446698;
inline constexpr std::uint32_t kStructuredReplyMagic = 0x668e33ef;

// Handshake flags (server) and client flags: the same two bits.
inline constexpr std::uint16_t kFlagFixedNewstyle = 1u << 0;
inline constexpr std::uint16_t kFlagNoZeroes = 1u << 1;

// Options.
inline constexpr std::uint32_t kOptExportName = 1;
inline constexpr std::uint32_t kOptAbort = 2;
inline constexpr std::uint32_t kOptList = 3;
inline constexpr std::uint32_t kOptStartTls = 5;
inline constexpr std::uint32_t kOptInfo = 6;
inline constexpr std::uint32_t kOptGo = 7;
inline constexpr std::uint32_t kOptStructuredReply = 8;

// Option reply types. Errors have bit 31 set.
inline constexpr std::uint32_t kRepAck = 1;
inline constexpr std::uint32_t kRepServer = 2;
inline constexpr std::uint32_t kRepInfo = 3;
inline constexpr std::uint32_t kRepErrUnsup = 0x80000001;
inline constexpr std::uint32_t kRepErrPolicy = 0x80000002;
inline constexpr std::uint32_t kRepErrInvalid = 0x80000003;
inline constexpr std::uint32_t kRepErrTlsReqd = 0x80000005;  // STARTTLS first
inline constexpr std::uint32_t kRepErrUnknown = 0x80000006;  // no such export
inline constexpr std::uint32_t kRepErrShutdown = 0x80000007;
inline constexpr std::uint32_t kRepErrTooBig = 0x80000009;

// Information types of NBD_OPT_INFO / NBD_OPT_GO.
inline constexpr std::uint16_t kInfoExport = 0;
inline constexpr std::uint16_t kInfoName = 1;
inline constexpr std::uint16_t kInfoDescription = 2;
inline constexpr std::uint16_t kInfoBlockSize = 3;

// Transmission flags.
inline constexpr std::uint16_t kFlagHasFlags = 1u << 0;
inline constexpr std::uint16_t kFlagReadOnly = 1u << 1;
inline constexpr std::uint16_t kFlagSendFlush = 1u << 2;
inline constexpr std::uint16_t kFlagSendFua = 1u << 3;
inline constexpr std::uint16_t kFlagSendTrim = 1u << 5;
inline constexpr std::uint16_t kFlagSendWriteZeroes = 1u << 6;
inline constexpr std::uint16_t kFlagSendDf = 1u << 7;
inline constexpr std::uint16_t kFlagCanMultiConn = 1u << 8;

// Commands.
inline constexpr std::uint16_t kCmdRead = 0;
inline constexpr std::uint16_t kCmdWrite = 1;
inline constexpr std::uint16_t kCmdDisc = 2;
inline constexpr std::uint16_t kCmdFlush = 3;
inline constexpr std::uint16_t kCmdTrim = 4;
inline constexpr std::uint16_t kCmdCache = 5;
inline constexpr std::uint16_t kCmdWriteZeroes = 6;
inline constexpr std::uint16_t kCmdBlockStatus = 7;

// Command flags.
inline constexpr std::uint16_t kCmdFlagFua = 1u << 0;
inline constexpr std::uint16_t kCmdFlagNoHole = 1u << 1;
inline constexpr std::uint16_t kCmdFlagDf = 1u << 2;

// Structured reply chunk types and flags.
inline constexpr std::uint16_t kReplyFlagDone = 1u << 0;
inline constexpr std::uint16_t kReplyTypeNone = 0;
inline constexpr std::uint16_t kReplyTypeOffsetData = 1;
inline constexpr std::uint16_t kReplyTypeError = 0x8001;

// Error values on the wire (fixed by the protocol, whatever the host's errno numbering).
inline constexpr std::uint32_t kErrPerm = 1;
inline constexpr std::uint32_t kErrIo = 5;
inline constexpr std::uint32_t kErrNoMem = 12;
inline constexpr std::uint32_t kErrInval = 22;
inline constexpr std::uint32_t kErrNoSpc = 28;
inline constexpr std::uint32_t kErrOverflow = 75;
inline constexpr std::uint32_t kErrNotSup = 95;
inline constexpr std::uint32_t kErrShutdown = 108;

// Limits of this server.
// The largest READ or WRITE (the maximum block size we advertise). A WRITE above it is not read:
// the server replies EOVERFLOW and disconnects. A READ above it gets EOVERFLOW.
inline constexpr std::uint32_t kMaxPayload = 32u << 20;
// The largest option data the server reads. The protocol bounds strings (export names) to 4096
// bytes; INFO/GO add 6 bytes plus 2 per information request. Longer options are answered with
// NBD_REP_ERR_TOO_BIG and the connection is closed (their data is not read).
inline constexpr std::uint32_t kMaxOptionLength = 8192;
inline constexpr std::size_t kMaxStringLength = 4096;
// Error messages in structured error chunks are cut to this many bytes.
inline constexpr std::size_t kMaxErrorMessage = 256;

// Fixed message sizes.
inline constexpr std::size_t kGreetingSize = 18;
inline constexpr std::size_t kClientFlagsSize = 4;
inline constexpr std::size_t kOptionHeaderSize = 16;
inline constexpr std::size_t kOptionReplyHeaderSize = 20;
inline constexpr std::size_t kRequestHeaderSize = 28;
inline constexpr std::size_t kSimpleReplySize = 16;
inline constexpr std::size_t kStructuredHeaderSize = 20;
inline constexpr std::size_t kOffsetDataHeaderSize = kStructuredHeaderSize + 8;
inline constexpr std::size_t kErrorChunkMaxSize = kStructuredHeaderSize + 6 + kMaxErrorMessage;

// ---- Handshake ----

// The server's first message: NBDMAGIC, IHAVEOPT, FIXED_NEWSTYLE | NO_ZEROES.
std::array<std::byte, kGreetingSize> encode_greeting();

// The client's flags (4 bytes). kCorrupt for a short buffer; kUnsupported for bits we did not
// offer (the protocol says the server MUST then close the connection).
Result<std::uint32_t> parse_client_flags(std::span<const std::byte> in);

struct OptionHeader {
  std::uint32_t option = 0;
  std::uint32_t length = 0;  // bytes of option data that follow
};

// An option header (16 bytes). kCorrupt for a short buffer or a wrong magic (close the
// connection); kNoSpace when the data is longer than kMaxOptionLength (answer
// NBD_REP_ERR_TOO_BIG, then close: the data is not read). The header is still filled in on
// kNoSpace, through `out`, so the reply can name the option.
Status parse_option_header(std::span<const std::byte> in, OptionHeader& out);

// The data of NBD_OPT_INFO / NBD_OPT_GO: u32 name length, name, u16 count, count × u16.
struct InfoRequest {
  std::string name;
  std::vector<std::uint16_t> infos;
};
// kInvalidArgument (answer NBD_REP_ERR_INVALID) when the lengths do not add up to the data's
// size exactly, or the name is longer than kMaxStringLength or holds a NUL.
Result<InfoRequest> parse_info_request(std::span<const std::byte> data);

// kInvalidArgument for an export name longer than kMaxStringLength or holding a NUL.
Result<std::string> parse_export_name(std::span<const std::byte> data);

// An option reply: header + payload.
std::vector<std::byte> encode_option_reply(std::uint32_t option, std::uint32_t type,
                                           std::span<const std::byte> payload = {});
// An error reply whose payload is a message for humans.
std::vector<std::byte> encode_option_error(std::uint32_t option, std::uint32_t type,
                                           std::string_view message);
// NBD_REP_SERVER: u32 name length, name, description.
std::vector<std::byte> encode_rep_server(std::uint32_t option, std::string_view name,
                                         std::string_view description);
// NBD_REP_INFO replies.
std::vector<std::byte> encode_info_export(std::uint32_t option, std::uint64_t size,
                                          std::uint16_t transmission_flags);
std::vector<std::byte> encode_info_name(std::uint32_t option, std::string_view name);
std::vector<std::byte> encode_info_description(std::uint32_t option, std::string_view text);
std::vector<std::byte> encode_info_block_size(std::uint32_t option, std::uint32_t minimum,
                                              std::uint32_t preferred, std::uint32_t maximum);
// What the server sends after NBD_OPT_EXPORT_NAME: size, flags, 124 zeroes unless NO_ZEROES.
std::vector<std::byte> encode_export_name_reply(std::uint64_t size, std::uint16_t flags,
                                                bool no_zeroes);

// ---- Transmission ----

struct RequestHeader {
  std::uint16_t flags = 0;
  std::uint16_t type = 0;
  std::uint64_t handle = 0;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
};

// A request header (28 bytes). kCorrupt for a short buffer or a wrong magic: the stream cannot
// be trusted any more, so the connection is closed without a reply.
Result<RequestHeader> parse_request_header(std::span<const std::byte> in);

// What the server knows about the export a request is checked against.
struct ExportLimits {
  std::uint64_t size = 0;
  std::uint32_t block = 512;  // minimum block size: offsets and lengths must be multiples
  std::uint32_t max_payload = kMaxPayload;
  bool read_only = false;
};

// The verdict on a request header.
struct RequestCheck {
  std::uint32_t error = 0;    // 0: serve it; else reply with this error
  std::uint32_t payload = 0;  // bytes of data that follow the header and must be consumed
  bool close = false;         // reply `error`, then close without reading further
};

// Checks a request against the export. The answers, from the protocol document:
//   unknown or unsupported command (CACHE, BLOCK_STATUS, ...), flags not valid for it,
//   FLUSH/DISC with offset or length, misaligned offset or length        EINVAL
//   READ or TRIM past the end                                             EINVAL
//   WRITE or WRITE_ZEROES past the end                                    ENOSPC
//   READ longer than max_payload                                          EOVERFLOW
//   WRITE longer than max_payload                                         EOVERFLOW + close
//   WRITE, TRIM, WRITE_ZEROES on a read-only export                       EPERM
// A WRITE's payload is consumed (payload = length) whenever it is not closed on, also when it
// is refused, so the stream stays in step.
RequestCheck check_request(const RequestHeader& request, const ExportLimits& limits);

// A simple reply's 16 bytes.
std::array<std::byte, kSimpleReplySize> encode_simple_reply(std::uint32_t error,
                                                            std::uint64_t handle);
// A structured reply chunk header (20 bytes); `length` is the payload's.
void encode_structured_header(std::span<std::byte, kStructuredHeaderSize> out, std::uint16_t flags,
                              std::uint16_t type, std::uint64_t handle, std::uint32_t length);
// An NBD_REPLY_TYPE_OFFSET_DATA chunk's header and offset (28 bytes) for `data_length` bytes of
// data that follow; REQUIRES data_length <= 2^32 - 9.
std::array<std::byte, kOffsetDataHeaderSize> encode_offset_data_header(std::uint64_t handle,
                                                                       std::uint64_t offset,
                                                                       std::uint32_t data_length,
                                                                       bool done);
// An NBD_REPLY_TYPE_ERROR chunk (final) into `out`; the message is cut to kMaxErrorMessage.
// Returns the bytes used.
std::size_t encode_error_chunk(std::span<std::byte, kErrorChunkMaxSize> out, std::uint64_t handle,
                               std::uint32_t error, std::string_view message);
// An NBD_REPLY_TYPE_NONE chunk (final): 20 bytes.
std::array<std::byte, kStructuredHeaderSize> encode_none_chunk(std::uint64_t handle);

// The NBD error for an engine error class: EIO for I/O errors (and anything unexpected), EINVAL
// for bad requests, ENOSPC, ENOTSUP.
std::uint32_t nbd_error_for(Errc code) noexcept;

}  // namespace graid::nbd
