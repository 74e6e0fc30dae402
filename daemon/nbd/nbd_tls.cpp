#include "nbd/nbd_tls.h"

#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace graid::nbd {

namespace {

// Room for one TLS record (16 KiB of data plus the largest overhead).
constexpr std::size_t kInputBytes = 16384 + 2048;
// PSK key exchanges, with ephemeral ECDH first (TLS 1.3 and 1.2), as qemu-nbd offers them.
constexpr const char* kPriority = "NORMAL:+ECDHE-PSK:+PSK";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

namespace {

// The largest key file read: a psktool file holds a line per client.
constexpr std::size_t kMaxKeyFileBytes = 1u << 20;

bool trusted_owner(uid_t uid) {
  return uid == 0 || uid == ::geteuid();
}

// Every directory from `dir` up to "/" (`dir` resolved: no links) is owned by root or graidd's
// user, and no other user can change what is in it: not writable by group or other, unless it is
// sticky and root's (/tmp, /dev/shm: others cannot rename or remove what they do not own there).
Status check_directories(const std::string& file, std::string dir) {
  for (;;) {
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0)
      return make_error(Errc::kNotFound, "the PSK file {}: cannot stat {}: {}", file, dir,
                        std::strerror(errno));
    if (!trusted_owner(st.st_uid))
      return make_error(Errc::kInvalidArgument,
                        "the PSK file {} is in {}, which uid {} owns: only root or graidd's user "
                        "may own the directories above a key file",
                        file, dir, st.st_uid);
    const bool shared = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    if (shared && !((st.st_mode & S_ISVTX) != 0 && st.st_uid == 0))
      return make_error(Errc::kInvalidArgument,
                        "the PSK file {} is in {}, which is writable by group or other users "
                        "(mode {:o}): they could replace the file; chmod go-w it",
                        file, dir, st.st_mode & 07777);
    if (dir == "/") return Status::ok();
    const auto slash = dir.rfind('/');
    dir = slash == 0 ? "/" : dir.substr(0, slash);
  }
}

}  // namespace

Result<std::shared_ptr<const TlsPskKeys>> TlsPskKeys::load(const std::string& path) {
  // The file itself, through a descriptor: no link followed, no open that blocks (a FIFO), and
  // what is checked is what is read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ELOOP)
      return make_error(Errc::kInvalidArgument,
                        "the PSK file {} is a symbolic link: name the file itself", path);
    return make_error(Errc::kNotFound, "cannot open the PSK file {}: {}", path,
                      std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return make_error(Errc::kNotFound, "cannot stat the PSK file {}: {}", path,
                      std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return make_error(Errc::kInvalidArgument, "the PSK file {} is not a regular file", path);
  if (!trusted_owner(st.st_uid))
    return make_error(Errc::kInvalidArgument,
                      "the PSK file {} is owned by uid {}: only root or graidd's user (uid {}) "
                      "may own a key file",
                      path, st.st_uid, ::geteuid());
  if ((st.st_mode & 077) != 0)
    return make_error(Errc::kInvalidArgument,
                      "the PSK file {} gives group or other users access (mode {:o}): chmod 600 "
                      "it",
                      path, st.st_mode & 07777);
  if (static_cast<std::uint64_t>(st.st_size) > kMaxKeyFileBytes)
    return make_error(Errc::kInvalidArgument, "the PSK file {} is larger than {} bytes", path,
                      kMaxKeyFileBytes);
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr)
    return make_error(Errc::kNotFound, "the PSK file {}: {}", path, std::strerror(errno));
  std::string dir = resolved;
  dir = dir.substr(0, std::max<std::size_t>(dir.rfind('/'), 1));
  GRAID_RETURN_IF_ERROR(check_directories(path, dir));
  // Read it whole (bounded: a file that grows meanwhile is refused).
  std::string text;
  std::array<char, 65536> chunk{};
  for (;;) {
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return make_error(Errc::kIoError, "reading the PSK file {}: {}", path, std::strerror(errno));
    if (n == 0) break;
    text.append(chunk.data(), static_cast<std::size_t>(n));
    if (text.size() > kMaxKeyFileBytes)
      return make_error(Errc::kInvalidArgument, "the PSK file {} is larger than {} bytes", path,
                        kMaxKeyFileBytes);
  }
  std::istringstream in(text);
  auto keys = std::make_shared<TlsPskKeys>();
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == line.size())
      return make_error(Errc::kInvalidArgument,
                        "the PSK file {}, line {}: expected identity:hexkey", path, number);
    const std::string hex = line.substr(colon + 1);
    if (hex.size() % 2 != 0 || hex.size() < 32)
      return make_error(Errc::kInvalidArgument,
                        "the PSK file {}, line {}: the key must be hex, 16 bytes or more "
                        "(psktool -u NAME -p FILE makes one)",
                        path, number);
    std::vector<std::uint8_t> key;
    for (std::size_t i = 0; i < hex.size(); i += 2) {
      const int hi = hex_value(hex[i]), lo = hex_value(hex[i + 1]);
      if (hi < 0 || lo < 0)
        return make_error(Errc::kInvalidArgument, "the PSK file {}, line {}: the key is not hex",
                          path, number);
      key.push_back(static_cast<std::uint8_t>(hi * 16 + lo));
    }
    if (!keys->keys_.emplace(line.substr(0, colon), std::move(key)).second)
      return make_error(Errc::kInvalidArgument, "the PSK file {}, line {}: identity '{}' repeats",
                        path, number, line.substr(0, colon));
  }
  if (keys->keys_.empty())
    return make_error(Errc::kInvalidArgument, "the PSK file {} holds no key", path);
  return std::shared_ptr<const TlsPskKeys>(std::move(keys));
}

