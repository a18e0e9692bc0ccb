-- POSTs one AdmissionReview over and over, and prints the latency percentiles wrk's own
-- report leaves out (p99.9). The webhook must be running (`envoy-operator webhook`):
--
--   wrk -t1 -c4 -d10s -s examples/wrk/admission.lua https://127.0.0.1:8443/inject \
--       -- tests/fixtures/admission/pod-create-from-replicaset-mutate.json
--
-- wrk does not check the certificate. The first script argument is the fixture (default: the
-- Foo review, for /validate).

function init(args)
  local path = args[1] or "tests/fixtures/admission/foo-create-validate.json"
  local file = assert(io.open(path, "rb"))
  wrk.method = "POST"
  wrk.body = file:read("*a")
  file:close()
  wrk.headers["Content-Type"] = "application/json"
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    "requests %d, errors %d (connect %d, read %d, write %d, status %d, timeout %d)\n",
    summary.requests, errors.connect + errors.read + errors.write + errors.status + errors.timeout,
    errors.connect, errors.read, errors.write, errors.status, errors.timeout))
  io.write(string.format("latency p50 %.3f ms  p99 %.3f ms  p99.9 %.3f ms  max %.3f ms\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    latency:percentile(99.9) / 1000, latency.max / 1000))
end
