//! The in-memory server's NFS program over ONC RPC on TCP (what `nfs3-server --tcp-port`
//! adds): the same files as over RDMA, so a client can tell a transport problem from an NFS
//! one.

mod memfs_helpers;

use std::sync::Arc;

use bytes::Bytes;
use memfs_helpers::*;
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer};
use rpcrdma_nfs3::memfs::{MemFs, MemFsConfig};
use rpcrdma_nfs3::nfs3::*;

#[tokio::test]
async fn write_read_and_list_over_tcp() {
    let fs = Arc::new(MemFs::new(MemFsConfig::new("/export")));
    let tcp = TcpServer::bind("127.0.0.1:0", fs.nfs_server(), TcpConfig::new())
        .await
        .expect("listen");
    let nfs = as_root(
        rpcrdma::rpc::tcp::connect(tcp.local_addr())
            .await
            .expect("connect"),
    );
    let root = fs.root_handle();
    let file = create(&nfs, &root, "over-tcp").await;
    let data = Bytes::from(pattern(0, 1 << 20));
    assert_eq!(
        write(&nfs, &file, 0, data.clone()).await.status(),
        Nfsstat3::Nfs3Ok
    );
    match nfs
        .nfsproc3_read(Read3args {
            file: file.clone(),
            offset: 0,
            count: 1 << 20,
        })
        .await
        .expect("READ call")
    {
        Read3res::Nfs3Ok(ok) => {
            assert!(ok.eof);
            assert!(ok.data == data, "the bytes read are the bytes written");
        }
        other => panic!("READ: {other:?}"),
    }
    let res = nfs
        .nfsproc3_readdirplus(Readdirplus3args {
            dir: root,
            cookie: 0,
            cookieverf: Cookieverf3(Bytes::from_static(&[0; 8])),
            dircount: 4096,
            maxcount: 4096,
        })
        .await
        .expect("READDIRPLUS call");
    let Readdirplus3res::Nfs3Ok(ok) = res else {
        panic!("READDIRPLUS: {res:?}");
    };
    let names: Vec<&[u8]> = ok.reply.entries.iter().map(|e| e.name.as_bytes()).collect();
    assert_eq!(names, [&b"."[..], b"..", b"over-tcp"]);
    assert!(ok.reply.eof);
    tcp.shutdown().await;
}
