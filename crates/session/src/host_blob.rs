//! A host framework's values as its serializer wrote them (LangGraph's `dumps_typed`: a type
//! tag and bytes, kept in `host_*` records as base64), read without running anything.
//!
//! LangGraph's msgpack names Python callables in its extension types (a module, a name and
//! arguments): its loader imports and calls them, so a blob naming `os.system` runs a command
//! when it is read. [`Allowlist`] is the rule both sides apply: the Python package refuses to
//! load a blob that names anything outside it ([`check`], before LangGraph's loader sees the
//! bytes), and `lazarus sessions show` and the web view render blobs with it ([`view`]),
//! labelling what lies outside instead of failing. The list is LangGraph's own
//! `SAFE_MSGPACK_TYPES` (langgraph-checkpoint 4.3): plain data, messages, documents and
//! LangGraph's own types; a program widens it for its own types.

use std::collections::BTreeSet;

use base64::Engine;
use rmpv::Value as Mp;
use serde_json::{Map, Value};

/// The (module, name) pairs a blob may construct: LangGraph's `SAFE_MSGPACK_TYPES`.
pub const SAFE_TYPES: &[(&str, &str)] = &[
    ("datetime", "datetime"),
    ("datetime", "date"),
    ("datetime", "time"),
    ("datetime", "timedelta"),
    ("datetime", "timezone"),
    ("uuid", "UUID"),
    ("decimal", "Decimal"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("collections", "deque"),
    ("ipaddress", "IPv4Address"),
    ("ipaddress", "IPv4Interface"),
    ("ipaddress", "IPv4Network"),
    ("ipaddress", "IPv6Address"),
    ("ipaddress", "IPv6Interface"),
    ("ipaddress", "IPv6Network"),
    ("pathlib", "Path"),
    ("pathlib", "PosixPath"),
    ("pathlib", "WindowsPath"),
    ("pathlib._local", "Path"),
    ("pathlib._local", "PosixPath"),
    ("pathlib._local", "WindowsPath"),
    ("zoneinfo", "ZoneInfo"),
    ("re", "compile"),
    ("langchain_core.messages.base", "BaseMessage"),
    ("langchain_core.messages.base", "BaseMessageChunk"),
    ("langchain_core.messages.human", "HumanMessage"),
    ("langchain_core.messages.human", "HumanMessageChunk"),
    ("langchain_core.messages.ai", "AIMessage"),
    ("langchain_core.messages.ai", "AIMessageChunk"),
    ("langchain_core.messages.system", "SystemMessage"),
    ("langchain_core.messages.system", "SystemMessageChunk"),
    ("langchain_core.messages.chat", "ChatMessage"),
    ("langchain_core.messages.chat", "ChatMessageChunk"),
    ("langchain_core.messages.tool", "ToolMessage"),
    ("langchain_core.messages.tool", "ToolMessageChunk"),
    ("langchain_core.messages.function", "FunctionMessage"),
    ("langchain_core.messages.function", "FunctionMessageChunk"),
    ("langchain_core.messages.modifier", "RemoveMessage"),
    ("langchain_core.documents.base", "Document"),
    ("langgraph.types", "Send"),
    ("langgraph.types", "TimeoutPolicy"),
    ("langgraph.types", "Interrupt"),
    ("langgraph.types", "Command"),
    ("langgraph.types", "StateSnapshot"),
    ("langgraph.types", "PregelTask"),
    ("langgraph.types", "Overwrite"),
    ("langgraph.store.base", "Item"),
    ("langgraph.store.base", "GetOp"),
];

/// The (module, name, method) calls a blob may make: LangGraph's `SAFE_MSGPACK_METHODS`.
pub const SAFE_METHODS: &[(&str, &str, &str)] = &[("datetime", "datetime", "fromisoformat")];

// LangGraph's msgpack extension codes (`langgraph.checkpoint.serde.jsonplus`).
const EXT_CONSTRUCTOR_SINGLE_ARG: i8 = 0;
const EXT_CONSTRUCTOR_POS_ARGS: i8 = 1;
const EXT_CONSTRUCTOR_KW_ARGS: i8 = 2;
const EXT_METHOD_SINGLE_ARG: i8 = 3;
const EXT_PYDANTIC_V1: i8 = 4;
const EXT_PYDANTIC_V2: i8 = 5;
const EXT_NUMPY_ARRAY: i8 = 6;
const EXT_DELTA_SNAPSHOT: i8 = 7;

/// How deep values may nest (msgpack and JSON alike): deeper is refused, never recursed into.
pub const MAX_DEPTH: usize = 200;

/// Why a blob is not loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlobError {
    #[error("it constructs {0}, which is outside the allowlist")]
    OutsideAllowlist(String),
    #[error("it calls {0}, which is outside the allowlist")]
    MethodOutsideAllowlist(String),
    #[error("it holds a msgpack extension of code {0}, which LangGraph's loader does not define")]
    UnknownExtension(i8),
    #[error(
        "it is a {0:?} value: only msgpack, json, bytes, bytearray and null are read (pickle runs code when loaded)"
    )]
    Type(String),
    #[error("its extension {0} is not what LangGraph writes ({1})")]
    BadExtension(i8, &'static str),
    #[error("it is not valid base64")]
    Base64,
    #[error("it is not valid msgpack: {0}")]
    Msgpack(String),
    #[error("it is not valid JSON: {0}")]
    Json(String),
    #[error("it nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
}

