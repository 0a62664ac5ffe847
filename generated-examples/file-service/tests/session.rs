//! The scripted session of file-demo, checked: every result, how every call and reply moved,
//! and that no bulk byte was copied on its way to or from the wire.

mod common;

use file_service::movement::{CallMove, ReplyMove};
use file_service::session::{self, pattern, Step, BIG, BIG_LEN, HELLO, SMALL_LEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_moves_as_the_protocol_says_and_every_result_checks() {
    common::count_panics();
    let dir = tempfile::tempdir().unwrap();
    session::populate(dir.path()).unwrap();
    let s = common::start(dir.path()).await;
    let steps = session::run(&s.files, &s.meter, |_| {}).await.unwrap();

    use CallMove::{Inline as CallInline, Long, ReadChunk};
    use ReplyMove::{Inline as ReplyInline, ReplyChunk, WriteChunk};
    let expected = [
        ("null", CallInline, ReplyInline),
        ("lookup", CallInline, ReplyInline),
        ("getattr", CallInline, ReplyInline),
        // A 4 KiB result fits the client's receive buffer: no Write chunk is provided.
        ("read-small", CallInline, ReplyInline),
        ("create", CallInline, ReplyInline),
        ("write-1m", ReadChunk, ReplyInline),
        ("read-1m", CallInline, WriteChunk),
        // DDP-eligible, but it fits the server's receive buffer and is under min_ddp_size.
        ("write-small", CallInline, ReplyInline),
        // The Write chunk provided goes back unused.
        ("read-eof", CallInline, ReplyInline),
        ("read-into", CallInline, WriteChunk),
        ("list", CallInline, ReplyChunk),
        ("remove", Long, ReplyInline),
        ("list-after", CallInline, ReplyChunk),
    ];
    let keys: Vec<&str> = steps.iter().map(|s| s.key).collect();
    let expected_keys: Vec<&str> = expected.iter().map(|e| e.0).collect();
    assert_eq!(keys, expected_keys);
    for (step, (key, call, reply)) in steps.iter().zip(expected) {
        assert_eq!(step.check, Ok(()), "{key}");
        assert_eq!(step.movement.call, Some(call), "{key}: {step:?}");
        assert_eq!(step.movement.reply, Some(reply), "{key}: {step:?}");
    }

    let step = |key: &str| -> &Step { steps.iter().find(|s| s.key == key).unwrap() };
    // The 1 MiB WRITE left a registered buffer, the READs were filled into one by the server
    // and landed in the client's: RDMA moved every byte, nobody copied one.
    for (key, len) in [
        ("write-1m", BIG_LEN),
        ("read-1m", BIG_LEN),
        ("read-into", BIG_LEN + SMALL_LEN),
    ] {
        let m = step(key).movement;
        assert_eq!((m.zero_copy, m.copied), (len as u64, 0), "{key}");
    }
    // The listing is longer than the client's receive buffer; the REMOVE call too.
    let receive_buffer = rpcrdma::transport::RdmaConfig::default().inline_size;
    assert!(step("list").reply_bytes > receive_buffer);
    assert!(step("remove").call_bytes > receive_buffer);

    // What the server's directory holds, read without RPC.
    let mut big = pattern(BIG_LEN, 7);
    big.extend(pattern(SMALL_LEN, 9));
    assert_eq!(std::fs::read(dir.path().join(BIG)).unwrap(), big);
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, [BIG, HELLO]);
    assert_eq!(common::panics(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_write_and_read_move_by_chunks() {
    use file_service::{LookupArgs, ReadArgs, WriteArgs, FILES_MAXIO};
    let dir = tempfile::tempdir().unwrap();
    let s = common::start(dir.path()).await;
    let len = FILES_MAXIO as usize;
    let h = s
        .files
        .create(&LookupArgs {
            name: "max.bin".into(),
        })
        .await
        .unwrap()
        .handle;
    let data = pattern(len, 3);
    let write = WriteArgs {
        handle: h,
        offset: 0,
        data: data.clone().into(),
    };
    let before = s.meter.snapshot();
    assert_eq!(s.files.write(&write).await.unwrap().count as usize, len);
    let m = before.movement(&s.meter.snapshot());
    assert_eq!(m.call, Some(CallMove::ReadChunk));
    // Plain memory, not a registered buffer: copied once into one.
    assert_eq!(m.copied, len as u64);
    // `Files::read` provides a Write chunk of `count` bytes (the default is 1 MiB).
    let read = ReadArgs {
        handle: h,
        offset: 0,
        count: FILES_MAXIO,
    };
    let before = s.meter.snapshot();
    let ok = s.files.read(&read).await.unwrap();
    let m = before.movement(&s.meter.snapshot());
    assert_eq!(m.reply, Some(ReplyMove::WriteChunk));
    assert_eq!((m.zero_copy, m.copied), (len as u64, 0));
    assert!(ok.eof);
    assert!(ok.data == data, "data differs");
}
