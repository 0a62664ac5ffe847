//! `#[derive(Xdr)]` against the byte-exact examples of RFC 4506 and hand-written encoders.

use bytes::Bytes;
use rpcrdma::xdr::{self, Decode, Encode, Encoder, ErrorKind, XdrString};
use rpcrdma::Xdr;

// RFC 4506 section 7, "An Example of an XDR Data Description":
//
//   const MAXUSERNAME = 32;     /* max length of a user name */
//   const MAXFILELEN = 65535;   /* max length of a file      */
//   const MAXNAMELEN = 255;     /* max length of a file name */
//   enum filekind { TEXT = 0, DATA = 1, EXEC = 2 };
//   union filetype switch (filekind kind) {
//   case TEXT: void;
//   case DATA: string creator<MAXNAMELEN>;
//   case EXEC: string interpretor<MAXNAMELEN>;
//   };
//   struct file {
//      string filename<MAXNAMELEN>;
//      filetype type;
//      string owner<MAXUSERNAME>;
//      opaque data<MAXFILELEN>;
//   };
const MAXUSERNAME: u32 = 32;
const MAXFILELEN: u32 = 65535;
const MAXNAMELEN: u32 = 255;

#[derive(Xdr, Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    Text = 0,
    Data = 1,
    Exec = 2,
}

#[derive(Xdr, Debug, Clone, PartialEq, Eq)]
#[xdr(switch = FileKind)]
enum FileType {
    #[xdr(case = FileKind::Text)]
    Text,
    #[xdr(case = FileKind::Data)]
    Data {
        #[xdr(max = MAXNAMELEN)]
        creator: XdrString,
    },
    #[xdr(case = FileKind::Exec)]
    Exec {
        #[xdr(max = MAXNAMELEN)]
        interpretor: XdrString,
    },
}

#[derive(Xdr, Debug, Clone, PartialEq, Eq)]
struct File {
    #[xdr(max = MAXNAMELEN)]
    filename: XdrString,
    r#type: FileType,
    #[xdr(max = MAXUSERNAME)]
    owner: XdrString,
    #[xdr(max = MAXFILELEN)]
    data: Bytes,
}

/// The 48 bytes RFC 4506 section 7 gives for the file "sillyprog", a Lisp program by "john"
/// containing "(quit)".
const SILLYPROG: [u8; 48] = [
    0x00, 0x00, 0x00, 0x09, // length of filename = 9
    0x73, 0x69, 0x6c, 0x6c, // "sill"
    0x79, 0x70, 0x72, 0x6f, // "ypro"
    0x67, 0x00, 0x00, 0x00, // "g" and 3 zero-bytes of fill
    0x00, 0x00, 0x00, 0x02, // filekind is EXEC = 2
    0x00, 0x00, 0x00, 0x04, // length of interpretor = 4
    0x6c, 0x69, 0x73, 0x70, // "lisp"
    0x00, 0x00, 0x00, 0x04, // length of owner = 4
    0x6a, 0x6f, 0x68, 0x6e, // "john"
    0x00, 0x00, 0x00, 0x06, // length of file data is 6
    0x28, 0x71, 0x75, 0x69, // "(qui"
    0x74, 0x29, 0x00, 0x00, // "t)" and 2 zero-bytes of fill
];

fn sillyprog() -> File {
    File {
        filename: "sillyprog".into(),
        r#type: FileType::Exec {
            interpretor: "lisp".into(),
        },
        owner: "john".into(),
        data: Bytes::from_static(b"(quit)"),
    }
}

#[test]
fn encodes_rfc4506_section7_file_byte_for_byte() {
    assert_eq!(&xdr::to_bytes(&sillyprog()).unwrap()[..], &SILLYPROG[..]);
}

#[test]
fn decodes_rfc4506_section7_file() {
    let file: File = xdr::from_bytes(Bytes::from_static(&SILLYPROG)).unwrap();
    assert_eq!(file, sillyprog());
}

