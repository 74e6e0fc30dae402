// A per-thread pool of reusable objects (stripe ops, member I/O records): after warm-up, no
// allocation per request. Every object stays owned by the pool; get() hands out a reference that
// is valid until put() returns it. Not thread-safe.
#pragma once

#include <memory>
#include <vector>

namespace graid {

template <typename T>
class ObjectPool {
 public:
  template <typename... Args>
  T& get(Args&&... args) {
    if (free_.empty()) {
      all_.push_back(std::make_unique<T>(std::forward<Args>(args)...));
      return *all_.back();
    }
    T* t = free_.back();
    free_.pop_back();
    return *t;
  }
  void put(T& t) { free_.push_back(&t); }
  // Objects handed out and not yet returned.
  std::size_t outstanding() const noexcept { return all_.size() - free_.size(); }

 private:
  std::vector<std::unique_ptr<T>> all_;
  std::vector<T*> free_;
};

}  // namespace graid
