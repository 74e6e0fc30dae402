// The control socket's wire format (daemon/control/control_protocol.h): requests accepted and
// refused with the exact reason, the limits (line length, depth, duplicate keys), responses byte
// for byte and parsed back, the error code and exit code tables, and random input that must
// never crash or throw.
#include "control/control_protocol.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace graid::control {
namespace {

using nlohmann::json;

struct Good {
  const char* line;
  RequestId id;
  const char* verb;
  const char* object;
  const char* args;  // JSON text
};

TEST(ControlProtocolTest, ParsesGoodRequests) {
  const Good kGood[] = {
      {R"({"id":1,"verb":"list","object":"pd"})", std::uint64_t{1}, "list", "pd", "{}"},
      {R"({"id":0,"verb":"version"})", std::uint64_t{0}, "version", "", "{}"},
      {R"({"id":"a-7","verb":"create","object":"dg","args":{"level":"raid5","pds":[0,1,2,3]}})",
       std::string("a-7"), "create", "dg", R"({"level":"raid5","pds":[0,1,2,3]})"},
      {R"({"id":18446744073709551615,"verb":"describe","object":"vd","args":{}})",
       std::uint64_t{18446744073709551615u}, "describe", "vd", "{}"},
      {"  {\"verb\":\"delete\", \"object\":\"vd\", \"id\":3}  \n", std::uint64_t{3}, "delete", "vd",
       "{}"},
      {"{\"id\":4,\"verb\":\"edit\",\"object\":\"pd\",\"args\":{\"marker\":\"offline\"}}\r\n",
       std::uint64_t{4}, "edit", "pd", R"({"marker":"offline"})"},
      {R"({"id":"\u00e9t\u00e9","verb":"export","object":"vd"})", std::string("\xc3\xa9t\xc3\xa9"),
       "export", "vd", "{}"},
      {R"({"id":5,"verb":"unexport","object":"vd","args":{"a":{"a":{"a":[1,{"b":null}]}}}})",
       std::uint64_t{5}, "unexport", "vd", R"({"a":{"a":{"a":[1,{"b":null}]}}})"},
      {R"({"id":6,"verb":"list","object":"event","args":{"x":1,"y":{"x":2}}})", std::uint64_t{6},
       "list", "event", R"({"x":1,"y":{"x":2}})"},  // the same key in different objects is fine
  };
  for (const Good& g : kGood) {
    SCOPED_TRACE(g.line);
    RequestId seen;
    auto r = parse_request(g.line, &seen);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->id, g.id);
    EXPECT_EQ(seen, g.id);
    EXPECT_EQ(r->verb, g.verb);
    EXPECT_EQ(r->object, g.object);
    EXPECT_EQ(r->args, json::parse(g.args));
  }
}

struct Bad {
  std::string line;
  const char* fragment;  // in the message
  bool id_read;          // whether parse_request reports the id (7) for the error response
};

