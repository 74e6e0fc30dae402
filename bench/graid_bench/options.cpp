#include "options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <bit>
#include <cstdio>

#include "units.h"

namespace graid::bench {

namespace {

constexpr int kUsageError = 2;
constexpr std::uint32_t kMaxThreads = 256;

struct RawArgs {
  std::string level = "5";
  std::uint32_t members = 0;
  std::string strip = "64K";
  std::string member_size;
  std::vector<std::string> profiles;
  std::string span;
  std::string verify_bytes = "64M";
  std::string format = "table";
  std::string journal = "degraded-only";
  double warmup = -1;
};

Status validate(const RawArgs& raw, BenchOptions& o) {
  auto level = parse_raid_level(raw.level);
  if (!level.is_ok()) {
    return make_error(Errc::kInvalidArgument, "--level {}: not a RAID level (use 0, 1, 5, 6 or 10)",
                      raw.level);
  }
  o.level = *level;
  const auto journal = parse_journal_policy(raw.journal);
  if (!journal) {
    return make_error(Errc::kInvalidArgument,
                      "--journal {}: not a journal policy (use off, degraded-only or always)",
                      raw.journal);
  }
  o.journal = *journal;

  auto strip = parse_size(raw.strip, "--strip");
  if (!strip.is_ok()) return strip.status();
  if (!std::has_single_bit(*strip) || *strip < kMinStripBytes || *strip > kMaxStripBytes) {
    return make_error(Errc::kInvalidArgument,
                      "--strip {}: must be a power of two from {} to {} (e.g. 64K)", raw.strip,
                      format_size(kMinStripBytes), format_size(kMaxStripBytes));
  }
  o.strip_bytes = static_cast<std::uint32_t>(*strip);

  // Where the members come from: exactly one of --dir and --member.
  if (o.dir.empty() == o.member_paths.empty()) {
    return Status(Errc::kInvalidArgument,
                  o.dir.empty()
                      ? "give the members: --dir DIR (with --members N) or --member PATH once per "
                        "member"
                      : "--dir and --member exclude each other: pick one");
  }
  if (!o.dir.empty()) {
    if (raw.members == 0) {
      return make_error(Errc::kInvalidArgument, "--dir needs --members N (how many files to make)");
    }
    o.members = raw.members;
  } else {
    const auto given = static_cast<std::uint32_t>(o.member_paths.size());
    if (raw.members != 0 && raw.members != given) {
      return make_error(Errc::kInvalidArgument, "--members {} but {} --member paths were given",
                        raw.members, given);
    }
    o.members = given;
    // The raw baseline writes over the members before the array (and its check for a live
    // superblock) exists, so consent has to come first.
    if (!o.force) {
      return make_error(Errc::kInvalidArgument,
                        "--member: graid-bench overwrites the contents of {}{}; add --force to "
                        "confirm",
                        o.member_paths.front(), given > 1 ? " and the other members" : "");
    }
    std::vector<std::string> sorted = o.member_paths;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      return make_error(Errc::kInvalidArgument, "--member: the same path is given twice");
    }
  }
  auto geometry = Geometry::make(o.level, o.members, o.strip_bytes);
  if (!geometry.is_ok()) {
    return make_error(Errc::kInvalidArgument, "--level {} with {} members and --strip {}: {}",
                      raw.level, o.members, raw.strip, geometry.status().message());
  }

  if (raw.member_size.empty()) {
    if (!o.dir.empty()) o.member_size = 1ull << 30;  // the default for created files
  } else {
    auto size = parse_size(raw.member_size, "--member-size");
    if (!size.is_ok()) return size.status();
    o.member_size = *size;
  }
  const std::uint64_t min_member = std::max<std::uint64_t>(kMinMemberBytes, 16ull * o.strip_bytes);
  if (o.member_size != 0 && o.member_size < min_member) {
    return make_error(Errc::kInvalidArgument,
                      "--member-size {}: too small; members need at least {} with --strip {}",
                      raw.member_size, format_size(min_member), raw.strip);
  }
  if (o.member_size % 4096 != 0) {
    return make_error(Errc::kInvalidArgument, "--member-size {}: must be a multiple of 4K",
                      raw.member_size);
  }

  auto profiles = resolve_profiles(raw.profiles.empty() ? std::vector<std::string>{"4k-randread"}
                                                        : raw.profiles);
  if (!profiles.is_ok()) return profiles.status();
  o.profiles = std::move(*profiles);

  if (o.queue_depth == 0 || o.queue_depth > kMaxQueueDepth) {
    return make_error(Errc::kInvalidArgument, "--qd {}: must be 1 to {}", o.queue_depth,
                      kMaxQueueDepth);
  }
  if (o.raw_queue_depth > kMaxQueueDepth) {
    return make_error(Errc::kInvalidArgument, "--raw-qd {}: must be 1 to {}", o.raw_queue_depth,
                      kMaxQueueDepth);
  }
  if (o.rounds == 0 || o.rounds > 100) {
    return make_error(Errc::kInvalidArgument, "--rounds {}: must be 1 to 100", o.rounds);
  }
  if (o.threads == 0 || o.threads > kMaxThreads) {
    return make_error(Errc::kInvalidArgument, "--threads {}: must be 1 to {}", o.threads,
                      kMaxThreads);
  }
  if (!(o.seconds > 0) || o.seconds > 86400) {
    return make_error(Errc::kInvalidArgument,
                      "--seconds {}: must be more than 0 (and at most a day)", o.seconds);
  }
  // Default warm-up: 10 % of the run, at most 1 s; it is not counted.
  o.warmup_seconds = raw.warmup < 0 ? std::min(1.0, o.seconds / 10) : raw.warmup;
  if (o.warmup_seconds > 3600) {
    return make_error(Errc::kInvalidArgument, "--warmup {}: at most an hour", raw.warmup);
  }
  if (!raw.span.empty()) {
    auto span = parse_size(raw.span, "--span");
    if (!span.is_ok()) return span.status();
    o.span = *span;
  }
  auto verify_bytes = parse_size(raw.verify_bytes, "--verify-bytes");
  if (!verify_bytes.is_ok()) return verify_bytes.status();
  o.verify_bytes = *verify_bytes;
  o.format = raw.format == "json" ? OutputFormat::kJson : OutputFormat::kTable;
  if (o.target_iops < 0 || o.target_iops > 1e9) {
    return make_error(Errc::kInvalidArgument, "--rate {}: must be 0 (closed loop) to 1e9",
                      o.target_iops);
  }
  if (o.raw_only && o.verify) {
    return make_error(Errc::kInvalidArgument,
                      "--verify checks the array; it cannot go with --raw-only");
  }
  return Status::ok();
}

}  // namespace

