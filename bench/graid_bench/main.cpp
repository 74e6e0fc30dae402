// graid-bench: the engine's own fio. For each profile it measures the raw capacity of the members
// (raw_baseline.h), then the array on the same members (array_run.h), and reports both with the
// ratio of the array to the limit the members impose (cost_model.h).
//
// Order of work: validate everything, prepare the members, run every raw baseline, then create
// the array and run every profile through it. The raw runs come first because they write to the
// members directly, which must not happen under a live array.
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "array_session.h"
#include "backend.h"
#include "cost_model.h"
#include "graid/parity.h"
#include "interrupt.h"
#include "member_files.h"
#include "options.h"
#include "profile_run.h"
#include "report.h"
#include "suite.h"
#include "suite_options.h"
#include "units.h"
#include "verify.h"

namespace graid::bench {

namespace {

constexpr int kRunError = 1;

int fail(const Status& status) {
  std::fprintf(stderr, "graid-bench: %s\n", status.message().c_str());
  return kRunError;
}

TimedRunConfig timing_of(const BenchOptions& o) {
  return TimedRunConfig{o.threads, o.warmup_seconds, o.seconds};
}

// Array bytes the workload covers: --span, or all the array holds within the member bytes the
// raw baseline used (an existing device may hold more than --member-size). `capacity` is the
// array's, or before it exists the most the members could give.
Result<std::uint64_t> choose_span(const BenchOptions& o, const Geometry& g, std::uint64_t capacity,
                                  std::uint64_t member_bytes) {
  const std::uint64_t usable = std::min(capacity, g.data_capacity(member_bytes));
  const std::uint64_t span = o.span ? o.span : usable;
  if (span > capacity) {
    return make_error(Errc::kOutOfRange, "--span {}: larger than the array's {} data bytes ({})",
                      format_size(o.span), capacity, format_bytes(capacity));
  }
  std::uint32_t largest = 0;
  for (const Profile& p : o.profiles)
    largest = std::max(largest, p.block_bytes);
  if (span / largest < o.threads) {
    return make_error(Errc::kInvalidArgument,
                      "a span of {} is too small for {} threads of {}-byte requests",
                      format_bytes(span), o.threads, largest);
  }
  return span;
}

int run(const BenchOptions& o) {
  auto geometry = Geometry::make(o.level, o.members, o.strip_bytes);
  if (!geometry.is_ok()) return fail(geometry.status());
  // Check the backend name before making gigabytes of member files. "auto": cuda when a GPU
  // is usable, else cpu, and say why.
  std::string backend_choice = o.backend;
  if (backend_choice == "auto") {
    auto cuda = open_backend("cuda");
    backend_choice = cuda.is_ok() ? "cuda" : "cpu";
    if (!cuda.is_ok()) {
      std::fprintf(stderr, "graid-bench: --backend auto: parity on the cpu (%s)\n",
                   cuda.status().message().c_str());
    }
  }
  std::string backend_name = backend_choice;
  {
    auto backend = open_backend(backend_choice);
    if (!backend.is_ok()) {
      return fail(make_error(Errc::kInvalidArgument, "--backend {}: {}", backend_choice,
                             backend.status().message()));
    }
    backend_name = std::string((*backend)->name());
  }

  auto members = o.dir.empty() ? MemberSet::use_existing(o.member_paths, o.member_size)
                               : MemberSet::create_in_dir(o.dir, o.members, o.member_size, o.keep);
  if (!members.is_ok()) return fail(members.status());
  if (members->member_bytes() < kMinMemberBytes) {
    return fail(make_error(Errc::kInvalidArgument, "members hold {} bytes; at least {} needed",
                           members->member_bytes(), kMinMemberBytes));
  }

  // Refuse a bad --span before spending minutes on the raw baseline; the array's own capacity
  // (smaller by its metadata) is checked again once it exists.
  const std::uint64_t most = geometry->data_capacity(members->member_bytes());
  if (auto span = choose_span(o, *geometry, most, members->member_bytes()); !span.is_ok()) {
    return fail(span.status());
  }

  // With --span the raw baseline keeps to the member bytes that span maps to (span / k per
  // member, whole strips), so both sides work on the same amount of memory or media.
  std::uint64_t raw_member_bytes = members->member_bytes();
  if (o.span != 0) {
    const std::uint64_t strip = o.strip_bytes;
    const std::uint64_t per_member =
        (o.span + geometry->data_strips() - 1) / geometry->data_strips();
    raw_member_bytes = std::min(raw_member_bytes, (per_member + strip - 1) / strip * strip);
  }

  RunSetup setup;
  setup.level = std::string(raid_level_name(o.level));
  setup.members = o.members;
  setup.strip_bytes = o.strip_bytes;
  setup.member_bytes = members->member_bytes();
  setup.backend = backend_name;
  setup.threads = o.threads;
  setup.queue_depth = o.queue_depth;
  setup.raw_queue_depth = o.raw_queue_depth;
  setup.seconds = o.seconds;
  setup.warmup_seconds = o.warmup_seconds;
  setup.rounds = o.rounds;

  // The array exists before any measurement, and the raw baseline keeps to the members' data
  // areas (its superblock and bitmap stay untouched). So raw and array phases can alternate, in
  // --rounds rounds per profile: background load on a shared machine then hits both sides
  // alike, and the reported ratio is the median of the rounds' ratios.
  std::unique_ptr<ArraySession> session;
  std::uint64_t raw_offset = 0;
  if (!o.raw_only) {
    auto created =
        ArraySession::create(ArraySpec{members->paths(), o.level, o.strip_bytes, backend_choice,
                                       o.force, o.batcher, o.parity_workers, o.journal});
    if (!created.is_ok()) return fail(created.status());
    session = std::move(*created);
    auto span = choose_span(o, *geometry, session->capacity(), members->member_bytes());
    if (!span.is_ok()) return fail(span.status());
    setup.span = *span;
    setup.backend = session->backend_name();
    setup.device = session->parity_device();
    raw_offset = session->data_offset();
  }

  std::vector<ProfileReport> reports;
  for (std::size_t i = 0; i < o.profiles.size(); ++i) {
    const Profile& profile = o.profiles[i];
    MeasureConfig measure;
    measure.paths = members->paths();
    measure.raw_offset = raw_offset;
    measure.raw_bytes = raw_member_bytes - raw_offset;
    measure.session = session.get();
    measure.span = setup.span;
    measure.queue_depth = o.queue_depth;
    measure.raw_queue_depth = o.raw_queue_depth;
    measure.timing = timing_of(o);
    measure.rounds = o.rounds;
    measure.seed = o.seed;
    measure.target_iops = o.target_iops;
    auto measured = measure_profile(measure, profile, member_ios_per_array_io(*geometry, profile));
    if (!measured.is_ok()) return fail(measured.status());
    ProfileReport r = std::move(*measured);
    if (session && o.verify) {
      VerifyConfig check{std::min(setup.span, o.verify_bytes), profile.block_bytes, o.queue_depth,
                         o.seed + i + 1};
      auto result = verify_array(*session, check);
      if (!result.is_ok()) return fail(result.status());
      r.verify = *result;
    }
    reports.push_back(std::move(r));
  }
  if (session) {
    if (Status status = session->stop(); !status.is_ok()) return fail(status);
  }

  if (o.format == OutputFormat::kJson) {
    std::puts(to_json(setup, reports).c_str());
  } else {
    print_table(stdout, setup, reports);
  }
  const bool mismatch = std::any_of(reports.begin(), reports.end(), [](const ProfileReport& r) {
    return r.verify && r.verify->mismatched_blocks > 0;
  });
  if (mismatch) {
    std::fprintf(stderr, "graid-bench: --verify found mismatched blocks\n");
    return kRunError;
  }
  return 0;
}

}  // namespace

}  // namespace graid::bench

int main(int argc, char** argv) {
  try {
    // The engine logs through spdlog's default logger, which writes to stdout; stdout carries
    // the table or JSON, so the engine's messages go to stderr instead.
    spdlog::set_default_logger(spdlog::stderr_color_mt("graid-bench"));
    graid::bench::install_interrupt_handlers();
    if (argc > 1 && std::string_view(argv[1]) == "suite") {
      auto suite = graid::bench::parse_suite_command_line(argc, argv);
      if (const int* code = std::get_if<int>(&suite)) return *code;
      std::string command = "graid-bench";
      for (int i = 1; i < argc; ++i) {
        command += ' ';
        command += argv[i];
      }
      return graid::bench::run_suite(std::get<graid::bench::SuiteOptions>(suite), command);
    }
    auto parsed = graid::bench::parse_command_line(argc, argv);
    if (const int* code = std::get_if<int>(&parsed)) return *code;
    return graid::bench::run(std::get<graid::bench::BenchOptions>(parsed));
  } catch (const std::exception& e) {
    // Only the control path can throw (allocation, formatting, JSON); report it plainly.
    std::fprintf(stderr, "graid-bench: %s\n", e.what());
    return 1;
  }
}
