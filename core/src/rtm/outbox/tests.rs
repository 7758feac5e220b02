use super::*;
use crate::ws::encode_in_place;

/// An outbox holding `pdus`, each written in place.
fn outbox_with(pdus: &[&[u8]]) -> Outbox<[u8; 256]> {
    let mut outbox = Outbox::new([0u8; 256]);
    for pdu in pdus {
        assert!(outbox.records_mut().push_with(|dst| {
            let end = FRAME_ROOM + pdu.len();
            dst.get_mut(FRAME_ROOM..end)?.copy_from_slice(pdu);
            Some(end)
        }));
    }
    outbox
}

/// Frames with a zero mask: the payload reads as written.
fn frame_all(outbox: &mut Outbox<[u8; 256]>) -> usize {
    outbox.hand_framed(&mut |record| {
        let len = record.len() - MAX_HEADER_LEN;
        encode_in_place(Opcode::Text, record, len, [0; 4]).unwrap();
    })
}

#[test]
fn frames_are_written_from_where_the_pdus_were_encoded() {
    let mut outbox = outbox_with(&[b"{}", b"[1]"]);
    assert_eq!(outbox.max_pdu(), 256 - 4 - MAX_HEADER_LEN);
    assert_eq!(frame_all(&mut outbox), 2);
    let frames: Vec<&[u8]> = outbox.frames().collect();
    assert_eq!(
        frames,
        [
            &[0x81, 0x82, 0, 0, 0, 0, b'{', b'}'][..],
            &[0x81, 0x83, 0, 0, 0, 0, b'[', b'1', b']'][..]
        ]
    );
    // Nothing new to frame: every record is out already.
    assert_eq!(frame_all(&mut outbox), 0);
    // A write ending inside the first frame: the rest of it comes first.
    assert_eq!(outbox.advance(5), 0);
    assert!(outbox.torn());
    assert_eq!(outbox.frames().next(), Some(&[0, b'{', b'}'][..]));
    // The rest of the first and the whole second, and nothing left of `n`.
    assert_eq!(outbox.advance(3 + 9), 0);
    assert!(!outbox.has_handed() && !outbox.torn());
    assert_eq!(outbox.frames().count(), 0);
    // More written than was handed out is given back.
    assert_eq!(outbox.advance(4), 4);
}

#[test]
fn the_client_drops_only_what_was_not_handed_out() {
    let mut outbox = outbox_with(&[b"a", b"b"]);
    frame_all(&mut outbox);
    assert!(outbox.records_mut().push_with(|dst| {
        *dst.get_mut(FRAME_ROOM)? = b'c';
        Some(FRAME_ROOM + 1)
    }));
    assert!(outbox.has_unhanded());
    outbox.drop_unhanded();
    assert!(!outbox.has_unhanded());
    assert_eq!(outbox.frames().count(), 2);
    outbox.drop_handed();
    assert_eq!(outbox.frames().count(), 0);
    assert_eq!(outbox.front_pdu(), None);
}

#[test]
fn poll_transmit_hands_out_one_pdu_at_a_time() {
    let mut outbox = outbox_with(&[b"a", b"b"]);
    assert_eq!(outbox.hand_one(), Some(&b"a"[..]));
    assert_eq!(outbox.front_pdu(), Some(&b"a"[..]));
    outbox.drop_handed();
    assert_eq!(outbox.hand_one(), Some(&b"b"[..]));
    outbox.drop_handed();
    assert_eq!(outbox.hand_one(), None);
}
