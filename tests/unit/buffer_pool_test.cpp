// The stripe staging pool: size classes, slab carving, reuse, and what it tells the registry.
#include "stripe/buffer_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "recording_registry.h"

namespace graid {
namespace {

using testing::RecordingRegistry;

TEST(BufferPool, SizesAreThePowerOfTwoClassAndAligned) {
  BufferPool pool;
  const std::size_t lens[] = {1, 512, 4096, 4097, 65536, 100000, kMaxStripBytes};
  for (std::size_t len : lens) {
    auto b = pool.get(len);
    ASSERT_TRUE(b.is_ok()) << len;
    EXPECT_GE(b->size(), len);
    EXPECT_EQ(b->size(), std::max<std::size_t>(4096, std::bit_ceil(len))) << len;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b->data()) % 4096, 0u) << len;
    const ChunkView v = b->view(0, len);
    EXPECT_EQ(v.data(), b->data());
    EXPECT_EQ(v.size(), len);
    pool.put(std::move(*b));
    EXPECT_EQ(b->data(), nullptr) << "put() leaves the handle empty";
  }
}

TEST(BufferPool, BuffersInUseNeverOverlapAndAreReused) {
  BufferPool pool;
  std::mt19937 rng(7);
  std::vector<PoolBuffer> held;
  // Each held buffer is filled with its own tag; any overlap would clobber another's tag.
  std::vector<std::byte> tags;
  for (int round = 0; round < 2000; ++round) {
    if (!held.empty() && rng() % 3 == 0) {
      const std::size_t i = rng() % held.size();
      const std::byte tag = tags[i];
      for (std::size_t o = 0; o < held[i].size(); o += 512)
        ASSERT_EQ(held[i].data()[o], tag) << "a buffer was lent twice";
      pool.put(std::move(held[i]));
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      tags.erase(tags.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    const std::size_t len = std::size_t{4096} << (rng() % BufferPool::kClasses);
    auto b = pool.get(len - rng() % 4096);
    ASSERT_TRUE(b.is_ok());
    const auto tag = static_cast<std::byte>(round);
    std::memset(b->data(), static_cast<int>(tag), b->size());
    held.push_back(std::move(*b));
    tags.push_back(tag);
  }
  const std::size_t slabs = pool.slab_count();
  // Everything back, then the same demand again: no new slab.
  for (auto& b : held)
    pool.put(std::move(b));
  for (int i = 0; i < 50; ++i) {
    auto b = pool.get(std::size_t{4096} << (i % BufferPool::kClasses));
    ASSERT_TRUE(b.is_ok());
    pool.put(std::move(*b));
  }
  EXPECT_EQ(pool.slab_count(), slabs);
}

TEST(BufferPool, SlabHoldsSeveralBuffersOfItsClass) {
  BufferPool pool;
  std::vector<PoolBuffer> held;
  const std::size_t per_slab = BufferPool::slab_bytes(4) / (std::size_t{4096} << 4);
  EXPECT_GE(per_slab, BufferPool::kBuffersPerSlab);
  for (std::size_t i = 0; i < per_slab; ++i)
    held.push_back(std::move(*pool.get(65536)));
  EXPECT_EQ(pool.slab_count(), 1u);
  held.push_back(std::move(*pool.get(65536)));
  EXPECT_EQ(pool.slab_count(), 2u);
  for (auto& b : held)
    pool.put(std::move(b));
}

TEST(BufferPool, AnnouncesEachSlabOnceAndWithdrawsItOnDestruction) {
  RecordingRegistry registry;
  std::vector<std::pair<const std::byte*, std::size_t>> lent;
  {
    BufferPool pool(&registry);
    std::vector<PoolBuffer> held;
    for (int i = 0; i < 40; ++i) {
      auto b = pool.get(std::size_t{4096} << (i % BufferPool::kClasses));
      ASSERT_TRUE(b.is_ok());
      EXPECT_TRUE(registry.covers(b->data(), b->size())) << "every lent buffer is registered";
      lent.emplace_back(b->data(), b->size());
      held.push_back(std::move(*b));
    }
    EXPECT_EQ(registry.added(), pool.slab_count());
    EXPECT_EQ(pool.registered_slab_count(), pool.slab_count());
    EXPECT_EQ(registry.removed(), 0u);
    for (auto& b : held)
      pool.put(std::move(b));
    for (int i = 0; i < 40; ++i)  // reuse announces nothing new
      pool.put(std::move(*pool.get(std::size_t{4096} << (i % BufferPool::kClasses))));
    EXPECT_EQ(registry.added(), pool.slab_count());
  }
  EXPECT_EQ(registry.removed(), registry.added());
  EXPECT_EQ(registry.live(), 0u);
  EXPECT_EQ(registry.errors(), "");
}

TEST(BufferPool, EverySlabIsOfferedToTheDeviceAndTheRing) {
  RecordingRegistry device, ring;
  ring.set_refuse(true);  // a ring out of slots: its slabs still work
  {
    BufferPool pool(&device, &ring);
    auto a = pool.get(65536);
    ASSERT_TRUE(a.is_ok());
    EXPECT_EQ(pool.ring_registered_slab_count(), 0u);
    ring.set_refuse(false);
    auto b = pool.get(kMaxStripBytes);
    ASSERT_TRUE(b.is_ok());
    EXPECT_EQ(pool.registered_slab_count(), 2u);
    EXPECT_EQ(pool.ring_registered_slab_count(), 1u);
    EXPECT_TRUE(device.covers(a->data(), a->size()));
    EXPECT_TRUE(device.covers(b->data(), b->size()));
    EXPECT_TRUE(ring.covers(b->data(), b->size()));
    EXPECT_FALSE(ring.covers(a->data(), a->size()));
    pool.put(std::move(*a));
    pool.put(std::move(*b));
  }
  EXPECT_EQ(ring.add_calls(), 2u);
  EXPECT_EQ(ring.removed(), 1u) << "only what the ring accepted is withdrawn";
  EXPECT_EQ(device.live(), 0u);
  EXPECT_EQ(ring.live(), 0u);
  EXPECT_EQ(device.errors(), "");
  EXPECT_EQ(ring.errors(), "");
}

TEST(BufferPool, RefusedRegistrationLeavesTheMemoryUsableAndIsNotWithdrawn) {
  RecordingRegistry registry;
  registry.set_refuse(true);
  {
    BufferPool pool(&registry);
    auto a = pool.get(65536);
    ASSERT_TRUE(a.is_ok());
    std::memset(a->data(), 0x5a, a->size());
    EXPECT_EQ(pool.registered_slab_count(), 0u);
    registry.set_refuse(false);
    auto b = pool.get(kMaxStripBytes);  // a new slab: offered again, accepted this time
    ASSERT_TRUE(b.is_ok());
    EXPECT_EQ(pool.registered_slab_count(), 1u);
    EXPECT_TRUE(registry.covers(b->data(), b->size()));
    EXPECT_FALSE(registry.covers(a->data(), a->size()));
    pool.put(std::move(*a));
    pool.put(std::move(*b));
  }
  EXPECT_EQ(registry.add_calls(), 2u);
  EXPECT_EQ(registry.added(), 1u);
  EXPECT_EQ(registry.removed(), 1u) << "only the accepted slab is withdrawn";
  EXPECT_EQ(registry.errors(), "");
}

}  // namespace
}  // namespace graid
