//! A file's sparse pages: holes, large offsets, truncation, the space check, and random
//! sequences compared with a plain `Vec<u8>`.

use super::data::{FileData, MAX_FILE_SIZE, PAGE_SIZE};
use crate::nfs3::Nfsstat3;

const PAGE: u64 = PAGE_SIZE as u64;
const GIB: u64 = 1 << 30;

/// The whole file, read in one call.
fn contents(data: &FileData) -> Vec<u8> {
    let mut out = vec![0xee; data.len() as usize];
    let n = data.read(0, &mut out);
    assert_eq!(n as u64, data.len());
    out
}

#[test]
fn holes_read_as_zeros() {
    let mut data = FileData::new();
    data.write(3 * PAGE + 10, b"abc", u64::MAX).unwrap();
    data.write(5, b"xy", u64::MAX).unwrap();
    assert_eq!(data.len(), 3 * PAGE + 13);
    // Page 0 holds its first 7 bytes (5 zeros and "xy"), page 3 its first 13: nothing else.
    assert_eq!(data.stored(), 7 + 13);
    let all = contents(&data);
    assert_eq!(&all[..7], b"\0\0\0\0\0xy");
    assert!(all[7..(3 * PAGE + 10) as usize].iter().all(|b| *b == 0));
    assert_eq!(&all[(3 * PAGE + 10) as usize..], b"abc");
    // A read across a page boundary into a hole, into a buffer that held other bytes.
    let mut out = [0xee; 8];
    assert_eq!(data.read(PAGE - 4, &mut out), 8);
    assert_eq!(out, [0; 8]);
    data.check().unwrap();
}

#[test]
fn a_write_at_4_gib_stores_one_page_worth() {
    let mut data = FileData::new();
    let offset = 4 * GIB;
    let added = data.write(offset, b"tail", 100).unwrap();
    assert_eq!(data.len(), offset + 4);
    // 4 GiB is a page boundary: the page holds the 4 bytes, nothing before them.
    assert_eq!((added, data.stored()), (4, 4));
    let mut out = [0xee; 6];
    assert_eq!(data.read(offset - 2, &mut out), 6);
    assert_eq!(&out, b"\0\0tail");
    // Past the end: nothing.
    assert_eq!(data.read(offset + 4, &mut out), 0);
    assert_eq!(data.read(u64::MAX, &mut out), 0);
    data.check().unwrap();
}

#[test]
fn growing_allocates_nothing() {
    let mut data = FileData::new();
    assert_eq!(data.set_len(10 * GIB), Ok(0));
    assert_eq!((data.len(), data.stored()), (10 * GIB, 0));
    let mut out = [0xee; 100];
    assert_eq!(data.read(GIB, &mut out), 100);
    assert_eq!(out, [0; 100]);
    data.check().unwrap();
}

#[test]
fn truncation_drops_pages_and_trims_the_last() {
    let mut data = FileData::new();
    let bytes = vec![7u8; 3 * PAGE_SIZE];
    data.write(0, &bytes, u64::MAX).unwrap();
    data.write(10 * PAGE, b"far", u64::MAX).unwrap();
    assert_eq!(data.stored(), 3 * PAGE + 3);
    // Into the middle of page 1: page 2 and the far page go, page 1 keeps 100 bytes.
    assert_eq!(data.set_len(PAGE + 100), Ok(PAGE - 100 + PAGE + 3));
    assert_eq!((data.len(), data.stored()), (PAGE + 100, PAGE + 100));
    data.check().unwrap();
    // Growing again reads zeros where the old bytes were.
    data.set_len(3 * PAGE).unwrap();
    let all = contents(&data);
    assert!(all[..(PAGE + 100) as usize].iter().all(|b| *b == 7));
    assert!(all[(PAGE + 100) as usize..].iter().all(|b| *b == 0));
    // To a page boundary: whole pages only.
    assert_eq!(data.set_len(PAGE), Ok(100));
    assert_eq!(data.stored(), PAGE);
    assert_eq!(data.set_len(0), Ok(PAGE));
    assert_eq!((data.len(), data.stored()), (0, 0));
    data.check().unwrap();
}

