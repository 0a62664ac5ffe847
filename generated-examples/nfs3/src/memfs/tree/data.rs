//! A regular file's contents, stored sparsely: the logical size and the pages written, keyed
//! by index. A hole (a page never written, or the part of a page past its stored bytes) costs
//! nothing and reads as zeros, so a file of 4 GiB with a few bytes at its end holds only the
//! page those bytes are in (from the page's start to their end), and a small file costs what
//! it holds.
//!
//! Offsets are `u64` as on the wire; every sum of an offset and a length is checked, and no
//! offset is narrowed to `usize` but the position inside one page.

use std::collections::BTreeMap;

use crate::nfs3::Nfsstat3;

/// Bytes per page: a 1 MiB READ or WRITE touches at most 17 pages, each one copy.
pub const PAGE_SIZE: usize = 64 << 10;

/// [`PAGE_SIZE`] as a file offset.
const PAGE: u64 = PAGE_SIZE as u64;

/// The largest size a file may have, as FSINFO's maxfilesize reports it: what Linux's own
/// file systems report through knfsd (`s_maxbytes`, `i64::MAX`), so a client sees the same
/// limit as from the kernel's server. Independent of the capacity: holes cost nothing. A
/// write or SETATTR past it is NFS3ERR_FBIG (RFC 1813 section 2.6: "The operation would have
/// caused a file to grow beyond the server's limit"; section 3.3.7 lists it for WRITE).
pub const MAX_FILE_SIZE: u64 = i64::MAX as u64;

/// A regular file's bytes: its size and the pages that hold anything.
///
/// Invariants: no page is empty or longer than [`PAGE_SIZE`]; no page reaches past the size
/// (so bytes past a page's end up to the size are zeros); `stored` is the sum of the pages'
/// lengths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileData {
    size: u64,
    stored: u64,
    pages: BTreeMap<u64, Vec<u8>>,
}

/// The part of one page a range of bytes covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    /// The page's index.
    index: u64,
    /// The first byte in the page.
    start: usize,
    /// One past the last byte in the page.
    end: usize,
    /// Where the span starts in the caller's buffer.
    from: usize,
}

impl Span {
    fn len(&self) -> usize {
        self.end - self.start
    }
}

/// The pages `len` bytes from `offset` cover, in order. Stops early rather than overflow
/// (callers check `offset + len` first).
fn spans(offset: u64, len: usize) -> impl Iterator<Item = Span> {
    let mut done = 0usize;
    std::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let pos = offset.checked_add(done as u64)?;
        // The remainder is below PAGE_SIZE, so it fits a usize on every target.
        let start = (pos % PAGE) as usize;
        let n = (PAGE_SIZE - start).min(len - done);
        let span = Span {
            index: pos / PAGE,
            start,
            end: start + n,
            from: done,
        };
        done += n;
        Some(span)
    })
}

/// Makes room in `page` for `len` bytes (at most [`PAGE_SIZE`]), doubling its allocation as
/// appends need, but never past one page.
fn reserve_to(page: &mut Vec<u8>, len: usize) {
    if len > page.capacity() {
        let want = page.capacity().saturating_mul(2).min(PAGE_SIZE).max(len);
        page.reserve_exact(want - page.len());
    }
}

/// Writes `src` at `start` of `page`: over the bytes it holds, then appended, with zeros
/// between its end and `start` if the write begins past it. Nothing is zeroed only to be
/// overwritten.
fn write_page(page: &mut Vec<u8>, start: usize, src: &[u8]) {
    let end = start + src.len();
    let held = page.len().min(end);
    if held > start {
        page[start..held].copy_from_slice(&src[..held - start]);
    }
    if end > page.len() {
        reserve_to(page, end);
        page.resize(start.max(page.len()), 0);
        let written = page.len() - start;
        page.extend_from_slice(&src[written..]);
    }
}

impl FileData {
    /// An empty file.
    pub fn new() -> FileData {
        FileData::default()
    }

    /// The file's size in bytes (GETATTR's size).
    pub fn len(&self) -> u64 {
        self.size
    }

    /// True when the size is 0.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Bytes held in memory: what the pages store, holes excluded (GETATTR's used, and what
    /// counts against the file system's capacity).
    pub fn stored(&self) -> u64 {
        self.stored
    }

