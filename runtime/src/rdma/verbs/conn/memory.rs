//! Registrations and rekeying: a region's memory window, or its own key on a device without.

use super::*;

/// How often `rekey` replaced a window it could not know to be free (for tests).
#[cfg(test)]
pub(in crate::rdma::verbs) static WINDOW_REPLACEMENTS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

impl Inner {
    /// The verbs registration behind `mr`, if it belongs to this connection.
    pub(super) fn registration_of<'a>(&self, mr: &'a MemoryRegion) -> Result<&'a Registration> {
        let reg = mr.handle::<Registration>().ok_or_else(|| {
            Error::InvalidWorkRequest("the region was not registered by the verbs provider".into())
        })?;
        if reg.pd() != self.pd.raw() {
            return Err(Error::InvalidWorkRequest(
                "the region belongs to another connection's protection domain".into(),
            ));
        }
        Ok(reg)
    }

    /// The part of [`Connection::rekey`] done with the queues locked: frees the window if it
    /// may be bound, then posts the bind with a new key (`None` for `Access::NONE`: nothing
    /// to bind, the region is recorded unreachable here).
    pub(super) fn rekey_locked(
        &self,
        q: &mut Queues,
        reg: &Registration,
        slot: &mut Window,
        mr: &MemoryRegion,
        remote: Access,
    ) -> Result<Option<(u64, u32)>> {
        if slot.key().is_some_and(|key| self.bound.contains(key)) {
            // The window may be bound. It cannot be bound again before it is invalidated
            // (o10-37.2.30: rxe fails such a bind and the connection with it), and it may
            // just as well be free already, by a peer's Send with Invalidate whose completion
            // has not arrived: invalidating a free window is an error on a device, and a
            // kernel oops on Linux 6.1 rxe. A new window is free for sure; deallocating the
            // old one revokes its key at once, whatever its state.
            reg.replace_window(slot)?;
            #[cfg(test)]
            WINDOW_REPLACEMENTS.fetch_add(1, Ordering::SeqCst);
        }
        if !remote.is_remote() {
            // A free window grants nothing: its key resolves to nothing.
            mr.set_remote_key(slot.key().unwrap_or(mr.rkey()), Access::NONE);
            return Ok(None);
        }
        reg.refill_window(slot)?;
        let key = slot
            .key()
            .ok_or_else(|| Error::InvalidWorkRequest("the region has no memory window".into()))?;
        // SAFETY: a pure function of the key (a new key byte, the same window index).
        let rkey = unsafe { ibv_inc_rkey(key) };
        let seq = self.post_bind_locked(q, reg, slot, mr.as_mut_ptr(), mr.len(), remote, rkey)?;
        Ok(Some((seq, rkey)))
    }

    /// [`Connection::rekey`] while establishing: nothing can be posted yet and the window was
    /// never bound, so the rekey changes the key and rights of the bind made at establishment
    /// (or drops it, for `Access::NONE`).
    pub(super) fn rekey_pending(&self, mr: &MemoryRegion, remote: Access) -> Result<()> {
        let mut q = self.lock();
        q.pending_binds.retain(|(region, _)| !region.ptr_eq(mr));
        if remote.is_remote() {
            // SAFETY: a pure function of the key.
            let rkey = unsafe { ibv_inc_rkey(mr.rkey()) };
            q.pending_binds.push((mr.clone(), remote));
            mr.set_remote_key(rkey, remote);
        } else {
            mr.set_remote_key(mr.rkey(), Access::NONE);
        }
        Ok(())
    }
}

impl Inner {
    /// Registers `buf` with `access` ([`Connection::register`]).
    pub(super) fn register_memory(
        &self,
        buf: RegionMemory,
        access: Access,
    ) -> Result<MemoryRegion> {
        if buf.is_empty() {
            return Err(Error::InvalidWorkRequest(
                "cannot register an empty buffer".into(),
            ));
        }
        // While establishing, the send queue cannot take the window bind yet: the key is
        // chosen now and the bind posted at establishment, before the peer can learn the key.
        let defer = self.state.establishing.load(Ordering::SeqCst);
        let region = MemoryRegion::register_with(buf, access, |addr, len| {
            // SAFETY: MemoryRegion keeps the buffer in place until the handle (this
            // registration) is dropped, which happens before the buffer is freed.
            let windows = self.shape.windows;
            let mut reg =
                unsafe { Registration::new(&self.pd, addr, len, mr_access(access, windows))? };
            self.registered.track(&reg);
            let rkey = if access.is_remote() && windows {
                let mw = reg.alloc_window(&self.bound)?;
                // SAFETY: `mw` was just allocated. A type-2 window gets a new key per bind.
                let rkey = unsafe { ibv_inc_rkey((*mw).rkey) };
                if !defer {
                    // The window lock first, then the queues' (as in `rekey`).
                    let mut slot = reg.window();
                    let seq = self.post_bind_locked(
                        &mut self.lock(),
                        &reg,
                        &mut slot,
                        addr,
                        len,
                        access,
                        rkey,
                    )?;
                    drop(slot);
                    self.wait_bind(seq)?;
                }
                rkey
            } else {
                if access.is_remote() {
                    reg.track_plain(&self.plain);
                }
                reg.rkey()
            };
            let keys = RegionKeys {
                lkey: reg.lkey(),
                rkey,
                addr: addr as u64,
            };
            Ok((keys, reg))
        })?;
        if defer && access.is_remote() && self.shape.windows {
            self.lock().pending_binds.push((region.clone(), access));
        }
        Ok(region)
    }
}
