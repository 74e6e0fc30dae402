// Write-intent bitmap: encoding, persistence and the in-flight counting protocol. See
// write_intent_bitmap.h for the protocol and docs/on-disk-format.md for the byte layout.
#include "meta/write_intent_bitmap.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include "graid/buffer.h"
#include "graid/thread_annotations.h"
#include "meta/crc32c.h"
#include "meta/little_endian.h"
#include "meta/superblock.h"

namespace graid::meta {
namespace {

static_assert(kBitmapOffset >= kSuperblockOffset + kSuperblockSize,
              "the bitmap must not overlap the superblock");
static_assert(kBitmapOffset % 4096 == 0 && kBitmapPagesOffset % 4096 == 0,
              "bitmap blocks must be 4 KiB aligned for O_DIRECT");
static_assert(kBitmapHeaderSize == 4096 && kBitmapPageSize == 4096);
static_assert(kBitsPerPage % 64 == 0, "a page holds whole 64-bit words");
static_assert(kBitmapPagesOffset + kBitmapPageSize <= kDefaultDataOffset,
              "the default data offset leaves room for the bitmap");

constexpr std::uint64_t kWordsPerPage = kBitsPerPage / 64;
constexpr std::size_t kIoAlign = 4096;  // O_DIRECT on 4K-native devices

// Bits of the region range [first, last] that fall in 64-bit word `word`.
std::uint64_t range_mask(std::uint64_t word, std::uint64_t first, std::uint64_t last) noexcept {
  const std::uint64_t lo = word * 64;
  const std::uint64_t hi = lo + 63;
  if (last < lo || first > hi) return 0;
  const unsigned from = first > lo ? static_cast<unsigned>(first - lo) : 0;
  const unsigned to = last < hi ? static_cast<unsigned>(last - lo) : 63;
  const std::uint64_t upto = to == 63 ? ~std::uint64_t{0} : ((std::uint64_t{1} << (to + 1)) - 1);
  return upto & (~std::uint64_t{0} << from);
}

// Bit-page word `w` of an encoded page image (little-endian bit order makes a 64-bit word the
// little-endian load of its 8 bytes).
std::uint64_t load_word(std::span<const std::byte> page_bytes, std::uint64_t w) {
  return get_le<std::uint64_t>(page_bytes, static_cast<std::size_t>(w * 8));
}

// fill-in for add_page(): the in-memory bits as they are.
constexpr auto kNoExtra = [](std::uint64_t) -> std::uint64_t { return 0; };

std::string member_name(std::uint32_t index, const MemberDevice* member) {
  return fmt::format("member {} ({})", index, member->path());
}

}  // namespace

// ---- State --------------------------------------------------------------------------------------

struct WriteIntentBitmap::State {
  // Read without a lock by writers holding a page mutex or header_mutex; changed only by
  // add_member(), which holds all of them and `mutex`.
  std::vector<std::shared_ptr<MemberDevice>> members;
  std::chrono::milliseconds timeout{kDefaultMetadataTimeout};
  std::uint64_t region_bytes = 0;
  unsigned region_shift = 0;
  std::uint64_t region_count = 0;
  std::uint64_t page_count = 0;
  std::uint64_t data_size = 0;

  // The bits known to be set on every live member's disk (see the invariant in the header).
  // A word changes only under its page's mutex; read lock-free by begin_write()'s fast path.
  std::unique_ptr<std::atomic<std::uint64_t>[]> bits;
  // Regions remembered by mark_clear_candidates(); begin_write() clears its regions' bits here.
  std::unique_ptr<std::atomic<std::uint64_t>[]> candidates;
  // Writes in flight per region.
  std::unique_ptr<std::atomic<std::uint32_t>[]> counters;
  // Regions whose bits no clear may take (pin_dirty): a re-sync has yet to pass them.
  std::unique_ptr<std::atomic<std::uint64_t>[]> pinned;
  // The same until the bitmap goes (pin): stripes a member refused to write, which only the next
  // assembly's re-sync is sure to make whole. unpin_below() leaves them.
  std::unique_ptr<std::atomic<std::uint64_t>[]> kept;
  std::atomic<bool> any_kept{false};

