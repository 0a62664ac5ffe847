//! File attributes of NFSv4.1 (RFC 5661 section 5): the codec between what the server knows
//! of an object ([`ObjectAttrs`], [`FsAttrs`]) and the `fattr4` of the wire.
//!
//! An attribute list (`fattr4`, RFC 5661 section 3.3.7) is a bitmap (`bitmap4`, section 3.2:
//! bit `n` is bit `n % 32` of word `n / 32`) and the XDR encodings of the attributes whose
//! bits are set, concatenated in increasing attribute number, each with the type of its
//! `fattr4_*` typedef in `specs/nfs4.x`. One table in this module (`ATTRS`) gives, for each
//! attribute the server supports, its XDR type, how to read the server's value and whether a
//! client may set it; everything else here is driven by it:
//!
//! - [`supported`]: every REQUIRED attribute (section 5.6) and the RECOMMENDED ones (section
//!   5.7) an in-memory server can answer. No ACLs (`aclsupport` is 0), no named attributes,
//!   no quotas, no `fs_locations`, no pNFS.
//! - [`encode`] answers GETATTR (section 18.7) and READDIR (section 18.23): the reply's mask
//!   is what was requested and is supported and readable; unsupported attributes are simply
//!   not returned (section 18.7.3). [`check_readable`] is the NFS4ERR_INVAL of section 5.5
//!   for a request that names a write-only attribute; [`encode_error`] is an entry READDIR
//!   cannot read, reported through `rdattr_error` (sections 5.8.1.12, 18.23.3).
//! - [`decode_settable`] reads what SETATTR (section 18.30), CREATE (section 18.4) and OPEN
//!   (section 18.16: `createattrs`, and `cva_attrs` of EXCLUSIVE4_1) may set: `size`, `mode`,
//!   `owner`, `owner_group`, `time_access_set`, `time_modify_set`.
//! - [`matches()`] is VERIFY (section 18.31) and NVERIFY (section 18.15).
//!
//! Write-only attributes (section 5.5): `time_access_set` and `time_modify_set` are in
//! [`supported`] and settable, never returned by [`encode`]; getting them (GETATTR, READDIR,
//! VERIFY) is NFS4ERR_INVAL, and setting a read-only attribute is NFS4ERR_INVAL as well
//! (sections 5.5, 18.30.4).
//!
//! `suppattr_exclcreat` (section 5.8.1.14) is `size`, `mode`, `owner` and `owner_group`
//! ([`exclcreat`]), not `time_access_set` or `time_modify_set`: section 18.16.3 lets a server
//! keep the EXCLUSIVE4_1 verifier in attributes of the new file, conventionally its access and
//! modify times, and has the client set those afterwards with SETATTR; leaving the two times
//! out keeps that choice open to the server and is what Linux's nfsd reports for the same
//! reason (`NFSD_SUPPATTR_EXCLCREAT_WORD1`).
//!
//! # Owners
//!
//! `owner` and `owner_group` are `utf8str_mixed` strings, normally `user@dns_domain` (section
//! 5.9). Section 5.9 also lets a server that has no name mapping use the decimal form of the
//! numeric id, which is what Linux clients send and expect with AUTH_SYS and no idmapping (the
//! default of `nfs4_disable_idmapping`). This server keeps no name database, so it encodes the
//! uid and gid as decimal strings ("1000") and decodes only that form: one to ten ASCII digits,
//! no sign, no leading zero (so that each id has one string, and VERIFY's comparison of
//! encodings agrees with comparing ids), at most `u32::MAX`. Anything else, `name@domain`
//! included, is NFS4ERR_BADOWNER, the error section 5.9 names for a string the server cannot
//! map.
//!
//! # Hostile input
//!
//! Nothing here panics or allocates in proportion to its input: bitmaps are read into a
//! fixed-size [`AttrSet`] (bits for attribute numbers of [`AttrSet::LIMIT`] and beyond are
//! remembered only as "something beyond"), opaque values are slices of the request's buffer,
//! every length is checked against the bytes that remain, and trailing bytes are refused.

use bytes::Bytes;
use rpcrdma::xdr::{self, Decode, Decoder, Encoder};