const std::vector<std::uint8_t>* TlsPskKeys::find(const std::string& identity) const {
  auto it = keys_.find(identity);
  return it == keys_.end() ? nullptr : &it->second;
}

struct TlsServerSession::Impl {
  gnutls_session_t session = nullptr;
  gnutls_psk_server_credentials_t cred = nullptr;
  ~Impl() {
    if (session != nullptr) gnutls_deinit(session);
    if (cred != nullptr) gnutls_psk_free_server_credentials(cred);
  }
};

namespace {

int psk_key(gnutls_session_t session, const char* identity, gnutls_datum_t* key) {
  const auto* keys = static_cast<const TlsPskKeys*>(gnutls_session_get_ptr(session));
  const auto* k = keys != nullptr ? keys->find(identity) : nullptr;
  if (k == nullptr) return -1;  // an unknown identity: the handshake fails
  key->data = static_cast<unsigned char*>(gnutls_malloc(k->size()));
  if (key->data == nullptr) return -1;
  std::memcpy(key->data, k->data(), k->size());
  key->size = static_cast<unsigned>(k->size());
  return 0;
}

int pull_timeout(gnutls_transport_ptr_t, unsigned) {
  return 1;  // never asked to wait: the session is non-blocking and pull() says EAGAIN
}

}  // namespace

long TlsServerSession::pull(void* self, void* data, std::size_t len) {
  auto* s = static_cast<TlsServerSession*>(self);
  if (s->in_pos_ >= s->in_len_) {
    gnutls_transport_set_errno(s->impl_->session, EAGAIN);
    return -1;
  }
  const std::size_t n = std::min(len, s->in_len_ - s->in_pos_);
  std::memcpy(data, s->in_.data() + s->in_pos_, n);
  s->in_pos_ += n;
  return static_cast<long>(n);
}

long TlsServerSession::push(void* self, const void* data, std::size_t len) {
  auto* s = static_cast<TlsServerSession*>(self);
  const auto* p = static_cast<const std::byte*>(data);
  s->out_.insert(s->out_.end(), p, p + len);
  return static_cast<long>(len);
}

