use super::*;

fn q(params: &[(&str, &str)]) -> heapless_string::S {
    let mut buf = [0u8; 256];
    let mut c = Cursor::new(&mut buf);
    QueryWriter::write(&mut c, params).unwrap();
    heapless_string::S::from(c.written())
}

mod heapless_string {
    #[derive(Debug, PartialEq)]
    pub struct S([u8; 256], usize);
    impl From<&[u8]> for S {
        fn from(b: &[u8]) -> Self {
            let mut s = S([0; 256], b.len());
            s.0[..b.len()].copy_from_slice(b);
            s
        }
    }
    impl PartialEq<&str> for S {
        fn eq(&self, o: &&str) -> bool {
            &self.0[..self.1] == o.as_bytes()
        }
    }
}

#[test]
fn matches_the_official_client_recordings() {
    // The /start query the official client (0.2.5) was recorded sending.
    assert_eq!(
        q(&[
            ("nodes", "h1,h2,h3"),
            ("benchmark_name", "my bench"),
            ("tags", "a,b"),
            ("email", "x@y.z")
        ]),
        "?nodes=h1%2Ch2%2Ch3&benchmark_name=my+bench&tags=a%2Cb&email=x%40y.z"
    );
    assert_eq!(q(&[("message", "a b&c")]), "?message=a+b%26c");
    assert_eq!(
        q(&[("command", "print(\"zz\")")]),
        "?command=print%28%22zz%22%29"
    );
    assert_eq!(q(&[("tags", "a,b c")]), "?tags=a%2Cb+c");
}

#[test]
fn empty_query_has_no_question_mark() {
    assert_eq!(q(&[]), "");
}

#[test]
fn non_ascii_is_percent_encoded_per_byte() {
    assert_eq!(q(&[("k", "é~")]), "?k=%C3%A9~");
}

#[test]
fn joined_and_numeric_values() {
    let mut buf = [0u8; 64];
    let mut c = Cursor::new(&mut buf);
    struct P;
    impl EncodeQuery for P {
        fn encode_query(&self, q: &mut QueryWriter<'_, '_>) -> Result<(), EncodeError> {
            q.pair_u64("id", 18446744073709551615)?;
            q.pair_joined("nodes", ["h1", "u@h2"], ",")?;
            q.pair_bool("provision_nodes", false)
        }
    }
    QueryWriter::write(&mut c, &P).unwrap();
    assert_eq!(
        c.written(),
        b"?id=18446744073709551615&nodes=h1%2Cu%40h2&provision_nodes=false"
    );
}

#[test]
fn too_small_buffer_is_an_error_not_a_panic() {
    let mut buf = [0u8; 5];
    let mut c = Cursor::new(&mut buf);
    assert_eq!(
        QueryWriter::write(&mut c, &[("key", "value")][..]),
        Err(EncodeError::BufferTooSmall { capacity: 5 })
    );
}
