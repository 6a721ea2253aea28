#include "worker/collective/gloo/gloo_peers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/rank_failure.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/gloo/gloo_test_util.h"
#include "worker/collective/in_memory_key_value_store.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

// A serialized gloo tcp Address: its sockaddr_storage, then an 8-byte sequence number.
std::string GlooAddress(const char* ip, uint16_t port) {
  sockaddr_storage ss;
  std::memset(&ss, 0, sizeof(ss));
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  inet_pton(AF_INET, ip, &in->sin_addr);
  std::string bytes(reinterpret_cast<const char*>(&ss), sizeof(ss));
  bytes.append(8, '\xff');
  return bytes;
}

TEST(GlooPeersTest, DecodesIpv4AndIpv6AddressesWithTheRealPort) {
  EXPECT_EQ(DecodeGlooAddress(GlooAddress("127.0.0.1", 41729)), "127.0.0.1:41729");
  sockaddr_storage ss;
  std::memset(&ss, 0, sizeof(ss));
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(5000);
  inet_pton(AF_INET6, "fd00::2", &in6->sin6_addr);
  EXPECT_EQ(DecodeGlooAddress(std::string(reinterpret_cast<const char*>(&ss), sizeof(ss))),
            "[fd00::2]:5000");
  EXPECT_EQ(DecodeGlooAddress("ab"), std::nullopt);
  EXPECT_EQ(DecodeGlooAddress(std::string(200, '\0')), std::nullopt);  // no family
}

TEST(GlooPeersTest, FindsThePeerOfAByteSwappedPortAsGlooPrintsIt) {
  const std::map<int, std::string> peers = {{0, "10.1.0.1:5000"}, {1, "127.0.0.1:41729"}};
  // 41729 = 0xA301; gloo prints 0x01A3 = 419.
  std::optional<PeerMatch> match =
      FindPeerInGlooMessage("connect [127.0.0.1]:419: Connection refused", peers);
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->rank, 1);
  EXPECT_EQ(match->address, "127.0.0.1:41729");
  EXPECT_EQ(match->printed, "[127.0.0.1]:419");
  EXPECT_TRUE(match->byte_swapped);
  // A port printed right is matched too; an unknown address or port is not.
  match = FindPeerInGlooMessage("Read error [10.1.0.1]:5000: Connection reset by peer", peers);
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->rank, 0);
  EXPECT_FALSE(match->byte_swapped);
  EXPECT_FALSE(FindPeerInGlooMessage("connect [10.1.0.9]:5000: refused", peers).has_value());
  EXPECT_FALSE(FindPeerInGlooMessage("connect [127.0.0.1]:418: refused", peers).has_value());
  EXPECT_FALSE(FindPeerInGlooMessage("no address here [", peers).has_value());
}

TEST(GlooPeersTest, NamesThePeerInTheErrorAndCarriesItAsAPayload) {
  const std::map<int, std::string> peers = {{1, "127.0.0.1:41729"}};
  const absl::Status named = NamePeerInGlooError(
      absl::UnavailableError("connect [127.0.0.1]:419: Connection refused"), peers,
      "could not connect to");
  EXPECT_EQ(named.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(named.message(),
            "could not connect to rank 1 at 127.0.0.1:41729: connect [127.0.0.1]:419: Connection "
            "refused (gloo prints the port byte-swapped: [127.0.0.1]:419 is 127.0.0.1:41729)");
  const std::optional<v1::RankFailure> failure = RankFailureOf(named);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->kind(), v1::RankFailure::PEER_CLOSED);
  EXPECT_TRUE(failure->has_peer());
  EXPECT_EQ(failure->peer_rank(), 1u);
  EXPECT_EQ(failure->peer_address(), "127.0.0.1:41729");
  // Nothing to name: unchanged, no payload.
  const absl::Status other = absl::DeadlineExceededError("timed out");
  EXPECT_EQ(NamePeerInGlooError(other, peers, "x"), other);
  EXPECT_FALSE(RankFailureOf(other).has_value());
}

TEST(GlooPeersTest, NamingThePeerKeepsTheKindGlooGaveTheError) {
  const std::map<int, std::string> peers = {{2, "10.1.0.2:5000"}};
  const absl::Status timed_out = WithFailureKind(
      absl::DeadlineExceededError("Timed out [10.1.0.2]:5000"), v1::RankFailure::PEER_TIMED_OUT);
  const v1::RankFailure failure = FailureOf(NamePeerInGlooError(timed_out, peers, "peer"));
  EXPECT_EQ(failure.kind(), v1::RankFailure::PEER_TIMED_OUT);
  EXPECT_EQ(failure.peer_rank(), 2u);
  EXPECT_EQ(failure.peer_address(), "10.1.0.2:5000");
}

