// The write-hole journal's record format (meta/journal_record.h) and ring space accounting
// (journal/journal.h): round trips, every corruption refused, reservations all-or-none across
// rings, no reuse of retired space before a flush, and waiters woken.
#include "journal/journal.h"

#include <gtest/gtest.h>

#include <thread>

#include "meta/crc32c.h"
#include "meta/journal_record.h"

namespace graid {
namespace {

std::array<std::byte, 16> uuid(std::uint8_t v) {
  std::array<std::byte, 16> u{};
  u.fill(std::byte{v});
  return u;
}

meta::JournalHeader sample() {
  meta::JournalHeader h;
  h.array_uuid = uuid(7);
  h.epoch = 3;
  h.seq = 99;
  h.stripe = 12345;
  h.entries = {{0, 4096, 4096}, {4, 4096, 4096}, {5, 0, 512}};
  h.payload_crc = 0xdeadbeef;
  return h;
}

TEST(JournalRecord, RoundTrip) {
  const meta::JournalHeader h = sample();
  std::vector<std::byte> block(meta::journal_header_bytes(h.entries.size()));
  ASSERT_TRUE(meta::encode_journal_header(h, block).is_ok());
  EXPECT_EQ(meta::journal_payload_bytes(h), 8704u);
  EXPECT_EQ(meta::journal_record_bytes(3, 8704), 4096u + 12288u);
  auto back = meta::decode_journal_header(block, uuid(7), 3);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->seq, 99u);
  EXPECT_EQ(back->stripe, 12345u);
  EXPECT_EQ(back->entries, h.entries);
  EXPECT_EQ(back->payload_crc, 0xdeadbeefu);
}

TEST(JournalRecord, OtherArrayOrEpochIsNotFound) {
  const meta::JournalHeader h = sample();
  std::vector<std::byte> block(4096);
  ASSERT_TRUE(meta::encode_journal_header(h, block).is_ok());
  EXPECT_EQ(meta::decode_journal_header(block, uuid(8), 3).status().code(), Errc::kNotFound);
  EXPECT_EQ(meta::decode_journal_header(block, uuid(7), 4).status().code(), Errc::kNotFound);
  std::vector<std::byte> zero(4096);
  EXPECT_EQ(meta::decode_journal_header(zero, uuid(7), 3).status().code(), Errc::kNotFound);
}

TEST(JournalRecord, EveryBitFlipAfterTheIdentityIsCorrupt) {
  const meta::JournalHeader h = sample();
  std::vector<std::byte> block(4096);
  ASSERT_TRUE(meta::encode_journal_header(h, block).is_ok());
  for (std::size_t bit = 0; bit < 4096 * 8; ++bit) {
    const auto mask = static_cast<std::byte>(1u << (bit % 8));
    block[bit / 8] ^= mask;
    auto r = meta::decode_journal_header(block, uuid(7), 3);
    ASSERT_FALSE(r.is_ok()) << "bit " << bit;
    block[bit / 8] ^= mask;
  }
  ASSERT_TRUE(meta::decode_journal_header(block, uuid(7), 3).is_ok());
}

TEST(JournalRecord, RefusesBadEntries) {
  meta::JournalHeader h = sample();
  h.entries[1].len = 1000;
  std::vector<std::byte> block(4096);
  EXPECT_EQ(meta::encode_journal_header(h, block).code(), Errc::kInvalidArgument);
  h = sample();
  std::vector<std::byte> small(100);
  EXPECT_EQ(meta::encode_journal_header(h, small).code(), Errc::kInvalidArgument);
}

// A task that counts its runs.
struct Counting final : Task {
  int runs = 0;
  void run() override { ++runs; }
};

class JournalRingTest : public ::testing::Test {
 protected:
  void SetUp() override { ctx_ = std::move(*IoContext::create(8)); }
  void drain() {
    while (ctx_->poll(false) > 0) {
    }
  }
  std::unique_ptr<IoContext> ctx_;
};

TEST_F(JournalRingTest, RetiredSpaceIsReusedOnlyAfterAFlush) {
  Journal j(3, 1 << 20, 64 * 1024, uuid(1), 1);
  Counting retry;
  const std::uint32_t p[] = {0};
  std::vector<Journal::Reservation> held;
  std::uint64_t ticket = 0;
  for (int i = 0; i < 4; ++i) {
    Journal::Reservation r;
    ASSERT_EQ(j.reserve(p, 16 * 1024, r, *ctx_, retry, &ticket), Journal::Reserve::kOk);
    EXPECT_EQ(j.device_offset(r.slots[0]), (1u << 20) + i * 16 * 1024u);
    held.push_back(r);
  }
  Journal::Reservation r;
  // Full, nothing retired: wait without a flush.
  EXPECT_EQ(j.reserve(p, 16 * 1024, r, *ctx_, retry, &ticket), Journal::Reserve::kWait);
  j.retire(held[0]);  // wakes the waiter
  drain();
  EXPECT_EQ(retry.runs, 1);
  // Retired but not flushed: the first to ask gets the flush, with a ticket.
  EXPECT_EQ(j.reserve(p, 16 * 1024, r, *ctx_, retry, &ticket), Journal::Reserve::kWaitFlush);
  EXPECT_EQ(ticket, 1u);
  std::uint64_t other = 0;
  EXPECT_EQ(j.reserve(p, 16 * 1024, r, *ctx_, retry, &other), Journal::Reserve::kWait);
  EXPECT_EQ(other, 0u);
  j.end_flush(ticket);
  drain();
  EXPECT_EQ(retry.runs, 3);
  ASSERT_EQ(j.reserve(p, 16 * 1024, r, *ctx_, retry, &ticket), Journal::Reserve::kOk);
  EXPECT_EQ(j.device_offset(r.slots[0]), 1u << 20) << "wrapped to the start";
  // A record retired after a flush was issued needs a later one.
  j.retire(held[1]);
  Journal::Reservation r2;
  EXPECT_EQ(j.reserve(p, 16 * 1024, r2, *ctx_, retry, &ticket), Journal::Reserve::kWaitFlush);
  EXPECT_EQ(ticket, 2u);
  j.end_flush(1);  // an older flush says nothing about it
  drain();
  EXPECT_EQ(j.reserve(p, 16 * 1024, r2, *ctx_, retry, &ticket), Journal::Reserve::kWait);
  j.end_flush(2);
  drain();
  EXPECT_EQ(j.reserve(p, 16 * 1024, r2, *ctx_, retry, &ticket), Journal::Reserve::kOk);
}

TEST_F(JournalRingTest, ReservationsAreAllOrNoneAcrossRings) {
  Journal j(4, 0x10000, 32 * 1024, uuid(1), 1);
  Counting retry;
  std::uint64_t ticket = 0;
  const std::uint32_t pq[] = {1, 2};
  const std::uint32_t q_only[] = {2};
  Journal::Reservation a, b, c;
  ASSERT_EQ(j.reserve(q_only, 24 * 1024, a, *ctx_, retry, &ticket), Journal::Reserve::kOk);
  // Ring 1 has room, ring 2 does not: nothing is taken from ring 1.
  EXPECT_EQ(j.reserve(pq, 16 * 1024, b, *ctx_, retry, &ticket), Journal::Reserve::kWait);
  EXPECT_EQ(j.outstanding(1), 0u);
  j.retire(a);
  drain();
  EXPECT_EQ(j.reserve(pq, 16 * 1024, b, *ctx_, retry, &ticket), Journal::Reserve::kWaitFlush);
  j.end_flush(ticket);
  drain();
  ASSERT_EQ(j.reserve(pq, 16 * 1024, b, *ctx_, retry, &ticket), Journal::Reserve::kOk);
  EXPECT_EQ(b.count, 2u);
  EXPECT_EQ(j.outstanding(1), 1u);
  EXPECT_EQ(j.outstanding(2), 1u);
  // A record never straddles the end of the area: 24 KiB after 16 KiB wraps to the start.
  j.retire(b);
  EXPECT_EQ(j.reserve(q_only, 24 * 1024, c, *ctx_, retry, &ticket), Journal::Reserve::kWaitFlush);
  j.end_flush(ticket);
  drain();
  ASSERT_EQ(j.reserve(q_only, 24 * 1024, c, *ctx_, retry, &ticket), Journal::Reserve::kOk);
  EXPECT_EQ(j.device_offset(c.slots[0]), 0x10000u);
  EXPECT_EQ(j.reserve(q_only, 40 * 1024, c, *ctx_, retry, &ticket), Journal::Reserve::kTooLarge);
}

}  // namespace
}  // namespace graid