use crate::nfs4::{
    Bitmap4, Fattr4, Fsid4, NfsFh4, NfsFtype4, Nfsstat4, Nfstime4, Settime4, Specdata4, TimeHow4,
    FATTR4_ACLSUPPORT, FATTR4_CANSETTIME, FATTR4_CASE_INSENSITIVE, FATTR4_CASE_PRESERVING,
    FATTR4_CHANGE, FATTR4_CHOWN_RESTRICTED, FATTR4_FH_EXPIRE_TYPE, FATTR4_FILEHANDLE,
    FATTR4_FILEID, FATTR4_FILES_AVAIL, FATTR4_FILES_FREE, FATTR4_FILES_TOTAL, FATTR4_FSID,
    FATTR4_HOMOGENEOUS, FATTR4_LEASE_TIME, FATTR4_LINK_SUPPORT, FATTR4_MAXFILESIZE, FATTR4_MAXLINK,
    FATTR4_MAXNAME, FATTR4_MAXREAD, FATTR4_MAXWRITE, FATTR4_MODE, FATTR4_MOUNTED_ON_FILEID,
    FATTR4_NAMED_ATTR, FATTR4_NO_TRUNC, FATTR4_NUMLINKS, FATTR4_OWNER, FATTR4_OWNER_GROUP,
    FATTR4_RAWDEV, FATTR4_RDATTR_ERROR, FATTR4_SIZE, FATTR4_SPACE_AVAIL, FATTR4_SPACE_FREE,
    FATTR4_SPACE_TOTAL, FATTR4_SPACE_USED, FATTR4_SUPPATTR_EXCLCREAT, FATTR4_SUPPORTED_ATTRS,
    FATTR4_SYMLINK_SUPPORT, FATTR4_TIME_ACCESS, FATTR4_TIME_ACCESS_SET, FATTR4_TIME_DELTA,
    FATTR4_TIME_METADATA, FATTR4_TIME_MODIFY, FATTR4_TIME_MODIFY_SET, FATTR4_TYPE,
    FATTR4_UNIQUE_HANDLES, FH4_PERSISTENT, NFS4_FHSIZE,
};

/// The permission bits of `mode4` (RFC 5661 section 6.2.4): `MODE4_SUID` (0o4000) down to
/// `MODE4_XOTH` (0o001).
pub const MODE_MASK: u32 = 0o7777;

/// `nseconds` of an `nfstime4` is below this (RFC 5661 section 3.3.1: larger values are
/// invalid).
const NANOS_PER_SECOND: u32 = 1_000_000_000;

/// The most digits of a decimal owner string: `u32::MAX` is 4294967295.
const MAX_ID_DIGITS: usize = 10;

/// What the server knows of one object, protocol-neutral.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectAttrs {
    /// `type` (attribute 1).
    pub kind: NfsFtype4,
    /// `mode` (attribute 33): the permission bits; only [`MODE_MASK`] is sent.
    pub mode: u32,
    /// `numlinks` (attribute 35).
    pub nlink: u32,
    /// `owner` (attribute 36), sent as a decimal string.
    pub uid: u32,
    /// `owner_group` (attribute 37), sent as a decimal string.
    pub gid: u32,
    /// `size` (attribute 4).
    pub size: u64,
    /// `space_used` (attribute 45).
    pub space_used: u64,
    /// `rawdev` (attribute 41): major and minor device numbers.
    pub rdev: (u32, u32),
    /// `fileid` (attribute 20).
    pub fileid: u64,
    /// `mounted_on_fileid` (attribute 55).
    pub mounted_on_fileid: u64,
    /// `time_access` (attribute 47).
    pub atime: Nfstime4,
    /// `time_modify` (attribute 53).
    pub mtime: Nfstime4,
    /// `time_metadata` (attribute 52).
    pub ctime: Nfstime4,
    /// `change` (attribute 3).
    pub change: u64,
    /// `filehandle` (attribute 19). One longer than `NFS4_FHSIZE` cannot be sent and is left
    /// out of replies.
    pub filehandle: NfsFh4,
}

/// What the server knows of its one file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsAttrs {
    /// `fsid` (attribute 8).
    pub fsid: Fsid4,
    /// `lease_time` (attribute 10), in seconds.
    pub lease_time: u32,
    /// `maxread` (attribute 30).
    pub maxread: u64,
    /// `maxwrite` (attribute 31).
    pub maxwrite: u64,
    /// `maxname` (attribute 29).
    pub maxname: u32,
    /// `maxlink` (attribute 28).
    pub maxlink: u32,
    /// `maxfilesize` (attribute 27).
    pub maxfilesize: u64,
    /// `files_avail` (attribute 21).
    pub files_avail: u64,
    /// `files_free` (attribute 22).
    pub files_free: u64,
    /// `files_total` (attribute 23).
    pub files_total: u64,
    /// `space_avail` (attribute 42).
    pub space_avail: u64,
    /// `space_free` (attribute 43).
    pub space_free: u64,
    /// `space_total` (attribute 44).
    pub space_total: u64,
    /// `time_delta` (attribute 51).
    pub time_delta: Nfstime4,
}

