// Registry: the daemon-wide queries and settings (describe controller, list event, stats,
// edit dg).
#include <unistd.h>

#include <ctime>

#include "graidd/metrics_text.h"
#include "graidd/registry.h"
#include "graidd/request_args.h"
#include "kernels/batcher.h"
#include "kernels/cuda_backend.h"

namespace graid::daemon {

using nlohmann::json;

namespace {

json opt(const std::optional<std::uint32_t>& v) {
  return v ? json(*v) : json(nullptr);
}

json buckets(const std::array<std::uint64_t, kLatencyBuckets>& b) {
  return json(std::vector<std::uint64_t>(b.begin(), b.end()));
}

}  // namespace

Result<json> Registry::describe_controller(const json&) {
  json j;
  j["version"] = options_.version;
  j["pid"] = ::getpid();
  j["uptime_s"] =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_)
          .count();
  j["io_threads"] = threads_.count();
  j["socket"] = options_.socket_path;
  j["state_dir"] = options_.state_dir;
  const auto& p = options_.parity;
  j["parity"] = {
      {"backend", p.backend->name()}, {"requested", p.requested},
      {"reason", p.reason},           {"gpu", p.gpu.empty() ? json(nullptr) : json(p.gpu)},
      {"foreground", p.foreground},   {"jobs", p.jobs}};
  std::uint64_t batches = 0, jobs = 0, fallbacks = 0;
  for (const auto& [id, dg] : dgs_) {
    if (!dg.array) continue;
    const auto s = dg.array->stats();
    batches += s.totals.parity_batches;
    jobs += s.totals.parity_jobs;
    fallbacks += s.totals.parity_batch_failures;
  }
  if (p.cuda != nullptr) {
    const auto cs = p.cuda->stats();
    j["parity"]["device_batches"] = cs.device_batches;
    j["parity"]["cpu_batches"] = cs.cpu_batches;
    j["parity"]["dead"] = p.cuda->dead();
    fallbacks += cs.cpu_batches;
  }
  if (p.batcher != nullptr) {
    const auto bs = p.batcher->stats();
    j["parity"]["batcher"] = {{"device_jobs", bs.device_jobs},
                              {"cpu_small_jobs", bs.cpu_small_jobs},
                              {"cpu_failover_jobs", bs.cpu_failover_jobs},
                              {"device_failures", bs.device_failures}};
  }
  // ublk devices of this graidd's that it does not serve (docs/ublk.md, "Owned-device
  // discovery"), whatever their DG.
  json held = json::array();
  for (const HeldUblk& h : ublk_.held())
    held.push_back({{"dg_id", h.dg_id},
                    {"vd_id", h.vd_id},
                    {"dev_id", h.dev_id},
                    {"device", h.path},
                    {"state", ublk_state_name(h.state)},
                    {"reason", held_reason(h)}});
  j["held_ublk"] = std::move(held);
  // What the kernel's ublk driver offers (GET_FEATURES), by name; graidd asks for USER_RECOVERY,
  // its REISSUE, CMD_IOCTL_ENCODE, USER_COPY (--ublk-copy user), UPDATE_SIZE, QUIESCE and
  // SAFE_STOP_DEV where offered (docs/ublk.md).
  if (const auto features = ublk_.features())
    j["ublk"] = {{"available", true}, {"features", ublk::flag_names(*features)}, {"reason", ""}};
  else
    j["ublk"] = {
        {"available", false}, {"features", json::array()}, {"reason", ublk_.unavailable()}};
  j["batches"] = batches;
  j["jobs"] = jobs;
  j["fallbacks"] = fallbacks;
  j["metrics"] = options_.metrics_address.empty()
                     ? json(nullptr)
                     : json(fmt::format("http://{}/metrics", options_.metrics_address));
  // Alert hooks (docs/monitoring.md): null without --event-program.
  if (const EventHooks* hooks = options_.event_hooks) {
    const EventHookStats s = hooks->stats();
    j["event_hooks"] = {{"program", hooks->program()},
                        {"ran", s.ran},
                        {"failed", s.failed},
                        {"timed_out", s.timed_out},
                        {"lost", s.lost}};
  } else {
    j["event_hooks"] = nullptr;
  }
  return j;
}