#[test]
fn decoded_strings_share_the_input_buffer() {
    let wire = Bytes::from_static(&SILLYPROG);
    let file: File = xdr::from_bytes(wire.clone()).unwrap();
    // Zero-copy: the opaque data is a slice of the input at offset 40.
    assert_eq!(file.data.as_ptr(), wire[40..].as_ptr());
}

#[test]
fn rejects_every_truncation_of_the_rfc_example() {
    for len in 0..SILLYPROG.len() {
        let prefix = Bytes::copy_from_slice(&SILLYPROG[..len]);
        assert!(
            xdr::from_bytes::<File>(prefix).is_err(),
            "a {len}-byte prefix decoded"
        );
    }
}

#[test]
fn rejects_an_unknown_filekind_at_its_offset() {
    let mut bad = SILLYPROG;
    bad[19] = 7; // filekind 7
    let err = xdr::from_bytes::<File>(Bytes::copy_from_slice(&bad)).unwrap_err();
    assert_eq!(
        err.kind(),
        &ErrorKind::UnknownDiscriminant {
            type_name: "FileKind",
            value: 7
        }
    );
    assert_eq!(err.offset(), 16);
}

#[test]
fn min_encoded_len_sums_fields_and_takes_the_smallest_arm() {
    // filetype: the 4-byte filekind plus the void arm.
    assert_eq!(<FileType as Decode>::MIN_ENCODED_LEN, 4);
    // three lengths plus the union.
    assert_eq!(<File as Decode>::MIN_ENCODED_LEN, 16);
    assert_eq!(xdr::to_bytes(&FileType::Text).unwrap().len(), 4);
}

#[test]
fn enforces_declared_maximum_on_encode() {
    let mut file = sillyprog();
    file.owner = XdrString::from("a-user-name-longer-than-32-bytes!");
    let err = xdr::to_bytes(&file).unwrap_err();
    assert_eq!(
        err.kind(),
        &ErrorKind::ExceedsDeclaredMaximum {
            length: 33,
            maximum: MAXUSERNAME
        }
    );
    // The owner's length word would be at offset 28.
    assert_eq!(err.offset(), 28);
}

#[test]
fn enforces_declared_maximum_on_decode() {
    let mut bad = SILLYPROG.to_vec();
    bad[31] = 33; // owner length 33 > MAXUSERNAME
    bad.extend_from_slice(&[0; 32]);
    let err = xdr::from_bytes::<File>(Bytes::from(bad)).unwrap_err();
    assert_eq!(
        err.kind(),
        &ErrorKind::ExceedsDeclaredMaximum {
            length: 33,
            maximum: MAXUSERNAME
        }
    );
    assert_eq!(err.offset(), 28);
}

/// The same `file` written by hand against the codec core, as xdrgen emits it.
struct HandWrittenFile<'a>(&'a File);

impl Encode for HandWrittenFile<'_> {
    fn encode(&self, enc: &mut Encoder) -> xdr::Result<()> {
        let f = self.0;
        enc.put_string(&f.filename, Some(MAXNAMELEN))?;
        match &f.r#type {
            FileType::Text => enc.put_i32(0),
            FileType::Data { creator } => {
                enc.put_i32(1);
                enc.put_string(creator, Some(MAXNAMELEN))?;
            }
            FileType::Exec { interpretor } => {
                enc.put_i32(2);
                enc.put_string(interpretor, Some(MAXNAMELEN))?;
            }
        }
        enc.put_string(&f.owner, Some(MAXUSERNAME))?;
        enc.put_opaque(&f.data, Some(MAXFILELEN))
    }
}

#[test]
fn derive_matches_a_hand_written_encoder() {
    for r#type in [
        FileType::Text,
        FileType::Data {
            creator: "emacs".into(),
        },
        sillyprog().r#type,
    ] {
        let file = File {
            r#type,
            ..sillyprog()
        };
        assert_eq!(
            xdr::to_bytes(&file).unwrap(),
            xdr::to_bytes(&HandWrittenFile(&file)).unwrap()
        );
    }
}
