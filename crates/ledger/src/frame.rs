//! Line framing: how one record becomes one self-checking JSON line, and back.
//!
//! A line is `{"seq":N,"ts":"…","kind":"…","data":{…},"crc":"xxxxxxxx"}` followed by `\n`.
//! The members appear in exactly this order. `crc` is the CRC-32C (Castagnoli) of the line's
//! bytes with the `,"crc":"xxxxxxxx"` member removed (so of `{"seq":…,"data":{…}}`), written
//! as 8 lowercase hex digits. Anything else is rejected: the decoder never guesses.

use std::fmt;
use std::marker::PhantomData;

use serde::Serialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

use crate::error::Problem;

/// `,"crc":"` + 8 hex digits + `"}`.
pub const CRC_SUFFIX_LEN: usize = 18;
const CRC_KEY: &[u8] = b",\"crc\":\"";

/// Builds the bytes of one line (newline included) into `out`.
///
/// `data_json` must be the compact JSON of the record's data (serde_json's compact writer never
/// emits raw newlines, so the result is always exactly one line).
pub fn encode_line(out: &mut Vec<u8>, seq: u64, ts: &str, kind: &str, data_json: &[u8]) {
    out.clear();
    out.extend_from_slice(b"{\"seq\":");
    out.extend_from_slice(itoa_u64(seq).as_bytes());
    out.extend_from_slice(b",\"ts\":");
    write_json_str(out, ts);
    out.extend_from_slice(b",\"kind\":");
    write_json_str(out, kind);
    out.extend_from_slice(b",\"data\":");
    out.extend_from_slice(data_json);
    let crc = crc32c::crc32c_append(crc32c::crc32c(out), b"}");
    out.extend_from_slice(CRC_KEY);
    out.extend_from_slice(format!("{crc:08x}").as_bytes());
    out.extend_from_slice(b"\"}\n");
}

fn itoa_u64(v: u64) -> String {
    v.to_string()
}

fn write_json_str(out: &mut Vec<u8>, s: &str) {
    // serde_json's string escaping; writing to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Serializes record data to compact JSON, checking that it is a JSON object.
pub fn data_to_json<T: Serialize + ?Sized>(data: &T) -> Result<Vec<u8>, String> {
    let bytes = serde_json::to_vec(data).map_err(|e| e.to_string())?;
    if bytes.first() != Some(&b'{') {
        return Err("record data must serialize to a JSON object".into());
    }
    Ok(bytes)
}

/// Checks the CRC of one line (without its newline). Returns the checked line on success.
pub fn check_crc(line: &[u8]) -> Result<(), Problem> {
    if line.len() < CRC_SUFFIX_LEN + 2 || line[0] != b'{' {
        return Err(Problem::Malformed(
            "not a ledger line (too short or not a JSON object)".into(),
        ));
    }
    let split = line.len() - CRC_SUFFIX_LEN;
    let suffix = &line[split..];
    if &suffix[..CRC_KEY.len()] != CRC_KEY || &suffix[CRC_KEY.len() + 8..] != b"\"}" {
        return Err(Problem::Malformed(
            "the last member is not \"crc\":\"xxxxxxxx\"".into(),
        ));
    }
    let hex = &suffix[CRC_KEY.len()..CRC_KEY.len() + 8];
    let found = parse_hex8(hex)
        .ok_or_else(|| Problem::Malformed("crc is not 8 lowercase hex digits".into()))?;
    let computed = crc32c::crc32c_append(crc32c::crc32c(&line[..split]), b"}");
    if computed != found {
        return Err(Problem::CrcMismatch {
            expected: format!("{computed:08x}"),
            found: String::from_utf8_lossy(hex).into_owned(),
        });
    }
    Ok(())
}

fn parse_hex8(hex: &[u8]) -> Option<u32> {
    let mut v: u32 = 0;
    for &b in hex {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => return None,
        };
        v = (v << 4) | u32::from(d);
    }
    Some(v)
}

/// Typed record data, chosen by the record's kind while the line is parsed (one pass).
pub trait Payload<'de>: Sized {
    fn deserialize_kind<D: Deserializer<'de>>(kind: &str, data: D) -> Result<Self, D::Error>;
}

