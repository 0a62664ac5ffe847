//! Access rights of a memory registration (verbs `IBV_ACCESS_*`, RDMAP RFC 5040 section 6.4).

use std::fmt;
use std::ops::{BitOr, BitOrAssign};

/// What a memory registration allows: a small set of flags, combined with `|`.
///
/// Local read access is always granted (a posted Send or RDMA Write may read its own
/// registration); the flags here are the rights that must be asked for.
///
/// ```
/// use rpcrdma::rdma::Access;
/// let a = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
/// assert!(a.contains(Access::REMOTE_WRITE));
/// assert!(!a.contains(Access::REMOTE_READ));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// No rights beyond local read.
    pub const NONE: Access = Access(0);
    /// The local adapter may write into the registration (receive buffers, RDMA Read sinks).
    pub const LOCAL_WRITE: Access = Access(1);
    /// A remote peer may read the registration with RDMA Read (its STag is advertised).
    pub const REMOTE_READ: Access = Access(2);
    /// A remote peer may write the registration with RDMA Write (its STag is advertised).
    pub const REMOTE_WRITE: Access = Access(4);

    /// The raw flag bits (bit 0 local write, bit 1 remote read, bit 2 remote write).
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Flags from raw bits; unknown bits are dropped.
    pub const fn from_bits_truncate(bits: u8) -> Access {
        Access(bits & 7)
    }

    /// True when every right in `other` is also in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// True when the registration may be targeted by a remote peer at all.
    pub const fn is_remote(self) -> bool {
        self.0 & (Access::REMOTE_READ.0 | Access::REMOTE_WRITE.0) != 0
    }
}

impl BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

impl BitOrAssign for Access {
    fn bitor_assign(&mut self, rhs: Access) {
        self.0 |= rhs.0;
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names = Vec::new();
        if self.contains(Access::LOCAL_WRITE) {
            names.push("LOCAL_WRITE");
        }
        if self.contains(Access::REMOTE_READ) {
            names.push("REMOTE_READ");
        }
        if self.contains(Access::REMOTE_WRITE) {
            names.push("REMOTE_WRITE");
        }
        if names.is_empty() {
            f.write_str("Access(NONE)")
        } else {
            write!(f, "Access({})", names.join(" | "))
        }
    }
}
