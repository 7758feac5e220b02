use super::testing::Buf;
use super::*;

type Text = Buf<256>;

fn err(text: &str) -> (usize, ErrorKind) {
    let e = parse(text, 16).unwrap_err();
    assert_eq!(by_members(text, 16), Err(e), "{text:?}");
    (e.offset, e.kind)
}

/// [`parse`] through a [`Validator`] that takes every object, at every depth, member by
/// member.
fn by_members(text: &str, max_depth: usize) -> Result<Value<'_>, Error> {
    fn value<'a>(json: &mut Validator<'a>, max_depth: usize) -> Result<Value<'a>, Error> {
        match json.object(max_depth, |json, _, depth| value(json, depth).map(drop))? {
            Some(object) => Ok(Value::new(object.raw)),
            None => json.value(max_depth),
        }
    }
    let mut json = Validator::new(text);
    let v = value(&mut json, max_depth)?;
    json.end()?;
    Ok(v)
}

#[test]
fn scalars_and_whitespace() {
    for (text, kind) in [
        ("0", Kind::Number),
        (" -0.0e+0 ", Kind::Number),
        ("\t\"\"\n", Kind::String),
        ("true", Kind::Bool),
        ("false", Kind::Bool),
        ("null", Kind::Null),
        ("[]", Kind::Array),
        ("{}", Kind::Object),
    ] {
        assert_eq!(parse(text, 1).unwrap().kind(), kind, "{text:?}");
        assert_eq!(parse(text, 1).unwrap().as_raw(), text.trim());
    }
}

#[test]
fn garbage_and_truncation_are_errors() {
    use ErrorKind::*;
    for (text, expected) in [
        ("", (0, UnexpectedEnd)),
        ("   ", (3, UnexpectedEnd)),
        ("x", (0, ExpectedValue)),
        ("[1 2]", (3, ExpectedCommaOrEnd)),
        ("[1,]", (3, ExpectedValue)),
        ("{,}", (1, ExpectedKey)),
        ("{\"a\" 1}", (5, ExpectedColon)),
        ("{\"a\":1,}", (7, ExpectedKey)),
        ("{1:2}", (1, ExpectedKey)),
        ("[}", (1, ExpectedValue)),
        ("[1}", (2, ExpectedCommaOrEnd)),
        ("{\"a\":1]", (6, ExpectedCommaOrEnd)),
        ("tru", (3, UnexpectedEnd)),
        ("trux", (3, InvalidLiteral)),
        ("nul1", (3, InvalidLiteral)),
        ("01", (1, TrailingData)),
        ("1 2", (2, TrailingData)),
        ("{}}", (2, TrailingData)),
        ("+1", (0, ExpectedValue)),
        (".5", (0, ExpectedValue)),
        ("1.", (2, UnexpectedEnd)),
        ("1.e5", (2, InvalidNumber)),
        ("1e", (2, UnexpectedEnd)),
        ("-", (1, UnexpectedEnd)),
        ("-a", (1, InvalidNumber)),
        ("\"abc", (4, UnexpectedEnd)),
        ("\"a\\x\"", (3, InvalidEscape)),
        ("\"\\u12g4\"", (5, InvalidEscape)),
        ("\"\\u12", (5, UnexpectedEnd)),
        ("\"a\nb\"", (2, ControlCharacter)),
        ("\"\u{0}\"", (1, ControlCharacter)),
        ("{\"a\":[1,{\"b\":", (13, UnexpectedEnd)),
        ("[[[", (3, UnexpectedEnd)),
    ] {
        assert_eq!(err(text), expected, "{text:?}");
    }
}

#[test]
fn every_truncation_of_a_document_is_an_error() {
    let doc = r#"{"print":{"rps":{"50":2.99,"max":3.05},"type":"counter","value":900},"s":"\u00e9\"","t":[true,false,null,-1.5e-3]}"#;
    assert!(parse(doc, 8).is_ok());
    for end in 0..doc.len() {
        if let Some(prefix) = doc.get(..end) {
            assert!(parse(prefix, 8).is_err(), "{prefix:?}");
            assert_eq!(by_members(prefix, 8), parse(prefix, 8), "{prefix:?}");
        }
    }
}

