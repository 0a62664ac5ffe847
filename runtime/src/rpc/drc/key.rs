//! What identifies a call to the reply cache: the client, the transaction and a digest of the
//! arguments.

use std::hash::{Hash, Hasher};
use std::net::{IpAddr, SocketAddr};

use crate::rpc::auth::Auth;

/// The bytes of the arguments the digest covers by default: the first 256, as Linux's nfsd
/// (`RC_CSUMLEN`).
pub const DEFAULT_CHECKSUM_LEN: usize = 256;

/// Who sent a call, as the cache tells clients apart.
///
/// The peer's IP address without the port: a client that reconnects to retransmit comes from
/// a new port (ours always, over either transport; Linux's NFS client keeps its port over TCP
/// precisely because nfsd's cache keys on it, which RPC-over-RDMA connections cannot do). Plus
/// a digest of the credential the call carries, so callers behind one address (a NAT, several
/// users of one machine) whose XIDs collide are still told apart; a retransmission carries
/// the same credential (the client sends the call it built once again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientId {
    addr: Option<IpAddr>,
    credential: u64,
}

impl ClientId {
    /// The client of a call from `peer` with credential `auth`.
    pub(crate) fn new(peer: Option<SocketAddr>, auth: &Auth) -> ClientId {
        ClientId {
            // An IPv4 client seen through a dual-stack socket is the same client.
            addr: peer.map(|p| p.ip().to_canonical()),
            credential: credential_digest(auth),
        }
    }
}

/// The arguments as the cache compares them: their length and a digest of their first bytes
/// (Linux's nfsd compares `k_len` and `k_csum` the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ArgsDigest {
    len: usize,
    sum: u64,
}

impl ArgsDigest {
    /// The digest of `args` (the call's bytes after its header, as the transport delivered
    /// them), over at most its first `checksum_len` bytes.
    pub(crate) fn new(args: &[u8], checksum_len: usize) -> ArgsDigest {
        let covered = &args[..args.len().min(checksum_len)];
        ArgsDigest {
            len: args.len(),
            sum: fnv1a(FNV_OFFSET, covered),
        }
    }
}

/// One call as the cache keys it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallKey {
    /// The caller.
    pub(crate) client: ClientId,
    /// The transaction id: a retransmission reuses it (RFC 5531 section 9: "the xid field is
    /// only used for clients matching reply messages with call messages or for servers
    /// detecting retransmissions").
    pub(crate) xid: u32,
    /// The program number.
    pub(crate) program: u32,
    /// The version number.
    pub(crate) version: u32,
    /// The procedure number.
    pub(crate) procedure: u32,
    /// The arguments.
    pub(crate) args: ArgsDigest,
}

/// The bytes [`CallKey`]'s hash covers: every field, once.
const KEY_BYTES: usize = 1 + 16 + 8 + 4 * 4 + 8 + 8;