/// What a blob may construct: [`SAFE_TYPES`], [`SAFE_METHODS`] and a program's own additions.
#[derive(Debug, Clone, Default)]
pub struct Allowlist {
    extra: BTreeSet<(String, String)>,
}

impl Allowlist {
    /// [`SAFE_TYPES`] and [`SAFE_METHODS`] only.
    pub fn strict() -> Self {
        Self::default()
    }

    /// The strict list and `extra` (module, name) pairs.
    pub fn with(extra: impl IntoIterator<Item = (String, String)>) -> Self {
        Allowlist {
            extra: extra.into_iter().collect(),
        }
    }

    pub fn allows(&self, module: &str, name: &str) -> bool {
        SAFE_TYPES.contains(&(module, name))
            || self
                .extra
                .iter()
                .any(|(m, n)| m.as_str() == module && n.as_str() == name)
    }

    fn allows_method(module: &str, name: &str, method: &str) -> bool {
        SAFE_METHODS.contains(&(module, name, method))
    }
}

/// Decodes base64 as the records hold it.
pub fn decode_b64(b64: &str) -> Result<Vec<u8>, BlobError> {
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| BlobError::Base64)
}

/// Whether LangGraph's loader may be given this blob: every type it would construct and every
/// method it would call is allowed, and nothing in it is a kind of value that runs code.
pub fn check(type_tag: &str, bytes: &[u8], allow: &Allowlist) -> Result<(), BlobError> {
    match type_tag {
        "null" | "bytes" | "bytearray" | "empty" => Ok(()),
        "msgpack" => check_mp(&read_mp(bytes)?, allow, 0),
        "json" => {
            let v: Value =
                serde_json::from_slice(bytes).map_err(|e| BlobError::Json(e.to_string()))?;
            check_json(&v, allow, 0)
        }
        other => Err(BlobError::Type(other.to_string())),
    }
}

fn read_mp(bytes: &[u8]) -> Result<Mp, BlobError> {
    let mut r = bytes;
    let v = rmpv::decode::read_value_with_max_depth(&mut r, MAX_DEPTH).map_err(|e| match e {
        rmpv::decode::Error::DepthLimitExceeded => BlobError::TooDeep,
        e => BlobError::Msgpack(e.to_string()),
    })?;
    if !r.is_empty() {
        return Err(BlobError::Msgpack(format!(
            "{} bytes follow the value",
            r.len()
        )));
    }
    Ok(v)
}

