// Drive-group settings: their names, their on-disk codes (meta::StoredSettings) and recording them
// in the superblocks.
#include "array/array_settings.h"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "state/array_state.h"

namespace graid {
namespace {

constexpr std::array<std::pair<BackgroundSpeed, std::string_view>, 4> kSpeedNames = {{
    {BackgroundSpeed::kLow, "low"},
    {BackgroundSpeed::kNormal, "normal"},
    {BackgroundSpeed::kHigh, "high"},
    {BackgroundSpeed::kExtreme, "extreme"},
}};
constexpr std::array<std::pair<JournalPolicy, std::string_view>, 3> kJournalNames = {{
    {JournalPolicy::kOff, "off"},
    {JournalPolicy::kDegradedOnly, "degraded-only"},
    {JournalPolicy::kAlways, "always"},
}};

// On-disk codes are the enum value + 1; 0 is "unset".
static_assert(static_cast<std::uint8_t>(BackgroundSpeed::kExtreme) + 1 == meta::kMaxSpeedCode);
static_assert(static_cast<std::uint8_t>(JournalPolicy::kAlways) + 1 == meta::kMaxJournalCode);

bool valid(BackgroundSpeed speed) noexcept {
  return static_cast<std::uint8_t>(speed) < meta::kMaxSpeedCode;
}
bool valid(JournalPolicy policy) noexcept {
  return static_cast<std::uint8_t>(policy) < meta::kMaxJournalCode;
}

std::uint8_t code(BackgroundSpeed speed) noexcept {
  return static_cast<std::uint8_t>(static_cast<std::uint8_t>(speed) + 1);
}
std::uint8_t code(JournalPolicy policy) noexcept {
  return static_cast<std::uint8_t>(static_cast<std::uint8_t>(policy) + 1);
}

// REQUIRES: stored <= meta::kMaxSpeedCode (decode and validate check it).
BackgroundSpeed speed_of(std::uint8_t stored, BackgroundSpeed fallback) noexcept {
  return stored == meta::kSettingUnset ? fallback : static_cast<BackgroundSpeed>(stored - 1);
}
JournalPolicy journal_of(std::uint8_t stored, JournalPolicy fallback) noexcept {
  return stored == meta::kSettingUnset ? fallback : static_cast<JournalPolicy>(stored - 1);
}

}  // namespace

std::string_view background_speed_name(BackgroundSpeed speed) noexcept {
  for (const auto& [value, name] : kSpeedNames) {
    if (value == speed) return name;
  }
  return "unknown";
}

std::optional<BackgroundSpeed> parse_background_speed(std::string_view name) noexcept {
  for (const auto& [value, text] : kSpeedNames) {
    if (text == name) return value;
  }
  return std::nullopt;
}

std::string_view journal_policy_name(JournalPolicy policy) noexcept {
  for (const auto& [value, name] : kJournalNames) {
    if (value == policy) return name;
  }
  return "unknown";
}

std::optional<JournalPolicy> parse_journal_policy(std::string_view name) noexcept {
  for (const auto& [value, text] : kJournalNames) {
    if (text == name) return value;
  }
  return std::nullopt;
}

Result<meta::StoredSettings> stored_settings(const ArraySettings& settings) {
  const std::pair<BackgroundSpeed, const char*> speeds[] = {{settings.rebuild_speed, "rebuild"},
                                                            {settings.init_speed, "init"},
                                                            {settings.check_speed, "check"},
                                                            {settings.resync_speed, "resync"}};
  for (const auto& [speed, what] : speeds) {
    if (!valid(speed)) {
      return make_error(Errc::kInvalidArgument, "{} speed value {} is not a BackgroundSpeed", what,
                        static_cast<unsigned>(speed));
    }
  }
  if (!valid(settings.journal_policy)) {
    return make_error(Errc::kInvalidArgument, "journal policy value {} is not a JournalPolicy",
                      static_cast<unsigned>(settings.journal_policy));
  }
  meta::StoredSettings out;
  out.rebuild_speed = code(settings.rebuild_speed);
  out.init_speed = code(settings.init_speed);
  out.check_speed = code(settings.check_speed);
  out.resync_speed = code(settings.resync_speed);
  out.journal_policy = code(settings.journal_policy);
  return out;
}

ArraySettings array_settings(const meta::StoredSettings& stored) noexcept {
  const ArraySettings defaults;
  ArraySettings out;
  out.rebuild_speed = speed_of(stored.rebuild_speed, defaults.rebuild_speed);
  out.init_speed = speed_of(stored.init_speed, defaults.init_speed);
  out.check_speed = speed_of(stored.check_speed, defaults.check_speed);
  out.resync_speed = speed_of(stored.resync_speed, defaults.resync_speed);
  out.journal_policy = journal_of(stored.journal_policy, defaults.journal_policy);
  return out;
}

ArraySettings Array::settings() const {
  MutexLock guard(state_->control_mutex);
  return array_settings(state_->sb.settings);
}

Status Array::set_settings(const ArraySettings& settings) {
  auto stored = stored_settings(settings);
  if (!stored) return stored.status();
  State& s = *state_;
  {
    MutexLock guard(s.control_mutex);
    if (s.sb.settings == *stored) return Status::ok();
    s.sb.settings = *stored;
    s.journal_policy.store(settings.journal_policy, std::memory_order_release);
    s.activate_journal();  // recorded (with whether it covers every update) just below
    GRAID_RETURN_IF_ERROR(s.write_superblocks_locked());
    spdlog::info(
        "graid: array '{}': settings recorded: rebuild {}, init {}, check {}, resync {}, journal "
        "{}",
        s.name, background_speed_name(settings.rebuild_speed),
        background_speed_name(settings.init_speed), background_speed_name(settings.check_speed),
        background_speed_name(settings.resync_speed), journal_policy_name(settings.journal_policy));
  }
  return s.turn_journal_off_if_unwanted();
}

void Array::State::activate_journal(bool degrading) {
  if (!journal) return;
  const JournalPolicy p = journal_policy.load(std::memory_order_acquire);
  const bool wanted = p == JournalPolicy::kAlways ||
                      (p == JournalPolicy::kDegradedOnly &&
                       (degrading || failed_count.load(std::memory_order_acquire) > 0));
  if (!wanted || !journal->activate()) return;
  // On from off: updates that decided on no record before this may still be in flight. Coverage
  // is pending until none is. The count is read after the turn-on and the pending flag, and an
  // update counts itself in before it asks whether the journal is on and out before it looks at
  // the flag, all of them sequentially consistent (no fences: TSan does not model them): an
  // update not counted here sees the journal on, and one that finishes unseen by this read sees
  // the flag.
  journal_coverage_pending.store(true, std::memory_order_seq_cst);
  const bool drained = bare_updates_drained();
  journal_covered = drained;
  if (drained) journal_coverage_pending.store(false, std::memory_order_release);
}

void Array::State::try_record_journal_coverage() {
  if (!journal_coverage_pending.load(std::memory_order_acquire)) return;
  MutexLock guard(control_mutex);
  if (!journal_coverage_pending.load(std::memory_order_acquire)) return;
  if (!journal || !journal->active() || !bare_updates_drained()) return;
  journal_coverage_pending.store(false, std::memory_order_release);
  journal_covered = true;
  if (Status st = write_superblocks_locked(); !st) {
    spdlog::warn("graid: array '{}': recording that the write-hole journal covers every update: {}",
                 name, st.message());
  }
}

Status Array::State::turn_journal_off_if_unwanted() {
  if (!journal) return Status::ok();
  const JournalPolicy p = journal_policy.load(std::memory_order_acquire);
  const bool degraded = failed_count.load(std::memory_order_acquire) > 0;
  if (p == JournalPolicy::kAlways || (p == JournalPolicy::kDegradedOnly && degraded)) {
    return Status::ok();
  }
  if (!journal->begin_turn_off()) return Status::ok();  // off already, or being turned off
  // New journalled updates wait now; those in flight finish (their I/O is bounded by the
  // members' timeouts, and the I/O threads keep polling).
  const auto deadline = std::chrono::steady_clock::now() + metadata_timeout;
  while (!journal->drained()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      journal->cancel_turn_off();
      return make_error(Errc::kBusy,
                        "array '{}': journalled writes did not finish within {} ms; the "
                        "write-hole journal stays on",
                        name, metadata_timeout.count());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  {
    MutexLock guard(control_mutex);
    // A failure meanwhile (degraded-only) has asked for it again: activate() made finish_turn_off()
    // turn it back on, so moving the epoch costs nothing but the superblock update.
    const std::uint64_t epoch = sb.journal_epoch + 1;
    sb.journal_epoch = epoch;
    const bool was_covered = journal_covered;
    journal_covered = false;  // off from here on: updates go out without records
    if (Status st = write_superblocks_locked(); !st) {
      // The journal stays on with the old epoch: where a member took the new one, its records
      // are not replayed (no protection, but nothing stale either, since every write is still
      // journalled); elsewhere they are, in order, as before.
      sb.journal_epoch = epoch - 1;
      journal_covered = was_covered;
      journal->cancel_turn_off();
      return st;
    }
    journal->finish_turn_off(epoch);
    // Back on at once (a failure meanwhile): every update waited while it turned off, so none
    // went out without a record; coverage is recorded in a second update.
    if (journal->active()) journal_coverage_pending.store(true, std::memory_order_release);
    spdlog::info("graid: array '{}': write-hole journal {} (epoch {})", name,
                 journal->active() ? "stays on: a member failed meanwhile" : "off", epoch);
  }
  try_record_journal_coverage();
  return Status::ok();
}

std::uint8_t init_method_code(InitMethod method) noexcept {
  switch (method) {
    case InitMethod::kNone:
      return meta::kInitMethodNone;
    case InitMethod::kKnownZero:
      return meta::kInitMethodKnownZero;
    case InitMethod::kZeroed:
      return meta::kInitMethodZeroed;
    case InitMethod::kResync:
      return meta::kInitMethodResync;
    case InitMethod::kNotRecorded:
      break;
  }
  return meta::kInitMethodNotRecorded;
}

InitMethod init_method_of(std::uint8_t code) noexcept {
  switch (code) {
    case meta::kInitMethodNone:
      return InitMethod::kNone;
    case meta::kInitMethodKnownZero:
      return InitMethod::kKnownZero;
    case meta::kInitMethodZeroed:
      return InitMethod::kZeroed;
    case meta::kInitMethodResync:
      return InitMethod::kResync;
    default:
      return InitMethod::kNotRecorded;
  }
}

}  // namespace graid
