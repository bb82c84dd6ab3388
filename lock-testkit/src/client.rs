//! A tiny synchronous client for one-off commands.

use std::io;
use std::time::Duration;

use redis::{RedisError, Value};

/// Sends one command to `url` and returns the raw reply. Connecting, sending
/// and reading are each bounded by `timeout`.
pub(crate) fn query(url: &str, args: &[&str], timeout: Duration) -> io::Result<Value> {
    let (name, rest) = args.split_first().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "empty command: no arguments")
    })?;
    // A zero socket timeout is rejected by std; treat it as "as short as possible".
    let timeout = timeout.max(Duration::from_millis(1));
    let client = redis::Client::open(url).map_err(to_io)?;
    let mut con = client.get_connection_with_timeout(timeout).map_err(to_io)?;
    con.set_read_timeout(Some(timeout)).map_err(to_io)?;
    con.set_write_timeout(Some(timeout)).map_err(to_io)?;
    let mut cmd = redis::cmd(name);
    for arg in rest {
        cmd.arg(*arg);
    }
    cmd.query::<Value>(&mut con).map_err(to_io)
}

/// Renders a reply as text: status and bulk strings as themselves, integers
/// in decimal, nil as `(nil)`, aggregates one element per line (flattened),
/// nested errors as `(error) ...`.
pub(crate) fn render(value: &Value) -> String {
    let mut lines = Vec::new();
    render_into(value, &mut lines);
    lines.join("\n")
}

fn render_into(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Nil => out.push("(nil)".to_owned()),
        Value::Int(i) => out.push(i.to_string()),
        Value::BulkString(bytes) => out.push(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => out.push(s.clone()),
        Value::Okay => out.push("OK".to_owned()),
        Value::Array(items) | Value::Set(items) => {
            for item in items {
                render_into(item, out);
            }
        }
        Value::Map(pairs) => {
            for (k, v) in pairs {
                render_into(k, out);
                render_into(v, out);
            }
        }
        Value::Attribute { data, .. } => render_into(data, out),
        Value::Double(d) => out.push(d.to_string()),
        Value::Boolean(b) => out.push(b.to_string()),
        Value::VerbatimString { text, .. } => out.push(text.clone()),
        Value::Push { data, .. } => {
            for item in data {
                render_into(item, out);
            }
        }
        Value::ServerError(err) => out.push(format!("(error) {err}")),
        other => out.push(format!("{other:?}")),
    }
}

/// Converts a client error, keeping timeouts and refusals recognisable.
pub(crate) fn to_io(err: RedisError) -> io::Error {
    let kind = if err.is_timeout() {
        io::ErrorKind::TimedOut
    } else if err.is_connection_refusal() {
        io::ErrorKind::ConnectionRefused
    } else {
        io::ErrorKind::Other
    };
    io::Error::new(kind, err.to_string())
}
