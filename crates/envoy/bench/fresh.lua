-- wrk script of `make bench`: args <method> <path> <body file or -> <key mode> <prefix>
-- key mode: fresh (a new Idempotency-Key per request), cycle:N (keys 0..N-1 in turn: replays of
-- completed keys), fixed (one key: the 409 path), none (no key header).
local threads = {}
function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  method, path, mode, prefix = args[1], args[2], args[4], args[5]
  body = nil
  if args[3] ~= "-" then
    local f = assert(io.open(args[3], "rb"))
    body = f:read("*a")
    f:close()
  end
  cycle = tonumber(string.match(mode, "^cycle:(%d+)$") or "0")
  counter = 0
  headers = { ["content-type"] = "application/json" }
  if body == nil then headers["content-type"] = nil end
  if mode == "fixed" then headers["idempotency-key"] = prefix end
  if mode == "none" or mode == "fixed" then
    fixed = wrk.format(method, path, headers, body)
  end
end

function request()
  if fixed then return fixed end
  counter = counter + 1
  if cycle > 0 then
    headers["idempotency-key"] = prefix .. ((counter * 2 + tid) % cycle)
  else
    headers["idempotency-key"] = prefix .. tid .. "-" .. counter
  end
  return wrk.format(method, path, headers, body)
end
