-- docs/api.md documents every public function, method and option: the
-- list is derived from the code (the DSL module's exported names, the
-- methods of pipelines, relations and attached stores, the option tables
-- the DSL checks, runnel.h's RN_API functions); each needs a heading in
-- docs/api.md naming it (### `p:run(…)`), and each option must appear as
-- `name` in its function's section. A failure lists exactly what is missing.
local H = require "helper"
local runnel = require "runnel"
local core = require "runnel.core"

local DOC = "docs/api.md"

-- The DSL's option tables checked in a local helper: the public function
-- each belongs to.
local HELPER_OWNER = { column_specs = "p:table", carry_bounds = "runnel.open", watch_options = "runnel.watch",
                       durable_name = "rel:sink" }
-- Options checked one by one rather than through a *_FIELDS table.
local LOOSE_OPTIONS = {
  ["rel:aggregate"] = { "by", "window", "grace", "name" },
  ["runnel.agg"] = { "init", "add", "remove", "result" },
  ["runnel.ndjson"] = { "verb" },
  ["runnel.sqlite"] = { "busy_timeout" },
  ["rel:select"] = { "key" },
  ["rel:map"] = { "key" },
}

local function read(path) return assert(H.read(H.root .. "/" .. path), path) end

local function public(t)
  local names = {}
  for k in pairs(t) do
    if type(k) == "string" and not k:match("^_") then names[#names + 1] = k end
  end
  table.sort(names)
  return names
end

local function attached_methods()
  local dir = H.tmpdir()
  local p = runnel.open(dir)
  local t = p:table("t", { {"id","int"}, key = "id" })
  t:sink(runnel.store("s"))
  local a = runnel.attach(dir, "s")
  local names = public(getmetatable(a).__index)
  a:close()
  p:close()
  return names
end

-- "Pipeline:run" -> "p:run"; "Relation:cdc" -> "rel:cdc"; "runnel.open" as is.
local function public_name(fn)
  return (fn:gsub("^Pipeline:", "p:"):gsub("^Relation:", "rel:"))
end

-- { [public function] = { option… } } from the *_FIELDS tables of the DSL's files.
local function option_tables(missing)
  local owners = {}
  for _, file in ipairs{ "lua/runnel.lua", "lua/runnel/io.lua", "lua/runnel/view.lua" } do
    local src = read(file)
    local tables = {}
    for name, body in src:gmatch("local ([%u_]+_FIELDS)%s*=%s*(%b{})") do
      local keys = {}
      for key in body:gmatch("([%a_][%w_]*)%s*=") do keys[#keys + 1] = key end
      tables[name] = keys
    end
    local current
    for line in src:gmatch("[^\n]*") do
      current = line:match("^%s*function ([%w_.:]+)%(") or line:match("^%s*local function ([%w_]+)%(") or current
      for name in line:gmatch("([%u_]+_FIELDS)") do
        if tables[name] and not line:match("local " .. name .. "%s*=") and current then
          local owner = current:match("[.:]") and public_name(current) or HELPER_OWNER[current]
          if not owner then
            missing[#missing + 1] = ("%s: %s is checked in local function %s: name its public function in %s's HELPER_OWNER")
                                    :format(file, name, current, "spec/api_doc_spec.lua")
          else
            owners[owner] = owners[owner] or {}
            for _, k in ipairs(tables[name]) do owners[owner][k] = true end
          end
          tables[name] = nil
        end
      end
    end
  end
  for fn, opts in pairs(LOOSE_OPTIONS) do
    owners[fn] = owners[fn] or {}
    for _, k in ipairs(opts) do owners[fn][k] = true end
  end
  return owners
end

-- The section of docs/api.md whose heading names qname, or nil.
local function section(doc, qname)
  local lines, inside, out = {}, false, nil
  for line in (doc .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  local plain = qname:gsub("%p", "%%%0")
  for _, line in ipairs(lines) do
    if line:match("^#") then
      if inside then break end
      if line:match("`" .. plain .. "[%(` %[]") or line:match("[ *]" .. plain .. "%(") then
        inside, out = true, {}
      end
    end
    if inside then out[#out + 1] = line end
  end
  return out and table.concat(out, "\n")
end

describe("docs/api.md", function()
  after_each(H.cleanup)

  it("documents every public Lua function, method and option, and every C function of runnel.h", function()
    local doc = read(DOC)
    local missing, wanted = {}, {}
    for _, n in ipairs(public(runnel)) do wanted[#wanted + 1] = "runnel." .. n end
    wanted[#wanted + 1] = "runnel._VERSION"
    for _, n in ipairs(public(core.Pipeline)) do wanted[#wanted + 1] = "p:" .. n end
    for _, n in ipairs(public(core.Relation)) do wanted[#wanted + 1] = "rel:" .. n end
    for _, n in ipairs(attached_methods()) do wanted[#wanted + 1] = "att:" .. n end
    for n in read("core/runnel.h"):gmatch("RN_API[^;{]-[%s*](rn_[%w_]+)%s*%(") do wanted[#wanted + 1] = n end
    assert.is_true(#wanted > 60, "the public list came out short")
    for _, qname in ipairs(wanted) do
      if not section(doc, qname) then missing[#missing + 1] = "function " .. qname end
    end
    for fn, opts in pairs(option_tables(missing)) do
      local text = section(doc, fn)
      local names = {}
      for k in pairs(opts) do names[#names + 1] = k end
      table.sort(names)
      for _, k in ipairs(names) do
        if not (text and text:find("`" .. k .. "`", 1, true) or text and text:find("`" .. k .. " =", 1, true)) then
          missing[#missing + 1] = ("option %s of %s"):format(k, fn)
        end
      end
    end
    table.sort(missing)
    assert(#missing == 0, DOC .. " is missing:\n  " .. table.concat(missing, "\n  "))
  end)

  it("has a section the spec can find for each heading form it uses", function()
    local doc = "### `p:run(source [, opts])`\ntext `batch`\n### `rn_begin(p)`\n"
    assert.matches("batch", section(doc, "p:run"))
    assert.is_nil(section(doc, "p:ru"))
    assert.truthy(section(doc, "rn_begin"))
  end)
end)
