"""Candidate generation: k samples per task from the policy, through a resumable cache."""