TEST(ControlProtocolTest, RefusesBadRequestsSayingWhy) {
  const Bad kBad[] = {
      {"", "empty request line", false},
      {"\n", "empty request line", false},
      {"   ", "empty request line", false},
      {"hello", "not JSON: parse error at line 1, column 1: syntax error", false},
      {"{\"id\":1,", "not JSON: parse error", false},
      {"{\"id\":1} {\"id\":2}", "not JSON: parse error", false},  // trailing data
      {"{\"id\":1}\n{\"id\":2}", "newline inside a request line", false},
      {"{\"id\":\"\xff\",\"verb\":\"list\"}", "not JSON", false},  // invalid UTF-8
      {"[1,2]", "a request must be a JSON object, not array", false},
      {"42", "a request must be a JSON object, not number", false},
      {"null", "a request must be a JSON object, not null", false},
      {R"({"id":7,"verb":"list","id":8})", "duplicate key \"id\"", false},
      {R"({"id":7,"verb":"list","args":{"a":1,"a":2}})", "duplicate key \"a\"", false},
      {R"({"id":7,"verb":"list","args":{"x":[{"k":1,"k":1}]}})", "duplicate key \"k\"", false},
      {R"({"id":7,"verb":"list","flags":1})", "unknown field \"flags\"", false},
      {R"({"verb":"list"})", "missing field \"id\"", false},
      {R"({"id":-1,"verb":"list"})", "id must not be negative", false},
      {R"({"id":1.5,"verb":"list"})", "id must be a non-negative integer or a string", false},
      {R"({"id":1e30,"verb":"list"})", "id must be a non-negative integer or a string", false},
      {R"({"id":18446744073709551616,"verb":"list"})", "id must be a non-negative integer", false},
      {R"({"id":true,"verb":"list"})", "id must be a non-negative integer or a string", false},
      {R"({"id":null,"verb":"list"})", "id must be a non-negative integer or a string", false},
      {R"({"id":[7],"verb":"list"})", "id must be a non-negative integer or a string", false},
      {R"({"id":"","verb":"list"})", "id must not be an empty string", false},
      {R"({"id":")" + std::string(65, 'x') + R"(","verb":"list"})",
       "id string is 65 bytes, over the 64-byte limit", false},
      {R"({"id":7})", "missing field \"verb\"", true},
      {R"({"id":7,"verb":3})", "verb must be a string", true},
      {R"({"id":7,"verb":""})", "verb must not be empty", true},
      {R"({"id":7,"verb":"List"})", "verb \"List\" has a character outside [a-z0-9_]", true},
      {R"({"id":7,"verb":"li st"})", "has a character outside [a-z0-9_]", true},
      {R"({"id":7,"verb":")" + std::string(65, 'v') + "\"}", "verb is 65 bytes, over the 64-byte",
       true},
      {R"({"id":7,"verb":"list","object":null})", "object must be a string", true},
      {R"({"id":7,"verb":"list","object":"p-d"})", "object \"p-d\" has a character outside", true},
      {R"({"id":7,"verb":"list","args":[1]})", "args must be an object, not array", true},
      {R"({"id":7,"verb":"list","args":null})", "args must be an object, not null", true},
      {R"({"id":7,"verb":"list","args":"x"})", "args must be an object, not string", true},
  };
  for (const Bad& b : kBad) {
    SCOPED_TRACE(b.line);
    RequestId seen = std::uint64_t{99};
    auto r = parse_request(b.line, &seen);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), Errc::kInvalidArgument);
    EXPECT_NE(r.status().message().find(b.fragment), std::string::npos) << r.status().message();
    if (b.id_read) {
      EXPECT_EQ(seen, RequestId(std::uint64_t{7}));
    } else {
      EXPECT_EQ(seen, RequestId());
    }
  }
}

// A valid request padded (inside args) to exactly `size` bytes.
std::string request_of_size(std::size_t size) {
  const std::string head = R"({"id":1,"verb":"create","object":"vd","args":{"pad":")";
  const std::string tail = R"("}})";
  return head + std::string(size - head.size() - tail.size(), 'x') + tail;
}

TEST(ControlProtocolTest, LineLengthLimit) {
  const std::string max = request_of_size(kMaxRequestLine);
  ASSERT_EQ(max.size(), std::size_t{1} << 20);
  EXPECT_TRUE(parse_request(max).is_ok());
  EXPECT_TRUE(parse_request(max + "\n").is_ok());  // the newline does not count
  const std::string over = request_of_size(kMaxRequestLine + 1);
  auto r = parse_request(over);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "request line is 1048577 bytes, over the 1048576-byte limit");
  // Oversized garbage is refused on length alone, before anything looks at it.
  auto g = parse_request(std::string(kMaxRequestLine + 1, '['));
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("over the 1048576-byte limit"), std::string::npos);
}

// A request whose args nest until the whole line is `depth` levels deep.
std::string request_of_depth(int depth, char open = '{') {
  std::string inner = "1";
  for (int level = 2; level < depth; ++level) {
    inner = open == '{' ? R"({"a":)" + inner + "}" : "[" + inner + "]";
  }
  return R"({"id":1,"verb":"list","args":{"a":)" + inner + "}}";
}

TEST(ControlProtocolTest, DepthLimit) {
  for (const char open : {'{', '['}) {
    SCOPED_TRACE(open);
    EXPECT_TRUE(parse_request(request_of_depth(kMaxRequestDepth, open)).is_ok());
    auto r = parse_request(request_of_depth(kMaxRequestDepth + 1, open));
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().message(), "nesting deeper than 16 levels");
  }
  // Depth counts open containers, not all brackets in the line.
  std::string wide = R"({"id":1,"verb":"list","args":{"a":[)";
  for (int i = 0; i < 1000; ++i)
    wide += "[[]],";
  wide += "1]}}";
  EXPECT_TRUE(parse_request(wide).is_ok());
  // Deep hostile input within the length limit: refused, no stack overflow.
  const std::string deep(kMaxRequestLine, '[');
  auto r = parse_request(deep);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "nesting deeper than 16 levels");
  std::string deep_objects;
  while (deep_objects.size() + 6 < kMaxRequestLine)
    deep_objects += R"({"a":)";
  EXPECT_FALSE(parse_request(deep_objects).is_ok());
}