/// What a client may set (SETATTR, CREATE and OPEN `createattrs`, EXCLUSIVE4_1 `cva_attrs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetAttrs {
    /// `size` (attribute 4).
    pub size: Option<u64>,
    /// `mode` (attribute 33): within [`MODE_MASK`].
    pub mode: Option<u32>,
    /// `owner` (attribute 36), as a uid.
    pub uid: Option<u32>,
    /// `owner_group` (attribute 37), as a gid.
    pub gid: Option<u32>,
    /// `time_access_set` (attribute 48).
    pub atime: Option<SetTime>,
    /// `time_modify_set` (attribute 54).
    pub mtime: Option<SetTime>,
}

/// A time to set (`settime4`, RFC 5661 section 3.3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetTime {
    /// `SET_TO_SERVER_TIME4`: the server's current time.
    ServerTime,
    /// `SET_TO_CLIENT_TIME4`: this time (`nseconds` below one billion).
    ClientTime(Nfstime4),
}

mod set;

pub use set::{AttrSet, Iter};

// ---------------------------------------------------------------------------------------
// The attribute table.
// ---------------------------------------------------------------------------------------

/// The XDR type of an attribute's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `bitmap4`.
    Bitmap,
    /// `nfs_ftype4`.
    Ftype,
    /// `uint32_t` (and typedefs of it: `mode4`, `nfs_lease4`).
    Uint32,
    /// `uint64_t` (and `changeid4`).
    Uint64,
    /// `bool`.
    Bool,
    /// `fsid4`.
    Fsid,
    /// `nfsstat4`.
    Status,
    /// `nfs_fh4`: `opaque<NFS4_FHSIZE>`.
    Handle,
    /// `utf8str_mixed`: `opaque<>`.
    Utf8,
    /// `specdata4`.
    Specdata,
    /// `nfstime4`.
    Time,
    /// `settime4`.
    SetTime,
}

/// One attribute's value, of its [`Kind`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    /// A bitmap, compared as a set (so trailing zero words do not matter).
    Bitmap(AttrSet),
    Ftype(NfsFtype4),
    Uint32(u32),
    Uint64(u64),
    Bool(bool),
    Fsid(Fsid4),
    Status(Nfsstat4),
    Handle(Bytes),
    Utf8(Bytes),
    Specdata(Specdata4),
    Time(Nfstime4),
    SetTime(Settime4),
}

impl Value {
    /// The kind of value this is.
    #[cfg(test)]
    fn kind(&self) -> Kind {
        match self {
            Value::Bitmap(_) => Kind::Bitmap,
            Value::Ftype(_) => Kind::Ftype,
            Value::Uint32(_) => Kind::Uint32,
            Value::Uint64(_) => Kind::Uint64,
            Value::Bool(_) => Kind::Bool,
            Value::Fsid(_) => Kind::Fsid,
            Value::Status(_) => Kind::Status,
            Value::Handle(_) => Kind::Handle,
            Value::Utf8(_) => Kind::Utf8,
            Value::Specdata(_) => Kind::Specdata,
            Value::Time(_) => Kind::Time,
            Value::SetTime(_) => Kind::SetTime,
        }
    }

    /// Whether the value can be written: a filehandle must fit `nfs_fh4<NFS4_FHSIZE>`.
    fn fits(&self) -> bool {
        match self {
            Value::Handle(fh) => fh.len() <= NFS4_FHSIZE as usize,
            _ => true,
        }
    }

    /// Appends the XDR encoding. Infallible for a value that [`fits`](Self::fits): every
    /// length is written by hand, after that check.
    fn encode(&self, enc: &mut Encoder) {
        match self {
            Value::Bitmap(set) => {
                let words = &set.words[..set.word_count()];
                enc.put_u32(words.len() as u32);
                for &word in words {
                    enc.put_u32(word);
                }
            }
            Value::Ftype(kind) => enc.put_i32(kind.value()),
            Value::Uint32(v) => enc.put_u32(*v),
            Value::Uint64(v) => enc.put_u64(*v),
            Value::Bool(v) => enc.put_bool(*v),
            Value::Fsid(fsid) => {
                enc.put_u64(fsid.major);
                enc.put_u64(fsid.minor);
            }
            Value::Status(status) => enc.put_i32(status.value()),
            Value::Handle(data) | Value::Utf8(data) => {
                enc.put_u32(data.len() as u32);
                enc.put_opaque_body(data);
            }
            Value::Specdata(spec) => {
                enc.put_u32(spec.specdata1);
                enc.put_u32(spec.specdata2);
            }
            Value::Time(time) => put_time(enc, time),
            Value::SetTime(Settime4::SetToClientTime4(time)) => {
                enc.put_i32(TimeHow4::SetToClientTime4.value());
                put_time(enc, time);
            }
            // `time_how4` has two values: the default arm is the server's time.
            Value::SetTime(Settime4::Default { .. }) => {
                enc.put_i32(TimeHow4::SetToServerTime4.value());
            }
        }
    }

