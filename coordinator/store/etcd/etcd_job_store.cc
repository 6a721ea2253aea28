#include "coordinator/store/etcd/etcd_job_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace ringleader {
namespace {

std::string Padded(uint64_t number) { return absl::StrFormat("%020u", number); }

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdJobStore>> EtcdJobStore::Create(
    std::unique_ptr<etcd::EtcdKv> kv, EtcdJobStoreOptions options) {
  if (options.prefix.empty() || options.prefix.back() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd key prefix '", options.prefix, "' must end with '/'"));
  }
  if (options.page_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("etcd page size ", options.page_size,
                                                   " must be at least 1"));
  }
  return std::unique_ptr<EtcdJobStore>(new EtcdJobStore(std::move(kv), std::move(options)));
}

EtcdJobStore::EtcdJobStore(std::unique_ptr<etcd::EtcdKv> kv, EtcdJobStoreOptions options)
    : kv_(std::move(kv)), options_(std::move(options)) {}

std::string EtcdJobStore::SavedKey(const std::string& job_id) const {
  return absl::StrCat(options_.prefix, "jobs/", Padded(JobNumber(job_id).value_or(0)), "/",
                      job_id);
}

std::string EtcdJobStore::ArchivedKey(uint64_t number) const {
  return absl::StrCat(options_.prefix, "archive/", Padded(number));
}

absl::StatusOr<std::string> EtcdJobStore::Serialize(const v1::JobStatus& job,
                                                    const std::string& key) const {
  std::string bytes;
  if (!job.SerializeToString(&bytes)) {
    return absl::InternalError(absl::StrCat("cannot serialize job ", job.job_id()));
  }
  if (bytes.size() > options_.max_value_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        kv_->Describe(), ": the record of job ", job.job_id(), " (key ", key, ") is ",
        bytes.size(), " bytes, above the ", options_.max_value_bytes,
        "-byte limit kept under etcd's request size limit"));
  }
  return bytes;
}

absl::StatusOr<v1::JobStatus> EtcdJobStore::Parse(const etcd::KeyValue& kv) const {
  v1::JobStatus job;
  if (!job.ParseFromString(kv.value)) {
    return absl::DataLossError(absl::StrCat(kv_->Describe(), ": the record under key ", kv.key,
                                            " does not parse: restore a backup (etcdctl "
                                            "snapshot restore)"));
  }
  return job;
}

absl::Status EtcdJobStore::Save(const v1::JobStatus& job) {
  const std::string key = SavedKey(job.job_id());
  absl::StatusOr<std::string> bytes = Serialize(job, key);
  if (!bytes.ok()) return bytes.status();
  const std::optional<uint64_t> number = JobNumber(job.job_id());
  const std::string archived = number.has_value() ? ArchivedKey(*number) : std::string();

  // What is stored now: the saved record (and whether the job is archived).
  etcd::TxnRequest read;
  read.success.push_back(etcd::Op::Get(key));
  if (!archived.empty()) read.success.push_back(etcd::Op::Get(archived));
  absl::StatusOr<etcd::TxnResult> seen = kv_->Txn(read);
  while (true) {
    if (!seen.ok()) return seen.status();
    const std::vector<etcd::RangeResult>& gets = seen->gets;
    if (gets.size() != read.success.size()) {
      return absl::UnavailableError(absl::StrCat(kv_->Describe(), ": reading job ",
                                                 job.job_id(), ": a malformed answer"));
    }
    if (!archived.empty() && !gets[1].kvs.empty()) return absl::OkStatus();  // archived
    int64_t mod_revision = 0;
    if (!gets[0].kvs.empty()) {
      absl::StatusOr<v1::JobStatus> stored = Parse(gets[0].kvs[0]);
      // An unreadable record is replaced: the new status is the job's record from now on.
      if (stored.ok() && stored->version() > job.version()) return absl::OkStatus();
      mod_revision = gets[0].kvs[0].mod_revision;
    }
    etcd::TxnRequest write;
    write.compare.push_back(etcd::Compare::Unchanged(key, mod_revision));
    if (!archived.empty()) write.compare.push_back(etcd::Compare::Absent(archived));
    write.success.push_back(etcd::Op::Put(key, *bytes));
    write.failure = read.success;  // changed meanwhile: read again in the same round trip
    seen = kv_->Txn(write);
    if (seen.ok() && seen->succeeded) return absl::OkStatus();
  }
}

absl::StatusOr<std::vector<v1::JobStatus>> EtcdJobStore::LoadAll() const {
  absl::StatusOr<std::vector<etcd::KeyValue>> kvs =
      etcd::RangeAll(*kv_, absl::StrCat(options_.prefix, "jobs/"), options_.page_size);
  if (!kvs.ok()) return kvs.status();
  std::vector<v1::JobStatus> jobs;
  jobs.reserve(kvs->size());
  for (const etcd::KeyValue& kv : *kvs) {
    absl::StatusOr<v1::JobStatus> job = Parse(kv);
    if (!job.ok()) return job.status();
    jobs.push_back(std::move(*job));
  }
  return jobs;
}