TEST(ControlProtocolTest, FormatsResponsesExactly) {
  EXPECT_EQ(format_response_ok(std::uint64_t{7}, json::object()), "{\"id\":7,\"result\":{}}\n");
  EXPECT_EQ(format_response_ok(std::string("x"), json{{"b", 1}, {"a", "s"}}),
            "{\"id\":\"x\",\"result\":{\"a\":\"s\",\"b\":1}}\n");
  EXPECT_EQ(format_response_ok(std::uint64_t{1}, json::array({1, 2})),
            "{\"id\":1,\"result\":[1,2]}\n");
  EXPECT_EQ(format_response_error(std::uint64_t{7}, ErrorCode::kNotFound, "pd 3 does not exist"),
            "{\"id\":7,\"error\":{\"code\":\"not_found\",\"message\":\"pd 3 does not exist\"}}\n");
  EXPECT_EQ(format_response_error(RequestId(), ErrorCode::kBadRequest, "not JSON"),
            "{\"id\":null,\"error\":{\"code\":\"bad_request\",\"message\":\"not JSON\"}}\n");
  // Newlines and quotes in a message are escaped: the response stays one line.
  EXPECT_EQ(format_response_error(std::string("q"), ErrorCode::kInternal, "a\n\"b\""),
            "{\"id\":\"q\",\"error\":{\"code\":\"internal\",\"message\":\"a\\n\\\"b\\\"\"}}\n");
}

TEST(ControlProtocolTest, InvalidUtf8IsReplacedNotThrown) {
  std::string line;
  ASSERT_NO_THROW(
      line = format_response_error(std::uint64_t{1}, ErrorCode::kRefused, "bad \xff\xfe path"));
  const json parsed = json::parse(line);
  EXPECT_EQ(parsed["error"]["message"], "bad \xef\xbf\xbd\xef\xbf\xbd path");
  ASSERT_NO_THROW(line = format_response_ok(std::string("\xc3"), json{{"k", "\x80"}}));
  EXPECT_TRUE(json::accept(line));
}

TEST(ControlProtocolTest, ResponsesRoundTrip) {
  const RequestId ids[] = {
      RequestId(), RequestId(std::uint64_t{0}), RequestId(std::uint64_t{18446744073709551615u}),
      RequestId(std::string("req-1")), RequestId(std::string(kMaxIdString, 'z'))};
  const json results[] = {json::object(), json{{"pds", {0, 1, 2}}, {"state", "OPTIMAL"}},
                          json::array(), json{{"nested", {{"deep", {1.5, nullptr, true}}}}}};
  for (const RequestId& id : ids) {
    for (const json& result : results) {
      const std::string line = format_response_ok(id, result);
      ASSERT_EQ(line.back(), '\n');
      EXPECT_EQ(line.find('\n'), line.size() - 1);
      const json parsed = json::parse(line);
      EXPECT_EQ(parsed.size(), 2u);
      EXPECT_EQ(parsed["id"], id_to_json(id));
      EXPECT_EQ(parsed["result"], result);
    }
    for (const ErrorCode code :
         {ErrorCode::kBadRequest, ErrorCode::kNotFound, ErrorCode::kRefused, ErrorCode::kBusy,
          ErrorCode::kUnauthorised, ErrorCode::kInternal}) {
      const std::string line = format_response_error(id, code, "why: \t\"x\"\n");
      EXPECT_EQ(line.find('\n'), line.size() - 1);
      const json parsed = json::parse(line);
      EXPECT_EQ(parsed["id"], id_to_json(id));
      EXPECT_EQ(error_code_from_name(parsed["error"]["code"].get<std::string>()), code);
      EXPECT_EQ(parsed["error"]["message"], "why: \t\"x\"\n");
    }
  }
  // A request's id comes back as the client sent it.
  auto r = parse_request(R"({"id":"abc","verb":"list","object":"dg"})");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(json::parse(format_response_ok(r->id, json::object()))["id"], "abc");
}

