// ForwardingMember: a MemberDevice that passes every call to a device it shares. Use it as it is
// (the test keeps the device alive past an array that closes its member, to poke it from another
// thread), or derive from it to intercept a few calls (GateMember).
#pragma once

#include <memory>
#include <span>
#include <string>

#include "graid/member.h"

namespace graid::testing {

class ForwardingMember : public MemberDevice {
 public:
  explicit ForwardingMember(std::shared_ptr<MemberDevice> inner) : inner_(std::move(inner)) {}

  const std::string& path() const noexcept override { return inner_->path(); }
  std::uint64_t size() const noexcept override { return inner_->size(); }
  bool direct_io() const noexcept override { return inner_->direct_io(); }
  MemberIoMode io_mode() const noexcept override { return inner_->io_mode(); }
  std::uint32_t logical_block_size() const noexcept override {
    return inner_->logical_block_size();
  }
  DeviceIdentity identity() const noexcept override { return inner_->identity(); }
  bool reads_zeroes(std::uint64_t offset, std::uint64_t len) override {
    return inner_->reads_zeroes(offset, len);
  }
  Status zero_range(std::uint64_t offset, std::uint64_t len) override {
    return inner_->zero_range(offset, len);
  }
  void submit(IoContext& ctx, MemberRequest& req) override { inner_->submit(ctx, req); }
  Status read_sync(std::uint64_t offset, std::span<std::byte> buf) override {
    return inner_->read_sync(offset, buf);
  }
  Status write_sync(std::uint64_t offset, std::span<const std::byte> buf) override {
    return inner_->write_sync(offset, buf);
  }
  Status flush_sync() override { return inner_->flush_sync(); }

 protected:
  MemberDevice& inner() noexcept { return *inner_; }

 private:
  std::shared_ptr<MemberDevice> inner_;
};

}  // namespace graid::testing
