// NbdSession's handshake: client flags and options, one at a time. Each option's reply is sent
// in full before the next option is read, so a client that sends ahead gains nothing.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "nbd/nbd_session.h"

namespace graid::nbd {

void NbdSession::send_handshake(std::vector<std::byte> bytes, AfterSend then) {
  hs_bytes_ = std::move(bytes);
  after_send_ = then;
  hs_out_.iov[0] = iovec{hs_bytes_.data(), hs_bytes_.size()};
  hs_out_.iovcnt = 1;
  queue_send(hs_out_);
}

void NbdSession::handshake_sent() {
  switch (after_send_) {
    case AfterSend::kReadClientFlags:
      return read_into(std::span(hs_in_).first(kClientFlagsSize), Recv::kClientFlags);
    case AfterSend::kReadOption:
      return read_into(hs_in_, Recv::kOptionHeader);
    case AfterSend::kTransmission:
      phase_ = Phase::kTransmission;
      serving_ = std::chrono::system_clock::now();
      ++shared_.stats->connections;
      return read_next_header();
    case AfterSend::kClose:
      return hard_close();
    case AfterSend::kStartTls:
      return tls_start();
  }
}

void NbdSession::on_client_flags() {
  auto flags = parse_client_flags(std::span(hs_in_).first(kClientFlagsSize));
  if (!flags)
    return fail_handshake(NbdServer::Shared::HandshakeEnd::kProtocol, flags.status().message());
  fixed_newstyle_ = (*flags & kFlagFixedNewstyle) != 0;
  no_zeroes_ = (*flags & kFlagNoZeroes) != 0;
  read_into(hs_in_, Recv::kOptionHeader);
}

void NbdSession::on_option_header() {
  Status s = parse_option_header(hs_in_, option_);
  if (s.code() == Errc::kNoSpace && fixed_newstyle_ && option_.option != kOptExportName) {
    // Too long to read: say so, then close (the data that follows is never read).
    return send_handshake(encode_option_error(option_.option, kRepErrTooBig, s.message()),
                          AfterSend::kClose);
  }
  if (!s) return fail_handshake(NbdServer::Shared::HandshakeEnd::kProtocol, s.message());
  option_data_.resize(option_.length);
  if (option_.length == 0) return on_option_data();
  read_into(option_data_, Recv::kOptionData);
}

std::uint16_t NbdSession::flags_for(const ServedExport& e) const {
  return static_cast<std::uint16_t>(e.flags | (structured_ ? kFlagSendDf : 0));
}

void NbdSession::on_option_data() {
  const std::uint32_t opt = option_.option;
  const bool tls_required = shared_.options.tls != nullptr && !tls_;
  if (opt == kOptExportName) {
    // No way to say why to EXPORT_NAME: the connection is closed.
    if (tls_required)
      return fail_handshake(NbdServer::Shared::HandshakeEnd::kProtocol, "EXPORT_NAME before TLS");
    auto name = parse_export_name(option_data_);
    export_ = name ? shared_.find(*name) : nullptr;
    if (export_ == nullptr || shared_.stopping)
      return fail_handshake(NbdServer::Shared::HandshakeEnd::kProtocol, "EXPORT_NAME of no export");
    if (!admit_client()) return hard_close();
    return send_handshake(
        encode_export_name_reply(export_->vd.size, flags_for(*export_), no_zeroes_),
        AfterSend::kTransmission);
  }
  if (!fixed_newstyle_) return hard_close();  // only EXPORT_NAME exists without fixed newstyle
  if (shared_.stopping && opt != kOptAbort) {
    return send_handshake(encode_option_error(opt, kRepErrShutdown, "the server is stopping"),
                          AfterSend::kReadOption);
  }
  if (opt == kOptStartTls) {
    if (shared_.options.tls == nullptr)
      return send_handshake(
          encode_option_error(opt, kRepErrUnsup, "TLS is not configured for this export"),
          AfterSend::kReadOption);
    if (tls_ || !option_data_.empty())
      return send_handshake(
          encode_option_error(opt, kRepErrInvalid,
                              tls_ ? "TLS is on already" : "STARTTLS takes no data"),
          AfterSend::kReadOption);
    return send_handshake(encode_option_reply(opt, kRepAck), AfterSend::kStartTls);
  }
  if (tls_required && opt != kOptAbort) {
    return send_handshake(
        encode_option_error(opt, kRepErrTlsReqd, "this export requires TLS (NBD_OPT_STARTTLS)"),
        AfterSend::kReadOption);
  }
  switch (opt) {
    case kOptAbort:
      return send_handshake(encode_option_reply(opt, kRepAck), AfterSend::kClose);
    case kOptList: {
      if (!option_data_.empty()) break;
      std::vector<std::byte> out;
      for (const ServedExport& e : shared_.exports) {
        auto one = encode_rep_server(opt, e.spec.name, e.spec.description);
        out.insert(out.end(), one.begin(), one.end());
      }
      auto ack = encode_option_reply(opt, kRepAck);
      out.insert(out.end(), ack.begin(), ack.end());
      return send_handshake(std::move(out), AfterSend::kReadOption);
    }
    case kOptInfo:
    case kOptGo:
      return handle_info_or_go();
    case kOptStructuredReply:
      if (!option_data_.empty()) break;
      structured_ = true;
      return send_handshake(encode_option_reply(opt, kRepAck), AfterSend::kReadOption);
    default:
      return send_handshake(encode_option_error(opt, kRepErrUnsup, "option not supported"),
                            AfterSend::kReadOption);
  }
  send_handshake(encode_option_error(opt, kRepErrInvalid, "this option takes no data"),
                 AfterSend::kReadOption);
}

void NbdSession::handle_info_or_go() {
  const std::uint32_t opt = option_.option;
  auto req = parse_info_request(option_data_);
  if (!req) {
    return send_handshake(encode_option_error(opt, kRepErrInvalid, req.status().message()),
                          AfterSend::kReadOption);
  }
  const ServedExport* e = shared_.find(req->name);
  if (e == nullptr) {
    const std::string why = req->name.empty() ? "no default export: name one (NBD_OPT_LIST)"
                                              : "no export named '" + req->name + "'";
    return send_handshake(encode_option_error(opt, kRepErrUnknown, why), AfterSend::kReadOption);
  }
  std::vector<std::byte> out;
  auto add = [&out](const std::vector<std::byte>& m) { out.insert(out.end(), m.begin(), m.end()); };
  add(encode_info_export(opt, e->vd.size, flags_for(*e)));
  auto wants = [&req](std::uint16_t info) {
    return std::find(req->infos.begin(), req->infos.end(), info) != req->infos.end();
  };
  if (wants(kInfoName)) add(encode_info_name(opt, e->spec.name));
  if (wants(kInfoDescription) && !e->spec.description.empty())
    add(encode_info_description(opt, e->spec.description));
  // Always: requests must be aligned to the minimum, whether or not the client asked.
  add(encode_info_block_size(opt, e->limits.block, e->preferred_block, e->limits.max_payload));
  add(encode_option_reply(opt, kRepAck));
  if (opt == kOptGo && !admit_client()) {
    return send_handshake(
        encode_option_error(opt, kRepErrPolicy,
                            fmt::format("the server serves its maximum of {} clients",
                                        shared_.options.max_connections)),
        AfterSend::kClose);
  }
  if (opt == kOptGo) export_ = e;
  send_handshake(std::move(out), opt == kOptGo ? AfterSend::kTransmission : AfterSend::kReadOption);
}

}  // namespace graid::nbd
