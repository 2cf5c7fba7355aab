//! JSON from clients, with every object's keys unique: serde_json keeps the last of a
//! repeated key silently (`{"partitions": 1, "partitions": 3}` reads as 3), so one
//! request could mean two things to two readers. Used for every JSON a client sends
//! (synthetic payloads, the PoRep envelope and its C1 output).

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};

/// `bytes` as a `T`, refused when any object in it repeats a key (the error names the key).
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, serde_json::Error> {
    check_unique_keys(bytes)?;
    serde_json::from_slice(bytes)
}

/// Whether every object in the JSON text `bytes` has unique keys (and the text is JSON).
pub fn check_unique_keys(bytes: &[u8]) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de::Deserialize::deserialize(&mut de).map(|Unique| ())?;
    de.end()
}

/// Any JSON value whose objects' keys are unique, read and dropped.
struct Unique;

impl<'de> de::Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueVisitor)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Unique;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Unique, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                let shown: String = key.chars().take(64).collect();
                return Err(de::Error::custom(format!("the key {shown:?} appears twice in one object")));
            }
            map.next_value::<Unique>()?;
        }
        Ok(Unique)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Unique, A::Error> {
        while seq.next_element::<Unique>()?.is_some() {}
        Ok(Unique)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_str<E>(self, _: &str) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_unit<E>(self) -> Result<Unique, E> {
        Ok(Unique)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_are_refused_at_any_depth_and_others_pass() {
        for ok in [r#"{"a": 1, "b": [1, {"a": 2}], "c": {"a": 3}}"#, "[1, 2]", "3", r#""x""#, "null", r#"{"a": {"b": {"b": 1}}}"#] {
            check_unique_keys(ok.as_bytes()).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [r#"{"log_size": 10, "partitions": 1, "partitions": 3}"#, r#"[{"a": 1, "a": 1}]"#, r#"{"x": {"y": [{"z": 1, "z": 2}]}}"#] {
            let e = check_unique_keys(bad.as_bytes()).unwrap_err().to_string();
            assert!(e.contains("appears twice"), "{bad}: {e}");
        }
        // Not JSON, or trailing text.
        assert!(check_unique_keys(b"{").is_err() && check_unique_keys(b"{} x").is_err());
        let v: serde_json::Value = from_slice(br#"{"a": 1}"#).unwrap();
        assert_eq!(v["a"], 1);
    }
}
