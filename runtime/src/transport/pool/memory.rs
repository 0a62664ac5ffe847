//! The pool as the core's [`Memory`]: buffers lent for chunks and sinks, within the
//! connection's budget.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{buffer_sizes, class_of, Pool, PoolBuf};
use crate::rdma::{Access, Connection};
use crate::transport::budget::Shortage;
use crate::transport::core::{Memory, MemoryError, MemoryErrorKind, Slice};

impl<C: Connection> Memory for &Pool<C> {
    type Buf = PoolBuf;

    fn alloc(&mut self, len: usize, remote: Access) -> Result<Vec<Slice<PoolBuf>>, MemoryError> {
        buffer_sizes(len, self.shared.config.max_buffer)
            .map(|n| {
                Ok(Slice {
                    buf: self.checkout(n, remote)?,
                    offset: 0,
                    len: n,
                })
            })
            .collect()
    }

    fn alloc_sinks(&mut self, lens: &[usize]) -> Result<Vec<Vec<Slice<PoolBuf>>>, MemoryError> {
        let max = self.shared.config.max_buffer;
        let class_size = |n: usize| class_of(n, max).1;
        let total: usize = lens
            .iter()
            .flat_map(|&len| buffer_sizes(len, max))
            .map(class_size)
            .sum();
        let budget = &self.shared.budget;
        let mut charge = budget.try_charge(total).map_err(|shortage| {
            let kind = match shortage {
                Shortage::Now => MemoryErrorKind::Exhausted,
                Shortage::Never => MemoryErrorKind::TooLarge,
            };
            MemoryError::new(
                kind,
                format!("{total} bytes of Read chunk sinks over the memory budget ({budget:?})"),
            )
        })?;
        lens.iter()
            .map(|&len| {
                buffer_sizes(len, max)
                    .map(|n| {
                        let part = charge.split(class_size(n));
                        Ok(Slice {
                            buf: self.checkout_charged(n, Access::NONE, part)?,
                            offset: 0,
                            len: n,
                        })
                    })
                    .collect()
            })
            .collect()
    }

    fn max_piece(&self) -> usize {
        self.shared.config.max_buffer
    }

    fn keep_received(&self, _len: usize) -> bool {
        // Past half of a budget (this connection's or any parent's), what a handler keeps
        // would start to crowd out the Read chunks of the calls to come.
        self.shared.budget.below_half()
    }

    fn copied_out(&mut self, bytes: usize) {
        self.shared
            .counters
            .copied_out_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    fn source(
        &mut self,
        parts: &[Bytes],
        remote: Access,
    ) -> Result<Vec<Slice<PoolBuf>>, MemoryError> {
        if let [one] = parts {
            if let Some((buf, offset)) = self.find(one) {
                // Only one message may advertise a buffer at a time: its tag is that
                // message's to invalidate.
                let shareable = !remote.is_remote()
                    || !buf.0.exposed.load(Ordering::Acquire)
                    || buf.0.invalidated.load(Ordering::Acquire);
                let reachable = !remote.is_remote()
                    || self.can_rekey()
                    || (shareable && self.expose_once(&buf, remote));
                if shareable && reachable {
                    if remote.is_remote() && self.can_rekey() {
                        self.rekey(&buf, remote)?;
                    }
                    self.shared
                        .counters
                        .zero_copy_bytes
                        .fetch_add(one.len() as u64, Ordering::Relaxed);
                    return Ok(vec![Slice {
                        buf,
                        offset,
                        len: one.len(),
                    }]);
                }
            }
        }
        let total: usize = parts.iter().map(Bytes::len).sum();
        let slices = self.alloc(total, remote)?;
        let mut part = 0usize;
        let mut in_part = 0usize;
        for s in &slices {
            let mut filled = 0;
            s.buf.region().with_mut_slice(|dst| {
                while filled < s.len && part < parts.len() {
                    let src = &parts[part][in_part..];
                    let n = src.len().min(s.len - filled);
                    dst[s.offset + filled..s.offset + filled + n].copy_from_slice(&src[..n]);
                    filled += n;
                    in_part += n;
                    if in_part == parts[part].len() {
                        part += 1;
                        in_part = 0;
                    }
                }
            });
        }
        self.shared
            .counters
            .copied_bytes
            .fetch_add(total as u64, Ordering::Relaxed);
        Ok(slices)
    }

    fn expect_write(&mut self, slices: &[Slice<PoolBuf>]) {
        for s in slices {
            self.shared.conn.expect_write(s.buf.region());
        }
    }

    fn expose(&mut self, slices: &[Slice<PoolBuf>], remote: Access) -> Result<(), MemoryError> {
        if !self.can_rekey() {
            if slices.iter().all(|s| self.expose_once(&s.buf, remote)) {
                return Ok(());
            }
            return Err(MemoryError::failed(
                "the provider cannot rekey, and an application buffer is exposed once: this \
                 one was exposed before (take a fresh buffer for each call)",
            ));
        }
        for s in slices {
            self.rekey(&s.buf, remote)?;
        }
        Ok(())
    }
}

/// The pool as [`Memory`] for a core fed from inside a provider's lock (a received message
/// read in place from its receive buffer): hints to the provider
/// ([`Memory::expect_write`]), which take the provider's own locks, wait in `hints` until
/// [`HintsLater::finish`], after that lock is released.
pub(crate) struct HintsLater<'a, C: Connection> {
    pool: &'a Pool<C>,
    hints: Vec<Slice<PoolBuf>>,
}

impl<'a, C: Connection> HintsLater<'a, C> {
    pub(crate) fn new(pool: &'a Pool<C>) -> HintsLater<'a, C> {
        HintsLater {
            pool,
            hints: Vec::new(),
        }
    }

    /// Gives the provider the hints held back.
    pub(crate) fn finish(self) {
        if !self.hints.is_empty() {
            (&mut &*self.pool).expect_write(&self.hints);
        }
    }
}

impl<C: Connection> Memory for HintsLater<'_, C> {
    type Buf = PoolBuf;

    fn alloc(&mut self, len: usize, remote: Access) -> Result<Vec<Slice<PoolBuf>>, MemoryError> {
        (&mut &*self.pool).alloc(len, remote)
    }

    fn source(
        &mut self,
        parts: &[Bytes],
        remote: Access,
    ) -> Result<Vec<Slice<PoolBuf>>, MemoryError> {
        (&mut &*self.pool).source(parts, remote)
    }

    fn expose(&mut self, slices: &[Slice<PoolBuf>], remote: Access) -> Result<(), MemoryError> {
        (&mut &*self.pool).expose(slices, remote)
    }

    fn alloc_sinks(&mut self, lens: &[usize]) -> Result<Vec<Vec<Slice<PoolBuf>>>, MemoryError> {
        (&mut &*self.pool).alloc_sinks(lens)
    }

    fn max_piece(&self) -> usize {
        (&self.pool).max_piece()
    }

    fn keep_received(&self, len: usize) -> bool {
        (&self.pool).keep_received(len)
    }

    fn copied_out(&mut self, bytes: usize) {
        (&mut &*self.pool).copied_out(bytes)
    }

    fn expect_write(&mut self, slices: &[Slice<PoolBuf>]) {
        self.hints.extend_from_slice(slices);
    }
}