/// An extension's parts: the module and name it names, and the rest of its tuple.
fn ext_parts(code: i8, v: &Mp) -> Result<(&str, &str, &[Mp]), BlobError> {
    let Mp::Array(parts) = v else {
        return Err(BlobError::BadExtension(code, "not a tuple"));
    };
    match parts.as_slice() {
        [Mp::String(m), Mp::String(n), rest @ ..] => match (m.as_str(), n.as_str()) {
            (Some(m), Some(n)) => Ok((m, n, rest)),
            _ => Err(BlobError::BadExtension(code, "a name that is not UTF-8")),
        },
        _ => Err(BlobError::BadExtension(
            code,
            "no module and name at its start",
        )),
    }
}

fn check_mp(v: &Mp, allow: &Allowlist, depth: usize) -> Result<(), BlobError> {
    if depth > MAX_DEPTH {
        return Err(BlobError::TooDeep);
    }
    match v {
        Mp::Array(items) => items.iter().try_for_each(|i| check_mp(i, allow, depth + 1)),
        Mp::Map(pairs) => pairs.iter().try_for_each(|(k, v)| {
            check_mp(k, allow, depth + 1)?;
            check_mp(v, allow, depth + 1)
        }),
        Mp::Ext(code, data) => {
            let inner = read_mp(data)?;
            match *code {
                EXT_CONSTRUCTOR_SINGLE_ARG
                | EXT_CONSTRUCTOR_POS_ARGS
                | EXT_CONSTRUCTOR_KW_ARGS
                | EXT_PYDANTIC_V1
                | EXT_PYDANTIC_V2 => {
                    let (m, n, _) = ext_parts(*code, &inner)?;
                    if !allow.allows(m, n) {
                        return Err(BlobError::OutsideAllowlist(format!("{m}.{n}")));
                    }
                }
                EXT_METHOD_SINGLE_ARG => {
                    let (m, n, rest) = ext_parts(*code, &inner)?;
                    let method = match rest {
                        [_, Mp::String(method)] => method.as_str().unwrap_or(""),
                        _ => return Err(BlobError::BadExtension(*code, "no method named")),
                    };
                    if !Allowlist::allows_method(m, n, method) {
                        return Err(BlobError::MethodOutsideAllowlist(format!(
                            "{m}.{n}.{method}"
                        )));
                    }
                }
                // numpy.frombuffer on plain data; a snapshot wraps a value
                EXT_NUMPY_ARRAY | EXT_DELTA_SNAPSHOT => {}
                other => return Err(BlobError::UnknownExtension(other)),
            }
            check_mp(&inner, allow, depth + 1)
        }
        _ => Ok(()),
    }
}

/// A LangChain serialized constructor (`{"lc": 1|2, "type": "constructor", "id": [...]}`) in a
/// `json` blob names a class by its module path: the same allowlist applies. A `secret`
/// would be read from the environment: refused.
fn check_json(v: &Value, allow: &Allowlist, depth: usize) -> Result<(), BlobError> {
    if depth > MAX_DEPTH {
        return Err(BlobError::TooDeep);
    }
    match v {
        Value::Array(items) => items
            .iter()
            .try_for_each(|i| check_json(i, allow, depth + 1)),
        Value::Object(o) => {
            if o.contains_key("lc")
                && let Some(kind) = o.get("type").and_then(Value::as_str)
            {
                match kind {
                    "constructor" => {
                        let (m, n) = lc_path(o).unwrap_or_default();
                        if !allow.allows(&m, &n) {
                            return Err(BlobError::OutsideAllowlist(format!("{m}.{n}")));
                        }
                    }
                    "secret" => {
                        return Err(BlobError::OutsideAllowlist(
                            "a secret read from the environment".into(),
                        ));
                    }
                    _ => {}
                }
            }
            o.values().try_for_each(|v| check_json(v, allow, depth + 1))
        }
        _ => Ok(()),
    }
}

fn lc_path(o: &Map<String, Value>) -> Option<(String, String)> {
    let ids: Vec<&str> = o
        .get("id")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let (name, module) = ids.split_last()?;
    Some((module.join("."), (*name).to_string()))
}

/// The label [`view`] puts on what it did not decode.
pub const NOT_DECODED: &str = "$not_decoded";

