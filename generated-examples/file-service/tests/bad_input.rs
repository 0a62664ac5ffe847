//! Bad input gets a status or an RPC error, never a panic, and the server keeps serving:
//! unknown and stale handles, names that would leave the directory, symbolic links, counts
//! and offsets over the limits, a name over the declared bound.

mod common;

use std::path::Path;

use bytes::Bytes;
use file_service::client::{Error, Files};
use file_service::server::MAX_FILE_SIZE;
use file_service::*;
use rpcrdma::rpc;
use rpcrdma::xdr::XdrString;

async fn setup() -> (tempfile::TempDir, common::Setup) {
    common::count_panics();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("root")).unwrap();
    std::fs::write(dir.path().join("root/a.txt"), b"a").unwrap();
    std::fs::write(dir.path().join("secret"), b"outside").unwrap();
    let s = common::start(&dir.path().join("root")).await;
    (dir, s)
}

fn status<T: std::fmt::Debug>(r: Result<T, Error>) -> FilesStatus {
    match r {
        Err(Error::Status(s)) => s,
        other => panic!("expected a status, got {other:?}"),
    }
}

fn lookup(name: &str) -> LookupArgs {
    LookupArgs { name: name.into() }
}

async fn still_serving(files: &Files) {
    files.null().await.unwrap();
    assert_eq!(files.lookup(&lookup("a.txt")).await.unwrap().attr.size, 1);
    assert_eq!(common::panics(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_stale_handles_are_badhandle() {
    let (_dir, s) = setup().await;
    let f = &s.files;
    let bad = 0xdead_beef;
    assert_eq!(status(f.getattr(bad).await), FilesStatus::FilesErrBadhandle);
    let read = ReadArgs {
        handle: bad,
        offset: 0,
        count: 10,
    };
    assert_eq!(status(f.read(&read).await), FilesStatus::FilesErrBadhandle);
    let write = WriteArgs {
        handle: bad,
        offset: 0,
        data: Bytes::from_static(&[1; 5000]),
    };
    assert_eq!(
        status(f.write(&write).await),
        FilesStatus::FilesErrBadhandle
    );

    let b = f.create(&lookup("b.txt")).await.unwrap();
    let remove = RemoveArgs {
        names: vec!["b.txt".into()],
    };
    assert_eq!(f.remove(&remove).await.unwrap(), 1);
    assert_eq!(
        status(f.getattr(b.handle).await),
        FilesStatus::FilesErrBadhandle
    );
    still_serving(f).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_leave_the_directory_are_inval() {
    let (dir, s) = setup().await;
    let f = &s.files;
    for name in [
        "../secret",
        "..",
        ".",
        "",
        "x/../../secret",
        "/etc/passwd",
        "a\0b",
    ] {
        assert_eq!(
            status(f.lookup(&lookup(name)).await),
            FilesStatus::FilesErrInval,
            "{name:?}"
        );
        assert_eq!(
            status(f.create(&lookup(name)).await),
            FilesStatus::FilesErrInval,
            "{name:?}"
        );
    }
    assert_eq!(
        std::fs::read(dir.path().join("secret")).unwrap(),
        b"outside"
    );
    // Not UTF-8.
    let name = Filename(XdrString::from(Bytes::from_static(b"\xff\xfe")));
    let args = LookupArgs { name };
    assert_eq!(status(f.lookup(&args).await), FilesStatus::FilesErrInval);
    // A REMOVE stops at the first bad name; those before it are gone.
    std::fs::write(dir.path().join("root/c.txt"), b"c").unwrap();
    std::fs::write(dir.path().join("root/d.txt"), b"d").unwrap();
    let remove = RemoveArgs {
        names: vec!["c.txt".into(), "../secret".into(), "d.txt".into()],
    };
    let res = f.typed().files_remove(remove).await.unwrap();
    assert_eq!((res.status, res.removed), (FilesStatus::FilesErrInval, 1));
    assert!(!dir.path().join("root/c.txt").exists());
    assert!(dir.path().join("root/d.txt").exists());
    assert!(dir.path().join("secret").exists());
    // It stops as well at the first name that cannot be removed.
    std::fs::write(dir.path().join("root/e.txt"), b"e").unwrap();
    let remove = RemoveArgs {
        names: vec!["d.txt".into(), "gone.txt".into(), "e.txt".into()],
    };
    let res = f.typed().files_remove(remove).await.unwrap();
    assert_eq!((res.status, res.removed), (FilesStatus::FilesErrNoent, 1));
    assert!(!dir.path().join("root/d.txt").exists());
    assert!(dir.path().join("root/e.txt").exists());
    still_serving(f).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symbolic_links_and_directories_are_not_served() {
    let (dir, s) = setup().await;
    let f = &s.files;
    let root = dir.path().join("root");
    std::os::unix::fs::symlink(dir.path().join("secret"), root.join("link")).unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    for name in ["link", "sub"] {
        assert_eq!(
            status(f.lookup(&lookup(name)).await),
            FilesStatus::FilesErrInval,
            "{name}"
        );
    }
    assert_eq!(
        status(f.lookup(&lookup("missing")).await),
        FilesStatus::FilesErrNoent
    );
    assert_eq!(
        status(f.create(&lookup("a.txt")).await),
        FilesStatus::FilesErrExist
    );
    let list = f
        .list(&ListArgs {
            cookie: 0,
            count: 100,
        })
        .await
        .unwrap();
    let names: Vec<_> = list
        .entries
        .iter()
        .map(|e| e.name.as_str().unwrap())
        .collect();
    assert_eq!(names, ["a.txt"]);
    // A file swapped for a link after its LOOKUP is not followed either.
    let h = f.create(&lookup("swap")).await.unwrap().handle;
    std::fs::remove_file(root.join("swap")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret"), root.join("swap")).unwrap();
    let read = ReadArgs {
        handle: h,
        offset: 0,
        count: 100,
    };
    assert_eq!(status(f.read(&read).await), FilesStatus::FilesErrInval);
    still_serving(f).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_and_offsets_over_the_limits_are_fbig() {
    let (dir, s) = setup().await;
    let f = &s.files;
    let h = f.lookup(&lookup("a.txt")).await.unwrap().handle;
    for count in [FILES_MAXIO + 1, u32::MAX] {
        let read = ReadArgs {
            handle: h,
            offset: 0,
            count,
        };
        // Through the generated client (a Write chunk of the default size) and through
        // `Files::read` (a Write chunk of FILES_MAXIO).
        let res = f.typed().files_read(read).await.unwrap();
        assert_eq!(res.into_result().unwrap_err(), FilesStatus::FilesErrFbig);
        assert_eq!(status(f.read(&read).await), FilesStatus::FilesErrFbig);
    }
    for offset in [MAX_FILE_SIZE, u64::MAX - 1, u64::MAX] {
        let write = WriteArgs {
            handle: h,
            offset,
            data: Bytes::from_static(b"xy"),
        };
        assert_eq!(
            status(f.write(&write).await),
            FilesStatus::FilesErrFbig,
            "{offset}"
        );
    }
    assert_eq!(
        std::fs::metadata(dir.path().join("root/a.txt"))
            .unwrap()
            .len(),
        1
    );
    // Reads past the end and listings past the last entry are empty, not errors.
    let read = ReadArgs {
        handle: h,
        offset: u64::MAX,
        count: 10,
    };
    let ok = f.read(&read).await.unwrap();
    assert!(ok.eof && ok.data.is_empty());
    let list = f
        .list(&ListArgs {
            cookie: u64::MAX,
            count: u32::MAX,
        })
        .await
        .unwrap();
    assert!(list.eof && list.entries.is_empty());
    still_serving(f).await;
}

/// FILES_LOOKUP with an unbounded string argument, to send what the generated client refuses.
struct LookupUnbounded;

impl rpcrdma::xdr::Procedure for LookupUnbounded {
    const PROGRAM: u32 = files_prog::PROGRAM;
    const VERSION: u32 = files_v1::VERSION;
    const PROCEDURE: u32 = 1;
    const NAME: &'static str = "FILES_LOOKUP";
    type Args = XdrString;
    type Result = LookupRes;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_over_the_bound_is_garbage_args() {
    let (_dir, s) = setup().await;
    let f = &s.files;
    let long = "n".repeat(FILES_MAXNAMELEN as usize + 1);
    // The generated encoder refuses it...
    let err = f.lookup(&lookup(&long)).await.unwrap_err();
    assert!(matches!(err, Error::Rpc(rpc::Error::Encode(_))), "{err}");
    // ...and the generated decoder at the server too.
    let err = f
        .typed()
        .rpc()
        .call::<LookupUnbounded>(&XdrString::from(long))
        .await
        .unwrap_err();
    assert!(matches!(err, rpc::Error::GarbageArgs), "{err}");
    still_serving(f).await;
}

#[test]
fn the_spec_marks_exactly_the_bulk_data() {
    let marks: Vec<&str> = SPEC
        .lines()
        .zip(SPEC.lines().skip(1))
        .filter(|(l, _)| l.trim() == "/* @ddp */")
        .map(|(_, next)| next.trim())
        .collect();
    assert_eq!(marks, ["opaque data<FILES_MAXIO>;"; 2]);
    assert!(Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("files.x")
        .exists());
}
