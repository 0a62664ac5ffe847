//! Capture files of the provider's traffic for Wireshark and tshark, without capture rights:
//! [`PcapTap`] is a [`WireTap`] that keeps what every connection sends and receives and
//! writes it as a classic pcap file, each connection a TCP conversation (handshake, one MPA
//! startup frame or FPDU per segment, FINs) with synthesized IPv4/TCP headers;
//! [`PcapWriter`] writes such packets (TCP, and UDP for hand-made RoCEv2 frames).
//!
//! Tap one end of each connection: the other end's view is the same bytes.

use std::net::{SocketAddr, SocketAddrV4};
use std::path::Path;
use std::sync::Mutex;

use super::tap::{Direction, WireTap};
use super::wire::mpa::{FpduReader, Framing, REQ_KEY, STARTUP_HEADER_LEN};

/// Link type of the file: raw IPv4 packets (LINKTYPE_RAW).
const LINKTYPE_RAW: u32 = 101;
/// The first packet's time (seconds since 1970); each packet is one millisecond later.
const EPOCH: u32 = 1_700_000_000;
/// The largest TCP payload in one IPv4 packet (65535 minus the IPv4 and TCP headers).
const MAX_TCP_PAYLOAD: usize = 65535 - 40;
/// The largest UDP payload in one IPv4 packet.
const MAX_UDP_PAYLOAD: usize = 65535 - 28;

/// Writes a classic pcap file of IPv4 packets.
#[derive(Debug, Clone)]
pub struct PcapWriter {
    buf: Vec<u8>,
    packets: u32,
}

impl Default for PcapWriter {
    fn default() -> Self {
        PcapWriter::new()
    }
}