#[test]
fn objects_validated_member_by_member_walk_without_rescanning() {
    for doc in [
        "{}",
        " { } ",
        r#"{"a":1}"#,
        r#"{ "a" : [1,{"x":"]}"}] , "b":{"c":null},"\u0063":"s\"}","d":true,"e":-1.5e3,"a":2 } "#,
    ] {
        let mut json = Validator::new(doc);
        let object = json
            .object(8, |json, _, depth| json.value(depth).map(drop))
            .unwrap()
            .unwrap();
        json.end().unwrap();
        let parsed = parse(doc, 8).unwrap().as_object().unwrap();
        assert_eq!(object.as_raw(), parsed.as_raw());
        let count = parsed.members().count();
        assert_eq!(usize::from(object.ends.len), count.min(INDEXED), "{doc}");
        assert_eq!(usize::from(parsed.ends.len), 0);
        assert!(object.members().eq(parsed.members()), "{doc}");
        for (key, _) in parsed.members() {
            let key = Text::display(key);
            assert_eq!(
                object.get(key.as_str()),
                parsed.get(key.as_str()),
                "{key:?}"
            );
        }
        assert_eq!(object.get("z"), None);
    }
    // The recorded ends are used: a (never validated) object given ends that differ
    // from its text is walked by the ends.
    let object = Object {
        raw: r#"{"a":1,"b":2,"c":3}"#,
        ends: Ends {
            len: 1,
            at: [12, 0, 0, 0],
        },
    };
    let members = object.members().map(|(k, v)| (k.as_raw(), v.as_raw()));
    assert!(members.eq([("a", r#"1,"b":2"#), ("c", "3")]));
    // Something other than an object is left to `value`.
    let mut json = Validator::new(" [1]");
    assert_eq!(json.object(8, |_, _, _| Ok(())), Ok(None));
    assert_eq!(json.value(8).map(|v| v.as_raw()), Ok("[1]"));
}

#[test]
fn depth_limit_is_enforced_without_recursion() {
    fn nested(n: usize) -> Buf<1024> {
        let mut b = Buf::new();
        b.repeat(b"[", n).repeat(b"]", n);
        b
    }
    assert!(parse(nested(5).as_str(), 5).is_ok());
    assert_eq!(
        parse(nested(6).as_str(), 5).unwrap_err(),
        Error {
            offset: 5,
            kind: ErrorKind::TooDeep
        }
    );
    assert!(parse(nested(MAX_DEPTH).as_str(), usize::MAX).is_ok());
    assert_eq!(
        parse(nested(MAX_DEPTH + 1).as_str(), usize::MAX)
            .unwrap_err()
            .kind,
        ErrorKind::TooDeep
    );
    // Far deeper than a recursive parser's stack would allow.
    let mut huge = Buf::<100_000>::new();
    huge.repeat(b"[", 100_000);
    assert_eq!(
        parse(huge.as_str(), usize::MAX).unwrap_err().kind,
        ErrorKind::TooDeep
    );
    assert_eq!(parse("1", 0).unwrap().as_u64(), Some(1));
    assert_eq!(parse("[]", 0).unwrap_err().kind, ErrorKind::TooDeep);
    // Objects and arrays alternate: the bit stack must remember each level.
    assert!(parse(r#"[{"a":[{"b":[]},{}]},[{}]]"#, 5).is_ok());
    assert_eq!(
        parse(r#"[{"a":[{"b":[]]}]}]"#, 8).unwrap_err().kind,
        ErrorKind::ExpectedCommaOrEnd
    );
    let mut mixed = Buf::<1024>::new();
    (0..100).for_each(|i| {
        mixed.push(if i % 2 == 0 { b"[" } else { b"{\"k\":" });
    });
    mixed.push(b"1");
    (0..100).rev().for_each(|i| {
        mixed.push(if i % 2 == 0 { b"]" } else { b"}" });
    });
    assert!(parse(mixed.as_str(), 100).is_ok());
    assert_eq!(
        parse(mixed.as_str(), 99).unwrap_err().kind,
        ErrorKind::TooDeep
    );
    // Taken member by member, objects count the same levels, up to the same clamp.
    for depth in [0, 1, 98, 99, 100, 101] {
        assert_eq!(
            by_members(mixed.as_str(), depth),
            parse(mixed.as_str(), depth)
        );
    }
    for n in [MAX_DEPTH, MAX_DEPTH + 1] {
        let mut objects = Buf::<2048>::new();
        objects.repeat(b"{\"k\":", n).push(b"1").repeat(b"}", n);
        let text = objects.as_str();
        assert_eq!(parse(text, usize::MAX).is_ok(), n == MAX_DEPTH);
        assert_eq!(by_members(text, usize::MAX), parse(text, usize::MAX));
    }
}

#[test]
fn members_and_elements() {
    let v = parse(
        r#" { "a" : [ 1 , "x,]}" , { } ] , "b":{"c":null} , "a":2 } "#,
        8,
    )
    .unwrap();
    let obj = v.as_object().unwrap();
    let expected = [
        ("a", r#"[ 1 , "x,]}" , { } ]"#),
        ("b", r#"{"c":null}"#),
        ("a", "2"),
    ];
    assert_eq!(obj.members().count(), expected.len());
    for ((k, v), (ek, ev)) in obj.members().zip(expected) {
        assert!(k == ek && v.as_raw() == ev, "{k} {v:?}");
    }
    let arr = obj.get("a").unwrap().as_array().unwrap();
    assert!(arr
        .elements()
        .map(|e| e.as_raw())
        .eq(["1", r#""x,]}""#, "{ }"]));
    assert!(arr.get(2).unwrap().as_object().unwrap().is_empty());
    assert_eq!(arr.get(3), None);
    assert!(obj.get("b").unwrap().get("c").unwrap().is_null());
    assert_eq!(obj.get("missing"), None);
    assert_eq!(v.as_array(), None);
    assert!(v.as_str().is_none());
    // A finished iterator stays finished.
    let mut it = arr.elements();
    assert_eq!(it.by_ref().count(), 3);
    assert_eq!(it.next(), None);
}

#[test]
fn escapes_and_surrogates() {
    let s = |text: &str| Text::display(parse(text, 0).unwrap().as_str().unwrap());
    assert_eq!(s(r#""\"\\\/\b\f\n\r\t""#), "\"\\/\u{8}\u{c}\n\r\t");
    assert_eq!(s(r#""\u0041\u00e9\u20AC""#), "Aé€");
    assert_eq!(s(r#""\ud83d\ude00x""#), "😀x");
    assert_eq!(s(r#""\uD83D\uDE00""#), "😀");
    // Lone or reversed surrogates become U+FFFD, the following text is kept.
    assert_eq!(s(r#""\ud800""#), "\u{FFFD}");
    assert_eq!(s(r#""\ud800x""#), "\u{FFFD}x");
    assert_eq!(s(r#""\ude00\ud83d""#), "\u{FFFD}\u{FFFD}");
    assert_eq!(s(r#""\ud83d\u0041""#), "\u{FFFD}A");
    assert_eq!(s(r#""\ud83d\n""#), "\u{FFFD}\n");
    assert_eq!(s("\"héllo 😀\""), "héllo 😀");
}

#[test]
fn comparisons_without_allocation() {
    let v = parse(r#"["id","\u0069d","i\"d","idx"]"#, 1).unwrap();
    let mut it = v.as_array().unwrap().elements().filter_map(|e| e.as_str());
    let s: [JsonStr<'_>; 4] = core::array::from_fn(|_| it.next().unwrap());
    assert!(s[0] == "id" && s[1] == "id" && s[0] == s[1]);
    assert!(s[2] == "i\"d" && s[2] != "id" && s[3] != "id" && s[0] != "idx" && s[0] != "i");
    assert!(s[0] != s[3]);
    // Raw text that equals the other text byte for byte but has escapes decodes to
    // something shorter.
    let v = parse(r#""a\\n""#, 0).unwrap().as_str().unwrap();
    assert!(v == r"a\n" && v != r"a\\n" && v != "a\n");
}

#[test]
fn unescape_into_buffers() {
    let v = parse(r#""\ud83d\ude00é""#, 0).unwrap();
    let s = v.as_str().unwrap();
    let mut buf = [0u8; 6];
    assert_eq!(s.unescape_into(&mut buf), Ok("😀é"));
    for cap in 0..6 {
        assert_eq!(
            s.unescape_into(&mut buf[..cap]),
            Err(EncodeError::BufferTooSmall { capacity: cap })
        );
    }
    assert_eq!(
        parse("\"\"", 0)
            .unwrap()
            .as_str()
            .unwrap()
            .unescape_into(&mut []),
        Ok("")
    );
}

#[test]
fn items_of_validated_containers_are_stepped_over_whole() {
    let doc = r#" [ {"a":"]}\"[{","b":{}} , [1,[2,[]]],"x\\", true,null ,-1.5e3,"", {} ] "#;
    let v = parse(doc, 8).unwrap();
    let items: std::vec::Vec<&str> = v
        .as_array()
        .unwrap()
        .elements()
        .map(|e| e.as_raw())
        .collect();
    assert_eq!(
        items,
        [
            r#"{"a":"]}\"[{","b":{}}"#,
            "[1,[2,[]]]",
            r#""x\\""#,
            "true",
            "null",
            "-1.5e3",
            r#""""#,
            "{}"
        ]
    );
    let o = v.as_array().unwrap().get(0).unwrap().as_object().unwrap();
    assert!(o.get("b").is_some_and(|b| b.as_raw() == "{}"));
    assert!(o
        .get("a")
        .and_then(|a| a.as_str())
        .is_some_and(|a| a == "]}\"[{"));
}

/// Containers are stepped over eight bytes at a time: random documents whose
/// strings are full of brackets, quotes and escapes, at every alignment, split back
/// into the values they were built from.
#[test]
fn containers_are_stepped_over_at_every_alignment() {
    let mut rng = crate::testing::Xorshift(0x853C_49E6_748F_EA9Bu64);
    let mut rand = move || rng.next() as usize;
    fn value(out: &mut Buf<4096>, rand: &mut impl FnMut() -> usize, depth: usize) {
        const PIECES: [&str; 12] = [
            "a", "]", "[", "}", "{", "\\\"", "\\\\", "\\/", "\\u005d", "é", " ", ",",
        ];
        match rand() % if depth == 0 { 3 } else { 6 } {
            0 => {
                out.push(["null", "-1.5e3", "0", "true"][rand() % 4].as_bytes());
            }
            1 | 2 => {
                out.push(b"\"");
                (0..rand() % 12).for_each(|_| {
                    out.push(PIECES[rand() % PIECES.len()].as_bytes());
                });
                out.push(b"\"");
            }
            kind => {
                let object = kind == 5;
                out.push(if object { b"{" } else { b"[" });
                for i in 0..rand() % 4 {
                    out.push(if i > 0 { b", " } else { b"" });
                    if object {
                        value_key(out, rand);
                    }
                    value(out, rand, depth - 1);
                }
                out.push(if object { b" }" } else { b"]" });
            }
        }
    }
    fn value_key(out: &mut Buf<4096>, rand: &mut impl FnMut() -> usize) {
        out.push(["\"k\":", "\"]}\" : ", "\"\\\"{\":"][rand() % 3].as_bytes());
    }
    for _ in 0..3_000 {
        let mut doc = Buf::<4096>::new();
        doc.push(&b"[        "[..1 + rand() % 8]);
        let mut spans = [(0, 0); 8];
        let count = rand() % spans.len();
        for (i, span) in spans.iter_mut().take(count).enumerate() {
            if i > 0 {
                doc.push(b",");
            }
            let start = doc.len();
            value(&mut doc, &mut rand, 4);
            *span = (start, doc.len());
        }
        doc.push(b"]");
        let text = doc.as_str();
        let v = parse(text, 8).unwrap();
        let expected = spans[..count].iter().map(|&(a, b)| &text[a..b]);
        assert!(
            v.as_array()
                .unwrap()
                .elements()
                .map(|e| e.as_raw())
                .eq(expected),
            "{text}"
        );
    }
}

#[test]
fn numbers() {
    // (text, as_i64, as_f64)
    for (text, int, float) in [
        ("3", Some(3), 3.0),
        ("-0", Some(0), -0.0),
        ("9223372036854775807", Some(i64::MAX), 9.223372036854776e18),
        (
            "-9223372036854775808",
            Some(i64::MIN),
            -9.223372036854776e18,
        ),
        ("9223372036854775808", None, 9.223372036854776e18),
        ("0.3", None, 0.3),
        ("2.0", None, 2.0),
        ("2.9975917348002614", None, 2.9975917348002614),
        ("1.0e-5", None, 1.0e-5),
        ("1.0e20", None, 1.0e20),
        ("1E+2", None, 100.0),
        ("1e400", None, f64::INFINITY),
    ] {
        let n = Number::parse(text).unwrap();
        assert_eq!(parse(text, 0).unwrap().as_number(), Some(n), "{text}");
        assert_eq!((n.as_str(), n.as_i64()), (text, int), "{text}");
        assert_eq!(n.as_f64().to_bits(), float.to_bits(), "{text}");
        assert_eq!(n.is_integer(), !text.contains(['.', 'e', 'E']), "{text}");
        assert_eq!(Text::display(n), text);
        assert!(n == text);
    }
    for text in [
        "", "+1", "01", "1.", ".1", "1e", "inf", "NaN", " 1", "1 ", "0x10", "--1", "1.0.0",
    ] {
        assert!(Number::parse(text).is_err(), "{text:?}");
    }
    assert_eq!(parse("1.5", 0).unwrap().as_u64(), None);
    assert_eq!(parse("18446744073709551616", 0).unwrap().as_u64(), None);
    assert_eq!(parse("\"1\"", 0).unwrap().as_u64(), None);
    assert_eq!(parse("\"1\"", 0).unwrap().as_number(), None);
    // Equality is textual.
    assert_ne!(Number::parse("2.0"), Number::parse("2"));
    assert_ne!(Number::parse("1e2"), Number::parse("100"));
}

#[test]
fn invalid_utf8_bytes() {
    assert_eq!(
        parse_bytes(b"[1,\xc3]", 2).unwrap_err(),
        Error {
            offset: 3,
            kind: ErrorKind::InvalidUtf8
        }
    );
    assert_eq!(
        parse_bytes(b"[\"\xc3\xa9\"]", 2).unwrap().as_raw(),
        "[\"é\"]"
    );
}

/// A tiny deterministic fuzz: random mutations of valid documents must give `Ok` or
/// `Err`, never a panic, and whatever parses must walk cleanly.
#[test]
fn never_panics_on_mutated_input() {
    let seeds = [
        r#"{"a":[1,-2.5e3,"x\u00e9\ud83d\ude00",true,false,null,{"b":{}}],"c":"\\\""}"#,
        r#"[{"id":1,"hosts":["h"]},[],[[]]]"#,
    ];
    let mut rng = crate::testing::Xorshift(0x2545_f491_4f6c_dd1du64);
    let mut rand = move || rng.next() as usize;
    let alphabet = b"{}[]\",:\\u0123456789abcdefABCDEF.-+eEtrnl \t\n\x01\xff";
    for round in 0..20_000 {
        let mut doc = Text::new();
        doc.push(seeds[round % seeds.len()].as_bytes());
        for _ in 0..rand() % 4 + 1 {
            let pos = rand() % (doc.len() + 1);
            let b = alphabet[rand() % alphabet.len()];
            match rand() % 3 {
                0 if pos < doc.len() => doc.set(pos, b),
                1 if pos < doc.len() => doc.remove(pos),
                _ => doc.insert(pos, b),
            }
        }
        if let Ok(text) = core::str::from_utf8(doc.as_bytes()) {
            assert_eq!(by_members(text, 4), parse(text, 4), "{text:?}");
        }
        if let Ok(v) = parse_bytes(doc.as_bytes(), 4) {
            walk(v);
        }
    }
}

fn walk(v: Value<'_>) {
    let _ = (
        v.as_number(),
        v.as_i64(),
        v.as_u64(),
        v.as_f64(),
        v.as_bool(),
        v.is_null(),
    );
    if let Some(s) = v.as_str() {
        let mut buf = [0u8; 8];
        let _ = (Text::display(s), s.unescape_into(&mut buf), s == "x");
    }
    if let Some(o) = v.as_object() {
        for (k, m) in o {
            let _ = Text::display(k);
            walk(m);
        }
    }
    if let Some(a) = v.as_array() {
        a.elements().for_each(walk);
    }
}

/// Skipping a validated container a word at a time ends where its text ends, with the
/// 32-bit word of an MCU as with the 64-bit one of a desktop: brackets inside strings,
/// escaped quotes, nesting, and every length around the word boundaries.
#[test]
fn container_skip_at_both_word_widths() {
    let containers = [
        r#"{}"#,
        r#"[1,2,3]"#,
        r#"{"a":"}","b":["]","{"],"c":{"d":"\"}"}}"#,
        r#"["\\",{"x":"\\\"]"}]"#,
        r#"[[[[[[[[[]]]]]]]]]"#,
        r#"{"messages":[{"ts":1,"v":"a]b}c"},{"ts":2,"v":"\u005d"}],"position":"1:2"}"#,
    ];
    for container in containers {
        for pad in 0..9 {
            let text = format!("{}{container} ,1", " ".repeat(pad));
            let end = pad + container.len();
            for skip in [
                Scanner::skip_validated_container::<u32>,
                Scanner::skip_validated_container::<u64>,
            ] {
                let mut scanner = Scanner::new(&text, pad);
                skip(&mut scanner);
                assert_eq!(scanner.pos, end, "{text:?}");
            }
        }
    }
}

/// `==` on decoded text (the byte-level `Unescaped`) agrees with comparing
/// [`JsonStr::chars`], for escapes of every UTF-8 length, surrogate pairs, lone and
/// invalid surrogates, and raw text around them; and the raw bytes of an unusual escape
/// (not producible by the parser) pass through like `Chars` reads them.
#[test]
fn decoded_comparison_matches_chars() {
    let raws = [
        "",
        "a",
        "é",
        "ab",
        r"\n",
        r"a\tb",
        r"\u0041",
        r"\u00e9",
        r"\u07ff",
        r"\u0800",
        r"\uffff",
        r"\ud83d\ude00",
        r"x\ud83d\ude00y",
        r"\ud83d",
        r"\ud83dx",
        r"\ude00",
        r"\ud83d\u0041",
        r#"\/\\\""#,
        r"\b\f\r",
        "é\\u00e9€",
        r"\u20ac",
        "😀",
    ];
    let plains = [
        "",
        "a",
        "é",
        "ab",
        "\n",
        "a\tb",
        "A",
        "\u{7ff}",
        "\u{800}",
        "\u{ffff}",
        "😀",
        "x😀y",
        "\u{fffd}",
        "\u{fffd}x",
        "\u{fffd}A",
        "/\\\"",
        "\u{8}\u{c}\r",
        "éé€",
        "€",
    ];
    let decoded = |raw: &str| {
        let mut chars = Buf::<64>::new();
        for c in (JsonStr { raw }).chars() {
            chars.push(c.encode_utf8(&mut [0; 4]).as_bytes());
        }
        chars
    };
    for raw in raws {
        let s = JsonStr { raw };
        let mut bytes = Buf::<64>::new();
        s.unescaped().for_each(|b| {
            bytes.push(&[b]);
        });
        assert_eq!(bytes.as_bytes(), decoded(raw).as_bytes(), "{raw:?}");
        for plain in plains {
            assert_eq!(
                s == *plain,
                s.chars().eq(plain.chars()),
                "{raw:?} == {plain:?}"
            );
        }
        for other in raws {
            let o = JsonStr { raw: other };
            assert_eq!(s == o, s.chars().eq(o.chars()), "{raw:?} == {other:?}");
        }
    }
    // Escapes the parser never lets through: a non-ASCII character after `\` or in the
    // place of a hex digit, and a text ending in `\`.
    for raw in ["\\é", "\\u0é41", "\\u00", "a\\"] {
        let mut bytes = Buf::<64>::new();
        (JsonStr { raw }).unescaped().for_each(|b| {
            bytes.push(&[b]);
        });
        assert_eq!(bytes.as_bytes(), decoded(raw).as_bytes(), "{raw:?}");
    }
}