    /// Reads one value of `kind`.
    fn decode(kind: Kind, dec: &mut Decoder) -> xdr::Result<Value> {
        Ok(match kind {
            Kind::Bitmap => Value::Bitmap(read_bitmap(dec)?),
            Kind::Ftype => Value::Ftype(NfsFtype4::decode(dec)?),
            Kind::Uint32 => Value::Uint32(dec.get_u32()?),
            Kind::Uint64 => Value::Uint64(dec.get_u64()?),
            Kind::Bool => Value::Bool(dec.get_bool()?),
            Kind::Fsid => Value::Fsid(Fsid4::decode(dec)?),
            Kind::Status => Value::Status(Nfsstat4::decode(dec)?),
            Kind::Handle => Value::Handle(dec.get_opaque(Some(NFS4_FHSIZE))?),
            Kind::Utf8 => Value::Utf8(dec.get_opaque(None)?),
            Kind::Specdata => Value::Specdata(Specdata4::decode(dec)?),
            Kind::Time => Value::Time(Nfstime4::decode(dec)?),
            Kind::SetTime => Value::SetTime(Settime4::decode(dec)?),
        })
    }
}

/// Writes an `nfstime4`.
fn put_time(enc: &mut Encoder, time: &Nfstime4) {
    enc.put_i64(time.seconds);
    enc.put_u32(time.nseconds);
}

/// Reads a `bitmap4` into an [`AttrSet`] without allocating: the word count is checked
/// against the input left before any word is read.
fn read_bitmap(dec: &mut Decoder) -> xdr::Result<AttrSet> {
    let at = dec.offset();
    let count = dec.get_u32()?;
    dec.check_count(count.into(), xdr::BLOCK, at)?;
    let mut set = AttrSet::EMPTY;
    for i in 0..count as usize {
        let word = dec.get_u32()?;
        match set.words.get_mut(i) {
            Some(slot) => *slot = word,
            None => set.beyond |= word != 0,
        }
    }
    Ok(set)
}

/// Reads the server's value of an attribute.
type Getter = fn(&ObjectAttrs, &FsAttrs) -> Value;

/// One supported attribute.
struct AttrDef {
    /// The attribute number (`FATTR4_*`).
    num: u32,
    /// Its XDR type.
    kind: Kind,
    /// The server's value; `None` for a write-only attribute (RFC 5661 section 5.5).
    get: Option<Getter>,
    /// Whether a client may set it.
    settable: bool,
}

/// A read-only attribute.
const fn ro(num: u32, kind: Kind, get: Getter) -> AttrDef {
    AttrDef {
        num,
        kind,
        get: Some(get),
        settable: false,
    }
}

/// A readable and settable attribute.
const fn rw(num: u32, kind: Kind, get: Getter) -> AttrDef {
    AttrDef {
        num,
        kind,
        get: Some(get),
        settable: true,
    }
}

/// A write-only attribute.
const fn wo(num: u32, kind: Kind) -> AttrDef {
    AttrDef {
        num,
        kind,
        get: None,
        settable: true,
    }
}

