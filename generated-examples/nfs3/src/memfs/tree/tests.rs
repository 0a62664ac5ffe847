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
        data: Vec::new(),
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
    assert_eq!(t.set_len(f, 11, T), Err(Nfsstat3::Nfs3errNospc));
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

    fn operation() -> impl Strategy<Value = Operation> {
        prop_oneof![
            (0..8usize, 0..4usize, 0..3u8).prop_map(|(d, n, k)| Operation::Create(d, n, k)),
            (0..8usize, 0..200u64, 0..64usize).prop_map(|(f, o, l)| Operation::Write(f, o, l)),
            (0..8usize, 0..300u64).prop_map(|(f, l)| Operation::SetLen(f, l)),
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
                            _ => Kind::Symlink(Bytes::from_static(b"target")),
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
