use super::*;

#[test]
fn fifo_order_and_compaction() {
    let mut q = RecordFifo::new([0u8; 32]);
    assert_eq!(RecordFifo::new([0u8; 32]).max_record(), 28);
    assert!(q.push(b"0123456789"));
    assert!(q.push(b"abcdefghij"));
    assert!(
        !q.push(b"ABCDEFGHIJ"),
        "4+10+4+10 = 28, no room for 14 more"
    );
    assert_eq!(q.front(), Some(&b"0123456789"[..]));
    q.pop_front();
    // Tail room is 4 bytes; the freed front takes the record.
    assert!(q.push(b"ABCDEFGHIJ"));
    assert_eq!(q.len(), 2);
    assert_eq!(q.front(), Some(&b"abcdefghij"[..]));
    q.pop_front();
    assert_eq!(q.front(), Some(&b"ABCDEFGHIJ"[..]));
    q.pop_front();
    assert!(q.is_empty());
    assert_eq!(q.front(), None);
    q.pop_front();
    assert!(q.is_empty());
    assert!(q.push(&[7; 28]));
    assert!(!q.push(b""));
}

#[test]
fn in_place_writes_and_scan() {
    let mut q = RecordFifo::new([0u8; 64]);
    assert!(q.push_with(|dst| {
        dst.get_mut(..3)?.copy_from_slice(b"xyz");
        Some(3)
    }));
    assert!(!q.push_with(|_| None));
    assert!(q.push(b"12"));
    let mut seen = 0;
    q.for_each_mut(|r| {
        seen += r.len();
        if let Some(b) = r.first_mut() {
            *b = b'!';
        }
    });
    assert_eq!(seen, 5);
    assert_eq!(q.front(), Some(&b"!yz"[..]));
    if let Some(r) = q.front_mut() {
        r[1] = b'?';
    }
    assert_eq!(q.front(), Some(&b"!?z"[..]));
    q.clear();
    assert!(q.is_empty());
    let tiny = RecordFifo::new([0u8; 2]);
    assert_eq!(RecordFifo::new([0u8; 2]).max_record(), 0);
    assert!(tiny.front().is_none());
}

#[test]
fn a_full_queue_drained_as_it_fills_keeps_its_order() {
    // Records of varying size, the queue kept near full for many rounds.
    let mut q = RecordFifo::new([0u8; 256]);
    let (mut next_in, mut next_out) = (0u32, 0u32);
    let record = |n: u32| {
        let len = 1 + (n as usize * 7) % 30;
        let mut r = std::vec![0u8; len];
        r[0] = n as u8;
        r
    };
    for _ in 0..2000 {
        while q.push(&record(next_in)) {
            next_in += 1;
        }
        let mut seen = 0;
        q.for_each_mut(|_| seen += 1);
        assert_eq!(seen, q.len());
        for _ in 0..3 {
            assert_eq!(q.front(), Some(&record(next_out)[..]));
            q.pop_front();
            next_out += 1;
        }
    }
    assert!(next_in > 5_000);
    while let Some(front) = q.front() {
        assert_eq!(front, &record(next_out)[..]);
        q.pop_front();
        next_out += 1;
    }
    assert_eq!(next_in, next_out);
}

#[test]
fn two_small_gaps_are_joined_for_a_record_that_fits_neither() {
    let mut q = RecordFifo::new([0u8; 32]);
    assert!(q.push(b"01234")); // 0..9
    assert!(q.push(b"abcdefghijklm")); // 9..26: tail room 6
    q.pop_front(); // front gap 9
    assert!(q.push(&[b'x'; 8])); // fits neither the tail (6) nor the front (9 < 12) ...
    assert_eq!(q.front(), Some(&b"abcdefghijklm"[..])); // ... so both were joined
    q.pop_front();
    assert_eq!(q.front(), Some(&[b'x'; 8][..]));
}

#[test]
fn truncate_keeps_the_oldest_records_in_either_region() {
    // Records 2 and 3 in the older region, 4 and 5 wrapped to the front.
    let filled = || {
        let mut q = RecordFifo::new([0u8; 32]);
        for r in *b"012" {
            assert!(q.push(&[r; 5])); // 9 bytes each: 0..27
        }
        q.pop_front();
        q.pop_front(); // the older region is 18..27
        assert!(q.push(&[b'3'; 1])); // the tail: 27..32
        assert!(q.push(&[b'4'; 1])); // wrapped: 0..5
        assert!(q.push(&[b'5'; 1])); // wrapped: 5..10
        q
    };
    let firsts = |q: &RecordFifo<[u8; 32]>| q.records().map(|r| r[0]).collect::<std::vec::Vec<_>>();
    assert_eq!(firsts(&filled()), b"2345");
    // Keep one of the older region: the wrapped records go too, and new ones follow it.
    let mut q = filled();
    q.truncate(1);
    assert_eq!((firsts(&q), q.len()), (b"2".to_vec(), 1));
    assert!(q.push(&[b'6'; 1]));
    assert_eq!(firsts(&q), b"26");
    // Keep into the wrapped region.
    let mut q = filled();
    q.truncate(3);
    assert_eq!((firsts(&q), q.len()), (b"234".to_vec(), 3));
    assert!(q.push(&[b'6'; 1]));
    assert_eq!(firsts(&q), b"2346");
    // Keep more than there is, or nothing.
    let mut q = filled();
    q.truncate(9);
    assert_eq!(q.len(), 4);
    q.truncate(0);
    assert!(q.is_empty());
}
