use super::*;
use crate::nfs4::{FATTR4_ACL, FATTR4_ARCHIVE, FATTR4_TIME_CREATE};
use rpcrdma::xdr::Encode;

fn time(seconds: i64, nseconds: u32) -> Nfstime4 {
    Nfstime4 { seconds, nseconds }
}

fn object() -> ObjectAttrs {
    ObjectAttrs {
        kind: NfsFtype4::Nf4reg,
        mode: 0o100644,
        nlink: 2,
        uid: 1000,
        gid: 100,
        size: 12_345,
        space_used: 16_384,
        rdev: (8, 1),
        fileid: 42,
        mounted_on_fileid: 42,
        atime: time(1_700_000_001, 1),
        mtime: time(1_700_000_002, 2),
        ctime: time(1_700_000_003, 3),
        change: 77,
        filehandle: NfsFh4(Bytes::from_static(b"handle-42")),
    }
}

fn file_system() -> FsAttrs {
    FsAttrs {
        fsid: Fsid4 {
            major: 9,
            minor: 10,
        },
        lease_time: 90,
        maxread: 1 << 20,
        maxwrite: 1 << 20,
        maxname: 255,
        maxlink: 32_000,
        maxfilesize: u64::MAX >> 1,
        files_avail: 1000,
        files_free: 1001,
        files_total: 2000,
        space_avail: 3000,
        space_free: 3001,
        space_total: 4000,
        time_delta: time(0, 1),
    }
}

/// A client's `fattr4`: the mask of `attrs`, values written by `vals`.
fn fattr(attrs: &[u32], vals: impl FnOnce(&mut Encoder)) -> Fattr4 {
    let mut enc = Encoder::new();
    vals(&mut enc);
    Fattr4 {
        attrmask: AttrSet::from_attrs(attrs).to_bitmap(),
        attr_vals: enc.finish().into_bytes(),
    }
}

fn opaque(enc: &mut Encoder, s: &'static [u8]) {
    Bytes::from_static(s).encode(enc).unwrap();
}

#[test]
fn table_is_sorted_and_unique() {
    assert!(ATTRS.windows(2).all(|w| w[0].num < w[1].num));
    assert_eq!(supported().len(), ATTRS.len());
}

#[test]
fn table_kinds_agree_with_getters() {
    let (obj, fs) = (object(), file_system());
    for def in ATTRS {
        if let Some(get) = def.get {
            assert_eq!(get(&obj, &fs).kind(), def.kind, "attribute {}", def.num);
        }
    }
}

#[test]
fn supports_every_required_attribute() {
    // RFC 5661 section 5.6.
    let required = AttrSet::from_attrs(&[
        FATTR4_SUPPORTED_ATTRS,
        FATTR4_TYPE,
        FATTR4_FH_EXPIRE_TYPE,
        FATTR4_CHANGE,
        FATTR4_SIZE,
        FATTR4_LINK_SUPPORT,
        FATTR4_SYMLINK_SUPPORT,
        FATTR4_NAMED_ATTR,
        FATTR4_FSID,
        FATTR4_UNIQUE_HANDLES,
        FATTR4_LEASE_TIME,
        FATTR4_RDATTR_ERROR,
        FATTR4_FILEHANDLE,
        FATTR4_SUPPATTR_EXCLCREAT,
    ]);
    assert!(required.is_subset(&supported()));
    assert!(!supported().contains(FATTR4_ACL));
    assert!(!supported().contains(FATTR4_ARCHIVE));
    assert_eq!(
        settable(),
        AttrSet::from_attrs(&[
            FATTR4_SIZE,
            FATTR4_MODE,
            FATTR4_OWNER,
            FATTR4_OWNER_GROUP,
            FATTR4_TIME_ACCESS_SET,
            FATTR4_TIME_MODIFY_SET,
        ])
    );
    assert_eq!(
        write_only(),
        AttrSet::from_attrs(&[FATTR4_TIME_ACCESS_SET, FATTR4_TIME_MODIFY_SET])
    );
    assert!(exclcreat().is_subset(&settable()));
}

