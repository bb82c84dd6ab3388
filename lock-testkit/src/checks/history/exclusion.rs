//! Mutual exclusion over valid leases, per name and kind: two holds open at once where one of
//! them is exclusive (a mutex, a writer, a fair holder), and more permit holders at once than
//! the semaphore has permits; and fencing tokens that did not grow from grant to grant.

use std::collections::BTreeMap;

use super::{Hold, Share};

/// Two holds of one name that were open at once, one of them exclusive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The hold that started first.
    pub first: Hold,
    /// The one that started inside it.
    pub second: Hold,
    /// How long both were open, ns.
    pub overlap_ns: u64,
}

/// The holds of each name, in no particular order.
pub(super) fn by_name(holds: &[Hold]) -> BTreeMap<&str, Vec<&Hold>> {
    let mut names: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for hold in holds {
        names.entry(hold.name.as_str()).or_default().push(hold);
    }
    names
}

/// Every pair of holds of one name open at once for longer than `slack_ns`, one of them
/// exclusive (readers beside readers and permit holders beside permit holders are the point
/// of those kinds; the permit count is [`shared`]'s).
pub(super) fn overlaps(holds: &[&Hold], slack_ns: u64) -> Vec<Overlap> {
    let mut sorted: Vec<&Hold> = holds
        .iter()
        .copied()
        .filter(|h| h.end_ns > h.start_ns)
        .collect();
    sorted.sort_by_key(|h| (h.start_ns, h.end_ns));
    let mut found = Vec::new();
    for (i, first) in sorted.iter().enumerate() {
        for second in &sorted[i + 1..] {
            if second.start_ns >= first.end_ns {
                break;
            }
            let overlap_ns = first.end_ns.min(second.end_ns) - second.start_ns;
            let exclusive = first.share.is_exclusive() || second.share.is_exclusive();
            if exclusive && overlap_ns > slack_ns {
                found.push(Overlap {
                    first: (*first).clone(),
                    second: (*second).clone(),
                    overlap_ns,
                });
            }
        }
    }
    found
}

/// Shared holders (readers, permit holders) of one name open at once: `(most, over)`, where
/// `most` is the most holds open at once and `over` counts the grants that arrived while as
/// many permit holders as the semaphore has were inside already. Each hold is taken to end
/// `slack_ns` early, as two holds must overlap by more than the slack to count in
/// [`overlaps`].
pub(super) fn shared(holds: &[&Hold], slack_ns: u64) -> (usize, usize) {
    // (time, 0 = an end before a start at the same time, the hold's permits if a start)
    let mut events: Vec<(u64, u8, Option<u32>)> = Vec::new();
    for h in holds.iter().filter(|h| !h.share.is_exclusive()) {
        let max = match h.share {
            Share::Permit { max } => Some(max),
            _ => None,
        };
        let end = h.end_ns.saturating_sub(slack_ns);
        if end > h.start_ns {
            events.push((h.start_ns, 1, max));
            events.push((end, 0, max));
        }
    }
    events.sort_unstable_by_key(|&(at, order, _)| (at, order));
    let (mut open, mut most, mut over) = (0_usize, 0, 0);
    for (_, order, max) in events {
        if order == 0 {
            open = open.saturating_sub(1);
            continue;
        }
        open += 1;
        most = most.max(open);
        if max.is_some_and(|max| open > usize::try_from(max).unwrap_or(usize::MAX)) {
            over += 1;
        }
    }
    (most, over)
}

/// Exclusive grants of one name whose token was not above that of an exclusive grant that
/// arrived before they were requested: a holder the fence would wrongly turn away, or two
/// holders sharing a token. (A reader's token may be the last write's, and shared holders
/// write nothing: only exclusive grants must grow.)
pub(super) fn token_regressions(holds: &[&Hold]) -> Vec<Hold> {
    let mut by_grant: Vec<&Hold> = holds
        .iter()
        .copied()
        .filter(|h| h.share.is_exclusive())
        .collect();
    by_grant.sort_by_key(|h| h.start_ns);
    let granted: Vec<u64> = by_grant.iter().map(|h| h.start_ns).collect();
    let mut best = 0;
    let running_max: Vec<u64> = by_grant
        .iter()
        .map(|h| {
            best = best.max(h.token);
            best
        })
        .collect();
    by_grant
        .iter()
        .filter(|h| {
            let before = granted.partition_point(|&t| t < h.requested_ns);
            before > 0 && running_max[before - 1] >= h.token
        })
        .map(|h| (*h).clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(process: u32, token: u64, start_ns: u64, end_ns: u64, share: Share) -> Hold {
        Hold {
            name: "n".to_owned(),
            process,
            token,
            requested_ns: start_ns - 1,
            start_ns,
            end_ns,
            share,
        }
    }

    #[test]
    fn readers_share_and_a_writer_is_alone() {
        let read = Share::Read;
        let all = [
            hold(0, 1, 10, 100, read),
            hold(1, 1, 20, 120, read),
            hold(2, 2, 110, 200, Share::Exclusive),
            hold(3, 2, 300, 400, read),
        ];
        let refs: Vec<&Hold> = all.iter().collect();
        let found = overlaps(&refs, 0);
        assert_eq!(found.len(), 1, "only the writer beside a reader: {found:?}");
        assert_eq!((found[0].first.process, found[0].second.process), (1, 2));
        assert_eq!(shared(&refs, 0), (2, 0), "two readers at once, no permits");
    }

    #[test]
    fn more_permit_holders_than_permits_are_counted() {
        let permit = Share::Permit { max: 2 };
        let mut all = vec![
            hold(0, 1, 10, 100, permit),
            hold(1, 1, 20, 100, permit),
            hold(2, 1, 100, 200, permit),
        ];
        let refs: Vec<&Hold> = all.iter().collect();
        assert!(overlaps(&refs, 0).is_empty(), "permit holders share");
        assert_eq!(
            shared(&refs, 0),
            (2, 0),
            "a start at another's end: a handoff"
        );
        all.push(hold(3, 1, 50, 150, permit));
        let refs: Vec<&Hold> = all.iter().collect();
        assert_eq!(
            shared(&refs, 0),
            (3, 1),
            "the grant with both permits taken"
        );
        assert_eq!(shared(&refs, 60), (2, 0), "within the slack");
    }

    #[test]
    fn overlaps_are_found_and_handoffs_are_not() {
        let x = Share::Exclusive;
        let all = [
            hold(0, 1, 10, 100, x),
            hold(1, 2, 101, 200, x),
            hold(2, 3, 150, 300, x),
        ];
        let refs: Vec<&Hold> = all.iter().collect();
        let found = overlaps(&refs, 0);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].first.token, found[0].second.token), (2, 3));
        assert_eq!(found[0].overlap_ns, 50);
        assert!(overlaps(&refs, 50).is_empty(), "within the slack");
    }

    #[test]
    fn tokens_must_grow_from_grant_to_grant() {
        let x = Share::Exclusive;
        let good = [hold(0, 5, 10, 20, x), hold(1, 6, 30, 40, x)];
        assert!(token_regressions(&good.iter().collect::<Vec<_>>()).is_empty());
        let bad = [hold(0, 6, 10, 20, x), hold(1, 5, 30, 40, x)];
        assert_eq!(token_regressions(&bad.iter().collect::<Vec<_>>()).len(), 1);
        let shared_token = [hold(0, 6, 10, 20, x), hold(1, 6, 30, 40, x)];
        assert_eq!(
            token_regressions(&shared_token.iter().collect::<Vec<_>>()).len(),
            1
        );
    }
}
