-- leaderboard.lua — the pipeline of the cluster demo, tests and benchmark:
-- game shards publish match results; each partition of results (by guild)
-- is joined with the global guilds table (every worker holds all of it:
-- Kafka's GlobalKTable) and kept as per-guild leaderboards.
--
--     results(match key, player, guild, score)   partitioned: results.<guild % P>
--     guilds(id key, name, region)               global:      guilds
--     scored = results ⋈ guilds on guild         (the existing FK join, unchanged)
--     board  = scored by (guild, name, player): points = sum, games = count, best = max
return function(runnel, p)
  local guilds = p:table("guilds", { {"id","int"}, {"name","string"}, {"region","string"}, key = "id" })
  local results = p:table("results", { {"match","int"}, {"player","string"}, {"guild","int"}, {"score","int"},
                                       key = "match" })
  local scored = results:join(guilds, { on = "guild" })
  local board = scored:aggregate{ by = { "guild", "name", "player" }, points = runnel.sum("score"),
                                  games = runnel.count(), best = runnel.max("score") }
  return { guilds = guilds, results = results, scored = scored, board = board }
end
