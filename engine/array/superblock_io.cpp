#include "array/superblock_io.h"

#include <chrono>
#include <thread>

namespace graid {

std::uint64_t wall_clock_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

Result<meta::Superblock> read_superblock(MemberDevice& m) {
  auto buf = AlignedBuffer::allocate(meta::kSuperblockSize, 4096);
  if (!buf) return buf.status();
  GRAID_RETURN_IF_ERROR(m.read_sync(meta::kSuperblockOffset, buf->span()));
  return meta::decode(buf->span());
}

std::vector<MemberDevice*> live_pointers(const Array::State& s) {
  std::vector<MemberDevice*> out;
  for (std::uint32_t m = 0; m < s.members.size(); ++m) {
    out.push_back(s.is_failed(m) ? nullptr : s.members[m].get());
  }
  return out;
}

std::vector<Status> write_superblock_copies(std::span<MemberDevice* const> members,
                                            const meta::Superblock& sb) {
  std::vector<Status> result(members.size());
  std::vector<AlignedBuffer> images;
  images.reserve(members.size());
  for (std::uint32_t m = 0; m < members.size(); ++m) {
    auto buf = AlignedBuffer::allocate(meta::kSuperblockSize, 4096);
    if (!buf) {
      result.assign(members.size(), buf.status());
      return result;
    }
    images.push_back(std::move(*buf));
    if (members[m] == nullptr) continue;
    meta::Superblock copy = sb;
    copy.member_index = m;
    copy.member_uuid = sb.members[m].uuid;
    if (Status st = meta::encode(copy, images.back().span()); !st) {
      result.assign(members.size(), st);
      return result;
    }
  }
  auto write_one = [&](std::uint32_t m) {
    Status st = members[m]->write_sync(meta::kSuperblockOffset, images[m].span());
    if (st) st = members[m]->flush_sync();
    result[m] = std::move(st);
  };
  std::vector<std::jthread> workers;
  std::uint32_t last = static_cast<std::uint32_t>(members.size());
  for (std::uint32_t m = 0; m < members.size(); ++m) {
    if (members[m] == nullptr) continue;
    if (last == members.size()) {
      last = m;  // this thread writes one member itself
      continue;
    }
    workers.emplace_back(write_one, m);
  }
  if (last != members.size()) write_one(last);
  workers.clear();  // joins
  return result;
}

}  // namespace graid