#[test]
fn attr_set_bitmaps() {
    let set = AttrSet::from_bitmap(&[0b1011, 0, 1 << 11, 0, 0]);
    assert_eq!(set.iter().collect::<Vec<_>>(), [0, 1, 3, 75]);
    assert_eq!(set.to_bitmap(), [0b1011, 0, 1 << 11]);
    assert_eq!(set.len(), 4);
    assert!(!set.exceeds_limit());
    assert_eq!(AttrSet::new().to_bitmap(), Vec::<u32>::new());
    assert_eq!(AttrSet::from_bitmap(&[0, 0]), AttrSet::EMPTY);

    let mut wide = vec![0u32; 12];
    wide[0] = 1;
    wide[11] = 1;
    let wide = AttrSet::from_bitmap(&wide);
    assert!(wide.exceeds_limit());
    assert_eq!(wide.to_bitmap(), [1]);
    assert!(!wide.is_subset(&supported()));
    assert!(wide.intersection(&supported()).is_subset(&supported()));
    assert!(!AttrSet::from_bitmap(&[0; 100]).exceeds_limit());

    let mut set = AttrSet::new();
    assert!(set.insert(33));
    assert!(!set.insert(33));
    assert!(!set.insert(AttrSet::LIMIT));
    assert!(set.exceeds_limit());
    assert!(!set.contains(AttrSet::LIMIT));
    assert!(set.remove(33));
    assert!(!set.remove(33));
    assert!(!set.is_empty());
    assert_eq!(format!("{set:?}"), "{256..}");

    let a: AttrSet = [1, 2, 3].into_iter().collect();
    let b = AttrSet::from_attrs(&[2, 3, 4]);
    assert_eq!(a.intersection(&b), AttrSet::from_attrs(&[2, 3]));
    assert_eq!(a.union(&b), AttrSet::from_attrs(&[1, 2, 3, 4]));
    assert_eq!(a.difference(&b), AttrSet::from_attrs(&[1]));
    assert!(AttrSet::from_attrs(&[2]).is_subset(&a));
    assert!(!a.is_subset(&b));
}

#[test]
fn encodes_requested_attributes_in_order() {
    let (obj, fs) = (object(), file_system());
    let requested = AttrSet::from_attrs(&[
        FATTR4_MOUNTED_ON_FILEID,
        FATTR4_TYPE,
        FATTR4_ACL, // unsupported
        FATTR4_SIZE,
        FATTR4_FSID,
        FATTR4_TIME_ACCESS_SET, // write-only
        FATTR4_FILEHANDLE,
        FATTR4_MODE,
        FATTR4_OWNER,
        FATTR4_OWNER_GROUP,
        FATTR4_RAWDEV,
        FATTR4_TIME_MODIFY,
        FATTR4_CHANGE,
        FATTR4_RDATTR_ERROR,
        FATTR4_LINK_SUPPORT,
        200, // unknown
    ]);
    let reply = encode(&requested, &obj, &fs);
    let expected_mask = AttrSet::from_attrs(&[
        FATTR4_TYPE,
        FATTR4_CHANGE,
        FATTR4_SIZE,
        FATTR4_LINK_SUPPORT,
        FATTR4_FSID,
        FATTR4_RDATTR_ERROR,
        FATTR4_FILEHANDLE,
        FATTR4_MODE,
        FATTR4_OWNER,
        FATTR4_OWNER_GROUP,
        FATTR4_RAWDEV,
        FATTR4_TIME_MODIFY,
        FATTR4_MOUNTED_ON_FILEID,
    ]);
    assert_eq!(AttrSet::from_bitmap(&reply.attrmask), expected_mask);
    assert_eq!(
        expected_mask,
        requested
            .intersection(&supported())
            .difference(&write_only())
    );
    assert_eq!(reply.attrmask, expected_mask.to_bitmap());

    // Decode by hand with the generated types, in increasing attribute number.
    let mut dec = Decoder::new(&reply.attr_vals);
    assert_eq!(NfsFtype4::decode(&mut dec).unwrap(), NfsFtype4::Nf4reg);
    assert_eq!(u64::decode(&mut dec).unwrap(), 77);
    assert_eq!(u64::decode(&mut dec).unwrap(), 12_345);
    assert!(bool::decode(&mut dec).unwrap());
    assert_eq!(
        Fsid4::decode(&mut dec).unwrap(),
        Fsid4 {
            major: 9,
            minor: 10
        }
    );
    assert_eq!(Nfsstat4::decode(&mut dec).unwrap(), Nfsstat4::Nfs4Ok);
    assert_eq!(NfsFh4::decode(&mut dec).unwrap(), obj.filehandle);
    assert_eq!(u32::decode(&mut dec).unwrap(), 0o644);
    assert_eq!(&Bytes::decode(&mut dec).unwrap()[..], b"1000");
    assert_eq!(&Bytes::decode(&mut dec).unwrap()[..], b"100");
    assert_eq!(
        Specdata4::decode(&mut dec).unwrap(),
        Specdata4 {
            specdata1: 8,
            specdata2: 1
        }
    );
    assert_eq!(Nfstime4::decode(&mut dec).unwrap(), obj.mtime);
    assert_eq!(u64::decode(&mut dec).unwrap(), 42);
    dec.finish().unwrap();
}

