// TLS for the NBD server (docs/nbd.md, "TLS"): the server side of a TLS session with pre-shared
// keys (GnuTLS), driven by the session's own socket operations rather than by GnuTLS reading and
// writing the socket. Ciphertext the socket received is handed in (input_space(), received());
// ciphertext GnuTLS wants sent collects in pending(), which the caller sends and clears. So a
// session never blocks and the NBD server keeps doing all its socket I/O on its ring.
//
// Keys: a PSK file in the format of GnuTLS's psktool, qemu-nbd and nbdkit: one "identity:key"
// per line, the key in hex. Loaded once, when the export starts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graid/status.h"

namespace graid::nbd {

class TlsPskKeys {
 public:
  // Reads `path`, as ssh reads a private key: opened without following a link or blocking, the
  // descriptor checked (a regular file of at most 1 MiB, owned by root or graidd's effective uid,
  // no group or other access), and every directory above it owned by root or that uid and not
  // writable by group or other users (a sticky directory of root's, /tmp, passes).
  // kInvalidArgument, naming the rule or the line, for a file that breaks one, is not in the
  // format above or holds no key; kNotFound when it cannot be opened.
  static Result<std::shared_ptr<const TlsPskKeys>> load(const std::string& path);
  // The key of `identity`, or nullptr.
  const std::vector<std::uint8_t>* find(const std::string& identity) const;
  std::size_t size() const noexcept { return keys_.size(); }

 private:
  std::map<std::string, std::vector<std::uint8_t>, std::less<>> keys_;
};

class TlsServerSession {
 public:
  static Result<std::unique_ptr<TlsServerSession>> create(std::shared_ptr<const TlsPskKeys> keys);
  ~TlsServerSession();
  TlsServerSession(const TlsServerSession&) = delete;
  TlsServerSession& operator=(const TlsServerSession&) = delete;

  // Where the next socket read goes, and how much arrived there. Only while everything received
  // before has been consumed (a handshake() or read() asked for more input).
  std::span<std::byte> input_space();
  void received(std::size_t n);
  bool input_left() const noexcept { return in_pos_ < in_len_; }

  enum class Progress : std::uint8_t { kDone, kWantInput, kFailed };
  // Advances the handshake with what was received; kFailed with error() saying why.
  Progress handshake();
  bool established() const noexcept { return established_; }

  struct ReadResult {
    enum class State : std::uint8_t { kData, kWantInput, kClosed, kFailed } state;
    std::size_t bytes = 0;
  };
  // Decrypts into dst (kData: 1..dst.size() bytes); kClosed when the peer ended the session.
  ReadResult read(std::span<std::byte> dst);
  // Encrypts `plain` into pending().
  Status write(std::span<const std::byte> plain);

  // Ciphertext to send, in order. The caller takes it (swap) before sending it.
  std::vector<std::byte>& pending() noexcept { return out_; }

  // The PSK identity the client used (after the handshake).
  std::string identity() const;
  const std::string& error() const noexcept { return error_; }

 private:
  struct Impl;
  TlsServerSession() = default;
  static long pull(void* self, void* data, std::size_t len);
  static long push(void* self, const void* data, std::size_t len);

  std::unique_ptr<Impl> impl_;
  std::shared_ptr<const TlsPskKeys> keys_;
  std::vector<std::byte> in_;
  std::size_t in_pos_ = 0, in_len_ = 0;
  std::vector<std::byte> out_;
  bool established_ = false;
  std::string error_;
};

}  // namespace graid::nbd
