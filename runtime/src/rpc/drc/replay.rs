//! A handler's results kept for replay: encoded once, copied out of whatever memory they
//! shared, and encoded again for each retransmission over whichever transport and chunks it
//! came with.
//!
//! A reply cannot be kept as the bytes one transport sent: over RPC-over-RDMA the first reply
//! moved its DDP-eligible results into the Write chunks of the first call, and the
//! retransmission brings Write chunks of its own (seed 004 section 4.4.5: the requester
//! provides them per call), or comes over TCP with none. So the results are recorded with
//! every item inline and a note of where each DDP-eligible item and each counted opaque item
//! lies ([`Encoder::recording`]); a replay writes the plain runs as they are and hands each
//! noted item to the replaying encoder as the results' own code would have, so its chunking
//! policy (and RDMA_MSGP's alignment of counted opaque data, seed 000 section 3.5) applies to
//! the replay exactly as to a first reply.
//!
//! The recording is copied into memory of its own: results whose data sat in a connection's
//! registered buffer ([`CallContext::buffer`](crate::rpc::CallContext::buffer)) or in a larger
//! shared buffer do not keep that memory alive while cached, and the cache's byte bound counts
//! exactly what an entry holds.

use bytes::{Bytes, BytesMut};

use crate::xdr::{self, padding, DdpKind, Encode, Encoder};

/// How a noted item is written again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ItemKind {
    /// Counted opaque data that is not DDP-eligible (kept for RDMA_MSGP's padding).
    Counted,
    /// A DDP-eligible item.
    Ddp(DdpKind),
}

/// A noted item of the recorded stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Item {
    /// Offset of the item's data.
    offset: usize,
    /// The data's length, without padding.
    len: usize,
    kind: ItemKind,
}

impl Item {
    /// Whether the replay writes the item's length word itself.
    fn writes_length(&self) -> bool {
        matches!(
            self.kind,
            ItemKind::Counted | ItemKind::Ddp(DdpKind::Counted)
        )
    }

    /// Where the replay of the item starts: its length word, or its data.
    fn head(&self) -> usize {
        if self.writes_length() {
            self.offset - 4
        } else {
            self.offset
        }
    }

    /// Where the item's data and padding end.
    fn end(&self) -> usize {
        self.offset + self.len + padding(self.len)
    }
}

/// Results recorded for replay (see the module's documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordedResults {
    stream: Bytes,
    items: Vec<Item>,
}

impl RecordedResults {
    /// Records `value`'s encoding. Fails as encoding `value` fails (a value over a declared
    /// maximum); nothing is moved to chunks here, so a chunk error cannot happen.
    pub(crate) fn record(value: &dyn Encode) -> xdr::Result<RecordedResults> {
        let mut enc = Encoder::recording();
        value.encode(&mut enc)?;
        let (encoded, marks) = enc.finish_recorded();
        let mut stream = BytesMut::with_capacity(encoded.len());
        for part in encoded.parts() {
            stream.extend_from_slice(part);
        }
        let stream = stream.freeze();
        let counted = encoded.pad_points().iter().map(|&(offset, len)| Item {
            offset,
            len,
            kind: ItemKind::Counted,
        });
        let ddp = marks.iter().map(|m| Item {
            offset: m.offset,
            len: m.len,
            kind: ItemKind::Ddp(m.kind),
        });
        let items = checked_items(&stream, merge(counted, ddp));
        Ok(RecordedResults { stream, items })
    }

    /// The bytes the recording holds.
    pub(crate) fn size(&self) -> usize {
        self.stream.len() + self.items.len() * std::mem::size_of::<Item>()
    }

    /// Writes `stream[from..to]` as it is (by reference when long, like any opaque body;
    /// lengths are multiples of four, so no padding is added).
    fn put_run(&self, enc: &mut Encoder, from: usize, to: usize) {
        if from < to {
            enc.put_opaque_body(&self.stream.slice(from..to));
        }
    }
}