Result<json> Registry::list_event(const json& args) {
  const std::uint64_t since = arg_opt_u64(args, "since").value_or(0);
  const auto q = events_.since(since);
  json list = json::array();
  for (const auto& e : q.events) {
    list.push_back({{"seq", e.seq},
                    {"time", rfc3339(e.time)},
                    {"severity", severity_name(e.severity)},
                    {"kind", e.kind},
                    {"dg_id", opt(e.dg_id)},
                    {"pd_id", opt(e.pd_id)},
                    {"vd_id", opt(e.vd_id)},
                    {"slot", opt(e.slot)},
                    {"message", e.message}});
  }
  return json{{"events", list}, {"next_seq", q.next_seq}, {"dropped", q.dropped}};
}

Result<json> Registry::test_event(const json& args) {
  const std::string message = arg_string(args, "message", "a test event (graidctl events test)");
  if (message.size() > 1024) throw BadArguments("message: at most 1024 bytes");
  const std::uint64_t seq = events_.add("test", std::nullopt, std::nullopt, std::nullopt, message);
  return json{{"seq", seq}};
}

json Registry::member_io(const ArrayStats& s, const Dg& dg) const {
  json members = json::array();
  for (std::uint32_t slot = 0; slot < s.members.size(); ++slot) {
    const MemberIoStats& m = s.members[slot];
    std::array<std::uint64_t, kLatencyBuckets> lat{};
    std::copy(m.latency.begin(), m.latency.end(), lat.begin());
    const std::optional<std::uint32_t> pd = pd_at_slot(dg.id, slot);
    members.push_back({{"slot", slot},
                       {"pd_id", pd ? json(*pd) : json(nullptr)},
                       {"reads", m.reads},
                       {"writes", m.writes},
                       {"flushes", m.flushes},
                       {"discards", m.discards},
                       {"read_bytes", m.read_bytes},
                       {"write_bytes", m.write_bytes},
                       {"read_errors", m.read_errors},
                       {"write_errors", m.write_errors},
                       {"flush_errors", m.flush_errors},
                       {"discard_errors", m.discard_errors},
                       {"latency_us_buckets", buckets(lat)}});
  }
  return members;
}

