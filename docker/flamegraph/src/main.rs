// `perf script` text on stdin -> flame graph SVG on stdout; the first argument is the title.
// Collapse and rendering are inferno's (collapse::perf::Folder, flamegraph::from_reader).
//
// `--diff BEFORE AFTER TITLE`: two collapsed-stack files -> a differential flame graph on stdout
// (inferno::differential, BEFORE's counts scaled to AFTER's total): the frames are AFTER's, red where a
// stack grew, blue where it shrank.
use inferno::collapse::perf::{Folder, Options as CollapseOptions};
use inferno::collapse::Collapse;
use inferno::differential;
use inferno::flamegraph::{self, Options};
use std::io::{self, BufReader, Read, Write};

fn render(title: String, folded: &[u8]) -> io::Result<()> {
    let mut options = Options::default();
    options.title = title;
    let mut out = io::stdout().lock();
    flamegraph::from_reader(&mut options, BufReader::new(folded), &mut out)
        .map_err(|e| io::Error::new(io::ErrorKind::Other, e.to_string()))?;
    out.flush()
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--diff") {
        if args.len() != 5 {
            eprintln!("usage: cpython-perf-flamegraph --diff BEFORE.folded AFTER.folded TITLE");
            std::process::exit(2);
        }
        let mut diff_options = differential::Options::default();
        diff_options.normalize = true;
        let mut folded = Vec::new();
        differential::from_files(diff_options, &args[2], &args[3], &mut folded)?;
        if folded.is_empty() {
            eprintln!("cpython-perf-flamegraph: no stack in {} or {}", args[2], args[3]);
            std::process::exit(2);
        }
        return render(args[4].clone(), &folded);
    }
    let title = args.get(1).cloned().unwrap_or_else(|| "Flame Graph".to_string());
    let mut input = Vec::new();
    io::stdin().read_to_end(&mut input)?;
    let mut folded = Vec::new();
    Folder::from(CollapseOptions::default()).collapse(&input[..], &mut folded)?;
    if folded.is_empty() {
        eprintln!("cpython-perf-flamegraph: no stack in the input (is it `perf script` output of a -g recording?)");
        std::process::exit(2);
    }
    render(title, &folded)
}