/// Every supported attribute, in increasing number (a test checks the order). REQUIRED ones
/// are RFC 5661 section 5.8.1, RECOMMENDED ones section 5.8.2.
const ATTRS: &[AttrDef] = &[
    ro(FATTR4_SUPPORTED_ATTRS, Kind::Bitmap, |_, _| {
        Value::Bitmap(SUPPORTED)
    }),
    ro(FATTR4_TYPE, Kind::Ftype, |o, _| Value::Ftype(o.kind)),
    // Handles name an object for as long as it exists (section 4.2.2).
    ro(FATTR4_FH_EXPIRE_TYPE, Kind::Uint32, |_, _| {
        Value::Uint32(FH4_PERSISTENT)
    }),
    ro(FATTR4_CHANGE, Kind::Uint64, |o, _| Value::Uint64(o.change)),
    rw(FATTR4_SIZE, Kind::Uint64, |o, _| Value::Uint64(o.size)),
    ro(FATTR4_LINK_SUPPORT, Kind::Bool, |_, _| Value::Bool(true)),
    ro(FATTR4_SYMLINK_SUPPORT, Kind::Bool, |_, _| Value::Bool(true)),
    ro(FATTR4_NAMED_ATTR, Kind::Bool, |_, _| Value::Bool(false)),
    ro(FATTR4_FSID, Kind::Fsid, |_, f| Value::Fsid(f.fsid)),
    ro(FATTR4_UNIQUE_HANDLES, Kind::Bool, |_, _| Value::Bool(true)),
    ro(FATTR4_LEASE_TIME, Kind::Uint32, |_, f| {
        Value::Uint32(f.lease_time)
    }),
    // Asked for in a GETATTR, or in a READDIR of an entry that could be read: no error.
    ro(FATTR4_RDATTR_ERROR, Kind::Status, |_, _| {
        Value::Status(Nfsstat4::Nfs4Ok)
    }),
    // No ACL support of any kind (section 6.2.1.2: no ACE type bits).
    ro(FATTR4_ACLSUPPORT, Kind::Uint32, |_, _| Value::Uint32(0)),
    ro(FATTR4_CANSETTIME, Kind::Bool, |_, _| Value::Bool(true)),
    ro(FATTR4_CASE_INSENSITIVE, Kind::Bool, |_, _| {
        Value::Bool(false)
    }),
    ro(FATTR4_CASE_PRESERVING, Kind::Bool, |_, _| Value::Bool(true)),
    ro(FATTR4_CHOWN_RESTRICTED, Kind::Bool, |_, _| {
        Value::Bool(true)
    }),
    ro(FATTR4_FILEHANDLE, Kind::Handle, |o, _| {
        Value::Handle(o.filehandle.0.clone())
    }),
    ro(FATTR4_FILEID, Kind::Uint64, |o, _| Value::Uint64(o.fileid)),
    ro(FATTR4_FILES_AVAIL, Kind::Uint64, |_, f| {
        Value::Uint64(f.files_avail)
    }),
    ro(FATTR4_FILES_FREE, Kind::Uint64, |_, f| {
        Value::Uint64(f.files_free)
    }),
    ro(FATTR4_FILES_TOTAL, Kind::Uint64, |_, f| {
        Value::Uint64(f.files_total)
    }),
    ro(FATTR4_HOMOGENEOUS, Kind::Bool, |_, _| Value::Bool(true)),
    ro(FATTR4_MAXFILESIZE, Kind::Uint64, |_, f| {
        Value::Uint64(f.maxfilesize)
    }),
    ro(FATTR4_MAXLINK, Kind::Uint32, |_, f| {
        Value::Uint32(f.maxlink)
    }),
    ro(FATTR4_MAXNAME, Kind::Uint32, |_, f| {
        Value::Uint32(f.maxname)
    }),
    ro(FATTR4_MAXREAD, Kind::Uint64, |_, f| {
        Value::Uint64(f.maxread)
    }),
    ro(FATTR4_MAXWRITE, Kind::Uint64, |_, f| {
        Value::Uint64(f.maxwrite)
    }),
    rw(FATTR4_MODE, Kind::Uint32, |o, _| {
        Value::Uint32(o.mode & MODE_MASK)
    }),
    ro(FATTR4_NO_TRUNC, Kind::Bool, |_, _| Value::Bool(true)),
    ro(FATTR4_NUMLINKS, Kind::Uint32, |o, _| Value::Uint32(o.nlink)),
    rw(FATTR4_OWNER, Kind::Utf8, |o, _| {
        Value::Utf8(id_string(o.uid))
    }),
    rw(FATTR4_OWNER_GROUP, Kind::Utf8, |o, _| {
        Value::Utf8(id_string(o.gid))
    }),
    ro(FATTR4_RAWDEV, Kind::Specdata, |o, _| {
        Value::Specdata(Specdata4 {
            specdata1: o.rdev.0,
            specdata2: o.rdev.1,
        })
    }),
    ro(FATTR4_SPACE_AVAIL, Kind::Uint64, |_, f| {
        Value::Uint64(f.space_avail)
    }),
    ro(FATTR4_SPACE_FREE, Kind::Uint64, |_, f| {
        Value::Uint64(f.space_free)
    }),
    ro(FATTR4_SPACE_TOTAL, Kind::Uint64, |_, f| {
        Value::Uint64(f.space_total)
    }),
    ro(FATTR4_SPACE_USED, Kind::Uint64, |o, _| {
        Value::Uint64(o.space_used)
    }),
    ro(FATTR4_TIME_ACCESS, Kind::Time, |o, _| Value::Time(o.atime)),
    wo(FATTR4_TIME_ACCESS_SET, Kind::SetTime),
    ro(FATTR4_TIME_DELTA, Kind::Time, |_, f| {
        Value::Time(f.time_delta)
    }),
    ro(FATTR4_TIME_METADATA, Kind::Time, |o, _| {
        Value::Time(o.ctime)
    }),
    ro(FATTR4_TIME_MODIFY, Kind::Time, |o, _| Value::Time(o.mtime)),
    wo(FATTR4_TIME_MODIFY_SET, Kind::SetTime),
    ro(FATTR4_MOUNTED_ON_FILEID, Kind::Uint64, |o, _| {
        Value::Uint64(o.mounted_on_fileid)
    }),
    ro(FATTR4_SUPPATTR_EXCLCREAT, Kind::Bitmap, |_, _| {
        Value::Bitmap(EXCLCREAT)
    }),
];