#[test]
fn encodes_bitmaps_and_file_system_attributes() {
    let (obj, fs) = (object(), file_system());
    let requested = AttrSet::from_attrs(&[
        FATTR4_SUPPORTED_ATTRS,
        FATTR4_FH_EXPIRE_TYPE,
        FATTR4_LEASE_TIME,
        FATTR4_ACLSUPPORT,
        FATTR4_MAXREAD,
        FATTR4_TIME_DELTA,
        FATTR4_SUPPATTR_EXCLCREAT,
    ]);
    let reply = encode(&requested, &obj, &fs);
    assert_eq!(AttrSet::from_bitmap(&reply.attrmask), requested);
    let mut dec = Decoder::new(&reply.attr_vals);
    let supported_attrs = Vec::<u32>::decode(&mut dec).unwrap();
    assert_eq!(supported_attrs, supported().to_bitmap());
    assert_eq!(supported_attrs.len(), 3, "attribute 75 is in word 2");
    assert_eq!(u32::decode(&mut dec).unwrap(), FH4_PERSISTENT);
    assert_eq!(u32::decode(&mut dec).unwrap(), 90);
    assert_eq!(u32::decode(&mut dec).unwrap(), 0);
    assert_eq!(u64::decode(&mut dec).unwrap(), 1 << 20);
    assert_eq!(Nfstime4::decode(&mut dec).unwrap(), time(0, 1));
    let exclcreat_attrs = Vec::<u32>::decode(&mut dec).unwrap();
    assert_eq!(AttrSet::from_bitmap(&exclcreat_attrs), exclcreat());
    dec.finish().unwrap();
}

#[test]
fn encodes_every_readable_attribute_as_its_kind() {
    let (obj, fs) = (object(), file_system());
    let reply = encode(&supported(), &obj, &fs);
    assert_eq!(
        AttrSet::from_bitmap(&reply.attrmask),
        supported().difference(&write_only())
    );
    let mut dec = Decoder::new(&reply.attr_vals);
    for attr in AttrSet::from_bitmap(&reply.attrmask).iter() {
        let def = def(attr).unwrap();
        let value = Value::decode(def.kind, &mut dec).unwrap();
        assert_eq!(Some(value), def.get.map(|get| get(&obj, &fs)), "{attr}");
    }
    dec.finish().unwrap();
}