absl::Status EtcdJobStore::Archive(const v1::JobStatus& final_status) {
  const std::optional<uint64_t> number = JobNumber(final_status.job_id());
  if (!number.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot archive job '", final_status.job_id(), "': not of the form job-N"));
  }
  const std::string archived = ArchivedKey(*number);
  const std::string saved = SavedKey(final_status.job_id());
  absl::StatusOr<std::string> bytes = Serialize(final_status, archived);
  if (!bytes.ok()) return bytes.status();

  etcd::TxnRequest read;
  read.success.push_back(etcd::Op::Get(archived));
  absl::StatusOr<etcd::TxnResult> seen = kv_->Txn(read);
  while (true) {
    if (!seen.ok()) return seen.status();
    if (seen->gets.size() != 1) {
      return absl::UnavailableError(absl::StrCat(kv_->Describe(), ": reading archived job ",
                                                 final_status.job_id(), ": a malformed answer"));
    }
    int64_t mod_revision = 0;
    bool keep_stored = false;
    if (!seen->gets[0].kvs.empty()) {
      absl::StatusOr<v1::JobStatus> stored = Parse(seen->gets[0].kvs[0]);
      keep_stored = stored.ok() && stored->version() > final_status.version();
      mod_revision = seen->gets[0].kvs[0].mod_revision;
    }
    etcd::TxnRequest write;
    write.compare.push_back(etcd::Compare::Unchanged(archived, mod_revision));
    if (!keep_stored) write.success.push_back(etcd::Op::Put(archived, *bytes));
    write.success.push_back(etcd::Op::Delete(saved));
    write.failure = read.success;
    seen = kv_->Txn(write);
    if (seen.ok() && seen->succeeded) return absl::OkStatus();
  }
}

absl::StatusOr<v1::JobStatus> EtcdJobStore::LoadArchived(const std::string& job_id) const {
  const std::optional<uint64_t> number = JobNumber(job_id);
  const absl::Status not_found = absl::NotFoundError(absl::StrCat("job ", job_id,
                                                                  " is not archived"));
  if (!number.has_value()) return not_found;
  etcd::RangeRequest request;
  request.key = ArchivedKey(*number);
  absl::StatusOr<etcd::RangeResult> found = kv_->Range(request);
  if (!found.ok()) return found.status();
  if (found->kvs.empty()) return not_found;
  absl::StatusOr<v1::JobStatus> job = Parse(found->kvs[0]);
  if (!job.ok()) return job.status();
  if (job->job_id() != job_id) return not_found;  // "job-2" when "job-000002" was archived
  return job;
}

absl::StatusOr<std::vector<v1::JobStatus>> EtcdJobStore::ListArchived(uint64_t after_number,
                                                                      size_t limit) const {
  std::vector<v1::JobStatus> page;
  // etcd reads a limit of 0 as "no limit".
  if (limit == 0 || after_number == UINT64_MAX) return page;
  const std::string prefix = absl::StrCat(options_.prefix, "archive/");
  etcd::RangeRequest request;
  request.key = ArchivedKey(after_number + 1);
  request.range_end = etcd::PrefixEnd(prefix);
  request.limit = static_cast<int64_t>(std::min<size_t>(limit, INT64_MAX));
  absl::StatusOr<etcd::RangeResult> found = kv_->Range(request);
  if (!found.ok()) return found.status();
  page.reserve(found->kvs.size());
  for (const etcd::KeyValue& kv : found->kvs) {
    absl::StatusOr<v1::JobStatus> job = Parse(kv);
    if (!job.ok()) return job.status();
    page.push_back(std::move(*job));
  }
  return page;
}

absl::StatusOr<uint64_t> EtcdJobStore::HighestArchivedNumber() const {
  const std::string prefix = absl::StrCat(options_.prefix, "archive/");
  etcd::RangeRequest request;
  request.key = prefix;
  request.range_end = etcd::PrefixEnd(prefix);
  request.limit = 1;
  request.descending = true;
  request.keys_only = true;
  absl::StatusOr<etcd::RangeResult> found = kv_->Range(request);
  if (!found.ok()) return found.status();
  if (found->kvs.empty()) return 0;
  absl::string_view digits = found->kvs[0].key;
  uint64_t number = 0;
  if (!absl::ConsumePrefix(&digits, prefix) || !absl::SimpleAtoi(digits, &number)) {
    return absl::DataLossError(absl::StrCat(kv_->Describe(), ": key ", found->kvs[0].key,
                                            " is not an archived job's"));
  }
  return number;
}

}  // namespace ringleader
