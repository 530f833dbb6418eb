-- wrk: SendGift into one room; each thread its own sender, every request a fresh command id.
local counter = 0
local thread_id = 0
local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function init(args)
  room = args[1] or "hot"
  spread = tonumber(args[2] or "0")
end
request = function()
  counter = counter + 1
  local r = room
  if spread > 0 then r = "s" .. ((counter + tid * 7) % spread) end
  local body = string.format('{"command_id":"w%d-%d-%d","sender_id":"u%d","receiver_id":"o","gift_id":"rose","count":1,"unit_value":1}', tid, counter, math.random(1, 1000000000), tid)
  return wrk.format("POST", "/v1/rooms/" .. r .. "/gifts", {["content-type"]="application/json"}, body)
end