/// A blob as JSON for people: channel values, metadata and writes as LangGraph wrote them,
/// with each constructed value shown by its type (`"$type"`) and its data. Nothing is run:
/// what lies outside `allow`, and anything that is not valid, is shown as it is under
/// [`NOT_DECODED`] with the reason, never as an error.
pub fn view(type_tag: &str, b64: &str, allow: &Allowlist) -> Value {
    let bytes = match decode_b64(b64) {
        Ok(b) => b,
        Err(e) => return undecoded(&e.to_string(), Value::String(b64.to_string())),
    };
    match type_tag {
        "null" => Value::Null,
        "empty" => Value::Null,
        "bytes" | "bytearray" => bytes_view(&bytes),
        "msgpack" => match read_mp(&bytes) {
            Ok(v) => mp_view(&v, allow, 0),
            Err(e) => undecoded(&e.to_string(), Value::String(b64.to_string())),
        },
        "json" => match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => match check_json(&v, allow, 0) {
                Ok(()) => v,
                Err(e) => undecoded(&e.to_string(), v),
            },
            Err(e) => undecoded(
                &BlobError::Json(e.to_string()).to_string(),
                Value::String(b64.to_string()),
            ),
        },
        other => undecoded(
            &BlobError::Type(other.to_string()).to_string(),
            Value::String(b64.to_string()),
        ),
    }
}

fn undecoded(why: &str, raw: Value) -> Value {
    let mut o = Map::new();
    o.insert(NOT_DECODED.into(), Value::String(why.to_string()));
    o.insert("raw".into(), raw);
    Value::Object(o)
}

fn bytes_view(b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(s) => serde_json::json!({ "$bytes": s }),
        Err(_) => serde_json::json!({
            "$bytes_b64": base64::engine::general_purpose::STANDARD.encode(b)
        }),
    }
}

fn mp_view(v: &Mp, allow: &Allowlist, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return undecoded(&BlobError::TooDeep.to_string(), Value::Null);
    }
    match v {
        Mp::Nil => Value::Null,
        Mp::Boolean(b) => Value::Bool(*b),
        Mp::Integer(i) => i
            .as_i64()
            .map(Value::from)
            .or_else(|| i.as_u64().map(Value::from))
            .unwrap_or(Value::Null),
        Mp::F32(f) => float(f64::from(*f)),
        Mp::F64(f) => float(*f),
        Mp::String(s) => match s.as_str() {
            Some(s) => Value::String(s.to_string()),
            None => undecoded("a string that is not UTF-8", bytes_view(s.as_bytes())),
        },
        Mp::Binary(b) => bytes_view(b),
        Mp::Array(items) => {
            Value::Array(items.iter().map(|i| mp_view(i, allow, depth + 1)).collect())
        }
        Mp::Map(pairs) => {
            let mut o = Map::new();
            for (k, v) in pairs {
                let key = match k {
                    Mp::String(s) if s.as_str().is_some() => {
                        s.as_str().unwrap_or_default().to_string()
                    }
                    other => mp_view(other, allow, depth + 1).to_string(),
                };
                o.insert(key, mp_view(v, allow, depth + 1));
            }
            Value::Object(o)
        }
        Mp::Ext(code, data) => ext_view(*code, data, allow, depth),
    }
}

fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or_else(|| Value::String(f.to_string()), Value::Number)
}

