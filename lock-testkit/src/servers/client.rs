//! A tiny synchronous client for one-off commands.

use std::collections::HashMap;
use std::io;
use std::time::Duration;

use redis::{IntoConnectionInfo, RedisError, Value};

/// Sends one command to `target` (a URL, or connection info carrying TLS
/// settings) and returns the raw reply. Connecting, sending and reading are
/// each bounded by `timeout`.
pub(crate) fn query(
    target: impl IntoConnectionInfo,
    args: &[&str],
    timeout: Duration,
) -> io::Result<Value> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    query_bytes(target, &args, timeout)
}

/// Like [`query`], with binary-safe arguments (the first, the command name,
/// must be UTF-8).
pub(crate) fn query_bytes(
    target: impl IntoConnectionInfo,
    args: &[&[u8]],
    timeout: Duration,
) -> io::Result<Value> {
    let (name, rest) = args.split_first().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "empty command: no arguments")
    })?;
    let name = std::str::from_utf8(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "command name is not UTF-8"))?;
    // A zero socket timeout is rejected by std; treat it as "as short as possible".
    let timeout = timeout.max(Duration::from_millis(1));
    let client = redis::Client::open(target).map_err(to_io)?;
    let mut con = client.get_connection_with_timeout(timeout).map_err(to_io)?;
    con.set_read_timeout(Some(timeout)).map_err(to_io)?;
    con.set_write_timeout(Some(timeout)).map_err(to_io)?;
    let mut cmd = redis::cmd(name);
    for arg in rest {
        cmd.arg(*arg);
    }
    cmd.query::<Value>(&mut con).map_err(to_io)
}

/// The elements of an array reply, each as raw bytes (bulk and status
/// strings; other elements are skipped).
pub(crate) fn byte_strings(value: &Value) -> Vec<Vec<u8>> {
    let items: &[Value] = match value {
        Value::Array(items) | Value::Set(items) => items,
        _ => &[],
    };
    items
        .iter()
        .filter_map(|item| match item {
            Value::BulkString(bytes) => Some(bytes.clone()),
            Value::SimpleString(s) => Some(s.clone().into_bytes()),
            _ => None,
        })
        .collect()
}

/// Reads a reply made of records, such as `SENTINEL REPLICAS`: an array whose
/// elements are flat `field, value, ...` arrays (RESP2) or maps (RESP3).
pub(crate) fn records(value: &Value) -> Vec<HashMap<String, String>> {
    let items: &[Value] = match value {
        Value::Array(items) | Value::Set(items) => items,
        _ => &[],
    };
    items
        .iter()
        .map(|item| match item {
            Value::Map(pairs) => pairs.iter().map(|(k, v)| (render(k), render(v))).collect(),
            Value::Array(fields) => fields
                .chunks_exact(2)
                .map(|kv| (render(&kv[0]), render(&kv[1])))
                .collect(),
            _ => HashMap::new(),
        })
        .collect()
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