/// Payload that keeps the data as raw JSON text (for tools that don't know the kinds).
impl<'de: 'a, 'a> Payload<'de> for &'a serde_json::value::RawValue {
    fn deserialize_kind<D: Deserializer<'de>>(_kind: &str, data: D) -> Result<Self, D::Error> {
        serde::Deserialize::deserialize(data)
    }
}

/// Payload that only checks the data is well-formed JSON.
impl<'de> Payload<'de> for de::IgnoredAny {
    fn deserialize_kind<D: Deserializer<'de>>(_kind: &str, data: D) -> Result<Self, D::Error> {
        serde::Deserialize::deserialize(data)
    }
}

/// Payload that parses the data into a JSON value.
impl<'de> Payload<'de> for serde_json::Value {
    fn deserialize_kind<D: Deserializer<'de>>(_kind: &str, data: D) -> Result<Self, D::Error> {
        serde::Deserialize::deserialize(data)
    }
}

/// The decoded members of one line.
#[derive(Debug, Clone)]
pub struct Envelope<'a, P> {
    pub seq: u64,
    pub ts: &'a str,
    pub kind: &'a str,
    pub data: P,
}

/// What a payload's error says when the line holds a kind it does not know (a newer program
/// wrote it): such a line is [`Problem::Newer`], not damage.
pub const NEWER_VERSION: &str = "written by a newer version";

/// The problem for a payload that did not decode.
fn malformed(e: serde_json::Error) -> Problem {
    let text = e.to_string();
    if text.contains(NEWER_VERSION) {
        Problem::Newer(text)
    } else {
        Problem::Malformed(text)
    }
}

/// Parses a CRC-checked line into its envelope, the data typed by `P` according to `kind`.
pub fn decode_envelope<'a, P: Payload<'a>>(line: &'a [u8]) -> Result<Envelope<'a, P>, Problem> {
    let text = match simdutf8::basic::from_utf8(line) {
        Ok(text) => text,
        // the slow check again, for where the bad byte is
        Err(_) => {
            std::str::from_utf8(line).map_err(|e| Problem::Malformed(format!("not UTF-8: {e}")))?
        }
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let env = de
        .deserialize_map(EnvelopeVisitor::<P>(PhantomData))
        .map_err(malformed)?;
    de.end().map_err(|e| Problem::Malformed(e.to_string()))?;
    Ok(env)
}

/// A second decoder for bulk replay: simd-json (SIMD-parallel JSON parsing), held to
/// serde_json's answers. [`decode_envelope`] (serde_json) is the reference: simd-json decodes
/// only a line on which it is known to agree with it, and any other line, or one simd-json
/// refuses, is decoded by serde_json, so the values and the errors (and their words) are
/// always serde_json's. `tests/fast_decoder.rs` holds the two to that, on generated, damaged
/// and real lines. Where they differ, found by that test or read in their code:
/// - floating-point numbers: each parser rounds some inputs one unit off where the other does
///   not, and `-0` is a float to serde_json and an integer to simd-json. A line whose parse
///   holds a float or a `-0` is decoded by serde_json;
/// - integers of 19 digits or more: simd-json does not check the byte after them, so it
///   accepts `1000000000000000000x`. A line whose parse holds one is decoded by serde_json;
/// - an escape in `ts` or `kind`: serde_json refuses it (they are borrowed from the line),
///   simd-json unescapes in place and accepts;
/// - a `\u` escape of a lone surrogate: serde_json refuses it, simd-json can read U+0000;
/// - nesting deeper than serde_json's limit of 128: simd-json has none, and serde's
///   visitors would then recurse on the thread's stack as deep as the line goes;
/// - a NUL byte between tokens: simd-json skips it (a ledger line never holds one: the
///   framing refuses it first).
pub struct FastDecoder {
    buffers: simd_json::Buffers,
    /// simd-json rewrites what it parses (it unescapes strings in place): it parses a copy.
    scratch: Vec<u8>,
}

impl Default for FastDecoder {
    fn default() -> Self {
        FastDecoder {
            buffers: simd_json::Buffers::new(64 * 1024),
            scratch: Vec::with_capacity(64 * 1024),
        }
    }
}

impl FastDecoder {
    /// [`decode_envelope`], faster; the same values and the same errors.
    pub fn decode<'s, P: Payload<'s>>(
        &'s mut self,
        line: &'s [u8],
    ) -> Result<Envelope<'s, P>, Problem> {
        // (invalid UTF-8 is refused by simd-json too, and then decoded by serde_json)
        if !simd_agrees(line) {
            return decode_envelope(line);
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(line);
        let Ok(tape) = simd_json::to_tape_with_buffers(&mut self.scratch, &mut self.buffers) else {
            return decode_envelope(line);
        };
        let differs = tape.0.iter().any(|node| {
            use simd_json::{Node, StaticNode};
            match node {
                Node::Static(StaticNode::F64(_)) => true,
                // `-0` (a float to serde_json) is the only integer simd-json reads as a
                // signed zero; `0` is unsigned
                Node::Static(StaticNode::I64(n)) => *n == 0 || n.unsigned_abs() >= LONG_INTEGER,
                Node::Static(StaticNode::U64(n)) => *n >= LONG_INTEGER,
                _ => false,
            }
        });
        if differs {
            return decode_envelope(line);
        }
        match tape.deserialize::<EnvelopeOf<P>>() {
            Ok(EnvelopeOf(env)) => Ok(env),
            Err(_) => decode_envelope(line),
        }
    }
}

/// simd-json reads integers of 19 digits and more on a path that does not check what
/// follows them (`1000000000000000000x` is taken as a number).
const LONG_INTEGER: u64 = 100_000_000_000_000_000;

/// Whether simd-json may decode `line` (see [`FastDecoder`]): nesting no deeper than 100
/// (counted as opening brackets anywhere), no escape before `"data"`, no NUL, no `\u`
/// escape of a surrogate. Floats, `-0` and long integers are looked for after the parse.
/// Two vectorised passes over the line.
pub fn simd_agrees(line: &[u8]) -> bool {
    use memchr::memmem::Finder;
    use std::sync::LazyLock;
    static DATA_KEY: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b",\"data\":"));
    static UNICODE_ESCAPE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\\u"));
    let Some(data_at) = DATA_KEY.find(line) else {
        return false;
    };
    // (one pass for NUL and nesting: a ledger line holds no NUL, so it counts brackets)
    let mut opens = 0;
    let shallow_without_nul = memchr::memchr3_iter(0, b'{', b'[', line).all(|i| {
        opens += 1;
        line[i] != 0 && opens <= 100
    });
    shallow_without_nul
        && memchr::memchr(b'\\', &line[..data_at]).is_none()
        // `\u` + `d`: the escape of a surrogate (or text that only looks like one)
        && !UNICODE_ESCAPE
            .find_iter(line)
            .any(|i| matches!(line.get(i + 2), Some(b'd' | b'D')))
}

