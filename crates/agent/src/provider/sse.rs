//! Server-sent events: a byte-level line parser with a line-length limit. It knows nothing
//! of what the events carry (each dialect's assembler does).

use super::error::ProviderError;

/// Splits a byte stream into SSE events (the joined `data:` lines of each event).
#[derive(Debug)]
pub struct SseParser {
    max_line_bytes: usize,
    line: Vec<u8>,
    data: Option<String>,
    last_was_cr: bool,
}

impl SseParser {
    pub fn new(max_line_bytes: usize) -> Self {
        SseParser {
            max_line_bytes,
            line: Vec::new(),
            data: None,
            last_was_cr: false,
        }
    }

    /// Feeds bytes; returns the data of every event completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<String>, ProviderError> {
        let mut events = Vec::new();
        for &b in bytes {
            if b == b'\n' && self.last_was_cr {
                // "\r\n": the line already ended at '\r'.
                self.last_was_cr = false;
                continue;
            }
            self.last_was_cr = b == b'\r';
            if b == b'\n' || b == b'\r' {
                self.end_line(&mut events);
            } else {
                if self.line.len() >= self.max_line_bytes {
                    return Err(ProviderError::SseLineTooLong {
                        limit_bytes: self.max_line_bytes,
                    });
                }
                self.line.push(b);
            }
        }
        Ok(events)
    }

    /// Ends the stream: a last event without its blank line is still delivered.
    pub fn finish(&mut self) -> Option<String> {
        if !self.line.is_empty() {
            let mut events = Vec::new();
            self.end_line(&mut events);
            if let Some(e) = events.pop() {
                return Some(e);
            }
        }
        self.data.take()
    }

    fn end_line(&mut self, events: &mut Vec<String>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if let Some(d) = self.data.take() {
                events.push(d);
            }
            return;
        }
        if line[0] == b':' {
            return; // comment / keep-alive
        }
        let text = String::from_utf8_lossy(&line);
        let (field, value) = match text.find(':') {
            Some(i) => {
                let v = &text[i + 1..];
                (&text[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&text[..], ""),
        };
        if field == "data" {
            match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            }
        }
        // event:, id:, retry: and unknown fields are ignored.
    }
}
