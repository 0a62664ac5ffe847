//! `--transfer`: a long write through failures, then every byte read back.

use super::*;

/// Bytes of the file at `offset..offset + len`: a function of the offset alone, so a
/// piece written again is the same piece.
fn piece(offset: u64, len: usize) -> Vec<u8> {
    (offset..offset + len as u64)
        .map(|i| ((i.wrapping_mul(2_654_435_761) >> 13) as u8) ^ (i >> 20) as u8)
        .collect()
}

/// The calls that failed, and the first and last reason.
#[derive(Default)]
struct Failures {
    count: usize,
    first: Option<String>,
    last: Option<String>,
}

impl Failures {
    fn note(&mut self, what: &str, why: String) {
        if self.count == 0 {
            println!("transfer: {what} failed: {why} (sending it again until it succeeds)");
            self.first = Some(why.clone());
        }
        self.count += 1;
        self.last = Some(why);
    }
}

/// Runs `call` until it succeeds or `deadline` passes, one try a second.
async fn retrying<T, F, Fut>(
    what: &str,
    deadline: std::time::Instant,
    failures: &mut Failures,
    mut call: F,
) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    loop {
        match call().await {
            Ok(v) => return Ok(v),
            Err(why) => {
                failures.note(what, why.clone());
                if std::time::Instant::now() > deadline {
                    return Err(format!("{what}: still failing ({why})"));
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

pub(super) async fn run(
    nfs: &NfsV3Client,
    root: &NfsFh3,
    name: &str,
    args: &Args,
) -> Result<usize, String> {
    let fh = match lookup(nfs, root, name).await {
        Ok((fh, _)) => fh,
        Err(_) => create(nfs, root, name).await?,
    };
    let io = args.io_size as usize;
    let total = args.transfer_mib << 20;
    let deadline = || std::time::Instant::now() + Duration::from_secs(args.retry_for);
    let mut failures = Failures::default();
    let mut offset = 0u64;
    let mut recovered_at = None;
    while offset < total {
        let len = io.min((total - offset) as usize);
        let data = Bytes::from(piece(offset, len));
        let before = failures.count;
        let what = format!("WRITE at {offset}");
        retrying(&what, deadline(), &mut failures, || async {
            match nfs
                .nfsproc3_write(Write3args {
                    file: fh.clone(),
                    offset,
                    count: len as u32,
                    stable: StableHow::FileSync,
                    data: data.clone(),
                })
                .await
                .map_err(|e| e.to_string())?
            {
                Write3res::Nfs3Ok(ok) if ok.count as usize == len => Ok(()),
                Write3res::Nfs3Ok(ok) => Err(format!("short WRITE: {} of {len}", ok.count)),
                Write3res::Default { discriminant, .. } => Err(format!("{discriminant:?}")),
            }
        })
        .await?;
        if failures.count > before {
            println!(
                "transfer: WRITE at {offset} succeeded after {} failed tries",
                failures.count - before
            );
            recovered_at.get_or_insert(offset);
        }
        offset += len as u64;
        if offset % (16 << 20) == 0 {
            println!("transfer: {} MiB written", offset >> 20);
        }
    }
    let mut mismatched = 0;
    offset = 0;
    while offset < total {
        let len = io.min((total - offset) as usize);
        let what = format!("READ at {offset}");
        let data = retrying(&what, deadline(), &mut failures, || async {
            match nfs
                .nfsproc3_read(Read3args {
                    file: fh.clone(),
                    offset,
                    count: len as u32,
                })
                .await
                .map_err(|e| e.to_string())?
            {
                Read3res::Nfs3Ok(ok) => Ok(ok.data),
                Read3res::Default { discriminant, .. } => Err(format!("{discriminant:?}")),
            }
        })
        .await?;
        if data[..] != piece(offset, len)[..] {
            println!("transfer: MISMATCH in {len} bytes at {offset}");
            mismatched += 1;
        }
        offset += len as u64;
    }
    println!(
        "transfer: {} MiB written and read back, {} piece(s) differ; {} call(s) failed on \
         the way{}",
        total >> 20,
        mismatched,
        failures.count,
        match (&failures.first, &failures.last, recovered_at) {
            (Some(first), Some(last), Some(at)) =>
                format!(" (first: {first}; last: {last}; writing went on at offset {at})"),
            (Some(first), _, _) => format!(" (first: {first})"),
            _ => String::new(),
        }
    );
    let mut failed = mismatched;
    if args.expect_interruption && failures.count == 0 {
        println!("transfer: FAIL no call failed, but the transfer was meant to be interrupted");
        failed += 1;
    }
    Ok(failed)
}
