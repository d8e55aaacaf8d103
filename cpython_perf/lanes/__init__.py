"""The packaging lanes: the one patch series in the forms packagers take (series_forms), Debian's own
source packages fetched and verified (source_packages), and binary packages built with Debian's own
debian/rules, installed and checked (lane_run, the phases in order)."""
