#include "runtime/comm/Bootstrap.h"

namespace octet::comm {

namespace {

std::string hashKey(int rank) {
  return "octet/bundle-hash/" + std::to_string(rank);
}

std::vector<std::string> perRankKeys(const std::string &prefix, int world) {
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r)
    keys.push_back(prefix + std::to_string(r));
  return keys;
}

} // namespace

std::string Bootstrap::ranksNamed(const std::vector<size_t> &missing) const {
  std::string names;
  for (size_t i = 0; i < missing.size(); ++i)
    names += (i == 0 ? "" : ", ") + std::to_string(missing[i]);
  return (missing.size() == 1 ? "rank " : "ranks ") + names + " of " +
         std::to_string(worldSize());
}

StatusOr<std::unique_ptr<Bootstrap>>
Bootstrap::join(const BootstrapOptions &options) {
  if (options.bundleWorldSize != 0)
    OCTET_RETURN_IF_ERROR(checkWorldSize(options.env, options.bundleWorldSize,
                                         options.bundleLayout));
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->options_ = options;
  const RankEnv &env = options.env;
  if (env.storePort == 0 && env.worldSize > 1)
    return Status::error("a job of " + std::to_string(env.worldSize) +
                         " ranks needs MASTER_PORT (rank 0's store port)");
  int port = env.storePort;
  if (env.rank == 0) {
    auto server = StoreServer::start(env.masterAddr, env.storePort,
                                     env.worldSize, env.storePortSource);
    if (!server)
      return server.status().withContext("rank 0 cannot start the store");
    port = (*server)->port();
    b->server_ = std::move(*server);
  }
  StoreClient::Options clientOptions;
  clientOptions.connectTimeout = options.joinTimeout;
  clientOptions.requestTimeout = options.requestTimeout;
  auto client = StoreClient::connect(env.masterAddr, port, env.rank,
                                     env.worldSize, clientOptions);
  if (!client)
    return client.status();
  b->client_ = std::move(*client);

  Status joined = b->compareBundles();
  if (!joined)
    return b->published(joined);
  return b;
}

Status Bootstrap::published(const Status &failure) {
  // The first failure is the job's cause: the others see this message
  // rather than only that this rank went away. (When the failure is the
  // job's notice already, this changes nothing.)
  if (!failure && client_)
    (void)client_->reportFailure("rank " + std::to_string(rank()) + ": " +
                                 failure.message());
  return failure;
}

Status Bootstrap::compareBundles() {
  const RankEnv &env = options_.env;
  OCTET_RETURN_IF_ERROR(client_->set(hashKey(env.rank), options_.bundleHash));
  Deadline deadline = Clock::now() + options_.joinTimeout;
  auto hashes = client_->waitFor(
      perRankKeys("octet/bundle-hash/", env.worldSize), deadline,
      [&](const std::vector<size_t> &missing) {
        return ranksNamed(missing) + " did not join within " +
               describeDuration(options_.joinTimeout) + " (store at " +
               client_->address() +
               "): start every rank, each with its own RANK, and the same "
               "MASTER_ADDR and MASTER_PORT";
      });
  if (!hashes)
    return hashes.status();
  for (int r = 1; r < env.worldSize; ++r)
    if ((*hashes)[r] != (*hashes)[0])
      return Status::error(
          "ranks run different bundles: rank 0 has bundle hash " +
          ((*hashes)[0].empty() ? "(none)" : (*hashes)[0]) + ", rank " +
          std::to_string(r) + " has " +
          ((*hashes)[r].empty() ? "(none)" : (*hashes)[r]) +
          ": start every rank with the same bundle file");
  return Status::ok();
}

Bootstrap::~Bootstrap() {
  if (finished_ || !server_)
    return;
  // Rank 0 failing: its store goes with it, so the others would only learn
  // that rank 0 is gone. Tell them why (the first failure stays the cause)
  // and give them a moment to read it.
  if (client_)
    (void)client_->reportFailure("rank 0 ended before the job finished");
  server_->waitForFailureDelivered(Clock::now() + options_.lingerOnFailure);
}

Status Bootstrap::barrier(const std::string &name,
                          std::chrono::milliseconds timeout) {
  int call = barrierCalls_[name]++;
  std::string prefix =
      "octet/barrier/" + name + "/" + std::to_string(call) + "/";
  OCTET_RETURN_IF_ERROR(client_->set(prefix + std::to_string(rank()), ""));
  auto done =
      client_->waitFor(perRankKeys(prefix, worldSize()), Clock::now() + timeout,
                       [&](const std::vector<size_t> &missing) {
                         return ranksNamed(missing) + " did not reach '" +
                                name + "' within " + describeDuration(timeout);
                       });
  return done ? Status::ok() : published(done.status());
}

StatusOr<std::string>
Bootstrap::shareFromRank0(const std::string &key,
                          const std::function<StatusOr<std::string>()> &make,
                          std::chrono::milliseconds timeout) {
  if (rank() == 0) {
    auto value = make();
    if (!value) {
      (void)reportFailure(value.status().message());
      return value.status();
    }
    OCTET_RETURN_IF_ERROR(client_->set(key, *value));
    return *value;
  }
  auto values = client_->waitFor(
      {key}, Clock::now() + timeout, [&](const std::vector<size_t> &) {
        return "rank 0 did not publish '" + key + "' within " +
               describeDuration(timeout);
      });
  if (!values)
    return published(values.status());
  return (*values)[0];
}

Status Bootstrap::reportFailure(const std::string &message) {
  return client_->reportFailure("rank " + std::to_string(rank()) + ": " +
                                message);
}

Status Bootstrap::finish(std::chrono::milliseconds timeout) {
  Deadline deadline = Clock::now() + timeout;
  OCTET_RETURN_IF_ERROR(barrier("finish", timeout));
  Status left = client_->leave();
  if (server_)
    server_->waitForRanksToLeave(deadline);
  finished_ = true;
  return left;
}

} // namespace octet::comm
