"""Everything that writes what people read: report.md/html of the analysis and probes stages,
plots (PNGs and their CSVs), README's findings block and docs/REFERENCE_AUDIT.md.

Built from `judgelab.analysis`' dicts and tables only; this layer imports `judgelab.analysis`,
never the reverse. `outputs.run_analysis` and `probes.run_probe_analysis` write each stage's
files; `format` holds the number, CI and table formatting every report shares.
"""