/// Which attributes of [`ATTRS`] a set is built of.
#[derive(Clone, Copy)]
enum Select {
    All,
    Readable,
    Settable,
    WriteOnly,
}

/// The set of the attributes of [`ATTRS`] that `select` picks.
const fn table_set(select: Select) -> AttrSet {
    let mut set = AttrSet::EMPTY;
    let mut i = 0;
    while i < ATTRS.len() {
        let def = &ATTRS[i];
        let picked = match select {
            Select::All => true,
            Select::Readable => def.get.is_some(),
            Select::Settable => def.settable,
            Select::WriteOnly => def.get.is_none(),
        };
        if picked {
            set = set.with(def.num);
        }
        i += 1;
    }
    set
}

const SUPPORTED: AttrSet = table_set(Select::All);
const READABLE: AttrSet = table_set(Select::Readable);
const SETTABLE: AttrSet = table_set(Select::Settable);
const WRITE_ONLY: AttrSet = table_set(Select::WriteOnly);
const EXCLCREAT: AttrSet =
    AttrSet::from_attrs(&[FATTR4_SIZE, FATTR4_MODE, FATTR4_OWNER, FATTR4_OWNER_GROUP]);

/// The table entry of a supported attribute.
fn def(attr: u32) -> Option<&'static AttrDef> {
    ATTRS
        .binary_search_by_key(&attr, |def| def.num)
        .ok()
        .and_then(|i| ATTRS.get(i))
}

/// The protocol's answer to bytes that do not decode.
fn bad_xdr(_: xdr::Error) -> Nfsstat4 {
    Nfsstat4::Nfs4errBadxdr
}

/// An owner or group id as its decimal string.
fn id_string(id: u32) -> Bytes {
    Bytes::from(id.to_string())
}

/// A decimal owner string (see the module documentation): one to ten ASCII digits, no leading
/// zero, at most `u32::MAX`.
fn parse_id(s: &[u8]) -> Option<u32> {
    let canonical = match s {
        [] => false,
        [b'0', _, ..] => false,
        _ => s.len() <= MAX_ID_DIGITS && s.iter().all(u8::is_ascii_digit),
    };
    if !canonical {
        return None;
    }
    let n = s
        .iter()
        .fold(0u64, |n, &digit| n * 10 + u64::from(digit - b'0'));
    u32::try_from(n).ok()
}

// ---------------------------------------------------------------------------------------
// The operations.
// ---------------------------------------------------------------------------------------

/// The attributes this server supports: the value of `supported_attrs`. All REQUIRED
/// attributes (RFC 5661 section 5.6) and these RECOMMENDED ones (section 5.7): `aclsupport`,
/// `cansettime`, `case_insensitive`, `case_preserving`, `chown_restricted`, `fileid`,
/// `files_avail`, `files_free`, `files_total`, `homogeneous`, `maxfilesize`, `maxlink`,
/// `maxname`, `maxread`, `maxwrite`, `mode`, `no_trunc`, `numlinks`, `owner`, `owner_group`,
/// `rawdev`, `space_avail`, `space_free`, `space_total`, `space_used`, `time_access`,
/// `time_access_set`, `time_delta`, `time_metadata`, `time_modify`, `time_modify_set`,
/// `mounted_on_fileid`.
pub fn supported() -> AttrSet {
    SUPPORTED
}

/// The attributes a client may set: `size`, `mode`, `owner`, `owner_group`,
/// `time_access_set`, `time_modify_set`.
pub fn settable() -> AttrSet {
    SETTABLE
}

/// The supported attributes that cannot be read (RFC 5661 section 5.5): `time_access_set` and
/// `time_modify_set`.
pub fn write_only() -> AttrSet {
    WRITE_ONLY
}

/// The attributes EXCLUSIVE4_1 may set (`suppattr_exclcreat`, RFC 5661 section 5.8.1.14):
/// `size`, `mode`, `owner`, `owner_group`; the module documentation says why not the times.
/// OPEN should refuse `cva_attrs` outside this set with NFS4ERR_INVAL (section 18.16.3).
pub fn exclcreat() -> AttrSet {
    EXCLCREAT
}