  // Locks, outermost first. Only a page's own mutex (and the header's) is held across the I/O
  // that writes it, so a member that is slow to take page p delays only writers of page p: an
  // I/O thread setting a bit in another page takes that page's mutex and goes ahead, and
  // drop_member() (called while failing the slow member) never waits for I/O.
  //   clear_mutex    one clear (mark or clear_candidates) at a time
  //   page.mutex     per bit page, ascending when several are taken: changes of that page's
  //                  words of `bits` and the writes of its image, so images of one page reach
  //                  the disk in the order they were made
  //   header_mutex   header writes, so header images (events) reach the disk in order
  //   mutex          `live` and `header`: short critical sections, never across I/O
  //
  // Page mutexes are held several at a time, as a std::vector of PageLock (a std::unique_lock
  // over the page's native std::mutex), which -Wthread-safety cannot follow. So the analysis
  // checks the other mutexes, and a page's `stale` flag is reached through stale_held() /
  // set_stale_held(), whose callers hold that page's PageLock.
  struct Page {
    Mutex mutex;
    bool stale GUARDED_BY(mutex) = false;  // disk may hold bits memory cleared

    // REQUIRES: `mutex` held through a PageLock. NO_THREAD_SAFETY_ANALYSIS: such a lock is out of
    // the analysis' sight (see above); these two are the only way around GUARDED_BY(mutex).
    bool stale_held() const NO_THREAD_SAFETY_ANALYSIS { return stale; }
    void set_stale_held(bool value) NO_THREAD_SAFETY_ANALYSIS { stale = value; }
  };
  using PageLock = std::unique_lock<std::mutex>;
  static PageLock lock_page(Page& page) { return PageLock(page.mutex.native()); }

  Mutex clear_mutex;
  std::unique_ptr<Page[]> pages;
  Mutex header_mutex;
  mutable Mutex mutex;
  BitmapHeader header GUARDED_BY(mutex);  // events changes; the rest is fixed
  std::vector<bool> live GUARDED_BY(mutex);

  std::uint64_t word_count() const noexcept { return page_count * kWordsPerPage; }

  static Result<std::unique_ptr<State>> make(std::span<const std::shared_ptr<MemberDevice>> devs,
                                             const BitmapHeader& hdr,
                                             std::chrono::milliseconds timeout) {
    auto s = std::make_unique<State>();
    s->members.assign(devs.begin(), devs.end());
    s->timeout = timeout;
    {
      MutexLock lock(s->mutex);  // not shared yet (uncontended), but every access is locked
      s->live.resize(devs.size());
      for (std::size_t i = 0; i < devs.size(); ++i)
        s->live[i] = devs[i] != nullptr;
      s->header = hdr;
    }
    s->region_bytes = hdr.region_bytes;
    s->region_shift = static_cast<unsigned>(std::countr_zero(hdr.region_bytes));
    s->region_count = hdr.region_count();
    s->page_count = bitmap_page_count(s->region_count);
    s->data_size = hdr.data_size;
    // Value-initialised: every atomic starts at zero.
    s->bits = std::make_unique<std::atomic<std::uint64_t>[]>(s->word_count());
    s->candidates = std::make_unique<std::atomic<std::uint64_t>[]>(s->word_count());
    s->pinned = std::make_unique<std::atomic<std::uint64_t>[]>(s->word_count());
    s->kept = std::make_unique<std::atomic<std::uint64_t>[]>(s->word_count());
    s->counters = std::make_unique<std::atomic<std::uint32_t>[]>(s->region_count);
    s->pages = std::make_unique<Page[]>(s->page_count);
    return s;
  }

  // What one update writes to every target member: bit pages, then (optionally) the header,
  // then a flush. Shared with the metadata workers, which may outlive the update (timeout).
  struct Images {
    std::vector<std::pair<std::uint64_t, AlignedBuffer>> pages;  // page number, image
    std::optional<AlignedBuffer> header;
  };

  // Adds the image of bit page `page` (the in-memory bits OR-ed with `extra(word)`) to `images`.
  // REQUIRES: the page's mutex held (through a PageLock: not expressible, see Page).
  template <typename Extra>
  Status add_page(Images& images, std::uint64_t page, const Extra& extra) const {
    auto buf = AlignedBuffer::allocate(kBitmapPageSize, kIoAlign);
    if (!buf) return buf.status();
    const auto out = buf->span();
    for (std::uint64_t i = 0; i < kWordsPerPage; ++i) {
      const std::uint64_t w = page * kWordsPerPage + i;
      const std::uint64_t value = bits[w].load(std::memory_order_relaxed) | extra(w);
      put_le<std::uint64_t>(out, static_cast<std::size_t>(i * 8), value);
    }
    images.pages.emplace_back(page, std::move(*buf));
    return Status::ok();
  }