#[test]
fn empty_request_empty_reply() {
    let reply = encode(&AttrSet::EMPTY, &object(), &file_system());
    assert_eq!(reply, Fattr4::default());
    let unsupported = AttrSet::from_attrs(&[FATTR4_ACL, FATTR4_TIME_CREATE, 255, 1000]);
    let reply = encode(&unsupported, &object(), &file_system());
    assert_eq!(reply, Fattr4::default());
}

#[test]
fn leaves_out_an_oversized_filehandle() {
    let mut obj = object();
    obj.filehandle = NfsFh4(Bytes::from(vec![7u8; NFS4_FHSIZE as usize + 1]));
    let requested = AttrSet::from_attrs(&[FATTR4_FILEHANDLE, FATTR4_FILEID]);
    let reply = encode(&requested, &obj, &file_system());
    assert_eq!(
        reply.attrmask,
        AttrSet::from_attrs(&[FATTR4_FILEID]).to_bitmap()
    );
    assert_eq!(reply.attr_vals.len(), 8);
}

#[test]
fn check_readable_refuses_write_only() {
    assert_eq!(
        check_readable(&supported().difference(&write_only())),
        Ok(())
    );
    assert_eq!(check_readable(&AttrSet::from_attrs(&[FATTR4_ACL])), Ok(()));
    assert_eq!(
        check_readable(&AttrSet::from_attrs(&[FATTR4_SIZE, FATTR4_TIME_MODIFY_SET])),
        Err(Nfsstat4::Nfs4errInval)
    );
}

#[test]
fn encode_error_reports_rdattr_error() {
    let fh = NfsFh4(Bytes::from_static(b"fh"));
    let requested = AttrSet::from_attrs(&[
        FATTR4_RDATTR_ERROR,
        FATTR4_SIZE,
        FATTR4_FILEID,
        FATTR4_MOUNTED_ON_FILEID,
    ]);
    let reply = encode_error(&requested, Nfsstat4::Nfs4errAccess, Some((7, &fh))).unwrap();
    assert_eq!(
        AttrSet::from_bitmap(&reply.attrmask),
        AttrSet::from_attrs(&[FATTR4_RDATTR_ERROR, FATTR4_FILEID, FATTR4_MOUNTED_ON_FILEID])
    );
    let mut dec = Decoder::new(&reply.attr_vals);
    assert_eq!(Nfsstat4::decode(&mut dec).unwrap(), Nfsstat4::Nfs4errAccess);
    assert_eq!(u64::decode(&mut dec).unwrap(), 7);
    assert_eq!(u64::decode(&mut dec).unwrap(), 7);
    dec.finish().unwrap();

    let with_handle = requested.union(&AttrSet::from_attrs(&[FATTR4_FILEHANDLE]));
    let reply = encode_error(&with_handle, Nfsstat4::Nfs4errIo, Some((7, &fh))).unwrap();
    let mut dec = Decoder::new(&reply.attr_vals);
    assert_eq!(Nfsstat4::decode(&mut dec).unwrap(), Nfsstat4::Nfs4errIo);
    assert_eq!(NfsFh4::decode(&mut dec).unwrap(), fh);
    assert_eq!(u64::decode(&mut dec).unwrap(), 7);
    assert_eq!(u64::decode(&mut dec).unwrap(), 7);
    dec.finish().unwrap();

    let reply = encode_error(&with_handle, Nfsstat4::Nfs4errIo, None).unwrap();
    assert_eq!(reply.attrmask, [1 << FATTR4_RDATTR_ERROR]);
    assert_eq!(
        &reply.attr_vals[..],
        &Nfsstat4::Nfs4errIo.value().to_be_bytes()
    );

    let no_rdattr = AttrSet::from_attrs(&[FATTR4_SIZE, FATTR4_FILEID]);
    assert_eq!(
        encode_error(&no_rdattr, Nfsstat4::Nfs4errAccess, Some((7, &fh))),
        Err(Nfsstat4::Nfs4errAccess)
    );
}