/// An envelope as a `Deserialize` type, for decoders that take one.
struct EnvelopeOf<'a, P>(Envelope<'a, P>);

impl<'de, P: Payload<'de>> serde::Deserialize<'de> for EnvelopeOf<'de, P> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EnvelopeVisitor::<P>(PhantomData))
            .map(EnvelopeOf)
    }
}

struct EnvelopeVisitor<P>(PhantomData<P>);

struct KindSeed<'k, P> {
    kind: &'k str,
    _p: PhantomData<P>,
}

impl<'de, P: Payload<'de>> DeserializeSeed<'de> for KindSeed<'_, P> {
    type Value = P;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<P, D::Error> {
        P::deserialize_kind(self.kind, d)
    }
}

fn expect_key<'de, A: MapAccess<'de>>(map: &mut A, want: &'static str) -> Result<(), A::Error> {
    match map.next_key::<&'de str>()? {
        Some(k) if k == want => Ok(()),
        Some(k) => Err(de::Error::custom(format_args!(
            "expected member {want:?}, found {k:?} (members must be seq, ts, kind, data, crc in this order)"
        ))),
        None => Err(de::Error::custom(format_args!("missing member {want:?}"))),
    }
}

impl<'de, P: Payload<'de>> Visitor<'de> for EnvelopeVisitor<P> {
    type Value = Envelope<'de, P>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a ledger record object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        expect_key(&mut map, "seq")?;
        let seq: u64 = map.next_value()?;
        expect_key(&mut map, "ts")?;
        let ts: &'de str = map.next_value()?;
        expect_key(&mut map, "kind")?;
        let kind: &'de str = map.next_value()?;
        expect_key(&mut map, "data")?;
        let data = map.next_value_seed(KindSeed::<P> {
            kind,
            _p: PhantomData,
        })?;
        expect_key(&mut map, "crc")?;
        let _crc: de::IgnoredAny = map.next_value()?;
        if let Some(k) = map.next_key::<&'de str>()? {
            return Err(de::Error::custom(format_args!(
                "unexpected member {k:?} after crc"
            )));
        }
        Ok(Envelope {
            seq,
            ts,
            kind,
            data,
        })
    }
}

