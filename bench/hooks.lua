-- wrk script for bench/run.py: Claude Code PostToolUse hook bodies (2 KB of tool output).
--
-- Environment:
--   SHAPE    sessionhub (the hook JSON as Claude Code writes it) or claude-mem (the body of
--            the claude-mem worker's /api/sessions/observations)
--   TOKEN    bearer token (sessionhub only)
--   BATCH    events per request; 1 posts one object, more posts a JSON list (sessionhub only)
--   SESSIONS how many sessions the events are spread over (default 20)
--   NONCE    8 hex digits that make ids unique to this run; each wrk thread adds its number
--
-- wrk gives each thread a Lua state whose math.random starts from the same seed, so ids
-- are built from NONCE and the thread number, never from math.random: no request of one
-- thread or one run repeats another's (a repeat would be stored as a cheap duplicate).
-- At the end the script prints one line "BENCH {json}" that bench/run.py reads.

local shape = os.getenv("SHAPE") or "sessionhub"
local token = os.getenv("TOKEN")
local batch = tonumber(os.getenv("BATCH") or "1")
local nsessions = tonumber(os.getenv("SESSIONS") or "20")
local nonce = os.getenv("NONCE") or string.format("%08x", os.time())
local out = string.rep("x", 2000)

local thread_count = 0
function setup(thread)
  thread_count = thread_count + 1
  thread:set("thread_no", thread_count)
end

local sids = {}
local n = 0
local prefix = ""

function init(args)
  -- 8-4-4-4-12 like Claude Code's session ids; the same 20 sessions for every thread.
  for i = 1, nsessions do
    sids[i] = string.format("%s-0000-4000-8000-%012d", nonce, i)
  end
  -- No underscore right after the hex nonce: one ending in c or f would spell "c_" or
  -- "hf_", the start of a token the redaction prefilter then looks at closer, and one run
  -- in eight would do more work than the others. Claude Code's own ids have no
  -- underscore after "toolu_" at all.
  prefix = "toolu_" .. nonce .. "t" .. tostring(thread_no or 0) .. "_"
  -- Threads start at different sessions: run in step, they would hit the same session
  -- at the same moment and wait on its row lock, which real sessions rarely do.
  n = ((thread_no or 1) - 1) * 10
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  if token and shape == "sessionhub" then
    wrk.headers["Authorization"] = "Bearer " .. token
  end
end

local function one(sid, k)
  local tu = prefix .. k
  if shape == "claude-mem" then
    return '{"contentSessionId":"' .. sid .. '","platformSource":"claude-code","tool_name":"Bash",'
      .. '"tool_input":{"command":"ls -la ' .. k .. '"},"tool_response":{"stdout":"' .. out
      .. '","stderr":""},"cwd":"/home/dev/src/bench","tool_use_id":"' .. tu .. '"}'
  end
  return '{"session_id":"' .. sid .. '","transcript_path":"/home/dev/.claude/projects/bench/'
    .. sid .. '.jsonl","cwd":"/home/dev/src/bench","permission_mode":"default",'
    .. '"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls -la '
    .. k .. '"},"tool_response":{"stdout":"' .. out .. '","stderr":""},"tool_use_id":"' .. tu
    .. '"}'
end

request = function()
  n = n + 1
  if batch <= 1 then
    return wrk.format(nil, nil, nil, one(sids[(n % nsessions) + 1], n))
  end
  -- A gateway that batches sends its own session's events together.
  local sid = sids[(n % nsessions) + 1]
  local items = {}
  for i = 1, batch do
    items[i] = one(sid, n .. "_" .. i)
  end
  return wrk.format(nil, nil, nil, "[" .. table.concat(items, ",") .. "]")
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,'
      .. '"status":%d,"timeout":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,'
      .. '"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean))
end