#[test]
fn accepts_each_settable_attribute() {
    /// An attribute, a writer of its value, and what that decodes to.
    type Case = (u32, Box<dyn Fn(&mut Encoder)>, SetAttrs);
    let cases: [Case; 8] = [
        (
            FATTR4_SIZE,
            Box::new(|e: &mut Encoder| e.put_u64(1 << 40)),
            SetAttrs {
                size: Some(1 << 40),
                ..SetAttrs::default()
            },
        ),
        (
            FATTR4_MODE,
            Box::new(|e: &mut Encoder| e.put_u32(0o4755)),
            SetAttrs {
                mode: Some(0o4755),
                ..SetAttrs::default()
            },
        ),
        (
            FATTR4_OWNER,
            Box::new(|e: &mut Encoder| opaque(e, b"4294967295")),
            SetAttrs {
                uid: Some(u32::MAX),
                ..SetAttrs::default()
            },
        ),
        (
            FATTR4_OWNER,
            Box::new(|e: &mut Encoder| opaque(e, b"0")),
            SetAttrs {
                uid: Some(0),
                ..SetAttrs::default()
            },
        ),
        (
            FATTR4_OWNER_GROUP,
            Box::new(|e: &mut Encoder| opaque(e, b"100")),
            SetAttrs {
                gid: Some(100),
                ..SetAttrs::default()
            },
        ),
        (
            FATTR4_TIME_ACCESS_SET,
            Box::new(|e: &mut Encoder| Settime4::default().encode(e).unwrap()),
            SetAttrs {
                atime: Some(SetTime::ServerTime),
                ..SetAttrs::default()
            },
        ),
        (
            FATTR4_TIME_ACCESS_SET,
            Box::new(|e: &mut Encoder| {
                Settime4::SetToClientTime4(time(-5, 999_999_999))
                    .encode(e)
                    .unwrap()
            }),
            SetAttrs {
                atime: Some(SetTime::ClientTime(time(-5, 999_999_999))),
                ..SetAttrs::default()
            },
        ),
        (
            FATTR4_TIME_MODIFY_SET,
            Box::new(|e: &mut Encoder| Settime4::SetToClientTime4(time(7, 8)).encode(e).unwrap()),
            SetAttrs {
                mtime: Some(SetTime::ClientTime(time(7, 8))),
                ..SetAttrs::default()
            },
        ),
    ];
    for (attr, vals, expected) in cases {
        let decoded = decode_settable(&fattr(&[attr], vals));
        assert_eq!(
            decoded,
            Ok((expected, AttrSet::from_attrs(&[attr]))),
            "attribute {attr}"
        );
    }
}

/// Every settable attribute at once, as a Linux client's SETATTR could send them.
fn all_settable() -> Fattr4 {
    fattr(
        &[
            FATTR4_SIZE,
            FATTR4_MODE,
            FATTR4_OWNER,
            FATTR4_OWNER_GROUP,
            FATTR4_TIME_ACCESS_SET,
            FATTR4_TIME_MODIFY_SET,
        ],
        |e| {
            e.put_u64(0);
            e.put_u32(0o600);
            opaque(e, b"1000");
            opaque(e, b"1000");
            Settime4::SetToClientTime4(time(1, 2)).encode(e).unwrap();
            Settime4::default().encode(e).unwrap();
        },
    )
}

#[test]
fn accepts_all_settable_attributes_together() {
    let (values, set) = decode_settable(&all_settable()).unwrap();
    assert_eq!(
        values,
        SetAttrs {
            size: Some(0),
            mode: Some(0o600),
            uid: Some(1000),
            gid: Some(1000),
            atime: Some(SetTime::ClientTime(time(1, 2))),
            mtime: Some(SetTime::ServerTime),
        }
    );
    assert_eq!(set, settable());
    assert_eq!(
        decode_settable(&Fattr4::default()),
        Ok((SetAttrs::default(), AttrSet::EMPTY))
    );
}

