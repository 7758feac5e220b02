use super::*;
use crate::rtm::{Mode, SubscribeArgs};

fn sub(key: &str) -> Subscription {
    let args = SubscribeArgs::default();
    let parts = Subscription::args_parts(&args).expect("no arguments");
    Subscription::new(key, Mode::Simple, &args, parts).expect("a valid key")
}

fn keys<S: SubscriptionSlots>(t: &Table<S>) -> Vec<String> {
    t.iter().map(|s| s.key().to_owned()).collect()
}

/// Against a `Vec` model: pushes up to the capacity (then refused), removals anywhere keep the order of the rest, `get` sees exactly the live
/// records, `clear` empties; the storage's contents on entry do not matter.
#[test]
fn the_table_is_a_vec_in_the_callers_slots() {
    let mut rng = crate::testing::Xorshift(7);
    for capacity in 0..5 {
        let dirty = vec![SubscriptionSlot(Some(sub("stale"))); capacity];
        let mut table = Table::new(dirty);
        let mut model: Vec<String> = Vec::new();
        for step in 0..400 {
            match rng.below(7) {
                0..=3 => {
                    let key = format!("k{step}");
                    let pushed = table.push(sub(&key));
                    assert_eq!(pushed, model.len() < capacity);
                    if pushed {
                        model.push(key);
                    }
                }
                4 | 5 => {
                    let i = rng.below(model.len() as u64 + 2) as usize;
                    table.remove(i);
                    if i < model.len() {
                        model.remove(i);
                    }
                }
                _ => {
                    if rng.below(8) == 0 {
                        table.clear();
                        model.clear();
                    }
                }
            }
            assert_eq!(keys(&table), model);
            assert_eq!(table.len(), model.len());
            assert_eq!(table.is_full(), model.len() == capacity);
            for i in 0..capacity + 1 {
                assert_eq!(
                    table.get(i).map(|s| s.key().to_owned()),
                    model.get(i).cloned()
                );
            }
        }
    }
}