#[test]
fn nospc_and_fbig_leave_the_contents_unchanged() {
    let mut data = FileData::new();
    data.write(0, b"hello", 10).unwrap();
    let before = data.clone();
    // 7 bytes into an empty page cost 7: more than the 6 left.
    assert_eq!(data.write(PAGE, b"1234567", 6), Err(Nfsstat3::Nfs3errNospc));
    assert_eq!(data, before);
    // Across a page boundary, a page is stored from its start: page 0 grows from 5 bytes to
    // a whole page (PAGE - 5 more) and page 1 takes 4, PAGE - 1 in all.
    assert_eq!(
        data.write(PAGE - 3, b"1234567", PAGE - 2),
        Err(Nfsstat3::Nfs3errNospc)
    );
    assert_eq!(data, before);
    let mut bigger = data.clone();
    assert_eq!(bigger.write(PAGE - 3, b"1234567", PAGE - 1), Ok(PAGE - 1));
    assert_eq!((bigger.len(), bigger.stored()), (PAGE + 4, PAGE + 4));
    // Overwriting stored bytes costs nothing.
    assert_eq!(data.write(1, b"ELL", 0), Ok(0));
    assert_eq!(contents(&data), b"hELLo");
    let before = data.clone();
    assert_eq!(
        data.write(MAX_FILE_SIZE, b"x", u64::MAX),
        Err(Nfsstat3::Nfs3errFbig)
    );
    assert_eq!(
        data.write(u64::MAX, b"x", u64::MAX),
        Err(Nfsstat3::Nfs3errFbig)
    );
    assert_eq!(data.set_len(MAX_FILE_SIZE + 1), Err(Nfsstat3::Nfs3errFbig));
    assert_eq!(data, before);
    // Up to the limit exactly is allowed; the last page is stored from its start.
    assert_eq!(
        data.write(MAX_FILE_SIZE - 1, b"x", u64::MAX),
        Ok(MAX_FILE_SIZE % PAGE)
    );
    assert_eq!(data.len(), MAX_FILE_SIZE);
    // A write of nothing changes nothing, wherever it is.
    let before = data.clone();
    assert_eq!(data.write(u64::MAX, b"", 0), Ok(0));
    assert_eq!(data, before);
    data.check().unwrap();
}

mod against_a_vec {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Operation {
        Write(u64, usize, u8),
        SetLen(u64),
        Read(u64, usize),
    }

    /// Offsets near the first pages' boundaries, where the arithmetic can go wrong.
    fn offset() -> impl Strategy<Value = u64> {
        prop_oneof![
            (0..4u64, -70i64..70)
                .prop_map(|(page, delta)| (page * PAGE).saturating_add_signed(delta)),
            0..4 * PAGE,
        ]
    }

    fn length() -> impl Strategy<Value = usize> {
        prop_oneof![4 => 0..200usize, 1 => 0..PAGE_SIZE + 200]
    }

    fn operation() -> impl Strategy<Value = Operation> {
        prop_oneof![
            3 => (offset(), length(), any::<u8>()).prop_map(|(o, l, b)| Operation::Write(o, l, b)),
            1 => offset().prop_map(Operation::SetLen),
            2 => (offset(), length()).prop_map(|(o, l)| Operation::Read(o, l)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Every write, truncation and read gives what a dense `Vec<u8>` gives, and the
        /// bytes stored never exceed the size (holes cost nothing).
        #[test]
        fn matches_a_dense_model(ops in proptest::collection::vec(operation(), 1..40)) {
            let mut data = FileData::new();
            let mut model: Vec<u8> = Vec::new();
            for op in ops {
                match op {
                    Operation::Write(offset, len, byte) => {
                        let bytes = vec![byte; len];
                        data.write(offset, &bytes, u64::MAX).unwrap();
                        if len > 0 {
                            let start = offset as usize;
                            if model.len() < start + len {
                                model.resize(start + len, 0);
                            }
                            model[start..start + len].copy_from_slice(&bytes);
                        }
                    }
                    Operation::SetLen(len) => {
                        data.set_len(len).unwrap();
                        model.resize(len as usize, 0);
                    }
                    Operation::Read(offset, len) => {
                        let mut out = vec![0xee; len];
                        let n = data.read(offset, &mut out);
                        let start = (offset as usize).min(model.len());
                        let want = &model[start..(start + len).min(model.len())];
                        prop_assert_eq!(&out[..n], want);
                    }
                }
                prop_assert_eq!(data.len(), model.len() as u64);
                prop_assert!(data.stored() <= data.len());
                prop_assert_eq!(data.check(), Ok(()));
            }
            prop_assert_eq!(contents(&data), model);
        }
    }
}