  // Adds the header image to `images`, first bumping events if `bump`. header_mutex held, so
  // header images reach the disk in events order.
  Status add_header(Images& images, bool bump) REQUIRES(header_mutex) EXCLUDES(mutex) {
    auto buf = AlignedBuffer::allocate(kBitmapHeaderSize, kIoAlign);
    if (!buf) return buf.status();
    {
      MutexLock lock(mutex);
      if (bump) ++header.events;
      GRAID_RETURN_IF_ERROR(encode_header(header, buf->span()));
    }
    images.header = std::move(*buf);
    return Status::ok();
  }

  // The live members now, by slot (null for dropped ones).
  std::vector<std::shared_ptr<MemberDevice>> live_targets() const EXCLUDES(mutex) {
    MutexLock lock(mutex);
    std::vector<std::shared_ptr<MemberDevice>> out(members.size());
    for (std::size_t m = 0; m < members.size(); ++m)
      if (live[m]) out[m] = members[m];
    return out;
  }

  // Writes `images` to every non-null member of `targets` at once (run_on_members: one write +
  // flush round trip for all of them, the slowest member's) and flushes each member that took
  // every write. A member that fails or does not finish within `timeout` is named in the
  // returned error (the first) and in `failed`; the others have the images on stable storage.
  Status write_to(std::span<const std::shared_ptr<MemberDevice>> targets,
                  std::shared_ptr<const Images> images, std::vector<std::uint32_t>* failed) const {
    if (std::none_of(targets.begin(), targets.end(), [](const auto& t) { return t != nullptr; }))
      return make_error(Errc::kIoError, "write-intent bitmap: no live member to write to");
    const std::vector<Status> results =
        run_on_members(targets, timeout, [images](MemberDevice& dev, std::uint32_t) -> Status {
          for (const auto& [page, buf] : images->pages) {
            Status s = dev.write_sync(kBitmapPagesOffset + page * kBitmapPageSize, buf.span());
            if (!s) return make_error(s.code(), "failed to write a bit page: {}", s.message());
          }
          if (images->header) {
            Status s = dev.write_sync(kBitmapOffset, images->header->span());
            if (!s) return make_error(s.code(), "failed to write the header: {}", s.message());
          }
          Status s = dev.flush_sync();
          if (!s) return make_error(s.code(), "failed to flush: {}", s.message());
          return s;
        });
    Status first_error;
    for (std::uint32_t m = 0; m < results.size(); ++m) {
      if (results[m]) continue;
      if (failed) failed->push_back(m);
      if (first_error.is_ok())
        first_error = make_error(results[m].code(), "write-intent bitmap: {}: {}",
                                 member_name(m, targets[m].get()), results[m].message());
    }
    return first_error;
  }

  // Takes every page's mutex, ascending.
  std::vector<PageLock> lock_all_pages() {
    std::vector<PageLock> held;
    held.reserve(page_count);
    for (std::uint64_t p = 0; p < page_count; ++p)
      held.push_back(lock_page(pages[p]));
    return held;
  }

