#include "array/superblock_io.h"

#include <algorithm>
#include <chrono>

#include "meta/metadata_io.h"

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
  // No magic: not a damaged superblock but none at all (a blank or erased device).
  if (!std::equal(meta::kSuperblockMagic.begin(), meta::kSuperblockMagic.end(),
                  buf->span().begin())) {
    return make_error(Errc::kNotFound, "{}: no graid superblock", m.path());
  }
  return meta::decode(buf->span());
}

Result<GraidMetadata> find_graid_metadata(MemberDevice& m) {
  using Kind = GraidMetadata::Kind;
  auto buf = AlignedBuffer::allocate(meta::kSuperblockSize, 4096);
  if (!buf) return buf.status();
  if (Status st = m.read_sync(meta::kSuperblockOffset, buf->span()); !st) {
    return make_error(st.code(), "{}: reading its first block to look for graid metadata: {}",
                      m.path(), st.message());
  }
  const auto version = meta::peek_version(buf->span());
  if (!version) return GraidMetadata{};
  auto sb = meta::decode(buf->span());
  if (sb) {
    return GraidMetadata{Kind::kSuperblock,
                         fmt::format("the superblock of graid array {} ('{}', slot {})",
                                     sb->array_uuid.to_string(), sb->name, sb->member_index)};
  }
  if (sb.status().code() == Errc::kUnsupported) {
    return GraidMetadata{
        Kind::kUnknownFormat,
        fmt::format("graid metadata of format {}.{}, {} this build ({}.{})", version->major,
                    version->minor,
                    version->major > meta::kMajorVersion ? "newer than" : "unknown to",
                    meta::kMajorVersion, meta::kMinorVersion)};
  }
  return GraidMetadata{Kind::kDamaged,
                       fmt::format("a damaged graid superblock ({})", sb.status().message())};
}

std::vector<std::shared_ptr<MemberDevice>> live_members(const Array::State& s) {
  std::vector<std::shared_ptr<MemberDevice>> out;
  for (std::uint32_t m = 0; m < s.members.size(); ++m) {
    out.push_back(s.is_failed(m) ? nullptr : s.members[m]);
  }
  return out;
}

std::vector<std::shared_ptr<MemberDevice>> writing_members(const Array::State& s) {
  std::vector<std::shared_ptr<MemberDevice>> out;
  for (std::uint32_t m = 0; m < s.members.size(); ++m) {
    out.push_back(s.takes_writes(m) ? s.members[m] : nullptr);
  }
  return out;
}

std::vector<Status> write_superblock_copies(std::span<const std::shared_ptr<MemberDevice>> members,
                                            const meta::Superblock& sb,
                                            std::chrono::milliseconds timeout) {
  // Shared with the workers: a write that outlives the timeout still has its image.
  auto images = std::make_shared<std::vector<AlignedBuffer>>();
  images->reserve(members.size());
  for (std::uint32_t m = 0; m < members.size(); ++m) {
    auto buf = AlignedBuffer::allocate(meta::kSuperblockSize, 4096);
    if (!buf) return std::vector<Status>(members.size(), buf.status());
    images->push_back(std::move(*buf));
    if (members[m] == nullptr) continue;
    meta::Superblock copy = sb;
    copy.member_index = m;
    copy.member_uuid = sb.members[m].uuid;
    if (Status st = meta::encode(copy, images->back().span()); !st) {
      return std::vector<Status>(members.size(), st);
    }
  }
  return meta::run_on_members(members, timeout, [images](MemberDevice& dev, std::uint32_t m) {
    GRAID_RETURN_IF_ERROR(dev.write_sync(meta::kSuperblockOffset, (*images)[m].span()));
    return dev.flush_sync();
  });
}

std::vector<Status> flush_members(std::span<const std::shared_ptr<MemberDevice>> members,
                                  std::chrono::milliseconds timeout) {
  return meta::run_on_members(members, timeout,
                              [](MemberDevice& dev, std::uint32_t) { return dev.flush_sync(); });
}

}  // namespace graid
