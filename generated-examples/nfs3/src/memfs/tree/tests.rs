//! The node table's operations, one rule at a time, and random sequences of them.

use super::*;

const T: Nfstime3 = Nfstime3 {
    seconds: 1,
    nseconds: 0,
};

fn tree(bytes: u64, files: u64) -> Tree {
    Tree::new(Bounds { bytes, files }, Meta::new(0o755, 0, 0, T))
}

fn file() -> Kind {
    Kind::File {
        data: FileData::new(),
        create_verf: None,
    }
}

fn meta() -> Meta {
    Meta::new(0o644, 0, 0, T)
}

#[test]
fn lookup_finds_dot_dotdot_and_entries() {
    let mut t = tree(100, 10);
    let d = t
        .create(ROOT, b"d", Kind::Dir(Dir::default()), meta(), T)
        .unwrap();
    let f = t.create(d, b"f", file(), meta(), T).unwrap();
    assert_eq!(t.lookup(d, b"."), Ok(d));
    assert_eq!(t.lookup(d, b".."), Ok(ROOT));
    assert_eq!(t.lookup(ROOT, b".."), Ok(ROOT));
    assert_eq!(t.lookup(d, b"f"), Ok(f));
    assert_eq!(t.lookup(d, b"g"), Err(Nfsstat3::Nfs3errNoent));
    assert_eq!(t.lookup(f, b"x"), Err(Nfsstat3::Nfs3errNotdir));
    assert_eq!(t.get(ROOT).unwrap().nlink(), 3);
}

#[test]
fn rejects_bad_names() {
    let mut t = tree(100, 10);
    for (name, status) in [
        (&b""[..], Nfsstat3::Nfs3errInval),
        (b".", Nfsstat3::Nfs3errExist),
        (b"..", Nfsstat3::Nfs3errExist),
        (b"a/b", Nfsstat3::Nfs3errInval),
        (&[b'x'; 256][..], Nfsstat3::Nfs3errNametoolong),
    ] {
        assert_eq!(t.create(ROOT, name, file(), meta(), T), Err(status));
    }
    t.create(ROOT, b"a", file(), meta(), T).unwrap();
    assert_eq!(
        t.create(ROOT, b"a", file(), meta(), T),
        Err(Nfsstat3::Nfs3errExist)
    );
}

#[test]
fn bounds_give_nospc() {
    let mut t = tree(10, 3);
    let f = t.create(ROOT, b"f", file(), meta(), T).unwrap();
    t.write(f, 0, &[1; 10], T).unwrap();
    assert_eq!(t.write(f, 10, &[1], T), Err(Nfsstat3::Nfs3errNospc));
    // Growing by the size stores nothing: it fits whatever the bound.
    t.set_len(f, 1 << 40, T).unwrap();
    assert_eq!(t.used_bytes(), 10);
    t.set_len(f, 0, T).unwrap();
    assert_eq!(t.used_bytes(), 0);
    t.create(ROOT, b"g", file(), meta(), T).unwrap();
    assert_eq!(
        t.create(ROOT, b"h", file(), meta(), T),
        Err(Nfsstat3::Nfs3errNospc)
    );
    assert_eq!(t.write(f, u64::MAX, &[1], T), Err(Nfsstat3::Nfs3errFbig));
}