  // Images of every page (memory as it is) and the header. REQUIRES: every page's mutex held
  // too (lock_all_pages()).
  Result<std::shared_ptr<Images>> all_images(bool bump) REQUIRES(header_mutex) {
    auto images = std::make_shared<Images>();
    for (std::uint64_t p = 0; p < page_count; ++p)
      GRAID_RETURN_IF_ERROR(add_page(*images, p, kNoExtra));
    GRAID_RETURN_IF_ERROR(add_header(*images, bump));
    return images;
  }
};

WriteIntentBitmap::WriteIntentBitmap(std::unique_ptr<State> state) : state_(std::move(state)) {}
WriteIntentBitmap::WriteIntentBitmap(WriteIntentBitmap&&) noexcept = default;
WriteIntentBitmap& WriteIntentBitmap::operator=(WriteIntentBitmap&&) noexcept = default;
WriteIntentBitmap::~WriteIntentBitmap() = default;

// ---- Creation and loading -----------------------------------------------------------------------

namespace {
std::vector<std::shared_ptr<MemberDevice>> unowned(std::span<MemberDevice* const> members) {
  std::vector<std::shared_ptr<MemberDevice>> out;
  for (MemberDevice* m : members)
    out.push_back(unowned_member(m));
  return out;
}
}  // namespace

Result<WriteIntentBitmap> WriteIntentBitmap::create_fresh(std::span<MemberDevice* const> members,
                                                          const BitmapParams& params) {
  return create_fresh(unowned(members), params);
}

Result<WriteIntentBitmap> WriteIntentBitmap::load(std::span<MemberDevice* const> members,
                                                  const BitmapParams& params,
                                                  BitmapLoadReport* report) {
  return load(unowned(members), params, report);
}

Result<WriteIntentBitmap> WriteIntentBitmap::create_fresh(
    std::span<const std::shared_ptr<MemberDevice>> members, const BitmapParams& params) {
  std::uint64_t region_bytes = params.region_bytes;
  if (region_bytes == 0) {
    auto chosen = choose_region_bytes(params.data_size, params.data_offset);
    if (!chosen) return chosen.status();
    region_bytes = *chosen;
  }
  GRAID_RETURN_IF_ERROR(validate_layout(params.data_offset, params.data_size, region_bytes));
  BitmapHeader header;
  header.array_uuid = params.array_uuid;
  header.region_bytes = region_bytes;
  header.data_size = params.data_size;
  header.data_offset = params.data_offset;
  header.events = 0;  // write_all() makes it 1
  header.events_cleared = params.events_cleared;
  auto state = State::make(members, header, params.metadata_timeout);
  if (!state) return state.status();
  return WriteIntentBitmap(std::move(state).value());
}

Result<WriteIntentBitmap> WriteIntentBitmap::load(
    std::span<const std::shared_ptr<MemberDevice>> members, const BitmapParams& params,
    BitmapLoadReport* report) {
  BitmapLoadReport local;
  BitmapLoadReport& rep = report ? *report : local;
  rep = {};
  auto buf_or = AlignedBuffer::allocate(kBitmapHeaderSize, kIoAlign);
  if (!buf_or) return buf_or.status();
  AlignedBuffer buf = std::move(buf_or).value();

  // 1. Headers: keep those that describe this array's data area.
  std::vector<std::pair<std::uint32_t, BitmapHeader>> good;
  for (std::uint32_t m = 0; m < members.size(); ++m) {
    MemberDevice* dev = members[m].get();
    if (dev == nullptr) continue;
    auto reject = [&](Status s) { rep.rejected.push_back({m, std::move(s)}); };
    if (Status s = dev->read_sync(kBitmapOffset, buf.span()); !s) {
      reject(make_error(s.code(), "{}: reading the bitmap header: {}", member_name(m, dev),
                        s.message()));
      continue;
    }
    auto header = decode_header(buf.span());
    if (!header) {
      reject(make_error(header.status().code(), "{}: {}", member_name(m, dev),
                        header.status().message()));
      continue;
    }
    if (header->array_uuid != params.array_uuid) {
      reject(
          make_error(Errc::kCorrupt, "{}: bitmap belongs to another array", member_name(m, dev)));
      continue;
    }
    if (header->data_offset != params.data_offset || header->data_size != params.data_size) {
      reject(make_error(Errc::kCorrupt,
                        "{}: bitmap covers data offset {} size {}, the array has offset {} size {}",
                        member_name(m, dev), header->data_offset, header->data_size,
                        params.data_offset, params.data_size));
      continue;
    }
    if (params.region_bytes != 0 && header->region_bytes != params.region_bytes) {
      reject(make_error(Errc::kCorrupt, "{}: bitmap region size {}, expected {}",
                        member_name(m, dev), header->region_bytes, params.region_bytes));
      continue;
    }
    good.emplace_back(m, *header);
  }
  if (good.empty()) {
    std::string reasons;
    for (const auto& issue : rep.rejected)
      reasons += "; " + issue.status.message();
    return make_error(Errc::kCorrupt, "no member holds a usable write-intent bitmap{}", reasons);
  }
  for (const auto& [m, h] : good) {
    if (h.region_bytes != good.front().second.region_bytes)
      return make_error(Errc::kCorrupt,
                        "members disagree on the bitmap region size ({} has {}, {} has {}); "
                        "pass the region size to choose",
                        member_name(good.front().first, members[good.front().first].get()),
                        good.front().second.region_bytes, member_name(m, members[m].get()),
                        h.region_bytes);
  }

  BitmapHeader header = good.front().second;
  bool cleared_known = true;
  for (const auto& [m, h] : good) {
    header.events = std::max(header.events, h.events);
    header.events_cleared = std::max(header.events_cleared, h.events_cleared);
    cleared_known = cleared_known && h.events_cleared != 0;
  }
  if (!cleared_known) header.events_cleared = 0;
  auto state_or = State::make(members, header, params.metadata_timeout);
  if (!state_or) return state_or.status();
  std::unique_ptr<State> state = std::move(state_or).value();
  State& st = *state;

  // 2. Bit pages: union over the accepted members, keeping each copy to find who differs.
  auto pages_or = AlignedBuffer::allocate(st.page_count * kBitmapPageSize, kIoAlign);
  if (!pages_or) return pages_or.status();
  AlignedBuffer pages = std::move(pages_or).value();
  std::vector<std::vector<std::uint64_t>> copies;  // parallel to rep.accepted
  // Bits at or beyond region_count are not ours: mask them off rather than trust them.
  const std::uint64_t last_word = (st.region_count - 1) / 64;
  const std::uint64_t last_mask = range_mask(last_word, 0, st.region_count - 1);
  for (const auto& [m, h] : good) {
    if (Status s = members[m]->read_sync(kBitmapPagesOffset, pages.span()); !s) {
      rep.rejected.push_back({m, make_error(s.code(), "{}: reading the bitmap pages: {}",
                                            member_name(m, members[m].get()), s.message())});
      continue;
    }
    std::vector<std::uint64_t> words(st.word_count());
    for (std::uint64_t w = 0; w < words.size(); ++w) {
      std::uint64_t value = load_word(pages.span(), w);
      if (w > last_word) value = 0;
      if (w == last_word) value &= last_mask;
      words[w] = value;
      st.bits[w].fetch_or(value, std::memory_order_relaxed);
    }
    rep.accepted.push_back(m);
    if (h.events < header.events) rep.behind.push_back(m);
    copies.push_back(std::move(words));
  }
  if (rep.accepted.empty()) {
    std::string reasons;
    for (const auto& issue : rep.rejected)
      reasons += "; " + issue.status.message();
    return make_error(Errc::kCorrupt, "no member holds a readable write-intent bitmap{}", reasons);
  }
  rep.events = header.events;
  rep.events_cleared = header.events_cleared;
  std::sort(
      rep.rejected.begin(), rep.rejected.end(),
      [](const BitmapMemberIssue& a, const BitmapMemberIssue& b) { return a.member < b.member; });

  // 3. Bring every member that lacks some union bit (or whose copy we could not use) back to
  // the union, so set bits in memory are on every live member again. Members that only
  // missed the latest header are left alone: their bits are a superset, which is safe.
  std::vector<bool> rewrite(members.size(), false);
  for (const auto& issue : rep.rejected)
    rewrite[issue.member] = true;
  for (std::size_t i = 0; i < rep.accepted.size(); ++i) {
    for (std::uint64_t w = 0; w < st.word_count(); ++w) {
      if (copies[i][w] != st.bits[w].load(std::memory_order_relaxed)) {
        rewrite[rep.accepted[i]] = true;
        break;
      }
    }
  }
  // All of them at once, through the common path (nothing else uses the bitmap yet).
  std::vector<std::shared_ptr<MemberDevice>> targets(members.size());
  for (std::uint32_t m = 0; m < members.size(); ++m)
    if (rewrite[m]) targets[m] = members[m];
  Status first_error;
  if (std::any_of(targets.begin(), targets.end(), [](const auto& t) { return t != nullptr; })) {
    const auto held = st.lock_all_pages();
    MutexLock header_lock(st.header_mutex);
    auto images = st.all_images(/*bump=*/false);
    if (!images) return images.status();
    std::vector<std::uint32_t> failed;
    first_error = st.write_to(targets, std::move(*images), &failed);
    for (std::uint32_t m = 0; m < members.size(); ++m)
      if (rewrite[m] && std::find(failed.begin(), failed.end(), m) == failed.end())
        rep.rewritten.push_back(m);
  }
  if (!first_error.is_ok()) return first_error;
  return WriteIntentBitmap(std::move(state));
}

Status WriteIntentBitmap::write_all(std::vector<std::uint32_t>* failed) {
  State& st = *state_;
  const auto held = st.lock_all_pages();
  MutexLock header_lock(st.header_mutex);
  auto images = st.all_images(/*bump=*/true);
  if (!images) return images.status();
  Status s = st.write_to(st.live_targets(), std::move(*images), failed);
  // A failed member keeps whatever it had; the others now match memory exactly.
  if (s) {
    for (std::uint64_t p = 0; p < st.page_count; ++p)
      st.pages[p].set_stale_held(false);
  }
  return s;
}

// ---- The write path -----------------------------------------------------------------------------

Status WriteIntentBitmap::begin_write(std::uint64_t member_offset, std::uint64_t len,
                                      std::vector<std::uint32_t>* failed) {
  State& st = *state_;
  if (len == 0) return Status::ok();
  if (member_offset >= st.data_size || len > st.data_size - member_offset)
    return make_error(Errc::kOutOfRange, "write [{}, +{}) is beyond the bitmap's {} data bytes",
                      member_offset, len, st.data_size);
  const std::uint64_t first = member_offset >> st.region_shift;
  const std::uint64_t last = (member_offset + len - 1) >> st.region_shift;

  // Count first, then look at the bits and candidates (all seq_cst): with the clear path doing
  // the reverse (change the bit or candidate, then read the counter), one of the two sides always
  // sees the other (see clear_candidates()).
  for (std::uint64_t r = first; r <= last; ++r)
    st.counters[r].fetch_add(1);
  bool all_set = true;
  for (std::uint64_t w = first / 64; w <= last / 64; ++w) {
    const std::uint64_t mask = range_mask(w, first, last);
    if ((st.candidates[w].load() & mask) != 0) st.candidates[w].fetch_and(~mask);
    if ((st.bits[w].load() & mask) != mask) all_set = false;
  }
  if (all_set) return Status::ok();

  // Slow path: a 0 -> 1 transition must be on disk everywhere before the data write starts.
  // Only the pages holding [first, last] are locked (ascending; at most a few): a thread setting
  // bits in another page does not wait for this update's member I/O.
  Status status;
  {
    const std::uint64_t first_page = first / kBitsPerPage;
    const std::uint64_t last_page = last / kBitsPerPage;
    std::vector<State::PageLock> held;
    for (std::uint64_t p = first_page; p <= last_page; ++p)
      held.push_back(State::lock_page(st.pages[p]));
    const auto extra = [&](std::uint64_t w) { return range_mask(w, first, last); };
    auto images = std::make_shared<State::Images>();
    for (std::uint64_t p = first_page; p <= last_page && status; ++p) {
      bool clear = false;
      for (std::uint64_t w = std::max(first / 64, p * kWordsPerPage);
           w <= std::min(last / 64, (p + 1) * kWordsPerPage - 1); ++w)
        clear |= (st.bits[w].load(std::memory_order_relaxed) & extra(w)) != extra(w);
      if (clear || st.pages[p].stale_held()) status = st.add_page(*images, p, extra);
    }
    if (status && images->pages.empty()) return Status::ok();  // persisted by another thread
    if (status) status = st.write_to(st.live_targets(), images, failed);
    if (status) {
      // Now on every live member: publish for the fast path.
      for (std::uint64_t w = first / 64; w <= last / 64; ++w)
        st.bits[w].fetch_or(extra(w));
      for (const auto& [page, image] : images->pages)
        st.pages[page].set_stale_held(false);
      return Status::ok();
    }
  }
  // Nothing stays counted on failure: the caller retries after dropping the member.
  for (std::uint64_t r = first; r <= last; ++r)
    st.counters[r].fetch_sub(1);
  return status;
}

void WriteIntentBitmap::end_write(std::uint64_t member_offset, std::uint64_t len) noexcept {
  State& st = *state_;
  if (len == 0) return;
  assert(member_offset < st.data_size && len <= st.data_size - member_offset);
  if (member_offset >= st.data_size || len > st.data_size - member_offset) return;
  const std::uint64_t first = member_offset >> st.region_shift;
  const std::uint64_t last = (member_offset + len - 1) >> st.region_shift;
  for (std::uint64_t r = first; r <= last; ++r) {
    [[maybe_unused]] const std::uint32_t before = st.counters[r].fetch_sub(1);
    assert(before > 0 && "end_write without a matching begin_write");
  }
}

// ---- Clearing -----------------------------------------------------------------------------------

std::uint64_t WriteIntentBitmap::mark_clear_candidates() {
  State& st = *state_;
  MutexLock lock(st.clear_mutex);
  std::uint64_t count = 0;
  for (std::uint64_t w = 0; w < st.word_count(); ++w) {
    const std::uint64_t set =
        st.bits[w].load(std::memory_order_relaxed) & ~st.pinned[w].load() & ~st.kept[w].load();
    // Publish the candidates before reading the counters: a begin_write() that counted after
    // our read sees the candidate bit and withdraws it.
    st.candidates[w].store(set);
    if (set == 0) continue;
    std::uint64_t busy = 0;
    for (std::uint64_t rest = set; rest != 0; rest &= rest - 1) {
      const auto bit = static_cast<unsigned>(std::countr_zero(rest));
      if (st.counters[w * 64 + bit].load() != 0) busy |= std::uint64_t{1} << bit;
    }
    if (busy != 0) st.candidates[w].fetch_and(~busy);
    count += static_cast<std::uint64_t>(std::popcount(set & ~busy));
  }
  return count;
}

Status WriteIntentBitmap::clear_candidates(std::uint64_t sb_events,
                                           std::vector<std::uint32_t>* failed) {
  State& st = *state_;
  MutexLock clear_lock(st.clear_mutex);
  // Page by page, ascending: the pages with bits to clear (or stale on disk) stay locked until
  // their images are written; the others are let go at once.
  std::vector<State::PageLock> held;
  auto images = std::make_shared<State::Images>();
  for (std::uint64_t p = 0; p < st.page_count; ++p) {
    State::PageLock page_lock = State::lock_page(st.pages[p]);
    bool touched = st.pages[p].stale_held();
    for (std::uint64_t w = p * kWordsPerPage; w < (p + 1) * kWordsPerPage; ++w) {
      const std::uint64_t want =
          st.candidates[w].load() & st.bits[w].load(std::memory_order_relaxed);
      if (want == 0) continue;
      // Clear in memory first, then re-check: a begin_write() that saw the bit still set had
      // already counted and withdrawn the candidate before that (seq_cst), so we see it here and
      // put the bit back; one that comes later sees the bit clear and waits for the page lock.
      st.bits[w].fetch_and(~want);
      std::uint64_t keep = ~st.candidates[w].load() & want;
      for (std::uint64_t rest = want & ~keep; rest != 0; rest &= rest - 1) {
        const auto bit = static_cast<unsigned>(std::countr_zero(rest));
        if (st.counters[w * 64 + bit].load() != 0) keep |= std::uint64_t{1} << bit;
      }
      if (keep != 0) st.bits[w].fetch_or(keep);
      st.candidates[w].fetch_and(~want);
      touched |= (want & ~keep) != 0;
    }
    if (!touched) continue;
    // Stale until the write below succeeds: whatever happens next, a later update rewrites it.
    st.pages[p].set_stale_held(true);
    GRAID_RETURN_IF_ERROR(st.add_page(*images, p, kNoExtra));
    held.push_back(std::move(page_lock));
  }
  if (images->pages.empty()) return Status::ok();
  MutexLock header_lock(st.header_mutex);
  bool raise = false;
  {
    MutexLock lock(st.mutex);
    raise = st.header.events_cleared == 0 || sb_events > st.header.events_cleared;
    if (raise) st.header.events_cleared = sb_events;
  }
  if (raise) {
    // The new baseline on disk before any page it allows to clear (the pages stay stale, and
    // their bits clear in memory, if this fails: the next clear writes them).
    auto header_only = std::make_shared<State::Images>();
    GRAID_RETURN_IF_ERROR(st.add_header(*header_only, /*bump=*/true));
    GRAID_RETURN_IF_ERROR(st.write_to(st.live_targets(), std::move(header_only), failed));
  }
  GRAID_RETURN_IF_ERROR(st.add_header(*images, /*bump=*/true));
  // Bits cleared in memory stay clear even if a member fails: the disk then holds them set
  // (safe: an extra resync) until a later clear rewrites the page.
  Status s = st.write_to(st.live_targets(), images, failed);
  for (const auto& [page, image] : images->pages)
    st.pages[page].set_stale_held(!s.is_ok());
  return s;
}

Status WriteIntentBitmap::clear_idle(std::uint64_t sb_events, std::vector<std::uint32_t>* failed) {
  mark_clear_candidates();
  return clear_candidates(sb_events, failed);
}

// ---- Queries ------------------------------------------------------------------------------------

std::vector<std::pair<std::uint64_t, std::uint64_t>> WriteIntentBitmap::dirty_ranges() const {
  const State& st = *state_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (std::uint64_t w = 0; w < st.word_count(); ++w) {
    for (std::uint64_t rest = st.bits[w].load(std::memory_order_acquire); rest != 0;
         rest &= rest - 1) {
      const std::uint64_t region = w * 64 + static_cast<unsigned>(std::countr_zero(rest));
      const std::uint64_t start = region << st.region_shift;
      const std::uint64_t end = std::min(start + st.region_bytes, st.data_size);
      if (!ranges.empty() && ranges.back().first + ranges.back().second == start)
        ranges.back().second += end - start;
      else
        ranges.emplace_back(start, end - start);
    }
  }
  return ranges;
}

Status WriteIntentBitmap::add_member(std::uint32_t index, std::shared_ptr<MemberDevice> device) {
  State& st = *state_;
  if (index >= st.members.size() || !device) {
    return make_error(Errc::kInvalidArgument, "no member slot {} in the bitmap", index);
  }
  const auto held = st.lock_all_pages();
  MutexLock header_lock(st.header_mutex);
  auto images = st.all_images(/*bump=*/false);
  if (!images) return images.status();
  std::vector<std::shared_ptr<MemberDevice>> targets(st.members.size());
  targets[index] = device;
  GRAID_RETURN_IF_ERROR(st.write_to(targets, std::move(*images), nullptr));
  MutexLock lock(st.mutex);
  st.members[index] = std::move(device);
  st.live[index] = true;
  return Status::ok();
}

void WriteIntentBitmap::drop_member(std::uint32_t index) {
  State& st = *state_;
  MutexLock lock(st.mutex);
  if (index < st.live.size()) st.live[index] = false;
}

std::uint64_t WriteIntentBitmap::region_bytes() const noexcept {
  return state_->region_bytes;
}
std::uint64_t WriteIntentBitmap::region_count() const noexcept {
  return state_->region_count;
}
std::uint64_t WriteIntentBitmap::data_size() const noexcept {
  return state_->data_size;
}

std::uint64_t WriteIntentBitmap::events() const noexcept {
  MutexLock lock(state_->mutex);
  return state_->header.events;
}

std::uint64_t WriteIntentBitmap::events_cleared() const noexcept {
  MutexLock lock(state_->mutex);
  return state_->header.events_cleared;
}

std::uint64_t WriteIntentBitmap::region_of(std::uint64_t member_offset) const noexcept {
  return member_offset >> state_->region_shift;
}

std::uint32_t WriteIntentBitmap::in_flight(std::uint64_t region) const noexcept {
  if (region >= state_->region_count) return 0;
  return state_->counters[region].load();
}

// ---- Pins ---------------------------------------------------------------------------------------

std::uint64_t WriteIntentBitmap::pin_dirty() {
  State& st = *state_;
  MutexLock lock(st.clear_mutex);  // no clear cycle is between its two phases
  std::uint64_t count = 0;
  for (std::uint64_t w = 0; w < st.word_count(); ++w) {
    const std::uint64_t set = st.bits[w].load(std::memory_order_acquire);
    st.pinned[w].fetch_or(set);
    st.candidates[w].fetch_and(~set);
    count += static_cast<std::uint64_t>(std::popcount(set));
  }
  return count;
}

void WriteIntentBitmap::unpin_below(std::uint64_t member_offset) {
  State& st = *state_;
  // Regions that end at or below member_offset (the last one ends at data_size).
  const std::uint64_t whole = member_offset >= st.data_size
                                  ? st.region_count
                                  : std::min(st.region_count, member_offset >> st.region_shift);
  for (std::uint64_t w = 0; w * 64 < whole; ++w) {
    const std::uint64_t regions = std::min<std::uint64_t>(64, whole - w * 64);
    const std::uint64_t mask =
        regions == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << regions) - 1;
    if ((st.pinned[w].load(std::memory_order_relaxed) & mask) != 0) st.pinned[w].fetch_and(~mask);
  }
}

void WriteIntentBitmap::pin(std::uint64_t member_offset) {
  State& st = *state_;
  if (member_offset >= st.data_size) return;
  const std::uint64_t region = member_offset >> st.region_shift;
  const std::uint64_t bit = std::uint64_t{1} << (region % 64);
  MutexLock lock(st.clear_mutex);  // no clear cycle is between its two phases
  st.kept[region / 64].fetch_or(bit);
  st.any_kept.store(true, std::memory_order_release);
  st.candidates[region / 64].fetch_and(~bit);
}

bool WriteIntentBitmap::is_pinned(std::uint64_t region) const noexcept {
  if (region >= state_->region_count) return false;
  const std::uint64_t word = state_->pinned[region / 64].load() | state_->kept[region / 64].load();
  return (word >> (region % 64)) & 1;
}

bool WriteIntentBitmap::has_kept_pins() const noexcept {
  return state_->any_kept.load(std::memory_order_acquire);
}

bool WriteIntentBitmap::is_dirty(std::uint64_t region) const noexcept {
  if (region >= state_->region_count) return false;
  return (state_->bits[region / 64].load() >> (region % 64)) & 1;
}

}  // namespace graid::meta
