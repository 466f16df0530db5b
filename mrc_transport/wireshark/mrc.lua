-- mrc.lua: a Wireshark dissector for MRC (Multipath Reliable Connection) over UDP.
--
-- The wire format is docs/protocol.md of the mrc project; the field names are those of
-- mrc_transport/wire/frames.py. Load it with `tshark -X lua_script:mrc.lua`, or copy it
-- to Wireshark's personal plugin folder (`mrc wireshark --install` does). It claims UDP
-- port 4791 (a preference), which Wireshark otherwise gives to RoCEv2 (InfiniBand BTH).
-- IPv6, the uSID destination and the SRH stay Wireshark's own dissectors.
--
-- Written for Lua 5.2 to 5.4 (Wireshark 3.x and 4.x): no bit32, no integer operators.

local mrc = Proto("mrc", "Multipath Reliable Connection")

local DEFAULT_PORT = 4791 -- RoCEv2's port, which MRC keeps (docs/protocol.md, "UDP header")
local VERSION = 1
local COMMON = 12 -- common header bytes
local KNOWN_FLAGS = 0x1F
local TWO32 = 4294967296

local OPCODES = {
    [0x00] = "WRITE_FIRST", [0x01] = "WRITE_MIDDLE", [0x02] = "WRITE_LAST",
    [0x03] = "WRITE_ONLY", [0x04] = "ACK", [0x05] = "SACK", [0x06] = "NACK",
    [0x07] = "PROBE", [0x08] = "PROBE_REPLY", [0x09] = "SETUP", [0x0A] = "SETUP_ACK",
    [0x0B] = "CLOSE", [0x0C] = "CLOSE_ACK",
}
local KIND = {
    [0x00] = "data", [0x01] = "data", [0x02] = "data", [0x03] = "data",
    [0x04] = "sack", [0x05] = "sack", [0x06] = "nack", [0x07] = "probe",
    [0x08] = "probe", [0x09] = "setup", [0x0A] = "setup", [0x0B] = "close",
    [0x0C] = "close",
}
-- A data packet a lab switch trimmed to its headers carries one of these DSCPs
-- (docs/protocol.md, "Trimmed data packets").
local TRIMMED_DSCPS = { [43] = "TRIMMED", [47] = "TRIMMED_LASTHOP" }
-- Data a switch drops rather than trims (`mrc perf --no-trim`; docs/protocol.md,
-- "Traffic classes"); new data (26) and retransmissions (28) are trimmable.
local DSCP_NO_TRIM = 30
local NACK_REASONS = {
    [1] = "TRIMMED", [2] = "TRIMMED_LASTHOP", [3] = "NO_BUFFER",
    [4] = "PSN_OUT_OF_WINDOW", [5] = "UNKNOWN_CONNECTION", [6] = "SEQUENCE_ERROR",
}

