//! The port mapper and MOUNT codecs against encodings written out by hand from RFC 1833
//! section 3 and RFC 1813 Appendix I: what `nfs3-client` sends before its first NFS call and
//! what it reads back.

use bytes::Bytes;
use rpcrdma::xdr::{self, Procedure, XdrString};
use rpcrdma_nfs3::mount3::{self, mount_program::mount_v3, Dirpath, Mountres3, Mountstat3};
use rpcrdma_nfs3::pmap::{self, pmap_prog::pmap_vers, Mapping};

fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

#[test]
fn getport_asks_for_mount_v3_over_tcp() {
    let args = Mapping {
        prog: mount3::mount_program::PROGRAM,
        vers: mount_v3::VERSION,
        prot: pmap::IPPROTO_TCP,
        port: 0,
    };
    assert_eq!(
        xdr::to_bytes(&args).unwrap()[..],
        words(&[100_005, 3, 6, 0])[..]
    );
    assert_eq!(
        (
            pmap_vers::PmapprocGetport::PROGRAM,
            pmap_vers::PmapprocGetport::VERSION,
            pmap_vers::PmapprocGetport::PROCEDURE
        ),
        (100_000, 2, 3)
    );
    let port: u32 = xdr::from_bytes(Bytes::from(words(&[20048]))).unwrap();
    assert_eq!(port, 20048);
}

#[test]
fn mnt_sends_the_path_and_reads_the_root_handle() {
    let path = Dirpath(XdrString::from("/srv"));
    assert_eq!(
        xdr::to_bytes(&path).unwrap()[..],
        [&words(&[4])[..], b"/srv"].concat()[..]
    );
    assert_eq!(mount_v3::Mountproc3Mnt::PROCEDURE, 1);

    // MNT3_OK, an 8-byte handle, one flavor (AUTH_SYS).
    let reply = [
        &words(&[0, 8])[..],
        &[1, 0, 1, 0, 0, 0, 0, 0][..],
        &words(&[1, 1])[..],
    ]
    .concat();
    match xdr::from_bytes::<Mountres3>(Bytes::from(reply)).unwrap() {
        Mountres3::Mnt3Ok(ok) => {
            assert_eq!(ok.fhandle.0[..], [1, 0, 1, 0, 0, 0, 0, 0]);
            assert_eq!(ok.auth_flavors, vec![1]);
        }
        other => panic!("decoded {other:?}"),
    }
    // A refusal carries no body.
    match xdr::from_bytes::<Mountres3>(Bytes::from(words(&[13]))).unwrap() {
        Mountres3::Default { discriminant } => assert_eq!(discriminant, Mountstat3::Mnt3errAcces),
        other => panic!("decoded {other:?}"),
    }
}

#[test]
fn a_handle_longer_than_fhsize3_is_refused() {
    let reply = [&words(&[0, 65])[..], &[0; 68][..], &words(&[0])[..]].concat();
    assert!(xdr::from_bytes::<Mountres3>(Bytes::from(reply)).is_err());
}
