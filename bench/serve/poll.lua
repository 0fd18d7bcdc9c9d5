-- wrk script: each connection alternates between the paths in WRK_PATHS (comma-separated), so one
-- run of 32 connections polls them all.
local paths = {}
for p in string.gmatch(os.getenv("WRK_PATHS") or "/metrics", "[^,]+") do paths[#paths + 1] = p end
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", paths[(i % #paths) + 1])
end
