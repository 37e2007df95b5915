//! The tag-length-value encoding shared by signed statements (see
//! `testdata/SIGNED_STATEMENTS.md`): `tag, u32 big-endian length, bytes`, after a domain string
//! and one zero byte. The reader refuses anything that is not exactly canonical.

use super::StatementError;

/// Writes fields after a domain prefix.
#[derive(Debug)]
pub(crate) struct Writer {
    out: Vec<u8>,
}

impl Writer {
    /// A statement of `domain` (prefix and separator written), or a record (empty domain).
    pub(crate) fn new(domain: &str) -> Writer {
        let mut out = Vec::with_capacity(256);
        if !domain.is_empty() {
            out.extend_from_slice(domain.as_bytes());
            out.push(0);
        }
        Writer { out }
    }

    /// Appends one field.
    pub(crate) fn field(&mut self, tag: u8, value: &[u8]) -> &mut Writer {
        self.out.push(tag);
        // Values are bounded by the types that produce them (well under 4 GiB).
        let len = u32::try_from(value.len()).unwrap_or(u32::MAX);
        self.out.extend_from_slice(&len.to_be_bytes());
        self.out.extend_from_slice(value);
        self
    }

    /// The bytes written.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }
}

/// Reads fields after a domain prefix, in order.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader of a statement of `domain`, or of a record (empty domain).
    pub(crate) fn new(bytes: &'a [u8], domain: &str) -> Result<Reader<'a>, StatementError> {
        if domain.is_empty() {
            return Ok(Reader { rest: bytes });
        }
        let rest = bytes
            .strip_prefix(domain.as_bytes())
            .and_then(|r| r.strip_prefix(&[0]))
            .ok_or(StatementError::Domain)?;
        Ok(Reader { rest })
    }

    fn peek_tag(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    fn take(&mut self) -> Result<(u8, &'a [u8]), StatementError> {
        let malformed = StatementError::Malformed;
        let (&tag, rest) = self.rest.split_first().ok_or(malformed)?;
        let (len, rest) = rest.split_first_chunk::<4>().ok_or(malformed)?;
        let len = usize::try_from(u32::from_be_bytes(*len)).map_err(|_| malformed)?;
        if rest.len() < len {
            return Err(malformed);
        }
        let (value, rest) = rest.split_at(len);
        self.rest = rest;
        Ok((tag, value))
    }

    /// The value of the required field `tag`, which must come next.
    pub(crate) fn required(
        &mut self,
        tag: u8,
        name: &'static str,
    ) -> Result<&'a [u8], StatementError> {
        if self.peek_tag() != Some(tag) {
            return Err(StatementError::Field(name));
        }
        Ok(self.take()?.1)
    }

    /// The values of the repeated field `tag` that come next (possibly none).
    pub(crate) fn repeated(&mut self, tag: u8) -> Result<Vec<&'a [u8]>, StatementError> {
        let mut values = Vec::new();
        while self.peek_tag() == Some(tag) {
            values.push(self.take()?.1);
        }
        Ok(values)
    }

    /// Succeeds only when every byte was read.
    pub(crate) fn end(self) -> Result<(), StatementError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(StatementError::Malformed)
        }
    }
}

/// UTF-8 text of a field.
pub(crate) fn text<'a>(value: &'a [u8], name: &'static str) -> Result<&'a str, StatementError> {
    std::str::from_utf8(value).map_err(|_| StatementError::Field(name))
}

/// A canonical decimal (no sign, no leading zeros) of at most `u128`.
pub(crate) fn decimal(value: &[u8], name: &'static str) -> Result<u128, StatementError> {
    crate::amount::Amount::parse(text(value, name)?)
        .map(crate::amount::Amount::get)
        .map_err(|_| StatementError::Field(name))
}

/// A canonical decimal of at most `u64`.
pub(crate) fn decimal_u64(value: &[u8], name: &'static str) -> Result<u64, StatementError> {
    u64::try_from(decimal(value, name)?).map_err(|_| StatementError::Field(name))
}

/// A lowercase hyphenated UUID.
pub(crate) fn uuid(value: &[u8], name: &'static str) -> Result<uuid::Uuid, StatementError> {
    let text = text(value, name)?;
    let parsed = uuid::Uuid::parse_str(text).map_err(|_| StatementError::Field(name))?;
    if parsed.hyphenated().to_string() != text {
        return Err(StatementError::Field(name));
    }
    Ok(parsed)
}