Result<json> Registry::stats(const json&) {
  json dgs = json::array(), vds = json::array();
  for (const auto& [id, dg] : dgs_) {
    if (!dg.array) continue;
    const auto s = dg.array->stats();
    std::uint64_t reads = 0, writes = 0, rbytes = 0, wbytes = 0;
    std::array<std::uint64_t, kLatencyBuckets> lat{};
    for (const auto& vd : dg.array->vds()) {
      std::uint64_t r = 0, w = 0, rb = 0, wb = 0, fl = 0, err = 0, lsum = 0;
      std::array<std::uint64_t, kLatencyBuckets> vl{};
      if (auto it = vd_counters_.find({id, vd.id}); it != vd_counters_.end()) {
        const auto& c = *it->second;
        r = c.reads.load(std::memory_order_relaxed);
        w = c.writes.load(std::memory_order_relaxed);
        rb = c.read_bytes.load(std::memory_order_relaxed);
        wb = c.write_bytes.load(std::memory_order_relaxed);
        fl = c.flushes.load(std::memory_order_relaxed);
        err = c.errors.load(std::memory_order_relaxed);
        for (std::size_t i = 0; i < kLatencyBuckets; ++i)
          vl[i] = c.latency[i].load(std::memory_order_relaxed);
        lsum = c.latency_sum_us.load(std::memory_order_relaxed);
      }
      reads += r;
      writes += w;
      rbytes += rb;
      wbytes += wb;
      for (std::size_t i = 0; i < kLatencyBuckets; ++i)
        lat[i] += vl[i];
      json entry = {
          {"dg_id", id},           {"vd_id", vd.id},   {"reads", r},
          {"writes", w},           {"read_bytes", rb}, {"write_bytes", wb},
          {"flushes", fl},         {"errors", err},    {"latency_us_buckets", buckets(vl)},
          {"latency_us_sum", lsum}};
      if (auto u = ublk_.stats(id, vd.id))
        entry["ublk"] = {{"requests", u->requests},
                         {"reads", u->reads},
                         {"writes", u->writes},
                         {"flushes", u->flushes},
                         {"discards", u->discards},
                         {"write_zeroes", u->write_zeroes},
                         {"read_bytes", u->read_bytes},
                         {"write_bytes", u->write_bytes},
                         {"commits", u->commits},
                         {"errors", u->errors},
                         {"unsupported", u->unsupported},
                         {"copy_errors", u->copy_errors},
                         {"aborted_tags", u->aborted_tags},
                         {"spread", u->spread},
                         {"zero_copy_reads", u->zero_copy_reads},
                         {"zero_copy_writes", u->zero_copy_writes},
                         {"zero_copy_fallbacks", u->zero_copy_fallbacks}};
      vds.push_back(std::move(entry));
    }
    dgs.push_back({{"dg_id", id},
                   {"reads", reads},
                   {"writes", writes},
                   {"read_bytes", rbytes},
                   {"write_bytes", wbytes},
                   {"degraded_reads", s.totals.degraded_reads},
                   {"stripe_writes", s.totals.stripe_writes},
                   {"write_plans",
                    {{"full_stripe", s.totals.full_stripe},
                     {"reconstruct_write", s.totals.reconstruct_write},
                     {"read_modify_write", s.totals.read_modify_write},
                     {"degraded_write", s.totals.degraded_write},
                     {"coalesced", s.totals.coalesced},
                     {"coalesced_waiting", s.totals.coalesced_waiting},
                     {"stripe_runs", s.totals.stripe_runs},
                     {"run_stripes", s.totals.run_stripes}}},
                   {"latency_us_buckets", buckets(lat)},
                   {"members", member_io(s, dg)}});
  }
  // Each I/O thread's ring counters, read on the thread itself (they are its own, unshared).
  // enters / requests served says how well one system call carries many requests.
  json io_threads = json::array();
  for (std::uint32_t i = 0; i < threads_.count(); ++i) {
    IoStats st;
    threads_.call(i, [&st](IoContext& ctx) { st = ctx.stats(); });
    io_threads.push_back({{"thread", i},
                          {"submitted", st.submitted},
                          {"sqes", st.sqes},
                          {"enters", st.enters},
                          {"commands", st.commands},
                          {"fixed_buffer_ios", st.fixed_buffer_ios},
                          {"fixed_file_ios", st.fixed_file_ios},
                          {"short_resubmits", st.short_resubmits},
                          {"again_retries", st.again_retries},
                          {"sq_full", st.sq_full}});
  }
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  return json{{"time_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()},
              {"dgs", dgs},
              {"vds", vds},
              {"io_threads", io_threads}};
}

Result<json> Registry::edit_dg(const json& args) {
  const std::string key = arg_required_string(args, "key");
  if (key == "force_online") {
    auto offline = find_dg(args);
    if (!offline.is_ok()) return offline.status();
    return force_online(**offline, arg_bool(args, "confirm"));
  }
  auto found = find_dg(args, /*need_online=*/true);
  if (!found.is_ok()) return found.status();
  Dg& dg = **found;
  const std::string value = arg_required_string(args, "value");
  ArraySettings s = dg.array->settings();
  BackgroundSpeed* speed = key == "rebuild_speed"  ? &s.rebuild_speed
                           : key == "init_speed"   ? &s.init_speed
                           : key == "check_speed"  ? &s.check_speed
                           : key == "resync_speed" ? &s.resync_speed
                                                   : nullptr;
  if (speed != nullptr) {
    auto v = parse_background_speed(value);
    if (!v)
      return make_error(Errc::kInvalidArgument,
                        "{} must be low, normal, high or extreme, not \"{}\"", key, value);
    *speed = *v;
  } else if (key == "journal") {
    auto v = parse_journal_policy(value);
    if (!v)
      return make_error(Errc::kInvalidArgument,
                        "journal must be off, degraded-only or always, not \"{}\"", value);
    s.journal_policy = *v;
  } else {
    return make_error(Errc::kInvalidArgument,
                      "unknown dg setting \"{}\" (rebuild_speed, init_speed, check_speed, "
                      "resync_speed, journal)",
                      key);
  }
  auto st = dg.array->set_settings(s);
  if (!st) return st;
  events_.add("settings_changed", dg.id, std::nullopt, std::nullopt,
              fmt::format("{} = {}", key, value));
  return dg_json(dg, true);
}

std::string Registry::metrics() {
  refresh();
  MetricsSnapshot s;
  if (auto cx = describe_controller(json::object()); cx.is_ok()) s.controller = std::move(*cx);
  if (auto dgs = list_dg(json::object()); dgs.is_ok()) {
    for (const json& dg : *dgs)
      if (auto d = describe_dg({{"dg_id", dg["dg_id"]}}); d.is_ok()) s.dgs.push_back(std::move(*d));
  }
  if (auto pds = list_pd(json::object()); pds.is_ok()) s.pds = std::move(*pds);
  if (auto st = stats(json::object()); st.is_ok()) s.stats = std::move(*st);
  s.events = events_.added_by_severity();
  s.last_seq = events_.since(std::numeric_limits<std::uint64_t>::max(), 0).next_seq - 1;
  return render_metrics(s);
}

}  // namespace graid::daemon
