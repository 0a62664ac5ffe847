//! `Encode`/`Decode` for the XDR built-in types, and helpers for arrays and linked lists.

use bytes::Bytes;

use super::{Decode, Decoder, Encode, Encoder, Error, ErrorKind, Result, XdrString, BLOCK};

macro_rules! scalar {
    ($t:ty, $put:ident, $get:ident, $len:expr) => {
        impl Encode for $t {
            #[inline]
            fn encode(&self, enc: &mut Encoder) -> Result<()> {
                enc.$put(*self);
                Ok(())
            }
        }
        impl Decode for $t {
            const MIN_ENCODED_LEN: usize = $len;
            #[inline]
            fn decode(dec: &mut Decoder) -> Result<Self> {
                dec.$get()
            }
        }
    };
}

scalar!(u32, put_u32, get_u32, 4);
scalar!(i32, put_i32, get_i32, 4);
scalar!(u64, put_u64, get_u64, 8);
scalar!(i64, put_i64, get_i64, 8);
scalar!(f32, put_f32, get_f32, 4);
scalar!(f64, put_f64, get_f64, 8);
scalar!(bool, put_bool, get_bool, 4);

/// `void`.
impl Encode for () {
    fn encode(&self, _: &mut Encoder) -> Result<()> {
        Ok(())
    }
}

impl Decode for () {
    const MIN_ENCODED_LEN: usize = 0;
    fn decode(_: &mut Decoder) -> Result<Self> {
        Ok(())
    }
}

/// Variable-length opaque data without a declared maximum (`opaque x<>`).
impl Encode for Bytes {
    fn encode(&self, enc: &mut Encoder) -> Result<()> {
        enc.put_opaque(self, None)
    }
}

impl Decode for Bytes {
    fn decode(dec: &mut Decoder) -> Result<Self> {
        dec.get_opaque(None)
    }
}

/// A string without a declared maximum (`string x<>`).
impl Encode for XdrString {
    fn encode(&self, enc: &mut Encoder) -> Result<()> {
        enc.put_string(self, None)
    }
}

impl Decode for XdrString {
    fn decode(dec: &mut Decoder) -> Result<Self> {
        dec.get_string(None)
    }
}

/// Optional data (`T *x`, RFC 4506 section 4.19).
impl<T: Encode> Encode for Option<T> {
    #[inline]
    fn encode(&self, enc: &mut Encoder) -> Result<()> {
        match self {
            Some(v) => v.encode_present(enc),
            None => {
                enc.put_bool(false);
                Ok(())
            }
        }
    }
}

impl<T: Decode> Decode for Option<T> {
    #[inline]
    fn decode(dec: &mut Decoder) -> Result<Self> {
        T::decode_present(dec)
    }

    #[inline]
    fn decode_in_place(&mut self, dec: &mut Decoder) -> Result<()> {
        match self {
            Some(v) => {
                if !v.decode_present_in_place(dec)? {
                    *self = None;
                }
            }
            None => *self = T::decode_present(dec)?,
        }
        Ok(())
    }
}

/// Boxes carry recursive types; decoding one counts against [`Limits::max_depth`](super::Limits).
impl<T: Encode + ?Sized> Encode for Box<T> {
    fn encode(&self, enc: &mut Encoder) -> Result<()> {
        (**self).encode(enc)
    }
}

impl<T: Decode> Decode for Box<T> {
    const MIN_ENCODED_LEN: usize = T::MIN_ENCODED_LEN;
    fn decode(dec: &mut Decoder) -> Result<Self> {
        dec.enter()?;
        let v = T::decode(dec);
        dec.leave();
        v.map(Box::new)
    }

    fn decode_in_place(&mut self, dec: &mut Decoder) -> Result<()> {
        dec.enter()?;
        let v = (**self).decode_in_place(dec);
        dec.leave();
        v
    }
}

/// A variable-length array without a declared maximum (`T x<>`).
impl<T: Encode> Encode for Vec<T> {
    fn encode(&self, enc: &mut Encoder) -> Result<()> {
        encode_array(enc, self, None)
    }
}

impl<T: Decode> Decode for Vec<T> {
    fn decode(dec: &mut Decoder) -> Result<Self> {
        decode_array(dec, None)
    }

    fn decode_in_place(&mut self, dec: &mut Decoder) -> Result<()> {
        decode_array_in_place(dec, self, None)
    }
}

/// A fixed-length array (`T x[N]`).
impl<T: Encode, const N: usize> Encode for [T; N] {
    fn encode(&self, enc: &mut Encoder) -> Result<()> {
        self.iter().try_for_each(|v| v.encode(enc))
    }
}

impl<T: Decode, const N: usize> Decode for [T; N] {
    const MIN_ENCODED_LEN: usize = T::MIN_ENCODED_LEN * N;
    fn decode(dec: &mut Decoder) -> Result<Self> {
        let v = decode_fixed_array(dec, N)?;
        v.try_into()
            .map_err(|_| dec.error(ErrorKind::Invalid("fixed array length mismatch")))
    }

