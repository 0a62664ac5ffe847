//! File handles: the fileid and the server instance's generation, so that a handle outlives
//! neither its file nor the server that issued it.

use bytes::{BufMut, Bytes, BytesMut};

use crate::nfs3::{Fileid3, NfsFh3, Nfsstat3};

/// The length of every handle this server issues: a fileid and a generation, 8 bytes each.
pub const HANDLE_LEN: usize = 16;

/// The handle of file `fileid` issued by the server instance `generation`.
pub fn encode(fileid: Fileid3, generation: u64) -> NfsFh3 {
    let mut data = BytesMut::with_capacity(HANDLE_LEN);
    data.put_u64(fileid);
    data.put_u64(generation);
    NfsFh3 {
        data: data.freeze(),
    }
}

/// The fileid a handle names, if this instance issued it.
///
/// A handle of another length was never issued by this server: NFS3ERR_BADHANDLE (RFC 1813
/// section 2.6: "Illegal NFS file handle"). A well-formed handle from another instance is
/// NFS3ERR_STALE; whether the file still exists is for the caller to check.
pub fn decode(fh: &NfsFh3, generation: u64) -> Result<Fileid3, Nfsstat3> {
    let bytes: &[u8; HANDLE_LEN] = fh
        .data
        .as_ref()
        .try_into()
        .map_err(|_| Nfsstat3::Nfs3errBadhandle)?;
    let (fileid, issued_by) = bytes.split_at(8);
    let fileid = u64::from_be_bytes(fileid.try_into().map_err(|_| Nfsstat3::Nfs3errBadhandle)?);
    let issued_by = u64::from_be_bytes(
        issued_by
            .try_into()
            .map_err(|_| Nfsstat3::Nfs3errBadhandle)?,
    );
    if issued_by != generation {
        return Err(Nfsstat3::Nfs3errStale);
    }
    Ok(fileid)
}

/// The eight bytes of a verifier (write, cookie) derived from the generation.
pub fn verifier(generation: u64) -> Bytes {
    Bytes::copy_from_slice(&generation.to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_its_own_handles() {
        assert_eq!(decode(&encode(42, 7), 7), Ok(42));
    }

    #[test]
    fn rejects_another_instances_handle_as_stale() {
        assert_eq!(decode(&encode(42, 7), 8), Err(Nfsstat3::Nfs3errStale));
    }

    #[test]
    fn rejects_every_other_length_as_badhandle() {
        let good = encode(42, 7).data;
        for len in (0..HANDLE_LEN).chain([HANDLE_LEN + 1, 64]) {
            let mut data = good.to_vec();
            data.resize(len, 0);
            let fh = NfsFh3 {
                data: Bytes::from(data),
            };
            assert_eq!(decode(&fh, 7), Err(Nfsstat3::Nfs3errBadhandle), "{len}");
        }
    }
}
