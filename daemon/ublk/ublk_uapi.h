// The ublk driver's user-space interface as Linux 6.12 defines it (include/uapi/linux/ublk_cmd.h),
// written out here because Debian 12's own header is the 6.1 one: it lacks the ioctl-encoded
// command numbers, USER_COPY, GET_FEATURES and the 6.2+ parameter blocks. Only what graid uses.
// Layouts are fixed by the kernel ABI: every struct has a static_assert on its size.
#pragma once

#include <sys/ioctl.h>

#include <cstdint>

namespace graid::ublk {

// ---- control commands, on /dev/ublk-control (IORING_OP_URING_CMD on an SQE128 ring) ----

struct CtrlCmd {  // struct ublksrv_ctrl_cmd: lives in the SQE's 80-byte command area
  std::uint32_t dev_id;
  std::uint16_t queue_id;  // (u16)-1 unless the command is about one queue
  std::uint16_t len;       // bytes at addr
  std::uint64_t addr;      // in or out buffer
  std::uint64_t data[2];   // inline arguments (START_DEV: the server's pid)
};
static_assert(sizeof(CtrlCmd) == 32);

struct DevInfo {  // struct ublksrv_ctrl_dev_info
  std::uint16_t nr_hw_queues;
  std::uint16_t queue_depth;
  std::uint16_t state;  // kStateDead, kStateLive, kStateQuiesced
  std::uint16_t pad0;
  std::uint32_t max_io_buf_bytes;
  std::uint32_t dev_id;
  std::int32_t ublksrv_pid;
  std::uint32_t pad1;
  std::uint64_t flags;
  std::uint64_t ublksrv_flags;  // the server's own, never interpreted by the kernel
  std::uint32_t owner_uid;      // 6.2+
  std::uint32_t owner_gid;
  std::uint64_t reserved1;
  std::uint64_t reserved2;
};
static_assert(sizeof(DevInfo) == 64);

inline constexpr std::uint16_t kStateDead = 0;
inline constexpr std::uint16_t kStateLive = 1;
inline constexpr std::uint16_t kStateQuiesced = 2;

// Command numbers (_IOC_NR) and their ioctl encodings ('u', struct ublksrv_ctrl_cmd). The
// encoded forms are what 6.12 wants (the plain numbers work only with a legacy config option).
inline constexpr unsigned kCmdGetQueueAffinity = 0x01;
inline constexpr unsigned kCmdGetDevInfo = 0x02;
inline constexpr unsigned kCmdAddDev = 0x04;
inline constexpr unsigned kCmdDelDev = 0x05;
inline constexpr unsigned kCmdStartDev = 0x06;
inline constexpr unsigned kCmdStopDev = 0x07;
inline constexpr unsigned kCmdSetParams = 0x08;
inline constexpr unsigned kCmdGetParams = 0x09;
inline constexpr unsigned kCmdStartUserRecovery = 0x10;
inline constexpr unsigned kCmdEndUserRecovery = 0x11;
inline constexpr unsigned kCmdGetFeatures = 0x13;
inline constexpr unsigned kCmdUpdateSize = 0x15;  // 6.16+, with kFlagUpdateSize; data[0]: sectors
inline constexpr unsigned kCmdQuiesceDev = 0x16;  // 6.16+, with kFlagQuiesce; data[0]: timeout ms
inline constexpr unsigned kCmdTryStopDev = 0x17;  // 7.0+, with kFlagSafeStopDev

// Whether the kernel wants _IOR (the command only returns data) or _IOWR for a command.
constexpr bool ctrl_cmd_reads_only(unsigned nr) {
  return nr == kCmdGetQueueAffinity || nr == kCmdGetDevInfo || nr == kCmdGetParams ||
         nr == kCmdGetFeatures;
}
constexpr std::uint32_t ctrl_cmd_op(unsigned nr) {
  return ctrl_cmd_reads_only(nr) ? _IOR('u', nr, CtrlCmd) : _IOWR('u', nr, CtrlCmd);
}

// ---- feature flags (UBLK_F_*) ----
inline constexpr std::uint64_t kFlagZeroCopy = 1ull << 0;  // accepted but cleared before 6.15
inline constexpr std::uint64_t kFlagCompInTask = 1ull << 1;
inline constexpr std::uint64_t kFlagNeedGetData = 1ull << 2;
inline constexpr std::uint64_t kFlagUserRecovery = 1ull << 3;
inline constexpr std::uint64_t kFlagUserRecoveryReissue = 1ull << 4;
inline constexpr std::uint64_t kFlagUnprivileged = 1ull << 5;
inline constexpr std::uint64_t kFlagCmdIoctlEncode = 1ull << 6;
inline constexpr std::uint64_t kFlagUserCopy = 1ull << 7;
// 6.16+, with kFlagZeroCopy: each fetch names a slot of the fetching ring's buffer table
// (sqe->addr: auto_buf_reg_addr()), where the driver registers the request's pages before it
// delivers the request and takes them out at its commit; member I/O then uses them as a fixed
// buffer. The driver copies nothing; with kFlagUserCopy too, pread/pwrite still reach the data.
inline constexpr std::uint64_t kFlagAutoBufReg = 1ull << 11;
// 6.16+ (always on there): any task may serve any tag, not only the queue's.
inline constexpr std::uint64_t kFlagPerIoDaemon = 1ull << 13;
// 7.0+: per-queue PREP_IO_CMDS / FETCH_IO_CMDS / COMMIT_IO_CMDS move many requests per command
// instead of a FETCH_REQ / COMMIT_AND_FETCH_REQ per tag (ublk_batch_queue.h). The driver then
// clears kFlagPerIoDaemon and kFlagNeedGetData.
inline constexpr std::uint64_t kFlagBatchIo = 1ull << 15;
// 6.16+: UPDATE_SIZE changes a started device's capacity (the kernel tells its users).
inline constexpr std::uint64_t kFlagUpdateSize = 1ull << 10;
// 6.16+, with kFlagUserRecovery: QUIESCE_DEV holds new requests and cancels the server's
// fetches; once the server lets go, the device waits (QUIESCED) for the next one.
inline constexpr std::uint64_t kFlagQuiesce = 1ull << 12;
// 7.0+: TRY_STOP_DEV stops the device only while nobody has it open (EBUSY otherwise).
inline constexpr std::uint64_t kFlagSafeStopDev = 1ull << 17;

// ---- parameters (SET_PARAMS / GET_PARAMS) ----
struct ParamBasic {
  std::uint32_t attrs;  // kAttr*
  std::uint8_t logical_bs_shift;
  std::uint8_t physical_bs_shift;
  std::uint8_t io_opt_shift;
  std::uint8_t io_min_shift;
  std::uint32_t max_sectors;
  std::uint32_t chunk_sectors;
  std::uint64_t dev_sectors;
  std::uint64_t virt_boundary_mask;
};
static_assert(sizeof(ParamBasic) == 32);

inline constexpr std::uint32_t kAttrReadOnly = 1u << 0;
inline constexpr std::uint32_t kAttrRotational = 1u << 1;
inline constexpr std::uint32_t kAttrVolatileCache = 1u << 2;
inline constexpr std::uint32_t kAttrFua = 1u << 3;

struct ParamDiscard {
  std::uint32_t discard_alignment;
  std::uint32_t discard_granularity;
  std::uint32_t max_discard_sectors;
  std::uint32_t max_write_zeroes_sectors;
  std::uint16_t max_discard_segments;  // must be 1 when discard is on
  std::uint16_t reserved0;
};
static_assert(sizeof(ParamDiscard) == 20);

struct ParamDevt {  // read-only: GET_PARAMS after START_DEV; never sent with SET_PARAMS
  std::uint32_t char_major, char_minor, disk_major, disk_minor;
};
static_assert(sizeof(ParamDevt) == 16);

struct ParamZoned {
  std::uint32_t max_open_zones, max_active_zones, max_zone_append_sectors;
  std::uint8_t reserved[20];
};
static_assert(sizeof(ParamZoned) == 32);

struct Params {
  std::uint32_t len;    // sizeof(Params) both ways
  std::uint32_t types;  // kParam*
  ParamBasic basic;
  ParamDiscard discard;
  ParamDevt devt;
  ParamZoned zoned;
};
static_assert(sizeof(Params) == 112);

inline constexpr std::uint32_t kParamBasic = 1u << 0;
inline constexpr std::uint32_t kParamDiscard = 1u << 1;
inline constexpr std::uint32_t kParamDevt = 1u << 2;

// ---- I/O, on /dev/ublkcN ----

// A request's descriptor, in the array the queue mmaps from /dev/ublkcN (one per tag).
struct IoDesc {
  std::uint32_t op_flags;  // op in bits 0-7, kIoF* flags above
  std::uint32_t nr_sectors;
  std::uint64_t start_sector;
  std::uint64_t addr;  // the buffer the server gave at fetch (copy mode)
};
static_assert(sizeof(IoDesc) == 24);

inline constexpr std::uint8_t kOpRead = 0;
inline constexpr std::uint8_t kOpWrite = 1;
inline constexpr std::uint8_t kOpFlush = 2;
inline constexpr std::uint8_t kOpDiscard = 3;
inline constexpr std::uint8_t kOpWriteSame = 4;
inline constexpr std::uint8_t kOpWriteZeroes = 5;

inline constexpr std::uint32_t kIoFFua = 1u << 13;
inline constexpr std::uint32_t kIoFNoUnmap = 1u << 15;
// AUTO_BUF_REG with kAutoBufRegFallback: the driver could not register this request's pages
// (the slot was taken): serve it without them (USER_COPY).
inline constexpr std::uint32_t kIoFNeedRegBuf = 1u << 17;

// The sqe->addr of a FETCH_REQ / COMMIT_AND_FETCH_REQ with AUTO_BUF_REG (struct
// ublk_auto_buf_reg): bits 0-15 the slot, 16-23 flags, the rest zero.
inline constexpr std::uint8_t kAutoBufRegFallback =
    1u << 0;  // deliver with kIoFNeedRegBuf instead of failing
constexpr std::uint64_t auto_buf_reg_addr(std::uint16_t slot, std::uint8_t flags) {
  return std::uint64_t{slot} | (std::uint64_t{flags} << 16);
}

struct IoCmd {  // struct ublksrv_io_cmd: in the SQE's command area (16 bytes: fits a normal SQE)
  std::uint16_t q_id;
  std::uint16_t tag;
  std::int32_t result;  // COMMIT: bytes done or -errno
  std::uint64_t addr;   // copy mode: the tag's buffer
};
static_assert(sizeof(IoCmd) == 16);

inline constexpr unsigned kIoFetchReq = 0x20;
inline constexpr unsigned kIoCommitAndFetchReq = 0x21;
constexpr std::uint32_t io_cmd_op(unsigned nr) {
  return _IOWR('u', nr, IoCmd);
}

// ---- BATCH_IO (7.0+) ----
// The command area of PREP_IO_CMDS, COMMIT_IO_CMDS and FETCH_IO_CMDS (struct ublk_batch_io): the
// queue and the element array at sqe->addr (nr_elem of elem_bytes each; FETCH: the tags, 2 bytes
// each, in the provided buffer the kernel picks).
struct BatchIoCmd {
  std::uint16_t q_id;
  std::uint16_t flags;  // kBatchF*; 0 for FETCH
  std::uint16_t nr_elem;
  std::uint8_t elem_bytes;
  std::uint8_t reserved;
  std::uint64_t reserved2;
};
static_assert(sizeof(BatchIoCmd) == 16);

// One element of PREP / COMMIT (struct ublk_elem_header), followed by a u64 buffer address when
// kBatchFHasBufAddr (copy mode: the tag's buffer for its next request). buf_index: with
// AUTO_BUF_REG, the ring slot for the tag's next request; result: COMMIT's bytes or -errno.
struct BatchElemHeader {
  std::uint16_t tag;
  std::uint16_t buf_index;
  std::int32_t result;
};
static_assert(sizeof(BatchElemHeader) == 8);

inline constexpr std::uint16_t kBatchFHasZoneLba = 1u << 0;
inline constexpr std::uint16_t kBatchFHasBufAddr = 1u << 1;
inline constexpr std::uint16_t kBatchFAutoBufRegFallback = 1u << 2;

inline constexpr unsigned kIoPrepIoCmds = 0x25;
inline constexpr unsigned kIoCommitIoCmds = 0x26;
inline constexpr unsigned kIoFetchIoCmds = 0x27;
constexpr std::uint32_t batch_cmd_op(unsigned nr) {
  return _IOWR('u', nr, BatchIoCmd);
}
// At most this many tags in one FETCH_IO_CMDS completion.
inline constexpr std::uint16_t kMaxTagsPerFetchCqe = 128;
// uring_cmd_flags (sqe->rw_flags) of a multishot uring_cmd (6.18+ uapi; FETCH_IO_CMDS needs it).
inline constexpr std::uint32_t kUringCmdMultishot = 1u << 1;

// A fetch's CQE: 0 a new request in the tag's descriptor, kIoResAbort (-ENODEV) the device is
// going away (do not fetch that tag again).
inline constexpr std::int32_t kIoResOk = 0;

// The per-queue descriptor arrays sit at fixed offsets of /dev/ublkcN: queue q's at q times the
// size of the largest possible array (4096 descriptors, rounded up to the kernel's page size:
// 96 KiB with 4 KiB pages, 128 KiB with 64 KiB pages), mapped with its own queue's depth
// (page-rounded too). `page` is sysconf(_SC_PAGESIZE).
inline constexpr unsigned kMaxQueueDepth = 4096;
constexpr std::uint64_t desc_area_stride(std::uint64_t page) {
  return (kMaxQueueDepth * sizeof(IoDesc) + page - 1) / page * page;
}
constexpr std::uint64_t desc_map_bytes(std::uint16_t depth, std::uint64_t page) {
  return (std::uint64_t{depth} * sizeof(IoDesc) + page - 1) / page * page;
}

// USER_COPY: where a tag's request data lies in /dev/ublkcN (pread/pwrite there).
inline constexpr std::uint64_t kUserCopyBase = 0x80000000ull;
inline constexpr unsigned kUserCopyQidShift = 41;
inline constexpr unsigned kUserCopyTagShift = 25;
constexpr std::uint64_t user_copy_offset(std::uint16_t q, std::uint16_t tag, std::uint64_t off) {
  return kUserCopyBase + (std::uint64_t{q} << kUserCopyQidShift) +
         (std::uint64_t{tag} << kUserCopyTagShift) + off;
}

}  // namespace graid::ublk
