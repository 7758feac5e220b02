use super::*;
use std::vec::Vec;

/// Decodes `pieces` in order; returns the body and how many bytes followed it.
fn run(pieces: &[&[u8]]) -> Result<(Vec<u8>, usize), DecodeError> {
    let mut c = Chunked::new(64, 64);
    let mut body = Vec::new();
    for (k, piece) in pieces.iter().enumerate() {
        let mut pos = 0;
        loop {
            let (n, next) = c.next(&piece[pos..])?;
            pos += n;
            match next {
                Next::Data(d) => {
                    // Take at most 3 bytes at a time, like a content decoder that stalls.
                    let d = d.min(3);
                    body.extend_from_slice(&piece[pos..pos + d]);
                    pos += d;
                    c.consume(d);
                }
                Next::NeedMore => break,
                Next::End => {
                    let rest =
                        pieces[k + 1..].iter().map(|p| p.len()).sum::<usize>() + piece.len() - pos;
                    return Ok((body, rest));
                }
            }
        }
    }
    Err(DecodeError::UnexpectedEof {
        section: c.eof_section(),
    })
}

fn every_split(input: &[u8]) -> Result<(Vec<u8>, usize), DecodeError> {
    let whole = run(&[input]);
    for i in 0..=input.len() {
        assert_eq!(run(&[&input[..i], &input[i..]]), whole, "split at {i}");
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(run(&bytes), whole, "byte at a time");
    whole
}

#[test]
fn extensions_trailers_and_following_bytes() {
    let input = b"5;name=val;x=\"q\"\r\nhello\r\n1A \r\nabcdefghijklmnopqrstuvwxyz\r\n0;end\r\nX-Trailer: 1\r\nY: 2\r\n\r\nHTTP/1.1";
    let (body, rest) = every_split(input).unwrap();
    assert_eq!(body, b"helloabcdefghijklmnopqrstuvwxyz");
    assert_eq!(rest, 8);
}

#[test]
fn bare_lf_and_leading_zeros() {
    assert_eq!(
        every_split(b"0003\nabc\n0\n\n").unwrap(),
        (b"abc".to_vec(), 0)
    );
}

#[test]
fn errors() {
    assert_eq!(every_split(b"g\r\n"), Err(DecodeError::InvalidChunkSize));
    assert_eq!(every_split(b"\r\n"), Err(DecodeError::InvalidChunkSize));
    assert_eq!(
        every_split(b"3\r\nabcX"),
        Err(DecodeError::InvalidChunkDelimiter)
    );
    assert_eq!(every_split(b"1 2\r\n"), Err(DecodeError::InvalidChunkSize));
    assert_eq!(
        every_split(b"10000000000000000\r\n"),
        Err(DecodeError::InvalidChunkSize)
    );
    let long_ext = [b"1;".as_slice(), &[b'a'; 70]].concat();
    assert_eq!(
        every_split(&long_ext),
        Err(DecodeError::ChunkLineTooLong { max: 64 })
    );
    let trailers = [b"0\r\n".as_slice(), &[b'a'; 80]].concat();
    assert_eq!(
        every_split(&trailers),
        Err(DecodeError::TrailersTooLarge { max: 64 })
    );
    assert_eq!(
        every_split(b"3\r\nab"),
        Err(DecodeError::UnexpectedEof {
            section: Section::Body
        })
    );
    assert_eq!(
        every_split(b"3\r\nabc\r"),
        Err(DecodeError::UnexpectedEof {
            section: Section::ChunkFraming
        })
    );
    assert_eq!(
        every_split(b"0\r\nX: y\r\n"),
        Err(DecodeError::UnexpectedEof {
            section: Section::Trailers
        })
    );
}