impl Hash for CallKey {
    /// Every field in one write: the map's hasher (SipHash, keyed at random) costs per write,
    /// and the derived hash made ten of them per lookup (a third of a cached call's work).
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut bytes = [0u8; KEY_BYTES];
        let (tag, addr) = match self.client.addr {
            None => (0, [0; 16]),
            Some(IpAddr::V4(v4)) => (4, v4.to_ipv6_mapped().octets()),
            Some(IpAddr::V6(v6)) => (6, v6.octets()),
        };
        let fields: [&[u8]; 9] = [
            &[tag],
            &addr,
            &self.client.credential.to_ne_bytes(),
            &self.xid.to_ne_bytes(),
            &self.program.to_ne_bytes(),
            &self.version.to_ne_bytes(),
            &self.procedure.to_ne_bytes(),
            &(self.args.len as u64).to_ne_bytes(),
            &self.args.sum.to_ne_bytes(),
        ];
        let mut at = 0;
        for field in fields {
            bytes[at..at + field.len()].copy_from_slice(field);
            at += field.len();
        }
        state.write(&bytes);
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a: a digest that is the same in every process (the cache's map hashes keys with
/// random keys of its own, so a peer cannot aim at one bucket).
fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

fn credential_digest(auth: &Auth) -> u64 {
    let hash = fnv1a(FNV_OFFSET, &(auth.flavor() as i32).to_be_bytes());
    let Some(sys) = auth.sys() else {
        return hash;
    };
    let mut hash = fnv1a(hash, &sys.stamp.to_be_bytes());
    // The name's length first, so that the fields after it cannot shift into it.
    hash = fnv1a(hash, &(sys.machine_name.len() as u32).to_be_bytes());
    hash = fnv1a(hash, sys.machine_name.as_bytes());
    hash = fnv1a(hash, &sys.uid.to_be_bytes());
    hash = fnv1a(hash, &sys.gid.to_be_bytes());
    for gid in &sys.gids {
        hash = fnv1a(hash, &gid.to_be_bytes());
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::auth::AuthSys;

    fn peer(s: &str) -> Option<SocketAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn a_client_is_its_address_without_the_port() {
        let auth = Auth::None;
        assert_eq!(
            ClientId::new(peer("10.0.0.1:700"), &auth),
            ClientId::new(peer("10.0.0.1:41000"), &auth)
        );
        assert_ne!(
            ClientId::new(peer("10.0.0.1:700"), &auth),
            ClientId::new(peer("10.0.0.2:700"), &auth)
        );
        // The same IPv4 client seen through a dual-stack listener.
        assert_eq!(
            ClientId::new(peer("10.0.0.1:700"), &auth),
            ClientId::new(peer("[::ffff:10.0.0.1]:900"), &auth)
        );
    }

    #[test]
    fn a_client_is_also_its_credential() {
        let addr = peer("10.0.0.1:700");
        let alice = Auth::Sys(AuthSys::new("host", 1000, 100));
        let bob = Auth::Sys(AuthSys::new("host", 1001, 100));
        assert_eq!(ClientId::new(addr, &alice), ClientId::new(addr, &alice));
        assert_ne!(ClientId::new(addr, &alice), ClientId::new(addr, &bob));
        assert_ne!(
            ClientId::new(addr, &alice),
            ClientId::new(addr, &Auth::None)
        );
    }

    #[test]
    fn the_digest_covers_the_length_and_the_first_bytes() {
        let a = [1u8; 300];
        let mut b = a;
        b[10] = 2;
        assert_ne!(ArgsDigest::new(&a, 256), ArgsDigest::new(&b, 256));
        // A difference past the covered bytes is not seen; a different length is.
        let mut c = a;
        c[299] = 2;
        assert_eq!(ArgsDigest::new(&a, 256), ArgsDigest::new(&c, 256));
        assert_ne!(ArgsDigest::new(&a, 256), ArgsDigest::new(&a[..299], 256));
        assert_ne!(ArgsDigest::new(&a, 300), ArgsDigest::new(&c, 300));
    }

    #[test]
    fn equal_keys_hash_alike_and_every_field_counts() {
        fn hash(key: &CallKey) -> u64 {
            let mut h = std::hash::DefaultHasher::new();
            key.hash(&mut h);
            h.finish()
        }
        let base = CallKey {
            client: ClientId::new(peer("10.0.0.1:700"), &Auth::None),
            xid: 1,
            program: 2,
            version: 3,
            procedure: 4,
            args: ArgsDigest::new(b"args", 256),
        };
        let mut moved = base;
        moved.client = ClientId::new(peer("10.0.0.1:9"), &Auth::None);
        assert_eq!((moved, hash(&moved)), (base, hash(&base)));
        let variants = [
            CallKey {
                client: ClientId::new(peer("[::1]:700"), &Auth::None),
                ..base
            },
            CallKey {
                client: ClientId::new(None, &Auth::None),
                ..base
            },
            CallKey { xid: 9, ..base },
            CallKey { program: 9, ..base },
            CallKey { version: 9, ..base },
            CallKey {
                procedure: 9,
                ..base
            },
            CallKey {
                args: ArgsDigest::new(b"argz", 256),
                ..base
            },
        ];
        for other in variants {
            assert_ne!(other, base);
            assert_ne!(hash(&other), hash(&base), "{other:?}");
        }
    }
}