local f = {
    version = ProtoField.uint8("mrc.version", "Version", base.DEC),
    opcode = ProtoField.uint8("mrc.opcode", "Opcode", base.HEX, OPCODES),
    flags = ProtoField.uint8("mrc.flags", "Flags", base.HEX),
    flag_rtx = ProtoField.bool("mrc.flags.rtx", "RTX (retransmission)", 8, nil, 0x01),
    flag_ts = ProtoField.bool("mrc.flags.ts", "TS (timestamp valid)", 8, nil, 0x02),
    flag_ecn_echo = ProtoField.bool("mrc.flags.ecn_echo", "ECN_ECHO (CE received)", 8, nil, 0x04),
    flag_ack_req = ProtoField.bool("mrc.flags.ack_req", "ACK_REQ (SACK now)", 8, nil, 0x08),
    flag_restore_window = ProtoField.bool("mrc.flags.restore_window",
        "RESTORE_WINDOW (penalty over)", 8, nil, 0x10),
    flag_unknown = ProtoField.uint8("mrc.flags.unknown", "Unknown bits", base.HEX, nil, 0xE0),
    reserved = ProtoField.uint8("mrc.reserved", "Reserved", base.HEX),
    dst_conn = ProtoField.uint32("mrc.dst_conn", "Destination connection", base.HEX),
    src_conn = ProtoField.uint32("mrc.src_conn", "Source connection", base.HEX),
    ev = ProtoField.uint32("mrc.ev", "Entropy value (EV)", base.HEX, nil, nil,
        "UDP source port << 16 | low 16 bits of the flow label (docs/protocol.md)"),
    -- data
    psn = ProtoField.uint32("mrc.psn", "PSN", base.DEC),
    msn = ProtoField.uint32("mrc.msn", "MSN", base.DEC),
    msg_offset = ProtoField.uint32("mrc.msg_offset", "Message offset", base.DEC),
    msg_len = ProtoField.uint32("mrc.msg_len", "Message length", base.DEC),
    ts = ProtoField.uint64("mrc.ts", "Timestamp (ns)", base.DEC),
    payload_len = ProtoField.uint32("mrc.payload_len", "Payload length", base.DEC),
    rtx_first_frame = ProtoField.framenum("mrc.rtx.first_frame", "First sent in frame"),
    rtx_first_ev = ProtoField.uint32("mrc.rtx.first_ev", "First sent on EV", base.HEX),
    -- the path an EV names (protocol/ev.py ev_fields): plane, path index, entropy
    ev_plane = ProtoField.uint8("mrc.ev.plane", "Plane (NIC port)", base.DEC),
    ev_path = ProtoField.uint8("mrc.ev.path", "Path in plane (T0 uplink / T1)", base.DEC),
    ev_entropy = ProtoField.uint16("mrc.ev.entropy", "Entropy", base.HEX),
    -- ACK / SACK
    cum_psn = ProtoField.uint32("mrc.cum_psn", "Cumulative PSN", base.DEC),
    sack_base = ProtoField.uint32("mrc.sack_base", "SACK base", base.DEC),
    bitmap = ProtoField.uint64("mrc.bitmap", "SACK bitmap", base.HEX),
    sack_psn = ProtoField.uint32("mrc.sack.psn", "Acknowledged PSN", base.DEC),
    reflected_ev = ProtoField.uint32("mrc.reflected_ev", "Reflected EV", base.HEX),
    ooo_count = ProtoField.uint16("mrc.ooo_count", "Out-of-order count", base.DEC),
    rwnd_penalty = ProtoField.uint8("mrc.rwnd_penalty", "Window penalty (0-127)", base.DEC),
    sack_reserved = ProtoField.uint8("mrc.sack_reserved", "Reserved", base.HEX),
    rwnd = ProtoField.uint32("mrc.rwnd", "Receive window (bytes)", base.DEC),
    rcvd_bytes = ProtoField.uint64("mrc.rcvd_bytes", "Bytes received", base.DEC),
    service_time = ProtoField.uint32("mrc.service_time", "Service time (ns)", base.DEC),
    ports_down = ProtoField.uint64("mrc.ports_down", "Ports down (bit per plane)", base.HEX),
    -- NACK
    nack_reason = ProtoField.uint8("mrc.nack_reason", "Reason", base.DEC, NACK_REASONS),
    nack_reserved = ProtoField.uint24("mrc.nack_reserved", "Reserved", base.HEX),
    -- PROBE / PROBE_REPLY
    probe_id = ProtoField.uint32("mrc.probe_id", "Probe id", base.DEC),
    -- SETUP / SETUP_ACK
    initial_psn = ProtoField.uint32("mrc.initial_psn", "Initial PSN", base.DEC),
    mtu = ProtoField.uint16("mrc.mtu", "MTU (largest payload)", base.DEC),
    ev_count = ProtoField.uint16("mrc.ev_count", "EV count", base.DEC),
    -- CLOSE / CLOSE_ACK
    final_psn = ProtoField.uint32("mrc.final_psn", "Final PSN", base.DEC),
    trailing = ProtoField.bytes("mrc.trailing", "Trailing bytes"),
}
mrc.fields = f

-- Malformed packets: one expert per reason of the project's decoder (BadPacket.reason),
-- in the Malformed group, which also marks the packet `_ws.malformed`.
local function malformed(reason, text)
    return ProtoExpert.new("mrc.malformed." .. reason, text, expert.group.MALFORMED,
        expert.severity.ERROR)