fn ext_view(code: i8, data: &[u8], allow: &Allowlist, depth: usize) -> Value {
    let b64 = || Value::String(base64::engine::general_purpose::STANDARD.encode(data));
    let inner = match read_mp(data) {
        Ok(v) => v,
        Err(e) => return undecoded(&e.to_string(), b64()),
    };
    let sub = |v: &Mp| mp_view(v, allow, depth + 1);
    match code {
        EXT_DELTA_SNAPSHOT => sub(&inner),
        EXT_NUMPY_ARRAY => match &inner {
            Mp::Array(p) if p.len() == 4 => serde_json::json!({
                "$type": "numpy.ndarray", "dtype": sub(&p[0]), "shape": sub(&p[1]),
            }),
            _ => undecoded(
                &BlobError::BadExtension(code, "not a numpy array").to_string(),
                b64(),
            ),
        },
        EXT_CONSTRUCTOR_SINGLE_ARG
        | EXT_CONSTRUCTOR_POS_ARGS
        | EXT_CONSTRUCTOR_KW_ARGS
        | EXT_PYDANTIC_V1
        | EXT_PYDANTIC_V2
        | EXT_METHOD_SINGLE_ARG => {
            let (m, n, rest) = match ext_parts(code, &inner) {
                Ok(p) => p,
                Err(e) => return undecoded(&e.to_string(), sub(&inner)),
            };
            let arg = rest.first().map_or(Value::Null, sub);
            let allowed = if code == EXT_METHOD_SINGLE_ARG {
                let method = rest.get(1).and_then(Mp::as_str).unwrap_or("");
                Allowlist::allows_method(m, n, method)
            } else {
                allow.allows(m, n)
            };
            if !allowed {
                let why = if code == EXT_METHOD_SINGLE_ARG {
                    let method = rest.get(1).and_then(Mp::as_str).unwrap_or("");
                    BlobError::MethodOutsideAllowlist(format!("{m}.{n}.{method}"))
                } else {
                    BlobError::OutsideAllowlist(format!("{m}.{n}"))
                };
                return undecoded(
                    &why.to_string(),
                    serde_json::json!({"$type": format!("{m}.{n}"), "args": arg}),
                );
            }
            plain(code, m, n, arg)
        }
        other => undecoded(&BlobError::UnknownExtension(other).to_string(), b64()),
    }
}