std::variant<BenchOptions, int> parse_command_line(int argc, char** argv) {
  BenchOptions o;
  RawArgs raw;
  CLI::App app{
      "graid-bench: measures a graid array against the raw capacity of its own members.\n"
      "For every profile it first runs io_uring straight on the members at the member-level\n"
      "read/write mix the profile costs at this RAID level (the limit), then the same profile\n"
      "through the array, and reports IOPS, MB/s, latency percentiles, CPU per GB and the ratio\n"
      "to the limit. Member contents are overwritten.",
      "graid-bench"};
  app.add_option("--level", raw.level, "RAID level: 0, 1, 5, 6 or 10")->capture_default_str();
  app.add_option("--members", raw.members, "number of member files to create in --dir");
  app.add_option("--strip", raw.strip, "strip (chunk) size, a power of two, e.g. 64K")
      ->capture_default_str();
  app.add_option("--dir", o.dir,
                 "directory to create member-N.img files in (tmpfs such as /dev/shm: nearly "
                 "free I/O, so the engine's own cost shows)");
  app.add_option("--member", o.member_paths,
                 "existing file or block device to use as a member (repeat, in order); its "
                 "contents are destroyed");
  app.add_option("--member-size", raw.member_size,
                 "bytes per member, with K/M/G suffix (default 1G for --dir; whole device for "
                 "--member)");
  app.add_option("--backend", o.backend,
                 "parity backend: cpu, ref, cuda (needs a GPU) or auto (cuda when a GPU is "
                 "usable, else cpu)")
      ->capture_default_str();
  app.add_option("--journal", raw.journal,
                 "write-hole journal policy of the RAID5/6 array: off, degraded-only (journals "
                 "nothing while the array is optimal) or always")
      ->capture_default_str();
  app.add_option(
      "--profile", raw.profiles,
      "workload profile(s): 4k-randread, 4k-randwrite, 64k-randwrite, 64k-seqread, "
      "64k-seqwrite, 1m-seqread, 1m-seqwrite, 8k-randrw70/80/90, 16k-randrw60, or all; repeat or "
      "separate with commas (default 4k-randread)");
  app.add_option("--qd", o.queue_depth, "requests in flight per thread")->capture_default_str();
  app.add_option("--raw-qd", o.raw_queue_depth,
                 "member I/Os in flight per thread in the raw baseline (default: the best of a "
                 "short sweep around --qd times the member I/Os one request issues at once: half, "
                 "the same, twice and four times that)");
  app.add_option("--threads", o.threads, "I/O threads, each with its own ring and queue")
      ->capture_default_str();
  app.add_option("--seconds", o.seconds,
                 "measured seconds per profile and phase, split among the --rounds")
      ->capture_default_str();
  app.add_option("--rounds", o.rounds,
                 "rounds per profile: raw and array phases alternate, and the round with the "
                 "median ratio is reported (all rounds' ratios are in the JSON)")
      ->capture_default_str();
  app.add_option("--warmup", raw.warmup,
                 "seconds of warm-up before measuring (default: 10 % of --seconds, at most 1)");
  app.add_option("--span", raw.span,
                 "array bytes the workload covers, from offset 0 (default: all)");
  app.add_option("--format", raw.format, "output: table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  app.add_flag("--keep", o.keep, "keep the member files created in --dir");
  app.add_flag("--raw-only", o.raw_only, "measure only the raw members, not the array");
  app.add_flag("--batcher", o.batcher,
               "send parity through the asynchronous batcher (jobs of all threads batched, the "
               "backend as its device, cpu as fallback) instead of each thread calling the "
               "backend");
  app.add_option("--parity-workers", o.parity_workers,
                 "send the I/O threads' parity to a ParityWorker of this many threads (the "
                 "backend run off the I/O threads) instead of each thread calling the backend; "
                 "0: inline (default)")
      ->check(CLI::Range(0, 16))
      ->excludes("--batcher");
  app.add_flag("--verify", o.verify,
               "after each profile, write a pattern through the array and read it back");
  app.add_option("--verify-bytes", raw.verify_bytes, "bytes --verify checks (default 64M)");
  app.add_flag("--force", o.force,
               "required with --member: confirms that the members' contents (graid superblocks "
               "included) may be overwritten");
  app.add_option("--rate", o.target_iops,
                 "open loop: array requests per second (all threads), at most --qd in flight per "
                 "thread, latency counted from when each was due (default: closed loop)");
  app.add_option("--seed", o.seed, "seed of the offset and data generators")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (Status status = validate(raw, o); !status.is_ok()) {
    std::fprintf(stderr, "graid-bench: %s\n", status.message().c_str());
    return kUsageError;
  }
  return o;
}

}  // namespace graid::bench