/// GETATTR and READDIR: NFS4ERR_INVAL when `requested` names a write-only attribute (RFC 5661
/// section 5.5: getting a set-only attribute is NFS4ERR_INVAL). [`encode`] itself leaves such
/// attributes out rather than failing; call this first to answer as section 5.5 requires.
pub fn check_readable(requested: &AttrSet) -> Result<(), Nfsstat4> {
    if requested.intersection(&WRITE_ONLY).is_empty() {
        Ok(())
    } else {
        Err(Nfsstat4::Nfs4errInval)
    }
}

/// GETATTR (RFC 5661 section 18.7) and READDIR (section 18.23): the requested attributes this
/// server supports and can read, with `obj`'s and `fs`'s values. The reply's mask is
/// `requested` ∩ [`supported`] minus the write-only attributes (section 18.7.3: unsupported
/// attributes are simply not returned); `rdattr_error`, if requested, is NFS4_OK. A
/// `filehandle` longer than `NFS4_FHSIZE` (a server bug) is left out rather than sent
/// malformed.
pub fn encode(requested: &AttrSet, obj: &ObjectAttrs, fs: &FsAttrs) -> Fattr4 {
    let mut mask = AttrSet::EMPTY;
    let mut enc = Encoder::new();
    for attr in requested.intersection(&READABLE).iter() {
        let Some(get) = def(attr).and_then(|def| def.get) else {
            continue;
        };
        let value = get(obj, fs);
        if value.fits() {
            value.encode(&mut enc);
            mask.insert(attr);
        }
    }
    Fattr4 {
        attrmask: mask.to_bitmap(),
        attr_vals: enc.finish().into_bytes(),
    }
}

/// READDIR of an entry whose attributes cannot be read (RFC 5661 sections 18.23.3, 5.8.1.12):
/// `rdattr_error` with `error`, and, when the directory still knows the entry's file id and
/// handle (`fileid_and_handle`), those of `filehandle`, `fileid` and `mounted_on_fileid` that
/// were requested (the file id serves as `mounted_on_fileid`: this server has one file system,
/// so no entry is a mount point, section 5.8.2.19).
///
/// Fails with `error` itself when `rdattr_error` was not requested: section 18.23.3 leaves the
/// server no choice then but to fail the whole READDIR.
pub fn encode_error(
    requested: &AttrSet,
    error: Nfsstat4,
    fileid_and_handle: Option<(u64, &NfsFh4)>,
) -> Result<Fattr4, Nfsstat4> {
    if !requested.contains(FATTR4_RDATTR_ERROR) {
        return Err(error);
    }
    let mut values = vec![(FATTR4_RDATTR_ERROR, Value::Status(error))];
    if let Some((fileid, handle)) = fileid_and_handle {
        values.extend([
            (FATTR4_FILEHANDLE, Value::Handle(handle.0.clone())),
            (FATTR4_FILEID, Value::Uint64(fileid)),
            (FATTR4_MOUNTED_ON_FILEID, Value::Uint64(fileid)),
        ]);
    }
    let mut mask = AttrSet::EMPTY;
    let mut enc = Encoder::new();
    // In increasing attribute number, as `values` is.
    for (attr, value) in values {
        if requested.contains(attr) && value.fits() {
            value.encode(&mut enc);
            mask.insert(attr);
        }
    }
    Ok(Fattr4 {
        attrmask: mask.to_bitmap(),
        attr_vals: enc.finish().into_bytes(),
    })
}

/// The mask of a client's `fattr4`, checked against what the server supports: an attribute
/// the server does not support (or a bit beyond [`AttrSet::LIMIT`]) is NFS4ERR_ATTRNOTSUPP.
fn supported_mask(attrs: &Fattr4) -> Result<AttrSet, Nfsstat4> {
    let set = AttrSet::from_bitmap(&attrs.attrmask);
    if set.is_subset(&SUPPORTED) {
        Ok(set)
    } else {
        Err(Nfsstat4::Nfs4errAttrnotsupp)
    }
}

/// Reads the values of `set` from `attrs.attr_vals`, in increasing attribute number, calling
/// `each` with each; trailing bytes are NFS4ERR_BADXDR. `set` must be within [`SUPPORTED`].
fn for_each_value(
    set: &AttrSet,
    attrs: &Fattr4,
    mut each: impl FnMut(u32, Value),
) -> Result<(), Nfsstat4> {
    let mut dec = Decoder::new(&attrs.attr_vals);
    for attr in set.iter() {
        // Every attribute of `set` is in the table: the caller checked.
        let def = def(attr).ok_or(Nfsstat4::Nfs4errAttrnotsupp)?;
        each(attr, Value::decode(def.kind, &mut dec).map_err(bad_xdr)?);
    }
    dec.finish().map_err(bad_xdr)
}

