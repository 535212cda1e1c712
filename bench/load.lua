-- wrk script for `scripts/load`. With `-- baseline PATH`: PATH only (the baseline). With
-- `-- mix IDS`: a mix of text searches and "similar to" requests. With `-- searches`: the
-- searches of the mix, each from a network of its own (X-Forwarded-For: the server trusts
-- loopback as its proxy). With `-- flood PATH ADDRESS`: PATH only, all from ADDRESS.
--   50 %  a search from a fixed set of 40 descriptions (cache hits once each has run)
--   20 %  a search made unique by a random word (cache misses: the whole pipeline)
--   30 %  "similar to" for a random anime of the set below
-- Every request comes without cookies: a new anonymous visitor each time (the server runs with
-- the new-visitor cap lifted), so quota reservations are part of the load.

local queries = {
  "algo+tranquilo+de+alguien+que+viaja+solo+y+ayuda+a+la+gente",
  "a+boy+who+can+see+ghosts+joins+a+club+at+school",
  "piratas+buscando+un+tesoro+legendario",
  "pirates+looking+for+a+legendary+treasure",
  "a+girl+who+becomes+a+witch+and+delivers+packages",
  "chicos+jugando+voleibol+en+el+instituto",
  "a+detective+who+is+shrunk+into+a+child",
  "robots+gigantes+y+un+chico+que+no+quiere+pilotar",
  "a+notebook+that+kills+anyone+whose+name+is+written+in+it",
  "un+alquimista+que+perdio+su+cuerpo",
  "space+bounty+hunters+and+jazz",
  "a+quiet+story+about+a+mushi+master",
  "hermanos+que+buscan+la+piedra+filosofal",
  "humans+fighting+giant+titans+behind+walls",
  "a+ninja+boy+who+wants+to+be+the+leader+of+his+village",
  "un+chico+con+poderes+psiquicos+que+quiere+una+vida+normal",
  "time+travel+with+a+microwave",
  "a+shogi+player+who+lives+alone",
  "musica+clasica+y+un+director+de+orquesta",
  "cyborg+police+in+a+future+city",
  "un+samurai+vagabundo+que+no+quiere+matar",
  "cooking+battles+at+a+culinary+school",
  "a+girl+trapped+in+a+video+game",
  "vampiros+en+una+escuela",
  "a+hero+who+defeats+everyone+with+one+punch",
  "demon+slayer+siblings",
  "una+maga+elfa+que+sobrevive+a+sus+companeros",
  "baseball+team+at+high+school",
  "a+dark+fantasy+with+a+mercenary+and+a+giant+sword",
  "chicas+en+una+banda+de+rock+del+instituto",
  "a+post+apocalyptic+world+with+a+girl+and+a+robot",
  "un+mundo+virtual+del+que+no+se+puede+salir",
  "magical+girls+with+a+dark+twist",
  "una+familia+de+espias",
  "a+slime+reincarnated+in+another+world",
  "basketball+with+a+ghost+sixth+player",
  "cats+and+a+quiet+life+in+the+countryside",
  "un+chef+y+su+restaurante+en+otro+mundo",
  "mecha+pilots+in+a+war+between+colonies",
  "a+swordsman+trapped+in+a+death+game",
}

-- Anime ids for "similar to": given by scripts/load (those the evaluation set names, so they
-- are in the shared catalog), as `-- id,id,...`.
local ids = {}
local baseline = nil
local searches_only = false
local flood_from = nil

local thread_counter = 0

setup = function(thread)
  thread_counter = thread_counter + 1
  thread:set("seed", thread_counter)
end

init = function(args)
  math.randomseed(os.time() + seed * 7919)
  if args[1] == "baseline" then
    baseline = args[2]
  elseif args[1] == "flood" then
    baseline = args[2]
    flood_from = args[3]
  elseif args[1] == "searches" then
    searches_only = true
  end
  for id in string.gmatch(args[2] or "457", "%d+") do
    ids[#ids + 1] = id
  end
end

request = function()
  if flood_from then
    return wrk.format("GET", baseline, { ["X-Forwarded-For"] = flood_from })
  end
  if baseline then
    return wrk.format("GET", baseline)
  end
  local r = math.random()
  if searches_only then
    -- The searches of the mix (5 in 7 from the fixed set), each from its own network.
    r = r * 0.7
    local network = string.format("198.18.%d.%d", math.random(0, 255), math.random(1, 254))
    local path = "/api/search?q=" .. queries[math.random(#queries)]
    if r >= 0.5 then
      path = path .. "+w" .. tostring(math.random(1, 1000000000))
    end
    return wrk.format("GET", path, { ["X-Forwarded-For"] = network })
  end
  local path
  if r < 0.5 then
    path = "/api/search?q=" .. queries[math.random(#queries)]
  elseif r < 0.7 then
    path = "/api/search?q=" .. queries[math.random(#queries)] .. "+w" .. tostring(math.random(1, 1000000000))
  else
    path = "/api/anime/" .. ids[math.random(#ids)] .. "/similar"
  end
  return wrk.format("GET", path)
end

done = function(summary, latency, requests)
  local errors = summary.errors
  local failed = errors.connect + errors.read + errors.write + errors.timeout + errors.status
  io.write(string.format(
    "RESULT requests=%d seconds=%.1f rps=%.1f p50_ms=%.1f p95_ms=%.1f p99_ms=%.1f errors=%d non2xx=%d timeouts=%d\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    failed, errors.status, errors.timeout))
end
