"""Bias probes: known-truth calibration groups, permutations, surface perturbations and
self-preference groups (`design`, `perturb`), scored through the product's evaluators (`run`);
the figures are in `judgelab.analysis.probes`."""
