//! Buffers for DDP-eligible data that a handler fills (a file read straight into it) or a
//! caller receives into, so that over RPC-over-RDMA no payload byte is copied between the
//! application and the wire.
//!
//! A transport hands them out through its [`BufferSource`]: the RDMA transport from the
//! connection's registered pool, TCP from ordinary memory. The application only sees a
//! [`RegisteredBuffer`]: fill it, then [`freeze`](RegisteredBuffer::freeze) it into the
//! [`Bytes`] of a DDP-eligible field. A transport recognises its own memory when that field is
//! sent and moves it without a copy; anything else is copied once into registered memory.

use std::any::Any;
use std::fmt;

use bytes::{Bytes, BytesMut};

/// Memory a transport lends out for DDP-eligible data (implemented by transports).
pub trait RegisteredMemory: Send + Sync + 'static {
    /// The buffer's bytes.
    fn as_slice(&self) -> &[u8];
    /// The buffer's bytes, to fill.
    fn as_mut_slice(&mut self) -> &mut [u8];
    /// The first `len` bytes as [`Bytes`] that keep the memory lent out until dropped.
    fn freeze(self: Box<Self>, len: usize) -> Bytes;
    /// The transport's own type, for a transport that takes a buffer back (a Write chunk the
    /// caller provides).
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

/// A buffer for DDP-eligible data: registered memory of a connection, or ordinary memory.
pub struct RegisteredBuffer {
    mem: Memory,
}

enum Memory {
    Heap(BytesMut),
    Registered(Box<dyn RegisteredMemory>),
}

impl RegisteredBuffer {
    /// A buffer of `len` zero bytes in ordinary memory (what TCP hands out, and the fallback
    /// when a pool is exhausted).
    pub fn heap(len: usize) -> RegisteredBuffer {
        RegisteredBuffer {
            mem: Memory::Heap(BytesMut::zeroed(len)),
        }
    }

    /// Wraps memory lent out by a transport.
    pub fn registered(mem: Box<dyn RegisteredMemory>) -> RegisteredBuffer {
        RegisteredBuffer {
            mem: Memory::Registered(mem),
        }
    }

    /// True when the buffer is a transport's registered memory.
    pub fn is_registered(&self) -> bool {
        matches!(self.mem, Memory::Registered(_))
    }

    /// The buffer's length in bytes.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer's bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.mem {
            Memory::Heap(b) => b,
            Memory::Registered(m) => m.as_slice(),
        }
    }

    /// The buffer's bytes, to fill.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        match &mut self.mem {
            Memory::Heap(b) => b,
            Memory::Registered(m) => m.as_mut_slice(),
        }
    }

    /// The first `len` bytes (at most the buffer's length) as [`Bytes`], for a DDP-eligible
    /// field. The memory stays lent out until every clone is dropped.
    pub fn freeze(self, len: usize) -> Bytes {
        let len = len.min(self.len());
        match self.mem {
            Memory::Heap(mut b) => {
                b.truncate(len);
                b.freeze()
            }
            Memory::Registered(m) => m.freeze(len),
        }
    }

    /// The transport's memory, for the transport that lent it.
    pub fn into_registered(self) -> Result<Box<dyn RegisteredMemory>, RegisteredBuffer> {
        match self.mem {
            Memory::Registered(m) => Ok(m),
            heap => Err(RegisteredBuffer { mem: heap }),
        }
    }
}

impl fmt::Debug for RegisteredBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredBuffer")
            .field("len", &self.len())
            .field("registered", &self.is_registered())
            .finish()
    }
}

/// Where a connection's buffers for DDP-eligible data come from.
pub trait BufferSource: Send + Sync + 'static {
    /// A buffer of `len` bytes. A transport whose pool is exhausted returns ordinary memory
    /// ([`RegisteredBuffer::heap`]): the call still works, at the cost of one copy.
    fn buffer(&self, len: usize) -> RegisteredBuffer;
}

/// Ordinary memory: the buffer source of transports without registration (TCP).
#[derive(Debug, Clone, Copy, Default)]
pub struct HeapBuffers;

impl BufferSource for HeapBuffers {
    fn buffer(&self, len: usize) -> RegisteredBuffer {
        RegisteredBuffer::heap(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heap_buffer_freezes_to_what_was_written() {
        let mut b = HeapBuffers.buffer(8);
        assert!(!b.is_registered());
        b.as_mut_slice()[..3].copy_from_slice(b"abc");
        assert_eq!(&b.freeze(3)[..], b"abc");
        assert_eq!(HeapBuffers.buffer(2).freeze(10).len(), 2, "clamped");
    }
}