Result<std::unique_ptr<TlsServerSession>> TlsServerSession::create(
    std::shared_ptr<const TlsPskKeys> keys) {
  if (!keys) return make_error(Errc::kInvalidArgument, "TLS without keys");
  std::unique_ptr<TlsServerSession> s(new TlsServerSession());
  s->keys_ = std::move(keys);
  s->impl_ = std::make_unique<Impl>();
  s->in_.resize(kInputBytes);
  auto fail = [](const char* what, int rc) {
    return make_error(Errc::kInternal, "TLS: {}: {}", what, gnutls_strerror(rc));
  };
  int rc = gnutls_psk_allocate_server_credentials(&s->impl_->cred);
  if (rc < 0) return fail("credentials", rc);
  gnutls_psk_set_server_credentials_function(s->impl_->cred, psk_key);
  rc = gnutls_init(&s->impl_->session, GNUTLS_SERVER | GNUTLS_NONBLOCK);
  if (rc < 0) return fail("init", rc);
  gnutls_session_t ses = s->impl_->session;
  const char* where = nullptr;
  rc = gnutls_priority_set_direct(ses, kPriority, &where);
  if (rc < 0) return fail("priority", rc);
  rc = gnutls_credentials_set(ses, GNUTLS_CRD_PSK, s->impl_->cred);
  if (rc < 0) return fail("credentials", rc);
  gnutls_session_set_ptr(ses, const_cast<TlsPskKeys*>(s->keys_.get()));
  gnutls_transport_set_ptr(ses, s.get());
  gnutls_transport_set_pull_function(ses, [](gnutls_transport_ptr_t p, void* d, size_t n) {
    return static_cast<ssize_t>(pull(p, d, n));
  });
  gnutls_transport_set_push_function(ses, [](gnutls_transport_ptr_t p, const void* d, size_t n) {
    return static_cast<ssize_t>(push(p, d, n));
  });
  gnutls_transport_set_pull_timeout_function(ses, pull_timeout);
  gnutls_handshake_set_timeout(ses, 0);  // the NBD server has its own handshake timeout
  return s;
}

TlsServerSession::~TlsServerSession() = default;

std::span<std::byte> TlsServerSession::input_space() {
  in_pos_ = in_len_ = 0;
  return in_;
}

void TlsServerSession::received(std::size_t n) {
  in_pos_ = 0;
  in_len_ = std::min(n, in_.size());
}

TlsServerSession::Progress TlsServerSession::handshake() {
  for (;;) {
    const int rc = gnutls_handshake(impl_->session);
    if (rc == GNUTLS_E_SUCCESS) {
      established_ = true;
      return Progress::kDone;
    }
    if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED) return Progress::kWantInput;
    if (gnutls_error_is_fatal(rc) == 0) continue;  // a warning alert: go on
    error_ = gnutls_strerror(rc);
    return Progress::kFailed;
  }
}

TlsServerSession::ReadResult TlsServerSession::read(std::span<std::byte> dst) {
  for (;;) {
    const ssize_t n = gnutls_record_recv(impl_->session, dst.data(), dst.size());
    if (n > 0) return {ReadResult::State::kData, static_cast<std::size_t>(n)};
    if (n == 0) return {ReadResult::State::kClosed, 0};
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) return {ReadResult::State::kWantInput, 0};
    if (n == GNUTLS_E_REHANDSHAKE) continue;  // not offered: the client goes on without it
    if (gnutls_error_is_fatal(static_cast<int>(n)) == 0) continue;
    error_ = gnutls_strerror(static_cast<int>(n));
    return {ReadResult::State::kFailed, 0};
  }
}

Status TlsServerSession::write(std::span<const std::byte> plain) {
  while (!plain.empty()) {
    const ssize_t n = gnutls_record_send(impl_->session, plain.data(), plain.size());
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) continue;  // push() never blocks
    if (n < 0) {
      error_ = gnutls_strerror(static_cast<int>(n));
      return make_error(Errc::kIoError, "TLS: {}", error_);
    }
    plain = plain.subspan(static_cast<std::size_t>(n));
  }
  return {};
}

std::string TlsServerSession::identity() const {
  const char* id = gnutls_psk_server_get_username(impl_->session);
  return id != nullptr ? id : "";
}

}  // namespace graid::nbd
