---------------------------------------------------------------------------
-- The transport header (the fixed part of every dissector xdrgen writes)
--
-- Every version keeps the first four words: xid, vers, credit, and the header type
-- (RFC 8166 section 4.2; draft-cel-nfsv4-rpcrdma-version-two section 3.1). Version 1 goes
-- on with the body union of rpcrdma1_msg chosen by the fourth word (proc); version 2 with
-- rdma_flags and the header type's own body (V2.htypes).
---------------------------------------------------------------------------

local rpc = Dissector.get("rpc")
local data = Dissector.get("data")

local function header(c, root)
  local tvb = c.tvb
  need(c, 0, 16, "transport header")
  local xid, vers, htype = tvb(0, 4):uint(), tvb(4, 4):uint(), tvb(12, 4):uint()
  add(root, F.xid, tvb(0, 4))
  add(root, F.vers, tvb(4, 4))
  add(root, F.credit, tvb(8, 4))
  if vers == 1 and V1 then
    local name = V1.names[htype] or "unknown"
    add(root, F.htype, tvb(12, 4), htype, string.format("Message type (proc): %s (%d)", name, htype))
    c.summary = string.format("v1 %s XID 0x%08x", name, xid)
    local off = V1.body(c, root, 16, htype)
    if V1.rpc[htype] then c.rpc_at = off end
    return off
  end
  if vers == 2 and V2 then
    need(c, 16, 4, "rdma_flags")
    local flags = tvb(16, 4):uint()
    local h = V2.htypes[htype]
    local name = h and h.name or "unknown"
    local hi = add(root, F.htype, tvb(12, 4), htype, string.format("Header type: %s (%d)", name, htype))
    local fi = add(root, F.flags, tvb(16, 4))
    if fi then
      for _, f in ipairs(V2.flags) do fi:add(f, tvb(16, 4)) end
    end
    -- Section 3.2: bits without a defined flag are reserved; senders MUST set them to zero.
    local reserved = bit32.band(flags, bit32.bnot(V2.known_flags))
    if reserved ~= 0 then
      note(fi, E.flags, string.format("reserved flag bits set: 0x%08x", reserved))
    end
    local response = ""
    if bit32.band(flags, V2.response) ~= 0 then response = " (response)" end
    c.summary = string.format("v2 %s XID 0x%08x%s", name, xid, response)
    if not h then
      -- Section 5.2: header types beyond the base ones are OPTIONAL extensions.
      note(hi, E.unknown, string.format("header type %d: not defined by the XDR this dissector was made from", htype))
      if c.len > 20 then add(root, F.body, tvb(20)) end
      return c.len
    end
    local off = h.body(c, root, 20, h.name)
    if h.rpc then c.rpc_at = off end
    return off
  end
  add(root, F.htype, tvb(12, 4))
  c.summary = string.format("version %d XID 0x%08x", vers, xid)
  note(root, E.unknown, string.format("version %d: not defined by the XDR this dissector was made from", vers))
  return 16
end

-- Whether the RPC message after the header lacks the items DDP moved, which this dissector
-- does not put back: a call with Read chunks (their data is read by RDMA), or a reply with
-- Write chunks that were written (RFC 8166 section 3.5.3: the reply's inline part leaves
-- them out).
local function reduced(c)
  if c.chunks.reads and c.chunks.reads > 0 then return true end
  if c.chunks.write_bytes and c.chunks.write_bytes > 0 and c.rpc_at + 8 <= c.len then
    return c.tvb(c.rpc_at + 4, 4):uint() == 1
  end
  return false
end

local function context(tvb, pinfo)
  return { tvb = tvb, len = tvb:len(), pinfo = pinfo, depth = 0, chunks = {} }
end

local function dissect(tvb, pinfo, tree)
  local c = context(tvb, pinfo)
  pinfo.cols.protocol = "RPC-over-RDMA"
  local root = tree:add(p, tvb())
  local ok, res = pcall(header, c, root)
  if not ok then
    if getmetatable(res) ~= Malformed then error(res, 0) end
    root:add_proto_expert_info(E.malformed, "Malformed: " .. res.msg)
    c.summary = (c.summary or "") .. " [Malformed]"
    c.rpc_at = nil
  else
    -- `res` is where the header ends.
    root:set_len(math.min(res, c.len))
  end
  root:append_text(", " .. (c.summary or ""))
  pinfo.cols.info:set(c.summary or "")
  if c.rpc_at and c.rpc_at < c.len then
    local rest = tvb(c.rpc_at):tvb()
    if reduced(c) then
      -- What DDP moved is missing: show the bytes without dissecting them as RPC.
      root:add(tvb(c.rpc_at), "RPC message without the items moved by RDMA (not reassembled)")
      data:call(rest, pinfo, tree)
    else
      -- The RPC message follows the header (RDMA_MSG, RDMA2_MSG). A malformed RPC message is
      -- reported by the RPC dissector itself; its Lua error is not ours.
      pcall(rpc.call, rpc, rest, pinfo, tree)
    end
  end
  return c.len
end

-- Whether the payload can be an RPC-over-RDMA header: a known version, a known version 1
-- procedure or version 2 flags without reserved bits, and for a header followed by an RPC
-- message, chunk lists that parse and an RPC message with the same XID (as Wireshark's own
-- rpcordma dissector checks for version 1).
local function looks_like(tvb, pinfo)
  local c = context(tvb, pinfo)
  if c.len < 16 then return false end
  local vers, htype = tvb(4, 4):uint(), tvb(12, 4):uint()
  local carries_rpc
  if vers == 1 and V1 then
    if V1.names[htype] == nil then return false end
    carries_rpc = V1.rpc[htype]
  elseif vers == 2 and V2 then
    if c.len < 20 then return false end
    if bit32.band(tvb(16, 4):uint(), bit32.bnot(V2.known_flags)) ~= 0 then return false end
    carries_rpc = V2.htypes[htype] and V2.htypes[htype].rpc
  else
    return false
  end
  if not carries_rpc then return true end
  local ok = pcall(header, c, nil)
  return ok and c.rpc_at ~= nil and c.rpc_at + 4 <= c.len
    and tvb(c.rpc_at, 4):uint() == tvb(0, 4):uint()
end

-- RPC-over-RDMA travels in Sends only.
local SEND = { iwarp = { [0x3] = true, [0x4] = true, [0x5] = true, [0x6] = true },
               -- RC SEND_ONLY, SEND_ONLY_WITH_IMMEDIATE, SEND_ONLY_WITH_INVALIDATE
               ib = { [0x04] = true, [0x05] = true, [0x17] = true } }

local function field(name)
  local ok, f = pcall(Field.new, name)
  if ok then return f end
end

local iwarp_opcode = field("iwarp_rdma.opcode")
local ib_opcode = field("infiniband.bth.opcode")

local function last_value(f)
  if not f then return nil end
  local all = { f() }
  local fi = all[#all]
  return fi and fi.value
end

local function heuristic(opcode_field, sends)
  return function(tvb, pinfo, tree)
    local op = last_value(opcode_field)
    if op ~= nil and not sends[op] then return false end
    if not looks_like(tvb, pinfo) then return false end
    dissect(tvb, pinfo, tree)
    return true
  end
end

p.dissector = dissect
p:register_heuristic("iwarp_ddp_rdmap", heuristic(iwarp_opcode, SEND.iwarp))
p:register_heuristic("infiniband.payload", heuristic(ib_opcode, SEND.ib))