/// Checks the CRC and decodes the envelope of one line (without its newline).
pub fn decode_line<'a, P: Payload<'a>>(line: &'a [u8]) -> Result<Envelope<'a, P>, Problem> {
    check_crc(line)?;
    decode_envelope(line)
}

pub use crate::clock::format_ts;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_and_decodes() {
        let mut buf = Vec::new();
        encode_line(
            &mut buf,
            7,
            "2026-12-02T10:00:00.000Z",
            "input",
            br#"{"text":"hi"}"#,
        );
        assert_eq!(*buf.last().unwrap(), b'\n');
        let line = &buf[..buf.len() - 1];
        let env: Envelope<serde_json::Value> = decode_line(line).unwrap();
        assert_eq!(env.seq, 7);
        assert_eq!(env.kind, "input");
        assert_eq!(env.data["text"], "hi");
        // crc is computed over the line without the crc member
        let text = std::str::from_utf8(line).unwrap();
        let without = format!("{}}}", &text[..text.len() - CRC_SUFFIX_LEN]);
        let crc = crc32c::crc32c(without.as_bytes());
        assert!(text.ends_with(&format!(",\"crc\":\"{crc:08x}\"}}")));
    }

    #[test]
    fn rejects_uppercase_and_reordered() {
        let mut buf = Vec::new();
        encode_line(&mut buf, 1, "t", "k", b"{}");
        let mut upper = buf[..buf.len() - 1].to_vec();
        let n = upper.len();
        for b in &mut upper[n - 10..n - 2] {
            b.make_ascii_uppercase();
        }
        assert!(check_crc(&upper).is_err() || upper == buf[..buf.len() - 1]);
        let reordered = br#"{"ts":"t","seq":1,"kind":"k","data":{},"crc":"00000000"}"#;
        assert!(decode_envelope::<de::IgnoredAny>(reordered).is_err());
        // the right types under other names are refused too: members are checked by name
        let renamed = br#"{"sequence":1,"ts":"t","kind":"k","data":{},"crc":"00000000"}"#;
        let e = decode_envelope::<de::IgnoredAny>(renamed).unwrap_err();
        assert!(e.to_string().contains("expected member \"seq\""), "{e}");
        let not_an_object = decode_envelope::<de::IgnoredAny>(b"[1]").unwrap_err();
        assert!(
            not_an_object.to_string().contains("ledger record object"),
            "{not_an_object}"
        );
    }

    #[test]
    fn invalid_utf8_is_refused_with_where_it_is() {
        let mut line =
            br#"{"seq":1,"ts":"t","kind":"k","data":{"a":"xx"},"crc":"00000000"}"#.to_vec();
        let at = line.iter().position(|&b| b == b'x').unwrap();
        line[at] = 0xff;
        let e = decode_envelope::<de::IgnoredAny>(&line).unwrap_err();
        assert!(e.to_string().contains(&format!("from index {at}")), "{e}");
        line[at] = b'x';
        assert!(decode_envelope::<de::IgnoredAny>(&line).is_ok());
    }

    #[test]
    fn a_short_line_with_a_crc_member_fails_its_checksum_not_its_shape() {
        // 24 bytes: too short to be a record, long enough to carry a crc member
        let line = br#"{"a":1,"crc":"00000000"}"#;
        assert_eq!(line.len(), 24);
        assert!(matches!(check_crc(line), Err(Problem::CrcMismatch { .. })));
        // under 20 bytes there is no room for one
        assert!(matches!(
            check_crc(br#"{,"crc":"0000000"}"#),
            Err(Problem::Malformed(_))
        ));
        // one that verifies: the checksum of `{}` on the smallest line that can carry it
        let crc = crc32c::crc32c(b"{1}");
        let ok = format!("{{1,\"crc\":\"{crc:08x}\"}}");
        assert_eq!(ok.len(), 20);
        assert!(check_crc(ok.as_bytes()).is_ok(), "{ok}");
    }
}
