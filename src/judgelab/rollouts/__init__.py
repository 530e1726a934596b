"""Candidates, and where each comes from: k samples per task from the policy through a
resumable cache (`generate`), imported files (`imported`), known-truth contrast groups of a
reference and its mutants (`contrast`, `perturb`), each candidate's origin (`origins`); and the
other text the policy writes, AutoRL's task requests (`autorl`)."""