end
local e = {
    truncated = malformed("truncated", "MRC header truncated"),
    bad_version = malformed("bad_version", "Unknown MRC version"),
    unknown_opcode = malformed("unknown_opcode", "Unknown MRC opcode"),
    bad_field = malformed("bad_field", "Field value outside its set"),
    bad_length = malformed("bad_length", "Bytes after a control packet's body"),
    bad_message = malformed("bad_message", "Payload outside its message"),
    rtx = ProtoExpert.new("mrc.expert.rtx", "Retransmission", expert.group.SEQUENCE,
        expert.severity.NOTE),
    trimmed = ProtoExpert.new("mrc.expert.trimmed", "Trimmed by a switch: payload cut",
        expert.group.SEQUENCE, expert.severity.WARN),
    trimmed_nack = ProtoExpert.new("mrc.expert.trimmed_nack", "Trimmed packet NACKed",
        expert.group.SEQUENCE, expert.severity.WARN),
    snapshot = ProtoExpert.new("mrc.expert.snapshot", "Cut short by the snapshot length",
        expert.group.UNDECODED, expert.severity.WARN),
}
mrc.experts = e

mrc.prefs.udp_port = Pref.uint("UDP port", DEFAULT_PORT, "UDP destination port of MRC")

-- Body layouts after the common header: {field, offset, length} (docs/protocol.md).
local LAYOUTS = {
    data = { size = 24, { f.psn, 0, 4 }, { f.msn, 4, 4 }, { f.msg_offset, 8, 4 },
        { f.msg_len, 12, 4 }, { f.ts, 16, 8 } },
    sack = { size = 56, { f.cum_psn, 0, 4 }, { f.sack_base, 4, 4 }, { f.bitmap, 8, 8 },
        { f.reflected_ev, 16, 4 }, { f.ts, 20, 8 }, { f.ooo_count, 28, 2 },
        { f.rwnd_penalty, 30, 1 }, { f.sack_reserved, 31, 1 }, { f.rwnd, 32, 4 },
        { f.rcvd_bytes, 36, 8 }, { f.service_time, 44, 4 }, { f.ports_down, 48, 8 } },
    nack = { size = 20, { f.psn, 0, 4 }, { f.nack_reason, 4, 1 }, { f.nack_reserved, 5, 3 },
        { f.reflected_ev, 8, 4 }, { f.ts, 12, 8 } },
    probe = { size = 16, { f.probe_id, 0, 4 }, { f.reflected_ev, 4, 4 }, { f.ts, 8, 8 } },
    setup = { size = 20, { f.initial_psn, 0, 4 }, { f.rwnd, 4, 4 }, { f.mtu, 8, 2 },
        { f.ev_count, 10, 2 }, { f.ts, 12, 8 } },
    close = { size = 4, { f.final_psn, 0, 4 } },
}

-- Retransmissions: where each PSN was first seen, filled on the first (in-order) pass,
-- so a retransmission can name the frame and EV of the original (MRC resends a lost
-- packet on another EV: mrc-protocol-notes.md, "Reliability").
local first_sent = {} -- "src_conn:dst_conn:psn" -> { frame, ev }
local rtx_origin = {} -- frame number of a retransmission -> { frame, ev }

function mrc.init()
    first_sent = {}
    rtx_origin = {}
end

local flow_label_field = Field.new("ipv6.flow")
local dscp_field = Field.new("ipv6.tclass.dscp")
local next_header_field = Field.new("ipv6.nxt")
local IPV6_IN_IPV6 = 41

-- A field of the IPv6 header the switches saw: the innermost one (an ICMPv6 error quotes
-- a packet after its own), or, when that one is encapsulated (the encap encoding, next
-- header 41 before it), the outer header around it, which carries the path, the trim
-- mark and CE.
local function path_header(field)
    local values, nexts = { field() }, { next_header_field() }
    local n = #values
    if n >= 2 and #nexts == n and nexts[n - 1].value == IPV6_IN_IPV6 then
        n = n - 1
    end
    local value = values[n]
    return value and value.value
end

-- The EV: the flow label carries its low 20 bits, the UDP source port its high 16; the
-- 4 bits both hold are read from the port (docs/protocol.md, "Entropy value").
local function packet_ev(pinfo)
    local label = path_header(flow_label_field)
    if label == nil then
        return nil
    end
    return pinfo.src_port * 65536 + label % 65536
