//! lock-etcd's key layout as the command reads it (lock-etcd's `layout.rs` is private): the
//! lock key is the prefix and the name; every other key of a lock lives in a space of its own
//! right after the prefix, `prefix + "\0" + space + "/" + len(name) + ":" + name + "/" + rest`.
//! NUL sorts first, so all of them come before every lock key in one range read of the prefix.

use etcd_client::KeyValue;

/// The spaces beside the lock keys, as lock-etcd names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Space {
    /// A semaphore holder (`\0sem/`): `rest` is its token, the value `dl:<token> <permits> <max>`.
    Semaphore,
    /// A fair waiter's queue entry (`\0fair/`), ranked by creation revision.
    Fair,
    /// A reader (`\0rwr/`).
    Reader,
    /// A writer's waiting record (`\0rww/`).
    Waiting,
    /// The read-write fence key (`\0rwf/`): put with every write grant, never deleted.
    Fence,
    /// The holder's note (`\0note/`): the lock key's value, a newline, the note.
    Note,
}

/// The marks after the prefix, and their spaces.
const SPACES: &[(&[u8], Space)] = &[
    (b"\0sem/", Space::Semaphore),
    (b"\0fair/", Space::Fair),
    (b"\0rwr/", Space::Reader),
    (b"\0rww/", Space::Waiting),
    (b"\0rwf/", Space::Fence),
    (b"\0note/", Space::Note),
];

/// The start of `name`'s keys in `space` under `prefix`.
pub(crate) fn under(space: Space, prefix: &str, name: &str) -> Vec<u8> {
    let mark = SPACES
        .iter()
        .find(|(_, s)| *s == space)
        .map_or(&b""[..], |(m, _)| m);
    let mut key = prefix.as_bytes().to_vec();
    key.extend_from_slice(mark);
    key.extend_from_slice(format!("{}:{name}/", name.len()).as_bytes());
    key
}

/// The end of the range of keys that start with `start` (its last byte is `/`, below 0xff).
pub(crate) fn range_end(start: &[u8]) -> Vec<u8> {
    let mut end = start.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

/// What one key under the prefix is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed<'k> {
    /// The lock key of `name`.
    Lock(&'k str),
    /// A key of `name` in `space`.
    Derived(Space, &'k str),
}

/// What `key` (under `prefix`) is; `None` for a key outside the prefix, not UTF-8, or in an
/// unknown space.
pub(crate) fn parse<'k>(prefix: &str, key: &'k [u8]) -> Option<Parsed<'k>> {
    let rest = key.strip_prefix(prefix.as_bytes())?;
    if !rest.starts_with(b"\0") {
        return std::str::from_utf8(rest).ok().map(Parsed::Lock);
    }
    let (space, rest) = SPACES
        .iter()
        .find_map(|(mark, space)| rest.strip_prefix(*mark).map(|r| (*space, r)))?;
    let colon = rest.iter().position(|b| *b == b':')?;
    let len: usize = std::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
    let name = rest.get(colon + 1..colon + 1 + len)?;
    if rest.get(colon + 1 + len) != Some(&b'/') {
        return None;
    }
    Some(Parsed::Derived(space, std::str::from_utf8(name).ok()?))
}

/// Everything read of one lock name: its lock key and the keys beside it.
#[derive(Debug, Default)]
pub(crate) struct Parts {
    pub(crate) lock: Option<KeyValue>,
    pub(crate) note: Option<KeyValue>,
    pub(crate) fence: Option<KeyValue>,
    pub(crate) semaphore: Vec<KeyValue>,
    pub(crate) fair: Vec<KeyValue>,
    pub(crate) readers: Vec<KeyValue>,
    pub(crate) waiting: Vec<KeyValue>,
}

impl Parts {
    /// Files `kv`, of kind `parsed`, here.
    pub(crate) fn add(&mut self, parsed: &Parsed<'_>, kv: KeyValue) {
        match parsed {
            Parsed::Lock(_) => self.lock = Some(kv),
            Parsed::Derived(Space::Note, _) => self.note = Some(kv),
            Parsed::Derived(Space::Fence, _) => self.fence = Some(kv),
            Parsed::Derived(Space::Semaphore, _) => self.semaphore.push(kv),
            Parsed::Derived(Space::Fair, _) => self.fair.push(kv),
            Parsed::Derived(Space::Reader, _) => self.readers.push(kv),
            Parsed::Derived(Space::Waiting, _) => self.waiting.push(kv),
        }
    }
}

/// The permits and `max` a semaphore holder's value says, and its token (`dl:<hex>`).
pub(crate) fn semaphore_value(value: &[u8]) -> Option<(String, u64, u64)> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.split(' ');
    let token = parts.next()?.to_owned();
    let permits = parts.next()?.parse().ok()?;
    let max = parts.next()?.parse().ok()?;
    Some((token, permits, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_lock_and_space() {
        assert_eq!(parse("p/", b"p/job:1"), Some(Parsed::Lock("job:1")));
        let reader = [under(Space::Reader, "p/", "a/b"), b"0123".to_vec()].concat();
        assert_eq!(
            parse("p/", &reader),
            Some(Parsed::Derived(Space::Reader, "a/b"))
        );
        assert_eq!(
            parse("p/", &under(Space::Note, "p/", "x")),
            Some(Parsed::Derived(Space::Note, "x"))
        );
        assert_eq!(parse("p/", b"p/\0sem/9:x/"), None, "a length past the end");
        assert_eq!(parse("p/", b"p/\0zzz/1:x/"), None, "an unknown space");
        assert_eq!(parse("p/", b"q/x"), None);
        assert_eq!(
            range_end(&under(Space::Fair, "p/", "x")),
            b"p/\0fair/1:x0".to_vec()
        );
    }

    #[test]
    fn semaphore_values_say_token_permits_and_max() {
        assert_eq!(
            semaphore_value(b"dl:ab 2 5"),
            Some(("dl:ab".to_owned(), 2, 5))
        );
        assert_eq!(semaphore_value(b"dl:ab"), None);
    }
}
