#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod cli;
mod connect;
mod coordination;
mod exit;
mod guardian;
mod host;
mod inspect;
mod leader;
mod logging;
mod migrate;
mod output;
mod release;
mod render;
mod revoke;
mod run;
mod serve;
mod store;
mod tls;
mod waiters;
mod watch;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::exit::{FAILURE, Failure};
use crate::output::{print_listing, print_show};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(guardian::ARG) {
        return guardian::guard(&args[2..]);
    }
    let cli = Cli::parse();
    logging::install(&cli.verbosity);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&Failure::new(FAILURE, format!("cannot start: {e}"))),
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(failure) => fail(&failure),
    }
}

/// One line on stderr, and the failure's code.
fn fail(failure: &Failure) -> ExitCode {
    eprintln!("distlock: {}", failure.message);
    failure.exit_code()
}

/// Runs the subcommand on the store the URLs name.
async fn dispatch(cli: Cli) -> Result<ExitCode, Failure> {
    let store = store::connect(&cli.target).await?;
    // The server shares the store between its requests' tasks.
    let command = match cli.command {
        Command::Serve(args) => return serve::serve(std::sync::Arc::from(store), args).await,
        command => command,
    };
    let store = store.as_ref();
    match command {
        Command::Ls(args) => {
            let listing = store.list(&args.pattern, &args.scan).await?;
            print_listing(&listing, &args.pattern, cli.json)?;
            if listing.truncated && !cli.json {
                eprintln!("distlock: the listing stopped at the step limit");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Show(args) => {
            let locks = store.describe(&args.name).await?;
            print_show(&args.name, &locks, cli.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Release(args) => release::release(store, &args, cli.json).await,
        Command::Revoke(args) => revoke::revoke(store, &args, cli.json).await,
        Command::Run(args) if args.leader => leader::run(store, args).await,
        Command::Run(args) => run::run(store, args).await,
        Command::Leader(args) => leader::show(store, &args, cli.json).await,
        Command::Watch(args) => watch::watch(store, &args, cli.json).await,
        Command::Migrate => migrate::migrate(store, cli.json).await,
        Command::Serve(_) => unreachable!("served above"),
    }
}
