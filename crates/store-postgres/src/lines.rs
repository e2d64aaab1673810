//! Checking stored lines exactly as the local ledger does: CRC, framing, gap-free seqs,
//! header format and version, and the meaning of every record (replay).

use std::path::PathBuf;

use lazarus_ledger::frame::{self, Envelope};
use lazarus_ledger::writer::LINE_BYTES_MAX_DEFAULT;
use lazarus_ledger::{Corruption, FORMAT_VERSION, Header, LedgerError, Problem};
use lazarus_session::{FORMAT, Record, SessionError, SessionState};

/// A corruption error for the record at `seq` (line `seq + 1` of the export, at `offset`).
pub(crate) fn corrupt(location: &str, seq: u64, offset: u64, problem: Problem) -> SessionError {
    SessionError::Ledger(LedgerError::Corrupt(Box::new(Corruption::new(
        PathBuf::from(location),
        seq + 1,
        offset,
        problem,
    ))))
}

fn check_len(location: &str, seq: u64, offset: u64, line: &[u8]) -> Result<(), SessionError> {
    if line.len() > LINE_BYTES_MAX_DEFAULT {
        return Err(corrupt(
            location,
            seq,
            offset,
            Problem::LineTooLong {
                len: line.len() as u64,
                max: LINE_BYTES_MAX_DEFAULT as u64,
            },
        ));
    }
    if line.contains(&b'\n') {
        return Err(corrupt(
            location,
            seq,
            offset,
            Problem::Malformed("stored line contains a newline".into()),
        ));
    }
    Ok(())
}

/// Decodes and checks a header line (seq 0) of session `id`.
pub(crate) fn parse_header(location: &str, id: &str, line: &[u8]) -> Result<Header, SessionError> {
    check_len(location, 0, 0, line)?;
    let env: Envelope<serde_json::Value> =
        frame::decode_line(line).map_err(|p| corrupt(location, 0, 0, p))?;
    if env.kind != "header" {
        return Err(corrupt(
            location,
            0,
            0,
            Problem::MissingHeader {
                found: env.kind.to_string(),
            },
        ));
    }
    if env.seq != 0 {
        return Err(corrupt(
            location,
            0,
            0,
            Problem::SeqGap {
                expected: 0,
                found: env.seq,
            },
        ));
    }
    let invalid = |msg: String| corrupt(location, 0, 0, Problem::Invalid(msg));
    let format = env
        .data
        .get("format")
        .and_then(|v| v.as_str())
        .ok_or_else(|| invalid("header has no \"format\" string".into()))?;
    if format != FORMAT {
        return Err(SessionError::Ledger(LedgerError::WrongFormat {
            path: PathBuf::from(location),
            found: format.to_string(),
            expected: FORMAT.to_string(),
        }));
    }
    let version = env
        .data
        .get("version")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| invalid("header has no integer \"version\"".into()))?;
    if version != FORMAT_VERSION {
        return Err(SessionError::Ledger(LedgerError::UnsupportedVersion {
            path: PathBuf::from(location),
            found: version,
            supported: FORMAT_VERSION,
        }));
    }
    let header: Header =
        serde_json::from_value(env.data).map_err(|e| invalid(format!("bad header: {e}")))?;
    if header.id != id {
        return Err(invalid(format!(
            "header names session {:?}, stored as {id:?}",
            header.id
        )));
    }
    Ok(header)
}

/// Replays stored lines, in seq order, into a [`SessionState`], checking everything.
pub(crate) struct Replay {
    location: String,
    id: String,
    state: Option<SessionState>,
    next_seq: u64,
    /// Byte offset of the next line in the export.
    offset: u64,
}

impl Replay {
    pub(crate) fn new(location: &str, id: &str) -> Replay {
        Replay {
            location: location.to_string(),
            id: id.to_string(),
            state: None,
            next_seq: 0,
            offset: 0,
        }
    }

    /// Feeds the line stored under `seq`, whose stored end offset is `end_offset`.
    pub(crate) fn feed(
        &mut self,
        seq: i64,
        line: &[u8],
        end_offset: i64,
    ) -> Result<(), SessionError> {
        let expected = self.next_seq;
        if seq != expected as i64 {
            let found = seq.max(0) as u64;
            let problem = if found > expected {
                Problem::SeqGap { expected, found }
            } else {
                Problem::SeqNotIncreasing { expected, found }
            };
            return Err(corrupt(&self.location, expected, self.offset, problem));
        }
        match &mut self.state {
            None => {
                let header = parse_header(&self.location, &self.id, line)?;
                self.state = Some(SessionState::new(header));
            }
            Some(state) => {
                check_len(&self.location, expected, self.offset, line)?;
                let env: Envelope<Record> = frame::decode_line(line)
                    .map_err(|p| corrupt(&self.location, expected, self.offset, p))?;
                if env.seq != expected {
                    return Err(corrupt(
                        &self.location,
                        expected,
                        self.offset,
                        Problem::Invalid(format!(
                            "line carries seq {} but is stored as seq {expected}",
                            env.seq
                        )),
                    ));
                }
                if matches!(env.data, Record::Header) {
                    return Err(corrupt(
                        &self.location,
                        expected,
                        self.offset,
                        Problem::MisplacedHeader { line: expected + 1 },
                    ));
                }
                let rec = env.data;
                state.check(&rec).map_err(|source| SessionError::Replay {
                    location: self.location.clone(),
                    seq: expected,
                    source,
                })?;
                state.apply(expected, rec);
            }
        }
        check_end(&self.location, expected, self.offset, line, end_offset)?;
        self.next_seq += 1;
        self.offset += line.len() as u64 + 1;
        Ok(())
    }

    /// Bytes of the export so far (the size of the session once every line is fed).
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The replayed state; `None` when no line was fed (no such session).
    pub(crate) fn finish(self) -> Option<SessionState> {
        self.state
    }
}

/// Checks that a line starting at `offset` ends (newline included) at the stored `end`.
pub(crate) fn check_end(
    location: &str,
    seq: u64,
    offset: u64,
    line: &[u8],
    end: i64,
) -> Result<(), SessionError> {
    let computed = offset + line.len() as u64 + 1;
    if end != computed as i64 {
        return Err(corrupt(
            location,
            seq,
            offset,
            Problem::Invalid(format!(
                "stored end offset {end}, but the lines up to here add up to {computed} bytes"
            )),
        ));
    }
    Ok(())
}

/// Checks a line's CRC and framing and that it carries `seq`; returns the envelope.
pub(crate) fn check_line<'a>(
    location: &str,
    seq: u64,
    offset: u64,
    line: &'a [u8],
) -> Result<Envelope<'a, serde_json::Value>, SessionError> {
    check_len(location, seq, offset, line)?;
    let env: Envelope<serde_json::Value> =
        frame::decode_line(line).map_err(|p| corrupt(location, seq, offset, p))?;
    if env.seq != seq {
        return Err(corrupt(
            location,
            seq,
            offset,
            Problem::Invalid(format!(
                "line carries seq {} but is stored as seq {seq}",
                env.seq
            )),
        ));
    }
    Ok(env)
}