#[test]
fn rejects_read_only_attributes() {
    for attr in [
        FATTR4_TYPE,
        FATTR4_FILEID,
        FATTR4_CHANGE,
        FATTR4_SUPPORTED_ATTRS,
        FATTR4_TIME_MODIFY,
        FATTR4_RDATTR_ERROR,
    ] {
        let attrs = fattr(&[FATTR4_SIZE, attr], |e| {
            e.put_u64(1);
            e.put_u64(2);
        });
        assert_eq!(
            decode_settable(&attrs),
            Err(Nfsstat4::Nfs4errInval),
            "{attr}"
        );
    }
}

#[test]
fn rejects_unsupported_attributes() {
    for attr in [FATTR4_ACL, FATTR4_ARCHIVE, FATTR4_TIME_CREATE, 76, 200, 255] {
        let attrs = fattr(&[FATTR4_SIZE, attr], |e| e.put_u64(1));
        assert_eq!(
            decode_settable(&attrs),
            Err(Nfsstat4::Nfs4errAttrnotsupp),
            "{attr}"
        );
    }
    // Unsupported wins over read-only.
    let attrs = fattr(&[FATTR4_TYPE, FATTR4_ACL], |_| {});
    assert_eq!(decode_settable(&attrs), Err(Nfsstat4::Nfs4errAttrnotsupp));
    // A bit far past any defined attribute.
    let mut wide = all_settable();
    wide.attrmask.resize(40, 0);
    wide.attrmask[39] = 1 << 31;
    assert_eq!(decode_settable(&wide), Err(Nfsstat4::Nfs4errAttrnotsupp));
    // Zero words past the limit are nothing.
    let mut zeros = all_settable();
    zeros.attrmask.resize(40, 0);
    assert_eq!(decode_settable(&zeros), decode_settable(&all_settable()));
}

#[test]
fn rejects_truncated_values() {
    let whole = all_settable();
    for len in 0..whole.attr_vals.len() {
        let truncated = Fattr4 {
            attrmask: whole.attrmask.clone(),
            attr_vals: whole.attr_vals.slice(..len),
        };
        assert_eq!(
            decode_settable(&truncated),
            Err(Nfsstat4::Nfs4errBadxdr),
            "{len} bytes"
        );
    }
}

#[test]
fn rejects_trailing_bytes() {
    let mut attrs = all_settable();
    let mut vals = attrs.attr_vals.to_vec();
    vals.extend([0; 4]);
    attrs.attr_vals = vals.into();
    assert_eq!(decode_settable(&attrs), Err(Nfsstat4::Nfs4errBadxdr));
    let no_mask = fattr(&[], |e| e.put_u32(0));
    assert_eq!(decode_settable(&no_mask), Err(Nfsstat4::Nfs4errBadxdr));
}

#[test]
fn rejects_malformed_values() {
    let bad_how = fattr(&[FATTR4_TIME_MODIFY_SET], |e| e.put_u32(2));
    assert_eq!(decode_settable(&bad_how), Err(Nfsstat4::Nfs4errBadxdr));
    let bad_padding = fattr(&[FATTR4_OWNER], |e| {
        e.put_u32(3);
        e.put_u32(u32::from_be_bytes(*b"100\x01"));
    });
    assert_eq!(decode_settable(&bad_padding), Err(Nfsstat4::Nfs4errBadxdr));
    let huge_length = fattr(&[FATTR4_OWNER], |e| e.put_u32(u32::MAX));
    assert_eq!(decode_settable(&huge_length), Err(Nfsstat4::Nfs4errBadxdr));
    // Malformed XDR is BADXDR even after a bad owner.
    let owner_then_garbage = fattr(&[FATTR4_OWNER, FATTR4_TIME_ACCESS_SET], |e| {
        opaque(e, b"root");
        e.put_u32(9);
    });
    assert_eq!(
        decode_settable(&owner_then_garbage),
        Err(Nfsstat4::Nfs4errBadxdr)
    );
}

