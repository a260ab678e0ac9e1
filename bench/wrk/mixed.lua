-- SPDX-License-Identifier: MIT
-- Workload B of scripts/bench: GET <WORK_PATH>?n=N where every HEAVY_EVERY-th
-- request (default 100th: exactly 1 %) asks for HEAVY_N and the others for
-- LIGHT_N, in a fixed order (light x99, heavy, ...) over all connections;
-- the same mix as the HTTP peers' workload B (bench/README.md). wrk runs
-- with -t1.
local path        = os.getenv("WORK_PATH") or "/v1/spin"
local heavy_every = tonumber(os.getenv("HEAVY_EVERY") or "100")
local light_n     = os.getenv("LIGHT_N") or "1000"
local heavy_n     = os.getenv("HEAVY_N") or "2000000"
local light_req, heavy_req
local count       = 0

init = function(args)
  light_req = wrk.format("GET", path .. "?n=" .. light_n)
  heavy_req = wrk.format("GET", path .. "?n=" .. heavy_n)
end

request = function()
  count = count + 1
  if count % heavy_every == 0 then
    return heavy_req
  end
  return light_req
end

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")
