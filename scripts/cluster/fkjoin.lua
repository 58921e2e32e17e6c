-- fkjoin.lua — the fkjoin workload (shared/bench/fkjoin.md) as a worker
-- pipeline: players (partitioned by id) LEFT JOIN teams (a global table),
-- for scripts/bench/cluster.lua (PIPELINE=…/fkjoin.lua).
return function(runnel, p)
  local teams = p:table("teams", { {"id","int"}, {"name","string"}, {"region","string"}, key = "id" })
  local players = p:table("players", { {"id","int"}, {"name","string"}, {"team_id","int", null = true},
                                       {"score","int"}, key = "id" })
  local out = players:join(teams, { on = "team_id", kind = "left" })
  return { teams = teams, players = players, out = out }
end