/// Decodes a client's `fattr4` of attributes to set (SETATTR, RFC 5661 section 18.30; CREATE
/// and OPEN `createattrs`; EXCLUSIVE4_1 `cva_attrs`). Returns the values and the set of
/// attributes decoded (SETATTR's `attrsset`).
///
/// Errors, in the order checked:
/// - an attribute the server does not support at all: NFS4ERR_ATTRNOTSUPP;
/// - a supported attribute that is not settable (`type`, `fileid`, `change`, ...):
///   NFS4ERR_INVAL (sections 5.5, 18.30.4);
/// - bytes that do not decode as the attributes' types, or bytes left over: NFS4ERR_BADXDR;
/// - then, attribute by attribute: a `mode` with bits outside [`MODE_MASK`], or a time to set
///   whose `nseconds` is a billion or more (section 3.3.1): NFS4ERR_INVAL; an `owner` or
///   `owner_group` that is not a decimal id (module documentation, section 5.9):
///   NFS4ERR_BADOWNER.
pub fn decode_settable(attrs: &Fattr4) -> Result<(SetAttrs, AttrSet), Nfsstat4> {
    let set = supported_mask(attrs)?;
    if !set.is_subset(&SETTABLE) {
        return Err(Nfsstat4::Nfs4errInval);
    }
    // All bytes first, so that malformed XDR is BADXDR whatever the values; at most one
    // value per settable attribute.
    let mut values = Vec::with_capacity(set.len());
    for_each_value(&set, attrs, |attr, value| values.push((attr, value)))?;
    let mut out = SetAttrs::default();
    for (attr, value) in values {
        match (attr, value) {
            (FATTR4_SIZE, Value::Uint64(size)) => out.size = Some(size),
            (FATTR4_MODE, Value::Uint32(mode)) if mode & !MODE_MASK == 0 => out.mode = Some(mode),
            (FATTR4_OWNER, Value::Utf8(owner)) => {
                out.uid = Some(parse_id(&owner).ok_or(Nfsstat4::Nfs4errBadowner)?);
            }
            (FATTR4_OWNER_GROUP, Value::Utf8(group)) => {
                out.gid = Some(parse_id(&group).ok_or(Nfsstat4::Nfs4errBadowner)?);
            }
            (FATTR4_TIME_ACCESS_SET, Value::SetTime(time)) => out.atime = Some(set_time(time)?),
            (FATTR4_TIME_MODIFY_SET, Value::SetTime(time)) => out.mtime = Some(set_time(time)?),
            // A mode out of range (the table gives every other pair its one shape).
            _ => return Err(Nfsstat4::Nfs4errInval),
        }
    }
    Ok((out, set))
}

/// A `settime4` as a [`SetTime`]; `nseconds` of a billion or more is NFS4ERR_INVAL.
fn set_time(time: Settime4) -> Result<SetTime, Nfsstat4> {
    match time {
        Settime4::SetToClientTime4(t) if t.nseconds < NANOS_PER_SECOND => {
            Ok(SetTime::ClientTime(t))
        }
        Settime4::SetToClientTime4(_) => Err(Nfsstat4::Nfs4errInval),
        Settime4::Default { .. } => Ok(SetTime::ServerTime),
    }
}

/// VERIFY (RFC 5661 section 18.31) and NVERIFY (section 18.15): `Ok(true)` when every
/// attribute in `given` equals the server's value. Values are compared as decoded XDR, which
/// for these types is comparing their encodings, except that bitmaps (`supported_attrs`,
/// `suppattr_exclcreat`) are compared as sets, so trailing zero words do not matter.
///
/// Errors: an attribute the server does not support, NFS4ERR_ATTRNOTSUPP; `rdattr_error`
/// (section 18.31.3) or a write-only attribute (section 5.5), NFS4ERR_INVAL; bytes that do not
/// decode or are left over, NFS4ERR_BADXDR (checked to the end even once a value differs).
pub fn matches(given: &Fattr4, obj: &ObjectAttrs, fs: &FsAttrs) -> Result<bool, Nfsstat4> {
    let set = supported_mask(given)?;
    if set.contains(FATTR4_RDATTR_ERROR) || !set.intersection(&WRITE_ONLY).is_empty() {
        return Err(Nfsstat4::Nfs4errInval);
    }
    let mut equal = true;
    for_each_value(&set, given, |attr, value| {
        let ours = def(attr).and_then(|def| def.get).map(|get| get(obj, fs));
        equal &= ours.as_ref() == Some(&value);
    })?;
    Ok(equal)
}

#[cfg(test)]
mod tests;
