use std::collections::BTreeMap;
use std::string::String;
use std::vec::Vec;
use std::{format, vec};

use serde::{Deserialize, Serialize};

use super::*;
use crate::cbor::{parse, DEFAULT_MAX_DEPTH};
use crate::http::EncodeError;

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Reading<'a> {
    sensor: &'a str,
    seq: u64,
    delta: i32,
    celsius: f64,
    label: Option<String>,
    spare: Option<u8>,
    place: Place,
    tags: Vec<Tag>,
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Place {
    room: String,
    floor: i8,
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
enum Tag {
    Plain,
    Level(u8),
    Pair(i16, char),
    Range { low: f32, high: Option<f32> },
}

fn reading() -> Reading<'static> {
    Reading {
        sensor: "t1 \"é\"",
        seq: u64::MAX,
        delta: i32::MIN,
        celsius: -21.75,
        label: Some("kitchen\n".into()),
        spare: None,
        place: Place {
            room: String::new(),
            floor: -1,
        },
        tags: vec![
            Tag::Plain,
            Tag::Level(7),
            Tag::Pair(-300, 'ß'),
            Tag::Range {
                low: 0.5,
                high: None,
            },
        ],
    }
}

fn cbor<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut buf = [0u8; 512];
    let mut out = Cursor::new(&mut buf);
    serialize(&mut out, value).unwrap();
    out.written().to_vec()
}

/// What a JSON publisher's text of `value` becomes as CBOR (the client's transcoder).
fn via_json<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut buf = [0u8; 512];
    let mut out = Cursor::new(&mut buf);
    write::json(&mut out, &serde_json::to_string(value).unwrap()).unwrap();
    out.written().to_vec()
}

#[test]
fn values_are_written_as_their_json_form_transcoded() {
    // Everything but f32s (exact 32-bit floats here) and byte strings.
    let mut map = BTreeMap::new();
    map.insert("b", vec![Some(1.5), None]);
    map.insert("a", vec![]);
    let mut r = reading();
    r.tags.truncate(3);
    assert_eq!(cbor(&r), via_json(&r));
    assert_eq!(cbor(&map), via_json(&map));
    let mixed = ('é', "\u{1}", (), Some(3u128), -4i128, [i64::MIN, 0, 24]);
    assert_eq!(cbor(&mixed), via_json(&mixed));
    assert_eq!(cbor(&Tag::Plain), [0x65, b'P', b'l', b'a', b'i', b'n']);
}

#[test]
fn a_struct_round_trips_borrowing_its_str() {
    let r = reading();
    let bytes = cbor(&r);
    let item = parse(&bytes, DEFAULT_MAX_DEPTH).unwrap();
    let back: Reading<'_> = item.deserialize().unwrap();
    assert_eq!(back, r);
    let at = back.sensor.as_ptr() as usize - bytes.as_ptr() as usize;
    assert_eq!(
        bytes.get(at..at + r.sensor.len()),
        Some(r.sensor.as_bytes())
    );
    // The f32s went out as 32-bit floats: `fa` then 0.5.
    assert!(bytes.windows(5).any(|w| w == [0xfa, 0x3f, 0, 0, 0]));
}

/// `serde_bytes`' way of asking for a byte string.
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

#[test]
fn byte_strings_are_written_and_borrowed() {
    let bytes = cbor(&(Bytes(&[0x00, 0xff]), 1u8));
    assert_eq!(bytes, [0x82, 0x42, 0x00, 0xff, 0x01]);
    let item = parse(&bytes, 4).unwrap();
    let (raw, n): (&[u8], u8) = item.deserialize().unwrap();
    assert_eq!((raw, n), (&[0x00, 0xff][..], 1));
    assert!(core::ptr::eq(raw.as_ptr(), bytes[2..].as_ptr()));
}

/// A sequence of unknown length, as an iterator is serialized.
struct Unsized(u8);

impl Serialize for Unsized {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((0..self.0).filter(|_| true))
    }
}

