---------------------------------------------------------------------------
-- Readers (the fixed part of every dissector xdrgen writes)
--
-- Every reader checks that its bytes are in the frame before it reads them. A frame that
-- ends early, or holds a value XDR forbids, raises a Malformed error; dissect() turns it
-- into an expert info (group Malformed) after showing what was read. Any other Lua error
-- is a bug of this file and stays visible as one.
---------------------------------------------------------------------------

local Malformed = {}

local function malformed(off, msg)
  error(setmetatable({ off = off, msg = msg }, Malformed), 0)
end

-- The frame has `n` more bytes at `off`, or it is malformed.
local function need(c, off, n, what)
  if n < 0 or off + n > c.len then
    malformed(off, string.format("%s: %d bytes needed at offset %d, %d left",
      what, n, off, math.max(c.len - off, 0)))
  end
end

-- XDR pads opaque data and strings to a multiple of four bytes (RFC 4506 section 4.10).
local function pad(n)
  return (4 - n % 4) % 4
end

-- Tree helpers: a nil tree (the heuristic's trial parse) records nothing.
local function add(tree, ...)
  if tree then return tree:add(...) end
end

local function generated(item)
  if item then item:set_generated() end
  return item
end

local function note(item, ex, text)
  if item then item:add_proto_expert_info(ex, text) end
end

-- "1 segment", "2 segments" (`words` when not `word` .. "s").
local function plural(n, word, words)
  if n == 1 then return string.format("%d %s", n, word) end
  return string.format("%d %s", n, words or (word .. "s"))
end

-- A subtree starting at `off`; close() gives it its length.
local function open(c, tree, off, label)
  if tree then return tree:add(c.tvb(off, 0), label), off end
  return nil, off
end

local function close(item, start, off, suffix)
  if item then
    item:set_len(off - start)
    if suffix then item:append_text(suffix) end
  end
end

-- Nesting of recursive types, bounded so that a hostile frame cannot nest without end.
local MAX_DEPTH = 24

local function enter(c, what)
  c.depth = c.depth + 1
  if c.depth > MAX_DEPTH then
    malformed(0, string.format("%s: nested more than %d deep", what, MAX_DEPTH))
  end
end

local function leave(c)
  c.depth = c.depth - 1
end

local function uint32(c, tree, f, off, what)
  need(c, off, 4, what)
  add(tree, f, c.tvb(off, 4))
  return off + 4, c.tvb(off, 4):uint()
end

local function int32(c, tree, f, off, what)
  need(c, off, 4, what)
  add(tree, f, c.tvb(off, 4))
  return off + 4, c.tvb(off, 4):int()
end

local function uint64(c, tree, f, off, what)
  need(c, off, 8, what)
  add(tree, f, c.tvb(off, 8))
  return off + 8, c.tvb(off, 8):uint64()
end

local function int64(c, tree, f, off, what)
  need(c, off, 8, what)
  add(tree, f, c.tvb(off, 8))
  return off + 8, c.tvb(off, 8):int64()
end

local function float32(c, tree, f, off, what)
  need(c, off, 4, what)
  add(tree, f, c.tvb(off, 4))
  return off + 4, c.tvb(off, 4):float()
end

local function float64(c, tree, f, off, what)
  need(c, off, 8, what)
  add(tree, f, c.tvb(off, 8))
  return off + 8, c.tvb(off, 8):float()
end

-- An XDR bool is 0 or 1 (RFC 4506 section 4.4); so is the word before an optional item
-- or a list entry (section 4.19).
local function bool(c, tree, f, off, what)
  need(c, off, 4, what)
  local v = c.tvb(off, 4):uint()
  if v > 1 then
    malformed(off, string.format("%s: %d where XDR allows only 0 or 1", what, v))
  end
  add(tree, f, c.tvb(off, 4))
  return off + 4, v == 1
end

-- An enum (RFC 4506 section 4.3): a value the enum does not declare is shown with a warning.
local function enum(c, tree, f, off, what, names)
  need(c, off, 4, what)
  local item = add(tree, f, c.tvb(off, 4))
  local v = c.tvb(off, 4):int()
  if names[v] == nil then
    note(item, E.enum, string.format("%s: %d is not a value of its enum", what, v))
  end
  return off + 4, v
end

-- opaque x[n] / string x[n] (RFC 4506 sections 4.9, 4.11).
local function fixed_bytes(c, tree, f, off, n, what)
  need(c, off, n + pad(n), what)
  add(tree, f, c.tvb(off, n))
  return off + n + pad(n)
end

-- opaque x<max> / string x<max> (RFC 4506 sections 4.10, 4.11): a length within the bound,
-- then the bytes and their padding.
local function var_bytes(c, tree, flen, f, off, max, what)
  local n
  off, n = uint32(c, tree, flen, off, what)
  if max and n > max then
    malformed(off - 4, string.format("%s: length %d above its bound %d", what, n, max))
  end
  need(c, off, n + pad(n), what)
  add(tree, f, c.tvb(off, n))
  return off + n + pad(n)
end

-- `n` elements of at least `min` bytes each fit in what is left of the frame (checked
-- before looping, so a hostile count cannot make the loop run long).
local function room(c, off, n, min, what)
  if n * min > c.len - off then
    malformed(off, string.format("%s: %d elements of at least %d bytes do not fit in the %d bytes left",
      what, n, min, math.max(c.len - off, 0)))
  end
end

-- The element count of T x<max> (RFC 4506 section 4.13).
local function count(c, tree, f, off, max, min, what)
  local n
  off, n = uint32(c, tree, f, off, what)
  if max and n > max then
    malformed(off - 4, string.format("%s: %d elements above its bound %d", what, n, max))
  end
  room(c, off, n, min, what)
  return off, n
end

-- A linked list (RFC 4506 section 4.19: each entry is preceded by an XDR bool, 1 while
-- entries follow, 0 at the end). `first`: the list starts with an entry (a value of the
-- element type itself, whose `next` pointer is the list). Every entry takes at least its
-- 4-byte word, so the loop ends with the frame.
local function list(c, tree, off, label, entry, follows, first)
  local a, s = open(c, tree, off, label)
  local n = 0
  if first then
    n = 1
    off = entry(c, a, off, label .. "[1]")
  end
  while true do
    local more
    off, more = bool(c, a, follows, off, label)
    if not more then break end
    n = n + 1
    off = entry(c, a, off, label .. "[" .. n .. "]")
  end
  close(a, s, off, ": " .. plural(n, "entry", "entries"))
  return off
end

---------------------------------------------------------------------------
-- Chunks (RFC 8166 sections 3.4 and 4.1; draft-cel-nfsv4-rpcrdma-version-two section 3.3)
--
-- Read segments with the same Position form one Read chunk; a Write chunk and the Reply
-- chunk are arrays of segments. Each list is shown with its chunks, their segments and
-- lengths; c.chunks keeps the totals for the hand-off to ONC RPC.
---------------------------------------------------------------------------

local function hex64(v)
  return "0x" .. v:tohex(16)
end

-- A segment's fields under `tree`; `at` is its handle, `pos_at` its read segment's Position.
local function show_segment(c, tree, at, label, pos_at)
  if not tree then return end
  local start = pos_at or at
  local s = tree:add(F.segment, c.tvb(start, at + 16 - start))
  if pos_at then s:add(F.position, c.tvb(pos_at, 4)) end
  s:add(F.handle, c.tvb(at, 4))
  s:add(F.length, c.tvb(at + 4, 4))
  s:add(F.offset, c.tvb(at + 8, 8))
  s:set_text(string.format("%s: handle 0x%08x, length %d, offset %s", label,
    c.tvb(at, 4):uint(), c.tvb(at + 4, 4):uint(), hex64(c.tvb(at + 8, 8):uint64())))
end

-- A Read list: the linked list of read segments (position, handle, length, offset: 20
-- bytes after each 4-byte "follows" word).
local function read_list(c, tree, off, label)
  local start = off
  local chunks, order, nseg, bytes = {}, {}, 0, 0
  local err, err_at
  while true do
    if off + 4 > c.len then err, err_at = "the list ends early", off break end
    local more = c.tvb(off, 4):uint()
    if more > 1 then
      err, err_at = string.format("%d where XDR allows only 0 or 1", more), off
      break
    end
    off = off + 4
    if more == 0 then break end
    if off + 20 > c.len then err, err_at = "a read segment ends early", off break end
    local pos = c.tvb(off, 4):uint()
    local ch = chunks[pos]
    if not ch then
      ch = { position = pos, segs = {}, bytes = 0 }
      chunks[pos] = ch
      order[#order + 1] = ch
    end
    local len = c.tvb(off + 8, 4):uint()
    ch.segs[#ch.segs + 1] = off
    ch.bytes = ch.bytes + len
    nseg, bytes = nseg + 1, bytes + len
    off = off + 20
  end
  c.chunks.reads, c.chunks.read_bytes = #order, bytes
  if tree then
    local item = tree:add(F.read_list, c.tvb(start, off - start))
    item:set_text(string.format("%s: Read list, %s, %s, %d bytes", label,
      plural(#order, "Read chunk"), plural(nseg, "segment"), bytes))
    generated(item:add(F.reads, c.tvb(start, off - start), #order))
    for i, ch in ipairs(order) do
      local ci = item:add(F.read_chunk, c.tvb(ch.segs[1], 20))
      ci:set_text(string.format("Read chunk %d: position %d, %s, %d bytes", i, ch.position,
        plural(#ch.segs, "segment"), ch.bytes))
      generated(ci:add(F.chunk_length, c.tvb(ch.segs[1], 20), ch.bytes))
      for k, at in ipairs(ch.segs) do show_segment(c, ci, at + 4, "Segment " .. k, at) end
    end
  end
  if err then malformed(err_at, label .. ": " .. err) end
  return off
end

-- One Write chunk (or the Reply chunk): a counted array of segments. `start` is where its
-- item begins (the Reply chunk's includes the word saying it is present); `what` names the
-- chunk in the item's text when `label` does not.
local function write_chunk(c, tree, off, label, kind, start, what)
  need(c, off, 4, label)
  start = start or off
  local n = c.tvb(off, 4):uint()
  local fits = math.floor(math.max(c.len - off - 4, 0) / 16)
  local shown = math.min(n, fits)
  local bytes = 0
  for k = 1, shown do bytes = bytes + c.tvb(off + 4 + (k - 1) * 16 + 4, 4):uint() end
  local item = nil
  if tree then
    local range = c.tvb(start, off + 4 + shown * 16 - start)
    item = tree:add(F[kind], range)
    local lead = label .. ": "
    if what then lead = lead .. what .. ", " end
    item:set_text(string.format("%s%s, %d bytes", lead, plural(n, "segment"), bytes))
    item:add(F.segments, c.tvb(off, 4))
    generated(item:add(F.chunk_length, range, bytes))
    for k = 1, shown do show_segment(c, item, off + 4 + (k - 1) * 16, "Segment " .. k) end
  end
  if n > fits then
    malformed(off, string.format("%s: %d segments announced, room for %d", label, n, fits))
  end
  return off + 4 + n * 16, bytes, n, item
end

-- A Write list: the linked list of Write chunks.
local function write_list(c, tree, off, label)
  local start = off
  local item = add(tree, F.write_list, c.tvb(off, 0))
  local n, nseg, bytes = 0, 0, 0
  local ok, err = pcall(function()
    while true do
      local more
      off, more = bool(c, nil, nil, off, label)
      if not more then return end
      n = n + 1
      local b, s
      off, b, s = write_chunk(c, item, off, string.format("Write chunk %d", n), "write_chunk")
      nseg, bytes = nseg + s, bytes + b
    end
  end)
  c.chunks.writes, c.chunks.write_bytes = n, bytes
  if item then
    item:set_len(off - start)
    item:set_text(string.format("%s: Write list, %s, %s, %d bytes", label,
      plural(n, "Write chunk"), plural(nseg, "segment"), bytes))
    generated(item:add(F.writes, c.tvb(start, off - start), n))
  end
  if not ok then error(err, 0) end
  return off
end

-- The Reply chunk: an optional Write chunk.
local function reply_chunk(c, tree, off, label)
  local present
  off, present = bool(c, nil, nil, off, label)
  c.chunks.reply = present
  if not present then
    local item = add(tree, F.reply_chunk, c.tvb(off - 4, 4))
    if item then
      item:set_text(label .. ": no Reply chunk")
      generated(item:add(F.reply, c.tvb(off - 4, 4), 0))
    end
    return off
  end
  local at, bytes, segments, item = off - 4, nil, nil, nil
  off, bytes, segments, item = write_chunk(c, tree, off, label, "reply_chunk", at, "Reply chunk")
  if item then generated(item:add(F.reply, c.tvb(at, 4), 1)) end
  c.chunks.reply_bytes = bytes
  return off
end

---------------------------------------------------------------------------
-- Transport properties (draft-cel-nfsv4-rpcrdma-version-two section 4.1)
--
-- rdma_which names the property; rdma_data holds a value of the property's own XDR type
-- (RDMA2_PROPID_FOO <-> rpcrdma2_prop_foo, PROPS below), or nothing for its default value.
---------------------------------------------------------------------------

local function propval(c, tree, off, label, fwhich, flen, fdata)
  local t, start = open(c, tree, off, label)
  local which, n
  off, which = uint32(c, t, fwhich, off, "rdma_which")
  off, n = uint32(c, t, flen, off, "rdma_data")
  need(c, off, n + pad(n), "rdma_data")
  local prop = PROPS[which]
  local name = prop and prop.name or string.format("unknown property %d", which)
  if n == 0 then
    add(t, c.tvb(off, 0), "rdma_data is empty: the property's default value")
  elseif prop and prop.dissect then
    -- The value is XDR of the property's type, alone in rdma_data.
    local sub = { tvb = c.tvb(off, n):tvb(), pinfo = c.pinfo, depth = c.depth, chunks = c.chunks }
    sub.len = n
    local ok, used = pcall(prop.dissect, sub, t, 0, prop.type)
    if not ok then
      if getmetatable(used) ~= Malformed then error(used, 0) end
      -- Section 4.1: a value that does not conform to its type is RDMA2_ERR_BAD_XDR.
      malformed(off + used.off, string.format("%s: rdma_data is not a %s (%s)", name,
        prop.type, used.msg))
    end
    if used < n then
      note(t, E.trailing, string.format("%s: %d bytes of rdma_data after the %s value",
        name, n - used, prop.type))
    end
  else
    add(t, fdata, c.tvb(off, n))
    if not prop then
      -- Section 5.3.4: receivers ignore properties they do not know.
      note(t, E.unknown, string.format("%s: not defined by the XDR this dissector was made from", name))
    end
  end
  off = off + n + pad(n)
  close(t, start, off, ": " .. name)
  return off
end
