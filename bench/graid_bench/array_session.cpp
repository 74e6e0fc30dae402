#include "array_session.h"
#include "backend.h"

#include <utility>

#include "graid/array.h"
#include "graid/member.h"
#include "graid/parity.h"

namespace graid::bench {

struct ArraySession::Impl {
  // Declared before the array so it is destroyed after it: the array holds a raw pointer to it.
  std::unique_ptr<ParityBackend> parity;
  std::unique_ptr<Array> array;
  bool stopped = false;
};

ArraySession::ArraySession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ArraySession::~ArraySession() {
  if (impl_ && impl_->array && !impl_->stopped) {
    // Best effort on early exits; the normal path calls stop() and reports its error.
    (void)impl_->array->stop();
  }
}

Result<std::unique_ptr<ArraySession>> ArraySession::create(const ArraySpec& spec) {
  auto impl = std::make_unique<Impl>();
  auto parity = open_backend(spec.backend);
  if (!parity.is_ok()) return parity.status();
  impl->parity = std::move(*parity);

  std::vector<std::unique_ptr<MemberDevice>> members;
  for (const std::string& path : spec.paths) {
    // The member files exist already: MemberSet made and zeroed them before the raw baseline,
    // which runs before the array exists. Block devices are opened exclusively (the default).
    OpenOptions open;
    open.create = false;
    auto member = open_member(path, open);
    if (!member.is_ok()) return member.status();
    members.push_back(std::move(*member));
  }

  CreateOptions create;
  create.level = spec.level;
  create.strip_bytes = spec.strip_bytes;
  create.name = "graid-bench";
  create.assume_clean = true;
  ArrayOptions options;
  options.parity = impl->parity.get();
  auto array = Array::create(std::move(members), create, options, spec.force);
  if (!array.is_ok()) return array.status();
  impl->array = std::move(*array);
  return std::make_unique<ArraySession>(std::move(impl));
}

Array& ArraySession::array() noexcept {
  return *impl_->array;
}

std::uint64_t ArraySession::data_offset() const noexcept {
  return impl_->array->member_data_offset();
}

std::uint64_t ArraySession::capacity() const noexcept {
  return impl_->array->capacity();
}

std::string_view ArraySession::backend_name() const noexcept {
  return impl_->parity->name();
}

Status ArraySession::stop() {
  impl_->stopped = true;
  return impl_->array->stop();
}

}  // namespace graid::bench