end

local function hex32(value)
    return string.format("0x%08x", value)
end

-- "3-6, 9": a sorted list of PSNs as ranges.
local function psn_ranges(psns)
    local parts, i = {}, 1
    while i <= #psns do
        local j = i
        while j < #psns and psns[j + 1] == psns[j] + 1 do
            j = j + 1
        end
        parts[#parts + 1] = (j > i) and (psns[i] .. "-" .. psns[j]) or tostring(psns[i])
        i = j + 1
    end
    return table.concat(parts, ", ")
end

-- Bit i (value 1 << i) of the 64-bit bitmap acknowledges PSN sack_base + i.
local function sacked_psns(body)
    local base = body(4, 4):uint()
    local words = { body(12, 4):uint(), body(8, 4):uint() } -- low word first
    local psns = {}
    for i = 0, 63 do
        local word = words[math.floor(i / 32) + 1]
        if math.floor(word / 2 ^ (i % 32)) % 2 == 1 then
            psns[#psns + 1] = (base + i) % TWO32
        end
    end
    return psns
end

local function add_sack_psns(bitmap_item, body, psns)
    if #psns == 0 then
        return
    end
    bitmap_item:append_text(" (PSNs " .. psn_ranges(psns) .. ")")
    for _, psn in ipairs(psns) do
        bitmap_item:add(f.sack_psn, body(8, 8), psn):set_generated()
    end
end

-- A malformed or cut-short packet: the expert info, and the first one's text for Info.
local function report(ctx, expert_info, text)
    ctx.item:add_proto_expert_info(expert_info, text)
    ctx.problem = ctx.problem or text
end

local function add_flags(tree, tvb)
    local flags = tvb(2, 1):uint()
    local item = tree:add(f.flags, tvb(2, 1))
    item:add(f.flag_rtx, tvb(2, 1))
    item:add(f.flag_ts, tvb(2, 1))
    item:add(f.flag_ecn_echo, tvb(2, 1))
    item:add(f.flag_ack_req, tvb(2, 1))
    item:add(f.flag_restore_window, tvb(2, 1))
    if flags > KNOWN_FLAGS then
        item:add(f.flag_unknown, tvb(2, 1))
    end
    return flags
end

-- Data placement rules (docs/protocol.md, "Data"), as the decoder checks them.
local function placement_error(opcode, offset, msg_len, payload_len)
    local stop = offset + payload_len
    if stop > msg_len then
        return "Payload ends at " .. stop .. ", past msg_len " .. msg_len
    end
    if (opcode == 0x00 or opcode == 0x03) and offset ~= 0 then
        return OPCODES[opcode] .. " at msg_offset " .. offset
    end
    if (opcode == 0x02 or opcode == 0x03) and stop ~= msg_len then
        return OPCODES[opcode] .. " ends at " .. stop .. ", msg_len " .. msg_len
    end
    return nil
end

local function note_retransmission(pinfo, item, key, flags, ev)
    if not pinfo.visited then
        if flags % 2 == 0 then
            first_sent[key] = first_sent[key] or { frame = pinfo.number, ev = ev }
        else
            rtx_origin[pinfo.number] = first_sent[key]
        end
    end
    if flags % 2 == 0 then
        return
    end
    local origin = rtx_origin[pinfo.number]
    local text = "Retransmission"
    if origin ~= nil then
        item:add(f.rtx_first_frame, origin.frame):set_generated()
        if origin.ev ~= nil then
            item:add(f.rtx_first_ev, origin.ev):set_generated()
            if ev ~= nil then
                text = text .. " on EV " .. hex32(ev) .. ", first sent on EV " .. hex32(origin.ev)
            end
        end
    end
    item:add_proto_expert_info(e.rtx, text)
end

-- Per kind: the checks and extras after the body's fields; returns the Info text.
local function finish_data(ctx)
    local body, opcode = ctx.body, ctx.opcode
    local psn, offset, msg_len = body(0, 4):uint(), body(8, 4):uint(), body(12, 4):uint()
    local payload_len = ctx.size - COMMON - 24
    ctx.item:add(f.payload_len, payload_len):set_generated()
    -- A trimmed stub keeps the msg_offset and msg_len of the payload it lost.
    local dscp = path_header(dscp_field)
    local trimmed = payload_len == 0 and TRIMMED_DSCPS[dscp]
    local wrong = not trimmed and placement_error(opcode, offset, msg_len, payload_len)
    if trimmed then
        ctx.item:add_proto_expert_info(e.trimmed, "Trimmed by a switch (" .. trimmed ..
            "): the payload was cut, the receiver should NACK it")
    elseif wrong then
        report(ctx, e.bad_message, wrong)
    end
    local key = hex32(ctx.tvb(8, 4):uint()) .. ":" .. hex32(ctx.tvb(4, 4):uint()) .. ":" .. psn
    note_retransmission(ctx.pinfo, ctx.item, key, ctx.flags, ctx.ev)
    if payload_len > 0 and ctx.captured > COMMON + 24 then
        Dissector.get("data"):call(ctx.tvb(COMMON + 24):tvb(), ctx.pinfo, ctx.root)
    end
    local tags = (trimmed and "[" .. trimmed .. "] " or "") ..
        (dscp == DSCP_NO_TRIM and "[NO_TRIM] " or "") .. (ctx.flags % 2 == 1 and "[RTX] " or "")
    return string.format("%s%s PSN=%d MSN=%d Off=%d Len=%d", tags, OPCODES[opcode], psn,
        body(4, 4):uint(), offset, payload_len)
end

local function finish_sack(ctx)
    local body = ctx.body
    local psns = sacked_psns(body)
    add_sack_psns(ctx.items[f.bitmap], body, psns)
    if ctx.opcode == 0x04 and #psns > 0 then
        report(ctx, e.bad_field, "ACK with a non-zero bitmap")
    elseif body(30, 1):uint() > 127 then
        report(ctx, e.bad_field, "Window penalty " .. body(30, 1):uint() .. " > 127 (7 bits)")
    end
    local text = string.format("%s Cum=%d", OPCODES[ctx.opcode], body(0, 4):uint())
    if #psns > 0 then
        text = text .. " SACKed=" .. psn_ranges(psns)
    end
    return text .. " Win=" .. body(32, 4):uint()
end

local function finish_nack(ctx)
    local reason = ctx.body(4, 1):uint()
    local name = NACK_REASONS[reason]
    if name == nil then
        report(ctx, e.bad_field, "NACK reason " .. reason)
        name = "reason " .. reason
    elseif reason <= 2 then
        ctx.item:add_proto_expert_info(e.trimmed_nack, "Trimmed packet NACKed (" .. name .. ")")
    end
    return string.format("NACK PSN=%d %s", ctx.body(0, 4):uint(), name)
end

local function finish_probe(ctx)
    local text = string.format("%s Id=%d", OPCODES[ctx.opcode], ctx.body(0, 4):uint())
    if ctx.opcode == 0x08 then
        text = text .. " on EV " .. hex32(ctx.body(4, 4):uint())
    end
    return text
end

local function finish_setup(ctx)
    local body = ctx.body
    return string.format("%s ISN=%d Win=%d MTU=%d", OPCODES[ctx.opcode], body(0, 4):uint(),
        body(4, 4):uint(), body(8, 2):uint())
end

local function finish_close(ctx)
    return string.format("%s Final=%d", OPCODES[ctx.opcode], ctx.body(0, 4):uint())
end

local FINISH = {
    data = finish_data, sack = finish_sack, nack = finish_nack, probe = finish_probe,
    setup = finish_setup, close = finish_close,
}

local function add_common(tree, tvb, ev)
    tree:add(f.version, tvb(0, 1))
    tree:add(f.opcode, tvb(1, 1))
    local flags = add_flags(tree, tvb)
    tree:add(f.reserved, tvb(3, 1))
    tree:add(f.dst_conn, tvb(4, 4))
    tree:add(f.src_conn, tvb(8, 4))
    if ev ~= nil then
        local item = tree:add(f.ev, ev)
        item:set_generated()
        local parts = { { f.ev_plane, math.floor(ev / 16777216) % 128 },
            { f.ev_path, math.floor(ev / 65536) % 256 }, { f.ev_entropy, ev % 65536 } }
        for _, part in ipairs(parts) do
            item:add(part[1], part[2]):set_generated()
        end
    end
    return flags
end

-- The body: its fields if the capture holds them, then the kind's checks; nil Info text
-- when it is cut short.
local function dissect_body(ctx, layout)
    local need = COMMON + layout.size
    if ctx.size < need then
        report(ctx, e.truncated, string.format("%s body needs %d bytes, %d left",
            OPCODES[ctx.opcode], layout.size, ctx.size - COMMON))
        return nil
    end
    if ctx.captured < need then
        report(ctx, e.snapshot, string.format("Captured %d of %d bytes of MRC",
            ctx.captured, ctx.size))
        return nil
    end
    ctx.body = ctx.tvb(COMMON, layout.size)
    ctx.items = {}
    for _, spec in ipairs(layout) do
        ctx.items[spec[1]] = ctx.item:add(spec[1], ctx.body(spec[2], spec[3]))
    end
    if ctx.kind ~= "data" and ctx.size > need then
        report(ctx, e.bad_length, string.format("%s followed by %d bytes",
            OPCODES[ctx.opcode], ctx.size - need))
        if ctx.captured > need then
            ctx.item:add(f.trailing, ctx.tvb(need))
        end
    end
    return FINISH[ctx.kind](ctx)
end

-- The common header's checks, in the decoder's order; the opcode's kind unless the body
-- cannot be read (unknown bits in the flags leave it readable).
local function check_common(ctx)
    local version = ctx.tvb(0, 1):uint()
    if version ~= VERSION then
        report(ctx, e.bad_version, "MRC version " .. version .. ", expected 1")
        return nil
    end
    if KIND[ctx.opcode] == nil then
        report(ctx, e.unknown_opcode, string.format("Unknown opcode 0x%02x", ctx.opcode))
        return nil
    end
    if ctx.flags > KNOWN_FLAGS then
        report(ctx, e.bad_field, string.format("Unknown flag bits 0x%02x",
            ctx.flags - ctx.flags % 32))
    end
    return KIND[ctx.opcode]
end

local function info_text(ctx, info)
    if info == nil then
        return ctx.problem
    end
    if ctx.ev ~= nil then
        info = info .. " EV=" .. hex32(ctx.ev)
    end
    if ctx.problem ~= nil then
        info = "[" .. ctx.problem .. "] " .. info
    end
    return info
end

function mrc.dissector(tvb, pinfo, root)
    local ctx = { tvb = tvb, pinfo = pinfo, root = root, size = tvb:reported_len(),
        captured = tvb:len(), ev = packet_ev(pinfo) }
    pinfo.cols.protocol = "MRC"
    ctx.item = root:add(mrc, tvb())
    local info = nil
    if ctx.size < COMMON then
        report(ctx, e.truncated, "MRC common header needs 12 bytes, " .. ctx.size .. " left")
    elseif ctx.captured < COMMON then
        report(ctx, e.snapshot, string.format("Captured %d of %d bytes of MRC", ctx.captured,
            ctx.size))
    else
        ctx.opcode = tvb(1, 1):uint()
        ctx.flags = add_common(ctx.item, tvb, ctx.ev)
        ctx.kind = check_common(ctx)
        info = ctx.kind and dissect_body(ctx, LAYOUTS[ctx.kind])
    end
    info = info_text(ctx, info)
    pinfo.cols.info = info
    ctx.item:append_text(", " .. info)
    return ctx.size
end

-- Claim the UDP port, keeping whatever had it (RoCEv2 on 4791) to give it back when the
-- preference moves MRC elsewhere. DissectorTable:add replaces the existing entry.
local udp_table = DissectorTable.get("udp.port")
local claimed = { port = nil, previous = nil }

local function claim(port)
    if claimed.port ~= nil then
        udp_table:remove(claimed.port, mrc)
        if claimed.previous ~= nil then
            udp_table:add(claimed.port, claimed.previous)
        end
    end
    claimed.previous = udp_table:get_dissector(port)
    claimed.port = port
    udp_table:add(port, mrc)
end

function mrc.prefs_changed()
    if mrc.prefs.udp_port ~= claimed.port then
        claim(mrc.prefs.udp_port)
    end
end

claim(DEFAULT_PORT)