/// The Internet checksum (RFC 1071) of `data`, continuing from `sum`.
fn checksum(data: &[u8], mut sum: u32) -> u16 {
    for pair in data.chunks(2) {
        let word = match pair {
            [a, b] => u16::from_be_bytes([*a, *b]),
            [a] => u16::from_be_bytes([*a, 0]),
            _ => 0,
        };
        sum += u32::from(word);
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The sum of the IPv4 pseudo-header of a TCP or UDP checksum.
fn pseudo_sum(src: &SocketAddrV4, dst: &SocketAddrV4, protocol: u8, len: usize) -> u32 {
    let mut pseudo = Vec::with_capacity(12);
    pseudo.extend_from_slice(&src.ip().octets());
    pseudo.extend_from_slice(&dst.ip().octets());
    pseudo.extend_from_slice(&[0, protocol]);
    pseudo.extend_from_slice(&(len as u16).to_be_bytes());
    pseudo
        .chunks(2)
        .map(|p| u32::from(u16::from_be_bytes([p[0], p[1]])))
        .sum()
}

impl PcapWriter {
    /// TCP flag SYN.
    pub const SYN: u8 = 0x02;
    /// TCP flag ACK.
    pub const ACK: u8 = 0x10;
    /// TCP flag PSH.
    pub const PSH: u8 = 0x08;
    /// TCP flag FIN.
    pub const FIN: u8 = 0x01;

    /// An empty file (its global header only).
    pub fn new() -> PcapWriter {
        let mut buf = Vec::new();
        buf.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        buf.extend_from_slice(&2u16.to_le_bytes());
        buf.extend_from_slice(&4u16.to_le_bytes());
        buf.extend_from_slice(&0i32.to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
        buf.extend_from_slice(&65535u32.to_le_bytes());
        buf.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
        PcapWriter { buf, packets: 0 }
    }

    /// Appends one IPv4 packet carrying `protocol` with `l4` (header and payload).
    fn ipv4(&mut self, src: &SocketAddrV4, dst: &SocketAddrV4, protocol: u8, l4: &[u8]) {
        let total = 20 + l4.len();
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&(total as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 0, 0x40, 0, 64, protocol, 0, 0]);
        ip.extend_from_slice(&src.ip().octets());
        ip.extend_from_slice(&dst.ip().octets());
        let c = checksum(&ip, 0);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        ip.extend_from_slice(l4);
        let (secs, millis) = (self.packets / 1000, self.packets % 1000);
        self.packets += 1;
        self.buf.extend_from_slice(&(EPOCH + secs).to_le_bytes());
        self.buf.extend_from_slice(&(millis * 1000).to_le_bytes());
        self.buf.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&ip);
    }

    /// Appends a TCP segment. The payload must fit one IPv4 packet (65495 bytes).
    pub fn tcp(
        &mut self,
        src: SocketAddrV4,
        dst: SocketAddrV4,
        seq: u32,
        ack: u32,
        flags: u8,
        payload: &[u8],
    ) {
        assert!(
            payload.len() <= MAX_TCP_PAYLOAD,
            "a TCP payload of {} bytes does not fit one IPv4 packet",
            payload.len()
        );
        let mut tcp = Vec::with_capacity(20 + payload.len());
        tcp.extend_from_slice(&src.port().to_be_bytes());
        tcp.extend_from_slice(&dst.port().to_be_bytes());
        tcp.extend_from_slice(&seq.to_be_bytes());
        tcp.extend_from_slice(&ack.to_be_bytes());
        tcp.push(5 << 4);
        tcp.push(flags);
        tcp.extend_from_slice(&65535u16.to_be_bytes());
        tcp.extend_from_slice(&[0, 0, 0, 0]);
        tcp.extend_from_slice(payload);
        let c = checksum(&tcp, pseudo_sum(&src, &dst, 6, tcp.len()));
        tcp[16..18].copy_from_slice(&c.to_be_bytes());
        self.ipv4(&src, &dst, 6, &tcp);
    }

    /// Appends a UDP datagram (RoCEv2 goes to port 4791). The payload must fit one IPv4
    /// packet (65507 bytes).
    pub fn udp(&mut self, src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) {
        assert!(
            payload.len() <= MAX_UDP_PAYLOAD,
            "a UDP payload of {} bytes does not fit one IPv4 packet",
            payload.len()
        );
        let mut udp = Vec::with_capacity(8 + payload.len());
        udp.extend_from_slice(&src.port().to_be_bytes());
        udp.extend_from_slice(&dst.port().to_be_bytes());
        udp.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        udp.extend_from_slice(&[0, 0]);
        udp.extend_from_slice(payload);
        let c = match checksum(&udp, pseudo_sum(&src, &dst, 17, udp.len())) {
            0 => 0xffff,
            c => c,
        };
        udp[6..8].copy_from_slice(&c.to_be_bytes());
        self.ipv4(&src, &dst, 17, &udp);
    }

    /// How many packets were written.
    pub fn packets(&self) -> u32 {
        self.packets
    }

    /// The file's bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// What the tap saw: one call of [`WireTap::record`].
#[derive(Debug)]
struct Event {
    local: SocketAddr,
    peer: SocketAddr,
    direction: Direction,
    bytes: Vec<u8>,
}

/// A [`WireTap`] that keeps everything, to be written as a pcap file ([`PcapTap::pcap`]).
/// Segments appear in the order the tap saw their last byte, so a reply follows its call.
#[derive(Debug, Default)]
pub struct PcapTap {
    events: Mutex<Vec<Event>>,
}

impl WireTap for PcapTap {
    fn record(&self, local: SocketAddr, peer: SocketAddr, direction: Direction, bytes: &[u8]) {
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        events.push(Event {
            local,
            peer,
            direction,
            bytes: bytes.to_vec(),
        });
    }
}

/// One direction of a connection, cut into startup frame and FPDUs as its bytes come in.
#[derive(Default)]
struct Stream {
    bytes: Vec<u8>,
    /// Bytes already written as segments.
    done: usize,
    /// The startup frame (Request or Reply) with its private data.
    startup: Option<(bool, bool, bool, u8)>,
    /// After the startup frames: the FPDU reader, or `None` when the stream stopped parsing.
    reader: Option<FpduReader>,
    /// The stream did not parse: the rest is written as it came.
    raw: bool,
    seq: u32,
}

impl Stream {
    /// Parses the startup frame once it is complete: (is a Request, M, C, revision).
    fn take_startup(&mut self) -> Option<&[u8]> {
        if self.startup.is_some() || self.raw || self.bytes.len() < STARTUP_HEADER_LEN {
            return None;
        }
        let b = &self.bytes;
        let pd = u16::from_be_bytes([b[18], b[19]]) as usize;
        let end = STARTUP_HEADER_LEN + pd;
        if b.len() < end {
            return None;
        }
        let flags = b[16];
        self.startup = Some((
            &b[..16] == REQ_KEY,
            flags & 0x80 != 0,
            flags & 0x40 != 0,
            b[17],
        ));
        self.done = end;
        Some(&self.bytes[..end])
    }

    /// The next complete FPDU (or, for a stream that does not parse, everything left).
    fn take_fpdu(&mut self) -> Option<std::ops::Range<usize>> {
        let rest = &self.bytes[self.done..];
        if rest.is_empty() {
            return None;
        }
        if self.raw {
            let r = self.done..self.bytes.len();
            self.done = self.bytes.len();
            return Some(r);
        }
        let reader = self.reader.as_mut()?;
        match reader.next(rest) {
            Ok(Some(f)) => {
                let r = self.done..self.done + f.consumed;
                self.done += f.consumed;
                Some(r)
            }
            Ok(None) => None,
            Err(_) => {
                self.raw = true;
                self.take_fpdu()
            }
        }
    }
}

/// One connection: its two directions, seen from the tapped end.
struct Conn {
    local: SocketAddrV4,
    peer: SocketAddrV4,
    sent: Stream,
    received: Stream,
    /// Whether the TCP handshake was written (at the first segment).
    opened: bool,
}

impl Conn {
    fn stream(&mut self, d: Direction) -> &mut Stream {
        match d {
            Direction::Sent => &mut self.sent,
            Direction::Received => &mut self.received,
        }
    }

    /// The framing of both directions once both startup frames are in (RFC 5044 section
    /// 7.1): a side's M bit asks for markers in what it receives; CRCs are used when either
    /// side asks; revision 0 (RDMAC) has both everywhere.
    fn start_fpdus(&mut self) {
        let (Some(s), Some(r)) = (self.sent.startup, self.received.startup) else {
            return;
        };
        if self.sent.reader.is_some() || self.sent.raw {
            return;
        }
        let rdmac = s.3 == 0 || r.3 == 0;
        let crc = rdmac || s.2 || r.2;
        // What we send carries markers when the peer asked for them (its frame's M bit).
        let sent = Framing {
            markers: rdmac || r.1,
            crc,
        };
        let received = Framing {
            markers: rdmac || s.1,
            crc,
        };
        self.sent.reader = Some(FpduReader::new(sent, 65535));
        self.received.reader = Some(FpduReader::new(received, 65535));
    }

    /// (source, destination) of a direction's segments.
    fn ends(&self, d: Direction) -> (SocketAddrV4, SocketAddrV4) {
        match d {
            Direction::Sent => (self.local, self.peer),
            Direction::Received => (self.peer, self.local),
        }
    }

    /// Writes the handshake; the initiator is the end whose first frame is a Request.
    fn open(&mut self, out: &mut PcapWriter) {
        self.opened = true;
        let local_initiates = self
            .sent
            .startup
            .map(|s| s.0)
            .or(self.received.startup.map(|r| !r.0))
            .unwrap_or(true);
        let (client, server, cd, sd) = if local_initiates {
            (self.local, self.peer, Direction::Sent, Direction::Received)
        } else {
            (self.peer, self.local, Direction::Received, Direction::Sent)
        };
        let cseq = self.stream(cd).seq;
        let sseq = self.stream(sd).seq;
        out.tcp(
            client,
            server,
            cseq.wrapping_sub(1),
            0,
            PcapWriter::SYN,
            &[],
        );
        out.tcp(
            server,
            client,
            sseq.wrapping_sub(1),
            cseq,
            PcapWriter::SYN | PcapWriter::ACK,
            &[],
        );
        out.tcp(client, server, cseq, sseq, PcapWriter::ACK, &[]);
    }

    /// Writes `range` of direction `d` as segments.
    fn segment(&mut self, out: &mut PcapWriter, d: Direction, range: std::ops::Range<usize>) {
        if !self.opened {
            self.open(out);
        }
        let (src, dst) = self.ends(d);
        let other = match d {
            Direction::Sent => self.received.seq,
            Direction::Received => self.sent.seq,
        };
        let s = self.stream(d);
        let bytes = s.bytes[range].to_vec();
        for piece in bytes.chunks(MAX_TCP_PAYLOAD) {
            let seq = s.seq;
            s.seq = s.seq.wrapping_add(piece.len() as u32);
            out.tcp(
                src,
                dst,
                seq,
                other,
                PcapWriter::PSH | PcapWriter::ACK,
                piece,
            );
        }
    }

    /// Everything complete in direction `d`, as segments.
    fn flush(&mut self, out: &mut PcapWriter, d: Direction) {
        if let Some(end) = self.stream(d).take_startup().map(<[u8]>::len) {
            self.segment(out, d, 0..end);
            self.start_fpdus();
            // The other direction may have been waiting for this frame.
            let other = match d {
                Direction::Sent => Direction::Received,
                Direction::Received => Direction::Sent,
            };
            self.flush_fpdus(out, other);
        }
        self.flush_fpdus(out, d);
    }

    fn flush_fpdus(&mut self, out: &mut PcapWriter, d: Direction) {
        while let Some(r) = self.stream(d).take_fpdu() {
            self.segment(out, d, r);
        }
    }

    /// The FINs.
    fn close(&mut self, out: &mut PcapWriter) {
        if !self.opened {
            return;
        }
        let (a, b) = (self.local, self.peer);
        let (sseq, rseq) = (self.sent.seq, self.received.seq);
        out.tcp(a, b, sseq, rseq, PcapWriter::FIN | PcapWriter::ACK, &[]);
        out.tcp(
            b,
            a,
            rseq,
            sseq.wrapping_add(1),
            PcapWriter::FIN | PcapWriter::ACK,
            &[],
        );
        out.tcp(
            a,
            b,
            sseq.wrapping_add(1),
            rseq.wrapping_add(1),
            PcapWriter::ACK,
            &[],
        );
    }
}

fn v4(a: SocketAddr) -> Option<SocketAddrV4> {
    match a {
        SocketAddr::V4(a) => Some(a),
        SocketAddr::V6(_) => None,
    }
}

impl PcapTap {
    /// An empty tap.
    pub fn new() -> PcapTap {
        PcapTap::default()
    }

    /// Forgets everything seen so far.
    pub fn clear(&self) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Everything seen so far as a pcap file: each connection (IPv4 only) a TCP
    /// conversation whose segments are its MPA startup frames and FPDUs, one per segment
    /// (Wireshark's MPA dissector expects an FPDU at the start of a segment). A direction
    /// whose bytes stop parsing as FPDUs is written from there as it came.
    pub fn pcap(&self) -> Vec<u8> {
        let events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = PcapWriter::new();
        let mut conns: Vec<Conn> = Vec::new();
        for (n, ev) in events.iter().enumerate() {
            let (Some(local), Some(peer)) = (v4(ev.local), v4(ev.peer)) else {
                continue;
            };
            // The same connection seen from its other end is skipped (tap one end).
            if conns.iter().any(|c| c.local == peer && c.peer == local) {
                continue;
            }
            let i = match conns
                .iter()
                .position(|c| c.local == local && c.peer == peer)
            {
                Some(i) => i,
                None => {
                    // Initial sequence numbers apart per connection, for readability.
                    let base = 1000 + 100_000 * n as u32;
                    conns.push(Conn {
                        local,
                        peer,
                        sent: Stream {
                            seq: base + 1,
                            ..Stream::default()
                        },
                        received: Stream {
                            seq: base + 50_001,
                            ..Stream::default()
                        },
                        opened: false,
                    });
                    conns.len() - 1
                }
            };
            let conn = &mut conns[i];
            conn.stream(ev.direction).bytes.extend_from_slice(&ev.bytes);
            conn.flush(&mut out, ev.direction);
        }
        for c in &mut conns {
            for d in [Direction::Sent, Direction::Received] {
                // What never completed (a connection cut mid-frame) goes out as it is.
                let s = c.stream(d);
                if s.done < s.bytes.len() {
                    let r = s.done..s.bytes.len();
                    s.done = s.bytes.len();
                    c.segment(&mut out, d, r);
                }
            }
            c.close(&mut out);
        }
        out.into_bytes()
    }

    /// [`PcapTap::pcap`] written to `path`.
    pub fn write(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        std::fs::write(path, self.pcap())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn checksums_verify_to_zero() {
        let mut w = PcapWriter::new();
        let a: SocketAddrV4 = "10.0.0.1:1000".parse().unwrap();
        let b: SocketAddrV4 = "10.0.0.2:4791".parse().unwrap();
        w.udp(a, b, b"odd");
        let bytes = w.into_bytes();
        let ip = &bytes[24 + 16..];
        assert_eq!(checksum(&ip[..20], 0), 0, "IPv4 header checksum");
        let udp = &ip[20..];
        assert_eq!(checksum(udp, pseudo_sum(&a, &b, 17, udp.len())), 0);
    }

    #[test]
    fn a_connection_becomes_handshake_frames_and_fins() {
        let tap = PcapTap::new();
        let (l, p) = (addr("127.0.0.1:5000"), addr("127.0.0.1:6000"));
        let mut req = REQ_KEY.to_vec();
        req.extend_from_slice(&[0x40, 1, 0, 0]); // C, revision 1, no private data
        let mut rep = b"MPA ID Rep Frame".to_vec();
        rep.extend_from_slice(&[0x40, 1, 0, 0]);
        // Startup frames split across records, in any interleaving.
        tap.record(l, p, Direction::Sent, &req[..10]);
        tap.record(l, p, Direction::Sent, &req[10..]);
        tap.record(l, p, Direction::Received, &rep);
        // The same connection from the other end is ignored.
        tap.record(p, l, Direction::Sent, &rep);
        let pcap = tap.pcap();
        // 3 handshake packets, 2 startup frames, 3 closing packets.
        let mut n = 0;
        let mut at = 24;
        while at < pcap.len() {
            let len = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
            at += 16 + len;
            n += 1;
        }
        assert_eq!(n, 8);
    }
}