#[test]
fn unlink_checks_kinds_and_frees_bytes() {
    let mut t = tree(100, 10);
    let d = t
        .create(ROOT, b"d", Kind::Dir(Dir::default()), meta(), T)
        .unwrap();
    let f = t.create(d, b"f", file(), meta(), T).unwrap();
    t.write(f, 0, b"hello", T).unwrap();
    assert_eq!(
        t.unlink(ROOT, b"d", true, T),
        Err(Nfsstat3::Nfs3errNotempty)
    );
    assert_eq!(t.unlink(ROOT, b"d", false, T), Err(Nfsstat3::Nfs3errIsdir));
    assert_eq!(t.unlink(d, b"f", true, T), Err(Nfsstat3::Nfs3errNotdir));
    t.link(f, ROOT, b"g", T).unwrap();
    assert_eq!(t.get(f).unwrap().nlink(), 2);
    t.unlink(d, b"f", false, T).unwrap();
    assert_eq!(t.used_bytes(), 5, "one name is left");
    t.unlink(ROOT, b"g", false, T).unwrap();
    assert_eq!(t.used_bytes(), 0);
    assert_eq!(t.get(f).err(), Some(Nfsstat3::Nfs3errStale));
    t.unlink(ROOT, b"d", true, T).unwrap();
    assert_eq!(t.get(ROOT).unwrap().nlink(), 2);
}

#[test]
fn rename_moves_replaces_and_refuses_cycles() {
    let mut t = tree(100, 10);
    let a = t
        .create(ROOT, b"a", Kind::Dir(Dir::default()), meta(), T)
        .unwrap();
    let b = t
        .create(a, b"b", Kind::Dir(Dir::default()), meta(), T)
        .unwrap();
    assert_eq!(
        t.rename(ROOT, b"a", b, b"a", T),
        Err(Nfsstat3::Nfs3errInval)
    );
    let f = t.create(ROOT, b"f", file(), meta(), T).unwrap();
    let g = t.create(ROOT, b"g", file(), meta(), T).unwrap();
    assert_eq!(
        t.rename(ROOT, b"f", a, b"b", T),
        Err(Nfsstat3::Nfs3errIsdir)
    );
    t.rename(ROOT, b"f", ROOT, b"g", T).unwrap();
    assert_eq!(t.lookup(ROOT, b"g"), Ok(f));
    assert_eq!(t.get(g).err(), Some(Nfsstat3::Nfs3errStale));
    t.rename(a, b"b", ROOT, b"b", T).unwrap();
    assert_eq!(t.lookup(b, b".."), Ok(ROOT));
    assert_eq!(t.get(a).unwrap().nlink(), 2);
    assert_eq!(t.get(ROOT).unwrap().nlink(), 4);
}

#[test]
fn cookies_stay_stable_across_removals() {
    let mut t = tree(100, 10);
    for name in [b"a", b"b", b"c"] {
        t.create(ROOT, name, file(), meta(), T).unwrap();
    }
    let before: Vec<u64> = t
        .get(ROOT)
        .unwrap()
        .dir()
        .unwrap()
        .after(0)
        .map(|(c, _)| c)
        .collect();
    t.unlink(ROOT, b"b", false, T).unwrap();
    let dir = t.get(ROOT).unwrap().dir().unwrap();
    let after: Vec<(u64, &[u8])> = dir
        .after(before[0])
        .map(|(c, e)| (c, &e.name[..]))
        .collect();
    assert_eq!(after, vec![(before[2], &b"c"[..])]);
}

/// The whole contents of file `f`.
fn contents(t: &Tree, f: Fileid3) -> Vec<u8> {
    let data = t.get(f).unwrap().kind.data().unwrap();
    let mut out = vec![0xee; data.len() as usize];
    assert_eq!(data.read(0, &mut out), out.len());
    out
}

#[test]
fn a_sparse_write_at_4_gib_counts_only_what_it_stores() {
    let mut t = tree(100, 10);
    let f = t.create(ROOT, b"f", file(), meta(), T).unwrap();
    let offset = 4 << 30;
    t.write(f, offset, b"data", T).unwrap();
    let node = t.get(f).unwrap();
    assert_eq!((node.size(), node.kind.stored()), (offset + 4, 4));
    assert_eq!(t.used_bytes(), 4);
    let mut out = [0xee; 8];
    assert_eq!(node.kind.data().unwrap().read(offset - 4, &mut out), 8);
    assert_eq!(&out, b"\0\0\0\0data");
    // Past the largest file size: FBIG, nothing stored.
    assert_eq!(
        t.write(f, MAX_FILE_SIZE, b"x", T),
        Err(Nfsstat3::Nfs3errFbig)
    );
    assert_eq!(
        t.set_len(f, MAX_FILE_SIZE + 1, T),
        Err(Nfsstat3::Nfs3errFbig)
    );
    t.unlink(ROOT, b"f", false, T).unwrap();
    assert_eq!(t.used_bytes(), 0);
    assert_eq!(t.check(), Ok(()));
}

