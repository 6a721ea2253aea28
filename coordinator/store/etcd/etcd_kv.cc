#include "coordinator/store/etcd/etcd_kv.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader::etcd {

absl::StatusOr<int64_t> EtcdKv::LeaseGrant(absl::Duration) {
  return absl::UnimplementedError(absl::StrCat(Describe(), ": leases are not supported"));
}

absl::StatusOr<absl::Duration> EtcdKv::LeaseKeepAlive(int64_t) {
  return absl::UnimplementedError(absl::StrCat(Describe(), ": leases are not supported"));
}

absl::Status EtcdKv::LeaseRevoke(int64_t) {
  return absl::UnimplementedError(absl::StrCat(Describe(), ": leases are not supported"));
}

absl::StatusOr<bool> EtcdKv::AwaitChange(const std::string&, int64_t, absl::Duration) {
  return absl::UnimplementedError(absl::StrCat(Describe(), ": watches are not supported"));
}

Compare Compare::Absent(std::string key) {
  Compare c;
  c.key = std::move(key);
  c.target = Target::kVersion;
  c.result = Result::kEqual;
  c.value = 0;
  return c;
}

Compare Compare::Unchanged(std::string key, int64_t mod_revision) {
  Compare c;
  c.key = std::move(key);
  c.target = Target::kModRevision;
  c.result = Result::kEqual;
  c.value = mod_revision;
  return c;
}

Compare Compare::CreatedAt(std::string key, int64_t create_revision) {
  Compare c;
  c.key = std::move(key);
  c.target = Target::kCreateRevision;
  c.result = Result::kEqual;
  c.value = create_revision;
  return c;
}

Op Op::Get(std::string key) {
  Op op;
  op.kind = Kind::kGet;
  op.key = std::move(key);
  return op;
}

Op Op::Put(std::string key, std::string value, int64_t lease) {
  Op op;
  op.kind = Kind::kPut;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}

Op Op::Delete(std::string key) {
  Op op;
  op.kind = Kind::kDelete;
  op.key = std::move(key);
  return op;
}

std::string PrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();  // 0xff cannot be incremented: the range ends after every longer key
  }
  return std::string(1, '\0');
}

absl::StatusOr<std::vector<KeyValue>> RangeAll(EtcdKv& kv, const std::string& prefix,
                                               int64_t page_size) {
  std::vector<KeyValue> all;
  RangeRequest request;
  request.key = prefix;
  request.range_end = PrefixEnd(prefix);
  request.limit = page_size;
  while (true) {
    absl::StatusOr<RangeResult> page = kv.Range(request);
    if (!page.ok()) return page.status();
    if (request.revision == 0) request.revision = page->revision;  // later pages: same snapshot
    const bool more = page->more && !page->kvs.empty();
    if (more) request.key = page->kvs.back().key + std::string(1, '\0');  // just after the last
    for (KeyValue& entry : page->kvs) all.push_back(std::move(entry));
    if (!more) return all;
  }
}

}  // namespace ringleader::etcd
