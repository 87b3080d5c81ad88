"""Explain the gap: where each framework spends its step, by category of operation."""