#[test]
fn nospc_leaves_the_file_as_it_was() {
    let mut t = tree(10, 10);
    let f = t.create(ROOT, b"f", file(), meta(), T).unwrap();
    t.write(f, 0, b"12345678", T).unwrap();
    let later = Nfstime3 {
        seconds: 2,
        nseconds: 0,
    };
    // 3 bytes more than the 2 left: none of them is written.
    assert_eq!(t.write(f, 6, b"abcde", later), Err(Nfsstat3::Nfs3errNospc));
    assert_eq!(contents(&t, f), b"12345678");
    assert_eq!(t.used_bytes(), 8);
    let node = t.get(f).unwrap();
    assert_eq!((node.size(), node.meta.mtime), (8, T));
    // Over the stored bytes and into the 2 left: fits.
    t.write(f, 6, b"abcd", later).unwrap();
    assert_eq!(contents(&t, f), b"123456abcd");
    assert_eq!(t.used_bytes(), 10);
    assert_eq!(t.check(), Ok(()));
}

#[test]
fn special_files_have_no_bytes_and_link_like_files() {
    let mut t = tree(100, 10);
    let fifo = t
        .create(ROOT, b"p", Kind::Special(Special::Fifo), meta(), T)
        .unwrap();
    let dev = Special::Char { major: 1, minor: 3 };
    let c = t.create(ROOT, b"c", Kind::Special(dev), meta(), T).unwrap();
    assert_eq!(t.get(c).unwrap().size(), 0);
    assert_eq!(dev.rdev(), (1, 3));
    assert!(dev.is_device() && !Special::Fifo.is_device());
    assert_eq!(t.set_len(c, 1, T), Err(Nfsstat3::Nfs3errInval));
    assert_eq!(t.write(fifo, 0, b"x", T), Err(Nfsstat3::Nfs3errInval));
    assert_eq!(
        t.get(fifo).unwrap().kind.data().err(),
        Some(Nfsstat3::Nfs3errInval)
    );
    t.link(c, ROOT, b"c2", T).unwrap();
    assert_eq!(t.get(c).unwrap().nlink(), 2);
    t.rename(ROOT, b"p", ROOT, b"q", T).unwrap();
    assert_eq!(t.lookup(ROOT, b"q"), Ok(fifo));
    t.unlink(ROOT, b"q", false, T).unwrap();
    assert_eq!(t.get(fifo).err(), Some(Nfsstat3::Nfs3errStale));
    assert_eq!(t.used_bytes(), 0);
    assert_eq!(t.check(), Ok(()));
}

mod random_operations {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Operation {
        Create(usize, usize, u8),
        Write(usize, u64, usize),
        SetLen(usize, u64),
        Unlink(usize, usize, bool),
        Rename(usize, usize, usize, usize),
        Link(usize, usize, usize),
    }

    const NAMES: [&[u8]; 4] = [b"a", b"b", b"..", b"c"];

    /// Small offsets, and some past 4 GiB (sparse files far beyond the bound on bytes).
    fn offset() -> impl Strategy<Value = u64> {
        prop_oneof![3 => 0..300u64, 1 => (1u64 << 32)..(1u64 << 32) + 300]
    }

