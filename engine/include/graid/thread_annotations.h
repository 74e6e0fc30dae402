// Locking annotations checked by clang's -Wthread-safety, and the mutex and lock types that carry
// them.
//
// Shared state names the mutex that guards it, and functions name the mutexes they need:
//
//   graid::Mutex mu;
//   int count GUARDED_BY(mu) = 0;
//   void bump_locked() REQUIRES(mu);   // caller holds mu
//   void bump() EXCLUDES(mu) {         // caller must not hold mu (it takes it)
//     graid::MutexLock lock(mu);
//     bump_locked();
//   }
//
// clang then proves at compile time that every access to `count` happens with `mu` held (the
// `thread-safety` preset builds with -Wthread-safety -Werror). With any other compiler the macros
// expand to nothing and Mutex is a plain std::mutex. See clang's "Thread Safety Analysis" manual
// for the attributes; the analysis is intraprocedural and follows only locks it can see by name:
//   - Take locks through MutexLock / UniqueLock (or Mutex::lock/unlock), not std::lock_guard or
//     std::unique_lock over Mutex::native(): those are invisible to it.
//   - Lambdas are analysed as functions of their own, holding nothing: a condition-variable
//     predicate that reads guarded state must be a loop in the caller instead
//     (`while (!ready) lock.wait(cv);`).
//   - Locks held in containers (a vector of page locks) cannot be followed; code that must do
//     that uses NO_THREAD_SAFETY_ANALYSIS, in as small a function as possible, saying why.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__) && defined(__has_attribute)
#if __has_attribute(capability)
#define GRAID_THREAD_ANNOTATION(x) __attribute__((x))
#endif
#endif
#ifndef GRAID_THREAD_ANNOTATION
#define GRAID_THREAD_ANNOTATION(x)  // not clang: no analysis
#endif

// A type that is a capability (a mutex): CAPABILITY("mutex").
#define CAPABILITY(x) GRAID_THREAD_ANNOTATION(capability(x))
// An RAII type that holds capabilities for its lifetime (MutexLock, UniqueLock).
#define SCOPED_CAPABILITY GRAID_THREAD_ANNOTATION(scoped_lockable)
// A data member read and written only with the capability held.
#define GUARDED_BY(x) GRAID_THREAD_ANNOTATION(guarded_by(x))
// A pointer (or smart pointer) member whose pointee is accessed only with the capability held.
#define PT_GUARDED_BY(x) GRAID_THREAD_ANNOTATION(pt_guarded_by(x))
// The function acquires / releases the capabilities (none named: `this`, or on a scoped
// capability, the capabilities it manages).
#define ACQUIRE(...) GRAID_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) GRAID_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// The function acquires the capabilities when it returns `result` (true for try_lock).
#define TRY_ACQUIRE(...) GRAID_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// The caller must hold the capabilities.
#define REQUIRES(...) GRAID_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// The caller must not hold the capabilities (the function takes them itself).
#define EXCLUDES(...) GRAID_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// The function returns a reference to the named capability.
#define RETURN_CAPABILITY(x) GRAID_THREAD_ANNOTATION(lock_returned(x))
// The function checks at run time that the capability is held (the analysis then assumes it).
#define ASSERT_CAPABILITY(x) GRAID_THREAD_ANNOTATION(assert_capability(x))
// Turns the analysis off for one function. Only where it cannot follow the locking (a lock handed
// between threads, locks held in a container), always with a comment saying why.
#define NO_THREAD_SAFETY_ANALYSIS GRAID_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace graid {

// std::mutex as a capability. Lock it through MutexLock or UniqueLock.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

  // The std::mutex underneath, for the rare code the analysis cannot follow. Locking it directly
  // is invisible to the analysis; to wait on a condition variable use UniqueLock::wait*.
  std::mutex& native() noexcept { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope, like std::lock_guard.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// Holds a Mutex for its scope like std::unique_lock: it can be let go and taken again in the
// middle (unlock() / lock(), which the analysis follows), and waits on a std::condition_variable
// (which releases and retakes the mutex inside, so for the analysis it stays held throughout).
// Waits have no predicate overloads: write the loop, so the analysis sees the guarded reads.
class SCOPED_CAPABILITY UniqueLock {
 public:
  explicit UniqueLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.native()) {}
  ~UniqueLock() RELEASE() {}  // lock_ unlocks if it still holds the mutex
  UniqueLock(const UniqueLock&) = delete;
  UniqueLock& operator=(const UniqueLock&) = delete;

  void lock() ACQUIRE() { lock_.lock(); }
  void unlock() RELEASE() { lock_.unlock(); }

  void wait(std::condition_variable& cv) { cv.wait(lock_); }
  template <typename Clock, typename Duration>
  std::cv_status wait_until(std::condition_variable& cv,
                            const std::chrono::time_point<Clock, Duration>& deadline) {
    return cv.wait_until(lock_, deadline);
  }
  template <typename Rep, typename Period>
  std::cv_status wait_for(std::condition_variable& cv,
                          const std::chrono::duration<Rep, Period>& timeout) {
    return cv.wait_for(lock_, timeout);
  }

  // The std::unique_lock underneath (for a condition_variable_any or similar).
  std::unique_lock<std::mutex>& native() noexcept { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace graid
