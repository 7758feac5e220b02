use std::vec::Vec;

use super::*;

/// Against a model (the set of live slots and what each holds), through a seeded mix of
/// takes, writes and give-backs: no slot is handed out twice, none beyond the table,
/// a live slot's bytes survive everything done to the others, and the table fills up to
/// exactly `SUBS` slots.
#[test]
fn slots_are_distinct_and_keep_their_bytes() {
    const SUBS: usize = 7;
    let mut rng = crate::testing::Xorshift(0x9E37_79B9_7F4A_7C15u64);
    let mut rand = move |n: u64| rng.below(n);
    for _ in 0..200 {
        let mut slots = ArgSlots::new([0u8; SUBS * 5 + 3]);
        assert_eq!(slots.slot_size(SUBS), 5);
        let mut live: Vec<(u16, u8)> = Vec::new();
        for step in 0..80u8 {
            if rand(3) > 0 {
                match slots.take(SUBS) {
                    Some(slot) => {
                        assert!(usize::from(slot) < SUBS);
                        assert!(live.iter().all(|&(s, _)| s != slot), "slot {slot} twice");
                        slots.get_mut(slot, SUBS).fill(step);
                        live.push((slot, step));
                    }
                    None => assert_eq!(live.len(), SUBS, "refused with room left"),
                }
            } else if !live.is_empty() {
                let (slot, _) = live.swap_remove(rand(live.len() as u64) as usize);
                slots.give_back(slot, SUBS);
            }
            for &(slot, mark) in &live {
                assert!(
                    slots.get(slot, SUBS).iter().all(|&b| b == mark),
                    "slot {slot}"
                );
            }
        }
    }
}

#[test]
fn no_room_and_sizes() {
    let mut slots = ArgSlots::new([0u8; 8]);
    assert_eq!(slots.slot_size(2), 4);
    assert_eq!(slots.take(2), Some(0));
    assert_eq!(slots.take(2), Some(1));
    assert_eq!(slots.take(2), None, "both taken");
    slots.give_back(0, 2);
    assert_eq!(slots.take(2), Some(0));
    slots.clear();
    assert_eq!(slots.take(2), Some(0));
    // Slots under two bytes hold nothing; no storage at all, or no subscription, likewise.
    assert_eq!(ArgSlots::new([0u8; 3]).slot_size(2), 0);
    assert_eq!(ArgSlots::new([0u8; 0]).slot_size(4), 0);
    assert_eq!(ArgSlots::new([0u8; 16]).slot_size(0), 0);
}
