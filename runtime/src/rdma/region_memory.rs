//! The memory behind a registration: a heap buffer, or pages mapped for it alone.
//!
//! Registered buffers are large and long-lived, and a connection's pool frees them in bursts
//! (when the connection closes). Memory from the allocator does not always go back to the
//! operating system then: glibc serves a large allocation with its own mapping only until a
//! freed one raises its threshold, after which the same sizes come from the heap, where freed
//! memory stays in the process (and `calloc` zeroes it by writing every page). A buffer of
//! [`MAPPED_FROM`] bytes or more is therefore mapped on its own (`mmap`), zeroed by the kernel
//! only where it is touched, and unmapped when the registration goes: what a connection
//! registered leaves the process's resident memory when it closes, whatever the allocator.

use std::ptr::NonNull;

/// Buffers at least this long are mapped on their own ([`RegionMemory::zeroed`]).
pub const MAPPED_FROM: usize = 64 << 10;

/// Memory a [`MemoryRegion`](super::MemoryRegion) owns.
pub struct RegionMemory(Kind);

enum Kind {
    Heap(Box<[u8]>),
    Mapped { ptr: NonNull<u8>, len: usize },
}

// SAFETY: the mapping is owned exclusively, like a `Box<[u8]>`.
unsafe impl Send for RegionMemory {}
// SAFETY: as above; shared access only reads through `&self`.
unsafe impl Sync for RegionMemory {}

impl RegionMemory {
    /// `len` zeroed bytes: mapped on their own from [`MAPPED_FROM`] bytes on (falling back to
    /// the heap if the mapping fails), from the heap below.
    pub fn zeroed(len: usize) -> RegionMemory {
        if len >= MAPPED_FROM {
            if let Some(mapped) = map(len) {
                return mapped;
            }
        }
        RegionMemory(Kind::Heap(vec![0; len].into_boxed_slice()))
    }

    /// True when the memory is a mapping of its own.
    pub fn is_mapped(&self) -> bool {
        matches!(self.0, Kind::Mapped { .. })
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        match &self.0 {
            Kind::Heap(b) => b.len(),
            Kind::Mapped { len, .. } => *len,
        }
    }

    /// True for zero bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first byte; stable for the memory's life.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        match &mut self.0 {
            Kind::Heap(b) => b.as_mut_ptr(),
            Kind::Mapped { ptr, .. } => ptr.as_ptr(),
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            Kind::Heap(b) => b,
            // SAFETY: a live mapping of `len` readable bytes, owned by `self`.
            Kind::Mapped { ptr, len } => unsafe { std::slice::from_raw_parts(ptr.as_ptr(), *len) },
        }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        match &mut self.0 {
            Kind::Heap(b) => b,
            // SAFETY: a live mapping of `len` writable bytes, owned by `self`.
            Kind::Mapped { ptr, len } => unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr(), *len)
            },
        }
    }

    /// The bytes as a vector (a copy for mapped memory).
    pub fn into_vec(mut self) -> Vec<u8> {
        match std::mem::replace(&mut self.0, Kind::Heap(Box::default())) {
            Kind::Heap(b) => b.into_vec(),
            mapped => RegionMemory(mapped).as_slice().to_vec(),
        }
    }
}

impl std::ops::Deref for RegionMemory {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::ops::DerefMut for RegionMemory {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl From<Vec<u8>> for RegionMemory {
    fn from(buf: Vec<u8>) -> RegionMemory {
        RegionMemory(Kind::Heap(buf.into_boxed_slice()))
    }
}

impl Drop for RegionMemory {
    fn drop(&mut self) {
        if let Kind::Mapped { ptr, len } = self.0 {
            // SAFETY: the mapping was made by `map` with this length and is unmapped once.
            unsafe { libc::munmap(ptr.as_ptr().cast(), len) };
        }
    }
}

fn map(len: usize) -> Option<RegionMemory> {
    // SAFETY: an anonymous private mapping of `len` bytes at an address the kernel picks.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return None;
    }
    let ptr = NonNull::new(addr.cast::<u8>())?;
    Some(RegionMemory(Kind::Mapped { ptr, len }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_memory_is_mapped_zeroed_and_writable() {
        let mut m = RegionMemory::zeroed(MAPPED_FROM);
        assert!(m.is_mapped());
        assert!(m.as_slice().iter().all(|&b| b == 0));
        m.as_mut_slice()[MAPPED_FROM - 1] = 7;
        assert_eq!(m.into_vec()[MAPPED_FROM - 1], 7);
    }

    #[test]
    fn small_memory_comes_from_the_heap() {
        let m = RegionMemory::zeroed(MAPPED_FROM - 1);
        assert!(!m.is_mapped());
        assert_eq!(m.len(), MAPPED_FROM - 1);
        assert_eq!(RegionMemory::from(vec![1, 2]).into_vec(), vec![1, 2]);
    }
}