// A store that makes the published addresses of some ranks point at `port` (a closed port):
// what a firewall or a wrong collective address does to the peers.
class RedirectingStore : public KeyValueStore {
 public:
  RedirectingStore(std::shared_ptr<KeyValueStore> inner, std::vector<std::string> keys,
                   uint16_t port)
      : inner_(std::move(inner)), keys_(std::move(keys)), port_(port) {}
  absl::Status Set(const std::string& key, const std::string& value) override {
    std::string stored = value;
    if (std::find(keys_.begin(), keys_.end(), key) != keys_.end()) {
      constexpr size_t kAddressBytes = sizeof(sockaddr_storage) + 8;
      for (size_t at = 0; at + kAddressBytes <= stored.size(); at += kAddressBytes) {
        const uint16_t net = htons(port_);
        std::memcpy(&stored[at + offsetof(sockaddr_in, sin_port)], &net, sizeof(net));
      }
    }
    return inner_->Set(key, stored);
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    return inner_->Get(key, timeout);
  }
  absl::StatusOr<std::vector<std::string>> GetMany(const std::vector<std::string>& keys,
                                                   const ValueParts& parts,
                                                   absl::Duration timeout) override {
    return inner_->GetMany(keys, parts, timeout);
  }

 private:
  std::shared_ptr<KeyValueStore> inner_;
  std::vector<std::string> keys_;
  uint16_t port_;
};

TEST(GlooPeersTest, ARankThatCannotReachItsPeerNamesItWithTheRealPortAndTheStagesAreReported) {
  // Both ranks' addresses point at the closed port: whichever side of the pair connects is
  // refused (the other waits for it until its timeout).
  // A bound socket that never listens: connecting to it is refused.
  const int closed = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(closed, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_port = 0;
  inet_pton(AF_INET, "127.0.0.1", &local.sin_addr);
  ASSERT_EQ(bind(closed, reinterpret_cast<sockaddr*>(&local), sizeof(local)), 0);
  socklen_t length = sizeof(local);
  ASSERT_EQ(getsockname(closed, reinterpret_cast<sockaddr*>(&local), &length), 0);
  const uint16_t port = ntohs(local.sin_port);
  const std::string expected = absl::StrCat("127.0.0.1:", port);

  const testing_util::ChildOutcome outcome = testing_util::RunInChild(
      [&]() -> std::string {
        auto store = std::make_shared<RedirectingStore>(
            std::make_shared<InMemoryKeyValueStore>(),
            std::vector<std::string>{"peers/0/gloo/0", "peers/0/gloo/1"}, port);
        std::string report;
        std::mutex mu;
        std::vector<std::string> stages;
        testing_util::ForEachRankInParallel(2, [&](int rank) {
          GlooOptions options;
          options.rendezvous_timeout = absl::Seconds(3);
          {
            options.on_progress = [&](RendezvousStage stage, const std::string& detail) {
              std::lock_guard<std::mutex> lock(mu);
              stages.push_back(absl::StrCat(
                  "rank ", rank, " ", stage == RendezvousStage::kConnecting ? "connecting " : "exchanging ", detail));
            };
          }
          absl::StatusOr<std::unique_ptr<Collective>> made =
              CreateGlooCollective(store, "peers/0/gloo/", rank, 2, options);
          std::lock_guard<std::mutex> lock(mu);
          const std::optional<v1::RankFailure> failure =
              made.ok() ? std::nullopt : RankFailureOf(made.status());
          report += absl::StrCat(
              "rank ", rank, ": ", made.ok() ? "OK" : made.status().ToString(), "|",
              failure && failure->has_peer()
                  ? absl::StrCat(failure->peer_rank(), " ", failure->peer_address())
                  : "no peer",
              "|");
        });
        for (const std::string& stage : stages) report += stage + ";";
        return report;
      },
      absl::Seconds(30));
  close(closed);
  ASSERT_FALSE(outcome.timed_out) << outcome.Describe();
  // The refused rank's error and payload name its peer with the port it published, not gloo's
  // byte-swapped figure.
  const bool zero_refused =
      absl::StrContains(outcome.report, absl::StrCat("could not connect to rank 1 at ", expected));
  const bool one_refused =
      absl::StrContains(outcome.report, absl::StrCat("could not connect to rank 0 at ", expected));
  EXPECT_TRUE(zero_refused || one_refused) << outcome.report;
  EXPECT_THAT(outcome.report, HasSubstr(absl::StrCat("|", zero_refused ? 1 : 0, " ", expected, "|")));
  EXPECT_THAT(outcome.report, HasSubstr("rank 1 exchanging waiting for 1 peers' addresses;"));
  EXPECT_THAT(outcome.report, HasSubstr(absl::StrCat("rank 1 connecting to rank 0 at ", expected, ";")));
}

}  // namespace
}  // namespace ringleader
