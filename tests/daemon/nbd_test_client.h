// A minimal blocking NBD client over a raw socket, for tests that must send exactly the bytes
// they choose (pipelined requests, hostile input) and read the server's replies back.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nbd/nbd_protocol.h"

namespace graid::testing {

class NbdTestClient {
 public:
  NbdTestClient() = default;
  ~NbdTestClient() { close(); }
  NbdTestClient(const NbdTestClient&) = delete;
  NbdTestClient& operator=(const NbdTestClient&) = delete;

  bool connect_unix(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    set_timeout();
    return ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  bool connect_tcp(std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    set_timeout();
    return ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  // From local address `source` (another loopback address, 127.0.0.2...: another peer).
  bool connect_tcp_from(std::uint16_t port, const char* source) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &local.sin_addr);
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    set_timeout();
    return ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  // How long a read or send may wait from now on.
  void set_timeout(std::chrono::milliseconds limit) {
    timeval tv{static_cast<time_t>(limit.count() / 1000),
               static_cast<suseconds_t>(limit.count() % 1000 * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
  // True when the server has closed the connection by now: nothing more to read and EOF (data
  // not yet read is read and dropped). Does not wait.
  bool closed_now() {
    std::byte b[4096];
    for (;;) {
      const ssize_t r = ::recv(fd_, b, sizeof(b), MSG_DONTWAIT);
      if (r > 0) continue;
      if (r == 0) return true;
      if (errno == EINTR) continue;
      return errno == ECONNRESET;
    }
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd() const { return fd_; }

  bool send_bytes(std::span<const std::byte> b) {
    std::size_t done = 0;
    while (done < b.size()) {
      const ssize_t n = ::send(fd_, b.data() + done, b.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
    }
    return true;
  }
  // Exactly `n` bytes, or nullopt on EOF, error or timeout.
  std::optional<std::vector<std::byte>> recv_bytes(std::size_t n) {
    std::vector<std::byte> b(n);
    std::size_t done = 0;
    while (done < n) {
      const ssize_t r = ::recv(fd_, b.data() + done, n - done, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return std::nullopt;
      done += static_cast<std::size_t>(r);
    }
    return b;
  }
  // True when the server closed the connection (EOF) within the timeout.
  bool sees_eof() {
    std::byte b[256];
    for (;;) {
      const ssize_t r = ::recv(fd_, b, sizeof(b), 0);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) return true;
      if (r < 0) return errno == ECONNRESET;
    }
  }

  static std::uint64_t be(std::span<const std::byte> b, std::size_t at, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
      v = (v << 8) | std::to_integer<std::uint8_t>(b[at + static_cast<std::size_t>(i)]);
    return v;
  }
  static void put(std::vector<std::byte>& out, std::uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i)
      out.push_back(static_cast<std::byte>(v >> (8 * i)));
  }

  bool send_option(std::uint32_t option, std::span<const std::byte> data) {
    std::vector<std::byte> m;
    put(m, nbd::kOptMagic, 8);
    put(m, option, 4);
    put(m, data.size(), 4);
    m.insert(m.end(), data.begin(), data.end());
    return send_bytes(m);
  }
  struct OptionReply {
    std::uint32_t option = 0, type = 0;
    std::vector<std::byte> data;
  };
  std::optional<OptionReply> recv_option_reply() {
    auto h = recv_bytes(20);
    if (!h || be(*h, 0, 8) != nbd::kOptReplyMagic) return std::nullopt;
    OptionReply r;
    r.option = static_cast<std::uint32_t>(be(*h, 8, 4));
    r.type = static_cast<std::uint32_t>(be(*h, 12, 4));
    auto d = recv_bytes(be(*h, 16, 4));
    if (!d) return std::nullopt;
    r.data = std::move(*d);
    return r;
  }

  // Greeting and client flags.
  bool greet(std::uint32_t flags = nbd::kFlagFixedNewstyle | nbd::kFlagNoZeroes) {
    auto g = recv_bytes(nbd::kGreetingSize);
    if (!g || be(*g, 0, 8) != nbd::kNbdMagic || be(*g, 8, 8) != nbd::kOptMagic) return false;
    std::vector<std::byte> f;
    put(f, flags, 4);
    return send_bytes(f);
  }

  // Full handshake: greeting, optionally STRUCTURED_REPLY, GO on `name`. Fills size/flags.
  bool handshake(const std::string& name, bool structured) {
    if (!greet()) return false;
    if (structured) {
      if (!send_option(nbd::kOptStructuredReply, {})) return false;
      auto r = recv_option_reply();
      if (!r || r->type != nbd::kRepAck) return false;
      structured_ = true;
    }
    std::vector<std::byte> go;
    put(go, name.size(), 4);
    for (char c : name)
      go.push_back(static_cast<std::byte>(c));
    put(go, 1, 2);
    put(go, nbd::kInfoBlockSize, 2);
    if (!send_option(nbd::kOptGo, go)) return false;
    for (;;) {
      auto r = recv_option_reply();
      if (!r) return false;
      if (r->type == nbd::kRepAck) return true;
      if (r->type != nbd::kRepInfo) return false;
      if (be(r->data, 0, 2) == nbd::kInfoExport) {
        size_ = be(r->data, 2, 8);
        flags_ = static_cast<std::uint16_t>(be(r->data, 10, 2));
      }
    }
  }

  bool send_request(std::uint16_t type, std::uint16_t flags, std::uint64_t handle,
                    std::uint64_t offset, std::uint32_t length,
                    std::span<const std::byte> payload = {}) {
    std::vector<std::byte> m;
    put(m, nbd::kRequestMagic, 4);
    put(m, flags, 2);
    put(m, type, 2);
    put(m, handle, 8);
    put(m, offset, 8);
    put(m, length, 4);
    m.insert(m.end(), payload.begin(), payload.end());
    return send_bytes(m);
  }

  struct Reply {
    std::uint64_t handle = 0;
    std::uint32_t error = 0;
    std::vector<std::byte> data;  // READ data (structured: the offset-data chunks' data)
  };
  // One complete reply. `read_len_of(handle)` says how many data bytes a simple reply to a
  // successful READ carries (0 for other commands).
  template <typename ReadLen>
  std::optional<Reply> recv_reply(ReadLen read_len_of) {
    Reply out;
    for (;;) {
      auto magic = recv_bytes(4);
      if (!magic) return std::nullopt;
      const auto m = be(*magic, 0, 4);
      if (m == nbd::kSimpleReplyMagic) {
        auto h = recv_bytes(12);
        if (!h) return std::nullopt;
        out.error = static_cast<std::uint32_t>(be(*h, 0, 4));
        out.handle = be(*h, 4, 8);
        const std::size_t n = out.error == 0 ? read_len_of(out.handle) : 0;
        auto d = recv_bytes(n);
        if (!d) return std::nullopt;
        out.data = std::move(*d);
        return out;
      }
      if (m != nbd::kStructuredReplyMagic) return std::nullopt;
      auto h = recv_bytes(16);
      if (!h) return std::nullopt;
      const auto flags = be(*h, 0, 2), type = be(*h, 2, 2);
      out.handle = be(*h, 4, 8);
      auto payload = recv_bytes(be(*h, 12, 4));
      if (!payload) return std::nullopt;
      if (type == nbd::kReplyTypeOffsetData) {
        out.data.insert(out.data.end(), payload->begin() + 8, payload->end());
      } else if (type == nbd::kReplyTypeError) {
        out.error = static_cast<std::uint32_t>(be(*payload, 0, 4));
      }
      if ((flags & nbd::kReplyFlagDone) != 0) return out;
    }
  }

  std::uint64_t size() const { return size_; }
  std::uint16_t flags() const { return flags_; }
  bool structured() const { return structured_; }

 private:
  void set_timeout() {
    timeval tv{20, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }

  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint16_t flags_ = 0;
  bool structured_ = false;
};

}  // namespace graid::testing