    fn operation() -> impl Strategy<Value = Operation> {
        prop_oneof![
            (0..8usize, 0..4usize, 0..4u8).prop_map(|(d, n, k)| Operation::Create(d, n, k)),
            (0..8usize, offset(), 0..64usize).prop_map(|(f, o, l)| Operation::Write(f, o, l)),
            (0..8usize, offset()).prop_map(|(f, l)| Operation::SetLen(f, l)),
            (0..8usize, 0..4usize, any::<bool>()).prop_map(|(d, n, w)| Operation::Unlink(d, n, w)),
            (0..8usize, 0..4usize, 0..8usize, 0..4usize)
                .prop_map(|(a, b, c, d)| Operation::Rename(a, b, c, d)),
            (0..8usize, 0..8usize, 0..4usize).prop_map(|(f, d, n)| Operation::Link(f, d, n)),
        ]
    }

    /// The `k`th fileid in the table (modulo its size), or one that never was.
    fn pick(t: &Tree, k: usize) -> Fileid3 {
        let mut ids: Vec<Fileid3> = t.nodes.keys().copied().collect();
        ids.sort_unstable();
        ids.push(999);
        ids[k % ids.len()]
    }

    proptest! {
        /// Whatever the sequence, each operation answers (no panic) and the invariants hold.
        #[test]
        fn keep_the_invariants(ops in proptest::collection::vec(operation(), 1..60)) {
            let mut t = tree(256, 12);
            for op in ops {
                let _ = match op {
                    Operation::Create(d, n, kind) => {
                        let kind = match kind {
                            0 => file(),
                            1 => Kind::Dir(Dir::default()),
                            2 => Kind::Symlink(Bytes::from_static(b"target")),
                            _ => Kind::Special(Special::Block { major: 8, minor: 0 }),
                        };
                        t.create(pick(&t, d), NAMES[n], kind, meta(), T).map(drop)
                    }
                    Operation::Write(f, offset, len) => t.write(pick(&t, f), offset, &vec![7; len], T),
                    Operation::SetLen(f, len) => t.set_len(pick(&t, f), len, T),
                    Operation::Unlink(d, n, want_dir) => t.unlink(pick(&t, d), NAMES[n], want_dir, T),
                    Operation::Rename(a, b, c, d) => {
                        t.rename(pick(&t, a), NAMES[b], pick(&t, c), NAMES[d], T)
                    }
                    Operation::Link(f, d, n) => t.link(pick(&t, f), pick(&t, d), NAMES[n], T),
                };
                prop_assert_eq!(t.check(), Ok(()));
            }
        }
    }
}

#[test]
fn a_pinned_file_outlives_its_last_name_until_unpinned() {
    let mut tree = Tree::new(
        Bounds {
            bytes: 1 << 20,
            files: 100,
        },
        Meta::new(0o777, 0, 0, Nfstime3::default()),
    );
    let now = Nfstime3::default();
    let file = Kind::File {
        data: FileData::new(),
        create_verf: None,
    };
    let id = tree
        .create(ROOT, b"f", file, Meta::new(0o644, 0, 0, now), now)
        .unwrap();
    tree.write(id, 0, b"kept", now).unwrap();
    tree.pin(id);
    tree.pin(id);
    tree.unlink(ROOT, b"f", false, now).unwrap();
    assert_eq!(tree.lookup(ROOT, b"f"), Err(Nfsstat3::Nfs3errNoent));
    assert_eq!(tree.get(id).unwrap().nlink(), 0);
    assert_eq!(tree.used_bytes(), 4, "the bytes stay while pinned");
    tree.unpin(id);
    assert!(tree.get(id).is_ok(), "one pin left");
    tree.unpin(id);
    assert_eq!(tree.get(id).err(), Some(Nfsstat3::Nfs3errStale));
    assert_eq!(tree.used_bytes(), 0);
    // Unpinning what was never pinned, or pinning what is gone, changes nothing.
    tree.unpin(id);
    tree.pin(id);
    assert_eq!(tree.files(), 1);
}
