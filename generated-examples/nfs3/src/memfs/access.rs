//! ACCESS (RFC 1813 section 3.3.4): which of the asked permissions a caller has on a node,
//! by the Unix owner / group / other bits, with uid 0 allowed everything but executing a file
//! no one may execute. Every node but a directory (files, links, devices, sockets, FIFOs) is
//! judged by the same file bits.

use crate::nfs3::{
    ACCESS3_DELETE, ACCESS3_EXECUTE, ACCESS3_EXTEND, ACCESS3_LOOKUP, ACCESS3_MODIFY, ACCESS3_READ,
};

use super::tree::{Kind, Node};

/// The caller as AUTH_SYS names it (AUTH_NONE callers are `nobody`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
    /// Further groups.
    pub gids: Vec<u32>,
}

/// The uid and gid of `nobody`, for callers without credentials.
pub const NOBODY: u32 = 65534;

impl Caller {
    /// A caller without credentials.
    pub fn nobody() -> Caller {
        Caller {
            uid: NOBODY,
            gid: NOBODY,
            gids: Vec::new(),
        }
    }

    /// Whether `gid` is the caller's group or one of its further groups.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.gids.contains(&gid)
    }
}

const READ_BIT: u32 = 4;
const WRITE_BIT: u32 = 2;
const EXEC_BIT: u32 = 1;

/// The bits of `asked` that `caller` has on `node`.
pub fn allowed(node: &Node, caller: &Caller, asked: u32) -> u32 {
    let mode = node.meta.mode;
    let is_dir = matches!(node.kind, Kind::Dir(_));
    let rwx = if caller.uid == 0 {
        // Root may read and write anything; it executes a file only if someone may.
        let any_exec = mode & 0o111 != 0;
        READ_BIT | WRITE_BIT | if any_exec || is_dir { EXEC_BIT } else { 0 }
    } else if caller.uid == node.meta.uid {
        (mode >> 6) & 7
    } else if caller.in_group(node.meta.gid) {
        (mode >> 3) & 7
    } else {
        mode & 7
    };
    let mut granted = 0;
    if rwx & READ_BIT != 0 {
        granted |= ACCESS3_READ;
    }
    if rwx & WRITE_BIT != 0 {
        granted |= ACCESS3_MODIFY | ACCESS3_EXTEND;
        if is_dir {
            granted |= ACCESS3_DELETE;
        }
    }
    if rwx & EXEC_BIT != 0 {
        // Section 3.3.4: LOOKUP is a directory's search, EXECUTE a file's.
        granted |= if is_dir {
            ACCESS3_LOOKUP
        } else {
            ACCESS3_EXECUTE
        };
    }
    granted & asked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memfs::tree::{FileData, Meta, Special};
    use crate::nfs3::Nfstime3;

    const ALL: u32 = 0x3f;

    fn file(mode: u32) -> Node {
        crate::memfs::tree::test_node(
            Kind::File {
                data: FileData::new(),
                create_verf: None,
            },
            Meta::new(
                mode,
                1000,
                100,
                Nfstime3 {
                    seconds: 0,
                    nseconds: 0,
                },
            ),
        )
    }

    fn user(uid: u32, gid: u32) -> Caller {
        Caller {
            uid,
            gid,
            gids: vec![],
        }
    }

    #[test]
    fn owner_group_and_other_bits_decide() {
        let f = file(0o640);
        assert_eq!(
            allowed(&f, &user(1000, 1), ALL),
            ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND
        );
        assert_eq!(allowed(&f, &user(2000, 100), ALL), ACCESS3_READ);
        assert_eq!(allowed(&f, &user(2000, 1), ALL), 0);
        assert_eq!(allowed(&f, &user(2000, 1), ACCESS3_READ), 0);
    }

    #[test]
    fn special_files_follow_the_file_bits() {
        let fifo = crate::memfs::tree::test_node(
            Kind::Special(Special::Fifo),
            Meta::new(
                0o620,
                1000,
                100,
                Nfstime3 {
                    seconds: 0,
                    nseconds: 0,
                },
            ),
        );
        assert_eq!(
            allowed(&fifo, &user(1000, 1), ALL),
            ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND
        );
        assert_eq!(
            allowed(&fifo, &user(2000, 100), ALL),
            ACCESS3_MODIFY | ACCESS3_EXTEND
        );
        assert_eq!(allowed(&fifo, &user(2000, 1), ALL), 0);
    }

    #[test]
    fn root_reads_and_writes_but_executes_only_executables() {
        assert_eq!(allowed(&file(0), &user(0, 0), ACCESS3_EXECUTE), 0);
        assert_eq!(
            allowed(&file(0o100), &user(0, 0), ALL),
            ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_EXECUTE
        );
    }
}