    fn decode_in_place(&mut self, dec: &mut Decoder) -> Result<()> {
        // The same up-front check as `decode_fixed_array`, so both fail alike.
        dec.check_count(N as u64, T::MIN_ENCODED_LEN, dec.offset())?;
        self.iter_mut().try_for_each(|v| v.decode_in_place(dec))
    }
}

macro_rules! tuple {
    ($($name:ident)+) => {
        /// Tuples encode their members in order (a convenience, not an XDR type).
        impl<$($name: Encode),+> Encode for ($($name,)+) {
            #[allow(non_snake_case)]
            fn encode(&self, enc: &mut Encoder) -> Result<()> {
                let ($($name,)+) = self;
                $($name.encode(enc)?;)+
                Ok(())
            }
        }
        impl<$($name: Decode),+> Decode for ($($name,)+) {
            const MIN_ENCODED_LEN: usize = 0 $(+ $name::MIN_ENCODED_LEN)+;
            fn decode(dec: &mut Decoder) -> Result<Self> {
                Ok(($($name::decode(dec)?,)+))
            }
            #[allow(non_snake_case)]
            fn decode_in_place(&mut self, dec: &mut Decoder) -> Result<()> {
                let ($($name,)+) = self;
                $($name.decode_in_place(dec)?;)+
                Ok(())
            }
        }
    };
}

tuple!(A B);
tuple!(A B C);
tuple!(A B C D);

/// Encodes a variable-length array (count, then elements), checking the declared maximum.
#[inline]
pub fn encode_array<T: Encode>(enc: &mut Encoder, items: &[T], max: Option<u32>) -> Result<()> {
    enc.put_length(items.len(), max)?;
    items.iter().try_for_each(|v| v.encode(enc))
}

/// Decodes a variable-length array, checking the count before allocating.
pub fn decode_array<T: Decode>(dec: &mut Decoder, max: Option<u32>) -> Result<Vec<T>> {
    let count = dec.get_count(max, T::MIN_ENCODED_LEN)?;
    collect(dec, count)
}

/// Encodes a fixed-length array held in a `Vec`, checking its length.
pub fn encode_fixed_array<T: Encode>(enc: &mut Encoder, items: &[T], len: usize) -> Result<()> {
    if items.len() != len {
        return Err(enc.error(ErrorKind::WrongFixedLength {
            expected: len,
            actual: items.len(),
        }));
    }
    items.iter().try_for_each(|v| v.encode(enc))
}

/// Decodes a fixed-length array of `len` elements into a `Vec`.
pub fn decode_fixed_array<T: Decode>(dec: &mut Decoder, len: usize) -> Result<Vec<T>> {
    dec.check_count(len as u64, T::MIN_ENCODED_LEN, dec.offset())?;
    collect(dec, len)
}

/// Decodes a variable-length array into `out` (see [`Decode::decode_in_place`]): the elements
/// `out` already holds are decoded in place, the rest pushed, the surplus dropped.
#[inline]
pub fn decode_array_in_place<T: Decode>(
    dec: &mut Decoder,
    out: &mut Vec<T>,
    max: Option<u32>,
) -> Result<()> {
    let count = dec.get_count(max, T::MIN_ENCODED_LEN)?;
    if out.capacity() == 0 {
        // Nothing to reuse (a new value): decode as `decode_array` does, one allocation.
        *out = collect(dec, count)?;
        return Ok(());
    }
    out.truncate(count);
    for item in out.iter_mut() {
        item.decode_in_place(dec)?;
    }
    while out.len() < count {
        out.push(T::decode(dec)?);
    }
    Ok(())
}

/// The most elements allocated for ahead of decoding them: a count has been checked against
/// the input, but an element's in-memory size can exceed its wire size.
const MAX_PREALLOCATED: usize = 1024;

/// The capacity a list's vector starts with when its first element arrives: linked lists in
/// protocol headers are short, and one allocation of this size is cheaper than growing.
const FIRST_LIST_CAPACITY: usize = 4;

#[inline]
fn collect<T: Decode>(dec: &mut Decoder, count: usize) -> Result<Vec<T>> {
    // The count has been checked against the input, but the in-memory size of T can exceed
    // its wire size; grow as elements actually decode.
    let mut out = Vec::with_capacity(count.min(MAX_PREALLOCATED));
    for _ in 0..count {
        out.push(T::decode(dec)?);
    }
    Ok(out)
}

/// Encodes a self-referential list reached through optional data (`struct L *head;` where `L`
/// ends in `struct L *next;`): a present flag before each element, then a final absent flag.
/// The element's own `Encode` writes the fields other than `next`. Iterative: list length never
/// touches the stack.
#[inline]
pub fn encode_list<T: Encode>(enc: &mut Encoder, items: &[T]) -> Result<()> {
    for item in items {
        item.encode_present(enc)?;
    }
    enc.put_bool(false);
    Ok(())
}

