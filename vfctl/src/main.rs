//! The `vfctl` binary: [`vfctl::run`] with the process's arguments, stdout and stderr.

use std::io::IsTerminal;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut out = std::io::stdout();
    let mut err = std::io::stderr();
    let tty = err.is_terminal();
    let code = vfctl::run(
        std::env::args_os(),
        &mut vfctl::Io {
            out: &mut out,
            err: &mut err,
            tty,
        },
    )
    .await;
    std::process::exit(code);
}
