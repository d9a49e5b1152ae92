-- A headless Neovim session against the real `vramscope lsp` (lsp/nvim_test.go
-- runs it): the setup of docs/editors.md, then attach, hints after edits,
-- hover, diagnostics and a command. Each step records what it saw in
-- $VRAMSCOPE_RESULT (JSON); the Go test judges it. $VRAMSCOPE_STAY keeps the
-- editor open at the end (the screenshot in tmux).
local bin, fixtures, result = vim.env.VRAMSCOPE_BIN, vim.env.VRAMSCOPE_FIXTURES, vim.env.VRAMSCOPE_RESULT
local steps = {}
local function record(name, ok, detail)
  table.insert(steps, { step = name, ok = ok and true or false, detail = vim.inspect(detail) })
end
local function finish()
  local f = assert(io.open(result, "w"))
  f:write(vim.json.encode({ steps = steps }))
  f:close()
  if not vim.env.VRAMSCOPE_STAY then vim.cmd("qa!") end
end

-- showDocument opens the flame page in a browser: record it instead.
local opened
vim.ui.open = function(uri)
  opened = uri
  return { wait = function() return { code = 0 } end }
end

vim.cmd("filetype on")
-- The setup docs/editors.md gives (Neovim 0.11+).
vim.lsp.config("vramscope", {
  cmd = { bin, "lsp", "--daemon", "off" },
  filetypes = { "python" },
  root_dir = fixtures,
  init_options = { vramscope = { snapshot = "snapshots/gpt2_train.pickle", hintThreshold = 0.01 } },
  settings = { vramscope = {} },
})
vim.lsp.enable("vramscope")
vim.lsp.inlay_hint.enable(true)

vim.cmd.edit(fixtures .. "/trainer/train_gpt2.py")
local buf = vim.api.nvim_get_current_buf()
local forward = "out = model(input_ids=ids, labels=ids)"

local function client()
  return vim.lsp.get_clients({ bufnr = buf, name = "vramscope" })[1]
end
-- hints is the hints Neovim shows now: {line (0-based) = label}.
local function hints()
  local out = {}
  for _, h in ipairs(vim.lsp.inlay_hint.get({ bufnr = buf })) do
    local label = h.inlay_hint.label
    if type(label) == "table" then label = label[1].value end
    out[h.inlay_hint.position.line] = label
  end
  return out
end
local function lineOf(text)
  for i, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if vim.trim(l) == text then return i - 1 end
  end
end
-- waitHint waits until the statement's line shows a hint matching pattern.
local function waitHint(text, pattern)
  local seen
  local ok = vim.wait(10000, function()
    local line = lineOf(text)
    seen = hints()
    return line ~= nil and seen[line] ~= nil and seen[line]:find(pattern) ~= nil
  end, 20)
  return ok, { line = lineOf(text), hints = seen }
end

record("attach", vim.wait(10000, function() return client() ~= nil and client().initialized end, 20), {})
local ok, seen = waitHint(forward, "2.94 GiB at peak")
record("hint on the forward line", ok, seen)
local before = seen.line

vim.api.nvim_buf_set_lines(buf, 0, 0, false, { "# two lines", "# above" })
ok, seen = waitHint(forward, "^2.94 GiB at peak · 54%% · 168 allocs$")
record("hint follows two inserted lines", ok and seen.line == before + 2 and seen.hints[before] == nil, seen)

vim.api.nvim_buf_set_lines(buf, 0, 2, false, {})
ok, seen = waitHint(forward, "^2.94 GiB")
record("hint follows the lines deleted", ok and seen.line == before, seen)

local row = lineOf(forward)
local text = vim.api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
local col = select(2, text:find("labels=ids"))
vim.api.nvim_buf_set_text(buf, row, col, row, col, { ", use_cache=False" })
ok, seen = waitHint("out = model(input_ids=ids, labels=ids, use_cache=False)", "%(before edit%)$")
record("the edited line says before edit", ok, seen)
vim.cmd("silent undo")
ok, seen = waitHint(forward, "168 allocs$")
record("undo brings the figures back", ok and lineOf(forward) == before, seen)

vim.api.nvim_buf_set_lines(buf, 0, 0, false, { "import sys" })
local hover = client():request_sync("textDocument/hover",
  { textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = lineOf(forward), character = 8 } }, 5000, buf)
local value = hover and hover.result and hover.result.contents.value or ""
record("hover", value:find("live at peak", 1, true) and value:find("[modeling_gpt2.py:", 1, true), value)

local res = client():request_sync("workspace/executeCommand",
  { command = "vramscope.openSnapshot", arguments = { { path = "snapshots/oom_batch.pickle" } } }, 10000, buf)
local diags
ok = vim.wait(10000, function()
  diags = vim.diagnostic.get(buf)
  return #diags > 0 and diags[1].lnum == lineOf(forward)
end, 20)
record("diagnostic on the OOM line, after the edit", ok and res and res.result and res.result.findings > 0,
  { diags = diags, open = res, line = lineOf(forward) })

-- Lua's {} is an empty JSON array: the server takes it as no argument.
res = client():request_sync("workspace/executeCommand", { command = "vramscope.flameGraph", arguments = { {} } }, 10000, buf)
local page = res and res.result or {}
record("flame graph command opens the page", page.path ~= nil and page.opened and opened == page.uri
  and vim.fn.filereadable(page.path) == 1, { res = res, opened = opened })

-- The screenshot (lsp/testdata/nvim/screenshot.sh) shows this state: a line
-- inserted above, the hints and the OOM's diagnostic on their statements, and
-- with VRAMSCOPE_STAY=edited the forward line edited too.
if vim.env.VRAMSCOPE_STAY then
  if vim.env.VRAMSCOPE_STAY == "edited" then
    row = lineOf(forward)
    text = vim.api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
    col = select(2, text:find("labels=ids"))
    vim.api.nvim_buf_set_text(buf, row, col, row, col, { ", use_cache=False" })
    waitHint("out = model(input_ids=ids, labels=ids, use_cache=False)", "%(before edit%)$")
    forward = "out = model(input_ids=ids, labels=ids, use_cache=False)"
  end
  vim.o.number = true
  vim.diagnostic.config({ virtual_text = true, severity_sort = true })
  vim.cmd("normal! gg")
  vim.api.nvim_win_set_cursor(0, { lineOf(forward) + 1, 0 })
  vim.cmd("redraw!")
  vim.defer_fn(function() vim.cmd("redraw!") end, 1000) -- after the last messages and hints
end
finish()