#[test]
fn unknown_lengths_are_indefinite_and_lying_lengths_refused() {
    let bytes = cbor(&Unsized(3));
    assert_eq!(bytes, [0x9f, 0x00, 0x01, 0x02, 0xff]);
    let item = parse(&bytes, 4).unwrap();
    assert_eq!(item.deserialize::<Vec<u8>>(), Ok(vec![0, 1, 2]));

    struct Liar(usize);
    impl Serialize for Liar {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeSeq;
            let mut seq = s.serialize_seq(Some(2))?;
            for _ in 0..self.0 {
                seq.serialize_element(&1u8)?;
            }
            seq.end()
        }
    }
    let mut buf = [0u8; 16];
    assert_eq!(cbor(&Liar(2)), [0x82, 0x01, 0x01]);
    for n in [1, 3] {
        assert_eq!(
            serialize(&mut Cursor::new(&mut buf), &Liar(n)),
            Err(WriteError::Unserializable),
            "{n}"
        );
    }
}

#[test]
fn displayed_values_are_text() {
    struct Shown(u16);
    impl Serialize for Shown {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(&format_args!("port {}", self.0))
        }
    }
    assert_eq!(cbor(&Shown(8080)), [&[0x69][..], b"port 8080"].concat());
    // A Display that changes between its two runs is refused, not half-written.
    struct Fickle(core::cell::Cell<u8>);
    impl fmt::Display for Fickle {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.set(self.0.get() + 1);
            f.write_str(&"x".repeat(self.0.get().into()))
        }
    }
    impl Serialize for Fickle {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(self)
        }
    }
    let mut buf = [0u8; 16];
    assert_eq!(
        serialize(&mut Cursor::new(&mut buf), &Fickle(0.into())),
        Err(WriteError::Unserializable)
    );
}