impl Encode for RecordedResults {
    fn encode(&self, enc: &mut Encoder) -> xdr::Result<()> {
        let mut at = 0;
        for item in &self.items {
            self.put_run(enc, at, item.head());
            let data = self.stream.slice(item.offset..item.offset + item.len);
            match item.kind {
                ItemKind::Counted => enc.put_opaque(&data, None)?,
                ItemKind::Ddp(DdpKind::Counted) => enc.put_ddp_opaque(&data, None)?,
                // An array's count stays in the run before it; its encoded elements move or
                // stay as one piece, as `put_ddp_array` does with them.
                ItemKind::Ddp(DdpKind::Fixed | DdpKind::Array) => {
                    enc.put_ddp_fixed_opaque(&data, item.len)?
                }
            }
            at = item.end();
        }
        self.put_run(enc, at, self.stream.len());
        Ok(())
    }
}

/// The items in stream order; a DDP-eligible counted item, which the encoder also notes as
/// counted opaque data, once (as DDP-eligible).
fn merge(counted: impl Iterator<Item = Item>, ddp: impl Iterator<Item = Item>) -> Vec<Item> {
    let mut all: Vec<Item> = counted.chain(ddp).collect();
    // Stable: at one offset the counted note (first) comes before the DDP mark.
    all.sort_by_key(|i| i.offset);
    let mut merged: Vec<Item> = Vec::with_capacity(all.len());
    for item in all {
        match merged.last_mut() {
            Some(last) if last.offset == item.offset => *last = item,
            _ => merged.push(item),
        }
    }
    merged
}

