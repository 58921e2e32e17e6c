-- man.lua — runnel.1 from `runnel help` (stdin), so the man page and the
-- help text never disagree. The help text's shape (lua/cli.c, HELP): its
-- first line "runnel V - summary"; a line "Word:" starts a section; a line
-- "  term   text" (two spaces or more between) is an entry; a deeper line
-- continues the entry above; "  text" alone is a paragraph.
local version, date = arg[1] or "", arg[2] or ""

local function roff(s)
  s = s:gsub("\\", "\\e"):gsub("%-", "\\-")
  if s:match("^[%.']") then s = "\\&" .. s end
  return s
end

local out = {}
local function emit(s) out[#out + 1] = s end

local first = io.read("l")
local summary = first:match("^runnel %S+ %- (.*)$") or first
emit(('.TH RUNNEL 1 "%s" "runnel %s" "User Commands"'):format(date, version))
emit(".SH NAME")
emit("runnel \\- " .. roff(summary))
local lines = {}
for line in io.lines() do lines[#lines + 1] = line end

local section, in_paragraph = nil, false
for i, line in ipairs(lines) do
  local head = line:match("^(%u[%w ]*):$")
  local term, text = line:match("^  (%S.-)%s%s+(%S.*)$")
  local deeper = line:match("^%s%s%s%s+(%S.*)$")
  local plain = line:match("^  (%S.*)$")
  local next_deeper = (lines[i + 1] or ""):match("^%s%s%s%s+%S")
  if head then
    section, in_paragraph = head:upper(), false
    emit(".SH " .. (section == "USAGE" and "SYNOPSIS" or section))
  elseif line == "" then
    in_paragraph = false
  elseif deeper then
    emit(roff(deeper)) -- the entry above goes on
  elseif section == "USAGE" then
    emit(".B " .. roff(plain))
    emit(".br")
  elseif term then
    emit(".TP")
    emit(".B " .. roff(term))
    emit(roff(text))
  elseif plain and next_deeper then -- a term alone on its line, its text below
    emit(".TP")
    emit(".B " .. roff(plain))
  else
    if not in_paragraph then emit(".PP") end
    in_paragraph = true
    emit(roff(plain or line))
  end
end
io.write(table.concat(out, "\n"), "\n")