TEST(ControlProtocolTest, ErrorCodesAndExitCodes) {
  struct Row {
    ErrorCode code;
    const char* name;
    int exit_code;
  };
  const Row kRows[] = {
      {ErrorCode::kBadRequest, "bad_request", 2},    {ErrorCode::kNotFound, "not_found", 3},
      {ErrorCode::kRefused, "refused", 1},           {ErrorCode::kBusy, "busy", 1},
      {ErrorCode::kUnauthorised, "unauthorised", 1}, {ErrorCode::kInternal, "internal", 5},
  };
  for (const Row& row : kRows) {
    EXPECT_EQ(error_code_name(row.code), row.name);
    EXPECT_EQ(error_code_from_name(row.name), row.code);
    EXPECT_EQ(exit_code_for(row.code), row.exit_code);
  }
  EXPECT_EQ(error_code_from_name("unauthorized"), std::nullopt);
  EXPECT_EQ(error_code_from_name(""), std::nullopt);
  EXPECT_EQ(kExitOk, 0);
  EXPECT_EQ(kExitUnreachable, 4);

  EXPECT_EQ(error_code_for(Errc::kNotFound), ErrorCode::kNotFound);
  EXPECT_EQ(error_code_for(Errc::kBusy), ErrorCode::kBusy);
  EXPECT_EQ(error_code_for(Errc::kInvalidArgument), ErrorCode::kRefused);
  EXPECT_EQ(error_code_for(Errc::kOutOfRange), ErrorCode::kRefused);
  EXPECT_EQ(error_code_for(Errc::kNoSpace), ErrorCode::kRefused);
  EXPECT_EQ(error_code_for(Errc::kUnsupported), ErrorCode::kRefused);
  EXPECT_EQ(error_code_for(Errc::kIoError), ErrorCode::kInternal);
  EXPECT_EQ(error_code_for(Errc::kCorrupt), ErrorCode::kInternal);
  EXPECT_EQ(error_code_for(Errc::kInternal), ErrorCode::kInternal);
}

// What every parse must satisfy, whatever the input: no throw; an error has a message; a request
// has a valid verb and an object for args, and its response parses back.
void check_any(const std::string& line) {
  RequestId seen;
  std::optional<Result<Request>> r;
  ASSERT_NO_THROW(r.emplace(parse_request(line, &seen)));
  if (!r->is_ok()) {
    EXPECT_FALSE(r->status().message().empty());
    const std::string response =
        format_response_error(seen, ErrorCode::kBadRequest, r->status().message());
    EXPECT_TRUE(json::accept(response));
    return;
  }
  const Request& request = r->value();
  EXPECT_FALSE(request.verb.empty());
  EXPECT_LE(request.verb.size(), kMaxNameLength);
  EXPECT_TRUE(request.args.is_object());
  EXPECT_EQ(seen, request.id);
  EXPECT_TRUE(json::accept(format_response_ok(request.id, request.args)));
}

TEST(ControlProtocolTest, RandomBytesNeverCrash) {
  std::mt19937_64 rng(20240611);
  const std::string json_chars = "{}[]\":,0123456789-.eE truenlfasidvrbojc\\u";
  for (int i = 0; i < 10000; ++i) {
    std::string line(rng() % 200, '\0');
    const bool jsonish = i % 2 == 0;
    for (char& c : line) {
      c = jsonish ? json_chars[rng() % json_chars.size()] : static_cast<char>(rng());
    }
    SCOPED_TRACE(i);
    check_any(line);
  }
}

TEST(ControlProtocolTest, RandomMutationsOfValidRequestsNeverCrash) {
  const std::string seeds[] = {
      R"({"id":1,"verb":"list","object":"pd"})",
      R"({"id":"x","verb":"create","object":"dg","args":{"level":"raid5","pds":[0,1,2,3],"strip":65536}})",
      R"({"id":2,"verb":"delete","object":"vd","args":{"dg":0,"vd":1,"confirm":true}})",
      request_of_depth(kMaxRequestDepth),
  };
  std::mt19937_64 rng(7);
  int accepted = 0;
  for (int i = 0; i < 10000; ++i) {
    std::string line = seeds[i % std::size(seeds)];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % (line.size() + 1);
      switch (rng() % 4) {
        case 0:  // flip a byte
          if (at < line.size()) line[at] = static_cast<char>(rng());
          break;
        case 1:  // insert a structural character
          line.insert(at, 1, "{}[]\",:0\\"[rng() % 9]);
          break;
        case 2:  // delete a run
          if (at < line.size()) line.erase(at, 1 + rng() % 8);
          break;
        default:  // duplicate a run
          if (at < line.size()) line.insert(at, line.substr(at, 1 + rng() % 16));
          break;
      }
    }
    SCOPED_TRACE(line);
    check_any(line);
    if (parse_request(line).is_ok()) ++accepted;
  }
  // Some mutations (inside string values) keep a request valid; the test exercised both paths.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 10000);
}

}  // namespace
}  // namespace graid::control
