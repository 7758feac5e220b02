use super::digest;
use sha1::Digest as _;

#[test]
fn the_fips_examples() {
    let hex = |d: [u8; 20]| {
        d.iter()
            .map(|b| std::format!("{b:02x}"))
            .collect::<String>()
    };
    assert_eq!(
        hex(digest(&[b"abc"])),
        "a9993e364706816aba3e25717850c26c9cd0d89d"
    );
    assert_eq!(
        hex(digest(&[b""])),
        "da39a3ee5e6b4b0d3255bfef95601890afd80709"
    );
    assert_eq!(
        hex(digest(&[
            b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        ])),
        "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
    );
}

/// Every length up to three blocks (all padding cases: the length in the same block,
/// in a block of its own), split into two parts at every third point, against the
/// `sha1` crate.
#[test]
fn agrees_with_the_sha1_crate() {
    let mut rng = crate::testing::Xorshift(0x9E37_79B9_7F4A_7C15);
    for len in 0..=192usize {
        let data: std::vec::Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let want: [u8; 20] = sha1::Sha1::digest(&data).into();
        for cut in (0..=len).step_by(3) {
            let (head, tail) = data.split_at(cut);
            assert_eq!(digest(&[head, tail]), want, "len {len}, cut {cut}");
        }
    }
}
