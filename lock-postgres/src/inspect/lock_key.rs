//! An advisory lock's identity in `pg_locks` ([`Key`]), from a lock name and back to the name a
//! listing gives it.

use tokio_postgres::types::{ToSql, Type};

use crate::advisory_key;

/// How a listing names an advisory lock whose name it cannot know (`advisory:<key>`), and
/// how such a name reads back.
pub(super) const PREFIX: &str = "advisory:";

/// An advisory lock's identity in `pg_locks`: one `bigint` key is `(high 32 bits, low 32
/// bits, 1)`; two `int4` keys are `(k1, k2, 2)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Key {
    pub(super) classid: i64,
    pub(super) objid: i64,
    pub(super) objsubid: i32,
}

impl Key {
    /// The `bigint` key `key` (`pg_advisory_lock(bigint)`).
    pub(super) fn big(key: i64) -> Self {
        // `as` splits the two's complement into its halves, as the server does.
        let bits = key as u64;
        Self {
            classid: (bits >> 32) as i64,
            objid: (bits & 0xffff_ffff) as i64,
            objsubid: 1,
        }
    }

    /// The key a name means: `advisory:<bigint>` or `advisory:<int4>,<int4>` as a listing
    /// names them, else the name's own key ([`advisory_key`]).
    pub(super) fn of_name(name: &str) -> Self {
        if let Some(rest) = name.strip_prefix(PREFIX) {
            if let Ok(key) = rest.parse::<i64>() {
                return Self::big(key);
            }
            if let Some((a, b)) = rest.split_once(',')
                && let (Ok(a), Ok(b)) = (a.trim().parse::<i32>(), b.trim().parse::<i32>())
            {
                return Self {
                    classid: i64::from(a as u32),
                    objid: i64::from(b as u32),
                    objsubid: 2,
                };
            }
        }
        Self::big(advisory_key(name))
    }

    /// How a listing names it: `<bigint>` or `<int4>,<int4>`.
    // classid and objid are oids (32 bits): the casts take the bits back as the signed keys
    // they were given as, truncating nothing.
    #[allow(clippy::cast_possible_truncation)]
    pub(super) fn text(self) -> String {
        if self.objsubid == 1 {
            let key = ((self.classid as u64) << 32 | (self.objid as u64 & 0xffff_ffff)) as i64;
            key.to_string()
        } else {
            format!(
                "{},{}",
                self.classid as u32 as i32, self.objid as u32 as i32
            )
        }
    }

    /// The key as the three parameters `$2, $3, $4` of the statements of `advisory.rs`.
    pub(super) fn params(&self) -> [(&(dyn ToSql + Sync), Type); 3] {
        [
            (&self.classid, Type::INT8),
            (&self.objid, Type::INT8),
            (&self.objsubid, Type::INT4),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::Key;

    #[test]
    fn keys_split_and_join_as_the_server_does() {
        for key in [0, 1, -1, i64::MIN, i64::MAX, -5_560_419_505_042_474_287] {
            let split = Key::big(key);
            assert!(split.classid >= 0 && split.classid <= i64::from(u32::MAX));
            assert_eq!(split.text(), key.to_string());
            assert_eq!(Key::of_name(&format!("advisory:{key}")), split);
        }
        // pg_advisory_lock(1, 2) and (-1, 7): classid and objid as oids.
        let pair = Key::of_name("advisory:-1,7");
        assert_eq!(
            (pair.classid, pair.objid, pair.objsubid),
            (4_294_967_295, 7, 2)
        );
        assert_eq!(pair.text(), "-1,7");
        assert_eq!(
            Key::of_name("my first Postgres advisory lock!"),
            Key::big(-5_560_419_505_042_474_287)
        );
    }
}