#[test]
fn raw_json_is_transcoded() {
    use crate::json::typed::RawJson;
    assert_eq!(
        cbor(&[RawJson(r#"{"k":[1]}"#)]),
        via_json(&[BTreeMap::from([("k", [1])])])
    );
    assert_eq!(cbor(&RawJson("2.5")), via_json(&2.5));
    let mut buf = [0u8; 16];
    assert!(matches!(
        serialize(&mut Cursor::new(&mut buf), &RawJson("[1,")),
        Err(WriteError::InvalidJson { .. })
    ));
}

#[test]
fn values_that_do_not_fit_are_errors() {
    let mut buf = [0u8; 32];
    for result in [
        serialize(&mut Cursor::new(&mut buf), &u128::MAX),
        serialize(&mut Cursor::new(&mut buf), &i128::MIN),
    ] {
        assert_eq!(result, Err(WriteError::Unserializable));
    }
    let full = cbor(&reading());
    for size in 0..full.len() {
        let mut buf = vec![0u8; size];
        assert_eq!(
            serialize(&mut Cursor::new(&mut buf), &reading()),
            Err(WriteError::Encode(EncodeError::BufferTooSmall {
                capacity: size
            })),
            "{size}"
        );
    }
}

fn read<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, DeserializeError> {
    parse(bytes, DEFAULT_MAX_DEPTH).unwrap().deserialize()
}

#[test]
fn numbers_are_read_as_leniently_as_json() {
    // An integer into a float, a 64-bit float into an f32, half floats, a tagged number.
    assert_eq!(read::<f64>(&[0x02]), Ok(2.0));
    assert_eq!(read::<f32>(&[0x38, 0x63]), Ok(-100.0));
    assert_eq!(read::<f32>(&cbor(&21.5f64)), Ok(21.5));
    assert_eq!(read::<f64>(&[0xf9, 0x3e, 0x00]), Ok(1.5));
    assert_eq!(read::<f64>(&[0xf9, 0xc4, 0x00]), Ok(-4.0));
    assert_eq!(read::<f64>(&[0xf9, 0x00, 0x01]), Ok(5.960464477539063e-8));
    assert_eq!(read::<f64>(&[0xf9, 0x7c, 0x00]), Ok(f64::INFINITY));
    assert!(read::<f64>(&[0xf9, 0x7e, 0x00]).unwrap().is_nan());
    assert_eq!(read::<u16>(&[0xc1, 0x19, 0x01, 0x00]), Ok(256));
    // Integers of any width into any type they fit.
    assert_eq!(read::<u8>(&[0x1b, 0, 0, 0, 0, 0, 0, 0, 0xff]), Ok(255));
    assert_eq!(read::<i64>(&cbor(&i64::MIN)), Ok(i64::MIN));
    assert_eq!(
        read::<i128>(&[0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        Ok(-(1i128 << 64))
    );
    assert_eq!(
        read::<u8>(&[0x19, 0x01, 0x00]),
        Err(DeserializeError::InvalidNumber)
    );
    assert_eq!(read::<u32>(&[0x20]), Err(DeserializeError::InvalidNumber));
    assert_eq!(
        read::<i64>(&[0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        Err(DeserializeError::InvalidNumber)
    );
    assert_eq!(read::<u32>(&cbor(&1.0)), Err(DeserializeError::InvalidType));
}

#[test]
fn items_of_another_type_are_errors() {
    let r = cbor(&reading());
    assert_eq!(
        read::<Reading<'_>>(&cbor(&"oops")),
        Err(DeserializeError::InvalidType)
    );
    assert_eq!(read::<u32>(&r), Err(DeserializeError::InvalidType));
    assert_eq!(read::<&str>(&[0x01]), Err(DeserializeError::InvalidType));
    assert_eq!(read::<bool>(&[0xf6]), Err(DeserializeError::InvalidType));
    assert_eq!(read::<()>(&[0x80]), Err(DeserializeError::InvalidType));
    assert_eq!(read::<Vec<u8>>(&[0xa0]), Err(DeserializeError::InvalidType));
    // A chunked string has no contiguous text to borrow.
    assert_eq!(
        read::<&str>(&[0x7f, 0x61, b'a', 0xff]),
        Err(DeserializeError::InvalidType)
    );
    // A missing field is serde's own error; extra items are refused.
    assert_eq!(
        read::<Place>(&cbor(
            &[("room", "x")].into_iter().collect::<BTreeMap<_, _>>()
        )),
        Err(DeserializeError::CustomError)
    );
    assert_eq!(
        read::<(u8, u8)>(&[0x83, 1, 2, 3]),
        Err(DeserializeError::TrailingCharacters)
    );
    assert_eq!(
        read::<(u8, u8)>(&[0x9f, 1, 2, 3, 0xff]),
        Err(DeserializeError::TrailingCharacters)
    );
    assert_eq!(
        read::<(u8, u8, u8)>(&[0x82, 1, 2]),
        Err(DeserializeError::CustomError)
    );
    // An enum as a map of two members, or of none.
    assert_eq!(read::<Tag>(&[0xa0]), Err(DeserializeError::InvalidType));
    let two = [
        0xa2, 0x65, b'L', b'e', b'v', b'e', b'l', 0x01, 0x65, b'L', b'e', b'v', b'e', b'l', 0x02,
    ];
    assert_eq!(read::<Tag>(&two), Err(DeserializeError::TrailingCharacters));
}

#[test]
fn what_other_writers_send_is_read() {
    // Indefinite containers, `undefined` as None, unknown members skipped, tags ignored.
    let bytes = [
        0xbf, // {_
        0x64, b'r', b'o', b'o', b'm', 0xc0, 0x61, b'k', // "room": 0("k")
        0x63, b'x', b't', b'r', 0x9f, 0xa1, 0x61, b'a', 0x80, 0xff, // "xtr": [_ {"a": []}]
        0x65, b'f', b'l', b'o', b'o', b'r', 0x20, // "floor": -1
        0xff,
    ];
    assert_eq!(
        read::<Place>(&bytes),
        Ok(Place {
            room: "k".into(),
            floor: -1
        })
    );
    assert_eq!(read::<Option<u8>>(&[0xf7]), Ok(None));
    assert_eq!(read::<Option<u8>>(&[0x05]), Ok(Some(5)));
    // A byte array as a JSON publisher sends it, and a char.
    assert_eq!(read::<Vec<u8>>(&via_json(&[1u8, 2])), Ok(vec![1, 2]));
    assert_eq!(read::<char>(&cbor(&'ß')), Ok('ß'));
    let tags = reading().tags;
    assert_eq!(read::<Vec<Tag>>(&cbor(&tags)), Ok(tags));
}

#[test]
fn no_input_makes_the_reader_panic() {
    // Every byte value at every position of a typed message: an error or a value.
    let bytes = cbor(&reading());
    for at in 0..bytes.len() {
        for b in 0..=255u8 {
            let mut v = bytes.clone();
            v[at] = b;
            if let Ok(item) = parse(&v, DEFAULT_MAX_DEPTH) {
                let _ = item.deserialize::<Reading<'_>>();
                let _ = item.deserialize::<serde::de::IgnoredAny>();
                let _ = format!("{:?}", item.deserialize::<Vec<Tag>>());
            }
        }
    }
}