fn is_unset(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(o) => o.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// An allowed value as plain JSON where it has an obvious one (a UUID, a time, a set), else
/// its type and its data.
fn plain(code: i8, m: &str, n: &str, arg: Value) -> Value {
    match (m, n, arg) {
        ("uuid", "UUID", Value::String(hex)) if hex.len() == 32 => Value::String(format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        )),
        ("datetime", "datetime", Value::String(iso)) if code == EXT_METHOD_SINGLE_ARG => {
            Value::String(iso)
        }
        ("datetime", "date", Value::Array(ymd))
            if code == EXT_CONSTRUCTOR_POS_ARGS
                && ymd.len() == 3
                && ymd.iter().all(Value::is_u64) =>
        {
            let n = |i: usize| ymd[i].as_u64().unwrap_or_default();
            Value::String(format!("{:04}-{:02}-{:02}", n(0), n(1), n(2)))
        }
        ("builtins", "set" | "frozenset", a) | ("collections", "deque", a) => a,
        (_, _, Value::Object(kwargs))
            if matches!(
                code,
                EXT_CONSTRUCTOR_KW_ARGS | EXT_PYDANTIC_V1 | EXT_PYDANTIC_V2
            ) =>
        {
            let mut o = Map::new();
            o.insert("$type".into(), Value::String(format!("{m}.{n}")));
            // a pydantic model's unset fields (a LangChain message's dozen): left out
            let pydantic = matches!(code, EXT_PYDANTIC_V1 | EXT_PYDANTIC_V2);
            o.extend(
                kwargs
                    .into_iter()
                    .filter(|(_, v)| !(pydantic && is_unset(v))),
            );
            Value::Object(o)
        }
        (_, _, a) => {
            let key = if code == EXT_CONSTRUCTOR_POS_ARGS {
                "args"
            } else {
                "value"
            };
            serde_json::json!({ "$type": format!("{m}.{n}"), key: a })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mp(v: &Mp) -> Vec<u8> {
        let mut out = Vec::new();
        rmpv::encode::write_value(&mut out, v).unwrap();
        out
    }

    fn ext(code: i8, parts: Vec<Mp>) -> Mp {
        Mp::Ext(code, mp(&Mp::Array(parts)))
    }

    fn s(x: &str) -> Mp {
        Mp::String(x.into())
    }

    #[test]
    fn a_constructor_outside_the_allowlist_is_refused_however_deep_it_sits() {
        let system = ext(0, vec![s("os"), s("system"), s("touch /tmp/pwned")]);
        let strict = Allowlist::strict();
        let bare = mp(&system);
        assert_eq!(
            check("msgpack", &bare, &strict),
            Err(BlobError::OutsideAllowlist("os.system".into()))
        );
        // inside a list inside a map inside an allowed constructor's arguments
        let nested = Mp::Map(vec![(
            s("messages"),
            Mp::Array(vec![ext(
                5,
                vec![
                    s("langchain_core.messages.human"),
                    s("HumanMessage"),
                    Mp::Map(vec![(s("content"), system.clone())]),
                ],
            )]),
        )]);
        assert!(matches!(
            check("msgpack", &mp(&nested), &strict),
            Err(BlobError::OutsideAllowlist(t)) if t == "os.system"
        ));
        // as a map key, and under a delta snapshot
        let key = Mp::Map(vec![(system.clone(), Mp::Nil)]);
        assert!(check("msgpack", &mp(&key), &strict).is_err());
        let snap = Mp::Ext(7, mp(&system));
        assert!(check("msgpack", &mp(&snap), &strict).is_err());
        // widened on purpose, it passes
        let wide = Allowlist::with([("os".to_string(), "system".to_string())]);
        assert_eq!(check("msgpack", &bare, &wide), Ok(()));
        // a method call outside the methods allowed, an unknown extension, pickle
        let call = ext(3, vec![s("os"), s("popen"), s("id"), s("read")]);
        assert!(matches!(
            check("msgpack", &mp(&call), &wide),
            Err(BlobError::MethodOutsideAllowlist(_))
        ));
        assert_eq!(
            check("msgpack", &mp(&Mp::Ext(42, vec![0xc0])), &strict),
            Err(BlobError::UnknownExtension(42))
        );
        assert!(matches!(
            check("pickle", b"cos\nsystem\n", &wide),
            Err(BlobError::Type(_))
        ));
        // a LangChain JSON constructor names a class too
        let lc = br#"{"lc":2,"type":"constructor","id":["os","system"],"args":["id"]}"#;
        assert!(check("json", lc, &strict).is_err());
        let secret = br#"{"lc":1,"type":"secret","id":["OPENAI_API_KEY"]}"#;
        assert!(check("json", secret, &wide).is_err());
    }

    #[test]
    fn what_is_outside_is_shown_labelled_and_the_rest_decoded() {
        let value = Mp::Map(vec![
            (
                s("when"),
                ext(
                    3,
                    vec![
                        s("datetime"),
                        s("datetime"),
                        s("2026-12-02T10:00:00"),
                        s("fromisoformat"),
                    ],
                ),
            ),
            (
                s("id"),
                ext(
                    0,
                    vec![s("uuid"), s("UUID"), s("0123456789abcdef0123456789abcdef")],
                ),
            ),
            (s("bad"), ext(0, vec![s("os"), s("system"), s("id")])),
            (s("n"), Mp::from(3)),
        ]);
        let b64 = base64::engine::general_purpose::STANDARD.encode(mp(&value));
        let v = view("msgpack", &b64, &Allowlist::strict());
        assert_eq!(v["when"], "2026-12-02T10:00:00");
        assert_eq!(v["id"], "01234567-89ab-cdef-0123-456789abcdef");
        assert_eq!(v["n"], 3);
        assert_eq!(
            v["bad"][NOT_DECODED],
            "it constructs os.system, which is outside the allowlist"
        );
        assert_eq!(v["bad"]["raw"]["args"], "id");
        // not msgpack, not base64, pickle: labelled, with the bytes as they are
        for (t, b) in [("msgpack", "wA"), ("msgpack", "!!"), ("pickle", "gARLAS4=")] {
            let v = view(t, b, &Allowlist::strict());
            assert!(v[NOT_DECODED].is_string(), "{t} {b}: {v}");
            assert_eq!(v["raw"], b);
        }
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_refused_not_recursed() {
        let mut bytes = vec![0x91u8; 100_000]; // arrays of one, 100,000 deep
        bytes.push(0xc0);
        assert_eq!(
            check("msgpack", &bytes, &Allowlist::strict()),
            Err(BlobError::TooDeep)
        );
        let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
        assert!(view("msgpack", &b64, &Allowlist::strict())[NOT_DECODED].is_string());
        let deep_json = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(check("json", deep_json.as_bytes(), &Allowlist::strict()).is_err());
    }
}