/// The items a replay can rewrite: in order, not overlapping, inside the stream, on XDR
/// boundaries, and for counted ones after a length word that says their length. The
/// recording encoder produces nothing else; an item failing this would stay in a plain run,
/// which replays the same bytes.
fn checked_items(stream: &[u8], items: Vec<Item>) -> Vec<Item> {
    let mut at = 0;
    let mut kept = Vec::with_capacity(items.len());
    for item in items {
        let length_word = item.offset.checked_sub(4).and_then(|w| {
            let word = stream.get(w..item.offset)?;
            Some(u32::from_be_bytes([word[0], word[1], word[2], word[3]]) as usize)
        });
        let fits = item.offset % 4 == 0
            && item
                .offset
                .checked_add(item.len + padding(item.len))
                .is_some_and(|end| end <= stream.len());
        let sound = fits
            && match item.kind {
                ItemKind::Counted | ItemKind::Ddp(DdpKind::Counted) => {
                    length_word == Some(item.len)
                }
                ItemKind::Ddp(DdpKind::Fixed) => true,
                ItemKind::Ddp(DdpKind::Array) => item.len % 4 == 0,
            };
        if sound && item.head() >= at {
            at = item.end();
            kept.push(item);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdr::{ChunkTarget, ThresholdPolicy};

    /// Results with a bit of everything: plain words, a plain counted opaque, a DDP-eligible
    /// counted opaque, a DDP-eligible fixed opaque and a DDP-eligible array.
    struct Mixed {
        name: Bytes,
        data: Bytes,
        fixed: Bytes,
        list: Vec<u32>,
    }

    impl Encode for Mixed {
        fn encode(&self, enc: &mut Encoder) -> xdr::Result<()> {
            enc.put_u32(7);
            enc.put_opaque(&self.name, None)?;
            enc.put_ddp_opaque(&self.data, None)?;
            enc.put_u64(9);
            enc.put_ddp_fixed_opaque(&self.fixed, self.fixed.len())?;
            enc.put_ddp_array(&self.list, None)?;
            enc.put_u32(11);
            Ok(())
        }
    }

    fn mixed() -> Mixed {
        Mixed {
            name: Bytes::from_static(b"hello"),
            data: Bytes::from((0..3001u32).map(|i| i as u8).collect::<Vec<_>>()),
            fixed: Bytes::from(vec![5u8; 12]),
            list: vec![1, 2, 3],
        }
    }

    fn encode_with(value: &dyn Encode, mut enc: Encoder) -> (Bytes, Vec<(ChunkTarget, Bytes)>) {
        value.encode(&mut enc).unwrap();
        let (encoded, moved) = enc.finish_with_chunks();
        let moved = moved.into_iter().map(|m| (m.target, m.data)).collect();
        (encoded.to_bytes(), moved)
    }

    #[test]
    fn a_replay_encodes_the_same_bytes_as_the_results() {
        let value = mixed();
        let recorded = RecordedResults::record(&value).unwrap();
        assert_eq!(
            xdr::to_bytes(&recorded).unwrap(),
            xdr::to_bytes(&value).unwrap()
        );
    }

    /// Over RPC-over-RDMA the replay fills the retransmission's Write chunks as the results
    /// would have: with three Write chunks every DDP-eligible item moves, with one only the
    /// first, with none all stay inline.
    #[test]
    fn a_replay_moves_the_same_items_as_the_results_into_any_write_chunks() {
        let value = mixed();
        let recorded = RecordedResults::record(&value).unwrap();
        for chunks in [vec![], vec![4096], vec![4096, 64, 64]] {
            let policy = ThresholdPolicy::default();
            let direct = encode_with(&value, Encoder::for_reply(policy, chunks.clone()));
            let replay = encode_with(&recorded, Encoder::for_reply(policy, chunks.clone()));
            assert_eq!(direct, replay, "{chunks:?}");
            assert_eq!(direct.1.len(), chunks.len(), "{chunks:?}");
        }
    }

    /// RDMA_MSGP pads before counted opaque data: the replay notes the same places.
    #[test]
    fn a_replay_notes_the_same_pad_points() {
        let value = mixed();
        let recorded = RecordedResults::record(&value).unwrap();
        let points = |v: &dyn Encode| {
            let mut enc = Encoder::for_reply(ThresholdPolicy::default(), vec![]);
            enc.record_pad_points(4);
            v.encode(&mut enc).unwrap();
            enc.finish().pad_points().to_vec()
        };
        assert_eq!(points(&recorded), points(&value));
        assert_eq!(points(&value).len(), 2, "the name and the data");
    }

    #[test]
    fn a_recording_holds_no_memory_of_the_results() {
        let value = mixed();
        let recorded = RecordedResults::record(&value).unwrap();
        let within = |b: &Bytes| {
            let range = b.as_ptr() as usize..b.as_ptr() as usize + b.len();
            range.contains(&(recorded.stream.as_ptr() as usize))
        };
        assert!(!within(&value.data), "the data was copied out");
        let expected = xdr::to_bytes(&value).unwrap().len();
        assert_eq!(recorded.stream.len(), expected);
        assert!(recorded.size() >= expected);
    }

    #[test]
    fn an_unencodable_value_fails_to_record() {
        struct TooLong;
        impl Encode for TooLong {
            fn encode(&self, enc: &mut Encoder) -> xdr::Result<()> {
                enc.put_opaque(&Bytes::from_static(b"abcdef"), Some(3))
            }
        }
        assert!(RecordedResults::record(&TooLong).is_err());
    }

    #[test]
    fn items_that_do_not_fit_the_stream_stay_in_plain_runs() {
        let stream = [0u8, 0, 0, 4, 1, 2, 3, 4];
        let item = |offset, len, kind| Item { offset, len, kind };
        let counted = ItemKind::Counted;
        // Right: length word 4 at 0, data at 4.
        assert_eq!(
            checked_items(&stream, vec![item(4, 4, counted)]),
            vec![item(4, 4, counted)]
        );
        for wrong in [
            item(4, 3, counted),                       // the length word says 4
            item(0, 4, counted),                       // no room for a length word
            item(4, 8, ItemKind::Ddp(DdpKind::Fixed)), // past the end
            item(2, 4, ItemKind::Ddp(DdpKind::Fixed)), // off an XDR boundary
            item(4, 3, ItemKind::Ddp(DdpKind::Array)), // not whole elements
        ] {
            assert_eq!(checked_items(&stream, vec![wrong]), vec![], "{wrong:?}");
        }
        // Overlapping items: the second stays in the run.
        let fixed = ItemKind::Ddp(DdpKind::Fixed);
        assert_eq!(
            checked_items(&stream, vec![item(0, 8, fixed), item(4, 4, counted)]),
            vec![item(0, 8, fixed)]
        );
    }
}
