use super::{InFlight, Pending, Slots};
use crate::rtm::requests::ReqKind;
use crate::rtm::Ticket;
use crate::time::Instant;

fn req(id: u32, deadline: Option<u64>) -> Pending {
    Pending::new(
        id,
        Ticket::from_raw(id),
        ReqKind::Publish,
        deadline.map(Instant::from_secs),
    )
}

fn ids<P: Slots>(t: &InFlight<P>) -> Vec<u32> {
    t.iter().map(|p| p.id).collect()
}

/// A storage that starts with some entries and grows by one or by doubling (as the std
/// client's) up to `max`, its new entries filled with garbage (their contents on entry
/// do not matter). The client's tests use it too.
pub(crate) struct Growing {
    pub(crate) entries: Vec<Pending>,
    pub(crate) max: usize,
    pub(crate) double: bool,
}

impl Slots for Growing {
    fn entries(&self) -> &[Pending] {
        &self.entries
    }
    fn entries_mut(&mut self) -> &mut [Pending] {
        &mut self.entries
    }
    fn grow(&mut self) -> bool {
        let len = self.entries.len();
        let to = if self.double { len * 2 } else { len + 1 };
        let to = to.max(1).min(self.max);
        self.entries.resize(to, req(0xDEAD, Some(1)));
        to > len
    }
}

/// A model of the table (a list in id order) against the ring, through every mix of
/// pushes, out-of-order answers and expiries a small seeded generator makes: a fixed
/// table of 5, and tables that grow to 5 from 0, 1 or 2 entries, by one or by doubling
/// (growing with the ring wrapped).
#[test]
fn behaves_as_an_ordered_list() {
    check_ordered_list(|| [Pending::EMPTY; 5]);
    for start in 0..3 {
        for double in [false, true] {
            check_ordered_list(|| Growing {
                entries: vec![Pending::EMPTY; start],
                max: 5,
                double,
            });
        }
    }
}

fn check_ordered_list<P: Slots>(storage: impl Fn() -> P) {
    let mut rng = crate::testing::Xorshift(0x2545_F491_4F6C_DD1Du64);
    let mut rand = move |n: u64| rng.below(n);
    for _ in 0..200 {
        let mut table = InFlight::new(storage());
        let mut model: Vec<Pending> = Vec::new();
        // Start near the wrap of the id space now and then.
        let mut next: u32 = if rand(2) == 0 { u32::MAX - 3 } else { 1 };
        for _ in 0..60 {
            match rand(4) {
                0 | 1 => {
                    let p = req(next, Some(rand(10)).filter(|&d| d != 9));
                    next = next.wrapping_add(1 + rand(2) as u32);
                    let pushed = table.push(p);
                    assert_eq!(pushed, model.len() < 5);
                    if pushed {
                        model.push(p);
                    }
                }
                2 => {
                    let id = match model.get(rand(6) as usize) {
                        Some(p) => p.id,
                        None => next.wrapping_add(7),
                    };
                    let want = model.iter().position(|p| p.id == id);
                    assert_eq!(table.get(id).map(|p| p.id), want.map(|_| id));
                    let got = table.take(id).map(|p| p.id);
                    assert_eq!(got, want.map(|i| model.remove(i).id));
                    assert!(table.get(id).is_none());
                }
                _ => {
                    let now = rand(10);
                    let mut over = Vec::new();
                    table.expire(Instant::from_secs(now), |p| over.push(p.id));
                    let (gone, kept): (Vec<Pending>, Vec<Pending>) = model
                        .into_iter()
                        .partition(|p| p.deadline().is_some_and(|d| d <= Instant::from_secs(now)));
                    assert_eq!(over, gone.iter().map(|p| p.id).collect::<Vec<_>>());
                    model = kept;
                }
            }
            assert_eq!(ids(&table), model.iter().map(|p| p.id).collect::<Vec<_>>());
            assert_eq!(table.len(), model.len());
            assert_eq!(!table.make_room(), model.len() == 5);
            assert_eq!(
                table.earliest_deadline(),
                model.iter().filter_map(|p| p.deadline()).min()
            );
            assert_eq!(
                table.timed,
                model.iter().filter(|p| p.deadline().is_some()).count()
            );
        }
        let mut drained = Vec::new();
        table.drain(|p| drained.push(p.id));
        assert_eq!(drained, model.iter().map(|p| p.id).collect::<Vec<_>>());
        assert_eq!(table.len(), 0);
        assert!(ids(&table).is_empty());
        // Drained entries are holes: their deadlines are gone with them.
        assert_eq!(table.earliest_deadline(), None);
        assert!(table.push(req(next, None)));
        assert_eq!(table.earliest_deadline(), None);
    }
}

/// An old request that never gets its reply does not block the table: the answered ones
/// after it are gathered away when the ring comes round.
#[test]
fn a_stuck_request_leaves_room_for_the_rest() {
    let mut table: InFlight<[Pending; 3]> = InFlight::new([Pending::EMPTY; 3]);
    assert!(table.push(req(1, None)));
    for id in 2..100 {
        assert!(table.push(req(id, None)), "push {id}");
        assert_eq!(table.take(id).map(|p| p.id), Some(id));
    }
    assert_eq!(ids(&table), vec![1]);
    assert!(table.push(req(100, None)) && table.push(req(101, None)));
    assert!(!table.make_room() && !table.push(req(102, None)));
    assert_eq!(ids(&table), vec![1, 100, 101]);
}
