"""Side-by-side benchmarks: ours against the real tool, measured in one run, printed as ratios."""