#[test]
fn rejects_bad_owners() {
    let bad: [&'static [u8]; 12] = [
        b"",
        b"root",
        b"1000@example.com",
        b"-1",
        b"+5",
        b" 5",
        b"5 ",
        b"007",
        b"4294967296",
        b"12345678901",
        b"\xff\xfe",
        b"1\x000",
    ];
    for owner in bad {
        for attr in [FATTR4_OWNER, FATTR4_OWNER_GROUP] {
            let attrs = fattr(&[attr], |e| opaque(e, owner));
            assert_eq!(
                decode_settable(&attrs),
                Err(Nfsstat4::Nfs4errBadowner),
                "{:?}",
                String::from_utf8_lossy(owner)
            );
        }
    }
}

#[test]
fn rejects_out_of_range_values() {
    let mode = fattr(&[FATTR4_MODE], |e| e.put_u32(0o10000));
    assert_eq!(decode_settable(&mode), Err(Nfsstat4::Nfs4errInval));
    let file_type_bits = fattr(&[FATTR4_MODE], |e| e.put_u32(0o100644));
    assert_eq!(
        decode_settable(&file_type_bits),
        Err(Nfsstat4::Nfs4errInval)
    );
    let nanos = fattr(&[FATTR4_TIME_ACCESS_SET], |e| {
        Settime4::SetToClientTime4(time(1, NANOS_PER_SECOND))
            .encode(e)
            .unwrap()
    });
    assert_eq!(decode_settable(&nanos), Err(Nfsstat4::Nfs4errInval));
}

/// The server's own encoding of `attrs`, as a client that read them would send it back.
fn own(attrs: &[u32]) -> Fattr4 {
    encode(&AttrSet::from_attrs(attrs), &object(), &file_system())
}

#[test]
fn matches_the_servers_own_values() {
    let (obj, fs) = (object(), file_system());
    // RFC 5661 section 18.31.3 forbids rdattr_error; everything else must match.
    let mut readable = supported().difference(&write_only());
    readable.remove(FATTR4_RDATTR_ERROR);
    assert_eq!(matches(&encode(&readable, &obj, &fs), &obj, &fs), Ok(true));
    assert_eq!(matches(&Fattr4::default(), &obj, &fs), Ok(true));
}

#[test]
fn matches_fails_on_differences() {
    let fs = file_system();
    let given = own(&[FATTR4_SIZE, FATTR4_OWNER, FATTR4_TIME_MODIFY]);
    let mut obj = object();
    obj.size += 1;
    assert_eq!(matches(&given, &obj, &fs), Ok(false));
    let mut obj = object();
    obj.uid = 0;
    assert_eq!(matches(&given, &obj, &fs), Ok(false));
    let mut obj = object();
    obj.mtime.nseconds += 1;
    assert_eq!(matches(&given, &obj, &fs), Ok(false));
    let mut other_fs = file_system();
    other_fs.fsid.minor += 1;
    assert_eq!(
        matches(&own(&[FATTR4_FSID]), &object(), &other_fs),
        Ok(false)
    );
    // A name where the server has a number: different, not an error.
    let named = fattr(&[FATTR4_OWNER], |e| opaque(e, b"alice@example.com"));
    assert_eq!(matches(&named, &object(), &fs), Ok(false));
}

#[test]
fn matches_compares_bitmaps_as_sets() {
    let (obj, fs) = (object(), file_system());
    let mut words = supported().to_bitmap();
    words.extend([0, 0]);
    let given = fattr(&[FATTR4_SUPPORTED_ATTRS], |e| words.encode(e).unwrap());
    assert_eq!(matches(&given, &obj, &fs), Ok(true));
    let fewer = fattr(&[FATTR4_SUPPORTED_ATTRS], |e| {
        settable().to_bitmap().encode(e).unwrap()
    });
    assert_eq!(matches(&fewer, &obj, &fs), Ok(false));
    let mut wide = vec![0u32; 9];
    wide[..3].copy_from_slice(&supported().to_bitmap());
    wide[8] = 1;
    let beyond = fattr(&[FATTR4_SUPPORTED_ATTRS], |e| wide.encode(e).unwrap());
    assert_eq!(matches(&beyond, &obj, &fs), Ok(false));
}