/// Decodes a list written by [`encode_list`], iteratively, bounded by
/// [`Limits::max_elements`](super::Limits).
pub fn decode_list<T: Decode>(dec: &mut Decoder) -> Result<Vec<T>> {
    let mut out = Vec::new();
    decode_list_from(dec, &mut out, 0)?;
    Ok(out)
}

/// Decodes a list written by [`encode_list`] into `out` (see [`Decode::decode_in_place`]),
/// iteratively, bounded by [`Limits::max_elements`](super::Limits).
#[inline]
pub fn decode_list_in_place<T: Decode>(dec: &mut Decoder, out: &mut Vec<T>) -> Result<()> {
    decode_list_from(dec, out, 0)
}

/// Encodes a self-referential list used directly (`struct L head;`): the first element has no
/// present flag. An empty slice cannot be encoded.
pub fn encode_nonempty_list<T: Encode>(
    enc: &mut Encoder,
    items: &[T],
    type_name: &'static str,
) -> Result<()> {
    let (first, rest) = items
        .split_first()
        .ok_or_else(|| enc.error(ErrorKind::EmptyList(type_name)))?;
    first.encode(enc)?;
    encode_list(enc, rest)
}

/// Decodes a list written by [`encode_nonempty_list`].
pub fn decode_nonempty_list<T: Decode>(dec: &mut Decoder) -> Result<Vec<T>> {
    let mut out = vec![T::decode(dec)?];
    decode_list_from(dec, &mut out, 1)?;
    Ok(out)
}

/// Decodes a list written by [`encode_nonempty_list`] into `out` (see
/// [`Decode::decode_in_place`]).
pub fn decode_nonempty_list_in_place<T: Decode>(dec: &mut Decoder, out: &mut Vec<T>) -> Result<()> {
    // The first element, like `decode_nonempty_list`'s, is not counted against the limit.
    match out.first_mut() {
        Some(first) => first.decode_in_place(dec)?,
        None => out.push(T::decode(dec)?),
    }
    decode_list_from(dec, out, 1)
}

/// Reads list elements (each after a TRUE present flag, the last flag FALSE) into `out`
/// from index `n` on: elements `out` already holds there are decoded in place, the rest
/// pushed, the surplus dropped.
#[inline]
fn decode_list_from<T: Decode>(dec: &mut Decoder, out: &mut Vec<T>, mut n: usize) -> Result<()> {
    if out.capacity() == 0 {
        // Nothing to reuse (a new value).
        return decode_new_list(dec, out, n);
    }
    while let Some(item) = out.get_mut(n) {
        let flag_at = dec.offset();
        if !item.decode_present_in_place(dec)? {
            out.truncate(n);
            return Ok(());
        }
        check_list_length(dec, n, flag_at + BLOCK)?;
        n += 1;
    }
    // Past the old elements: new ones pushed.
    loop {
        let flag_at = dec.offset();
        let Some(item) = T::decode_present(dec)? else {
            return Ok(());
        };
        out.push(item);
        check_list_length(dec, n, flag_at + BLOCK)?;
        n += 1;
    }
}

/// Reads list elements into `out`, which has no capacity yet, counting them from `n`.
#[inline]
fn decode_new_list<T: Decode>(dec: &mut Decoder, out: &mut Vec<T>, mut n: usize) -> Result<()> {
    let flag_at = dec.offset();
    let Some(first) = T::decode_present(dec)? else {
        return Ok(());
    };
    check_list_length(dec, n, flag_at + BLOCK)?;
    // One allocation up front rather than through `push`'s growth path, in `out` itself:
    // building the list in a local and moving it into `out` at the end costs a
    // store-forwarding stall per list (its three words stored one by one, then copied with
    // wider loads that the store buffer cannot forward).
    *out = Vec::with_capacity(FIRST_LIST_CAPACITY);
    out.push(first);
    loop {
        n += 1;
        let flag_at = dec.offset();
        let Some(item) = T::decode_present(dec)? else {
            return Ok(());
        };
        check_list_length(dec, n, flag_at + BLOCK)?;
        out.push(item);
    }
}

/// Refuses list element number `len` (counting from 0), read at offset `at`, when it is
/// beyond [`Limits::max_elements`](super::Limits).
#[inline]
fn check_list_length(dec: &Decoder, len: usize, at: usize) -> Result<()> {
    let max = dec.limits().max_elements;
    if len >= max as usize {
        return Err(Error::new(
            ErrorKind::LimitExceeded {
                limit: "list length",
                value: len as u64 + 1,
                maximum: max.into(),
            },
            at,
        ));
    }
    Ok(())
}
