// `perf script` text on stdin -> flame graph SVG on stdout; the first argument is the title.
// Collapse and rendering are inferno's (collapse::perf::Folder, flamegraph::from_reader).
use inferno::collapse::perf::{Folder, Options as CollapseOptions};
use inferno::collapse::Collapse;
use inferno::flamegraph::{self, Options};
use std::io::{self, BufReader, Read, Write};

fn main() -> io::Result<()> {
    let title = std::env::args().nth(1).unwrap_or_else(|| "Flame Graph".to_string());
    let mut input = Vec::new();
    io::stdin().read_to_end(&mut input)?;
    let mut folded = Vec::new();
    Folder::from(CollapseOptions::default()).collapse(&input[..], &mut folded)?;
    if folded.is_empty() {
        eprintln!("cpython-perf-flamegraph: no stack in the input (is it `perf script` output of a -g recording?)");
        std::process::exit(2);
    }
    let mut options = Options::default();
    options.title = title;
    let mut out = io::stdout().lock();
    flamegraph::from_reader(&mut options, BufReader::new(&folded[..]), &mut out)
        .map_err(|e| io::Error::new(io::ErrorKind::Other, e.to_string()))?;
    out.flush()
}