#[test]
fn matches_errors() {
    let (obj, fs) = (object(), file_system());
    let unsupported = fattr(&[FATTR4_ACL], |e| e.put_u32(0));
    assert_eq!(
        matches(&unsupported, &obj, &fs),
        Err(Nfsstat4::Nfs4errAttrnotsupp)
    );
    assert_eq!(
        matches(&own(&[FATTR4_SIZE, FATTR4_RDATTR_ERROR]), &obj, &fs),
        Err(Nfsstat4::Nfs4errInval)
    );
    let write_only = fattr(&[FATTR4_TIME_ACCESS_SET], |e| {
        Settime4::default().encode(e).unwrap()
    });
    assert_eq!(matches(&write_only, &obj, &fs), Err(Nfsstat4::Nfs4errInval));

    let whole = own(&[FATTR4_TYPE, FATTR4_SIZE, FATTR4_FILEHANDLE, FATTR4_OWNER]);
    for len in 0..whole.attr_vals.len() {
        let truncated = Fattr4 {
            attrmask: whole.attrmask.clone(),
            attr_vals: whole.attr_vals.slice(..len),
        };
        assert_eq!(
            matches(&truncated, &obj, &fs),
            Err(Nfsstat4::Nfs4errBadxdr),
            "{len}"
        );
    }
    let mut trailing = whole.clone();
    trailing.attr_vals = [&whole.attr_vals[..], &[0; 4]].concat().into();
    assert_eq!(matches(&trailing, &obj, &fs), Err(Nfsstat4::Nfs4errBadxdr));
    // Checked to the end even after a value differs.
    let differs_then_garbage = fattr(&[FATTR4_TYPE, FATTR4_NAMED_ATTR], |e| {
        e.put_i32(NfsFtype4::Nf4dir.value());
        e.put_u32(2);
    });
    assert_eq!(
        matches(&differs_then_garbage, &obj, &fs),
        Err(Nfsstat4::Nfs4errBadxdr)
    );
    let bad_type = fattr(&[FATTR4_TYPE], |e| e.put_i32(0));
    assert_eq!(matches(&bad_type, &obj, &fs), Err(Nfsstat4::Nfs4errBadxdr));
    let long_handle = fattr(&[FATTR4_FILEHANDLE], |e| {
        Bytes::from(vec![0u8; NFS4_FHSIZE as usize + 1])
            .encode(e)
            .unwrap()
    });
    assert_eq!(
        matches(&long_handle, &obj, &fs),
        Err(Nfsstat4::Nfs4errBadxdr)
    );
    let huge_bitmap = fattr(&[FATTR4_SUPPORTED_ATTRS], |e| e.put_u32(u32::MAX));
    assert_eq!(
        matches(&huge_bitmap, &obj, &fs),
        Err(Nfsstat4::Nfs4errBadxdr)
    );
}

#[test]
fn never_panics_on_arbitrary_input() {
    // A small deterministic generator (xorshift): masks drawn from supported and
    // unsupported attributes, values of random bytes.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (obj, fs) = (object(), file_system());
    for _ in 0..20_000 {
        let words = (next() % 4) as usize;
        let attrmask: Vec<u32> = (0..words).map(|_| next() as u32 & next() as u32).collect();
        let len = (next() % 64) as usize;
        let attr_vals: Vec<u8> = (0..len)
            .map(|_| if next() % 3 == 0 { 0 } else { next() as u8 })
            .collect();
        let attrs = Fattr4 {
            attrmask,
            attr_vals: attr_vals.into(),
        };
        let _ = decode_settable(&attrs);
        let _ = matches(&attrs, &obj, &fs);
        let requested = AttrSet::from_bitmap(&attrs.attrmask);
        let reply = encode(&requested, &obj, &fs);
        assert!(AttrSet::from_bitmap(&reply.attrmask).is_subset(&requested));
    }
}