    /// Copies bytes from `offset` into `out`, holes as zeros: as many as `out` holds or the
    /// file has past `offset`, whichever is fewer. The count copied.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> usize {
        let available = self.size.saturating_sub(offset);
        let n = usize::try_from(available).map_or(out.len(), |a| a.min(out.len()));
        for span in spans(offset, n) {
            // In range: the spans cover out[..n] exactly.
            let dst = &mut out[span.from..span.from + span.len()];
            let page = self.pages.get(&span.index).map_or(&[][..], Vec::as_slice);
            // The page's bytes in the span, then zeros: past the page's end is a hole.
            let held = page.len().min(span.end);
            let copied = held.saturating_sub(span.start);
            if copied > 0 {
                dst[..copied].copy_from_slice(&page[span.start..held]);
            }
            dst[copied..].fill(0);
        }
        n
    }

    /// Writes `bytes` at `offset`, growing the file as needed; the bytes this adds to what
    /// is stored. Only the pages the bytes touch are allocated: a gap between the old end
    /// and `offset` stays a hole. Fails before changing anything: NFS3ERR_FBIG past
    /// [`MAX_FILE_SIZE`], NFS3ERR_NOSPC when the bytes to add exceed `room`. A write of no
    /// bytes changes nothing (as write(2) of 0 bytes).
    pub fn write(&mut self, offset: u64, bytes: &[u8], room: u64) -> Result<u64, Nfsstat3> {
        if bytes.is_empty() {
            return Ok(0);
        }
        let end = offset
            .checked_add(bytes.len() as u64)
            .filter(|end| *end <= MAX_FILE_SIZE)
            .ok_or(Nfsstat3::Nfs3errFbig)?;
        let more: u64 = spans(offset, bytes.len())
            .map(|s| s.end.saturating_sub(self.page_len(s.index)) as u64)
            .sum();
        if more > room {
            return Err(Nfsstat3::Nfs3errNospc);
        }
        for span in spans(offset, bytes.len()) {
            // In range: the spans cover `bytes` exactly, each within one page.
            let src = &bytes[span.from..span.from + span.len()];
            write_page(self.pages.entry(span.index).or_default(), span.start, src);
        }
        self.stored = self.stored.saturating_add(more);
        self.size = self.size.max(end);
        Ok(more)
    }

    /// Sets the size; the bytes this frees. Shrinking drops the pages past the new size and
    /// trims the last one, so growing again reads zeros, not the old bytes; growing allocates
    /// nothing (the new part is a hole). NFS3ERR_FBIG past [`MAX_FILE_SIZE`].
    pub fn set_len(&mut self, len: u64) -> Result<u64, Nfsstat3> {
        if len > MAX_FILE_SIZE {
            return Err(Nfsstat3::Nfs3errFbig);
        }
        let mut freed = 0u64;
        if len < self.size {
            // Pages from index ceil(len / PAGE) on lie wholly past the new size.
            let dropped = self.pages.split_off(&len.div_ceil(PAGE));
            freed += dropped.values().map(|p| p.len() as u64).sum::<u64>();
            let tail = (len % PAGE) as usize;
            if tail != 0 {
                if let Some(page) = self.pages.get_mut(&(len / PAGE)) {
                    if page.len() > tail {
                        freed += (page.len() - tail) as u64;
                        page.truncate(tail);
                        // Give memory back: a truncated page should not keep its buffer.
                        page.shrink_to_fit();
                    }
                }
            }
            self.stored = self.stored.saturating_sub(freed);
        }
        self.size = len;
        Ok(freed)
    }

    /// Bytes stored in page `index`.
    fn page_len(&self, index: u64) -> usize {
        self.pages.get(&index).map_or(0, Vec::len)
    }

    /// Checks the invariants, for tests.
    #[cfg(test)]
    pub(super) fn check(&self) -> Result<(), String> {
        let mut stored = 0u64;
        for (index, page) in &self.pages {
            if page.is_empty() || page.len() > PAGE_SIZE {
                return Err(format!("page {index} holds {} bytes", page.len()));
            }
            let end = index * PAGE + page.len() as u64;
            if end > self.size {
                return Err(format!(
                    "page {index} ends at {end}, past size {}",
                    self.size
                ));
            }
            stored += page.len() as u64;
        }
        if stored != self.stored {
            return Err(format!("{stored} bytes in pages, {} counted", self.stored));
        }
        Ok(())
    }
}
