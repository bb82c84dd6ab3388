//! The child's side of [`crate::child`]: this binary started with `--child ROLE` runs that
//! role with the parameters of its command line and prints its report as the last line on
//! stdout. The dispatch to the roles lives here, above them, so that the process protocol in
//! `child` never calls up into the roles that use it.

use std::process::ExitCode;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::child::{Role, say};
use crate::cli::Cli;

/// The child's side: runs `role` with the parameters of the command line and prints its report
/// as the last line on stdout.
pub(crate) fn serve(cli: &Cli, role: Role) -> ExitCode {
    let result = (|| {
        let url = cli.child_url.as_deref().ok_or("--child-url is missing")?;
        let params = cli
            .child_params
            .as_deref()
            .ok_or("--child-params is missing")?;
        let runtime = cli.runtime.runtime().map_err(|e| e.to_string())?;
        match role {
            Role::Renewal => report(runtime.block_on(crate::renewal::child(url, parse(params)?))),
            Role::Fairness => report(runtime.block_on(crate::fairness::child(url, parse(params)?))),
        }
    })();
    match result {
        Ok(line) => {
            say(&line);
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

fn parse<P: DeserializeOwned>(params: &str) -> Result<P, String> {
    serde_json::from_str(params).map_err(|e| format!("bad --child-params: {e}"))
}

fn report<R: Serialize>(result: Result<R, String>) -> Result<String, String> {
    serde_json::to_string(&result?).map_err(|e| e.to_string())
}
