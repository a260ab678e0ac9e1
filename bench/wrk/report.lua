-- SPDX-License-Identifier: MIT
-- wrk done() hook of scripts/bench: one machine-readable RESULT line with the
-- request count, rps and latency percentiles in microseconds.
done = function(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  local out = string.format("RESULT requests=%d duration_s=%.3f rps=%.1f", summary.requests, secs,
                            summary.requests / secs)
  for _, p in ipairs({50, 75, 90, 95, 99, 99.9, 99.99}) do
    out = out .. string.format(" p%s_us=%.0f", tostring(p):gsub("%.", "_"), latency:percentile(p))
  end
  out = out .. string.format(" max_us=%.0f errors=%d status_err=%d", latency.max,
                             e.connect + e.read + e.write + e.timeout, e.status)
  io.write(out .. "\n")
end
